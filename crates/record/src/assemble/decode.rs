//! Turns the spooled raw pages of every CPU into one time-ordered list of events,
//! counting what the kernel reported lost and what did not parse.

use std::fs;

use crate::error::{IoContext, Result};
use crate::ftrace::events::{Decoder, Timed};
use crate::ftrace::format::{EventFormat, PageHeader};
use crate::ftrace::page::{Missed, page_events};
use crate::spool::Spool;

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
