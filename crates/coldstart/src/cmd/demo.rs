//! `coldstart demo`: the whole main job on a built-in example, for a first look on
//! a fresh machine. Records a cold start of a program every Linux machine has
//! (Python importing part of its standard library; Perl loading modules when there
//! is no Python; the shell listing system directories when there is neither), prints
//! the report with the doctor's findings, and writes the trace, the text report,
//! the HTML report and the bootchart SVG into one directory.

use std::ffi::OsString;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use coldstart_record::RecordConfig;
use coldstart_trace::Trace;

/// Record a cold start of a built-in example and write every report (as root).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart demo
  sudo coldstart demo --example shell --dir /tmp/demo

What it does: evicts the page cache (like `record --cold`), records the example's
start, prints the report with the doctor's findings, and writes into DIR:
  demo.coldstart  the trace (SQLite; see docs/trace-format.md)
  report.txt      the text report (coldstart report)
  report.html     the interactive report (open it in a browser; works offline)
  chart.svg       the bootchart-style chart
Files of those names in DIR are replaced; nothing else there is touched. Under sudo
the files belong to you.")]
pub struct Args {
    /// The directory the trace and the reports are written to (created if needed).
    #[arg(long, value_name = "DIR", default_value = "coldstart-demo")]
    pub dir: PathBuf,
    /// The program whose start is recorded; `auto` takes the first one installed of
    /// python, perl and shell.
    #[arg(long, value_enum, default_value = "auto")]
    pub example: Example,
    /// Rows of each top-N table of the printed report.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub top: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Example {
    Auto,
    /// /usr/bin/python3 importing a dozen standard-library modules.
    Python,
    /// /usr/bin/perl loading core modules.
    Perl,
    /// /bin/sh listing /usr/bin and /usr/lib and reading /etc/os-release.
    Shell,
}

const PYTHON: &str = "/usr/bin/python3";
const PERL: &str = "/usr/bin/perl";
const SHELL: &str = "/bin/sh";

fn command_of(example: Example) -> anyhow::Result<(Example, Vec<OsString>)> {
    let chosen = match example {
        Example::Auto if Path::new(PYTHON).exists() => Example::Python,
        Example::Auto if Path::new(PERL).exists() => Example::Perl,
        Example::Auto => Example::Shell,
        other => other,
    };
    let (program, args): (&str, &[&str]) = match chosen {
        Example::Python => (
            PYTHON,
            &[
                "-c",
                "import json, decimal, email.mime.multipart, http.client, xml.dom.minidom, sqlite3, \
                 unittest, argparse, logging.handlers, urllib.request, csv, zipfile",
            ],
        ),
        Example::Perl => {
            (PERL, &["-MPOSIX", "-MFile::Find", "-MData::Dumper", "-MStorable", "-MTime::Local", "-e", "1"])
        }
        Example::Shell | Example::Auto => {
            (SHELL, &["-c", "ls -l /usr/bin /usr/lib >/dev/null; cat /etc/os-release >/dev/null"])
        }
    };
    anyhow::ensure!(
        Path::new(program).exists(),
        "the {chosen:?} example needs {program}, which is not installed; try --example auto"
    );
    let mut command = vec![OsString::from(program)];
    command.extend(args.iter().map(OsString::from));
    Ok((chosen, command))
}

/// Writes `bytes` to `path` (mode 0600: reports name every path the start touched).
fn write_private(path: &Path, bytes: &[u8], owner: Option<(u32, u32)>) -> anyhow::Result<()> {
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .and_then(|()| file.write_all(bytes))
        .with_context(|| format!("cannot write {}", path.display()))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(path, Some(uid), Some(gid))
            .with_context(|| format!("cannot give {} to the sudo invoker", path.display()))?;
    }
    Ok(())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if !coldstart_bench::evict::is_root() {
        anyhow::bail!(
            "the demo records a cold start, which needs root: the recorder reads the kernel's tracing \
             buffers and evicts the page cache. Run it as `sudo coldstart demo` (the example still \
             runs as you). Without root, `coldstart report`, `doctor` and `bench --evict files` work \
             on traces and commands you own."
        );
    }
    let (example, command) = command_of(args.example)?;
    let owner = coldstart_launch::SudoInvoker::owner();
    fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&args.dir, Some(uid), Some(gid))
            .with_context(|| format!("cannot give {} to the sudo invoker", args.dir.display()))?;
    }
    let trace_path = args.dir.join("demo.coldstart");
    let shown: Vec<String> = command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    eprintln!(
        "coldstart demo: recording a cold start of the {example:?} example (the page cache is evicted first):"
    );
    eprintln!("  {}", shown.join(" "));

    let config =
        RecordConfig { command, output: Some(trace_path.clone()), cold: true, ..RecordConfig::default() };
    let recorded = coldstart_record::record(&config)?;
    super::record::print_recorded(&recorded, true);
    if recorded.exit_code != 0 {
        eprintln!("coldstart demo: warning: the example exited with status {}", recorded.exit_code);
    }

    let trace = Trace::read(&recorded.path).context("cannot read the trace just recorded")?;
    let analysis = coldstart_analyze::analyze(&trace);
    let diagnosis = super::doctor::for_report(&trace, &analysis, &recorded.path);
    let mut svg = Vec::new();
    coldstart_report::svg::write(&trace, &analysis, &Default::default(), &mut svg)
        .context("cannot draw the chart")?;
    let timeline = coldstart_report::html::Timeline::new(&trace);
    drop(trace);
    let mut html = Vec::new();
    coldstart_report::html::write(&analysis, Some(&timeline), Some(&diagnosis), &mut html)
        .context("cannot write the HTML report")?;
    let mut text = Vec::new();
    coldstart_report::text::report_with_findings(&analysis, Some(&diagnosis), &Default::default(), &mut text)
        .context("cannot write the text report")?;
    let mut short = Vec::new();
    let options = coldstart_report::text::Options { top: args.top, ..Default::default() };
    coldstart_report::text::report_with_findings(&analysis, Some(&diagnosis), &options, &mut short)
        .context("cannot write the text report")?;

    let written = [
        ("report.txt", &text, "the text report"),
        ("report.html", &html, "the interactive report: open it in a browser"),
        ("chart.svg", &svg, "the bootchart-style chart"),
    ];
    for (name, bytes, _) in &written {
        write_private(&args.dir.join(name), bytes, owner)?;
    }
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(&short)?;
    stdout.flush()?;

    eprintln!();
    eprintln!("coldstart demo: wrote");
    eprintln!("  {:<40} the trace", recorded.path.display());
    for (name, _, what) in &written {
        eprintln!("  {:<40} {what}", args.dir.join(name).display());
    }
    eprintln!("next: coldstart reads {} --by file --top 10", recorded.path.display());
    eprintln!("      coldstart doctor {} --disk hdd", recorded.path.display());
    Ok(ExitCode::SUCCESS)
}
