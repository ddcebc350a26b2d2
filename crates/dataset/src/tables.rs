//! The dataset's tables: what each holds and how a trace (and its analysis) fills it.
//!
//! One function per table, in the order of [`TABLES`]; docs/dataset-format.md is the
//! contract for their columns. Trace tables keep the trace's own columns and words
//! (`coldstart_trace::TextEnum`); `page_use`, `critical_path`, `critical_path_file` and
//! `finding` are computed at export time by `coldstart_analyze`, `page_used` by
//! `coldstart_prefetch` (the pages a plan counts as used). `path_read`, `path_read_run`,
//! `critical_path_by_process` and `critical_path_by_file` are per-trace summaries of
//! those, computed once here so that the fleet's questions group a few rows per trace
//! instead of expanding every run into pages or every segment of every critical path.

use std::collections::{BTreeMap, HashMap};

use coldstart_analyze::Analysis;
use coldstart_analyze::doctor::Diagnosis;
use coldstart_prefetch::build::{command_start, is_boot_or_session, used_by_file};
use coldstart_prefetch::plan::UsedPagesFrom;
use coldstart_trace::{TextEnum, Trace};
use serde::Serialize;

use crate::DATASET_VERSION;
use crate::batch::{Batch, to_i64};
use crate::columns::Table;

/// Every table of the dataset, one folder each. `traces` is written last: a trace
/// counts as exported once its `traces` file is in place.
pub const TABLES: &[&str] = &[
    "process",
    "thread",
    "file",
    "page_fill",
    "page_access",
    "page_use",
    "page_resident",
    "page_used",
    "file_open",
    "block_io",
    "sched",
    "mark",
    "unit",
    "disk",
    "loss",
    "cpu_sample",
    "disk_sample",
    "process_sample",
    "critical_path",
    "critical_path_file",
    "finding",
    "path_read",
    "path_read_run",
    "critical_path_by_process",
    "critical_path_by_file",
    "traces",
];

/// Pages per aligned block that a `page_use` run never crosses (1 MiB of 4 KiB pages),
/// so SQL can expand runs into pages with a 256-row numbers table.
pub const PAGE_USE_BLOCK: u64 = 256;

/// What the exporter says about a trace besides its contents.
#[derive(Clone, Debug, Default)]
pub struct TraceLabels {
    /// The build or image the machine ran (`--build`).
    pub build: Option<String>,
    /// The kind of machine (`--machine-class`), e.g. `laptop-ssd`.
    pub machine_class: Option<String>,
    /// The trace file's name, without its folder.
    pub source_name: String,
    /// The trace file's size in bytes.
    pub source_bytes: u64,
    /// Whether the trace was anonymised before export.
    pub anonymized: bool,
}

/// A trace, its analysis and diagnosis, ready to be cut into tables.
pub struct Exported<'a> {
    pub id: &'a str,
    pub trace: &'a Trace,
    pub analysis: &'a Analysis,
    pub diagnosis: &'a Diagnosis,
    pub labels: &'a TraceLabels,
}

/// The serde word of a value serialized as a string (analysis enums).
fn word<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

fn opt_u64(v: Option<u64>) -> Option<i64> {
    v.map(to_i64)
}

fn process_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.processes)
        .i32("pid", |r| r.pid)
        .opt_i32("ppid", |r| r.ppid)
        .str("comm", |r| &r.comm)
        .opt_str("exe", |r| r.exe.as_deref())
        .str("argv", |r| r.argv.join(" "))
        .opt_i64("start_ns", |r| r.start_ns)
        .opt_i64("end_ns", |r| r.end_ns)
        .opt_i32("exit_code", |r| r.exit_code)
        .bool("in_scope", |r| r.in_scope)
        .finish()
}

fn thread_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.threads)
        .i32("tid", |r| r.tid)
        .i32("pid", |r| r.pid)
        .str("comm", |r| &r.comm)
        .opt_i64("start_ns", |r| r.start_ns)
        .opt_i64("end_ns", |r| r.end_ns)
        .finish()
}

fn file_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.files)
        .i64("file_id", |r| r.id.into())
        .str("dev", |r| r.dev.to_string())
        .i64("ino", |r| to_i64(r.ino))
        .opt_str("path", |r| r.path.as_deref())
        .str("kind", |r| r.kind.as_str())
        .opt_i64("size", |r| opt_u64(r.size))
        .opt_i64("mtime_ns", |r| r.mtime_ns)
        .finish()
}

fn page_fill_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.page_fills)
        .i64("t_ns", |r| r.t_ns)
        .i32("pid", |r| r.pid)
        .i32("tid", |r| r.tid)
        .i64("file_id", |r| r.file_id.into())
        .i64("page_index", |r| to_i64(r.index))
        .i64("pages", |r| r.pages.into())
        .opt_str("origin", |r| r.origin.map(|o| o.as_str()))
        .finish()
}

fn page_access_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.page_accesses)
        .i64("t_ns", |r| r.t_ns)
        .i32("pid", |r| r.pid)
        .i32("tid", |r| r.tid)
        .i64("file_id", |r| r.file_id.into())
        .i64("page_index", |r| to_i64(r.index))
        .i64("pages", |r| r.pages.into())
        .str("kind", |r| r.kind.as_str())
        .finish()
}

fn page_resident_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.page_residents)
        .i64("file_id", |r| r.file_id.into())
        .i64("page_index", |r| to_i64(r.index))
        .i64("pages", |r| r.pages.into())
        .finish()
}

fn file_open_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.file_opens)
        .i64("t_ns", |r| r.t_ns)
        .i32("pid", |r| r.pid)
        .i64("file_id", |r| r.file_id.into())
        .bool("exec", |r| r.exec)
        .finish()
}

fn block_io_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.block_ios)
        .opt_i64("issue_ns", |r| r.issue_ns)
        .opt_i64("complete_ns", |r| r.complete_ns)
        .str("dev", |r| r.dev.to_string())
        .opt_i64("sector", |r| opt_u64(r.sector))
        .i64("bytes", |r| r.bytes.into())
        .str("op", |r| r.op.as_str())
        .str("rwbs", |r| &r.rwbs)
        .i32("pid", |r| r.pid)
        .str("comm", |r| &r.comm)
        .opt_i64("file_id", |r| r.file_id.map(i64::from))
        .i32("error", |r| r.error)
        .finish()
}

fn sched_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.sched)
        .i32("tid", |r| r.tid)
        .i64("start_ns", |r| r.start_ns)
        .i64("end_ns", |r| r.end_ns)
        .str("state", |r| r.state.as_str())
        .finish()
}

fn mark_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.marks)
        .i64("t_ns", |r| r.t_ns)
        .opt_i32("pid", |r| r.pid)
        .opt_i32("tid", |r| r.tid)
        .str("name", |r| &r.name)
        .str("source", |r| r.source.as_str())
        .finish()
}

fn unit_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.units)
        .str("name", |r| &r.name)
        .str("manager", |r| &r.manager)
        .opt_i64("activating_ns", |r| r.activating_ns)
        .opt_i64("active_ns", |r| r.active_ns)
        .opt_i64("deactivating_ns", |r| r.deactivating_ns)
        .opt_i32("pid", |r| r.pid)
        .str("after", |r| r.after.join(" "))
        .finish()
}

fn disk_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.disks)
        .str("dev", |r| r.dev.to_string())
        .str("name", |r| &r.name)
        .opt_str("model", |r| r.model.as_deref())
        .opt_bool("rotational", |r| r.rotational)
        .opt_i64("size_bytes", |r| opt_u64(r.size_bytes))
        .opt_i64("read_bytes", |r| opt_u64(r.read_bytes))
        .opt_i64("read_ios", |r| opt_u64(r.read_ios))
        .opt_i64("write_bytes", |r| opt_u64(r.write_bytes))
        .opt_i64("write_ios", |r| opt_u64(r.write_ios))
        .finish()
}

fn loss_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.losses)
        .str("source", |r| r.source.as_str())
        .str("what", |r| &r.what)
        .i64("count", |r| to_i64(r.count))
        .finish()
}

fn cpu_sample_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.cpu_samples)
        .i64("t_ns", |r| r.t_ns)
        .i64("dt_ns", |r| r.dt_ns)
        .f64("user", |r| r.user)
        .f64("system", |r| r.system)
        .f64("iowait", |r| r.iowait)
        .f64("idle", |r| r.idle)
        .i64("running", |r| r.running.into())
        .i64("blocked", |r| r.blocked.into())
        .finish()
}

fn disk_sample_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.disk_samples)
        .i64("t_ns", |r| r.t_ns)
        .i64("dt_ns", |r| r.dt_ns)
        .str("dev", |r| r.dev.to_string())
        .i64("read_bytes", |r| to_i64(r.read_bytes))
        .i64("read_ios", |r| to_i64(r.read_ios))
        .i64("write_bytes", |r| to_i64(r.write_bytes))
        .i64("write_ios", |r| to_i64(r.write_ios))
        .f64("busy", |r| r.busy)
        .finish()
}

fn process_sample_table(id: &str, t: &Trace) -> Table {
    Batch::new(id, &t.process_samples)
        .i64("t_ns", |r| r.t_ns)
        .i64("dt_ns", |r| r.dt_ns)
        .i32("pid", |r| r.pid)
        .str("state", |r| r.state.to_string())
        .f64("cpu_user", |r| r.cpu_user)
        .f64("cpu_system", |r| r.cpu_system)
        .i64("major_faults", |r| to_i64(r.major_faults))
        .opt_i64("rss_bytes", |r| opt_u64(r.rss_bytes))
        .finish()
}

fn finding_table(id: &str, diagnosis: &Diagnosis) -> Table {
    Batch::new(id, &diagnosis.findings)
        .str("kind", |r| word(&r.kind))
        .str("title", |r| &r.title)
        .i64("gain_ns", |r| r.gain.ns)
        .opt_i64("gain_ahead_ns", |r| r.gain.ahead_ns)
        .str("confidence", |r| word(&r.confidence))
        .finish()
}

fn path_read_table(id: &str, t: &Trace) -> Table {
    let reads = path_reads(t);
    Batch::new(id, &reads).str("path", |r| &r.0).i64("pages", |r| to_i64(r.1)).finish()
}

fn path_read_run_table(id: &str, t: &Trace) -> Table {
    let runs = path_read_runs(t);
    Batch::new(id, &runs)
        .str("path", |r| &r.0)
        .i64("first_page", |r| to_i64(r.1))
        .i64("pages", |r| to_i64(r.2))
        .finish()
}

impl Exported<'_> {
    /// The table named `name` (one of [`TABLES`]).
    pub fn table(&self, name: &str) -> Table {
        let id = self.id;
        let t = self.trace;
        match name {
            "process" => process_table(id, t),
            "thread" => thread_table(id, t),
            "file" => file_table(id, t),
            "page_fill" => page_fill_table(id, t),
            "page_access" => page_access_table(id, t),
            "page_use" => runs_batch(id, &page_use(t), "first_t_ns"),
            "page_resident" => page_resident_table(id, t),
            "page_used" => runs_batch(id, &page_used(t), "first_need_ns"),
            "file_open" => file_open_table(id, t),
            "block_io" => block_io_table(id, t),
            "sched" => sched_table(id, t),
            "mark" => mark_table(id, t),
            "unit" => unit_table(id, t),
            "disk" => disk_table(id, t),
            "loss" => loss_table(id, t),
            "cpu_sample" => cpu_sample_table(id, t),
            "disk_sample" => disk_sample_table(id, t),
            "process_sample" => process_sample_table(id, t),
            "critical_path" => self.critical_path(),
            "critical_path_file" => self.critical_path_files(),
            "finding" => finding_table(id, self.diagnosis),
            "path_read" => path_read_table(id, t),
            "path_read_run" => path_read_run_table(id, t),
            "critical_path_by_process" => self.critical_path_by_process(),
            "critical_path_by_file" => self.critical_path_by_file(),
            "traces" => self.traces(),
            other => unreachable!("{other} is not one of TABLES"),
        }
    }

    fn comms(&self) -> HashMap<i32, &str> {
        self.trace.processes.iter().map(|p| (p.pid, p.comm.as_str())).collect()
    }

    fn critical_path(&self) -> Table {
        let segments: Vec<_> =
            self.analysis.critical_path.iter().flat_map(|p| p.segments.iter()).enumerate().collect();
        let comms = self.comms();
        Batch::new(self.id, &segments)
            .i32("seq", |(i, _)| i32::try_from(*i).unwrap_or(i32::MAX))
            .i64("start_ns", |(_, s)| s.start_ns)
            .i64("end_ns", |(_, s)| s.end_ns)
            .i64("duration_ns", |(_, s)| s.end_ns - s.start_ns)
            .i32("pid", |(_, s)| s.pid)
            .i32("tid", |(_, s)| s.tid)
            .str("comm", |(_, s)| comms.get(&s.pid).copied().unwrap_or(""))
            .str("kind", |(_, s)| word(&s.kind))
            .opt_str("waited_in", |(_, s)| s.waited_in.as_ref().map(|w| w.syscall.clone()))
            .opt_str("waker_comm", |(_, s)| s.waker_process.as_ref().map(|w| w.comm.clone()))
            .finish()
    }

    fn critical_path_files(&self) -> Table {
        let paths: HashMap<u32, &str> =
            self.trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect();
        let rows: Vec<(usize, i32, u32, i64)> = self
            .analysis
            .critical_path
            .iter()
            .flat_map(|p| p.segments.iter())
            .enumerate()
            .flat_map(|(i, s)| s.files.iter().map(move |f| (i, s.pid, f.file, f.ns)))
            .collect();
        Batch::new(self.id, &rows)
            .i32("seq", |r| i32::try_from(r.0).unwrap_or(i32::MAX))
            .i32("pid", |r| r.1)
            .i64("file_id", |r| r.2.into())
            .opt_str("path", |r| paths.get(&r.2).copied())
            .i64("wait_ns", |r| r.3)
            .finish()
    }

    /// Per process name and kind of segment: the segments of the critical path and their time.
    fn critical_path_by_process(&self) -> Table {
        let comms = self.comms();
        let mut sums: BTreeMap<(&str, String), (i64, i64)> = BTreeMap::new();
        for s in self.analysis.critical_path.iter().flat_map(|p| p.segments.iter()) {
            let comm = comms.get(&s.pid).copied().unwrap_or("");
            let sum = sums.entry((comm, word(&s.kind))).or_default();
            sum.0 += 1;
            sum.1 += s.end_ns - s.start_ns;
        }
        let rows: Vec<_> = sums.into_iter().collect();
        Batch::new(self.id, &rows)
            .str("comm", |((comm, _), _)| comm)
            .str("kind", |((_, kind), _)| kind)
            .i64("segments", |(_, (n, _))| *n)
            .i64("duration_ns", |(_, (_, ns))| *ns)
            .finish()
    }

    /// Per path (null: unresolved): the I/O waits of the critical path attributed to it and their time.
    fn critical_path_by_file(&self) -> Table {
        let paths: HashMap<u32, &str> =
            self.trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect();
        let mut sums: BTreeMap<Option<&str>, (i64, i64)> = BTreeMap::new();
        for s in self.analysis.critical_path.iter().flat_map(|p| p.segments.iter()) {
            for f in &s.files {
                let sum = sums.entry(paths.get(&f.file).copied()).or_default();
                sum.0 += 1;
                sum.1 += f.ns;
            }
        }
        let rows: Vec<_> = sums.into_iter().collect();
        Batch::new(self.id, &rows)
            .opt_str("path", |(path, _)| *path)
            .i64("waits", |(_, (n, _))| *n)
            .i64("wait_ns", |(_, (_, ns))| *ns)
            .finish()
    }

    fn traces(&self) -> Table {
        let m = &self.trace.meta;
        let l = self.labels;
        let ready = self.analysis.overview.ready.as_ref();
        let disks: Vec<String> = self
            .trace
            .disks
            .iter()
            .map(|d| {
                let kind = match d.rotational {
                    Some(true) => "rotational",
                    Some(false) => "non-rotational",
                    None => "unknown",
                };
                format!("{} {} {kind}", d.name, d.model.as_deref().unwrap_or("?"))
            })
            .collect();
        let rotational = self.trace.disks.iter().filter_map(|d| d.rotational).reduce(|a, b| a || b);
        Batch::new(self.id, &[()])
            .i32("dataset_version", |_| DATASET_VERSION)
            .opt_str("build", |_| l.build.as_deref())
            .opt_str("machine_class", |_| l.machine_class.as_deref())
            .str("host", |_| &m.host)
            .str("kernel", |_| &m.kernel)
            .str("cpu_model", |_| &m.cpu_model)
            .i64("cpu_count", |_| m.cpu_count.into())
            .i64("mem_total_bytes", |_| to_i64(m.mem_total_bytes))
            .str("disks", |_| disks.join(", "))
            .opt_bool("rotational", |_| rotational)
            .str("command", |_| m.command.join(" "))
            .str("program", |_| {
                m.command.first().map(|c| c.rsplit('/').next().unwrap_or(c).to_owned()).unwrap_or_default()
            })
            .str("scope", |_| m.scope.as_str())
            .str("source", |_| m.source.as_str())
            .str("cache", |_| m.cache.as_str())
            .str("tool", |_| &m.tool)
            .i64("page_size", |_| i64::from(if m.page_size == 0 { 4096 } else { m.page_size }))
            .str("used_pages_from", |_| match used_by_file(self.trace).0 {
                UsedPagesFrom::Fills => "fills",
                _ => "accesses",
            })
            .bool("boot_or_session", |_| is_boot_or_session(self.trace))
            .i64("command_start_ns", |_| command_start(self.trace))
            .i64("start_unix_ns", |_| m.start_unix_ns)
            .i64("duration_ns", |_| m.duration_ns)
            .opt_str("ready_reason", |_| ready.map(|r| r.reason.to_string()))
            .opt_i64("time_to_ready_ns", |_| ready.map(|r| r.time_to_ready_ns))
            .bool("partial", |_| m.partial)
            .bool("anonymized", |_| l.anonymized)
            .str("source_name", |_| &l.source_name)
            .i64("source_bytes", |_| to_i64(l.source_bytes))
            .finish()
    }
}

/// The columns of a table of page runs, its time column named `time`.
fn runs_batch(id: &str, runs: &[PageRun], time: &str) -> Table {
    Batch::new(id, runs)
        .i64("file_id", |r| r.file_id.into())
        .i64("first_page", |r| to_i64(r.first_page))
        .i64("pages", |r| to_i64(r.pages))
        .i64(time, |r| r.first_t_ns)
        .finish()
}

/// The files' paths by id (files without a path left out).
fn paths(trace: &Trace) -> HashMap<u32, &str> {
    trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect()
}

/// Per path: the pages of its files that entered the page cache, as `page_use` counts them
/// (each page of a file once), summed over the trace's files of that path.
pub fn path_reads(trace: &Trace) -> Vec<(String, u64)> {
    let paths = paths(trace);
    let mut sums: BTreeMap<&str, u64> = BTreeMap::new();
    for run in page_use(trace) {
        if let Some(path) = paths.get(&run.file_id) {
            *sums.entry(path).or_default() += run.pages;
        }
    }
    sums.into_iter().map(|(p, n)| (p.to_owned(), n)).collect()
}

/// Per path: runs of consecutive pages that entered the page cache, each page once even
/// when two of the trace's files have the path, each run as long as it goes:
/// (path, first page, pages).
pub fn path_read_runs(trace: &Trace) -> Vec<(String, u64, u64)> {
    let paths = paths(trace);
    let mut pages: Vec<(&str, u64, u64)> = page_use(trace)
        .into_iter()
        .filter_map(|r| Some((*paths.get(&r.file_id)?, r.first_page, r.pages)))
        .collect();
    pages.sort_unstable();
    let mut runs: Vec<(String, u64, u64)> = Vec::new();
    for (path, first, n) in pages {
        if let Some(last) = runs.last_mut()
            && last.0 == path
            && first <= last.1 + last.2
        {
            last.2 = last.2.max(first + n - last.1);
            continue;
        }
        runs.push((path.to_owned(), first, n));
    }
    runs
}

/// A run of pages of one file that entered the page cache during the start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageRun {
    pub file_id: u32,
    pub first_page: u64,
    pub pages: u64,
    /// When the first of its pages entered the cache.
    pub first_t_ns: i64,
}

/// The pages each file had filled, merged into runs that never cross a
/// [`PAGE_USE_BLOCK`] boundary; a page filled twice (evicted and read again) counts once.
pub fn page_use(trace: &Trace) -> Vec<PageRun> {
    let mut pages: Vec<(u32, u64, i64)> = Vec::new();
    for f in &trace.page_fills {
        for page in f.index..f.index.saturating_add(f.pages.into()) {
            pages.push((f.file_id, page, f.t_ns));
        }
    }
    runs(pages, false)
}

/// The pages each file used, as `coldstart prefetch plan` counts them (reads, faults,
/// and the map-around pages that were filled or already cached), in runs of consecutive
/// pages first needed at one time that never cross a [`PAGE_USE_BLOCK`] boundary; each
/// page once, at its earliest need (`first_t_ns`, from the command's start).
pub fn page_used(trace: &Trace) -> Vec<PageRun> {
    let mut pages: Vec<(u32, u64, i64)> = Vec::new();
    for (file_id, pieces) in used_by_file(trace).1 {
        for p in pieces {
            pages.extend((p.start..p.end).map(|page| (file_id, page, p.t)));
        }
    }
    runs(pages, true)
}

/// (file, page, time) as runs of consecutive pages within [`PAGE_USE_BLOCK`]s, each page
/// once at its earliest time; with `one_time`, a run also ends where the time changes
/// (else it keeps its earliest).
fn runs(mut pages: Vec<(u32, u64, i64)>, one_time: bool) -> Vec<PageRun> {
    pages.sort_unstable();
    pages.dedup_by_key(|p| (p.0, p.1));
    let mut runs: Vec<PageRun> = Vec::new();
    for (file_id, page, t_ns) in pages {
        if let Some(run) = runs.last_mut()
            && run.file_id == file_id
            && run.first_page + run.pages == page
            && page % PAGE_USE_BLOCK != 0
            && (!one_time || run.first_t_ns == t_ns)
        {
            run.pages += 1;
            run.first_t_ns = run.first_t_ns.min(t_ns);
            continue;
        }
        runs.push(PageRun { file_id, first_page: page, pages: 1, first_t_ns: t_ns });
    }
    runs
}
