//! Findings about processes: a heavy helper on the critical path (its time there is
//! the gain), and work that can wait (processes that read from the disk before ready
//! without feeding the critical path: the disk time they took is the gain).

use coldstart_trace::{BlockOp, Nanos};
use rustc_hash::FxHashMap;

use crate::analysis::{DiskAnalysis, SegmentKind};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::overview::is_system_worker;
use crate::units::{bytes, count, duration, plural};

/// Small utilities a shell script starts: the shell can usually do their job itself.
const SHELL_UTILITIES: [&str; 16] = [
    "dirname", "basename", "uname", "sed", "grep", "ls", "cat", "expr", "readlink", "realpath", "tr", "cut",
    "awk", "head", "id", "which",
];

/// `1 dirname process`, `3 sed processes`, `5 processes`.
fn processes(n: u64, comm: &str) -> String {
    let noun = if n == 1 { "process" } else { "processes" };
    if comm.is_empty() { format!("{} {noun}", count(n)) } else { format!("{} {comm} {noun}", count(n)) }
}

/// The name helpers are grouped under: the start script's small utilities together, others by name.
const SHELL_GROUP: &str = "shell utilities";

pub(crate) fn heavy_helpers(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    // The program doing the main work: the process with most time on the path. Another
    // process of the same name (a restart, a worker of the program itself) is no helper.
    let mut by_pid: Vec<(i32, Nanos)> = Vec::new();
    for s in &cp.segments {
        match by_pid.iter_mut().find(|p| p.0 == s.pid) {
            Some(p) => p.1 = p.1.saturating_add(s.end_ns - s.start_ns),
            None => by_pid.push((s.pid, s.end_ns - s.start_ns)),
        }
    }
    let main_comm =
        by_pid.iter().max_by_key(|p| (p.1, std::cmp::Reverse(p.0))).map(|p| f.a.comm(p.0).to_owned());
    let ready_comm = f.a.overview.ready.as_ref().map(|r| f.a.comm(r.pid).to_owned());
    let mut groups: Vec<(String, Vec<&crate::ProcessTime>)> = Vec::new();
    for h in &cp.summary.helpers {
        let Some(p) = f.a.process(h.pid) else { continue };
        let short_lived = p.start_ns.is_some_and(|s| s >= f.origin) && p.end_ns.is_some_and(|e| e <= f.ready);
        let same_program = Some(&h.comm) == main_comm.as_ref() || Some(&h.comm) == ready_comm.as_ref();
        if !short_lived || same_program || h.ns as f64 > f.config.helper_max_share * f.time_to_ready as f64 {
            continue;
        }
        let group =
            if SHELL_UTILITIES.contains(&h.comm.as_str()) { SHELL_GROUP.to_owned() } else { h.comm.clone() };
        match groups.iter_mut().find(|g| g.0 == group) {
            Some(g) => g.1.push(h),
            None => groups.push((group, vec![h])),
        }
    }
    let mut out = Vec::new();
    for (comm, helpers) in groups {
        let ns: Nanos = helpers.iter().map(|h| h.ns).fold(0, Nanos::saturating_add);
        if ns < f.min_gain {
            continue;
        }
        let cpu: Nanos = helpers.iter().map(|h| h.cpu_ns).fold(0, Nanos::saturating_add);
        let io: Nanos = helpers.iter().map(|h| h.io_wait_ns).fold(0, Nanos::saturating_add);
        let first = f.a.process(helpers[0].pid);
        let argv = first.map(|p| p.argv.join(" ")).filter(|a| !a.is_empty()).unwrap_or_else(|| comm.clone());
        let parent =
            first.and_then(|p| p.ppid).map(|pp| format!("{}/{pp}", f.a.comm(pp))).unwrap_or("?".into());
        let lifetimes: Nanos = helpers
            .iter()
            .filter_map(|h| f.a.process(h.pid))
            .map(|p| p.end_ns.unwrap_or(f.ready) - p.start_ns.unwrap_or(f.origin))
            .fold(0, Nanos::saturating_add);
        let read: u64 = helpers
            .iter()
            .filter_map(|h| f.a.process(h.pid))
            .map(|p| p.pages.saturating_mul(f.page_size))
            .fold(0, u64::saturating_add);
        let intervals = cp.segments.iter().filter(|s| helpers.iter().any(|h| h.pid == s.pid)).fold(
            Vec::<EvidenceInterval>::new(),
            |mut acc, s| {
                match acc.last_mut() {
                    Some(last) if last.tid == Some(s.pid) && last.end_ns == s.start_ns => {
                        last.end_ns = s.end_ns
                    }
                    _ => acc.push(EvidenceInterval {
                        start_ns: s.start_ns,
                        end_ns: s.end_ns,
                        tid: Some(s.pid),
                        what: format!("{}/{} on the critical path", f.a.comm(s.pid), s.pid),
                    }),
                }
                acc
            },
        );
        let n = helpers.len() as u64;
        let utility = comm == SHELL_GROUP;
        let mut names: Vec<(String, u64)> = Vec::new();
        for h in &helpers {
            match names.iter_mut().find(|x| x.0 == h.comm) {
                Some(x) => x.1 += 1,
                None => names.push((h.comm.clone(), 1)),
            }
        }
        let names: Vec<String> =
            names.iter().map(|(c, k)| if *k > 1 { format!("{c} ×{k}") } else { c.clone() }).collect();
        let who = if utility {
            format!("{} ({})", processes(n, ""), names.join(", "))
        } else {
            processes(n, &comm)
        };
        let suggestion = if utility {
            format!(
                "The start script runs {}: do their jobs with shell built-ins (parameter expansion such as \
                 ${{0%/*}} for dirname, `case` for pattern tests, `$(<file)` for cat) or compute the results once \
                 at install time.",
                names.join(", ")
            )
        } else {
            format!(
                "Avoid starting `{comm}` for this job: do the work inside the program, cache its result between \
                 starts (rebuild it only when its inputs change), or start it early in parallel instead of waiting \
                 for it."
            )
        };
        out.push(Finding {
            kind: FindingKind::HeavyHelper,
            title: if utility {
                format!("The start script's utilities on the critical path for {}: {}", duration(ns), names.join(", "))
            } else if n == 1 {
                format!("Helper process {comm} on the critical path for {}", duration(ns))
            } else {
                format!("{} {comm} helper processes on the critical path for {}", count(n), duration(ns))
            },
            evidence: Evidence {
                summary: format!(
                    "{who} (the first: {argv}, started by {parent}) on the critical path for {}: {} running, {} in \
                     I/O wait, the rest waiting for a CPU or for others; alive {} in all, {} read",
                    duration(ns),
                    duration(cpu),
                    duration(io),
                    duration(lifetimes),
                    bytes(read)
                ),
                files: Vec::new(),
                files_total: 0,
                processes: helpers
                    .iter()
                    .map(|h| EvidenceProcess {
                        pid: h.pid,
                        comm: h.comm.clone(),
                        ns: h.ns,
                        read_bytes: f.a.process(h.pid).map_or(0, |p| p.pages.saturating_mul(f.page_size)),
                        in_scope: true,
                    })
                    .collect(),
                figures: vec![
                    Figure::count("processes", n),
                    Figure::ns("path_ns", ns),
                    Figure::ns("path_cpu_ns", cpu),
                    Figure::ns("path_io_wait_ns", io),
                    Figure::ns("lifetime_ns", lifetimes),
                    Figure::bytes("read_bytes", read),
                ],
                intervals: intervals.into_iter().take(f.config.max_listed).collect(),
            },
            gain: Gain {
                ns,
                formula: "path_ns".to_owned(),
                text: format!(
                    "{} of the critical path spent in {} ({} running + {} I/O wait + {} other) = {}, if its job costs \
                     nothing once done in-process or cached",
                    duration(ns),
                    who,
                    duration(cpu),
                    duration(io),
                    duration(ns - cpu - io),
                    duration(ns)
                ),
                inputs: vec![Figure::ns("path_ns", ns), Figure::ns("path_cpu_ns", cpu), Figure::ns("path_io_wait_ns", io)],
                ahead_ns: None,
            },
            audience: Audience::Developers,
            suggestion,
            verify: format!("{}  # before and after removing the helper", f.bench_command()),
            confidence: Confidence::Medium,
            caveat: Some(
                "the trace shows the helper's time on the critical path, not whether its job can be skipped: the \
                 gain assumes the job costs nothing once done in-process"
                    .to_owned(),
            ),
        });
    }
    out
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

pub(crate) fn work_that_can_wait(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
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
    let path_io: Nanos = cp
        .segments
        .iter()
        .filter(|s| s.kind == SegmentKind::IoWait)
        .map(|s| s.end_ns - s.start_ns)
        .fold(0, Nanos::saturating_add);
    let flash = f.primary.queue_depth > 1 && f.primary.seek_ns < f.config.seek_min_penalty_ns;
    let mut out = Vec::new();
    for in_scope in [true, false] {
        let mut list: Vec<&Competitor> = by_pid.values().filter(|c| c.in_scope == in_scope).collect();
        list.sort_by(|a, b| b.busy_ns.cmp(&a.busy_ns).then(a.pid.cmp(&b.pid)));
        let busy: Nanos = list.iter().map(|c| c.busy_ns).fold(0, Nanos::saturating_add);
        let gain = busy.min(path_io);
        if gain < f.min_gain || list.is_empty() {
            continue;
        }
        let total_bytes: u64 = list.iter().map(|c| c.bytes).fold(0, u64::saturating_add);
        let requests: u64 = list.iter().map(|c| c.requests).sum();
        let names: Vec<String> = list.iter().take(5).map(|c| format!("{}/{}", c.comm, c.pid)).collect();
        let more = if list.len() > 5 { format!(" and {} more", list.len() - 5) } else { String::new() };
        let (title, suggestion, caveat) = if in_scope {
            (
                format!("{} of the start read from the disk without feeding the critical path", processes(list.len() as u64, "")),
                "Start these after the program is ready (or at a lower I/O priority, `ionice -c3`): the critical path \
                 never waited for them, but they took the disk while it was waiting for its own reads."
                    .to_owned(),
                "the gain assumes the critical path's reads would have been served in the disk time these processes \
                 took; on a disk that serves many requests at once the real gain is smaller",
            )
        } else {
            (
                format!("{} outside the traced command read from the disk during the start", processes(list.len() as u64, "")),
                "Other processes on the machine (an indexer, an updater, a build) competed for the disk during the \
                 start: start them after the session is ready, lower their I/O priority, or measure on a quiet \
                 machine."
                    .to_owned(),
                "these processes are outside the recording's scope: the trace sees their block requests, not what \
                 they were doing; on a disk that serves many requests at once the real gain is smaller",
            )
        };
        out.push(Finding {
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
                    .map(|c| EvidenceProcess { pid: c.pid, comm: c.comm.clone(), ns: c.busy_ns, read_bytes: c.bytes, in_scope: c.in_scope })
                    .collect(),
                figures: vec![
                    Figure::count("processes", list.len() as u64),
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
            audience: Audience::Distribution,
            suggestion,
            verify: format!("{}  # with and without them running", f.bench_command()),
            confidence: if flash { Confidence::Low } else { Confidence::Medium },
            caveat: Some(caveat.to_owned()),
        });
    }
    out
}
