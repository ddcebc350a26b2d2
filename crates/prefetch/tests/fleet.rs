//! Plans made from many traces: the share of traces a page needs, files matched by path,
//! size and mtime and checked against this machine's, mean first-need times, this
//! machine's disk order, what is left out and why.

use std::collections::HashMap;

use coldstart_prefetch::fleet::{FleetFile, FleetPages, FleetTrace, Image, ImageFile, PageRun};
use coldstart_prefetch::plan::{Step, UsedPagesFrom};
use coldstart_prefetch::{Order, Plan, PlanSettings, PrefetchError};
use coldstart_trace::{Dev, Extent, FileKind, Nanos};

const MS: Nanos = 1_000_000;
const PAGE: u64 = 4096;
const DISK: Dev = Dev::new(8, 0);
const MTIME: i64 = 1_600_000_000_000_000_000;
const RECORDED: i64 = 1_700_000_000_000_000_000;

/// A fake machine: files by path, each at a place on one disk.
#[derive(Default)]
struct FakeImage {
    files: HashMap<String, (ImageFile, u64)>,
}

impl FakeImage {
    fn with(mut self, path: &str, pages: u64, mtime_ns: i64, physical: u64) -> FakeImage {
        let ino = 100 + self.files.len() as u64;
        let file = ImageFile::Regular { dev: Dev::new(8, 1), ino, size: pages * PAGE, mtime_ns };
        self.files.insert(path.into(), (file, physical));
        self
    }
}

impl Image for FakeImage {
    fn file(&self, path: &str) -> ImageFile {
        self.files.get(path).map_or(ImageFile::Missing, |(f, _)| f.clone())
    }

    fn extents(&self, path: &str, _dev: Dev, _ino: u64) -> Vec<Extent> {
        let Some((ImageFile::Regular { size, .. }, physical)) = self.files.get(path) else {
            return Vec::new();
        };
        vec![Extent { file_id: 0, disk: DISK, logical: 0, physical: *physical, length: *size, flags: 0 }]
    }
}

fn file(id: u32, path: &str, pages: u64) -> FleetFile {
    FleetFile {
        file_id: id,
        path: Some(path.into()),
        kind: FileKind::Regular,
        size: Some(pages * PAGE),
        mtime_ns: Some(MTIME),
    }
}

fn run(file_id: u32, first_page: u64, pages: u64, ms: i64) -> PageRun {
    PageRun { file_id, first_page, pages, t_ns: ms * MS }
}

/// A trace whose used pages were also filled (as on a cold start).
fn trace(id: &str, files: Vec<FleetFile>, used: Vec<PageRun>) -> FleetTrace {
    FleetTrace {
        id: id.into(),
        host: format!("host-{id}"),
        build: Some("41.2".into()),
        command: "/sbin/init".into(),
        kernel: "6.12".into(),
        start_unix_ns: RECORDED,
        page_size: PAGE as u32,
        used_from: UsedPagesFrom::Accesses,
        files,
        filled: used.clone(),
        used,
        opened: Vec::new(),
    }
}

fn first_need() -> PlanSettings {
    PlanSettings { order: Order::FirstNeed, max_gap_bytes: 0, ..PlanSettings::default() }
}

fn plan_of(traces: &[FleetTrace], image: &FakeImage, share: f64, settings: &PlanSettings) -> Plan {
    let mut fleet = FleetPages::new();
    for t in traces {
        fleet.add(t).unwrap();
    }
    fleet.plan(image, share, settings, "fleet/", "coldstart test").unwrap()
}

/// (path, [(offset, length)]) of every planned file.
fn ranges(plan: &Plan) -> Vec<(String, Vec<(u64, u64)>)> {
    let mut out: Vec<_> = plan
        .files
        .iter()
        .map(|f| (f.path.clone(), f.ranges.iter().map(|r| (r.offset, r.length)).collect()))
        .collect();
    out.sort();
    out
}

#[test]
fn a_page_is_planned_when_enough_traces_used_it() {
    // Pages 0-3 used by all three traces, 4-5 by two, 6 by one.
    let traces = [
        trace("a", vec![file(1, "/usr/lib/libx.so", 16)], vec![run(1, 0, 7, 5)]),
        trace("b", vec![file(7, "/usr/lib/libx.so", 16)], vec![run(7, 0, 6, 5)]),
        trace("c", vec![file(3, "/usr/lib/libx.so", 16)], vec![run(3, 0, 4, 5)]),
    ];
    let image = FakeImage::default().with("/usr/lib/libx.so", 16, MTIME, 1 << 20);
    let half = plan_of(&traces, &image, 0.5, &first_need());
    assert_eq!(ranges(&half), [("/usr/lib/libx.so".to_owned(), vec![(0, 6 * PAGE)])]);
    let all = plan_of(&traces, &image, 1.0, &first_need());
    assert_eq!(ranges(&all), [("/usr/lib/libx.so".to_owned(), vec![(0, 4 * PAGE)])]);
    let any = plan_of(&traces, &image, 0.1, &first_need());
    assert_eq!(ranges(&any), [("/usr/lib/libx.so".to_owned(), vec![(0, 7 * PAGE)])]);
    let fleet = half.source.fleet.as_ref().unwrap();
    assert_eq!((fleet.traces, fleet.min_traces, fleet.hosts), (3, 2, 3));
    assert_eq!(fleet.builds, ["41.2"]);
    assert_eq!(half.source.command, ["/sbin/init"]);
    // The plan names this machine's file, not a trace's.
    let f = &half.files[0];
    assert_eq!((f.dev, f.ino, f.size, f.mtime_ns), (Dev::new(8, 1), 100, Some(16 * PAGE), Some(MTIME)));
}

#[test]
fn a_page_counts_once_per_trace_however_often_it_was_used() {
    // Trace a used page 0 three times; b never: with two traces, 0.6 needs both.
    let a = trace("a", vec![file(1, "/lib/a", 4)], vec![run(1, 0, 1, 1), run(1, 0, 1, 2), run(1, 0, 2, 3)]);
    let b = trace("b", vec![file(1, "/lib/a", 4)], vec![run(1, 1, 1, 1)]);
    let image = FakeImage::default().with("/lib/a", 4, MTIME, 0);
    let plan = plan_of(&[a, b], &image, 0.6, &first_need());
    assert_eq!(ranges(&plan), [("/lib/a".to_owned(), vec![(PAGE, PAGE)])]);
}

#[test]
fn first_need_is_the_mean_of_the_traces_that_used_the_page() {
    let traces = [
        trace("a", vec![file(1, "/lib/a", 4)], vec![run(1, 0, 1, 100)]),
        trace("b", vec![file(1, "/lib/a", 4)], vec![run(1, 0, 1, 300)]),
        trace("c", vec![file(1, "/lib/a", 4)], vec![run(1, 1, 1, 50)]),
    ];
    let image = FakeImage::default().with("/lib/a", 4, MTIME, 0);
    let plan = plan_of(&traces, &image, 0.5, &first_need());
    assert_eq!(plan.files[0].ranges[0].first_need_ns, 200 * MS);
    assert_eq!(plan.files[0].first_need_ns, 200 * MS);
}

#[test]
fn files_this_machine_has_at_another_size_or_mtime_or_not_at_all_are_left_out() {
    let files = || vec![file(1, "/lib/same", 4), file(2, "/lib/changed", 4), file(3, "/lib/gone", 4)];
    let used = || vec![run(1, 0, 2, 1), run(2, 0, 4, 2), run(3, 0, 1, 3)];
    let traces = [trace("a", files(), used()), trace("b", files(), used())];
    let image = FakeImage::default().with("/lib/same", 4, MTIME, 0).with("/lib/changed", 4, MTIME + 1, 8192);
    let plan = plan_of(&traces, &image, 0.5, &first_need());
    assert_eq!(ranges(&plan), [("/lib/same".to_owned(), vec![(0, 2 * PAGE)])]);
    let excluded: HashMap<&str, (usize, u64)> =
        plan.stats.excluded.iter().map(|e| (e.reason.as_str(), (e.files, e.read_bytes))).collect();
    assert_eq!(
        excluded["another version than this machine's (size or modification time differs)"],
        (1, 4 * PAGE)
    );
    assert_eq!(excluded["missing on this machine"], (1, PAGE));
}

#[test]
fn two_builds_of_a_file_are_told_apart_and_this_machines_is_planned() {
    // Build 1 (mtime MTIME) used pages 0-1, build 2 (mtime MTIME + 5) pages 2-3; this
    // machine runs build 2.
    let old = |id: &str| trace(id, vec![file(1, "/usr/bin/app", 8)], vec![run(1, 0, 2, 1)]);
    let new = |id: &str| {
        let mut f = file(1, "/usr/bin/app", 8);
        f.mtime_ns = Some(MTIME + 5);
        let mut t = trace(id, vec![f], vec![run(1, 2, 2, 1)]);
        t.build = Some("41.3".into());
        t
    };
    let image = FakeImage::default().with("/usr/bin/app", 8, MTIME + 5, 0);
    let plan = plan_of(&[old("a"), old("b"), new("c"), new("d")], &image, 0.5, &first_need());
    assert_eq!(ranges(&plan), [("/usr/bin/app".to_owned(), vec![(2 * PAGE, 2 * PAGE)])]);
    assert_eq!(plan.stats.excluded.len(), 1, "{:?}", plan.stats.excluded);
    assert_eq!(plan.stats.excluded[0].read_bytes, 2 * PAGE);
}

#[test]
fn a_file_that_differs_between_traces_of_one_build_is_state_planned_for_this_machines_version() {
    // The journal has another size and mtime on every machine of build 41.2; each read its
    // first 4 pages, two of three also page 4. This machine's journal is its own (and shorter
    // than 5 pages: page 4 is past its end).
    let journal = |id: &str, n: i64, used: Vec<PageRun>| {
        let mut f = file(1, "/var/log/journal/system.journal", 8 + n as u64);
        f.mtime_ns = Some(MTIME + n);
        let mut t = trace(id, vec![f, file(2, "/usr/lib/libc.so", 8)], used);
        t.used.push(run(2, 0, 1, 1));
        t
    };
    let traces = [
        journal("a", 1, vec![run(1, 0, 5, 30)]),
        journal("b", 2, vec![run(1, 0, 5, 10)]),
        journal("c", 3, vec![run(1, 0, 4, 20)]),
    ];
    let image = FakeImage::default().with("/var/log/journal/system.journal", 4, MTIME + 99, 1 << 20).with(
        "/usr/lib/libc.so",
        8,
        MTIME + 1,
        0,
    );
    let plan = plan_of(&traces, &image, 0.5, &first_need());
    // libc differs here but is the same on every traced machine: another build's, left out.
    assert_eq!(ranges(&plan), [("/var/log/journal/system.journal".to_owned(), vec![(0, 4 * PAGE)])]);
    assert_eq!(plan.files[0].ranges[0].first_need_ns, 20 * MS);
    assert!(plan.notes.iter().any(|n| n.starts_with("1 file is the machines' state")), "{:?}", plan.notes);
    let other = plan.stats.excluded.iter().find(|e| e.reason.starts_with("another version")).unwrap();
    assert_eq!((other.files, other.read_bytes), (1, PAGE));
}

#[test]
fn files_written_during_a_recording_are_state_and_metadata_is_not_planned() {
    let mut written = file(2, "/var/log/boot.log", 4);
    written.mtime_ns = Some(RECORDED + 5 * MS);
    let metadata = FleetFile {
        file_id: 3,
        path: Some("/dev/vda".into()),
        kind: FileKind::DeviceMetadata,
        ..FleetFile::default()
    };
    let t = trace(
        "a",
        vec![file(1, "/lib/a", 4), written, metadata],
        vec![run(1, 0, 1, 1), run(2, 0, 4, 1), run(3, 9, 3, 1)],
    );
    // This machine's boot.log is a later version (3 pages): it is the one planned.
    let image =
        FakeImage::default().with("/lib/a", 4, MTIME, 0).with("/var/log/boot.log", 3, RECORDED + 9 * MS, 0);
    let plan = plan_of(&[t], &image, 0.5, &first_need());
    assert_eq!(
        ranges(&plan),
        [("/lib/a".to_owned(), vec![(0, PAGE)]), ("/var/log/boot.log".to_owned(), vec![(0, 3 * PAGE)])]
    );
    let reasons: Vec<&str> = plan.stats.excluded.iter().map(|e| e.reason.as_str()).collect();
    assert_eq!(reasons, ["filesystem metadata (warmed by directory lookups instead)"]);
}

#[test]
fn disk_order_is_this_machines() {
    // The traces needed /lib/b first; on this machine /lib/a lies before /lib/b.
    let files = || vec![file(1, "/lib/a", 4), file(2, "/lib/b", 4)];
    let used = || vec![run(1, 0, 1, 50), run(2, 0, 1, 10)];
    let traces = [trace("a", files(), used()), trace("b", files(), used())];
    let image = FakeImage::default().with("/lib/a", 4, MTIME, 1 << 20).with("/lib/b", 4, MTIME, 9 << 20);
    let order = |settings: &PlanSettings| -> Vec<String> {
        let plan = plan_of(&traces, &image, 0.5, settings);
        plan.steps
            .iter()
            .filter_map(|s| match *s {
                Step::Range { file, .. } => Some(plan.files[file].path.clone()),
                _ => None,
            })
            .collect()
    };
    assert_eq!(order(&first_need()), ["/lib/b", "/lib/a"]);
    assert_eq!(order(&PlanSettings { order: Order::Disk, ..first_need() }), ["/lib/a", "/lib/b"]);
    let plan = plan_of(&traces, &image, 0.5, &first_need());
    let a = plan.files.iter().find(|f| f.path == "/lib/a").unwrap();
    assert_eq!((a.ranges[0].disk, a.ranges[0].physical), (Some(DISK), Some(1 << 20)));
}

#[test]
fn files_most_traces_only_opened_are_opened_at_their_mean_time() {
    let mut a = trace("a", vec![file(1, "/lib/a", 4), file(2, "/etc/conf", 1)], vec![run(1, 0, 1, 1)]);
    a.opened = vec![(2, 40 * MS), (2, 90 * MS), (1, MS)];
    let mut b = a.clone();
    b.opened = vec![(2, 60 * MS)];
    let c = trace("c", vec![file(1, "/lib/a", 4), file(2, "/etc/conf", 1)], vec![run(1, 0, 1, 1)]);
    let image = FakeImage::default().with("/lib/a", 4, MTIME, 0).with("/etc/conf", 1, MTIME, 4096);
    let plan = plan_of(&[a.clone(), b.clone(), c.clone()], &image, 0.5, &first_need());
    let conf = plan.files.iter().find(|f| f.path == "/etc/conf").expect("opened by 2 of 3");
    assert!(conf.ranges.is_empty());
    assert_eq!(conf.first_need_ns, 50 * MS, "the mean of each trace's first open");
    assert_eq!(plan.stats.open_only_files, 1);
    assert!(plan.steps.iter().any(|s| matches!(s, Step::Open(_))));
    let plan = plan_of(&[a, b, c], &image, 1.0, &first_need());
    assert!(plan.files.iter().all(|f| f.path != "/etc/conf"), "opened by 2 of 3, not all");
}

#[test]
fn nothing_to_plan_and_mixed_page_sizes_are_errors_that_say_why() {
    let image = FakeImage::default();
    let t = trace("a", vec![file(1, "/lib/a", 4)], vec![run(1, 0, 1, 1)]);
    let mut fleet = FleetPages::new();
    fleet.add(&t).unwrap();
    let err = fleet.plan(&image, 0.5, &first_need(), "fleet/", "test").unwrap_err();
    assert!(err.to_string().contains("none of the files the traces share is on this machine"), "{err}");
    let mut big = t.clone();
    big.page_size = 16384;
    let err = fleet.add(&big).unwrap_err();
    assert!(matches!(err, PrefetchError::Fleet(_)));
    assert!(err.to_string().contains("pages of 16384 bytes"), "{err}");
    let empty = FleetPages::new();
    assert!(empty.plan(&image, 0.5, &first_need(), "fleet/", "test").is_err());
}

mod one_trace_is_its_own_fleet {
    //! A fleet of copies of one trace plans what that trace's own plan does: the same
    //! ranges with the same first needs (the fleet's path goes through `used_by_file`, as
    //! the dataset's `page_used` does).
    use super::*;
    use coldstart_prefetch::build_plan;
    use coldstart_trace::{AccessKind, File, FileOpen, Meta, PageAccess, PageFill, Process, Trace};
    use proptest::prelude::*;

    fn random_trace() -> impl Strategy<Value = Trace> {
        let event = (0u32..4, 0u64..200, 1u32..20, 0i64..500, 0u8..5);
        proptest::collection::vec(event, 1..60).prop_map(|events| {
            let mut t = Trace {
                meta: Meta {
                    page_size: 4096,
                    root_pid: Some(10),
                    start_unix_ns: RECORDED,
                    ..Meta::default()
                },
                processes: vec![Process {
                    pid: 10,
                    start_ns: Some(MS),
                    in_scope: true,
                    ..Process::default()
                }],
                ..Trace::default()
            };
            for id in 0..4u32 {
                t.files.push(File {
                    id,
                    dev: Dev::new(8, 1),
                    ino: 100 + u64::from(id),
                    path: Some(format!("/p/f{id}")),
                    kind: FileKind::Regular,
                    size: Some(220 * PAGE),
                    mtime_ns: Some(MTIME),
                });
            }
            let mut add = |file: u32, index: u64, pages: u32, ms: i64, kind: u8| {
                let t_ns = ms * MS;
                match kind {
                    4 => t.file_opens.push(FileOpen { t_ns, pid: 10, file_id: file, exec: false }),
                    0 => t.page_fills.push(PageFill {
                        t_ns,
                        file_id: file,
                        index,
                        pages,
                        ..PageFill::default()
                    }),
                    k => {
                        let kind =
                            [AccessKind::Read, AccessKind::Fault, AccessKind::MapAround][usize::from(k - 1)];
                        let pages = if kind == AccessKind::Fault { 1 } else { pages };
                        t.page_accesses.push(PageAccess {
                            t_ns,
                            file_id: file,
                            index,
                            pages,
                            kind,
                            ..PageAccess::default()
                        });
                    }
                }
            };
            for (file, index, pages, ms, kind) in events {
                add(file, index, pages, ms, kind);
            }
            add(0, 0, 1, 2, 0);
            add(0, 0, 1, 2, 1);
            t
        })
    }

    fn same_disk(t: &Trace) -> FakeImage {
        let mut image = FakeImage::default();
        for f in &t.files {
            image.files.insert(
                f.path.clone().unwrap(),
                (
                    ImageFile::Regular { dev: f.dev, ino: f.ino, size: f.size.unwrap(), mtime_ns: MTIME },
                    u64::from(f.id) << 30,
                ),
            );
        }
        image
    }

    fn with_extents(mut t: Trace) -> Trace {
        for f in t.files.clone() {
            t.extents.push(Extent {
                file_id: f.id,
                disk: DISK,
                logical: 0,
                physical: u64::from(f.id) << 30,
                length: 220 * PAGE,
                flags: 0,
            });
        }
        t
    }

    type Ranges = Vec<(String, u64, u64, i64)>;

    fn planned(p: &Plan) -> Ranges {
        let mut out: Ranges = p
            .files
            .iter()
            .flat_map(|f| f.ranges.iter().map(|r| (f.path.clone(), r.offset, r.length, r.first_need_ns)))
            .collect();
        out.sort();
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn the_same_ranges_and_first_needs(t in random_trace(), copies in 1usize..4, order in prop_oneof![Just(Order::FirstNeed), Just(Order::Disk)]) {
            let t = with_extents(t);
            let settings = PlanSettings { order, metadata: false, max_range_bytes: 8 * PAGE, ..PlanSettings::default() };
            let own = build_plan(&t, "own", &settings, "test").unwrap();
            let mut fleet = FleetPages::new();
            for i in 0..copies {
                fleet.add(&FleetTrace::from_trace(&t, &format!("copy{i}"))).unwrap();
            }
            let from_fleet = fleet.plan(&same_disk(&t), 1.0, &settings, "fleet/", "test").unwrap();
            prop_assert_eq!(planned(&from_fleet), planned(&own));
            prop_assert_eq!(from_fleet.stats.used_bytes, own.stats.used_bytes);
            prop_assert_eq!(from_fleet.stats.read_bytes, own.stats.read_bytes);
        }
    }
}

mod several_boots_of_one_machine {
    //! The boot service's plan from its last learning boots (`FleetTrace::from_trace`, the
    //! pages more than half of the boots used): a page one boot read alone is left out.
    use super::*;
    use coldstart_prefetch::fleet::more_than_half;
    use coldstart_trace::{AccessKind, File, Meta, PageAccess, PageFill, Trace};

    /// A boot that read pages `pages` of /usr/lib/libc.so.6 (400 pages), each used.
    fn boot(pages: &[(u64, u32)]) -> Trace {
        let mut t = Trace {
            meta: Meta { page_size: 4096, start_unix_ns: RECORDED, ..Meta::default() },
            ..Trace::default()
        };
        t.files.push(File {
            id: 1,
            dev: Dev::new(8, 1),
            ino: 100,
            path: Some("/usr/lib/libc.so.6".into()),
            kind: FileKind::Regular,
            size: Some(400 * PAGE),
            mtime_ns: Some(MTIME),
        });
        for (i, &(index, n)) in pages.iter().enumerate() {
            let t_ns = (i as i64 + 1) * MS;
            t.page_fills.push(PageFill { t_ns, pid: 1, file_id: 1, index, pages: n, ..PageFill::default() });
            let kind = AccessKind::Read;
            t.page_accesses.push(PageAccess {
                t_ns,
                pid: 1,
                file_id: 1,
                index,
                pages: n,
                kind,
                ..PageAccess::default()
            });
        }
        t
    }

    fn planned_pages(boots: &[Trace]) -> Vec<(u64, u64)> {
        let mut fleet = FleetPages::new();
        for (i, b) in boots.iter().enumerate() {
            fleet.add(&FleetTrace::from_trace(b, &format!("boot-{i}"))).unwrap();
        }
        let image = FakeImage::default().with("/usr/lib/libc.so.6", 400, MTIME, 1 << 30);
        let settings = PlanSettings { max_gap_bytes: 0, ..PlanSettings::default() };
        let plan = fleet.plan(&image, more_than_half(boots.len()), &settings, "boots", "test").unwrap();
        ranges(&plan).into_iter().flat_map(|(_, r)| r).map(|(o, l)| (o / PAGE, l / PAGE)).collect()
    }

    #[test]
    fn a_page_one_boot_read_is_left_out_and_pages_all_read_are_kept() {
        let both = [boot(&[(0, 10), (200, 1)]), boot(&[(0, 10), (300, 4)])];
        assert_eq!(planned_pages(&both), [(0, 10)], "pages 200 and 300 were read by one boot each");
        let three = [boot(&[(0, 10), (200, 1)]), boot(&[(0, 10), (300, 4)]), boot(&[(0, 10), (200, 1)])];
        assert_eq!(planned_pages(&three), [(0, 10), (200, 1)], "page 200: 2 of 3 boots");
        assert_eq!(planned_pages(&three[..1]), [(0, 10), (200, 1)], "one boot: all it used");
        assert_eq!([more_than_half(1), more_than_half(2), more_than_half(4)], [1.0, 1.0, 0.75]);
    }
}
