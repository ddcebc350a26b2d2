//! `coldstart record` as a process: killed with SIGTERM it still writes its trace
//! and leaves no tracing instance; killed with SIGKILL its guardian removes the
//! instances and `coldstart recover` turns the spool into a partial trace.

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use coldstart_trace::Trace;

fn can_record(test: &str) -> bool {
    let root = nix::unistd::Uid::effective().is_root();
    let tracefs = Path::new("/sys/kernel/tracing/instances").is_dir();
    if root && tracefs {
        return true;
    }
    let why = if root { "no tracefs" } else { "not root" };
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{test}: cannot record ({why}) and CI=true");
    }
    eprintln!("skip {test}: cannot record here ({why})");
    false
}

fn private_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

fn instances_of(pid: u32) -> Vec<String> {
    let prefix = format!("coldstart-{pid}-");
    std::fs::read_dir("/sys/kernel/tracing/instances")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Waits (bounded) until `cond` holds; the bound only keeps a broken run from hanging.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(60), "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn start_recorder(dir: &Path, out: &Path, command: &[&str]) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .arg("record")
        .arg("-o")
        .arg(out)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .arg("--")
        .args(command)
        .spawn()
        .unwrap();
    let spool = dir.join("spool");
    wait_for("the recording to start", || {
        std::fs::read_dir(&spool)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("start.json").exists())
    });
    child
}

#[test]
fn sigterm_ends_the_command_writes_the_trace_and_leaves_no_instance() {
    if !can_record("sigterm") {
        return;
    }
    let dir = private_dir();
    let out = dir.path().join("sleep.coldstart");
    let mut recorder = start_recorder(dir.path(), &out, &["sleep", "30"]);
    assert!(!instances_of(recorder.id()).is_empty());
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(recorder.id() as i32), nix::sys::signal::SIGTERM)
        .unwrap();
    let status = recorder.wait().unwrap();
    assert_eq!(instances_of(recorder.id()), Vec::<String>::new());
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "record exits with the command's status (sleep killed by SIGTERM)"
    );
    let trace = Trace::read(&out).expect("the trace is written after SIGTERM");
    assert!(!trace.meta.partial);
    assert_eq!(trace.meta.command, ["sleep", "30"]);
    assert_eq!(trace.meta.exit_code, Some(143));
    let root = trace.processes.iter().find(|p| Some(p.pid) == trace.meta.root_pid).unwrap();
    assert_eq!(root.exe.as_deref(), Some("/usr/bin/sleep"));
    assert!(std::fs::read_dir(dir.path().join("spool")).unwrap().next().is_none(), "the spool is removed");
}

#[test]
fn sigkill_leaves_a_spool_that_recover_turns_into_a_partial_trace() {
    if !can_record("sigkill") {
        return;
    }
    let dir = private_dir();
    let out = dir.path().join("sh.coldstart");
    let mut recorder =
        start_recorder(dir.path(), &out, &["sh", "-c", "cat /etc/passwd > /dev/null; sleep 2"]);
    std::thread::sleep(Duration::from_millis(1500));
    recorder.kill().unwrap();
    recorder.wait().unwrap();
    wait_for("the guardian to remove the instances", || instances_of(recorder.id()).is_empty());
    assert!(!out.exists());

    let recovered = dir.path().join("recovered.coldstart");
    let spool = std::fs::read_dir(dir.path().join("spool")).unwrap().flatten().next().unwrap().path();
    let status = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .arg("recover")
        .arg(&spool)
        .arg("-o")
        .arg(&recovered)
        .status()
        .unwrap();
    assert!(status.success());
    let trace = Trace::read(&recovered).expect("a readable partial trace");
    assert!(trace.meta.partial);
    assert_eq!(trace.meta.command[0], "sh");
    assert!(trace.meta.duration_ns > 0);
    assert!(trace.processes.iter().any(|p| Some(p.pid) == trace.meta.root_pid));
    assert!(
        trace.processes.iter().any(|p| p.exe.as_deref() == Some("/usr/bin/cat")),
        "cat ran before the kill"
    );
    assert!(!spool.exists(), "recover removes the spool");
}
