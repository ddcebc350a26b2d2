//! `--export-json`: the results as they are (serde), pretty-printed.

use super::Exporter;
use crate::error::{BenchError, Result};
use crate::result::BenchResults;

pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn serialize(&self, results: &BenchResults) -> Result<Vec<u8>> {
        let mut out = serde_json::to_vec_pretty(results).map_err(|e| BenchError::Export(e.into()))?;
        out.push(b'\n');
        Ok(out)
    }
}
