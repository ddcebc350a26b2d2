//! The bench crate's system calls, all through libc (page residency needs `mincore`,
//! which neither rustix nor nix offers): the root check, sync, page-cache advice,
//! device numbers, write access, the page size, file locks and `mincore`.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// `0` from a call that returns 0 or −1 with errno, as a `Result`.
fn check(r: libc::c_int) -> io::Result<()> {
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid takes no argument and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Writes every dirty page of every filesystem back.
pub fn sync() {
    // SAFETY: sync takes no argument and cannot fail.
    unsafe { libc::sync() }
}

/// Advises the kernel to drop `file`'s clean pages from the page cache.
pub fn fadvise_dontneed(file: &File) -> io::Result<()> {
    // SAFETY: an open descriptor, a whole-file range; posix_fadvise returns the error itself.
    match unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) } {
        0 => Ok(()),
        errno => Err(io::Error::from_raw_os_error(errno)),
    }
}

/// A device number's major and minor.
pub fn major_minor(dev: u64) -> (u32, u32) {
    (libc::major(dev), libc::minor(dev))
}

pub fn makedev(major: u32, minor: u32) -> u64 {
    libc::makedev(major, minor)
}

/// Whether this process may write `path` (`access(W_OK)`, with the real ids).
pub fn may_write(path: &Path) -> bool {
    let Ok(path) = CString::new(path.as_os_str().as_bytes()) else { return false };
    // SAFETY: a NUL-terminated path that lives across the call.
    check(unsafe { libc::access(path.as_ptr(), libc::W_OK) }).is_ok()
}

pub fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    u64::try_from(size).unwrap_or(4096)
}

/// Waits for a shared `flock` on `file`.
pub fn lock_shared(file: &File) -> io::Result<()> {
    // SAFETY: an open descriptor.
    check(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH) })
}

/// Takes an exclusive `flock` on `file` if no one else holds one, without waiting.
pub fn try_lock_exclusive(file: &File) -> io::Result<()> {
    // SAFETY: an open descriptor.
    check(unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) })
}

/// How many of the `len` bytes of `file` are in the page cache, by `mincore` on a mapping.
pub fn resident_bytes(file: &File, len: u64, page: u64) -> Option<u64> {
    if len == 0 {
        return Some(0);
    }
    let length = usize::try_from(len).ok()?;
    // SAFETY: a new read-only shared mapping of an open file, which nothing else sees.
    let addr = unsafe {
        libc::mmap(std::ptr::null_mut(), length, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0)
    };
    if addr == libc::MAP_FAILED {
        return None;
    }
    let mut vec = vec![0u8; len.div_ceil(page) as usize];
    // SAFETY: `addr..addr + length` is the mapping made above, and `vec` holds one byte
    // for each of its pages; the mapping is unmapped once and not used after.
    let ok = unsafe {
        let ok = libc::mincore(addr, length, vec.as_mut_ptr()) == 0;
        libc::munmap(addr, length);
        ok
    };
    ok.then(|| vec.iter().filter(|&&b| b & 1 == 1).count() as u64 * page)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_numbers_round_trip() {
        assert_eq!(major_minor(makedev(259, 65_537)), (259, 65_537));
        assert_eq!(major_minor(makedev(8, 1)), (8, 1));
    }

    #[test]
    fn a_file_just_written_is_resident() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3 * 4096]).unwrap();
        let file = File::open(&path).unwrap();
        let page = page_size();
        assert_eq!(resident_bytes(&file, 3 * 4096, page), Some((3 * 4096_u64).div_ceil(page) * page));
        assert_eq!(resident_bytes(&file, 0, page), Some(0));
        assert!(may_write(dir.path()));
        assert!(!may_write(Path::new("/nonexistent/dir")));
    }
}
