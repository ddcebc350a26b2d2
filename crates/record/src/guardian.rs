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
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::error::{RecordError, Result};
use crate::sys::{self, GuardianPaths};

pub struct Guardian {
    write: Option<OwnedFd>,
}

impl Guardian {
    /// Starts a guardian for the instance directories (which need not exist yet).
    pub fn spawn(instance_dirs: &[PathBuf]) -> Result<Guardian> {
        let cstr = |p: PathBuf| CString::new(p.as_os_str().as_bytes()).ok();
        let paths = GuardianPaths {
            tracing_on: instance_dirs.iter().filter_map(|d| cstr(d.join("tracing_on"))).collect(),
            dirs: instance_dirs.iter().filter_map(|d| cstr(d.clone())).collect(),
        };
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)
            .map_err(|e| RecordError::system("guardian pipe", e))?;
        sys::spawn_guardian(&read, &paths).map_err(|e| RecordError::system("guardian fork", e))?;
        Ok(Guardian { write: Some(write) })
    }

    /// Tells the guardian the recorder cleaned up, and lets it exit.
    pub fn dismiss(mut self) {
        if let Some(w) = self.write.take() {
            let _ = nix::unistd::write(&w, b"D");
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        // Dropped without `dismiss`: closing the pipe makes the guardian clean up.
        self.write.take();
    }
}
