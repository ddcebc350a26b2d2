//! `coldstart boot service` (hidden): what coldstart-boot.service runs after `boot enable
//! --prefetch`. At each boot it reads the service's state under /var/lib/coldstart/boot,
//! takes the boot's decision (`coldstart_bench::boot_service`), replays the plan alongside
//! the boot when the decision says so (`prefetch run`, its device-aware mode), records the
//! boot lightly, appends the boot's row to the history once the target is reached, and after
//! a learning boot makes the plan (`prefetch plan`). Under the init= wrapper (`boot init`)
//! the same runs before systemd, and the unit's run of that boot steps aside. Nothing here
//! stops a boot: a bad or missing state is said in one journal line, and the boot learns.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasher, Hasher};
use std::io::ErrorKind;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use coldstart_bench::boot_service::{BootRow, Machine, Params, PlanNow, Role, decide, plan_from};
use coldstart_launch::Until;
use coldstart_prefetch::fleet::{FleetPages, FleetTrace, more_than_half};
use coldstart_prefetch::plan::{Plan, PlanFile, PlanFileKind};
use coldstart_prefetch::{Order, PlanSettings};
use coldstart_trace::{Dev, Trace};
use serde::{Deserialize, Serialize};

use crate::cmd::boot::{DEFAULT_UNTIL, exec_word};
use crate::cmd::prefetch_fleet::LiveImage;
use crate::cmd::values;

/// The service's state: history.jsonl, the plan and what it was made on, recent traces.
pub const STATE_DIR: &str = "/var/lib/coldstart/boot";
pub const HISTORY: &str = "history.jsonl";
const PLAN: &str = "boot.plan";
const PLAN_META: &str = "plan-meta.json";
const REPLAY_REPORT: &str = "replay.json";
/// The plan's stale share as the last boot measured it, after its target.
const STALE_SHARE: &str = "stale-share";
const TRACES: &str = "traces";

/// The service's settings, given to `boot enable --prefetch` and passed on to `boot service`.
#[derive(Clone, Debug, clap::Args)]
pub struct Tuning {
    /// Boots with the plan, and as many without, in a random but balanced order, before the
    /// plan is kept (boots with it faster, the 95% interval of the ratio of medians below 1)
    /// or switched off.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_VERIFY_BOOTS, value_parser = clap::value_parser!(u32).range(1..=50))]
    pub verify_boots: u32,
    /// Boots after a verdict before the plan is verified again.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_REVERIFY_EVERY, value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub reverify_every: u32,
    /// Traces of the last boots kept under /var/lib/coldstart/boot/traces (never fewer than
    /// --learn-boots).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_KEEP_TRACES, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub keep_traces: u32,
    /// Learning boots the plan is made from: it keeps the pages more than half of them used
    /// (all of 1 or 2, 2 of 3, 3 of 4), so what one boot happened to read is left out.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_LEARN_BOOTS, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub learn_boots: u32,
}

const DEFAULT_VERIFY_BOOTS: u32 = 3;
const DEFAULT_REVERIFY_EVERY: u32 = 20;
const DEFAULT_KEEP_TRACES: u32 = 4;
const DEFAULT_LEARN_BOOTS: u32 = 2;

impl Tuning {
    /// Whether any option differs from its default (they mean something with --prefetch only).
    pub fn is_set(&self) -> bool {
        (self.verify_boots, self.reverify_every, self.keep_traces, self.learn_boots)
            != (DEFAULT_VERIFY_BOOTS, DEFAULT_REVERIFY_EVERY, DEFAULT_KEEP_TRACES, DEFAULT_LEARN_BOOTS)
    }

    pub fn params(&self) -> Params {
        Params {
            verify_boots: self.verify_boots as usize,
            reverify_every: self.reverify_every as usize,
            learn_boots: self.learn_boots as usize,
            ..Params::default()
        }
    }

    /// The options as `boot service` takes them.
    pub fn words(&self) -> Vec<String> {
        vec![
            "--verify-boots".into(),
            self.verify_boots.to_string(),
            "--reverify-every".into(),
            self.reverify_every.to_string(),
            "--keep-traces".into(),
            self.keep_traces.to_string(),
            "--learn-boots".into(),
            self.learn_boots.to_string(),
        ]
    }
}

/// Run by coldstart-boot.service: decide, replay, record and learn (see `boot enable --prefetch`).
#[derive(Debug, clap::Args)]
pub struct ServiceArgs {
    /// When the boot is over (repeatable: all must be met).
    #[arg(long, value_name = "WHEN", default_value = DEFAULT_UNTIL)]
    pub until: Vec<Until>,
    /// Stop recording after this long even if the conditions are not met.
    #[arg(long, value_name = "DURATION", default_value = "120", value_parser = values::positive_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub tuning: Tuning,
    /// Where the service keeps its state.
    #[arg(long, value_name = "DIR", default_value = STATE_DIR)]
    pub state_dir: PathBuf,
    /// Set by the init= wrapper, which runs the service before systemd: when the wrapper
    /// started (CLOCK_MONOTONIC ns), the origin of the boot's time to target.
    #[arg(long, hide = true, value_name = "NS")]
    pub init_started_ns: Option<u64>,
}

/// Left in /run by the service the init= wrapper started, so the unit's start of the
/// service that boot steps aside.
const WRAPPER_MARK: &str = "/run/coldstart/prefetch-service-under-init";

/// What `plan-meta.json` says of the plan.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct PlanMeta {
    id: String,
    made_on: Machine,
    from_trace: String,
    /// Planned files the learning boots wrote (a journal, wtmp): the machine's state, which
    /// every boot changes. The replay skips them once changed; they never make the plan stale.
    #[serde(default)]
    written_by_boots: Vec<String>,
}

pub fn run(args: ServiceArgs) -> anyhow::Result<ExitCode> {
    if args.init_started_ns.is_some() {
        if let Err(e) = std::fs::write(WRAPPER_MARK, std::process::id().to_string()) {
            eprintln!("coldstart: cannot write {WRAPPER_MARK} ({e}): the unit may run the service again");
        }
    } else if let Ok(pid) = std::fs::read_to_string(WRAPPER_MARK) {
        eprintln!(
            "coldstart: the init= wrapper runs the prefetch service this boot (pid {pid}): nothing to do"
        );
        let _ = coldstart_record::boot::notify("READY=1");
        return Ok(ExitCode::SUCCESS);
    }
    serve(&Service {
        what: "boot",
        state_dir: &args.state_dir,
        tuning: &args.tuning,
        replay_report: Path::new(RUN_REPLAY_REPORT),
        record: &|output, also_tell| record(&args, output, also_tell),
        time_to_target: &|trace| time_to_target(&args.until, trace, args.init_started_ns),
    })
}

/// What the prefetch service serves: a boot, or a user's login (`login service`).
pub struct Service<'a> {
    /// `boot` or `login`, as the journal lines name it.
    pub what: &'a str,
    pub state_dir: &'a Path,
    pub tuning: &'a Tuning,
    /// Where the replay writes its report (copied to the state once the target is reached).
    pub replay_report: &'a Path,
    /// Records the start to `output`, until its target, telling these sockets too once it records.
    pub record: &'a dyn Fn(&Path, &[String]) -> anyhow::Result<ExitCode>,
    /// Seconds from the start to its target, from the trace (when it was written) and the clock.
    pub time_to_target: &'a dyn Fn(Option<&Trace>) -> Option<f64>,
}

/// One start under the service: decide, replay the plan or not, record, append the row,
/// and after a learning start make the plan.
pub fn serve(service: &Service) -> anyhow::Result<ExitCode> {
    let dir = service.state_dir;
    let history = read_history(&dir.join(HISTORY));
    let meta = read_plan_meta(dir);
    let now = this_machine();
    let plan_now = meta.as_ref().map(|meta| PlanNow {
        id: meta.id.clone(),
        made_on: meta.made_on.clone(),
        stale_share: read_stale_share(dir),
    });
    let mut decision = decide(&history, plan_now.as_ref(), &now, &service.tuning.params(), coin());
    decision.reason = decision.reason.replace("boot", service.what);
    eprintln!("coldstart: this {}: {} ({})", service.what, decision.role.name(), decision.reason);
    let meta = if decision.drop_plan {
        for name in [PLAN, PLAN_META] {
            let _ = std::fs::remove_file(dir.join(name));
        }
        None
    } else {
        meta
    };
    let replay = (decision.role == Role::WithPlan).then(|| DeferredReplay::new(dir, service.replay_report));
    let tell: Vec<String> = replay.iter().map(|r| r.socket.clone()).collect();
    let trace_path = coldstart_record::boot::start_output(&dir.join(TRACES), service.what, unix_now_s());
    let recorded = (service.record)(&trace_path, &tell);
    let replay_pid = replay.and_then(DeferredReplay::started).map(finish_replay);
    // Read once the target is reached: before, its parse delayed every boot's recording.
    let plan = meta.and_then(|meta| load_plan(dir, meta));
    if replay_pid.is_some() && std::fs::copy(service.replay_report, dir.join(REPLAY_REPORT)).is_err() {
        eprintln!("coldstart: the replay wrote no report ({})", service.replay_report.display());
    }
    let trace = match Trace::read(&trace_path) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("coldstart: no trace of this {}: {}", service.what, coldstart_trace::error_chain(&e));
            None
        }
    };
    let (plan_used, read_left_bytes) = match &trace {
        Some(t) => figures(t, plan.as_ref().map(|(_, p)| p.files.as_slice()), replay_pid),
        None => (None, 0),
    };
    let row = BootRow {
        at_unix_s: unix_now_s(),
        role: decision.role,
        plan: plan.as_ref().map(|(meta, _)| meta.id.clone()),
        target_s: (service.time_to_target)(trace.as_ref()),
        plan_used,
        read_left_bytes,
        machine: now.clone(),
        state: decision.state.word().into(),
        reason: decision.reason.clone(),
        verdict: decision.state.verdict(),
        trace: trace.is_some().then(|| file_name(&trace_path)),
    };
    coldstart_record::boot::create_trace_dir(dir)?;
    let params = service.tuning.params();
    if decision.role == Role::Learn
        && let Some(learned) = plan_from(&history, row.trace.as_deref(), &params)
    {
        let traces: Vec<PathBuf> = learned.iter().map(|name| dir.join(TRACES).join(name)).collect();
        make_plan(dir, &traces, &now);
    }
    note_stale_share(dir, plan.as_ref().map(|(meta, plan)| (meta, plan.files.as_slice())));
    prune_traces(&dir.join(TRACES), (service.tuning.keep_traces as usize).max(params.learn_boots));
    // The row last: once it is there, the start's work (plan included) is done.
    append_row(&dir.join(HISTORY), &row)?;
    recorded
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

fn unix_now_s() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64)
}

/// A random bit (the standard library's per-process random hash keys).
fn coin() -> bool {
    std::collections::hash_map::RandomState::new().build_hasher().finish() & 1 == 1
}

/// The history's rows; lines that cannot be read are skipped, and said once.
pub fn read_history(path: &Path) -> Vec<BootRow> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return Vec::new(),
        Err(e) => {
            eprintln!("coldstart: cannot read {}: {e}", path.display());
            return Vec::new();
        }
    };
    let mut bad = 0;
    let rows: Vec<BootRow> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| serde_json::from_str(l).map_err(|_| bad += 1).ok())
        .collect();
    if bad > 0 {
        eprintln!("coldstart: {bad} unreadable lines of {} skipped", path.display());
    }
    rows
}

/// Appends `row`: the whole file written anew beside it and renamed over it.
fn append_row(path: &Path, row: &BootRow) -> anyhow::Result<()> {
    let mut text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&serde_json::to_string(row)?);
    text.push('\n');
    write_atomically(path, text.as_bytes())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let new = path.with_extension("new");
    std::fs::write(&new, bytes).with_context(|| format!("cannot write {}", new.display()))?;
    std::fs::set_permissions(&new, std::fs::Permissions::from_mode(0o600))?;
    std::fs::rename(&new, path).with_context(|| format!("cannot replace {}", path.display()))
}

/// The plan and what it was made on, when both are there and readable.
/// What the plan in force was made on (`None`: no plan, or one that cannot be used, said).
fn read_plan_meta(dir: &Path) -> Option<PlanMeta> {
    let meta = match std::fs::read_to_string(dir.join(PLAN_META)) {
        Ok(text) => text,
        Err(e) if e.kind() == ErrorKind::NotFound => return None,
        Err(e) => {
            eprintln!("coldstart: cannot read {}: {e}; learning again", dir.join(PLAN_META).display());
            return None;
        }
    };
    if !dir.join(PLAN).is_file() {
        eprintln!("coldstart: {} is missing; learning again", dir.join(PLAN).display());
        return None;
    }
    serde_json::from_str::<PlanMeta>(&meta)
        .map_err(|e| {
            eprintln!("coldstart: {} is unreadable ({e}); learning again", dir.join(PLAN_META).display())
        })
        .ok()
}

/// The plan `meta` describes; an unreadable one is removed (said), so the next start learns.
fn load_plan(dir: &Path, meta: PlanMeta) -> Option<(PlanMeta, Plan)> {
    match Plan::load(&dir.join(PLAN)) {
        Ok(plan) => Some((meta, plan)),
        Err(e) => {
            eprintln!("coldstart: the plan is unreadable ({e}); the next start learns again");
            for name in [PLAN, PLAN_META] {
                let _ = std::fs::remove_file(dir.join(name));
            }
            None
        }
    }
}

/// This machine as a plan depends on it.
pub fn this_machine() -> Machine {
    let kernel =
        nix::sys::utsname::uname().map(|u| u.release().to_string_lossy().into_owned()).unwrap_or_default();
    let root_device = std::fs::read_to_string("/proc/self/mountinfo")
        .ok()
        .and_then(|text| {
            text.lines().rev().find_map(|line| {
                let fields: Vec<&str> = line.split(' ').collect();
                let dash = fields.iter().position(|f| *f == "-")?;
                let (fstype, source) = (fields.get(dash + 1)?, fields.get(dash + 2)?);
                (fields.get(4) == Some(&"/")).then(|| format!("{fstype} {source}"))
            })
        })
        .unwrap_or_default();
    let packages_stamp = [
        "/var/lib/dpkg/status",
        "/var/lib/rpm/rpmdb.sqlite",
        "/var/lib/rpm/Packages",
        "/usr/lib/sysimage/rpm/rpmdb.sqlite",
    ]
    .iter()
    .find_map(|p| std::fs::metadata(p).ok())
    .map_or(0, |m| m.mtime() * 1_000_000_000 + m.mtime_nsec());
    Machine { kernel, root_device, packages_stamp }
}

/// The share of the planned bytes whose files are gone or changed (another inode, size or
/// modification time), as the replay would skip them; the boots' own files (`written`) left out.
fn stale_share(files: &[PlanFile], written: &[String]) -> f64 {
    let written: HashSet<&str> = written.iter().map(String::as_str).collect();
    let (mut stale, mut all) = (0u64, 0u64);
    let image =
        files.iter().filter(|f| f.kind == PlanFileKind::Regular && !written.contains(f.path.as_str()));
    for file in image {
        let bytes: u64 = file.ranges.iter().map(|r| r.length).sum();
        all += bytes;
        let same = std::fs::metadata(&file.path).is_ok_and(|m| {
            Dev::from_user(m.dev()) == file.dev
                && m.ino() == file.ino
                && file.size.is_none_or(|s| s == m.size())
                && file.mtime_ns.is_none_or(|t| t == m.mtime() * 1_000_000_000 + m.mtime_nsec())
        });
        if !same {
            stale += bytes;
        }
    }
    if all == 0 { 0.0 } else { stale as f64 / all as f64 }
}

/// Where the replay writes its report: / may still be read-only when it ends (under the
/// init= wrapper, before systemd remounts it); the service copies it to its state after the target.
const RUN_REPLAY_REPORT: &str = "/run/coldstart/boot-replay.json";

/// The replay, started once the recording runs: started before, it filled the disk's queue
/// while the service's own start (the recorder's set-up, its libraries from the same disk)
/// waited behind it, and the boot began 0.67 s later (the container on the emulated hdd).
struct DeferredReplay {
    /// The socket the recorder tells `READY=1`.
    socket: String,
    over: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Option<Child>>,
}

impl DeferredReplay {
    fn new(dir: &Path, report: &Path) -> DeferredReplay {
        use std::os::linux::net::SocketAddrExt;
        use std::os::unix::net::{SocketAddr, UnixDatagram};
        let name = format!("coldstart-replay-{}", std::process::id());
        let over = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let bound = SocketAddr::from_abstract_name(name.as_bytes()).and_then(|a| UnixDatagram::bind_addr(&a));
        let (dir, report, until_over) = (dir.to_owned(), report.to_owned(), over.clone());
        let thread = std::thread::spawn(move || {
            let socket = bound
                .map_err(|e| eprintln!("coldstart: no socket to start the replay on ({e}): starting it now"))
                .ok();
            if let Some(socket) = &socket {
                let _ = socket.set_read_timeout(Some(Duration::from_millis(100)));
                let mut buffer = [0u8; 64];
                loop {
                    if socket.recv(&mut buffer).is_ok_and(|n| buffer[..n].starts_with(b"READY=1")) {
                        break;
                    }
                    if until_over.load(std::sync::atomic::Ordering::Relaxed) {
                        return None; // the recording ended without starting
                    }
                }
            }
            start_replay(&dir, &report)
        });
        DeferredReplay { socket: format!("@{name}"), over, thread }
    }

    /// The replay, once the recording is over (`None` when it could not start).
    fn started(self) -> Option<Child> {
        self.over.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().ok().flatten()
    }
}

/// Starts `prefetch run` of the plan alongside the boot; `None` (said) when it cannot.
fn start_replay(dir: &Path, report: &Path) -> Option<Child> {
    let me = std::env::current_exe().ok()?;
    let _ = report.parent().map(std::fs::create_dir_all);
    Command::new(me)
        .args(["prefetch", "run", "--quiet", "--json"])
        .arg(report)
        .arg(dir.join(PLAN))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| eprintln!("coldstart: cannot start the replay: {e}; the boot goes on without it"))
        .ok()
}

/// Waits for the replay (a minute at most, then ends it); returns its pid.
fn finish_replay(mut child: Child) -> i32 {
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() && started.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
    }
    if child.try_wait().ok().flatten().is_none() {
        eprintln!("coldstart: the replay still ran a minute after the target: ended");
        let _ = child.kill();
    }
    let _ = child.wait();
    child.id() as i32
}

/// `record --boot`, lightly: no CPU stacks, no scheduler events, no slow-call capture.
fn record(args: &ServiceArgs, output: &Path, also_tell: &[String]) -> anyhow::Result<ExitCode> {
    // Configured here rather than parsed as `record --boot …` words: the parse, cold, was
    // 60 ms of every boot before systemd could start.
    let me = std::env::current_exe().context("cannot find the running coldstart binary")?;
    let config = coldstart_record::RecordConfig {
        command: vec![me.into_os_string(), "boot".into(), "hold".into()],
        output: Some(output.to_owned()),
        system: true,
        boot: true,
        system_manager_later: args.init_started_ns.is_some(),
        until: crate::cmd::boot::boot_conditions(&args.until)?,
        timeout: Some(args.timeout),
        as_root: true,
        sample_hz: 10.0,
        cpu_samples: None,
        slow_syscalls: None,
        spool_root: coldstart_record::boot::BOOT_SPOOL_ROOT.into(),
        without: "scheduler".parse().map_err(|e: String| anyhow::anyhow!(e))?,
        notify_sockets: also_tell.to_vec(),
        ..coldstart_record::RecordConfig::default()
    };
    let recorded = coldstart_record::record(&config)?;
    crate::cmd::record::print_recorded(&recorded, false);
    Ok(if recorded.unmet.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// From the boot's start to its target: systemd's own timestamps for a `unit:` target (from
/// the init= wrapper's start `init_started_ns` when it ran the service, else from systemd's),
/// otherwise the trace's readiness plus the time before the recording.
fn time_to_target(until: &[Until], trace: Option<&Trace>, init_started_ns: Option<u64>) -> Option<f64> {
    let unit = until.iter().find_map(|u| match u {
        Until::Unit(spec) => Some(spec.name.clone()),
        _ => None,
    });
    if let Some(seconds) = unit.and_then(|u| systemd_time_to(&u, init_started_ns.map(|ns| ns / 1000))) {
        return Some(seconds);
    }
    let trace = trace?;
    let ready = trace.meta.ready.as_ref()?.t_ns;
    let before: i64 = trace.meta.before_recording.iter().filter(|p| p.phase != "host").map(|p| p.ns).sum();
    Some((ready + before) as f64 / 1e9)
}

fn systemd_time_to(unit: &str, origin_us: Option<u64>) -> Option<f64> {
    let show = |args: &[&str]| -> Option<u64> {
        let out = Command::new("systemctl").args(["show", "--value"]).args(args).output().ok()?;
        String::from_utf8_lossy(&out.stdout).trim().parse().ok()
    };
    let origin = match origin_us {
        Some(us) => us,
        None => show(&["-p", "UserspaceTimestampMonotonic"])?,
    };
    let active = show(&["-p", "ActiveEnterTimestampMonotonic", unit])?;
    (origin > 0 && active > origin).then(|| (active - origin) as f64 / 1e6)
}

/// The share of the plan's pages the boot itself used (its page accesses and fills, the
/// replay's left out), and the bytes it read from disk outside the plan.
fn figures(trace: &Trace, plan: Option<&[PlanFile]>, replay_pid: Option<i32>) -> (Option<f64>, u64) {
    let page = u64::from(if trace.meta.page_size == 0 { 4096 } else { trace.meta.page_size });
    let replay: HashSet<i32> = trace
        .processes
        .iter()
        .filter(|p| p.comm == "coldstart" || Some(p.pid) == replay_pid)
        .map(|p| p.pid)
        .chain(replay_pid)
        .collect();
    let mut planned: HashMap<&str, Vec<(u64, u64)>> = HashMap::new();
    for file in plan.unwrap_or_default() {
        let pages = file.ranges.iter().map(|r| (r.offset / page, (r.offset + r.length).div_ceil(page)));
        planned.entry(file.path.as_str()).or_default().extend(pages);
    }
    let in_plan: HashMap<u32, &Vec<(u64, u64)>> =
        trace.files.iter().filter_map(|f| Some((f.id, planned.get(f.path.as_deref()?)?))).collect();
    let covered = |file: u32, index: u64| {
        in_plan.get(&file).is_some_and(|r| r.iter().any(|&(a, b)| a <= index && index < b))
    };
    let mut used: HashSet<(u32, u64)> = HashSet::new();
    let mut read_left = 0;
    for fill in trace.page_fills.iter().filter(|f| !replay.contains(&f.pid)) {
        for index in fill.index..fill.index + u64::from(fill.pages) {
            if covered(fill.file_id, index) {
                used.insert((fill.file_id, index));
            } else {
                read_left += page;
            }
        }
    }
    for access in trace.page_accesses.iter().filter(|a| !replay.contains(&a.pid)) {
        for index in access.index..access.index + u64::from(access.pages.max(1)) {
            if covered(access.file_id, index) {
                used.insert((access.file_id, index));
            }
        }
    }
    let planned_pages: u64 = planned.values().flatten().map(|(a, b)| b - a).sum();
    // Without page-access events (kernels before 6.11) a page the replay cached leaves no trace
    // when the boot uses it: the share cannot be measured, and 0 would make the plan look unused.
    let measurable = plan.is_some() && planned_pages > 0 && !trace.page_accesses.is_empty();
    let share = measurable.then(|| used.len() as f64 / planned_pages as f64);
    (share.map(|s| s.min(1.0)), read_left)
}

/// The plan of the learning boots' traces, and what it was made on: of one trace, as
/// `prefetch plan` makes it; of several, the pages more than half of them used
/// (`coldstart_prefetch::fleet`, as `prefetch plan --dataset --min-share` plans a fleet).
fn make_plan(dir: &Path, traces: &[PathBuf], now: &Machine) {
    let names: Vec<String> = traces.iter().map(|t| file_name(t)).collect();
    let made = (|| -> anyhow::Result<()> {
        let new = dir.join(format!("{PLAN}.new"));
        match traces {
            [one] => plan_one(one, &new)?,
            [.., last] => {
                // A fleet's plan leaves metadata out (each machine has its own offsets);
                // the learning starts were all this machine's: the last one's go first.
                plan_one(last, &new)?;
                let mut plan = plan_several(traces)?;
                add_metadata(&mut plan, &Plan::load(&new)?);
                plan.save(&new)?
            }
            [] => anyhow::bail!("no learning trace"),
        }
        std::fs::rename(&new, dir.join(PLAN))?;
        let meta = PlanMeta {
            id: format!("plan-{}", unix_now_s()),
            made_on: now.clone(),
            from_trace: names.join(" "),
            written_by_boots: written_since(&Plan::load(&dir.join(PLAN))?.files, first_start_ns(traces)),
        };
        write_atomically(&dir.join(PLAN_META), serde_json::to_string_pretty(&meta)?.as_bytes())
    })();
    match made {
        Ok(()) => eprintln!("coldstart: made the plan from {}", names.join(", ")),
        Err(e) => {
            eprintln!("coldstart: no plan made from {}: {e:#}; the next start learns again", names.join(", "))
        }
    }
}

/// The stale share the last boot measured (0 when none did, or a new plan was made since).
fn read_stale_share(dir: &Path) -> f64 {
    std::fs::read_to_string(dir.join(STALE_SHARE)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0.0)
}

/// Measures the stale share of the plan in force after the target, when the boot has read
/// the planned files' metadata anyway (at the start it would cost a seek per file on a cold
/// disk, before the replay begins), for the next boot's decision; a plan made this boot has none.
fn note_stale_share(dir: &Path, plan: Option<(&PlanMeta, &[PlanFile])>) {
    let path = dir.join(STALE_SHARE);
    let current = read_plan_meta_id(dir);
    match plan {
        Some((meta, files)) if current.as_deref() == Some(meta.id.as_str()) => {
            let share = stale_share(files, &meta.written_by_boots);
            if let Err(e) = write_atomically(&path, format!("{share}\n").as_bytes()) {
                eprintln!("coldstart: the plan's stale share is not kept: {e:#}");
            }
        }
        _ => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn read_plan_meta_id(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join(PLAN_META)).ok()?;
    serde_json::from_str::<PlanMeta>(&text).ok().map(|m| m.id)
}

/// When the first of the learning boots began (ns since 1970; `i64::MAX` if no trace reads).
fn first_start_ns(traces: &[PathBuf]) -> i64 {
    traces.iter().filter_map(|t| Trace::read(t).ok()).map(|t| t.meta.start_unix_ns).min().unwrap_or(i64::MAX)
}

/// The plan's files modified since `since_ns`: written by the boots the plan was made from.
fn written_since(files: &[PlanFile], since_ns: i64) -> Vec<String> {
    files
        .iter()
        .filter(|f| f.kind == PlanFileKind::Regular)
        .filter(|f| {
            std::fs::metadata(&f.path).is_ok_and(|m| m.mtime() * 1_000_000_000 + m.mtime_nsec() >= since_ns)
        })
        .map(|f| f.path.clone())
        .collect()
}

/// `prefetch plan` of one trace.
fn plan_one(trace: &Path, output: &Path) -> anyhow::Result<()> {
    let me = std::env::current_exe()?;
    let out = Command::new(me)
        .args(["prefetch", "plan", "--force", "-o"])
        .arg(output)
        .arg(trace)
        .stdin(Stdio::null())
        .output()?;
    if !out.status.success() {
        anyhow::bail!("prefetch plan: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Puts `from`'s filesystem metadata (block-device ranges) at the start of `plan`.
fn add_metadata(plan: &mut Plan, from: &Plan) {
    use coldstart_prefetch::plan::Step;
    let mut first = Vec::new();
    for file in from.files.iter().filter(|f| f.kind == PlanFileKind::BlockDevice) {
        let index = plan.files.len();
        let bytes: u64 = file.ranges.iter().map(|r| r.length).sum();
        plan.stats.planned_bytes += bytes;
        plan.stats.planned_metadata_bytes += bytes;
        plan.stats.ranges += file.ranges.len();
        first.extend((0..file.ranges.len()).map(|range| Step::Range { file: index, range }));
        plan.files.push(file.clone());
    }
    plan.notes.retain(|n| !n.starts_with("filesystem metadata is not planned"));
    first.append(&mut plan.steps);
    plan.steps = first;
}

/// The plan of the pages more than half of `traces` used, for this machine's files, in disk
/// order (a boot's).
pub fn plan_several(traces: &[PathBuf]) -> anyhow::Result<Plan> {
    let mut pages = FleetPages::new();
    for path in traces {
        let trace = Trace::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        pages.add(&FleetTrace::from_trace(&trace, &file_name(path)))?;
    }
    let settings = PlanSettings { order: Order::Disk, ..PlanSettings::default() };
    let tool = format!("coldstart {}", env!("CARGO_PKG_VERSION"));
    let share = more_than_half(traces.len());
    Ok(pages.plan(&LiveImage, share, &settings, "the learning boots", &tool)?)
}

/// Removes all but the newest `keep` traces.
fn prune_traces(dir: &Path, keep: usize) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut traces: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "coldstart"))
        .collect();
    traces.sort();
    for old in traces.iter().rev().skip(keep) {
        let _ = std::fs::remove_file(old);
    }
}

/// The `ExecStart=` words of the service with these options (after the binary).
pub fn exec_words(until: &[Until], timeout: Duration, tuning: &Tuning) -> String {
    let mut words = vec!["boot".to_owned(), "service".into()];
    for u in until {
        words.extend(["--until".into(), u.to_string()]);
    }
    words.extend(["--timeout".into(), format!("{}", timeout.as_secs_f64())]);
    words.extend(tuning.words());
    words.iter().map(|w| exec_word(w)).collect::<Vec<_>>().join(" ")
}

/// The prefetch service's table of recent boots (`boot status`), when it has a history.
/// `what` names a start: `boot` or `login`.
pub fn print_status(state: &Path, what: &str) {
    let rows = read_history(&state.join(HISTORY));
    if rows.is_empty() {
        if state.exists() {
            println!("prefetch service: no {what} in its history yet ({})", state.display());
        }
        return;
    }
    println!("prefetch service, the last {what}s ({}):", state.join(HISTORY).display());
    print!("{}", status_table(&rows[rows.len().saturating_sub(STATUS_ROWS)..], what));
    let last = &rows[rows.len() - 1];
    println!("  now: {}", last.reason);
    if let Some(v) = rows.iter().rev().find_map(|r| r.verdict) {
        println!(
            "  last verification: {}{}",
            v.describe().replace("boot", what),
            if v.keeps() { ": kept" } else { ": switched off" }
        );
    }
}

const STATUS_ROWS: usize = 12;

/// One line per boot (or login): when, role, time to target, share of the plan used, reads left, decision.
pub fn status_table(rows: &[BootRow], what: &str) -> String {
    use coldstart_analyze::units::bytes;
    let mut out = format!(
        "  {:<23} {:<13} {:>10} {:>9} {:>11}  {}\n",
        what, "role", "to target", "plan used", "reads left", "decision"
    );
    for r in rows {
        let target = r.target_s.map_or_else(|| "not reached".to_owned(), |t| format!("{t:.2} s"));
        let used = r.plan_used.map_or_else(|| "—".to_owned(), |u| format!("{:.0}%", u * 100.0));
        out.push_str(&format!(
            "  {:<23} {:<13} {:>10} {:>9} {:>11}  {}\n",
            crate::cmd::boot::utc_date(r.at_unix_s.saturating_mul(1_000_000_000)),
            r.role.name(),
            target,
            used,
            bytes(r.read_left_bytes),
            r.reason
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_prefetch::plan::PlanRange;
    use coldstart_trace::{PageAccess, PageFill, Process};

    #[test]
    fn a_plan_of_several_learning_starts_reads_the_last_one_s_metadata_first() {
        use coldstart_prefetch::plan::Step;
        let bare = |files: Vec<PlanFile>, steps: Vec<Step>| Plan {
            format: String::new(),
            version: 1,
            tool: String::new(),
            source: Default::default(),
            settings: PlanSettings::default(),
            files,
            directories: Vec::new(),
            steps,
            stats: Default::default(),
            notes: vec!["filesystem metadata is not planned from a fleet".into()],
        };
        let mut plan =
            bare(plan_of("/usr/lib/libc.so.6", 0..4), vec![Step::Open(0), Step::Range { file: 0, range: 0 }]);
        let mut metadata = plan_of("/dev/vda", 10..12);
        metadata[0].kind = PlanFileKind::BlockDevice;
        metadata[0].ranges.push(PlanRange { offset: 81920, length: 4096, ..Default::default() });
        let last = bare([plan_of("/usr/bin/other", 0..1), metadata].concat(), Vec::new());
        add_metadata(&mut plan, &last);
        let paths: Vec<&str> = plan.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["/usr/lib/libc.so.6", "/dev/vda"], "only the metadata is taken");
        assert_eq!(
            plan.steps,
            [
                Step::Range { file: 1, range: 0 },
                Step::Range { file: 1, range: 1 },
                Step::Open(0),
                Step::Range { file: 0, range: 0 }
            ]
        );
        assert_eq!(plan.stats.planned_metadata_bytes, 3 * 4096);
        assert!(plan.notes.is_empty(), "{:?}", plan.notes);
    }

    fn plan_of(path: &str, pages: std::ops::Range<u64>) -> Vec<PlanFile> {
        let range = PlanRange {
            offset: pages.start * 4096,
            length: (pages.end - pages.start) * 4096,
            ..Default::default()
        };
        vec![PlanFile { path: path.into(), ranges: vec![range], ..Default::default() }]
    }

    fn trace() -> Trace {
        let mut t = Trace::default();
        t.meta.page_size = 4096;
        t.files.push(coldstart_trace::File {
            id: 1,
            path: Some("/usr/lib/a.so".into()),
            ..Default::default()
        });
        t.processes.push(Process { pid: 10, comm: "systemd".into(), ..Default::default() });
        t.processes.push(Process { pid: 20, comm: "coldstart".into(), ..Default::default() });
        let fill = |pid, index, pages| PageFill { pid, file_id: 1, index, pages, ..Default::default() };
        // The boot reads pages 0-3 (in the plan) and 100-101 (outside); the replay, 4-9.
        t.page_fills = vec![fill(10, 0, 4), fill(10, 100, 2), fill(20, 4, 6)];
        t.page_accesses = vec![
            PageAccess { pid: 10, file_id: 1, index: 4, pages: 1, ..Default::default() },
            PageAccess { pid: 20, file_id: 1, index: 5, pages: 5, ..Default::default() },
        ];
        t
    }

    #[test]
    fn the_boots_figures_leave_the_replays_reads_out() {
        let plan = plan_of("/usr/lib/a.so", 0..10);
        let (used, left) = figures(&trace(), Some(&plan), None);
        assert_eq!(used, Some(0.5), "pages 0-4 of 10: the replay's 5-9 are not the boot's");
        assert_eq!(left, 2 * 4096, "pages 100-101, outside the plan");
        let (used, left) = figures(&trace(), None, None);
        assert_eq!((used, left), (None, 6 * 4096), "no plan: every page the boot read");
        let without_accesses = Trace { page_accesses: Vec::new(), ..trace() };
        let (used, left) = figures(&without_accesses, Some(&plan), None);
        assert_eq!((used, left), (None, 2 * 4096), "a kernel without page-access events: not measured");
    }

    fn planned(path: &Path, bytes: u64) -> PlanFile {
        let m = std::fs::metadata(path).unwrap();
        let range = PlanRange { offset: 0, length: bytes, ..Default::default() };
        PlanFile {
            path: path.to_string_lossy().into_owned(),
            dev: Dev::from_user(m.dev()),
            ino: m.ino(),
            size: Some(m.size()),
            mtime_ns: Some(m.mtime() * 1_000_000_000 + m.mtime_nsec()),
            ranges: vec![range],
            ..Default::default()
        }
    }

    #[test]
    fn files_the_boots_write_never_make_the_plan_stale() {
        let dir = tempfile::tempdir().unwrap();
        let (library, journal) = (dir.path().join("libx.so"), dir.path().join("system.journal"));
        std::fs::write(&library, vec![1u8; 3 * 4096]).unwrap();
        std::fs::write(&journal, vec![2u8; 4096]).unwrap();
        let old = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        std::fs::File::options().write(true).open(&library).unwrap().set_modified(old).unwrap();
        let plan = vec![planned(&library, 3 * 4096), planned(&journal, 4096)];
        let learning_began = 2_000_000 * 1_000_000_000;
        let written = written_since(&plan, learning_began);
        assert_eq!(written, [journal.to_string_lossy().into_owned()], "the library predates the boots");
        std::fs::write(&journal, vec![3u8; 2 * 4096]).unwrap();
        assert_eq!(stale_share(&plan, &[]), 0.25, "the journal's 4 KiB of 16 changed");
        assert_eq!(stale_share(&plan, &written), 0.0, "but the boots write it");
        std::fs::write(&library, vec![4u8; 4096]).unwrap();
        assert_eq!(stale_share(&plan, &written), 1.0, "the library replaced: all of what counts");
    }

    fn meta_of(id: &str) -> PlanMeta {
        PlanMeta {
            id: id.into(),
            made_on: Machine::default(),
            from_trace: String::new(),
            written_by_boots: Vec::new(),
        }
    }

    #[test]
    fn the_stale_share_is_measured_after_a_boot_for_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let library = dir.path().join("libx.so");
        std::fs::write(&library, vec![1u8; 4096]).unwrap();
        let files = vec![planned(&library, 4096)];
        let meta = meta_of("plan-1");
        std::fs::write(dir.path().join(PLAN_META), serde_json::to_string(&meta).unwrap()).unwrap();
        assert_eq!(read_stale_share(dir.path()), 0.0, "nothing measured yet");
        std::fs::write(&library, vec![2u8; 2 * 4096]).unwrap();
        note_stale_share(dir.path(), Some((&meta, &files)));
        assert_eq!(read_stale_share(dir.path()), 1.0);
        let newer = PlanMeta { id: "plan-2".into(), ..meta };
        std::fs::write(dir.path().join(PLAN_META), serde_json::to_string(&newer).unwrap()).unwrap();
        note_stale_share(dir.path(), Some((&PlanMeta { id: "plan-1".into(), ..newer }, &files)));
        assert_eq!(read_stale_share(dir.path()), 0.0, "a plan made this boot starts fresh");
    }

    #[test]
    fn a_damaged_history_or_plan_is_skipped_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let row = BootRow {
            at_unix_s: 1,
            role: Role::Learn,
            plan: None,
            target_s: Some(3.0),
            plan_used: None,
            read_left_bytes: 0,
            machine: Machine::default(),
            state: "learning".into(),
            reason: "no plan yet".into(),
            verdict: None,
            trace: None,
        };
        let path = dir.path().join(HISTORY);
        std::fs::write(&path, "{not json\n").unwrap();
        append_row(&path, &row).unwrap();
        assert_eq!(read_history(&path), vec![row]);
        std::fs::write(dir.path().join(PLAN_META), "[]").unwrap();
        std::fs::write(dir.path().join(PLAN), "{}").unwrap();
        assert!(read_plan_meta(dir.path()).is_none(), "unreadable meta");
        let meta = meta_of("plan-1");
        std::fs::write(dir.path().join(PLAN_META), serde_json::to_string(&meta).unwrap()).unwrap();
        assert_eq!(read_plan_meta(dir.path()).map(|m| m.id), Some("plan-1".into()));
        assert!(load_plan(dir.path(), meta).is_none(), "an unreadable plan");
        assert!(!dir.path().join(PLAN).exists() && !dir.path().join(PLAN_META).exists(), "removed");
        assert!(read_plan_meta(dir.path()).is_none());
        assert!(read_history(&dir.path().join("absent")).is_empty());
    }
}
