//! File identity: every page fill's (device, inode) resolved to a path — first by
//! the fanotify opens, then by a bounded walk of the filesystem — and physical
//! extents (FIEMAP) for the files the start read.
//!
//! Filesystem metadata (inode tables, directories, the journal) enters the page
//! cache through the block device's own inode: its fills carry the device of the
//! internal `bdev` filesystem (major 0) and, as inode number, the block device's
//! number in the kernel encoding (`major << 20 | minor`; 254:0 → 0xfe00000), with
//! page indexes counted from the start of that device. Those become one
//! [`FileKind::DeviceMetadata`] file per disk, page indexes moved to the whole disk.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use coldstart_trace::{Dev, Extent, File, FileKind};

use crate::assemble::system_view::{EntryStat, SystemView};
use crate::capture::fanotify::OpenRecord;
use crate::system::Mount;

/// ext2/3/4 reserve inode numbers below 11 for their own use; the page cache of
/// inode 1 holds the block allocator's bitmaps (`s_buddy_cache`), filled when a
/// program writes. No walk can name them (the root directory, 2, is read through
/// the block device, not its own page cache).
fn is_reserved_inode(mounts: &[Mount], dev: Dev, ino: u64) -> bool {
    const EXT4_FIRST_INO: u64 = 11;
    ino < EXT4_FIRST_INO
        && ino != 2
        && mounts.iter().any(|m| m.dev == dev && matches!(m.fstype.as_str(), "ext2" | "ext3" | "ext4"))
}

/// Filesystems served by a daemon or a server (FUSE, network filesystems), which the walk
/// never enters: every entry it looked at would be a request to them, after the start.
fn is_served_remotely(fstype: &str) -> bool {
    fstype == "fuse"
        || fstype == "fuseblk"
        || fstype.starts_with("fuse.")
        || matches!(
            fstype,
            "nfs" | "nfs4" | "cifs" | "smb3" | "9p" | "ceph" | "afs" | "virtiofs" | "glusterfs"
        )
}

/// Limits of the walk for inodes fanotify did not name.
pub const WALK_MAX_ENTRIES: usize = 400_000;
pub const WALK_MAX_TIME: Duration = Duration::from_secs(20);

#[derive(Clone, Debug)]
struct Known {
    path: Option<String>,
    size: Option<u64>,
    mtime_ns: Option<i64>,
    dir: bool,
}

/// The `file` table under construction.
#[derive(Default)]
pub struct FileTable {
    pub files: Vec<File>,
    by_key: HashMap<(Dev, u64), u32>,
    /// Page offset to add to fills of a device-metadata file (partition start).
    pub index_shift: HashMap<u32, u64>,
    known: HashMap<(Dev, u64), Known>,
    pub unresolved: u64,
    /// Files that are a filesystem's own metadata under a reserved inode number.
    pub fs_internal: u64,
    pub walked_entries: usize,
    pub walk_truncated: bool,
    /// Files left without a path because their filesystem is not walked (FUSE, network):
    /// the mount point, its type, and how many.
    pub not_walked: Vec<(PathBuf, String, u64)>,
}

impl FileTable {
    pub fn new(opens: &[OpenRecord]) -> FileTable {
        let mut t = FileTable::default();
        for o in opens {
            let key = (Dev::from_user(o.dev), o.ino);
            if o.path.is_some() || !t.known.contains_key(&key) {
                t.known.insert(
                    key,
                    Known {
                        path: o.path.clone(),
                        size: o.size,
                        mtime_ns: o.mtime_ns,
                        dir: o.dir.unwrap_or(false),
                    },
                );
            }
        }
        t
    }

    /// The id of the file of a page-cache event (`s_dev` in the kernel encoding).
    pub fn for_fill(&mut self, s_dev: u32, ino: u64, page_size: u64, system: &dyn SystemView) -> u32 {
        let key = (Dev::from_kernel(s_dev), ino);
        if let Some(&id) = self.by_key.get(&key) {
            return id;
        }
        let id = self.files.len() as u32;
        let bdev = Dev::from_kernel(ino as u32);
        let file = if key.0.major == 0
            && ino >> 32 == 0
            && !self.known.contains_key(&key)
            && system.is_block_device(bdev)
        {
            let (disk, start) = system.whole_disk(bdev);
            self.index_shift.insert(id, start / page_size);
            let name = system.disk_info(disk).name;
            File {
                id,
                dev: disk,
                ino,
                path: Some(format!("/dev/{name}")),
                kind: FileKind::DeviceMetadata,
                size: None,
                mtime_ns: None,
            }
        } else {
            self.file_row(id, key)
        };
        self.files.push(file);
        self.by_key.insert(key, id);
        id
    }

    /// The id of an opened file (from fanotify's `st_dev`).
    pub fn for_open(&mut self, user_dev: u64, ino: u64) -> u32 {
        let key = (Dev::from_user(user_dev), ino);
        if let Some(&id) = self.by_key.get(&key) {
            return id;
        }
        let id = self.files.len() as u32;
        let row = self.file_row(id, key);
        self.files.push(row);
        self.by_key.insert(key, id);
        id
    }

    /// The id of a file already in the table.
    pub fn id_of(&self, dev: Dev, ino: u64) -> Option<u32> {
        self.by_key.get(&(dev, ino)).copied()
    }

    /// The path fanotify gave an inode (`st_dev` in the user encoding).
    pub fn known_path(&self, user_dev: u64, ino: u64) -> Option<&str> {
        self.known.get(&(Dev::from_user(user_dev), ino))?.path.as_deref()
    }

    /// Names the files still without a path (after the walk: on FUSE or network
    /// filesystems) by the path a system call opened them by, when that path opens the same
    /// inode here (an open in another mount namespace names a path the host may not have);
    /// returns how many were named, taken off the unresolved and not-walked counts.
    pub fn name_by_opens(&mut self, proposed: &[(u32, String)], system: &dyn SystemView) -> u64 {
        let mut named = 0;
        for (id, path) in proposed {
            let Some(f) = self.files.get_mut(*id as usize) else { continue };
            if f.path.is_some()
                || f.kind != FileKind::Regular
                || !system.is_file_at(Path::new(path), f.dev, f.ino)
            {
                continue;
            }
            f.path = Some(path.clone());
            named += 1;
            self.unresolved = self.unresolved.saturating_sub(1);
            if let Some(mount) = self
                .not_walked
                .iter_mut()
                .filter(|(point, _, _)| Path::new(path).starts_with(point))
                .max_by_key(|(point, _, _)| point.as_os_str().len())
            {
                mount.2 = mount.2.saturating_sub(1);
            }
        }
        named
    }

    fn file_row(&self, id: u32, key: (Dev, u64)) -> File {
        let known = self.known.get(&key);
        File {
            id,
            dev: key.0,
            ino: key.1,
            path: known.and_then(|k| k.path.clone()),
            kind: if known.is_some_and(|k| k.dir) { FileKind::Directory } else { FileKind::Regular },
            size: known.and_then(|k| k.size),
            mtime_ns: known.and_then(|k| k.mtime_ns),
        }
    }

    /// Looks for the files still without a path by walking their filesystems, then
    /// counts what stays unresolved.
    pub fn resolve_by_walk(&mut self, mounts: &[Mount], system: &dyn SystemView) {
        for f in self.files.iter_mut().filter(|f| f.path.is_none() && f.kind == FileKind::Regular) {
            if is_reserved_inode(mounts, f.dev, f.ino) {
                f.kind = FileKind::Other;
                self.fs_internal += 1;
            }
        }
        let mut wanted: HashMap<Dev, HashSet<u64>> = HashMap::new();
        for f in self.files.iter().filter(|f| f.path.is_none() && f.kind != FileKind::Other) {
            wanted.entry(f.dev).or_default().insert(f.ino);
        }
        let started = Instant::now();
        let mut found: HashMap<(Dev, u64), (PathBuf, EntryStat)> = HashMap::new();
        for (dev, inos) in &wanted {
            let Some(mount) =
                mounts.iter().filter(|m| m.dev == *dev).min_by_key(|m| m.root.as_os_str().len())
            else {
                continue;
            };
            if is_served_remotely(&mount.fstype) {
                self.not_walked.push((mount.mount_point.clone(), mount.fstype.clone(), inos.len() as u64));
                continue;
            }
            let mut stack = vec![mount.mount_point.clone()];
            let mut left = inos.len();
            while let Some(dir) = stack.pop() {
                if left == 0 || self.walked_entries >= WALK_MAX_ENTRIES || started.elapsed() > WALK_MAX_TIME {
                    self.walk_truncated |= left > 0;
                    break;
                }
                let Some(entries) = system.read_dir(&dir) else { continue };
                for entry in entries {
                    self.walked_entries += 1;
                    let Some(stat) = entry.stat else { continue };
                    if stat.dev != *dev {
                        continue;
                    }
                    let is_dir = stat.is_dir;
                    if inos.contains(&stat.ino) && !found.contains_key(&(*dev, stat.ino)) {
                        left -= 1;
                        found.insert((*dev, stat.ino), (entry.path.clone(), stat));
                    }
                    if is_dir {
                        stack.push(entry.path);
                    }
                }
            }
        }
        for f in self.files.iter_mut().filter(|f| f.path.is_none() && f.kind != FileKind::Other) {
            match found.get(&(f.dev, f.ino)) {
                Some((path, stat)) => {
                    f.path = Some(path.to_string_lossy().into_owned());
                    f.size = Some(stat.size);
                    f.mtime_ns = Some(stat.mtime_ns);
                    if stat.is_dir {
                        f.kind = FileKind::Directory;
                    }
                }
                None => self.unresolved += 1,
            }
        }
    }

    /// FIEMAP extents of the regular files in `ids`, placed on whole disks.
    /// Also returns how many files failed, and how many were gone (deleted) by then.
    pub fn extents(&self, ids: &HashSet<u32>, system: &dyn SystemView) -> (Vec<Extent>, u64, u64) {
        let mut out = Vec::new();
        let (mut failed, mut gone) = (0, 0);
        for f in self.files.iter().filter(|f| ids.contains(&f.id) && f.kind == FileKind::Regular) {
            let Some(path) = &f.path else { continue };
            let (disk, start) = system.whole_disk(f.dev);
            match system.extents(Path::new(path), f.dev, f.ino) {
                Ok(list) => out.extend(list.into_iter().map(|e| Extent {
                    file_id: f.id,
                    disk,
                    logical: e.logical,
                    physical: e.physical + start,
                    length: e.length,
                    flags: e.flags,
                })),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => gone += 1,
                Err(_) => failed += 1,
            }
        }
        (out, failed, gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ext4_reserved_inodes_are_not_files_to_look_for() {
        let empty = tempfile::tempdir().unwrap();
        let mount = |dev, fstype: &str| Mount {
            mnt_id: 0,
            dev,
            root: "/".into(),
            mount_point: empty.path().to_owned(),
            fstype: fstype.into(),
            source: "/dev/vda".into(),
        };
        let (vda, vdb) = (Dev::new(254, 0), Dev::new(254, 16));
        let mounts = [mount(vda, "ext4"), mount(vdb, "xfs")];
        let mut table = FileTable::default();
        for (dev, ino) in [(vda, 1), (vda, 2), (vda, 11), (vdb, 1)] {
            table.for_open(dev.to_user(), ino);
        }
        table.resolve_by_walk(&mounts, &crate::assemble::LiveSystem);
        let kinds: Vec<FileKind> = table.files.iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [FileKind::Other, FileKind::Regular, FileKind::Regular, FileKind::Regular]);
        assert_eq!((table.fs_internal, table.unresolved), (1, 3));
    }

    #[test]
    fn a_fuse_or_network_filesystem_is_never_walked_and_its_files_are_counted() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("plugin.so"), b"x").unwrap();
        let st = std::fs::metadata(dir.path().join("plugin.so")).unwrap();
        let dev = Dev::from_user(std::os::unix::fs::MetadataExt::dev(&st));
        let ino = std::os::unix::fs::MetadataExt::ino(&st);
        let walk = |fstype: &str| {
            let mount = Mount {
                mnt_id: 0,
                dev,
                root: "/".into(),
                mount_point: dir.path().to_owned(),
                fstype: fstype.into(),
                source: "server:/export".into(),
            };
            let mut table = FileTable::default();
            table.for_open(dev.to_user(), ino);
            table.resolve_by_walk(&[mount], &crate::assemble::LiveSystem);
            table
        };
        let local = walk("ext4");
        assert!(
            local.files[0].path.as_deref().is_some_and(|p| p.ends_with("plugin.so")),
            "the walk names it"
        );
        for fstype in ["fuse.sshfs", "nfs4", "fuse"] {
            let remote = walk(fstype);
            assert_eq!(
                (remote.files[0].path.clone(), remote.walked_entries, remote.unresolved),
                (None, 0, 1)
            );
            assert_eq!(remote.not_walked, [(dir.path().to_owned(), fstype.to_owned(), 1)]);
        }
    }
}
