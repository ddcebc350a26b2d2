//! Off-CPU kernel stacks, recorded for real: a program that sleeps 0.3 s in nanosleep and
//! then blocks 0.3 s on a pipe another process fills has both waits named by the kernel
//! function it slept in and the call it came from ("do_nanosleep (clock_nanosleep)",
//! "anon_pipe_read (read)"), and stats on the slow FUSE rig without `--syscalls` are put
//! on a `fuse_` function in the stat call. No mount or daemon outlives a test.

mod support;

use std::path::Path;
use std::time::Duration;

use coldstart_analyze::SyscallWait;
use coldstart_storage::SlowMount;
use coldstart_trace::{StackIndex, Trace};
use support::{can_record, coldstart, private_dir, unavailable};

fn record(dir: &Path, name: &str, script: &str, extra: &[&str]) -> Trace {
    let out = dir.join(format!("{name}.coldstart"));
    coldstart()
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .args(extra)
        .args(["--", "python3", "-c", script])
        .assert()
        .success();
    Trace::read(&out).unwrap()
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
