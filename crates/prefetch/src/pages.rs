//! Sets of page ranges of one file, with the time each part was first needed:
//! the arithmetic the planner needs (union, intersection, merging across small
//! gaps) kept apart from the trace, so it is tested on its own.

use coldstart_trace::Nanos;

/// Pages `start..end` of a file, first needed at `t`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub start: u64,
    pub end: u64,
    pub t: Nanos,
}

impl Piece {
    pub fn new(start: u64, pages: u64, t: Nanos) -> Piece {
        Piece { start, end: start + pages, t }
    }

    pub fn pages(&self) -> u64 {
        self.end - self.start
    }
}

/// The union of `pieces` as sorted, disjoint, non-touching pieces; each carries the
/// earliest time of the pieces it covers. Empty pieces are dropped.
pub fn union(mut pieces: Vec<Piece>) -> Vec<Piece> {
    pieces.retain(|p| p.end > p.start);
    pieces.sort_by_key(|p| (p.start, p.end));
    let mut out: Vec<Piece> = Vec::with_capacity(pieces.len());
    for p in pieces {
        match out.last_mut() {
            Some(last) if p.start <= last.end => {
                last.end = last.end.max(p.end);
                last.t = last.t.min(p.t);
            }
            _ => out.push(p),
        }
    }
    out
}

/// The parts of `pieces` (any order, any overlap) that lie inside `within` (sorted,
/// disjoint); each part keeps the time of its piece.
pub fn clip(pieces: &[Piece], within: &[Piece]) -> Vec<Piece> {
    let mut out = Vec::new();
    for p in pieces {
        let first = within.partition_point(|w| w.end <= p.start);
        for w in within[first..].iter().take_while(|w| w.start < p.end) {
            let (start, end) = (p.start.max(w.start), p.end.min(w.end));
            if start < end {
                out.push(Piece { start, end, t: p.t });
            }
        }
    }
    out
}

/// Pages of `a` (sorted, disjoint) that are also in `b` (sorted, disjoint).
pub fn overlap_pages(a: &[Piece], b: &[Piece]) -> u64 {
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        let (start, end) = (a[i].start.max(b[j].start), a[i].end.min(b[j].end));
        if start < end {
            total += end - start;
        }
        if a[i].end <= b[j].end { i += 1 } else { j += 1 }
    }
    total
}

pub fn total_pages(pieces: &[Piece]) -> u64 {
    pieces.iter().map(Piece::pages).sum()
}

/// The earliest time of `pieces` (any order) overlapping pages `start..end`.
pub fn first_need(pieces: &[Piece], start: u64, end: u64) -> Option<Nanos> {
    pieces.iter().filter(|p| p.start < end && p.end > start).map(|p| p.t).min()
}

/// Splits each piece into parts of at most `max_pages`, each with the earliest time
/// of the `timed` pieces overlapping it (or the piece's own time when none does), so
/// a long range read over a long time keeps the order in which its parts were needed.
pub fn split(pieces: &[Piece], max_pages: u64, timed: &[Piece]) -> Vec<Piece> {
    let max_pages = max_pages.max(1);
    let mut sorted = timed.to_vec();
    sorted.sort_by_key(|p| p.start);
    let mut out = Vec::new();
    for p in pieces {
        let mut start = p.start;
        while start < p.end {
            let end = (start + max_pages).min(p.end);
            let near = &sorted[..sorted.partition_point(|q| q.start < end)];
            let t = first_need(near, start, end).unwrap_or(p.t);
            out.push(Piece { start, end, t });
            start = end;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(start: u64, end: u64, t: Nanos) -> Piece {
        Piece { start, end, t }
    }

    #[test]
    fn union_merges_overlapping_and_touching_pieces_with_their_earliest_time() {
        let u = union(vec![p(10, 12, 5), p(0, 4, 9), p(3, 6, 2), p(6, 7, 8), p(20, 20, 0)]);
        assert_eq!(u, [p(0, 7, 2), p(10, 12, 5)]);
    }

    #[test]
    fn clip_keeps_only_the_parts_inside() {
        let within = [p(0, 4, 0), p(8, 10, 0)];
        assert_eq!(clip(&[p(2, 9, 7)], &within), [p(2, 4, 7), p(8, 9, 7)]);
        assert!(clip(&[p(4, 8, 1)], &within).is_empty());
    }

    #[test]
    fn overlap_counts_common_pages() {
        assert_eq!(overlap_pages(&[p(0, 10, 0), p(20, 30, 0)], &[p(5, 25, 0)]), 10);
        assert_eq!(overlap_pages(&[p(0, 4, 0)], &[p(4, 8, 0)]), 0);
    }

    #[test]
    fn split_gives_each_part_its_own_first_need() {
        let timed = [p(0, 2, 100), p(6, 7, 50), p(9, 10, 300)];
        let parts = split(&[p(0, 10, 50)], 4, &timed);
        assert_eq!(parts, [p(0, 4, 100), p(4, 8, 50), p(8, 10, 300)]);
    }
}
