//! Writing one trace into a dataset: a Parquet file per table, each written under a
//! temporary name and renamed into place, the `traces` file last.
//!
//! A trace's id is the SHA-256 of its trace file's bytes (the first 16 bytes, in hex), so
//! the same recording exported twice is found by name and skipped, never written twice.

use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use parquet::file::metadata::KeyValue;
use sha2::{Digest, Sha256};

use crate::columns::Table;
use crate::file::TableWriter;
use crate::tables::{Exported, TABLES};
use crate::{DATASET_VERSION, DatasetError, META_TABLE, META_TRACE_ID, META_VERSION};

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

/// Where table `table` keeps the rows of trace `id`.
pub fn table_file(dir: &Path, table: &str, id: &str) -> PathBuf {
    dir.join(table).join(format!("{id}.parquet"))
}

/// True when the dataset at `dir` already holds the trace `id` (its `traces` file exists).
pub fn contains(dir: &Path, id: &str) -> bool {
    table_file(dir, "traces", id).exists()
}

/// Writes the tables of `exported` into the dataset at `dir` (created if missing), unless
/// the dataset holds the trace already. A run that stops half-way leaves temporary files
/// and table files without a `traces` file, which `survey` reports and which the next
/// export of the same trace replaces.
pub fn export(dir: &Path, exported: &Exported<'_>) -> Result<ExportStatus, DatasetError> {
    if contains(dir, exported.id) {
        return Ok(ExportStatus::AlreadyThere);
    }
    let mut rows = 0u64;
    for table in TABLES {
        let folder = dir.join(table);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .map_err(|source| DatasetError::Io { path: folder.clone(), source })?;
        let batch = exported.table(table);
        rows += batch.num_rows() as u64;
        write_file(&table_file(dir, table, exported.id), table, exported.id, DATASET_VERSION, &batch)?;
    }
    Ok(ExportStatus::Written { rows })
}

/// Writes one table file atomically (temporary name, then rename), mode 0600: the rows
/// name every path the machine touched. `version` is public for tests that make a file
/// of another dataset version.
pub fn write_file(
    path: &Path,
    table: &str,
    id: &str,
    version: i32,
    rows: &Table,
) -> Result<(), DatasetError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("table");
    let temp = path.with_file_name(format!(".{name}.tmp"));
    let io_err = |source| DatasetError::Io { path: temp.clone(), source };
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&temp)
        .map_err(io_err)?;
    let metadata = vec![
        KeyValue::new(META_VERSION.to_owned(), version.to_string()),
        KeyValue::new(META_TRACE_ID.to_owned(), id.to_owned()),
        KeyValue::new(META_TABLE.to_owned(), table.to_owned()),
    ];
    let mut writer = TableWriter::new(file, &temp, rows, metadata)?;
    if rows.num_rows() > 0 {
        writer.write(&[rows])?;
    }
    let file = writer.finish()?;
    file.sync_all().map_err(io_err)?;
    fs::rename(&temp, path).map_err(|source| DatasetError::Io { path: path.to_owned(), source })
}
