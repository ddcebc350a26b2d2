//! Findings about what the critical path does when it neither runs nor reads:
//! idle waits (timer sleeps: fixed sleeps, timeouts, polling), the waits the recording
//! cannot explain (on processes outside its scope, without a wakeup or data), and the
//! verdict that the start is not I/O-bound when it mostly runs.

use coldstart_trace::Nanos;

use crate::analysis::{PathSegment, SegmentKind};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{count, duration, percent, plural};

/// The critical path's waits at least `idle_min_wait_ns` long, of the given kinds.
fn long_waits<'p>(f: &Facts<'p>, kinds: &[SegmentKind]) -> Vec<&'p PathSegment> {
    let Some(cp) = f.path else { return Vec::new() };
    cp.segments
        .iter()
        .filter(|s| kinds.contains(&s.kind))
        .filter(|s| s.end_ns - s.start_ns >= f.config.idle_min_wait_ns)
        .collect()
}

fn length(s: &PathSegment) -> Nanos {
    s.end_ns - s.start_ns
}

/// The longest of `waits`, at most `max_listed`, in time order, described by `what`.
fn longest(
    f: &Facts,
    waits: &[&PathSegment],
    what: impl Fn(&PathSegment) -> String,
) -> Vec<EvidenceInterval> {
    let mut longest: Vec<&PathSegment> = waits.to_vec();
    longest.sort_by(|a, b| length(b).cmp(&length(a)).then(a.start_ns.cmp(&b.start_ns)));
    longest.truncate(f.config.max_listed);
    longest.sort_by_key(|s| s.start_ns);
    longest
        .iter()
        .map(|s| EvidenceInterval { start_ns: s.start_ns, end_ns: s.end_ns, tid: Some(s.tid), what: what(s) })
        .collect()
}

/// Sleeps on the critical path that a timer or an interrupt ended, with no other thread
/// involved: fixed sleeps, timeouts, polling. Only those: waits on other processes, and
/// time the walk could not explain, are [`unexplained_waits`], which claims no gain.
pub(crate) fn idle_waits(f: &Facts) -> Vec<Finding> {
    let waits = long_waits(f, &[SegmentKind::Sleep]);
    let sleep: Nanos = waits.iter().map(|s| length(s)).sum();
    if sleep < f.min_gain {
        return Vec::new();
    }
    let mut pids: Vec<i32> = waits.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    // What the sleeps were in, from the system calls or the kernel stacks they began with.
    let mut by_label: Vec<(String, Nanos)> = Vec::new();
    for s in &waits {
        let Some(w) = &s.waited_in else { continue };
        let label = w.to_string();
        match by_label.iter_mut().find(|(l, _)| *l == label) {
            Some((_, ns)) => *ns += length(s),
            None => by_label.push((label, length(s))),
        }
    }
    by_label.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mostly = by_label
        .first()
        .map(|(label, ns)| format!(", {} of it in {label}", duration(*ns)))
        .unwrap_or_default();
    vec![Finding {
        kind: FindingKind::IdleWaits,
        title: format!("{} asleep on a timer on the critical path{mostly}: no CPU, no I/O", duration(sleep)),
        evidence: Evidence {
            summary: format!(
                "{} of at least {} on the critical path, {} in all, that no other thread ended: a timer or an \
                 interrupt woke the thread (fixed sleeps, timeouts, polling, network replies)",
                plural(waits.len() as u64, "sleep"),
                duration(f.config.idle_min_wait_ns),
                duration(sleep)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: pids
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: waits.iter().filter(|s| s.pid == pid).map(|s| length(s)).sum(),
                    read_bytes: 0,
                    in_scope: true,
                })
                .collect(),
            figures: vec![Figure::count("waits", waits.len() as u64), Figure::ns("sleep_ns", sleep)],
            intervals: longest(f, &waits, |s| match &s.waited_in {
                Some(w) => format!("{}/{} asleep in {w} until a timer or an interrupt", f.a.comm(s.pid), s.tid),
                None => format!("{}/{} asleep until a timer or an interrupt", f.a.comm(s.pid), s.tid),
            }),
        },
        gain: Gain {
            ns: sleep,
            formula: "sleep_ns".to_owned(),
            text: format!("{} asleep on timers, if nothing had to be waited for", duration(sleep)),
            inputs: vec![Figure::ns("sleep_ns", sleep)],
            ahead_ns: None,
        },
        suggestion: "Find what each sleep is for (strace -f -tt -e trace=nanosleep,clock_nanosleep,poll,select,\
                     connect,futex): replace fixed sleeps and polling with waiting for the event itself, make name \
                     lookups and other network calls asynchronous or cache their answers."
            .to_owned(),
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(
            "the trace shows that the thread slept and that no thread woke it (and, with off-CPU stacks or \
             --syscalls, the call it slept in), not why it slept; a timeout may be needed"
                .to_owned(),
        ),
    }]
}

/// Time on the critical path the recording cannot explain: waits that a process outside
/// the recorded scope ended, sleeps with no recorded wakeup, and time without scheduler
/// data. No gain is claimed: what happened then is outside the data. The finding names
/// the processes waited on and how to put them into the next recording.
pub(crate) fn unexplained_waits(f: &Facts) -> Vec<Finding> {
    let waits = long_waits(f, &[SegmentKind::WaitUntraced, SegmentKind::NoWakeup, SegmentKind::Untraced]);
    let total: Nanos = waits.iter().map(|s| length(s)).sum();
    if total < f.min_gain {
        return Vec::new();
    }
    let sum =
        |kind: SegmentKind| -> Nanos { waits.iter().filter(|s| s.kind == kind).map(|s| length(s)).sum() };
    let (outside, no_wakeup, untraced) =
        (sum(SegmentKind::WaitUntraced), sum(SegmentKind::NoWakeup), sum(SegmentKind::Untraced));
    let mut waited_on: Vec<EvidenceProcess> = Vec::new();
    for s in &waits {
        let Some(w) = &s.waker_process else { continue };
        match waited_on.iter_mut().find(|p| p.pid == w.pid) {
            Some(p) => p.ns += length(s),
            None => waited_on.push(EvidenceProcess {
                pid: w.pid,
                comm: w.comm.clone(),
                ns: length(s),
                read_bytes: 0,
                in_scope: w.in_scope,
            }),
        }
    }
    waited_on.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
    let mut names: Vec<&str> = waited_on.iter().map(|p| p.comm.as_str()).filter(|c| !c.is_empty()).collect();
    names.dedup();
    let widen = match names.first() {
        Some(_) => format!(
            "record again with {} to follow the waits into those processes, or with --system",
            names.iter().take(3).map(|c| format!("--also {c}")).collect::<Vec<_>>().join(" ")
        ),
        None => {
            "record again with --also PID for the processes the start talks to, or with --system".to_owned()
        }
    };
    let what = |s: &PathSegment| -> String {
        let who = match &s.waited_in {
            Some(w) => format!("{}/{} in {w},", f.a.comm(s.pid), s.tid),
            None => format!("{}/{}", f.a.comm(s.pid), s.tid),
        };
        match (s.kind, &s.waker_process) {
            (SegmentKind::WaitUntraced, Some(w)) if !w.comm.is_empty() => {
                format!("{who} waiting on {} (pid {}, not recorded)", w.comm, w.pid)
            }
            (SegmentKind::WaitUntraced, _) => format!(
                "{who} waiting on thread {} (exited, not recorded)",
                s.waker_tid.map_or("?".to_owned(), |t| t.to_string())
            ),
            (SegmentKind::NoWakeup, _) => format!("{who} asleep, no wakeup recorded"),
            _ => format!("{who}: no scheduler data"),
        }
    };
    vec![Finding {
        kind: FindingKind::UnexplainedWaits,
        title: format!("{} of the critical path is outside the recording", duration(total)),
        evidence: Evidence {
            summary: format!(
                "{} of at least {} on the critical path the recording cannot explain: {} waiting on processes \
                 outside the recorded scope, {} asleep with no wakeup recorded, {} without scheduler data",
                plural(waits.len() as u64, "wait"),
                duration(f.config.idle_min_wait_ns),
                duration(outside),
                duration(no_wakeup),
                duration(untraced)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: waited_on,
            figures: vec![
                Figure::count("waits", waits.len() as u64),
                Figure::ns("wait_outside_ns", outside),
                Figure::ns("no_wakeup_ns", no_wakeup),
                Figure::ns("untraced_ns", untraced),
            ],
            intervals: longest(f, &waits, what),
        },
        gain: Gain {
            ns: 0,
            formula: "0".to_owned(),
            text: "no gain is estimated: the recording does not show what the start waited for then"
                .to_owned(),
            inputs: Vec::new(),
            ahead_ns: None,
        },
        suggestion: format!("Widen the recording's scope: {widen}."),
        verify: "coldstart report TRACE  # the critical path then names what the waits were for".to_owned(),
        confidence: Confidence::Low,
        caveat: None,
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
