//! `window` readiness (placeholder until the X11 watcher lands).

use std::os::fd::BorrowedFd;

use crate::clock::BootNanos;
use crate::error::{LaunchError, Result};

pub(crate) struct Seen {
    pub(crate) time_ns: BootNanos,
    pub(crate) window: u32,
    pub(crate) pid: i32,
}

impl Seen {
    pub(crate) fn describe(&self) -> String {
        format!("window 0x{:x} of pid {}", self.window, self.pid)
    }
}

pub(crate) struct WindowWatcher {
    fd: std::os::fd::OwnedFd,
}

impl WindowWatcher {
    pub(crate) fn connect(_tree_root: i32) -> Result<WindowWatcher> {
        Err(LaunchError::Window("not supported yet".into()))
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        std::os::fd::AsFd::as_fd(&self.fd)
    }

    pub(crate) fn check(&mut self) -> Result<Option<Seen>> {
        Ok(None)
    }
}
