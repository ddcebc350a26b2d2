//! Time breakdowns, the critical path and phases on synthetic traces with known answers.

mod common;

use coldstart_trace::ThreadState::*;
use common::{Builder, Facet, MS, check};

/// `app` (100) forks `helper` (200) at 5 ms, runs until 10 ms and sleeps until the helper
/// wakes it at 60 ms; the helper runs, waits 20 ms for libhelper.so, runs again. `app`
/// exits at 70 ms.
fn two_processes_joined_by_a_wakeup() -> coldstart_trace::Trace {
    Builder::new()
        .process(200, 100, "helper", Some(5 * MS))
        .file(1, "/usr/lib/libhelper.so")
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 60 * MS, Sleeping)
        .wakeup(60 * MS, 100, Some(200))
        .sched(100, 60 * MS, 62 * MS, Runnable)
        .sched(100, 62 * MS, 70 * MS, Running)
        .sched(200, 5 * MS, 6 * MS, Runnable)
        .sched(200, 6 * MS, 20 * MS, Running)
        .fill(19 * MS, 200, 200, 1, 0, 4)
        .sched(200, 20 * MS, 40 * MS, IoWait)
        .wakeup(40 * MS, 200, None)
        .sched(200, 40 * MS, 60 * MS, Running)
        .exits(100, 70 * MS)
        .exits(200, 65 * MS)
        .build()
}

#[test]
fn the_critical_path_crosses_to_the_process_whose_wakeup_ended_the_wait() {
    check(
        &two_processes_joined_by_a_wakeup(),
        Facet::CriticalPath,
        "0-10 100 cpu
         10-20 200 cpu
         20-40 200 io [/usr/lib/libhelper.so=20]
         40-60 200 cpu
         60-62 100 cpu_wait
         62-70 100 cpu
         total=70 cpu=18 cpu_wait=2 io=0 [] sleep=0 untraced=0 helpers=[helper/200=50]",
    );
}

/// The waker's history stands in for the sleeper's only while the sleeper slept: `app`
/// works until 50 ms and waits 2 ms for `helper`, which had slept on a timer since 6 ms.
/// The start lost those 2 ms to the helper, not the helper's 45 ms of sleep.
#[test]
fn the_critical_path_follows_a_waker_only_back_to_where_the_wait_began() {
    let trace = Builder::new()
        .process(200, 100, "helper", Some(5 * MS))
        .sched(100, 0, 50 * MS, Running)
        .sched(100, 50 * MS, 52 * MS, Sleeping)
        .wakeup(52 * MS, 100, Some(200))
        .sched(100, 52 * MS, 60 * MS, Running)
        .sched(200, 5 * MS, 6 * MS, Running)
        .sched(200, 6 * MS, 51 * MS, Sleeping)
        .wakeup(51 * MS, 200, None)
        .sched(200, 51 * MS, 53 * MS, Running)
        .exits(100, 60 * MS)
        .exits(200, 53 * MS)
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-50 100 cpu
         50-51 200 sleep
         51-52 200 cpu
         52-60 100 cpu
         total=60 cpu=58 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[helper/200=2]",
    );
}

/// `super` (100) starts `child` (200) at 1 ms and polls for it: it sleeps on a 10 ms timer,
/// looks (0.1 ms), sleeps again, until the child's exit wakes it at 25 ms. The start waited
/// for the child from 2 ms on, not for the supervisor's timers.
fn a_supervisor_polling_for_its_child(last_wakeup_by: Option<i32>) -> coldstart_trace::Trace {
    const US: i64 = MS / 1000;
    Builder::new()
        .process(200, 100, "child", Some(MS))
        .file(1, "/usr/lib/libchild.so")
        .sched(100, 0, 2 * MS, Running)
        .sched(100, 2 * MS, 12 * MS, Sleeping)
        .wakeup(12 * MS, 100, None)
        .sched(100, 12 * MS, 12 * MS + 100 * US, Running)
        .sched(100, 12 * MS + 100 * US, 22 * MS + 100 * US, Sleeping)
        .wakeup(22 * MS + 100 * US, 100, None)
        .sched(100, 22 * MS + 100 * US, 22 * MS + 200 * US, Running)
        .sched(100, 22 * MS + 200 * US, 25 * MS, Sleeping)
        .wakeup(25 * MS, 100, last_wakeup_by)
        .sched(100, 25 * MS, 26 * MS, Running)
        .sched(200, MS, 10 * MS, Running)
        .fill(9 * MS, 200, 200, 1, 0, 4)
        .sched(200, 10 * MS, 20 * MS, IoWait)
        .wakeup(20 * MS, 200, None)
        .sched(200, 20 * MS, 25 * MS, Running)
        .exits(100, 26 * MS)
        .exits(200, 25 * MS)
        .build()
}

#[test]
fn a_thread_polling_on_a_timer_until_a_wakeup_waited_for_its_waker_since_the_polling_began() {
    check(
        &a_supervisor_polling_for_its_child(Some(200)),
        Facet::CriticalPath,
        "0-2 100 cpu
         2-10 200 cpu
         10-20 200 io [/usr/lib/libchild.so=10]
         20-25 200 cpu
         25-26 100 cpu
         total=26 cpu=3 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[child/200=23]",
    );
    // Without the child's wakeup at the end, the polls are what the path shows.
    let path =
        common::render(&common::analyze(&a_supervisor_polling_for_its_child(None)), Facet::CriticalPath);
    assert!(path.contains("sleep=22.800"), "{path}");
}

#[test]
fn the_critical_path_of_one_thread_names_the_files_of_its_io_waits() {
    let trace = Builder::new()
        .file(1, "/usr/lib/libfoo.so")
        .file(2, "/usr/share/app/data")
        .sched(100, 0, 10 * MS, Running)
        .fill(9 * MS, 100, 100, 1, 0, 3)
        .fill(9 * MS, 100, 100, 2, 0, 1)
        .sched(100, 10 * MS, 50 * MS, IoWait)
        .wakeup(50 * MS, 100, None)
        .sched(100, 50 * MS, 55 * MS, Running)
        .sched(100, 55 * MS, 75 * MS, Sleeping)
        .wakeup(75 * MS, 100, None)
        .sched(100, 75 * MS, 80 * MS, Running)
        .mark(80 * MS, 100, "done")
        .ready(80 * MS, "mark:done")
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-10 100 cpu
         10-50 100 io [/usr/lib/libfoo.so=30, /usr/share/app/data=10]
         50-55 100 cpu
         55-75 100 sleep
         75-80 100 cpu
         total=80 cpu=20 cpu_wait=0 io=40 [/usr/lib/libfoo.so=30, /usr/share/app/data=10] sleep=20 untraced=0 helpers=[]",
    );
}

#[test]
fn a_wait_after_a_preemption_is_named_by_the_pages_filled_before_it() {
    // The fill at 8 ms, then a preemption (runnable 10-12 ms) and 1 ms more of running
    // before the thread blocks on the page: the wait is still for that file.
    let trace = Builder::new()
        .file(1, "/usr/lib/libfoo.so")
        .sched(100, 0, 10 * MS, Running)
        .fill(8 * MS, 100, 100, 1, 0, 4)
        .sched(100, 10 * MS, 12 * MS, Runnable)
        .sched(100, 12 * MS, 13 * MS, Running)
        .sched(100, 13 * MS, 33 * MS, IoWait)
        .wakeup(33 * MS, 100, None)
        .sched(100, 33 * MS, 40 * MS, Running)
        .exits(100, 40 * MS)
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-10 100 cpu
         10-12 100 cpu_wait
         12-13 100 cpu
         13-33 100 io [/usr/lib/libfoo.so=20]
         33-40 100 cpu
         total=40 cpu=18 cpu_wait=2 io=20 [/usr/lib/libfoo.so=20] sleep=0 untraced=0 helpers=[]",
    );
}

#[test]
fn a_wait_on_a_thread_without_data_and_time_before_the_first_interval_are_named() {
    let trace = Builder::new()
        .sched(100, 2 * MS, 10 * MS, Running)
        .sched(100, 10 * MS, 30 * MS, Sleeping)
        .wakeup(30 * MS, 100, Some(999))
        .sched(100, 30 * MS, 40 * MS, Running)
        .ready(40 * MS, "exit")
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-2 100 untraced
         2-10 100 cpu
         10-30 100 wait_untraced on /999
         30-40 100 cpu
         total=40 cpu=18 cpu_wait=0 io=0 [] sleep=0 untraced=2 helpers=[]",
    );
}

#[test]
fn a_mark_made_by_another_process_starts_the_path_there() {
    let trace = Builder::new()
        .process(200, 100, "worker", Some(0))
        .sched(100, 0, 50 * MS, Running)
        .sched(200, 0, 20 * MS, Sleeping)
        .wakeup(20 * MS, 200, None)
        .sched(200, 20 * MS, 30 * MS, Running)
        .mark(30 * MS, 200, "first-frame")
        .ready(30 * MS, "mark:first-frame")
        .build();
    check(
        &trace,
        Facet::Overview,
        "origin=0 end=30 processes=2 started=2 files=0 reads=0 seeks=0 pages=0 bytes=0
         ready=30 mark:first-frame ttr=30 pid=200 tid=200",
    );
    check(
        &trace,
        Facet::CriticalPath,
        "0-20 200 sleep
         20-30 200 cpu
         total=30 cpu=10 cpu_wait=0 io=0 [] sleep=20 untraced=0 helpers=[]",
    );
}

/// The session's root (100) only waits; the panel (300, outside the tree) maps the
/// window the start waited for, and the recorder named it as the window's owner.
fn a_panel_outside_the_tree_maps_the_window(tid: Option<i32>) -> coldstart_trace::Trace {
    Builder::new()
        .process(300, 1, "mate-panel", Some(0))
        .thread(301, 300, "dconf worker")
        .sched(100, 0, 40 * MS, Sleeping)
        .sched(300, 0, 30 * MS, Running)
        .sched(301, 0, 35 * MS, Running)
        .ready_by(35 * MS, "window:mate-panel", 300, tid)
        .build()
}

#[test]
fn the_ready_thread_is_the_one_the_recorder_named_not_the_trees_root() {
    check(
        &a_panel_outside_the_tree_maps_the_window(Some(300)),
        Facet::Overview,
        "origin=0 end=35 processes=2 started=2 files=0 reads=0 seeks=0 pages=0 bytes=0
         ready=35 window:mate-panel ttr=35 pid=300 tid=300",
    );
    check(
        &a_panel_outside_the_tree_maps_the_window(None),
        Facet::Overview,
        "origin=0 end=35 processes=2 started=2 files=0 reads=0 seeks=0 pages=0 bytes=0
         ready=35 window:mate-panel ttr=35 pid=300 tid=301",
    );
}

#[test]
fn the_ready_thread_of_an_exit_is_the_root_thread_that_ran_last() {
    let trace = Builder::new()
        .thread(101, 100, "app-worker")
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 40 * MS, Sleeping)
        .wakeup(40 * MS, 100, Some(101))
        .sched(100, 40 * MS, 45 * MS, Running)
        .sched(101, 5 * MS, 40 * MS, Running)
        .sched(101, 40 * MS, 50 * MS, Running)
        .exits(100, 50 * MS)
        .build();
    check(
        &trace,
        Facet::CriticalPath,
        "0-5 100 cpu
         5-50 101 cpu
         total=50 cpu=50 cpu_wait=0 io=0 [] sleep=0 untraced=0 helpers=[]",
    );
}

#[test]
fn the_start_breakdown_counts_wall_clock_time_once() {
    let trace = Builder::new()
        .thread(101, 100, "app-worker")
        .sched(100, 0, 10 * MS, Running)
        .sched(100, 10 * MS, 30 * MS, IoWait)
        .sched(101, 20 * MS, 40 * MS, Running)
        .sched(101, 40 * MS, 45 * MS, Runnable)
        .sched(101, 45 * MS, 50 * MS, Sleeping)
        .ready(50 * MS, "idle:5")
        .build();
    check(&trace, Facet::Start, "0-50 cpu=30 io=10 cpu_wait=5 idle=5");
    check(
        &trace,
        Facet::Threads,
        "100 run=10 runnable=0 io=20 sleep=0 attributed=0
         101 run=20 runnable=5 io=0 sleep=5 attributed=0",
    );
}

/// Ten files under one directory read one after the other (2 ms running, 38 ms
/// waiting each), then 300 ms of CPU, a mark, and 300 ms of sleep.
fn read_compute_wait(extra_mark: Option<(i64, &str)>) -> coldstart_trace::Trace {
    let mut b = Builder::new();
    for i in 0..10u32 {
        let t = i64::from(i) * 40 * MS;
        b = b
            .file(i + 1, &format!("/usr/share/app/brushes/b{i}"))
            .sched(100, t, t + 2 * MS, Running)
            .fill(t + MS, 100, 100, i + 1, 0, 4)
            .sched(100, t + 2 * MS, t + 40 * MS, IoWait);
    }
    b = b
        .sched(100, 400 * MS, 700 * MS, Running)
        .mark(700 * MS, 100, "window")
        .sched(100, 700 * MS, 1000 * MS, Sleeping)
        .exits(100, 1000 * MS);
    if let Some((t, name)) = extra_mark {
        b = b.mark(t, 100, name);
    }
    b.build()
}

#[test]
fn phases_follow_the_dominant_work_and_are_named_by_it() {
    check(
        &read_compute_wait(None),
        Facet::Phases,
        "0-400 Read: read 10 files under /usr/share/app/brushes — 0.400 s, 160.0 KiB, 0 seeks
         400-700 Cpu: CPU, mostly app — 0.300 s | window
         700-1000 Wait: waiting — 0.300 s",
    );
}

#[test]
fn a_mark_splits_a_phase() {
    check(
        &read_compute_wait(Some((200 * MS, "config-loaded"))),
        Facet::Phases,
        "0-200 Read: read 5 files under /usr/share/app/brushes — 0.200 s, 80.0 KiB, 0 seeks | config-loaded
         200-400 Read: read 5 files under /usr/share/app/brushes — 0.200 s, 80.0 KiB, 0 seeks
         400-700 Cpu: CPU, mostly app — 0.300 s | window
         700-1000 Wait: waiting — 0.300 s",
    );
}

#[test]
fn reads_from_two_directories_make_two_phases() {
    let mut b = Builder::new();
    for i in 0..20u32 {
        let t = i64::from(i) * 20 * MS;
        let dir = if i < 10 { "/usr/lib/python3/numpy" } else { "/usr/lib/python3/pandas" };
        b = b
            .file(i + 1, &format!("{dir}/m{i}.so"))
            .sched(100, t, t + MS, Running)
            .fill(t + MS / 2, 100, 100, i + 1, 0, 2)
            .fill(t + 10 * MS, 100, 100, i + 1, 10, 2)
            .sched(100, t + MS, t + 20 * MS, IoWait);
    }
    let trace = b.exits(100, 400 * MS).build();
    check(
        &trace,
        Facet::Phases,
        "0-200 Read: read 10 files under /usr/lib/python3/numpy — 0.200 s, 160.0 KiB, 10 seeks
         200-400 Read: read 10 files under /usr/lib/python3/pandas — 0.200 s, 160.0 KiB, 10 seeks",
    );
}

#[test]
fn without_scheduler_data_phases_come_from_the_cpu_samples() {
    // An imported boot log: one CPU of two waiting for I/O for a second, then both busy.
    let mut b = Builder::new().duration(2000 * MS).exits(100, 2000 * MS);
    for i in 1..=20 {
        b = b.cpu_sample(i * 50 * MS, 50 * MS, 0.02, 0.5);
    }
    for i in 21..=40 {
        b = b.cpu_sample(i * 50 * MS, 50 * MS, 0.9, 0.0);
    }
    let mut trace = b.build();
    trace.meta.cpu_count = 2;
    check(
        &trace,
        Facet::Phases,
        "0-1000 Read: I/O wait — 1.000 s
         1000-2000 Cpu: CPU — 1.000 s",
    );
}
