//! The order of runs and the loop that performs them. Runs are interleaved (a
//! round runs every configuration once: A B A B …) so that drift of the machine
//! falls on all configurations alike, and a command's warm run follows its own cold
//! run, which leaves its files cached.

use std::collections::HashMap;

use serde::Serialize;

use crate::config::{BenchConfig, Cache, Hook};
use crate::error::{BenchError, Result};
use crate::executor::{Executor, HookOutcome, Run};
use crate::result::{BenchResults, CommandPreparation, ConfigResult, PlanInfo, SCHEMA, comparisons};

/// What a step's run is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Unmeasured warm run before the rounds.
    Warmup,
    /// Measured, then dropped (`--discard-first`).
    Discard,
    Measure,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub command: usize,
    pub cache: Cache,
    pub kind: StepKind,
    /// Round number, 0-based (warm-ups have their own rounds).
    pub round: usize,
}

/// Every run of the benchmark, in order.
pub fn plan(config: &BenchConfig) -> Vec<Step> {
    let mut steps = Vec::new();
    for round in 0..config.warmup {
        for command in 0..config.commands.len() {
            steps.push(Step { command, cache: Cache::Warm, kind: StepKind::Warmup, round });
        }
    }
    let rounds = config.runs + usize::from(config.discard_first);
    for round in 0..rounds {
        let kind = if config.discard_first && round == 0 { StepKind::Discard } else { StepKind::Measure };
        for (command, cache) in config.configurations() {
            steps.push(Step { command, cache, kind, round });
        }
    }
    steps
}

/// Told about each step, to draw a progress bar.
pub trait Progress {
    fn begin(&mut self, total: usize);
    fn step(&mut self, done: usize, step: &Step, label: &str);
    fn end(&mut self);
}

/// No progress display.
pub struct Silent;

impl Progress for Silent {
    fn begin(&mut self, _total: usize) {}
    fn step(&mut self, _done: usize, _step: &Step, _label: &str) {}
    fn end(&mut self) {}
}

fn failure(run: &Run) -> String {
    if !run.met {
        format!("readiness not reached (the wait ended by {})", run.ready)
    } else {
        format!("exit status {}", run.exit_code.unwrap_or(-1))
    }
}

/// Which run a step is, for messages: ``warm-up run 1 of `app` ``, ``run 3 of `app (cold, plan a ahead)` ``.
fn step_name(config: &BenchConfig, step: &Step) -> String {
    let kind = match step.kind {
        StepKind::Warmup => "warm-up run",
        StepKind::Discard => "discarded run",
        StepKind::Measure => "run",
    };
    format!("{kind} {} of `{}`", step.round + 1, config.label(step.command, step.cache))
}

/// Runs the `hook` of the step's command, if it has one; a failure stops the benchmark.
/// Returns false when an interruption stopped it.
fn hook(config: &BenchConfig, executor: &mut dyn Executor, hook: Hook, step: &Step) -> Result<bool> {
    let command = &config.commands[step.command];
    if command.hook(hook).is_none() {
        return Ok(true);
    }
    match executor.hook(hook, step.command, command)? {
        HookOutcome::Done => Ok(true),
        HookOutcome::Interrupted => Ok(false),
        HookOutcome::Failed(what) => {
            let when = match hook {
                Hook::Prepare => format!("before {}", step_name(config, step)),
                Hook::Conclude => format!("after {}", step_name(config, step)),
            };
            Err(crate::hooks::failed(hook, command, &when, what))
        }
    }
}

/// One step: the command's `--prepare`, the run, its `--conclude` (not after a run
/// that was interrupted). `None` when an interruption came during a hook.
fn perform(config: &BenchConfig, executor: &mut dyn Executor, step: &Step) -> Result<Option<Run>> {
    if !hook(config, executor, Hook::Prepare, step)? {
        return Ok(None);
    }
    let run = executor.run(step.command, &config.commands[step.command], step.cache)?;
    if !run.interrupted && !hook(config, executor, Hook::Conclude, step)? {
        return Ok(None);
    }
    Ok(Some(run))
}

/// Asks the executor to prepare every command (e.g. learn its file set).
fn prepare_commands(config: &BenchConfig, executor: &mut dyn Executor) -> Result<Vec<CommandPreparation>> {
    let mut preparations = Vec::new();
    for (index, command) in config.commands.iter().enumerate() {
        let preparation = executor.prepare(index, command)?;
        preparations.push(CommandPreparation {
            command: command.name.clone(),
            command_line: command.argv.clone(),
            prepare: command.prepare.clone(),
            conclude: command.conclude.clone(),
            preparation,
        });
    }
    Ok(preparations)
}

/// The measured runs of each configuration, the runs dropped, and whether an
/// interruption stopped them.
#[derive(Default)]
struct Measured {
    runs: HashMap<(usize, Cache), Vec<Run>>,
    discarded: HashMap<(usize, Cache), usize>,
    interrupted: bool,
}

/// Performs every step of the plan, in order.
fn measure(
    config: &BenchConfig,
    executor: &mut dyn Executor,
    progress: &mut dyn Progress,
) -> Result<Measured> {
    let steps = plan(config);
    let mut measured = Measured::default();
    progress.begin(steps.len());
    for (done, step) in steps.iter().enumerate() {
        if executor.interrupted() {
            measured.interrupted = true;
            break;
        }
        progress.step(done, step, &config.label(step.command, step.cache));
        let run = match perform(config, executor, step) {
            Ok(Some(run)) => run,
            Ok(None) => {
                measured.interrupted = true;
                break;
            }
            Err(err) => {
                progress.end();
                return Err(err);
            }
        };
        if run.interrupted {
            measured.interrupted = true;
            break;
        }
        if run.failed() && !config.ignore_failure {
            progress.end();
            return Err(BenchError::CommandFailed {
                command: config.commands[step.command].name.clone(),
                run: step.round + 1,
                what: failure(&run),
            });
        }
        let key = (step.command, step.cache);
        match step.kind {
            StepKind::Warmup => {}
            StepKind::Discard => *measured.discarded.entry(key).or_default() += 1,
            StepKind::Measure => measured.runs.entry(key).or_default().push(run),
        }
    }
    progress.end();
    Ok(measured)
}

/// Prepares every command, performs the plan and computes the results. Stops early
/// (with `interrupted` set and the results so far) on SIGINT/SIGTERM.
pub fn run_benchmark(
    config: &BenchConfig,
    executor: &mut dyn Executor,
    progress: &mut dyn Progress,
) -> Result<BenchResults> {
    let preparations = prepare_commands(config, executor)?;
    let Measured { runs, discarded, interrupted } = measure(config, executor, progress)?;
    let keys: Vec<(usize, Cache)> =
        config.configurations().into_iter().filter(|k| runs.contains_key(k)).collect();
    let results: Vec<ConfigResult> = keys
        .iter()
        .map(|&(command, cache)| {
            let d = discarded.get(&(command, cache)).copied().unwrap_or(0);
            ConfigResult::build(config, command, cache, &runs[&(command, cache)], d)
        })
        .collect();
    let sources = executor.sources();
    let outside = crate::outside::totals(keys.iter().flat_map(|k| &runs[k]).map(|r| r.outside.as_slice()));
    Ok(BenchResults {
        schema: SCHEMA.into(),
        comparisons: comparisons(config, &results, &keys),
        results,
        preparations,
        plans: config.prefetch.iter().map(PlanInfo::of).collect(),
        outside,
        read_bytes_source: sources.read_bytes,
        io_wait_source: sources.io_wait,
        notes: sources.notes,
        interrupted,
    })
}
