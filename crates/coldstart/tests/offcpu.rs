//! Off-CPU kernel stacks, recorded for real: a program that sleeps 0.3 s in nanosleep and
//! then blocks 0.3 s on a pipe another process fills has both waits named by the kernel
//! function it slept in and the call it came from ("do_nanosleep (clock_nanosleep)",
//! "anon_pipe_read (read)"), and stats on the slow FUSE rig without `--syscalls` are put
//! on a `fuse_` function in the stat call. The eBPF filter keeps the long sleeps of a
//! program that also sleeps 2,000 times briefly, and only those (all with
//! `--off-cpu-min 0`); two recordings at once keep their own. No mount or daemon outlives
//! a test.

mod support;

use std::path::Path;
use std::time::Duration;

use coldstart_analyze::SyscallWait;
use coldstart_storage::SlowMount;
use coldstart_trace::{StackIndex, ThreadState, Trace};
use support::{can_record, coldstart, private_dir, record_program, unavailable};

/// Records the python `script` (written to `dir`/`name`.py) into `dir`/`name`.coldstart.
fn record(dir: &Path, name: &str, script: &str, extra: &[&str]) -> Trace {
    let program = dir.join(format!("{name}.py"));
    std::fs::write(&program, format!("#!/usr/bin/env python3\n{script}")).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    record_program(dir, name, &program, extra, &[])
}

/// False (and the test says why) when the recorder could not take off-CPU stacks.
fn has_off_cpu_stacks(test: &str, trace: &Trace) -> bool {
    if let Some(note) = trace
        .notes
        .iter()
        .find(|n| n.text.contains("off-CPU kernel stacks") && n.text.contains("not recorded"))
    {
        unavailable(test, &note.text);
        return false;
    }
    true
}

/// Off-CPU time of the start put on waits whose label `accepts`.
fn on_label(waits: &[SyscallWait], accepts: impl Fn(&str, &str) -> bool) -> i64 {
    waits
        .iter()
        .filter(|w| w.waited_in.kernel.as_deref().is_some_and(|k| accepts(k, &w.waited_in.syscall)))
        .map(|w| w.ns)
        .sum()
}

const SLEEP_THEN_PIPE: &str = "\
import os, time
r, w = os.pipe()
if os.fork() == 0:
    os.close(r)
    time.sleep(0.6)
    os.write(w, b'x')
    os._exit(0)
os.close(w)
time.sleep(0.3)
os.read(r, 1)
os.wait()
";

#[test]
fn a_sleep_and_a_pipe_read_are_named_by_their_kernel_stacks() {
    let test = "offcpu-sleep-and-pipe";
    if !can_record(test) {
        return;
    }
    let dir = private_dir();
    let trace = record(dir.path(), test, SLEEP_THEN_PIPE, &["--slow-syscalls", "off"]);
    if !has_off_cpu_stacks(test, &trace) {
        return;
    }
    assert!(trace.syscalls.is_empty(), "no system calls with --slow-syscalls off");
    let root = trace.meta.root_pid.expect("the command's pid");
    let index = StackIndex::new(&trace);
    let functions: Vec<String> = trace
        .off_cpu_samples
        .iter()
        .filter(|s| s.tid == root)
        .flat_map(|s| index.frames(s.stack_id))
        .filter_map(|f| f.symbol.clone())
        .collect();
    assert!(
        functions.iter().any(|f| f == "do_nanosleep" || f == "hrtimer_nanosleep"),
        "no nanosleep among {functions:?}"
    );
    assert!(functions.iter().any(|f| f.contains("pipe_read")), "no pipe_read among {functions:?}");

    let a = coldstart_analyze::analyze(&trace);
    let asleep = on_label(&a.syscall_waits, |k, call| k == "do_nanosleep" && call.contains("nanosleep"));
    let piped = on_label(&a.syscall_waits, |k, call| k.contains("pipe_read") && call == "read");
    assert!(asleep >= 250_000_000, "{asleep} ns in do_nanosleep: {:?}", a.syscall_waits);
    assert!(piped >= 250_000_000, "{piped} ns in pipe_read: {:?}", a.syscall_waits);

    let report =
        coldstart().arg("report").arg(dir.path().join(format!("{test}.coldstart"))).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(text.contains("in do_nanosleep (clock_nanosleep)"), "{text}");
    assert!(!text.contains("  in sleeping"), "{text}");
}

#[test]
fn stats_on_a_slow_filesystem_are_named_by_a_fuse_function_without_syscalls() {
    let test = "offcpu-slowfs";
    if !can_record(test) {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        unavailable(test, "/dev/fuse is missing");
        return;
    }
    let dir = private_dir();
    let (src, mnt) = (dir.path().join("src"), dir.path().join("mnt"));
    std::fs::create_dir_all(src.join("plug-ins")).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    for i in 0..50 {
        std::fs::write(src.join(format!("plug-ins/p{i}")), format!("plug-in {i}\n")).unwrap();
    }
    let mount = SlowMount::mount(&src, &mnt, Duration::from_millis(2)).unwrap();
    let script = format!(
        "import os\nfor i in range(500):\n    os.stat('{}/p%d' % (i % 50))\n",
        mount.at().join("plug-ins").display()
    );
    // The stacks alone: without the slow calls recorded by default.
    let trace = record(dir.path(), test, &script, &["--slow-syscalls", "off"]);
    drop(mount);
    assert!(
        !std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&format!(" {} ", mnt.display())),
        "the slow filesystem is unmounted"
    );
    if !has_off_cpu_stacks(test, &trace) {
        return;
    }
    let a = coldstart_analyze::analyze(&trace);
    let root = trace.meta.root_pid.expect("the command's pid");
    let thread = a.threads.iter().find(|t| t.tid == root).expect("the program's thread");
    let off_cpu = thread.time.sleeping_ns + thread.time.io_wait_ns;
    let on_fuse = on_label(&a.syscall_waits, |k, call| {
        k.starts_with("fuse_") && matches!(call, "newfstatat" | "statx" | "stat")
    });
    assert!(
        on_fuse as f64 >= 0.8 * off_cpu as f64,
        "{on_fuse} of the program's {off_cpu} ns off the CPU put on a fuse_ function: {:?}",
        a.syscall_waits
    );
    let cp = a.critical_path.as_ref().expect("a critical path");
    let top = cp.summary.in_syscalls.first().expect("the path's waits named");
    assert!(top.waited_in.kernel.as_deref().is_some_and(|k| k.starts_with("fuse_")), "{:?}", top.waited_in);
    // No path without system calls: the mount the program's files were on stands for it.
    assert!(top.waited_in.from_stack, "{:?}", top.waited_in);
    assert_eq!(top.waited_in.dir.as_deref(), Some(mnt.to_str().unwrap()), "{:?}", top.waited_in);
    assert!(top.waited_in.on_slow_filesystem(), "{:?}", top.waited_in);
}

/// The slow-call capture's program on `sched:sched_switch` shares the tracepoint with the
/// off-CPU stacks' perf event: with both on (the defaults), the stacks are still taken.
#[test]
fn off_cpu_stacks_are_taken_with_the_slow_calls_on() {
    let test = "offcpu-with-slow-calls";
    if !can_record(test) {
        return;
    }
    let dir = private_dir();
    let trace = record(dir.path(), test, SLEEP_THEN_PIPE, &[]);
    if !has_off_cpu_stacks(test, &trace) {
        return;
    }
    let root = trace.meta.root_pid.expect("the command's pid");
    let index = StackIndex::new(&trace);
    let in_nanosleep = trace
        .off_cpu_samples
        .iter()
        .filter(|s| s.tid == root)
        .any(|s| index.frames(s.stack_id).iter().any(|f| f.symbol.as_deref() == Some("do_nanosleep")));
    assert!(
        in_nanosleep,
        "{} off-CPU stacks, none of the program in do_nanosleep",
        trace.off_cpu_samples.len()
    );
}

/// 2,000 sleeps of about 20 µs, then 5 of 30 ms.
const SHORT_AND_LONG_SLEEPS: &str = "\
import time
for _ in range(2000):
    time.sleep(0.00002)
for _ in range(5):
    time.sleep(0.03)
";

/// The program's off-CPU samples in nanosleep: (all of them, those of 30 ms sleeps), the
/// long ones told by the sleep (in `sched`) that begins nearest the sample.
fn nanosleep_samples(trace: &Trace) -> (usize, usize) {
    let root = trace.meta.root_pid.expect("the command's pid");
    let index = StackIndex::new(trace);
    let sleeps: Vec<_> = trace
        .sched
        .iter()
        .filter(|s| s.tid == root && matches!(s.state, ThreadState::Sleeping | ThreadState::IoWait))
        .collect();
    let mut counts = (0, 0);
    for s in trace.off_cpu_samples.iter().filter(|s| s.tid == root) {
        let frames = index.frames(s.stack_id);
        if !frames.iter().any(|f| f.symbol.as_deref() == Some("do_nanosleep")) {
            continue;
        }
        counts.0 += 1;
        let nearest = sleeps.iter().min_by_key(|i| (i.start_ns - s.t_ns).abs());
        let long = nearest
            .is_some_and(|i| (i.start_ns - s.t_ns).abs() < 500_000 && i.end_ns - i.start_ns >= 25_000_000);
        counts.1 += usize::from(long);
    }
    counts
}

#[test]
fn only_the_long_sleeps_keep_their_stacks_unless_the_threshold_is_zero() {
    let test = "offcpu-threshold";
    if !can_record(test) {
        return;
    }
    let dir = private_dir();
    let trace = record(dir.path(), test, SHORT_AND_LONG_SLEEPS, &["--slow-syscalls", "off"]);
    if !has_off_cpu_stacks(test, &trace) {
        return;
    }
    assert!(
        trace.notes.iter().any(|n| n.text.contains("kept by the eBPF filter")),
        "the eBPF program took the stacks: {:?}",
        trace.notes
    );
    let (all, long) = nanosleep_samples(&trace);
    assert_eq!(long, 5, "the five 30 ms sleeps, each with its nanosleep stack ({all} in all)");
    // A 20 µs sleep that a busy CPU stretches past 1 ms may pass: a handful at most.
    assert!(all - long <= 20, "{} short sleeps kept", all - long);

    let every = record(dir.path(), "offcpu-threshold-0", SHORT_AND_LONG_SLEEPS, &["--off-cpu-min", "0"]);
    let (all, long) = nanosleep_samples(&every);
    assert_eq!(long, 5);
    assert!(all >= 2_000, "{all} nanosleep stacks with --off-cpu-min 0, for 2,005 sleeps");
}

#[test]
fn two_recordings_at_once_keep_their_own_off_cpu_stacks() {
    let test = "offcpu-two-at-once";
    if !can_record(test) {
        return;
    }
    let dir = private_dir();
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| record(dir.path(), "offcpu-a", SHORT_AND_LONG_SLEEPS, &[]));
        let b = s.spawn(|| record(dir.path(), "offcpu-b", SLEEP_THEN_PIPE, &["--slow-syscalls", "off"]));
        (a.join().unwrap(), b.join().unwrap())
    });
    if !has_off_cpu_stacks(test, &a) || !has_off_cpu_stacks(test, &b) {
        return;
    }
    let root = a.meta.root_pid.expect("the command's pid");
    let long: Vec<_> =
        a.sched.iter().filter(|s| s.tid == root && s.end_ns - s.start_ns > 20_000_000).collect();
    let samples: Vec<_> =
        a.off_cpu_samples.iter().filter(|s| s.tid == root).map(|s| (s.t_ns, s.stack_id)).collect();
    assert_eq!(nanosleep_samples(&a).1, 5, "the first recording's five long sleeps: {long:?} {samples:?}");
    for (trace, name) in [(&a, "first"), (&b, "second")] {
        let pids: std::collections::HashSet<i32> = trace.processes.iter().map(|p| p.pid).collect();
        let strays: Vec<_> = trace.off_cpu_samples.iter().filter(|s| !pids.contains(&s.pid)).collect();
        assert!(strays.is_empty(), "the {name} recording has others' stacks: {strays:?}");
    }
    let root = b.meta.root_pid.expect("the command's pid");
    let index = StackIndex::new(&b);
    let functions: Vec<String> = b
        .off_cpu_samples
        .iter()
        .filter(|s| s.tid == root)
        .flat_map(|s| index.frames(s.stack_id))
        .filter_map(|f| f.symbol.clone())
        .collect();
    assert!(functions.iter().any(|f| f.contains("pipe_read")), "no pipe_read among {functions:?}");
}
