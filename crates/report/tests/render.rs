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
