//! Building a plan from a trace (pure: nothing here touches the live system, so a
//! trace recorded on one machine is planned on another).
//!
//! Per file, the used pages are `read ∪ fault ∪ ((fills ∪ resident) ∩ map_around)`
//! of the trace's page accesses (resident: the pages the kernel could map around a
//! fault because another process held them cached, `page_resident`), or, for traces without accesses, the page fills (then
//! readahead the start never used is planned too, and the plan says so). Used
//! pages are merged into ranges; gaps between ranges of one file are read through
//! when that saves a request: smallest gaps first, only where the file is
//! contiguous on the disk, and only while the plan stays within
//! `max_size_ratio` × the bytes the start read. Long ranges are split so each
//! part keeps its own first-need time. Filesystem metadata read through the
//! block device becomes block-device ranges; directories of planned files are
//! listed, their ancestors looked up.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use coldstart_trace::{AccessKind, Extent, File, FileKind, Nanos, Trace};

use crate::error::{PrefetchError, Result};
use crate::order;
use crate::pages::{self, Piece};
use crate::plan::{
    Exclusion, FORMAT, Plan, PlanDirectory, PlanFile, PlanFileKind, PlanRange, PlanSettings, PlanSource,
    PlanStats, UsedPagesFrom, VERSION,
};

/// What the planner knows of one trace file it plans.
struct Candidate<'a> {
    file: &'a File,
    kind: PlanFileKind,
    fills: Vec<Piece>,
    /// Used pages as recorded (may overlap), for first-need times.
    used_raw: Vec<Piece>,
    /// Their union.
    used: Vec<Piece>,
    opened_ns: Option<Nanos>,
}

/// Fills, accesses and opens of the trace, grouped by file id, times relative to `t0`.
#[derive(Default)]
struct ByFile {
    fills: HashMap<u32, Vec<Piece>>,
    /// Pages cached without a recorded fill (`page_resident`), time unknown.
    resident: HashMap<u32, Vec<Piece>>,
    accesses: HashMap<u32, Vec<(AccessKind, Piece)>>,
    opened: HashMap<u32, Nanos>,
    extents: HashMap<u32, Vec<Extent>>,
}

impl ByFile {
    fn new(trace: &Trace, t0: Nanos) -> ByFile {
        let mut by = ByFile::default();
        for f in &trace.page_fills {
            by.fills.entry(f.file_id).or_default().push(Piece::new(f.index, u64::from(f.pages), f.t_ns - t0));
        }
        for r in &trace.page_residents {
            by.resident.entry(r.file_id).or_default().push(Piece::new(r.index, u64::from(r.pages), 0));
        }
        for a in &trace.page_accesses {
            let piece = Piece::new(a.index, u64::from(a.pages.max(1)), a.t_ns - t0);
            by.accesses.entry(a.file_id).or_default().push((a.kind, piece));
        }
        for o in &trace.file_opens {
            let t = by.opened.entry(o.file_id).or_insert(o.t_ns - t0);
            *t = (*t).min(o.t_ns - t0);
        }
        for e in &trace.extents {
            by.extents.entry(e.file_id).or_default().push(e.clone());
        }
        for list in by.extents.values_mut() {
            list.sort_by_key(|e| e.logical);
        }
        by
    }
}

/// Whether `trace` is of a boot or a session (many programs at once), whose plans are
/// replayed in disk order: it covers the system, ended at a systemd unit, holds units, or
/// recorded `--also` programs.
pub fn is_boot_or_session(trace: &Trace) -> bool {
    let meta = &trace.meta;
    meta.scope == coldstart_trace::Scope::System
        || meta.ready.as_ref().is_some_and(|r| r.reason.to_string().starts_with("unit:"))
        || !meta.also.is_empty()
        || !trace.units.is_empty()
}

/// The start of the traced command: the root process's fork, else the trace's zero. Plans'
/// first-need times count from it.
pub fn command_start(trace: &Trace) -> Nanos {
    trace
        .meta
        .root_pid
        .and_then(|pid| trace.processes.iter().find(|p| p.pid == pid))
        .and_then(|p| p.start_ns)
        .unwrap_or(0)
}

/// The disk and disk offset of byte `offset` of a file, from its extents.
fn physical(extents: &[Extent], offset: u64) -> Option<(coldstart_trace::Dev, u64)> {
    let i = extents.partition_point(|e| e.logical <= offset);
    let e = extents.get(i.checked_sub(1)?)?;
    (offset < e.logical + e.length).then(|| (e.disk, e.physical + (offset - e.logical)))
}

/// Whether reading from page `from` through page `to` (exclusive) of a file stays on
/// one physically contiguous stretch of disk (true when the layout is unknown).
fn contiguous(extents: &[Extent], page_size: u64, from: u64, to: u64) -> bool {
    if extents.is_empty() || to <= from + 1 {
        return true;
    }
    let (a, b) = (from * page_size, (to - 1) * page_size);
    match (physical(extents, a), physical(extents, b)) {
        (Some((da, pa)), Some((db, pb))) => da == db && pb >= pa && pb - pa == b - a,
        _ => false,
    }
}

fn used_pages(by: &ByFile, file: &File, fills: &[Piece], from: UsedPagesFrom) -> Vec<Piece> {
    match (from, file.kind) {
        (UsedPagesFrom::Accesses, FileKind::Regular) => {
            let accesses = by.accesses.get(&file.id).map(Vec::as_slice).unwrap_or_default();
            let mut used: Vec<Piece> =
                accesses.iter().filter(|(k, _)| *k != AccessKind::MapAround).map(|(_, p)| *p).collect();
            let around: Vec<Piece> =
                accesses.iter().filter(|(k, _)| *k == AccessKind::MapAround).map(|(_, p)| *p).collect();
            used.extend(pages::clip(&around, fills));
            if let Some(resident) = by.resident.get(&file.id) {
                used.extend(pages::clip(&around, &pages::union(resident.clone())));
            }
            used
        }
        _ => fills.to_vec(),
    }
}

/// [`used_pages`], without pages past the end of a regular file.
fn clipped_used_pages(
    by: &ByFile,
    file: &File,
    fills: &[Piece],
    from: UsedPagesFrom,
    page: u64,
) -> Vec<Piece> {
    let mut used = used_pages(by, file, fills, from);
    if let (Some(size), FileKind::Regular) = (file.size, file.kind) {
        let last = size.div_ceil(page);
        used.retain_mut(|p| {
            p.end = p.end.min(last);
            p.start < p.end
        });
    }
    used
}

/// The pages each file of `trace` used, as [`build_plan`] counts them, as recorded (they
/// may overlap; times relative to the command's start), and where they came from. Files
/// that used none are absent. This is what a trace contributes to a plan made from many
/// (`crate::fleet`).
pub fn used_by_file(trace: &Trace) -> (UsedPagesFrom, BTreeMap<u32, Vec<Piece>>) {
    let page = u64::from(if trace.meta.page_size == 0 { 4096 } else { trace.meta.page_size });
    let by = ByFile::new(trace, command_start(trace));
    let from = if trace.page_accesses.is_empty() { UsedPagesFrom::Fills } else { UsedPagesFrom::Accesses };
    let mut out = BTreeMap::new();
    for file in &trace.files {
        let fills = pages::union(by.fills.get(&file.id).cloned().unwrap_or_default());
        let used = clipped_used_pages(&by, file, &fills, from, page);
        if !used.is_empty() {
            out.insert(file.id, used);
        }
    }
    (from, out)
}

/// Why a trace file is left out of the plan, or `None` when it is planned.
pub(crate) fn exclusion(
    file: &File,
    settings: &PlanSettings,
    recording_start_unix_ns: i64,
) -> Option<&'static str> {
    if file.path.is_none() {
        return Some("path unknown (unresolved inode)");
    }
    match file.kind {
        FileKind::Regular
            if recording_start_unix_ns > 0 && file.mtime_ns.is_some_and(|m| m >= recording_start_unix_ns) =>
        {
            Some("modified during the recording (written by the start)")
        }
        FileKind::Regular => None,
        FileKind::DeviceMetadata if settings.metadata && !settings.whole_files => None,
        FileKind::DeviceMetadata => Some("filesystem metadata (warmed by directory lookups instead)"),
        FileKind::Directory | FileKind::Other => Some("not a regular file"),
    }
}

/// Merges gaps between used ranges, smallest first, within `budget_pages`; returns
/// the pages added.
fn merge_gaps(
    candidates: &mut [Candidate<'_>],
    by: &ByFile,
    settings: &PlanSettings,
    page: u64,
    budget: u64,
) -> u64 {
    let max_gap = settings.max_gap_bytes / page;
    let mut gaps: Vec<(u64, usize, usize)> = Vec::new();
    for (ci, c) in candidates.iter().enumerate() {
        let extents = by.extents.get(&c.file.id).map(Vec::as_slice).unwrap_or_default();
        for (i, pair) in c.used.windows(2).enumerate() {
            let gap = pair[1].start - pair[0].end;
            let layout_ok = c.kind == PlanFileKind::BlockDevice
                || contiguous(extents, page, pair[0].end - 1, pair[1].start + 1);
            if gap <= max_gap && layout_ok {
                gaps.push((gap, ci, i));
            }
        }
    }
    gaps.sort_unstable();
    let mut joined: HashMap<usize, Vec<usize>> = HashMap::new();
    let mut added = 0;
    for (gap, ci, i) in gaps {
        if added + gap > budget {
            break;
        }
        added = added.saturating_add(gap);
        joined.entry(ci).or_default().push(i);
    }
    for (ci, mut idx) in joined {
        idx.sort_unstable();
        let used = &candidates[ci].used;
        let mut merged: Vec<Piece> = Vec::with_capacity(used.len());
        let mut next_join = idx.into_iter().peekable();
        for (i, p) in used.iter().enumerate() {
            match merged.last_mut() {
                Some(last) if i > 0 && next_join.peek() == Some(&(i - 1)) => {
                    next_join.next();
                    last.end = p.end;
                    last.t = last.t.min(p.t);
                }
                _ => merged.push(*p),
            }
        }
        candidates[ci].used = merged;
    }
    added
}

fn whole_file(file: &File, fills: &[Piece], first: Nanos, page: u64) -> Vec<Piece> {
    match file.size {
        Some(0) => Vec::new(),
        Some(size) => vec![Piece { start: 0, end: size.div_ceil(page), t: first }],
        None => fills.to_vec(),
    }
}

/// The directories to warm: the parent of every planned regular file is listed,
/// its ancestors looked up; each is needed by the first file below it.
fn directories(files: &[PlanFile]) -> Vec<PlanDirectory> {
    let mut dirs: BTreeMap<String, (bool, Nanos)> = BTreeMap::new();
    for f in files.iter().filter(|f| f.kind == PlanFileKind::Regular) {
        let mut list = true;
        let mut dir = Path::new(&f.path).parent();
        while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
            let entry = dirs.entry(d.to_string_lossy().into_owned()).or_insert((list, f.first_need_ns));
            entry.0 |= list;
            entry.1 = entry.1.min(f.first_need_ns);
            list = false;
            dir = d.parent();
        }
    }
    dirs.into_iter()
        .map(|(path, (list, first_need_ns))| PlanDirectory { path, list, first_need_ns })
        .collect()
}

/// Builds the plan of `trace` (read from the file named `trace_name`).
pub fn build_plan(trace: &Trace, trace_name: &str, settings: &PlanSettings, tool: &str) -> Result<Plan> {
    let page = u64::from(if trace.meta.page_size == 0 { 4096 } else { trace.meta.page_size });
    let t0 = command_start(trace);
    let by = ByFile::new(trace, t0);
    let used_from = if settings.whole_files {
        UsedPagesFrom::WholeFiles
    } else if trace.page_accesses.is_empty() {
        UsedPagesFrom::Fills
    } else {
        UsedPagesFrom::Accesses
    };

    let mut stats = PlanStats::default();
    let (mut candidates, excluded) = candidates(trace, &by, settings, used_from, page, &mut stats);
    if candidates.iter().all(|c| c.used.is_empty() || c.kind == PlanFileKind::BlockDevice) {
        return Err(PrefetchError::NothingToPlan);
    }

    let used_pages: u64 = candidates.iter().map(|c| pages::total_pages(&c.used)).fold(0, u64::saturating_add);
    let read_pages_planned: u64 =
        candidates.iter().map(|c| pages::total_pages(&c.fills)).fold(0, u64::saturating_add);
    stats.used_bytes = used_pages * page;
    stats.used_cached_bytes = candidates
        .iter()
        .map(|c| pages::total_pages(&c.used) - pages::overlap_pages(&c.used, &c.fills))
        .fold(0, u64::saturating_add)
        * page;
    let used_before: Vec<Vec<Piece>> = candidates.iter().map(|c| c.used.clone()).collect();
    if !settings.whole_files {
        let allowed = (settings.max_size_ratio * read_pages_planned as f64).floor() as u64;
        stats.gap_bytes =
            merge_gaps(&mut candidates, &by, settings, page, allowed.saturating_sub(used_pages)) * page;
    }

    let max_pages = (settings.max_range_bytes / page).max(1);
    let mut files: Vec<PlanFile> = candidates
        .iter()
        .zip(&used_before)
        .map(|(c, used_before)| plan_file(c, used_before, &by, page, max_pages, &mut stats))
        .collect();
    files.retain(|f| !(f.kind == PlanFileKind::BlockDevice && f.ranges.is_empty()));

    let directories = directories(&files);
    count_planned(&mut stats, &files, &directories);
    stats.excluded = excluded.into_values().collect();
    let steps = order::steps(&files, &directories, settings.order, settings.blend_window_ns);
    Ok(Plan {
        format: FORMAT.into(),
        version: VERSION,
        tool: tool.into(),
        source: PlanSource {
            trace: trace_name.into(),
            command: trace.meta.command.clone(),
            host: trace.meta.host.clone(),
            kernel: trace.meta.kernel.clone(),
            recorded_unix_ns: trace.meta.start_unix_ns,
            page_size: page as u32,
            used_pages_from: used_from,
            fleet: None,
        },
        settings: settings.clone(),
        files,
        directories,
        steps,
        stats,
        notes: plan_notes(trace, used_from),
    })
}

/// The trace's files the plan may read, in id order, with their used pages; the files
/// left out by a setting, grouped by reason. Counts the bytes the start read.
fn candidates<'a>(
    trace: &'a Trace,
    by: &ByFile,
    settings: &PlanSettings,
    used_from: UsedPagesFrom,
    page: u64,
    stats: &mut PlanStats,
) -> (Vec<Candidate<'a>>, BTreeMap<&'static str, Exclusion>) {
    let mut excluded: BTreeMap<&'static str, Exclusion> = BTreeMap::new();
    let mut candidates: Vec<Candidate<'_>> = Vec::new();
    let mut files_sorted: Vec<&File> = trace.files.iter().collect();
    files_sorted.sort_by_key(|f| f.id);
    for file in files_sorted {
        let fills = pages::union(by.fills.get(&file.id).cloned().unwrap_or_default());
        let read = pages::total_pages(&fills) * page;
        stats.read_bytes = stats.read_bytes.saturating_add(read);
        if file.kind == FileKind::DeviceMetadata {
            stats.read_metadata_bytes = stats.read_metadata_bytes.saturating_add(read);
        }
        let opened_ns = by.opened.get(&file.id).copied();
        if let Some(reason) = exclusion(file, settings, trace.meta.start_unix_ns) {
            if read > 0 || opened_ns.is_some() {
                let e = excluded
                    .entry(reason)
                    .or_insert_with(|| Exclusion { reason: reason.into(), ..Exclusion::default() });
                e.files += 1;
                e.read_bytes = e.read_bytes.saturating_add(read);
            }
            continue;
        }
        let kind = if file.kind == FileKind::DeviceMetadata {
            PlanFileKind::BlockDevice
        } else {
            PlanFileKind::Regular
        };
        let mut used_raw = clipped_used_pages(by, file, &fills, used_from, page);
        let first = [opened_ns, used_raw.iter().map(|p| p.t).min(), fills.iter().map(|p| p.t).min()]
            .into_iter()
            .flatten()
            .min();
        if used_from == UsedPagesFrom::WholeFiles && kind == PlanFileKind::Regular {
            used_raw = whole_file(file, &fills, first.unwrap_or(0), page);
        }
        let used = pages::union(used_raw.clone());
        if used.is_empty() && opened_ns.is_none() {
            continue;
        }
        candidates.push(Candidate { file, kind, fills, used_raw, used, opened_ns });
    }
    (candidates, excluded)
}

/// A candidate's entry of the plan: its used pages split into ranges of at most
/// `max_pages`, each with its place on the disk. Counts the bytes it plans.
fn plan_file(
    c: &Candidate<'_>,
    used_before: &[Piece],
    by: &ByFile,
    page: u64,
    max_pages: u64,
    stats: &mut PlanStats,
) -> PlanFile {
    let extents = by.extents.get(&c.file.id).map(Vec::as_slice).unwrap_or_default();
    let parts = pages::split(&c.used, max_pages, &c.used_raw);
    let ranges: Vec<PlanRange> = parts
        .iter()
        .map(|p| {
            let offset = p.start * page;
            let (disk, physical) = match c.kind {
                PlanFileKind::BlockDevice => (Some(c.file.dev), Some(offset)),
                PlanFileKind::Regular => {
                    physical(extents, offset).map_or((None, None), |(d, o)| (Some(d), Some(o)))
                }
            };
            PlanRange { offset, length: p.pages() * page, first_need_ns: p.t.max(0), disk, physical }
        })
        .collect();
    stats.planned_read_bytes =
        stats.planned_read_bytes.saturating_add(pages::overlap_pages(&c.used, &c.fills).saturating_mul(page));
    stats.planned_used_bytes =
        stats.planned_used_bytes.saturating_add(pages::total_pages(used_before).saturating_mul(page));
    let first_need_ns =
        [c.opened_ns, ranges.iter().map(|r| r.first_need_ns).min()].into_iter().flatten().min();
    PlanFile {
        path: c.file.path.clone().unwrap_or_default(),
        kind: c.kind,
        dev: c.file.dev,
        ino: c.file.ino,
        size: if c.kind == PlanFileKind::Regular { c.file.size } else { None },
        mtime_ns: if c.kind == PlanFileKind::Regular { c.file.mtime_ns } else { None },
        first_need_ns: first_need_ns.unwrap_or(0).max(0),
        ranges,
    }
}

/// Counts the files, ranges, directories and bytes the plan holds.
fn count_planned(stats: &mut PlanStats, files: &[PlanFile], directories: &[PlanDirectory]) {
    stats.files = files.len();
    stats.ranges = files.iter().map(|f| f.ranges.len()).sum();
    stats.open_only_files = files.iter().filter(|f| f.ranges.is_empty()).count();
    stats.directories = directories.len();
    stats.planned_bytes = files.iter().flat_map(|f| &f.ranges).map(|r| r.length).fold(0, u64::saturating_add);
    stats.planned_metadata_bytes = files
        .iter()
        .filter(|f| f.kind == PlanFileKind::BlockDevice)
        .flat_map(|f| &f.ranges)
        .map(|r| r.length)
        .fold(0, u64::saturating_add);
}

fn plan_notes(trace: &Trace, used_from: UsedPagesFrom) -> Vec<String> {
    let mut notes = Vec::new();
    if used_from == UsedPagesFrom::Fills {
        notes.push(
            "the trace has no page accesses (recorded before the recorder filled page_access): the used pages are \
             the pages that entered the page cache, so readahead the start never used is planned too"
                .to_owned(),
        );
    }
    if trace.meta.partial {
        notes.push("the trace is partial (recovered from a recorder that did not finish)".to_owned());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_trace::Dev;

    fn extent(logical: u64, physical: u64, length: u64) -> Extent {
        Extent { file_id: 1, disk: Dev::new(254, 0), logical, physical, length, flags: 0 }
    }

    #[test]
    fn physical_offsets_follow_the_extents() {
        let e = [extent(0, 1 << 20, 8192), extent(8192, 5 << 20, 4096)];
        assert_eq!(physical(&e, 4096), Some((Dev::new(254, 0), (1 << 20) + 4096)));
        assert_eq!(physical(&e, 8192), Some((Dev::new(254, 0), 5 << 20)));
        assert_eq!(physical(&e, 12288), None);
        assert!(contiguous(&e, 4096, 0, 2));
        assert!(!contiguous(&e, 4096, 1, 3));
        assert!(contiguous(&[], 4096, 0, 100));
    }
}
