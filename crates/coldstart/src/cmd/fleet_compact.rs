//! `coldstart fleet compact DIR`: a dataset's exported files (one trace each) folded into
//! large parts per table and build (`coldstart_dataset::compact`), with progress on
//! standard error.
//!
//! For tests, `COLDSTART_TEST_COMPACT_KILL_AFTER=N` makes the process kill itself (SIGKILL,
//! as an operator or the OOM killer would) after the Nth part written or folder switched.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::Context;
use coldstart_dataset::compact::{Event, Options, Report, compact};

/// Fold a dataset's exported files into large Parquet files per table and build.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart fleet compact fleet/
  coldstart fleet compact --rewrite fleet/
  coldstart export --format parquet -o fleet/ --build 41.3 new-boots/*.coldstart && coldstart fleet compact fleet/

Each table's exported files (one trace each) and its parts under 64 MiB become parts of
many traces, sorted by trace id, in row groups of at least 100,000 rows where the table
has that many, in the table's folder of each build (build=41.2/); larger parts stay as
they are, so a compaction costs about what it folds, not the dataset. Each table and build is
switched to its new files at once: queries running meanwhile see every trace once, and a
compaction that is killed leaves a dataset that answers correctly; run it again to finish.
New exports wait for a running compaction. Needs a filesystem with renameat2's
RENAME_EXCHANGE (ext4, xfs, btrfs, tmpfs).")]
pub struct Args {
    /// The dataset's folder (from `coldstart export --format parquet`).
    #[arg(value_name = "DIR")]
    pub dataset: PathBuf,
    /// Also rewrite every part under 1 GiB into full parts (reads and writes the whole
    /// dataset: for a table left with many mid-sized parts).
    #[arg(long)]
    pub rewrite: bool,
}

const KILL_AFTER: &str = "COLDSTART_TEST_COMPACT_KILL_AFTER";

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
}

/// A progress line per event; under [`KILL_AFTER`], SIGKILL after that many steps.
fn progress(kill_after: Option<usize>, steps: &AtomicUsize) -> impl Fn(Event<'_>) + Sync + '_ {
    move |event| {
        match &event {
            Event::Planned { jobs, traces, bytes } => {
                eprintln!("coldstart: compacting {jobs} tables and builds: {traces} traces, {}", mib(*bytes))
            }
            Event::Begun { table, build, traces, parts } => eprintln!(
                "coldstart: {table} {}: folding {traces} traces ({parts} parts among them)",
                coldstart_dataset::partition_name(*build)
            ),
            Event::PartWritten { table, path, traces, rows } => eprintln!(
                "coldstart: {table}: wrote {} ({traces} traces, {rows} rows)",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            Event::Switched { table, build, done, jobs } => eprintln!(
                "coldstart: [{done}/{jobs}] {table} {} switched to its parts",
                coldstart_dataset::partition_name(*build)
            ),
        }
        let step = matches!(event, Event::PartWritten { .. } | Event::Switched { .. });
        if step && kill_after.is_some_and(|n| steps.fetch_add(1, Ordering::SeqCst) + 1 >= n) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::this(), nix::sys::signal::Signal::SIGKILL);
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let kill_after = match std::env::var(KILL_AFTER) {
        Ok(n) => Some(n.parse::<usize>().with_context(|| format!("{KILL_AFTER}={n} is not a number"))?),
        Err(_) => None,
    };
    let dir = &args.dataset;
    let started = Instant::now();
    let steps = AtomicUsize::new(0);
    let options = Options { rewrite: args.rewrite, ..Options::default() };
    let on_wait =
        &mut || eprintln!("coldstart: {}: waiting for an export or compaction to finish", dir.display());
    let report: Report = compact(dir, &options, on_wait, &progress(kill_after, &steps))
        .with_context(|| format!("cannot compact {}", dir.display()))?;
    let seconds = started.elapsed().as_secs_f64();
    if report.jobs == 0 {
        eprintln!(
            "coldstart: {}: compact already ({} files); nothing to do",
            dir.display(),
            report.files_before
        );
    } else {
        eprintln!(
            "coldstart: {} compacted in {seconds:.1} s: {} exported files and {} traces in all folded; {} files → {}; the rewritten files {} → {}",
            dir.display(),
            report.files_folded,
            report.traces,
            report.files_before,
            report.files_after,
            mib(report.bytes_before),
            mib(report.bytes_after)
        );
    }
    Ok(ExitCode::SUCCESS)
}
