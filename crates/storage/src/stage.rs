//! A program's files moved onto an emulated device without moving them: the files are
//! copied to the device in their physical order on the disk they come from, and each
//! copy is bind-mounted over its original in a mount namespace of this process's own, so
//! the program (started from this process) opens its usual paths and reads from the
//! emulated device, while the rest of the machine sees nothing. Directories, and the
//! inodes of the bind-mounted files (pinned by their mounts), stay where they were: only
//! file data is read from the device (docs/storage.md).

use std::path::{Path, PathBuf};

use coldstart_analyze::doctor::DiskParams;

use crate::disk::{EmulatedDisk, FillReport, MIN_SIZE_BYTES};
use crate::{Result, StorageError, sys};

/// Room for ext4's own structures beside the files.
const HEADROOM_BYTES: u64 = 64 << 20;

/// Files on an emulated device, seen at their own paths by this process and its children.
pub struct StagedFiles {
    /// Bind mounts, in the order they were made (undone in reverse).
    binds: Vec<PathBuf>,
    /// What was copied, and what was not (not a regular file, unreadable).
    pub report: FillReport,
    disk: EmulatedDisk,
}

impl StagedFiles {
    /// Moves this process into a private mount namespace, makes a device of `params`
    /// large enough for `files` (absolute paths), copies them onto it and bind-mounts
    /// each copy over its original. Needs root. Call it before the threads that should
    /// see the copies' mounts are started (a mount namespace belongs to a thread).
    pub fn stage(params: DiskParams, files: &[PathBuf]) -> Result<StagedFiles> {
        let total: u64 = files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
        sys::private_mount_namespace()
            .map_err(StorageError::io("entering a private mount namespace for the emulated device"))?;
        let size = (total + total / 4 + HEADROOM_BYTES).max(MIN_SIZE_BYTES);
        let mut disk = EmulatedDisk::create(params, size)?;
        let root = disk.run_dir().join("files");
        std::fs::create_dir_all(&root).map_err(StorageError::io(format!("creating {}", root.display())))?;
        disk.mount_at(&root)?;
        let report = disk.fill_from(files)?;
        let mut staged = StagedFiles { binds: Vec::new(), report, disk };
        for file in files.iter().filter(|f| !staged.report.skipped.contains(f)) {
            let copy = root.join(file.strip_prefix("/").unwrap_or(file));
            sys::bind_file(&copy, file)
                .map_err(StorageError::io(format!("bind-mounting the copy of {} over it", file.display())))?;
            staged.binds.push(file.clone());
        }
        Ok(staged)
    }

    /// The device under the files.
    pub fn disk(&self) -> &EmulatedDisk {
        &self.disk
    }

    /// The paths now read from the device.
    pub fn paths(&self) -> &[PathBuf] {
        &self.binds
    }

    /// Whether `path` is one of the bind-mounted files.
    pub fn holds(&self, path: &Path) -> bool {
        self.binds.iter().any(|b| b == path)
    }
}

impl Drop for StagedFiles {
    fn drop(&mut self) {
        for bind in self.binds.iter().rev() {
            let _ = sys::unmount(bind);
        }
    }
}
