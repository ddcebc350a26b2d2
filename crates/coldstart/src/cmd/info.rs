//! `coldstart info FILE`: what a trace file holds, at a glance (its origin, the
//! command, and how many rows each table has), without analysing it.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::ExitCode;

/// Show what a trace file holds: where it came from, the command, row counts and losses.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  coldstart info app.coldstart")]
pub struct Args {
    /// The trace file.
    pub trace: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trace = super::read_trace(&args.trace)?;
    let m = &trace.meta;
    println!("trace      {}", args.trace.display());
    println!("written by {} ({:?}){}", m.tool, m.source, if m.partial { ", PARTIAL" } else { "" });
    println!("command    {}", m.command.join(" "));
    println!("host       {} — {}", m.host, m.kernel);
    if let Some(before) = crate::cmd::boot::before_recording_text(&m.before_recording) {
        println!("before recording: {before}");
    }
    println!("duration   {:.3} s", m.duration_ns as f64 / 1e9);
    if let Some(ready) = &m.ready {
        println!("ready      {:.3} s ({})", ready.t_ns as f64 / 1e9, ready.reason);
    }
    let counts = [
        ("processes", trace.processes.len()),
        ("threads", trace.threads.len()),
        ("files opened or read", trace.files.len()),
        ("files read from disk", trace.page_fills.iter().map(|f| f.file_id).collect::<HashSet<_>>().len()),
        ("page fills", trace.page_fills.len()),
        ("block requests", trace.block_ios.len()),
        ("sched intervals", trace.sched.len()),
        ("marks", trace.marks.len()),
        ("cpu samples", trace.cpu_samples.len()),
        ("stack samples", trace.stack_samples.len()),
        ("off-CPU stacks", trace.off_cpu_samples.len()),
    ];
    for (what, n) in counts {
        println!("{what:<20} {n}");
    }
    let lost: Vec<_> = trace.losses.iter().filter(|l| l.count > 0).collect();
    if lost.is_empty() {
        println!("lost       nothing");
    }
    for l in lost {
        println!("LOST       {} {} ({})", l.count, l.what, l.source);
    }
    Ok(ExitCode::SUCCESS)
}
