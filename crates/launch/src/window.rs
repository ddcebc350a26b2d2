//! `window` readiness: the first top-level X11 window mapped by a process of the
//! command's tree.
//!
//! We connect to the command's X display (`DISPLAY` of its environment) before it
//! runs and listen for `MapNotify` on the root window (SubstructureNotify), so
//! every top-level window mapped afterwards is seen. Override-redirect windows
//! (menus, tooltips, drag icons) do not count. The owner of a window is found with
//! the X-Resource extension (`XResQueryClientIds`, the client's pid as the X server
//! sees it) and, where that is missing, the `_NET_WM_PID` property; it counts when
//! that pid descends from the command's tree. Under a reparenting window manager
//! the mapped top-level window is the manager's frame, so the frame's children are
//! checked too. The ready time is when the notification was read (the X server
//! sends it as the map happens; MapNotify carries no timestamp). We connect with our
//! own credentials: as root under sudo, `XAUTHORITY` must point to a cookie we can read.

use std::os::fd::{AsFd, BorrowedFd};

use x11rb::connection::{Connection, RequestConnection};
use x11rb::protocol::Event;
use x11rb::protocol::res::{ClientIdMask, ClientIdSpec};
use x11rb::protocol::xproto::{AtomEnum, ChangeWindowAttributesAux, ConnectionExt, EventMask};
use x11rb::rust_connection::RustConnection;

use crate::clock::{BootNanos, boottime_ns};
use crate::error::{LaunchError, Result};

/// A window of the command's tree that was mapped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) time_ns: BootNanos,
    pub(crate) window: u32,
    pub(crate) pid: i32,
}

impl Seen {
    pub(crate) fn describe(&self) -> String {
        format!("window 0x{:x} of pid {}", self.window, self.pid)
    }
}

pub(crate) struct WindowWatcher {
    conn: RustConnection,
    root: u32,
    tree_root: i32,
    has_res: bool,
    net_wm_pid: u32,
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

impl WindowWatcher {
    /// Connects to `display` (or `$DISPLAY`) and starts listening for top-level maps.
    pub(crate) fn connect(tree_root: i32, display: Option<&str>) -> Result<WindowWatcher> {
        let display =
            display.map(str::to_owned).or_else(|| std::env::var("DISPLAY").ok()).filter(|d| !d.is_empty());
        let Some(display) = display else {
            return Err(LaunchError::Window("no X display: DISPLAY is not set for the command".into()));
        };
        let (conn, screen) = RustConnection::connect(Some(&display))
            .map_err(|source| LaunchError::XConnect { display: display.clone(), source })?;
        let root = conn
            .setup()
            .roots
            .get(screen)
            .map(|s| s.root)
            .ok_or_else(|| LaunchError::Window("no such screen".into()))?;
        let attributes = ChangeWindowAttributesAux::new().event_mask(EventMask::SUBSTRUCTURE_NOTIFY);
        conn.change_window_attributes(root, &attributes).map_err(x_error)?.check().map_err(x_error)?;
        let has_res =
            conn.extension_information(x11rb::protocol::res::X11_EXTENSION_NAME).map_err(x_error)?.is_some();
        let net_wm_pid =
            conn.intern_atom(false, b"_NET_WM_PID").map_err(x_error)?.reply().map_err(x_error)?.atom;
        Ok(WindowWatcher { conn, root, tree_root, has_res, net_wm_pid })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.conn.stream().as_fd()
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
        let reply = self
            .conn
            .get_property(false, window, self.net_wm_pid, AtomEnum::CARDINAL, 0, 1)
            .ok()?
            .reply()
            .ok()?;
        reply.value32()?.next().map(|pid| pid as i32)
    }

    /// The window, or one of its children (a window manager's frame), owned by the tree.
    fn tree_window(&self, window: u32) -> Option<(u32, i32)> {
        let mut candidates = vec![window];
        if let Ok(Ok(tree)) = self.conn.query_tree(window).map(|c| c.reply()) {
            candidates.extend(tree.children);
        }
        candidates
            .into_iter()
            .find_map(|w| self.owner(w).filter(|&pid| descends_from(pid, self.tree_root)).map(|pid| (w, pid)))
    }

    /// Handles the pending events; returns the first top-level window of the tree mapped.
    pub(crate) fn check(&mut self) -> Result<Option<Seen>> {
        while let Some(event) = self.conn.poll_for_event().map_err(x_error)? {
            if let Event::MapNotify(map) = event
                && map.event == self.root
                && !map.override_redirect
                && let Some((window, pid)) = self.tree_window(map.window)
            {
                return Ok(Some(Seen { time_ns: boottime_ns(), window, pid }));
            }
        }
        Ok(None)
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
    fn without_a_display_the_error_says_so() {
        let err = WindowWatcher::connect(1, Some("")).err().map(|e| coldstart_trace::error_chain(&e));
        if std::env::var_os("DISPLAY").is_none() {
            assert!(err.unwrap().contains("DISPLAY is not set"));
        }
    }
}
