//! A resumed command: waiting for readiness ([`Running::wait`]), then ending its
//! whole tree and collecting its resource use ([`Running::finish`]).

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use crate::clock::{BootNanos, boottime_ns};
use crate::error::{LaunchError, Result};
use crate::idle::IdleDetector;
use crate::interrupt::Interrupts;
use crate::marks::{Mark, Marks, MarksFile, MarksWatcher};
use crate::output::OutputPipe;
use crate::sys::{self, Report};
use crate::systemd::{Manager, UnitMet, UnitSpec, UnitWatcher};
use crate::tree::{IoWaitSampler, delay_accounting_enabled, descendants, signal_descendants};
use crate::until::{Reason, Until};
use crate::window::{Mapped, WindowFacts, WindowWatcher};

/// How long [`Running::wait`] may take, and what it samples meanwhile.
#[derive(Clone, Debug)]
pub struct WaitOptions {
    /// Overall limit, counted from the resume; then the reason is `timeout`.
    pub timeout: Option<Duration>,
    /// After forwarding SIGINT/SIGTERM to the tree, how long to wait for the
    /// command to exit (reason `exit`) before returning `interrupted`.
    pub interrupt_grace: Duration,
    /// Sample the tree's block I/O wait (needs `kernel.task_delayacct=1`; see
    /// [`TreeUsage::io_wait`]).
    pub sample_io_wait: bool,
    /// PID 1 is not systemd yet but is about to become it (the init= wrapper of `coldstart
    /// boot init` execs it once the recording has started): `unit:` conditions wait for the
    /// system manager's private socket to appear, within the timeout, instead of ignoring it.
    pub system_manager_later: bool,
}

impl Default for WaitOptions {
    fn default() -> WaitOptions {
        WaitOptions {
            timeout: None,
            interrupt_grace: Duration::from_secs(2),
            sample_io_wait: false,
            system_manager_later: false,
        }
    }
}

/// How the wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    pub reason: Reason,
    /// True when `reason` is the condition that was asked for (false for `timeout`,
    /// `interrupted`, or `exit` of a command that never reached its mark, output or window).
    pub met: bool,
    /// CLOCK_BOOTTIME just before the command was resumed.
    pub started_ns: BootNanos,
    /// The moment the command became ready: the exit, the mark's own timestamp, the
    /// time the output line was read, the start of the quiet period, the window's
    /// map notification; for `timeout` and `interrupted`, when the wait gave up.
    pub ready_ns: BootNanos,
    /// When the launcher noticed (≥ `ready_ns`; later by the quiet period for `idle`).
    pub detected_ns: BootNanos,
    /// The command's exit status if it has exited (128 + signal when killed by one).
    pub exit_status: Option<i32>,
    /// SIGINT or SIGTERM received (and forwarded) while waiting.
    pub signal: Option<i32>,
    /// What matched: the output line, or the window id and its process.
    pub detail: Option<String>,
    /// The process and thread that reached readiness, when known (see [`Milestone`]).
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    /// Every condition met, by time; when all were met, the last is the ready point.
    pub milestones: Vec<Milestone>,
    /// The systemd manager a `unit:` condition was met on (the last one met).
    pub unit_manager: Option<Manager>,
    /// The conditions not met, each with what it was still waiting for
    /// (`unit:foo.service: activating on the host's system manager`).
    pub unmet: Vec<String>,
}

/// A readiness condition met while waiting: when, and who reached it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Milestone {
    /// The condition, in its words (`window:mate-panel`).
    pub reason: Reason,
    pub t_ns: BootNanos,
    /// The process that reached it, when known: the command for `exit`, the process
    /// that marked for `mark:NAME` (when its line says), a window's owner.
    pub pid: Option<i32>,
    /// Its thread, when known: for a window, the owner's main thread (X11 knows only
    /// the process).
    pub tid: Option<i32>,
    /// What matched: the output line, the marking process, or the window and its owner.
    pub detail: Option<String>,
}

impl Milestone {
    /// The end of a wait that did not meet every condition.
    fn stop(reason: Reason, t_ns: BootNanos, pid: Option<i32>) -> Milestone {
        Milestone { reason, t_ns, pid, tid: pid, detail: None }
    }
}

/// Whether a mapped window (or a window manager's announcement) meets a window condition.
fn window_meets(condition: &Until, mapped: &Mapped, window: &WindowFacts, tree_root: i32) -> bool {
    if mapped.window_manager || matches!(condition, Until::WindowManager) {
        return mapped.window_manager && matches!(condition, Until::WindowManager);
    }
    match condition {
        Until::Window => window.owned_by_tree(tree_root),
        Until::WindowClass(pattern) => window.class_matches(pattern),
        Until::WindowName(pattern) => window.name_matches(pattern),
        _ => false,
    }
}

impl Outcome {
    /// From the resume to readiness.
    pub fn time_to_ready(&self) -> Duration {
        Duration::from_nanos((self.ready_ns - self.started_ns).max(0) as u64)
    }
}

/// How [`Running::finish`] ends the command's tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// SIGTERM (and SIGCONT) to every process of the tree, then SIGKILL to what is
    /// left after `grace`, repeated until the tree is empty.
    Terminate { grace: Duration },
    /// SIGKILL at once, repeated until the tree is empty.
    Kill,
    /// Leave the tree running (its output keeps being copied by a background thread
    /// while we live). No resource use can then be reported.
    LeaveRunning,
}

impl Default for Ending {
    fn default() -> Ending {
        Ending::Terminate { grace: Duration::from_secs(2) }
    }
}

/// Resource use of the whole tree, from `wait4` of the shepherd, which reaped every
/// process of the tree (so this counts every descendant, daemons included).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeUsage {
    pub user: Duration,
    pub system: Duration,
    pub major_faults: u64,
    pub minor_faults: u64,
    /// Largest resident set of any one process, KiB.
    pub max_rss_kib: u64,
    /// Block I/O wait summed over the tree's threads (`delayacct_blkio_ticks`, 10 ms
    /// resolution per thread, sampled: a lower bound); `None` when not sampled or
    /// when `kernel.task_delayacct` is off.
    pub io_wait: Option<Duration>,
}

/// What [`Running::finish`] reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Finished {
    /// The command's exit status (128 + signal when killed by one); `None` if left running.
    pub exit_status: Option<i32>,
    /// When the command exited, CLOCK_BOOTTIME.
    pub exit_ns: Option<BootNanos>,
    /// `None` when the tree was left running.
    pub usage: Option<TreeUsage>,
    /// Every mark in the marks file, read after the tree ended.
    pub marks: Marks,
    /// Processes sent SIGTERM, and SIGKILL, while ending the tree.
    pub terminated: usize,
    pub killed: usize,
}

fn wait_status_code(status: i32) -> i32 {
    if libc::WIFSIGNALED(status) { 128 + libc::WTERMSIG(status) } else { libc::WEXITSTATUS(status) }
}

/// The state shared by a paused and a running command.
pub(crate) struct Launch {
    pub(crate) shepherd: i32,
    pub(crate) root_pid: i32,
    pub(crate) program: String,
    pub(crate) started_ns: BootNanos,
    pub(crate) marks: MarksFile,
    report: OwnedFd,
    report_buf: Vec<u8>,
    tree_gone: bool,
    root_exit: Option<(i32, BootNanos)>,
    outputs: Vec<OutputPipe>,
    interrupts: Option<Interrupts>,
    io_wait: Option<IoWaitSampler>,
    reaped: bool,
    /// `DISPLAY` in the command's environment, for window readiness.
    pub(crate) display: Option<String>,
    /// The command's environment names a Wayland display (`WAYLAND_DISPLAY`).
    pub(crate) wayland: bool,
    /// The user the command runs as, whose systemd manager `unit:` conditions may watch.
    pub(crate) uid: u32,
}

/// What one round of polling found.
struct Pumped {
    extra_ready: Vec<bool>,
    lines: Vec<(BootNanos, String)>,
}

impl Launch {
    pub(crate) fn new(
        shepherd: i32,
        program: String,
        report: OwnedFd,
        stdout: Option<OutputPipe>,
        stderr: Option<OutputPipe>,
        marks: MarksFile,
        interrupts: Interrupts,
    ) -> Launch {
        Launch {
            shepherd,
            root_pid: 0,
            program,
            started_ns: 0,
            marks,
            report,
            report_buf: Vec::new(),
            tree_gone: false,
            root_exit: None,
            outputs: stdout.into_iter().chain(stderr).collect(),
            interrupts: Some(interrupts),
            io_wait: None,
            reaped: false,
            display: None,
            wayland: false,
            uid: 0,
        }
    }

    /// The outcome of a wait that ended at `ready`.
    fn outcome(
        &self,
        ready: Milestone,
        met: bool,
        signal: Option<i32>,
        milestones: Vec<Milestone>,
    ) -> Outcome {
        Outcome {
            met,
            reason: ready.reason,
            started_ns: self.started_ns,
            ready_ns: ready.t_ns.max(self.started_ns),
            detected_ns: boottime_ns(),
            exit_status: self.root_exit.map(|(code, _)| code),
            signal,
            detail: ready.detail,
            pid: ready.pid,
            tid: ready.tid,
            milestones,
            unit_manager: None,
            unmet: Vec::new(),
        }
    }

    pub(crate) fn report_fd(&self) -> &OwnedFd {
        &self.report
    }

    /// The shepherd's first report, read while the report pipe is still blocking.
    pub(crate) fn read_first_report(&mut self) -> Option<Report> {
        let mut buf = [0u8; Report::SIZE];
        let mut got = 0;
        while got < buf.len() {
            match sys::read(self.report.as_fd(), &mut buf[got..]) {
                Ok(0) => return None,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return None,
            }
        }
        Some(Report::from_bytes(&buf))
    }

    fn read_reports(&mut self) {
        let mut buf = [0u8; Report::SIZE * 16];
        loop {
            match sys::read(self.report.as_fd(), &mut buf) {
                Ok(0) => {
                    self.tree_gone = true;
                    break;
                }
                Ok(n) => self.report_buf.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        while self.report_buf.len() >= Report::SIZE {
            let r = Report::from_bytes(&self.report_buf[..Report::SIZE]);
            self.report_buf.drain(..Report::SIZE);
            if r.kind == Report::EXITED && r.pid == self.root_pid {
                self.root_exit = Some((wait_status_code(r.status), r.time_ns));
            }
        }
    }

    /// Polls the report pipe, the watched outputs and `extra` for at most `timeout`,
    /// and handles what arrived.
    fn pump(&mut self, extra: &[BorrowedFd<'_>], timeout: Duration) -> Pumped {
        let (report_ready, outputs_ready, extra_ready) = {
            let mut fds: Vec<BorrowedFd<'_>> = Vec::with_capacity(1 + self.outputs.len() + extra.len());
            if !self.tree_gone {
                fds.push(self.report.as_fd());
            }
            for out in self.outputs.iter().filter(|o| !o.is_eof()) {
                fds.push(out.fd());
            }
            let first_extra = fds.len();
            fds.extend_from_slice(extra);
            let ready = sys::poll_readable(&fds, timeout);
            let report_ready = !self.tree_gone && ready[0];
            let skip = usize::from(!self.tree_gone);
            (report_ready, ready[skip..first_extra].to_vec(), ready[first_extra..].to_vec())
        };
        if report_ready {
            self.read_reports();
        }
        let mut lines = Vec::new();
        let mut ready = outputs_ready.into_iter();
        for out in self.outputs.iter_mut().filter(|o| !o.is_eof()) {
            if ready.next().unwrap_or(false) {
                let now = boottime_ns();
                lines.extend(out.read_lines().into_iter().map(|l| (now, l)));
            }
        }
        Pumped { extra_ready, lines }
    }

    fn sample_io_wait(&mut self) {
        if let Some(sampler) = &mut self.io_wait {
            sampler.sample(self.shepherd);
        }
    }

    /// Signals the tree until it is empty, then reaps the shepherd; returns (terminated, killed).
    fn end_tree(&mut self, grace: Option<Duration>) -> (usize, usize) {
        let mut terminated = 0;
        let mut killed = 0;
        if let Some(grace) = grace {
            self.sample_io_wait();
            terminated = signal_descendants(self.shepherd, libc::SIGTERM);
            signal_descendants(self.shepherd, libc::SIGCONT);
            let deadline = Instant::now() + grace;
            while !self.tree_gone && Instant::now() < deadline {
                self.pump(
                    &[],
                    Duration::from_millis(20).min(deadline.saturating_duration_since(Instant::now())),
                );
                self.sample_io_wait();
            }
        }
        while !self.tree_gone {
            self.sample_io_wait();
            killed += signal_descendants(self.shepherd, libc::SIGKILL);
            self.pump(&[], Duration::from_millis(20));
            if !self.tree_gone && descendants(self.shepherd).is_empty() {
                self.pump(&[], Duration::from_millis(100));
            }
        }
        (terminated, killed)
    }

    /// Reaps the shepherd (after the tree is gone) and returns its rusage, which covers the tree.
    fn reap(&mut self) -> Option<libc::rusage> {
        if self.reaped {
            return None;
        }
        self.reaped = true;
        sys::wait4(self.shepherd).ok()
    }

    /// Ends everything at once; used on errors and when dropped unfinished.
    pub(crate) fn kill_and_reap(&mut self) {
        if !self.reaped {
            self.end_tree(None);
            self.reap();
        }
    }
}

impl Drop for Launch {
    fn drop(&mut self) {
        self.kill_and_reap();
    }
}

/// One wait of [`Running::wait_all`]: the watchers its conditions need, and what has been
/// met so far.
struct Waiting<'c> {
    conditions: &'c [Until],
    marks: Option<MarksWatcher>,
    idle: Vec<Option<IdleDetector>>,
    window: Option<WindowWatcher>,
    unit_specs: HashMap<usize, UnitSpec>,
    units: Option<UnitWatcher>,
    /// The systemd manager the last `unit:` condition met was met on.
    unit_manager: Option<Manager>,
    met: Vec<Option<Milestone>>,
    signal: Option<i32>,
    interrupted_at: Option<BootNanos>,
}

impl<'c> Waiting<'c> {
    /// Starts the watchers the conditions need.
    fn start(l: &Launch, conditions: &'c [Until], options: &WaitOptions) -> Result<Waiting<'c>> {
        let marks = match conditions.iter().any(|c| matches!(c, Until::Mark(_))) {
            true => Some(MarksWatcher::new(l.marks.path())?),
            false => None,
        };
        let idle: Vec<Option<IdleDetector>> = conditions
            .iter()
            .map(|c| match c {
                Until::Idle(quiet) => Some(IdleDetector::new(*quiet, l.started_ns)),
                _ => None,
            })
            .collect();
        let window = match conditions.iter().any(Until::watches_windows) {
            true => Some(WindowWatcher::connect(l.display.as_deref(), l.wayland)?),
            false => None,
        };
        let unit_specs: HashMap<usize, UnitSpec> = conditions
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                Until::Unit(spec) => Some((i, spec.clone())),
                _ => None,
            })
            .collect();
        let units = match unit_specs.is_empty() {
            true => None,
            false => {
                let specs: Vec<(usize, UnitSpec)> = unit_specs.iter().map(|(i, s)| (*i, s.clone())).collect();
                Some(UnitWatcher::start(
                    &specs,
                    l.shepherd,
                    l.uid,
                    l.started_ns,
                    options.system_manager_later,
                )?)
            }
        };
        Ok(Waiting {
            conditions,
            marks,
            idle,
            window,
            unit_specs,
            units,
            unit_manager: None,
            met: vec![None; conditions.len()],
            signal: None,
            interrupted_at: None,
        })
    }

    /// Waits for at most one tick (less when an idle condition or the deadline is due),
    /// forwards the signals that arrived, and records the conditions met.
    fn poll(&mut self, l: &mut Launch, deadline: Option<BootNanos>) -> Result<()> {
        let now = boottime_ns();
        let tick = Duration::from_millis(50);
        let mut wait_for = self.idle.iter().flatten().map(IdleDetector::until_due).fold(tick, Duration::min);
        if let Some(d) = deadline {
            wait_for = wait_for.min(Duration::from_nanos((d - now).max(0) as u64));
        }
        let extra: Vec<BorrowedFd<'_>> = [l.interrupts.as_ref().map(|i| i.fd())]
            .into_iter()
            .chain([self.marks.as_ref().map(|m| m.fd()), self.window.as_ref().map(|w| w.fd())])
            .flatten()
            .collect();
        let pumped = l.pump(&extra, wait_for);
        drop(extra);
        l.sample_io_wait();

        if pumped.extra_ready.first() == Some(&true)
            && let Some(interrupts) = l.interrupts.as_mut()
        {
            for sig in interrupts.take() {
                signal_descendants(l.shepherd, sig);
                self.signal = Some(sig);
                self.interrupted_at.get_or_insert(boottime_ns());
            }
        }
        let new_marks = match self.marks.as_mut() {
            Some(watcher) => watcher.read_new()?,
            None => Vec::new(),
        };
        let mapped = match self.window.as_mut() {
            Some(watcher) => watcher.check()?,
            None => Vec::new(),
        };
        let units_met = match self.units.as_mut() {
            Some(watcher) => watcher.check(&self.unit_specs)?,
            None => Vec::new(),
        };
        self.record_met(l, &pumped.lines, &new_marks, &mapped, &units_met);
        Ok(())
    }

    /// Records each condition not met before that what arrived meets.
    fn record_met(
        &mut self,
        l: &Launch,
        lines: &[(BootNanos, String)],
        new_marks: &[Mark],
        mapped: &[Mapped],
        units_met: &[UnitMet],
    ) {
        for (i, condition) in self.conditions.iter().enumerate() {
            if self.met[i].is_some() {
                continue;
            }
            let at =
                |t_ns, pid, tid, detail| Milestone { reason: condition.reason(), t_ns, pid, tid, detail };
            self.met[i] = match condition {
                Until::Exit => l.root_exit.map(|(_, t)| at(t, Some(l.root_pid), Some(l.root_pid), None)),
                Until::Mark(name) => new_marks.iter().find(|m| &m.name == name).map(|m| {
                    at(m.boottime_ns.min(boottime_ns()), m.pid, None, m.pid.map(|p| format!("pid {p}")))
                }),
                Until::Output(re) => lines
                    .iter()
                    .find(|(_, line)| re.is_match(line))
                    .map(|(t, line)| at(*t, None, None, Some(line.clone()))),
                Until::Idle(_) => {
                    self.idle[i].as_mut().and_then(IdleDetector::poll).map(|t| at(t, None, None, None))
                }
                Until::Window | Until::WindowClass(_) | Until::WindowName(_) | Until::WindowManager => {
                    mapped.iter().find_map(|m| {
                        let facts = m.windows.iter().find(|w| window_meets(condition, m, w, l.shepherd))?;
                        Some(at(m.time_ns, facts.pid, facts.pid, Some(facts.describe())))
                    })
                }
                Until::Unit(_) => {
                    units_met.iter().find(|(index, ..)| *index == i).map(|(_, manager, t, pid)| {
                        self.unit_manager = Some(manager.clone());
                        at(*t, *pid, *pid, Some(format!("active on {manager}")))
                    })
                }
            };
        }
    }

    /// The outcome, once every condition is met, the command's tree has ended, the grace
    /// after an interrupt has passed, or the deadline.
    fn ended(&self, l: &Launch, options: &WaitOptions, deadline: Option<BootNanos>) -> Option<Outcome> {
        let mut milestones: Vec<Milestone> = self.met.iter().flatten().cloned().collect();
        milestones.sort_by_key(|m| m.t_ns);
        if milestones.len() == self.conditions.len()
            && let Some(ready) = milestones.last().cloned()
        {
            return Some(self.complete(l.outcome(ready, true, self.signal, milestones)));
        }
        if let Some((_, exit_ns)) = l.root_exit {
            let idle_pending = self
                .conditions
                .iter()
                .zip(&self.met)
                .any(|(c, m)| matches!(c, Until::Idle(_)) && m.is_none());
            if self.interrupted_at.is_some() || (l.tree_gone && !idle_pending) {
                let exit = Milestone::stop(Reason::Exit, exit_ns, Some(l.root_pid));
                return Some(self.complete(l.outcome(exit, false, self.signal, milestones)));
            }
        }
        let now = boottime_ns();
        if let Some(at) = self.interrupted_at
            && now - at >= options.interrupt_grace.as_nanos() as i64
        {
            let stop = Milestone::stop(Reason::Interrupted, now, None);
            return Some(self.complete(l.outcome(stop, false, self.signal, milestones)));
        }
        if deadline.is_some_and(|d| now >= d) {
            let stop = Milestone::stop(Reason::Timeout, now, None);
            return Some(self.complete(l.outcome(stop, false, self.signal, milestones)));
        }
        None
    }

    /// Adds the manager of the `unit:` conditions and the conditions not met.
    fn complete(&self, mut outcome: Outcome) -> Outcome {
        outcome.unit_manager = self.unit_manager.clone();
        outcome.unmet = self
            .conditions
            .iter()
            .enumerate()
            .filter(|(i, _)| self.met[*i].is_none())
            .map(|(i, c)| match (c, self.units.as_ref()) {
                (Until::Unit(_), Some(watcher)) => format!("{c}: {}", watcher.pending(i)),
                _ => format!("{c}: not met"),
            })
            .collect();
        outcome
    }
}

/// A command that has exec'd. Wait for it with [`Running::wait`] (any number of
/// times, e.g. for successive conditions), then end it with [`Running::finish`].
/// Dropping it unfinished kills its whole tree.
pub struct Running {
    launch: Launch,
}

fn duration_of(tv: libc::timeval) -> Duration {
    Duration::from_secs(tv.tv_sec as u64) + Duration::from_micros(tv.tv_usec as u64)
}

impl Running {
    pub(crate) fn new(launch: Launch) -> Running {
        Running { launch }
    }

    /// The command's pid.
    pub fn pid(&self) -> i32 {
        self.launch.root_pid
    }

    /// The shepherd's pid: every process of the command's tree descends from it.
    pub fn tree_root(&self) -> i32 {
        self.launch.shepherd
    }

    /// CLOCK_BOOTTIME just before the resume.
    pub fn started_ns(&self) -> BootNanos {
        self.launch.started_ns
    }

    /// The marks file named in the command's `COLDSTART_MARKS`.
    pub fn marks_path(&self) -> &std::path::Path {
        self.launch.marks.path()
    }

    /// The pids of the command's tree right now (the command and every descendant).
    pub fn tree_pids(&self) -> Vec<i32> {
        descendants(self.launch.shepherd)
    }

    /// Waits until `until` holds: [`Running::wait_all`] of one condition.
    pub fn wait(&mut self, until: &Until, options: &WaitOptions) -> Result<Outcome> {
        self.wait_all(std::slice::from_ref(until), options)
    }

    /// Waits until every condition holds (the start is ready at the last of them), the
    /// timeout passes, or SIGINT/SIGTERM arrives (it is forwarded to the tree). Each
    /// condition met is a [`Milestone`] of the outcome. If the command's tree ends
    /// before a `mark`, `output` or window condition holds, returns `exit` with `met`
    /// false. No conditions means `exit`.
    pub fn wait_all(&mut self, conditions: &[Until], options: &WaitOptions) -> Result<Outcome> {
        let conditions = if conditions.is_empty() { std::slice::from_ref(&Until::Exit) } else { conditions };
        let l = &mut self.launch;
        if let Some(output) = conditions.iter().find(|c| c.watches_output())
            && l.outputs.is_empty()
        {
            return Err(LaunchError::OutputNotWatched(output.to_string()));
        }
        if options.sample_io_wait && l.io_wait.is_none() && delay_accounting_enabled() {
            l.io_wait = Some(IoWaitSampler::default());
        }
        let mut waiting = Waiting::start(l, conditions, options)?;
        let deadline = options.timeout.map(|t| l.started_ns + t.as_nanos() as i64);
        loop {
            waiting.poll(l, deadline)?;
            if let Some(outcome) = waiting.ended(l, options, deadline) {
                return Ok(outcome);
            }
        }
    }

    /// Ends the command's tree as `ending` says (never leaving a process behind
    /// unless asked to), reaps it, and reports its resource use and marks.
    pub fn finish(self, ending: &Ending) -> Result<Finished> {
        let Running { mut launch } = self;
        let l = &mut launch;
        if *ending == Ending::LeaveRunning {
            let marks = crate::marks::read(l.marks.path()).unwrap_or_default();
            l.interrupts = None;
            std::thread::spawn(move || {
                while !launch.tree_gone {
                    launch.pump(&[], Duration::from_secs(1));
                }
                launch.reap();
            });
            return Ok(Finished { marks, ..Finished::default() });
        }
        let grace = match ending {
            Ending::Terminate { grace } => Some(*grace),
            _ => None,
        };
        let (terminated, killed) = l.end_tree(grace);
        let usage = l.reap();
        for out in &mut l.outputs {
            while !out.is_eof() {
                if out.read_lines().is_empty() && !out.is_eof() {
                    break;
                }
            }
        }
        let usage = usage.map(|ru| TreeUsage {
            user: duration_of(ru.ru_utime),
            system: duration_of(ru.ru_stime),
            major_faults: ru.ru_majflt as u64,
            minor_faults: ru.ru_minflt as u64,
            max_rss_kib: ru.ru_maxrss as u64,
            io_wait: l.io_wait.as_ref().map(|s| Duration::from_nanos(s.total_ns() as u64)),
        });
        Ok(Finished {
            exit_status: l.root_exit.map(|(code, _)| code),
            exit_ns: l.root_exit.map(|(_, t)| t),
            usage,
            marks: crate::marks::read(l.marks.path())?,
            terminated,
            killed,
        })
    }
}
