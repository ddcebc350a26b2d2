//! The login prefetch service (`coldstart login enable --prefetch`): a MATE login under Xvfb
//! started three times with nothing but the service's autostart entry acting (learn, then a
//! login with the plan and one without, each row timed to the panel); the socket through
//! which another user's login asks root for the service, run by systemd-socket-activate as
//! coldstart-login.socket runs it; and the units `enable` installs verify.

mod support;
use support::{can_record, coldstart, have_systemd_analyze, installed, man_path, private_dir};

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use coldstart_testkit::skip_without;

fn history(state: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(state.join("history.jsonl")).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

/// Waits until the history has `rows` rows (the service appends a login's row last).
fn wait_for_rows(state: &Path, rows: usize, within: Duration) -> Vec<serde_json::Value> {
    let start = Instant::now();
    while history(state).len() < rows && start.elapsed() < within {
        std::thread::sleep(Duration::from_millis(200));
    }
    history(state)
}

/// Processes whose command line or environment mentions `needle`.
fn processes_with(needle: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        let mut text = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        text.extend(std::fs::read(entry.path().join("environ")).unwrap_or_default());
        if String::from_utf8_lossy(&text).contains(needle) && pid != std::process::id() as i32 {
            let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
            found.push((pid, comm.trim().to_owned()));
        }
    }
    found
}

fn kill_all(processes: &[(i32, String)]) {
    for (pid, _) in processes {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::Signal::SIGKILL);
    }
}

#[test]
fn the_login_service_learns_a_mate_login_then_verifies_its_plan() {
    const TEST: &str = "login_service";
    if !can_record(TEST) {
        return;
    }
    let have_mate = ["mate-session", "mate-panel", "marco", "dbus-run-session"].iter().all(|p| installed(p));
    if skip_without(
        have_mate,
        TEST,
        "a MATE session (Debian packages mate-session-manager mate-panel marco dbus-x11)",
    ) {
        return;
    }
    let Some(xvfb) = coldstart_testkit::xvfb_with_screen(TEST, "1280x800x24") else { return };
    let dir = private_dir();
    let home = dir.path().join("home");
    let runtime = dir.path().join("runtime");
    let state = dir.path().join("state");
    std::fs::create_dir(&home).unwrap();
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    coldstart()
        .args(["login", "enable", "--prefetch", "--user", "root", "--home"])
        .arg(&home)
        .arg("--state-dir")
        .arg(&state)
        .args(["--until", "wm", "--until", "window:mate-panel", "--timeout", "60"])
        .args(["--learn-boots", "1", "--verify-boots", "1"])
        .assert()
        .success();
    let entry = std::fs::read_to_string(home.join(".config/autostart/coldstart-login.desktop")).unwrap();
    assert!(entry.contains("X-MATE-Autostart-Phase=Initialization"), "{entry}");

    let home_mark = format!("HOME={}", home.display());
    for login in 1..=3 {
        let mut session = Command::new("setsid")
            .args(["dbus-run-session", "mate-session"])
            .env("DISPLAY", &xvfb.display)
            .env("HOME", &home)
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("GVFS_DISABLE_FUSE", "1")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join(format!("session-{login}.log"))).unwrap())
            .spawn()
            .unwrap();
        let rows = wait_for_rows(&state, login, Duration::from_secs(90));
        kill_all(&processes_with(&home_mark));
        let _ = session.wait();
        // A session killed while it held the ICE authority lock leaves it behind, and the
        // next session manager waits for it to go stale.
        for lock in [".ICEauthority-c", ".ICEauthority-l"] {
            let _ = std::fs::remove_file(home.join(lock));
        }
        let log = std::fs::read_to_string(state.join("service.log")).unwrap_or_default();
        let session =
            std::fs::read_to_string(dir.path().join(format!("session-{login}.log"))).unwrap_or_default();
        assert_eq!(
            rows.len(),
            login,
            "login {login}: no row from the service; its log:\n{log}\nthe session's:\n{session}"
        );
    }
    let rows = history(&state);
    let roles: Vec<&str> = rows.iter().map(|r| r["role"].as_str().unwrap()).collect();
    assert_eq!(roles[0], "learn", "{rows:#?}");
    let mut verified = roles[1..].to_vec();
    verified.sort();
    assert_eq!(verified, ["with-plan", "without-plan"], "one login each way: {rows:#?}");
    for row in &rows {
        let to_panel =
            row["target_s"].as_f64().unwrap_or_else(|| panic!("the panel was not reached: {row:#}"));
        assert!(to_panel > 0.0 && to_panel < 60.0, "{row:#}");
        assert!(row["reason"].as_str().unwrap().contains("login"), "logins, not boots: {row:#}");
    }
    assert!(
        rows[1]["plan"].is_string() && rows[1]["plan"] == rows[2]["plan"],
        "the plan learnt first: {rows:#?}"
    );
    let with = rows.iter().find(|r| r["role"] == "with-plan").unwrap();
    assert!(with["plan_used"].as_f64().unwrap() > 0.2, "the login used the plan it replayed: {with:#}");
    assert!(state.join("replay.json").exists(), "the replay's report is kept");
    let traces: Vec<PathBuf> =
        std::fs::read_dir(state.join("traces")).unwrap().flatten().map(|e| e.path()).collect();
    assert_eq!(traces.len(), 3, "{traces:?}");
    assert!(
        traces.iter().all(|t| t.file_name().unwrap().to_string_lossy().starts_with("login-")),
        "{traces:?}"
    );

    let status =
        coldstart().args(["login", "status", "--user", "root", "--state-dir"]).arg(&state).output().unwrap();
    let text = String::from_utf8_lossy(&status.stdout);
    assert!(text.contains("prefetch service, the last logins") && text.contains("with plan"), "{text}");
    assert_eq!(text.lines().filter(|l| l.contains(" s ")).count(), 3, "one line per login: {text}");

    let state_word = state.to_string_lossy().into_owned();
    assert_eq!(processes_with(&state_word), Vec::new(), "the service is gone after its logins");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&*runtime.to_string_lossy()), "a mount of the session is left: {mounts}");
    coldstart()
        .args(["login", "disable", "--user", "root", "--purge", "--home"])
        .arg(&home)
        .arg("--state-dir")
        .arg(&state)
        .assert()
        .success();
    assert!(!home.join(".config/autostart/coldstart-login.desktop").exists());
    assert!(!state.exists());
}

/// A user other than root asks through the socket: the service (as coldstart-login@.service
/// runs it, on the connection) serves an enabled user and refuses another, in one line.
#[test]
fn another_user_s_login_asks_root_through_the_socket() {
    const TEST: &str = "login_socket";
    if !can_record(TEST) {
        return;
    }
    if skip_without(
        installed("systemd-socket-activate"),
        TEST,
        "systemd-socket-activate (Debian package systemd)",
    ) {
        return;
    }
    let run = tempfile::Builder::new().prefix("coldstart-login-test").tempdir_in("/run").unwrap();
    std::fs::set_permissions(run.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = run.path().join("login.sock");
    let dir = private_dir();
    let states = dir.path().join("login");
    let nobody = nix::unistd::User::from_name("nobody").unwrap().expect("the user nobody");
    coldstart()
        .args(["login", "enable", "--prefetch", "--user", "nobody", "--home"])
        .arg(dir.path())
        .arg("--state-dir")
        .arg(states.join(nobody.uid.to_string()))
        .args(["--until", "mark:never", "--timeout", "2", "--no-units"])
        .assert()
        .success();
    let binary = assert_cmd::cargo::cargo_bin!("coldstart");
    let mut listener = Command::new("systemd-socket-activate")
        .arg("-l")
        .arg(&socket)
        .args(["--accept", "--inetd"])
        .arg(binary)
        .args(["login", "service", "--from-socket", "--state-root"])
        .arg(&states)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !socket.exists() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let hello_as = |uid: &str| {
        Command::new("setpriv")
            .args(["--reuid", uid, "--regid", uid, "--clear-groups", "--"])
            .arg(binary)
            .args(["login", "hello", "--socket"])
            .arg(&socket)
            .output()
            .unwrap()
    };
    let asked = Instant::now();
    let hello = hello_as(&nobody.uid.to_string());
    let waited = asked.elapsed();
    let stderr = String::from_utf8_lossy(&hello.stderr).into_owned();
    assert!(hello.status.success() && stderr.is_empty(), "{stderr}");
    let state = states.join(nobody.uid.to_string());
    let rows = wait_for_rows(&state, 1, Duration::from_secs(60));
    let refused = hello_as("12345");
    let _ = listener.kill();
    let _ = listener.wait();
    assert_eq!(rows.len(), 1, "the service ran for nobody");
    assert_eq!(rows[0]["role"], "learn");
    assert!(rows[0]["trace"].is_string(), "{:#}", rows[0]);
    assert!(waited < Duration::from_secs(10), "the hello came back once the recording ran ({waited:?})");
    let refusal = String::from_utf8_lossy(&refused.stderr);
    assert!(refused.status.success(), "a hello never fails the session");
    assert_eq!(refusal.lines().count(), 1, "{refusal}");
    assert!(refusal.contains("not enabled for uid 12345"), "{refusal}");
    assert!(!states.join("12345").exists());
    let states_word = states.to_string_lossy().into_owned();
    assert_eq!(processes_with(&states_word), Vec::new(), "nothing of the service is left");
}

#[test]
fn the_login_units_verify() {
    if !have_systemd_analyze() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/systemd");
    let binary = assert_cmd::cargo::cargo_bin!("coldstart").to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let manpath = man_path(dir.path());
    for name in ["coldstart-login.socket", "coldstart-login@.service"] {
        let text = std::fs::read_to_string(root.join(name)).unwrap();
        std::fs::write(dir.path().join(name), text.replace("/usr/local/bin/coldstart", &binary)).unwrap();
    }
    std::fs::copy(dir.path().join("coldstart-login@.service"), dir.path().join("coldstart-login@0.service"))
        .unwrap();
    let out = Command::new("systemd-analyze")
        .env("MANPATH", &manpath)
        .arg("verify")
        .arg(dir.path().join("coldstart-login.socket"))
        .arg(dir.path().join("coldstart-login@0.service"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("coldstart-login"), "{stderr}");
}

/// A display manager's root hook runs `login hello --before-session` before the session:
/// the service records from then, and the login's time runs from the hook's start to the
/// window. A user the service is not enabled for: the hook does nothing, quietly.
#[test]
fn a_display_manager_hook_starts_the_service_before_the_session() {
    const TEST: &str = "login_before_session";
    if !can_record(TEST) {
        return;
    }
    let has_xmessage = Command::new("xmessage").arg("-help").output().is_ok();
    if skip_without(has_xmessage, TEST, "xmessage (Debian package x11-utils)") {
        return;
    }
    let Some(xvfb) = coldstart_testkit::xvfb_with_screen(TEST, "640x480x24") else { return };
    let dir = private_dir();
    let state = dir.path().join("state");
    let enabled = coldstart()
        .args(["login", "enable", "--prefetch", "--user", "root", "--start", "display-manager", "--home"])
        .arg(dir.path())
        .arg("--state-dir")
        .arg(&state)
        .args(["--until", "window:cs-login-test", "--timeout", "30"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&enabled.stdout);
    assert!(enabled.status.success(), "{said}");
    if !Path::new("/etc/lightdm").is_dir() {
        assert!(said.contains("login hello --before-session"), "the hook's line is given: {said}");
    }
    assert!(!dir.path().join(".config/autostart/coldstart-login.desktop").exists(), "no autostart entry");

    let quiet = coldstart()
        .args(["login", "hello", "--before-session", "--user", "root", "--state-dir"])
        .arg(dir.path().join("not-enabled"))
        .output()
        .unwrap();
    assert!(quiet.status.success() && quiet.stderr.is_empty() && quiet.stdout.is_empty(), "{quiet:?}");

    let hook_started = Instant::now();
    let hello = coldstart()
        .args(["login", "hello", "--before-session", "--user", "root", "--state-dir"])
        .arg(&state)
        .env("DISPLAY", &xvfb.display)
        .output()
        .unwrap();
    assert!(hello.status.success() && hello.stderr.is_empty(), "{hello:?}");
    assert!(history(&state).is_empty(), "the hook returns while the service records");
    std::thread::sleep(Duration::from_millis(500));
    let mut window = Command::new("xmessage")
        .args(["-name", "cs-login-test", "hello"])
        .env("DISPLAY", &xvfb.display)
        .spawn()
        .unwrap();
    let rows = wait_for_rows(&state, 1, Duration::from_secs(40));
    let since_hook = hook_started.elapsed().as_secs_f64();
    let _ = window.kill();
    let _ = window.wait();
    assert_eq!(rows.len(), 1, "{}", std::fs::read_to_string(state.join("service.log")).unwrap_or_default());
    let to_window = rows[0]["target_s"].as_f64().unwrap_or_else(|| panic!("not reached: {:#}", rows[0]));
    assert!(
        to_window >= 0.5 && to_window < since_hook,
        "from the hook's start: {to_window} s of {since_hook} s"
    );

    let not_root = Command::new("setpriv")
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups", "--"])
        .arg(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["login", "hello", "--before-session", "--user", "root"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&not_root.stderr);
    assert!(not_root.status.success() && stderr.lines().count() == 1, "{stderr}");
    assert!(stderr.contains("root"), "{stderr}");
}
