//! Block requests: each completion matched to the oldest unmatched issue of the
//! same (device, sector); flushes complete with sector −1 and no issue. The file a
//! request read is found through the FIEMAP extents (sorted, binary search).

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

struct Issue {
    t: Nanos,
    bytes: u32,
    rwbs: String,
    tid: i32,
    comm: String,
}

/// Pairs issues and completions into requests.
pub fn requests(
    events: &[Timed],
    to_trace: impl Fn(u64) -> Nanos,
    pid_of: impl Fn(i32) -> i32,
    extents: &ExtentIndex,
) -> Vec<BlockIo> {
    let mut pending: HashMap<(u32, u64), VecDeque<Issue>> = HashMap::new();
    let mut out = Vec::new();
    let row = |dev: u32, sector: u64, issue: Option<Issue>, complete: Option<(Nanos, i32, &str, u32)>| {
        let dev = Dev::from_kernel(dev);
        let sector = (sector != u64::MAX).then_some(sector);
        let rwbs =
            issue.as_ref().map(|i| i.rwbs.clone()).or(complete.map(|c| c.2.to_owned())).unwrap_or_default();
        let bytes =
            issue.as_ref().map(|i| i.bytes).or(complete.map(|c| c.3.saturating_mul(512))).unwrap_or(0);
        BlockIo {
            issue_ns: issue.as_ref().map(|i| i.t),
            complete_ns: complete.map(|c| c.0),
            dev,
            sector,
            bytes,
            op: op_of(&rwbs),
            rwbs,
            pid: issue.as_ref().map_or(0, |i| pid_of(i.tid)),
            comm: issue.as_ref().map(|i| i.comm.clone()).unwrap_or_default(),
            file_id: sector.and_then(|s| extents.file_at(dev, s * 512)),
            error: complete.map_or(0, |c| c.1),
        }
    };
    for e in events {
        match &e.event {
            Event::BlockIssue { tid, dev, sector, bytes, rwbs, comm } => {
                pending.entry((*dev, *sector)).or_default().push_back(Issue {
                    t: to_trace(e.ts),
                    bytes: *bytes,
                    rwbs: rwbs.clone(),
                    tid: *tid,
                    comm: comm.text(),
                });
            }
            Event::BlockComplete { dev, sector, nr_sector, error, rwbs } => {
                let issue = pending.get_mut(&(*dev, *sector)).and_then(VecDeque::pop_front);
                out.push(row(*dev, *sector, issue, Some((to_trace(e.ts), *error, rwbs, *nr_sector))));
            }
            _ => {}
        }
    }
    for ((dev, sector), list) in pending {
        for issue in list {
            out.push(row(dev, sector, Some(issue), None));
        }
    }
    out.sort_by_key(|b| b.issue_ns.or(b.complete_ns));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::events::Comm;

    #[test]
    fn pairs_requests_flushes_and_files() {
        let vda = Dev::new(254, 0).to_kernel();
        let ev = |ts, event| Timed { ts, cpu: 0, event };
        let events = vec![
            ev(
                10,
                Event::BlockIssue {
                    tid: 7,
                    dev: vda,
                    sector: 16,
                    bytes: 4096,
                    rwbs: "RA".into(),
                    comm: Comm::default(),
                },
            ),
            ev(
                11,
                Event::BlockIssue {
                    tid: 8,
                    dev: vda,
                    sector: 800,
                    bytes: 8192,
                    rwbs: "W".into(),
                    comm: Comm::default(),
                },
            ),
            ev(15, Event::BlockComplete { dev: vda, sector: 16, nr_sector: 8, error: 0, rwbs: "RA".into() }),
            ev(
                16,
                Event::BlockComplete {
                    dev: vda,
                    sector: u64::MAX,
                    nr_sector: 0,
                    error: 0,
                    rwbs: "FF".into(),
                },
            ),
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
        assert_eq!(got.len(), 3);
        let read = &got[0];
        assert_eq!(
            (read.latency_ns(), read.op, read.file_id, read.pid),
            (Some(5), BlockOp::Read, Some(3), 1007)
        );
        let write = got.iter().find(|b| b.op == BlockOp::Write).unwrap();
        assert_eq!((write.complete_ns, write.file_id), (None, None));
        let flush = got.iter().find(|b| b.op == BlockOp::Flush).unwrap();
        assert_eq!((flush.issue_ns, flush.sector), (None, None));
    }
}
