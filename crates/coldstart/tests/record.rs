//! `coldstart record` as a process: killed with SIGTERM it still writes its trace
//! and leaves no tracing instance; killed with SIGKILL its guardian removes the
//! instances and `coldstart recover` turns the spool into a partial trace; with
//! `--until output:REGEX` or `--until mark:NAME` it stops at that moment, stores it
//! as the ready time and ends the command's whole tree. A read by another process's thread
//! is counted for that process, and another process reading during the start is named in the
//! summary's BUSY line. A file opened through a mount of another namespace (a
//! container's) is named by the path that opens it on the host.

mod support;
use support::{can_record, private_dir};

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use coldstart_trace::{MarkSource, ReadyReason, Trace};

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

/// Processes that have `arg` as one of their arguments.
fn processes_with_arg(arg: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == arg.as_bytes()))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Records `script` (run by sh, with `env` added) until every condition of `until`;
/// returns the recorder's exit status and the trace.
fn record_until(dir: &Path, until: &[&str], script: &str, env: &[(&str, &str)]) -> (Option<i32>, Trace) {
    let out = dir.join("until.coldstart");
    let status = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .arg("record")
        .args(until.iter().flat_map(|u| ["--until", u]))
        .args(["--timeout", "120", "-o"])
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .args(["--", "sh", "-c", script])
        .env("COLDSTART", env!("CARGO_BIN_EXE_coldstart"))
        .envs(env.iter().copied())
        .status()
        .unwrap();
    (status.code(), Trace::read(&out).expect("the trace is written"))
}

#[test]
fn until_output_stops_at_the_matching_line_and_ends_the_command() {
    if !can_record("until_output") {
        return;
    }
    let dir = private_dir();
    let token = format!("3600.{}1", std::process::id());
    let script = format!("echo starting; sleep 0.2; echo 'READY on port 42'; exec sleep {token}");
    let (status, trace) = record_until(dir.path(), &[r"output:READY on port \d+"], &script, &[]);
    assert_eq!(status, Some(0), "the command was ready: record exits 0 although it ended the command");
    let ready = trace.meta.ready.clone().expect("a ready time");
    assert_eq!(ready.reason, ReadyReason::Output(r"READY on port \d+".into()));
    assert!(ready.t_ns > 0 && ready.t_ns <= trace.meta.duration_ns, "{ready:?}");
    let output: Vec<_> = trace.marks.iter().filter(|m| m.source == MarkSource::Output).collect();
    assert_eq!(output.len(), 1, "{:?}", trace.marks);
    assert_eq!((output[0].name.as_str(), output[0].t_ns), ("READY on port 42", ready.t_ns));
    let root = trace.processes.iter().find(|p| Some(p.pid) == trace.meta.root_pid).unwrap();
    assert!(root.start_ns.unwrap_or(0) <= ready.t_ns);
    assert_eq!(processes_with_arg(&token), Vec::<String>::new(), "the command's sleep is still running");
    assert!(std::fs::read_dir(dir.path().join("spool")).unwrap().next().is_none(), "the spool is removed");
}

#[test]
fn until_mark_stops_at_the_mark_and_ends_the_command() {
    if !can_record("until_mark") {
        return;
    }
    let dir = private_dir();
    let token = format!("3600.{}2", std::process::id());
    let script = format!("sleep 0.2; \"$COLDSTART\" mark ready; exec sleep {token}");
    let (status, trace) = record_until(dir.path(), &["mark:ready"], &script, &[]);
    assert_eq!(status, Some(0));
    let ready = trace.meta.ready.clone().expect("a ready time");
    assert_eq!(ready.reason, ReadyReason::Mark("ready".into()));
    let marks: Vec<_> = trace.marks.iter().filter(|m| m.source == MarkSource::Command).collect();
    assert_eq!(marks.len(), 1, "{:?}", trace.marks);
    assert_eq!(marks[0].name, "ready");
    assert_eq!(marks[0].t_ns, ready.t_ns, "the ready time is the mark's own time");
    assert_eq!(marks[0].pid, trace.meta.root_pid, "the mark names the shell that ran `coldstart mark`");
    assert!(ready.t_ns > 0 && ready.t_ns <= trace.meta.duration_ns, "{ready:?}");
    assert!(
        trace.execs.iter().any(|e| e.path.ends_with("coldstart") && e.t_ns <= ready.t_ns),
        "`coldstart mark` ran before the ready time"
    );
    assert_eq!(processes_with_arg(&token), Vec::<String>::new(), "the command's sleep is still running");
}

/// Two window conditions under Xvfb: each is a milestone (an `until` mark) with the
/// process that mapped the window; the start is ready at the last, credited to its
/// owner, and the analysis starts the critical path at that owner's main thread.
#[test]
fn two_window_conditions_record_two_milestones_with_their_owners() {
    if !can_record("until_windows") {
        return;
    }
    let Some(xvfb) = coldstart_testkit::xvfb("until_windows") else { return };
    let has_xmessage = Command::new("xmessage").arg("-help").output().is_ok();
    if coldstart_testkit::skip_without(has_xmessage, "until_windows", "xmessage (Debian package x11-utils)") {
        return;
    }
    let dir = private_dir();
    let script = "xmessage -name cs-first first & sleep 0.5; xmessage -name cs-second second & wait";
    let until = ["window:cs-second", "window:/^cs-f/"];
    let (status, trace) = record_until(dir.path(), &until, script, &[("DISPLAY", &xvfb.display)]);
    assert_eq!(status, Some(0), "both windows appeared: record exits 0 although it ended the command");

    let milestones: Vec<_> = trace.marks.iter().filter(|m| m.source == MarkSource::Until).collect();
    let names: Vec<&str> = milestones.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["window:/^cs-f/", "window:cs-second"], "by time: {milestones:?}");
    let comm =
        |pid: Option<i32>| trace.processes.iter().find(|p| Some(p.pid) == pid).map(|p| p.comm.as_str());
    for m in &milestones {
        assert_eq!(comm(m.pid), Some("xmessage"), "owner of {m:?}");
        assert_eq!(m.tid, m.pid, "the owner's main thread");
    }
    assert_ne!(milestones[0].pid, milestones[1].pid, "two windows, two processes");
    let ready = trace.meta.ready.clone().expect("a ready point");
    assert_eq!(ready.reason, ReadyReason::WindowClass("cs-second".into()));
    assert_eq!(
        (ready.t_ns, ready.pid, ready.tid),
        (milestones[1].t_ns, milestones[1].pid, milestones[1].tid)
    );
    let analysis = coldstart_analyze::analyze(&trace);
    let reached = analysis.overview.ready.expect("the analysis has the ready point");
    assert_eq!((Some(reached.pid), Some(reached.tid)), (ready.pid, ready.tid), "not the tree's root");
}

/// A read issued by a thread of a process outside the recorded command is counted for that
/// process, even when the thread started before the recording and exited before its end
/// (the proc connector reports its process at its exit).
#[test]
fn a_read_by_an_outside_thread_that_exits_is_counted_for_its_process() {
    if !can_record("outside_thread") {
        return;
    }
    use std::io::Read;
    use std::os::fd::AsFd;
    let dir = private_dir();
    let path = dir.path().join("outside.bin");
    std::fs::write(&path, vec![7u8; 8 << 20]).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.sync_all().unwrap();
    nix::fcntl::posix_fadvise(file.as_fd(), 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED)
        .unwrap();
    let (go, wait) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::Builder::new()
        .name("outside-reader".into())
        .spawn(move || {
            wait.recv().unwrap();
            let mut bytes = Vec::new();
            std::fs::File::open(&path).unwrap().read_to_end(&mut bytes).unwrap();
            nix::unistd::gettid().as_raw()
        })
        .unwrap();
    let out = dir.path().join("outside.coldstart");
    // The command runs only once the tracing is on: the thread reads after it has started.
    let started = dir.path().join("started");
    let script = format!("touch {}; sleep 2", started.display());
    let mut recorder = start_recorder(dir.path(), &out, &["sh", "-c", &script]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !started.exists() {
        assert!(std::time::Instant::now() < deadline, "the command never started");
        assert!(recorder.try_wait().unwrap().is_none(), "the recorder ended before the command started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    go.send(()).unwrap();
    let tid = reader.join().unwrap();
    assert!(recorder.wait().unwrap().success());
    let trace = Trace::read(&out).expect("the trace is written");
    let pid = std::process::id() as i32;
    assert_ne!(tid, pid, "the reader is a thread of its own");
    let reads: Vec<_> = trace.block_ios.iter().filter(|b| b.comm == "outside-reader").collect();
    assert!(!reads.is_empty(), "the thread's reads are in the trace");
    for r in reads {
        assert_eq!(r.pid, pid, "a request of thread {tid} is counted for process {pid}: {r:?}");
    }
}

/// A file read through a bind mount that only the command's private mount namespace has (as a
/// container's files are) is named by its host path, which opens the same inode, not by the
/// path the command used, which on the host is an empty directory.
#[test]
fn a_file_opened_in_another_mount_namespace_is_named_by_its_host_path() {
    if !can_record("host_path") {
        return;
    }
    let dir = private_dir();
    let real = dir.path().join("real");
    let seen = dir.path().join("seen");
    std::fs::create_dir_all(real.join("sub")).unwrap();
    std::fs::create_dir(&seen).unwrap();
    std::fs::write(real.join("sub/data"), vec![3u8; 256 << 10]).unwrap();
    let script = format!(
        "mount --bind {} {} && cat {}/sub/data > /dev/null",
        real.display(),
        seen.display(),
        seen.display()
    );
    let out = dir.path().join("ns.coldstart");
    let status = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["record", "--cold", "-o"])
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", "unshare", "--mount", "--propagation", "private", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let trace = Trace::read(&out).unwrap();
    let ino = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(real.join("sub/data")).unwrap());
    let file = trace.files.iter().find(|f| f.ino == ino).expect("the file read is in the trace");
    assert_eq!(file.path.as_deref(), Some(real.join("sub/data").to_str().unwrap()), "{file:?}");
    assert!(
        !trace.files.iter().any(|f| f.path.as_deref().is_some_and(|p| p.starts_with(seen.to_str().unwrap()))),
        "no file named by the namespace's path"
    );
}

/// Another process reading from the disk during the start makes the summary say that the
/// machine was busy, who read how much, and what to do, in a line of its own.
#[test]
fn a_start_during_which_another_process_reads_says_the_machine_was_busy() {
    if !can_record("busy_machine") {
        return;
    }
    let dir = private_dir();
    let big = dir.path().join("big");
    std::fs::write(&big, vec![5u8; 48 << 20]).unwrap();
    let started = dir.path().join("started");
    let script = format!("touch {}; sleep 2", started.display());
    let out = dir.path().join("busy.coldstart");
    let recorder = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["record", "--cold", "-o"])
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", "sh", "-c", &script])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the command to start", || started.exists());
    let reader = Command::new("cat").arg(&big).stdout(std::process::Stdio::null()).status().unwrap();
    assert!(reader.success());
    let output = recorder.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let busy =
        stderr.lines().position(|l| l.trim_start().starts_with("BUSY")).unwrap_or_else(|| panic!("{stderr}"));
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines[busy].contains("processes outside the recording read") && lines[busy].contains("cat/"),
        "{stderr}"
    );
    assert!(lines[busy + 1].contains("record again on a quiet machine"), "{stderr}");
}
