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

/// Whether `program` is on the PATH.
pub fn installed(program: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether `systemd-analyze` runs here (with CI=true, its absence fails the test).
pub fn have_systemd_analyze() -> bool {
    let found = std::process::Command::new("systemd-analyze").arg("--version").output();
    if found.as_ref().is_ok_and(|probe| probe.status.success()) {
        return true;
    }
    assert!(!ci(), "CI=true: systemd-analyze is missing (Debian package systemd)");
    eprintln!("skipped: systemd-analyze is missing");
    false
}

/// coldstart's man pages written under `dir`/man, as the MANPATH for `systemd-analyze verify`
/// (the units' Documentation= names them; README.md says how to install them).
pub fn man_path(dir: &Path) -> String {
    let man = dir.join("man");
    coldstart().args(["generate", "man", "-o"]).arg(man.join("man1")).assert().success();
    format!("{}:", man.display())
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

/// Records `program` into `dir`/`name`.coldstart (its spool under `dir`), with `env` set for
/// the recorder and `DEBUGINFOD_URLS` unset unless given.
pub fn record_program(
    dir: &Path,
    name: &str,
    program: &Path,
    extra: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> coldstart_trace::Trace {
    let out = dir.join(format!("{name}.coldstart"));
    let _ = std::fs::remove_file(&out);
    coldstart()
        .env_remove("DEBUGINFOD_URLS")
        .envs(env.iter().copied())
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .args(extra)
        .arg("--")
        .arg(program)
        .assert()
        .success();
    coldstart_trace::Trace::read(&out).unwrap()
}

/// The user frames (innermost first) of each CPU sample of the process named `comm`.
pub fn user_stacks(trace: &coldstart_trace::Trace, comm: &str) -> Vec<Vec<String>> {
    let pid = trace.processes.iter().find(|p| p.comm == comm).map(|p| p.pid).expect("the program's process");
    let index = coldstart_trace::StackIndex::new(trace);
    trace
        .stack_samples
        .iter()
        .filter(|s| s.pid == pid)
        .map(|s| index.frames(s.stack_id).into_iter().filter(|f| !f.kernel).map(|f| index.name(f)).collect())
        .collect()
}
