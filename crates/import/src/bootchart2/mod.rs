//! bootchart2 logs (the `bootchart.tgz` of `bootchartd`, or its unpacked folder)
//! turned into a system-wide trace.
//!
//! What the logs hold and how it maps to the trace:
//! - Times: every `*.log` block starts with /proc/uptime in centiseconds
//!   (bootchart-collector's `get_uptime()` and the older shell collector both
//!   log uptime × 100), not jiffies. /proc/uptime reads CLOCK_BOOTTIME, so
//!   `meta.clock` is `boot` (at 10 ms resolution, which a note says). The trace's
//!   t = 0 is the first sample of any log; `meta.start_clock_ns` is that uptime.
//! - `header` → host, kernel, CPU model; notes for the rest.
//! - `proc_stat.log` → CPU samples ([`proc_stat`]); `proc_diskstats.log` → disk
//!   samples and totals ([`diskstats`]); `proc_ps.log` (or `taskstats.log`, which
//!   newer collectors write instead, [`taskstats`]) and `kernel_pacct` → processes
//!   and process samples ([`processes`]); `cmdline2.log` and `paternity.log`, when
//!   present, → executables, arguments and exact parents ([`cmdline`]).
//! - Ready: the end of the boot as pybootchartgui draws it without
//!   `--crop-after` (`ProcessTree.end_time`): the last `proc_ps.log` sample plus
//!   one mean sample interval, since each process bar ends at its last sample
//!   plus one interval. The header's `time` is that end minus the earliest
//!   process start; a note gives it.
//! - Clock ticks (USER_HZ) are taken as 100 per second and pages as 4 KiB: the
//!   logs do not record them, and both held on every Linux that bootchart ran on
//!   x86.

mod blocks;
mod cmdline;
mod diskstats;
mod header;
mod input;
mod pacct;
mod problems;
mod proc_ps;
mod proc_stat;
mod processes;
mod taskstats;

use std::path::Path;

use coldstart_trace::{CacheState, Meta, Note, NoteSource, Ready, ReadyReason, Scope, Source, Trace};

use crate::error::{ImportError, Result};
use header::Header;
pub use input::LogFiles;
use input::{
    CMDLINE2, HEADER, KERNEL_PACCT, PATERNITY, PROC_DISKSTATS, PROC_MEMINFO, PROC_PS, PROC_STAT, TASKSTATS,
};
use problems::Problems;

/// The value of `meta.clock` in imported traces: the logs' /proc/uptime is CLOCK_BOOTTIME.
pub const CLOCK: &str = "boot";

const NS_PER_CS: i64 = 10_000_000;
const USER_HZ: u64 = 100;
const PAGE_SIZE: u64 = 4096;

/// Reads a bootchart2 log folder or tarball into a trace.
pub fn import(path: &Path) -> Result<Trace> {
    convert(&LogFiles::read(path)?)
}

/// Converts log files already in memory into a trace.
pub fn convert(logs: &LogFiles) -> Result<Trace> {
    let text = |name: &'static str| logs.require(name).map(String::from_utf8_lossy);
    let header = Header::parse(&text(HEADER)?);
    let mut problems = Problems::default();

    let stat_name = logs.display_name(PROC_STAT);
    let stats = proc_stat::parse(&stat_name, &text(PROC_STAT)?, &mut problems)?;
    let disk_name = logs.display_name(PROC_DISKSTATS);
    let disks = diskstats::parse(&disk_name, &text(PROC_DISKSTATS)?, &mut problems)?;
    let mut notes = header_notes(&header);
    let (ps_file, ps_name, ps) = read_process_log(logs, &mut notes, &mut problems)?;
    let pacct = match logs.get(KERNEL_PACCT) {
        Some(bytes) => pacct::parse(&logs.display_name(KERNEL_PACCT), bytes, &mut problems)?,
        None => Vec::new(),
    };

    let too_short = |location: String| ImportError::Parse {
        location,
        message: "fewer than two samples: nothing to measure".to_owned(),
    };
    let (Some(first_stat), Some(last_stat)) = (stats.first(), stats.last()) else {
        return Err(too_short(stat_name));
    };
    if stats.len() < 2 {
        return Err(too_short(stat_name));
    }
    let (Some(first_ps), Some(last_ps)) = (ps.first(), ps.last()) else { return Err(too_short(ps_name)) };
    if ps.len() < 2 {
        return Err(too_short(ps_name));
    }

    let t0_cs =
        [Some(first_stat.time_cs), disks.first_cs, Some(first_ps.time_cs)].into_iter().flatten().min();
    let t0_cs = t0_cs.unwrap_or(first_stat.time_cs);
    let period_cs = (last_ps.time_cs - first_ps.time_cs) as f64 / (ps.len() - 1) as f64;
    let mut table = processes::build(&ps, &pacct, t0_cs, period_cs);
    apply_cmdlines(logs, &mut table.processes, &mut notes);
    let end_cs = last_ps.time_cs as f64 + period_cs;
    let last_cs =
        [Some(last_stat.time_cs as f64), disks.last_cs.map(|t| t as f64), Some(end_cs), table.latest_exit_cs]
            .into_iter()
            .flatten()
            .fold(end_cs, f64::max);
    let frame = Frame { t0_cs, period_cs, end_cs, last_cs };
    notes.extend(timing_notes(ps_file, &ps, table.earliest_start_cs, &frame));
    notes.extend(table.notes.iter().cloned());

    let root_pid = table.processes.iter().any(|p| p.pid == 1).then_some(1);
    let mut trace = Trace {
        meta: meta(logs, &header, root_pid, first_stat, &frame),
        disks: disks.totals(),
        cpu_samples: proc_stat::cpu_samples(&stats, t0_cs),
        disk_samples: disks.samples(t0_cs),
        processes: table.processes,
        process_samples: table.samples,
        ..Trace::default()
    };
    let (losses, problem_notes) = problems.into_rows();
    trace.losses = losses;
    notes.extend(problem_notes.into_iter().map(|n| n.text));
    trace.notes = notes.into_iter().map(|text| Note { source: NoteSource::Bootchart2, text }).collect();
    Ok(trace)
}

/// The samples of the processes: `proc_ps.log`, or `taskstats.log` when only it is there.
/// Returns the log's file name, its display name and its blocks.
fn read_process_log(
    logs: &LogFiles,
    notes: &mut Vec<String>,
    problems: &mut Problems,
) -> Result<(&'static str, String, Vec<proc_ps::PsBlock>)> {
    match (logs.get(PROC_PS), logs.get(TASKSTATS)) {
        (None, Some(bytes)) => {
            let name = logs.display_name(TASKSTATS);
            notes.push(
                "processes come from taskstats.log, which lists a process only when its totals change: a \
                 process ends at the last sample that lists it, and starts at the first (as in pybootchartgui)"
                    .to_owned(),
            );
            let ps = taskstats::parse(&name, &String::from_utf8_lossy(bytes), problems)?;
            Ok((TASKSTATS, name, ps))
        }
        _ => {
            let name = logs.display_name(PROC_PS);
            let text = String::from_utf8_lossy(logs.require(PROC_PS)?);
            let ps = proc_ps::parse(&name, &text, problems)?;
            Ok((PROC_PS, name, ps))
        }
    }
}

/// The time frame of the logs, in centiseconds of uptime: the first sample (t = 0), the
/// mean interval of the process samples, the end of the boot (ready) and the last sample.
struct Frame {
    t0_cs: i64,
    period_cs: f64,
    end_cs: f64,
    last_cs: f64,
}

impl Frame {
    fn to_ns(&self, cs: f64) -> i64 {
        ((cs - self.t0_cs as f64) * NS_PER_CS as f64).round() as i64
    }
}

/// How ready and the trace's times were derived from the logs' clock.
fn timing_notes(
    ps_file: &str,
    ps: &[proc_ps::PsBlock],
    earliest_start_cs: Option<f64>,
    frame: &Frame,
) -> Vec<String> {
    let Frame { t0_cs, period_cs, end_cs, .. } = *frame;
    let last_ps_cs = ps.last().map_or(0, |b| b.time_cs);
    let bootchart_start = pybootchartgui_start(ps);
    let mut notes = vec![format!(
        "ready is the end of the boot as pybootchartgui draws it: the last {ps_file} sample ({:.2} s uptime) \
         plus one mean sample interval ({:.3} s); pybootchartgui's header would say time {:.2} s, from the \
         earliest process start it sees ({:.2} s uptime) to that end",
        last_ps_cs as f64 / 100.0,
        period_cs / 100.0,
        (end_cs - bootchart_start) / 100.0,
        bootchart_start / 100.0,
    )];
    if let Some(earliest) = earliest_start_cs.filter(|&e| (e - bootchart_start).abs() >= 1.0) {
        notes.push(format!(
            "with process starts on the sample clock, the earliest start is {:.2} s uptime: {:.2} s to the end",
            earliest / 100.0,
            (end_cs - earliest) / 100.0
        ));
    }
    notes.push(format!(
        "times come from /proc/uptime (CLOCK_BOOTTIME) in centiseconds, not jiffies: 10 ms resolution; \
         t = 0 is the first sample at {:.2} s uptime",
        t0_cs as f64 / 100.0
    ));
    notes
}

fn meta(
    logs: &LogFiles,
    header: &Header,
    root_pid: Option<i32>,
    first_stat: &proc_stat::StatSample,
    frame: &Frame,
) -> Meta {
    let t0_cs = frame.t0_cs;
    Meta {
        tool: format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        source: Source::Bootchart2,
        command: header.get("profile.process").map(|p| vec![p.to_owned()]).unwrap_or_default(),
        scope: Scope::System,
        root_pid,
        host: header.host().unwrap_or_default(),
        kernel: header.kernel().unwrap_or_default(),
        cpu_model: header.cpu_model().unwrap_or_default(),
        cpu_count: Some(first_stat.cpus).filter(|&n| n > 0).or(header.cpu_count()).unwrap_or(1),
        mem_total_bytes: logs.get(PROC_MEMINFO).and_then(mem_total_bytes).unwrap_or(0),
        page_size: PAGE_SIZE as u32,
        clock: CLOCK.to_owned(),
        start_unix_ns: i64::try_from(first_stat.btime)
            .ok()
            .and_then(|s| s.checked_mul(1_000_000_000)?.checked_add(t0_cs * NS_PER_CS))
            .unwrap_or(0),
        start_clock_ns: t0_cs * NS_PER_CS,
        boottime_offset_ns: 0,
        duration_ns: frame.to_ns(frame.last_cs),
        ready: Some(Ready {
            t_ns: frame.to_ns(frame.end_cs),
            reason: ReadyReason::Bootchart2End,
            pid: None,
            tid: None,
        }),
        cache: CacheState::Cold,
        eviction: Some("boot".to_owned()),
        exit_code: None,
        partial: false,
        sample_hz: Some(100.0 / frame.period_cs).filter(|hz| hz.is_finite()),
        ..Meta::default()
    }
}

/// Executables, arguments and exact parents from `cmdline2.log` and `paternity.log`.
fn apply_cmdlines(logs: &LogFiles, processes: &mut [coldstart_trace::Process], notes: &mut Vec<String>) {
    let text = |name| logs.get(name).map(|b| String::from_utf8_lossy(b).into_owned());
    let execs = text(CMDLINE2).map(|t| cmdline::parse_cmdlines(&t)).unwrap_or_default();
    let parents = text(PATERNITY).map(|t| cmdline::parse_paternity(&t)).unwrap_or_default();
    let (mut with_exec, mut with_parent) = (0, 0);
    for process in processes.iter_mut() {
        if let Some((exe, argv)) = execs.get(&process.pid) {
            process.exe = Some(exe.clone());
            process.argv.clone_from(argv);
            with_exec += 1;
        }
        if let Some(&parent) = parents.get(&process.pid) {
            process.ppid = Some(parent).filter(|&p| p > 0);
            with_parent += 1;
        }
    }
    if !execs.is_empty() || !parents.is_empty() {
        notes.push(format!(
            "cmdline2.log gave the executable and arguments of {with_exec} processes; paternity.log the parent of {with_parent}"
        ));
    }
}

fn header_notes(header: &Header) -> Vec<String> {
    let keys = [
        ("title", "title"),
        ("system.release", "release"),
        ("system.kernel.options", "kernel command line"),
        ("version", "bootchart version"),
    ];
    keys.iter()
        .filter_map(|(key, label)| header.get(key).map(|v| format!("{label}: {}", v.replace('\n', " "))))
        .collect()
}

/// The earliest start pybootchartgui sees: per process, the smaller of the first
/// sample showing it and its raw `starttime`.
fn pybootchartgui_start(ps: &[proc_ps::PsBlock]) -> f64 {
    let mut earliest = f64::INFINITY;
    for block in ps {
        for line in &block.lines {
            let starttime = line.starttime.map_or(i64::MAX, |s| i64::try_from(s).unwrap_or(i64::MAX));
            earliest = earliest.min(block.time_cs.min(starttime) as f64);
        }
    }
    earliest
}

/// `MemTotal` of the first copy of /proc/meminfo, in bytes.
fn mem_total_bytes(bytes: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(bytes);
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}
