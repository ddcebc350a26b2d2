//! Replaying a block plan: the device's identity checked first (another or a changed image is
//! refused having read only the identity's blocks), then every planned chunk read once with
//! direct I/O by `depth` threads, taken in plan order, so `depth` requests are in flight.

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
    pub depth: usize,
    pub elapsed_ns: u64,
}

impl BlockReplayReport {
    /// The one-line summary: ranges, MiB, time, MiB/s.
    pub fn summary(&self) -> String {
        let mib = self.read_bytes as f64 / 1048576.0;
        let secs = self.elapsed_ns as f64 / 1e9;
        format!(
            "coldstart: replayed {} ranges ({} chunks, {mib:.1} MiB) from {} in {secs:.3} s: {:.1} MiB/s, {} in \
             flight, direct I/O (identity checked: {} KiB read)",
            self.ranges,
            self.chunks,
            self.device,
            if secs > 0.0 { mib / secs } else { 0.0 },
            self.depth,
            self.identity_bytes / 1024
        )
    }
}

/// Checks that `device` is the plan's image, then reads every planned chunk once.
pub fn replay_blocks(
    plan: &BlockPlan,
    device: &Path,
    depth: usize,
    io_priority: Option<IoPriority>,
) -> Result<BlockReplayReport, BlockError> {
    let device = DirectDevice::open(device)?;
    let started = Instant::now();
    let identity_bytes = identity::verify(&device, &plan.identity)?;
    let chunks = plan.chunks();
    let depth = depth.clamp(1, chunks.len().max(1));
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
                    let mut buffer = device.buffer(plan.chunk_bytes as usize);
                    while !failed.load(Ordering::Relaxed) {
                        let Some(&(offset, length)) = chunks.get(next.fetch_add(1, Ordering::Relaxed)) else {
                            break;
                        };
                        let got =
                            device.read_block(offset, &mut buffer, length as usize).inspect_err(|_| {
                                failed.store(true, Ordering::Relaxed);
                            })?;
                        read.fetch_add(got.len() as u64, Ordering::Relaxed);
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
        depth,
        elapsed_ns: u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX).max(1),
    })
}
