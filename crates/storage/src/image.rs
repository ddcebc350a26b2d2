//! The FUSE filesystem behind an emulated disk: one file, `disk.img`, kept in memory in
//! sparse chunks (all-zero chunks are never stored), opened with `direct_io` so every
//! read and write of the loop device above it arrives here. Each request is answered by
//! a timer thread when the device's virtual clock says it completes; the FUSE loop only
//! books it and moves on.

use std::collections::{BinaryHeap, HashMap};
use std::ffi::OsStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use fuser::{
    Errno, FileAttr, FileHandle, FileType, Filesystem, FopenFlags, INodeNo, LockOwner, OpenFlags, ReplyAttr,
    ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry, ReplyOpen, ReplyWrite, Request, WriteFlags,
};

use crate::clock::{DeviceClock, Stats};

/// The one file the filesystem serves.
pub const IMAGE_NAME: &str = "disk.img";
const CHUNK: u64 = 64 * 1024;
const IMAGE_INODE: u64 = 2;
const MAX_FUSE_REQUEST: u32 = 1 << 20;
const TTL: Duration = Duration::from_secs(3600);

/// The disk's bytes: chunks of `CHUNK` bytes, absent ones read as zeros.
#[derive(Default)]
struct SparseImage {
    chunks: HashMap<u64, Box<[u8]>>,
}

impl SparseImage {
    fn read(&self, offset: u64, out: &mut [u8]) {
        let mut done = 0usize;
        while done < out.len() {
            let at = offset + done as u64;
            let (index, within) = (at / CHUNK, (at % CHUNK) as usize);
            let n = (CHUNK as usize - within).min(out.len() - done);
            match self.chunks.get(&index) {
                Some(chunk) => out[done..done + n].copy_from_slice(&chunk[within..within + n]),
                None => out[done..done + n].fill(0),
            }
            done += n;
        }
    }

    fn write(&mut self, offset: u64, data: &[u8]) {
        let mut done = 0usize;
        while done < data.len() {
            let at = offset + done as u64;
            let (index, within) = (at / CHUNK, (at % CHUNK) as usize);
            let n = (CHUNK as usize - within).min(data.len() - done);
            let part = &data[done..done + n];
            match self.chunks.get_mut(&index) {
                Some(chunk) => chunk[within..within + n].copy_from_slice(part),
                None if part.iter().all(|&b| b == 0) => {}
                None => {
                    let mut chunk = vec![0u8; CHUNK as usize].into_boxed_slice();
                    chunk[within..within + n].copy_from_slice(part);
                    self.chunks.insert(index, chunk);
                }
            }
            done += n;
        }
    }

    fn stored_bytes(&self) -> u64 {
        self.chunks.len() as u64 * CHUNK
    }
}

/// A reply waiting for its completion time.
enum Completion {
    Read(ReplyData, Vec<u8>),
    Write(ReplyWrite, u32),
}

struct Pending {
    due: Instant,
    sequence: u64,
    completion: Completion,
}

impl PartialEq for Pending {
    fn eq(&self, other: &Self) -> bool {
        (self.due, self.sequence) == (other.due, other.sequence)
    }
}
impl Eq for Pending {}
impl PartialOrd for Pending {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Pending {
    /// Reversed, so the heap's top is the earliest.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (other.due, other.sequence).cmp(&(self.due, self.sequence))
    }
}

#[derive(Default)]
struct Queue {
    pending: BinaryHeap<Pending>,
    sequence: u64,
    stopping: bool,
}

/// What the FUSE loop, the timer thread and the `EmulatedDisk` share.
pub struct Shared {
    image: Mutex<SparseImage>,
    clock: Mutex<DeviceClock>,
    queue: Mutex<Queue>,
    wake: Condvar,
    /// While false (making the filesystem, filling it) requests are answered at once.
    modelled: AtomicBool,
    epoch: Instant,
    size_bytes: u64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Shared {
    pub fn new(clock: DeviceClock, size_bytes: u64) -> Arc<Shared> {
        Arc::new(Shared {
            image: Mutex::new(SparseImage::default()),
            clock: Mutex::new(clock),
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            modelled: AtomicBool::new(false),
            epoch: Instant::now(),
            size_bytes,
        })
    }

    pub fn set_modelled(&self, on: bool) {
        self.modelled.store(on, Ordering::SeqCst);
    }

    pub fn stats(&self) -> Stats {
        lock(&self.clock).stats()
    }

    pub fn params(&self) -> coldstart_analyze::doctor::DiskParams {
        lock(&self.clock).params().clone()
    }

    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    pub fn stored_bytes(&self) -> u64 {
        lock(&self.image).stored_bytes()
    }

    /// A lazily fetched volume restored from its snapshot again: no chunk fetched.
    pub fn restore(&self) {
        lock(&self.clock).restore();
    }

    /// Answers at once, or books the request on the clock and queues its reply.
    fn complete(&self, offset: u64, bytes: u64, completion: Completion) {
        if !self.modelled.load(Ordering::SeqCst) {
            return answer(completion);
        }
        let now = self.epoch.elapsed().as_nanos() as i64;
        let done = match completion {
            Completion::Read(..) => lock(&self.clock).serve(now, offset, bytes),
            Completion::Write(..) => lock(&self.clock).serve_write(now, offset, bytes),
        };
        let due = self.epoch + Duration::from_nanos(done.max(0) as u64);
        let mut queue = lock(&self.queue);
        queue.sequence += 1;
        let sequence = queue.sequence;
        queue.pending.push(Pending { due, sequence, completion });
        drop(queue);
        self.wake.notify_one();
    }

    /// The timer thread: answers each reply at its due time; on stop, answers the rest at once.
    pub(crate) fn spawn_timer(self: &Arc<Shared>) -> std::io::Result<JoinHandle<()>> {
        let shared = Arc::clone(self);
        std::thread::Builder::new().name("storage-timer".into()).spawn(move || {
            crate::sys::make_timely();
            let mut queue = lock(&shared.queue);
            loop {
                let now = Instant::now();
                match queue.pending.peek().map(|p| p.due) {
                    Some(due) if due <= now || queue.stopping => {
                        if let Some(p) = queue.pending.pop() {
                            drop(queue);
                            answer(p.completion);
                            queue = lock(&shared.queue);
                        }
                    }
                    _ if queue.stopping => return,
                    Some(due) => {
                        queue = shared
                            .wake
                            .wait_timeout(queue, due - now)
                            .unwrap_or_else(PoisonError::into_inner)
                            .0
                    }
                    None => queue = shared.wake.wait(queue).unwrap_or_else(PoisonError::into_inner),
                }
            }
        })
    }

    pub fn stop_timer(&self) {
        lock(&self.queue).stopping = true;
        self.wake.notify_all();
    }
}

fn answer(completion: Completion) {
    match completion {
        Completion::Read(reply, data) => reply.data(&data),
        Completion::Write(reply, n) => reply.written(n),
    }
}

/// The FUSE filesystem: a root directory holding `disk.img`.
pub struct ImageFs {
    pub shared: Arc<Shared>,
    created: SystemTime,
}

impl ImageFs {
    pub fn new(shared: Arc<Shared>) -> ImageFs {
        ImageFs { shared, created: SystemTime::now() }
    }

    fn attr(&self, ino: u64) -> Option<FileAttr> {
        let (kind, perm, size, nlink) = match ino {
            1 => (FileType::Directory, 0o700, 0, 2),
            IMAGE_INODE => (FileType::RegularFile, 0o600, self.shared.size_bytes, 1),
            _ => return None,
        };
        Some(FileAttr {
            ino: INodeNo(ino),
            size,
            blocks: size.div_ceil(512),
            atime: self.created,
            mtime: self.created,
            ctime: self.created,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: 0,
            gid: 0,
            rdev: 0,
            blksize: 4096,
            flags: 0,
        })
    }

    /// The part of `[offset, offset + len)` inside the image.
    fn clamp(&self, offset: u64, len: u64) -> u64 {
        len.min(self.shared.size_bytes.saturating_sub(offset))
    }
}

/// Makes the FUSE loop thread that serves a request timely, once per thread, the first time
/// it serves one (fuser starts its threads itself; the mounting thread, which also runs
/// `init`, is left as it is: the commands measured on the disk are its children).
fn timely_loop_thread() {
    thread_local!(static DONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) });
    DONE.with(|done| {
        if !done.replace(true) && nix::unistd::gettid() != nix::unistd::getpid() {
            crate::sys::make_timely();
        }
    });
}

impl Filesystem for ImageFs {
    /// Runs in the thread that mounts (fuser's handshake), before any request: the loop's
    /// threads are made timely by `EmulatedDisk::create` once they exist, never the caller,
    /// whose children (the commands measured on the disk) must run at a normal priority.
    fn init(&mut self, _req: &Request, config: &mut fuser::KernelConfig) -> std::io::Result<()> {
        // Let a request of the loop device through whole (up to FUSE's 256 pages), so the
        // model sees the disk's requests rather than FUSE's pieces of them.
        let _ = config.set_max_write(MAX_FUSE_REQUEST);
        let _ = config.set_max_readahead(MAX_FUSE_REQUEST);
        // Without asynchronous direct I/O the kernel waits for each read of the loop device
        // before it sends the next, so the device sees one request at a time. A lazily fetched
        // volume must see the requests in flight at once, or no two fetches ever overlap.
        if self.shared.params().is_lazy() {
            let _ = config.add_capabilities(fuser::InitFlags::FUSE_ASYNC_DIO);
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match (parent.0, name == IMAGE_NAME, self.attr(IMAGE_INODE)) {
            (1, true, Some(attr)) => reply.entry(&TTL, &attr, fuser::Generation(0)),
            _ => reply.error(Errno::ENOENT),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.attr(ino.0) {
            Some(attr) => reply.attr(&TTL, &attr),
            None => reply.error(Errno::ENOENT),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match ino.0 {
            IMAGE_INODE => reply.opened(FileHandle(0), FopenFlags::FOPEN_DIRECT_IO),
            _ => reply.error(Errno::EISDIR),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        timely_loop_thread();
        if ino.0 != IMAGE_INODE {
            return reply.error(Errno::EISDIR);
        }
        let mut data = vec![0u8; self.clamp(offset, u64::from(size)) as usize];
        lock(&self.shared.image).read(offset, &mut data);
        self.shared.complete(offset, data.len() as u64, Completion::Read(reply, data));
    }

    fn write(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        offset: u64,
        data: &[u8],
        _write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        timely_loop_thread();
        if ino.0 != IMAGE_INODE {
            return reply.error(Errno::EISDIR);
        }
        let n = self.clamp(offset, data.len() as u64) as usize;
        if n < data.len() && n == 0 {
            return reply.error(Errno::ENOSPC);
        }
        lock(&self.shared.image).write(offset, &data[..n]);
        self.shared.complete(offset, n as u64, Completion::Write(reply, n as u32));
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        reply.ok();
    }

    fn fsync(&self, _req: &Request, _ino: INodeNo, _fh: FileHandle, _datasync: bool, reply: ReplyEmpty) {
        reply.ok();
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        if ino.0 != 1 {
            return reply.error(Errno::ENOTDIR);
        }
        let entries = [
            (1, FileType::Directory, "."),
            (1, FileType::Directory, ".."),
            (IMAGE_INODE, FileType::RegularFile, IMAGE_NAME),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
            if reply.add(INodeNo(*ino), (i + 1) as u64, *kind, name) {
                break;
            }
        }
        reply.ok();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sparse_image_stores_only_chunks_that_hold_data() {
        let mut image = SparseImage::default();
        image.write(10 * CHUNK - 3, &[0; 4096]);
        assert_eq!(image.stored_bytes(), 0, "zeros on absent chunks cost nothing");
        image.write(10 * CHUNK - 3, b"abcdef");
        assert_eq!(image.stored_bytes(), 2 * CHUNK, "a write across a chunk boundary");
        let mut out = [9u8; 10];
        image.read(10 * CHUNK - 5, &mut out);
        assert_eq!(&out, b"\0\0abcdef\0\0");
        image.write(10 * CHUNK - 3, &[0; 2]);
        image.read(10 * CHUNK - 3, &mut out[..4]);
        assert_eq!(&out[..4], b"\0\0cd", "zeros over stored data are stored");
    }
}
