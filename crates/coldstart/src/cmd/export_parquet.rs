//! `coldstart export --format parquet -o DIR TRACE…`: traces into a Parquet dataset, each
//! read, analysed and diagnosed here and cut into tables by `coldstart_dataset`. A
//! compacted dataset takes new traces alike: they are added as files of one trace in
//! their build's folders, and the next `coldstart fleet compact` folds them in.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use coldstart_analyze::doctor::DoctorConfig;
use coldstart_dataset::{DatasetWriter, ExportStatus, Exported, TraceLabels};
use coldstart_trace::Trace;

/// What the command line says about every trace of one export.
pub struct Labels {
    pub build: Option<String>,
    pub machine_class: Option<String>,
    pub anonymize: bool,
}

/// Exports one trace; `Ok((id, status))`.
fn export_one(
    dataset: &mut DatasetWriter,
    path: &Path,
    labels: &Labels,
) -> anyhow::Result<(String, ExportStatus)> {
    let id = coldstart_dataset::trace_id_of_file(path).context("cannot read the trace")?;
    if dataset.contains(&id) {
        return Ok((id, ExportStatus::AlreadyThere));
    }
    let mut trace = Trace::read(path).context("cannot read the trace")?;
    if labels.anonymize {
        coldstart_trace::anonymize(&mut trace);
    }
    let analysis = coldstart_analyze::analyze(&trace);
    // Default thresholds and no user languages: a fleet's traces are diagnosed alike,
    // whoever exports them.
    let config = DoctorConfig::default();
    let diagnosis = coldstart_analyze::doctor::diagnose(&trace, &analysis, &config, &[]);
    let source_name = if labels.anonymize {
        String::new()
    } else {
        path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
    };
    let trace_labels = TraceLabels {
        build: labels.build.clone(),
        machine_class: labels.machine_class.clone(),
        source_name,
        source_bytes: std::fs::metadata(path).map(|m| m.len()).unwrap_or(0),
        anonymized: labels.anonymize,
    };
    let exported = Exported {
        id: &id,
        trace: &trace,
        analysis: &analysis,
        diagnosis: &diagnosis,
        labels: &trace_labels,
    };
    let status = dataset.export(&exported).context("cannot write the dataset")?;
    Ok((id, status))
}

pub fn run(dir: &Path, traces: &[PathBuf], labels: &Labels) -> anyhow::Result<ExitCode> {
    if labels.build.as_deref() == Some("") {
        bail!("--build is empty: give the build's name, or leave --build out");
    }
    let on_wait =
        &mut || eprintln!("coldstart: {}: waiting for another export or compaction to finish", dir.display());
    let mut dataset = DatasetWriter::open(dir, on_wait)
        .with_context(|| format!("cannot open the dataset {}", dir.display()))?;
    let total = traces.len();
    let (mut written, mut skipped, mut failed) = (0usize, 0usize, 0usize);
    for (n, path) in traces.iter().enumerate() {
        let at = format!("[{}/{total}] {}", n + 1, path.display());
        match export_one(&mut dataset, path, labels) {
            Ok((id, ExportStatus::Written { rows })) => {
                written += 1;
                eprintln!("coldstart: {at}: trace {id}, {rows} rows");
            }
            Ok((id, ExportStatus::AlreadyThere)) => {
                skipped += 1;
                eprintln!("coldstart: {at}: trace {id} is in the dataset already; skipped");
            }
            Err(e) => {
                failed += 1;
                eprintln!("coldstart: {at}: {}", coldstart_trace::error_chain(e.as_ref()));
            }
        }
    }
    eprintln!("coldstart: {} — {written} written, {skipped} already there, {failed} failed", dir.display());
    if failed > 0 {
        bail!("{failed} of {total} traces could not be exported (see above)");
    }
    Ok(ExitCode::SUCCESS)
}
