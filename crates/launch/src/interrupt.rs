//! SIGINT and SIGTERM while commands run: caught (so we can end the command's tree
//! and still write our results), seen by every waiter through a pipe it can poll.
//!
//! While at least one [`Interrupts`] exists the two signals are caught; when the
//! last one is dropped they act by default again (terminate us). The handler is
//! async-signal-safe: it bumps a counter and writes one byte to the pipe of every
//! live [`Interrupts`]. Pipes live in a fixed pool and are never closed, so the
//! handler can never write into a descriptor that has been reused for a file.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::error::{LaunchError, Result};
use crate::sys;

const SLOTS: usize = 32;
const SIGNALS: [i32; 2] = [libc::SIGINT, libc::SIGTERM];

struct Slot {
    read: OwnedFd,
    write: OwnedFd,
}

struct Global {
    /// The write end of each pool pipe the handler must wake, or -1.
    wake: [std::sync::atomic::AtomicI32; SLOTS],
    pool: Mutex<Vec<Option<Slot>>>,
    counts: [AtomicU64; 2],
    catchers: AtomicUsize,
    default_action: Arc<AtomicBool>,
}

static GLOBAL: OnceLock<std::result::Result<Global, String>> = OnceLock::new();

fn global() -> Result<&'static Global> {
    let installed = GLOBAL.get_or_init(|| {
        let global = Global {
            wake: std::array::from_fn(|_| std::sync::atomic::AtomicI32::new(-1)),
            pool: Mutex::new((0..SLOTS).map(|_| None).collect()),
            counts: [AtomicU64::new(0), AtomicU64::new(0)],
            catchers: AtomicUsize::new(0),
            default_action: Arc::new(AtomicBool::new(true)),
        };
        for (i, &sig) in SIGNALS.iter().enumerate() {
            signal_hook::flag::register_conditional_default(sig, Arc::clone(&global.default_action))
                .map_err(|e| e.to_string())?;
            // SAFETY: the action only touches atomics and calls write(2) (sys::wake), both async-signal-safe.
            unsafe {
                signal_hook::low_level::register(sig, move || {
                    let Some(Ok(g)) = GLOBAL.get() else { return };
                    g.counts[i].fetch_add(1, Ordering::SeqCst);
                    for wake in &g.wake {
                        let fd = wake.load(Ordering::SeqCst);
                        if fd >= 0 {
                            sys::wake(fd);
                        }
                    }
                })
            }
            .map_err(|e| e.to_string())?;
        }
        Ok(global)
    });
    installed
        .as_ref()
        .map_err(|e| LaunchError::io("cannot catch SIGINT/SIGTERM", std::io::Error::other(e.clone())))
}

/// A registration to be told about SIGINT and SIGTERM; while it lives they are caught.
pub struct Interrupts {
    slot: usize,
    read: RawFd,
    seen: [u64; 2],
}

impl Interrupts {
    /// Starts catching SIGINT and SIGTERM (if not already) and registers a pollable pipe.
    pub fn catch() -> Result<Interrupts> {
        let g = global()?;
        let mut pool = g.pool.lock().unwrap_or_else(|e| e.into_inner());
        let slot = (0..SLOTS).find(|&i| g.wake[i].load(Ordering::SeqCst) < 0).ok_or_else(|| {
            LaunchError::io("too many concurrent launches", std::io::Error::other("32 at most"))
        })?;
        if pool[slot].is_none() {
            let (read, write) = sys::pipe(true).map_err(|e| LaunchError::io("pipe", e))?;
            pool[slot] = Some(Slot { read, write });
        }
        let Some(pipe) = &pool[slot] else { unreachable!("the slot was just filled") };
        drain(pipe.read.as_fd());
        g.wake[slot].store(pipe.write.as_raw_fd(), Ordering::SeqCst);
        g.catchers.fetch_add(1, Ordering::SeqCst);
        g.default_action.store(false, Ordering::SeqCst);
        let seen = [g.counts[0].load(Ordering::SeqCst), g.counts[1].load(Ordering::SeqCst)];
        Ok(Interrupts { slot, read: pipe.read.as_raw_fd(), seen })
    }

    /// Becomes readable when a signal arrives; then call [`Interrupts::take`].
    pub fn fd(&self) -> BorrowedFd<'static> {
        // SAFETY: pool pipes are never closed, so the descriptor outlives `self`.
        unsafe { BorrowedFd::borrow_raw(self.read) }
    }

    /// The signals received since the last call (in the order SIGINT, SIGTERM, each once).
    pub fn take(&mut self) -> Vec<i32> {
        let Ok(g) = global() else { return Vec::new() };
        drain(self.fd());
        let mut out = Vec::new();
        for (i, &sig) in SIGNALS.iter().enumerate() {
            let now = g.counts[i].load(Ordering::SeqCst);
            if now > self.seen[i] {
                out.push(sig);
            }
            self.seen[i] = now;
        }
        out
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        if let Ok(g) = global() {
            let _pool = g.pool.lock().unwrap_or_else(|e| e.into_inner());
            g.wake[self.slot].store(-1, Ordering::SeqCst);
            if g.catchers.fetch_sub(1, Ordering::SeqCst) == 1 {
                g.default_action.store(true, Ordering::SeqCst);
            }
        }
    }
}

fn drain(fd: BorrowedFd<'_>) {
    let mut buf = [0u8; 64];
    while matches!(sys::read(fd, &mut buf), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_live_registration_sees_a_signal_once() {
        let mut a = Interrupts::catch().unwrap();
        let mut b = Interrupts::catch().unwrap();
        assert!(a.take().is_empty());
        // SAFETY: raising a signal we are catching.
        unsafe { libc::raise(libc::SIGTERM) };
        assert_eq!(a.take(), [libc::SIGTERM]);
        assert_eq!(b.take(), [libc::SIGTERM]);
        assert!(a.take().is_empty());
        drop(b);
        let mut c = Interrupts::catch().unwrap();
        assert!(c.take().is_empty(), "a new registration starts with nothing pending");
        drop((a, c));
    }
}
