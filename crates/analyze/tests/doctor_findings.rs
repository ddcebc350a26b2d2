//! Each finding fires on a synthetic start made to show it, with the expected
//! evidence and gain (the arithmetic is spelled out in each test), and nothing else
//! fires there.

mod common;

use coldstart_analyze::doctor::{Confidence, FindingKind};
use common::doctor::{check_invariants, diagnose, figure, input, one, render};
use common::{MS, scenarios};

fn expect(d: &coldstart_analyze::doctor::Diagnosis, lines: &str) {
    check_invariants(d);
    let expected: Vec<&str> = lines.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    assert_eq!(render(d), expected.join("\n"));
}

#[test]
fn many_small_files_gain_their_wait_minus_one_sequential_read_of_their_size() {
    let d = diagnose(&scenarios::small_files());
    // The disk model: 40 requests of 4 KiB took 5 ms each, so a request costs 5 ms (measured);
    // that is slow, so seeks, rotation and bandwidth are the hdd defaults (8 ms, 4.17 ms,
    // 150 MB/s). One sequential read of the 40 × 4 KiB: 5 + 8 + 4.17 ms + 163,840 B at
    // 150 MB/s (1.092266 ms) = 18.262266 ms. Gain: 40 × 5 ms − 18.262266 ms.
    expect(&d, "many_small_files 181.738 Medium | 40 small files read from /usr/share/app/plugins");
    let f = one(&d, FindingKind::ManySmallFiles);
    assert_eq!(f.gain.ns, 200 * MS - 18_262_266);
    assert_eq!(input(f, "wait_now_ns"), 200e6);
    assert_eq!(input(f, "merged_read_ns"), 18_262_266.0);
    assert_eq!(input(f, "total_size_bytes"), 163_840.0);
    assert_eq!(f.gain.ahead_ns, Some(200 * MS));
    assert_eq!(figure(f, "files"), 40.0);
    assert_eq!(f.evidence.files_total, 40);
    assert_eq!(f.evidence.files.len(), 12, "the list is cut at max_listed");
    assert!(
        f.evidence
            .files
            .iter()
            .all(|e| e.wait_ns == 5 * MS && e.name.starts_with("/usr/share/app/plugins/p"))
    );
    assert_eq!(f.evidence.processes.len(), 1);
    assert_eq!((f.evidence.processes[0].pid, f.evidence.processes[0].ns), (100, 200 * MS));
    assert!(f.verify.starts_with("coldstart bench --cold --runs 10 -- app --start"), "{}", f.verify);
}

#[test]
fn a_start_that_names_its_profile_is_verified_on_a_fresh_copy_of_a_seed() {
    let mut trace = scenarios::small_files();
    trace.meta.command =
        ["soffice", "-env:UserInstallation=file:///tmp/lo", "--convert-to", "pdf", "a b.txt"]
            .map(String::from)
            .to_vec();
    let d = diagnose(&trace);
    let f = one(&d, FindingKind::ManySmallFiles);
    assert_eq!(
        f.verify.split("  # ").next().unwrap(),
        "mkdir -p /tmp/lo.seed && coldstart bench --cold --runs 10 \
         --prepare 'rm -rf /tmp/lo.fresh && cp -a /tmp/lo.seed /tmp/lo.fresh' \
         -- soffice '-env:UserInstallation=file:///tmp/lo.fresh' --convert-to pdf 'a b.txt'"
    );
}

#[test]
fn a_library_faulted_in_pieces_gains_its_wait_minus_one_read_of_the_whole_file() {
    let d = diagnose(&scenarios::library_in_pieces());
    // No small request to measure, a non-rotational disk: the ssd defaults (100 µs per request,
    // no seek, 500 MB/s) at the one request in flight seen. 8 MiB in 16 requests of 512 KiB:
    // 16 × 100 µs + 8,388,608 B at 500 MB/s (16.777216 ms) = 18.377216 ms. Gain: 16 × 4 ms − that.
    expect(&d, "file_in_pieces 45.623 High | libbig.so.1 (8.0 MiB) read in 16 pieces");
    let f = one(&d, FindingKind::FileInPieces);
    assert_eq!(f.gain.ns, 64 * MS - 18_377_216);
    assert_eq!(input(f, "whole_read_ns"), 18_377_216.0);
    assert_eq!(f.gain.ahead_ns, Some(64 * MS), "read before the start, all of its wait goes");
    assert_eq!(figure(f, "reads"), 16.0);
    assert_eq!(f.evidence.intervals.len(), 12);
    assert_eq!(f.evidence.intervals[0].what, "pages 0–15 (64.0 KiB) by app/100");
    assert_eq!(
        f.verify,
        "coldstart bench --cold --runs 10 -- app --start ::: sh -c 'cat \"$0\" > /dev/null; exec \"$@\"' \
         /usr/lib/libbig.so.1 app --start"
    );
}

#[test]
fn a_helper_on_the_critical_path_gains_its_time_there() {
    let d = diagnose(&scenarios::helper());
    expect(
        &d,
        "not_io_bound 0.000 High | Not I/O-bound: 100.0 % of the critical path is CPU, 0.0 % waits for the disk
         heavy_helper 30.000 Medium | app runs cpp: 30.0 ms on the critical path",
    );
    let f = one(&d, FindingKind::HeavyHelper);
    assert_eq!(input(f, "path_cpu_ns"), 30e6);
    assert_eq!(f.evidence.processes[0].pid, 200);
    assert_eq!((f.evidence.intervals[0].start_ns, f.evidence.intervals[0].end_ns), (5 * MS, 35 * MS));
}

#[test]
fn the_start_scripts_small_utilities_count_together() {
    let d = diagnose(&scenarios::shell_helpers());
    expect(
        &d,
        "not_io_bound 0.000 High | Not I/O-bound: 100.0 % of the critical path is CPU, 0.0 % waits for the disk
         heavy_helper 24.000 Medium | The start script's utilities on the critical path for 24.0 ms: dirname ×2, sed",
    );
    let f = one(&d, FindingKind::HeavyHelper);
    assert!(f.suggestion.contains("shell built-ins"), "{}", f.suggestion);
    assert_eq!(f.evidence.processes.iter().map(|p| p.pid).collect::<Vec<_>>(), vec![201, 202, 203]);
}

#[test]
fn work_off_the_critical_path_gains_the_disk_time_it_took() {
    let d = diagnose(&scenarios::work_that_can_wait());
    // indexer: two requests of 8 ms while no other request was in flight; updatedb (outside
    // the trace): one of 12 ms. The critical path waited 2 × 20 ms for I/O, more than either.
    expect(
        &d,
        "work_that_can_wait 16.000 Medium | app runs indexer: 16.0 ms of the critical path's waits while it ran
         work_that_can_wait 12.000 Medium | 1 process outside the traced command read from the disk during the start",
    );
    let inside = &d.findings[0];
    assert_eq!(input(inside, "their_disk_ns"), 16e6);
    assert_eq!(input(inside, "path_io_wait_ns"), 40e6);
    assert_eq!((inside.evidence.processes[0].pid, inside.evidence.processes[0].in_scope), (300, true));
    let outside = &d.findings[1];
    assert_eq!(outside.evidence.processes[0].comm, "updatedb");
    assert!(!outside.evidence.processes[0].in_scope);
    assert_eq!(figure(outside, "disk_busy_ns"), 68e6, "20 + 20 + 8 + 8 + 12 ms");
}

#[test]
fn a_file_read_whole_then_parsed_gains_the_shorter_of_read_and_parse() {
    let d = diagnose(&scenarios::read_then_parse());
    expect(&d, "read_then_parse 20.000 Low | config.xml read whole, then 60.0 ms of CPU by the same thread");
    let f = one(&d, FindingKind::ReadThenParse);
    assert_eq!(input(f, "read_wait_ns"), 20e6);
    assert_eq!(input(f, "cpu_after_ns"), 60e6);
    assert_eq!((f.evidence.intervals[0].start_ns, f.evidence.intervals[0].end_ns), (MS, 81 * MS));
}

#[test]
fn translations_for_other_languages_than_the_users_gain_their_wait() {
    let d = diagnose(&scenarios::other_languages());
    // fr, ja and it are not German; de and en_GB (English is always needed) are.
    expect(
        &d,
        "other_languages 18.000 Medium | 3 files of translations or resources for 3 other languages read",
    );
    let f = one(&d, FindingKind::OtherLanguages);
    let mut names: Vec<&str> = f.evidence.files.iter().map(|e| e.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "/usr/share/locale/fr/LC_MESSAGES/app.mo",
            "/usr/share/locale/ja/LC_MESSAGES/app.mo",
            "/usr/share/qt5/translations/qtbase_it.qm"
        ]
    );
    assert!(f.evidence.summary.contains("fr, it, ja"), "{}", f.evidence.summary);
    assert!(f.caveat.as_deref().unwrap_or("").contains("the test"), "says where the languages came from");
}

#[test]
fn durable_writes_the_critical_path_waited_for_gain_those_waits() {
    let d = diagnose(&scenarios::durable_writes());
    // Waits of 15 ms and 10 ms without a page read, each ended by a sync write or a flush;
    // the sync write at 80 ms came while the path ran and is not counted.
    expect(&d, "durable_writes 25.000 Medium | Durable writes on the critical path for 25.0 ms");
    let f = one(&d, FindingKind::DurableWrites);
    assert_eq!(figure(f, "sync_writes"), 3.0);
    assert_eq!(figure(f, "flushes"), 2.0);
    assert_eq!(figure(f, "written_bytes"), 28672.0);
    assert_eq!(figure(f, "path_waits"), 2.0);
    assert!(f.evidence.summary.contains("jbd2/vda1-8/77"), "{}", f.evidence.summary);
    assert!(f.caveat.as_deref().unwrap_or("").contains("fsync"));
}

#[test]
fn idle_waits_count_timer_sleeps_only_and_a_wait_on_an_untraced_thread_is_unexplained() {
    let d = diagnose(&scenarios::idle_waits());
    expect(
        &d,
        "idle_waits 50.000 Medium | 50.0 ms asleep on a timer on the critical path: no CPU, no I/O
         unexplained_waits 0.000 Low | 20.0 ms of the critical path is outside the recording",
    );
    let f = one(&d, FindingKind::IdleWaits);
    assert_eq!(input(f, "sleep_ns"), 50e6);
    assert_eq!(f.evidence.intervals.len(), 1, "the 1 ms sleep is below idle_min_wait_ns");
    let u = one(&d, FindingKind::UnexplainedWaits);
    assert_eq!(u.gain.ns, 0, "no gain from time the path could not explain");
    assert_eq!(figure(u, "wait_outside_ns"), 20e6);
    assert!(
        u.evidence.intervals[0].what.contains("thread 555 (exited, not recorded)"),
        "{:?}",
        u.evidence.intervals
    );
    assert!(u.suggestion.contains("--system"), "{}", u.suggestion);
}

#[test]
fn a_scattered_layout_on_a_seeking_disk_gains_the_far_seeks_disk_order_removes() {
    let d = diagnose(&scenarios::scattered_layout());
    // Far requests took 10 ms, near ones 1 ms: a far seek costs 9 ms (measured). Read
    // alternately from two clusters, 17 requests were far; in disk order only 1 is.
    // (17 − 1) × 9 ms = 144 ms, under the 198 ms of I/O wait on the path.
    let f = one(&d, FindingKind::ScatteredLayout);
    assert_eq!(d.findings.len(), 1, "{}", render(&d));
    check_invariants(&d);
    assert_eq!(f.gain.ns, 144 * MS);
    assert_eq!(input(f, "far_seek_cost_ns"), 9e6);
    assert_eq!(input(f, "far_seeks_now"), 17.0);
    assert_eq!(input(f, "far_seeks_in_disk_order"), 1.0);
    assert_eq!(f.gain.ahead_ns, Some(153 * MS), "relocated: all 17 far seeks go");
    assert_eq!(f.confidence, Confidence::Medium);
    assert!(f.verify.contains("--order disk"), "{}", f.verify);
}

#[test]
fn a_start_that_mostly_runs_is_called_not_io_bound_with_no_gain() {
    let d = diagnose(&scenarios::cpu_bound());
    expect(
        &d,
        "not_io_bound 0.000 High | Not I/O-bound: 98.0 % of the critical path is CPU, 2.0 % waits for the disk",
    );
    let f = one(&d, FindingKind::NotIoBound);
    assert!(f.suggestion.contains("perf record -g -- app --start"), "{}", f.suggestion);
    assert_eq!(figure(f, "io_share"), 0.02);
}

/// 400 CPU samples of the cpu-bound start's thread, 1 ms apart: 320 in `parse_catalog`
/// called from `main`, 80 in `main` itself.
fn with_stack_samples(mut trace: coldstart_trace::Trace) -> coldstart_trace::Trace {
    use coldstart_trace::{Frame, Mapping, Stack, StackSample};
    trace.mappings = vec![Mapping {
        id: 1,
        pid: 100,
        start: 0x40_0000,
        end: 0x50_0000,
        path: "/usr/bin/app".into(),
        ..Default::default()
    }];
    let frame = |id, address, symbol: &str| Frame {
        id,
        mapping_id: Some(1),
        kernel: false,
        address,
        symbol: Some(symbol.into()),
    };
    trace.frames = vec![frame(1, 0x40_1000, "main"), frame(2, 0x40_2000, "parse_catalog")];
    trace.stacks =
        vec![Stack { id: 1, parent_id: None, frame_id: 1 }, Stack { id: 2, parent_id: Some(1), frame_id: 2 }];
    trace.stack_samples = (0..400)
        .map(|i| StackSample {
            t_ns: i * MS,
            pid: 100,
            tid: 100,
            cpu: 0,
            stack_id: Some(if i % 5 == 0 { 1 } else { 2 }),
        })
        .collect();
    trace
}

#[test]
fn not_io_bound_names_the_functions_the_cpu_samples_were_in() {
    let trace = with_stack_samples(scenarios::cpu_bound());
    let d = diagnose(&trace);
    let f = one(&d, FindingKind::NotIoBound);
    assert!(
        f.suggestion.contains(
            "most of the CPU under parse_catalog (app), 80.0 % of the 400 samples on the critical path (the \
             cpu_subtree finding says what is inside it)"
        ),
        "{}",
        f.suggestion
    );
    assert!(f.suggestion.contains("--format flamegraph"), "{}", f.suggestion);

    let profile = coldstart_analyze::analyze(&trace).cpu_profile.expect("a profile of the samples");
    let top: Vec<(&str, &str, u64, u64)> = profile
        .functions
        .iter()
        .map(|f| (f.name.as_str(), f.library.as_str(), f.self_samples, f.samples))
        .collect();
    assert_eq!(top, [("parse_catalog", "app", 320, 320), ("main", "app", 80, 400)]);
    let hottest: Vec<&str> = profile.critical_path.iter().map(|s| s.hottest.name.as_str()).collect();
    assert!(!hottest.is_empty() && hottest.iter().all(|&h| h == "parse_catalog"), "{hottest:?}");
}

#[test]
fn read_then_parse_names_the_parser_the_cpu_samples_were_in() {
    use coldstart_trace::{Frame, Stack, StackSample};
    let mut trace = scenarios::read_then_parse();
    let frame = |id, symbol: &str| Frame {
        id,
        mapping_id: None,
        kernel: false,
        address: u64::from(id) * 16,
        symbol: Some(symbol.into()),
    };
    trace.frames = vec![frame(1, "main"), frame(2, "xml_parse_document"), frame(3, "malloc")];
    trace.stacks = vec![
        Stack { id: 1, parent_id: None, frame_id: 1 },
        Stack { id: 2, parent_id: Some(1), frame_id: 2 },
        Stack { id: 3, parent_id: Some(2), frame_id: 3 },
    ];
    // During the read's wait (1–21 ms) nothing runs; after it (21–81 ms), 60 samples: 45 in
    // the parser, 15 in malloc under it; samples of another thread do not count.
    trace.stack_samples = (21..81)
        .map(|ms| StackSample {
            t_ns: ms * MS,
            pid: 100,
            tid: 100,
            cpu: 0,
            stack_id: Some(if ms % 4 == 0 { 3 } else { 2 }),
        })
        .chain((21..81).map(|ms| StackSample {
            t_ns: ms * MS,
            pid: 100,
            tid: 101,
            cpu: 1,
            stack_id: Some(1),
        }))
        .collect();
    let d = diagnose(&trace);
    let f = one(&d, FindingKind::ReadThenParse);
    assert!(
        f.suggestion.contains("75.0 % of the work after the first read in xml_parse_document"),
        "{}",
        f.suggestion
    );
    assert!(
        f.evidence.intervals[0].what.ends_with(", 75.0 % of its samples in xml_parse_document ([unknown])"),
        "{}",
        f.evidence.intervals[0].what
    );
    let without =
        one(&diagnose(&scenarios::read_then_parse()), FindingKind::ReadThenParse).suggestion.clone();
    assert!(!without.contains("samples"), "{without}");
}
