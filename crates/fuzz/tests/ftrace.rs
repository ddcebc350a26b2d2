//! Fuzzes the ftrace parsers the recorder (and `coldstart recover`, on a spool anyone
//! may have left) runs on the kernel's words: the `format` and `header_page`
//! descriptions, and raw ring-buffer pages decoded by them. Seeds are real: the
//! formats and pages of a recording on this project's machine (seeds/ftrace).

use std::sync::OnceLock;

use coldstart_fuzz::{crate_dir, fuzz, mutate};
use coldstart_record::ftrace::events::Decoder;
use coldstart_record::ftrace::format::{EventFormat, PageHeader};
use coldstart_record::ftrace::page::page_events;
use proptest::prelude::*;

const PAGE_SIZE: usize = 4096;
const HEADER_PAGE: &str = "header_page";

/// The spool's `formats/` files, by name (`SYSTEM__EVENT` or `header_page`).
fn format_files() -> &'static Vec<(String, String)> {
    static FILES: OnceLock<Vec<(String, String)>> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = crate_dir().join("seeds/ftrace/formats");
        let mut files: Vec<(String, String)> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                let e = e.unwrap();
                (e.file_name().to_string_lossy().into_owned(), std::fs::read_to_string(e.path()).unwrap())
            })
            .collect();
        files.sort();
        files
    })
}

/// The real pages, each `PAGE_SIZE` bytes.
fn pages() -> &'static Vec<Vec<u8>> {
    static PAGES: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    PAGES.get_or_init(|| {
        ["scope-cpu0.raw", "scope-cpu1.raw", "block-cpu1.raw"]
            .iter()
            .flat_map(|name| std::fs::read(crate_dir().join("seeds/ftrace").join(name)).unwrap())
            .collect::<Vec<u8>>()
            .chunks(PAGE_SIZE)
            .map(<[u8]>::to_vec)
            .collect()
    })
}

/// Parses the spool's format files as `Formats::load` does.
fn parse_formats(files: &[(String, String)]) -> Option<(PageHeader, Decoder)> {
    let mut header = None;
    let mut formats = Vec::new();
    for (name, text) in files {
        if name == HEADER_PAGE {
            header = Some(PageHeader::parse(text).ok()?);
        } else if let Some((system, _)) = name.split_once("__") {
            formats.push(EventFormat::parse(system, text).ok()?);
        }
    }
    Some((header?, Decoder::new(&formats).ok()?))
}

fn real_formats() -> &'static (PageHeader, Decoder) {
    static REAL: OnceLock<(PageHeader, Decoder)> = OnceLock::new();
    REAL.get_or_init(|| parse_formats(format_files()).expect("the real formats parse"))
}

/// Decodes every event of `page` as `build::decode` does; returns how many decoded.
fn decode_page(page: &[u8], header: &PageHeader, decoder: &Decoder) -> usize {
    let mut events = page_events(page, header);
    let decoded = events.by_ref().filter_map(|raw| decoder.decode(raw.data)).count();
    let _ = (events.missed, events.corrupt);
    decoded
}

#[test]
fn the_real_pages_decode() {
    let (header, decoder) = real_formats();
    let decoded: usize = pages().iter().map(|p| decode_page(p, header, decoder)).sum();
    assert!(decoded > 1000, "{decoded} events");
}

/// A format file as one input: its name on the first line, then its text.
fn encode(name: &str, text: &str) -> Vec<u8> {
    format!("{name}\n{text}").into_bytes()
}

#[test]
fn ftrace_formats() {
    let seeds = format_files().iter().map(|(name, text)| encode(name, text)).collect();
    fuzz(
        "ftrace_formats",
        seeds,
        |bases| prop_oneof![4 => mutate::text(&bases), 1 => mutate::bytes(&bases)].boxed(),
        |input| {
            let text = String::from_utf8_lossy(input);
            let (name, text) = text.split_once('\n').unwrap_or((&text, ""));
            let files: Vec<(String, String)> = format_files()
                .iter()
                .map(|(n, t)| if n == name { (n.clone(), text.to_owned()) } else { (n.clone(), t.clone()) })
                .collect();
            if let Some((header, decoder)) = parse_formats(&files) {
                for page in pages() {
                    decode_page(page, &header, &decoder);
                }
            }
        },
    );
}

#[test]
fn ftrace_pages() {
    fuzz(
        "ftrace_pages",
        pages().clone(),
        |bases| mutate::bytes(&bases),
        |page| {
            let (header, decoder) = real_formats();
            decode_page(page, header, decoder);
        },
    );
}
