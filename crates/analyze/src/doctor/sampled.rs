//! What the machine's periodic samples say where nothing finer was recorded: an imported
//! bootchart holds /proc read a few times a second (CPU time, disk traffic, each process's
//! state) and no scheduler data, block requests or page fills. The reading is the classic
//! one of a bootchart (Fedora's 2004 boot study, `seeds/001`): stretches where the CPUs wait
//! for the disk, how fast the disk read then against the best it showed in the same boot,
//! and who was waiting. A disk kept busy at a fraction of its best rate is seeking; reading
//! the same files in one sweep, in disk order, before they are needed, removes the seeks.

use coldstart_trace::{DiskSample, Nanos, ProcessSample, Source};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{Phase, PhaseKind};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{bytes, duration, percent, plural};

/// Processes named.
const PROCESSES_LISTED: usize = 5;
/// The names (as `comm`, 15 bytes at most) of the boot prefetchers distributions shipped.
const PREFETCHERS: &[&str] = &[
    "readahead",
    "readahead-list",
    "readahead-watch",
    "ureadahead",
    "systemd-readahe",
    "preload",
    "e4rat-preload",
    "e4rat-preload-l",
];

fn midpoint(t_ns: Nanos, dt_ns: Nanos) -> Nanos {
    t_ns - dt_ns / 2
}

fn in_any(phases: &[&Phase], t: Nanos) -> bool {
    phases.iter().any(|p| (p.start_ns..p.end_ns).contains(&t))
}

/// Syslog daemons: those that sync a log file after each line keep a boot's disk seeking.
const LOG_DAEMONS: &[&str] = &["syslogd", "rsyslogd", "klogd", "syslog-ng", "metalog"];
/// A log daemon is named when it waited at least this share of the waits.
const LOG_DAEMON_MIN_SHARE: f64 = 0.1;

/// A sentence on the log daemon that waited on the disk through much of the waits, if one did.
fn log_daemon_sentence(processes: &[EvidenceProcess], wait_ns: Nanos) -> String {
    let long = |p: &&EvidenceProcess| p.ns as f64 >= LOG_DAEMON_MIN_SHARE * wait_ns as f64;
    let Some(p) = processes.iter().filter(|p| LOG_DAEMONS.contains(&p.comm.as_str())).find(long) else {
        return String::new();
    };
    format!(
        " {} itself waited {} on the disk: a syslog daemon that syncs its files after every line (sysklogd's \
         default; a `-` before the file in /etc/syslog.conf turns it off) makes the disk seek between the boot's \
         reads.",
        p.comm,
        duration(p.ns)
    )
}

/// One disk's traffic in the waits and its best rate over the whole start.
struct DiskInWaits {
    read_bytes: u64,
    write_bytes: u64,
    write_ios: u64,
    sampled_ns: Nanos,
    busy: f64,
    best_rate: f64,
}

impl DiskInWaits {
    fn rate(&self) -> f64 {
        self.read_bytes as f64 * 1e9 / self.sampled_ns.max(1) as f64
    }
}

/// The disk that read most, measured in and out of the waits.
fn disk_in_waits(samples: &[DiskSample], waits: &[&Phase], ready: Nanos) -> Option<DiskInWaits> {
    let mut by_dev: Vec<(coldstart_trace::Dev, u64)> = Vec::new();
    for s in samples.iter().filter(|s| s.t_ns <= ready) {
        match by_dev.iter_mut().find(|(d, _)| *d == s.dev) {
            Some((_, b)) => *b += s.read_bytes,
            None => by_dev.push((s.dev, s.read_bytes)),
        }
    }
    let dev = by_dev.iter().max_by_key(|(d, b)| (*b, std::cmp::Reverse(*d)))?.0;
    let of_disk: Vec<&DiskSample> =
        samples.iter().filter(|s| s.dev == dev && s.dt_ns > 0 && s.t_ns <= ready).collect();
    let best_rate = of_disk.iter().map(|s| s.read_bytes as f64 * 1e9 / s.dt_ns as f64).fold(0.0, f64::max);
    let in_waits: Vec<&&DiskSample> =
        of_disk.iter().filter(|s| in_any(waits, midpoint(s.t_ns, s.dt_ns))).collect();
    let sampled_ns: Nanos = in_waits.iter().map(|s| s.dt_ns).sum();
    if sampled_ns == 0 {
        return None;
    }
    Some(DiskInWaits {
        read_bytes: in_waits.iter().map(|s| s.read_bytes).sum(),
        write_bytes: in_waits.iter().map(|s| s.write_bytes).sum(),
        write_ios: in_waits.iter().map(|s| s.write_ios).sum(),
        sampled_ns,
        busy: in_waits.iter().map(|s| s.busy * s.dt_ns as f64).sum::<f64>() / sampled_ns as f64,
        best_rate,
    })
}

/// The processes the samples saw waiting on the disk (state `D`) in the waits, longest first.
fn waiting_processes(f: &Facts, samples: &[ProcessSample], waits: &[&Phase]) -> Vec<EvidenceProcess> {
    let mut out: Vec<EvidenceProcess> = Vec::new();
    for s in samples.iter().filter(|s| s.state == 'D' && in_any(waits, midpoint(s.t_ns, s.dt_ns))) {
        match out.iter_mut().find(|p| p.pid == s.pid) {
            Some(p) => p.ns += s.dt_ns,
            None => out.push(EvidenceProcess {
                pid: s.pid,
                comm: f.a.comm(s.pid).to_owned(),
                ns: s.dt_ns,
                read_bytes: 0,
                in_scope: true,
            }),
        }
    }
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.pid.cmp(&b.pid)));
    out
}

/// A boot prefetcher the samples saw running before ready, and how long it waited on the disk.
fn prefetcher(f: &Facts, waiting: &[EvidenceProcess]) -> Option<(String, Nanos)> {
    let pid = f
        .trace
        .process_samples
        .iter()
        .filter(|s| s.t_ns <= f.ready)
        .map(|s| s.pid)
        .find(|&pid| PREFETCHERS.contains(&f.a.comm(pid)))?;
    let comm = f.a.comm(pid).to_owned();
    let waited = waiting.iter().filter(|p| p.comm == comm).map(|p| p.ns).sum();
    Some((comm, waited))
}

/// What the trace is of, in a sentence's words.
fn start_or_boot(f: &Facts) -> &'static str {
    if f.trace.meta.source == Source::Bootchart2 || !f.trace.meta.before_recording.is_empty() {
        "boot"
    } else {
        "start"
    }
}

/// A start that mostly waited on its disk, seen only through the samples.
pub(crate) fn disk_bound(f: &Facts) -> Vec<Finding> {
    if f.a.start.has_sched || !f.trace.block_ios.is_empty() || f.time_to_ready <= 0 {
        return Vec::new();
    }
    let waits: Vec<&Phase> =
        f.a.phases.iter().filter(|p| p.kind == PhaseKind::Read && p.start_ns < f.ready).collect();
    let wait_ns: Nanos = waits.iter().map(|p| p.end_ns.min(f.ready) - p.start_ns).sum();
    if wait_ns < f.min_gain || (wait_ns as f64) < f.config.disk_bound_min_wait_share * f.time_to_ready as f64
    {
        return Vec::new();
    }
    let Some(disk) = disk_in_waits(&f.trace.disk_samples, &waits, f.ready) else { return Vec::new() };
    if disk.busy < f.config.disk_bound_min_busy || disk.best_rate <= 0.0 {
        return Vec::new();
    }
    let seeking = disk.rate() < f.config.disk_bound_seek_rate_share * disk.best_rate;
    let sweep_ns = (disk.read_bytes as f64 * 1e9 / disk.best_rate) as Nanos;
    let gain_ns = if seeking { (wait_ns - sweep_ns).max(0) } else { 0 };
    let processes = waiting_processes(f, &f.trace.process_samples, &waits);
    let prefetcher = prefetcher(f, &processes);
    vec![finding(f, &waits, wait_ns, &disk, seeking, sweep_ns, gain_ns, processes, prefetcher)]
}

/// What the disk also wrote in the waits, when it is a real share of its requests.
fn writes_in_waits(disk: &DiskInWaits) -> String {
    if disk.write_ios == 0 {
        return String::new();
    }
    format!(
        "; it also wrote {} in {} requests then (synchronous log writes and journal commits make a disk seek \
         between them and the reads)",
        bytes(disk.write_bytes),
        disk.write_ios
    )
}

#[allow(clippy::too_many_arguments)]
fn finding(
    f: &Facts,
    waits: &[&Phase],
    wait_ns: Nanos,
    disk: &DiskInWaits,
    seeking: bool,
    sweep_ns: Nanos,
    gain_ns: Nanos,
    mut processes: Vec<EvidenceProcess>,
    prefetcher: Option<(String, Nanos)>,
) -> Finding {
    let what = start_or_boot(f);
    let rate = |r: f64| format!("{}/s", bytes(r as u64));
    let waiters: Vec<String> =
        processes.iter().take(PROCESSES_LISTED).map(|p| format!("{} {}", p.comm, duration(p.ns))).collect();
    let log_daemon = log_daemon_sentence(&processes, wait_ns);
    processes.truncate(PROCESSES_LISTED);
    let verdict = if seeking {
        format!("{}: the disk was seeking", rate(disk.rate()))
    } else {
        format!("{}, near its best: the disk was streaming", rate(disk.rate()))
    };
    Finding {
        kind: FindingKind::DiskBound,
        title: format!(
            "The {what} waited on the disk for {} of {}, reading at {verdict}",
            duration(wait_ns),
            duration(f.time_to_ready)
        ),
        evidence: Evidence {
            summary: format!(
                "in {} stretches ({} of the time to ready) the CPUs mostly waited for I/O; the disk was busy {} of \
                 that time and read {} at {} on average, where it read {} at its best in the same {what}{}",
                waits.len(),
                percent(wait_ns as f64, f.time_to_ready as f64),
                percent(disk.busy, 1.0),
                bytes(disk.read_bytes),
                rate(disk.rate()),
                rate(disk.best_rate),
                if waiters.is_empty() {
                    String::new()
                } else {
                    format!("; waiting on it (state D in the samples): {}", waiters.join(", "))
                }
            ) + &writes_in_waits(disk),
            files: Vec::new(),
            files_total: 0,
            processes,
            figures: vec![
                Figure::ns("wait_ns", wait_ns),
                Figure::bytes("read_bytes", disk.read_bytes),
                Figure::rate("read_rate", disk.rate()),
                Figure::rate("best_rate", disk.best_rate),
                Figure::ratio("busy", disk.busy),
                Figure::ns("time_to_ready_ns", f.time_to_ready),
            ],
            intervals: waits
                .iter()
                .map(|p| EvidenceInterval {
                    start_ns: p.start_ns,
                    end_ns: p.end_ns.min(f.ready),
                    tid: None,
                    what: "the CPUs mostly waiting for the disk".to_owned(),
                })
                .collect(),
        },
        gain: Gain {
            ns: gain_ns,
            formula: if seeking { "wait_ns - read_bytes / best_rate".to_owned() } else { "0".to_owned() },
            text: if seeking {
                format!(
                    "the {} read in those waits, in one sweep at the disk's best {}, take {} instead of {}",
                    bytes(disk.read_bytes),
                    rate(disk.best_rate),
                    duration(sweep_ns),
                    duration(wait_ns)
                )
            } else {
                "none from reading in disk order: the disk already read near its best rate; only reading less, or \
                 a faster disk, shortens these waits"
                    .to_owned()
            },
            inputs: vec![
                Figure::ns("wait_ns", wait_ns),
                Figure::bytes("read_bytes", disk.read_bytes),
                Figure::rate("best_rate", disk.best_rate),
            ],
            ahead_ns: None,
        },
        audience: Audience::Distribution,
        suggestion: suggestion(what, seeking, prefetcher.as_ref()) + &log_daemon,
        verify: if seeking {
            format!(
                "`sudo coldstart boot status`: the service times {what}s with and without the plan, in a random \
                 order, and shows the ratio of their medians with its interval"
            )
        } else {
            format!(
                "compare the {what}'s time to ready before and after the change: `coldstart report` of a {what} \
                 recorded each way (`sudo coldstart boot enable`)"
            )
        },
        confidence: Confidence::Medium,
        caveat: Some(format!(
            "from samples of /proc a few times a second: the trace does not say which files were read, in what order \
             or where on the disk, so the gain assumes they can be read at the best rate this {what} showed"
        )),
    }
}

fn suggestion(what: &str, seeking: bool, prefetcher: Option<&(String, Nanos)>) -> String {
    if let (true, Some((comm, waited))) = (seeking, prefetcher) {
        return format!(
            "This {what} already runs a prefetcher ({comm}, itself {} waiting on the disk), and the disk still \
             seeks: it reads its list file by file, in the list's order, and the list may not be what this {what} \
             reads now. Replace it with a plan of what this {what} reads, in disk order, replayed as the {what} \
             begins: `sudo coldstart boot enable --prefetch` learns it from a recorded {what}, replays it at the \
             next ones and keeps it only where {what}s with it are faster (docs/boot.md).",
            duration(*waited)
        );
    }
    if seeking {
        format!(
            "Read the {what}'s files ahead in one sweep, in disk order, as Fedora's readahead did: `sudo coldstart \
             boot enable --prefetch` records a {what}, makes the plan (every file read, in disk order), replays it \
             as the next {what}s begin and keeps it only where {what}s with it are faster (docs/boot.md). Its \
             recordings also name the files, processes and seeks behind these waits (`coldstart doctor`)."
        )
    } else {
        format!(
            "Read less during the {what}: record it with coldstart (`sudo coldstart boot enable`, then reboot) to \
             see which processes and files the disk's time went to (`coldstart doctor BOOT.coldstart`), and start \
             later, or not at all, what the {what} does not need."
        )
    }
}

/// The collectors whose own processes (a `sleep` between samples) are not the start's.
const COLLECTORS: &[&str] = &["bootchartd", "bootchart", "bootchart-colle", "busybox", "coldstart"];
/// Families of processes named.
const FAMILIES_LISTED: usize = 4;

/// Processes that a run of one program started, directly or not, all gone before ready.
struct Family {
    /// The program run many times (the topmost of each run's processes).
    comm: String,
    /// Who started the runs (`khelper`: the kernel, once per device event).
    parent: String,
    runs: u64,
    processes: u64,
    /// What the runs started most, by name.
    children: Vec<(String, u64)>,
}

/// Each process's topmost ancestor among `transient` ones: the run it belongs to.
fn run_roots(f: &Facts, transient: &FxHashSet<i32>) -> FxHashMap<i32, i32> {
    let ppid = |pid: i32| f.trace.processes.iter().find(|p| p.pid == pid).and_then(|p| p.ppid);
    let parents: FxHashMap<i32, Option<i32>> = transient.iter().map(|&pid| (pid, ppid(pid))).collect();
    transient
        .iter()
        .map(|&pid| {
            let mut root = pid;
            for _ in 0..64 {
                match parents.get(&root).copied().flatten() {
                    Some(parent) if transient.contains(&parent) => root = parent,
                    _ => break,
                }
            }
            (pid, root)
        })
        .collect()
}

/// The families of runs, most processes first.
fn families(f: &Facts, transient: &FxHashSet<i32>) -> Vec<Family> {
    let roots = run_roots(f, transient);
    let mut out: Vec<Family> = Vec::new();
    let mut root_pids: Vec<i32> = roots.values().copied().collect::<FxHashSet<i32>>().into_iter().collect();
    root_pids.sort_unstable();
    for root in root_pids {
        let comm = f.a.comm(root).to_owned();
        let parent = f.trace.processes.iter().find(|p| p.pid == root).and_then(|p| p.ppid);
        let parent = parent.map_or("?".to_owned(), |pp| f.a.comm(pp).to_owned());
        let members: Vec<i32> = roots.iter().filter(|(_, r)| **r == root).map(|(p, _)| *p).collect();
        let family = match out.iter_mut().position(|x| x.comm == comm && x.parent == parent) {
            Some(i) => &mut out[i],
            None => {
                out.push(Family { comm, parent, runs: 0, processes: 0, children: Vec::new() });
                out.last_mut().expect("just pushed")
            }
        };
        family.runs += 1;
        family.processes += members.len() as u64;
        for pid in members.into_iter().filter(|&p| p != root) {
            let name = f.a.comm(pid);
            match family.children.iter_mut().find(|(n, _)| n == name) {
                Some((_, n)) => *n += 1,
                None => family.children.push((name.to_owned(), 1)),
            }
        }
    }
    for family in &mut out {
        family.children.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    }
    out.sort_by(|a, b| b.processes.cmp(&a.processes).then(a.comm.cmp(&b.comm)));
    out
}

/// The processes started and gone before ready, the collector's own left out.
fn transient_processes(f: &Facts) -> FxHashSet<i32> {
    let collector = |pid: Option<i32>| pid.is_some_and(|p| COLLECTORS.contains(&f.a.comm(p)));
    f.trace
        .processes
        .iter()
        .filter(|p| matches!((p.start_ns, p.end_ns), (Some(s), Some(e)) if s >= f.origin && e <= f.ready))
        .filter(|p| !COLLECTORS.contains(&p.comm.as_str()) && !collector(p.ppid))
        .map(|p| p.pid)
        .collect()
}

fn family_words(family: &Family) -> String {
    let children: Vec<String> =
        family.children.iter().take(4).map(|(name, n)| format!("{name} ×{n}")).collect();
    let helper =
        if family.parent == "khelper" { ", the kernel's helper: one run per device event" } else { "" };
    format!(
        "{} of {} (started by {}{helper}), {} processes{}",
        plural(family.runs, "run"),
        family.comm,
        family.parent,
        family.processes,
        if children.is_empty() { String::new() } else { format!(": {}", children.join(", ")) }
    )
}

/// A start that ran thousands of short processes, seen in a trace without scheduler data.
pub(crate) fn many_short_processes(f: &Facts) -> Vec<Finding> {
    if f.a.start.has_sched {
        return Vec::new();
    }
    let transient = transient_processes(f);
    if (transient.len() as u64) < f.config.many_short_processes_min {
        return Vec::new();
    }
    let families = families(f, &transient);
    let cpu_ns: Nanos =
        f.a.phases
            .iter()
            .filter(|p| p.kind == PhaseKind::Cpu && p.start_ns < f.ready)
            .map(|p| p.end_ns.min(f.ready) - p.start_ns)
            .sum();
    let listed: Vec<String> = families.iter().take(FAMILIES_LISTED).map(family_words).collect();
    let what = start_or_boot(f);
    let top = &families[0];
    vec![Finding {
        kind: FindingKind::ManyShortProcesses,
        title: format!(
            "{} processes started and ended before ready, {} of them in {} runs of {}",
            transient.len(),
            top.processes,
            top.runs,
            top.comm
        ),
        evidence: Evidence {
            summary: format!(
                "{}; the CPUs were busy for {} of the {} to ready",
                listed.join("; "),
                duration(cpu_ns),
                duration(f.time_to_ready)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: Vec::new(),
            figures: vec![
                Figure::count("processes", transient.len() as u64),
                Figure::count("runs", top.runs),
                Figure::count("run_processes", top.processes),
                Figure::ns("cpu_ns", cpu_ns),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: 0,
            formula: "0".to_owned(),
            text: format!(
                "not estimated: the log has no CPU time per short process; the CPU-bound stretches of the {what} \
                 total {}, the most these runs can have cost",
                duration(cpu_ns)
            ),
            inputs: vec![Figure::ns("cpu_ns", cpu_ns)],
            ahead_ns: None,
        },
        audience: Audience::Distribution,
        suggestion: format!(
            "Do {}'s work without a chain of processes per run (each fork and exec of a shell, and each script it \
             reads, costs CPU and disk on a cold start): {}. Then record the {what} with coldstart (`sudo coldstart \
             boot enable`), whose critical path says which runs the {what} waited for.",
            top.comm,
            if top.parent == "khelper" {
                "device events belong in one event daemon's rules (udev), not in a helper the kernel starts per event \
                 (an empty /proc/sys/kernel/hotplug)"
                    .to_owned()
            } else {
                format!("one long-lived process, or {} itself, can do what the runs do", top.parent)
            }
        ),
        verify: format!("compare the {what}'s time to ready before and after, recorded each way"),
        confidence: Confidence::Low,
        caveat: Some(format!(
            "from process accounting and samples: which of these processes the {what} waited for is not in the trace"
        )),
    }]
}
