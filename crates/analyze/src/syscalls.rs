//! System calls of a trace (format 3): each call with the path it named or acted on
//! and that path's filesystem type, filtered for `coldstart syscalls`; totals per call
//! (like `strace -c`) and per directory; and the call a thread was in at a moment,
//! which tells what a blocked thread waited in.

use std::collections::HashMap;

use coldstart_trace::{Mount, Nanos, Syscall, ThreadState, Trace};

use crate::analysis::{CriticalPath, SegmentKind, SyscallWait, WaitedIn};
use crate::offcpu::{OffCpuIndex, area_of};

/// One call, ready to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyscallLine<'a> {
    pub call: &'a Syscall,
    /// The path the call named or acted on (its file's, else its own).
    pub path: Option<&'a str>,
}

impl SyscallLine<'_> {
    /// Time in the call, up to `end` for a call that had not returned.
    pub fn duration_ns(&self, end: Nanos) -> Nanos {
        self.call.exit_ns.unwrap_or(end).max(self.call.enter_ns) - self.call.enter_ns
    }
}

/// Which calls to keep; empty fields keep everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyscallFilter {
    /// The process or thread.
    pub pids: Vec<i32>,
    pub names: Vec<String>,
    /// Paths under this prefix (a directory or a path's beginning).
    pub path_prefix: Option<String>,
    pub min_duration_ns: Nanos,
}

impl SyscallFilter {
    fn keeps(&self, line: &SyscallLine<'_>, end: Nanos) -> bool {
        (self.pids.is_empty() || self.pids.iter().any(|&p| p == line.call.pid || p == line.call.tid))
            && (self.names.is_empty() || self.names.contains(&line.call.name))
            && self
                .path_prefix
                .as_deref()
                .is_none_or(|prefix| line.path.is_some_and(|p| p.starts_with(prefix)))
            && line.duration_ns(end) >= self.min_duration_ns
    }
}

/// Every call of the trace with its path, in enter order, that `filter` keeps.
pub fn lines<'a>(trace: &'a Trace, filter: &SyscallFilter) -> Vec<SyscallLine<'a>> {
    let file_paths: HashMap<u32, &str> =
        trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect();
    let end = trace.meta.duration_ns;
    let mut out: Vec<SyscallLine<'a>> = trace
        .syscalls
        .iter()
        .map(|call| SyscallLine {
            call,
            path: call.path.as_deref().or_else(|| call.file_id.and_then(|id| file_paths.get(&id).copied())),
        })
        .filter(|l| filter.keeps(l, end))
        .collect();
    out.sort_by_key(|l| (l.call.enter_ns, l.call.tid));
    out
}

/// Totals of one call, like a line of `strace -c`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallTotals {
    pub name: String,
    pub calls: u64,
    pub errors: u64,
    pub total_ns: Nanos,
    pub max_ns: Nanos,
}

/// Calls that named paths under one directory, and their time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DirTotals {
    pub dir: String,
    pub calls: u64,
    pub total_ns: Nanos,
    /// The filesystem type of the directory, from the trace's mounts.
    pub fstype: Option<String>,
}

/// `strace -c` and per-directory totals of some calls.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SyscallSummary {
    /// By total time, longest first.
    pub calls: Vec<CallTotals>,
    /// The deepest directories that hold a share of the time, longest first.
    pub dirs: Vec<DirTotals>,
    pub total_ns: Nanos,
}

/// A directory is listed when its calls took at least this share of all path calls' time…
const DIR_MIN_SHARE: f64 = 0.05;
/// …unless one of its subdirectories holds at least this share of it (that one is listed).
const DIR_CHILD_SHARE: f64 = 0.9;
const DIR_MAX_ROWS: usize = 15;

/// The parent directory of a path (`/` for a file at the root; `None` for a relative name).
fn parent(path: &str) -> Option<&str> {
    let at = path.rfind('/')?;
    Some(if at == 0 { "/" } else { &path[..at] })
}

/// Totals per call and per directory of `lines`.
pub fn summary(lines: &[SyscallLine<'_>], mounts: &[Mount], end: Nanos) -> SyscallSummary {
    let mut by_name: HashMap<&str, CallTotals> = HashMap::new();
    let mut by_dir: HashMap<&str, (u64, Nanos)> = HashMap::new();
    let mut total_ns = 0;
    let mut path_ns = 0;
    for l in lines {
        let d = l.duration_ns(end);
        total_ns += d;
        let t = by_name
            .entry(&l.call.name)
            .or_insert_with(|| CallTotals { name: l.call.name.clone(), ..CallTotals::default() });
        t.calls += 1;
        t.errors += u64::from(l.call.errno().is_some());
        t.total_ns += d;
        t.max_ns = t.max_ns.max(d);
        let mut dir = l.path.and_then(parent);
        if dir.is_some() {
            path_ns += d;
        }
        while let Some(x) = dir {
            let e = by_dir.entry(x).or_default();
            e.0 += 1;
            e.1 += d;
            dir = if x == "/" { None } else { parent(x) };
        }
    }
    let mut calls: Vec<CallTotals> = by_name.into_values().collect();
    calls.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.name.cmp(&b.name)));
    let mut dirs: Vec<DirTotals> = by_dir
        .iter()
        .filter(|(dir, (_, ns))| {
            let big = *ns as f64 >= DIR_MIN_SHARE * path_ns as f64 && *ns > 0;
            let child_holds_it = by_dir.iter().any(|(child, (_, child_ns))| {
                parent(child) == Some(dir) && *child_ns as f64 >= DIR_CHILD_SHARE * *ns as f64
            });
            big && !child_holds_it
        })
        .map(|(dir, (count, ns))| DirTotals {
            dir: (*dir).to_owned(),
            calls: *count,
            total_ns: *ns,
            fstype: mount_of(mounts, dir).map(|m| m.fstype.clone()),
        })
        .collect();
    dirs.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then_with(|| a.dir.cmp(&b.dir)));
    dirs.truncate(DIR_MAX_ROWS);
    SyscallSummary { calls, dirs, total_ns }
}

/// The mount holding `path`: the one with the longest mount point that is a prefix of it.
pub fn mount_of<'a>(mounts: &'a [Mount], path: &str) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| {
            let point = m.point.trim_end_matches('/');
            point.is_empty()
                || path == point
                || path.strip_prefix(point).is_some_and(|rest| rest.starts_with('/'))
        })
        .max_by_key(|m| m.point.trim_end_matches('/').len())
}

/// A filesystem type's family: the FUSE types (`fuse`, `fuse.sshfs`, `fuseblk`) are one, NFS's
/// versions one, SMB's names one; the kernel's frames say the family, the mount table the type.
fn family(fstype: &str) -> &str {
    match fstype {
        t if t == "fuse" || t == "fuseblk" || t.starts_with("fuse.") => "fuse",
        "nfs" | "nfs4" => "nfs",
        "cifs" | "smb3" | "smbfs" => "cifs",
        t => t,
    }
}

/// The FUSE and network mounts of a trace and which processes used files on them, to say
/// which mount a wait named only by its kernel stack (no system call row, no path) was on.
#[derive(Debug, Default)]
pub struct RemoteMounts<'a> {
    mounts: Vec<&'a Mount>,
    pid_of_tid: HashMap<i32, i32>,
    /// Files each process read or was given pages of, per mount (by index in `mounts`).
    files_used: HashMap<(i32, usize), u64>,
    /// The mount of each file on one of `mounts`.
    mount_of_file: HashMap<u32, usize>,
}

impl<'a> RemoteMounts<'a> {
    pub fn new(trace: &'a Trace) -> RemoteMounts<'a> {
        let mounts: Vec<&Mount> = trace.mounts.iter().filter(|m| m.is_remote_or_fuse()).collect();
        let mut out = RemoteMounts { mounts, ..RemoteMounts::default() };
        if out.mounts.is_empty() {
            return out;
        }
        out.pid_of_tid = trace.threads.iter().map(|t| (t.tid, t.pid)).collect();
        out.mount_of_file = trace
            .files
            .iter()
            .filter_map(|f| Some((f.id, out.mounts.iter().position(|m| m.dev == f.dev)?)))
            .collect();
        let mut seen = std::collections::HashSet::new();
        let pairs = trace.page_fills.iter().map(|f| (f.pid, f.file_id));
        for (pid, file) in pairs.chain(trace.page_accesses.iter().map(|a| (a.pid, a.file_id))) {
            if let Some(&m) = out.mount_of_file.get(&file)
                && seen.insert((pid, file))
            {
                *out.files_used.entry((pid, m)).or_default() += 1;
            }
        }
        out
    }

    /// The mount a wait of `tid` in a `filesystem` request was on: the mount of that family
    /// whose files its process used most, else the trace's only mount of that family.
    pub fn of_wait(&self, tid: i32, filesystem: &str) -> Option<&'a Mount> {
        let pid = self.pid_of_tid.get(&tid).copied().unwrap_or(tid);
        let same = |m: &&&Mount| family(&m.fstype) == family(filesystem);
        let used = self
            .mounts
            .iter()
            .enumerate()
            .filter(|(_, m)| same(m))
            .filter_map(|(i, m)| Some((self.files_used.get(&(pid, i)).copied()?, *m)))
            .max_by_key(|(n, m)| (*n, std::cmp::Reverse(m.point.len())));
        if let Some((_, m)) = used {
            return Some(m);
        }
        let mut candidates = self.mounts.iter().filter(same);
        match (candidates.next(), candidates.next()) {
            (Some(m), None) => Some(*m),
            _ => None,
        }
    }

    /// The mount of a file, when it is a FUSE or network one: a FUSE read waits on the page
    /// cache with no FUSE frame on its stack (the read path tail-calls the page cache's), and
    /// the page it waited for says where it was.
    pub fn of_file(&self, file: u32) -> Option<&'a Mount> {
        self.mount_of_file.get(&file).map(|&m| self.mounts[m])
    }
}

/// The calls of each thread in enter order, to find the one a thread was in at a moment.
#[derive(Debug, Default)]
pub struct CallIndex<'a> {
    by_tid: HashMap<i32, Vec<SyscallLine<'a>>>,
    end: Nanos,
}

impl<'a> CallIndex<'a> {
    pub fn new(trace: &'a Trace) -> CallIndex<'a> {
        let mut by_tid: HashMap<i32, Vec<SyscallLine<'a>>> = HashMap::new();
        for l in lines(trace, &SyscallFilter::default()) {
            by_tid.entry(l.call.tid).or_default().push(l);
        }
        CallIndex { by_tid, end: trace.meta.duration_ns }
    }

    pub fn is_empty(&self) -> bool {
        self.by_tid.is_empty()
    }

    /// The call `tid` was in over most of `start..end` (an off-CPU interval): the
    /// last call entered before the middle of the interval that had not returned by then.
    pub fn during(&self, tid: i32, start: Nanos, end: Nanos) -> Option<&SyscallLine<'a>> {
        let calls = self.by_tid.get(&tid)?;
        let middle = start + (end - start) / 2;
        let i = calls.partition_point(|l| l.call.enter_ns <= middle);
        let l = calls.get(i.checked_sub(1)?)?;
        (l.call.exit_ns.unwrap_or(self.end) >= middle).then_some(l)
    }
}

/// A call, by its thread and enter time.
type CallKey = (i32, Nanos);

/// What the call a thread was in over `start..end` named, and which call it was (by its
/// enter time; a sleep named from its stack alone, by the sleep's start), with the kernel
/// function its off-CPU stack names.
fn waited_in_call(
    index: &CallIndex<'_>,
    off_cpu: &OffCpuIndex,
    mounts: &[Mount],
    remote: &RemoteMounts<'_>,
    tid: i32,
    start: Nanos,
    end: Nanos,
) -> Option<(WaitedIn, CallKey)> {
    let kernel = off_cpu.during(tid, start, end);
    match index.during(tid, start, end) {
        Some(line) => {
            let w = WaitedIn {
                syscall: line.call.name.clone(),
                dir: line.path.map(|p| parent(p).unwrap_or(p).to_owned()),
                fstype: line.path.and_then(|p| mount_of(mounts, p)).map(|m| m.fstype.clone()),
                kernel: kernel.map(|(k, _)| k.function.clone()),
                area: kernel.and_then(|(k, _)| area_of(&k.function)).map(str::to_owned),
                from_stack: false,
            };
            Some((w, (line.call.tid, line.call.enter_ns)))
        }
        None => {
            let (k, began) = kernel?;
            // A request to a daemon or server: its mount, else the family the frames name.
            let mount = k.filesystem.as_deref().and_then(|fs| remote.of_wait(tid, fs));
            let w = WaitedIn {
                syscall: k.syscall.clone().unwrap_or_default(),
                dir: mount.map(|m| m.point.clone()),
                fstype: mount.map(|m| m.fstype.clone()).or_else(|| k.filesystem.clone()),
                kernel: Some(k.function.clone()),
                area: area_of(&k.function).map(str::to_owned),
                from_stack: true,
            };
            Some((w, (tid, began)))
        }
    }
}

#[cfg(test)]
fn waited_in(
    index: &CallIndex<'_>,
    mounts: &[Mount],
    tid: i32,
    start: Nanos,
    end: Nanos,
) -> Option<WaitedIn> {
    waited_in_call(index, &OffCpuIndex::default(), mounts, &RemoteMounts::default(), tid, start, end)
        .map(|(w, _)| w)
}

/// Adds `ns` of a wait to the totals of its call's kind; a call that waited several times
/// counts once.
fn add_wait(
    out: &mut Vec<SyscallWait>,
    seen: &mut std::collections::HashSet<CallKey>,
    w: WaitedIn,
    call: CallKey,
    ns: Nanos,
) {
    let new = u64::from(seen.insert(call));
    match out.iter_mut().find(|x| x.waited_in == w) {
        Some(x) => {
            x.ns += ns;
            x.calls += new;
        }
        None => out.push(SyscallWait { waited_in: w, ns, calls: new }),
    }
}

/// True when `path` is `dir` or lies under it.
pub(crate) fn under(path: &str, dir: &str) -> bool {
    dir == "/" || path == dir || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

/// The directories that hold a share of the time of `(dir, ns)` entries, by the rule of
/// [`summary`]: at least `DIR_MIN_SHARE` of it, no subdirectory with `DIR_CHILD_SHARE` of theirs.
fn notable_dirs(entries: &[(&str, Nanos)]) -> Vec<String> {
    let mut by_dir: HashMap<&str, Nanos> = HashMap::new();
    let mut total = 0;
    for &(dir, ns) in entries {
        total += ns;
        let mut at = Some(dir);
        while let Some(x) = at {
            *by_dir.entry(x).or_default() += ns;
            at = if x == "/" { None } else { parent(x) };
        }
    }
    by_dir
        .iter()
        .filter(|(dir, ns)| {
            **ns > 0
                && **ns as f64 >= DIR_MIN_SHARE * total as f64
                && !by_dir.iter().any(|(child, child_ns)| {
                    parent(child) == Some(**dir) && *child_ns as f64 >= DIR_CHILD_SHARE * **ns as f64
                })
        })
        .map(|(dir, _)| (*dir).to_owned())
        .collect()
}

/// Waits moved up to the deepest directory that holds a share of their time (a plug-in's
/// own directory into the plug-ins directory), merged, most time first.
fn rolled_up(waits: Vec<SyscallWait>) -> Vec<SyscallWait> {
    let entries: Vec<(&str, Nanos)> =
        waits.iter().filter_map(|w| Some((w.waited_in.dir.as_deref()?, w.ns))).collect();
    let notable = notable_dirs(&entries);
    let mut out: Vec<SyscallWait> = Vec::new();
    for mut w in waits {
        let to = w
            .waited_in
            .dir
            .as_deref()
            .and_then(|d| notable.iter().filter(|n| under(d, n)).max_by_key(|n| n.len()).cloned());
        if to.is_some() {
            w.waited_in.dir = to;
        }
        match out.iter_mut().find(|x| x.waited_in == w.waited_in) {
            Some(x) => {
                x.ns += w.ns;
                x.calls += w.calls;
            }
            None => out.push(w),
        }
    }
    sorted(out)
}

fn sorted(mut waits: Vec<SyscallWait>) -> Vec<SyscallWait> {
    waits.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| a.waited_in.syscall.cmp(&b.waited_in.syscall))
            .then(a.waited_in.dir.cmp(&b.waited_in.dir))
    });
    waits
}

/// Off-CPU time (asleep, I/O wait) of the threads `in_scope` accepts within `from..to`,
/// by the call each interval was in and the kernel function it slept in.
pub(crate) fn syscall_waits(
    trace: &Trace,
    index: &CallIndex<'_>,
    off_cpu: &OffCpuIndex,
    mut in_scope: impl FnMut(i32) -> bool,
    from: Nanos,
    to: Nanos,
) -> Vec<SyscallWait> {
    let mut out = Vec::new();
    let mut seen = std::collections::HashSet::new();
    if index.is_empty() && off_cpu.is_empty() {
        return out;
    }
    let remote = RemoteMounts::new(trace);
    for s in &trace.sched {
        if !matches!(s.state, ThreadState::Sleeping | ThreadState::IoWait) {
            continue;
        }
        let (start, end) = (s.start_ns.max(from), s.end_ns.min(to));
        if start >= end || !in_scope(s.tid) {
            continue;
        }
        if let Some((w, call)) = waited_in_call(index, off_cpu, &trace.mounts, &remote, s.tid, start, end) {
            add_wait(&mut out, &mut seen, w, call, end - start);
        }
    }
    rolled_up(out)
}

/// Names the call (and kernel function) each wait and sleep of the critical path was in,
/// and sums them.
pub(crate) fn annotate(
    path: &mut CriticalPath,
    index: &CallIndex<'_>,
    off_cpu: &OffCpuIndex,
    mounts: &[Mount],
    remote: &RemoteMounts<'_>,
) {
    if index.is_empty() && off_cpu.is_empty() {
        return;
    }
    let mut sums = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for seg in &mut path.segments {
        if matches!(seg.kind, SegmentKind::Cpu | SegmentKind::CpuWait | SegmentKind::Untraced) {
            continue;
        }
        if let Some((mut w, call)) =
            waited_in_call(index, off_cpu, mounts, remote, seg.tid, seg.start_ns, seg.end_ns)
        {
            if let Some(m) =
                seg.files.first().and_then(|f| remote.of_file(f.file)).filter(|_| w.fstype.is_none())
            {
                w.dir = Some(m.point.clone());
                w.fstype = Some(m.fstype.clone());
            }
            add_wait(&mut sums, &mut seen, w.clone(), call, seg.end_ns - seg.start_ns);
            seg.waited_in = Some(w);
        }
    }
    path.summary.in_syscalls = rolled_up(sums);
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_trace::{Dev, File};

    fn call(tid: i32, enter: Nanos, exit: Nanos, name: &str, path: &str) -> Syscall {
        Syscall {
            tid,
            pid: tid,
            enter_ns: enter,
            exit_ns: Some(exit),
            name: name.into(),
            result: Some(if path.ends_with("missing") { -2 } else { 0 }),
            path: Some(path.into()),
            ..Syscall::default()
        }
    }

    fn trace() -> Trace {
        let mut t = Trace::default();
        t.meta.duration_ns = 1_000;
        t.mounts = vec![
            Mount { dev: Dev::default(), point: "/".into(), fstype: "ext4".into() },
            Mount { dev: Dev::default(), point: "/opt/app/plug-ins".into(), fstype: "fuse".into() },
        ];
        t.files = vec![File { id: 0, path: Some("/usr/lib/libc.so.6".into()), ..File::default() }];
        t.syscalls = vec![
            call(1, 0, 10, "openat", "/usr/lib/libx.so"),
            call(1, 10, 110, "statx", "/opt/app/plug-ins/a/one"),
            call(1, 110, 210, "statx", "/opt/app/plug-ins/a/missing"),
            call(1, 210, 300, "statx", "/opt/app/plug-ins/b/two"),
            Syscall {
                tid: 1,
                pid: 1,
                enter_ns: 300,
                exit_ns: Some(305),
                name: "read".into(),
                file_id: Some(0),
                fd: Some(3),
                result: Some(10),
                ..Syscall::default()
            },
        ];
        t
    }

    #[test]
    fn totals_per_call_and_the_deepest_directories_that_hold_the_time() {
        let t = trace();
        let all = lines(&t, &SyscallFilter::default());
        assert_eq!(all[4].path, Some("/usr/lib/libc.so.6"));
        let s = summary(&all, &t.mounts, 1_000);
        assert_eq!(s.total_ns, 305);
        assert_eq!(
            s.calls[0],
            CallTotals { name: "statx".into(), calls: 3, errors: 1, total_ns: 290, max_ns: 100 }
        );
        let dirs: Vec<(&str, u64, Nanos, Option<&str>)> =
            s.dirs.iter().map(|d| (d.dir.as_str(), d.calls, d.total_ns, d.fstype.as_deref())).collect();
        assert_eq!(dirs[0], ("/opt/app/plug-ins", 3, 290, Some("fuse")));
        assert!(dirs.contains(&("/opt/app/plug-ins/a", 2, 200, Some("fuse"))));
        assert!(!dirs.iter().any(|d| d.0 == "/opt/app" || d.0 == "/opt" || d.0 == "/"), "{dirs:?}");
    }

    #[test]
    fn waits_in_many_small_directories_roll_up_to_the_one_that_holds_them() {
        let wait = |dir: String, ns| SyscallWait {
            waited_in: WaitedIn {
                syscall: "statx".into(),
                dir: Some(dir),
                fstype: Some("fuse".into()),
                ..WaitedIn::default()
            },
            ns,
            calls: 1,
        };
        let mut waits: Vec<SyscallWait> =
            (0..30).map(|i| wait(format!("/opt/app/plug-ins/p{i}"), 10)).collect();
        waits.push(wait("/usr/lib".into(), 100));
        let rolled = rolled_up(waits);
        let shown: Vec<(Option<&str>, Nanos, u64)> =
            rolled.iter().map(|w| (w.waited_in.dir.as_deref(), w.ns, w.calls)).collect();
        assert_eq!(shown, vec![(Some("/opt/app/plug-ins"), 300, 30), (Some("/usr/lib"), 100, 1)]);
    }

    #[test]
    fn filters_and_the_call_a_thread_was_in() {
        let t = trace();
        let f = SyscallFilter {
            path_prefix: Some("/opt/app".into()),
            min_duration_ns: 95,
            ..SyscallFilter::default()
        };
        assert_eq!(lines(&t, &f).len(), 2);
        let f = SyscallFilter { names: vec!["read".into()], pids: vec![1], ..SyscallFilter::default() };
        assert_eq!(lines(&t, &f).len(), 1);
        let index = CallIndex::new(&t);
        let during = waited_in(&index, &t.mounts, 1, 120, 200).map(|w| w.to_string());
        assert_eq!(during.as_deref(), Some("statx under /opt/app/plug-ins/a (fuse)"));
        assert!(index.during(2, 120, 200).is_none());
        assert_eq!(index.during(1, 306, 400), None);
    }
}
