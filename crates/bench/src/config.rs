//! What to benchmark and how: the plain configuration the CLI builds (clap types
//! never reach this crate).

use std::path::PathBuf;
use std::time::Duration;

use coldstart_launch::{Ending, RunAs, Until};
use coldstart_prefetch::ReplayOptions;
use coldstart_trace::CacheState;
use serde::{Deserialize, Serialize};

/// How a cold run's page cache is emptied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evict {
    /// `sync` and `echo 3 > /proc/sys/vm/drop_caches`: the whole page cache, dentries
    /// and inodes (root only).
    System,
    /// `posix_fadvise(DONTNEED)`, twice, on each file the command uses (any user who
    /// can read the files).
    Files,
}

impl Evict {
    pub fn name(self) -> &'static str {
        match self {
            Evict::System => "system",
            Evict::Files => "files",
        }
    }
}

/// The eviction methods asked for; `Auto` picks `System` as root, else `Files`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvictChoice {
    Auto,
    Only(Evict),
}

/// The page-cache state a configuration runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "cache", content = "evict")]
pub enum Cache {
    Cold(Evict),
    /// Cold, with prefetch plan number `.1` (of [`BenchConfig::prefetch`]) replayed
    /// alongside the start.
    Alongside(Evict, usize),
    /// Cold, with prefetch plan number `.1` replayed to its end before the start.
    Ahead(Evict, usize),
    Warm,
}

impl Cache {
    pub fn is_cold(self) -> bool {
        !matches!(self, Cache::Warm)
    }

    /// Cold or warm: what the runs begin with, with or without prefetch.
    pub fn state(self) -> CacheState {
        if self.is_cold() { CacheState::Cold } else { CacheState::Warm }
    }

    /// The eviction of a cold run (with or without prefetch).
    pub fn evict(self) -> Option<Evict> {
        match self {
            Cache::Cold(e) | Cache::Alongside(e, _) | Cache::Ahead(e, _) => Some(e),
            Cache::Warm => None,
        }
    }

    /// `alongside` or `ahead` for runs with prefetch.
    pub fn prefetch(self) -> Option<&'static str> {
        match self {
            Cache::Alongside(..) => Some("alongside"),
            Cache::Ahead(..) => Some("ahead"),
            Cache::Cold(_) | Cache::Warm => None,
        }
    }

    /// The number of the plan replayed in runs with prefetch.
    pub fn plan(self) -> Option<usize> {
        match self {
            Cache::Alongside(_, plan) | Cache::Ahead(_, plan) => Some(plan),
            Cache::Cold(_) | Cache::Warm => None,
        }
    }
}

/// One `--prefetch [NAME=]PLAN`: cold runs are also measured with the plan replayed
/// alongside the start and before it.
#[derive(Clone, Debug, PartialEq)]
pub struct PrefetchSetup {
    /// The plan's name in labels: given (`NAME=PLAN`), else the file's stem.
    pub name: String,
    /// Whether the name was given (a lone plan named by its stem keeps the labels
    /// `alongside` and `ahead`, so earlier exports stay comparable).
    pub named: bool,
    pub plan: PathBuf,
    pub options: ReplayOptions,
}

impl PrefetchSetup {
    /// A plan named by its file's stem (`app` for `/tmp/app.plan`).
    pub fn new(plan: PathBuf, options: ReplayOptions) -> PrefetchSetup {
        let name =
            plan.file_stem().map_or_else(|| plan.display().to_string(), |s| s.to_string_lossy().into());
        PrefetchSetup { name, named: false, plan, options }
    }

    pub fn named(name: &str, plan: PathBuf, options: ReplayOptions) -> PrefetchSetup {
        PrefetchSetup { name: name.to_owned(), named: true, plan, options }
    }
}

/// Where the file set of `--evict files` comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileSource {
    /// The files table of a coldstart trace (`--trace`).
    Trace(PathBuf),
    /// A list, one path per line (`--files`).
    List(PathBuf),
    /// Learned by a first, traced run of each command.
    Learn,
}

/// One command to benchmark.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BenchCommand {
    /// The label in results (`--name`, else the command line).
    pub name: String,
    pub argv: Vec<String>,
    /// A shell command run before each of its runs, outside the timing and before
    /// eviction (`--prepare`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prepare: Option<String>,
    /// A shell command run after each of its runs, outside the timing (`--conclude`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conclude: Option<String>,
}

impl BenchCommand {
    pub fn new(argv: Vec<String>) -> BenchCommand {
        BenchCommand { name: argv.join(" "), argv, ..BenchCommand::default() }
    }

    /// Its `--prepare` or `--conclude` command line, if it has one.
    pub fn hook(&self, hook: Hook) -> Option<&str> {
        match hook {
            Hook::Prepare => self.prepare.as_deref(),
            Hook::Conclude => self.conclude.as_deref(),
        }
    }

    pub fn line(&self) -> String {
        self.argv.join(" ")
    }

    /// Whether `--name` named it (otherwise its name is its command line).
    pub fn is_named(&self) -> bool {
        self.name != self.line()
    }
}

/// A shell command run around each run, outside the timing, as hyperfine's options of
/// the same names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Hook {
    /// `--prepare`: before the run, before its eviction.
    Prepare,
    /// `--conclude`: after the run, once its tree has ended.
    Conclude,
}

impl Hook {
    /// The option that gives it.
    pub fn option(self) -> &'static str {
        match self {
            Hook::Prepare => "--prepare",
            Hook::Conclude => "--conclude",
        }
    }
}

/// Which cache states to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Modes {
    pub cold: bool,
    pub warm: bool,
}

#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub commands: Vec<BenchCommand>,
    pub modes: Modes,
    /// Cold eviction methods, each a configuration of its own (interleaved).
    pub evict: Vec<Evict>,
    /// Measured runs per configuration.
    pub runs: usize,
    /// Unmeasured warm runs of each command before the measured ones.
    pub warmup: usize,
    /// Run each configuration once more and drop its first run.
    pub discard_first: bool,
    pub files: FileSource,
    /// Readiness conditions: a run is ready when all are met.
    pub until: Vec<Until>,
    /// Limit per run; a run that hits it is a failed run.
    pub timeout: Duration,
    pub ending: Ending,
    pub run_as: RunAs,
    /// Copy the commands' output to ours (otherwise it is discarded).
    pub show_output: bool,
    /// Keep going when a command fails (non-zero exit or readiness not reached).
    pub ignore_failure: bool,
    /// Measure cold starts with each of these prefetch plans too.
    pub prefetch: Vec<PrefetchSetup>,
    /// Called after each cold run's eviction: `--storage` on a lazily fetched volume restores
    /// it from its snapshot again, so that every cold run reads each chunk for the first time.
    pub after_eviction: Option<AfterEviction>,
}

/// A step run after each cold run's eviction (see [`BenchConfig::after_eviction`]).
#[derive(Clone)]
pub struct AfterEviction(pub std::sync::Arc<dyn Fn() + Send + Sync>);

impl std::fmt::Debug for AfterEviction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterEviction")
    }
}

impl BenchConfig {
    /// The configurations, in the order of a round: per command, its cold
    /// configurations (each eviction without prefetch, then with each `--prefetch` plan
    /// alongside and ahead) then its warm one (so a warm run follows a run of the same
    /// command).
    pub fn configurations(&self) -> Vec<(usize, Cache)> {
        let mut out = Vec::new();
        for i in 0..self.commands.len() {
            if self.modes.cold {
                for &e in &self.evict {
                    out.push((i, Cache::Cold(e)));
                    for plan in 0..self.prefetch.len() {
                        out.extend([(i, Cache::Alongside(e, plan)), (i, Cache::Ahead(e, plan))]);
                    }
                }
            }
            if self.modes.warm {
                out.push((i, Cache::Warm));
            }
        }
        out
    }

    /// The name of plan `plan` in labels (`plan NAME alongside`); `None` for a lone plan
    /// named by its file, whose runs keep the labels from before several plans could be
    /// given (`alongside`, `prefetch alongside`).
    fn plan_label(&self, plan: usize) -> Option<&str> {
        match &self.prefetch[..] {
            [only] if !only.named => None,
            plans => Some(plans.get(plan).map_or("?", |p| p.name.as_str())),
        }
    }

    /// The label of a configuration: the command's name, with the cache state when
    /// several states are measured (and the eviction method when several are).
    pub fn label(&self, command: usize, cache: Cache) -> String {
        let name = &self.commands[command].name;
        let both = self.modes.cold && self.modes.warm;
        let evict = |e: Evict| if self.evict.len() > 1 { format!(", {}", e.name()) } else { String::new() };
        match cache {
            Cache::Alongside(e, plan) | Cache::Ahead(e, plan) => {
                let mode = cache.prefetch().unwrap_or_default();
                match self.plan_label(plan) {
                    Some(plan) => format!("{name} (cold{}, plan {plan} {mode})", evict(e)),
                    None => format!("{name} (cold{}, prefetch {mode})", evict(e)),
                }
            }
            Cache::Cold(e) if self.evict.len() > 1 => format!("{name} (cold, {})", e.name()),
            Cache::Cold(_) if !self.prefetch.is_empty() => format!("{name} (cold)"),
            Cache::Cold(_) if both => format!("{name} (cold)"),
            Cache::Warm if both => format!("{name} (warm)"),
            _ => name.clone(),
        }
    }

    /// The short label of a configuration in the terminal summary: its cache state
    /// (`cold`, `alongside`, `ahead` — `plan NAME alongside` … with several or named
    /// plans —, `warm`, with the eviction method when several are measured), after the
    /// command's name when there are several commands or `--name` named it, so a long
    /// command line is printed once, not on every line.
    pub fn short_label(&self, command: usize, cache: Cache) -> String {
        let several_states = self.configurations().iter().filter(|(c, _)| *c == command).count() > 1;
        let state = {
            let word = match cache {
                Cache::Cold(_) => "cold".to_owned(),
                Cache::Alongside(_, plan) | Cache::Ahead(_, plan) => {
                    let mode = cache.prefetch().unwrap_or_default();
                    match self.plan_label(plan) {
                        Some(plan) => format!("plan {plan} {mode}"),
                        None => mode.to_owned(),
                    }
                }
                Cache::Warm => "warm".to_owned(),
            };
            match cache.evict() {
                Some(e) if self.evict.len() > 1 => format!("{word}, {}", e.name()),
                _ => word,
            }
        };
        let named = self.commands.len() > 1 || self.commands[command].is_named();
        match (named, several_states) {
            (false, _) => state,
            (true, true) => format!("{} ({state})", self.commands[command].name),
            (true, false) => self.commands[command].name.clone(),
        }
    }
}

impl Default for BenchConfig {
    fn default() -> BenchConfig {
        BenchConfig {
            commands: Vec::new(),
            modes: Modes { cold: true, warm: false },
            evict: vec![Evict::Files],
            runs: 10,
            warmup: 0,
            discard_first: false,
            files: FileSource::Learn,
            until: vec![Until::Exit],
            timeout: Duration::from_secs(600),
            ending: Ending::default(),
            run_as: RunAs::Invoker,
            show_output: false,
            ignore_failure: false,
            prefetch: Vec::new(),
            after_eviction: None,
        }
    }
}
