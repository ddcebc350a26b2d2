//! The moments a finding points at, as a reader wants them: the intervals of one thing
//! (one process on the critical path, one thread asleep) that touch or overlap merged
//! into one, the same line never twice, and only the few that carry the time.

use coldstart_trace::Nanos;

use crate::doctor::finding::EvidenceInterval;

/// Intervals of one thing this close are one: the critical path hands over to another
/// process (an X server's reply, a futex wake) for microseconds and comes back.
pub(crate) const MERGE_GAP_NS: Nanos = 1_000_000;

/// The share of the intervals' time the listed ones cover, at least.
const CARRIED_SHARE: f64 = 0.9;

/// `intervals` merged where they are of the same thing (thread and words) and at most
/// [`MERGE_GAP_NS`] apart, then the longest that together carry [`CARRIED_SHARE`] of their
/// time (at most `max`), in time order.
pub(crate) fn merged(mut intervals: Vec<EvidenceInterval>, max: usize) -> Vec<EvidenceInterval> {
    intervals
        .sort_by(|a, b| (a.tid, &a.what, a.start_ns, a.end_ns).cmp(&(b.tid, &b.what, b.start_ns, b.end_ns)));
    let mut out: Vec<EvidenceInterval> = Vec::with_capacity(intervals.len());
    for iv in intervals {
        match out.last_mut() {
            Some(last)
                if last.tid == iv.tid
                    && last.what == iv.what
                    && iv.start_ns <= last.end_ns + MERGE_GAP_NS =>
            {
                last.end_ns = last.end_ns.max(iv.end_ns);
            }
            _ => out.push(iv),
        }
    }
    let length = |iv: &EvidenceInterval| (iv.end_ns - iv.start_ns).max(0);
    let total: Nanos = out.iter().map(length).fold(0, Nanos::saturating_add);
    out.sort_by(|a, b| length(b).cmp(&length(a)).then(a.start_ns.cmp(&b.start_ns)));
    let mut carried: Nanos = 0;
    let keep = out
        .iter()
        .take_while(|iv| {
            let more = carried == 0 || (carried as f64) < CARRIED_SHARE * total as f64;
            carried = carried.saturating_add(length(iv));
            more
        })
        .count()
        .min(max);
    out.truncate(keep);
    out.sort_by_key(|iv| (iv.start_ns, iv.end_ns));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Nanos = 1_000_000;

    fn on_path(start: Nanos, end: Nanos, pid: i32) -> EvidenceInterval {
        EvidenceInterval {
            start_ns: start,
            end_ns: end,
            tid: Some(pid),
            what: format!("p/{pid} on the critical path"),
        }
    }

    #[test]
    fn pieces_of_one_stretch_are_one_interval_and_the_same_line_is_not_repeated() {
        // Six sub-millisecond pieces of one process with the path's hand-overs between them,
        // the same piece twice, and a second stretch of 1.5 ms 56 ms later.
        let pieces = vec![
            on_path(203 * MS, 203 * MS + 300_000, 569),
            on_path(203 * MS + 310_000, 203 * MS + 500_000, 569),
            on_path(203 * MS + 310_000, 203 * MS + 500_000, 569),
            on_path(203 * MS + 520_000, 203 * MS + 900_000, 569),
            on_path(203 * MS + 950_000, 204 * MS, 569),
            on_path(260 * MS, 261 * MS + 500_000, 569),
        ];
        let got = merged(pieces, 12);
        let spans: Vec<(Nanos, Nanos)> = got.iter().map(|iv| (iv.start_ns, iv.end_ns)).collect();
        assert_eq!(spans, vec![(203 * MS, 204 * MS), (260 * MS, 261 * MS + 500_000)]);
    }

    #[test]
    fn only_the_intervals_that_carry_the_time_are_kept() {
        // Two processes: one long stretch each, and twenty slivers far apart that carry 2 % of the time.
        let mut ivs = vec![on_path(0, 400 * MS, 1), on_path(500 * MS, 900 * MS, 2)];
        ivs.extend((0..20).map(|k| on_path(1_000 * MS + k * 10 * MS, 1_000 * MS + k * 10 * MS + 800_000, 3)));
        let got = merged(ivs, 12);
        assert_eq!(got.iter().map(|iv| iv.tid).collect::<Vec<_>>(), vec![Some(1), Some(2)]);
        // Intervals of different words (pieces of a file) are never merged, and at most `max` are listed.
        let pieces: Vec<EvidenceInterval> = (0..16)
            .map(|k| EvidenceInterval {
                start_ns: k * MS,
                end_ns: k * MS + MS,
                tid: Some(1),
                what: format!("pages {k}"),
            })
            .collect();
        assert_eq!(merged(pieces, 12).len(), 12);
    }
}
