//! Block requests: each completion matched to the oldest unmatched issue of the
//! same (device, sector), an issue after a requeue taken as the same request;
//! flushes complete with sector −1 and no issue. A request belongs to the task that
//! made it (`block_io_start`, when traced), not to whichever task issued it from the
//! queue. The file a request read is found through the FIEMAP extents (sorted,
//! binary search).

use std::collections::{HashMap, VecDeque};

use coldstart_trace::{BlockIo, BlockOp, Dev, Extent, Nanos};

use crate::ftrace::events::{Event, Timed};

/// The operation named by the kernel's `rwbs` flags.
pub fn op_of(rwbs: &str) -> BlockOp {
    if rwbs.contains('D') {
        BlockOp::Discard
    } else if rwbs.contains('W') {
        BlockOp::Write
    } else if rwbs.contains('R') {
        BlockOp::Read
    } else if rwbs.contains('F') {
        BlockOp::Flush
    } else {
        BlockOp::Other
    }
}

/// Finds the file holding a disk byte offset.
pub struct ExtentIndex {
    sorted: Vec<(Dev, u64, u64, u32)>,
}

impl ExtentIndex {
    pub fn new(extents: &[Extent]) -> ExtentIndex {
        let mut sorted: Vec<_> = extents.iter().map(|e| (e.disk, e.physical, e.length, e.file_id)).collect();
        sorted.sort_unstable();
        ExtentIndex { sorted }
    }

    pub fn file_at(&self, disk: Dev, offset: u64) -> Option<u32> {
        let i = self.sorted.partition_point(|&(d, p, _, _)| (d, p) <= (disk, offset));
        let &(d, p, len, id) = self.sorted.get(i.checked_sub(1)?)?;
        (d == disk && offset < p + len).then_some(id)
    }
}

/// The issues of one (device, sector) not completed yet.
#[derive(Default)]
struct Pending {
    /// Indices of the issue events and of the starts that made them, oldest first.
    issues: VecDeque<(usize, Option<usize>)>,
    /// Requeues whose next issue has not come yet: that issue is the same request.
    requeued: usize,
}

/// The block requests of a recording and how many were requeued.
pub struct Requests {
    pub rows: Vec<BlockIo>,
    /// `block_rq_requeue` events (the request was issued again and is one row).
    pub requeues: u64,
}

/// Pairs issues and completions into requests. A requeued request is issued again
/// and completes once: the issue after a requeue of the same (device, sector) is not
/// a request of its own, and the row keeps its first issue (time, size, issuer), so
/// that its latency counts the time the device kept it waiting.
pub fn requests(
    events: &[Timed],
    to_trace: impl Fn(u64) -> Nanos,
    pid_of: impl Fn(i32) -> i32,
    extents: &ExtentIndex,
) -> Requests {
    let mut pending: HashMap<(u32, u64), Pending> = HashMap::new();
    // Emptied queues, reused so that pairing allocates per sector pending at once,
    // not per request.
    let mut spare: Vec<VecDeque<(usize, Option<usize>)>> = Vec::new();
    // Starts not issued yet, by (device, sector); a later start of the same sector
    // replaces an earlier one that was merged away.
    let mut started: HashMap<(u32, u64), usize> = HashMap::new();
    let mut requeues = 0;
    let mut rows = Vec::new();
    let row = |issue: Option<(usize, Option<usize>)>, complete: Option<&Timed>| {
        let issue = issue.map(|(i, start)| (&events[i], start.map(|s| &events[s])));
        block_io(issue, complete, &to_trace, &pid_of, extents)
    };
    for (i, e) in events.iter().enumerate() {
        match e.event {
            Event::BlockStart { dev, sector, .. } => {
                started.insert((dev, sector), i);
            }
            Event::BlockIssue { dev, sector, .. } => {
                let p = pending
                    .entry((dev, sector))
                    .or_insert_with(|| Pending { issues: spare.pop().unwrap_or_default(), requeued: 0 });
                let start = started.remove(&(dev, sector));
                if p.requeued > 0 {
                    p.requeued -= 1;
                } else {
                    p.issues.push_back((i, start));
                }
            }
            Event::BlockRequeue { dev, sector } => {
                requeues += 1;
                // A requeue of a request never started (no issue traced) changes nothing.
                if let Some(p) = pending.get_mut(&(dev, sector))
                    && p.requeued < p.issues.len()
                {
                    p.requeued += 1;
                }
            }
            Event::BlockComplete { dev, sector, .. } => {
                let key = (dev, sector);
                let issue = pending.get_mut(&key).and_then(|p| {
                    let issue = p.issues.pop_front();
                    p.requeued = p.requeued.min(p.issues.len());
                    issue
                });
                if pending.get(&key).is_some_and(|p| p.issues.is_empty())
                    && let Some(p) = pending.remove(&key)
                {
                    spare.push(p.issues);
                }
                rows.push(row(issue, Some(e)));
            }
            _ => {}
        }
    }
    for p in pending.into_values() {
        rows.extend(p.issues.into_iter().map(|i| row(Some(i), None)));
    }
    rows.sort_by_key(|b| b.issue_ns.or(b.complete_ns));
    Requests { rows, requeues }
}

/// One `block_io` row from its issue (with the start that made it, if traced) and its
/// completion (either may be missing).
fn block_io(
    issue: Option<(&Timed, Option<&Timed>)>,
    complete: Option<&Timed>,
    to_trace: impl Fn(u64) -> Nanos,
    pid_of: impl Fn(i32) -> i32,
    extents: &ExtentIndex,
) -> BlockIo {
    let start = issue.and_then(|(_, start)| start);
    let issue = issue.map(|(issue, _)| issue);
    let (dev, sector) = match (issue.map(|e| &e.event), complete.map(|e| &e.event)) {
        (Some(Event::BlockIssue { dev, sector, .. }), _)
        | (_, Some(Event::BlockComplete { dev, sector, .. })) => (*dev, *sector),
        _ => (0, u64::MAX),
    };
    let mut io = BlockIo {
        issue_ns: issue.map(|e| to_trace(e.ts)),
        complete_ns: complete.map(|e| to_trace(e.ts)),
        dev: Dev::from_kernel(dev),
        sector: (sector != u64::MAX).then_some(sector),
        bytes: 0,
        op: BlockOp::Other,
        rwbs: String::new(),
        pid: 0,
        comm: String::new(),
        file_id: None,
        error: 0,
    };
    if let Some(Event::BlockComplete { nr_sector, error, rwbs, .. }) = complete.map(|e| &e.event) {
        io.bytes = nr_sector.saturating_mul(512);
        io.rwbs = rwbs.as_str().to_owned();
        io.error = *error;
    }
    if let Some(Event::BlockIssue { tid, bytes, rwbs, comm, .. }) = issue.map(|e| &e.event) {
        io.bytes = *bytes;
        io.rwbs = rwbs.as_str().to_owned();
        io.pid = pid_of(*tid);
        io.comm = comm.text();
    }
    if let Some(Event::BlockStart { tid, comm, .. }) = start.map(|e| &e.event) {
        io.pid = pid_of(*tid);
        io.comm = comm.text();
    }
    io.op = op_of(&io.rwbs);
    io.file_id = io.sector.and_then(|s| extents.file_at(io.dev, s * 512));
    io
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::events::Comm;

    fn vda() -> u32 {
        Dev::new(254, 0).to_kernel()
    }

    fn issue(ts: u64, sector: u64, bytes: u32, rwbs: &str) -> Timed {
        let event =
            Event::BlockIssue { tid: 7, dev: vda(), sector, bytes, rwbs: rwbs.into(), comm: Comm::default() };
        Timed { ts, cpu: 0, event }
    }

    fn requeue(ts: u64, sector: u64) -> Timed {
        Timed { ts, cpu: 1, event: Event::BlockRequeue { dev: vda(), sector } }
    }

    fn complete(ts: u64, sector: u64, nr_sector: u32, rwbs: &str) -> Timed {
        let event = Event::BlockComplete { dev: vda(), sector, nr_sector, error: 0, rwbs: rwbs.into() };
        Timed { ts, cpu: 0, event }
    }

    fn pair(events: &[Timed]) -> Requests {
        requests(events, |t| t as i64, |t| t + 1000, &ExtentIndex::new(&[]))
    }

    /// (issue, completion) of every row, in order.
    fn times(r: &Requests) -> Vec<(Option<Nanos>, Option<Nanos>)> {
        r.rows.iter().map(|b| (b.issue_ns, b.complete_ns)).collect()
    }

    #[test]
    fn pairs_requests_flushes_and_files() {
        let events = vec![
            issue(10, 16, 4096, "RA"),
            issue(11, 800, 8192, "W"),
            complete(15, 16, 8, "RA"),
            complete(16, u64::MAX, 0, "FF"),
        ];
        let extents = ExtentIndex::new(&[Extent {
            file_id: 3,
            disk: Dev::new(254, 0),
            logical: 0,
            physical: 8192,
            length: 4096,
            flags: 0,
        }]);
        let got = requests(&events, |t| t as i64, |t| t + 1000, &extents);
        assert_eq!((got.rows.len(), got.requeues), (3, 0));
        let read = &got.rows[0];
        assert_eq!(
            (read.latency_ns(), read.op, read.file_id, read.pid, read.rwbs.as_str()),
            (Some(5), BlockOp::Read, Some(3), 1007, "RA")
        );
        let write = got.rows.iter().find(|b| b.op == BlockOp::Write).unwrap();
        assert_eq!((write.complete_ns, write.file_id, write.bytes), (None, None, 8192));
        let flush = got.rows.iter().find(|b| b.op == BlockOp::Flush).unwrap();
        assert_eq!((flush.issue_ns, flush.sector, flush.rwbs.as_str()), (None, None, "FF"));
    }

    #[test]
    fn a_requeued_request_is_one_row_timed_from_its_first_issue() {
        let got = pair(&[
            issue(10, 64, 4096, "R"),
            requeue(12, 64),
            issue(20, 64, 4096, "R"),
            complete(30, 64, 8, "R"),
        ]);
        assert_eq!(times(&got), vec![(Some(10), Some(30))]);
        assert_eq!((got.requeues, got.rows[0].bytes, got.rows[0].pid), (1, 4096, 1007));
    }

    fn start(ts: u64, tid: i32, sector: u64, name: &str) -> Timed {
        let mut comm = Comm::default();
        comm.0[..name.len()].copy_from_slice(name.as_bytes());
        Timed { ts, cpu: 1, event: Event::BlockStart { tid, dev: vda(), sector, comm } }
    }

    /// Another task ran the queue (here tid 7, which issued every request): each request
    /// still belongs to the task that made it, and a start merged away is no one's.
    #[test]
    fn a_request_belongs_to_the_task_that_made_it_not_the_one_that_issued_it() {
        let got = pair(&[
            start(1, 42, 64, "outside-reader"),
            start(2, 43, 72, "merged"),
            start(3, 44, 128, "cat"),
            issue(10, 64, 8192, "R"),
            issue(11, 128, 4096, "R"),
            issue(12, 256, 4096, "R"),
            complete(20, 64, 16, "R"),
            complete(21, 128, 8, "R"),
            complete(22, 256, 8, "R"),
        ]);
        let owners: Vec<_> = got.rows.iter().map(|b| (b.sector, b.pid, b.comm.as_str())).collect();
        assert_eq!(
            owners,
            vec![(Some(64), 1042, "outside-reader"), (Some(128), 1044, "cat"), (Some(256), 1007, "")]
        );
    }

    #[test]
    fn a_request_requeued_twice_is_still_one_row() {
        let got = pair(&[
            issue(10, 64, 4096, "R"),
            requeue(11, 64),
            issue(12, 64, 4096, "R"),
            requeue(13, 64),
            issue(14, 64, 4096, "R"),
            complete(20, 64, 8, "R"),
        ]);
        assert_eq!((times(&got), got.requeues), (vec![(Some(10), Some(20))], 2));
    }

    #[test]
    fn a_later_request_of_the_same_sector_keeps_its_own_completion() {
        // Paired by sector alone, the issue again at 12 would take the completion at
        // 55 of the request issued at 50, which would be left open.
        let got = pair(&[
            issue(10, 64, 4096, "R"),
            requeue(11, 64),
            issue(12, 64, 4096, "R"),
            complete(15, 64, 8, "R"),
            issue(50, 64, 4096, "R"),
            complete(55, 64, 8, "R"),
        ]);
        assert_eq!(times(&got), vec![(Some(10), Some(15)), (Some(50), Some(55))]);
    }

    #[test]
    fn a_requeue_only_joins_issues_of_its_own_sector() {
        let got = pair(&[
            issue(10, 64, 4096, "R"),
            issue(11, 128, 4096, "R"),
            requeue(12, 64),
            issue(13, 128, 4096, "R"),
            issue(14, 64, 4096, "R"),
            complete(20, 64, 8, "R"),
            complete(21, 128, 8, "R"),
            complete(22, 128, 8, "R"),
        ]);
        assert_eq!(times(&got), vec![(Some(10), Some(20)), (Some(11), Some(21)), (Some(13), Some(22))]);
    }

    #[test]
    fn a_requeue_of_a_request_never_issued_changes_no_pairing() {
        let got = pair(&[requeue(5, 64), issue(6, 64, 4096, "R"), complete(9, 64, 8, "R")]);
        assert_eq!((times(&got), got.requeues), (vec![(Some(6), Some(9))], 1));
    }

    #[test]
    fn a_requeued_request_not_issued_again_by_the_end_stays_open() {
        let got = pair(&[issue(10, 64, 4096, "R"), requeue(11, 64)]);
        assert_eq!(times(&got), vec![(Some(10), None)]);
    }
}
