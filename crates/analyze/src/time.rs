//! Where each thread's time went (running, waiting for a CPU, I/O wait, sleeping),
//! which files its I/O waits were for, and the wall-clock breakdown of the start.

use coldstart_trace::{Nanos, SchedInterval, ThreadState};

use crate::analysis::{FileUse, StartBreakdown, StateTimes, ThreadInfo};
use crate::context::Ctx;

/// Pages per (pid, file) that a thread added to the cache around one I/O wait.
pub(crate) type WaitFiles = Vec<(i32, u32, u64)>;

/// Fills `out` with the files behind the I/O wait `sched[rows[k]]` of one thread: the
/// pages that thread added to the cache since it last stopped waiting or sleeping (the
/// running and runnable intervals that led into the wait: a page enters the cache before
/// its reader blocks on it, and a preemption can fall in between) to the end of the
/// wait. Sorted by pages, most first, then file.
pub(crate) fn wait_files(ctx: &Ctx, sched_rows: &[u32], k: usize, fill_rows: &[u32], out: &mut WaitFiles) {
    out.clear();
    let sched = &ctx.trace.sched;
    let fills = &ctx.trace.page_fills;
    let wait = &sched[sched_rows[k] as usize];
    let mut from = wait.start_ns;
    for j in (0..k).rev() {
        let prev = &sched[sched_rows[j] as usize];
        if !matches!(prev.state, ThreadState::Running | ThreadState::Runnable) || prev.end_ns > from {
            break;
        }
        from = prev.start_ns;
    }
    let first = fill_rows.partition_point(|&r| fills[r as usize].t_ns < from);
    for &r in &fill_rows[first..] {
        let fill = &fills[r as usize];
        if fill.t_ns > wait.end_ns {
            break;
        }
        match out.iter_mut().find(|(pid, file, _)| *pid == fill.pid && *file == fill.file_id) {
            Some(entry) => entry.2 = entry.2.saturating_add(u64::from(fill.pages)),
            None => out.push((fill.pid, fill.file_id, u64::from(fill.pages))),
        }
    }
    out.sort_unstable_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)).then(a.0.cmp(&b.0)));
}

/// Splits `ns` in proportion to `weights`; the rounding remainder goes to the first.
pub(crate) fn split(ns: Nanos, weights: impl Iterator<Item = u64> + Clone) -> impl Iterator<Item = Nanos> {
    let total: u128 = weights.clone().map(u128::from).sum::<u128>().max(1);
    let shares = weights.map(move |w| (ns.max(0) as u128 * u128::from(w) / total) as Nanos);
    let given: Nanos = shares.clone().sum();
    shares.enumerate().map(move |(i, s)| if i == 0 { s + (ns.max(0) - given) } else { s })
}

fn add_state(times: &mut StateTimes, state: ThreadState, ns: Nanos) {
    let slot = match state {
        ThreadState::Running => &mut times.running_ns,
        ThreadState::Runnable => &mut times.runnable_ns,
        ThreadState::IoWait => &mut times.io_wait_ns,
        ThreadState::Sleeping => &mut times.sleeping_ns,
        ThreadState::Stopped => &mut times.stopped_ns,
    };
    *slot = slot.saturating_add(ns);
}

/// Scheduler data that does not tile a thread's time.
#[derive(Default)]
pub(crate) struct SchedAnomalies {
    pub gaps: u64,
    pub gap_ns: Nanos,
    pub overlaps: u64,
    pub inverted: u64,
}

/// No file: see [`ThreadTimes::wait_top_file`].
pub(crate) const NO_FILE: u32 = u32::MAX;

pub(crate) struct ThreadTimes {
    pub threads: Vec<ThreadInfo>,
    pub anomalies: SchedAnomalies,
    /// For each row of `sched`: the file with most pages behind that I/O wait, or
    /// [`NO_FILE`] (not an I/O wait, or no pages seen).
    pub wait_top_file: Vec<u32>,
}

/// Per-thread state times, and every I/O wait attributed to files (added to `file_uses`,
/// which is in the order of `ctx.fills_by_stream`).
pub(crate) fn thread_times(ctx: &Ctx, file_uses: &mut [FileUse]) -> ThreadTimes {
    let trace = ctx.trace;
    let sched = &trace.sched;
    let mut anomalies = SchedAnomalies::default();
    let mut threads = Vec::new();
    let mut wait_top_file = vec![NO_FILE; sched.len()];
    let mut files = WaitFiles::new();
    let comm_of_pid: rustc_hash::FxHashMap<i32, &str> =
        trace.processes.iter().map(|p| (p.pid, p.name())).collect();
    let mut thread_rows = trace.threads.iter().collect::<Vec<_>>();
    thread_rows.sort_by_key(|t| t.tid);
    for tid in ctx.all_tids() {
        let row = thread_rows.binary_search_by_key(&tid, |t| t.tid).ok().map(|i| thread_rows[i]);
        let pid = row.map_or_else(|| ctx.pid_of(tid), |t| t.pid);
        // A main thread is named as its process, whose name is completed where the kernel cut it.
        let process_name = comm_of_pid.get(&pid).copied();
        let comm = match (row, process_name) {
            (Some(t), Some(name)) if t.tid == t.pid && name.starts_with(t.comm.as_str()) => name.to_owned(),
            (Some(t), _) => t.comm.clone(),
            (None, name) => name.map(str::to_owned).unwrap_or_default(),
        };
        let sched_rows = ctx.sched_by_tid.rows_of(tid);
        let fill_rows = ctx.fills_by_tid.rows_of(tid);
        let mut time = StateTimes::default();
        let mut attributed: Nanos = 0;
        let mut prev: Option<&SchedInterval> = None;
        for (k, &r) in sched_rows.iter().enumerate() {
            let interval = &sched[r as usize];
            if interval.end_ns < interval.start_ns {
                anomalies.inverted += 1;
                continue;
            }
            if let Some(p) = prev {
                if interval.start_ns < p.end_ns {
                    anomalies.overlaps += 1;
                } else if interval.start_ns.saturating_sub(p.end_ns) > ctx.config.sched_gap_ns {
                    anomalies.gaps += 1;
                    anomalies.gap_ns =
                        anomalies.gap_ns.saturating_add(interval.start_ns.saturating_sub(p.end_ns));
                }
            }
            prev = Some(interval);
            let ns = interval.end_ns.saturating_sub(interval.start_ns);
            add_state(&mut time, interval.state, ns);
            if interval.state == ThreadState::IoWait && !fill_rows.is_empty() {
                wait_files(ctx, sched_rows, k, fill_rows, &mut files);
                if let Some(&(_, top, _)) = files.first() {
                    wait_top_file[r as usize] = top;
                }
                for (&(fill_pid, file, _), share) in files.iter().zip(split(ns, files.iter().map(|f| f.2))) {
                    if let Some(g) = ctx.fills_by_stream.find((fill_pid, file)) {
                        file_uses[g].io_wait_ns = file_uses[g].io_wait_ns.saturating_add(share);
                    }
                    attributed = attributed.saturating_add(share);
                }
            }
        }
        let (start_ns, end_ns) = row.map_or((None, None), |t| (t.start_ns, t.end_ns));
        threads.push(ThreadInfo {
            tid,
            pid,
            comm,
            start_ns,
            end_ns,
            time,
            io_wait_attributed_ns: attributed,
        });
    }
    ThreadTimes { threads, anomalies, wait_top_file }
}

/// Wall-clock breakdown of `from..to` over the in-scope threads' scheduler intervals.
pub(crate) fn start_breakdown(ctx: &Ctx, from: Nanos, to: Nanos) -> StartBreakdown {
    const RUN: usize = 0;
    const IO: usize = 1;
    const CPU_WAIT: usize = 2;
    let mut out = StartBreakdown {
        from_ns: from,
        to_ns: to,
        has_sched: !ctx.trace.sched.is_empty(),
        ..Default::default()
    };
    let mut events: Vec<(Nanos, u8, i8)> = Vec::new();
    let mut in_scope = ctx.in_scope_test();
    for s in &ctx.trace.sched {
        let kind = match s.state {
            ThreadState::Running => RUN,
            ThreadState::IoWait => IO,
            ThreadState::Runnable => CPU_WAIT,
            _ => continue,
        };
        let (start, end) = (s.start_ns.max(from), s.end_ns.min(to));
        if start < end && in_scope(s.tid) {
            events.push((start, kind as u8, 1));
            events.push((end, kind as u8, -1));
        }
    }
    events.sort_unstable_by_key(|e| e.0);
    let mut active = [0i64; 3];
    let mut t = from;
    let mut account = |active: &[i64; 3], until: Nanos, t: Nanos| {
        let ns = until - t;
        if active[RUN] > 0 {
            out.cpu_ns = out.cpu_ns.saturating_add(ns);
        } else if active[IO] > 0 {
            out.io_wait_ns = out.io_wait_ns.saturating_add(ns);
        } else if active[CPU_WAIT] > 0 {
            out.cpu_wait_ns = out.cpu_wait_ns.saturating_add(ns);
        } else {
            out.idle_ns = out.idle_ns.saturating_add(ns);
        }
    };
    for &(at, kind, delta) in &events {
        if at > t {
            account(&active, at, t);
            t = at;
        }
        active[kind as usize] += i64::from(delta);
    }
    if to > t {
        account(&active, to, t);
    }
    out
}
