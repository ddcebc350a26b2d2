//! The [`Executor`] trait: what the scheduler asks of the thing that really runs
//! commands, so that the scheduler and the statistics can be tested with a mock
//! (deterministic timings) instead of real processes.

use serde::{Deserialize, Serialize};

use coldstart_launch::Reason;

use crate::config::{BenchCommand, Cache, Hook};
use crate::error::Result;
use crate::outside::OutsideProcess;

/// Everything measured in one run. Times in seconds, sizes in bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Seconds from the start of the command to readiness.
    pub time: f64,
    /// Why the wait ended.
    pub ready: Reason,
    /// True when `ready` is the readiness condition asked for.
    pub met: bool,
    /// Exit status of the command (128 + signal if a signal killed it), when it exited
    /// before it was ended.
    pub exit_code: Option<i32>,
    /// User CPU seconds of the whole process tree.
    pub user: f64,
    /// System CPU seconds of the whole process tree.
    pub system: f64,
    /// Major page faults (pages read from disk on a fault) of the whole tree.
    pub major_faults: u64,
    /// Bytes read from disk during the run (see [`crate::BenchResults::read_bytes_source`]).
    pub read_bytes: Option<u64>,
    /// Seconds the tree's threads waited for block I/O (see [`crate::BenchResults::io_wait_source`]).
    pub io_wait: Option<f64>,
    /// Fraction of all CPUs' time spent outside the command's tree during the run
    /// (other load on the machine).
    pub other_cpu: Option<f64>,
    /// The processes outside the command's tree that used the CPU during the run, most
    /// first, named by command line and parents.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outside: Vec<OutsideProcess>,
    /// For cold runs: bytes of the evicted file set still in the page cache after
    /// eviction, where the kernel reports it truthfully.
    pub residual_bytes: Option<u64>,
    /// True when SIGINT/SIGTERM interrupted this run.
    pub interrupted: bool,
    /// Runs with prefetch: seconds the replay took (for `ahead`, before the start;
    /// for `alongside`, from the start until it finished or was stopped at readiness).
    pub prefetch_time: Option<f64>,
    /// Runs with prefetch: bytes the replay brought into the page cache.
    pub prefetch_fetched_bytes: Option<u64>,
    /// Runs with prefetch alongside: whether the replay had finished when the command was ready.
    pub prefetch_done_before_ready: Option<bool>,
}

impl Run {
    /// A run that did not do what was asked: readiness not reached, or a non-zero exit.
    pub fn failed(&self) -> bool {
        !self.met || self.exit_code.is_some_and(|c| c != 0)
    }
}

/// What an executor found out about a command before its runs (shown to the user
/// and exported).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Preparation {
    /// Files that `--evict files` evicts, and their total size.
    pub files: usize,
    pub file_bytes: u64,
    /// How the file set was obtained, e.g. `trace app.coldstart`, `learned with strace`.
    pub file_source: Option<String>,
    /// Things the user should know, e.g. what the file set may miss.
    pub notes: Vec<String>,
}

/// Runs commands for the scheduler.
pub trait Executor {
    /// Called once per command before any run (e.g. to learn its file set).
    fn prepare(&mut self, index: usize, command: &BenchCommand) -> Result<Preparation>;

    /// One run of `command` in `cache` state (evicting first for cold runs).
    fn run(&mut self, index: usize, command: &BenchCommand, cache: Cache) -> Result<Run>;

    /// Runs `command`'s `--prepare` or `--conclude` shell command once (the scheduler
    /// calls it before and after each run of a command that has one).
    fn hook(&mut self, hook: Hook, index: usize, command: &BenchCommand) -> Result<HookOutcome>;

    /// True once the user asked us to stop (SIGINT/SIGTERM between runs).
    fn interrupted(&mut self) -> bool {
        false
    }

    /// Where the counters come from and what the user should know about them.
    fn sources(&self) -> Sources {
        Sources::default()
    }
}

/// How a `--prepare` or `--conclude` command ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HookOutcome {
    Done,
    /// It failed: how (`exit status 1`, `still running after 10 min`).
    Failed(String),
    /// SIGINT or SIGTERM came while it ran: the benchmark stops with the results so far.
    Interrupted,
}

/// How an executor measures, for the notes of the results.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Sources {
    pub read_bytes: String,
    pub io_wait: String,
    pub notes: Vec<String>,
}
