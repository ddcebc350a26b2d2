//! CSV tables for spreadsheets and scripts: page fills with their paths, the
//! analysis's coalesced reads, and block requests as recorded. Each table has a
//! header row; fields are quoted as RFC 4180 says (only when needed, quotes doubled)
//! and records end with CRLF. Times are nanoseconds since the trace's t = 0; an
//! empty field is a value the trace does not have (an unresolved path, a request
//! whose issue was not seen).

use std::collections::HashMap;
use std::io::{self, Write};

use coldstart_analyze::Analysis;
use coldstart_trace::{Nanos, TextEnum, Trace};

/// One table of the CSV export.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// `page_fill`: pages entering the page cache, one row per fill.
    Fills,
    /// The analysis's coalesced reads (fills of one file by one process that continue each other).
    Reads,
    /// `block_io`: block requests as recorded, every operation.
    Requests,
}

impl Table {
    pub const ALL: [Table; 3] = [Table::Fills, Table::Reads, Table::Requests];

    /// The file name `coldstart export --format csv -o DIR` gives the table.
    pub fn file_name(self) -> &'static str {
        match self {
            Table::Fills => "page_fills.csv",
            Table::Reads => "reads.csv",
            Table::Requests => "block_requests.csv",
        }
    }
}

/// Names of processes and files, as the trace has them.
struct Names<'t> {
    comm: HashMap<i32, &'t str>,
    path: HashMap<u32, &'t str>,
    disk: HashMap<coldstart_trace::Dev, &'t str>,
}

impl<'t> Names<'t> {
    fn new(trace: &'t Trace) -> Names<'t> {
        let mut procs: Vec<_> = trace.processes.iter().collect();
        procs.sort_by_key(|p| (p.start_ns.unwrap_or(Nanos::MIN), p.pid));
        Names {
            // The latest process with a pid names it (pids are rarely reused within a start).
            comm: procs.iter().map(|p| (p.pid, p.name())).collect(),
            path: trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect(),
            disk: trace.disks.iter().map(|d| (d.dev, d.name.as_str())).collect(),
        }
    }

    fn comm(&self, pid: i32) -> &str {
        self.comm.get(&pid).copied().unwrap_or("")
    }

    fn path(&self, file: u32) -> &str {
        self.path.get(&file).copied().unwrap_or("")
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// Writes `table` as CSV.
pub fn write(table: Table, trace: &Trace, analysis: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::WriterBuilder::new().terminator(::csv::Terminator::CRLF).from_writer(out);
    let names = Names::new(trace);
    let page_size = u64::from(trace.meta.page_size);
    match table {
        Table::Fills => {
            w.write_record([
                "t_ns",
                "pid",
                "tid",
                "comm",
                "file_id",
                "path",
                "page_index",
                "pages",
                "bytes",
                "origin",
            ])?;
            for f in &trace.page_fills {
                w.write_record([
                    f.t_ns.to_string(),
                    f.pid.to_string(),
                    f.tid.to_string(),
                    names.comm(f.pid).to_owned(),
                    f.file_id.to_string(),
                    names.path(f.file_id).to_owned(),
                    f.index.to_string(),
                    f.pages.to_string(),
                    (u64::from(f.pages) * page_size).to_string(),
                    opt(f.origin.map(|o| o.as_str())),
                ])?;
            }
        }
        Table::Reads => {
            w.write_record([
                "t_ns",
                "end_ns",
                "pid",
                "tid",
                "comm",
                "file_id",
                "path",
                "first_page",
                "pages",
                "bytes",
                "seek",
            ])?;
            for r in &analysis.reads {
                w.write_record([
                    r.t_ns.to_string(),
                    r.end_ns.to_string(),
                    r.pid.to_string(),
                    r.tid.to_string(),
                    names.comm(r.pid).to_owned(),
                    r.file.to_string(),
                    names.path(r.file).to_owned(),
                    r.first_page.to_string(),
                    r.pages.to_string(),
                    (r.pages * page_size).to_string(),
                    r.seek.to_string(),
                ])?;
            }
        }
        Table::Requests => {
            w.write_record([
                "issue_ns",
                "complete_ns",
                "latency_ns",
                "dev",
                "disk",
                "sector",
                "bytes",
                "op",
                "rwbs",
                "pid",
                "comm",
                "file_id",
                "path",
                "error",
            ])?;
            for r in &trace.block_ios {
                w.write_record([
                    opt(r.issue_ns),
                    opt(r.complete_ns),
                    opt(r.latency_ns()),
                    r.dev.to_string(),
                    names.disk.get(&r.dev).copied().unwrap_or("").to_owned(),
                    opt(r.sector),
                    r.bytes.to_string(),
                    r.op.as_str().to_owned(),
                    r.rwbs.clone(),
                    r.pid.to_string(),
                    r.comm.clone(),
                    opt(r.file_id),
                    r.file_id.map(|id| names.path(id).to_owned()).unwrap_or_default(),
                    r.error.to_string(),
                ])?;
            }
        }
    }
    w.flush()
}
