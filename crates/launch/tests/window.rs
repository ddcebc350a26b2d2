//! `window` readiness under Xvfb: a window mapped by a process outside the tree is
//! ignored; the first top-level window mapped by a descendant of the command is
//! the ready moment, and the tree is ended afterwards.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use coldstart_launch::{Ending, PausedChild, Reason, Until, WaitOptions, marks};
use coldstart_testkit::skip_without;
use common::{alive, sh};
use x11rb::connection::Connection;
use x11rb::protocol::xproto::{ConnectionExt, CreateWindowAux, WindowClass};

const HELPER_ENV: &str = "COLDSTART_TEST_MAP_WINDOW";

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
    if std::env::var_os(HELPER_ENV).is_some() {
        map_a_window(Duration::from_secs(300));
    }
}

struct Xvfb {
    child: Child,
    display: String,
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_xvfb() -> Option<Xvfb> {
    let mut child = std::process::Command::new("Xvfb")
        .args(["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", "320x240x24"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take()?).read_line(&mut line).ok()?;
    let number: u32 = line.trim().parse().ok()?;
    Some(Xvfb { child, display: format!(":{number}") })
}

#[test]
fn window_readiness_fires_on_the_trees_first_window() {
    let Some(xvfb) = start_xvfb() else {
        if skip_without(false, "window readiness", "Xvfb (Debian package xvfb)") {
            return;
        }
        unreachable!()
    };
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
