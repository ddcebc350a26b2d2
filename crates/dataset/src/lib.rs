//! Many traces as one Parquet dataset, for DuckDB on one machine and Spark on a cluster.
//!
//! A dataset is a folder with one folder per table (`process/`, `page_fill/`, …,
//! `traces/`) and, in each, one Parquet file per trace named by the trace's id; every row
//! carries that id. Adding traces adds files and rewrites none. docs/dataset-format.md is
//! the contract; [`DATASET_VERSION`] changes with it. [`survey`] reads the files' footers
//! and finds what would make a query wrong: unreadable files, a trace held twice, files
//! of another version, interrupted exports.

#![forbid(unsafe_code)]

mod batch;
pub mod columns;
pub mod file;
pub mod reader;
pub mod survey;
pub mod tables;
mod writer;

use std::path::PathBuf;

pub use columns::{Column, Table, Values};
pub use file::{TableReader, TableWriter};
pub use survey::{Problem, Severity, Survey, survey};
pub use tables::{Exported, PAGE_USE_BLOCK, PageRun, TABLES, TraceLabels, page_use};
pub use writer::{ExportStatus, contains, export, table_file, trace_id_of_file, write_file};

/// The version of docs/dataset-format.md that this crate writes and reads.
pub const DATASET_VERSION: i32 = 2;

/// Keys of every file's Parquet key-value metadata.
pub const META_VERSION: &str = "coldstart.dataset_version";
pub const META_TRACE_ID: &str = "coldstart.trace_id";
pub const META_TABLE: &str = "coldstart.table";

#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the Parquet file {}", path.display())]
    Parquet {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("cannot read the Parquet file {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: parquet::errors::ParquetError,
    },
    #[error("{} is not a table of this dataset version: {reason}", path.display())]
    Schema { path: PathBuf, reason: String },
    #[error("{} is not a coldstart dataset (no traces/ folder); make one with `coldstart export --format parquet -o DIR TRACE…`", .0.display())]
    NotADataset(PathBuf),
}
