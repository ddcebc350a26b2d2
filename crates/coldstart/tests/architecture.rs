//! ARCHITECTURE.md stays true as the code moves: every file it names in backquotes exists
//! (a path, or a file name, found in the tree), and every Rust item it names (`Type`,
//! `module::item`, `Type::method`) is defined in the workspace's sources. And the functions
//! stay short: bench/long-functions.py finds none over 120 lines outside tests.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

/// Names of the standard library and of other crates the document may mention.
const FOREIGN: &[&str] = &[
    "Display",
    "FromStr",
    "Debug",
    "Default",
    "Drop",
    "Error",
    "Result",
    "Option",
    "Vec",
    "String",
    "HashMap",
    "BTreeMap",
    "Path",
    "PathBuf",
    "Command",
    "Child",
    "Duration",
    "Instant",
    "Arc",
    "Mutex",
    "Send",
    "Sync",
    "Iterator",
    "Read",
    "Write",
    "Serialize",
    "Deserialize",
    "ValueEnum",
    "Parser",
    "Subcommand",
    "Args",
    "OnceLock",
    "ExitCode",
    "File",
    "BufReader",
    "BufWriter",
    "Connection",
    "None",
    "Some",
    "Ok",
    "Err",
];
const FOREIGN_CRATES: &[&str] =
    &["std", "nix", "libc", "serde", "clap", "rusqlite", "procfs", "parquet", "regex"];
const FILE_EXTENSIONS: &[&str] =
    &[".rs", ".js", ".css", ".py", ".sql", ".md", ".sh", ".toml", ".service", ".expect"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Every file of the tree (relative to the root), without target folders and .git.
fn files(dir: &Path, root: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "target" || name.starts_with('.') {
            continue;
        }
        if path.is_dir() {
            files(&path, root, out);
        } else {
            out.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
        }
    }
}

/// The text between backquotes, in order.
fn quoted(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).filter(|q| !q.is_empty()).collect()
}

/// A path or file name in backquotes: it has a known extension and no spaces. A pattern
/// (`*.rs`, `cmd/<name>.rs`) names no one file.
fn as_file(q: &str) -> Option<&str> {
    let q = q.trim_end_matches(['/', ',', ':']);
    let word = !q.contains(' ') && !q.contains(['*', '<']) && !q.starts_with("--") && !q.contains('=');
    (word && FILE_EXTENSIONS.iter().any(|e| q.ends_with(e))).then_some(q)
}

/// A file named `name` (a path relative to the root, to `crates/`, or the end of a path;
/// or a bare file name anywhere).
fn file_exists(name: &str, all: &[String]) -> bool {
    let name = name.trim_start_matches("./");
    all.iter()
        .any(|f| f == name || f.strip_prefix("crates/") == Some(name) || f.ends_with(&format!("/{name}")))
}

/// Rust items in backquotes: `Name`, `a::b`, `Type::item` (no spaces, no call parentheses
/// beyond a trailing `()`), the last segment of which must be defined.
fn as_item(q: &str) -> Option<(Option<&str>, &str)> {
    let q = q.trim_end_matches("()");
    let ident = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    let segments: Vec<&str> = q.split("::").collect();
    if !segments.iter().all(|s| ident(s)) || segments[0].chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return None;
    }
    let last = *segments.last()?;
    if segments.len() == 1 {
        // A bare word is an item only when it is a type name (CamelCase with a lower-case letter).
        let camel = last.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && last.chars().any(|c| c.is_ascii_lowercase())
            && !last.contains('_');
        return camel.then_some((None, last));
    }
    if FOREIGN_CRATES.contains(&segments[0]) {
        return None;
    }
    Some((Some(segments[0]), last))
}

/// The names the workspace's Rust sources define (functions, types, traits, constants,
/// statics, modules, and enum variants and fields, by a word-level scan).
fn defined_names(root: &Path, all: &[String]) -> HashSet<String> {
    let mut names = HashSet::new();
    for file in all.iter().filter(|f| f.ends_with(".rs")) {
        let text = std::fs::read_to_string(root.join(file)).unwrap_or_default();
        let stem = Path::new(file).file_stem().unwrap().to_string_lossy().into_owned();
        names.insert(stem);
        let words: Vec<&str> =
            text.split(|c: char| !(c.is_alphanumeric() || c == '_')).filter(|w| !w.is_empty()).collect();
        for pair in words.windows(2) {
            if ["fn", "struct", "enum", "trait", "type", "const", "static", "mod", "macro_rules"]
                .contains(&pair[0])
            {
                names.insert(pair[1].to_owned());
            }
        }
        // Enum variants and fields: an identifier at the start of a line, followed by `{`, `(`, `,` or `:`.
        for line in text.lines() {
            let line = line.trim_start().trim_start_matches("pub ");
            let name: String = line.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            let rest = line[name.len()..].trim_start();
            if !name.is_empty() && (rest.starts_with(['{', '(', ',', ':']) || rest.is_empty()) {
                names.insert(name);
            }
        }
    }
    for crate_dir in all.iter().filter_map(|f| f.strip_prefix("crates/")?.strip_suffix("/Cargo.toml")) {
        names.insert(crate_dir.to_owned());
    }
    names
}

#[test]
fn architecture_md_names_only_files_and_items_that_exist() {
    let root = root();
    let doc = std::fs::read_to_string(root.join("ARCHITECTURE.md")).unwrap();
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    let names = defined_names(&root, &all);
    let mut missing = Vec::new();
    for q in quoted(&doc) {
        if let Some(file) = as_file(q) {
            if !file_exists(file, &all) {
                missing.push(format!("file {file}"));
            }
        } else if let Some((_, item)) = as_item(q)
            && !FOREIGN.contains(&item)
            && !names.contains(item)
        {
            missing.push(format!("item {q}"));
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "ARCHITECTURE.md names what does not exist:\n  {}", missing.join("\n  "));
}

/// The checks themselves: a file or an item that does not exist is caught.
#[test]
fn the_check_catches_a_missing_file_and_a_missing_item() {
    let root = root();
    let mut all = Vec::new();
    files(&root, &root, &mut all);
    let names = defined_names(&root, &all);
    assert!(file_exists("analyze/src/doctor/mod.rs", &all));
    assert!(file_exists("doctor/mod.rs", &all));
    assert!(!file_exists("analyze/src/doctor/nowhere.rs", &all));
    assert_eq!(as_file("cmd/<name>.rs"), None);
    assert_eq!(as_file("doctor/mod.rs,"), Some("doctor/mod.rs"));
    assert_eq!(as_item("Running::wait"), Some((Some("Running"), "wait")));
    assert_eq!(as_item("ReadyReason"), Some((None, "ReadyReason")));
    assert_eq!(as_item("trace_marker"), None);
    assert!(names.contains("FindingKind") && names.contains("critical_path"));
    assert!(!names.contains("NoSuchTypeAnywhere"));
}

/// bench/long-functions.py on `root`, with a limit: its exit status and what it printed.
fn long_functions(root: &Path, limit: u32) -> (Option<i32>, String) {
    let script = self::root().join("bench/long-functions.py");
    let output = std::process::Command::new("/usr/bin/python3")
        .arg(script)
        .args(["--limit", &limit.to_string(), "--root"])
        .arg(root)
        .output()
        .expect("/usr/bin/python3 runs (.ci/run installs python3)");
    (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
}

#[test]
fn no_function_is_over_120_lines_outside_tests() {
    let (status, listed) = long_functions(&root(), 120);
    assert_eq!(status, Some(0), "functions over 120 lines (lines, file:line, name):\n{listed}");
}

/// The length check itself: a function one line over the limit is listed with its length,
/// one at the limit is not, and neither are functions in test modules, a trait method's
/// declaration, or braces inside strings, characters and comments.
#[test]
fn the_length_check_counts_from_fn_to_the_closing_brace() {
    let workspace = tempfile::tempdir().unwrap();
    let src = workspace.path().join("crates/demo/src");
    std::fs::create_dir_all(&src).unwrap();
    let body = |lines: usize| "    let _ = 1;\n".repeat(lines);
    let text = format!(
        "trait T {{\n    fn declared(&self);\n}}\n\
         fn at_limit() {{\n{}}}\n\
         fn over_limit() {{\n    let _ = \"{{\";\n    let _ = '}}';\n    // }}\n{}}}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_test_helper() {{\n{}    }}\n}}\n",
        body(8),
        body(6),
        body(20)
    );
    std::fs::write(src.join("lib.rs"), text).unwrap();
    let (status, listed) = long_functions(workspace.path(), 10);
    assert_eq!(status, Some(1));
    assert_eq!(listed, "   11 crates/demo/src/lib.rs:14 over_limit\n");
    assert_eq!(long_functions(workspace.path(), 11), (Some(0), String::new()));
}
