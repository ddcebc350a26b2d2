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

/// The synthetic trace with 10 CPU stack samples of its first process in `parse` under `main`.
fn sampled_trace_file(dir: &std::path::Path) -> (std::path::PathBuf, i32) {
    use coldstart_trace::{Frame, Stack, StackSample};
    let path = dir.join("sampled.coldstart");
    let mut trace: Trace = coldstart_analyze::synthetic::start_trace(2_000, 7);
    let pid = trace.processes[0].pid;
    let frame = |id, symbol: &str| Frame {
        id,
        address: 0x1000 * u64::from(id),
        symbol: Some(symbol.into()),
        ..Default::default()
    };
    trace.frames = vec![frame(1, "main"), frame(2, "parse")];
    trace.stacks =
        vec![Stack { id: 1, parent_id: None, frame_id: 1 }, Stack { id: 2, parent_id: Some(1), frame_id: 2 }];
    trace.stack_samples = (0..10)
        .map(|i| StackSample { t_ns: 1_000_000 * i, pid, tid: pid, cpu: 0, stack_id: Some(2) })
        .collect();
    trace.write(&path).unwrap();
    (path, pid)
}

#[test]
fn folded_export_and_flame_graph_of_the_cpu_samples() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, pid) = sampled_trace_file(dir.path());
    let comm = Trace::read(&trace).unwrap().processes[0].comm.clone();
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "folded", "--pid", &pid.to_string()])
        .assert()
        .success()
        .stdout(format!("{comm};main;parse 10\n"));
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "folded", "--pid", "1"])
        .assert()
        .success()
        .stdout("");
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "folded", "--phase", "999"])
        .assert()
        .code(2)
        .stderr(contains("--phase 999 names none"));
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "chrome", "--pid", "1"])
        .assert()
        .code(2)
        .stderr(contains("apply to --format folded only"));
    let on_path = coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "folded", "--critical-path"])
        .output()
        .unwrap();
    assert!(on_path.status.success(), "{}", String::from_utf8_lossy(&on_path.stderr));
    let counted = |text: &[u8]| -> u64 {
        String::from_utf8_lossy(text).lines().filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok()).sum()
    };
    assert!(counted(&on_path.stdout) <= 10, "a subset of the 10 samples");
    coldstart()
        .arg("export")
        .arg(&trace)
        .args(["--format", "chrome", "--critical-path"])
        .assert()
        .code(2)
        .stderr(contains("apply to --format folded only"));
    let svg = dir.path().join("flame.svg");
    coldstart().arg("report").arg(&trace).args(["--format", "flamegraph", "-o"]).arg(&svg).assert().success();
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<title>parse (10 samples, 100.00%)</title>"));
    coldstart()
        .arg("report")
        .arg(trace_file(dir.path()))
        .args(["--format", "flamegraph"])
        .assert()
        .code(2)
        .stderr(contains("no CPU samples with stacks"));
}
