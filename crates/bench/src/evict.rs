//! Emptying the page cache for cold runs, and checking what stayed.
//!
//! `system`: `sync`, then `3` into `/proc/sys/vm/drop_caches` (root): every clean
//! page, dentry and inode of the machine; then a wait until the disks are quiet
//! ([`settle_disks`]), because every other running program re-reads what it was
//! using, and on a busy machine that burst would land in the measured run. `files`: `posix_fadvise(DONTNEED)` on each
//! file of the set, twice (pages under readahead in flight can survive one call).
//! Filesystem metadata: ext4 reads directory blocks, inode tables and extent blocks
//! through the block device's page cache (a directory's own mapping stays empty, so
//! fadvise on it does nothing), so `files` also advises DONTNEED on the block devices
//! holding the set ([`metadata_devices`]) when it may open them (root, or the disk
//! group): every clean cached block of those filesystems goes, other programs'
//! metadata on them included, but no file's data. Where the device cannot be opened
//! (some VMs refuse it even to root) its metadata stays cached, and the notes say so.
//! `files` cannot evict: pages of files outside the set, the dentry and inode caches
//! (no per-file way exists), dirty pages, and pages mapped by running processes
//! (shared libraries in use elsewhere, e.g. libc).
//!
//! Residency is asked with `cachestat(2)` (Linux 6.5+), or `mincore(2)` on a
//! mapping where cachestat is missing; both only when the answer is truthful: as
//! root, or on files we may write (for others, cachestat fails with EPERM and
//! mincore claims every page resident).

use std::collections::BTreeSet;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::counters::disk_read_bytes;
use crate::error::{BenchError, Result};
use crate::sys;

/// What `files` mode cannot evict, for the user.
pub const FILES_MODE_LIMITS: &str = "--evict files empties the page cache of the files in the set and, where it may \
open them, the cached metadata blocks (directories, inode tables) of the block devices holding them; files outside the \
set, the dentry and inode caches, metadata on a device it may not open, dirty pages and pages mapped by other running \
processes (shared libraries such as libc) stay cached, so its cold starts can skip some metadata reads of a real cold \
start and be faster (by up to ~10% on a 2-core VM whose disk could not be opened); residual residency is reported where \
the kernel tells it truthfully";

pub fn is_root() -> bool {
    sys::is_root()
}

/// `sync` + `drop_caches=3`, then [`settle_disks`].
pub fn drop_caches() -> Result<()> {
    if !is_root() {
        return Err(BenchError::SystemEvictNeedsRoot);
    }
    sys::sync();
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
            let _ = sys::fadvise_dontneed(&file);
        }
    }
    failed
}

/// The block devices (by path) whose page cache holds the metadata of the filesystems
/// that hold `paths`, for those this process may open; and a note for each it may not
/// (or that has no block device: tmpfs, overlayfs, btrfs subvolumes).
pub fn metadata_devices(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<String>) {
    let devices: BTreeSet<u64> =
        paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.dev()).collect();
    let mut openable = Vec::new();
    let mut notes = Vec::new();
    for dev in devices {
        let (major, minor) = sys::major_minor(dev);
        let path = match block_device_path(major, minor) {
            DevicePath::Found(path) => path,
            DevicePath::NotBlock => {
                notes.push(format!(
                    "files on device {major}:{minor} (no block device: tmpfs, overlayfs, btrfs or similar): \
                     their filesystem's metadata is not evicted"
                ));
                continue;
            }
            DevicePath::NoNode(path) => {
                notes.push(format!(
                    "filesystem metadata on block device {major}:{minor} stays cached: there is no device node \
                     {} for it here (a container?); only --evict system empties it",
                    path.display()
                ));
                continue;
            }
        };
        match std::fs::File::open(&path) {
            Ok(_) => openable.push(path),
            Err(e) => notes.push(format!(
                "filesystem metadata on {} ({major}:{minor}) stays cached: opening the device failed ({e}); \
                 only --evict system empties it",
                path.display()
            )),
        }
    }
    (openable, notes)
}

enum DevicePath {
    Found(PathBuf),
    /// Not a block device known to sysfs.
    NotBlock,
    /// A block device whose node `/dev/NAME` is missing, or is not that device.
    NoNode(PathBuf),
}

/// `/dev/NAME` of block device `major:minor`, from sysfs.
fn block_device_path(major: u32, minor: u32) -> DevicePath {
    let Ok(uevent) = std::fs::read_to_string(format!("/sys/dev/block/{major}:{minor}/uevent")) else {
        return DevicePath::NotBlock;
    };
    let Some(name) = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME=")) else {
        return DevicePath::NotBlock;
    };
    let path = Path::new("/dev").join(name);
    let is_it = std::fs::metadata(&path)
        .is_ok_and(|m| m.file_type().is_block_device() && m.rdev() == sys::makedev(major, minor));
    if is_it { DevicePath::Found(path) } else { DevicePath::NoNode(path) }
}

fn truthful(path: &Path) -> bool {
    is_root() || sys::may_write(path)
}

/// Bytes of `path` in the page cache, when the kernel answers truthfully.
pub fn cached_bytes(path: &Path) -> Option<u64> {
    if !truthful(path) {
        return None;
    }
    let file = std::fs::File::open(path).ok()?;
    let page = sys::page_size();
    // A length of 0 asks cachestat about the whole file.
    match coldstart_prefetch::replay::cached_pages(file.as_fd(), 0, 0) {
        Ok(pages) => Some(pages * page),
        // mincore needs the length, which a block device's metadata does not give.
        Err(e) if e.kind() == std::io::ErrorKind::Unsupported && !is_block_device(&file) => {
            sys::resident_bytes(&file, file.metadata().ok()?.len(), page)
        }
        Err(_) => None,
    }
}

fn is_block_device(file: &std::fs::File) -> bool {
    file.metadata().is_ok_and(|m| m.file_type().is_block_device())
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

    #[test]
    fn files_without_a_block_device_are_noted_not_evicted() {
        let (devices, notes) = metadata_devices(&[PathBuf::from("/proc/self/status")]);
        assert!(devices.is_empty());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].contains("no block device"), "{}", notes[0]);
        assert_eq!(metadata_devices(&[PathBuf::from("/nonexistent")]), (vec![], vec![]));
    }
}
