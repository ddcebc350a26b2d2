//! `coldstart run [--prefetch PLAN] -- CMD…`: starts a command with its prefetch
//! plan replayed alongside (or, with `--ahead`, before), waits until it is ready,
//! and reports the time to ready and what the replay did. Exits with the command's
//! status.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_launch::{Command, Ending, Milestone, Output, PausedChild, WaitOptions};
use coldstart_prefetch::{Replay, ReplayReport};
use serde::Serialize;

use crate::cmd::launch_args::{LaunchArgs, reached_by};
use crate::cmd::prefetch::{ReplayArgs, load_plan};

/// Start a command with a prefetch plan replayed alongside it (or before it), and time it.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  coldstart run --prefetch app.plan -- python3 -c 'import pandas'
  coldstart run --prefetch app.plan --ahead -- python3 -c 'import pandas'   # replay first, then start
  coldstart run --prefetch app.plan --depth 4 --report-json r.json -- soffice --headless --convert-to pdf a.txt
  coldstart run -- ./app          # no plan: only the time to ready
  coldstart run --prefetch boot.plan --alongside-mode paced -- ./start   # never queue the start behind the replay

Alongside, the replay and the command start together; the replay goes in the plan's
order (by first need by default), so what the program needs first arrives first, on 4
threads unless --depth says otherwise (few requests in flight, so the program's own reads
do not wait behind a deep replay), and it stops when the command is ready. On a disk that
serves requests first in, first out (elevator none or kyber, a blk-throttle or io.max read
limit) the replay is paced instead (--alongside-mode auto): first-need order, two reads in
flight, giving way while the disk is queued deeper; the summary says what was detected. The replay runs in this process, so it shares the
command's cgroup (and any I/O limit on it). The command's output is its own; the report
goes to stderr. Exit status: the command's (128 + signal if killed), 2 on an error of
coldstart.")]
pub struct Args {
    /// The prefetch plan to replay.
    #[arg(long, value_name = "PLAN")]
    pub prefetch: Option<PathBuf>,
    /// Replay the whole plan first, then start the command.
    #[arg(long, requires = "prefetch")]
    pub ahead: bool,
    #[command(flatten)]
    pub replay: ReplayArgs,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Write the time to ready and the replay report as JSON.
    #[arg(long, value_name = "FILE")]
    pub report_json: Option<PathBuf>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
    /// The command and its arguments.
    #[arg(last = true, required = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// The JSON of `--report-json`. Times in seconds.
#[derive(Serialize)]
struct RunReport {
    command: Vec<String>,
    /// `alongside`, `ahead` or `none`.
    prefetch: &'static str,
    /// From the command's start to readiness.
    time_s: f64,
    ready: coldstart_launch::Reason,
    /// The process and thread that reached readiness, when known.
    ready_pid: Option<i32>,
    ready_tid: Option<i32>,
    /// Each condition met, by time.
    milestones: Vec<MilestoneReport>,
    met: bool,
    exit_code: Option<i32>,
    /// For `ahead`: the replay before the start.
    ahead_s: Option<f64>,
    /// For `alongside`: whether the replay had finished when the command was ready.
    replay_done_before_ready: Option<bool>,
    replay: Option<ReplayReport>,
}

/// A condition met, in `--report-json`.
#[derive(Serialize)]
struct MilestoneReport {
    reason: coldstart_launch::Reason,
    /// From the command's start.
    time_s: f64,
    pid: Option<i32>,
    tid: Option<i32>,
}

impl MilestoneReport {
    fn new(m: &Milestone, started_ns: i64) -> MilestoneReport {
        let time_s = (m.t_ns - started_ns).max(0) as f64 / 1e9;
        MilestoneReport { reason: m.reason.clone(), time_s, pid: m.pid, tid: m.tid }
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let until = &args.launch.until;
    let plan = args.prefetch.as_deref().map(load_plan).transpose()?;
    let options = match &plan {
        Some(plan) => args.replay.options_for(plan.settings.order),
        None => args.replay.options(),
    };
    let mut command = Command::new(args.command.clone());
    let watched = Output::Watch { echo: true };
    let output = if args.launch.watches_output() { watched } else { Output::Inherit };
    command.stdout(output).stderr(output).run_as(args.launch.run_as());

    let mut ahead = None;
    if let (Some(plan), true) = (&plan, args.ahead) {
        let report = coldstart_prefetch::replay(plan.clone(), &options)?;
        ahead = Some(report);
    }
    let paused = PausedChild::spawn(&command)?;
    let replay = match (&plan, args.ahead) {
        (Some(plan), false) => Some(Replay::start(plan.clone(), &options)?),
        _ => None,
    };
    let mut running = paused.resume()?;
    let wait = WaitOptions { timeout: args.launch.timeout, ..WaitOptions::default() };
    let outcome = running.wait_all(until, &wait);
    let done_before_ready = replay.as_ref().map(Replay::is_finished);
    if let Some(r) = &replay {
        r.cancel();
    }
    let finished = running.finish(&Ending::default());
    let alongside = replay.map(Replay::join);
    let outcome = outcome?;
    let finished = finished?;

    let exit_code = outcome.exit_status.or(finished.exit_status);
    let report = RunReport {
        command: args.command.clone(),
        prefetch: match (&plan, args.ahead) {
            (None, _) => "none",
            (Some(_), true) => "ahead",
            (Some(_), false) => "alongside",
        },
        time_s: outcome.time_to_ready().as_secs_f64(),
        ready: outcome.reason.clone(),
        ready_pid: outcome.pid,
        ready_tid: outcome.tid,
        milestones: outcome.milestones.iter().map(|m| MilestoneReport::new(m, outcome.started_ns)).collect(),
        met: outcome.met,
        exit_code,
        ahead_s: ahead.as_ref().map(|r| r.elapsed_s),
        replay_done_before_ready: done_before_ready,
        replay: ahead.or(alongside),
    };
    if !args.quiet {
        eprintln!(
            "coldstart: {} ready after {:.3} s ({}{}), prefetch {}",
            args.command.first().map_or("", String::as_str),
            report.time_s,
            report.ready,
            reached_by(report.ready_pid, report.ready_tid),
            report.prefetch
        );
        if report.milestones.len() > 1 {
            for m in &report.milestones {
                eprintln!("  milestone {:.3} s {}{}", m.time_s, m.reason, reached_by(m.pid, m.tid));
            }
        }
        if let Some(r) = &report.replay {
            eprint!("{}", coldstart_prefetch::summary::render(r));
        }
    }
    if let Some(path) = &args.report_json {
        std::fs::write(path, serde_json::to_string_pretty(&report)? + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(ExitCode::from(exit_code.unwrap_or(0).clamp(0, 255) as u8))
}
