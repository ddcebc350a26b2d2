//! The order of runs and the loop that performs them. Runs are interleaved (a
//! round runs every configuration once: A B A B …) so that drift of the machine
//! falls on all configurations alike, and a command's warm run follows its own cold
//! run, which leaves its files cached.

use std::collections::HashMap;

use serde::Serialize;

use crate::config::{BenchConfig, Cache};
use crate::error::{BenchError, Result};
use crate::executor::{Executor, Run};
use crate::result::{BenchResults, CommandPreparation, ConfigResult, SCHEMA, comparisons};

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

/// Prepares every command, performs the plan and computes the results. Stops early
/// (with `interrupted` set and the results so far) on SIGINT/SIGTERM.
pub fn run_benchmark(
    config: &BenchConfig,
    executor: &mut dyn Executor,
    progress: &mut dyn Progress,
) -> Result<BenchResults> {
    let mut preparations = Vec::new();
    for (index, command) in config.commands.iter().enumerate() {
        let preparation = executor.prepare(index, command)?;
        preparations.push(CommandPreparation {
            command: command.name.clone(),
            command_line: command.argv.clone(),
            preparation,
        });
    }
    let steps = plan(config);
    let mut runs: HashMap<(usize, Cache), Vec<Run>> = HashMap::new();
    let mut discarded: HashMap<(usize, Cache), usize> = HashMap::new();
    let mut interrupted = false;
    progress.begin(steps.len());
    for (done, step) in steps.iter().enumerate() {
        if executor.interrupted() {
            interrupted = true;
            break;
        }
        progress.step(done, step, &config.label(step.command, step.cache));
        let run = executor.run(step.command, &config.commands[step.command], step.cache)?;
        if run.interrupted {
            interrupted = true;
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
        match step.kind {
            StepKind::Warmup => {}
            StepKind::Discard => *discarded.entry((step.command, step.cache)).or_default() += 1,
            StepKind::Measure => runs.entry((step.command, step.cache)).or_default().push(run),
        }
    }
    progress.end();
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
    Ok(BenchResults {
        schema: SCHEMA.into(),
        comparisons: comparisons(config, &results, &keys),
        results,
        preparations,
        read_bytes_source: sources.read_bytes,
        io_wait_source: sources.io_wait,
        notes: sources.notes,
        interrupted,
    })
}
