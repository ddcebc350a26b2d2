//! Slow file-system calls, filtered in the kernel (recorded by default; `--syscalls`
//! records every call instead). Three eBPF programs, assembled like those of
//! [`super::bpf`]: at `raw_syscalls:sys_enter` a call of interest (opens, the stat family,
//! accesses, `readlink`, `getdents64`, `read`/`pread64`) of a thread in scope leaves its
//! enter time, number and arguments in a per-thread map; `sched:sched_switch` marks the
//! entry when its thread goes to sleep inside the call (a FUSE or NFS request always does:
//! the thread waits for the daemon or server); at `raw_syscalls:sys_exit` the call becomes
//! a record only if it lasted the threshold or (a metadata call) slept. The rest never
//! leave the kernel, so a start with thousands of fast stats pays a map update and a
//! delete for each, not a record.
//!
//! The path is read at the exit, not the enter: only the calls kept pay for the copy,
//! and by then the kernel has read the name itself, so its page is in memory (at the
//! enter it may not be, and the program may not fault it in). None of these calls
//! replaces the memory the pointer points into, as a successful `execve` would.
//!
//! The assembly turns each record into the enter and exit events and the path record
//! that tracefs and the `--syscalls` program would have given, so one code path builds
//! the trace's `syscall` rows.

use std::os::fd::OwnedFd;

use coldstart_trace::METADATA_CALLS;

use crate::capture::bpf::{
    Asm, BPF_RB_NO_WAKEUP, HELPER_GET_CURRENT_PID_TGID, HELPER_KTIME_GET_BOOT_NS, HELPER_MAP_DELETE,
    HELPER_MAP_LOOKUP, HELPER_MAP_UPDATE, HELPER_PROBE_READ_USER_STR, HELPER_RINGBUF_RESERVE,
    HELPER_RINGBUF_SUBMIT, LOST_RING_FULL, PATH_BYTES, PathRecord, R0, R1, R2, R3, R4, R6, R7, R8, R9, R10,
};
use crate::error::Result;
use crate::ftrace::events::{Event, Timed};
use crate::syscall_table::{by_name, path_arguments};

/// The default threshold: calls shorter than this that did not sleep are not recorded.
pub const DEFAULT_THRESHOLD_NS: u64 = 1_000_000;
/// The spool file of the records.
pub const SPOOL_FILE: &str = "slowcalls.raw";
/// One record: tid u32, nr u32, enter ns u64, exit ns u64 (CLOCK_BOOTTIME), result i64,
/// the six arguments, path copy result i32 (0: the call has no path), tgid u32, the path.
pub const RECORD_SIZE: usize = 88 + PATH_BYTES;
/// The per-thread map value: enter ns u64, nr u32, sleep state u32, the six arguments.
pub const PENDING_SIZE: u32 = 64;

/// Reads: recorded only when slow (a read that sleeps on a cold disk or a pipe is common
/// and, when short, says nothing a page fill does not).
const TIMED_CALLS: &[&str] = &["read", "pread64"];

/// The sleep state of a pending call: not slept yet, slept, sleeps not counted.
const AWAKE: i32 = 0;
const SLEPT: i32 = 1;
const SLEEPS_IGNORED: i32 = 2;

/// Where the pending value is built on the enter program's stack.
const VALUE_AT: i16 = -72;
/// The `raw_syscalls` context: call number, then arguments (enter) or result (exit).
const CTX_ID: i16 = 8;
const CTX_ARGS: i16 = 16;
const CTX_RET: i16 = 16;

fn numbers(names: &[&str]) -> Vec<u32> {
    names.iter().filter_map(|n| by_name(n)).map(|c| c.nr).collect()
}

/// `raw_syscalls:sys_enter`: remembers a call of interest of a thread in scope.
pub fn enter_program(scope: Option<&OwnedFd>, pending: &OwnedFd) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let (out, metadata, timed, keep) = (a.label(), a.label(), a.label(), a.label());
    a.mov(R6, R1);
    a.current_in_scope(scope, out);
    a.load64(R8, R6, CTX_ID);
    for nr in numbers(METADATA_CALLS) {
        a.jeq_imm(R8, nr as i32, metadata);
    }
    for nr in numbers(TIMED_CALLS) {
        a.jeq_imm(R8, nr as i32, timed);
    }
    a.ja(out);
    a.bind(metadata);
    a.store32_imm(R10, VALUE_AT + 12, AWAKE);
    a.ja(keep);
    a.bind(timed);
    a.store32_imm(R10, VALUE_AT + 12, SLEEPS_IGNORED);
    a.bind(keep);
    a.store32(R10, VALUE_AT + 8, R8);
    for i in 0..6 {
        a.load64(R1, R6, CTX_ARGS + 8 * i);
        a.store64(R10, VALUE_AT + 16 + 8 * i, R1);
    }
    a.call(HELPER_KTIME_GET_BOOT_NS);
    a.store64(R10, VALUE_AT, R0);
    a.load_map(R1, pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.mov(R3, R10);
    a.add_imm(R3, i32::from(VALUE_AT));
    a.mov_imm(R4, 0);
    a.call(HELPER_MAP_UPDATE);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// `sched:sched_switch`: a thread that leaves the CPU to sleep (not preempted: the
/// state's low byte is zero then) inside a pending metadata call marks it. Returns 1,
/// so that the off-CPU stacks' perf event on the same tracepoint keeps its samples.
pub fn switch_program(pending: &OwnedFd, prev_state: (i16, usize)) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let out = a.label();
    let (offset, size) = prev_state;
    if size == 8 {
        a.load64(R1, R1, offset);
    } else {
        a.load32(R1, R1, offset);
    }
    a.and_imm(R1, 0xff);
    a.jeq_imm(R1, 0, out);
    a.call(HELPER_GET_CURRENT_PID_TGID);
    a.store32(R10, -4, R0);
    a.load_map(R1, pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_LOOKUP);
    a.jeq_imm(R0, 0, out);
    a.load32(R1, R0, 12);
    a.jne_imm(R1, AWAKE, out);
    a.store32_imm(R0, 12, SLEPT);
    a.bind(out);
    // The off-CPU stacks are perf samples of this tracepoint: returning 0 would drop them.
    a.ret1();
    a.finish()
}

/// `raw_syscalls:sys_exit`: the record of a pending call that lasted `threshold_ns` or
/// slept, with its path read now; the pending entry is removed either way.
pub fn exit_program(
    pending: &OwnedFd,
    ring: &OwnedFd,
    counters: &OwnedFd,
    threshold_ns: u64,
) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let (out, forget, emit, reserved, submit, copy) =
        (a.label(), a.label(), a.label(), a.label(), a.label(), a.label());
    a.mov(R6, R1);
    a.call(HELPER_GET_CURRENT_PID_TGID);
    a.mov(R7, R0);
    a.store32(R10, -4, R7);
    a.load_map(R1, pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_LOOKUP);
    a.jeq_imm(R0, 0, out);
    a.mov(R8, R0);
    a.call(HELPER_KTIME_GET_BOOT_NS);
    a.mov(R9, R0);
    a.mov(R2, R9);
    a.load64(R1, R8, 0);
    a.sub(R2, R1);
    a.mov_imm64(R3, threshold_ns);
    a.jge(R2, R3, emit);
    a.load32(R1, R8, 12);
    a.jeq_imm(R1, SLEPT, emit);
    a.ja(forget);

    a.bind(emit);
    a.load64(R1, R6, CTX_RET);
    a.store64(R10, -16, R1);
    a.load_map(R1, ring);
    a.mov_imm(R2, RECORD_SIZE as i32);
    a.mov_imm(R3, 0);
    a.call(HELPER_RINGBUF_RESERVE);
    a.jne_imm(R0, 0, reserved);
    a.count(counters, LOST_RING_FULL, -24);
    a.ja(forget);
    a.bind(reserved);
    a.mov(R6, R0);
    a.store32(R6, 0, R7);
    a.load32(R1, R8, 8);
    a.store32(R6, 4, R1);
    a.load64(R1, R8, 0);
    a.store64(R6, 8, R1);
    a.store64(R6, 16, R9);
    a.load64(R1, R10, -16);
    a.store64(R6, 24, R1);
    for i in 0..6 {
        a.load64(R1, R8, 16 + 8 * i);
        a.store64(R6, 32 + 8 * i, R1);
    }
    a.rsh_imm(R7, 32);
    a.store32(R6, 84, R7);
    a.store32_imm(R6, 80, 0);
    a.load32(R1, R8, 8);
    for (nr, arg) in path_arguments() {
        let next = a.label();
        a.jne_imm(R1, nr as i32, next);
        a.load64(R3, R8, 16 + 8 * i16::from(arg));
        a.ja(copy);
        a.bind(next);
    }
    a.ja(submit);
    a.bind(copy);
    a.mov(R1, R6);
    a.add_imm(R1, 88);
    a.mov_imm(R2, PATH_BYTES as i32);
    a.call(HELPER_PROBE_READ_USER_STR);
    a.store32(R6, 80, R0);
    a.bind(submit);
    a.mov(R1, R6);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.call(HELPER_RINGBUF_SUBMIT);

    a.bind(forget);
    a.load_map(R1, pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_DELETE);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// A decoded record: one whole call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowCall {
    pub tid: i32,
    pub pid: i32,
    pub nr: u32,
    /// CLOCK_BOOTTIME, the clock of `trace_clock=boot`.
    pub enter_ns: u64,
    pub exit_ns: u64,
    pub ret: i64,
    pub args: [u64; 6],
    /// `None`: the call has no path; `Some(None)`: its path could not be read.
    pub path: Option<Option<Vec<u8>>>,
}

impl SlowCall {
    /// Decodes one spooled record; `None` if it is short.
    pub fn decode(b: &[u8]) -> Option<SlowCall> {
        let u32_at = |o: usize| b.get(o..o + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let u64_at = |o: usize| b.get(o..o + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes);
        let mut args = [0u64; 6];
        for (i, arg) in args.iter_mut().enumerate() {
            *arg = u64_at(32 + 8 * i)?;
        }
        let copied = u32_at(80)? as i32;
        let bytes = b.get(88..RECORD_SIZE)?;
        let path = match copied {
            0 => None,
            n if n < 0 => Some(None),
            _ => {
                let n = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
                Some(Some(bytes[..n].to_vec()))
            }
        };
        Some(SlowCall {
            tid: u32_at(0)? as i32,
            nr: u32_at(4)?,
            enter_ns: u64_at(8)?,
            exit_ns: u64_at(16)?,
            ret: u64_at(24)? as i64,
            args,
            pid: u32_at(84)? as i32,
            path,
        })
    }

    /// The enter and exit events tracefs would have recorded for the call, and the
    /// record the `--syscalls` program would have made of its path.
    pub fn as_events(&self) -> ([Timed; 2], Option<PathRecord>) {
        let nr = i64::from(self.nr);
        let enter = Timed {
            ts: self.enter_ns,
            cpu: 0,
            event: Event::SysEnter { tid: self.tid, nr, args: self.args },
        };
        let exit =
            Timed { ts: self.exit_ns, cpu: 0, event: Event::SysExit { tid: self.tid, nr, ret: self.ret } };
        let path = self.path.clone().map(|path| PathRecord {
            tid: self.tid,
            pid: self.pid,
            nr: self.nr,
            boot_ns: self.enter_ns,
            path,
        });
        ([enter, exit], path)
    }
}

/// Every record of a spooled `slowcalls.raw` (a torn last record is left out).
pub fn decode_all(bytes: &[u8]) -> Vec<SlowCall> {
    bytes.chunks_exact(RECORD_SIZE).filter_map(SlowCall::decode).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(nr: u32, copied: i32, path: &[u8]) -> Vec<u8> {
        let mut r = vec![0u8; RECORD_SIZE];
        r[0..4].copy_from_slice(&42u32.to_le_bytes());
        r[4..8].copy_from_slice(&nr.to_le_bytes());
        r[8..16].copy_from_slice(&1_000u64.to_le_bytes());
        r[16..24].copy_from_slice(&7_000_000u64.to_le_bytes());
        r[24..32].copy_from_slice(&(-2i64).to_le_bytes());
        r[32..40].copy_from_slice(&(-100i64).to_le_bytes());
        r[80..84].copy_from_slice(&copied.to_le_bytes());
        r[84..88].copy_from_slice(&40u32.to_le_bytes());
        r[88..88 + path.len()].copy_from_slice(path);
        r
    }

    #[test]
    fn records_decode_to_the_events_of_the_call_and_its_path() {
        let mut bytes = record(262, 5, b"/mnt");
        bytes.extend(record(0, 0, b""));
        bytes.extend(record(262, -14, b""));
        bytes.extend(&record(4, 3, b"/x")[..50]);
        let calls = decode_all(&bytes);
        assert_eq!(calls.len(), 3);
        let (events, path) = calls[0].as_events();
        assert_eq!(events[0].ts, 1_000);
        assert_eq!(events[1].event, Event::SysExit { tid: 42, nr: 262, ret: -2 });
        assert!(
            matches!(events[0].event, Event::SysEnter { tid: 42, nr: 262, args } if args[0] as i64 == -100)
        );
        let path = path.expect("a path record");
        assert_eq!((path.pid, path.boot_ns, path.path), (40, 1_000, Some(b"/mnt".to_vec())));
        assert_eq!(calls[1].as_events().1, None, "a read has no path");
        assert_eq!(calls[2].as_events().1.map(|p| p.path), Some(None), "an unreadable path is kept as such");
    }

    #[test]
    fn the_filtered_calls_are_all_known() {
        assert_eq!(numbers(METADATA_CALLS).len(), METADATA_CALLS.len());
        assert_eq!(numbers(TIMED_CALLS).len(), TIMED_CALLS.len());
    }
}
