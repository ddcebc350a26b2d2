//! Errors of the importers. Each names the input and, for a parse error, the file
//! and line it concerns.

use std::path::PathBuf;

pub type Result<T, E = ImportError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{}: cannot read it as a tar archive (plain or gzip-compressed)", path.display())]
    Archive { path: PathBuf, source: std::io::Error },
    #[error(
        "{}: not a bootchart2 log: {file} is missing (expected a folder or a .tgz holding header, \
         proc_stat.log, proc_diskstats.log and proc_ps.log)",
        path.display()
    )]
    Missing { path: PathBuf, file: &'static str },
    /// `location` is `FILE:LINE` (or `FILE: record N` for binary files).
    #[error("{location}: {message}")]
    Parse { location: String, message: String },
}
