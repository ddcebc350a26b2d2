//! Errors of benchmarking, each one sentence a user can act on.

use std::path::PathBuf;

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Launch(#[from] coldstart_launch::LaunchError),
    #[error(transparent)]
    Trace(#[from] coldstart_trace::TraceError),
    #[error("{}: {source}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("--evict system needs root (it writes /proc/sys/vm/drop_caches); use --evict files without root")]
    SystemEvictNeedsRoot,
    #[error("{0}")]
    Eviction(String),
    #[error("cannot learn the files of `{command}`: {reason}")]
    Learn { command: String, reason: String },
    #[error("command `{command}` failed in run {run}: {what} (use --ignore-failure to keep going)")]
    CommandFailed { command: String, run: usize, what: String },
    #[error("baseline {}: {reason}", path.display())]
    Baseline { path: PathBuf, reason: String },
    #[error("export: {0}")]
    Export(String),
    #[error(transparent)]
    Prefetch(#[from] coldstart_prefetch::PrefetchError),
    #[error("a run with prefetch was asked for without a plan (--prefetch PLAN)")]
    NoPrefetchPlan,
}

impl BenchError {
    pub(crate) fn file(path: impl Into<PathBuf>, source: std::io::Error) -> BenchError {
        BenchError::File { path: path.into(), source }
    }
}
