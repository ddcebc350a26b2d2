//! A container boot recorded from the host: `coldstart record --cold -- systemd-nspawn -b`
//! on a Debian rootfs made once with mmdebstrap and cached outside the clone. The trace
//! holds the container's systemd, journald and dbus-daemon, names the container's files
//! by the host paths that open them, and nothing of the container is left running.

mod support;
use support::container::{ROOTFS, bootable_rootfs, processes_rooted_at, remove_nspawn_leftovers};
use support::{coldstart, private_dir};

use std::process::Command;

use coldstart_trace::Trace;

#[test]
fn a_container_boot_is_recorded_with_its_services_and_host_paths_and_ends_whole() {
    let test = "a_container_boot_is_recorded";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    let out = dir.path().join("boot.coldstart");
    let output = coldstart()
        .args(["record", "--cold", "--until", "unit:multi-user.target", "--timeout", "60", "-o"])
        .arg(&out)
        .args(["--", "systemd-nspawn", "-b", "-D"])
        .arg(&root)
        .args(["--register=no", "--keep-unit", "--console=passive"])
        .timeout(std::time::Duration::from_secs(180))
        .output()
        .unwrap();
    let left = processes_rooted_at(&root);
    let nspawn_left =
        Command::new("pgrep").args(["-f", &format!("systemd-nspawn -b -D {ROOTFS}")]).output().unwrap();
    remove_nspawn_leftovers("bookworm-boot");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(out.exists(), "no trace: {stderr}");
    assert!(left.is_empty(), "processes of the container still run: {left:?}");
    assert!(nspawn_left.stdout.is_empty(), "systemd-nspawn still runs");

    // A boot's plan is in disk order by default (`--order auto`).
    let plan = dir.path().join("boot.plan");
    let planned = coldstart().args(["prefetch", "plan"]).arg(&out).arg("-o").arg(&plan).output().unwrap();
    let said = String::from_utf8_lossy(&planned.stderr);
    assert!(planned.status.success() && said.contains("order: disk (a boot or a session"), "{said}");
    let plan: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(plan["settings"]["order"], "disk", "{plan:#}");

    let trace = Trace::read(&out).unwrap();
    let ready = trace.meta.ready.as_ref().expect("a ready time");
    assert_eq!(ready.reason.to_string(), "unit:multi-user.target", "{stderr}");
    let unit = |name: &str| trace.units.iter().find(|u| u.name == name);
    let target =
        unit("multi-user.target").unwrap_or_else(|| panic!("no multi-user.target in {:?}", trace.units));
    let ready = ready.t_ns;
    // Both are systemd's one timestamp, moved to the boot clock by two readings of the clocks.
    let off = target.active_ns.map(|t| (t - ready).abs());
    assert!(off.is_some_and(|d| d < 1_000_000), "the unit's active time is the ready time: {off:?}");
    let journald = unit("systemd-journald.service").expect("journald's unit");
    assert!(
        journald.active_ns.is_some_and(|t| t > 0 && t < ready),
        "journald became active before the target"
    );
    let journald_pid = journald.pid.expect("journald's main process");
    let journald_comm = trace.processes.iter().find(|p| p.pid == journald_pid).map(|p| p.comm.as_str());
    assert_eq!(journald_comm, Some("systemd-journal"), "the unit's pid is the host pid of journald");
    let comms: Vec<&str> = trace.processes.iter().filter(|p| p.in_scope).map(|p| p.comm.as_str()).collect();
    for service in ["systemd", "systemd-journal", "dbus-daemon"] {
        assert!(comms.contains(&service), "{service} not in the trace: {comms:?}");
    }
    let prefix = format!("{ROOTFS}/");
    let systemd = format!("{ROOTFS}/usr/lib/systemd/systemd");
    let paths: Vec<&str> = trace.files.iter().filter_map(|f| f.path.as_deref()).collect();
    assert!(paths.contains(&systemd.as_str()), "the container's systemd is not named by its host path");
    let in_container = paths.iter().filter(|p| p.starts_with(&prefix)).count();
    assert!(in_container >= 50, "only {in_container} files named under {ROOTFS}");
}
