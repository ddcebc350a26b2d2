//! `--prepare CMD` and `--conclude CMD`: a shell command run before and after each
//! run of a command, outside the timing, as hyperfine's options of the same names:
//! through `/bin/sh -c`, as the user the benchmarked command runs as (the sudo
//! invoker under sudo), its output discarded unless `--show-output`. The prepare
//! command runs before the run's eviction, so what it writes (a fresh copy of a
//! profile) is evicted like the rest. Whatever it leaves running is ended with it, as
//! the command's own tree is, so that no leftover process runs beside a measured start.

use coldstart_launch::{Command, Input, Output, PausedChild, Until, WaitOptions};

use crate::config::{BenchCommand, BenchConfig, Hook};
use crate::error::{BenchError, Result};
use crate::executor::HookOutcome;
use crate::fileset::{self, FileSet};

/// Runs `line` with `/bin/sh -c` as `config` runs its commands, and waits for it (at
/// most the benchmark's timeout per run).
pub fn run_shell(line: &str, config: &BenchConfig) -> Result<HookOutcome> {
    let mut command = Command::new(["/bin/sh", "-c", line]);
    let output = if config.show_output { Output::Inherit } else { Output::Null };
    command.run_as(config.run_as.clone()).stdin(Input::Null).stdout(output).stderr(output);
    let mut running = PausedChild::spawn(&command)?.resume()?;
    let options = WaitOptions { timeout: Some(config.timeout), ..WaitOptions::default() };
    let outcome = running.wait(&Until::Exit, &options);
    let finished = running.finish(&config.ending)?;
    let outcome = outcome?;
    Ok(match finished.exit_status.or(outcome.exit_status) {
        _ if outcome.signal.is_some() => HookOutcome::Interrupted,
        _ if !outcome.met => HookOutcome::Failed(format!(
            "still running after {} (ended)",
            coldstart_analyze::units::TimeSpan(config.timeout)
        )),
        Some(0) => HookOutcome::Done,
        Some(code) => HookOutcome::Failed(format!("exit status {code}")),
        None => HookOutcome::Failed("no exit status".into()),
    })
}

/// Runs `command`'s `hook`, if it has one; a failure is an error saying `when`.
pub fn run_hook(hook: Hook, command: &BenchCommand, config: &BenchConfig, when: &str) -> Result<()> {
    let Some(line) = command.hook(hook) else { return Ok(()) };
    match run_shell(line, config)? {
        HookOutcome::Done => Ok(()),
        HookOutcome::Failed(what) => Err(failed(hook, command, when, what)),
        HookOutcome::Interrupted => Err(failed(hook, command, when, "interrupted".into())),
    }
}

/// The error of a failed hook.
pub fn failed(hook: Hook, command: &BenchCommand, when: &str, what: String) -> BenchError {
    BenchError::HookFailed {
        hook,
        command: command.name.clone(),
        line: command.hook(hook).unwrap_or_default().to_owned(),
        when: when.to_owned(),
        what,
    }
}

/// Learns `command`'s file set by a first run ([`fileset::learn`]), with its
/// `--prepare` before and `--conclude` after, as around every run: the first run
/// should find the state the measured ones find.
pub fn learn_with_hooks(command: &BenchCommand, config: &BenchConfig) -> Result<FileSet> {
    run_hook(Hook::Prepare, command, config, "before the run that learns its files")?;
    let set = fileset::learn(&command.argv, &config.run_as, &config.until, config.timeout)?;
    run_hook(Hook::Conclude, command, config, "after the run that learns its files")?;
    Ok(set)
}
