//! Processes the start could do without, grouped and told in the terms of whoever can
//! remove them: the chains of [`roles`](super::roles) keyed by their first process and
//! what started it, with the files they read and why those matter, and the words of a
//! finding about them — a systemd generator or unit for the image builder, an
//! autostarted or D-Bus-activated service, the program's own child for its developers
//! (with what the doctor knows of well-known helpers), a start script's small utilities.

use coldstart_trace::Nanos;

use crate::doctor::facts::Facts;
use crate::doctor::finding::Audience;
use crate::doctor::known;
use crate::doctor::roles::{Origin, Role, Roles, executable};
use crate::units::{bytes, count};

/// Small utilities a shell script starts: the shell can usually do their job itself.
const SHELL_UTILITIES: [&str; 16] = [
    "dirname", "basename", "uname", "sed", "grep", "ls", "cat", "expr", "readlink", "realpath", "tr", "cut",
    "awk", "head", "id", "which",
];

/// What groups processes into one finding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GroupKey {
    /// Every generator of the boot.
    Generators,
    /// The chains whose first process has this name, started the same way.
    Chain { name: String, origin: Origin },
    /// A start script's small utilities.
    ShellUtilities,
}

/// Processes told as one: their pids, each with the time that matters for the finding.
pub(crate) struct Group {
    pub key: GroupKey,
    /// The first process of the first chain.
    pub root: i32,
    pub members: Vec<(i32, Nanos)>,
}

impl Group {
    pub fn ns(&self) -> Nanos {
        self.members.iter().map(|m| m.1).fold(0, Nanos::saturating_add)
    }

    pub fn pids(&self) -> Vec<i32> {
        self.members.iter().map(|m| m.0).collect()
    }
}

/// The key of the group `pid` belongs to, or `None` for a process that is no helper.
pub(crate) fn key_of(f: &Facts, roles: &Roles, pid: i32) -> Option<GroupKey> {
    match roles.role(pid) {
        Role::Program | Role::Infrastructure | Role::ManagerInternal => return None,
        Role::Component | Role::Started => {}
    }
    let root = if roles.role(pid) == Role::Started { roles.chain_root(pid) } else { pid };
    let origin = roles.origin(root);
    let name = f.a.comm(root).to_owned();
    let utility =
        [Some(name.as_str()), executable(f.a, root)].iter().flatten().any(|n| SHELL_UTILITIES.contains(n));
    Some(match origin {
        Origin::Generator => GroupKey::Generators,
        Origin::Child { .. } if utility => GroupKey::ShellUtilities,
        origin => GroupKey::Chain { name, origin },
    })
}

/// Adds `pid` with `ns` to its group in `groups`, in order of first appearance.
pub(crate) fn add(groups: &mut Vec<Group>, key: GroupKey, root: i32, pid: i32, ns: Nanos) {
    match groups.iter_mut().find(|g| g.key == key) {
        Some(g) => match g.members.iter_mut().find(|m| m.0 == pid) {
            Some(m) => m.1 = m.1.saturating_add(ns),
            None => g.members.push((pid, ns)),
        },
        None => groups.push(Group { key, root, members: vec![(pid, ns)] }),
    }
}

/// `a`, `a ×2, b`: the names of `pids`, each once with how many processes had it (a
/// service manager's forks, named in parentheses, left out).
pub(crate) fn names(f: &Facts, pids: &[i32]) -> Vec<String> {
    let mut names: Vec<(&str, u64)> = Vec::new();
    for &pid in pids.iter().filter(|&&pid| !f.a.comm(pid).starts_with('(')) {
        let name = f.a.comm(pid);
        match names.iter_mut().find(|x| x.0 == name) {
            Some(x) => x.1 += 1,
            None => names.push((name, 1)),
        }
    }
    names.iter().map(|(c, k)| if *k > 1 { format!("{c} ×{k}") } else { (*c).to_owned() }).collect()
}

/// The files `pids` read, most bytes first, and their bytes.
pub(crate) fn files_read(f: &Facts, pids: &[i32]) -> Vec<(u32, u64)> {
    let mut files: Vec<(u32, u64)> = Vec::new();
    for u in f.a.file_uses.iter().filter(|u| pids.contains(&u.pid) && f.is_regular(u.file)) {
        let b = u.pages.saturating_mul(f.page_size);
        match files.iter_mut().find(|x| x.0 == u.file) {
            Some(x) => x.1 = x.1.saturating_add(b),
            None => files.push((u.file, b)),
        }
    }
    files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    files
}

/// `libLLVM-15.so.1 (27.7 MiB: LLVM, the compiler …), swrast_dri.so (15.5 MiB: Mesa's GL driver)`:
/// the files that carry most of what `pids` read (at most three, each at least a tenth of
/// the most), with why they matter where the doctor knows.
pub(crate) fn heavy_files(f: &Facts, pids: &[i32]) -> Option<String> {
    let files = files_read(f, pids);
    let most = files.first()?.1;
    let words: Vec<String> = files
        .iter()
        .take(3)
        .filter(|(_, b)| *b * 10 >= most && *b >= 64 * 1024)
        .map(|&(file, b)| {
            let path = f.name(file);
            let name = path.rsplit('/').next().unwrap_or(path);
            match known::file_purpose(path) {
                Some(why) => format!("{name} ({}: {why})", bytes(b)),
                None => format!("{name} ({})", bytes(b)),
            }
        })
        .collect();
    (!words.is_empty()).then(|| words.join(", "))
}

/// How a group is told: who it is, who can act and what they can change.
pub(crate) struct Framing {
    /// `mate-settings-daemon runs xrdb, which runs the C preprocessor …`.
    pub subject: String,
    /// What the doctor knows the process was doing, for the evidence.
    pub detail: Option<String>,
    pub audience: Audience,
    pub suggestion: String,
}

/// The words of a finding about `group` (whose processes were on the critical path, or
/// took the disk and CPUs from it: `on_path`).
pub(crate) fn framing(f: &Facts, roles: &Roles, group: &Group, on_path: bool) -> Framing {
    let pids = group.pids();
    let names = names(f, &pids);
    let root = f.a.comm(group.root).to_owned();
    match &group.key {
        GroupKey::Generators | GroupKey::Chain { origin: Origin::Generator, .. } => generators(names),
        GroupKey::ShellUtilities => Framing {
            subject: format!("The start script's utilities ({})", names.join(", ")),
            detail: None,
            audience: Audience::Developers,
            suggestion: format!(
                "The start script runs {}: do their jobs with shell built-ins (parameter expansion such as \
                 ${{0%/*}} for dirname, `case` for pattern tests, `$(<file)` for cat) or compute the results once \
                 at install time.",
                names.join(", ")
            ),
        },
        GroupKey::Chain { origin: Origin::Unit(unit), .. } => Framing {
            subject: format!("{unit}'s {}", processes(same_name(f, &pids, &root), &root)),
            detail: None,
            audience: Audience::Distribution,
            suggestion: format!(
                "If the image does not need {unit}, mask it when building the image (`systemctl mask {unit}`, or \
                 a `disable {unit}` line in a systemd.preset file); if it does, do its work when the image is \
                 built instead of at every boot{}.",
                if on_path { "" } else { ", or order it after what the start waits for" }
            ),
        },
        GroupKey::Chain { origin: Origin::Activated, .. } => Framing {
            subject: format!("The D-Bus service {root}, started on demand during the start,"),
            detail: None,
            audience: Audience::Developers,
            suggestion: format!(
                "{root} was started by the message bus when a process of the start first called it: its \
                 developers can make it start faster, and its callers can avoid waiting for it before they \
                 are ready (call it asynchronously, or later)."
            ),
        },
        GroupKey::Chain { origin: Origin::Child { starter }, .. } => {
            child(f, roles, group, *starter, on_path)
        }
    }
}

fn generators(names: Vec<String>) -> Framing {
    let hints: Vec<String> = names
        .iter()
        .filter_map(|n| known::generator(n.split(' ').next().unwrap_or(n)).map(|what| format!("{n} {what}")))
        .collect();
    let hints = if hints.is_empty() { String::new() } else { format!(" ({})", hints.join("; ")) };
    Framing {
        subject: format!("systemd's generators ({})", names.join(", ")),
        detail: None,
        audience: Audience::Distribution,
        suggestion: format!(
            "systemd runs every generator at each boot, before it starts any unit, and waits for all of them: \
             when building the image, mask those it does not need with a link to /dev/null of the same name \
             in /etc/systemd/system-generators/ (`ln -s /dev/null \
             /etc/systemd/system-generators/{}`){hints}.",
            names.first().map_or("NAME", |n| n.split(' ').next().unwrap_or(n))
        ),
    }
}

/// A chain the program (or the session) started itself, told for its developers.
fn child(f: &Facts, roles: &Roles, group: &Group, starter: i32, on_path: bool) -> Framing {
    let pids = group.pids();
    let root = f.a.comm(group.root).to_owned();
    let starter_name = f.a.comm(starter).to_owned();
    let chain: Vec<&str> = pids.iter().map(|&p| f.a.comm(p)).collect();
    let runs = format!("{starter_name} runs {}", processes(same_name(f, &pids, &root), &root));
    let developers = if INTERPRETERS
        .contains(&starter_name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.'))
    {
        format!("the developers of the code {starter_name} runs (the script or module that starts {root})")
    } else {
        format!("{starter_name}'s developers")
    };
    let after: Vec<String> = names(f, &pids).into_iter().filter(|n| !n.starts_with(root.as_str())).collect();
    let through = if after.is_empty() { String::new() } else { format!(" (then {})", after.join(", ")) };
    let autostarted =
        roles.role(starter) == Role::Infrastructure && roles.role(group.root) == Role::Component;
    if let Some(tool) = known::tool(&root, &chain) {
        return Framing {
            subject: format!("{runs}, which {}", tool.short),
            detail: Some(tool.doing.to_owned()),
            audience: Audience::Developers,
            suggestion: format!("For {developers}: {}.", tool.change),
        };
    }
    if autostarted {
        return Framing {
            subject: format!("{runs}{through}, started with the session"),
            detail: None,
            audience: Audience::Distribution,
            suggestion: format!(
                "{root} is started with the session (an autostart entry, /etc/xdg/autostart/*.desktop): if the \
                 login does not need it, remove the entry or disable it (`Hidden=true`, or \
                 `X-MATE-Autostart-enabled=false` / `X-GNOME-Autostart-enabled=false`); if it does, delay it \
                 (`X-GNOME-Autostart-Delay`) or start it at a lower priority, after the desktop is ready."
            ),
        };
    }
    let when = if on_path {
        "or, if its answer is not needed before ready, start it afterwards without waiting for it"
    } else {
        "or start it after the program is ready (or at a lower priority: `ionice -c3`, `nice`): the critical \
         path never waited for it, but it took the disk and the CPUs while the path waited"
    };
    Framing {
        subject: format!("{runs}{through}"),
        detail: None,
        audience: Audience::Developers,
        suggestion: format!(
            "{starter_name} starts {root} itself: {developers} can cache what {root} computes between starts \
             (recomputed only when its inputs change) or do the job without starting a process, {when}."
        ),
    }
}

/// Programs that run code of others: who can change what they start is that code's developers.
const INTERPRETERS: [&str; 9] = ["python", "perl", "ruby", "node", "java", "bash", "sh", "dash", "lua"];

/// How many of `pids` are named `name`.
fn same_name(f: &Facts, pids: &[i32], name: &str) -> u64 {
    pids.iter().filter(|&&p| f.a.comm(p) == name).count() as u64
}

/// `1 process`, `3 sed processes`.
pub(crate) fn processes(n: u64, name: &str) -> String {
    let noun = if n == 1 { "process" } else { "processes" };
    if name.is_empty() {
        format!("{} {noun}", count(n))
    } else if n == 1 {
        name.to_owned()
    } else {
        format!("{} {name} {noun}", count(n))
    }
}
