//! What the doctor says: [`Finding`]s, each with its evidence from the trace, an
//! estimated gain with the arithmetic behind it, a suggestion and a way to verify it.
//!
//! These types are serialized as the `doctor` object of the report JSON
//! (docs/report-json.md) and rendered by the text and HTML reports; every figure
//! says its unit in its name or in its `unit` field.

use coldstart_trace::Nanos;
use serde::{Deserialize, Serialize};

/// The kind of a finding: a stable word that scripts can match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    /// Many small files read from one directory tree.
    ManySmallFiles,
    /// A large file read in many separate pieces (typically a library faulted in through mmap).
    FileInPieces,
    /// A helper process on the critical path.
    HeavyHelper,
    /// Processes that read from the disk before ready without feeding the critical path.
    WorkThatCanWait,
    /// A file read entirely, then long CPU work by the same thread.
    ReadThenParse,
    /// Translations or resources for languages other than the user's.
    OtherLanguages,
    /// Synchronous (durable) writes or cache flushes the critical path waited for.
    DurableWrites,
    /// Timer sleeps on the critical path: neither CPU nor I/O, and no other thread involved.
    IdleWaits,
    /// The start's data spread far apart on a disk where seeks cost time.
    ScatteredLayout,
    /// The start is mostly CPU: a CPU profiler will say more than the disk.
    NotIoBound,
    /// Time on the critical path outside the recording (waits on unrecorded processes,
    /// sleeps without a wakeup, no scheduler data): no gain, advice to widen the scope.
    UnexplainedWaits,
    /// Metadata system calls (stat, open, access, readlink, getdents) on a FUSE or network
    /// filesystem, each a request to its daemon or server.
    SlowFilesystem,
    /// Pages a device read ahead that no program used, whose transfer the critical path waited for.
    WastedReadahead,
    /// One call holds most of the critical path's CPU: the subtree under it, its library
    /// and what inside it dominates (the allocator, the kernel).
    CpuSubtree,
    /// The start mostly waited on its disk, seen only in the machine's periodic samples (an
    /// imported bootchart): how fast the disk read then against its best, and who waited.
    DiskBound,
    /// Thousands of processes started and gone before ready, in runs of one program (a
    /// helper per device event), seen in a trace without scheduler data.
    ManyShortProcesses,
    /// The start read a volume that fetched each chunk on its first read (restored from a
    /// snapshot, or fetched lazily), one fetch after another.
    LazyVolume,
}

impl FindingKind {
    /// The stable word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ManySmallFiles => "many_small_files",
            FindingKind::FileInPieces => "file_in_pieces",
            FindingKind::HeavyHelper => "heavy_helper",
            FindingKind::WorkThatCanWait => "work_that_can_wait",
            FindingKind::ReadThenParse => "read_then_parse",
            FindingKind::OtherLanguages => "other_languages",
            FindingKind::DurableWrites => "durable_writes",
            FindingKind::IdleWaits => "idle_waits",
            FindingKind::ScatteredLayout => "scattered_layout",
            FindingKind::NotIoBound => "not_io_bound",
            FindingKind::UnexplainedWaits => "unexplained_waits",
            FindingKind::SlowFilesystem => "slow_filesystem",
            FindingKind::WastedReadahead => "wasted_readahead",
            FindingKind::CpuSubtree => "cpu_subtree",
            FindingKind::DiskBound => "disk_bound",
            FindingKind::ManyShortProcesses => "many_short_processes",
            FindingKind::LazyVolume => "lazy_volume",
        }
    }
}

/// Who can make the change a finding proposes: the suggestion is written in their terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Audience {
    /// The program's developers: its code, its data files, its build, the processes it starts itself.
    Developers,
    /// Whoever builds the distribution or the machine image: packages, units, generators,
    /// autostart entries, what is done at install time.
    Distribution,
    /// The machine's administrator: its storage, mounts, kernel settings and services.
    Administrator,
    /// Whoever starts and records the program: how it is started, what the recording covers.
    User,
}

impl Audience {
    /// The stable word, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Audience::Developers => "developers",
            Audience::Distribution => "distribution",
            Audience::Administrator => "administrator",
            Audience::User => "user",
        }
    }

    /// Who they are, in a sentence's words.
    pub fn label(self) -> &'static str {
        match self {
            Audience::Developers => "the program's developers",
            Audience::Distribution => "the distribution or image builder",
            Audience::Administrator => "the machine's administrator",
            Audience::User => "whoever starts the program",
        }
    }
}

/// How far the estimate can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Confidence {
    /// The trace shows the cause and the time directly.
    High,
    /// The cause is clear, the gain depends on how the change is made.
    Medium,
    /// A heuristic: the trace cannot show the cause directly (see the caveat).
    Low,
}

/// The unit of a [`Figure`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Unit {
    Ns,
    Bytes,
    Count,
    BytesPerS,
    /// A fraction (0.25 = 25 %).
    Ratio,
}

/// A named number: an input of a gain's arithmetic, or a count or time of the evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Figure {
    /// A stable snake_case name, e.g. `wait_now_ns`, `files`, `bandwidth`.
    pub name: String,
    pub value: f64,
    pub unit: Unit,
}

impl Figure {
    pub fn ns(name: &str, ns: Nanos) -> Figure {
        Figure { name: name.to_owned(), value: ns as f64, unit: Unit::Ns }
    }

    pub fn bytes(name: &str, bytes: u64) -> Figure {
        Figure { name: name.to_owned(), value: bytes as f64, unit: Unit::Bytes }
    }

    pub fn count(name: &str, n: u64) -> Figure {
        Figure { name: name.to_owned(), value: n as f64, unit: Unit::Count }
    }

    pub fn ratio(name: &str, r: f64) -> Figure {
        Figure { name: name.to_owned(), value: r, unit: Unit::Ratio }
    }

    pub fn rate(name: &str, bytes_per_s: f64) -> Figure {
        Figure { name: name.to_owned(), value: bytes_per_s, unit: Unit::BytesPerS }
    }
}

/// A file the finding is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFile {
    /// The trace's file id (see `files` of the analysis).
    pub file: u32,
    pub name: String,
    pub size_bytes: Option<u64>,
    /// Bytes read into the page cache during the recording, all processes.
    pub read_bytes: u64,
    /// Separate reads (coalesced page fills), all processes.
    pub reads: u64,
    /// I/O wait for this file on the critical path (or, without one, of all threads).
    pub wait_ns: Nanos,
}

/// A process the finding is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceProcess {
    pub pid: i32,
    pub comm: String,
    /// The time that matters for this finding (see the finding's figures), e.g. time on the critical path.
    pub ns: Nanos,
    /// Bytes it read (page cache fills, or block requests for processes outside the trace's scope).
    pub read_bytes: u64,
    /// False for processes outside the recording's scope (seen only as issuers of block requests).
    pub in_scope: bool,
}

/// A stretch of time the finding points at (a wait on the critical path, a request in flight).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceInterval {
    pub start_ns: Nanos,
    pub end_ns: Nanos,
    /// The thread, when one is concerned.
    pub tid: Option<i32>,
    pub what: String,
}

/// What in the trace supports a finding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The evidence in one sentence.
    pub summary: String,
    /// The files concerned, most wait first; at most `DoctorConfig::max_listed` of `files_total`.
    pub files: Vec<EvidenceFile>,
    pub files_total: u64,
    /// The processes concerned, most time first.
    pub processes: Vec<EvidenceProcess>,
    /// Counts, sizes and times.
    pub figures: Vec<Figure>,
    /// The moments concerned, in time order; at most `DoctorConfig::max_listed`.
    pub intervals: Vec<EvidenceInterval>,
}

/// An estimated gain in time to ready, with its arithmetic.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Gain {
    /// The estimated reduction of the time to ready, never negative.
    pub ns: Nanos,
    /// The formula over the names of `inputs`, e.g. `wait_now_ns - sequential_read_ns`.
    pub formula: String,
    /// The same arithmetic with the figures filled in, for people.
    pub text: String,
    pub inputs: Vec<Figure>,
    /// The gain when the suggested reads are done before the start (a prefetch completed
    /// ahead, as `verify` measures), when that differs from `ns`.
    pub ahead_ns: Option<Nanos>,
}

/// One thing the doctor proposes, with why and how much.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub title: String,
    pub evidence: Evidence,
    pub gain: Gain,
    /// Who can make the change.
    pub audience: Audience,
    /// What to change, in the terms of `audience`.
    pub suggestion: String,
    /// How to check the change worked: usually a `coldstart bench` or `prefetch` command line.
    pub verify: String,
    pub confidence: Confidence,
    /// What the trace cannot show about this finding, when that limits the estimate.
    pub caveat: Option<String>,
}
