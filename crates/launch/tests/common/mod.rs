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
