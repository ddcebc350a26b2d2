//! Who each process of a start is, so that a finding about it speaks to whoever can act.
//!
//! A process is a helper the start could do without only when it is none of: the program
//! itself (the process that reached ready, the one with most time on the critical path,
//! the traced command and its wrappers and re-execs, any process of the same executable),
//! the session's infrastructure (a session manager, a D-Bus daemon, an X server, a user's
//! service manager), one of the session's components (a process started by those that is
//! still running at ready: a settings daemon, a panel), or a service manager's own child
//! between fork and exec (systemd's `(sd-executor)`: named in parentheses until it
//! execs). The others
//! were started, directly or through one another, by one of those: they form chains
//! (`xrdb` → `sh` → `cpp` → `cc1`), each told by its root and by what started it — a
//! systemd generator, a unit's process, a D-Bus activation, or the program's own child.

use coldstart_trace::{Exec, Nanos};
use rustc_hash::FxHashMap;

use crate::analysis::{Analysis, ProcessInfo};

/// Session managers, message buses and display servers: the start's infrastructure.
const INFRASTRUCTURE: [&str; 20] = [
    "mate-session",
    "gnome-session",
    "gnome-session-binary",
    "gnome-session-service",
    "xfce4-session",
    "lxsession",
    "lxqt-session",
    "cinnamon-session",
    "cinnamon-session-binary",
    "ksmserver",
    "plasma_session",
    "startplasma-x11",
    "dbus-daemon",
    "dbus-broker",
    "dbus-broker-launch",
    "dbus-run-session",
    "dbus-launch",
    "Xvfb",
    "Xorg",
    "Xwayland",
];

/// What a process is to the start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Role {
    /// The program itself: never a helper.
    Program,
    /// A session manager, message bus or display server (or a user's systemd).
    Infrastructure,
    /// A service manager's child between fork and exec, or a worker it forks for itself.
    ManagerInternal,
    /// Started by one of the above and still running at ready: a part of the program or
    /// of the session (a settings daemon, a window manager, a service).
    Component,
    /// Started, directly or through others, by one of the above.
    Started,
}

/// What started a chain of [`Role::Started`] processes, which decides who can remove it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A systemd generator (run by the manager at every boot and reload).
    Generator,
    /// The processes of a systemd unit.
    Unit(String),
    /// A service a D-Bus daemon started on demand.
    Activated,
    /// A process the program (or the session manager) started itself: `starter` is its parent.
    Child { starter: i32 },
}

/// The role of every process of a start and the chain each started one belongs to.
pub(crate) struct Roles<'a> {
    a: &'a Analysis,
    roles: FxHashMap<i32, Role>,
}

impl<'a> Roles<'a> {
    /// `program_pids`: the processes the start is about (ready, most time on the path,
    /// root); `ready`: the readiness point, after which a component is still running.
    pub fn new(a: &'a Analysis, execs: &[Exec], program_pids: &[i32], ready: Nanos) -> Roles<'a> {
        // Every name a process had: its last, and the file name of each program it exec'd.
        let mut names: FxHashMap<i32, Vec<&str>> = FxHashMap::default();
        for p in &a.processes {
            names.entry(p.pid).or_default().push(p.comm.as_str());
        }
        for e in execs {
            names.entry(e.pid).or_default().push(e.path.rsplit('/').next().unwrap_or(&e.path));
        }
        let program: Vec<String> =
            program_pids.iter().filter_map(|&pid| executable(a, pid)).map(str::to_owned).collect();
        let command = &a.trace.command;
        let mut roles: FxHashMap<i32, Role> = FxHashMap::default();
        // In start order, so that a parent's role is known before its children's.
        for p in &a.processes {
            let exe = executable(a, p.pid);
            let parent = p.ppid.and_then(|pp| roles.get(&pp).copied());
            let role = if program_pids.contains(&p.pid)
                || Some(p.pid) == a.trace.root_pid
                || exe.is_some_and(|e| program.iter().any(|x| x == e))
                || reexec_of(&p.argv, command)
            {
                Role::Program
            } else if is_infrastructure(p, exe) {
                Role::Infrastructure
            } else if parent == Some(Role::Started) {
                Role::Started
            } else if is_manager_fork(p) {
                Role::ManagerInternal
            } else if let Some(parent) = parent.filter(|_| {
                let forked_name =
                    p.ppid.and_then(|pp| names.get(&pp)).is_some_and(|n| n.contains(&p.comm.as_str()));
                p.exe.is_none() && p.argv.is_empty() && forked_name
            }) {
                // A fork that never exec'd runs its parent's program, under one of its names: a subshell.
                parent
            } else if parent != Some(Role::Component) && p.end_ns.is_none_or(|end| end > ready) {
                Role::Component
            } else {
                Role::Started
            };
            roles.insert(p.pid, role);
        }
        Roles { a, roles }
    }

    pub fn role(&self, pid: i32) -> Role {
        self.roles.get(&pid).copied().unwrap_or(Role::Started)
    }

    fn parent(&self, pid: i32) -> Option<i32> {
        self.a.process(pid).and_then(|p| p.ppid).filter(|&pp| pp != pid && self.a.process(pp).is_some())
    }

    /// The first process of `pid`'s chain: its farthest ancestor still [`Role::Started`].
    pub fn chain_root(&self, pid: i32) -> i32 {
        let mut root = pid;
        for _ in 0..64 {
            match self.parent(root) {
                Some(pp) if self.role(pp) == Role::Started => root = pp,
                _ => break,
            }
        }
        root
    }

    /// What started the chain rooted at `root`.
    pub fn origin(&self, root: i32) -> Origin {
        if let Some(unit) = self.a.units.iter().find(|u| u.pids.contains(&root)) {
            return Origin::Unit(unit.name.clone());
        }
        if executable_path(self.a, root).is_some_and(is_generator) {
            return Origin::Generator;
        }
        let starter = self.parent(root);
        if starter.is_some_and(|s| executable(self.a, self.visible_starter(s)) == Some("systemd")) {
            return Origin::Unit(self.unit_running(root));
        }
        let started_by_bus = starter.is_some_and(|s| {
            self.role(s) == Role::Infrastructure
                && executable(self.a, s)
                    .is_some_and(|e| e.starts_with("dbus-daemon") || e.starts_with("dbus-broker"))
        });
        match starter {
            Some(_) if started_by_bus => Origin::Activated,
            Some(starter) => Origin::Child { starter: self.visible_starter(starter) },
            None => Origin::Child { starter: root },
        }
    }

    /// The unit a child of the service manager ran for, when the trace did not list it among
    /// the unit's processes (a oneshot's main process is gone by the time the units are
    /// read): the unit named after its executable that was starting when it started.
    fn unit_running(&self, pid: i32) -> String {
        let exe = executable(self.a, pid).unwrap_or("?");
        let started = self.a.process(pid).and_then(|p| p.start_ns);
        let named: Vec<_> = self.a.units.iter().filter(|u| u.name.starts_with(exe)).collect();
        let starting = named
            .iter()
            .find(|u| started.is_some_and(|t| (u.activating_ns..=u.active_ns).contains(&t)))
            .or(named.first());
        starting.map_or_else(|| format!("{exe}.service"), |u| u.name.clone())
    }

    /// The process to name as a chain's starter: a manager's fork between fork and exec
    /// is named by the manager that forked it.
    fn visible_starter(&self, pid: i32) -> i32 {
        match self.role(pid) {
            Role::ManagerInternal => self.parent(pid).unwrap_or(pid),
            _ => pid,
        }
    }

    /// The processes of the chain rooted at `root` among `pids`.
    pub fn in_chain(&self, root: i32, pid: i32) -> bool {
        self.role(pid) == Role::Started && self.chain_root(pid) == root
    }
}

/// The file name of the executable `pid` runs: its last exec's, or, for a fork that did
/// not exec, its parent's.
pub(crate) fn executable(a: &Analysis, pid: i32) -> Option<&str> {
    executable_path(a, pid).map(|path| path.rsplit('/').next().unwrap_or(path))
}

fn executable_path(a: &Analysis, pid: i32) -> Option<&str> {
    let mut p = a.process(pid)?;
    for _ in 0..64 {
        if let Some(exe) = p.exe.as_deref().filter(|e| !e.is_empty()) {
            return Some(exe);
        }
        // A fork that did not exec runs its parent's executable, under its parent's name.
        let parent = p.ppid.and_then(|pp| a.process(pp)).filter(|pp| pp.pid != p.pid && pp.comm == p.comm)?;
        p = parent;
    }
    None
}

/// A systemd generator, of the system or a user, of units or of the environment.
fn is_generator(path: &str) -> bool {
    path.rsplit_once('/').is_some_and(|(dir, _)| dir.ends_with("-generators"))
}

/// True when `argv` is the traced command or its tail (`dbus-run-session mate-session` of
/// `setsid dbus-run-session mate-session`), or the command's arguments behind another
/// program name (a shim that re-execs the real interpreter with the same arguments).
fn reexec_of(argv: &[String], command: &[String]) -> bool {
    if argv.is_empty() || command.is_empty() {
        return false;
    }
    let tail = command.len() >= argv.len() && command[command.len() - argv.len()..] == *argv;
    let same_arguments = argv.len() >= 2 && argv.len() == command.len() && argv[1..] == command[1..];
    tail || same_arguments
}

fn is_infrastructure(p: &ProcessInfo, exe: Option<&str>) -> bool {
    let name = exe.unwrap_or(p.comm.as_str());
    INFRASTRUCTURE.contains(&name) || (name == "systemd" && p.argv.iter().any(|a| a == "--user"))
}

/// systemd names the child it forks `(…)` until it execs (`(sd-executor)`, `(sd-mkdcreds)`,
/// `(agetty)`).
fn is_manager_fork(p: &ProcessInfo) -> bool {
    let parenthesized = p.comm.starts_with('(') && p.comm.ends_with(')') && p.comm.len() > 2;
    parenthesized && p.exe.as_deref().is_none_or(|e| e.is_empty() || e.ends_with("/systemd"))
}

#[cfg(test)]
mod tests {
    use super::{is_generator, reexec_of};

    #[test]
    fn the_traced_command_and_its_tails_are_the_program() {
        let command: Vec<String> = ["setsid", "dbus-run-session", "mate-session"].map(String::from).to_vec();
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert!(reexec_of(&args(&["dbus-run-session", "mate-session"]), &command));
        assert!(reexec_of(&args(&["mate-session"]), &command));
        assert!(!reexec_of(&args(&["mate-session-check-accelerated"]), &command));
        let python: Vec<String> = ["python3", "-c", "import json"].map(String::from).to_vec();
        assert!(reexec_of(&args(&["/usr/bin/python3.11", "-c", "import json"]), &python));
        assert!(!reexec_of(&args(&["fc-list", "--format", "x"]), &python));
    }

    #[test]
    fn generators_are_told_by_their_directory() {
        assert!(is_generator("/usr/lib/systemd/system-generators/systemd-rc-local-generator"));
        assert!(is_generator(
            "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
        ));
        assert!(!is_generator("/usr/lib/systemd/systemd-journald"));
    }
}
