//! Findings about what the critical path does when it neither runs nor reads:
//! idle waits (fixed sleeps, timeouts, waits on daemons outside the trace), and the
//! verdict that the start is not I/O-bound when it mostly runs.

use coldstart_trace::Nanos;

use crate::analysis::SegmentKind;
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{count, duration, percent, plural};

pub(crate) fn idle_waits(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    let waits: Vec<&crate::PathSegment> = cp
        .segments
        .iter()
        .filter(|s| matches!(s.kind, SegmentKind::Sleep | SegmentKind::WaitUntraced))
        .filter(|s| s.end_ns - s.start_ns >= f.config.idle_min_wait_ns)
        .collect();
    let gain: Nanos = waits.iter().map(|s| s.end_ns - s.start_ns).sum();
    if gain < f.min_gain {
        return Vec::new();
    }
    let sleep: Nanos =
        waits.iter().filter(|s| s.kind == SegmentKind::Sleep).map(|s| s.end_ns - s.start_ns).sum();
    let untraced = gain - sleep;
    let mut pids: Vec<i32> = waits.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut longest: Vec<&&crate::PathSegment> = waits.iter().collect();
    longest.sort_by(|a, b| {
        (b.end_ns - b.start_ns).cmp(&(a.end_ns - a.start_ns)).then(a.start_ns.cmp(&b.start_ns))
    });
    longest.truncate(f.config.max_listed);
    longest.sort_by_key(|s| s.start_ns);
    let what = |s: &crate::PathSegment| match (s.kind, s.waker_tid) {
        (SegmentKind::WaitUntraced, Some(w)) => {
            format!("{}/{} waiting on thread {w}, outside the trace", f.a.comm(s.pid), s.tid)
        }
        _ => format!("{}/{} asleep: a timer, an interrupt, or no wakeup seen", f.a.comm(s.pid), s.tid),
    };
    vec![Finding {
        kind: FindingKind::IdleWaits,
        title: format!("{} idle on the critical path: no CPU, no I/O", duration(gain)),
        evidence: Evidence {
            summary: format!(
                "{} of at least {} on the critical path: {} asleep until a timer or an interrupt (fixed sleeps, \
                 timeouts, network replies), {} waiting on threads outside the trace (daemons, D-Bus services)",
                plural(waits.len() as u64, "wait"),
                duration(f.config.idle_min_wait_ns),
                duration(sleep),
                duration(untraced)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: pids
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: waits.iter().filter(|s| s.pid == pid).map(|s| s.end_ns - s.start_ns).sum(),
                    read_bytes: 0,
                    in_scope: true,
                })
                .collect(),
            figures: vec![
                Figure::count("waits", waits.len() as u64),
                Figure::ns("sleep_ns", sleep),
                Figure::ns("wait_untraced_ns", untraced),
            ],
            intervals: longest
                .iter()
                .map(|s| EvidenceInterval { start_ns: s.start_ns, end_ns: s.end_ns, tid: Some(s.tid), what: what(s) })
                .collect(),
        },
        gain: Gain {
            ns: gain,
            formula: "sleep_ns + wait_untraced_ns".to_owned(),
            text: format!(
                "{} asleep + {} waiting on untraced threads = {}, if nothing had to be waited for",
                duration(sleep),
                duration(untraced),
                duration(gain)
            ),
            inputs: vec![Figure::ns("sleep_ns", sleep), Figure::ns("wait_untraced_ns", untraced)],
            ahead_ns: None,
        },
        suggestion: "Find what each wait is for (strace -f -tt -e trace=nanosleep,clock_nanosleep,poll,select,\
                     connect,futex): replace fixed sleeps and polling with waiting for the event itself, make name \
                     lookups and other network calls asynchronous or cache their answers, and start the services the \
                     program waits for earlier (socket activation)."
            .to_owned(),
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(
            "the trace shows that the thread slept and who woke it, not why it slept; a wait may be needed (a \
             reply the program cannot do without)"
                .to_owned(),
        ),
    }]
}

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
        suggestion: format!(
            "Profile the CPU instead of the disk: `perf record -g -- {}`{}, then look at what runs before \
             ready.{busy}",
            f.command,
            if f.command.contains("python") {
                " (or py-spy, or `python3 -X importtime` for the imports)"
            } else {
                " (or a profiler of the program's language)"
            }
        ),
        verify: format!("perf record -g -- {} && perf report", f.command),
        confidence: Confidence::High,
        caveat: None,
    }]
}
