//! The recorder's raw system calls: the only `unsafe` code of the crate, on nix (and its
//! re-exported libc bindings for the few calls nix does not wrap). Public only for the
//! crate's own test fixture binary.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::libc;
use nix::sys::mman::{MapFlags, MmapAdvise, ProtFlags, madvise, mmap, munmap};
use nix::unistd::{ForkResult, Pid, fork};

/// A netlink socket of the kernel's connector (`NETLINK_CONNECTOR`, which nix does not name).
pub(crate) fn connector_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let raw = unsafe {
        libc::socket(libc::AF_NETLINK, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, libc::NETLINK_CONNECTOR)
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a fresh, valid fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `_IOWR('f', 11, struct fiemap)`.
const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;

/// The FIEMAP ioctl on `file`, whose request and reply are `words` (a `struct fiemap`
/// header and its extents, 8-byte aligned as the kernel wants them).
pub(crate) fn fiemap(file: &File, words: &mut [u64]) -> io::Result<()> {
    // SAFETY: `words` is 8-aligned and the caller sized it for the extent count it asks for.
    let r = unsafe { libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, words.as_mut_ptr()) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// What the guardian does if the recorder dies: the paths prepared before the fork,
/// since the forked process may not allocate.
pub(crate) struct GuardianPaths {
    pub tracing_on: Vec<CString>,
    pub dirs: Vec<CString>,
}

/// Double-forks the guardian, which waits on `read` (see guardian.rs), and reaps the
/// intermediate child, so the guardian is nobody's child.
pub(crate) fn spawn_guardian(read: &OwnedFd, paths: &GuardianPaths) -> io::Result<()> {
    // SAFETY: the children only make async-signal-safe calls on data built before the fork.
    match unsafe { fork() }? {
        ForkResult::Child => {
            // SAFETY: as above; `_exit` never returns.
            unsafe {
                if libc::fork() == 0 {
                    guard(read.as_raw_fd(), paths);
                }
                libc::_exit(0);
            }
        }
        ForkResult::Parent { child } => {
            let _ = nix::sys::wait::waitpid(child, None);
            Ok(())
        }
    }
}

/// The guardian's whole life. Never returns.
unsafe fn guard(read_fd: RawFd, p: &GuardianPaths) -> ! {
    // SAFETY: async-signal-safe calls only; every pointer comes from a live CString.
    unsafe {
        libc::setsid();
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(sig, libc::SIG_IGN);
        }
        libc::dup2(read_fd, 0);
        let read_fd = 0;
        libc::syscall(libc::SYS_close_range, 1u32, u32::MAX, 0u32);
        let mut byte = 0u8;
        let dismissed = loop {
            let n = libc::read(read_fd, (&mut byte as *mut u8).cast(), 1);
            if n == 1 {
                break byte == b'D';
            }
            if n == 0 || *libc::__errno_location() != libc::EINTR {
                break false;
            }
        };
        if !dismissed {
            for path in &p.tracing_on {
                let fd = libc::open(path.as_ptr(), libc::O_WRONLY);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            for dir in &p.dirs {
                for _ in 0..250 {
                    if libc::rmdir(dir.as_ptr()) == 0 || *libc::__errno_location() == libc::ENOENT {
                        break;
                    }
                    libc::usleep(20_000);
                }
            }
        }
        libc::_exit(0)
    }
}

/// Runs `child` in a forked process, which then exits with status 0; returns its pid.
/// Only for single-threaded programs (the test fixture).
pub fn fork_child(child: impl FnOnce()) -> io::Result<Pid> {
    // SAFETY: the caller is single-threaded, so the child may run any code.
    match unsafe { fork() }? {
        ForkResult::Child => {
            child();
            // SAFETY: ends the child without running the parent's exit handlers twice.
            unsafe { libc::_exit(0) }
        }
        ForkResult::Parent { child } => Ok(child),
    }
}

/// A shared read-only mapping of the first `len` bytes of `file`, unmapped on drop.
pub struct Mapping {
    addr: std::ptr::NonNull<libc::c_void>,
    len: usize,
}

impl Mapping {
    pub fn new(file: &File, len: usize) -> io::Result<Mapping> {
        let length = NonZeroUsize::new(len).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh read-only mapping; nothing else refers to its memory.
        let addr =
            unsafe { mmap(None, length, ProtFlags::PROT_READ, MapFlags::MAP_SHARED, file.as_fd(), 0) }?;
        Ok(Mapping { addr, len })
    }

    pub fn advise(&self, advice: MmapAdvise) -> io::Result<()> {
        // SAFETY: advice on our own mapping, whole.
        Ok(unsafe { madvise(self.addr, self.len, advice) }?)
    }

    /// Reads byte `at` of the mapping (a page fault if its page is not in).
    pub fn touch(&self, at: usize) -> u8 {
        assert!(at < self.len, "byte {at} is past the mapping's {} bytes", self.len);
        // SAFETY: `at` lies inside the mapping, which lives as long as `self`.
        unsafe { std::ptr::read_volatile(self.addr.as_ptr().cast::<u8>().add(at)) }
    }

    /// How many of the mapping's pages are in the page cache (mincore, which nix does not wrap).
    pub fn resident_pages(&self, page_size: usize) -> io::Result<usize> {
        let mut vec = vec![0u8; self.len.div_ceil(page_size)];
        // SAFETY: `vec` has one byte per page of the mapping.
        if unsafe { libc::mincore(self.addr.as_ptr(), self.len, vec.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().filter(|&&b| b & 1 != 0).count())
    }

    /// Whether each page of the mapping is in the page cache (mincore), page by page.
    pub fn resident_map(&self, page_size: usize) -> io::Result<Vec<bool>> {
        let mut vec = vec![0u8; self.len.div_ceil(page_size)];
        // SAFETY: `vec` has one byte per page of the mapping.
        if unsafe { libc::mincore(self.addr.as_ptr(), self.len, vec.as_mut_ptr()) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(vec.iter().map(|&b| b & 1 != 0).collect())
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped; no reference into it outlives `self`.
        let _ = unsafe { munmap(self.addr, self.len) };
    }
}

/// `struct perf_event_attr` as of `PERF_ATTR_SIZE_VER8` (136 bytes): the fields the
/// recorder sets are named, the rest stay zero.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct PerfEventAttr {
    pub kind: u32,
    pub size: u32,
    pub config: u64,
    pub sample_period_or_freq: u64,
    pub sample_type: u64,
    pub read_format: u64,
    pub flags: u64,
    pub wakeup_events_or_watermark: u32,
    pub bp_type: u32,
    pub config1: u64,
    pub config2: u64,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_stack_user: u32,
    pub clockid: i32,
    pub sample_regs_intr: u64,
    pub aux_watermark: u32,
    pub sample_max_stack: u16,
    pub reserved_2: u16,
    pub aux_sample_size: u32,
    pub reserved_3: u32,
    pub sig_data: u64,
}

const PERF_EVENT_IOC_ENABLE: libc::c_ulong = 0x2400;
const PERF_EVENT_IOC_DISABLE: libc::c_ulong = 0x2401;

/// perf_event_open(2) for `pid` (-1: every task) on `cpu`, close-on-exec.
pub(crate) fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr whose `size` says how much the
    // kernel may read; the returned fd is owned at once.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw as RawFd) })
}

/// Turns a perf event on or off.
pub(crate) fn perf_event_enable(fd: &OwnedFd, on: bool) -> io::Result<()> {
    let request = if on { PERF_EVENT_IOC_ENABLE } else { PERF_EVENT_IOC_DISABLE };
    // SAFETY: a perf ioctl without argument on an fd we own.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), request, 0) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Sets a tracepoint event's filter (the tracefs filter language).
pub(crate) fn perf_event_set_filter(fd: &OwnedFd, filter: &str) -> io::Result<()> {
    const PERF_EVENT_IOC_SET_FILTER: libc::c_ulong = 0x4008_2406;
    let text = std::ffi::CString::new(filter).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: a perf ioctl on an fd we own whose argument is a NUL-terminated string that
    // outlives the call.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_FILTER, text.as_ptr()) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Attaches an eBPF program to a perf event (`PERF_EVENT_IOC_SET_BPF`).
pub(crate) fn perf_event_set_bpf(fd: &OwnedFd, prog: &OwnedFd) -> io::Result<()> {
    // SAFETY: a perf ioctl on an fd we own; the argument is an int fd, passed by value.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd()) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// A perf event's mmapped ring buffer: one metadata page, then `data_size` bytes of records.
pub(crate) struct PerfRing {
    base: std::ptr::NonNull<libc::c_void>,
    len: usize,
    data_offset: usize,
    data_size: usize,
}

// SAFETY: the mapping belongs to the ring alone; the kernel is the only other writer and the
// head and tail are accessed with atomics.
unsafe impl Send for PerfRing {}

impl PerfRing {
    /// Maps the ring of `fd` with `data_pages` (a power of two) pages of records.
    pub(crate) fn map(fd: &OwnedFd, data_pages: usize, page_size: usize) -> io::Result<PerfRing> {
        let len = (data_pages + 1) * page_size;
        let length = NonZeroUsize::new(len).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: a fresh shared mapping of the perf fd; only this ring refers to it.
        let base = unsafe {
            mmap(
                None,
                length,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd.as_fd(),
                0,
            )
        }?;
        let mut ring = PerfRing { base, len, data_offset: page_size, data_size: data_pages * page_size };
        // Kernels since 4.1 say where the data lies; older ones leave these 0.
        let (offset, size) = (ring.meta_u64(1040) as usize, ring.meta_u64(1048) as usize);
        if size > 0 && offset + size <= len {
            ring.data_offset = offset;
            ring.data_size = size;
        }
        Ok(ring)
    }

    fn meta_u64(&self, at: usize) -> u64 {
        // SAFETY: `at` is an 8-aligned offset inside the metadata page.
        unsafe { std::ptr::read_volatile(self.base.as_ptr().cast::<u8>().add(at).cast::<u64>()) }
    }

    fn atomic(&self, at: usize) -> &std::sync::atomic::AtomicU64 {
        // SAFETY: `data_head` (1024) and `data_tail` (1032) are 8-aligned u64s of the metadata
        // page, shared with the kernel, which lives as long as `self`.
        unsafe { &*self.base.as_ptr().cast::<u8>().add(at).cast::<std::sync::atomic::AtomicU64>() }
    }

    /// Hands every byte the kernel wrote since the last call to `sink`, in order (one or
    /// two slices where the ring wraps), then frees that space. Returns the bytes handed.
    pub(crate) fn drain(&mut self, mut sink: impl FnMut(&[u8]) -> io::Result<()>) -> io::Result<u64> {
        use std::sync::atomic::Ordering;
        let head = self.atomic(1024).load(Ordering::Acquire);
        let tail = self.atomic(1032).load(Ordering::Relaxed);
        let available = head.wrapping_sub(tail);
        if available == 0 {
            return Ok(0);
        }
        let size = self.data_size as u64;
        let available = available.min(size);
        let start = (tail % size) as usize;
        let first = (available as usize).min(self.data_size - start);
        // SAFETY: both slices lie inside the data area; the kernel does not write the bytes
        // between tail and head until the tail moves past them.
        let data = unsafe {
            std::slice::from_raw_parts(self.base.as_ptr().cast::<u8>().add(self.data_offset), self.data_size)
        };
        sink(&data[start..start + first])?;
        if first < available as usize {
            sink(&data[..available as usize - first])?;
        }
        self.atomic(1032).store(tail.wrapping_add(available), Ordering::Release);
        Ok(available)
    }
}

impl Drop for PerfRing {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no slice into it outlives `drain`.
        let _ = unsafe { munmap(self.base, self.len) };
    }
}

/// `bpf(2)` commands the recorder uses.
#[derive(Clone, Copy, Debug)]
#[repr(i32)]
pub(crate) enum BpfCmd {
    MapCreate = 0,
    MapLookupElem = 1,
    MapUpdateElem = 2,
    MapGetNextKey = 4,
    ProgLoad = 5,
}

/// `bpf(2)` with an attribute block (`union bpf_attr`, laid out by the caller in
/// 8-byte words); a returned fd is owned at once.
pub(crate) fn bpf(cmd: BpfCmd, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-padded 128-byte `union bpf_attr`; the kernel reads (and for
    // lookups writes) only through the pointers the caller put in it, which outlive the call.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd as i32, attr.as_mut_ptr(), std::mem::size_of_val(attr) as u32)
    };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

/// Takes ownership of an fd returned by `bpf(2)` or `perf_event_open(2)`.
pub(crate) fn owned_fd(raw: i64) -> io::Result<OwnedFd> {
    let raw = RawFd::try_from(raw).map_err(|_| io::Error::from(io::ErrorKind::InvalidData))?;
    if raw < 0 {
        return Err(io::Error::from(io::ErrorKind::InvalidData));
    }
    // SAFETY: a fresh fd the kernel just returned, which nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// `_IOW('$', 8, __u32)` and `_IO('$', 0)`.
const PERF_EVENT_IOC_SET_BPF: libc::c_ulong = 0x4004_2408;

/// Attaches a loaded tracepoint program to the tracepoint with tracefs id `tracepoint`:
/// a `PERF_TYPE_TRACEPOINT` event on CPU 0 (the program runs on every CPU: it is
/// attached to the tracepoint, not to the event). The program stays attached while
/// the returned fd is open.
pub(crate) fn attach_tracepoint(tracepoint: u64, prog: &OwnedFd) -> io::Result<OwnedFd> {
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const PERF_ATTR_SIZE_VER0: u32 = 64;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    let mut attr = [0u64; 16];
    attr[0] = u64::from(PERF_TYPE_TRACEPOINT) | (u64::from(PERF_ATTR_SIZE_VER0) << 32);
    attr[1] = tracepoint;
    attr[2] = 1; // sample_period
    // SAFETY: `attr` is a zeroed perf_event_attr of the size it declares; pid -1, cpu 0,
    // no group.
    let raw = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let event = owned_fd(raw)?;
    // SAFETY: ioctls on the event fd just opened; the argument is an int fd, passed by value.
    unsafe {
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_SET_BPF, prog.as_raw_fd()) < 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::ioctl(event.as_raw_fd(), PERF_EVENT_IOC_ENABLE, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(event)
}

/// A BPF ring buffer mapped for reading: the consumer page (written back as records
/// are read) and the producer page followed by the data area mapped twice, so a record
/// that wraps around the end reads as one slice.
pub(crate) struct RingBuffer {
    consumer: std::ptr::NonNull<libc::c_void>,
    producer: std::ptr::NonNull<libc::c_void>,
    page: usize,
    size: usize,
}

// SAFETY: the mappings belong to the ring buffer alone; one thread reads it at a time.
unsafe impl Send for RingBuffer {}

impl RingBuffer {
    /// Maps the ring buffer map `map` of `size` data bytes (a power of two, whole pages).
    pub(crate) fn map(map: &OwnedFd, size: usize) -> io::Result<RingBuffer> {
        let page = nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)?
            .and_then(|p| usize::try_from(p).ok())
            .unwrap_or(4096);
        let one = NonZeroUsize::new(page).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let whole =
            NonZeroUsize::new(page + 2 * size).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: fresh shared mappings of the map's pages, laid out as the kernel documents.
        let consumer = unsafe { mmap(None, one, rw, MapFlags::MAP_SHARED, map.as_fd(), 0) }?;
        // SAFETY: as above; read-only, at the producer page's offset.
        let producer = match unsafe {
            mmap(None, whole, ProtFlags::PROT_READ, MapFlags::MAP_SHARED, map.as_fd(), page as i64)
        } {
            Ok(p) => p,
            Err(e) => {
                // SAFETY: unmaps the consumer page mapped just above.
                let _ = unsafe { munmap(consumer, page) };
                return Err(e.into());
            }
        };
        Ok(RingBuffer { consumer, producer, page, size })
    }

    /// Hands every committed record to `each` (discarded ones skipped) and releases them.
    pub(crate) fn drain(&mut self, mut each: impl FnMut(&[u8])) -> usize {
        use std::sync::atomic::{AtomicU64, Ordering};
        const BUSY: u32 = 1 << 31;
        const DISCARD: u32 = 1 << 30;
        const HEADER: usize = 8;
        // SAFETY: both positions are u64s at the start of their pages, which the kernel
        // updates atomically; the data area is `2 * size` bytes after the producer page.
        let (consumer_pos, producer_pos, data) = unsafe {
            (
                &*self.consumer.as_ptr().cast::<AtomicU64>(),
                &*self.producer.as_ptr().cast::<AtomicU64>(),
                self.producer.as_ptr().cast::<u8>().add(self.page),
            )
        };
        let mut count = 0;
        let mut cons = consumer_pos.load(Ordering::Acquire);
        let mask = (self.size - 1) as u64;
        loop {
            let prod = producer_pos.load(Ordering::Acquire);
            if cons >= prod {
                break;
            }
            let at = (cons & mask) as usize;
            // SAFETY: the header lies in the data area; the kernel publishes its length word
            // atomically (busy until committed).
            let len_word =
                unsafe { &*data.add(at).cast::<std::sync::atomic::AtomicU32>() }.load(Ordering::Acquire);
            if len_word & BUSY != 0 {
                break;
            }
            let len = (len_word & !(BUSY | DISCARD)) as usize;
            if len > self.size {
                break;
            }
            if len_word & DISCARD == 0 {
                // SAFETY: a committed record of `len` bytes, contiguous thanks to the double mapping.
                each(unsafe { std::slice::from_raw_parts(data.add(at + HEADER), len) });
                count += 1;
            }
            cons += ((len + HEADER + 7) & !7) as u64;
            consumer_pos.store(cons, Ordering::Release);
        }
        count
    }
}

impl Drop for RingBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `map` mapped; no slice handed out outlives `drain`.
        unsafe {
            let _ = munmap(self.consumer, self.page);
            let _ = munmap(self.producer, self.page + 2 * self.size);
        }
    }
}
