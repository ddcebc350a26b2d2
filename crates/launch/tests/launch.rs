//! Starting, waiting for and ending real commands: each readiness condition fires
//! at the right moment and no process is ever left behind.

mod common;

use std::time::Duration;

use coldstart_launch::{
    Command, Ending, LaunchError, Output, PausedChild, Reason, RunAs, Until, WaitOptions, boottime_ns,
};
use coldstart_testkit::{is_root, skip_without};
use common::{alive, sh};

fn until(text: &str) -> Until {
    text.parse().unwrap()
}

fn within(secs: u64) -> WaitOptions {
    WaitOptions { timeout: Some(Duration::from_secs(secs)), ..WaitOptions::default() }
}

#[test]
fn exit_reports_the_status_and_the_exit_time() {
    let mut running = PausedChild::spawn(&sh("exit 3")).unwrap().resume().unwrap();
    let outcome = running.wait(&Until::Exit, &within(30)).unwrap();
    assert_eq!(outcome.reason, Reason::Exit);
    assert!(outcome.met);
    assert_eq!(outcome.exit_status, Some(3));
    assert!(outcome.started_ns <= outcome.ready_ns && outcome.ready_ns <= outcome.detected_ns);
    let finished = running.finish(&Ending::default()).unwrap();
    assert_eq!(finished.exit_status, Some(3));
    assert_eq!(finished.exit_ns, Some(outcome.ready_ns));
    assert_eq!((finished.terminated, finished.killed), (0, 0));
}

#[test]
fn a_command_killed_by_a_signal_exits_128_plus_signal() {
    let mut running = PausedChild::spawn(&sh("kill -9 $$")).unwrap().resume().unwrap();
    assert_eq!(running.wait(&Until::Exit, &within(30)).unwrap().exit_status, Some(137));
}

#[test]
fn paused_command_has_not_exec_d_until_resumed() {
    let paused = PausedChild::spawn(&Command::new(["sleep", "30"])).unwrap();
    let pid = paused.pid();
    let exe = |pid: i32| std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_eq!(exe(pid), std::env::current_exe().unwrap(), "still our own image before resume");
    let running = paused.resume().unwrap();
    assert!(exe(pid).ends_with("sleep"), "exec'd after resume: {:?}", exe(pid));
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let marks = format!("COLDSTART_MARKS={}", running.marks_path().display());
    assert!(environ.split(|&b| b == 0).any(|kv| kv == marks.as_bytes()));
    assert_eq!(running.pid(), pid);
    let finished = running.finish(&Ending::default()).unwrap();
    assert_eq!(finished.exit_status, Some(128 + libc::SIGTERM));
    assert_eq!(finished.terminated, 1);
    assert!(!alive(pid));
}

#[test]
fn dropping_a_paused_command_ends_it_before_it_runs() {
    let marker = tempfile::tempdir().unwrap();
    let file = marker.path().join("ran");
    let paused = PausedChild::spawn(&sh(&format!("touch {}", file.display()))).unwrap();
    let pid = paused.pid();
    drop(paused);
    assert!(!alive(pid));
    assert!(!file.exists(), "the command never ran");
}

#[test]
fn exec_failures_are_errors_that_name_the_program() {
    match PausedChild::spawn(&Command::new(["no-such-program-for-coldstart"])) {
        Err(LaunchError::NotFound { program }) => assert_eq!(program, "no-such-program-for-coldstart"),
        other => panic!("expected NotFound, got {:?}", other.map(|p| p.pid())),
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("not-executable");
    std::fs::write(&script, "#!/bin/sh\n").unwrap();
    let paused = PausedChild::spawn(&Command::new([&script])).unwrap();
    let err = paused.resume().err().expect("exec of a non-executable file fails");
    assert!(matches!(err, LaunchError::Exec { what: "exec", .. }), "{err}");
    assert!(err.to_string().contains("not-executable"), "{err}");
}

#[test]
fn output_readiness_fires_on_the_matching_line_and_ends_the_tree() {
    let mut running =
        PausedChild::spawn(&sh("echo starting; sleep 0.2; echo >&2 'READY on 8080'; exec sleep 300"))
            .unwrap()
            .resume()
            .unwrap();
    let outcome = running.wait(&until("output:^READY on \\d+$"), &within(30)).unwrap();
    assert_eq!(outcome.reason.to_string(), "output:^READY on \\d+$");
    assert!(outcome.met);
    assert_eq!(outcome.detail.as_deref(), Some("READY on 8080"));
    assert_eq!(outcome.exit_status, None);
    let pid = running.pid();
    let finished = running.finish(&Ending::default()).unwrap();
    assert_eq!(finished.exit_status, Some(128 + libc::SIGTERM));
    assert!(!alive(pid));
}

#[test]
fn output_readiness_needs_watched_output() {
    let mut running = PausedChild::spawn(&Command::new(["true"])).unwrap().resume().unwrap();
    assert!(matches!(running.wait(&until("output:x"), &within(5)), Err(LaunchError::OutputNotWatched(_))));
}

#[test]
fn mark_readiness_uses_the_marks_own_time() {
    let script = r#"sleep 0.2; echo "$(cut -d' ' -f1 /proc/uptime) other" >> "$COLDSTART_MARKS";
        printf '%s ready\tpid=%s\n' "$(cut -d' ' -f1 /proc/uptime)" $$ >> "$COLDSTART_MARKS"; exec sleep 300"#;
    let mut running = PausedChild::spawn(&sh(script)).unwrap().resume().unwrap();
    let outcome = running.wait(&until("mark:ready"), &within(30)).unwrap();
    assert_eq!(outcome.reason, Reason::Mark("ready".into()));
    assert!(outcome.met);
    let pid = running.pid();
    let finished = running.finish(&Ending::default()).unwrap();
    let names: Vec<_> = finished.marks.marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["other", "ready"]);
    let ready = &finished.marks.marks[1];
    assert_eq!(ready.pid, Some(pid));
    assert_eq!(outcome.ready_ns, ready.boottime_ns.max(outcome.started_ns));
    assert!(!alive(pid));
}

#[test]
fn a_mark_that_never_comes_ends_with_exit_not_met() {
    let mut running = PausedChild::spawn(&sh("exit 0")).unwrap().resume().unwrap();
    let outcome = running.wait(&until("mark:never"), &within(30)).unwrap();
    assert_eq!(outcome.reason, Reason::Exit);
    assert!(!outcome.met);
    assert_eq!(outcome.exit_status, Some(0));
}

#[test]
fn timeout_gives_up_and_finish_kills_what_ignores_sigterm() {
    let mut running =
        PausedChild::spawn(&sh("trap '' TERM; sleep 300; sleep 300")).unwrap().resume().unwrap();
    let options = WaitOptions { timeout: Some(Duration::from_millis(300)), ..WaitOptions::default() };
    let outcome = running.wait(&Until::Exit, &options).unwrap();
    assert_eq!(outcome.reason, Reason::Timeout);
    assert!(!outcome.met);
    assert!(outcome.ready_ns - outcome.started_ns >= 300_000_000);
    let pids = running.tree_pids();
    assert_eq!(pids.len(), 2, "sh and sleep: {pids:?}");
    let finished = running.finish(&Ending::Terminate { grace: Duration::from_millis(200) }).unwrap();
    assert_eq!(finished.terminated, 2);
    assert!(finished.killed >= 1, "sh ignores SIGTERM, so it needed SIGKILL");
    assert_eq!(finished.exit_status, Some(128 + libc::SIGKILL));
    assert!(pids.iter().all(|&p| !alive(p)));
}

#[test]
fn double_forked_daemons_are_in_the_tree_and_are_ended() {
    let mut running = PausedChild::spawn(&sh("(setsid sleep 300 >/dev/null 2>&1 &); echo started"))
        .unwrap()
        .resume()
        .unwrap();
    let outcome = running.wait(&Until::Exit, &within(30)).unwrap();
    assert_eq!(outcome.exit_status, Some(0));
    let mut daemon = Vec::new();
    for _ in 0..200 {
        daemon = running.tree_pids();
        if !daemon.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(daemon.len(), 1, "the orphaned sleep is still ours: {daemon:?}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon[0])).unwrap();
    assert!(status.contains(&format!("PPid:\t{}", running.tree_root())), "reparented to the shepherd");
    let finished = running.finish(&Ending::default()).unwrap();
    assert_eq!(finished.terminated, 1);
    assert!(!alive(daemon[0]));
}

#[test]
fn usage_counts_cpu_of_the_whole_tree() {
    let busy = "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done";
    let mut running = PausedChild::spawn(&sh(&format!("sh -c '{busy}' & sh -c '{busy}' & wait")))
        .unwrap()
        .resume()
        .unwrap();
    running.wait(&Until::Exit, &within(120)).unwrap();
    let usage = running.finish(&Ending::default()).unwrap().usage.unwrap();
    assert!(usage.user > Duration::from_millis(50), "two busy children: {usage:?}");
    assert!(usage.minor_faults > 0);
}

#[test]
fn leave_running_leaves_the_tree_alone() {
    let mut running = PausedChild::spawn(&Command::new(["sleep", "300"])).unwrap().resume().unwrap();
    let pid = running.pid();
    running
        .wait(&Until::Exit, &WaitOptions { timeout: Some(Duration::from_millis(50)), ..Default::default() })
        .unwrap();
    let finished = running.finish(&Ending::LeaveRunning).unwrap();
    assert_eq!(finished.usage, None);
    assert!(alive(pid));
    // SAFETY: ending the process this test left running.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

#[test]
fn environment_cwd_and_echo_reach_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = sh(r#"echo "$COLDSTART_TEST_VAR $(pwd)""#);
    command.env("COLDSTART_TEST_VAR", "hello").cwd(dir.path()).stdout(Output::Watch { echo: true });
    let mut running = PausedChild::spawn(&command).unwrap().resume().unwrap();
    let pwd = dir.path().canonicalize().unwrap();
    let outcome = running
        .wait(&until(&format!("output:^hello {}$", regex::escape(&pwd.to_string_lossy()))), &within(30));
    assert!(outcome.unwrap().met);
}

#[test]
fn runs_as_another_user_with_their_home() {
    if skip_without(is_root(), "switching users", "root") {
        return;
    }
    let mut command = sh(r#"echo "$(id -u) $(id -g) $HOME $USER"; touch "$COLDSTART_MARKS""#);
    command.run_as(RunAs::User("nobody".into()));
    let mut running = PausedChild::spawn(&command).unwrap().resume().unwrap();
    let outcome = running.wait(&until("output:^65534 "), &within(30)).unwrap();
    assert!(outcome.met, "{outcome:?}");
    assert_eq!(outcome.detail.as_deref(), Some("65534 65534 /nonexistent nobody"));
    running.wait(&Until::Exit, &within(30)).unwrap();
    assert_eq!(
        running.finish(&Ending::default()).unwrap().exit_status,
        Some(0),
        "the marks file is writable by nobody"
    );
}

#[test]
fn ready_times_are_on_the_boot_clock() {
    let before = boottime_ns();
    let mut running = PausedChild::spawn(&sh("exit 0")).unwrap().resume().unwrap();
    let outcome = running.wait(&Until::Exit, &within(30)).unwrap();
    assert!(before <= outcome.started_ns && outcome.detected_ns <= boottime_ns());
}
