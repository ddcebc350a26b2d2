//! The critical path to ready: from the readiness point, walk back through the
//! thread that reached it (its running time, its I/O waits and the files behind
//! them), jumping to the thread that woke it whenever it slept, and to the thread
//! that created it when its own history begins, until the command's start.
//!
//! The waker's history stands in for the sleeper's only while the sleeper slept: back
//! at the start of that sleep the walk returns to the sleeper. A thread that waited a
//! millisecond for a helper that had slept a second on a timer lost a millisecond, not
//! a second, while its own work before the wait is what the start was doing.
//!
//! A thread that polls (sleeps on a timer, looks, sleeps again) until an event wakes
//! it was waiting for that event the whole time: a woken sleep extends back over the
//! timer-ended sleeps before it that only short checks separate, so the walk follows
//! the waker back to where the polling began instead of charging the polls' timer
//! sleeps to the start.
//!
//! Processes are no boundary: a wakeup through a pipe, a socket (D-Bus, X11) or a futex
//! names its waker whatever process it belongs to, and the walk follows it when the
//! trace has the waker's scheduler data (the command's tree, `record --also`, `--system`).
//! A wait ended by a thread without data is a named wait on its process
//! ([`SegmentKind::WaitUntraced`] with [`WakerProcess`]); a sleep is a timer sleep
//! ([`SegmentKind::Sleep`]) only when its wakeup was recorded and no other thread made it;
//! one without a recorded wakeup is [`SegmentKind::NoWakeup`].

use coldstart_trace::{Nanos, SchedInterval, ThreadState, Wakeup};
use rustc_hash::FxHashMap;

use crate::analysis::{
    CriticalPath, FileTime, OutsideWait, PathSegment, PathSummary, ProcessTime, ReadyInfo, SegmentKind,
    WakerProcess, Warning, WarningCode,
};
use crate::context::Ctx;
use crate::time::{WaitFiles, split, wait_files};

/// Jumps to a waker at an unchanged time before a sleep counts as a dead end (wakeup cycles).
const MAX_JUMPS_AT_ONE_TIME: u32 = 16;
/// How long after a sleep's recorded end its wakeup may be timed (event order within a CPU),
/// and before its recorded start (a wakeup timed at `sched_waking` may begin while the
/// woken thread is still switching out).
const WAKEUP_SLACK_NS: Nanos = 50_000;
/// Most running (and runnable) time between two timer-ended sleeps of a polling loop.
const POLL_CHECK_NS: Nanos = 1_000_000;

/// The walk back from ready: where it is (thread `tid` at time `t`) and what it has found.
struct Walk<'c, 't> {
    ctx: &'c Ctx<'t>,
    /// In reverse time order while walking.
    segments: Vec<PathSegment>,
    buffer: WaitFiles,
    tid: i32,
    t: Nanos,
    /// Jumps to another thread made without moving back in time (a wakeup cycle, past a limit).
    jumps_at_t: u32,
    /// Sleepers to return to, with the time each began to sleep: the walk follows a waker
    /// no further back than that.
    sleepers: Vec<(i32, Nanos)>,
}

impl<'t> Walk<'_, 't> {
    fn push(&mut self, tid: i32, start: Nanos, end: Nanos, kind: SegmentKind) {
        if start < end {
            let pid = self.ctx.pid_of(tid);
            self.segments.push(PathSegment {
                start_ns: start,
                end_ns: end,
                tid,
                pid,
                kind,
                files: Vec::new(),
                waker_tid: None,
                waker_process: None,
                waited_in: None,
            });
        }
    }

    /// A wait of `tid` from `start` to `end` that `waker`, a thread without scheduler data, ended.
    fn push_outside_wait(&mut self, tid: i32, start: Nanos, end: Nanos, waker: i32) {
        let pid = self.ctx.pid_of(waker);
        let process = self.ctx.processes.at(pid, end);
        let waker_process = WakerProcess {
            pid,
            comm: process.map(|p| p.name().to_owned()).unwrap_or_default(),
            in_scope: process.is_some_and(|p| p.in_scope),
        };
        self.push(tid, start, end, SegmentKind::WaitUntraced);
        if let Some(seg) = self.segments.last_mut().filter(|s| s.tid == tid && s.end_ns == end) {
            seg.waker_tid = Some(waker);
            seg.waker_process = Some(waker_process);
        }
    }

    fn interval(&self, row: u32) -> &SchedInterval {
        &self.ctx.trace.sched[row as usize]
    }

    /// The wakeup that ended sleep `iv` of `tid`, if one was seen.
    fn wakeup_ending(&self, tid: i32, iv: &SchedInterval, t: Nanos) -> Option<&'t Wakeup> {
        wakeup_ending(self.ctx, tid, iv, t)
    }

    /// Where the polling loop that the sleep `rows[k]` of `tid` ends began: the start of
    /// the earliest of the sleeps before it that no other thread ended (timers), each
    /// followed by at most [`POLL_CHECK_NS`] of running up to the next; `rows[k]`'s own
    /// start without such sleeps. Never before `floor`.
    fn polling_since(&self, tid: i32, rows: &[u32], k: usize, floor: Nanos) -> Nanos {
        let mut since = self.interval(rows[k]).start_ns;
        let mut i = k;
        while since > floor {
            let mut checking = 0;
            let mut j = i;
            while j > 0
                && matches!(self.interval(rows[j - 1]).state, ThreadState::Running | ThreadState::Runnable)
            {
                let iv = self.interval(rows[j - 1]);
                checking += iv.end_ns - iv.start_ns;
                j -= 1;
            }
            if j == 0 || j == i || checking > POLL_CHECK_NS {
                break;
            }
            let sleep = self.interval(rows[j - 1]);
            let timer_ended = || {
                self.wakeup_ending(tid, sleep, sleep.end_ns)
                    .and_then(|w| w.waker_tid)
                    .is_none_or(|waker| waker == tid)
            };
            if sleep.state != ThreadState::Sleeping
                || self.interval(rows[j]).start_ns - sleep.end_ns > WAKEUP_SLACK_NS
                || !timer_ended()
            {
                break;
            }
            since = sleep.start_ns;
            i = j - 1;
        }
        since.max(floor)
    }

    /// The thread of `pid` that was running at `t` (or ran last before it), with data before `t`.
    fn thread_of_at(&self, pid: i32, t: Nanos) -> Option<i32> {
        let groups = &self.ctx.sched_by_tid;
        (0..groups.len())
            .filter(|&g| self.ctx.pid_of(groups.key(g)) == pid)
            .filter_map(|g| {
                let rows = groups.rows(g);
                let k = rows.partition_point(|&r| self.interval(r).start_ns < t);
                let last_run =
                    rows[..k].iter().rev().find(|&&r| self.interval(r).state == ThreadState::Running)?;
                Some((self.interval(*last_run).end_ns.min(t), groups.key(g)))
            })
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(_, tid)| tid)
    }

    /// The thread that created `tid`: the process's main thread for a secondary thread,
    /// the parent process's thread running at `t` for a main thread.
    fn creator(&self, tid: i32, t: Nanos) -> Option<i32> {
        let pid = self.ctx.pid_of(tid);
        let parent_pid = if tid != pid {
            pid
        } else {
            self.ctx.processes.at(pid, t).filter(|p| p.start_ns.is_some())?.ppid?
        };
        self.thread_of_at(parent_pid, t).filter(|&c| c != tid)
    }

    /// One step back from `t` on thread `tid`: the part of the interval that holds `t`
    /// down to `floor`, or a jump to the thread that created `tid` or woke it.
    fn step(&mut self, floor: Nanos) {
        let (ctx, tid, t) = (self.ctx, self.tid, self.t);
        let rows = ctx.sched_by_tid.rows_of(tid);
        let k = rows.partition_point(|&r| self.interval(r).start_ns < t);
        if k == 0 {
            match self.creator(tid, t) {
                Some(creator) if self.jumps_at_t < MAX_JUMPS_AT_ONE_TIME => {
                    self.tid = creator;
                    self.jumps_at_t += 1;
                }
                _ => {
                    self.push(tid, floor, t, SegmentKind::Untraced);
                    self.t = floor;
                }
            }
            return;
        }
        let iv = self.interval(rows[k - 1]).clone();
        if iv.end_ns < t {
            let from = iv.end_ns.max(floor);
            self.push(tid, from, t, SegmentKind::Untraced);
            self.t = from;
            self.jumps_at_t = 0;
            return;
        }
        let start = iv.start_ns.max(floor);
        match iv.state {
            ThreadState::Running => self.push(tid, start, t, SegmentKind::Cpu),
            ThreadState::Runnable => self.push(tid, start, t, SegmentKind::CpuWait),
            ThreadState::IoWait => self.push_io_wait(rows, k - 1, start),
            ThreadState::Sleeping | ThreadState::Stopped => {
                if self.follow_waker(&iv, rows, k - 1, start, floor) {
                    return;
                }
            }
        }
        self.t = start;
        self.jumps_at_t = 0;
    }

    /// The I/O wait `rows[k]` of the current thread from `start` to `t`, with the files it was for.
    fn push_io_wait(&mut self, rows: &[u32], k: usize, start: Nanos) {
        let (tid, t) = (self.tid, self.t);
        let fill_rows = self.ctx.fills_by_tid.rows_of(tid);
        let mut buffer = std::mem::take(&mut self.buffer);
        wait_files(self.ctx, rows, k, fill_rows, &mut buffer);
        let files = buffer
            .iter()
            .zip(split(t - start, buffer.iter().map(|f| f.2)))
            .map(|(f, ns)| FileTime { file: f.1, ns })
            .collect();
        self.buffer = buffer;
        self.push(tid, start, t, SegmentKind::IoWait);
        if let Some(seg) = self.segments.last_mut() {
            seg.files = files;
        }
    }

    /// The sleep `iv` (`rows[k]`) of the current thread from `start` to `t`: jumps to the
    /// thread that woke it, whose history stands in for the sleep, or else records the
    /// sleep with what ended it. Returns whether the walk jumped.
    fn follow_waker(
        &mut self,
        iv: &SchedInterval,
        rows: &[u32],
        k: usize,
        start: Nanos,
        floor: Nanos,
    ) -> bool {
        let (tid, t) = (self.tid, self.t);
        let wakeup = self.wakeup_ending(tid, iv, t).map(|w| (w.t_ns, w.waker_tid));
        match wakeup {
            // The line that makes the walk cross threads and processes alike: the
            // waker's history stands in for the sleep.
            Some((wake_t, Some(waker)))
                if waker != tid && !self.ctx.sched_by_tid.rows_of(waker).is_empty() =>
            {
                let jump_t = wake_t.min(t).max(start);
                if self.jumps_at_t < MAX_JUMPS_AT_ONE_TIME || jump_t < t {
                    self.push(tid, jump_t, t, SegmentKind::Sleep);
                    self.jumps_at_t = if jump_t < t { 0 } else { self.jumps_at_t + 1 };
                    let since = if iv.state == ThreadState::Sleeping {
                        self.polling_since(tid, rows, k, floor)
                    } else {
                        start
                    };
                    self.sleepers.push((tid, since));
                    self.tid = waker;
                    self.t = jump_t;
                    return true;
                }
                self.push(tid, start, t, SegmentKind::NoWakeup);
            }
            Some((_, Some(waker))) if waker != tid => self.push_outside_wait(tid, start, t, waker),
            Some(_) => self.push(tid, start, t, SegmentKind::Sleep),
            None => self.push(tid, start, t, SegmentKind::NoWakeup),
        }
        false
    }
}

/// The wakeup that ended sleep `iv` of `tid` (at `t` or later), if one was seen.
pub(crate) fn wakeup_ending<'t>(ctx: &Ctx<'t>, tid: i32, iv: &SchedInterval, t: Nanos) -> Option<&'t Wakeup> {
    let wakeups = ctx.wakeups_by_tid.rows_of(tid);
    let bound = iv.end_ns.max(t) + WAKEUP_SLACK_NS;
    let w = wakeups.partition_point(|&r| ctx.trace.wakeups[r as usize].t_ns <= bound);
    w.checked_sub(1)
        .map(|i| &ctx.trace.wakeups[wakeups[i] as usize])
        .filter(|w| w.t_ns + WAKEUP_SLACK_NS >= iv.start_ns)
}

pub(crate) fn critical_path(
    ctx: &Ctx,
    ready: &ReadyInfo,
    origin: Nanos,
    warnings: &mut Vec<Warning>,
) -> Option<CriticalPath> {
    if ctx.trace.sched.is_empty() || ready.t_ns <= origin {
        return None;
    }
    let mut walk = Walk {
        ctx,
        segments: Vec::new(),
        buffer: WaitFiles::new(),
        tid: ready.tid,
        t: ready.t_ns,
        jumps_at_t: 0,
        sleepers: Vec::new(),
    };
    let mut steps: usize = 0;
    let step_limit = 4 * ctx.trace.sched.len() + 1000;
    loop {
        let floor = walk.sleepers.last().map_or(origin, |&(_, since)| since);
        if walk.t <= floor {
            match walk.sleepers.pop() {
                Some((sleeper, since)) => {
                    (walk.tid, walk.t) = (sleeper, since);
                    continue;
                }
                None => break,
            }
        }
        steps += 1;
        if steps > step_limit {
            warnings.push(Warning {
                code: WarningCode::PathIncomplete,
                count: 1,
                message: format!(
                    "the critical path walk stopped after {step_limit} steps at t = {} ns",
                    walk.t
                ),
            });
            walk.push(walk.tid, origin, walk.t, SegmentKind::Untraced);
            break;
        }
        walk.step(floor);
    }
    let mut segments = walk.segments;
    segments.reverse();
    let segments = merge(segments);
    let summary = summarize(ctx, &segments, ready, origin);
    Some(CriticalPath {
        from_ns: origin,
        to_ns: ready.t_ns,
        pid: ready.pid,
        tid: ready.tid,
        segments,
        summary,
    })
}

/// Joins consecutive segments of one thread and kind.
fn merge(segments: Vec<PathSegment>) -> Vec<PathSegment> {
    let mut out: Vec<PathSegment> = Vec::with_capacity(segments.len());
    for seg in segments {
        match out.last_mut() {
            Some(last)
                if last.tid == seg.tid
                    && last.kind == seg.kind
                    && last.waker_tid == seg.waker_tid
                    && last.waker_process == seg.waker_process
                    && last.end_ns == seg.start_ns =>
            {
                last.end_ns = seg.end_ns;
                last.files = add_file_times(std::mem::take(&mut last.files), &seg.files);
            }
            _ => out.push(seg),
        }
    }
    out
}

fn add_file_times(mut into: Vec<FileTime>, more: &[FileTime]) -> Vec<FileTime> {
    for f in more {
        match into.iter_mut().find(|x| x.file == f.file) {
            Some(x) => x.ns += f.ns,
            None => into.push(f.clone()),
        }
    }
    into.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.file.cmp(&b.file)));
    into
}

fn summarize(ctx: &Ctx, segments: &[PathSegment], ready: &ReadyInfo, origin: Nanos) -> PathSummary {
    let mut s = PathSummary { total_ns: ready.t_ns - origin, ..PathSummary::default() };
    let mut helpers: FxHashMap<i32, ProcessTime> = FxHashMap::default();
    let mut outside: Vec<OutsideWait> = Vec::new();
    for seg in segments {
        let ns = seg.end_ns - seg.start_ns;
        if let Some(process) = &seg.waker_process {
            match outside.iter_mut().find(|o| o.process.pid == process.pid) {
                Some(o) => {
                    o.ns += ns;
                    o.waits += 1;
                }
                None => outside.push(OutsideWait { process: process.clone(), ns, waits: 1 }),
            }
        }
        if seg.kind == SegmentKind::Untraced {
            s.untraced_ns += ns;
        } else if seg.pid != ready.pid {
            let comm =
                || ctx.processes.at(seg.pid, seg.start_ns).map(|p| p.name().to_owned()).unwrap_or_default();
            let helper = helpers.entry(seg.pid).or_insert_with(|| ProcessTime {
                pid: seg.pid,
                comm: comm(),
                ns: 0,
                cpu_ns: 0,
                io_wait_ns: 0,
            });
            helper.ns += ns;
            match seg.kind {
                SegmentKind::Cpu => helper.cpu_ns += ns,
                SegmentKind::IoWait => helper.io_wait_ns += ns,
                _ => {}
            }
        } else {
            match seg.kind {
                SegmentKind::Cpu => s.cpu_ns += ns,
                SegmentKind::CpuWait => s.cpu_wait_ns += ns,
                SegmentKind::IoWait => {
                    s.io_wait_ns += ns;
                    s.io_files = add_file_times(std::mem::take(&mut s.io_files), &seg.files);
                }
                SegmentKind::Sleep => s.sleep_ns += ns,
                SegmentKind::WaitUntraced => s.wait_untraced_ns += ns,
                SegmentKind::NoWakeup => s.no_wakeup_ns += ns,
                SegmentKind::Untraced => {}
            }
        }
    }
    outside.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.process.pid.cmp(&b.process.pid)));
    s.outside = outside;
    s.helpers = helpers.into_values().collect();
    s.helpers.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
    s
}
