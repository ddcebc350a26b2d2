//! Counters read around each run: bytes read from disk (a v1 blkio cgroup holding
//! the command's tree, as root, with a read limit of 100 GB/s on every disk because
//! the v1 throttle counts only on devices that have a rule; else the machine's
//! `/proc/diskstats`), CPU time of
//! the whole machine (to tell other load apart), and the switch for per-task I/O
//! delay accounting (enabled for the session as root, and restored afterwards).

use std::path::{Path, PathBuf};

use procfs::CurrentSI;

use crate::error::{BenchError, Result};

/// Bytes read by every whole disk (`/proc/diskstats`; loop, ram and zram devices
/// excluded, since their reads land on a disk or in memory).
pub fn disk_read_bytes() -> Option<u64> {
    let disks = procfs::diskstats().ok()?;
    Some(
        disks
            .iter()
            .filter(|d| !["loop", "ram", "zram"].iter().any(|p| d.name.starts_with(p)))
            .filter(|d| Path::new("/sys/block").join(&d.name).exists())
            .map(|d| d.sectors_read * 512)
            .sum(),
    )
}

/// (busy, total) CPU ticks of the machine since boot.
pub fn cpu_ticks() -> Option<(u64, u64)> {
    let t = procfs::KernelStats::current().ok()?.total;
    let idle = t.idle + t.iowait.unwrap_or(0);
    let busy =
        t.user + t.nice + t.system + t.irq.unwrap_or(0) + t.softirq.unwrap_or(0) + t.steal.unwrap_or(0);
    Some((busy, busy + idle))
}

/// A v1 blkio cgroup of our own, removed when dropped.
pub struct BlkioCgroup {
    path: PathBuf,
}

const BLKIO_ROOT: &str = "/sys/fs/cgroup/blkio";
const PREFIX: &str = "coldstart-bench-";
const UNREACHABLE_BPS: u64 = 100_000_000_000;

impl BlkioCgroup {
    /// Creates `/sys/fs/cgroup/blkio/coldstart-bench-PID` (after removing stale ones
    /// of dead processes); `None` where v1 blkio is missing or we may not.
    pub fn create() -> Option<BlkioCgroup> {
        let root = Path::new(BLKIO_ROOT);
        if !root.join("blkio.throttle.io_service_bytes_recursive").exists() {
            return None;
        }
        for entry in std::fs::read_dir(root).ok()?.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(pid) = name.strip_prefix(PREFIX).and_then(|p| p.parse::<i32>().ok())
                && !Path::new(&format!("/proc/{pid}")).exists()
            {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let path = root.join(format!("{PREFIX}{}", std::process::id()));
        std::fs::create_dir(&path).ok()?;
        let cgroup = BlkioCgroup { path };
        // The v1 throttle only counts a cgroup's bios on devices that have a rule:
        // give every disk a read limit no disk reaches (100 GB/s).
        let limits = cgroup.path.join("blkio.throttle.read_bps_device");
        let mut counted = 0;
        for disk in std::fs::read_dir("/sys/block").ok()?.flatten() {
            let name = disk.file_name().to_string_lossy().into_owned();
            if name.starts_with("ram") || name.starts_with("zram") {
                continue;
            }
            if let Ok(dev) = std::fs::read_to_string(disk.path().join("dev"))
                && std::fs::write(&limits, format!("{} {UNREACHABLE_BPS}\n", dev.trim())).is_ok()
            {
                counted += 1;
            }
        }
        (counted > 0).then_some(cgroup)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes read by the cgroup's processes so far, all devices.
    pub fn read_bytes(&self) -> Result<u64> {
        let file = self.path.join("blkio.throttle.io_service_bytes_recursive");
        let text = std::fs::read_to_string(&file).map_err(|e| BenchError::file(&file, e))?;
        Ok(parse_service_bytes(&text))
    }
}

/// Sums the `Read` lines of a `blkio.throttle.io_service_bytes` file.
pub fn parse_service_bytes(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (_dev, op, n) = (f.next()?, f.next()?, f.next()?);
            (op == "Read").then(|| n.parse::<u64>().ok()).flatten()
        })
        .sum()
}

impl Drop for BlkioCgroup {
    fn drop(&mut self) {
        for _ in 0..50 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

const DELAYACCT: &str = "/proc/sys/kernel/task_delayacct";

/// Turns `kernel.task_delayacct` on for our lifetime if it was off (root only),
/// and back off when dropped.
pub struct DelayAccounting {
    restore: bool,
}

impl DelayAccounting {
    /// `None` when accounting is off and we cannot turn it on.
    pub fn enable() -> Option<DelayAccounting> {
        if coldstart_launch::delay_accounting_enabled() {
            return Some(DelayAccounting { restore: false });
        }
        std::fs::write(DELAYACCT, "1").ok()?;
        Some(DelayAccounting { restore: true })
    }

    pub fn enabled_by_us(&self) -> bool {
        self.restore
    }
}

impl Drop for DelayAccounting {
    fn drop(&mut self) {
        if self.restore {
            let _ = std::fs::write(DELAYACCT, "0");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_read_lines_of_every_device() {
        let text =
            "254:0 Read 4096\n254:0 Write 100\n254:0 Sync 7\n7:0 Read 8192\n7:0 Total 9000\nTotal 12388\n";
        assert_eq!(parse_service_bytes(text), 12288);
        assert_eq!(parse_service_bytes("Total 0\n"), 0);
    }

    #[test]
    fn machine_counters_are_readable() {
        assert!(disk_read_bytes().is_some());
        let (busy, total) = cpu_ticks().unwrap();
        assert!(busy <= total && total > 0);
    }
}
