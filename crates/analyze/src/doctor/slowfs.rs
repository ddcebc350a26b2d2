//! Metadata system calls on a slow filesystem: stats, opens, accesses, readlinks and
//! directory reads of paths on FUSE or a network filesystem, each a round trip to a
//! daemon or a server (GIMP scanning its plug-ins over NFS). The gain is the time the
//! critical path spent in them (or, without a path, their wall-clock time), which a
//! local copy or attribute caching would all but remove.
//!
//! With the system calls recorded (`record --syscalls`) the calls and their paths say it;
//! without them, the off-CPU kernel stacks do: a sleep in `fuse_simple_request`,
//! `rpc_wait_bit_killable` under `nfs4_*`, `p9_client_rpc`, … is a request to the daemon or
//! server of the mount the process used (`WaitedIn` names it, `syscalls::RemoteMounts`), with
//! the call from the stack's system call entry; the daemon is the process that woke it.

use std::collections::HashMap;

use coldstart_trace::{METADATA_CALLS, Mount, Nanos};

use crate::analysis::{PathSegment, SegmentKind, WaitedIn};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::syscalls::{SyscallFilter, SyscallLine, lines, mount_of, summary, under};
use crate::units::{count, duration, plural};

/// Calls that look a name up too but that the recorder's default filter leaves out (it
/// reads a call's path after the call, and a successful exec has replaced that memory);
/// `record --syscalls` records them.
const NAME_CALLS_RECORDED_WITH_SYSCALLS: &[&str] = &["execve", "execveat", "chdir"];

/// Whether `call` asks a filesystem about names rather than moving data.
fn is_metadata_call(call: &str) -> bool {
    METADATA_CALLS.contains(&call) || NAME_CALLS_RECORDED_WITH_SYSCALLS.contains(&call)
}

/// Wall-clock time covered by some of the intervals (parallel calls count once).
fn covered(mut intervals: Vec<(Nanos, Nanos)>) -> Nanos {
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(Nanos, Nanos)> = None;
    for (s, e) in intervals {
        match &mut current {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = current {
                    total += ce - cs;
                }
                current = Some((s, e));
            }
        }
    }
    total + current.map_or(0, |(s, e)| e - s)
}

/// True when a wait of the critical path was a request to a FUSE daemon or a network
/// filesystem's server: explained by the trace, even when the daemon is outside the scope.
pub(crate) fn explained_by_slow_filesystem(s: &PathSegment) -> bool {
    s.waited_in.as_ref().is_some_and(WaitedIn::on_slow_filesystem)
}

pub(crate) fn slow_filesystem(f: &Facts) -> Vec<Finding> {
    let from_calls = if f.trace.syscalls.is_empty() { Vec::new() } else { from_calls(f) };
    if from_calls.is_empty() { from_stacks(f) } else { from_calls }
}

/// The finding from the recorded system calls and their paths.
fn from_calls(f: &Facts) -> Vec<Finding> {
    let (from, to) = (f.origin, f.ready);
    let slow = metadata_calls_on_slow_mounts(f);
    let totals = summary(&slow, &f.trace.mounts, to);
    let Some(top) = totals.dirs.first() else { return Vec::new() };
    let dir = top.dir.clone();
    let fstype = top.fstype.clone().unwrap_or_else(|| "fuse".into());
    let calls: Vec<&SyscallLine<'_>> =
        slow.iter().filter(|l| l.path.is_some_and(|p| under(p, &dir))).collect();
    let wall = covered(
        calls.iter().map(|l| (l.call.enter_ns.max(from), l.call.exit_ns.unwrap_or(to).min(to))).collect(),
    );
    let on_path = path_time_in_calls_under(f, &dir);
    let gain_ns = on_path.unwrap_or(wall);
    if gain_ns < f.min_gain {
        return Vec::new();
    }
    let n = calls.len() as u64;
    let errors = calls.iter().filter(|l| l.call.errno().is_some()).count() as u64;
    let mut pids: Vec<i32> = calls.iter().map(|l| l.call.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut longest: Vec<&&SyscallLine<'_>> = calls.iter().collect();
    longest.sort_by_key(|l| std::cmp::Reverse(l.duration_ns(to)));
    longest.truncate(f.config.max_listed);
    longest.sort_by_key(|l| l.call.enter_ns);
    let (gain_name, gain_text) = match on_path {
        Some(_) => ("path_ns", "the critical path's time in them"),
        None => ("calls_wall_ns", "their wall-clock time (no critical path)"),
    };
    let mut figures =
        vec![Figure::count("calls", n), Figure::count("errors", errors), Figure::ns("calls_wall_ns", wall)];
    if let Some(p) = on_path {
        figures.push(Figure::ns("path_ns", p));
    }
    let server = answered_by(&servers_near(f, &dir));
    vec![Finding {
        kind: FindingKind::SlowFilesystem,
        title: format!(
            "{} metadata syscalls on a slow filesystem ({fstype}) under {dir} cost {}{server}",
            count(n),
            duration(wall)
        ),
        evidence: Evidence {
            summary: format!(
                "{} calls that name paths under {dir} ({}; {} failed) took {} of wall-clock time before ready; on \
                 {fstype} each is a request to its daemon or server, and the mount caches no attributes",
                count(n),
                call_names(&calls),
                count(errors),
                duration(wall)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: pids
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: calls.iter().filter(|l| l.call.pid == pid).map(|l| l.duration_ns(to)).sum(),
                    read_bytes: 0,
                    in_scope: true,
                })
                .collect(),
            figures: figures.clone(),
            intervals: longest
                .iter()
                .map(|l| EvidenceInterval {
                    start_ns: l.call.enter_ns,
                    end_ns: l.call.exit_ns.unwrap_or(to),
                    tid: Some(l.call.tid),
                    what: format!("{} {}", l.call.name, l.path.unwrap_or("")),
                })
                .collect(),
        },
        gain: Gain {
            ns: gain_ns,
            formula: gain_name.to_owned(),
            text: format!("{} ({gain_text}), if the calls were answered locally", duration(gain_ns)),
            inputs: figures.into_iter().filter(|x| x.name == gain_name).collect(),
            ahead_ns: None,
        },
        audience: Audience::Administrator,
        suggestion: format!(
            "Keep what the start looks up under {dir} on a local disk (a copy, or a cache such as cachefilesd or \
             fscache), let the mount cache attributes and names (NFS without noac, actimeo; FUSE attr_timeout and \
             entry_timeout), or look up fewer names: `coldstart syscalls TRACE --path {dir}` lists each call."
        ),
        verify: format!("{}  # with the directory local or cached", f.bench_command()),
        confidence: if on_path.is_some() { Confidence::High } else { Confidence::Medium },
        caveat: Some(
            "a local answer still costs a few microseconds per call, and a cache must be warm to help"
                .to_owned(),
        ),
    }]
}

/// The metadata calls of the start's processes between its start and ready that name a
/// path on a FUSE or network mount.
fn metadata_calls_on_slow_mounts<'t>(f: &Facts<'t>) -> Vec<SyscallLine<'t>> {
    let (from, to) = (f.origin, f.ready);
    lines(f.trace, &SyscallFilter::default())
        .into_iter()
        .filter(|l| is_metadata_call(&l.call.name))
        .filter(|l| l.call.enter_ns < to && l.call.exit_ns.unwrap_or(to) > from)
        .filter(|l| f.a.processes.iter().any(|p| p.pid == l.call.pid && p.in_scope))
        .filter(|l| l.path.and_then(|p| mount_of(&f.trace.mounts, p)).is_some_and(|m| m.is_remote_or_fuse()))
        .collect()
}

/// The critical path's time in metadata calls on a slow filesystem under `dir`, when there is a path.
fn path_time_in_calls_under(f: &Facts, dir: &str) -> Option<Nanos> {
    f.path.map(|cp| {
        cp.segments
            .iter()
            .filter(|s| !matches!(s.kind, SegmentKind::Cpu | SegmentKind::CpuWait))
            .filter(|s| {
                s.waited_in.as_ref().is_some_and(|w| {
                    is_metadata_call(&w.syscall)
                        && w.on_slow_filesystem()
                        && w.dir.as_deref().is_some_and(|d| under(d, dir))
                })
            })
            .map(|s| s.end_ns - s.start_ns)
            .sum()
    })
}

/// The calls' names, sorted, each once.
fn call_names(calls: &[&SyscallLine<'_>]) -> String {
    let mut names: Vec<&str> = calls.iter().map(|l| l.call.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

/// Waits on one FUSE or network mount, named from the off-CPU stacks.
#[derive(Default)]
struct MountWaits<'p> {
    ns: Nanos,
    /// Per system call: waits and their time.
    calls: Vec<(String, u64, Nanos)>,
    segments: Vec<&'p PathSegment>,
    /// The processes that answered (the wakers outside the scope), with their time.
    servers: Vec<(i32, String, Nanos)>,
}

impl<'p> MountWaits<'p> {
    fn add_call(&mut self, call: &str, waits: u64, ns: Nanos) {
        let call = if call.is_empty() { "kernel" } else { call };
        match self.calls.iter_mut().find(|c| c.0 == call) {
            Some(c) => {
                c.1 += waits;
                c.2 += ns;
            }
            None => self.calls.push((call.to_owned(), waits, ns)),
        }
        self.ns += ns;
    }

    fn waits(&self) -> u64 {
        self.calls.iter().map(|c| c.1).sum()
    }
}

/// The critical path's waits on FUSE and network mounts, by mount (its point, or none when the
/// stack named the filesystem but not which mount) and type; without a path, every in-scope
/// thread's (`Analysis::syscall_waits`).
fn waits_by_mount<'p>(f: &Facts<'p>) -> Vec<((Option<String>, String), MountWaits<'p>)> {
    let mut out: HashMap<(Option<String>, String), MountWaits<'p>> = HashMap::new();
    let key = |w: &WaitedIn| (w.dir.clone(), w.fstype.clone().unwrap_or_default());
    match f.path {
        Some(cp) => {
            for s in cp.segments.iter().filter(|s| explained_by_slow_filesystem(s)) {
                let Some(w) = &s.waited_in else { continue };
                let m = out.entry(key(w)).or_default();
                m.segments.push(s);
                if let Some(p) = s.waker_process.as_ref().filter(|_| s.kind == SegmentKind::WaitUntraced) {
                    match m.servers.iter_mut().find(|x| x.0 == p.pid) {
                        Some(x) => x.2 += s.end_ns - s.start_ns,
                        None => m.servers.push((p.pid, p.comm.clone(), s.end_ns - s.start_ns)),
                    }
                }
            }
            for w in cp.summary.in_syscalls.iter().filter(|w| w.waited_in.on_slow_filesystem()) {
                if let Some(m) = out.get_mut(&key(&w.waited_in)) {
                    m.add_call(&w.waited_in.syscall, w.calls, w.ns);
                }
            }
        }
        None => {
            for w in f.a.syscall_waits.iter().filter(|w| w.waited_in.on_slow_filesystem()) {
                out.entry(key(&w.waited_in)).or_default().add_call(&w.waited_in.syscall, w.calls, w.ns);
            }
        }
    }
    let mut out: Vec<_> = out.into_iter().filter(|(_, m)| m.ns > 0).collect();
    out.sort_by(|a, b| b.1.ns.cmp(&a.1.ns).then(a.0.cmp(&b.0)));
    out
}

/// What is known of the files a start used on `mount`: how many, how many have a path.
fn files_on(f: &Facts, mount: Option<&Mount>) -> (u64, u64) {
    let Some(m) = mount else { return (0, 0) };
    let on: Vec<_> = f.trace.files.iter().filter(|x| x.dev == m.dev && f.files.contains_key(&x.id)).collect();
    (on.len() as u64, on.iter().filter(|x| x.path.is_some()).count() as u64)
}

/// The finding from the off-CPU kernel stacks, for a trace without system calls.
fn from_stacks(f: &Facts) -> Vec<Finding> {
    let Some(((point, fstype), waits)) = waits_by_mount(f).into_iter().next() else { return Vec::new() };
    if waits.ns < f.min_gain {
        return Vec::new();
    }
    let mount =
        point.as_deref().and_then(|p| f.trace.mounts.iter().find(|m| m.point == p && m.fstype == fstype));
    let fs = if fstype.is_empty() { "a FUSE or network filesystem".to_owned() } else { fstype.clone() };
    let place = match &point {
        Some(p) => format!("the {fs} mount {p}"),
        None => format!("a {fs} mount the trace does not name"),
    };
    let n = waits.waits();
    let mut calls = waits.calls.clone();
    calls.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let call_list = calls
        .iter()
        .map(|(c, k, ns)| format!("{c} {} ({})", count(*k), duration(*ns)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut servers = waits.servers.clone();
    servers.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    let server = answered_by(&servers);
    let (files, files_text) = files_text(f, mount, &fs);
    let on_path = f.path.is_some();
    let (gain_name, gain_text) = if on_path {
        ("path_ns", "the critical path's waits in them")
    } else {
        ("waits_ns", "the start's waits in them (no critical path)")
    };
    let mut figures =
        vec![Figure::count("requests", n), Figure::ns(gain_name, waits.ns), Figure::count("files", files)];
    figures.extend(calls.iter().map(|(c, k, _)| Figure::count(&format!("{c}_waits"), *k)));
    let list = match &point {
        Some(p) => format!("coldstart syscalls TRACE --path {p}"),
        None => "coldstart syscalls TRACE --summary".to_owned(),
    };
    vec![Finding {
        kind: FindingKind::SlowFilesystem,
        title: format!(
            "{} requests to {place} cost {} of the critical path ({})",
            count(n),
            duration(waits.ns),
            calls.iter().take(4).map(|c| c.0.as_str()).collect::<Vec<_>>().join(", ")
        ),
        evidence: Evidence {
            summary: format!(
                "the start's threads slept {} times in {fs} requests on {place}{server}: {call_list}{files_text}; \
                 each is a round trip to its daemon or server (named from the kernel stacks the threads slept with)",
                count(n),
            ),
            files: Vec::new(),
            files_total: 0,
            processes: waiting_and_answering(f, &waits.segments, &servers),
            figures: figures.clone(),
            intervals: longest_waits(f, &waits.segments),
        },
        gain: Gain {
            ns: waits.ns,
            formula: gain_name.to_owned(),
            text: format!("{} ({gain_text}), if the requests were answered locally", duration(waits.ns)),
            inputs: figures.into_iter().filter(|x| x.name == gain_name).collect(),
            ahead_ns: None,
        },
        audience: Audience::Administrator,
        suggestion: format!(
            "Keep what the start reads from {place} on a local disk (a copy, or a cache such as cachefilesd or \
             fscache), let the mount cache attributes and names (NFS without noac, actimeo; FUSE attr_timeout and \
             entry_timeout), or have the program look up fewer names there. `coldstart record --syscalls` lists each \
             path: `{list}`."
        ),
        verify: format!("{}  # with the files local or cached", f.bench_command()),
        confidence: if on_path { Confidence::High } else { Confidence::Medium },
        caveat: Some(
            "named from the kernel stacks the threads slept with: the trace has the call and the mount of each \
             request, not its path; a local answer still costs a few microseconds per call, and a cache must be \
             warm to help"
                .to_owned(),
        ),
    }]
}

/// The processes outside the scope that answered the critical path's waits on the slow
/// mount holding `dir` (or on one the stacks did not name), most time first.
fn servers_near(f: &Facts, dir: &str) -> Vec<(i32, String, Nanos)> {
    let mut servers: Vec<(i32, String, Nanos)> = Vec::new();
    let near = |point: &Option<String>| point.as_deref().is_none_or(|p| under(dir, p) || under(p, dir));
    for (_, waits) in waits_by_mount(f).into_iter().filter(|((point, _), _)| near(point)) {
        for (pid, comm, ns) in waits.servers {
            match servers.iter_mut().find(|x| x.0 == pid) {
                Some(x) => x.2 += ns,
                None => servers.push((pid, comm, ns)),
            }
        }
    }
    servers.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    servers
}

/// `, answered by gvfsd-fuse (pid 812, outside the recording)`: the process that answered most.
fn answered_by(servers: &[(i32, String, Nanos)]) -> String {
    servers
        .first()
        .map(|(pid, comm, _)| {
            let name = if comm.is_empty() { "a process".to_owned() } else { comm.clone() };
            format!(", answered by {name} (pid {pid}, outside the recording)")
        })
        .unwrap_or_default()
}

/// How many files the start read on the mount, and words saying so (and how many are named).
fn files_text(f: &Facts, mount: Option<&Mount>, fs: &str) -> (u64, String) {
    let (files, named) = files_on(f, mount);
    let text = match (files, named) {
        (0, _) => String::new(),
        (n, k) if k == n => format!("; the start read {} there", plural(n, "file")),
        (n, 0) => format!(
            "; the start read {} there, unnamed (fanotify does not see {fs} and the recorder does not walk it)",
            plural(n, "file")
        ),
        (n, k) => format!("; the start read {} there ({} named)", plural(n, "file"), count(k)),
    };
    (files, text)
}

/// The processes that waited, with their time, then those that answered.
fn waiting_and_answering(
    f: &Facts,
    segments: &[&PathSegment],
    servers: &[(i32, String, Nanos)],
) -> Vec<EvidenceProcess> {
    let mut pids: Vec<i32> = segments.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut processes: Vec<EvidenceProcess> = pids
        .iter()
        .map(|&pid| EvidenceProcess {
            pid,
            comm: f.a.comm(pid).to_owned(),
            ns: segments.iter().filter(|s| s.pid == pid).map(|s| s.end_ns - s.start_ns).sum(),
            read_bytes: 0,
            in_scope: true,
        })
        .collect();
    processes.extend(servers.iter().map(|(pid, comm, ns)| EvidenceProcess {
        pid: *pid,
        comm: comm.clone(),
        ns: *ns,
        read_bytes: 0,
        in_scope: false,
    }));
    processes
}

/// The longest waits (at most `max_listed`), in time order.
fn longest_waits(f: &Facts, segments: &[&PathSegment]) -> Vec<EvidenceInterval> {
    let mut longest = segments.to_vec();
    longest.sort_by(|a, b| {
        (b.end_ns - b.start_ns).cmp(&(a.end_ns - a.start_ns)).then(a.start_ns.cmp(&b.start_ns))
    });
    longest.truncate(f.config.max_listed);
    longest.sort_by_key(|s| s.start_ns);
    longest
        .iter()
        .map(|s| EvidenceInterval {
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            tid: Some(s.tid),
            what: match &s.waited_in {
                Some(w) => format!("{}/{} in {w}", f.a.comm(s.pid), s.tid),
                None => format!("{}/{}", f.a.comm(s.pid), s.tid),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_calls_count_once() {
        assert_eq!(covered(vec![(0, 10), (5, 12), (20, 25)]), 17);
        assert_eq!(covered(Vec::new()), 0);
        assert!(under("/opt/a/b", "/opt/a") && !under("/opt/ab", "/opt/a") && under("/x", "/"));
    }
}
