//! `coldstart doctor` and the findings in `coldstart report`, on a small trace written
//! here: 30 small files read one by one, each with a 5 ms wait.

mod support;
use support::coldstart;

use std::path::Path;

use coldstart_trace::*;
use predicates::prelude::*;

const MS: Nanos = 1_000_000;

fn write_trace(dir: &Path) -> std::path::PathBuf {
    let mut trace = Trace {
        meta: Meta {
            tool: "test".into(),
            command: vec!["app".into()],
            root_pid: Some(100),
            page_size: 4096,
            duration_ns: 400 * MS,
            ready: Some(Ready { t_ns: 300 * MS, reason: ReadyReason::Exit, pid: None, tid: None }),
            ..Meta::default()
        },
        processes: vec![Process {
            pid: 100,
            comm: "app".into(),
            start_ns: Some(0),
            end_ns: Some(300 * MS),
            in_scope: true,
            ..Process::default()
        }],
        ..Trace::default()
    };
    let disk = Dev::new(254, 0);
    trace.disks.push(Disk { dev: disk, name: "vda".into(), rotational: Some(false), ..Disk::default() });
    for i in 0..30u32 {
        let t = Nanos::from(i) * 6 * MS;
        trace.files.push(File {
            id: i + 1,
            dev: disk,
            ino: u64::from(i) + 10,
            path: Some(format!("/usr/share/app/menu/entry{i:02}.desktop")),
            size: Some(2048),
            ..File::default()
        });
        trace.page_fills.push(PageFill {
            t_ns: t + MS,
            pid: 100,
            tid: 100,
            file_id: i + 1,
            index: 0,
            pages: 1,
            origin: None,
        });
        trace.sched.push(SchedInterval {
            tid: 100,
            start_ns: t,
            end_ns: t + MS,
            state: ThreadState::Running,
        });
        trace.sched.push(SchedInterval {
            tid: 100,
            start_ns: t + MS,
            end_ns: t + 6 * MS,
            state: ThreadState::IoWait,
        });
        trace.block_ios.push(BlockIo {
            issue_ns: Some(t + MS),
            complete_ns: Some(t + 6 * MS),
            dev: disk,
            sector: Some(1_000_000 + u64::from(i) * 100_000),
            bytes: 4096,
            op: BlockOp::Read,
            rwbs: "R".into(),
            pid: 100,
            comm: "app".into(),
            file_id: Some(i + 1),
            error: 0,
        });
    }
    trace.sched.push(SchedInterval {
        tid: 100,
        start_ns: 180 * MS,
        end_ns: 300 * MS,
        state: ThreadState::Running,
    });
    let path = dir.join("app.coldstart");
    trace.write(&path).expect("write trace");
    path
}

#[test]
fn doctor_prints_findings_the_disk_model_and_the_what_if() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    coldstart()
        .arg("doctor")
        .arg(&trace)
        .env("LANG", "fr_FR.UTF-8")
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "1. 30 small files read from /usr/share/app/menu  [many_small_files;",
        ))
        .stdout(predicate::str::contains("Verify     coldstart bench --cold --runs 10 -- app"))
        .stdout(predicate::str::contains("What-if: time to ready on other storage (recorded 0.300 s"))
        .stdout(predicate::str::contains("hdd: 5400 rpm laptop hard disk"))
        .stdout(predicate::str::contains("LANG=fr_FR.UTF-8 of the user running coldstart doctor"));
}

#[test]
fn doctor_json_is_the_analysis_with_a_doctor_field() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let out = coldstart()
        .args(["doctor", "--format", "json", "--disk", "hdd", "--lang", "de_DE"])
        .arg(&trace)
        .output()
        .unwrap();
    assert!(out.status.success());
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["schema"], "coldstart-analysis");
    let doctor = &value["doctor"];
    assert_eq!(doctor["findings"][0]["kind"], "many_small_files");
    // 30 waits of 5 ms; one read of 60 KiB at the measured 5 ms per request and the hdd
    // class's positioning (the requests were slow) and bandwidth.
    assert_eq!(doctor["findings"][0]["gain"]["inputs"][0]["value"], 150e6);
    assert_eq!(doctor["languages_source"], "--lang de_DE");
    let what_if: Vec<&str> =
        doctor["what_if"].as_array().unwrap().iter().map(|w| w["disk"]["class"].as_str().unwrap()).collect();
    assert_eq!(what_if, ["measured", "hdd"]);
    // The analysis part still reads back as an analysis.
    let analysis = coldstart_report::json::read(&mut out.stdout.as_slice()).unwrap();
    assert_eq!(analysis.overview.files_read, 30);
}

#[test]
fn the_report_shows_the_findings_in_text_and_json() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    coldstart()
        .arg("report")
        .arg(&trace)
        .assert()
        .success()
        .stdout(predicate::str::contains("Findings (coldstart doctor"))
        .stdout(predicate::str::contains("medium confidence] 30 small files read from /usr/share/app/menu"));
    let out = coldstart().args(["report", "--format", "json"]).arg(&trace).output().unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(value["doctor"]["findings"].as_array().map(Vec::len), Some(1));
    assert_eq!(value["doctor"]["what_if"].as_array().map(Vec::len), Some(0));
}

#[test]
fn a_bad_disk_class_is_a_clear_error_with_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    coldstart().args(["doctor", "--disk", "floppy"]).arg(&trace).assert().code(2).stderr(
        predicate::str::contains(
            "unknown disk class \"floppy\": expected hdd, hdd7200, ssd, nvme, sd, cloud, snapshot or custom",
        ),
    );
    coldstart()
        .args(["doctor", "--disk", "custom:seek=fast"])
        .arg(&trace)
        .assert()
        .code(2)
        .stderr(predicate::str::contains("seek=fast: expected a time like 8ms"));
}
