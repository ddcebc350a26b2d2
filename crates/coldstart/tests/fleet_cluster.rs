//! The shipped questions on a Spark standalone cluster, as a fleet would run them: a master
//! and two workers started on this machine (`fleet/spark_cluster.py`, bound to 127.0.0.1),
//! the questions submitted to `spark://127.0.0.1:PORT` on a compacted synthetic dataset,
//! the same rows as DuckDB on the uncompacted one; the master and the workers stopped
//! after, nothing of them left running.

use std::process::Command;

mod support;
use support::fleet::{
    Fleet, copy_dataset, ok, python_with, query_args, repo, run_queries, sections, synthesize,
};

/// Processes whose command line names `marker` (the cluster's, or its driver's).
fn running(marker: &str) -> Vec<String> {
    let out = Command::new("pgrep").args(["-a", "-f", marker]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

#[test]
fn questions_on_a_standalone_cluster_of_two_workers_give_duckdbs_rows_and_leave_nothing_running() {
    let test = "questions_on_a_standalone_cluster_of_two_workers_give_duckdbs_rows_and_leave_nothing_running";
    let Some(python) = python_with(test, "duckdb, pyspark, pyarrow") else { return };
    if !support::fleet::java(test) {
        return;
    }
    let fleet = Fleet::new();
    let dir = tempfile::tempdir().unwrap();
    let ds = dir.path().join("uncompacted");
    synthesize(&python, fleet.dataset.path(), &ds, 0, 8);
    let compacted = dir.path().join("compacted");
    copy_dataset(&ds, &compacted);
    ok(support::fleet::coldstart(&["fleet", "compact", compacted.to_str().unwrap()], None));
    let expected = sections(&run_queries(&python, "duckdb", &ds, &[]));

    // The cluster's processes are found by the test's folder, which their command lines
    // name: the master's and workers' (their work folder, under TMPDIR), the executors' and
    // the driver's (a Java option). spark_cluster.py stops them, also on failure.
    let marker = dir.path().to_string_lossy().into_owned();
    let java_option = format!("-Dcoldstart.test={marker}");
    let mut cluster = Command::new(&python);
    cluster
        .arg(repo().join("fleet/spark_cluster.py"))
        .args(["--workers", "2", "--cores", "1", "--memory", "1g", "--"])
        .arg(&python)
        .arg(repo().join("fleet/run_query.py"))
        .args(query_args("spark", &compacted))
        .args([
            "--master",
            "{master}",
            "--conf",
            "spark.driver.host=127.0.0.1",
            "--conf",
            "spark.executor.memory=768m",
        ])
        .args(["--conf", &format!("spark.executor.extraJavaOptions={java_option}")])
        .args(["--conf", &format!("spark.driver.extraJavaOptions={java_option}")])
        .env("TMPDIR", dir.path());
    let started = std::time::Instant::now();
    let out = cluster.output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{log}");
    assert!(log.contains("spark_cluster: spark://127.0.0.1:") && log.contains("with 2 workers"), "{log}");
    let spark = sections(&String::from_utf8(out.stdout).unwrap());
    assert_eq!(spark.len(), expected.len());
    assert_eq!(spark, expected, "the cluster's rows differ from DuckDB's");
    assert!(started.elapsed().as_secs() < 300, "the cluster took {:?}", started.elapsed());
    let left = running(&marker);
    assert!(left.is_empty(), "left running: {left:?}");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("coldstart-spark-"))
        .collect();
    assert!(leftovers.is_empty(), "the cluster's folder was not removed: {leftovers:?}");
}
