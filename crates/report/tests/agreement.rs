//! The text, JSON and HTML reports (and the chart's header) say the same things about a
//! start: how the command ended (its exit status, and whether coldstart ended it once the
//! start was ready), what kind of disk it read from (the kernel's flag and the measured
//! class, both labelled), and each finding's gain (`−0.378 s`, or `no gain estimated`,
//! never `−0.000 s`). Checked on the two real recordings of tests/fixtures, the Python one
//! also as a start that coldstart ended at a mark, and the synthetic login and boot. The
//! HTML page is rendered by headless Chromium (`--dump-dom`).
//!
//! Without Chromium the HTML part skips, saying why; with CI=true it fails instead.

use std::io::Read;
use std::path::Path;
use std::process::Command;

use coldstart_analyze::doctor::{DoctorConfig, diagnose};
use coldstart_analyze::{Analysis, analyze, units};
use coldstart_report::{html, json, svg, text};
use coldstart_trace::Trace;
use serde_json::Value;

#[path = "common/boot.rs"]
mod boot;
#[allow(dead_code)]
mod common;
#[path = "common/session.rs"]
mod session;

fn fixture(name: &str) -> Trace {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let gz = root.join(format!("tests/fixtures/{name}.coldstart.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()).read_to_end(&mut bytes).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("{name}.coldstart"));
    std::fs::write(&path, bytes).unwrap();
    Trace::read(&path).expect("a fixture trace")
}

/// The Python fixture as if its readiness were a mark and coldstart had ended it there:
/// still running at ready, exit status 143 (SIGTERM).
fn ended_at_a_mark() -> Trace {
    let mut trace = fixture("python");
    let ready = trace.meta.ready.as_mut().expect("a ready point");
    ready.reason = "mark:imported".parse().unwrap();
    trace.meta.exit_code = Some(143);
    let root = trace.meta.root_pid.expect("a root");
    for p in trace.processes.iter_mut().filter(|p| p.pid == root) {
        p.end_ns = None;
    }
    trace
}

fn traces() -> Vec<(&'static str, Trace)> {
    vec![
        ("python", fixture("python")),
        ("soffice", fixture("soffice")),
        ("python ended at a mark", ended_at_a_mark()),
        ("session", session::session()),
        ("boot", boot::boot()),
    ]
}

/// Everything one start's reports say: the text report with findings, the JSON report
/// (parsed), the chart.
struct Reports {
    analysis: Analysis,
    text: String,
    json: Value,
    chart: String,
    html: Vec<u8>,
}

fn reports(trace: &Trace) -> Reports {
    let analysis = analyze(trace);
    let diagnosis = diagnose(trace, &analysis, &DoctorConfig::default(), &[]);
    let options = text::Options { top: 50, ..text::Options::default() };
    let mut out = Vec::new();
    text::report_with_findings(&analysis, Some(&diagnosis), &options, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let mut out = Vec::new();
    json::write_with_doctor(&analysis, &diagnosis, &mut out).unwrap();
    let json: Value = serde_json::from_slice(&out).unwrap();
    let mut out = Vec::new();
    svg::write(trace, &analysis, &svg::Options::default(), &mut out).unwrap();
    let chart = String::from_utf8(out).unwrap();
    let mut html = Vec::new();
    html::write(&analysis, Some(&html::Timeline::new(trace)), Some(&diagnosis), &mut html).unwrap();
    Reports { analysis, text, json, chart, html }
}

/// What the JSON says, in the words the other reports must show: the exit, each disk's
/// kind, each finding's gain.
struct Said {
    exit: Option<(i64, String)>,
    disks: Vec<String>,
    gains: Vec<String>,
}

fn said(json: &Value) -> Said {
    let exit = json["overview"]["exit"]
        .as_object()
        .map(|e| (e["status"].as_i64().expect("a status"), e["text"].as_str().expect("words").to_owned()));
    let disks =
        json["disks"].as_array().unwrap().iter().map(|d| d["kind"].as_str().unwrap().to_owned()).collect();
    let gains = json["doctor"]["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| match f["gain"]["ns"].as_i64().unwrap() {
            0 => "no gain estimated".to_owned(),
            ns => format!("−{}", units::secs(ns)),
        })
        .collect();
    Said { exit, disks, gains }
}

#[test]
fn the_text_json_and_chart_say_the_same_exit_disk_kind_and_gains() {
    let mut ended_by_coldstart = 0;
    for (name, trace) in traces() {
        let r = reports(&trace);
        let s = said(&r.json);
        assert_eq!(r.json["trace"]["exit_code"].as_i64(), trace.meta.exit_code.map(i64::from), "{name}");
        match &s.exit {
            Some((status, words)) => {
                assert_eq!(Some(*status), trace.meta.exit_code.map(i64::from), "{name}");
                assert!(words.starts_with(&format!("exit status {status}")), "{name}: {words}");
                assert!(
                    r.text.contains(&format!("; {words}\n")),
                    "{name}: the text report does not say {words:?}"
                );
                ended_by_coldstart += usize::from(words.contains("ended by coldstart's SIGTERM"));
            }
            None => {
                assert!(!r.text.contains("exit status"), "{name}: the text says an exit the JSON has not")
            }
        }
        for (disk, kind) in r.analysis.disks.iter().zip(&s.disks) {
            assert!(kind.starts_with("kernel flag: ") && kind.contains("; measured: "), "{name}: {kind}");
            assert!(r.text.contains(&format!("Disk          {} {}", disk.name, disk.dev)), "{name}");
            assert!(r.text.contains(&format!("; {kind}\n")), "{name}: the text does not say {kind:?}");
            assert!(r.chart.contains(&kind.replace('&', "&amp;")), "{name}: the chart does not say {kind:?}");
        }
        let section = r.text.split("\nFindings (coldstart doctor").nth(1).unwrap_or_default();
        for (i, words) in s.gains.iter().enumerate() {
            assert!(
                section.contains(&format!("  {}. [{words}, ", i + 1)),
                "{name}: finding {} is not [{words}",
                i + 1
            );
        }
        assert!(!r.text.contains("−0.000 s"), "{name}");
    }
    assert_eq!(ended_by_coldstart, 1, "the start coldstart ended at its mark says so");
}

/// The page as Chromium's script left it, with the text of its elements.
fn rendered(chromium: &Path, page: &Path) -> String {
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8").replace("&amp;", "&")
}

#[test]
fn the_html_report_says_what_the_json_says() {
    let Some(chromium) = coldstart_testkit::chromium("the_html_report_says_what_the_json_says") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, trace) in traces() {
        let r = reports(&trace);
        let s = said(&r.json);
        let path = dir.path().join("page.html");
        std::fs::write(&path, &r.html).unwrap();
        let dom = rendered(&chromium, &path);
        assert!(dom.contains("id=\"tab-files\""), "{name}: the page's script ran");
        if let Some((_, words)) = &s.exit {
            assert!(dom.contains(&format!(">{words}<")), "{name}: the page does not say {words:?}");
        }
        for kind in &s.disks {
            assert!(dom.contains(kind.as_str()), "{name}: the page does not say {kind:?}");
        }
        for words in &s.gains {
            assert!(
                dom.contains(&format!(">{words}<")),
                "{name}: the page does not show a gain of {words:?}"
            );
        }
        assert!(!dom.contains("−0.000 s"), "{name}: the page shows −0.000 s");
    }
}
