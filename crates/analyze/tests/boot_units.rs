//! The systemd units of a boot: which processes each unit had, how its start splits into
//! CPU, I/O wait by file, waits on other units (and on the manager) and the rest, and the
//! chain of units to the target, on a synthetic boot with every figure known.

mod common;
use common::{Builder, MS};

use coldstart_analyze::{UnitProcessesFrom, UnitTime, analyze, chain_to};
use coldstart_trace::{ThreadState::*, Trace, Unit};

fn unit(name: &str, activating: i64, active: i64, pid: Option<i32>, after: &[&str]) -> Unit {
    Unit {
        name: name.into(),
        manager: "container".into(),
        activating_ns: Some(activating * MS),
        active_ns: Some(active * MS),
        deactivating_ns: None,
        pid,
        after: after.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// nspawn (100) boots systemd (101), which starts journald (102, with the main pid),
/// a oneshot remount (104, exited, with a child 105) and dbus-daemon (103, two threads).
fn boot() -> Trace {
    let mut trace = Builder::new()
        .process(101, 100, "systemd", Some(MS))
        .process(102, 101, "systemd-journal", Some(9 * MS))
        .process(104, 101, "systemd-remount", Some(20 * MS))
        .process(105, 104, "helper", Some(24 * MS))
        .process(106, 101, "unrelated", Some(21 * MS))
        .process(103, 101, "dbus-daemon", Some(50 * MS))
        .process(107, 101, "mount", Some(33 * MS))
        .process(108, 101, "mount", Some(36 * MS))
        .thread(1031, 103, "dbus-worker")
        .file(7, "/usr/lib/systemd/systemd-journald")
        .fill(19 * MS, 102, 102, 7, 0, 4)
        // journald: 10 ms on a CPU, 5 ms of I/O on file 7, 7 ms asleep until systemd woke it, 8 ms on a CPU.
        .sched(102, 10 * MS, 20 * MS, Running)
        .sched(102, 20 * MS, 25 * MS, IoWait)
        .sched(102, 25 * MS, 32 * MS, Sleeping)
        .wakeup(32 * MS, 102, Some(101))
        .sched(102, 32 * MS, 40 * MS, Running)
        // remount: 4 ms of its own on a CPU, its child 2 ms on a CPU and 2 ms of I/O with no page seen.
        .sched(104, 20 * MS, 24 * MS, Running)
        .sched(105, 24 * MS, 26 * MS, Running)
        .sched(105, 26 * MS, 28 * MS, IoWait)
        .sched(106, 20 * MS, 30 * MS, Running)
        // dbus: 5 ms on a CPU, 15 ms asleep until journald woke it (its second thread ran 4 ms
        // of them), 2 ms on a CPU, 8 ms asleep with no waker recorded.
        .sched(103, 50 * MS, 55 * MS, Running)
        .sched(103, 55 * MS, 70 * MS, Sleeping)
        .wakeup(70 * MS, 103, Some(102))
        .sched(1031, 56 * MS, 60 * MS, Running)
        .sched(103, 70 * MS, 72 * MS, Running)
        .sched(103, 72 * MS, 80 * MS, Sleeping)
        .ready(85 * MS, "unit:multi-user.target")
        .build();
    trace.units = vec![
        unit("-.slice", 1, 1, None, &[]),
        unit("systemd-journald.service", 10, 40, Some(102), &["-.slice"]),
        unit("systemd-remount-fs.service", 20, 30, None, &["-.slice"]),
        unit("a.mount", 34, 44, None, &[]),
        unit("b.mount", 37, 47, None, &[]),
        unit("basic.target", 45, 45, None, &["systemd-journald.service", "systemd-remount-fs.service"]),
        unit("dbus.service", 50, 80, Some(103), &["basic.target", "systemd-journald.service"]),
        unit(
            "multi-user.target",
            85,
            85,
            None,
            &["dbus.service", "systemd-remount-fs.service", "gone.service"],
        ),
        Unit { name: "still-starting.service".into(), activating_ns: Some(60 * MS), ..Unit::default() },
    ];
    trace
}

fn find<'a>(units: &'a [UnitTime], name: &str) -> &'a UnitTime {
    units.iter().find(|u| u.name == name).unwrap_or_else(|| panic!("no {name}"))
}

#[test]
fn a_service_with_a_main_pid_splits_into_cpu_io_by_file_and_the_managers_wakeup() {
    let a = analyze(&boot());
    let j = find(&a.units, "systemd-journald.service");
    assert_eq!((j.pids.clone(), j.pids_from), (vec![102], UnitProcessesFrom::MainPid));
    assert_eq!(j.took_ns, 30 * MS);
    assert_eq!((j.cpu_ns, j.cpu_time_ns, j.io_wait_ns), (18 * MS, 18 * MS, 5 * MS));
    assert_eq!(j.io_files.iter().map(|f| (f.file, f.ns)).collect::<Vec<_>>(), vec![(7, 5 * MS)]);
    assert_eq!((j.manager_wait_ns, j.other_ns), (7 * MS, 0));
    assert!(j.unit_waits.is_empty());
    assert_eq!(j.after.as_deref(), Some("-.slice"));
}

#[test]
fn a_wait_woken_by_another_units_process_is_a_wait_on_that_unit_and_a_running_thread_wins() {
    let a = analyze(&boot());
    let d = find(&a.units, "dbus.service");
    assert_eq!(d.cpu_ns, 11 * MS, "5 + 2 ms of the main thread, 4 ms of the other");
    assert_eq!(d.cpu_time_ns, 11 * MS);
    let waits: Vec<(&str, i64)> = d.unit_waits.iter().map(|w| (w.unit.as_str(), w.ns)).collect();
    assert_eq!(waits, vec![("systemd-journald.service", 11 * MS)]);
    assert_eq!((d.io_wait_ns, d.manager_wait_ns, d.other_ns), (0, 0, 8 * MS));
    assert_eq!(d.cpu_ns + d.io_wait_ns + 11 * MS + d.manager_wait_ns + d.other_ns, d.took_ns);
    assert_eq!(d.after.as_deref(), Some("basic.target"), "active at 45 ms, after journald's 40 ms");
    assert_eq!(d.after_active_ns, Some(45 * MS));
}

#[test]
fn a_unit_without_a_main_pid_takes_the_managers_child_named_like_it_and_its_descendants() {
    let a = analyze(&boot());
    let r = find(&a.units, "systemd-remount-fs.service");
    assert_eq!((r.pids.clone(), r.pids_from), (vec![104, 105], UnitProcessesFrom::Name));
    assert_eq!((r.cpu_ns, r.io_wait_ns, r.other_ns), (6 * MS, 2 * MS, 2 * MS));
    assert!(r.io_files.is_empty(), "no page seen behind the wait");
    let slice = find(&a.units, "-.slice");
    assert_eq!((slice.pids.len(), slice.pids_from, slice.took_ns), (0, UnitProcessesFrom::None, 0));
}

#[test]
fn a_process_named_like_two_units_goes_to_the_one_whose_start_began_nearest_its_fork() {
    let a = analyze(&boot());
    assert_eq!(find(&a.units, "a.mount").pids, [107]);
    assert_eq!(find(&a.units, "b.mount").pids, [108]);
    assert_eq!(find(&a.units, "b.mount").pids_from, UnitProcessesFrom::Name);
}

#[test]
fn units_are_by_took_and_a_unit_still_starting_is_left_out() {
    let a = analyze(&boot());
    let names: Vec<&str> = a.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "systemd-journald.service",
            "dbus.service",
            "systemd-remount-fs.service",
            "a.mount",
            "b.mount",
            "-.slice",
            "basic.target",
            "multi-user.target"
        ]
    );
}

#[test]
fn the_chain_walks_back_through_the_after_unit_active_last_before_each_start() {
    let a = analyze(&boot());
    let chain = a.unit_chain.as_ref().expect("a chain to the ready unit");
    assert_eq!(chain.target, "multi-user.target");
    assert_eq!(
        chain.links,
        ["multi-user.target", "dbus.service", "basic.target", "systemd-journald.service", "-.slice"]
    );
    let to_remount = chain_to(&a.units, "systemd-remount-fs.service").expect("a chain");
    assert_eq!(to_remount.links, ["systemd-remount-fs.service", "-.slice"]);
    assert!(chain_to(&a.units, "gone.service").is_none());
}

#[test]
fn a_trace_without_units_has_neither_units_nor_chain_in_its_json() {
    let a = analyze(&Builder::new().sched(100, 0, 5 * MS, Running).ready(5 * MS, "exit").build());
    assert!(a.units.is_empty() && a.unit_chain.is_none());
    let json = serde_json::to_value(&a).expect("json");
    assert!(json.get("units").is_none() && json.get("unit_chain").is_none());
}

#[test]
fn odd_units_neither_panic_nor_loop() {
    let mut trace =
        Builder::new().sched(100, 0, 5 * MS, Running).ready(20 * MS, "unit:user/a.target").build();
    trace.units = vec![
        unit("a.target", 10, 10, None, &["b.target", "a.target"]),
        unit("b.target", 10, 10, None, &["a.target"]),
        unit("backwards.service", 30, 20, Some(4242), &["a.target"]),
        unit("nameless.service", -5, 2, Some(100), &["nowhere.target"]),
        Unit { name: "never.service".into(), ..Unit::default() },
    ];
    let a = analyze(&trace);
    assert_eq!(a.units.len(), 4);
    let chain = a.unit_chain.expect("a chain to a.target, named as user/a.target");
    assert_eq!(chain.links, ["a.target", "b.target"]);
    let backwards = find(&a.units, "backwards.service");
    assert_eq!((backwards.took_ns, backwards.pids.clone()), (0, vec![4242]));
    let before_start = find(&a.units, "nameless.service");
    assert_eq!(before_start.took_ns, 7 * MS);
    assert_eq!(
        before_start.cpu_ns + before_start.other_ns,
        7 * MS,
        "2 ms on a CPU after t = 0, the rest unknown"
    );
    assert_eq!(before_start.cpu_ns, 2 * MS);
}
