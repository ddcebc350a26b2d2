//! Where a dataset keeps its files: a folder per table, in it a folder per build
//! (`build=41.2/`, Hive style, so engines skip the builds a query does not want), and in
//! that one file per trace not yet compacted (`<trace id>.parquet`) and the parts a
//! compaction wrote (`part-<digest>.parquet`, many traces each).
//!
//! A build is written into its folder's name as Hive writes partition values: characters
//! outside `A-Z a-z 0-9 . _ -` as `%XX`, no build as `__HIVE_DEFAULT_PARTITION__`; DuckDB
//! and Spark read the name back as the build, or null.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// The partition key: every table's folders are `build=…`.
pub const PARTITION_KEY: &str = "build";

/// The folder name Hive engines read as a null build.
pub const NO_BUILD: &str = "__HIVE_DEFAULT_PARTITION__";

/// The folder where a compaction stages its files (engines and the survey skip it).
pub const STAGING: &str = ".compaction";

/// The file export and compaction lock, so that one does not fold what the other writes.
pub const LOCK_FILE: &str = ".lock";

/// The name of the folder holding the traces of `build`.
pub fn partition_name(build: Option<&str>) -> String {
    let Some(build) = build else {
        return format!("{PARTITION_KEY}={NO_BUILD}");
    };
    let mut name = format!("{PARTITION_KEY}=");
    for byte in build.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-') {
            name.push(char::from(byte));
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name
}

/// The build a partition folder's name stands for (`Some(None)`: no build), or `None`
/// when the name is not a partition folder's.
pub fn partition_build(name: &str) -> Option<Option<String>> {
    let value = name.strip_prefix(PARTITION_KEY)?.strip_prefix('=')?;
    if value == NO_BUILD {
        return Some(None);
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = value.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let build = String::from_utf8(out).ok()?;
    (partition_name(Some(&build)) == name).then_some(Some(build))
}

/// The folder of table `table`'s files of build `build`.
pub fn partition_dir(dir: &Path, table: &str, build: Option<&str>) -> PathBuf {
    dir.join(table).join(partition_name(build))
}

/// Where table `table` keeps the rows of trace `id` of build `build` until a compaction
/// folds them into a part.
pub fn table_file(dir: &Path, table: &str, build: Option<&str>, id: &str) -> PathBuf {
    partition_dir(dir, table, build).join(format!("{id}.parquet"))
}

/// True for a trace id: 32 lowercase hex digits.
pub fn is_trace_id(text: &str) -> bool {
    text.len() == 32 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The name of the part holding the traces `ids` (sorted): from their digest, so the same
/// traces give the same name in every table.
pub fn part_name(ids: &[String]) -> String {
    let mut hasher = Sha256::new();
    for id in ids {
        hasher.update(id.as_bytes());
        hasher.update(b"\n");
    }
    let digest: String = hasher.finalize()[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("part-{digest}.parquet")
}

/// What a file's name says it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileName {
    /// `<trace id>.parquet`: one trace, as exported.
    Trace(String),
    /// `part-….parquet`: a compaction's part.
    Part,
    /// `.….tmp`: a temporary file of an interrupted export or compaction.
    Temporary,
    /// Any other `.parquet` file.
    OtherParquet,
    /// Anything else.
    Other,
}

pub fn classify(name: &str) -> FileName {
    if name.starts_with('.') && name.ends_with(".tmp") {
        return FileName::Temporary;
    }
    let Some(stem) = name.strip_suffix(".parquet") else {
        return FileName::Other;
    };
    if is_trace_id(stem) {
        FileName::Trace(stem.to_owned())
    } else if stem.starts_with("part-") {
        FileName::Part
    } else {
        FileName::OtherParquet
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_round_trip_through_folder_names() {
        for build in ["41.2", "b1", "2024-01-01_nightly", "a/b c", "é=%", ""] {
            let name = partition_name(Some(build));
            assert!(
                !name[PARTITION_KEY.len() + 1..].contains(['/', '=', ' ', '%'].as_slice())
                    || name.contains('%')
            );
            assert_eq!(partition_build(&name), Some(Some(build.to_owned())), "{name}");
        }
        assert_eq!(partition_name(Some("a/b c")), "build=a%2Fb%20c");
        assert_eq!(partition_build(&partition_name(None)), Some(None));
        assert_eq!(partition_build("build=a%2fb"), None, "lowercase escapes are not ours");
        assert_eq!(partition_build("machine=x"), None);
        assert_eq!(partition_build("build=%G1"), None);
    }

    #[test]
    fn file_names_say_what_they_hold() {
        assert_eq!(
            classify("0123456789abcdef0123456789abcdef.parquet"),
            FileName::Trace("0123456789abcdef0123456789abcdef".into())
        );
        assert_eq!(classify("part-00ff.parquet"), FileName::Part);
        assert_eq!(classify(".0123.parquet.tmp"), FileName::Temporary);
        assert_eq!(classify("copy.parquet"), FileName::OtherParquet);
        assert_eq!(classify("notes.txt"), FileName::Other);
        let ids = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(part_name(&ids), part_name(&ids.clone()));
        assert_ne!(part_name(&ids), part_name(&ids[..1]));
    }
}
