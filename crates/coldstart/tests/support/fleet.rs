//! What the fleet tests share: the Python with DuckDB, pyarrow and PySpark, the two
//! fixtures exported as a dataset, synthetic datasets grown from it, and the shipped
//! questions run on either engine.
//!
//! DuckDB, pyarrow and PySpark come from the Python that `.ci/run` installs them into
//! (`/var/cache/coldstart-tests/fleet-venv`, or `$COLDSTART_TEST_PYTHON`): without it the
//! tests that need it fail under CI=true and skip elsewhere.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use coldstart_trace::Trace;

const VENV_PYTHON: &str = "/var/cache/coldstart-tests/fleet-venv/bin/python";

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A Python that imports every module of `modules`, or `None` (skip; a failure under CI).
pub fn python_with(test: &str, modules: &str) -> Option<String> {
    let python = std::env::var("COLDSTART_TEST_PYTHON").unwrap_or_else(|_| VENV_PYTHON.to_owned());
    let ok = std::process::Command::new(&python)
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(python)
    } else {
        coldstart_testkit::unavailable(test, &format!("{python} with {modules} (.ci/run installs it)"));
        None
    }
}

/// True when Java runs (Spark needs it); else skips `test` (a failure under CI).
pub fn java(test: &str) -> bool {
    let found = std::process::Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success());
    !coldstart_testkit::skip_without(found, test, "java")
}

pub fn unpack(name: &str, dir: &Path) -> PathBuf {
    let gz = repo().join("tests/fixtures").join(format!("{name}.coldstart.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()).read_to_end(&mut bytes).unwrap();
    let path = dir.join(format!("{name}.coldstart"));
    std::fs::write(&path, bytes).unwrap();
    path
}

pub fn coldstart(args: &[&str], python: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_coldstart"));
    cmd.args(args);
    if let Some(p) = python {
        cmd.env("COLDSTART_PYTHON", p);
    }
    cmd.output().unwrap()
}

pub fn ok(out: Output) -> String {
    assert!(out.status.success(), "failed: {}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

pub fn csv_rows(text: &str) -> Vec<Vec<String>> {
    text.lines().skip(1).map(|l| l.split(',').map(str::to_owned).collect()).collect()
}

/// Exports the trace files `paths` into `dataset` as build `build`, machine class `vm`.
pub fn export(dataset: &Path, build: &str, paths: &[PathBuf]) -> String {
    let mut args = vec!["export", "--format", "parquet", "-o", dataset.to_str().unwrap()];
    args.extend(["--build", build, "--machine-class", "vm"]);
    args.extend(paths.iter().map(|p| p.to_str().unwrap()));
    let out = coldstart(&args, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The two fixtures, exported as builds 1 (python) and 2 (soffice).
pub struct Fleet {
    pub traces: tempfile::TempDir,
    pub dataset: tempfile::TempDir,
}

impl Fleet {
    pub fn new() -> Fleet {
        let traces = tempfile::tempdir().unwrap();
        let dataset = tempfile::tempdir().unwrap();
        for (name, build) in [("python", "1"), ("soffice", "2")] {
            let path = unpack(name, traces.path());
            export(dataset.path(), build, &[path]);
        }
        Fleet { traces, dataset }
    }

    pub fn dir(&self) -> &str {
        self.dataset.path().to_str().unwrap()
    }

    pub fn trace(&self, name: &str) -> Trace {
        Trace::read(&self.traces.path().join(format!("{name}.coldstart"))).unwrap()
    }

    pub fn id(&self, name: &str) -> String {
        coldstart_dataset::trace_id_of_file(&self.traces.path().join(format!("{name}.coldstart"))).unwrap()
    }

    /// Rows of `sql` run by DuckDB on the dataset's views, as CSV lines without the header.
    pub fn duckdb(&self, python: &str, sql: &str) -> Vec<String> {
        let out = std::process::Command::new(python)
            .args([repo().join("fleet/run_query.py").to_str().unwrap(), "--dataset", self.dir(), "--csv"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().unwrap().write_all(sql.as_bytes())?;
                child.wait_with_output()
            })
            .unwrap();
        ok(out).lines().skip(1).map(str::to_owned).collect()
    }
}

/// Grows `out` by `n` synthetic traces (from index `first`) made from the dataset `source`.
pub fn synthesize(python: &str, source: &Path, out: &Path, first: usize, n: usize) {
    ok(std::process::Command::new(python)
        .arg(repo().join("fleet/synthesize.py"))
        .args(["--source", source.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .args(["--first", &first.to_string(), "--traces", &n.to_string()])
        .output()
        .unwrap());
}

/// The shipped questions' files.
pub fn queries() -> Vec<PathBuf> {
    ["ready", "common_files", "common_pages", "regression", "findings"]
        .iter()
        .map(|q| repo().join("fleet/queries").join(format!("{q}.sql")))
        .collect()
}

/// The arguments of `fleet/run_query.py` that run every shipped question on `dataset`
/// (builds b1 against b2, half the traces), as CSV.
pub fn query_args(engine: &str, dataset: &Path) -> Vec<String> {
    let mut args: Vec<String> = ["--engine", engine, "--dataset", dataset.to_str().unwrap(), "--csv"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    for p in ["min_share=0.5", "build_a=b1", "build_b=b2"] {
        args.extend(["--param".to_owned(), p.to_owned()]);
    }
    for q in queries() {
        args.extend(["--query".to_owned(), q.to_string_lossy().into_owned()]);
    }
    args
}

/// Every shipped question run on `dataset` by `engine`, in one session (`extra`: more
/// arguments of run_query.py): the sections of CSV, each headed `-- <query file>`.
pub fn run_queries(python: &str, engine: &str, dataset: &Path, extra: &[&str]) -> String {
    ok(std::process::Command::new(python)
        .arg(repo().join("fleet/run_query.py"))
        .args(query_args(engine, dataset))
        .args(extra)
        .output()
        .unwrap())
}

/// The sections of `run_queries`' output: (query file, rows sorted).
pub fn sections(text: &str) -> Vec<(String, Vec<String>)> {
    text.split("-- ")
        .filter(|s| !s.is_empty())
        .map(|s| {
            let mut lines = s.lines();
            let name = lines.next().unwrap().to_owned();
            let mut rows: Vec<String> = lines.map(str::to_owned).collect();
            rows.sort();
            (name, rows)
        })
        .collect()
}

/// A copy of the dataset at `from` (hard links would share the files a compaction keeps).
pub fn copy_dataset(from: &Path, to: &Path) {
    let status = std::process::Command::new("cp").arg("-a").arg(from).arg(to).status().unwrap();
    assert!(status.success());
}
