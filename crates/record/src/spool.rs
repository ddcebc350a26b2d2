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

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{IoContext, RecordError, Result};
use crate::tracefs::InstanceOwner;

/// Where spools live unless configured otherwise: on disk, so they survive the recorder.
pub const DEFAULT_SPOOL_ROOT: &str = "/var/tmp/coldstart";

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
}

/// What the recorder knew when it stopped normally.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SpoolEnd {
    pub t_end_boot_ns: i64,
    pub ready_boot_ns: Option<i64>,
    pub ready_reason: Option<String>,
    /// The output line that made the command ready (`--until output:REGEX`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_line: Option<String>,
    pub exit_code: Option<i32>,
    pub diskstats_end: Vec<DiskCounters>,
    /// (source, what, count) rows for the `loss` table.
    pub losses: Vec<(String, String, u64)>,
    pub notes: Vec<String>,
}

/// One spool directory.
#[derive(Clone, Debug)]
pub struct Spool {
    pub dir: PathBuf,
}

fn private_dir(path: &Path) -> Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(path).at(path)
}

impl Spool {
    /// Creates a new, empty spool for the current process under `root`.
    pub fn create(root: &Path, owner: &InstanceOwner) -> Result<Spool> {
        private_dir(root)?;
        let dir = root.join(format!("{}-{}", owner.pid, owner.starttime.unwrap_or(0)));
        if dir.exists() {
            fs::remove_dir_all(&dir).at(&dir)?;
        }
        private_dir(&dir)?;
        private_dir(&dir.join("formats"))?;
        Ok(Spool { dir })
    }

    pub fn open(dir: &Path) -> Result<Spool> {
        if dir.join("start.json").is_file() {
            Ok(Spool { dir: dir.to_owned() })
        } else {
            Err(RecordError::Spool(format!("{} is not a coldstart spool (no start.json)", dir.display())))
        }
    }

    /// Spools under `root` whose recorder is no longer running.
    pub fn leftovers(root: &Path) -> Vec<Spool> {
        let Ok(entries) = fs::read_dir(root) else { return Vec::new() };
        let mut out: Vec<Spool> = entries
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                let (pid, start) = name.split_once('-')?;
                let owner = InstanceOwner { pid: pid.parse().ok()?, starttime: start.parse().ok() };
                (!owner.is_alive()).then(|| Spool::open(&e.path()).ok()).flatten()
            })
            .collect();
        out.sort_by(|a, b| a.dir.cmp(&b.dir));
        out
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    pub fn raw_path(&self, role: &str, cpu: u16) -> PathBuf {
        self.dir.join(format!("{role}-cpu{cpu}.raw"))
    }

    pub fn create_file(&self, name: &str) -> Result<File> {
        let path = self.path(name);
        OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path).at(&path)
    }

    pub fn write_json<T: Serialize>(&self, name: &str, value: &T) -> Result<()> {
        let tmp = self.path(&format!(".{name}.tmp"));
        let text = serde_json::to_vec_pretty(value).map_err(|e| RecordError::Spool(e.to_string()))?;
        let mut f =
            OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp).at(&tmp)?;
        f.write_all(&text).at(&tmp)?;
        // No fsync: `start.json` is written as the command starts, where a journal commit
        // and a cache flush would be the recorder's own cost in the start (and its writes in
        // the trace); the rename keeps the file whole for `recover` after a killed recorder,
        // and a machine that crashes loses the tracing instances' data anyway.
        fs::rename(&tmp, self.path(name)).at(self.path(name))
    }

    pub fn read_json<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<Option<T>> {
        let path = self.path(name);
        match fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| RecordError::Spool(format!("{}: {e}", path.display()))),
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
        let path = self.dir.join("formats").join(name);
        fs::write(&path, text).at(&path)
    }

    /// The saved format files, as (name, text).
    pub fn formats(&self) -> Result<Vec<(String, String)>> {
        let dir = self.dir.join("formats");
        let mut out = Vec::new();
        for entry in fs::read_dir(&dir).at(&dir)?.flatten() {
            let text = fs::read_to_string(entry.path()).at(entry.path())?;
            out.push((entry.file_name().to_string_lossy().into_owned(), text));
        }
        out.sort();
        Ok(out)
    }

    /// Reads a JSON-lines file, skipping a torn last line (a recorder killed mid-write).
    pub fn read_lines<T: for<'de> Deserialize<'de>>(&self, name: &str) -> Result<(Vec<T>, usize)> {
        let path = self.path(name);
        let text = match fs::read_to_string(&path) {
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
        serde_json::to_writer(&mut self.out, value).map_err(|e| RecordError::Spool(e.to_string()))?;
        self.out.write_all(b"\n").at(&self.path)
    }

    pub fn flush(&mut self) -> Result<()> {
        self.out.flush().at(&self.path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spool_round_trip_and_torn_lines() {
        let root = tempfile::tempdir().unwrap();
        let owner = InstanceOwner::current();
        let spool = Spool::create(root.path(), &owner).unwrap();
        let start = SpoolStart { command: vec!["true".into()], t0_boot_ns: 5, ..Default::default() };
        spool.write_json("start.json", &start).unwrap();
        assert_eq!(spool.start().unwrap(), start);
        assert_eq!(spool.end().unwrap(), None);
        let mut w = LineWriter::create(&spool, "x.jsonl").unwrap();
        w.push(&(1, "a")).unwrap();
        w.push(&(2, "b")).unwrap();
        w.flush().unwrap();
        let mut f = OpenOptions::new().append(true).open(spool.path("x.jsonl")).unwrap();
        f.write_all(b"[3, \"c").unwrap();
        let (rows, bad): (Vec<(i32, String)>, usize) = spool.read_lines("x.jsonl").unwrap();
        assert_eq!(rows, vec![(1, "a".into()), (2, "b".into())]);
        assert_eq!(bad, 1);
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(fs::metadata(&spool.dir).unwrap().permissions().mode() & 0o777, 0o700);
        assert!(Spool::leftovers(root.path()).is_empty(), "our own spool is not a leftover");
    }
}
