//! Findings about what the critical path does when it neither runs nor reads:
//! idle waits (timer sleeps: fixed sleeps, timeouts, polling) and the waits the recording
//! cannot explain (on processes outside its scope, without a wakeup or data).

use coldstart_trace::Nanos;

use crate::analysis::{PathSegment, SegmentKind};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{duration, plural};

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

/// `waits` as intervals described by `what` (the diagnosis merges them and keeps those
/// that carry the time).
fn intervals(waits: &[&PathSegment], what: impl Fn(&PathSegment) -> String) -> Vec<EvidenceInterval> {
    waits
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
            intervals: intervals(&waits, |s| match &s.waited_in {
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
        audience: Audience::Developers,
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
    let mut waits = long_waits(f, &[SegmentKind::WaitUntraced, SegmentKind::NoWakeup, SegmentKind::Untraced]);
    waits.retain(|s| !crate::doctor::slowfs::explained_by_slow_filesystem(s));
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
            intervals: intervals(&waits, what),
        },
        gain: Gain {
            ns: 0,
            formula: "0".to_owned(),
            text: "no gain is estimated: the recording does not show what the start waited for then"
                .to_owned(),
            inputs: Vec::new(),
            ahead_ns: None,
        },
        audience: Audience::User,
        suggestion: format!("Widen the recording's scope: {widen}."),
        verify: "coldstart report TRACE  # the critical path then names what the waits were for".to_owned(),
        confidence: Confidence::Low,
        caveat: None,
    }]
}
