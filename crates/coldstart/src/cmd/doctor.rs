//! `coldstart doctor FILE`: findings with an estimated gain each, ranked, and the
//! predicted time to ready on other storage (docs/doctor.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_analyze::doctor::{DiskClass, DiskParams, DoctorConfig, Languages, WhatIfSpec};
use coldstart_trace::Trace;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    /// Findings for people.
    Text,
    /// The whole analysis as JSON with the diagnosis in its `doctor` field (docs/report-json.md).
    Json,
}

/// Find what slows a cold start down, with the gain of each fix estimated from the
/// trace, and predict the time to ready on other storage.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart doctor app.coldstart
  coldstart doctor app.coldstart --disk hdd          # how long on a hard disk, with and without prefetch
  coldstart doctor app.coldstart --disk custom:request=10ms,seek=0,rotation=0,bandwidth=60MB/s
  coldstart doctor boot.coldstart --disk snapshot    # a first boot from a volume restored from a snapshot
  coldstart doctor app.coldstart --lang de_DE --top 3
  coldstart doctor app.coldstart --format json | jq '.doctor.findings[] | {kind, gain: .gain.ns}'

Findings: many_small_files, file_in_pieces, heavy_helper, work_that_can_wait, read_then_parse,
other_languages, durable_writes, idle_waits, scattered_layout, not_io_bound. Each shows its
evidence, the gain with its arithmetic, a suggestion and a command to verify it. Disk classes:
hdd (5400 rpm), hdd7200, ssd (SATA), nvme, sd, cloud, snapshot (a cloud volume restored from a
snapshot: each chunk's first read costs a fetch), or custom:KEY=VALUE,… with keys request, seek,
near_seek, rotation, far, bandwidth, queue_depth, max_request, fetch_latency, … and base=CLASS;
without --disk the prediction is shown for hdd, ssd and nvme. The model and every threshold:
docs/doctor.md.")]
pub struct Args {
    /// The trace file (from `coldstart record`, best with --cold), or a bootchart2 log (its folder or .tgz).
    pub trace: PathBuf,
    /// Predict the time to ready on this disk: hdd, ssd, nvme, cloud, snapshot, … or custom:KEY=VALUE,… (repeatable).
    #[arg(long, value_name = "CLASS")]
    pub disk: Vec<String>,
    /// Output format.
    #[arg(long, short = 'f', value_enum, default_value = "text")]
    pub format: FormatArg,
    /// Show at most this many findings (all in JSON).
    #[arg(long, value_name = "N")]
    pub top: Option<usize>,
    /// The user's language(s) for the translations finding, e.g. `de_DE` or `fr:en`
    /// [default: LC_ALL, LC_MESSAGES, LANG and LANGUAGE of this environment].
    #[arg(long, value_name = "LANG")]
    pub lang: Option<String>,
    /// Put only this recorded device (MAJ:MIN, e.g. 7:0) on the --disk class; the others keep their measured model.
    #[arg(long, value_name = "MAJ:MIN", requires = "disk")]
    pub only_dev: Option<String>,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "OUT")]
    pub output: Option<PathBuf>,
}

/// The user's languages: `--lang`, else this environment's locale variables, saying which.
pub fn languages(lang: Option<&str>) -> Languages {
    let split = |s: &str| {
        s.split([':', ',']).map(str::trim).filter(|t| !t.is_empty()).map(str::to_owned).collect::<Vec<_>>()
    };
    if let Some(l) = lang {
        return Languages { tags: split(l), source: format!("--lang {l}") };
    }
    fn var(name: &'static str) -> Option<(&'static str, String)> {
        std::env::var(name).ok().filter(|v| !v.is_empty()).map(|v| (name, v))
    }
    let locale = var("LC_ALL").or_else(|| var("LC_MESSAGES")).or_else(|| var("LANG"));
    let untranslated = |v: &str| v == "C" || v == "POSIX" || v.starts_with("C.");
    let mut tags = Vec::new();
    let mut source = Vec::new();
    // GNU gettext ignores LANGUAGE when the locale is C.
    if let Some((name, value)) =
        var("LANGUAGE").filter(|_| locale.as_ref().is_some_and(|(_, v)| !untranslated(v)))
    {
        tags.extend(split(&value));
        source.push(format!("{name}={value}"));
    }
    if let Some((name, value)) = &locale {
        tags.push(value.clone());
        source.push(format!("{name}={value}"));
    }
    if tags.is_empty() {
        return Languages {
            tags: vec!["C".to_owned()],
            source: "no LANG in the environment of coldstart doctor (taken as C)".to_owned(),
        };
    }
    Languages { tags, source: format!("{} of the user running coldstart doctor", source.join(", ")) }
}

fn parse_dev(text: &str) -> anyhow::Result<coldstart_trace::Dev> {
    let (major, minor) = text.split_once(':').context("no colon")?;
    Ok(coldstart_trace::Dev::new(major.trim().parse()?, minor.trim().parse()?))
}

/// The doctor's configuration for a trace at `path`: default thresholds, the user's languages.
pub fn config(path: &std::path::Path, lang: Option<&str>) -> DoctorConfig {
    DoctorConfig {
        languages: languages(lang),
        trace_name: path.display().to_string(),
        ..DoctorConfig::default()
    }
}

/// The diagnosis `coldstart report` shows: the findings, without a what-if.
pub fn for_report(
    trace: &Trace,
    analysis: &coldstart_analyze::Analysis,
    path: &std::path::Path,
) -> coldstart_analyze::doctor::Diagnosis {
    coldstart_analyze::doctor::diagnose(trace, analysis, &config(path, None), &[])
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let only_dev = match &args.only_dev {
        Some(text) => Some(
            parse_dev(text).with_context(|| format!("--only-dev {text}: expected MAJOR:MINOR, e.g. 7:0"))?,
        ),
        None => None,
    };
    let mut disks: Vec<WhatIfSpec> = Vec::new();
    for spec in &args.disk {
        let disk: DiskParams = spec.parse().with_context(|| format!("--disk {spec}"))?;
        disks.push(WhatIfSpec { disk, only_dev });
    }
    if disks.is_empty() {
        disks = [DiskClass::Hdd, DiskClass::Ssd, DiskClass::Nvme]
            .into_iter()
            .map(|class| DiskParams::class_defaults(class).into())
            .collect();
    }
    let trace = super::read_trace(&args.trace)?;
    let analysis = coldstart_analyze::analyze(&trace);
    let config = config(&args.trace, args.lang.as_deref());
    let mut what_if = Vec::with_capacity(disks.len() + 1);
    // The recorded disk's own model first: predicting the recorded start checks the model.
    what_if.extend(coldstart_analyze::doctor::recorded_disk(&analysis).map(WhatIfSpec::from));
    what_if.extend(disks);
    let diagnosis = coldstart_analyze::doctor::diagnose(&trace, &analysis, &config, &what_if);
    drop(trace);
    let mut out = super::output(args.output.as_ref())?;
    match args.format {
        FormatArg::Text => {
            let top = args.top.unwrap_or(usize::MAX);
            coldstart_report::findings::doctor(
                &analysis,
                &diagnosis,
                &args.trace.display().to_string(),
                top,
                &mut out,
            )
        }
        FormatArg::Json => coldstart_report::json::write_with_doctor(&analysis, &diagnosis, &mut out),
    }
    .and_then(|()| out.flush())
    .context("cannot write the diagnosis")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use crate::cmd::test_traces::{busy, fixture};

    /// The diagnosis's header: its lines up to the first blank line.
    fn header(trace: &coldstart_trace::Trace) -> String {
        let analysis = coldstart_analyze::analyze(trace);
        let config = super::config(std::path::Path::new("app.coldstart"), Some("en"));
        let diagnosis = coldstart_analyze::doctor::diagnose(trace, &analysis, &config, &[]);
        let mut out = Vec::new();
        coldstart_report::findings::doctor(&analysis, &diagnosis, "app.coldstart", usize::MAX, &mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        text.split("\n\n").next().unwrap().to_owned()
    }

    #[test]
    fn the_header_of_a_quiet_start() {
        let text = header(&fixture("python"));
        assert!(!text.contains("BUSY"), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_header_says_the_machine_was_busy() {
        let text = header(&busy(fixture("python")));
        assert!(text.contains("BUSY MACHINE: processes outside the recording read 64.3 MiB"), "{text}");
        insta::assert_snapshot!(text);
    }
}
