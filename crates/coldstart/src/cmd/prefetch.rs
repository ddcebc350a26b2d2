//! `coldstart prefetch plan|show|run`: a prefetch plan made from a trace, shown, and
//! replayed into the page cache. The replay options are shared with `coldstart run`
//! and `coldstart bench --prefetch` ([`ReplayArgs`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;

use anyhow::{Context, bail};
use coldstart_analyze::units::{ByteSize, SIZE_SYNTAX};
use coldstart_prefetch::replay::AlongsideMode;
use coldstart_prefetch::show::ShowOptions;
use coldstart_prefetch::{IoPriority, Method, Order, Plan, PlanSettings, ReplayOptions};
use coldstart_trace::Trace;

use crate::cmd::values;

/// Make a prefetch plan from a trace, show it, or replay it into the page cache.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  sudo coldstart record --cold -o app.coldstart -- python3 -c 'import pandas'
  coldstart prefetch plan app.coldstart -o app.plan
  coldstart prefetch show app.plan
  coldstart prefetch run app.plan                   # warm the cache now
  coldstart run --prefetch app.plan -- python3 -c 'import pandas'    # replay alongside the start
  sudo coldstart bench --both --prefetch app.plan -- python3 -c 'import pandas'  # did it work?")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    Plan(PlanArgs),
    Show(ShowArgs),
    Run(RunArgs),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OrderArg {
    /// Disk for a boot or a session (many programs at once), first-need for one program.
    Auto,
    /// By the time each range was first needed (what the start needs first arrives first).
    FirstNeed,
    /// By position on the disk (fewest seeks, ureadahead style).
    Disk,
    /// By first need in windows of --blend-window-ms, by disk position within each.
    Blend,
}

/// Make a plan from a trace: the pages the start used, merged into ranges, in replay order.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  coldstart prefetch plan app.coldstart -o app.plan
  coldstart prefetch plan app.coldstart -o app-disk.plan --order disk
  coldstart prefetch plan app.coldstart -o vmtouch-like.plan --whole-files      # a classic baseline
  coldstart prefetch plan --dataset fleet/ --min-share 0.5 --build 41.2 -o image.plan   # from a fleet
  coldstart prefetch plan --blocks boot.coldstart --image golden.img -o boot.bplan   # a block plan

Used pages are the trace's read and fault accesses plus the map-around pages that were
filled; for a trace without page accesses, the pages that entered the page cache (the
plan says so). Gaps between used ranges of a file, up to --gap-kib, are read through,
smallest first, where the file is contiguous on the disk, while the plan stays within
--max-size times the bytes the start read. The format is docs/plan-format.md.

From a fleet (--dataset, from `coldstart export --format parquet`): the pages that at least
--min-share of the traces used, for the files this machine has at the same size and
modification time (others are another build's and are left out, as are files missing here),
in this machine's disk order; each page first needed at the mean time of the traces that used
it. Filesystem metadata is not planned from a fleet (its disk offsets are each machine's own).

A block plan (--blocks): the device ranges the start read (filesystem metadata included), of
the device it read most from (--device MAJ:MIN to choose), rounded to --chunk, in the order
first needed; tied to its ext4 image by the filesystem's UUID and checksums of sampled blocks
read from --image (default /dev/block/MAJ:MIN): give the image as restored, before its first
mount. For a volume restored from a snapshot, replayed with direct I/O by `prefetch run`.
With --dataset (first boots of one image exported from many machines; --image required): the
chunks at least --min-share of the traces read, in the order of their median first need:
  coldstart prefetch plan --blocks --dataset first-boots/ --image golden.img -o boot.bplan")]
pub struct PlanArgs {
    /// The trace (from `coldstart record`, best with --cold).
    #[arg(required_unless_present = "dataset", conflicts_with = "dataset")]
    pub trace: Option<PathBuf>,
    /// Make a block plan: device ranges, for a lazily fetched volume (docs/plan-format.md).
    #[arg(long, conflicts_with_all = ["whole_files", "no_metadata"])]
    pub blocks: bool,
    /// With --blocks: the traced device to plan [default: the one read most].
    #[arg(long, value_name = "MAJ:MIN", requires = "blocks", value_parser = crate::cmd::prefetch_blocks::dev)]
    pub device: Option<coldstart_trace::Dev>,
    /// With --blocks: the image or device to read the identity from [default: /dev/block/MAJ:MIN].
    #[arg(long, value_name = "PATH", requires = "blocks")]
    pub image: Option<PathBuf>,
    /// With --blocks: the chunk the ranges are rounded to, a multiple of 4 KiB [default: 512KiB].
    #[arg(long, value_name = "SIZE", requires = "blocks")]
    pub chunk: Option<ByteSize>,
    /// Make the plan from a dataset of many traces instead (`coldstart export --format parquet`).
    #[arg(long, value_name = "DIR", conflicts_with = "whole_files")]
    pub dataset: Option<PathBuf>,
    #[arg(long, value_name = "SHARE", value_parser = share, requires = "dataset", help = "With --dataset: plan the pages at least this share of the traces used, 0 < SHARE ≤ 1 [default: 0.5]")]
    pub min_share: Option<f64>,
    /// With --dataset: only the traces of this build (`export --build`).
    #[arg(long, value_name = "BUILD", requires = "dataset")]
    pub build: Option<String>,
    /// With --dataset: only the traces of this machine class (`export --machine-class`).
    #[arg(long, value_name = "CLASS", requires = "dataset")]
    pub machine_class: Option<String>,
    /// The plan file to write.
    #[arg(short, long, value_name = "PLAN")]
    pub output: PathBuf,
    /// Replay order.
    ///
    /// `auto` takes `disk` for a boot or a session (the trace covers the system, ended at a
    /// systemd unit, holds units, or recorded --also programs) and `first-need` otherwise.
    #[arg(long, value_enum, default_value = "auto")]
    pub order: OrderArg,
    /// Window of --order blend, milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 100.0, value_parser = values::positive_number)]
    pub blend_window_ms: f64,
    /// Largest gap between two used ranges of a file that may be read through, KiB.
    #[arg(long, value_name = "KIB", default_value_t = 256)]
    pub gap_kib: u64,
    /// Merge gaps only while the plan stays within this many times the bytes the start read.
    #[arg(long, value_name = "RATIO", default_value_t = 1.0, value_parser = values::positive_number)]
    pub max_size: f64,
    /// Longest range, KiB; longer ones are split, each part with its own first-need time.
    #[arg(long, value_name = "KIB", default_value_t = 2048)]
    pub max_range_kib: u64,
    /// Plan whole files (the classic vmtouch / ureadahead baselines), not used pages.
    #[arg(long)]
    pub whole_files: bool,
    /// Leave out filesystem metadata (block-device ranges).
    #[arg(long)]
    pub no_metadata: bool,
    /// Overwrite PLAN if it exists.
    #[arg(long)]
    pub force: bool,
}

/// Show a plan: its size against what the start read, what it leaves out, its files.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart prefetch show app.plan
  coldstart prefetch show app.plan --all --ranges
  coldstart prefetch show app.plan --paths | xargs vmtouch -t     # the files, in replay order")]
pub struct ShowArgs {
    /// The plan file (from `coldstart prefetch plan`).
    pub plan: PathBuf,
    /// List this many files (a block plan: ranges).
    #[arg(long, default_value_t = 30)]
    pub files: usize,
    /// List every file (a block plan: every range).
    #[arg(long)]
    pub all: bool,
    /// List each file's ranges too.
    #[arg(long)]
    pub ranges: bool,
    /// Print only the paths of the planned files in replay order, one per line.
    #[arg(long, conflicts_with_all = ["all", "ranges"])]
    pub paths: bool,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum MethodArg {
    /// WILLNEED, then read through the range: a thread moves on once its pages are in.
    Read,
    /// WILLNEED only (asynchronous).
    Willneed,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CpuArg {
    Normal,
    Idle,
}

impl From<CpuArg> for coldstart_prefetch::replay::CpuClass {
    fn from(cpu: CpuArg) -> Self {
        match cpu {
            CpuArg::Normal => coldstart_prefetch::replay::CpuClass::Normal,
            CpuArg::Idle => coldstart_prefetch::replay::CpuClass::Idle,
        }
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum AlongsideArg {
    Auto,
    Priority,
    Paced,
}

impl From<AlongsideArg> for AlongsideMode {
    fn from(mode: AlongsideArg) -> Self {
        match mode {
            AlongsideArg::Auto => AlongsideMode::Auto,
            AlongsideArg::Priority => AlongsideMode::Priority,
            AlongsideArg::Paced => AlongsideMode::Paced,
        }
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum FillArg {
    Exact,
    Sequential,
}

impl From<FillArg> for coldstart_prefetch::replay::Fill {
    fn from(fill: FillArg) -> Self {
        match fill {
            FillArg::Exact => coldstart_prefetch::replay::Fill::Exact,
            FillArg::Sequential => coldstart_prefetch::replay::Fill::Sequential,
        }
    }
}

/// How to replay a plan (shared by `prefetch run`, `run --prefetch` and `bench --prefetch`).
#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Threads replaying at once [default: 16, 4 alongside a start].
    ///
    /// They are the requests in flight with --method read. The default is 16 for a replay
    /// waited for (prefetch run, --ahead) and 4 alongside a start, where the program's own
    /// reads queue behind the replay's.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=256))]
    pub depth: Option<u64>,
    /// How to fetch.
    ///
    /// `read` asks WILLNEED, then reads through each range; `willneed` only asks.
    #[arg(long, value_enum, default_value = "read")]
    pub method: MethodArg,
    #[arg(long, value_name = "SIZE", help = "Memory budget: a size or a share of MemAvailable [default: 50%]", long_help = max_memory_help())]
    pub max_memory: Option<MemoryBudget>,
    /// I/O priority: be:0-7, idle, rt:0-7 (root) [default: inherited].
    ///
    /// The I/O priority class and level of the replay threads (ioprio_set).
    #[arg(long, value_name = "PRIO")]
    pub ioprio: Option<IoPriority>,
    /// CPU class of the replay threads.
    ///
    /// `normal` (inherited) or `idle` (SCHED_IDLE: they run only when the CPU would otherwise
    /// be idle).
    #[arg(long, value_enum, value_name = "CLASS")]
    pub cpu: Option<CpuArg>,
    /// How reads fill the cache: exact or sequential.
    ///
    /// With --method read: `exact` reads only the planned ranges, as 4 KiB pages; `sequential`
    /// makes plain reads that let the kernel read ahead into large folios, bounded by the
    /// memory budget (measured no faster for python3, see BENCHMARKS.md).
    #[arg(long, value_enum, default_value = "exact", hide_possible_values = true)]
    pub fill: FillArg,
    /// Replay alongside by priority or paced, or auto.
    ///
    /// `priority` replays as the other options say (a disk-ordered plan: 16 threads at
    /// real-time I/O priority) and counts on the disk's elevator (mq-deadline, bfq) to serve
    /// the replay first. `paced` is for a disk that serves requests first in, first out (the
    /// elevator none or kyber: NVMe, cloud volumes; a blk-throttle or io.max read limit), where
    /// the start would queue behind the whole replay: first-need order, two reads of at most
    /// 1 MiB in flight, giving way (up to 20 ms) while the disk is queued three deep.
    /// `auto` looks at the plan's disks and this process's cgroup before the replay and picks
    /// `paced` where one ignores priority. The replay's summary says what it found.
    /// Example: `coldstart run --prefetch boot.plan --alongside-mode paced -- ./start`.
    #[arg(long, value_enum, default_value = "auto", value_name = "MODE", hide_possible_values = true)]
    pub alongside_mode: AlongsideArg,
    /// Do not replay filesystem metadata (block-device ranges).
    #[arg(long)]
    pub skip_metadata: bool,
    /// Do not warm directories.
    #[arg(long)]
    pub skip_directories: bool,
    /// Also look up (stat) every entry of the planned directories.
    ///
    /// This warms the inode tables and inodes of names the program looks up without reading
    /// them (measured no faster for python3 after a replay ahead, see BENCHMARKS.md).
    #[arg(long, conflicts_with = "skip_directories")]
    pub stat_entries: bool,
}

impl ReplayArgs {
    /// The options for replaying a plan of `order`: a plan in disk order (a boot's or a
    /// session's) is replayed with 16 requests in flight alongside a start too, and at
    /// real-time I/O priority where this process may take it (root), unless --depth or
    /// --ioprio say otherwise, so that it
    /// runs through the disk once while the start's own reads wait (BENCHMARKS.md).
    pub fn options_for(&self, order: Order) -> ReplayOptions {
        let mut options = self.options();
        if order == Order::Disk {
            if self.depth.is_none() {
                options.alongside_depth = options.depth;
            }
            if self.ioprio.is_none() && real_time_io_allowed() {
                options.io_priority = Some(IoPriority::RealTime(0));
            }
        }
        options
    }

    pub fn options(&self) -> ReplayOptions {
        let defaults = ReplayOptions::default();
        ReplayOptions {
            depth: self.depth.map_or(defaults.depth, |d| d as usize),
            alongside_depth: self.depth.map_or(defaults.alongside_depth, |d| d as usize),
            alongside_mode: self.alongside_mode.into(),
            method: match self.method {
                MethodArg::Read => Method::Read,
                MethodArg::Willneed => Method::Willneed,
            },
            fill: self.fill.into(),
            alongside_fill: self.fill.into(),
            metadata: !self.skip_metadata,
            directories: !self.skip_directories,
            stat_entries: self.stat_entries,
            cpu: self.cpu.map_or(defaults.cpu, Into::into),
            alongside_cpu: self.cpu.map_or(defaults.alongside_cpu, Into::into),
            io_priority: self.ioprio.or(defaults.io_priority),
            memory_share: match self.max_memory {
                Some(MemoryBudget::Share(share)) => share,
                _ => defaults.memory_share,
            },
            max_memory: match self.max_memory {
                Some(MemoryBudget::Bytes(bytes)) => Some(bytes),
                _ => defaults.max_memory,
            },
            ..defaults
        }
    }
}

/// Whether this process may take the real-time I/O class (root with CAP_SYS_ADMIN, not
/// a sandboxed unit whose capabilities were bounded): tried on a thread of its own.
fn real_time_io_allowed() -> bool {
    std::thread::spawn(|| IoPriority::RealTime(0).apply_to_this_thread().is_ok()).join().unwrap_or(false)
}

fn max_memory_help() -> String {
    format!(
        "Most memory to fill: a size (512MiB, 2GB; {SIZE_SYNTAX}) or a share of MemAvailable (25%) [default: 50%]"
    )
}

/// The replay's memory budget (`--max-memory`): a size, or a share of MemAvailable.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MemoryBudget {
    /// A fraction, above 0 and at most 1.
    Share(f64),
    Bytes(u64),
}

/// The smallest budget that holds a page.
const PAGE_BYTES: u64 = 4096;

impl FromStr for MemoryBudget {
    type Err = String;

    fn from_str(text: &str) -> Result<MemoryBudget, String> {
        if let Some(percent) = text.trim().strip_suffix('%') {
            let share = values::percentage(percent)?;
            return if share > 0.0 {
                Ok(MemoryBudget::Share(share / 100.0))
            } else {
                Err("a share above 0%".into())
            };
        }
        let ByteSize(bytes) =
            text.parse().map_err(|e: coldstart_analyze::units::QuantityError| e.to_string())?;
        if bytes < PAGE_BYTES {
            return Err(format!("{bytes} bytes is less than a page (a bare number is bytes: write 512MiB)"));
        }
        Ok(MemoryBudget::Bytes(bytes))
    }
}

/// Replay a plan into the page cache now (files that changed since are skipped and reported).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  coldstart prefetch run app.plan
  coldstart prefetch run app.plan --depth 4 --ioprio idle --max-memory 25%
  coldstart prefetch run app.plan --json report.json --max-stale 30
  coldstart prefetch run boot.bplan --device /dev/vdb     # a block plan, direct I/O, 32 in flight

Works without root for files the user can read (what was already cached is then unknown
for files the user may not write, and they are read anyway). Exit status: 0 done; 2 an
error of coldstart; 4 more than --max-stale percent of the planned bytes belong to files
that changed or disappeared since the plan was made (make the plan again).

A block plan (`prefetch plan --blocks`) is replayed on --device, or on the device holding its
filesystem's UUID: its identity is checked first (size, superblock, sampled blocks; another or
a changed image is refused, exit 2, having read only those blocks), then each chunk is read
once with direct I/O, --depth at a time [default 32], in plan order. On a lazily fetched
volume, --fetch-only reads one block of each fetch unit instead (the volume fetches the whole
unit; the start then reads what it needs at the volume's own speed):
  coldstart prefetch run boot.bplan --device /dev/vdb --fetch-only")]
pub struct RunArgs {
    /// The plan file to replay (from `coldstart prefetch plan`).
    pub plan: PathBuf,
    /// A block plan's device or image file [default: the device holding the plan's UUID].
    #[arg(long, value_name = "PATH")]
    pub device: Option<PathBuf>,
    /// A block plan on a lazily fetched volume: read one 4 KiB block of each 512 KiB fetch unit
    /// (or of each chunk, when larger) the plan touches, so that the volume fetches it; no more.
    #[arg(long)]
    pub fetch_only: bool,
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Write the report as JSON (`-`: to stdout).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Exit with status 4 when more than this percentage of planned bytes is stale or missing.
    #[arg(long, value_name = "PCT", value_parser = values::percentage)]
    pub max_stale: Option<f64>,
    /// Print nothing (errors and --max-stale excepted).
    #[arg(short, long)]
    pub quiet: bool,
}

/// A trace of a boot or a session: many programs read at once, so its plan is replayed
/// in disk order (at real-time priority, see [`ReplayArgs::options_for`]), ureadahead's
/// way, which is what made a container boot 0.50× of cold on a laptop disk where the
/// first-need order gave 0.75× (BENCHMARKS.md).
pub fn load_plan(path: &std::path::Path) -> anyhow::Result<Arc<Plan>> {
    Ok(Arc::new(Plan::load(path)?))
}

/// `--min-share`: a share of the traces, above 0 and at most 1.
fn share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v > 0.0 && v <= 1.0 => Ok(v),
        _ => Err(format!("{text} is not a share above 0 and at most 1 (e.g. 0.5 for half of the traces)")),
    }
}

fn settings(args: &PlanArgs, boot_or_session: bool) -> PlanSettings {
    PlanSettings {
        order: match args.order {
            OrderArg::Auto if boot_or_session => Order::Disk,
            OrderArg::Auto | OrderArg::FirstNeed => Order::FirstNeed,
            OrderArg::Disk => Order::Disk,
            OrderArg::Blend => Order::Blend,
        },
        blend_window_ns: (args.blend_window_ms * 1e6) as i64,
        max_gap_bytes: args.gap_kib * 1024,
        max_size_ratio: args.max_size,
        max_range_bytes: args.max_range_kib.max(4) * 1024,
        whole_files: args.whole_files,
        metadata: !args.no_metadata,
    }
}

fn plan(args: PlanArgs) -> anyhow::Result<ExitCode> {
    if args.output.exists() && !args.force {
        bail!("{} exists; use --force to overwrite it", args.output.display());
    }
    if args.blocks {
        return crate::cmd::prefetch_blocks::plan(&args);
    }
    if args.dataset.is_none()
        && (args.min_share.is_some() || args.build.is_some() || args.machine_class.is_some())
    {
        bail!(
            "--min-share, --build and --machine-class choose traces of a dataset: use them with --dataset DIR"
        );
    }
    let (plan, settings) = match (&args.trace, &args.dataset) {
        (_, Some(dataset)) => {
            let selection = crate::cmd::prefetch_fleet::Selection {
                build: args.build.clone(),
                machine_class: args.machine_class.clone(),
            };
            let fleet = crate::cmd::prefetch_fleet::read(dataset, &selection)?;
            if fleet.pages.traces() == 0 {
                bail!(
                    "none of the dataset's {} traces is of {}: nothing to plan",
                    fleet.not_selected,
                    [
                        args.build.as_deref().map(|b| format!("build {b}")),
                        args.machine_class.as_deref().map(|c| format!("machine class {c}"))
                    ]
                    .into_iter()
                    .flatten()
                    .collect::<Vec<_>>()
                    .join(" and ")
                );
            }
            let settings = settings(&args, 2 * fleet.boots_or_sessions >= fleet.pages.traces());
            let plan =
                crate::cmd::prefetch_fleet::plan(&fleet, args.min_share.unwrap_or(0.5), &settings, dataset)?;
            if fleet.not_selected > 0 {
                eprintln!("  {} traces of other builds or machine classes were not read", fleet.not_selected);
            }
            (plan, settings)
        }
        (Some(trace_path), None) => {
            let trace = Trace::read(trace_path).context("cannot read the trace")?;
            let settings = settings(&args, coldstart_prefetch::build::is_boot_or_session(&trace));
            let tool = format!("coldstart {}", env!("CARGO_PKG_VERSION"));
            (
                coldstart_prefetch::build_plan(&trace, &trace_path.to_string_lossy(), &settings, &tool)?,
                settings,
            )
        }
        (None, None) => bail!("give a trace, or a dataset with --dataset DIR"),
    };
    plan.save(&args.output)?;
    let s = &plan.stats;
    eprintln!(
        "coldstart: wrote {}: {} files, {} ranges, {:.1} MiB ({:.2}× the {:.1} MiB {}; covers {:.1}% of it)",
        args.output.display(),
        s.files,
        s.ranges,
        s.planned_bytes as f64 / 1048576.0,
        if s.read_bytes > 0 { s.planned_bytes as f64 / s.read_bytes as f64 } else { 0.0 },
        s.read_bytes as f64 / 1048576.0,
        match &plan.source.fleet {
            Some(f) => format!("at least {} of the {} traces read", f.min_traces, f.traces),
            None => "the start read".to_owned(),
        },
        if s.read_bytes > 0 { 100.0 * s.planned_read_bytes as f64 / s.read_bytes as f64 } else { 0.0 },
    );
    if args.order == OrderArg::Auto {
        let why = match settings.order {
            Order::Disk => "a boot or a session: replayed deep, and as root at real-time I/O priority",
            _ => "one program's start",
        };
        eprintln!("  order: {} ({why})", settings.order.name());
    }
    for n in &plan.notes {
        eprintln!("  note: {n}");
    }
    if plan.source.fleet.is_some() {
        for e in &s.excluded {
            let files = if e.files == 1 { "1 file".to_owned() } else { format!("{} files", e.files) };
            eprintln!("  left out: {files} ({:.1} MiB): {}", e.read_bytes as f64 / 1048576.0, e.reason);
        }
    }
    eprintln!("next: coldstart prefetch show {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    if crate::cmd::prefetch_blocks::is_block_plan(&args.plan) {
        if args.paths || args.ranges {
            bail!(
                "{} is a block plan: it has ranges of a device, no files (drop --paths and --ranges)",
                args.plan.display()
            );
        }
        return crate::cmd::prefetch_blocks::show(&args.plan, (!args.all).then_some(args.files));
    }
    let plan = Plan::load(&args.plan)?;
    if args.paths {
        print!("{}", coldstart_prefetch::show::paths(&plan));
        return Ok(ExitCode::SUCCESS);
    }
    let options = ShowOptions { max_files: (!args.all).then_some(args.files), ranges: args.ranges };
    print!("{}", coldstart_prefetch::show::render(&plan, options));
    Ok(ExitCode::SUCCESS)
}

fn replay(args: RunArgs) -> anyhow::Result<ExitCode> {
    if crate::cmd::prefetch_blocks::is_block_plan(&args.plan) {
        return crate::cmd::prefetch_blocks::run(&args);
    }
    if let Some(option) = [(args.device.is_some(), "--device"), (args.fetch_only, "--fetch-only")]
        .iter()
        .find_map(|(given, name)| given.then_some(name))
    {
        bail!(
            "{option} is for a block plan (`prefetch plan --blocks`); {} is a page plan",
            args.plan.display()
        );
    }
    let plan = load_plan(&args.plan)?;
    let options = args.replay.options_for(plan.settings.order);
    let report = coldstart_prefetch::replay(plan, &options)?;
    if !args.quiet {
        eprint!("{}", coldstart_prefetch::summary::render(&report));
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        if path.as_os_str() == "-" {
            print!("{text}");
        } else {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    if let Some(limit) = args.max_stale
        && report.stale_share() * 100.0 > limit
    {
        eprintln!(
            "coldstart: {:.1}% of the planned bytes belong to files that changed or disappeared since the plan was \
             made (limit {limit}%): make the plan again (`coldstart record --cold`, then `coldstart prefetch plan`)",
            report.stale_share() * 100.0
        );
        return Ok(ExitCode::from(4));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Plan(a) => plan(a),
        Action::Show(a) => show(a),
        Action::Run(a) => replay(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        replay: ReplayArgs,
    }

    fn options(args: &[&str]) -> ReplayOptions {
        use clap::Parser;
        Cli::parse_from(std::iter::once("x").chain(args.iter().copied())).replay.options()
    }

    #[test]
    fn depth_defaults_by_mode_and_an_explicit_depth_sets_both() {
        let o = options(&[]);
        assert_eq!((o.depth, o.alongside_depth), (16, 4));
        let o = options(&["--depth", "2"]);
        assert_eq!((o.depth, o.alongside_depth), (2, 2));
    }

    #[test]
    fn the_alongside_mode_is_auto_unless_forced() {
        assert_eq!(options(&[]).alongside_mode, AlongsideMode::Auto);
        assert_eq!(options(&["--alongside-mode", "paced"]).alongside_mode, AlongsideMode::Paced);
        assert_eq!(options(&["--alongside-mode", "priority"]).alongside_mode, AlongsideMode::Priority);
    }

    #[test]
    fn memory_budgets_are_sizes_by_the_one_rule_or_shares() {
        let budget = |text: &str| text.parse::<MemoryBudget>();
        assert_eq!(budget("64MiB"), Ok(MemoryBudget::Bytes(64 << 20)));
        assert_eq!(budget("2GB"), Ok(MemoryBudget::Bytes(2_000_000_000)));
        assert_eq!(budget("2G"), Ok(MemoryBudget::Bytes(2_000_000_000)), "SI, as in kB, MB, GB");
        assert_eq!(budget("1048576"), Ok(MemoryBudget::Bytes(1 << 20)), "a bare number is bytes");
        assert_eq!(budget("25%"), Ok(MemoryBudget::Share(0.25)));
        let err = budget("512").unwrap_err();
        assert!(err.contains("less than a page") && err.contains("512MiB"), "{err}");
        for bad in ["lots", "150%", "0%", "nan%", "-1", "nan", "", "1e400"] {
            assert!(budget(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_disk_ordered_plan_is_replayed_deep_and_as_root_at_real_time_priority_unless_told() {
        use clap::Parser;
        let args = |a: &[&str]| Cli::parse_from(std::iter::once("x").chain(a.iter().copied())).replay;
        let allowed = real_time_io_allowed();
        let o = args(&[]).options_for(Order::Disk);
        assert_eq!((o.depth, o.alongside_depth), (16, 16));
        assert_eq!(o.io_priority, allowed.then_some(IoPriority::RealTime(0)));
        let o = args(&["--depth", "2", "--ioprio", "be:4"]).options_for(Order::Disk);
        assert_eq!((o.alongside_depth, o.io_priority), (2, Some(IoPriority::BestEffort(4))));
        let o = args(&[]).options_for(Order::FirstNeed);
        assert_eq!((o.alongside_depth, o.io_priority), (4, None), "one program's plan keeps the defaults");
    }

    #[test]
    fn the_memory_budget_and_io_priority_reach_the_options() {
        let o = options(&["--max-memory", "1GiB", "--ioprio", "idle"]);
        assert_eq!((o.max_memory, o.io_priority), (Some(1 << 30), Some(IoPriority::Idle)));
        let o = options(&["--max-memory", "10%"]);
        assert_eq!((o.max_memory, o.memory_share), (None, 0.1));
    }
}
