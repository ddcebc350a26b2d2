//! Who else used the CPU during a run, so that the busy-machine line can name them:
//! the process table is read from /proc just before the start and just after the
//! end of each run ([`ProcessTable::read`]), and [`outside_work`] gives each process
//! outside the benchmark the CPU time it used between the two readings, named by its
//! command line and its parents, so that a cron job (`sed … ← bash backup.sh ← cron`)
//! is told from the user's own shell (`… ← bash ← sshd`).
//!
//! A process that started and exited between the readings is never seen by name: its
//! CPU time is in its parent's children's time (`cutime + cstime`, added when the
//! parent reaps it), and is counted there as "children that exited". The kernel counts
//! in clock ticks (10 ms), so a process that ran for less shows as 0 or 10 ms.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

/// Characters of a process's own command line kept in its name.
const COMMAND_CHARS: usize = 72;
/// Characters of its nearest parent's command line kept.
const PARENT_COMMAND_CHARS: usize = 40;
/// Parents named, nearest first; further ones are left out.
const PARENTS_KEPT: usize = 4;
/// Processes kept per run, by CPU time.
const KEPT_PER_RUN: usize = 8;

/// One process as `/proc/PID/stat` and `/proc/PID/cmdline` show it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessSample {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    /// Empty for kernel threads.
    pub cmdline: Vec<String>,
    /// When it started, clock ticks after boot: a pid reused between two readings is
    /// another process.
    pub start_ticks: u64,
    /// `utime + stime`, clock ticks, of all its threads.
    pub cpu_ticks: u64,
    /// `cutime + cstime`: its children's, once it reaped them.
    pub children_ticks: u64,
}

/// The processes of the machine at one moment, by pid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcessTable {
    pub processes: BTreeMap<i32, ProcessSample>,
}

impl ProcessTable {
    pub fn new(samples: impl IntoIterator<Item = ProcessSample>) -> ProcessTable {
        ProcessTable { processes: samples.into_iter().map(|s| (s.pid, s)).collect() }
    }

    /// Every process /proc shows now (those that exit while it is read are left out).
    pub fn read() -> ProcessTable {
        let Ok(all) = procfs::process::all_processes() else { return ProcessTable::default() };
        ProcessTable::new(all.flatten().filter_map(|process| {
            let stat = process.stat().ok()?;
            Some(ProcessSample {
                pid: stat.pid,
                ppid: stat.ppid,
                comm: stat.comm,
                cmdline: process.cmdline().unwrap_or_default(),
                start_ticks: stat.starttime,
                cpu_ticks: stat.utime + stat.stime,
                children_ticks: (stat.cutime + stat.cstime).max(0) as u64,
            })
        }))
    }

    /// The process now under `pid`, if it is the one that was `sample`.
    fn same(&self, sample: &ProcessSample) -> Option<&ProcessSample> {
        self.processes.get(&sample.pid).filter(|p| p.start_ticks == sample.start_ticks)
    }

    /// `pid`'s parents, nearest first (bounded, in case /proc changed between reads).
    fn parents(&self, pid: i32) -> impl Iterator<Item = &ProcessSample> {
        let mut next = self.processes.get(&pid).map(|p| p.ppid);
        std::iter::from_fn(move || {
            let parent = self.processes.get(&next?)?;
            next = (parent.ppid != parent.pid).then_some(parent.ppid);
            Some(parent)
        })
        .take(64)
    }

    fn descends_from(&self, pid: i32, ancestor: i32) -> bool {
        self.parents(pid).any(|p| p.pid == ancestor)
    }
}

/// One parent of an outside process.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Parent {
    pub pid: i32,
    pub comm: String,
    /// Its command line, cut short; only the nearest parent's is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
}

/// A process outside the benchmark that used the CPU during a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutsideProcess {
    pub pid: i32,
    /// Its command line, cut short (`[comm]` for a kernel thread).
    pub command: String,
    /// Its parents, nearest first, up to but not including PID 1 and kthreadd.
    pub parents: Vec<Parent>,
    /// Seconds of CPU during the run: its own and its children's that exited meanwhile.
    pub cpu: f64,
    /// Of `cpu`, the seconds of its children that exited during the run.
    pub children_cpu: f64,
    /// This is the benchmark's own process (its prefetch replay threads, its samplers).
    #[serde(default)]
    pub benchmark: bool,
}

impl OutsideProcess {
    /// `sed -i s/a/b/ f [4242] ← bash /etc/cron.daily/x [4200] ← cron [805]`.
    pub fn describe(&self) -> String {
        let mut out = format!("{} [{}]", self.command, self.pid);
        if self.benchmark {
            out.push_str(" (this benchmark: its replay and sampling threads)");
        } else if self.parents.is_empty() && self.command.starts_with('[') {
            out.push_str(" (kernel thread)");
        }
        for parent in &self.parents {
            let name = parent.command.as_deref().unwrap_or(&parent.comm);
            out.push_str(&format!(" ← {name} [{}]", parent.pid));
        }
        out
    }

    /// What identifies it across runs: its command line and its parents' names (not pids).
    fn key(&self) -> (String, bool, Vec<(String, Option<String>)>) {
        let parents = self.parents.iter().map(|p| (p.comm.clone(), p.command.clone())).collect();
        (self.command.clone(), self.benchmark, parents)
    }
}

/// An outside process summed over the runs it was seen in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct OutsideTotal {
    /// As seen in the first run it was seen in, with `cpu` and `children_cpu` summed.
    #[serde(flatten)]
    pub process: OutsideProcess,
    /// The runs it used the CPU in.
    pub runs: usize,
}

/// `text` cut to at most `chars` characters, with `…` where it was cut: after its last
/// whole word when that keeps at least half of them.
fn cut(text: &str, chars: usize) -> String {
    let Some((at, _)) = text.char_indices().nth(chars) else { return text.to_owned() };
    let kept = &text[..at];
    let kept = match kept.rfind(' ') {
        Some(space) if kept[..space].chars().count() >= chars / 2 => &kept[..space],
        _ => kept,
    };
    format!("{}…", kept.trim_end())
}

fn command_of(process: &ProcessSample, chars: usize) -> String {
    if process.cmdline.is_empty() {
        format!("[{}]", process.comm)
    } else {
        cut(&process.cmdline.join(" "), chars)
    }
}

fn parents_of(table: &ProcessTable, pid: i32) -> Vec<Parent> {
    table
        .parents(pid)
        .take_while(|p| p.pid > 2)
        .take(PARENTS_KEPT)
        .enumerate()
        .map(|(i, p)| Parent {
            pid: p.pid,
            comm: p.comm.clone(),
            command: (i == 0).then(|| command_of(p, PARENT_COMMAND_CHARS)),
        })
        .collect()
}

/// Clock ticks `process` (as it is `after`) used since `before`: its own, and its
/// children's that it reaped meanwhile, less what those children had used already
/// when `before` was read (a child seen then and gone now was reaped with its whole
/// life's time).
fn ticks_between(before: &ProcessTable, after: &ProcessTable, process: &ProcessSample) -> (u64, u64) {
    let Some(prior) = before.same(process) else { return (process.cpu_ticks, process.children_ticks) };
    let reaped_before: u64 = before
        .processes
        .values()
        .filter(|c| c.ppid == process.pid && after.same(c).is_none())
        .map(|c| c.cpu_ticks + c.children_ticks)
        .sum();
    let own = process.cpu_ticks.saturating_sub(prior.cpu_ticks);
    let children = process.children_ticks.saturating_sub(prior.children_ticks + reaped_before);
    (own, children)
}

/// The processes other than the benchmark's command that used the CPU between two
/// readings, most first (at most [`KEPT_PER_RUN`]). `ours` is the benchmark's own
/// process: its children (the command's tree) are left out, and its own time, without
/// its children's, is listed as the benchmark's.
pub fn outside_work(
    before: &ProcessTable,
    after: &ProcessTable,
    ours: i32,
    ticks_per_second: u64,
) -> Vec<OutsideProcess> {
    let seconds = |ticks: u64| ticks as f64 / ticks_per_second.max(1) as f64;
    let mut out: Vec<OutsideProcess> = after
        .processes
        .values()
        .filter(|p| !after.descends_from(p.pid, ours))
        .filter_map(|p| {
            let (own, children) = ticks_between(before, after, p);
            let children = if p.pid == ours { 0 } else { children };
            (own + children > 0).then(|| OutsideProcess {
                pid: p.pid,
                command: command_of(p, COMMAND_CHARS),
                parents: parents_of(after, p.pid),
                cpu: seconds(own + children),
                children_cpu: seconds(children),
                benchmark: p.pid == ours,
            })
        })
        .collect();
    out.sort_by(|a, b| b.cpu.total_cmp(&a.cpu).then(a.pid.cmp(&b.pid)));
    out.truncate(KEPT_PER_RUN);
    out
}

/// The outside processes of many runs, each summed over the runs it was seen in (by
/// command line and parents' names), most CPU first.
pub fn totals<'a>(runs: impl IntoIterator<Item = &'a [OutsideProcess]>) -> Vec<OutsideTotal> {
    let mut order: Vec<OutsideTotal> = Vec::new();
    let mut index: HashMap<_, usize> = HashMap::new();
    for run in runs {
        for process in run {
            match index.get(&process.key()) {
                Some(&i) => {
                    let total = &mut order[i];
                    total.process.cpu += process.cpu;
                    total.process.children_cpu += process.children_cpu;
                    total.runs += 1;
                }
                None => {
                    index.insert(process.key(), order.len());
                    order.push(OutsideTotal { process: process.clone(), runs: 1 });
                }
            }
        }
    }
    order.sort_by(|a, b| b.process.cpu.total_cmp(&a.process.cpu));
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(pid: i32, ppid: i32, comm: &str, cmdline: &str, cpu: u64, children: u64) -> ProcessSample {
        ProcessSample {
            pid,
            ppid,
            comm: comm.into(),
            cmdline: cmdline.split_whitespace().map(str::to_owned).collect(),
            start_ticks: pid as u64,
            cpu_ticks: cpu,
            children_ticks: children,
        }
    }

    /// A machine with a cron job, the user's shell, a kernel thread and the benchmark
    /// (pid 900, whose child 901 is the command's tree).
    fn machine(script_children: u64, shell: u64, kworker: u64, ours: u64, tree: u64) -> Vec<ProcessSample> {
        vec![
            process(1, 0, "systemd", "/sbin/init", 500, 9000),
            process(2, 0, "kthreadd", "", 0, 0),
            process(40, 2, "kworker/0:1", "", kworker, 0),
            process(805, 1, "cron", "/usr/sbin/cron -f", 30, 100),
            process(
                4200,
                805,
                "backup.sh",
                "/bin/bash /etc/cron.hourly/backup.sh --all",
                10,
                script_children,
            ),
            process(700, 1, "sshd", "sshd: /usr/sbin/sshd -D", 5, 0),
            process(2300, 700, "sshd", "sshd: user@pts/0", 20, 0),
            process(2345, 2300, "bash", "-bash", shell, 0),
            process(900, 2345, "coldstart", "coldstart bench -- app", ours, 0),
            process(901, 900, "app", "app --start", tree, 0),
        ]
    }

    #[test]
    fn outside_processes_are_named_with_their_parents_and_command_lines() {
        let before = ProcessTable::new(machine(0, 100, 7, 50, 0));
        // During the run: the script's children (sed, mv, mkdir) used 37 ticks and were
        // reaped; the user's shell 3; a kworker 2; the benchmark 4 of its own; the tree 80.
        let mut after = ProcessTable::new(machine(37, 103, 9, 54, 80));
        // A process started during the run, under the script: all its time counts.
        after.processes.insert(4300, process(4300, 4200, "sed", "sed -i s/a/b/ /var/log/x", 5, 0));
        // A long command line is cut.
        let long = format!("python3 -c {}", "x".repeat(200));
        after.processes.insert(4400, process(4400, 1, "python3", &long, 1, 0));
        let work = outside_work(&before, &after, 900, 100);
        let lines: Vec<String> = work.iter().map(|p| format!("{:.2} {}", p.cpu, p.describe())).collect();
        assert_eq!(
            lines,
            [
                "0.37 /bin/bash /etc/cron.hourly/backup.sh --all [4200] ← /usr/sbin/cron -f [805]",
                "0.05 sed -i s/a/b/ /var/log/x [4300] ← /bin/bash /etc/cron.hourly/backup.sh… [4200] ← cron [805]",
                "0.04 coldstart bench -- app [900] (this benchmark: its replay and sampling threads) \
                 ← -bash [2345] ← sshd [2300] ← sshd [700]",
                "0.03 -bash [2345] ← sshd: user@pts/0 [2300] ← sshd [700]",
                "0.02 [kworker/0:1] [40] (kernel thread)",
                &format!("0.01 python3 -c {}… [4400]", "x".repeat(61)),
            ]
        );
        assert_eq!(work[0].children_cpu, 0.37);
        assert!(work.iter().all(|p| p.pid != 901), "the command's tree is not outside");
    }

    #[test]
    fn a_child_reaped_during_the_run_counts_only_its_time_in_the_run() {
        // Child 50 of cron had used 40 ticks before the run, ran 6 more and was reaped:
        // cron's children's time grew by 46, of which 6 in the run.
        let before = ProcessTable::new([
            process(805, 1, "cron", "cron", 0, 100),
            process(50, 805, "sh", "sh -c job", 40, 0),
        ]);
        let after = ProcessTable::new([process(805, 1, "cron", "cron", 0, 146)]);
        let work = outside_work(&before, &after, 900, 100);
        assert_eq!(work.len(), 1);
        assert_eq!((work[0].cpu, work[0].children_cpu), (0.06, 0.06));
        // A pid reused by a new process counts from zero, not from the old one's time.
        let mut reused = ProcessTable::new([process(805, 1, "cron", "cron", 0, 100)]);
        reused
            .processes
            .insert(60, ProcessSample { start_ticks: 9999, ..process(60, 805, "ls", "ls", 3, 0) });
        let before =
            ProcessTable::new([process(805, 1, "cron", "cron", 0, 100), process(60, 805, "x", "x", 50, 0)]);
        let work = outside_work(&before, &reused, 900, 100);
        assert_eq!(work.iter().map(|p| (p.pid, p.cpu)).collect::<Vec<_>>(), [(60, 0.03)]);
    }

    #[test]
    fn totals_merge_a_process_seen_in_several_runs_under_new_pids() {
        let run = |pid: i32, cpu: f64| OutsideProcess {
            pid,
            command: "/bin/bash /etc/cron.hourly/backup.sh".into(),
            parents: vec![Parent { pid: 805, comm: "cron".into(), command: Some("cron -f".into()) }],
            cpu,
            children_cpu: cpu / 2.0,
            benchmark: false,
        };
        let shell = OutsideProcess { command: "-bash".into(), parents: vec![], ..run(2345, 0.5) };
        let runs = [vec![run(4200, 0.25), shell.clone()], vec![run(4700, 0.5)]];
        let totals = totals(runs.iter().map(Vec::as_slice));
        assert_eq!(totals.len(), 2);
        assert_eq!((totals[0].process.pid, totals[0].process.cpu, totals[0].runs), (4200, 0.75, 2));
        assert_eq!(totals[0].process.children_cpu, 0.375);
        assert_eq!((totals[1].process.command.as_str(), totals[1].runs), ("-bash", 1));
    }
}
