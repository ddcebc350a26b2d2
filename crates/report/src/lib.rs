//! Renders an [`Analysis`] for people and programs: one module per format.
//!
//! - [`text`]: the report `coldstart report` prints, and the read listings and
//!   rankings of `coldstart reads`;
//! - [`json`]: the analysis as versioned JSON (docs/report-json.md), the stable
//!   contract charts, the doctor and users' scripts read;
//! - [`html`]: the interactive, self-contained HTML report.
//! - [`svg`]: the bootchart-style chart, drawn from the trace and its analysis;
//! - [`syscalls`]: the system-call timeline and totals of `coldstart syscalls`;
//! - [`export`]: the trace for other tools: Chrome Trace Event JSON (Perfetto UI,
//!   chrome://tracing) and CSV tables.
//!
//! Renderers write to any [`std::io::Write`] and never touch the live system;
//! output is deterministic (ties are sorted), so it can be compared in golden tests.

#![forbid(unsafe_code)]

pub mod export;
pub mod findings;
pub mod flamegraph;
pub mod html;
pub mod json;
pub mod process_order;
pub mod svg;
pub mod syscalls;
pub mod table;
pub mod text;

/// A command line as a shell would take it back: arguments quoted where needed
/// (`-c 'import json, csv'`), so the reader sees where each one ends.
pub fn command_line(args: &[String]) -> String {
    args.iter().map(|a| coldstart_analyze::doctor::shell_quote(a)).collect::<Vec<_>>().join(" ")
}
