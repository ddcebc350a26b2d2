//! Names the files behind page-cache events: fanotify reports every open on the
//! marked filesystems with an fd; `fstat` of it gives the (dev, inode) that tracefs
//! events carry, and the path is read (`/proc/self/fd/N`) only the first time an
//! inode is seen. Marks are per filesystem (`FAN_MARK_FILESYSTEM`), so daemonized
//! processes are covered too, and so are the opens of a container's processes, whose
//! paths are then put in the host's terms (`host_path`).

use std::collections::HashSet;
use std::os::fd::{AsFd, AsRawFd};
use std::path::PathBuf;
use std::sync::Arc;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::fanotify::{EventFFlags, Fanotify, InitFlags, MarkFlags, MaskFlags};
use nix::sys::stat::SFlag;
use serde::{Deserialize, Serialize};

use crate::capture::host_path::HostPaths;
use crate::capture::{Stop, boottime_ns};
use crate::error::{RecordError, Result};
use crate::spool::LineWriter;
use crate::system::Mount;

/// How long the thread lets opens accumulate after the first one wakes it.
const BATCH_DELAY: std::time::Duration = std::time::Duration::from_millis(10);

/// One open, as spooled. `path`, `size` and `mtime_ns` only on the first open of an inode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenRecord {
    pub t: i64,
    pub pid: i32,
    /// `st_dev` in the user encoding.
    pub dev: u64,
    pub ino: u64,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub exec: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtime_ns: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<bool>,
}

/// What the fanotify thread counted.
#[derive(Clone, Debug, Default)]
pub struct OpenStats {
    pub events: u64,
    pub overflows: u64,
    pub marked: Vec<PathBuf>,
    pub unmarked: Vec<(PathBuf, String)>,
}

/// A fanotify group marked on every disk-backed filesystem.
pub struct OpenWatch {
    group: Fanotify,
    host_paths: HostPaths,
    pub stats: OpenStats,
}

impl OpenWatch {
    pub fn new(mounts: &[Mount]) -> Result<OpenWatch> {
        let flags = InitFlags::FAN_CLASS_NOTIF
            | InitFlags::FAN_CLOEXEC
            | InitFlags::FAN_NONBLOCK
            | InitFlags::FAN_UNLIMITED_QUEUE;
        let fflags = EventFFlags::O_RDONLY | EventFFlags::O_LARGEFILE | EventFFlags::O_CLOEXEC;
        let group = Fanotify::init(flags, fflags).map_err(|e| {
            RecordError::Fanotify(format!(
                "fanotify_init failed ({e}); the recorder needs fanotify (CONFIG_FANOTIFY) and CAP_SYS_ADMIN"
            ))
        })?;
        let mut stats = OpenStats::default();
        let mut seen = HashSet::new();
        for m in mounts.iter().filter(|m| m.dev.major != 0) {
            if !seen.insert(m.dev) {
                continue;
            }
            let mask = MaskFlags::FAN_OPEN | MaskFlags::FAN_OPEN_EXEC;
            match group.mark(
                MarkFlags::FAN_MARK_ADD | MarkFlags::FAN_MARK_FILESYSTEM,
                mask,
                nix::fcntl::AT_FDCWD,
                Some(&m.mount_point),
            ) {
                Ok(()) => stats.marked.push(m.mount_point.clone()),
                Err(e) => stats.unmarked.push((m.mount_point.clone(), e.to_string())),
            }
        }
        if stats.marked.is_empty() {
            return Err(RecordError::Fanotify("no filesystem could be marked".into()));
        }
        Ok(OpenWatch { group, host_paths: HostPaths::new(mounts.to_vec()), stats })
    }

    /// Spools opens until `stop` fires, then reads what is queued and returns the counts.
    pub fn run(mut self, mut out: LineWriter, stop: Arc<Stop>) -> Result<OpenStats> {
        let own_pid = std::process::id() as i32;
        let mut known: HashSet<(u64, u64)> = HashSet::new();
        loop {
            let stopped = {
                let mut fds = [
                    PollFd::new(self.group.as_fd(), PollFlags::POLLIN),
                    PollFd::new(stop.fd(), PollFlags::POLLIN),
                ];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(e) => return Err(RecordError::system("fanotify: poll", e)),
                }
                fds[1].revents().is_some_and(|r| !r.is_empty())
            };
            if !stopped {
                // Opens come one by one; waking for each costs more than handling it.
                // The event fd keeps its inode alive, so a short delay loses nothing.
                std::thread::sleep(BATCH_DELAY);
            }
            loop {
                let events = match self.group.read_events() {
                    Ok(ev) => ev,
                    Err(Errno::EAGAIN) | Err(Errno::EINTR) => break,
                    Err(e) => return Err(RecordError::system("fanotify: read", e)),
                };
                if events.is_empty() {
                    break;
                }
                let t = boottime_ns();
                for ev in events {
                    if ev.mask().contains(MaskFlags::FAN_Q_OVERFLOW) {
                        self.stats.overflows += 1;
                        continue;
                    }
                    let Some(fd) = ev.fd() else { continue };
                    if ev.pid() == own_pid {
                        continue;
                    }
                    self.stats.events += 1;
                    let Ok(st) = nix::sys::stat::fstat(fd) else { continue };
                    let key = (st.st_dev, st.st_ino);
                    let mut rec = OpenRecord {
                        t,
                        pid: ev.pid(),
                        dev: st.st_dev,
                        ino: st.st_ino,
                        exec: ev.mask().contains(MaskFlags::FAN_OPEN_EXEC),
                        path: None,
                        size: None,
                        mtime_ns: None,
                        dir: None,
                    };
                    if known.insert(key) {
                        let link = format!("/proc/self/fd/{}", fd.as_raw_fd());
                        rec.path = std::fs::read_link(link)
                            .ok()
                            .and_then(|p| {
                                self.host_paths.resolve(p, fd.as_raw_fd(), ev.pid(), st.st_dev, st.st_ino)
                            })
                            .map(|p| p.to_string_lossy().into_owned());
                        rec.size = Some(st.st_size as u64);
                        rec.mtime_ns = Some(st.st_mtime * 1_000_000_000 + st.st_mtime_nsec);
                        rec.dir =
                            Some(SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR);
                    }
                    out.push(&rec)?;
                }
            }
            out.flush()?;
            if stopped {
                return Ok(self.stats);
            }
        }
    }
}
