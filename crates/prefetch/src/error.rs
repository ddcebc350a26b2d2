//! Errors of planning and replaying, each a sentence a user can act on.

use std::path::{Path, PathBuf};

pub type Result<T, E = PrefetchError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum PrefetchError {
    #[error("{}", path.display())]
    File { path: PathBuf, source: std::io::Error },

    #[error("{} is not a usable prefetch plan: {reason}", path.display())]
    BadPlan { path: PathBuf, reason: String },

    #[error("{} is not a usable prefetch plan", path.display())]
    PlanJson { path: PathBuf, source: serde_json::Error },

    #[error(
        "{} is a prefetch plan of format version {version}, newer than this coldstart understands (version {}): \
         use a newer coldstart, or make the plan again with this one (`coldstart prefetch plan TRACE -o PLAN`)",
        path.display(),
        crate::plan::VERSION
    )]
    NewerPlan { path: PathBuf, version: u32 },

    #[error(
        "the trace has nothing to plan: no page of a regular file with a known path entered the page cache \
         (was the start recorded cold? `coldstart record --cold -- CMD`)"
    )]
    NothingToPlan,

    /// A plan from a fleet's dataset cannot be made (the sentence says why).
    #[error("{0}")]
    Fleet(String),

    #[error("cannot start the replay threads")]
    Threads(#[source] std::io::Error),

    #[error("cannot set the I/O priority {priority}")]
    IoPriority { priority: String, source: std::io::Error },
}

impl PrefetchError {
    pub fn file(path: impl AsRef<Path>, source: std::io::Error) -> PrefetchError {
        PrefetchError::File { path: path.as_ref().to_owned(), source }
    }
}
