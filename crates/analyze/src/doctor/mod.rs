//! `coldstart doctor`: findings with an estimated gain, the way a startup expert
//! reads a trace, and the what-if on other storage.
//!
//! [`diagnose`] is a pure function of a trace and its analysis. Each detector looks
//! for one pattern (many small files from one tree, a large file read in pieces, a
//! helper process on the critical path, work that can wait, read then parse, other
//! languages' data, durable writes, idle waits, metadata calls on a slow filesystem, a
//! scattered layout, read-ahead never used, a start that is not I/O-bound, one call holding
//! most of the CPU) and, when its estimated gain passes the thresholds of
//! [`DoctorConfig`], says what it saw, how much it would save and why, what to
//! change and how to check it. Gains use the disk model of [`disk_model`], measured
//! from the trace's own requests where it can. docs/doctor.md documents the model,
//! every threshold and what the trace cannot show.

mod chains;
mod config;
mod cpu;
pub mod disk_model;
mod facts;
mod files;
mod finding;
mod fresh_profile;
mod intervals;
mod known;
mod layout;
mod lazy_volume;
mod locale;
mod packed;
mod parse;
mod processes;
mod readahead;
mod roles;
mod sampled;
mod slowfs;
mod waits;
mod whatif;
mod writes;

use coldstart_trace::{Dev, Nanos, Trace};
use serde::{Deserialize, Serialize};

use crate::analysis::Analysis;

pub use config::{DoctorConfig, Languages};
pub use disk_model::{
    CLASSES, CUSTOM_KEYS, DiskClass, DiskParams, DiskSpecError, FETCH_KEYS, ParamSource, RequestShape,
    parse_disk_size,
};
pub use facts::{shell_join, shell_quote};
pub use finding::*;
pub use fresh_profile::{VerifyStart, verify_start};
pub use locale::language_of;
pub use whatif::{WhatIf, WhatIfSpec};

/// The model of one recorded disk, measured from the trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MeasuredDisk {
    pub dev: Dev,
    pub name: String,
    pub model: DiskParams,
}

/// Everything the doctor says about one trace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// The `not_io_bound` verdict first when there is one, then by estimated gain, most first.
    pub findings: Vec<Finding>,
    /// The smallest gain reported for this start (see `DoctorConfig`).
    pub min_gain_ns: Nanos,
    /// The disk model of each recorded disk.
    pub disks: Vec<MeasuredDisk>,
    /// Predictions for the disks asked for, in the order asked.
    pub what_if: Vec<WhatIf>,
    /// The user's languages the `other_languages` finding compared with, and where they came from.
    pub languages: Vec<String>,
    pub languages_source: String,
    /// What the doctor could not check in this trace, and why.
    pub notes: Vec<String>,
}

/// Looks for every finding in `trace` (analysed as `analysis`) and predicts the time to
/// ready on each disk of `what_if`.
pub fn diagnose(
    trace: &Trace,
    analysis: &Analysis,
    config: &DoctorConfig,
    what_if: &[WhatIfSpec],
) -> Diagnosis {
    let mut facts = facts::Facts::new(trace, analysis, config);
    whatif::calibrate(&mut facts);
    let detectors: [fn(&facts::Facts) -> Vec<Finding>; 17] = [
        files::many_small_files,
        files::files_in_pieces,
        processes::heavy_helpers,
        processes::work_that_can_wait,
        parse::read_then_parse,
        locale::other_languages,
        writes::durable_writes,
        waits::idle_waits,
        waits::unexplained_waits,
        slowfs::slow_filesystem,
        layout::scattered_layout,
        readahead::wasted_readahead,
        cpu::not_io_bound,
        cpu::cpu_subtree,
        sampled::disk_bound,
        sampled::many_short_processes,
        lazy_volume::lazy_volume,
    ];
    let mut findings: Vec<Finding> = detectors.iter().flat_map(|detect| detect(&facts)).collect();
    lazy_volume::note_fetches_in_helpers(&mut findings);
    for f in &mut findings {
        f.evidence.intervals =
            intervals::merged(std::mem::take(&mut f.evidence.intervals), config.max_listed);
    }
    rank(&mut findings);
    Diagnosis {
        findings,
        min_gain_ns: facts.min_gain,
        disks: analysis
            .disks
            .iter()
            .zip(&facts.disks)
            .map(|(d, (_, model))| MeasuredDisk { dev: d.dev, name: d.name.clone(), model: model.clone() })
            .collect(),
        what_if: what_if.iter().map(|spec| whatif::what_if(&facts, spec)).collect(),
        languages: config.languages.tags.clone(),
        languages_source: config.languages.source.clone(),
        notes: notes(trace, analysis),
    }
}

/// The measured model of the disk the start read most from, if the trace has one.
pub fn recorded_disk(analysis: &Analysis) -> Option<DiskParams> {
    analysis
        .disks
        .iter()
        .max_by_key(|d| (d.traced_read_bytes, std::cmp::Reverse(d.dev)))
        .map(DiskParams::measure)
}

/// The `not_io_bound` verdict first (it frames the rest), then most gain first; ties by kind and title.
pub fn rank(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        let verdict = |f: &Finding| f.kind != FindingKind::NotIoBound;
        verdict(a)
            .cmp(&verdict(b))
            .then(b.gain.ns.cmp(&a.gain.ns))
            .then(a.kind.cmp(&b.kind))
            .then(a.title.cmp(&b.title))
    });
}

fn notes(trace: &Trace, a: &Analysis) -> Vec<String> {
    let mut notes = Vec::new();
    if trace.sched.is_empty() {
        notes.push(
            "no scheduler data (an imported trace?): no critical path and no I/O wait per file, so no finding that \
             needs them (small files, pieces, helpers, parse, durable writes, idle waits) could be checked"
                .to_owned(),
        );
    } else if a.critical_path.is_none() {
        notes.push(
            "no critical path (no readiness point): waits are summed over all threads instead of taken on the path \
             to ready, and helper, parse, durable-write and idle-wait findings could not be checked"
                .to_owned(),
        );
    }
    if trace.block_ios.is_empty() {
        notes.push("no block requests: the disk model uses the defaults of its class, and no layout or write finding could be checked".to_owned());
    }
    // Findings about the CPU name functions: say which frames no symbol could name, and the fix.
    notes.extend(
        a.warnings
            .iter()
            .filter(|w| w.code == crate::analysis::WarningCode::Unsymbolized)
            .map(|w| w.message.clone()),
    );
    if trace.page_accesses.is_empty() && trace.page_fills.iter().all(|f| f.origin.is_none()) {
        notes.push(
            "no page accesses or fill origins: files read through a mapping cannot be told from files read with \
             read(), so read-then-parse may name a mapped file"
                .to_owned(),
        );
    }
    notes
}
