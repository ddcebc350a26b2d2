//! Physical extents of a file with the FIEMAP ioctl (no flags: no sync, no writes).

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use coldstart_trace::Dev;

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
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
        .custom_flags(libc::O_NOATIME | libc::O_NOFOLLOW)
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
        let bytes: &mut [u8] = bytemuck_u8(&mut buf);
        bytes[0..8].copy_from_slice(&start.to_ne_bytes());
        bytes[8..16].copy_from_slice(&(u64::MAX - start).to_ne_bytes());
        bytes[24..28].copy_from_slice(&(BATCH as u32).to_ne_bytes());
        // SAFETY: the buffer is 8-aligned and holds a fiemap header plus BATCH extents.
        let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, buf.as_mut_ptr()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        let bytes: &[u8] = bytemuck_u8(&mut buf);
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

fn bytemuck_u8(words: &mut [u64]) -> &mut [u8] {
    // SAFETY: u8 has no alignment or validity requirements; the length covers the same memory.
    unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), words.len() * 8) }
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
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => {
                eprintln!("skip: no FIEMAP on this filesystem")
            }
            Err(e) => panic!("{e}"),
        }
        assert!(extents(&path, Dev::new(1, 1), md.ino()).is_err());
    }
}
