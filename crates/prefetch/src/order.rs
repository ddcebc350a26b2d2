//! The replay order of a plan's steps: by first need, by disk position, or a blend
//! (first need in time windows, disk position within each window).
//!
//! Directory steps come before the files below them (a directory's first need is
//! that of its earliest file, and ties put directories first). In disk order,
//! directories and open-only files come first (opening a file needs its path), then
//! ranges by (disk, offset on the disk), then ranges whose position is unknown, by
//! first need.

use coldstart_trace::{Dev, Nanos};

use crate::plan::{Order, PlanDirectory, PlanFile, Step};

/// What a step is sorted by.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    bucket: Nanos,
    group: u8,
    position: (Option<Dev>, u64),
    first_need: Nanos,
}

fn position_group(disk: Option<Dev>, physical: Option<u64>) -> (u8, (Option<Dev>, u64)) {
    match (disk, physical) {
        (Some(d), Some(p)) => (2, (Some(d), p)),
        _ => (3, (None, 0)),
    }
}

fn key(step: Step, files: &[PlanFile], dirs: &[PlanDirectory], order: Order, window: Nanos) -> Key {
    let (first_need, rank, disk, physical) = match step {
        Step::Directory(d) => (dirs[d].first_need_ns, 0, None, None),
        Step::Open(f) => (files[f].first_need_ns, 1, None, None),
        Step::Range { file, range } => {
            let r = &files[file].ranges[range];
            (r.first_need_ns, 2, r.disk, r.physical)
        }
    };
    let by_disk = |bucket| {
        let (group, position) = if rank < 2 { (rank, (None, 0)) } else { position_group(disk, physical) };
        let first = if group == 2 { 0 } else { first_need };
        Key { bucket, group, position, first_need: first }
    };
    match order {
        Order::FirstNeed => {
            Key { bucket: first_need, group: rank, position: (disk, physical.unwrap_or(0)), first_need }
        }
        Order::Disk => by_disk(0),
        Order::Blend => by_disk(first_need / window.max(1)),
    }
}

/// Every step of the plan (each directory, each file without ranges, each range), in `order`.
pub fn steps(files: &[PlanFile], dirs: &[PlanDirectory], order: Order, window: Nanos) -> Vec<Step> {
    let mut steps: Vec<Step> = (0..dirs.len()).map(Step::Directory).collect();
    for (i, f) in files.iter().enumerate() {
        if f.ranges.is_empty() {
            steps.push(Step::Open(i));
        }
        steps.extend((0..f.ranges.len()).map(|range| Step::Range { file: i, range }));
    }
    // Stable, so equal keys keep the order above (files by trace id, ranges by offset).
    steps.sort_by_cached_key(|&s| key(s, files, dirs, order, window));
    steps
}
