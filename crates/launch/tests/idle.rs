//! `idle:MS` readiness: it fires only after the command's burst of work is over and
//! the machine stayed quiet for MS, and it does fire when the machine is quiet. In a
//! test binary of its own so that no other test of ours keeps the CPUs busy meanwhile.
//!
//! Quiet is system-wide on purpose, and the machine is shared: other people's builds
//! and benchmarks may keep it busy for the whole wait, and then `idle` rightly never
//! fires. So the test watches the same counters the detector reads (`/proc/stat`,
//! `/proc/diskstats`) and judges the outcome against what it saw, with generous
//! margins and by the order of events: the burst's last moment, the start of the
//! quiet period, its detection. A timeout on a machine that was busy all along is
//! the right answer (and, under CI=true, a failure: CI's machine must offer a quiet
//! moment, or the firing is never exercised).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use coldstart_launch::{BootNanos, Ending, Outcome, PausedChild, Reason, WaitOptions, boottime_ns};
use common::sh;

const MS: i64 = 1_000_000;
/// The quiet period asked for.
const QUIET_MS: u64 = 300;
/// How far before the burst's last moment the detector may place the start of the
/// quiet period: one sample (MS / 10 = 30 ms) and one clock tick (10 ms) of
/// `/proc/stat`, as an interval with a single busy tick counts as quiet; doubled.
const RESOLUTION_NS: i64 = 100 * MS;
/// A stretch the test itself saw this quiet holds a quiet period for the detector
/// whatever its sampling: no disk read, and at most two busy clock ticks over 1.5 s
/// (two ticks can break at most one 30 ms sample of the detector's; the rest of the
/// stretch, at least 700 ms on one side, is quiet).
const CLEARLY_QUIET_NS: i64 = 1500 * MS;
const CLEARLY_QUIET_TICKS: u64 = 2;

/// The counters the detector reads, at a moment.
#[derive(Clone, Copy, Debug)]
struct Sample {
    /// Taken before reading the counters, and after.
    before: BootNanos,
    after: BootNanos,
    disk_reads: u64,
    cpu_busy: u64,
    cpu_total: u64,
}

fn sample() -> Option<Sample> {
    use procfs::CurrentSI;
    let before = boottime_ns();
    let disk_reads = procfs::diskstats()
        .ok()?
        .into_iter()
        .filter(|d| !d.name.starts_with("ram") && !d.name.starts_with("zram"))
        .filter(|d| std::path::Path::new("/sys/block").join(&d.name).exists())
        .map(|d| d.reads)
        .sum();
    let cpu = procfs::KernelStats::current().ok()?.total;
    let idle = cpu.idle + cpu.iowait.unwrap_or(0);
    let busy = cpu.user
        + cpu.nice
        + cpu.system
        + cpu.irq.unwrap_or(0)
        + cpu.softirq.unwrap_or(0)
        + cpu.steal.unwrap_or(0);
    Some(Sample { before, after: boottime_ns(), disk_reads, cpu_busy: busy, cpu_total: busy + idle })
}

/// Samples the machine every 50 ms until dropped.
struct Observer {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Observer {
    fn start() -> Observer {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (samples.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                if let Some(x) = sample() {
                    s.lock().unwrap().push(x);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Observer { samples, stop, thread: Some(thread) }
    }

    fn finish(mut self) -> Vec<Sample> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.samples.lock().unwrap())
    }
}

/// Disk reads, busy ticks and all ticks from `a` to `b` (a disk that went away
/// counts as reads, as it does for the detector).
fn between(a: &Sample, b: &Sample) -> (u64, u64, u64) {
    let reads = b.disk_reads.checked_sub(a.disk_reads).unwrap_or(u64::MAX);
    (reads, b.cpu_busy.saturating_sub(a.cpu_busy), b.cpu_total.saturating_sub(a.cpu_total))
}

/// A stretch after `from` that the detector could not have missed, as (start, end).
fn clearly_quiet_stretch(samples: &[Sample], from: BootNanos) -> Option<(BootNanos, BootNanos)> {
    let first = samples.partition_point(|s| s.before < from);
    (first..samples.len()).find_map(|i| {
        let a = &samples[i];
        let b = samples[i..].iter().find(|b| b.before - a.after >= CLEARLY_QUIET_NS)?;
        let (reads, busy, _) = between(a, b);
        (reads == 0 && busy <= CLEARLY_QUIET_TICKS).then_some((a.after, b.before))
    })
}

/// One run: a burst of about 1–2 s of CPU work, its last moment written as a mark,
/// then a long sleep; waits for `idle:QUIET_MS` with the test's own sampling around it.
fn run(timeout: Duration) -> (Outcome, Option<BootNanos>, Vec<Sample>) {
    // `now` is read by the loop itself: its value when the loop ends is the last
    // moment the burst was seen running (marks are in /proc/uptime's 10 ms steps).
    let script = r#"end=$(($(cut -d. -f1 /proc/uptime) + 1));
        while now=$(cut -d' ' -f1 /proc/uptime); [ "${now%.*}" -le "$end" ]; do :; done;
        echo "$now busy-done" >> "$COLDSTART_MARKS"; exec sleep 300"#;
    let observer = Observer::start();
    let mut running = PausedChild::spawn(&sh(script)).unwrap().resume().unwrap();
    let options = WaitOptions { timeout: Some(timeout), ..WaitOptions::default() };
    let outcome = running.wait(&format!("idle:{QUIET_MS}").parse().unwrap(), &options).unwrap();
    let finished = running.finish(&Ending::default()).unwrap();
    let samples = observer.finish();
    let busy_done = finished.marks.marks.iter().find(|m| m.name == "busy-done").map(|m| m.boottime_ns);
    (outcome, busy_done, samples)
}

fn check_fired(outcome: &Outcome, busy_done: Option<BootNanos>, samples: &[Sample]) {
    let busy_done = busy_done.expect("idle fired while the burst was still running (no busy-done mark)");
    assert!(
        outcome.ready_ns + RESOLUTION_NS >= busy_done,
        "the quiet period began at {} ns, before the burst's last moment at {busy_done} ns",
        outcome.ready_ns
    );
    assert!(
        outcome.detected_ns - outcome.ready_ns >= QUIET_MS as i64 * MS,
        "the quiet period had not lasted {QUIET_MS} ms when it was declared"
    );
    // What the test saw inside the quiet period (after the detector's first reading
    // in it, until its declaration): no disk read, and the CPUs far from busy.
    let inside: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.before >= outcome.ready_ns + 50 * MS && s.after <= outcome.detected_ns)
        .collect();
    if let (Some(a), Some(b)) = (inside.first(), inside.last()) {
        let (reads, busy, total) = between(a, b);
        assert_eq!(reads, 0, "disk reads completed inside the quiet period");
        assert!(
            busy * 2 < total.max(1),
            "the CPUs were busy {busy} of {total} ticks inside the quiet period"
        );
    }
}

#[test]
fn idle_fires_after_the_burst_and_the_quiet_period() {
    let (outcome, busy_done, samples) = run(Duration::from_secs(30));
    match outcome.reason {
        Reason::Idle(ms) => {
            assert_eq!(ms, QUIET_MS);
            check_fired(&outcome, busy_done, &samples);
            eprintln!(
                "idle fired: quiet from {} ms after the burst's last moment, declared {} ms later",
                busy_done.map_or(0, |b| (outcome.ready_ns - b) / MS),
                (outcome.detected_ns - outcome.ready_ns) / MS
            );
        }
        Reason::Timeout => {
            let busy_done = busy_done.expect("the burst ended within the timeout");
            if let Some((a, b)) = clearly_quiet_stretch(&samples, busy_done + RESOLUTION_NS) {
                panic!("idle did not fire, yet the machine was quiet from {a} to {b} ns");
            }
            let (reads, busy, total) = match (samples.first(), samples.last()) {
                (Some(a), Some(b)) => between(a, b),
                _ => (0, 0, 0),
            };
            let why = format!(
                "the machine never stayed quiet for {QUIET_MS} ms (other load: {reads} disk reads, CPUs busy {busy} of {total} ticks), so idle rightly did not fire"
            );
            coldstart_testkit::unavailable("the firing of idle", &why);
        }
        other => panic!("unexpected outcome {other}"),
    }
}
