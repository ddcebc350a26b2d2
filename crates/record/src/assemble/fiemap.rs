//! Physical extents of a file with the FIEMAP ioctl (no flags: no sync, no writes).

use std::fs::File;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use coldstart_trace::Dev;
use nix::fcntl::OFlag;

const FIEMAP_EXTENT_LAST: u32 = 0x1;
const HEADER: usize = 32;
const EXTENT: usize = 56;
const BATCH: usize = 256;

/// One extent, offsets in bytes (physical: from the start of the filesystem's device).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawExtent {
    pub logical: u64,
    pub physical: u64,
    pub length: u64,
    pub flags: u32,
}

/// The extents of `path`, if it is still the file (dev, ino) the trace saw.
pub fn extents(path: &Path, dev: Dev, ino: u64) -> io::Result<Vec<RawExtent>> {
    let file = File::options()
        .read(true)
        .custom_flags((OFlag::O_NOATIME | OFlag::O_NOFOLLOW).bits())
        .open(path)
        .or_else(|_| File::open(path))?;
    let md = file.metadata()?;
    if Dev::from_user(md.dev()) != dev || md.ino() != ino {
        return Err(io::Error::other("the file was replaced since the recording"));
    }
    let mut out = Vec::new();
    let mut start = 0u64;
    let mut buf = vec![0u64; (HEADER + BATCH * EXTENT) / 8];
    loop {
        buf.fill(0);
        buf[0] = start;
        buf[1] = u64::MAX - start;
        // fm_flags, fm_mapped_extents, then fm_extent_count and fm_reserved: two u32 pairs.
        buf[3] = words_of(BATCH as u32, 0);
        crate::sys::fiemap(&file, &mut buf)?;
        let bytes: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mapped = u32::from_ne_bytes(bytes[20..24].try_into().unwrap_or_default()) as usize;
        if mapped == 0 {
            return Ok(out);
        }
        let mut last = false;
        for i in 0..mapped.min(BATCH) {
            let e = &bytes[HEADER + i * EXTENT..HEADER + (i + 1) * EXTENT];
            let u = |at: usize| u64::from_ne_bytes(e[at..at + 8].try_into().unwrap_or_default());
            let flags = u32::from_ne_bytes(e[40..44].try_into().unwrap_or_default());
            let ext = RawExtent { logical: u(0), physical: u(8), length: u(16), flags };
            start = ext.logical + ext.length;
            last |= flags & FIEMAP_EXTENT_LAST != 0;
            out.push(ext);
        }
        if last {
            return Ok(out);
        }
    }
}

/// Two adjacent u32 fields of a C struct as the one u64 word that holds them.
fn words_of(first: u32, second: u32) -> u64 {
    let mut bytes = [0u8; 8];
    bytes[..4].copy_from_slice(&first.to_ne_bytes());
    bytes[4..].copy_from_slice(&second.to_ne_bytes());
    u64::from_ne_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn extents_cover_a_written_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![7u8; 3 * 4096 + 10]).unwrap();
        f.sync_all().unwrap();
        let md = f.metadata().unwrap();
        match extents(&path, Dev::from_user(md.dev()), md.ino()) {
            Ok(list) => {
                assert!(!list.is_empty());
                assert_eq!(list[0].logical, 0);
                let end = list.iter().map(|e| e.logical + e.length).max().unwrap();
                assert!(end >= 3 * 4096 + 10, "extents end at {end}");
            }
            Err(e) if e.raw_os_error() == Some(nix::errno::Errno::EOPNOTSUPP as i32) => {
                eprintln!("skip: no FIEMAP on this filesystem")
            }
            Err(e) => panic!("{e}"),
        }
        assert!(extents(&path, Dev::new(1, 1), md.ino()).is_err());
    }
}
