//! The threads that run while the command starts. Each does only cheap work —
//! copy raw pages, note paths, read a few /proc files — and writes to the spool;
//! everything else waits until the command is done.

pub mod bpf;
pub mod connector;
pub mod fanotify;
pub mod host_path;
pub mod off_cpu;
pub mod pages;
pub mod perf;
pub mod sampler;
pub mod slow_calls;

use std::collections::HashSet;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, Mutex};

use crate::error::{RecordError, Result};

/// Wakes every capture thread when the recording ends: a pipe that becomes readable.
pub struct Stop {
    read: OwnedFd,
    write: Mutex<Option<OwnedFd>>,
}

impl Stop {
    pub fn new() -> Result<Arc<Stop>> {
        let (read, write) =
            nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| RecordError::system("pipe", e))?;
        Ok(Arc::new(Stop { read, write: Mutex::new(Some(write)) }))
    }

    /// Signals the stop (closing the write end makes the read end readable for all).
    pub fn fire(&self) {
        if let Ok(mut w) = self.write.lock() {
            w.take();
        }
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        self.read.as_fd()
    }

    pub fn fired(&self) -> bool {
        self.write.lock().map(|w| w.is_none()).unwrap_or(true)
    }
}

/// The processes (thread-group ids) of the recording's scope, shared between the
/// connector thread (which adds descendants as they fork) and the sampler.
#[derive(Debug, Default)]
pub struct Scope {
    /// Every process seen in the scope.
    pub all: HashSet<i32>,
    /// Those not yet exited.
    pub alive: HashSet<i32>,
    /// Everything is in scope (`--system`).
    pub system: bool,
}

pub type SharedScope = Arc<Mutex<Scope>>;

impl Scope {
    pub fn contains(&self, pid: i32) -> bool {
        self.system || self.all.contains(&pid)
    }

    pub fn add(&mut self, pid: i32) {
        self.all.insert(pid);
        self.alive.insert(pid);
    }
}

/// CLOCK_BOOTTIME now, in nanoseconds: the launcher's clock, which is also that of
/// `trace_clock=boot`.
pub use coldstart_launch::boottime_ns;

/// CLOCK_MONOTONIC now, in nanoseconds (the clock of proc connector timestamps).
pub fn monotonic_ns() -> i64 {
    nanos_of(nix::time::ClockId::CLOCK_MONOTONIC)
}

/// CPU time (user + system) the calling thread has used, in nanoseconds.
pub fn thread_cpu_ns() -> i64 {
    nanos_of(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)
}

/// A clock that cannot fail to be read on Linux (0 if it somehow does).
fn nanos_of(clock: nix::time::ClockId) -> i64 {
    nix::time::clock_gettime(clock).map_or(0, |ts| ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
}
