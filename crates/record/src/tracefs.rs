//! Private tracefs instances: finding (or mounting) tracefs, creating the
//! recorder's instances, configuring and removing them, and removing the stale
//! instances of recorders that were killed.
//!
//! Instances are named `coldstart-<pid>-<starttime>-<role>`, where `starttime` is
//! field 22 of `/proc/<pid>/stat`, so a recycled pid is never mistaken for a live
//! recorder.

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, RecordError, Result};

const CANDIDATES: &[&str] = &["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
const PREFIX: &str = "coldstart-";

/// The tracefs mount.
#[derive(Clone, Debug)]
pub struct Tracefs {
    pub root: PathBuf,
}

impl Tracefs {
    /// Finds tracefs, mounting it at /sys/kernel/tracing when it is not mounted.
    pub fn find_or_mount() -> Result<Tracefs> {
        for c in CANDIDATES {
            let root = Path::new(c);
            if root.join("instances").is_dir() && root.join("events").is_dir() {
                return Ok(Tracefs { root: root.to_owned() });
            }
        }
        let target = Path::new(CANDIDATES[0]);
        if !target.is_dir() {
            return Err(RecordError::NoTracefs(format!("{} does not exist", target.display())));
        }
        nix::mount::mount(Some("nodev"), target, Some("tracefs"), nix::mount::MsFlags::empty(), None::<&str>)
            .map_err(|e| {
                RecordError::NoTracefs(format!("mounting tracefs on {} failed: {e}", target.display()))
            })?;
        if target.join("instances").is_dir() {
            Ok(Tracefs { root: target.to_owned() })
        } else {
            Err(RecordError::NoTracefs("tracefs has no instances directory".into()))
        }
    }

    pub fn instances_dir(&self) -> PathBuf {
        self.root.join("instances")
    }

    /// Removes the instances of recorders that are no longer running; returns their names.
    pub fn remove_stale_instances(&self) -> Vec<String> {
        let Ok(entries) = fs::read_dir(self.instances_dir()) else { return Vec::new() };
        let mut removed = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(owner) = InstanceOwner::parse(&name) else { continue };
            if !owner.is_alive() {
                let inst = Instance { name: name.clone(), dir: entry.path() };
                if inst.remove().is_ok() {
                    removed.push(name);
                }
            }
        }
        removed
    }

    /// CPUs that have a `per_cpu/cpuN` directory.
    pub fn cpus(&self) -> Vec<u16> {
        let mut cpus: Vec<u16> = fs::read_dir(self.root.join("per_cpu"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_prefix("cpu")?.parse().ok())
            .collect();
        cpus.sort_unstable();
        cpus
    }
}

/// The recorder process an instance name belongs to. Instances are global to the kernel,
/// but a pid means something only in its PID namespace: a recorder inside a container
/// (`boot init` as its PID 1's child) names its instances with its namespace, so that a
/// recorder outside does not take them for a dead process's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InstanceOwner {
    pub pid: i32,
    pub starttime: Option<u64>,
    /// The inode of the owner's PID namespace (`/proc/self/ns/pid`).
    pub pid_ns: Option<u64>,
}

/// The inode of the initial PID namespace (`PROC_PID_INIT_INO` in the kernel).
const INITIAL_PID_NS: u64 = 0xEFFF_FFFC;

/// The PID namespace of `/proc/PID` (`self` for this process).
fn pid_namespace(pid: &str) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(format!("/proc/{pid}/ns/pid")).ok().map(|m| m.ino())
}

/// Whether any process this /proc shows is in PID namespace `ns`.
fn pid_namespace_has_processes(ns: u64) -> bool {
    let Ok(entries) = fs::read_dir("/proc") else { return true };
    entries.flatten().any(|e| {
        let name = e.file_name();
        let name = name.to_string_lossy();
        name.bytes().all(|b| b.is_ascii_digit()) && pid_namespace(&name) == Some(ns)
    })
}

impl InstanceOwner {
    /// The current process.
    pub fn current() -> InstanceOwner {
        let pid = std::process::id() as i32;
        InstanceOwner { pid, starttime: process_starttime(pid), pid_ns: pid_namespace("self") }
    }

    pub fn parse(name: &str) -> Option<InstanceOwner> {
        let mut parts = name.strip_prefix(PREFIX)?.split('-');
        let pid = parts.next()?.parse().ok()?;
        let starttime = parts.next().and_then(|s| s.parse().ok());
        let pid_ns = parts.next().and_then(|s| s.strip_prefix('n')?.parse().ok());
        Some(InstanceOwner { pid, starttime, pid_ns })
    }

    /// Whether the owner still runs. An owner in another PID namespace is alive while any
    /// process is in that namespace, which only the initial namespace can see; from
    /// inside another one it is left alone.
    pub fn is_alive(&self) -> bool {
        let own = pid_namespace("self");
        if let Some(ns) = self.pid_ns
            && Some(ns) != own
        {
            return own != Some(INITIAL_PID_NS) || pid_namespace_has_processes(ns);
        }
        match (process_starttime(self.pid), self.starttime) {
            (None, _) => false,
            (Some(now), Some(then)) => now == then,
            (Some(_), None) => true,
        }
    }

    pub fn instance_name(&self, role: &str) -> String {
        let ns = self.pid_ns.map(|ns| format!("n{ns}-")).unwrap_or_default();
        format!("{PREFIX}{}-{}-{ns}{role}", self.pid, self.starttime.unwrap_or(0))
    }
}

/// Field 22 (`starttime`) of /proc/PID/stat; `None` when the process does not exist.
pub fn process_starttime(pid: i32) -> Option<u64> {
    Some(procfs::process::Process::new(pid).ok()?.stat().ok()?.starttime)
}

/// What one instance records.
#[derive(Clone, Debug)]
pub struct InstanceConfig {
    pub events: Vec<(&'static str, &'static str)>,
    /// Filters of some of the events, written before they are enabled.
    pub filters: Vec<((&'static str, &'static str), String)>,
    /// Trace only these pids and (with event-fork) their descendants; `None` traces everything.
    pub pids: Option<Vec<i32>>,
    /// Never trace these pids (the recorder itself in system mode).
    pub notrace_pids: Vec<i32>,
    pub buffer_kb: u32,
    pub buffer_percent: u32,
}

/// A tracefs instance owned by this recorder.
#[derive(Debug)]
pub struct Instance {
    pub name: String,
    pub dir: PathBuf,
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value).at(path)
}

impl Instance {
    /// Creates the instance (tracing off) and configures it; removes it again on failure.
    pub fn create(tracefs: &Tracefs, name: &str, config: &InstanceConfig) -> Result<Instance> {
        let dir = tracefs.instances_dir().join(name);
        fs::create_dir(&dir).at(&dir)?;
        let inst = Instance { name: name.to_owned(), dir };
        if let Err(e) = inst.configure(config) {
            let _ = inst.remove();
            return Err(e);
        }
        Ok(inst)
    }

    fn configure(&self, config: &InstanceConfig) -> Result<()> {
        write(&self.dir.join("tracing_on"), "0")?;
        write(&self.dir.join("trace_clock"), "boot")?;
        write(&self.dir.join("buffer_size_kb"), &config.buffer_kb.to_string())?;
        let percent = self.dir.join("buffer_percent");
        if percent.exists() {
            write(&percent, &config.buffer_percent.to_string())?;
        }
        if let Some(pids) = &config.pids {
            write(&self.dir.join("options/event-fork"), "1")?;
            let list: Vec<String> = pids.iter().map(i32::to_string).collect();
            write(&self.dir.join("set_event_pid"), &list.join(" "))?;
        }
        if !config.notrace_pids.is_empty() {
            let list: Vec<String> = config.notrace_pids.iter().map(i32::to_string).collect();
            let path = self.dir.join("set_event_notrace_pid");
            if path.exists() {
                write(&path, &list.join(" "))?;
            }
        }
        for (system, event) in &config.events {
            let enable = self.dir.join("events").join(system).join(event).join("enable");
            if !enable.exists() {
                return Err(RecordError::MissingEvent(
                    format!("{system}:{event}"),
                    format!("{} does not exist", enable.display()),
                ));
            }
            if let Some((_, filter)) = config.filters.iter().find(|(e, _)| e == &(*system, *event)) {
                write(&self.dir.join("events").join(system).join(event).join("filter"), filter)?;
            }
            write(&enable, "1")?;
        }
        Ok(())
    }

    /// Adds pids to the event filter (e.g. the paused command before it runs).
    pub fn add_pids(&self, pids: &[i32]) -> Result<()> {
        use std::io::Write;
        let path = self.dir.join("set_event_pid");
        let mut f = fs::OpenOptions::new().append(true).open(&path).at(&path)?;
        for pid in pids {
            f.write_all(format!("{pid}\n").as_bytes()).at(&path)?;
        }
        Ok(())
    }

    pub fn set_tracing(&self, on: bool) -> Result<()> {
        write(&self.dir.join("tracing_on"), if on { "1" } else { "0" })
    }

    pub fn raw_pipe(&self, cpu: u16) -> PathBuf {
        self.dir.join(format!("per_cpu/cpu{cpu}/trace_pipe_raw"))
    }

    pub fn trace_marker(&self) -> PathBuf {
        self.dir.join("trace_marker")
    }

    /// The per-CPU `stats` file, as (key, value) pairs of its integer lines.
    pub fn cpu_stats(&self, cpu: u16) -> Vec<(String, u64)> {
        let text = read_text(&self.dir.join(format!("per_cpu/cpu{cpu}/stats"))).unwrap_or_default();
        parse_stats(&text)
    }

    /// Turns tracing off and removes the instance (retrying while readers close).
    pub fn remove(&self) -> Result<()> {
        let _ = fs::write(self.dir.join("tracing_on"), "0");
        let mut last = None;
        for _ in 0..50 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => last = Some(e),
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        Err(RecordError::io(&self.dir, last.unwrap_or_else(|| std::io::Error::other("busy"))))
    }
}

/// Reads a tracefs text file with large reads: some of them (`events/header_page`)
/// return only what the first read() asked for, and std's small first read would
/// cut them short.
pub fn read_text(path: &Path) -> std::io::Result<String> {
    use std::io::Read;
    let mut f = fs::File::open(path)?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

/// Parses the integer lines of a per-CPU `stats` file (`overrun: 0`, …).
pub fn parse_stats(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_owned(), v.trim().parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_names_round_trip_and_dead_owners_are_stale() {
        let me = InstanceOwner::current();
        let name = me.instance_name("scope");
        assert_eq!(InstanceOwner::parse(&name), Some(me));
        assert!(me.is_alive());
        assert!(!InstanceOwner { starttime: Some(me.starttime.unwrap() + 1), ..me }.is_alive());
        assert!(!InstanceOwner { pid: i32::MAX, starttime: None, pid_ns: me.pid_ns }.is_alive());
        assert_eq!(InstanceOwner::parse("other-1-2"), None);
        let old = InstanceOwner::parse(&format!("{PREFIX}7-99-scope")).unwrap();
        assert_eq!(old, InstanceOwner { pid: 7, starttime: Some(99), pid_ns: None });
    }

    /// A container's recorder is pid 2 in its namespace: from the initial namespace, where
    /// pid 2 is kthreadd (another start time), its instance is alive while its namespace
    /// has processes, and stale once none is left.
    #[test]
    fn an_owner_in_another_pid_namespace_is_alive_while_the_namespace_has_processes() {
        let me = InstanceOwner::current();
        if me.pid_ns != Some(INITIAL_PID_NS) {
            return;
        }
        let mut child = std::process::Command::new("unshare")
            .args(["--pid", "--fork", "--mount-proc", "sleep", "30"])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let (sleeper, ns) = loop {
            let found = fs::read_dir("/proc")
                .unwrap()
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
                .filter(|&pid| {
                    fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
                })
                .filter_map(|pid| Some((pid, pid_namespace(&pid.to_string())?)))
                .find(|&(pid, ns)| Some(ns) != me.pid_ns && process_parent(pid) == Some(child.id() as i32));
            if let Some(found) = found {
                break found;
            }
            assert!(std::time::Instant::now() < deadline, "no process in a new PID namespace");
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let container = InstanceOwner { pid: 2, starttime: Some(1), pid_ns: Some(ns) };
        assert_eq!(InstanceOwner::parse(&container.instance_name("scope")), Some(container));
        assert!(container.is_alive(), "the namespace still has its sleep");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(sleeper), nix::sys::signal::Signal::SIGKILL)
            .unwrap();
        child.wait().unwrap();
        let gone = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while container.is_alive() {
            assert!(std::time::Instant::now() < gone, "the namespace's processes never went");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    fn process_parent(pid: i32) -> Option<i32> {
        Some(procfs::process::Process::new(pid).ok()?.stat().ok()?.ppid)
    }

    #[test]
    fn parses_cpu_stats() {
        let stats = parse_stats(
            "entries: 84\noverrun: 3\ncommit overrun: 0\noldest event ts:   864.13\ndropped events: 2\n",
        );
        assert!(stats.contains(&("overrun".into(), 3)));
        assert!(stats.contains(&("dropped events".into(), 2)));
        assert!(!stats.iter().any(|(k, _)| k == "oldest event ts"));
    }
}
