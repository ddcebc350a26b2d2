//! Replaying a block plan: the device's identity checked first (another or a changed image is
//! refused having read only the identity's blocks), then every planned chunk read once with
//! direct I/O by `depth` threads, taken in plan order, so `depth` requests are in flight. A
//! plan of small ranges is read by fetch unit (512 KiB, a snapshot's block): one thread reads
//! all the ranges of one unit, so the threads wait on `depth` different fetches, not on one.
//! Fetch-only, a thread reads one block of its unit: the volume fetches the whole unit, and
//! the rest of the plan's bytes would be read twice (direct I/O fills no cache).

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;

use super::direct::DirectDevice;
use super::{BlockError, BlockPlan, identity};
use crate::IoPriority;

/// What a block replay did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BlockReplayReport {
    pub device: String,
    pub ranges: u64,
    pub chunks: u64,
    /// Bytes read for the identity check, then for the plan.
    pub identity_bytes: u64,
    pub read_bytes: u64,
    /// Fetch units touched, and whether only one block of each was read (`--fetch-only`).
    pub fetch_units: u64,
    pub fetch_only: bool,
    pub depth: usize,
    pub elapsed_ns: u64,
}

impl BlockReplayReport {
    /// The one-line summary: ranges, MiB, time, MiB/s.
    pub fn summary(&self) -> String {
        let mib = self.read_bytes as f64 / 1048576.0;
        let secs = self.elapsed_ns as f64 / 1e9;
        let what = match self.fetch_only {
            true => format!("one block of each of {} fetch units ({mib:.1} MiB)", self.fetch_units),
            false => format!("{} ranges ({} chunks, {mib:.1} MiB)", self.ranges, self.chunks),
        };
        format!(
            "coldstart: replayed {what} from {} in {secs:.3} s: {:.1} MiB/s, {} in \
             flight, direct I/O (identity checked: {} KiB read)",
            self.device,
            if secs > 0.0 { mib / secs } else { 0.0 },
            self.depth,
            self.identity_bytes / 1024
        )
    }
}

/// What a lazily fetched volume fetches at once on a first read: a snapshot's block on AWS.
pub const FETCH_UNIT: u64 = 512 * 1024;

/// The chunks grouped by the fetch unit they lie in, units in the order of their first chunk,
/// adjacent chunks of a unit merged into one read (each at most `unit` long).
fn fetch_units(chunks: &[(u64, u64)], unit: u64) -> Vec<Vec<(u64, u64)>> {
    let mut index: std::collections::HashMap<u64, usize> = std::collections::HashMap::new();
    let mut jobs: Vec<Vec<(u64, u64)>> = Vec::new();
    for &(offset, length) in chunks {
        let at = *index.entry(offset / unit).or_insert_with(|| {
            jobs.push(Vec::new());
            jobs.len() - 1
        });
        let job = &mut jobs[at];
        match job.last_mut() {
            Some(last) if last.0 + last.1 == offset && last.1 + length <= unit => last.1 += length,
            _ => job.push((offset, length)),
        }
    }
    jobs
}

/// The first block of each unit's first read: what makes a lazily fetched volume fetch it.
fn first_blocks(mut jobs: Vec<Vec<(u64, u64)>>) -> Vec<Vec<(u64, u64)>> {
    for job in &mut jobs {
        job.truncate(1);
        if let Some(first) = job.first_mut() {
            first.1 = first.1.min(super::ALIGN);
        }
    }
    jobs
}

/// Checks that `device` is the plan's image, then reads every planned chunk once (or, with
/// `fetch_only`, one block of each fetch unit).
pub fn replay_blocks(
    plan: &BlockPlan,
    device: &Path,
    depth: usize,
    io_priority: Option<IoPriority>,
    fetch_only: bool,
) -> Result<BlockReplayReport, BlockError> {
    let device = DirectDevice::open(device)?;
    let started = Instant::now();
    let identity_bytes = identity::verify(&device, &plan.identity)?;
    let chunks = plan.chunks();
    let unit = FETCH_UNIT.max(plan.chunk_bytes);
    let jobs = match fetch_only {
        true => first_blocks(fetch_units(&chunks, unit)),
        false => fetch_units(&chunks, unit),
    };
    let depth = depth.clamp(1, jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let read = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let results: Vec<Result<(), BlockError>> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..depth)
            .map(|i| {
                std::thread::Builder::new().name(format!("block-replay-{i}")).spawn_scoped(scope, || {
                    if let Some(priority) = io_priority {
                        priority.apply_to_this_thread().map_err(|source| BlockError::IoPriority {
                            priority: priority.to_string(),
                            source,
                        })?;
                    }
                    let mut buffer = device.buffer(unit as usize);
                    while !failed.load(Ordering::Relaxed) {
                        let Some(job) = jobs.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        for &(offset, length) in job {
                            let got = device.read_block(offset, &mut buffer, length as usize).inspect_err(
                                |_| {
                                    failed.store(true, Ordering::Relaxed);
                                },
                            )?;
                            read.fetch_add(got.len() as u64, Ordering::Relaxed);
                        }
                    }
                    Ok(())
                })
            })
            .collect::<std::io::Result<_>>()
            .map_err(BlockError::Threads)?;
        Ok::<_, BlockError>(workers.into_iter().map(|w| w.join().unwrap_or(Ok(()))).collect())
    })?;
    results.into_iter().collect::<Result<(), BlockError>>()?;
    Ok(BlockReplayReport {
        device: device.path().display().to_string(),
        ranges: plan.ranges.len() as u64,
        chunks: chunks.len() as u64,
        identity_bytes,
        read_bytes: read.into_inner(),
        fetch_units: jobs.len() as u64,
        fetch_only,
        depth,
        elapsed_ns: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const K: u64 = 1024;

    #[test]
    fn small_ranges_are_read_by_fetch_unit_in_first_need_order_adjacent_ones_merged() {
        let chunks = [
            (600 * K, 4 * K),
            (8 * K, 4 * K),
            (604 * K, 4 * K),
            (12 * K, 8 * K),
            (700 * K, 4 * K),
            (0, 4 * K),
        ];
        assert_eq!(
            fetch_units(&chunks, 512 * K),
            vec![vec![(600 * K, 8 * K), (700 * K, 4 * K)], vec![(8 * K, 12 * K), (0, 4 * K)]]
        );
    }

    #[test]
    fn fetch_only_reads_the_first_block_of_each_unit() {
        let chunks = [(600 * K, 12 * K), (8 * K, 4 * K), (700 * K, 4 * K), (1024 * K, 512 * K)];
        assert_eq!(
            first_blocks(fetch_units(&chunks, 512 * K)),
            vec![vec![(600 * K, 4 * K)], vec![(8 * K, 4 * K)], vec![(1024 * K, 4 * K)]]
        );
    }

    #[test]
    fn whole_chunks_are_one_unit_each() {
        let chunks = [(512 * K, 512 * K), (0, 512 * K), (1024 * K, 512 * K)];
        assert_eq!(fetch_units(&chunks, 512 * K), chunks.iter().map(|&c| vec![c]).collect::<Vec<_>>());
    }
}
