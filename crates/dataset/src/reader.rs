//! Reading a dataset's rows back as typed rows, for the commands that work on a fleet in
//! Rust (`prefetch plan --dataset`, with `--blocks` too); the fleet's SQL questions go to
//! DuckDB or Spark instead. [`read_plan_traces`] reads the tables a plan needs trace by trace
//! ([`read_block_traces`]: a block plan's), from
//! exported files and parts alike, only the builds asked for and only the columns used.
//! Columns are found by name and type, so a file whose schema is not the one
//! docs/dataset-format.md gives is a clear error, never a misread.

use std::path::{Path, PathBuf};

use coldstart_trace::{BlockIo, BlockOp, Dev, TextEnum};

use crate::DatasetError;
use crate::columns::{Column, Table, Values};
use crate::layout::{FileName, classify, partition_build};
use crate::stream::TraceStream;
use crate::survey::{Catalog, Held, read_footer};

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

const TRACE_COLUMNS: [&str; 12] = [
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
const FILE_COLUMNS: [&str; 7] = ["file_id", "dev", "ino", "path", "kind", "size", "mtime_ns"];
const OPEN_COLUMNS: [&str; 2] = ["file_id", "t_ns"];
const BLOCK_COLUMNS: [&str; 7] = ["issue_ns", "complete_ns", "dev", "sector", "bytes", "op", "rwbs"];

/// The time column of a table of page runs: `page_use` (`first_t_ns`), `page_used` (`first_need_ns`).
fn run_time_column(table: &str) -> Result<&'static str, DatasetError> {
    match table {
        "page_use" => Ok("first_t_ns"),
        "page_used" => Ok("first_need_ns"),
        other => Err(DatasetError::Schema {
            path: PathBuf::from(other),
            reason: "is not a table of page runs".into(),
        }),
    }
}

/// The `traces` row in `rows` (the rows of one trace, from `path`).
pub fn trace_row_of(path: &Path, rows: &Table) -> Result<TraceRow, DatasetError> {
    let c = Columns { path, table: rows };
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
    if rows.rows != 1 {
        return Err(DatasetError::Schema {
            path: path.to_owned(),
            reason: format!("it holds {} rows for the trace; a traces file holds one", rows.rows),
        });
    }
    Ok(TraceRow {
        trace_id: required(path, "trace_id", ids[0].clone())?,
        dataset_version: required(path, "dataset_version", versions[0])?,
        build: builds[0].clone(),
        machine_class: classes[0].clone(),
        host: hosts[0].clone().unwrap_or_default(),
        kernel: kernels[0].clone().unwrap_or_default(),
        command: commands[0].clone().unwrap_or_default(),
        page_size: u32::try_from(required(path, "page_size", page_sizes[0])?).unwrap_or(0),
        used_pages_from: used[0].clone().unwrap_or_default(),
        boot_or_session: boot[0].unwrap_or(false),
        command_start_ns: command_starts[0].unwrap_or(0),
        start_unix_ns: starts[0].unwrap_or(0),
    })
}

/// The `file` rows in `rows`.
pub fn file_rows_of(path: &Path, rows: &Table) -> Result<Vec<FileRow>, DatasetError> {
    let c = Columns { path, table: rows };
    let (ids, devs, inos, paths) = (c.i64("file_id")?, c.str("dev")?, c.i64("ino")?, c.str("path")?);
    let (kinds, sizes, mtimes) = (c.str("kind")?, c.i64("size")?, c.i64("mtime_ns")?);
    let mut out = Vec::with_capacity(rows.rows);
    for (i, path_i) in paths.into_iter().enumerate() {
        out.push(FileRow {
            file_id: file_id(path, required(path, "file_id", ids[i])?)?,
            dev: devs[i].clone().unwrap_or_default(),
            ino: unsigned(path, "ino", inos[i].unwrap_or(0))?,
            path: path_i,
            kind: required(path, "kind", kinds[i].clone())?,
            size: sizes[i].map(|s| unsigned(path, "size", s)).transpose()?,
            mtime_ns: mtimes[i],
        });
    }
    Ok(out)
}

/// The `file_open` rows in `rows`: (file id, time from the trace's zero).
pub fn open_rows_of(path: &Path, rows: &Table) -> Result<Vec<(u32, i64)>, DatasetError> {
    let c = Columns { path, table: rows };
    let (ids, times) = (c.i64("file_id")?, c.i64("t_ns")?);
    ids.into_iter()
        .zip(times)
        .map(|(f, t)| Ok((file_id(path, required(path, "file_id", f)?)?, required(path, "t_ns", t)?)))
        .collect()
}

/// The rows of `page_use` or `page_used` (`table`) in `rows`.
pub fn run_rows_of(path: &Path, table: &str, rows: &Table) -> Result<Vec<RunRow>, DatasetError> {
    let time = run_time_column(table)?;
    let c = Columns { path, table: rows };
    let (ids, firsts, pages, times) =
        (c.i64("file_id")?, c.i64("first_page")?, c.i64("pages")?, c.i64(time)?);
    (0..rows.rows)
        .map(|i| {
            Ok(RunRow {
                file_id: file_id(path, required(path, "file_id", ids[i])?)?,
                first_page: unsigned(path, "first_page", required(path, "first_page", firsts[i])?)?,
                pages: unsigned(path, "pages", required(path, "pages", pages[i])?)?,
                t_ns: required(path, time, times[i])?,
            })
        })
        .collect()
}

/// The `block_io` rows in `rows`: what a block plan reads of them (no process, file or error).
pub fn block_rows_of(path: &Path, rows: &Table) -> Result<Vec<BlockIo>, DatasetError> {
    let c = Columns { path, table: rows };
    let (issues, completes, devs) = (c.i64("issue_ns")?, c.i64("complete_ns")?, c.str("dev")?);
    let (sectors, bytes, ops, rwbs) = (c.i64("sector")?, c.i64("bytes")?, c.str("op")?, c.str("rwbs")?);
    (0..rows.rows)
        .map(|i| {
            let dev = required(path, "dev", devs[i].clone())?;
            let op = required(path, "op", ops[i].clone())?;
            Ok(BlockIo {
                issue_ns: issues[i],
                complete_ns: completes[i],
                dev: dev.parse::<Dev>().map_err(|_| c.bad("dev", &format!("holds {dev:?}, not MAJ:MIN")))?,
                sector: sectors[i].map(|s| unsigned(path, "sector", s)).transpose()?,
                bytes: u32::try_from(required(path, "bytes", bytes[i])?)
                    .map_err(|_| c.bad("bytes", "holds a size out of range"))?,
                op: BlockOp::from_word(&op).unwrap_or(BlockOp::Other),
                rwbs: rwbs[i].clone().unwrap_or_default(),
                ..BlockIo::default()
            })
        })
        .collect()
}

/// Where table `table` holds trace `id`: its exported file or the part listing it.
fn find(dir: &Path, table: &str, id: &str) -> Result<Held, DatasetError> {
    let folder = dir.join(table);
    let listing =
        std::fs::read_dir(&folder).map_err(|source| DatasetError::Io { path: folder.clone(), source })?;
    let mut partitions: Vec<PathBuf> = listing
        .flatten()
        .filter(|e| partition_build(&e.file_name().to_string_lossy()).is_some())
        .map(|e| e.path())
        .collect();
    partitions.sort();
    for partition in &partitions {
        let exported = partition.join(format!("{id}.parquet"));
        if exported.is_file() {
            let path = exported.strip_prefix(dir).unwrap_or(&exported).to_owned();
            return Ok(Held { path, part: false, ids: vec![id.to_owned()], rows: 0, bytes: 0 });
        }
        let mut names: Vec<_> =
            std::fs::read_dir(partition).into_iter().flatten().flatten().map(|e| e.path()).collect();
        names.sort();
        for path in names {
            if classify(&path.file_name().unwrap_or_default().to_string_lossy()) != FileName::Part {
                continue;
            }
            let ids = read_footer(&path)?.ids.unwrap_or_default();
            if ids.binary_search_by(|i| i.as_str().cmp(id)).is_ok() {
                let path = path.strip_prefix(dir).unwrap_or(&path).to_owned();
                return Ok(Held { path, part: true, ids, rows: 0, bytes: 0 });
            }
        }
    }
    Err(DatasetError::Io {
        path: folder,
        source: std::io::Error::new(std::io::ErrorKind::NotFound, format!("no file holds trace {id}")),
    })
}

/// The columns `columns` of trace `id`'s rows of table `table`, and the file they came from.
fn trace_table(
    dir: &Path,
    table: &str,
    id: &str,
    columns: &[&str],
) -> Result<(PathBuf, Table), DatasetError> {
    let held = find(dir, table, id)?;
    let path = dir.join(&held.path);
    let mut stream = TraceStream::new(dir, std::slice::from_ref(&held), Some(columns));
    let rows = stream.rows_of(id).unwrap_or_else(|| Ok(Table::default()))?;
    Ok((path, rows))
}

/// The `traces` row of trace `id`.
pub fn trace_row(dir: &Path, id: &str) -> Result<TraceRow, DatasetError> {
    let (path, rows) = trace_table(dir, "traces", id, &TRACE_COLUMNS)?;
    trace_row_of(&path, &rows)
}

/// The `file` rows of trace `id`.
pub fn file_rows(dir: &Path, id: &str) -> Result<Vec<FileRow>, DatasetError> {
    let (path, rows) = trace_table(dir, "file", id, &FILE_COLUMNS)?;
    file_rows_of(&path, &rows)
}

/// The `file_open` rows of trace `id`: (file id, time from the trace's zero).
pub fn open_rows(dir: &Path, id: &str) -> Result<Vec<(u32, i64)>, DatasetError> {
    let (path, rows) = trace_table(dir, "file_open", id, &OPEN_COLUMNS)?;
    open_rows_of(&path, &rows)
}

/// The rows of trace `id` in `page_use` (time column `first_t_ns`) or `page_used`
/// (`first_need_ns`).
pub fn run_rows(dir: &Path, table: &str, id: &str) -> Result<Vec<RunRow>, DatasetError> {
    let time = run_time_column(table)?;
    let (path, rows) = trace_table(dir, table, id, &["file_id", "first_page", "pages", time])?;
    run_rows_of(&path, table, &rows)
}

/// What a fleet's plan reads of one trace.
#[derive(Clone, Debug, Default)]
pub struct PlanTrace {
    pub row: TraceRow,
    pub files: Vec<FileRow>,
    /// `page_used`.
    pub used: Vec<RunRow>,
    /// `page_use`.
    pub filled: Vec<RunRow>,
    /// `file_open`: (file id, time from the trace's zero).
    pub opened: Vec<(u32, i64)>,
}

/// A table's stream of one build, and the folder it reads (named in errors).
struct Reading {
    stream: TraceStream,
    folder: PathBuf,
}

impl Reading {
    fn new(dir: &Path, catalog: &Catalog, table: &str, build: &Option<String>, columns: &[&str]) -> Reading {
        let files = catalog.files_of(table, build);
        let folder = Path::new(table).join(crate::layout::partition_name(build.as_deref()));
        Reading { stream: TraceStream::new(dir, files, Some(columns)), folder }
    }

    /// Trace `id`'s rows; a trace in `traces` that this table lacks is an error.
    fn rows_of(&mut self, id: &str) -> Result<Table, DatasetError> {
        self.stream.rows_of(id).unwrap_or_else(|| {
            Err(DatasetError::Schema {
                path: self.folder.clone(),
                reason: format!("it holds no rows of trace {id}"),
            })
        })
    }
}

/// Walks the wanted traces, build by build (those `builds` accepts) and trace by trace in id
/// order: `open` makes, for each build, the readings of the other tables; `each` gets them with
/// the id and `traces` row of each trace `want` accepts. `catalog` is the survey's.
fn each_wanted_trace<S, E: From<DatasetError>>(
    dir: &Path,
    catalog: &Catalog,
    builds: &dyn Fn(&Option<String>) -> bool,
    want: &mut dyn FnMut(&TraceRow) -> bool,
    open: &dyn Fn(&Option<String>) -> S,
    each: &mut dyn FnMut(&mut S, &str, TraceRow) -> Result<(), E>,
) -> Result<(), E> {
    for build in catalog.builds().iter().filter(|b| builds(b)) {
        let mut traces = Reading::new(dir, catalog, "traces", build, &TRACE_COLUMNS);
        let mut tables = open(build);
        while let Some(next) = traces.stream.next_trace() {
            let (id, rows) = next?;
            let row = trace_row_of(&traces.folder, &rows)?;
            if want(&row) {
                each(&mut tables, &id, row)?;
            }
        }
    }
    Ok(())
}

/// Hands the block requests of each trace `want` accepts (given its `traces` row) to `each`,
/// build by build and trace by trace (see [`each_wanted_trace`]).
pub fn read_block_traces<E: From<DatasetError>>(
    dir: &Path,
    catalog: &Catalog,
    builds: &dyn Fn(&Option<String>) -> bool,
    want: &mut dyn FnMut(&TraceRow) -> bool,
    each: &mut dyn FnMut(TraceRow, Vec<BlockIo>) -> Result<(), E>,
) -> Result<(), E> {
    let open = |build: &Option<String>| Reading::new(dir, catalog, "block_io", build, &BLOCK_COLUMNS);
    each_wanted_trace(dir, catalog, builds, want, &open, &mut |blocks, id, row| {
        let block_rows = blocks.rows_of(id)?;
        each(row, block_rows_of(&blocks.folder, &block_rows)?)
    })
}

/// Hands what a plan needs of each trace `want` accepts (given its `traces` row) to `each`,
/// build by build and trace by trace (see [`each_wanted_trace`]); other traces are passed over.
pub fn read_plan_traces<E: From<DatasetError>>(
    dir: &Path,
    catalog: &Catalog,
    builds: &dyn Fn(&Option<String>) -> bool,
    want: &mut dyn FnMut(&TraceRow) -> bool,
    each: &mut dyn FnMut(PlanTrace) -> Result<(), E>,
) -> Result<(), E> {
    let used_columns = ["file_id", "first_page", "pages", "first_need_ns"];
    let filled_columns = ["file_id", "first_page", "pages", "first_t_ns"];
    let open = |build: &Option<String>| {
        (
            Reading::new(dir, catalog, "file", build, &FILE_COLUMNS),
            Reading::new(dir, catalog, "page_used", build, &used_columns),
            Reading::new(dir, catalog, "page_use", build, &filled_columns),
            Reading::new(dir, catalog, "file_open", build, &OPEN_COLUMNS),
        )
    };
    each_wanted_trace(dir, catalog, builds, want, &open, &mut |(files, used, filled, opens), id, row| {
        let (file_rows, used_rows) = (files.rows_of(id)?, used.rows_of(id)?);
        let (filled_rows, open_rows) = (filled.rows_of(id)?, opens.rows_of(id)?);
        each(PlanTrace {
            files: file_rows_of(&files.folder, &file_rows)?,
            used: run_rows_of(&used.folder, "page_used", &used_rows)?,
            filled: run_rows_of(&filled.folder, "page_use", &filled_rows)?,
            opened: open_rows_of(&opens.folder, &open_rows)?,
            row,
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use parquet::data_type::ByteArray;

    fn column(name: &str, values: Values) -> Column {
        Column { name: name.into(), nullable: false, values, levels: Vec::new() }
    }

    /// Block rows with one request of `dev` and `bytes`.
    fn block_table(dev: &str, bytes: i64) -> Table {
        let text = |s: &str| Values::Str(vec![ByteArray::from(s)]);
        Table {
            columns: vec![
                column("issue_ns", Values::I64(vec![1_000])),
                column("complete_ns", Values::I64(vec![2_000])),
                column("dev", text(dev)),
                column("sector", Values::I64(vec![8])),
                column("bytes", Values::I64(vec![bytes])),
                column("op", text("read")),
                column("rwbs", text("RM")),
            ],
            rows: 1,
        }
    }

    #[test]
    fn block_rows_are_read_and_a_bad_device_or_size_is_named() {
        let path = Path::new("block_io/part.parquet");
        let ios = block_rows_of(path, &block_table("254:0", 4096)).unwrap();
        assert_eq!(ios.len(), 1);
        assert_eq!((ios[0].dev, ios[0].sector, ios[0].bytes), (Dev::new(254, 0), Some(8), 4096));
        assert_eq!((ios[0].op, ios[0].rwbs.as_str()), (BlockOp::Read, "RM"));
        let bad_dev = block_rows_of(path, &block_table("vda", 4096)).unwrap_err().to_string();
        assert!(bad_dev.contains("dev") && bad_dev.contains("\"vda\", not MAJ:MIN"), "{bad_dev}");
        let bad_size = block_rows_of(path, &block_table("254:0", 1 << 40)).unwrap_err().to_string();
        assert!(bad_size.contains("bytes holds a size out of range"), "{bad_size}");
        let negative = block_rows_of(path, &block_table("254:0", -1)).unwrap_err().to_string();
        assert!(negative.contains("bytes"), "{negative}");
    }
}
