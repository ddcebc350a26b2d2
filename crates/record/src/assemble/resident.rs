//! Pages the start used without reading them: those of its fault-around windows that
//! no recorded fill brought in and that are in the page cache when the trace is
//! assembled. Eviction cannot drop a page another process maps (an X server's
//! libraries, a desktop's shared libraries), so a "cold" start finds such pages cached
//! and the kernel maps them around its faults; a machine that is really cold must read
//! them, so a prefetch plan needs them (crates/prefetch's `build`).

use std::collections::HashMap;
use std::fs::File as FsFile;
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

use coldstart_trace::{AccessKind, Dev, File, FileKind, PageAccess, PageFill, PageResident};
use nix::fcntl::OFlag;

use super::pages::union;
use super::system_view::SystemView;

/// Whether each page of `path` is in the page cache, if it is still the file (dev, ino).
pub fn resident_map(path: &Path, dev: Dev, ino: u64, page_size: u64) -> io::Result<Vec<bool>> {
    let file = FsFile::options()
        .read(true)
        .custom_flags((OFlag::O_NOATIME | OFlag::O_NOFOLLOW).bits())
        .open(path)
        .or_else(|_| FsFile::open(path))?;
    let md = file.metadata()?;
    if Dev::from_user(md.dev()) != dev || md.ino() != ino {
        return Err(io::Error::other("the file was replaced since the recording"));
    }
    if md.len() == 0 {
        return Ok(Vec::new());
    }
    let len = usize::try_from(md.len()).map_err(|_| io::Error::other("file too large to map"))?;
    crate::sys::Mapping::new(&file, len)?.resident_map(page_size as usize)
}

/// `a` without the pages of `b` (both sorted and merged).
fn minus(a: &[(u64, u64)], b: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut j = 0;
    for &(mut s, e) in a {
        while j < b.len() && b[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while s < e {
            match b.get(k) {
                Some(&(bs, be)) if bs < e => {
                    if bs > s {
                        out.push((s, bs));
                    }
                    s = s.max(be);
                    k += 1;
                }
                _ => {
                    out.push((s, e));
                    break;
                }
            }
        }
    }
    out
}

/// The resident, unfilled pages of the fault-around windows of each regular file, and
/// how many files could not be asked (replaced or gone since).
pub fn resident_pages(
    files: &[File],
    fills: &[PageFill],
    accesses: &[PageAccess],
    system: &dyn SystemView,
    page_size: u64,
) -> (Vec<PageResident>, u64) {
    let mut windows: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for a in accesses.iter().filter(|a| a.kind == AccessKind::MapAround) {
        windows.entry(a.file_id).or_default().push((a.index, a.index + u64::from(a.pages.max(1))));
    }
    let mut filled: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for f in fills.iter().filter(|f| windows.contains_key(&f.file_id)) {
        filled.entry(f.file_id).or_default().push((f.index, f.index + u64::from(f.pages.max(1))));
    }
    let mut rows = Vec::new();
    let mut unasked = 0;
    for file in files.iter().filter(|f| f.kind == FileKind::Regular) {
        let (Some(list), Some(path)) = (windows.remove(&file.id), file.path.as_deref()) else { continue };
        let unfilled = minus(&union(list), &union(filled.remove(&file.id).unwrap_or_default()));
        if unfilled.is_empty() {
            continue;
        }
        let Some(map) = system.resident_map(Path::new(path), file.dev, file.ino, page_size) else {
            unasked += 1;
            continue;
        };
        for (s, e) in unfilled {
            let mut run: Option<u64> = None;
            for page in s..e.min(map.len() as u64) {
                match (map[page as usize], run) {
                    (true, None) => run = Some(page),
                    (false, Some(start)) => {
                        rows.push(row(file.id, start, page));
                        run = None;
                    }
                    _ => {}
                }
            }
            if let Some(start) = run {
                rows.push(row(file.id, start, e.min(map.len() as u64)));
            }
        }
    }
    (rows, unasked)
}

fn row(file_id: u32, start: u64, end: u64) -> PageResident {
    PageResident { file_id, index: start, pages: u32::try_from(end - start).unwrap_or(u32::MAX) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minus_takes_out_every_page_of_the_second_set() {
        assert_eq!(minus(&[(0, 10)], &[(2, 4), (6, 7)]), vec![(0, 2), (4, 6), (7, 10)]);
        assert_eq!(minus(&[(0, 4), (8, 12)], &[(3, 9)]), vec![(0, 3), (9, 12)]);
        assert_eq!(minus(&[(5, 6)], &[(0, 100)]), Vec::<(u64, u64)>::new());
        assert_eq!(minus(&[(5, 8)], &[]), vec![(5, 8)]);
    }

    #[test]
    fn union_merges_overlapping_and_touching_ranges() {
        assert_eq!(union(vec![(4, 6), (0, 2), (2, 3), (5, 9)]), vec![(0, 3), (4, 9)]);
    }

    #[test]
    fn a_real_file_reports_its_cached_pages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 3 * 4096]).unwrap();
        let _ = std::fs::read(&path).unwrap();
        let md = std::fs::metadata(&path).unwrap();
        let map = resident_map(&path, Dev::from_user(md.dev()), md.ino(), 4096).unwrap();
        assert_eq!(map, vec![true, true, true]);
        let other = resident_map(&path, Dev::from_user(md.dev()), md.ino() + 1, 4096);
        assert!(other.is_err(), "another inode at the path is refused");
    }
}
