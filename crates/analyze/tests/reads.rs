//! Coalesced reads, file-level seeks and rankings on synthetic traces with known answers.

mod common;

use coldstart_trace::AccessKind;
use coldstart_trace::ThreadState::*;
use common::{Builder, Facet, MS, check};

#[test]
fn three_non_contiguous_reads_of_one_file_are_three_reads_and_two_seeks() {
    let trace = Builder::new()
        .file(1, "/usr/lib/libfoo.so")
        .fill(MS, 100, 100, 1, 0, 1)
        .fill(2 * MS, 100, 100, 1, 10, 1)
        .fill(3 * MS, 100, 100, 1, 20, 1)
        .build();
    check(
        &trace,
        Facet::Reads,
        "1 100 /usr/lib/libfoo.so 0-0
         2 100 /usr/lib/libfoo.so 10-10 seek
         3 100 /usr/lib/libfoo.so 20-20 seek",
    );
    check(&trace, Facet::ByFile, "/usr/lib/libfoo.so reads=3 seeks=2 pages=3 io=0 spread=1");
}

#[test]
fn contiguous_fills_merge_per_process_and_file_even_when_interleaved() {
    // The binary's first 32 KiB in two fills, a library read in between, then the
    // library continued: two reads; a second process reading the same pages is its own read.
    let trace = Builder::new()
        .process(200, 100, "helper", Some(MS))
        .file(1, "/usr/bin/app")
        .file(2, "/usr/lib/libbar.so")
        .fill(MS, 100, 100, 1, 0, 4)
        .fill(2 * MS, 100, 100, 2, 0, 2)
        .fill(3 * MS, 100, 100, 1, 4, 4)
        .fill(4 * MS, 100, 100, 2, 2, 1)
        .fill(5 * MS, 200, 200, 1, 0, 8)
        .build();
    check(
        &trace,
        Facet::Reads,
        "1 100 /usr/bin/app 0-7
         2 100 /usr/lib/libbar.so 0-2
         5 200 /usr/bin/app 0-7",
    );
    check(
        &trace,
        Facet::ByFile,
        "/usr/bin/app reads=2 seeks=0 pages=16 io=0 spread=2
         /usr/lib/libbar.so reads=1 seeks=0 pages=3 io=0 spread=1",
    );
    check(
        &trace,
        Facet::ByProcess,
        "app reads=2 seeks=0 pages=11 io=0 spread=2
         helper reads=1 seeks=0 pages=8 io=0 spread=1",
    );
}

#[test]
fn a_backward_read_and_a_re_read_are_seeks() {
    let trace = Builder::new()
        .file(1, "/data")
        .fill(MS, 100, 100, 1, 8, 8)
        .fill(2 * MS, 100, 100, 1, 0, 8)
        .fill(3 * MS, 100, 100, 1, 4, 1)
        .fill(4 * MS, 100, 100, 1, 5, 1)
        .build();
    check(
        &trace,
        Facet::Reads,
        "1 100 /data 8-15
         2 100 /data 0-7 seek
         3 100 /data 4-5 seek",
    );
}

#[test]
fn a_thread_blocked_100_ms_while_pages_of_x_arrive_attributes_100_ms_to_x() {
    let trace = Builder::new()
        .file(1, "/usr/lib/x.so")
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 110 * MS, IoWait)
        .fill(50 * MS, 100, 100, 1, 0, 4)
        .sched(100, 110 * MS, 120 * MS, Running)
        .build();
    check(&trace, Facet::ByFile, "/usr/lib/x.so reads=1 seeks=0 pages=4 io=100 spread=1");
    check(&trace, Facet::Threads, "100 run=20 runnable=0 io=100 sleep=0 attributed=100");
}

#[test]
fn an_io_wait_is_shared_by_pages_among_the_files_added_in_the_slice_that_led_to_it() {
    // The page is added to the cache before the thread blocks on it: fills in the
    // running slice before the wait count, fills before that slice do not.
    let trace = Builder::new()
        .file(1, "/a")
        .file(2, "/b")
        .file(3, "/c")
        .fill(MS, 100, 100, 3, 0, 1)
        .sched(100, 0, 5 * MS, Running)
        .sched(100, 5 * MS, 6 * MS, Sleeping)
        .sched(100, 6 * MS, 10 * MS, Running)
        .fill(8 * MS, 100, 100, 1, 0, 3)
        .fill(9 * MS, 100, 100, 2, 0, 1)
        .sched(100, 10 * MS, 50 * MS, IoWait)
        .sched(100, 50 * MS, 60 * MS, Running)
        .build();
    check(
        &trace,
        Facet::ByFile,
        "/a reads=1 seeks=0 pages=3 io=30 spread=1
         /b reads=1 seeks=0 pages=1 io=10 spread=1
         /c reads=1 seeks=0 pages=1 io=0 spread=1",
    );
}

#[test]
fn an_io_wait_without_fills_stays_unattributed() {
    let trace = Builder::new()
        .file(1, "/a")
        .fill(MS, 100, 100, 1, 0, 1)
        .sched(100, 0, 2 * MS, Running)
        .sched(100, 2 * MS, 3 * MS, Sleeping)
        .sched(100, 3 * MS, 4 * MS, Running)
        .sched(100, 4 * MS, 9 * MS, IoWait)
        .build();
    check(&trace, Facet::Threads, "100 run=3 runnable=0 io=5 sleep=1 attributed=0");
}

#[test]
fn headline_figures_count_pages_bytes_and_processes() {
    let trace = Builder::new()
        .process(200, 100, "helper", Some(3 * MS))
        .file(1, "/a")
        .file(2, "/b")
        .fill(MS, 100, 100, 1, 0, 2)
        .fill(4 * MS, 200, 200, 2, 0, 1)
        .fill(5 * MS, 200, 200, 2, 5, 1)
        .exits(100, 20 * MS)
        .build();
    check(
        &trace,
        Facet::Overview,
        "origin=0 end=20 processes=2 started=2 files=2 reads=3 seeks=1 pages=4 bytes=16384
         ready=20 exit ttr=20 pid=100 tid=100",
    );
}

#[test]
fn readahead_pages_never_asked_for_are_unused() {
    // 16 pages read ahead; the program reads 0-3 and faults on 8; 9-11 are mapped
    // around that fault; 4-7 and 12-15 are never asked for. /b is asked for, cached.
    let trace = Builder::new()
        .file(1, "/a")
        .file(2, "/b")
        .fill(MS, 100, 100, 1, 0, 16)
        .access(MS, 100, 100, 1, 0, 4, AccessKind::Read)
        .access(2 * MS, 100, 100, 1, 8, 1, AccessKind::Fault)
        .access(2 * MS, 100, 100, 1, 9, 3, AccessKind::MapAround)
        .access(3 * MS, 100, 100, 2, 0, 2, AccessKind::Read)
        .build();
    check(
        &trace,
        Facet::PageUse,
        "filled=16 used=5 around=3 unused=8 asked=7 cached=2
         /a filled=16 used=5 around=3 unused=8",
    );
    check(&Builder::new().file(1, "/a").fill(MS, 100, 100, 1, 0, 16).build(), Facet::PageUse, "not recorded");
}
