//! Disk-level view of the block requests: traffic per disk against /proc/diskstats
//! (the trace's completeness check), head movement between consecutive read requests
//! (writes are counted apart), and the file each request read (the request's own file, else the recorded FIEMAP
//! extents, else the filesystem metadata pages, else unknown). Issues and
//! completions are paired again here, because a requeued request is issued twice
//! but completes once: the second issue is not a request of its own.

use std::collections::hash_map::Entry;

use coldstart_trace::{BlockIo, BlockOp, Dev, FileKind, Nanos};
use rustc_hash::FxHashMap;

use crate::analysis::{DiskAnalysis, DiskFile, DiskRequest, DiskSeeks};
use crate::context::Ctx;
use crate::units::duration;

const SECTOR: u64 = 512;

/// Byte ranges of one disk, sorted by start, each naming a file (or metadata).
#[derive(Default)]
struct RangeMap {
    ranges: Vec<(u64, u64, Owner)>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    File(u32),
    Metadata,
    Unknown,
}

impl RangeMap {
    fn finish(&mut self) {
        self.ranges.sort_unstable_by_key(|r| (r.0, r.1));
    }

    fn lookup(&self, byte: u64) -> Option<Owner> {
        let i = self.ranges.partition_point(|r| r.0 <= byte);
        self.ranges[..i].iter().rev().take(4).find(|r| byte < r.1).map(|r| r.2)
    }
}

pub(crate) fn disks(ctx: &Ctx) -> Vec<DiskAnalysis> {
    let trace = ctx.trace;
    let mut maps: FxHashMap<Dev, RangeMap> = FxHashMap::default();
    for e in &trace.extents {
        let owner = match ctx.file(e.file_id) {
            Some(f) if f.kind == FileKind::DeviceMetadata => Owner::Metadata,
            _ => Owner::File(e.file_id),
        };
        maps.entry(e.disk).or_default().ranges.push((e.physical, e.physical.saturating_add(e.length), owner));
    }
    for g in 0..ctx.fills_by_stream.len() {
        let (_, file_id) = ctx.fills_by_stream.key(g);
        let Some(file) = ctx.file(file_id).filter(|f| f.kind == FileKind::DeviceMetadata) else { continue };
        let map = maps.entry(file.dev).or_default();
        for &r in ctx.fills_by_stream.rows(g) {
            let fill = &trace.page_fills[r as usize];
            let start = fill.index.saturating_mul(ctx.page_size);
            map.ranges.push((start, start.saturating_add(ctx.bytes(u64::from(fill.pages))), Owner::Metadata));
        }
    }
    maps.values_mut().for_each(RangeMap::finish);

    let mut devs: Vec<Dev> = trace.disks.iter().map(|d| d.dev).collect();
    devs.extend(trace.block_ios.iter().map(|b| b.dev));
    devs.sort_unstable();
    devs.dedup();

    let mut by_dev: FxHashMap<Dev, Vec<u32>> = FxHashMap::default();
    for (r, io) in trace.block_ios.iter().enumerate() {
        by_dev.entry(io.dev).or_default().push(r as u32);
    }
    let empty = RangeMap::default();
    devs.into_iter()
        .map(|dev| {
            let rows = by_dev.get(&dev).map_or(&[][..], Vec::as_slice);
            let (requests, reissued) = pair(&trace.block_ios, rows);
            let mut analysis = disk(ctx, dev, &requests, maps.get(&dev).unwrap_or(&empty));
            analysis.reissued = reissued;
            analysis
        })
        .collect()
}

/// A block request as the analysis counts it: the row of its issue (or of a lone
/// completion) with the completion paired to it here.
struct Paired {
    row: u32,
    issue_ns: Option<Nanos>,
    complete_ns: Option<Nanos>,
}

/// Pairs again the issues and completions of one disk's rows, per (sector, operation):
/// an issue while another of the same sector is still pending is a requeue of that
/// request (not a request of its own), and each completion belongs to the pending
/// issue. Rows without a sector keep their own times. Returns the requests by time
/// and the number of requeues.
fn pair(ios: &[BlockIo], rows: &[u32]) -> (Vec<Paired>, u64) {
    const ISSUE: u8 = 0;
    const COMPLETE: u8 = 1;
    let mut out = Vec::with_capacity(rows.len());
    let mut events: Vec<(Nanos, u8, u32)> = Vec::with_capacity(2 * rows.len());
    for &r in rows {
        let io = &ios[r as usize];
        if io.sector.is_none() {
            out.push(Paired { row: r, issue_ns: io.issue_ns, complete_ns: io.complete_ns });
            continue;
        }
        events.extend(io.issue_ns.map(|t| (t, ISSUE, r)));
        events.extend(io.complete_ns.map(|t| (t, COMPLETE, r)));
    }
    events.sort_unstable();
    let mut pending: FxHashMap<(u64, BlockOp), usize> = FxHashMap::default();
    let mut reissued = 0;
    for (t, kind, r) in events {
        let io = &ios[r as usize];
        let key = (io.sector.unwrap_or(u64::MAX), io.op);
        if kind == ISSUE {
            match pending.entry(key) {
                Entry::Occupied(_) => reissued += 1,
                Entry::Vacant(slot) => {
                    slot.insert(out.len());
                    out.push(Paired { row: r, issue_ns: Some(t), complete_ns: None });
                }
            }
        } else {
            match pending.remove(&key) {
                Some(i) => out[i].complete_ns = Some(t),
                None => out.push(Paired { row: r, issue_ns: None, complete_ns: Some(t) }),
            }
        }
    }
    let time = |p: &Paired| p.issue_ns.or(p.complete_ns).unwrap_or(Nanos::MAX);
    out.sort_by(|a, b| time(a).cmp(&time(b)).then(a.row.cmp(&b.row)));
    (out, reissued)
}

fn owner_of(ctx: &Ctx, io: &BlockIo, map: &RangeMap) -> Owner {
    if let Some(id) = io.file_id {
        return match ctx.file(id) {
            Some(f) if f.kind == FileKind::DeviceMetadata => Owner::Metadata,
            _ => Owner::File(id),
        };
    }
    if let Some(owner) = io.sector.and_then(|s| map.lookup(s.saturating_mul(SECTOR))) {
        return owner;
    }
    // The kernel flags metadata requests with M in rwbs (`RM`, `WM`).
    if io.rwbs.contains('M') { Owner::Metadata } else { Owner::Unknown }
}

fn disk(ctx: &Ctx, dev: Dev, requests: &[Paired], map: &RangeMap) -> DiskAnalysis {
    let threshold_sectors = ctx.config.seek_threshold_bytes / SECTOR;
    let mut seeks = DiskSeeks { threshold_bytes: ctx.config.seek_threshold_bytes, ..DiskSeeks::default() };
    let mut out = unmeasured_disk(ctx, dev, seeks);
    let mut latencies: Vec<Nanos> = Vec::new();
    let mut distances: Vec<u64> = Vec::new();
    let mut files: FxHashMap<u32, DiskFile> = FxHashMap::default();
    let mut previous_end: Option<u64> = None;
    for request in requests {
        let io = &ctx.trace.block_ios[request.row as usize];
        let latency = match (request.issue_ns, request.complete_ns) {
            (Some(issue), Some(done)) if done >= issue => Some(done - issue),
            _ => None,
        };
        if io.op == BlockOp::Read {
            out.traced_read_requests += 1;
            out.traced_read_bytes = out.traced_read_bytes.saturating_add(u64::from(io.bytes));
            if let Some(l) = latency {
                out.read_latency_ns = out.read_latency_ns.saturating_add(l);
                latencies.push(l);
            }
        }
        let Some(sector) = io.sector.filter(|_| io.op != BlockOp::Flush) else { continue };
        let owner = owner_of(ctx, io, map);
        let file = match owner {
            Owner::File(id) => Some(id),
            _ => None,
        };
        let row = |distance_sectors, far| DiskRequest {
            issue_ns: request.issue_ns,
            complete_ns: request.complete_ns,
            sector,
            bytes: io.bytes,
            op: io.op,
            pid: io.pid,
            file,
            metadata: owner == Owner::Metadata,
            distance_sectors,
            far,
        };
        if io.op != BlockOp::Read {
            // Writes (the program's output, the journal) go where the filesystem puts
            // them: they are neither the start's seeks nor its files' reads.
            if io.op == BlockOp::Write {
                out.write_requests += 1;
                out.write_bytes = out.write_bytes.saturating_add(u64::from(io.bytes));
            }
            out.requests.push(row(None, false));
            continue;
        }
        let distance = previous_end.map(|end| sector as i64 - end as i64);
        previous_end = Some(sector + u64::from(io.bytes).div_ceil(SECTOR));
        let far = count_seek(&mut seeks, distance, threshold_sectors, &mut distances);
        count_read_by_owner(&mut out, &mut files, owner, io, far, latency);
        out.requests.push(row(distance, far));
    }
    if !distances.is_empty() {
        let mid = distances.len() / 2;
        seeks.median_distance_bytes = Some(*distances.select_nth_unstable(mid).1);
    }
    out.seeks = seeks;
    out.coverage =
        out.diskstats_read_bytes.filter(|&b| b > 0).map(|b| out.traced_read_bytes as f64 / b as f64);
    if !latencies.is_empty() {
        let mid = latencies.len() / 2;
        out.read_latency_median_ns = Some(*latencies.select_nth_unstable(mid).1);
    }
    out.files = files.into_values().collect();
    out.files
        .sort_by(|a, b| b.requests.cmp(&a.requests).then(b.bytes.cmp(&a.bytes)).then(a.file.cmp(&b.file)));
    out.kind = kind_words(&out);
    out
}

/// The disk as the trace's `disk` table describes it, before its requests are counted.
fn unmeasured_disk(ctx: &Ctx, dev: Dev, seeks: DiskSeeks) -> DiskAnalysis {
    let info = ctx.trace.disks.iter().find(|d| d.dev == dev);
    DiskAnalysis {
        dev,
        name: info.map_or_else(|| dev.to_string(), |d| d.name.clone()),
        model: info.and_then(|d| d.model.clone()),
        rotational: info.and_then(|d| d.rotational),
        kind: String::new(),
        read_ahead_kb: info.and_then(|d| d.read_ahead_kb),
        filled_pages: 0,
        unused_pages: 0,
        diskstats_read_bytes: info.and_then(|d| d.read_bytes),
        diskstats_read_ios: info.and_then(|d| d.read_ios),
        reissued: 0,
        traced_read_requests: 0,
        traced_read_bytes: 0,
        coverage: None,
        seeks,
        read_latency_ns: 0,
        read_latency_median_ns: None,
        metadata_requests: 0,
        metadata_bytes: 0,
        unknown_requests: 0,
        unknown_bytes: 0,
        write_requests: 0,
        write_bytes: 0,
        files: Vec::new(),
        requests: Vec::new(),
    }
}

/// Counts a read request's head movement (`distance` sectors from the end of the
/// previous read, `None` for the first); returns whether it was a far seek.
fn count_seek(
    seeks: &mut DiskSeeks,
    distance: Option<i64>,
    threshold_sectors: u64,
    distances: &mut Vec<u64>,
) -> bool {
    seeks.requests += 1;
    match distance {
        Some(0) => seeks.sequential += 1,
        Some(d) if d > 0 => {
            seeks.forward += 1;
            seeks.forward_sectors = seeks.forward_sectors.saturating_add(d as u64);
        }
        Some(d) => {
            seeks.backward += 1;
            seeks.backward_sectors = seeks.backward_sectors.saturating_add(d.unsigned_abs());
        }
        None => {}
    }
    if let Some(d) = distance.filter(|&d| d != 0) {
        let bytes = d.unsigned_abs().saturating_mul(SECTOR);
        seeks.distances.add(bytes);
        distances.push(bytes);
    }
    let far = distance.is_some_and(|d| d.unsigned_abs() > threshold_sectors);
    seeks.far += u64::from(far);
    far
}

/// Counts a read request for the file it read, or as metadata or unknown.
fn count_read_by_owner(
    out: &mut DiskAnalysis,
    files: &mut FxHashMap<u32, DiskFile>,
    owner: Owner,
    io: &BlockIo,
    far: bool,
    latency: Option<Nanos>,
) {
    match owner {
        Owner::File(id) => {
            let f = files.entry(id).or_insert(DiskFile { file: id, ..DiskFile::default() });
            f.requests += 1;
            f.bytes = f.bytes.saturating_add(u64::from(io.bytes));
            f.far_seeks += u64::from(far);
            f.latency_ns = f.latency_ns.saturating_add(latency.unwrap_or(0));
        }
        Owner::Metadata => {
            out.metadata_requests += 1;
            out.metadata_bytes = out.metadata_bytes.saturating_add(u64::from(io.bytes));
        }
        Owner::Unknown => {
            out.unknown_requests += 1;
            out.unknown_bytes = out.unknown_bytes.saturating_add(u64::from(io.bytes));
        }
    }
}

/// Read requests a disk needs before its median latency says what kind of disk it is.
const LATENCY_SAMPLES: u64 = 10;
/// The median read latency under which a disk behaves like flash (the doctor's rule too).
const FLASH_LATENCY_NS: Nanos = 2_000_000;

/// `kernel flag: rotational; measured: like an SSD (median read 71 µs)`: the kernel's flag,
/// which virtual disks often get wrong, and what the measured latencies look like.
fn kind_words(d: &DiskAnalysis) -> String {
    let flag = match d.rotational {
        Some(true) => "rotational",
        Some(false) => "non-rotational",
        None => "unknown",
    };
    let measured = match d.read_latency_median_ns.filter(|_| d.traced_read_requests >= LATENCY_SAMPLES) {
        Some(median) if median < FLASH_LATENCY_NS => {
            format!("like an SSD (median read {})", duration(median))
        }
        Some(median) => format!("like a spinning disk (median read {})", duration(median)),
        None => "too few reads to tell".to_owned(),
    };
    format!("kernel flag: {flag}; measured: {measured}")
}
