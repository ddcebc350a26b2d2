//! The analysis context ([`Ctx`]): the trace with index vectors over its tables,
//! built once and shared by every analysis.
//!
//! Tables are never copied or sorted as structs: rows are grouped by a key (a
//! thread, a process and file, …) with a counting sort into one vector of row
//! numbers, which is linear for the time-ordered tables a recorder writes; only
//! groups found out of time order are sorted.

use std::hash::Hash;

use coldstart_trace::{FileKind, Nanos, ProcessIndex, Trace};
use rustc_hash::FxHashMap;

use crate::Config;

/// Row numbers of a table grouped by key (keys ascending), each group in time order.
pub(crate) struct Groups<K> {
    keys: Vec<K>,
    bounds: Vec<u32>,
    order: Vec<u32>,
}

impl<K: Copy + Eq + Hash + Ord> Groups<K> {
    /// Groups rows `0..n` by `key`, ordering each group by `time` (ties keep table order).
    pub fn build(n: usize, key: impl Fn(usize) -> K, time: impl Fn(usize) -> Nanos) -> Groups<K> {
        let mut ids: FxHashMap<K, u32> = FxHashMap::default();
        let mut keys_seen: Vec<K> = Vec::new();
        let mut row_group: Vec<u32> = Vec::with_capacity(n);
        let mut last: Option<(K, u32)> = None;
        for row in 0..n {
            let k = key(row);
            let group = match last {
                Some((last_key, last_group)) if last_key == k => last_group,
                _ => {
                    let group = *ids.entry(k).or_insert_with(|| {
                        keys_seen.push(k);
                        (keys_seen.len() - 1) as u32
                    });
                    last = Some((k, group));
                    group
                }
            };
            row_group.push(group);
        }
        drop(ids);
        let mut by_key: Vec<u32> = (0..keys_seen.len() as u32).collect();
        by_key.sort_unstable_by_key(|&g| keys_seen[g as usize]);
        let mut rank = vec![0u32; keys_seen.len()];
        for (r, &g) in by_key.iter().enumerate() {
            rank[g as usize] = r as u32;
        }
        let mut bounds = vec![0u32; keys_seen.len() + 1];
        for g in row_group.iter_mut() {
            *g = rank[*g as usize];
            bounds[*g as usize + 1] += 1;
        }
        for i in 1..bounds.len() {
            bounds[i] += bounds[i - 1];
        }
        let mut next: Vec<u32> = bounds[..bounds.len() - 1].to_vec();
        let mut order = vec![0u32; n];
        for (row, &g) in row_group.iter().enumerate() {
            order[next[g as usize] as usize] = row as u32;
            next[g as usize] += 1;
        }
        drop(row_group);
        for w in bounds.windows(2) {
            let rows = &mut order[w[0] as usize..w[1] as usize];
            if !rows.is_sorted_by_key(|&r| time(r as usize)) {
                rows.sort_by_key(|&r| time(r as usize));
            }
        }
        let keys = by_key.iter().map(|&g| keys_seen[g as usize]).collect();
        Groups { keys, bounds, order }
    }

    pub fn len(&self) -> usize {
        self.keys.len()
    }

    pub fn key(&self, group: usize) -> K {
        self.keys[group]
    }

    pub fn rows(&self, group: usize) -> &[u32] {
        &self.order[self.bounds[group] as usize..self.bounds[group + 1] as usize]
    }

    pub fn find(&self, key: K) -> Option<usize> {
        self.keys.binary_search(&key).ok()
    }

    /// The rows of `key`'s group, empty when there is none.
    pub fn rows_of(&self, key: K) -> &[u32] {
        self.find(key).map_or(&[], |g| self.rows(g))
    }
}

/// Row numbers of a table in time order (ties keep table order).
pub(crate) fn time_order(n: usize, time: impl Fn(usize) -> Nanos) -> Vec<u32> {
    let mut order: Vec<u32> = (0..n as u32).collect();
    if !order.is_sorted_by_key(|&r| time(r as usize)) {
        order.sort_by_key(|&r| time(r as usize));
    }
    order
}

/// The trace with the lookups every analysis needs.
pub(crate) struct Ctx<'t> {
    pub trace: &'t Trace,
    pub config: &'t Config,
    pub page_size: u64,
    /// Processes by pid and time (pids may be reused).
    pub processes: ProcessIndex<'t>,
    file_slot: FxHashMap<u32, u32>,
    pid_of_tid: FxHashMap<i32, i32>,
    in_scope: FxHashMap<i32, bool>,
    /// Page fills by (pid, file id), in time order.
    pub fills_by_stream: Groups<(i32, u32)>,
    /// Page fills by tid, in time order.
    pub fills_by_tid: Groups<i32>,
    /// Page fills in time order.
    pub fills_in_time: Vec<u32>,
    /// Scheduler intervals by tid, by start.
    pub sched_by_tid: Groups<i32>,
    /// Wakeups by woken tid, by time.
    pub wakeups_by_tid: Groups<i32>,
}

impl<'t> Ctx<'t> {
    pub fn new(trace: &'t Trace, config: &'t Config) -> Ctx<'t> {
        let fills = &trace.page_fills;
        let sched = &trace.sched;
        let wakeups = &trace.wakeups;
        let file_slot = trace.files.iter().enumerate().map(|(i, f)| (f.id, i as u32)).collect();
        let mut pid_of_tid: FxHashMap<i32, i32> = trace.threads.iter().map(|t| (t.tid, t.pid)).collect();
        for p in &trace.processes {
            pid_of_tid.entry(p.pid).or_insert(p.pid);
        }
        let mut in_scope: FxHashMap<i32, bool> = FxHashMap::default();
        for p in &trace.processes {
            *in_scope.entry(p.pid).or_insert(false) |= p.in_scope;
        }
        let fills_by_tid = Groups::build(fills.len(), |r| fills[r].tid, |r| fills[r].t_ns);
        for g in 0..fills_by_tid.len() {
            let tid = fills_by_tid.key(g);
            if let Some(&first) = fills_by_tid.rows(g).first() {
                pid_of_tid.entry(tid).or_insert(fills[first as usize].pid);
            }
        }
        let page_size = if trace.meta.page_size == 0 { 4096 } else { u64::from(trace.meta.page_size) };
        Ctx {
            trace,
            config,
            page_size,
            processes: ProcessIndex::new(trace),
            file_slot,
            pid_of_tid,
            in_scope,
            fills_by_stream: Groups::build(
                fills.len(),
                |r| (fills[r].pid, fills[r].file_id),
                |r| fills[r].t_ns,
            ),
            fills_by_tid,
            fills_in_time: time_order(fills.len(), |r| fills[r].t_ns),
            sched_by_tid: Groups::build(sched.len(), |r| sched[r].tid, |r| sched[r].start_ns),
            wakeups_by_tid: Groups::build(wakeups.len(), |r| wakeups[r].tid, |r| wakeups[r].t_ns),
        }
    }

    pub fn file(&self, id: u32) -> Option<&'t coldstart_trace::File> {
        self.file_slot.get(&id).map(|&slot| &self.trace.files[slot as usize])
    }

    /// The process of a thread; a tid never seen as a thread is taken as its own pid.
    pub fn pid_of(&self, tid: i32) -> i32 {
        self.pid_of_tid.get(&tid).copied().unwrap_or(tid)
    }

    /// True for processes in the recording's scope, and for pids with no process row.
    pub fn pid_in_scope(&self, pid: i32) -> bool {
        self.in_scope.get(&pid).copied().unwrap_or(true)
    }

    pub fn tid_in_scope(&self, tid: i32) -> bool {
        self.pid_in_scope(self.pid_of(tid))
    }

    /// A test of whether a tid is in scope that remembers its last answer, for passes
    /// over the scheduler table in its own order (rows of one thread come in runs).
    pub fn in_scope_test(&self) -> impl FnMut(i32) -> bool + '_ {
        let mut last: Option<(i32, bool)> = None;
        move |tid| match last {
            Some((t, answer)) if t == tid => answer,
            _ => {
                let answer = self.tid_in_scope(tid);
                last = Some((tid, answer));
                answer
            }
        }
    }

    /// Every tid known from threads, scheduler intervals and page fills, ascending.
    pub fn all_tids(&self) -> Vec<i32> {
        let mut tids: Vec<i32> = self.trace.threads.iter().map(|t| t.tid).collect();
        tids.extend((0..self.sched_by_tid.len()).map(|g| self.sched_by_tid.key(g)));
        tids.extend((0..self.fills_by_tid.len()).map(|g| self.fills_by_tid.key(g)));
        tids.sort_unstable();
        tids.dedup();
        tids
    }

    /// The name to show for a file: its path, marked when it is filesystem metadata,
    /// or a placeholder saying why there is none.
    pub fn display_name(&self, id: u32) -> String {
        match self.file(id) {
            Some(f) => match (&f.path, f.kind) {
                (Some(p), FileKind::DeviceMetadata) => format!("{p} (filesystem metadata)"),
                (None, FileKind::DeviceMetadata) => format!("<filesystem metadata of {}>", f.dev),
                // The recorder's kind for a filesystem's own reserved inodes (ext4's 1: block bitmaps).
                (None, FileKind::Other) => format!("<filesystem's own inode {} of {}>", f.ino, f.dev),
                (Some(p), _) => p.clone(),
                (None, _) => match self.trace.mounts.iter().find(|m| m.dev == f.dev) {
                    // fanotify does not see FUSE and the walk never enters a FUSE or network mount.
                    Some(m) => format!("<inode {} on the {} mount {}>", f.ino, m.fstype, m.point),
                    None => format!("<unresolved {} inode {}>", f.dev, f.ino),
                },
            },
            None => format!("<unknown file {id}>"),
        }
    }

    pub fn bytes(&self, pages: u64) -> u64 {
        pages.saturating_mul(self.page_size)
    }
}
