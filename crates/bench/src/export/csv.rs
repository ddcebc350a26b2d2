//! `--export-csv`: hyperfine's columns (command, mean, stddev, median, user, system,
//! min, max), then coldstart's. Seconds and bytes.

use coldstart_trace::TextEnum;

use super::Exporter;
use crate::error::{BenchError, Result};
use crate::result::BenchResults;

pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn serialize(&self, results: &BenchResults) -> Result<Vec<u8>> {
        let err = |e: csv::Error| BenchError::Export(e.into());
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record([
            "command",
            "mean",
            "stddev",
            "median",
            "user",
            "system",
            "min",
            "max",
            "cache",
            "evict",
            "until",
            "runs",
            "mean_ci95_low",
            "mean_ci95_high",
            "median_read_bytes",
            "median_major_faults",
            "median_io_wait",
        ])
        .map_err(err)?;
        let opt = |v: Option<f64>| v.map(|v| v.to_string()).unwrap_or_default();
        for r in &results.results {
            w.write_record([
                r.command.clone(),
                r.mean.to_string(),
                opt(r.stddev),
                r.median.to_string(),
                r.user.to_string(),
                r.system.to_string(),
                r.min.to_string(),
                r.max.to_string(),
                r.cache.as_str().to_owned(),
                r.evict.map(|e| e.name().to_owned()).unwrap_or_default(),
                r.until.clone(),
                r.times.len().to_string(),
                r.mean_ci95[0].to_string(),
                r.mean_ci95[1].to_string(),
                opt(r.median_read_bytes),
                opt(r.median_major_faults),
                opt(r.median_io_wait),
            ])
            .map_err(err)?;
        }
        w.into_inner().map_err(|e| BenchError::Export(e.into_error().into()))
    }
}
