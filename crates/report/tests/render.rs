//! Golden tests of the text report and the read listings, and the JSON contract,
//! on a small synthetic trace whose every figure is known.

use coldstart_analyze::{RankBy, ReadFilter, analyze};
use coldstart_report::{json, text};

mod common;

use common::{MS, fixture};

fn text_report() -> String {
    let mut out = Vec::new();
    text::report(&analyze(&fixture()), &text::Options::default(), &mut out).expect("render");
    String::from_utf8(out).expect("utf-8")
}

#[test]
fn the_text_report_of_a_known_trace() {
    insta::assert_snapshot!(text_report());
}

#[test]
fn the_text_report_is_deterministic() {
    assert_eq!(text_report(), text_report());
}

#[test]
fn the_raw_read_listing_shows_each_coalesced_read() {
    let mut out = Vec::new();
    text::reads(&analyze(&fixture()), &ReadFilter::default(), &mut out).unwrap();
    insta::assert_snapshot!(String::from_utf8(out).unwrap());
}

#[test]
fn rankings_can_be_restricted_to_a_process_and_to_paths() {
    let a = analyze(&fixture());
    let mut out = Vec::new();
    text::ranking(&a, RankBy::File, &ReadFilter::default(), 2, &mut out).unwrap();
    text::ranking(&a, RankBy::Process, &ReadFilter::default(), 10, &mut out).unwrap();
    let only_app_libs = ReadFilter { pid: Some(100), path_contains: Some("lib".into()) };
    text::ranking(&a, RankBy::File, &only_app_libs, 10, &mut out).unwrap();
    insta::assert_snapshot!(String::from_utf8(out).unwrap());
}

#[test]
fn json_carries_schema_and_version_and_reads_back_unchanged() {
    let a = analyze(&fixture());
    let mut out = Vec::new();
    json::write(&a, &mut out).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
    assert_eq!(value["schema"], "coldstart-analysis");
    assert_eq!(value["version"], 1);
    assert_eq!(value["overview"]["ready"]["time_to_ready_ns"], 98 * MS);
    assert_eq!(value["by_file"][0]["name"], "/usr/lib/libfoo.so");
    assert_eq!(value["by_file"][0]["seeks"], 2);
    assert_eq!(value["critical_path"]["summary"]["helpers"][0]["comm"], "helper");
    assert_eq!(value["warnings"][0]["code"], "lost");
    let back = json::read(&mut out.as_slice()).expect("read back");
    assert_eq!(back, a);
}

#[test]
fn json_of_a_newer_version_is_refused_with_a_reason() {
    let mut a = analyze(&fixture());
    a.version += 1;
    let mut out = Vec::new();
    json::write(&a, &mut out).unwrap();
    let err = json::read(&mut out.as_slice()).unwrap_err();
    assert!(err.to_string().contains("version 2"), "{err}");
}

/// The doctor's header, up to its first blank line, for a trace and a doctor floor.
fn doctor_header(trace: &coldstart_trace::Trace, min_gain_ns: coldstart_trace::Nanos) -> String {
    use coldstart_analyze::doctor::{DoctorConfig, diagnose};
    let analysis = analyze(trace);
    let config = DoctorConfig { min_gain_ns, ..DoctorConfig::default() };
    let diagnosis = diagnose(trace, &analysis, &config, &[]);
    let mut out = Vec::new();
    coldstart_report::findings::doctor(&analysis, &diagnosis, "app.coldstart", usize::MAX, &mut out).unwrap();
    String::from_utf8(out).unwrap().split("\n\n").next().unwrap().to_owned()
}

#[test]
fn the_doctor_says_its_threshold_rule_and_words_no_finding_properly() {
    // 98 ms to ready: 1 % is under the floor, so the floor is the rule; none passes a 2 s floor.
    let header = doctor_header(&fixture(), 2000 * MS);
    let last = header.lines().last().unwrap();
    assert!(!last.contains("0 of 0"), "{header}");
    assert_eq!(
        last,
        "No finding worth at least 2.000 s (the floor; 1 % of the time to ready is 980 µs): no pattern in this \
         start passes the thresholds (docs/doctor.md)"
    );
    let header = doctor_header(&fixture(), 10 * MS);
    assert!(header.ends_with("1 finding worth at least 10.0 ms (the floor; 1 % of the time to ready is 980 µs), ranked by estimated gain (thresholds in docs/doctor.md)"), "{header}");
    // A floor under 1 % of the time to ready leaves the share as the rule.
    let header = doctor_header(&fixture(), 0);
    let last = header.lines().last().unwrap();
    assert!(last.contains("worth at least 1 % of the time to ready (980 µs)"), "{header}");
}
