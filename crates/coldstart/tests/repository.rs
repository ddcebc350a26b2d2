//! Checks on the repository itself: every tracked file has a name a person would
//! have given it (a stray file named after a pasted line of code was tracked once).

use std::process::Command;

/// Why `name` is not a name a person would have made, if it is not.
fn odd_name(name: &str) -> Option<&'static str> {
    let last = name.rsplit('/').next().unwrap_or(name);
    if name.chars().any(char::is_control) {
        Some("a control character")
    } else if name.chars().any(|c| matches!(c, '|' | ';' | '`' | '$' | '\\' | '"' | '<' | '>' | '*' | '?')) {
        Some("a shell metacharacter")
    } else if name.split('/').any(|part| part.is_empty() || part.trim() != part) {
        Some("an empty part or white space at either end of a part")
    } else if last.contains("  ") {
        Some("a run of spaces")
    } else if last.len() > 100 {
        Some("over 100 bytes")
    } else {
        None
    }
}

#[test]
fn odd_names_are_recognised() {
    assert_eq!(odd_name(".t_ns);|    wakeups.sort_by_key(|w| w.t_ns);|"), Some("a shell metacharacter"));
    assert_eq!(odd_name("a/ b.rs"), Some("an empty part or white space at either end of a part"));
    assert_eq!(odd_name("a\tb"), Some("a control character"));
    assert_eq!(odd_name("docs/two  spaces.md"), Some("a run of spaces"));
    assert_eq!(odd_name("crates/record/src/assemble/mod.rs"), None);
    assert_eq!(odd_name("tests/fixtures/python-import.coldstart"), None);
}

#[test]
fn tracked_file_names_are_ones_a_person_would_make() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new("git").args(["-C", root, "ls-files", "-z"]).output();
    let out = match out {
        Ok(out) if out.status.success() => out,
        _ => {
            coldstart_testkit::unavailable(
                "tracked_file_names_are_ones_a_person_would_make",
                "not a git checkout, or no git",
            );
            return;
        }
    };
    let names: Vec<String> = out
        .stdout
        .split(|&b| b == 0)
        .filter(|n| !n.is_empty())
        .map(|n| String::from_utf8_lossy(n).into_owned())
        .collect();
    assert!(names.len() > 100, "git ls-files listed only {} files", names.len());
    let odd: Vec<String> =
        names.iter().filter_map(|n| odd_name(n).map(|why| format!("{n:?}: {why}"))).collect();
    assert!(odd.is_empty(), "tracked files with odd names (remove them with `git rm`):\n{}", odd.join("\n"));
}
