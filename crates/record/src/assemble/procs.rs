//! The process tree of the recording: processes, threads and execs from the proc
//! connector's events (which tell threads from processes and carry exit codes),
//! with exec file names and thread names from tracefs.

use std::collections::{HashMap, HashSet};

use coldstart_trace::{Exec, Nanos, Process, Thread};

use crate::assemble::system_view::SystemView;
use crate::capture::connector::ProcRecord;
use crate::ftrace::events::{Event, Timed};

/// The processes, threads and execs, and the lookups the other tables need.
#[derive(Default)]
pub struct ProcTree {
    pub processes: Vec<Process>,
    pub threads: Vec<Thread>,
    pub execs: Vec<Exec>,
    /// tid → pid (thread group) for every task seen.
    pub pid_of: HashMap<i32, i32>,
    /// Processes in scope.
    pub in_scope: HashSet<i32>,
    /// Execs whose argv could not be read (the process had exited or exec'd again).
    pub argv_unread: u64,
    pub connector_lost: u64,
    /// Recording the whole system: every task is in scope.
    pub system_wide: bool,
}

/// Converts a wait status (`exit_code` of the connector) to a shell-style exit status.
pub fn exit_status(wait_status: u32) -> i32 {
    let signal = wait_status & 0x7f;
    if signal != 0 { 128 + signal as i32 } else { ((wait_status >> 8) & 0xff) as i32 }
}

impl ProcTree {
    pub fn tgid(&self, tid: i32) -> i32 {
        self.pid_of.get(&tid).copied().unwrap_or(tid)
    }

    /// Builds the tree. `to_trace` converts connector times; `system` puts everything in scope;
    /// `also` (tid, pid) are the threads of the `--also` processes at the start, in scope with
    /// the children they start.
    pub fn from_records(
        records: &[ProcRecord],
        scope_events: &[Timed],
        root_pid: Option<i32>,
        also: &[(i32, i32)],
        system: bool,
        to_trace: impl Fn(i64) -> Nanos,
        boot_to_trace: impl Fn(u64) -> Nanos,
    ) -> ProcTree {
        let (exec_files, thread_comm) = names_from_events(scope_events, boot_to_trace);
        let mut replay = Replay {
            tree: ProcTree {
                system_wide: system,
                in_scope: root_pid.into_iter().chain(also.iter().map(|&(_, pid)| pid)).collect(),
                pid_of: also.iter().copied().collect(),
                ..ProcTree::default()
            },
            root_pid,
            current: HashMap::new(),
            thread_idx: HashMap::new(),
            exec_files,
            thread_comm,
        };
        replay.existing(also);
        for rec in records {
            match rec {
                ProcRecord::Fork { t, ppid, tid, pid, .. } => replay.fork(to_trace(*t), *ppid, *tid, *pid),
                ProcRecord::Exec { t, tid, pid, exe, argv, comm } => {
                    replay.exec(to_trace(*t), *tid, *pid, exe, argv, comm)
                }
                ProcRecord::Comm { tid, pid, comm, .. } => replay.comm(*tid, *pid, comm),
                ProcRecord::Exit { t, tid, pid, code, .. } => replay.exit(to_trace(*t), *tid, *pid, *code),
                ProcRecord::Lost { .. } => replay.tree.connector_lost += 1,
            }
        }
        replay.finish()
    }

    /// Adds a thread (and in system mode its process) for a task seen in events
    /// but never forked during the recording, named as /proc names it now.
    /// Names the processes of the recording that /proc still knows and no event named
    /// (`--also` processes, which were running before the recording and never exec'd in it).
    pub fn name_from_proc(&mut self, system: &dyn SystemView) {
        for p in self.processes.iter_mut().filter(|p| p.comm.is_empty()) {
            p.comm = system.task_comm(p.pid).unwrap_or_default();
            p.exe = p.exe.take().or_else(|| system.task_exe(p.pid));
        }
        for t in self.threads.iter_mut().filter(|t| t.comm.is_empty()) {
            t.comm = system.task_comm(t.tid).unwrap_or_default();
        }
    }

    /// Adds a process and a thread row, out of scope, for a task outside the recording
    /// that woke a recorded thread, named as /proc names it now (if it had started by
    /// `end_boot_ns`). False when the task is gone: the trace then knows only its id.
    pub fn name_outside_task(&mut self, tid: i32, system: &dyn SystemView, end_boot_ns: i64) -> bool {
        if self.threads.iter().any(|t| t.tid == tid) {
            return true;
        }
        let Some(pid) = tgid_of_task_started_by(system, tid, end_boot_ns) else { return false };
        self.pid_of.insert(tid, pid);
        if !self.processes.iter().any(|p| p.pid == pid) {
            self.processes.push(Process {
                pid,
                comm: system.task_comm(pid).unwrap_or_default(),
                exe: system.task_exe(pid),
                in_scope: false,
                ..Process::default()
            });
        }
        let comm = system.task_comm(tid).unwrap_or_default();
        self.threads.push(Thread { tid, pid, comm, start_ns: None, end_ns: None });
        true
    }

    pub fn ensure_task(&mut self, tid: i32, system: &dyn SystemView) {
        if self.pid_of.contains_key(&tid) && self.threads.iter().any(|t| t.tid == tid) {
            return;
        }
        let pid = *self.pid_of.entry(tid).or_insert_with(|| system.task_tgid(tid).unwrap_or(tid));
        let comm = system.task_comm(tid).unwrap_or_default();
        let comm = comm.as_str();
        if !(self.system_wide || self.in_scope.contains(&pid)) {
            return;
        }
        if self.system_wide && !self.in_scope.contains(&pid) {
            self.in_scope.insert(pid);
            let pcomm = system.task_comm(pid).unwrap_or_else(|| comm.to_owned());
            self.processes.push(Process { pid, comm: pcomm, in_scope: true, ..Default::default() });
        }
        if !self.threads.iter().any(|t| t.tid == tid) {
            self.threads.push(Thread { tid, pid, comm: comm.to_owned(), start_ns: None, end_ns: None });
        }
    }
}

/// Per task, the files it exec'd, with when.
type ExecFiles = HashMap<i32, Vec<(Nanos, String)>>;

/// What tracefs saw of tasks: the files each exec'd (by time) and each thread's name.
fn names_from_events(
    scope_events: &[Timed],
    boot_to_trace: impl Fn(u64) -> Nanos,
) -> (ExecFiles, HashMap<i32, String>) {
    let mut exec_files = ExecFiles::new();
    let mut thread_comm: HashMap<i32, String> = HashMap::new();
    for e in scope_events {
        match &e.event {
            Event::Exec { tid, filename, .. } => {
                exec_files.entry(*tid).or_default().push((boot_to_trace(e.ts), filename.clone()))
            }
            Event::Switch { prev_tid, prev_comm, .. } if *prev_tid != 0 => {
                thread_comm.insert(*prev_tid, prev_comm.text());
            }
            _ => {}
        }
    }
    (exec_files, thread_comm)
}

/// The tree while the connector's records are replayed in order.
struct Replay {
    tree: ProcTree,
    root_pid: Option<i32>,
    /// pid → index in `tree.processes` of the process alive under that pid.
    current: HashMap<i32, usize>,
    /// tid → index in `tree.threads`.
    thread_idx: HashMap<i32, usize>,
    exec_files: ExecFiles,
    thread_comm: HashMap<i32, String>,
}

impl Replay {
    /// Rows for processes in scope from before the recording (`--also`), named as tracefs
    /// names their threads; the assembly names the rest from /proc.
    fn existing(&mut self, threads: &[(i32, i32)]) {
        for &(tid, pid) in threads {
            if !self.current.contains_key(&pid) {
                self.current.insert(pid, self.tree.processes.len());
                self.tree.processes.push(Process { pid, in_scope: true, ..Process::default() });
            }
            self.thread_idx.insert(tid, self.tree.threads.len());
            self.tree.threads.push(Thread { tid, pid, comm: String::new(), start_ns: None, end_ns: None });
        }
    }

    fn fork(&mut self, t: Nanos, ppid: i32, tid: i32, pid: i32) {
        let tree = &mut self.tree;
        tree.pid_of.insert(tid, pid);
        if tid == pid {
            let in_scope = tree.system_wide || tree.in_scope.contains(&ppid) || Some(pid) == self.root_pid;
            if !in_scope {
                return;
            }
            tree.in_scope.insert(pid);
            let comm = self.current.get(&ppid).map(|&i| tree.processes[i].comm.clone()).unwrap_or_default();
            self.current.insert(pid, tree.processes.len());
            tree.processes.push(Process {
                pid,
                ppid: Some(ppid),
                comm,
                exe: None,
                argv: Vec::new(),
                start_ns: Some(t),
                end_ns: None,
                exit_code: None,
                in_scope: true,
            });
        } else if !(tree.system_wide || tree.in_scope.contains(&pid)) {
            return;
        }
        self.thread_idx.insert(tid, tree.threads.len());
        tree.threads.push(Thread { tid, pid, comm: String::new(), start_ns: Some(t), end_ns: None });
    }

    fn exec(
        &mut self,
        t: Nanos,
        tid: i32,
        pid: i32,
        exe: &Option<String>,
        argv: &Option<Vec<String>>,
        comm: &Option<String>,
    ) {
        let tree = &mut self.tree;
        tree.pid_of.insert(tid, pid);
        if tree.system_wide && !self.current.contains_key(&pid) {
            // A process from before the recording that execs during it, recorded system-wide:
            // PID 1 exec'ing systemd under the init= wrapper (`coldstart boot init`).
            self.current.insert(pid, tree.processes.len());
            tree.in_scope.insert(pid);
            tree.processes.push(Process { pid, in_scope: true, ..Process::default() });
        }
        let Some(&i) = self.current.get(&pid) else { return };
        let file = self
            .exec_files
            .get(&tid)
            .and_then(|list| list.iter().min_by_key(|(te, _)| (te - t).abs()).map(|(_, f)| f.clone()));
        if argv.is_none() {
            tree.argv_unread += 1;
        }
        let p = &mut tree.processes[i];
        p.exe = exe.clone().or_else(|| file.clone());
        p.argv = argv.clone().unwrap_or_default();
        let named_after_file = || file.as_deref().or(exe.as_deref()).map(comm_after_exec);
        if let Some(c) = comm.clone().or_else(named_after_file).filter(|c| !c.is_empty()) {
            p.comm = c;
        }
        tree.execs.push(Exec {
            pid,
            t_ns: t,
            path: file.or_else(|| exe.clone()).unwrap_or_default(),
            argv: p.argv.clone(),
        });
    }

    fn comm(&mut self, tid: i32, pid: i32, comm: &str) {
        if let (true, Some(&i)) = (tid == pid, self.current.get(&pid)) {
            self.tree.processes[i].comm = comm.to_owned();
        }
        self.thread_comm.entry(tid).or_insert_with(|| comm.to_owned());
    }

    fn exit(&mut self, t: Nanos, tid: i32, pid: i32, wait_status: u32) {
        // The connector reports every task's exit with its process: the only way
        // to name the process of an outside thread that is gone by the end.
        self.tree.pid_of.entry(tid).or_insert(pid);
        if let Some(&i) = self.thread_idx.get(&tid) {
            self.tree.threads[i].end_ns = Some(t);
        }
        if let Some(i) = (tid == pid).then(|| self.current.remove(&pid)).flatten() {
            self.tree.processes[i].end_ns = Some(t);
            self.tree.processes[i].exit_code = Some(exit_status(wait_status));
        }
    }

    /// Names each thread: as tracefs or the connector named it, else as its process.
    fn finish(mut self) -> ProcTree {
        let tree = &mut self.tree;
        for t in &mut tree.threads {
            if let Some(c) = self.thread_comm.get(&t.tid) {
                t.comm = c.clone();
            } else if let Some(p) = tree.processes.iter().find(|p| p.pid == t.pid) {
                t.comm = p.comm.clone();
            }
        }
        self.tree
    }
}

/// The name the kernel gives a task that execs `path`: its last component, cut to
/// 15 bytes. Used when the task was gone before /proc could name it.
fn comm_after_exec(path: &str) -> String {
    let name = path.rsplit('/').next().unwrap_or(path).as_bytes();
    String::from_utf8_lossy(&name[..name.len().min(15)]).into_owned()
}

/// The thread group of a task that still runs and had started by `end_boot_ns` (a task
/// started later reuses the id of one that has gone: `coldstart recover` assembles long after).
pub fn tgid_of_task_started_by(system: &dyn SystemView, tid: i32, end_boot_ns: i64) -> Option<i32> {
    let ticks = system.task_start_ticks(tid)?;
    let tick_ns = 1e9 / system.clock_ticks_per_second();
    if ticks as f64 * tick_ns > end_boot_ns as f64 + tick_ns {
        return None;
    }
    system.task_tgid(tid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_outside_the_tree_that_exits_is_named_by_its_process() {
        let recs = vec![ProcRecord::Exit { t: 5, tid: 501, pid: 500, code: 0, signal: 0 }];
        let tree = ProcTree::from_records(&recs, &[], Some(100), &[], false, |t| t, |t| t as i64);
        assert_eq!(tree.tgid(501), 500);
        assert!(!tree.in_scope.contains(&500), "an outside process stays outside");
    }

    #[test]
    fn a_task_is_named_by_its_process_unless_it_started_after_the_recording() {
        let tid = nix::unistd::gettid().as_raw();
        let pid = std::process::id() as i32;
        let live = crate::assemble::LiveSystem;
        assert_eq!(tgid_of_task_started_by(&live, tid, i64::MAX / 2), Some(pid));
        // Ended at boot: this thread, started since, would reuse the id of a task gone by now.
        assert_eq!(tgid_of_task_started_by(&live, tid, 0), None);
        assert_eq!(tgid_of_task_started_by(&live, i32::MAX, i64::MAX / 2), None, "no such task");
    }

    #[test]
    fn exit_status_of_codes_and_signals() {
        assert_eq!(exit_status(7 << 8), 7);
        assert_eq!(exit_status(9), 137);
        assert_eq!(exit_status(0), 0);
    }

    #[test]
    fn double_forked_grandchild_stays_in_scope_and_threads_are_not_processes() {
        let recs = vec![
            ProcRecord::Fork { t: 10, ptid: 1, ppid: 1, tid: 100, pid: 100 },
            ProcRecord::Exec {
                t: 11,
                tid: 100,
                pid: 100,
                exe: Some("/bin/app".into()),
                argv: Some(vec!["app".into()]),
                comm: Some("app".into()),
            },
            ProcRecord::Fork { t: 12, ptid: 100, ppid: 100, tid: 101, pid: 100 },
            ProcRecord::Fork { t: 13, ptid: 100, ppid: 100, tid: 200, pid: 200 },
            ProcRecord::Fork { t: 14, ptid: 200, ppid: 200, tid: 300, pid: 300 },
            ProcRecord::Exit { t: 15, tid: 200, pid: 200, code: 0, signal: 17 },
            ProcRecord::Fork { t: 16, ptid: 5, ppid: 5, tid: 400, pid: 400 },
            ProcRecord::Exit { t: 20, tid: 100, pid: 100, code: 3 << 8, signal: 17 },
        ];
        let tree = ProcTree::from_records(&recs, &[], Some(100), &[], false, |t| t, |t| t as i64);
        let pids: Vec<i32> = tree.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![100, 200, 300]);
        assert_eq!(tree.processes[2].ppid, Some(200));
        assert_eq!(tree.processes[0].exit_code, Some(3));
        assert_eq!(tree.processes[0].argv, vec!["app".to_string()]);
        assert_eq!(tree.tgid(101), 100);
        assert_eq!(tree.threads.iter().filter(|t| t.pid == 100).count(), 2);
        assert!(!tree.in_scope.contains(&400));
    }

    #[test]
    fn a_process_gone_before_proc_named_it_is_named_after_the_file_it_exec_d() {
        let recs = vec![
            ProcRecord::Fork { t: 10, ptid: 100, ppid: 100, tid: 101, pid: 101 },
            ProcRecord::Exec { t: 11, tid: 101, pid: 101, exe: None, argv: None, comm: None },
            ProcRecord::Fork { t: 12, ptid: 100, ppid: 100, tid: 102, pid: 102 },
            ProcRecord::Exec { t: 13, tid: 102, pid: 102, exe: None, argv: None, comm: None },
        ];
        let exec = |ts, tid, filename: &str| Timed {
            ts,
            cpu: 0,
            event: Event::Exec { tid, old_tid: tid, filename: filename.into() },
        };
        let events = [exec(11, 101, "/usr/bin/cat"), exec(13, 102, "./a-rather-long-program-name")];
        let tree = ProcTree::from_records(&recs, &events, Some(100), &[], false, |t| t, |t| t as i64);
        let comms: Vec<&str> = tree.processes.iter().map(|p| p.comm.as_str()).collect();
        assert_eq!(comms, ["cat", "a-rather-long-p"]);
    }

    #[test]
    fn system_wide_the_exec_of_a_process_from_before_the_recording_is_kept() {
        let recs = vec![ProcRecord::Exec { t: 40, tid: 1, pid: 1, exe: None, argv: None, comm: None }];
        let exec = Timed {
            ts: 40,
            cpu: 0,
            event: Event::Exec { tid: 1, old_tid: 1, filename: "/sbin/init".into() },
        };
        let tree =
            ProcTree::from_records(&recs, std::slice::from_ref(&exec), None, &[], true, |t| t, |t| t as i64);
        assert_eq!(tree.execs, [Exec { pid: 1, t_ns: 40, path: "/sbin/init".into(), argv: Vec::new() }]);
        assert_eq!(tree.processes.len(), 1);
        assert_eq!((tree.processes[0].pid, tree.processes[0].start_ns), (1, None), "it existed before");
        assert_eq!(tree.processes[0].exe.as_deref(), Some("/sbin/init"));
        // A command's recording keeps to its tree.
        let tree = ProcTree::from_records(&recs, &[exec], Some(100), &[], false, |t| t, |t| t as i64);
        assert!(tree.execs.is_empty() && tree.processes.is_empty());
    }
}
