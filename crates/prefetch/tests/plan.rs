//! Plans built from synthetic traces: used pages, ranges and gaps, first-need
//! times, ordering, exclusions, directories, metadata, the format's version check.

use std::path::Path;

use coldstart_prefetch::plan::{PlanFileKind, Step, UsedPagesFrom};
use coldstart_prefetch::{Order, Plan, PlanSettings, PrefetchError, build_plan};
use coldstart_trace::{
    AccessKind, Dev, Extent, File, FileKind, FileOpen, Meta, PageAccess, PageFill, PageResident, Process,
    Trace,
};
use proptest::prelude::*;

const MS: i64 = 1_000_000;
const DISK: Dev = Dev::new(254, 0);
const PAGE: u64 = 4096;

/// A trace of one command (pid 10, forked at 1 ms) on a machine with 4 KiB pages.
fn trace() -> Trace {
    Trace {
        meta: Meta {
            page_size: 4096,
            root_pid: Some(10),
            start_unix_ns: 1_700_000_000_000_000_000,
            command: vec!["app".into()],
            ..Meta::default()
        },
        processes: vec![Process { pid: 10, start_ns: Some(MS), in_scope: true, ..Process::default() }],
        ..Trace::default()
    }
}

fn add_file(t: &mut Trace, id: u32, path: &str, pages: u64) {
    t.files.push(File {
        id,
        dev: DISK,
        ino: 1000 + u64::from(id),
        path: Some(path.into()),
        kind: FileKind::Regular,
        size: Some(pages * PAGE),
        mtime_ns: Some(1_600_000_000_000_000_000),
    });
    t.extents.push(Extent {
        file_id: id,
        disk: DISK,
        logical: 0,
        physical: u64::from(id) << 30,
        length: pages * PAGE,
        flags: 0,
    });
}

fn fill(t: &mut Trace, file: u32, index: u64, pages: u32, ms: i64) {
    t.page_fills.push(PageFill {
        t_ns: ms * MS,
        pid: 10,
        tid: 10,
        file_id: file,
        index,
        pages,
        origin: None,
    });
}

fn access(t: &mut Trace, file: u32, kind: AccessKind, index: u64, pages: u32, ms: i64) {
    t.page_accesses.push(PageAccess { t_ns: ms * MS, pid: 10, tid: 10, file_id: file, index, pages, kind });
}

fn plan(t: &Trace, settings: &PlanSettings) -> Plan {
    build_plan(t, "test.coldstart", settings, "test").expect("a plan")
}

/// (offset in pages, length in pages, first need in ms after the command's start) of a file's ranges.
fn ranges(plan: &Plan, path: &str) -> Vec<(u64, u64, i64)> {
    let f = plan.files.iter().find(|f| f.path == path).unwrap_or_else(|| panic!("{path} not planned"));
    f.ranges.iter().map(|r| (r.offset / PAGE, r.length / PAGE, r.first_need_ns / MS)).collect()
}

fn step_paths(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .filter_map(|s| match *s {
            Step::Range { file, range } => {
                Some(format!("{}@{}", plan.files[file].path, plan.files[file].ranges[range].offset / PAGE))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn used_pages_are_reads_faults_and_filled_map_around_pages_not_unused_readahead() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 64);
    // The fault at page 10 filled 8..24 (readahead); only 10 was faulted and 11..13 mapped around.
    fill(&mut t, 1, 8, 16, 5);
    access(&mut t, 1, AccessKind::Fault, 10, 1, 5);
    access(&mut t, 1, AccessKind::MapAround, 11, 2, 5);
    // Mapped around but never filled (already cached, not read by this start): not used.
    access(&mut t, 1, AccessKind::MapAround, 40, 4, 6);
    // A read of pages 0..2 that were cached already: used, counted as used-cached.
    access(&mut t, 1, AccessKind::Read, 0, 2, 3);
    let p = plan(&t, &PlanSettings { max_size_ratio: 0.0, ..PlanSettings::default() });
    assert_eq!(p.source.used_pages_from, UsedPagesFrom::Accesses);
    assert_eq!(ranges(&p, "/lib/a.so"), [(0, 2, 2), (10, 3, 4)]);
    assert_eq!(p.stats.read_bytes, 16 * PAGE);
    assert_eq!(p.stats.used_bytes, 5 * PAGE);
    assert_eq!(p.stats.used_cached_bytes, 2 * PAGE);
    assert_eq!(p.stats.planned_read_bytes, 3 * PAGE);
    assert!(p.notes.is_empty(), "{:?}", p.notes);
}

/// Pages mapped around a fault that no fill brought in are used when the trace found them
/// cached (another process held them: `page_resident`), and left out when it did not.
#[test]
fn map_around_pages_held_cached_by_another_process_are_used() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/held.so", 64);
    access(&mut t, 1, AccessKind::Fault, 20, 1, 5);
    access(&mut t, 1, AccessKind::MapAround, 16, 16, 5);
    access(&mut t, 1, AccessKind::MapAround, 48, 8, 7);
    // Pages 16..28 and 50..52 were found cached; 28..32 and the rest of 48..56 were not.
    t.page_residents.push(PageResident { file_id: 1, index: 16, pages: 12 });
    t.page_residents.push(PageResident { file_id: 1, index: 50, pages: 2 });
    // Cached but outside every window: not used.
    t.page_residents.push(PageResident { file_id: 1, index: 60, pages: 4 });
    let p = plan(&t, &PlanSettings { max_size_ratio: 0.0, ..PlanSettings::default() });
    assert_eq!(ranges(&p, "/lib/held.so"), [(16, 12, 4), (50, 2, 6)]);
    assert_eq!(p.stats.used_bytes, 14 * PAGE);
    assert_eq!(p.stats.used_cached_bytes, 14 * PAGE);
    t.page_residents.clear();
    let p = plan(&t, &PlanSettings { max_size_ratio: 0.0, ..PlanSettings::default() });
    assert_eq!(ranges(&p, "/lib/held.so"), [(20, 1, 4)], "without them only the fault is used");
}

#[test]
fn without_accesses_the_fills_are_used_and_the_plan_says_so() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 64);
    fill(&mut t, 1, 8, 16, 5);
    fill(&mut t, 1, 0, 4, 2);
    let p = plan(&t, &PlanSettings::default());
    assert_eq!(p.source.used_pages_from, UsedPagesFrom::Fills);
    assert_eq!(ranges(&p, "/lib/a.so"), [(0, 4, 1), (8, 16, 4)]);
    assert!(p.notes.iter().any(|n| n.contains("no page accesses")), "{:?}", p.notes);
    let shown = coldstart_prefetch::show::render(&p, Default::default());
    assert!(shown.contains("FALLBACK"), "{shown}");
}

#[test]
fn gaps_are_merged_smallest_first_within_the_size_budget() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 256);
    // Read 0..40 (readahead) but used 0..4, 6..10 (gap 2), 20..24 (gap 10), 200..204 (gap 176).
    fill(&mut t, 1, 0, 40, 2);
    fill(&mut t, 1, 200, 4, 9);
    for (index, ms) in [(0, 2), (6, 3), (20, 4), (200, 9)] {
        access(&mut t, 1, AccessKind::Read, index, 4, ms);
    }
    // read 44 pages, used 16: a ratio of 18/44 leaves 2 pages of budget: only the 2-page gap goes.
    let tight = PlanSettings { max_size_ratio: 18.0 / 44.0, ..PlanSettings::default() };
    assert_eq!(ranges(&plan(&t, &tight), "/lib/a.so"), [(0, 10, 1), (20, 4, 3), (200, 4, 8)]);
    // With room for everything, gaps up to 64 KiB (16 pages) go, the 176-page gap stays.
    let p = plan(&t, &PlanSettings { max_gap_bytes: 16 * PAGE, ..PlanSettings::default() });
    assert_eq!(ranges(&p, "/lib/a.so"), [(0, 24, 1), (200, 4, 8)]);
    assert_eq!(p.stats.gap_bytes, 12 * PAGE);
    assert_eq!(p.stats.planned_bytes, 28 * PAGE);
    assert!(p.stats.planned_bytes <= p.stats.read_bytes);
}

#[test]
fn gaps_are_not_read_through_where_the_file_is_split_on_the_disk() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 64);
    t.extents = vec![
        Extent { file_id: 1, disk: DISK, logical: 0, physical: 1 << 20, length: 8 * PAGE, flags: 0 },
        Extent { file_id: 1, disk: DISK, logical: 8 * PAGE, physical: 9 << 20, length: 56 * PAGE, flags: 0 },
    ];
    fill(&mut t, 1, 0, 32, 2);
    access(&mut t, 1, AccessKind::Read, 0, 4, 2); // extent 1
    access(&mut t, 1, AccessKind::Read, 10, 2, 3); // extent 2: the gap 4..10 crosses extents
    access(&mut t, 1, AccessKind::Read, 14, 2, 4); // gap 12..14 inside extent 2
    let p = plan(&t, &PlanSettings::default());
    assert_eq!(ranges(&p, "/lib/a.so"), [(0, 4, 1), (10, 6, 2)]);
    let f = &p.files[0];
    assert_eq!(f.ranges[1].physical, Some((9 << 20) + 2 * PAGE));
    assert_eq!(f.ranges[1].disk, Some(DISK));
}

#[test]
fn long_ranges_are_split_and_keep_the_time_each_part_was_needed() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/big.so", 1024);
    fill(&mut t, 1, 0, 1024, 2);
    access(&mut t, 1, AccessKind::Read, 0, 512, 2);
    access(&mut t, 1, AccessKind::Read, 512, 512, 51);
    let p = plan(&t, &PlanSettings { max_range_bytes: 256 * PAGE, ..PlanSettings::default() });
    assert_eq!(ranges(&p, "/lib/big.so"), [(0, 256, 1), (256, 256, 1), (512, 256, 50), (768, 256, 50)]);
}

fn ordering_trace() -> Trace {
    let mut t = trace();
    // a: needed first, far on the disk; b: needed last, near; c: in between, nearest.
    add_file(&mut t, 3, "/d/a", 8);
    add_file(&mut t, 2, "/d/b", 8);
    add_file(&mut t, 1, "/e/c", 8);
    fill(&mut t, 3, 0, 4, 2);
    fill(&mut t, 2, 0, 4, 300);
    fill(&mut t, 1, 0, 4, 150);
    fill(&mut t, 3, 6, 2, 160);
    t
}

#[test]
fn order_by_first_need_disk_position_or_a_blend() {
    let t = ordering_trace();
    let first =
        plan(&t, &PlanSettings { order: Order::FirstNeed, max_size_ratio: 0.0, ..PlanSettings::default() });
    assert_eq!(step_paths(&first), ["/d/a@0", "/e/c@0", "/d/a@6", "/d/b@0"]);
    let disk = plan(&t, &PlanSettings { order: Order::Disk, max_size_ratio: 0.0, ..PlanSettings::default() });
    assert_eq!(step_paths(&disk), ["/e/c@0", "/d/b@0", "/d/a@0", "/d/a@6"]);
    // Windows of 100 ms: [a@0] [c, a@6 by disk] [b].
    let blend = PlanSettings {
        order: Order::Blend,
        blend_window_ns: 100 * MS,
        max_size_ratio: 0.0,
        ..PlanSettings::default()
    };
    assert_eq!(step_paths(&plan(&t, &blend)), ["/d/a@0", "/e/c@0", "/d/a@6", "/d/b@0"]);
    let blend = PlanSettings { blend_window_ns: 1000 * MS, ..blend };
    assert_eq!(step_paths(&plan(&t, &blend)), ["/e/c@0", "/d/b@0", "/d/a@0", "/d/a@6"]);
}

#[test]
fn directories_come_before_the_files_below_them() {
    let t = ordering_trace();
    let p = plan(&t, &PlanSettings::default());
    let dirs: Vec<(&str, bool, i64)> =
        p.directories.iter().map(|d| (d.path.as_str(), d.list, d.first_need_ns / MS)).collect();
    assert_eq!(dirs, [("/", false, 1), ("/d", true, 1), ("/e", true, 149)]);
    let position = |want: Step| p.steps.iter().position(|&s| s == want).unwrap();
    let e = p.directories.iter().position(|d| d.path == "/e").unwrap();
    let c = p.files.iter().position(|f| f.path == "/e/c").unwrap();
    assert!(position(Step::Directory(e)) < position(Step::Range { file: c, range: 0 }));
    let disk = plan(&t, &PlanSettings { order: Order::Disk, ..PlanSettings::default() });
    assert!(matches!(disk.steps[..3], [Step::Directory(_), Step::Directory(_), Step::Directory(_)]));
    let blend = plan(&t, &PlanSettings { order: Order::Blend, ..PlanSettings::default() });
    let position = |want: Step| blend.steps.iter().position(|&s| s == want).unwrap();
    assert!(position(Step::Directory(e)) < position(Step::Range { file: c, range: 0 }));
}

#[test]
fn unresolved_written_and_special_files_are_left_out_and_counted() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 8);
    fill(&mut t, 1, 0, 8, 2);
    add_file(&mut t, 2, "/home/u/out.pdf", 8);
    t.files[1].mtime_ns = Some(t.meta.start_unix_ns + 500 * MS);
    fill(&mut t, 2, 0, 8, 3);
    add_file(&mut t, 3, "", 8);
    t.files[2].path = None;
    fill(&mut t, 3, 0, 2, 3);
    let p = plan(&t, &PlanSettings::default());
    assert_eq!(p.files.len(), 1);
    let reasons: Vec<(String, usize, u64)> =
        p.stats.excluded.iter().map(|e| (e.reason.clone(), e.files, e.read_bytes / PAGE)).collect();
    assert_eq!(
        reasons,
        [
            ("modified during the recording (written by the start)".to_owned(), 1, 8),
            ("path unknown (unresolved inode)".to_owned(), 1, 2)
        ]
    );
    assert_eq!(p.stats.read_bytes, 18 * PAGE);
    assert_eq!(p.stats.planned_read_bytes, 8 * PAGE);
}

#[test]
fn opened_files_without_reads_are_only_opened() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 8);
    fill(&mut t, 1, 0, 8, 2);
    add_file(&mut t, 2, "/lib/empty.py", 0);
    t.file_opens.push(FileOpen { t_ns: 4 * MS, pid: 10, file_id: 2, exec: false });
    let p = plan(&t, &PlanSettings::default());
    let f = p.files.iter().position(|f| f.path == "/lib/empty.py").unwrap();
    assert!(p.files[f].ranges.is_empty());
    assert_eq!(p.files[f].first_need_ns, 3 * MS);
    assert!(p.steps.contains(&Step::Open(f)));
    assert_eq!(p.stats.open_only_files, 1);
}

#[test]
fn filesystem_metadata_becomes_block_device_ranges_in_disk_offsets() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 8);
    fill(&mut t, 1, 0, 8, 2);
    t.files.push(File {
        id: 9,
        dev: Dev::new(7, 0),
        ino: 42,
        path: Some("/dev/loop0".into()),
        kind: FileKind::DeviceMetadata,
        size: None,
        mtime_ns: None,
    });
    fill(&mut t, 9, 1000, 1, 1);
    fill(&mut t, 9, 1002, 1, 1);
    fill(&mut t, 9, 5000, 1, 3);
    let p = plan(&t, &PlanSettings { max_size_ratio: 2.0, ..PlanSettings::default() });
    let meta = p.files.iter().find(|f| f.kind == PlanFileKind::BlockDevice).unwrap();
    assert_eq!(
        (meta.path.as_str(), meta.dev, meta.size, meta.mtime_ns),
        ("/dev/loop0", Dev::new(7, 0), None, None)
    );
    let got: Vec<_> = meta.ranges.iter().map(|r| (r.offset / PAGE, r.length / PAGE, r.physical)).collect();
    assert_eq!(got, [(1000, 3, Some(1000 * PAGE)), (5000, 1, Some(5000 * PAGE))]);
    assert_eq!(p.stats.read_metadata_bytes, 3 * PAGE);
    assert_eq!(p.stats.planned_metadata_bytes, 4 * PAGE);
    let without = plan(&t, &PlanSettings { metadata: false, ..PlanSettings::default() });
    assert!(without.files.iter().all(|f| f.kind == PlanFileKind::Regular));
    assert_eq!(without.stats.excluded[0].read_bytes, 3 * PAGE);
}

#[test]
fn whole_file_plans_read_each_file_entirely_from_its_first_need() {
    let mut t = trace();
    add_file(&mut t, 1, "/lib/a.so", 100);
    fill(&mut t, 1, 50, 4, 7);
    t.file_opens.push(FileOpen { t_ns: 5 * MS, pid: 10, file_id: 1, exec: false });
    let p =
        plan(&t, &PlanSettings { whole_files: true, max_range_bytes: 64 * PAGE, ..PlanSettings::default() });
    assert_eq!(p.source.used_pages_from, UsedPagesFrom::WholeFiles);
    assert_eq!(ranges(&p, "/lib/a.so"), [(0, 64, 4), (64, 36, 4)]);
}

#[test]
fn a_trace_without_reads_of_regular_files_has_nothing_to_plan() {
    let t = trace();
    assert!(matches!(
        build_plan(&t, "x", &PlanSettings::default(), "test"),
        Err(PrefetchError::NothingToPlan)
    ));
}

#[test]
fn plans_round_trip_and_newer_or_foreign_formats_are_refused() {
    let t = ordering_trace();
    let p = plan(&t, &PlanSettings::default());
    let path = Path::new("p.plan");
    assert_eq!(Plan::from_json(&p.to_json(), path).unwrap(), p);
    let newer = p.to_json().replacen("\"version\": 1", "\"version\": 2", 1);
    let err = Plan::from_json(&newer, path).unwrap_err().to_string();
    assert!(err.contains("version 2") && err.contains("newer"), "{err}");
    let foreign = p.to_json().replacen("coldstart-prefetch-plan", "something-else", 1);
    assert!(
        Plan::from_json(&foreign, path).unwrap_err().to_string().contains("not a coldstart prefetch plan")
    );
    let broken = p.to_json().replacen("\"range\": 0", "\"range\": 99", 1);
    assert!(Plan::from_json(&broken, path).unwrap_err().to_string().contains("does not have"));
}

fn random_trace() -> impl Strategy<Value = Trace> {
    let event = (0u32..3, 0u64..200, 1u32..20, 0i64..500, 0u8..4);
    proptest::collection::vec(event, 1..60).prop_map(|events| {
        let mut t = trace();
        for id in 0..3 {
            add_file(&mut t, id, &format!("/p/f{id}"), 220);
        }
        for (file, index, pages, ms, kind) in events {
            match kind {
                0 => fill(&mut t, file, index, pages, ms),
                1 => access(&mut t, file, AccessKind::Read, index, pages, ms),
                2 => access(&mut t, file, AccessKind::Fault, index, 1, ms),
                _ => access(&mut t, file, AccessKind::MapAround, index, pages, ms),
            }
        }
        fill(&mut t, 0, 0, 1, 0);
        access(&mut t, 0, AccessKind::Read, 0, 1, 0);
        t
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn plans_cover_the_used_pages_stay_in_budget_and_order_every_range_once(
        t in random_trace(),
        ratio in 0.5f64..1.5,
        order in prop_oneof![Just(Order::FirstNeed), Just(Order::Disk), Just(Order::Blend)],
    ) {
        let settings = PlanSettings { order, max_size_ratio: ratio, max_range_bytes: 8 * PAGE, ..PlanSettings::default() };
        let p = plan(&t, &settings);
        prop_assert_eq!(p.stats.planned_used_bytes, p.stats.used_bytes);
        let allowed = ((ratio * p.stats.read_bytes as f64 / PAGE as f64).floor() as u64 * PAGE).max(p.stats.used_bytes);
        prop_assert!(p.stats.planned_bytes <= allowed, "{} > {}", p.stats.planned_bytes, allowed);
        prop_assert_eq!(p.stats.planned_bytes, p.stats.used_bytes + p.stats.gap_bytes);
        for f in &p.files {
            for pair in f.ranges.windows(2) {
                prop_assert!(pair[0].offset + pair[0].length <= pair[1].offset);
            }
            prop_assert!(f.ranges.iter().all(|r| r.length > 0 && r.length <= 8 * PAGE));
        }
        let mut seen: Vec<Step> = p.steps.iter().copied().filter(|s| matches!(s, Step::Range { .. })).collect();
        seen.sort_by_key(|s| match *s { Step::Range { file, range } => (file, range), _ => (0, 0) });
        let all: Vec<Step> = p.files.iter().enumerate()
            .flat_map(|(file, f)| (0..f.ranges.len()).map(move |range| Step::Range { file, range })).collect();
        prop_assert_eq!(seen, all);
        if order == Order::FirstNeed {
            let times: Vec<i64> = p.steps.iter().filter_map(|s| match *s {
                Step::Range { file, range } => Some(p.files[file].ranges[range].first_need_ns), _ => None }).collect();
            prop_assert!(times.windows(2).all(|w| w[0] <= w[1]));
        }
    }
}

/// A session's trace: the command (10), its child (11) and grandchild (12), a daemon that
/// double-forked away from the tree (13, reparented to init), and a process recorded with
/// `--also` (20, an X server): all in scope, each reading files of its own.
#[test]
fn a_plan_of_a_multi_process_trace_covers_every_process_in_scope() {
    let mut t = trace();
    t.processes.extend([
        Process { pid: 11, ppid: Some(10), start_ns: Some(2 * MS), in_scope: true, ..Process::default() },
        Process { pid: 12, ppid: Some(11), start_ns: Some(3 * MS), in_scope: true, ..Process::default() },
        Process { pid: 13, ppid: Some(1), start_ns: Some(4 * MS), in_scope: true, ..Process::default() },
        Process { pid: 20, ppid: Some(1), start_ns: None, in_scope: true, ..Process::default() },
    ]);
    let readers = [
        (10, "/usr/bin/session"),
        (11, "/usr/lib/panel.so"),
        (12, "/usr/share/icons/a.png"),
        (13, "/usr/lib/daemon.so"),
        (20, "/usr/lib/xorg/x.so"),
    ];
    for (i, (pid, path)) in readers.iter().enumerate() {
        let id = i as u32 + 1;
        add_file(&mut t, id, path, 32);
        let (index, pages, ms) = (u64::from(id) * 2, 3 + id, 5 + i as i64);
        t.page_fills.push(PageFill {
            t_ns: ms * MS,
            pid: *pid,
            tid: *pid,
            file_id: id,
            index,
            pages,
            origin: None,
        });
        t.page_accesses.push(PageAccess {
            t_ns: ms * MS,
            pid: *pid,
            tid: *pid,
            file_id: id,
            index,
            pages,
            kind: AccessKind::Read,
        });
    }
    let p = plan(&t, &PlanSettings { max_size_ratio: 0.0, ..PlanSettings::default() });
    for (i, (_, path)) in readers.iter().enumerate() {
        let id = i as u64 + 1;
        assert_eq!(ranges(&p, path), [(id * 2, 3 + id, 4 + i as i64)], "{path}");
    }
    let expected_pages: u64 = (1..=5).map(|id| 3 + id).sum();
    assert_eq!(p.stats.used_bytes, expected_pages * PAGE);
    assert_eq!(p.stats.planned_read_bytes, expected_pages * PAGE);
    assert_eq!(step_paths(&p).len(), 5, "one step a range, every process's");
}
