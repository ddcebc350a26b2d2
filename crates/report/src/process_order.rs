//! The order in which the chart and the HTML timeline show a trace's processes, as
//! bootchart draws a boot: each process under its parent, siblings in start order,
//! and the short-lived helpers of a parent (`sh -c` wrappers, `dbus-send`, …: forked
//! and exited within a fiftieth of the recording, under 1 MiB read, no milestone
//! reached, no part of the critical path) folded into one entry instead of a row each.
//!
//! Built from the analysis alone (its processes, marks, readiness point and critical
//! path), so the SVG and the HTML report, which embeds it, agree.

use std::collections::HashMap;

use coldstart_analyze::{Analysis, ProcessInfo};
use coldstart_trace::{Nanos, Trace};

/// A helper lives at most this share of the trace's span…
const HELPER_SPAN_DIVISOR: Nanos = 50;
/// …or this long, whichever is more.
const HELPER_MIN_LIFE_NS: Nanos = 1_000_000;
/// A helper reads less than this.
const HELPER_MAX_READ_BYTES: u64 = 1 << 20;

/// Finds the process a pid named at a given time (pids may be reused), by index.
pub(crate) struct PidIndex {
    /// Per pid: (start, index), in start order; an unknown start counts as the earliest.
    by_pid: HashMap<i32, Vec<(Nanos, usize)>>,
}

impl PidIndex {
    /// Indexes processes given as (pid, start) in their list's order.
    pub(crate) fn new(processes: impl Iterator<Item = (i32, Option<Nanos>)>) -> PidIndex {
        let mut by_pid: HashMap<i32, Vec<(Nanos, usize)>> = HashMap::new();
        for (i, (pid, start)) in processes.enumerate() {
            by_pid.entry(pid).or_default().push((start.unwrap_or(Nanos::MIN), i));
        }
        for list in by_pid.values_mut() {
            list.sort();
        }
        PidIndex { by_pid }
    }

    pub(crate) fn of_trace(trace: &Trace) -> PidIndex {
        PidIndex::new(trace.processes.iter().map(|p| (p.pid, p.start_ns)))
    }

    /// The latest process with `pid` started at or before `t` (else the first one).
    pub(crate) fn at(&self, pid: i32, t: Nanos) -> Option<usize> {
        let list = self.by_pid.get(&pid)?;
        list.iter().rev().find(|&&(start, _)| start <= t).or_else(|| list.first()).map(|&(_, i)| i)
    }
}

/// What one entry of the order shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shown {
    /// One process (an index into `analysis.processes`).
    Process(usize),
    /// The short helpers of one parent, folded: each process with its depth below the
    /// entry (0 for the parent's own children), in tree order.
    Helpers(Vec<(usize, usize)>),
}

/// One row of the order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The entry of the parent process, if it has one in the trace.
    pub parent: Option<usize>,
    pub shown: Shown,
}

/// The processes of a trace in chart order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessOrder {
    pub entries: Vec<Entry>,
    /// For each process of the analysis, the entry that shows it.
    pub entry_of: Vec<usize>,
}

impl ProcessOrder {
    /// The depth of each entry: how many of its ancestors' entries are `shown`.
    pub fn depths(&self, shown: &[bool]) -> Vec<usize> {
        let mut depth = vec![0; self.entries.len()];
        // Parents come before their children.
        for k in 0..self.entries.len() {
            if let Some(p) = self.entries[k].parent {
                depth[k] = depth[p] + usize::from(shown[p]);
            }
        }
        depth
    }
}

/// Each process's parent: the process its ppid named when it started.
fn parents(processes: &[ProcessInfo], pids: &PidIndex) -> Vec<Option<usize>> {
    let mut parent: Vec<Option<usize>> = processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let ppid = p.ppid?;
            pids.at(ppid, p.start_ns.unwrap_or(Nanos::MIN)).filter(|&j| j != i)
        })
        .collect();
    // A process whose ancestors lead back to it (possible with reused pids) becomes a root.
    let cyclic: Vec<bool> = (0..processes.len())
        .map(|i| {
            let mut at = parent[i];
            for _ in 0..processes.len() {
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

/// The order of the analysis's processes.
pub fn process_order(analysis: &Analysis) -> ProcessOrder {
    let procs = &analysis.processes;
    let pids = PidIndex::new(procs.iter().map(|p| (p.pid, p.start_ns)));
    let parent = parents(procs, &pids);

    // Processes that must keep a row: they reached a milestone or worked on the critical path.
    let mut kept = vec![false; procs.len()];
    for m in &analysis.marks {
        if let Some(i) = m.pid.and_then(|pid| pids.at(pid, m.t_ns)) {
            kept[i] = true;
        }
    }
    if let Some(r) = &analysis.overview.ready
        && let Some(i) = pids.at(r.pid, r.t_ns)
    {
        kept[i] = true;
    }
    for s in analysis.critical_path.iter().flat_map(|p| &p.segments) {
        if let Some(i) = pids.at(s.pid, s.start_ns) {
            kept[i] = true;
        }
    }
    let root = analysis.trace.root_pid.and_then(|pid| pids.at(pid, 0));

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

    // A helper is short and quiet itself, and so is everything it started.
    let span = procs
        .iter()
        .filter_map(|p| p.end_ns)
        .chain([analysis.trace.duration_ns, analysis.overview.end_ns])
        .max()
        .unwrap_or(0);
    let short_ns = (span / HELPER_SPAN_DIVISOR).max(HELPER_MIN_LIFE_NS);
    let page = u64::from(analysis.trace.page_size.max(1));
    let quiet = |i: usize| {
        let p = &procs[i];
        matches!((p.start_ns, p.end_ns), (Some(s), Some(e)) if e - s <= short_ns)
            && p.pages.saturating_mul(page) < HELPER_MAX_READ_BYTES
            && !kept[i]
            && Some(i) != root
    };
    let mut helper = vec![false; procs.len()];
    for &i in post_order(&roots, &children).iter() {
        helper[i] = quiet(i) && children[i].iter().all(|&c| helper[c]);
    }

    let mut order = ProcessOrder { entries: Vec::new(), entry_of: vec![usize::MAX; procs.len()] };
    let mut visited = vec![false; procs.len()];
    // Depth-first, with an explicit stack of what to show and its parent's entry.
    let mut stack: Vec<(Shown, Option<usize>)> =
        roots.iter().rev().map(|&r| (Shown::Process(r), None)).collect();
    while let Some((shown, parent_entry)) = stack.pop() {
        let entry = order.entries.len();
        let i = match shown {
            Shown::Process(i) => i,
            Shown::Helpers(members) => {
                for &(m, _) in &members {
                    order.entry_of[m] = entry;
                }
                order.entries.push(Entry { parent: parent_entry, shown: Shown::Helpers(members) });
                continue;
            }
        };
        if std::mem::replace(&mut visited[i], true) {
            continue;
        }
        order.entry_of[i] = entry;
        order.entries.push(Entry { parent: parent_entry, shown: Shown::Process(i) });
        let kids = &children[i];
        let members: Vec<(usize, usize)> = kids
            .iter()
            .filter(|&&c| helper[c])
            .flat_map(|&c| subtree_with_depth(c, &children))
            .filter(|&(m, _)| !visited[m])
            .collect();
        let mut next: Vec<Shown> = Vec::with_capacity(kids.len());
        if members.len() < 2 {
            next.extend(kids.iter().map(|&c| Shown::Process(c)));
        } else {
            // The folded entry takes the place of the first helper among its siblings.
            let first = members[0].0;
            for &(m, _) in &members {
                visited[m] = true;
            }
            let mut members = Some(members);
            for &c in kids {
                if c == first {
                    next.push(Shown::Helpers(members.take().unwrap_or_default()));
                } else if !helper[c] {
                    next.push(Shown::Process(c));
                }
            }
        }
        stack.extend(next.into_iter().rev().map(|n| (n, Some(entry))));
    }
    order
}

/// Processes in post-order (children before their parents).
fn post_order(roots: &[usize], children: &[Vec<usize>]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut seen = vec![false; children.len()];
    let mut stack: Vec<(usize, bool)> = roots.iter().rev().map(|&r| (r, false)).collect();
    while let Some((i, expanded)) = stack.pop() {
        if expanded {
            out.push(i);
            continue;
        }
        if std::mem::replace(&mut seen[i], true) {
            continue;
        }
        stack.push((i, true));
        stack.extend(children[i].iter().rev().map(|&c| (c, false)));
    }
    out
}

/// `i` and its descendants in tree order, each with its depth below `i`.
fn subtree_with_depth(i: usize, children: &[Vec<usize>]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![(i, 0)];
    while let Some((m, depth)) = stack.pop() {
        out.push((m, depth));
        stack.extend(children[m].iter().rev().map(|&c| (c, depth + 1)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_analyze::analyze;
    use coldstart_trace::{Mark, MarkSource, Meta, Process};

    const MS: Nanos = 1_000_000;

    /// A root (pid 10) living 1 s, and children given as (pid, ppid, start ms, end ms).
    fn trace(children: &[(i32, i32, Nanos, Nanos)]) -> Trace {
        let process = |pid: i32, ppid: i32, start: Nanos, end: Nanos| Process {
            pid,
            ppid: Some(ppid),
            comm: format!("p{pid}"),
            start_ns: Some(start * MS),
            end_ns: Some(end * MS),
            in_scope: true,
            ..Process::default()
        };
        let mut processes = vec![process(10, 1, 0, 1000)];
        processes.extend(children.iter().map(|&(pid, ppid, start, end)| process(pid, ppid, start, end)));
        Trace {
            meta: Meta { root_pid: Some(10), page_size: 4096, duration_ns: 1000 * MS, ..Meta::default() },
            processes,
            ..Trace::default()
        }
    }

    /// The order as (pid or "+N") strings with their parent entry.
    fn order(trace: &Trace) -> Vec<(String, Option<usize>)> {
        let analysis = analyze(trace);
        let pid = |i: usize| analysis.processes[i].pid;
        process_order(&analysis)
            .entries
            .into_iter()
            .map(|e| match e.shown {
                Shown::Process(i) => (pid(i).to_string(), e.parent),
                Shown::Helpers(list) => {
                    let pids: Vec<String> = list.iter().map(|&(i, d)| format!("{}@{d}", pid(i))).collect();
                    (format!("+{}", pids.join(",")), e.parent)
                }
            })
            .collect()
    }

    #[test]
    fn a_helper_is_folded_with_what_it_started_unless_that_worked_longer() {
        // 20 (sh) runs 21 briefly; 30 is short but its child 31 lives long; 40 is short.
        let t = trace(&[
            (20, 10, 100, 105),
            (21, 20, 101, 104),
            (30, 10, 200, 205),
            (31, 30, 201, 900),
            (40, 10, 300, 301),
        ]);
        let s = |v: &str| v.to_owned();
        assert_eq!(
            order(&t),
            [(s("10"), None), (s("+20@0,21@1,40@0"), Some(0)), (s("30"), Some(0)), (s("31"), Some(2))]
        );
    }

    #[test]
    fn a_process_that_reached_a_milestone_keeps_its_row() {
        let mut t = trace(&[(20, 10, 100, 105), (21, 10, 200, 205), (22, 10, 300, 305)]);
        t.marks.push(Mark {
            t_ns: 201 * MS,
            pid: Some(21),
            name: "window:x".into(),
            source: MarkSource::Until,
            tid: Some(21),
        });
        let names: Vec<String> = order(&t).into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["10", "+20@0,22@0", "21"]);
    }

    #[test]
    fn depths_count_only_the_ancestors_shown() {
        let t = trace(&[(20, 10, 100, 900), (21, 20, 200, 900), (22, 21, 300, 900)]);
        let o = process_order(&analyze(&t));
        assert_eq!(o.depths(&[true; 4]), [0, 1, 2, 3]);
        assert_eq!(o.depths(&[true, false, true, true]), [0, 1, 1, 2]);
    }
}
