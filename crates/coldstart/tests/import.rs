//! `coldstart import bootchart2` end to end, on the example logs of coldstart-import.

mod support;
use support::coldstart;

use std::path::{Path, PathBuf};

use predicates::prelude::*;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data").join(name)
}

#[test]
fn import_then_info() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("boot.coldstart");
    coldstart()
        .args(["import", "bootchart2"])
        .arg(example("example2"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("processes  5071 (5022 with an exit record from kernel_pacct)"))
        .stdout(predicate::str::contains("boot end   48.38 s after the first sample (55.36 s uptime)"));
    coldstart()
        .arg("info")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("Bootchart2"))
        .stdout(predicate::str::contains("processes            5071"))
        .stdout(predicate::str::contains("files read from disk 0"))
        .stdout(predicate::str::contains("ready      48.383 s (bootchart2:end)"));
}

#[test]
fn never_overwrites_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("boot.coldstart");
    std::fs::write(&out, b"precious").unwrap();
    coldstart()
        .args(["import", "bootchart2"])
        .arg(example("example1"))
        .arg("-o")
        .arg(&out)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("already exists; use --force"));
    assert_eq!(std::fs::read(&out).unwrap(), b"precious");
    coldstart()
        .args(["import", "bootchart2"])
        .arg(example("example1"))
        .arg("-o")
        .arg(&out)
        .arg("--force")
        .assert()
        .success();
    assert_ne!(std::fs::read(&out).unwrap(), b"precious");
}

#[test]
fn default_output_is_named_after_the_input_in_the_current_folder() {
    let dir = tempfile::tempdir().unwrap();
    coldstart()
        .current_dir(dir.path())
        .args(["import", "bootchart2"])
        .arg(example("example1"))
        .assert()
        .success();
    assert!(dir.path().join("example1.coldstart").is_file());
}

#[test]
fn a_folder_that_is_not_a_log_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    coldstart()
        .args(["import", "bootchart2"])
        .arg(dir.path())
        .arg("-o")
        .arg(dir.path().join("x.coldstart"))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cannot import the bootchart2 log"))
        .stderr(predicate::str::contains("header is missing"))
        .stderr(predicate::str::contains("panicked").not());
}

#[test]
fn help_has_examples() {
    coldstart()
        .args(["import", "bootchart2", "--help"])
        .assert()
        .success()
        .stdout(predicate::str::contains("coldstart import bootchart2 /var/log/bootchart.tgz"));
}

/// The doctor reads a bootchart2 log as it is (no import first) and concludes what the
/// log shows: both example boots waited on a seeking disk for about 60 % of their time,
/// while a prefetcher of the time already ran; Fedora's syslogd waited 15 s on the disk.
#[test]
fn the_doctor_finds_the_example_boots_disk_bound_with_their_prefetcher_running() {
    for (name, prefetcher, min_gain_s, max_gain_s) in
        [("example1", "readahead-list", 10.0, 17.6), ("example2", "readahead", 15.0, 29.6)]
    {
        let out = coldstart().arg("doctor").arg(example(name)).args(["--format", "json"]).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("read as a bootchart2 log"));
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let first = &json["doctor"]["findings"][0];
        assert_eq!(first["kind"], "disk_bound", "{name}: {first:#}");
        let gain_s = first["gain"]["ns"].as_f64().unwrap() / 1e9;
        assert!((min_gain_s..=max_gain_s).contains(&gain_s), "{name}: gain {gain_s} s");
        let suggestion = first["suggestion"].as_str().unwrap();
        assert!(suggestion.contains(&format!("already runs a prefetcher ({prefetcher},")), "{suggestion}");
        assert_eq!(suggestion.contains("syslogd itself waited"), name == "example2", "{name}: {suggestion}");
        // Fedora Core 3's boot ran /sbin/hotplug for each device event, a chain of scripts each time.
        let storm = json["doctor"]["findings"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["kind"] == "many_short_processes");
        match name {
            "example2" => {
                let summary = storm.expect("the hotplug runs")["evidence"]["summary"].as_str().unwrap();
                assert!(summary.starts_with("249 runs of hotplug (started by khelper"), "{summary}");
            }
            _ => assert!(storm.is_none(), "{name}: {storm:?}"),
        }
    }
    coldstart()
        .arg("doctor")
        .arg(example("example1"))
        .assert()
        .success()
        .stdout(predicate::str::contains("coldstart doctor: a boot (bootchart2 log)"))
        .stdout(predicate::str::contains("Disk model and what-if: none"));
}

/// A gzip file that is not a bootchart2 tarball, and a folder with a `header` but no logs,
/// given to the doctor: one line and exit 2.
#[test]
fn the_doctor_refuses_what_only_looks_like_a_bootchart2_log() {
    let dir = tempfile::tempdir().unwrap();
    let gz = dir.path().join("not-a-log.tgz");
    std::fs::write(&gz, [0x1f, 0x8b, 0x08, 0x00, 1, 2, 3]).unwrap();
    let half = dir.path().join("half");
    std::fs::create_dir(&half).unwrap();
    std::fs::write(half.join("header"), "version = 0.8\n").unwrap();
    for path in [&gz, &half] {
        let out = coldstart().arg("doctor").arg(path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("coldstart: error:")).collect();
        assert_eq!(errors.len(), 1, "{stderr}");
        assert!(errors[0].contains("cannot read the bootchart2 log"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
