//! Lookups over a trace that almost every consumer needs: the process alive under
//! a pid at a moment (pids may be reused in long traces) and the process of a thread.

use std::collections::HashMap;

use crate::model::{File, Nanos, Process, Trace};

/// Finds processes by pid and time, and threads' processes.
pub struct ProcessIndex<'a> {
    trace: &'a Trace,
    by_pid: HashMap<i32, Vec<usize>>,
    pid_of_tid: HashMap<i32, i32>,
}

impl<'a> ProcessIndex<'a> {
    pub fn new(trace: &'a Trace) -> ProcessIndex<'a> {
        let mut by_pid: HashMap<i32, Vec<usize>> = HashMap::new();
        for (i, p) in trace.processes.iter().enumerate() {
            by_pid.entry(p.pid).or_default().push(i);
        }
        for list in by_pid.values_mut() {
            list.sort_by_key(|&i| trace.processes[i].start_ns.unwrap_or(Nanos::MIN));
        }
        let pid_of_tid = trace.threads.iter().map(|t| (t.tid, t.pid)).collect();
        ProcessIndex { trace, by_pid, pid_of_tid }
    }

    /// The process that had `pid` at `t_ns`: the latest one started at or before `t_ns`.
    pub fn at(&self, pid: i32, t_ns: Nanos) -> Option<&'a Process> {
        let list = self.by_pid.get(&pid)?;
        let chosen = list
            .iter()
            .rev()
            .find(|&&i| self.trace.processes[i].start_ns.unwrap_or(Nanos::MIN) <= t_ns)
            .or_else(|| list.first())?;
        Some(&self.trace.processes[*chosen])
    }

    /// The first process seen with `pid`.
    pub fn first(&self, pid: i32) -> Option<&'a Process> {
        self.by_pid.get(&pid).and_then(|l| l.first()).map(|&i| &self.trace.processes[i])
    }

    /// The process (thread group) of a thread; a tid never seen as a thread is taken as its own pid.
    pub fn pid_of(&self, tid: i32) -> i32 {
        self.pid_of_tid.get(&tid).copied().unwrap_or(tid)
    }
}

/// Finds files by id in O(1) whatever the ids are.
pub struct FileIndex<'a> {
    files: &'a [File],
    by_id: HashMap<u32, usize>,
}

impl<'a> FileIndex<'a> {
    pub fn new(trace: &'a Trace) -> FileIndex<'a> {
        let by_id = trace.files.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
        FileIndex { files: &trace.files, by_id }
    }

    pub fn get(&self, id: u32) -> Option<&'a File> {
        self.by_id.get(&id).map(|&i| &self.files[i])
    }

    /// The path to show for a file: its path, or `<dev>:<inode>` when unresolved.
    pub fn display_name(&self, id: u32) -> String {
        match self.get(id) {
            Some(File { path: Some(path), .. }) => path.clone(),
            Some(f) => format!("<unresolved {} inode {}>", f.dev, f.ino),
            None => format!("<unknown file {id}>"),
        }
    }
}
