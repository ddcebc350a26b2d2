//! Read-ahead: pages a device read ahead and no program used are a finding when the critical
//! path waited for their transfer, none when it did not; the what-if on a disk with a smaller
//! read-ahead costs the recorded long requests as that disk would have made them.

mod common;

use coldstart_analyze::doctor::{Audience, DiskClass, DiskParams, FindingKind, WhatIfSpec};
use coldstart_trace::ThreadState::*;
use coldstart_trace::*;
use common::doctor::{check_invariants, config, diagnose, diagnose_with, figure, of_kind, one, render};
use common::{Builder, MS};

const PAGES_8_MIB: u32 = 2048;

/// The app faults `used` pages of a 16 MiB library (page 0 on, one access of `used` pages) and
/// the device reads 8 MiB ahead for it in one request: waited for 100 ms on the critical path
/// when `waited`, else read while the app runs on (the access comes after it). Ready at 110 ms.
fn big_read_ahead(read_ahead_kb: Option<u32>, used: u32, waited: bool) -> Trace {
    let b = Builder::start().placed_file(1, "/usr/lib/libbig.so", 16 << 20).run(100, 0, 5 * MS);
    let b = b.fill(5 * MS, 100, 100, 1, 0, PAGES_8_MIB).fill_origin(PageOrigin::Fault).request(
        5 * MS,
        105 * MS,
        1,
        0,
        PAGES_8_MIB * 4096,
        100,
        "app",
    );
    let b = if waited { b.sched(100, 5 * MS, 105 * MS, IoWait) } else { b.run(100, 5 * MS, 105 * MS) };
    let mut t = b
        .access(105 * MS, 100, 100, 1, 0, used, AccessKind::Fault)
        .run(100, 105 * MS, 110 * MS)
        .ready_at_exit(110 * MS)
        .build();
    t.disks[0].read_ahead_kb = read_ahead_kb;
    t
}

#[test]
fn read_ahead_never_used_that_the_path_waited_for_is_a_finding_for_the_administrator() {
    let d = diagnose(&big_read_ahead(Some(8192), 1, true));
    check_invariants(&d);
    let f = one(&d, FindingKind::WastedReadahead);
    // The 100 ms wait was one request of 8 MiB on the measured disk (too few requests to
    // measure: the ssd class, 0.1 ms per request, 500 MB/s): 2,047 of its 2,048 pages unused,
    // whose transfer is 16.769 ms of the request's 16.877 ms.
    let unused = 2047.0 * 4096.0 / 500e6;
    let cost = 1e-4 + 8_388_608.0 / 500e6;
    let expected = (0.1 * unused / cost * 1e9) as i64;
    assert!((f.gain.ns - expected).abs() <= 1_000, "{} against {expected}: {}", f.gain.ns, f.gain.text);
    assert_eq!(figure(f, "unused_bytes"), 2047.0 * 4096.0);
    assert_eq!(f.audience, Audience::Administrator);
    assert!(f.title.starts_with("vda (read_ahead_kb 8192) read 8.0 MiB ahead"), "{}", f.title);
    assert!(f.suggestion.contains("echo 128 > /sys/block/vda/queue/read_ahead_kb"), "{}", f.suggestion);
    assert!(f.suggestion.contains("blockdev --setra 256 /dev/vda"), "{}", f.suggestion);
    assert_eq!(f.evidence.files[0].name, "/usr/lib/libbig.so");

    // At the kernel's default read-ahead the waste is the program's access pattern: its developers'.
    let d = diagnose(&big_read_ahead(Some(128), 1, true));
    let f = one(&d, FindingKind::WastedReadahead);
    assert_eq!(f.audience, Audience::Developers);
    assert!(
        f.suggestion.contains("POSIX_FADV_RANDOM") && f.suggestion.contains("libbig.so"),
        "{}",
        f.suggestion
    );
}

#[test]
fn read_ahead_the_path_never_waited_for_costs_nothing() {
    let d = diagnose(&big_read_ahead(Some(8192), 1, false));
    assert!(of_kind(&d, FindingKind::WastedReadahead).is_empty(), "{}", render(&d));
    // Nor when what was read ahead was used.
    let d = diagnose(&big_read_ahead(Some(8192), PAGES_8_MIB, true));
    assert!(of_kind(&d, FindingKind::WastedReadahead).is_empty(), "{}", render(&d));
}

#[test]
fn the_what_if_models_the_other_disks_read_ahead() {
    let hdd: WhatIfSpec = DiskParams::class_defaults(DiskClass::Hdd).into();
    // Half of the 8 MiB used: on a disk that reads 128 KiB ahead, 32 requests of 128 KiB, each
    // a near seek from the last, instead of one of 8 MiB.
    let d = diagnose_with(
        &big_read_ahead(Some(8192), PAGES_8_MIB / 2, true),
        &config(),
        std::slice::from_ref(&hdd),
    );
    let w = &d.what_if[0];
    assert_eq!((w.read_ahead_bytes, w.recorded_read_ahead_bytes), (Some(128 * 1024), Some(8 << 20)));
    assert_eq!((w.read_ahead_cut, w.read_ahead_pieces), (1, 32));
    assert!(w.text.contains("read-ahead of 128.0 KiB instead of the recorded 8.0 MiB"), "{}", w.text);
    let p = &hdd.disk;
    let first = p.request_ns + p.positioning_ns(None) + p.transfer_ns(128 * 1024);
    let rest = 31 * (p.request_ns + p.positioning_ns(Some(128 * 1024)) + p.transfer_ns(128 * 1024));
    assert_eq!(w.predicted_path_io_wait_ns, first + rest);

    // A trace that does not say its read-ahead is costed as recorded, and says so.
    let d =
        diagnose_with(&big_read_ahead(None, PAGES_8_MIB / 2, true), &config(), std::slice::from_ref(&hdd));
    let w = &d.what_if[0];
    assert_eq!((w.read_ahead_cut, w.recorded_read_ahead_bytes), (0, None));
    assert!(w.text.contains("recorded unknown"), "{}", w.text);
    assert_eq!(w.predicted_path_io_wait_ns, p.request_ns + p.positioning_ns(None) + p.transfer_ns(8 << 20));
}
