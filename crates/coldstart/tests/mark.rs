//! `coldstart mark NAME`: the line it appends, its pid, and its quiet no-op outside coldstart.

mod support;
use support::coldstart;

use std::time::Duration;

use coldstart_launch::{Ending, PausedChild, Until, WaitOptions, marks};
use predicates::str::contains;

#[test]
fn outside_coldstart_it_notes_and_exits_zero() {
    coldstart()
        .args(["mark", "ready"])
        .env_remove("COLDSTART_MARKS")
        .assert()
        .success()
        .stderr(contains("not running under coldstart"));
}

#[test]
fn appends_one_line_with_the_parent_pid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marks");
    std::fs::write(&path, "1.5 earlier\n").unwrap();
    for name in ["ready", "first paint"] {
        coldstart().args(["mark", name]).env("COLDSTART_MARKS", &path).assert().success();
    }
    let text = std::fs::read_to_string(&path).unwrap();
    let parsed = marks::parse(&text);
    assert_eq!(parsed.bad_lines, 0);
    let names: Vec<_> = parsed.marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["earlier", "ready", "first paint"]);
    assert_eq!(parsed.marks[1].pid, Some(std::process::id() as i32));
    let line = text.lines().nth(1).unwrap();
    let uptime = line.split(' ').next().unwrap();
    assert_eq!(uptime.split_once('.').unwrap().1.len(), 9, "{line}");
    assert!(parsed.marks[1].boottime_ns <= parsed.marks[2].boottime_ns);
}

#[test]
fn bad_names_and_missing_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("marks");
    std::fs::write(&path, "").unwrap();
    coldstart().args(["mark", "a\tb"]).env("COLDSTART_MARKS", &path).assert().code(2);
    coldstart()
        .args(["mark", "ready"])
        .env("COLDSTART_MARKS", dir.path().join("gone"))
        .assert()
        .code(2)
        .stderr(contains("cannot write mark"));
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "");
}

#[test]
fn a_launched_program_marks_ready_through_the_cli() {
    let bin = assert_cmd::cargo::cargo_bin!("coldstart");
    let script = format!("sleep 0.1; '{}' mark ready; exec sleep 300", bin.display());
    let mut running =
        PausedChild::spawn(&coldstart_launch::Command::new(["sh", "-c", &script])).unwrap().resume().unwrap();
    let options = WaitOptions { timeout: Some(Duration::from_secs(30)), ..WaitOptions::default() };
    let outcome = running.wait(&"mark:ready".parse::<Until>().unwrap(), &options).unwrap();
    assert!(outcome.met, "{outcome:?}");
    let pid = running.pid();
    let finished = running.finish(&Ending::default()).unwrap();
    assert_eq!(finished.marks.marks.len(), 1);
    assert_eq!(finished.marks.marks[0].pid, Some(pid), "pid= is the shell that ran `coldstart mark`");
    assert_eq!(outcome.ready_ns, finished.marks.marks[0].boottime_ns);
}
