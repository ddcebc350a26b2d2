//! Golden tests on the committed real traces of tests/fixtures (a Python import and a
//! LibreOffice conversion, recorded cold on this project's machine; README.md there says
//! how they were made). Each drives the binary on an unpacked copy and checks the text
//! report, the doctor's findings, the reads ranking, the SVG chart, the Chrome export
//! and the prefetch plan: insta snapshots for what people read, direct assertions for
//! the figures that must hold whatever the wording.
//!
//! Snapshots live in tests/snapshots/; after a deliberate change, review with
//! `cargo insta review` (or `INSTA_UPDATE=always cargo test -p coldstart --test real_traces`).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use coldstart_trace::{FileKind, Trace};
use quick_xml::events::Event;
use serde_json::Value;

const PYTHON: &str = "python";
const SOFFICE: &str = "soffice";

/// A fixture unpacked into a private temporary directory; commands run there on the
/// relative name `NAME.coldstart`, so no path of this machine reaches the output.
struct Fixture {
    dir: tempfile::TempDir,
    name: &'static str,
}

impl Fixture {
    fn open(name: &'static str) -> Fixture {
        let gz = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../tests/fixtures")
            .join(format!("{name}.coldstart.gz"));
        let file = std::fs::File::open(&gz).unwrap_or_else(|e| panic!("{}: {e}", gz.display()));
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(file).read_to_end(&mut bytes).expect("a gzip file");
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join(format!("{name}.coldstart")), bytes).expect("unpack");
        Fixture { dir, name }
    }

    fn file(&self) -> String {
        format!("{}.coldstart", self.name)
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn trace(&self) -> Trace {
        Trace::read(&self.path(&self.file())).expect("the fixture reads as a trace")
    }

    /// Runs `coldstart ARGS…` (the trace named by `{}` in ARGS) and returns its standard output.
    fn run(&self, args: &[&str]) -> String {
        let file = self.file();
        let args: Vec<&str> = args.iter().map(|a| if *a == "{}" { file.as_str() } else { a }).collect();
        let out = Command::new(env!("CARGO_BIN_EXE_coldstart"))
            .args(&args)
            .current_dir(self.dir.path())
            // The doctor's translations finding reads the user's languages from the environment.
            .env("LANG", "C.UTF-8")
            .env_remove("LC_ALL")
            .env_remove("LC_MESSAGES")
            .env_remove("LANGUAGE")
            .output()
            .expect("run coldstart");
        assert!(
            out.status.success(),
            "coldstart {args:?} failed with {}:\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    fn json(&self, args: &[&str]) -> Value {
        serde_json::from_str(&self.run(args)).expect("valid JSON")
    }
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not an unsigned integer: {v}"))
}

fn i(v: &Value) -> i64 {
    v.as_i64().unwrap_or_else(|| panic!("not an integer: {v}"))
}

/// The text report without the doctor's findings, which the doctor snapshot covers (so a
/// change of the doctor's wording touches one snapshot, not two).
fn without_findings(report: &str) -> String {
    let mut out = String::new();
    let mut skipping = false;
    for line in report.lines() {
        if line.starts_with("Findings (coldstart doctor") {
            skipping = true;
            out.push_str("[findings: see the doctor snapshot]\n");
            continue;
        }
        if skipping && line.is_empty() {
            skipping = false;
        }
        if !skipping {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// The golden figures of one fixture's JSON report.
struct Figures {
    time_to_ready_ns: i64,
    processes: u64,
    files_read: u64,
    bytes_read: u64,
    reads: u64,
    seeks: u64,
}

fn check_figures(f: &Fixture, want: Figures) {
    let report = f.json(&["report", "{}", "--format", "json"]);
    let trace = f.trace();
    let o = &report["overview"];
    assert_eq!(i(&o["ready"]["time_to_ready_ns"]), want.time_to_ready_ns, "time to ready");
    assert_eq!(u(&o["processes"]), want.processes, "processes");
    assert_eq!(u(&o["files_read"]), want.files_read, "files read");
    assert_eq!(u(&o["bytes_read"]), want.bytes_read, "bytes read");
    assert_eq!(u(&o["reads"]), want.reads, "reads");
    assert_eq!(u(&o["seeks"]), want.seeks, "seeks");

    // The same figures, recounted from the trace itself.
    assert_eq!(o["processes"], trace.processes.len(), "every recorded process is counted");
    assert_eq!(i(&o["ready"]["t_ns"]), trace.meta.ready.as_ref().expect("a ready point").t_ns);
    assert_eq!(u(&o["bytes_read"]), u(&o["pages_read"]) * u64::from(trace.meta.page_size));
    let filled: BTreeSet<u32> = trace.page_fills.iter().map(|p| p.file_id).collect();
    assert_eq!(u(&o["files_read"]), filled.len() as u64, "files with page-cache fills");
    // Unresolved: files read without a path, apart from metadata and a filesystem's own
    // reserved inodes (which the recorder marks kind other: they have no path to find).
    let unresolved = trace
        .files
        .iter()
        .filter(|r| filled.contains(&r.id) && r.path.is_none())
        .filter(|r| !matches!(r.kind, FileKind::DeviceMetadata | FileKind::Other))
        .count();
    assert_eq!(u(&o["unresolved_files"]), unresolved as u64, "unresolved files");
    let pages: u64 = trace.page_fills.iter().map(|p| u64::from(p.pages)).sum();
    assert_eq!(u(&o["pages_read"]), pages, "pages of all page-cache fills");
    let by_file = report["by_file"].as_array().expect("by_file");
    assert_eq!(by_file.iter().map(|r| u(&r["reads"])).sum::<u64>(), u(&o["reads"]), "reads = Σ per file");
    assert_eq!(by_file.iter().map(|r| u(&r["seeks"])).sum::<u64>(), u(&o["seeks"]), "seeks = Σ per file");
    assert_eq!(
        by_file.iter().map(|r| u(&r["bytes"])).sum::<u64>(),
        u(&o["bytes_read"]),
        "bytes = Σ per file"
    );
    assert!(u(&o["seeks"]) <= u(&o["reads"]), "a seek is a read that does not continue the last one");

    // Readahead efficiency covers the pages of files, not filesystem metadata (no program
    // asks for metadata pages: counted, they would all look like readahead never used).
    let metadata: BTreeSet<u32> =
        trace.files.iter().filter(|r| r.kind == FileKind::DeviceMetadata).map(|r| r.id).collect();
    let file_pages: BTreeSet<(u32, u64)> = trace
        .page_fills
        .iter()
        .filter(|p| !metadata.contains(&p.file_id))
        .flat_map(|p| (p.index..p.index + u64::from(p.pages)).map(move |page| (p.file_id, page)))
        .collect();
    let page_use = &report["page_use"];
    assert_eq!(u(&page_use["filled_pages"]), file_pages.len() as u64, "distinct pages of files filled");
    let parts: u64 =
        ["used_pages", "map_around_only_pages", "unused_pages"].iter().map(|k| u(&page_use[*k])).sum();
    assert_eq!(parts, u(&page_use["filled_pages"]), "page use adds up");
    for row in report["page_use_by_file"].as_array().expect("page_use_by_file") {
        assert!(!metadata.contains(&(u(&row["file"]) as u32)), "metadata in page use: {row}");
    }

    // Where the time to ready went: the four parts make up the whole.
    let start = &report["start"];
    let parts: i64 = ["cpu_ns", "io_wait_ns", "cpu_wait_ns", "idle_ns"].iter().map(|k| i(&start[*k])).sum();
    assert_eq!(parts, i(&start["to_ns"]) - i(&start["from_ns"]), "breakdown of the time to ready");

    // The critical path: its segments tile it, and its summary adds up to its total.
    let path = &report["critical_path"];
    let (from, to) = (i(&path["from_ns"]), i(&path["to_ns"]));
    assert_eq!(to, want.time_to_ready_ns, "the path runs to ready");
    let mut at = from;
    for s in path["segments"].as_array().expect("segments") {
        assert_eq!(i(&s["start_ns"]), at, "segments follow each other without gaps: {s}");
        assert!(i(&s["end_ns"]) >= at, "{s}");
        at = i(&s["end_ns"]);
    }
    assert_eq!(at, to, "the segments end at ready");
    let sum = &path["summary"];
    let own: i64 = ["cpu_ns", "cpu_wait_ns", "io_wait_ns", "sleep_ns", "wait_untraced_ns", "untraced_ns"]
        .iter()
        .map(|k| i(&sum[*k]))
        .sum();
    let helpers: i64 = sum["helpers"].as_array().expect("helpers").iter().map(|h| i(&h["ns"])).sum();
    assert_eq!(i(&sum["total_ns"]), to - from);
    assert_eq!(own + helpers, i(&sum["total_ns"]), "critical path total = its parts");
    let io_files: i64 = sum["io_files"].as_array().expect("io_files").iter().map(|f| i(&f["ns"])).sum();
    let ready_pid = i(&path["pid"]);
    let no_file: i64 = path["segments"]
        .as_array()
        .expect("segments")
        .iter()
        .filter(|s| s["kind"] == "io_wait" && i(&s["pid"]) == ready_pid)
        .filter(|s| s["files"].as_array().is_none_or(|f| f.is_empty()))
        .map(|s| i(&s["end_ns"]) - i(&s["start_ns"]))
        .sum();
    assert_eq!(
        io_files + no_file,
        i(&sum["io_wait_ns"]),
        "the path's I/O wait = Σ per file + waits with no file"
    );

    // Diskstats cross-check: recorded read requests against /proc/diskstats, per disk.
    let disks = report["disks"].as_array().expect("disks");
    assert_eq!(disks.len(), trace.disks.len());
    for d in disks {
        let (traced, stats) = (u(&d["traced_read_bytes"]), u(&d["diskstats_read_bytes"]));
        let coverage = d["coverage"].as_f64().expect("coverage");
        assert!((coverage - traced as f64 / stats as f64).abs() < 1e-9, "coverage = traced / diskstats: {d}");
        assert!((0.99..=1.01).contains(&coverage), "the recorder saw every read request: {d}");
    }
}

#[test]
fn python_import_report_figures() {
    check_figures(
        &Fixture::open(PYTHON),
        Figures {
            time_to_ready_ns: 1_326_641_627,
            processes: 2,
            files_read: 1654,
            bytes_read: 166_330_368,
            reads: 2149,
            seeks: 494,
        },
    );
}

#[test]
fn soffice_conversion_report_figures() {
    check_figures(
        &Fixture::open(SOFFICE),
        Figures {
            time_to_ready_ns: 1_540_218_874,
            processes: 16,
            files_read: 388,
            bytes_read: 208_007_168,
            reads: 668,
            seeks: 274,
        },
    );
}

#[test]
fn python_import_report_text() {
    let f = Fixture::open(PYTHON);
    insta::assert_snapshot!(without_findings(&f.run(&["report", "{}"])));
}

#[test]
fn soffice_conversion_report_text() {
    let f = Fixture::open(SOFFICE);
    insta::assert_snapshot!(without_findings(&f.run(&["report", "{}"])));
}

/// The golden findings: kind, title and estimated gain of each, in the doctor's order.
fn findings(f: &Fixture) -> (Value, String) {
    let report = f.json(&["doctor", "{}", "--format", "json"]);
    let mut golden = String::new();
    for finding in report["doctor"]["findings"].as_array().expect("findings") {
        golden.push_str(&format!(
            "{:<20} {:>8.1} ms  {}\n",
            finding["kind"].as_str().expect("kind"),
            i(&finding["gain"]["ns"]) as f64 / 1e6,
            finding["title"].as_str().expect("title")
        ));
    }
    if golden.is_empty() {
        golden.push_str("(no findings)\n");
    }
    (report, golden)
}

/// The not-I/O-bound verdict holds exactly when the critical path's breakdown says so
/// (docs/doctor.md: at most 10 % waits for I/O, at least 50 % runs or waits for a CPU).
fn check_io_verdict(report: &Value) -> bool {
    let sum = &report["critical_path"]["summary"];
    let total = i(&sum["total_ns"]) as f64;
    let helpers = sum["helpers"].as_array().expect("helpers");
    let io = i(&sum["io_wait_ns"]) + helpers.iter().map(|h| i(&h["io_wait_ns"])).sum::<i64>();
    let io_share = io as f64 / total;
    let idle = ["sleep_ns", "wait_untraced_ns", "untraced_ns"].iter().map(|k| i(&sum[*k])).sum::<i64>();
    let cpu_share_at_least = 1.0 - io_share - idle as f64 / total;
    let verdict = report["doctor"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "not_io_bound");
    match verdict {
        Some(v) => {
            assert!(
                io_share <= 0.10,
                "not I/O-bound, yet {:.1} % of the path waits for I/O",
                io_share * 100.0
            );
            assert!(cpu_share_at_least >= 0.5, "not I/O-bound, yet the path is mostly idle");
            let figure = v["gain"]["inputs"]
                .as_array()
                .expect("inputs")
                .iter()
                .find(|x| x["name"] == "io_share")
                .expect("the verdict gives its I/O share");
            let stated = figure["value"].as_f64().expect("a number");
            assert!(
                (stated - io_share).abs() < 1e-6,
                "the verdict's I/O share {stated} against the path's {io_share}"
            );
            assert_eq!(i(&v["gain"]["ns"]), 0, "the verdict has no gain of its own");
            assert_eq!(report["doctor"]["findings"][0]["kind"], "not_io_bound", "the verdict comes first");
        }
        None => assert!(
            io_share > 0.10 || cpu_share_at_least < 0.5,
            "the path is {:.1} % I/O wait and mostly CPU: the doctor should say it is not I/O-bound",
            io_share * 100.0
        ),
    }
    verdict.is_some()
}

/// Every gain is positive (or zero for the verdict), at most the time to ready, ranked.
fn check_gains(report: &Value) {
    let ready = i(&report["overview"]["ready"]["time_to_ready_ns"]);
    let gains: Vec<i64> = report["doctor"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] != "not_io_bound")
        .map(|f| i(&f["gain"]["ns"]))
        .collect();
    for g in &gains {
        assert!((10_000_000..=ready).contains(g), "gain {g} ns: at least the 10 ms threshold, at most ready");
    }
    assert!(gains.windows(2).all(|w| w[0] >= w[1]), "ranked by gain: {gains:?}");
}

/// The evidence names what the trace holds: each file by its path and size, each
/// process by a pid the trace saw (traced, or issuing block requests).
fn check_evidence(report: &Value, trace: &Trace) {
    for finding in report["doctor"]["findings"].as_array().expect("findings") {
        let kind = finding["kind"].as_str().expect("kind");
        let evidence = &finding["evidence"];
        for file in evidence["files"].as_array().expect("evidence files") {
            let row = trace
                .files
                .iter()
                .find(|r| u64::from(r.id) == u(&file["file"]))
                .unwrap_or_else(|| panic!("{kind}: {file} is not a file of the trace"));
            let name = file["name"].as_str().expect("name");
            assert!(row.path.as_deref().is_some_and(|p| name.starts_with(p)), "{kind}: {file} is {row:?}");
            if let Some(size) = file["size_bytes"].as_u64() {
                assert_eq!(Some(size), row.size, "{kind}: {file}");
            }
        }
        assert!(
            evidence["files_total"].as_u64().unwrap_or(0)
                >= evidence["files"].as_array().unwrap().len() as u64
        );
        for process in evidence["processes"].as_array().expect("evidence processes") {
            let pid = i(&process["pid"]);
            let seen = trace.processes.iter().any(|p| i64::from(p.pid) == pid)
                || trace.block_ios.iter().any(|b| i64::from(b.pid) == pid);
            assert!(seen, "{kind}: pid {pid} is nowhere in the trace");
        }
    }
}

#[test]
fn python_import_golden_findings() {
    let f = Fixture::open(PYTHON);
    let (report, golden) = findings(&f);
    insta::assert_snapshot!(golden);
    assert!(
        !check_io_verdict(&report),
        "the Python import waits for the disk for 10.4 % of its path, over the verdict's 10 %"
    );
    check_gains(&report);
    check_evidence(&report, &f.trace());
}

#[test]
fn soffice_conversion_golden_findings() {
    let f = Fixture::open(SOFFICE);
    let (report, golden) = findings(&f);
    insta::assert_snapshot!(golden);
    check_io_verdict(&report);
    check_gains(&report);
    check_evidence(&report, &f.trace());
}

#[test]
fn reads_ranking_of_both_fixtures() {
    for name in [PYTHON, SOFFICE] {
        let f = Fixture::open(name);
        let out = f.run(&["reads", "{}", "--by", "file", "--top", "5"]);
        insta::assert_snapshot!(format!("reads_{name}"), out);
    }
}

/// Each element of an SVG: name, attributes, and the text directly inside it; panics
/// when the document is not well-formed XML.
fn svg_elements(svg: &str) -> Vec<(String, BTreeMap<String, String>, String)> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut out = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("not well-formed at {}: {e}", reader.buffer_position()))
        {
            Event::Start(e) => {
                out.push(element(&e));
                open.push(out.len() - 1);
            }
            Event::Empty(e) => out.push(element(&e)),
            Event::End(_) => {
                open.pop().expect("balanced tags");
            }
            Event::Text(t) => {
                if let Some(&at) = open.last() {
                    out[at].2.push_str(&t.decode().expect("text"));
                }
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8(r.to_vec()).expect("UTF-8 entity name");
                let text = quick_xml::escape::resolve_predefined_entity(&name).expect("a predefined entity");
                if let Some(&at) = open.last() {
                    out[at].2.push_str(text);
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(open.is_empty(), "every element is closed");
    out
}

fn element(e: &quick_xml::events::BytesStart<'_>) -> (String, BTreeMap<String, String>, String) {
    let name = String::from_utf8(e.name().as_ref().to_vec()).expect("UTF-8 name");
    let attrs = e
        .attributes()
        .map(|a| {
            let a = a.expect("well-formed attribute");
            (
                String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0).expect("value").into_owned(),
            )
        })
        .collect();
    (name, attrs, String::new())
}

#[test]
fn svg_chart_shows_a_bar_per_process() {
    for name in [PYTHON, SOFFICE] {
        let f = Fixture::open(name);
        f.run(&["report", "{}", "--format", "svg", "-o", "chart.svg"]);
        let svg = std::fs::read_to_string(f.path("chart.svg")).expect("the chart");
        let elements = svg_elements(&svg);
        assert_eq!(elements.first().map(|e| e.0.as_str()), Some("svg"), "{name}: an SVG document");
        let trace = f.trace();
        let bars =
            elements.iter().filter(|e| e.0 == "g" && e.1.get("class").is_some_and(|c| c == "bar")).count();
        assert_eq!(bars, trace.processes.len(), "{name}: one bar per process (fewer than 100 of them)");
        let shown: BTreeSet<i32> = elements
            .iter()
            .filter(|e| e.0 == "tspan" && e.1.get("class").is_some_and(|c| c == "pid"))
            .map(|e| e.2.trim().parse().expect("a pid"))
            .collect();
        let recorded: BTreeSet<i32> = trace.processes.iter().map(|p| p.pid).collect();
        assert_eq!(shown, recorded, "{name}: every process is labelled with its pid");
    }
}

#[test]
fn chrome_export_has_a_track_per_process() {
    for name in [PYTHON, SOFFICE] {
        let f = Fixture::open(name);
        let export = f.json(&["export", "{}", "--format", "chrome"]);
        let events = export["traceEvents"].as_array().expect("traceEvents");
        let trace = f.trace();
        let tracks: BTreeMap<i64, String> = events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
            .map(|e| (i(&e["pid"]), e["args"]["name"].as_str().expect("a name").to_owned()))
            .collect();
        for p in &trace.processes {
            assert_eq!(
                tracks.get(&i64::from(p.pid)).map(String::as_str),
                Some(p.comm.as_str()),
                "{name}: a track named after process {}",
                p.pid
            );
        }
        // Perfetto drops events with negative timestamps (google/perfetto#107): the export
        // shifts the trace's t = 0 to `t0_us` when something happened before it (the
        // command's fork, samples whose interval began before t = 0), and only then.
        let earliest_ns = trace
            .processes
            .iter()
            .filter_map(|p| p.start_ns)
            .chain(trace.cpu_samples.iter().map(|s| s.t_ns - s.dt_ns))
            .chain(trace.disk_samples.iter().map(|s| s.t_ns - s.dt_ns))
            .min()
            .unwrap_or(0)
            .min(0);
        let t0_us = export["otherData"]["t0_us"].as_f64().expect("t0_us");
        assert!(t0_us >= 0.0 && t0_us <= -(earliest_ns as f64) / 1000.0 + 0.001, "{name}: t0_us {t0_us}");
        assert!(t0_us > 0.0 || earliest_ns == 0, "{name}: events before t = 0 are shifted");
        for e in events {
            let ts = e["ts"].as_f64().expect("a numeric ts");
            assert!(ts >= 0.0, "{name}: {e}");
            if e["ph"] == "X" {
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{name}: {e}");
            }
        }
        // Every thread that ran has slices on its track.
        let with_slices: BTreeSet<i64> =
            events.iter().filter(|e| e["ph"] == "X").map(|e| i(&e["tid"])).collect();
        for t in &trace.threads {
            if trace.sched.iter().any(|s| s.tid == t.tid) {
                assert!(with_slices.contains(&i64::from(t.tid)), "{name}: thread {} has slices", t.tid);
            }
        }
    }
}

#[test]
fn prefetch_plan_stays_within_what_the_start_read() {
    for name in [PYTHON, SOFFICE] {
        let f = Fixture::open(name);
        f.run(&["prefetch", "plan", "{}", "-o", "start.plan"]);
        let plan: Value =
            serde_json::from_slice(&std::fs::read(f.path("start.plan")).expect("the plan")).expect("JSON");
        assert_eq!(plan["source"]["trace"], f.file(), "{name}: the plan names the trace as given");
        let trace = f.trace();
        let stats = &plan["stats"];
        // A page filled twice (evicted and read again) counts once in the plan.
        let distinct: BTreeSet<(u32, u64)> = trace
            .page_fills
            .iter()
            .flat_map(|p| (p.index..p.index + u64::from(p.pages)).map(move |page| (p.file_id, page)))
            .collect();
        let page = u64::from(trace.meta.page_size);
        assert_eq!(
            u(&stats["read_bytes"]),
            distinct.len() as u64 * page,
            "{name}: the distinct pages filled"
        );
        assert!(
            u(&stats["planned_bytes"]) <= u(&stats["read_bytes"]),
            "{name}: plan bytes ≤ bytes read: {stats}"
        );
        assert!(u(&stats["planned_read_bytes"]) <= u(&stats["planned_bytes"]), "{name}: {stats}");
        let mut planned = 0;
        let disk_size: BTreeMap<String, u64> =
            trace.disks.iter().filter_map(|d| Some((d.dev.to_string(), d.size_bytes?))).collect();
        for file in plan["files"].as_array().expect("files") {
            let path = file["path"].as_str().expect("path");
            let limit = match file["kind"].as_str() {
                Some("regular") => {
                    let row = trace
                        .files
                        .iter()
                        .find(|r| r.path.as_deref() == Some(path) && r.kind == FileKind::Regular)
                        .unwrap_or_else(|| panic!("{name}: {path} is a file of the trace"));
                    assert_eq!(file["size"].as_u64(), row.size, "{name}: {path}");
                    // Whole pages: the last range may run up to the end of the file's last page.
                    row.size.map(|s| s.div_ceil(page) * page)
                }
                Some("block_device") => disk_size.get(file["dev"].as_str().expect("dev")).copied(),
                other => panic!("{name}: unknown kind {other:?}"),
            };
            let mut end = 0;
            for r in file["ranges"].as_array().expect("ranges") {
                let (offset, length) = (u(&r["offset"]), u(&r["length"]));
                assert!(length > 0 && offset >= end, "{name}: {path}: ranges sorted and disjoint");
                end = offset + length;
                if let Some(limit) = limit {
                    assert!(end <= limit, "{name}: {path}: range {offset}+{length} past its end {limit}");
                }
                planned += length;
            }
        }
        assert_eq!(planned, u(&stats["planned_bytes"]), "{name}: planned bytes = Σ ranges");
    }
}

/// `coldstart doctor` says what prefetching the whole start would give on the recorded
/// disk, with the what-if's own figures, and how to make and measure a plan.
#[test]
fn the_doctor_offers_the_whole_start_prefetched_with_the_what_ifs_figures() {
    for name in [PYTHON, SOFFICE] {
        let f = Fixture::open(name);
        let report = f.json(&["doctor", "{}", "--format", "json"]);
        let what_if = report["doctor"]["what_if"].as_array().expect("what_if");
        let w =
            what_if.iter().find(|w| w["disk"]["class"] == "measured").expect("the recorded disk's what-if");
        let (ready, ahead) = (i(&w["time_to_ready_ns"]), i(&w["with_prefetch_ahead_ns"]));
        let alongside = i(&w["with_prefetch_alongside_ns"]);
        assert!(ahead < ready && alongside >= ahead, "{name}: {w}");
        let secs = |ns: i64| format!("{:.3} s", ns as f64 / 1e9);
        let line = format!(
            "about {} instead of {} on the recorded disk (−{}); replayed alongside it, at least {}",
            secs(ahead),
            secs(ready),
            secs(ready - ahead),
            secs(alongside)
        );
        let text = f.run(&["doctor", "{}"]);
        assert!(text.contains(&line), "{name}: no {line:?} in\n{text}");
        assert!(text.contains(&format!("  coldstart prefetch plan {} -o start.plan\n", f.file())), "{text}");
        assert!(text.contains("  coldstart bench --cold --runs 10 --prefetch start.plan -- "), "{text}");
    }
}

/// `info` and `report` name what each file count counts, and the same counts agree.
#[test]
fn file_counts_are_named_and_reconcile_between_info_and_report() {
    let f = Fixture::open(SOFFICE);
    let info = f.run(&["info", "{}"]);
    let report = f.run(&["report", "{}"]);
    let trace = f.trace();
    let read: std::collections::BTreeSet<u32> = trace.page_fills.iter().map(|p| p.file_id).collect();
    assert!(info.contains(&format!("files opened or read {}\n", trace.files.len())), "{info}");
    assert!(info.contains(&format!("files read from disk {}\n", read.len())), "{info}");
    assert!(
        report.contains(&format!(
            "Read          {} files read from disk (of {} opened or read)",
            read.len(),
            trace.files.len()
        )),
        "{report}"
    );
}
