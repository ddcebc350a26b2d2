//! Durable writes during the start: synchronous writes (rwbs `S`), FUA or preflush
//! writes (`F`) and cache flushes that the critical path waited for. The evidence is
//! what the block layer shows: a thread on the path in uninterruptible sleep without
//! reading a page, woken when such a request completed. The system call (fsync,
//! fdatasync, O_SYNC, sync_file_range) is not in the trace, nor, for files created
//! during the start, which file was written.

use coldstart_trace::{BlockIo, BlockOp, Nanos};

use crate::analysis::{CriticalPath, PathSegment, SegmentKind};
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{bytes, count, duration, plural};

/// How long after a durable request's completion the waiting thread may still be seen asleep.
const WAKE_SLACK_NS: Nanos = 1_000_000;

pub(crate) fn durable_writes(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    let durable = durable_requests(f);
    if durable.is_empty() {
        return Vec::new();
    }
    let waits = waits_for_durable(cp, &durable);
    let gain: Nanos = waits.iter().map(|s| s.end_ns - s.start_ns).fold(0, Nanos::saturating_add);
    if gain < f.min_gain {
        return Vec::new();
    }
    vec![finding(f, &durable, &waits, gain)]
}

/// The flushes and synchronous or FUA writes of the start.
fn durable_requests<'t>(f: &Facts<'t>) -> Vec<&'t BlockIo> {
    f.trace
        .block_ios
        .iter()
        .filter(|b| {
            b.op == BlockOp::Flush
                || (b.op == BlockOp::Write && (b.rwbs.contains('S') || b.rwbs.contains('F')))
        })
        .filter(|b| {
            b.complete_ns.or(b.issue_ns).is_some_and(|t| t >= f.origin && t <= f.ready + WAKE_SLACK_NS)
        })
        .collect()
}

/// The path's I/O waits without a page read that a durable request's completion ended.
fn waits_for_durable<'p>(cp: &'p CriticalPath, durable: &[&BlockIo]) -> Vec<&'p PathSegment> {
    let mut completions: Vec<Nanos> = durable.iter().filter_map(|b| b.complete_ns).collect();
    completions.sort_unstable();
    cp.segments
        .iter()
        .filter(|s| s.kind == SegmentKind::IoWait && s.files.is_empty())
        .filter(|s| {
            let k = completions.partition_point(|&t| t <= s.start_ns);
            completions.get(k).is_some_and(|&t| t <= s.end_ns + WAKE_SLACK_NS)
        })
        .collect()
}

/// `comm/pid` of the processes that issued the most durable bytes, at most four.
fn issuer_names(durable: &[&BlockIo]) -> Vec<String> {
    let mut issuers: Vec<(String, i32, u64)> = Vec::new();
    for b in durable {
        match issuers.iter_mut().find(|i| i.1 == b.pid) {
            Some(i) => i.2 = i.2.saturating_add(u64::from(b.bytes)),
            None => issuers.push((b.comm.clone(), b.pid, u64::from(b.bytes))),
        }
    }
    issuers.sort_by(|a, b| b.2.cmp(&a.2).then(a.1.cmp(&b.1)));
    issuers.iter().take(4).map(|i| format!("{}/{}", if i.0.is_empty() { "?" } else { &i.0 }, i.1)).collect()
}

fn finding(f: &Facts, durable: &[&BlockIo], waits: &[&PathSegment], gain: Nanos) -> Finding {
    let flushes = durable.iter().filter(|b| b.op == BlockOp::Flush).count() as u64;
    let writes = durable.len() as u64 - flushes;
    let written: u64 = durable
        .iter()
        .filter(|b| b.op == BlockOp::Write)
        .map(|b| u64::from(b.bytes))
        .fold(0, u64::saturating_add);
    let mut files: Vec<u32> = durable.iter().filter_map(|b| b.file_id).collect();
    files.sort_unstable();
    files.dedup();
    let mut waiting: Vec<i32> = waits.iter().map(|s| s.pid).collect();
    waiting.sort_unstable();
    waiting.dedup();
    let names = issuer_names(durable);
    Finding {
        kind: FindingKind::DurableWrites,
        title: format!("Durable writes on the critical path for {}", duration(gain)),
        evidence: Evidence {
            summary: format!(
                "{} and {} ({} written, issued by {}) during the start; the critical path waited for them {} ({}, no \
                 page read in those waits)",
                plural(writes, "synchronous or FUA write"),
                plural(flushes, "cache flush"),
                bytes(written),
                names.join(", "),
                plural(waits.len() as u64, "time"),
                duration(gain)
            ),
            files: f.evidence_files(&files),
            files_total: files.len() as u64,
            processes: waiting
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: waits.iter().filter(|s| s.pid == pid).map(|s| s.end_ns - s.start_ns).fold(0, Nanos::saturating_add),
                    read_bytes: 0,
                    in_scope: true,
                })
                .collect(),
            figures: vec![
                Figure::count("sync_writes", writes),
                Figure::count("flushes", flushes),
                Figure::bytes("written_bytes", written),
                Figure::count("path_waits", waits.len() as u64),
                Figure::ns("path_wait_ns", gain),
            ],
            intervals: waits
                .iter()
                .take(f.config.max_listed)
                .map(|s| EvidenceInterval {
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    tid: Some(s.tid),
                    what: format!("{}/{} waiting for a durable write", f.a.comm(s.pid), s.tid),
                })
                .collect(),
        },
        gain: Gain {
            ns: gain,
            formula: "path_wait_ns".to_owned(),
            text: format!(
                "{} spent on the critical path waiting for synchronous writes or flushes ({} waits), all saved when \
                 the data is written without waiting for the disk",
                duration(gain),
                count(waits.len() as u64)
            ),
            inputs: vec![Figure::ns("path_wait_ns", gain), Figure::count("path_waits", waits.len() as u64)],
            ahead_ns: None,
        },
        audience: Audience::Developers,
        suggestion: "Do not make data that can be rebuilt durable during the start: write caches without fsync / \
                     fdatasync / O_SYNC (a crash only costs a rebuild), write them after ready or from a background \
                     thread, or keep them on tmpfs ($XDG_RUNTIME_DIR); keep fsync for data the user would lose."
            .to_owned(),
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(
            "the trace sees block requests and their flags, not the system call behind them (fsync, fdatasync, \
             O_SYNC, sync_file_range), nor which file a write belongs to when the file was created during the \
             start; a journal commit forced by one fsync also carries other processes' writes"
                .to_owned(),
        ),
    }
}
