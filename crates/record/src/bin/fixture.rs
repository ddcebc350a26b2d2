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
use std::os::unix::fs::FileExt;
use std::path::Path;

use coldstart_record::sys::{Mapping, fork_child};
use nix::fcntl::{PosixFadviseAdvice as Fadvice, posix_fadvise};
use nix::sys::mman::MmapAdvise;
use nix::unistd::{SysconfVar, sysconf};

const PAGES: [(&str, usize); 5] = [("a.bin", 64), ("b.bin", 64), ("c.bin", 16), ("d.bin", 8), ("e.bin", 8)];

fn page_size() -> usize {
    sysconf(SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096) as usize
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
    let mapping = Mapping::new(file, len).unwrap_or_else(|_| die("mmap for mincore"));
    mapping.resident_pages(page_size()).unwrap_or_else(|_| die("mincore"))
}

fn evict(file: &File, len: usize) {
    for _ in 0..50 {
        let _ = posix_fadvise(file, 0, 0, Fadvice::POSIX_FADV_DONTNEED);
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

fn read_pages(path: &Path, first: usize, count: usize, advice: Fadvice) {
    let file = File::open(path).unwrap_or_else(|_| die("open for reading"));
    let ps = page_size();
    let mut buf = vec![0u8; count * ps];
    let _ = posix_fadvise(&file, 0, 0, advice);
    if file.read_at(&mut buf, (first * ps) as u64).ok() != Some(buf.len()) {
        die("short pread");
    }
}

fn touch_pages(path: &Path, len: usize, pages: &[usize], advice: MmapAdvise) {
    let file = File::open(path).unwrap_or_else(|_| die("open for mapping"));
    let mapping = Mapping::new(&file, len).unwrap_or_else(|_| die("mmap"));
    let _ = mapping.advise(advice);
    for &p in pages {
        mapping.touch(p * page_size());
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
    read_pages(&dir.join("a.bin"), 3, 5, Fadvice::POSIX_FADV_RANDOM);
    read_pages(&dir.join("a.bin"), 20, 2, Fadvice::POSIX_FADV_RANDOM);
    touch_pages(&dir.join("b.bin"), 64 * ps, &[1, 10, 40], MmapAdvise::MADV_RANDOM);
    read_pages(&dir.join("d.bin"), 0, 1, Fadvice::POSIX_FADV_NORMAL);
    touch_pages(&dir.join("e.bin"), 8 * ps, &[5], MmapAdvise::MADV_NORMAL);
    let gone = dir.join("gone.bin");
    write_evicted(&gone, 4);
    read_pages(&gone, 0, 1, Fadvice::POSIX_FADV_RANDOM);
    std::fs::remove_file(&gone).unwrap_or_else(|_| die("unlink"));

    let (read_end, write_end) = nix::unistd::pipe().unwrap_or_else(|_| die("pipe"));
    let child = fork_child(|| {
        let _ = fork_child(|| {
            read_pages(&dir.join("c.bin"), 0, 4, Fadvice::POSIX_FADV_RANDOM);
            let _ = File::from(write_end.try_clone().unwrap_or_else(|_| die("dup")))
                .write_all(format!("{}\n", std::process::id()).as_bytes());
        });
    })
    .unwrap_or_else(|_| die("fork"));
    drop(write_end);
    let _ = nix::sys::wait::waitpid(child, None);
    let mut out = String::new();
    let _ = std::io::Read::read_to_string(&mut File::from(read_end), &mut out);
    let grandchild = out.trim().to_owned();
    let pids =
        format!("pid {}\nchild {child}\ngrandchild {grandchild}\npage_size {ps}\n", std::process::id());
    std::fs::write(dir.join("pids.txt"), pids).unwrap_or_else(|_| die("pids.txt"));
    mark("done");
    std::process::exit(7);
}
