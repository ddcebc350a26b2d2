//! Whether the devices of a plan serve a real-time replay's requests first, looked up
//! before a replay alongside a start: each device's elevator (`queue/scheduler`) and any
//! read limit of blk-throttle (cgroup v1 `blkio.throttle.read_*_device`) or `io.max`
//! (cgroup v2) on this process's cgroup or its ancestors.
//!
//! bfq and mq-deadline (since Linux 5.14: one FIFO per priority class, real-time
//! dispatched first) put a real-time replay ahead of the start's own reads. `none` and
//! kyber keep no priority: requests go out in the order they come, as on an NVMe drive
//! or an IOPS-limited cloud volume. blk-throttle holds the bios over a limit in a FIFO
//! per cgroup and submits them from a kworker, whatever the elevator below
//! (KERNEL-NOTES.md, turn 4). A loop device passes its requests on to the file it reads:
//! when that file lives on a block device, that device's elevator decides. Only sysfs and
//! cgroupfs are read, never the devices themselves.

use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use coldstart_trace::Dev;
use serde::{Deserialize, Serialize};

use crate::plan::Plan;

/// What a device (or the cgroup's limit on it) does with the replay's I/O priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    /// Real-time requests are served first (bfq, mq-deadline).
    Honoured,
    /// Requests are served first in, first out (`none`, kyber, a throttle).
    Ignored,
    /// No block queue to ask (a FUSE or network filesystem, tmpfs, an unknown elevator).
    Unknown,
}

/// One device of the plan, as found.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub dev: Dev,
    /// The kernel's name (`vda`, `loop3`), when the device has a block queue.
    pub name: Option<String>,
    /// The device whose elevator decides: itself, or the block device a loop device reads from.
    pub decided_by: Option<String>,
    /// The elevator in use there.
    pub scheduler: Option<String>,
    /// A read limit on this process's cgroup for the device (or the device below it).
    pub throttle: Option<String>,
    pub priority: Priority,
}

impl DeviceFacts {
    /// One line: the device, what decides, and the verdict.
    pub fn describe(&self) -> String {
        let name = self.name.clone().unwrap_or_else(|| self.dev.to_string());
        let via = match (&self.decided_by, &self.name) {
            (Some(d), Some(n)) if d != n => format!(" on {d}"),
            _ => String::new(),
        };
        let elevator =
            self.scheduler.as_deref().map_or("no block queue".to_owned(), |s| format!("scheduler {s}"));
        let throttle = self.throttle.as_deref().map_or(String::new(), |t| format!(", {t}"));
        let verdict = match self.priority {
            Priority::Honoured => "serves real-time requests first",
            Priority::Ignored => "ignores I/O priority (first in, first out)",
            Priority::Unknown => "unknown",
        };
        format!("{name}{via}: {elevator}{throttle}: {verdict}")
    }
}

/// Where the facts are read from: `/sys` and `/proc/self/cgroup` and `/sys/fs/cgroup` on a
/// live system, a folder in tests.
#[derive(Clone, Debug)]
pub struct Probe {
    pub sys: PathBuf,
    pub cgroup_root: PathBuf,
    /// The text of `/proc/self/cgroup`.
    pub own_cgroups: String,
}

impl Probe {
    pub fn live() -> Probe {
        Probe {
            sys: PathBuf::from("/sys"),
            cgroup_root: PathBuf::from("/sys/fs/cgroup"),
            own_cgroups: std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default(),
        }
    }

    /// The facts of every device the plan's files live on, in device order.
    pub fn plan_devices(&self, plan: &Plan) -> Vec<DeviceFacts> {
        self.devices(plan.files.iter().map(|f| f.dev))
    }

    /// The facts of each of `devs`, once each, in device order.
    pub fn devices(&self, devs: impl IntoIterator<Item = Dev>) -> Vec<DeviceFacts> {
        let mut devs: Vec<Dev> = devs.into_iter().collect();
        devs.sort_unstable();
        devs.dedup();
        let limits = self.read_limits();
        devs.into_iter().map(|dev| self.facts(dev, &limits)).collect()
    }

    /// The sysfs folder of a whole disk (a partition's parent), if `dev` has a block queue.
    fn disk_dir(&self, dev: Dev) -> Option<PathBuf> {
        let dir = std::fs::canonicalize(self.sys.join(format!("dev/block/{dev}"))).ok()?;
        if dir.join("partition").exists() { dir.parent().map(Path::to_owned) } else { Some(dir) }
    }

    fn facts(&self, dev: Dev, limits: &[(Dev, String)]) -> DeviceFacts {
        let limit_on = |d: Dev| limits.iter().find(|(l, _)| *l == d).map(|(_, text)| text.clone());
        let Some(dir) = self.disk_dir(dev) else {
            let throttle = limit_on(dev);
            let priority = if throttle.is_some() { Priority::Ignored } else { Priority::Unknown };
            return DeviceFacts { dev, name: None, decided_by: None, scheduler: None, throttle, priority };
        };
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
        // Limits are set on whole disks; a partition's is its disk's.
        let disk: Option<Dev> = read_small(&dir.join("dev")).and_then(|t| t.trim().parse().ok());
        let mut throttle = limit_on(dev).or_else(|| disk.and_then(limit_on));
        // A loop device hands its requests to the filesystem of its backing file.
        let below = self.backing_device(&dir).and_then(|b| self.disk_dir(b).map(|d| (b, d)));
        if let Some((backing, _)) = below {
            throttle = throttle.or_else(|| limit_on(backing));
        }
        let deciding = below.as_ref().map_or(&dir, |(_, d)| d);
        let decided_by = deciding.file_name().map(|n| n.to_string_lossy().into_owned());
        let scheduler =
            active_scheduler(&std::fs::read_to_string(deciding.join("queue/scheduler")).unwrap_or_default());
        let priority = match (&throttle, scheduler.as_deref()) {
            (Some(_), _) => Priority::Ignored,
            (None, Some(s)) => scheduler_priority(s),
            (None, None) => Priority::Unknown,
        };
        DeviceFacts { dev, name, decided_by, scheduler, throttle, priority }
    }

    /// The device holding a loop device's backing file, when it is a loop device.
    fn backing_device(&self, disk: &Path) -> Option<Dev> {
        let file = std::fs::read_to_string(disk.join("loop/backing_file")).ok()?;
        std::fs::metadata(file.trim()).ok().map(|m| Dev::from_user(m.dev()))
    }

    /// Read limits on this process's cgroup and its ancestors, v1 blk-throttle and v2 io.max.
    fn read_limits(&self) -> Vec<(Dev, String)> {
        let mut limits = Vec::new();
        for line in self.own_cgroups.lines() {
            let mut fields = line.splitn(3, ':');
            let (Some(_), Some(controllers), Some(path)) = (fields.next(), fields.next(), fields.next())
            else {
                continue;
            };
            if controllers.split(',').any(|c| c == "blkio") {
                for dir in ancestors(&self.cgroup_root.join("blkio"), path) {
                    limits.extend(throttle_limits(&dir));
                }
            } else if controllers.is_empty() {
                for base in [self.cgroup_root.join("unified"), self.cgroup_root.clone()] {
                    for dir in ancestors(&base, path) {
                        limits.extend(io_max_limits(&dir));
                    }
                }
            }
        }
        limits
    }
}

/// `mount/path`, then each of its parents up to `mount`.
fn ancestors(mount: &Path, path: &str) -> Vec<PathBuf> {
    let mut dir = mount.join(path.trim_start_matches('/'));
    let mut out = vec![dir.clone()];
    while dir != mount && dir.pop() {
        out.push(dir.clone());
    }
    out
}

fn read_small(path: &Path) -> Option<String> {
    let file = File::open(path).ok()?;
    let mut buf = vec![0u8; 64 << 10];
    let n = file.read_at(&mut buf, 0).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// The limits of a v1 blkio cgroup folder: `MAJ:MIN VALUE` lines of the read files.
fn throttle_limits(dir: &Path) -> Vec<(Dev, String)> {
    let mut out = Vec::new();
    for (file, unit) in [
        ("blkio.throttle.read_iops_device", "read requests/s"),
        ("blkio.throttle.read_bps_device", "read bytes/s"),
    ] {
        for line in read_small(&dir.join(file)).unwrap_or_default().lines() {
            let mut words = line.split_whitespace();
            if let (Some(Ok(dev)), Some(value)) = (words.next().map(str::parse::<Dev>), words.next()) {
                out.push((dev, format!("blk-throttle {value} {unit}")));
            }
        }
    }
    out
}

/// The read limits of a v2 cgroup folder's `io.max`: `MAJ:MIN rbps=… riops=…` lines.
fn io_max_limits(dir: &Path) -> Vec<(Dev, String)> {
    let mut out = Vec::new();
    for line in read_small(&dir.join("io.max")).unwrap_or_default().lines() {
        let mut words = line.split_whitespace();
        let Some(Ok(dev)) = words.next().map(str::parse::<Dev>) else { continue };
        let reads: Vec<&str> = words
            .filter(|w| (w.starts_with("rbps=") || w.starts_with("riops=")) && !w.ends_with("=max"))
            .collect();
        if !reads.is_empty() {
            out.push((dev, format!("io.max {}", reads.join(" "))));
        }
    }
    out
}

/// The elevator in brackets of a `queue/scheduler` file (`none [mq-deadline] kyber bfq`);
/// a file with one word and no brackets names it.
pub fn active_scheduler(text: &str) -> Option<String> {
    let text = text.trim();
    if let Some(start) = text.find('[') {
        let end = text[start..].find(']')? + start;
        return Some(text[start + 1..end].to_owned());
    }
    (!text.is_empty() && !text.contains(' ')).then(|| text.to_owned())
}

/// What an elevator does with I/O priority.
pub fn scheduler_priority(scheduler: &str) -> Priority {
    match scheduler {
        "bfq" | "mq-deadline" | "deadline" | "cfq" => Priority::Honoured,
        "none" | "noop" | "kyber" => Priority::Ignored,
        _ => Priority::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn the_active_elevator_is_the_one_in_brackets() {
        assert_eq!(active_scheduler("none [mq-deadline] kyber bfq\n").as_deref(), Some("mq-deadline"));
        assert_eq!(active_scheduler("[none] mq-deadline\n").as_deref(), Some("none"));
        assert_eq!(active_scheduler("none\n").as_deref(), Some("none"));
        assert_eq!(active_scheduler(""), None);
        assert_eq!(scheduler_priority("kyber"), Priority::Ignored);
        assert_eq!(scheduler_priority("bfq"), Priority::Honoured);
        assert_eq!(scheduler_priority("something-new"), Priority::Unknown);
    }

    /// A fake /sys with vda (mq-deadline, one partition vda1) and nvme0n1 (none), and a
    /// cgroup tree: v1 blkio with a read-IOPS limit on 7:0 in the parent, v2 io.max on 259:0.
    fn probe(root: &Path) -> Probe {
        let sys = root.join("sys");
        for (name, dev, scheduler) in [
            ("vda", "254:0", "none [mq-deadline] kyber bfq"),
            ("nvme0n1", "259:0", "[none] mq-deadline"),
            ("loop0", "7:0", "[none]"),
        ] {
            let dir = sys.join("devices/virtual/block").join(name);
            write(&dir.join("queue/scheduler"), scheduler);
            write(&dir.join("dev"), &format!("{dev}\n"));
            std::fs::create_dir_all(sys.join("dev/block")).unwrap();
            std::os::unix::fs::symlink(&dir, sys.join("dev/block").join(dev)).unwrap();
        }
        let part = sys.join("devices/virtual/block/vda/vda1");
        write(&part.join("partition"), "1");
        std::os::unix::fs::symlink(&part, sys.join("dev/block/254:1")).unwrap();
        let cgroups = root.join("cgroup");
        write(&cgroups.join("blkio/rig/blkio.throttle.read_iops_device"), "7:0 100\n");
        std::fs::create_dir_all(cgroups.join("blkio/rig/login")).unwrap();
        write(
            &cgroups.join("unified/svc/io.max"),
            "259:0 rbps=max wbps=max riops=max wiops=500\n254:0 rbps=1000000 wbps=max riops=max wiops=max\n",
        );
        Probe { sys, cgroup_root: cgroups, own_cgroups: "7:blkio:/rig/login\n0::/svc\n".into() }
    }

    #[test]
    fn each_device_is_judged_by_its_elevator_and_the_cgroups_read_limits() {
        let dir = tempfile::tempdir().unwrap();
        let probe = probe(dir.path());
        let facts = probe.devices([
            Dev::new(259, 0),
            Dev::new(254, 1),
            Dev::new(7, 0),
            Dev::new(0, 44),
            Dev::new(254, 1),
        ]);
        let by = |major| facts.iter().find(|f| f.dev.major == major).unwrap();
        assert_eq!(facts.len(), 4, "one entry per device: {facts:?}");
        // A write limit does not slow reads: nvme0n1 is judged by its elevator.
        assert_eq!(
            (by(259).scheduler.as_deref(), by(259).throttle.as_deref(), by(259).priority),
            (Some("none"), None, Priority::Ignored)
        );
        // A partition is judged by its disk's queue, and a v2 read limit makes it FIFO.
        assert_eq!(by(254).name.as_deref(), Some("vda"));
        assert_eq!(by(254).throttle.as_deref(), Some("io.max rbps=1000000"));
        assert_eq!(by(254).priority, Priority::Ignored);
        // The v1 limit sits on an ancestor of this process's cgroup.
        assert_eq!(by(7).throttle.as_deref(), Some("blk-throttle 100 read requests/s"));
        assert_eq!(by(0).priority, Priority::Unknown, "no block queue");
        assert!(
            by(7).describe().starts_with("loop0: scheduler none, blk-throttle 100"),
            "{}",
            by(7).describe()
        );
    }

    #[test]
    fn without_limits_an_elevator_that_keeps_priorities_is_honoured() {
        let dir = tempfile::tempdir().unwrap();
        let probe = Probe { own_cgroups: "7:blkio:/\n".into(), ..probe(dir.path()) };
        let facts = probe.devices([Dev::new(254, 0)]);
        assert_eq!(facts[0].priority, Priority::Honoured, "{facts:?}");
        assert_eq!(facts[0].describe(), "vda: scheduler mq-deadline: serves real-time requests first");
    }
}
