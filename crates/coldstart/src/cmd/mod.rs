//! One module per subcommand: its arguments (clap derive) and the glue that turns
//! them into calls of the library crates; here, the output file they write to.

pub mod anonymize;
pub mod bench;
pub mod bench_storage;
pub mod boot;
pub mod boot_blocks;
pub mod boot_init;
pub mod boot_service;
pub mod demo;
pub mod doctor;
pub mod export;
mod export_parquet;
pub mod fleet;
pub mod fleet_compact;
pub mod generate;
pub mod import;
pub mod info;
pub mod launch_args;
pub mod login;
pub mod mark;
pub mod prefetch;
pub mod prefetch_blocks;
pub mod prefetch_fleet;
pub mod reads;
pub mod record;
pub mod recover;
pub mod report;
pub mod run;
pub mod storage;
pub mod syscalls;
pub mod values;

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use anyhow::Context;

/// Opens `path` for writing (mode 0600 when created: reports name every path the
/// start touched, like the trace), or standard output when there is none.
pub fn output(path: Option<&PathBuf>) -> anyhow::Result<Box<dyn Write>> {
    Ok(match path {
        Some(path) => Box::new(
            OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .with_context(|| format!("cannot create the output file {}", path.display()))?,
        ),
        None => Box::new(io::stdout().lock()),
    })
}
#[cfg(test)]
pub mod test_traces;

/// Reads the trace at `path`; a bootchart2 log (its folder, with its `header`, or a gzip tarball such as
/// bootchartd's `bootchart.tgz`) is imported on the way, as `coldstart import bootchart2`
/// would, and said so on stderr.
pub fn read_trace(path: &std::path::Path) -> anyhow::Result<coldstart_trace::Trace> {
    use anyhow::Context;
    let gzip = || {
        let mut magic = [0u8; 2];
        std::fs::File::open(path).and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic)).is_ok()
            && magic == [0x1f, 0x8b]
    };
    if path.join("header").is_file() || (path.is_file() && gzip()) {
        eprintln!(
            "coldstart: {} read as a bootchart2 log (`coldstart import bootchart2` keeps it as a trace)",
            path.display()
        );
        return coldstart_import::bootchart2::import(path).context("cannot read the bootchart2 log");
    }
    coldstart_trace::Trace::read(path).context("cannot read the trace")
}
