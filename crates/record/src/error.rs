//! Errors of recording, each a one-paragraph message that says what is missing
//! and what to do.

use std::path::{Path, PathBuf};

pub type Result<T, E = RecordError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error(
        "recording needs root: the recorder reads the kernel's tracing buffers (tracefs) and watches \
         file opens with fanotify, which only root may do. Run it as `sudo coldstart record -- CMD…`; \
         the command still runs as you (add --as-root to run it as root)."
    )]
    NotRoot,
    #[error(
        "the kernel tracing filesystem (tracefs) is not available: {0}. Recording needs a kernel built \
         with CONFIG_FTRACE and tracefs mounted at /sys/kernel/tracing (`mount -t tracefs nodev \
         /sys/kernel/tracing`); without it, `coldstart bench` still measures start times."
    )]
    NoTracefs(String),
    #[error("tracefs event {0} is missing from this kernel; the recorder needs it ({1})")]
    MissingEvent(String, String),
    #[error("{}", path.display())]
    Io { path: PathBuf, source: std::io::Error },
    /// A system call the recorder depends on failed: `what` names it.
    #[error("{what}")]
    System { what: &'static str, source: std::io::Error },
    #[error("cannot understand a tracefs format description: {0}")]
    Format(String),
    #[error("fanotify: {0}")]
    Fanotify(String),
    /// The eBPF program that copies the names of path system calls could not be set up.
    #[error("eBPF: {0}")]
    Bpf(String),
    #[error(transparent)]
    Trace(#[from] coldstart_trace::TraceError),
    #[error("{0}")]
    Spool(String),
    /// A `--also` that names no running process.
    #[error("--also {spec}: {reason}")]
    BadAlso { spec: String, reason: String },
    /// A spool file that is not the JSON the recorder writes, or a value it could not write.
    #[error("{}: not a spool record coldstart can read or write", path.display())]
    SpoolJson { path: PathBuf, source: serde_json::Error },
    #[error(
        "unsafe spool directory: {0}; a spool must be a real directory that root owns and no one \
         else can write, on a path only root can change (choose one with --spool-dir)"
    )]
    UnsafeSpool(crate::spool::Distrust),
    #[error(
        "the trace was not made; the recording is kept in {} (`coldstart recover {}` tries again)",
        spool.display(),
        spool.display()
    )]
    Kept { spool: PathBuf, source: Box<RecordError> },
    #[error("no command to record (write it after `--`)")]
    NoCommand,
    #[error(transparent)]
    Launch(#[from] coldstart_launch::LaunchError),
}

impl RecordError {
    pub fn io(path: impl AsRef<Path>, source: std::io::Error) -> RecordError {
        RecordError::Io { path: path.as_ref().to_owned(), source }
    }

    pub(crate) fn system(what: &'static str, source: impl Into<std::io::Error>) -> RecordError {
        RecordError::System { what, source: source.into() }
    }
}

/// Attaches a path to io errors.
pub trait IoContext<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T> {
        self.map_err(|e| RecordError::io(path, e))
    }
}
