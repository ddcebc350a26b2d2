//! Disk profiles: a class of the doctor's disk model (`hdd`, `sd`, `cloud`, …), a
//! `custom:KEY=VALUE,…` spec, or a TOML file with the same keys. One definition serves
//! the emulated devices and the doctor's `--disk` predictions.

use std::path::Path;

use coldstart_analyze::doctor::{CUSTOM_KEYS, DiskClass, DiskParams, FETCH_KEYS};

use crate::{Result, StorageError};

/// The disk parameters `spec` names: a class, a `custom:` spec or a profile file's path.
pub fn resolve(spec: &str) -> Result<DiskParams> {
    let looks_like_path = spec.contains('/') || spec.ends_with(".toml") || Path::new(spec).is_file();
    if DiskClass::by_name(spec).is_some() || spec.starts_with("custom") || !looks_like_path {
        return spec.parse().map_err(|e| StorageError::Profile(format!("profile {spec:?}: {e}")));
    }
    let path = Path::new(spec);
    let text = std::fs::read_to_string(path)
        .map_err(|e| StorageError::Profile(format!("profile {}: {e}", path.display())))?;
    from_toml(&text)
        .map(|mut p| {
            p.description = format!("profile {}", path.display());
            let source = format!("given in {}", path.display());
            for s in p.sources.iter_mut().filter(|s| s.source == "given") {
                s.source.clone_from(&source);
            }
            p
        })
        .map_err(|e| StorageError::Profile(format!("profile {}: {e}", path.display())))
}

/// A profile file: the keys of a `custom:` disk, as TOML. Without `base`, every key is needed
/// but `read_ahead` and the fetches of a lazily fetched volume.
fn from_toml(text: &str) -> std::result::Result<DiskParams, String> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.message().to_owned())?;
    let mut pairs = Vec::new();
    for (key, value) in &table {
        if !CUSTOM_KEYS.iter().any(|k| k.0 == key) {
            let keys: Vec<&str> = CUSTOM_KEYS.iter().map(|k| k.0).collect();
            return Err(format!("unknown key {key:?}: expected one of {}", keys.join(", ")));
        }
        let value = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => return Err(format!("{key} = {other}: expected a string or a number")),
        };
        if value.contains(',') {
            return Err(format!("{key} = {value:?}: a value has no comma"));
        }
        pairs.push(format!("{key}={value}"));
    }
    if !table.contains_key("base")
        && let Some((missing, _)) = CUSTOM_KEYS
            .iter()
            .skip(1)
            .find(|k| !table.contains_key(k.0) && k.0 != "read_ahead" && !FETCH_KEYS.contains(&k.0))
    {
        return Err(format!("missing {missing:?} (give every key, or base = \"hdd\" for the rest)"));
    }
    format!("custom:{}", pairs.join(",")).parse().map_err(|e| format!("{e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("disk.toml");
        std::fs::write(&path, text).unwrap();
        let path = path.to_string_lossy().into_owned();
        (dir, path)
    }

    #[test]
    fn classes_and_files_resolve_to_the_same_model() {
        assert_eq!(resolve("sd").unwrap(), DiskParams::class_defaults(DiskClass::Sd));
        let (_dir, path) = file("base = \"sd\"\nrequest = \"0.5ms\"\nqueue_depth = 2\n");
        let p = resolve(&path).unwrap();
        assert_eq!((p.request_ns, p.queue_depth, p.bandwidth_bytes_per_s), (500_000, 2, 25e6));
        assert_eq!(p.source_of("request_ns"), format!("given in {path}"));
        assert_eq!(p.source_of("bandwidth_bytes_per_s"), "default of the sd class");
    }

    #[test]
    fn bad_profiles_are_one_line_errors() {
        let one_line = |spec: &str| {
            let e = resolve(spec).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            e
        };
        assert!(one_line("floppy").contains("unknown disk class \"floppy\""));
        let (_a, negative) = file("base = \"hdd\"\nseek = \"-3ms\"\n");
        assert!(one_line(&negative).contains("seek=-3ms: expected a time"));
        let (_b, missing) = file("request = \"1ms\"\nseek = \"0\"\n");
        assert!(one_line(&missing).contains("missing \"near_seek\""));
        let (_c, unknown) = file("base = \"sd\"\nspeed = 3\n");
        assert!(one_line(&unknown).contains("unknown key \"speed\""));
        let (_d, garbled) = file("base = \n");
        assert!(one_line(&garbled).starts_with("profile /"));
        assert!(one_line("/nonexistent/disk.toml").contains("No such file"));
    }
}
