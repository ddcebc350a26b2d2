//! Decoding ring-buffer pages as `per_cpu/cpuN/trace_pipe_raw` hands them out.
//!
//! A page is a header (absolute timestamp, commit = bytes of data plus flags) and a
//! sequence of events, each with a 32-bit header: `type_len` (5 bits) and
//! `time_delta` (27 bits). `type_len` 1..=28 is a data event of `type_len * 4` bytes;
//! 0 is a data event whose length is in the next word; 29 is padding, 30 extends the
//! time delta, 31 sets an absolute timestamp. No crate parses these pages well, so
//! this is written by hand against the kernel's `ring_buffer.c`.

use crate::ftrace::format::PageHeader;

const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
const TS_SHIFT: u32 = 27;
const TS_MSB: u64 = 0xf << 59;
/// Set in `commit` when events were lost before this page.
const MISSED_EVENTS: u64 = 1 << 31;
/// Set with [`MISSED_EVENTS`] when the count of lost events follows the data.
const MISSED_STORED: u64 = 1 << 30;
const COMMIT_FLAGS: u64 = MISSED_EVENTS | MISSED_STORED;

/// One event of a page: its absolute timestamp (the trace clock) and its record bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawEvent<'a> {
    pub ts: u64,
    pub data: &'a [u8],
}

/// Lost events a page reports before its first event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missed {
    None,
    /// Events were lost, the kernel did not say how many.
    Unknown,
    Count(u64),
}

/// The events of one page, in order.
pub struct PageEvents<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    pub missed: Missed,
    /// True when the page ended in a way that does not parse (the rest is skipped).
    pub corrupt: bool,
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at.checked_add(8)?)?.try_into().ok()?))
}

/// Splits a page into its events. A page too short for its header yields nothing.
pub fn page_events<'a>(page: &'a [u8], header: &PageHeader) -> PageEvents<'a> {
    let empty = PageEvents { data: &[], pos: 0, ts: 0, missed: Missed::None, corrupt: false };
    let Some(ts) = u64_at(page, header.timestamp_offset) else { return empty };
    let commit = match header.commit_size {
        4 => u32_at(page, header.commit_offset).map(u64::from),
        _ => u64_at(page, header.commit_offset),
    };
    let Some(commit) = commit else { return empty };
    let len = (commit & !COMMIT_FLAGS & 0xffff_ffff) as usize;
    let end = header.data_offset.saturating_add(len).min(page.len());
    let data = page.get(header.data_offset..end).unwrap_or(&[]);
    let missed = if commit & MISSED_EVENTS == 0 {
        Missed::None
    } else if commit & MISSED_STORED != 0 {
        u64_at(page, end).map_or(Missed::Unknown, Missed::Count)
    } else {
        Missed::Unknown
    };
    PageEvents { data, pos: 0, ts, missed, corrupt: false }
}

impl<'a> Iterator for PageEvents<'a> {
    type Item = RawEvent<'a>;

    fn next(&mut self) -> Option<RawEvent<'a>> {
        loop {
            let word = u32_at(self.data, self.pos)?;
            let type_len = word & 0x1f;
            let delta = u64::from(word >> 5);
            let at = self.pos;
            match type_len {
                TYPE_PADDING => {
                    if delta == 0 {
                        self.pos = self.data.len();
                        return None;
                    }
                    // Padding (a discarded event) does not move the clock, as in the
                    // kernel's own reader (rb_update_read_stamp).
                    let Some(len) = u32_at(self.data, at + 4) else { return self.fail() };
                    self.pos = at + 4 + len as usize;
                }
                TYPE_TIME_EXTEND => {
                    let Some(high) = u32_at(self.data, at + 4) else { return self.fail() };
                    self.ts = self.ts.wrapping_add((u64::from(high) << TS_SHIFT) | delta);
                    self.pos = at + 8;
                }
                TYPE_TIME_STAMP => {
                    let Some(high) = u32_at(self.data, at + 4) else { return self.fail() };
                    let mut abs = (u64::from(high) << TS_SHIFT) | delta;
                    if self.ts & TS_MSB != 0 {
                        abs |= self.ts & TS_MSB;
                        if abs < self.ts {
                            abs = abs.wrapping_add(1 << 59);
                        }
                    }
                    self.ts = abs;
                    self.pos = at + 8;
                }
                0 => {
                    let Some(len) = u32_at(self.data, at + 4) else { return self.fail() };
                    let start = at + 8;
                    let Some(end) = (start + len as usize).checked_sub(4) else { return self.fail() };
                    let Some(data) = self.data.get(start..end) else { return self.fail() };
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = end;
                    return Some(RawEvent { ts: self.ts, data });
                }
                n => {
                    let start = at + 4;
                    let end = start + n as usize * 4;
                    let Some(data) = self.data.get(start..end) else { return self.fail() };
                    self.ts = self.ts.wrapping_add(delta);
                    self.pos = end;
                    return Some(RawEvent { ts: self.ts, data });
                }
            }
        }
    }
}

impl PageEvents<'_> {
    fn fail<T>(&mut self) -> Option<T> {
        self.corrupt = true;
        self.pos = self.data.len();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: PageHeader =
        PageHeader { timestamp_offset: 0, commit_offset: 8, commit_size: 8, data_offset: 16 };

    fn page(ts: u64, commit_flags: u64, body: &[u8]) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&ts.to_le_bytes());
        p.extend_from_slice(&(body.len() as u64 | commit_flags).to_le_bytes());
        p.extend_from_slice(body);
        p.resize(4096, 0xee);
        p
    }

    fn word(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    #[test]
    fn decodes_small_long_extended_and_absolute_events() {
        let mut body = Vec::new();
        body.extend_from_slice(&word(2, 10));
        body.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        body.extend_from_slice(&word(TYPE_TIME_EXTEND, 5));
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&word(0, 1));
        body.extend_from_slice(&(4u32 + 4).to_le_bytes());
        body.extend_from_slice(&[9, 9, 9, 9]);
        body.extend_from_slice(&word(TYPE_PADDING, 3));
        body.extend_from_slice(&8u32.to_le_bytes());
        body.extend_from_slice(&[0; 4]);
        body.extend_from_slice(&word(TYPE_TIME_STAMP, 7));
        body.extend_from_slice(&2u32.to_le_bytes());
        body.extend_from_slice(&word(1, 0));
        body.extend_from_slice(&[4, 4, 4, 4]);
        let p = page(1000, 0, &body);
        let mut events = page_events(&p, &HEADER);
        let got: Vec<_> = events.by_ref().collect();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0], RawEvent { ts: 1010, data: &[1, 2, 3, 4, 5, 6, 7, 8] });
        assert_eq!(got[1], RawEvent { ts: 1010 + (1 << 27) + 5 + 1, data: &[9, 9, 9, 9] });
        assert_eq!(got[2], RawEvent { ts: (2 << 27) | 7, data: &[4, 4, 4, 4] });
        assert_eq!(events.missed, Missed::None);
        assert!(!events.corrupt);
    }

    #[test]
    fn null_padding_ends_the_page_and_missed_counts_are_read() {
        let mut body = Vec::new();
        body.extend_from_slice(&word(1, 1));
        body.extend_from_slice(&[1, 1, 1, 1]);
        body.extend_from_slice(&word(TYPE_PADDING, 0));
        body.extend_from_slice(&word(1, 1));
        body.extend_from_slice(&[2, 2, 2, 2]);
        let mut p = page(0, MISSED_EVENTS | MISSED_STORED, &body);
        p[16 + body.len()..16 + body.len() + 8].copy_from_slice(&42u64.to_le_bytes());
        let mut events = page_events(&p, &HEADER);
        assert_eq!(events.by_ref().count(), 1);
        assert_eq!(events.missed, Missed::Count(42));
        let p = page(0, MISSED_EVENTS, &[]);
        assert_eq!(page_events(&p, &HEADER).missed, Missed::Unknown);
    }

    #[test]
    fn a_truncated_event_marks_the_page_corrupt() {
        let mut body = Vec::new();
        body.extend_from_slice(&word(0, 1));
        body.extend_from_slice(&400u32.to_le_bytes());
        let p = page(0, 0, &body);
        let mut events = page_events(&p, &HEADER);
        assert_eq!(events.next(), None);
        assert!(events.corrupt);
    }

    #[test]
    fn a_page_timestamp_near_the_top_of_u64_wraps_instead_of_panicking() {
        let mut body = Vec::new();
        body.extend_from_slice(&word(1, 9));
        body.extend_from_slice(&[1, 1, 1, 1]);
        body.extend_from_slice(&word(TYPE_TIME_EXTEND, 1));
        body.extend_from_slice(&u32::MAX.to_le_bytes());
        body.extend_from_slice(&word(1, 0));
        body.extend_from_slice(&[2, 2, 2, 2]);
        let p = page(u64::MAX - 4, 0, &body);
        let got: Vec<u64> = page_events(&p, &HEADER).map(|e| e.ts).collect();
        let extended = 4u64.wrapping_add((u64::from(u32::MAX) << TS_SHIFT) | 1);
        assert_eq!(got, [4, extended]);
    }

    #[test]
    fn a_header_page_with_offsets_past_the_end_of_memory_gives_an_empty_page() {
        let huge =
            PageHeader { timestamp_offset: usize::MAX, commit_offset: 8, commit_size: 8, data_offset: 16 };
        assert_eq!(page_events(&page(0, 0, &word(1, 1)), &huge).count(), 0);
        let huge = PageHeader {
            timestamp_offset: 0,
            commit_offset: usize::MAX - 2,
            commit_size: 4,
            data_offset: 16,
        };
        assert_eq!(page_events(&page(0, 0, &word(1, 1)), &huge).count(), 0);
        let huge =
            PageHeader { timestamp_offset: 0, commit_offset: 8, commit_size: 8, data_offset: usize::MAX };
        assert_eq!(page_events(&page(0, 0, &word(1, 1)), &huge).count(), 0);
    }
}
