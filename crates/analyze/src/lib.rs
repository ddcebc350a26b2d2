//! Pure analysis of a coldstart trace: `&Trace -> Analysis`.
//!
//! Coalesced reads and file-level seeks ([`Analysis::reads`], rankings), disk-level
//! seeks and the diskstats cross-check ([`Analysis::disks`]), where each thread's
//! time went and which files its I/O waits were for, the wall-clock breakdown of
//! the start, automatic phases and the critical path to ready. The analysis never
//! fails on odd data: what it could not make sense of becomes a [`Warning`].
//! It never touches the live system.

#![forbid(unsafe_code)]

mod analysis;
mod boot_units;
mod context;
mod cpu;
mod critical;
mod disk;
pub mod doctor;
mod ending;
mod offcpu;
mod overview;
mod pageuse;
mod phases;
mod ranking;
mod reads;
pub mod synthetic;
pub mod syscalls;
mod time;
pub mod units;
mod warnings;

pub use analysis::*;
pub use boot_units::{chain_to, ready_unit};
pub use offcpu::{KernelWait, OffCpuIndex, area_of, kernel_wait};
pub use ranking::{RankBy, ReadFilter};

use coldstart_trace::{Nanos, Trace};
use rustc_hash::FxHashSet;

/// Knobs of the analysis; the defaults suit program starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Block requests farther than this from the end of the previous one count as far seeks.
    pub seek_threshold_bytes: u64,
    /// Gaps between a thread's scheduler intervals longer than this are warned about.
    pub sched_gap_ns: Nanos,
    /// The start is cut into about this many bins to find phases…
    pub phase_bins: u32,
    /// …each at least this long.
    pub phase_bin_min_ns: Nanos,
    /// Phases shorter than the start's length divided by this (and than three bins)
    /// are absorbed by a neighbour.
    pub phase_min_fraction: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            seek_threshold_bytes: 1 << 20,
            sched_gap_ns: 1_000_000,
            phase_bins: 400,
            phase_bin_min_ns: 1_000_000,
            phase_min_fraction: 40,
        }
    }
}

/// Analyses a trace with the default [`Config`].
pub fn analyze(trace: &Trace) -> Analysis {
    analyze_with(trace, &Config::default())
}

/// Analyses a trace.
pub fn analyze_with(trace: &Trace, config: &Config) -> Analysis {
    let ctx = context::Ctx::new(trace, config);
    let mut warnings = Vec::new();
    let mut coalesced = reads::coalesce(&ctx);
    let times = time::thread_times(&ctx, &mut coalesced.file_uses);
    let processes = overview::processes(&ctx, &times.threads, &coalesced.file_uses);
    let origin = overview::origin(&ctx);
    let ready = overview::ready(&ctx, origin, &mut warnings);
    let trace_end = overview::trace_end(&ctx);
    let end = ready.as_ref().map_or(trace_end, |r| r.t_ns);
    let start = time::start_breakdown(&ctx, origin, end);
    let phases = phases::phases(&ctx, origin, end, &coalesced.reads, &times.wait_top_file);
    let mut critical_path =
        ready.as_ref().and_then(|r| critical::critical_path(&ctx, r, origin, &mut warnings));
    let calls = syscalls::CallIndex::new(trace);
    let off_cpu = offcpu::OffCpuIndex::new(trace);
    if let Some(path) = &mut critical_path {
        syscalls::annotate(path, &calls, &off_cpu, &trace.mounts, &syscalls::RemoteMounts::new(trace));
    }
    let syscall_waits = syscalls::syscall_waits(trace, &calls, &off_cpu, ctx.in_scope_test(), origin, end);
    let cpu_profile = cpu::cpu_profile(trace, origin, end, &phases, critical_path.as_ref());
    let mut disks = disk::disks(&ctx);
    let (page_use, page_use_by_file) = pageuse::page_use(&ctx);
    pageuse::by_disk(&mut disks, &page_use_by_file);
    let problems = warnings::check(&ctx, trace_end, &times.anomalies, &mut warnings);
    warnings.sort_by(|a, b| a.code.cmp(&b.code).then(a.message.cmp(&b.message)));

    let (units, unit_chain) = boot_units::unit_times(&ctx, &times.threads, &times.wait_top_file);
    let files = file_table(&ctx, &coalesced.file_uses, &disks, critical_path.as_ref());
    let cu = &coalesced.file_uses;
    let exit = ending::command_exit(trace, ready.as_ref(), trace_end);
    let overview = Overview {
        origin_ns: origin,
        ready,
        end_ns: end,
        processes: processes.len() as u64,
        processes_started: processes.iter().filter(|p| p.in_scope && p.start_ns.is_some()).count() as u64,
        processes_in_scope: processes.iter().filter(|p| p.in_scope).count() as u64,
        threads: times.threads.len() as u64,
        execs: trace.execs.len() as u64,
        files_read: cu.iter().map(|u| u.file).collect::<FxHashSet<_>>().len() as u64,
        files_in_trace: trace.files.len() as u64,
        reads: coalesced.reads.len() as u64,
        seeks: cu.iter().map(|u| u.seeks).sum(),
        pages_read: cu.iter().map(|u| u.pages).fold(0, u64::saturating_add),
        bytes_read: ctx.bytes(cu.iter().map(|u| u.pages).fold(0, u64::saturating_add)),
        block_read_requests: disks.iter().map(|d| d.traced_read_requests).sum(),
        block_read_bytes: disks.iter().map(|d| d.traced_read_bytes).fold(0, u64::saturating_add),
        cpu_ns: times.threads.iter().fold(0, |sum, t| sum.saturating_add(t.time.running_ns)),
        io_wait_ns: times.threads.iter().fold(0, |sum, t| sum.saturating_add(t.time.io_wait_ns)),
        unresolved_files: problems.unresolved_files,
        fills_without_file: problems.fills_without_file,
        lost: trace.losses.iter().fold(0, |sum, l| sum.saturating_add(l.count)),
        others: overview::others(&ctx, &disks, cu, origin, end),
        exit,
    };
    let mut marks = trace.marks.clone();
    marks.sort_by(|a, b| a.t_ns.cmp(&b.t_ns).then(a.name.cmp(&b.name)));
    let mut analysis = Analysis {
        schema: SCHEMA_NAME.to_owned(),
        version: SCHEMA_VERSION,
        trace: overview::trace_info(&ctx),
        overview,
        files,
        processes,
        threads: times.threads,
        reads: coalesced.reads,
        file_uses: coalesced.file_uses,
        by_file: Vec::new(),
        by_process: Vec::new(),
        page_origins: coalesced.origins,
        page_use,
        page_use_by_file,
        disks,
        syscall_waits,
        start,
        phases,
        critical_path,
        marks,
        losses: trace.losses.clone(),
        warnings,
        cpu_profile,
        units,
        unit_chain,
    };
    analysis.by_file = analysis.rank(RankBy::File, &ReadFilter::default());
    analysis.by_process = analysis.rank(RankBy::Process, &ReadFilter::default());
    analysis
}

/// Every file the analysis names, by id.
fn file_table(
    ctx: &context::Ctx,
    uses: &[FileUse],
    disks: &[DiskAnalysis],
    path: Option<&CriticalPath>,
) -> Vec<FileInfo> {
    let mut ids: Vec<u32> = uses.iter().map(|u| u.file).collect();
    for d in disks {
        ids.extend(d.files.iter().map(|f| f.file));
    }
    if let Some(p) = path {
        ids.extend(p.segments.iter().flat_map(|s| s.files.iter().map(|f| f.file)));
    }
    ids.sort_unstable();
    ids.dedup();
    ids.into_iter()
        .map(|id| match ctx.file(id) {
            Some(f) => FileInfo {
                id,
                path: f.path.clone(),
                name: ctx.display_name(id),
                kind: f.kind,
                dev: f.dev,
                ino: f.ino,
                size_bytes: f.size,
                in_trace: true,
            },
            None => FileInfo {
                id,
                path: None,
                name: ctx.display_name(id),
                kind: coldstart_trace::FileKind::Other,
                dev: coldstart_trace::Dev::default(),
                ino: 0,
                size_bytes: None,
                in_trace: false,
            },
        })
        .collect()
}
