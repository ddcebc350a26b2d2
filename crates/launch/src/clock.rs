//! The one clock of this crate: CLOCK_BOOTTIME in nanoseconds, the clock of
//! `/proc/uptime`, of marks files, and of tracefs with `trace_clock=boot`, so a
//! ready time can be placed on a kernel trace without conversion.

/// Nanoseconds of CLOCK_BOOTTIME (time since boot, suspend included).
pub type BootNanos = i64;

/// The current CLOCK_BOOTTIME reading. Async-signal-safe (one system call).
pub fn boottime_ns() -> BootNanos {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_BOOTTIME exists on every supported kernel.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boottime_matches_proc_uptime() {
        let uptime: f64 =
            std::fs::read_to_string("/proc/uptime").unwrap().split(' ').next().unwrap().parse().unwrap();
        let ours = boottime_ns() as f64 / 1e9;
        assert!((ours - uptime).abs() < 1.0, "boottime {ours} vs /proc/uptime {uptime}");
    }
}
