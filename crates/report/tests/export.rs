//! The exports: Trace Event Format JSON checked against the format's rules (every
//! event has ph/ts/pid/tid, durations are not negative, every pid and tid used is
//! named by metadata, slices of one thread nest) and against the trace's contents;
//! CSV tables checked field by field, quoting included; CPU stack samples as instant
//! events, collapsed stacks, the flame graph and the text report's CPU section.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use coldstart_analyze::analyze;
use coldstart_report::export::{chrome, csv};
use coldstart_trace::*;
use serde_json::Value;

mod common;

use common::{MS, fixture};

fn chrome_json(trace: &Trace) -> Value {
    let mut out = Vec::new();
    chrome::write(trace, &analyze(trace), &mut out).expect("export");
    serde_json::from_slice(&out).expect("the export is JSON")
}

fn events(v: &Value) -> &Vec<Value> {
    v["traceEvents"].as_array().expect("a traceEvents array")
}

/// The rules of the Trace Event Format that viewers rely on; returns the events by phase.
fn check_structure(v: &Value) -> BTreeMap<String, usize> {
    let mut phases: BTreeMap<String, usize> = BTreeMap::new();
    let mut process_names = BTreeSet::new();
    let mut thread_names = BTreeSet::new();
    let mut used = BTreeSet::new();
    let mut slices: BTreeMap<(i64, i64), Vec<(f64, f64)>> = BTreeMap::new();
    for e in events(v) {
        let ph = e["ph"].as_str().expect("every event has ph");
        let ts = e["ts"].as_f64().expect("every event has a numeric ts");
        let pid = e["pid"].as_i64().expect("every event has a numeric pid");
        let tid = e["tid"].as_i64().expect("every event has a numeric tid");
        assert!(e["name"].is_string(), "every event has a name: {e}");
        assert!(ts >= 0.0, "{e}");
        *phases.entry(ph.to_owned()).or_default() += 1;
        match ph {
            "M" => match e["name"].as_str().unwrap() {
                "process_name" => {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    process_names.insert(pid);
                }
                "thread_name" => {
                    assert!(e["args"]["name"].is_string(), "{e}");
                    thread_names.insert((pid, tid));
                }
                "process_sort_index" => assert!(e["args"]["sort_index"].is_i64(), "{e}"),
                other => panic!("unexpected metadata {other}"),
            },
            "X" => {
                let dur = e["dur"].as_f64().expect("X events have dur");
                assert!(dur >= 0.0, "{e}");
                slices.entry((pid, tid)).or_default().push((ts, ts + dur));
                used.insert((pid, tid));
            }
            "i" => {
                assert!(["g", "p", "t"].contains(&e["s"].as_str().expect("instant scope")), "{e}");
                used.insert((pid, tid));
            }
            "C" => {
                let args = e["args"].as_object().expect("counters have args");
                assert!(!args.is_empty() && args.values().all(Value::is_number), "{e}");
                used.insert((pid, tid));
            }
            other => panic!("unexpected phase {other}"),
        }
    }
    for (pid, tid) in &used {
        assert!(process_names.contains(pid), "pid {pid} has no process_name");
        assert!(thread_names.contains(&(*pid, *tid)), "pid {pid} tid {tid} has no thread_name");
    }
    // Slices of one thread either follow each other or nest.
    for (thread, mut list) in slices {
        list.sort_by(|a, b| a.0.total_cmp(&b.0).then(b.1.total_cmp(&a.1)));
        let mut open: Vec<f64> = Vec::new();
        for (start, end) in list {
            while open.last().is_some_and(|&e| e <= start + 1e-6) {
                open.pop();
            }
            if let Some(&outer) = open.last() {
                assert!(end <= outer + 1e-6, "slices of {thread:?} overlap without nesting at {start}");
            }
            open.push(end);
        }
    }
    phases
}

fn find(v: &Value, f: impl Fn(&Value) -> bool) -> Vec<&Value> {
    events(v).iter().filter(|e| f(e)).collect()
}

#[test]
fn chrome_export_follows_the_trace_event_format() {
    let t = fixture();
    let v = chrome_json(&t);
    let phases = check_structure(&v);
    assert_eq!(v["displayTimeUnit"], "ms");
    assert_eq!(v["otherData"]["command"], "app --headless");
    // Scheduler intervals: one slice each, in microseconds; app runs from 2 to 8 ms.
    let sched = find(&v, |e| e["cat"] == "sched");
    assert_eq!(sched.len(), t.sched.len());
    let first = find(&v, |e| e["cat"] == "sched" && e["tid"] == 100 && e["ts"] == 2000.0);
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["name"], "running");
    assert_eq!(first[0]["dur"], 6000.0);
    assert_eq!(find(&v, |e| e["cat"] == "sched" && e["name"] == "I/O wait").len(), 4);
    // Page fills: thread-scoped instants with the file's path.
    let fills = find(&v, |e| e["cat"] == "page_cache");
    assert_eq!(fills.len(), t.page_fills.len());
    let data = find(&v, |e| e["cat"] == "page_cache" && e["pid"] == 200 && e["ts"] == 40_000.0);
    assert_eq!(data[0]["name"], "fill data.db");
    assert_eq!(data[0]["args"]["file"], "/usr/share/app/data.db");
    assert_eq!(data[0]["args"]["bytes"], 16 * 4096);
    assert_eq!(data[0]["args"]["origin"], "read");
    // Block requests: slices of the disk's track, 2 ms each.
    let blocks = find(&v, |e| e["cat"] == "block");
    assert_eq!(blocks.len(), 4);
    assert!(blocks.iter().all(|b| b["pid"] == chrome::DISK_PID && b["dur"] == 2000.0));
    // Phases and the critical path on the analysis track; marks as global instants.
    let a = analyze(&t);
    assert_eq!(find(&v, |e| e["cat"] == "phase").len(), a.phases.len());
    let path = find(&v, |e| e["cat"] == "critical_path");
    assert_eq!(path.len(), a.critical_path.as_ref().unwrap().segments.len());
    let marks = find(&v, |e| e["ph"] == "i" && e["s"] == "g");
    let names: Vec<&str> = marks.iter().map(|m| m["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["ready", "ready (mark:ready)"]);
    assert!(phases["M"] > 0);
    // Tracks are named after the processes, threads and disks.
    let named = |pid: i64, tid: i64, kind: &str| {
        find(&v, |e| e["ph"] == "M" && e["name"] == kind && e["pid"] == pid && e["tid"] == tid)
            .first()
            .map(|e| e["args"]["name"].as_str().unwrap().to_owned())
    };
    assert_eq!(named(200, 0, "process_name").as_deref(), Some("helper"));
    assert_eq!(named(200, 200, "thread_name").as_deref(), Some("helper"));
    assert_eq!(named(chrome::DISK_PID, 0, "process_name").as_deref(), Some("disk vda (254:0)"));
    assert_eq!(named(chrome::ANALYSIS_PID, 2, "thread_name").as_deref(), Some("critical path"));
}

#[test]
fn requests_in_flight_together_go_to_separate_queue_slots() {
    let mut t = fixture();
    for r in &mut t.block_ios {
        // Each request now lasts 12 ms: 3-15, 9-21, 19-31 and 25-37 ms.
        r.complete_ns = r.issue_ns.map(|i| i + 12 * MS);
    }
    let v = chrome_json(&t);
    check_structure(&v);
    let slots: Vec<i64> =
        find(&v, |e| e["cat"] == "block").iter().map(|e| e["tid"].as_i64().unwrap()).collect();
    assert_eq!(slots, [1, 2, 1, 2]);
    let counts: Vec<i64> = find(&v, |e| e["name"] == "requests in flight")
        .iter()
        .map(|e| e["args"]["requests"].as_i64().unwrap())
        .collect();
    assert_eq!(counts, [1, 2, 1, 2, 1, 2, 1, 0]);
}

#[test]
fn chrome_export_of_a_bootchart2_import_uses_the_process_samples() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data/example1");
    let t = coldstart_import::bootchart2::import(&dir).unwrap();
    let v = chrome_json(&t);
    let phases = check_structure(&v);
    let samples = find(&v, |e| e["cat"] == "sample");
    assert_eq!(samples.len(), t.process_samples.len());
    let d = t.process_samples.iter().filter(|s| s.state == 'D').count();
    assert_eq!(samples.iter().filter(|e| e["name"] == "I/O wait").count(), d);
    assert!(phases["C"] >= t.cpu_samples.len() + t.process_samples.len());
    let processes: BTreeSet<i64> = find(&v, |e| e["ph"] == "M" && e["name"] == "process_name")
        .iter()
        .map(|e| e["pid"].as_i64().unwrap())
        .collect();
    assert!(processes.len() > 800, "{}", processes.len());
}

#[test]
fn chrome_export_is_deterministic_and_keeps_hostile_names_as_strings() {
    let mut t = fixture();
    t.processes[1].comm = "<img src=x onerror=alert(1)>\"\\".into();
    t.threads[1].comm = t.processes[1].comm.clone();
    let mut a = Vec::new();
    let mut b = Vec::new();
    chrome::write(&t, &analyze(&t), &mut a).unwrap();
    chrome::write(&t, &analyze(&t), &mut b).unwrap();
    assert_eq!(a, b);
    let v: Value = serde_json::from_slice(&a).unwrap();
    assert!(
        find(&v, |e| e["name"] == "process_name" && e["args"]["name"] == "<img src=x onerror=alert(1)>\"\\")
            .len()
            == 1
    );
}

fn csv_rows(table: csv::Table, trace: &Trace) -> (String, Vec<Vec<String>>) {
    let mut out = Vec::new();
    csv::write(table, trace, &analyze(trace), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut reader = ::csv::ReaderBuilder::new().has_headers(false).from_reader(text.as_bytes());
    let rows = reader.records().map(|r| r.unwrap().iter().map(str::to_owned).collect()).collect();
    (text, rows)
}

#[test]
fn csv_page_fills_have_paths_quoted_as_rfc_4180_says() {
    let mut t = fixture();
    t.files[0].path = Some("/opt/a, \"quoted\"\nname".into());
    let (text, rows) = csv_rows(csv::Table::Fills, &t);
    assert!(text.contains("\r\n"), "records end with CRLF");
    assert_eq!(
        rows[0],
        ["t_ns", "pid", "tid", "comm", "file_id", "path", "page_index", "pages", "bytes", "origin"]
    );
    assert_eq!(rows.len(), 1 + t.page_fills.len());
    assert_eq!(
        rows[1],
        ["3000000", "100", "100", "app", "1", "/opt/a, \"quoted\"\nname", "0", "8", "32768", "fault"]
    );
    assert!(text.contains("\"/opt/a, \"\"quoted\"\"\nname\""));
    // File 4 has no path: the field is empty.
    assert_eq!(rows[7][5], "");
    assert_eq!(rows[7][4], "4");
}

#[test]
fn csv_reads_are_the_coalesced_reads() {
    let t = fixture();
    let a = analyze(&t);
    let (_, rows) = csv_rows(csv::Table::Reads, &t);
    assert_eq!(rows.len(), 1 + a.reads.len());
    assert_eq!(rows[0][..3], ["t_ns", "end_ns", "pid"]);
    // app's first two fills of libfoo (pages 0-3, 4-15) are one read of 16 pages.
    let libfoo: Vec<&Vec<String>> = rows.iter().filter(|r| r[6] == "/usr/lib/libfoo.so").collect();
    assert_eq!(libfoo[0][7..], ["0", "16", "65536", "false"]);
    assert_eq!(libfoo.iter().filter(|r| r[10] == "true").count(), 2);
}

#[test]
fn csv_block_requests_are_as_recorded() {
    let mut t = fixture();
    t.block_ios.push(BlockIo {
        issue_ns: None,
        complete_ns: Some(60 * MS),
        dev: t.disks[0].dev,
        sector: None,
        bytes: 0,
        op: BlockOp::Flush,
        rwbs: "FF".into(),
        ..BlockIo::default()
    });
    let (_, rows) = csv_rows(csv::Table::Requests, &t);
    assert_eq!(rows.len(), 1 + t.block_ios.len());
    assert_eq!(rows[0][..4], ["issue_ns", "complete_ns", "latency_ns", "dev"]);
    assert_eq!(
        rows[1],
        [
            "3000000", "5000000", "2000000", "254:0", "vda", "2048", "32768", "read", "R", "100", "app", "",
            "", "0"
        ]
    );
    assert_eq!(rows[5][..8], ["", "60000000", "", "254:0", "vda", "", "0", "flush"]);
}

#[test]
fn system_calls_are_slices_on_a_track_next_to_their_thread() {
    let mut t = fixture();
    t.syscalls = vec![
        Syscall {
            tid: 100,
            pid: 100,
            enter_ns: 2 * MS,
            exit_ns: Some(3 * MS),
            name: "statx".into(),
            result: Some(-2),
            path: Some("/opt/app/plug-ins/missing".into()),
            ..Syscall::default()
        },
        Syscall {
            tid: 100,
            pid: 100,
            enter_ns: 4 * MS,
            exit_ns: None,
            name: "futex".into(),
            ..Syscall::default()
        },
    ];
    let v = chrome_json(&t);
    check_structure(&v);
    let calls = find(&v, |e| e["cat"] == "syscall");
    assert_eq!(calls.len(), 2);
    let track = (1i64 << 32) + 100;
    assert!(calls.iter().all(|c| c["pid"] == 100 && c["tid"] == track));
    assert_eq!(calls[0]["name"], "statx missing");
    assert_eq!(calls[0]["dur"], 1000.0);
    assert_eq!(calls[0]["args"]["path"], "/opt/app/plug-ins/missing");
    assert_eq!(calls[0]["args"]["result"], -2);
    assert_eq!(calls[1]["dur"].as_f64(), Some((t.meta.duration_ns - 4 * MS) as f64 / 1000.0), "to the end");
    let name = find(&v, |e| e["ph"] == "M" && e["name"] == "thread_name" && e["tid"] == track);
    assert_eq!(name[0]["args"]["name"], "app syscalls");
}

/// A process with 30 stack samples: 20 in `parse` (called from `main`), 10 in the kernel's
/// `clear_page_erms` under `parse`.
fn sampled() -> Trace {
    let frame = |id, kernel, symbol: &str| Frame {
        id,
        mapping_id: None,
        kernel,
        address: u64::from(id) * 16,
        symbol: Some(symbol.into()),
    };
    Trace {
        processes: vec![Process { pid: 7, comm: "app".into(), start_ns: Some(0), ..Default::default() }],
        frames: vec![frame(1, false, "main"), frame(2, false, "parse"), frame(3, true, "clear_page_erms")],
        stacks: vec![
            Stack { id: 1, parent_id: None, frame_id: 1 },
            Stack { id: 2, parent_id: Some(1), frame_id: 2 },
            Stack { id: 3, parent_id: Some(2), frame_id: 3 },
        ],
        stack_samples: (0..30)
            .map(|i| StackSample {
                t_ns: i * MS,
                pid: 7,
                tid: 8,
                cpu: 1,
                stack_id: Some(if i % 3 == 0 { 3 } else { 2 }),
            })
            .collect(),
        meta: Meta { duration_ns: 40 * MS, ..Default::default() },
        ..Default::default()
    }
}

#[test]
fn stack_samples_become_instant_events_with_their_stack_and_folded_lines() {
    let v = chrome_json(&sampled());
    check_structure(&v);
    let samples = find(&v, |e| e["cat"] == "cpu_sample");
    assert_eq!(samples.len(), 30);
    assert_eq!(samples[0]["name"], "clear_page_erms");
    assert_eq!(samples[0]["args"]["stack"], serde_json::json!(["main", "parse", "clear_page_erms"]));
    assert_eq!((samples[0]["pid"].as_i64(), samples[0]["tid"].as_i64()), (Some(7), Some(8)));

    let folded = coldstart_report::export::folded::lines(&sampled(), &Default::default());
    assert_eq!(folded, ["app;main;parse 20", "app;main;parse;clear_page_erms_[k] 10"]);
    let mut svg = Vec::new();
    coldstart_report::flamegraph::write(&sampled(), &Default::default(), "app", &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    // inferno colours `_[k]` frames as the kernel's and shows them without the suffix.
    assert!(svg.contains("<title>parse (30 samples, 100.00%)</title>"), "{svg}");
    assert!(svg.contains("<title>clear_page_erms (10 samples, 33.33%)</title>"), "{svg}");
    let empty =
        coldstart_report::flamegraph::write(&Trace::default(), &Default::default(), "x", &mut Vec::new());
    assert!(empty.unwrap_err().to_string().contains("no CPU samples"));
}

#[test]
fn the_text_report_says_where_the_cpu_went() {
    let analysis = analyze(&sampled());
    let mut out = Vec::new();
    coldstart_report::text::report(&analysis, &Default::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let section = text.split("Where the CPU went").nth(1).expect("the section");
    let lines: Vec<&str> = section.lines().take(6).map(str::trim).collect();
    assert_eq!(lines[1], "30 samples; functions by samples in them (self) and under them (total)");
    assert!(lines[3].starts_with("66.7 %  100.0 %  parse"), "{lines:?}");
    // The kernel part is charged to what the thread did (here nothing says what: `kernel`),
    // not to the kernel function the sample landed in.
    assert!(lines[4].starts_with("33.3 %   33.3 %  kernel    [kernel]"), "{lines:?}");
    assert!(!section.contains("clear_page_erms"), "{section}");
    assert_eq!(lines[5], "By file: [unknown] 66.7 %, [kernel] 33.3 %");
}
