//! Page fills and page accesses: why each page entered the cache, and which pages
//! the program asked for.
//!
//! Accesses come from `filemap:mm_filemap_get_pages` (a read's range, traced when
//! the read has its pages, after any fill it caused), `mm_filemap_fault` (one page,
//! traced when the fault starts, before its fills) and `mm_filemap_map_pages` (the
//! fault-around window, traced after mapping the cached pages in it; the page that
//! faulted is one of them). They fire on cache hits too, so the assembly merges
//! consecutive accesses of one thread to one file and kind that repeat or extend
//! the previous range into one row that keeps the first time, and clips read ranges
//! to the end of the file (a read may ask for more than the file holds).
//!
//! The origin of a fill is decided from the events of the thread that made it,
//! in time order (fills are made by the task that needed them):
//! - `fault`: the thread's most recent access is a fault on that file and the fill
//!   holds the faulting page;
//! - `read`: a readahead decision of a read (`readahead:page_cache_sync_ra` or
//!   `page_cache_async_ra` on that file) came before the fill, and either the
//!   thread's next access is a read of that file whose range holds pages of the
//!   fill, or the decision's own request (`page_cache_sync_ra` index and
//!   `req_count`, outside a fault) holds them — io_uring queues a read whose pages
//!   are not in yet and traces its access only when it completes;
//! - `readahead`: any other fill after a fault or a readahead decision on that file
//!   (the window around or after the request), or after `page_cache_ra_unbounded`
//!   on its own (an explicit prefetch: `fadvise(WILLNEED)`, `readahead(2)`);
//! - none (NULL): fills with none of these before them: writes, filesystem metadata.

use std::collections::{HashMap, HashSet};

use coldstart_trace::{AccessKind, Dev, FileKind, Nanos, PageAccess, PageFill, PageOrigin};

use crate::assemble::files::FileTable;
use crate::assemble::procs::ProcTree;
use crate::assemble::system_view::SystemView;
use crate::ftrace::events::{Event, ReadaheadKind, Timed};

/// A file as page-cache events name it: (`s_dev` in the kernel encoding, inode).
pub type Key = (u32, u64);

/// Pages `start..end` of one file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Range {
    key: Key,
    start: u64,
    end: u64,
}

impl Range {
    fn overlaps(&self, other: &Range) -> bool {
        self.key == other.key && self.start < other.end && other.start < self.end
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Trigger {
    /// A read's or fault's readahead decision (sync or async); a sync decision
    /// names the pages `start..end` that were asked for.
    Decision { request: Option<(u64, u64)> },
    /// Readahead of a range without a decision before it: an explicit prefetch.
    Prefetch,
}

#[derive(Clone, Copy, Debug)]
struct Access {
    kind: AccessKind,
    range: Range,
}

struct Pending {
    fill: usize,
    range: Range,
    trigger: Option<Trigger>,
}

#[derive(Default)]
struct ThreadState {
    last: Option<Access>,
    trigger: Option<(Key, Trigger)>,
    pending: Vec<Pending>,
}

/// Decides the origin of fills from the events of their threads, fed in time order.
#[derive(Default)]
pub struct Origins {
    threads: HashMap<i32, ThreadState>,
    decided: Vec<(usize, Option<PageOrigin>)>,
}

fn origin(p: &Pending, last: Option<&Access>, next: Option<&Access>) -> Option<PageOrigin> {
    let after_fault = last.filter(|a| a.kind == AccessKind::Fault && a.range.key == p.range.key);
    if after_fault.is_some_and(|a| a.range.overlaps(&p.range)) {
        return Some(PageOrigin::Fault);
    }
    if let Some(Trigger::Decision { request }) = p.trigger {
        let read_next = next.is_some_and(|a| a.kind == AccessKind::Read && a.range.overlaps(&p.range));
        // A read's own request (not a fault's, which asks for the whole window): it
        // names the fill even when the read finishes later, as io_uring's do.
        let asked = after_fault.is_none()
            && request.is_some_and(|(start, end)| start < p.range.end && p.range.start < end);
        if read_next || asked {
            return Some(PageOrigin::Read);
        }
    }
    (after_fault.is_some() || p.trigger.is_some()).then_some(PageOrigin::Readahead)
}

impl ThreadState {
    fn resolve(&mut self, next: Option<&Access>, out: &mut Vec<(usize, Option<PageOrigin>)>) {
        for p in self.pending.drain(..) {
            out.push((p.fill, origin(&p, self.last.as_ref(), next)));
        }
    }
}

impl Origins {
    /// Fill number `fill` (the caller's index) of `pages` pages from `index`.
    pub fn fill(&mut self, fill: usize, tid: i32, key: Key, index: u64, pages: u64) {
        let st = self.threads.entry(tid).or_default();
        let trigger = st.trigger.filter(|(k, _)| *k == key).map(|(_, t)| t);
        st.pending.push(Pending { fill, range: Range { key, start: index, end: index + pages }, trigger });
    }

    pub fn readahead(&mut self, tid: i32, key: Key, kind: ReadaheadKind) {
        let st = self.threads.entry(tid).or_default();
        st.trigger = match kind {
            ReadaheadKind::Sync { index, count } => {
                Some((key, Trigger::Decision { request: Some((index, index.saturating_add(count))) }))
            }
            ReadaheadKind::Async => Some((key, Trigger::Decision { request: None })),
            ReadaheadKind::Unbounded => match st.trigger {
                Some((k, Trigger::Decision { .. })) if k == key => st.trigger,
                _ => Some((key, Trigger::Prefetch)),
            },
        };
    }

    /// Pages `start..end` asked for.
    pub fn access(&mut self, tid: i32, key: Key, start: u64, end: u64, kind: AccessKind) {
        let st = self.threads.entry(tid).or_default();
        let access = Access { kind, range: Range { key, start, end } };
        st.resolve(Some(&access), &mut self.decided);
        st.last = Some(access);
        st.trigger = None;
    }

    /// The origin of every fill passed in, by the caller's index.
    pub fn finish(mut self) -> Vec<(usize, Option<PageOrigin>)> {
        for st in self.threads.values_mut() {
            st.resolve(None, &mut self.decided);
        }
        self.decided
    }
}

/// The page events of a recording's scope, before merging.
pub struct Collected {
    pub fills: Vec<PageFill>,
    /// One row per access event, in time order.
    pub accesses: Vec<PageAccess>,
    /// Accesses to files of memory filesystems (device 0:x) that no fill touched.
    pub left_out: u64,
}

/// Turns the scope's fill, access and readahead events that `keep(tid, t, tree)`
/// accepts into fills (with their origin) and raw accesses, giving each file an id.
pub fn collect(
    events: &[Timed],
    boot: impl Fn(u64) -> Nanos,
    keep: impl Fn(i32, Nanos, &ProcTree) -> bool,
    tree: &mut ProcTree,
    files: &mut FileTable,
    page_size: u64,
    system: &dyn SystemView,
) -> Collected {
    let mut fills = Vec::new();
    let mut filled_keys = HashSet::new();
    let mut raw = Vec::new();
    let mut origins = Origins::default();
    for e in events {
        let t = boot(e.ts);
        let tid = match &e.event {
            Event::PageCacheAdd { tid, .. }
            | Event::PageAccess { tid, .. }
            | Event::Readahead { tid, .. } => *tid,
            _ => continue,
        };
        if !keep(tid, t, tree) {
            continue;
        }
        match &e.event {
            Event::PageCacheAdd { dev, ino, index, order, .. } => {
                tree.ensure_task(tid, system);
                let file_id = files.for_fill(*dev, *ino, page_size, system);
                let shift = files.index_shift.get(&file_id).copied().unwrap_or(0);
                let pages = 1u32 << order.min(&31);
                origins.fill(fills.len(), tid, (*dev, *ino), *index, u64::from(pages));
                filled_keys.insert((*dev, *ino));
                let pid = tree.tgid(tid);
                fills.push(PageFill {
                    t_ns: t,
                    pid,
                    tid,
                    file_id,
                    index: index + shift,
                    pages,
                    origin: None,
                });
            }
            Event::PageAccess { dev, ino, index, last, kind, .. } if last >= index => {
                origins.access(tid, (*dev, *ino), *index, last + 1, *kind);
                raw.push((t, tid, (*dev, *ino), *index, *last, *kind));
            }
            Event::Readahead { dev, ino, kind, .. } => origins.readahead(tid, (*dev, *ino), *kind),
            _ => {}
        }
    }
    for (i, origin) in origins.finish() {
        fills[i].origin = origin;
    }
    let mut left_out = 0;
    let mut accesses = Vec::with_capacity(raw.len());
    for (t, tid, key, index, last, kind) in raw {
        if Dev::from_kernel(key.0).major == 0 && !filled_keys.contains(&key) {
            left_out += 1;
            continue;
        }
        tree.ensure_task(tid, system);
        let file_id = files.for_fill(key.0, key.1, page_size, system);
        let shift = files.index_shift.get(&file_id).copied().unwrap_or(0);
        accesses.push(raw_access(t, tree.tgid(tid), tid, file_id, index + shift, last + shift, kind));
    }
    Collected { fills, accesses, left_out }
}

/// The fills, and the accesses merged and clipped to each regular file's size
/// (or its last filled page, if further: the file may have grown).
pub fn finish(c: Collected, files: &FileTable, page_size: u64) -> (Vec<PageFill>, Vec<PageAccess>) {
    let mut filled_end: HashMap<u32, u64> = HashMap::new();
    for f in &c.fills {
        let end = filled_end.entry(f.file_id).or_default();
        *end = (*end).max(f.index + u64::from(f.pages));
    }
    let file_pages = |id: u32| {
        let f = files.files.get(id as usize).filter(|f| f.kind == FileKind::Regular)?;
        let size_pages = f.size?.div_ceil(page_size);
        Some(size_pages.max(filled_end.get(&id).copied().unwrap_or(0)))
    };
    let accesses = merge(c.accesses, file_pages);
    (c.fills, accesses)
}

/// Clips each access to `pages_of(file)` pages (where known), drops what is left
/// empty, and merges an access into the thread's previous row when that row is of
/// the same file and kind and the access starts inside it or right after it.
/// `raw` must be in time order; each row keeps the time of its first access.
pub fn merge(raw: Vec<PageAccess>, pages_of: impl Fn(u32) -> Option<u64>) -> Vec<PageAccess> {
    let mut out: Vec<PageAccess> = Vec::new();
    let mut last_row: HashMap<i32, usize> = HashMap::new();
    for mut a in raw {
        let mut end = a.index + u64::from(a.pages);
        if let Some(limit) = pages_of(a.file_id) {
            end = end.min(limit);
        }
        if end <= a.index {
            continue;
        }
        if let Some(prev) = last_row.get(&a.tid).map(|&i| &mut out[i]) {
            let prev_end = prev.index + u64::from(prev.pages);
            if prev.file_id == a.file_id && prev.kind == a.kind && (prev.index..=prev_end).contains(&a.index)
            {
                prev.pages = clamp_pages(prev_end.max(end) - prev.index);
                continue;
            }
        }
        a.pages = clamp_pages(end - a.index);
        last_row.insert(a.tid, out.len());
        out.push(a);
    }
    out
}

fn clamp_pages(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Pages accessed and pages read ahead, for the recording's summary.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Distinct pages some access named (any thread, any kind).
    pub accessed_pages: u64,
    /// Pages of fills with origin `readahead`.
    pub readahead_pages: u64,
    /// Of those, pages no access named during the recording.
    pub readahead_unused_pages: u64,
}

/// Sorted, disjoint page ranges.
pub(super) fn union(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Pages of `start..end` that `ranges` (sorted, disjoint) hold.
fn covered(ranges: &[(u64, u64)], start: u64, end: u64) -> u64 {
    let first = ranges.partition_point(|r| r.1 <= start);
    ranges[first..].iter().take_while(|r| r.0 < end).map(|r| r.1.min(end) - r.0.max(start)).sum()
}

pub fn usage(fills: &[PageFill], accesses: &[PageAccess]) -> Usage {
    let mut by_file: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for a in accesses {
        by_file.entry(a.file_id).or_default().push((a.index, a.index + u64::from(a.pages)));
    }
    let by_file: HashMap<u32, Vec<(u64, u64)>> = by_file.into_iter().map(|(f, r)| (f, union(r))).collect();
    let mut u =
        Usage { accessed_pages: by_file.values().flatten().map(|r| r.1 - r.0).sum(), ..Usage::default() };
    for f in fills.iter().filter(|f| f.origin == Some(PageOrigin::Readahead)) {
        let (start, end) = (f.index, f.index + u64::from(f.pages));
        let used = by_file.get(&f.file_id).map_or(0, |r| covered(r, start, end));
        u.readahead_pages += end - start;
        u.readahead_unused_pages += end - start - used;
    }
    u
}

/// One access event as a row before merging (`last` inclusive, as the kernel reports it).
pub fn raw_access(
    t_ns: Nanos,
    pid: i32,
    tid: i32,
    file_id: u32,
    index: u64,
    last: u64,
    kind: AccessKind,
) -> PageAccess {
    PageAccess { t_ns, pid, tid, file_id, index, pages: clamp_pages(last.saturating_sub(index) + 1), kind }
}

#[cfg(test)]
mod tests {
    use super::*;
    use AccessKind as A;
    use PageOrigin as O;

    const F: Key = (266338304, 12);
    const G: Key = (266338304, 13);

    fn decided(o: Origins) -> Vec<Option<PageOrigin>> {
        let mut d = o.finish();
        d.sort_by_key(|x| x.0);
        d.into_iter().map(|x| x.1).collect()
    }

    #[test]
    fn a_read_owns_the_fills_of_its_range_and_the_rest_is_readahead() {
        let mut o = Origins::default();
        o.readahead(7, F, ReadaheadKind::Sync { index: 0, count: 1 });
        for i in 0..4 {
            o.fill(i as usize, 7, F, i, 1);
        }
        o.access(7, F, 0, 1, A::Read);
        o.readahead(7, F, ReadaheadKind::Async);
        o.fill(4, 7, F, 4, 4);
        o.access(7, F, 1, 2, A::Read);
        assert_eq!(
            decided(o),
            [Some(O::Read), Some(O::Readahead), Some(O::Readahead), Some(O::Readahead), Some(O::Readahead)]
        );
    }

    #[test]
    fn a_fault_owns_the_fill_of_its_page_and_the_window_around_is_readahead() {
        let mut o = Origins::default();
        o.access(3, F, 0, 16, A::MapAround);
        o.access(3, F, 5, 6, A::Fault);
        for i in 0..8 {
            o.fill(i as usize, 3, F, i, 1);
        }
        o.fill(8, 3, G, 0, 1);
        o.access(3, F, 0, 16, A::MapAround);
        let d = decided(o);
        assert_eq!(d[5], Some(O::Fault));
        assert!(d[..5].iter().chain(&d[6..8]).all(|x| *x == Some(O::Readahead)));
        assert_eq!(d[8], None, "a fill of another file after the fault has no known origin");
    }

    #[test]
    fn prefetches_writes_and_other_threads_are_told_apart() {
        let mut o = Origins::default();
        o.readahead(1, F, ReadaheadKind::Unbounded);
        o.fill(0, 1, F, 0, 32);
        o.access(1, F, 2, 3, A::Read);
        o.fill(1, 1, G, 0, 2);
        o.access(1, G, 0, 3, A::Read);
        o.readahead(2, G, ReadaheadKind::Sync { index: 8, count: 1 });
        o.readahead(2, G, ReadaheadKind::Unbounded);
        o.fill(2, 2, G, 8, 1);
        o.access(1, G, 8, 9, A::Read);
        o.access(2, G, 8, 9, A::Read);
        assert_eq!(decided(o), [Some(O::Readahead), None, Some(O::Read)]);
    }

    #[test]
    fn queued_reads_own_the_pages_they_asked_for() {
        let mut o = Origins::default();
        o.readahead(5, F, ReadaheadKind::Sync { index: 10, count: 1 });
        o.readahead(5, F, ReadaheadKind::Unbounded);
        o.fill(0, 5, F, 10, 1);
        o.readahead(5, F, ReadaheadKind::Sync { index: 20, count: 1 });
        o.fill(1, 5, F, 20, 1);
        o.fill(2, 5, F, 21, 1);
        o.access(5, F, 10, 11, A::Read);
        o.access(5, F, 20, 21, A::Read);
        o.access(5, F, 30, 31, A::Fault);
        o.readahead(5, F, ReadaheadKind::Sync { index: 30, count: 512 });
        o.fill(3, 5, F, 31, 1);
        o.access(5, F, 0, 16, A::MapAround);
        assert_eq!(
            decided(o),
            [Some(O::Read), Some(O::Read), Some(O::Readahead), Some(O::Readahead)],
            "a fault's sync decision asks for its whole window: only the faulting page is the fault's"
        );
    }

    fn row(t: Nanos, tid: i32, file: u32, index: u64, pages: u32, kind: AccessKind) -> PageAccess {
        PageAccess { t_ns: t, pid: 1, tid, file_id: file, index, pages, kind }
    }

    #[test]
    fn merge_joins_repeats_and_extensions_of_one_thread_and_clips_to_the_file() {
        let raw = vec![
            row(1, 1, 0, 0, 4, A::Read),
            row(2, 1, 0, 1, 3, A::Read),
            row(3, 2, 0, 4, 4, A::Read),
            row(4, 1, 0, 4, 4, A::Read),
            row(5, 1, 0, 4, 1, A::Fault),
            row(6, 1, 0, 20, 256, A::Read),
            row(7, 1, 0, 60, 1, A::Read),
            row(8, 1, 1, 0, 1, A::Read),
            row(9, 1, 0, 2, 1, A::Read),
        ];
        let merged = merge(raw, |f| (f == 0).then_some(24));
        assert_eq!(
            merged,
            [
                row(1, 1, 0, 0, 8, A::Read),
                row(3, 2, 0, 4, 4, A::Read),
                row(5, 1, 0, 4, 1, A::Fault),
                row(6, 1, 0, 20, 4, A::Read),
                row(8, 1, 1, 0, 1, A::Read),
                row(9, 1, 0, 2, 1, A::Read),
            ]
        );
    }

    #[test]
    fn usage_counts_readahead_pages_no_access_named() {
        let fill =
            |index, pages, origin| PageFill { t_ns: 0, pid: 1, tid: 1, file_id: 0, index, pages, origin };
        let fills =
            [fill(0, 1, Some(O::Read)), fill(1, 3, Some(O::Readahead)), fill(8, 8, Some(O::Readahead))];
        let accesses =
            [row(1, 1, 0, 0, 1, A::Read), row(2, 1, 0, 2, 1, A::Fault), row(3, 2, 0, 9, 2, A::MapAround)];
        assert_eq!(
            usage(&fills, &accesses),
            Usage { accessed_pages: 4, readahead_pages: 11, readahead_unused_pages: 8 }
        );
    }
}
