//! The terminal summary, in the manner of hyperfine: the commands once (with their
//! `--prepare` and `--conclude`), then per configuration (named by its short label) the
//! time to ready with its spread and confidence interval, the counters, the outliers; a
//! table of all configurations relative to the fastest; the comparisons; and, when
//! other processes used enough of the CPUs during the runs, which ones.

use std::fmt::Write;

use coldstart_analyze::units;

use crate::result::{BenchResults, ConfigResult};
use crate::stats;

fn secs(s: f64) -> String {
    if s.abs() < 1.0 { format!("{:.1} ms", s * 1e3) } else { format!("{s:.3} s") }
}

/// Bytes in binary units, the unit system of every other coldstart output.
fn mib(bytes: f64) -> String {
    units::bytes(bytes.max(0.0).round() as u64)
}

fn signed_mib(bytes: f64) -> String {
    format!("{}{}", if bytes < 0.0 { "-" } else { "+" }, mib(bytes.abs()))
}

/// The short label of the configuration exported as `command`, or that name when the
/// results come from a version without labels.
fn label_of<'a>(results: &'a BenchResults, command: &'a str) -> &'a str {
    results
        .results
        .iter()
        .find(|r| r.command == command && !r.label.is_empty())
        .map_or(command, |r| r.label.as_str())
}

fn label(r: &ConfigResult) -> &str {
    if r.label.is_empty() { &r.command } else { &r.label }
}

/// The commands measured, each once: its command line and its name.
fn commands(results: &BenchResults) -> Vec<(String, &str)> {
    results.preparations.iter().map(|p| (p.command_line.join(" "), p.command.as_str())).collect()
}

/// One line per configuration: label, mean ± σ, median, min … max, runs, and the
/// mean relative to the fastest mean (± its propagated relative error), as
/// hyperfine's `--export-markdown` table.
fn table(results: &BenchResults) -> String {
    let rows = &results.results;
    let Some(fastest) = rows.iter().filter(|r| r.mean.is_finite()).min_by(|a, b| a.mean.total_cmp(&b.mean))
    else {
        return String::new();
    };
    let in_ms = rows.iter().all(|r| r.max < 1.0);
    let time = |s: f64| if in_ms { format!("{:.1}", s * 1e3) } else { format!("{s:.3}") };
    let unit = if in_ms { "ms" } else { "s" };
    let relative_error = |r: &ConfigResult| r.stddev.unwrap_or(0.0) / r.mean;
    let mut cells: Vec<[String; 6]> = vec![[
        "".into(),
        format!("mean ± σ [{unit}]"),
        format!("median [{unit}]"),
        format!("min … max [{unit}]"),
        "runs".into(),
        "relative".into(),
    ]];
    for r in rows {
        let ratio = r.mean / fastest.mean;
        let relative = if std::ptr::eq(r, fastest) {
            "1.00".to_owned()
        } else {
            let error = ratio * (relative_error(r).powi(2) + relative_error(fastest).powi(2)).sqrt();
            format!("{ratio:.2} ± {error:.2}")
        };
        cells.push([
            label(r).to_owned(),
            format!("{} ± {}", time(r.mean), time(r.stddev.unwrap_or(0.0))),
            time(r.median),
            format!("{} … {}", time(r.min), time(r.max)),
            r.times.len().to_string(),
            relative,
        ]);
    }
    let widths: Vec<usize> =
        (0..6).map(|i| cells.iter().map(|row| row[i].chars().count()).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &cells {
        let mut line = String::from(" ");
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                let _ = write!(line, " {cell}{}", " ".repeat(pad));
            } else {
                let _ = write!(line, "   {}{cell}", " ".repeat(pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

fn p_value(p: f64) -> String {
    if p < 0.001 { "p < 0.001".into() } else { format!("p = {p:.3}") }
}

/// The commands, each once, and the file sets eviction works on.
fn commands_and_files(results: &BenchResults, out: &mut String) {
    let commands = commands(results);
    for (i, (line, name)) in commands.iter().enumerate() {
        let number = if commands.len() > 1 { format!(" {}", i + 1) } else { String::new() };
        if line.is_empty() || *name == line {
            let _ = writeln!(out, "Command{number}: {name}");
        } else {
            let _ = writeln!(out, "Command{number} ({name}): {line}");
        }
    }
    for p in &results.preparations {
        let whose = if commands.len() > 1 { format!(" of `{}`", p.command) } else { String::new() };
        if let Some(source) = &p.preparation.file_source {
            let _ = writeln!(
                out,
                "Files{whose}: {} files, {} ({source})",
                p.preparation.files,
                mib(p.preparation.file_bytes as f64)
            );
        }
        for note in &p.preparation.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        if let Some(prepare) = &p.prepare {
            let _ = writeln!(out, "Prepare{whose}: {prepare} (before each run, not timed)");
        }
        if let Some(conclude) = &p.conclude {
            let _ = writeln!(out, "Conclude{whose}: {conclude} (after each run, not timed)");
        }
    }
}

/// One configuration: its time, counters, what stayed cached, its replays, its outliers.
fn configuration(number: usize, r: &ConfigResult, out: &mut String) {
    let _ = writeln!(out, "\nBenchmark {number}: {}", label(r));
    let _ = writeln!(
        out,
        "  Time to {} (mean ± σ):  {} ± {}   [95% CI {} … {}]   median {}",
        r.until,
        secs(r.mean),
        secs(r.stddev.unwrap_or(0.0)),
        secs(r.mean_ci95[0]),
        secs(r.mean_ci95[1]),
        secs(r.median)
    );
    let _ = writeln!(
        out,
        "  Range (min … max):  {} … {}   {} runs{}",
        secs(r.min),
        secs(r.max),
        r.times.len(),
        if r.discarded > 0 { format!(" (+{} discarded)", r.discarded) } else { String::new() }
    );
    let mut counters = format!("  CPU user {}, system {}", secs(r.user), secs(r.system));
    if let Some(f) = r.median_major_faults {
        let _ = write!(counters, "; major faults {f:.0}");
    }
    if let Some(b) = r.median_read_bytes {
        let _ = write!(counters, "; read {}", mib(b));
    }
    if let Some(w) = r.median_io_wait {
        let _ = write!(counters, "; I/O wait {}", secs(w));
    }
    let _ = writeln!(out, "{counters} (medians)");
    let residual: Vec<u64> = r.residual_bytes.iter().flatten().copied().collect();
    if let Some(max) = residual.iter().max().filter(|&&m| m > 0) {
        let _ = writeln!(
            out,
            "  Left cached after eviction: up to {} of the file set and its filesystems' metadata",
            mib(*max as f64)
        );
    }
    if r.prefetch.is_some() {
        let _ = writeln!(out, "{}", replays(r));
    }
    for o in &r.outliers {
        let _ = writeln!(out, "  Outlier: run {} took {}: {}", o.run + 1, secs(o.time), o.reason);
    }
}

/// What the replays of a configuration with prefetch did.
fn replays(r: &ConfigResult) -> String {
    let times: Vec<f64> = r.prefetch_times.iter().flatten().copied().collect();
    let bytes: Vec<f64> = r.prefetch_fetched_bytes.iter().flatten().map(|&b| b as f64).collect();
    let done = r.prefetch_done_before_ready.iter().flatten().filter(|&&d| d).count();
    let mut line = format!(
        "  Prefetch {}: replay {} and {} fetched (medians)",
        r.prefetch.as_deref().unwrap_or_default(),
        if times.is_empty() { "?".into() } else { secs(stats::median(&times)) },
        if bytes.is_empty() { "?".into() } else { mib(stats::median(&bytes)) }
    );
    if !r.prefetch_done_before_ready.is_empty() {
        let _ = write!(line, "; done before ready in {done} of {} runs", r.prefetch_done_before_ready.len());
    }
    line
}

/// One line per comparison, with its paired interval when the runs were paired.
fn comparisons(results: &BenchResults, out: &mut String) {
    if !results.comparisons.is_empty() {
        let _ = writeln!(out, "\nComparisons:");
    }
    for c in &results.comparisons {
        let sig = match (c.significant, c.runs_to_resolve) {
            (true, _) => String::new(),
            (false, Some(n)) => format!(
                " (not significant; about {n} runs each would resolve a {:.3} s difference at this noise)",
                c.difference.abs()
            ),
            (false, None) => " (not significant)".to_owned(),
        };
        let bytes = c.read_bytes_difference.map_or(String::new(), |b| format!(", {} read", signed_mib(b)));
        let (a, b) = (label_of(results, &c.a), label_of(results, &c.b));
        let head = match c.kind.as_str() {
            "cold_vs_warm" => format!("  cold penalty, {a} vs {b}: {:+.3} s", c.difference),
            _ => format!("  {a} vs {b}: {:+.3} s", c.difference),
        };
        let _ = writeln!(
            out,
            "{head} [95% CI {:+.3} … {:+.3}]{bytes}; {:.2}× [{:.2} … {:.2}], {}{sig}",
            c.difference_ci95[0],
            c.difference_ci95[1],
            c.ratio,
            c.ratio_ci95[0],
            c.ratio_ci95[1],
            p_value(c.p)
        );
        if c.kind.starts_with("prefetch") || c.kind == "evict" || c.kind == "plans" {
            let _ = writeln!(
                out,
                "    ratio of medians {:.3}× [95% bootstrap CI {:.3} … {:.3}]",
                c.median_ratio, c.median_ratio_ci95[0], c.median_ratio_ci95[1]
            );
        }
        if let (Some(r), Some([lo, hi]), Some(p)) = (c.paired_ratio, c.paired_ratio_ci95, c.paired_p) {
            let _ = writeln!(
                out,
                "    paired by round: {r:.3}× [95% CI {lo:.3} … {hi:.3}], {} (geometric mean of per-round ratios)",
                p_value(p)
            );
        }
    }
}

/// Median share of the CPUs that worked outside the command's tree in a run, above which
/// the summary names the processes that did.
const OTHER_WORK_SHOWN: f64 = 0.02;
/// The share in any one run above which they are named too.
const OTHER_WORK_RUN_SHOWN: f64 = 0.10;
/// The median share above which the machine counts as busy (the recorder's rule).
const BUSY_SHARE: f64 = 0.10;
/// Outside processes listed.
const OUTSIDE_LISTED: usize = 5;

/// What processes outside the benchmark did with the CPU during the runs, when it is
/// enough to matter: the share of the CPUs (median and the busiest run) and the
/// processes that used most, each with its command line and parents.
fn other_work(results: &BenchResults, out: &mut String) {
    let mut shares: Vec<(f64, usize, &str)> = Vec::new();
    for r in &results.results {
        shares.extend(r.other_cpu.iter().enumerate().filter_map(|(i, s)| Some(((*s)?, i + 1, label(r)))));
    }
    let all: Vec<f64> = shares.iter().map(|s| s.0).collect();
    let Some(&(most, run, of)) = shares.iter().rev().max_by(|a, b| a.0.total_cmp(&b.0)) else { return };
    let median = stats::median(&all);
    if median < OTHER_WORK_SHOWN && most < OTHER_WORK_RUN_SHOWN {
        return;
    }
    let head = if median >= BUSY_SHARE { "BUSY MACHINE" } else { "Other work" };
    let _ = writeln!(
        out,
        "\n{head}: processes outside the benchmarked commands used {:.1}% of the CPUs during the runs (median of \
         {} runs; at most {:.0}%, in run {run} of {of})",
        median * 100.0,
        all.len(),
        most * 100.0
    );
    if median >= BUSY_SHARE {
        let _ = writeln!(out, "  the times are inflated by that work: benchmark again on a quiet machine");
    }
    for total in results.outside.iter().take(OUTSIDE_LISTED) {
        let p = &total.process;
        let children = if p.children_cpu > 0.0 {
            format!(", {} of it by children that exited", secs(p.children_cpu))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  {} CPU in {} of {} runs{children}: {}",
            secs(p.cpu),
            total.runs,
            all.len(),
            p.describe()
        );
    }
}

pub fn render(results: &BenchResults) -> String {
    let mut out = String::new();
    commands_and_files(results, &mut out);
    for (i, r) in results.results.iter().enumerate() {
        configuration(i + 1, r, &mut out);
    }
    if results.results.len() > 1 {
        let _ = writeln!(out, "\nSummary (time to {}):", results.results[0].until);
        out.push_str(&table(results));
    }
    comparisons(results, &mut out);
    other_work(results, &mut out);
    let _ =
        writeln!(out, "\nBytes read: {}. I/O wait: {}.", results.read_bytes_source, results.io_wait_source);
    for note in &results.notes {
        let _ = writeln!(out, "Note: {note}");
    }
    if results.interrupted {
        let _ = writeln!(out, "INTERRUPTED: the results above are partial.");
    }
    out
}
