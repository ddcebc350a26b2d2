//! The what-if on other storage, and the disk model measured from a trace: known
//! requests on known waits give the predicted times computed by hand here.

mod common;

use coldstart_analyze::SegmentKind;
use coldstart_analyze::doctor::{DiskClass, DiskParams, FindingKind, WhatIfSpec};
use coldstart_trace::ThreadState::*;
use coldstart_trace::*;
use common::doctor::{config, diagnose_with, one};
use common::{Builder, DISK, MS};

fn class(c: DiskClass) -> WhatIfSpec {
    DiskParams::class_defaults(c).into()
}

/// Runs 0–10 ms, waits 10–20 ms for one far 4 KiB read, runs 20–30 ms: ready at 30 ms.
fn one_read() -> Trace {
    Builder::start()
        .placed_file(1, "/usr/lib/app/data", 4096)
        .run(100, 0, 10 * MS)
        .fill(10 * MS, 100, 100, 1, 0, 1)
        .fill_origin(PageOrigin::Read)
        .request(10 * MS, 20 * MS, 1, 0, 4096, 100, "app")
        .sched(100, 10 * MS, 20 * MS, IoWait)
        .run(100, 20 * MS, 30 * MS)
        .ready_at_exit(30 * MS)
        .build()
}

#[test]
fn a_wait_is_costed_again_on_a_hard_disk() {
    let d = diagnose_with(&one_read(), &config(), &[class(DiskClass::Hdd7200)]);
    let w = &d.what_if[0];
    // 0.1 ms per request + 8 ms seek + 4.17 ms rotation + 4096 B at 150 MB/s (27,306 ns).
    let hdd_read = 100_000 + 8_000_000 + 4_170_000 + 27_306;
    assert_eq!(w.path_io_wait_ns, 10 * MS);
    assert_eq!(w.predicted_path_io_wait_ns, hdd_read);
    assert_eq!(w.predicted_ns, 30 * MS - 10 * MS + hdd_read);
    assert_eq!(w.with_prefetch_ahead_ns, 20 * MS, "no I/O wait left");
    assert_eq!(w.prefetch_replay_ns, hdd_read, "the plan is the one request");
    assert_eq!(w.with_prefetch_alongside_ns, 20 * MS, "the replay ends before the CPU work does");
    assert_eq!((w.path_waits, w.path_waits_kept, w.requests, w.requests_left_out), (1, 0, 1, 0));
    assert_eq!(w.plan_bytes, 4096);
}

#[test]
fn a_request_in_flight_before_the_wait_counts_for_its_part_inside_it() {
    // Issued at 5 ms while the thread ran, completed at 15 ms; the thread waited 10–15 ms.
    let trace = Builder::start()
        .placed_file(1, "/usr/lib/app/data", 4096)
        .run(100, 0, 10 * MS)
        .fill(9 * MS, 100, 100, 1, 0, 1)
        .fill_origin(PageOrigin::Readahead)
        .request(5 * MS, 15 * MS, 1, 0, 4096, 100, "app")
        .sched(100, 10 * MS, 15 * MS, IoWait)
        .run(100, 15 * MS, 30 * MS)
        .ready_at_exit(30 * MS)
        .build();
    let d = diagnose_with(&trace, &config(), &[class(DiskClass::Hdd7200)]);
    // Half of the request's time fell inside the wait: half of 12.27 ms + half of 27,306 ns.
    assert_eq!(d.what_if[0].predicted_path_io_wait_ns, 6_135_000 + 13_653);
}

#[test]
fn flash_overlaps_the_fixed_cost_of_queued_requests() {
    let mut s =
        Builder::start().run(100, 0, 10 * MS).sched(100, 10 * MS, 20 * MS, IoWait).run(100, 20 * MS, 30 * MS);
    for i in 0..4u32 {
        s = s.placed_file(i + 1, &format!("/usr/lib/app/part{i}"), 4096).fill(9 * MS, 100, 100, i + 1, 0, 1);
        s = s.request(10 * MS, 19 * MS, i + 1, 0, 4096, 100, "app");
    }
    let d = diagnose_with(
        &s.ready_at_exit(30 * MS).build(),
        &config(),
        &[class(DiskClass::Nvme), class(DiskClass::Hdd7200)],
    );
    // nvme: 4 × 70 µs over 32 queue slots (4 used) + 4 × 1,365 ns at 3 GB/s.
    assert_eq!(d.what_if[0].predicted_path_io_wait_ns, 70_000 + 4 * 1_365);
    // hdd: one at a time, each far from the previous one (the files are 64 MiB apart).
    assert_eq!(d.what_if[1].predicted_path_io_wait_ns, 4 * (100_000 + 12_170_000 + 27_306));
}

#[test]
fn waits_without_a_request_and_requests_of_other_processes_are_said() {
    let trace = Builder::start()
        .placed_file(1, "/usr/lib/app/data", 4096)
        .run(100, 0, 10 * MS)
        .sched(100, 10 * MS, 15 * MS, IoWait)
        .raw_request(DISK, 11 * MS, 14 * MS, 9_999_999, 4096, 4242, "cc1")
        .run(100, 15 * MS, 20 * MS)
        .ready_at_exit(20 * MS)
        .build();
    let d = diagnose_with(&trace, &config(), &[class(DiskClass::Hdd7200)]);
    let w = &d.what_if[0];
    assert_eq!((w.path_waits, w.path_waits_kept, w.requests, w.requests_left_out), (1, 1, 0, 1));
    assert_eq!(w.predicted_ns, 20 * MS, "the wait keeps its recorded length");
    assert!(w.text.contains("1 without a request kept as recorded"), "{}", w.text);
}

#[test]
fn only_one_device_can_be_put_on_the_other_disk() {
    let lo = Dev::new(7, 0);
    let trace = Builder::start()
        .other_disk(lo, "loop0")
        .run(100, 0, 10 * MS)
        .sched(100, 10 * MS, 20 * MS, IoWait)
        .raw_request(lo, 10 * MS, 19 * MS, 1000, 4096, 100, "app")
        .run(100, 20 * MS, 30 * MS)
        .sched(100, 30 * MS, 40 * MS, IoWait)
        .raw_request(DISK, 30 * MS, 39 * MS, 5000, 4096, 100, "app")
        .run(100, 40 * MS, 50 * MS)
        .ready_at_exit(50 * MS)
        .build();
    let rig: DiskParams =
        "custom:request=10ms,seek=0,rotation=0,near_seek=0,bandwidth=60MB/s".parse().unwrap();
    let d = diagnose_with(&trace, &config(), &[WhatIfSpec { disk: rig, only_dev: Some(lo) }]);
    let w = &d.what_if[0];
    // loop0: 10 ms + 4096 B at 60 MB/s (68,266 ns). vda keeps its measured model: too few
    // requests to measure, a non-rotational disk: the ssd defaults, 100 µs + 8,192 ns at 500 MB/s.
    assert_eq!(w.predicted_path_io_wait_ns, 10 * MS + 68_266 + 100_000 + 8_192);
    assert_eq!(w.only_dev, Some(lo));
}

#[test]
fn the_recorded_disk_is_measured_from_its_requests() {
    // 10 small far reads of 3 ms, 10 small sequential ones of 1 ms, 10 large ones of 1 MiB in 5 ms.
    let mut s = Builder::start();
    let mut t = 0;
    for i in 0..10u64 {
        s = s
            .raw_request(DISK, t, t + 3 * MS, 10_000_000 * (i + 1), 4096, 100, "app")
            .raw_request(DISK, t + 3 * MS, t + 4 * MS, 10_000_000 * (i + 1) + 8, 4096, 100, "app")
            .raw_request(DISK, t + 4 * MS, t + 9 * MS, 10_000_000 * (i + 1) + 16, 1 << 20, 100, "app");
        t += 10 * MS;
    }
    let trace = s.run(100, 0, t).ready_at_exit(t).build();
    let analysis = coldstart_analyze::analyze(&trace);
    let p = DiskParams::measure(&analysis.disks[0]);
    assert_eq!(p.class, DiskClass::Measured);
    // Median of the 20 small ones: the 11th of (10 × 1 ms, 10 × 3 ms).
    assert_eq!(p.request_ns, 3 * MS);
    // 1 MiB in 5 ms − 3 ms: 524 MB/s.
    assert_eq!(p.bandwidth_bytes_per_s.round(), (1_048_576.0 / 0.002f64).round());
    // Far (10 MB apart) 3 ms against near 1 ms: the 1 MiB reads count as neither (over 64 KiB).
    assert_eq!(p.seek_ns, 2 * MS);
    assert_eq!(p.queue_depth, 1, "a seeking disk serves one request at a time");
    assert!(p.source_of("request_ns").starts_with("median latency of 20"), "{}", p.source_of("request_ns"));
}

/// 40 waits of 10 ms, each ended by one 4 KiB read that took 0.2 ms from issue to
/// completion (it spent the rest in a queue before the block layer, like the slow-disk
/// rig's throttle), with 1 ms of CPU between them: ready at 440 ms.
fn throttled_reads() -> Trace {
    let mut s = Builder::start();
    let mut t = 0;
    for i in 0..40i64 {
        s = s.run(100, t, t + MS).sched(100, t + MS, t + 11 * MS, IoWait).raw_request(
            DISK,
            t + 11 * MS - 200_000,
            t + 11 * MS,
            1000 + 8 * i as u64,
            4096,
            100,
            "app",
        );
        t += 11 * MS;
    }
    s.ready_at_exit(t).build()
}

#[test]
fn a_queue_before_the_block_layer_is_fitted_to_the_recorded_waits() {
    let d = diagnose_with(&throttled_reads(), &config(), &[]);
    let model = &d.disks[0].model;
    // Each wait of 10 ms was served by one request: 10 ms less its transfer (4096 B at the
    // ssd default of 500 MB/s, 8,192 ns) per request, one at a time.
    assert_eq!(model.request_ns, 10 * MS - 8_192);
    assert_eq!(model.queue_depth, 1);
    assert!(
        model.source_of("request_ns").starts_with("fitted to the 0.400 s"),
        "{}",
        model.source_of("request_ns")
    );
    // The model check then gives the recorded waits back.
    let trace = throttled_reads();
    let analysis = coldstart_analyze::analyze(&trace);
    let measured: WhatIfSpec = coldstart_analyze::doctor::recorded_disk(&analysis).unwrap().into();
    let w = &diagnose_with(&trace, &config(), &[measured]).what_if[0];
    assert_eq!(w.predicted_path_io_wait_ns, 400 * MS);
    assert_eq!(w.disk.description, "each disk as recorded");
}

#[test]
fn waits_as_long_as_the_requests_keep_the_measured_latency() {
    // The same reads without the hidden queue: each request takes the whole 10 ms wait.
    let mut s = Builder::start();
    let mut t = 0;
    for i in 0..40i64 {
        s = s.run(100, t, t + MS).sched(100, t + MS, t + 11 * MS, IoWait).raw_request(
            DISK,
            t + MS,
            t + 11 * MS,
            1000 + 8 * i as u64,
            4096,
            100,
            "app",
        );
        t += 11 * MS;
    }
    let d = diagnose_with(&s.ready_at_exit(t).build(), &config(), &[]);
    let model = &d.disks[0].model;
    assert_eq!(model.request_ns, 10 * MS);
    assert!(
        model.source_of("request_ns").starts_with("median latency of 40"),
        "{}",
        model.source_of("request_ns")
    );
}

#[test]
fn the_largest_request_is_measured_when_there_are_enough() {
    let mut s = Builder::start();
    for i in 0..64i64 {
        let bytes = if i % 2 == 0 { 4096 } else { 128 * 1024 };
        s = s.raw_request(DISK, i * MS, i * MS + 500_000, 1000 + 512 * i as u64, bytes, 100, "app");
    }
    let trace = s.run(100, 0, 70 * MS).ready_at_exit(70 * MS).build();
    let analysis = coldstart_analyze::analyze(&trace);
    let p = DiskParams::measure(&analysis.disks[0]);
    assert_eq!(p.max_request_bytes, 128 * 1024);
    // Fewer requests: the class default stays.
    let few = Builder::start()
        .raw_request(DISK, 0, MS, 1000, 4096, 100, "app")
        .run(100, 0, 2 * MS)
        .ready_at_exit(2 * MS)
        .build();
    assert_eq!(DiskParams::measure(&coldstart_analyze::analyze(&few).disks[0]).max_request_bytes, 512 * 1024);
}

#[test]
fn the_wait_for_a_cpu_after_an_io_wait_goes_with_the_read() {
    // Runs 0–10 ms, waits 10–20 ms for a read, is runnable 20–25 ms before it runs again
    // (a busy machine), runs 25–35 ms: ready at 35 ms.
    let trace = Builder::start()
        .placed_file(1, "/usr/lib/app/data", 4096)
        .run(100, 0, 10 * MS)
        .fill(10 * MS, 100, 100, 1, 0, 1)
        .fill_origin(PageOrigin::Read)
        .request(10 * MS, 20 * MS, 1, 0, 4096, 100, "app")
        .sched(100, 10 * MS, 20 * MS, IoWait)
        .sched(100, 20 * MS, 25 * MS, Runnable)
        .run(100, 25 * MS, 35 * MS)
        .ready_at_exit(35 * MS)
        .build();
    let w = &diagnose_with(&trace, &config(), &[class(DiskClass::Ssd)]).what_if[0];
    assert_eq!(w.path_io_wait_ns, 10 * MS);
    assert_eq!(w.with_prefetch_ahead_ns, 20 * MS, "neither the I/O wait nor the wait to run after it");
    assert!(w.text.contains("nor the 5.0 ms waiting for a CPU"), "{}", w.text);
}

#[test]
fn requests_nobody_waited_for_still_take_a_slow_disks_time() {
    // 20 readahead requests of 4 KiB complete while the program runs 0–10 ms; then it waits
    // 10–11 ms for one more, and runs to ready at 20 ms.
    let mut s = Builder::start().run(100, 0, 10 * MS);
    for i in 0..20i64 {
        s = s.raw_request(DISK, i * 400_000, i * 400_000 + 100_000, 1000 + 8 * i as u64, 4096, 100, "app");
    }
    let trace = s
        .sched(100, 10 * MS, 11 * MS, IoWait)
        .raw_request(DISK, 10 * MS, 11 * MS, 5000, 4096, 100, "app")
        .run(100, 11 * MS, 20 * MS)
        .ready_at_exit(20 * MS)
        .build();
    let slow: DiskParams =
        "custom:request=10ms,seek=0,near_seek=0,rotation=0,bandwidth=60MB/s".parse().unwrap();
    let w = &diagnose_with(&trace, &config(), &[slow.into()]).what_if[0];
    // The wait alone: 20 ms − 1 ms + (10 ms + 68,266 ns). The disk: 21 × 10 ms one at a time
    // + 21 × 4096 B at 60 MB/s (1,433,600 ns).
    assert_eq!(w.disk_floor_ns, 21 * 10 * MS + 1_433_600);
    assert_eq!(w.predicted_ns, w.disk_floor_ns);
    assert!(w.text.contains("the busiest disk needs for all 21 requests"), "{}", w.text);
}

#[test]
fn a_wait_is_shared_among_files_by_the_cost_of_their_requests_not_by_pages() {
    // The 40 throttled waits fit the disk's request cost to ~10 ms; then one wait of 20 ms
    // (t0 + 1 ms .. t0 + 21 ms) is shared by a small file's one 4 KiB request and a large
    // file's one 512 KiB readahead request: 1 page against 128.
    let mut s = Builder::start();
    let mut t = 0;
    for i in 0..40i64 {
        s = s.run(100, t, t + MS).sched(100, t + MS, t + 11 * MS, IoWait).raw_request(
            DISK,
            t + 11 * MS - 200_000,
            t + 11 * MS,
            1000 + 8 * i as u64,
            4096,
            100,
            "app",
        );
        t += 11 * MS;
    }
    let (small, large) = (1, 2);
    let trace = s
        .placed_file(small, "/usr/share/locale/fr/LC_MESSAGES/app.mo", 4096)
        .placed_file(large, "/usr/lib/app/libbig.so", 512 * 1024)
        .run(100, t, t + MS)
        .fill(t + MS, 100, 100, small, 0, 1)
        .fill_origin(PageOrigin::Read)
        .fill(t + MS, 100, 100, large, 0, 128)
        .fill_origin(PageOrigin::Readahead)
        .sched(100, t + MS, t + 21 * MS, IoWait)
        .request(t + 11 * MS - 200_000, t + 11 * MS, small, 0, 4096, 100, "app")
        .request(t + 21 * MS - 200_000, t + 21 * MS, large, 0, 512 * 1024, 100, "app")
        .run(100, t + 21 * MS, t + 22 * MS)
        .ready_at_exit(t + 22 * MS)
        .build();
    // The analysis's own attribution splits the wait by pages: 1/129 of it to the small file.
    let analysis = coldstart_analyze::analyze(&trace);
    let last =
        analysis.critical_path.as_ref().unwrap().segments.iter().rfind(|s| s.kind == SegmentKind::IoWait);
    let by_pages = last.unwrap().files.iter().find(|f| f.file == small).unwrap().ns;
    assert_eq!(by_pages, 20 * MS / 129);

    let mut quiet = config();
    quiet.min_gain_ns = 0;
    let d = diagnose_with(&trace, &quiet, &[]);
    let model = &d.disks[0].model;
    assert_eq!(model.queue_depth, 1, "the hidden queue was fitted: {}", model.source_of("request_ns"));
    // Each request costs request_ns + its transfer at the ssd default of 500 MB/s (8,192 ns
    // for 4 KiB, 1,048,576 ns for 512 KiB): the small file takes nearly half of the wait.
    let (small_cost, large_cost) = (model.request_ns + 8_192, model.request_ns + 1_048_576);
    let expected = 20 * MS - 20 * MS * large_cost / (small_cost + large_cost);
    let lang = one(&d, FindingKind::OtherLanguages);
    assert_eq!(lang.evidence.files[0].file, small);
    assert_eq!(lang.evidence.files[0].wait_ns, expected);
    assert_eq!(lang.gain.ns, expected);
    assert!((9_500_000..10 * MS).contains(&expected), "{expected}: about half of 20 ms");
}

/// On a volume restored from a snapshot, the first read of each chunk waits for its fetch;
/// a later read of the same chunk costs the cloud volume alone.
#[test]
fn a_snapshot_volume_adds_a_fetch_to_the_first_read_of_each_chunk() {
    // Three waits of 10 ms: page 0 of a file, page 1 of it (the same 512 KiB chunk), then a
    // second file 32 MiB further on the recorded disk, 8 KiB further on the volume made from
    // the files (the same chunk).
    let trace = Builder::start()
        .placed_file(1, "/usr/lib/app/a", 8192)
        .placed_file(2, "/usr/lib/app/b", 4096)
        .run(100, 0, 10 * MS)
        .fill(10 * MS, 100, 100, 1, 0, 1)
        .request(10 * MS, 20 * MS, 1, 0, 4096, 100, "app")
        .sched(100, 10 * MS, 20 * MS, IoWait)
        .run(100, 20 * MS, 30 * MS)
        .fill(30 * MS, 100, 100, 1, 1, 1)
        .request(30 * MS, 40 * MS, 1, 1, 4096, 100, "app")
        .sched(100, 30 * MS, 40 * MS, IoWait)
        .run(100, 40 * MS, 50 * MS)
        .fill(50 * MS, 100, 100, 2, 0, 1)
        .request(50 * MS, 60 * MS, 2, 0, 4096, 100, "app")
        .sched(100, 50 * MS, 60 * MS, IoWait)
        .ready_at_exit(60 * MS)
        .build();
    let d = diagnose_with(&trace, &config(), &[class(DiskClass::Cloud), class(DiskClass::Snapshot)]);
    let (cloud, snapshot) = (&d.what_if[0], &d.what_if[1]);
    let snapshot_disk = DiskParams::class_defaults(DiskClass::Snapshot);
    // 100 ms, then 512 KiB at 300 MiB/s.
    let fetch = snapshot_disk.fetch_ns();
    assert_eq!(fetch, 101_666_666);
    assert_eq!((cloud.chunk_fetches, snapshot.chunk_fetches), (0, 1));
    assert_eq!(snapshot.predicted_path_io_wait_ns, cloud.predicted_path_io_wait_ns + fetch);
    assert_eq!(snapshot.predicted_ns, cloud.predicted_ns + fetch);
    assert_eq!(snapshot.with_prefetch_ahead_ns, cloud.with_prefetch_ahead_ns, "the plan fetched them ahead");
    assert_eq!(snapshot.prefetch_replay_ns, cloud.prefetch_replay_ns + fetch);
    assert!(snapshot.text.contains("reads 1 chunk of 512.0 KiB first"), "{}", snapshot.text);
    assert!(!cloud.text.contains("snapshot"), "{}", cloud.text);
}

/// Chunks are counted where the files lie on a volume made from them (packed in the order of
/// their first extent), not on the recorded disk, where `placed_file` puts them 32 MiB apart.
#[test]
fn a_snapshot_volume_counts_chunks_on_the_files_packed_in_order() {
    const KIB: u64 = 1024;
    // Packed: a at 0–384 KiB (chunk 0), b at 384–768 KiB (chunks 0 and 1), c at 768–1024 KiB
    // (chunk 1). Four waits of 10 ms, each one 128 KiB request: a from 0 (chunk 0, a fetch),
    // b from 0 (packed at 384 KiB: chunk 0, fetched), b from 128 KiB (packed at 512 KiB:
    // chunk 1, a fetch), c from 0 (packed at 768 KiB: chunk 1, fetched). Two fetches; on the
    // recorded layout each file is a chunk of its own, three at least.
    let mut b = Builder::start()
        .placed_file(1, "/usr/lib/app/a", 384 * KIB)
        .placed_file(2, "/usr/lib/app/b", 384 * KIB)
        .placed_file(3, "/usr/lib/app/c", 256 * KIB);
    for (i, (file, page)) in [(1, 0), (2, 0), (2, 32), (3, 0)].into_iter().enumerate() {
        let t = i as Nanos * 20 * MS;
        b = b
            .run(100, t, t + 10 * MS)
            .fill(t + 10 * MS, 100, 100, file, page, 32)
            .request(t + 10 * MS, t + 20 * MS, file, page, 128 * 1024, 100, "app")
            .sched(100, t + 10 * MS, t + 20 * MS, IoWait);
    }
    let trace = b.ready_at_exit(80 * MS).build();
    let d = diagnose_with(&trace, &config(), &[class(DiskClass::Cloud), class(DiskClass::Snapshot)]);
    let (cloud, snapshot) = (&d.what_if[0], &d.what_if[1]);
    let fetch = DiskParams::class_defaults(DiskClass::Snapshot).fetch_ns();
    assert_eq!(snapshot.chunk_fetches, 2);
    assert_eq!(snapshot.predicted_path_io_wait_ns, cloud.predicted_path_io_wait_ns + 2 * fetch);
    assert_eq!(snapshot.predicted_ns, cloud.predicted_ns + 2 * fetch);
    assert_eq!(
        snapshot.with_prefetch_ahead_ns, cloud.with_prefetch_ahead_ns,
        "a block plan replayed ahead fetched them"
    );
}

/// A request issued after another of the same wait completed depended on it: on a snapshot
/// volume its fetch follows the other's; issued while the other was in flight, they are
/// fetched side by side.
#[test]
fn a_snapshot_volume_fetches_a_waits_dependent_reads_one_after_the_other() {
    const KIB: u64 = 1024;
    let fetch = DiskParams::class_defaults(DiskClass::Snapshot).fetch_ns();
    // Packed: a at 0–512 KiB (chunk 0), b at 512 KiB (chunk 1). One wait of 20 ms reads both.
    for (second_issue, fetches) in [(16 * MS, 2), (12 * MS, 1)] {
        let trace = Builder::start()
            .placed_file(1, "/usr/lib/app/a", 512 * KIB)
            .placed_file(2, "/usr/lib/app/b", 4 * KIB)
            .run(100, 0, 10 * MS)
            .fill(10 * MS, 100, 100, 1, 0, 1)
            .request(10 * MS, 15 * MS, 1, 0, 4096, 100, "app")
            .fill(second_issue, 100, 100, 2, 0, 1)
            .request(second_issue, 30 * MS, 2, 0, 4096, 100, "app")
            .sched(100, 10 * MS, 30 * MS, IoWait)
            .run(100, 30 * MS, 40 * MS)
            .ready_at_exit(40 * MS)
            .build();
        let d = diagnose_with(&trace, &config(), &[class(DiskClass::Cloud), class(DiskClass::Snapshot)]);
        let (cloud, snapshot) = (&d.what_if[0], &d.what_if[1]);
        assert_eq!(snapshot.chunk_fetches, 2);
        assert_eq!(
            snapshot.predicted_path_io_wait_ns,
            cloud.predicted_path_io_wait_ns + fetches * fetch,
            "second read issued at {second_issue} ns"
        );
    }
}

/// A chunk first read ahead while the start ran (no wait counted it) is needed soon after: on
/// a snapshot volume the next wait waits for the rest of its fetch.
#[test]
fn a_snapshot_volume_makes_the_next_wait_wait_for_a_fetch_read_ahead() {
    let fetch = DiskParams::class_defaults(DiskClass::Snapshot).fetch_ns();
    // Page 0 read ahead at 2 ms while running (chunk 0, a fetch); the wait at 10 ms reads page
    // 1 (chunk 0 again): it waits for the fetch, less the 8 ms since its issue.
    let trace = Builder::start()
        .placed_file(1, "/usr/lib/app/a", 8192)
        .run(100, 0, 10 * MS)
        .fill(2 * MS, 100, 100, 1, 0, 1)
        .request(2 * MS, 3 * MS, 1, 0, 4096, 100, "app")
        .fill(10 * MS, 100, 100, 1, 1, 1)
        .request(10 * MS, 20 * MS, 1, 1, 4096, 100, "app")
        .sched(100, 10 * MS, 20 * MS, IoWait)
        .ready_at_exit(20 * MS)
        .build();
    let d = diagnose_with(&trace, &config(), &[class(DiskClass::Cloud), class(DiskClass::Snapshot)]);
    let (cloud, snapshot) = (&d.what_if[0], &d.what_if[1]);
    assert_eq!(snapshot.chunk_fetches, 1);
    assert_eq!(snapshot.predicted_path_io_wait_ns, cloud.predicted_path_io_wait_ns + fetch - 8 * MS);
    assert_eq!(snapshot.block_plan_fetch_ns, fetch, "a block plan fetches the one chunk ahead");
}
