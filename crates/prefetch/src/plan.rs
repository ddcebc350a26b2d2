//! The prefetch plan: what to read, in which order, and how to tell that a file
//! changed since it was planned. A plan is JSON (serde), versioned, and documented
//! field by field in docs/plan-format.md; this module is that document's source.

use std::path::Path;

use coldstart_trace::{Dev, Nanos};
use serde::{Deserialize, Serialize};

use crate::error::{PrefetchError, Result};

/// The `format` field of every plan.
pub const FORMAT: &str = "coldstart-prefetch-plan";
/// The newest plan format this code reads and the one it writes.
pub const VERSION: u32 = 1;

/// A prefetch plan. Offsets and lengths are bytes, multiples of the page size
/// except that a range may end at the end of its file; times are nanoseconds since
/// the traced command started.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// Always [`FORMAT`].
    pub format: String,
    /// The plan format version ([`VERSION`] when written by this code).
    pub version: u32,
    /// The program that wrote the plan, e.g. `coldstart 0.1.0`.
    pub tool: String,
    pub source: PlanSource,
    pub settings: PlanSettings,
    /// Files to read (regular files, and block devices for filesystem metadata).
    pub files: Vec<PlanFile>,
    /// Directories to look up (and list) so that the start's path lookups hit the cache.
    pub directories: Vec<PlanDirectory>,
    /// The replay order.
    pub steps: Vec<Step>,
    pub stats: PlanStats,
    /// Things a reader of the plan should know (e.g. the trace had no page accesses).
    pub notes: Vec<String>,
}

/// The trace a plan was built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanSource {
    /// The trace file as given to `prefetch plan`.
    pub trace: String,
    pub command: Vec<String>,
    pub host: String,
    pub kernel: String,
    /// Wall-clock time of the recording's start, nanoseconds since 1970.
    pub recorded_unix_ns: i64,
    pub page_size: u32,
    /// Where the used pages came from: `accesses` (read, fault and map-around
    /// accesses of the trace) or `fills` (pages that entered the page cache, when the
    /// trace has no accesses: readahead the start never used is then included).
    pub used_pages_from: UsedPagesFrom,
    /// Plans made from a dataset of many traces (`prefetch plan --dataset`): how.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fleet: Option<crate::fleet::FleetSource>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UsedPagesFrom {
    #[default]
    Accesses,
    Fills,
    /// Whole files (`--whole-files`, the classic baselines).
    WholeFiles,
}

/// The replay order of a plan.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Order {
    /// By the time each range was first needed: what the start needs first arrives first.
    #[default]
    FirstNeed,
    /// By position on the disk (FIEMAP): fewest seeks, ureadahead style.
    Disk,
    /// By first need in windows of `blend_window_ns`, by disk position inside each window.
    Blend,
}

impl Order {
    pub fn name(self) -> &'static str {
        match self {
            Order::FirstNeed => "first-need",
            Order::Disk => "disk",
            Order::Blend => "blend",
        }
    }
}

/// How the plan was built (`prefetch plan` options).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanSettings {
    pub order: Order,
    /// Window of [`Order::Blend`].
    pub blend_window_ns: Nanos,
    /// Largest gap between two used ranges of a file that may be read through to
    /// merge them (bytes).
    pub max_gap_bytes: u64,
    /// Gaps are merged, smallest first, only while the plan stays within this many
    /// times the bytes the start read (page fills of the planned kinds of files).
    pub max_size_ratio: f64,
    /// Longest range (bytes); longer ones are split, each part with its own first need.
    pub max_range_bytes: u64,
    pub whole_files: bool,
    /// Filesystem metadata read through the block device is planned as block-device ranges.
    pub metadata: bool,
}

impl Default for PlanSettings {
    fn default() -> PlanSettings {
        PlanSettings {
            order: Order::FirstNeed,
            blend_window_ns: 100_000_000,
            max_gap_bytes: 256 * 1024,
            max_size_ratio: 1.0,
            max_range_bytes: 2 * 1024 * 1024,
            whole_files: false,
            metadata: true,
        }
    }
}

/// What a planned file is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanFileKind {
    #[default]
    Regular,
    /// A block device whose ranges are filesystem metadata (inode tables,
    /// directory blocks) at their disk offsets.
    BlockDevice,
}

/// One file of the plan, with the identity it had when recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanFile {
    pub path: String,
    pub kind: PlanFileKind,
    /// Regular file: the filesystem's device (`stat` st_dev). Block device: the
    /// device itself (st_rdev).
    pub dev: Dev,
    /// Inode number (regular files; not checked for block devices).
    pub ino: u64,
    /// Size in bytes when recorded; `None` when the trace did not know it.
    pub size: Option<u64>,
    /// Modification time when recorded, nanoseconds since 1970.
    pub mtime_ns: Option<i64>,
    /// When the start first needed the file (opened it or read from it).
    pub first_need_ns: Nanos,
    /// Byte ranges to read, sorted by offset, disjoint. Empty: the file is only
    /// opened (its inode and path warmed).
    pub ranges: Vec<PlanRange>,
}

impl PlanFile {
    /// A regular file as it is now (its identity from `stat`), to read `ranges` of.
    pub fn regular_now(path: &Path, ranges: Vec<PlanRange>) -> std::io::Result<PlanFile> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok(PlanFile {
            path: path.to_string_lossy().into_owned(),
            kind: PlanFileKind::Regular,
            dev: Dev::from_user(m.dev()),
            ino: m.ino(),
            size: Some(m.size()),
            mtime_ns: Some(m.mtime() * 1_000_000_000 + m.mtime_nsec()),
            first_need_ns: 0,
            ranges,
        })
    }
}

/// A byte range of a file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanRange {
    pub offset: u64,
    pub length: u64,
    /// When the start first needed a page of the range.
    pub first_need_ns: Nanos,
    /// The disk and byte offset on it of the range's first byte (FIEMAP), when known.
    pub disk: Option<Dev>,
    pub physical: Option<u64>,
}

/// A directory to warm.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanDirectory {
    pub path: String,
    /// List its entries (readdir), not only look it up (stat).
    pub list: bool,
    pub first_need_ns: Nanos,
}

/// One step of the replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// Warm `directories[i]`.
    Directory(usize),
    /// Open `files[i]` and check its identity (a file without ranges).
    Open(usize),
    /// Read `files[file].ranges[range]`.
    Range { file: usize, range: usize },
}

/// Sizes of a plan against what the recorded start read. Bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanStats {
    /// Bytes the start brought into the page cache (page fills), over every file
    /// of the trace.
    pub read_bytes: u64,
    /// Of those, filesystem metadata read through the block device.
    pub read_metadata_bytes: u64,
    /// Pages the start used, over the files the plan can replay.
    pub used_bytes: u64,
    /// Of those, pages that were already cached during the recording (used, never filled).
    pub used_cached_bytes: u64,
    /// The plan's ranges, in total.
    pub planned_bytes: u64,
    /// Of those, filesystem metadata (block-device ranges).
    pub planned_metadata_bytes: u64,
    /// Planned bytes that the start read (planned ∩ fills): the plan's coverage of
    /// what the start read is `planned_read_bytes / read_bytes`.
    pub planned_read_bytes: u64,
    /// Used bytes the plan covers (all of `used_bytes` unless files were left out).
    pub planned_used_bytes: u64,
    /// Bytes added by merging ranges across gaps.
    pub gap_bytes: u64,
    pub files: usize,
    pub ranges: usize,
    /// Files only opened (no ranges).
    pub open_only_files: usize,
    pub directories: usize,
    /// What the plan leaves out, and why.
    pub excluded: Vec<Exclusion>,
}

/// Files of the trace the plan leaves out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Exclusion {
    pub reason: String,
    pub files: usize,
    /// Bytes the start read from them.
    pub read_bytes: u64,
}

impl Plan {
    /// Parses a plan, refusing other formats and newer versions.
    pub fn from_json(text: &str, path: &Path) -> Result<Plan> {
        #[derive(Deserialize)]
        struct Head {
            format: Option<String>,
            version: Option<u32>,
        }
        let bad = |source| PrefetchError::PlanJson { path: path.to_owned(), source };
        let head: Head = serde_json::from_str(text).map_err(bad)?;
        if head.format.as_deref() != Some(FORMAT) {
            return Err(PrefetchError::BadPlan {
                path: path.to_owned(),
                reason: format!("not a coldstart prefetch plan (its format field is {:?})", head.format),
            });
        }
        let version = head.version.unwrap_or(0);
        if version > VERSION {
            return Err(PrefetchError::NewerPlan { path: path.to_owned(), version });
        }
        let plan: Plan = serde_json::from_str(text).map_err(bad)?;
        plan.check().map_err(|reason| PrefetchError::BadPlan { path: path.to_owned(), reason })?;
        Ok(plan)
    }

    /// Reads a plan file.
    pub fn load(path: &Path) -> Result<Plan> {
        let text = std::fs::read_to_string(path).map_err(|e| PrefetchError::file(path, e))?;
        Plan::from_json(&text, path)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Writes the plan atomically (a temporary name in the same directory, then rename).
    pub fn save(&self, path: &Path) -> Result<()> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&temp, self.to_json()).map_err(|e| PrefetchError::file(&temp, e))?;
        std::fs::rename(&temp, path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            PrefetchError::file(path, e)
        })
    }

    /// Every index a step names exists, and every range ends inside a 64-bit file.
    fn check(&self) -> std::result::Result<(), String> {
        for file in &self.files {
            if let Some(r) = file.ranges.iter().find(|r| r.offset.checked_add(r.length).is_none()) {
                return Err(format!(
                    "a range of {} ends past 2^64 (offset {}, length {})",
                    file.path, r.offset, r.length
                ));
            }
        }
        for step in &self.steps {
            let ok = match *step {
                Step::Directory(d) => d < self.directories.len(),
                Step::Open(f) => f < self.files.len(),
                Step::Range { file, range } => self.files.get(file).is_some_and(|f| range < f.ranges.len()),
            };
            if !ok {
                return Err(format!("step {step:?} names a file, range or directory the plan does not have"));
            }
        }
        Ok(())
    }

    /// Bytes of the planned ranges.
    pub fn planned_bytes(&self) -> u64 {
        self.files.iter().flat_map(|f| &f.ranges).fold(0, |sum, r| sum.saturating_add(r.length))
    }
}
