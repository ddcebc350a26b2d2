//! Errors of benchmarking, each one sentence a user can act on.

use std::path::PathBuf;

pub type Result<T, E = BenchError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Launch(#[from] coldstart_launch::LaunchError),
    #[error(transparent)]
    Trace(#[from] coldstart_trace::TraceError),
    #[error("{}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("--evict system needs root (it writes /proc/sys/vm/drop_caches); use --evict files without root")]
    SystemEvictNeedsRoot,
    #[error("{0}")]
    Eviction(String),
    #[error("cannot learn the files of `{command}`")]
    Learn { command: String, source: Box<dyn std::error::Error + Send + Sync> },
    #[error("command `{command}` failed in run {run}: {what} (use --ignore-failure to keep going)")]
    CommandFailed { command: String, run: usize, what: String },
    #[error(
        "the {} command `{line}` of `{command}` failed {when}: {what} (the benchmark stops; append ` || true` to \
         it if that failure may be ignored, or see its output with --show-output)",
        hook.option()
    )]
    HookFailed { hook: crate::config::Hook, command: String, line: String, when: String, what: String },
    #[error("baseline {}: {reason}", path.display())]
    Baseline { path: PathBuf, reason: String },
    #[error("baseline {}: not a benchmark JSON export", path.display())]
    BaselineJson { path: PathBuf, source: serde_json::Error },
    #[error("export")]
    Export(#[source] Box<dyn std::error::Error + Send + Sync>),
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
