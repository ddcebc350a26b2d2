//! Window readiness under Xvfb: for `window`, a window mapped by a process outside
//! the tree is ignored and the first top-level window mapped by a descendant of the
//! command is the ready moment; `window:CLASS` and `window-name:NAME` fire on a window
//! of that class or title whoever maps it, and credit its owner; several conditions
//! give one milestone each and are ready at the last; `wm` fires when a window manager
//! announces itself as EWMH says, not on a stale or half-made announcement.

mod common;

use std::process::Child;
use std::time::Duration;

use coldstart_launch::{Ending, PausedChild, Reason, Running, Until, WaitOptions, marks};
use coldstart_testkit::{Xvfb, xvfb};
use common::{alive, sh};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, CreateWindowAux, PropMode, WindowClass};
use x11rb::wrapper::ConnectionExt as _;

const HELPER_ENV: &str = "COLDSTART_TEST_MAP_WINDOW";
/// The helper's WM_CLASS class (its instance is the class in lower case) and title.
const CLASS_ENV: &str = "COLDSTART_TEST_WINDOW_CLASS";
const TITLE_ENV: &str = "COLDSTART_TEST_WINDOW_TITLE";
/// Set: instead of mapping a window, announce a window manager (`full`: as EWMH says;
/// `stale`: the root names a check window that does not name itself).
const WM_ENV: &str = "COLDSTART_TEST_ANNOUNCE_WM";

/// Announces a window manager on `$DISPLAY` the way EWMH says (an unmapped check window
/// whose `_NET_SUPPORTING_WM_CHECK` names itself, then the root's naming it), or only
/// half of it, and keeps the connection (a manager that has gone leaves it stale).
fn announce_a_window_manager(full: bool, hold: Duration) {
    let (conn, screen) = x11rb::connect(None).expect("connect to the test display");
    let root = conn.setup().roots[screen].root;
    let check = conn.generate_id().unwrap();
    conn.create_window(
        0,
        check,
        root,
        -100,
        -100,
        1,
        1,
        0,
        WindowClass::INPUT_OUTPUT,
        0,
        &CreateWindowAux::new(),
    )
    .unwrap();
    let atom = conn.intern_atom(false, b"_NET_SUPPORTING_WM_CHECK").unwrap().reply().unwrap().atom;
    if full {
        conn.change_property32(PropMode::REPLACE, check, atom, AtomEnum::WINDOW, &[check]).unwrap();
    }
    if let Some(path) = std::env::var_os("COLDSTART_MARKS") {
        marks::append(path.as_ref(), "announcing", None).unwrap();
    }
    conn.change_property32(PropMode::REPLACE, root, atom, AtomEnum::WINDOW, &[check]).unwrap();
    conn.flush().unwrap();
    std::thread::sleep(hold);
}

/// Maps one top-level window on `$DISPLAY` and keeps it (stands for a GUI program).
fn map_a_window(hold: Duration) {
    let (conn, screen) = x11rb::connect(None).expect("connect to the test display");
    let screen = &conn.setup().roots[screen];
    let window = conn.generate_id().unwrap();
    conn.create_window(
        0,
        window,
        screen.root,
        0,
        0,
        100,
        80,
        0,
        WindowClass::INPUT_OUTPUT,
        0,
        &CreateWindowAux::new(),
    )
    .unwrap();
    if let Ok(class) = std::env::var(CLASS_ENV) {
        let wm_class = format!("{}\0{class}\0", class.to_lowercase());
        conn.change_property8(
            PropMode::REPLACE,
            window,
            AtomEnum::WM_CLASS,
            AtomEnum::STRING,
            wm_class.as_bytes(),
        )
        .unwrap();
    }
    if let Ok(title) = std::env::var(TITLE_ENV) {
        conn.change_property8(
            PropMode::REPLACE,
            window,
            AtomEnum::WM_NAME,
            AtomEnum::STRING,
            title.as_bytes(),
        )
        .unwrap();
    }
    if let Some(path) = std::env::var_os("COLDSTART_MARKS") {
        marks::append(path.as_ref(), "mapping", None).unwrap();
    }
    conn.map_window(window).unwrap();
    conn.flush().unwrap();
    std::thread::sleep(hold);
}

/// Not a test by itself: the program the window test starts (the test binary re-run).
#[test]
fn helper_map_window() {
    match std::env::var(WM_ENV).as_deref() {
        Ok(kind) => announce_a_window_manager(kind == "full", Duration::from_secs(300)),
        Err(_) if std::env::var_os(HELPER_ENV).is_some() => map_a_window(Duration::from_secs(300)),
        Err(_) => {}
    }
}

/// A window-mapping helper started by the test itself, outside the command's tree:
/// after `delay` it maps a window of `class` titled `title`, after marking `mapping`
/// in `marks_file`.
struct Outsider(Child);

impl Outsider {
    fn start(
        xvfb: &Xvfb,
        class: &str,
        title: &str,
        delay: Duration,
        marks_file: &std::path::Path,
    ) -> Outsider {
        Outsider::helper(
            xvfb,
            delay,
            marks_file,
            &[(HELPER_ENV, "1"), (CLASS_ENV, class), (TITLE_ENV, title)],
        )
    }

    /// After `delay`, announces a window manager (`full`) or a stale check window.
    fn announce_wm(xvfb: &Xvfb, full: bool, delay: Duration, marks_file: &std::path::Path) -> Outsider {
        Outsider::helper(xvfb, delay, marks_file, &[(WM_ENV, if full { "full" } else { "stale" })])
    }

    /// The test binary's `helper_map_window` on `xvfb` after `delay`, with `env`.
    fn helper(xvfb: &Xvfb, delay: Duration, marks_file: &std::path::Path, env: &[(&str, &str)]) -> Outsider {
        let script = format!(
            "sleep {}; exec '{}' --exact helper_map_window --nocapture >/dev/null",
            delay.as_secs_f64(),
            std::env::current_exe().unwrap().display()
        );
        let child = std::process::Command::new("sh")
            .args(["-c", &script])
            .env("DISPLAY", &xvfb.display)
            .env("COLDSTART_MARKS", marks_file)
            .envs(env.iter().copied())
            .spawn()
            .unwrap();
        Outsider(child)
    }

    fn pid(&self) -> i32 {
        self.0.id() as i32
    }
}

impl Drop for Outsider {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn within(secs: u64) -> WaitOptions {
    WaitOptions { timeout: Some(Duration::from_secs(secs)), ..WaitOptions::default() }
}

fn until(text: &str) -> Until {
    text.parse().unwrap()
}

/// A command on `xvfb` that maps no window, and a directory holding an empty marks
/// file (`marks`) for the outsiders.
fn a_command_that_maps_nothing(xvfb: &Xvfb) -> (tempfile::TempDir, Running) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("marks"), "").unwrap();
    let mut command = sh("exec sleep 60");
    command.env("DISPLAY", &xvfb.display);
    (dir, PausedChild::spawn(&command).unwrap().resume().unwrap())
}

#[test]
fn window_class_fires_on_a_window_outside_the_tree_and_credits_its_owner() {
    let Some(xvfb) = xvfb("window:CLASS readiness") else { return };
    let (dir, mut running) = a_command_that_maps_nothing(&xvfb);
    let marks_file = dir.path().join("marks");

    let decoy = Outsider::start(&xvfb, "Decoy", "Coldstart panel", Duration::from_millis(500), &marks_file);
    let wanted = [until("window:Coldstart-panel")];
    let outcome = running.wait_all(&wanted, &within(8)).unwrap();
    assert_eq!((outcome.reason.clone(), outcome.met), (Reason::Timeout, false), "{outcome:?}");
    assert!(outcome.milestones.is_empty());
    let decoy_mapped = marks::read(&marks_file).unwrap().marks.iter().any(|m| m.name == "mapping");
    assert!(decoy_mapped, "the decoy mapped its window before the timeout");

    let panel = Outsider::start(&xvfb, "Coldstart-panel", "panel", Duration::from_millis(300), &marks_file);
    let outcome = running.wait_all(&wanted, &within(60)).unwrap();
    assert_eq!(outcome.reason, Reason::WindowClass("Coldstart-panel".into()), "{outcome:?}");
    assert!(outcome.met);
    assert_eq!((outcome.pid, outcome.tid), (Some(panel.pid()), Some(panel.pid())), "{outcome:?}");
    assert_ne!(outcome.pid, Some(decoy.pid()));
    assert!(!running.tree_pids().contains(&panel.pid()), "the panel is not of the command's tree");
    assert_eq!(outcome.milestones.len(), 1);
    assert_eq!(outcome.milestones[0].t_ns, outcome.ready_ns);
    let last_mapping = marks::read(&marks_file).unwrap().marks.iter().map(|m| m.boottime_ns).max().unwrap();
    assert!(outcome.ready_ns >= last_mapping, "ready no earlier than the panel's map request");
    running.finish(&Ending::Kill).unwrap();
}

#[test]
fn two_conditions_give_two_milestones_and_are_ready_at_the_last() {
    let Some(xvfb) = xvfb("window readiness, several conditions") else { return };
    let (dir, mut running) = a_command_that_maps_nothing(&xvfb);
    let marks_file = dir.path().join("marks");

    let wm = Outsider::start(&xvfb, "Coldstart-wm", "wm", Duration::from_millis(300), &marks_file);
    let desktop = Outsider::start(
        &xvfb,
        "Coldstart-desktop",
        "Desktop of tests",
        Duration::from_millis(2000),
        &marks_file,
    );
    let wanted = [until("window-name:/^Desktop of/"), until("window:coldstart-wm")];
    let outcome = running.wait_all(&wanted, &within(60)).unwrap();
    assert!(outcome.met, "{outcome:?}");
    let met: Vec<(Reason, Option<i32>)> =
        outcome.milestones.iter().map(|m| (m.reason.clone(), m.pid)).collect();
    assert_eq!(
        met,
        [
            (Reason::WindowClass("coldstart-wm".into()), Some(wm.pid())),
            (Reason::WindowName("/^Desktop of/".into()), Some(desktop.pid())),
        ],
        "by time: the WM's window (matched by its instance), then the desktop's (by title)"
    );
    assert!(outcome.milestones[0].t_ns < outcome.milestones[1].t_ns);
    assert_eq!(outcome.reason, Reason::WindowName("/^Desktop of/".into()), "ready at the last");
    assert_eq!((outcome.ready_ns, outcome.pid), (outcome.milestones[1].t_ns, Some(desktop.pid())));
    running.finish(&Ending::Kill).unwrap();
}

#[test]
fn wm_fires_when_a_window_manager_announces_itself_and_credits_it() {
    let Some(xvfb) = xvfb("wm readiness") else { return };
    let (dir, mut running) = a_command_that_maps_nothing(&xvfb);
    let marks_file = dir.path().join("marks");

    let stale = Outsider::announce_wm(&xvfb, false, Duration::from_millis(300), &marks_file);
    let outcome = running.wait_all(&[until("wm")], &within(5)).unwrap();
    assert_eq!((outcome.reason.clone(), outcome.met), (Reason::Timeout, false), "{outcome:?}");
    let announced = marks::read(&marks_file).unwrap().marks.iter().any(|m| m.name == "announcing");
    assert!(announced, "the half-made announcement was made before the timeout");
    drop(stale);

    let wm = Outsider::announce_wm(&xvfb, true, Duration::from_millis(300), &marks_file);
    let panel = Outsider::start(&xvfb, "Coldstart-panel", "panel", Duration::from_millis(1500), &marks_file);
    let outcome = running.wait_all(&[until("window:Coldstart-panel"), until("wm")], &within(60)).unwrap();
    assert!(outcome.met, "{outcome:?}");
    let met: Vec<(Reason, Option<i32>, Option<i32>)> =
        outcome.milestones.iter().map(|m| (m.reason.clone(), m.pid, m.tid)).collect();
    assert_eq!(
        met,
        [
            (Reason::WindowManager, Some(wm.pid()), Some(wm.pid())),
            (Reason::WindowClass("Coldstart-panel".into()), Some(panel.pid()), Some(panel.pid())),
        ],
        "by time: the manager's announcement (credited to it), then the panel's window"
    );
    running.finish(&Ending::Kill).unwrap();
}

#[test]
fn window_readiness_fires_on_the_trees_first_window() {
    let Some(xvfb) = xvfb("window readiness") else { return };
    let exe = std::env::current_exe().unwrap();
    let script =
        format!("sleep 0.5; '{}' --exact helper_map_window --nocapture >/dev/null & wait", exe.display());
    let mut command = sh(&script);
    command.env("DISPLAY", &xvfb.display).env(HELPER_ENV, "1");
    let mut running = PausedChild::spawn(&command).unwrap().resume().unwrap();

    let display = xvfb.display.clone();
    let outsider = std::thread::spawn(move || {
        let (conn, screen) = x11rb::connect(Some(&display)).unwrap();
        let root = conn.setup().roots[screen].root;
        let window = conn.generate_id().unwrap();
        conn.create_window(
            0,
            window,
            root,
            0,
            0,
            50,
            50,
            0,
            WindowClass::INPUT_OUTPUT,
            0,
            &CreateWindowAux::new(),
        )
        .unwrap();
        conn.map_window(window).unwrap();
        conn.flush().unwrap();
        std::thread::sleep(Duration::from_secs(3));
    });

    let options = WaitOptions { timeout: Some(Duration::from_secs(60)), ..WaitOptions::default() };
    let outcome = running.wait(&Until::Window, &options).unwrap();
    assert_eq!(outcome.reason, Reason::Window, "{outcome:?}");
    assert!(outcome.met);
    let tree = running.tree_pids();
    let detail = outcome.detail.clone().unwrap();
    let pid: i32 = detail.rsplit(' ').next().unwrap().parse().unwrap();
    assert!(
        tree.contains(&pid) && pid != running.pid(),
        "a child of the shell mapped it: {detail}, tree {tree:?}"
    );
    let finished = running.finish(&Ending::default()).unwrap();
    let mapping =
        finished.marks.marks.iter().find(|m| m.name == "mapping").expect("the helper marked before mapping");
    assert!(outcome.ready_ns >= mapping.boottime_ns, "ready no earlier than the map request");
    assert!(!alive(pid));
    outsider.join().unwrap();
}

#[test]
fn window_readiness_without_a_display_is_an_error() {
    let mut command = sh("sleep 1");
    command.env("DISPLAY", "");
    let mut running = PausedChild::spawn(&command).unwrap().resume().unwrap();
    let err = running.wait(&Until::Window, &WaitOptions::default()).unwrap_err();
    assert!(err.to_string().contains("DISPLAY"), "{err}");
}

#[test]
fn window_readiness_under_wayland_says_why_it_cannot_work() {
    let mut command = sh("sleep 1");
    command.env("DISPLAY", "").env("WAYLAND_DISPLAY", "wayland-1");
    let mut running = PausedChild::spawn(&command).unwrap().resume().unwrap();
    let err = running.wait(&until("window:mate-panel"), &WaitOptions::default()).unwrap_err().to_string();
    assert!(err.contains("Wayland") && err.contains("mark:NAME") && !err.contains('\n'), "{err}");
}
