//! Replaying a plan: its steps in plan order by a pool of `depth` threads, each
//! range read through the page cache or only advised (WILLNEED, asynchronous). The
//! filesystem-metadata ranges (block-device ranges) go first and the other steps
//! start once they are in, so the opens and directory reads find the inode tables and
//! directory blocks cached: ext4 reads those one 4 KiB bio per block, and blk-throttle
//! charges every bio (docs/benchmarks-journal.md, "The replay's bios").
//! By default a range is read exactly ([`Fill::Exact`]: WILLNEED, then reads with
//! `FADV_RANDOM`: 4 KiB folios, nothing past the range); a replay that is waited for
//! may instead read like `read(2)` of the whole range does ([`Fill::Sequential`]: the
//! kernel's readahead allocates large folios), which measured no faster for the
//! program after it (docs/benchmarks-journal.md, "Ahead: filling the cache with large folios": its
//! own mmap faults leave mostly 4 KiB folios in a warm cache too).
//! A replay alongside a start ([`Replay::start`]) also uses fewer threads
//! (`alongside_depth`): the program's own reads queue behind the replay's requests
//! in flight, and on a slow disk a deep replay delays every page the program
//! misses (docs/benchmarks-journal.md, "Orders and depth": 16 threads against 2 and 4).
//! Where the plan's device serves requests first in, first out (`device.rs`: the elevator
//! `none` or kyber, a blk-throttle or io.max read limit), a real-time priority does not put
//! the replay ahead of the start, so the replay alongside is paced instead
//! ([`AlongsideMode`], `pacing.rs`): first-need order, two reads in flight, giving way
//! while the device is queued deeper.
//!
//! Every file is opened by path and checked against the identity in the plan
//! (device, inode, size, mtime; a block device by its device number) before any
//! of it is read: a changed file is skipped and reported, never read wrongly. Ranges
//! already resident (cachestat) are not read again; the bytes to fetch are bounded
//! by a memory budget: `max_memory` and never more than `memory_share` of
//! MemAvailable at the start. Threads get the I/O priority asked for. The report
//! accounts for every planned range exactly once.

pub mod device;
mod pacing;
mod priority;
mod sys;
mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use device::{DeviceFacts, Priority};
pub use pacing::{GIVE_WAY_AT, LONGEST_WAIT, PACED_CHUNK_BYTES, PACED_DEPTH};
pub use priority::{CpuClass, IoPriority};
pub use sys::{cached_pages, mem_available};

use crate::error::{PrefetchError, Result};
use crate::plan::Plan;

/// How a range is fetched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// `POSIX_FADV_WILLNEED` for the range, then `pread` through it: the thread
    /// moves on once the pages are in, so `depth` bounds the I/O in flight.
    #[default]
    Read,
    /// `POSIX_FADV_WILLNEED` only: asynchronous, the kernel reads when it can
    /// (ureadahead style); returning does not mean the pages are in.
    Willneed,
}

impl Method {
    pub fn name(self) -> &'static str {
        match self {
            Method::Read => "read",
            Method::Willneed => "willneed",
        }
    }
}

/// How `Method::Read` fills the page cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fill {
    /// Plain `pread`s through the range in 256 KiB pieces, no advice: the kernel's
    /// own readahead brings the pages in as large folios, as for the program's own
    /// reads (a warm cache). It also reads ahead past the end of the range; those
    /// bytes are measured (cachestat) and counted against the budget, and a range
    /// whose readahead might not fit the budget is read the `Exact` way.
    Sequential,
    /// `FADV_RANDOM`, then WILLNEED and reads of exactly the range: nothing beyond
    /// it is read, but the pages are 4 KiB folios.
    #[default]
    Exact,
}

impl Fill {
    pub fn name(self) -> &'static str {
        match self {
            Fill::Sequential => "sequential",
            Fill::Exact => "exact",
        }
    }
}

/// How a replay alongside a start shares the device with it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlongsideMode {
    /// `paced` where a device of the plan ignores I/O priority, `priority` elsewhere.
    #[default]
    Auto,
    /// The options as given (the plan's order, `alongside_depth` threads, the I/O
    /// priority): the device's elevator serves the start's requests or the replay's first.
    Priority,
    /// First-need order, [`PACED_DEPTH`] reads of at most [`PACED_CHUNK_BYTES`] in flight,
    /// each waiting (at most [`LONGEST_WAIT`]) while the device is queued [`GIVE_WAY_AT`] deep.
    Paced,
}

impl AlongsideMode {
    pub fn name(self) -> &'static str {
        match self {
            AlongsideMode::Auto => "auto",
            AlongsideMode::Priority => "priority",
            AlongsideMode::Paced => "paced",
        }
    }
}

/// How a replay alongside a start was made, and why.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AlongsideChoice {
    /// What was asked (`auto` by default).
    pub asked: AlongsideMode,
    /// What ran: `priority` or `paced`.
    pub mode: AlongsideMode,
    /// The plan's devices and what each does with I/O priority.
    pub devices: Vec<DeviceFacts>,
    /// Paced: reads that found a device busy and waited, and the seconds they waited.
    pub gave_way: u64,
    pub gave_way_s: f64,
}

impl AlongsideChoice {
    /// One line for the replay's summary.
    pub fn describe(&self) -> String {
        let gave_way = match self.mode {
            AlongsideMode::Paced => format!(", gave way {} times ({:.2} s)", self.gave_way, self.gave_way_s),
            _ => String::new(),
        };
        let (mode, devices) = self.how();
        format!("alongside {mode}{gave_way}; devices: {devices}")
    }

    /// The mode and why, and the devices found, without this replay's counts.
    pub fn how(&self) -> (String, String) {
        let why = if self.asked == AlongsideMode::Auto { "detected" } else { "asked" };
        let mode = match self.mode {
            AlongsideMode::Paced => format!(
                "paced ({why}): first-need order, {PACED_DEPTH} reads of at most {} KiB in flight",
                PACED_CHUNK_BYTES >> 10
            ),
            _ => format!(
                "priority ({why}): the device's elevator orders the replay's requests and the start's"
            ),
        };
        let devices: Vec<String> = self.devices.iter().map(DeviceFacts::describe).collect();
        (mode, if devices.is_empty() { "none".into() } else { devices.join("; ") })
    }
}

/// Default threads of a replay that is waited for.
pub const DEPTH: usize = 16;
/// Default threads of a replay alongside a start.
pub const ALONGSIDE_DEPTH: usize = 4;

fn default_alongside_depth() -> usize {
    ALONGSIDE_DEPTH
}

/// How to replay.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplayOptions {
    /// Threads working through the steps (and so the requests in flight with `Read`)
    /// of a replay that is waited for ([`replay`]: ahead of a start, or on its own).
    pub depth: usize,
    /// Threads of a replay alongside a start ([`Replay::start`]).
    #[serde(default = "default_alongside_depth")]
    pub alongside_depth: usize,
    /// How a replay alongside a start shares the device with it.
    #[serde(default)]
    pub alongside_mode: AlongsideMode,
    pub method: Method,
    /// How `Method::Read` fills the cache in a replay that is waited for.
    #[serde(default)]
    pub fill: Fill,
    /// How `Method::Read` fills the cache alongside a start.
    #[serde(default)]
    pub alongside_fill: Fill,
    /// Most bytes to bring into the cache (`None`: only the MemAvailable share applies).
    pub max_memory: Option<u64>,
    /// Largest share of MemAvailable (at the start) the replay may fill.
    pub memory_share: f64,
    /// I/O priority of the replay threads (`None`: inherited).
    pub io_priority: Option<IoPriority>,
    /// CPU scheduling class of the threads of a replay that is waited for.
    #[serde(default)]
    pub cpu: CpuClass,
    /// CPU scheduling class of the threads of a replay alongside a start.
    #[serde(default)]
    pub alongside_cpu: CpuClass,
    /// Largest single read or WILLNEED (the kernel honours up to its readahead limit per call).
    pub chunk_bytes: u64,
    /// Replay block-device (filesystem metadata) ranges.
    pub metadata: bool,
    /// Warm the plan's directories.
    pub directories: bool,
    /// Also look up every entry of a listed directory (fstatat), which reads the inode
    /// tables of names the program stats without reading them (python's `.py` beside
    /// the `.pyc` it loads) and builds their dentries and inodes.
    #[serde(default)]
    pub stat_entries: bool,
}

impl Default for ReplayOptions {
    fn default() -> ReplayOptions {
        ReplayOptions {
            depth: DEPTH,
            alongside_depth: ALONGSIDE_DEPTH,
            alongside_mode: AlongsideMode::Auto,
            method: Method::Read,
            fill: Fill::Exact,
            alongside_fill: Fill::Exact,
            max_memory: None,
            memory_share: 0.5,
            io_priority: None,
            cpu: CpuClass::Normal,
            alongside_cpu: CpuClass::Normal,
            chunk_bytes: 8 << 20,
            metadata: true,
            directories: true,
            stat_entries: false,
        }
    }
}

/// A number of ranges and their bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub ranges: u64,
    pub bytes: u64,
}

impl Tally {
    pub fn add(&mut self, ranges: u64, bytes: u64) {
        self.ranges += ranges;
        self.bytes += bytes;
    }

    fn merge(&mut self, other: Tally) {
        self.add(other.ranges, other.bytes);
    }
}

/// What a replay did. Every planned range is counted once in exactly one of
/// `resident`, `fetched`, `unknown_residency`, `stale`, `missing`, `unreadable`,
/// `over_budget`, `failed`, `not_reached` (bytes of a partly resident range are
/// split between `resident` and `fetched`, the range counted in `fetched`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplayReport {
    pub planned: Tally,
    pub planned_files: usize,
    /// Already in the page cache.
    pub resident: Tally,
    /// Brought into the page cache by the replay.
    pub fetched: Tally,
    /// Read, but the kernel would not say what was resident before (unprivileged
    /// cachestat on a file we may not write).
    pub unknown_residency: Tally,
    /// Skipped: the file changed since the plan was made (identity differs).
    pub stale: Tally,
    pub stale_files: usize,
    /// Skipped: the file is gone.
    pub missing: Tally,
    pub missing_files: usize,
    /// Skipped: the file cannot be opened (permissions, a block device we may not read).
    pub unreadable: Tally,
    pub unreadable_files: usize,
    /// Skipped: the memory budget was used up.
    pub over_budget: Tally,
    /// A read or advice failed.
    pub failed: Tally,
    /// Not reached: the replay was cancelled (e.g. the command finished first).
    pub not_reached: Tally,
    /// Filesystem metadata (block-device ranges) among the above: planned, and fetched.
    pub metadata_planned: Tally,
    pub metadata_fetched: Tally,
    /// Filesystem metadata skipped because its block device cannot be opened (among
    /// `unreadable`): a VM's disk or a locked-down kernel refusing even root.
    #[serde(default)]
    pub metadata_unreadable: Tally,
    /// Among `fetched`: read with [`Fill::Sequential`] (the others were read or
    /// advised exactly: `Fill::Exact`, `Method::Willneed`, or a range whose
    /// readahead past its end might not fit the budget).
    #[serde(default)]
    pub sequential: Tally,
    /// Bytes the kernel's readahead brought in past the ends of sequentially read
    /// ranges (counted against the budget; not part of `planned`).
    #[serde(default)]
    pub read_ahead_beyond: u64,
    pub directories: usize,
    pub directories_failed: usize,
    /// Entries of listed directories looked up (with `stat_entries`).
    #[serde(default)]
    pub entries_looked_up: u64,
    /// Files opened and found unchanged.
    pub files_opened: usize,
    /// The memory budget in bytes, and how it was set.
    pub budget_bytes: u64,
    pub budget: String,
    pub options: Option<ReplayOptions>,
    /// Seconds from the start of the replay to its end.
    pub elapsed_s: f64,
    /// Alongside a start: how the replay shared the device, and why.
    #[serde(default)]
    pub alongside: Option<AlongsideChoice>,
    pub cancelled: bool,
    /// The first problems met (which file was stale and why, which read failed).
    pub problems: Vec<String>,
    /// Problems not listed in `problems`.
    pub more_problems: usize,
}

impl ReplayReport {
    /// Bytes of files that changed or disappeared since the plan was made.
    pub fn stale_share(&self) -> f64 {
        if self.planned.bytes == 0 {
            0.0
        } else {
            (self.stale.bytes + self.missing.bytes) as f64 / self.planned.bytes as f64
        }
    }

    /// The sum of every outcome, which equals `planned`.
    pub fn accounted(&self) -> Tally {
        let mut t = Tally::default();
        for part in [
            self.fetched,
            self.unknown_residency,
            self.stale,
            self.missing,
            self.unreadable,
            self.over_budget,
            self.failed,
            self.not_reached,
        ] {
            t.merge(part);
        }
        t.bytes += self.resident.bytes;
        t.ranges += self.resident.ranges;
        t
    }
}

/// A replay running in the background.
pub struct Replay {
    cancel: Arc<AtomicBool>,
    handle: JoinHandle<ReplayReport>,
}

impl Replay {
    /// Starts replaying `plan` alongside a start and returns at once: on
    /// `options.alongside_depth` threads of its own, or paced where `alongside_mode` says
    /// so (`auto`: where a device of the plan ignores I/O priority).
    pub fn start(plan: Arc<Plan>, options: &ReplayOptions) -> Result<Replay> {
        let probe = device::Probe::live();
        let devices = probe.plan_devices(&plan);
        let paced = match options.alongside_mode {
            AlongsideMode::Paced => true,
            AlongsideMode::Priority => false,
            AlongsideMode::Auto => devices.iter().any(|d| d.priority == Priority::Ignored),
        };
        let options =
            ReplayOptions { fill: options.alongside_fill, cpu: options.alongside_cpu, ..options.clone() };
        let choice = AlongsideChoice {
            asked: options.alongside_mode,
            mode: if paced { AlongsideMode::Paced } else { AlongsideMode::Priority },
            devices,
            gave_way: 0,
            gave_way_s: 0.0,
        };
        if !paced {
            return Replay::spawn(plan, &options, options.alongside_depth, Some((choice, None)));
        }
        let pacing = pacing::Pacing::new(&probe.sys, &choice.devices);
        let options = ReplayOptions { fill: Fill::Exact, chunk_bytes: PACED_CHUNK_BYTES, ..options };
        Replay::spawn(plan, &options, PACED_DEPTH, Some((choice, Some(pacing))))
    }

    /// Starts a replay on `depth` threads filling the cache the `options.fill` way
    /// (the report's options say which were used); alongside a start, with how it was
    /// chosen and the pacing of a paced replay.
    fn spawn(
        plan: Arc<Plan>,
        options: &ReplayOptions,
        depth: usize,
        alongside: Option<(AlongsideChoice, Option<pacing::Pacing>)>,
    ) -> Result<Replay> {
        if let Some(p) = options.io_priority {
            check_priority(p)?;
        }
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let options = ReplayOptions { depth, ..options.clone() };
        let handle = std::thread::Builder::new()
            .name("prefetch".into())
            .spawn(move || {
                let (choice, pacing) = alongside.map_or((None, None), |(c, p)| (Some(c), p));
                let mut report = worker::run(&plan, &options, &flag, pacing.as_ref());
                report.alongside = choice.map(|mut c| {
                    (c.gave_way, c.gave_way_s) = pacing.as_ref().map_or((0, 0.0), pacing::Pacing::waited);
                    c
                });
                report
            })
            .map_err(PrefetchError::Threads)?;
        Ok(Replay { cancel, handle })
    }

    /// Asks the replay to stop after the steps in progress; the rest is `not_reached`.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Waits for the end of the replay.
    pub fn join(self) -> ReplayReport {
        self.handle.join().unwrap_or_else(|_| ReplayReport {
            problems: vec!["the replay thread panicked".into()],
            ..ReplayReport::default()
        })
    }

    /// Waits at most `limit`; `None` if still running.
    pub fn join_within(self, limit: Duration) -> std::result::Result<ReplayReport, Replay> {
        let deadline = std::time::Instant::now() + limit;
        while !self.is_finished() {
            if std::time::Instant::now() >= deadline {
                return Err(self);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(self.join())
    }
}

/// Checks on a short-lived thread that `priority` may be set (rt needs privilege).
fn check_priority(priority: IoPriority) -> Result<()> {
    let outcome = std::thread::spawn(move || priority.apply_to_this_thread()).join();
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(PrefetchError::IoPriority { priority: priority.to_string(), source }),
        Err(_) => Err(PrefetchError::IoPriority {
            priority: priority.to_string(),
            source: std::io::Error::other("the checking thread panicked"),
        }),
    }
}

/// Replays `plan` on `options.depth` threads and waits for the end.
pub fn replay(plan: Arc<Plan>, options: &ReplayOptions) -> Result<ReplayReport> {
    Ok(Replay::spawn(plan, options, options.depth, None)?.join())
}
