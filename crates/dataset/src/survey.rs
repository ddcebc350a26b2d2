//! A dataset checked from its files' footers before anything queries it.
//!
//! Each Parquet file says in its key-value metadata which dataset version, table and
//! trace it holds. The survey reads only those footers (no rows), so it costs one small
//! read per file, and reports what would make a query's answer wrong: a file that is
//! truncated or not Parquet, a file of another dataset version, a trace held by two files
//! of one table (its rows would count twice), a trace whose export was interrupted (rows
//! in some tables and no `traces` row) or whose files were removed, and temporary files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::{DATASET_VERSION, DatasetError, META_TABLE, META_TRACE_ID, META_VERSION, TABLES};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// The engines would skip it or it changes nothing counted; said, not refused.
    Warning,
    /// A query's answer would be wrong: `coldstart fleet` refuses the dataset.
    Error,
}

/// One thing wrong with a dataset, about one file or trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub severity: Severity,
    /// The file, relative to the dataset's folder (or the table's folder).
    pub path: PathBuf,
    pub text: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let level = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{level}: {}: {}", self.path.display(), self.text)
    }
}

/// What the footers of a dataset say.
#[derive(Clone, Debug, Default)]
pub struct Survey {
    /// Traces with a readable `traces` file.
    pub traces: usize,
    /// Parquet files read.
    pub files: usize,
    /// Rows per table, from the footers.
    pub rows: BTreeMap<String, u64>,
    /// Errors first, then warnings, each in path order.
    pub problems: Vec<Problem>,
}

impl Survey {
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems.iter().filter(|p| p.severity == Severity::Error)
    }

    pub fn has_errors(&self) -> bool {
        self.errors().next().is_some()
    }
}

/// A readable file's footer facts.
struct Footer {
    version: Option<String>,
    trace_id: Option<String>,
    table: Option<String>,
    rows: u64,
}

fn read_footer(path: &Path) -> Result<Footer, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let reader = SerializedFileReader::new(file).map_err(|e| e.to_string())?;
    let meta = reader.metadata().file_metadata();
    let get = |key: &str| {
        meta.key_value_metadata()
            .and_then(|kv| kv.iter().find(|k| k.key == key))
            .and_then(|k| k.value.clone())
    };
    Ok(Footer {
        version: get(META_VERSION),
        trace_id: get(META_TRACE_ID),
        table: get(META_TABLE),
        rows: u64::try_from(meta.num_rows()).unwrap_or(0),
    })
}

/// Surveys the dataset at `dir`; fails only when `dir` is not a dataset at all.
pub fn survey(dir: &Path) -> Result<Survey, DatasetError> {
    let traces_dir = dir.join("traces");
    if !traces_dir.is_dir() {
        return Err(DatasetError::NotADataset(dir.to_owned()));
    }
    let mut out = Survey::default();
    let mut problems: Vec<Problem> = Vec::new();
    let mut push = |severity, path: PathBuf, text: String| problems.push(Problem { severity, path, text });
    // Files already reported as unreadable or of another version: said once, not again as missing.
    let mut refused: BTreeSet<PathBuf> = BTreeSet::new();
    // table -> trace id -> files holding it
    let mut held: BTreeMap<&str, BTreeMap<String, Vec<PathBuf>>> = BTreeMap::new();
    let entries = fs::read_dir(dir).map_err(|source| DatasetError::Io { path: dir.to_owned(), source })?;
    let mut folders: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    folders.sort();
    for folder in &folders {
        if !TABLES.contains(&folder.as_str()) && !folder.starts_with('.') {
            push(
                Severity::Warning,
                PathBuf::from(folder),
                format!("not a table of dataset version {DATASET_VERSION}; queries do not read it"),
            );
        }
    }
    for &table in TABLES {
        let folder = dir.join(table);
        let Ok(entries) = fs::read_dir(&folder) else {
            push(Severity::Error, PathBuf::from(table), "the table's folder is missing".into());
            continue;
        };
        let mut names: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
        names.sort();
        let by_id = held.entry(table).or_default();
        let rows = out.rows.entry(table.to_owned()).or_default();
        for name in names {
            let rel = Path::new(table).join(&name);
            if name.starts_with('.') && name.ends_with(".tmp") {
                push(
                    Severity::Warning,
                    rel,
                    "a temporary file of an interrupted export (queries skip it); export the trace again, or delete it".into(),
                );
                continue;
            }
            let Some(stem) = name.strip_suffix(".parquet") else {
                push(
                    Severity::Warning,
                    rel,
                    "not a Parquet file (no .parquet suffix); queries skip it".into(),
                );
                continue;
            };
            out.files += 1;
            let footer = match read_footer(&dir.join(&rel)) {
                Ok(f) => f,
                Err(e) => {
                    refused.insert(rel.clone());
                    push(
                        Severity::Error,
                        rel,
                        format!("unreadable, truncated or not Parquet ({e}); export its trace again"),
                    );
                    continue;
                }
            };
            let version = footer.version.as_deref().and_then(|v| v.parse::<i32>().ok());
            match version {
                Some(DATASET_VERSION) => {}
                Some(v) => {
                    refused.insert(rel.clone());
                    push(
                        Severity::Error,
                        rel,
                        format!(
                            "written as dataset version {v}, this coldstart reads version {DATASET_VERSION}; export its trace again into a new dataset"
                        ),
                    );
                    continue;
                }
                None => {
                    refused.insert(rel.clone());
                    push(
                        Severity::Error,
                        rel,
                        format!("no {META_VERSION} in its metadata: not written by `coldstart export`"),
                    );
                    continue;
                }
            }
            if footer.table.as_deref() != Some(table) {
                refused.insert(rel.clone());
                push(
                    Severity::Error,
                    rel,
                    format!(
                        "holds table {} but lies in the folder of {table}",
                        footer.table.as_deref().unwrap_or("?")
                    ),
                );
                continue;
            }
            let Some(id) = footer.trace_id else {
                refused.insert(rel.clone());
                push(Severity::Error, rel, format!("no {META_TRACE_ID} in its metadata"));
                continue;
            };
            if id != stem {
                push(
                    Severity::Warning,
                    rel.clone(),
                    format!("holds trace {id} under another name (a copy?)"),
                );
            }
            if table == "traces" && footer.rows != 1 {
                push(
                    Severity::Error,
                    rel.clone(),
                    format!("{} rows; a traces file holds exactly one", footer.rows),
                );
            }
            *rows += footer.rows;
            by_id.entry(id).or_default().push(rel);
        }
    }
    let exported: BTreeSet<&String> = held.get("traces").map(|t| t.keys().collect()).unwrap_or_default();
    for (table, by_id) in &held {
        for (id, files) in by_id {
            if files.len() > 1 {
                let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
                push(
                    Severity::Error,
                    files[0].clone(),
                    format!(
                        "trace {id} is held by {} files of {table} ({}): its rows would count {} times; delete all but one",
                        files.len(),
                        names.join(", "),
                        files.len()
                    ),
                );
            }
            if *table != "traces" && !exported.contains(id) {
                push(
                    Severity::Error,
                    files[0].clone(),
                    format!(
                        "trace {id} has rows in {table} but no traces row: its export was interrupted; export the trace again to complete it, or delete its files"
                    ),
                );
            }
        }
    }
    for id in &exported {
        for &table in TABLES {
            let rel = Path::new(table).join(format!("{id}.parquet"));
            if held.get(table).is_some_and(|t| !t.contains_key(*id)) && !refused.contains(&rel) {
                push(
                    Severity::Error,
                    rel,
                    format!("trace {id} is in traces but its {table} file is missing or unreadable"),
                );
            }
        }
    }
    out.traces = exported.len();
    problems.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.path.cmp(&b.path)));
    out.problems = problems;
    Ok(out)
}
