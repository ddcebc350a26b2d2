//! `coldstart fleet QUERY DIR`: a fleet question (SQL) over a Parquet dataset of many
//! traces, run on DuckDB through its Python package after the dataset is surveyed;
//! `coldstart fleet compact DIR` (`fleet_compact.rs`) folds a dataset into large files.
//!
//! The shipped queries and the runner are the files in fleet/ (embedded here), so the
//! text `coldstart fleet` runs is the text `spark-submit fleet/run_query.py` runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{Context, bail};
use coldstart_dataset::Severity;

/// A shipped query: its name, what it answers, its SQL.
pub struct Query {
    pub name: &'static str,
    pub about: &'static str,
    pub sql: &'static str,
}

/// The shipped questions, read through links in `assets/` so that the packaged crate carries them.
pub const QUERIES: &[Query] = &[
    Query {
        name: "ready",
        about: "time to ready per build and machine class: p50, p90, p99, max",
        sql: include_str!("../../assets/fleet/queries/ready.sql"),
    },
    Query {
        name: "common-files",
        about: "files read by at least --min-share of the traces",
        sql: include_str!("../../assets/fleet/queries/common_files.sql"),
    },
    Query {
        name: "common-pages",
        about: "runs of pages read by at least --min-share of the traces",
        sql: include_str!("../../assets/fleet/queries/common_pages.sql"),
    },
    Query {
        name: "regression",
        about: "what --build-b added to the critical path against --build-a (processes, files)",
        sql: include_str!("../../assets/fleet/queries/regression.sql"),
    },
    Query {
        name: "findings",
        about: "the doctor's finding kinds per build: traces, share, gains",
        sql: include_str!("../../assets/fleet/queries/findings.sql"),
    },
];

/// Problems of a survey printed before the rest are counted (errors come first).
const MAX_PROBLEMS_SHOWN: usize = 20;

/// The runner both engines share (fleet/run_query.py).
pub const RUNNER: &str = include_str!("../../assets/fleet/run_query.py");

/// Run a fleet question over a Parquet dataset of many traces (DuckDB, through Python), or
/// compact the dataset.
#[derive(Debug, clap::Args)]
#[command(after_help = after_help(), args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct Args {
    #[command(subcommand)]
    pub action: Option<Action>,
    /// A shipped query's name (see below) or an .sql file.
    #[arg(value_name = "QUERY", required = true)]
    pub query: Option<String>,
    /// The dataset's folder (from `coldstart export --format parquet`).
    #[arg(value_name = "DIR", required = true)]
    pub dataset: Option<PathBuf>,
    /// The share of traces a file or page must be read in (0 to 1).
    #[arg(long, value_name = "SHARE", default_value_t = 0.5, value_parser = share)]
    pub min_share: f64,
    /// regression: the build compared against.
    #[arg(long, value_name = "BUILD")]
    pub build_a: Option<String>,
    /// regression: the build looked at.
    #[arg(long, value_name = "BUILD")]
    pub build_b: Option<String>,
    /// CSV (a header row) instead of an aligned table.
    #[arg(long)]
    pub csv: bool,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    Compact(super::fleet_compact::Args),
}

/// The help's list of shipped queries (from [`QUERIES`]) and examples.
fn after_help() -> String {
    let mut text = String::from("Queries shipped (fleet/queries/*.sql):\n");
    for q in QUERIES {
        text.push_str(&format!("  {:<14} {}\n", q.name, q.about));
    }
    text.push_str(
        "
Examples:
  coldstart export --format parquet -o fleet/ --build 41.2 boots/*.coldstart
  coldstart fleet ready fleet/
  coldstart fleet common-files fleet/ --min-share 0.9 --csv > common.csv
  coldstart fleet regression fleet/ --build-a 41.2 --build-b 41.3
  coldstart fleet my-question.sql fleet/
  coldstart fleet compact fleet/

The dataset is surveyed first (every file's footer): a truncated file, a trace held twice,
a file of another dataset version or an interrupted export stops the query with one line
each. Queries run on DuckDB's Python package (`pip install duckdb`) under $COLDSTART_PYTHON,
else python3. A query file's tables are the dataset's folders (traces, process, file,
page_use, critical_path, finding, …; docs/dataset-format.md) and ${min_share}, ${build_a},
${build_b} its parameters. On a cluster:
  spark-submit fleet/run_query.py --engine spark --dataset URL --query FILE",
    );
    text
}

fn share(text: &str) -> Result<f64, String> {
    let v: f64 = text.parse().map_err(|_| format!("{text:?} is not a number"))?;
    if (0.0..=1.0).contains(&v) { Ok(v) } else { Err(format!("{v} is not between 0 and 1")) }
}

/// The SQL of `query`: a shipped one by name, or the file it names.
fn query_text(query: &str) -> anyhow::Result<String> {
    if let Some(q) = QUERIES.iter().find(|q| q.name == query) {
        return Ok(q.sql.to_owned());
    }
    let path = Path::new(query);
    if query.ends_with(".sql") || path.exists() {
        return std::fs::read_to_string(path).with_context(|| format!("cannot read the query file {query}"));
    }
    let names: Vec<&str> = QUERIES.iter().map(|q| q.name).collect();
    bail!("no query named {query:?}: give one of {} or an .sql file", names.join(", "))
}

/// The parameters a query's text names (`${name}`), in order of first use.
fn parameters(sql: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut rest = sql;
    while let Some(start) = rest.find("${") {
        rest = &rest[start + 2..];
        let Some(end) = rest.find('}') else { break };
        let name = rest[..end].to_owned();
        if !out.contains(&name) {
            out.push(name);
        }
        rest = &rest[end + 1..];
    }
    out
}

/// The Python that runs the query.
fn python() -> String {
    std::env::var("COLDSTART_PYTHON").unwrap_or_else(|_| "python3".to_owned())
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Some(Action::Compact(compact)) = args.action {
        return super::fleet_compact::run(compact);
    }
    let (Some(query), Some(dataset)) = (args.query.as_deref(), args.dataset.as_deref()) else {
        bail!(
            "give a query and a dataset: coldstart fleet QUERY DIR (coldstart fleet --help lists the queries)"
        );
    };
    let sql = query_text(query)?;
    let mut params = Vec::new();
    for name in parameters(&sql) {
        let value = match name.as_str() {
            "min_share" => args.min_share.to_string(),
            "build_a" => args
                .build_a
                .clone()
                .context("this query compares two builds: give --build-a and --build-b")?,
            "build_b" => args
                .build_b
                .clone()
                .context("this query compares two builds: give --build-a and --build-b")?,
            other => {
                bail!("the query names ${{{other}}}; coldstart fleet fills min_share, build_a and build_b")
            }
        };
        params.push(format!("{name}={value}"));
    }
    checked_survey(dataset, "queried")?;
    let python = python();
    let mut command = Command::new(&python);
    command.arg("-c").arg(RUNNER).arg("--engine").arg("duckdb").arg("--dataset").arg(dataset);
    for p in &params {
        command.arg("--param").arg(p);
    }
    if args.csv {
        command.arg("--csv");
    }
    let mut child = match command.stdin(Stdio::piped()).stderr(Stdio::piped()).spawn() {
        Ok(child) => child,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{python} was not found: coldstart fleet runs DuckDB through Python; install python3 and `pip install duckdb`, or set COLDSTART_PYTHON"
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot start {python}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(sql.as_bytes()).context("cannot hand the query to Python")?;
    }
    let out = child.wait_with_output().with_context(|| format!("{python} failed"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    match out.status.code() {
        Some(0) => {
            eprint!("{stderr}");
            Ok(ExitCode::SUCCESS)
        }
        Some(3) => bail!(
            "the DuckDB Python package is not installed for {python}: `{python} -m pip install duckdb` (or set COLDSTART_PYTHON to a Python that has it)"
        ),
        _ => {
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
            bail!("the query failed ({}): {}", out.status, last.trim_start_matches("run_query: "))
        }
    }
}

/// Surveys the dataset at `dir` and prints what it found; fails, saying nothing was
/// `done` (queried, planned), when it found errors.
pub fn checked_survey(dir: &std::path::Path, done: &str) -> anyhow::Result<coldstart_dataset::Survey> {
    let survey = coldstart_dataset::survey(dir)?;
    for p in survey.problems.iter().take(MAX_PROBLEMS_SHOWN) {
        eprintln!("coldstart: {}: {p}", dir.display());
    }
    if survey.problems.len() > MAX_PROBLEMS_SHOWN {
        eprintln!("coldstart: … and {} more", survey.problems.len() - MAX_PROBLEMS_SHOWN);
    }
    if survey.has_errors() {
        let errors = survey.errors().count();
        bail!(
            "the dataset has {errors} error{}: nothing was {done} (fix or remove the files named)",
            if errors == 1 { "" } else { "s" }
        );
    }
    let warnings = survey.problems.iter().filter(|p| p.severity == Severity::Warning).count();
    eprintln!(
        "coldstart: {} traces, {} files{}",
        survey.traces,
        survey.files,
        if warnings > 0 { format!(", {warnings} warnings") } else { String::new() }
    );
    Ok(survey)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_found_once_in_order() {
        assert_eq!(parameters("a ${build_a} b ${min_share} ${build_a} ${"), ["build_a", "min_share"]);
    }

    #[test]
    fn every_shipped_query_names_only_known_parameters() {
        for q in QUERIES {
            for p in parameters(q.sql) {
                assert!(["min_share", "build_a", "build_b"].contains(&p.as_str()), "{}: {p}", q.name);
            }
        }
    }
}
