//! `EmulatedDisk`: the whole stack of one emulated device (FUSE image, loop device with
//! direct I/O, ext4, mounts), made by `create` and undone by `Drop`.

use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;

use coldstart_analyze::doctor::{DiskClass, DiskParams};
use coldstart_record::assemble::fiemap;
use coldstart_trace::Dev;
use fuser::{BackgroundSession, Config, MountOption};

use crate::clock::{DeviceClock, Stats};
use crate::image::{IMAGE_NAME, ImageFs, Shared};
use crate::{Result, StorageError, leftovers, sys};

/// Below this, mkfs.ext4 has no room for a journal and a few files.
pub const MIN_SIZE_BYTES: u64 = 32 << 20;
const BLOCK_SIZE: u32 = 4096;

/// One emulated device, from its FUSE image to its mounts.
pub struct EmulatedDisk {
    run_dir: PathBuf,
    shared: Arc<Shared>,
    session: Option<BackgroundSession>,
    timer: Option<JoinHandle<()>>,
    device: PathBuf,
    /// Held open until teardown, so autoclear does not detach the device while it is unmounted.
    device_file: Option<File>,
    mounts: Vec<PathBuf>,
    /// The loop device's `read_ahead_kb` before the profile's was set, put back at teardown
    /// (the next user of the loop device would otherwise inherit it).
    read_ahead_before: Option<String>,
}

/// What `fill_from` copied.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FillReport {
    pub files: usize,
    pub bytes: u64,
    /// Paths that were not regular files or could not be read.
    pub skipped: Vec<PathBuf>,
}

impl EmulatedDisk {
    /// Makes a device of `size_bytes` under `params`, with an empty ext4 on it. Cleans up
    /// first what disks of dead processes left. Needs root.
    pub fn create(params: DiskParams, size_bytes: u64) -> Result<EmulatedDisk> {
        if size_bytes < MIN_SIZE_BYTES {
            return Err(StorageError::Setup(format!(
                "a device of {size_bytes} bytes is too small: at least {} MiB",
                MIN_SIZE_BYTES >> 20
            )));
        }
        let size_bytes = size_bytes / u64::from(BLOCK_SIZE) * u64::from(BLOCK_SIZE);
        let mut disk = EmulatedDisk::blank(params, size_bytes)?;
        make_ext4(&disk.device)?;
        disk.ready()?;
        Ok(disk)
    }

    /// Makes a device holding a copy of the ext2/3/4 filesystem image `image`, its size, as
    /// the volume restored from a snapshot of it would be: the copy is written unmodelled, so
    /// on a lazily fetched profile every chunk is still to be fetched. Needs root.
    pub fn from_image(params: DiskParams, image: &Path) -> Result<EmulatedDisk> {
        let size_bytes = check_ext_image(image)?;
        let mut disk = EmulatedDisk::blank(params, size_bytes)?;
        copy_image(image, &disk.run_dir.join("fuse").join(IMAGE_NAME))?;
        disk.ready()?;
        Ok(disk)
    }

    /// The FUSE image of `size_bytes` and its loop device, nothing on it, the model off.
    fn blank(params: DiskParams, size_bytes: u64) -> Result<EmulatedDisk> {
        let class = params.class;
        leftovers::clean_stale();
        let run_dir = leftovers::new_run_dir();
        let fuse_dir = run_dir.join("fuse");
        std::fs::create_dir_all(&fuse_dir)
            .map_err(StorageError::io(format!("creating {}", fuse_dir.display())))?;
        let shared = Shared::new(DeviceClock::new(params), size_bytes);
        let mut disk = EmulatedDisk {
            run_dir,
            shared: Arc::clone(&shared),
            session: None,
            timer: None,
            device: PathBuf::new(),
            device_file: None,
            mounts: Vec::new(),
            read_ahead_before: None,
        };
        disk.timer = Some(shared.spawn_timer().map_err(StorageError::io("starting the timer thread"))?);
        let mut config = Config::default();
        config.mount_options = vec![MountOption::FSName("coldstart-storage".into()), MountOption::RW];
        let session = fuser::spawn_mount(ImageFs::new(Arc::clone(&shared)), &fuse_dir, &config)
            .map_err(StorageError::io(format!("mounting the FUSE image at {}", fuse_dir.display())))?;
        disk.session = Some(session);
        let image_path = fuse_dir.join(IMAGE_NAME);
        let image = File::options()
            .read(true)
            .write(true)
            .open(&image_path)
            .map_err(StorageError::io(format!("opening {}", image_path.display())))?;
        let (device, device_file) = sys::attach_loop(&image, &image_path, BLOCK_SIZE)
            .map_err(StorageError::io(format!("attaching a loop device to {}", image_path.display())))?;
        drop(image);
        set_elevator(&device, elevator_for(class));
        disk.device = device;
        disk.device_file = Some(device_file);
        Ok(disk)
    }

    /// The profile's read-ahead set and the model on: from here every request is modelled.
    fn ready(&mut self) -> Result<()> {
        self.apply_read_ahead()?;
        self.shared.set_modelled(true);
        Ok(())
    }

    /// The device's size in bytes.
    pub fn size_bytes(&self) -> u64 {
        self.shared.size_bytes()
    }

    /// The loop device, e.g. `/dev/loop3`.
    pub fn device(&self) -> &Path {
        &self.device
    }

    /// Mounts the device's ext4 at `dir` (an existing directory).
    pub fn mount_at(&mut self, dir: &Path) -> Result<()> {
        sys::mount_ext4(&self.device, dir).map_err(StorageError::io(format!(
            "mounting {} at {}",
            self.device.display(),
            dir.display()
        )))?;
        self.mounts.push(dir.to_owned());
        self.apply_read_ahead()
    }

    /// Sets the profile's read-ahead on the device, keeping the first value it replaced for
    /// the teardown. Again after each step that can raise it: the kernel recomputes a
    /// device's read-ahead when its limits change (the loop driver does, at its first opens)
    /// and never lowers it then.
    fn apply_read_ahead(&mut self) -> Result<()> {
        let Some(bytes) = self.params().read_ahead_bytes else { return Ok(()) };
        let before = set_read_ahead(&self.device, bytes)?;
        self.read_ahead_before.get_or_insert(before);
        Ok(())
    }

    /// Copies `files` (absolute paths) under the first mount, at the same paths, in the
    /// order of their first physical extent on the disk they are on now, so the emulated
    /// disk keeps their layout's seeks. The model is off while copying and the data is
    /// on the device when this returns.
    pub fn fill_from(&mut self, files: &[PathBuf]) -> Result<FillReport> {
        let Some(root) = self.mounts.first().cloned() else {
            return Err(StorageError::Setup("fill_from needs the device mounted first (mount_at)".into()));
        };
        let mut report = FillReport::default();
        let mut placed: Vec<(u64, &PathBuf, u64)> = Vec::new();
        for path in files {
            match std::fs::metadata(path) {
                Ok(md) if md.is_file() => {
                    let first = fiemap::extents(path, Dev::from_user(md.dev()), md.ino())
                        .ok()
                        .and_then(|e| e.iter().map(|x| x.physical).min())
                        .unwrap_or(u64::MAX);
                    placed.push((first, path, md.len()));
                }
                _ => report.skipped.push(path.clone()),
            }
        }
        placed.sort_by_key(|p| p.0);
        self.shared.set_modelled(false);
        let copied = (|| -> Result<()> {
            for (_, path, len) in placed {
                let target = root.join(path.strip_prefix("/").unwrap_or(path));
                if let Some(parent) = target.parent() {
                    std::fs::create_dir_all(parent)
                        .map_err(StorageError::io(format!("creating {}", parent.display())))?;
                }
                match std::fs::copy(path, &target) {
                    Ok(_) => {
                        report.files += 1;
                        report.bytes += len;
                    }
                    Err(_) => report.skipped.push(path.clone()),
                }
            }
            let dir = File::open(&root).map_err(StorageError::io(format!("opening {}", root.display())))?;
            nix::unistd::syncfs(&dir)
                .map_err(|e| StorageError::io(format!("syncing {}", root.display()))(e.into()))
        })();
        self.shared.set_modelled(true);
        copied.map(|()| report)
    }

    /// Requests served and the time the model kept the device busy, since it was made
    /// (making the filesystem and filling it are not counted).
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// A handle that restores a lazily fetched volume from its snapshot again (its data
    /// stays; every chunk is fetched again on its first read), for a benchmark's cold runs.
    pub fn restorer(&self) -> impl Fn() + Send + Sync + 'static {
        let shared = Arc::clone(&self.shared);
        move || shared.restore()
    }

    /// Memory the image holds (what was written to it, in 64 KiB chunks).
    pub fn stored_bytes(&self) -> u64 {
        self.shared.stored_bytes()
    }

    pub fn params(&self) -> DiskParams {
        self.shared.params()
    }

    /// Where the device's FUSE mount and image live (named after this process).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }
}

impl Drop for EmulatedDisk {
    fn drop(&mut self) {
        self.shared.set_modelled(false);
        for dir in self.mounts.drain(..).rev() {
            let _ = sys::unmount(&dir);
        }
        self.device_file = None;
        if let Some(before) = self.read_ahead_before.take() {
            let _ = std::fs::write(read_ahead_path(&self.device), before);
        }
        if !self.device.as_os_str().is_empty() {
            let _ = sys::detach_loop(&self.device);
            leftovers::wait_for_release(std::slice::from_ref(&self.device));
        }
        leftovers::tear_down(&self.run_dir);
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
        self.shared.stop_timer();
        if let Some(timer) = self.timer.take() {
            let _ = timer.join();
        }
        leftovers::tear_down(&self.run_dir);
    }
}

/// The I/O scheduler the kernel gives a real disk of `class`: mq-deadline for a device with
/// one hardware queue (SATA hard and solid-state disks, SD cards and eMMC), none for NVMe and
/// cloud volumes. A loop device gets none whatever it stands for; a hard disk without an
/// elevator serves a prefetcher's real-time requests in the order they come, which no laptop
/// does (measured on the MATE login, BENCHMARKS.md 2026-11-27: plan alongside 0.63× of cold
/// with none, 0.40× with mq-deadline).
pub fn elevator_for(class: DiskClass) -> &'static str {
    match class {
        DiskClass::Hdd | DiskClass::Hdd7200 | DiskClass::Ssd | DiskClass::Sd => "mq-deadline",
        DiskClass::Nvme
        | DiskClass::Cloud
        | DiskClass::Snapshot
        | DiskClass::Custom
        | DiskClass::Measured => "none",
    }
}

/// Best effort: a kernel without the elevator keeps the loop device's own (none).
fn set_elevator(device: &Path, elevator: &str) {
    if let Some(name) = device.file_name() {
        let path = Path::new("/sys/block").join(name).join("queue/scheduler");
        let _ = std::fs::write(path, elevator);
    }
}

/// The device's read-ahead setting in sysfs (`/sys/block/loop3/queue/read_ahead_kb`).
pub fn read_ahead_path(device: &Path) -> PathBuf {
    Path::new("/sys/block").join(device.file_name().unwrap_or_default()).join("queue/read_ahead_kb")
}

/// Sets the device's read-ahead to the profile's (rounded down to KiB, as sysfs takes it);
/// returns the value it had.
fn set_read_ahead(device: &Path, bytes: u64) -> Result<String> {
    let path = read_ahead_path(device);
    let before =
        std::fs::read_to_string(&path).map_err(StorageError::io(format!("reading {}", path.display())))?;
    std::fs::write(&path, (bytes / 1024).to_string()).map_err(StorageError::io(format!(
        "setting {} to {} KiB",
        path.display(),
        bytes / 1024
    )))?;
    Ok(before.trim().to_owned())
}

fn make_ext4(device: &Path) -> Result<()> {
    let out = Command::new("mkfs.ext4")
        .args([
            "-q",
            "-F",
            "-b",
            "4096",
            "-L",
            "coldstart",
            "-E",
            "lazy_itable_init=0,lazy_journal_init=0,nodiscard",
        ])
        .arg(device)
        .output()
        .map_err(|e| StorageError::Setup(format!("running mkfs.ext4 (install e2fsprogs): {e}")))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(StorageError::Setup(format!(
            "mkfs.ext4 {} failed: {}",
            device.display(),
            err.lines().next().unwrap_or("no message")
        )));
    }
    Ok(())
}

/// The image's size when it is an ext2/3/4 filesystem image of a usable size; else why not.
fn check_ext_image(image: &Path) -> Result<u64> {
    use std::io::{Read, Seek, SeekFrom};
    let what = |e: std::io::Error| StorageError::Setup(format!("{}: {e}", image.display()));
    let mut file = File::open(image).map_err(what)?;
    let size = file.metadata().map_err(what)?.len();
    if size < MIN_SIZE_BYTES || size % u64::from(BLOCK_SIZE) != 0 {
        return Err(StorageError::Setup(format!(
            "{}: {size} bytes: an image must be at least {} MiB and a whole number of 4 KiB blocks",
            image.display(),
            MIN_SIZE_BYTES >> 20
        )));
    }
    let mut superblock = [0u8; 1024];
    file.seek(SeekFrom::Start(1024)).map_err(what)?;
    file.read_exact(&mut superblock).map_err(what)?;
    if u16::from_le_bytes([superblock[0x38], superblock[0x39]]) != EXT_MAGIC {
        return Err(StorageError::Setup(format!(
            "{}: not an ext2/3/4 filesystem image (no superblock magic at byte 1080)",
            image.display()
        )));
    }
    let log_block =
        u32::from_le_bytes([superblock[0x18], superblock[0x19], superblock[0x1A], superblock[0x1B]]);
    let block_size = 1024u64.checked_shl(log_block).unwrap_or(0);
    if block_size < u64::from(BLOCK_SIZE) {
        return Err(StorageError::Setup(format!(
            "{}: its filesystem has {block_size}-byte blocks; the device's sectors are 4 KiB: make it with mkfs.ext4 -b 4096",
            image.display()
        )));
    }
    Ok(size)
}

const EXT_MAGIC: u16 = 0xEF53;

/// Copies `image` into the device's FUSE file (direct I/O: no page cache holds the copy),
/// skipping runs of zeros, which the sparse image already reads as zeros.
fn copy_image(image: &Path, fuse_file: &Path) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut source = File::open(image).map_err(StorageError::io(format!("reading {}", image.display())))?;
    let target = File::options()
        .write(true)
        .open(fuse_file)
        .map_err(StorageError::io(format!("opening {}", fuse_file.display())))?;
    let mut buffer = vec![0u8; 1 << 20];
    let mut offset = 0u64;
    loop {
        let n = read_full(&mut source, &mut buffer)
            .map_err(StorageError::io(format!("reading {}", image.display())))?;
        if n == 0 {
            return Ok(());
        }
        for (i, block) in buffer[..n].chunks(COPY_BLOCK).enumerate() {
            if block.iter().any(|&b| b != 0) {
                target
                    .write_all_at(block, offset + (i * COPY_BLOCK) as u64)
                    .map_err(StorageError::io(format!("writing the image onto {}", fuse_file.display())))?;
            }
        }
        offset += n as u64;
    }
}

const COPY_BLOCK: usize = 64 << 10;

fn read_full(source: &mut File, buffer: &mut [u8]) -> std::io::Result<usize> {
    use std::io::Read;
    let mut filled = 0;
    while filled < buffer.len() {
        match source.read(&mut buffer[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}
