//! The subtree that holds most of a set of CPU samples, as `perf report --children` shows
//! inclusive time: from the function most samples pass through, walk down while one callee
//! holds most of its caller (`CHILD_SHARE`) and still most of all the samples
//! (`MIN_SHARE`); the deepest function reached that is neither generic (an entry, an event
//! loop, an interpreter's loop) nor the allocator's is the subtree's root. Then what is
//! inside it: its callees, the allocator's share, the kernel's by activity.

use std::collections::HashMap;

use super::frames::FrameTable;

/// A callee is followed while it holds at least this share of its caller's samples…
pub const CHILD_SHARE: f64 = 0.6;
/// …and at least this share of all the samples.
pub const MIN_SHARE: f64 = 0.5;

/// Frames walked at most (deeper stacks do not exist).
const MAX_STEPS: usize = 4096;

/// The root of the dominant subtree and its samples: `(sample, position of the root in
/// that sample's root-first frames)`.
pub struct Found {
    pub frame: u32,
    pub members: Vec<(usize, usize)>,
}

/// Counts each eligible frame once per member at the positions `next(sample, position)`
/// gives, and returns the one most members have (ties: nearest to the current frame, then
/// the lowest id), with its count and each member's new position.
fn best_below(
    samples: &[Vec<u32>],
    members: &[(usize, usize)],
    table: &FrameTable,
    current: u32,
    deep: bool,
) -> Option<(u32, Vec<(usize, usize)>)> {
    let mut counts: HashMap<u32, (usize, usize)> = HashMap::new();
    for &(s, p) in members {
        let frames = &samples[s];
        let end = if deep { frames.len() } else { (p + 2).min(frames.len()) };
        let mut seen: Vec<u32> = Vec::new();
        for (offset, &f) in frames[(p + 1).min(end)..end].iter().enumerate() {
            let info = table.get(f);
            if f == current || info.kernel || info.allocator || seen.contains(&f) {
                continue;
            }
            seen.push(f);
            let entry = counts.entry(f).or_default();
            entry.0 += 1;
            entry.1 += offset;
        }
    }
    let (&frame, _) =
        counts.iter().max_by(|a, b| (a.1.0).cmp(&b.1.0).then((b.1.1).cmp(&a.1.1)).then(b.0.cmp(a.0)))?;
    let moved = members
        .iter()
        .filter_map(|&(s, p)| {
            let frames = &samples[s];
            let end = if deep { frames.len() } else { (p + 2).min(frames.len()) };
            (p + 1..end).find(|&q| frames[q] == frame).map(|q| (s, q))
        })
        .collect();
    Some((frame, moved))
}

/// The function most samples pass through that can be a cause, with its first (outermost)
/// position in each sample that has it; ties go to the outermost.
fn seed(samples: &[Vec<u32>], table: &FrameTable) -> Option<(u32, Vec<(usize, usize)>)> {
    let mut counts: HashMap<u32, (usize, usize)> = HashMap::new();
    for frames in samples {
        let mut seen: Vec<u32> = Vec::new();
        for (p, &f) in frames.iter().enumerate() {
            if !table.get(f).can_be_cause() || seen.contains(&f) {
                continue;
            }
            seen.push(f);
            let entry = counts.entry(f).or_default();
            entry.0 += 1;
            entry.1 += p;
        }
    }
    let (&frame, _) =
        counts.iter().max_by(|a, b| (a.1.0).cmp(&b.1.0).then((b.1.1).cmp(&a.1.1)).then(b.0.cmp(a.0)))?;
    let members = samples
        .iter()
        .enumerate()
        .filter_map(|(s, frames)| frames.iter().position(|&f| f == frame).map(|p| (s, p)))
        .collect();
    Some((frame, members))
}

/// The dominant subtree of `samples` (each root-first), if one holds at least `MIN_SHARE`
/// of them: the deepest named function of the walk that can be a cause, else the deepest
/// unnamed one.
pub fn dominant(samples: &[Vec<u32>], table: &FrameTable) -> Option<Found> {
    let total = samples.len() as f64;
    let (mut frame, mut members) = seed(samples, table)?;
    if (members.len() as f64) < MIN_SHARE * total {
        return None;
    }
    let mut deepest_any = (frame, members.clone());
    let mut deepest_named = table.get(frame).named.then(|| (frame, members.clone()));
    for _ in 0..MAX_STEPS {
        let passes = |count: usize, parent: usize| {
            count as f64 >= CHILD_SHARE * parent as f64 && count as f64 >= MIN_SHARE * total
        };
        let next = best_below(samples, &members, table, frame, false)
            .filter(|(_, moved)| passes(moved.len(), members.len()))
            .or_else(|| {
                best_below(samples, &members, table, frame, true)
                    .filter(|(_, moved)| passes(moved.len(), members.len()))
            });
        let Some((child, moved)) = next else { break };
        frame = child;
        members = moved;
        let info = table.get(frame);
        if info.can_be_cause() {
            deepest_any = (frame, members.clone());
            if info.named {
                deepest_named = Some((frame, members.clone()));
            }
        }
    }
    let (frame, members) = deepest_named.unwrap_or(deepest_any);
    Some(Found { frame, members })
}
