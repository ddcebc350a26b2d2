//! The terminal summary, in the manner of hyperfine: per configuration the time to
//! ready with its spread and confidence interval, the counters, the outliers; then
//! the comparisons.

use std::fmt::Write;

use crate::result::BenchResults;
use crate::stats;

fn secs(s: f64) -> String {
    if s.abs() < 1.0 { format!("{:.1} ms", s * 1e3) } else { format!("{s:.3} s") }
}

fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

fn p_value(p: f64) -> String {
    if p < 0.001 { "p < 0.001".into() } else { format!("p = {p:.3}") }
}

pub fn render(results: &BenchResults) -> String {
    let mut out = String::new();
    for p in &results.preparations {
        if let Some(source) = &p.preparation.file_source {
            let _ = writeln!(
                out,
                "Files of `{}`: {} files, {} ({source})",
                p.command,
                p.preparation.files,
                mb(p.preparation.file_bytes as f64)
            );
        }
        for note in &p.preparation.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    for (i, r) in results.results.iter().enumerate() {
        let _ = writeln!(out, "\nBenchmark {}: {}", i + 1, r.command);
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
            let _ = write!(counters, "; read {}", mb(b));
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
                mb(*max as f64)
            );
        }
        if r.prefetch.is_some() {
            let times: Vec<f64> = r.prefetch_times.iter().flatten().copied().collect();
            let bytes: Vec<f64> = r.prefetch_fetched_bytes.iter().flatten().map(|&b| b as f64).collect();
            let done = r.prefetch_done_before_ready.iter().flatten().filter(|&&d| d).count();
            let mut line = format!(
                "  Prefetch {}: replay {} and {} fetched (medians)",
                r.prefetch.as_deref().unwrap_or_default(),
                if times.is_empty() { "?".into() } else { secs(stats::median(&times)) },
                if bytes.is_empty() { "?".into() } else { mb(stats::median(&bytes)) }
            );
            if !r.prefetch_done_before_ready.is_empty() {
                let _ = write!(
                    line,
                    "; done before ready in {done} of {} runs",
                    r.prefetch_done_before_ready.len()
                );
            }
            let _ = writeln!(out, "{line}");
        }
        for o in &r.outliers {
            let _ = writeln!(out, "  Outlier: run {} took {}: {}", o.run + 1, secs(o.time), o.reason);
        }
    }
    if !results.comparisons.is_empty() {
        let _ = writeln!(out, "\nComparisons:");
    }
    for c in &results.comparisons {
        let sig = if c.significant { "" } else { " (not significant)" };
        let bytes = c.read_bytes_difference.map_or(String::new(), |b| format!(", {:+.1} MB read", b / 1e6));
        let head = match c.kind.as_str() {
            "cold_vs_warm" => format!("  cold penalty, {} vs {}: {:+.3} s", c.a, c.b, c.difference),
            _ => format!("  {} vs {}: {:+.3} s", c.a, c.b, c.difference),
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
        if c.kind.starts_with("prefetch") || c.kind == "evict" {
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
