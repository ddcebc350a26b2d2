//! What the dataset's tests share: the real fixtures, unpacked and exported.

use std::io::Read;
use std::path::{Path, PathBuf};

use coldstart_analyze::doctor::DoctorConfig;
use coldstart_dataset::{ExportStatus, Exported, TraceLabels};
use coldstart_trace::Trace;

/// A fixture unpacked into `dir`; returns its path.
pub fn unpack(name: &str, dir: &Path) -> PathBuf {
    let gz = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures")
        .join(format!("{name}.coldstart.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()).read_to_end(&mut bytes).unwrap();
    let path = dir.join(format!("{name}.coldstart"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Exports the trace at `trace_path` into `dataset` with build `build`; its id and what the export did.
pub fn export(dataset: &Path, trace_path: &Path, build: &str) -> (String, ExportStatus) {
    let id = coldstart_dataset::trace_id_of_file(trace_path).unwrap();
    let trace = Trace::read(trace_path).unwrap();
    let analysis = coldstart_analyze::analyze(&trace);
    let diagnosis = coldstart_analyze::doctor::diagnose(&trace, &analysis, &DoctorConfig::default(), &[]);
    let labels = TraceLabels { build: Some(build.into()), ..TraceLabels::default() };
    let exported =
        Exported { id: &id, trace: &trace, analysis: &analysis, diagnosis: &diagnosis, labels: &labels };
    let status = coldstart_dataset::export(dataset, &exported).unwrap();
    (id, status)
}
