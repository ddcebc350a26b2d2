//! The analysis never fails on odd data: it returns results and says what was odd.

mod common;

use coldstart_trace::ThreadState::*;
use coldstart_trace::*;
use common::{Builder, Facet, MS, check};
use proptest::prelude::*;

#[test]
fn an_empty_trace_is_analysed_with_warnings() {
    let trace = Builder::new().build();
    check(&trace, Facet::Warnings, "NoSched 0\nNoReady 1");
    check(&trace, Facet::CriticalPath, "none");
    check(&trace, Facet::Phases, "0-10000 Wait: waiting — 10.000 s");
}

#[test]
fn losses_unknown_and_unresolved_files_gaps_and_stray_events_are_warned_about() {
    let mut trace = Builder::new()
        .loss(LossSource::Tracefs, "cpu1 overrun", 3)
        .loss(LossSource::Fanotify, "overflow", 0)
        .unresolved_file(2)
        .fill(MS, 100, 100, 7, 0, 1)
        .fill(2 * MS, 100, 100, 2, 0, 2)
        .fill(20_000 * MS, 100, 100, 2, 2, 2)
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 20 * MS, 30 * MS, Running)
        .sched(100, 25 * MS, 26 * MS, Running)
        .sched(100, 40 * MS, 35 * MS, Running)
        .ready(30 * MS, "mark:missing")
        .build();
    trace.meta.partial = true;
    check(
        &trace,
        Facet::Warnings,
        "Lost 3
         Partial 1
         UnknownFile 1
         UnresolvedFile 1
         SchedGap 1
         SchedOverlap 2
         OutOfRange 1
         ReadyMarkMissing 1",
    );
}

#[test]
fn a_trace_without_a_ready_point_ends_at_the_root_exit() {
    let trace = Builder::new().sched(100, 0, 5 * MS, Running).exits(100, 5 * MS).build();
    check(
        &trace,
        Facet::Overview,
        "origin=0 end=5 processes=1 started=1 files=0 reads=0 seeks=0 pages=0 bytes=0
         ready=5 exit ttr=5 pid=100 tid=100",
    );
}

fn arbitrary_trace() -> impl Strategy<Value = Trace> {
    let time = -5i64..120;
    let state = prop_oneof![Just(Running), Just(Runnable), Just(IoWait), Just(Sleeping), Just(Stopped)];
    let fills = prop::collection::vec((time.clone(), 99i32..103, 0u32..6, 0u64..20, 1u32..5), 0..40);
    let sched = prop::collection::vec((99i32..103, time.clone(), 0i64..30, state), 0..40);
    let wakeups = prop::collection::vec((time.clone(), 99i32..103, prop::option::of(98i32..104)), 0..20);
    let blocks = prop::collection::vec((time.clone(), 0u64..10_000, 1u32..64), 0..20);
    let marks = prop::collection::vec((time.clone(), 99i32..103), 0..4);
    let kind = prop_oneof![Just(AccessKind::Read), Just(AccessKind::Fault), Just(AccessKind::MapAround)];
    let accesses = prop::collection::vec((time.clone(), 0u32..6, 0u64..20, 0u32..5, kind), 0..30);
    let ready = prop::option::of((time, 99i32..103));
    let tables = (fills, sched, wakeups, blocks, marks, accesses, ready);
    tables.prop_map(|(fills, sched, wakeups, blocks, marks, accesses, ready)| {
        let mut b = Builder::new()
            .duration(100 * MS)
            .process(101, 100, "child", Some(3 * MS))
            .thread(102, 101, "child-2")
            .file(1, "/a/b")
            .file(2, "/a/c")
            .unresolved_file(3)
            .metadata_file(4)
            .extent(1, 0, 8192)
            .disk(4096);
        for (t, pid, file, index, pages) in fills {
            b = b.fill(t * MS, pid, pid, file, index, pages);
        }
        for (tid, start, len, state) in sched {
            b = b.sched(tid, start * MS, (start + len) * MS, state);
        }
        for (t, file, index, pages, kind) in accesses {
            b = b.access(t * MS, 100, 100, file, index, pages, kind);
        }
        for (t, tid, waker) in wakeups {
            b = b.wakeup(t * MS, tid, waker);
        }
        for (t, sector, sectors) in blocks {
            b = b.block(t * MS, sector, sectors * 512, "R");
        }
        for (i, (t, pid)) in marks.iter().enumerate() {
            b = b.mark(t * MS, *pid, &format!("m{i}"));
        }
        if let Some((t, pid)) = ready {
            b = b.ready(t * MS, &format!("mark:m{}", pid % 2));
        }
        b.build()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn any_trace_is_analysed_and_its_time_accounts_add_up(trace in arbitrary_trace()) {
        common::check_invariants(&trace);
    }
}
