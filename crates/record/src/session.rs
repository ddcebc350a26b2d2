//! One recording from start to trace file: checks, instances, capture threads,
//! the command (through `coldstart-launch`), the stop, the spool turned into a
//! trace, and cleanup on every path out.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use coldstart_launch::{Command, Ending, Output, PausedChild, RunAs, Until, WaitOptions};
use coldstart_trace::{Mark, MarkSource, Ready, TraceWriter};

use crate::assemble::{Assembled, Summary, assemble};
use crate::capture::bpf::{PathCapture, PathLosses, PathMode, SampleRoute, ScopeMap};
use crate::capture::connector::{FramePointerMarks, ProcWatch};
use crate::capture::fanotify::OpenWatch;
use crate::capture::off_cpu::{KernelFilter, OffCpuProbe};
use crate::capture::pages::PageSource;
use crate::capture::perf::PerfCapture;
use crate::capture::perf::SampleFilters;
use crate::capture::{Scope, SharedScope, Stop, boottime_ns, monotonic_ns, pages, sampler};
use crate::error::{IoContext, RecordError, Result};
use crate::ftrace::events::{
    ACCESS_EVENTS, BLOCK_EVENTS, BLOCK_OPTIONAL_EVENTS, PRINT_EVENT, SCOPE_EVENTS, SYSCALL_EVENTS,
};
use crate::guardian::Guardian;
use crate::parts::{Part, Without};
use crate::spool::{LineWriter, Spool, SpoolEnd, SpoolMilestone, SpoolRoot, SpoolStart, SpoolUnit};
use crate::tracefs::{Instance, InstanceConfig, InstanceOwner, Tracefs};

/// Environment variable naming the scope instance's `trace_marker` (root only).
pub const TRACE_MARKER_ENV: &str = "COLDSTART_TRACE_MARKER";

/// What to record; built by the CLI from its arguments.
#[derive(Clone, Debug)]
pub struct RecordConfig {
    pub command: Vec<OsString>,
    /// `None`: `<command basename>.coldstart` in the current directory, never overwriting.
    pub output: Option<PathBuf>,
    pub system: bool,
    /// Processes outside the command's tree to record too (`--also`).
    pub also: Vec<crate::also::AlsoSpec>,
    /// Readiness conditions: ready when all are met.
    pub until: Vec<Until>,
    pub timeout: Option<Duration>,
    pub cold: bool,
    /// Run the command as root even under sudo.
    pub as_root: bool,
    pub sample_hz: f64,
    /// CPU samples with stacks (perf), or `None` for none (`--no-cpu-samples`).
    pub cpu_samples: Option<crate::capture::perf::PerfOptions>,
    /// Record system calls (with the names of path calls, through eBPF).
    pub syscalls: bool,
    /// Without `syscalls`: record the file-system calls that last this long, or sleep
    /// (FUSE, network filesystems), filtered in the kernel; `None`: none.
    pub slow_syscalls: Option<Duration>,
    /// Per-CPU ring buffer of each instance, KiB.
    pub buffer_kb: u32,
    /// Wake the page reader when a per-CPU buffer is this full (percent).
    pub buffer_percent: u32,
    pub spool_root: PathBuf,
    /// `record --boot`: the output defaults to /var/log/coldstart/boot-….coldstart, the
    /// trace holds the time before recording began, and systemd is told `READY=1` once
    /// tracing is on.
    pub boot: bool,
    /// PID 1 is an init= wrapper (`coldstart boot init`) that execs systemd once tracing is
    /// on: `unit:` conditions wait for the system manager to appear.
    pub system_manager_later: bool,
    /// Also tell these sockets (named as `NOTIFY_SOCKET` names one) `READY=1` once tracing is
    /// on, as a boot tells systemd (the login's hello waits for it; the prefetch service starts
    /// its replay then).
    pub notify_sockets: Vec<String>,
    /// Parts left out (`--without`), to measure what each costs.
    pub without: crate::parts::Without,
}

impl Default for RecordConfig {
    fn default() -> RecordConfig {
        RecordConfig {
            command: Vec::new(),
            output: None,
            system: false,
            also: Vec::new(),
            until: vec![Until::Exit],
            timeout: None,
            cold: false,
            as_root: false,
            sample_hz: 50.0,
            cpu_samples: Some(crate::capture::perf::PerfOptions::default()),
            syscalls: false,
            slow_syscalls: Some(Duration::from_nanos(crate::capture::slow_calls::DEFAULT_THRESHOLD_NS)),
            buffer_kb: 8192,
            buffer_percent: 50,
            spool_root: PathBuf::from(crate::spool::DEFAULT_SPOOL_ROOT),
            boot: false,
            system_manager_later: false,
            notify_sockets: Vec::new(),
            without: crate::parts::Without::default(),
        }
    }
}

/// A finished recording.
#[derive(Debug)]
pub struct Recorded {
    pub path: PathBuf,
    pub summary: Summary,
    pub ready: Option<Ready>,
    /// The readiness conditions met (`until` marks), by time.
    pub milestones: Vec<Mark>,
    /// The status `record` should exit with (the command's).
    pub exit_code: i32,
    /// Traces rebuilt from spools of earlier, killed recorders.
    pub recovered: Vec<(PathBuf, Summary)>,
    /// Leftover spools that could not be rebuilt, or were left unread because someone
    /// other than root could have written them (they stay for `coldstart recover`).
    pub recover_errors: Vec<String>,
    pub removed_stale_instances: Vec<String>,
    /// The `--until` conditions not met, each with what it was waiting for (also a note of the trace).
    pub unmet: Vec<String>,
}

/// Checks root and tracefs, with the one-paragraph messages users see.
pub fn preflight() -> Result<Tracefs> {
    if !nix::unistd::Uid::effective().is_root() {
        return Err(RecordError::NotRoot);
    }
    Tracefs::find_or_mount()
}

/// `name.coldstart`, or `name-2.coldstart`, `name-3.coldstart` … whichever does not exist.
pub fn unique_output(dir: &Path, stem: &str) -> PathBuf {
    let first = dir.join(format!("{stem}.coldstart"));
    if !first.exists() {
        return first;
    }
    (2..).map(|n| dir.join(format!("{stem}-{n}.coldstart"))).find(|p| !p.exists()).unwrap_or(first)
}

fn default_output(command: &[OsString]) -> PathBuf {
    let stem = command
        .first()
        .and_then(|p| Path::new(p).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "trace".into());
    unique_output(Path::new("."), &stem)
}

/// Writes a built trace atomically (mode 0600), owned by `chown` if given.
pub fn write_trace(trace: &coldstart_trace::Trace, path: &Path, chown: Option<(u32, u32)>) -> Result<()> {
    let mut writer = TraceWriter::create(path)?;
    writer.all(trace)?;
    if let Some((uid, gid)) = chown {
        // lchown: a link planted in the output directory in place of the file is never followed.
        std::os::unix::fs::lchown(writer.temp_path(), Some(uid), Some(gid)).at(writer.temp_path())?;
    }
    writer.finish()?;
    Ok(())
}

/// Rebuilds the trace of one leftover spool and removes the spool.
pub fn recover(spool: Spool, output: Option<&Path>) -> Result<(PathBuf, Summary)> {
    let start = spool.start()?;
    let path = match output {
        Some(p) => p.to_owned(),
        None => {
            let dir = start.output.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
            let stem =
                start.output.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or("trace".into());
            let stem = if start.output.exists() { format!("{stem}-partial") } else { stem };
            unique_output(dir, &stem)
        }
    };
    let assembled = assemble(&spool)?;
    write_trace(&assembled.trace, &path, start.chown)?;
    spool.remove()?;
    Ok((path, assembled.summary))
}

/// What became of the spools of recorders that are no longer running.
#[derive(Debug, Default)]
pub struct Recovery {
    /// The trace rebuilt from each spool, or why it could not be.
    pub rebuilt: Vec<Result<(PathBuf, Summary)>>,
    /// Spools left unread because someone other than root could have written them.
    pub skipped: Vec<RecordError>,
}

/// Recovers every spool under `root` left by a recorder that is no longer running.
pub fn recover_leftovers(root: &SpoolRoot) -> Result<Recovery> {
    let leftovers = root.leftovers()?;
    Ok(Recovery {
        rebuilt: leftovers.spools.into_iter().map(|s| recover(s, None)).collect(),
        skipped: leftovers.skipped,
    })
}

/// Removes a spool that never got as far as a recording (setup failed).
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(dir) = self.0.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// The recorder's two instances; removed when dropped, whatever happened.
struct Instances {
    list: Vec<Instance>,
}

impl Drop for Instances {
    fn drop(&mut self) {
        for inst in &self.list {
            let _ = inst.remove();
        }
    }
}

/// A capture thread's result and the CPU time it used.
type Handle<T> = JoinHandle<(Result<T>, i64)>;

struct Threads {
    pages: Handle<u64>,
    opens: Option<Handle<crate::capture::fanotify::OpenStats>>,
    procs: Handle<u64>,
    samples: Option<Handle<u64>>,
    paths: Option<Handle<(u64, PathLosses)>>,
}

fn spawn<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Handle<T> {
    std::thread::spawn(move || {
        let r = f();
        (r, crate::capture::thread_cpu_ns())
    })
}

fn join<T>(h: Handle<T>, what: &str, cpu_ns: &mut Vec<(String, i64)>) -> Result<T> {
    let (r, cpu) = h.join().map_err(|_| RecordError::Spool(format!("the {what} thread panicked")))?;
    cpu_ns.push((what.to_owned(), cpu));
    r
}

fn drop_caches() -> Result<()> {
    nix::unistd::sync();
    let path = "/proc/sys/vm/drop_caches";
    std::fs::write(path, "3").at(path)
}

/// `(system, event)` of a tracefs event.
type EventName = (&'static str, &'static str);

/// The events of each instance: the required ones and the optional ones this kernel has.
struct EnabledEvents {
    scope: Vec<EventName>,
    block: Vec<EventName>,
    /// Optional events this kernel lacks, as `system:event`.
    missing_access: Vec<String>,
    missing_block: Vec<String>,
    /// The kernel has the syscall events and they were asked for.
    syscalls: bool,
}

/// Saves the format of every event the recorder enables and returns the events of
/// each instance. Parts left out keep their formats (the assembly reads them) but are
/// not enabled.
fn save_formats(
    tracefs: &Tracefs,
    spool: &Spool,
    syscalls: bool,
    without: &Without,
) -> Result<EnabledEvents> {
    let header = tracefs.root.join("events/header_page");
    spool.save_format("header_page", &crate::tracefs::read_text(&header).at(&header)?)?;
    let format_path =
        |(system, event): &(&str, &str)| tracefs.root.join("events").join(system).join(event).join("format");
    for (system, event) in SCOPE_EVENTS.iter().chain(BLOCK_EVENTS).chain([&PRINT_EVENT]) {
        let text = crate::tracefs::read_text(&format_path(&(system, event)))
            .map_err(|e| RecordError::MissingEvent(format!("{system}:{event}"), e.to_string()))?;
        spool.save_format(&format!("{system}__{event}"), &text)?;
    }
    let optional =
        |required: &[EventName], optional: &[EventName]| -> Result<(Vec<EventName>, Vec<String>)> {
            let mut enabled = required.to_vec();
            let mut missing = Vec::new();
            for &(system, event) in optional {
                match crate::tracefs::read_text(&format_path(&(system, event))) {
                    Ok(text) => {
                        spool.save_format(&format!("{system}__{event}"), &text)?;
                        enabled.push((system, event));
                    }
                    Err(_) => missing.push(format!("{system}:{event}")),
                }
            }
            Ok((enabled, missing))
        };
    let (mut scope, missing_access) = optional(SCOPE_EVENTS, ACCESS_EVENTS)?;
    scope.retain(|event| !left_out(event, without));
    let (block, missing_block) = optional(BLOCK_EVENTS, BLOCK_OPTIONAL_EVENTS)?;
    let syscalls = syscalls && crate::syscall_table::tracefs_filter().is_some() && {
        let (with, missing) = optional(&[], SYSCALL_EVENTS)?;
        missing.is_empty() && {
            scope.extend(with);
            true
        }
    };
    Ok(EnabledEvents { scope, block, missing_access, missing_block, syscalls })
}

/// Whether `--without` leaves this event out.
fn left_out(event: &EventName, without: &Without) -> bool {
    let scheduler = matches!(event.1, "sched_switch" | "sched_wakeup" | "sched_wakeup_new" | "sched_waking");
    (without.has(Part::PageAccess) && ACCESS_EVENTS.contains(event))
        || (without.has(Part::Scheduler) && scheduler)
}

/// Records `config.command` and writes the trace.
pub fn record(config: &RecordConfig) -> Result<Recorded> {
    if config.command.is_empty() {
        return Err(RecordError::NoCommand);
    }
    let also = crate::also::resolve(&config.also, &[std::process::id() as i32])?;
    let tracefs = preflight()?;
    let spool_root = SpoolRoot::create(&config.spool_root)?;
    let removed_stale_instances = tracefs.remove_stale_instances();
    let (recovered, recover_errors) = recover_earlier_spools(&spool_root)?;
    let output = output_path(config)?;

    let owner = InstanceOwner::current();
    let names = [owner.instance_name("scope"), owner.instance_name("block")];
    let guardian =
        Guardian::spawn(&names.iter().map(|n| tracefs.instances_dir().join(n)).collect::<Vec<_>>())?;
    let spool = spool_root.new_spool(&owner)?;
    let mut unfinished_spool = RemoveOnDrop(Some(spool.dir.clone()));
    let enabled = save_formats(&tracefs, &spool, config.syscalls, &config.without)?;
    let instances =
        create_instances(&tracefs, &names, config, enabled.scope, enabled.block, enabled.syscalls)?;
    let page_size = ring_buffer_page_size(&instances.list[0]);
    let cpus = tracefs.cpus();
    let sources = open_page_sources(&instances, &spool, &cpus)?;
    let open_watch = match config.without.has(Part::Fanotify) {
        true => None,
        false => Some(OpenWatch::new(&crate::system::mounts())?),
    };
    let mut notes = unrecorded_notes(open_watch.as_ref(), &enabled.missing_access, &enabled.missing_block);
    notes.extend(config.without.notes());
    if config.syscalls && !enabled.syscalls {
        notes.push("this kernel (or architecture) lacks the raw_syscalls events coldstart uses: system calls are not recorded".into());
    }
    let paths = path_mode(config, enabled.syscalls)
        .and_then(|mode| start_path_capture(&tracefs.root, config.system, mode, &mut notes));
    let scope_map = paths.as_ref().and_then(PathCapture::scope_map);
    let mut proc_watch = ProcWatch::new()?;
    if let Some(marks) = frame_pointer_marks(config, also.is_empty(), scope_map.as_ref()) {
        proc_watch.mark_frame_pointers(marks);
    }
    let stop = Stop::new()?;
    let scope: SharedScope = Arc::new(Mutex::new(Scope { system: config.system, ..Default::default() }));
    let sample_hz = (!config.without.has(Part::Sampler)).then_some(config.sample_hz);
    let captures = Captures { sources, page_size, open_watch, proc_watch, paths, sample_hz };
    let threads = spawn_threads(captures, &spool, &scope, &stop)?;
    let mut perf_thread = None;
    let result = run_command(
        config,
        &also,
        &instances,
        scope_map.as_ref(),
        &spool,
        &scope,
        &stop,
        &output,
        &cpus,
        page_size,
        &tracefs.root,
        &mut notes,
        &mut perf_thread,
    );
    stop.fire();
    for inst in &instances.list {
        let _ = inst.set_tracing(false);
    }
    let joined = join_threads(threads, perf_thread);
    let (end_partial, exit_code, unmet) = match result {
        Ok(r) => r,
        Err(e) => {
            drop(instances);
            guardian.dismiss();
            return Err(e);
        }
    };
    let end = complete_end(end_partial, joined, notes, &instances, &cpus, page_size)?;
    drop(instances);
    guardian.dismiss();
    spool.write_json("end.json", &end)?;
    unfinished_spool.0 = None;

    let (output, assembled) = assemble_and_write(config, &spool, output)?;
    spool.remove()?;
    Ok(Recorded {
        path: output,
        ready: assembled.trace.meta.ready.clone(),
        milestones: assembled.trace.marks.iter().filter(|m| m.source == MarkSource::Until).cloned().collect(),
        summary: assembled.summary,
        exit_code,
        recovered,
        recover_errors,
        removed_stale_instances,
        unmet,
    })
}

/// A trace rebuilt from a leftover spool, and its summary.
type Rebuilt = (PathBuf, Summary);

/// Rebuilds the traces of earlier, killed recorders: those rebuilt, and why the others were not.
fn recover_earlier_spools(spool_root: &SpoolRoot) -> Result<(Vec<Rebuilt>, Vec<String>)> {
    let mut recovered = Vec::new();
    let recovery = recover_leftovers(spool_root)?;
    let mut recover_errors: Vec<String> = recovery.skipped.iter().map(ToString::to_string).collect();
    for r in recovery.rebuilt {
        match r {
            Ok(done) => recovered.push(done),
            Err(e) => recover_errors.push(coldstart_trace::error_chain(&e)),
        }
    }
    Ok((recovered, recover_errors))
}

/// The absolute path the trace goes to: `--output`, the boot trace's, or one named after the command.
fn output_path(config: &RecordConfig) -> Result<PathBuf> {
    let output = match (&config.output, config.boot) {
        (Some(output), _) => output.clone(),
        (None, true) => crate::boot::boot_output(
            Path::new(crate::boot::BOOT_TRACE_DIR),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0),
        ),
        (None, false) => default_output(&config.command),
    };
    Ok(if output.is_absolute() { output } else { std::env::current_dir().at(".")?.join(output) })
}

/// Creates the scope instance (the command's tree, or everything with `--system`) and the
/// block instance (every block request).
fn create_instances(
    tracefs: &Tracefs,
    names: &[String; 2],
    config: &RecordConfig,
    scope_events: Vec<EventName>,
    block_events: Vec<EventName>,
    syscalls: bool,
) -> Result<Instances> {
    let filters = match crate::syscall_table::tracefs_filter() {
        Some(filter) if syscalls => SYSCALL_EVENTS.iter().map(|&e| (e, filter.clone())).collect(),
        _ => Vec::new(),
    };
    let scope_config = InstanceConfig {
        events: scope_events,
        filters,
        pids: (!config.system).then(Vec::new),
        notrace_pids: Vec::new(),
        buffer_kb: config.buffer_kb,
        buffer_percent: config.buffer_percent,
    };
    let block_config = InstanceConfig {
        events: block_events,
        filters: Vec::new(),
        pids: None,
        notrace_pids: Vec::new(),
        buffer_kb: (config.buffer_kb / 4).max(1024),
        buffer_percent: config.buffer_percent,
    };
    let mut instances = Instances { list: Vec::new() };
    instances.list.push(Instance::create(tracefs, &names[0], &scope_config)?);
    instances.list.push(Instance::create(tracefs, &names[1], &block_config)?);
    Ok(instances)
}

/// The size in bytes of the pages of an instance's ring buffer (its sub-buffers).
fn ring_buffer_page_size(instance: &Instance) -> usize {
    let subbuf_kb = std::fs::read_to_string(instance.dir.join("buffer_subbuf_size_kb"))
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(4);
    subbuf_kb * 1024
}

/// Opens each instance's raw pipe of each CPU, with the spool file its pages go to.
fn open_page_sources(instances: &Instances, spool: &Spool, cpus: &[u16]) -> Result<Vec<PageSource>> {
    let mut sources = Vec::new();
    for (inst, role) in instances.list.iter().zip(["scope", "block"]) {
        for &cpu in cpus {
            let out_path = spool.raw_path(role, cpu);
            let out = spool.create_file(
                &out_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
            )?;
            sources.push(PageSource::open(inst.raw_pipe(cpu), out, out_path)?);
        }
    }
    Ok(sources)
}

/// Notes on what will not be recorded: mounts fanotify cannot watch, events this kernel lacks.
fn unrecorded_notes(
    open_watch: Option<&OpenWatch>,
    missing_access: &[String],
    missing_block: &[String],
) -> Vec<String> {
    let mut notes: Vec<String> = open_watch
        .iter()
        .flat_map(|w| &w.stats.unmarked)
        .map(|(m, e)| format!("fanotify could not watch {}: {e}", m.display()))
        .collect();
    if !missing_access.is_empty() {
        notes.push(format!(
            "this kernel lacks {}: page accesses (and fill origins) are not recorded",
            missing_access.join(", ")
        ));
    }
    for missing in missing_block {
        let consequence = if missing.ends_with("block_io_start") {
            "a request is counted for the task that issued it from the queue, which may not be the one that made it"
        } else {
            "a request the driver handed back and issued again may show as two block_io rows"
        };
        notes.push(format!("this kernel lacks {missing}: {consequence}"));
    }
    notes
}

/// What the eBPF programs record: every path call's name with `--syscalls`, else the
/// slow file-system calls (unless turned off, or the architecture has no call table).
fn path_mode(config: &RecordConfig, every_call: bool) -> Option<PathMode> {
    if every_call {
        return Some(PathMode::EveryCall);
    }
    let threshold = config.slow_syscalls?;
    let known = !crate::syscall_table::TRACED.is_empty();
    known.then(|| PathMode::Slow { threshold_ns: u64::try_from(threshold.as_nanos()).unwrap_or(u64::MAX) })
}

/// Starts the eBPF capture, or notes why it could not start.
fn start_path_capture(
    tracefs: &Path,
    system: bool,
    mode: PathMode,
    notes: &mut Vec<String>,
) -> Option<PathCapture> {
    match PathCapture::start(tracefs, system, mode) {
        Ok(capture) => {
            if let PathMode::Slow { threshold_ns } = mode {
                notes.push(format!(
                    "system calls: only file-system calls (opens, stats, accesses, readlink, getdents64, reads) \
                     that lasted {} ms or more, or slept (requests to FUSE or network filesystems), were \
                     recorded; `record --syscalls` records every call",
                    threshold_ns as f64 / 1e6
                ));
            }
            Some(capture)
        }
        Err(e) => {
            let what = match mode {
                PathMode::EveryCall => {
                    "the names of path system calls (stat, access, opens fanotify does not see)"
                }
                PathMode::Slow { .. } => "slow file-system calls (and those on FUSE or network filesystems)",
            };
            notes.push(format!("{what} are not recorded: {}", coldstart_trace::error_chain(&e)));
            None
        }
    }
}

/// What the capture threads read from, before they start.
struct Captures {
    sources: Vec<PageSource>,
    page_size: usize,
    open_watch: Option<OpenWatch>,
    proc_watch: ProcWatch,
    paths: Option<PathCapture>,
    /// `None`: no sampler (`--without sampler`).
    sample_hz: Option<f64>,
}

fn spawn_threads(
    captures: Captures,
    spool: &Spool,
    scope: &SharedScope,
    stop: &Arc<Stop>,
) -> Result<Threads> {
    let Captures { sources, page_size, open_watch, proc_watch, paths, sample_hz: hz } = captures;
    let (s1, s2, s3, s4) = (stop.clone(), stop.clone(), stop.clone(), stop.clone());
    let (sc1, sc2) = (scope.clone(), scope.clone());
    let opens_out = LineWriter::create(spool, "opens.jsonl")?;
    let procs_out = LineWriter::create(spool, "procs.jsonl")?;
    let samples_out = LineWriter::create(spool, "samples.jsonl")?;
    let paths_out = match &paths {
        Some(capture) => Some(spool.create_file(capture.spool_file())?),
        None => None,
    };
    let s5 = stop.clone();
    Ok(Threads {
        pages: spawn(move || pages::run(sources, page_size, s1)),
        opens: open_watch.map(|watch| spawn(move || watch.run(opens_out, s2))),
        procs: spawn(move || proc_watch.run(procs_out, sc1, s3)),
        samples: hz.map(|hz| spawn(move || sampler::run(hz, samples_out, sc2, s4))),
        paths: paths.zip(paths_out).map(|(capture, out)| spawn(move || capture.run(out, s5))),
    })
}

/// What the capture threads returned, and the CPU time each used.
struct Joined {
    pages: Result<u64>,
    opens: Option<Result<crate::capture::fanotify::OpenStats>>,
    procs_lost: Result<u64>,
    samples: Option<Result<u64>>,
    perf: Option<Result<crate::capture::perf::PerfCopied>>,
    paths: Option<Result<(u64, PathLosses)>>,
    cpu: Vec<(String, i64)>,
}

fn join_threads(threads: Threads, perf_thread: Option<Handle<crate::capture::perf::PerfCopied>>) -> Joined {
    let mut cpu = Vec::new();
    let pages = join(threads.pages, "page reader", &mut cpu);
    let opens = threads.opens.map(|h| join(h, "fanotify", &mut cpu));
    let procs_lost = join(threads.procs, "proc connector", &mut cpu);
    let samples = threads.samples.map(|h| join(h, "sampler", &mut cpu));
    let perf = perf_thread.map(|h| join(h, "perf sampler", &mut cpu));
    let paths = threads.paths.map(|h| join(h, "eBPF paths", &mut cpu));
    Joined { pages, opens, procs_lost, samples, perf, paths, cpu }
}

/// Adds to the end of the spool what the capture threads lost and the notes of the recording.
fn complete_end(
    mut end: SpoolEnd,
    joined: Joined,
    mut notes: Vec<String>,
    instances: &Instances,
    cpus: &[u16],
    page_size: usize,
) -> Result<SpoolEnd> {
    let (pages, procs_lost) = (joined.pages?, joined.procs_lost?);
    let opens = joined.opens.transpose()?.unwrap_or_default();
    joined.samples.transpose()?;
    let mut perf_loss = None;
    let mut off_cpu_losses = Vec::new();
    if let Some(copied) = joined.perf {
        let copied = copied?;
        notes.push(format!("{} KiB of CPU samples with stacks copied", copied.bytes / 1024));
        if let Some(kept) = copied.off_cpu {
            notes.push(format!(
                "{} off-CPU stacks kept by the eBPF filter ({} distinct)",
                kept.records, kept.stacks
            ));
            off_cpu_losses.push(("bpf".into(), "off-CPU stacks: ring buffer full".into(), kept.ring_full));
            if kept.scope_full > 0 {
                off_cpu_losses.push((
                    "bpf".into(),
                    "threads not followed: scope map full".into(),
                    kept.scope_full,
                ));
            }
        }
        if copied.stopped_early {
            perf_loss = Some((
                "perf".into(),
                format!(
                    "CPU samples and off-CPU stacks stopped once {} MiB were copied, half the free space of the \
                     spool's filesystem: the rest of the recording has none",
                    copied.budget >> 20
                ),
                1,
            ));
        }
    }
    let paths = joined.paths.transpose()?;
    end.losses.extend(perf_loss);
    end.losses.extend(off_cpu_losses);
    end.losses.extend(instance_losses(instances, cpus));
    end.losses.push(("fanotify".into(), "queue overflows".into(), opens.overflows));
    if procs_lost > 0 {
        end.losses.push(("proc connector".into(), "receive buffer overruns".into(), procs_lost));
    }
    if let Some((_, lost)) = paths {
        end.losses.push(("bpf".into(), "path names or slow calls: ring buffer full".into(), lost.ring_full));
        if lost.scope_full > 0 {
            end.losses.push(("bpf".into(), "threads not followed: scope map full".into(), lost.scope_full));
        }
    }
    end.notes.extend(notes);
    end.notes
        .push(format!("{pages} ring-buffer pages of {page_size} bytes read, {} opens seen", opens.events));
    let parts: Vec<String> =
        joined.cpu.iter().map(|(w, ns)| format!("{w} {:.1}", *ns as f64 / 1e6)).collect();
    let total: i64 = joined.cpu.iter().map(|(_, ns)| ns).sum();
    end.notes.push(format!(
        "capture threads used {:.1} ms of CPU while recording ({} ms)",
        total as f64 / 1e6,
        parts.join(", ")
    ));
    Ok(end)
}

/// The events each instance's ring buffers dropped, per CPU.
fn instance_losses(instances: &Instances, cpus: &[u16]) -> Vec<(String, String, u64)> {
    let mut losses = Vec::new();
    for (inst, role) in instances.list.iter().zip(["scope", "block"]) {
        for &cpu in cpus {
            for (key, value) in inst.cpu_stats(cpu) {
                if matches!(key.as_str(), "overrun" | "commit overrun" | "dropped events") {
                    losses.push(("tracefs".into(), format!("{role} cpu{cpu} {key}"), value));
                }
            }
        }
    }
    losses
}

/// Builds the trace from the finished spool and writes it: to `output`, or for a boot
/// whose `output` cannot be written yet, to the fallback directory.
fn assemble_and_write(config: &RecordConfig, spool: &Spool, output: PathBuf) -> Result<(PathBuf, Assembled)> {
    let kept = |e: RecordError| RecordError::Kept { spool: spool.dir.clone(), source: Box::new(e) };
    let mut assembled = assemble(spool).map_err(kept)?;
    if let Some(why) = crate::frame_pointers::remember(&assembled.frame_pointer_checks) {
        assembled.trace.notes.push(coldstart_trace::Note {
            source: coldstart_trace::NoteSource::Record,
            text: format!("which programs have trustworthy frame pointers could not be kept: {why}"),
        });
    }
    let start = spool.start()?;
    let write = |trace: &coldstart_trace::Trace, output: &Path| -> Result<()> {
        if config.boot
            && let Some(dir) = output.parent()
        {
            crate::boot::create_trace_dir(dir)?;
        }
        write_trace(trace, output, start.chown)
    };
    let output = match write(&assembled.trace, &output) {
        Ok(()) => output,
        // A boot whose / is still read-only (or whose /var/log is not mounted) when the
        // recording ends: the trace goes to /run, which is there from the start.
        Err(e) if config.boot && config.output.is_none() => {
            let fallback = crate::boot::boot_output(
                Path::new(crate::boot::BOOT_FALLBACK_DIR),
                start.start_unix_ns / 1_000_000_000,
            );
            assembled.trace.notes.push(coldstart_trace::Note {
                source: coldstart_trace::NoteSource::Record,
                text: format!(
                    "{} could not be written ({}): the trace went to {} instead",
                    output.display(),
                    coldstart_trace::error_chain(&e),
                    fallback.display()
                ),
            });
            write(&assembled.trace, &fallback).map_err(kept)?;
            fallback
        }
        Err(e) => return Err(kept(e)),
    };
    Ok((output, assembled))
}

/// Starts the command, waits for readiness and ends it; returns the end of the
/// spool (without the instance statistics), the status to exit with and the
/// conditions not met.
#[allow(clippy::too_many_arguments)]
fn run_command(
    config: &RecordConfig,
    also: &[coldstart_trace::AlsoScope],
    instances: &Instances,
    scope_map: Option<&ScopeMap>,
    spool: &Spool,
    scope: &SharedScope,
    stop: &Arc<Stop>,
    output: &Path,
    cpus: &[u16],
    page_size: usize,
    tracefs: &Path,
    notes: &mut Vec<String>,
    perf_thread: &mut Option<Handle<crate::capture::perf::PerfCopied>>,
) -> Result<(SpoolEnd, i32, Vec<String>)> {
    let command = build_command(config, instances);
    let user = coldstart_launch::resolve_user(&command.run_as)?
        .map(|c| c.name)
        .or_else(|| std::env::var("USER").ok());
    let eviction = if config.cold {
        drop_caches()?;
        Some("drop_caches".to_owned())
    } else {
        None
    };
    let paused = PausedChild::spawn(&command)?;
    let root_pid = paused.pid();
    let also_pids: Vec<i32> = also.iter().flat_map(|a| a.pids.iter().copied()).collect();
    let also_threads = crate::also::threads_of(&also_pids);
    follow_in_scope(config, instances, scope_map, scope, root_pid, &also_pids, &also_threads)?;
    if let Some(options) = config.cpu_samples {
        // The tree alone is followed from its root; tasks that exist already need whole CPUs.
        let pid = (!config.system && also_pids.is_empty()).then_some(root_pid);
        *perf_thread = start_perf(options, spool, pid, scope_map, cpus, tracefs, stop, notes);
    }
    for inst in &instances.list {
        inst.set_tracing(true)?;
    }
    let t0_boot_ns = boottime_ns();
    let boottime_offset_ns = t0_boot_ns - monotonic_ns();
    let start_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0);
    let before_recording = match config.boot {
        true => {
            let (phases, note) = crate::boot::before_recording(t0_boot_ns, boottime_offset_ns);
            notes.extend(note);
            phases
        }
        false => Vec::new(),
    };
    let start = SpoolStart {
        owner_pid: std::process::id() as i32,
        owner_starttime: crate::tracefs::process_starttime(std::process::id() as i32),
        output: output.to_owned(),
        // A boot's tree is only the process that holds the wait: the command line that
        // started the recording says what was recorded.
        command: match config.boot {
            true => std::env::args_os().map(|a| a.to_string_lossy().into_owned()).collect(),
            false => config.command.iter().map(|a| a.to_string_lossy().into_owned()).collect(),
        },
        cwd: std::env::current_dir().ok().map(|d| d.to_string_lossy().into_owned()),
        user,
        chown: coldstart_launch::SudoInvoker::owner(),
        system: config.system,
        root_pid: Some(root_pid),
        also: also.to_vec(),
        also_threads,
        t0_boot_ns,
        start_unix_ns,
        boottime_offset_ns,
        cold: config.cold,
        eviction,
        sample_hz: config.sample_hz,
        cpus: cpus.to_vec(),
        subbuf_size: page_size,
        diskstats_start: crate::system::diskstats(),
        marks_file: Some(paused.marks_path().to_owned()),
        notes: Vec::new(),
        before_recording,
    };
    spool.write_json("start.json", &start)?;
    if config.boot
        && let Err(e) = crate::boot::notify("READY=1")
    {
        notes.push(format!("systemd was not told the recording had started (NOTIFY_SOCKET): {e}"));
    }
    for socket in &config.notify_sockets {
        if let Err(e) = crate::boot::notify_to(socket, "READY=1") {
            notes.push(format!("{socket} was not told the recording had started: {e}"));
        }
    }
    wait_and_end(config, paused, instances, spool, stop, t0_boot_ns, notes)
}

/// The command to record, its output watched when a condition reads it.
fn build_command(config: &RecordConfig, instances: &Instances) -> Command {
    let mut command = Command::new(config.command.iter().cloned());
    command.run_as(if config.as_root { RunAs::Current } else { RunAs::Invoker });
    command.env(TRACE_MARKER_ENV, instances.list[0].trace_marker());
    if config.until.iter().any(Until::watches_output) {
        command.stdout(Output::Watch { echo: true }).stderr(Output::Watch { echo: true });
    }
    command
}

/// Puts the paused command and the `--also` processes in the scope of the instance, the
/// eBPF map and the capture threads; with `--system`, keeps the recorder's own threads out.
fn follow_in_scope(
    config: &RecordConfig,
    instances: &Instances,
    scope_map: Option<&ScopeMap>,
    scope: &SharedScope,
    root_pid: i32,
    also_pids: &[i32],
    also_threads: &[(i32, i32)],
) -> Result<()> {
    if !config.system {
        instances.list[0].add_pids(&[root_pid])?;
        instances.list[0].add_pids(&also_threads.iter().map(|&(tid, _)| tid).collect::<Vec<_>>())?;
        if let Some(map) = scope_map {
            map.add(&[root_pid])?;
            map.add(&also_threads.iter().map(|&(tid, _)| tid).collect::<Vec<_>>())?;
        }
    }
    if let Ok(mut s) = scope.lock() {
        s.add(root_pid);
        for &pid in also_pids {
            s.add(pid);
        }
    }
    if config.system {
        let tids: Vec<i32> =
            crate::also::threads_of(&[std::process::id() as i32]).into_iter().map(|(tid, _)| tid).collect();
        let path = instances.list[0].dir.join("set_event_notrace_pid");
        if path.exists() {
            let list: Vec<String> = tids.iter().map(i32::to_string).collect();
            std::fs::write(&path, list.join(" ")).at(&path)?;
        }
    }
    Ok(())
}

/// What marks the processes whose samples need no stack copy: only where the command's
/// CPU samples go through the scope filter (a command's tree, with the eBPF scope map).
fn frame_pointer_marks(
    config: &RecordConfig,
    no_also: bool,
    scope_map: Option<&ScopeMap>,
) -> Option<FramePointerMarks> {
    let options = config.cpu_samples?;
    if config.system || !no_also || !options.frame_pointers {
        return None;
    }
    let scope = scope_map?.try_clone()?;
    Some(FramePointerMarks { scope, known: crate::frame_pointers::Known::load() })
}

/// Starts the perf capture of CPU samples with stacks (of `pid`'s tree, or of whole
/// CPUs), or notes why it could not start.
#[allow(clippy::too_many_arguments)]
fn start_perf(
    options: crate::capture::perf::PerfOptions,
    spool: &Spool,
    pid: Option<i32>,
    scope_map: Option<&ScopeMap>,
    cpus: &[u16],
    tracefs: &Path,
    stop: &Arc<Stop>,
    notes: &mut Vec<String>,
) -> Option<Handle<crate::capture::perf::PerfCopied>> {
    let filter = match (pid, scope_map) {
        (Some(_), Some(map)) => match map.sample_filter(SampleRoute::CopyStack) {
            Ok(copy) => Some(SampleFilters {
                copy,
                frame_pointers: options
                    .frame_pointers
                    .then(|| map.sample_filter(SampleRoute::FramePointers).ok())
                    .flatten(),
            }),
            Err(e) => {
                notes.push(format!(
                    "CPU samples follow the command's threads (their context switches cost more): \
                     the scope filter could not be loaded: {}",
                    coldstart_trace::error_chain(&e)
                ));
                None
            }
        },
        _ => None,
    };
    // A command's tree: the eBPF program keeps the sleeps that pass the threshold (see
    // `capture::off_cpu` for why whole CPUs keep the perf event).
    let probe = pid.filter(|_| options.off_cpu).map(|root| {
        let filter = KernelFilter::new(options.off_cpu_min_ns);
        OffCpuProbe::start(tracefs, scope_map, root, filter)
    });
    match PerfCapture::open(spool, pid, cpus, options, tracefs, filter.as_ref(), probe) {
        Ok(capture) => {
            if let Some(why) = &capture.off_cpu_refused {
                notes.push(format!(
                    "off-CPU kernel stacks (what a sleeping thread waited in) are not recorded: {why}"
                ));
            }
            if let Some(why) = &capture.off_cpu_fallback {
                notes.push(format!(
                    "off-CPU kernel stacks were taken by a perf event at every sleep, however short \
                     (`--off-cpu-min` not applied): the eBPF program was refused: {why}"
                ));
            }
            let stop = stop.clone();
            Some(spawn(move || capture.run(stop)))
        }
        Err(e) => {
            notes.push(format!(
                "CPU samples with stacks are not recorded: {} (perf_event_open needs root, or \
                 kernel.perf_event_paranoid at most 1 for a command's tree)",
                coldstart_trace::error_chain(&e)
            ));
            None
        }
    }
}

/// Resumes the command, waits for its readiness conditions, stops tracing and ends the
/// tree; returns the end of the spool, the status to exit with and the conditions not met.
fn wait_and_end(
    config: &RecordConfig,
    paused: PausedChild,
    instances: &Instances,
    spool: &Spool,
    stop: &Arc<Stop>,
    t0_boot_ns: i64,
    notes: &mut Vec<String>,
) -> Result<(SpoolEnd, i32, Vec<String>)> {
    let mut running = paused.resume()?;
    let options = WaitOptions {
        timeout: config.timeout,
        system_manager_later: config.system_manager_later,
        ..WaitOptions::default()
    };
    let outcome = running.wait_all(&config.until, &options)?;
    let t_end_boot_ns = boottime_ns();
    let diskstats_end = crate::system::diskstats();
    for inst in &instances.list {
        let _ = inst.set_tracing(false);
    }
    stop.fire();
    let _ = spool.copy_in("marks", running.marks_path());
    let units = systemd_units(&outcome, running.tree_root(), t0_boot_ns, notes);
    let finished = running.finish(&Ending::default())?;
    if finished.marks.bad_lines > 0 {
        notes.push(format!("{} lines of the marks file were not marks", finished.marks.bad_lines));
    }
    let exit_code = match (outcome.exit_status, outcome.met) {
        (Some(code), _) => code,
        (None, true) => 0,
        (None, false) => finished.exit_status.unwrap_or(1),
    };
    let end = SpoolEnd {
        t_end_boot_ns,
        ready_boot_ns: Some(outcome.ready_ns),
        ready_reason: Some(outcome.reason.to_string()),
        ready_pid: outcome.pid,
        ready_tid: outcome.tid,
        milestones: outcome
            .milestones
            .iter()
            .map(|m| SpoolMilestone { boot_ns: m.t_ns, name: m.reason.to_string(), pid: m.pid, tid: m.tid })
            .collect(),
        ready_line: matches!(outcome.reason, coldstart_launch::Reason::Output(_))
            .then(|| outcome.detail.clone())
            .flatten(),
        exit_code: outcome.exit_status.or(finished.exit_status),
        units,
        diskstats_end,
        losses: Vec::new(),
        notes: Vec::new(),
    };
    notes.extend(outcome.unmet.iter().map(|u| format!("readiness not met: {u}")));
    Ok((end, exit_code, outcome.unmet))
}

/// The units of the systemd manager the command's tree booted (a container's), or else
/// of the one a `unit:` condition was met on, that started during the recording: read
/// before the tree is ended, while the manager still answers.
fn systemd_units(
    outcome: &coldstart_launch::Outcome,
    tree_root: i32,
    t0_boot_ns: i64,
    notes: &mut Vec<String>,
) -> Vec<SpoolUnit> {
    use coldstart_launch::systemd::{Manager, ManagerKind, read_units};
    let Some(manager) = Manager::container_in_tree(tree_root).or_else(|| outcome.unit_manager.clone()) else {
        return Vec::new();
    };
    let kind = match manager.kind {
        ManagerKind::System => "system",
        ManagerKind::User { .. } => "user",
        ManagerKind::Container { .. } => "container",
    };
    match read_units(&manager, t0_boot_ns) {
        Ok(units) => units
            .into_iter()
            .map(|u| SpoolUnit {
                name: u.name,
                manager: kind.to_owned(),
                activating_boot_ns: u.activating_ns,
                active_boot_ns: u.active_ns,
                deactivating_boot_ns: u.deactivating_ns,
                pid: u.main_pid,
                after: u.after,
            })
            .collect(),
        Err(e) => {
            notes.push(format!("systemd units not read: {}", coldstart_trace::error_chain(&e)));
            Vec::new()
        }
    }
}
