//! Inputs that the readers refuse, given to the commands that read them: each answers
//! with exit status 2 and one line on stderr, never a panic. The inputs are the fuzz
//! targets' saved ones (crates/fuzz/corpus) and damaged copies of real files.

mod support;
use support::coldstart;

use std::io::Read;
use std::path::{Path, PathBuf};

use coldstart_trace::Trace;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

/// The checked-in inputs of a fuzz target, uncompressed.
fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = repo().join("crates/fuzz/corpus").join(target);
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let path = e.unwrap().path();
            let bytes = std::fs::read(&path).unwrap();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let bytes = if name.ends_with(".gz") { gunzip(&bytes) } else { bytes };
            (name, bytes)
        })
        .collect();
    files.sort();
    files
}

/// Runs coldstart with `args` then `input`, and checks it refused the input as it should.
fn refuses(args: &[&str], input: &Path) -> String {
    let out = coldstart().args(args).arg(input).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let what = format!("coldstart {} {}", args.join(" "), input.display());
    assert_eq!(out.status.code(), Some(2), "{what}: status {:?}, stderr {stderr}", out.status);
    assert!(!stderr.contains("panicked"), "{what} panicked: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{what}: not one line: {stderr}");
    stderr
}

/// A real trace with one time set past the limit no recording reaches.
fn trace_out_of_range(dir: &Path) -> PathBuf {
    let fixture = dir.join("python.coldstart");
    let bytes = std::fs::read(repo().join("tests/fixtures/python.coldstart.gz")).unwrap();
    std::fs::write(&fixture, gunzip(&bytes)).unwrap();
    let mut trace = Trace::read(&fixture).unwrap();
    trace.sched[3].end_ns = i64::MAX / 2;
    let path = dir.join("shifted.coldstart");
    trace.write(&path).unwrap();
    path
}

#[test]
fn report_and_doctor_refuse_bad_traces_with_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let mut refused = vec![trace_out_of_range(dir.path())];
    let garbage = dir.path().join("garbage.coldstart");
    std::fs::write(&garbage, b"SQLite format 3\0 and then nothing a database holds").unwrap();
    refused.push(garbage);
    for (name, bytes) in corpus("trace") {
        let path = dir.path().join(&name);
        std::fs::write(&path, bytes).unwrap();
        if Trace::read(&path).is_err() {
            refused.push(path);
        }
    }
    assert!(refused.len() > 2, "no corpus trace is refused any more: choose others");
    for trace in &refused {
        refuses(&["report"], trace);
        refuses(&["doctor"], trace);
    }
    let line = refuses(&["report"], &refused[0]);
    assert!(line.contains("table sched, column end_ns: 4611686018427387903"), "{line}");
}

#[test]
fn prefetch_show_refuses_bad_plans_with_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let (_, plan) = corpus("plan").into_iter().next().unwrap();
    let plan: serde_json::Value = serde_json::from_slice(&plan).unwrap();
    let mut damaged = Vec::new();
    let mut negative = plan.clone();
    negative["files"][0]["ranges"][0]["length"] = serde_json::json!(-1);
    damaged.push(serde_json::to_vec(&negative).unwrap());
    let mut newer = plan.clone();
    newer["version"] = serde_json::json!(u32::MAX);
    damaged.push(serde_json::to_vec(&newer).unwrap());
    let whole = serde_json::to_vec(&plan).unwrap();
    damaged.push(whole[..whole.len() / 2].to_vec());
    for (i, bytes) in damaged.iter().enumerate() {
        let path = dir.path().join(format!("damaged-{i}.plan"));
        std::fs::write(&path, bytes).unwrap();
        refuses(&["prefetch", "show"], &path);
    }
}

#[test]
fn import_bootchart2_refuses_bad_logs_with_one_line_and_status_2() {
    let dir = tempfile::tempdir().unwrap();
    let example = repo().join("crates/import/tests/data/example1");
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    for name in ["header", "proc_diskstats.log", "proc_ps.log"] {
        std::fs::copy(example.join(name), logs.join(name)).unwrap();
    }
    std::fs::write(logs.join("proc_stat.log"), "not a time\ncpu 1 2 3\n\n").unwrap();
    let no_archive = dir.path().join("boot.tgz");
    std::fs::write(&no_archive, b"\x1f\x8b\x08 not a gzip stream").unwrap();
    let out = dir.path().join("out.coldstart");
    for input in [&logs, &no_archive] {
        let args = ["import", "bootchart2", "-o", out.to_str().unwrap()];
        refuses(&args, input);
        assert!(!out.exists(), "a refused import wrote {}", out.display());
    }
}
