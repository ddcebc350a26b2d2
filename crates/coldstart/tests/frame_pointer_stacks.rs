//! CPU stacks from frame-pointer chains: a C program built here with frame pointers all
//! the way down (no C library: its own `_start`, system calls made inline) is recorded
//! twice. The first recording copies its user stack at each sample, unwinds the copies with
//! DWARF and finds the kernel's frame-pointer chains the same; the second takes its samples
//! without a copy and gives the same stacks. `--copy-user-stacks` copies again.

mod support;
use support::{can_record, private_dir, record_program, unavailable, user_stacks};

use std::path::{Path, PathBuf};

use coldstart_trace::Trace;

const PROGRAM: &str = r#"
volatile unsigned long sink;

static long syscall2(long n, long a, long b) {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b) : "rcx", "r11", "memory");
    return r;
}

static long thread_cpu_ns(void) {
    long ts[2];
    syscall2(228 /* clock_gettime */, 3 /* CLOCK_THREAD_CPUTIME_ID */, (long)ts);
    return ts[0] * 1000000000L + ts[1];
}

__attribute__((noinline)) void cold_setup(void) {
    for (unsigned long i = 0; i < 200000; i++) sink += i;
}

__attribute__((noinline)) void hot_spin(long ns) {
    long t0 = thread_cpu_ns();
    do {
        for (unsigned long i = 0; i < 200000; i++) sink += i * i;
    } while (thread_cpu_ns() - t0 < ns);
}

__attribute__((noinline)) void hot_caller(void) {
    hot_spin(400000000L);
    sink++;
}

__attribute__((noinline)) int main(void) {
    cold_setup();
    hot_caller();
    return 0;
}

__attribute__((noreturn, noinline)) void start_c(void) {
    syscall2(231 /* exit_group */, main(), 0);
    for (;;) {}
}

__asm__(".globl _start\n"
        ".type _start, @function\n"
        "_start:\n"
        ".cfi_startproc\n"
        ".cfi_undefined rip\n"
        "  xor %ebp, %ebp\n"
        "  and $-16, %rsp\n"
        "  call start_c\n"
        "  hlt\n"
        ".cfi_endproc\n"
        ".size _start, . - _start\n");
"#;

fn build(dir: &Path) -> Option<PathBuf> {
    let source = dir.join("fpspin.c");
    std::fs::write(&source, PROGRAM).unwrap();
    let out = dir.join("fpspin");
    let flags = ["-O2", "-fno-omit-frame-pointer", "-nostdlib", "-static", "-fno-stack-protector"];
    match std::process::Command::new("cc").args(flags).arg("-o").arg(&out).arg(&source).status() {
        Ok(s) if s.success() => Some(out),
        Ok(s) => panic!("cc {flags:?} failed: {s}"),
        Err(e) => {
            unavailable("frame-pointer stacks", &format!("no C compiler (cc: {e}; Debian package gcc)"));
            None
        }
    }
}

fn record(dir: &Path, program: &Path, name: &str, extra: &[&str]) -> Trace {
    let cache = dir.join("cache");
    record_program(dir, name, program, extra, &[("XDG_CACHE_HOME", cache.as_os_str())])
}

/// The share, in percent, of the samples on `hot_spin` whose callers are the program's
/// whole chain: `hot_caller` ← `main` ← `start_c` ← `_start`.
fn whole_hot_stacks(stacks: &[Vec<String>]) -> (usize, usize) {
    let hot: Vec<&Vec<String>> =
        stacks.iter().filter(|s| s.first().is_some_and(|f| f == "hot_spin")).collect();
    let whole = hot.iter().filter(|s| s[1..] == ["hot_caller", "main", "start_c", "_start"]).count();
    (whole, hot.len())
}

/// The note's count of samples of `program` taken without a copy, and with one.
fn without_copy(trace: &Trace, program: &Path) -> Option<(u64, u64)> {
    let note = trace.notes.iter().find(|n| n.text.starts_with("CPU samples without a user stack copy"))?;
    let tail = note.text.split(": ").nth(1)?;
    let entry = tail.split(", ").find(|e| e.contains(&*program.to_string_lossy()))?;
    let mut words = entry.split_whitespace();
    let without: u64 = words.next()?.parse().ok()?;
    let copied: u64 = entry.split('(').nth(1)?.split_whitespace().next()?.parse().ok()?;
    Some((without, copied))
}

#[test]
fn a_program_with_frame_pointers_is_sampled_without_stack_copies_and_gives_the_same_stacks() {
    if !can_record("frame-pointer stacks") {
        return;
    }
    let dir = private_dir();
    let Some(program) = build(dir.path()) else { return };
    let first = record(dir.path(), &program, "first", &[]);
    if let Some(note) =
        first.notes.iter().find(|n| n.text.starts_with("CPU samples with stacks are not recorded"))
    {
        unavailable("frame-pointer stacks", &note.text);
        return;
    }
    let learned = first.notes.iter().find(|n| n.text.contains("later recordings take no user stack copy"));
    assert!(
        learned.is_some_and(|n| n.text.contains(&*program.to_string_lossy())),
        "the first recording did not find the chains trustworthy: {:#?}",
        first.notes
    );
    assert_eq!(without_copy(&first, &program), None, "the first recording copied every stack");
    let first_stacks = user_stacks(&first, "fpspin");
    let (whole, hot) = whole_hot_stacks(&first_stacks);
    assert!(
        hot >= 300 && whole * 100 >= hot * 95,
        "with copies: {whole} of {hot} hot samples unwound whole; e.g. {:?}",
        first_stacks.iter().find(|s| s.first().is_some_and(|f| f == "hot_spin"))
    );

    let second = record(dir.path(), &program, "second", &[]);
    let (without, copied) = without_copy(&second, &program)
        .unwrap_or_else(|| panic!("the second recording took no sample without a copy: {:#?}", second.notes));
    let stacks = user_stacks(&second, "fpspin");
    eprintln!(
        "second recording: {without} samples without a copy, {copied} with one, {} in all",
        stacks.len()
    );
    // Only the samples taken before the recorder marked the process at its exec copy: a
    // few milliseconds, more when the machine is loaded (10 of 397 on a busy CI runner).
    assert!(without >= 300 && copied * 10 <= without, "{without} samples without a copy, {copied} with one");
    let (whole_fp, hot_fp) = whole_hot_stacks(&stacks);
    assert!(
        hot_fp >= 300 && whole_fp * 100 >= hot_fp * 95,
        "from the chains: {whole_fp} of {hot_fp} hot samples unwound whole; e.g. {:?}",
        stacks.iter().find(|s| s.first().is_some_and(|f| f == "hot_spin") && s.len() != 5)
    );

    let copying = record(dir.path(), &program, "copying", &["--copy-user-stacks"]);
    assert_eq!(without_copy(&copying, &program), None, "--copy-user-stacks took samples without a copy");
}
