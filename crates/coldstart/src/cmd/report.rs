//! `coldstart report FILE`: analyse a trace and write the report, as text for
//! people or as versioned JSON for programs (docs/report-json.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// The report for people.
    Text,
    /// The whole analysis as JSON (schema in docs/report-json.md).
    Json,
    /// An interactive, self-contained HTML page (timeline, sortable tables); use with -o.
    Html,
    /// A bootchart-style SVG chart: CPU, disk, process bars, milestones, seek plot; use with -o.
    Svg,
    /// A flame graph of the CPU samples (SVG, inferno); use with -o.
    Flamegraph,
}

/// How much of the critical path the text report lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum CriticalPathArg {
    /// Its time by process and kind, and its longest waits.
    Summary,
    /// That, and every segment in time order.
    Full,
}

/// Analyse a trace: time to ready, reads and seeks, where the time went, phases,
/// the critical path, disk seeks, lost data and warnings.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart report app.coldstart
  coldstart report app.coldstart --format json -o app.json
  coldstart report app.coldstart --format html -o app.html
  coldstart report app.coldstart --format svg -o chart.svg
  coldstart report app.coldstart --format flamegraph -o flame.svg
  coldstart report app.coldstart --top 25 | less
  coldstart report app.coldstart --critical-path full
  coldstart report boot.coldstart --chain-to dbus.service

Lost events, unresolved files and other warnings are always printed; the diskstats
cross-check shows how much of each disk's reads the recorded block requests account for.")]
pub struct Args {
    /// The trace file (from `coldstart record` or `coldstart import`), or a bootchart2 log (its folder or .tgz).
    pub trace: PathBuf,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "text")]
    pub format: FormatArg,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Rows of each top-N table of the text report.
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub top: usize,
    /// How much of the critical path the text report lists.
    #[arg(long, value_enum, default_value = "summary", value_name = "HOW")]
    pub critical_path: CriticalPathArg,
    /// The systemd unit whose chain of units to show, as `systemd-analyze critical-chain
    /// UNIT` (a boot's trace); by default the unit the recording waited for.
    #[arg(long, value_name = "UNIT")]
    pub chain_to: Option<String>,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let trace = super::read_trace(&args.trace)?;
    let mut analysis = coldstart_analyze::analyze(&trace);
    if let Some(unit) = &args.chain_to {
        analysis.unit_chain =
            Some(coldstart_analyze::chain_to(&analysis.units, unit).with_context(|| {
                format!("no unit {unit} became active in this trace ({} units did)", analysis.units.len())
            })?);
    }
    let diagnosis = super::doctor::for_report(&trace, &analysis, &args.trace);
    let timeline = (args.format == FormatArg::Html).then(|| coldstart_report::html::Timeline::new(&trace));
    let chart = if args.format == FormatArg::Svg {
        let mut svg = Vec::new();
        coldstart_report::svg::write(&trace, &analysis, &Default::default(), &mut svg)
            .context("cannot draw the chart")?;
        Some(svg)
    } else if args.format == FormatArg::Flamegraph {
        let mut svg = Vec::new();
        let title = format!("CPU samples of {}", trace.meta.command.join(" "));
        coldstart_report::flamegraph::write(&trace, &Default::default(), &title, &mut svg)
            .context("cannot draw the flame graph")?;
        Some(svg)
    } else {
        None
    };
    drop(trace);
    let mut out = super::output(args.output.as_ref())?;
    match args.format {
        FormatArg::Text => {
            let path = match args.critical_path {
                CriticalPathArg::Summary => coldstart_report::text::PathDetail::Summary,
                CriticalPathArg::Full => coldstart_report::text::PathDetail::Full,
            };
            let options = coldstart_report::text::Options { top: args.top, path };
            coldstart_report::text::report_with_findings(&analysis, Some(&diagnosis), &options, &mut out)
        }
        FormatArg::Json => coldstart_report::json::write_with_doctor(&analysis, &diagnosis, &mut out),
        FormatArg::Html => {
            coldstart_report::html::write(&analysis, timeline.as_ref(), Some(&diagnosis), &mut out)
        }
        FormatArg::Svg | FormatArg::Flamegraph => out.write_all(chart.as_deref().unwrap_or_default()),
    }
    .and_then(|()| out.flush())
    .context("cannot write the report")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use crate::cmd::test_traces::{busy, fixture};

    /// The report's header: its lines up to the first blank line.
    fn header(trace: &coldstart_trace::Trace) -> String {
        let mut out = Vec::new();
        coldstart_report::text::report(&coldstart_analyze::analyze(trace), &Default::default(), &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        text.split("\n\n").next().unwrap().to_owned()
    }

    #[test]
    fn the_header_of_a_quiet_start() {
        let text = header(&fixture("soffice"));
        assert!(text.contains("Other work    processes outside the recording read"), "{text}");
        // A virtio disk the kernel flags rotational, answering like flash.
        assert!(
            text.contains(
                "Disk          vda 254:0; kernel flag: rotational; measured: like an SSD (median read"
            ),
            "{text}"
        );
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_header_says_the_machine_was_busy_and_what_to_do() {
        let text = header(&busy(fixture("soffice")));
        assert!(text.contains("BUSY MACHINE  processes outside the recording read"), "{text}");
        assert!(text.contains("(tracker-miner-f/4242 64.0 MiB"), "{text}");
        assert!(text.contains("the times are inflated by that work"), "{text}");
        insta::assert_snapshot!(text);
    }
}
