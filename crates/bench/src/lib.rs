//! `coldstart bench`: cold and warm starts measured right, with or without root.
//!
//! Shaped like hyperfine: a [`scheduler`] decides the order of runs (interleaved
//! rounds, warm-ups, discarded first runs) and drives an [`Executor`]: the
//! [`RealExecutor`] (eviction, launch, readiness, counters) or the [`MockExecutor`]
//! (deterministic timings, for tests). [`stats`] computes summaries, outliers and
//! comparisons; [`result`] is the JSON contract (times in seconds, sizes in bytes);
//! [`export`] writes JSON, Markdown and CSV; [`baseline`] checks for regressions;
//! [`summary`] renders the terminal report.
//!
//! Cold runs empty the page cache first ([`evict`]): `system` (drop_caches, root) or
//! `files` (fadvise DONTNEED on the command's file set, any user, from a trace, a
//! list, or learned by a first run: [`fileset`]). Starting, readiness and ending
//! the process tree are the launch crate's (`coldstart_launch`), shared with `record`.
//!
//! Around each run, a command's `--prepare` and `--conclude` shell commands ([`hooks`])
//! give every run the same starting state (a fresh profile); [`outside`] names the
//! processes outside the benchmark that used the CPU during the runs.

pub mod baseline;
pub mod boot_service;
pub mod config;
pub mod counters;
mod error;
pub mod evict;
pub mod executor;
pub mod export;
pub mod fileset;
pub mod hooks;
pub mod mock;
pub mod outside;
mod real;
pub mod result;
pub mod scheduler;
pub mod stats;
pub mod summary;
mod sys;

pub use config::{
    AfterEviction, BenchCommand, BenchConfig, Cache, Evict, EvictChoice, FileSource, Hook, Modes,
    PrefetchSetup,
};
pub use error::{BenchError, Result};
pub use executor::{Executor, HookOutcome, Preparation, Run, Sources};
pub use mock::{HookCall, MockExecutor};
pub use real::RealExecutor;
pub use result::{BenchResults, Comparison, ConfigResult};
pub use scheduler::{Progress, Silent, Step, StepKind, plan, run_benchmark};
