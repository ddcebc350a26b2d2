//! The units of a container boot in the reports: one boot recorded (the cached rootfs
//! of `support::container`), then `coldstart report` (text and JSON) and `coldstart
//! export` checked on what systemd's units did: journald's process and CPU, the chain of
//! units to multi-user.target in time order; and the boot's chart, HTML report and export
//! are the kinds a bootchart2 log imported with `coldstart import bootchart2` gives.

mod support;
use support::container::{bootable_rootfs, remove_nspawn_leftovers};
use support::{coldstart, json, private_dir};

use std::path::Path;

#[test]
fn a_recorded_boot_reports_its_units_split_and_the_chain_to_the_target() {
    let test = "a_recorded_boot_reports_its_units";
    let Some(root) = bootable_rootfs(test) else { return };
    let dir = private_dir();
    let trace = dir.path().join("boot.coldstart");
    let output = coldstart()
        .args(["record", "--cold", "--until", "unit:multi-user.target", "--timeout", "60", "-o"])
        .arg(&trace)
        .args([
            "--",
            "systemd-nspawn",
            "-b",
            "-D",
            root.to_str().unwrap(),
            "--register=no",
            "--keep-unit",
            "--console=passive",
        ])
        .timeout(std::time::Duration::from_secs(180))
        .output()
        .unwrap();
    remove_nspawn_leftovers("bookworm-boot");
    assert!(trace.exists(), "no trace: {}", String::from_utf8_lossy(&output.stderr));

    let report_json = dir.path().join("report.json");
    coldstart()
        .arg("report")
        .arg(&trace)
        .args(["--format", "json", "-o"])
        .arg(&report_json)
        .assert()
        .success();
    let a = json(&report_json);
    let units = a["units"].as_array().expect("units in the JSON report");
    let unit = |name: &str| units.iter().find(|u| u["name"] == name).unwrap_or_else(|| panic!("no {name}"));
    let journald = unit("systemd-journald.service");
    assert_eq!(journald["pids_from"], "main_pid");
    let pid = journald["pids"][0].as_i64().expect("journald's pid");
    let comm = a["processes"].as_array().unwrap().iter().find(|p| p["pid"] == pid).map(|p| p["comm"].clone());
    assert_eq!(comm, Some("systemd-journald".into()), "named by its executable, not the 15-byte comm");
    assert!(journald["cpu_time_ns"].as_i64().is_some_and(|ns| ns > 0), "journald ran: {journald}");
    let took = journald["took_ns"].as_i64().unwrap();
    let split: i64 = ["cpu_ns", "io_wait_ns", "manager_wait_ns", "other_ns"]
        .iter()
        .map(|k| journald[k].as_i64().unwrap())
        .sum::<i64>()
        + journald["unit_waits"].as_array().unwrap().iter().map(|w| w["ns"].as_i64().unwrap()).sum::<i64>();
    assert_eq!(split, took, "the split adds up to the start");

    let chain = &a["unit_chain"];
    assert_eq!(chain["target"], "multi-user.target");
    let links: Vec<&str> = chain["links"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(links.first(), Some(&"multi-user.target"));
    assert!(links.len() >= 4, "a chain of a few units: {links:?}");
    for pair in links.windows(2) {
        let (later, earlier) = (unit(pair[0]), unit(pair[1]));
        let start = later["activating_ns"].as_i64().unwrap();
        let before = earlier["active_ns"].as_i64().unwrap();
        assert!(start >= before - 1_000_000, "{} started before {} was active", pair[0], pair[1]);
        assert_eq!(later["after"], pair[1]);
    }

    let text = coldstart().arg("report").arg(&trace).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("\nsystemd units ("), "{text}");
    assert!(text.contains("\nChain to multi-user.target ("), "{text}");
    assert!(text.contains("systemd-journald.service"));

    let chain = coldstart().arg("report").arg(&trace).args(["--chain-to", "dbus.service"]).output().unwrap();
    let chain = String::from_utf8_lossy(&chain.stdout);
    assert!(chain.contains("\nChain to dbus.service (") && chain.contains("\n  dbus.service @"), "{chain}");
    let unknown =
        coldstart().arg("report").arg(&trace).args(["--chain-to", "nope.service"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unknown.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("no unit nope.service became active in this trace"), "{stderr}");

    let export = dir.path().join("boot.json");
    coldstart().arg("export").arg(&trace).args(["-f", "chrome", "-o"]).arg(&export).assert().success();
    let events = json(&export);
    let starts = events["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["cat"] == "unit" && e["ph"] == "X" && e["name"] == "systemd-journald.service")
        .count();
    assert_eq!(starts, 1, "journald's start is a slice of the units track");

    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data/example1");
    let imported = dir.path().join("bootchart2.coldstart");
    coldstart().args(["import", "bootchart2"]).arg(&example).arg("-o").arg(&imported).assert().success();
    let graphs = |trace: &Path, name: &str| {
        let chart = dir.path().join(name);
        coldstart().arg("report").arg(trace).args(["-f", "svg", "-o"]).arg(&chart).assert().success();
        let html = dir.path().join(format!("{name}.html"));
        coldstart().arg("report").arg(trace).args(["-f", "html", "-o"]).arg(&html).assert().success();
        let events = dir.path().join(format!("{name}.json"));
        coldstart().arg("export").arg(trace).args(["-f", "chrome", "-o"]).arg(&events).assert().success();
        let chart = std::fs::read_to_string(&chart).unwrap();
        let mut names: Vec<String> = chart
            .split("class=\"graph-name\"")
            .skip(1)
            .filter_map(|rest| Some(rest.split_once('>')?.1.split_once('<')?.0.to_owned()))
            .collect();
        names.sort();
        names
    };
    let boot_graphs = graphs(&trace, "boot.svg");
    let imported_graphs = graphs(&imported, "bootchart2.svg");
    for graph in &imported_graphs {
        assert!(boot_graphs.contains(graph), "the boot's chart has no {graph}: {boot_graphs:?}");
    }
    // What a bootchart2 log does not hold: block requests (the seek plot) and units.
    let only_recorded: Vec<&String> = boot_graphs.iter().filter(|g| !imported_graphs.contains(g)).collect();
    assert!(only_recorded.contains(&&"systemd units".to_owned()), "{boot_graphs:?}");
    assert!(
        only_recorded.iter().all(|g| *g == "systemd units" || g.ends_with(" seeks")),
        "{only_recorded:?} not in the bootchart2 chart"
    );
}
