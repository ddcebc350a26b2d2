//! Compaction on datasets of the real fixtures: every table keeps exactly its rows per
//! trace, now in parts of many traces with coldstart's footers; traces exported after a
//! compaction are counted once and folded by the next; small parts are merged.

use std::collections::BTreeMap;
use std::path::Path;

use coldstart_dataset::compact::{Options, compact};
use coldstart_dataset::stream::TraceStream;
use coldstart_dataset::{TABLES, Table, survey};
use coldstart_trace::Trace;

mod common;
use common::{export, unpack};

/// `n` traces made from the fixtures (each a copy of python or soffice under another
/// host name, so another file and id), exported as builds "1" and "2" alternately.
fn exported(dataset: &Path, traces: &Path, first: usize, n: usize) -> Vec<String> {
    let real = [unpack("python", traces), unpack("soffice", traces)];
    let originals: Vec<Trace> = real.iter().map(|p| Trace::read(p).unwrap()).collect();
    (first..first + n)
        .map(|i| {
            let mut trace = originals[i % 2].clone();
            trace.meta.host = format!("host-{i}");
            let path = traces.join(format!("t{i}.coldstart"));
            trace.write(&path).unwrap();
            export(dataset, &path, if i % 4 < 2 { "1" } else { "2" }).0
        })
        .collect()
}

/// Every table's rows, per trace.
fn rows(dataset: &Path) -> BTreeMap<(String, String), Table> {
    let found = survey(dataset).unwrap();
    assert!(!found.has_errors(), "{:?}", found.problems);
    let mut out = BTreeMap::new();
    for ((table, _), files) in &found.catalog.files {
        let mut stream = TraceStream::new(dataset, files, None);
        while let Some(next) = stream.next_trace() {
            let (id, rows) = next.unwrap();
            assert!(out.insert((table.clone(), id), rows).is_none(), "a trace read twice");
        }
    }
    out
}

/// Small sizes, so that the fixtures make several row groups and parts.
fn small() -> Options {
    Options {
        row_group_rows: 30_000,
        min_row_group_rows: 10_000,
        part_bytes: 150_000,
        small_part_bytes: 1,
        threads: 2,
        rewrite: false,
    }
}

fn quiet(_: coldstart_dataset::compact::Event<'_>) {}

#[test]
fn compaction_keeps_every_row_of_every_trace_and_leaves_parts_only() {
    let (dataset, traces) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ids = exported(dataset.path(), traces.path(), 0, 6);
    let before = rows(dataset.path());
    assert_eq!(before.len(), ids.len() * TABLES.len());
    let report = compact(dataset.path(), &small(), &mut || {}, &quiet).unwrap();
    assert_eq!(report.files_folded, ids.len() * TABLES.len());
    assert_eq!(report.traces, ids.len());
    let after = rows(dataset.path());
    assert_eq!(before.keys().collect::<Vec<_>>(), after.keys().collect::<Vec<_>>());
    for (key, rows) in &before {
        assert_eq!(rows, &after[key], "{key:?}");
    }
    let found = survey(dataset.path()).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert!(found.catalog.files.values().flatten().all(|h| h.part), "every exported file was folded");
    // page_fill (about 40,000 rows a trace) made several parts and row groups.
    let fills: Vec<_> =
        found.catalog.files.iter().filter(|((t, _), _)| t == "page_fill").flat_map(|(_, f)| f).collect();
    assert!(fills.len() > 2, "{fills:?}");
    let reader = coldstart_dataset::TableReader::open(&dataset.path().join(&fills[0].path)).unwrap();
    assert!(reader.num_row_groups() >= 1);
    for g in 0..reader.num_row_groups() {
        assert!(reader.row_group_rows(g) >= 10_000, "row group {g} of {:?}", fills[0].path);
    }
    assert!(!dataset.path().join(".compaction").exists());
    // A second compaction finds nothing to do.
    assert_eq!(compact(dataset.path(), &small(), &mut || {}, &quiet).unwrap().jobs, 0);
}

#[test]
fn traces_exported_after_a_compaction_count_once_and_the_next_one_folds_them() {
    let (dataset, traces) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let first = exported(dataset.path(), traces.path(), 0, 4);
    let options = Options { small_part_bytes: 64 << 20, part_bytes: 1 << 30, ..small() };
    compact(dataset.path(), &options, &mut || {}, &quiet).unwrap();
    // Exporting a trace the parts hold again adds nothing.
    let again = export(dataset.path(), &traces.path().join("t0.coldstart"), "1");
    assert_eq!(again, (first[0].clone(), coldstart_dataset::ExportStatus::AlreadyThere));
    let later = exported(dataset.path(), traces.path(), 4, 3);
    let found = survey(dataset.path()).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert_eq!(found.traces, 7);
    let before = rows(dataset.path());
    let report = compact(dataset.path(), &options, &mut || {}, &quiet).unwrap();
    assert_eq!(report.files_folded, later.len() * TABLES.len());
    assert_eq!(rows(dataset.path()), before);
    let found = survey(dataset.path()).unwrap();
    assert_eq!(found.traces, 7);
    // Small parts are merged with what is folded: one part per table and build.
    for ((table, build), files) in &found.catalog.files {
        assert_eq!(files.len(), 1, "{table} {build:?}: {files:?}");
    }
}

/// Every part of the dataset: path relative to it, and its inode.
fn parts(dataset: &Path) -> BTreeMap<std::path::PathBuf, u64> {
    use std::os::unix::fs::MetadataExt;
    let found = survey(dataset).unwrap();
    found
        .catalog
        .files
        .values()
        .flatten()
        .filter(|h| h.part)
        .map(|h| (h.path.clone(), std::fs::metadata(dataset.join(&h.path)).unwrap().ino()))
        .collect()
}

#[test]
fn a_batch_is_added_as_new_parts_and_the_large_parts_are_not_rewritten() {
    let (dataset, traces) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    exported(dataset.path(), traces.path(), 0, 4);
    compact(dataset.path(), &small(), &mut || {}, &quiet).unwrap();
    let old = parts(dataset.path());
    // A batch as large as the dataset: a compaction that doubles parts would rewrite them.
    exported(dataset.path(), traces.path(), 4, 4);
    let batch_bytes: u64 = survey(dataset.path())
        .unwrap()
        .catalog
        .files
        .values()
        .flatten()
        .filter(|h| !h.part)
        .map(|h| h.bytes)
        .sum();
    let before = rows(dataset.path());
    let report = compact(dataset.path(), &small(), &mut || {}, &quiet).unwrap();
    assert_eq!(report.traces, 4, "only the batch's traces moved");
    assert_eq!(report.bytes_before, batch_bytes);
    let now = parts(dataset.path());
    for (path, inode) in &old {
        assert_eq!(now.get(path), Some(inode), "{path:?} was rewritten");
    }
    assert!(now.len() > old.len());
    assert_eq!(rows(dataset.path()), before);
    let found = survey(dataset.path()).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert_eq!(found.traces, 8);
    assert!(found.catalog.files.values().flatten().all(|h| h.part));
}

#[test]
fn a_rewrite_folds_the_parts_that_are_not_full_into_full_ones() {
    let (dataset, traces) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let options = Options { part_bytes: 1 << 30, ..small() };
    exported(dataset.path(), traces.path(), 0, 4);
    compact(dataset.path(), &options, &mut || {}, &quiet).unwrap();
    exported(dataset.path(), traces.path(), 4, 4);
    compact(dataset.path(), &options, &mut || {}, &quiet).unwrap();
    let before = rows(dataset.path());
    let found = survey(dataset.path()).unwrap();
    assert!(found.catalog.files.values().all(|files| files.len() == 2), "two batches, two parts each");
    let report = compact(dataset.path(), &Options { rewrite: true, ..options }, &mut || {}, &quiet).unwrap();
    assert_eq!(report.traces, 8);
    assert_eq!(rows(dataset.path()), before);
    let found = survey(dataset.path()).unwrap();
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    for ((table, build), files) in &found.catalog.files {
        assert_eq!(files.len(), 1, "{table} {build:?}: {files:?}");
    }
}
