//! `coldstart demo`, the README's first command: as root it records a cold start of
//! the built-in example and writes the trace and every report; without root it
//! refuses with a message that says how to run it, and writes nothing.

mod support;
use support::{can_record, ci, private_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use coldstart_trace::{CacheState, Trace};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_demo_records_the_example_and_writes_every_report() {
    if !can_record("the_demo_records_the_example_and_writes_every_report") {
        return;
    }
    let dir = private_dir();
    let out_dir = dir.path().join("demo");
    let out = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["demo", "--example", "shell", "--top", "3", "--dir"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed: {}\n{stderr}", out.status);
    let stdout = String::from_utf8(out.stdout).unwrap();

    let trace = Trace::read(&out_dir.join("demo.coldstart")).unwrap();
    assert_eq!(trace.meta.command[0], "/bin/sh");
    assert_eq!(trace.meta.cache, CacheState::Cold, "the demo records a cold start");
    // The shell runs `ls` and `cat`: both are execs in the example's tree.
    let execs: Vec<&str> =
        trace.execs.iter().map(|e| e.path.rsplit('/').next().unwrap_or_default()).collect();
    assert!(
        execs.contains(&"ls") && execs.contains(&"cat"),
        "execs {execs:?}, processes {:?}",
        trace.processes
    );
    assert!(!trace.page_fills.is_empty(), "a cold start reads pages");

    // The printed report is the text report's top-3 version of the same analysis.
    assert!(stdout.contains("Critical path to ready"), "{stdout}");
    assert!(stdout.contains("(top 3 of"), "{stdout}");
    let full = std::fs::read_to_string(out_dir.join("report.txt")).unwrap();
    assert!(full.starts_with("coldstart report (record"), "{full}");
    assert!(full.contains("/bin/sh -c 'ls -l /usr/bin /usr/lib"), "the header names the command");

    let html = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>") && html.contains("id=\"coldstart-data\""));
    assert!(html.contains("\"doctor\":{"), "the page carries the doctor's findings");
    let svg = std::fs::read_to_string(out_dir.join("chart.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(">ls<") || svg.contains(">ls "), "the chart has a bar for ls");

    for name in ["demo.coldstart", "report.txt", "report.html", "chart.svg"] {
        assert_eq!(mode(&out_dir.join(name)), 0o600, "{name} names every path the start read");
    }
    for line in ["the trace", "the text report", "the interactive report", "the bootchart-style chart"] {
        assert!(stderr.contains(line), "stderr lists what was written: {stderr}");
    }
}

#[test]
fn without_root_the_demo_says_how_to_run_it() {
    if Command::new("setpriv").arg("--version").output().is_err() {
        assert!(!ci(), "CI=true: setpriv (util-linux) is missing");
        eprintln!("skip without_root_the_demo_says_how_to_run_it: setpriv is missing");
        return;
    }
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skip without_root_the_demo_says_how_to_run_it: already not root, setpriv cannot switch");
        return;
    }
    let dir = tempfile::Builder::new().prefix("coldstart-demo-unpriv").tempdir_in("/tmp").unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let out_dir = dir.path().join("demo");
    let out = Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_coldstart"))
        .args(["demo", "--dir"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs root") && stderr.contains("sudo coldstart demo"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(!out_dir.exists(), "nothing is written without root");
}
