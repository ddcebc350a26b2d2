//! A deterministic [`Executor`] for tests: times come from fixed sequences, and
//! every call is logged against a clock of its own (a run takes its time, a hook
//! [`HOOK_SECONDS`]), so the scheduler, statistics and exports can be checked
//! against known answers without running anything.

use std::collections::HashMap;

use coldstart_launch::Reason;

use crate::config::{BenchCommand, Cache, Hook};
use crate::error::Result;
use crate::executor::{Executor, HookOutcome, Preparation, Run, Sources};
use crate::outside::OutsideProcess;

/// How long a `--prepare` or `--conclude` takes on the mock's clock.
pub const HOOK_SECONDS: f64 = 0.001;

/// A `--prepare` or `--conclude` the mock ran.
#[derive(Clone, Debug, PartialEq)]
pub struct HookCall {
    pub hook: Hook,
    pub command: usize,
    pub line: String,
    /// When it started, on the mock's clock.
    pub at: f64,
}

#[derive(Debug, Default)]
pub struct MockExecutor {
    /// Times per (command, cache state), used in order and cycled.
    pub times: HashMap<(usize, Cache), Vec<f64>>,
    /// Every run asked for, in order.
    pub log: Vec<(usize, Cache)>,
    /// When each run of `log` started, on the mock's clock.
    pub starts: Vec<f64>,
    /// Every hook run, in order.
    pub hooks: Vec<HookCall>,
    /// The hook call with this 0-based number fails with exit status 1.
    pub fail_hook: Option<usize>,
    /// The hook call with this 0-based number is interrupted (SIGINT while it runs).
    pub interrupt_hook: Option<usize>,
    /// The outside processes every run reports.
    pub outside: Vec<OutsideProcess>,
    /// The share of the CPUs that worked outside the command in every run (default 1%).
    pub other_cpu: Option<f64>,
    /// The mock's clock, seconds.
    pub clock: f64,
    /// Report an interruption before this many runs have been done.
    pub interrupt_after: Option<usize>,
    /// Make the run with this 0-based number exit with status 1.
    pub fail_run: Option<usize>,
    /// How many times of each sequence have been used.
    pub used: HashMap<(usize, Cache), usize>,
}

impl MockExecutor {
    pub fn with_times(times: impl IntoIterator<Item = ((usize, Cache), Vec<f64>)>) -> MockExecutor {
        MockExecutor { times: times.into_iter().collect(), ..MockExecutor::default() }
    }
}

impl Executor for MockExecutor {
    fn prepare(&mut self, index: usize, _command: &BenchCommand) -> Result<Preparation> {
        Ok(Preparation {
            files: 10 + index,
            file_bytes: 1 << 20,
            file_source: Some("mock".into()),
            notes: vec![],
        })
    }

    fn run(&mut self, index: usize, _command: &BenchCommand, cache: Cache) -> Result<Run> {
        let n = self.log.len();
        self.log.push((index, cache));
        let used = self.used.entry((index, cache)).or_default();
        let sequence = self.times.get(&(index, cache)).cloned().unwrap_or_else(|| vec![1.0]);
        let time = sequence[*used % sequence.len()];
        *used += 1;
        self.starts.push(self.clock);
        self.clock += time;
        let cold = cache.is_cold();
        Ok(Run {
            time,
            ready: Reason::Exit,
            met: true,
            exit_code: Some(if self.fail_run == Some(n) { 1 } else { 0 }),
            user: time / 2.0,
            system: time / 10.0,
            major_faults: if cold { 1000 } else { 0 },
            read_bytes: Some(if cold { 50_000_000 } else { 0 }),
            io_wait: Some(if cold { time / 3.0 } else { 0.0 }),
            other_cpu: Some(self.other_cpu.unwrap_or(0.01)),
            outside: self.outside.clone(),
            residual_bytes: cold.then_some(0),
            interrupted: false,
            prefetch_time: cache.prefetch().map(|_| 0.25),
            prefetch_fetched_bytes: cache.prefetch().map(|_| 40_000_000),
            prefetch_done_before_ready: cache.prefetch().map(|p| p == "ahead"),
        })
    }

    fn hook(&mut self, hook: Hook, index: usize, command: &BenchCommand) -> Result<HookOutcome> {
        let number = self.hooks.len();
        let line = command.hook(hook).unwrap_or_default().to_owned();
        self.hooks.push(HookCall { hook, command: index, line, at: self.clock });
        self.clock += HOOK_SECONDS;
        Ok(if self.fail_hook == Some(number) {
            HookOutcome::Failed("exit status 1".into())
        } else if self.interrupt_hook == Some(number) {
            HookOutcome::Interrupted
        } else {
            HookOutcome::Done
        })
    }

    fn interrupted(&mut self) -> bool {
        self.interrupt_after.is_some_and(|n| self.log.len() >= n)
    }

    fn sources(&self) -> Sources {
        Sources { read_bytes: "mock".into(), io_wait: "mock".into(), notes: vec!["mock executor".into()] }
    }
}
