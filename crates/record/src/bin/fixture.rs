//! The recorder's test fixture: a program whose page-cache activity is known
//! exactly. Given a directory, it writes five files, evicts them, marks
//! `evicted`, reads pages 3–7 and 20–21 of `a.bin` with pread, touches pages 1, 10
//! and 40 of `b.bin` through a mapping, reads page 0 of `d.bin` with pread and
//! touches page 5 of `e.bin` through a mapping, creates `gone.bin`, reads its page
//! 0 and deletes it, has a double-forked grandchild read pages 0–3 of `c.bin`, marks
//! `done`, writes the pids to `pids.txt` and exits
//! with 7. After `evicted` it also writes `fixture-marker` to
//! `$COLDSTART_TRACE_MARKER`.
//! Readahead is off for `a.bin`, `b.bin` and `c.bin` (FADV_RANDOM, MADV_RANDOM), so
//! the pages read there are exactly the pages asked for; `d.bin` and `e.bin` (8
//! pages each) keep the default advice, so the kernel reads ahead: after page 0 of
//! `d.bin` its initial read window (4 pages when `read_ahead_kb` ≥ 128), around
//! page 5 of `e.bin` the whole file (when `read_ahead_kb` ≥ 40).

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::Path;

const PAGES: [(&str, usize); 5] = [("a.bin", 64), ("b.bin", 64), ("c.bin", 16), ("d.bin", 8), ("e.bin", 8)];

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

fn die(what: &str) -> ! {
    eprintln!("fixture: {what}: {}", std::io::Error::last_os_error());
    std::process::exit(99)
}

fn mark(name: &str) {
    if let Ok(path) = std::env::var(coldstart_launch::MARKS_ENV) {
        let pid = std::process::id() as i32;
        coldstart_launch::marks::append(Path::new(&path), name, Some(pid)).unwrap_or_else(|_| die("mark"));
    }
}

fn resident_pages(file: &File, len: usize) -> usize {
    // SAFETY: a private read-only mapping of an open file, unmapped below.
    unsafe {
        let addr =
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
        if addr == libc::MAP_FAILED {
            die("mmap for mincore");
        }
        let mut vec = vec![0u8; len.div_ceil(page_size())];
        if libc::mincore(addr, len, vec.as_mut_ptr()) != 0 {
            die("mincore");
        }
        libc::munmap(addr, len);
        vec.iter().filter(|&&b| b & 1 != 0).count()
    }
}

fn evict(file: &File, len: usize) {
    for _ in 0..50 {
        // SAFETY: fadvise on an open fd.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        if resident_pages(file, len) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    die("pages stay resident after POSIX_FADV_DONTNEED");
}

/// Writes `pages` pages to `path`, syncs them and evicts them from the cache.
fn write_evicted(path: &Path, pages: usize) {
    let ps = page_size();
    let mut f = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .unwrap_or_else(|_| die("create"));
    let first = path.file_name().map_or(0, |n| n.as_encoded_bytes()[0]);
    let content: Vec<u8> = (0..pages * ps).map(|i| (i / ps) as u8 ^ first).collect();
    f.write_all(&content).unwrap_or_else(|_| die("write"));
    f.sync_all().unwrap_or_else(|_| die("fsync"));
    evict(&f, pages * ps);
}

fn read_pages(path: &Path, first: usize, count: usize, advice: libc::c_int) {
    let file = File::open(path).unwrap_or_else(|_| die("open for reading"));
    let ps = page_size();
    let mut buf = vec![0u8; count * ps];
    // SAFETY: fadvise and pread on an open fd into a buffer of the right size.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, advice);
        let n =
            libc::pread(file.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), (first * ps) as libc::off_t);
        if n != buf.len() as isize {
            die("short pread");
        }
    }
}

fn touch_pages(path: &Path, len: usize, pages: &[usize], advice: libc::c_int) {
    let file = File::open(path).unwrap_or_else(|_| die("open for mapping"));
    // SAFETY: a read-only mapping of `len` bytes; only bytes inside it are read.
    unsafe {
        let addr =
            libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
        if addr == libc::MAP_FAILED {
            die("mmap");
        }
        libc::madvise(addr, len, advice);
        for &p in pages {
            std::ptr::read_volatile(addr.cast::<u8>().add(p * page_size()));
        }
        libc::munmap(addr, len);
    }
}

fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: coldstart-record-fixture DIR");
        std::process::exit(2)
    });
    let dir = Path::new(&dir);
    let ps = page_size();
    for (name, pages) in PAGES {
        write_evicted(&dir.join(name), pages);
    }
    // Created now so that it cannot take the inode number of gone.bin (deleted below):
    // the trace names files by (device, inode).
    File::create(dir.join("pids.txt")).unwrap_or_else(|_| die("pids.txt"));
    mark("evicted");
    if let Ok(marker) = std::env::var("COLDSTART_TRACE_MARKER") {
        std::fs::write(marker, "fixture-marker").unwrap_or_else(|_| die("trace_marker"));
    }
    read_pages(&dir.join("a.bin"), 3, 5, libc::POSIX_FADV_RANDOM);
    read_pages(&dir.join("a.bin"), 20, 2, libc::POSIX_FADV_RANDOM);
    touch_pages(&dir.join("b.bin"), 64 * ps, &[1, 10, 40], libc::MADV_RANDOM);
    read_pages(&dir.join("d.bin"), 0, 1, libc::POSIX_FADV_NORMAL);
    touch_pages(&dir.join("e.bin"), 8 * ps, &[5], libc::MADV_NORMAL);
    let gone = dir.join("gone.bin");
    write_evicted(&gone, 4);
    read_pages(&gone, 0, 1, libc::POSIX_FADV_RANDOM);
    std::fs::remove_file(&gone).unwrap_or_else(|_| die("unlink"));

    let mut fds = [0; 2];
    // SAFETY: pipe, fork and _exit in a single-threaded program.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            die("pipe");
        }
        let (read_end, write_end) = (fds[0], fds[1]);
        let child = libc::fork();
        if child == 0 {
            if libc::fork() == 0 {
                libc::close(read_end);
                read_pages(&dir.join("c.bin"), 0, 4, libc::POSIX_FADV_RANDOM);
                let me = format!("{}\n", libc::getpid());
                libc::write(write_end, me.as_ptr().cast(), me.len());
                libc::_exit(0);
            }
            libc::_exit(0);
        }
        libc::close(write_end);
        let mut status = 0;
        libc::waitpid(child, &mut status, 0);
        let mut out = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let n = libc::read(read_end, buf.as_mut_ptr().cast(), buf.len());
            if n <= 0 {
                break;
            }
            out.extend_from_slice(&buf[..n as usize]);
        }
        let grandchild = String::from_utf8_lossy(&out).trim().to_owned();
        let pids =
            format!("pid {}\nchild {child}\ngrandchild {grandchild}\npage_size {ps}\n", libc::getpid());
        std::fs::write(dir.join("pids.txt"), pids).unwrap_or_else(|_| die("pids.txt"));
    }
    mark("done");
    std::process::exit(7);
}
