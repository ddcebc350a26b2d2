//! Bootchart-style samples at a fixed rate, woken by a timerfd (no busy polling):
//! the system CPU counters and run queue from /proc/stat, /proc/diskstats, and
//! /proc/PID/stat of every live process in scope. Raw cumulative counters are
//! spooled; rates are computed when the trace is built.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io::Read;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::time::Duration;

use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use procfs::process::Stat;
use procfs::{FromRead, FromReadSI, KernelStats};
use serde::{Deserialize, Serialize};

use crate::capture::{SharedScope, Stop, boottime_ns};
use crate::error::{RecordError, Result};
use crate::spool::{DiskCounters, LineWriter};
use crate::system::parse_diskstats;

/// The system CPU ticks of /proc/stat's `cpu` line, grouped as pybootchartgui counts
/// them, and the run queue.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuCounters {
    /// user + nice.
    pub user: u64,
    /// system + irq + softirq.
    pub system: u64,
    pub iowait: u64,
    /// idle + steal.
    pub idle: u64,
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

/// The lines of /proc/stat that [`KernelStats`] requires and this sampler uses: the
/// per-CPU lines and the long `intr` and `softirq` lines are left out, so that procfs,
/// which copies every line it is given, copies a few short ones.
fn is_kept_stat_line(line: &str) -> bool {
    ["cpu ", "ctxt ", "btime ", "processes ", "procs_running ", "procs_blocked "]
        .iter()
        .any(|prefix| line.starts_with(prefix))
}

/// Parses /proc/stat text.
pub fn parse_proc_stat(text: &str) -> Option<CpuCounters> {
    let mut kept = String::new();
    cpu_counters(text, &mut kept)
}

/// Parses /proc/stat text through `kept`, a buffer the caller reuses.
fn cpu_counters(text: &str, kept: &mut String) -> Option<CpuCounters> {
    kept.clear();
    for line in text.lines().filter(|line| is_kept_stat_line(line)) {
        kept.push_str(line);
        kept.push('\n');
    }
    let stats = KernelStats::from_read(kept.as_bytes(), procfs::current_system_info()).ok()?;
    let cpu = stats.total;
    Some(CpuCounters {
        user: cpu.user + cpu.nice,
        system: cpu.system + cpu.irq.unwrap_or(0) + cpu.softirq.unwrap_or(0),
        iowait: cpu.iowait.unwrap_or(0),
        idle: cpu.idle + cpu.steal.unwrap_or(0),
        running: stats.procs_running.unwrap_or(0),
        blocked: stats.procs_blocked.unwrap_or(0),
    })
}

/// Parses /proc/PID/stat; the command name may hold spaces and parentheses.
pub fn parse_pid_stat(pid: i32, text: &str) -> Option<ProcCounters> {
    let stat = Stat::from_read(text.as_bytes()).ok()?;
    Some(ProcCounters {
        pid,
        state: stat.state,
        utime: stat.utime,
        stime: stat.stime,
        majflt: stat.majflt,
        rss_pages: stat.rss,
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

/// Replaces `buf` with the text of the file at `path`.
fn read_into<'a>(buf: &'a mut String, path: &str) -> Option<&'a str> {
    buf.clear();
    File::open(path).ok()?.read_to_string(buf).ok()?;
    Some(buf)
}

/// Reads the /proc files of every sample. The sampler runs inside the start it
/// measures, so the text of each file and the path of each process's stat are read
/// into buffers kept across samples rather than allocated anew each time.
#[derive(Default)]
struct ProcReader {
    text: String,
    kept_stat_lines: String,
    path: String,
}

impl ProcReader {
    fn read(&mut self, path: &str) -> Option<&str> {
        read_into(&mut self.text, path)
    }

    fn cpu(&mut self) -> CpuCounters {
        let text = read_into(&mut self.text, "/proc/stat").unwrap_or_default();
        cpu_counters(text, &mut self.kept_stat_lines).unwrap_or_default()
    }

    fn process(&mut self, pid: i32) -> Option<ProcCounters> {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let _ = write!(path, "/proc/{pid}/stat");
        let counters = self.read(&path).and_then(|text| parse_pid_stat(pid, text));
        self.path = path;
        counters
    }

    /// Takes one sample now.
    fn sample(&mut self, scope: &SharedScope) -> SampleRecord {
        let t = boottime_ns();
        let cpu = self.cpu();
        let disks = self
            .read("/proc/diskstats")
            .map(parse_diskstats)
            .unwrap_or_default()
            .into_iter()
            .filter(|d| d.read_ios + d.write_ios > 0)
            .collect();
        let (system, alive): (bool, Vec<i32>) = match scope.lock() {
            Ok(s) => (s.system, s.alive.iter().copied().collect()),
            Err(_) => (false, Vec::new()),
        };
        let pids = if system { all_pids() } else { alive };
        let procs = pids.into_iter().filter_map(|pid| self.process(pid)).collect();
        SampleRecord { t, cpu, disks, procs }
    }
}

/// Samples at `hz` until `stop` fires, plus one last sample.
pub fn run(hz: f64, mut out: LineWriter, scope: SharedScope, stop: Arc<Stop>) -> Result<u64> {
    let period = Duration::from_secs_f64(1.0 / hz.clamp(0.1, 1000.0));
    let timer = TimerFd::new(ClockId::CLOCK_BOOTTIME, TimerFlags::TFD_CLOEXEC)
        .map_err(|e| RecordError::system("timerfd", e))?;
    timer
        .set(Expiration::Interval(TimeSpec::from_duration(period)), TimerSetTimeFlags::empty())
        .map_err(|e| RecordError::system("timerfd", e))?;
    let mut reader = ProcReader::default();
    let mut count = 0;
    loop {
        out.push(&reader.sample(&scope))?;
        out.flush()?;
        count += 1;
        let stop_fd = stop.fd();
        let mut fds =
            [PollFd::new(timer.as_fd(), PollFlags::POLLIN), PollFd::new(stop_fd, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(RecordError::system("sampler poll", e)),
        }
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            out.push(&reader.sample(&scope))?;
            out.flush()?;
            return Ok(count + 1);
        }
        let _ = timer.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pid_stat_with_odd_comm() {
        let text = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 7 0 11 22 0 0 20 0 1 0 500 1000000 250 \
                    18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 1 1 1 1 1 1 1 0\n";
        let p = parse_pid_stat(42, text).unwrap();
        assert_eq!((p.state, p.majflt, p.utime, p.stime, p.rss_pages), ('S', 7, 11, 22, 250));
        assert_eq!(parse_pid_stat(1, "1 (x"), None);
    }

    #[test]
    fn parses_proc_stat() {
        let c = parse_proc_stat(
            "cpu  10 1 20 300 4 5 2 7 0 0\ncpu0 1 1 1 1 1 1 1 1\nintr 9 9 9\nctxt 5\nbtime 1700000000\n\
             processes 40\nprocs_running 3\nprocs_blocked 1\nsoftirq 1 2 3\n",
        )
        .unwrap();
        assert_eq!((c.user, c.system, c.iowait, c.idle), (11, 27, 4, 307));
        assert_eq!((c.running, c.blocked), (3, 1));
        assert_eq!(parse_proc_stat("cpu  1 2 3\n"), None);
    }
}
