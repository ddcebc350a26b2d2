//! `coldstart reads FILE`: the I/O log of a trace — coalesced reads one per line,
//! or files and processes ranked by separate (non-contiguous) reads.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_analyze::{RankBy, ReadFilter};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ByArg {
    File,
    Process,
}

/// Show the reads of a trace: page-cache fills of each process and file merged into
/// read operations of contiguous pages, and rankings by separate reads (seeks).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart reads app.coldstart                      # files with most separate reads
  coldstart reads app.coldstart --by process --top 5
  coldstart reads app.coldstart --raw --file libfoo  # every read of files matching libfoo
  coldstart reads app.coldstart --raw --pid 4242

A read is a run of page fills of one file by one process, each starting where the
previous one ended; a seek is a read that does not continue where the process's
previous read of that file ended. Sizes are in binary units (KiB = 1024 bytes).")]
pub struct Args {
    /// The trace file.
    pub trace: PathBuf,
    /// List every coalesced read, one per line, in time order.
    #[arg(long, conflicts_with_all = ["by", "top"])]
    pub raw: bool,
    /// Rank files or processes by their number of separate reads.
    #[arg(long, value_enum, default_value = "file")]
    pub by: ByArg,
    /// How many rows of the ranking to show.
    #[arg(long, default_value_t = 20, value_name = "N")]
    pub top: usize,
    /// Only reads by this process.
    #[arg(long, value_name = "PID")]
    pub pid: Option<i32>,
    /// Only reads of files whose path contains this string.
    #[arg(long, value_name = "SUBSTR")]
    pub file: Option<String>,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trace = super::read_trace(&args.trace)?;
    let analysis = coldstart_analyze::analyze(&trace);
    drop(trace);
    let filter = ReadFilter { pid: args.pid, path_contains: args.file };
    let mut out = super::output(args.output.as_ref())?;
    let written = if args.raw {
        coldstart_report::text::reads(&analysis, &filter, &mut out)
    } else {
        let by = match args.by {
            ByArg::File => RankBy::File,
            ByArg::Process => RankBy::Process,
        };
        coldstart_report::text::ranking(&analysis, by, &filter, args.top, &mut out)
    };
    written.and_then(|()| out.flush()).context("cannot write the reads")?;
    for w in &analysis.warnings {
        eprintln!("coldstart: warning: {}", w.message);
    }
    Ok(ExitCode::SUCCESS)
}
