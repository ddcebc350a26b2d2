//! The dataset written from the real fixtures, and the survey's verdict on datasets with
//! the defects a fleet's folders collect: a file of an older dataset version, a truncated
//! file, a trace held twice, an interrupted export, a temporary file.

use std::path::Path;

use coldstart_dataset::{DATASET_VERSION, ExportStatus, Severity, Survey, TABLES, survey, table_file};
use coldstart_trace::Trace;

mod common;
use common::{export, unpack};

/// A dataset of both fixtures; returns it, its folder of traces and the two ids.
fn two_traces() -> (tempfile::TempDir, tempfile::TempDir, [String; 2]) {
    let traces = tempfile::tempdir().unwrap();
    let dataset = tempfile::tempdir().unwrap();
    let python = unpack("python", traces.path());
    let soffice = unpack("soffice", traces.path());
    let (a, _) = export(dataset.path(), &python, "1");
    let (b, _) = export(dataset.path(), &soffice, "2");
    (dataset, traces, [a, b])
}

fn errors(s: &Survey) -> Vec<String> {
    s.errors().map(|p| p.to_string()).collect()
}

#[test]
fn a_fresh_dataset_has_every_table_of_both_traces_and_no_problem() {
    let (dataset, _traces, [a, b]) = two_traces();
    let s = survey(dataset.path()).unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.traces, 2);
    assert_eq!(s.files, 2 * TABLES.len());
    for (id, build) in [(&a, "1"), (&b, "2")] {
        for table in TABLES {
            assert!(table_file(dataset.path(), table, Some(build), id).is_file(), "{table}/{id}");
        }
    }
    assert_eq!(s.rows["traces"], 2);
    assert!(s.rows["page_fill"] > 0 && s.rows["critical_path"] > 0);
}

#[test]
fn footer_row_counts_equal_the_traces_own_tables() {
    let traces = tempfile::tempdir().unwrap();
    let dataset = tempfile::tempdir().unwrap();
    let path = unpack("soffice", traces.path());
    export(dataset.path(), &path, "1");
    let trace = Trace::read(&path).unwrap();
    let s = survey(dataset.path()).unwrap();
    assert_eq!(s.rows["process"], trace.processes.len() as u64);
    assert_eq!(s.rows["file"], trace.files.len() as u64);
    assert_eq!(s.rows["page_fill"], trace.page_fills.len() as u64);
    assert_eq!(s.rows["block_io"], trace.block_ios.len() as u64);
    assert_eq!(s.rows["sched"], trace.sched.len() as u64);
    assert_eq!(s.rows["mark"], trace.marks.len() as u64);
    let pages: u64 = coldstart_dataset::page_use(&trace).iter().map(|r| r.pages).sum();
    let mut distinct = std::collections::BTreeSet::new();
    for f in &trace.page_fills {
        for p in f.index..f.index + u64::from(f.pages) {
            distinct.insert((f.file_id, p));
        }
    }
    assert_eq!(pages, distinct.len() as u64, "page_use holds each filled page once");
}

#[test]
fn the_same_trace_exported_again_is_skipped() {
    let (dataset, traces, [a, _]) = two_traces();
    let before = std::fs::metadata(table_file(dataset.path(), "page_fill", Some("1"), &a))
        .unwrap()
        .modified()
        .unwrap();
    let (id, status) = export(dataset.path(), &traces.path().join("python.coldstart"), "1");
    assert_eq!((id.as_str(), status), (a.as_str(), ExportStatus::AlreadyThere));
    let after = std::fs::metadata(table_file(dataset.path(), "page_fill", Some("1"), &a))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
    assert_eq!(survey(dataset.path()).unwrap().traces, 2);
}

#[test]
fn a_truncated_file_is_an_error_naming_it() {
    let (dataset, _traces, [a, _]) = two_traces();
    let file = table_file(dataset.path(), "page_fill", Some("1"), &a);
    let len = std::fs::metadata(&file).unwrap().len();
    std::fs::OpenOptions::new().write(true).open(&file).unwrap().set_len(len / 2).unwrap();
    let e = errors(&survey(dataset.path()).unwrap());
    assert!(
        e.iter().any(|l| l.starts_with(&format!(
            "error: page_fill/build=1/{a}.parquet: unreadable, truncated or not Parquet"
        ))),
        "{e:?}"
    );
    assert_eq!(e.len(), 1, "one line for the one defect: {e:?}");
}

#[test]
fn a_trace_held_twice_is_an_error_that_says_its_rows_would_count_twice() {
    let (dataset, _traces, [a, _]) = two_traces();
    let dir = dataset.path().join("process").join("build=1");
    std::fs::copy(dir.join(format!("{a}.parquet")), dir.join("copy.parquet")).unwrap();
    let s = survey(dataset.path()).unwrap();
    let e = errors(&s);
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(e[0].contains(&format!("trace {a} is held by 2 files of process")), "{e:?}");
    assert!(e[0].contains("would count 2 times"), "{e:?}");
    assert!(
        s.problems.iter().any(|p| p.severity == Severity::Warning && p.text.contains("under another name"))
    );
}

#[test]
fn a_file_of_an_older_dataset_version_is_an_error() {
    let (dataset, _traces, [_, b]) = two_traces();
    let file = table_file(dataset.path(), "process", Some("2"), &b);
    let reader = coldstart_dataset::TableReader::open(&file).unwrap();
    let batch = reader.read_all(&(0..reader.column_names().len()).collect::<Vec<_>>()).unwrap();
    assert_eq!(reader.num_row_groups(), 1, "a small table is one row group");
    coldstart_dataset::write_file(&file, "process", Some("2"), &b, DATASET_VERSION - 1, &batch).unwrap();
    let e = errors(&survey(dataset.path()).unwrap());
    assert_eq!(
        e,
        [format!(
            "error: process/build=2/{b}.parquet: written as dataset version {}, this coldstart reads version {DATASET_VERSION}; export its trace again into a new dataset",
            DATASET_VERSION - 1
        )]
    );
}

#[test]
fn an_interrupted_export_is_an_error_and_its_temporary_file_a_warning() {
    let (dataset, _traces, [a, _]) = two_traces();
    std::fs::remove_file(table_file(dataset.path(), "traces", Some("1"), &a)).unwrap();
    std::fs::write(dataset.path().join("sched/build=1").join(format!(".{a}.parquet.tmp")), b"PAR1").unwrap();
    let s = survey(dataset.path()).unwrap();
    assert_eq!(s.traces, 1);
    let e = errors(&s);
    assert!(e.iter().all(|l| l.contains("its export was interrupted")), "{e:?}");
    assert_eq!(e.len(), TABLES.len() - 1, "{e:?}");
    assert!(s.problems.iter().any(|p| p.severity == Severity::Warning
        && p.path == Path::new("sched/build=1").join(format!(".{a}.parquet.tmp"))));
}

#[test]
fn a_folder_without_traces_is_not_a_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let e = survey(dir.path()).unwrap_err().to_string();
    assert!(e.contains("is not a coldstart dataset (no traces/ folder)"), "{e}");
}
