//! Eviction on real files: `files` (fadvise DONTNEED) and `system` (drop_caches)
//! make a file non-resident, as the kernel's own residency count (cachestat) says.
//! Needs root, where residency is readable for any file; skipped otherwise (fails
//! under CI=true).

use std::io::Write;
use std::path::PathBuf;

use coldstart_bench::evict;

fn needs_root() -> bool {
    if evict::is_root() {
        return false;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "CI=true but not root: eviction tests need root");
    eprintln!("skipped: not root (residency is only readable truthfully as root or for writable files)");
    true
}

/// An 8 MiB file on a disk filesystem (the target directory, not a tmpfs), read once so it is cached.
fn cached_file(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let path = dir.path().join(name);
    let mut file = std::fs::File::create(&path).unwrap();
    let block: Vec<u8> = (0..1 << 20).map(|i| (i % 251) as u8).collect();
    for _ in 0..8 {
        file.write_all(&block).unwrap();
    }
    file.sync_all().unwrap();
    drop(file);
    std::fs::read(&path).unwrap();
    (dir, path)
}

#[test]
fn files_eviction_makes_a_file_non_resident() {
    if needs_root() {
        return;
    }
    let (_dir, path) = cached_file("evict-me");
    let before = evict::cached_bytes(&path).expect("root reads residency");
    assert!(before >= 4 << 20, "the file was read, so it is cached: {before}");
    assert_eq!(evict::fadvise_dontneed(std::slice::from_ref(&path)), 0);
    assert_eq!(evict::cached_bytes(&path), Some(0));
    let (residual, unknown) = evict::residual(std::slice::from_ref(&path));
    assert_eq!((residual, unknown), (Some(0), 0));
    assert_eq!(evict::fadvise_dontneed(&[PathBuf::from("/nonexistent/file")]), 1, "counted as not evicted");
}

#[test]
fn system_eviction_empties_the_page_cache() {
    if needs_root() {
        return;
    }
    let (_dir, path) = cached_file("drop-me");
    assert!(evict::cached_bytes(&path).unwrap() > 0);
    evict::drop_caches().unwrap();
    assert_eq!(evict::cached_bytes(&path), Some(0));
}
