//! `coldstart fleet compact` through the binary: a compacted dataset answers every shipped
//! question with the rows of the uncompacted one (DuckDB and Spark); a compaction killed
//! at any of its steps, or at a random moment, leaves a dataset the survey accepts and the
//! questions answer alike, and the next compaction finishes it; traces exported after a
//! compaction are counted once, before and after the next one; bad requests are one line.

use std::path::{Path, PathBuf};
use std::process::Output;

mod support;
use support::fleet::{
    Fleet, coldstart, copy_dataset, export, ok, python_with, run_queries, sections, synthesize,
};

/// 10 synthetic traces made from the 2 fixtures (builds b1, b2), in one uncompacted dataset.
fn dataset(python: &str, dir: &Path) -> PathBuf {
    let fleet = Fleet::new();
    let ds = dir.join("uncompacted");
    synthesize(python, fleet.dataset.path(), &ds, 0, 10);
    ds
}

fn compact(ds: &Path, kill_after: Option<usize>) -> Output {
    let mut cmd = assert_cmd::Command::new(env!("CARGO_BIN_EXE_coldstart"));
    cmd.args(["fleet", "compact", ds.to_str().unwrap()]);
    if let Some(n) = kill_after {
        cmd.env("COLDSTART_TEST_COMPACT_KILL_AFTER", n.to_string());
    }
    cmd.output().unwrap()
}

/// The survey's verdict and the ready question, through `coldstart fleet ready`.
fn survey_and_ready(python: &str, ds: &Path) -> (String, String) {
    let out = coldstart(&["fleet", "ready", ds.to_str().unwrap(), "--csv"], Some(python));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "the survey or the query refused the dataset: {stderr}");
    (stderr, String::from_utf8(out.stdout).unwrap())
}

fn parquet_files(dir: &Path) -> usize {
    walk(dir).iter().filter(|p| p.extension().is_some_and(|e| e == "parquet")).count()
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() { out.extend(walk(&path)) } else { out.push(path) }
    }
    out
}

#[test]
fn a_compacted_dataset_answers_every_question_with_the_rows_of_the_uncompacted_one() {
    let test = "a_compacted_dataset_answers_every_question_with_the_rows_of_the_uncompacted_one";
    let Some(python) = python_with(test, "duckdb, pyspark, pyarrow") else { return };
    if !support::fleet::java(test) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&python, dir.path());
    let compacted = dir.path().join("compacted");
    copy_dataset(&ds, &compacted);
    let before = parquet_files(&compacted);
    let out = compact(&compacted, None);
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    assert!(log.contains("switched to its parts") && log.contains("compacted in"), "{log}");
    let after = parquet_files(&compacted);
    // 26 tables of 2 builds: one part each, where there were 10 traces' files.
    assert!(after < before / 4, "{before} files before, {after} after");
    let expected = sections(&run_queries(&python, "duckdb", &ds, &[]));
    assert!(expected.iter().all(|(_, rows)| rows.len() > 1), "{expected:?}");
    let duckdb = sections(&run_queries(&python, "duckdb", &compacted, &[]));
    assert_eq!(duckdb, expected, "DuckDB on the compacted dataset");
    let spark = sections(&run_queries(&python, "spark", &compacted, &["--master", "local[1]"]));
    assert_eq!(spark, expected, "Spark on the compacted dataset");
    // The survey of the compacted dataset: no problem, the 10 traces.
    let (stderr, _) = survey_and_ready(&python, &compacted);
    assert!(stderr.contains("coldstart: 10 traces") && !stderr.contains("warning"), "{stderr}");
    // Compacting again finds nothing to do.
    let again = compact(&compacted, None);
    assert!(String::from_utf8_lossy(&again.stderr).contains("nothing to do"), "{again:?}");
}

#[test]
fn a_compaction_killed_at_any_step_leaves_a_dataset_that_answers_alike_and_the_next_one_finishes() {
    let test =
        "a_compaction_killed_at_any_step_leaves_a_dataset_that_answers_alike_and_the_next_one_finishes";
    let Some(python) = python_with(test, "duckdb, pyarrow") else { return };
    let dir = tempfile::tempdir().unwrap();
    let ds = dataset(&python, dir.path());
    let expected = sections(&run_queries(&python, "duckdb", &ds, &[]));
    let (_, ready) = survey_and_ready(&python, &ds);
    // A whole compaction's steps (parts written and folders switched): 2 per table and build.
    let steps = 2 * 2 * coldstart_dataset::TABLES.len();
    for kill_after in [1, 2, 3, steps / 2 - 1, steps / 2, steps - 2, steps - 1] {
        let copy = dir.path().join(format!("killed-{kill_after}"));
        copy_dataset(&ds, &copy);
        let out = compact(&copy, Some(kill_after));
        assert_eq!(out.status.code(), None, "killed after step {kill_after}: {out:?}");
        let (stderr, killed_ready) = survey_and_ready(&python, &copy);
        assert!(!stderr.contains("error"), "after step {kill_after}: {stderr}");
        assert_eq!(killed_ready, ready, "after step {kill_after}");
        assert_eq!(
            sections(&run_queries(&python, "duckdb", &copy, &[])),
            expected,
            "after step {kill_after}"
        );
        let finish = compact(&copy, None);
        assert!(finish.status.success(), "{finish:?}");
        let (stderr, _) = survey_and_ready(&python, &copy);
        assert!(!stderr.contains("warning") && !stderr.contains("error"), "{stderr}");
        assert_eq!(
            sections(&run_queries(&python, "duckdb", &copy, &[])),
            expected,
            "finished after step {kill_after}"
        );
        assert!(!copy.join(".compaction").exists());
        std::fs::remove_dir_all(&copy).unwrap();
    }
    // A real SIGKILL at moments spread over a compaction's run.
    for delay_ms in [30u64, 150, 400] {
        let copy = dir.path().join(format!("sigkill-{delay_ms}"));
        copy_dataset(&ds, &copy);
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_coldstart"))
            .args(["fleet", "compact", copy.to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        child.wait().unwrap();
        let (_, killed_ready) = survey_and_ready(&python, &copy);
        assert_eq!(killed_ready, ready, "killed after {delay_ms} ms");
        assert_eq!(
            sections(&run_queries(&python, "duckdb", &copy, &[])),
            expected,
            "killed after {delay_ms} ms"
        );
        assert!(compact(&copy, None).status.success());
        assert_eq!(
            sections(&run_queries(&python, "duckdb", &copy, &[])),
            expected,
            "finished after {delay_ms} ms"
        );
        std::fs::remove_dir_all(&copy).unwrap();
    }
}

#[test]
fn traces_exported_after_a_compaction_are_counted_once_before_and_after_the_next() {
    let test = "traces_exported_after_a_compaction_are_counted_once_before_and_after_the_next";
    let Some(python) = python_with(test, "duckdb, pyarrow") else { return };
    let fleet = Fleet::new();
    let ds = fleet.dataset.path();
    ok(compact(ds, None));
    // Two new recordings (the fixtures under other host names: other files, other ids).
    let mut paths = Vec::new();
    for (i, name) in ["python", "soffice"].iter().enumerate() {
        let mut trace = fleet.trace(name);
        trace.meta.host = format!("later-{i}");
        let path = fleet.traces.path().join(format!("later-{i}.coldstart"));
        trace.write(&path).unwrap();
        paths.push(path);
    }
    export(ds, "2", &paths);
    let (stderr, ready) = survey_and_ready(&python, ds);
    assert!(stderr.contains("coldstart: 4 traces"), "{stderr}");
    assert!(ready.lines().any(|l| l.starts_with("(all),(all),4,")), "{ready}");
    // Exporting them again, or a trace a part holds, adds nothing.
    let again = export(ds, "2", &[paths[0].clone(), fleet.traces.path().join("soffice.coldstart")]);
    assert!(again.contains("0 written, 2 already there"), "{again}");
    let before =
        sections(&run_queries(&python, "duckdb", ds, &["--param", "build_a=1", "--param", "build_b=2"]));
    let out = compact(ds, None);
    assert!(out.status.success(), "{out:?}");
    let (stderr, after_ready) = survey_and_ready(&python, ds);
    assert!(stderr.contains("coldstart: 4 traces"), "{stderr}");
    assert_eq!(after_ready, ready);
    let after =
        sections(&run_queries(&python, "duckdb", ds, &["--param", "build_a=1", "--param", "build_b=2"]));
    assert_eq!(after, before);
    // Only parts are left: the new traces were folded in.
    let exported_files =
        walk(ds).iter().filter(|p| p.file_name().unwrap().to_string_lossy().len() == 40).count();
    assert_eq!(exported_files, 0);
}

#[test]
fn bad_requests_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing");
    let out = compact(&missing, None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is not a coldstart dataset") && err.lines().count() == 1, "{err}");
    assert!(!missing.exists(), "a compaction of nothing made a folder");
    // A dataset of version 2 (files directly in the table folders).
    let old = dir.path().join("old");
    std::fs::create_dir_all(old.join("traces")).unwrap();
    std::fs::write(old.join("traces/0123456789abcdef0123456789abcdef.parquet"), b"PAR1").unwrap();
    let out = compact(&old, None);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("a dataset of version 2 or older"), "{out:?}");
    let out = coldstart(&["fleet", "compact"], None);
    assert_eq!(out.status.code(), Some(2));
    let help = ok(coldstart(&["fleet", "compact", "--help"], None));
    assert!(help.contains("coldstart fleet compact fleet/"), "{help}");
}
