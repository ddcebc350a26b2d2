//! Window readiness: `window` (the first top-level X11 window mapped by a process of
//! the command's tree), `window:CLASS` and `window-name:NAME` (a window of that
//! WM_CLASS or title, mapped by any process), and their `/REGEX/` forms.
//!
//! We connect to the command's X display (`DISPLAY` of its environment) before it
//! runs and listen for `MapNotify` on the root window (SubstructureNotify), so
//! every top-level window mapped afterwards is seen. Override-redirect windows
//! (menus, tooltips, drag icons) do not count. Under a reparenting window manager
//! the mapped top-level window is the manager's frame, so the frame's children (the
//! client's window) are looked at too. The owner of a window is found with the
//! X-Resource extension (`XResQueryClientIds`, the client's pid as the X server sees
//! it) and, where that is missing, the `_NET_WM_PID` property. X11 knows processes,
//! not threads: the owner's thread is taken to be its main thread (tid = pid), the
//! one that runs a toolkit's main loop. `window` counts a window when its owner
//! descends from the command's tree; the class and name forms count any process's
//! window (a session's panel may be started by a session manager outside the tree),
//! and record its owner either way. The ready time is when the notification was read
//! (the X server sends it as the map happens; MapNotify carries no timestamp). We
//! connect with our own credentials: as root under sudo, `XAUTHORITY` must point to
//! a cookie we can read.
//!
//! `wm` is met when a window manager announces itself as EWMH says: it sets
//! `_NET_SUPPORTING_WM_CHECK` on the root window to a window of its own that carries
//! the same property naming itself (a check that a stale property left on the root by
//! a manager that has gone does not pass). That window's owner is credited. We listen
//! for the root's property changes, so a manager already running when the command
//! starts does not count.
//!
//! Under Wayland a client cannot see other clients' windows, so a window condition
//! with `WAYLAND_DISPLAY` set and no `DISPLAY` is an error at once; there readiness
//! comes from a mark.

use std::fmt;
use std::os::fd::{AsFd, BorrowedFd};

use regex::Regex;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::Event;
use x11rb::protocol::res::{ClientIdMask, ClientIdSpec};
use x11rb::protocol::xproto::{AtomEnum, ChangeWindowAttributesAux, ConnectionExt, EventMask, Property};
use x11rb::rust_connection::RustConnection;

use crate::clock::{BootNanos, boottime_ns};
use crate::error::{LaunchError, Result, regex_error};

/// What a window's class or title must be: exactly this text, or matching a regular
/// expression (written `/REGEX/`, unanchored as in `output:REGEX`).
#[derive(Clone, Debug)]
pub enum WindowPattern {
    Exact(String),
    Regex(Regex),
}

impl WindowPattern {
    /// Parses `TEXT` or `/REGEX/`; the error says what is wrong, in one line.
    pub fn parse(text: &str) -> std::result::Result<WindowPattern, String> {
        let Some(rest) = text.strip_prefix('/') else {
            return if text.is_empty() {
                Err("the name is empty (write /REGEX/ for a regular expression)".to_owned())
            } else {
                Ok(WindowPattern::Exact(text.to_owned()))
            };
        };
        match rest.strip_suffix('/') {
            Some("") => Err("the regular expression is empty".to_owned()),
            Some(re) => Regex::new(re).map(WindowPattern::Regex).map_err(|e| regex_error(&e)),
            None => Err("a regular expression is written between slashes: /REGEX/".to_owned()),
        }
    }

    pub fn matches(&self, value: &str) -> bool {
        match self {
            WindowPattern::Exact(text) => text == value,
            WindowPattern::Regex(re) => re.is_match(value),
        }
    }
}

impl fmt::Display for WindowPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WindowPattern::Exact(text) => f.write_str(text),
            WindowPattern::Regex(re) => write!(f, "/{}/", re.as_str()),
        }
    }
}

/// A window that became visible, with what identifies it and who owns it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct WindowFacts {
    pub(crate) window: u32,
    /// The owner's pid, when the X server or the window says.
    pub(crate) pid: Option<i32>,
    /// WM_CLASS: instance and class.
    pub(crate) instance: Option<String>,
    pub(crate) class: Option<String>,
    /// `_NET_WM_NAME` and `WM_NAME`, those set.
    pub(crate) names: Vec<String>,
}

impl WindowFacts {
    pub(crate) fn describe(&self) -> String {
        let class = self.class.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
        match self.pid {
            Some(pid) => format!("window 0x{:x}{class} of pid {pid}", self.window),
            None => format!("window 0x{:x}{class} of an unknown process", self.window),
        }
    }

    pub(crate) fn class_matches(&self, pattern: &WindowPattern) -> bool {
        [&self.instance, &self.class].into_iter().flatten().any(|v| pattern.matches(v))
    }

    pub(crate) fn name_matches(&self, pattern: &WindowPattern) -> bool {
        self.names.iter().any(|v| pattern.matches(v))
    }

    /// True when the owner is the process `tree_root` or descends from it.
    pub(crate) fn owned_by_tree(&self, tree_root: i32) -> bool {
        self.pid.is_some_and(|pid| descends_from(pid, tree_root))
    }
}

/// What the X server told: a top-level window mapped (the window with its frame's
/// children), or a window manager that took the screen (its check window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mapped {
    pub(crate) time_ns: BootNanos,
    pub(crate) windows: Vec<WindowFacts>,
    /// True for a window manager's announcement rather than a map.
    pub(crate) window_manager: bool,
}

pub(crate) struct WindowWatcher {
    conn: RustConnection,
    root: u32,
    has_res: bool,
    net_wm_pid: u32,
    net_wm_name: u32,
    utf8_string: u32,
    net_supporting_wm_check: u32,
}

fn x_error(e: impl std::error::Error + Send + Sync + 'static) -> LaunchError {
    LaunchError::X11(Box::new(e))
}

/// True when `pid` is `ancestor` or descends from it.
fn descends_from(mut pid: i32, ancestor: i32) -> bool {
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        if pid <= 1 {
            return false;
        }
        match procfs::process::Process::new(pid).and_then(|p| p.stat()) {
            Ok(stat) => pid = stat.ppid,
            Err(_) => return false,
        }
    }
    false
}

/// The X display a window condition watches: `display` (the command's `DISPLAY`),
/// else ours; under Wayland without one, the error says why no window can be seen.
fn x_display(display: Option<&str>, wayland: bool) -> Result<String> {
    let display =
        display.map(str::to_owned).or_else(|| std::env::var("DISPLAY").ok()).filter(|d| !d.is_empty());
    match display {
        Some(display) => Ok(display),
        None if wayland => Err(LaunchError::Wayland),
        None => Err(LaunchError::Window("no X display: DISPLAY is not set for the command".into())),
    }
}

fn intern(conn: &RustConnection, name: &[u8]) -> Result<u32> {
    Ok(conn.intern_atom(false, name).map_err(x_error)?.reply().map_err(x_error)?.atom)
}

impl WindowWatcher {
    /// Connects to `display` (or `$DISPLAY`) and starts listening for top-level maps;
    /// `wayland` says that the command's environment names a Wayland display.
    pub(crate) fn connect(display: Option<&str>, wayland: bool) -> Result<WindowWatcher> {
        let display = x_display(display, wayland)?;
        let (conn, screen) = RustConnection::connect(Some(&display))
            .map_err(|source| LaunchError::XConnect { display: display.clone(), source })?;
        let root = conn
            .setup()
            .roots
            .get(screen)
            .map(|s| s.root)
            .ok_or_else(|| LaunchError::Window("no such screen".into()))?;
        let attributes = ChangeWindowAttributesAux::new()
            .event_mask(EventMask::SUBSTRUCTURE_NOTIFY | EventMask::PROPERTY_CHANGE);
        conn.change_window_attributes(root, &attributes).map_err(x_error)?.check().map_err(x_error)?;
        let has_res =
            conn.extension_information(x11rb::protocol::res::X11_EXTENSION_NAME).map_err(x_error)?.is_some();
        let net_wm_pid = intern(&conn, b"_NET_WM_PID")?;
        let net_wm_name = intern(&conn, b"_NET_WM_NAME")?;
        let utf8_string = intern(&conn, b"UTF8_STRING")?;
        let net_supporting_wm_check = intern(&conn, b"_NET_SUPPORTING_WM_CHECK")?;
        Ok(WindowWatcher {
            conn,
            root,
            has_res,
            net_wm_pid,
            net_wm_name,
            utf8_string,
            net_supporting_wm_check,
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.conn.stream().as_fd()
    }

    /// A property's bytes, or `None` when the window does not have it (or is gone).
    fn property(&self, window: u32, property: impl Into<u32>, kind: impl Into<u32>) -> Option<Vec<u8>> {
        let reply = self.conn.get_property(false, window, property, kind, 0, 1024).ok()?.reply().ok()?;
        (reply.format != 0 && !reply.value.is_empty()).then_some(reply.value)
    }

    fn owner(&self, window: u32) -> Option<i32> {
        if self.has_res {
            let spec = ClientIdSpec { client: window, mask: ClientIdMask::LOCAL_CLIENT_PID };
            let reply = x11rb::protocol::res::query_client_ids(&self.conn, &[spec]).ok()?.reply().ok();
            if let Some(pid) = reply.and_then(|r| r.ids.into_iter().find_map(|id| id.value.first().copied()))
            {
                return Some(pid as i32);
            }
        }
        let pid = self.property(window, self.net_wm_pid, AtomEnum::CARDINAL)?;
        Some(u32::from_ne_bytes(pid.get(..4)?.try_into().ok()?) as i32)
    }

    fn facts(&self, window: u32) -> WindowFacts {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let wm_class = self.property(window, AtomEnum::WM_CLASS, AtomEnum::STRING).unwrap_or_default();
        let mut class_parts = wm_class.split(|&b| b == 0).map(text);
        let names = [
            self.property(window, self.net_wm_name, self.utf8_string),
            self.property(window, AtomEnum::WM_NAME, AtomEnum::ANY),
        ];
        WindowFacts {
            window,
            pid: self.owner(window),
            instance: class_parts.next().filter(|s| !s.is_empty()),
            class: class_parts.next().filter(|s| !s.is_empty()),
            names: names.into_iter().flatten().map(|n| text(&n)).collect(),
        }
    }

    /// The window a `_NET_SUPPORTING_WM_CHECK` property on `window` names.
    fn wm_check(&self, window: u32) -> Option<u32> {
        let value = self.property(window, self.net_supporting_wm_check, AtomEnum::WINDOW)?;
        Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
    }

    /// Handles the pending events; returns the top-level windows mapped and the window
    /// managers announced since the last call.
    pub(crate) fn check(&mut self) -> Result<Vec<Mapped>> {
        let mut mapped = Vec::new();
        while let Some(event) = self.conn.poll_for_event().map_err(x_error)? {
            match event {
                Event::MapNotify(map) if map.event == self.root && !map.override_redirect => {
                    let time_ns = boottime_ns();
                    let mut windows = vec![map.window];
                    if let Ok(Ok(tree)) = self.conn.query_tree(map.window).map(|c| c.reply()) {
                        windows.extend(tree.children);
                    }
                    let windows = windows.into_iter().map(|w| self.facts(w)).collect();
                    mapped.push(Mapped { time_ns, windows, window_manager: false });
                }
                Event::PropertyNotify(change)
                    if change.window == self.root
                        && change.atom == self.net_supporting_wm_check
                        && change.state == Property::NEW_VALUE =>
                {
                    let time_ns = boottime_ns();
                    let Some(check) = self.wm_check(self.root) else { continue };
                    if self.wm_check(check) == Some(check) {
                        mapped.push(Mapped {
                            time_ns,
                            windows: vec![self.facts(check)],
                            window_manager: true,
                        });
                    }
                }
                _ => {}
            }
        }
        Ok(mapped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry_walks_up_to_the_tree_root() {
        let me = std::process::id() as i32;
        let parent = std::os::unix::process::parent_id() as i32;
        assert!(descends_from(me, me));
        assert!(descends_from(me, parent));
        assert!(!descends_from(parent, me));
        assert!(!descends_from(1, me));
    }

    #[test]
    fn without_a_display_the_error_says_why() {
        if std::env::var_os("DISPLAY").is_some() {
            return;
        }
        let err = x_display(Some(""), false).unwrap_err().to_string();
        assert!(err.contains("DISPLAY is not set"), "{err}");
        let err = x_display(None, true).unwrap_err().to_string();
        assert!(err.contains("Wayland") && !err.contains('\n'), "{err}");
        assert_eq!(x_display(Some(":7"), true).unwrap(), ":7", "XWayland: DISPLAY wins");
    }

    #[test]
    fn patterns_match_exactly_or_by_regex() {
        let exact = WindowPattern::parse("mate-panel").unwrap();
        assert!(exact.matches("mate-panel") && !exact.matches("Mate-panel") && !exact.matches("mate-panel2"));
        let re = WindowPattern::parse("/^mate-(panel|desktop)$/").unwrap();
        assert!(re.matches("mate-desktop") && !re.matches("mate-panelx"));
        assert_eq!(re.to_string(), "/^mate-(panel|desktop)$/");
        for bad in ["", "//", "/[/", "/unclosed", "/"] {
            let err = WindowPattern::parse(bad).unwrap_err();
            assert!(!err.contains('\n'), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_class_matches_the_instance_or_the_class() {
        let facts = WindowFacts {
            instance: Some("caja".into()),
            class: Some("Caja".into()),
            names: vec!["Home".into()],
            ..WindowFacts::default()
        };
        assert!(facts.class_matches(&WindowPattern::parse("caja").unwrap()));
        assert!(facts.class_matches(&WindowPattern::parse("Caja").unwrap()));
        assert!(!facts.class_matches(&WindowPattern::parse("Home").unwrap()));
        assert!(facts.name_matches(&WindowPattern::parse("/^Ho/").unwrap()));
        assert!(!facts.name_matches(&WindowPattern::parse("caja").unwrap()));
    }
}
