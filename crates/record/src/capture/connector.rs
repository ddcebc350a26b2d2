//! The process tree from the kernel's proc connector (netlink `PROC_EVENTS`):
//! fork with parent and child thread-group ids, exec, exit with its status, comm
//! changes, system-wide and with reparenting. At each exec of a process in scope
//! its argv (`/proc/PID/cmdline`) and executable are read at once, before it can
//! exec again or exit.

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::Arc;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::socket::{MsgFlags, NetlinkAddr, bind, recv, send, setsockopt, sockopt};
use serde::{Deserialize, Serialize};

use crate::capture::bpf::ScopeMap;
use crate::capture::{SharedScope, Stop};
use crate::error::{RecordError, Result};
use crate::frame_pointers::Known;
use crate::spool::LineWriter;

const CN_IDX_PROC: u32 = 1;
const CN_VAL_PROC: u32 = 1;
const PROC_CN_MCAST_LISTEN: u32 = 1;
const PROC_EVENT_FORK: u32 = 0x1;
const PROC_EVENT_EXEC: u32 = 0x2;
const PROC_EVENT_COMM: u32 = 0x200;
const PROC_EVENT_EXIT: u32 = 0x8000_0000;
const NLMSG_DONE: u16 = 3;
const NLMSG_HDRLEN: usize = 16;
const CN_MSG_HDRLEN: usize = 20;

/// A process event as spooled; `t` is CLOCK_MONOTONIC ns (the connector's clock).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "k", rename_all = "snake_case")]
pub enum ProcRecord {
    Fork {
        t: i64,
        ptid: i32,
        ppid: i32,
        tid: i32,
        pid: i32,
    },
    Exec {
        t: i64,
        tid: i32,
        pid: i32,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exe: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        argv: Option<Vec<String>>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        comm: Option<String>,
    },
    Exit {
        t: i64,
        tid: i32,
        pid: i32,
        code: u32,
        signal: u32,
    },
    Comm {
        t: i64,
        tid: i32,
        pid: i32,
        comm: String,
    },
    /// Messages the socket dropped (ENOBUFS).
    Lost {
        t: i64,
    },
}

/// A proc connector socket subscribed to process events.
pub struct ProcWatch {
    sock: OwnedFd,
    frame_pointers: Option<FramePointerMarks>,
}

/// Marks, at their exec, the processes whose executable earlier recordings found to have
/// trustworthy frame pointers, so that their CPU samples copy no stack.
pub struct FramePointerMarks {
    pub scope: ScopeMap,
    pub known: Known,
}

impl FramePointerMarks {
    fn at_exec(&self, pid: i32, exe: Option<&str>) {
        if let Some(exe) = exe
            && self.known.trusts_process(pid, exe)
        {
            // A process that exited already needs no mark; its samples copied their stacks.
            let _ = self.scope.mark_frame_pointers(pid);
        }
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

impl ProcWatch {
    pub fn new() -> Result<ProcWatch> {
        let sock =
            crate::sys::connector_socket().map_err(|e| RecordError::system("proc connector: socket", e))?;
        let size = 8 << 20;
        if setsockopt(&sock, sockopt::RcvBufForce, &size).is_err() {
            let _ = setsockopt(&sock, sockopt::RcvBuf, &size);
        }
        bind(sock.as_raw_fd(), &NetlinkAddr::new(0, CN_IDX_PROC))
            .map_err(|e| RecordError::system("proc connector: bind", e))?;
        let mut msg = [0u8; NLMSG_HDRLEN + CN_MSG_HDRLEN + 4];
        let len = msg.len() as u32;
        msg[0..4].copy_from_slice(&len.to_ne_bytes());
        msg[4..6].copy_from_slice(&NLMSG_DONE.to_ne_bytes());
        msg[12..16].copy_from_slice(&std::process::id().to_ne_bytes());
        msg[16..20].copy_from_slice(&CN_IDX_PROC.to_ne_bytes());
        msg[20..24].copy_from_slice(&CN_VAL_PROC.to_ne_bytes());
        msg[32..34].copy_from_slice(&4u16.to_ne_bytes());
        msg[36..40].copy_from_slice(&PROC_CN_MCAST_LISTEN.to_ne_bytes());
        send(sock.as_raw_fd(), &msg, MsgFlags::empty())
            .map_err(|e| RecordError::system("proc connector: subscribe", e))?;
        Ok(ProcWatch { sock, frame_pointers: None })
    }

    /// Marks the processes that exec a program with trustworthy frame pointers.
    pub fn mark_frame_pointers(&mut self, marks: FramePointerMarks) {
        self.frame_pointers = Some(marks);
    }

    /// Spools process events until `stop` fires; returns how many messages were lost.
    pub fn run(self, mut out: LineWriter, scope: SharedScope, stop: Arc<Stop>) -> Result<u64> {
        let mut buf = vec![0u8; 64 << 10];
        let mut lost = 0;
        loop {
            let stopped = {
                let mut fds = [
                    PollFd::new(self.sock.as_fd(), PollFlags::POLLIN),
                    PollFd::new(stop.fd(), PollFlags::POLLIN),
                ];
                match poll(&mut fds, PollTimeout::NONE) {
                    Ok(_) | Err(Errno::EINTR) => {}
                    Err(e) => return Err(RecordError::system("proc connector poll", e)),
                }
                fds[1].revents().is_some_and(|r| !r.is_empty())
            };
            loop {
                let n = match recv(self.sock.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                    Ok(n) => n,
                    Err(Errno::EAGAIN | Errno::EINTR) => break,
                    Err(Errno::ENOBUFS) => {
                        lost += 1;
                        out.push(&ProcRecord::Lost { t: crate::capture::monotonic_ns() })?;
                        continue;
                    }
                    Err(e) => return Err(RecordError::system("proc connector recv", e)),
                };
                let mut at = 0;
                while at + NLMSG_HDRLEN <= n {
                    let Some(len) = u32_at(&buf, at).map(|l| l as usize) else { break };
                    if len < NLMSG_HDRLEN || at + len > n {
                        break;
                    }
                    if let Some(rec) = parse_event(&buf[at + NLMSG_HDRLEN + CN_MSG_HDRLEN..at + len]) {
                        out.push(&enrich(rec, &scope, self.frame_pointers.as_ref()))?;
                    }
                    at += (len + 3) & !3;
                }
            }
            out.flush()?;
            if stopped {
                return Ok(lost);
            }
        }
    }
}

/// Parses one `struct proc_event`.
pub fn parse_event(ev: &[u8]) -> Option<ProcRecord> {
    let what = u32_at(ev, 0)?;
    let t = i64::from_ne_bytes(ev.get(8..16)?.try_into().ok()?);
    let d = |i: usize| u32_at(ev, 16 + 4 * i).map(|v| v as i32);
    Some(match what {
        PROC_EVENT_FORK => ProcRecord::Fork { t, ptid: d(0)?, ppid: d(1)?, tid: d(2)?, pid: d(3)? },
        PROC_EVENT_EXEC => ProcRecord::Exec { t, tid: d(0)?, pid: d(1)?, exe: None, argv: None, comm: None },
        PROC_EVENT_EXIT => {
            ProcRecord::Exit { t, tid: d(0)?, pid: d(1)?, code: d(2)? as u32, signal: d(3)? as u32 }
        }
        PROC_EVENT_COMM => {
            let raw = ev.get(24..40)?;
            let n = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            ProcRecord::Comm {
                t,
                tid: d(0)?,
                pid: d(1)?,
                comm: String::from_utf8_lossy(&raw[..n]).into_owned(),
            }
        }
        _ => return None,
    })
}

/// Keeps the scope up to date and reads argv and exe at exec of processes in scope.
fn enrich(rec: ProcRecord, scope: &SharedScope, frame_pointers: Option<&FramePointerMarks>) -> ProcRecord {
    let Ok(mut s) = scope.lock() else { return rec };
    match rec {
        ProcRecord::Fork { ppid, pid, tid, .. } if pid == tid && s.contains(ppid) => {
            s.add(pid);
            rec
        }
        ProcRecord::Exit { pid, tid, .. } if pid == tid => {
            s.alive.remove(&pid);
            rec
        }
        ProcRecord::Exec { t, tid, pid, .. } if s.contains(pid) => {
            drop(s);
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok();
            let argv = cmdline.map(|c| {
                c.split(|&b| b == 0)
                    .filter(|a| !a.is_empty())
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            });
            let exe =
                std::fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned());
            if let Some(marks) = frame_pointers {
                marks.at_exec(pid, exe.as_deref());
            }
            let comm =
                std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|c| c.trim_end().to_owned());
            ProcRecord::Exec { t, tid, pid, exe, argv, comm }
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fork_and_exit_events() {
        let mut ev = vec![0u8; 40];
        ev[0..4].copy_from_slice(&PROC_EVENT_FORK.to_ne_bytes());
        ev[8..16].copy_from_slice(&77i64.to_ne_bytes());
        for (i, v) in [10u32, 10, 12, 11].iter().enumerate() {
            ev[16 + 4 * i..20 + 4 * i].copy_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(parse_event(&ev), Some(ProcRecord::Fork { t: 77, ptid: 10, ppid: 10, tid: 12, pid: 11 }));
        ev[0..4].copy_from_slice(&PROC_EVENT_EXIT.to_ne_bytes());
        assert_eq!(
            parse_event(&ev),
            Some(ProcRecord::Exit { t: 77, tid: 10, pid: 10, code: 12, signal: 11 })
        );
    }
}
