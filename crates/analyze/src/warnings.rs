//! Checks of the trace's data that the reader of any report must hear about: lost
//! events, unresolved or unknown files, scheduler gaps, events out of range. They
//! never stop the analysis.

use coldstart_trace::{FileKind, Nanos, StackIndex, Trace};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{Warning, WarningCode};
use crate::context::Ctx;
use crate::time::SchedAnomalies;
use crate::units;

fn warn(out: &mut Vec<Warning>, code: WarningCode, count: u64, message: String) {
    out.push(Warning { code, count, message });
}

/// Counts of file problems, shared with the overview.
pub(crate) struct FileProblems {
    pub unresolved_files: u64,
    pub fills_without_file: u64,
}

pub(crate) fn check(ctx: &Ctx, end: Nanos, sched: &SchedAnomalies, out: &mut Vec<Warning>) -> FileProblems {
    let trace = ctx.trace;
    for loss in trace.losses.iter().filter(|l| l.count > 0) {
        let message = format!("{} lost: {} {}", loss.source, units::count(loss.count), loss.what);
        warn(out, WarningCode::Lost, loss.count, message);
    }
    if trace.meta.partial {
        let message =
            "the trace was recovered from a recorder that did not finish: its end is missing".to_owned();
        warn(out, WarningCode::Partial, 1, message);
    }

    let (mut fills_without_file, mut unknown_ids) = (0u64, FxHashSet::default());
    let (mut unresolved, mut unresolved_pages) = (FxHashSet::default(), 0u64);
    for g in 0..ctx.fills_by_stream.len() {
        let (_, id) = ctx.fills_by_stream.key(g);
        let rows = ctx.fills_by_stream.rows(g);
        match ctx.file(id) {
            None => {
                fills_without_file += rows.len() as u64;
                unknown_ids.insert(id);
            }
            // Metadata and a filesystem's own reserved inodes (kind other) have no path to find.
            Some(f) if f.path.is_none() && !matches!(f.kind, FileKind::DeviceMetadata | FileKind::Other) => {
                unresolved.insert(id);
                unresolved_pages += rows
                    .iter()
                    .map(|&r| u64::from(trace.page_fills[r as usize].pages))
                    .fold(0, u64::saturating_add);
            }
            Some(_) => {}
        }
    }
    if fills_without_file > 0 {
        let message = format!(
            "{} page fills name {} file ids that have no file row",
            units::count(fills_without_file),
            units::count(unknown_ids.len() as u64)
        );
        warn(out, WarningCode::UnknownFile, fills_without_file, message);
    }
    if !unresolved.is_empty() {
        let message = format!(
            "{} read ({}) {} never resolved to a path",
            units::plural(unresolved.len() as u64, "file"),
            units::bytes(ctx.bytes(unresolved_pages)),
            if unresolved.len() == 1 { "was" } else { "were" }
        );
        warn(out, WarningCode::UnresolvedFile, unresolved.len() as u64, message);
    }

    if trace.sched.is_empty() {
        let message =
            "no scheduler data: no time breakdown, I/O wait attribution or critical path".to_owned();
        warn(out, WarningCode::NoSched, 0, message);
    }
    if sched.gaps > 0 {
        let message = format!(
            "{} between scheduler intervals of a thread (longer than {}), {} in all: events were lost",
            units::plural(sched.gaps, "gap"),
            units::duration(ctx.config.sched_gap_ns),
            units::duration(sched.gap_ns)
        );
        warn(out, WarningCode::SchedGap, sched.gaps, message);
    }
    if sched.overlaps + sched.inverted > 0 {
        let message = format!(
            "{} overlap the previous interval of their thread and {} end before they start",
            units::plural(sched.overlaps, "scheduler interval"),
            units::count(sched.inverted)
        );
        warn(out, WarningCode::SchedOverlap, sched.overlaps + sched.inverted, message);
    }

    let outside = |t: Nanos| t < 0 || (end > 0 && t > end);
    let counts = [
        ("page fills", trace.page_fills.iter().filter(|f| outside(f.t_ns)).count()),
        (
            "scheduler intervals",
            trace.sched.iter().filter(|s| outside(s.start_ns) || outside(s.end_ns)).count(),
        ),
        ("wakeups", trace.wakeups.iter().filter(|w| outside(w.t_ns)).count()),
        (
            "block requests",
            trace
                .block_ios
                .iter()
                .filter(|b| b.issue_ns.is_some_and(outside) || b.complete_ns.is_some_and(outside))
                .count(),
        ),
        ("marks", trace.marks.iter().filter(|m| outside(m.t_ns)).count()),
    ];
    for (what, n) in counts.into_iter().filter(|c| c.1 > 0) {
        let message = format!(
            "{} {what} are timed before t = 0 or after the end of the recording",
            units::count(n as u64)
        );
        warn(out, WarningCode::OutOfRange, n as u64, message);
    }
    unsymbolized(trace, out);
    FileProblems { unresolved_files: unresolved.len() as u64, fills_without_file }
}

/// Files named in the warning about unnamed frames.
const UNNAMED_FILES_LISTED: usize = 4;

/// CPU samples with user frames no symbol named, when they are at least 1 % of the samples:
/// frames in a stripped file (named with its debug symbols) and frames in no file (JIT
/// code, or a stack unwound wrong), with the fix.
fn unsymbolized(trace: &Trace, out: &mut Vec<Warning>) {
    if trace.stack_samples.is_empty() {
        return;
    }
    let index = StackIndex::new(trace);
    let mut by_stack: FxHashMap<Option<u32>, (Vec<String>, bool)> = FxHashMap::default();
    let (mut samples, mut outside) = (0u64, 0u64);
    let mut by_file: FxHashMap<String, u64> = FxHashMap::default();
    for s in &trace.stack_samples {
        let (files, in_no_file) = by_stack.entry(s.stack_id).or_insert_with(|| {
            let unnamed: Vec<_> =
                index.frames(s.stack_id).into_iter().filter(|f| !f.kernel && f.symbol.is_none()).collect();
            let mut files: Vec<String> =
                unnamed.iter().filter_map(|f| index.mapping(f)).map(|m| m.path.clone()).collect();
            files.sort_unstable();
            files.dedup();
            (files, unnamed.iter().any(|f| index.mapping(f).is_none()))
        });
        if files.is_empty() && !*in_no_file {
            continue;
        }
        samples += 1;
        outside += u64::from(*in_no_file);
        for file in files.iter() {
            *by_file.entry(file.clone()).or_default() += 1;
        }
    }
    let total = trace.stack_samples.len() as u64;
    if samples == 0 || samples * 100 < total {
        return;
    }
    let mut files: Vec<(String, u64)> = by_file.into_iter().collect();
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut message = format!(
        "{} of {} CPU samples ({}) have frames no symbol names",
        units::count(samples),
        units::count(total),
        units::percent(samples as f64, total as f64)
    );
    if !files.is_empty() {
        let listed: Vec<String> = files
            .iter()
            .take(UNNAMED_FILES_LISTED)
            .map(|(path, n)| format!("{} {}", units::base_name(path), units::count(*n)))
            .collect();
        message += &format!(
            ", in {} ({}{}): they are stripped; install their debug symbols (Debian and Ubuntu: the \
             package's -dbgsym from the debug archive, e.g. `apt install PACKAGE-dbgsym`, where `dpkg -S {}` names \
             PACKAGE; `debuginfod-find debuginfo FILE`), or record again with DEBUGINFOD_URLS set (e.g. \
             https://debuginfod.debian.net): coldstart then looks them up by build id",
            units::plural(files.len() as u64, "file"),
            listed.join(", "),
            if files.len() > UNNAMED_FILES_LISTED { ", …" } else { "" },
            files[0].0
        );
    }
    if outside > 0 {
        message += &format!(
            "; {} have frames in no mapped file (code generated at run time, or a stack unwound wrong), which no \
             symbols name",
            units::count(outside)
        );
    }
    warn(out, WarningCode::Unsymbolized, samples, message);
}
