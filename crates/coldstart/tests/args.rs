//! Bad launch, duration, size and number arguments are refused while the command
//! line is parsed: exit status 2, one line saying what is wrong (plus clap's hint),
//! never a panic, and nothing started.

mod support;

use support::coldstart;

/// Runs coldstart with `args` and checks the refusal; returns its error line.
fn refused(args: &[&str]) -> String {
    let output = coldstart().args(args).timeout(std::time::Duration::from_secs(60)).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    let lines: Vec<&str> =
        stderr.lines().filter(|l| !l.is_empty() && !l.starts_with("For more information")).collect();
    assert_eq!(lines.len(), 1, "{args:?}: one line expected, got {stderr}");
    assert!(lines[0].starts_with("error: invalid value"), "{args:?}: {stderr}");
    lines[0].to_owned()
}

#[test]
fn a_timeout_that_is_not_a_positive_duration_exits_2() {
    refused(&["run", "--timeout", "nan", "--", "true"]);
    refused(&["bench", "--warm", "--timeout", "inf", "--", "true"]);
    refused(&["record", "--timeout", "0", "--", "true"]);
    let line = refused(&["run", "--timeout", "1e400", "--", "true"]);
    assert!(line.contains("a bare number is seconds"), "{line}");
}

#[test]
fn a_negative_timeout_starts_nothing() {
    let dir = support::private_dir();
    let witness = dir.path().join("started");
    let touch = format!("touch {}", witness.display());
    refused(&["run", "--timeout=-1", "--", "sh", "-c", &touch]);
    assert!(!witness.exists(), "the command ran although its --timeout was refused");
}

#[test]
fn a_grace_that_is_not_a_duration_exits_2() {
    refused(&["bench", "--warm", "--grace", "nan", "--", "true"]);
    refused(&["bench", "--warm", "--grace=-2", "--", "true"]);
}

#[test]
fn a_malformed_readiness_condition_exits_2_naming_every_form() {
    refused(&["run", "--until", "idle:0", "--", "true"]);
    refused(&["record", "--until", "mark:", "--", "true"]);
    let line = refused(&["run", "--until", "wm:marco", "--", "true"]);
    assert!(line.contains("wm:marco") && line.contains("takes no argument"), "{line}");
    let line = refused(&["bench", "--warm", "--until", "bogus", "--", "true"]);
    assert!(
        line.contains(
            "exit, mark:NAME, output:REGEX, idle[:MS], window, window:CLASS, window-name:NAME, wm or unit:NAME"
        ),
        "{line}"
    );
}

#[test]
fn a_malformed_unit_condition_exits_2_in_one_line() {
    for (args, says) in [
        (&["record", "--until", "unit:", "--", "true"][..], "the unit name is empty"),
        (&["record", "--until", "unit", "--", "true"][..], "unit:NAME"),
        (&["run", "--until", "unit:user/", "--", "true"][..], "the unit name is empty"),
        (&["bench", "--warm", "--until", "unit:multi-user", "--", "true"][..], "with its type"),
        (&["run", "--until", "unit:host/ssh.service", "--", "true"][..], "unknown manager"),
    ] {
        let line = refused(args);
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

#[test]
fn a_malformed_window_condition_exits_2_saying_what_is_wrong() {
    for (args, says) in [
        (&["run", "--until", "window:", "--", "true"][..], "the name is empty"),
        (&["run", "--until", "window:/[/", "--", "true"][..], "unclosed character class"),
        (&["record", "--until", "window-name://", "--", "true"][..], "the regular expression is empty"),
        (&["bench", "--warm", "--until", "window:/panel", "--", "true"][..], "/REGEX/"),
        (&["run", "--until", "exit", "--until", "bogus:x", "--", "true"][..], "window-name:NAME"),
    ] {
        let line = refused(args);
        assert!(line.contains(says), "{args:?}: {line}");
    }
}

#[test]
fn a_window_condition_under_wayland_alone_exits_2_in_one_line() {
    let output = coldstart()
        .args(["run", "--until", "window:mate-panel", "--", "sleep", "5"])
        .env_remove("DISPLAY")
        .env("WAYLAND_DISPLAY", "wayland-1")
        .timeout(std::time::Duration::from_secs(60))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("Wayland") && stderr.contains("mark:NAME"), "{stderr}");
}

#[test]
fn numbers_that_mean_nothing_exit_2() {
    refused(&["record", "--sample-hz", "nan", "--", "true"]);
    refused(&["record", "--sample-hz", "5000", "--", "true"]);
    refused(&["record", "--cpu-sample-hz", "0", "--", "true"]);
    refused(&["bench", "--baseline", "b.json", "--max-regression", "inf", "--", "true"]);
    refused(&["prefetch", "plan", "t.coldstart", "-o", "p.plan", "--max-size", "nan"]);
    refused(&["prefetch", "plan", "t.coldstart", "-o", "p.plan", "--blend-window-ms", "0"]);
    refused(&["prefetch", "run", "p.plan", "--max-stale", "101"]);
    refused(&["prefetch", "run", "p.plan", "--ioprio", "be:9"]);
}

#[test]
fn a_memory_budget_takes_a_unit_or_a_share() {
    let line = refused(&["prefetch", "run", "p.plan", "--max-memory", "512"]);
    assert!(line.contains("less than a page") && line.contains("512MiB"), "{line}");
    refused(&["run", "--max-memory", "nan", "--", "true"]);
    refused(&["prefetch", "run", "p.plan", "--max-memory", "0%"]);
}

#[test]
fn good_values_with_units_are_taken() {
    coldstart()
        .args(["run", "--quiet", "--timeout", "30s", "--until", "exit", "--", "sh", "-c", "exit 7"])
        .timeout(std::time::Duration::from_secs(60))
        .assert()
        .code(7);
}

#[test]
fn an_unknown_part_to_leave_out_exits_2_and_names_the_parts() {
    let line = refused(&["record", "--without", "fanotify,disk", "--", "true"]);
    assert!(line.contains("unknown part `disk`") && line.contains("page-access"), "{line}");
}

#[test]
fn an_unknown_alongside_mode_exits_2_with_the_modes() {
    let output = coldstart().args(["bench", "--alongside-mode", "sometimes", "--", "true"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid value 'sometimes'") && stderr.contains("paced"), "{stderr}");
}

#[test]
fn an_off_cpu_threshold_or_an_init_start_that_is_not_a_number_exits_2() {
    let line = refused(&["record", "--off-cpu-min", "soon", "--", "true"]);
    assert!(line.contains("soon"), "{line}");
    refused(&["record", "--off-cpu-min=-1", "--", "true"]);
    refused(&["boot", "service", "--init-started-ns", "yesterday"]);
    refused(&["boot", "service", "--init-started-ns=-5"]);
}

#[test]
fn a_login_service_with_a_bad_timeout_condition_or_start_exits_2() {
    let enable = ["login", "enable", "--prefetch", "--user", "nobody"];
    let line = refused(&[&enable[..], &["--timeout", "soon"]].concat());
    assert!(line.contains("soon"), "{line}");
    let line = refused(&[&enable[..], &["--until", "window:"]].concat());
    assert!(line.contains("window:"), "{line}");
    refused(&["login", "service", "--origin-boot-ns", "yesterday"]);

    let output = coldstart().args(enable).args(["--start", "sometimes"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("invalid value 'sometimes'") && stderr.contains("display-manager"), "{stderr}");
}
