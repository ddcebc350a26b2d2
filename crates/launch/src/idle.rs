//! `idle[:MS]` readiness: the start is over when the machine has been quiet for MS
//! milliseconds after the command started.
//!
//! Quiet means, over every sampling interval: no read completed on any block
//! device (`/proc/diskstats`, whole disks, `ram*` and `zram*` excluded), and the
//! CPUs busy (everything but idle and iowait in `/proc/stat`) less than
//! [`CPU_BUSY_MAX`] of their total capacity (counted in clock ticks of 10 ms, an
//! interval with a single busy tick still counts as quiet). Both are system-wide on purpose: a
//! start also makes helpers outside its tree work (D-Bus activation, the X server,
//! font caches). The ready time is the start of the quiet period (the end of the
//! last busy interval), so MS is not added to the measurement; its resolution is
//! the sampling interval, MS / 10 clamped to 20–100 ms.

use std::time::Duration;

use procfs::CurrentSI;

use crate::clock::{BootNanos, boottime_ns};

/// The largest fraction of all CPUs' time that still counts as idle.
pub const CPU_BUSY_MAX: f64 = 0.10;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Counters {
    disk_reads: u64,
    cpu_busy: u64,
    cpu_total: u64,
}

fn read_counters() -> Option<Counters> {
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
    Some(Counters { disk_reads, cpu_busy: busy, cpu_total: busy + idle })
}

/// Whether the interval from `before` to `after` was quiet.
fn quiet(before: Counters, after: Counters) -> bool {
    let total = after.cpu_total.saturating_sub(before.cpu_total);
    let busy = after.cpu_busy.saturating_sub(before.cpu_busy);
    after.disk_reads == before.disk_reads && (busy <= 1 || (busy as f64) < CPU_BUSY_MAX * total as f64)
}

/// Watches the machine for a quiet period; feed it [`IdleDetector::sample`] every
/// [`IdleDetector::interval`].
pub(crate) struct IdleDetector {
    quiet_for: Duration,
    interval: Duration,
    last: Option<Counters>,
    quiet_since: BootNanos,
    next_sample: BootNanos,
}

impl IdleDetector {
    pub(crate) fn new(quiet_for: Duration, started_ns: BootNanos) -> IdleDetector {
        let interval = (quiet_for / 10).clamp(Duration::from_millis(20), Duration::from_millis(100));
        let next_sample = boottime_ns() + interval.as_nanos() as i64;
        IdleDetector { quiet_for, interval, last: read_counters(), quiet_since: started_ns, next_sample }
    }

    /// Time until the next sample is due.
    pub(crate) fn until_due(&self) -> Duration {
        Duration::from_nanos((self.next_sample - boottime_ns()).max(0) as u64)
    }

    /// Samples if due; returns the start of the quiet period once it has lasted long enough.
    pub(crate) fn poll(&mut self) -> Option<BootNanos> {
        let now = boottime_ns();
        if now < self.next_sample {
            return None;
        }
        self.next_sample = now + self.interval.as_nanos() as i64;
        let counters = read_counters();
        match (self.last, counters) {
            (Some(before), Some(after)) if quiet(before, after) => {}
            _ => self.quiet_since = now,
        }
        self.last = counters;
        (now - self.quiet_since >= self.quiet_for.as_nanos() as i64).then_some(self.quiet_since)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(disk_reads: u64, cpu_busy: u64, cpu_total: u64) -> Counters {
        Counters { disk_reads, cpu_busy, cpu_total }
    }

    #[test]
    fn quiet_needs_no_reads_and_little_cpu() {
        assert!(quiet(c(5, 100, 1000), c(5, 105, 1100)));
        assert!(!quiet(c(5, 100, 1000), c(6, 100, 1100)), "one disk read");
        assert!(!quiet(c(5, 100, 1000), c(5, 110, 1100)), "10% busy is not below 10%");
        assert!(quiet(c(5, 100, 1000), c(5, 101, 1010)), "a single busy tick is noise");
        assert!(!quiet(c(5, 100, 1000), c(5, 102, 1010)), "two of ten ticks busy");
    }

    #[test]
    fn reads_real_counters() {
        let counters = read_counters().expect("/proc/stat and /proc/diskstats");
        assert!(counters.cpu_total > 0);
    }
}
