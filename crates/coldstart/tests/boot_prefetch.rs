//! The boot prefetch service's whole cycle on the container boot: `boot enable --prefetch`
//! with two learning boots and one verification boot each way, five boots (learn twice, the
//! plan made from both; with and without the plan in a random order; the decision), `boot
//! status` showing them, and `boot disable` leaving no unit file and nothing running.

mod support;
use support::container::{
    Overlay, bootable_rootfs, halt, processes_rooted_at, spawn_boot, spawn_wrapper_boot,
};
use support::{coldstart, private_dir};

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use coldstart_bench::boot_service::{BootRow, Role};

fn text(output: &std::process::Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// The file's tests boot one container at a time: two recordings of whole containers at once
/// see each other's boots (each records the whole system).
static ONE_CONTAINER_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn history(path: &Path) -> Vec<BootRow> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The journal of the prefetch unit in the container.
fn unit_journal(merged: &Path) -> String {
    Command::new("journalctl")
        .arg("-D")
        .arg(merged.join("var/log/journal"))
        .args(["--no-pager", "-u", "coldstart-boot.service"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// `boot enable --prefetch --root MERGED --timeout 60 EXTRA…`, and the empty file the bind
/// mount of this build of coldstart needs in the container.
fn enable_prefetch(merged: &Path, extra: &[&str]) -> String {
    let out = coldstart()
        .args(["boot", "enable", "--prefetch", "--root"])
        .arg(merged)
        .args(["--timeout", "60"])
        .args(extra)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(merged.join("usr/local/bin/coldstart"), "").unwrap();
    text(&out)
}

/// Boots the container until the service has written row `rows` of its history; halts it.
fn boot_once(merged: &Path, history_path: &Path, rows: usize) -> Vec<BootRow> {
    boot_until_row(spawn_boot(merged), merged, history_path, rows)
}

fn boot_until_row(
    mut nspawn: std::process::Child,
    merged: &Path,
    history_path: &Path,
    rows: usize,
) -> Vec<BootRow> {
    let started = Instant::now();
    while history(history_path).len() < rows
        && started.elapsed() < Duration::from_secs(90)
        && nspawn.try_wait().ok().flatten().is_none()
    {
        std::thread::sleep(Duration::from_millis(200));
    }
    halt(&mut nspawn);
    let got = history(history_path);
    if got.len() < rows {
        panic!("boot {rows} wrote no row to the history:\n{}", unit_journal(merged));
    }
    got
}

#[test]
fn the_prefetch_service_learns_verifies_and_decides_over_five_container_boots() {
    let _one = ONE_CONTAINER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let test = "the_prefetch_service_learns_verifies_and_decides";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    // A copy, not an overlay: the plan is of the boot's own files only where their paths are known.
    let Some(overlay) = Overlay::copy(test, &root, dir.path()) else { return };
    let merged = &overlay.merged;
    let said = enable_prefetch(
        merged,
        &["--verify-boots", "1", "--reverify-every", "10", "--keep-traces", "3", "--learn-boots", "2"],
    );
    assert!(said.contains("boot service --until unit:multi-user.target"), "{said}");
    if let Ok(verify) = Command::new("systemd-analyze")
        .arg("verify")
        .arg(format!("--root={}", merged.display()))
        .arg("coldstart-boot.service")
        .output()
    {
        let said = String::from_utf8_lossy(&verify.stderr);
        assert!(
            !said.lines().any(|l| l.contains("coldstart-options.conf") || l.contains("Unknown")),
            "the drop-in of --prefetch: {said}"
        );
    }
    let history_path = overlay.upper.join("var/lib/coldstart/boot/history.jsonl");

    let mut rows = Vec::new();
    for boot in 1..=5 {
        rows = boot_once(merged, &history_path, boot);
    }
    let roles: Vec<Role> = rows.iter().map(|r| r.role).collect();
    assert_eq!(roles[..2], [Role::Learn, Role::Learn], "{rows:#?}");
    assert!(rows[1].reason.contains("learning boot 2 of 2"), "{rows:#?}");
    let mut verifying = [roles[2], roles[3]];
    verifying.sort_by_key(|r| *r == Role::WithoutPlan);
    assert_eq!(verifying, [Role::WithPlan, Role::WithoutPlan], "one boot each way: {rows:#?}");
    let states: Vec<&str> = rows.iter().map(|r| r.state.as_str()).collect();
    assert_eq!(states[..4], ["learning", "learning", "verifying", "verifying"], "{rows:#?}");
    let meta = std::fs::read_to_string(overlay.upper.join("var/lib/coldstart/boot/plan-meta.json")).unwrap();
    let (first, second) = (rows[0].trace.clone().unwrap(), rows[1].trace.clone().unwrap());
    assert!(meta.contains(&format!("{first} {second}")), "the plan of both learning boots: {meta}");
    let last = &rows[4];
    let verdict = last.verdict.unwrap_or_else(|| panic!("no verdict after one boot each way: {rows:#?}"));
    assert_eq!((verdict.with, verdict.without), (1, 1));
    let expected = if verdict.keeps() { ("kept", Role::WithPlan) } else { ("off", Role::WithoutPlan) };
    assert_eq!((last.state.as_str(), last.role), expected, "{rows:#?}");
    for row in &rows {
        let t = row.target_s.unwrap_or_else(|| panic!("no time to target: {row:?}"));
        assert!(t > 0.0 && t < 60.0, "{row:?}");
        assert!(row.machine.kernel.len() > 1, "{row:?}");
    }
    for row in &rows[..2] {
        assert!(row.plan.is_none() && row.plan_used.is_none(), "{row:?}");
    }
    let plan = rows[2].plan.clone().expect("the plan made after learning");
    for row in &rows[2..] {
        assert_eq!(row.plan.as_ref(), Some(&plan), "{row:?}");
        let used = row.plan_used.unwrap_or_else(|| panic!("no share of the plan used: {row:?}"));
        assert!(used > 0.0 && used <= 1.0, "{row:?}\nall rows: {rows:#?}");
    }
    let traces = std::fs::read_dir(overlay.upper.join("var/lib/coldstart/boot/traces")).unwrap().count();
    assert_eq!(traces, 3, "--keep-traces 3: the verifying boots' and the last");
    assert!(overlay.upper.join("var/lib/coldstart/boot/replay.json").exists(), "the replay's report is kept");
    let traces_dir = overlay.upper.join("var/lib/coldstart/boot/traces");
    let replayed = rows
        .iter()
        .filter(|r| r.role == Role::WithPlan)
        .filter_map(|r| coldstart_trace::Trace::read(&traces_dir.join(r.trace.as_ref()?)).ok())
        .next_back()
        .expect("a kept trace of a boot with the plan");
    // The replay is a second coldstart exec'd in the recording (the first holds it): argv is
    // unread across the container's PID namespace, so the execs are counted.
    let ours = replayed.execs.iter().filter(|e| e.path.ends_with("/coldstart") && e.t_ns >= 0).count();
    assert_eq!(ours, 2, "the replay starts once the recording runs: {:?}", replayed.execs);
    let shown = coldstart()
        .args(["prefetch", "show", "--paths"])
        .arg(overlay.upper.join("var/lib/coldstart/boot/boot.plan"))
        .output()
        .unwrap();
    let paths = String::from_utf8_lossy(&shown.stdout);
    assert!(
        paths.lines().filter(|p| !p.contains("coldstart")).count() >= 10 && paths.contains("systemd"),
        "the plan holds the boot's own files: {paths}"
    );

    let status = coldstart().args(["boot", "status", "--root"]).arg(merged).output().unwrap();
    let said = text(&status);
    assert!(status.status.success(), "{said}");
    eprintln!("{said}");
    for word in ["learning", "with plan", "without plan", "verifying:", "last verification: with the plan"] {
        assert!(said.contains(word), "{word}: {said}");
    }

    let out = coldstart().args(["boot", "disable", "--root"]).arg(merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!merged.join("etc/systemd/system/coldstart-boot.service").exists());
    assert!(!merged.join("etc/systemd/system/coldstart-boot.service.d").exists());
    assert!(!merged.join("etc/systemd/system/sysinit.target.wants/coldstart-boot.service").exists());
    assert!(history_path.exists(), "the state stays without --purge");
    assert!(text(&out).contains("--purge removes it"), "{}", text(&out));
    let out = coldstart().args(["boot", "disable", "--purge", "--root"]).arg(merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!merged.join("var/lib/coldstart/boot").exists());
    assert_eq!(processes_rooted_at(merged), Vec::<String>::new(), "processes left in the container's root");
}

/// Under the init= wrapper the service runs before systemd (its replay too), the unit steps
/// aside, and each boot is one row: learn, then one boot with the plan and one without.
#[test]
fn the_init_wrapper_runs_the_prefetch_service_before_systemd() {
    let _one = ONE_CONTAINER_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let test = "the_init_wrapper_runs_the_prefetch_service";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    let Some(overlay) = Overlay::mount(test, &root, dir.path()) else { return };
    let merged = &overlay.merged;
    enable_prefetch(merged, &["--verify-boots", "1", "--learn-boots", "1"]);
    let history_path = overlay.upper.join("var/lib/coldstart/boot/history.jsonl");
    let mut consoles = Vec::new();
    let mut rows = Vec::new();
    for boot in 1..=3 {
        let console = dir.path().join(format!("console-{boot}"));
        let nspawn = spawn_wrapper_boot(merged, &console, &[]);
        rows = boot_until_row(nspawn, merged, &history_path, boot);
        consoles.push(std::fs::read_to_string(&console).unwrap_or_default());
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(history(&history_path).len(), 3, "one row a boot, none from the unit: {rows:#?}");
    for console in &consoles {
        assert!(console.contains("coldstart-init: the prefetch service runs this boot (pid"), "{console}");
    }
    let roles: Vec<Role> = rows.iter().map(|r| r.role).collect();
    assert_eq!(roles[0], Role::Learn, "{rows:#?}");
    let mut verifying = [roles[1], roles[2]];
    verifying.sort_by_key(|r| *r == Role::WithoutPlan);
    assert_eq!(verifying, [Role::WithPlan, Role::WithoutPlan], "{rows:#?}");
    let with = if roles[1] == Role::WithPlan { 1 } else { 2 };
    assert!(consoles[with].contains("coldstart: this boot: with plan"), "{}", consoles[with]);
    for row in &rows {
        let t = row.target_s.unwrap_or_else(|| panic!("no time to target: {row:?}"));
        assert!(t > 0.0 && t < 60.0, "{row:?}");
    }
    let used = rows[with].plan_used.unwrap_or_else(|| panic!("no share of the plan used: {rows:#?}"));
    assert!(used > 0.0 && used <= 1.0, "{rows:#?}");
    let journal = unit_journal(merged);
    assert!(journal.contains("the init= wrapper runs the prefetch service this boot"), "{journal}");
    let trace = rows[2].trace.clone().unwrap();
    let trace =
        coldstart_trace::Trace::read(&overlay.upper.join("var/lib/coldstart/boot/traces").join(trace))
            .unwrap();
    assert!(trace.meta.command.iter().any(|a| a == "--init-started-ns"), "{:?}", trace.meta.command);
    let init = trace.execs.iter().find(|e| e.path == "/sbin/init").expect("systemd's exec in the trace");
    assert!(init.t_ns >= 0, "the recording began before systemd: {init:?}");
    let out = coldstart().args(["boot", "disable", "--purge", "--root"]).arg(merged).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(processes_rooted_at(merged), Vec::<String>::new(), "processes left in the container's root");
}
