//! What the assembly reads from the machine it runs on, behind one trait: mounts,
//! disks, host facts, FIEMAP extents, directory listings for the walk that names
//! inodes, and /proc facts about tasks outside the recorded tree. [`LiveSystem`]
//! reads the real machine; tests assemble a spool against a fake view.

use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use coldstart_trace::{Dev, Meta};

use crate::assemble::debuginfod::{Debuginfod, Lookup};
use crate::assemble::fiemap::{self, RawExtent};
use crate::system::{self, DiskInfo, Mount};

/// What `lstat` says about a directory entry, as far as the file table needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryStat {
    pub dev: Dev,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub is_dir: bool,
}

/// One entry of a directory listing; `stat` is `None` when it could not be read
/// (the entry went away between the listing and the `lstat`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    pub path: PathBuf,
    pub stat: Option<EntryStat>,
}

/// Everything the assembly reads outside the spool.
pub trait SystemView {
    /// The host facts of the trace's meta (page size included), as [`system::host`] gives them.
    fn host(&self) -> Meta;
    fn mounts(&self) -> Vec<Mount>;
    /// Whether `dev` names a block device (sysfs knows it).
    fn is_block_device(&self, dev: Dev) -> bool;
    /// A partition's disk and start in bytes; a whole disk is its own disk at 0.
    fn whole_disk(&self, dev: Dev) -> (Dev, u64);
    fn disk_info(&self, dev: Dev) -> DiskInfo;
    /// The entries of a directory, without following symbolic links; `None` if it cannot be read.
    fn read_dir(&self, dir: &Path) -> Option<Vec<DirEntry>>;
    /// The extents of `path`, if it is still the file (dev, ino) the recording saw.
    fn extents(&self, path: &Path, dev: Dev, ino: u64) -> io::Result<Vec<RawExtent>>;
    /// The thread group of a live task.
    fn task_tgid(&self, tid: i32) -> Option<i32>;
    /// The name (`comm`) of a live task.
    fn task_comm(&self, tid: i32) -> Option<String>;
    /// The executable of a live process.
    fn task_exe(&self, pid: i32) -> Option<String>;
    /// When a live task started, in clock ticks since boot.
    fn task_start_ticks(&self, tid: i32) -> Option<u64>;
    /// The clock ticks per second of /proc's CPU times (`_SC_CLK_TCK`).
    fn clock_ticks_per_second(&self) -> f64;
    /// The text of a marks file outside the spool (`--marks-file`), if it can be read.
    fn read_marks_file(&self, path: &Path) -> Option<String>;
    /// The bytes of a mapped executable or library (symbols and unwind tables).
    fn code_file(&self, _path: &Path) -> Option<Vec<u8>> {
        None
    }
    /// The text of /proc/kallsyms.
    fn kallsyms(&self) -> Option<String> {
        None
    }
    /// The debug file of a build id from the debuginfod servers of `DEBUGINFOD_URLS`;
    /// `None` when none is set.
    fn debuginfod(&self, _build_id: &str) -> Option<Lookup> {
        None
    }
    /// The text of /proc/PID/maps of a live process.
    fn proc_maps(&self, _pid: i32) -> Option<String> {
        None
    }
    /// Whether `path` (symbolic links followed) opens the file (dev, ino) here.
    fn is_file_at(&self, _path: &Path, _dev: Dev, _ino: u64) -> bool {
        false
    }
    /// Whether each page of the file (dev, ino) at `path` is in the page cache now.
    fn resident_map(&self, _path: &Path, _dev: Dev, _ino: u64, _page_size: u64) -> Option<Vec<bool>> {
        None
    }
}

/// The machine the assembly runs on.
pub struct LiveSystem;

impl SystemView for LiveSystem {
    fn host(&self) -> Meta {
        system::host()
    }

    fn is_file_at(&self, path: &Path, dev: Dev, ino: u64) -> bool {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).is_ok_and(|m| Dev::from_user(m.dev()) == dev && m.ino() == ino)
    }

    fn mounts(&self) -> Vec<Mount> {
        system::mounts()
    }

    fn resident_map(&self, path: &Path, dev: Dev, ino: u64, page_size: u64) -> Option<Vec<bool>> {
        super::resident::resident_map(path, dev, ino, page_size).ok()
    }

    fn is_block_device(&self, dev: Dev) -> bool {
        Path::new(&format!("/sys/dev/block/{}:{}", dev.major, dev.minor)).exists()
    }

    fn whole_disk(&self, dev: Dev) -> (Dev, u64) {
        system::whole_disk(dev)
    }

    fn disk_info(&self, dev: Dev) -> DiskInfo {
        system::disk_info(dev)
    }

    fn read_dir(&self, dir: &Path) -> Option<Vec<DirEntry>> {
        let entries = fs::read_dir(dir).ok()?;
        Some(
            entries
                .flatten()
                .map(|entry| DirEntry {
                    path: entry.path(),
                    stat: entry.metadata().ok().map(|md| EntryStat {
                        dev: Dev::from_user(md.dev()),
                        ino: md.ino(),
                        size: md.size(),
                        mtime_ns: md.mtime() * 1_000_000_000 + md.mtime_nsec(),
                        is_dir: md.is_dir(),
                    }),
                })
                .collect(),
        )
    }

    fn extents(&self, path: &Path, dev: Dev, ino: u64) -> io::Result<Vec<RawExtent>> {
        fiemap::extents(path, dev, ino)
    }

    fn task_tgid(&self, tid: i32) -> Option<i32> {
        let status = fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
        status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse().ok())
    }

    fn task_comm(&self, tid: i32) -> Option<String> {
        fs::read_to_string(format!("/proc/{tid}/comm")).ok().map(|c| c.trim_end().to_owned())
    }

    fn task_exe(&self, pid: i32) -> Option<String> {
        fs::read_link(format!("/proc/{pid}/exe")).ok().map(|p| p.to_string_lossy().into_owned())
    }

    fn task_start_ticks(&self, tid: i32) -> Option<u64> {
        crate::tracefs::process_starttime(tid)
    }

    fn clock_ticks_per_second(&self) -> f64 {
        crate::system::clock_ticks_per_second()
    }

    fn read_marks_file(&self, path: &Path) -> Option<String> {
        fs::read_to_string(path).ok()
    }

    fn code_file(&self, path: &Path) -> Option<Vec<u8>> {
        fs::read(path).ok()
    }

    fn kallsyms(&self) -> Option<String> {
        fs::read_to_string("/proc/kallsyms").ok()
    }

    fn debuginfod(&self, build_id: &str) -> Option<Lookup> {
        Debuginfod::shared().map(|d| d.debuginfo(build_id))
    }

    fn proc_maps(&self, pid: i32) -> Option<String> {
        fs::read_to_string(format!("/proc/{pid}/maps")).ok()
    }
}
