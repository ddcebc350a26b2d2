//! Bootchart-style samples at a fixed rate, woken by a timerfd (no busy polling):
//! the system CPU counters and run queue from /proc/stat, /proc/diskstats, and
//! /proc/PID/stat of every live process in scope. Raw cumulative counters are
//! spooled; rates are computed when the trace is built.

use std::fs;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec};
use serde::{Deserialize, Serialize};

use crate::capture::{SharedScope, Stop, boottime_ns};
use crate::error::{RecordError, Result};
use crate::spool::{DiskCounters, LineWriter};
use crate::system::parse_diskstats;

/// The `cpu` line of /proc/stat (in clock ticks) and the run queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    pub running: u32,
    pub blocked: u32,
}

/// Counters of one process from /proc/PID/stat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcCounters {
    pub pid: i32,
    pub state: char,
    pub utime: u64,
    pub stime: u64,
    pub majflt: u64,
    pub rss_pages: u64,
}

/// One sample as spooled.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRecord {
    /// CLOCK_BOOTTIME ns.
    pub t: i64,
    pub cpu: CpuCounters,
    pub disks: Vec<DiskCounters>,
    pub procs: Vec<ProcCounters>,
}

pub fn parse_proc_stat(text: &str) -> CpuCounters {
    let mut c = CpuCounters::default();
    for line in text.lines() {
        let mut f = line.split_whitespace();
        match f.next() {
            Some("cpu") => {
                let v: Vec<u64> = f.filter_map(|x| x.parse().ok()).collect();
                let g = |i: usize| v.get(i).copied().unwrap_or(0);
                (c.user, c.nice, c.system, c.idle) = (g(0), g(1), g(2), g(3));
                (c.iowait, c.irq, c.softirq, c.steal) = (g(4), g(5), g(6), g(7));
            }
            Some("procs_running") => c.running = f.next().and_then(|x| x.parse().ok()).unwrap_or(0),
            Some("procs_blocked") => c.blocked = f.next().and_then(|x| x.parse().ok()).unwrap_or(0),
            _ => {}
        }
    }
    c
}

/// Parses /proc/PID/stat; the command name may hold spaces and parentheses.
pub fn parse_pid_stat(pid: i32, text: &str) -> Option<ProcCounters> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(ProcCounters {
        pid,
        state: f.first()?.chars().next()?,
        majflt: n(9)?,
        utime: n(11)?,
        stime: n(12)?,
        rss_pages: n(21)?,
    })
}

fn all_pids() -> Vec<i32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Takes one sample now.
pub fn sample(scope: &SharedScope) -> SampleRecord {
    let t = boottime_ns();
    let cpu = parse_proc_stat(&fs::read_to_string("/proc/stat").unwrap_or_default());
    let disks = parse_diskstats(&fs::read_to_string("/proc/diskstats").unwrap_or_default())
        .into_iter()
        .filter(|d| d.read_ios + d.write_ios > 0)
        .collect();
    let pids: Vec<i32> = match scope.lock() {
        Ok(s) if s.system => Vec::new(),
        Ok(s) => s.alive.iter().copied().collect(),
        Err(_) => Vec::new(),
    };
    let system = scope.lock().map(|s| s.system).unwrap_or(false);
    let pids = if system { all_pids() } else { pids };
    let procs = pids
        .into_iter()
        .filter_map(|pid| parse_pid_stat(pid, &fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect();
    SampleRecord { t, cpu, disks, procs }
}

/// Samples at `hz` until `stop` fires, plus one last sample.
pub fn run(hz: f64, mut out: LineWriter, scope: SharedScope, stop: Arc<Stop>) -> Result<u64> {
    let period = Duration::from_secs_f64(1.0 / hz.clamp(0.1, 1000.0));
    let spec = Timespec { tv_sec: period.as_secs() as i64, tv_nsec: period.subsec_nanos() as i64 };
    let timer = rustix::time::timerfd_create(TimerfdClockId::Boottime, TimerfdFlags::CLOEXEC)
        .map_err(|e| RecordError::system("timerfd", e))?;
    rustix::time::timerfd_settime(
        &timer,
        TimerfdTimerFlags::empty(),
        &Itimerspec { it_interval: spec, it_value: spec },
    )
    .map_err(|e| RecordError::system("timerfd", e))?;
    let mut count = 0;
    loop {
        out.push(&sample(&scope))?;
        out.flush()?;
        count += 1;
        let mut fds =
            [PollFd::new(timer.as_fd(), PollFlags::POLLIN), PollFd::new(stop.fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(RecordError::system("sampler poll", e)),
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            out.push(&sample(&scope))?;
            out.flush()?;
            return Ok(count + 1);
        }
        let mut expirations = [0u8; 8];
        let _ = rustix::io::read(&timer, &mut expirations);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pid_stat_with_odd_comm() {
        let text = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 7 0 11 22 0 0 20 0 1 0 500 1000000 250 18446744073709551615";
        let p = parse_pid_stat(42, text).unwrap();
        assert_eq!((p.state, p.majflt, p.utime, p.stime, p.rss_pages), ('S', 7, 11, 22, 250));
        assert_eq!(parse_pid_stat(1, "1 (x"), None);
    }

    #[test]
    fn parses_proc_stat() {
        let c = parse_proc_stat(
            "cpu  10 1 20 300 4 0 2 0 0 0\ncpu0 1 1 1 1 1 1 1 1\nprocs_running 3\nprocs_blocked 1\n",
        );
        assert_eq!((c.user, c.nice, c.system, c.idle, c.iowait, c.softirq), (10, 1, 20, 300, 4, 2));
        assert_eq!((c.running, c.blocked), (3, 1));
    }
}
