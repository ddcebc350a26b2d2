//! docs/report-json.md names every field the JSON has, so the contract stays documented.

mod common;

use std::collections::BTreeSet;

fn keys(value: &serde_json::Value, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

#[test]
fn every_json_field_is_documented() {
    let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report-json.md");
    let doc = std::fs::read_to_string(doc_path).expect("docs/report-json.md");
    let analysis = coldstart_analyze::analyze(&common::fixture());
    let mut out = Vec::new();
    coldstart_report::json::write(&analysis, &mut out).unwrap();
    let value: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let mut all = BTreeSet::new();
    keys(&value, &mut all);
    let missing: Vec<_> = all.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "fields missing from docs/report-json.md: {missing:?}");
}
