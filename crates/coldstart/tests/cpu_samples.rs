//! CPU samples with stacks, recorded for real: a C program built here with a hot
//! function (spinning for 0.4 s of its CPU time, called from `main` through a named caller) and a cold
//! one, compiled with and without frame pointers. Most of its samples land on the hot
//! function, and its callers are found, by DWARF unwinding where there are no frame
//! pointers. `--no-cpu-samples` records none. Samples stop at half the spool's free space.
//! The program stripped, as distributions ship it, is named through debuginfod (a local
//! server) when `DEBUGINFOD_URLS` is set, and otherwise gets the warning with the fix.

mod support;
use support::{can_record, coldstart, private_dir, record_program, unavailable, user_stacks};

use std::path::Path;

use coldstart_trace::{LossSource, Trace};

const PROGRAM: &str = r#"
#include <time.h>
volatile unsigned long sink;

__attribute__((noinline)) void cold_setup(void) {
    for (unsigned long i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void hot_spin(double seconds) {
    struct timespec t0, t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    do {
        for (unsigned long i = 0; i < 200000; i++) sink += i * i;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    } while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
}

__attribute__((noinline)) void hot_caller(void) {
    hot_spin(0.4);
    sink++;
}

int main(void) {
    cold_setup();
    hot_caller();
    return 0;
}
"#;

/// Builds the program with `flags`, or says why it cannot (no C compiler).
fn build(dir: &Path, name: &str, flags: &[&str]) -> Option<std::path::PathBuf> {
    let source = dir.join("hotcold.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let out = dir.join(name);
    let built = std::process::Command::new("cc").args(flags).arg("-o").arg(&out).arg(&source).status();
    match built {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc {flags:?} failed: {s}"),
        Err(e) => {
            unavailable(name, &format!("no C compiler (cc: {e}; Debian package gcc)"));
            None
        }
    }
}

fn record(dir: &Path, program: &Path, extra: &[&str]) -> Trace {
    record_with(dir, program, extra, &[])
}

/// [`record`] with `env` set for the recorder and `DEBUGINFOD_URLS` unset unless given.
fn record_with(dir: &Path, program: &Path, extra: &[&str], env: &[(&str, &str)]) -> Trace {
    let env: Vec<(&str, &std::ffi::OsStr)> =
        env.iter().map(|(k, v)| (*k, std::ffi::OsStr::new(*v))).collect();
    let name = program.file_name().unwrap().to_string_lossy();
    record_program(dir, &name, program, extra, &env)
}

fn check_build(name: &str, flags: &[&str]) {
    if !can_record(name) {
        return;
    }
    let dir = private_dir();
    let Some(program) = build(dir.path(), name, flags) else { return };
    let trace = record(dir.path(), &program, &[]);
    if let Some(note) =
        trace.notes.iter().find(|n| n.text.starts_with("CPU samples with stacks are not recorded"))
    {
        unavailable(name, &note.text);
        return;
    }
    let stacks = user_stacks(&trace, name);
    // 0.4 s of the thread's CPU time at 1 kHz: some 400 samples, however busy the machine.
    assert!(stacks.len() >= 300, "{name}: {} samples", stacks.len());
    let hot: Vec<&Vec<String>> =
        stacks.iter().filter(|s| s.first().is_some_and(|f| f == "hot_spin")).collect();
    assert!(
        hot.len() * 100 >= stacks.len() * 80,
        "{name}: {} of {} samples on hot_spin; the others: {:?}",
        hot.len(),
        stacks.len(),
        stacks.iter().filter(|s| s.first().is_none_or(|f| f != "hot_spin")).take(5).collect::<Vec<_>>()
    );
    let with_callers = hot.iter().filter(|s| s.len() >= 3 && s[1] == "hot_caller" && s[2] == "main").count();
    eprintln!(
        "{name}: {} samples, {} on hot_spin, {with_callers} of those unwound to hot_caller ← main",
        stacks.len(),
        hot.len()
    );
    assert!(
        with_callers * 100 >= hot.len() * 95,
        "{name}: {with_callers} of {} hot samples unwound to hot_caller ← main; e.g. {:?}",
        hot.len(),
        hot.iter().find(|s| s.len() < 3 || s[1] != "hot_caller" || s[2] != "main")
    );
    assert!(trace.mappings.iter().any(|m| m.path == program.to_string_lossy() && m.build_id.is_some()));
    // The program is its own critical path: its CPU segments hold the hot loop's samples.
    let trace_file = dir.path().join(format!("{name}.coldstart"));
    let on_path = coldstart()
        .arg("export")
        .arg(&trace_file)
        .args(["--format", "folded", "--critical-path"])
        .output()
        .unwrap();
    assert!(on_path.status.success(), "{}", String::from_utf8_lossy(&on_path.stderr));
    let on_path = String::from_utf8(on_path.stdout).unwrap();
    let hot_on_path: u64 = on_path
        .lines()
        .filter(|l| l.contains(";hot_caller;hot_spin"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert!(
        hot_on_path as usize * 100 >= hot.len() * 80,
        "{name}: {hot_on_path} of {} hot samples on the critical path:\n{on_path}",
        hot.len()
    );
}

#[test]
fn samples_land_on_the_hot_function_and_unwind_to_main_without_frame_pointers() {
    check_build("hotcold-nofp", &["-O2", "-fomit-frame-pointer"]);
}

#[test]
fn samples_land_on_the_hot_function_and_unwind_to_main_with_frame_pointers() {
    check_build("hotcold-fp", &["-O2", "-fno-omit-frame-pointer"]);
}

#[test]
fn no_cpu_samples_records_none() {
    if !can_record("no-cpu-samples") {
        return;
    }
    let dir = private_dir();
    let Some(program) = build(dir.path(), "hotcold-off", &["-O2"]) else { return };
    let trace = record(dir.path(), &program, &["--no-cpu-samples"]);
    assert!(trace.stack_samples.is_empty() && trace.stacks.is_empty() && trace.mappings.is_empty());
    assert!(trace.off_cpu_samples.is_empty(), "--no-cpu-samples turns the off-CPU stacks off too");
    assert!(!trace.processes.is_empty());
}

/// A tmpfs of `size` at `dir`/small-run, unmounted when dropped.
struct SmallTmpfs(std::path::PathBuf);

impl SmallTmpfs {
    fn mount(dir: &Path, size: &str) -> SmallTmpfs {
        let path = dir.join("small-run");
        std::fs::create_dir(&path).unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size},mode=0700"), "tmpfs"])
            .arg(&path)
            .status()
            .unwrap();
        assert!(mounted.success(), "a tmpfs for the spool");
        SmallTmpfs(path)
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Four seconds of its own CPU (not of the clock), so that a loaded machine samples it as often.
const BUSY: &str = "import time\nt = time.process_time()\nwhile time.process_time() - t < 4:\n    pass\n";

/// The spool is bounded: with it on a small tmpfs (as a boot's is, in /run), CPU samples stop
/// once they took half the free space, the recording still ends with a trace, and the trace
/// says the samples stopped.
#[test]
fn samples_stop_at_half_the_spools_free_space() {
    if !can_record("samples-spool-budget") {
        return;
    }
    let dir = private_dir();
    let tmpfs = SmallTmpfs::mount(dir.path(), "48m");
    let spool = tmpfs.0.clone();
    let out = dir.path().join("busy.coldstart");
    coldstart()
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--spool-dir")
        .arg(spool.join("spool"))
        .args(["--", "python3", "-c", BUSY])
        .assert()
        .success();
    let trace = Trace::read(&out).unwrap();
    let stopped = trace.losses.iter().find(|l| l.what.contains("stopped once")).unwrap_or_else(|| {
        panic!("no loss says the samples stopped: {:?}", trace.losses);
    });
    assert_eq!(stopped.count, 1);
    let samples = trace.stack_samples.len();
    assert!(samples > 100, "samples were taken until the budget was spent: {samples}");
    assert!(samples < 3000, "4 s of CPU at 1 kHz were not all kept: {samples}");
}

/// A recording of the whole system (as a boot's is) samples every CPU at 100 Hz by default, about
/// 3 MiB a second on a busy 2-CPU machine: on a small tmpfs (whose half takes some 20 s of
/// that), no sample, event or record is lost and every sample of the busy program is kept.
#[test]
fn a_system_recording_fits_a_small_spool_without_loss() {
    if !can_record("samples-system-spool") {
        return;
    }
    let dir = private_dir();
    let tmpfs = SmallTmpfs::mount(dir.path(), "128m");
    let out = dir.path().join("busy-system.coldstart");
    coldstart()
        .arg("record")
        .arg("--system")
        .arg("-o")
        .arg(&out)
        .arg("--spool-dir")
        .arg(tmpfs.0.join("spool"))
        .args(["--", "python3", "-c", BUSY])
        .assert()
        .success();
    let trace = Trace::read(&out).unwrap();
    let recorded = [LossSource::Perf, LossSource::Tracefs, LossSource::Spool];
    let lost: Vec<_> = trace.losses.iter().filter(|l| l.count > 0 && recorded.contains(&l.source)).collect();
    assert!(lost.is_empty(), "no sample, event or record lost: {lost:?}");
    let root = trace.meta.root_pid.expect("the command's pid");
    let samples = trace.stack_samples.iter().filter(|s| s.pid == root).count();
    assert!((200..=600).contains(&samples), "4 s of the program's CPU at 100 Hz: {samples} samples");
}

#[test]
fn a_stripped_program_is_named_through_debuginfod_and_warned_about_without_it() {
    let test = "stripped-debuginfod";
    if !can_record(test) {
        return;
    }
    let dir = private_dir();
    let hex = "c01d57a27000000000000000000000000000cafe";
    let built =
        coldstart_testkit::stripped_program(test, dir.path(), "hotcold-stripped", PROGRAM, &["-O2"], hex);
    let Some((program, debug)) = built else { return };
    let trace = record_with(dir.path(), &program, &[], &[]);
    if let Some(note) =
        trace.notes.iter().find(|n| n.text.starts_with("CPU samples with stacks are not recorded"))
    {
        unavailable(test, &note.text);
        return;
    }
    let leaves = |trace: &Trace| -> Vec<String> {
        user_stacks(trace, "hotcold-strippe").into_iter().filter_map(|s| s.into_iter().next()).collect()
    };
    let without = leaves(&trace);
    assert!(without.len() >= 300, "{} samples", without.len());
    assert!(without.iter().all(|f| f != "hot_spin"), "stripped, hot_spin has no name");
    let report =
        coldstart().arg("report").arg(dir.path().join("hotcold-stripped.coldstart")).output().unwrap();
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        text.contains("have frames no symbol names")
            && text.contains("hotcold-stripped")
            && text.contains("DEBUGINFOD_URLS"),
        "the report warns about the unnamed frames:\n{text}"
    );

    let Some(server) = coldstart_testkit::debuginfod_server(test, &dir.path().join("server")) else { return };
    server.serve(hex, &debug);
    let cache = dir.path().join("debuginfod-cache");
    let env = [("DEBUGINFOD_URLS", server.url.as_str()), ("DEBUGINFOD_CACHE_PATH", cache.to_str().unwrap())];
    let trace = record_with(dir.path(), &program, &[], &env);
    let with = leaves(&trace);
    let hot = with.iter().filter(|f| *f == "hot_spin").count();
    assert!(hot * 100 >= with.len() * 80, "{hot} of {} samples named hot_spin: {:?}", with.len(), &with[..5]);
    assert!(cache.join(hex).join("debuginfo").is_file(), "the download is kept in the cache");
    assert!(
        trace.notes.iter().any(|n| n.text.contains("1 downloaded from debuginfod")),
        "{:?}",
        trace.notes.iter().map(|n| &n.text).collect::<Vec<_>>()
    );
}
