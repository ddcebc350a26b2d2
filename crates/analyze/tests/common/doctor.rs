//! The only place the doctor's tests touch its API: `diagnose` through a trace file
//! round trip, and a plain-line rendering of the findings that tests compare with
//! what they expect.

use coldstart_analyze::doctor::{self, Diagnosis, DoctorConfig, Finding, FindingKind, Languages, WhatIfSpec};
use coldstart_trace::*;

use super::round_trip;

/// The doctor's configuration of the tests: defaults, the user reads German.
pub fn config() -> DoctorConfig {
    DoctorConfig {
        languages: Languages { tags: vec!["de_DE.UTF-8".into()], source: "the test".into() },
        trace_name: "app.coldstart".into(),
        ..DoctorConfig::default()
    }
}

/// Writes the trace to a file, reads it back, analyses it and diagnoses it.
pub fn diagnose_with(trace: &Trace, config: &DoctorConfig, what_if: &[WhatIfSpec]) -> Diagnosis {
    let read = round_trip(trace);
    let analysis = coldstart_analyze::analyze(&read);
    doctor::diagnose(&read, &analysis, config, what_if)
}

pub fn diagnose(trace: &Trace) -> Diagnosis {
    diagnose_with(trace, &config(), &[])
}

fn ms(ns: Nanos) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One line per finding: `kind gain_ms confidence | title`.
pub fn render(d: &Diagnosis) -> String {
    d.findings
        .iter()
        .map(|f| format!("{} {} {:?} | {}", f.kind.as_str(), ms(f.gain.ns), f.confidence, f.title))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The findings of `kind`.
pub fn of_kind(d: &Diagnosis, kind: FindingKind) -> Vec<&Finding> {
    d.findings.iter().filter(|f| f.kind == kind).collect()
}

/// The one finding of `kind`, with a helpful message when there is not exactly one.
pub fn one(d: &Diagnosis, kind: FindingKind) -> &Finding {
    let found = of_kind(d, kind);
    assert_eq!(found.len(), 1, "expected one {} finding, got:\n{}", kind.as_str(), render(d));
    found[0]
}

/// A named input of a finding's gain.
pub fn input(f: &Finding, name: &str) -> f64 {
    f.gain
        .inputs
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no input {name} in {:?}", f.gain.inputs))
        .value
}

/// A named figure of a finding's evidence.
pub fn figure(f: &Finding, name: &str) -> f64 {
    f.evidence
        .figures
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no figure {name} in {:?}", f.evidence.figures))
        .value
}

/// Every finding's arithmetic holds: the gain is never negative and its formula's
/// inputs are all there; the list is ranked.
pub fn check_invariants(d: &Diagnosis) {
    for f in &d.findings {
        assert!(f.gain.ns >= 0, "negative gain: {f:?}");
        assert!(!f.title.is_empty() && !f.suggestion.is_empty() && !f.verify.is_empty());
        for word in f.gain.formula.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.ends_with("_ns") || word.ends_with("_bytes") {
                assert!(
                    f.gain.inputs.iter().any(|i| i.name == word),
                    "formula names {word}, not in inputs: {f:?}"
                );
            }
        }
    }
    let mut ranked = d.findings.clone();
    doctor::rank(&mut ranked);
    assert_eq!(ranked, d.findings, "findings are ranked");
}
