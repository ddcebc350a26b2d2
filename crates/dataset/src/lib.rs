//! Many traces as one Parquet dataset, for DuckDB on one machine and Spark on a cluster.
//!
//! A dataset is a folder with one folder per table (`process/`, `page_fill/`, …,
//! `traces/`), in each one folder per build (`build=41.2/`, [`layout`]), and in that one
//! Parquet file per exported trace named by the trace's id, or the large parts a
//! compaction ([`compact`]) made of many traces; every row carries its trace's id. An
//! export adds files and rewrites none; a compaction folds them into parts, one table and
//! build at a time, each switched into place atomically. docs/dataset-format.md is the
//! contract; [`DATASET_VERSION`] changes with it. [`survey`] reads the files' footers and
//! finds what would make a query wrong: unreadable files, a trace held twice, files of
//! another version, interrupted exports.

#![forbid(unsafe_code)]

mod batch;
pub mod columns;
pub mod compact;
pub mod file;
pub mod layout;
pub mod reader;
pub mod stream;
pub mod survey;
pub mod tables;
mod writer;

use std::path::PathBuf;

pub use columns::{Column, Table, Values};
pub use file::{TableReader, TableWriter};
pub use layout::{partition_dir, partition_name, table_file};
pub use survey::{Catalog, Held, Problem, Severity, Survey, survey};
pub use tables::{Exported, PAGE_USE_BLOCK, PageRun, TABLES, TraceLabels, page_use};
pub use writer::{DatasetLock, DatasetWriter, ExportStatus, contains, export, trace_id_of_file, write_file};

/// The version of docs/dataset-format.md that this crate writes and reads.
pub const DATASET_VERSION: i32 = 3;

/// Keys of every file's Parquet key-value metadata.
pub const META_VERSION: &str = "coldstart.dataset_version";
pub const META_TRACE_ID: &str = "coldstart.trace_id";
pub const META_TABLE: &str = "coldstart.table";
/// The build of the file's traces; absent when they have none.
pub const META_BUILD: &str = "coldstart.build";
/// A part's traces, sorted and comma-separated (an exported trace's file has [`META_TRACE_ID`]).
pub const META_TRACE_IDS: &str = "coldstart.trace_ids";

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
    #[error("{} is a dataset of version 2 or older (its files lie directly in the table folders); this coldstart writes and reads version {DATASET_VERSION}: export the traces again into a new dataset", .0.display())]
    OldLayout(PathBuf),
    #[error("the dataset has errors (run `coldstart fleet ready` on it to see them): {0}")]
    Refused(String),
}
