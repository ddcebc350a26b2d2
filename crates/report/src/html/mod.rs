//! The interactive HTML report (`coldstart report --format html`): one
//! self-contained file that works offline.
//!
//! The page is a static template ([`TEMPLATE`]) with the stylesheet and the
//! script inlined (real files under `assets/`, pulled in with `include_str!`),
//! and the data embedded as JSON in a `<script type="application/json">`: the
//! analysis (the contract of docs/report-json.md) with its reads and block
//! requests in a compact columnar form, and the [`Timeline`] built from the
//! trace. The script builds the page with DOM APIs and `textContent` only, so a
//! name from the trace is always text. A Content-Security-Policy allows only
//! the page's own script and style (by hash): no network request, no inline
//! event handler, even if some markup slipped through. The timeline lists the
//! processes in [`crate::process_order`]'s order (start order under their parents,
//! short helpers folded into a row that opens on a click), the same as the SVG chart.

mod timeline;

use std::io::{self, Write};

use base64::Engine;
use coldstart_analyze::doctor::Diagnosis;
use coldstart_analyze::{Analysis, DiskRequest, Read};
use coldstart_trace::Nanos;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::process_order::{Shown, process_order};

pub use timeline::{CpuSeries, DiskSeries, Row, SpanState, Timeline};

/// The page around the data; `{{…}}` markers are filled by [`write`].
const TEMPLATE: &str = include_str!("assets/report.html");
const STYLE: &str = include_str!("assets/report.css");
/// The script, in the order the files depend on each other.
const SCRIPTS: [&str; 6] = [
    include_str!("assets/util.js"),
    include_str!("assets/filter.js"),
    include_str!("assets/table.js"),
    include_str!("assets/timeline.js"),
    include_str!("assets/sections.js"),
    include_str!("assets/main.js"),
];

/// The most block requests embedded; beyond that every n-th is kept (and the page says so).
const REQUEST_BUDGET: usize = 250_000;
/// The most coalesced reads embedded, likewise.
const READ_BUDGET: usize = 250_000;

/// Coalesced reads as columns (times in microseconds).
#[derive(Debug, Default, Serialize)]
struct ReadColumns {
    /// 1 when every read is embedded, n when only every n-th is.
    every: usize,
    t_us: Vec<i64>,
    dur_us: Vec<i64>,
    pid: Vec<i32>,
    tid: Vec<i32>,
    file: Vec<u32>,
    first_page: Vec<u64>,
    pages: Vec<u64>,
    seek: Vec<u8>,
}

/// One disk's block requests as columns (times in microseconds).
#[derive(Debug, Default, Serialize)]
struct RequestColumns {
    /// Index in `analysis.disks`.
    disk: usize,
    every: usize,
    /// Issue time (completion time when the issue was not seen).
    t_us: Vec<i64>,
    /// Issue to completion, `-1` when unknown.
    lat_us: Vec<i64>,
    sector: Vec<u64>,
    bytes: Vec<u32>,
    pid: Vec<i32>,
    /// The file id, `-1` when none.
    file: Vec<i64>,
    /// Bit 0: filesystem metadata; bit 1: far seek; bit 2: not a read.
    flags: Vec<u8>,
}

/// One row of the timeline's process list, in [`process_order`]'s order.
#[derive(Debug, PartialEq, Eq, Serialize)]
struct OrderEntry {
    /// The process, an index into `analysis.processes`; absent for folded helpers.
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<usize>,
    /// Folded short helpers: `[index, depth below this entry]` each, in tree order.
    #[serde(skip_serializing_if = "Option::is_none")]
    helpers: Option<Vec<[usize; 2]>>,
    /// The entry of the parent process, if any.
    parent: Option<usize>,
}

fn order_entries(analysis: &Analysis) -> Vec<OrderEntry> {
    process_order(analysis)
        .entries
        .into_iter()
        .map(|e| match e.shown {
            Shown::Process(i) => OrderEntry { process: Some(i), helpers: None, parent: e.parent },
            Shown::Helpers(list) => OrderEntry {
                process: None,
                helpers: Some(list.into_iter().map(|(i, depth)| [i, depth]).collect()),
                parent: e.parent,
            },
        })
        .collect()
}

/// Everything the page's script reads.
#[derive(Serialize)]
struct PageData<'a> {
    generator: String,
    analysis: &'a Analysis,
    /// The processes in chart order: start order under their parents, short helpers folded.
    order: Vec<OrderEntry>,
    reads: ReadColumns,
    requests: Vec<RequestColumns>,
    timeline: Option<&'a Timeline>,
    /// The doctor's findings (docs/report-json.md, `doctor`), when they were made.
    doctor: Option<&'a Diagnosis>,
}

fn micros(ns: Nanos) -> i64 {
    ns.div_euclid(1000)
}

fn stride(len: usize, budget: usize) -> usize {
    len.div_ceil(budget.max(1)).max(1)
}

fn read_columns(reads: &[Read]) -> ReadColumns {
    let every = stride(reads.len(), READ_BUDGET);
    let mut c = ReadColumns { every, ..ReadColumns::default() };
    for r in reads.iter().step_by(every) {
        c.t_us.push(micros(r.t_ns));
        c.dur_us.push(micros(r.end_ns) - micros(r.t_ns));
        c.pid.push(r.pid);
        c.tid.push(r.tid);
        c.file.push(r.file);
        c.first_page.push(r.first_page);
        c.pages.push(r.pages);
        c.seek.push(u8::from(r.seek));
    }
    c
}

fn request_columns(disk: usize, requests: &[DiskRequest], every: usize) -> RequestColumns {
    let mut c = RequestColumns { disk, every, ..RequestColumns::default() };
    for r in requests.iter().step_by(every) {
        let Some(t) = r.issue_ns.or(r.complete_ns) else { continue };
        c.t_us.push(micros(t));
        c.lat_us.push(match (r.issue_ns, r.complete_ns) {
            (Some(i), Some(e)) => micros(e - i),
            _ => -1,
        });
        c.sector.push(r.sector);
        c.bytes.push(r.bytes);
        c.pid.push(r.pid);
        c.file.push(r.file.map_or(-1, i64::from));
        let not_read = r.op != coldstart_trace::BlockOp::Read;
        c.flags.push(u8::from(r.metadata) | (u8::from(r.far) << 1) | (u8::from(not_read) << 2));
    }
    c
}

/// The embedded JSON, safe inside a `<script>` element: `<`, `>` and `&` are
/// written as `\u003c`, `\u003e`, `\u0026` (they only occur inside JSON strings),
/// so no name can close the element or open a comment.
fn script_safe_json(data: &PageData) -> io::Result<Vec<u8>> {
    let json = serde_json::to_vec(data).map_err(io::Error::from)?;
    let mut out = Vec::with_capacity(json.len() + json.len() / 64);
    for &b in &json {
        match b {
            b'<' => out.extend_from_slice(b"\\u003c"),
            b'>' => out.extend_from_slice(b"\\u003e"),
            b'&' => out.extend_from_slice(b"\\u0026"),
            _ => out.push(b),
        }
    }
    Ok(out)
}

/// The page's script: every asset, in one strict-mode function scope.
fn script() -> String {
    let mut s = String::from("\n(() => {\n'use strict';\n");
    for part in SCRIPTS {
        s.push_str(part);
        s.push('\n');
    }
    s.push_str("})();\n");
    s
}

/// `'sha256-…'`, the CSP source that allows exactly this inline element content.
fn csp_hash(content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(digest))
}

/// Writes the report of `analysis` as one HTML page. Without a `timeline` (built
/// from the trace) process rows show lifetimes and reads but no thread states, and
/// there are no CPU and disk graphs; without `doctor` the findings tab says how to get them.
pub fn write(
    analysis: &Analysis,
    timeline: Option<&Timeline>,
    doctor: Option<&Diagnosis>,
    out: &mut dyn Write,
) -> io::Result<()> {
    let mut requests = Vec::with_capacity(analysis.disks.len());
    let total: usize = analysis.disks.iter().map(|d| d.requests.len()).sum();
    let every = stride(total, REQUEST_BUDGET);
    for (i, d) in analysis.disks.iter().enumerate() {
        requests.push(request_columns(i, &d.requests, every));
    }
    let mut slim = analysis.clone();
    slim.reads = Vec::new();
    for d in &mut slim.disks {
        d.requests = Vec::new();
    }
    let data = PageData {
        generator: format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        analysis: &slim,
        order: order_entries(analysis),
        reads: read_columns(&analysis.reads),
        requests,
        timeline,
        doctor,
    };
    let json = script_safe_json(&data)?;
    let script = script();
    let style = format!("\n{STYLE}");
    let csp = format!(
        "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(&script),
        csp_hash(&style)
    );

    let mut out = io::BufWriter::new(out);
    let mut rest = TEMPLATE;
    while let Some(open) = rest.find("{{") {
        out.write_all(&rest.as_bytes()[..open])?;
        let close = rest[open..].find("}}").map_or(rest.len(), |c| open + c + 2);
        match &rest[open..close] {
            "{{CSP}}" => out.write_all(csp.as_bytes())?,
            "{{STYLE}}" => out.write_all(style.as_bytes())?,
            "{{DATA}}" => out.write_all(&json)?,
            "{{SCRIPT}}" => out.write_all(script.as_bytes())?,
            other => out.write_all(other.as_bytes())?,
        }
        rest = &rest[close..];
    }
    out.write_all(rest.as_bytes())?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_each_marker_once() {
        for marker in ["{{CSP}}", "{{STYLE}}", "{{DATA}}", "{{SCRIPT}}"] {
            assert_eq!(TEMPLATE.matches(marker).count(), 1, "{marker}");
        }
    }

    #[test]
    fn no_asset_can_close_its_own_element() {
        for part in SCRIPTS {
            assert!(!part.contains("</script"), "a script asset contains </script");
        }
        assert!(!STYLE.contains("</style"));
    }
}
