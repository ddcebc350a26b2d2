//! The result of analysing a trace: [`Analysis`] and its parts.
//!
//! This is the stable contract that reports, charts, the doctor and users' scripts
//! read (serialized as JSON, documented in docs/report-json.md). Every field says
//! its unit in its name: `_ns` nanoseconds since the trace's t = 0 (or a duration
//! in nanoseconds), `_bytes` bytes, `pages` pages of `trace.page_size` bytes,
//! `sectors` 512-byte sectors. Lists are in a documented, deterministic order.
//! Files are referred to by their trace file id (`file`), processes by `pid`.

use coldstart_trace::{
    AlsoScope, BlockOp, CacheState, Dev, FileKind, Loss, Mark, Nanos, ReadyReason, Scope, Source,
};
use serde::{Deserialize, Serialize};

/// The name written in the `schema` field of every serialized analysis.
pub const SCHEMA_NAME: &str = "coldstart-analysis";
/// The version of the serialized form; raised on any incompatible change.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything the analysis found in one trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Analysis {
    /// Always [`SCHEMA_NAME`].
    pub schema: String,
    /// [`SCHEMA_VERSION`] of the code that produced it.
    pub version: u32,
    pub trace: TraceInfo,
    pub overview: Overview,
    /// Every file a read, request or attribution names, by id.
    pub files: Vec<FileInfo>,
    /// Every process of the trace, by (start, pid); processes present at t = 0 first.
    pub processes: Vec<ProcessInfo>,
    /// Every thread seen (thread table, scheduler intervals, page fills), by tid.
    pub threads: Vec<ThreadInfo>,
    /// Coalesced reads, by (start, pid, file, first page).
    pub reads: Vec<Read>,
    /// One row per process and file it read, by (pid, file).
    pub file_uses: Vec<FileUse>,
    /// Every file read, most separate reads first (then bytes, then name).
    pub by_file: Vec<RankRow>,
    /// Every process that read, most separate reads first (then bytes, then name).
    pub by_process: Vec<RankRow>,
    pub page_origins: PageOrigins,
    /// Pages read into the cache against pages asked for; `None` when the trace has no page accesses.
    pub page_use: Option<PageUse>,
    /// Per file read, most pages never asked for first (then id); empty without page accesses.
    pub page_use_by_file: Vec<FilePageUse>,
    /// One entry per disk in the trace or named by a block request, by device.
    pub disks: Vec<DiskAnalysis>,
    /// Time the threads in scope spent off the CPU (asleep or in I/O wait) inside a
    /// recorded system call, by call, directory and filesystem, most first (empty for a
    /// trace without system calls).
    #[serde(default)]
    pub syscall_waits: Vec<SyscallWait>,
    /// Wall-clock breakdown of the time to ready (or of the whole trace).
    pub start: StartBreakdown,
    /// The timeline from the command's start to ready, in order.
    pub phases: Vec<Phase>,
    /// `None` when there is no readiness point or no scheduler data.
    pub critical_path: Option<CriticalPath>,
    /// The trace's milestones, by time.
    pub marks: Vec<Mark>,
    /// The trace's loss counters, as recorded (zero counts included).
    pub losses: Vec<Loss>,
    /// Odd or missing data the analysis noticed; printed by every report.
    pub warnings: Vec<Warning>,
    /// Where the CPU went, from the stack samples; absent when the trace has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_profile: Option<CpuProfile>,
    /// The systemd units that became active during the recording, longest start first;
    /// absent when the trace has none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<UnitTime>,
    /// The chain of units to the unit the recording waited for (`--until unit:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_chain: Option<UnitChain>,
}

/// What was traced, where, and how (from the trace's meta and disk tables).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TraceInfo {
    pub tool: String,
    pub source: Source,
    pub command: Vec<String>,
    pub scope: Scope,
    pub root_pid: Option<i32>,
    pub host: String,
    pub kernel: String,
    pub cpu_model: String,
    pub cpu_count: u32,
    pub mem_total_bytes: u64,
    pub page_size: u32,
    pub clock: String,
    pub start_unix_ns: i64,
    pub duration_ns: Nanos,
    pub cache: CacheState,
    pub eviction: Option<String>,
    pub exit_code: Option<i32>,
    pub partial: bool,
    /// Processes outside the command's tree the recording covered (`record --also`).
    pub also: Vec<AlsoScope>,
}

/// The headline figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Overview {
    /// When the traced command started (the root process's fork; 0 when unknown).
    pub origin_ns: Nanos,
    pub ready: Option<ReadyInfo>,
    /// End of the analysed start: the readiness point, else the end of the trace.
    pub end_ns: Nanos,
    pub processes: u64,
    /// Processes forked during the recording, in scope.
    pub processes_started: u64,
    pub processes_in_scope: u64,
    pub threads: u64,
    pub execs: u64,
    /// Distinct files with page fills: the files read from disk.
    pub files_read: u64,
    /// Rows of the trace's files table: the files opened or read (filesystem metadata included).
    #[serde(default)]
    pub files_in_trace: u64,
    pub reads: u64,
    /// Reads that did not continue where the same process's previous read of the file ended.
    pub seeks: u64,
    pub pages_read: u64,
    pub bytes_read: u64,
    /// Block read requests and their bytes, all disks.
    pub block_read_requests: u64,
    pub block_read_bytes: u64,
    /// Summed over all threads (they overlap in time).
    pub cpu_ns: Nanos,
    pub io_wait_ns: Nanos,
    /// Files with page fills whose inode was never resolved to a path.
    pub unresolved_files: u64,
    /// Page fills naming a file id that has no file row.
    pub fills_without_file: u64,
    /// Sum of the trace's loss counters.
    pub lost: u64,
    /// What processes outside the recording's scope did on the machine during the start.
    #[serde(default)]
    pub others: OtherActivity,
    /// How the traced command ended, when the trace has its exit status.
    #[serde(default)]
    pub exit: Option<CommandExit>,
}

/// How the traced command ended: on its own, or ended by coldstart once the start was
/// ready (or when the recording gave up), in the words every report and `record` use.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandExit {
    /// Its exit status as a shell shows it: 128 + the signal's number when a signal ended it.
    pub status: i32,
    /// The signal that ended it (`SIGTERM`), when one did.
    pub signal: Option<String>,
    /// True when coldstart ended it: it was still running when the start was ready (or
    /// when the recording ended), and coldstart ends the command's tree then.
    pub by_coldstart: bool,
    /// `exit status 143: ended by coldstart's SIGTERM once the start was ready (window:mate-panel)`.
    pub text: String,
}

/// The machine's work for processes outside the recording's scope between the
/// command's start and ready: it competed with the start, so the times are inflated by it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OtherActivity {
    /// Disk reads those processes issued (kernel workers left out, and files the
    /// recorded processes read too), requests and bytes.
    pub read_requests: u64,
    pub read_bytes: u64,
    /// The processes that issued them, most bytes first (at most five).
    pub readers: Vec<OtherReader>,
    /// CPU time the machine spent beyond the recorded threads' running time (the CPU
    /// samples' busy share less the scheduler's running time; the recorder's own work
    /// included); `None` without CPU samples.
    pub cpu_ns: Option<Nanos>,
    /// The machine's CPU time over the start: CPUs × (ready − origin).
    pub cpu_capacity_ns: Nanos,
}

/// One process outside the scope that read from the disk during the start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherReader {
    pub pid: i32,
    pub comm: String,
    pub read_bytes: u64,
}

/// The readiness point and who reached it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadyInfo {
    pub t_ns: Nanos,
    /// As recorded (`exit` when taken from the root's exit).
    pub reason: ReadyReason,
    /// `t_ns - overview.origin_ns`.
    pub time_to_ready_ns: Nanos,
    /// The process and thread that reached it (the critical path ends there).
    pub pid: i32,
    pub tid: i32,
}

/// A file named somewhere in the analysis.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileInfo {
    pub id: u32,
    pub path: Option<String>,
    /// The path, or `<unresolved DEV inode INO>`, `<filesystem's own inode INO of DEV>`
    /// (a reserved inode, kind other), or `<unknown file ID>` without a file row.
    pub name: String,
    pub kind: FileKind,
    pub dev: Dev,
    pub ino: u64,
    pub size_bytes: Option<u64>,
    /// False when page fills or requests name this id but the trace has no file row for it.
    pub in_trace: bool,
}

/// Time a thread (or the threads of a process) spent in each scheduler state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateTimes {
    pub running_ns: Nanos,
    /// Runnable: waiting for a CPU.
    pub runnable_ns: Nanos,
    /// Uninterruptible sleep, taken as waiting for I/O.
    pub io_wait_ns: Nanos,
    /// Interruptible sleep: timers, events, other processes.
    pub sleeping_ns: Nanos,
    pub stopped_ns: Nanos,
}

/// A process, its time and its reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    pub pid: i32,
    pub ppid: Option<i32>,
    pub comm: String,
    pub exe: Option<String>,
    pub argv: Vec<String>,
    pub start_ns: Option<Nanos>,
    pub end_ns: Option<Nanos>,
    pub exit_code: Option<i32>,
    pub in_scope: bool,
    pub threads: u64,
    /// Summed over its threads, whole trace.
    pub time: StateTimes,
    /// The part of `time.io_wait_ns` attributed to files (see [`FileUse::io_wait_ns`]).
    pub io_wait_attributed_ns: Nanos,
    pub files: u64,
    pub reads: u64,
    pub seeks: u64,
    pub pages: u64,
}

/// A thread and its time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    pub tid: i32,
    pub pid: i32,
    pub comm: String,
    pub start_ns: Option<Nanos>,
    pub end_ns: Option<Nanos>,
    /// Whole trace.
    pub time: StateTimes,
    pub io_wait_attributed_ns: Nanos,
}

/// A read operation: page fills of one file by one process merged while each
/// fill starts at the page where the previous one ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Read {
    /// Time of the first and of the last page fill.
    pub t_ns: Nanos,
    pub end_ns: Nanos,
    pub pid: i32,
    /// The thread of the first page fill.
    pub tid: i32,
    pub file: u32,
    pub first_page: u64,
    pub pages: u64,
    /// True when it does not continue where this process's previous read of this file ended
    /// (a file-level seek); the first read of a file by a process is not a seek.
    pub seek: bool,
}

impl Read {
    pub fn last_page(&self) -> u64 {
        self.first_page + self.pages.saturating_sub(1)
    }
}

/// One process's reads of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileUse {
    pub pid: i32,
    pub file: u32,
    pub reads: u64,
    pub seeks: u64,
    pub pages: u64,
    pub readahead_pages: u64,
    pub first_ns: Nanos,
    pub last_ns: Nanos,
    /// I/O wait of this process's threads attributed to this file: each uninterruptible
    /// wait is shared, by pages, among the files whose pages the thread added to the
    /// cache from the start of the running slice that led into the wait to its end.
    pub io_wait_ns: Nanos,
}

/// A row of a ranking of files or processes by separate reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RankRow {
    /// The file (rows of a ranking by file).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<u32>,
    /// The process (rows of a ranking by process).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub pid: Option<i32>,
    /// The file's name, or the process's `comm`.
    pub name: String,
    pub reads: u64,
    pub seeks: u64,
    pub pages: u64,
    pub bytes: u64,
    pub io_wait_ns: Nanos,
    /// Processes that read the file (by file), or files the process read (by process).
    pub spread: u64,
}

/// Pages read, by why they entered the page cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageOrigins {
    pub fault: u64,
    pub read: u64,
    pub readahead: u64,
    /// Fills whose origin the recorder could not tell.
    pub unknown: u64,
}

/// Pages read into the page cache during the recording against the pages the
/// programs asked for (read() or a page fault), as distinct pages per file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PageUse {
    /// Distinct pages of files read into the cache (filesystem metadata left out: no
    /// program asks for its pages, the filesystem reads them).
    pub filled_pages: u64,
    /// Of those, pages a program asked for, before or after they arrived.
    pub used_pages: u64,
    /// Pages only mapped around a fault: the program may never have touched them.
    pub map_around_only_pages: u64,
    /// Pages read and never asked for: readahead that went unused.
    pub unused_pages: u64,
    /// Distinct pages asked for (read or fault), and those of them that were already
    /// cached (not read during the recording).
    pub asked_pages: u64,
    pub asked_cached_pages: u64,
}

/// [`PageUse`] of one file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilePageUse {
    pub file: u32,
    pub filled_pages: u64,
    pub used_pages: u64,
    pub map_around_only_pages: u64,
    pub unused_pages: u64,
}

/// Block requests of one disk: traffic, seeks, and which file each request read.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskAnalysis {
    pub dev: Dev,
    pub name: String,
    pub model: Option<String>,
    pub rotational: Option<bool>,
    /// What kind of disk it is, in the words every report uses: the kernel's rotational flag
    /// and the class its measured read latencies suggest, both labelled
    /// (`kernel flag: rotational; measured: like an SSD (median read 71 µs)`).
    #[serde(default)]
    pub kind: String,
    /// The device's read-ahead in KiB (`read_ahead_kb`), when the trace has it (format 4 on).
    #[serde(default)]
    pub read_ahead_kb: Option<u32>,
    /// Pages of the files read from this disk that entered the page cache, and those of them
    /// no program asked for nor had mapped around a fault (read ahead and never used), when
    /// the trace has page accesses (`page_use`).
    #[serde(default)]
    pub filled_pages: u64,
    #[serde(default)]
    pub unused_pages: u64,
    /// /proc/diskstats read bytes and requests over the recording.
    pub diskstats_read_bytes: Option<u64>,
    pub diskstats_read_ios: Option<u64>,
    /// Requests issued again while still in flight (requeued), counted once: their
    /// second issue is left out of every figure here.
    pub reissued: u64,
    /// Recorded read requests (op `read`) and their bytes.
    pub traced_read_requests: u64,
    pub traced_read_bytes: u64,
    /// `traced_read_bytes / diskstats_read_bytes`, when diskstats has a non-zero figure.
    pub coverage: Option<f64>,
    pub seeks: DiskSeeks,
    /// Summed issue-to-completion latency of read requests, and its median.
    pub read_latency_ns: Nanos,
    pub read_latency_median_ns: Option<Nanos>,
    /// Read requests of the filesystem's own metadata, and of no known file.
    pub metadata_requests: u64,
    pub metadata_bytes: u64,
    pub unknown_requests: u64,
    pub unknown_bytes: u64,
    /// Write requests (op `write`) with a sector and their bytes: kept out of the seeks,
    /// the files and the figures above, which are reads'.
    #[serde(default)]
    pub write_requests: u64,
    #[serde(default)]
    pub write_bytes: u64,
    /// Per file, its read requests: most requests first (then bytes, then id).
    pub files: Vec<DiskFile>,
    /// Every request with a sector, in issue order.
    pub requests: Vec<DiskRequest>,
}

/// Head movement between consecutive read requests (by issue time) of one disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSeeks {
    /// Requests with a sector (flushes have none).
    pub requests: u64,
    /// Requests starting exactly where the previous one ended.
    pub sequential: u64,
    pub forward: u64,
    pub backward: u64,
    /// Summed distances, in sectors.
    pub forward_sectors: u64,
    pub backward_sectors: u64,
    /// Requests farther than `threshold_bytes` from the end of the previous one.
    pub far: u64,
    pub threshold_bytes: u64,
    /// The median distance of the requests that were not sequential, bytes.
    #[serde(default)]
    pub median_distance_bytes: Option<u64>,
    /// The requests that were not sequential, by distance.
    #[serde(default)]
    pub distances: SeekDistances,
}

/// Seeks by distance from the end of the previous request, either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeekDistances {
    pub under_1_mib: u64,
    pub under_128_mib: u64,
    pub under_1_gib: u64,
    pub farther: u64,
}

impl SeekDistances {
    pub fn add(&mut self, bytes: u64) {
        const MIB: u64 = 1 << 20;
        match bytes {
            b if b < MIB => self.under_1_mib += 1,
            b if b < 128 * MIB => self.under_128_mib += 1,
            b if b < 1024 * MIB => self.under_1_gib += 1,
            _ => self.farther += 1,
        }
    }
}

/// One file's requests on one disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskFile {
    pub file: u32,
    pub requests: u64,
    pub bytes: u64,
    /// Requests of this file that were far seeks.
    pub far_seeks: u64,
    pub latency_ns: Nanos,
}

/// One block request with the file it belongs to and its distance from the previous one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskRequest {
    pub issue_ns: Option<Nanos>,
    pub complete_ns: Option<Nanos>,
    pub sector: u64,
    pub bytes: u32,
    pub op: BlockOp,
    pub pid: i32,
    /// The file holding the start sector, when known.
    pub file: Option<u32>,
    /// True for the filesystem's own metadata.
    pub metadata: bool,
    /// Start sector minus the end sector of the previous request; `None` for the first.
    pub distance_sectors: Option<i64>,
    pub far: bool,
}

/// Wall-clock breakdown of `from_ns..to_ns` by what the traced (in-scope) threads did:
/// any running counts as CPU; else any in I/O wait as I/O; else any runnable as
/// waiting for a CPU; else idle (sleeps, timers, other processes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartBreakdown {
    pub from_ns: Nanos,
    pub to_ns: Nanos,
    pub cpu_ns: Nanos,
    pub io_wait_ns: Nanos,
    pub cpu_wait_ns: Nanos,
    pub idle_ns: Nanos,
    /// False when the trace has no scheduler data (then all time is idle).
    pub has_sched: bool,
}

/// The dominant kind of work of a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseKind {
    /// Mostly waiting for reads.
    Read,
    /// Mostly running on a CPU.
    Cpu,
    /// Mostly neither: sleeps, timers, other processes.
    Wait,
}

/// A stretch of the start with one dominant kind of work.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Phase {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub kind: PhaseKind,
    /// A human name, e.g. `read 48 files under /usr/share/app — 0.910 s, 3.1 MiB, 52 seeks`.
    pub name: String,
    /// The deepest directory holding at least half the bytes read in the phase.
    pub dir: Option<String>,
    pub files: u64,
    pub files_in_dir: u64,
    /// The file with most pages read in the phase (lowest id on ties).
    pub top_file: Option<u32>,
    pub pages: u64,
    pub bytes: u64,
    pub reads: u64,
    pub seeks: u64,
    /// In-scope threads, summed (may exceed the phase's length on several CPUs).
    pub cpu_ns: Nanos,
    pub io_wait_ns: Nanos,
    /// The process with most CPU time in the phase.
    pub top_pid: Option<i32>,
    /// The mark the phase ends at, when a mark split it.
    pub ends_at_mark: Option<String>,
}

/// What a thread on the critical path was doing during a segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SegmentKind {
    Cpu,
    /// Runnable, waiting for a CPU.
    CpuWait,
    IoWait,
    /// Asleep until a timer or an interrupt: the wakeup was recorded, and no other thread made it.
    Sleep,
    /// Asleep until woken by a thread outside the recorded scope (no scheduler data for it):
    /// `waker_process` names its process where the trace does.
    WaitUntraced,
    /// Asleep, and no wakeup was recorded: what ended the sleep is unknown.
    NoWakeup,
    /// No scheduler data for this time (before the thread's first interval, gaps).
    Untraced,
}

/// Time spent on one file, or by one process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileTime {
    pub file: u32,
    pub ns: Nanos,
}

/// One step of the critical path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathSegment {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    pub tid: i32,
    pub pid: i32,
    pub kind: SegmentKind,
    /// For I/O waits: the files the wait is attributed to, most time first.
    pub files: Vec<FileTime>,
    /// For waits ended by another thread that has no data: that thread.
    pub waker_tid: Option<i32>,
    /// For waits ended by another thread that has no data: its process, as the trace names it.
    pub waker_process: Option<WakerProcess>,
    /// For waits and sleeps: the system call the thread was in, when the trace has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_in: Option<WaitedIn>,
}

/// The system call a thread was in while it waited, and what it named; the kernel function
/// it slept in, from its off-CPU stack.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct WaitedIn {
    /// The call (`statx`), `page fault`, or empty (a kernel thread's wait).
    pub syscall: String,
    /// The directory of the path the call named or acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// The filesystem type of that path, from the trace's mounts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fstype: Option<String>,
    /// The first meaningful kernel function below the scheduler in the stack the thread went
    /// to sleep with (`fuse_simple_request`), when the trace has off-CPU stacks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
    /// The part of the kernel that function belongs to, when its name does not say it
    /// (`page cache` for `folio_wait_bit_common`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub area: Option<String>,
    /// The call was named from the kernel stack alone (no `syscall` row): each sleep counts
    /// as one wait, and there is no path (`dir` is then the slow mount the process's files
    /// were on, when there is one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_stack: bool,
}

impl WaitedIn {
    /// A FUSE or network filesystem, where each call may be a request to a daemon or server.
    pub fn on_slow_filesystem(&self) -> bool {
        self.fstype.as_deref().is_some_and(|t| {
            coldstart_trace::Mount { fstype: t.to_owned(), ..Default::default() }.is_remote_or_fuse()
        })
    }
}

impl std::fmt::Display for WaitedIn {
    /// `statx under /opt/app/plug-ins (fuse)`; the type only when it is worth saying. With a
    /// kernel function: `fuse_simple_request (statx under /opt/app/plug-ins, fuse)`,
    /// `folio_wait_bit_common (read, page cache)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(kernel) = &self.kernel {
            f.write_str(kernel)?;
            let mut inside = Vec::new();
            if !self.syscall.is_empty() {
                inside.push(match &self.dir {
                    Some(dir) => format!("{} under {dir}", self.syscall),
                    None => self.syscall.clone(),
                });
            }
            match self.fstype.as_deref() {
                Some(t) if self.on_slow_filesystem() || t == "overlay" => inside.push(t.to_owned()),
                _ => inside.extend(self.area.clone()),
            }
            if !inside.is_empty() {
                write!(f, " ({})", inside.join(", "))?;
            }
            return Ok(());
        }
        f.write_str(&self.syscall)?;
        if let Some(dir) = &self.dir {
            write!(f, " under {dir}")?;
        }
        match self.fstype.as_deref() {
            Some(t) if self.on_slow_filesystem() || t == "overlay" => write!(f, " ({t})"),
            _ => Ok(()),
        }
    }
}

/// Off-CPU time spent in one kind of system call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyscallWait {
    pub waited_in: WaitedIn,
    pub ns: Nanos,
    /// Calls that waited.
    pub calls: u64,
}

/// The process of a thread that ended a wait on the critical path from outside the
/// recorded scope (record it with `--also COMM`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WakerProcess {
    /// The waker's thread group; the thread's own id when the trace does not know its process.
    pub pid: i32,
    /// Empty when the trace does not name it (the thread had exited before the recording ended).
    pub comm: String,
    /// False for a process the recording only names; true for one recorded without scheduler data.
    pub in_scope: bool,
}

/// Time the critical path waited on one process outside the recorded scope.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutsideWait {
    pub process: WakerProcess,
    pub ns: Nanos,
    /// Waits (segments of the path) it ended.
    pub waits: u64,
}

/// Time the critical path spent in another process (a helper), all kinds together.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessTime {
    pub pid: i32,
    pub comm: String,
    pub ns: Nanos,
    pub cpu_ns: Nanos,
    pub io_wait_ns: Nanos,
}

/// The critical path's time by kind: the ready process's own CPU, I/O (by file),
/// waits for a CPU and sleeps, plus the time spent in other processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PathSummary {
    pub total_ns: Nanos,
    pub cpu_ns: Nanos,
    pub cpu_wait_ns: Nanos,
    pub io_wait_ns: Nanos,
    /// Files of the ready process's I/O waits, most time first.
    pub io_files: Vec<FileTime>,
    pub sleep_ns: Nanos,
    /// Waits on threads without scheduler data.
    pub wait_untraced_ns: Nanos,
    /// Sleeps that no recorded wakeup ended.
    pub no_wakeup_ns: Nanos,
    pub untraced_ns: Nanos,
    /// Waits of any thread on the path that a process outside the recorded scope ended,
    /// by process, most time first.
    pub outside: Vec<OutsideWait>,
    /// Other processes on the path, most time first.
    pub helpers: Vec<ProcessTime>,
    /// The path's waits and sleeps by the system call they were in, most time first.
    #[serde(default)]
    pub in_syscalls: Vec<SyscallWait>,
}

/// The chain of work that led to readiness, walked back from the thread that reached it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CriticalPath {
    /// From the command's start to the readiness point.
    pub from_ns: Nanos,
    pub to_ns: Nanos,
    pub pid: i32,
    pub tid: i32,
    /// In time order; consecutive segments of one thread and kind are merged.
    pub segments: Vec<PathSegment>,
    pub summary: PathSummary,
}

/// A kind of odd or missing data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WarningCode {
    /// A non-zero loss counter of the trace.
    Lost,
    /// The trace was recovered from a recorder that did not finish.
    Partial,
    /// Page fills naming a file id with no file row.
    UnknownFile,
    /// Files read whose inode was never resolved to a path.
    UnresolvedFile,
    /// Gaps between consecutive scheduler intervals of a thread.
    SchedGap,
    /// Scheduler intervals overlapping the previous one of their thread, or ending before they start.
    SchedOverlap,
    /// Events timed before t = 0 or after the end of the recording.
    OutOfRange,
    /// No scheduler intervals: no time breakdown, no critical path.
    NoSched,
    /// No readiness point and no exit of the root process.
    NoReady,
    /// The readiness reason names a mark the trace does not hold.
    ReadyMarkMissing,
    /// The critical path walk stopped early.
    PathIncomplete,
    /// CPU samples with frames no symbol named (stripped files, code outside any file).
    Unsymbolized,
}

/// Something the analysis noticed about the data; never a failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Warning {
    pub code: WarningCode,
    /// How many events, files or nanoseconds it concerns (see `message`).
    pub count: u64,
    pub message: String,
}

/// How a unit's processes were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnitProcessesFrom {
    /// Its main process (the manager's `MainPID`) and that process's descendants
    /// started while the unit was activating.
    MainPid,
    /// No main process was alive at the end: the manager's children started while the
    /// unit was activating whose command name begins its unit name (or `mount` for a
    /// mount unit), and their descendants.
    Name,
    /// None found: a target, a slice, a socket, or a unit whose processes had exited
    /// under a name that does not say whose they were.
    None,
}

/// Time a unit's processes waited on a process of another unit (the waker of their sleep).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitWait {
    pub unit: String,
    pub ns: Nanos,
}

/// Time a unit's processes waited for the pages of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitFileWait {
    pub file: u32,
    pub ns: Nanos,
}

/// One systemd unit that became active during the recording.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitTime {
    pub name: String,
    /// `container`, `system` or `user`.
    pub manager: String,
    /// When its start began (systemd's `InactiveExitTimestamp`); may be before t = 0.
    pub activating_ns: Nanos,
    /// When it became active (`ActiveEnterTimestamp`).
    pub active_ns: Nanos,
    /// `active_ns - activating_ns`, what `systemd-analyze blame` shows.
    pub took_ns: Nanos,
    /// Its processes, by pid.
    pub pids: Vec<i32>,
    pub pids_from: UnitProcessesFrom,
    /// Wall-clock time of `took_ns` when one of its processes ran on a CPU.
    pub cpu_ns: Nanos,
    /// CPU time of its processes while it was activating, threads summed.
    pub cpu_time_ns: Nanos,
    /// Wall-clock time none ran and one waited for I/O…
    pub io_wait_ns: Nanos,
    /// …by the file with most pages behind each wait (the analysis's attribution of
    /// I/O waits), most first; waits with no page seen are in `io_wait_ns` only.
    pub io_files: Vec<UnitFileWait>,
    /// Wall-clock time none ran or waited for I/O and one slept until a process of
    /// another unit woke it, by that unit, most first.
    pub unit_waits: Vec<UnitWait>,
    /// … or until the manager itself (systemd) woke it.
    pub manager_wait_ns: Nanos,
    /// The rest of `took_ns`: other sleeps, and all of it for a unit without processes.
    pub other_ns: Nanos,
    /// Of its `After=` units, the one that became active last before its start began,
    /// the unit it waited for in `systemd-analyze critical-chain`'s terms.
    pub after: Option<String>,
    /// When that unit became active.
    pub after_active_ns: Option<Nanos>,
}

/// The chain of units to a target: each the `After=` unit that became active last
/// before the previous one started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitChain {
    pub target: String,
    /// Unit names from the target back to the first, as `systemd-analyze critical-chain`
    /// prints them; each is in [`Analysis::units`].
    pub links: Vec<String>,
}

/// The stack samples of the start, summed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuProfile {
    /// Samples between the command's start and ready (each about 1 ms of one CPU at 1 kHz).
    pub samples: u64,
    /// The sampling rate, per second and CPU, when the trace says (each sample stands for 1/rate s of CPU).
    pub sample_hz: Option<f64>,
    /// Most samples first: `self_samples` where it was the innermost frame, `samples` anywhere on the stack.
    pub functions: Vec<CpuFunction>,
    /// Files (executables, libraries, `[kernel]`) by samples whose innermost frame lies in them.
    pub libraries: Vec<CpuLibrary>,
    /// One entry per phase of the analysis, in order.
    pub phases: Vec<PhaseCpu>,
    /// One entry per CPU segment of the critical path with samples, in order.
    pub critical_path: Vec<SegmentCpu>,
    /// The samples the inclusive view and the subtree are of: those of the critical path's
    /// CPU segments, or without a critical path all of the start's.
    pub tree: CpuTree,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFunction {
    pub name: String,
    pub library: String,
    pub self_samples: u64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLibrary {
    pub name: String,
    pub self_samples: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseCpu {
    /// Index into the analysis' phases.
    pub phase: usize,
    pub samples: u64,
    pub functions: Vec<CpuFunction>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCpu {
    /// Index into the critical path's segments.
    pub segment: usize,
    pub samples: u64,
    /// The function most samples of the segment's thread were in.
    pub hottest: CpuFunction,
}

/// Which samples a [`CpuTree`] is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TreeScope {
    /// The samples of the critical path's CPU segments (their thread, in their time).
    CriticalPath,
    /// Every sample from the command's start to ready (the trace has no critical path).
    Start,
}

/// A function or an activity with a count of samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuShare {
    pub name: String,
    pub library: String,
    pub samples: u64,
}

/// The inclusive view (`perf report --children`) of a set of samples, and its dominant subtree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTree {
    pub scope: TreeScope,
    pub samples: u64,
    /// Named functions by the samples under them (each counted once per sample), most
    /// first; generic ones (entries, event loops, interpreter loops) and the allocator's left out.
    pub inclusive: Vec<CpuShare>,
    /// The deepest function that still holds most of the samples, when one does.
    pub subtree: Option<CpuSubtree>,
}

/// The deepest function holding most of a [`CpuTree`]'s samples, and what is inside it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSubtree {
    pub name: String,
    pub library: String,
    /// Samples with it on the stack.
    pub samples: u64,
    /// Samples in it, not in a callee.
    pub self_samples: u64,
    /// Its most frequent callers, nearest first.
    pub called_from: Vec<CpuShare>,
    /// Its direct callees by the samples under them, most first (kernel activities and the
    /// allocator included).
    pub callees: Vec<CpuShare>,
    /// Samples with an allocator function below it (`malloc`, `free`, `g_slice_alloc`, …,
    /// and what they run in the kernel), and those functions (the outermost per sample).
    pub allocator_samples: u64,
    pub allocator: Vec<CpuShare>,
    /// Samples in the kernel below it, and by what the thread was doing there.
    pub kernel_samples: u64,
    pub kernel: Vec<CpuShare>,
}
