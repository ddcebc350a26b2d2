//! Checks of the trace's data that the reader of any report must hear about: lost
//! events, unresolved or unknown files, scheduler gaps, events out of range. They
//! never stop the analysis.

use coldstart_trace::{FileKind, Nanos};
use rustc_hash::FxHashSet;

use crate::analysis::{Warning, WarningCode};
use crate::context::Ctx;
use crate::time::SchedAnomalies;
use crate::units;

fn warn(out: &mut Vec<Warning>, code: WarningCode, count: u64, message: String) {
    out.push(Warning { code, count, message });
}

/// Counts of file problems, shared with the overview.
pub(crate) struct FileProblems {
    pub unresolved_files: u64,
    pub fills_without_file: u64,
}

pub(crate) fn check(ctx: &Ctx, end: Nanos, sched: &SchedAnomalies, out: &mut Vec<Warning>) -> FileProblems {
    let trace = ctx.trace;
    for loss in trace.losses.iter().filter(|l| l.count > 0) {
        let message = format!("{} lost: {} {}", loss.source, units::count(loss.count), loss.what);
        warn(out, WarningCode::Lost, loss.count, message);
    }
    if trace.meta.partial {
        let message =
            "the trace was recovered from a recorder that did not finish: its end is missing".to_owned();
        warn(out, WarningCode::Partial, 1, message);
    }

    let (mut fills_without_file, mut unknown_ids) = (0u64, FxHashSet::default());
    let (mut unresolved, mut unresolved_pages) = (FxHashSet::default(), 0u64);
    for g in 0..ctx.fills_by_stream.len() {
        let (_, id) = ctx.fills_by_stream.key(g);
        let rows = ctx.fills_by_stream.rows(g);
        match ctx.file(id) {
            None => {
                fills_without_file += rows.len() as u64;
                unknown_ids.insert(id);
            }
            // Metadata and a filesystem's own reserved inodes (kind other) have no path to find.
            Some(f) if f.path.is_none() && !matches!(f.kind, FileKind::DeviceMetadata | FileKind::Other) => {
                unresolved.insert(id);
                unresolved_pages += rows
                    .iter()
                    .map(|&r| u64::from(trace.page_fills[r as usize].pages))
                    .fold(0, u64::saturating_add);
            }
            Some(_) => {}
        }
    }
    if fills_without_file > 0 {
        let message = format!(
            "{} page fills name {} file ids that have no file row",
            units::count(fills_without_file),
            units::count(unknown_ids.len() as u64)
        );
        warn(out, WarningCode::UnknownFile, fills_without_file, message);
    }
    if !unresolved.is_empty() {
        let message = format!(
            "{} read ({}) {} never resolved to a path",
            units::plural(unresolved.len() as u64, "file"),
            units::bytes(ctx.bytes(unresolved_pages)),
            if unresolved.len() == 1 { "was" } else { "were" }
        );
        warn(out, WarningCode::UnresolvedFile, unresolved.len() as u64, message);
    }

    if trace.sched.is_empty() {
        let message =
            "no scheduler data: no time breakdown, I/O wait attribution or critical path".to_owned();
        warn(out, WarningCode::NoSched, 0, message);
    }
    if sched.gaps > 0 {
        let message = format!(
            "{} between scheduler intervals of a thread (longer than {}), {} in all: events were lost",
            units::plural(sched.gaps, "gap"),
            units::duration(ctx.config.sched_gap_ns),
            units::duration(sched.gap_ns)
        );
        warn(out, WarningCode::SchedGap, sched.gaps, message);
    }
    if sched.overlaps + sched.inverted > 0 {
        let message = format!(
            "{} overlap the previous interval of their thread and {} end before they start",
            units::plural(sched.overlaps, "scheduler interval"),
            units::count(sched.inverted)
        );
        warn(out, WarningCode::SchedOverlap, sched.overlaps + sched.inverted, message);
    }

    let outside = |t: Nanos| t < 0 || (end > 0 && t > end);
    let counts = [
        ("page fills", trace.page_fills.iter().filter(|f| outside(f.t_ns)).count()),
        (
            "scheduler intervals",
            trace.sched.iter().filter(|s| outside(s.start_ns) || outside(s.end_ns)).count(),
        ),
        ("wakeups", trace.wakeups.iter().filter(|w| outside(w.t_ns)).count()),
        (
            "block requests",
            trace
                .block_ios
                .iter()
                .filter(|b| b.issue_ns.is_some_and(outside) || b.complete_ns.is_some_and(outside))
                .count(),
        ),
        ("marks", trace.marks.iter().filter(|m| outside(m.t_ns)).count()),
    ];
    for (what, n) in counts.into_iter().filter(|c| c.1 > 0) {
        let message = format!(
            "{} {what} are timed before t = 0 or after the end of the recording",
            units::count(n as u64)
        );
        warn(out, WarningCode::OutOfRange, n as u64, message);
    }
    FileProblems { unresolved_files: unresolved.len() as u64, fills_without_file }
}
