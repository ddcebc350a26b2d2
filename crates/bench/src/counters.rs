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
const DELAYACCT_USERS: &str = "/run/coldstart-delayacct.lock";
const RESTORE_MARK: &str = "restore";

/// Turns `kernel.task_delayacct` on for our lifetime if it was off (root only), and
/// back off after the last user. The switch is one for the whole machine: every
/// benchmark (and test) that uses it holds `/run/coldstart-delayacct.lock` shared, and
/// only the one that finds itself alone (gets the lock exclusively) restores it, so
/// a short run can no longer switch accounting off in the middle of a long one
/// (whose I/O wait then read zero). The lock file says whether accounting must be
/// turned off again. Users that start together both turn it on and mark the file,
/// which is harmless.
pub struct DelayAccounting {
    restore: bool,
    switch: PathBuf,
    users: Option<std::fs::File>,
}

impl DelayAccounting {
    /// `None` when accounting is off and we cannot turn it on.
    pub fn enable() -> Option<DelayAccounting> {
        DelayAccounting::enable_with(Path::new(DELAYACCT), Path::new(DELAYACCT_USERS))
    }

    /// [`DelayAccounting::enable`] with the switch and the users' lock file given.
    pub fn enable_with(switch: &Path, users: &Path) -> Option<DelayAccounting> {
        use std::io::{Read, Seek, Write};
        use std::os::unix::fs::OpenOptionsExt;

        let mut lock = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(users)
            .ok();
        if let Some(file) = &lock
            && crate::sys::lock_shared(file).is_err()
        {
            lock = None;
        }
        let was_on = std::fs::read_to_string(switch).is_ok_and(|v| v.trim() == "1");
        let mut marked = String::new();
        if let Some(file) = &mut lock {
            let _ = file.read_to_string(&mut marked);
        }
        if !was_on {
            std::fs::write(switch, "1").ok()?;
            if let Some(file) = &mut lock {
                let _ = file
                    .set_len(0)
                    .and_then(|()| file.rewind())
                    .and_then(|()| file.write_all(RESTORE_MARK.as_bytes()));
            }
        }
        Some(DelayAccounting {
            restore: !was_on || marked.trim() == RESTORE_MARK,
            switch: switch.to_owned(),
            users: lock,
        })
    }

    pub fn enabled_by_us(&self) -> bool {
        self.restore
    }
}

impl Drop for DelayAccounting {
    fn drop(&mut self) {
        use std::io::{Read, Seek};

        match &mut self.users {
            Some(file) => {
                if crate::sys::try_lock_exclusive(file).is_err() {
                    return;
                }
                let mut marked = String::new();
                let _ = file.rewind().and_then(|()| file.read_to_string(&mut marked));
                if marked.trim() == RESTORE_MARK && std::fs::write(&self.switch, "0").is_ok() {
                    let _ = file.set_len(0);
                }
            }
            None if self.restore => {
                let _ = std::fs::write(&self.switch, "0");
            }
            None => {}
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
    fn delay_accounting_is_restored_by_its_last_user_only() {
        let dir = tempfile::tempdir().unwrap();
        let (switch, users) = (dir.path().join("task_delayacct"), dir.path().join("users.lock"));
        std::fs::write(&switch, "0\n").unwrap();
        let read = || std::fs::read_to_string(&switch).unwrap().trim().to_owned();
        let long = DelayAccounting::enable_with(&switch, &users).unwrap();
        assert_eq!(read(), "1");
        assert!(long.enabled_by_us());
        let short = DelayAccounting::enable_with(&switch, &users).unwrap();
        assert!(short.enabled_by_us(), "the second user must restore too if it ends last");
        drop(short);
        assert_eq!(read(), "1", "a user that is not alone leaves accounting on");
        drop(long);
        assert_eq!(read(), "0", "the last user restores the original state");

        std::fs::write(&switch, "1").unwrap();
        let on_already = DelayAccounting::enable_with(&switch, &users).unwrap();
        assert!(!on_already.enabled_by_us());
        drop(on_already);
        assert_eq!(read(), "1", "accounting that was on before is left on");
    }

    #[test]
    fn machine_counters_are_readable() {
        assert!(disk_read_bytes().is_some());
        let (busy, total) = cpu_ticks().unwrap();
        assert!(busy <= total && total > 0);
    }
}
