//! `coldstart import FORMAT PATH`: another tool's log turned into a trace file, so
//! every report, chart and analysis works on it. One subcommand per format; today
//! bootchart2.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use coldstart_import::bootchart2;

/// Import another tool's log as a coldstart trace.
#[derive(Debug, clap::Args)]
#[command(after_help = "Example:\n  coldstart import bootchart2 /var/log/bootchart.tgz -o boot.coldstart")]
pub struct Args {
    #[command(subcommand)]
    pub format: Format,
}

#[derive(Debug, clap::Subcommand)]
pub enum Format {
    Bootchart2(Bootchart2Args),
}

/// Import a bootchart2 log (bootchartd's bootchart.tgz, or its unpacked folder).
///
/// Reads header, proc_stat.log, proc_diskstats.log and proc_ps.log (or taskstats.log),
/// and kernel_pacct, cmdline2.log and paternity.log when present. The trace covers the
/// whole system; t = 0 is the first sample, and "ready" is the end of the boot as
/// pybootchartgui draws it (the last sample plus one sample interval). Lines that
/// cannot be read are skipped and counted in the trace's losses.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart import bootchart2 /var/log/bootchart.tgz            # writes bootchart.coldstart
  coldstart import bootchart2 logs/ -o boot.coldstart --force
  coldstart info boot.coldstart")]
pub struct Bootchart2Args {
    /// The log: a folder holding header and the *.log files, or a .tgz / .tar of them.
    pub path: PathBuf,
    /// The trace file to write [default: the folder or archive name + .coldstart, in the current folder].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Replace the output file if it exists.
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.format {
        Format::Bootchart2(args) => bootchart2(args),
    }
}

fn bootchart2(args: Bootchart2Args) -> anyhow::Result<ExitCode> {
    let output = match args.output {
        Some(output) => output,
        None => default_output(&args.path)?,
    };
    if output.exists() && !args.force {
        bail!("{} already exists; use --force to replace it, or -o to write elsewhere", output.display());
    }
    let trace = bootchart2::import(&args.path).context("cannot import the bootchart2 log")?;
    trace.write(&output).with_context(|| format!("cannot write the trace {}", output.display()))?;

    let m = &trace.meta;
    let exited = trace.processes.iter().filter(|p| p.exit_code.is_some()).count();
    println!("{} → {}", args.path.display(), output.display());
    println!("host       {} — {}", m.host, m.kernel);
    println!("processes  {} ({exited} with an exit record from kernel_pacct)", trace.processes.len());
    println!(
        "samples    {} cpu, {} disk, {} process, at {:.1} per second",
        trace.cpu_samples.len(),
        trace.disk_samples.len(),
        trace.process_samples.len(),
        m.sample_hz.unwrap_or(0.0)
    );
    if let Some(ready) = &m.ready {
        println!(
            "boot end   {:.2} s after the first sample ({:.2} s uptime), as bootchart2 draws it",
            ready.t_ns as f64 / 1e9,
            (m.start_clock_ns + ready.t_ns) as f64 / 1e9
        );
    }
    for loss in trace.losses.iter().filter(|l| l.count > 0) {
        println!("SKIPPED    {} {}", loss.count, loss.what);
    }
    Ok(ExitCode::SUCCESS)
}

/// `DIR.coldstart` or `ARCHIVE.coldstart` (without .tgz, .tar.gz, .tar), in the current folder.
fn default_output(input: &Path) -> anyhow::Result<PathBuf> {
    let resolved = std::fs::canonicalize(input).or_else(|_| std::path::absolute(input));
    let resolved = resolved.with_context(|| format!("{}", input.display()))?;
    let name = resolved.file_name().map_or_else(|| OsString::from("bootchart"), ToOwned::to_owned);
    let name = name.to_string_lossy();
    let stem = [".tar.gz", ".tgz", ".tar"].iter().find_map(|ext| name.strip_suffix(ext)).unwrap_or(&name);
    Ok(PathBuf::from(format!("{stem}.coldstart")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_output_names() {
        let name = |p: &str| default_output(Path::new(p)).unwrap();
        assert_eq!(name("/var/log/bootchart.tgz"), PathBuf::from("bootchart.coldstart"));
        assert_eq!(name("logs/boot.tar.gz"), PathBuf::from("boot.coldstart"));
        assert_eq!(name("a/example1/"), PathBuf::from("example1.coldstart"));
        assert_eq!(name("x.tar"), PathBuf::from("x.coldstart"));
    }
}
