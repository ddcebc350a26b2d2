//! The events the recorder enables, decoded from raw records into typed values by
//! the field offsets of their format files.

use std::collections::HashMap;

use coldstart_trace::AccessKind;

use crate::error::Result;
use crate::ftrace::format::{DynamicKind, EventFormat, Field};

/// `(system, event)` of every event the recorder enables.
pub const SCOPE_EVENTS: &[(&str, &str)] = &[
    ("filemap", "mm_filemap_add_to_page_cache"),
    ("sched", "sched_process_fork"),
    ("sched", "sched_process_exec"),
    ("sched", "sched_process_exit"),
    ("sched", "sched_switch"),
    ("sched", "sched_wakeup"),
    ("sched", "sched_wakeup_new"),
    // For the waker: a wakeup of a task on an idle CPU is queued to that CPU and traced
    // there (sched_wakeup) from the interrupt, naming no waker, while sched_waking is
    // traced in the waker's context.
    ("sched", "sched_waking"),
];
/// Page accesses and readahead decisions, recorded in the scope instance when the
/// kernel has them (the filemap access events appeared in Linux 6.11, the readahead
/// ones in 6.10); a kernel without them gives a trace without `page_access` rows.
pub const ACCESS_EVENTS: &[(&str, &str)] = &[
    ("filemap", "mm_filemap_get_pages"),
    ("filemap", "mm_filemap_fault"),
    ("filemap", "mm_filemap_map_pages"),
    ("readahead", "page_cache_sync_ra"),
    ("readahead", "page_cache_async_ra"),
    ("readahead", "page_cache_ra_unbounded"),
];
/// System calls, recorded in the scope instance with a filter on the call numbers of
/// `syscall_table::TRACED` when the kernel has them.
pub const SYSCALL_EVENTS: &[(&str, &str)] = &[("raw_syscalls", "sys_enter"), ("raw_syscalls", "sys_exit")];
/// Events of the unfiltered block instance.
pub const BLOCK_EVENTS: &[(&str, &str)] = &[("block", "block_rq_issue"), ("block", "block_rq_complete")];
/// Recorded in the block instance when the kernel has them. `block_rq_requeue`: a request
/// handed back by the driver (its queue was full) and issued again later, so that the
/// request is one row and not two issues with one completion. `block_io_start` (Linux 6.5
/// on): the request made, in the context of the task that submitted it; the issue may
/// come later from whichever task ran the queue (another reader, a kworker), so the start
/// says whose request it is.
pub const BLOCK_OPTIONAL_EVENTS: &[(&str, &str)] =
    &[("block", "block_rq_requeue"), ("block", "block_io_start")];
/// `trace_marker` writes (always recorded while tracing is on; nothing to enable).
pub const PRINT_EVENT: (&str, &str) = ("ftrace", "print");

/// `common_flags` bits of interrupt context (hardirq, softirq, NMI), from the
/// kernel's `trace_flag_type`; they have been stable since Linux 2.6.
const INTERRUPT_FLAGS: u8 = 0x08 | 0x10 | 0x40;

/// A command name as the kernel stores it (up to 16 bytes, NUL-padded).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Comm(pub [u8; 16]);

impl Comm {
    fn from_bytes(b: &[u8]) -> Comm {
        let mut c = [0u8; 16];
        let n = b.iter().position(|&x| x == 0).unwrap_or(b.len()).min(16);
        c[..n].copy_from_slice(&b[..n]);
        Comm(c)
    }

    pub fn text(&self) -> String {
        let n = self.0.iter().position(|&x| x == 0).unwrap_or(16);
        String::from_utf8_lossy(&self.0[..n]).into_owned()
    }
}

/// A block request's flag string (`rwbs`: `R`, `RA`, `WS`, `FF`, …; 8 or 10 bytes in
/// the kernel), held inline so that decoding a block event allocates nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rwbs([u8; 16]);

impl Rwbs {
    fn from_bytes(b: &[u8]) -> Rwbs {
        Rwbs(Comm::from_bytes(b).0)
    }

    /// The flags as text (empty if the kernel wrote anything but ASCII).
    pub fn as_str(&self) -> &str {
        let n = self.0.iter().position(|&x| x == 0).unwrap_or(16);
        std::str::from_utf8(&self.0[..n]).unwrap_or("")
    }
}

impl From<&str> for Rwbs {
    fn from(s: &str) -> Rwbs {
        Rwbs::from_bytes(s.as_bytes())
    }
}

/// Which readahead path the kernel took (`readahead:*` events).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadaheadKind {
    /// `page_cache_sync_ra`: a read or fault found its page missing; a read asked
    /// for `count` pages from `index` (a fault asks for the whole readahead window).
    Sync { index: u64, count: u64 },
    /// `page_cache_async_ra`: a read or fault reached a page marked for readahead.
    Async,
    /// `page_cache_ra_unbounded`: readahead of a given range, on its own an explicit
    /// prefetch (`fadvise(WILLNEED)`, `readahead(2)`), after `Sync` part of that decision.
    Unbounded,
}

/// A decoded event. `tid` is the task that was running (`common_pid`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    PageCacheAdd {
        tid: i32,
        dev: u32,
        ino: u64,
        index: u64,
        order: u8,
    },
    /// Pages `index..=last` of a file asked for (`mm_filemap_get_pages`, `_fault`, `_map_pages`).
    PageAccess {
        tid: i32,
        dev: u32,
        ino: u64,
        index: u64,
        last: u64,
        kind: AccessKind,
    },
    Readahead {
        tid: i32,
        dev: u32,
        ino: u64,
        kind: ReadaheadKind,
    },
    BlockIssue {
        tid: i32,
        dev: u32,
        sector: u64,
        bytes: u32,
        rwbs: Rwbs,
        comm: Comm,
    },
    /// A request made by the task that submitted it (`block_io_start`).
    BlockStart {
        tid: i32,
        dev: u32,
        sector: u64,
        comm: Comm,
    },
    /// The driver handed an issued request back (`block_rq_requeue`); it will be
    /// issued again and complete once.
    BlockRequeue {
        dev: u32,
        sector: u64,
    },
    BlockComplete {
        dev: u32,
        sector: u64,
        nr_sector: u32,
        error: i32,
        rwbs: Rwbs,
    },
    Fork {
        parent_tid: i32,
        child_tid: i32,
        child_comm: String,
    },
    Exec {
        tid: i32,
        old_tid: i32,
        filename: String,
    },
    Exit {
        tid: i32,
        comm: Comm,
    },
    Switch {
        prev_tid: i32,
        prev_state: u64,
        prev_comm: Comm,
        next_tid: i32,
        next_comm: Comm,
    },
    Wakeup {
        tid: i32,
        waker: Option<i32>,
        new: bool,
    },
    /// `sched_waking`: `waker` starts waking `tid` (recorded in the waker's context).
    Waking {
        tid: i32,
        waker: Option<i32>,
    },
    Print {
        tid: i32,
        text: String,
    },
    /// `raw_syscalls:sys_enter`: `tid` enters call `nr` with these arguments.
    SysEnter {
        tid: i32,
        nr: i64,
        args: [u64; 6],
    },
    /// `raw_syscalls:sys_exit`: `tid` returns `ret` from call `nr`.
    SysExit {
        tid: i32,
        nr: i64,
        ret: i64,
    },
}

/// An event with its time on the trace clock and the CPU it was recorded on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timed {
    pub ts: u64,
    pub cpu: u16,
    pub event: Event,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    PageCacheAdd,
    Access(AccessKind),
    Readahead(ReadaheadKind),
    BlockIssue,
    BlockStart,
    BlockRequeue,
    BlockComplete,
    Fork,
    Exec,
    Exit,
    Switch,
    Wakeup { new: bool },
    Waking,
    Print,
    SysEnter,
    SysExit,
}

/// Decodes the enabled events by their format descriptions.
pub struct Decoder {
    common_type: Field,
    common_flags: Option<Field>,
    common_pid: Field,
    kinds: HashMap<u16, (Kind, Vec<Field>)>,
    /// sched_switch `prev_state` bits by the letter the kernel prints for them.
    pub state_bits: Vec<(u64, String)>,
}

/// The bytes of `size` at `offset`, or none when the record is shorter (or the
/// format's numbers are out of range).
fn bytes_at(data: &[u8], offset: usize, size: usize) -> Option<&[u8]> {
    data.get(offset..offset.checked_add(size)?)
}

fn int(data: &[u8], f: &Field) -> i64 {
    let Some(b) = bytes_at(data, f.offset, f.size) else { return 0 };
    match (f.size, f.signed) {
        (1, false) => i64::from(b[0]),
        (1, true) => i64::from(b[0] as i8),
        (2, false) => i64::from(u16::from_le_bytes([b[0], b[1]])),
        (2, true) => i64::from(i16::from_le_bytes([b[0], b[1]])),
        (4, false) => i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        (4, true) => i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        (8, _) => i64::from_le_bytes(b.try_into().unwrap_or([0; 8])),
        _ => 0,
    }
}

/// The bytes of a text field, fixed-size or dynamic, up to its NUL.
fn text_bytes<'a>(data: &'a [u8], f: &Field) -> &'a [u8] {
    let bytes = match f.dynamic() {
        None => bytes_at(data, f.offset, f.size).unwrap_or(&[]),
        Some(kind) => {
            let loc = int(data, &Field { size: 4, signed: false, ..f.clone() }) as u32;
            let (mut start, len) = ((loc & 0xffff) as usize, (loc >> 16) as usize);
            if kind == DynamicKind::RelLoc {
                start = start.saturating_add(f.offset).saturating_add(f.size);
            }
            bytes_at(data, start, len).unwrap_or(&[])
        }
    };
    let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..n]
}

fn text(data: &[u8], f: &Field) -> String {
    String::from_utf8_lossy(text_bytes(data, f)).into_owned()
}

fn comm(data: &[u8], f: &Field) -> Comm {
    Comm::from_bytes(bytes_at(data, f.offset, f.size).unwrap_or(&[]))
}

impl Decoder {
    /// Builds a decoder from the formats of the enabled events (any subset).
    pub fn new(formats: &[EventFormat]) -> Result<Decoder> {
        let any =
            formats.first().ok_or_else(|| crate::error::RecordError::Format("no event formats".into()))?;
        let mut decoder = Decoder {
            common_type: any.require("common_type")?.clone(),
            common_flags: any.field("common_flags").cloned(),
            common_pid: any.require("common_pid")?.clone(),
            kinds: HashMap::new(),
            state_bits: Vec::new(),
        };
        for f in formats {
            let (kind, names): (Kind, &[&str]) = match (f.system.as_str(), f.name.as_str()) {
                ("filemap", "mm_filemap_add_to_page_cache") => {
                    (Kind::PageCacheAdd, &["s_dev", "i_ino", "index", "order"])
                }
                ("filemap", "mm_filemap_get_pages") => {
                    (Kind::Access(AccessKind::Read), &["s_dev", "i_ino", "index", "last_index"])
                }
                ("filemap", "mm_filemap_map_pages") => {
                    (Kind::Access(AccessKind::MapAround), &["s_dev", "i_ino", "index", "last_index"])
                }
                ("filemap", "mm_filemap_fault") => {
                    (Kind::Access(AccessKind::Fault), &["s_dev", "i_ino", "index"])
                }
                ("readahead", "page_cache_sync_ra") => {
                    let sync = ReadaheadKind::Sync { index: 0, count: 0 };
                    (Kind::Readahead(sync), &["s_dev", "i_ino", "index", "req_count"])
                }
                ("readahead", "page_cache_async_ra") => {
                    (Kind::Readahead(ReadaheadKind::Async), &["s_dev", "i_ino"])
                }
                ("readahead", "page_cache_ra_unbounded") => {
                    (Kind::Readahead(ReadaheadKind::Unbounded), &["s_dev", "i_ino"])
                }
                ("block", "block_rq_issue") => {
                    (Kind::BlockIssue, &["dev", "sector", "bytes", "rwbs", "comm"])
                }
                ("block", "block_io_start") => (Kind::BlockStart, &["dev", "sector", "comm"]),
                ("block", "block_rq_requeue") => (Kind::BlockRequeue, &["dev", "sector"]),
                ("block", "block_rq_complete") => {
                    (Kind::BlockComplete, &["dev", "sector", "nr_sector", "error", "rwbs"])
                }
                ("sched", "sched_process_fork") => (Kind::Fork, &["parent_pid", "child_pid", "child_comm"]),
                ("sched", "sched_process_exec") => (Kind::Exec, &["pid", "old_pid", "filename"]),
                ("sched", "sched_process_exit") => (Kind::Exit, &["pid", "comm"]),
                ("sched", "sched_switch") => {
                    decoder.state_bits = f.print_flag_pairs();
                    (Kind::Switch, &["prev_pid", "prev_state", "prev_comm", "next_pid", "next_comm"])
                }
                ("sched", "sched_wakeup") => (Kind::Wakeup { new: false }, &["pid"]),
                ("sched", "sched_wakeup_new") => (Kind::Wakeup { new: true }, &["pid"]),
                ("sched", "sched_waking") => (Kind::Waking, &["pid"]),
                ("ftrace", "print") => (Kind::Print, &["buf"]),
                ("raw_syscalls", "sys_enter") => (Kind::SysEnter, &["id", "args"]),
                ("raw_syscalls", "sys_exit") => (Kind::SysExit, &["id", "ret"]),
                _ => continue,
            };
            let fields = names.iter().map(|n| f.require(n).cloned()).collect::<Result<Vec<_>>>()?;
            decoder.kinds.insert(f.id, (kind, fields));
        }
        Ok(decoder)
    }

    /// Decodes one record; `None` for events the recorder did not ask for.
    pub fn decode(&self, data: &[u8]) -> Option<Event> {
        let id = int(data, &self.common_type) as u16;
        let (kind, f) = self.kinds.get(&id)?;
        let tid = int(data, &self.common_pid) as i32;
        Some(match kind {
            Kind::PageCacheAdd => Event::PageCacheAdd {
                tid,
                dev: int(data, &f[0]) as u32,
                ino: int(data, &f[1]) as u64,
                index: int(data, &f[2]) as u64,
                order: int(data, &f[3]) as u8,
            },
            Kind::Access(kind) => {
                let index = int(data, &f[2]) as u64;
                Event::PageAccess {
                    tid,
                    dev: int(data, &f[0]) as u32,
                    ino: int(data, &f[1]) as u64,
                    index,
                    last: f.get(3).map_or(index, |l| int(data, l) as u64),
                    kind: *kind,
                }
            }
            Kind::Readahead(kind) => {
                let kind = match kind {
                    ReadaheadKind::Sync { .. } => {
                        ReadaheadKind::Sync { index: int(data, &f[2]) as u64, count: int(data, &f[3]) as u64 }
                    }
                    other => *other,
                };
                Event::Readahead { tid, dev: int(data, &f[0]) as u32, ino: int(data, &f[1]) as u64, kind }
            }
            Kind::BlockIssue => Event::BlockIssue {
                tid,
                dev: int(data, &f[0]) as u32,
                sector: int(data, &f[1]) as u64,
                bytes: int(data, &f[2]) as u32,
                rwbs: Rwbs::from_bytes(text_bytes(data, &f[3])),
                comm: comm(data, &f[4]),
            },
            Kind::BlockStart => Event::BlockStart {
                tid,
                dev: int(data, &f[0]) as u32,
                sector: int(data, &f[1]) as u64,
                comm: comm(data, &f[2]),
            },
            Kind::BlockRequeue => {
                Event::BlockRequeue { dev: int(data, &f[0]) as u32, sector: int(data, &f[1]) as u64 }
            }
            Kind::BlockComplete => Event::BlockComplete {
                dev: int(data, &f[0]) as u32,
                sector: int(data, &f[1]) as u64,
                nr_sector: int(data, &f[2]) as u32,
                error: int(data, &f[3]) as i32,
                rwbs: Rwbs::from_bytes(text_bytes(data, &f[4])),
            },
            Kind::Fork => Event::Fork {
                parent_tid: int(data, &f[0]) as i32,
                child_tid: int(data, &f[1]) as i32,
                child_comm: text(data, &f[2]),
            },
            Kind::Exec => Event::Exec {
                tid: int(data, &f[0]) as i32,
                old_tid: int(data, &f[1]) as i32,
                filename: text(data, &f[2]),
            },
            Kind::Exit => Event::Exit { tid: int(data, &f[0]) as i32, comm: comm(data, &f[1]) },
            Kind::Switch => Event::Switch {
                prev_tid: int(data, &f[0]) as i32,
                prev_state: int(data, &f[1]) as u64,
                prev_comm: comm(data, &f[2]),
                next_tid: int(data, &f[3]) as i32,
                next_comm: comm(data, &f[4]),
            },
            Kind::Wakeup { new } => {
                let flags = self.common_flags.as_ref().map_or(0, |cf| int(data, cf) as u8);
                let waker = (flags & INTERRUPT_FLAGS == 0 && tid != 0).then_some(tid);
                Event::Wakeup { tid: int(data, &f[0]) as i32, waker, new: *new }
            }
            Kind::Waking => {
                let flags = self.common_flags.as_ref().map_or(0, |cf| int(data, cf) as u8);
                let waker = (flags & INTERRUPT_FLAGS == 0 && tid != 0).then_some(tid);
                Event::Waking { tid: int(data, &f[0]) as i32, waker }
            }
            Kind::SysEnter => {
                let mut args = [0u64; 6];
                for (i, a) in args.iter_mut().enumerate() {
                    let at = f[1].offset.saturating_add(8 * i);
                    *a = bytes_at(data, at, 8)
                        .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])));
                }
                Event::SysEnter { tid, nr: int(data, &f[0]), args }
            }
            Kind::SysExit => Event::SysExit { tid, nr: int(data, &f[0]), ret: int(data, &f[1]) },
            Kind::Print => {
                let buf = &f[0];
                let bytes = data.get(buf.offset..).unwrap_or(&[]);
                let n = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
                Event::Print { tid, text: String::from_utf8_lossy(&bytes[..n]).trim_end().to_owned() }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(system: &str, name: &str, id: u16, fields: &str) -> EventFormat {
        let text = format!(
            "name: {name}\nID: {id}\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n{fields}\nprint fmt: \"\"\n"
        );
        EventFormat::parse(system, &text).unwrap()
    }

    fn record(id: u16, flags: u8, pid: i32, rest: &[u8]) -> Vec<u8> {
        let mut r = id.to_le_bytes().to_vec();
        r.push(flags);
        r.push(0);
        r.extend_from_slice(&pid.to_le_bytes());
        r.extend_from_slice(rest);
        r
    }

    #[test]
    fn decodes_fork_with_data_loc_and_wakeup_from_irq() {
        let fork = format(
            "sched",
            "sched_process_fork",
            7,
            "\tfield:__data_loc char[] parent_comm;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:pid_t parent_pid;\toffset:12;\tsize:4;\tsigned:1;\n\
\tfield:__data_loc char[] child_comm;\toffset:16;\tsize:4;\tsigned:0;\n\
\tfield:pid_t child_pid;\toffset:20;\tsize:4;\tsigned:1;\n",
        );
        let wake = format("sched", "sched_wakeup", 9, "\tfield:pid_t pid;\toffset:24;\tsize:4;\tsigned:1;\n");
        let d = Decoder::new(&[fork, wake]).unwrap();
        let mut rest = Vec::new();
        rest.extend_from_slice(&((3u32 << 16) | 24).to_le_bytes());
        rest.extend_from_slice(&10i32.to_le_bytes());
        rest.extend_from_slice(&((4u32 << 16) | 27).to_le_bytes());
        rest.extend_from_slice(&11i32.to_le_bytes());
        rest.extend_from_slice(b"sh\0abc\0");
        assert_eq!(
            d.decode(&record(7, 0, 10, &rest)),
            Some(Event::Fork { parent_tid: 10, child_tid: 11, child_comm: "abc".into() })
        );
        let mut rest = vec![0u8; 16];
        rest.extend_from_slice(&55i32.to_le_bytes());
        assert_eq!(
            d.decode(&record(9, 0x08, 3, &rest)),
            Some(Event::Wakeup { tid: 55, waker: None, new: false })
        );
        assert_eq!(
            d.decode(&record(9, 0x01, 3, &rest)),
            Some(Event::Wakeup { tid: 55, waker: Some(3), new: false })
        );
        assert_eq!(d.decode(&record(99, 0, 3, &rest)), None);
    }

    #[test]
    fn decodes_block_requests_by_the_formats_of_linux_6_18() {
        let request_fields = "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
\tfield:unsigned int bytes;\toffset:28;\tsize:4;\tsigned:0;\n\
\tfield:unsigned short ioprio;\toffset:32;\tsize:2;\tsigned:0;\n\
\tfield:char rwbs[10];\toffset:34;\tsize:10;\tsigned:0;\n\
\tfield:char comm[16];\toffset:44;\tsize:16;\tsigned:0;\n\
\tfield:__data_loc char[] cmd;\toffset:60;\tsize:4;\tsigned:0;\n";
        let issue = format("block", "block_rq_issue", 30, request_fields);
        let start = format("block", "block_io_start", 32, request_fields);
        let requeue = format(
            "block",
            "block_rq_requeue",
            31,
            "\tfield:dev_t dev;\toffset:8;\tsize:4;\tsigned:0;\n\
\tfield:sector_t sector;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:unsigned int nr_sector;\toffset:24;\tsize:4;\tsigned:0;\n\
\tfield:unsigned short ioprio;\toffset:28;\tsize:2;\tsigned:0;\n\
\tfield:char rwbs[10];\toffset:30;\tsize:10;\tsigned:0;\n\
\tfield:__data_loc char[] cmd;\toffset:40;\tsize:4;\tsigned:0;\n",
        );
        let d = Decoder::new(&[issue, requeue, start]).unwrap();
        let mut rest = 266338304u32.to_le_bytes().to_vec();
        rest.extend_from_slice(&[0; 4]);
        rest.extend_from_slice(&123456u64.to_le_bytes());
        rest.extend_from_slice(&8u32.to_le_bytes());
        let mut issue_rest = rest.clone();
        issue_rest.extend_from_slice(&4096u32.to_le_bytes());
        issue_rest.extend_from_slice(&[0; 2]);
        issue_rest.extend_from_slice(b"RA\0\0\0\0\0\0\0\0kworker/1:1H\0\0\0\0");
        issue_rest.extend_from_slice(&[0; 4]);
        let Some(Event::BlockIssue { tid: 3, dev: 266338304, sector: 123456, bytes: 4096, rwbs, comm }) =
            d.decode(&record(30, 0, 3, &issue_rest))
        else {
            panic!("not the issue")
        };
        assert_eq!((rwbs.as_str(), comm.text().as_str()), ("RA", "kworker/1:1H"));
        assert_eq!(
            d.decode(&record(31, 0, 3, &rest)),
            Some(Event::BlockRequeue { dev: 266338304, sector: 123456 })
        );
        let Some(Event::BlockStart { tid: 3, dev: 266338304, sector: 123456, comm }) =
            d.decode(&record(32, 0, 3, &issue_rest))
        else {
            panic!("not the start")
        };
        assert_eq!(comm.text(), "kworker/1:1H");
    }

    #[test]
    fn decodes_page_accesses_by_the_formats_of_linux_6_18() {
        let file = "\tfield:unsigned long i_ino;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:dev_t s_dev;\toffset:16;\tsize:4;\tsigned:0;\n\
\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n";
        let get = format(
            "filemap",
            "mm_filemap_get_pages",
            20,
            &format!("{file}\tfield:unsigned long last_index;\toffset:32;\tsize:8;\tsigned:0;\n"),
        );
        let fault = format("filemap", "mm_filemap_fault", 21, file);
        let sync = format(
            "readahead",
            "page_cache_sync_ra",
            22,
            &format!("{file}\tfield:unsigned long req_count;\toffset:32;\tsize:8;\tsigned:0;\n"),
        );
        let d = Decoder::new(&[get, fault, sync]).unwrap();
        let mut rest = 0x3c4d7u64.to_le_bytes().to_vec();
        rest.extend_from_slice(&266338304u32.to_le_bytes());
        rest.extend_from_slice(&[0; 4]);
        rest.extend_from_slice(&5u64.to_le_bytes());
        rest.extend_from_slice(&9u64.to_le_bytes());
        let (dev, ino) = (266338304, 0x3c4d7);
        assert_eq!(
            d.decode(&record(20, 0, 4, &rest)),
            Some(Event::PageAccess { tid: 4, dev, ino, index: 5, last: 9, kind: AccessKind::Read })
        );
        assert_eq!(
            d.decode(&record(21, 0, 4, &rest)),
            Some(Event::PageAccess { tid: 4, dev, ino, index: 5, last: 5, kind: AccessKind::Fault })
        );
        assert_eq!(
            d.decode(&record(22, 0, 4, &rest)),
            Some(Event::Readahead { tid: 4, dev, ino, kind: ReadaheadKind::Sync { index: 5, count: 9 } })
        );
    }

    #[test]
    fn a_format_with_offsets_past_the_end_of_memory_decodes_zeros_instead_of_panicking() {
        let huge = usize::MAX - 1;
        let fork = format(
            "sched",
            "sched_process_fork",
            7,
            &format!(
                "\tfield:pid_t parent_pid;\toffset:{huge};\tsize:4;\tsigned:1;\n\
\tfield:__rel_loc char[] child_comm;\toffset:{huge};\tsize:4;\tsigned:0;\n\
\tfield:pid_t child_pid;\toffset:8;\tsize:{huge};\tsigned:1;\n"
            ),
        );
        let d = Decoder::new(&[fork]).unwrap();
        assert_eq!(
            d.decode(&record(7, 0, 10, &[1; 16])),
            Some(Event::Fork { parent_tid: 0, child_tid: 0, child_comm: String::new() })
        );
    }
}
