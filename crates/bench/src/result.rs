//! The results of a benchmark, as exported to JSON: per configuration a superset
//! of hyperfine's result fields, plus comparisons. JSON is the stable contract:
//! every time is in seconds, every size in bytes; the field docs below are the reference.

use coldstart_analyze::units;
use coldstart_launch::{Reason, Until};
use coldstart_trace::CacheState;
use serde::{Deserialize, Serialize};

use crate::config::{BenchConfig, Cache, Evict, PrefetchSetup};
use crate::executor::{Preparation, Run};
use crate::outside::OutsideTotal;
use crate::stats::{self, Summary};

/// Version of the JSON layout; bumped on incompatible changes.
pub const SCHEMA: &str = "coldstart-bench/1";

/// A measured run that stands out, and the likeliest reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Outlier {
    /// Index into `times` (0-based).
    pub run: usize,
    pub time: f64,
    pub reason: String,
}

/// One configuration (a command in one cache state).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigResult {
    // hyperfine's fields, same names and units (seconds).
    pub command: String,
    pub mean: f64,
    pub stddev: Option<f64>,
    pub median: f64,
    /// Mean user CPU seconds (of the whole process tree).
    pub user: f64,
    /// Mean system CPU seconds (of the whole process tree).
    pub system: f64,
    pub min: f64,
    pub max: f64,
    pub times: Vec<f64>,
    pub exit_codes: Vec<Option<i32>>,
    // coldstart's.
    /// The short label of the terminal summary: the cache state (`cold`, `alongside`,
    /// `ahead`, `warm`), after the command's name when there are several or it was named.
    #[serde(default)]
    pub label: String,
    pub command_line: Vec<String>,
    /// `cold` or `warm`.
    pub cache: CacheState,
    /// The eviction method of cold runs: `system` or `files`.
    pub evict: Option<Evict>,
    /// The readiness conditions, e.g. `exit`, `mark:ready`, `wm and window:mate-panel`.
    pub until: String,
    /// 95% confidence interval of the mean, seconds.
    pub mean_ci95: [f64; 2],
    /// Why each run's wait ended, in the words of `until`.
    pub ready: Vec<Reason>,
    pub user_times: Vec<f64>,
    pub system_times: Vec<f64>,
    pub major_faults: Vec<u64>,
    pub read_bytes: Vec<Option<u64>>,
    pub io_wait: Vec<Option<f64>>,
    pub other_cpu: Vec<Option<f64>>,
    pub residual_bytes: Vec<Option<u64>>,
    pub median_major_faults: Option<f64>,
    pub median_read_bytes: Option<f64>,
    pub median_io_wait: Option<f64>,
    pub outliers: Vec<Outlier>,
    /// Runs measured but not counted (`--discard-first`).
    pub discarded: usize,
    /// `alongside` or `ahead` for cold runs with a prefetch plan (`--prefetch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefetch: Option<String>,
    /// The name of the plan of runs with prefetch (see [`BenchResults::plans`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    /// Per run with prefetch: seconds the replay took (for `ahead`, before the start, not
    /// in `times`; for `alongside`, until it finished or was stopped at readiness).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefetch_times: Vec<Option<f64>>,
    /// Per run with prefetch: bytes the replay brought into the page cache.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefetch_fetched_bytes: Vec<Option<u64>>,
    /// Per run with prefetch alongside: whether the replay was done when the command was ready.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prefetch_done_before_ready: Vec<Option<bool>>,
}

/// One comparison of two configurations: `a` against `b`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// `commands` (same cache state), `cold_vs_warm` (the cold penalty), `evict` (files vs
    /// system), `prefetch` (a plan's runs vs the cold runs), `prefetch_vs_warm`, or `plans`
    /// (one plan's runs vs another's, same replay mode).
    pub kind: String,
    pub a: String,
    pub b: String,
    /// mean(a) / mean(b), with its 95% confidence interval.
    pub ratio: f64,
    pub ratio_ci95: [f64; 2],
    /// mean(a) − mean(b), seconds, with its 95% confidence interval.
    pub difference: f64,
    pub difference_ci95: [f64; 2],
    /// median(a) − median(b), seconds.
    pub median_difference: f64,
    /// median(a) / median(b), with a 95% bootstrap confidence interval (2000
    /// resamples of each side, fixed seed).
    #[serde(default)]
    pub median_ratio: f64,
    #[serde(default)]
    pub median_ratio_ci95: [f64; 2],
    /// Paired by round (both configurations have one run per round): the geometric
    /// mean of the per-round ratios a/b, its 95% confidence interval and the p-value
    /// of a paired t-test on their logarithms. Round-to-round drift of the machine
    /// cancels, so this is the interval to judge a small difference by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_ratio_ci95: Option<[f64; 2]>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paired_p: Option<f64>,
    /// Two-sided p-value of Welch's t-test; `significant` when below 0.05.
    pub p: f64,
    pub significant: bool,
    /// median read bytes of a − of b.
    pub read_bytes_difference: Option<f64>,
    /// When not significant: the runs of each configuration a Welch t-test would need to
    /// resolve a difference of the size seen at the noise seen (80 % power, α = 0.05).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs_to_resolve: Option<usize>,
}

/// What eviction did for one command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandPreparation {
    /// The command's name (`--name`, else its command line).
    pub command: String,
    #[serde(default)]
    pub command_line: Vec<String>,
    /// Its `--prepare` shell command, run before each of its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    /// Its `--conclude` shell command, run after each of its runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclude: Option<String>,
    #[serde(flatten)]
    pub preparation: Preparation,
}

/// A prefetch plan measured (`--prefetch [NAME=]PLAN`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlanInfo {
    /// Its name in labels (`plan NAME alongside`): given, or the file's stem.
    pub name: String,
    pub path: String,
}

impl PlanInfo {
    pub fn of(setup: &PrefetchSetup) -> PlanInfo {
        PlanInfo { name: setup.name.clone(), path: setup.plan.display().to_string() }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BenchResults {
    pub schema: String,
    pub results: Vec<ConfigResult>,
    pub comparisons: Vec<Comparison>,
    pub preparations: Vec<CommandPreparation>,
    /// The prefetch plans measured, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plans: Vec<PlanInfo>,
    /// The processes outside the benchmarked commands that used the CPU during the measured
    /// runs, each summed over the runs it was seen in, most first (CPU seconds).
    #[serde(default, rename = "outside_processes")]
    pub outside: Vec<OutsideTotal>,
    /// Where `read_bytes` comes from, e.g. `blkio cgroup (the command's tree)` or
    /// `/proc/diskstats (whole machine)`.
    pub read_bytes_source: String,
    /// Where `io_wait` comes from, or why it is missing.
    pub io_wait_source: String,
    /// What the eviction methods used cannot evict.
    pub notes: Vec<String>,
    /// True when SIGINT/SIGTERM stopped the benchmark early (results are partial).
    pub interrupted: bool,
}

fn median_of<T: Copy + Into<f64>>(values: impl Iterator<Item = Option<T>>) -> Option<f64> {
    let xs: Vec<f64> = values.flatten().map(Into::into).collect();
    (!xs.is_empty()).then(|| stats::median(&xs))
}

/// The likeliest reason a run stands out, from the counters measured with it.
pub fn outlier_reason(run: &Run, index: usize, runs: &[Run], summary: &Summary) -> String {
    let slow = run.time > summary.median;
    let median_bytes = median_of(runs.iter().map(|r| r.read_bytes.map(|b| b as f64)));
    if !run.met {
        return format!("readiness not reached (ended by {})", run.ready);
    }
    if let Some(other) = run.other_cpu
        && slow
        && other > 0.25
    {
        let most = run.outside.first().map_or(String::new(), |p| {
            format!(", most for {} ({} of CPU)", p.describe(), units::duration((p.cpu * 1e9) as i64))
        });
        return format!(
            "machine busy: {:.0}% of the CPUs worked for other processes during the run{most}",
            other * 100.0
        );
    }
    if let (Some(bytes), Some(median)) = (run.read_bytes, median_bytes) {
        let bytes = bytes as f64;
        if slow && bytes > 1.5 * median + 1e6 {
            return format!(
                "read {} from disk against a median of {}",
                units::bytes(bytes as u64),
                units::bytes(median as u64)
            );
        }
        if !slow && bytes + 1e6 < 0.5 * median {
            return format!(
                "read only {} from disk against a median of {} (pages left cached)",
                units::bytes(bytes as u64),
                units::bytes(median as u64)
            );
        }
    }
    if index == 0 && slow {
        return "first run of the configuration (caches outside the evicted set were still cold)".into();
    }
    "no counter explains it (scheduling noise)".into()
}

impl ConfigResult {
    pub fn build(
        config: &BenchConfig,
        command: usize,
        cache: Cache,
        runs: &[Run],
        discarded: usize,
    ) -> ConfigResult {
        let times: Vec<f64> = runs.iter().map(|r| r.time).collect();
        let s = stats::summarize(&times);
        let outliers = stats::outliers(&times)
            .into_iter()
            .map(|i| Outlier { run: i, time: times[i], reason: outlier_reason(&runs[i], i, runs, &s) })
            .collect();
        let user_times: Vec<f64> = runs.iter().map(|r| r.user).collect();
        let system_times: Vec<f64> = runs.iter().map(|r| r.system).collect();
        ConfigResult {
            command: config.label(command, cache),
            label: config.short_label(command, cache),
            mean: s.mean,
            stddev: (s.n >= 2).then_some(s.stddev),
            median: s.median,
            user: stats::mean(&user_times),
            system: stats::mean(&system_times),
            min: s.min,
            max: s.max,
            exit_codes: runs.iter().map(|r| r.exit_code).collect(),
            command_line: config.commands[command].argv.clone(),
            cache: cache.state(),
            evict: cache.evict(),
            until: Until::describe_all(&config.until),
            mean_ci95: [s.ci95.0, s.ci95.1],
            ready: runs.iter().map(|r| r.ready.clone()).collect(),
            major_faults: runs.iter().map(|r| r.major_faults).collect(),
            read_bytes: runs.iter().map(|r| r.read_bytes).collect(),
            io_wait: runs.iter().map(|r| r.io_wait).collect(),
            other_cpu: runs.iter().map(|r| r.other_cpu).collect(),
            residual_bytes: runs.iter().map(|r| r.residual_bytes).collect(),
            median_major_faults: median_of(runs.iter().map(|r| Some(r.major_faults as f64))),
            median_read_bytes: median_of(runs.iter().map(|r| r.read_bytes.map(|b| b as f64))),
            median_io_wait: median_of(runs.iter().map(|r| r.io_wait)),
            outliers,
            discarded,
            prefetch: cache.prefetch().map(str::to_owned),
            plan: cache.plan().and_then(|p| config.prefetch.get(p)).map(|p| p.name.clone()),
            prefetch_times: if cache.prefetch().is_some() {
                runs.iter().map(|r| r.prefetch_time).collect()
            } else {
                Vec::new()
            },
            prefetch_fetched_bytes: if cache.prefetch().is_some() {
                runs.iter().map(|r| r.prefetch_fetched_bytes).collect()
            } else {
                Vec::new()
            },
            prefetch_done_before_ready: if matches!(cache, Cache::Alongside(..)) {
                runs.iter().map(|r| r.prefetch_done_before_ready).collect()
            } else {
                Vec::new()
            },
            times,
            user_times,
            system_times,
        }
    }
}

/// `a` against `b`; `None` with fewer than two runs on either side.
pub fn compare(kind: &str, a: &ConfigResult, b: &ConfigResult) -> Option<Comparison> {
    let r = stats::ratio(&a.times, &b.times)?;
    let w = stats::welch(&a.times, &b.times)?;
    let (median_ratio, median_ci) = stats::median_ratio(&a.times, &b.times)?;
    let paired = stats::paired_ratio(&a.times, &b.times);
    Some(Comparison {
        kind: kind.into(),
        a: a.command.clone(),
        b: b.command.clone(),
        ratio: r.ratio,
        ratio_ci95: [r.ci95.0, r.ci95.1],
        difference: w.difference,
        difference_ci95: [w.ci95.0, w.ci95.1],
        median_difference: a.median - b.median,
        median_ratio,
        median_ratio_ci95: [median_ci.0, median_ci.1],
        paired_ratio: paired.map(|p| p.ratio),
        paired_ratio_ci95: paired.map(|p| [p.ci95.0, p.ci95.1]),
        paired_p: paired.map(|p| p.p),
        p: w.p,
        significant: w.p < 0.05,
        read_bytes_difference: a.median_read_bytes.zip(b.median_read_bytes).map(|(x, y)| x - y),
        runs_to_resolve: if w.p < 0.05 {
            None
        } else {
            stats::runs_to_resolve(w.difference, a.stddev.unwrap_or(0.0), b.stddev.unwrap_or(0.0))
        },
    })
}

/// The comparisons worth printing: every command against the first in the same
/// cache state, cold against warm for each command, `files` against `system`, and
/// with `--prefetch`, each plan's runs (alongside, ahead) against the cold start without
/// it (`prefetch`), against the warm start (`prefetch_vs_warm`) and against the earlier
/// plans' runs of the same mode (`plans`).
pub fn comparisons(
    config: &BenchConfig,
    results: &[ConfigResult],
    keys: &[(usize, Cache)],
) -> Vec<Comparison> {
    let find =
        |command: usize, cache: Cache| keys.iter().position(|&k| k == (command, cache)).map(|i| &results[i]);
    type Configuration = (usize, Cache);
    let mut pairs: Vec<(&str, Configuration, Configuration)> = Vec::new();
    for &(command, cache) in keys.iter().filter(|(c, _)| *c > 0) {
        pairs.push(("commands", (command, cache), (0, cache)));
    }
    for command in 0..config.commands.len() {
        for &evict in &config.evict {
            pairs.push(("cold_vs_warm", (command, Cache::Cold(evict)), (command, Cache::Warm)));
        }
        pairs.push(("evict", (command, Cache::Cold(Evict::Files)), (command, Cache::Cold(Evict::System))));
        for &evict in &config.evict {
            pairs.extend(
                prefetch_pairs(config, evict)
                    .into_iter()
                    .map(|(kind, a, b)| (kind, (command, a), (command, b))),
            );
        }
    }
    pairs.into_iter().filter_map(|(kind, a, b)| compare(kind, find(a.0, a.1)?, find(b.0, b.1)?)).collect()
}

/// The comparisons of the runs with prefetch under one eviction method: each plan's
/// alongside and ahead runs against the cold and the warm runs, then each plan against
/// every earlier one, alongside with alongside and ahead with ahead.
fn prefetch_pairs(config: &BenchConfig, evict: Evict) -> Vec<(&'static str, Cache, Cache)> {
    let plans = config.prefetch.len();
    let modes: [fn(Evict, usize) -> Cache; 2] = [Cache::Alongside, Cache::Ahead];
    let mut out = Vec::new();
    for plan in 0..plans {
        for mode in modes {
            out.push(("prefetch", mode(evict, plan), Cache::Cold(evict)));
            out.push(("prefetch_vs_warm", mode(evict, plan), Cache::Warm));
        }
    }
    for mode in modes {
        for later in 1..plans {
            for earlier in 0..later {
                out.push(("plans", mode(evict, later), mode(evict, earlier)));
            }
        }
    }
    out
}
