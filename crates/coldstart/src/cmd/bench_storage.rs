//! `coldstart bench --storage PROFILE`: the benchmark on an emulated slow disk. The files
//! the commands read (from `--trace`, `--files`, or learned by a first run) are copied onto
//! an emulated device of that profile and bind-mounted over their own paths in a private
//! mount namespace, so the commands run unchanged and read from the device; a prefetch plan
//! is pointed at the copies. Everything is undone when the benchmark ends (the namespace
//! goes with the process; the device is torn down on drop, on SIGINT and SIGTERM too).

use std::collections::BTreeSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use anyhow::{Context, bail};
use coldstart_analyze::doctor::DiskParams;
use coldstart_bench::{AfterEviction, BenchConfig, FileSource, fileset};
use coldstart_prefetch::plan::{Plan, PlanFileKind};
use coldstart_storage::StagedFiles;
use coldstart_trace::Dev;

/// The benchmark's files on an emulated device; undone on drop.
pub struct OnStorage {
    pub staged: StagedFiles,
    pub profile: String,
    /// Files written beside the device (the list, the moved plan), removed first.
    written: Vec<PathBuf>,
}

impl Drop for OnStorage {
    fn drop(&mut self) {
        for path in &self.written {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The files every command of `config` reads, from its file source (learning them, as
/// root, by a recorded first run of each command).
fn files_of(config: &BenchConfig) -> anyhow::Result<Vec<PathBuf>> {
    let mut paths = BTreeSet::new();
    match &config.files {
        FileSource::Trace(trace) => {
            let set = fileset::read_only_from_trace(trace)?;
            for note in &set.notes {
                eprintln!("coldstart bench: --storage: {note}");
            }
            paths.extend(set.paths);
        }
        FileSource::List(list) => paths.extend(fileset::from_list(list)?.paths),
        FileSource::Learn => {
            for command in &config.commands {
                eprintln!("coldstart bench: learning the files of {} (a first, recorded run)", command.name);
                let learned = coldstart_bench::hooks::learn_with_hooks(command, config)?;
                paths.extend(learned.paths);
            }
        }
    }
    Ok(paths.into_iter().filter(|p| p.is_absolute() && p.is_file()).collect())
}

/// Puts the files of `config`'s commands on a device of `profile` and points `config` at
/// them: eviction and the plan (if any) now name the copies. Call before anything starts
/// a thread that the benchmark's commands must inherit the mounts from.
pub fn stage(profile: &str, params: DiskParams, config: &mut BenchConfig) -> anyhow::Result<OnStorage> {
    if !coldstart_bench::evict::is_root() {
        bail!("--storage needs root (loop devices, FUSE, mounts and a private mount namespace)");
    }
    let files = files_of(config)?;
    if files.is_empty() {
        bail!("--storage: no files to put on the device (the file source named none that exist)");
    }
    let originals = identities(&files);
    let staged =
        StagedFiles::stage(params.clone(), &files).context("putting the files on the emulated device")?;
    let list = staged.disk().run_dir().join("files.list");
    let text: String = staged.paths().iter().map(|p| format!("{}\n", p.display())).collect();
    std::fs::write(&list, text).with_context(|| format!("writing {}", list.display()))?;
    let mut written = vec![list.clone()];
    config.files = FileSource::List(list);
    if params.is_lazy() {
        config.after_eviction = Some(AfterEviction(std::sync::Arc::new(staged.disk().restorer())));
    }
    for (i, prefetch) in config.prefetch.iter_mut().enumerate() {
        let moved = staged.disk().run_dir().join(format!("plan-{i}-on-device.json"));
        let (moved_files, total) = point_plan_at_copies(&prefetch.plan, &files, &originals, &staged, &moved)?;
        written.push(moved.clone());
        if moved_files < total {
            eprintln!(
                "coldstart bench: {} of the {total} files of plan `{}` are not on the emulated device (not read \
                 by the commands, changed since, or the real disk's metadata): the replay skips them",
                total - moved_files,
                prefetch.name,
            );
        }
        prefetch.plan = moved;
    }
    let report = &staged.report;
    eprintln!(
        "coldstart bench: {} files ({:.1} MiB) on an emulated {} ({}, {}), in their order on the real disk{}",
        report.files,
        report.bytes as f64 / 1048576.0,
        profile,
        params.description,
        staged.disk().device().display(),
        match report.skipped.len() {
            0 => String::new(),
            n => format!("; {n} could not be copied and stay on the real disk"),
        }
    );
    Ok(OnStorage { staged, profile: profile.to_owned(), written })
}

/// The identities of `files` before they are staged (dev and inode), for
/// [`point_plan_at_copies`].
pub fn identities(files: &[PathBuf]) -> Vec<Option<(Dev, u64)>> {
    files.iter().map(|f| std::fs::metadata(f).ok().map(|m| (Dev::from_user(m.dev()), m.ino()))).collect()
}

/// Writes to `out` the plan at `plan_path` with each of its regular files that `staged`
/// holds (and that was the same file as the plan's, by `originals`) named by its copy's
/// identity, so that the replay reads the copies; the others stay as they are and the
/// replay skips them as stale. Returns how many files were moved, of how many.
pub fn point_plan_at_copies(
    plan_path: &std::path::Path,
    files: &[PathBuf],
    originals: &[Option<(Dev, u64)>],
    staged: &StagedFiles,
    out: &std::path::Path,
) -> anyhow::Result<(usize, usize)> {
    let mut plan = Plan::load(plan_path)?;
    let mut moved_files = 0;
    for file in &mut plan.files {
        let path = PathBuf::from(&file.path);
        let original = files.iter().position(|f| *f == path).and_then(|i| originals[i]);
        if file.kind == PlanFileKind::Regular
            && original == Some((file.dev, file.ino))
            && staged.holds(&path)
            && let Ok(copy) = std::fs::metadata(&path)
        {
            file.dev = Dev::from_user(copy.dev());
            file.ino = copy.ino();
            file.mtime_ns = Some(copy.mtime() * 1_000_000_000 + copy.mtime_nsec());
            moved_files += 1;
        }
    }
    plan.save(out)?;
    Ok((moved_files, plan.files.len()))
}

impl OnStorage {
    /// One line on what the device served during the benchmark.
    pub fn served(&self) -> String {
        let disk = self.staged.disk();
        format!(
            "storage: emulated {} {}",
            self.profile,
            crate::cmd::storage::served(&disk.stats(), &disk.params())
        )
    }
}
