//! A trace's block requests into a block plan's ranges (pure): the reads of one device,
//! rounded out to whole chunks, each chunk first needed when the earliest request touching
//! it was issued, chunks in that order, neighbours on the disk that follow each other in the
//! order merged into one range. Of many traces (a fleet's first boots of one image), the
//! chunks a given share of them read, each first needed at the median of their first needs.

use coldstart_trace::{BlockIo, BlockOp, Dev, Nanos, Trace};
use rustc_hash::FxHashMap;

use super::{BlockError, BlockRange, BlockStats};

/// How to make a block plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockSettings {
    /// The device to plan; `None`: the one the trace read most bytes from.
    pub device: Option<Dev>,
    /// Bytes per chunk, a positive multiple of [`super::ALIGN`].
    pub chunk_bytes: u64,
    /// The device's size in bytes: the last chunk ends there.
    pub device_bytes: u64,
}

/// The ranges of the chosen device and the figures about them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRanges {
    pub dev: Dev,
    pub ranges: Vec<BlockRange>,
    pub stats: BlockStats,
}

/// Bytes read per device, most first (ties by device number).
pub fn read_bytes_by_device(trace: &Trace) -> Vec<(Dev, u64)> {
    reads_by_device(&trace.block_ios)
}

fn reads_by_device(ios: &[BlockIo]) -> Vec<(Dev, u64)> {
    let mut by_dev: FxHashMap<Dev, u64> = FxHashMap::default();
    for b in ios.iter().filter(|b| b.op == BlockOp::Read && b.sector.is_some()) {
        *by_dev.entry(b.dev).or_default() += u64::from(b.bytes);
    }
    let mut devices: Vec<(Dev, u64)> = by_dev.into_iter().collect();
    devices.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    devices
}

/// The plan's ranges from the trace's read requests of one device.
pub fn build_block_ranges(trace: &Trace, settings: &BlockSettings) -> Result<BlockRanges, BlockError> {
    let devices = read_bytes_by_device(trace);
    let dev = chosen_device(settings.device, &devices)?;
    let (first_need, mut stats) = chunk_needs(&trace.block_ios, dev, settings)?;
    stats.other_devices = devices.iter().filter(|d| d.0 != dev).map(|d| (d.0.to_string(), d.1)).collect();
    let mut chunks: Vec<(Nanos, u64)> = first_need.into_iter().map(|(index, t)| (t, index)).collect();
    chunks.sort_unstable();
    let ranges = merge_in_order(&chunks, settings.chunk_bytes, settings.device_bytes);
    stats.chunks = chunks.len() as u64;
    stats.planned_bytes = ranges.iter().map(|r| r.length).sum();
    Ok(BlockRanges { dev, ranges, stats })
}

/// Many traces of one image (a fleet's first boots), folded one at a time so that they need
/// not all be held: each chunk's first needs, the traces' figures, their devices.
#[derive(Debug)]
pub struct FleetChunks {
    settings: BlockSettings,
    needs: FxHashMap<u64, Vec<Nanos>>,
    total: BlockStats,
    devices: FxHashMap<Dev, usize>,
    traces: u64,
}

impl FleetChunks {
    pub fn new(settings: BlockSettings) -> FleetChunks {
        FleetChunks {
            settings,
            needs: FxHashMap::default(),
            total: BlockStats::default(),
            devices: FxHashMap::default(),
            traces: 0,
        }
    }

    /// Adds one trace's requests (its device: `settings.device`, else the one it read most).
    pub fn add(&mut self, ios: &[BlockIo]) -> Result<(), BlockError> {
        let dev = chosen_device(self.settings.device, &reads_by_device(ios))?;
        *self.devices.entry(dev).or_default() += 1;
        let (first_need, stats) = chunk_needs(ios, dev, &self.settings)?;
        for (index, t) in first_need {
            self.needs.entry(index).or_default().push(t);
        }
        self.total.requests += stats.requests;
        self.total.read_bytes += stats.read_bytes;
        self.total.metadata_read_bytes += stats.metadata_read_bytes;
        self.total.distinct_read_bytes += stats.distinct_read_bytes;
        self.traces += 1;
        Ok(())
    }

    /// Traces added so far.
    pub fn traces(&self) -> u64 {
        self.traces
    }

    /// The chunks at least `min_share` of the traces read, in the order of their median
    /// first need; the figures are each trace's, averaged.
    pub fn ranges(self, min_share: f64) -> Result<BlockRanges, BlockError> {
        let n = self.traces.max(1);
        let at_least = ((min_share * n as f64).ceil() as usize).max(1);
        let mut chunks: Vec<(Nanos, u64)> = self
            .needs
            .into_iter()
            .filter(|(_, times)| times.len() >= at_least)
            .map(|(index, mut times)| {
                times.sort_unstable();
                (times[(times.len() - 1) / 2], index)
            })
            .collect();
        if chunks.is_empty() {
            return Err(BlockError::Plan(format!("no chunk was read by {at_least} of the {n} traces")));
        }
        chunks.sort_unstable();
        let ranges = merge_in_order(&chunks, self.settings.chunk_bytes, self.settings.device_bytes);
        let dev = self.devices.into_iter().max_by_key(|&(dev, count)| (count, std::cmp::Reverse(dev)));
        let stats = BlockStats {
            requests: self.total.requests / n,
            read_bytes: self.total.read_bytes / n,
            metadata_read_bytes: self.total.metadata_read_bytes / n,
            distinct_read_bytes: self.total.distinct_read_bytes / n,
            chunks: chunks.len() as u64,
            planned_bytes: ranges.iter().map(|r| r.length).sum(),
            other_devices: Vec::new(),
        };
        Ok(BlockRanges { dev: dev.map(|d| d.0).unwrap_or_default(), ranges, stats })
    }
}

/// The plan's ranges from many traces of one image (see [`FleetChunks`]).
pub fn build_fleet_block_ranges(
    traces: &[Vec<BlockIo>],
    settings: &BlockSettings,
    min_share: f64,
) -> Result<BlockRanges, BlockError> {
    let mut fleet = FleetChunks::new(*settings);
    for ios in traces {
        fleet.add(ios)?;
    }
    fleet.ranges(min_share)
}

/// `wanted` when the trace read it, else the device read most.
fn chosen_device(wanted: Option<Dev>, devices: &[(Dev, u64)]) -> Result<Dev, BlockError> {
    match wanted {
        Some(dev) if devices.iter().any(|d| d.0 == dev) => Ok(dev),
        Some(dev) => Err(no_reads_of(dev, devices)),
        None => devices.first().map(|d| d.0).ok_or_else(no_reads),
    }
}

/// Each chunk of `dev` the reads touched, with its first need, and the reads' figures.
fn chunk_needs(
    ios: &[BlockIo],
    dev: Dev,
    settings: &BlockSettings,
) -> Result<(FxHashMap<u64, Nanos>, BlockStats), BlockError> {
    let chunk = settings.chunk_bytes;
    let mut first_need: FxHashMap<u64, Nanos> = FxHashMap::default();
    let mut stats = BlockStats::default();
    let reads = ios.iter().filter(|b| b.op == BlockOp::Read && b.dev == dev);
    for (b, sector) in reads.filter_map(|b| Some((b, b.sector?))) {
        let start = sector.saturating_mul(512);
        let end = start.saturating_add(u64::from(b.bytes)).min(settings.device_bytes);
        stats.requests += 1;
        stats.read_bytes += u64::from(b.bytes);
        if b.rwbs.contains('M') {
            stats.metadata_read_bytes += u64::from(b.bytes);
        }
        let when = b.issue_ns.or(b.complete_ns).unwrap_or(0);
        for index in start / chunk..end.div_ceil(chunk) {
            first_need.entry(index).and_modify(|t| *t = (*t).min(when)).or_insert(when);
        }
    }
    if first_need.is_empty() {
        return Err(BlockError::Plan(format!(
            "every read of device {dev} in the trace lies past the image's end ({} bytes): is it the traced device's image?",
            settings.device_bytes
        )));
    }
    stats.distinct_read_bytes = distinct_bytes(ios, dev, settings.device_bytes);
    Ok((first_need, stats))
}

/// The trace read nothing of `dev`.
pub fn no_reads_of(dev: Dev, devices: &[(Dev, u64)]) -> BlockError {
    BlockError::Plan(format!(
        "the trace has no read request of device {dev} (it read from {})",
        device_list(devices)
    ))
}

/// The trace read nothing at all.
pub fn no_reads() -> BlockError {
    BlockError::Plan(
        "the trace has no block read request: was the start recorded cold, as root? \
         (`sudo coldstart record --cold -- CMD`)"
            .into(),
    )
}

/// Chunks in first-need order; a chunk right after the previous one on the disk extends its range.
fn merge_in_order(chunks: &[(Nanos, u64)], chunk: u64, device_bytes: u64) -> Vec<BlockRange> {
    let mut ranges: Vec<BlockRange> = Vec::new();
    for &(when, index) in chunks {
        let offset = index * chunk;
        let length = chunk.min(device_bytes - offset);
        match ranges.last_mut() {
            Some(last) if last.offset + last.length == offset => last.length += length,
            _ => ranges.push(BlockRange { offset, length, first_need_ns: when }),
        }
    }
    ranges
}

/// Bytes of the device the trace's reads covered, each byte counted once.
fn distinct_bytes(ios: &[BlockIo], dev: Dev, device_bytes: u64) -> u64 {
    let mut spans: Vec<(u64, u64)> = ios
        .iter()
        .filter(|b| b.op == BlockOp::Read && b.dev == dev)
        .filter_map(|b| {
            let start = b.sector?.saturating_mul(512).min(device_bytes);
            Some((start, start.saturating_add(u64::from(b.bytes)).min(device_bytes)))
        })
        .collect();
    spans.sort_unstable();
    let (mut total, mut reach) = (0, 0);
    for (start, end) in spans {
        let from = start.max(reach);
        if end > from {
            total += end - from;
            reach = end;
        }
    }
    total
}

fn device_list(devices: &[(Dev, u64)]) -> String {
    if devices.is_empty() {
        return "no device".into();
    }
    devices.iter().map(|(d, b)| format!("{d} ({b} bytes)")).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use coldstart_trace::BlockIo;

    use super::*;

    fn read(dev: Dev, sector: u64, bytes: u32, at: Nanos, rwbs: &str) -> BlockIo {
        BlockIo {
            issue_ns: Some(at),
            complete_ns: Some(at + 1000),
            dev,
            sector: Some(sector),
            bytes,
            op: BlockOp::Read,
            rwbs: rwbs.into(),
            ..BlockIo::default()
        }
    }

    const KIB: u64 = 1024;

    #[test]
    fn reads_become_whole_chunks_in_first_need_order_with_neighbours_merged() {
        let vda = Dev::new(253, 0);
        let trace = Trace {
            block_ios: vec![
                // chunk 4 (2 MiB) first, then chunks 0 and 1 by one request across them, then
                // chunk 2 (joins 0-1), then chunk 4 again (already planned), metadata in chunk 9.
                read(vda, 4096, 4096, 10, "RA"),
                read(vda, 1000, 64 * 1024, 20, "R"),
                read(vda, 2048, 4096, 30, "R"),
                read(vda, 4100, 4096, 40, "R"),
                read(vda, 9 * 1024, 4096, 50, "RM"),
                read(Dev::new(8, 0), 0, 4096, 5, "R"),
            ],
            ..Trace::default()
        };
        let settings = BlockSettings { device: None, chunk_bytes: 512 * KIB, device_bytes: 4700 * KIB };
        let planned = build_block_ranges(&trace, &settings).unwrap();
        assert_eq!(planned.dev, vda, "the device with most bytes read");
        let ranges: Vec<(u64, u64, Nanos)> =
            planned.ranges.iter().map(|r| (r.offset / KIB, r.length / KIB, r.first_need_ns)).collect();
        // Sector 1000 = byte 500 KiB: the 64 KiB request spans chunks 0 and 1.
        // Chunk 9 starts at 4608 KiB and is cut at the device's end (4700 KiB).
        assert_eq!(ranges, vec![(2048, 512, 10), (0, 1536, 20), (4608, 92, 50)]);
        assert_eq!(planned.stats.requests, 5);
        assert_eq!(planned.stats.chunks, 5);
        assert_eq!(planned.stats.metadata_read_bytes, 4096);
        assert_eq!(planned.stats.planned_bytes, (2048 + 92) * KIB);
        assert_eq!(
            planned.stats.distinct_read_bytes,
            4096 + 64 * 1024 + 4096 + 2048 + 4096,
            "the two reads of chunk 4 overlap by 2 KiB"
        );
        assert_eq!(planned.stats.other_devices, vec![("8:0".to_owned(), 4096)]);
    }

    #[test]
    fn a_fleet_plan_keeps_the_chunks_most_traces_read_in_their_median_order() {
        let (loop0, loop3) = (Dev::new(7, 0), Dev::new(7, 3));
        // Three first boots of one image, on devices numbered as each machine numbered them:
        // chunk 0 by all (at 10, 12, 30), chunk 2 by all (at 5, 40, 50), chunk 7 by one.
        let traces = vec![
            vec![
                read(loop0, 0, 4096, 10, "RM"),
                read(loop0, 2048, 4096, 5, "R"),
                read(loop0, 7 * 1024, 4096, 1, "R"),
            ],
            vec![
                read(loop3, 0, 8192, 12, "RM"),
                read(loop3, 2048, 4096, 40, "R"),
                read(Dev::new(8, 0), 0, 512, 1, "R"),
            ],
            vec![read(loop0, 0, 4096, 30, "RM"), read(loop0, 2048, 4096, 50, "R")],
        ];
        let settings = BlockSettings { device: None, chunk_bytes: 512 * KIB, device_bytes: 8 << 20 };
        let planned = build_fleet_block_ranges(&traces, &settings, 0.5).unwrap();
        let ranges: Vec<(u64, u64, Nanos)> =
            planned.ranges.iter().map(|r| (r.offset / KIB, r.length / KIB, r.first_need_ns)).collect();
        assert_eq!(ranges, vec![(0, 512, 12), (1024, 512, 40)], "chunk 7 (one of three) left out");
        assert_eq!(planned.dev, loop0, "the device most traces read");
        assert_eq!(planned.stats.chunks, 2);
        assert_eq!(planned.stats.read_bytes, (3 * 4096 + 3 * 4096 + 2 * 4096) / 3, "bytes read per trace");
        assert_eq!(planned.stats.metadata_read_bytes, (4096 + 8192 + 4096) / 3);
        let all = build_fleet_block_ranges(&traces, &settings, 0.3).unwrap();
        assert_eq!(all.stats.chunks, 3, "a share of 0.3: one trace of three suffices");
        let err = build_fleet_block_ranges(&traces, &BlockSettings { device: Some(loop3), ..settings }, 0.5)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no read request of device 7:3"), "{err}");
    }

    #[test]
    fn a_chosen_device_without_reads_or_a_trace_without_reads_is_refused() {
        let trace = Trace { block_ios: vec![read(Dev::new(8, 0), 0, 4096, 5, "R")], ..Trace::default() };
        let settings = |device| BlockSettings { device, chunk_bytes: 512 * KIB, device_bytes: 1 << 30 };
        let err = build_block_ranges(&trace, &settings(Some(Dev::new(7, 1)))).unwrap_err().to_string();
        assert!(err.contains("no read request of device 7:1") && err.contains("8:0 (4096 bytes)"), "{err}");
        let err = build_block_ranges(&Trace::default(), &settings(None)).unwrap_err().to_string();
        assert!(err.contains("no block read request"), "{err}");
    }
}
