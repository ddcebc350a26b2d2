//! The process table of a bootchart2 log: processes and their samples from
//! `proc_ps.log`, exits and short-lived processes from `kernel_pacct`.
//!
//! Times are kept in centiseconds since boot until the trace is built.
//!
//! - A process is a (pid, starttime) pair, so a reused pid starts a new process.
//! - Start: /proc/PID/stat `starttime` (clock ticks since boot). Some kernels
//!   (2.6.10 in example2) count it about 2.8 s ahead of /proc/uptime, which the
//!   sample times come from; the offset is measured from the processes that
//!   appear during the log (each started after the sample before it and before
//!   the one that shows it) and removed. A start is never later than the first
//!   sample that shows the process (as in pybootchartgui).
//! - Exit: from the process's accounting record when there is one (start +
//!   elapsed time); otherwise the last sample that showed it alive (for one only
//!   ever seen as a zombie, the first sample showing it); none when it was still
//!   alive at the last sample.
//! - Processes only in `kernel_pacct` (they lived between two samples): the
//!   kernel writes records in exit order, so the exit is interpolated between the
//!   nearest records whose exit is known, and the start is exit − elapsed time.
//! - Kernel threads (no address space: vsize 0 while not a zombie) are kept like
//!   any process; they are counted in a note.

use std::collections::HashMap;

use coldstart_trace::{Nanos, Process, ProcessSample};

use super::pacct::AcctRecord;
use super::proc_ps::{PsBlock, PsLine};
use super::{NS_PER_CS, PAGE_SIZE};

/// What the process logs give.
#[derive(Debug, Default)]
pub struct ProcessTable {
    pub processes: Vec<Process>,
    pub samples: Vec<ProcessSample>,
    /// Remarks for the trace's notes.
    pub notes: Vec<String>,
    /// The earliest process start (centiseconds since boot, sample clock).
    pub earliest_start_cs: Option<f64>,
    /// The latest exit (centiseconds since boot).
    pub latest_exit_cs: Option<f64>,
}

#[derive(Debug)]
struct Seen {
    pid: i32,
    ppid: i32,
    comm: String,
    start_cs: f64,
    /// True when the log gives no start and the process was there at the first sample.
    start_unknown: bool,
    first_cs: i64,
    /// The last sample showing it alive (not a zombie).
    last_alive_cs: Option<i64>,
    in_last_block: bool,
    prev: Option<Counters>,
    has_mm: bool,
    kernel_thread: bool,
    exit: Option<(f64, i32)>,
    exit_comm: Option<String>,
}

#[derive(Clone, Copy, Debug)]
struct Counters {
    time_cs: i64,
    utime_cs: f64,
    stime_cs: f64,
    majflt: u64,
}

/// Builds the process table. `t0_cs` is the trace's zero, `period_cs` the mean sample interval.
pub fn build(blocks: &[PsBlock], pacct: &[AcctRecord], t0_cs: i64, period_cs: f64) -> ProcessTable {
    let mut table = ProcessTable::default();
    let offset = clock_offset(blocks);
    if offset != 0 {
        table.notes.push(format!(
            "process start times (/proc/PID/stat starttime) run {:.2} s {} the sample times (/proc/uptime) \
             in this log; starts were shifted by {:+.2} s to the sample clock",
            offset.abs() as f64 / 100.0,
            if offset > 0 { "ahead of" } else { "behind" },
            -offset as f64 / 100.0
        ));
    }
    let mut seen = follow(blocks, offset, t0_cs, &mut table.samples);
    let kernel_threads = seen.iter().filter(|s| s.kernel_thread).count();
    if kernel_threads > 0 {
        table.notes.push(format!(
            "{kernel_threads} of the processes in proc_ps.log are kernel threads (no address space)"
        ));
    }

    let pacct_only = merge_pacct(&mut seen, pacct, period_cs);
    if !pacct.is_empty() {
        table.notes.push(format!(
            "kernel_pacct: {} exit records: {} for processes also in proc_ps.log (exit = start + elapsed time), \
             {} for processes seen only there (exit interpolated from the exit order of the records, \
             start = exit − elapsed time: estimates, to a few centiseconds)",
            pacct.len(),
            pacct.len() - pacct_only.len(),
            pacct_only.len()
        ));
    }

    table.processes = processes(&seen, &pacct_only, t0_cs);
    let starts = seen.iter().map(|s| s.start_cs).chain(pacct_only.iter().map(|(_, s, _)| *s));
    table.earliest_start_cs = starts.reduce(f64::min);
    let exits = seen.iter().filter_map(|s| s.exit.map(|e| e.0)).chain(pacct_only.iter().map(|(_, _, e)| *e));
    table.latest_exit_cs = exits.reduce(f64::max);
    table
}

/// Follows each process through the samples of `blocks` (starts shifted by `offset` to
/// the sample clock), adding a sample of its use between consecutive blocks to `samples`.
fn follow(blocks: &[PsBlock], offset: i64, t0_cs: i64, samples: &mut Vec<ProcessSample>) -> Vec<Seen> {
    let mut seen: Vec<Seen> = Vec::new();
    let mut by_key: HashMap<(i32, Option<u64>), usize> = HashMap::new();
    for (i, block) in blocks.iter().enumerate() {
        let t = block.time_cs;
        let prev_block_cs = i.checked_sub(1).map(|p| blocks[p].time_cs);
        let last = i + 1 == blocks.len();
        for line in &block.lines {
            let index = *by_key.entry((line.pid, line.starttime)).or_insert_with(|| {
                seen.push(first_seen(line, t, offset, i == 0));
                seen.len() - 1
            });
            let s = &mut seen[index];
            samples.extend(sample_since(s, line, t, prev_block_cs, t0_cs));
            observe(s, line, t, last);
        }
    }
    seen
}

/// A process first shown by `line` in the sample at `t`.
fn first_seen(line: &PsLine, t: i64, offset: i64, first_block: bool) -> Seen {
    let start_cs = starttime_cs(line).map_or(t, |s| s.saturating_sub(offset).min(t)) as f64;
    Seen {
        pid: line.pid,
        ppid: line.ppid,
        comm: line.comm.clone(),
        start_cs,
        start_unknown: line.starttime.is_none() && first_block,
        first_cs: t,
        last_alive_cs: None,
        in_last_block: false,
        prev: None,
        has_mm: false,
        kernel_thread: false,
        exit: None,
        exit_comm: None,
    }
}

/// The process's use between its previous sample (or its start during the log, when
/// first seen) and the one at `t`.
fn sample_since(
    s: &Seen,
    line: &PsLine,
    t: i64,
    prev_block_cs: Option<i64>,
    t0_cs: i64,
) -> Option<ProcessSample> {
    let ns = |cs: i64| (cs - t0_cs) * NS_PER_CS;
    let since = match (s.prev, prev_block_cs) {
        (Some(prev), _) => Some(prev),
        // First seen during the log: all its CPU time fell in this interval.
        (None, Some(pt)) if s.start_cs > pt as f64 => {
            Some(Counters { time_cs: pt, utime_cs: 0.0, stime_cs: 0.0, majflt: 0 })
        }
        _ => None,
    };
    let since = since.filter(|since| t > since.time_cs)?;
    let dt_cs = (t - since.time_cs) as f64;
    Some(ProcessSample {
        t_ns: ns(t),
        dt_ns: ns(t) - ns(since.time_cs),
        pid: line.pid,
        state: line.state,
        cpu_user: (line.utime_cs - since.utime_cs).max(0.0) / dt_cs,
        cpu_system: (line.stime_cs - since.stime_cs).max(0.0) / dt_cs,
        major_faults: line.majflt.saturating_sub(since.majflt),
        rss_bytes: line.rss.map(|pages| pages.saturating_mul(PAGE_SIZE)),
    })
}

/// The trace's processes: those of the samples, then those only in `kernel_pacct`, by pid and start.
fn processes(seen: &[Seen], pacct_only: &[(AcctRecord, f64, f64)], t0_cs: i64) -> Vec<Process> {
    let ns = |cs: i64| (cs - t0_cs) * NS_PER_CS;
    let to_ns = |cs: f64| ((cs - t0_cs as f64) * NS_PER_CS as f64).round() as Nanos;
    let started = |cs: f64| Some(to_ns(cs)).filter(|&t| t >= 0);
    let mut processes = Vec::new();
    for s in seen {
        let end_ns = match s.exit {
            Some((exit_cs, _)) => Some(to_ns(exit_cs)),
            None if s.in_last_block => None,
            None => Some(ns(s.last_alive_cs.unwrap_or(s.first_cs))),
        };
        processes.push(Process {
            pid: s.pid,
            ppid: Some(s.ppid).filter(|&p| p > 0),
            comm: s.exit_comm.clone().unwrap_or_else(|| s.comm.clone()),
            start_ns: if s.start_unknown { None } else { started(s.start_cs) },
            end_ns,
            exit_code: s.exit.map(|(_, code)| code),
            in_scope: true,
            ..Process::default()
        });
    }
    for (record, start_cs, exit_cs) in pacct_only {
        processes.push(Process {
            pid: record.pid,
            ppid: Some(record.ppid).filter(|&p| p > 0),
            comm: record.comm.clone(),
            start_ns: started(*start_cs),
            end_ns: Some(to_ns(*exit_cs)),
            exit_code: Some(record.exit_code()),
            in_scope: true,
            ..Process::default()
        });
    }
    processes.sort_by_key(|p| (p.pid, p.start_ns));
    processes
}

fn observe(s: &mut Seen, line: &PsLine, t: i64, last_block: bool) {
    s.comm.clone_from(&line.comm);
    let alive = line.state != 'Z' && line.state != 'X';
    s.in_last_block = last_block && alive;
    if alive {
        s.last_alive_cs = Some(t);
        if line.vsize.is_some_and(|v| v > 0) {
            s.has_mm = true;
        }
        s.kernel_thread = !s.has_mm && line.vsize == Some(0);
    }
    s.prev =
        Some(Counters { time_cs: t, utime_cs: line.utime_cs, stime_cs: line.stime_cs, majflt: line.majflt });
}

/// `starttime` (clock ticks at USER_HZ = 100, so centiseconds) as a signed number.
fn starttime_cs(line: &PsLine) -> Option<i64> {
    line.starttime.map(|s| i64::try_from(s).unwrap_or(i64::MAX))
}

/// Centiseconds by which `starttime` runs ahead of the sample clock (0 when within jitter).
///
/// A process first seen at sample `first`, absent from the sample before it at
/// `prev`, started in (prev, first]; so `starttime − offset` lies there, and the
/// offset lies between `starttime − first` and `starttime − prev`. The 95th
/// percentile of the first and the 5th of the second bound it robustly.
fn clock_offset(blocks: &[PsBlock]) -> i64 {
    let mut known: HashMap<(i32, Option<u64>), ()> = HashMap::new();
    let mut lower = Vec::new();
    let mut upper = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        for line in &block.lines {
            let new = known.insert((line.pid, line.starttime), ()).is_none();
            let prev = i.checked_sub(1).map(|p| blocks[p].time_cs);
            if let (true, Some(prev), Some(start)) = (new, prev, starttime_cs(line)) {
                upper.push(start.saturating_sub(block.time_cs));
                lower.push(start.saturating_sub(prev));
            }
        }
    }
    if upper.len() < 5 {
        return 0;
    }
    let percentile = |v: &mut Vec<i64>, p: usize| {
        v.sort_unstable();
        v[(v.len() - 1) * p / 100]
    };
    let offset = (i128::from(percentile(&mut upper, 95)) + i128::from(percentile(&mut lower, 5))) / 2;
    let offset = i64::try_from(offset).unwrap_or(0);
    if offset.abs() <= 2 { 0 } else { offset }
}

/// Attaches each accounting record to the process it ends, and returns the
/// records of processes never sampled, each with its estimated start and exit.
fn merge_pacct(seen: &mut [Seen], pacct: &[AcctRecord], period_cs: f64) -> Vec<(AcctRecord, f64, f64)> {
    let mut by_pid: HashMap<i32, Vec<usize>> = HashMap::new();
    for (i, s) in seen.iter().enumerate() {
        by_pid.entry(s.pid).or_default().push(i);
    }
    let slack = 2.0 * period_cs + 5.0;
    let mut known_exits: Vec<(usize, f64)> = Vec::new();
    let mut unmatched: Vec<&AcctRecord> = Vec::new();
    for record in pacct {
        let candidate = by_pid.get(&record.pid).and_then(|indexes| {
            indexes
                .iter()
                .copied()
                .filter(|&i| seen[i].exit.is_none())
                .min_by(|&a, &b| seen[a].start_cs.total_cmp(&seen[b].start_cs))
        });
        let matched = candidate.filter(|&i| {
            let exit = seen[i].start_cs + record.elapsed_cs;
            seen[i].last_alive_cs.is_none_or(|alive| exit + slack >= alive as f64)
        });
        match matched {
            Some(i) => {
                let s = &mut seen[i];
                let exit_cs =
                    (s.start_cs + record.elapsed_cs).max(s.last_alive_cs.unwrap_or(i64::MIN) as f64);
                s.exit = Some((exit_cs, record.exit_code()));
                s.exit_comm = Some(record.comm.clone());
                known_exits.push((record.index, exit_cs));
            }
            None => unmatched.push(record),
        }
    }
    let mut starts: Vec<(i32, f64)> = seen.iter().map(|s| (s.pid, s.start_cs)).collect();
    starts.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // Records are in exit order: an estimate is never earlier than the record before it.
    let mut previous_exit = f64::NEG_INFINITY;
    let mut next_known = 0;
    let mut estimated = Vec::with_capacity(unmatched.len());
    for record in unmatched {
        while known_exits.get(next_known).is_some_and(|&(index, _)| index < record.index) {
            previous_exit = previous_exit.max(known_exits[next_known].1);
            next_known += 1;
        }
        let before = next_known.checked_sub(1).map(|b| known_exits[b]);
        let exit_cs = match (before, known_exits.get(next_known)) {
            (Some((ia, ea)), Some(&(ib, eb))) => {
                ea + (eb - ea) * (record.index - ia) as f64 / (ib - ia) as f64
            }
            (_, after) => {
                let guess = start_by_pid(&starts, record.pid) + record.elapsed_cs;
                after.map_or(guess, |&(_, e)| guess.min(e))
            }
        };
        let exit_cs = exit_cs.max(previous_exit);
        previous_exit = exit_cs;
        estimated.push((record.clone(), exit_cs - record.elapsed_cs, exit_cs));
    }
    estimated
}

/// Pids are handed out in increasing order during a boot: a start interpolated
/// between the nearest sampled pids below and above.
fn start_by_pid(starts: &[(i32, f64)], pid: i32) -> f64 {
    let at = starts.partition_point(|&(p, _)| p < pid);
    match (at.checked_sub(1).map(|b| starts[b]), starts.get(at)) {
        (Some((pa, sa)), Some(&(pb, sb))) if pb > pa => {
            sa + (sb - sa) * f64::from(pid - pa) / f64::from(pb - pa)
        }
        (Some((_, sa)), _) => sa,
        (None, Some(&(_, sb))) => sb,
        (None, None) => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(pid: i32, ppid: i32, comm: &str, starttime: u64, utime: u64) -> PsLine {
        PsLine {
            pid,
            ppid,
            comm: comm.into(),
            state: 'R',
            utime_cs: utime as f64,
            stime_cs: 0.0,
            majflt: 0,
            rss: Some(10),
            starttime: Some(starttime),
            vsize: Some(4096),
        }
    }

    fn acct(index: usize, pid: i32, ppid: i32, elapsed_cs: f64) -> AcctRecord {
        AcctRecord {
            index,
            flags: 0,
            pid,
            ppid,
            raw_exit: 256,
            btime: 0,
            elapsed_cs,
            comm: format!("p{pid}"),
        }
    }

    #[test]
    fn starts_exits_and_samples() {
        let blocks = vec![
            PsBlock { time_cs: 100, lines: vec![line(1, 0, "init", 10, 5)] },
            PsBlock { time_cs: 120, lines: vec![line(1, 0, "init", 10, 7), line(20, 1, "sh", 110, 4)] },
            PsBlock { time_cs: 140, lines: vec![line(1, 0, "init", 10, 9)] },
        ];
        let table = build(&blocks, &[], 100, 20.0);
        let init = &table.processes[0];
        assert_eq!((init.pid, init.ppid, init.start_ns, init.end_ns), (1, None, None, None));
        let sh = &table.processes[1];
        assert_eq!((sh.ppid, sh.start_ns, sh.end_ns), (Some(1), Some(100_000_000), Some(200_000_000)));
        // sh first seen at 120, started at 110 > 100: its 4 ticks fell in (100, 120].
        let sh_sample = table.samples.iter().find(|s| s.pid == 20).unwrap();
        assert_eq!((sh_sample.t_ns, sh_sample.dt_ns), (200_000_000, 200_000_000));
        assert!((sh_sample.cpu_user - 0.2).abs() < 1e-12);
        assert_eq!(table.samples.iter().filter(|s| s.pid == 1).count(), 2);
        assert_eq!(table.earliest_start_cs, Some(10.0));
    }

    #[test]
    fn pacct_exits_and_processes_between_samples() {
        let blocks = vec![
            PsBlock { time_cs: 100, lines: vec![line(1, 0, "init", 10, 0), line(30, 1, "a", 90, 0)] },
            PsBlock { time_cs: 120, lines: vec![line(1, 0, "init", 10, 0), line(40, 1, "b", 110, 0)] },
            PsBlock { time_cs: 140, lines: vec![line(1, 0, "init", 10, 0)] },
        ];
        // Exit order: a (pid 30) at 90+15 = 105, c (pid 35, never sampled), b (pid 40) at 110+20 = 130.
        let pacct = [acct(0, 30, 1, 15.0), acct(1, 35, 30, 5.0), acct(2, 40, 1, 20.0)];
        let table = build(&blocks, &pacct, 100, 20.0);
        let by_pid = |pid| table.processes.iter().find(|p| p.pid == pid).unwrap();
        assert_eq!((by_pid(30).end_ns, by_pid(30).exit_code), (Some(50_000_000), Some(1)));
        assert_eq!(by_pid(40).end_ns, Some(300_000_000));
        let c = by_pid(35);
        // Halfway between the exits at 105 and 130.
        assert_eq!((c.ppid, c.comm.as_str()), (Some(30), "p35"));
        assert_eq!(c.end_ns, Some(175_000_000));
        assert_eq!(c.start_ns, Some(125_000_000));
        assert_eq!(table.processes.len(), 4);
    }

    #[test]
    fn a_constant_starttime_offset_is_removed() {
        // starttime runs 280 cs ahead; process k starts d(k) cs before the sample that first shows it.
        let delay = |k: i64| 1 + (k * 7) % 19;
        let mut blocks = Vec::new();
        for i in 0..30i64 {
            let mut lines = vec![line(1, 0, "init", 300, 0)];
            lines.extend(
                (0..=i).map(|k| line(100 + k as i32, 1, "x", (1000 + 20 * k - delay(k) + 280) as u64, 0)),
            );
            blocks.push(PsBlock { time_cs: 1000 + 20 * i, lines });
        }
        let table = build(&blocks, &[], 1000, 20.0);
        for k in 1..30i64 {
            let p = table.processes.iter().find(|p| p.pid == 100 + k as i32).unwrap();
            let truth = (20 * k - delay(k)) * NS_PER_CS;
            assert!(
                (p.start_ns.unwrap() - truth).abs() <= 2 * NS_PER_CS,
                "pid {}: {:?} vs {truth}",
                p.pid,
                p.start_ns
            );
        }
        assert!(table.notes[0].contains("s ahead of the sample times"), "{:?}", table.notes);
    }
}
