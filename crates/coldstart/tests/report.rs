//! `coldstart report` and `coldstart reads` on a small trace file written here.

mod support;
use support::coldstart;

use std::path::Path;

use coldstart_trace::*;
use predicates::prelude::*;

const MS: Nanos = 1_000_000;

fn write_trace(dir: &Path) -> std::path::PathBuf {
    let fill = |t: Nanos, file_id: u32, index: u64| PageFill {
        t_ns: t * MS,
        pid: 100,
        tid: 100,
        file_id,
        index,
        pages: 8,
        origin: None,
    };
    let trace = Trace {
        meta: Meta {
            tool: "test".into(),
            command: vec!["app".into()],
            root_pid: Some(100),
            page_size: 4096,
            duration_ns: 50 * MS,
            ready: Some(Ready { t_ns: 40 * MS, reason: ReadyReason::Exit, pid: None, tid: None }),
            ..Meta::default()
        },
        losses: vec![Loss { source: LossSource::Tracefs, what: "cpu0 overrun".into(), count: 7 }],
        processes: vec![Process {
            pid: 100,
            comm: "app".into(),
            start_ns: Some(0),
            end_ns: Some(40 * MS),
            in_scope: true,
            ..Process::default()
        }],
        files: vec![
            File { id: 1, path: Some("/usr/lib/libfoo.so".into()), ..File::default() },
            File { id: 2, path: Some("/usr/bin/app".into()), ..File::default() },
        ],
        page_fills: vec![fill(1, 2, 0), fill(2, 1, 0), fill(3, 1, 8), fill(4, 1, 100), fill(5, 1, 200)],
        sched: vec![SchedInterval { tid: 100, start_ns: 0, end_ns: 40 * MS, state: ThreadState::Running }],
        ..Trace::default()
    };
    let path = dir.join("app.coldstart");
    trace.write(&path).expect("write trace");
    path
}

#[test]
fn report_prints_the_overview_and_always_the_lost_events() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    coldstart()
        .arg("report")
        .arg(&trace)
        .assert()
        .success()
        .stdout(predicate::str::contains("Ready         0.040 s after the command started"))
        .stdout(predicate::str::contains("LOST 7 cpu0 overrun (tracefs)"))
        .stdout(predicate::str::contains("Critical path to ready"))
        .stdout(predicate::str::contains("- tracefs lost: 7 cpu0 overrun"));
}

#[test]
fn report_writes_versioned_json_to_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    let out = dir.path().join("app.json");
    coldstart().arg("report").arg(&trace).args(["--format", "json", "-o"]).arg(&out).assert().success();
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&out).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "reports name every path: private like the trace");
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).expect("valid JSON");
    assert_eq!(json["schema"], "coldstart-analysis");
    assert_eq!(json["version"], 1);
    assert_eq!(json["overview"]["reads"], 4);
    assert_eq!(json["overview"]["seeks"], 2);
}

#[test]
fn reads_ranks_files_and_lists_raw_reads_with_filters() {
    let dir = tempfile::tempdir().unwrap();
    let trace = write_trace(dir.path());
    coldstart()
        .arg("reads")
        .arg(&trace)
        .assert()
        .success()
        .stdout(predicate::str::contains("Files by separate reads (top 2 of 2)"))
        .stdout(
            predicate::str::is_match(r"\n\s+3\s+2\s+128\.0 KiB\s+32\s+0\.000 s\s+1\s+/usr/lib/libfoo\.so\n")
                .unwrap(),
        )
        .stderr(predicate::str::contains("warning: tracefs lost: 7 cpu0 overrun"));
    coldstart()
        .arg("reads")
        .arg(&trace)
        .args(["--raw", "--file", "libfoo", "--pid", "100"])
        .assert()
        .success()
        .stdout(predicate::str::contains("(app/100): /usr/lib/libfoo.so 0-15\n"))
        .stdout(predicate::str::contains("(app/100): /usr/lib/libfoo.so 100-107  seek\n"))
        .stdout(predicate::str::contains("/usr/bin/app").not());
}

#[test]
fn a_missing_trace_is_a_clear_error_with_status_2() {
    coldstart()
        .args(["report", "/nonexistent/x.coldstart"])
        .assert()
        .code(2)
        .stderr(
            "coldstart: error: cannot read the trace: /nonexistent/x.coldstart: No such file or directory (os error 2)\n",
        );
}

#[test]
fn a_file_error_prints_its_cause_exactly_once() {
    let cases: [(&[&str], &str); 3] = [
        (
            &["report", "/nonexistent"],
            "coldstart: error: cannot read the trace: /nonexistent: No such file or directory (os error 2)\n",
        ),
        (
            &["prefetch", "run", "missing.plan"],
            "coldstart: error: missing.plan: No such file or directory (os error 2)\n",
        ),
        (&["report", "/tmp"], "coldstart: error: cannot read the trace: /tmp: not a coldstart trace file\n"),
    ];
    for (args, expected) in cases {
        coldstart().args(args).assert().code(2).stderr(expected);
    }
}

#[test]
fn a_plan_that_is_not_json_names_the_file_then_the_parse_error() {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("bad.plan");
    std::fs::write(&plan, "{").unwrap();
    coldstart().arg("prefetch").arg("run").arg(&plan).assert().code(2).stderr(format!(
        "coldstart: error: {} is not a usable prefetch plan: EOF while parsing an object at line 1 column 1\n",
        plan.display()
    ));
}

#[test]
fn an_error_that_names_its_cause_does_not_repeat_it() {
    coldstart()
        .args(["run", "--prefetch", "/nonexistent/x.plan", "--", "true"])
        .assert()
        .code(2)
        .stderr("coldstart: error: /nonexistent/x.plan: No such file or directory (os error 2)\n");
}
