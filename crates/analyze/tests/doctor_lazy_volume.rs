//! The `lazy_volume` rule: a start whose first read of each chunk of its volume waited for a
//! fetch (later reads of the chunk fast) is a first read of a volume restored from a snapshot;
//! the gain is the time spent waiting on fetches less the same chunks fetched 16 at a time.
//! A hard disk's seeks (first reads slow, but not many times the rest) and a volume that is
//! slow for every read are not fetches; nor are a handful of slow first reads.

mod common;

use coldstart_analyze::doctor::FindingKind;
use coldstart_trace::{Dev, Nanos, Trace};
use common::doctor::{check_invariants, diagnose, figure, input, of_kind, one};
use common::{Builder, MS};

const VOLUME: Dev = Dev::new(7, 0);
const CHUNK_SECTORS: u64 = 1024;

/// `chunks` chunks read one after another: each chunk's first 4 KiB read takes `first`,
/// then three more reads of the chunk take `repeat` each; ready when the last is done.
fn start_on(chunks: u64, first: Nanos, repeat: Nanos) -> Trace {
    let mut b = Builder::new();
    let mut t = 10 * MS;
    for c in 0..chunks {
        let sector = (c * 7 % 97) * CHUNK_SECTORS + 8;
        b = b.raw_request(VOLUME, t, t + first, sector, 4096, 100, "app");
        t += first;
        for r in 1..=3 {
            b = b.raw_request(VOLUME, t, t + repeat, sector + r * 64, 4096, 100, "app");
            t += repeat;
        }
    }
    b.ready(t, "exit").build()
}

#[test]
fn first_reads_waiting_for_fetches_are_a_lazily_fetched_volume() {
    let d = diagnose(&start_on(40, 100 * MS, MS));
    check_invariants(&d);
    let f = one(&d, FindingKind::LazyVolume);
    assert_eq!(d.findings[0].kind, FindingKind::LazyVolume, "the first finding");
    assert_eq!(figure(f, "chunks"), 40.0);
    assert_eq!(figure(f, "first_read_ns"), (100 * MS) as f64);
    assert_eq!(figure(f, "repeat_read_ns"), MS as f64);
    assert_eq!(figure(f, "most_fetches_in_flight"), 1.0);
    // 40 fetches of 100 ms one after another; with a plan, 3 rounds of 16 at 100 ms.
    assert_eq!(input(f, "fetch_wait_ns"), (4_000 * MS) as f64);
    assert_eq!(f.gain.ns, 3_700 * MS);
    assert!(f.suggestion.contains("prefetch plan --blocks app.coldstart --image IMAGE"), "{}", f.suggestion);
    assert!(f.title.contains("40 chunks"), "{}", f.title);
}

#[test]
fn seeks_slow_volumes_and_a_few_slow_reads_are_not_fetches() {
    for (what, trace) in [
        ("a hard disk's seeks", start_on(40, 12 * MS, 6 * MS)),
        ("a volume slow for every read", start_on(40, 100 * MS, 60 * MS)),
        ("a few slow first reads", start_on(10, 100 * MS, MS)),
    ] {
        let d = diagnose(&trace);
        assert!(of_kind(&d, FindingKind::LazyVolume).is_empty(), "{what}: {:?}", d.findings[0].title);
    }
}

/// `app` starts the helper `setup` at 5 ms and sleeps until it exits; `setup` spends its
/// time waiting for 30 first reads of the lazily fetched volume (100 ms each, then three 1 ms
/// reads of the same chunk); `app` then runs 3.5 s to ready.
fn helper_waiting_on_fetches() -> Trace {
    let mut b = Builder::start().program(200, 100, "setup", 5 * MS, None).run(100, 0, 5 * MS);
    let mut t = 5 * MS;
    for c in 0..30u64 {
        let sector = c * 3 * CHUNK_SECTORS;
        b = b.raw_request(VOLUME, t, t + 100 * MS, sector, 4096, 200, "setup").sched(
            200,
            t,
            t + 100 * MS,
            coldstart_trace::ThreadState::IoWait,
        );
        t += 100 * MS;
        for r in 1..=3 {
            b = b.raw_request(VOLUME, t, t + MS, sector + r * 64, 4096, 200, "setup").sched(
                200,
                t,
                t + MS,
                coldstart_trace::ThreadState::IoWait,
            );
            t += MS;
        }
    }
    b.exits(200, t)
        .sleep(100, 5 * MS, t, Some(200))
        .run(100, t, t + 3_500 * MS)
        .ready_at_exit(t + 3_500 * MS)
        .build()
}

#[test]
fn a_helper_slow_because_of_the_fetches_says_so() {
    let d = diagnose(&helper_waiting_on_fetches());
    check_invariants(&d);
    let lazy = one(&d, FindingKind::LazyVolume);
    assert_eq!(figure(lazy, "chunks"), 30.0);
    let helper = one(&d, FindingKind::HeavyHelper);
    assert_eq!(helper.confidence, coldstart_analyze::doctor::Confidence::Low);
    let caveat = helper.caveat.as_deref().unwrap_or_default();
    assert!(caveat.contains("while the volume fetched chunks") && caveat.contains("lazy_volume"), "{caveat}");
}
