//! Decodes the byte streams the perf capture copied (`perf-cpuN.raw`): samples with
//! their callchains, user registers and stack copies, the mmap, comm, fork and exit
//! records, and the kernel's counts of lost records. Nothing here trusts the bytes: a
//! record that does not fit ends its stream.

use crate::capture::perf::{
    PerfSetup, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IP, SAMPLE_REGS_USER, SAMPLE_STACK_USER, SAMPLE_TID,
    SAMPLE_TIME,
};

const RECORD_MMAP: u32 = 1;
const RECORD_LOST: u32 = 2;
const RECORD_COMM: u32 = 3;
const RECORD_FORK: u32 = 7;
const RECORD_SAMPLE: u32 = 9;
const RECORD_MMAP2: u32 = 10;
const RECORD_LOST_SAMPLES: u32 = 13;

const MISC_COMM_EXEC: u16 = 1 << 13;
const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// Callchain entries at or above this are context markers, not addresses.
const CONTEXT_MAX: u64 = (-4095i64) as u64;
const CONTEXT_KERNEL: u64 = (-128i64) as u64;
const CONTEXT_USER: u64 = (-512i64) as u64;

/// One sample; its stack copy is `stack` bytes of stream `stream`.
#[derive(Clone, Debug, Default)]
pub struct RawSample {
    pub time: u64,
    pub pid: i32,
    pub tid: i32,
    pub cpu: u32,
    pub ip: u64,
    /// Kernel frames, innermost first.
    pub kernel: Vec<u64>,
    /// User frames the kernel found by following frame pointers, innermost first.
    pub user: Vec<u64>,
    /// User registers in the order of the mask's bits (x86-64: BP, SP, IP); empty when the
    /// sample interrupted a kernel thread.
    pub regs: Vec<u64>,
    pub stream: usize,
    pub stack: std::ops::Range<usize>,
    /// Taken by an event that copies no user stack: its user frames are the chain's.
    pub without_copy: bool,
}

/// A file (or anonymous region) mapped executable into a process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawMmap {
    pub time: u64,
    pub pid: i32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub path: String,
    pub build_id: Option<Vec<u8>>,
}

/// A change of address space: an exec (new image) or a fork (copy of the parent's).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpaceEvent {
    Exec { time: u64, pid: i32 },
    Fork { time: u64, pid: i32, parent: i32 },
}

#[derive(Debug, Default)]
pub struct PerfData {
    pub samples: Vec<RawSample>,
    pub mmaps: Vec<RawMmap>,
    pub spaces: Vec<SpaceEvent>,
    /// Records the kernel dropped because a ring was full (`PERF_RECORD_LOST`).
    pub lost_records: u64,
    /// Samples the kernel could not write (`PERF_RECORD_LOST_SAMPLES`).
    pub lost_samples: u64,
    /// Streams that ended in a record that did not fit.
    pub torn_streams: usize,
}

struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn u64(&mut self) -> Option<u64> {
        let b = self.bytes.get(self.at..self.at + 8)?;
        self.at += 8;
        Some(u64::from_ne_bytes(b.try_into().ok()?))
    }

    fn u32(&mut self) -> Option<u32> {
        let b = self.bytes.get(self.at..self.at + 4)?;
        self.at += 4;
        Some(u32::from_ne_bytes(b.try_into().ok()?))
    }

    fn skip(&mut self, n: usize) -> Option<()> {
        let end = self.at.checked_add(n)?;
        (end <= self.bytes.len()).then(|| self.at = end)
    }
}

/// The `sample_id_all` trailer of non-sample records: pid, tid, time, cpu.
fn trailer_time(body: &[u8], setup: &PerfSetup) -> Option<u64> {
    let mut trailer_len = 0;
    if setup.sample_type & SAMPLE_TID != 0 {
        trailer_len += 8;
    }
    if setup.sample_type & SAMPLE_TIME != 0 {
        trailer_len += 8;
    }
    if setup.sample_type & SAMPLE_CPU != 0 {
        trailer_len += 8;
    }
    let start = body.len().checked_sub(trailer_len)?;
    let mut c = Cursor { bytes: &body[start..], at: 0 };
    if setup.sample_type & SAMPLE_TID != 0 {
        c.u64()?;
    }
    c.u64()
}

/// A NUL-terminated string from `bytes`, which the trailer follows.
fn c_string(bytes: &[u8]) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end]).into_owned()
}

impl PerfData {
    /// Decodes one stream (one CPU's bytes) into `self`.
    pub fn decode(&mut self, stream: usize, bytes: &[u8], setup: &PerfSetup) {
        let mut at = 0;
        while at < bytes.len() {
            let Some(header) = bytes.get(at..at + 8) else {
                self.torn_streams += 1;
                return;
            };
            let kind = u32::from_ne_bytes([header[0], header[1], header[2], header[3]]);
            let misc = u16::from_ne_bytes([header[4], header[5]]);
            let size = usize::from(u16::from_ne_bytes([header[6], header[7]]));
            if size < 8 || at + size > bytes.len() {
                self.torn_streams += 1;
                return;
            }
            let body = &bytes[at + 8..at + size];
            let decoded = match kind {
                RECORD_SAMPLE => self.sample(stream, at + 8, body, setup),
                RECORD_MMAP | RECORD_MMAP2 => self.mmap(kind, misc, body, setup),
                RECORD_COMM if misc & MISC_COMM_EXEC != 0 => self.exec(body, setup),
                RECORD_FORK => {
                    let mut c = Cursor { bytes: body, at: 0 };
                    let (pid, ppid) = (c.u32(), c.u32());
                    let time = c.skip(8).and_then(|()| c.u64());
                    if let (Some(pid), Some(ppid), Some(time)) = (pid, ppid, time)
                        && pid != ppid
                    {
                        self.spaces.push(SpaceEvent::Fork { time, pid: pid as i32, parent: ppid as i32 });
                    }
                    Some(())
                }
                RECORD_LOST => {
                    let mut c = Cursor { bytes: body, at: 8 };
                    self.lost_records += c.u64().unwrap_or(0);
                    Some(())
                }
                RECORD_LOST_SAMPLES => {
                    let mut c = Cursor { bytes: body, at: 0 };
                    self.lost_samples += c.u64().unwrap_or(0);
                    Some(())
                }
                _ => Some(()),
            };
            if decoded.is_none() {
                self.torn_streams += 1;
                return;
            }
            at += size;
        }
    }

    fn exec(&mut self, body: &[u8], setup: &PerfSetup) -> Option<()> {
        let pid = Cursor { bytes: body, at: 0 }.u32()? as i32;
        let time = trailer_time(body, setup)?;
        self.spaces.push(SpaceEvent::Exec { time, pid });
        Some(())
    }

    fn sample(&mut self, stream: usize, offset: usize, body: &[u8], setup: &PerfSetup) -> Option<()> {
        let t = setup.sample_type;
        let mut c = Cursor { bytes: body, at: 0 };
        let mut s = RawSample { stream, without_copy: t & SAMPLE_STACK_USER == 0, ..RawSample::default() };
        if t & SAMPLE_IP != 0 {
            s.ip = c.u64()?;
        }
        if t & SAMPLE_TID != 0 {
            s.pid = c.u32()? as i32;
            s.tid = c.u32()? as i32;
        }
        if t & SAMPLE_TIME != 0 {
            s.time = c.u64()?;
        }
        if t & SAMPLE_CPU != 0 {
            s.cpu = c.u32()?;
            c.u32()?;
        }
        if t & SAMPLE_CALLCHAIN != 0 {
            let n = usize::try_from(c.u64()?).ok()?;
            let mut context = CONTEXT_KERNEL;
            for _ in 0..n {
                let ip = c.u64()?;
                if ip >= CONTEXT_MAX {
                    context = ip;
                } else if context == CONTEXT_KERNEL {
                    s.kernel.push(ip);
                } else if context == CONTEXT_USER {
                    s.user.push(ip);
                }
            }
        }
        if t & SAMPLE_REGS_USER != 0 {
            let abi = c.u64()?;
            if abi != 0 {
                for _ in 0..setup.regs_user_mask.count_ones() {
                    s.regs.push(c.u64()?);
                }
            }
        }
        if t & SAMPLE_STACK_USER != 0 {
            let size = usize::try_from(c.u64()?).ok()?;
            if size > 0 {
                let data_at = c.at;
                c.skip(size)?;
                let dyn_size = usize::try_from(c.u64()?).ok()?.min(size);
                s.stack = offset + data_at..offset + data_at + dyn_size;
            }
        }
        self.samples.push(s);
        Some(())
    }

    fn mmap(&mut self, kind: u32, misc: u16, body: &[u8], setup: &PerfSetup) -> Option<()> {
        let mut c = Cursor { bytes: body, at: 0 };
        let pid = c.u32()? as i32;
        c.u32()?;
        let (start, len, pgoff) = (c.u64()?, c.u64()?, c.u64()?);
        let mut build_id = None;
        let mut executable = true;
        if kind == RECORD_MMAP2 {
            if misc & MISC_MMAP_BUILD_ID != 0 {
                let id = body.get(c.at..c.at + 24)?;
                let n = usize::from(id[0]).min(20);
                build_id = Some(id[4..4 + n].to_vec());
            }
            c.skip(24)?;
            let prot = c.u32()?;
            c.u32()?;
            executable = prot & 4 != 0;
        }
        let time = trailer_time(body, setup)?;
        let path = c_string(body.get(c.at..)?);
        if executable {
            self.mmaps.push(RawMmap { time, pid, start, len, pgoff, path, build_id });
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> PerfSetup {
        PerfSetup {
            sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN,
            regs_user_mask: 0,
            stack_bytes: 0,
            hz: 1000,
            per_task: true,
            cpus: vec![0],
            off_cpu: None,
            frame_pointer_sample_type: None,
        }
    }

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(&misc.to_ne_bytes());
        out.extend_from_slice(&((body.len() + 8) as u16).to_ne_bytes());
        out.extend_from_slice(body);
        out
    }

    fn words(values: &[u64]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn samples_losses_and_a_torn_end() {
        let pid_tid = 7u64 | (8u64 << 32);
        let sample =
            words(&[0x1000, pid_tid, 5_000, 1, 4, CONTEXT_KERNEL, 0xffff_0001, CONTEXT_USER, 0x1000]);
        let mut stream = record(RECORD_SAMPLE, 2, &sample);
        stream.extend(record(RECORD_LOST, 0, &words(&[1, 17, pid_tid, 6_000, 1])));
        stream.extend(record(RECORD_LOST_SAMPLES, 0, &words(&[3, pid_tid, 6_000, 1])));
        stream.extend(&record(RECORD_SAMPLE, 2, &sample)[..20]);
        let mut data = PerfData::default();
        data.decode(0, &stream, &setup());
        assert_eq!(data.samples.len(), 1);
        let s = &data.samples[0];
        assert_eq!((s.pid, s.tid, s.time, s.cpu), (7, 8, 5_000, 1));
        assert_eq!((s.kernel.clone(), s.user.clone()), (vec![0xffff_0001], vec![0x1000]));
        assert_eq!((data.lost_records, data.lost_samples, data.torn_streams), (17, 3, 1));
    }
}
