//! A desktop login explained end to end: a MATE session (GNOME 2's descendant) under
//! Xvfb, recorded cold until the panel's window is visible, with the window manager's
//! announcement as a second milestone. The ready thread is the panel's, the critical
//! path crosses into the processes the panel waited on and ends in work (CPU, I/O, a
//! named wait), not in sleep; no finding claims more time than the path explains; and
//! nothing of the session is left running afterwards.

mod support;
use support::{can_record, coldstart, installed, json, private_dir};

use std::path::Path;

use coldstart_testkit::skip_without;

/// Processes whose environment holds `HOME=home`: the session's, however they were started.
fn session_processes(home: &Path) -> Vec<(i32, String)> {
    let wanted = format!("HOME={}", home.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else { continue };
        if environ.split(|&b| b == 0).any(|v| v == wanted.as_bytes()) {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push((pid, comm.trim().to_owned()));
        }
    }
    found
}

#[test]
fn a_mate_login_is_explained_from_the_panel_back_to_real_work() {
    const TEST: &str = "mate_login";
    if !can_record(TEST) {
        return;
    }
    let have_mate = ["mate-session", "mate-panel", "marco", "dbus-run-session"].iter().all(|p| installed(p));
    if skip_without(
        have_mate,
        TEST,
        "a MATE session (Debian packages mate-session-manager mate-panel marco dbus-x11)",
    ) {
        return;
    }
    let Some(xvfb) = coldstart_testkit::xvfb_with_screen(TEST, "1280x800x24") else { return };
    let dir = private_dir();
    let home = dir.path().join("home");
    let runtime = dir.path().join("runtime");
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let trace = dir.path().join("mate.coldstart");

    let recorded = coldstart()
        .args(["record", "--cold", "--also", "Xvfb", "--until", "wm", "--until", "window:mate-panel"])
        .args(["--timeout", "120", "-o"])
        .arg(&trace)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", "setsid", "dbus-run-session", "mate-session"])
        .env("DISPLAY", &xvfb.display)
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap();
    let left = session_processes(&home);
    for (pid, _) in &left {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL);
    }
    let stderr = String::from_utf8_lossy(&recorded.stderr);
    assert!(recorded.status.success(), "record failed: {stderr}");
    assert_eq!(left, Vec::new(), "the session's processes outlived the recording");

    let report = dir.path().join("mate.json");
    coldstart().args(["report", "--format", "json", "-o"]).arg(&report).arg(&trace).assert().success();
    let report = json(&report);
    let comm_of = |pid: &serde_json::Value| {
        report["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == *pid)
            .and_then(|p| p["comm"].as_str())
            .map(str::to_owned)
    };

    let ready = &report["overview"]["ready"];
    assert_eq!(ready["reason"], "window:mate-panel", "{ready}");
    assert_eq!(comm_of(&ready["pid"]).as_deref(), Some("mate-panel"), "the ready thread's process: {ready}");
    assert_eq!(ready["tid"], ready["pid"], "the panel's main thread");

    let marks = report["marks"].as_array().unwrap();
    let wm = marks.iter().find(|m| m["name"] == "wm").unwrap_or_else(|| panic!("no wm milestone: {marks:?}"));
    assert_eq!(comm_of(&wm["pid"]).as_deref(), Some("marco"), "the window manager's milestone: {wm}");
    assert!(wm["t_ns"].as_i64() <= ready["t_ns"].as_i64(), "{wm} after {ready}");

    let path = &report["critical_path"];
    let summary = &path["summary"];
    let ns = |key: &str| summary[key].as_i64().unwrap_or_else(|| panic!("no {key} in {summary}"));
    let total = ns("total_ns");
    assert_eq!(Some(total), ready["time_to_ready_ns"].as_i64());
    assert_eq!(path["tid"], ready["tid"], "the walk starts at the panel's thread");
    let unexplained = ns("sleep_ns") + ns("no_wakeup_ns") + ns("untraced_ns") + ns("wait_untraced_ns");
    assert!(
        unexplained * 10 < total,
        "{unexplained} ns of {total} ns on the path unexplained (sleeping, no wakeup, untraced): {summary}"
    );
    let crossed: Vec<String> = summary["helpers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|h| h["comm"].as_str().map(str::to_owned))
        .collect();
    assert!(
        crossed.iter().any(|c| c.starts_with("mate-session")),
        "the path follows the panel back into the session manager: {crossed:?}"
    );

    let explained = total - unexplained;
    for finding in report["doctor"]["findings"].as_array().unwrap() {
        let gain = finding["gain"]["ns"].as_i64().unwrap_or(0);
        assert!(gain <= explained, "{} claims {gain} ns of {explained} ns explained", finding["title"]);
        assert!(
            !(finding["kind"] == "idle_waits" && gain > 0),
            "an idle finding with a gain on a session: {}",
            finding["title"]
        );
    }
    let milestone =
        |what: &str| stderr.lines().any(|l| l.trim_start().starts_with("milestone") && l.contains(what));
    assert!(
        milestone(" wm by pid") && milestone(" window:mate-panel by pid"),
        "record names the milestones: {stderr}"
    );
}
