//! What processes outside the recording did during the start (`overview.others`): their
//! disk reads and the CPU the machine spent beyond the recorded threads.

mod common;

use coldstart_trace::{Scope, ThreadState};
use common::{Builder, DISK, MS};

/// App (100) starts at 0 and is ready at 100 ms, running 0–40 ms; it reads /lib/a.
fn start() -> Builder {
    Builder::start()
        .placed_file(1, "/lib/a", 1 << 20)
        .sched(100, 0, 40 * MS, ThreadState::Running)
        .request(5 * MS, 6 * MS, 1, 0, 4096, 100, "app")
        .fill(6 * MS, 100, 100, 1, 0, 1)
        .ready_by(100 * MS, "exit", 100, Some(100))
}

#[test]
fn reads_of_other_processes_during_the_start_are_counted_by_process() {
    let trace = start()
        .outside_process(700, "indexer")
        .outside_process(800, "updater")
        .raw_request(DISK, 10 * MS, 12 * MS, 9_000_000, 1 << 20, 700, "indexer")
        .raw_request(DISK, 20 * MS, 22 * MS, 9_100_000, 1 << 20, 700, "indexer")
        .raw_request(DISK, 30 * MS, 32 * MS, 9_200_000, 512 << 10, 800, "updater")
        // After ready: not the start's competition.
        .raw_request(DISK, 150 * MS, 152 * MS, 9_300_000, 1 << 20, 800, "updater")
        // A kernel worker issues for others; the recorded app's own file was read for it.
        .raw_request(DISK, 40 * MS, 42 * MS, 9_400_000, 1 << 20, 5, "kworker/u4:1")
        .request(50 * MS, 52 * MS, 1, 8, 4096, 800, "updater")
        .build();
    let others = &coldstart_analyze::analyze(&trace).overview.others;
    assert_eq!((others.read_requests, others.read_bytes), (3, (2 << 20) + (512 << 10)));
    let readers: Vec<(i32, &str, u64)> =
        others.readers.iter().map(|r| (r.pid, r.comm.as_str(), r.read_bytes)).collect();
    assert_eq!(readers, [(700, "indexer", 2 << 20), (800, "updater", 512 << 10)]);
    assert_eq!(others.cpu_ns, None, "no CPU samples");
}

#[test]
fn cpu_beyond_the_recorded_threads_comes_from_the_samples() {
    // Two CPUs 50 % busy over the 100 ms start: 100 ms of CPU, 40 ms of it the app's.
    let trace =
        start().cpu_sample(50 * MS, 50 * MS, 0.5, 0.0).cpu_sample(100 * MS, 50 * MS, 0.5, 0.0).build();
    let others = &coldstart_analyze::analyze(&trace).overview.others;
    assert_eq!(others.cpu_ns, Some(60 * MS));
    assert_eq!(others.cpu_capacity_ns, 200 * MS);
}

#[test]
fn a_system_wide_recording_has_no_process_outside() {
    let mut trace = start().raw_request(DISK, 10 * MS, 12 * MS, 9_000_000, 1 << 20, 700, "indexer").build();
    trace.meta.scope = Scope::System;
    trace.processes.push(coldstart_trace::Process {
        pid: 700,
        comm: "indexer".into(),
        in_scope: true,
        ..Default::default()
    });
    let others = &coldstart_analyze::analyze(&trace).overview.others;
    assert_eq!((others.read_requests, others.read_bytes), (0, 0));
}
