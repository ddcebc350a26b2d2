//! Every crate can be packaged on its own (`cargo package --workspace`): a file it includes
//! at compile time (`include_str!`, `include_bytes!`) lies inside its own folder, since the
//! package carries nothing else. Files kept elsewhere in the repository are included
//! through a link inside the crate (`crates/coldstart/assets/`), which cargo packs as a file.

use std::path::{Component, Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// `path` with `.` and `..` taken lexically, links not followed (a link inside the crate
/// is packed as a file, wherever it points).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Each include of the crate at `crate_dir` that leaves its folder or names no file:
/// `source file: included path`.
fn bad_includes(crate_dir: &Path) -> Vec<String> {
    let mut sources = Vec::new();
    for dir in ["src", "benches", "examples"] {
        if crate_dir.join(dir).is_dir() {
            rust_files(&crate_dir.join(dir), &mut sources);
        }
    }
    let mut bad = Vec::new();
    for source in sources {
        let text = std::fs::read_to_string(&source).unwrap();
        for macro_name in ["include_str!(\"", "include_bytes!(\""] {
            for (at, _) in text.match_indices(macro_name) {
                let rest = &text[at + macro_name.len()..];
                let Some(end) = rest.find('"') else { continue };
                let included = lexical(&source.parent().unwrap().join(&rest[..end]));
                if !included.starts_with(crate_dir) || !included.exists() {
                    bad.push(format!("{}: {}", source.display(), &rest[..end]));
                }
            }
        }
    }
    bad
}

#[test]
fn every_crate_includes_only_files_inside_its_own_folder() {
    let crates = workspace_root().join("crates");
    let mut bad = Vec::new();
    let mut checked = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        if entry.path().join("Cargo.toml").is_file() {
            bad.extend(bad_includes(&entry.path()));
            checked += 1;
        }
    }
    assert!(checked >= 13, "only {checked} crates found under {}", crates.display());
    assert!(bad.is_empty(), "includes that `cargo package` would not carry:\n{}", bad.join("\n"));
}

#[test]
fn the_check_catches_an_include_from_outside_the_crate_and_accepts_a_link_inside_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let krate = root.join("crates/demo");
    std::fs::create_dir_all(krate.join("src")).unwrap();
    std::fs::create_dir_all(krate.join("assets")).unwrap();
    std::fs::create_dir_all(root.join("shared")).unwrap();
    std::fs::write(root.join("shared/query.sql"), "select 1").unwrap();
    std::os::unix::fs::symlink("../../../shared/query.sql", krate.join("assets/query.sql")).unwrap();
    std::fs::write(krate.join("src/lib.rs"), "const Q: &str = include_str!(\"../assets/query.sql\");\n")
        .unwrap();
    assert_eq!(bad_includes(&krate), Vec::<String>::new());

    std::fs::write(
        krate.join("src/lib.rs"),
        "const Q: &str = include_str!(\"../../../shared/query.sql\");\nconst G: &[u8] = include_bytes!(\"gone.bin\");\n",
    )
    .unwrap();
    let bad = bad_includes(&krate);
    assert_eq!(bad.len(), 2, "{bad:?}");
    assert!(bad[0].ends_with("../../../shared/query.sql") && bad[1].ends_with("gone.bin"), "{bad:?}");
}

/// Every crate that is published says where its documentation is (crates.io warns, and its
/// page links nothing, without one); the dev-only ones (`publish = false`) need none.
#[test]
fn every_published_crate_names_its_documentation() {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(workspace_root().join("crates")).unwrap().flatten() {
        let manifest = entry.path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else { continue };
        let package = text.split("\n[").next().unwrap_or_default();
        let published = !package.lines().any(|l| l.replace(' ', "") == "publish=false");
        let documented = package
            .lines()
            .any(|l| ["documentation", "homepage", "repository"].iter().any(|key| l.starts_with(key)));
        if published && !documented {
            missing.push(manifest.display().to_string());
        }
    }
    assert!(missing.is_empty(), "no documentation, homepage or repository in {missing:?}");
}
