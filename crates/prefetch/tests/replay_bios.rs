//! The I/O a replay submits, counted with a private tracefs instance (root). A plan of a
//! few large ranges of one file plus the opens of many small files, on an ext4 image of
//! the test's own (a loop device, so its caches go cold at each remount and nothing else
//! reads it), must become a few large bios, not the 4 KiB bios ext4 reads inode tables
//! and directories with when the opens come before the metadata is in (the replay did
//! that before it took the metadata ranges first). And large ranges of a file on the
//! build's own disk must stay large bios (at most one per MiB), whatever read method
//! the replay uses.

use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use coldstart_prefetch::plan::{
    FORMAT, Order, PlanDirectory, PlanFile, PlanFileKind, PlanRange, PlanSettings, PlanSource, PlanStats,
    VERSION,
};
use coldstart_prefetch::{Plan, ReplayOptions, order, replay};
use coldstart_trace::Dev;

const TEST: &str = "a replay submits large bios";
const MIB: u64 = 1 << 20;
const TRACING: &str = "/sys/kernel/tracing";
const DIRECTORIES: usize = 8;
const FILES_PER_DIRECTORY: usize = 250;

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// An ext4 image on a direct-I/O loop device, mounted; all undone on drop.
struct LoopFs {
    _dir: tempfile::TempDir,
    image: PathBuf,
    device: String,
    mount: PathBuf,
}

impl LoopFs {
    fn new() -> LoopFs {
        let dir = coldstart_testkit::private_dir!();
        let image = dir.path().join("fs.img");
        let mount = dir.path().join("mnt");
        std::fs::create_dir(&mount).unwrap();
        std::fs::File::create(&image).unwrap().set_len(1024 * MIB).unwrap();
        let image_path = image.to_str().unwrap();
        run("mkfs.ext4", &["-q", "-F", "-b", "4096", "-I", "256", "-T", "default", image_path]);
        let device = run("losetup", &["--find", "--show", "--direct-io=on", image_path]);
        let fs = LoopFs { _dir: dir, image, device, mount };
        fs.mount();
        fs
    }

    fn mount(&self) {
        run("mount", &["-o", "noatime", &self.device, self.mount.to_str().unwrap()]);
    }

    /// Unmounts and mounts again: the last close of the device drops its page cache
    /// (the filesystem's metadata), and the unmount its files' pages, dentries and inodes.
    fn make_cold(&self) {
        run("umount", &[self.mount.to_str().unwrap()]);
        self.mount();
    }

    fn rdev(&self) -> Dev {
        Dev::from_user(std::fs::metadata(&self.device).unwrap().rdev())
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.mount).status();
        let _ = Command::new("losetup").arg("-d").arg(&self.device).status();
        let _ = std::fs::remove_file(&self.image);
    }
}

/// A read bio: start and length in bytes on the device, and whether a replay thread queued it.
#[derive(Clone, Copy, Debug)]
struct Bio {
    offset: u64,
    bytes: u64,
    by_replay: bool,
}

/// A private tracefs instance recording the bios queued on one device; removed on drop.
struct BioTrace {
    dir: PathBuf,
}

impl BioTrace {
    fn start(device: Dev) -> BioTrace {
        let dir = Path::new(TRACING).join(format!("instances/coldstart-test-bios-{}", std::process::id()));
        let _ = std::fs::remove_dir(&dir);
        std::fs::create_dir(&dir).unwrap();
        let trace = BioTrace { dir };
        let event = trace.dir.join("events/block/block_bio_queue");
        let kernel_dev = (u64::from(device.major) << 20) | u64::from(device.minor);
        std::fs::write(trace.dir.join("buffer_size_kb"), "4096").unwrap();
        std::fs::write(event.join("filter"), format!("dev == {kernel_dev}")).unwrap();
        std::fs::write(event.join("enable"), "1").unwrap();
        trace
    }

    /// Stops tracing and returns the read bios.
    fn finish(self) -> Vec<Bio> {
        std::fs::write(self.dir.join("events/block/block_bio_queue/enable"), "0").unwrap();
        let text = std::fs::read_to_string(self.dir.join("trace")).unwrap();
        assert!(!text.contains("LOST"), "the trace lost events");
        // `block_bio_queue: 7,0 RA 123456 + 8 [comm]`
        text.lines()
            .filter_map(|line| {
                let fields: Vec<&str> = line.split_once("block_bio_queue: ")?.1.split_whitespace().collect();
                let [_dev, rwbs, sector, "+", sectors, comm, ..] = fields[..] else { return None };
                let bio = Bio {
                    offset: sector.parse::<u64>().ok()? * 512,
                    bytes: sectors.parse::<u64>().ok()? * 512,
                    by_replay: comm.starts_with("[prefetch"),
                };
                rwbs.contains('R').then_some(bio)
            })
            .collect()
    }
}

impl Drop for BioTrace {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("events/block/block_bio_queue/enable"), "0");
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Byte ranges covering `bios`, merged across gaps up to 256 KiB as the planner merges
/// block-device ranges.
fn merged(mut bios: Vec<Bio>) -> Vec<(u64, u64)> {
    bios.sort_by_key(|b| b.offset);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for b in bios {
        match ranges.last_mut() {
            Some((start, end)) if b.offset <= *end + 256 * 1024 => *end = (*end).max(b.offset + b.bytes),
            _ => ranges.push((b.offset, b.offset + b.bytes)),
        }
    }
    ranges
}

fn have_tools() -> bool {
    ["mkfs.ext4", "losetup", "mount", "umount"]
        .iter()
        .all(|p| Command::new(p).arg("--version").output().is_ok())
}

fn regular(path: &Path, ranges: Vec<PlanRange>) -> PlanFile {
    PlanFile::regular_now(path, ranges).unwrap()
}

fn range(offset: u64, length: u64, disk: Option<Dev>, physical: Option<u64>) -> PlanRange {
    PlanRange { offset, length, first_need_ns: 0, disk, physical }
}

#[test]
fn a_disk_ordered_replay_of_large_ranges_and_many_opens_submits_few_large_bios() {
    let tracing = Path::new(TRACING).join("instances").is_dir();
    if coldstart_testkit::skip_without(coldstart_testkit::is_root(), TEST, "root")
        || coldstart_testkit::skip_without(tracing, TEST, "tracefs")
        || coldstart_testkit::skip_without(have_tools(), TEST, "mkfs.ext4, losetup and mount")
    {
        return;
    }
    let fs = LoopFs::new();
    assert!(std::fs::metadata(&fs.device).unwrap().file_type().is_block_device());
    let big = fs.mount.join("big.bin");
    std::fs::write(&big, (0..16 * MIB).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let mut small = Vec::new();
    let mut directories = Vec::new();
    // Top-level directories go to different block groups, so the opens read several inode tables.
    for d in 0..DIRECTORIES {
        let dir = fs.mount.join(format!("dir{d}"));
        std::fs::create_dir(&dir).unwrap();
        directories.push(PlanDirectory { path: dir.to_string_lossy().into(), list: true, first_need_ns: 0 });
        for f in 0..FILES_PER_DIRECTORY {
            let path = dir.join(format!("module{f}.py"));
            std::fs::write(&path, format!("# module {d}.{f}\n")).unwrap();
            small.push(path);
        }
    }
    run("sync", &[]);

    // What opening the files reads of the filesystem's metadata, as a recording would
    // see it: those blocks become the plan's block-device ranges.
    fs.make_cold();
    let trace = BioTrace::start(fs.rdev());
    for d in &directories {
        assert_eq!(std::fs::read_dir(&d.path).unwrap().count(), FILES_PER_DIRECTORY);
    }
    for path in small.iter().chain([&big]) {
        std::fs::File::open(path).unwrap();
    }
    let metadata_bios = trace.finish();
    assert!(metadata_bios.len() >= 20, "opening the files read only {metadata_bios:?}");

    let device = fs.rdev();
    let metadata = PlanFile {
        path: fs.device.clone(),
        kind: PlanFileKind::BlockDevice,
        dev: device,
        ino: 0,
        size: None,
        mtime_ns: None,
        first_need_ns: 0,
        ranges: merged(metadata_bios)
            .into_iter()
            .map(|(start, end)| range(start, end - start, Some(device), Some(start)))
            .collect(),
    };
    let big_ranges = (0..4).map(|i| range(i * 4 * MIB, 2 * MIB, None, None)).collect();
    let mut files = vec![metadata, regular(&big, big_ranges)];
    files.extend(small.iter().map(|p| regular(p, Vec::new())));
    let planned_ranges = files.iter().map(|f| f.ranges.len()).sum::<usize>();
    let plan = plan_of(files, directories);

    fs.make_cold();
    let trace = BioTrace::start(device);
    let report = replay(Arc::clone(&plan), &ReplayOptions::default()).unwrap();
    let bios = trace.finish();
    assert_eq!(report.accounted(), report.planned);
    assert_eq!((report.fetched.ranges + report.resident.ranges) as usize, planned_ranges, "{report:#?}");
    assert_eq!(report.files_opened, plan.files.len(), "{report:#?}");

    // 8 MiB of file data in 2 MiB ranges, and the metadata in its few merged ranges.
    assert_few_large_bios(&plan, &bios);
}

/// At most one bio per MiB of each planned range (a bio of 4 KiB folios holds 1 MiB), and
/// a median bio of 128 KiB or more.
fn assert_few_large_bios(plan: &Plan, bios: &[Bio]) {
    let mut sizes: Vec<u64> = bios.iter().map(|b| b.bytes).collect();
    sizes.sort_unstable();
    let median = sizes.get(sizes.len() / 2).copied().unwrap_or(0);
    let small_bios = sizes.iter().filter(|&&s| s <= 4096).count();
    let read: u64 = sizes.iter().sum();
    let ranges = plan.files.iter().map(|f| f.ranges.len()).sum::<usize>();
    let most =
        plan.files.iter().flat_map(|f| &f.ranges).map(|r| r.length.div_ceil(MIB)).sum::<u64>() as usize;
    assert!(
        !bios.is_empty() && bios.len() <= most && median >= 128 * 1024,
        "{} bios ({small_bios} of at most 4 KiB, median {} KiB, {} KiB in all) for {ranges} ranges; \
         at most {most} expected: {sizes:?}",
        bios.len(),
        median / 1024,
        read / 1024
    );
}

/// A plan of `files` in disk order, with `directories`.
fn plan_of(files: Vec<PlanFile>, directories: Vec<PlanDirectory>) -> Arc<Plan> {
    let settings = PlanSettings { order: Order::Disk, ..PlanSettings::default() };
    let steps = order::steps(&files, &directories, settings.order, settings.blend_window_ns);
    Arc::new(Plan {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        source: PlanSource { page_size: 4096, ..PlanSource::default() },
        settings,
        files,
        directories,
        steps,
        stats: PlanStats::default(),
        notes: Vec::new(),
    })
}

#[test]
fn large_ranges_of_a_file_on_the_build_disk_become_large_bios() {
    const TEST: &str = "large ranges become large bios";
    let tracing = Path::new(TRACING).join("instances").is_dir();
    if coldstart_testkit::skip_without(coldstart_testkit::is_root(), TEST, "root")
        || coldstart_testkit::skip_without(tracing, TEST, "tracefs")
    {
        return;
    }
    let dir = coldstart_testkit::private_dir!();
    let path = dir.path().join("big.bin");
    std::fs::write(&path, (0..16 * MIB).map(|i| (i % 251) as u8).collect::<Vec<u8>>()).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    file.sync_all().unwrap();
    let dev = Dev::from_user(file.metadata().unwrap().dev());
    // Bios name the block device (or partition) the filesystem is on; other filesystems
    // (btrfs, overlays) have a device number no bio carries.
    let block = Path::new("/sys/dev/block").join(format!("{}:{}", dev.major, dev.minor));
    if coldstart_testkit::skip_without(block.exists(), TEST, "a filesystem on a block device") {
        return;
    }
    for _ in 0..2 {
        // SAFETY: posix_fadvise on an open descriptor takes only integers.
        assert_eq!(unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
    }
    let ranges = (0..4).map(|i| range(i * 4 * MIB, 2 * MIB, None, None)).collect();
    let plan = plan_of(vec![regular(&path, ranges)], Vec::new());

    let trace = BioTrace::start(dev);
    let report = replay(Arc::clone(&plan), &ReplayOptions::default()).unwrap();
    // Other programs read this disk too: only the replay threads' bios count.
    let bios: Vec<Bio> = trace.finish().into_iter().filter(|b| b.by_replay).collect();
    assert_eq!((report.fetched.ranges, report.fetched.bytes), (4, 8 * MIB), "{report:#?}");
    assert_few_large_bios(&plan, &bios);
}
