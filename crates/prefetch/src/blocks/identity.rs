//! The identity of the image a block plan was made from: its size, its filesystem's type and
//! UUID (from an ext2/3/4 superblock; other filesystems are refused), and SHA-256 checksums of
//! sampled 4 KiB blocks, the first block (holding the superblock, its fields that a mount
//! rewrites left out) always among them. Read at plan time; before a replay the device's size is compared first, then the first block, then
//! the other samples, so another image is refused after reading one block.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::direct::DirectDevice;
use super::{ALIGN, BlockError, BlockRange};

/// How many blocks of the planned ranges are sampled besides the first block.
pub const SAMPLES: usize = 16;

/// What a device must be for a plan to be replayed on it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Identity {
    /// `ext2`, `ext3` or `ext4`.
    pub filesystem: String,
    /// The filesystem's UUID, as `blkid` prints it.
    pub uuid: String,
    /// The filesystem's label, when it has one.
    pub label: Option<String>,
    pub size_bytes: u64,
    /// Blocks read and their checksums: the first block (offset 0), then blocks spread over
    /// the planned ranges.
    pub samples: Vec<Sample>,
}

/// One sampled block of the image.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sample {
    pub offset: u64,
    pub length: u64,
    /// SHA-256 of the block, lower-case hex.
    pub sha256: String,
}

/// An ext2/3/4 superblock's identifying fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Superblock {
    pub filesystem: &'static str,
    pub uuid: String,
    pub label: Option<String>,
}

const SUPERBLOCK_AT: usize = 1024;
const EXT_MAGIC: u16 = 0xEF53;
const COMPAT_HAS_JOURNAL: u32 = 0x4;
/// INCOMPAT_EXTENTS, INCOMPAT_64BIT, INCOMPAT_FLEX_BG: features only ext4 has.
const INCOMPAT_EXT4: u32 = 0x40 | 0x80 | 0x200;

/// Reads the superblock from the device's first 4 KiB, or says why it is not ext2/3/4.
pub fn superblock(first_block: &[u8]) -> Result<Superblock, String> {
    let sb = first_block.get(SUPERBLOCK_AT..SUPERBLOCK_AT + 1024).ok_or("shorter than a superblock")?;
    let u16_at = |at: usize| u16::from_le_bytes([sb[at], sb[at + 1]]);
    let u32_at = |at: usize| u32::from_le_bytes([sb[at], sb[at + 1], sb[at + 2], sb[at + 3]]);
    if u16_at(0x38) != EXT_MAGIC {
        return Err(
            "no ext2/3/4 superblock at byte 1024 (block plans need an ext4 image: a whole filesystem, \
                    not a partitioned disk)"
                .into(),
        );
    }
    let filesystem = if u32_at(0x60) & INCOMPAT_EXT4 != 0 {
        "ext4"
    } else if u32_at(0x5C) & COMPAT_HAS_JOURNAL != 0 {
        "ext3"
    } else {
        "ext2"
    };
    let u = &sb[0x68..0x78];
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    let uuid = format!(
        "{}-{}-{}-{}-{}",
        hex(&u[0..4]),
        hex(&u[4..6]),
        hex(&u[6..8]),
        hex(&u[8..10]),
        hex(&u[10..16])
    );
    let name = &sb[0x78..0x88];
    let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
    let label = (!name.is_empty()).then(|| String::from_utf8_lossy(name).into_owned());
    Ok(Superblock { filesystem, uuid, label })
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The superblock's fields a mount, a write or an error rewrites (offset in the superblock,
/// length): free counts, mount and write times, mount count, state, last check, last mount
/// point, orphan list, bytes written, error records, the times' high bytes, the checksum.
/// Left out of the first block's checksum, so that a volume mounted before its replay (by
/// an early hook racing the mount, or a unit after it) is still its image.
const REWRITTEN_AT_MOUNT: [(usize, usize); 11] = [
    (0x0C, 8),
    (0x2C, 8),
    (0x34, 2),
    (0x3A, 2),
    (0x40, 4),
    (0x88, 64),
    (0xE8, 4),
    (0x158, 4),
    (0x178, 8),
    (0x194, 0x6C),
    (0x274, 8),
];
const SUPERBLOCK_CHECKSUM: (usize, usize) = (0x3FC, 4);
/// `s_feature_incompat`'s "needs recovery" bit, set while a journalled filesystem is mounted:
/// left out too (a clean image has it clear, so plans made before this still match).
const NEEDS_RECOVERY: (usize, u8) = (0x60, 0x04);

/// SHA-256 of a sampled block; of the first block without the superblock's rewritten fields.
fn sample_sha256(offset: u64, block: &[u8]) -> String {
    if offset != 0 || block.len() < SUPERBLOCK_AT + 1024 {
        return sha256_hex(block);
    }
    let mut masked = block.to_vec();
    for (at, length) in REWRITTEN_AT_MOUNT.into_iter().chain([SUPERBLOCK_CHECKSUM]) {
        masked[SUPERBLOCK_AT + at..SUPERBLOCK_AT + at + length].fill(0);
    }
    masked[SUPERBLOCK_AT + NEEDS_RECOVERY.0] &= !NEEDS_RECOVERY.1;
    sha256_hex(&masked)
}

/// Where the samples lie: [`SAMPLES`] ranges spread over the plan, a 4 KiB block inside
/// each picked by its position (so two plans of one image sample the same blocks).
pub fn sample_offsets(ranges: &[BlockRange]) -> Vec<u64> {
    let blocks: u64 = ranges.iter().map(|r| r.length / ALIGN).sum();
    let mut offsets = vec![0];
    if blocks == 0 {
        return offsets;
    }
    let wanted = (SAMPLES as u64).min(blocks);
    for i in 0..wanted {
        let mut nth =
            (i * blocks / wanted + (i.wrapping_mul(0x9E37_79B9) % (blocks / wanted).max(1))) % blocks;
        for r in ranges {
            let in_range = r.length / ALIGN;
            if nth < in_range {
                offsets.push(r.offset + nth * ALIGN);
                break;
            }
            nth -= in_range;
        }
    }
    offsets.sort_unstable();
    offsets.dedup();
    offsets
}

/// Reads the identity of the device or image at `path`, sampling blocks of `ranges`.
pub fn probe(path: &Path, ranges: &[BlockRange]) -> Result<Identity, BlockError> {
    let device = DirectDevice::open(path)?;
    let mut buffer = device.buffer(ALIGN as usize);
    let first = device.read_block(0, &mut buffer, ALIGN as usize)?;
    let sb = superblock(first).map_err(|reason| BlockError::Plan(format!("{}: {reason}", path.display())))?;
    let mut samples = vec![Sample { offset: 0, length: ALIGN, sha256: sample_sha256(0, first) }];
    for offset in sample_offsets(ranges).into_iter().filter(|&o| o != 0) {
        let block = device.read_block(offset, &mut buffer, ALIGN as usize)?;
        samples.push(Sample { offset, length: ALIGN, sha256: sha256_hex(block) });
    }
    Ok(Identity {
        filesystem: sb.filesystem.to_owned(),
        uuid: sb.uuid,
        label: sb.label,
        size_bytes: device.size_bytes(),
        samples,
    })
}

/// Checks that `device` is the image of `identity`: its size (nothing read), its first block
/// (the UUID, then the checksum), then the other samples, read all at once: on a lazily
/// fetched volume each sample is a fetch of its own, and one after the other they would delay
/// the replay by a fetch each. Returns the bytes read.
pub fn verify(device: &DirectDevice, identity: &Identity) -> Result<u64, BlockError> {
    let refuse = |reason: String| BlockError::NotTheImage { device: device.path().to_owned(), reason };
    if device.size_bytes() != identity.size_bytes {
        return Err(refuse(format!(
            "it holds {} bytes, the plan's image {}",
            device.size_bytes(),
            identity.size_bytes
        )));
    }
    let (first, others): (Vec<&Sample>, Vec<&Sample>) = identity.samples.iter().partition(|s| s.offset == 0);
    let mut read = 0;
    for sample in first {
        let mut buffer = device.buffer(ALIGN as usize);
        let block = device.read_block(0, &mut buffer, sample.length as usize)?;
        read += sample.length;
        let sb = superblock(block).map_err(refuse)?;
        if sb.uuid != identity.uuid {
            return Err(refuse(format!(
                "its filesystem's UUID is {}, the plan's {}",
                sb.uuid, identity.uuid
            )));
        }
        if sample_sha256(0, block) != sample.sha256 {
            return Err(refuse(
                "its superblock differs from the plan's image (another filesystem with the same UUID, \
                 or resized or changed since)"
                    .to_owned(),
            ));
        }
    }
    let checks: Vec<Result<bool, BlockError>> = std::thread::scope(|scope| {
        let reads: Vec<_> = others
            .iter()
            .map(|sample| {
                scope.spawn(move || {
                    let mut buffer = device.buffer(sample.length as usize);
                    let block = device.read_block(sample.offset, &mut buffer, sample.length as usize)?;
                    Ok(sample_sha256(sample.offset, block) == sample.sha256)
                })
            })
            .collect();
        reads.into_iter().map(|r| r.join().unwrap_or(Ok(false))).collect()
    });
    for (sample, check) in others.iter().zip(checks) {
        read += sample.length;
        if !check? {
            return Err(refuse(format!(
                "its block at byte {} differs from the plan's image (the image was changed since)",
                sample.offset
            )));
        }
    }
    Ok(read)
}

/// The block device holding the filesystem `uuid` of `size_bytes`: `/dev/disk/by-uuid/UUID`
/// where udev made it, else the first device under /sys/class/block of that size whose
/// superblock carries the UUID (devices of another size are not read).
pub fn find_by_uuid(uuid: &str, size_bytes: u64) -> Option<PathBuf> {
    let link = Path::new("/dev/disk/by-uuid").join(uuid);
    if link.exists() {
        return std::fs::canonicalize(link).ok();
    }
    let mut names: Vec<String> = std::fs::read_dir("/sys/class/block")
        .ok()?
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|name| {
            let sectors = std::fs::read_to_string(format!("/sys/class/block/{name}/size"));
            sectors.ok().and_then(|s| s.trim().parse::<u64>().ok()) == Some(size_bytes / 512)
        })
        .collect();
    names.sort();
    names.into_iter().map(|name| Path::new("/dev").join(name)).find(|path| {
        let Ok(device) = DirectDevice::open(path) else { return false };
        let mut buffer = device.buffer(ALIGN as usize);
        device
            .read_block(0, &mut buffer, ALIGN as usize)
            .ok()
            .and_then(|block| superblock(block).ok())
            .is_some_and(|sb| sb.uuid == uuid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ext4_block(uuid: [u8; 16], label: &[u8]) -> Vec<u8> {
        let mut block = vec![0u8; 4096];
        block[1024 + 0x38..1024 + 0x3A].copy_from_slice(&EXT_MAGIC.to_le_bytes());
        block[1024 + 0x60..1024 + 0x64].copy_from_slice(&0x2C2u32.to_le_bytes());
        block[1024 + 0x68..1024 + 0x78].copy_from_slice(&uuid);
        block[1024 + 0x78..1024 + 0x78 + label.len()].copy_from_slice(label);
        block
    }

    #[test]
    fn an_ext4_superblock_gives_its_uuid_and_label_and_anything_else_is_refused() {
        let uuid = [0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 1, 2, 3, 4, 5, 6, 7, 8];
        let sb = superblock(&ext4_block(uuid, b"root")).unwrap();
        assert_eq!(sb.filesystem, "ext4");
        assert_eq!(sb.uuid, "12345678-9abc-def0-0102-030405060708");
        assert_eq!(sb.label.as_deref(), Some("root"));
        assert_eq!(superblock(&ext4_block(uuid, b"")).unwrap().label, None);
        assert!(superblock(&[0u8; 4096]).unwrap_err().contains("no ext2/3/4 superblock"));
        assert!(superblock(&[0u8; 100]).is_err());
    }

    #[test]
    fn the_first_blocks_checksum_ignores_what_a_mount_writes_and_nothing_else() {
        let clean = ext4_block([7; 16], b"root");
        let mut mounted = clean.clone();
        mounted[1024 + 0x60] |= 0x04;
        mounted[1024 + 0x2C] = 0x55;
        assert_eq!(sample_sha256(0, &mounted), sample_sha256(0, &clean), "needs recovery, mount time");
        let mut other_feature = clean.clone();
        other_feature[1024 + 0x60] |= 0x01;
        assert_ne!(sample_sha256(0, &other_feature), sample_sha256(0, &clean));
        assert_ne!(sample_sha256(4096, &mounted), sample_sha256(4096, &clean), "only the first block");
    }

    #[test]
    fn samples_lie_in_the_planned_ranges_the_first_block_always_among_them() {
        let ranges = [
            BlockRange { offset: 1 << 20, length: 512 * 1024, first_need_ns: 0 },
            BlockRange { offset: 64 << 20, length: 2 << 20, first_need_ns: 5 },
        ];
        let offsets = sample_offsets(&ranges);
        assert_eq!(offsets[0], 0);
        assert_eq!(offsets.len(), SAMPLES + 1);
        for o in &offsets[1..] {
            assert!(ranges.iter().any(|r| (r.offset..r.offset + r.length).contains(o)), "{o}");
            assert_eq!(o % ALIGN, 0);
        }
        assert!(offsets[1..].iter().any(|&o| o < 64 << 20), "both ranges are sampled");
        assert_eq!(sample_offsets(&ranges), offsets, "the same blocks every time");
        let one = [BlockRange { offset: 8192, length: 4096, first_need_ns: 0 }];
        assert_eq!(sample_offsets(&one), vec![0, 8192]);
    }
}
