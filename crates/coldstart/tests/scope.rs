//! `coldstart record --also`: a process outside the command's tree put into the
//! recording. The command waits on a helper over a FIFO; with `--also <helper pid>` the
//! trace has the helper's scheduler data and the critical path goes into it; without, the
//! wait is named as a wait on the helper's process, never as idle. A bad `--also` exits 2
//! with one line before anything starts.

mod support;
use support::{can_record, coldstart, private_dir};

use std::path::Path;
use std::process::{Child, Command, Stdio};

use coldstart_analyze::SegmentKind;
use coldstart_trace::{AlsoScope, Trace};

/// The helper runs under its own name (`scopehelper`, a copy of the shell), waits until
/// the command writes to `go`, spins a while, then answers on `done`.
fn start_helper(dir: &Path) -> Child {
    let shell = dir.join("scopehelper");
    std::fs::copy("/bin/sh", &shell).unwrap();
    for fifo in ["go", "done"] {
        nix::unistd::mkfifo(&dir.join(fifo), nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    }
    let script = format!(
        "read x < {go}; i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo ok > {done}",
        go = dir.join("go").display(),
        done = dir.join("done").display()
    );
    // Another test thread may fork while the copy's write descriptor is open, and its child
    // holds it until it execs: the exec here then fails with ETXTBSY for that moment.
    for _ in 0..100 {
        match Command::new(&shell).args(["-c", &script]).stdin(Stdio::null()).spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(std::time::Duration::from_millis(20))
            }
            spawned => return spawned.unwrap(),
        }
    }
    panic!("{}: still busy after 2 s", shell.display())
}

/// Records the command waiting on a helper, with `--also <helper pid>` when `also`; `None`
/// when this machine cannot record. Returns the directory, the helper's pid and the trace.
fn record_with_helper(name: &str, also: bool) -> Option<(tempfile::TempDir, i32, Trace)> {
    if !can_record(name) {
        return None;
    }
    let dir = private_dir();
    let mut helper = start_helper(dir.path());
    let trace = record(dir.path(), name, also.then(|| helper.id()));
    helper.wait().unwrap();
    Some((dir, helper.id() as i32, trace))
}

fn record(dir: &Path, name: &str, also: Option<u32>) -> Trace {
    let out = dir.join(name);
    let script =
        format!("echo start > {}; read x < {}", dir.join("go").display(), dir.join("done").display());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_coldstart"));
    cmd.args(["record", "--timeout", "120", "-o"]).arg(&out).arg("--spool-dir").arg(dir.join("spool"));
    if let Some(pid) = also {
        cmd.args(["--also", &pid.to_string()]);
    }
    let status = cmd.args(["--", "sh", "-c", &script]).status().unwrap();
    assert_eq!(status.code(), Some(0));
    Trace::read(&out).expect("the trace is written")
}

#[test]
fn also_records_the_helper_and_the_critical_path_goes_into_it() {
    let Some((_dir, pid, trace)) = record_with_helper("also.coldstart", true) else { return };
    assert_eq!(trace.meta.also, vec![AlsoScope { spec: pid.to_string(), pids: vec![pid] }]);
    let process = trace.processes.iter().find(|p| p.pid == pid).expect("the helper has a process row");
    assert!(process.in_scope);
    assert_eq!(process.comm, "scopehelper");
    assert!(trace.sched.iter().any(|s| s.tid == pid), "the helper's scheduler data is recorded");
    let analysis = coldstart_analyze::analyze(&trace);
    let path = analysis.critical_path.expect("a critical path");
    let in_helper: i64 = path
        .segments
        .iter()
        .filter(|s| s.pid == pid && s.kind == SegmentKind::Cpu)
        .map(|s| s.end_ns - s.start_ns)
        .sum();
    assert!(in_helper > 0, "the path runs in the helper: {:?}", path.segments);
}

#[test]
fn without_also_the_wait_on_the_helper_is_named_not_idle() {
    let Some((dir, pid, trace)) = record_with_helper("tree.coldstart", false) else { return };
    assert!(trace.meta.also.is_empty());
    let named = trace.processes.iter().find(|p| p.pid == pid).expect("the waker's process is named");
    assert!(!named.in_scope);
    assert_eq!(named.comm, "scopehelper");
    let analysis = coldstart_analyze::analyze(&trace);
    let path = analysis.critical_path.expect("a critical path");
    let outside = path
        .segments
        .iter()
        .find(|s| s.waker_process.as_ref().is_some_and(|w| w.pid == pid))
        .unwrap_or_else(|| panic!("a wait on the helper: {:?}", path.segments));
    assert_eq!(outside.kind, SegmentKind::WaitUntraced);
    assert_eq!(outside.waker_process.as_ref().unwrap().comm, "scopehelper");
    let report = coldstart().args(["report"]).arg(dir.path().join("tree.coldstart")).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains(&format!(
            "waiting on scopehelper (pid {pid}, not recorded): record with --also scopehelper"
        )),
        "{text}"
    );
}

#[test]
fn a_bad_also_exits_2_with_one_line_before_the_command_starts() {
    let dir = private_dir();
    let marker = dir.path().join("ran");
    let command = format!("touch {}", marker.display());
    for (also, says) in [
        ("", "empty --also"),
        ("2147483646", "no process 2147483646 is running"),
        ("no-such-comm-q", "no running process is named no-such-comm-q"),
    ] {
        let out = coldstart().args(["record", "--also", also, "--", "sh", "-c", &command]).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--also {also:?}: {stderr}");
        assert!(stderr.contains(says), "--also {also:?}: {stderr}");
        let lines = stderr.lines().filter(|l| !l.is_empty() && !l.starts_with("For more information"));
        assert_eq!(lines.count(), 1, "one line (plus clap's hint): {stderr}");
        assert!(!marker.exists(), "the command did not start");
    }
}
