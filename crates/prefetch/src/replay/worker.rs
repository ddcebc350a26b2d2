//! The replay threads: each takes the next step of the plan (so steps start in plan
//! order and at most `depth` run at once), opens files on first use (checking their
//! identity), and tallies what became of every range. The filesystem-metadata ranges
//! go first, by disk offset, and the other steps wait until they are in: otherwise the
//! directory steps and opens read the same inode-table and directory blocks themselves,
//! one 4 KiB bio per block (ext4's inode-table readahead submits each block alone).
//! A paced replay (`pacing.rs`) goes in first-need order instead, metadata included
//! where it was first needed, and gives way to the device's other requests before
//! each read.

use std::fs::{File, Metadata};
use std::io::ErrorKind;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use super::pacing::Pacing;
use super::sys::{self, cached_pages};
use super::{Fill, Method, ReplayOptions, ReplayReport, Tally};
use crate::plan::{Order, Plan, PlanFile, PlanFileKind, Step};
use coldstart_trace::Dev;

const BUFFER_BYTES: usize = 256 * 1024;
/// What the kernel's readahead may bring in past the end of a range read with
/// `Fill::Sequential` (measured: about twice an 8 MiB readahead window).
const READ_AHEAD_ALLOWANCE: u64 = 16 << 20;
const PROBLEMS_LISTED: usize = 20;

/// Why a file is not read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Skip {
    Stale,
    Missing,
    Unreadable,
}

enum FileState {
    Unopened,
    Ready { fd: Arc<File>, residency_known: bool },
    Skipped(Skip),
    Closed,
}

struct Slot {
    state: Mutex<FileState>,
    /// Steps of the file not yet done; the descriptor is closed after the last.
    remaining: AtomicUsize,
}

struct Shared<'a> {
    plan: &'a Plan,
    /// The metadata ranges first (`metadata_steps` of them), then the rest in plan order.
    steps: Vec<Step>,
    metadata_steps: usize,
    /// Metadata steps finished; the other steps start once all are.
    metadata_done: Mutex<usize>,
    metadata_in: Condvar,
    options: &'a ReplayOptions,
    /// Set for a paced replay alongside a start.
    pacing: Option<&'a Pacing>,
    cancel: &'a AtomicBool,
    next: AtomicUsize,
    committed: AtomicU64,
    budget: u64,
    slots: Vec<Slot>,
    problems: Mutex<(Vec<String>, usize)>,
}

/// What one thread counted.
#[derive(Default)]
struct Local {
    resident: Tally,
    fetched: Tally,
    unknown_residency: Tally,
    stale: Tally,
    missing: Tally,
    unreadable: Tally,
    over_budget: Tally,
    failed: Tally,
    metadata_fetched: Tally,
    metadata_unreadable: Tally,
    sequential: Tally,
    read_ahead_beyond: u64,
    stale_files: usize,
    missing_files: usize,
    unreadable_files: usize,
    files_opened: usize,
    directories: usize,
    directories_failed: usize,
    entries_looked_up: u64,
}

impl Shared<'_> {
    fn problem(&self, text: String) {
        let mut p = self.problems.lock().unwrap_or_else(|e| e.into_inner());
        if p.0.len() < PROBLEMS_LISTED { p.0.push(text) } else { p.1 += 1 }
    }
}

fn is_metadata_range(plan: &Plan, step: Step) -> bool {
    matches!(step, Step::Range { file, .. } if plan.files[file].kind == PlanFileKind::BlockDevice)
}

/// The steps of a paced replay: the ones the options let run, by first need.
fn paced_order(plan: &Plan, options: &ReplayOptions) -> Vec<Step> {
    crate::order::steps(&plan.files, &plan.directories, Order::FirstNeed, 1)
        .into_iter()
        .filter(|&s| enabled(plan, options, s))
        .collect()
}

/// The steps the options let run, the metadata ranges first (by device and offset, as
/// the plan lists them), and how many those are.
fn replay_order(plan: &Plan, options: &ReplayOptions) -> (Vec<Step>, usize) {
    let (mut steps, rest): (Vec<Step>, Vec<Step>) = plan
        .steps
        .iter()
        .copied()
        .filter(|&s| enabled(plan, options, s))
        .partition(|&s| is_metadata_range(plan, s));
    steps.sort_by_key(|s| match *s {
        Step::Range { file, range } => (file, plan.files[file].ranges[range].offset),
        _ => (0, 0),
    });
    let metadata = steps.len();
    steps.extend(rest);
    (steps, metadata)
}

/// Whether the options let `step` run (metadata and directories can be turned off).
fn enabled(plan: &Plan, options: &ReplayOptions, step: Step) -> bool {
    match step {
        Step::Directory(_) => options.directories,
        Step::Open(f) | Step::Range { file: f, .. } => {
            options.metadata || plan.files[f].kind != PlanFileKind::BlockDevice
        }
    }
}

fn identity_problem(file: &PlanFile, st: &Metadata) -> Option<String> {
    let kind = st.file_type();
    match file.kind {
        PlanFileKind::BlockDevice => {
            let rdev = Dev::from_user(st.rdev());
            if !kind.is_block_device() {
                Some("no longer a block device".into())
            } else if rdev != file.dev {
                Some(format!("now device {rdev}, planned {}", file.dev))
            } else {
                None
            }
        }
        PlanFileKind::Regular => {
            let dev = Dev::from_user(st.dev());
            let mtime = st.mtime() * 1_000_000_000 + st.mtime_nsec();
            if !kind.is_file() {
                Some("no longer a regular file".into())
            } else if dev != file.dev || st.ino() != file.ino {
                Some(format!(
                    "replaced (now {dev} inode {}, planned {} inode {})",
                    st.ino(),
                    file.dev,
                    file.ino
                ))
            } else if file.size.is_some_and(|s| s != st.size()) {
                Some(format!("size changed ({} → {} bytes)", file.size.unwrap_or(0), st.size()))
            } else if file.mtime_ns.is_some_and(|m| m != mtime) {
                Some("modified since the plan was made (mtime differs)".into())
            } else {
                None
            }
        }
    }
}

/// The open descriptor of file `f` and whether cachestat answers for it, opening
/// and checking it on first use.
fn file_fd(shared: &Shared<'_>, f: usize, local: &mut Local) -> Result<(Arc<File>, bool), Skip> {
    let slot = &shared.slots[f];
    let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
    match &*state {
        FileState::Ready { fd, residency_known } => return Ok((Arc::clone(fd), *residency_known)),
        FileState::Skipped(skip) => return Err(*skip),
        FileState::Closed | FileState::Unopened => {}
    }
    let file = &shared.plan.files[f];
    let gone_or_unreadable = |e: std::io::Error, what: &str| match e.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => (Skip::Missing, "gone".to_owned()),
        _ => (Skip::Unreadable, format!("cannot {what}: {e}")),
    };
    // The identity is checked before the open too, so that a path that now names a FIFO,
    // a character device or another file is never opened (an open can block or have side
    // effects), and again on the descriptor, against a swap in between.
    let opened = std::fs::metadata(&file.path)
        .map_err(|e| gone_or_unreadable(e, "stat"))
        .and_then(|st| identity_problem(file, &st).map_or(Ok(()), |why| Err((Skip::Stale, why))))
        .and_then(|()| sys::open_for_reading(&file.path).map_err(|e| gone_or_unreadable(e, "open")));
    let checked = opened.and_then(|fd| match fd.metadata() {
        Ok(st) => match identity_problem(file, &st) {
            Some(why) => Err((Skip::Stale, why)),
            None => Ok(fd),
        },
        Err(e) => Err((Skip::Unreadable, format!("cannot stat: {e}"))),
    });
    match checked {
        Ok(fd) => {
            if shared.options.method == Method::Read && shared.options.fill == Fill::Exact {
                let _ = sys::advise_random(&fd);
            }
            let residency_known = cached_pages(fd.as_fd(), 0, 1).is_ok();
            let fd = Arc::new(fd);
            local.files_opened += 1;
            *state = FileState::Ready { fd: Arc::clone(&fd), residency_known };
            Ok((fd, residency_known))
        }
        Err((skip, why)) => {
            match skip {
                Skip::Stale => local.stale_files += 1,
                Skip::Missing => local.missing_files += 1,
                Skip::Unreadable => local.unreadable_files += 1,
            }
            let word = match skip {
                Skip::Stale => "stale, skipped",
                Skip::Missing => "missing, skipped",
                Skip::Unreadable => "unreadable, skipped",
            };
            shared.problem(format!("{word}: {}: {why}", file.path));
            *state = FileState::Skipped(skip);
            Err(skip)
        }
    }
}

fn step_done(shared: &Shared<'_>, f: usize) {
    let slot = &shared.slots[f];
    if slot.remaining.fetch_sub(1, Ordering::AcqRel) == 1 {
        let mut state = slot.state.lock().unwrap_or_else(|e| e.into_inner());
        if matches!(*state, FileState::Ready { .. }) {
            *state = FileState::Closed;
        }
    }
}

/// Reads `offset..offset+length` of `file` through the page cache into `buffer`
/// piece by piece, so it returns only once every page is in (or at end of file).
fn read_through(file: &File, offset: u64, length: u64, buffer: &mut [u8]) -> std::io::Result<()> {
    let end = offset + length;
    let mut at = offset;
    while at < end {
        let want = ((end - at) as usize).min(buffer.len());
        match file.read_at(&mut buffer[..want], at) {
            Ok(0) => return Ok(()),
            Ok(n) => at += n as u64,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn fetch(shared: &Shared<'_>, fd: &File, offset: u64, length: u64, buffer: &mut [u8]) -> std::io::Result<()> {
    let options = shared.options;
    let chunk = options.chunk_bytes.max(4096);
    let mut at = offset;
    while at < offset + length {
        if let Some(pacing) = shared.pacing {
            pacing.give_way(shared.cancel);
        }
        let len = chunk.min(offset + length - at);
        sys::advise_will_need(fd, at, len)?;
        if options.method == Method::Read {
            read_through(fd, at, len, buffer)?;
        }
        at += len;
    }
    Ok(())
}

fn range_step(shared: &Shared<'_>, f: usize, r: usize, local: &mut Local, buffer: &mut [u8]) {
    let file = &shared.plan.files[f];
    let range = &file.ranges[r];
    let (fd, residency_known) = match file_fd(shared, f, local) {
        Ok(x) => x,
        Err(Skip::Stale) => return local.stale.add(1, range.length),
        Err(Skip::Missing) => return local.missing.add(1, range.length),
        Err(Skip::Unreadable) => {
            if file.kind == PlanFileKind::BlockDevice {
                local.metadata_unreadable.add(1, range.length);
            }
            return local.unreadable.add(1, range.length);
        }
    };
    let page = u64::from(shared.plan.source.page_size.max(512));
    let resident = if residency_known {
        cached_pages(fd.as_fd(), range.offset, range.length).map(|p| (p * page).min(range.length)).ok()
    } else {
        None
    };
    let resident_bytes = resident.unwrap_or(0);
    if resident_bytes == range.length {
        return local.resident.add(1, range.length);
    }
    local.resident.bytes += resident_bytes;
    let needed = range.length - resident_bytes;
    let before = shared.committed.fetch_add(needed, Ordering::AcqRel);
    if before + needed > shared.budget {
        shared.committed.fetch_sub(needed, Ordering::AcqRel);
        return local.over_budget.add(1, needed);
    }
    let end = range.offset + range.length;
    let beyond = file.size.map_or(READ_AHEAD_ALLOWANCE, |s| s.saturating_sub(end).min(READ_AHEAD_ALLOWANCE));
    let sequential = shared.options.method == Method::Read
        && shared.options.fill == Fill::Sequential
        && resident.is_some()
        && before + needed + beyond <= shared.budget;
    let outcome = if sequential {
        let cached_beyond = || cached_pages(fd.as_fd(), end, beyond).unwrap_or(0) * page;
        let was = if beyond > 0 { cached_beyond() } else { 0 };
        // No advice: WILLNEED and FADV_RANDOM allocate 4 KiB folios, the reads' own readahead large ones.
        let read = read_through(&fd, range.offset, range.length, buffer);
        let added = if beyond > 0 { cached_beyond().saturating_sub(was) } else { 0 };
        shared.committed.fetch_add(added, Ordering::AcqRel);
        local.read_ahead_beyond += added;
        if read.is_ok() {
            local.sequential.add(1, needed);
        }
        read
    } else {
        fetch(shared, &fd, range.offset, range.length, buffer)
    };
    match outcome {
        Ok(()) if resident.is_none() => local.unknown_residency.add(1, needed),
        Ok(()) => {
            local.fetched.add(1, needed);
            if file.kind == PlanFileKind::BlockDevice {
                local.metadata_fetched.add(1, needed);
            }
        }
        Err(e) => {
            local.failed.add(1, needed);
            shared.problem(format!("read failed: {} at {}+{}: {e}", file.path, range.offset, range.length));
        }
    }
}

fn directory_step(shared: &Shared<'_>, d: usize, local: &mut Local) {
    let dir = &shared.plan.directories[d];
    let warmed = std::fs::metadata(&dir.path).and_then(|_| {
        if dir.list {
            for entry in std::fs::read_dir(&dir.path)? {
                let entry = entry?;
                // fstatat relative to the open directory, without following links.
                if shared.options.stat_entries && entry.metadata().is_ok() {
                    local.entries_looked_up += 1;
                }
            }
        }
        Ok(())
    });
    match warmed {
        Ok(()) => local.directories += 1,
        Err(_) => local.directories_failed += 1,
    }
}

/// A metadata step in progress: counted done when dropped, so that a thread that
/// panics in one does not leave the others waiting.
struct MetadataStep<'a, 'p>(&'a Shared<'p>);

impl Drop for MetadataStep<'_, '_> {
    fn drop(&mut self) {
        let shared = self.0;
        let mut done = shared.metadata_done.lock().unwrap_or_else(|e| e.into_inner());
        *done += 1;
        if *done == shared.metadata_steps {
            shared.metadata_in.notify_all();
        }
    }
}

/// Waits until every metadata step is done (each one taken finishes, so this ends).
fn wait_for_metadata(shared: &Shared<'_>) {
    let done = shared.metadata_done.lock().unwrap_or_else(|e| e.into_inner());
    let _done = shared
        .metadata_in
        .wait_while(done, |done| *done < shared.metadata_steps)
        .unwrap_or_else(|e| e.into_inner());
}

fn work(shared: &Shared<'_>) -> Local {
    let mut local = Local::default();
    if let Some(p) = shared.options.io_priority
        && let Err(e) = p.apply_to_this_thread()
    {
        shared.problem(format!("cannot set I/O priority {p} on a replay thread: {e}"));
    }
    if let Err(e) = shared.options.cpu.apply_to_this_thread() {
        let class = shared.options.cpu.name();
        shared.problem(format!("cannot set CPU class {class} on a replay thread: {e}"));
    }
    let mut buffer = vec![0u8; if shared.options.method == Method::Read { BUFFER_BYTES } else { 0 }];
    while !shared.cancel.load(Ordering::Relaxed) {
        let i = shared.next.fetch_add(1, Ordering::AcqRel);
        let Some(&step) = shared.steps.get(i) else { break };
        let _metadata_step = if i < shared.metadata_steps {
            Some(MetadataStep(shared))
        } else {
            wait_for_metadata(shared);
            None
        };
        if let (Some(pacing), Step::Directory(_) | Step::Open(_)) = (shared.pacing, step) {
            pacing.give_way(shared.cancel);
        }
        match step {
            Step::Directory(d) => directory_step(shared, d, &mut local),
            Step::Open(f) => {
                let _ = file_fd(shared, f, &mut local);
                step_done(shared, f);
            }
            Step::Range { file, range } => {
                range_step(shared, file, range, &mut local, &mut buffer);
                step_done(shared, file);
            }
        }
    }
    local
}

fn budget(options: &ReplayOptions) -> (u64, String) {
    let share = sys::mem_available().map(|avail| ((avail as f64 * options.memory_share) as u64, avail));
    match (options.max_memory, share) {
        (Some(max), Some((s, avail))) if s < max => (
            s,
            format!(
                "{:.0}% of MemAvailable ({} MiB), below --max-memory {} MiB",
                options.memory_share * 100.0,
                avail >> 20,
                max >> 20
            ),
        ),
        (Some(max), _) => (max, format!("--max-memory {} MiB", max >> 20)),
        (None, Some((s, avail))) => {
            (s, format!("{:.0}% of MemAvailable ({} MiB)", options.memory_share * 100.0, avail >> 20))
        }
        (None, None) => (u64::MAX, "unlimited (MemAvailable unreadable)".into()),
    }
}

fn merge(report: &mut ReplayReport, l: Local) {
    for (into, from) in [
        (&mut report.resident, l.resident),
        (&mut report.fetched, l.fetched),
        (&mut report.unknown_residency, l.unknown_residency),
        (&mut report.stale, l.stale),
        (&mut report.missing, l.missing),
        (&mut report.unreadable, l.unreadable),
        (&mut report.over_budget, l.over_budget),
        (&mut report.failed, l.failed),
        (&mut report.metadata_fetched, l.metadata_fetched),
        (&mut report.metadata_unreadable, l.metadata_unreadable),
        (&mut report.sequential, l.sequential),
    ] {
        into.merge(from);
    }
    report.read_ahead_beyond += l.read_ahead_beyond;
    report.stale_files += l.stale_files;
    report.missing_files += l.missing_files;
    report.unreadable_files += l.unreadable_files;
    report.files_opened += l.files_opened;
    report.directories += l.directories;
    report.directories_failed += l.directories_failed;
    report.entries_looked_up += l.entries_looked_up;
}

fn range_of(plan: &Plan, step: Step) -> Option<(&PlanFile, u64)> {
    match step {
        Step::Range { file, range } => Some((&plan.files[file], plan.files[file].ranges[range].length)),
        _ => None,
    }
}

pub(super) fn run(
    plan: &Plan,
    options: &ReplayOptions,
    cancel: &AtomicBool,
    pacing: Option<&Pacing>,
) -> ReplayReport {
    let started = Instant::now();
    let (budget, budget_text) = budget(options);
    let slots = plan
        .files
        .iter()
        .map(|_| Slot { state: Mutex::new(FileState::Unopened), remaining: AtomicUsize::new(0) })
        .collect();
    let (steps, metadata_steps) = match pacing {
        Some(_) => (paced_order(plan, options), 0),
        None => replay_order(plan, options),
    };
    let shared = Shared {
        plan,
        steps,
        metadata_steps,
        metadata_done: Mutex::new(0),
        metadata_in: Condvar::new(),
        options,
        pacing,
        cancel,
        next: AtomicUsize::new(0),
        committed: AtomicU64::new(0),
        budget,
        slots,
        problems: Mutex::new((Vec::new(), 0)),
    };
    let mut report = ReplayReport {
        budget_bytes: budget,
        budget: budget_text,
        options: Some(options.clone()),
        ..ReplayReport::default()
    };
    let mut files = vec![false; plan.files.len()];
    for &step in &shared.steps {
        if let Step::Open(f) | Step::Range { file: f, .. } = step {
            shared.slots[f].remaining.fetch_add(1, Ordering::Relaxed);
            files[f] = true;
        }
        if let Some((file, length)) = range_of(plan, step) {
            report.planned.add(1, length);
            if file.kind == PlanFileKind::BlockDevice {
                report.metadata_planned.add(1, length);
            }
        }
    }
    report.planned_files = files.iter().filter(|&&f| f).count();

    let depth = options.depth.clamp(1, shared.steps.len().max(1));
    let locals: Vec<Local> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..depth)
            .filter_map(|i| {
                std::thread::Builder::new()
                    .name(format!("prefetch-{i}"))
                    .spawn_scoped(scope, || work(&shared))
                    .ok()
            })
            .collect();
        if handles.is_empty() {
            return vec![work(&shared)];
        }
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    for l in locals {
        merge(&mut report, l);
    }
    let taken = shared.next.load(Ordering::Acquire).min(shared.steps.len());
    for &step in &shared.steps[taken..] {
        if let Some((_, length)) = range_of(plan, step) {
            report.not_reached.add(1, length);
        }
    }
    report.cancelled = taken < shared.steps.len();
    let (problems, more) = shared.problems.into_inner().unwrap_or_else(|e| e.into_inner());
    report.problems = problems;
    report.more_problems = more;
    report.elapsed_s = started.elapsed().as_secs_f64();
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::{
        FORMAT, Order, PlanDirectory, PlanRange, PlanSettings, PlanSource, PlanStats, VERSION,
    };

    fn file(kind: PlanFileKind, offsets: &[u64]) -> PlanFile {
        let ranges = offsets
            .iter()
            .map(|&offset| PlanRange {
                offset,
                length: 4096,
                first_need_ns: offset as i64,
                disk: Some(Dev::new(7, 0)),
                physical: Some(offset),
            })
            .collect();
        PlanFile { kind, ranges, ..PlanFile::default() }
    }

    #[test]
    fn metadata_ranges_come_first_by_offset_and_only_when_enabled_unless_paced() {
        let files = vec![
            file(PlanFileKind::Regular, &[8192]),
            file(PlanFileKind::BlockDevice, &[1 << 20, 4096]),
            file(PlanFileKind::Regular, &[]),
        ];
        let directories = vec![PlanDirectory { path: "/d".into(), list: true, first_need_ns: 0 }];
        let steps = crate::order::steps(&files, &directories, Order::Disk, 1);
        let plan = Plan {
            format: FORMAT.into(),
            version: VERSION,
            tool: "test".into(),
            source: PlanSource::default(),
            settings: PlanSettings::default(),
            files,
            directories,
            steps,
            stats: PlanStats::default(),
            notes: Vec::new(),
        };
        // In disk order the plan lists the directory, then the open, then the ranges by position.
        assert_eq!(plan.steps[..2], [Step::Directory(0), Step::Open(2)]);
        let regular = Step::Range { file: 0, range: 0 };
        let metadata = |range| Step::Range { file: 1, range };

        let (order, first) = replay_order(&plan, &ReplayOptions::default());
        assert_eq!(first, 2);
        assert_eq!(order, [metadata(1), metadata(0), Step::Directory(0), Step::Open(2), regular]);

        let without = ReplayOptions { metadata: false, directories: false, ..ReplayOptions::default() };
        assert_eq!(replay_order(&plan, &without), (vec![Step::Open(2), regular], 0));

        // Paced, every step goes by first need (here its offset), metadata among the rest.
        let paced = paced_order(&plan, &ReplayOptions::default());
        assert_eq!(paced, [Step::Directory(0), Step::Open(2), metadata(1), regular, metadata(0)]);
        assert_eq!(paced_order(&plan, &without), [Step::Open(2), regular]);
    }
}
