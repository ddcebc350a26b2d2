//! Reading a dataset's rows back, one trace's table at a time, for the commands that
//! work on a fleet in Rust (`prefetch plan --dataset`); the fleet's SQL questions go to
//! DuckDB or Spark instead. Columns are found by name and type, so a file whose schema
//! is not the one docs/dataset-format.md gives is a clear error, never a misread.

use std::path::{Path, PathBuf};

use crate::DatasetError;
use crate::columns::{Column, Table, Values};
use crate::file::TableReader;
use crate::writer::table_file;

/// One row of the `traces` table (the columns a fleet's plan needs).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceRow {
    pub trace_id: String,
    pub dataset_version: i32,
    pub build: Option<String>,
    pub machine_class: Option<String>,
    pub host: String,
    pub kernel: String,
    pub command: String,
    pub page_size: u32,
    /// `accesses` or `fills` (docs/dataset-format.md).
    pub used_pages_from: String,
    pub boot_or_session: bool,
    /// When the traced command started (the root process's fork), from the trace's zero.
    pub command_start_ns: i64,
    pub start_unix_ns: i64,
}

/// One row of the `file` table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileRow {
    pub file_id: u32,
    pub dev: String,
    pub ino: u64,
    pub path: Option<String>,
    /// The trace format's word (`regular`, `device_metadata`, …).
    pub kind: String,
    pub size: Option<u64>,
    pub mtime_ns: Option<i64>,
}

/// One row of `page_use` (`t_ns`: `first_t_ns`) or `page_used` (`t_ns`: `first_need_ns`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunRow {
    pub file_id: u32,
    pub first_page: u64,
    pub pages: u64,
    pub t_ns: i64,
}

/// The columns `names` of every row of the Parquet file at `path`.
fn read_columns(path: &Path, names: &[&str]) -> Result<Table, DatasetError> {
    let reader = TableReader::open(path)?;
    let projection = reader.projection(names)?;
    reader.read_all(&projection)
}

/// Column access by name and type, with the file named in every error.
struct Columns<'a> {
    path: &'a Path,
    table: &'a Table,
}

impl<'a> Columns<'a> {
    fn column(&self, name: &str) -> Result<&'a Column, DatasetError> {
        self.table.column(name).ok_or_else(|| self.bad(name, "is missing"))
    }

    fn bad(&self, name: &str, what: &str) -> DatasetError {
        DatasetError::Schema { path: self.path.to_owned(), reason: format!("its column {name} {what}") }
    }

    fn i64(&self, name: &str) -> Result<Vec<Option<i64>>, DatasetError> {
        let c = self.column(name)?;
        let Values::I64(v) = &c.values else { return Err(self.bad(name, "is not 64-bit integers")) };
        Ok(c.value_indexes().map(|i| i.map(|i| v[i])).collect())
    }

    fn i32(&self, name: &str) -> Result<Vec<Option<i32>>, DatasetError> {
        let c = self.column(name)?;
        let Values::I32(v) = &c.values else { return Err(self.bad(name, "is not 32-bit integers")) };
        Ok(c.value_indexes().map(|i| i.map(|i| v[i])).collect())
    }

    fn str(&self, name: &str) -> Result<Vec<Option<String>>, DatasetError> {
        let c = self.column(name)?;
        let Values::Str(v) = &c.values else { return Err(self.bad(name, "is not text")) };
        c.value_indexes()
            .map(|i| {
                i.map(|i| v[i].as_utf8().map(str::to_owned).map_err(|_| self.bad(name, "is not UTF-8 text")))
                    .transpose()
            })
            .collect()
    }

    fn bool(&self, name: &str) -> Result<Vec<Option<bool>>, DatasetError> {
        let c = self.column(name)?;
        let Values::Bool(v) = &c.values else { return Err(self.bad(name, "is not true/false")) };
        Ok(c.value_indexes().map(|i| i.map(|i| v[i])).collect())
    }
}

fn required<T>(path: &Path, column: &str, value: Option<T>) -> Result<T, DatasetError> {
    value.ok_or_else(|| DatasetError::Schema {
        path: path.to_owned(),
        reason: format!("its column {column} has a null"),
    })
}

fn unsigned(path: &Path, column: &str, value: i64) -> Result<u64, DatasetError> {
    u64::try_from(value).map_err(|_| DatasetError::Schema {
        path: path.to_owned(),
        reason: format!("its column {column} is negative"),
    })
}

fn file_id(path: &Path, value: i64) -> Result<u32, DatasetError> {
    u32::try_from(value).map_err(|_| DatasetError::Schema {
        path: path.to_owned(),
        reason: format!("its column file_id holds {value}, not a file id"),
    })
}

/// The `traces` file of trace `id`.
pub fn trace_row(dir: &Path, id: &str) -> Result<TraceRow, DatasetError> {
    let path = table_file(dir, "traces", id);
    const COLUMNS: [&str; 12] = [
        "trace_id",
        "dataset_version",
        "build",
        "machine_class",
        "host",
        "kernel",
        "command",
        "page_size",
        "used_pages_from",
        "boot_or_session",
        "command_start_ns",
        "start_unix_ns",
    ];
    let table = read_columns(&path, &COLUMNS)?;
    let c = Columns { path: &path, table: &table };
    let ids = c.str("trace_id")?;
    let versions = c.i32("dataset_version")?;
    let builds = c.str("build")?;
    let classes = c.str("machine_class")?;
    let hosts = c.str("host")?;
    let kernels = c.str("kernel")?;
    let commands = c.str("command")?;
    let page_sizes = c.i64("page_size")?;
    let used = c.str("used_pages_from")?;
    let boot = c.bool("boot_or_session")?;
    let command_starts = c.i64("command_start_ns")?;
    let starts = c.i64("start_unix_ns")?;
    if table.rows != 1 {
        return Err(DatasetError::Schema {
            path,
            reason: format!("it holds {} rows; a traces file holds one", table.rows),
        });
    }
    Ok(TraceRow {
        trace_id: required(&path, "trace_id", ids[0].clone())?,
        dataset_version: required(&path, "dataset_version", versions[0])?,
        build: builds[0].clone(),
        machine_class: classes[0].clone(),
        host: hosts[0].clone().unwrap_or_default(),
        kernel: kernels[0].clone().unwrap_or_default(),
        command: commands[0].clone().unwrap_or_default(),
        page_size: u32::try_from(required(&path, "page_size", page_sizes[0])?).unwrap_or(0),
        used_pages_from: used[0].clone().unwrap_or_default(),
        boot_or_session: boot[0].unwrap_or(false),
        command_start_ns: command_starts[0].unwrap_or(0),
        start_unix_ns: starts[0].unwrap_or(0),
    })
}

/// The `file` rows of trace `id`.
pub fn file_rows(dir: &Path, id: &str) -> Result<Vec<FileRow>, DatasetError> {
    let path = table_file(dir, "file", id);
    let table = read_columns(&path, &["file_id", "dev", "ino", "path", "kind", "size", "mtime_ns"])?;
    let c = Columns { path: &path, table: &table };
    let (ids, devs, inos, paths) = (c.i64("file_id")?, c.str("dev")?, c.i64("ino")?, c.str("path")?);
    let (kinds, sizes, mtimes) = (c.str("kind")?, c.i64("size")?, c.i64("mtime_ns")?);
    let mut rows = Vec::with_capacity(table.rows);
    for i in 0..table.rows {
        rows.push(FileRow {
            file_id: file_id(&path, required(&path, "file_id", ids[i])?)?,
            dev: devs[i].clone().unwrap_or_default(),
            ino: unsigned(&path, "ino", inos[i].unwrap_or(0))?,
            path: paths[i].clone(),
            kind: required(&path, "kind", kinds[i].clone())?,
            size: sizes[i].map(|s| unsigned(&path, "size", s)).transpose()?,
            mtime_ns: mtimes[i],
        });
    }
    Ok(rows)
}

/// The `file_open` rows of trace `id`: (file id, time from the trace's zero).
pub fn open_rows(dir: &Path, id: &str) -> Result<Vec<(u32, i64)>, DatasetError> {
    let path = table_file(dir, "file_open", id);
    let table = read_columns(&path, &["file_id", "t_ns"])?;
    let c = Columns { path: &path, table: &table };
    let (ids, times) = (c.i64("file_id")?, c.i64("t_ns")?);
    ids.into_iter()
        .zip(times)
        .map(|(f, t)| Ok((file_id(&path, required(&path, "file_id", f)?)?, required(&path, "t_ns", t)?)))
        .collect()
}

/// The rows of trace `id` in `page_use` (time column `first_t_ns`) or `page_used`
/// (`first_need_ns`).
pub fn run_rows(dir: &Path, table: &str, id: &str) -> Result<Vec<RunRow>, DatasetError> {
    let time = match table {
        "page_use" => "first_t_ns",
        "page_used" => "first_need_ns",
        other => {
            return Err(DatasetError::Schema {
                path: PathBuf::from(other),
                reason: "is not a table of page runs".into(),
            });
        }
    };
    let path = table_file(dir, table, id);
    let rows = read_columns(&path, &["file_id", "first_page", "pages", time])?;
    let c = Columns { path: &path, table: &rows };
    let (ids, firsts, pages, times) =
        (c.i64("file_id")?, c.i64("first_page")?, c.i64("pages")?, c.i64(time)?);
    (0..rows.rows)
        .map(|i| {
            Ok(RunRow {
                file_id: file_id(&path, required(&path, "file_id", ids[i])?)?,
                first_page: unsigned(&path, "first_page", required(&path, "first_page", firsts[i])?)?,
                pages: unsigned(&path, "pages", required(&path, "pages", pages[i])?)?,
                t_ns: required(&path, time, times[i])?,
            })
        })
        .collect()
}
