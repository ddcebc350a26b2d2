//! The files of one bootchart2 log, read from a folder or a tar archive (plain or
//! gzip-compressed, as `bootchartd` writes `bootchart.tgz`) into memory.
//!
//! Only the files the importer understands are kept; others (`dmesg`, charts) are
//! ignored. Inside an archive, files are matched by their base name, so a tarball
//! whose members sit in a sub-folder works too.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::{ImportError, Result};

/// The log files this importer reads, by their bootchart2 names.
pub const KNOWN_FILES: &[&str] =
    &[HEADER, PROC_STAT, PROC_DISKSTATS, PROC_PS, KERNEL_PACCT, TASKSTATS, PROC_MEMINFO, CMDLINE2, PATERNITY];

pub const HEADER: &str = "header";
pub const PROC_STAT: &str = "proc_stat.log";
pub const PROC_DISKSTATS: &str = "proc_diskstats.log";
pub const PROC_PS: &str = "proc_ps.log";
pub const KERNEL_PACCT: &str = "kernel_pacct";
pub const TASKSTATS: &str = "taskstats.log";
pub const PROC_MEMINFO: &str = "proc_meminfo.log";
pub const CMDLINE2: &str = "cmdline2.log";
pub const PATERNITY: &str = "paternity.log";

/// The contents of one bootchart2 log, file name to bytes.
#[derive(Clone, Debug, Default)]
pub struct LogFiles {
    origin: PathBuf,
    /// True when the files came from an archive (messages then say `ARCHIVE:NAME`).
    archive: bool,
    files: BTreeMap<String, Vec<u8>>,
}

impl LogFiles {
    /// Reads a log folder or a tar / tar.gz archive.
    pub fn read(path: &Path) -> Result<LogFiles> {
        let io_err = |source| ImportError::Io { path: path.to_owned(), source };
        let metadata = std::fs::metadata(path).map_err(io_err)?;
        if metadata.is_dir() {
            return LogFiles::read_dir(path);
        }
        let bytes = std::fs::read(path).map_err(io_err)?;
        LogFiles::from_archive(path, &bytes)
    }

    fn read_dir(dir: &Path) -> Result<LogFiles> {
        let mut logs = LogFiles { origin: dir.to_owned(), archive: false, files: BTreeMap::new() };
        for name in KNOWN_FILES {
            let path = dir.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => {
                    logs.files.insert((*name).to_owned(), bytes);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => return Err(ImportError::Io { path, source }),
            }
        }
        Ok(logs)
    }

    /// Reads the members of a tar archive, gzip-compressed or not (`origin` names it in errors).
    pub fn from_archive(origin: &Path, bytes: &[u8]) -> Result<LogFiles> {
        let archive_err = |source| ImportError::Archive { path: origin.to_owned(), source };
        let is_gzip = bytes.starts_with(&[0x1f, 0x8b]);
        let reader: Box<dyn Read + '_> =
            if is_gzip { Box::new(flate2::read::GzDecoder::new(bytes)) } else { Box::new(bytes) };
        let mut archive = tar::Archive::new(reader);
        let mut logs = LogFiles { origin: origin.to_owned(), archive: true, files: BTreeMap::new() };
        for entry in archive.entries().map_err(archive_err)? {
            let mut entry = entry.map_err(archive_err)?;
            if !entry.header().entry_type().is_file() {
                continue;
            }
            let path = entry.path().map_err(archive_err)?;
            let Some(name) = path.file_name().and_then(|n| n.to_str()) else { continue };
            let Some(known) = KNOWN_FILES.iter().find(|k| **k == name) else { continue };
            if logs.files.contains_key(*known) {
                continue;
            }
            let mut data = Vec::new();
            entry.read_to_end(&mut data).map_err(archive_err)?;
            logs.files.insert((*known).to_owned(), data);
        }
        if logs.files.is_empty() && !looks_like_tar(bytes, is_gzip) {
            let what = "neither a folder nor a tar archive";
            return Err(archive_err(std::io::Error::new(std::io::ErrorKind::InvalidData, what)));
        }
        Ok(logs)
    }

    /// Builds a log from files in memory (for tests and other front ends).
    pub fn from_files<I, N, B>(origin: &Path, files: I) -> LogFiles
    where
        I: IntoIterator<Item = (N, B)>,
        N: Into<String>,
        B: Into<Vec<u8>>,
    {
        let files = files.into_iter().map(|(n, b)| (n.into(), b.into())).collect();
        LogFiles { origin: origin.to_owned(), archive: false, files }
    }

    /// The folder or archive the files came from.
    pub fn origin(&self) -> &Path {
        &self.origin
    }

    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.files.get(name).map(Vec::as_slice)
    }

    /// A required file, or the error that says it is missing.
    pub fn require(&self, name: &'static str) -> Result<&[u8]> {
        self.get(name).ok_or_else(|| ImportError::Missing { path: self.origin.clone(), file: name })
    }

    /// How a file of this log is named in messages: `DIR/NAME` or `ARCHIVE:NAME`.
    pub fn display_name(&self, name: &str) -> String {
        let origin = self.origin.display();
        if self.archive { format!("{origin}:{name}") } else { format!("{origin}/{name}") }
    }
}

fn looks_like_tar(bytes: &[u8], is_gzip: bool) -> bool {
    // A tar header has "ustar" at offset 257; a gzip stream was already accepted by its magic.
    is_gzip || bytes.get(257..262) == Some(b"ustar".as_slice())
}
