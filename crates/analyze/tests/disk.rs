//! Disk-level seeks, the file of each block request, and the diskstats cross-check.

mod common;

use common::{Builder, Facet, MS, check};

#[test]
fn requests_are_placed_on_files_by_their_extents_and_seeks_are_measured_between_them() {
    let trace = Builder::new()
        .disk(65536)
        .file(1, "/a")
        .file(2, "/b")
        .extent(1, 1 << 20, 64 << 10)
        .extent(2, 100 << 20, 64 << 10)
        .block(MS, 2048, 8192, "R")
        .block(2 * MS, 2064, 8192, "RA")
        .block(3 * MS, 204_800, 4096, "R")
        .block(4 * MS, 2080, 4096, "R")
        .block(5 * MS, 999_999, 4096, "RM")
        .block(6 * MS, 3000, 4096, "R")
        .build();
    check(
        &trace,
        Facet::Disk,
        "vda coverage=0.50 latency=1 reissued=0 requests=6 sequential=1 forward=2/1200631 backward=2/1199735 far=4
         metadata=1/4096 unknown=1/4096
         /a requests=3 bytes=20480 far=1
         /b requests=1 bytes=4096 far=1",
    );
}

#[test]
fn a_request_on_pages_of_the_filesystem_metadata_is_metadata() {
    // Metadata page 500 is disk byte 2,048,000, sector 4000.
    let trace = Builder::new()
        .disk(4096)
        .metadata_file(9)
        .fill(MS, 100, 100, 9, 500, 1)
        .block(MS, 4000, 4096, "R")
        .build();
    check(
        &trace,
        Facet::Disk,
        "vda coverage=1.00 latency=1 reissued=0 requests=1 sequential=0 forward=0/0 backward=0/0 far=0
         metadata=1/4096 unknown=0/0",
    );
}

#[test]
fn flushes_and_writes_do_not_count_as_reads_in_the_cross_check() {
    let mut trace = Builder::new().disk(8192).block(MS, 100, 4096, "R").block(2 * MS, 108, 4096, "W").build();
    trace.block_ios.push(coldstart_trace::BlockIo {
        issue_ns: None,
        complete_ns: Some(3 * MS),
        dev: coldstart_trace::Dev::new(254, 0),
        sector: None,
        bytes: 0,
        op: coldstart_trace::BlockOp::Flush,
        rwbs: "FF".into(),
        ..Default::default()
    });
    check(
        &trace,
        Facet::Disk,
        "vda coverage=0.50 latency=1 reissued=0 requests=1 sequential=0 forward=0/0 backward=0/0 far=0
         metadata=0/0 unknown=1/4096",
    );
    // The write is counted apart: it is not a seek of the start, nor a read of a file.
    let disk = &coldstart_analyze::analyze(&trace).disks[0];
    assert_eq!((disk.write_requests, disk.write_bytes), (1, 4096));
    assert_eq!(disk.requests.iter().filter(|r| r.distance_sectors.is_some()).count(), 0);
}

#[test]
fn seek_distances_have_a_median_and_a_distribution_not_a_sum() {
    // Reads at 0, then 64 KiB, 1 GiB and 2 GiB away and back: sums of distances would
    // exceed the disk; the median and the distribution do not.
    const SECTORS_PER_MIB: u64 = 2048;
    let mut builder = Builder::new().disk(8192);
    for (i, mib) in [0, 64, 1024, 3072, 16].into_iter().enumerate() {
        builder = builder.block((i as i64 + 1) * MS, mib * SECTORS_PER_MIB, 4096, "R");
    }
    let disk = &coldstart_analyze::analyze(&builder.build()).disks[0];
    let s = &disk.seeks;
    assert_eq!((s.forward, s.backward), (3, 1));
    // Distances from each request's end (8 sectors on): 64 MiB − 4 KiB, 960 MiB − 4 KiB,
    // 2 GiB − 4 KiB, 3056 MiB + 4 KiB.
    assert_eq!(
        (s.distances.under_1_mib, s.distances.under_128_mib, s.distances.under_1_gib, s.distances.farther),
        (0, 1, 1, 2)
    );
    assert_eq!(s.median_distance_bytes, Some((2048 << 20) - 4096));
}

#[test]
fn a_request_issued_again_while_in_flight_is_counted_once() {
    // A requeued request is issued twice and completes once. Paired by sector in
    // order, the second issue took the completion of a later request of the same
    // sector, which was left without one: both are paired again here.
    let mut trace =
        Builder::new().disk(8192).block(MS, 100, 4096, "R").block(50 * MS, 100, 4096, "R").build();
    trace.block_ios[0].complete_ns = Some(3 * MS);
    let mut again = trace.block_ios[0].clone();
    again.issue_ns = Some(2 * MS);
    again.complete_ns = Some(51 * MS);
    trace.block_ios.push(again);
    trace.block_ios[1].complete_ns = None;
    check(
        &trace,
        Facet::Disk,
        "vda coverage=1.00 latency=2 reissued=1 requests=2 sequential=0 forward=0/0 backward=1/8 far=0
         metadata=0/0 unknown=2/8192",
    );
}
