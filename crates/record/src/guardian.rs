//! A guardian process that removes the tracing instances if the recorder dies
//! without doing it itself (SIGKILL, a crash). It is double-forked, so it is
//! nobody's child the launcher could reap or end, holds only the read end of a
//! pipe, and wakes when the recorder's write end closes: a `D` byte first means
//! the recorder cleaned up; end-of-file alone means it died.
//!
//! Between fork and exit the guardian only makes async-signal-safe system calls
//! on data prepared before the fork (no allocation), because the recorder may
//! have other threads.

use std::ffi::CString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use nix::unistd::{ForkResult, fork};

use crate::error::{RecordError, Result};

pub struct Guardian {
    write: Option<OwnedFd>,
}

struct Prepared {
    tracing_on: Vec<CString>,
    dirs: Vec<CString>,
}

impl Guardian {
    /// Starts a guardian for the instance directories (which need not exist yet).
    pub fn spawn(instance_dirs: &[PathBuf]) -> Result<Guardian> {
        let cstr = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).ok();
        let prepared = Prepared {
            tracing_on: instance_dirs.iter().filter_map(|d| cstr(d.join("tracing_on"))).collect(),
            dirs: instance_dirs.iter().filter_map(|d| cstr(d.clone())).collect(),
        };
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| RecordError::system("guardian pipe", e))?;
        // SAFETY: the child only calls async-signal-safe functions on pre-built data.
        match unsafe { fork() }.map_err(|e| RecordError::system("guardian fork", e))? {
            ForkResult::Child => {
                // SAFETY: as above; `_exit` never returns.
                unsafe {
                    if libc::fork() == 0 {
                        guard(read.as_raw_fd(), &prepared);
                    }
                    libc::_exit(0);
                }
            }
            ForkResult::Parent { child } => {
                drop(read);
                let _ = nix::sys::wait::waitpid(child, None);
                Ok(Guardian { write: Some(write) })
            }
        }
    }

    /// Tells the guardian the recorder cleaned up, and lets it exit.
    pub fn dismiss(mut self) {
        if let Some(w) = self.write.take() {
            let _ = nix::unistd::write(&w, b"D");
        }
    }
}

/// The guardian's whole life. Never returns.
unsafe fn guard(read_fd: i32, p: &Prepared) -> ! {
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

impl Drop for Guardian {
    fn drop(&mut self) {
        // Dropped without `dismiss`: closing the pipe makes the guardian clean up.
        self.write.take();
    }
}
