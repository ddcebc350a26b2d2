//! `coldstart syscalls FILE`: the system calls of a trace as a timeline like
//! `strace -f -tt -T`, then totals per call and per directory.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use coldstart_analyze::syscalls::{SyscallFilter, lines, summary};

use super::values;

/// Show the system calls of a trace: each call with the path it named or the file of
/// its fd, its result and the time in it, then totals per call and per directory.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart syscalls app.coldstart                          # timeline, then totals
  coldstart syscalls app.coldstart --summary                # totals only, like strace -c
  coldstart syscalls app.coldstart --syscall statx --syscall newfstatat --path /opt/app
  coldstart syscalls app.coldstart --pid 4242 --min-duration 1ms

Columns: seconds since the start of the recording, [pid] or [pid/tid], the call with
its path (or fd<path>), its result (-1 and the error name for a failure), and the time
in the call in seconds. Recorded: opens, the stat family, access, readlink, exec,
getdents64, file mmaps, the first reads of each file, connect, and waits (futex, poll,
epoll, select, sleeps) longer than 1 ms.")]
pub struct Args {
    /// The trace file.
    pub trace: PathBuf,
    /// Only calls of this process or thread (repeatable).
    #[arg(long, value_name = "PID")]
    pub pid: Vec<i32>,
    /// Only this system call (repeatable): openat, statx, newfstatat, read, futex, …
    #[arg(long, value_name = "NAME", value_parser = values::syscall_name)]
    pub syscall: Vec<String>,
    /// Only calls on paths that start with this prefix.
    #[arg(long, value_name = "PREFIX")]
    pub path: Option<String>,
    /// Only calls that lasted at least this long: 1ms, 0.5s, 200us.
    #[arg(long, value_name = "D", value_parser = values::duration)]
    pub min_duration: Option<Duration>,
    /// Print only the totals per call and per directory.
    #[arg(long)]
    pub summary: bool,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trace = super::read_trace(&args.trace)?;
    if trace.syscalls.is_empty() {
        eprintln!(
            "coldstart: {} holds no system calls (recorded without `coldstart record --syscalls`, by an \
             older coldstart, or imported)",
            args.trace.display()
        );
    }
    let filter = SyscallFilter {
        pids: args.pid,
        names: args.syscall,
        path_prefix: args.path,
        min_duration_ns: args.min_duration.map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
    };
    let end = trace.meta.duration_ns;
    let selected = lines(&trace, &filter);
    let mut out = super::output(args.output.as_ref())?;
    let written = (|| -> std::io::Result<()> {
        if !args.summary {
            coldstart_report::syscalls::timeline(&selected, end, &mut out)?;
            writeln!(out)?;
        }
        coldstart_report::syscalls::summary(&summary(&selected, &trace.mounts, end), &mut out)?;
        out.flush()
    })();
    written.context("cannot write the system calls")?;
    Ok(ExitCode::SUCCESS)
}
