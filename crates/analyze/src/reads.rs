//! Coalescing page fills into read operations, per process and file, and counting
//! file-level seeks: reads that do not continue where the previous one ended.

use coldstart_trace::PageOrigin;

use crate::analysis::{FileUse, PageOrigins, Read};
use crate::context::Ctx;

/// Reads, by (start, pid, file, first page), and one [`FileUse`] per (pid, file) in key order
/// (the order of `ctx.fills_by_stream`, so group `g` is `file_uses[g]`).
pub(crate) struct Coalesced {
    pub reads: Vec<Read>,
    pub file_uses: Vec<FileUse>,
    pub origins: PageOrigins,
}

pub(crate) fn coalesce(ctx: &Ctx) -> Coalesced {
    let fills = &ctx.trace.page_fills;
    let streams = &ctx.fills_by_stream;
    let mut reads: Vec<Read> = Vec::new();
    let mut file_uses = Vec::with_capacity(streams.len());
    let mut origins = PageOrigins::default();
    for g in 0..streams.len() {
        let (pid, file) = streams.key(g);
        let rows = streams.rows(g);
        let mut usage = FileUse { pid, file, ..FileUse::default() };
        let mut current: Option<Read> = None;
        for &row in rows {
            let fill = &fills[row as usize];
            let pages = u64::from(fill.pages);
            match fill.origin {
                Some(PageOrigin::Fault) => origins.fault = origins.fault.saturating_add(pages),
                Some(PageOrigin::Read) => origins.read = origins.read.saturating_add(pages),
                Some(PageOrigin::Readahead) => {
                    origins.readahead = origins.readahead.saturating_add(pages);
                    usage.readahead_pages = usage.readahead_pages.saturating_add(pages);
                }
                None => origins.unknown = origins.unknown.saturating_add(pages),
            }
            usage.pages = usage.pages.saturating_add(pages);
            match &mut current {
                Some(read) if read.first_page + read.pages == fill.index => {
                    read.pages = read.pages.saturating_add(pages);
                    read.end_ns = fill.t_ns;
                }
                _ => {
                    if let Some(done) = current.take() {
                        reads.push(done);
                    }
                    current = Some(Read {
                        t_ns: fill.t_ns,
                        end_ns: fill.t_ns,
                        pid,
                        tid: fill.tid,
                        file,
                        first_page: fill.index,
                        pages,
                        seek: usage.reads > 0,
                    });
                    usage.seeks += u64::from(usage.reads > 0);
                    usage.reads += 1;
                }
            }
        }
        if let Some(done) = current {
            reads.push(done);
        }
        if let (Some(&first), Some(&last)) = (rows.first(), rows.last()) {
            usage.first_ns = fills[first as usize].t_ns;
            usage.last_ns = fills[last as usize].t_ns;
        }
        file_uses.push(usage);
    }
    reads.sort_unstable_by_key(|r| (r.t_ns, r.pid, r.file, r.first_page, r.tid));
    Coalesced { reads, file_uses, origins }
}
