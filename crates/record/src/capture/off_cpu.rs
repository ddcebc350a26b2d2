//! Off-CPU kernel stacks of a command's tree, taken and filtered in the kernel: one eBPF
//! program on `sched:sched_switch` (assembled like those of [`super::bpf`]). When a thread
//! in scope leaves the CPU to sleep (`prev_state & 3`: S or D, never a preemption) it
//! takes the thread's kernel stack with `bpf_get_stackid` into a stack-trace map (each
//! distinct stack stored once) and leaves {switch-out time, stack id, state} in a
//! per-thread map; when the thread is switched back in, the sleep becomes a record in a
//! BPF ring buffer only if it lasted the threshold (`record --off-cpu-min`; an
//! uninterruptible sleep, an I/O wait, has a lower bar), and the entry is deleted. The
//! program returns 1: a tracepoint program that returns 0 drops the samples of every
//! perf event on the tracepoint, machine-wide.
//!
//! It replaces a per-task perf event on the same tracepoint, which the kernel schedules
//! in and out at every context switch of every recorded thread (about 1.8 µs a switch on
//! this project's VM) and which writes a record with its callchain for every sleep,
//! however short. Per sleep the program is not measurably cheaper (BENCHMARKS.md): it still
//! walks the stack at every switch to sleep, before the sleep's length is known; what it
//! saves is the records of short sleeps. The perf event stays the fallback when the program is refused, and the
//! path of `--system` and `--also`: there it watches whole CPUs (no per-task switching
//! cost), and a program would have to keep a pending entry and a stack for every thread
//! of the machine, in maps of a fixed size that a boot's thousands of threads and stacks
//! would overflow.
//!
//! The perf capture thread drains the ring buffer (`offcpu.raw`); at the end it detaches
//! the program, adds the sleeps still under way (from the per-thread map) and writes each
//! kept stack id's frames once (`offcpu-stacks.raw`). The assembly turns both into the
//! same `off_cpu_sample` rows the perf event gave.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::capture::bpf::{
    Asm, BPF_RB_NO_WAKEUP, HELPER_GET_STACKID, HELPER_KTIME_GET_BOOT_NS, HELPER_MAP_DELETE,
    HELPER_MAP_LOOKUP, HELPER_MAP_UPDATE, HELPER_RINGBUF_RESERVE, HELPER_RINGBUF_SUBMIT, LOST_RING_FULL,
    LOST_SCOPE_FULL, R0, R1, R2, R3, R4, R6, R7, R8, R9, R10, ScopeMap, attach_program, create_map, field_at,
    field_offset, follow_scope, map_lookup_u64, map_update,
};
use crate::error::{RecordError, Result};
use crate::sys::{BpfCmd, RingBuffer, bpf};

/// The default threshold of a sleep (S): shorter ones leave no record (see BENCHMARKS.md,
/// "Off-CPU stacks filtered in the kernel", for the share of off-CPU time they hold).
pub const DEFAULT_MIN_NS: u64 = 1_000_000;
/// The threshold of an uninterruptible sleep (D: a disk read, a page fill), when lower
/// than the sleep's: short I/O waits add up on a cold start, and the doctor names them.
pub const DISK_SLEEP_MIN_NS: u64 = 100_000;
/// The spool file of the records.
pub const SPOOL_FILE: &str = "offcpu.raw";
/// The spool file of the stacks the records name.
pub const STACKS_FILE: &str = "offcpu-stacks.raw";
/// One record: tid u32, tgid u32, switch-out ns u64, switch-in ns u64 (0: still asleep
/// at the end; CLOCK_BOOTTIME), stack id i32 (negative: none, `-errno`), state u32.
pub const RECORD_SIZE: usize = 32;
/// Kernel frames kept of a stack (deeper sleeps are cut at the outermost frames).
const STACK_DEPTH: u32 = 64;
/// Distinct stacks the stack map holds (a command's tree sleeps in a few hundred).
const STACK_ENTRIES: u32 = 16_384;
/// Threads asleep at once that the per-thread map can hold.
const PENDING_ENTRIES: u32 = 32_768;
/// The per-thread value: switch-out ns u64, stack id i32, state u32, tgid u32, padding.
const PENDING_SIZE: u32 = 24;
const PENDING_AT: i16 = -32;
/// Data bytes of the ring buffer: 131,072 records between two reads.
const RING_BYTES: usize = 4 << 20;

/// How the eBPF program filtered the sleeps (`perf.json`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFilter {
    /// A sleep shorter than this left no record…
    pub min_ns: u64,
    /// …unless uninterruptible (D) and at least this long.
    pub disk_sleep_min_ns: u64,
}

impl KernelFilter {
    /// The filter of `record --off-cpu-min MIN`: D sleeps keep the lower of the two bars.
    pub fn new(min_ns: u64) -> KernelFilter {
        KernelFilter { min_ns, disk_sleep_min_ns: min_ns.min(DISK_SLEEP_MIN_NS) }
    }
}

/// The offsets of the `sched_switch` fields the program reads.
struct SwitchFields {
    prev_state: (i16, usize),
    next_pid: i16,
}

/// `sched:sched_switch`: see the module's documentation.
fn switch_program(
    scope: &OwnedFd,
    maps: &Maps,
    fields: &SwitchFields,
    filter: KernelFilter,
) -> Result<Vec<u64>> {
    let mut a = Asm::default();
    let switch_in = a.label();
    a.mov(R6, R1);
    let (offset, size) = fields.prev_state;
    if size == 8 {
        a.load64(R8, R6, offset);
    } else {
        a.load32(R8, R6, offset);
    }
    a.and_imm(R8, 0xff);
    a.mov(R1, R8);
    a.and_imm(R1, 3);
    a.jeq_imm(R1, 0, switch_in);
    a.current_in_scope(Some(scope), switch_in);
    a.mov(R1, R6);
    a.load_map(R2, &maps.stacks);
    a.mov_imm(R3, 0);
    a.call(HELPER_GET_STACKID);
    a.store32(R10, PENDING_AT + 8, R0);
    a.store32(R10, PENDING_AT + 12, R8);
    a.rsh_imm(R7, 32);
    a.store32(R10, PENDING_AT + 16, R7);
    a.store32_imm(R10, PENDING_AT + 20, 0);
    a.call(HELPER_KTIME_GET_BOOT_NS);
    a.store64(R10, PENDING_AT, R0);
    a.load_map(R1, &maps.pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.mov(R3, R10);
    a.add_imm(R3, i32::from(PENDING_AT));
    a.mov_imm(R4, 0);
    a.call(HELPER_MAP_UPDATE);
    a.bind(switch_in);
    switch_in_part(&mut a, maps, fields.next_pid, filter);
    a.finish()
}

/// The second half of [`switch_program`]: the thread switched in ends its sleep, which is
/// recorded if it was long enough; returns 1 (r6 holds the context).
fn switch_in_part(a: &mut Asm, maps: &Maps, next_pid: i16, filter: KernelFilter) {
    let (out, forget, emit, reserved) = (a.label(), a.label(), a.label(), a.label());
    a.load32(R1, R6, next_pid);
    a.store32(R10, -4, R1);
    a.load_map(R1, &maps.pending);
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
    a.mov_imm64(R3, filter.min_ns);
    a.jge(R2, R3, emit);
    a.load32(R1, R8, 12);
    a.and_imm(R1, 2);
    a.jeq_imm(R1, 0, forget);
    a.mov_imm64(R3, filter.disk_sleep_min_ns);
    a.jge(R2, R3, emit);
    a.ja(forget);

    a.bind(emit);
    a.load_map(R1, &maps.ring);
    a.mov_imm(R2, RECORD_SIZE as i32);
    a.mov_imm(R3, 0);
    a.call(HELPER_RINGBUF_RESERVE);
    a.jne_imm(R0, 0, reserved);
    a.count(&maps.counters, LOST_RING_FULL, -16);
    a.ja(forget);
    a.bind(reserved);
    a.mov(R7, R0);
    a.load32(R1, R10, -4);
    a.store32(R7, 0, R1);
    a.load32(R1, R8, 16);
    a.store32(R7, 4, R1);
    a.load64(R1, R8, 0);
    a.store64(R7, 8, R1);
    a.store64(R7, 16, R9);
    a.load32(R1, R8, 8);
    a.store32(R7, 24, R1);
    a.load32(R1, R8, 12);
    a.store32(R7, 28, R1);
    a.mov(R1, R7);
    a.mov_imm(R2, BPF_RB_NO_WAKEUP);
    a.call(HELPER_RINGBUF_SUBMIT);

    a.bind(forget);
    a.load_map(R1, &maps.pending);
    a.mov(R2, R10);
    a.add_imm(R2, -4);
    a.call(HELPER_MAP_DELETE);
    a.bind(out);
    a.ret1();
}

struct Maps {
    stacks: OwnedFd,
    pending: OwnedFd,
    ring: OwnedFd,
    counters: OwnedFd,
}

/// The loaded and attached program, its maps and the ring buffer.
pub struct OffCpuProbe {
    maps: Maps,
    ring: RingBuffer,
    /// The program's attachment (and those of the scope map's keepers, when the probe
    /// made its own map); dropped at the end, before the sleeps under way are read.
    attached: Vec<OwnedFd>,
    filter: KernelFilter,
    out: Option<(File, PathBuf)>,
    stack_ids: BTreeSet<u32>,
    records: u64,
}

/// What the off-CPU probe kept and lost.
#[derive(Clone, Copy, Debug, Default)]
pub struct OffCpuCounts {
    pub records: u64,
    pub stacks: usize,
    pub ring_full: u64,
    pub scope_full: u64,
}

impl OffCpuProbe {
    /// Loads and attaches the program for the threads of `scope`, or, without one, of a
    /// scope map of its own that starts with `root` (the paused command) and follows its
    /// children.
    pub fn start(
        tracefs: &Path,
        scope: Option<&ScopeMap>,
        root: i32,
        filter: KernelFilter,
    ) -> Result<OffCpuProbe> {
        const ARRAY: u32 = 2;
        const HASH: u32 = 1;
        const STACK_TRACE: u32 = 7;
        const RINGBUF: u32 = 27;
        let counters = create_map(ARRAY, 4, 8, 2, "cs_offcpu_lost")?;
        let mut attached = Vec::new();
        let scope = match scope {
            Some(map) => map.fd().try_clone().map_err(|e| RecordError::Bpf(format!("the scope map: {e}")))?,
            None => {
                let (map, followers) = follow_scope(tracefs, &counters)?;
                map_update(&map, &root.to_le_bytes(), &1u32.to_le_bytes())
                    .map_err(|e| RecordError::Bpf(format!("adding thread {root} to the scope map: {e}")))?;
                attached.extend(followers);
                map
            }
        };
        let maps = Maps {
            stacks: create_map(STACK_TRACE, 4, STACK_DEPTH * 8, STACK_ENTRIES, "cs_offcpu_stk")?,
            pending: create_map(HASH, 4, PENDING_SIZE, PENDING_ENTRIES, "cs_offcpu_pend")?,
            ring: create_map(RINGBUF, 0, 0, RING_BYTES as u32, "cs_offcpu")?,
            counters,
        };
        let fields = SwitchFields {
            prev_state: field_at(tracefs, "sched", "sched_switch", "prev_state")?,
            next_pid: field_offset(tracefs, "sched", "sched_switch", "next_pid")?,
        };
        let program = switch_program(&scope, &maps, &fields, filter)?;
        attached.push(attach_program(tracefs, program, "cs_offcpu", "sched", "sched_switch")?);
        let ring = RingBuffer::map(&maps.ring, RING_BYTES)
            .map_err(|e| RecordError::Bpf(format!("mapping the off-CPU ring buffer: {e}")))?;
        Ok(OffCpuProbe { maps, ring, attached, filter, out: None, stack_ids: BTreeSet::new(), records: 0 })
    }

    /// How the program filters the sleeps.
    pub fn filter(&self) -> KernelFilter {
        self.filter
    }

    /// Sends the records to `out` (the spool file at `path`) from now on.
    pub fn write_to(&mut self, out: File, path: PathBuf) {
        self.out = Some((out, path));
    }

    /// Copies the records the ring buffer holds to the spool file.
    pub fn drain(&mut self) -> Result<()> {
        let mut buf = Vec::new();
        let stack_ids = &mut self.stack_ids;
        self.records += self.ring.drain(|record| {
            let mut r = [0u8; RECORD_SIZE];
            let n = record.len().min(RECORD_SIZE);
            r[..n].copy_from_slice(&record[..n]);
            if let Some(id) = OffCpuRecord::decode(&r).and_then(|r| r.stack_id) {
                stack_ids.insert(id);
            }
            buf.extend_from_slice(&r);
        }) as u64;
        self.write(&buf)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        match &mut self.out {
            Some((out, path)) if !bytes.is_empty() => {
                out.write_all(bytes).map_err(|e| RecordError::Spool(format!("{}: {e}", path.display())))
            }
            _ => Ok(()),
        }
    }

    /// Detaches the program, copies the last records, adds the sleeps still under way at
    /// `end_ns` that passed the threshold by then, and writes the kept stacks to `stacks_out`.
    pub fn finish(mut self, end_ns: u64, mut stacks_out: File) -> Result<OffCpuCounts> {
        self.attached.clear();
        self.drain()?;
        let mut buf = Vec::new();
        for (tid, value) in map_entries(&self.maps.pending, PENDING_SIZE as usize) {
            let Some(record) = OffCpuRecord::from_pending(tid, &value) else { continue };
            let long = end_ns.saturating_sub(record.off_ns);
            let disk = record.state & 2 != 0;
            if long >= self.filter.min_ns || (disk && long >= self.filter.disk_sleep_min_ns) {
                if let Some(id) = record.stack_id {
                    self.stack_ids.insert(id);
                }
                buf.extend_from_slice(&record.encode());
                self.records += 1;
            }
        }
        self.write(&buf)?;
        let mut stacks = Vec::new();
        for &id in &self.stack_ids {
            let Some(frames) = map_lookup(&self.maps.stacks, id, (STACK_DEPTH * 8) as usize) else {
                continue;
            };
            let addresses: Vec<u64> = frames
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8])))
                .take_while(|&a| a != 0)
                .collect();
            stacks.extend_from_slice(&id.to_le_bytes());
            stacks.extend_from_slice(&(addresses.len() as u32).to_le_bytes());
            for a in addresses {
                stacks.extend_from_slice(&a.to_le_bytes());
            }
        }
        stacks_out.write_all(&stacks).map_err(|e| RecordError::Spool(format!("{STACKS_FILE}: {e}")))?;
        Ok(OffCpuCounts {
            records: self.records,
            stacks: self.stack_ids.len(),
            ring_full: map_lookup_u64(&self.maps.counters, LOST_RING_FULL).unwrap_or(0),
            scope_full: map_lookup_u64(&self.maps.counters, LOST_SCOPE_FULL).unwrap_or(0),
        })
    }
}

/// The value of `key` in a map of `value_size`-byte values.
fn map_lookup(map: &OwnedFd, key: u32, value_size: usize) -> Option<Vec<u8>> {
    let key = key.to_le_bytes();
    let mut value = vec![0u8; value_size];
    let mut attr = [0u64; 16];
    attr[0] = map.as_raw_fd() as u64;
    attr[1] = key.as_ptr() as u64;
    attr[2] = value.as_mut_ptr() as u64;
    bpf(BpfCmd::MapLookupElem, &mut attr).ok()?;
    Some(value)
}

/// Every entry of a hash map with 4-byte keys.
fn map_entries(map: &OwnedFd, value_size: usize) -> Vec<(u32, Vec<u8>)> {
    let mut entries = Vec::new();
    let mut key: Option<[u8; 4]> = None;
    loop {
        let mut next = [0u8; 4];
        let mut attr = [0u64; 16];
        attr[0] = map.as_raw_fd() as u64;
        attr[1] = key.as_ref().map_or(0, |k| k.as_ptr() as u64);
        attr[2] = next.as_mut_ptr() as u64;
        if bpf(BpfCmd::MapGetNextKey, &mut attr).is_err() {
            break;
        }
        let tid = u32::from_le_bytes(next);
        if let Some(value) = map_lookup(map, tid, value_size) {
            entries.push((tid, value));
        }
        key = Some(next);
        if entries.len() > PENDING_ENTRIES as usize {
            break;
        }
    }
    entries
}

/// One kept sleep.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffCpuRecord {
    pub tid: i32,
    pub pid: i32,
    /// CLOCK_BOOTTIME, the clock of `trace_clock=boot`.
    pub off_ns: u64,
    /// `None`: still asleep when the recording ended.
    pub on_ns: Option<u64>,
    pub stack_id: Option<u32>,
    /// `prev_state`'s low byte: 1 S, 2 D.
    pub state: u32,
}

impl OffCpuRecord {
    /// Decodes one spooled record; `None` if it is short.
    pub fn decode(b: &[u8]) -> Option<OffCpuRecord> {
        let u32_at = |o: usize| b.get(o..o + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        let u64_at = |o: usize| b.get(o..o + 8).and_then(|s| s.try_into().ok()).map(u64::from_le_bytes);
        let stack = u32_at(24)? as i32;
        Some(OffCpuRecord {
            tid: u32_at(0)? as i32,
            pid: u32_at(4)? as i32,
            off_ns: u64_at(8)?,
            on_ns: Some(u64_at(16)?).filter(|&t| t != 0),
            stack_id: u32::try_from(stack).ok(),
            state: u32_at(28)?,
        })
    }

    /// The record of a sleep still under way, from its per-thread map entry.
    fn from_pending(tid: u32, value: &[u8]) -> Option<OffCpuRecord> {
        let u32_at = |o: usize| value.get(o..o + 4).and_then(|s| s.try_into().ok()).map(u32::from_le_bytes);
        Some(OffCpuRecord {
            tid: tid as i32,
            pid: u32_at(16)? as i32,
            off_ns: u64::from_le_bytes(value.get(0..8)?.try_into().ok()?),
            on_ns: None,
            stack_id: u32::try_from(u32_at(8)? as i32).ok(),
            state: u32_at(12)?,
        })
    }

    fn encode(&self) -> [u8; RECORD_SIZE] {
        let mut r = [0u8; RECORD_SIZE];
        r[0..4].copy_from_slice(&(self.tid as u32).to_le_bytes());
        r[4..8].copy_from_slice(&(self.pid as u32).to_le_bytes());
        r[8..16].copy_from_slice(&self.off_ns.to_le_bytes());
        r[16..24].copy_from_slice(&self.on_ns.unwrap_or(0).to_le_bytes());
        r[24..28].copy_from_slice(&self.stack_id.map_or(-1, |id| id as i32).to_le_bytes());
        r[28..32].copy_from_slice(&self.state.to_le_bytes());
        r
    }
}

/// Every record of a spooled `offcpu.raw` (a torn last record is left out).
pub fn decode_all(bytes: &[u8]) -> Vec<OffCpuRecord> {
    bytes.chunks_exact(RECORD_SIZE).filter_map(OffCpuRecord::decode).collect()
}

/// The stacks of a spooled `offcpu-stacks.raw`: id, then its kernel frames, innermost
/// first (a torn last stack is left out).
pub fn decode_stacks(mut bytes: &[u8]) -> Vec<(u32, Vec<u64>)> {
    let mut stacks = Vec::new();
    while bytes.len() >= 8 {
        let id = u32::from_le_bytes(bytes[0..4].try_into().unwrap_or([0; 4]));
        let n = u32::from_le_bytes(bytes[4..8].try_into().unwrap_or([0; 4])) as usize;
        let Some(frames) = bytes.get(8..8 + 8 * n) else { break };
        stacks.push((
            id,
            frames.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap_or([0; 8]))).collect(),
        ));
        bytes = &bytes[8 + 8 * n..];
    }
    stacks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_a_missing_stack_or_wake_is_none() {
        let r = OffCpuRecord { tid: 7, pid: 5, off_ns: 100, on_ns: Some(250), stack_id: Some(3), state: 2 };
        let gone = OffCpuRecord { on_ns: None, stack_id: None, ..r.clone() };
        let mut bytes = r.encode().to_vec();
        bytes.extend(gone.encode());
        bytes.extend(&r.encode()[..10]);
        assert_eq!(decode_all(&bytes), vec![r, gone]);
    }

    #[test]
    fn stacks_decode_in_order_and_a_torn_one_is_left_out() {
        let mut bytes = Vec::new();
        for (id, frames) in [(4u32, vec![0xffff_1000u64, 0xffff_2000]), (9, vec![0xffff_3000])] {
            bytes.extend(id.to_le_bytes());
            bytes.extend((frames.len() as u32).to_le_bytes());
            frames.iter().for_each(|f| bytes.extend(f.to_le_bytes()));
        }
        bytes.extend(5u32.to_le_bytes());
        bytes.extend(3u32.to_le_bytes());
        let stacks = decode_stacks(&bytes);
        assert_eq!(stacks, vec![(4, vec![0xffff_1000, 0xffff_2000]), (9, vec![0xffff_3000])]);
    }

    #[test]
    fn a_disk_sleep_keeps_the_lower_bar() {
        assert_eq!(KernelFilter::new(0), KernelFilter { min_ns: 0, disk_sleep_min_ns: 0 });
        assert_eq!(KernelFilter::new(5_000_000).disk_sleep_min_ns, DISK_SLEEP_MIN_NS);
    }

    #[test]
    fn the_program_assembles_with_its_jumps_bound() {
        let fd = || -> OwnedFd { File::open("/dev/null").unwrap().into() };
        let maps = Maps { stacks: fd(), pending: fd(), ring: fd(), counters: fd() };
        let fields = SwitchFields { prev_state: (32, 8), next_pid: 56 };
        let insns = switch_program(&fd(), &maps, &fields, KernelFilter::new(DEFAULT_MIN_NS)).unwrap();
        assert_eq!(insns.last().map(|i| i & 0xff), Some(0x95), "ends with exit");
    }
}
