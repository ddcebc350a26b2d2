//! Facts about the machine the recorder reads once: mounts, block devices, host
//! and CPU, and the /proc/diskstats counters.

use std::fs;
use std::path::{Path, PathBuf};

use coldstart_trace::{Dev, Meta};
use nix::unistd::{SysconfVar, sysconf};
use procfs::process::MountInfo;
use procfs::{CpuInfo, Current, DiskStat, Meminfo};

use crate::spool::DiskCounters;

/// One line of /proc/self/mountinfo.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The kernel's id of the mount (unique on the machine, in every namespace).
    pub mnt_id: i32,
    pub dev: Dev,
    /// The path inside the filesystem that is mounted (`/` for whole filesystems).
    pub root: PathBuf,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

/// Undoes the kernel's octal escapes (`\040` for a space, …), which procfs keeps.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c)) {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses /proc/self/mountinfo text; a line that cannot be read is skipped.
pub fn parse_mountinfo(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|line| {
            let info = MountInfo::from_line(line).ok()?;
            Some(Mount {
                mnt_id: info.mnt_id,
                dev: info.majmin.parse().ok()?,
                root: PathBuf::from(unescape(&info.root)),
                mount_point: PathBuf::from(unescape(info.mount_point.to_str()?)),
                fstype: info.fs_type,
                source: unescape(info.mount_source.as_deref().unwrap_or("none")),
            })
        })
        .collect()
}

pub fn mounts() -> Vec<Mount> {
    parse_mountinfo(&fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

/// Parses /proc/diskstats text (the fields this recorder uses); a line that cannot
/// be read is skipped.
pub fn parse_diskstats(text: &str) -> Vec<DiskCounters> {
    text.lines()
        .filter_map(|line| {
            let stat = DiskStat::from_line(line).ok()?;
            Some(DiskCounters {
                major: u32::try_from(stat.major).ok()?,
                minor: u32::try_from(stat.minor).ok()?,
                name: stat.name,
                read_ios: stat.reads,
                read_sectors: stat.sectors_read,
                write_ios: stat.writes,
                write_sectors: stat.sectors_written,
                // The kernel's io_ticks: milliseconds with at least one request in flight.
                io_ticks_ms: stat.time_in_progress,
            })
        })
        .collect()
}

pub fn diskstats() -> Vec<DiskCounters> {
    parse_diskstats(&fs::read_to_string("/proc/diskstats").unwrap_or_default())
}

fn sys_block(dev: Dev) -> PathBuf {
    PathBuf::from(format!("/sys/dev/block/{}:{}", dev.major, dev.minor))
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_owned()).filter(|s| !s.is_empty())
}

/// A partition's disk and start (bytes from the start of the disk); a whole disk is its own disk.
pub fn whole_disk(dev: Dev) -> (Dev, u64) {
    let sys = sys_block(dev);
    let Some(start) = read_trim(&sys.join("start")).and_then(|s| s.parse::<u64>().ok()) else {
        return (dev, 0);
    };
    let parent = fs::canonicalize(&sys).ok().and_then(|p| p.parent().map(|p| p.join("dev")));
    match parent.and_then(|p| read_trim(&p)).and_then(|d| d.parse().ok()) {
        Some(disk) => (disk, start * 512),
        None => (dev, 0),
    }
}

/// What sysfs says about a disk.
pub struct DiskInfo {
    pub name: String,
    pub model: Option<String>,
    pub rotational: Option<bool>,
    pub size_bytes: Option<u64>,
    /// The read-ahead of its bdi, in KiB.
    pub read_ahead_kb: Option<u32>,
}

pub fn disk_info(dev: Dev) -> DiskInfo {
    let sys = sys_block(dev);
    let name = fs::canonicalize(&sys)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dev.to_string());
    DiskInfo {
        name,
        model: read_trim(&sys.join("device/model")),
        rotational: read_trim(&sys.join("queue/rotational")).map(|r| r == "1"),
        size_bytes: read_trim(&sys.join("size")).and_then(|s| s.parse::<u64>().ok()).map(|s| s * 512),
        read_ahead_kb: read_trim(&sys.join("queue/read_ahead_kb")).and_then(|s| s.parse().ok()),
    }
}

/// The kernel's clock ticks per second (`USER_HZ`, the unit of /proc's CPU times).
pub fn clock_ticks_per_second() -> f64 {
    sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100) as f64
}

/// The host facts of a trace's meta: `host`, `kernel`, `cpu_model`, `cpu_count`,
/// `mem_total_bytes` and `page_size`; every other field is left at its default.
pub fn host() -> Meta {
    let uts = nix::sys::utsname::uname().ok();
    let text =
        |field: Option<&std::ffi::OsStr>| field.map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let cpu_model =
        CpuInfo::current().ok().and_then(|info| info.model_name(0).map(str::to_owned)).unwrap_or_default();
    Meta {
        host: text(uts.as_ref().map(|u| u.nodename())),
        kernel: format!(
            "{} {}",
            text(uts.as_ref().map(|u| u.release())),
            text(uts.as_ref().map(|u| u.version()))
        ),
        cpu_model,
        cpu_count: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        mem_total_bytes: Meminfo::current().map(|m| m.mem_total).unwrap_or(0),
        page_size: sysconf(SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096) as u32,
        ..Meta::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_mountinfo_with_escapes_and_optional_fields() {
        let text = "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n\
                    30 22 0:25 / /mnt/my\\040disk rw - tmpfs tmp\\040fs rw\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 2);
        assert_eq!((m[0].dev, m[0].fstype.as_str()), (Dev::new(254, 0), "ext4"));
        assert_eq!(m[1].mount_point, PathBuf::from("/mnt/my disk"));
        assert_eq!(m[1].source, "tmp fs");
    }

    #[test]
    fn parses_diskstats() {
        let d = parse_diskstats(
            " 254       0 vda 31267 6368 4577322 12268 8325 17595 3576656 11969 0 6160 25560 4826 53\n",
        );
        assert_eq!(d[0].name, "vda");
        assert_eq!(
            (d[0].read_ios, d[0].read_sectors, d[0].write_sectors, d[0].io_ticks_ms),
            (31267, 4577322, 3576656, 6160)
        );
    }

    #[test]
    fn reads_every_line_of_this_machines_mountinfo_and_diskstats() {
        let lines = |path: &str| fs::read_to_string(path).unwrap().lines().count();
        assert_eq!(mounts().len(), lines("/proc/self/mountinfo"));
        assert_eq!(diskstats().len(), lines("/proc/diskstats"));
    }
}
