//! Readahead efficiency: the pages the start read into the page cache against the
//! pages its programs asked for (read() or a fault; pages only mapped around a
//! fault are counted apart, as the program may never touch them). Needs the
//! trace's page accesses; without them the analysis says it cannot tell.
//!
//! Filesystem metadata (inode tables, directories, read through the block device) is
//! left out: the filesystem reads it for the programs, which never ask for its pages
//! themselves, so every metadata page would otherwise count as readahead never used.

use coldstart_trace::{AccessKind, FileKind};

use rustc_hash::FxHashMap;

use crate::analysis::{DiskAnalysis, FilePageUse, PageUse};
use crate::context::{Ctx, Groups};

/// Page ranges `[start, end)`, sorted and merged.
type Ranges = Vec<(u64, u64)>;

fn merge(ranges: &mut Ranges) {
    ranges.sort_unstable();
    let mut out = 0;
    for i in 0..ranges.len() {
        if out > 0 && ranges[i].0 <= ranges[out - 1].1 {
            ranges[out - 1].1 = ranges[out - 1].1.max(ranges[i].1);
        } else {
            ranges[out] = ranges[i];
            out += 1;
        }
    }
    ranges.truncate(out);
}

fn len(ranges: &[(u64, u64)]) -> u64 {
    ranges.iter().map(|r| r.1 - r.0).fold(0, u64::saturating_add)
}

/// The parts of `a` outside `b` (both merged).
fn subtract(a: &[(u64, u64)], b: &[(u64, u64)], out: &mut Ranges) {
    out.clear();
    let mut j = 0;
    for &(start, end) in a {
        let mut from = start;
        while j < b.len() && b[j].1 <= from {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < end {
            if b[k].0 > from {
                out.push((from, b[k].0));
            }
            from = from.max(b[k].1);
            k += 1;
        }
        if from < end {
            out.push((from, end));
        }
    }
}

pub(crate) fn page_use(ctx: &Ctx) -> (Option<PageUse>, Vec<FilePageUse>) {
    let accesses = &ctx.trace.page_accesses;
    if accesses.is_empty() {
        return (None, Vec::new());
    }
    let fills = &ctx.trace.page_fills;
    let fills_by_file = Groups::build(fills.len(), |r| fills[r].file_id, |r| fills[r].t_ns);
    let accesses_by_file = Groups::build(accesses.len(), |r| accesses[r].file_id, |r| accesses[r].t_ns);
    let (mut filled, mut asked, mut around, mut rest, mut unused) =
        (Ranges::new(), Ranges::new(), Ranges::new(), Ranges::new(), Ranges::new());
    let mut total = PageUse::default();
    let mut by_file = Vec::new();
    let range = |index: u64, pages: u32| (index, index + u64::from(pages.max(1)));
    let metadata = |file: u32| ctx.file(file).is_some_and(|f| f.kind == FileKind::DeviceMetadata);
    for g in 0..accesses_by_file.len() {
        let file = accesses_by_file.key(g);
        if metadata(file) {
            continue;
        }
        asked.clear();
        let rows = accesses_by_file.rows(g).iter().map(|&r| &accesses[r as usize]);
        asked.extend(rows.filter(|a| a.kind != AccessKind::MapAround).map(|a| range(a.index, a.pages)));
        merge(&mut asked);
        filled.clear();
        filled.extend(
            fills_by_file
                .rows_of(file)
                .iter()
                .map(|&r| range(fills[r as usize].index, fills[r as usize].pages)),
        );
        merge(&mut filled);
        subtract(&asked, &filled, &mut rest);
        total.asked_cached_pages = total.asked_cached_pages.saturating_add(len(&rest));
        total.asked_pages = total.asked_pages.saturating_add(len(&asked));
    }
    for g in 0..fills_by_file.len() {
        let file = fills_by_file.key(g);
        if metadata(file) {
            continue;
        }
        filled.clear();
        filled.extend(
            fills_by_file.rows(g).iter().map(|&r| range(fills[r as usize].index, fills[r as usize].pages)),
        );
        merge(&mut filled);
        asked.clear();
        around.clear();
        for &r in accesses_by_file.rows_of(file) {
            let a = &accesses[r as usize];
            match a.kind {
                AccessKind::MapAround => around.push(range(a.index, a.pages)),
                AccessKind::Read | AccessKind::Fault => asked.push(range(a.index, a.pages)),
            }
        }
        merge(&mut asked);
        merge(&mut around);
        subtract(&filled, &asked, &mut rest);
        subtract(&rest, &around, &mut unused);
        let row = FilePageUse {
            file,
            filled_pages: len(&filled),
            used_pages: len(&filled) - len(&rest),
            map_around_only_pages: len(&rest) - len(&unused),
            unused_pages: len(&unused),
        };
        total.filled_pages = total.filled_pages.saturating_add(row.filled_pages);
        total.used_pages = total.used_pages.saturating_add(row.used_pages);
        total.map_around_only_pages = total.map_around_only_pages.saturating_add(row.map_around_only_pages);
        total.unused_pages = total.unused_pages.saturating_add(row.unused_pages);
        by_file.push(row);
    }
    by_file.sort_by(|a, b| b.unused_pages.cmp(&a.unused_pages).then(a.file.cmp(&b.file)));
    (Some(total), by_file)
}

/// Each disk's share of the page use: the pages of the files it served requests for.
pub(crate) fn by_disk(disks: &mut [DiskAnalysis], by_file: &[FilePageUse]) {
    let by_id: FxHashMap<u32, &FilePageUse> = by_file.iter().map(|u| (u.file, u)).collect();
    for disk in disks {
        for u in disk.files.iter().filter_map(|f| by_id.get(&f.file)) {
            disk.filled_pages = disk.filled_pages.saturating_add(u.filled_pages);
            disk.unused_pages = disk.unused_pages.saturating_add(u.unused_pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_subtract() {
        let mut a = vec![(10, 20), (0, 5), (4, 8), (20, 22)];
        merge(&mut a);
        assert_eq!(a, vec![(0, 8), (10, 22)]);
        let mut out = Vec::new();
        subtract(&a, &[(2, 3), (6, 12), (21, 30)], &mut out);
        assert_eq!(out, vec![(0, 2), (3, 6), (12, 21)]);
        subtract(&a, &[], &mut out);
        assert_eq!(out, a);
    }
}
