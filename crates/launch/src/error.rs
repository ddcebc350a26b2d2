//! Errors of starting, watching and ending a command. Each says which command or
//! which system file it concerns, in a sentence a user can act on.

use std::path::PathBuf;

pub type Result<T, E = LaunchError> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error("no command given")]
    EmptyCommand,
    #[error("cannot find `{program}` in PATH")]
    NotFound { program: String },
    #[error("cannot run `{program}`: {what} failed")]
    Exec { program: String, what: &'static str, source: std::io::Error },
    #[error("cannot start `{program}`")]
    Spawn { program: String, source: std::io::Error },
    #[error("cannot run the command as {user}: {reason}")]
    User { user: String, reason: String },
    #[error("cannot run the command as {user}")]
    UserLookup { user: String, source: std::io::Error },
    #[error("cannot run the command as {user}: cannot list its groups")]
    UserGroups { user: String, source: std::io::Error },
    #[error("{}", path.display())]
    File { path: PathBuf, source: std::io::Error },
    #[error("{what}")]
    Io { what: &'static str, source: std::io::Error },
    #[error("invalid readiness condition {text:?}: {reason}")]
    BadUntil { text: String, reason: String },
    #[error("invalid mark name {0:?}: a mark name is one line of text without tabs")]
    BadMarkName(String),
    #[error("readiness `{0}` needs the command's output watched (Output::Watch for stdout and stderr)")]
    OutputNotWatched(String),
    #[error("readiness `window`: {0}")]
    Window(String),
    #[error(
        "readiness `window`: WAYLAND_DISPLAY is set and DISPLAY is not, and under Wayland a client cannot \
         see other clients' windows; wait for a mark (mark:NAME) instead"
    )]
    Wayland,
    #[error("readiness `window`: cannot connect to X display {display}")]
    XConnect { display: String, source: x11rb::errors::ConnectError },
    #[error("readiness `window`")]
    X11(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("readiness `unit:{unit}`: {which}")]
    NoManager { unit: String, which: String },
    #[error("readiness `unit:{unit}`: no unit {unit} on {managers} (LoadState not-found)")]
    NoSuchUnit { unit: String, managers: String },
    #[error("cannot ask {manager} about its units")]
    Systemd { manager: String, source: crate::dbus::BusError },
}

impl LaunchError {
    pub(crate) fn io(what: &'static str, source: impl Into<std::io::Error>) -> LaunchError {
        LaunchError::Io { what, source: source.into() }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, source: impl Into<std::io::Error>) -> LaunchError {
        LaunchError::File { path: path.into(), source: source.into() }
    }
}

/// A regex error in one line: the regex crate's own message spans several lines,
/// pointing at the pattern; its last line says what is wrong.
pub(crate) fn regex_error(e: &regex::Error) -> String {
    let text = e.to_string();
    let last = text.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or("");
    format!("not a regular expression: {}", last.strip_prefix("error: ").unwrap_or(last))
}
