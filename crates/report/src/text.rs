//! The text report (`coldstart report`), and the read listing and rankings of
//! `coldstart reads`. Every figure carries its unit; lost data and warnings are
//! always printed; output is deterministic.

use std::io::{self, Write};

use coldstart_analyze::units::{base_name, bytes, count, duration, percent, plural, secs};
use coldstart_analyze::{
    Analysis, CriticalPath, PathSegment, RankBy, ReadFilter, SegmentKind, UnitProcessesFrom, UnitTime,
    WakerProcess,
};
use coldstart_trace::{CacheState, FileKind, Nanos, TextEnum};

use crate::table::{Align, Table};

/// How much the text report shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Rows of each top-N table.
    pub top: usize,
    /// How the critical path is shown.
    pub path: PathDetail,
}

impl Default for Options {
    fn default() -> Options {
        Options { top: 10, path: PathDetail::Summary }
    }
}

/// How the text report shows the critical path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PathDetail {
    /// Its time by process and kind, then its longest waits and what they waited on.
    #[default]
    Summary,
    /// That, then every segment in time order.
    Full,
}

/// Waits listed under the critical path's summary, the longest.
const PATH_WAITS_LISTED: usize = 8;

/// `comm/pid` for a process.
fn who(a: &Analysis, pid: i32) -> String {
    format!("{}/{pid}", a.comm(pid))
}

/// `comm/tid` for a thread.
fn thread(a: &Analysis, tid: i32) -> String {
    let comm = a.threads.binary_search_by_key(&tid, |t| t.tid).ok().map(|i| a.threads[i].comm.as_str());
    match comm.filter(|c| !c.is_empty()) {
        Some(c) => format!("{c}/{tid}"),
        None => format!("{}/{tid}", a.comm(a.threads.iter().find(|t| t.tid == tid).map_or(tid, |t| t.pid))),
    }
}

/// Writes the whole text report.
pub fn report(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    report_with_findings(a, None, options, out)
}

/// Writes the whole text report, with the doctor's findings after the critical path when given.
pub fn report_with_findings(
    a: &Analysis,
    diagnosis: Option<&coldstart_analyze::doctor::Diagnosis>,
    options: &Options,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    header(a, &mut out)?;
    lost(a, &mut out)?;
    cross_check(a, &mut out)?;
    start(a, &mut out)?;
    critical_path(a, options, &mut out)?;
    units(a, options, &mut out)?;
    unit_chain(a, &mut out)?;
    if let Some(d) = diagnosis {
        crate::findings::section(a, d, options.top, &mut out)?;
    }
    phases(a, &mut out)?;
    cpu(a, options, &mut out)?;
    milestones(a, &mut out)?;
    top_files(a, options, &mut out)?;
    top_processes(a, options, &mut out)?;
    time_per_process(a, options, &mut out)?;
    disks(a, options, &mut out)?;
    origins(a, &mut out)?;
    warnings(a, &mut out)?;
    out.flush()
}

/// Disk reads by other processes during the start above which the machine counts as busy.
const BUSY_READ_BYTES: u64 = 1 << 20;
/// Share of the machine's CPU time spent for other processes above which it counts as busy.
const BUSY_CPU_SHARE: f64 = 0.10;

/// What processes outside the recording did during the start, in words: whether the
/// machine was busy enough to inflate the times, what they read and ran, and what to
/// do about it. Shared by the report's header and `coldstart record`'s summary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OtherWork {
    pub busy: bool,
    /// What they did, e.g. `processes outside the recording read 208.0 MiB from disk (…)`.
    pub what: String,
    /// For a busy machine: that the times are inflated, and what to do.
    pub advice: Option<String>,
}

pub fn other_work(a: &Analysis) -> OtherWork {
    let o = &a.overview.others;
    if a.trace.scope == coldstart_trace::Scope::System {
        return OtherWork {
            busy: false,
            what: "every process on the machine was recorded (--system): none outside".to_owned(),
            advice: None,
        };
    }
    let mut what = format!("processes outside the recording read {} from disk", bytes(o.read_bytes));
    if !o.readers.is_empty() {
        let names: Vec<String> =
            o.readers.iter().map(|r| format!("{}/{} {}", r.comm, r.pid, bytes(r.read_bytes))).collect();
        what.push_str(&format!(" ({})", names.join(", ")));
    }
    let cpu_share = o.cpu_ns.filter(|_| o.cpu_capacity_ns > 0).map(|ns| ns as f64 / o.cpu_capacity_ns as f64);
    if let Some(ns) = o.cpu_ns {
        what.push_str(&format!(
            " and the machine ran {} of CPU for others ({} of {})",
            secs(ns),
            percent(ns as f64, o.cpu_capacity_ns as f64),
            plural(u64::from(a.trace.cpu_count.max(1)), "CPU")
        ));
    }
    what.push_str(" during the start");
    let busy = o.read_bytes >= BUSY_READ_BYTES || cpu_share.is_some_and(|s| s >= BUSY_CPU_SHARE);
    let advice = busy.then(|| {
        "the times are inflated by that work: record again on a quiet machine, or with --system to see what they did"
            .to_owned()
    });
    OtherWork { busy, what, advice }
}

fn header(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let t = &a.trace;
    let o = &a.overview;
    writeln!(out, "coldstart report ({}, trace written by {})", t.source.as_str(), t.tool)?;
    if t.partial {
        writeln!(out, "PARTIAL TRACE: recovered from a recorder that did not finish")?;
    }
    writeln!(out, "Command       {}", crate::command_line(&t.command))?;
    writeln!(
        out,
        "Machine       {} — {}; {} × {}; {} RAM; {} pages",
        t.host,
        t.kernel,
        t.cpu_count,
        t.cpu_model,
        bytes(t.mem_total_bytes),
        bytes(u64::from(t.page_size))
    )?;
    for d in &a.disks {
        let model = d.model.as_deref().map(|m| format!(", {m}")).unwrap_or_default();
        writeln!(out, "Disk          {} {}{model}; {}", d.name, d.dev, d.kind)?;
    }
    let cache = match t.cache {
        CacheState::Cold => "cold",
        CacheState::Warm => "warm",
        CacheState::Unknown => "unknown",
    };
    let eviction = t.eviction.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
    writeln!(out, "Page cache    {cache}{eviction}")?;
    if !t.also.is_empty() {
        let also: Vec<String> = t
            .also
            .iter()
            .map(|s| {
                let pids: Vec<String> =
                    s.pids.iter().map(|&pid| format!("{} pid {pid}", a.comm(pid))).collect();
                format!("{} (--also {})", pids.join(", "), s.spec)
            })
            .collect();
        writeln!(out, "Recorded      the command's tree and {}", also.join("; "))?;
    }
    match &o.ready {
        Some(r) => writeln!(
            out,
            "Ready         {} after the command started ({} at t = {}, reached by thread {})",
            secs(r.time_to_ready_ns),
            r.reason,
            secs(r.t_ns),
            thread(a, r.tid)
        )?,
        None => writeln!(
            out,
            "Ready         not known; the analysis runs to the end of the trace, {}",
            secs(o.end_ns)
        )?,
    }
    let others = other_work(a);
    let label = if others.busy { "BUSY MACHINE " } else { "Other work   " };
    writeln!(out, "{label} {}", others.what)?;
    if let Some(advice) = &others.advice {
        writeln!(out, "              {advice}")?;
    }
    let exit = o.exit.as_ref().map(|e| format!("; {}", e.text)).unwrap_or_default();
    writeln!(
        out,
        "Recording     {} from t = 0; the command started at t = {}{exit}",
        secs(t.duration_ns),
        secs(o.origin_ns)
    )?;
    writeln!(
        out,
        "Processes     {} started, {} in scope ({} seen), {}, {}",
        count(o.processes_started),
        count(o.processes_in_scope),
        count(o.processes),
        plural(o.threads, "thread"),
        plural(o.execs, "exec")
    )?;
    writeln!(
        out,
        "Read          {} read from disk (of {} opened or read): {} ({} pages), {}, {} (page cache fills)",
        plural(o.files_read, "file"),
        count(o.files_in_trace),
        bytes(o.bytes_read),
        count(o.pages_read),
        plural(o.reads, "read"),
        plural(o.seeks, "seek")
    )?;
    writeln!(
        out,
        "Block reads   {} in {} (block requests)",
        bytes(o.block_read_bytes),
        plural(o.block_read_requests, "request")
    )?;
    writeln!(
        out,
        "Threads' time {} running, {} in I/O wait (summed over threads)",
        secs(o.cpu_ns),
        secs(o.io_wait_ns)
    )
}

fn lost(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nLost and unresolved data")?;
    let lost: Vec<_> = a.losses.iter().filter(|l| l.count > 0).collect();
    if lost.is_empty() {
        writeln!(out, "  events lost: none")?;
    }
    for l in lost {
        writeln!(out, "  LOST {} {} ({})", count(l.count), l.what, l.source)?;
    }
    writeln!(
        out,
        "  files read without a path: {}; page fills of files without a file row: {}",
        count(a.overview.unresolved_files),
        count(a.overview.fills_without_file)
    )
}

fn cross_check(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nDiskstats cross-check (recorded read requests against /proc/diskstats read bytes)")?;
    if a.disks.is_empty() {
        return writeln!(out, "  no disks in the trace");
    }
    for d in &a.disks {
        match d.diskstats_read_bytes {
            Some(stats) => writeln!(
                out,
                "  {} {}: recorded {} of {} read ({})",
                d.name,
                d.dev,
                bytes(d.traced_read_bytes),
                bytes(stats),
                percent(d.traced_read_bytes as f64, stats as f64)
            )?,
            None => writeln!(
                out,
                "  {} {}: recorded {} read; no diskstats figure",
                d.name,
                d.dev,
                bytes(d.traced_read_bytes)
            )?,
        }
    }
    Ok(())
}

fn start(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let s = &a.start;
    writeln!(
        out,
        "\nWhere the time to ready went (wall clock, t = {} to {}, in-scope threads)",
        secs(s.from_ns),
        secs(s.to_ns)
    )?;
    if !s.has_sched {
        return writeln!(out, "  no scheduler data in the trace");
    }
    let total = (s.to_ns - s.from_ns) as f64;
    let rows = [
        ("CPU (some thread running)", s.cpu_ns),
        ("I/O wait (none running, some waiting for I/O)", s.io_wait_ns),
        ("waiting for a CPU", s.cpu_wait_ns),
        ("idle (sleeps, timers, other processes)", s.idle_ns),
    ];
    for (what, ns) in rows {
        writeln!(out, "  {:>9}  {:>7}  {what}", secs(ns), percent(ns as f64, total))?;
    }
    if !a.syscall_waits.is_empty() {
        writeln!(out, "  Off the CPU, by what the threads waited in (summed over threads, most first)")?;
        syscall_waits(&a.syscall_waits, 5, out)?;
    }
    Ok(())
}

/// `0.410 s in statx under /opt/app/plug-ins (fuse), 2000 calls`, or named by the kernel
/// stack alone `0.410 s in fuse_simple_request (newfstatat), 1500 waits`, one per line.
fn syscall_waits(
    waits: &[coldstart_analyze::SyscallWait],
    top: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    for w in waits.iter().take(top) {
        let unit = if w.waited_in.from_stack { "wait" } else { "call" };
        writeln!(out, "    {:>9}  in {}, {}", secs(w.ns), w.waited_in, plural(w.calls, unit))?;
    }
    if waits.len() > top {
        let rest: Nanos = waits[top..].iter().map(|w| w.ns).sum();
        writeln!(out, "    {:>9}  in {} other waits", secs(rest), waits.len() - top)?;
    }
    Ok(())
}

/// `1.830 s to ready = 0.620 s CPU + 0.810 s I/O (libfoo.so 0.210 s, …) + …`
pub fn path_summary(a: &Analysis, cp: &CriticalPath) -> String {
    let m = &cp.summary;
    let mut terms: Vec<String> = Vec::new();
    if m.cpu_ns > 0 {
        terms.push(format!("{} CPU", secs(m.cpu_ns)));
    }
    if m.io_wait_ns > 0 {
        let mut files: Vec<String> = m
            .io_files
            .iter()
            .take(3)
            .map(|f| format!("{} {}", base_name(a.file_name(f.file)), secs(f.ns)))
            .collect();
        if m.io_files.len() > 3 {
            files.push("…".into());
        }
        let files = if files.is_empty() { String::new() } else { format!(" ({})", files.join(", ")) };
        terms.push(format!("{} I/O{files}", secs(m.io_wait_ns)));
    }
    // Helpers of one name (a shell script's many `bash`es) count together.
    let mut by_comm: Vec<(String, Nanos, Vec<i32>)> = Vec::new();
    for h in &m.helpers {
        match by_comm.iter_mut().find(|c| c.0 == h.comm) {
            Some(c) => {
                c.1 += h.ns;
                c.2.push(h.pid);
            }
            None => by_comm.push((h.comm.clone(), h.ns, vec![h.pid])),
        }
    }
    by_comm.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    for (comm, ns, pids) in by_comm.iter().take(3) {
        let which = match pids.as_slice() {
            [pid] => format!("pid {pid}"),
            _ => format!("{} processes", pids.len()),
        };
        terms.push(format!("{} waiting on {comm} ({which})", secs(*ns)));
    }
    if by_comm.len() > 3 {
        let rest: Nanos = by_comm[3..].iter().map(|c| c.1).sum();
        let processes: usize = by_comm[3..].iter().map(|c| c.2.len()).sum();
        terms.push(format!("{} in {} other processes", secs(rest), processes));
    }
    for (process, ns) in outside_waits_of(cp, Some(cp.pid)) {
        terms.push(format!("{} waiting on {}", secs(ns), outside_name(&process)));
    }
    let others = [
        (m.cpu_wait_ns, "waiting for a CPU"),
        (m.sleep_ns, "sleeping on a timer"),
        (m.no_wakeup_ns, "asleep with no wakeup recorded"),
        (m.untraced_ns, "untraced"),
    ];
    for (ns, what) in others {
        if ns > 0 {
            terms.push(format!("{} {what}", secs(ns)));
        }
    }
    if terms.is_empty() {
        terms.push("0.000 s".into());
    }
    format!("{} to ready = {}", secs(m.total_ns), terms.join(" + "))
}

/// `Xvfb (pid 812, not recorded)`, or `thread 812 (exited, not recorded)` when the trace does not name it.
fn outside_name(p: &WakerProcess) -> String {
    let recorded = if p.in_scope { "recorded without scheduler data" } else { "not recorded" };
    if p.comm.is_empty() {
        format!("thread {} (exited, {recorded})", p.pid)
    } else {
        format!("{} (pid {}, {recorded})", p.comm, p.pid)
    }
}

/// The path's waits on processes outside the recorded scope, of the threads of `pid` (all
/// when `None`), by process in order of first appearance.
fn outside_waits_of(cp: &CriticalPath, pid: Option<i32>) -> Vec<(WakerProcess, Nanos)> {
    let mut by_process: Vec<(WakerProcess, Nanos)> = Vec::new();
    for s in cp.segments.iter().filter(|s| pid.is_none_or(|p| s.pid == p)) {
        let Some(w) = &s.waker_process else { continue };
        match by_process.iter_mut().find(|(p, _)| p.pid == w.pid) {
            Some((_, ns)) => *ns += s.end_ns - s.start_ns,
            None => by_process.push((w.clone(), s.end_ns - s.start_ns)),
        }
    }
    by_process
}

/// What a segment of the critical path was doing, in words, with the system call it
/// waited in when the trace has it: `in statx under /opt/app/plug-ins (fuse): waiting on …`.
fn doing(a: &Analysis, s: &PathSegment) -> String {
    let what = doing_kind(a, s);
    match &s.waited_in {
        Some(w) => format!("in {w}: {what}"),
        None => what,
    }
}

fn doing_kind(a: &Analysis, s: &PathSegment) -> String {
    match s.kind {
        SegmentKind::Cpu => match hottest_in(a, s) {
            Some(h) => format!(
                "running, mostly {} ({}, {} of {} samples)",
                h.hottest.name, h.hottest.library, h.hottest.self_samples, h.samples
            ),
            None => "running".to_owned(),
        },
        SegmentKind::CpuWait => "waiting for a CPU".to_owned(),
        SegmentKind::IoWait if s.files.is_empty() => "I/O wait (no file seen)".to_owned(),
        SegmentKind::IoWait => {
            let mut files: Vec<String> = s
                .files
                .iter()
                .take(3)
                .map(|f| format!("{} {}", a.file_name(f.file), duration(f.ns)))
                .collect();
            if s.files.len() > 3 {
                files.push(format!("+{} more", s.files.len() - 3));
            }
            format!("I/O wait: {}", files.join(", "))
        }
        SegmentKind::Sleep => "asleep until a timer or an interrupt".to_owned(),
        SegmentKind::NoWakeup => "asleep, no wakeup recorded".to_owned(),
        SegmentKind::WaitUntraced => match &s.waker_process {
            Some(p) => format!("waiting on {}", outside_name(p)),
            None => {
                format!("waiting on untraced thread {}", s.waker_tid.map_or("?".into(), |t| t.to_string()))
            }
        },
        SegmentKind::Untraced => "no scheduler data".to_owned(),
    }
}

/// The stack samples of a CPU segment of the critical path, if it has any.
fn hottest_in<'a>(a: &'a Analysis, s: &PathSegment) -> Option<&'a coldstart_analyze::SegmentCpu> {
    let cp = a.critical_path.as_ref()?;
    a.cpu_profile.as_ref()?.critical_path.iter().find(|c| cp.segments.get(c.segment) == Some(s))
}

/// CPU segments of the critical path listed with their hottest function.
const PATH_CPU_LISTED: usize = 5;

fn segment_table(a: &Analysis, segments: &[&PathSegment], out: &mut dyn Write) -> io::Result<()> {
    let mut table = Table::new(&[
        ("start", Align::Right),
        ("end", Align::Right),
        ("length", Align::Right),
        ("thread", Align::Left),
        ("doing", Align::Left),
    ]);
    for s in segments {
        table.row(vec![
            secs(s.start_ns),
            secs(s.end_ns),
            duration(s.end_ns - s.start_ns),
            thread(a, s.tid),
            doing(a, s),
        ]);
    }
    table.write(out, "    ")
}

/// The path's time in one process, by kind.
#[derive(Default)]
struct ProcessOnPath {
    pid: i32,
    first_ns: Nanos,
    total: Nanos,
    cpu: Nanos,
    io: Nanos,
    cpu_wait: Nanos,
    outside: Nanos,
    sleep: Nanos,
    unexplained: Nanos,
}

fn by_process(cp: &CriticalPath) -> Vec<ProcessOnPath> {
    let mut rows: Vec<ProcessOnPath> = Vec::new();
    for s in &cp.segments {
        let i = match rows.iter().position(|r| r.pid == s.pid) {
            Some(i) => i,
            None => {
                rows.push(ProcessOnPath { pid: s.pid, first_ns: s.start_ns, ..ProcessOnPath::default() });
                rows.len() - 1
            }
        };
        let r = &mut rows[i];
        let ns = s.end_ns - s.start_ns;
        r.total += ns;
        match s.kind {
            SegmentKind::Cpu => r.cpu += ns,
            SegmentKind::IoWait => r.io += ns,
            SegmentKind::CpuWait => r.cpu_wait += ns,
            SegmentKind::WaitUntraced => r.outside += ns,
            SegmentKind::Sleep => r.sleep += ns,
            SegmentKind::NoWakeup | SegmentKind::Untraced => r.unexplained += ns,
        }
    }
    rows.sort_by(|a, b| b.total.cmp(&a.total).then(a.first_ns.cmp(&b.first_ns)));
    rows
}

fn critical_path(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nCritical path to ready (walked back from the thread that reached it)")?;
    let Some(cp) = &a.critical_path else {
        return writeln!(out, "  none: the trace has no readiness point or no scheduler data");
    };
    writeln!(out, "  {}", path_summary(a, cp))?;
    if !cp.summary.in_syscalls.is_empty() {
        writeln!(out, "  Its waits and sleeps by what they waited in, most first")?;
        syscall_waits(&cp.summary.in_syscalls, options.top.min(5), out)?;
    }
    for (process, ns) in outside_waits_of(cp, None) {
        let advice = if process.comm.is_empty() {
            "record with --system to see it".to_owned()
        } else {
            format!("record with --also {}", process.comm)
        };
        writeln!(out, "  {} waiting on {}: {advice}", secs(ns), outside_name(&process))?;
    }
    let rows = by_process(cp);
    writeln!(out, "  By process (time on the path, most first)")?;
    let mut table = Table::new(&[
        ("process", Align::Left),
        ("on path", Align::Right),
        ("CPU", Align::Right),
        ("I/O", Align::Right),
        ("waiting for a CPU", Align::Right),
        ("waiting outside", Align::Right),
        ("timer sleep", Align::Right),
        ("unexplained", Align::Right),
    ]);
    for r in rows.iter().take(options.top) {
        table.row(vec![
            who(a, r.pid),
            secs(r.total),
            secs(r.cpu),
            secs(r.io),
            secs(r.cpu_wait),
            secs(r.outside),
            secs(r.sleep),
            secs(r.unexplained),
        ]);
    }
    table.write(out, "    ")?;
    if rows.len() > options.top {
        let rest: Nanos = rows[options.top..].iter().map(|r| r.total).sum();
        writeln!(out, "    … {} other processes ({})", count((rows.len() - options.top) as u64), secs(rest))?;
    }
    let mut waits: Vec<&PathSegment> =
        cp.segments.iter().filter(|s| !matches!(s.kind, SegmentKind::Cpu | SegmentKind::CpuWait)).collect();
    waits.sort_by(|x, y| {
        (y.end_ns - y.start_ns).cmp(&(x.end_ns - x.start_ns)).then(x.start_ns.cmp(&y.start_ns))
    });
    waits.truncate(PATH_WAITS_LISTED);
    waits.sort_by_key(|s| s.start_ns);
    if !waits.is_empty() {
        writeln!(out, "  Longest waits (I/O, other processes, sleeps), in time order")?;
        segment_table(a, &waits, out)?;
    }
    let mut runs: Vec<&PathSegment> =
        cp.segments.iter().filter(|s| s.kind == SegmentKind::Cpu && hottest_in(a, s).is_some()).collect();
    runs.sort_by(|x, y| {
        (y.end_ns - y.start_ns).cmp(&(x.end_ns - x.start_ns)).then(x.start_ns.cmp(&y.start_ns))
    });
    runs.truncate(PATH_CPU_LISTED);
    runs.sort_by_key(|s| s.start_ns);
    if !runs.is_empty() {
        writeln!(out, "  Longest CPU runs, named by the function most of their samples were in")?;
        segment_table(a, &runs, out)?;
    }
    match options.path {
        PathDetail::Summary => writeln!(
            out,
            "  {} segments in all: `coldstart report --critical-path full` lists them",
            count(cp.segments.len() as u64)
        ),
        PathDetail::Full => {
            writeln!(out, "  Every segment, in time order")?;
            segment_table(a, &cp.segments.iter().collect::<Vec<_>>(), out)
        }
    }
}

fn phases(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nPhases (dominant work between the command's start and ready; marks split phases)")?;
    if a.phases.is_empty() {
        return writeln!(out, "  none");
    }
    let mut table = Table::new(&[
        ("#", Align::Right),
        ("start", Align::Right),
        ("end", Align::Right),
        ("what", Align::Left),
    ]);
    for (i, p) in a.phases.iter().enumerate() {
        let mark = p.ends_at_mark.as_deref().map(|m| format!("  [until mark {m}]")).unwrap_or_default();
        table.row(vec![(i + 1).to_string(), secs(p.start_ns), secs(p.end_ns), format!("{}{mark}", p.name)]);
    }
    table.write(out, "  ")
}

fn cpu(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let Some(p) = &a.cpu_profile else { return Ok(()) };
    writeln!(out, "\nWhere the CPU went (stack samples from the command's start to ready)")?;
    if p.samples == 0 {
        return writeln!(out, "  no samples in that time");
    }
    let total = p.samples as f64;
    let cpu_time = p
        .sample_hz
        .map(|hz| format!(" (about {} of CPU)", duration((p.samples as f64 / hz * 1e9) as Nanos)))
        .unwrap_or_default();
    writeln!(
        out,
        "  {} samples{cpu_time}; functions by samples in them (self) and under them (total)",
        count(p.samples)
    )?;
    let mut table = Table::new(&[
        ("self", Align::Right),
        ("total", Align::Right),
        ("function", Align::Left),
        ("in", Align::Left),
    ]);
    for f in p.functions.iter().take(options.top) {
        table.row(vec![
            percent(f.self_samples as f64, total),
            percent(f.samples as f64, total),
            f.name.clone(),
            f.library.clone(),
        ]);
    }
    table.write(out, "    ")?;
    let libraries: Vec<String> = p
        .libraries
        .iter()
        .take(options.top)
        .map(|l| format!("{} {}", l.name, percent(l.self_samples as f64, total)))
        .collect();
    writeln!(out, "  By file: {}", libraries.join(", "))?;
    if let Some(line) = cpu_tree_line(&p.tree) {
        writeln!(out, "  {line}")?;
    }
    if p.phases.len() > 1 {
        writeln!(out, "  By phase (as numbered above)")?;
        for ph in p.phases.iter().filter(|ph| ph.samples > 0) {
            let top: Vec<String> = ph
                .functions
                .iter()
                .map(|f| format!("{} {}", f.name, percent(f.self_samples as f64, ph.samples as f64)))
                .collect();
            writeln!(out, "    {}: {} samples: {}", ph.phase + 1, count(ph.samples), top.join(", "))?;
        }
    }
    Ok(())
}

/// The inclusive view of the critical path's samples in one line: the call that holds most
/// of them and what is inside it, else the functions most of them are under.
fn cpu_tree_line(tree: &coldstart_analyze::CpuTree) -> Option<String> {
    let whole = tree.samples as f64;
    let of = match tree.scope {
        coldstart_analyze::TreeScope::CriticalPath => {
            format!("Of the {} samples on the critical path", count(tree.samples))
        }
        coldstart_analyze::TreeScope::Start => {
            format!("Of the {} samples (no critical path)", count(tree.samples))
        }
    };
    let Some(s) = &tree.subtree else {
        let under: Vec<String> = tree
            .inclusive
            .iter()
            .take(3)
            .map(|c| format!("{} {}", c.name, percent(c.samples as f64, whole)))
            .collect();
        return (!under.is_empty())
            .then(|| format!("{of}: no one call holds most; most under {}", under.join(", ")));
    };
    let inside = s.samples as f64;
    let kernel: Vec<String> = s
        .kernel
        .iter()
        .take(2)
        .map(|k| format!("{} {}", k.name, percent(k.samples as f64, inside)))
        .collect();
    Some(format!(
        "{of}: {} under {} ({}){}; inside it {} in the allocator, {} in the kernel{}",
        percent(s.samples as f64, whole),
        s.name,
        s.library,
        s.called_from.first().map(|c| format!(", called from {}", c.name)).unwrap_or_default(),
        percent(s.allocator_samples as f64, inside),
        percent(s.kernel_samples as f64, inside),
        if kernel.is_empty() { String::new() } else { format!(" ({})", kernel.join(", ")) }
    ))
}

/// A unit's processes, for a table cell.
pub fn unit_processes(a: &Analysis, u: &UnitTime) -> String {
    let how = match u.pids_from {
        UnitProcessesFrom::MainPid => "main pid",
        UnitProcessesFrom::Name => "by name",
        UnitProcessesFrom::None => return "none found".to_owned(),
    };
    let shown: Vec<String> = u.pids.iter().take(3).map(|&p| who(a, p)).collect();
    let more = u.pids.len().saturating_sub(shown.len());
    let more = if more > 0 { format!(" +{more}") } else { String::new() };
    format!("{}{more} ({how})", shown.join(" "))
}

/// The I/O wait of a unit with the file it waited for most.
fn unit_io(a: &Analysis, u: &UnitTime) -> String {
    match u.io_files.first() {
        Some(f) if u.io_wait_ns > 0 => {
            format!("{} ({})", duration(u.io_wait_ns), base_name(a.file_name(f.file)))
        }
        _ => duration(u.io_wait_ns),
    }
}

/// The waits of a unit on other units and on the manager.
fn unit_waits(u: &UnitTime) -> String {
    let mut parts: Vec<(Nanos, String)> = u.unit_waits.iter().map(|w| (w.ns, w.unit.clone())).collect();
    if u.manager_wait_ns > 0 {
        parts.push((u.manager_wait_ns, "the manager".to_owned()));
    }
    parts.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
    let total: Nanos = parts.iter().map(|p| p.0).sum();
    match parts.len() {
        0 => duration(0),
        1 => format!("{} ({})", duration(total), parts[0].1),
        n => format!("{} ({} +{})", duration(total), parts[0].1, n - 1),
    }
}

/// A unit's start split into CPU, I/O, waits and the rest, in words (zero parts left out).
pub fn unit_split(a: &Analysis, u: &UnitTime) -> String {
    let mut parts = Vec::new();
    if u.cpu_ns > 0 {
        parts.push(format!("CPU {}", duration(u.cpu_ns)));
    }
    if u.io_wait_ns > 0 {
        parts.push(format!("I/O {}", unit_io(a, u)));
    }
    if u.manager_wait_ns > 0 || !u.unit_waits.is_empty() {
        parts.push(format!("waiting on {}", unit_waits(u)));
    }
    if u.other_ns > 0 {
        parts.push(format!("other {}", duration(u.other_ns)));
    }
    if u.pids.is_empty() && u.took_ns > 0 {
        parts.push("no process of its own found".to_owned());
    }
    parts.join(", ")
}

fn units(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    if a.units.is_empty() {
        return Ok(());
    }
    let timed: Vec<&UnitTime> = a.units.iter().filter(|u| u.took_ns > 0).collect();
    let shown = timed.len().min(options.top.max(20));
    writeln!(
        out,
        "\nsystemd units ({} became active, {} of them taking time; the longest {shown}, as systemd-analyze blame, with what their processes did meanwhile)",
        a.units.len(),
        timed.len()
    )?;
    let mut table = Table::new(&[
        ("unit", Align::Left),
        ("started", Align::Right),
        ("took", Align::Right),
        ("CPU", Align::Right),
        ("I/O wait (top file)", Align::Right),
        ("waiting on units", Align::Right),
        ("other", Align::Right),
        ("processes", Align::Left),
    ]);
    for u in &timed[..shown] {
        table.row(vec![
            u.name.clone(),
            secs(u.activating_ns - a.overview.origin_ns),
            duration(u.took_ns),
            duration(u.cpu_ns),
            unit_io(a, u),
            unit_waits(u),
            duration(u.other_ns),
            unit_processes(a, u),
        ]);
    }
    table.write(out, "  ")?;
    writeln!(
        out,
        "  CPU: one of its processes on a CPU; I/O wait: none on a CPU, one waiting for a page of the file; waiting on units: asleep until a process of that unit (or the manager) woke it; other: the rest"
    )
}

/// `@start +took` of a chain link, as `systemd-analyze critical-chain` prints it.
pub fn unit_at(a: &Analysis, u: &UnitTime) -> String {
    if u.took_ns > 0 {
        format!("@{} +{}", secs(u.activating_ns - a.overview.origin_ns), duration(u.took_ns))
    } else {
        format!("@{}", secs(u.active_ns - a.overview.origin_ns))
    }
}

fn unit_chain(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let Some(chain) = &a.unit_chain else { return Ok(()) };
    writeln!(
        out,
        "\nChain to {} (as systemd-analyze critical-chain: each unit below is the After= unit that became active last before the one above started; @ started, + took)",
        chain.target
    )?;
    for (depth, name) in chain.links.iter().enumerate() {
        let Some(u) = a.units.iter().find(|u| &u.name == name) else { continue };
        let branch = if depth == 0 { String::new() } else { format!("{}└─", "  ".repeat(depth - 1)) };
        let split = unit_split(a, u);
        let split = if split.is_empty() { String::new() } else { format!("  {split}") };
        writeln!(out, "  {branch}{} {}{split}", u.name, unit_at(a, u))?;
    }
    Ok(())
}

fn milestones(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nMilestones")?;
    if a.marks.is_empty() {
        return writeln!(out, "  none");
    }
    let mut table = Table::new(&[
        ("t", Align::Right),
        ("since start", Align::Right),
        ("by", Align::Left),
        ("mark", Align::Left),
    ]);
    for m in &a.marks {
        let by = m.pid.map_or_else(
            || m.source.as_str().to_owned(),
            |p| format!("{} ({})", who(a, p), m.source.as_str()),
        );
        table.row(vec![secs(m.t_ns), secs(m.t_ns - a.overview.origin_ns), by, m.name.clone()]);
    }
    table.write(out, "  ")
}

fn top_files(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let mut by_bytes = a.by_file.clone();
    by_bytes.sort_by(|x, y| y.bytes.cmp(&x.bytes).then(y.reads.cmp(&x.reads)).then(x.name.cmp(&y.name)));
    writeln!(
        out,
        "\nTop files by bytes read (top {} of {})",
        options.top.min(by_bytes.len()),
        by_bytes.len()
    )?;
    rank_table(&by_bytes[..options.top.min(by_bytes.len())], RankBy::File, out)?;
    writeln!(
        out,
        "\nTop files by separate reads (top {} of {})",
        options.top.min(a.by_file.len()),
        a.by_file.len()
    )?;
    rank_table(&a.by_file[..options.top.min(a.by_file.len())], RankBy::File, out)
}

fn top_processes(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let mut procs: Vec<_> = a.processes.iter().filter(|p| p.pages > 0 || p.time.running_ns > 0).collect();
    procs.sort_by(|x, y| {
        y.pages.cmp(&x.pages).then(y.time.running_ns.cmp(&x.time.running_ns)).then(x.pid.cmp(&y.pid))
    });
    let shown = options.top.min(procs.len());
    writeln!(out, "\nTop processes by bytes read (top {shown} of {} that read or ran)", procs.len())?;
    if procs.is_empty() {
        return writeln!(out, "  none");
    }
    let mut table = Table::new(&[
        ("read", Align::Right),
        ("reads", Align::Right),
        ("seeks", Align::Right),
        ("files", Align::Right),
        ("running", Align::Right),
        ("I/O wait", Align::Right),
        ("start", Align::Right),
        ("process", Align::Left),
    ]);
    for p in &procs[..shown] {
        table.row(vec![
            bytes(p.pages * u64::from(a.trace.page_size)),
            count(p.reads),
            count(p.seeks),
            count(p.files),
            secs(p.time.running_ns),
            secs(p.time.io_wait_ns),
            p.start_ns.map_or("before".into(), secs),
            who(a, p.pid),
        ]);
    }
    table.write(out, "  ")
}

/// Running, CPU wait, I/O wait (with the files it was for) and sleep of the busiest
/// processes, with their threads when they have several.
fn time_per_process(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let busy = |t: &coldstart_analyze::StateTimes| {
        t.running_ns.saturating_add(t.runnable_ns).saturating_add(t.io_wait_ns)
    };
    let mut procs: Vec<_> = a.processes.iter().filter(|p| busy(&p.time) > 0).collect();
    procs.sort_by(|x, y| busy(&y.time).cmp(&busy(&x.time)).then(x.pid.cmp(&y.pid)));
    let shown = options.top.min(procs.len());
    writeln!(
        out,
        "\nTime per process and thread (whole recording; top {shown} of {} by running + CPU wait + I/O wait)",
        procs.len()
    )?;
    if procs.is_empty() {
        return writeln!(out, "  no scheduler data");
    }
    let mut table = Table::new(&[
        ("running", Align::Right),
        ("CPU wait", Align::Right),
        ("I/O wait", Align::Right),
        ("sleeping", Align::Right),
        ("process / thread", Align::Left),
        ("I/O wait for", Align::Left),
    ]);
    let row = |t: &coldstart_analyze::StateTimes, name: String, files: String| {
        vec![secs(t.running_ns), secs(t.runnable_ns), secs(t.io_wait_ns), secs(t.sleeping_ns), name, files]
    };
    for p in &procs[..shown] {
        let mut uses: Vec<_> = a.file_uses.iter().filter(|u| u.pid == p.pid && u.io_wait_ns > 0).collect();
        uses.sort_by(|x, y| y.io_wait_ns.cmp(&x.io_wait_ns).then(x.file.cmp(&y.file)));
        let mut files: Vec<String> = uses
            .iter()
            .take(3)
            .map(|u| format!("{} {}", base_name(a.file_name(u.file)), duration(u.io_wait_ns)))
            .collect();
        if uses.len() > 3 {
            files.push(format!("+{} files", uses.len() - 3));
        }
        let unattributed = p.time.io_wait_ns - p.io_wait_attributed_ns;
        if unattributed > 0 && p.time.io_wait_ns > 0 {
            files.push(format!("no file seen {}", duration(unattributed)));
        }
        table.row(row(&p.time, who(a, p.pid), files.join(", ")));
        let mut threads: Vec<_> = a.threads.iter().filter(|t| t.pid == p.pid && busy(&t.time) > 0).collect();
        if threads.len() > 1 {
            threads.sort_by(|x, y| busy(&y.time).cmp(&busy(&x.time)).then(x.tid.cmp(&y.tid)));
            for t in threads.iter().take(5) {
                table.row(row(&t.time, format!("  {}", thread(a, t.tid)), String::new()));
            }
            if threads.len() > 5 {
                table.row(
                    vec![String::new(); 4]
                        .into_iter()
                        .chain([format!("  … {} more threads", threads.len() - 5), String::new()])
                        .collect(),
                );
            }
        }
    }
    table.write(out, "  ")
}

fn disks(a: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nDisk seeks (consecutive read requests by issue time; writes apart)")?;
    if a.disks.iter().all(|d| d.seeks.requests == 0) {
        return writeln!(out, "  no read requests with a sector");
    }
    for d in a.disks.iter().filter(|d| d.seeks.requests > 0) {
        let s = &d.seeks;
        writeln!(
            out,
            "  {} {}: {}: {} sequential, {} forward, {} backward, {} farther than {}",
            d.name,
            d.dev,
            plural(s.requests, "request"),
            count(s.sequential),
            count(s.forward),
            count(s.backward),
            count(s.far),
            bytes(s.threshold_bytes)
        )?;
        if let Some(median) = s.median_distance_bytes {
            let b = &s.distances;
            writeln!(
                out,
                "    seek distance: median {}; {} under 1 MiB, {} under 128 MiB, {} under 1 GiB, {} farther",
                bytes(median),
                count(b.under_1_mib),
                count(b.under_128_mib),
                count(b.under_1_gib),
                count(b.farther)
            )?;
        }
        if let Some(median) = d.read_latency_median_ns {
            writeln!(
                out,
                "    read latency: median {}, {} summed over {}",
                duration(median),
                secs(d.read_latency_ns),
                plural(d.traced_read_requests, "read request")
            )?;
        }
        writeln!(
            out,
            "    reads of filesystem metadata: {} ({}); of no file of this trace (other processes, unrecorded files): {} ({})",
            plural(d.metadata_requests, "request"),
            bytes(d.metadata_bytes),
            plural(d.unknown_requests, "request"),
            bytes(d.unknown_bytes)
        )?;
        if d.write_requests > 0 {
            writeln!(
                out,
                "    writes: {} ({}), left out of the seeks and the files below",
                plural(d.write_requests, "request"),
                bytes(d.write_bytes)
            )?;
        }
        if d.reissued > 0 {
            writeln!(
                out,
                "    {} issued again while in flight (requeued), counted once",
                plural(d.reissued, "request")
            )?;
        }
        if !d.files.is_empty() {
            let mut table = Table::new(&[
                ("requests", Align::Right),
                ("bytes", Align::Right),
                ("far seeks", Align::Right),
                ("latency", Align::Right),
                ("file", Align::Left),
            ]);
            for f in d.files.iter().take(options.top) {
                table.row(vec![
                    count(f.requests),
                    bytes(f.bytes),
                    count(f.far_seeks),
                    secs(f.latency_ns),
                    a.file_name(f.file).to_owned(),
                ]);
            }
            table.write(out, "    ")?;
        }
    }
    Ok(())
}

fn origins(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let o = &a.page_origins;
    let total = (o.fault + o.read + o.readahead + o.unknown) as f64;
    writeln!(out, "\nReadahead (why pages entered the page cache, and whether they were used)")?;
    if o.unknown as f64 == total {
        return writeln!(out, "  not recorded in this trace");
    }
    writeln!(
        out,
        "  fault {} ({}), read {} ({}), readahead {} ({}), not known {} ({})",
        count(o.fault),
        percent(o.fault as f64, total),
        count(o.read),
        percent(o.read as f64, total),
        count(o.readahead),
        percent(o.readahead as f64, total),
        count(o.unknown),
        percent(o.unknown as f64, total)
    )?;
    read_ahead(a, out)?;
    match &a.page_use {
        None => writeln!(
            out,
            "  whether the pages read were used is not recorded in this trace (no page accesses)"
        ),
        Some(u) => page_use(a, u, out),
    }
}

/// Each disk's read-ahead setting and the share of its files' pages read ahead and never used.
fn read_ahead(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let page = u64::from(a.trace.page_size);
    for d in a.disks.iter().filter(|d| d.traced_read_requests > 0) {
        let setting = match d.read_ahead_kb {
            Some(kb) => format!("read-ahead {} (read_ahead_kb {kb})", bytes(u64::from(kb) * 1024)),
            None => "read-ahead unknown (not recorded before trace format 4)".to_owned(),
        };
        let waste = if d.filled_pages > 0 && a.page_use.is_some() {
            format!(
                "; of the {} of its files read into the cache, {} ({}) read ahead and never used",
                bytes(d.filled_pages * page),
                bytes(d.unused_pages * page),
                percent(d.unused_pages as f64, d.filled_pages as f64)
            )
        } else {
            String::new()
        };
        writeln!(out, "  {} {}: {setting}{waste}", d.name, d.dev)?;
    }
    Ok(())
}

fn page_use(a: &Analysis, u: &coldstart_analyze::PageUse, out: &mut dyn Write) -> io::Result<()> {
    let page = u64::from(a.trace.page_size);
    let total = u.filled_pages as f64;
    let metadata_read = a
        .by_file
        .iter()
        .filter_map(|f| f.file)
        .any(|id| a.file(id).is_some_and(|i| i.kind == FileKind::DeviceMetadata));
    writeln!(
        out,
        "  of {} pages read into the cache ({}{}): asked for (read or fault) {} ({}), only mapped around a \
         fault {} ({}), never asked for {} ({}, {})",
        count(u.filled_pages),
        bytes(u.filled_pages * page),
        if metadata_read { "; filesystem metadata apart, as no program asks for it" } else { "" },
        count(u.used_pages),
        percent(u.used_pages as f64, total),
        count(u.map_around_only_pages),
        percent(u.map_around_only_pages as f64, total),
        count(u.unused_pages),
        percent(u.unused_pages as f64, total),
        bytes(u.unused_pages * page)
    )?;
    writeln!(
        out,
        "  of {} pages asked for, {} were already in the cache",
        count(u.asked_pages),
        count(u.asked_cached_pages)
    )?;
    let rows: Vec<_> = a.page_use_by_file.iter().filter(|f| f.unused_pages > 0).take(5).collect();
    if rows.is_empty() {
        return Ok(());
    }
    let mut table = Table::new(&[
        ("never asked for", Align::Right),
        ("read", Align::Right),
        ("used", Align::Right),
        ("file", Align::Left),
    ]);
    for f in rows {
        table.row(vec![
            bytes(f.unused_pages * page),
            bytes(f.filled_pages * page),
            percent(f.used_pages as f64, f.filled_pages as f64),
            a.file_name(f.file).to_owned(),
        ]);
    }
    table.write(out, "  ")
}

fn warnings(a: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "\nWarnings")?;
    if a.warnings.is_empty() {
        return writeln!(out, "  none");
    }
    for w in &a.warnings {
        writeln!(out, "  - {}", w.message)?;
    }
    Ok(())
}

fn rank_table(rows: &[coldstart_analyze::RankRow], by: RankBy, out: &mut dyn Write) -> io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "  none");
    }
    let (spread, what) = match by {
        RankBy::File => ("procs", "file"),
        RankBy::Process => ("files", "process"),
    };
    let mut table = Table::new(&[
        ("reads", Align::Right),
        ("seeks", Align::Right),
        ("read", Align::Right),
        ("pages", Align::Right),
        ("I/O wait", Align::Right),
        (spread, Align::Right),
        (what, Align::Left),
    ]);
    for r in rows {
        let name = match r.pid {
            Some(pid) => format!("{}/{pid}", r.name),
            None => r.name.clone(),
        };
        table.row(vec![
            count(r.reads),
            count(r.seeks),
            bytes(r.bytes),
            count(r.pages),
            secs(r.io_wait_ns),
            count(r.spread),
            name,
        ]);
    }
    table.write(out, "  ")
}

/// Describes a filter for headings: `; pid 123; paths containing "lib"`.
fn filter_note(filter: &ReadFilter) -> String {
    let mut note = String::new();
    if let Some(pid) = filter.pid {
        note.push_str(&format!("; pid {pid}"));
    }
    if let Some(s) = &filter.path_contains {
        note.push_str(&format!("; paths containing {s:?}"));
    }
    note
}

/// Files or processes ranked by separate reads (`coldstart reads --by …`).
pub fn ranking(
    a: &Analysis,
    by: RankBy,
    filter: &ReadFilter,
    top: usize,
    out: &mut dyn Write,
) -> io::Result<()> {
    let rows = a.rank(by, filter);
    let what = match by {
        RankBy::File => "Files",
        RankBy::Process => "Processes",
    };
    let mut out = io::BufWriter::new(out);
    writeln!(
        out,
        "{what} by separate reads (top {} of {}{}); a seek is a read that does not continue where the \
         process's previous read of the file ended",
        top.min(rows.len()),
        rows.len(),
        filter_note(filter)
    )?;
    rank_table(&rows[..top.min(rows.len())], by, &mut out)?;
    out.flush()
}

/// Every coalesced read, one a line, in time order (`coldstart reads --raw`).
pub fn reads(a: &Analysis, filter: &ReadFilter, out: &mut dyn Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    writeln!(
        out,
        "# t = seconds since the recording started; pages of {}",
        bytes(u64::from(a.trace.page_size))
    )?;
    writeln!(out, "# time        size  (comm/pid): path first_page-last_page [seek]")?;
    let page = u64::from(a.trace.page_size);
    for r in a.reads_matching(filter) {
        let seek = if r.seek { "  seek" } else { "" };
        writeln!(
            out,
            "{:>10.6} s {:>10}  ({}): {} {}-{}{seek}",
            r.t_ns as f64 / 1e9,
            bytes(r.pages * page),
            who(a, r.pid),
            a.file_name(r.file),
            r.first_page,
            r.last_page()
        )?;
    }
    out.flush()
}
