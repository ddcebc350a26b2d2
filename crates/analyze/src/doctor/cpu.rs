//! Findings about where the CPU went: the verdict that the start is not I/O-bound when
//! it mostly runs.

use coldstart_trace::Nanos;

use crate::analysis::SegmentKind;
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

/// The functions most CPU samples of the start were in, in words: `parse_json (libapp.so) 41.0 %, …
/// of 812 samples`; `None` without samples.
fn hottest_code(f: &Facts) -> Option<String> {
    let profile = f.a.cpu_profile.as_ref().filter(|p| p.samples > 0 && !p.functions.is_empty())?;
    let named: Vec<String> = profile
        .functions
        .iter()
        .take(HOTTEST_NAMED)
        .map(|c| {
            format!("{} ({}) {}", c.name, c.library, percent(c.self_samples as f64, profile.samples as f64))
        })
        .collect();
    Some(format!("{} of {} samples", named.join(", "), count(profile.samples)))
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
            Some(_) => format!("coldstart bench -- {}", f.command),
            None => format!("perf record -g -- {} && perf report", f.command),
        },
        confidence: Confidence::High,
        caveat: None,
    }]
}
