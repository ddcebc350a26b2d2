//! Where a start's reads lie on a volume made afresh from its files, as an image is built
//! (and as `bench --storage` fills its device): the filesystem metadata the start read first,
//! packed block by block, then each file whole, contiguous, in the order of its first extent
//! on the recorded disk. A lazily fetched volume fetches whole chunks, so the chunks a start
//! reads first depend on this layout, not on the recorded disk's, where files lie far apart.

use coldstart_trace::{Dev, Trace};
use rustc_hash::FxHashMap;

/// Block of the packing: metadata is packed in 4 KiB blocks, files start on one.
const BLOCK: u64 = 4096;
/// Requests the layout cannot place keep their recorded offset, moved this far up so that
/// they never share a chunk with placed data.
const UNPLACED: u64 = 1 << 56;

/// The packed volume's offsets of the trace's files and metadata blocks.
pub(crate) struct PackedLayout<'t> {
    /// Per file: its extents (logical, physical, length) on their disk, and its packed start.
    files: FxHashMap<u32, (Vec<&'t coldstart_trace::Extent>, u64)>,
    /// Per recorded metadata block (device, byte / 4 KiB): its packed offset.
    metadata: FxHashMap<(Dev, u64), u64>,
}

impl<'t> PackedLayout<'t> {
    /// The layout of `trace`'s files with extents, after the metadata blocks of `metadata_reads`
    /// (device, byte, bytes: the requests of no file).
    pub(crate) fn new(trace: &'t Trace, metadata_reads: &[(Dev, u64, u64)]) -> PackedLayout<'t> {
        let mut blocks: Vec<(Dev, u64)> = metadata_reads
            .iter()
            .flat_map(|&(dev, byte, bytes)| {
                (byte / BLOCK..(byte + bytes.max(1)).div_ceil(BLOCK)).map(move |b| (dev, b))
            })
            .collect();
        blocks.sort_unstable();
        blocks.dedup();
        let metadata: FxHashMap<(Dev, u64), u64> =
            blocks.iter().enumerate().map(|(i, &b)| (b, i as u64 * BLOCK)).collect();
        let mut extents: FxHashMap<u32, Vec<&coldstart_trace::Extent>> = FxHashMap::default();
        for e in &trace.extents {
            extents.entry(e.file_id).or_default().push(e);
        }
        let mut order: Vec<(Dev, u64, u32)> = extents
            .iter()
            .filter_map(|(&id, es)| es.iter().map(|e| (e.disk, e.physical)).min().map(|(d, p)| (d, p, id)))
            .collect();
        order.sort_unstable();
        let sizes: FxHashMap<u32, u64> = trace.files.iter().filter_map(|f| Some((f.id, f.size?))).collect();
        let mut at = blocks.len() as u64 * BLOCK;
        let mut files = FxHashMap::default();
        for (_, _, id) in order {
            let es = extents.remove(&id).unwrap_or_default();
            let mapped = es.iter().map(|e| e.logical + e.length).max().unwrap_or(0);
            let size = sizes.get(&id).copied().unwrap_or(mapped).max(1);
            files.insert(id, (es, at));
            at += size.div_ceil(BLOCK) * BLOCK;
        }
        PackedLayout { files, metadata }
    }

    /// The packed offset of a request's first byte: through its file's extent holding it, or
    /// its metadata block; else its recorded offset, apart from all placed data.
    pub(crate) fn offset_of(&self, dev: Dev, byte: u64, file: Option<u32>) -> u64 {
        if let Some((extents, start)) = file.and_then(|id| self.files.get(&id)) {
            let holding =
                extents.iter().find(|e| e.disk == dev && (e.physical..e.physical + e.length).contains(&byte));
            if let Some(e) = holding {
                return start + e.logical + (byte - e.physical);
            }
        }
        if file.is_none()
            && let Some(&packed) = self.metadata.get(&(dev, byte / BLOCK))
        {
            return packed + byte % BLOCK;
        }
        UNPLACED + byte
    }
}
