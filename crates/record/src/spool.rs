//! The spool: everything needed to rebuild a trace, written to a private directory
//! (mode 0700) while recording, so that a recorder killed with SIGKILL leaves
//! enough behind for `coldstart recover` to build a valid trace marked partial.
//!
//! Layout of one spool directory:
//! - `start.json` ([`SpoolStart`]): what was known when the command started;
//! - `formats/`: copies of `events/header_page` and the enabled events' `format`;
//! - `<role>-cpu<N>.raw`: raw ring-buffer pages, as read from `trace_pipe_raw`;
//! - `procs.jsonl`, `opens.jsonl`, `samples.jsonl`: one JSON record per line;
//! - `marks`: the marks file the traced program appends to;
//! - `end.json` ([`SpoolEnd`]): written only when the recording ended normally.
//!
//! Root writes and parses spools, so a spool lives only where no one else can
//! change it ([`SpoolRoot`]): the directory is reached from `/` one component at a
//! time through directory descriptors, never following a symbolic link it has not
//! checked, and every directory on the way must belong to root (or the effective
//! user) and be writable by no one else; an ancestor writable by others is
//! accepted only when it is sticky (`/var/tmp`), since there others cannot rename
//! or remove the root-owned entry that comes next. The spool root and each spool
//! must not be writable by anyone else at all. Once a path has passed, only root
//! can change it, so the build may read the spool's files by path. The spool's own
//! files are created through its directory descriptor with `O_EXCL | O_NOFOLLOW`.
//! docs/threat-model.md says what this protects against.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::{self, File};
use std::io::{BufWriter, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use nix::dir::{Dir, Type};
use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, open, openat, readlinkat, renameat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};
use serde::{Deserialize, Serialize};

use crate::error::{IoContext, RecordError, Result};
use crate::tracefs::InstanceOwner;

/// Where spools live unless configured otherwise: on disk, so that a spool outlives a
/// killed recorder (and a reboot) for `coldstart recover`, and under `/var/lib`, where
/// only root can create anything. `/run` would be a tmpfs: the raw pages of a long
/// recording would take memory from the start being measured, and go at reboot.
pub const DEFAULT_SPOOL_ROOT: &str = "/var/lib/coldstart/spool";

/// How many symbolic links a spool path may pass through (the kernel's own limit).
const MAX_SYMLINKS: usize = 40;

/// Why a path is not trusted to hold spools: someone other than root could change it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Distrust {
    #[error("{} is a symbolic link", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not a directory", .0.display())]
    NotDirectory(PathBuf),
    #[error("{} belongs to uid {uid}, not root", path.display())]
    Owner { path: PathBuf, uid: u32 },
    #[error("{} is writable by group or others (mode {mode:04o})", path.display())]
    Writable { path: PathBuf, mode: u32 },
    #[error("{} is a symbolic link owned by uid {uid} in a directory others can write to", path.display())]
    ForeignSymlink { path: PathBuf, uid: u32 },
    #[error("more than {MAX_SYMLINKS} symbolic links on the way to {}", .0.display())]
    SymlinkLoop(PathBuf),
}

/// Whether `uid` may own what leads to a spool: root, or the user we run as.
fn trusted_owner(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

fn mode_of(st: &FileStat) -> Mode {
    Mode::from_bits_truncate(st.st_mode)
}

fn file_type(st: &FileStat) -> SFlag {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT
}

/// Checks a directory met at `path`: its owner, and who else may write to it. Only an
/// ancestor (`last == false`) may be writable by others, and then only if sticky.
fn check_dir(st: &FileStat, path: &Path, last: bool) -> std::result::Result<(), Distrust> {
    let mode = mode_of(st);
    if !trusted_owner(st.st_uid) {
        return Err(Distrust::Owner { path: path.to_owned(), uid: st.st_uid });
    }
    let writable = mode.intersects(Mode::S_IWGRP | Mode::S_IWOTH);
    if writable && (last || !mode.contains(Mode::S_ISVTX)) {
        return Err(Distrust::Writable { path: path.to_owned(), mode: mode.bits() });
    }
    Ok(())
}

/// Why opening a trusted directory failed.
enum WalkError {
    Distrust(Distrust),
    Io(PathBuf, std::io::Error),
}

impl WalkError {
    fn io(path: &Path, errno: Errno) -> WalkError {
        WalkError::Io(path.to_owned(), errno.into())
    }

    fn into_record_error(self) -> RecordError {
        match self {
            WalkError::Distrust(reason) => RecordError::UnsafeSpool(reason),
            WalkError::Io(path, source) => RecordError::Io { path, source },
        }
    }
}

impl From<Distrust> for WalkError {
    fn from(reason: Distrust) -> WalkError {
        WalkError::Distrust(reason)
    }
}

const DIR_FLAGS: OFlag =
    OFlag::O_RDONLY.union(OFlag::O_DIRECTORY).union(OFlag::O_NOFOLLOW).union(OFlag::O_CLOEXEC);

/// Opens the directory `path` from `/`, one component at a time, checking each
/// directory with [`check_dir`] and following a symbolic link only where no one but
/// root could have made or replaced it; the last component must be a real
/// directory. With `create`, missing directories are made (mode 0755, the last
/// 0700), as `mkdir -p` would.
fn open_trusted_dir(path: &Path, create: bool) -> std::result::Result<OwnedFd, WalkError> {
    let absolute = std::path::absolute(path).map_err(|e| WalkError::Io(path.to_owned(), e))?;
    let root = Path::new("/");
    let root_fd = open(root, DIR_FLAGS, Mode::empty()).map_err(|e| WalkError::io(root, e))?;
    let root_st = fstat(&root_fd).map_err(|e| WalkError::io(root, e))?;
    check_dir(&root_st, root, false)?;
    let mut pending: VecDeque<OsString> = components(&absolute);
    let mut stack: Vec<(OwnedFd, FileStat, PathBuf)> = vec![(root_fd, root_st, root.to_owned())];
    let mut links = 0;
    while let Some(name) = pending.pop_front() {
        if name == ".." {
            if stack.len() > 1 {
                stack.pop();
            }
            continue;
        }
        let last = pending.is_empty();
        let (parent, parent_st, parent_path) = stack.last().expect("the stack keeps `/`");
        let shown = parent_path.join(&name);
        match openat(parent, name.as_os_str(), DIR_FLAGS, Mode::empty()) {
            Ok(fd) => {
                let st = fstat(&fd).map_err(|e| WalkError::io(&shown, e))?;
                check_dir(&st, &shown, last)?;
                stack.push((fd, st, shown));
            }
            Err(Errno::ENOENT) if create => {
                let mode = Mode::from_bits_truncate(if last { 0o700 } else { 0o755 });
                match mkdirat(parent, name.as_os_str(), mode) {
                    Ok(()) | Err(Errno::EEXIST) => pending.push_front(name),
                    Err(e) => return Err(WalkError::io(&shown, e)),
                }
            }
            Err(Errno::ELOOP | Errno::ENOTDIR) => {
                let st = fstatat(parent, name.as_os_str(), AtFlags::AT_SYMLINK_NOFOLLOW)
                    .map_err(|e| WalkError::io(&shown, e))?;
                if file_type(&st) != SFlag::S_IFLNK {
                    return Err(Distrust::NotDirectory(shown).into());
                }
                if last {
                    return Err(Distrust::Symlink(shown).into());
                }
                let parent_writable = mode_of(parent_st).intersects(Mode::S_IWGRP | Mode::S_IWOTH);
                if parent_writable && !trusted_owner(st.st_uid) {
                    return Err(Distrust::ForeignSymlink { path: shown, uid: st.st_uid }.into());
                }
                links += 1;
                if links > MAX_SYMLINKS {
                    return Err(Distrust::SymlinkLoop(absolute).into());
                }
                let target = readlinkat(parent, name.as_os_str()).map_err(|e| WalkError::io(&shown, e))?;
                let target = PathBuf::from(target);
                if target.is_absolute() {
                    stack.truncate(1);
                }
                for part in components(&target).into_iter().rev() {
                    pending.push_front(part);
                }
            }
            Err(e) => return Err(WalkError::io(&shown, e)),
        }
    }
    let (fd, _, _) = stack.pop().expect("the stack keeps `/`");
    Ok(fd)
}

/// The names a path goes through, `..` kept, `/` and `.` left out.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_owned()),
            Component::ParentDir => Some("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// Opens a directory entry of `dir` that must itself be a trusted spool directory.
fn open_trusted_entry(dir: &OwnedFd, name: &OsStr, path: &Path) -> std::result::Result<OwnedFd, WalkError> {
    match openat(dir, name, DIR_FLAGS, Mode::empty()) {
        Ok(fd) => {
            let st = fstat(&fd).map_err(|e| WalkError::io(path, e))?;
            check_dir(&st, path, true)?;
            Ok(fd)
        }
        // With O_NOFOLLOW | O_DIRECTORY, Linux answers ENOTDIR for a link.
        Err(Errno::ELOOP | Errno::ENOTDIR) => match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(&st) == SFlag::S_IFLNK => Err(Distrust::Symlink(path.to_owned()).into()),
            Ok(_) => Err(Distrust::NotDirectory(path.to_owned()).into()),
            Err(e) => Err(WalkError::io(path, e)),
        },
        Err(e) => Err(WalkError::io(path, e)),
    }
}

/// Whether `dir` holds a regular `start.json` (what makes a directory a spool).
fn has_start(dir: &OwnedFd) -> bool {
    fstatat(dir, "start.json", AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|st| file_type(&st) == SFlag::S_IFREG)
}

/// The directory spools live in, checked from `/` and held open.
#[derive(Debug)]
pub struct SpoolRoot {
    pub path: PathBuf,
    fd: OwnedFd,
}

/// The spools of recorders that are no longer running.
#[derive(Debug, Default)]
pub struct Leftovers {
    pub spools: Vec<Spool>,
    /// Spool-like entries not read because someone other than root could have
    /// written them (another owner, writable by others, a symbolic link).
    pub skipped: Vec<RecordError>,
}

impl SpoolRoot {
    /// Opens the spool root at `path`, creating it (mode 0700) and its missing parents;
    /// refuses it unless only root can change it (see the module's documentation).
    pub fn create(path: &Path) -> Result<SpoolRoot> {
        let fd = open_trusted_dir(path, true).map_err(WalkError::into_record_error)?;
        Ok(SpoolRoot { path: path.to_owned(), fd })
    }

    /// Opens an existing spool root; `None` if there is none.
    pub fn open(path: &Path) -> Result<Option<SpoolRoot>> {
        match open_trusted_dir(path, false) {
            Ok(fd) => Ok(Some(SpoolRoot { path: path.to_owned(), fd })),
            Err(WalkError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into_record_error()),
        }
    }

    /// Creates a new, empty spool for the recorder `owner`.
    pub fn new_spool(&self, owner: &InstanceOwner) -> Result<Spool> {
        let name = format!("{}-{}", owner.pid, owner.starttime.unwrap_or(0));
        let dir = self.path.join(&name);
        match fstatat(&self.fd, name.as_str(), AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) if file_type(&st) == SFlag::S_IFDIR => fs::remove_dir_all(&dir).at(&dir)?,
            Ok(_) => {
                unlinkat(&self.fd, name.as_str(), UnlinkatFlags::NoRemoveDir).map_err(|e| io_at(&dir, e))?
            }
            Err(Errno::ENOENT) => {}
            Err(e) => return Err(io_at(&dir, e)),
        }
        mkdirat(&self.fd, name.as_str(), Mode::from_bits_truncate(0o700)).map_err(|e| io_at(&dir, e))?;
        let fd =
            open_trusted_entry(&self.fd, OsStr::new(&name), &dir).map_err(WalkError::into_record_error)?;
        mkdirat(&fd, "formats", Mode::from_bits_truncate(0o700))
            .map_err(|e| io_at(dir.join("formats"), e))?;
        Ok(Spool { dir, fd: Arc::new(fd) })
    }

    /// Spools here whose recorder is no longer running, and those not trusted enough to read.
    pub fn leftovers(&self) -> Result<Leftovers> {
        let mut found = Leftovers::default();
        let mut dir =
            Dir::openat(&self.fd, ".", DIR_FLAGS, Mode::empty()).map_err(|e| io_at(&self.path, e))?;
        for entry in dir.iter() {
            let entry = entry.map_err(|e| io_at(&self.path, e))?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            let Some((pid, start)) = name.to_str().and_then(|n| n.split_once('-')) else { continue };
            let (Ok(pid), Ok(start)) = (pid.parse(), start.parse()) else { continue };
            if (InstanceOwner { pid, starttime: Some(start), pid_ns: None }).is_alive() {
                continue;
            }
            let dir = self.path.join(name);
            match open_trusted_entry(&self.fd, name, &dir) {
                Ok(fd) if has_start(&fd) => found.spools.push(Spool { dir, fd: Arc::new(fd) }),
                Ok(_) => {}
                Err(e) => found.skipped.push(e.into_record_error()),
            }
        }
        found.spools.sort_by(|a, b| a.dir.cmp(&b.dir));
        Ok(found)
    }
}

fn io_at(path: impl AsRef<Path>, errno: Errno) -> RecordError {
    RecordError::io(path, errno.into())
}

/// Raw /proc/diskstats counters of one device.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskCounters {
    pub major: u32,
    pub minor: u32,
    pub name: String,
    pub read_ios: u64,
    pub read_sectors: u64,
    pub write_ios: u64,
    pub write_sectors: u64,
    pub io_ticks_ms: u64,
}

/// What was known when the command started.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpoolStart {
    pub owner_pid: i32,
    pub owner_starttime: Option<u64>,
    pub output: PathBuf,
    pub command: Vec<String>,
    pub cwd: Option<String>,
    pub user: Option<String>,
    /// Owner of the trace file (the sudo invoker), if not root.
    pub chown: Option<(u32, u32)>,
    pub system: bool,
    pub root_pid: Option<i32>,
    /// The processes of `--also`, recorded with the tree.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<coldstart_trace::AlsoScope>,
    /// The threads of the `--also` processes at the start, as (tid, pid).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also_threads: Vec<(i32, i32)>,
    /// CLOCK_BOOTTIME at t = 0.
    pub t0_boot_ns: i64,
    pub start_unix_ns: i64,
    /// CLOCK_BOOTTIME − CLOCK_MONOTONIC at t = 0.
    pub boottime_offset_ns: i64,
    pub cold: bool,
    pub eviction: Option<String>,
    pub sample_hz: f64,
    pub cpus: Vec<u16>,
    pub subbuf_size: usize,
    pub diskstats_start: Vec<DiskCounters>,
    pub marks_file: Option<PathBuf>,
    pub notes: Vec<String>,
    /// How long the boot took before t = 0 (`record --boot`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub before_recording: Vec<coldstart_trace::BootPhase>,
}

/// What the recorder knew when it stopped normally.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpoolEnd {
    pub t_end_boot_ns: i64,
    pub ready_boot_ns: Option<i64>,
    pub ready_reason: Option<String>,
    /// The process and thread that reached readiness, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_pid: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_tid: Option<i32>,
    /// The output line that made the command ready (`--until output:REGEX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_line: Option<String>,
    /// Each `--until` condition met, by time.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub milestones: Vec<SpoolMilestone>,
    pub exit_code: Option<i32>,
    /// The systemd units started during the recording, read from the manager the
    /// command's tree booted (or the one a `unit:` condition was met on) before the
    /// tree was ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub units: Vec<SpoolUnit>,
    pub diskstats_end: Vec<DiskCounters>,
    /// (source, what, count) rows for the `loss` table.
    pub losses: Vec<(String, String, u64)>,
    pub notes: Vec<String>,
}

/// A readiness condition met during the recording, as the `until` mark it becomes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolMilestone {
    pub boot_ns: i64,
    /// The condition's words, e.g. `window:mate-panel`.
    pub name: String,
    pub pid: Option<i32>,
    pub tid: Option<i32>,
}

/// A systemd unit as its manager told, times on CLOCK_BOOTTIME.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpoolUnit {
    pub name: String,
    /// `system`, `user` or `container`.
    pub manager: String,
    pub activating_boot_ns: Option<i64>,
    pub active_boot_ns: Option<i64>,
    pub deactivating_boot_ns: Option<i64>,
    pub pid: Option<i32>,
    pub after: Vec<String>,
}

/// One spool directory, held open.
#[derive(Clone, Debug)]
pub struct Spool {
    pub dir: PathBuf,
    fd: Arc<OwnedFd>,
}

impl Spool {
    /// Opens the spool at `dir` for `coldstart recover`, refusing it unless only root
    /// can have written it (see the module's documentation).
    pub fn open(dir: &Path) -> Result<Spool> {
        let fd = open_trusted_dir(dir, false).map_err(WalkError::into_record_error)?;
        if !has_start(&fd) {
            return Err(RecordError::Spool(format!(
                "{} is not a coldstart spool (no start.json)",
                dir.display()
            )));
        }
        Ok(Spool { dir: dir.to_owned(), fd: Arc::new(fd) })
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn raw_path(&self, role: &str, cpu: u16) -> PathBuf {
        self.dir.join(format!("{role}-cpu{cpu}.raw"))
    }

    /// Creates the new file `name` (mode 0600) in the spool, or in `formats/`; never
    /// follows or reuses what is already there.
    pub fn create_file(&self, name: &str) -> Result<File> {
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        openat(&*self.fd, name, flags, Mode::from_bits_truncate(0o600))
            .map(File::from)
            .map_err(|e| io_at(self.path(name), e))
    }

    /// Opens the spool's file `name` for reading, without following a symbolic link.
    fn open_file(&self, name: &str) -> std::io::Result<File> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        Ok(File::from(openat(&*self.fd, name, flags, Mode::empty())?))
    }

    pub(crate) fn read_file(&self, name: &str) -> std::io::Result<Vec<u8>> {
        let mut bytes = Vec::new();
        self.open_file(name)?.read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let tmp = format!(".{name}.tmp");
        let text = serde_json::to_vec_pretty(value)
            .map_err(|source| RecordError::SpoolJson { path: self.path(name), source })?;
        match unlinkat(&*self.fd, tmp.as_str(), UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(e) => return Err(io_at(self.path(&tmp), e)),
        }
        self.create_file(&tmp)?.write_all(&text).at(self.path(&tmp))?;
        // No fsync: `start.json` is written as the command starts, where a journal commit
        // and a cache flush would be the recorder's own cost in the start (and its writes in
        // the trace); the rename keeps the file whole for `recover` after a killed recorder,
        // and a machine that crashes loses the tracing instances' data anyway.
        renameat(&*self.fd, tmp.as_str(), &*self.fd, name).map_err(|e| io_at(self.path(name), e))
    }

    pub fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<Option<T>> {
        let path = self.path(name);
        match self.read_file(name) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| RecordError::SpoolJson { path: path.clone(), source }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(RecordError::io(path, e)),
        }
    }

    pub fn start(&self) -> Result<SpoolStart> {
        self.read_json("start.json")?
            .ok_or_else(|| RecordError::Spool(format!("{}: no start.json", self.dir.display())))
    }

    pub fn end(&self) -> Result<Option<SpoolEnd>> {
        self.read_json("end.json")
    }

    /// Copies a tracefs format file into `formats/` under `name`.
    pub fn save_format(&self, name: &str, text: &str) -> Result<()> {
        let name = format!("formats/{name}");
        self.create_file(&name)?.write_all(text.as_bytes()).at(self.path(&name))
    }

    /// The saved format files, as (name, text).
    pub fn formats(&self) -> Result<Vec<(String, String)>> {
        let dir = self.dir.join("formats");
        let mut formats =
            Dir::openat(&*self.fd, "formats", DIR_FLAGS, Mode::empty()).map_err(|e| io_at(&dir, e))?;
        let mut out = Vec::new();
        for entry in formats.iter().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if entry.file_type() == Some(Type::Directory) {
                continue;
            }
            let name_in_spool = format!("formats/{name}");
            let text = self
                .open_file(&name_in_spool)
                .and_then(std::io::read_to_string)
                .at(self.path(&name_in_spool))?;
            out.push((name, text));
        }
        out.sort();
        Ok(out)
    }

    /// Reads a JSON-lines file, skipping a torn last line (a recorder killed mid-write).
    pub fn read_lines<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<(Vec<T>, usize)> {
        let path = self.path(name);
        let text = match self.open_file(name).and_then(std::io::read_to_string) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0)),
            Err(e) => return Err(RecordError::io(path, e)),
        };
        let mut bad = 0;
        let rows = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .filter_map(|l| serde_json::from_str(l).map_err(|_| bad += 1).ok())
            .collect();
        Ok((rows, bad))
    }

    /// Copies the regular file at `source` into the spool as `name`, never opening a
    /// symbolic link, a FIFO or a device there.
    pub fn copy_in(&self, name: &str, source: &Path) -> Result<u64> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC;
        let from = open(source, flags, Mode::empty()).map_err(|e| io_at(source, e))?;
        let st = fstat(&from).map_err(|e| io_at(source, e))?;
        if file_type(&st) != SFlag::S_IFREG {
            return Err(RecordError::io(source, std::io::Error::other("not a regular file")));
        }
        std::io::copy(&mut File::from(from), &mut self.create_file(name)?).at(self.path(name))
    }

    /// Bytes of the spool's files: the raw ring-buffer pages of each role, and everything else.
    pub fn sizes(&self) -> (Vec<(String, u64)>, u64) {
        let mut roles: Vec<(String, u64)> = Vec::new();
        let mut other = 0;
        let files = fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .chain(fs::read_dir(self.dir.join("formats")).into_iter().flatten());
        for entry in files.flatten() {
            let Ok(md) = entry.metadata() else { continue };
            if !md.is_file() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            match name.strip_suffix(".raw").and_then(|n| n.split_once("-cpu")) {
                Some((role, _)) => match roles.iter_mut().find(|r| r.0 == role) {
                    Some(r) => r.1 += md.len(),
                    None => roles.push((role.to_owned(), md.len())),
                },
                None => other += md.len(),
            }
        }
        roles.sort();
        (roles, other)
    }

    pub fn remove(self) -> Result<()> {
        fs::remove_dir_all(&self.dir).at(&self.dir)
    }
}

/// Appends JSON records, one per line, flushed by the caller at batch ends.
pub struct LineWriter {
    out: BufWriter<File>,
    pub path: PathBuf,
}

impl LineWriter {
    pub fn create(spool: &Spool, name: &str) -> Result<LineWriter> {
        Ok(LineWriter {
            out: BufWriter::with_capacity(64 << 10, spool.create_file(name)?),
            path: spool.path(name),
        })
    }

    pub fn push<T: Serialize>(&mut self, value: &T) -> Result<()> {
        serde_json::to_writer(&mut self.out, value)
            .map_err(|source| RecordError::SpoolJson { path: self.path.clone(), source })?;
        self.out.write_all(b"\n").at(&self.path)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().at(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};

    use super::*;

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn refusal(path: &Path) -> Distrust {
        match SpoolRoot::create(path) {
            Err(RecordError::UnsafeSpool(reason)) => reason,
            other => panic!("{} was not refused: {other:?}", path.display()),
        }
    }

    #[test]
    fn spool_round_trip_and_torn_lines() {
        let tmp = tempfile::tempdir().unwrap();
        let root = SpoolRoot::create(&tmp.path().join("spool")).unwrap();
        let spool = root.new_spool(&InstanceOwner::current()).unwrap();
        let start = SpoolStart { command: vec!["true".into()], t0_boot_ns: 5, ..Default::default() };
        spool.write_json("start.json", &start).unwrap();
        assert_eq!(spool.start().unwrap(), start);
        assert_eq!(spool.end().unwrap(), None);
        let mut w = LineWriter::create(&spool, "x.jsonl").unwrap();
        w.push(&(1, "a")).unwrap();
        w.push(&(2, "b")).unwrap();
        w.flush().unwrap();
        let mut f = fs::OpenOptions::new().append(true).open(spool.path("x.jsonl")).unwrap();
        f.write_all(b"[3, \"c").unwrap();
        let (rows, bad): (Vec<(i32, String)>, usize) = spool.read_lines("x.jsonl").unwrap();
        assert_eq!(rows, vec![(1, "a".into()), (2, "b".into())]);
        assert_eq!(bad, 1);
        spool.save_format("sched__sched_switch", "name: sched_switch").unwrap();
        assert_eq!(
            spool.formats().unwrap(),
            [("sched__sched_switch".to_owned(), "name: sched_switch".to_owned())]
        );
        assert_eq!(fs::metadata(&root.path).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(fs::metadata(&spool.dir).unwrap().permissions().mode() & 0o777, 0o700);
        let leftovers = root.leftovers().unwrap();
        assert!(
            leftovers.spools.is_empty() && leftovers.skipped.is_empty(),
            "our own spool is not a leftover"
        );
    }

    #[test]
    fn spool_files_are_new_files_never_a_planted_link() {
        let tmp = tempfile::tempdir().unwrap();
        let root = SpoolRoot::create(tmp.path()).unwrap();
        let spool = root.new_spool(&InstanceOwner::current()).unwrap();
        let target = tmp.path().join("target");
        symlink(&target, spool.path("opens.jsonl")).unwrap();
        assert!(LineWriter::create(&spool, "opens.jsonl").is_err());
        assert!(!target.exists(), "the link was not followed");
        fs::write(spool.path("procs.jsonl"), "kept").unwrap();
        assert!(spool.create_file("procs.jsonl").is_err(), "an existing file is not reused");
        assert_eq!(fs::read_to_string(spool.path("procs.jsonl")).unwrap(), "kept");
    }

    #[test]
    fn copy_in_takes_only_a_regular_file() {
        let tmp = tempfile::tempdir().unwrap();
        let root = SpoolRoot::create(&tmp.path().join("spool")).unwrap();
        let spool = root.new_spool(&InstanceOwner::current()).unwrap();
        let marks = tmp.path().join("marks");
        fs::write(&marks, "1.5 ready\n").unwrap();
        assert_eq!(spool.copy_in("marks", &marks).unwrap(), 10);
        assert_eq!(fs::read_to_string(spool.path("marks")).unwrap(), "1.5 ready\n");
        let fifo = tmp.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(spool.copy_in("fifo", &fifo).is_err(), "a FIFO is refused, not waited on");
        let link = tmp.path().join("link");
        symlink(&marks, &link).unwrap();
        assert!(spool.copy_in("link", &link).is_err(), "a link is not followed");
        assert!(!spool.path("fifo").exists() && !spool.path("link").exists());
    }

    #[test]
    fn trusted_links_are_followed_and_open_doors_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let real = tmp.path().join("real");
        fs::create_dir(&real).unwrap();
        symlink("real", tmp.path().join("via")).unwrap();
        let root = SpoolRoot::create(&tmp.path().join("via/a/../spool")).unwrap();
        assert!(real.join("spool").is_dir(), "a link only we could make is followed, `..` taken physically");
        assert!(root.path.ends_with("via/a/../spool"));

        assert_eq!(refusal(&tmp.path().join("via")), Distrust::Symlink(tmp.path().join("via")));
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        assert_eq!(refusal(&file), Distrust::NotDirectory(file.clone()));
        assert_eq!(refusal(&file.join("spool")), Distrust::NotDirectory(file));

        let open = tmp.path().join("open");
        fs::create_dir(&open).unwrap();
        set_mode(&open, 0o777);
        assert_eq!(refusal(&open), Distrust::Writable { path: open.clone(), mode: 0o777 });
        assert_eq!(refusal(&open.join("spool")), Distrust::Writable { path: open.clone(), mode: 0o777 });
        assert!(!open.join("spool").exists(), "nothing is made under a refused directory");

        set_mode(&open, 0o1777);
        assert!(SpoolRoot::create(&open.join("spool")).is_ok(), "a sticky parent, like /var/tmp, is fine");
        assert_eq!(
            refusal(&open),
            Distrust::Writable { path: open.clone(), mode: 0o1777 },
            "but not as the spool root"
        );
        symlink("../real", open.join("link")).unwrap();
        assert!(SpoolRoot::create(&open.join("link/spool")).is_ok(), "our own link in a sticky directory");

        let looped = tmp.path().join("loop");
        symlink("loop", &looped).unwrap();
        assert_eq!(refusal(&looped.join("spool")), Distrust::SymlinkLoop(looped.join("spool")));
    }
}
