//! Helpers shared by the command-line tests: the binary under test and JSON files;
//! the CI rule and private directories come from `coldstart-testkit`.
#![allow(dead_code, unused_imports)]

use std::path::Path;

use assert_cmd::Command;
pub use coldstart_testkit::{can_record, ci, is_root, unavailable};

pub mod container;
pub mod fleet;

pub fn coldstart() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
}

/// A temporary directory under the target directory (a disk filesystem, not a tmpfs).
pub fn private_dir() -> tempfile::TempDir {
    coldstart_testkit::private_dir!()
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
