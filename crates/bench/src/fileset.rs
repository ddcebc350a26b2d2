//! The files a command reads, which `--evict files` evicts: from a trace's files
//! table, from a list, or learned by a first run.
//!
//! As root, learning records the first run with the recorder (`coldstart record`
//! after dropping the caches, so every file read from disk is in the trace) and
//! takes the trace's files table. Otherwise (or if recording fails), learning runs the command once (with the benchmark's readiness, then ends it)
//! under `strace -f -y` when strace is installed, which names every file opened,
//! and samples `/proc/PID/maps`, `/proc/PID/fd` and `/proc/PID/exe` of the tree (strace
//! itself excepted) every
//! 10 ms, which adds what is mapped without an open the tracer sees (the dynamic
//! loader). Without strace, sampling alone misses files opened and closed between
//! two samples (e.g. Python's .pyc files); the note says so.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::Duration;

use coldstart_launch::{Command, Ending, Input, Output, PausedChild, RunAs, Until, WaitOptions, tree_pids};
use coldstart_trace::{FileKind, Trace};

use crate::error::{BenchError, Result};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FileSet {
    pub paths: Vec<PathBuf>,
    /// Block devices holding the files, whose cached metadata `files` eviction drops
    /// too (only those this process may open; see [`crate::evict::metadata_devices`]).
    pub devices: Vec<PathBuf>,
    pub bytes: u64,
    pub source: String,
    pub notes: Vec<String>,
}

impl FileSet {
    /// `files` eviction: DONTNEED, twice, on every file and then on the devices
    /// holding them (their metadata); returns how many files could not be opened.
    pub fn evict(&self) -> usize {
        let failed = crate::evict::fadvise_dontneed(&self.paths);
        crate::evict::fadvise_dontneed(&self.devices);
        failed
    }

    /// Bytes still cached of the files and the devices' metadata, where the kernel
    /// answers truthfully for the files.
    pub fn residual_bytes(&self) -> Option<u64> {
        let files = crate::evict::residual(&self.paths).0?;
        Some(files + crate::evict::residual(&self.devices).0.unwrap_or(0))
    }
}

/// Keeps the regular files that exist, sorted, totals their sizes, and finds the
/// block devices holding them.
fn finish(candidates: impl IntoIterator<Item = PathBuf>, source: String, mut notes: Vec<String>) -> FileSet {
    let mut bytes = 0;
    let mut paths = Vec::new();
    for path in candidates.into_iter().collect::<BTreeSet<_>>() {
        if let Ok(meta) = std::fs::metadata(&path)
            && meta.is_file()
        {
            bytes += meta.len();
            paths.push(path);
        }
    }
    let (devices, device_notes) = crate::evict::metadata_devices(&paths);
    notes.extend(device_notes);
    FileSet { paths, devices, bytes, source, notes }
}

pub fn from_trace(path: &Path) -> Result<FileSet> {
    let trace = Trace::read(path)?;
    let files = trace
        .files
        .into_iter()
        .filter(|f| f.kind == FileKind::Regular)
        .filter_map(|f| f.path)
        .map(PathBuf::from);
    Ok(finish(files, format!("files table of trace {}", path.display()), Vec::new()))
}

/// The regular files of a trace that the start only read: those it wrote (modified after the
/// recording began) or that were replaced since (another inode at the path now, as a program
/// that saves by renaming leaves it) are left out, and a note counts them. These are the
/// files that can be put on an emulated device under their paths: a bind mount over a file
/// the program renames onto would make its save fail (EBUSY).
pub fn read_only_from_trace(path: &Path) -> Result<FileSet> {
    let trace = Trace::read(path)?;
    let start = trace.meta.start_unix_ns;
    let mut written = 0;
    let mut kept = Vec::new();
    for file in trace.files.into_iter().filter(|f| f.kind == FileKind::Regular) {
        let Some(path) = file.path.map(PathBuf::from) else { continue };
        let modified = start > 0 && file.mtime_ns.is_some_and(|m| m >= start);
        let replaced = std::fs::metadata(&path).is_ok_and(|now| {
            use std::os::unix::fs::MetadataExt;
            (coldstart_trace::Dev::from_user(now.dev()), now.ino()) != (file.dev, file.ino)
        });
        if modified || replaced {
            written += 1;
        } else {
            kept.push(path);
        }
    }
    let notes = match written {
        0 => Vec::new(),
        n => vec![format!(
            "{n} files of the trace were written by the start or replaced since (saved by renaming): left out, \
             they stay on the real disk"
        )],
    };
    Ok(finish(kept, format!("files table of trace {}", path.display()), notes))
}

pub fn from_list(path: &Path) -> Result<FileSet> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::file(path, e))?;
    let files =
        text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(PathBuf::from);
    Ok(finish(files, format!("list {}", path.display()), Vec::new()))
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(program)).find(|p| p.is_file())
}

/// Paths from one strace line: the `<path>` after a returned descriptor (`-y`) and,
/// for exec, the first quoted argument.
pub fn strace_paths(line: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some((_, ret)) = line.rsplit_once(") = ")
        && let Some(start) = ret.find('<')
        && let Some(end) = ret.rfind('>')
        && end > start + 1
    {
        out.push(PathBuf::from(&ret[start + 1..end]));
    }
    if line.contains("execve(")
        && let Some((_, rest)) = line.split_once("execve(\"")
        && let Some((path, _)) = rest.split_once('"')
    {
        out.push(PathBuf::from(path));
    }
    out
}

/// Files mapped, open or executed by `pid` right now.
fn sample_process(pid: i32, into: &mut BTreeSet<PathBuf>) {
    if let Ok(maps) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
        for line in maps.lines() {
            if let Some(pos) = line.find(" /") {
                into.insert(PathBuf::from(line[pos + 1..].trim_end_matches(" (deleted)")));
            }
        }
    }
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(target) = std::fs::read_link(fd.path())
                && target.is_absolute()
            {
                into.insert(target);
            }
        }
    }
    if let Ok(exe) = std::fs::read_link(format!("/proc/{pid}/exe")) {
        into.insert(exe);
    }
}

/// Records a cold run of `argv` with the recorder (root only) and returns its trace's files.
fn learn_by_recording(
    argv: &[String],
    run_as: &RunAs,
    until: &[Until],
    timeout: Duration,
) -> Result<FileSet> {
    let learn_error = |source: Box<dyn std::error::Error + Send + Sync>| BenchError::Learn {
        command: argv.join(" "),
        source,
    };
    let dir = tempfile::tempdir().map_err(|e| learn_error(e.into()))?;
    let output = dir.path().join("learn.coldstart");
    let config = coldstart_record::RecordConfig {
        command: argv.iter().map(Into::into).collect(),
        output: Some(output.clone()),
        until: until.to_vec(),
        timeout: Some(timeout),
        cold: true,
        as_root: matches!(run_as, RunAs::Current),
        ..coldstart_record::RecordConfig::default()
    };
    let recorded = coldstart_record::record(&config).map_err(|e| learn_error(e.into()))?;
    let mut set = from_trace(&recorded.path)?;
    set.source = "learned by a first run recorded with `coldstart record` (cold)".into();
    Ok(set)
}

/// Runs `argv` once and returns the files it used (see the module docs).
pub fn learn(argv: &[String], run_as: &RunAs, until: &[Until], timeout: Duration) -> Result<FileSet> {
    if crate::evict::is_root() {
        match learn_by_recording(argv, run_as, until, timeout) {
            Ok(set) if !set.paths.is_empty() => return Ok(set),
            Ok(_) => {}
            Err(err) => {
                let mut set = learn_by_tracing(argv, run_as, until, timeout)?;
                set.notes.push(format!(
                    "recording the first run failed ({}); used strace instead",
                    coldstart_trace::error_chain(&err)
                ));
                return Ok(set);
            }
        }
    }
    learn_by_tracing(argv, run_as, until, timeout)
}

/// The unprivileged way: strace and /proc sampling (see the module docs).
pub fn learn_by_tracing(
    argv: &[String],
    run_as: &RunAs,
    until: &[Until],
    timeout: Duration,
) -> Result<FileSet> {
    let learn_error = |source: Box<dyn std::error::Error + Send + Sync>| BenchError::Learn {
        command: argv.join(" "),
        source,
    };
    let dir = tempfile::tempdir().map_err(|e| learn_error(e.into()))?;
    let log = dir.path().join("strace.log");
    let strace = which("strace");
    let mut full: Vec<String> = Vec::new();
    if let Some(strace) = &strace {
        full.extend([strace.to_string_lossy().into_owned(), "-f".into(), "-qq".into(), "-y".into()]);
        full.extend(["-e".into(), "trace=open,openat,openat2,creat,execve,execveat".into()]);
        full.extend(["-o".into(), log.to_string_lossy().into_owned(), "--".into()]);
        if !matches!(run_as, RunAs::Current) {
            std::os::unix::fs::chown(
                dir.path(),
                coldstart_launch::resolve_user(run_as)?.map(|c| c.uid),
                None,
            )
            .map_err(|e| learn_error(e.into()))?;
        }
    }
    full.extend(argv.iter().cloned());
    let mut command = Command::new(full);
    command.run_as(run_as.clone()).stdin(Input::Null).stdout(Output::Null).stderr(Output::Null);
    if until.iter().any(Until::watches_output) {
        command.stdout(Output::Watch { echo: false }).stderr(Output::Watch { echo: false });
    }
    let paused = PausedChild::spawn(&command)?;
    let tracer = if strace.is_some() { paused.pid() } else { 0 };
    let root = Arc::new(AtomicI32::new(paused.tree_root()));
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (root, stop) = (Arc::clone(&root), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            while !stop.load(Ordering::SeqCst) {
                for pid in tree_pids(root.load(Ordering::SeqCst)).into_iter().filter(|&p| p != tracer) {
                    sample_process(pid, &mut seen);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        })
    };
    let mut running = paused.resume()?;
    let outcome = running.wait_all(until, &WaitOptions { timeout: Some(timeout), ..WaitOptions::default() });
    stop.store(true, Ordering::SeqCst);
    running.finish(&Ending::default())?;
    let outcome = outcome?;
    let mut files = sampler.join().unwrap_or_default();
    let mut notes = Vec::new();
    if !outcome.met {
        notes.push(format!(
            "the learning run ended by {} before it was ready; its file set may be short",
            outcome.reason
        ));
    }
    let source = match &strace {
        Some(_) => {
            let text =
                std::fs::read_to_string(&log).map_err(|e| learn_error(BenchError::file(&log, e).into()))?;
            files.extend(text.lines().flat_map(strace_paths));
            "learned by a first run under strace -f, plus /proc sampling".to_owned()
        }
        None => {
            notes.push(
                "strace is not installed, so the file set comes from sampling /proc every 10 ms: files opened and \
                 closed between samples are missed (install strace for a complete set)"
                    .into(),
            );
            "learned by a first run, sampling /proc".to_owned()
        }
    };
    files.retain(|p| {
        !p.starts_with("/proc")
            && !p.starts_with("/sys")
            && !p.starts_with("/dev")
            && !p.starts_with(dir.path())
    });
    Ok(finish(files, source, notes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strace_lines() {
        let open = r#"1234  openat(AT_FDCWD</home/u>, "lib.so", O_RDONLY|O_CLOEXEC) = 3</usr/lib/x86_64-linux-gnu/lib.so>"#;
        assert_eq!(strace_paths(open), [PathBuf::from("/usr/lib/x86_64-linux-gnu/lib.so")]);
        let failed = r#"1234 openat(AT_FDCWD, "/nope", O_RDONLY) = -1 ENOENT (No such file or directory)"#;
        assert!(strace_paths(failed).is_empty());
        let exec = r#"77 execve("/usr/bin/python3", ["python3", "-c", "pass"], 0x7ffd /* 20 vars */) = 0"#;
        assert_eq!(strace_paths(exec), [PathBuf::from("/usr/bin/python3")]);
        let resumed = r#"1235 <... openat resumed>) = 5</etc/ld.so.cache>"#;
        assert_eq!(strace_paths(resumed), [PathBuf::from("/etc/ld.so.cache")]);
    }

    #[test]
    fn files_the_start_wrote_or_replaced_are_not_staged() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let identity = |path: &Path| {
            let m = std::fs::metadata(path).unwrap();
            (coldstart_trace::Dev::from_user(m.dev()), m.ino(), m.mtime() * 1_000_000_000 + m.mtime_nsec())
        };
        let [read, written, replaced] = ["read", "written", "replaced"].map(|n| dir.path().join(n));
        for path in [&read, &written, &replaced] {
            std::fs::write(path, b"data").unwrap();
        }
        let start = identity(&read).2 + 1;
        let file = |id: u32, path: &Path, (dev, ino, mtime): (coldstart_trace::Dev, u64, i64)| {
            coldstart_trace::File {
                id,
                dev,
                ino,
                path: Some(path.to_string_lossy().into_owned()),
                kind: FileKind::Regular,
                size: Some(4),
                mtime_ns: Some(mtime),
            }
        };
        let (dev, ino, _) = identity(&written);
        let old_replaced = identity(&replaced);
        // Saved by renaming a new file over it: another inode at the path now.
        let new = dir.path().join("replaced.new");
        std::fs::write(&new, b"new data").unwrap();
        std::fs::rename(&new, &replaced).unwrap();
        let trace = Trace {
            meta: coldstart_trace::Meta { start_unix_ns: start, ..Default::default() },
            files: vec![
                file(1, &read, identity(&read)),
                file(2, &written, (dev, ino, start + 5)),
                file(3, &replaced, old_replaced),
            ],
            ..Default::default()
        };
        let path = dir.path().join("t.coldstart");
        let mut writer = coldstart_trace::TraceWriter::create(&path).unwrap();
        writer.all(&trace).unwrap();
        writer.finish().unwrap();
        let set = read_only_from_trace(&path).unwrap();
        assert_eq!(set.paths, [read]);
        let written: Vec<&String> = set.notes.iter().filter(|n| n.contains("written by the start")).collect();
        assert_eq!(written.len(), 1, "{:?}", set.notes);
        assert!(written[0].starts_with("2 files of the trace were written"), "{:?}", set.notes);
        assert_eq!(from_trace(&path).unwrap().paths.len(), 3, "eviction still takes them all");
    }

    #[test]
    fn lists_keep_existing_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a");
        std::fs::write(&file, b"12345").unwrap();
        let list = dir.path().join("list");
        std::fs::write(
            &list,
            format!("# comment\n{}\n/nonexistent/x\n{}\n\n", file.display(), dir.path().display()),
        )
        .unwrap();
        let set = from_list(&list).unwrap();
        assert_eq!(set.paths, [file]);
        assert_eq!(set.bytes, 5);
    }
}
