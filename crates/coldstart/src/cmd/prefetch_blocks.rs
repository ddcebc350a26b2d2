//! The block plans of `coldstart prefetch plan --blocks`, `prefetch show` and `prefetch run`:
//! a device's ranges made from a trace and tied to its image, shown, and read with direct I/O.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use coldstart_prefetch::blocks::{self, BlockPlan, BlockPlanRequest};
use coldstart_trace::{Dev, Trace};

use super::prefetch::{PlanArgs, RunArgs};

/// The default number of direct reads in flight (fio's `--iodepth=32`, the providers' advice).
pub const DEFAULT_DEPTH: usize = 32;

/// Whether the file at `path` is a block plan (unreadable files are left to the page plan's
/// reader, which says why).
pub fn is_block_plan(path: &Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|text| blocks::is_block_plan(&text))
}

/// `prefetch plan --blocks TRACE -o PLAN`.
pub fn plan(args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let chunk = args.chunk.map_or(blocks::DEFAULT_CHUNK_BYTES, |c| c.0);
    if chunk == 0 || !chunk.is_multiple_of(blocks::ALIGN) {
        bail!("--chunk {chunk} bytes is not a positive multiple of 4 KiB (e.g. 512KiB, 1MiB)");
    }
    let tool = format!("coldstart {}", env!("CARGO_PKG_VERSION"));
    let source = match (&args.dataset, &args.trace) {
        (Some(dir), _) => dir,
        (None, Some(trace)) => trace,
        (None, None) => bail!("--blocks makes a plan from a trace or a dataset: give one"),
    };
    let request = BlockPlanRequest {
        trace_path: &source.to_string_lossy(),
        device: args.device,
        chunk_bytes: chunk,
        image: args.image.as_deref(),
        tool: &tool,
    };
    let plan = match &args.dataset {
        Some(dir) => fleet_plan(dir, args, &request)?,
        None => blocks::plan_blocks(&Trace::read(source).context("cannot read the trace")?, &request)?,
    };
    plan.save(&args.output)?;
    let s = &plan.stats;
    eprintln!(
        "coldstart: wrote {}: device {} ({}), {} ranges, {} chunks, {:.1} MiB ({:.2}× the {:.1} MiB the start read \
         from it, {:.1} MiB of them metadata); identity: {} {} and {} sampled blocks of {}",
        args.output.display(),
        plan.device.dev,
        plan.device.chosen_by,
        plan.ranges.len(),
        s.chunks,
        s.planned_bytes as f64 / 1048576.0,
        if s.distinct_read_bytes > 0 { s.planned_bytes as f64 / s.distinct_read_bytes as f64 } else { 0.0 },
        s.distinct_read_bytes as f64 / 1048576.0,
        s.metadata_read_bytes as f64 / 1048576.0,
        plan.identity.filesystem,
        plan.identity.uuid,
        plan.identity.samples.len(),
        plan.device.image
    );
    for (dev, bytes) in &s.other_devices {
        eprintln!(
            "  left out: device {dev} ({:.1} MiB read; --device {dev} plans it instead)",
            *bytes as f64 / 1048576.0
        );
    }
    eprintln!("next: coldstart prefetch show {}", args.output.display());
    Ok(ExitCode::SUCCESS)
}

/// The block plan of the dataset at `dir`'s selected traces.
fn fleet_plan(dir: &Path, args: &PlanArgs, request: &BlockPlanRequest) -> anyhow::Result<BlockPlan> {
    let selection = crate::cmd::prefetch_fleet::Selection {
        build: args.build.clone(),
        machine_class: args.machine_class.clone(),
    };
    let mut fleet = blocks::FleetChunks::new(blocks::fleet_settings(request)?);
    let not_selected =
        crate::cmd::prefetch_fleet::read_blocks(dir, &selection, &mut |ios| Ok(fleet.add(&ios)?))?;
    if not_selected > 0 {
        eprintln!("coldstart: {not_selected} traces of another build or machine class left out");
    }
    Ok(blocks::plan_fleet_blocks(fleet, request, args.min_share.unwrap_or(0.5))?)
}

/// `prefetch show` of a block plan.
pub fn show(path: &Path, max_ranges: Option<usize>) -> anyhow::Result<ExitCode> {
    let plan = BlockPlan::load(path)?;
    print!("{}", blocks::show::render(&plan, max_ranges));
    Ok(ExitCode::SUCCESS)
}

/// `prefetch run` of a block plan: on `--device PATH`, or the device holding the plan's UUID.
pub fn run(args: &RunArgs) -> anyhow::Result<ExitCode> {
    refuse_page_options(args)?;
    let plan = BlockPlan::load(&args.plan)?;
    let device: PathBuf = match &args.device {
        Some(path) => path.clone(),
        None => blocks::identity::find_by_uuid(&plan.identity.uuid, plan.identity.size_bytes).with_context(
            || {
                format!(
                    "no device holds the plan's filesystem (UUID {}): give it with --device PATH",
                    plan.identity.uuid
                )
            },
        )?,
    };
    let depth = args.replay.depth.map_or(DEFAULT_DEPTH, |d| d as usize);
    let report = blocks::replay_blocks(&plan, &device, depth, args.replay.ioprio, args.fetch_only)?;
    if !args.quiet {
        eprintln!("{}", report.summary());
    }
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)? + "\n";
        if path.as_os_str() == "-" {
            print!("{text}");
        } else {
            std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The page replay's options mean nothing to a block replay: given, they are refused.
fn refuse_page_options(args: &RunArgs) -> anyhow::Result<()> {
    let r = &args.replay;
    let given = [
        (r.max_memory.is_some(), "--max-memory"),
        (r.cpu.is_some(), "--cpu"),
        (r.skip_metadata, "--skip-metadata"),
        (r.skip_directories, "--skip-directories"),
        (r.stat_entries, "--stat-entries"),
        (args.max_stale.is_some(), "--max-stale"),
    ];
    if let Some((_, name)) = given.iter().find(|(on, _)| *on) {
        bail!(
            "{name} is an option of a page plan's replay; {} is a block plan (its options: --device, --depth, \
             --fetch-only, --ioprio, --json, --quiet)",
            args.plan.display()
        );
    }
    Ok(())
}

/// `--device MAJ:MIN` of `prefetch plan --blocks`.
pub fn dev(text: &str) -> Result<Dev, String> {
    text.parse::<Dev>().map_err(|e| e.to_string())
}
