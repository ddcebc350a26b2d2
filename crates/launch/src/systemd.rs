//! systemd units: the `unit:NAME` readiness condition (a unit becoming active) and the
//! units' start times read from the manager at the end of a recording.
//!
//! A manager is reached over its private socket (`/run/systemd/private`), peer to peer,
//! the way `systemctl` talks to it without a bus daemon: `Subscribe`, then the unit's
//! `PropertiesChanged` and the manager's `JobRemoved` signals say when to look at it
//! again; nothing is polled. Which manager `unit:NAME` watches:
//!
//! - a **container** the command boots: the first process of the command's tree that is
//!   PID 1 of its own PID namespace and has `/run/systemd/private` under its root
//!   (`systemd-nspawn -b`), reached through `/proc/PID/root/run/systemd/private` as soon
//!   as the socket appears (looked for every 20 ms, until the wait ends);
//! - the host's **system** manager when PID 1 is systemd; or, when PID 1 is an init=
//!   wrapper that is about to exec systemd (`WaitOptions::system_manager_later`), as soon
//!   as PID 1 is systemd and its private socket appears (looked for every 20 ms, until the
//!   wait ends);
//! - the **user** manager of the user the command runs as, when it runs
//!   (`/run/user/UID/systemd/private`).
//!
//! All of those that are there are watched, and the first on which the unit enters
//! `active` after the command started (its `ActiveEnterTimestampMonotonic`) meets the
//! condition; a unit already active when the command starts has to become active
//! again. `unit:system/NAME` and `unit:user/NAME` watch only that manager. A unit that
//! no manager can load (`LoadState` `not-found`) is an error at once when the manager
//! was named, or when a container's manager and every host manager watched say so;
//! otherwise the wait runs to its timeout and says where the unit was not found.
//!
//! systemd's timestamps are CLOCK_MONOTONIC microseconds of the same kernel (a
//! container shares it); they are moved to CLOCK_BOOTTIME with the two clocks read at
//! one instant. The milestone is credited to the unit's main process where it has one
//! (its pid in the container's namespace mapped to the host's through `NSpid`), else to
//! the manager itself.

use std::collections::HashMap;
use std::fmt;

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::clock::BootNanos;
use crate::dbus::{BusError, PeerBus, Value};
use crate::error::{LaunchError, Result};
use crate::sys;
use crate::tree::descendants;

/// The manager's bus name: it answers calls addressed to it, even peer to peer.
const DESTINATION: &str = "org.freedesktop.systemd1";
const MANAGER_PATH: &str = "/org/freedesktop/systemd1";
const MANAGER_IFACE: &str = "org.freedesktop.systemd1.Manager";
const UNIT_IFACE: &str = "org.freedesktop.systemd1.Unit";
const SERVICE_IFACE: &str = "org.freedesktop.systemd1.Service";
const PROPERTIES_IFACE: &str = "org.freedesktop.DBus.Properties";
const UNIT_TYPES: [&str; 11] = [
    "service",
    "socket",
    "target",
    "device",
    "mount",
    "automount",
    "swap",
    "timer",
    "path",
    "slice",
    "scope",
];

/// Which manager a `unit:` condition names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagerChoice {
    /// `unit:NAME`: a container's, the host's or the user's, whichever has the unit
    /// become active first (see the module docs).
    Any,
    /// `unit:system/NAME`: the host's system manager.
    System,
    /// `unit:user/NAME`: the user manager of the user the command runs as.
    User,
}

/// A `unit:` condition's value: a unit name, and the manager when one is named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitSpec {
    pub manager: ManagerChoice,
    pub name: String,
}

impl fmt::Display for UnitSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.manager {
            ManagerChoice::Any => f.write_str(&self.name),
            ManagerChoice::System => write!(f, "system/{}", self.name),
            ManagerChoice::User => write!(f, "user/{}", self.name),
        }
    }
}

impl FromStr for UnitSpec {
    type Err = String;

    /// `NAME`, `system/NAME` or `user/NAME`, NAME a unit name with its type
    /// (`multi-user.target`); the error is one line.
    fn from_str(text: &str) -> std::result::Result<UnitSpec, String> {
        let (manager, name) = match text.split_once('/') {
            Some(("system", name)) => (ManagerChoice::System, name),
            Some(("user", name)) => (ManagerChoice::User, name),
            Some((other, _)) => {
                return Err(format!(
                    "unknown manager {other:?}: write unit:NAME, unit:system/NAME or unit:user/NAME"
                ));
            }
            None => (ManagerChoice::Any, text),
        };
        if name.is_empty() {
            return Err("the unit name is empty (e.g. unit:multi-user.target)".to_owned());
        }
        let valid_chars = name.chars().all(|c| c.is_ascii_alphanumeric() || ":-_.\\@".contains(c));
        let typed =
            name.rsplit_once('.').is_some_and(|(stem, kind)| !stem.is_empty() && UNIT_TYPES.contains(&kind));
        if !valid_chars || !typed {
            return Err(format!(
                "{name:?} is not a unit name: write it with its type, e.g. multi-user.target or ssh.service"
            ));
        }
        Ok(UnitSpec { manager, name: name.to_owned() })
    }
}

/// Which manager, of which kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ManagerKind {
    /// The host's system manager (PID 1).
    System,
    /// A user's manager.
    User { uid: u32 },
    /// The manager of a container the command's tree booted, the process `pid` (host pid).
    Container { pid: i32 },
}

/// A systemd manager and the socket it is reached through.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manager {
    pub kind: ManagerKind,
    pub socket: PathBuf,
}

impl fmt::Display for Manager {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ManagerKind::System => f.write_str("the host's system manager"),
            ManagerKind::User { uid } => write!(f, "the user manager of uid {uid}"),
            ManagerKind::Container { pid } => write!(f, "the container's manager (pid {pid})"),
        }
    }
}

impl Manager {
    /// The host's system manager, when PID 1 is systemd.
    pub fn system() -> Option<Manager> {
        let comm = std::fs::read_to_string("/proc/1/comm").ok()?;
        let socket = PathBuf::from("/run/systemd/private");
        (comm.trim() == "systemd" && socket.exists()).then_some(Manager { kind: ManagerKind::System, socket })
    }

    /// The user manager of `uid`, when it runs.
    pub fn user(uid: u32) -> Option<Manager> {
        let socket = PathBuf::from(format!("/run/user/{uid}/systemd/private"));
        socket.exists().then_some(Manager { kind: ManagerKind::User { uid }, socket })
    }

    /// The manager of a container booted by the tree under `tree_root`: a process of
    /// the tree that is PID 1 of its own PID namespace, with a private socket under its root.
    pub fn container_in_tree(tree_root: i32) -> Option<Manager> {
        descendants(tree_root).into_iter().find_map(|pid| {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let ns_pids: Vec<&str> =
                status.lines().find_map(|l| l.strip_prefix("NSpid:"))?.split_whitespace().collect();
            if ns_pids.len() < 2 || ns_pids.last() != Some(&"1") {
                return None;
            }
            let socket = PathBuf::from(format!("/proc/{pid}/root/run/systemd/private"));
            socket.exists().then_some(Manager { kind: ManagerKind::Container { pid }, socket })
        })
    }

    /// The host pid of the manager's own process.
    fn own_pid(&self) -> Option<i32> {
        match self.kind {
            ManagerKind::System => Some(1),
            ManagerKind::Container { pid } => Some(pid),
            ManagerKind::User { .. } => None,
        }
    }

    /// A pid of the manager's namespace as the host sees it.
    fn host_pid(&self, pid: u32) -> Option<i32> {
        if pid == 0 {
            return None;
        }
        let ManagerKind::Container { pid: manager } = self.kind else { return i32::try_from(pid).ok() };
        let namespace = |p: i32| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
        let manager_ns = namespace(manager)?;
        let wanted = pid.to_string();
        std::iter::once(manager).chain(descendants(manager)).find(|&candidate| {
            let Ok(status) = std::fs::read_to_string(format!("/proc/{candidate}/status")) else {
                return false;
            };
            let innermost = status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .and_then(|v| v.split_whitespace().last());
            innermost == Some(wanted.as_str()) && namespace(candidate).as_ref() == Some(&manager_ns)
        })
    }

    fn connect(&self) -> Result<(PeerBus, UnixStream), BusError> {
        let stream = match self.kind {
            ManagerKind::Container { pid } => {
                let namespace = std::fs::File::open(format!("/proc/{pid}/ns/pid"))?;
                let mounts = std::fs::File::open(format!("/proc/{pid}/ns/mnt"))?;
                UnixStream::from(sys::relay_in_pid_namespace(
                    std::path::Path::new("/run/systemd/private"),
                    namespace.into(),
                    mounts.into(),
                )?)
            }
            _ => UnixStream::connect(&self.socket)?,
        };
        let handle = stream.try_clone()?;
        Ok((PeerBus::authenticate(stream, DESTINATION)?, handle))
    }
}

/// CLOCK_BOOTTIME minus CLOCK_MONOTONIC, now.
fn boottime_offset_ns() -> i64 {
    sys::boottime_ns() - sys::monotonic_ns()
}

/// A systemd monotonic timestamp (µs, 0 for never) on CLOCK_BOOTTIME.
fn boot_ns(monotonic_us: u64, offset_ns: i64) -> Option<BootNanos> {
    (monotonic_us > 0).then(|| (monotonic_us as i64).saturating_mul(1000) + offset_ns)
}

/// One unit's times and identity, from its manager.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitTimes {
    pub name: String,
    /// When it left `inactive` (its start began), CLOCK_BOOTTIME.
    pub activating_ns: Option<BootNanos>,
    /// When it entered `active`.
    pub active_ns: Option<BootNanos>,
    /// When it left `active` (stopped), if it did after starting.
    pub deactivating_ns: Option<BootNanos>,
    /// Its main process (host pid) when it had one still running at the end.
    pub main_pid: Option<i32>,
    /// The units it is ordered after (`After=`), for the chain of units to the ready one.
    pub after: Vec<String>,
}

/// Every unit of `manager` that left `inactive` or entered `active` at or after
/// `since` (CLOCK_BOOTTIME), with its times, main process and `After=` list.
pub fn read_units(manager: &Manager, since: BootNanos) -> Result<Vec<UnitTimes>> {
    let failed = |source: BusError| LaunchError::Systemd { manager: manager.to_string(), source };
    let (mut bus, _stream) = manager.connect().map_err(failed)?;
    // A manager that stops answering must not hold the end of a recording.
    bus.stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| failed(e.into()))?;
    let offset = boottime_offset_ns();
    // ListUnits answers a(ssssssouso): the name first, the unit's object path seventh.
    let listed = bus
        .call(MANAGER_PATH, MANAGER_IFACE, "ListUnits", "", &[])
        .and_then(|m| m.first())
        .map_err(failed)?;
    let mut units = Vec::new();
    for unit in listed.items() {
        let (Some(name), Some(path)) =
            (unit.items().first().and_then(Value::as_str), unit.items().get(6).and_then(Value::as_str))
        else {
            continue;
        };
        let name = name.to_owned();
        let props =
            match bus.call(path, PROPERTIES_IFACE, "GetAll", "s", &[Value::Str(UNIT_IFACE.to_owned())]) {
                Ok(reply) => reply.first().map_err(failed)?,
                Err(BusError::Remote { .. }) => continue,
                Err(e) => return Err(failed(e)),
            };
        let time = |key: &str| props.get(key).and_then(Value::as_u64).and_then(|us| boot_ns(us, offset));
        let activating_ns = time("InactiveExitTimestampMonotonic");
        let active_ns = time("ActiveEnterTimestampMonotonic");
        if !activating_ns.into_iter().chain(active_ns).any(|t| t >= since) {
            continue;
        }
        let main_pid = match name.ends_with(".service") {
            true => bus
                .property(path, SERVICE_IFACE, "MainPID")
                .ok()
                .and_then(|v| v.as_u32())
                .and_then(|pid| manager.host_pid(pid)),
            false => None,
        };
        units.push(UnitTimes {
            name,
            activating_ns,
            active_ns,
            deactivating_ns: time("ActiveExitTimestampMonotonic").filter(|&t| t >= since),
            main_pid,
            after: props.get("After").map(Value::strings).unwrap_or_default(),
        });
    }
    units.sort_by_key(|u| (u.activating_ns.or(u.active_ns), u.name.clone()));
    Ok(units)
}

/// A manager's own boot timestamps, CLOCK_MONOTONIC µs as `systemd-analyze time` reads
/// them (0: not known). Firmware and loader count back from the kernel's start: the firmware
/// took `firmware_us - loader_us`, the loader `loader_us`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BootTimestamps {
    pub firmware_us: u64,
    pub loader_us: u64,
    pub initrd_us: u64,
    pub userspace_us: u64,
}

/// The manager's `FirmwareTimestampMonotonic`, `LoaderTimestampMonotonic`,
/// `InitRDTimestampMonotonic` and `UserspaceTimestampMonotonic`.
pub fn boot_timestamps(manager: &Manager) -> Result<BootTimestamps> {
    let failed = |source: BusError| LaunchError::Systemd { manager: manager.to_string(), source };
    let (mut bus, _stream) = manager.connect().map_err(failed)?;
    bus.stream.set_read_timeout(Some(Duration::from_secs(5))).map_err(|e| failed(e.into()))?;
    let mut read = |name: &str| -> Result<u64> {
        let value = bus.property(MANAGER_PATH, MANAGER_IFACE, name).map_err(failed)?;
        Ok(value.as_u64().unwrap_or(0))
    };
    Ok(BootTimestamps {
        firmware_us: read("FirmwareTimestampMonotonic")?,
        loader_us: read("LoaderTimestampMonotonic")?,
        initrd_us: read("InitRDTimestampMonotonic")?,
        userspace_us: read("UserspaceTimestampMonotonic")?,
    })
}

/// What a watcher thread found.
#[derive(Debug)]
pub(crate) enum UnitEvent {
    /// The condition `index` was met on `manager` at `t_ns`, by `pid`.
    Active { index: usize, manager: Manager, t_ns: BootNanos, pid: Option<i32> },
    /// The manager has no such unit.
    NotFound { index: usize, manager: Manager },
    /// The unit's state on that manager, while not yet met (for the timeout message).
    State { index: usize, manager: Manager, state: String },
    /// The manager could not be asked.
    Failed { manager: Manager, error: String },
}

/// A unit condition met: its index, the manager, the time and the unit's process.
pub(crate) type UnitMet = (usize, Manager, BootNanos, Option<i32>);

/// The threads that watch the unit conditions of one wait; dropping it ends them.
pub(crate) struct UnitWatcher {
    events: Receiver<UnitEvent>,
    stop: Arc<AtomicBool>,
    sockets: Arc<Mutex<Vec<UnixStream>>>,
    /// Each condition's last state on each manager, for the message when it is not met.
    states: HashMap<usize, Vec<(String, String)>>,
    /// Managers that could not be asked, and why.
    failures: Vec<String>,
    not_found: HashMap<usize, Vec<Manager>>,
    /// The host managers each condition watches.
    host_managers: HashMap<usize, usize>,
    container_seen: bool,
}

struct Shared {
    tx: Sender<UnitEvent>,
    stop: Arc<AtomicBool>,
    sockets: Arc<Mutex<Vec<UnixStream>>>,
    started_ns: BootNanos,
}

impl Shared {
    fn clone_for_thread(&self) -> Shared {
        Shared {
            tx: self.tx.clone(),
            stop: self.stop.clone(),
            sockets: self.sockets.clone(),
            started_ns: self.started_ns,
        }
    }
}

impl UnitWatcher {
    /// Starts watching `conditions` (index, spec) for a command started at `started_ns`
    /// whose tree descends from `tree_root` and runs as `uid`. With `system_later`, PID 1
    /// is about to become systemd (an init= wrapper): the system manager is waited for.
    pub(crate) fn start(
        conditions: &[(usize, UnitSpec)],
        tree_root: i32,
        uid: u32,
        started_ns: BootNanos,
        system_later: bool,
    ) -> Result<UnitWatcher> {
        let (tx, events) = channel();
        let shared = Shared {
            tx,
            stop: Arc::new(AtomicBool::new(false)),
            sockets: Arc::new(Mutex::new(Vec::new())),
            started_ns,
        };
        let mut host_managers = HashMap::new();
        let mut by_manager: Vec<(Manager, Vec<(usize, String)>)> = Vec::new();
        let mut add = |manager: Manager, index: usize, name: &str| match by_manager
            .iter_mut()
            .find(|(m, _)| *m == manager)
        {
            Some((_, units)) => units.push((index, name.to_owned())),
            None => by_manager.push((manager, vec![(index, name.to_owned())])),
        };
        let mut container_units = Vec::new();
        // The system manager, when PID 1 has not become systemd yet but will.
        let system_now = Manager::system();
        let wait_for_system = system_now.is_none() && system_later;
        let mut later_units = Vec::new();
        for (index, spec) in conditions {
            if wait_for_system && spec.manager != ManagerChoice::User {
                later_units.push((*index, spec.name.clone()));
            }
            let hosts: Vec<Manager> = match spec.manager {
                ManagerChoice::System if wait_for_system => Vec::new(),
                ManagerChoice::System => vec![system_now.clone().ok_or_else(|| LaunchError::NoManager {
                    unit: spec.to_string(),
                    which: "PID 1 is not systemd (or /run/systemd/private is missing)".to_owned(),
                })?],
                ManagerChoice::User => vec![Manager::user(uid).ok_or_else(|| LaunchError::NoManager {
                    unit: spec.to_string(),
                    which: format!("no user manager runs for uid {uid} (/run/user/{uid}/systemd/private)"),
                })?],
                ManagerChoice::Any => {
                    container_units.push((*index, spec.name.clone()));
                    system_now.clone().into_iter().chain(Manager::user(uid)).collect()
                }
            };
            let later = usize::from(wait_for_system && spec.manager != ManagerChoice::User);
            host_managers.insert(*index, hosts.len() + later);
            for manager in hosts {
                add(manager, *index, &spec.name);
            }
        }
        for (manager, units) in by_manager {
            let shared = shared.clone_for_thread();
            std::thread::spawn(move || watch(&manager, &units, &shared));
        }
        if !later_units.is_empty() {
            let shared = shared.clone_for_thread();
            std::thread::spawn(move || {
                let coming =
                    Manager { kind: ManagerKind::System, socket: PathBuf::from("/run/systemd/private") };
                for (index, _) in &later_units {
                    let state = "waiting for PID 1 to become systemd (its /run/systemd/private)".to_owned();
                    let _ =
                        shared.tx.send(UnitEvent::State { index: *index, manager: coming.clone(), state });
                }
                while !shared.stop.load(Ordering::Relaxed) {
                    if let Some(manager) = Manager::system() {
                        watch(&manager, &later_units, &shared);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        if !container_units.is_empty() {
            let shared = shared.clone_for_thread();
            std::thread::spawn(move || {
                while !shared.stop.load(Ordering::Relaxed) {
                    if let Some(manager) = Manager::container_in_tree(tree_root) {
                        watch(&manager, &container_units, &shared);
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
            });
        }
        Ok(UnitWatcher {
            events,
            stop: shared.stop,
            sockets: shared.sockets,
            states: HashMap::new(),
            failures: Vec::new(),
            not_found: HashMap::new(),
            host_managers,
            container_seen: false,
        })
    }

    /// The conditions met since the last call: (index, manager, time, pid); an error
    /// when a condition's unit is known to exist nowhere it is looked for.
    pub(crate) fn check(&mut self, specs: &HashMap<usize, UnitSpec>) -> Result<Vec<UnitMet>> {
        let mut met = Vec::new();
        while let Ok(event) = self.events.try_recv() {
            match event {
                UnitEvent::Active { index, manager, t_ns, pid } => met.push((index, manager, t_ns, pid)),
                UnitEvent::State { index, manager, state } => {
                    self.container_seen |= matches!(manager.kind, ManagerKind::Container { .. });
                    self.set_state(index, &manager, state);
                }
                UnitEvent::Failed { manager, error } => {
                    self.failures.push(format!("{manager} could not be asked: {error}"))
                }
                UnitEvent::NotFound { index, manager } => {
                    let Some(spec) = specs.get(&index) else { continue };
                    let container = matches!(manager.kind, ManagerKind::Container { .. });
                    self.container_seen |= container;
                    let found_nowhere = self.not_found.entry(index).or_default();
                    found_nowhere.push(manager.clone());
                    let hosts_not_found = found_nowhere
                        .iter()
                        .filter(|m| !matches!(m.kind, ManagerKind::Container { .. }))
                        .count();
                    let all_hosts = hosts_not_found >= self.host_managers.get(&index).copied().unwrap_or(0);
                    let definite = spec.manager != ManagerChoice::Any
                        || (all_hosts
                            && found_nowhere.iter().any(|m| matches!(m.kind, ManagerKind::Container { .. })));
                    if definite {
                        let managers: Vec<String> = found_nowhere.iter().map(Manager::to_string).collect();
                        return Err(LaunchError::NoSuchUnit {
                            unit: spec.name.clone(),
                            managers: managers.join(" and "),
                        });
                    }
                    self.set_state(index, &manager, "not found".to_owned());
                }
            }
        }
        Ok(met)
    }

    fn set_state(&mut self, index: usize, manager: &Manager, state: String) {
        let states = self.states.entry(index).or_default();
        let manager = manager.to_string();
        match states.iter_mut().find(|(m, _)| *m == manager) {
            Some(entry) => entry.1 = state,
            None => states.push((manager, state)),
        }
    }

    /// Why the condition `index` is not met yet, in one line.
    pub(crate) fn pending(&self, index: usize) -> String {
        let states = self.states.get(&index).map(Vec::as_slice).unwrap_or_default();
        let mut said: Vec<String> =
            states.iter().map(|(manager, state)| format!("{state} on {manager}")).collect();
        said.extend(self.failures.iter().cloned());
        match said {
            said if !said.is_empty() => said.join("; "),
            _ if !self.container_seen && self.host_managers.get(&index).copied().unwrap_or(0) == 0 => {
                "no systemd manager to ask: no container's manager appeared in the command's tree, PID 1 is not \
                 systemd and the user has no manager running"
                    .to_owned()
            }
            _ => "no answer from a manager".to_owned(),
        }
    }
}

impl Drop for UnitWatcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Ok(sockets) = self.sockets.lock() {
            for socket in sockets.iter() {
                let _ = socket.shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// One manager, watched until every unit of `units` is met or the wait ends.
fn watch(manager: &Manager, units: &[(usize, String)], shared: &Shared) {
    if let Err(e) = watch_units(manager, units, shared)
        && !shared.stop.load(Ordering::Relaxed)
    {
        let _ = shared.tx.send(UnitEvent::Failed { manager: manager.clone(), error: e.to_string() });
    }
}

fn watch_units(manager: &Manager, units: &[(usize, String)], shared: &Shared) -> Result<(), BusError> {
    // The socket can exist a moment before the manager accepts on it.
    let (mut bus, handle) = {
        let mut tries = 0;
        loop {
            match manager.connect() {
                Ok(connected) => break connected,
                Err(_) if tries < 50 && !shared.stop.load(Ordering::Relaxed) => {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(e),
            }
        }
    };
    if let Ok(mut sockets) = shared.sockets.lock() {
        sockets.push(handle);
    }
    if shared.stop.load(Ordering::Relaxed) {
        return Ok(());
    }
    for (index, _) in units {
        let state = "connected, no answer yet".to_owned();
        let _ = shared.tx.send(UnitEvent::State { index: *index, manager: manager.clone(), state });
    }
    bus.call(MANAGER_PATH, MANAGER_IFACE, "Subscribe", "", &[])?;
    let mut pending: Vec<(usize, String, String)> = Vec::new();
    for (index, name) in units {
        let reply = bus.call(MANAGER_PATH, MANAGER_IFACE, "LoadUnit", "s", &[Value::Str(name.clone())])?;
        let path = reply.first()?.as_str().map(str::to_owned);
        let path = path.ok_or_else(|| BusError::Malformed("LoadUnit answered no object path".to_owned()))?;
        pending.push((*index, name.clone(), path));
    }
    let check = |bus: &mut PeerBus, index: usize, path: &str| -> Result<bool, BusError> {
        let mut text = |name: &str| -> Result<String, BusError> {
            let value = bus.property(path, UNIT_IFACE, name)?;
            value
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| BusError::Malformed(format!("{name} is not a string")))
        };
        if text("LoadState")? == "not-found" {
            let _ = shared.tx.send(UnitEvent::NotFound { index, manager: manager.clone() });
            return Ok(true);
        }
        let state = text("ActiveState")?;
        let entered = bus
            .property(path, UNIT_IFACE, "ActiveEnterTimestampMonotonic")
            .ok()
            .and_then(|v| v.as_u64())
            .and_then(|us| boot_ns(us, boottime_offset_ns()));
        match entered {
            Some(t_ns) if state == "active" && t_ns >= shared.started_ns => {
                let main_pid = bus.property(path, SERVICE_IFACE, "MainPID").ok().and_then(|v| v.as_u32());
                let pid = main_pid.and_then(|p| manager.host_pid(p)).or_else(|| manager.own_pid());
                let _ = shared.tx.send(UnitEvent::Active { index, manager: manager.clone(), t_ns, pid });
                Ok(true)
            }
            _ => {
                let _ = shared.tx.send(UnitEvent::State { index, manager: manager.clone(), state });
                Ok(false)
            }
        }
    };
    let mut still = Vec::new();
    for (index, name, path) in pending {
        if !check(&mut bus, index, &path)? {
            still.push((index, name, path));
        }
    }
    let mut pending = still;
    while !pending.is_empty() && !shared.stop.load(Ordering::Relaxed) {
        let signal = bus.next_signal()?;
        let job_unit = match signal.member.as_deref() {
            // JobRemoved (uoss): the job's id and path, the unit's name, the result.
            Some("JobRemoved") => {
                signal.body().ok().and_then(|b| b.get(2).and_then(Value::as_str).map(str::to_owned))
            }
            _ => None,
        };
        let signal_path = signal.path.unwrap_or_default();
        let mut i = 0;
        while i < pending.len() {
            let (index, name, path) = &pending[i];
            let touched = *path == signal_path || job_unit.as_deref() == Some(name.as_str());
            if touched && check(&mut bus, *index, &path.clone())? {
                pending.remove(i);
            } else {
                i += 1;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_specs_name_a_typed_unit_and_maybe_its_manager() {
        let spec: UnitSpec = "user/graphical-session.target".parse().unwrap();
        assert_eq!((spec.manager, spec.name.as_str()), (ManagerChoice::User, "graphical-session.target"));
        assert_eq!(spec.to_string(), "user/graphical-session.target");
        assert_eq!("getty@tty1.service".parse::<UnitSpec>().unwrap().manager, ManagerChoice::Any);
        for bad in ["", "user/", "multi-user", ".target", "a b.service", "host/ssh.service", "x.unknown"] {
            let err = bad.parse::<UnitSpec>().unwrap_err();
            assert!(!err.contains('\n'), "{bad:?}: {err}");
        }
    }

    #[test]
    fn a_call_is_encoded_as_the_dbus_specification_says_and_its_reply_read() {
        use crate::dbus::{METHOD_RETURN, SIGNAL, message};
        use std::io::{Read, Write};
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let caller = std::thread::spawn(move || {
            let mut bus = PeerBus::new(ours, DESTINATION);
            let reply =
                bus.call(MANAGER_PATH, MANAGER_IFACE, "LoadUnit", "s", &[Value::Str("ssh.service".into())])?;
            let path = reply.first()?.as_str().map(str::to_owned);
            let signal = bus.next_signal()?;
            Ok::<_, BusError>((path, signal.member, signal.path))
        });
        let mut fixed = [0u8; 16];
        theirs.read_exact(&mut fixed).unwrap();
        assert_eq!(&fixed[..4], b"l\x01\x00\x01", "little-endian method call, protocol 1");
        let word = |at: usize| u32::from_le_bytes(fixed[at..at + 4].try_into().unwrap()) as usize;
        let (body_len, serial) = (word(4), word(8) as u32);
        let mut rest = vec![0u8; (16 + word(12)).next_multiple_of(8) - 16 + body_len];
        theirs.read_exact(&mut rest).unwrap();
        let text = String::from_utf8_lossy(&rest);
        assert!(
            text.contains("LoadUnit")
                && text.contains(MANAGER_IFACE)
                && text.contains(DESTINATION)
                && text.contains("ssh.service"),
            "{text}"
        );
        // A signal before the reply is kept for later; the reply is matched by serial.
        let unit_path = "/org/freedesktop/systemd1/unit/ssh_2eservice";
        let signal = message(
            SIGNAL,
            7,
            vec![(1, Value::Path(unit_path.into())), (3, Value::Str("PropertiesChanged".into()))],
            "s",
            &[Value::Str("x".into())],
        )
        .unwrap();
        let reply =
            message(METHOD_RETURN, 8, vec![(5, Value::U32(serial))], "o", &[Value::Path(unit_path.into())])
                .unwrap();
        theirs.write_all(&signal).unwrap();
        theirs.write_all(&reply).unwrap();
        let (path, member, signal_path) = caller.join().unwrap().unwrap();
        assert_eq!(path.as_deref(), Some(unit_path));
        assert_eq!(member.as_deref(), Some("PropertiesChanged"));
        assert_eq!(signal_path.as_deref(), Some(unit_path));
    }

    #[test]
    fn systemd_times_move_to_the_boot_clock() {
        assert_eq!(boot_ns(0, 5), None, "0 is systemd's never");
        assert_eq!(boot_ns(1_500_000, 2_000_000_000), Some(3_500_000_000));
    }
}
