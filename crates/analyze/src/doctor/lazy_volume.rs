//! `lazy_volume`: the start read a volume that fetches each chunk on its first read (a cloud
//! volume restored from a snapshot, an image streamed lazily). Seen in the block requests:
//! the first request touching a chunk waits for a fetch, a later request of a chunk already
//! fetched is served at once. The cure is not in the programs that waited but in the image:
//! a block plan replayed as the volume appears fetches those chunks many at a time.

use coldstart_trace::{BlockOp, Dev, Nanos};
use rustc_hash::FxHashMap;

use crate::analysis::SegmentKind;
use crate::doctor::facts::{Facts, shell_quote};
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, Figure, Finding, FindingKind, Gain,
};
use crate::units::{bytes, duration, percent};

/// What one device's reads say about fetches on first read.
struct Fetches {
    dev: Dev,
    name: String,
    /// Latencies of the requests that touched a chunk first, and of requests of chunks
    /// already fetched.
    first: Vec<Nanos>,
    repeat: Vec<Nanos>,
    /// Chunks first read before ready, and the fetches' intervals clipped to the start.
    chunks_before_ready: u64,
    intervals: Vec<(Nanos, Nanos)>,
    most_in_flight: usize,
}

/// A device read ahead of its fetches: every request's chunks, in issue order.
fn fetches_of(f: &Facts, dev: Dev) -> Fetches {
    let chunk = f.config.lazy_volume_chunk_bytes.max(4096);
    let mut reads: Vec<(Nanos, Nanos, u64, u64)> = f
        .trace
        .block_ios
        .iter()
        .filter(|b| b.dev == dev && b.op == BlockOp::Read && b.bytes > 0)
        .filter_map(|b| {
            let start = b.sector? * 512;
            Some((b.issue_ns?, b.complete_ns?, start / chunk, (start + u64::from(b.bytes) - 1) / chunk))
        })
        .collect();
    reads.sort_unstable();
    let mut fetched: FxHashMap<u64, Nanos> = FxHashMap::default();
    let name =
        f.trace.disks.iter().find(|d| d.dev == dev).map_or_else(|| dev.to_string(), |d| d.name.clone());
    let mut out = Fetches {
        dev,
        name,
        first: Vec::new(),
        repeat: Vec::new(),
        chunks_before_ready: 0,
        intervals: Vec::new(),
        most_in_flight: 0,
    };
    for (issue, complete, first_chunk, last_chunk) in reads {
        let mut new = 0;
        let mut all_done = true;
        for c in first_chunk..=last_chunk {
            match fetched.get(&c) {
                None => {
                    fetched.insert(c, complete);
                    new += 1;
                }
                Some(&done) => all_done &= done <= issue,
            }
        }
        if new > 0 {
            out.first.push(complete - issue);
            if issue < f.ready {
                out.chunks_before_ready += new;
                out.intervals.push((issue.max(f.origin), complete.min(f.ready)));
            }
        } else if all_done {
            out.repeat.push(complete - issue);
        }
    }
    out.most_in_flight = most_at_once(&out.intervals);
    out
}

fn most_at_once(intervals: &[(Nanos, Nanos)]) -> usize {
    let mut edges: Vec<(Nanos, i32)> = intervals.iter().flat_map(|&(s, e)| [(s, 1), (e, -1)]).collect();
    edges.sort_unstable();
    let mut now = 0i32;
    edges
        .iter()
        .map(|&(_, d)| {
            now += d;
            now
        })
        .max()
        .unwrap_or(0)
        .max(0) as usize
}

fn union_ns(intervals: &[(Nanos, Nanos)]) -> Nanos {
    let mut sorted: Vec<(Nanos, Nanos)> = intervals.iter().copied().filter(|(s, e)| e > s).collect();
    sorted.sort_unstable();
    let (mut total, mut end) = (0, Nanos::MIN);
    for (s, e) in sorted {
        if e > end {
            total += e - s.max(end);
            end = e;
        }
    }
    total
}

/// Disjoint, sorted intervals covering the same time as `intervals`.
fn merged(intervals: &[(Nanos, Nanos)]) -> Vec<(Nanos, Nanos)> {
    let mut sorted: Vec<(Nanos, Nanos)> = intervals.iter().copied().filter(|(s, e)| e > s).collect();
    sorted.sort_unstable();
    let mut out: Vec<(Nanos, Nanos)> = Vec::new();
    for (s, e) in sorted {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// The time covered by both `a` and `b`.
fn overlap_ns(a: &[(Nanos, Nanos)], b: &[(Nanos, Nanos)]) -> Nanos {
    let (a, b) = (merged(a), merged(b));
    let (mut i, mut j, mut total) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        total += (a[i].1.min(b[j].1) - a[i].0.max(b[j].0)).max(0);
        if a[i].1 < b[j].1 { i += 1 } else { j += 1 }
    }
    total
}

/// A helper on the critical path that spent most of its time there while the volume fetched
/// chunks is slow because of the volume: each such `heavy_helper` finding says so in its
/// caveat and drops to low confidence, as an expert would not remove a service for waits a
/// block plan takes away. Runs on the findings before their intervals are merged and cut.
pub(crate) fn note_fetches_in_helpers(findings: &mut [Finding]) {
    let Some(lazy) = findings.iter().find(|f| f.kind == FindingKind::LazyVolume) else { return };
    let fetches: Vec<(Nanos, Nanos)> =
        lazy.evidence.intervals.iter().map(|i| (i.start_ns, i.end_ns)).collect();
    for f in findings.iter_mut().filter(|f| f.kind == FindingKind::HeavyHelper) {
        let on_path: Vec<(Nanos, Nanos)> =
            f.evidence.intervals.iter().map(|i| (i.start_ns, i.end_ns)).collect();
        let (path_ns, during) = (union_ns(&on_path), overlap_ns(&on_path, &fetches));
        if path_ns == 0 || during * 2 < path_ns {
            continue;
        }
        let before = f.caveat.take().map(|c| format!("; {c}")).unwrap_or_default();
        f.caveat = Some(format!(
            "{} of its {} on the critical path passed while the volume fetched chunks on their first read \
             (lazy_volume): a block plan replayed early takes most of that time away without removing it{before}",
            duration(during),
            duration(path_ns)
        ));
        f.confidence = Confidence::Low;
    }
}

fn quantile(values: &[Nanos], q: f64) -> Nanos {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.get(((v.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0)
}

/// The device whose first reads waited for fetches, if one did: enough first reads, slow
/// ones, and later reads of the same chunks many times faster.
fn lazy_device(f: &Facts) -> Option<Fetches> {
    let mut devs: Vec<Dev> = f.trace.block_ios.iter().map(|b| b.dev).collect();
    devs.sort_unstable();
    devs.dedup();
    let c = f.config;
    devs.into_iter()
        .map(|dev| fetches_of(f, dev))
        .filter(|d| {
            d.chunks_before_ready >= c.lazy_volume_min_chunks
                && d.repeat.len() >= 10
                && quantile(&d.first, 0.5) >= c.lazy_volume_min_fetch_ns
                && quantile(&d.first, 0.25) as f64
                    >= c.lazy_volume_min_ratio * quantile(&d.repeat, 0.5).max(1) as f64
        })
        .max_by_key(|d| union_ns(&d.intervals))
}

pub(crate) fn lazy_volume(f: &Facts) -> Vec<Finding> {
    let Some(d) = lazy_device(f) else { return Vec::new() };
    let wait_ns = match f.path {
        Some(path) => {
            let io_waits: Vec<(Nanos, Nanos)> = path
                .segments
                .iter()
                .filter(|s| s.kind == SegmentKind::IoWait)
                .map(|s| (s.start_ns, s.end_ns))
                .collect();
            overlap_ns(&d.intervals, &io_waits)
        }
        None => union_ns(&d.intervals),
    };
    if wait_ns < f.min_gain {
        return Vec::new();
    }
    let fetch_ns = quantile(&d.first, 0.5);
    let depth = f.config.lazy_volume_replay_depth.max(1);
    let replay_ns = d.chunks_before_ready.div_ceil(depth) as Nanos * fetch_ns;
    let gain_ns = (wait_ns - replay_ns).max(0);
    vec![finding(f, &d, wait_ns, fetch_ns, replay_ns, gain_ns)]
}

fn finding(
    f: &Facts,
    d: &Fetches,
    wait_ns: Nanos,
    fetch_ns: Nanos,
    replay_ns: Nanos,
    gain_ns: Nanos,
) -> Finding {
    let c = f.config;
    let chunk = c.lazy_volume_chunk_bytes;
    let repeat_ns = quantile(&d.repeat, 0.5);
    let depth = c.lazy_volume_replay_depth;
    let trace = shell_quote(&c.trace_name);
    let fetched_bytes = d.chunks_before_ready * chunk;
    Finding {
        kind: FindingKind::LazyVolume,
        title: format!(
            "The start waited {} of {} for its volume to fetch {} chunks on their first read",
            duration(wait_ns),
            duration(f.time_to_ready),
            d.chunks_before_ready
        ),
        evidence: Evidence {
            summary: format!(
                "on {} the first read of each {} chunk took {} (median of {}), a later read of a chunk already \
                 fetched {} (median of {}): a volume restored from a snapshot, or fetched lazily; {} chunks ({}) \
                 fetched before ready, at most {} at once, so the start fetched them one after another as it \
                 needed them ({} of the time to ready)",
                d.name,
                bytes(chunk),
                duration(fetch_ns),
                d.first.len(),
                duration(repeat_ns),
                d.repeat.len(),
                d.chunks_before_ready,
                bytes(fetched_bytes),
                d.most_in_flight,
                percent(wait_ns as f64, f.time_to_ready as f64)
            ),
            figures: vec![
                Figure::ns("fetch_wait_ns", wait_ns),
                Figure::ns("first_read_ns", fetch_ns),
                Figure::ns("repeat_read_ns", repeat_ns),
                Figure::count("chunks", d.chunks_before_ready),
                Figure::bytes("chunk_bytes", chunk),
                Figure::count("most_fetches_in_flight", d.most_in_flight as u64),
                Figure::count("dev_major", u64::from(d.dev.major)),
                Figure::count("dev_minor", u64::from(d.dev.minor)),
            ],
            intervals: d
                .intervals
                .iter()
                .map(|&(s, e)| EvidenceInterval {
                    start_ns: s,
                    end_ns: e,
                    tid: None,
                    what: format!("a first read of {} waits for its chunk's fetch", d.name),
                })
                .collect(),
            ..Evidence::default()
        },
        gain: Gain {
            ns: gain_ns,
            formula: "fetch_wait_ns - ceil(chunks / replay_depth) * first_read_ns".to_owned(),
            text: format!(
                "{} waiting on fetches - {} chunks fetched {depth} at a time at {} each ({}) = {}",
                duration(wait_ns),
                d.chunks_before_ready,
                duration(fetch_ns),
                duration(replay_ns),
                duration(gain_ns)
            ),
            inputs: vec![
                Figure::ns("fetch_wait_ns", wait_ns),
                Figure::count("chunks", d.chunks_before_ready),
                Figure::count("replay_depth", depth),
                Figure::ns("first_read_ns", fetch_ns),
            ],
            ahead_ns: Some(wait_ns),
        },
        audience: Audience::Distribution,
        suggestion: format!(
            "Ship the image with a block plan of this start and replay it as soon as the volume appears, before \
             the root is mounted: `coldstart prefetch plan --blocks {trace} --image IMAGE -o boot.bplan` (IMAGE: \
             the filesystem image the volume was made from, as built), then `coldstart prefetch run boot.bplan` \
             first thing at boot (an initramfs hook, or a unit ordered before local-fs-pre.target). It fetches \
             these {} chunks ({}) {depth} or more at a time, in the order the start needs them, where the start \
             fetched them one by one. Reading the whole volume first, the providers' advice (`fio` or `dd` over \
             the device), fetches every chunk of the volume, not only these, and the boot does not wait for it.",
            d.chunks_before_ready,
            bytes(fetched_bytes)
        ),
        verify: "sudo coldstart storage mount snapshot --image IMAGE -- sh -c 'coldstart prefetch run boot.bplan \
                 --device $COLDSTART_STORAGE_DEVICE & mount $COLDSTART_STORAGE_DEVICE /mnt && coldstart record -o \
                 with-plan.coldstart -- COMMAND'   # then coldstart doctor with-plan.coldstart: the fetches are gone"
            .to_owned(),
        confidence: if quantile(&d.first, 0.25) >= 10 * repeat_ns.max(1) { Confidence::High } else { Confidence::Medium },
        caveat: Some(format!(
            "a chunk is taken to be {} (a snapshot block on AWS) and the volume to let {depth} fetches run at once; \
             the gain assumes the replay keeps ahead of the start",
            bytes(chunk)
        )),
    }
}
