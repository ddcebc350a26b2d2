//! Replays of plans over private temporary files: exactly the planned ranges
//! become resident (mincore), the memory budget holds, changed files are skipped
//! and reported, and every range is accounted for once.
//!
//! Residency is checked with mincore on files the test owns (truthful for the
//! owner, root or not). Another engineer's `drop_caches` between a replay and its
//! check would evict pages, so positive checks are retried a few times.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use coldstart_prefetch::plan::{
    FORMAT, PlanDirectory, PlanFile, PlanFileKind, PlanRange, PlanSettings, PlanSource, PlanStats, VERSION,
};
use coldstart_prefetch::replay::{CpuClass, Fill};
use coldstart_prefetch::{Method, Plan, ReplayOptions, ReplayReport, order, replay};

const PAGE: u64 = 4096;

fn write_file(path: &Path, pages: u64) {
    let mut f = File::create(path).unwrap();
    let block: Vec<u8> = (0..PAGE).map(|i| (i % 251) as u8).collect();
    for _ in 0..pages {
        f.write_all(&block).unwrap();
    }
    f.sync_all().unwrap();
}

fn evict(path: &Path) {
    let f = File::open(path).unwrap();
    for _ in 0..2 {
        // SAFETY: posix_fadvise on an open descriptor takes only integers.
        assert_eq!(unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) }, 0);
    }
}

/// Page-by-page residency of a file (mincore on a mapping of it).
fn resident(path: &Path) -> Vec<bool> {
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    // SAFETY: a private read-only mapping of an open file, unmapped before returning.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED);
        let mut vec = vec![0u8; len.div_ceil(PAGE as usize)];
        assert_eq!(libc::mincore(addr, len, vec.as_mut_ptr()), 0);
        libc::munmap(addr, len);
        vec.iter().map(|b| b & 1 == 1).collect()
    }
}

fn plan_file(path: &Path, ranges: &[(u64, u64)]) -> PlanFile {
    let ranges = ranges
        .iter()
        .enumerate()
        .map(|(i, &(start, pages))| PlanRange {
            offset: start * PAGE,
            length: pages * PAGE,
            first_need_ns: i as i64,
            disk: None,
            physical: None,
        })
        .collect();
    PlanFile::regular_now(path, ranges).unwrap()
}

fn make_plan(files: Vec<PlanFile>) -> Arc<Plan> {
    let settings = PlanSettings::default();
    let steps = order::steps(&files, &[], settings.order, settings.blend_window_ns);
    Arc::new(Plan {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        source: PlanSource { page_size: PAGE as u32, ..PlanSource::default() },
        settings,
        files,
        directories: Vec::new(),
        steps,
        stats: PlanStats::default(),
        notes: Vec::new(),
    })
}

fn expected(pages: u64, ranges: &[(u64, u64)]) -> Vec<bool> {
    (0..pages).map(|p| ranges.iter().any(|&(s, n)| p >= s && p < s + n)).collect()
}

fn check_accounting(r: &ReplayReport) {
    assert_eq!(r.accounted(), r.planned, "{r:#?}");
}

/// Replays and returns the report once the residency matches (at most 3 tries).
fn replay_until_exact(
    path: &Path,
    pages: u64,
    ranges: &[(u64, u64)],
    options: &ReplayOptions,
) -> ReplayReport {
    let mut last = None;
    for _ in 0..3 {
        evict(path);
        assert!(resident(path).iter().all(|r| !r), "eviction left pages of our own file resident");
        let report = replay(make_plan(vec![plan_file(path, ranges)]), options).unwrap();
        check_accounting(&report);
        let want = expected(pages, ranges);
        // WILLNEED is asynchronous: give the kernel a moment to finish the reads.
        for _ in 0..200 {
            if resident(path) == want {
                return report;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        last = Some(resident(path));
    }
    panic!("resident pages {:?} are not the planned {:?}", last, expected(pages, ranges));
}

#[test]
fn replay_makes_exactly_the_planned_ranges_resident() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 64);
    let ranges = [(2, 3), (20, 1), (40, 8), (63, 1)];
    for method in [Method::Read, Method::Willneed] {
        let options = ReplayOptions { method, depth: 3, fill: Fill::Exact, ..ReplayOptions::default() };
        let r = replay_until_exact(&path, 64, &ranges, &options);
        assert_eq!((r.planned.ranges, r.planned.bytes), (4, 13 * PAGE));
        assert_eq!((r.fetched.ranges, r.fetched.bytes), (4, 13 * PAGE), "{method:?}");
        assert_eq!(r.files_opened, 1);
    }
}

#[test]
fn ranges_already_resident_are_not_fetched_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 32);
    let ranges = [(0, 4), (10, 4)];
    let exact = ReplayOptions { fill: Fill::Exact, ..ReplayOptions::default() };
    replay_until_exact(&path, 32, &ranges, &exact);
    let again = replay(make_plan(vec![plan_file(&path, &ranges)]), &exact).unwrap();
    check_accounting(&again);
    if again.resident.ranges == 2 {
        assert_eq!((again.resident.bytes, again.fetched.bytes), (8 * PAGE, 0));
    } else {
        eprintln!("skipping the second check: something evicted the pages in between ({again:?})");
    }
}

#[test]
fn the_memory_budget_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 256);
    let ranges = [(0, 64), (64, 64), (128, 64), (192, 64)];
    evict(&path);
    let options = ReplayOptions { max_memory: Some(150 * PAGE), depth: 1, ..ReplayOptions::default() };
    let r = replay(make_plan(vec![plan_file(&path, &ranges)]), &options).unwrap();
    check_accounting(&r);
    assert_eq!(r.budget_bytes, 150 * PAGE);
    assert_eq!((r.fetched.ranges, r.fetched.bytes), (2, 128 * PAGE), "{r:#?}");
    assert_eq!((r.over_budget.ranges, r.over_budget.bytes), (2, 128 * PAGE));
    assert_eq!(r.sequential.ranges, 0, "read sequentially though its readahead could overrun the budget");
    let now = resident(&path);
    assert!(now.iter().filter(|&&x| x).count() as u64 <= 150, "more than the budget became resident");
    assert!(now[128..].iter().all(|r| !r), "a range over the budget was read");
}

#[test]
fn a_share_of_mem_available_bounds_the_budget_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 4);
    let options =
        ReplayOptions { max_memory: Some(u64::MAX / 2), memory_share: 0.5, ..ReplayOptions::default() };
    let r = replay(make_plan(vec![plan_file(&path, &[(0, 4)])]), &options).unwrap();
    let available = coldstart_prefetch::replay::mem_available().unwrap();
    assert!(
        r.budget_bytes <= available / 2 + available / 10,
        "{} vs MemAvailable {available}",
        r.budget_bytes
    );
    assert!(r.budget.contains("MemAvailable"), "{}", r.budget);
}

#[test]
fn changed_replaced_and_missing_files_are_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let [same, grown, touched, replaced, gone] =
        ["same", "grown", "touched", "replaced", "gone"].map(|n| dir.path().join(n));
    for p in [&same, &grown, &touched, &replaced, &gone] {
        write_file(p, 8);
    }
    let files: Vec<PlanFile> =
        [&same, &grown, &touched, &replaced, &gone].iter().map(|p| plan_file(p, &[(0, 8)])).collect();
    let plan = make_plan(files);

    let mut appended = std::fs::OpenOptions::new().append(true).open(&grown).unwrap();
    appended.write_all(b"more").unwrap();
    appended.sync_all().unwrap();
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    File::options().write(true).open(&touched).unwrap().set_modified(later).unwrap();
    let other = dir.path().join("other");
    write_file(&other, 8);
    std::fs::rename(&other, &replaced).unwrap();
    std::fs::remove_file(&gone).unwrap();
    for p in [&same, &grown, &touched, &replaced] {
        evict(p);
    }

    let r = replay(plan, &ReplayOptions::default()).unwrap();
    check_accounting(&r);
    assert_eq!((r.stale_files, r.stale.ranges, r.stale.bytes), (3, 3, 24 * PAGE), "{r:#?}");
    assert_eq!((r.missing_files, r.missing.bytes), (1, 8 * PAGE));
    assert_eq!(r.fetched.bytes + r.resident.bytes, 8 * PAGE);
    for p in [&grown, &touched, &replaced] {
        assert!(resident(p).iter().all(|x| !x), "{} was read although it changed", p.display());
    }
    let problems = r.problems.join("\n");
    for want in [
        "grown: size changed (32768 → 32772 bytes)",
        "touched: modified since",
        "replaced: replaced",
        "gone: gone",
    ] {
        assert!(problems.contains(want), "no {want:?} in\n{problems}");
    }
}

#[test]
fn a_planned_file_replaced_by_a_fifo_is_skipped_without_opening_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 4);
    let plan = make_plan(vec![plan_file(&path, &[(0, 4)])]);
    std::fs::remove_file(&path).unwrap();
    let fifo = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done.send(replay(plan, &ReplayOptions::default()));
    });
    let r = finished
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("the replay blocked on a FIFO named in the plan")
        .unwrap();
    check_accounting(&r);
    assert_eq!((r.stale_files, r.stale.bytes, r.fetched.bytes), (1, 4 * PAGE, 0), "{r:#?}");
    assert!(r.problems[0].contains("no longer a regular file"), "{:?}", r.problems);
}

#[test]
fn a_regular_file_planned_as_a_block_device_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disk");
    write_file(&path, 4);
    evict(&path);
    let mut f = plan_file(&path, &[(0, 4)]);
    f.kind = PlanFileKind::BlockDevice;
    let r = replay(make_plan(vec![f.clone()]), &ReplayOptions::default()).unwrap();
    check_accounting(&r);
    assert_eq!(r.stale_files, 1);
    assert!(r.problems[0].contains("no longer a block device"), "{:?}", r.problems);
    let off =
        replay(make_plan(vec![f]), &ReplayOptions { metadata: false, ..ReplayOptions::default() }).unwrap();
    assert_eq!(off.planned.ranges, 0, "metadata replay turned off still planned {off:?}");
}

#[test]
fn a_cancelled_replay_accounts_for_every_range() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    for i in 0..40 {
        let path = dir.path().join(format!("f{i}"));
        write_file(&path, 16);
        evict(&path);
        files.push(plan_file(&path, &[(0, 4), (8, 4)]));
    }
    let running = coldstart_prefetch::Replay::start(
        make_plan(files),
        &ReplayOptions { depth: 1, alongside_depth: 1, ..ReplayOptions::default() },
    )
    .unwrap();
    running.cancel();
    let r = running.join();
    check_accounting(&r);
    assert_eq!(r.planned.ranges, 80);
    assert_eq!(r.cancelled, r.not_reached.ranges > 0);
}

#[test]
fn a_replay_alongside_uses_its_own_thread_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f");
    write_file(&path, 8);
    let options = ReplayOptions {
        depth: 5,
        alongside_depth: 2,
        fill: Fill::Sequential,
        alongside_cpu: CpuClass::Idle,
        ..ReplayOptions::default()
    };
    let waited = replay(make_plan(vec![plan_file(&path, &[(0, 8)])]), &options).unwrap();
    assert_eq!(
        waited.options.as_ref().map(|o| (o.depth, o.fill, o.cpu)),
        Some((5, Fill::Sequential, CpuClass::Normal))
    );
    let alongside = coldstart_prefetch::Replay::start(make_plan(vec![plan_file(&path, &[(0, 8)])]), &options)
        .unwrap()
        .join();
    assert_eq!(
        alongside.options.as_ref().map(|o| (o.depth, o.fill, o.cpu)),
        Some((2, Fill::Exact, CpuClass::Idle))
    );
    check_accounting(&alongside);
    assert_eq!(alongside.planned.ranges, 1);
}

#[test]
fn replays_default_to_fewer_threads_alongside_and_exact_fills() {
    let d = ReplayOptions::default();
    assert_eq!((d.depth, d.alongside_depth), (16, 4));
    assert_eq!((d.fill, d.alongside_fill), (Fill::Exact, Fill::Exact));
    assert_eq!((d.cpu, d.alongside_cpu), (CpuClass::Normal, CpuClass::Normal));
}

#[test]
fn a_sequential_fill_reads_sequentially_and_makes_the_planned_ranges_resident() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 1024);
    let ranges = [(0, 16), (300, 40), (700, 200)];
    let want = expected(1024, &ranges);
    for _ in 0..3 {
        evict(&path);
        let options = ReplayOptions { fill: Fill::Sequential, ..ReplayOptions::default() };
        let r = replay(make_plan(vec![plan_file(&path, &ranges)]), &options).unwrap();
        check_accounting(&r);
        if r.fetched.ranges < 3 {
            eprintln!("retrying: something else brought pages in ({r:?})");
            continue;
        }
        assert_eq!((r.fetched.ranges, r.fetched.bytes), (3, 256 * PAGE), "{r:#?}");
        assert_eq!(r.sequential, r.fetched, "ranges not read sequentially: {r:#?}");
        assert!(r.read_ahead_beyond < 1024 * PAGE, "{r:#?}");
        let now = resident(&path);
        let missing = (0..1024).filter(|&i| want[i] && !now[i]).count();
        if missing == 0 {
            return;
        }
        eprintln!("retrying: {missing} planned pages not resident (evicted by someone else?)");
    }
    panic!("the planned ranges did not become resident in 3 tries");
}

/// Pages of `path` (all resident) that belong to folios larger than a page
/// (/proc/self/pagemap for the frames, /proc/kpageflags COMPOUND_HEAD/TAIL); `None`
/// when the kernel will not say (not root).
fn pages_in_large_folios(path: &Path) -> Option<usize> {
    use std::io::{Read, Seek, SeekFrom};
    let f = File::open(path).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let pages = len / PAGE as usize;
    let mut pagemap = File::open("/proc/self/pagemap").ok()?;
    let mut flags = File::open("/proc/kpageflags").ok()?;
    // SAFETY: a shared read-only mapping of an open file, read page by page, unmapped before returning.
    unsafe {
        let addr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, f.as_raw_fd(), 0);
        assert_ne!(addr, libc::MAP_FAILED);
        for i in 0..pages {
            std::ptr::read_volatile((addr as *const u8).add(i * PAGE as usize));
        }
        let mut entries = vec![0u8; pages * 8];
        let read = pagemap
            .seek(SeekFrom::Start(addr as u64 / PAGE * 8))
            .and_then(|_| pagemap.read_exact(&mut entries));
        libc::munmap(addr, len);
        read.ok()?;
        let mut large = 0;
        for e in entries.chunks_exact(8) {
            let e = u64::from_le_bytes(e.try_into().unwrap());
            let pfn = e & ((1 << 55) - 1);
            if e >> 63 == 0 || pfn == 0 {
                return None;
            }
            let mut word = [0u8; 8];
            flags.seek(SeekFrom::Start(pfn * 8)).ok()?;
            flags.read_exact(&mut word).ok()?;
            let bits = u64::from_le_bytes(word);
            if bits & (1 << 15 | 1 << 16) != 0 {
                large += 1;
            }
        }
        Some(large)
    }
}

#[test]
fn a_sequential_fill_makes_large_folios_where_an_exact_one_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data");
    write_file(&path, 2048);
    let whole = [(0, 2048)];
    let mut seen = Vec::new();
    for fill in [Fill::Exact, Fill::Sequential] {
        evict(&path);
        let r = replay(
            make_plan(vec![plan_file(&path, &whole)]),
            &ReplayOptions { fill, ..ReplayOptions::default() },
        )
        .unwrap();
        check_accounting(&r);
        let Some(large) = pages_in_large_folios(&path) else {
            coldstart_testkit::unavailable("large folio check", "page frames not readable here (needs root)");
            return;
        };
        seen.push((fill, large, r.sequential.ranges));
    }
    assert_eq!(seen[0].1, 0, "FADV_RANDOM reads made large folios: {seen:?}");
    assert_eq!(seen[1].2, 1, "{seen:?}");
    assert!(seen[1].1 >= 1024, "sequential reads left most of 2048 pages in small folios: {seen:?}");
}

#[test]
fn listed_directories_are_warmed_and_with_stat_entries_every_entry_is_looked_up() {
    let dir = tempfile::tempdir().unwrap();
    let listed = dir.path().join("listed");
    std::fs::create_dir(&listed).unwrap();
    for name in ["a.py", "a.pyc", "b.py", "sub"] {
        if name == "sub" {
            std::fs::create_dir(listed.join(name)).unwrap();
        } else {
            std::fs::write(listed.join(name), b"x").unwrap();
        }
    }
    let directories = vec![
        PlanDirectory { path: dir.path().to_string_lossy().into(), list: false, first_need_ns: 0 },
        PlanDirectory { path: listed.to_string_lossy().into(), list: true, first_need_ns: 0 },
        PlanDirectory {
            path: dir.path().join("gone").to_string_lossy().into(),
            list: true,
            first_need_ns: 0,
        },
    ];
    let settings = PlanSettings::default();
    let steps = order::steps(&[], &directories, settings.order, settings.blend_window_ns);
    let plan = Arc::new(Plan { directories, steps, ..(*make_plan(Vec::new())).clone() });

    let r = replay(Arc::clone(&plan), &ReplayOptions::default()).unwrap();
    assert_eq!((r.directories, r.directories_failed, r.entries_looked_up), (2, 1, 0));
    let options = ReplayOptions { stat_entries: true, ..ReplayOptions::default() };
    let r = replay(Arc::clone(&plan), &options).unwrap();
    assert_eq!((r.directories, r.directories_failed, r.entries_looked_up), (2, 1, 4), "{r:#?}");
    let options = ReplayOptions { stat_entries: true, directories: false, ..ReplayOptions::default() };
    let r = replay(plan, &options).unwrap();
    assert_eq!((r.directories, r.entries_looked_up), (0, 0));
}
