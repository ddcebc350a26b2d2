//! Reads the spool: its start and end, the JSON-lines records, and the spooled raw
//! pages of every CPU turned into one time-ordered list of events per instance,
//! counting what the kernel reported lost and what did not parse.

use std::fs;

use crate::capture::bpf::PathRecord;
use crate::capture::connector::ProcRecord;
use crate::capture::fanotify::OpenRecord;
use crate::capture::perf::PerfSetup;
use crate::capture::sampler::SampleRecord;
use crate::error::{IoContext, Result};
use crate::ftrace::events::{Decoder, Timed};
use crate::ftrace::format::{EventFormat, PageHeader};
use crate::ftrace::page::{Missed, page_events};
use crate::spool::{Spool, SpoolEnd, SpoolStart};

/// Everything a spool holds, decoded.
pub struct SpoolData {
    pub start: SpoolStart,
    /// `None` when the recorder did not finish (the trace is partial).
    pub end: Option<SpoolEnd>,
    pub formats: Formats,
    pub scope: Decoded,
    pub block: Decoded,
    pub procs: Vec<ProcRecord>,
    pub opens: Vec<OpenRecord>,
    /// From the last sample before t = 0 on.
    pub samples: Vec<SampleRecord>,
    /// JSON lines cut short by a killed recorder, all files together.
    pub torn_lines: usize,
    /// The `marks` file of the spool, if there is one.
    pub marks: Option<String>,
    /// The perf capture's setup and the bytes of each CPU's stream, if it ran.
    pub perf: Option<(PerfSetup, Vec<Vec<u8>>)>,
    /// The bytes of each CPU's off-CPU stacks stream, when the perf setup has them; when the
    /// eBPF program took them, the bytes of its records and of its stacks.
    pub off_cpu: Vec<Vec<u8>>,
    /// The bytes of each CPU's stream of samples taken without a stack copy.
    pub frame_pointer_streams: Vec<Vec<u8>>,
    /// The names of path system calls the eBPF program copied.
    pub path_names: Vec<PathRecord>,
    /// The slow file-system calls the eBPF filter kept (merged into `scope.events` and
    /// `path_names` as their enters, exits and names), when it ran.
    pub slow_calls: usize,
}

impl SpoolData {
    pub fn read(spool: &Spool) -> Result<SpoolData> {
        let start = spool.start()?;
        let end = spool.end()?;
        let formats = Formats::load(spool)?;
        let page = start.subbuf_size.max(4096);
        let mut scope = decode_role(spool, "scope", &start.cpus, page, &formats)?;
        let block = decode_role(spool, "block", &start.cpus, page, &formats)?;
        let (procs, torn_procs) = spool.read_lines::<ProcRecord>("procs.jsonl")?;
        let (opens, torn_opens) = spool.read_lines::<OpenRecord>("opens.jsonl")?;
        let (mut samples, torn_samples) = spool.read_lines::<SampleRecord>("samples.jsonl")?;
        let first_after_t0 = samples.iter().position(|s| s.t >= start.t0_boot_ns).unwrap_or(samples.len());
        samples.drain(..first_after_t0.saturating_sub(1));
        let marks = fs::read_to_string(spool.path("marks")).ok();
        let mut path_names = fs::read(spool.path(crate::capture::bpf::SPOOL_FILE))
            .map(|b| crate::capture::bpf::decode_all(&b))
            .unwrap_or_default();
        let slow_calls = merge_slow_calls(spool, &mut scope.events, &mut path_names);
        let torn_lines = torn_procs + torn_opens + torn_samples;
        let perf: Option<(PerfSetup, Vec<Vec<u8>>)> = match spool.read_json::<PerfSetup>("perf.json")? {
            Some(setup) => {
                let streams = setup
                    .cpus
                    .iter()
                    .map(|cpu| spool.read_file(&format!("perf-cpu{cpu}.raw")).unwrap_or_default())
                    .collect();
                Some((setup, streams))
            }
            None => None,
        };
        let frame_pointer_streams = match &perf {
            Some((setup, _)) if setup.frame_pointer_sample_type.is_some() => setup
                .cpus
                .iter()
                .map(|&cpu| {
                    spool.read_file(&crate::capture::perf::frame_pointer_file(cpu)).unwrap_or_default()
                })
                .collect(),
            _ => Vec::new(),
        };
        let off_cpu = match &perf {
            Some((setup, _)) if setup.off_cpu.as_ref().is_some_and(|o| o.kernel_filter.is_some()) => {
                [crate::capture::off_cpu::SPOOL_FILE, crate::capture::off_cpu::STACKS_FILE]
                    .iter()
                    .map(|name| spool.read_file(name).unwrap_or_default())
                    .collect()
            }
            Some((setup, _)) if setup.off_cpu.is_some() => setup
                .cpus
                .iter()
                .map(|&cpu| spool.read_file(&crate::capture::perf::off_cpu_file(cpu)).unwrap_or_default())
                .collect(),
            _ => Vec::new(),
        };
        Ok(SpoolData {
            start,
            end,
            formats,
            scope,
            block,
            procs,
            opens,
            samples,
            torn_lines,
            marks,
            perf,
            off_cpu,
            frame_pointer_streams,
            path_names,
            slow_calls,
        })
    }

    /// When the recording ended (CLOCK_BOOTTIME): as the recorder said, or, for a
    /// partial spool, at the last event or sample it holds.
    pub fn end_boot_ns(&self) -> i64 {
        match &self.end {
            Some(e) => e.t_end_boot_ns,
            None => {
                let last_event =
                    self.scope.events.iter().chain(&self.block.events).map(|e| e.ts as i64).max();
                let last_sample = self.samples.last().map(|s| s.t);
                last_event.into_iter().chain(last_sample).max().unwrap_or(self.start.t0_boot_ns)
            }
        }
    }
}

/// Events of one instance ("role") and what was lost on the way.
#[derive(Default)]
pub struct Decoded {
    pub events: Vec<Timed>,
    /// Per CPU: events the kernel flagged lost between pages (counted where it said how many).
    pub missed: Vec<(u16, u64)>,
    /// Pages flagged lost without a count.
    pub missed_unknown: u64,
    pub corrupt_pages: u64,
    pub pages: u64,
}

/// The decoder and page layout saved in the spool.
pub struct Formats {
    pub decoder: Decoder,
    pub header: PageHeader,
    /// The block instance recorded `block_rq_requeue` (spools of older recorders did not).
    pub requeue_traced: bool,
}

impl Formats {
    pub fn load(spool: &Spool) -> Result<Formats> {
        let mut header = None;
        let mut formats = Vec::new();
        let mut requeue_traced = false;
        for (name, text) in spool.formats()? {
            requeue_traced |= name == "block__block_rq_requeue";
            if name == "header_page" {
                header = Some(PageHeader::parse(&text)?);
            } else if let Some((system, _)) = name.split_once("__") {
                formats.push(EventFormat::parse(system, &text)?);
            }
        }
        let header =
            header.ok_or_else(|| crate::error::RecordError::Format("the spool has no header_page".into()))?;
        Ok(Formats { decoder: Decoder::new(&formats)?, header, requeue_traced })
    }
}

/// Decodes every `<role>-cpuN.raw` of the spool.
/// Adds the calls of the spool's `slowcalls.raw` to the events and path names, as the
/// tracefs events and eBPF names `--syscalls` records; returns how many there were.
fn merge_slow_calls(spool: &Spool, events: &mut Vec<Timed>, names: &mut Vec<PathRecord>) -> usize {
    let Ok(bytes) = fs::read(spool.path(crate::capture::slow_calls::SPOOL_FILE)) else { return 0 };
    let calls = crate::capture::slow_calls::decode_all(&bytes);
    for call in &calls {
        let (enter_exit, name) = call.as_events();
        events.extend(enter_exit);
        names.extend(name);
    }
    // The tracefs events are in time order already (a run the sort merges with the calls').
    events.sort_by_key(|e| e.ts);
    calls.len()
}

pub fn decode_role(
    spool: &Spool,
    role: &str,
    cpus: &[u16],
    page_size: usize,
    formats: &Formats,
) -> Result<Decoded> {
    let mut out = Decoded::default();
    for &cpu in cpus {
        let path = spool.raw_path(role, cpu);
        let bytes = match fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e).at(&path),
        };
        let mut missed = 0;
        for page in bytes.chunks(page_size) {
            out.pages += 1;
            let mut events = page_events(page, &formats.header);
            for raw in events.by_ref() {
                if let Some(event) = formats.decoder.decode(raw.data) {
                    out.events.push(Timed { ts: raw.ts, cpu, event });
                }
            }
            match events.missed {
                Missed::None => {}
                Missed::Unknown => out.missed_unknown += 1,
                Missed::Count(n) => missed += n,
            }
            if events.corrupt {
                out.corrupt_pages += 1;
            }
        }
        out.missed.push((cpu, missed));
    }
    out.events.sort_by_key(|e| e.ts);
    Ok(out)
}
