//! Renders an [`Analysis`] for people and programs: one module per format.
//!
//! - [`text`]: the report `coldstart report` prints, and the read listings and
//!   rankings of `coldstart reads`;
//! - [`json`]: the analysis as versioned JSON (docs/report-json.md), the stable
//!   contract charts, the doctor and users' scripts read.
//!
//! Renderers write to any [`std::io::Write`] and never touch the live system;
//! output is deterministic (ties are sorted), so it can be compared in golden tests.

pub mod findings;
pub mod json;
pub mod table;
pub mod text;

use std::io;

use coldstart_analyze::Analysis;

/// The formats `coldstart report` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
}

/// Writes `analysis` in `format`.
pub fn render(format: Format, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
    match format {
        Format::Text => text::report(analysis, &text::Options::default(), out),
        Format::Json => json::write(analysis, out),
    }
}
