//! The one clock of this crate: CLOCK_BOOTTIME in nanoseconds, the clock of
//! `/proc/uptime`, of marks files, and of tracefs with `trace_clock=boot`, so a
//! ready time can be placed on a kernel trace without conversion.

/// Nanoseconds of CLOCK_BOOTTIME (time since boot, suspend included).
pub type BootNanos = i64;

/// The current CLOCK_BOOTTIME reading. Async-signal-safe (one system call, or none
/// through the vDSO).
pub fn boottime_ns() -> BootNanos {
    crate::sys::boottime_ns()
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
