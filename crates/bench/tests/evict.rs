//! Eviction on real files: `files` (fadvise DONTNEED) and `system` (drop_caches)
//! make a file non-resident, as the kernel's own residency count (cachestat) says.
//! Needs root, where residency is readable for any file; skipped otherwise (fails
//! under CI=true).

use std::io::Write;
use std::path::PathBuf;

use coldstart_bench::evict;

/// `system_eviction_empties_the_page_cache` drops every cache of the machine: the
/// tests here run one at a time, so it cannot empty another test's file mid-check.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn needs_root() -> bool {
    coldstart_testkit::skip_without(
        evict::is_root(),
        "eviction tests",
        "root (residency is only readable truthfully as root or for writable files)",
    )
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
    let _serial = one_at_a_time();
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
    let _serial = one_at_a_time();
    if needs_root() {
        return;
    }
    let (_dir, path) = cached_file("drop-me");
    assert!(evict::cached_bytes(&path).unwrap() > 0);
    evict::drop_caches().unwrap();
    assert_eq!(evict::cached_bytes(&path), Some(0));
}

/// A 32 MiB ext4 image attached to a loop device and mounted, removed again on drop
/// (also when the test fails).
struct LoopFilesystem {
    dir: tempfile::TempDir,
    device: PathBuf,
    mounted: bool,
}

impl LoopFilesystem {
    fn new() -> LoopFilesystem {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let image = dir.path().join("fs.img");
        std::fs::File::create(&image).unwrap().set_len(32 << 20).unwrap();
        run("mkfs.ext4", &["-q", "-F", image.to_str().unwrap()]);
        let device = run("losetup", &["-f", "--show", image.to_str().unwrap()]);
        let mut fs = LoopFilesystem { dir, device: PathBuf::from(device.trim()), mounted: false };
        std::fs::create_dir(fs.mount_point()).unwrap();
        fs.mount();
        fs
    }

    /// noatime: reading must not dirty inodes, whose journalled blocks could not be evicted.
    fn mount(&mut self) {
        run("mount", &["-o", "noatime", self.device.to_str().unwrap(), self.mount_point().to_str().unwrap()]);
        self.mounted = true;
    }

    /// Unmounting writes back and checkpoints the journal, so every cached metadata
    /// block is clean again, as on a filesystem only read from.
    fn remount(&mut self) {
        run("umount", &[self.mount_point().to_str().unwrap()]);
        self.mounted = false;
        self.mount();
    }

    fn mount_point(&self) -> PathBuf {
        self.dir.path().join("mnt")
    }
}

impl Drop for LoopFilesystem {
    fn drop(&mut self) {
        if self.mounted {
            let _ = std::process::Command::new("umount").arg(self.mount_point()).status();
        }
        let _ = std::process::Command::new("losetup").arg("-d").arg(&self.device).status();
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} could not start: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn files_eviction_also_empties_the_metadata_of_the_files_filesystem() {
    let _serial = one_at_a_time();
    if needs_root() {
        return;
    }
    let mut fs = LoopFilesystem::new();
    let mut files = Vec::new();
    for d in 0..40 {
        let dir = fs.mount_point().join(format!("dir{d}"));
        std::fs::create_dir(&dir).unwrap();
        for f in 0..20 {
            let path = dir.join(format!("file{f}"));
            std::fs::write(&path, vec![d as u8; 8192]).unwrap();
            files.push(path);
        }
    }
    fs.remount();
    // Looking every file up and reading it brings its directory blocks and inode
    // tables into the loop device's page cache, its data into its own.
    for path in &files {
        std::fs::read(path).unwrap();
    }
    let metadata = evict::cached_bytes(&fs.device).expect("root reads the device's residency");
    assert!(metadata >= 40 * 4096, "40 directories and their inodes were read: {metadata} bytes cached");
    assert!(evict::cached_bytes(&files[0]).unwrap() > 0);

    let list = fs.dir.path().join("list");
    std::fs::write(&list, files.iter().map(|p| format!("{}\n", p.display())).collect::<String>()).unwrap();
    let set = coldstart_bench::fileset::from_list(&list).unwrap();
    assert_eq!(set.paths.len(), 800);
    assert_eq!(set.devices, [fs.device.clone()], "the loop device holds every file: {:?}", set.notes);

    set.evict();
    let metadata_after = evict::cached_bytes(&fs.device).unwrap();
    assert!(
        metadata_after <= 16 * 4096,
        "at most a few blocks the filesystem pins (superblock, group descriptors) stay: {metadata_after} of {metadata}"
    );
    assert!(files.iter().all(|p| evict::cached_bytes(p) == Some(0)));
    assert_eq!(set.residual_bytes(), Some(metadata_after));
}
