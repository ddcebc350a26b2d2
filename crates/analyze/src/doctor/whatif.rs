//! What-if on other storage: the time to ready the same start would take on another
//! class of disk, with and without a prefetch plan. Every I/O wait on the critical
//! path is costed again on the other disk from the block requests that completed
//! during it (each weighted by the part of its time in flight that fell inside the
//! wait); the rest of the critical path (CPU, sleeps, waits for a CPU) is kept as
//! recorded. Waits during which no request completed keep their recorded length.
//!
//! A disk whose read-ahead is smaller than the recorded device's would not have read the
//! recorded requests whole: each request longer than the other disk's read-ahead is cut into
//! pieces of that size covering the share of its file the start used (`with_read_ahead`).
//!
//! On a lazily fetched volume (the `snapshot` class, a volume restored from a snapshot) the
//! first request to read each chunk of it also waits for the chunk's fetch: the fetches of a
//! wait's first reads are added to it, `fetch_depth` at a time (`mark_first_reads`). Chunks
//! are counted on the volume made afresh from the start's files (`packed.rs`): on the recorded
//! disk's layout, where files lie apart, a python import read 240 chunks first, against the 59
//! its files packed in order take (docs/benchmarks-journal.md).

use coldstart_trace::{BlockOp, Nanos};
use serde::{Deserialize, Serialize};

use crate::analysis::SegmentKind;
use crate::doctor::disk_model::{DiskClass, DiskParams, HIDDEN_QUEUE_MIN_REQUESTS, RequestShape};
use crate::doctor::facts::Facts;
use crate::doctor::packed::PackedLayout;
use crate::time::split;
use crate::units::{bytes, count, duration, plural};

/// How long after a request's completion the thread that waited for it may still be asleep.
pub(crate) const WAKE_SLACK_NS: Nanos = 500_000;
/// Ranges of the plan this close on the disk are read through as one.
const PLAN_GAP_BYTES: u64 = 256 * 1024;

/// Fits the disk models to the trace (hidden queues), takes the model of the disk that
/// read most as the primary one, and shares the critical path's I/O waits among files by
/// their cost in those models. [`Facts::new`] leaves the models at their measured values.
pub(crate) fn calibrate(f: &mut Facts) {
    fit_hidden_queues(f);
    f.primary =
        f.a.disks
            .iter()
            .zip(&f.disks)
            .max_by_key(|(d, _)| (d.traced_read_bytes, std::cmp::Reverse(d.dev)))
            .map_or_else(|| DiskParams::class_defaults(DiskClass::Measured), |(_, (_, p))| p.clone());
    share_path_waits(f);
}

/// Shares each I/O wait on the critical path, and the wait for a CPU right after it,
/// among files: by the cost in their disk's model of each file's requests that
/// completed in it (the what-if's window), else — no request of a known file there —
/// by the pages the waiting thread added (the analysis's own split, kept as it is).
/// Needs the fitted disk models: on a disk whose every request costs the same, a small
/// file's one request takes as much of a wait as a large file's readahead.
fn share_path_waits(f: &mut Facts) {
    let Some(cp) = f.path else { return };
    let (requests, _) = start_requests(f);
    let shares: Vec<Vec<(u32, Nanos)>> = cp
        .segments
        .iter()
        .map(|seg| {
            if seg.kind != SegmentKind::IoWait {
                return Vec::new();
            }
            let costs = file_costs_in_wait(f, &requests, seg.start_ns, seg.end_ns);
            if costs.is_empty() {
                seg.files.iter().map(|t| (t.file, t.ns)).collect()
            } else {
                let ns = seg.end_ns - seg.start_ns;
                costs.iter().map(|c| c.0).zip(split(ns, costs.iter().map(|c| c.1))).collect()
            }
        })
        .collect();
    for share in shares.iter().flatten() {
        f.wait.entry(share.0).and_modify(|sum| *sum = sum.saturating_add(share.1)).or_insert(share.1);
    }
    for (i, pair) in cp.segments.windows(2).enumerate() {
        let (io, next) = (&pair[0], &pair[1]);
        if io.kind != SegmentKind::IoWait
            || next.kind != SegmentKind::CpuWait
            || next.tid != io.tid
            || next.start_ns != io.end_ns
        {
            continue;
        }
        let ns = next.end_ns - next.start_ns;
        f.path_wake_ns = f.path_wake_ns.saturating_add(ns);
        let total: Nanos = shares[i].iter().map(|s| s.1).fold(0, Nanos::saturating_add);
        for (file, share) in shares[i].iter().filter(|_| total > 0) {
            let part = (i128::from(ns) * i128::from(*share) / i128::from(total)) as Nanos;
            f.wake.entry(*file).and_modify(|sum| *sum = sum.saturating_add(part)).or_insert(part);
        }
    }
}

/// A disk to predict the start on: every recorded disk, or only one.
#[derive(Clone, Debug, PartialEq)]
pub struct WhatIfSpec {
    pub disk: DiskParams,
    /// Put only this recorded device on `disk`; requests of other devices keep their measured model.
    pub only_dev: Option<coldstart_trace::Dev>,
}

impl From<DiskParams> for WhatIfSpec {
    fn from(disk: DiskParams) -> WhatIfSpec {
        WhatIfSpec { disk, only_dev: None }
    }
}

/// The predicted time to ready on one disk.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    pub disk: DiskParams,
    /// The only recorded device put on `disk` (the others kept their measured model); `null` for all.
    pub only_dev: Option<coldstart_trace::Dev>,
    /// As recorded.
    pub time_to_ready_ns: Nanos,
    /// I/O wait on the critical path as recorded, and as predicted on this disk.
    pub path_io_wait_ns: Nanos,
    pub predicted_path_io_wait_ns: Nanos,
    /// The time to ready on this disk.
    pub predicted_ns: Nanos,
    /// With the start's data read into the page cache before the start: no I/O wait left,
    /// nor the waits for a CPU of threads woken after one.
    pub with_prefetch_ahead_ns: Nanos,
    /// Time to read the start's data on this disk in disk order (the prefetch replay).
    pub prefetch_replay_ns: Nanos,
    /// With the replay started alongside the start: at least the longer of the two above.
    pub with_prefetch_alongside_ns: Nanos,
    /// I/O waits on the critical path, and those during which no request completed (kept as recorded).
    pub path_waits: u64,
    pub path_waits_kept: u64,
    /// Read requests costed on this disk, and requests left out as not the start's (other processes).
    pub requests: u64,
    pub requests_left_out: u64,
    /// Bytes and requests of the replayed plan (the start's read requests, merged in disk order).
    pub plan_bytes: u64,
    pub plan_requests: u64,
    /// The busiest disk's time to serve all the start's read requests (its model's cost of
    /// them, the disks in parallel): the start cannot be ready sooner, whatever overlapped.
    pub disk_floor_ns: Nanos,
    /// The read-ahead modelled on this disk and the recorded devices' (the largest, `None`
    /// when the trace does not say); with a smaller read-ahead, the recorded requests longer
    /// than it (`read_ahead_cut`) were costed as `read_ahead_pieces` requests of at most that
    /// size, for the share of their file the start used.
    #[serde(default)]
    pub read_ahead_bytes: Option<u64>,
    #[serde(default)]
    pub recorded_read_ahead_bytes: Option<u64>,
    #[serde(default)]
    pub read_ahead_cut: u64,
    #[serde(default)]
    pub read_ahead_pieces: u64,
    /// On a lazily fetched volume: the chunks the start's requests read first, each costed a
    /// fetch (0 on other disks).
    #[serde(default)]
    pub chunk_fetches: u64,
    /// On a lazily fetched volume: the time a block plan (`prefetch plan --blocks`) replayed
    /// before the start takes to fetch those chunks, `fetch_depth` at a time (0 on other disks).
    #[serde(default)]
    pub block_plan_fetch_ns: Nanos,
    /// The arithmetic, for people.
    pub text: String,
}

/// Requests cut to another disk's read-ahead: how many were cut, into how many.
#[derive(Default)]
struct ReadAheadCut {
    recorded: Option<u64>,
    cut: u64,
    pieces: u64,
}

/// A used share this high is a file read in order: the pieces follow each other on the disk.
const SEQUENTIAL_USE: f64 = 0.9;

/// The start's requests as a disk with `spec`'s read-ahead would have made them: a recorded
/// request of `B` bytes of a file whose pages the start used for a share `s`, longer than the
/// read-ahead `R` of the disk it is costed on and smaller than the recorded one, becomes
/// `ceil(B × s / R)` requests of `R` bytes (at most `B` in all): contiguous when the file was
/// read in order (`s` ≥ 0.9), else each a near seek from the previous one. Requests costed
/// with their own recorded model are kept.
fn with_read_ahead(f: &Facts, spec: &WhatIfSpec, requests: Vec<Costed>) -> (Vec<Costed>, ReadAheadCut) {
    let recorded_of = |dev| f.disks.iter().find(|(d, _)| *d == dev).and_then(|(_, p)| p.read_ahead_bytes);
    let mut out = ReadAheadCut {
        recorded: f.disks.iter().filter_map(|(_, p)| p.read_ahead_bytes).max(),
        ..ReadAheadCut::default()
    };
    let Some(target) = spec.disk.read_ahead_bytes.filter(|&r| r >= 4096) else { return (requests, out) };
    let used_share: std::collections::HashMap<u32, f64> =
        f.a.page_use_by_file
            .iter()
            .filter(|u| u.filled_pages > 0)
            .map(|u| (u.file, (u.filled_pages - u.unused_pages) as f64 / u.filled_pages as f64))
            .collect();
    let mut kept = Vec::with_capacity(requests.len());
    for c in requests {
        let on_target = std::ptr::eq(model_for(f, spec, c.dev), &spec.disk);
        let smaller = recorded_of(c.dev).is_some_and(|r| target < r);
        if !on_target || !smaller || c.bytes <= target {
            kept.push(c);
            continue;
        }
        let share = c.file.and_then(|id| used_share.get(&id).copied()).unwrap_or(1.0);
        let pieces = ((c.bytes as f64 * share) / target as f64).ceil().max(1.0) as u64;
        let mut left = c.bytes.min(pieces * target);
        out.cut += 1;
        out.pieces += pieces;
        for i in 0..pieces {
            let bytes = left.min(target);
            left -= bytes;
            let distance = match i {
                0 => c.distance,
                _ if share >= SEQUENTIAL_USE => Some(0),
                _ => Some(target as i64),
            };
            kept.push(Costed { bytes, distance, sector: c.sector + i * target / 512, ..c });
        }
    }
    (kept, out)
}

#[derive(Clone, Copy)]
pub(crate) struct Costed {
    issue: Nanos,
    complete: Nanos,
    dev: coldstart_trace::Dev,
    sector: u64,
    bytes: u64,
    distance: Option<i64>,
    /// The file holding the request's start sector, when known.
    file: Option<u32>,
    /// On a lazily fetched volume: the chunks this request reads first (set by `mark_first_reads`).
    first_chunks: u64,
}

/// Counts for each request (in order of completion) the chunks it reads first, on a lazily
/// fetched volume: those no earlier request of its device touched, the chunks taken on the
/// volume made afresh from the start's files (`PackedLayout`), as an image is built and as
/// `bench --storage` fills its device. Returns them all.
fn mark_first_reads(f: &Facts, spec: &WhatIfSpec, requests: &mut [Costed]) -> u64 {
    if !requests.iter().any(|c| model_for(f, spec, c.dev).is_lazy()) {
        return 0;
    }
    let metadata: Vec<(coldstart_trace::Dev, u64, u64)> = requests
        .iter()
        .filter(|c| c.file.is_none())
        .map(|c| (c.dev, c.sector.saturating_mul(512), c.bytes))
        .collect();
    let layout = PackedLayout::new(f.trace, &metadata);
    let mut seen: std::collections::HashSet<(coldstart_trace::Dev, u64)> = std::collections::HashSet::new();
    let mut total = 0;
    for c in requests.iter_mut() {
        let model = model_for(f, spec, c.dev);
        let chunks = model.chunks_of(layout.offset_of(c.dev, c.sector.saturating_mul(512), c.file), c.bytes);
        c.first_chunks = chunks.filter(|&chunk| seen.insert((c.dev, chunk))).count() as u64;
        total += c.first_chunks;
    }
    total
}

/// The first reads' fetches per device, from `mark_first_reads`.
fn first_chunks_of(requests: &[Costed], dev: coldstart_trace::Dev) -> u64 {
    requests.iter().filter(|c| c.dev == dev).map(|c| c.first_chunks).sum()
}

/// The start's read requests (of in-scope processes, their files, or filesystem metadata)
/// between the command's start and ready, by completion; and how many were left out.
pub(crate) fn start_requests(f: &Facts) -> (Vec<Costed>, u64) {
    let mut kept = Vec::new();
    let mut left_out = 0;
    for disk in &f.a.disks {
        for r in disk.requests.iter().filter(|r| r.op == BlockOp::Read) {
            let (Some(issue), Some(complete)) = (r.issue_ns, r.complete_ns) else { continue };
            if complete < f.origin || issue > f.ready {
                continue;
            }
            let ours = r.metadata
                || f.a.process(r.pid).is_some_and(|p| p.in_scope)
                || r.file.is_some_and(|id| {
                    f.files
                        .get(&id)
                        .is_some_and(|s| s.pids.iter().any(|&p| f.a.process(p).is_none_or(|p| p.in_scope)))
                });
            if !ours {
                left_out += 1;
                continue;
            }
            kept.push(Costed {
                issue,
                complete,
                dev: disk.dev,
                sector: r.sector,
                bytes: u64::from(r.bytes),
                distance: r.distance_sectors.map(|d| d * 512),
                file: r.file,
                first_chunks: 0,
            });
        }
    }
    kept.sort_by_key(|c| (c.complete, c.issue));
    (kept, left_out)
}

/// The model a request of `dev` is costed with.
fn model_for<'m>(f: &'m Facts, spec: &'m WhatIfSpec, dev: coldstart_trace::Dev) -> &'m DiskParams {
    let own_model = spec.disk.class == DiskClass::Measured;
    match spec.only_dev {
        _ if own_model => f.disks.iter().find(|(d, _)| *d == dev).map_or(&f.primary, |(_, p)| p),
        Some(only) if only != dev => f.disks.iter().find(|(d, _)| *d == dev).map_or(&f.primary, |(_, p)| p),
        _ => &spec.disk,
    }
}

/// The predicted length of a wait `start..end`, from the requests completing in it;
/// requests costed with the same model overlap by its queue depth; their fetches on a lazily
/// fetched volume as `fetch_chain_ns` says.
fn wait_on(f: &Facts, spec: &WhatIfSpec, requests: &[Costed], start: Nanos, end: Nanos) -> Option<Nanos> {
    // Per model (by address): serial cost, transfer, requests, first reads of chunks.
    type Group<'m> = (&'m DiskParams, f64, f64, usize, Vec<(Nanos, Nanos, f64)>);
    let mut groups: Vec<Group> = Vec::new();
    for (c, weight) in in_wait(requests, start, end) {
        let disk = model_for(f, spec, c.dev);
        let serial = weight * (disk.request_ns + disk.positioning_ns(c.distance)) as f64;
        let transfer = weight * disk.transfer_ns(c.bytes) as f64;
        let fetch = (c.first_chunks > 0).then_some((c.issue, c.complete, weight * c.first_chunks as f64));
        match groups.iter_mut().find(|g| std::ptr::eq(g.0, disk)) {
            Some(g) => {
                g.1 += serial;
                g.2 += transfer;
                g.3 += 1;
                g.4.extend(fetch);
            }
            None => groups.push((disk, serial, transfer, 1, fetch.into_iter().collect())),
        }
    }
    if groups.is_empty() {
        return None;
    }
    let total: f64 = groups
        .iter_mut()
        .map(|(disk, serial, transfer, n, fetches)| {
            *serial / (disk.queue_depth.max(1) as usize).min(*n) as f64
                + *transfer
                + fetch_chain_ns(disk, fetches) as f64
        })
        .sum();
    Some(total as Nanos)
}

/// The fetches of one wait's first reads (issue, completion, weighted chunks): a request
/// issued after an earlier one of the wait had completed depended on it (the next block of
/// a lookup, the read after the metadata), so on a lazily fetched volume its fetches start
/// after that one's: the wait's requests form batches, one after the other, each batch's
/// fetches `fetch_depth` at a time.
fn fetch_chain_ns(disk: &DiskParams, fetches: &mut [(Nanos, Nanos, f64)]) -> Nanos {
    fetches.sort_by_key(|&(issue, complete, _)| (issue, complete));
    let mut total: Nanos = 0;
    let mut batch: Option<(Nanos, f64)> = None;
    for &(issue, complete, chunks) in fetches.iter() {
        batch = match batch {
            Some((first_done, sum)) if issue < first_done => Some((first_done.min(complete), sum + chunks)),
            Some((_, sum)) => {
                total = total.saturating_add(disk.fetches_ns(sum.ceil() as u64));
                Some((complete, chunks))
            }
            None => Some((complete, chunks)),
        };
    }
    if let Some((_, sum)) = batch {
        total = total.saturating_add(disk.fetches_ns(sum.ceil() as u64));
    }
    total
}

/// On a lazily fetched volume, the fetches of first reads no wait of the path counted (read
/// ahead while the start ran): the start needs their data soon, and on the recorded disk it had
/// arrived by then; a fetch takes longer, so the next wait after their issue waits for the
/// rest: their fetches less the time from the earliest of them to that wait.
fn unwaited_fetches_ns(f: &Facts, spec: &WhatIfSpec, requests: &[Costed], waits: &[(Nanos, Nanos)]) -> Nanos {
    // Per following wait: the earliest issue and the chunks.
    let mut pending: Vec<(Nanos, Nanos, u64, &DiskParams)> = Vec::new();
    for c in requests.iter().filter(|c| c.first_chunks > 0) {
        if waits
            .iter()
            .any(|&(start, end)| in_wait(std::slice::from_ref(c), start, end).any(|(_, w)| w > 0.0))
        {
            continue;
        }
        let Some(&(next, _)) = waits.iter().find(|&&(start, _)| start >= c.issue) else { continue };
        match pending.iter_mut().find(|p| p.0 == next) {
            Some(p) => {
                p.1 = p.1.min(c.issue);
                p.2 += c.first_chunks;
            }
            None => pending.push((next, c.issue, c.first_chunks, model_for(f, spec, c.dev))),
        }
    }
    pending.iter().map(|&(next, issue, chunks, disk)| (disk.fetches_ns(chunks) - (next - issue)).max(0)).sum()
}

/// The requests of `requests` (sorted by completion) that count for a wait `start..end`:
/// completed in it (or just after it) and issued before it ended, each with the part of
/// its time in flight that fell inside the wait.
fn in_wait(requests: &[Costed], start: Nanos, end: Nanos) -> impl Iterator<Item = (&Costed, f64)> {
    let first = requests.partition_point(|c| c.complete <= start);
    requests[first..]
        .iter()
        .take_while(move |c| c.complete <= end + WAKE_SLACK_NS)
        .filter(move |c| c.issue <= end)
        .map(move |c| {
            let latency = (c.complete - c.issue).max(1) as f64;
            let inside = (c.complete.min(end) - c.issue.max(start)).max(0) as f64;
            (c, (inside / latency).min(1.0))
        })
}

/// Per known file, the cost in its disk's recorded model of its requests that count for
/// the wait `start..end` (as in `wait_on`: weighted by their part inside the wait, a disk's
/// fixed and positioning costs overlapped by its queue depth); empty when no request of a
/// known file counts for it. Under a per-request cost (a throttle, a seeking disk) a small
/// file's one request weighs as much as a large file's readahead, whatever their pages.
pub(crate) fn file_costs_in_wait(
    f: &Facts,
    requests: &[Costed],
    start: Nanos,
    end: Nanos,
) -> Vec<(u32, u64)> {
    let during: Vec<(&Costed, f64)> = in_wait(requests, start, end).collect();
    let mut per_dev: Vec<(coldstart_trace::Dev, usize)> = Vec::new();
    for (c, _) in &during {
        match per_dev.iter_mut().find(|d| d.0 == c.dev) {
            Some(d) => d.1 += 1,
            None => per_dev.push((c.dev, 1)),
        }
    }
    let mut costs: Vec<(u32, u64)> = Vec::new();
    for (c, weight) in &during {
        let Some(file) = c.file else { continue };
        let disk = f.disks.iter().find(|(d, _)| *d == c.dev).map_or(&f.primary, |(_, p)| p);
        let sharing = per_dev.iter().find(|d| d.0 == c.dev).map_or(1, |d| d.1);
        let serial = (disk.request_ns + disk.positioning_ns(c.distance)) as f64
            / (disk.queue_depth.max(1) as usize).min(sharing) as f64;
        let cost = (weight * (serial + disk.transfer_ns(c.bytes) as f64)).round() as u64;
        match costs.iter_mut().find(|e| e.0 == file) {
            Some(e) => e.1 = e.1.saturating_add(cost),
            None => costs.push((file, cost)),
        }
    }
    if costs.iter().all(|e| e.1 == 0) {
        costs.clear();
    }
    costs
}

/// Fits each disk's request cost to the critical path's recorded I/O waits when its
/// requests' own latency leaves out a hidden queue (see `DiskParams::fit_hidden_queue`).
/// A wait is taken as served by the disk of the last request that completed before the
/// thread woke (a stacked device's request, such as a loop device's, completes after the
/// requests on the device under it; a request held in a hidden queue is issued late, so
/// the first issued is not the one waited for); the fitted cost is the recorded wait, less the
/// positioning and transfer of that disk's requests in it, per request (weighted as in
/// `wait_on`).
pub(crate) fn fit_hidden_queues(f: &mut Facts) {
    let Some(cp) = f.path else { return };
    let (requests, _) = start_requests(f);
    // Per disk: recorded wait, weighted requests, weighted positioning and transfer.
    let mut served: Vec<(coldstart_trace::Dev, Nanos, f64, f64)> = Vec::new();
    for s in cp.segments.iter().filter(|s| s.kind == SegmentKind::IoWait) {
        let during: Vec<(&Costed, f64)> = in_wait(&requests, s.start_ns, s.end_ns).collect();
        let Some((top, _)) = during.iter().max_by_key(|(c, _)| (c.complete, c.dev)) else { continue };
        let Some((_, model)) = f.disks.iter().find(|(d, _)| *d == top.dev) else { continue };
        let (mut weights, mut other) = (0.0, 0.0);
        for (c, weight) in during.iter().filter(|(c, _)| c.dev == top.dev) {
            weights += weight;
            other += weight * (model.positioning_ns(c.distance) + model.transfer_ns(c.bytes)) as f64;
        }
        match served.iter_mut().find(|e| e.0 == top.dev) {
            Some(e) => {
                e.1 = e.1.saturating_add(s.end_ns - s.start_ns);
                e.2 += weights;
                e.3 += other;
            }
            None => served.push((top.dev, s.end_ns - s.start_ns, weights, other)),
        }
    }
    for (dev, recorded, weights, other) in served {
        if weights < HIDDEN_QUEUE_MIN_REQUESTS {
            continue;
        }
        let fitted = ((recorded as f64 - other).max(0.0) / weights) as Nanos;
        if let Some((_, model)) = f.disks.iter_mut().find(|(d, _)| *d == dev) {
            model.fit_hidden_queue(fitted, weights, recorded);
        }
    }
}

/// The busiest disk's cost of all the start's read requests: on a slow disk the requests
/// the program did not wait for (readahead completing while it ran) still take the disk's
/// time, and a disk that serves one request at a time delays the later ones by them.
fn disk_floor_ns(f: &Facts, spec: &WhatIfSpec, requests: &[Costed]) -> Nanos {
    let mut devs: Vec<coldstart_trace::Dev> = requests.iter().map(|c| c.dev).collect();
    devs.sort_unstable();
    devs.dedup();
    devs.iter()
        .map(|&dev| {
            let shapes: Vec<RequestShape> = requests
                .iter()
                .filter(|c| c.dev == dev)
                .map(|c| RequestShape { bytes: c.bytes, distance_bytes: c.distance })
                .collect();
            let model = model_for(f, spec, dev);
            model.cost_ns(&shapes).saturating_add(model.fetches_ns(first_chunks_of(requests, dev)))
        })
        .max()
        .unwrap_or(0)
}

/// The start's read requests merged in disk order into the requests a replay would make,
/// by device.
fn plan_shapes(
    f: &Facts,
    spec: &WhatIfSpec,
    requests: &[Costed],
) -> Vec<(coldstart_trace::Dev, RequestShape)> {
    let mut ranges: Vec<(coldstart_trace::Dev, u64, u64)> =
        requests.iter().map(|c| (c.dev, c.sector * 512, c.sector * 512 + c.bytes)).collect();
    ranges.sort_unstable();
    let mut merged: Vec<(coldstart_trace::Dev, u64, u64)> = Vec::new();
    for r in ranges {
        match merged.last_mut() {
            Some(last) if last.0 == r.0 && r.1 <= last.2 + PLAN_GAP_BYTES => last.2 = last.2.max(r.2),
            _ => merged.push(r),
        }
    }
    let mut shapes = Vec::new();
    let mut previous: Option<(coldstart_trace::Dev, u64)> = None;
    for (dev, start, end) in merged {
        let disk = model_for(f, spec, dev);
        let mut at = start;
        while at < end {
            let len = (end - at).min(disk.max_request_bytes.max(1));
            let distance = match previous {
                Some((d, prev_end)) if d == dev => Some(at as i64 - prev_end as i64),
                _ => None,
            };
            shapes.push((dev, RequestShape { bytes: len, distance_bytes: distance }));
            previous = Some((dev, at + len));
            at += len;
        }
    }
    shapes
}

/// The replay's time: each device's requests at its model's cost, the devices in parallel;
/// on a lazily fetched volume the replay first fetches the chunks the start read.
fn replay_ns(
    f: &Facts,
    spec: &WhatIfSpec,
    shapes: &[(coldstart_trace::Dev, RequestShape)],
    requests: &[Costed],
) -> Nanos {
    let mut devs: Vec<coldstart_trace::Dev> = shapes.iter().map(|s| s.0).collect();
    devs.dedup();
    devs.iter()
        .map(|&dev| {
            let of_dev: Vec<RequestShape> = shapes.iter().filter(|s| s.0 == dev).map(|s| s.1).collect();
            let model = model_for(f, spec, dev);
            model.cost_ns(&of_dev).saturating_add(model.fetches_ns(first_chunks_of(requests, dev)))
        })
        .max()
        .unwrap_or(0)
}

pub(crate) fn what_if(f: &Facts, spec: &WhatIfSpec) -> WhatIf {
    let mut disk = spec.disk.clone();
    if disk.class == DiskClass::Measured {
        "each disk as recorded".clone_into(&mut disk.description);
    }
    let (requests, left_out) = start_requests(f);
    let (mut requests, cut) = with_read_ahead(f, spec, requests);
    let chunk_fetches = mark_first_reads(f, spec, &mut requests);
    let mut path_io: Nanos = 0;
    let mut predicted_io: Nanos = 0;
    let mut waits = 0;
    let mut kept = 0;
    if let Some(cp) = f.path {
        let spans: Vec<(Nanos, Nanos)> = cp
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::IoWait)
            .map(|s| (s.start_ns, s.end_ns))
            .collect();
        predicted_io = predicted_io.saturating_add(unwaited_fetches_ns(f, spec, &requests, &spans));
        for s in cp.segments.iter().filter(|s| s.kind == SegmentKind::IoWait) {
            let recorded = s.end_ns - s.start_ns;
            path_io = path_io.saturating_add(recorded);
            waits += 1;
            match wait_on(f, spec, &requests, s.start_ns, s.end_ns) {
                Some(ns) => predicted_io = predicted_io.saturating_add(ns),
                None => {
                    predicted_io = predicted_io.saturating_add(recorded);
                    kept += 1;
                }
            }
        }
    } else {
        path_io = f.a.start.io_wait_ns;
        predicted_io = path_io;
    }
    let ttr = f.time_to_ready;
    let path_based = ttr - path_io + predicted_io;
    let floor = disk_floor_ns(f, spec, &requests);
    let predicted = path_based.max(floor);
    let ahead = ttr - path_io - f.path_wake_ns;
    let shapes = plan_shapes(f, spec, &requests);
    let replay = replay_ns(f, spec, &shapes, &requests);
    let plan_bytes = shapes.iter().map(|s| s.1.bytes).fold(0, u64::saturating_add);
    let alongside = ahead.max(replay);
    let text = format!(
        "{} to ready − {} of I/O wait on the critical path + {} for the same waits on {}{} ({} costed again from {}{}) \
         = {}{}; with the start's data ({} in {}) read before the start: {} (no I/O wait, nor the {} waiting for a CPU \
         when woken after it); replaying it in disk order takes {} there, so alongside the start at least {}",
        duration(ttr),
        duration(path_io),
        duration(predicted_io),
        disk.description,
        spec.only_dev.map(|d| format!(" (device {d} only)")).unwrap_or_default(),
        plural(waits - kept, "wait"),
        plural(requests.len() as u64, "request"),
        if kept > 0 {
            format!("; {} without a request kept as recorded", count(kept))
        } else {
            String::new()
        },
        duration(path_based),
        if floor > path_based {
            format!(
                ", less than the {} the busiest disk needs for all {} of the start: {}",
                duration(floor),
                plural(requests.len() as u64, "request"),
                duration(predicted)
            )
        } else {
            String::new()
        },
        bytes(plan_bytes),
        plural(shapes.len() as u64, "request"),
        duration(ahead),
        duration(f.path_wake_ns),
        duration(replay),
        duration(alongside)
    ) + &read_ahead_text(spec, &cut)
        + &fetch_text(&spec.disk, chunk_fetches, (predicted - ahead).max(0));
    WhatIf {
        disk,
        only_dev: spec.only_dev,
        time_to_ready_ns: ttr,
        path_io_wait_ns: path_io,
        predicted_path_io_wait_ns: predicted_io,
        predicted_ns: predicted,
        with_prefetch_ahead_ns: ahead,
        prefetch_replay_ns: replay,
        with_prefetch_alongside_ns: alongside,
        path_waits: waits,
        path_waits_kept: kept,
        requests: requests.len() as u64,
        requests_left_out: left_out,
        plan_bytes,
        plan_requests: shapes.len() as u64,
        disk_floor_ns: floor,
        read_ahead_bytes: spec.disk.read_ahead_bytes,
        recorded_read_ahead_bytes: cut.recorded,
        read_ahead_cut: cut.cut,
        read_ahead_pieces: cut.pieces,
        chunk_fetches,
        block_plan_fetch_ns: spec.disk.fetches_ns(chunk_fetches),
        text,
    }
}

/// What the prediction counted of a lazily fetched volume's fetches, and the gain of a block
/// plan replayed before the start, for the what-if's text.
fn fetch_text(disk: &DiskParams, fetches: u64, gain: Nanos) -> String {
    if !disk.is_lazy() {
        return String::new();
    }
    format!(
        "; restored from a snapshot, the start reads {} of {} first (on the volume made from its files, packed in \
         order): each waits for its fetch ({} each, {} at a time), added to the waits of the requests that read them \
         first, to the disk's time and to the replay; a block plan (`coldstart prefetch plan --blocks`) replayed \
         before the start fetches them in {}, and the start then gains {}",
        plural(fetches, "chunk"),
        bytes(disk.fetch_chunk_bytes),
        duration(disk.fetch_ns()),
        disk.fetch_depth,
        duration(disk.fetches_ns(fetches)),
        duration(gain)
    )
}

/// What the prediction assumed of the read-ahead, for the what-if's text.
fn read_ahead_text(spec: &WhatIfSpec, cut: &ReadAheadCut) -> String {
    if spec.disk.class == DiskClass::Measured {
        return String::new();
    }
    let recorded = cut.recorded.map_or("unknown (the trace does not record it)".to_owned(), bytes);
    match spec.disk.read_ahead_bytes {
        None => format!("; read-ahead as recorded ({recorded})"),
        Some(r) if cut.cut > 0 => format!(
            "; modelled with this disk's read-ahead of {} instead of the recorded {recorded}: {} longer than it \
             costed as {} for the share of their files the start used",
            bytes(r),
            plural(cut.cut, "request"),
            plural(cut.pieces, "request")
        ),
        Some(r) => format!("; this disk's read-ahead {}, recorded {recorded}: no request to cut", bytes(r)),
    }
}
