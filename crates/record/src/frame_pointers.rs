//! Which programs can be sampled without a copy of their user stack: those whose
//! frame-pointer chain (which the kernel follows for free at each sample) gave the same
//! frames as DWARF unwinding of the copy in an earlier recording. The assembly checks every
//! sample that has both; the verdicts are kept per executable (path, size and mtime) in
//! `$XDG_CACHE_HOME/coldstart/frame-pointers.json` (else `~/.cache/…`), and the next
//! recording marks a process at its exec when its executable is trusted there, so its
//! samples go to an event that copies no stack.
//!
//! Learned rather than guessed from the binary: reading a program's code at its exec
//! would fill the page cache the recording measures, and a program built with frame
//! pointers still runs libraries built without them (a chain through them loses frames).

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Samples a check needs before it is trusted.
pub const MIN_SAMPLES: u64 = 20;
/// The share of those whose chain must be the same as the unwound stack, in percent: a
/// sample taken in a function's prologue or epilogue has a chain one frame short.
pub const MIN_AGREEMENT_PERCENT: u64 = 95;

/// One executable's samples in a recording: how many had both a chain and a copy, and in
/// how many the chain gave the same frames.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    pub compared: u64,
    pub agreed: u64,
}

impl Check {
    pub fn trusted(&self) -> bool {
        self.compared >= MIN_SAMPLES && self.agreed * 100 >= self.compared * MIN_AGREEMENT_PERCENT
    }
}

/// A verdict as kept: for the file of this size and mtime.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Entry {
    size: u64,
    mtime_ns: i64,
    check: Check,
}

/// The verdicts of earlier recordings, by executable path.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Known {
    #[serde(default)]
    executables: BTreeMap<String, Entry>,
}

fn identity(meta: &std::fs::Metadata) -> (u64, i64) {
    (meta.size(), meta.mtime() * 1_000_000_000 + meta.mtime_nsec())
}

/// The cache file, or `None` when there is no home for it.
pub fn cache_path() -> Option<PathBuf> {
    let var = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = var("XDG_CACHE_HOME").or_else(|| var("HOME").map(|h| h.join(".cache")))?;
    Some(base.join("coldstart").join("frame-pointers.json"))
}

impl Known {
    /// The cache as it is; empty when missing or unreadable (it is only a cache).
    pub fn load() -> Known {
        cache_path().map(|p| Known::load_from(&p)).unwrap_or_default()
    }

    /// The cache at `path`; empty when missing, unreadable or not what this version writes.
    pub fn load_from(path: &Path) -> Known {
        std::fs::read(path).ok().and_then(|b| serde_json::from_slice(&b).ok()).unwrap_or_default()
    }

    /// Whether the file at `path`, as `meta` describes it now, was trusted.
    pub fn trusts(&self, path: &str, meta: &std::fs::Metadata) -> bool {
        self.executables
            .get(path)
            .is_some_and(|e| (e.size, e.mtime_ns) == identity(meta) && e.check.trusted())
    }

    /// Whether the executable process `pid` runs now was trusted.
    /// Most execs are of programs never trusted: those cost a map lookup, not a stat.
    pub fn trusts_process(&self, pid: i32, exe: &str) -> bool {
        self.executables.get(exe).is_some_and(|e| e.check.trusted())
            && std::fs::metadata(format!("/proc/{pid}/exe")).is_ok_and(|m| self.trusts(exe, &m))
    }

    /// Records `checks` for the files as they are now; a file that is gone is forgotten.
    pub fn update(&mut self, checks: &BTreeMap<String, Check>) {
        for (path, check) in checks {
            match std::fs::metadata(path) {
                Ok(meta) => {
                    let (size, mtime_ns) = identity(&meta);
                    self.executables.insert(path.clone(), Entry { size, mtime_ns, check: check.clone() });
                }
                Err(_) => {
                    self.executables.remove(path);
                }
            }
        }
    }

    /// Writes the cache (a new file renamed over the old one).
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self).map_err(std::io::Error::other)?)?;
        std::fs::rename(&tmp, path)
    }
}

/// Adds a recording's checks to the cache; says why it could not, if it could not.
pub fn remember(checks: &BTreeMap<String, Check>) -> Option<String> {
    if checks.is_empty() {
        return None;
    }
    let path = cache_path()?;
    let mut known = Known::load();
    known.update(checks);
    known.save(&path).err().map(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_is_trusted_with_enough_samples_nearly_all_the_same() {
        assert!(Check { compared: 400, agreed: 390 }.trusted());
        assert!(!Check { compared: 400, agreed: 370 }.trusted());
        assert!(!Check { compared: 10, agreed: 10 }.trusted());
    }

    #[test]
    fn a_verdict_holds_for_the_same_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prog");
        std::fs::write(&file, b"one").unwrap();
        let path = file.to_string_lossy().into_owned();
        let mut known = Known::default();
        known.update(&BTreeMap::from([(path.clone(), Check { compared: 100, agreed: 100 })]));
        let cache = dir.path().join("cache/frame-pointers.json");
        known.save(&cache).unwrap();
        let loaded = Known::load_from(&cache);
        assert!(loaded.trusts(&path, &std::fs::metadata(&file).unwrap()));
        std::fs::write(&file, b"another build").unwrap();
        assert!(!loaded.trusts(&path, &std::fs::metadata(&file).unwrap()));
        assert!(!loaded.trusts("/elsewhere", &std::fs::metadata(&file).unwrap()));
    }

    #[test]
    fn a_damaged_or_foreign_cache_trusts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prog");
        std::fs::write(&file, b"one").unwrap();
        let meta = std::fs::metadata(&file).unwrap();
        let path = file.to_string_lossy().into_owned();
        let cache = dir.path().join("frame-pointers.json");
        let mut known = Known::default();
        known.update(&BTreeMap::from([(path.clone(), Check { compared: 100, agreed: 100 })]));
        known.save(&cache).unwrap();
        assert!(Known::load_from(&cache).trusts(&path, &meta));
        let good = std::fs::read(&cache).unwrap();
        let damaged: [&[u8]; 4] = [&good[..good.len() - 3], b"\xff\xfe", b"[]", b"{\"executables\": 7}"];
        for bytes in damaged {
            std::fs::write(&cache, bytes).unwrap();
            assert!(!Known::load_from(&cache).trusts(&path, &meta));
        }
        assert!(!Known::load_from(&dir.path().join("missing.json")).trusts(&path, &meta));
    }
}
