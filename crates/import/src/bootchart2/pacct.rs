//! `kernel_pacct`: BSD process accounting, one record per process exit, written by
//! the kernel in exit order. Only version 3 records (`struct acct_v3` of the
//! kernel's include/uapi/linux/acct.h, 64 bytes, the only format Linux has
//! written since 2.6.8 on most architectures) are understood:
//!
//! ```text
//!  0 ac_flag u8      1 ac_version u8 (0x80 = big-endian)   2 ac_tty u16
//!  4 ac_exitcode u32 8 ac_uid u32    12 ac_gid u32         16 ac_pid u32
//! 20 ac_ppid u32    24 ac_btime u32 (wall clock, s)        28 ac_etime f32 (AHZ ticks)
//! 32 ac_utime, ac_stime, ac_mem, ac_io, ac_rw, ac_minflt, ac_majflt, ac_swaps: comp_t u16
//! 48 ac_comm [u8; 16]
//! ```

use super::problems::Problems;
use crate::error::{ImportError, Result};

const RECORD: usize = 64;
const VERSION_MASK: u8 = 0x0f;
const BIG_ENDIAN: u8 = 0x80;

/// One process exit.
#[derive(Clone, Debug, PartialEq)]
pub struct AcctRecord {
    /// Position in the file (0-based): the exit order.
    pub index: usize,
    pub flags: u8,
    pub pid: i32,
    pub ppid: i32,
    /// As `wait()` reports it: exit status << 8, or the signal number.
    pub raw_exit: u32,
    /// Process creation, seconds since the Unix epoch (by the wall clock, which boot scripts often step).
    pub btime: u32,
    /// Elapsed time from fork to exit, in centiseconds (AHZ = 100 ticks per second).
    pub elapsed_cs: f64,
    pub comm: String,
}

impl AcctRecord {
    /// The exit code as a shell shows it: the status, or 128 + signal.
    pub fn exit_code(&self) -> i32 {
        let signal = self.raw_exit & 0x7f;
        if signal == 0 { ((self.raw_exit >> 8) & 0xff) as i32 } else { 128 + signal as i32 }
    }
}

pub fn parse(file: &str, bytes: &[u8], problems: &mut Problems) -> Result<Vec<AcctRecord>> {
    let mut records = Vec::with_capacity(bytes.len() / RECORD);
    let chunks = bytes.chunks_exact(RECORD);
    if !chunks.remainder().is_empty() {
        let len = chunks.remainder().len();
        problems.skip(
            "truncated kernel_pacct records",
            || format!("{file}: byte {}", bytes.len() - len),
            || format!("{len} bytes left over, a record is {RECORD}"),
        );
    }
    for (index, record) in chunks.enumerate() {
        let version = record[1];
        if version & VERSION_MASK != 3 {
            return Err(ImportError::Parse {
                location: format!("{file}: record {} (byte {})", index + 1, index * RECORD),
                message: format!(
                    "process accounting version {} is not supported (only BSD acct v3 records are)",
                    version & VERSION_MASK
                ),
            });
        }
        let big = version & BIG_ENDIAN != 0;
        let u32_at = |at: usize| {
            let b = [record[at], record[at + 1], record[at + 2], record[at + 3]];
            if big { u32::from_be_bytes(b) } else { u32::from_le_bytes(b) }
        };
        let elapsed = f32::from_bits(u32_at(28));
        let elapsed_cs = if elapsed.is_finite() && elapsed >= 0.0 {
            f64::from(elapsed)
        } else {
            problems.skip(
                "kernel_pacct records with an impossible elapsed time (taken as 0)",
                || format!("{file}: record {}", index + 1),
                || format!("ac_etime = {elapsed}"),
            );
            0.0
        };
        let comm = &record[48..64];
        let comm_len = comm.iter().position(|&b| b == 0).unwrap_or(comm.len());
        records.push(AcctRecord {
            index,
            flags: record[0],
            pid: u32_at(16) as i32,
            ppid: u32_at(20) as i32,
            raw_exit: u32_at(4),
            btime: u32_at(24),
            elapsed_cs,
            comm: String::from_utf8_lossy(&comm[..comm_len]).into_owned(),
        });
    }
    Ok(records)
}

#[cfg(test)]
pub(crate) fn encode(r: &AcctRecord, big: bool) -> [u8; RECORD] {
    let mut out = [0u8; RECORD];
    out[0] = r.flags;
    out[1] = 3 | if big { BIG_ENDIAN } else { 0 };
    let mut put = |at: usize, v: u32| {
        let b = if big { v.to_be_bytes() } else { v.to_le_bytes() };
        out[at..at + 4].copy_from_slice(&b);
    };
    put(4, r.raw_exit);
    put(16, r.pid as u32);
    put(20, r.ppid as u32);
    put(24, r.btime);
    put(28, (r.elapsed_cs as f32).to_bits());
    let comm = r.comm.as_bytes();
    let n = comm.len().min(16);
    out[48..48 + n].copy_from_slice(&comm[..n]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(index: usize, pid: i32, raw_exit: u32) -> AcctRecord {
        AcctRecord {
            index,
            flags: 0x01, // AFORK: forked, never exec'd
            pid,
            ppid: 1,
            raw_exit,
            btime: 1_107_044_832,
            elapsed_cs: 12.0,
            comm: "uname".into(),
        }
    }

    #[test]
    fn both_byte_orders_round_trip() {
        for big in [false, true] {
            let records = [record(0, 521, 0), record(1, 523, 256)];
            let bytes: Vec<u8> = records.iter().flat_map(|r| encode(r, big)).collect();
            let mut problems = Problems::default();
            assert_eq!(parse("p", &bytes, &mut problems).unwrap(), records);
        }
    }

    #[test]
    fn exit_codes() {
        assert_eq!(record(0, 1, 0).exit_code(), 0);
        assert_eq!(record(0, 1, 256).exit_code(), 1);
        assert_eq!(record(0, 1, 0xff00).exit_code(), 255);
        assert_eq!(record(0, 1, 9).exit_code(), 137);
        assert_eq!(record(0, 1, 15 | 0x80).exit_code(), 143);
    }

    #[test]
    fn other_versions_and_short_tails() {
        let mut bytes = encode(&record(0, 5, 0), false).to_vec();
        bytes.extend_from_slice(&[0u8; 10]);
        let mut problems = Problems::default();
        assert_eq!(parse("p", &bytes, &mut problems).unwrap().len(), 1);
        assert_eq!(problems.count("truncated kernel_pacct records"), 1);
        bytes[1] = 2;
        let err = parse("x/kernel_pacct", &bytes, &mut problems).unwrap_err();
        assert_eq!(
            err.to_string(),
            "x/kernel_pacct: record 1 (byte 0): process accounting version 2 is not supported (only BSD acct v3 records are)"
        );
    }
}
