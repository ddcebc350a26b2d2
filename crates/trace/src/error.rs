//! Errors of reading and writing trace files, each naming the file it concerns, and
//! [`error_chain`], the one way every crate of coldstart writes an error out in full.
//!
//! An error keeps its cause once: as its `source`, never also in its own message.

use std::path::{Path, PathBuf};

pub type Result<T, E = TraceError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}", path.display())]
    Sqlite { path: PathBuf, source: rusqlite::Error },
    #[error(transparent)]
    Row(#[from] rusqlite::Error),
    #[error("{}: not a coldstart trace file", .0.display())]
    NotATrace(PathBuf),
    #[error(
        "{}: trace format version {found} is newer than this coldstart understands (version {supported}); use a newer coldstart",
        path.display()
    )]
    NewerFormat { path: PathBuf, found: i32, supported: i32 },
    #[error("unexpected value in table {table}, column {column}: {value:?}")]
    BadValue { table: &'static str, column: &'static str, value: String },
    #[error("value out of range in table {table}, column {column}: {value} ({allowed})")]
    OutOfRange { table: &'static str, column: &'static str, value: String, allowed: &'static str },
}

/// An error and its causes, joined by ": " (as ripgrep prints them).
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

impl TraceError {
    pub fn io(path: &Path, source: std::io::Error) -> TraceError {
        TraceError::Io { path: path.to_owned(), source }
    }

    pub fn sqlite(path: &Path, source: rusqlite::Error) -> TraceError {
        TraceError::Sqlite { path: path.to_owned(), source }
    }

    /// Names `path` in an error that did not say which file it came from.
    pub fn in_file(self, path: &Path) -> TraceError {
        match self {
            TraceError::Row(source) => TraceError::sqlite(path, source),
            other => other,
        }
    }
}
