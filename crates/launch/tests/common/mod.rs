//! Helpers shared by the integration tests.
#![allow(dead_code)]

use coldstart_launch::{Command, Output};

/// `sh -c SCRIPT` with stdout and stderr watched (not echoed).
pub fn sh(script: &str) -> Command {
    let mut command = Command::new(["sh", "-c", script]);
    command.stdout(Output::Watch { echo: false }).stderr(Output::Watch { echo: false });
    command
}

/// True while `pid` is a live (not zombie) process.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Skips (returns true) when a capability is missing, or panics under CI=true.
pub fn skip_without(have: bool, what: &str) -> bool {
    if have {
        return false;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true but {what} is not available");
    }
    eprintln!("skipped: {what} is not available");
    true
}
