//! A slow filesystem: a read-only FUSE passthrough of a directory that answers every
//! request after a fixed delay, as a network filesystem does (NFS mounted with `noac`,
//! sshfs). Attributes and entries are never cached (`attr_timeout=0`,
//! `entry_timeout=0`, no negative entries), so every `stat` reaches the daemon, and
//! requests are served one at a time, like a server with one thread for the client.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    BackgroundSession, Config, Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo,
    LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, Request, SessionACL,
};

use crate::{Result, StorageError};

/// No caching of attributes or entries: every lookup and getattr is a request.
const TTL: Duration = Duration::ZERO;
const ROOT: u64 = 1;

/// What the daemon served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowStats {
    pub requests: u64,
    /// The delay added to them, in all.
    pub delay_ns: u64,
}

#[derive(Default)]
struct Inodes {
    paths: Vec<PathBuf>,
    by_path: HashMap<PathBuf, u64>,
    open_files: HashMap<u64, File>,
    next_handle: u64,
}

struct SlowFs {
    delay: Duration,
    inodes: Mutex<Inodes>,
    requests: Arc<AtomicU64>,
}

fn errno(e: &std::io::Error) -> Errno {
    Errno::from_i32(e.raw_os_error().unwrap_or(nix::errno::Errno::EIO as i32))
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::new(secs as u64, nsecs.clamp(0, 999_999_999) as u32)
    } else {
        UNIX_EPOCH
    }
}

fn kind_of(m: &std::fs::Metadata) -> FileType {
    let t = m.file_type();
    if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    }
}

fn attr(ino: u64, m: &std::fs::Metadata) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: m.size(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind: kind_of(m),
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: 0,
        blksize: 4096,
        flags: 0,
    }
}

impl SlowFs {
    /// Counts the request and waits the delay (the daemon serves one request at a time).
    fn serve(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        std::thread::sleep(self.delay);
    }

    fn inodes(&self) -> std::sync::MutexGuard<'_, Inodes> {
        self.inodes.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn path(&self, ino: INodeNo) -> Option<PathBuf> {
        self.inodes().paths.get(usize::try_from(ino.0.checked_sub(ROOT)?).ok()?).cloned()
    }

    fn inode_of(&self, path: PathBuf) -> u64 {
        let mut inodes = self.inodes();
        if let Some(&ino) = inodes.by_path.get(&path) {
            return ino;
        }
        inodes.paths.push(path.clone());
        let ino = inodes.paths.len() as u64 - 1 + ROOT;
        inodes.by_path.insert(path, ino);
        ino
    }
}

impl Filesystem for SlowFs {
    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        self.serve();
        let Some(dir) = self.path(parent) else { return reply.error(Errno::ENOENT) };
        let path = dir.join(name);
        match std::fs::symlink_metadata(&path) {
            Ok(m) => {
                let ino = self.inode_of(path);
                reply.entry(&TTL, &attr(ino, &m), fuser::Generation(0));
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        self.serve();
        let Some(path) = self.path(ino) else { return reply.error(Errno::ENOENT) };
        match std::fs::symlink_metadata(&path) {
            Ok(m) => reply.attr(&TTL, &attr(ino.0, &m)),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        self.serve();
        let Some(path) = self.path(ino) else { return reply.error(Errno::ENOENT) };
        match std::fs::read_link(&path) {
            Ok(target) => reply.data(target.as_os_str().as_bytes()),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        self.serve();
        let Some(path) = self.path(ino) else { return reply.error(Errno::ENOENT) };
        match File::open(&path) {
            Ok(file) => {
                let mut inodes = self.inodes();
                inodes.next_handle += 1;
                let handle = inodes.next_handle;
                inodes.open_files.insert(handle, file);
                reply.opened(FileHandle(handle), FopenFlags::empty());
            }
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        self.serve();
        let mut data = vec![0u8; size as usize];
        let read = match self.inodes().open_files.get(&fh.0) {
            Some(file) => file.read_at(&mut data, offset),
            None => return reply.error(Errno::EBADF),
        };
        match read {
            Ok(n) => reply.data(&data[..n]),
            Err(e) => reply.error(errno(&e)),
        }
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.inodes().open_files.remove(&fh.0);
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        self.serve();
        let Some(dir) = self.path(ino) else { return reply.error(Errno::ENOENT) };
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) => return reply.error(errno(&e)),
        };
        let mut all: Vec<(u64, FileType, std::ffi::OsString)> =
            vec![(ino.0, FileType::Directory, ".".into()), (ino.0, FileType::Directory, "..".into())];
        let mut rest: Vec<_> = entries
            .flatten()
            .map(|e| {
                let kind = e.file_type().map_or(FileType::RegularFile, |t| {
                    if t.is_dir() {
                        FileType::Directory
                    } else if t.is_symlink() {
                        FileType::Symlink
                    } else {
                        FileType::RegularFile
                    }
                });
                (self.inode_of(e.path()), kind, e.file_name())
            })
            .collect();
        rest.sort_by(|a, b| a.2.cmp(&b.2));
        all.extend(rest);
        for (i, (ino, kind, name)) in all.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

/// A directory served at a mount point through the slow filesystem; unmounted on drop.
pub struct SlowMount {
    session: Option<BackgroundSession>,
    requests: Arc<AtomicU64>,
    delay: Duration,
    at: PathBuf,
}

impl SlowMount {
    /// Serves `source` (a directory) at `at` (an existing, empty directory), each request
    /// answered after `delay`. Needs root (or a FUSE setup that allows the mount).
    pub fn mount(source: &Path, at: &Path, delay: Duration) -> Result<SlowMount> {
        let source = source
            .canonicalize()
            .map_err(StorageError::io(format!("the directory to serve, {}", source.display())))?;
        if !source.is_dir() {
            return Err(StorageError::NotADirectory(source));
        }
        let requests = Arc::new(AtomicU64::new(0));
        let fs = SlowFs {
            delay,
            inodes: Mutex::new(Inodes { paths: vec![source.clone()], ..Inodes::default() }),
            requests: Arc::clone(&requests),
        };
        fs.inodes().by_path.insert(source.clone(), ROOT);
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::FSName(format!("coldstart-slowfs:{}", source.display())),
            MountOption::Subtype("coldstart-slowfs".into()),
            MountOption::RO,
            MountOption::DefaultPermissions,
        ];
        config.acl = SessionACL::All;
        let session = fuser::spawn_mount(fs, at, &config)
            .map_err(StorageError::io(format!("mounting the slow filesystem at {}", at.display())))?;
        Ok(SlowMount { session: Some(session), requests, delay, at: at.to_owned() })
    }

    /// Requests served so far and the delay they were given.
    pub fn stats(&self) -> SlowStats {
        let requests = self.requests.load(Ordering::Relaxed);
        SlowStats { requests, delay_ns: requests.saturating_mul(self.delay.as_nanos() as u64) }
    }

    /// Where it is mounted.
    pub fn at(&self) -> &Path {
        &self.at
    }
}

impl Drop for SlowMount {
    fn drop(&mut self) {
        if let Some(session) = self.session.take() {
            let _ = session.umount_and_join();
        }
    }
}
