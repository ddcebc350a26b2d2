//! The `disk_bound` rule on starts seen only through periodic samples (an imported
//! bootchart): a boot that waits on a disk reading at a fraction of its best rate is
//! seeking, and its gain is the waits less one sweep of the same bytes at that best rate;
//! a disk already reading near its best gains nothing from a sweep; a prefetcher already
//! running and a syslog daemon waiting on the disk are named; a recorded start (scheduler
//! data) is left to the finer rules.

mod common;

use coldstart_analyze::doctor::FindingKind;
use coldstart_trace::{Dev, DiskSample, Nanos, ProcessSample, Source, ThreadState, Trace};
use common::doctor::{check_invariants, diagnose, figure, of_kind, one};
use common::{Builder, MS};

const SDA: Dev = Dev::new(8, 0);
const STEP: Nanos = 200 * MS;
const MIB: u64 = 1 << 20;

/// A 10 s boot sampled every 200 ms: 6 s of the CPU waiting for I/O while the disk, busy
/// 95 %, reads `rate_in_waits` bytes a second (its best second in the boot reads 30 MiB),
/// then 4 s of CPU. `readahead-list` (pid 10) and `syslogd` (pid 11) are in state D through
/// the waits.
fn sampled_boot(rate_in_waits: u64) -> Trace {
    let mut b = Builder::new()
        .process(10, 1, "readahead-list", Some(0))
        .process(11, 1, "syslogd", Some(0))
        .ready(10_000 * MS, "bootchart2:end");
    for i in 1..=50 {
        let t = i * STEP;
        b = if t <= 6_000 * MS { b.cpu_sample(t, STEP, 0.05, 0.9) } else { b.cpu_sample(t, STEP, 0.9, 0.0) };
    }
    let mut trace = b.build();
    trace.meta.source = Source::Bootchart2;
    for i in 1..=50 {
        let t = i * STEP;
        let waiting = t <= 6_000 * MS;
        let read_bytes = match (waiting, i) {
            (_, 40) => 6 * MIB,
            (true, _) => rate_in_waits / 5,
            (false, _) => 0,
        };
        trace.disk_samples.push(DiskSample {
            t_ns: t,
            dt_ns: STEP,
            dev: SDA,
            read_bytes,
            read_ios: 10,
            write_bytes: if waiting { 64 << 10 } else { 0 },
            write_ios: u64::from(waiting),
            busy: if waiting || i == 40 { 0.95 } else { 0.0 },
        });
        for pid in [10, 11] {
            trace.process_samples.push(ProcessSample {
                t_ns: t,
                dt_ns: STEP,
                pid,
                state: if waiting { 'D' } else { 'S' },
                ..ProcessSample::default()
            });
        }
    }
    trace
}

#[test]
fn a_seeking_disk_gains_the_waits_less_one_sweep_at_its_best_rate() {
    let d = diagnose(&sampled_boot(3 * MIB));
    check_invariants(&d);
    let f = one(&d, FindingKind::DiskBound);
    let wait_ns = figure(f, "wait_ns");
    assert!((5_600.0..=6_200.0).contains(&(wait_ns / 1e6)), "waits {} ms", wait_ns / 1e6);
    // About 6 s at 3 MiB/s (18 MiB) read at 30 MiB/s: 0.6 s instead of the waits.
    let read_bytes = figure(f, "read_bytes");
    let sweep_ns = read_bytes / (30.0 * MIB as f64) * 1e9;
    assert!((f.gain.ns - (wait_ns - sweep_ns) as Nanos).abs() <= 1_000, "{}", f.gain.text);
    assert!((5_000.0..=5_600.0).contains(&(f.gain.ns as f64 / 1e6)), "{}", f.gain.text);
    assert!(f.title.contains("the disk was seeking"), "{}", f.title);
    assert!(f.suggestion.contains("already runs a prefetcher (readahead-list"), "{}", f.suggestion);
    assert!(f.suggestion.contains("syslogd itself waited"), "{}", f.suggestion);
    assert!(f.evidence.summary.contains("it also wrote"), "{}", f.evidence.summary);
    assert_eq!(f.evidence.processes.first().map(|p| p.comm.as_str()), Some("readahead-list"));
}

#[test]
fn a_disk_reading_near_its_best_gains_nothing_from_a_sweep() {
    let d = diagnose(&sampled_boot(25 * MIB));
    let f = one(&d, FindingKind::DiskBound);
    assert_eq!(f.gain.ns, 0);
    assert!(f.title.contains("streaming"), "{}", f.title);
    assert!(f.suggestion.starts_with("Read less"), "{}", f.suggestion);
}

#[test]
fn a_recorded_start_is_left_to_the_finer_rules() {
    let mut trace = sampled_boot(3 * MIB);
    trace.sched.push(coldstart_trace::SchedInterval {
        tid: 100,
        start_ns: 0,
        end_ns: 10_000 * MS,
        state: ThreadState::Running,
    });
    assert!(of_kind(&diagnose(&trace), FindingKind::DiskBound).is_empty());
}

/// `runs` runs of `hotplug` started by `khelper`, each starting 4 short scripts, and the
/// collector's own `sleep`s (left out), all gone before ready.
fn with_helper_runs(mut trace: Trace, runs: i32) -> Trace {
    let mut add = |pid: i32, ppid: i32, comm: &str, start: Nanos| {
        trace.processes.push(coldstart_trace::Process {
            pid,
            ppid: Some(ppid),
            comm: comm.into(),
            start_ns: Some(start),
            end_ns: Some(start + 50 * MS),
            in_scope: true,
            ..Default::default()
        });
    };
    add(2, 0, "khelper", 0);
    add(3, 1, "bootchartd", 0);
    for run in 0..runs {
        let root = 1000 + run * 10;
        let t = 5 * MS * Nanos::from(run);
        add(root, 2, "hotplug", t);
        for (i, script) in
            ["default.hotplug", "uname", "10-udev.hotplug", "05-wait_for_sys"].iter().enumerate()
        {
            add(root + 1 + i as i32, root, script, t);
        }
        add(100_000 + run, 3, "sleep", t);
    }
    for p in trace.processes.iter_mut().filter(|p| p.pid == 2 || p.pid == 3) {
        p.end_ns = None;
    }
    trace
}

#[test]
fn runs_of_a_helper_are_counted_with_their_children_and_the_collector_left_out() {
    let d = diagnose(&with_helper_runs(sampled_boot(3 * MIB), 240));
    check_invariants(&d);
    let f = one(&d, FindingKind::ManyShortProcesses);
    assert_eq!(figure(f, "processes"), 1_200.0, "{}", f.title);
    assert_eq!(figure(f, "runs"), 240.0);
    assert!(
        f.evidence.summary.starts_with("240 runs of hotplug (started by khelper"),
        "{}",
        f.evidence.summary
    );
    assert!(f.suggestion.contains("one event daemon's rules"), "{}", f.suggestion);
    assert_eq!(f.gain.ns, 0);
    // 190 runs: 950 processes, below the 1,000 the rule asks for (the 190 sleeps do not count).
    assert!(
        of_kind(&diagnose(&with_helper_runs(sampled_boot(3 * MIB), 190)), FindingKind::ManyShortProcesses)
            .is_empty()
    );
}
