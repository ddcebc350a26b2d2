//! What the systemd units of a boot did while they started: each unit's processes, its
//! activating interval split into CPU, I/O wait by file, waits on other units and the
//! rest, and the chain of units to a target, as `systemd-analyze critical-chain` walks it.

use std::collections::BTreeMap;

use coldstart_trace::{Nanos, ReadyReason, ThreadState, Unit};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{ThreadInfo, UnitChain, UnitFileWait, UnitProcessesFrom, UnitTime, UnitWait};
use crate::context::Ctx;
use crate::critical::wakeup_ending;
use crate::time::NO_FILE;

/// A process forked by the manager this long before the unit's start timestamp still
/// belongs to it: systemd forks, then records that the unit left `inactive`.
const FORK_SLACK_NS: Nanos = 20_000_000;
/// How far a chain link's active time may lie after the next link's start (the two
/// timestamps are taken by the manager in one step, and moved to the trace's clock).
const CHAIN_SLACK_NS: Nanos = 1_000_000;

/// The unit a ready reason names, without its manager (`unit:user/NAME` gives `NAME`).
pub fn ready_unit(reason: &ReadyReason) -> Option<&str> {
    match reason {
        ReadyReason::Unit(spec) => {
            Some(spec.strip_prefix("system/").or_else(|| spec.strip_prefix("user/")).unwrap_or(spec))
        }
        _ => None,
    }
}

/// The chain of units to `target`; `None` when no unit of that name became active.
pub fn chain_to(units: &[UnitTime], target: &str) -> Option<UnitChain> {
    let by_name: FxHashMap<&str, &UnitTime> = units.iter().map(|u| (u.name.as_str(), u)).collect();
    let mut unit = *by_name.get(target)?;
    let mut links = vec![unit.name.clone()];
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    seen.insert(unit.name.as_str());
    while let Some(next) = unit.after.as_deref().and_then(|name| by_name.get(name)) {
        if !seen.insert(next.name.as_str()) {
            break;
        }
        links.push(next.name.clone());
        unit = next;
    }
    Some(UnitChain { target: target.to_owned(), links })
}

/// The processes of each unit, and who forked them.
struct Processes<'t> {
    by_pid: FxHashMap<i32, &'t coldstart_trace::Process>,
    children: FxHashMap<i32, Vec<i32>>,
}

impl<'t> Processes<'t> {
    fn new(ctx: &Ctx<'t>) -> Processes<'t> {
        let mut by_pid = FxHashMap::default();
        let mut children: FxHashMap<i32, Vec<i32>> = FxHashMap::default();
        for p in &ctx.trace.processes {
            by_pid.insert(p.pid, p);
            if let Some(ppid) = p.ppid {
                children.entry(ppid).or_default().push(p.pid);
            }
        }
        Processes { by_pid, children }
    }

    fn started_in(&self, pid: i32, from: Nanos, to: Nanos) -> bool {
        self.by_pid.get(&pid).and_then(|p| p.start_ns).is_some_and(|t| t + FORK_SLACK_NS >= from && t <= to)
    }

    /// `roots` and their descendants started in `from..=to`, but for those in `others`
    /// (the main processes of other units) and theirs.
    fn with_descendants(&self, roots: Vec<i32>, from: Nanos, to: Nanos, others: &FxHashSet<i32>) -> Vec<i32> {
        let mut out = roots.clone();
        let mut todo = roots;
        while let Some(pid) = todo.pop() {
            for &child in self.children.get(&pid).into_iter().flatten() {
                if self.started_in(child, from, to) && !others.contains(&child) && !out.contains(&child) {
                    out.push(child);
                    todo.push(child);
                }
            }
        }
        out.sort_unstable();
        out
    }

    /// The manager: the parent of most units' main processes.
    fn manager(&self, units: &[&Unit]) -> Option<i32> {
        let mut votes: BTreeMap<i32, u32> = BTreeMap::new();
        for pid in units.iter().filter_map(|u| u.pid) {
            if let Some(ppid) = self.by_pid.get(&pid).and_then(|p| p.ppid) {
                *votes.entry(ppid).or_default() += 1;
            }
        }
        votes.into_iter().max_by_key(|&(pid, n)| (n, std::cmp::Reverse(pid))).map(|(pid, _)| pid)
    }
}

/// Whether a process named `comm` (at most 15 bytes) runs unit `name`.
fn runs_unit(comm: &str, name: &str) -> bool {
    let (stem, kind) = name.rsplit_once('.').unwrap_or((name, ""));
    match kind {
        "mount" => comm == "mount",
        "service" => !comm.is_empty() && stem.starts_with(comm),
        _ => false,
    }
}

/// What a unit's thread did over part of the unit's interval, in order of precedence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Doing {
    Running,
    IoWait(u32),
    WokenByUnit(usize),
    WokenByManager,
}

/// Every unit that became active, by took (longest first), and the chain to the unit the
/// recording waited for.
pub(crate) fn unit_times(
    ctx: &Ctx,
    threads: &[ThreadInfo],
    wait_top_file: &[u32],
) -> (Vec<UnitTime>, Option<UnitChain>) {
    let trace = ctx.trace;
    let started: Vec<&Unit> =
        trace.units.iter().filter(|u| u.activating_ns.is_some() && u.active_ns.is_some()).collect();
    if started.is_empty() {
        return (Vec::new(), None);
    }
    let processes = Processes::new(ctx);
    let manager = processes.manager(&started);
    let main_pids: FxHashSet<i32> = started.iter().filter_map(|u| u.pid).collect();
    // Each of the manager's children that is no unit's main process goes to the unit named
    // like it, without a main process, whose start began nearest its fork.
    let mut named: Vec<Vec<i32>> = vec![Vec::new(); started.len()];
    for &child in manager.and_then(|m| processes.children.get(&m)).into_iter().flatten() {
        let Some(process) = processes.by_pid.get(&child) else { continue };
        let Some(forked) = process.start_ns else { continue };
        if main_pids.contains(&child) {
            continue;
        }
        let nearest = started
            .iter()
            .enumerate()
            .filter(|(_, u)| u.pid.is_none() && runs_unit(&process.comm, &u.name))
            .filter(|(_, u)| {
                processes.started_in(child, u.activating_ns.unwrap_or(0), u.active_ns.unwrap_or(0))
            })
            .min_by_key(|(i, u)| ((u.activating_ns.unwrap_or(0) - forked).abs(), *i));
        if let Some((i, _)) = nearest {
            named[i].push(child);
        }
    }
    let members: Vec<(Vec<i32>, UnitProcessesFrom)> = started
        .iter()
        .zip(named)
        .map(|(u, named)| {
            let (from, to) = (u.activating_ns.unwrap_or(0), u.active_ns.unwrap_or(0));
            if let Some(pid) = u.pid {
                let others = main_pids.iter().copied().filter(|&p| p != pid).collect();
                (processes.with_descendants(vec![pid], from, to, &others), UnitProcessesFrom::MainPid)
            } else if named.is_empty() {
                (Vec::new(), UnitProcessesFrom::None)
            } else {
                (processes.with_descendants(named, from, to, &main_pids), UnitProcessesFrom::Name)
            }
        })
        .collect();
    let mut unit_of_pid: FxHashMap<i32, usize> = FxHashMap::default();
    for (i, (pids, _)) in members.iter().enumerate() {
        for &pid in pids {
            unit_of_pid.entry(pid).or_insert(i);
        }
    }
    let mut tids_of_pid: FxHashMap<i32, Vec<i32>> = FxHashMap::default();
    for t in threads {
        tids_of_pid.entry(t.pid).or_default().push(t.tid);
    }
    let active_of: FxHashMap<&str, Nanos> =
        started.iter().filter_map(|u| Some((u.name.as_str(), u.active_ns?))).collect();

    let mut out: Vec<UnitTime> = started
        .iter()
        .zip(&members)
        .enumerate()
        .map(|(i, (unit, (pids, pids_from)))| {
            let from = unit.activating_ns.unwrap_or(0);
            let to = unit.active_ns.unwrap_or(0).max(from);
            let mut time = UnitTime {
                name: unit.name.clone(),
                manager: unit.manager.clone(),
                activating_ns: from,
                active_ns: to,
                took_ns: to - from,
                pids: pids.clone(),
                pids_from: *pids_from,
                cpu_ns: 0,
                cpu_time_ns: 0,
                io_wait_ns: 0,
                io_files: Vec::new(),
                unit_waits: Vec::new(),
                manager_wait_ns: 0,
                other_ns: 0,
                after: None,
                after_active_ns: None,
            };
            let last_after = unit
                .after
                .iter()
                .filter(|name| **name != unit.name)
                .filter_map(|name| Some((name.as_str(), *active_of.get(name.as_str())?)))
                .filter(|&(_, active)| active <= from + CHAIN_SLACK_NS)
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)));
            if let Some((name, active)) = last_after {
                time.after = Some(name.to_owned());
                time.after_active_ns = Some(active);
            }
            let tids = pids.iter().flat_map(|pid| tids_of_pid.get(pid).into_iter().flatten().copied());
            let waits = split_interval(ctx, &mut time, tids, wait_top_file, |waker_tid| {
                let pid = ctx.pid_of(waker_tid);
                if Some(pid) == manager {
                    Some(Doing::WokenByManager)
                } else {
                    unit_of_pid.get(&pid).filter(|&&u| u != i).map(|&u| Doing::WokenByUnit(u))
                }
            });
            time.unit_waits =
                waits.into_iter().map(|(u, ns)| UnitWait { unit: started[u].name.clone(), ns }).collect();
            time.unit_waits.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.unit.cmp(&b.unit)));
            time
        })
        .collect();
    out.sort_by(|a, b| {
        b.took_ns.cmp(&a.took_ns).then(a.activating_ns.cmp(&b.activating_ns)).then(a.name.cmp(&b.name))
    });
    let chain = trace.meta.ready.as_ref().and_then(|r| ready_unit(&r.reason)).and_then(|t| chain_to(&out, t));
    (out, chain)
}

/// Splits `unit`'s activating interval over what its threads did, by [`Doing`]'s
/// precedence; `woken_by` says whose wakeup ended a sleep, by the waker's tid. Returns the
/// waits on other units, by their index.
fn split_interval(
    ctx: &Ctx,
    unit: &mut UnitTime,
    tids: impl Iterator<Item = i32>,
    wait_top_file: &[u32],
    woken_by: impl Fn(i32) -> Option<Doing>,
) -> BTreeMap<usize, Nanos> {
    let (from, to) = (unit.activating_ns, unit.active_ns);
    let sched = &ctx.trace.sched;
    let mut events: Vec<(Nanos, Doing, i32)> = Vec::new();
    for tid in tids {
        for &r in ctx.sched_by_tid.rows_of(tid) {
            let iv = &sched[r as usize];
            let (start, end) = (iv.start_ns.max(from), iv.end_ns.min(to));
            if start >= end {
                continue;
            }
            let doing = match iv.state {
                ThreadState::Running => {
                    unit.cpu_time_ns = unit.cpu_time_ns.saturating_add(end - start);
                    Doing::Running
                }
                ThreadState::IoWait => {
                    Doing::IoWait(wait_top_file.get(r as usize).copied().unwrap_or(NO_FILE))
                }
                ThreadState::Sleeping => {
                    match wakeup_ending(ctx, tid, iv, iv.end_ns).and_then(|w| w.waker_tid).and_then(&woken_by)
                    {
                        Some(doing) => doing,
                        None => continue,
                    }
                }
                ThreadState::Runnable | ThreadState::Stopped => continue,
            };
            events.push((start, doing, 1));
            events.push((end, doing, -1));
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut active: BTreeMap<Doing, i32> = BTreeMap::new();
    let mut io: BTreeMap<u32, Nanos> = BTreeMap::new();
    let mut waits: BTreeMap<usize, Nanos> = BTreeMap::new();
    let mut t = from;
    let mut account = |active: &BTreeMap<Doing, i32>, until: Nanos, t: Nanos, unit: &mut UnitTime| {
        let ns = until - t;
        match active.iter().find(|(_, n)| **n > 0).map(|(d, _)| *d) {
            Some(Doing::Running) => unit.cpu_ns += ns,
            Some(Doing::IoWait(file)) => {
                unit.io_wait_ns += ns;
                if file != NO_FILE {
                    *io.entry(file).or_default() += ns;
                }
            }
            Some(Doing::WokenByUnit(u)) => *waits.entry(u).or_default() += ns,
            Some(Doing::WokenByManager) => unit.manager_wait_ns += ns,
            None => unit.other_ns += ns,
        }
    };
    for (at, doing, delta) in events {
        if at > t {
            account(&active, at, t, unit);
            t = at;
        }
        *active.entry(doing).or_default() += delta;
    }
    if to > t {
        account(&active, to, t, unit);
    }
    unit.io_files = io.into_iter().map(|(file, ns)| UnitFileWait { file, ns }).collect();
    unit.io_files.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.file.cmp(&b.file)));
    waits
}
