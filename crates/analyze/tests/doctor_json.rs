//! The diagnosis is a documented contract: every JSON field it has is named in
//! docs/report-json.md, every finding kind has its section in docs/doctor.md, and it
//! survives a JSON round trip.

mod common;

use std::collections::BTreeSet;

use coldstart_analyze::doctor::{Diagnosis, DiskClass, DiskParams, FindingKind, WhatIfSpec};
use common::doctor::{config, diagnose_with};
use common::scenarios;

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

fn all_scenarios() -> Vec<Diagnosis> {
    let what_if = [
        WhatIfSpec::from(DiskParams::class_defaults(DiskClass::Hdd)),
        WhatIfSpec { disk: "custom:request=10ms".parse().unwrap(), only_dev: Some(common::DISK) },
    ];
    [
        scenarios::small_files(),
        scenarios::library_in_pieces(),
        scenarios::helper(),
        scenarios::shell_helpers(),
        scenarios::work_that_can_wait(),
        scenarios::read_then_parse(),
        scenarios::other_languages(),
        scenarios::durable_writes(),
        scenarios::idle_waits(),
        scenarios::scattered_layout(),
        scenarios::cpu_bound(),
    ]
    .iter()
    .map(|t| diagnose_with(t, &config(), &what_if))
    .collect()
}

#[test]
fn every_field_of_the_diagnosis_is_documented() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report-json.md")).unwrap();
    let mut all = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for d in all_scenarios() {
        keys(&serde_json::to_value(&d).unwrap(), &mut all);
        kinds.extend(d.findings.iter().map(|f| f.kind));
    }
    let missing: Vec<_> = all.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "fields missing from docs/report-json.md: {missing:?}");
    assert_eq!(kinds.len(), 11, "the scenarios show every kind: {kinds:?}");
}

#[test]
fn every_kind_has_its_section_in_the_doctor_document() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/doctor.md")).unwrap();
    let json =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report-json.md")).unwrap();
    for kind in [
        FindingKind::ManySmallFiles,
        FindingKind::FileInPieces,
        FindingKind::HeavyHelper,
        FindingKind::WorkThatCanWait,
        FindingKind::ReadThenParse,
        FindingKind::OtherLanguages,
        FindingKind::DurableWrites,
        FindingKind::IdleWaits,
        FindingKind::ScatteredLayout,
        FindingKind::NotIoBound,
        FindingKind::UnexplainedWaits,
        FindingKind::SlowFilesystem,
        FindingKind::WastedReadahead,
    ] {
        let word = kind.as_str();
        assert!(doc.contains(&format!("### `{word}`")), "docs/doctor.md has no section for {word}");
        assert!(json.contains(&format!("`{word}`")), "docs/report-json.md does not list {word}");
        assert_eq!(serde_json::to_value(kind).unwrap(), serde_json::Value::String(word.to_owned()));
    }
}

#[test]
fn the_diagnosis_survives_a_json_round_trip() {
    for d in all_scenarios() {
        let text = serde_json::to_string(&d).unwrap();
        let back: Diagnosis = serde_json::from_str(&text).unwrap();
        assert_eq!(back, d);
    }
}
