//! Compaction: a table's exported files (one trace each) and its small parts folded into
//! large parts, one table and build at a time.
//!
//! A part holds many traces sorted by id, each trace's rows contiguous, in row groups of at
//! least [`Options::min_row_group_rows`] rows where the part has that many (a row group
//! ends at a trace's end), and lists its traces in its footer. Each table and build is
//! rebuilt beside the dataset (`.compaction/<table>/build=…/`: the new parts, hard links to
//! the files kept) and exchanged with the live folder in one `renameat2(RENAME_EXCHANGE)`,
//! so at every moment each table holds each trace exactly once: a compaction killed at any
//! point leaves a dataset the survey accepts and queries answer correctly, and the next
//! compaction removes what it left and does the rest.
//!
//! Which parts are rewritten: by default only parts under [`Options::small_part_bytes`]
//! (so that small batches do not leave many small files and row groups stay large); the
//! exported files become new parts beside the large ones, which stay as they are, so a
//! compaction costs about the batch it folds, not the dataset. [`Options::rewrite`] also
//! folds every part not yet full ([`Options::part_bytes`]): a whole rewrite, for a table
//! left with many mid-sized parts.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use parquet::file::metadata::KeyValue;
use rustix::fs::{CWD, RenameFlags};

use crate::columns::Table;
use crate::file::TableWriter;
use crate::layout::{STAGING, part_name, partition_name};
use crate::stream::TraceStream;
use crate::survey::{Held, survey};
use crate::writer::{DatasetLock, create, make_dir, refuse_old_layout, temporary_name};
use crate::{DATASET_VERSION, DatasetError, META_BUILD, META_TABLE, META_TRACE_IDS, META_VERSION};

/// Sizes a compaction aims at.
#[derive(Clone, Debug)]
pub struct Options {
    /// A row group is cut at the first trace's end after this many rows.
    pub row_group_rows: usize,
    /// A part's last row group under this many rows joins the one before it.
    pub min_row_group_rows: usize,
    /// A part is closed at the first row group's end after about this many bytes.
    pub part_bytes: u64,
    /// Parts under this size are always rewritten with what is folded.
    pub small_part_bytes: u64,
    /// Tables compacted at once.
    pub threads: usize,
    /// Also fold every part under `part_bytes` (a rewrite of the dataset, not of the batch).
    pub rewrite: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            row_group_rows: 500_000,
            min_row_group_rows: 100_000,
            part_bytes: 1 << 30,
            small_part_bytes: 64 << 20,
            threads: std::thread::available_parallelism().map_or(2, |n| n.get()),
            rewrite: false,
        }
    }
}

/// What a compaction is doing, for progress lines and for tests that stop it midway.
#[derive(Clone, Debug)]
pub enum Event<'a> {
    /// The work: tables and builds to rewrite, the traces and bytes they hold.
    Planned { jobs: usize, traces: usize, bytes: u64 },
    /// A table and build begun: traces folded from exported files and from parts.
    Begun { table: &'a str, build: Option<&'a str>, traces: usize, parts: usize },
    /// A part written (in the staging folder).
    PartWritten { table: &'a str, path: &'a Path, traces: usize, rows: u64 },
    /// A table and build switched to its new files.
    Switched { table: &'a str, build: Option<&'a str>, done: usize, jobs: usize },
}

/// What a compaction did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Tables and builds rewritten.
    pub jobs: usize,
    /// Exported files folded into parts.
    pub files_folded: usize,
    /// Distinct traces whose rows moved (from exported files or rewritten parts).
    pub traces: usize,
    /// Bytes of the files replaced, and of the parts that replaced them.
    pub bytes_before: u64,
    pub bytes_after: u64,
    /// Parquet files of the dataset before and after.
    pub files_before: usize,
    pub files_after: usize,
}

/// One table and build to rewrite: the files folded into new parts.
struct Job {
    table: String,
    build: Option<String>,
    fold: Vec<Held>,
}

/// Compacts the dataset at `dir`. Refuses a dataset the survey finds errors in.
pub fn compact(
    dir: &Path,
    options: &Options,
    on_wait: &mut dyn FnMut(),
    events: &(dyn Fn(Event<'_>) + Sync),
) -> Result<Report, DatasetError> {
    if !dir.join("traces").is_dir() {
        return Err(DatasetError::NotADataset(dir.to_owned()));
    }
    let _lock = DatasetLock::acquire(dir, on_wait)?;
    refuse_old_layout(dir)?;
    remove_staging(dir)?;
    let found = survey(dir)?;
    if let Some(first) = found.errors().next() {
        return Err(DatasetError::Refused(first.to_string()));
    }
    let jobs: Vec<Job> = found
        .catalog
        .files
        .iter()
        .filter_map(|((table, build), files)| plan_job(table, build, files, options))
        .collect();
    let mut report = Report { jobs: jobs.len(), files_before: found.files, ..Report::default() };
    let mut traces = std::collections::BTreeSet::new();
    for job in &jobs {
        report.files_folded += job.fold.iter().filter(|h| !h.part).count();
        report.bytes_before += job.fold.iter().map(|h| h.bytes).sum::<u64>();
        traces.extend(job.fold.iter().flat_map(|h| h.ids.iter()));
    }
    report.traces = traces.len();
    events(Event::Planned { jobs: jobs.len(), traces: report.traces, bytes: report.bytes_before });
    let written = run_jobs(dir, &jobs, options, events)?;
    report.bytes_after = written.iter().map(|w| w.0).sum();
    let parts: usize = written.iter().map(|w| w.1).sum();
    let folded: usize = jobs.iter().map(|j| j.fold.len()).sum();
    report.files_after = report.files_before - folded + parts;
    remove_staging(dir)?;
    Ok(report)
}

/// Removes what an interrupted compaction staged: files never switched in (rolled back)
/// or a folder's old files after its switch (finished); the live folders hold neither.
fn remove_staging(dir: &Path) -> Result<(), DatasetError> {
    let staging = dir.join(STAGING);
    match fs::remove_dir_all(&staging) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(DatasetError::Io { path: staging, source: e })
        }
        _ => Ok(()),
    }
}

/// The files of `table` and `build` to fold, or `None` when they are compact already:
/// the exported files and the small parts (all parts not yet full under `rewrite`).
fn plan_job(table: &str, build: &Option<String>, files: &[Held], options: &Options) -> Option<Job> {
    let limit = if options.rewrite { options.part_bytes } else { options.small_part_bytes };
    let fold: Vec<Held> = files.iter().filter(|h| !h.part || h.bytes < limit).cloned().collect();
    let exported = fold.iter().filter(|h| !h.part).count();
    let parts = fold.len() - exported;
    (exported > 0 || parts > 1).then(|| Job { table: table.to_owned(), build: build.clone(), fold })
}

/// Runs `jobs` on `options.threads` threads; per job, the bytes and number of parts written.
fn run_jobs(
    dir: &Path,
    jobs: &[Job],
    options: &Options,
    events: &(dyn Fn(Event<'_>) + Sync),
) -> Result<Vec<(u64, usize)>, DatasetError> {
    let next = Mutex::new(0usize);
    let results: Mutex<Vec<Result<(u64, usize), DatasetError>>> = Mutex::new(Vec::new());
    let done = Mutex::new(0usize);
    std::thread::scope(|scope| {
        for _ in 0..options.threads.clamp(1, jobs.len().max(1)) {
            scope.spawn(|| {
                loop {
                    let job = {
                        let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                        let Some(job) = jobs.get(*n) else { break };
                        *n += 1;
                        job
                    };
                    let result = run_job(dir, job, options, events);
                    let failed = result.is_err();
                    if !failed {
                        let mut d = done.lock().unwrap_or_else(|e| e.into_inner());
                        *d += 1;
                        let (table, build) = (job.table.as_str(), job.build.as_deref());
                        events(Event::Switched { table, build, done: *d, jobs: jobs.len() });
                    }
                    results.lock().unwrap_or_else(|e| e.into_inner()).push(result);
                    if failed {
                        // Other threads finish their current job; no new one starts.
                        *next.lock().unwrap_or_else(|e| e.into_inner()) = jobs.len();
                    }
                }
            });
        }
    });
    results.into_inner().unwrap_or_else(|e| e.into_inner()).into_iter().collect()
}

/// Rewrites one table and build: new parts and links to the kept files staged, then
/// exchanged with the live folder, whose old files are then removed.
/// Rewrites one table and build: new parts and links to the kept files staged, then
/// exchanged with the live folder, whose old files are then removed.
fn run_job(
    dir: &Path,
    job: &Job,
    options: &Options,
    events: &(dyn Fn(Event<'_>) + Sync),
) -> Result<(u64, usize), DatasetError> {
    let folder = partition_name(job.build.as_deref());
    let live = dir.join(&job.table).join(&folder);
    let stage = dir.join(STAGING).join(&job.table).join(&folder);
    let kept = kept_files(&live, job)?;
    make_dir(&stage)?;
    for name in &kept {
        fs::hard_link(live.join(name), stage.join(name)).map_err(io(&live.join(name)))?;
    }
    let traces: usize = job.fold.iter().map(|h| h.ids.len()).sum();
    let parts = job.fold.iter().filter(|h| h.part).count();
    events(Event::Begun { table: &job.table, build: job.build.as_deref(), traces, parts });
    let written = write_parts(dir, job, &stage, options, events)?;
    fs::File::open(&stage).and_then(|d| d.sync_all()).map_err(io(&stage))?;
    rustix::fs::renameat_with(CWD, &stage, CWD, &live, RenameFlags::EXCHANGE).map_err(|e| DatasetError::Io {
        path: live.clone(),
        source: std::io::Error::other(format!(
            "cannot exchange it with its compacted copy ({e}): compaction needs renameat2's RENAME_EXCHANGE (ext4, xfs, btrfs, tmpfs); compact a copy on such a filesystem"
        )),
    })?;
    fs::remove_dir_all(&stage).map_err(io(&stage))?;
    Ok(written)
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DatasetError {
    let path = path.to_owned();
    move |source| DatasetError::Io { path, source }
}

/// The names of the live folder's files that stay: all but the folded ones and the
/// temporary files of interrupted exports. A folder in it stops the compaction (the switch
/// would take it out of the dataset).
fn kept_files(live: &Path, job: &Job) -> Result<Vec<std::ffi::OsString>, DatasetError> {
    let folded: std::collections::HashSet<&std::ffi::OsStr> =
        job.fold.iter().filter_map(|h| h.path.file_name()).collect();
    let mut kept = Vec::new();
    for entry in fs::read_dir(live).map_err(io(live))? {
        let entry = entry.map_err(io(live))?;
        let name = entry.file_name();
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            return Err(DatasetError::Io {
                path: entry.path(),
                source: std::io::Error::other(
                    "a folder inside a build folder: move it out of the dataset, then compact",
                ),
            });
        }
        if !folded.contains(name.as_os_str()) && !name.to_string_lossy().ends_with(".tmp") {
            kept.push(name);
        }
    }
    Ok(kept)
}

/// Streams the folded traces into parts in `stage`; the bytes and number of parts written.
fn write_parts(
    dir: &Path,
    job: &Job,
    stage: &Path,
    options: &Options,
    events: &(dyn Fn(Event<'_>) + Sync),
) -> Result<(u64, usize), DatasetError> {
    let mut stream = TraceStream::new(dir, &job.fold, None);
    // Bytes per trace of each folded file, to close parts at about `part_bytes`.
    let mut estimate = std::collections::HashMap::new();
    for held in &job.fold {
        for id in &held.ids {
            estimate.insert(id.clone(), held.bytes / held.ids.len().max(1) as u64);
        }
    }
    let mut part = PartWriter::new(job, stage, options);
    let mut written = (0u64, 0usize);
    while let Some(next) = stream.next_trace() {
        let (id, rows) = next?;
        part.add(id.clone(), rows, estimate.get(&id).copied().unwrap_or(0))?;
        if part.full() {
            let (path, traces, rows) = part.finish()?;
            written = (written.0 + file_size(&path), written.1 + 1);
            events(Event::PartWritten { table: &job.table, path: &path, traces, rows });
        }
    }
    if !part.is_empty() {
        let (path, traces, rows) = part.finish()?;
        written = (written.0 + file_size(&path), written.1 + 1);
        events(Event::PartWritten { table: &job.table, path: &path, traces, rows });
    }
    Ok(written)
}

fn file_size(path: &Path) -> u64 {
    fs::metadata(path).map_or(0, |m| m.len())
}

/// One part being written: traces buffered into row groups, the last group held back so
/// that a short tail joins it.
struct PartWriter<'a> {
    job: &'a Job,
    stage: &'a Path,
    options: &'a Options,
    writer: Option<(TableWriter, PathBuf)>,
    ids: Vec<String>,
    rows: u64,
    bytes: u64,
    held: Vec<Table>,
    pending: Vec<Table>,
    pending_rows: usize,
}

impl<'a> PartWriter<'a> {
    fn new(job: &'a Job, stage: &'a Path, options: &'a Options) -> PartWriter<'a> {
        PartWriter {
            job,
            stage,
            options,
            writer: None,
            ids: Vec::new(),
            rows: 0,
            bytes: 0,
            held: Vec::new(),
            pending: Vec::new(),
            pending_rows: 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// True when the part reached its size at a row group's end.
    fn full(&self) -> bool {
        self.bytes >= self.options.part_bytes && self.pending.is_empty()
    }

    fn add(&mut self, id: String, rows: Table, bytes: u64) -> Result<(), DatasetError> {
        if self.writer.is_none() {
            self.open(&rows)?;
        }
        if let Some(first) = self.held.first().or(self.pending.first())
            && !first.same_schema(&rows)
        {
            return Err(DatasetError::Schema {
                path: self.writer.as_ref().map(|w| w.1.clone()).unwrap_or_default(),
                reason: format!(
                    "trace {id} has other columns than the traces before it in {}",
                    self.job.table
                ),
            });
        }
        self.ids.push(id);
        self.rows += rows.rows as u64;
        self.bytes += bytes;
        self.pending_rows += rows.rows;
        self.pending.push(rows);
        if self.pending_rows >= self.options.row_group_rows {
            self.write_held()?;
            self.held = std::mem::take(&mut self.pending);
            self.pending_rows = 0;
        }
        Ok(())
    }

    fn open(&mut self, schema: &Table) -> Result<(), DatasetError> {
        let temp = temporary_name(&self.stage.join(format!("part-{}.parquet", self.ids.len())));
        let mut kv = vec![
            KeyValue::new(META_VERSION.to_owned(), DATASET_VERSION.to_string()),
            KeyValue::new(META_TABLE.to_owned(), self.job.table.clone()),
        ];
        if let Some(build) = &self.job.build {
            kv.push(KeyValue::new(META_BUILD.to_owned(), build.clone()));
        }
        let writer = TableWriter::new(create(&temp)?, &temp, schema, kv)?;
        self.writer = Some((writer, temp));
        Ok(())
    }

    fn write_held(&mut self) -> Result<(), DatasetError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let (writer, _) = self.writer.as_mut().expect("a part with rows is open");
        let parts: Vec<&Table> = self.held.iter().collect();
        writer.write(&parts)?;
        self.held.clear();
        Ok(())
    }

    /// Writes what is buffered and the footer, names the part after its traces; returns
    /// its path, traces and rows, and starts the next part empty.
    fn finish(&mut self) -> Result<(PathBuf, usize, u64), DatasetError> {
        if self.pending_rows > 0 && self.pending_rows < self.options.min_row_group_rows {
            let tail = std::mem::take(&mut self.pending);
            self.held.extend(tail);
        }
        self.write_held()?;
        self.held = std::mem::take(&mut self.pending);
        self.pending_rows = 0;
        self.write_held()?;
        let (mut writer, temp) = self.writer.take().expect("a part with traces is open");
        writer.append_metadata(vec![KeyValue::new(META_TRACE_IDS.to_owned(), self.ids.join(","))]);
        writer.finish()?.sync_all().map_err(|source| DatasetError::Io { path: temp.clone(), source })?;
        let path = self.stage.join(part_name(&self.ids));
        fs::rename(&temp, &path).map_err(|source| DatasetError::Io { path: path.clone(), source })?;
        let out = (path, self.ids.len(), self.rows);
        (self.ids, self.rows, self.bytes) = (Vec::new(), 0, 0);
        Ok(out)
    }
}
