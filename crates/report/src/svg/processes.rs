//! The rows of the process chart: which processes get a bar, in the order of
//! [`crate::process_order`] (start order under their parents, short helpers folded
//! into one row per parent), and what each was doing in each pixel column of the
//! time axis.
//!
//! States come from the scheduler intervals of the process's threads when the trace
//! has them; otherwise from the periodic process samples (bootchart2 imports), where
//! a sample's CPU use counts as running and the rest of a `D` sample as I/O wait, as
//! pybootchartgui shades them. Above `max_rows` rows, idle ones (no CPU, no I/O
//! wait, no reads) and then the least active are left out and summed in one last row.

use std::collections::HashMap;

use coldstart_analyze::units::{base_name, bytes, duration, plural};
use coldstart_analyze::{Analysis, ProcessInfo};
use coldstart_trace::{Nanos, ThreadState, Trace};

use super::scale::TimeScale;
use crate::process_order::{PidIndex, ProcessOrder, Shown, process_order};

/// Per column, nanoseconds spent running, waiting for a CPU and waiting for I/O
/// (summed over threads, so they may exceed the column's length).
pub type Columns = Vec<[f64; 3]>;
pub const RUNNING: usize = 0;
pub const RUNNABLE: usize = 1;
pub const IO_WAIT: usize = 2;

/// Where the process states were taken from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StateSource {
    Sched,
    Samples,
    None,
}

/// What a row stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowKind {
    Process,
    /// Short helpers of one parent, folded.
    Helpers,
    /// The processes left out above `max_rows`.
    Others,
}

/// One bar of the chart.
pub struct Row {
    pub kind: RowKind,
    pub pid: Option<i32>,
    /// Shown ancestors above it.
    pub depth: usize,
    pub name: String,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// False when the process existed before the recording (or outlived it).
    pub forked: bool,
    pub exited: bool,
    pub activity: Option<Columns>,
    /// Execs during the recording: time and the executable's file name.
    pub execs: Vec<(Nanos, String)>,
    /// Stretches of the critical path to readiness spent in this process, merged.
    pub critical: Vec<(Nanos, Nanos)>,
    /// The lifetimes of a folded row's processes, merged (empty for other rows).
    pub lives: Vec<(Nanos, Nanos)>,
    /// Milestones a process of the row reached: time and name.
    pub milestones: Vec<(Nanos, String)>,
    pub tooltip: String,
}

/// The rows and what was left out.
pub struct Rows {
    pub rows: Vec<Row>,
    pub total: usize,
    pub hidden_idle: usize,
    pub hidden_quiet: usize,
    /// The most CPU and I/O wait time of any hidden process that was not idle.
    pub quiet_max_ns: Nanos,
    /// Short helpers folded into rows of their own (not left out), and those rows.
    pub folded: usize,
    pub folded_rows: usize,
    pub source: StateSource,
}

fn add(
    activity: &mut Option<Columns>,
    scale: &TimeScale,
    state: usize,
    start: Nanos,
    end: Nanos,
    weight: f64,
) {
    let cols = activity.get_or_insert_with(|| vec![[0.0; 3]; scale.columns()]);
    scale.spread(start, end, |c, ns| cols[c][state] += ns * weight);
}

fn activity(
    trace: &Trace,
    analysis: &Analysis,
    scale: &TimeScale,
    pids: &PidIndex,
) -> (Vec<Option<Columns>>, StateSource) {
    let mut activity: Vec<Option<Columns>> = vec![None; trace.processes.len()];
    if !trace.sched.is_empty() {
        let pid_of = |tid: i32| {
            analysis
                .threads
                .binary_search_by_key(&tid, |t| t.tid)
                .ok()
                .map_or(tid, |i| analysis.threads[i].pid)
        };
        for s in &trace.sched {
            let state = match s.state {
                ThreadState::Running => RUNNING,
                ThreadState::Runnable => RUNNABLE,
                ThreadState::IoWait => IO_WAIT,
                ThreadState::Sleeping | ThreadState::Stopped => continue,
            };
            if let Some(i) = pids.at(pid_of(s.tid), s.start_ns) {
                add(&mut activity[i], scale, state, s.start_ns, s.end_ns, 1.0);
            }
        }
        return (activity, StateSource::Sched);
    }
    if trace.process_samples.is_empty() {
        return (activity, StateSource::None);
    }
    for s in &trace.process_samples {
        let Some(i) = pids.at(s.pid, s.t_ns) else { continue };
        let cpu = (s.cpu_user + s.cpu_system).clamp(0.0, 1.0);
        let start = s.t_ns - s.dt_ns.max(0);
        if cpu > 0.0 {
            add(&mut activity[i], scale, RUNNING, start, s.t_ns, cpu);
        }
        if s.state == 'D' && cpu < 1.0 {
            add(&mut activity[i], scale, IO_WAIT, start, s.t_ns, 1.0 - cpu);
        }
    }
    (activity, StateSource::Samples)
}

fn busy_ns(cols: &Option<Columns>) -> Nanos {
    cols.as_ref()
        .map_or(0, |c| c.iter().map(|v| v[RUNNING] + v[RUNNABLE] + v[IO_WAIT]).sum::<f64>().round() as Nanos)
}

fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_owned()
    } else {
        let mut t: String = text.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Builds the rows: chart order, filtered to at most `max_rows` (the last one summing up the rest).
pub fn rows(trace: &Trace, analysis: &Analysis, scale: &TimeScale, max_rows: usize) -> Rows {
    let mut chart = Chart::new(trace, analysis, scale);
    let left_out = chart.leave_out(max_rows);
    let depths = chart.order.depths(&left_out.shown);
    let entries = chart.order.entries.len();
    let mut rows = Vec::new();
    for k in (0..entries).filter(|&k| left_out.shown[k]) {
        let row = match &chart.order.entries[k].shown {
            Shown::Process(_) => chart.process_row(k, depths[k]),
            Shown::Helpers(_) => chart.helpers_row(k, depths[k]),
        };
        rows.push(row);
    }
    if left_out.hidden_idle + left_out.hidden_quiet > 0 {
        rows.push(chart.others_row(&left_out));
    }
    let folded_entries: Vec<usize> = (0..entries)
        .filter(|&k| left_out.shown[k] && matches!(chart.order.entries[k].shown, Shown::Helpers(_)))
        .collect();
    Rows {
        rows,
        total: trace.processes.len(),
        hidden_idle: left_out.hidden_idle,
        hidden_quiet: left_out.hidden_quiet,
        quiet_max_ns: left_out.quiet_max_ns,
        folded: folded_entries.iter().map(|&k| chart.members(k).len()).sum(),
        folded_rows: folded_entries.len(),
        source: chart.source,
    }
}

/// Which entries of the order get a row, and what the ones left out were.
struct LeftOut {
    shown: Vec<bool>,
    hidden_idle: usize,
    hidden_quiet: usize,
    quiet_max_ns: Nanos,
}

/// The trace's processes (indexed as in `trace.processes`) matched to the analysis's and
/// to the entries of the chart's order, with what each did; rows take their parts out.
struct Chart<'a> {
    trace: &'a Trace,
    analysis: &'a Analysis,
    scale: &'a TimeScale,
    pids: PidIndex,
    order: ProcessOrder,
    info_index: HashMap<(i32, Option<Nanos>), usize>,
    trace_index: HashMap<(i32, Option<Nanos>), usize>,
    activity: Vec<Option<Columns>>,
    source: StateSource,
    busy: Vec<Nanos>,
    /// Running time as drawn: from the scheduler, or the samples' CPU use of an import.
    running: Vec<Nanos>,
    execs: Vec<Vec<(Nanos, String)>>,
    critical: Vec<Vec<(Nanos, Nanos)>>,
    milestones: Vec<Vec<(Nanos, String)>>,
}

impl<'a> Chart<'a> {
    fn new(trace: &'a Trace, analysis: &'a Analysis, scale: &'a TimeScale) -> Chart<'a> {
        let pids = PidIndex::of_trace(trace);
        let (activity, source) = activity(trace, analysis, scale, &pids);
        let info_index =
            analysis.processes.iter().enumerate().map(|(i, p)| ((p.pid, p.start_ns), i)).collect();
        let busy = activity.iter().map(busy_ns).collect();
        let running = activity
            .iter()
            .map(|c| c.as_ref().map_or(0, |c| c.iter().map(|v| v[RUNNING]).sum::<f64>().round() as Nanos))
            .collect();
        // The order indexes the analysis's processes; the bars are the trace's.
        let trace_index = trace.processes.iter().enumerate().map(|(i, p)| ((p.pid, p.start_ns), i)).collect();
        let ProcessEvents { execs, critical, milestones } = events_per_process(trace, analysis, &pids);
        Chart {
            trace,
            analysis,
            scale,
            order: process_order(analysis),
            pids,
            info_index,
            trace_index,
            activity,
            source,
            busy,
            running,
            execs,
            critical,
            milestones,
        }
    }

    fn info(&self, i: usize) -> Option<&'a ProcessInfo> {
        let p = &self.trace.processes[i];
        self.info_index.get(&(p.pid, p.start_ns)).map(|&k| &self.analysis.processes[k])
    }

    fn pages(&self, i: usize) -> u64 {
        self.info(i).map_or(0, |p| p.pages)
    }

    fn trace_of(&self, a: usize) -> Option<usize> {
        let p = &self.analysis.processes[a];
        self.trace_index.get(&(p.pid, p.start_ns)).copied()
    }

    /// The trace's processes of an entry of the order.
    fn members(&self, k: usize) -> Vec<usize> {
        match &self.order.entries[k].shown {
            Shown::Process(a) => self.trace_of(*a).into_iter().collect(),
            Shown::Helpers(list) => list.iter().filter_map(|&(a, _)| self.trace_of(a)).collect(),
        }
    }

    /// Above `max_rows` entries, leaves out the least active (idle ones first), keeping the
    /// command's root.
    fn leave_out(&self, max_rows: usize) -> LeftOut {
        let entries = self.order.entries.len();
        // Processes the analysis found only in threads or page fills have no bar.
        let mut shown: Vec<bool> = (0..entries).map(|k| !self.members(k).is_empty()).collect();
        let (mut hidden_idle, mut hidden_quiet, mut quiet_max_ns) = (0, 0, 0);
        if shown.iter().filter(|&&s| s).count() > max_rows.max(2) {
            let entry_busy: Vec<Nanos> =
                (0..entries).map(|k| self.members(k).iter().map(|&i| self.busy[i]).sum()).collect();
            let entry_pages: Vec<u64> =
                (0..entries).map(|k| self.members(k).iter().map(|&i| self.pages(i)).sum()).collect();
            let procs = &self.trace.processes;
            let root = self.trace.meta.root_pid.and_then(|pid| self.pids.at(pid, 0)).and_then(|i| {
                let p = &procs[i];
                self.info_index.get(&(p.pid, p.start_ns)).map(|&a| self.order.entry_of[a])
            });
            let start = |k: usize| self.members(k).iter().map(|&i| procs[i].start_ns).min().flatten();
            let mut ranked: Vec<usize> = (0..entries).filter(|&k| shown[k]).collect();
            ranked.sort_by_key(|&k| {
                (Some(k) != root, std::cmp::Reverse((entry_busy[k], entry_pages[k])), start(k), k)
            });
            let budget = max_rows.max(2) - 1;
            // Idle entries rank last, so they are the first left out.
            for &k in ranked.iter().skip(budget) {
                shown[k] = false;
                for i in self.members(k) {
                    if self.busy[i] == 0 && self.pages(i) == 0 {
                        hidden_idle += 1;
                    } else {
                        hidden_quiet += 1;
                        quiet_max_ns = quiet_max_ns.max(self.busy[i]);
                    }
                }
            }
        }
        LeftOut { shown, hidden_idle, hidden_quiet, quiet_max_ns }
    }

    /// A start and an end within the chart's time axis.
    fn clamped_life(&self, i: usize) -> (Nanos, Nanos) {
        let p = &self.trace.processes[i];
        (
            p.start_ns.unwrap_or(self.scale.t0).max(self.scale.t0),
            p.end_ns.unwrap_or(self.scale.t1).min(self.scale.t1),
        )
    }

    fn process_row(&mut self, k: usize, depth: usize) -> Row {
        let i = self.members(k)[0];
        let p = &self.trace.processes[i];
        let mut execs = std::mem::take(&mut self.execs[i]);
        execs.sort();
        let (start_ns, end_ns) = self.clamped_life(i);
        Row {
            kind: RowKind::Process,
            pid: Some(p.pid),
            depth,
            name: if p.comm.is_empty() { format!("pid {}", p.pid) } else { p.name().to_owned() },
            start_ns,
            end_ns,
            forked: p.start_ns.is_some(),
            exited: p.end_ns.is_some(),
            activity: self.activity[i].take(),
            execs,
            critical: merged(std::mem::take(&mut self.critical[i])),
            lives: Vec::new(),
            milestones: sorted(std::mem::take(&mut self.milestones[i])),
            tooltip: tooltip(self.trace, self.info(i), i, self.busy[i], self.source),
        }
    }

    fn helpers_row(&mut self, k: usize, depth: usize) -> Row {
        let list = self.members(k);
        let lives = merged(list.iter().map(|&i| self.clamped_life(i)).collect());
        let (count, cpu) = (list.len(), list.iter().map(|&i| self.running[i]).sum());
        let parent_name = self.order.entries[k].parent.and_then(|e| match self.order.entries[e].shown {
            Shown::Process(a) => {
                let p = &self.analysis.processes[a];
                Some(format!("{} (pid {})", p.comm, p.pid))
            }
            Shown::Helpers(_) => None,
        });
        Row {
            kind: RowKind::Helpers,
            pid: None,
            depth,
            name: helpers_label(count, cpu),
            start_ns: lives.first().map_or(self.scale.t0, |l| l.0),
            end_ns: lives.iter().map(|l| l.1).max().unwrap_or(self.scale.t1),
            forked: false,
            exited: false,
            activity: sum_columns(list.iter().filter_map(|&i| self.activity[i].take()), self.scale),
            execs: Vec::new(),
            critical: merged(list.iter().flat_map(|&i| std::mem::take(&mut self.critical[i])).collect()),
            lives,
            milestones: Vec::new(),
            tooltip: helpers_tooltip(self.trace, &list, parent_name, cpu),
        }
    }

    /// The last row, summing up the processes left out.
    fn others_row(&mut self, left_out: &LeftOut) -> Row {
        let hidden = left_out.hidden_idle + left_out.hidden_quiet;
        let left_out_procs: Vec<usize> = (0..self.order.entries.len())
            .filter(|&k| !left_out.shown[k])
            .flat_map(|k| self.members(k))
            .collect();
        Row {
            kind: RowKind::Others,
            pid: None,
            depth: 0,
            name: format!("{} other processes", hidden),
            start_ns: self.scale.t0,
            end_ns: self.scale.t1,
            forked: false,
            exited: false,
            activity: sum_columns(left_out_procs.iter().filter_map(|&i| self.activity[i].take()), self.scale),
            execs: Vec::new(),
            critical: merged(
                left_out_procs.iter().flat_map(|&i| std::mem::take(&mut self.critical[i])).collect(),
            ),
            lives: Vec::new(),
            milestones: sorted(
                left_out_procs.iter().flat_map(|&i| std::mem::take(&mut self.milestones[i])).collect(),
            ),
            tooltip: format!(
                "{} left out: {} idle (no CPU, I/O wait or reads) and {} less active (at most {} of CPU and I/O wait each); their activity is summed in this row",
                plural(hidden as u64, "process"),
                left_out.hidden_idle,
                left_out.hidden_quiet,
                duration(left_out.quiet_max_ns)
            ),
        }
    }
}

/// Per trace process: its execs, its stretches of the critical path and the milestones it reached.
struct ProcessEvents {
    execs: Vec<Vec<(Nanos, String)>>,
    critical: Vec<Vec<(Nanos, Nanos)>>,
    milestones: Vec<Vec<(Nanos, String)>>,
}

fn events_per_process(trace: &Trace, analysis: &Analysis, pids: &PidIndex) -> ProcessEvents {
    let procs = &trace.processes;
    let mut execs: Vec<Vec<(Nanos, String)>> = vec![Vec::new(); procs.len()];
    for e in &trace.execs {
        if let Some(i) = pids.at(e.pid, e.t_ns) {
            execs[i].push((e.t_ns, base_name(&e.path).to_owned()));
        }
    }
    let mut critical: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); procs.len()];
    for s in analysis.critical_path.iter().flat_map(|p| &p.segments) {
        if let Some(i) = pids.at(s.pid, s.start_ns) {
            critical[i].push((s.start_ns, s.end_ns));
        }
    }
    let mut milestones: Vec<Vec<(Nanos, String)>> = vec![Vec::new(); procs.len()];
    for m in &analysis.marks {
        if let Some(i) = m.pid.and_then(|pid| pids.at(pid, m.t_ns)) {
            milestones[i].push((m.t_ns, m.name.clone()));
        }
    }
    if let Some(r) = &analysis.overview.ready
        && let Some(i) = pids.at(r.pid, r.t_ns)
        && !milestones[i].iter().any(|(t, _)| *t == r.t_ns)
    {
        milestones[i].push((r.t_ns, "ready".to_owned()));
    }
    ProcessEvents { execs, critical, milestones }
}

/// The name of a row of folded helpers: `+12 short helpers, 80.0 ms CPU` (no CPU
/// figure when the trace has none for them).
pub fn helpers_label(count: usize, cpu_ns: Nanos) -> String {
    if cpu_ns > 0 {
        format!("+{count} short helpers, {} CPU", duration(cpu_ns))
    } else {
        format!("+{count} short helpers")
    }
}

fn helpers_tooltip(trace: &Trace, list: &[usize], parent: Option<String>, cpu_ns: Nanos) -> String {
    let mut names: Vec<(String, usize)> = Vec::new();
    for &i in list {
        let comm = trace.processes[i].name();
        match names.iter_mut().find(|(n, _)| n == comm) {
            Some((_, c)) => *c += 1,
            None => names.push((comm.to_owned(), 1)),
        }
    }
    names.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let listed: Vec<String> =
        names.iter().take(12).map(|(n, c)| if *c > 1 { format!("{n} ×{c}") } else { n.clone() }).collect();
    let more = if names.len() > 12 { format!(", {} other names", names.len() - 12) } else { String::new() };
    let first = list.iter().filter_map(|&i| trace.processes[i].start_ns).min().unwrap_or(0);
    let last = list.iter().filter_map(|&i| trace.processes[i].end_ns).max().unwrap_or(0);
    let pids: Vec<String> = list.iter().take(20).map(|&i| trace.processes[i].pid.to_string()).collect();
    format!(
        "{} short-lived helpers folded{} (each forked and exited quickly, read under 1 MiB, reached no milestone, not on the critical path)\n{}{}\nfrom {:.3} s to {:.3} s, running {} in all\npids {}{}",
        list.len(),
        parent.map(|p| format!(" under {p}")).unwrap_or_default(),
        listed.join(", "),
        more,
        first as f64 / 1e9,
        last as f64 / 1e9,
        duration(cpu_ns),
        pids.join(", "),
        if list.len() > 20 { ", …" } else { "" }
    )
}

/// Intervals sorted and merged where they touch or overlap.
fn merged(mut spans: Vec<(Nanos, Nanos)>) -> Vec<(Nanos, Nanos)> {
    spans.sort();
    let mut out: Vec<(Nanos, Nanos)> = Vec::with_capacity(spans.len());
    for (start, end) in spans {
        match out.last_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(end),
            _ => out.push((start, end)),
        }
    }
    out
}

fn sorted(mut list: Vec<(Nanos, String)>) -> Vec<(Nanos, String)> {
    list.sort();
    list
}

fn sum_columns(columns: impl Iterator<Item = Columns>, scale: &TimeScale) -> Option<Columns> {
    let mut sum: Option<Columns> = None;
    for cols in columns {
        let total = sum.get_or_insert_with(|| vec![[0.0; 3]; scale.columns()]);
        for (t, c) in total.iter_mut().zip(&cols) {
            for k in 0..3 {
                t[k] += c[k];
            }
        }
    }
    sum
}

fn tooltip(trace: &Trace, info: Option<&ProcessInfo>, i: usize, busy: Nanos, source: StateSource) -> String {
    let p = &trace.processes[i];
    let mut lines = vec![match p.ppid {
        Some(ppid) => format!("{} (pid {}, parent {ppid})", p.name(), p.pid),
        None => format!("{} (pid {})", p.name(), p.pid),
    }];
    if let Some(exe) = &p.exe {
        lines.push(format!("executable {exe}"));
    }
    if !p.argv.is_empty() {
        lines.push(truncate(&p.argv.join(" "), 300));
    }
    let secs = |t: Nanos| format!("{:.3} s", t as f64 / 1e9);
    let start = p.start_ns.map_or("before the recording".to_owned(), |t| format!("forked at {}", secs(t)));
    let end = match (p.end_ns, p.exit_code) {
        (Some(t), Some(c)) => format!("exited at {} (status {c})", secs(t)),
        (Some(t), None) => format!("exited at {}", secs(t)),
        (None, _) => "still running at the end".to_owned(),
    };
    lines.push(format!("{start}, {end}"));
    match (source, info) {
        (StateSource::Sched, Some(info)) => lines.push(format!(
            "running {}, waiting for a CPU {}, I/O wait {} ({})",
            duration(info.time.running_ns),
            duration(info.time.runnable_ns),
            duration(info.time.io_wait_ns),
            plural(info.threads, "thread")
        )),
        (StateSource::Samples, _) => {
            lines.push(format!("CPU and I/O wait {} (from samples)", duration(busy)))
        }
        _ => {}
    }
    if let Some(info) = info.filter(|i| i.pages > 0) {
        lines.push(format!(
            "read {} from {} in {}, {}",
            bytes(info.pages * u64::from(trace.meta.page_size.max(1))),
            plural(info.files, "file"),
            plural(info.reads, "read"),
            plural(info.seeks, "seek")
        ));
    }
    lines.join("\n")
}
