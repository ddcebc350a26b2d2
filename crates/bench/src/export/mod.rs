//! Exporters: one file per format behind one trait. JSON is the stable contract;
//! Markdown and CSV are views of the same results.

mod csv;
mod json;
mod markdown;

pub use self::csv::CsvExporter;
pub use self::json::JsonExporter;
pub use self::markdown::MarkdownExporter;

use crate::error::Result;
use crate::result::BenchResults;

pub trait Exporter {
    fn serialize(&self, results: &BenchResults) -> Result<Vec<u8>>;
}
