//! The rows of the process chart: which processes get a bar, in tree order, and
//! what each was doing in each pixel column of the time axis.
//!
//! States come from the scheduler intervals of the process's threads when the trace
//! has them; otherwise from the periodic process samples (bootchart2 imports), where
//! a sample's CPU use counts as running and the rest of a `D` sample as I/O wait, as
//! pybootchartgui shades them. Above `max_rows` processes, idle ones (no CPU, no I/O
//! wait, no reads) and then the least active are left out and summed in one last row.

use std::collections::HashMap;

use coldstart_analyze::units::{base_name, bytes, duration, plural};
use coldstart_analyze::{Analysis, ProcessInfo};
use coldstart_trace::{Nanos, ThreadState, Trace};

use super::scale::TimeScale;

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

/// One bar of the chart.
pub struct Row {
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
    pub source: StateSource,
}

/// Finds the process a pid named at a given time (pids may be reused).
struct PidIndex {
    by_pid: HashMap<i32, Vec<usize>>,
}

impl PidIndex {
    fn new(trace: &Trace) -> PidIndex {
        let mut by_pid: HashMap<i32, Vec<usize>> = HashMap::new();
        for (i, p) in trace.processes.iter().enumerate() {
            by_pid.entry(p.pid).or_default().push(i);
        }
        for list in by_pid.values_mut() {
            list.sort_by_key(|&i| (trace.processes[i].start_ns.unwrap_or(Nanos::MIN), i));
        }
        PidIndex { by_pid }
    }

    /// The latest process with `pid` started at or before `t` (else the first one).
    fn at(&self, trace: &Trace, pid: i32, t: Nanos) -> Option<usize> {
        let list = self.by_pid.get(&pid)?;
        list.iter()
            .rev()
            .find(|&&i| trace.processes[i].start_ns.unwrap_or(Nanos::MIN) <= t)
            .or_else(|| list.first())
            .copied()
    }
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
            if let Some(i) = pids.at(trace, pid_of(s.tid), s.start_ns) {
                add(&mut activity[i], scale, state, s.start_ns, s.end_ns, 1.0);
            }
        }
        return (activity, StateSource::Sched);
    }
    if trace.process_samples.is_empty() {
        return (activity, StateSource::None);
    }
    for s in &trace.process_samples {
        let Some(i) = pids.at(trace, s.pid, s.t_ns) else { continue };
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

/// Builds the rows: tree order, filtered to at most `max_rows` (the last one summing up the rest).
pub fn rows(trace: &Trace, analysis: &Analysis, scale: &TimeScale, max_rows: usize) -> Rows {
    let pids = PidIndex::new(trace);
    let (mut activity, source) = activity(trace, analysis, scale, &pids);
    let procs = &trace.processes;
    let info_index: HashMap<(i32, Option<Nanos>), usize> =
        analysis.processes.iter().enumerate().map(|(i, p)| ((p.pid, p.start_ns), i)).collect();
    let info = |i: usize| info_index.get(&(procs[i].pid, procs[i].start_ns)).map(|&k| &analysis.processes[k]);
    let pages = |i: usize| info(i).map_or(0, |p| p.pages);
    let busy: Vec<Nanos> = activity.iter().map(busy_ns).collect();

    let mut shown = vec![true; procs.len()];
    let (mut hidden_idle, mut hidden_quiet, mut quiet_max_ns) = (0, 0, 0);
    if procs.len() > max_rows.max(2) {
        let root = trace.meta.root_pid.and_then(|pid| pids.at(trace, pid, 0));
        let mut order: Vec<usize> = (0..procs.len()).collect();
        order.sort_by_key(|&i| {
            (Some(i) != root, std::cmp::Reverse((busy[i], pages(i))), procs[i].start_ns, procs[i].pid, i)
        });
        let budget = max_rows.max(2) - 1;
        for (rank, &i) in order.iter().enumerate() {
            let idle = busy[i] == 0 && pages(i) == 0 && Some(i) != root;
            if rank >= budget || idle {
                shown[i] = false;
                if idle {
                    hidden_idle += 1;
                } else {
                    hidden_quiet += 1;
                    quiet_max_ns = quiet_max_ns.max(busy[i]);
                }
            }
        }
    }

    let parent = parents(trace, &pids);
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); procs.len()];
    let mut roots = Vec::new();
    for (i, parent) in parent.iter().enumerate() {
        match *parent {
            Some(p) => children[p].push(i),
            None => roots.push(i),
        }
    }
    let key = |&i: &usize| (procs[i].start_ns.unwrap_or(Nanos::MIN), procs[i].pid, i);
    roots.sort_by_key(key);
    for c in &mut children {
        c.sort_by_key(key);
    }

    let mut execs: Vec<Vec<(Nanos, String)>> = vec![Vec::new(); procs.len()];
    for e in &trace.execs {
        if let Some(i) = pids.at(trace, e.pid, e.t_ns) {
            execs[i].push((e.t_ns, base_name(&e.path).to_owned()));
        }
    }

    let mut critical: Vec<Vec<(Nanos, Nanos)>> = vec![Vec::new(); procs.len()];
    for s in analysis.critical_path.iter().flat_map(|p| &p.segments) {
        if let Some(i) = pids.at(trace, s.pid, s.start_ns) {
            match critical[i].last_mut() {
                Some(last) if last.1 >= s.start_ns => last.1 = last.1.max(s.end_ns),
                _ => critical[i].push((s.start_ns, s.end_ns)),
            }
        }
    }

    let mut rows = Vec::new();
    let mut visited = vec![false; procs.len()];
    // Depth-first, with an explicit stack of (process, shown ancestors).
    let mut stack: Vec<(usize, usize)> = roots.iter().rev().map(|&r| (r, 0)).collect();
    while let Some((i, depth)) = stack.pop() {
        if std::mem::replace(&mut visited[i], true) {
            continue;
        }
        let child_depth = if shown[i] { depth + 1 } else { depth };
        stack.extend(children[i].iter().rev().map(|&c| (c, child_depth)));
        if !shown[i] {
            continue;
        }
        let p = &procs[i];
        let mut e = std::mem::take(&mut execs[i]);
        e.sort();
        rows.push(Row {
            pid: Some(p.pid),
            depth,
            name: if p.comm.is_empty() { format!("pid {}", p.pid) } else { p.comm.clone() },
            start_ns: p.start_ns.unwrap_or(scale.t0).max(scale.t0),
            end_ns: p.end_ns.unwrap_or(scale.t1).min(scale.t1),
            forked: p.start_ns.is_some(),
            exited: p.end_ns.is_some(),
            activity: activity[i].take(),
            execs: e,
            critical: std::mem::take(&mut critical[i]),
            tooltip: tooltip(trace, info(i), i, busy[i], source),
        });
    }

    let hidden = hidden_idle + hidden_quiet;
    if hidden > 0 {
        let mut sum: Option<Columns> = None;
        for (i, cols) in activity.iter().enumerate() {
            if let (false, Some(cols)) = (shown[i], cols) {
                let total = sum.get_or_insert_with(|| vec![[0.0; 3]; scale.columns()]);
                for (t, c) in total.iter_mut().zip(cols) {
                    for k in 0..3 {
                        t[k] += c[k];
                    }
                }
            }
        }
        rows.push(Row {
            pid: None,
            depth: 0,
            name: format!("{} other processes", hidden),
            start_ns: scale.t0,
            end_ns: scale.t1,
            forked: false,
            exited: false,
            activity: sum,
            execs: Vec::new(),
            critical: Vec::new(),
            tooltip: format!(
                "{} left out: {} idle (no CPU, I/O wait or reads) and {} less active (at most {} of CPU and I/O wait each); their activity is summed in this row",
                plural(hidden as u64, "process"),
                hidden_idle,
                hidden_quiet,
                duration(quiet_max_ns)
            ),
        });
    }
    Rows { rows, total: procs.len(), hidden_idle, hidden_quiet, quiet_max_ns, source }
}

/// Each process's parent: the process its ppid named when it started.
fn parents(trace: &Trace, pids: &PidIndex) -> Vec<Option<usize>> {
    let procs = &trace.processes;
    let mut parent: Vec<Option<usize>> = procs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ppid = p.ppid?;
            pids.at(trace, ppid, p.start_ns.unwrap_or(Nanos::MIN)).filter(|&j| j != i)
        })
        .collect();
    // A process whose ancestors lead back to it (possible with reused pids) becomes a root.
    let cyclic: Vec<bool> = (0..procs.len())
        .map(|i| {
            let mut at = parent[i];
            for _ in 0..procs.len() {
                match at {
                    Some(a) if a == i => return true,
                    Some(a) => at = parent[a],
                    None => return false,
                }
            }
            true
        })
        .collect();
    for (p, cyclic) in parent.iter_mut().zip(cyclic) {
        if cyclic {
            *p = None;
        }
    }
    parent
}

fn tooltip(trace: &Trace, info: Option<&ProcessInfo>, i: usize, busy: Nanos, source: StateSource) -> String {
    let p = &trace.processes[i];
    let mut lines = vec![match p.ppid {
        Some(ppid) => format!("{} (pid {}, parent {ppid})", p.comm, p.pid),
        None => format!("{} (pid {})", p.comm, p.pid),
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
