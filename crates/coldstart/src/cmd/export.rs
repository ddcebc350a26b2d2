//! `coldstart export FILE --format chrome|csv|folded|parquet`: the trace in other tools'
//! formats — Trace Event Format JSON for the Perfetto UI and chrome://tracing, CSV tables
//! of page fills, coalesced reads and block requests, collapsed stacks of the CPU samples,
//! or many traces into a Parquet dataset (`export_parquet.rs`).

use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use coldstart_report::export::{self, csv::Table};

use super::output;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Trace Event Format JSON: open it in ui.perfetto.dev or chrome://tracing.
    Chrome,
    /// CSV tables (header row, RFC 4180 quoting, CRLF line ends).
    Csv,
    /// Collapsed stacks of the CPU samples (`process;outer;…;inner COUNT`), for
    /// flamegraph.pl, inferno-flamegraph or speedscope.
    Folded,
    /// Many traces into one Parquet dataset (-o DIR): one folder per table, one file per
    /// trace; for DuckDB, Spark and `coldstart fleet` (docs/dataset-format.md).
    Parquet,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TableArg {
    /// Pages entering the page cache, one row per fill, with the file's path.
    Fills,
    /// Coalesced reads: fills of one file by one process that continue each other.
    Reads,
    /// Block requests as recorded (issue, completion, sector, bytes, file).
    Requests,
}

impl From<TableArg> for Table {
    fn from(t: TableArg) -> Table {
        match t {
            TableArg::Fills => Table::Fills,
            TableArg::Reads => Table::Reads,
            TableArg::Requests => Table::Requests,
        }
    }
}

/// Export a trace for other tools: Perfetto / chrome://tracing JSON, CSV tables, collapsed
/// stacks, or many traces into a Parquet dataset for fleet queries.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart export app.coldstart --format chrome -o app.json     # then open it in ui.perfetto.dev
  coldstart export app.coldstart --format csv -o app-csv/        # page_fills.csv, reads.csv, block_requests.csv
  coldstart export app.coldstart --format csv --table reads | head
  coldstart export app.coldstart --format folded --phase 2 | inferno-flamegraph > phase2.svg
  coldstart export app.coldstart --format folded --critical-path > on-the-path.folded
  coldstart export --format parquet -o fleet/ --build 41.2 --machine-class laptop-ssd boots/*.coldstart
  coldstart export --format parquet -o fleet/ --anonymize --build 41.3 new-boots/*.coldstart

In the Chrome/Perfetto view, each process and thread is a track with its scheduler states
as slices and its page fills as instant events; each disk is a track of its block requests;
\"coldstart analysis\" holds the phases, the critical path and the marks. Times are
microseconds since the start of the recording. CSV times are nanoseconds.

A Parquet dataset grows: exporting more traces adds files and rewrites none, and a trace
already in the dataset (the same bytes) is skipped. Query it with `coldstart fleet`, DuckDB
or Spark; docs/dataset-format.md is its schema.")]
pub struct Args {
    /// The trace files (from `coldstart record` or `coldstart import`); several only with
    /// --format parquet.
    #[arg(required = true, value_name = "TRACE")]
    pub traces: Vec<PathBuf>,
    /// Output format.
    #[arg(long, short = 'f', value_enum)]
    pub format: FormatArg,
    /// CSV only: write just this table (to -o FILE, or standard output).
    #[arg(long, value_enum, value_name = "TABLE")]
    pub table: Option<TableArg>,
    /// Write to this file instead of standard output; for CSV without --table, the
    /// folder to write every table into (created if missing).
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Folded only: the samples of this process (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,
    /// Folded only: the samples of this phase (numbered as `coldstart report` lists them).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub phase: Option<u32>,
    /// Folded only: the samples of the critical path's CPU segments (its thread, its time).
    #[arg(long)]
    pub critical_path: bool,
    /// Parquet only: the build or image id the traces' machines ran (the `build` column).
    #[arg(long, value_name = "ID")]
    pub build: Option<String>,
    /// Parquet only: the kind of machine the traces were recorded on, e.g. `laptop-ssd`.
    #[arg(long, value_name = "CLASS")]
    pub machine_class: Option<String>,
    /// Parquet only: anonymise each trace first, as `coldstart anonymize` does.
    #[arg(long)]
    pub anonymize: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let parquet_only = args.build.is_some() || args.machine_class.is_some() || args.anonymize;
    if args.format == FormatArg::Parquet {
        if args.table.is_some() || !args.pid.is_empty() || args.phase.is_some() || args.critical_path {
            bail!("--table, --pid, --phase and --critical-path do not apply to --format parquet");
        }
        let dir = args.output.context("a Parquet dataset is a folder: name it with -o DIR")?;
        let labels = super::export_parquet::Labels {
            build: args.build,
            machine_class: args.machine_class,
            anonymize: args.anonymize,
        };
        return super::export_parquet::run(&dir, &args.traces, &labels);
    }
    if parquet_only {
        bail!("--build, --machine-class and --anonymize apply to --format parquet only");
    }
    let [trace_path] = args.traces.as_slice() else {
        bail!("{} traces given: --format parquet takes several, the other formats one", args.traces.len());
    };
    if args.format != FormatArg::Csv && args.table.is_some() {
        bail!("--table applies to --format csv only; the other exports always hold everything");
    }
    if args.format == FormatArg::Csv && args.table.is_none() && args.output.is_none() {
        bail!(
            "CSV holds one table per file: name a folder with -o DIR to get all of them, or pick one with --table"
        );
    }
    if args.format != FormatArg::Folded
        && (!args.pid.is_empty() || args.phase.is_some() || args.critical_path)
    {
        bail!("--pid, --phase and --critical-path apply to --format folded only");
    }
    let trace = super::read_trace(trace_path)?;
    let analysis = coldstart_analyze::analyze(&trace);
    match (args.format, args.table) {
        (FormatArg::Folded, _) => {
            let between = match args.phase {
                Some(n) => {
                    let Some(p) = analysis.phases.get(n as usize - 1) else {
                        bail!("the trace has {} phases: --phase {n} names none", analysis.phases.len());
                    };
                    Some((p.start_ns, p.end_ns))
                }
                None => None,
            };
            let spans = if args.critical_path {
                let Some(path) = &analysis.critical_path else {
                    bail!(
                        "--critical-path: the trace has no critical path (no thread reached ready with scheduler data)"
                    );
                };
                Some(
                    path.segments
                        .iter()
                        .filter(|s| s.kind == coldstart_analyze::SegmentKind::Cpu)
                        .map(|s| (s.tid, s.start_ns, s.end_ns))
                        .collect(),
                )
            } else {
                None
            };
            let filter = export::folded::Filter { pids: args.pid, between, spans };
            let mut out = output(args.output.as_ref())?;
            export::folded::write(&trace, &filter, &mut out)
                .and_then(|()| out.flush())
                .context("cannot write the export")?;
        }
        (FormatArg::Chrome, _) => {
            let mut out = output(args.output.as_ref())?;
            export::chrome::write(&trace, &analysis, &mut out)
                .and_then(|()| out.flush())
                .context("cannot write the export")?;
        }
        (FormatArg::Csv, Some(table)) => {
            let mut out = output(args.output.as_ref())?;
            export::csv::write(table.into(), &trace, &analysis, &mut out)
                .and_then(|()| out.flush())
                .context("cannot write the export")?;
        }
        (FormatArg::Parquet, _) => unreachable!("handled above"),
        (FormatArg::Csv, None) => {
            let dir = args.output.context("no output folder")?;
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
            for table in Table::ALL {
                let path = dir.join(table.file_name());
                let mut out = output(Some(&path))?;
                export::csv::write(table, &trace, &analysis, &mut out)
                    .and_then(|()| out.flush())
                    .with_context(|| format!("cannot write {}", path.display()))?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
