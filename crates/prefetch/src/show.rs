//! `prefetch show`: a plan as text for people: where it came from, how big it is
//! against what the start read, what it leaves out, then its files (and, when
//! asked, every range) in replay order.

use std::collections::HashMap;
use std::fmt::Write;

use crate::plan::{Plan, PlanFileKind, Step, UsedPagesFrom};

/// What to list after the summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShowOptions {
    /// List at most this many files (`None`: all).
    pub max_files: Option<usize>,
    /// List each file's ranges.
    pub ranges: bool,
}

/// The paths of the plan's regular files in replay order (of their first step), one
/// per line: a file list for other tools (e.g. `vmtouch`).
pub fn paths(plan: &Plan) -> String {
    let mut out = String::new();
    for f in replay_order(plan) {
        let file = &plan.files[f];
        if file.kind == PlanFileKind::Regular {
            let _ = writeln!(out, "{}", file.path);
        }
    }
    out
}

/// File indexes by their first step, then files without steps.
fn replay_order(plan: &Plan) -> Vec<usize> {
    let mut first_step: HashMap<usize, usize> = HashMap::new();
    for (i, step) in plan.steps.iter().enumerate() {
        if let Step::Range { file, .. } | Step::Open(file) = *step {
            first_step.entry(file).or_insert(i);
        }
    }
    let mut order: Vec<usize> = (0..plan.files.len()).collect();
    order.sort_by_key(|f| first_step.get(f).copied().unwrap_or(usize::MAX));
    order
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 { "–".into() } else { format!("{:.1}%", 100.0 * part as f64 / whole as f64) }
}

fn ms(ns: i64) -> String {
    format!("{:.1} ms", ns as f64 / 1e6)
}

/// The plan as text: its source, its size against what the start read, then its files.
pub fn render(plan: &Plan, options: ShowOptions) -> String {
    let mut out = String::new();
    write_source(&mut out, plan);
    write_summary(&mut out, plan);
    write_files(&mut out, plan, options);
    out
}

/// Where the plan came from and how its used pages were chosen.
fn write_source(out: &mut String, plan: &Plan) {
    let src = &plan.source;
    let _ = writeln!(
        out,
        "plan        format {} version {}, written by {}",
        plan.format, plan.version, plan.tool
    );
    match &src.fleet {
        Some(f) => {
            let _ = writeln!(
                out,
                "dataset     {} ({} traces from {} hosts{}; {})",
                f.dataset,
                f.traces,
                f.hosts,
                match f.builds.as_slice() {
                    [] => String::new(),
                    builds => format!(", builds {}", builds.join(" ")),
                },
                src.command.join(" ")
            );
            let _ = writeln!(
                out,
                "fleet       pages used by at least {} of the {} traces ({:.0} %)",
                f.min_traces,
                f.traces,
                f.min_share * 100.0
            );
        }
        None => {
            let _ = writeln!(out, "trace       {} ({} on {})", src.trace, src.command.join(" "), src.host);
        }
    }
    let used_from = match src.used_pages_from {
        UsedPagesFrom::Accesses => "page accesses (read, fault, map-around of filled pages)",
        UsedPagesFrom::Fills => {
            "page fills (FALLBACK: the trace has no page accesses; unused readahead included)"
        }
        UsedPagesFrom::WholeFiles => "whole files (--whole-files)",
    };
    let _ = writeln!(out, "used pages  from {used_from}");
}

/// The settings, contents and size of the plan against what the start read; what it left out.
fn write_summary(out: &mut String, plan: &Plan) {
    let s = &plan.stats;
    let st = &plan.settings;
    let _ = writeln!(
        out,
        "order       {}{}; gaps up to {} KiB merged while within {:.2}× what the start read; ranges up to {} KiB",
        st.order.name(),
        if st.order == crate::plan::Order::Blend {
            format!(" (windows of {})", ms(st.blend_window_ns))
        } else {
            String::new()
        },
        st.max_gap_bytes / 1024,
        st.max_size_ratio,
        st.max_range_bytes / 1024
    );
    let _ = writeln!(
        out,
        "contents    {} files ({} only opened), {} ranges, {} directories, {} steps",
        s.files,
        s.open_only_files,
        s.ranges,
        s.directories,
        plan.steps.len()
    );
    let _ = writeln!(
        out,
        "size        {} planned ({} of it filesystem metadata, {} read through gaps)",
        mib(s.planned_bytes),
        mib(s.planned_metadata_bytes),
        mib(s.gap_bytes)
    );
    let _ = writeln!(
        out,
        "the start   read {} into the page cache ({} metadata); used {} of the planned files ({} of it already cached)",
        mib(s.read_bytes),
        mib(s.read_metadata_bytes),
        mib(s.used_bytes),
        mib(s.used_cached_bytes)
    );
    let _ = writeln!(
        out,
        "coverage    plan / read {}; the plan covers {} of what the start read and {} of the pages it used",
        if s.read_bytes == 0 {
            "–".into()
        } else {
            format!("{:.2}×", s.planned_bytes as f64 / s.read_bytes as f64)
        },
        pct(s.planned_read_bytes, s.read_bytes),
        pct(s.planned_used_bytes, s.used_bytes)
    );
    for e in &s.excluded {
        let _ = writeln!(out, "left out    {} files, {} read: {}", e.files, mib(e.read_bytes), e.reason);
    }
    for n in &plan.notes {
        let _ = writeln!(out, "note        {n}");
    }
}

/// The files in replay order (at most `options.max_files`), with their ranges if asked.
fn write_files(out: &mut String, plan: &Plan, options: ShowOptions) {
    let order = replay_order(plan);
    let first_step: HashMap<usize, usize> = plan
        .steps
        .iter()
        .enumerate()
        .rev()
        .filter_map(|(i, s)| match *s {
            Step::Range { file, .. } | Step::Open(file) => Some((file, i)),
            Step::Directory(_) => None,
        })
        .collect();
    let shown = options.max_files.unwrap_or(order.len()).min(order.len());
    let _ = writeln!(out, "\nfiles in replay order (first step), {shown} of {}:", order.len());
    let _ = writeln!(out, "{:>6} {:>10} {:>7} {:>11}  path", "step", "KiB", "ranges", "first need");
    for &f in order.iter().take(shown) {
        let file = &plan.files[f];
        let bytes = file.ranges.iter().fold(0, |sum: u64, r| sum.saturating_add(r.length));
        let kind = if file.kind == PlanFileKind::BlockDevice { "  [metadata]" } else { "" };
        let _ = writeln!(
            out,
            "{:>6} {:>10} {:>7} {:>11}  {}{kind}",
            first_step.get(&f).map_or("-".into(), |s| s.to_string()),
            bytes / 1024,
            file.ranges.len(),
            ms(file.first_need_ns),
            file.path
        );
        if options.ranges {
            for r in &file.ranges {
                let at = match (r.disk, r.physical) {
                    (Some(d), Some(p)) => format!("disk {d} @ {p}"),
                    _ => "disk position unknown".into(),
                };
                let _ = writeln!(
                    out,
                    "{:>36}  offset {} length {} ({at})",
                    ms(r.first_need_ns),
                    r.offset,
                    r.length
                );
            }
        }
    }
    if shown < order.len() {
        let _ = writeln!(out, "… {} more (--all lists every file)", order.len() - shown);
    }
}
