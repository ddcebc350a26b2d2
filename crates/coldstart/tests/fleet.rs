//! The Parquet dataset and `coldstart fleet` through the binary, on the real fixtures:
//! exported, read back with DuckDB (row counts and values equal the traces' own tables),
//! queried by every shipped query, refused when broken, and the same query answered alike
//! by DuckDB and Spark (local mode).
//!
//! DuckDB, pyarrow and PySpark come from the Python that `.ci/run` installs them into
//! (`/var/cache/coldstart-tests/fleet-venv`, or `$COLDSTART_TEST_PYTHON`): without it these
//! tests fail under CI=true and skip elsewhere.

use std::collections::{BTreeMap, BTreeSet};

use assert_cmd::Command;
use coldstart_trace::Trace;

mod support;
use support::fleet::{Fleet, coldstart, csv_rows, ok, python_with, queries, run_queries, sections, unpack};

#[test]
fn export_then_duckdb_reads_the_traces_own_rows_and_values() {
    let Some(python) = python_with("export_then_duckdb_reads_the_traces_own_rows_and_values", "duckdb")
    else {
        return;
    };
    let fleet = Fleet::new();
    for name in ["python", "soffice"] {
        let trace = fleet.trace(name);
        let id = fleet.id(name);
        let count = |table: &str| -> usize {
            let rows =
                fleet.duckdb(&python, &format!("SELECT COUNT(*) FROM {table} WHERE trace_id = '{id}'"));
            rows[0].parse().unwrap()
        };
        assert_eq!(count("process"), trace.processes.len(), "{name}");
        assert_eq!(count("thread"), trace.threads.len(), "{name}");
        assert_eq!(count("file"), trace.files.len(), "{name}");
        assert_eq!(count("page_fill"), trace.page_fills.len(), "{name}");
        assert_eq!(count("page_access"), trace.page_accesses.len(), "{name}");
        assert_eq!(count("block_io"), trace.block_ios.len(), "{name}");
        assert_eq!(count("sched"), trace.sched.len(), "{name}");
        assert_eq!(count("mark"), trace.marks.len(), "{name}");
        assert_eq!(count("traces"), 1, "{name}");
        let pages: u64 = trace.page_fills.iter().map(|f| u64::from(f.pages)).sum();
        let sum = fleet.duckdb(&python, &format!("SELECT SUM(pages) FROM page_fill WHERE trace_id = '{id}'"));
        assert_eq!(sum, [pages.to_string()], "{name}");
        let root = trace.meta.root_pid.unwrap();
        let comm = &trace.processes.iter().find(|p| p.pid == root).unwrap().comm;
        let got = fleet
            .duckdb(&python, &format!("SELECT comm FROM process WHERE trace_id = '{id}' AND pid = {root}"));
        assert_eq!(got, [comm.as_str()], "{name}");
        let largest = trace.files.iter().filter(|f| f.path.is_some()).max_by_key(|f| (f.size, f.id)).unwrap();
        let got = fleet.duckdb(
            &python,
            &format!("SELECT path, size FROM file WHERE trace_id = '{id}' AND file_id = {}", largest.id),
        );
        assert_eq!(got, [format!("{},{}", largest.path.as_ref().unwrap(), largest.size.unwrap())], "{name}");
        let analysis = coldstart_analyze::analyze(&trace);
        let ready = analysis.overview.ready.as_ref().unwrap().time_to_ready_ns;
        let got = fleet
            .duckdb(&python, &format!("SELECT time_to_ready_ns, build FROM traces WHERE trace_id = '{id}'"));
        let build = if name == "python" { "1" } else { "2" };
        assert_eq!(got, [format!("{ready},{build}")], "{name}");
        let segments = analysis.critical_path.as_ref().map_or(0, |p| p.segments.len());
        assert_eq!(count("critical_path"), segments, "{name}");
    }
}

#[test]
fn shipped_queries_answer_from_the_fixtures() {
    let Some(python) = python_with("shipped_queries_answer_from_the_fixtures", "duckdb") else {
        return;
    };
    let fleet = Fleet::new();
    let ready = ok(coldstart(&["fleet", "ready", fleet.dir(), "--csv"], Some(&python)));
    let rows = csv_rows(&ready);
    let ms = |name: &str| {
        let t = fleet.trace(name);
        let ns = coldstart_analyze::analyze(&t).overview.ready.unwrap().time_to_ready_ns;
        format!("{}", (ns as f64 / 1e6 * 10.0).round() / 10.0)
    };
    // build 1 on vm is the python trace alone: every percentile is its time to ready.
    let b1 = rows.iter().find(|r| r[0] == "1" && r[1] == "vm").unwrap();
    let ready_ms = ms("python");
    assert_eq!(&b1[2..], ["1".to_owned(), ready_ms.clone(), ready_ms.clone(), ready_ms.clone(), ready_ms]);
    let all = rows.last().unwrap();
    assert_eq!((all[0].as_str(), all[1].as_str(), all[2].as_str()), ("(all)", "(all)", "2"), "{ready}");

    // Files read by both traces: the intersection of their page-filled paths.
    let read = |name: &str| -> BTreeSet<String> {
        let t = fleet.trace(name);
        let ids: BTreeSet<u32> = t.page_fills.iter().map(|f| f.file_id).collect();
        t.files.iter().filter(|f| ids.contains(&f.id)).filter_map(|f| f.path.clone()).collect()
    };
    let both: BTreeSet<String> = read("python").intersection(&read("soffice")).cloned().collect();
    assert!(!both.is_empty());
    let common =
        ok(coldstart(&["fleet", "common-files", fleet.dir(), "--min-share", "1", "--csv"], Some(&python)));
    let got: BTreeSet<String> = csv_rows(&common).into_iter().map(|r| r[0].clone()).collect();
    assert_eq!(got, both);
    let half =
        ok(coldstart(&["fleet", "common-files", fleet.dir(), "--min-share", "0.5", "--csv"], Some(&python)));
    let union: BTreeSet<String> = read("python").union(&read("soffice")).cloned().collect();
    assert_eq!(csv_rows(&half).len(), union.len());

    // Pages read by both, counted per page from the traces' fills.
    let pages = |name: &str| -> BTreeSet<(String, u64)> {
        let t = fleet.trace(name);
        let paths: BTreeMap<u32, String> =
            t.files.iter().filter_map(|f| Some((f.id, f.path.clone()?))).collect();
        t.page_fills
            .iter()
            .filter_map(|f| Some((paths.get(&f.file_id)?, f)))
            .flat_map(|(p, f)| (f.index..f.index + u64::from(f.pages)).map(move |i| (p.clone(), i)))
            .collect()
    };
    let shared = pages("python").intersection(&pages("soffice")).count() as u64;
    let runs =
        ok(coldstart(&["fleet", "common-pages", fleet.dir(), "--min-share", "1", "--csv"], Some(&python)));
    let got: u64 = csv_rows(&runs).iter().map(|r| r[2].parse::<u64>().unwrap()).sum();
    assert_eq!(got, shared);

    let findings = ok(coldstart(&["fleet", "findings", fleet.dir(), "--csv"], Some(&python)));
    let kinds = |name: &str| -> BTreeSet<String> {
        let t = fleet.trace(name);
        let a = coldstart_analyze::analyze(&t);
        let d = coldstart_analyze::doctor::diagnose(&t, &a, &Default::default(), &[]);
        d.findings
            .iter()
            .map(|f| serde_json::to_value(f.kind).unwrap().as_str().unwrap().to_owned())
            .collect()
    };
    let got: BTreeSet<String> =
        csv_rows(&findings).into_iter().filter(|r| r[0] == "2").map(|r| r[1].clone()).collect();
    assert_eq!(got, kinds("soffice"));

    let regression = coldstart(&["fleet", "regression", fleet.dir()], Some(&python));
    assert_eq!(regression.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&regression.stderr).contains("give --build-a and --build-b"));
    let regression = ok(coldstart(
        &["fleet", "regression", fleet.dir(), "--build-a", "1", "--build-b", "2", "--csv"],
        Some(&python),
    ));
    let rows = csv_rows(&regression);
    assert!(rows.iter().any(|r| r[0] == "process" && r[1] == "soffice.bin"), "{regression}");
    assert!(rows.iter().all(|r| r[5].parse::<f64>().unwrap() > 0.0), "{regression}");
}

#[test]
fn a_broken_dataset_is_refused_with_one_line_per_defect() {
    let fleet = Fleet::new();
    let id = fleet.id("python");
    let process = fleet.dataset.path().join("process/build=1");
    std::fs::copy(process.join(format!("{id}.parquet")), process.join("again.parquet")).unwrap();
    let fill = fleet.dataset.path().join("page_fill/build=1").join(format!("{id}.parquet"));
    std::fs::OpenOptions::new().write(true).open(&fill).unwrap().set_len(100).unwrap();
    let out = coldstart(&["fleet", "ready", fleet.dir()], Some("/nonexistent/python"));
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("error: page_fill/build=1/{id}.parquet: unreadable, truncated or not Parquet")),
        "{err}"
    );
    assert!(err.contains(&format!("trace {id} is held by 2 files of process")), "{err}");
    assert!(err.contains("the dataset has 2 errors: nothing was queried"), "{err}");
}

#[test]
fn exporting_a_trace_twice_adds_nothing() {
    let fleet = Fleet::new();
    let path = fleet.traces.path().join("python.coldstart");
    let out = coldstart(&["export", "--format", "parquet", "-o", fleet.dir(), path.to_str().unwrap()], None);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    assert!(err.contains("is in the dataset already; skipped"), "{err}");
    assert!(err.contains("0 written, 1 already there, 0 failed"), "{err}");
    let files: usize = ["build=1", "build=2"]
        .iter()
        .map(|b| std::fs::read_dir(fleet.dataset.path().join("traces").join(b)).unwrap().count())
        .sum();
    assert_eq!(files, 2);
}

#[test]
fn an_anonymized_export_names_no_user() {
    let traces = tempfile::tempdir().unwrap();
    let dataset = tempfile::tempdir().unwrap();
    let path = unpack("soffice", traces.path());
    let mut expected = Trace::read(&path).unwrap();
    coldstart_trace::anonymize(&mut expected);
    ok(coldstart(
        &[
            "export",
            "--format",
            "parquet",
            "--anonymize",
            "-o",
            dataset.path().to_str().unwrap(),
            path.to_str().unwrap(),
        ],
        None,
    ));
    // The dataset holds the anonymised trace's paths, and no path of the original that anonymize changes.
    let id = coldstart_dataset::trace_id_of_file(&path).unwrap();
    let bytes = std::fs::read(coldstart_dataset::table_file(dataset.path(), "file", None, &id)).unwrap();
    let original = Trace::read(&path).unwrap();
    for (before, after) in original.files.iter().zip(&expected.files) {
        if let (Some(b), Some(a)) = (&before.path, &after.path)
            && a != b
        {
            assert!(!bytes.windows(b.len()).any(|w| w == b.as_bytes()), "{b} left in the dataset");
        }
    }
    let traces_file =
        std::fs::read(coldstart_dataset::table_file(dataset.path(), "traces", None, &id)).unwrap();
    if original.meta.host != expected.meta.host {
        let host = original.meta.host.as_bytes();
        assert!(!traces_file.windows(host.len()).any(|w| w == host), "host name left in traces");
    }
}

#[test]
fn a_missing_duckdb_package_is_one_line_and_status_2() {
    let fleet = Fleet::new();
    let shadow = tempfile::tempdir().unwrap();
    std::fs::write(shadow.path().join("duckdb.py"), "raise ImportError('no duckdb here')\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["fleet", "ready", fleet.dir()])
        .env("COLDSTART_PYTHON", "python3")
        .env("PYTHONPATH", shadow.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    let last: Vec<&str> = err.lines().filter(|l| l.contains("DuckDB")).collect();
    assert_eq!(last.len(), 1, "{err}");
    assert!(
        last[0].contains(
            "the DuckDB Python package is not installed for python3: `python3 -m pip install duckdb`"
        ),
        "{err}"
    );
}

#[test]
fn duckdb_and_spark_give_the_same_rows_for_every_shipped_query() {
    let test = "duckdb_and_spark_give_the_same_rows_for_every_shipped_query";
    let Some(python) = python_with(test, "duckdb, pyspark, pyarrow") else {
        return;
    };
    if coldstart_testkit::skip_without(
        std::process::Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success()),
        test,
        "java",
    ) {
        return;
    }
    let fleet = Fleet::new();
    let small = tempfile::tempdir().unwrap();
    support::fleet::synthesize(&python, fleet.dataset.path(), small.path(), 0, 8);
    let duckdb = run_queries(&python, "duckdb", small.path(), &[]);
    let spark = run_queries(&python, "spark", small.path(), &["--master", "local[1]"]);
    let (d, s) = (sections(&duckdb), sections(&spark));
    assert_eq!(d.len(), queries().len());
    for ((name, rows), (_, spark_rows)) in d.iter().zip(&s) {
        assert!(rows.len() > 1, "{name} gave no rows on the synthetic dataset:\n{duckdb}");
        assert_eq!(rows, spark_rows, "{name}: DuckDB and Spark differ");
    }
    // The synthetic dataset holds 8 traces: the fleet row of `ready` counts them all.
    assert!(duckdb.lines().any(|l| l.starts_with("(all),(all),8,")), "{duckdb}");
}
