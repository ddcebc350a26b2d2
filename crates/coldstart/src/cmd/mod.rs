//! One module per subcommand: its arguments (clap derive) and the glue that turns
//! them into calls of the library crates; here, the output file they write to.

pub mod anonymize;
pub mod bench;
pub mod bench_storage;
pub mod boot;
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
pub mod mark;
pub mod prefetch;
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
