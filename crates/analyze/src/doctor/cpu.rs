//! Findings about where the CPU went: the verdict that the start is not I/O-bound when
//! it mostly runs, and the call whose subtree holds most of the critical path's CPU
//! (inclusive time, as `perf report --children` shows it), with its library and what
//! inside it dominates: the allocator, the kernel (by what the thread did there), callees.

use coldstart_trace::Nanos;

use crate::analysis::SegmentKind;
use crate::analysis::{CpuShare, CpuSubtree, CpuTree, TreeScope};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{Audience, Confidence, Evidence, Figure, Finding, FindingKind, Gain};
use crate::units::{count, duration, percent};

/// Shares of the time to ready: (I/O wait, running or waiting for a CPU, of which waiting for a CPU).
fn shares(f: &Facts) -> Option<(f64, f64, f64, &'static str)> {
    let total = f.time_to_ready.max(1) as f64;
    if let Some(cp) = f.path {
        let sum = |kinds: &[SegmentKind]| -> Nanos {
            cp.segments.iter().filter(|s| kinds.contains(&s.kind)).map(|s| s.end_ns - s.start_ns).sum()
        };
        let io = sum(&[SegmentKind::IoWait]) as f64;
        let cpu = sum(&[SegmentKind::Cpu, SegmentKind::CpuWait]) as f64;
        let cpu_wait = sum(&[SegmentKind::CpuWait]) as f64;
        return Some((io / total, cpu / total, cpu_wait / total, "of the critical path"));
    }
    let s = &f.a.start;
    if !s.has_sched {
        return None;
    }
    let io = s.io_wait_ns as f64;
    let cpu = (s.cpu_ns + s.cpu_wait_ns) as f64;
    Some((io / total, cpu / total, s.cpu_wait_ns as f64 / total, "of the wall-clock time to ready"))
}

/// Functions named in the verdict.
const HOTTEST_NAMED: usize = 3;

/// Where the CPU samples of the start went, in words: the call whose subtree holds most
/// of them (`under xb_builder_compile (libxmlb.so.2) 61.6 % of the 1,444 samples on the
/// critical path`), else the functions most of them were under, else in; `None` without samples.
fn hottest_code(f: &Facts) -> Option<String> {
    let profile = f.a.cpu_profile.as_ref().filter(|p| p.samples > 0 && !p.functions.is_empty())?;
    let tree = &profile.tree;
    let of = match tree.scope {
        TreeScope::CriticalPath => format!("of the {} samples on the critical path", count(tree.samples)),
        TreeScope::Start => format!("of {} samples", count(tree.samples)),
    };
    if let Some(s) = &tree.subtree {
        return Some(format!(
            "most of the CPU under {} ({}), {} {of} (the cpu_subtree finding says what is inside it)",
            s.name,
            s.library,
            percent(s.samples as f64, tree.samples as f64)
        ));
    }
    let named = |rows: Vec<(String, String, u64)>, whole: u64| -> String {
        rows.iter()
            .take(HOTTEST_NAMED)
            .map(|(name, library, n)| format!("{name} ({library}) {}", percent(*n as f64, whole as f64)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !tree.inclusive.is_empty() {
        let rows = tree.inclusive.iter().map(|c| (c.name.clone(), c.library.clone(), c.samples)).collect();
        return Some(format!(
            "no one call holding most of it; most under {} {of}",
            named(rows, tree.samples)
        ));
    }
    let rows =
        profile.functions.iter().map(|c| (c.name.clone(), c.library.clone(), c.self_samples)).collect();
    Some(format!("most in {} of {} samples", named(rows, profile.samples), count(profile.samples)))
}

pub(crate) fn not_io_bound(f: &Facts) -> Vec<Finding> {
    let Some((io, cpu, cpu_wait, of_what)) = shares(f) else { return Vec::new() };
    if io > f.config.not_io_bound_max_io_share
        || cpu < f.config.not_io_bound_min_cpu_share
        || f.time_to_ready <= 0
    {
        return Vec::new();
    }
    let pct = |x: f64| percent(x, 1.0);
    let busy = if cpu_wait >= 0.2 * cpu {
        format!(
            " {} was waiting for a CPU: the machine was busy with other work, or the start runs more threads than \
             there are CPUs ({}); measure on a quiet machine before profiling that part.",
            pct(cpu_wait),
            count(u64::from(f.a.trace.cpu_count))
        )
    } else {
        String::new()
    };
    let ns = |share: f64| (share * f.time_to_ready as f64) as Nanos;
    let hottest = hottest_code(f);
    vec![Finding {
        kind: FindingKind::NotIoBound,
        title: format!("Not I/O-bound: {} {of_what} is CPU, {} waits for the disk", pct(cpu), pct(io)),
        evidence: Evidence {
            summary: format!(
                "{} {of_what} ({} to ready) runs or waits for a CPU and {} waits for I/O: a faster disk or a prefetch \
                 can save at most {}",
                pct(cpu),
                duration(f.time_to_ready),
                pct(io),
                duration(ns(io))
            ),
            files: Vec::new(),
            files_total: 0,
            processes: Vec::new(),
            figures: vec![
                Figure::ratio("cpu_share", cpu),
                Figure::ratio("cpu_wait_share", cpu_wait),
                Figure::ratio("io_share", io),
                Figure::ns("time_to_ready_ns", f.time_to_ready),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: 0,
            formula: "0".to_owned(),
            text: format!(
                "no I/O gain is estimated: at most {} of I/O wait could go, a CPU profile says where the other {} goes",
                duration(ns(io)),
                duration(ns(cpu))
            ),
            inputs: vec![Figure::ratio("io_share", io), Figure::ratio("cpu_share", cpu)],
            ahead_ns: None,
        },
        audience: Audience::Developers,
        suggestion: match &hottest {
            Some(code) => format!(
                "Look at the code that runs, not the disk: the CPU samples put {code}; see them all with \
                 `coldstart report TRACE --format flamegraph -o flame.svg`.{busy}"
            ),
            None => format!(
                "Profile the CPU instead of the disk: `perf record -g -- {}`{}, then look at what runs before \
                 ready.{busy}",
                f.command,
                if f.command.contains("python") {
                    " (or py-spy, or `python3 -X importtime` for the imports)"
                } else {
                    " (or a profiler of the program's language)"
                }
            ),
        },
        verify: match &hottest {
            Some(_) => f.verify_start().bench(""),
            None => format!("perf record -g -- {} && perf report", f.command),
        },
        confidence: Confidence::High,
        caveat: None,
    }]
}

/// Time the critical path spent on a CPU (its CPU segments), or without a path the start's
/// CPU time of all threads.
fn cpu_time(f: &Facts, scope: TreeScope) -> Nanos {
    match (scope, f.path) {
        (TreeScope::CriticalPath, Some(cp)) => cp
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::Cpu)
            .map(|s| s.end_ns - s.start_ns)
            .fold(0, Nanos::saturating_add),
        _ => f.a.start.cpu_ns,
    }
}

/// `name 42.0 %, …` for the first `n` of `rows`, shares of `whole`.
fn listed(rows: &[CpuShare], n: usize, whole: u64) -> String {
    rows.iter()
        .take(n)
        .map(|r| format!("{} {}", r.name, percent(r.samples as f64, whole as f64)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// At least this share of the subtree in the allocator, or in the kernel, gets its own advice.
const NOTABLE_SHARE: f64 = 0.2;

/// What to change, from what is inside the subtree.
fn subtree_advice(s: &CpuSubtree, share: f64) -> String {
    let mut advice = format!(
        "Look at {} in {}: it holds {} of the critical path's CPU. ",
        s.name,
        s.library,
        percent(share, 1.0)
    );
    let whole = s.samples as f64;
    if s.allocator_samples as f64 >= NOTABLE_SHARE * whole {
        advice += &format!(
            "{} of it is in the allocator ({}): allocate less — reuse buffers, put small temporary objects \
             on the stack or in one arena, do not zero-fill memory that is written anyway. ",
            percent(s.allocator_samples as f64, whole),
            s.allocator.iter().take(3).map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")
        );
    }
    let faults = s.kernel.iter().find(|k| k.name == "page fault").map_or(0, |k| k.samples);
    if faults as f64 >= NOTABLE_SHARE * whole {
        advice += &format!(
            "{} of it is page faults: it touches much memory for the first time; use less, or reuse it. ",
            percent(faults as f64, whole)
        );
    }
    advice
        + "If what it computes outlives the start (a cache, a compiled index), build it once and keep it — at \
           install or update time, or after the first window is shown — so that a start only loads it; \
           otherwise make it cheaper, profiling it alone (`perf record --call-graph dwarf`)."
}

/// The call whose subtree holds most of the critical path's CPU samples (the deepest that
/// still does, generic frames and the allocator aside), with its library, its share, and
/// what inside it dominates. Gain: its share of the critical path's CPU time, if that work
/// were done before the start (cached from an earlier one) or made nearly free.
pub(crate) fn cpu_subtree(f: &Facts) -> Vec<Finding> {
    let Some(profile) = &f.a.cpu_profile else { return Vec::new() };
    let CpuTree { scope, samples: whole, subtree: Some(s), .. } = &profile.tree else { return Vec::new() };
    // An address no symbol named is no call anyone can act on (an interpreter's loop, often):
    // the unsymbolized-frames warning says how to get names.
    if *whole < f.config.cpu_subtree_min_samples || is_unnamed(&s.name) {
        return Vec::new();
    }
    let share = s.samples as f64 / *whole as f64;
    let cpu_ns = cpu_time(f, *scope);
    let gain = (share * cpu_ns as f64) as Nanos;
    if gain < f.min_gain {
        return Vec::new();
    }
    let of_what = match scope {
        TreeScope::CriticalPath => "the critical path's CPU",
        TreeScope::Start => "the start's CPU (no critical path: all threads)",
    };
    let inside = s.samples as f64;
    let called_from = match s.called_from.first() {
        Some(_) => format!(
            ", called from {}",
            s.called_from.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(" ← ")
        ),
        None => String::new(),
    };
    let allocator = match s.allocator_samples {
        0 => String::new(),
        n => format!(
            "{} in the allocator ({}); ",
            percent(n as f64, inside),
            listed(&s.allocator, 3, s.samples)
        ),
    };
    let kernel = match s.kernel_samples {
        0 => String::new(),
        n => format!("{} in the kernel ({}); ", percent(n as f64, inside), listed(&s.kernel, 3, s.samples)),
    };
    let unnamed = s.callees.iter().chain(&s.called_from).filter(|c| c.name.contains("+0x")).count();
    vec![Finding {
        kind: FindingKind::CpuSubtree,
        title: format!(
            "{} ({}) holds {} of {of_what}, {}{}",
            s.name,
            s.library,
            percent(share, 1.0),
            duration(gain),
            if s.allocator_samples as f64 >= NOTABLE_SHARE * inside {
                format!("; {} of it in the allocator", percent(s.allocator_samples as f64, inside))
            } else {
                String::new()
            }
        ),
        evidence: Evidence {
            summary: format!(
                "{} of the {} CPU samples of {} are under {} ({}){called_from}; inside it: {allocator}{kernel}\
                 its callees {}",
                count(s.samples),
                count(*whole),
                match scope {
                    TreeScope::CriticalPath => "the critical path",
                    TreeScope::Start => "the start",
                },
                s.name,
                s.library,
                listed(&s.callees, 4, s.samples)
            ),
            figures: vec![
                Figure::count("subtree_samples", s.samples),
                Figure::count("samples", *whole),
                Figure::ratio("subtree_share", share),
                Figure::ratio("allocator_share", s.allocator_samples as f64 / inside),
                Figure::ratio("kernel_share", s.kernel_samples as f64 / inside),
                Figure::ns("cpu_ns", cpu_ns),
            ],
            ..Evidence::default()
        },
        gain: Gain {
            ns: gain,
            formula: "subtree_share * cpu_ns".to_owned(),
            text: format!(
                "{} of {} of CPU = {}, if that work were done before the start (kept from an earlier one) or cost \
                 nearly nothing",
                percent(share, 1.0),
                duration(cpu_ns),
                duration(gain)
            ),
            inputs: vec![Figure::ratio("subtree_share", share), Figure::ns("cpu_ns", cpu_ns)],
            ahead_ns: None,
        },
        audience: Audience::Developers,
        suggestion: subtree_advice(s, share),
        verify: format!(
            "{}  # before and after; `coldstart report TRACE --format flamegraph -o flame.svg` shows the subtree",
            f.bench_command()
        ),
        confidence: match scope {
            TreeScope::CriticalPath => Confidence::Medium,
            TreeScope::Start => Confidence::Low,
        },
        caveat: Some(format!(
            "the samples show where the CPU went, not whether that work is needed at every start{}",
            if unnamed > 0 {
                "; frames without a name (`file+0x…`) need the files' debug symbols (see the warnings)"
            } else {
                ""
            }
        )),
    }]
}

/// A frame named by its object and offset (`python3.11+0x247d96`), not by a symbol.
fn is_unnamed(frame: &str) -> bool {
    frame.contains("+0x")
}
