//! Helpers shared by the command-line tests: the binary under test, the CI rule
//! (a missing capability fails under CI=true, is skipped with a reason elsewhere),
//! private directories on a disk filesystem, JSON files.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use assert_cmd::Command;

pub fn coldstart() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
}

pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Says why `test` cannot run here and returns true (skip), or fails under CI=true.
pub fn unavailable(test: &str, why: &str) -> bool {
    assert!(!ci(), "{test}: {why} and CI=true");
    eprintln!("skip {test}: {why}");
    true
}

/// Whether this process may record (root and tracefs); see [`unavailable`].
pub fn can_record(test: &str) -> bool {
    let tracefs = Path::new("/sys/kernel/tracing/instances").is_dir();
    match (is_root(), tracefs) {
        (true, true) => true,
        (false, _) => !unavailable(test, "cannot record here (not root)"),
        (true, false) => !unavailable(test, "cannot record here (no tracefs)"),
    }
}

/// A temporary directory under the target directory (a disk filesystem, not a tmpfs).
pub fn private_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

pub fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}
