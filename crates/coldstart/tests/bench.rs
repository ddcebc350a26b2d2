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

/// A valid plan with nothing to replay.
fn empty_plan(path: &std::path::Path) {
    use coldstart_prefetch::plan::{FORMAT, VERSION};
    let plan = coldstart_prefetch::Plan {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        source: Default::default(),
        settings: Default::default(),
        files: Vec::new(),
        directories: Vec::new(),
        steps: Vec::new(),
        stats: Default::default(),
        notes: Vec::new(),
    };
    plan.save(path).unwrap();
}

#[test]
fn a_missing_or_malformed_plan_is_one_line_and_exit_2_before_any_run() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.plan");
    empty_plan(&good);
    let bad = dir.path().join("bad.plan");
    std::fs::write(&bad, "{\"format\": \"coldstart-prefetch-plan\", \"files\": 7}").unwrap();
    let missing = dir.path().join("missing.plan");
    let marker = dir.path().join("ran");
    let refused = |plans: &[String], extra: &[&str]| -> String {
        let mut cmd = coldstart();
        cmd.current_dir(dir.path()).args(["bench", "--no-progress", "--evict", "files", "--runs", "2"]);
        for plan in plans {
            cmd.args(["--prefetch", plan]);
        }
        cmd.args(["--prepare", "touch ran"]).args(extra).args(["--", "sh", "-c", "touch ran"]);
        let out = cmd.assert().code(2).get_output().clone();
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
        assert!(!marker.exists(), "nothing ran before the error: {stderr}");
        stderr
    };
    let text = |p: &std::path::Path| p.display().to_string();
    // Every plan is checked before the first run: a bad second plan after a good one.
    let err = refused(&[text(&good), text(&missing)], &[]);
    assert!(err.contains(&format!("--prefetch {}: the plan cannot be used", text(&missing))), "{err}");
    let err = refused(&[format!("a={}", text(&good)), format!("b={}", text(&bad))], &[]);
    assert!(
        err.contains(&format!("--prefetch b={}", text(&bad))) && err.contains("not a usable prefetch plan"),
        "{err}"
    );
    let err = refused(&[text(&good), format!("good={}", text(&good))], &[]);
    assert!(err.contains("two plans are named `good`"), "{err}");
    let err = refused(&[], &["-c", "true", "-c", "true", "-c", "true", "--prepare", "true"]);
    assert!(err.contains("--prepare was given 2 times for 4 commands"), "{err}");
}

#[test]
fn prepare_and_conclude_run_around_every_run_and_each_plan_is_a_result_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.plan"), dir.path().join("second.plan"));
    empty_plan(&a);
    empty_plan(&b);
    let list = dir.path().join("files.list");
    std::fs::write(&list, format!("{}\n", a.display())).unwrap();
    let out = dir.path().join("out.json");
    coldstart()
        .current_dir(dir.path())
        .args(["bench", "--no-progress", "--evict", "files", "--files"])
        .arg(&list)
        .args([
            "--runs",
            "2",
            "-n",
            "app",
            "--prepare",
            "echo prepare >> log",
            "--conclude",
            "echo conclude >> log",
        ])
        .arg("--prefetch")
        .arg(format!("first={}", a.display()))
        .arg("--prefetch")
        .arg(&b)
        .arg("--export-json")
        .arg(&out)
        .args(["--", "sh", "-c", "echo run >> log"])
        .assert()
        .success()
        .stdout(contains("app (plan second ahead) vs app (plan first ahead): "));
    let log = std::fs::read_to_string(dir.path().join("log")).unwrap();
    assert_eq!(log, "prepare\nrun\nconclude\n".repeat(2 * 5), "2 rounds of 5 configurations");
    let v = json(&out);
    let commands: Vec<&str> =
        v["results"].as_array().unwrap().iter().map(|r| r["command"].as_str().unwrap()).collect();
    assert_eq!(
        commands,
        [
            "app (cold)",
            "app (cold, plan first alongside)",
            "app (cold, plan first ahead)",
            "app (cold, plan second alongside)",
            "app (cold, plan second ahead)"
        ]
    );
    assert_eq!(v["preparations"][0]["prepare"], "echo prepare >> log");
    assert_eq!(v["plans"][1]["name"], "second");
}
