//! Emptying the page cache for cold runs, and checking what stayed.
//!
//! `system`: `sync`, then `3` into `/proc/sys/vm/drop_caches` (root): every clean
//! page, dentry and inode of the machine; then a wait until the disks are quiet
//! ([`settle_disks`]), because every other running program re-reads what it was
//! using, and on a busy machine that burst would land in the measured run. `files`: `posix_fadvise(DONTNEED)` on each
//! file of the set, twice (pages under readahead in flight can survive one call).
//! `files` cannot evict: pages of files outside the set, filesystem metadata
//! (directories, inode tables) and the dentry/inode caches, dirty pages, and pages
//! mapped by running processes (shared libraries in use elsewhere, e.g. libc).
//! Metadata is out of reach because ext4 reads directory blocks and inode tables
//! through the block device's page cache (a directory's own mapping stays empty, so
//! fadvise on it does nothing), and opening the disk is refused even to root on the
//! machines measured; only drop_caches empties it.
//!
//! Residency is asked with `cachestat(2)` (Linux 6.5+), or `mincore(2)` on a
//! mapping where cachestat is missing; both only when the answer is truthful: as
//! root, or on files we may write (for others, cachestat fails with EPERM and
//! mincore claims every page resident).

use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::counters::disk_read_bytes;
use crate::error::{BenchError, Result};

/// What `files` mode cannot evict, for the user.
pub const FILES_MODE_LIMITS: &str = "--evict files empties only the page cache of the files in the set: files \
outside it, filesystem metadata (directories and inode tables, which ext4 caches in the block device's page cache, \
and the dentry and inode caches), dirty pages and pages mapped by other running processes (shared libraries such as \
libc) stay cached, so its cold starts skip the metadata reads of a real cold start and can be faster (by up to ~10% on \
a 2-core VM); residual residency is reported where the kernel tells it truthfully";

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// `sync` + `drop_caches=3`, then [`settle_disks`].
pub fn drop_caches() -> Result<()> {
    if !is_root() {
        return Err(BenchError::SystemEvictNeedsRoot);
    }
    rustix::fs::sync();
    let path = "/proc/sys/vm/drop_caches";
    std::fs::write(path, "3\n").map_err(|e| BenchError::file(path, e))?;
    settle_disks();
    Ok(())
}

/// How long one look at the disks lasts, what counts as quiet in it, and the
/// longest wait: the programs of a busy 2-core VM re-read 100 MB to 1 GB after
/// drop_caches, mostly within the first second or two.
const SETTLE_WINDOW: Duration = Duration::from_millis(200);
const SETTLE_QUIET_BYTES: u64 = 1 << 20;
const SETTLE_MAX: Duration = Duration::from_secs(3);

/// Whether a window in which the disks read `bytes` is quiet.
pub fn is_quiet(bytes: u64) -> bool {
    bytes < SETTLE_QUIET_BYTES
}

/// Waits until the machine's disks read less than 1 MiB in 200 ms, at most 3 s;
/// returns the time waited (zero without `/proc/diskstats`).
pub fn settle_disks() -> Duration {
    let start = Instant::now();
    let Some(mut before) = disk_read_bytes() else { return Duration::ZERO };
    while start.elapsed() < SETTLE_MAX {
        std::thread::sleep(SETTLE_WINDOW);
        let Some(now) = disk_read_bytes() else { break };
        if is_quiet(now.saturating_sub(before)) {
            break;
        }
        before = now;
    }
    start.elapsed()
}

/// DONTNEED on every file, twice; returns how many files could not be opened.
pub fn fadvise_dontneed(paths: &[PathBuf]) -> usize {
    let mut failed = 0;
    for path in paths {
        let Ok(file) = std::fs::File::open(path) else {
            failed += 1;
            continue;
        };
        for _ in 0..2 {
            let _ = rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed);
        }
    }
    failed
}

fn truthful(path: &Path) -> bool {
    is_root() || rustix::fs::access(path, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Bytes of `path` in the page cache, when the kernel answers truthfully.
pub fn cached_bytes(path: &Path) -> Option<u64> {
    if !truthful(path) {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let page = rustix::param::page_size() as u64;
    // A length of 0 asks cachestat about the whole file.
    match coldstart_prefetch::replay::cached_pages(file.as_fd(), 0, 0) {
        Ok(pages) => Some(pages * page),
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => mincore_bytes(&file, page),
        Err(_) => None,
    }
}

fn mincore_bytes(file: &std::fs::File, page: u64) -> Option<u64> {
    let len = file.metadata().ok()?.len();
    if len == 0 {
        return Some(0);
    }
    // SAFETY: a read-only mapping of an open file, unmapped before returning.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            len as usize,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        if addr == libc::MAP_FAILED {
            return None;
        }
        let mut vec = vec![0u8; len.div_ceil(page) as usize];
        let ok = libc::mincore(addr, len as usize, vec.as_mut_ptr()) == 0;
        libc::munmap(addr, len as usize);
        ok.then(|| vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page)
    }
}

/// Bytes of the set still cached (summed over the files the kernel answers for),
/// and how many files it would not answer for.
pub fn residual(paths: &[PathBuf]) -> (Option<u64>, usize) {
    let mut total = None;
    let mut unknown = 0;
    for path in paths {
        match cached_bytes(path) {
            Some(b) => *total.get_or_insert(0) += b,
            None => unknown += 1,
        }
    }
    (total, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_means_under_a_mebibyte_per_window() {
        assert!(is_quiet(0) && is_quiet((1 << 20) - 1));
        assert!(!is_quiet(1 << 20) && !is_quiet(500_000_000));
    }
}
