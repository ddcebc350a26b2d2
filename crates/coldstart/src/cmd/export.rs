//! `coldstart export FILE --format chrome|csv|folded`: the trace in other tools' formats —
//! Trace Event Format JSON for the Perfetto UI and chrome://tracing, CSV tables
//! of page fills, coalesced reads and block requests, or collapsed stacks of the CPU samples.

use std::fs;
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use coldstart_report::export::{self, csv::Table};
use coldstart_trace::Trace;

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

/// Export a trace for other tools: Perfetto / chrome://tracing JSON, or CSV tables.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart export app.coldstart --format chrome -o app.json     # then open it in ui.perfetto.dev
  coldstart export app.coldstart --format csv -o app-csv/        # page_fills.csv, reads.csv, block_requests.csv
  coldstart export app.coldstart --format csv --table reads | head
  coldstart export app.coldstart --format folded --phase 2 | inferno-flamegraph > phase2.svg
  coldstart export app.coldstart --format folded --critical-path > on-the-path.folded

In the Chrome/Perfetto view, each process and thread is a track with its scheduler states
as slices and its page fills as instant events; each disk is a track of its block requests;
\"coldstart analysis\" holds the phases, the critical path and the marks. Times are
microseconds since the start of the recording. CSV times are nanoseconds.")]
pub struct Args {
    /// The trace file (from `coldstart record` or `coldstart import`).
    pub trace: PathBuf,
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
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
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
    let trace = Trace::read(&args.trace).context("cannot read the trace")?;
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
