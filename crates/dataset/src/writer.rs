//! Writing one trace into a dataset: a Parquet file per table in the folder of the trace's
//! build, each written under a temporary name and renamed into place, the `traces` file
//! last.
//!
//! A trace's id is the SHA-256 of its trace file's bytes (the first 16 bytes, in hex), so
//! the same recording exported twice is found and skipped, never written twice: in the
//! exported files' names, and in the parts' footers once a compaction folded it. Export and
//! compaction take the dataset's lock ([`DatasetLock`]), so a compaction never folds a
//! trace half written.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use parquet::file::metadata::KeyValue;
use rustix::fs::FlockOperation;
use sha2::{Digest, Sha256};

use crate::columns::Table;
use crate::file::TableWriter;
use crate::layout::{FileName, LOCK_FILE, classify, partition_build, table_file};
use crate::survey::read_footer;
use crate::tables::{Exported, TABLES};
use crate::{DATASET_VERSION, DatasetError, META_BUILD, META_TABLE, META_TRACE_ID, META_VERSION};

/// What exporting one trace did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExportStatus {
    /// Its tables were written, with this many rows in all.
    Written { rows: u64 },
    /// The dataset already held this trace (same bytes): nothing was written.
    AlreadyThere,
}

/// The id of the trace file at `path`: its bytes' SHA-256, first 16 bytes in hex.
pub fn trace_id_of_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize()[..16].iter().map(|b| format!("{b:02x}")).collect())
}

fn io_error(path: &Path) -> impl Fn(io::Error) -> DatasetError + '_ {
    move |source| DatasetError::Io { path: path.to_owned(), source }
}

/// Creates `dir` and its parents, mode 0700 (the rows name every path a machine read).
pub(crate) fn make_dir(dir: &Path) -> Result<(), DatasetError> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io_error(dir))
}

/// The dataset's lock, held while a writer adds traces or a compaction folds them.
pub struct DatasetLock {
    _file: File,
}

impl DatasetLock {
    /// Takes the lock of the dataset at `dir` (created if missing); `on_wait` is called
    /// once when another export or compaction holds it, before waiting for it.
    pub fn acquire(dir: &Path, on_wait: &mut dyn FnMut()) -> Result<DatasetLock, DatasetError> {
        make_dir(dir)?;
        let path = dir.join(LOCK_FILE);
        let file = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io_error(&path))?;
        if rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive).is_err() {
            on_wait();
            rustix::fs::flock(&file, FlockOperation::LockExclusive)
                .map_err(|e| DatasetError::Io { path: path.clone(), source: e.into() })?;
        }
        Ok(DatasetLock { _file: file })
    }
}

/// Refuses a dataset of version 2 or older, whose files lie directly in the table folders.
pub(crate) fn refuse_old_layout(dir: &Path) -> Result<(), DatasetError> {
    let Ok(entries) = fs::read_dir(dir.join("traces")) else { return Ok(()) };
    let old = entries.flatten().any(|e| {
        e.file_type().is_ok_and(|t| t.is_file())
            && matches!(classify(&e.file_name().to_string_lossy()), FileName::Trace(_))
    });
    if old { Err(DatasetError::OldLayout(dir.to_owned())) } else { Ok(()) }
}

/// The traces a dataset's `traces` table holds: exported files' names and parts' footers.
pub(crate) fn exported_ids(dir: &Path) -> Result<HashSet<String>, DatasetError> {
    let mut ids = HashSet::new();
    let traces = dir.join("traces");
    let Ok(partitions) = fs::read_dir(&traces) else { return Ok(ids) };
    for partition in partitions.flatten() {
        let name = partition.file_name().to_string_lossy().into_owned();
        if partition_build(&name).is_none() {
            continue;
        }
        for file in fs::read_dir(partition.path()).map_err(io_error(&partition.path()))?.flatten() {
            match classify(&file.file_name().to_string_lossy()) {
                FileName::Trace(id) => {
                    ids.insert(id);
                }
                FileName::Part => ids.extend(read_footer(&file.path())?.ids.unwrap_or_default()),
                _ => {}
            }
        }
    }
    Ok(ids)
}

/// True when the dataset at `dir` already holds the trace `id` (a `traces` row).
pub fn contains(dir: &Path, id: &str) -> bool {
    exported_ids(dir).is_ok_and(|ids| ids.contains(id))
}

/// Adds traces to a dataset, holding its lock: each trace's tables are written as files
/// of one trace in its build's folders, unless the dataset holds the trace already.
pub struct DatasetWriter {
    dir: PathBuf,
    known: HashSet<String>,
    _lock: DatasetLock,
}

impl DatasetWriter {
    /// Opens (or makes) the dataset at `dir`; `on_wait` as [`DatasetLock::acquire`].
    pub fn open(dir: &Path, on_wait: &mut dyn FnMut()) -> Result<DatasetWriter, DatasetError> {
        let lock = DatasetLock::acquire(dir, on_wait)?;
        refuse_old_layout(dir)?;
        let known = exported_ids(dir)?;
        Ok(DatasetWriter { dir: dir.to_owned(), known, _lock: lock })
    }

    pub fn contains(&self, id: &str) -> bool {
        self.known.contains(id)
    }

    /// Writes the tables of `exported`, unless the dataset holds the trace already. A run
    /// that stops half-way leaves temporary files and table files without a `traces` file,
    /// which `survey` reports and which the next export of the same trace replaces.
    pub fn export(&mut self, exported: &Exported<'_>) -> Result<ExportStatus, DatasetError> {
        if self.contains(exported.id) {
            return Ok(ExportStatus::AlreadyThere);
        }
        let build = exported.labels.build.as_deref();
        let mut rows = 0u64;
        for table in TABLES {
            let path = table_file(&self.dir, table, build, exported.id);
            if let Some(folder) = path.parent() {
                make_dir(folder)?;
            }
            let batch = exported.table(table);
            rows += batch.num_rows() as u64;
            let meta = FileMeta { table, build, id: exported.id, version: DATASET_VERSION };
            write_file_with(&path, &meta, &batch)?;
        }
        self.known.insert(exported.id.to_owned());
        Ok(ExportStatus::Written { rows })
    }
}

/// Writes the tables of `exported` into the dataset at `dir` (created if missing), unless
/// the dataset holds the trace already (one trace: [`DatasetWriter`] for many).
pub fn export(dir: &Path, exported: &Exported<'_>) -> Result<ExportStatus, DatasetError> {
    DatasetWriter::open(dir, &mut || {})?.export(exported)
}

/// What an exported file's footer says besides its rows.
struct FileMeta<'a> {
    table: &'a str,
    build: Option<&'a str>,
    id: &'a str,
    version: i32,
}

impl FileMeta<'_> {
    fn key_values(&self) -> Vec<KeyValue> {
        let mut kv = vec![
            KeyValue::new(META_VERSION.to_owned(), self.version.to_string()),
            KeyValue::new(META_TABLE.to_owned(), self.table.to_owned()),
            KeyValue::new(META_TRACE_ID.to_owned(), self.id.to_owned()),
        ];
        if let Some(build) = self.build {
            kv.push(KeyValue::new(META_BUILD.to_owned(), build.to_owned()));
        }
        kv
    }
}

/// The temporary name `path` is written under before it is renamed into place.
pub(crate) fn temporary_name(path: &Path) -> PathBuf {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("table");
    path.with_file_name(format!(".{name}.tmp"))
}

/// Creates `path` for writing, mode 0600.
pub(crate) fn create(path: &Path) -> Result<File, DatasetError> {
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(io_error(path))
}

fn write_file_with(path: &Path, meta: &FileMeta<'_>, rows: &Table) -> Result<(), DatasetError> {
    let temp = temporary_name(path);
    let mut writer = TableWriter::new(create(&temp)?, &temp, rows, meta.key_values())?;
    if rows.num_rows() > 0 {
        writer.write(&[rows])?;
    }
    let file = writer.finish()?;
    file.sync_all().map_err(io_error(&temp))?;
    fs::rename(&temp, path).map_err(io_error(path))
}

/// Writes the file of one trace's table atomically (temporary name, then rename), mode
/// 0600: the rows name every path the machine touched. `version` is public for tests that
/// make a file of another dataset version.
pub fn write_file(
    path: &Path,
    table: &str,
    build: Option<&str>,
    id: &str,
    version: i32,
    rows: &Table,
) -> Result<(), DatasetError> {
    write_file_with(path, &FileMeta { table, build, id, version }, rows)
}
