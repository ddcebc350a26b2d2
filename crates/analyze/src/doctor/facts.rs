//! What every finding needs from the trace and its analysis, computed once: the
//! start's bounds, the I/O wait of each file on the critical path, per-file read
//! figures, the measured model of each disk, and the command line for `verify`.

use coldstart_trace::{Dev, FileKind, Nanos, Trace};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{Analysis, CriticalPath};
use crate::doctor::config::DoctorConfig;
use crate::doctor::disk_model::{DiskClass, DiskParams};
use crate::doctor::finding::EvidenceFile;

/// Reads of one file by all processes.
#[derive(Clone, Debug, Default)]
pub(crate) struct FileStats {
    pub pages: u64,
    pub reads: u64,
    pub pids: Vec<i32>,
    pub first_ns: Nanos,
    pub last_ns: Nanos,
}

pub(crate) struct Facts<'a> {
    pub trace: &'a Trace,
    pub a: &'a Analysis,
    pub config: &'a DoctorConfig,
    pub origin: Nanos,
    /// The readiness point, else the end of the analysed start.
    pub ready: Nanos,
    pub time_to_ready: Nanos,
    pub min_gain: Nanos,
    pub path: Option<&'a CriticalPath>,
    /// I/O wait per file: on the critical path when there is one (each wait shared by the
    /// cost of the files' requests in it, see `share_path_waits`), else of all threads.
    pub wait: FxHashMap<u32, Nanos>,
    /// Per file, the waits for a CPU on the critical path right after its I/O waits (the
    /// woken thread waiting to run again), shared among the files as the I/O wait was;
    /// and their total. Reads that are not done any more take these waits with them.
    pub wake: FxHashMap<u32, Nanos>,
    pub path_wake_ns: Nanos,
    pub files: FxHashMap<u32, FileStats>,
    pub page_size: u64,
    /// Measured model per disk, and the disk with most read bytes.
    pub disks: Vec<(Dev, DiskParams)>,
    pub primary: DiskParams,
    disk_of_file: FxHashMap<u32, Dev>,
    /// Pids with time on the critical path.
    pub path_pids: FxHashSet<i32>,
    /// The traced command, quoted for a shell.
    pub command: String,
}

impl<'a> Facts<'a> {
    /// The facts of one trace, its disk models as measured: `whatif::calibrate` fits them
    /// to the trace and shares the path's I/O waits among files.
    pub fn new(trace: &'a Trace, a: &'a Analysis, config: &'a DoctorConfig) -> Facts<'a> {
        let origin = a.overview.origin_ns;
        let ready = a.overview.end_ns;
        let time_to_ready = ready.saturating_sub(origin).max(0);
        let path = a.critical_path.as_ref();
        let mut wait: FxHashMap<u32, Nanos> = FxHashMap::default();
        if path.is_none() {
            for u in &a.file_uses {
                let total = wait.entry(u.file).or_default();
                *total = total.saturating_add(u.io_wait_ns);
            }
        }
        let mut files: FxHashMap<u32, FileStats> = FxHashMap::default();
        for u in &a.file_uses {
            let s = files
                .entry(u.file)
                .or_insert_with(|| FileStats { first_ns: u.first_ns, ..FileStats::default() });
            s.pages = s.pages.saturating_add(u.pages);
            s.reads += u.reads;
            s.pids.push(u.pid);
            s.first_ns = s.first_ns.min(u.first_ns);
            s.last_ns = s.last_ns.max(u.last_ns);
        }
        let disks: Vec<(Dev, DiskParams)> = a.disks.iter().map(|d| (d.dev, DiskParams::measure(d))).collect();
        let primary = DiskParams::class_defaults(DiskClass::Measured);
        let mut disk_of_file = FxHashMap::default();
        for e in &trace.extents {
            disk_of_file.entry(e.file_id).or_insert(e.disk);
        }
        for d in &a.disks {
            for f in &d.files {
                disk_of_file.entry(f.file).or_insert(d.dev);
            }
        }
        let path_pids = path.map(|cp| cp.segments.iter().map(|s| s.pid).collect()).unwrap_or_default();
        Facts {
            trace,
            a,
            config,
            origin,
            ready,
            time_to_ready,
            min_gain: config.min_gain(time_to_ready),
            path,
            wait,
            wake: FxHashMap::default(),
            path_wake_ns: 0,
            files,
            page_size: u64::from(a.trace.page_size.max(1)),
            disks,
            primary,
            disk_of_file,
            path_pids,
            command: shell_join(&trace.meta.command),
        }
    }

    /// The measured model of the disk holding `file`.
    pub fn disk_for(&self, file: u32) -> &DiskParams {
        self.disk_of_file
            .get(&file)
            .and_then(|dev| self.disks.iter().find(|(d, _)| d == dev))
            .map_or(&self.primary, |(_, p)| p)
    }

    pub fn wake_of(&self, file: u32) -> Nanos {
        self.wake.get(&file).copied().unwrap_or(0)
    }

    pub fn wait_of(&self, file: u32) -> Nanos {
        self.wait.get(&file).copied().unwrap_or(0)
    }

    /// `on the critical path` or, without one, `of all threads`.
    pub fn wait_scope(&self) -> &'static str {
        if self.path.is_some() {
            "on the critical path"
        } else {
            "summed over all threads (no critical path)"
        }
    }

    pub fn name(&self, file: u32) -> &str {
        self.a.file_name(file)
    }

    pub fn path_of(&self, file: u32) -> Option<&str> {
        self.a.file(file).and_then(|f| f.path.as_deref())
    }

    pub fn is_regular(&self, file: u32) -> bool {
        self.a.file(file).is_some_and(|f| f.kind == FileKind::Regular && f.path.is_some())
    }

    pub fn size_of(&self, file: u32) -> Option<u64> {
        self.a.file(file).and_then(|f| f.size_bytes)
    }

    /// Bytes read of `file`, all processes.
    pub fn read_bytes(&self, file: u32) -> u64 {
        self.files.get(&file).map_or(0, |s| s.pages * self.page_size)
    }

    pub fn evidence_file(&self, file: u32) -> EvidenceFile {
        let stats = self.files.get(&file);
        EvidenceFile {
            file,
            name: self.name(file).to_owned(),
            size_bytes: self.size_of(file),
            read_bytes: self.read_bytes(file),
            reads: stats.map_or(0, |s| s.reads),
            wait_ns: self.wait_of(file),
        }
    }

    /// Evidence for `files`, most wait first, at most `max_listed`.
    pub fn evidence_files(&self, files: &[u32]) -> Vec<EvidenceFile> {
        let mut list: Vec<EvidenceFile> = files.iter().map(|&f| self.evidence_file(f)).collect();
        list.sort_by(|x, y| {
            y.wait_ns.cmp(&x.wait_ns).then(y.read_bytes.cmp(&x.read_bytes)).then(x.file.cmp(&y.file))
        });
        list.truncate(self.config.max_listed);
        list
    }

    /// `coldstart bench` of the traced command before and after a change.
    pub fn bench_command(&self) -> String {
        self.verify_start().bench("--cold --runs 10")
    }

    /// How `verify` lines start the traced command: on a fresh profile when it names one.
    pub fn verify_start(&self) -> super::VerifyStart {
        super::verify_start(&self.trace.meta.command)
    }
}

/// Quotes one argument for a POSIX shell when it needs it (`'import json, csv'`). An
/// argument no shell can take (one with a NUL byte) is shown Rust-escaped instead.
pub fn shell_quote(arg: &str) -> String {
    shlex::try_quote(arg).map_or_else(|_| format!("{arg:?}"), |quoted| quoted.into_owned())
}

/// A command line for a POSIX shell (`CMD` when there is none).
pub fn shell_join(args: &[String]) -> String {
    if args.is_empty() {
        return "CMD".to_owned();
    }
    args.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_lines_quote_only_what_a_shell_would_split() {
        let args = ["/usr/bin/python3", "-c", "import scipy.stats, pandas", ""].map(String::from);
        assert_eq!(shell_join(&args), "/usr/bin/python3 -c 'import scipy.stats, pandas' ''");
        assert_eq!(shell_join(&[]), "CMD");
        assert_eq!(shell_quote("$HOME/a;b"), "'$HOME/a;b'");
        assert_eq!(shell_quote("a\0b"), r#""a\0b""#);
    }
}
