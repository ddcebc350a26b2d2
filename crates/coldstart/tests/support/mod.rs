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

/// Whether this test can make emulated disks (root, FUSE, loop devices, mkfs.ext4); says why not.
#[allow(dead_code)]
pub fn can_make_devices(test: &str) -> bool {
    if !is_root() {
        return !unavailable(test, "cannot make loop devices and mounts (not root)");
    }
    for need in ["/dev/fuse", "/dev/loop-control"] {
        if !Path::new(need).exists() {
            return !unavailable(test, &format!("{need} is missing"));
        }
    }
    if std::process::Command::new("mkfs.ext4").arg("-V").output().is_err() {
        return !unavailable(test, "mkfs.ext4 is missing (e2fsprogs)");
    }
    true
}
