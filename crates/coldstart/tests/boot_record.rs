//! `coldstart boot enable|status|disable` on a root that is not this machine's (the unit
//! passes `systemd-analyze verify`, and disable leaves the tree as it was), and `record
//! --boot` on this host: the whole system from the start, READY=1 once tracing is on, the
//! time before recording from the kernel's uptime, a private trace file.

mod support;
use support::container::{Overlay, bootable_rootfs, halt, spawn_boot, wait_for_trace};
use support::{can_record, coldstart, have_systemd_analyze, man_path, private_dir, unavailable};

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coldstart_trace::{Scope, Trace};

/// Every entry under `root`: path, type and mode, link target, and file contents.
fn listing(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let what = if meta.file_type().is_symlink() {
                format!("-> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_file() {
                format!(
                    "{} bytes {:?}",
                    meta.len(),
                    std::fs::read(&path).unwrap().iter().map(|&b| u64::from(b)).sum::<u64>()
                )
            } else {
                String::new()
            };
            out.push(format!("{rel} {:o} {what}", meta.mode()));
            if meta.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out
}

fn text(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

#[test]
fn enable_writes_a_unit_systemd_accepts_and_disable_leaves_the_root_as_it_was() {
    let dir = private_dir();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("etc/systemd")).unwrap();
    std::fs::write(root.join("etc/hostname"), "image\n").unwrap();
    let before = listing(&root);

    let out = coldstart()
        .args(["boot", "enable", "--root"])
        .arg(&root)
        .args([
            "--until",
            "unit:multi-user.target",
            "--until",
            "idle:2000",
            "--timeout",
            "90",
            "--install-binary",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let unit = root.join("etc/systemd/system/coldstart-boot.service");
    let shipped = include_str!("../../../contrib/systemd/coldstart-boot.service");
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), shipped, "the installed unit is the shipped one");
    let link = root.join("etc/systemd/system/sysinit.target.wants/coldstart-boot.service");
    assert_eq!(std::fs::read_link(&link).unwrap(), Path::new("/etc/systemd/system/coldstart-boot.service"));
    let binary = root.join("usr/local/bin/coldstart");
    assert_eq!(std::fs::metadata(&binary).unwrap().permissions().mode() & 0o777, 0o755);

    if have_systemd_analyze() {
        let out = Command::new("systemd-analyze")
            .env("MANPATH", man_path(dir.path()))
            .arg("verify")
            .arg(format!("--root={}", root.display()))
            .arg("coldstart-boot.service")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("coldstart-boot"), "verify: {stderr}");
    }

    let status = coldstart().args(["boot", "status", "--root"]).arg(&root).output().unwrap();
    let said = text(&status);
    assert!(status.status.success(), "{said}");
    assert!(said.contains("enabled in"), "{said}");
    assert!(
        said.contains("/usr/local/bin/coldstart record --boot --until unit:multi-user.target --until idle:2000 --timeout 90"),
        "{said}"
    );
    assert!(!said.contains("MISSING"), "{said}");

    // Enabling again replaces the options; a unit enable did not write is left alone.
    let again = coldstart()
        .args(["boot", "enable", "--root"])
        .arg(&root)
        .args(["--until", "mark:up", "--binary", "/usr/local/bin/coldstart"])
        .output()
        .unwrap();
    assert!(again.status.success(), "{}", text(&again));
    let said = text(&coldstart().args(["boot", "status", "--root"]).arg(&root).output().unwrap());
    assert!(said.contains("--until mark:up --timeout 120"), "{said}");

    let out = coldstart().args(["boot", "disable", "--root"]).arg(&root).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(listing(&root), before, "disable left the tree changed");
    let said = text(&coldstart().args(["boot", "status", "--root"]).arg(&root).output().unwrap());
    assert!(said.contains("not enabled"), "{said}");

    std::fs::create_dir_all(unit.parent().unwrap()).unwrap();
    std::fs::write(&unit, "[Service]\nExecStart=/bin/true\n").unwrap();
    let refused = coldstart().args(["boot", "enable", "--root"]).arg(&root).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert_eq!(std::fs::read_to_string(&unit).unwrap(), "[Service]\nExecStart=/bin/true\n");
}

#[test]
fn bad_boot_arguments_exit_2_in_one_line() {
    for args in [
        vec!["boot", "enable", "--root", "/nonexistent/root"],
        vec!["boot", "enable", "--until", "exit", "--root", "/tmp"],
        vec!["boot", "enable", "--binary", "coldstart", "--root", "/tmp"],
        vec!["boot", "enable", "--timeout", "0"],
        vec!["boot", "status", "--root", "/nonexistent/root"],
        vec!["record", "--boot", "--until", "exit", "--until", "idle"],
        vec!["record", "--boot", "--", "true"],
        vec!["record", "--boot", "--until", "output:ready"],
        vec!["boot", "enable", "--until", "output:ready", "--root", "/tmp"],
        vec!["boot", "enable", "--prefetch", "--verify-boots", "0", "--root", "/tmp"],
        vec!["boot", "enable", "--verify-boots", "5", "--root", "/tmp"],
        vec!["boot", "disable", "--purge", "--root", "/nonexistent/root"],
    ] {
        run(&args);
    }
    if !std::fs::read_to_string("/proc/1/comm").is_ok_and(|c| c.trim() == "systemd") {
        // The default condition, unit:multi-user.target, could never be met here.
        run(&["record", "--boot"]);
    }
    fn run(args: &[&str]) {
        let dir = private_dir();
        let out = coldstart().current_dir(dir.path()).args(args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        let lines = stderr
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with("Usage") && !l.starts_with("For more"))
            .count();
        assert_eq!(lines, 1, "{args:?}: {stderr}");
    }
}

fn uptime_ns() -> i64 {
    let text = std::fs::read_to_string("/proc/uptime").unwrap();
    let secs: f64 = text.split_whitespace().next().unwrap().parse().unwrap();
    (secs * 1e9) as i64
}

#[test]
fn record_boot_records_the_system_from_its_start_and_says_how_long_before() {
    let test = "record_boot_records_the_system";
    if !can_record(test) {
        return;
    }
    if std::fs::read_to_string("/proc/1/comm").is_ok_and(|c| c.trim() == "systemd")
        && unavailable(test, "PID 1 is systemd here: the time before recording comes from it, not the uptime")
    {
        return;
    }
    let dir = private_dir();
    let root = dir.path().join("root");
    let traces = root.join("var/log/coldstart");
    let out = traces.join("boot-test.coldstart");
    let notify = dir.path().join("notify");
    let socket = UnixDatagram::bind(&notify).unwrap();
    socket.set_read_timeout(Some(Duration::from_secs(60))).unwrap();

    let before_ns = uptime_ns();
    let mut child = Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["record", "--boot", "--no-cpu-samples", "--until", "mark:up", "--timeout", "60", "-o"])
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .env("NOTIFY_SOCKET", &notify)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 256];
    let received = socket.recv(&mut buf);
    let after_ready_ns = uptime_ns();
    let instances: Vec<String> = std::fs::read_dir("/sys/kernel/tracing/instances")
        .map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut marks = None;
    let mut seen = String::new();
    let started = Instant::now();
    while marks.is_none() && started.elapsed() < Duration::from_secs(60) {
        let mut line = String::new();
        if stderr.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        seen.push_str(&line);
        marks = line
            .split("COLDSTART_MARKS=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .map(PathBuf::from);
    }
    let marked = marks.as_ref().map(|m| coldstart().args(["mark", "up"]).env("COLDSTART_MARKS", m).output());
    let status = child.wait().unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    seen.push_str(&rest);

    let n = received.unwrap_or_else(|e| panic!("no READY=1 on NOTIFY_SOCKET: {e}\n{seen}"));
    assert_eq!(&buf[..n], b"READY=1");
    assert!(
        instances.iter().any(|i| i.contains("coldstart")),
        "READY=1 came before tracing was on: {instances:?}"
    );
    assert!(marked.is_some_and(|m| m.is_ok_and(|o| o.status.success())), "no marks file named: {seen}");
    assert!(status.success(), "{status}: {seen}");

    let trace = Trace::read(&out).unwrap();
    assert_eq!(trace.meta.scope, Scope::System);
    assert_eq!(
        trace.meta.command[1..4],
        ["record", "--boot", "--no-cpu-samples"],
        "the recorder's own command line"
    );
    assert!(!seen.contains("exit status"), "a boot has no command's status: {seen}");
    assert_eq!(trace.meta.ready.as_ref().map(|r| r.reason.to_string()).as_deref(), Some("mark:up"), "{seen}");
    let phases: Vec<(&str, i64)> =
        trace.meta.before_recording.iter().map(|p| (p.phase.as_str(), p.ns)).collect();
    assert_eq!(phases.len(), 1, "{phases:?}");
    let (phase, ns) = phases[0];
    assert_eq!(phase, "uptime");
    assert_eq!(ns, trace.meta.start_clock_ns, "the uptime at t = 0 is the boot clock at t = 0");
    // /proc/uptime has centiseconds: t = 0 falls between the two readings, within them.
    assert!(
        ns >= before_ns - 10_000_000 && ns <= after_ready_ns + 10_000_000,
        "{before_ns} <= {ns} <= {after_ready_ns}"
    );
    assert!(seen.contains("before      recording:") && seen.contains("since the kernel started"), "{seen}");
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(
        std::fs::metadata(&traces).unwrap().permissions().mode() & 0o777,
        0o700,
        "the directory made for it"
    );
    let hold = trace.processes.iter().filter(|p| p.in_scope).count();
    assert!(hold > 1, "the whole system is in scope, not one tree: {hold}");

    let info = text(&coldstart().arg("info").arg(&out).output().unwrap());
    assert!(info.contains("before recording:") && info.contains("since the kernel started"), "{info}");
    let status = text(&coldstart().args(["boot", "status", "--root"]).arg(&root).output().unwrap());
    assert!(status.contains("not enabled"), "{status}");
    let ready = trace
        .meta
        .ready
        .as_ref()
        .map(|r| format!("ready at {:.3} s (mark:up)", r.t_ns as f64 / 1e9))
        .unwrap();
    assert!(status.contains("boot-test.coldstart") && status.contains(&ready), "{status}");
}

#[test]
fn boot_enable_records_a_container_boot_from_inside() {
    let test = "boot_enable_records_a_container_boot";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    let Some(overlay) = Overlay::mount(test, &root, dir.path()) else { return };
    let out = coldstart()
        .args(["boot", "enable", "--root"])
        .arg(&overlay.merged)
        .args(["--until", "unit:multi-user.target", "--timeout", "30"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(overlay.merged.join("usr/local/bin/coldstart"), "").unwrap();
    let mut nspawn = spawn_boot(&overlay.merged);
    let found =
        wait_for_trace(&overlay.upper.join("var/log/coldstart"), &mut nspawn, Duration::from_secs(90));
    halt(&mut nspawn);
    let journal = Command::new("journalctl")
        .arg("-D")
        .arg(overlay.merged.join("var/log/journal"))
        .args(["--no-pager", "-b", "0", "-u", "coldstart-boot.service"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let path =
        found.unwrap_or_else(|| panic!("no boot trace in the container's /var/log/coldstart:\n{journal}"));

    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("boot-") && name.len() == "boot-YYYYMMDD-HHMMSS.coldstart".len(), "{name}");
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let trace = Trace::read(&path).unwrap();
    assert_eq!(trace.meta.scope, Scope::System);
    let ready = trace.meta.ready.as_ref().map(|r| r.reason.to_string());
    assert_eq!(ready.as_deref(), Some("unit:multi-user.target"), "{journal}");
    let phases: Vec<&str> = trace.meta.before_recording.iter().map(|p| p.phase.as_str()).collect();
    assert_eq!(phases, ["host", "userspace"], "the container's manager gave its timestamps");
    let host = trace.meta.before_recording[0].ns;
    assert!(
        host > 0 && host < trace.meta.start_clock_ns,
        "the host was up {host} ns before the container started"
    );
    // Inside the container the kernel's events carry host pids, which its /proc does not
    // show: processes are recorded but many go unnamed (docs/boot.md, "In a container").
    let in_scope = trace.processes.iter().filter(|p| p.in_scope).count();
    assert!(in_scope >= 10, "only {in_scope} processes recorded");
    assert!(
        trace.units.iter().any(|u| u.name == "dbus.service" && u.active_ns.is_some()),
        "{:?}",
        trace.units
    );
    assert!(trace.units.iter().any(|u| u.name == "multi-user.target"), "{:?}", trace.units);
}
