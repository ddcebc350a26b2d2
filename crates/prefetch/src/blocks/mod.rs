//! Block-level plans: the device ranges a start read (filesystem metadata included), merged
//! to a lazily fetched volume's chunks, in the order first needed, tied to the image they were
//! made from by its identity (docs/plan-format.md, "Block plans").
//!
//! - [`build`] turns a trace's block requests into ranges (pure);
//! - [`identity`] reads the filesystem's UUID and sampled blocks' checksums, at plan time and
//!   again before a replay;
//! - [`replay`] reads every planned range once with direct I/O, many requests in flight;
//! - [`show`] prints a plan.

pub mod build;
pub mod direct;
pub mod identity;
pub mod replay;
pub mod show;

use std::path::{Path, PathBuf};

use coldstart_trace::Nanos;
use serde::{Deserialize, Serialize};

pub use build::{BlockSettings, FleetChunks, build_block_ranges, build_fleet_block_ranges};
pub use identity::Identity;
pub use replay::{BlockReplayReport, replay_blocks};

/// The `format` field of every block plan.
pub const FORMAT: &str = "coldstart-block-plan";
/// The newest block plan format this code reads and the one it writes.
pub const VERSION: u32 = 2;
/// The default chunk: a snapshot's block on the largest provider (docs/storage.md).
pub const DEFAULT_CHUNK_BYTES: u64 = 512 * 1024;
/// Chunks are whole multiples of this, so that direct I/O may read them.
pub const ALIGN: u64 = 4096;

/// A block plan: byte ranges of one device, in replay order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockPlan {
    /// Always [`FORMAT`].
    pub format: String,
    pub version: u32,
    /// The program that wrote the plan, e.g. `coldstart 0.1.0`.
    pub tool: String,
    pub source: BlockSource,
    /// The traced device and the image whose identity the plan carries.
    pub device: PlanDevice,
    pub identity: Identity,
    /// Bytes per chunk: ranges start and end on chunk boundaries (the last may end at the
    /// device's end).
    pub chunk_bytes: u64,
    /// The replay order: by first need.
    pub ranges: Vec<BlockRange>,
    pub stats: BlockStats,
}

/// The trace a block plan was made from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockSource {
    pub trace: String,
    pub command: Vec<String>,
    pub host: String,
    pub kernel: String,
    pub recorded_unix_ns: i64,
}

/// The device of the trace the plan covers, and the image read for its identity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanDevice {
    /// `major:minor` in the trace.
    pub dev: String,
    /// The kernel's name of it in the trace (`loop3`, `vda`), when the trace knows it.
    pub name: Option<String>,
    /// How it was chosen: `most reads` or `--device`.
    pub chosen_by: String,
    /// The device or image file read at plan time for the identity.
    pub image: String,
}

/// Bytes of the device from `offset`, first needed at `first_need_ns` (the earliest issue of
/// a request touching it, since the recording started).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockRange {
    pub offset: u64,
    pub length: u64,
    pub first_need_ns: Nanos,
}

/// A plan's size against what the traced start read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockStats {
    /// Read requests of the device in the trace, and their bytes.
    pub requests: u64,
    pub read_bytes: u64,
    /// Of which filesystem metadata (the request's flags hold `M`).
    pub metadata_read_bytes: u64,
    /// Bytes of the trace's reads that fall on distinct chunks: the plan reads each once.
    pub distinct_read_bytes: u64,
    pub chunks: u64,
    pub planned_bytes: u64,
    /// Other devices the trace read from, left out: `major:minor` and bytes read.
    pub other_devices: Vec<(String, u64)>,
}

/// Why a block plan cannot be made, read or replayed: one sentence each.
#[derive(Debug, thiserror::Error)]
pub enum BlockError {
    #[error("{}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("{} is not a usable block plan: {reason}", path.display())]
    BadPlan { path: PathBuf, reason: String },
    #[error(
        "{} is a block plan of format version {version}, newer than this coldstart understands (version {VERSION}): \
         use a newer coldstart, or make the plan again with this one",
        path.display()
    )]
    NewerPlan { path: PathBuf, version: u32 },
    /// The trace or the options give nothing to plan (the sentence says why).
    #[error("{0}")]
    Plan(String),
    /// The device is not the plan's image: nothing was read beyond the identity check.
    #[error("{} is not the plan's image, nothing replayed: {reason}", device.display())]
    NotTheImage { device: PathBuf, reason: String },
    #[error("cannot read {} with direct I/O at byte {offset}", device.display())]
    Read { device: PathBuf, offset: u64, source: std::io::Error },
    #[error("cannot start the replay threads")]
    Threads(#[source] std::io::Error),
    #[error("cannot set the I/O priority {priority}")]
    IoPriority { priority: String, source: std::io::Error },
}

impl BlockError {
    pub fn file(path: impl AsRef<Path>, source: std::io::Error) -> BlockError {
        BlockError::File { path: path.as_ref().to_owned(), source }
    }
}

/// Whether `text` is a block plan (its `format` field), so `prefetch show` and `run` can
/// tell the two kinds of plan apart.
pub fn is_block_plan(text: &str) -> bool {
    #[derive(Deserialize)]
    struct Head {
        format: Option<String>,
    }
    serde_json::from_str::<Head>(text).is_ok_and(|h| h.format.as_deref() == Some(FORMAT))
}

impl BlockPlan {
    /// Parses a block plan, refusing other formats, newer versions and ranges that are not
    /// aligned for direct I/O.
    pub fn from_json(text: &str, path: &Path) -> Result<BlockPlan, BlockError> {
        #[derive(Deserialize)]
        struct Head {
            format: Option<String>,
            version: Option<u32>,
        }
        let bad = |reason: String| BlockError::BadPlan { path: path.to_owned(), reason };
        let head: Head = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        if head.format.as_deref() != Some(FORMAT) {
            return Err(bad(format!("its format field is {:?}, not {FORMAT:?}", head.format)));
        }
        let version = head.version.unwrap_or(0);
        if version > VERSION {
            return Err(BlockError::NewerPlan { path: path.to_owned(), version });
        }
        if version < VERSION {
            return Err(bad(format!(
                "version {version} checksums the superblock as a mount rewrites it: make the plan again \
                 (coldstart prefetch plan --blocks)"
            )));
        }
        let plan: BlockPlan = serde_json::from_str(text).map_err(|e| bad(e.to_string()))?;
        plan.check().map_err(bad)?;
        Ok(plan)
    }

    pub fn load(path: &Path) -> Result<BlockPlan, BlockError> {
        let text = std::fs::read_to_string(path).map_err(|e| BlockError::file(path, e))?;
        BlockPlan::from_json(&text, path)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Writes the plan atomically (a temporary name in the same directory, then rename).
    pub fn save(&self, path: &Path) -> Result<(), BlockError> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let temp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        std::fs::write(&temp, self.to_json()).map_err(|e| BlockError::file(&temp, e))?;
        std::fs::rename(&temp, path).map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            BlockError::file(path, e)
        })
    }

    /// Ranges and samples lie inside the image and are aligned for direct I/O; the chunk
    /// is a whole number of 4 KiB blocks.
    fn check(&self) -> Result<(), String> {
        if self.chunk_bytes == 0 || !self.chunk_bytes.is_multiple_of(ALIGN) {
            return Err(format!("chunk_bytes {} is not a positive multiple of {ALIGN}", self.chunk_bytes));
        }
        let size = self.identity.size_bytes;
        let inside = |offset: u64, length: u64| {
            length > 0
                && offset.is_multiple_of(ALIGN)
                && offset.checked_add(length).is_some_and(|end| end <= size)
        };
        if let Some(r) =
            self.ranges.iter().find(|r| !inside(r.offset, r.length) || !r.length.is_multiple_of(512))
        {
            return Err(format!(
                "the range at byte {} ({} bytes) is not aligned to {ALIGN} bytes inside the {size}-byte image",
                r.offset, r.length
            ));
        }
        let mut sorted: Vec<&BlockRange> = self.ranges.iter().collect();
        sorted.sort_by_key(|r| r.offset);
        if let Some(w) = sorted.windows(2).find(|w| w[0].offset + w[0].length > w[1].offset) {
            return Err(format!("its ranges at bytes {} and {} overlap", w[0].offset, w[1].offset));
        }
        if let Some(s) = self
            .identity
            .samples
            .iter()
            .find(|s| !inside(s.offset, s.length) || !s.length.is_multiple_of(ALIGN))
        {
            return Err(format!(
                "the identity sample at byte {} is not an aligned block of the image",
                s.offset
            ));
        }
        if self.identity.samples.iter().all(|s| s.offset != 0) {
            return Err("its identity has no sample of the first block (the superblock)".into());
        }
        Ok(())
    }

    /// The chunks to read in plan order: (offset, length), each at most `chunk_bytes`.
    pub fn chunks(&self) -> Vec<(u64, u64)> {
        let mut chunks = Vec::new();
        for r in &self.ranges {
            let mut at = r.offset;
            let end = r.offset + r.length;
            while at < end {
                let len = (end - at).min(self.chunk_bytes);
                chunks.push((at, len));
                at += len;
            }
        }
        chunks
    }
}

/// What `prefetch plan --blocks` is given.
#[derive(Clone, Debug)]
pub struct BlockPlanRequest<'a> {
    pub trace_path: &'a str,
    /// The device to plan; `None`: the one the trace read most from.
    pub device: Option<coldstart_trace::Dev>,
    pub chunk_bytes: u64,
    /// The image (or device) to read the identity from; `None`: the planned device's node.
    pub image: Option<&'a Path>,
    pub tool: &'a str,
}

/// Makes a block plan: the trace's reads of one device as chunks, and the identity of the
/// image they are to be read from.
pub fn plan_blocks(
    trace: &coldstart_trace::Trace,
    request: &BlockPlanRequest,
) -> Result<BlockPlan, BlockError> {
    let devices = build::read_bytes_by_device(trace);
    let chosen = match request.device {
        Some(dev) if devices.iter().any(|d| d.0 == dev) => dev,
        Some(dev) => return Err(build::no_reads_of(dev, &devices)),
        None => devices.first().map(|d| d.0).ok_or_else(build::no_reads)?,
    };
    let image = match request.image {
        Some(path) => path.to_path_buf(),
        None => device_node(chosen).ok_or_else(|| {
            BlockError::Plan(format!("no device {chosen} on this machine: give its image with --image PATH"))
        })?,
    };
    let device_bytes = direct::DirectDevice::open(&image)?.size_bytes();
    let settings = BlockSettings { device: Some(chosen), chunk_bytes: request.chunk_bytes, device_bytes };
    let built = build_block_ranges(trace, &settings)?;
    let meta = &trace.meta;
    let source = BlockSource {
        trace: request.trace_path.into(),
        command: meta.command.clone(),
        host: meta.host.clone(),
        kernel: meta.kernel.clone(),
        recorded_unix_ns: meta.start_unix_ns,
    };
    let device = PlanDevice {
        dev: chosen.to_string(),
        name: trace.disks.iter().find(|d| d.dev == chosen).map(|d| d.name.clone()),
        chosen_by: if request.device.is_some() { "--device" } else { "most reads" }.into(),
        image: image.display().to_string(),
    };
    finish_plan(request, &image, source, device, built)
}

/// The plan of `built` ranges, with the identity of `image` read for them.
fn finish_plan(
    request: &BlockPlanRequest,
    image: &Path,
    source: BlockSource,
    device: PlanDevice,
    built: build::BlockRanges,
) -> Result<BlockPlan, BlockError> {
    let identity = identity::probe(image, &built.ranges)?;
    Ok(BlockPlan {
        format: FORMAT.into(),
        version: VERSION,
        tool: request.tool.into(),
        source,
        device,
        identity,
        chunk_bytes: request.chunk_bytes,
        ranges: built.ranges,
        stats: built.stats,
    })
}

/// The settings of a block plan of many traces of one image (`request.image`, required:
/// read for its size); fold the traces into [`FleetChunks::new`] of them.
pub fn fleet_settings(request: &BlockPlanRequest) -> Result<BlockSettings, BlockError> {
    let image = fleet_image(request)?;
    let device_bytes = direct::DirectDevice::open(image)?.size_bytes();
    Ok(BlockSettings { device: request.device, chunk_bytes: request.chunk_bytes, device_bytes })
}

fn fleet_image<'a>(request: &BlockPlanRequest<'a>) -> Result<&'a Path, BlockError> {
    request.image.ok_or_else(|| {
        BlockError::Plan(
            "a block plan of a dataset needs the image its traces booted: give it with --image PATH".into(),
        )
    })
}

/// Makes a block plan of many traces of one image (`request.trace_path` names their dataset):
/// the chunks at least `min_share` of them read; the image is `request.image`, required.
pub fn plan_fleet_blocks(
    fleet: FleetChunks,
    request: &BlockPlanRequest,
    min_share: f64,
) -> Result<BlockPlan, BlockError> {
    let image = fleet_image(request)?;
    let traces = fleet.traces();
    if traces == 0 {
        return Err(BlockError::Plan(format!("{} holds no trace to plan", request.trace_path)));
    }
    let built = fleet.ranges(min_share)?;
    let source = BlockSource {
        trace: request.trace_path.into(),
        command: vec![format!("{traces} traces, chunks read by at least {min_share} of them")],
        ..BlockSource::default()
    };
    let device = PlanDevice {
        dev: built.dev.to_string(),
        name: None,
        chosen_by: if request.device.is_some() { "--device" } else { "most reads of each trace" }.into(),
        image: image.display().to_string(),
    };
    finish_plan(request, image, source, device, built)
}

/// The device node of `dev`: `/dev/block/MAJ:MIN` where udev made it, else `/dev/NAME` from
/// the kernel's `/sys/dev/block/MAJ:MIN/uevent`.
pub fn device_node(dev: coldstart_trace::Dev) -> Option<PathBuf> {
    let link = PathBuf::from(format!("/dev/block/{dev}"));
    if link.exists() {
        return Some(link);
    }
    let uevent = std::fs::read_to_string(format!("/sys/dev/block/{dev}/uevent")).ok()?;
    let name = uevent.lines().find_map(|l| l.strip_prefix("DEVNAME="))?;
    Some(Path::new("/dev").join(name)).filter(|p| p.exists())
}
