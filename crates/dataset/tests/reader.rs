//! Rows read back from a dataset written from the real fixtures: the `traces` row, the
//! files and the page runs equal what the trace and the planner say; a file of another
//! schema is a clear error.

use std::collections::BTreeSet;

use coldstart_dataset::reader::{file_rows, open_rows, run_rows, trace_row};
use coldstart_dataset::{DatasetError, table_file};
use coldstart_prefetch::build::used_by_file;
use coldstart_trace::{TextEnum, Trace};

mod common;
use common::{export, unpack};

/// The build the traces are exported as.
const B: Option<&str> = Some("41.2");

/// The fixture `name` exported with build `41.2`; returns the dataset, the trace and its id.
fn exported(name: &str) -> (tempfile::TempDir, Trace, String) {
    let traces = tempfile::tempdir().unwrap();
    let dataset = tempfile::tempdir().unwrap();
    let path = unpack(name, traces.path());
    let (id, _) = export(dataset.path(), &path, "41.2");
    (dataset, Trace::read(&path).unwrap(), id)
}

/// Every (file, page) of `runs`.
fn pages(runs: impl IntoIterator<Item = (u32, u64, u64)>) -> BTreeSet<(u32, u64)> {
    runs.into_iter().flat_map(|(f, first, n)| (first..first + n).map(move |p| (f, p))).collect()
}

#[test]
fn the_traces_row_and_the_files_read_back_as_written() {
    let (dataset, trace, id) = exported("python");
    let row = trace_row(dataset.path(), &id).unwrap();
    assert_eq!(row.trace_id, id);
    assert_eq!(row.dataset_version, coldstart_dataset::DATASET_VERSION);
    assert_eq!(row.build.as_deref(), Some("41.2"));
    assert_eq!(row.host, trace.meta.host);
    assert_eq!(row.command, trace.meta.command.join(" "));
    assert_eq!(row.page_size, trace.meta.page_size);
    assert_eq!(row.start_unix_ns, trace.meta.start_unix_ns);
    assert_eq!(row.used_pages_from, "accesses");
    assert!(!row.boot_or_session, "python's start is one program");
    assert_eq!(row.command_start_ns, coldstart_prefetch::build::command_start(&trace));
    let opens = open_rows(dataset.path(), &id).unwrap();
    assert_eq!(opens, trace.file_opens.iter().map(|o| (o.file_id, o.t_ns)).collect::<Vec<_>>());
    assert!(!opens.is_empty());
    let files = file_rows(dataset.path(), &id).unwrap();
    assert_eq!(files.len(), trace.files.len());
    for (row, file) in files.iter().zip(&trace.files) {
        assert_eq!(row.file_id, file.id);
        assert_eq!(row.path, file.path);
        assert_eq!(row.kind, file.kind.as_str());
        assert_eq!((row.ino, row.size, row.mtime_ns), (file.ino, file.size, file.mtime_ns));
        assert_eq!(row.dev, file.dev.to_string());
    }
}

#[test]
fn page_used_holds_the_pages_a_plan_counts_as_used_each_once_within_256_page_blocks() {
    let (dataset, trace, id) = exported("soffice");
    let runs = run_rows(dataset.path(), "page_used", &id).unwrap();
    assert!(!runs.is_empty());
    let (_, used) = used_by_file(&trace);
    let expected =
        pages(used.iter().flat_map(|(f, ps)| ps.iter().map(move |p| (*f, p.start, p.end - p.start))));
    let read: Vec<(u32, u64)> = runs
        .iter()
        .flat_map(|r| (r.first_page..r.first_page + r.pages).map(move |p| (r.file_id, p)))
        .collect();
    assert_eq!(read.len(), expected.len(), "a page in two runs would count twice");
    assert_eq!(read.into_iter().collect::<BTreeSet<_>>(), expected);
    assert!(runs.iter().all(|r| r.first_page / 256 == (r.first_page + r.pages - 1) / 256));
    // Each page's time is its earliest need.
    let mut earliest: std::collections::HashMap<(u32, u64), i64> = std::collections::HashMap::new();
    for (f, ps) in &used {
        for p in ps {
            for page in p.start..p.end {
                let t = earliest.entry((*f, page)).or_insert(p.t);
                *t = (*t).min(p.t);
            }
        }
    }
    for r in &runs {
        for page in r.first_page..r.first_page + r.pages {
            assert_eq!(earliest[&(r.file_id, page)], r.t_ns, "page {page} of file {}", r.file_id);
        }
    }
    // page_use (fills) reads back too, each page once.
    let fills = run_rows(dataset.path(), "page_use", &id).unwrap();
    let filled = pages(trace.page_fills.iter().map(|f| (f.file_id, f.index, u64::from(f.pages))));
    assert_eq!(pages(fills.iter().map(|r| (r.file_id, r.first_page, r.pages))), filled);
}

#[test]
fn a_file_of_another_schema_is_an_error_that_names_it_and_the_column() {
    let (dataset, _, id) = exported("python");
    // The `process` table's file put where the `file` table's belongs.
    std::fs::copy(table_file(dataset.path(), "process", B, &id), table_file(dataset.path(), "file", B, &id))
        .unwrap();
    let err = file_rows(dataset.path(), &id).unwrap_err();
    assert!(matches!(err, DatasetError::Schema { .. }), "{err:?}");
    assert!(err.to_string().contains("its column file_id is missing"), "{err}");
    assert!(err.to_string().contains(&format!("file/build=41.2/{id}.parquet")), "{err}");
    // A truncated file.
    let path = table_file(dataset.path(), "page_used", B, &id);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let err = run_rows(dataset.path(), "page_used", &id).unwrap_err();
    assert!(matches!(err, DatasetError::Read { .. }), "{err:?}");
}
