//! `coldstart bench`: cold and warm starts of one or more commands, interleaved,
//! with statistics, comparisons, exports and a regression check.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use coldstart_analyze::units::TimeSpan;
use coldstart_bench::export::{CsvExporter, Exporter, JsonExporter, MarkdownExporter};
use coldstart_bench::{
    BenchCommand, BenchConfig, BenchError, Evict, FileSource, Modes, PrefetchSetup, Progress, RealExecutor,
    Step, baseline, evict, run_benchmark, summary,
};
use coldstart_launch::Ending;

use crate::cmd::launch_args::LaunchArgs;
use crate::cmd::values;

/// How long a run may take before it fails, unless `--timeout` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// Benchmark cold and warm starts: real cache eviction with or without root, readiness other than exit.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Examples:
  coldstart bench --both --runs 10 -- python3 -c 'import json'
  coldstart bench -n old -n new -c 'app --old' -c 'app --new' --until mark:ready
  coldstart bench --prepare 'rm -rf /tmp/p && cp -a /tmp/p.seed /tmp/p' --prefetch a.plan --prefetch b.plan -- app

Eviction methods, prefetch, exit statuses and more examples: coldstart bench --help")]
#[command(after_long_help = "\
Examples:
  coldstart bench -- python3 -c 'import json'              # 10 cold runs, evict auto
  coldstart bench --both --runs 5 -- soffice --headless --convert-to pdf doc.txt
  coldstart bench --evict system,files -- python3 -c 'import scipy'   # compare eviction methods
  coldstart bench -c 'app --old' -c 'app --new' --until mark:ready --export-json out.json
  coldstart bench --warm -- ./server ::: ./server-v2     # two commands, interleaved A B A B
  coldstart bench --baseline main.json --max-regression 10 -- ./app   # CI check
  coldstart bench --both --prefetch app.plan -- python3 -c 'import scipy'   # does the plan work?
  coldstart bench --both --prefetch first=a.plan --prefetch disk=b.plan -- app   # two plans compared
  coldstart bench --prepare 'rm -rf /tmp/profile && cp -a /tmp/profile.seed /tmp/profile' -- app --profile /tmp/profile
  sudo coldstart bench --both --storage hdd --prefetch app.plan -- python3 -c 'import scipy'   # on a laptop disk
  sudo coldstart bench --cold --storage snapshot --prefetch app.plan -- app   # each cold run on a fresh restore

Eviction (--evict): `system` syncs and writes 3 to /proc/sys/vm/drop_caches before each cold run
(root), then waits until the disks read under 1 MiB per 200 ms (at most 3 s), so that the other
programs re-reading what it emptied do not compete with the measured start; `files` calls posix_fadvise(DONTNEED) twice on the files the command uses (any user), taken
from --trace FILE (a coldstart trace), --files LIST (one path per line), or learned by a first run
(recorded cold with `coldstart record` as root, else under strace plus /proc sampling); `auto` is
`system` as root, else `files`. Several methods (e.g. `system,files`) are measured as separate,
interleaved configurations, compared by round (the `paired by round` ratio and its 95% CI).

Filesystem metadata under `files`: ext4 caches directory blocks and inode tables in the block
device's page cache, not in the directories' own files, so `files` also advises DONTNEED on the
block devices holding the set, where it may open them (root, or the disk group; every clean
cached block of that filesystem goes, other programs' metadata too, no file data); measured so on
an ext4 image on a loop device, `files` came within 1.4% (python3) and 3.2% (LibreOffice) of
`system`, reading the same bytes. Some VMs refuse
to open their disk even to root: there the metadata stays cached (a note says so), cold starts
under `files` find every path lookup cached, and came out 0-10% faster than under `system` (the
python3 scientific import read about 2100 metadata pages more under `system`). The dentry and
inode caches have no per-file eviction: `files` keeps them (20-40 ms of system CPU for that
import). Nor does `files` evict pages mapped by running processes (libc, libm: `system` keeps
those too), files outside the set, or dirty pages. What stayed cached of the set and its
filesystems' metadata is reported after eviction. See docs/bench-eviction.md and BENCHMARKS.md.

Exit status: 0 success; 1 a configuration regressed beyond --max-regression against --baseline;
2 an error of coldstart (arguments, eviction impossible, a command that cannot start); 3 a
benchmarked command failed (non-zero exit or readiness not reached; see --ignore-failure);
130 interrupted by SIGINT/SIGTERM (the results so far are printed and exported).

Prefetch (--prefetch [NAME=]PLAN, from `coldstart prefetch plan`; repeatable): every cold
configuration is also run with each plan replayed alongside the start (both begin together; the
replay stops when the command is ready) and ahead of it (replayed to its end after eviction, then
the command starts; the replay is not in the time), all in the same interleaved rounds. Each plan's
runs are compared with the cold runs without prefetch, with the warm runs (--both) and with the
other plans' runs of the same mode: ratios of means and of medians, and the ratio paired by round,
with 95% confidence intervals. The JSON export has one result per configuration, its `command`
naming it (`app (cold, plan a alongside)`; a lone plan without NAME= keeps `prefetch alongside`).
--depth, --method, --max-memory and --ioprio set the replays as for `coldstart prefetch run`;
--alongside-mode (auto: paced where the disk ignores I/O priority) sets the alongside runs', and a
note says what each plan's replay found and did.

A fresh state for every run (--prepare CMD, --conclude CMD, as hyperfine's): a program that makes
its profile on its first start is cold and fresh only once; copy a seed before each run instead:
  coldstart bench --prepare 'rm -rf /tmp/profile && cp -a /tmp/profile.seed /tmp/profile' \\
      -- app --profile /tmp/profile
Make the seed once (`cp -a` of a profile as the program left it, or an empty directory). The copy
is written before the run's eviction: `system` syncs it to disk and evicts it; `files` syncs first
too, then evicts the file set.")]
#[command(mut_arg("timeout", |arg| arg.help(timeout_help())))]
#[command(mut_arg("until", |arg| arg.help("When the start is over (exit, mark:NAME, window…)")))]
pub struct Args {
    /// Measure cold starts only (the default).
    #[arg(long, group = "mode")]
    pub cold: bool,
    /// Measure warm starts only.
    #[arg(long, group = "mode")]
    pub warm: bool,
    /// Measure both: each cold run followed by a warm run.
    ///
    /// The warm run is of the same command, so it finds what the cold run read cached.
    #[arg(long, group = "mode")]
    pub both: bool,
    /// Measured runs per configuration.
    #[arg(short, long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub runs: u64,
    /// Unmeasured warm runs first [default: 1 with warm runs, else 0].
    ///
    /// Each command runs this many times before the measured runs, unmeasured.
    #[arg(short, long, value_name = "N")]
    pub warmup: Option<usize>,
    /// Run each configuration once more and drop its first run.
    #[arg(long)]
    pub discard_first: bool,
    /// Cold-run eviction: auto, system, files, or a list.
    ///
    /// A comma-separated list (system,files) measures each method as its own configuration, to
    /// compare them (see Eviction below).
    #[arg(long, value_name = "METHOD", default_value = "auto", value_delimiter = ',')]
    pub evict: Vec<String>,
    /// Evict the files of this coldstart trace (its files table).
    #[arg(long, value_name = "FILE", conflicts_with = "files")]
    pub trace: Option<PathBuf>,
    /// Evict the files listed in this file (one path per line).
    #[arg(long, value_name = "FILE")]
    pub files: Option<PathBuf>,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Time between SIGTERM and SIGKILL at the end of a run.
    ///
    /// Once ready, the command's tree is sent SIGTERM, then SIGKILL after this long: seconds (2)
    /// or with a unit (500ms).
    #[arg(long, value_name = "DURATION", default_value = "2", value_parser = values::duration)]
    pub grace: Duration,
    /// Show the commands' output (discarded by default).
    ///
    /// Also the output of --prepare and --conclude.
    #[arg(long)]
    pub show_output: bool,
    /// Run this shell command before each run, untimed (repeatable).
    ///
    /// Runs with `sh -c` before every run (warm-ups too) and before its eviction, as the
    /// benchmarked command's user, with its output discarded unless --show-output; what it
    /// leaves running is ended when it exits. Give it once for every command, or once per
    /// command in their order. A failure stops the benchmark (exit status 2). The pattern
    /// for a program that makes its profile on first start:
    /// --prepare 'rm -rf /tmp/profile && cp -a /tmp/profile.seed /tmp/profile'
    #[arg(long, value_name = "CMD")]
    pub prepare: Vec<String>,
    /// Run this shell command after each run, untimed (repeatable).
    ///
    /// As --prepare, after every run once its tree has ended: once for every command, or
    /// once per command.
    #[arg(long, value_name = "CMD")]
    pub conclude: Vec<String>,
    /// Keep measuring when a command fails.
    #[arg(short, long)]
    pub ignore_failure: bool,
    /// A command to benchmark, as one shell-quoted string (repeatable).
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    pub commands: Vec<String>,
    /// A name for each command, in order (repeatable).
    ///
    /// The summary labels each command's configurations with its name instead of its command
    /// line, as hyperfine's --command-name does.
    #[arg(short = 'n', long = "name", value_name = "NAME")]
    pub names: Vec<String>,
    /// Write the results as JSON (hyperfine's fields and coldstart's).
    ///
    /// Times are in seconds and sizes in bytes.
    #[arg(long, value_name = "FILE")]
    pub export_json: Option<PathBuf>,
    /// Write a Markdown table.
    #[arg(long, value_name = "FILE")]
    pub export_markdown: Option<PathBuf>,
    /// Write CSV (hyperfine's columns first).
    #[arg(long, value_name = "FILE")]
    pub export_csv: Option<PathBuf>,
    /// A previous --export-json to compare medians with.
    ///
    /// coldstart's or hyperfine's; configurations are matched by their `command` name.
    #[arg(long, value_name = "FILE", requires = "max_regression")]
    pub baseline: Option<PathBuf>,
    /// Percent a median may exceed the baseline's (else exit 1).
    ///
    /// A configuration regresses when its median is more than this above the baseline's and
    /// Welch's t-test says its runs are slower.
    #[arg(long, value_name = "PCT", requires = "baseline", value_parser = values::non_negative_number)]
    pub max_regression: Option<f64>,
    /// Do not draw a progress bar.
    #[arg(long)]
    pub no_progress: bool,
    /// Also measure cold starts with this plan replayed (repeatable).
    ///
    /// `NAME=PLAN` names the plan in the labels (`plan NAME alongside`); otherwise its file's
    /// stem does. Every plan is measured in the same interleaved rounds and compared with the
    /// cold and warm runs and with the other plans (see Prefetch below). Every plan is checked
    /// before the first run.
    #[arg(long, value_name = "[NAME=]PLAN", conflicts_with = "warm")]
    pub prefetch: Vec<String>,
    #[command(flatten)]
    pub replay: crate::cmd::prefetch::ReplayArgs,
    /// Run on an emulated slow disk: hdd, sd, cloud, snapshot, … (root).
    ///
    /// PROFILE is one of `coldstart storage`'s profiles or a profile file. The files the
    /// commands read are copied onto the device and seen at their own paths (a private mount
    /// namespace), so the commands run unchanged; a --prefetch plan is pointed at the copies. See docs/storage.md.
    #[arg(long, value_name = "PROFILE")]
    pub storage: Option<String>,
    /// The command (after `--`); separate several with `:::`.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn timeout_help() -> String {
    format!("Give up on a run after this long (the run fails) [default: {}]", TimeSpan(DEFAULT_TIMEOUT))
}

fn commands(args: &Args) -> anyhow::Result<Vec<BenchCommand>> {
    let mut argvs: Vec<Vec<String>> = Vec::new();
    for c in &args.commands {
        argvs.push(
            shlex::split(c)
                .filter(|a| !a.is_empty())
                .with_context(|| format!("cannot split the command {c:?}"))?,
        );
    }
    for part in args.command.split(|a| a == ":::") {
        if !part.is_empty() {
            argvs.push(part.to_vec());
        }
    }
    if argvs.is_empty() {
        bail!(
            "no command to benchmark: give it after `--` (e.g. `coldstart bench -- python3 -c pass`) or with -c"
        );
    }
    if args.names.len() > argvs.len() {
        bail!("{} names for {} commands", args.names.len(), argvs.len());
    }
    Ok(argvs
        .into_iter()
        .enumerate()
        .map(|(i, argv)| {
            let mut command = BenchCommand::new(argv);
            if let Some(name) = args.names.get(i) {
                command.name = name.clone();
            }
            command
        })
        .collect())
}

fn evictions(args: &Args) -> anyhow::Result<Vec<Evict>> {
    let mut out = Vec::new();
    for word in &args.evict {
        let method = match word.as_str() {
            "system" => Evict::System,
            "files" => Evict::Files,
            "auto" => {
                let method = if evict::is_root() { Evict::System } else { Evict::Files };
                match method {
                    Evict::System => eprintln!(
                        "evict: auto chose `system` (running as root): sync and drop_caches before every cold run, \
                         which empties the page cache of the whole machine"
                    ),
                    Evict::Files => {
                        eprintln!("evict: auto chose `files` (not root). {}", evict::FILES_MODE_LIMITS)
                    }
                }
                method
            }
            other => bail!("unknown --evict method {other:?}: expected auto, system or files"),
        };
        if !out.contains(&method) {
            out.push(method);
        }
    }
    Ok(out)
}

/// `--prepare` or `--conclude` for command `index` of `count`: one given for all, or one
/// per command.
fn hook_for(lines: &[String], option: &str, index: usize, count: usize) -> anyhow::Result<Option<String>> {
    match lines.len() {
        0 => Ok(None),
        1 => Ok(Some(lines[0].clone())),
        n if n == count => Ok(Some(lines[index].clone())),
        n => bail!(
            "{option} was given {n} times for {count} commands: give it once (for every command) or once per command"
        ),
    }
}

/// The `--prefetch` plans, each read and checked, so that a missing or broken plan
/// stops the benchmark before its first run.
fn plans(args: &Args) -> anyhow::Result<Vec<PrefetchSetup>> {
    let mut plans: Vec<PrefetchSetup> = Vec::new();
    for text in &args.prefetch {
        let (name, path) = plan_argument(text);
        let plan = coldstart_prefetch::Plan::load(&path)
            .with_context(|| format!("--prefetch {text}: the plan cannot be used"))?;
        let options = args.replay.options_for(plan.settings.order);
        let setup = match name {
            Some(name) => PrefetchSetup::named(name, path, options),
            None => PrefetchSetup::new(path, options),
        };
        if let Some(same) = plans.iter().find(|p| p.name == setup.name) {
            bail!(
                "--prefetch: two plans are named `{}` ({} and {}): name them with --prefetch NAME=PLAN",
                setup.name,
                same.plan.display(),
                setup.plan.display()
            );
        }
        plans.push(setup);
    }
    Ok(plans)
}

/// `NAME=PLAN` or `PLAN`: a name is what comes before the first `=`, when it is not empty,
/// holds no `/`, and the whole argument is not a file's path.
fn plan_argument(text: &str) -> (Option<&str>, PathBuf) {
    match text.split_once('=') {
        Some((name, path))
            if !name.is_empty() && !name.contains('/') && !std::path::Path::new(text).exists() =>
        {
            (Some(name), PathBuf::from(path))
        }
        _ => (None, PathBuf::from(text)),
    }
}

fn config(args: &Args) -> anyhow::Result<BenchConfig> {
    let modes = match (args.warm, args.both) {
        (true, _) => Modes { cold: false, warm: true },
        (_, true) => Modes { cold: true, warm: true },
        _ => Modes { cold: true, warm: false },
    };
    let prefetch = plans(args)?;
    let mut commands = commands(args)?;
    let count = commands.len();
    for (i, command) in commands.iter_mut().enumerate() {
        command.prepare = hook_for(&args.prepare, "--prepare", i, count)?;
        command.conclude = hook_for(&args.conclude, "--conclude", i, count)?;
    }
    Ok(BenchConfig {
        commands,
        modes,
        evict: if modes.cold { evictions(args)? } else { Vec::new() },
        runs: args.runs as usize,
        warmup: args.warmup.unwrap_or(usize::from(modes.warm)),
        discard_first: args.discard_first,
        files: match (&args.trace, &args.files) {
            (Some(trace), _) => FileSource::Trace(trace.clone()),
            (_, Some(list)) => FileSource::List(list.clone()),
            _ => FileSource::Learn,
        },
        until: args.launch.until.clone(),
        timeout: args.launch.timeout.unwrap_or(DEFAULT_TIMEOUT),
        ending: Ending::Terminate { grace: args.grace },
        run_as: args.launch.run_as(),
        show_output: args.show_output,
        ignore_failure: args.ignore_failure,
        prefetch,
        after_eviction: None,
    })
}

/// An indicatif bar with the estimated time left.
struct Bar(Option<indicatif::ProgressBar>);

impl Progress for Bar {
    fn begin(&mut self, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
        }
    }

    fn step(&mut self, done: usize, step: &Step, label: &str) {
        if let Some(bar) = &self.0 {
            bar.set_position(done as u64);
            bar.set_message(format!("{:?} {}: {label}", step.kind, step.round + 1));
        }
    }

    fn end(&mut self) {
        if let Some(bar) = self.0.take() {
            bar.finish_and_clear();
        }
    }
}

fn progress_bar(enabled: bool) -> Bar {
    use std::io::IsTerminal;
    if !enabled || !std::io::stderr().is_terminal() {
        return Bar(None);
    }
    let style = indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} runs, {eta} left  {wide_msg}")
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar());
    Bar(Some(indicatif::ProgressBar::new(0).with_style(style)))
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let storage_params = args.storage.as_deref().map(coldstart_storage::resolve).transpose()?;
    let mut config = config(&args)?;
    let storage = match (&args.storage, storage_params) {
        (Some(profile), Some(params)) => {
            Some(crate::cmd::bench_storage::stage(profile, params, &mut config)?)
        }
        _ => None,
    };
    let mut executor = RealExecutor::new(&config)?;
    let results = match run_benchmark(&config, &mut executor, &mut progress_bar(!args.no_progress)) {
        Ok(results) => results,
        Err(err @ BenchError::CommandFailed { .. }) => {
            eprintln!("coldstart: {err}");
            return Ok(ExitCode::from(3));
        }
        Err(err) => return Err(err.into()),
    };
    drop(executor);
    print!("{}", summary::render(&results));
    if let Some(storage) = &storage {
        println!("{}", storage.served());
    }
    let exports: [(&Option<PathBuf>, &dyn Exporter); 3] = [
        (&args.export_json, &JsonExporter),
        (&args.export_markdown, &MarkdownExporter),
        (&args.export_csv, &CsvExporter),
    ];
    for (path, exporter) in exports {
        if let Some(path) = path {
            std::fs::write(path, exporter.serialize(&results)?)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
    }
    if results.interrupted {
        return Ok(ExitCode::from(130));
    }
    if let (Some(base), Some(limit)) = (&args.baseline, args.max_regression) {
        let verdicts = baseline::check(&results, base, limit)?;
        println!();
        for v in &verdicts {
            println!("{}", v.describe(limit));
        }
        if verdicts.iter().any(|v| v.regressed) {
            return Ok(ExitCode::from(1));
        }
    }
    Ok(ExitCode::SUCCESS)
}
