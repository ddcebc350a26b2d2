//! `coldstart boot init`, the init= wrapper: refused outside PID 1; and, as the command
//! `systemd-nspawn` runs as PID 1 of a Debian container, it starts the recorder, execs the
//! container's systemd once tracing is on, and the trace written in the container's
//! /var/log/coldstart holds systemd from its exec, before its first unit.

mod support;
use support::container::{Overlay, bootable_rootfs, halt, spawn_wrapper_boot, wait_for_trace};
use support::{coldstart, private_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use coldstart_trace::{Scope, Trace};

#[test]
fn boot_init_outside_pid_1_is_refused_in_one_line() {
    for args in [
        vec!["boot", "init"],
        vec!["boot", "init", "--until", "exit"],
        vec!["boot", "init", "--timeout", "0"],
        vec!["boot", "init", "--", "/sbin/init", "single"],
    ] {
        let out = coldstart().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines = stderr
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("Usage") && !l.starts_with("For more"))
            .count();
        assert_eq!(lines, 1, "{args:?}: {stderr}");
    }
    let dir = private_dir();
    let link = dir.path().join("coldstart-init");
    std::os::unix::fs::symlink(assert_cmd::cargo::cargo_bin!("coldstart"), &link).unwrap();
    let out = Command::new(&link).arg("single").output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.starts_with("coldstart-init: error: ") && stderr.contains("PID 1"), "{stderr}");
}

/// Processes whose root is `dir`: what of the container still runs.
fn processes_under(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| std::fs::read_link(e.path().join("root")).is_ok_and(|r| r == dir))
        .map(|e| {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            format!("{} {}", e.file_name().to_string_lossy(), comm.trim())
        })
        .collect()
}

#[test]
fn boot_init_records_a_container_boot_from_before_systemd() {
    let test = "boot_init_records_a_container_boot";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    let Some(overlay) = Overlay::mount(test, &root, dir.path()) else { return };
    std::fs::write(overlay.merged.join("usr/local/bin/coldstart"), "").unwrap();
    let console_path = dir.path().join("console");
    let mut nspawn = spawn_wrapper_boot(
        &overlay.merged,
        &console_path,
        &["--until", "unit:multi-user.target", "--timeout", "60"],
    );
    let found =
        wait_for_trace(&overlay.upper.join("var/log/coldstart"), &mut nspawn, Duration::from_secs(120));
    let halted = halt(&mut nspawn);
    let console = std::fs::read_to_string(&console_path).unwrap_or_default();
    let path =
        found.unwrap_or_else(|| panic!("no boot trace in the container's /var/log/coldstart:\n{console}"));
    assert!(halted, "the container did not halt on SIGRTMIN+3 within 30 s:\n{console}");
    let left = processes_under(&overlay.merged);
    assert!(left.is_empty(), "still running in the container: {left:?}");
    assert!(console.contains("coldstart-init: recording the boot"), "{console}");

    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("boot-") && name.len() == "boot-YYYYMMDD-HHMMSS.coldstart".len(), "{name}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let trace = Trace::read(&path).unwrap();
    assert_eq!(trace.meta.scope, Scope::System);
    assert!(trace.meta.command.iter().any(|a| a == "--under-init-wrapper"), "{:?}", trace.meta.command);
    let ready = trace.meta.ready.as_ref().map(|r| r.reason.to_string());
    assert_eq!(ready.as_deref(), Some("unit:multi-user.target"), "{console}");
    // PID 1 was the wrapper at t = 0, not systemd: the time before is the kernel's uptime.
    let phases: Vec<(&str, i64)> =
        trace.meta.before_recording.iter().map(|p| (p.phase.as_str(), p.ns)).collect();
    assert_eq!(phases, [("uptime", trace.meta.start_clock_ns)]);

    // The wrapper's exec of the real init is in the trace, and the process is systemd after it.
    let exec = trace.execs.iter().find(|e| e.path == "/sbin/init").unwrap_or_else(|| {
        panic!("no exec of /sbin/init: {:?}", trace.execs.iter().take(20).collect::<Vec<_>>())
    });
    assert!(exec.t_ns >= 0, "the exec of systemd is before t = 0: {exec:?}");
    let init = trace.processes.iter().find(|p| p.pid == exec.pid).unwrap();
    assert_eq!(init.comm, "systemd", "{init:?}");
    // journald by its exec: inside the container, /proc names host pids wrongly or not at all
    // (docs/boot.md, "A container"), while the exec events carry the file.
    let journald = trace
        .execs
        .iter()
        .find(|e| e.path.ends_with("/systemd-journald"))
        .unwrap_or_else(|| panic!("no exec of systemd-journald among {} execs", trace.execs.len()));
    assert!(journald.t_ns > exec.t_ns, "{journald:?} before systemd's exec {exec:?}");
    let process = trace.processes.iter().find(|p| p.pid == journald.pid).unwrap();
    assert!(process.start_ns.is_some_and(|t| t > exec.t_ns), "{process:?} forked before systemd's exec");
    // Every unit started after the recording began, and after systemd's exec.
    let first = trace
        .units
        .iter()
        .filter_map(|u| u.activating_ns.or(u.active_ns))
        .min()
        .unwrap_or_else(|| panic!("no unit times: {:?}", trace.units));
    assert!(first > exec.t_ns, "the first unit at {first} ns, systemd exec'd at {} ns", exec.t_ns);
    assert!(
        trace.units.iter().any(|u| u.name == "systemd-journald.service" && u.active_ns.is_some()),
        "{:?}",
        trace.units
    );
    assert!(trace.units.iter().any(|u| u.name == "multi-user.target"), "{:?}", trace.units);
}
