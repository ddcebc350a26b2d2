//! `--baseline FILE --max-regression PCT`: is any configuration slower than in a
//! saved run (a coldstart or hyperfine JSON export), beyond the noise?
//!
//! A configuration regresses when both hold: its median is more than PCT percent
//! above the baseline's median, and Welch's t-test says its runs are slower than the
//! baseline's runs (the 95% confidence interval of the ratio of means lies above 1).
//! Configurations are matched by their `command` label.

use std::path::Path;

use serde::Deserialize;

use crate::error::{BenchError, Result};
use crate::result::BenchResults;
use crate::stats;

#[derive(Deserialize)]
struct Saved {
    results: Vec<SavedResult>,
}

#[derive(Deserialize)]
struct SavedResult {
    command: String,
    times: Option<Vec<f64>>,
    median: f64,
}

/// The check of one configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Verdict {
    pub command: String,
    pub baseline_median: f64,
    pub median: f64,
    /// median / baseline median − 1.
    pub change: f64,
    /// 95% confidence interval of the ratio of means, when both sides have runs.
    pub ratio_ci95: Option<(f64, f64)>,
    pub regressed: bool,
}

impl Verdict {
    pub fn describe(&self, max_regression_pct: f64) -> String {
        let ci = self
            .ratio_ci95
            .map_or(String::new(), |(lo, hi)| format!("; ratio of means 95% CI {lo:.3}–{hi:.3}"));
        let verdict = if self.regressed {
            "REGRESSION"
        } else if self.change * 100.0 > max_regression_pct {
            "slower, within the noise"
        } else {
            "ok"
        };
        format!(
            "{verdict}: {}: median {:.3} s against {:.3} s in the baseline ({:+.1}%, limit +{max_regression_pct}%{ci})",
            self.command,
            self.median,
            self.baseline_median,
            self.change * 100.0
        )
    }
}

pub fn check(results: &BenchResults, baseline: &Path, max_regression_pct: f64) -> Result<Vec<Verdict>> {
    let bad = |reason: String| BenchError::Baseline { path: baseline.to_owned(), reason };
    let text = std::fs::read_to_string(baseline).map_err(|e| BenchError::file(baseline, e))?;
    let saved: Saved = serde_json::from_str(&text)
        .map_err(|source| BenchError::BaselineJson { path: baseline.to_owned(), source })?;
    let mut verdicts = Vec::new();
    for r in &results.results {
        let Some(base) = saved.results.iter().find(|b| b.command == r.command) else { continue };
        let change = r.median / base.median - 1.0;
        let ratio = base.times.as_deref().and_then(|t| stats::ratio(&r.times, t)).map(|q| q.ci95);
        let beyond_noise = ratio.is_none_or(|(lo, _)| lo > 1.0);
        verdicts.push(Verdict {
            command: r.command.clone(),
            baseline_median: base.median,
            median: r.median,
            change,
            ratio_ci95: ratio,
            regressed: change * 100.0 > max_regression_pct && beyond_noise,
        });
    }
    if verdicts.is_empty() {
        return Err(bad(
            "no configuration of this run appears in it (configurations are matched by `command`)".into(),
        ));
    }
    Ok(verdicts)
}
