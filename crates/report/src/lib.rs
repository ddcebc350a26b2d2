//! Renders an [`Analysis`] for people and programs: one module per format.
//!
//! - [`text`]: the report `coldstart report` prints, and the read listings and
//!   rankings of `coldstart reads`;
//! - [`json`]: the analysis as versioned JSON (docs/report-json.md), the stable
//!   contract charts, the doctor and users' scripts read;
//! - [`html`]: the interactive, self-contained HTML report.
//! - [`svg`]: the bootchart-style chart, drawn from the trace and its analysis;
//! - [`export`]: the trace for other tools: Chrome Trace Event JSON (Perfetto UI,
//!   chrome://tracing) and CSV tables.
//!
//! Renderers write to any [`std::io::Write`] and never touch the live system;
//! output is deterministic (ties are sorted), so it can be compared in golden tests.

#![forbid(unsafe_code)]

pub mod export;
pub mod findings;
pub mod html;
pub mod json;
pub mod svg;
pub mod table;
pub mod text;

use std::io;

use coldstart_analyze::Analysis;

/// The formats `coldstart report` can write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    /// The interactive page; through [`render`] without the trace's timeline (see [`html::write`]).
    Html,
    /// The bootchart; it needs the trace's samples and scheduler intervals, so
    /// [`render`] refuses it: call [`svg::write`] with the trace.
    Svg,
}

/// Writes `analysis` in `format`.
pub fn render(format: Format, analysis: &Analysis, out: &mut dyn io::Write) -> io::Result<()> {
    match format {
        Format::Text => text::report(analysis, &text::Options::default(), out),
        Format::Json => json::write(analysis, out),
        Format::Html => html::write(analysis, None, None, out),
        Format::Svg => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the SVG chart is drawn from the trace as well as its analysis (svg::write)",
        )),
    }
}

/// A command line as a shell would take it back: arguments quoted where needed
/// (`-c 'import json, csv'`), so the reader sees where each one ends.
pub fn command_line(args: &[String]) -> String {
    args.iter()
        .map(|a| shlex::try_quote(a).map_or_else(|_| format!("{a:?}"), |q| q.into_owned()))
        .collect::<Vec<_>>()
        .join(" ")
}
