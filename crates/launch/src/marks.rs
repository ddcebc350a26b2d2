//! The marks file: how a started program says "I reached milestone NAME".
//!
//! The launcher creates a private, empty marks file for every command and names it
//! in the environment variable [`MARKS_ENV`] (`COLDSTART_MARKS`). Each line is
//!
//! ```text
//! UPTIME NAME[<TAB>pid=N]
//! ```
//!
//! UPTIME is seconds since boot on CLOCK_BOOTTIME (the clock of `/proc/uptime`),
//! with any number of decimals; NAME runs to the end of the line or the first TAB;
//! optional TAB-separated `key=value` fields follow, of which `pid=N` (the process
//! that marked) is understood and others are ignored. This is also the line format
//! of bootchart's `milestones.log`. `coldstart mark NAME` appends such a line with
//! 9 decimals and `pid=` its parent, in one `O_APPEND` write, so concurrent markers
//! never interleave. A program may equally append lines itself, e.g. in shell:
//! `echo "$(cut -d' ' -f1 /proc/uptime) ready" >> "$COLDSTART_MARKS"`.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use crate::clock::BootNanos;
use crate::error::{LaunchError, Result};
use crate::sys;

/// The environment variable naming the marks file.
pub const MARKS_ENV: &str = "COLDSTART_MARKS";

/// One milestone from a marks file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mark {
    /// When the milestone was reached, CLOCK_BOOTTIME nanoseconds.
    pub boottime_ns: BootNanos,
    pub name: String,
    /// The process that marked, when the line says (`pid=N`).
    pub pid: Option<i32>,
}

/// The marks of a file, and how many of its lines were not marks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Marks {
    pub marks: Vec<Mark>,
    /// Lines that did not parse (they are skipped, and counted so a report can say so).
    pub bad_lines: usize,
}

/// Checks that `name` can be written on one marks-file line.
pub fn check_name(name: &str) -> Result<()> {
    if name.trim().is_empty() || name.contains(['\n', '\r', '\t']) || name.trim() != name {
        return Err(LaunchError::BadMarkName(name.to_owned()));
    }
    Ok(())
}

/// The line `coldstart mark` writes: `UPTIME NAME\tpid=N\n`, UPTIME with 9 decimals.
pub fn format_line(boottime_ns: BootNanos, name: &str, pid: Option<i32>) -> String {
    let secs = boottime_ns.div_euclid(1_000_000_000);
    let nanos = boottime_ns.rem_euclid(1_000_000_000);
    match pid {
        Some(pid) => format!("{secs}.{nanos:09} {name}\tpid={pid}\n"),
        None => format!("{secs}.{nanos:09} {name}\n"),
    }
}

/// Appends one mark to the marks file at `path` (which must exist) in a single
/// `O_APPEND` write, stamped now.
pub fn append(path: &Path, name: &str, pid: Option<i32>) -> Result<()> {
    check_name(name)?;
    let line = format_line(crate::clock::boottime_ns(), name, pid);
    let mut file = OpenOptions::new().append(true).open(path).map_err(|e| LaunchError::file(path, e))?;
    file.write_all(line.as_bytes()).map_err(|e| LaunchError::file(path, e))
}

/// Seconds with any number of decimals to nanoseconds, exactly (no floating point).
fn parse_uptime(text: &str) -> Option<BootNanos> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    if whole.is_empty()
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    let secs: i64 = whole.parse().ok()?;
    let mut nanos: i64 = 0;
    for (i, digit) in frac.bytes().take(9).enumerate() {
        nanos += i64::from(digit - b'0') * 10i64.pow(8 - i as u32);
    }
    secs.checked_mul(1_000_000_000)?.checked_add(nanos)
}

/// Parses one line (without its newline); `None` when it is not a mark.
pub fn parse_line(line: &str) -> Option<Mark> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (uptime, rest) = line.trim_start().split_once([' ', '\t'])?;
    let boottime_ns = parse_uptime(uptime)?;
    let mut fields = rest.trim_start_matches(' ').split('\t');
    let name = fields.next()?.trim();
    if name.is_empty() {
        return None;
    }
    let pid = fields.filter_map(|f| f.strip_prefix("pid=")).find_map(|p| p.trim().parse().ok());
    Some(Mark { boottime_ns, name: name.to_owned(), pid })
}

/// Parses a whole marks file's text; blank lines are ignored, others that are not
/// marks are counted in [`Marks::bad_lines`].
pub fn parse(text: &str) -> Marks {
    let mut out = Marks::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match parse_line(line) {
            Some(mark) => out.marks.push(mark),
            None => out.bad_lines += 1,
        }
    }
    out
}

/// Reads and parses the marks file at `path`.
pub fn read(path: &Path) -> Result<Marks> {
    let bytes = std::fs::read(path).map_err(|e| LaunchError::file(path, e))?;
    Ok(parse(&String::from_utf8_lossy(&bytes)))
}

const MARKS_DIR_PREFIX: &str = "coldstart-marks-";

/// Removes the marks directories under `tmp` left by launchers that no longer run:
/// named `coldstart-marks-PID-…` for a PID with no process, and owned by this user.
fn remove_stale_marks_dirs(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else { return };
    let me = sys::effective_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(MARKS_DIR_PREFIX)) else { continue };
        let Some(pid) = rest.split_once('-').and_then(|(pid, _)| pid.parse::<u32>().ok()) else { continue };
        let owned = std::os::unix::fs::MetadataExt::uid(&match entry.metadata() {
            Ok(m) if m.is_dir() => m,
            _ => continue,
        }) == me;
        if owned && pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A private marks file in its own temporary directory (mode 0700, or 0711 when the
/// file is the command's user's), removed with it.
pub(crate) struct MarksFile {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl MarksFile {
    /// Creates the file, owned by `owner` (uid, gid) when the command runs as another user.
    /// The directory's name carries this process's pid, so that the directories of a
    /// launcher that was killed (and could not remove its own) are removed by the next.
    pub(crate) fn create(owner: Option<(u32, u32)>) -> Result<MarksFile> {
        remove_stale_marks_dirs(&std::env::temp_dir());
        let dir = tempfile::Builder::new()
            .prefix(&format!("{MARKS_DIR_PREFIX}{}-", std::process::id()))
            .tempdir()
            .map_err(|e| LaunchError::io("cannot create the marks directory", e))?;
        let path = dir.path().join("marks");
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| LaunchError::file(&path, e))?;
        // Only the file goes to the command's user: the directory stays the launcher's
        // (0711, so that user can reach the file), so no one else can swap the file for
        // a link or a FIFO that the launcher, often root, would then open.
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&path, Some(uid), Some(gid)).map_err(|e| LaunchError::file(&path, e))?;
            std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o711))
                .map_err(|e| LaunchError::file(dir.path(), e))?;
        }
        Ok(MarksFile { _dir: dir, path })
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Follows a marks file as it grows: inotify says when, [`MarksWatcher::read_new`] says what.
pub(crate) struct MarksWatcher {
    inotify: OwnedFd,
    file: File,
    pending: Vec<u8>,
}

impl MarksWatcher {
    pub(crate) fn new(path: &Path) -> Result<MarksWatcher> {
        let inotify = sys::inotify().map_err(|e| LaunchError::io("inotify_init", e))?;
        sys::watch_writes(inotify.as_fd(), path).map_err(|e| LaunchError::file(path, e))?;
        let file = File::open(path).map_err(|e| LaunchError::file(path, e))?;
        Ok(MarksWatcher { inotify, file, pending: Vec::new() })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.inotify.as_fd()
    }

    /// Drains the inotify events and returns the marks of the complete lines added
    /// since the last call.
    pub(crate) fn read_new(&mut self) -> Result<Vec<Mark>> {
        let mut events = [0u8; 4096];
        while sys::read(self.inotify.as_fd(), &mut events).is_ok_and(|n| n > 0) {}
        let mut chunk = Vec::new();
        self.file.read_to_end(&mut chunk).map_err(|e| LaunchError::io("cannot read the marks file", e))?;
        self.pending.extend_from_slice(&chunk);
        let Some(end) = self.pending.iter().rposition(|&b| b == b'\n') else { return Ok(Vec::new()) };
        let complete: Vec<u8> = self.pending.drain(..=end).collect();
        Ok(parse(&String::from_utf8_lossy(&complete)).marks)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_marks_directories_of_launchers_that_are_gone_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let dead = gone.id();
        gone.wait().unwrap();
        let stale = tmp.path().join(format!("{MARKS_DIR_PREFIX}{dead}-abc"));
        let alive = tmp.path().join(format!("{MARKS_DIR_PREFIX}{}-def", std::process::id()));
        let other = tmp.path().join(format!("{MARKS_DIR_PREFIX}not-a-pid"));
        for dir in [&stale, &alive, &other] {
            std::fs::create_dir(dir).unwrap();
            std::fs::write(dir.join("marks"), "").unwrap();
        }
        remove_stale_marks_dirs(tmp.path());
        assert!(!stale.exists(), "a dead launcher's directory stays");
        assert!(alive.exists() && other.exists(), "a running launcher's or an unknown directory went");
    }

    #[test]
    fn parses_coldstart_mark_lines_and_bootchart_milestones() {
        let m = parse_line("12345.678901234 ready\tpid=42").unwrap();
        assert_eq!(m, Mark { boottime_ns: 12_345_678_901_234, name: "ready".into(), pid: Some(42) });
        let m = parse_line("7.5 first paint").unwrap();
        assert_eq!(m, Mark { boottime_ns: 7_500_000_000, name: "first paint".into(), pid: None });
        let m = parse_line("3 start\tfoo=bar\tpid=9\r").unwrap();
        assert_eq!((m.boottime_ns, m.name.as_str(), m.pid), (3_000_000_000, "start", Some(9)));
        assert_eq!(parse_line("1.1234567891234 x").unwrap().boottime_ns, 1_123_456_789);
    }

    #[test]
    fn rejects_lines_that_are_not_marks() {
        for line in ["", "ready", "12.5", "12.5 ", "abc ready", "-1 ready", "1.2.3 ready", "1e3 ready", ". x"]
        {
            assert_eq!(parse_line(line), None, "{line:?}");
        }
        let all = parse("1.0 a\n\nnot a mark\n2.0 b\tpid=x\n");
        assert_eq!(all.bad_lines, 1);
        assert_eq!(all.marks.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(all.marks[1].pid, None);
    }

    #[test]
    fn format_line_round_trips() {
        for (t, pid) in [(0, None), (1_000_000_001, Some(1)), (987_654_321_012_345, Some(77))] {
            let line = format_line(t, "a mark", pid);
            assert!(line.ends_with('\n'));
            assert_eq!(parse_line(&line), Some(Mark { boottime_ns: t, name: "a mark".into(), pid }));
        }
        assert_eq!(format_line(5_000_000_007, "x", Some(3)), "5.000000007 x\tpid=3\n");
    }

    #[test]
    fn mark_names_must_fit_one_line() {
        assert!(check_name("ready").is_ok());
        assert!(check_name("first paint").is_ok());
        for bad in ["", " ", "a\tb", "a\nb", " lead", "trail "] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn watcher_sees_appended_lines_once_complete() {
        let file = MarksFile::create(None).unwrap();
        let mut watcher = MarksWatcher::new(file.path()).unwrap();
        assert!(watcher.read_new().unwrap().is_empty());
        append(file.path(), "one", Some(1)).unwrap();
        let mut raw = OpenOptions::new().append(true).open(file.path()).unwrap();
        raw.write_all(b"2.5 two").unwrap();
        let first = watcher.read_new().unwrap();
        assert_eq!(first.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(), ["one"]);
        raw.write_all(b"\n").unwrap();
        assert_eq!(watcher.read_new().unwrap()[0].name, "two");
        assert_eq!(read(file.path()).unwrap().marks.len(), 2);
    }

    #[test]
    fn append_needs_an_existing_file() {
        let dir = tempfile::tempdir().unwrap();
        assert!(append(&dir.path().join("missing"), "x", None).is_err());
        assert!(!dir.path().join("missing").exists());
    }
}
