//! The command's process tree: finding every descendant of the shepherd process
//! (which is a child subreaper, so double-forked daemons stay below it), signalling
//! them without ever hitting a recycled pid, and sampling their I/O wait.

use std::collections::{HashMap, HashSet};

use std::os::fd::AsFd;

use crate::sys;

/// Every live (or zombie) descendant of `ancestor`, parents before children.
pub(crate) fn descendants(ancestor: i32) -> Vec<i32> {
    if std::path::Path::new("/proc/self/task").join(std::process::id().to_string()).join("children").exists()
    {
        let mut out = Vec::new();
        let mut queue = vec![ancestor];
        let mut seen = HashSet::from([ancestor]);
        while let Some(pid) = queue.pop() {
            for child in children_of(pid) {
                if seen.insert(child) {
                    out.push(child);
                    queue.push(child);
                }
            }
        }
        return out;
    }
    descendants_by_scan(ancestor)
}

/// The pids of a command's tree: every descendant of its tree root
/// ([`crate::PausedChild::tree_root`]), for samplers running beside a wait.
pub fn tree_pids(tree_root: i32) -> Vec<i32> {
    descendants(tree_root)
}

/// Children from `/proc/PID/task/*/children` (CONFIG_PROC_CHILDREN).
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(text.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    out
}

/// The same from a scan of every `/proc/PID/stat`, for kernels without `children` files.
fn descendants_by_scan(ancestor: i32) -> Vec<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    if let Ok(all) = procfs::process::all_processes() {
        for stat in all.flatten().filter_map(|p| p.stat().ok()) {
            children.entry(stat.ppid).or_default().push(stat.pid);
        }
    }
    let mut out = Vec::new();
    let mut queue = vec![ancestor];
    while let Some(pid) = queue.pop() {
        for &child in children.get(&pid).into_iter().flatten() {
            out.push(child);
            queue.push(child);
        }
    }
    out
}

fn parent_of(pid: i32) -> Option<i32> {
    procfs::process::Process::new(pid).ok()?.stat().ok().map(|s| s.ppid)
}

/// Sends `signal` to every descendant of `ancestor`; returns how many got it.
/// Each target is pinned with a pidfd and its parent checked again after pinning,
/// so a pid recycled by an unrelated process in between is never signalled.
pub(crate) fn signal_descendants(ancestor: i32, signal: i32) -> usize {
    let members = descendants(ancestor);
    let family: HashSet<i32> = members.iter().copied().chain([ancestor]).collect();
    let mut sent = 0;
    for pid in members {
        let Ok(pidfd) = sys::pidfd_open(pid) else { continue };
        if !parent_of(pid).is_some_and(|ppid| family.contains(&ppid)) {
            continue;
        }
        if sys::pidfd_send_signal(pidfd.as_fd(), signal).is_ok() {
            sent += 1;
        }
    }
    sent
}

/// Whether per-task I/O delay accounting is on (`kernel.task_delayacct`).
pub fn delay_accounting_enabled() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/task_delayacct").is_ok_and(|v| v.trim() == "1")
}

/// Block I/O wait of the tree's threads, from `delayacct_blkio_ticks` of every
/// `/proc/PID/task/TID/stat`, keeping the last value seen per thread. Threads that
/// exit between two samples lose what they accumulated since the last one, so the
/// sum is a lower bound. A value larger than the thread's age is dropped: the
/// kernel reports one when accounting is switched on while a thread is blocked
/// (the delay is then counted from time zero, i.e. about the uptime).
#[derive(Debug, Default)]
pub(crate) struct IoWaitSampler {
    ticks_by_tid: HashMap<i32, u64>,
}

impl IoWaitSampler {
    pub(crate) fn sample(&mut self, ancestor: i32) {
        let hz = procfs::ticks_per_second();
        let now_ticks = (crate::clock::boottime_ns() as u128 * u128::from(hz) / 1_000_000_000) as u64;
        for pid in descendants(ancestor) {
            let Ok(process) = procfs::process::Process::new(pid) else { continue };
            let Ok(tasks) = process.tasks() else { continue };
            for task in tasks.flatten() {
                let Ok(stat) = task.stat() else { continue };
                if let Some(ticks) = stat.delayacct_blkio_ticks
                    && ticks <= now_ticks.saturating_sub(stat.starttime) + 1
                {
                    let slot = self.ticks_by_tid.entry(task.tid).or_default();
                    *slot = (*slot).max(ticks);
                }
            }
        }
    }

    pub(crate) fn total_ns(&self) -> i64 {
        let ticks: u64 = self.ticks_by_tid.values().sum();
        (ticks as f64 * 1e9 / procfs::ticks_per_second() as f64) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_and_signals_grandchildren() {
        let mut child =
            std::process::Command::new("sh").args(["-c", "sleep 30 & sleep 30 & wait"]).spawn().unwrap();
        let pid = child.id() as i32;
        let mut found = Vec::new();
        for _ in 0..200 {
            found = descendants(pid);
            if found.len() == 2 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(found.len(), 2, "two sleeps under the shell");
        assert_eq!(descendants_by_scan(pid).len(), 2);
        assert_eq!(signal_descendants(pid, libc::SIGKILL), 2);
        let status = child.wait().unwrap();
        assert!(status.success(), "the shell's `wait` returns once both sleeps are killed");
    }
}
