//! The in-memory form of a trace: one plain struct per table of the trace file.
//!
//! Times are nanoseconds since the trace's own zero (the start of the recording),
//! as [`Nanos`]. Process and thread identifiers are the kernel's numbers; a pid may
//! in principle be reused within a long trace, so consumers that need the process
//! alive at a moment use [`crate::ProcessIndex`].

use serde::{Deserialize, Serialize};

use crate::Dev;

/// Nanoseconds since the start of the recording (the trace's t = 0).
pub type Nanos = i64;

/// A whole trace, as read from or written to a trace file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub meta: Meta,
    pub disks: Vec<Disk>,
    pub losses: Vec<Loss>,
    pub notes: Vec<Note>,
    pub processes: Vec<Process>,
    pub execs: Vec<Exec>,
    pub threads: Vec<Thread>,
    pub files: Vec<File>,
    pub extents: Vec<Extent>,
    pub file_opens: Vec<FileOpen>,
    pub page_fills: Vec<PageFill>,
    pub page_accesses: Vec<PageAccess>,
    /// Pages of the fault-around windows found cached at the end with no recorded fill
    /// (format 3, added later; empty in files without the table).
    #[serde(default)]
    pub page_residents: Vec<PageResident>,
    pub block_ios: Vec<BlockIo>,
    pub sched: Vec<SchedInterval>,
    pub wakeups: Vec<Wakeup>,
    pub marks: Vec<Mark>,
    pub cpu_samples: Vec<CpuSample>,
    pub disk_samples: Vec<DiskSample>,
    pub process_samples: Vec<ProcessSample>,
    /// Executable mappings the stack samples' addresses belong to (format 3 on).
    #[serde(default)]
    pub mappings: Vec<Mapping>,
    #[serde(default)]
    pub frames: Vec<Frame>,
    #[serde(default)]
    pub stacks: Vec<Stack>,
    #[serde(default)]
    pub stack_samples: Vec<StackSample>,
    /// Kernel stacks of recorded threads going to sleep (format 3 on; empty before).
    #[serde(default)]
    pub off_cpu_samples: Vec<OffCpuSample>,
    /// The machine's mounts at the recording (format 3 on; empty before).
    #[serde(default)]
    pub mounts: Vec<Mount>,
    /// System calls of the recorded threads (format 3 on; empty before).
    #[serde(default)]
    pub syscalls: Vec<Syscall>,
    /// systemd units started during the recording (format 3 on; empty before).
    #[serde(default)]
    pub units: Vec<Unit>,
}

/// Where a trace came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `coldstart record` on a live system.
    #[default]
    Record,
    /// `coldstart import bootchart2`.
    Bootchart2,
    /// Built by a program (tests, benchmarks).
    Synthetic,
}

/// Which processes a recording covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The command's process tree, daemonized descendants included.
    #[default]
    Tree,
    /// Every process on the machine.
    System,
}

/// The page-cache state the start began in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// The page cache was evicted before the start (see [`Meta::eviction`]).
    Cold,
    /// Nothing was evicted.
    Warm,
    #[default]
    Unknown,
}

/// The moment the start counts as done, why, and who reached it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ready {
    pub t_ns: Nanos,
    pub reason: ReadyReason,
    /// The process that reached it, when the recorder knew (a window's owner, the
    /// command for `exit`, a mark's process); `None` in files of format 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<i32>,
    /// The thread that reached it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i32>,
}

/// What ended the wait for a start. Stored and shown as its words (`exit`,
/// `mark:NAME`, …: see [`ReadyReason::from_str`](std::str::FromStr)); a kind that
/// carries a value writes it after a colon.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum ReadyReason {
    /// `exit`: the command itself exited.
    Exit,
    /// `mark:NAME`: a mark with this name appeared.
    Mark(String),
    /// `output:REGEX`: a line of the command's output matched this expression.
    Output(String),
    /// `idle:MS`: the machine was quiet for this many milliseconds.
    Idle(u64),
    /// `window`: the command's tree mapped its first top-level X11 window.
    Window,
    /// `window:CLASS`: a window of this WM_CLASS class or instance became visible;
    /// `/REGEX/` for a regular expression.
    WindowClass(String),
    /// `window-name:NAME`: a window of this title became visible; `/REGEX/` for a
    /// regular expression.
    WindowName(String),
    /// `wm`: a window manager took the X screen (EWMH `_NET_SUPPORTING_WM_CHECK` set on
    /// the root window).
    WindowManager,
    /// `unit:NAME`: a systemd unit became active; `unit:user/NAME` or `unit:system/NAME`
    /// when the manager was named.
    Unit(String),
    /// `timeout`: the condition was not met in time.
    Timeout,
    /// `interrupted`: SIGINT or SIGTERM ended the wait.
    Interrupted,
    /// `bootchart2:end`: the end of an imported bootchart2 log.
    Bootchart2End,
}

/// One row per key of the `meta` table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The program and version that wrote the trace, e.g. `coldstart 0.1.0`.
    pub tool: String,
    pub source: Source,
    /// The traced command, one element per argument.
    pub command: Vec<String>,
    pub cwd: Option<String>,
    /// The user the command ran as.
    pub user: Option<String>,
    pub scope: Scope,
    /// The pid of the traced command (the root of the process tree).
    pub root_pid: Option<i32>,
    pub host: String,
    /// Kernel release and version, as `uname -rv`.
    pub kernel: String,
    pub cpu_model: String,
    pub cpu_count: u32,
    pub mem_total_bytes: u64,
    pub page_size: u32,
    /// The clock the times were taken with: `boot` (CLOCK_BOOTTIME; recordings and bootchart2 imports) or `mono`.
    pub clock: String,
    /// Wall-clock time at t = 0, nanoseconds since the Unix epoch.
    pub start_unix_ns: i64,
    /// The trace clock's reading at t = 0, so raw kernel timestamps can be related to the trace.
    pub start_clock_ns: i64,
    /// CLOCK_BOOTTIME minus CLOCK_MONOTONIC at t = 0 (uptime-stamped marks are converted with it).
    pub boottime_offset_ns: i64,
    /// Length of the recording.
    pub duration_ns: Nanos,
    pub ready: Option<Ready>,
    pub cache: CacheState,
    /// How the cache was evicted, e.g. `drop_caches`, `fadvise:412 files`.
    pub eviction: Option<String>,
    /// Exit status of the traced command (128 + signal when killed by a signal).
    pub exit_code: Option<i32>,
    /// True when the trace was rebuilt from a spool of a recorder that did not finish.
    pub partial: bool,
    /// Rate of the periodic samples, per second.
    pub sample_hz: Option<f64>,
    /// Rate of the CPU stack samples, per second and CPU (format 3 on; `None` without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack_sample_hz: Option<f64>,
    /// Processes outside the command's tree put into the recording (`record --also`),
    /// one entry per `--also` as typed, in order. Empty for traces of format 1.
    pub also: Vec<AlsoScope>,
    /// How long the machine took before the recording began, for `record --boot` (format 3
    /// on; empty otherwise): firmware, loader, kernel, initrd and userspace from systemd's
    /// timestamps, or the kernel's uptime at t = 0 when those are not available.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_recording: Vec<BootPhase>,
}

/// One phase of a boot before the recording began (`meta.before_recording`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BootPhase {
    /// `firmware`, `loader`, `kernel`, `initrd`, `userspace` (systemd's, up to t = 0);
    /// in a container `host` (the host's uptime when the container's manager started) and
    /// `userspace`; or `uptime` (CLOCK_BOOTTIME at t = 0: everything since the kernel
    /// started, when systemd's timestamps are not available).
    pub phase: String,
    pub ns: Nanos,
}

/// One `record --also PID|COMM`: the spec as typed and the processes it named when
/// the command started. Those processes (and the children they started during the
/// recording) are recorded like the command's tree and have `in_scope = true`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlsoScope {
    /// A pid or a command name, as given to `--also`.
    pub spec: String,
    pub pids: Vec<i32>,
}

/// A block device the recording saw, with its /proc/diskstats totals over the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    pub dev: Dev,
    /// Kernel name, e.g. `vda`, `nvme0n1`, `loop0`.
    pub name: String,
    pub model: Option<String>,
    pub rotational: Option<bool>,
    pub size_bytes: Option<u64>,
    /// /proc/diskstats deltas from the start to the end of the recording.
    pub read_bytes: Option<u64>,
    pub read_ios: Option<u64>,
    pub write_bytes: Option<u64>,
    pub write_ios: Option<u64>,
    /// The device's read-ahead (`/sys/block/NAME/queue/read_ahead_kb`, its bdi's, which every
    /// filesystem on it uses), in KiB; `None` when unknown (files before format 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ahead_kb: Option<u32>,
}

/// A count of data the recording lost or could not resolve. Every report prints these.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Loss {
    /// The part of the recorder (or the importer) that lost it.
    pub source: LossSource,
    /// What was lost, e.g. `cpu1 overrun`, `unresolved inodes`.
    pub what: String,
    pub count: u64,
}

/// Where a [`Loss`] happened. Stored and shown as its word (`crate::TextEnum`);
/// a word this version does not know reads as [`LossSource::Other`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", from = "String")]
pub enum LossSource {
    /// The kernel's tracing ring buffers: overruns, dropped events, pages lost or unparsed.
    Tracefs,
    /// fanotify's event queue.
    Fanotify,
    /// The proc connector: messages the socket dropped, argv not read after an exec.
    ProcConnector,
    /// CPU samples (perf): samples the kernel could not write, records a full ring buffer dropped.
    Perf,
    /// The file table: inodes never named, files whose extents could not be mapped.
    Files,
    /// The spool's record files (lines a killed recorder left torn).
    Spool,
    /// Records of a bootchart2 log that could not be imported.
    Bootchart2,
    /// The eBPF program that copies the names of path system calls (format 3 on).
    Bpf,
    /// Written by another version or program, under a word this version does not know.
    #[default]
    Other,
}

/// A remark by the recorder or importer that a reader of the trace should see.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    pub source: NoteSource,
    pub text: String,
}

/// Who wrote a [`Note`]. Stored and shown as its word (`crate::TextEnum`);
/// a word this version does not know reads as [`NoteSource::Other`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "&'static str", from = "String")]
pub enum NoteSource {
    /// The recorder, while recording or assembling the trace from its spool.
    Record,
    /// `coldstart recover`, for a trace assembled from a killed recorder's spool.
    Recover,
    /// The file table: files deleted before their extents were read, the walk for inodes.
    Files,
    /// The bootchart2 importer.
    Bootchart2,
    /// Written by another version or program, under a word this version does not know.
    #[default]
    Other,
}

/// A process (thread group) seen during the recording.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    pub pid: i32,
    /// The parent when the process started (or when first seen).
    pub ppid: Option<i32>,
    /// The last command name (`comm`) seen.
    pub comm: String,
    /// The executable of the last exec.
    pub exe: Option<String>,
    /// The argument vector of the last exec.
    pub argv: Vec<String>,
    /// Fork time; `None` when the process existed before the recording started.
    pub start_ns: Option<Nanos>,
    /// Exit time; `None` when still running at the end.
    pub end_ns: Option<Nanos>,
    pub exit_code: Option<i32>,
    /// True for the processes recorded: the traced command and its descendants, the
    /// processes of [`Meta::also`] and theirs (always true under [`Scope::System`]). False for
    /// processes the recording only names: issuers of block requests, wakers of recorded threads.
    pub in_scope: bool,
}

/// The longest `comm` the kernel keeps (16 bytes with the NUL): a longer name is cut there.
pub const COMM_MAX_BYTES: usize = 15;

impl Process {
    /// The process's name for people: its `comm`, or, where the kernel cut that at
    /// [`COMM_MAX_BYTES`], the file name it was cut from (see [`full_name`]):
    /// `systemd-rc-local-generator` for `systemd-rc-loca`.
    pub fn name(&self) -> &str {
        full_name(&self.comm, self.exe.as_deref(), &self.argv)
    }
}

/// `comm` completed from the executable and the argument vector: when `comm` is
/// [`COMM_MAX_BYTES`] long, the first of the executable's file name, `argv[0]`'s and
/// `argv[1]`'s (a script run by its interpreter) that is longer and begins with it;
/// else `comm` itself (a name the program chose, or one that was never cut).
pub fn full_name<'a>(comm: &'a str, exe: Option<&'a str>, argv: &'a [String]) -> &'a str {
    if comm.len() != COMM_MAX_BYTES {
        return comm;
    }
    let file_name = |path: &'a str| path.rsplit('/').next().unwrap_or(path);
    exe.into_iter()
        .chain(argv.iter().take(2).map(String::as_str))
        .map(file_name)
        .find(|name| name.len() > comm.len() && name.starts_with(comm))
        .unwrap_or(comm)
}

/// One exec of a process.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exec {
    pub pid: i32,
    pub t_ns: Nanos,
    pub path: String,
    pub argv: Vec<String>,
}

/// A thread (task) of a process; the main thread has `tid == pid`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Thread {
    pub tid: i32,
    pub pid: i32,
    pub comm: String,
    pub start_ns: Option<Nanos>,
    pub end_ns: Option<Nanos>,
}

/// What a [`File`] row stands for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    #[default]
    Regular,
    Directory,
    /// Filesystem metadata read through the block device itself (inode tables,
    /// directories, journal); page indexes are disk offsets / page size.
    DeviceMetadata,
    /// Anything else (symlinks, devices, sockets).
    Other,
}

/// A file whose pages or blocks the recording saw. `id` is the key other tables use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct File {
    pub id: u32,
    /// The device of the filesystem holding the file (for device metadata, the disk itself).
    pub dev: Dev,
    pub ino: u64,
    /// `None` when the inode could not be resolved to a path.
    pub path: Option<String>,
    pub kind: FileKind,
    pub size: Option<u64>,
    /// Modification time, nanoseconds since the Unix epoch.
    pub mtime_ns: Option<i64>,
}

/// A physical extent of a file (FIEMAP), placed on the disk that block requests name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Extent {
    pub file_id: u32,
    /// The disk the physical offset is on (the whole disk, partition offset included).
    pub disk: Dev,
    /// Byte offset in the file.
    pub logical: u64,
    /// Byte offset on the disk; sector = physical / 512.
    pub physical: u64,
    pub length: u64,
    /// FIEMAP extent flags (e.g. 0x800 unwritten).
    pub flags: u32,
}

/// An open of a file by a process (from fanotify).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOpen {
    /// When the recorder received the event (close to, but not exactly, the open).
    pub t_ns: Nanos,
    pub pid: i32,
    pub file_id: u32,
    /// True for an open to execute the file.
    pub exec: bool,
}

/// Why a page entered the page cache, where the recorder could tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageOrigin {
    /// A page fault on a mapping.
    Fault,
    /// A read() or similar the program asked for.
    Read,
    /// Pages the kernel added ahead of the request.
    Readahead,
}

/// Pages of one file entering the page cache (`mm_filemap_add_to_page_cache`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageFill {
    pub t_ns: Nanos,
    pub pid: i32,
    pub tid: i32,
    pub file_id: u32,
    /// First page index in the file (byte offset / page size).
    pub index: u64,
    /// Number of pages (a large folio of order n is 2^n pages).
    pub pages: u32,
    pub origin: Option<PageOrigin>,
}

/// How a program asked for pages of a file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AccessKind {
    /// read() and friends (`filemap:mm_filemap_get_pages`).
    #[default]
    Read,
    /// A page fault on a file mapping (`filemap:mm_filemap_fault`).
    Fault,
    /// Pages already in the cache that the kernel mapped around a fault
    /// (`filemap:mm_filemap_map_pages`, fault-around); the program may or may not touch them.
    MapAround,
}

/// A range of a file's pages a program asked for, whether or not they were already
/// cached: with [`PageFill`] it tells pages used from pages read ahead and never used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageAccess {
    pub t_ns: Nanos,
    pub pid: i32,
    pub tid: i32,
    pub file_id: u32,
    /// First page index in the file.
    pub index: u64,
    /// Number of pages (at least 1).
    pub pages: u32,
    pub kind: AccessKind,
}

/// Pages of a file that the kernel's fault-around windows covered, that were in the page
/// cache when the recording ended, and that no recorded fill brought in: they were
/// cached before the recording began (held by a process outside it, such as an X server
/// that maps the same library: eviction cannot drop mapped pages) or filled outside its
/// scope. The start used them without reading them; a cold machine must read them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageResident {
    pub file_id: u32,
    /// First page index in the file.
    pub index: u64,
    /// Number of pages (at least 1).
    pub pages: u32,
}

/// The operation of a block request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockOp {
    #[default]
    Read,
    Write,
    Flush,
    Discard,
    Other,
}

/// A block request, from issue to completion.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockIo {
    /// `None` when only the completion was seen (flushes have no issue event).
    pub issue_ns: Option<Nanos>,
    /// `None` when the request had not completed when the recording ended.
    pub complete_ns: Option<Nanos>,
    pub dev: Dev,
    /// Start sector (512 bytes); `None` for requests without one (flushes).
    pub sector: Option<u64>,
    pub bytes: u32,
    pub op: BlockOp,
    /// The kernel's flag string (`R`, `RA`, `WS`, `FWFS`, `RM`, …).
    pub rwbs: String,
    /// The task running when the request was issued (often a kworker, or 0).
    pub pid: i32,
    pub comm: String,
    /// The file whose extent holds the start sector, where known.
    pub file_id: Option<u32>,
    /// Completion error (0 = success).
    pub error: i32,
}

impl BlockIo {
    /// Issue-to-completion latency, when both ends were seen.
    pub fn latency_ns(&self) -> Option<Nanos> {
        Some(self.complete_ns? - self.issue_ns?)
    }
}

/// What a thread was doing during a [`SchedInterval`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ThreadState {
    /// On a CPU.
    Running,
    /// Ready to run, waiting for a CPU.
    Runnable,
    /// Uninterruptible sleep (D): almost always waiting for I/O.
    IoWait,
    /// Interruptible sleep (S): waiting for an event, a timer, another process.
    #[default]
    Sleeping,
    /// Stopped or traced.
    Stopped,
}

/// A thread in one state from `start_ns` to `end_ns` (from `sched_switch` and `sched_wakeup`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SchedInterval {
    pub tid: i32,
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub state: ThreadState,
}

/// A thread being woken (`sched_wakeup`); the waker is `None` when the wakeup came
/// from interrupt context (typically an I/O completion).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Wakeup {
    pub t_ns: Nanos,
    pub tid: i32,
    pub waker_tid: Option<i32>,
}

/// How a milestone reached the recorder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkSource {
    /// `coldstart mark NAME`.
    #[default]
    Command,
    /// A line appended to the marks file (`$COLDSTART_MARKS`).
    MarksFile,
    /// A write to the tracing instance's `trace_marker`.
    TraceMarker,
    /// A line of the command's output matching `--until output:REGEX`.
    Output,
    /// Imported from another tool's log.
    Import,
    /// A readiness condition (`--until`) that was met: a milestone named by the
    /// condition, e.g. `window:mate-panel`, with the process that reached it.
    Until,
}

/// A milestone the program (or its user) marked.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub t_ns: Nanos,
    pub pid: Option<i32>,
    pub name: String,
    pub source: MarkSource,
    /// The thread that reached it, when known (format 2 on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tid: Option<i32>,
}

/// A systemd unit that started during the recording, with its manager's own times
/// (`InactiveExitTimestamp`, `ActiveEnterTimestamp`, `ActiveExitTimestamp`), read
/// from the manager when the recording ended.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unit {
    /// The unit's name, e.g. `systemd-journald.service`.
    pub name: String,
    /// Its manager: `system` (the host's), `user` or `container` (one the command booted).
    pub manager: String,
    /// When it left `inactive`: its start began (may lie before t = 0).
    pub activating_ns: Option<Nanos>,
    /// When it entered `active`: started (a service's readiness, a target reached).
    pub active_ns: Option<Nanos>,
    /// When it left `active` again, if it stopped during the recording.
    pub deactivating_ns: Option<Nanos>,
    /// Its main process, when it had one alive at the end (host pid).
    pub pid: Option<i32>,
    /// The units it is ordered after (`After=`).
    pub after: Vec<String>,
}

/// System CPU use over the interval `(t_ns - dt_ns, t_ns]`, as fractions of all CPUs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSample {
    pub t_ns: Nanos,
    pub dt_ns: Nanos,
    pub user: f64,
    pub system: f64,
    pub iowait: f64,
    pub idle: f64,
    /// Runnable tasks (`procs_running`) at the sample.
    pub running: u32,
    /// Tasks blocked on I/O (`procs_blocked`) at the sample.
    pub blocked: u32,
}

/// One disk's traffic over the interval `(t_ns - dt_ns, t_ns]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskSample {
    pub t_ns: Nanos,
    pub dt_ns: Nanos,
    pub dev: Dev,
    pub read_bytes: u64,
    pub read_ios: u64,
    pub write_bytes: u64,
    pub write_ios: u64,
    /// Fraction of the interval the disk had requests in flight (`io_ticks`).
    pub busy: f64,
}

/// One process's state and CPU use over the interval `(t_ns - dt_ns, t_ns]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcessSample {
    pub t_ns: Nanos,
    pub dt_ns: Nanos,
    pub pid: i32,
    /// The state letter of /proc/PID/stat (`R`, `S`, `D`, `Z`, …).
    pub state: char,
    /// User CPU as a fraction of one CPU over the interval.
    pub cpu_user: f64,
    /// System CPU as a fraction of one CPU over the interval.
    pub cpu_system: f64,
    /// Major page faults during the interval.
    pub major_faults: u64,
    pub rss_bytes: Option<u64>,
}

/// A file (or anonymous region) mapped executable into a process, from `start` to
/// `end` (exclusive), `file_offset` the offset in the file of `start`: with the path
/// and build id, enough to symbolize its addresses again, elsewhere.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mapping {
    pub id: u32,
    pub pid: i32,
    /// When it was mapped (0 for mappings that existed before the recording).
    pub t_ns: Nanos,
    pub start: u64,
    pub end: u64,
    pub file_offset: u64,
    /// The file's path, or a name in brackets (`[vdso]`, `[anon]`).
    pub path: String,
    /// The ELF build id, lower-case hex, when known.
    pub build_id: Option<String>,
}

/// One code address of a stack: in a mapping, or in the kernel.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Frame {
    pub id: u32,
    /// The mapping it lies in; `None` for the kernel and for addresses in no known mapping.
    pub mapping_id: Option<u32>,
    pub kernel: bool,
    /// The instruction's address (a return address minus one for callers).
    pub address: u64,
    /// The function, when a symbol table named it.
    pub symbol: Option<String>,
}

/// A node of the prefix tree of stacks: `frame_id` called from the stack `parent_id`
/// (`None`: the outermost frame). A sample's stack is its leaf node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stack {
    pub id: u32,
    /// Always less than `id` (parents are written first).
    pub parent_id: Option<u32>,
    pub frame_id: u32,
}

/// A recorded thread seen running on a CPU by the sampling clock (`perf`, about 1 kHz).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StackSample {
    pub t_ns: Nanos,
    pub pid: i32,
    pub tid: i32,
    pub cpu: u32,
    /// Its stack, innermost frame first when walked; `None` when no frame was found.
    pub stack_id: Option<u32>,
}

/// A recorded thread leaving its CPU to sleep (`sched_switch` with a sleeping state),
/// with the kernel stack it blocked in: what it waited for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuSample {
    pub t_ns: Nanos,
    pub pid: i32,
    pub tid: i32,
    /// Its kernel stack, innermost frame first when walked; `None` when no frame was found.
    pub stack_id: Option<u32>,
}

/// A mounted filesystem of the recording's machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    pub dev: Dev,
    /// Where it is mounted, in the recorder's mount namespace.
    pub point: String,
    /// The filesystem type as /proc/self/mountinfo says it (`ext4`, `fuse.sshfs`, `nfs4`, …).
    pub fstype: String,
}

impl Mount {
    /// A FUSE or network filesystem: every metadata call may be a request to a daemon or server.
    pub fn is_remote_or_fuse(&self) -> bool {
        let t = self.fstype.as_str();
        t == "fuse"
            || t.starts_with("fuse.")
            || t == "fuseblk"
            || matches!(t, "nfs" | "nfs4" | "cifs" | "smb3" | "smbfs" | "9p" | "ceph" | "afs" | "glusterfs")
    }
}

/// The calls that ask a filesystem about names or attributes rather than move data: what
/// the recorder keeps by default when one sleeps (a request to a FUSE daemon or a server),
/// and what the doctor counts as a slow filesystem's name lookups.
pub const METADATA_CALLS: &[&str] = &[
    "open",
    "creat",
    "openat",
    "openat2",
    "stat",
    "lstat",
    "fstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "getdents64",
];

/// One system call of a recorded thread (`raw_syscalls:sys_enter`/`sys_exit`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Syscall {
    pub tid: i32,
    pub pid: i32,
    pub enter_ns: Nanos,
    /// `None` when the call had not returned when the recording ended.
    pub exit_ns: Option<Nanos>,
    /// The call's name (`openat`, `statx`, `read`, …).
    pub name: String,
    /// The return value: an fd, a byte count, 0, or `-errno`.
    pub result: Option<i64>,
    /// The fd the call acted on, or the one an open returned.
    pub fd: Option<i32>,
    /// The file it named or acted on, when the file table has it.
    pub file_id: Option<u32>,
    /// The path it named, when it is not a file of the file table (a failed stat).
    pub path: Option<String>,
}

impl Syscall {
    /// Time in the call (up to the end of the recording's data for an unfinished call).
    pub fn duration_ns(&self) -> Option<Nanos> {
        Some(self.exit_ns? - self.enter_ns)
    }

    /// The errno of a failed call.
    pub fn errno(&self) -> Option<i64> {
        self.result.filter(|r| (-4095..0).contains(r)).map(|r| -r)
    }
}

#[cfg(test)]
mod tests {
    use super::full_name;

    #[test]
    fn a_name_cut_at_fifteen_bytes_is_completed_from_the_executable_or_the_arguments() {
        let generator = "/usr/lib/systemd/system-generators/systemd-rc-local-generator";
        assert_eq!(full_name("systemd-rc-loca", Some(generator), &[]), "systemd-rc-local-generator");
        let probe = ["/usr/lib/mate-session-check-accelerated".to_owned()];
        assert_eq!(full_name("mate-session-ch", None, &probe), "mate-session-check-accelerated");
        let script = ["/bin/sh".to_owned(), "/usr/bin/update-desktop-database-now".to_owned()];
        assert_eq!(
            full_name("update-desktop-", Some("/usr/bin/dash"), &script),
            "update-desktop-database-now"
        );
        // A name the program chose, and one of fewer bytes, stay as they are.
        assert_eq!(full_name("(sd-executor)", Some("/usr/lib/systemd/systemd"), &[]), "(sd-executor)");
        assert_eq!(full_name("python3", Some("/usr/bin/python3.11"), &[]), "python3");
        assert_eq!(full_name("pool-spawner-xx", Some("/usr/bin/caja"), &[]), "pool-spawner-xx");
    }
}
