//! `proc_stat.log`: copies of /proc/stat, turned into system CPU samples.
//!
//! Each interval's fractions are the tick deltas of the `cpu` line divided by the
//! total of all its tick deltas: user = user + nice, system = system + irq +
//! softirq (as pybootchartgui counts them), iowait, idle; steal counts in the total
//! only. So fraction × the interval's total ticks gives the logged ticks back.

use std::io::Cursor;

use coldstart_trace::CpuSample;
use procfs::{ExplicitSystemInfo, FromBufReadSI, KernelStats};

use super::blocks::{Block, timed_blocks};
use super::problems::Problems;
use super::{NS_PER_CS, USER_HZ};
use crate::error::Result;

/// The counters of one /proc/stat copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatSample {
    pub time_cs: i64,
    pub user: u64,
    pub nice: u64,
    pub system: u64,
    pub idle: u64,
    pub iowait: u64,
    pub irq: u64,
    pub softirq: u64,
    pub steal: u64,
    /// Number of `cpuN` lines.
    pub cpus: u32,
    /// Boot time, seconds since the Unix epoch.
    pub btime: u64,
    pub running: u32,
    pub blocked: u32,
}

impl StatSample {
    /// All ticks of the `cpu` line (guest time is already inside user).
    pub fn total(&self) -> u64 {
        [self.user, self.nice, self.system, self.idle, self.iowait, self.irq, self.softirq, self.steal]
            .into_iter()
            .fold(0u64, u64::saturating_add)
    }
}

pub fn parse(file: &str, text: &str, problems: &mut Problems) -> Result<Vec<StatSample>> {
    let blocks = timed_blocks(file, text)?;
    let mut samples = Vec::with_capacity(blocks.len());
    for block in &blocks {
        match parse_block(block) {
            Ok(sample) => samples.push(sample),
            Err(why) => {
                problems.skip("unreadable proc_stat.log samples", || format!("{file}:{}", block.line), || why)
            }
        }
    }
    Ok(samples)
}

fn parse_block(block: &Block<'_>) -> Result<StatSample, String> {
    let mut text = String::new();
    for (_, line) in &block.lines {
        text.push_str(line);
        text.push('\n');
    }
    let info = ExplicitSystemInfo {
        boot_time_secs: 0,
        ticks_per_second: USER_HZ,
        page_size: 4096,
        is_little_endian: true,
    };
    let stats = KernelStats::from_buf_read(Cursor::new(text), &info)
        .map_err(|e| format!("not a copy of /proc/stat: {e}"))?;
    let cpu = &stats.total;
    Ok(StatSample {
        time_cs: block.time_cs,
        user: cpu.user,
        nice: cpu.nice,
        system: cpu.system,
        idle: cpu.idle,
        iowait: cpu.iowait.unwrap_or(0),
        irq: cpu.irq.unwrap_or(0),
        softirq: cpu.softirq.unwrap_or(0),
        steal: cpu.steal.unwrap_or(0),
        cpus: u32::try_from(stats.cpu_time.len()).unwrap_or(u32::MAX),
        btime: stats.btime,
        running: stats.procs_running.unwrap_or(0),
        blocked: stats.procs_blocked.unwrap_or(0),
    })
}

/// One sample per interval between consecutive copies. An interval without ticks
/// (two copies within one tick) is merged into the next one.
pub fn cpu_samples(stats: &[StatSample], t0_cs: i64) -> Vec<CpuSample> {
    let mut samples = Vec::with_capacity(stats.len());
    let Some(mut prev) = stats.first() else { return samples };
    for cur in &stats[1..] {
        let d = |a: u64, b: u64| a.saturating_sub(b) as f64;
        let total = cur.total().saturating_sub(prev.total());
        if cur.time_cs <= prev.time_cs || total == 0 {
            continue;
        }
        let total = total as f64;
        samples.push(CpuSample {
            t_ns: (cur.time_cs - t0_cs) * NS_PER_CS,
            dt_ns: (cur.time_cs - prev.time_cs) * NS_PER_CS,
            user: (d(cur.user, prev.user) + d(cur.nice, prev.nice)) / total,
            system: (d(cur.system, prev.system) + d(cur.irq, prev.irq) + d(cur.softirq, prev.softirq))
                / total,
            iowait: d(cur.iowait, prev.iowait) / total,
            idle: d(cur.idle, prev.idle) / total,
            running: cur.running,
            blocked: cur.blocked,
        });
        prev = cur;
    }
    samples
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = "100\ncpu  10 2 20 60 8 0 0\ncpu0 10 2 20 60 8 0 0\nctxt 1\nbtime 1000\nprocesses 5\nprocs_running 2\nprocs_blocked 1\n\n\
                       120\ncpu  20 2 30 80 28 0 0\ncpu0 20 2 30 80 28 0 0\nctxt 2\nbtime 1000\nprocesses 6\nprocs_running 3\nprocs_blocked 4\n\n";

    #[test]
    fn fractions_of_the_tick_deltas() {
        let mut problems = Problems::default();
        let stats = parse("s", LOG, &mut problems).unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(stats[0].btime, 1000);
        let samples = cpu_samples(&stats, 100);
        assert_eq!(samples.len(), 1);
        let s = &samples[0];
        assert_eq!((s.t_ns, s.dt_ns), (200_000_000, 200_000_000));
        // deltas: user 10, system 10, idle 20, iowait 20 → total 60
        assert!((s.user - 10.0 / 60.0).abs() < 1e-12);
        assert!((s.system - 10.0 / 60.0).abs() < 1e-12);
        assert!((s.idle - 20.0 / 60.0).abs() < 1e-12);
        assert!((s.iowait - 20.0 / 60.0).abs() < 1e-12);
        assert_eq!((s.running, s.blocked), (3, 4));
    }

    #[test]
    fn a_truncated_copy_is_skipped_and_counted() {
        let mut problems = Problems::default();
        let text = format!("{LOG}140\ncpu  30 2\n");
        let stats = parse("s", &text, &mut problems).unwrap();
        assert_eq!(stats.len(), 2);
        assert_eq!(problems.count("unreadable proc_stat.log samples"), 1);
    }
}
