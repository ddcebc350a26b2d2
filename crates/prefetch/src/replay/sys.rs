//! The system calls of the replay that rustix does not wrap: `cachestat(2)` (page
//! cache residency of a byte range), `ioprio_set(2)`, and MemAvailable.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use serde::{Deserialize, Serialize};

#[repr(C)]
struct CachestatRange {
    off: u64,
    len: u64,
}

#[repr(C)]
#[derive(Default)]
struct Cachestat {
    nr_cache: u64,
    nr_dirty: u64,
    nr_writeback: u64,
    nr_evicted: u64,
    nr_recently_evicted: u64,
}

const SYS_CACHESTAT: libc::c_long = 451;

/// Pages of `offset..offset+length` in the page cache. `Err` when the kernel will
/// not say (ENOSYS before Linux 6.5; EPERM for files the caller may not write,
/// unprivileged): the caller must then assume nothing is resident.
pub fn cached_pages(fd: BorrowedFd<'_>, offset: u64, length: u64) -> std::io::Result<u64> {
    let range = CachestatRange { off: offset, len: length };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat(fd, &range, &stat, 0) with pointers to live repr(C) structs.
    let r = unsafe { libc::syscall(SYS_CACHESTAT, fd.as_raw_fd(), &range, &mut stat, 0u32) };
    if r == 0 { Ok(stat.nr_cache) } else { Err(std::io::Error::last_os_error()) }
}

/// The CPU scheduling class of the replay threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuClass {
    /// Inherited (normally `SCHED_OTHER` at the caller's nice level).
    #[default]
    Normal,
    /// `SCHED_IDLE`: a replay thread runs only when no other task wants the CPU, so
    /// it never delays the program it runs alongside (no privilege needed).
    Idle,
}

impl CpuClass {
    /// Sets the class of the calling thread.
    pub fn apply_to_this_thread(self) -> std::io::Result<()> {
        match self {
            CpuClass::Normal => Ok(()),
            CpuClass::Idle => {
                let param = libc::sched_param { sched_priority: 0 };
                // SAFETY: sched_setscheduler(0 = the calling thread, SCHED_IDLE, &param) with a live param.
                let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
                if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
            }
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CpuClass::Normal => "normal",
            CpuClass::Idle => "idle",
        }
    }
}

/// An I/O priority (`ioprio_set(2)`): the class and, for real-time and best-effort,
/// the level 0 (highest) to 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "class", content = "level")]
pub enum IoPriority {
    RealTime(u8),
    BestEffort(u8),
    Idle,
}

impl IoPriority {
    fn value(self) -> libc::c_int {
        const SHIFT: libc::c_int = 13;
        match self {
            IoPriority::RealTime(l) => (1 << SHIFT) | libc::c_int::from(l.min(7)),
            IoPriority::BestEffort(l) => (2 << SHIFT) | libc::c_int::from(l.min(7)),
            IoPriority::Idle => 3 << SHIFT,
        }
    }

    /// Sets the priority of the calling thread (and of the I/O it submits).
    pub fn apply_to_this_thread(self) -> std::io::Result<()> {
        const IOPRIO_WHO_PROCESS: libc::c_int = 1;
        // SAFETY: ioprio_set(IOPRIO_WHO_PROCESS, 0 = the calling thread, value).
        let r = unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, self.value()) };
        if r == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
    }
}

impl std::fmt::Display for IoPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoPriority::RealTime(l) => write!(f, "rt:{l}"),
            IoPriority::BestEffort(l) => write!(f, "be:{l}"),
            IoPriority::Idle => write!(f, "idle"),
        }
    }
}

impl std::str::FromStr for IoPriority {
    type Err = String;

    /// `rt:N`, `be:N` (N 0–7, 0 highest) or `idle`.
    fn from_str(s: &str) -> Result<IoPriority, String> {
        let err = || format!("not an I/O priority: {s:?} (expected rt:0-7, be:0-7 or idle)");
        if s == "idle" {
            return Ok(IoPriority::Idle);
        }
        let (class, level) = s.split_once(':').ok_or_else(err)?;
        let level: u8 = level.parse().ok().filter(|l| *l <= 7).ok_or_else(err)?;
        match class {
            "rt" => Ok(IoPriority::RealTime(level)),
            "be" => Ok(IoPriority::BestEffort(level)),
            _ => Err(err()),
        }
    }
}

/// MemAvailable of /proc/meminfo, bytes.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Reads `offset..offset+length` of `fd` through the page cache into `buffer`
/// piece by piece, so it returns only once every page is in (or at end of file).
pub fn read_through(fd: impl AsFd, offset: u64, length: u64, buffer: &mut [u8]) -> std::io::Result<()> {
    let end = offset + length;
    let mut at = offset;
    while at < end {
        let want = ((end - at) as usize).min(buffer.len());
        match rustix::io::pread(fd.as_fd(), &mut buffer[..want], at) {
            Ok(0) => return Ok(()),
            Ok(n) => at += n as u64,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_priorities_parse_and_encode() {
        assert_eq!("be:4".parse(), Ok(IoPriority::BestEffort(4)));
        assert_eq!("idle".parse(), Ok(IoPriority::Idle));
        assert_eq!("rt:0".parse(), Ok(IoPriority::RealTime(0)));
        assert!("be:8".parse::<IoPriority>().is_err());
        assert!("best".parse::<IoPriority>().is_err());
        assert_eq!(IoPriority::BestEffort(4).value(), (2 << 13) | 4);
        assert_eq!(IoPriority::Idle.value(), 3 << 13);
        assert_eq!(IoPriority::RealTime(3).to_string(), "rt:3");
    }

    #[test]
    fn the_idle_cpu_class_makes_the_thread_sched_idle() {
        let policy_after = |class: CpuClass| {
            std::thread::spawn(move || {
                class.apply_to_this_thread().unwrap();
                // SAFETY: sched_getscheduler(0) asks about the calling thread.
                unsafe { libc::sched_getscheduler(0) }
            })
            .join()
            .unwrap()
        };
        // SAFETY: as above.
        let inherited = unsafe { libc::sched_getscheduler(0) };
        assert_eq!(policy_after(CpuClass::Normal), inherited);
        assert_eq!(policy_after(CpuClass::Idle), libc::SCHED_IDLE);
    }

    #[test]
    fn mem_available_is_read() {
        assert!(mem_available().is_some_and(|b| b > 0));
    }
}
