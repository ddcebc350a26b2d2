//! Lookups and rankings over a finished [`Analysis`]: files and processes by id,
//! reads and rankings restricted to a process or to paths containing a string.

use rustc_hash::FxHashMap;

use crate::analysis::{Analysis, FileInfo, FileUse, ProcessInfo, RankRow, Read};

/// What a ranking groups reads by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RankBy {
    File,
    Process,
}

/// Restricts reads and rankings to one process and/or to files whose name contains a string.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadFilter {
    pub pid: Option<i32>,
    pub path_contains: Option<String>,
}

impl ReadFilter {
    fn accepts(&self, analysis: &Analysis, pid: i32, file: u32) -> bool {
        self.pid.is_none_or(|p| p == pid)
            && self.path_contains.as_deref().is_none_or(|s| analysis.file_name(file).contains(s))
    }
}

impl Analysis {
    /// The file with trace id `id`.
    pub fn file(&self, id: u32) -> Option<&FileInfo> {
        self.files.binary_search_by_key(&id, |f| f.id).ok().map(|i| &self.files[i])
    }

    /// The name to show for a file: its path, or a placeholder saying why there is none.
    pub fn file_name(&self, id: u32) -> &str {
        self.file(id).map_or("<unknown file>", |f| f.name.as_str())
    }

    /// The latest-started process with `pid`.
    pub fn process(&self, pid: i32) -> Option<&ProcessInfo> {
        self.processes.iter().rev().find(|p| p.pid == pid)
    }

    /// The `comm` to show for a pid (`?` when unknown).
    pub fn comm(&self, pid: i32) -> &str {
        self.process(pid).map_or("?", |p| if p.comm.is_empty() { "?" } else { p.comm.as_str() })
    }

    /// Coalesced reads passing `filter`, in time order.
    pub fn reads_matching<'a>(&'a self, filter: &'a ReadFilter) -> impl Iterator<Item = &'a Read> + 'a {
        self.reads.iter().filter(move |r| filter.accepts(self, r.pid, r.file))
    }

    /// Files or processes ranked by separate reads (then bytes, then name), over the
    /// reads passing `filter`.
    pub fn rank(&self, by: RankBy, filter: &ReadFilter) -> Vec<RankRow> {
        let page_size = u64::from(self.trace.page_size);
        let mut rows: FxHashMap<i64, RankRow> = FxHashMap::default();
        let uses = self.file_uses.iter().filter(|u| filter.accepts(self, u.pid, u.file));
        for u in uses {
            let key = match by {
                RankBy::File => i64::from(u.file),
                RankBy::Process => i64::from(u.pid),
            };
            let row = rows.entry(key).or_insert_with(|| match by {
                RankBy::File => RankRow::new(Some(u.file), None, self.file_name(u.file)),
                RankBy::Process => RankRow::new(None, Some(u.pid), self.comm(u.pid)),
            });
            row.add(u, page_size);
        }
        let mut rows: Vec<RankRow> = rows.into_values().collect();
        rows.sort_by(|a, b| {
            b.reads
                .cmp(&a.reads)
                .then(b.bytes.cmp(&a.bytes))
                .then(a.name.cmp(&b.name))
                .then(a.file.cmp(&b.file))
                .then(a.pid.cmp(&b.pid))
        });
        rows
    }
}

impl RankRow {
    fn new(file: Option<u32>, pid: Option<i32>, name: &str) -> RankRow {
        RankRow {
            file,
            pid,
            name: name.to_owned(),
            reads: 0,
            seeks: 0,
            pages: 0,
            bytes: 0,
            io_wait_ns: 0,
            spread: 0,
        }
    }

    fn add(&mut self, u: &FileUse, page_size: u64) {
        self.reads = self.reads.saturating_add(u.reads);
        self.seeks = self.seeks.saturating_add(u.seeks);
        self.pages = self.pages.saturating_add(u.pages);
        self.bytes = self.bytes.saturating_add(u.pages.saturating_mul(page_size));
        self.io_wait_ns = self.io_wait_ns.saturating_add(u.io_wait_ns);
        self.spread += 1;
    }
}
