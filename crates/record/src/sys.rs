//! The recorder's raw system calls: the only `unsafe` code of the crate, on nix (and its
//! re-exported libc bindings for the few calls nix does not wrap). Public only for the
//! crate's own test fixture binary.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;
use nix::sys::mman::{MapFlags, MmapAdvise, ProtFlags, madvise, mmap, munmap};
use nix::unistd::{ForkResult, Pid, fork};

/// A netlink socket of the kernel's connector (`NETLINK_CONNECTOR`, which nix does not name).
pub(crate) fn connector_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let raw = unsafe {
        libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_CONNECTOR)
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;

/// The FIEMAP ioctl on `file`, whose request and reply are `words` (a `struct fiemap`
/// header and its extents, 8-byte aligned as the kernel wants them).
pub(crate) fn fiemap(file: &File, words: &mut [u64]) -> io::Result<()> {
    // SAFETY: `words` is 8-aligned and the caller sized it for the extent count it asks for.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, words.as_mut_ptr()) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// What the guardian does if the recorder dies: the paths prepared before the fork,
/// since the forked process may not allocate.
pub(crate) struct GuardianPaths {
    pub tracing_on: Vec<CString>,
    pub dirs: Vec<CString>,
}

/// Double-forks the guardian, which waits on `read` (see guardian.rs), and reaps the
/// intermediate child, so the guardian is nobody's child.
pub(crate) fn spawn_guardian(read: &OwnedFd, paths: &GuardianPaths) -> io::Result<()> {
    // SAFETY: the children only make async-signal-safe calls on data built before the fork.
    match unsafe { fork() }? {
        ForkResult::Child => {
            // SAFETY: as above; `_exit` never returns.
            unsafe {
                if libc::fork() == 0 {
                    guard(read.as_raw_fd(), paths);
                }
                libc::_exit(0);
            }
        }
        ForkResult::Parent { child } => {
            let _ = nix::sys::wait::waitpid(child, None);
            Ok(())
        }
    }
}

/// The guardian's whole life. Never returns.
unsafe fn guard(read_fd: RawFd, p: &GuardianPaths) -> ! {
    // SAFETY: async-signal-safe calls only; every pointer comes from a live CString.
    unsafe {
        libc::setsid();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::dup2(read_fd, 0);
        let read_fd = 0;
        libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32);
        let mut byte = 0u8;
        let dismissed = loop {
            let n = libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
            if n == 1 {
                break byte == b'D';
            }
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                break false;
            }
        };
        if !dismissed {
            for path in &p.tracing_on {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            for dir in &p.dirs {
                for _ in 0..250 {
                    if libc::rmdir(dir.as_ptr()) == 0 || *libc::__errno_location() == libc::ENOENT {
                        break;
                    }
                    libc::usleep(20_000);
                }
            }
        }
        libc::_exit(0)
    }
}

/// Runs `child` in a forked process, which then exits with status 0; returns its pid.
/// Only for single-threaded programs (the test fixture).
pub fn fork_child(child: impl FnOnce()) -> io::Result<Pid> {
    // SAFETY: the caller is single-threaded, so the child may run any code.
    match unsafe { fork() }? {
        ForkResult::Child => {
            child();
            // SAFETY: ends the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

/// A shared read-only mapping of the first `len` bytes of `file`, unmapped on drop.
pub struct Mapping {
    addr: std::ptr::NonNull<libc::c_void>,
    len: usize,
}

impl Mapping {
    pub fn new(file: &File, len: usize) -> io::Result<Mapping> {
        let length = NonZeroUsize::new(len).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh read-only mapping; nothing else refers to its memory.
        let addr =
            unsafe { mmap(None, length, ProtFlags::PROT_READ, MapFlags::MAP_SHARED, file.as_fd(), 0) }?;
        Ok(Mapping { addr, len })
    }

    pub fn advise(&self, advice: MmapAdvise) -> io::Result<()> {
        // SAFETY: advice on our own mapping, whole.
        Ok(unsafe { madvise(self.addr, self.len, advice) }?)
    }

    /// Reads byte `at` of the mapping (a page fault if its page is not in).
    pub fn touch(&self, at: usize) -> u8 {
        assert!(at < self.len, "byte {at} is past the mapping's {} bytes", self.len);
        // SAFETY: `at` lies inside the mapping, which lives as long as `self`.
        unsafe { std::ptr::read_volatile(self.addr.as_ptr().cast::<u8>().add(at)) }
    }

    /// How many of the mapping's pages are in the page cache (mincore, which nix does not wrap).
    pub fn resident_pages(&self, page_size: usize) -> io::Result<usize> {
        let mut vec = vec![0u8; self.len.div_ceil(page_size)];
        // SAFETY: `vec` has one byte per page of the mapping.
        if unsafe { libc::mincore(self.addr.as_ptr(), self.len, vec.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference into it outlives `self`.
        let _ = unsafe { munmap(self.addr, self.len) };
    }
}
