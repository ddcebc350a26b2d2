//! The frame of the analysis: what was traced, when the command started, the
//! readiness point and the thread that reached it, and the process table with each
//! process's time and reads.

use coldstart_trace::{BlockOp, Nanos, Ready, ReadyReason, ThreadState};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{
    DiskAnalysis, FileUse, OtherActivity, OtherReader, ProcessInfo, ReadyInfo, StateTimes, ThreadInfo,
    TraceInfo, Warning, WarningCode,
};
use crate::context::Ctx;

/// Kernel threads and the recorder: they issue requests on behalf of others, or are not part of the start.
pub(crate) fn is_system_worker(comm: &str) -> bool {
    const PREFIXES: [&str; 11] = [
        "kworker",
        "jbd2",
        "ksoftirqd",
        "kswapd",
        "khugepaged",
        "kcompactd",
        "loop",
        "swapper",
        "kthreadd",
        "coldstart",
        "rcu_",
    ];
    comm.is_empty() || PREFIXES.iter().any(|p| comm.starts_with(p))
}

/// Processes listed by name in [`OtherActivity::readers`].
const OTHER_READERS_LISTED: usize = 5;

/// What processes outside the recording's scope did between `origin` and `end`: the
/// disk reads they issued (of files no recorded process read: a shared file read by
/// another process was read for the start too) and the CPU time the machine spent
/// beyond the recorded threads' running time.
pub(crate) fn others(
    ctx: &Ctx,
    disks: &[DiskAnalysis],
    file_uses: &[FileUse],
    origin: Nanos,
    end: Nanos,
) -> OtherActivity {
    let trace = ctx.trace;
    let recorded_files: FxHashSet<u32> = file_uses.iter().map(|u| u.file).collect();
    let comm_of: FxHashMap<i32, &str> = trace.block_ios.iter().map(|b| (b.pid, b.comm.as_str())).collect();
    let mut readers: FxHashMap<i32, OtherReader> = FxHashMap::default();
    let mut out = OtherActivity::default();
    for r in disks.iter().flat_map(|d| &d.requests).filter(|r| r.op == BlockOp::Read) {
        if !r.issue_ns.or(r.complete_ns).is_some_and(|t| (origin..=end).contains(&t)) {
            continue;
        }
        let pid = ctx.pid_of(r.pid);
        let process = ctx.processes.first(pid);
        if pid <= 0 || process.is_some_and(|p| p.in_scope) {
            continue;
        }
        let comm = process.map_or_else(|| comm_of.get(&r.pid).copied().unwrap_or(""), |p| p.name());
        if is_system_worker(comm) || r.file.is_some_and(|id| recorded_files.contains(&id)) {
            continue;
        }
        out.read_requests += 1;
        out.read_bytes = out.read_bytes.saturating_add(u64::from(r.bytes));
        let reader =
            readers.entry(pid).or_insert_with(|| OtherReader { pid, comm: comm.to_owned(), read_bytes: 0 });
        reader.read_bytes = reader.read_bytes.saturating_add(u64::from(r.bytes));
    }
    let mut readers: Vec<OtherReader> = readers.into_values().collect();
    readers.sort_by(|a, b| b.read_bytes.cmp(&a.read_bytes).then(a.pid.cmp(&b.pid)));
    readers.truncate(OTHER_READERS_LISTED);
    out.readers = readers;

    let cpus = trace.meta.cpu_count.max(1);
    let window = (end - origin).max(0);
    out.cpu_capacity_ns = window.saturating_mul(Nanos::from(cpus));
    if !trace.cpu_samples.is_empty() && window > 0 {
        let overlap = |from: Nanos, to: Nanos| (to.min(end) - from.max(origin)).max(0);
        let machine: f64 = trace
            .cpu_samples
            .iter()
            .map(|s| (s.user + s.system) * f64::from(cpus) * overlap(s.t_ns - s.dt_ns, s.t_ns) as f64)
            .sum();
        let mut in_scope = ctx.in_scope_test();
        let recorded: Nanos = trace
            .sched
            .iter()
            .filter(|s| s.state == ThreadState::Running && in_scope(s.tid))
            .map(|s| overlap(s.start_ns, s.end_ns))
            .fold(0, Nanos::saturating_add);
        out.cpu_ns = Some((machine as Nanos - recorded).max(0));
    }
    out
}

pub(crate) fn trace_info(ctx: &Ctx) -> TraceInfo {
    let m = &ctx.trace.meta;
    TraceInfo {
        tool: m.tool.clone(),
        source: m.source,
        command: m.command.clone(),
        scope: m.scope,
        root_pid: m.root_pid,
        host: m.host.clone(),
        kernel: m.kernel.clone(),
        cpu_model: m.cpu_model.clone(),
        cpu_count: m.cpu_count,
        mem_total_bytes: m.mem_total_bytes,
        page_size: ctx.page_size as u32,
        clock: m.clock.clone(),
        start_unix_ns: m.start_unix_ns,
        duration_ns: m.duration_ns,
        cache: m.cache,
        eviction: m.eviction.clone(),
        exit_code: m.exit_code,
        partial: m.partial,
        also: m.also.clone(),
    }
}

fn root<'t>(ctx: &Ctx<'t>) -> Option<&'t coldstart_trace::Process> {
    let pid = ctx.trace.meta.root_pid?;
    ctx.processes.first(pid)
}

/// When the traced command started: its fork, else t = 0.
pub(crate) fn origin(ctx: &Ctx) -> Nanos {
    root(ctx).and_then(|p| p.start_ns).unwrap_or(0).max(0)
}

/// The end of the recording: its duration, else the latest event.
pub(crate) fn trace_end(ctx: &Ctx) -> Nanos {
    let t = ctx.trace;
    if t.meta.duration_ns > 0 {
        return t.meta.duration_ns;
    }
    let latest = [
        t.page_fills.iter().map(|f| f.t_ns).max(),
        t.sched.iter().map(|s| s.end_ns).max(),
        t.block_ios.iter().filter_map(|b| b.complete_ns.or(b.issue_ns)).max(),
        t.marks.iter().map(|m| m.t_ns).max(),
    ];
    latest.into_iter().flatten().max().unwrap_or(0)
}

/// The readiness point (the recorded one, else the root's exit) and who reached it:
/// the process and thread the recorder named (a window's owner, the process that
/// marked), else, in traces that do not say, the marking process for a mark and the
/// tree's root otherwise.
pub(crate) fn ready(ctx: &Ctx, origin: Nanos, warnings: &mut Vec<Warning>) -> Option<ReadyInfo> {
    let recorded = ctx.trace.meta.ready.clone();
    let Some(ready) = recorded.or_else(|| {
        let t_ns = root(ctx)?.end_ns?;
        Some(Ready { t_ns, reason: ReadyReason::Exit, pid: None, tid: None })
    }) else {
        warnings.push(Warning {
            code: WarningCode::NoReady,
            count: 1,
            message:
                "the trace has no readiness point and the command's exit was not seen: figures run to the \
                      end of the trace and there is no critical path"
                    .to_owned(),
        });
        return None;
    };
    let Ready { t_ns, reason, pid: recorded_pid, tid: recorded_tid } = ready;
    let root_pid =
        ctx.trace.meta.root_pid.or_else(|| ctx.trace.processes.first().map(|p| p.pid)).unwrap_or(0);
    let pid = match (&reason, recorded_pid) {
        (_, Some(pid)) => pid,
        (ReadyReason::Mark(name), None) => {
            let mark = ctx
                .trace
                .marks
                .iter()
                .filter(|m| &m.name == name)
                .min_by_key(|m| ((m.t_ns - t_ns).abs(), m.t_ns));
            if mark.is_none() {
                warnings.push(Warning {
                    code: WarningCode::ReadyMarkMissing,
                    count: 1,
                    message: format!("the start ended at mark {name:?}, which the trace does not hold"),
                });
            }
            mark.and_then(|m| m.pid).unwrap_or(root_pid)
        }
        _ => root_pid,
    };
    Some(ReadyInfo {
        t_ns,
        reason,
        time_to_ready_ns: t_ns - origin,
        pid,
        tid: recorded_tid.unwrap_or_else(|| thread_reaching(ctx, pid, t_ns)),
    })
}

/// The thread of `pid` that ran last at or before `t`; the main thread when none ran.
fn thread_reaching(ctx: &Ctx, pid: i32, t: Nanos) -> i32 {
    let groups = &ctx.sched_by_tid;
    (0..groups.len())
        .filter(|&g| ctx.pid_of(groups.key(g)) == pid)
        .filter_map(|g| {
            let rows = groups.rows(g);
            let sched = &ctx.trace.sched;
            let k = rows.partition_point(|&r| sched[r as usize].start_ns < t);
            let last_run =
                rows[..k].iter().rev().find(|&&r| sched[r as usize].state == ThreadState::Running)?;
            Some((sched[*last_run as usize].end_ns.min(t), groups.key(g)))
        })
        .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
        .map_or(pid, |(_, tid)| tid)
}

/// Every process, with its threads' times and its reads; pids seen only in threads or
/// page fills get a row of their own. Times of a reused pid go to its latest process.
pub(crate) fn processes(ctx: &Ctx, threads: &[ThreadInfo], file_uses: &[FileUse]) -> Vec<ProcessInfo> {
    let mut rows: Vec<ProcessInfo> = ctx
        .trace
        .processes
        .iter()
        .map(|p| ProcessInfo {
            pid: p.pid,
            ppid: p.ppid,
            comm: p.name().to_owned(),
            exe: p.exe.clone(),
            argv: p.argv.clone(),
            start_ns: p.start_ns,
            end_ns: p.end_ns,
            exit_code: p.exit_code,
            in_scope: p.in_scope,
            threads: 0,
            time: StateTimes::default(),
            io_wait_attributed_ns: 0,
            files: 0,
            reads: 0,
            seeks: 0,
            pages: 0,
        })
        .collect();
    rows.sort_by_key(|p| (p.start_ns.unwrap_or(Nanos::MIN), p.pid));
    let mut latest: FxHashMap<i32, usize> = rows.iter().enumerate().map(|(i, p)| (p.pid, i)).collect();
    let mut row_of = |pid: i32, comm: &str, rows: &mut Vec<ProcessInfo>| -> usize {
        *latest.entry(pid).or_insert_with(|| {
            rows.push(ProcessInfo {
                pid,
                ppid: None,
                comm: comm.to_owned(),
                exe: None,
                argv: Vec::new(),
                start_ns: None,
                end_ns: None,
                exit_code: None,
                in_scope: ctx.pid_in_scope(pid),
                threads: 0,
                time: StateTimes::default(),
                io_wait_attributed_ns: 0,
                files: 0,
                reads: 0,
                seeks: 0,
                pages: 0,
            });
            rows.len() - 1
        })
    };
    for t in threads {
        let comm = if t.tid == t.pid { t.comm.as_str() } else { "" };
        let i = row_of(t.pid, comm, &mut rows);
        let p = &mut rows[i];
        if p.comm.is_empty() {
            p.comm = t.comm.clone();
        }
        p.threads += 1;
        p.time.running_ns += t.time.running_ns;
        p.time.runnable_ns += t.time.runnable_ns;
        p.time.io_wait_ns += t.time.io_wait_ns;
        p.time.sleeping_ns += t.time.sleeping_ns;
        p.time.stopped_ns += t.time.stopped_ns;
        p.io_wait_attributed_ns += t.io_wait_attributed_ns;
    }
    for u in file_uses {
        let i = row_of(u.pid, "", &mut rows);
        let p = &mut rows[i];
        p.files += 1;
        p.reads += u.reads;
        p.seeks += u.seeks;
        p.pages += u.pages;
    }
    rows.sort_by_key(|p| (p.start_ns.unwrap_or(Nanos::MIN), p.pid));
    name_after_exec(ctx, &mut rows);
    rows
}

/// A child still under one of its parent's names after it exec'd another program whose
/// exec the recorder saw only in part (no argument vector: a shell's subshell that ran
/// `dirname`) is named by its executable.
fn name_after_exec(ctx: &Ctx, rows: &mut [ProcessInfo]) {
    let file = |path: &str| path.rsplit('/').next().unwrap_or(path).to_owned();
    let mut names: FxHashMap<i32, Vec<String>> = FxHashMap::default();
    for p in rows.iter() {
        names.entry(p.pid).or_default().push(p.comm.clone());
    }
    for e in &ctx.trace.execs {
        names.entry(e.pid).or_default().push(file(&e.path));
    }
    for p in rows.iter_mut().filter(|p| p.argv.is_empty()) {
        let Some(exe) = p.exe.as_deref().map(file).filter(|f| !f.is_empty()) else { continue };
        let parent = p.ppid.and_then(|pp| names.get(&pp));
        if parent.is_some_and(|n| n.contains(&p.comm) && !n.contains(&exe)) && exe != p.comm {
            p.comm = exe;
        }
    }
}
