//! Findings about processes: a helper on the critical path (its time there is the gain),
//! and work that can wait (processes that took the disk and the CPUs while the critical
//! path waited, without feeding it: that share of the path's waits is the gain). Who each
//! process is, and so who can act and what they can change, comes from
//! [`roles`](super::roles) and [`chains`](super::chains): the program's own processes,
//! the session manager and systemd's own children are never helpers.

use coldstart_trace::{BlockOp, Nanos, ThreadState};
use rustc_hash::FxHashMap;

use crate::analysis::{CriticalPath, DiskAnalysis, ProcessTime, SegmentKind};
use crate::doctor::chains::{self, Group, GroupKey};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::doctor::roles::{Role, Roles};
use crate::overview::is_system_worker;
use crate::units::{bytes, duration, plural};

/// The roles of the start's processes: the program is the process that reached ready,
/// the one with most time on the critical path, and the traced command.
fn roles<'a>(f: &Facts<'a>) -> Roles<'a> {
    let mut program: Vec<i32> = f.a.overview.ready.as_ref().map(|r| r.pid).into_iter().collect();
    if let Some(cp) = f.path {
        let mut by_pid: FxHashMap<i32, Nanos> = FxHashMap::default();
        for s in &cp.segments {
            *by_pid.entry(s.pid).or_default() += s.end_ns - s.start_ns;
        }
        program.extend(by_pid.iter().max_by_key(|p| (*p.1, std::cmp::Reverse(*p.0))).map(|p| *p.0));
    }
    program.extend(f.a.trace.root_pid);
    Roles::new(f.a, &f.trace.execs, &program, f.ready)
}

/// The helpers of the critical path in groups: processes started after the command and
/// ended before ready that are none of the program's own, each on the path for at most
/// `helper_max_share` of the time to ready; a service manager's fork that ran generators
/// counts with them (it exists to run them).
fn helper_groups<'c>(f: &Facts, roles: &Roles, cp: &'c CriticalPath) -> Vec<(Group, Vec<&'c ProcessTime>)> {
    let mut groups: Vec<Group> = Vec::new();
    let mut executors = Vec::new();
    for h in &cp.summary.helpers {
        let Some(p) = f.a.process(h.pid) else { continue };
        let short_lived = p.start_ns.is_some_and(|s| s >= f.origin) && p.end_ns.is_some_and(|e| e <= f.ready);
        if !short_lived || h.ns as f64 > f.config.helper_max_share * f.time_to_ready as f64 {
            continue;
        }
        if roles.role(h.pid) == Role::ManagerInternal {
            executors.push(h);
            continue;
        }
        let Some(key) = chains::key_of(f, roles, h.pid) else { continue };
        let root = if roles.role(h.pid) == Role::Started { roles.chain_root(h.pid) } else { h.pid };
        chains::add(&mut groups, key, root, h.pid, h.ns);
    }
    for e in executors {
        let runs_generators =
            f.a.processes.iter().any(|q| {
                q.ppid == Some(e.pid) && chains::key_of(f, roles, q.pid) == Some(GroupKey::Generators)
            });
        if runs_generators && groups.iter().any(|g| g.key == GroupKey::Generators) {
            chains::add(&mut groups, GroupKey::Generators, e.pid, e.pid, e.ns);
        }
    }
    groups
        .into_iter()
        .map(|g| {
            let times =
                g.members.iter().filter_map(|m| cp.summary.helpers.iter().find(|h| h.pid == m.0)).collect();
            (g, times)
        })
        .collect()
}

pub(crate) fn heavy_helpers(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    let roles = roles(f);
    helper_groups(f, &roles, cp)
        .into_iter()
        .filter(|(g, _)| g.ns() >= f.min_gain)
        .map(|(g, times)| helper_finding(f, &roles, cp, &g, &times))
        .collect()
}

/// The group's processes on the critical path, one interval per stretch of each.
fn path_intervals(f: &Facts, cp: &CriticalPath, pids: &[i32]) -> Vec<EvidenceInterval> {
    cp.segments
        .iter()
        .filter(|s| pids.contains(&s.pid))
        .map(|s| EvidenceInterval {
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            tid: Some(s.pid),
            what: format!("{}/{} on the critical path", f.a.comm(s.pid), s.pid),
        })
        .collect()
}

/// `, with (sd-executor), systemd's fork that runs them, 57.2 ms`: the group's forks named in
/// parentheses (a service manager's code between fork and exec), which its names leave out.
fn forks_words(f: &Facts, g: &Group) -> String {
    let words: Vec<String> = g
        .members
        .iter()
        .filter(|m| f.a.comm(m.0).starts_with('('))
        .map(|&(pid, ns)| {
            let parent = f.a.process(pid).and_then(|p| p.ppid);
            let whose = match parent {
                Some(pp) if g.members.iter().any(|m| m.0 == pp) => format!("a fork of {}", f.a.comm(pp)),
                Some(pp) => format!("{}'s fork that runs them", f.a.comm(pp)),
                None => "a fork".to_owned(),
            };
            format!("{} ({whose}, {})", f.a.comm(pid), duration(ns))
        })
        .collect();
    if words.is_empty() { String::new() } else { format!(", with {}", words.join(", ")) }
}

/// `(the first: ARGV, started by PARENT/PID)`.
fn first_started(f: &Facts, pid: i32) -> String {
    let p = f.a.process(pid);
    let argv =
        p.map(|p| p.argv.join(" ")).filter(|a| !a.is_empty()).unwrap_or_else(|| f.a.comm(pid).to_owned());
    let parent = p.and_then(|p| p.ppid).map_or("?".into(), |pp| format!("{}/{pp}", f.a.comm(pp)));
    format!("the first: {argv}, started by {parent}")
}

fn helper_finding(f: &Facts, roles: &Roles, cp: &CriticalPath, g: &Group, times: &[&ProcessTime]) -> Finding {
    let pids = g.pids();
    let framing = chains::framing(f, roles, g, true);
    let ns = g.ns();
    let cpu: Nanos = times.iter().map(|h| h.cpu_ns).fold(0, Nanos::saturating_add);
    let io: Nanos = times.iter().map(|h| h.io_wait_ns).fold(0, Nanos::saturating_add);
    let lifetimes: Nanos = pids
        .iter()
        .filter_map(|&pid| f.a.process(pid))
        .map(|p| p.end_ns.unwrap_or(f.ready) - p.start_ns.unwrap_or(f.origin))
        .fold(0, Nanos::saturating_add);
    let files = chains::files_read(f, &pids);
    let read: u64 = files.iter().map(|x| x.1).fold(0, u64::saturating_add);
    let heavy = chains::heavy_files(f, &pids).map(|w| format!(", most of it {w}")).unwrap_or_default();
    let detail = framing.detail.as_ref().map(|d| format!("; {d}")).unwrap_or_default();
    let who = chains::names(f, &pids).join(", ");
    let forks = forks_words(f, g);
    let title = match &g.key {
        GroupKey::ShellUtilities => {
            format!("The start script's utilities on the critical path for {}: {who}", duration(ns))
        }
        _ => format!("{}: {} on the critical path", framing.subject, duration(ns)),
    };
    Finding {
        kind: FindingKind::HeavyHelper,
        title,
        evidence: Evidence {
            summary: format!(
                "{who} ({}) on the critical path for {}{forks}: {} running, {} in I/O wait, the rest waiting for a \
                 CPU or for others; alive {} in all, {} read{heavy}{detail}",
                first_started(f, g.root),
                duration(ns),
                duration(cpu),
                duration(io),
                duration(lifetimes),
                bytes(read)
            ),
            files: f.evidence_files(&files.iter().map(|x| x.0).collect::<Vec<_>>()),
            files_total: files.len() as u64,
            processes: g
                .members
                .iter()
                .map(|&(pid, ns)| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns,
                    read_bytes: f.a.process(pid).map_or(0, |p| p.pages.saturating_mul(f.page_size)),
                    in_scope: true,
                })
                .collect(),
            figures: vec![
                Figure::count("processes", pids.len() as u64),
                Figure::ns("path_ns", ns),
                Figure::ns("path_cpu_ns", cpu),
                Figure::ns("path_io_wait_ns", io),
                Figure::ns("lifetime_ns", lifetimes),
                Figure::bytes("read_bytes", read),
            ],
            intervals: path_intervals(f, cp, &pids),
        },
        gain: Gain {
            ns,
            formula: "path_ns".to_owned(),
            text: format!(
                "{} of the critical path spent in {who}{forks} ({} running + {} I/O wait + {} other) = {}, if \
                 their job costs nothing once removed, cached or done in-process",
                duration(ns),
                duration(cpu),
                duration(io),
                duration(ns - cpu - io),
                duration(ns)
            ),
            inputs: vec![
                Figure::ns("path_ns", ns),
                Figure::ns("path_cpu_ns", cpu),
                Figure::ns("path_io_wait_ns", io),
            ],
            ahead_ns: None,
        },
        audience: framing.audience,
        suggestion: framing.suggestion,
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(match g.key {
            GroupKey::Generators => {
                "generators run in parallel: masking one saves its time only when it was the \
                                     last to finish, and the gain assumes they are all masked"
                    .to_owned()
            }
            _ => {
                "the trace shows the time on the critical path, not whether the job can be skipped: the gain \
                  assumes it costs nothing once removed, cached or done in-process"
                    .to_owned()
            }
        }),
    }
}

/// Each read request's share of its disk's busy time within `from..to`: while `n`
/// requests are in flight, each is charged `1/n` of the time.
fn busy_shares(disk: &DiskAnalysis, from: Nanos, to: Nanos) -> Vec<(usize, Nanos)> {
    let mut events: Vec<(Nanos, i32, usize)> = Vec::new();
    for (i, r) in disk.requests.iter().enumerate().filter(|(_, r)| r.op == BlockOp::Read) {
        let (Some(issue), Some(done)) = (r.issue_ns, r.complete_ns) else { continue };
        let (start, end) = (issue.max(from), done.min(to));
        if start < end {
            events.push((start, 1, i));
            events.push((end, -1, i));
        }
    }
    events.sort_unstable_by_key(|e| (e.0, e.1));
    let (mut integral, mut last_t, mut in_flight) = (0.0f64, from, 0i32);
    let mut at_issue: FxHashMap<usize, f64> = FxHashMap::default();
    let mut out = Vec::new();
    for (t, delta, i) in events {
        if in_flight > 0 {
            integral += (t - last_t) as f64 / f64::from(in_flight);
        }
        last_t = t;
        in_flight += delta;
        if delta > 0 {
            at_issue.insert(i, integral);
        } else if let Some(start) = at_issue.remove(&i) {
            out.push((i, (integral - start) as Nanos));
        }
    }
    out
}

struct Competitor {
    pid: i32,
    comm: String,
    in_scope: bool,
    requests: u64,
    bytes: u64,
    busy_ns: Nanos,
}

/// The processes that issued read requests before ready without being on the critical
/// path, for files no process on the path read, with their share of the disk's busy time;
/// and the disk's busy time in all.
fn competitors(f: &Facts) -> (Vec<Competitor>, Nanos) {
    let comm_of: FxHashMap<i32, &str> = f.trace.block_ios.iter().map(|b| (b.pid, b.comm.as_str())).collect();
    // Count a request for its issuer's process: older traces name the issuing thread (the
    // recorder now names the process, of tasks outside its tree too, where /proc knew it).
    let pid_of: FxHashMap<i32, i32> = f.trace.threads.iter().map(|t| (t.tid, t.pid)).collect();
    let mut by_pid: FxHashMap<i32, Competitor> = FxHashMap::default();
    let mut disk_busy: Nanos = 0;
    for disk in &f.a.disks {
        for (i, share) in busy_shares(disk, f.origin, f.ready) {
            disk_busy += share;
            let r = &disk.requests[i];
            let pid = pid_of.get(&r.pid).copied().unwrap_or(r.pid);
            if f.path_pids.contains(&pid) {
                continue;
            }
            let process = f.a.process(pid);
            let comm =
                process.map_or_else(|| comm_of.get(&r.pid).copied().unwrap_or(""), |p| p.comm.as_str());
            if pid <= 0 || is_system_worker(comm) {
                continue;
            }
            // Files a process on the critical path also read were read for it (or shared): not competition.
            if r.file.is_some_and(|id| {
                f.files.get(&id).is_some_and(|s| s.pids.iter().any(|p| f.path_pids.contains(p)))
            }) {
                continue;
            }
            let c = by_pid.entry(pid).or_insert_with(|| Competitor {
                pid,
                comm: comm.to_owned(),
                in_scope: process.is_some_and(|p| p.in_scope),
                requests: 0,
                bytes: 0,
                busy_ns: 0,
            });
            c.requests += 1;
            c.bytes = c.bytes.saturating_add(u64::from(r.bytes));
            c.busy_ns = c.busy_ns.saturating_add(share);
        }
    }
    let mut list: Vec<Competitor> = by_pid.into_values().collect();
    list.sort_by(|a, b| b.busy_ns.cmp(&a.busy_ns).then(a.pid.cmp(&b.pid)));
    (list, disk_busy)
}

/// The critical path's waits for a CPU that `pids` took: while the path's thread was
/// runnable every CPU was busy, so each of their threads running then held one of the
/// machine's CPUs, 1/CPUs of that wait.
fn cpu_taken(f: &Facts, cp: &CriticalPath, pids: &[i32]) -> Nanos {
    let tids: Vec<i32> = f.trace.threads.iter().filter(|t| pids.contains(&t.pid)).map(|t| t.tid).collect();
    let mut running: Vec<(Nanos, Nanos)> = f
        .trace
        .sched
        .iter()
        .filter(|s| s.state == ThreadState::Running && (tids.contains(&s.tid) || pids.contains(&s.tid)))
        .map(|s| (s.start_ns, s.end_ns))
        .collect();
    running.sort_unstable();
    let cpus = i128::from(f.a.trace.cpu_count.max(1));
    let mut held: i128 = 0;
    for seg in cp.segments.iter().filter(|s| s.kind == SegmentKind::CpuWait) {
        let first = running.partition_point(|r| r.0 < seg.start_ns).saturating_sub(64);
        for &(start, end) in running[first..].iter().take_while(|r| r.0 < seg.end_ns) {
            held += i128::from((end.min(seg.end_ns) - start.max(seg.start_ns)).max(0));
        }
    }
    (held / cpus) as Nanos
}

/// A disk that serves many requests at once, where competing requests cost less.
fn flash(f: &Facts) -> bool {
    f.primary.queue_depth > 1 && f.primary.seek_ns < f.config.seek_min_penalty_ns
}

/// The critical path's waits: for I/O, and for a CPU.
fn path_waits(cp: &CriticalPath) -> (Nanos, Nanos) {
    let sum = |kind: SegmentKind| {
        cp.segments
            .iter()
            .filter(|s| s.kind == kind)
            .map(|s| s.end_ns - s.start_ns)
            .fold(0, Nanos::saturating_add)
    };
    (sum(SegmentKind::IoWait), sum(SegmentKind::CpuWait))
}

pub(crate) fn work_that_can_wait(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    let (list, disk_busy) = competitors(f);
    let roles = roles(f);
    let mut groups: Vec<Group> = Vec::new();
    let mut rest: Vec<&Competitor> = Vec::new();
    for c in list.iter().filter(|c| c.in_scope) {
        match chains::key_of(f, &roles, c.pid) {
            Some(key) => {
                let root = if roles.role(c.pid) == Role::Started { roles.chain_root(c.pid) } else { c.pid };
                chains::add(&mut groups, key, root, c.pid, c.busy_ns);
            }
            None => rest.push(c),
        }
    }
    // A group with a finding on the critical path is told there (its waits for a CPU are in its path time).
    let on_path: Vec<GroupKey> = helper_groups(f, &roles, cp)
        .into_iter()
        .filter(|(g, _)| g.ns() >= f.min_gain)
        .map(|(g, _)| g.key)
        .collect();
    let mut out: Vec<Finding> = groups
        .iter()
        .filter(|g| !on_path.contains(&g.key))
        .filter_map(|g| chain_competing(f, &roles, cp, g, &list, disk_busy))
        .collect();
    let outside: Vec<&Competitor> = list.iter().filter(|c| !c.in_scope).collect();
    for (in_scope, group) in [(true, rest), (false, outside)] {
        out.extend(competing(f, cp, &group, in_scope, disk_busy));
    }
    out
}

/// A chain of the start's processes that took the disk and the CPUs from the critical path.
fn chain_competing(
    f: &Facts,
    roles: &Roles,
    cp: &CriticalPath,
    g: &Group,
    list: &[Competitor],
    disk_busy: Nanos,
) -> Option<Finding> {
    let (path_io, path_cpu_wait) = path_waits(cp);
    // The whole chain took the CPUs, also those of its processes that read nothing from the disk.
    let chain: Vec<i32> =
        f.a.processes
            .iter()
            .map(|p| p.pid)
            .filter(|&pid| roles.in_chain(g.root, pid) || g.pids().contains(&pid))
            .collect();
    let disk: Nanos = g.ns();
    let cpu = cpu_taken(f, cp, &chain);
    let gain = disk.min(path_io).saturating_add(cpu.min(path_cpu_wait));
    if gain < f.min_gain {
        return None;
    }
    let members: Vec<&Competitor> = list.iter().filter(|c| g.pids().contains(&c.pid)).collect();
    let requests: u64 = members.iter().map(|c| c.requests).sum();
    let read: u64 = members.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
    let framing = chains::framing(f, roles, g, false);
    let files = chains::files_read(f, &chain);
    let filled: u64 = files.iter().map(|x| x.1).fold(0, u64::saturating_add);
    let heavy = chains::heavy_files(f, &chain).map(|w| format!(", most of it {w}")).unwrap_or_default();
    let detail = framing.detail.as_ref().map(|d| format!("; {d}")).unwrap_or_default();
    let who = chains::names(f, &chain).join(", ");
    Some(Finding {
        kind: FindingKind::WorkThatCanWait,
        title: format!("{}: {} of the critical path's waits while it ran", framing.subject, duration(gain)),
        evidence: Evidence {
            summary: format!(
                "{who}, off the critical path, made {} ({}) before ready and filled {} of the page cache{heavy}: {} \
                 of the disk's busy time ({} in all) while the path waited {} for I/O, and {} of the path's {} \
                 waiting for a CPU{detail}",
                plural(requests, "read request"),
                bytes(read),
                bytes(filled),
                duration(disk),
                duration(disk_busy),
                duration(path_io),
                duration(cpu),
                duration(path_cpu_wait)
            ),
            files: f.evidence_files(&files.iter().map(|x| x.0).collect::<Vec<_>>()),
            files_total: files.len() as u64,
            processes: chain
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: members.iter().find(|c| c.pid == pid).map_or(0, |c| c.busy_ns),
                    read_bytes: f.a.process(pid).map_or(0, |p| p.pages.saturating_mul(f.page_size)),
                    in_scope: true,
                })
                .collect(),
            figures: vec![
                Figure::count("processes", chain.len() as u64),
                Figure::count("requests", requests),
                Figure::bytes("read_bytes", read),
                Figure::ns("their_disk_ns", disk),
                Figure::ns("their_cpu_ns", cpu),
                Figure::ns("disk_busy_ns", disk_busy),
                Figure::ns("path_io_wait_ns", path_io),
                Figure::ns("path_cpu_wait_ns", path_cpu_wait),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: gain,
            formula: "min(their_disk_ns, path_io_wait_ns) + min(their_cpu_ns, path_cpu_wait_ns)".to_owned(),
            text: format!(
                "the disk time they took before ready, {} (at most the path's I/O wait, {}), + the path's waits for \
                 a CPU they held, {} (at most {}) = {}",
                duration(disk),
                duration(path_io),
                duration(cpu),
                duration(path_cpu_wait),
                duration(gain)
            ),
            inputs: vec![
                Figure::ns("their_disk_ns", disk),
                Figure::ns("path_io_wait_ns", path_io),
                Figure::ns("their_cpu_ns", cpu),
                Figure::ns("path_cpu_wait_ns", path_cpu_wait),
            ],
            ahead_ns: None,
        },
        audience: framing.audience,
        suggestion: framing.suggestion,
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: if flash(f) { Confidence::Low } else { Confidence::Medium },
        caveat: Some(
            "these processes were not on the critical path: the gain assumes the path would have had the disk time \
             and the CPU time they took; on a disk that serves many requests at once, or with idle CPUs, it is smaller"
                .to_owned(),
        ),
    })
}

/// Processes that read from the disk during the start without a chain to tell them by:
/// the start's other processes (`in_scope`), or processes outside the recording.
fn competing(
    f: &Facts,
    cp: &CriticalPath,
    list: &[&Competitor],
    in_scope: bool,
    disk_busy: Nanos,
) -> Option<Finding> {
    let (path_io, _) = path_waits(cp);
    let busy: Nanos = list.iter().map(|c| c.busy_ns).fold(0, Nanos::saturating_add);
    let gain = busy.min(path_io);
    if gain < f.min_gain || list.is_empty() {
        return None;
    }
    let total_bytes: u64 = list.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
    let requests: u64 = list.iter().map(|c| c.requests).sum();
    let names: Vec<String> = list.iter().take(5).map(|c| format!("{}/{}", c.comm, c.pid)).collect();
    let more = if list.len() > 5 { format!(" and {} more", list.len() - 5) } else { String::new() };
    let n = list.len() as u64;
    let (title, audience, suggestion, caveat) = if in_scope {
        (
            format!(
                "{} of the start read from the disk without feeding the critical path",
                chains::processes(n, "")
            ),
            Audience::Developers,
            "Start these after the program is ready (or at a lower I/O priority, `ionice -c3`): the critical path \
             never waited for them, but they took the disk while it was waiting for its own reads.",
            "the gain assumes the critical path's reads would have been served in the disk time these processes \
             took; on a disk that serves many requests at once the real gain is smaller",
        )
    } else {
        (
            format!(
                "{} outside the traced command read from the disk during the start",
                chains::processes(n, "")
            ),
            Audience::Administrator,
            "Other processes on the machine (an indexer, an updater, a build) competed for the disk during the \
             start: schedule them after the session is ready or at a lower I/O priority, or measure on a quiet \
             machine.",
            "these processes are outside the recording's scope: the trace sees their block requests, not what \
             they were doing; on a disk that serves many requests at once the real gain is smaller",
        )
    };
    Some(Finding {
        kind: FindingKind::WorkThatCanWait,
        title,
        evidence: Evidence {
            summary: format!(
                "{}{more} made {} ({}) before ready, {} of the disk's busy time ({} in all), while the critical \
                 path waited {} for I/O",
                names.join(", "),
                plural(requests, "read request"),
                bytes(total_bytes),
                duration(busy),
                duration(disk_busy),
                duration(path_io)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: list
                .iter()
                .take(f.config.max_listed)
                .map(|c| EvidenceProcess {
                    pid: c.pid,
                    comm: c.comm.clone(),
                    ns: c.busy_ns,
                    read_bytes: c.bytes,
                    in_scope: c.in_scope,
                })
                .collect(),
            figures: vec![
                Figure::count("processes", n),
                Figure::count("requests", requests),
                Figure::bytes("read_bytes", total_bytes),
                Figure::ns("their_disk_ns", busy),
                Figure::ns("disk_busy_ns", disk_busy),
                Figure::ns("path_io_wait_ns", path_io),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: gain,
            formula: "min(their_disk_ns, path_io_wait_ns)".to_owned(),
            text: format!(
                "the disk time they took before ready, {} (each request's share of the time the disk was busy), at \
                 most the critical path's I/O wait, {} = {}",
                duration(busy),
                duration(path_io),
                duration(gain)
            ),
            inputs: vec![Figure::ns("their_disk_ns", busy), Figure::ns("path_io_wait_ns", path_io)],
            ahead_ns: None,
        },
        audience,
        suggestion: suggestion.to_owned(),
        verify: format!("{}  # with and without them running", f.bench_command()),
        confidence: if flash(f) { Confidence::Low } else { Confidence::Medium },
        caveat: Some(caveat.to_owned()),
    })
}
