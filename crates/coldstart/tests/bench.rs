//! `coldstart bench` end to end on small shell commands: exports, readiness, exit
//! statuses, the baseline check and running as the sudo invoker.

mod support;
use support::{coldstart, is_root, json, unavailable};

use predicates::str::contains;

#[test]
fn warm_runs_export_hyperfine_compatible_json() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    let md = dir.path().join("out.md");
    coldstart()
        .args(["bench", "--warm", "--runs", "3", "--no-progress", "--export-json"])
        .arg(&out)
        .arg("--export-markdown")
        .arg(&md)
        .args(["--", "sh", "-c", "exit 0", ":::", "true"])
        .assert()
        .success()
        .stdout(contains("Benchmark 2: true"));
    let v = json(&out);
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["command"], "sh -c exit 0");
    assert_eq!(results[0]["times"].as_array().unwrap().len(), 3);
    assert_eq!(results[0]["exit_codes"], serde_json::json!([0, 0, 0]));
    assert_eq!(results[0]["cache"], "warm");
    assert_eq!(v["comparisons"][0]["kind"], "commands");
    assert!(std::fs::read_to_string(&md).unwrap().starts_with("| Command |"));
}

#[test]
fn output_readiness_ends_a_command_that_would_run_for_minutes() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    coldstart()
        .args([
            "bench",
            "--warm",
            "--runs",
            "2",
            "--no-progress",
            "--until",
            "output:^listening$",
            "--export-json",
        ])
        .arg(&out)
        .args(["--", "sh", "-c", "echo starting; echo listening; exec sleep 300"])
        .timeout(std::time::Duration::from_secs(120))
        .assert()
        .success();
    let v = json(&out);
    assert_eq!(v["results"][0]["ready"], serde_json::json!(["output:^listening$", "output:^listening$"]));
    assert_eq!(v["results"][0]["until"], "output:^listening$");
}

#[test]
fn a_failing_command_exits_3_unless_ignored() {
    coldstart()
        .args(["bench", "--warm", "--runs", "2", "--no-progress", "--", "sh", "-c", "exit 4"])
        .assert()
        .code(3)
        .stderr(contains("exit status 4"));
    coldstart()
        .args(["bench", "--warm", "--runs", "2", "--no-progress", "-i", "--", "sh", "-c", "exit 4"])
        .assert()
        .success();
    coldstart()
        .args(["bench", "--warm", "--runs", "1", "--no-progress", "--until", "mark:never", "--", "true"])
        .assert()
        .code(3)
        .stderr(contains("readiness not reached"));
}

#[test]
fn bad_arguments_exit_2() {
    coldstart().args(["bench", "--no-progress"]).assert().code(2).stderr(contains("no command to benchmark"));
    coldstart()
        .args(["bench", "--until", "soon", "--", "true"])
        .assert()
        .code(2)
        .stderr(contains("readiness"));
    coldstart().args(["bench", "--evict", "magic", "--", "true"]).assert().code(2);
}

#[test]
fn a_regression_against_the_baseline_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base.json");
    let label = "sleep 0.2";
    std::fs::write(
        &base,
        format!(
            r#"{{"results": [{{"command": "{label}", "median": 0.01, "times": [0.01, 0.011, 0.009]}}]}}"#
        ),
    )
    .unwrap();
    coldstart()
        .args(["bench", "--warm", "--runs", "3", "--no-progress", "--baseline"])
        .arg(&base)
        .args(["--max-regression", "10", "--", "sleep", "0.2"])
        .assert()
        .code(1)
        .stdout(contains("REGRESSION: sleep 0.2"));
    std::fs::write(
        &base,
        format!(r#"{{"results": [{{"command": "{label}", "median": 5.0, "times": [5.0, 5.1, 4.9]}}]}}"#),
    )
    .unwrap();
    coldstart()
        .args(["bench", "--warm", "--runs", "3", "--no-progress", "--baseline"])
        .arg(&base)
        .args(["--max-regression", "10", "--", "sleep", "0.2"])
        .assert()
        .success()
        .stdout(contains("ok: sleep 0.2"));
}

#[test]
fn files_eviction_learns_the_file_set_and_reports_what_it_cannot_evict() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out.json");
    coldstart()
        .args(["bench", "--cold", "--evict", "files", "--runs", "2", "--no-progress", "--export-json"])
        .arg(&out)
        .args(["--", "cat", "/etc/hostname"])
        .assert()
        .success()
        .stdout(contains("Command: cat /etc/hostname\nFiles: "));
    let v = json(&out);
    assert_eq!(v["results"][0]["evict"], "files");
    assert!(
        v["preparations"][0]["files"].as_u64().unwrap() >= 2,
        "cat and /etc/hostname at least: {}",
        v["preparations"]
    );
    assert!(v["notes"][0].as_str().unwrap().contains("the dentry and inode caches"));
}

#[test]
fn as_root_under_sudo_the_command_runs_as_the_invoker() {
    if !is_root() && unavailable("as_root_under_sudo_the_command_runs_as_the_invoker", "not root") {
        return;
    }
    let run = |extra: &[&str]| {
        let mut cmd = coldstart();
        cmd.env("SUDO_UID", "65534").env("SUDO_GID", "65534").env("SUDO_USER", "nobody");
        cmd.args([
            "bench",
            "--warm",
            "--runs",
            "1",
            "--no-progress",
            "--until",
            "output:^65534 /nonexistent$",
        ]);
        cmd.args(extra).args(["--", "sh", "-c", "echo \"$(id -u) $HOME\"; exec sleep 300"]);
        cmd.timeout(std::time::Duration::from_secs(120)).assert()
    };
    run(&[]).success();
    run(&["--as-root", "--timeout", "2"]).code(3);
}
