//! The file names of path system calls (`openat`, `newfstatat`, `statx`, `access`,
//! `readlink`, `execve`, …), which the syscall tracepoints carry only as user
//! pointers: small eBPF tracepoint programs, assembled here instruction by
//! instruction and loaded with `bpf(2)` (no compiler, no ELF), copy each name with
//! `bpf_probe_read_user_str` into a BPF ring buffer that a capture thread copies to
//! the spool (`paths.raw`, fixed-size records decoded by the assembly). A name not yet
//! in memory at the enter is read again at the exit (`raw_syscalls:sys_exit`).
//!
//! Scope: `raw_syscalls:sys_enter` runs for every task on the machine, so the
//! programs keep the tree's thread ids in a hash map: the recorder puts the root in,
//! `sched_process_fork` adds each child (thread or process) of a task in it,
//! `sched_process_exit` takes exiting threads out. With `--system` there is no map.
//! Records the ring buffer had no room for, and children the map had no room for,
//! are counted in an array map read at the end.

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::sync::Arc;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

use crate::capture::Stop;
use crate::error::{RecordError, Result};
use crate::sys::{BpfCmd, RingBuffer, attach_tracepoint, bpf, owned_fd};
use crate::syscall_table::path_arguments;

/// Bytes of a path the program copies (longer ones are cut, and end without a NUL).
pub const PATH_BYTES: usize = 256;
/// One record: tid u32, syscall nr u32, CLOCK_BOOTTIME ns u64, copy result i32
/// (length with the NUL, or -errno), tgid u32, then the path.
pub const RECORD_SIZE: usize = 24 + PATH_BYTES;
/// The spool file of the records.
pub const SPOOL_FILE: &str = "paths.raw";
/// Data bytes of the ring buffer (about 14,000 records between two reads).
pub(super) const RING_BYTES: usize = 4 << 20;
/// Thread ids the scope map holds.
pub(super) const SCOPE_ENTRIES: u32 = 32_768;
/// How often the reader empties the ring buffer (the programs never wake it: a wakeup
/// per record would cost more than the copy).
const READ_INTERVAL_MS: u16 = 10;

/// Counter slots of the array map.
pub(super) const LOST_RING_FULL: u32 = 0;
pub(super) const LOST_SCOPE_FULL: u32 = 1;

/// A decoded ring-buffer record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathRecord {
    pub tid: i32,
    pub pid: i32,
    pub nr: u32,
    /// CLOCK_BOOTTIME, the clock of `trace_clock=boot`.
    pub boot_ns: u64,
    /// `None` when the name could not be read (its page was not in memory).
    pub path: Option<Vec<u8>>,
}

impl PathRecord {
    /// Decodes one spooled record; `None` if it is short.
    pub fn decode(b: &[u8]) -> Option<PathRecord> {
        let u32_at = |o: usize| b.get(o..o + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let tid = u32_at(0)? as i32;
        let nr = u32_at(4)?;
        let boot_ns = u64::from_le_bytes(b.get(8..16)?.try_into().ok()?);
        let copied = u32_at(16)? as i32;
        let pid = u32_at(20)? as i32;
        let bytes = b.get(24..RECORD_SIZE)?;
        let path = (copied > 0).then(|| {
            let n = bytes.iter().position(|&c| c == 0).unwrap_or(bytes.len());
            bytes[..n].to_vec()
        });
        Some(PathRecord { tid, pid, nr, boot_ns, path })
    }
}

/// Every record of a spooled `paths.raw` (a torn last record is left out).
pub fn decode_all(bytes: &[u8]) -> Vec<PathRecord> {
    bytes.chunks_exact(RECORD_SIZE).filter_map(PathRecord::decode).collect()
}

// --- a tiny eBPF assembler -------------------------------------------------------

pub(super) const R0: u8 = 0;
pub(super) const R1: u8 = 1;
pub(super) const R2: u8 = 2;
pub(super) const R3: u8 = 3;
pub(super) const R4: u8 = 4;
pub(super) const R6: u8 = 6;
pub(super) const R7: u8 = 7;
pub(super) const R8: u8 = 8;
pub(super) const R9: u8 = 9;
pub(super) const R10: u8 = 10;

pub(super) const HELPER_MAP_LOOKUP: i32 = 1;
pub(super) const HELPER_MAP_UPDATE: i32 = 2;
pub(super) const HELPER_MAP_DELETE: i32 = 3;
pub(super) const HELPER_GET_CURRENT_PID_TGID: i32 = 14;
pub(super) const HELPER_GET_STACKID: i32 = 27;
pub(super) const HELPER_PROBE_READ_USER_STR: i32 = 114;
pub(super) const HELPER_KTIME_GET_BOOT_NS: i32 = 125;
pub(super) const HELPER_RINGBUF_RESERVE: i32 = 131;
pub(super) const HELPER_RINGBUF_SUBMIT: i32 = 132;
pub(super) const HELPER_RINGBUF_DISCARD: i32 = 133;
pub(super) const BPF_RB_NO_WAKEUP: i32 = 1;

/// Instructions under construction, with forward jumps to named labels.
#[derive(Default)]
pub(super) struct Asm {
    insns: Vec<u64>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, usize)>,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> u64 {
    u64::from(code)
        | (u64::from(dst & 0xf) << 8)
        | (u64::from(src & 0xf) << 12)
        | (u64::from(off as u16) << 16)
        | (u64::from(imm as u32) << 32)
}

impl Asm {
    pub(super) fn label(&mut self) -> usize {
        self.labels.push(None);
        self.labels.len() - 1
    }
    pub(super) fn bind(&mut self, label: usize) {
        self.labels[label] = Some(self.insns.len());
    }
    pub(super) fn raw(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) {
        self.insns.push(insn(code, dst, src, off, imm));
    }
    pub(super) fn mov(&mut self, dst: u8, src: u8) {
        self.raw(0xbf, dst, src, 0, 0);
    }
    pub(super) fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0xb7, dst, 0, 0, imm);
    }
    pub(super) fn add_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x07, dst, 0, 0, imm);
    }
    pub(super) fn rsh_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x77, dst, 0, 0, imm);
    }
    /// `dst = imm` for any 64-bit value (two instruction slots).
    pub(super) fn mov_imm64(&mut self, dst: u8, imm: u64) {
        self.raw(0x18, dst, 0, 0, imm as u32 as i32);
        self.insns.push(u64::from((imm >> 32) as u32) << 32);
    }
    /// `dst -= src`
    pub(super) fn sub(&mut self, dst: u8, src: u8) {
        self.raw(0x1f, dst, src, 0, 0);
    }
    /// `dst &= imm`
    pub(super) fn and_imm(&mut self, dst: u8, imm: i32) {
        self.raw(0x57, dst, 0, 0, imm);
    }
    /// Jumps when `dst >= src`, unsigned.
    pub(super) fn jge(&mut self, dst: u8, src: u8, label: usize) {
        self.fixups.push((self.insns.len(), label));
        self.raw(0x3d, dst, src, 0, 0);
    }
    pub(super) fn load32(&mut self, dst: u8, src: u8, off: i16) {
        self.raw(0x61, dst, src, off, 0);
    }
    pub(super) fn load64(&mut self, dst: u8, src: u8, off: i16) {
        self.raw(0x79, dst, src, off, 0);
    }
    pub(super) fn store32(&mut self, dst: u8, off: i16, src: u8) {
        self.raw(0x63, dst, src, off, 0);
    }
    pub(super) fn store64(&mut self, dst: u8, off: i16, src: u8) {
        self.raw(0x7b, dst, src, off, 0);
    }
    pub(super) fn store32_imm(&mut self, dst: u8, off: i16, imm: i32) {
        self.raw(0x62, dst, 0, off, imm);
    }
    /// `lock *(u64 *)(dst + off) += src`
    fn atomic_add64(&mut self, dst: u8, off: i16, src: u8) {
        self.raw(0xdb, dst, src, off, 0);
    }
    /// `dst = map` (a map fd, resolved by the kernel at load).
    pub(super) fn load_map(&mut self, dst: u8, map: &OwnedFd) {
        self.raw(0x18, dst, 1, 0, map.as_raw_fd());
        self.insns.push(0);
    }
    fn jump(&mut self, code: u8, dst: u8, imm: i32, label: usize) {
        self.fixups.push((self.insns.len(), label));
        self.raw(code, dst, 0, 0, imm);
    }
    pub(super) fn jeq_imm(&mut self, dst: u8, imm: i32, label: usize) {
        self.jump(0x15, dst, imm, label);
    }
    /// Jumps when `dst > imm`, signed.
    fn jsgt_imm(&mut self, dst: u8, imm: i32, label: usize) {
        self.jump(0x65, dst, imm, label);
    }
    pub(super) fn jne_imm(&mut self, dst: u8, imm: i32, label: usize) {
        self.jump(0x55, dst, imm, label);
    }
    pub(super) fn ja(&mut self, label: usize) {
        self.jump(0x05, 0, 0, label);
    }
    pub(super) fn call(&mut self, helper: i32) {
        self.raw(0x85, 0, 0, 0, helper);
    }
    pub(super) fn exit(&mut self) {
        self.raw(0x95, 0, 0, 0, 0);
    }
    /// `r0 = 0; exit`
    pub(super) fn ret0(&mut self) {
        self.mov_imm(R0, 0);
        self.exit();
    }
    /// `r0 = 1; exit`: on a tracepoint that perf events sample too, a program that returns
    /// 0 drops the sample of every perf event on it (`perf_trace_run_bpf_submit`).
    pub(super) fn ret1(&mut self) {
        self.mov_imm(R0, 1);
        self.exit();
    }
    /// `counters[slot] += 1` (clobbers r0–r2).
    pub(super) fn count(&mut self, counters: &OwnedFd, slot: u32, stack_off: i16) {
        let done = self.label();
        self.store32_imm(R10, stack_off, slot as i32);
        self.load_map(R1, counters);
        self.mov(R2, R10);
        self.add_imm(R2, i32::from(stack_off));
        self.call(HELPER_MAP_LOOKUP);
        self.jeq_imm(R0, 0, done);
        self.mov_imm(R1, 1);
        self.atomic_add64(R0, 0, R1);
        self.bind(done);
    }
    /// Skips to `out` unless the current thread is in the scope map (clobbers r0–r2;
    /// leaves the pid_tgid in r7).
    pub(super) fn current_in_scope(&mut self, scope: Option<&OwnedFd>, out: usize) {
        self.call(HELPER_GET_CURRENT_PID_TGID);
        self.mov(R7, R0);
        self.store32(R10, -4, R7);
        if let Some(scope) = scope {
            self.load_map(R1, scope);
            self.mov(R2, R10);
            self.add_imm(R2, -4);
            self.call(HELPER_MAP_LOOKUP);
            self.jeq_imm(R0, 0, out);
        }
    }
    pub(super) fn finish(mut self) -> Result<Vec<u64>> {
        for &(at, label) in &self.fixups {
            let target = self.labels[label].ok_or_else(|| bpf_error("an unbound label"))?;
            let off =
                i16::try_from(target as i64 - at as i64 - 1).map_err(|_| bpf_error("a jump too far"))?;
            self.insns[at] = (self.insns[at] & !0xffff_0000) | (u64::from(off as u16) << 16);
        }
        Ok(self.insns)
    }
}

pub(super) fn bpf_error(what: &str) -> RecordError {
    RecordError::Bpf(what.to_owned())
}

/// The stack slot of a retry entry (pointer, boot ns, call nr, tgid) in the programs.
const RETRY_VALUE_AT: i16 = -32;
const RETRY_VALUE_SIZE: u32 = 24;
/// Calls whose name cannot be read again at their exit (a successful exec replaces the memory).
const NO_RETRY: &[u32] = &[59, 322];

/// `raw_syscalls:sys_enter`: for a path call of a thread in scope, a record with its name.
/// A name whose page is not in memory yet cannot be read here (no page faults in the
/// program): the call is kept in `retry` and its record made at its exit, once the kernel
/// has read the name (and so brought its page in).
fn sys_enter_program(
    scope: Option<&OwnedFd>,
    ring: &OwnedFd,
    counters: &OwnedFd,
    retry: &OwnedFd,
) -> Result<Vec<u64>> {
    const ID: i16 = 8;
    const ARGS: i16 = 16;
    let mut a = Asm::default();
    let out = a.label();
    let copy = a.label();
    a.mov(R6, R1);
    a.current_in_scope(scope, out);
    a.load64(R8, R6, ID);
    let calls = path_arguments();
    let mut by_arg: Vec<(u8, usize)> = Vec::new();
    for &(nr, arg) in &calls {
        let label = match by_arg.iter().find(|(x, _)| *x == arg) {
            Some(&(_, l)) => l,
            None => {
                let l = a.label();
                by_arg.push((arg, l));
                l
            }
        };
        a.jeq_imm(R8, nr as i32, label);
    }
    a.ja(out);
    for &(arg, label) in &by_arg {
        a.bind(label);
        a.load64(R9, R6, ARGS + 8 * i16::from(arg));
        a.ja(copy);
    }
    a.bind(copy);
    let reserved = a.label();
    a.load_map(R1, ring);
    a.mov_imm(R2, RECORD_SIZE as i32);
    a.mov_imm(R3, 0);
    a.call(HELPER_RINGBUF_RESERVE);
    a.jne_imm(R0, 0, reserved);
    a.count(counters, LOST_RING_FULL, -8);
    a.ja(out);
    a.bind(reserved);
    a.mov(R6, R0);
    a.store32(R6, 0, R7);
    a.store32(R6, 4, R8);
    a.rsh_imm(R7, 32);
    a.store32(R6, 20, R7);
    a.call(HELPER_KTIME_GET_BOOT_NS);
    a.store64(R6, 8, R0);
    a.mov(R1, R6);
    a.add_imm(R1, 24);
    a.mov_imm(R2, PATH_BYTES as i32);
    a.mov(R3, R9);
    a.call(HELPER_PROBE_READ_USER_STR);
    a.store32(R6, 16, R0);
    let submit = a.label();
    a.jsgt_imm(R0, 0, submit);
    for &nr in NO_RETRY {
        a.jeq_imm(R8, nr as i32, submit);
    }
    a.store64(R10, RETRY_VALUE_AT, R9);
    a.load64(R1, R6, 8);
    a.store64(R10, RETRY_VALUE_AT + 8, R1);
    a.store32(R10, RETRY_VALUE_AT + 16, R8);
    a.store32(R10, RETRY_VALUE_AT + 20, R7);
    a.load_map(R1, retry);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.mov(R3, R10);
    a.add_imm(R3, i32::from(RETRY_VALUE_AT));
    a.mov_imm(R4, 0);
    a.call(HELPER_MAP_UPDATE);
    a.jne_imm(R0, 0, submit);
    a.mov(R1, R6);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.call(HELPER_RINGBUF_DISCARD);
    a.ja(out);
    a.bind(submit);
    a.mov(R1, R6);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.call(HELPER_RINGBUF_SUBMIT);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// `raw_syscalls:sys_exit`: the record of a call whose name could not be read at its
/// enter, read now (timed at the enter, as the assembly joins them).
fn sys_exit_program(ring: &OwnedFd, counters: &OwnedFd, retry: &OwnedFd) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let out = a.label();
    let forget = a.label();
    let reserved = a.label();
    a.call(HELPER_GET_CURRENT_PID_TGID);
    a.store32(R10, -4, R0);
    a.load_map(R1, retry);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_LOOKUP);
    a.jeq_imm(R0, 0, out);
    a.mov(R7, R0);
    a.load_map(R1, ring);
    a.mov_imm(R2, RECORD_SIZE as i32);
    a.mov_imm(R3, 0);
    a.call(HELPER_RINGBUF_RESERVE);
    a.jne_imm(R0, 0, reserved);
    a.count(counters, LOST_RING_FULL, -8);
    a.ja(forget);
    a.bind(reserved);
    a.mov(R8, R0);
    a.load32(R1, R10, -4);
    a.store32(R8, 0, R1);
    a.load32(R1, R7, 16);
    a.store32(R8, 4, R1);
    a.load64(R1, R7, 8);
    a.store64(R8, 8, R1);
    a.load32(R1, R7, 20);
    a.store32(R8, 20, R1);
    a.mov(R1, R8);
    a.add_imm(R1, 24);
    a.mov_imm(R2, PATH_BYTES as i32);
    a.load64(R3, R7, 0);
    a.call(HELPER_PROBE_READ_USER_STR);
    a.store32(R8, 16, R0);
    a.mov(R1, R8);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.call(HELPER_RINGBUF_SUBMIT);
    a.bind(forget);
    a.load_map(R1, retry);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_DELETE);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// `sched:sched_process_fork`: a child of a task in scope joins it.
fn fork_program(scope: &OwnedFd, counters: &OwnedFd, parent_off: i16, child_off: i16) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let out = a.label();
    a.mov(R6, R1);
    a.load32(R1, R6, parent_off);
    a.store32(R10, -4, R1);
    a.load_map(R1, scope);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_LOOKUP);
    a.jeq_imm(R0, 0, out);
    // The child takes its parent's value: a thread runs its process's code, and so does a
    // child until it execs (then `exec_program` resets it).
    a.load32(R1, R0, 0);
    a.store32(R10, -12, R1);
    a.load32(R1, R6, child_off);
    a.store32(R10, -8, R1);
    a.load_map(R1, scope);
    a.mov(R2, R10);
    a.add_imm(R2, -8);
    a.mov(R3, R10);
    a.add_imm(R3, -12);
    a.mov_imm(R4, 0);
    a.call(HELPER_MAP_UPDATE);
    a.jeq_imm(R0, 0, out);
    a.count(counters, LOST_SCOPE_FULL, -16);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// `sched:sched_process_exec`: a task in scope runs a new program, whose frame pointers
/// nothing vouches for yet: its samples copy the user stack until the recorder marks it.
fn exec_program(scope: &OwnedFd) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let out = a.label();
    a.current_in_scope(Some(scope), out);
    a.store32_imm(R0, 0, IN_SCOPE as i32);
    a.bind(out);
    a.ret0();
    a.finish()
}

/// `sched:sched_process_exit` (once per thread): the thread leaves the scope.
fn exit_program(scope: &OwnedFd) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let out = a.label();
    a.call(HELPER_GET_CURRENT_PID_TGID);
    a.store32(R10, -4, R0);
    a.load_map(R1, scope);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_DELETE);
    a.bind(out);
    a.ret0();
    a.finish()
}

pub(super) fn create_map(kind: u32, key: u32, value: u32, entries: u32, name: &str) -> Result<OwnedFd> {
    let mut attr = [0u64; 16];
    attr[0] = u64::from(kind) | (u64::from(key) << 32);
    attr[1] = u64::from(value) | (u64::from(entries) << 32);
    let mut bytes = [0u8; 16];
    for (b, c) in bytes.iter_mut().zip(name.bytes().take(15)) {
        *b = c;
    }
    // map_name is at byte 28 of the attribute block (after map_flags, inner_map_fd, numa_node).
    let mut raw: [u8; 128] = [0; 128];
    for (i, w) in attr.iter().enumerate() {
        raw[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
    }
    raw[28..44].copy_from_slice(&bytes);
    for (i, w) in attr.iter_mut().enumerate() {
        *w = u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
    }
    let fd = bpf(BpfCmd::MapCreate, &mut attr)
        .map_err(|e| RecordError::Bpf(format!("creating map {name}: {e}")))?;
    owned_fd(fd).map_err(|e| RecordError::Bpf(format!("map {name}: {e}")))
}

pub(super) fn load_program(insns: &[u64], name: &str) -> Result<OwnedFd> {
    const BPF_PROG_TYPE_TRACEPOINT: u64 = 5;
    load_program_of_type(insns, name, BPF_PROG_TYPE_TRACEPOINT)
}

fn load_program_of_type(insns: &[u64], name: &str, prog_type: u64) -> Result<OwnedFd> {
    let license = c"Dual MIT/GPL";
    let mut log = vec![0u8; 64 * 1024];
    let mut attr = [0u64; 16];
    attr[0] = prog_type | ((insns.len() as u64) << 32);
    attr[1] = insns.as_ptr() as u64;
    attr[2] = license.as_ptr() as u64;
    attr[3] = 1 | ((log.len() as u64) << 32); // log_level 1, log_size
    attr[4] = log.as_mut_ptr() as u64;
    match bpf(BpfCmd::ProgLoad, &mut attr) {
        Ok(fd) => owned_fd(fd).map_err(|e| RecordError::Bpf(format!("program {name}: {e}"))),
        Err(e) => {
            let n = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let text = String::from_utf8_lossy(&log[..n]);
            let last: Vec<&str> = text.lines().rev().take(3).collect();
            Err(RecordError::Bpf(format!("loading program {name}: {e} ({})", last.join(" / "))))
        }
    }
}

pub(super) fn map_update(map: &OwnedFd, key: &[u8], value: &[u8]) -> std::io::Result<()> {
    map_update_flags(map, key, value, 0)
}

fn map_update_flags(map: &OwnedFd, key: &[u8], value: &[u8], flags: u64) -> std::io::Result<()> {
    let mut attr = [0u64; 16];
    attr[0] = map.as_raw_fd() as u64;
    attr[1] = key.as_ptr() as u64;
    attr[2] = value.as_ptr() as u64;
    attr[3] = flags;
    bpf(BpfCmd::MapUpdateElem, &mut attr).map(|_| ())
}

pub(super) fn map_lookup_u64(map: &OwnedFd, key: u32) -> Option<u64> {
    let key = key.to_le_bytes();
    let mut value = [0u8; 8];
    let mut attr = [0u64; 16];
    attr[0] = map.as_raw_fd() as u64;
    attr[1] = key.as_ptr() as u64;
    attr[2] = value.as_mut_ptr() as u64;
    bpf(BpfCmd::MapLookupElem, &mut attr).ok()?;
    Some(u64::from_le_bytes(value))
}

pub(super) fn tracepoint_id(tracefs: &Path, system: &str, event: &str) -> Result<u64> {
    let path = tracefs.join("events").join(system).join(event).join("id");
    let text =
        std::fs::read_to_string(&path).map_err(|e| RecordError::Bpf(format!("{}: {e}", path.display())))?;
    text.trim().parse().map_err(|_| RecordError::Bpf(format!("{}: not a number", path.display())))
}

/// The offset and size of a field of a tracefs event, from its `format` file.
pub(super) fn field_at(tracefs: &Path, system: &str, event: &str, field: &str) -> Result<(i16, usize)> {
    let path = tracefs.join("events").join(system).join(event).join("format");
    let text =
        crate::tracefs::read_text(&path).map_err(|e| RecordError::Bpf(format!("{}: {e}", path.display())))?;
    let format = crate::ftrace::format::EventFormat::parse(system, &text)?;
    let f = format.require(field)?;
    let offset = i16::try_from(f.offset)
        .map_err(|_| RecordError::Bpf(format!("{system}:{event} field {field}: offset")))?;
    Ok((offset, f.size))
}

/// The offset of a 4-byte field of a tracefs event.
pub(super) fn field_offset(tracefs: &Path, system: &str, event: &str, field: &str) -> Result<i16> {
    match field_at(tracefs, system, event, field)? {
        (offset, 4) => Ok(offset),
        _ => Err(RecordError::Bpf(format!("{system}:{event} field {field} is not 4 bytes"))),
    }
}

/// Which calls the eBPF programs record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathMode {
    /// The name of every path call, joined to the calls tracefs records (`--syscalls`).
    EveryCall,
    /// Whole records of the file-system calls that lasted `threshold_ns` or more, or (the
    /// metadata calls) slept; nothing of the others leaves the kernel.
    Slow { threshold_ns: u64 },
}

/// The loaded and attached programs, their maps and the ring buffer. Dropping it
/// detaches everything (the kernel frees programs and maps with their last fd).
pub struct PathCapture {
    scope: Option<OwnedFd>,
    counters: OwnedFd,
    ring: RingBuffer,
    record_size: usize,
    spool_file: &'static str,
    _ring_map: OwnedFd,
    _attached: Vec<OwnedFd>,
}

/// The threads whose path calls are recorded.
pub struct ScopeMap(OwnedFd);

/// A scope map value: the thread is in scope.
const IN_SCOPE: u32 = 1;
/// A scope map value bit: the thread's program unwinds the same by its frame-pointer chain
/// as by DWARF (learned by earlier recordings), so its CPU samples need no stack copy.
const FRAME_POINTERS: u32 = 2;

/// Which CPU samples a sampling event keeps (see [`ScopeMap::sample_filter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleRoute {
    /// Threads in scope whose user stack must be copied (the event takes a copy).
    CopyStack,
    /// Threads in scope whose program has trustworthy frame pointers (no copy).
    FramePointers,
}

impl ScopeMap {
    /// Another handle on the same map.
    pub fn try_clone(&self) -> Option<ScopeMap> {
        self.0.try_clone().ok().map(ScopeMap)
    }

    /// A perf-event program that keeps the samples of the threads in scope and drops the
    /// others' (before their user stack is copied), for sampling events that watch whole
    /// CPUs: those cost the sampled program nothing when it leaves the CPU, where an
    /// event that follows a task is stopped and started at each of its context switches
    /// (about 6 µs a switch on this project's VM, the timer's reprogramming).
    ///
    /// `route` splits the threads in scope between two events: those marked as having
    /// frame pointers and the others.
    pub fn sample_filter(&self, route: SampleRoute) -> Result<OwnedFd> {
        const BPF_PROG_TYPE_PERF_EVENT: u64 = 7;
        let mut a = Asm::default();
        let out = a.label();
        a.current_in_scope(Some(&self.0), out);
        a.load32(R1, R0, 0);
        a.and_imm(R1, FRAME_POINTERS as i32);
        match route {
            SampleRoute::CopyStack => a.jne_imm(R1, 0, out),
            SampleRoute::FramePointers => a.jeq_imm(R1, 0, out),
        }
        a.ret1();
        a.bind(out);
        a.ret0();
        let name = match route {
            SampleRoute::CopyStack => "cs_sample_scope",
            SampleRoute::FramePointers => "cs_sample_fp",
        };
        load_program_of_type(&a.finish()?, name, BPF_PROG_TYPE_PERF_EVENT)
    }

    /// Marks process `pid` (just after its exec, when it is its only thread) as running a
    /// program with trustworthy frame pointers; its later threads and children inherit it.
    /// A process that is not in scope is left out.
    pub fn mark_frame_pointers(&self, pid: i32) -> Result<()> {
        const BPF_EXIST: u64 = 2;
        map_update_flags(&self.0, &pid.to_le_bytes(), &(IN_SCOPE | FRAME_POINTERS).to_le_bytes(), BPF_EXIST)
            .map_err(|e| RecordError::Bpf(format!("marking process {pid}'s frame pointers: {e}")))
    }

    /// Puts threads in scope (the paused command, `--also` threads); their children follow.
    pub fn add(&self, tids: &[i32]) -> Result<()> {
        for tid in tids {
            map_update(&self.0, &tid.to_le_bytes(), &IN_SCOPE.to_le_bytes())
                .map_err(|e| RecordError::Bpf(format!("adding thread {tid} to the scope map: {e}")))?;
        }
        Ok(())
    }
}

/// Loads `insns` as a tracepoint program and attaches it to `system:event`.
pub(super) fn attach_program(
    tracefs: &Path,
    insns: Vec<u64>,
    name: &str,
    system: &str,
    event: &str,
) -> Result<OwnedFd> {
    let prog = load_program(&insns, name)?;
    let id = tracepoint_id(tracefs, system, event)?;
    attach_tracepoint(id, &prog).map_err(|e| RecordError::Bpf(format!("attaching to {system}:{event}: {e}")))
}

/// A new scope map and the attached programs that keep it: a forked child joins its
/// parent's scope, an exiting thread leaves it, an exec clears the frame-pointer mark.
/// Children the map has no room for are counted in `counters`' `LOST_SCOPE_FULL` slot.
pub(super) fn follow_scope(tracefs: &Path, counters: &OwnedFd) -> Result<(OwnedFd, Vec<OwnedFd>)> {
    const HASH: u32 = 1;
    let scope = create_map(HASH, 4, 4, SCOPE_ENTRIES, "cs_scope")?;
    let parent = field_offset(tracefs, "sched", "sched_process_fork", "parent_pid")?;
    let child = field_offset(tracefs, "sched", "sched_process_fork", "child_pid")?;
    let attached = vec![
        attach_program(
            tracefs,
            fork_program(&scope, counters, parent, child)?,
            "cs_fork",
            "sched",
            "sched_process_fork",
        )?,
        attach_program(tracefs, exit_program(&scope)?, "cs_exit", "sched", "sched_process_exit")?,
        attach_program(tracefs, exec_program(&scope)?, "cs_exec", "sched", "sched_process_exec")?,
    ];
    Ok((scope, attached))
}

impl ScopeMap {
    /// The map itself, for programs that check the scope.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.0
    }
}

/// What the path capture lost.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathLosses {
    pub ring_full: u64,
    pub scope_full: u64,
}

impl PathCapture {
    /// Loads and attaches the programs; with `system`, every task's calls are recorded.
    pub fn start(tracefs: &Path, system: bool, mode: PathMode) -> Result<PathCapture> {
        const HASH: u32 = 1;
        const ARRAY: u32 = 2;
        const RINGBUF: u32 = 27;
        let counters = create_map(ARRAY, 4, 8, 2, "cs_lost")?;
        let ring_map = create_map(RINGBUF, 0, 0, RING_BYTES as u32, "cs_paths")?;
        let mut attached = Vec::new();
        let scope = match system {
            true => None,
            false => {
                let (scope, followers) = follow_scope(tracefs, &counters)?;
                attached.extend(followers);
                Some(scope)
            }
        };
        let attach = |insns: Vec<u64>, name: &str, system_name: &str, event: &str| -> Result<OwnedFd> {
            attach_program(tracefs, insns, name, system_name, event)
        };
        let (record_size, spool_file) = match mode {
            PathMode::EveryCall => {
                let retry = create_map(HASH, 4, RETRY_VALUE_SIZE, SCOPE_ENTRIES, "cs_retry")?;
                let enter = sys_enter_program(scope.as_ref(), &ring_map, &counters, &retry)?;
                attached.push(attach(enter, "cs_paths", "raw_syscalls", "sys_enter")?);
                let exit = sys_exit_program(&ring_map, &counters, &retry)?;
                attached.push(attach(exit, "cs_paths_exit", "raw_syscalls", "sys_exit")?);
                (RECORD_SIZE, SPOOL_FILE)
            }
            PathMode::Slow { threshold_ns } => {
                use crate::capture::slow_calls as slow;
                let pending = create_map(HASH, 4, slow::PENDING_SIZE, SCOPE_ENTRIES, "cs_pending")?;
                attached.push(attach(
                    slow::enter_program(scope.as_ref(), &pending)?,
                    "cs_slow_enter",
                    "raw_syscalls",
                    "sys_enter",
                )?);
                attached.push(attach(
                    slow::exit_program(&pending, &ring_map, &counters, threshold_ns)?,
                    "cs_slow_exit",
                    "raw_syscalls",
                    "sys_exit",
                )?);
                let state = field_at(tracefs, "sched", "sched_switch", "prev_state")?;
                attached.push(attach(
                    slow::switch_program(&pending, state)?,
                    "cs_slow_sleep",
                    "sched",
                    "sched_switch",
                )?);
                (slow::RECORD_SIZE, slow::SPOOL_FILE)
            }
        };
        let ring = RingBuffer::map(&ring_map, RING_BYTES)
            .map_err(|e| RecordError::Bpf(format!("mapping the ring buffer: {e}")))?;
        Ok(PathCapture {
            scope,
            counters,
            ring,
            record_size,
            spool_file,
            _ring_map: ring_map,
            _attached: attached,
        })
    }

    /// The spool file the records go to.
    pub fn spool_file(&self) -> &'static str {
        self.spool_file
    }

    /// A handle on the scope map (none with `--system`), to put the command in once it
    /// is paused, while the capture thread runs.
    pub fn scope_map(&self) -> Option<ScopeMap> {
        Some(ScopeMap(self.scope.as_ref()?.try_clone().ok()?))
    }

    /// The capture thread: copies records to `out` until `stop`, then once more; returns
    /// the records copied and what was lost.
    pub fn run(mut self, mut out: File, stop: Arc<Stop>) -> Result<(u64, PathLosses)> {
        let mut copied = 0u64;
        let size = self.record_size;
        let mut buf = Vec::with_capacity(64 * size);
        loop {
            let stopped = {
                let mut fds = [PollFd::new(stop.fd(), PollFlags::POLLIN)];
                match poll(&mut fds, PollTimeout::from(READ_INTERVAL_MS)) {
                    Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                    Err(e) => return Err(RecordError::system("bpf paths: poll", e)),
                }
                fds[0].revents().is_some_and(|r| !r.is_empty())
            };
            buf.clear();
            copied += self.ring.drain(|record| {
                let n = record.len().min(size);
                buf.extend_from_slice(&record[..n]);
                buf.resize(buf.len() + size - n, 0);
            }) as u64;
            out.write_all(&buf).map_err(|e| RecordError::Spool(format!("{}: {e}", self.spool_file)))?;
            if stopped {
                break;
            }
        }
        let losses = PathLosses {
            ring_full: map_lookup_u64(&self.counters, LOST_RING_FULL).unwrap_or(0),
            scope_full: map_lookup_u64(&self.counters, LOST_SCOPE_FULL).unwrap_or(0),
        };
        Ok((copied, losses))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_are_resolved_relative_to_the_next_instruction() {
        let mut a = Asm::default();
        let l = a.label();
        a.jeq_imm(R1, 7, l);
        a.mov_imm(R0, 1);
        a.bind(l);
        a.ret0();
        let insns = a.finish().unwrap();
        assert_eq!(insns[0], insn(0x15, R1, 0, 1, 7));
        assert_eq!(insns[0] & 0xff, 0x15);
        assert_eq!((insns[0] >> 16) as u16, 1);
        assert_eq!(insns[0] >> 32, 7);
    }

    #[test]
    fn records_decode_with_and_without_a_name() {
        let mut r = vec![0u8; RECORD_SIZE];
        r[0..4].copy_from_slice(&42u32.to_le_bytes());
        r[4..8].copy_from_slice(&257u32.to_le_bytes());
        r[8..16].copy_from_slice(&1234u64.to_le_bytes());
        r[16..20].copy_from_slice(&5i32.to_le_bytes());
        r[20..24].copy_from_slice(&40u32.to_le_bytes());
        r[24..28].copy_from_slice(b"/etc");
        let mut bytes = r.clone();
        r[16..20].copy_from_slice(&(-14i32).to_le_bytes());
        bytes.extend_from_slice(&r);
        bytes.extend_from_slice(&r[..10]);
        let all = decode_all(&bytes);
        assert_eq!(all.len(), 2);
        assert_eq!(
            all[0],
            PathRecord { tid: 42, pid: 40, nr: 257, boot_ns: 1234, path: Some(b"/etc".to_vec()) }
        );
        assert_eq!(all[1].path, None);
    }
}
