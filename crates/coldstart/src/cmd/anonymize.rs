//! `coldstart anonymize TRACE -o OUT`: a copy of a trace without user or host
//! names, to share it (a bug report, a test fixture) without giving them away.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_trace::Trace;

/// Write a copy of a trace with user names (home directories, the recorded user) and
/// the host name replaced, ready to share.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart anonymize app.coldstart -o app-shared.coldstart
  coldstart anonymize app.coldstart -o app-shared.coldstart --force

Every /home/NAME becomes /home/user and the host name becomes `host`, in paths, command
lines, process names and notes. Times, sizes, offsets and the shape of every path are kept,
so the copy analyses exactly like the original. The copy is written with mode 0600.")]
pub struct Args {
    /// The trace to anonymise.
    pub trace: PathBuf,
    /// The anonymised copy to write.
    #[arg(short, long, value_name = "OUT")]
    pub output: PathBuf,
    /// Replace OUT if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(
        args.force || !args.output.exists(),
        "{} exists; pass --force to replace it",
        args.output.display()
    );
    let mut trace = Trace::read(&args.trace).context("cannot read the trace")?;
    let done = coldstart_trace::anonymize(&mut trace);
    trace.write(&args.output).context("cannot write the anonymised trace")?;
    let users = if done.users.is_empty() { "no user names".to_owned() } else { done.users.join(", ") };
    eprintln!(
        "coldstart: wrote {} ({} replaced{}; {} values changed)",
        args.output.display(),
        users,
        if done.host { ", host name replaced" } else { "" },
        done.values_changed
    );
    Ok(ExitCode::SUCCESS)
}
