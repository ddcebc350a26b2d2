//! The critical path across processes: wakeups through pipes, sockets and futexes are
//! followed from one process into another, and a wait on a process outside the recorded
//! scope ends as a named wait, never as idle time. Each test fails without the walk's
//! cross-process step (the `Some((wake_t, Some(waker))) if … !rows_of(waker).is_empty()`
//! arm of `critical.rs`) or its outside-wait arm.

mod common;

use coldstart_analyze::doctor::{DoctorConfig, FindingKind, diagnose};
use coldstart_trace::ThreadState::*;
use common::{Builder, Facet, MS, analyze, check};

/// `app` (100) runs, then sleeps on a pipe until `b` (200, running before the recording)
/// writes to it at 50 ms. `b` had slept until `c` (300) woke it at 20 ms, ran, and waited
/// 20 ms for the disk. Ready at 60 ms.
fn a_waits_for_b_over_a_pipe_b_waits_for_io_c_wakes_b() -> coldstart_trace::Trace {
    Builder::new()
        .process(200, 1, "b", None)
        .process(300, 1, "c", None)
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 50 * MS, Sleeping)
        .wakeup(50 * MS, 100, Some(200))
        .sched(100, 50 * MS, 60 * MS, Running)
        .sched(200, 0, 20 * MS, Sleeping)
        .wakeup(20 * MS, 200, Some(300))
        .sched(200, 20 * MS, 25 * MS, Running)
        .sched(200, 25 * MS, 45 * MS, IoWait)
        .wakeup(45 * MS, 200, None)
        .sched(200, 45 * MS, 50 * MS, Running)
        .sched(300, 0, 20 * MS, Running)
        .ready(60 * MS, "exit")
        .build()
}

#[test]
fn the_walk_follows_a_pipe_into_b_and_b_s_wakeup_into_c() {
    check(
        &a_waits_for_b_over_a_pipe_b_waits_for_io_c_wakes_b(),
        Facet::CriticalPath,
        "0-10 100 cpu
         10-20 300 cpu
         20-25 200 cpu
         25-45 200 io
         45-50 200 cpu
         50-60 100 cpu
         total=60 cpu=20 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[b/200=30, c/300=10]",
    );
}

/// `app` waits 40 ms on the X server, which the recording did not cover: the recorder
/// named the waker's process (`Xvfb`, 812, out of scope) without scheduler data for it.
fn a_wait_on_an_unrecorded_x_server() -> coldstart_trace::Trace {
    Builder::new()
        .outside_process(812, "Xvfb")
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 50 * MS, Sleeping)
        .wakeup(50 * MS, 100, Some(812))
        .sched(100, 50 * MS, 60 * MS, Running)
        .ready(60 * MS, "exit")
        .build()
}

#[test]
fn a_wait_on_a_process_outside_the_scope_is_named_with_its_comm() {
    let trace = a_wait_on_an_unrecorded_x_server();
    check(
        &trace,
        Facet::CriticalPath,
        "0-10 100 cpu
         10-50 100 wait_untraced on Xvfb/812
         50-60 100 cpu
         total=60 cpu=20 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[]",
    );
    let a = analyze(&trace);
    let summary = &a.critical_path.as_ref().unwrap().summary;
    assert_eq!(summary.wait_untraced_ns, 40 * MS);
    assert_eq!(summary.sleep_ns, 0, "a wait on another process is never sleep");
    assert_eq!(summary.outside.len(), 1);
    let outside = &summary.outside[0];
    assert_eq!(
        (outside.process.pid, outside.process.comm.as_str(), outside.process.in_scope),
        (812, "Xvfb", false)
    );
    assert_eq!((outside.ns, outside.waits), (40 * MS, 1));
}

#[test]
fn the_doctor_claims_no_gain_for_a_wait_outside_the_scope_and_names_what_to_add() {
    let trace = a_wait_on_an_unrecorded_x_server();
    let d = diagnose(&trace, &analyze(&trace), &DoctorConfig::default(), &[]);
    assert!(
        d.findings.iter().all(|f| f.kind != FindingKind::IdleWaits),
        "a wait on Xvfb is not idle: {:?}",
        d.findings.iter().map(|f| &f.title).collect::<Vec<_>>()
    );
    let f = d
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::UnexplainedWaits)
        .expect("an unexplained_waits finding");
    assert_eq!(f.gain.ns, 0);
    assert!(f.suggestion.contains("--also Xvfb"), "{}", f.suggestion);
    assert_eq!(f.evidence.processes.len(), 1);
    assert_eq!((f.evidence.processes[0].pid, f.evidence.processes[0].ns), (812, 40 * MS));
    assert!(
        f.evidence.intervals[0].what.contains("waiting on Xvfb (pid 812, not recorded)"),
        "{:?}",
        f.evidence.intervals
    );
}

/// A sleep no wakeup ended in the data is not a timer sleep: it is unexplained, and the
/// doctor's idle finding leaves it out.
#[test]
fn a_sleep_without_a_recorded_wakeup_is_not_idle() {
    let trace = Builder::new()
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 50 * MS, Sleeping)
        .sched(100, 50 * MS, 60 * MS, Running)
        .ready(60 * MS, "exit")
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-10 100 cpu
         10-50 100 no_wakeup
         50-60 100 cpu
         total=60 cpu=20 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[]",
    );
    let d = diagnose(&trace, &analyze(&trace), &DoctorConfig::default(), &[]);
    assert!(d.findings.iter().all(|f| f.kind != FindingKind::IdleWaits));
    assert!(d.findings.iter().any(|f| f.kind == FindingKind::UnexplainedWaits && f.gain.ns == 0));
}
