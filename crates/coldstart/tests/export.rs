//! `coldstart export` and `coldstart report --format svg` through the command line:
//! the files they write, and clear errors (exit status 2) for options that do not fit.

mod support;
use support::coldstart;

use coldstart_trace::Trace;
use predicates::str::contains;

fn trace_file(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("synthetic.coldstart");
    let trace: Trace = coldstart_analyze::synthetic::start_trace(2_000, 7);
    trace.write(&path).unwrap();
    path
}

#[test]
fn chrome_export_writes_trace_event_json() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path());
    let out = dir.path().join("trace.json");
    coldstart().arg("export").arg(&trace).args(["--format", "chrome", "-o"]).arg(&out).assert().success();
    let json: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    assert!(events.iter().any(|e| e["ph"] == "X" && e["cat"] == "sched"));
    assert!(
        events.iter().any(|e| e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"] == "proc0")
    );
}

#[test]
fn csv_export_writes_every_table_into_a_folder_or_one_table() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path());
    let folder = dir.path().join("tables");
    coldstart().arg("export").arg(&trace).args(["--format", "csv", "-o"]).arg(&folder).assert().success();
    for name in ["page_fills.csv", "reads.csv", "block_requests.csv"] {
        let text = std::fs::read_to_string(folder.join(name)).unwrap();
        assert!(text.lines().count() > 10, "{name} has rows");
    }
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv", "--table", "reads"])
        .assert()
        .success()
        .stdout(predicates::str::starts_with(
            "t_ns,end_ns,pid,tid,comm,file_id,path,first_page,pages,bytes,seek\r\n",
        ));
}

#[test]
fn options_that_do_not_fit_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path());
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "csv"])
        .assert()
        .code(2)
        .stderr(contains("-o DIR"));
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "chrome", "--table", "fills"])
        .assert()
        .code(2)
        .stderr(contains("--table applies to --format csv only"));
}

#[test]
fn report_draws_the_svg_chart() {
    let dir = tempfile::tempdir().unwrap();
    let trace = trace_file(dir.path());
    let out = dir.path().join("chart.svg");
    coldstart().arg("report").arg(&trace).args(["--format", "svg", "-o"]).arg(&out).assert().success();
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.starts_with("<?xml"));
    assert!(svg.contains(&format!("coldstart {}", env!("CARGO_PKG_VERSION"))));
    assert!(svg.trim_end().ends_with("</svg>"));
}
