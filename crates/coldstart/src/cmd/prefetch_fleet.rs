//! `coldstart prefetch plan --dataset DIR`: a plan made from a fleet's dataset. The
//! dataset is surveyed, its traces read one at a time (`coldstart_dataset::reader`) into
//! `coldstart_prefetch::fleet`, and the plan checked against this machine's files, whose
//! extents (FIEMAP) give the disk order.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Context;
use coldstart_dataset::reader::{self, PlanTrace, RunRow, TraceRow};
use coldstart_prefetch::fleet::{FleetFile, FleetPages, FleetTrace, Image, ImageFile, PageRun};
use coldstart_prefetch::plan::UsedPagesFrom;
use coldstart_prefetch::{Plan, PlanSettings};
use coldstart_record::assemble::{LiveSystem, SystemView};
use coldstart_trace::{BlockIo, Dev, Extent, FileKind, TextEnum};

/// Which traces of the dataset a plan is made from.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    pub build: Option<String>,
    pub machine_class: Option<String>,
}

impl Selection {
    fn build_wanted(&self, build: &Option<String>) -> bool {
        self.build.is_none() || self.build == *build
    }

    fn class_wanted(&self, row: &TraceRow) -> bool {
        self.machine_class.is_none() || self.machine_class == row.machine_class
    }
}

/// The fleet's pages, and whether most of the traces were boots or sessions.
pub struct Fleet {
    pub pages: FleetPages,
    pub boots_or_sessions: usize,
    /// Traces of the dataset not selected (another build or machine class).
    pub not_selected: usize,
}

/// Page runs with their times counted from `from` (the command's start).
fn runs(rows: Vec<RunRow>, from: i64) -> Vec<PageRun> {
    rows.into_iter()
        .map(|r| PageRun {
            file_id: r.file_id,
            first_page: r.first_page,
            pages: r.pages,
            t_ns: r.t_ns - from,
        })
        .collect()
}

/// A trace's rows as the planner takes them.
fn fleet_trace(t: PlanTrace) -> FleetTrace {
    let row = t.row;
    let files = t
        .files
        .into_iter()
        .map(|f| FleetFile {
            file_id: f.file_id,
            kind: FileKind::from_word(&f.kind).unwrap_or(FileKind::Other),
            path: f.path,
            size: f.size,
            mtime_ns: f.mtime_ns,
        })
        .collect();
    FleetTrace {
        id: row.trace_id,
        host: row.host,
        build: row.build,
        command: row.command,
        kernel: row.kernel,
        start_unix_ns: row.start_unix_ns,
        page_size: row.page_size,
        used_from: if row.used_pages_from == "fills" {
            UsedPagesFrom::Fills
        } else {
            UsedPagesFrom::Accesses
        },
        files,
        // page_used counts from the command's start already; fills and opens from the trace's zero.
        used: runs(t.used, 0),
        filled: runs(t.filled, row.command_start_ns),
        opened: t.opened.into_iter().map(|(f, t)| (f, t - row.command_start_ns)).collect(),
    }
}

/// Reads the selected traces of the dataset at `dir` (surveyed first: a dataset with
/// errors is refused): only the builds selected, and of those only the tables and columns
/// a plan uses, trace by trace. One thread reads and decodes while this one counts.
pub fn read(dir: &Path, selection: &Selection) -> anyhow::Result<Fleet> {
    let survey = crate::cmd::fleet::checked_survey(dir, "planned")?;
    let catalog = &survey.catalog;
    let build_wanted = |b: &Option<String>| selection.build_wanted(b);
    let in_builds = catalog.traces.values().filter(|b| build_wanted(b)).count();
    let mut fleet = Fleet {
        pages: FleetPages::new(),
        boots_or_sessions: 0,
        not_selected: catalog.traces.len() - in_builds,
    };
    let (traces, decoded) = std::sync::mpsc::sync_channel::<PlanTrace>(64);
    let other_class = std::thread::scope(|scope| -> anyhow::Result<usize> {
        let reading = scope.spawn(move || -> anyhow::Result<usize> {
            let progress = Progress::new(in_builds);
            let (mut seen, mut other_class) = (0usize, 0usize);
            let mut want = |row: &TraceRow| {
                progress.show(seen);
                seen += 1;
                let wanted = selection.class_wanted(row);
                other_class += usize::from(!wanted);
                wanted
            };
            let mut hand_over =
                |t: PlanTrace| traces.send(t).map_err(|_| anyhow::anyhow!("the plan stopped"));
            reader::read_plan_traces(dir, catalog, &build_wanted, &mut want, &mut hand_over)
                .with_context(|| format!("cannot read the dataset {}", dir.display()))?;
            progress.done();
            Ok(other_class)
        });
        for trace in decoded {
            fleet.boots_or_sessions += usize::from(trace.row.boot_or_session);
            // On an error the receiver is dropped, which stops the reading thread.
            fleet.pages.add(&fleet_trace(trace))?;
        }
        reading.join().map_err(|_| anyhow::anyhow!("the thread reading the dataset failed"))?
    })?;
    fleet.not_selected += other_class;
    Ok(fleet)
}

/// Hands the block requests of each selected trace of the dataset at `dir` (surveyed first)
/// to `each`, one trace at a time; returns how many traces were not selected.
pub fn read_blocks(
    dir: &Path,
    selection: &Selection,
    each: &mut dyn FnMut(Vec<BlockIo>) -> anyhow::Result<()>,
) -> anyhow::Result<usize> {
    let survey = crate::cmd::fleet::checked_survey(dir, "planned")?;
    let catalog = &survey.catalog;
    let build_wanted = |b: &Option<String>| selection.build_wanted(b);
    let in_builds = catalog.traces.values().filter(|b| build_wanted(b)).count();
    let mut not_selected = catalog.traces.len() - in_builds;
    let (progress, mut seen) = (Progress::new(in_builds), 0usize);
    let mut want = |row: &TraceRow| {
        progress.show(seen);
        seen += 1;
        let wanted = selection.class_wanted(row);
        not_selected += usize::from(!wanted);
        wanted
    };
    let mut keep = |_: TraceRow, ios: Vec<BlockIo>| each(ios);
    reader::read_block_traces(dir, catalog, &build_wanted, &mut want, &mut keep)
        .with_context(|| format!("cannot read the dataset {}", dir.display()))?;
    progress.done();
    Ok(not_selected)
}

/// Progress on stderr for large datasets (a line every 5 %, when stderr is a terminal).
struct Progress {
    total: usize,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        use std::io::IsTerminal;
        Progress { total, shown: total >= 200 && std::io::stderr().is_terminal() }
    }

    fn show(&self, done: usize) {
        if self.shown && done.is_multiple_of((self.total / 20).max(1)) {
            eprint!("\rcoldstart: reading traces {done}/{}", self.total);
        }
    }

    fn done(&self) {
        if self.shown {
            eprintln!("\rcoldstart: read {} traces          ", self.total);
        }
    }
}

/// This machine's files, as the plan will find them.
pub struct LiveImage;

impl Image for LiveImage {
    fn file(&self, path: &str) -> ImageFile {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => ImageFile::Regular {
                dev: Dev::from_user(m.dev()),
                ino: m.ino(),
                size: m.size(),
                mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            },
            Ok(_) => ImageFile::NotRegular,
            Err(_) => ImageFile::Missing,
        }
    }

    fn extents(&self, path: &str, dev: Dev, ino: u64) -> Vec<Extent> {
        let (disk, start) = LiveSystem.whole_disk(dev);
        LiveSystem
            .extents(Path::new(path), dev, ino)
            .unwrap_or_default()
            .into_iter()
            .map(|e| Extent {
                file_id: 0,
                disk,
                logical: e.logical,
                physical: start.saturating_add(e.physical),
                length: e.length,
                flags: e.flags,
            })
            .collect()
    }
}

/// The plan of the fleet's pages that at least `min_share` of its traces used.
pub fn plan(fleet: &Fleet, min_share: f64, settings: &PlanSettings, dataset: &Path) -> anyhow::Result<Plan> {
    let tool = format!("coldstart {}", env!("CARGO_PKG_VERSION"));
    Ok(fleet.pages.plan(&LiveImage, min_share, settings, &dataset.to_string_lossy(), &tool)?)
}
