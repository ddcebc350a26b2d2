//! Every system call of the prefetch crate, through libc: neither rustix nor nix has
//! `cachestat(2)`, `ioprio_set(2)` or `sched_setscheduler(2)`. Opening for reading,
//! page-cache advice, cache residency, the threads' CPU class and I/O priority, and
//! MemAvailable.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::os::unix::fs::OpenOptionsExt;

/// `0` from a call that returns 0 or −1 with errno, as a `Result`.
fn check(r: libc::c_long) -> io::Result<()> {
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Opens `path` read-only, close-on-exec and without updating its access time where
/// the caller may ask that (`O_NOATIME` is refused with EPERM on files of other users).
/// `NONBLOCK` and `NOCTTY` because the path may have become a FIFO or a terminal since
/// the caller checked it: such an open must neither wait for a writer nor take a
/// controlling terminal.
pub fn open_for_reading(path: &str) -> io::Result<File> {
    let open = |noatime| {
        OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | noatime).open(path)
    };
    match open(libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => open(0),
        other => other,
    }
}

fn fadvise(fd: BorrowedFd<'_>, offset: u64, length: u64, advice: libc::c_int) -> io::Result<()> {
    let too_large = |_| io::Error::from_raw_os_error(libc::EINVAL);
    let offset = libc::off_t::try_from(offset).map_err(too_large)?;
    let length = libc::off_t::try_from(length).map_err(too_large)?;
    // SAFETY: posix_fadvise takes only integers and returns the error itself.
    match unsafe { libc::posix_fadvise(fd.as_raw_fd(), offset, length, advice) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// `FADV_RANDOM` on the whole file: reads of it bring in no readahead.
pub fn advise_random(fd: impl AsFd) -> io::Result<()> {
    fadvise(fd.as_fd(), 0, 0, libc::POSIX_FADV_RANDOM)
}

/// `FADV_WILLNEED` on `offset..offset+length` (to the end of the file when `length`
/// is 0): the kernel starts reading it in and returns at once.
pub fn advise_will_need(fd: impl AsFd, offset: u64, length: u64) -> io::Result<()> {
    fadvise(fd.as_fd(), offset, length, libc::POSIX_FADV_WILLNEED)
}

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

/// libc defines `SYS_cachestat` for a few architectures only; the number is the same on all.
const SYS_CACHESTAT: libc::c_long = 451;

/// Pages of `offset..offset+length` in the page cache. `Err` when the kernel will
/// not say (ENOSYS before Linux 6.5; EPERM for files the caller may not write,
/// unprivileged): the caller must then assume nothing is resident.
pub fn cached_pages(fd: BorrowedFd<'_>, offset: u64, length: u64) -> io::Result<u64> {
    let range = CachestatRange { off: offset, len: length };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat(fd, &range, &stat, 0) with pointers to live repr(C) structs.
    check(unsafe { libc::syscall(SYS_CACHESTAT, fd.as_raw_fd(), &range, &mut stat, 0u32) })?;
    Ok(stat.nr_cache)
}

/// Puts the calling thread in `SCHED_IDLE`.
pub fn schedule_this_thread_idle() -> io::Result<()> {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler(0 = the calling thread, SCHED_IDLE, &param) with a live param.
    check(unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) }.into())
}

#[cfg(test)]
pub use libc::SCHED_IDLE;

/// The scheduling policy of the calling thread (`SCHED_*`).
#[cfg(test)]
pub fn scheduling_policy_of_this_thread() -> libc::c_int {
    // SAFETY: sched_getscheduler(0) asks about the calling thread.
    unsafe { libc::sched_getscheduler(0) }
}

/// Sets the I/O priority of the calling thread (and of the I/O it submits) to
/// `value`, class and level as `ioprio_set(2)` takes them.
pub fn set_this_thread_io_priority(value: i32) -> io::Result<()> {
    const IOPRIO_WHO_PROCESS: libc::c_int = 1;
    // SAFETY: ioprio_set(IOPRIO_WHO_PROCESS, 0 = the calling thread, value) takes only integers.
    check(unsafe { libc::syscall(libc::SYS_ioprio_set, IOPRIO_WHO_PROCESS, 0, value) })
}

/// MemAvailable of /proc/meminfo, bytes.
pub fn mem_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_available_is_read() {
        assert!(mem_available().is_some_and(|b| b > 0));
    }

    #[test]
    fn ranges_beyond_an_off_t_are_refused_before_the_call() {
        let file = File::open("/proc/self/exe").unwrap();
        let err = advise_will_need(&file, u64::MAX, 1).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EINVAL));
        assert!(advise_will_need(&file, 0, 4096).is_ok());
    }
}
