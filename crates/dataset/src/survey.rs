//! A dataset checked from its files' footers before anything queries, plans or compacts it.
//!
//! Each Parquet file says in its key-value metadata which dataset version, table, build
//! and traces it holds. The survey reads only those footers (no rows), so it costs one
//! small read per file, and reports what would make a query's answer wrong: a file that is
//! truncated or not Parquet, a file of another dataset version, a file in another build's
//! folder, a trace held by two files of one table (its rows would count twice), a trace
//! whose export was interrupted (rows in some tables and no `traces` row) or whose files
//! were removed, and temporary files. What it read is the [`Catalog`] of the dataset's
//! files, from which compaction, export and `prefetch plan --dataset` work.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};

use crate::file::TableReader;
use crate::layout::{FileName, STAGING, classify, part_name, partition_build};
use crate::{
    DATASET_VERSION, DatasetError, META_BUILD, META_TABLE, META_TRACE_ID, META_TRACE_IDS, META_VERSION,
    TABLES,
};

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

/// A readable file of the dataset and what its footer says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Held {
    /// Relative to the dataset's folder.
    pub path: PathBuf,
    /// True for a compaction's part, false for one exported trace's file.
    pub part: bool,
    /// The traces it holds, sorted.
    pub ids: Vec<String>,
    pub rows: u64,
    pub bytes: u64,
}

/// The readable files of each table and build.
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    /// (table, build) -> files, in path order.
    pub files: BTreeMap<(String, Option<String>), Vec<Held>>,
    /// Every trace with a `traces` row, and its build.
    pub traces: BTreeMap<String, Option<String>>,
}

impl Catalog {
    /// The files of `table` of build `build`.
    pub fn files_of(&self, table: &str, build: &Option<String>) -> &[Held] {
        self.files.get(&(table.to_owned(), build.clone())).map_or(&[], Vec::as_slice)
    }

    /// The builds with traces, in order.
    pub fn builds(&self) -> BTreeSet<Option<String>> {
        self.traces.values().cloned().collect()
    }
}

/// What the footers of a dataset say.
#[derive(Clone, Debug, Default)]
pub struct Survey {
    /// Traces with a readable `traces` row.
    pub traces: usize,
    /// Parquet files read.
    pub files: usize,
    /// Rows per table, from the footers.
    pub rows: BTreeMap<String, u64>,
    /// Errors first, then warnings, each in path order.
    pub problems: Vec<Problem>,
    /// The files that were read.
    pub catalog: Catalog,
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
pub struct Footer {
    pub version: Option<String>,
    pub table: Option<String>,
    pub build: Option<String>,
    /// The trace of an exported file, or the traces of a part.
    pub ids: Option<Vec<String>>,
    pub rows: u64,
}

pub fn read_footer(path: &Path) -> Result<Footer, DatasetError> {
    let reader = TableReader::open(path)?;
    let ids = match (reader.metadata(META_TRACE_ID), reader.metadata(META_TRACE_IDS)) {
        (Some(id), _) => Some(vec![id]),
        (None, Some(list)) => Some(list.split(',').filter(|s| !s.is_empty()).map(str::to_owned).collect()),
        (None, None) => None,
    };
    Ok(Footer {
        version: reader.metadata(META_VERSION),
        table: reader.metadata(META_TABLE),
        build: reader.metadata(META_BUILD),
        ids,
        rows: reader.num_rows(),
    })
}

/// A file holding a trace, and the build of its folder.
type Location = (PathBuf, Option<String>);

/// What the walk found so far.
#[derive(Default)]
struct Walk {
    out: Survey,
    problems: Vec<Problem>,
    /// table -> trace id -> (files holding it, their builds)
    held: BTreeMap<&'static str, BTreeMap<String, Vec<Location>>>,
    /// Files whose traces are unknown (unreadable, refused): (table, trace id) named by a
    /// file name, and (table, build) of unreadable parts; said once, not again as missing.
    refused_traces: BTreeSet<(&'static str, String)>,
    refused_parts: BTreeSet<(&'static str, Option<String>)>,
}

impl Walk {
    fn push(&mut self, severity: Severity, path: PathBuf, text: String) {
        self.problems.push(Problem { severity, path, text });
    }
}

/// Surveys the dataset at `dir`; fails only when `dir` is not a dataset at all.
pub fn survey(dir: &Path) -> Result<Survey, DatasetError> {
    if !dir.join("traces").is_dir() {
        return Err(DatasetError::NotADataset(dir.to_owned()));
    }
    let mut walk = Walk::default();
    root_folders(dir, &mut walk)?;
    for &table in TABLES {
        table_folder(dir, table, &mut walk);
    }
    cross_check(&mut walk);
    let mut out = walk.out;
    let mut problems = walk.problems;
    problems.sort_by(|a, b| b.severity.cmp(&a.severity).then_with(|| a.path.cmp(&b.path)));
    out.problems = problems;
    out.traces = out.catalog.traces.len();
    Ok(out)
}

/// Sorted names of the entries of `dir`, each with whether it is a folder.
fn entries(dir: &Path) -> std::io::Result<Vec<(String, bool)>> {
    let mut out: Vec<(String, bool)> = fs::read_dir(dir)?
        .filter_map(|e| {
            let e = e.ok()?;
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            Some((e.file_name().into_string().ok()?, is_dir))
        })
        .collect();
    out.sort();
    Ok(out)
}

fn root_folders(dir: &Path, walk: &mut Walk) -> Result<(), DatasetError> {
    let names = entries(dir).map_err(|source| DatasetError::Io { path: dir.to_owned(), source })?;
    for (name, is_dir) in names {
        if is_dir && !TABLES.contains(&name.as_str()) && !name.starts_with('.') {
            walk.push(
                Severity::Warning,
                PathBuf::from(&name),
                format!("not a table of dataset version {DATASET_VERSION}; queries do not read it"),
            );
        }
        if name == STAGING && is_dir && fs::read_dir(dir.join(STAGING)).is_ok_and(|mut e| e.next().is_some())
        {
            walk.push(
                Severity::Warning,
                PathBuf::from(STAGING),
                "what an interrupted compaction left (queries skip it); `coldstart fleet compact` finishes or removes it"
                    .into(),
            );
        }
    }
    Ok(())
}

fn table_folder(dir: &Path, table: &'static str, walk: &mut Walk) {
    let Ok(names) = entries(&dir.join(table)) else {
        walk.push(Severity::Error, PathBuf::from(table), "the table's folder is missing".into());
        return;
    };
    walk.out.rows.entry(table.to_owned()).or_default();
    for (name, is_dir) in names {
        let rel = Path::new(table).join(&name);
        match (is_dir, partition_build(&name)) {
            (true, Some(build)) => partition_folder(dir, table, build, walk),
            (true, None) if name.starts_with(['.', '_']) => {}
            (true, None) => walk.push(
                Severity::Error,
                rel,
                "not a build folder (build=…): Spark refuses a table folder holding it; move or delete it"
                    .into(),
            ),
            (false, _) => stray_file(dir, table, &name, walk),
        }
    }
}

/// A file directly in a table's folder: version 2 kept its files there.
fn stray_file(dir: &Path, table: &'static str, name: &str, walk: &mut Walk) {
    let rel = Path::new(table).join(name);
    match classify(name) {
        FileName::Temporary => temporary(rel, walk),
        FileName::Other => walk.push(
            Severity::Warning,
            rel,
            "not a Parquet file (no .parquet suffix); queries skip it".into(),
        ),
        _ => {
            walk.out.files += 1;
            let text = match read_footer(&dir.join(&rel)) {
                Ok(f) => match f.version.as_deref().and_then(|v| v.parse::<i32>().ok()) {
                    Some(v) if v != DATASET_VERSION => old_version(v),
                    _ => "not in a build folder (build=…): queries do not read it; export its trace again"
                        .into(),
                },
                Err(e) => unreadable(&e),
            };
            walk.push(Severity::Error, rel, text);
        }
    }
}

fn temporary(rel: PathBuf, walk: &mut Walk) {
    walk.push(
        Severity::Warning,
        rel,
        "a temporary file of an interrupted export (queries skip it); export the trace again, or delete it"
            .into(),
    );
}

fn old_version(v: i32) -> String {
    format!(
        "written as dataset version {v}, this coldstart reads version {DATASET_VERSION}; export its trace again into a new dataset"
    )
}

fn unreadable(e: &DatasetError) -> String {
    let cause = match e {
        DatasetError::Read { source, .. } => source.to_string(),
        other => other.to_string(),
    };
    format!("unreadable, truncated or not Parquet ({cause}); export its trace again")
}

fn partition_folder(dir: &Path, table: &'static str, build: Option<String>, walk: &mut Walk) {
    let folder = Path::new(table).join(crate::layout::partition_name(build.as_deref()));
    let Ok(names) = entries(&dir.join(&folder)) else {
        walk.push(Severity::Error, folder, "cannot list the folder".into());
        return;
    };
    for (name, is_dir) in names {
        let rel = folder.join(&name);
        if is_dir {
            walk.push(Severity::Warning, rel, "a folder inside a build folder; queries skip it".into());
            continue;
        }
        match classify(&name) {
            FileName::Temporary => temporary(rel, walk),
            FileName::Other => walk.push(
                Severity::Warning,
                rel,
                "not a Parquet file (no .parquet suffix); queries skip it".into(),
            ),
            kind => table_file(dir, table, &build, rel, kind, walk),
        }
    }
}

/// One Parquet file in a build folder: its footer checked and its traces recorded.
fn table_file(
    dir: &Path,
    table: &'static str,
    build: &Option<String>,
    rel: PathBuf,
    kind: FileName,
    walk: &mut Walk,
) {
    walk.out.files += 1;
    let refuse = |walk: &mut Walk, rel: PathBuf, text: String| {
        match &kind {
            FileName::Trace(id) => walk.refused_traces.insert((table, id.clone())),
            _ => walk.refused_parts.insert((table, build.clone())),
        };
        walk.push(Severity::Error, rel, text);
    };
    let footer = match read_footer(&dir.join(&rel)) {
        Ok(f) => f,
        Err(e) => return refuse(walk, rel, unreadable(&e)),
    };
    match footer.version.as_deref().and_then(|v| v.parse::<i32>().ok()) {
        Some(DATASET_VERSION) => {}
        Some(v) => return refuse(walk, rel, old_version(v)),
        None => {
            let text = format!("no {META_VERSION} in its metadata: not written by `coldstart export`");
            return refuse(walk, rel, text);
        }
    }
    if footer.table.as_deref() != Some(table) {
        let text = format!(
            "holds table {} but lies in the folder of {table}",
            footer.table.as_deref().unwrap_or("?")
        );
        return refuse(walk, rel, text);
    }
    if footer.build != *build {
        let text = format!(
            "holds build {} but lies in the folder of build {}: queries would count it in the wrong build",
            footer.build.as_deref().unwrap_or("(none)"),
            build.as_deref().unwrap_or("(none)")
        );
        return refuse(walk, rel, text);
    }
    let Some(ids) = footer.ids else {
        return refuse(walk, rel, format!("no {META_TRACE_ID} in its metadata"));
    };
    named_as_held(&rel, &kind, &ids, walk);
    if table == "traces" && footer.rows != ids.len() as u64 {
        let text =
            format!("{} rows for {} traces; a traces file holds one row per trace", footer.rows, ids.len());
        walk.push(Severity::Error, rel.clone(), text);
    }
    *walk.out.rows.entry(table.to_owned()).or_default() += footer.rows;
    let bytes = fs::metadata(dir.join(&rel)).map(|m| m.len()).unwrap_or(0);
    for id in &ids {
        walk.held.entry(table).or_default().entry(id.clone()).or_default().push((rel.clone(), build.clone()));
    }
    let part = !matches!(kind, FileName::Trace(_));
    let held = Held { path: rel, part, ids, rows: footer.rows, bytes };
    walk.out.catalog.files.entry((table.to_owned(), build.clone())).or_default().push(held);
}

/// Warns when a file's name is not the one its traces give it (a copy under another name).
fn named_as_held(rel: &Path, kind: &FileName, ids: &[String], walk: &mut Walk) {
    let name = rel.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let text = match kind {
        FileName::Trace(stem) if ids.len() == 1 && ids[0] == *stem => return,
        FileName::Part if ids.windows(2).all(|w| w[0] < w[1]) && part_name(ids) == name => return,
        _ if ids.len() == 1 => format!("holds trace {} under another name (a copy?)", ids[0]),
        _ => format!("holds {} traces under another name than a compaction gives them (a copy?)", ids.len()),
    };
    walk.push(Severity::Warning, rel.to_owned(), text);
}

/// Traces against tables: each trace once in each table, in its build, with a `traces` row.
fn cross_check(walk: &mut Walk) {
    let exported: BTreeMap<String, Option<String>> = walk
        .held
        .get("traces")
        .map(|t| t.iter().map(|(id, files)| (id.clone(), files[0].1.clone())).collect())
        .unwrap_or_default();
    let mut problems = Vec::new();
    for (table, by_id) in &walk.held {
        for (id, files) in by_id {
            problems.extend(held_problems(table, id, files, exported.get(id)));
        }
    }
    for (id, build) in &exported {
        for &table in TABLES {
            let missing = walk.held.get(table).is_none_or(|t| !t.contains_key(id));
            let refused = walk.refused_traces.contains(&(table, id.clone()))
                || walk.refused_parts.contains(&(table, build.clone()));
            if missing && !refused {
                let rel = crate::layout::table_file(Path::new(""), table, build.as_deref(), id);
                let text = format!("trace {id} is in traces but its {table} file is missing or unreadable");
                problems.push(Problem { severity: Severity::Error, path: rel, text });
            }
        }
    }
    walk.problems.extend(problems);
    walk.out.catalog.traces = exported;
}

/// What is wrong with how table `table` holds trace `id` (`files`: where, with builds).
fn held_problems(
    table: &str,
    id: &str,
    files: &[Location],
    exported: Option<&Option<String>>,
) -> Vec<Problem> {
    let mut out = Vec::new();
    let error =
        |path: &PathBuf, text: String| Problem { severity: Severity::Error, path: path.clone(), text };
    if files.len() > 1 {
        let names: Vec<String> = files.iter().map(|f| f.0.display().to_string()).collect();
        let text = format!(
            "trace {id} is held by {} files of {table} ({}): its rows would count {} times; delete all but one",
            files.len(),
            names.join(", "),
            files.len()
        );
        out.push(error(&files[0].0, text));
    }
    match exported {
        None if table != "traces" => out.push(error(
            &files[0].0,
            format!(
                "trace {id} has rows in {table} but no traces row: its export was interrupted; export the trace again to complete it, or delete its files"
            ),
        )),
        Some(build) if files.iter().any(|f| f.1 != *build) => out.push(error(
            &files[0].0,
            format!("trace {id} is of build {} in traces but lies in another build's folder of {table}", build.as_deref().unwrap_or("(none)")),
        )),
        _ => {}
    }
    out
}
