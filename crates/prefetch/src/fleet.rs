//! A plan made from many traces (a fleet's dataset): the pages that at least a share of
//! the traces used, checked against this machine's files, in this machine's disk order.
//!
//! Pure like [`crate::build`]: the traces come in as [`FleetTrace`]s (the dataset crate
//! reads them from Parquet) and this machine's files through [`Image`]. Files are matched
//! across traces by path, size and modification time (inode numbers differ between
//! machines); a file whose size or mtime differs on this machine is another build's and is
//! left out. The chosen pages and the files at least that share opened become one trace
//! (each page first needed, each file opened, at the mean time of the traces that did so;
//! its extents this machine's), and [`build_plan`] plans it,
//! so a fleet's plan merges gaps, splits ranges and orders steps as a single trace's does.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use coldstart_trace::{
    AccessKind, Dev, Extent, File, FileKind, FileOpen, Nanos, PageAccess, PageFill, Trace,
};
use serde::{Deserialize, Serialize};

use crate::build::{build_plan, exclusion};
use crate::error::{PrefetchError, Result};
use crate::plan::{Exclusion, Plan, PlanSettings, UsedPagesFrom};

/// A file of a trace of the fleet, as the dataset's `file` table has it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetFile {
    pub file_id: u32,
    pub path: Option<String>,
    pub kind: FileKind,
    pub size: Option<u64>,
    pub mtime_ns: Option<i64>,
}

/// Pages `first_page..first_page + pages` of a trace's file, first needed (or filled) at
/// `t_ns` after the command's start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageRun {
    pub file_id: u32,
    pub first_page: u64,
    pub pages: u64,
    pub t_ns: Nanos,
}

/// What one trace of the fleet contributes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FleetTrace {
    pub id: String,
    pub host: String,
    pub build: Option<String>,
    pub command: String,
    pub kernel: String,
    pub start_unix_ns: i64,
    pub page_size: u32,
    pub used_from: UsedPagesFrom,
    pub files: Vec<FleetFile>,
    /// The pages the start used (the dataset's `page_used`).
    pub used: Vec<PageRun>,
    /// The pages that entered the page cache (the dataset's `page_use`).
    pub filled: Vec<PageRun>,
    /// Opens of files: (file id, time), the dataset's `file_open`.
    pub opened: Vec<(u32, Nanos)>,
}

/// A path as this machine has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageFile {
    Missing,
    NotRegular,
    Regular { dev: Dev, ino: u64, size: u64, mtime_ns: i64 },
}

/// This machine's files: what a fleet's plan is checked against and ordered by.
pub trait Image {
    fn file(&self, path: &str) -> ImageFile;
    /// The extents of the file at `path` (which is `dev`, `ino`), placed on whole disks;
    /// empty when unknown (the plan then orders its ranges by first need).
    fn extents(&self, path: &str, dev: Dev, ino: u64) -> Vec<Extent>;
}

/// How a fleet's plan was made (the plan's `source.fleet`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FleetSource {
    /// The dataset as given to `prefetch plan --dataset`.
    pub dataset: String,
    /// Traces the plan was made from.
    pub traces: usize,
    /// A page is planned when at least this share of the traces used it.
    pub min_share: f64,
    /// That is, at least this many traces.
    pub min_traces: usize,
    /// The builds of those traces (`export --build`), sorted.
    pub builds: Vec<String>,
    /// Distinct hosts among them.
    pub hosts: usize,
}

/// What the fleet's pages are counted by: a version of a file of the image, or the path
/// of a file that is each machine's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    Version(u32),
    State(u32),
}

/// A file across the fleet: one path at one size and modification time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Variant {
    path: String,
    size: Option<u64>,
    mtime_ns: Option<i64>,
}

/// Pages of a file, each with the mean time the traces first needed (or filled) it.
type TimedPages = Vec<(u64, Nanos)>;

/// Traces that opened a file version, and the sum of their first opens' times.
#[derive(Clone, Copy, Default)]
struct Opens {
    traces: u32,
    t_sum: i64,
}

#[derive(Clone, Copy, Default)]
struct Tally {
    used: u32,
    filled: u32,
    used_t_sum: i64,
    filled_t_sum: i64,
}

/// Per key (a file version, or a path) and page, the traces that used and filled it; per
/// key, the traces that opened it.
#[derive(Default)]
struct Tallies {
    pages: HashMap<(u32, u64), Tally>,
    opens: HashMap<u32, Opens>,
}

/// What a key's traces chose: pages used and filled by enough of them, and the mean first
/// open when enough opened it.
#[derive(Default)]
struct Chosen {
    used: TimedPages,
    filled: TimedPages,
    opened: Option<Nanos>,
}

impl Chosen {
    fn pages(&self) -> usize {
        self.used.len().max(self.filled.len())
    }
}

impl Tallies {
    /// Counts `trace` once per page and key: `keep` maps its file ids to keys.
    fn count(&mut self, trace: &FleetTrace, keep: &HashMap<u32, u32>) {
        for (key, page, t) in distinct_pages(&trace.used, keep) {
            let tally = self.pages.entry((key, page)).or_default();
            tally.used += 1;
            tally.used_t_sum = tally.used_t_sum.saturating_add(t);
        }
        for (key, page, t) in distinct_pages(&trace.filled, keep) {
            let tally = self.pages.entry((key, page)).or_default();
            tally.filled += 1;
            tally.filled_t_sum = tally.filled_t_sum.saturating_add(t);
        }
        let mut first_open: HashMap<u32, Nanos> = HashMap::new();
        for &(file_id, t) in &trace.opened {
            if let Some(&key) = keep.get(&file_id) {
                let first = first_open.entry(key).or_insert(t);
                *first = (*first).min(t);
            }
        }
        for (key, t) in first_open {
            let opens = self.opens.entry(key).or_default();
            opens.traces += 1;
            opens.t_sum = opens.t_sum.saturating_add(t);
        }
    }

    /// Per key, what at least `need` traces did (keys where they did nothing are absent).
    fn chosen(&self, need: u32) -> BTreeMap<u32, Chosen> {
        let mut chosen: BTreeMap<u32, Chosen> = BTreeMap::new();
        for (&(key, p), tally) in &self.pages {
            if tally.used >= need {
                chosen.entry(key).or_default().used.push((p, tally.used_t_sum / i64::from(tally.used)));
            }
            if tally.filled >= need {
                chosen.entry(key).or_default().filled.push((p, tally.filled_t_sum / i64::from(tally.filled)));
            }
        }
        for (&key, o) in self.opens.iter().filter(|(_, o)| o.traces >= need) {
            chosen.entry(key).or_default().opened = Some(o.t_sum / i64::from(o.traces));
        }
        chosen
    }
}

/// The fleet's traces, added one at a time (a dataset of thousands of traces is never
/// held in memory at once): per file variant and page, how many traces used and filled it.
#[derive(Default)]
pub struct FleetPages {
    traces: usize,
    page_size: u32,
    from_fills: usize,
    variants: Vec<Variant>,
    variant_ids: HashMap<Variant, u32>,
    /// The build (`None`: unlabelled) of each variant's traces.
    variant_builds: HashMap<u32, BTreeSet<Option<String>>>,
    paths: Vec<String>,
    path_ids: HashMap<String, u32>,
    /// Paths some trace's start wrote (their mtime is after its recording began).
    written: BTreeSet<u32>,
    by_variant: Tallies,
    by_path: Tallies,
    /// Reasons files of the traces were left out, with the paths and the bytes filled
    /// (summed over the traces).
    left_out: BTreeMap<&'static str, (BTreeSet<String>, u64)>,
    builds: BTreeSet<String>,
    hosts: BTreeSet<String>,
    commands: BTreeMap<String, usize>,
    kernels: BTreeMap<String, usize>,
    latest_start_unix_ns: i64,
}

/// Pages of `runs` that belong to `file_id`s in `keep`, each once, with its earliest time.
fn distinct_pages(runs: &[PageRun], keep: &HashMap<u32, u32>) -> Vec<(u32, u64, Nanos)> {
    let mut pages: Vec<(u32, u64, Nanos)> = Vec::new();
    for r in runs {
        if let Some(&variant) = keep.get(&r.file_id) {
            let end = r.first_page.saturating_add(r.pages);
            pages.extend((r.first_page..end).map(|p| (variant, p, r.t_ns)));
        }
    }
    pages.sort_unstable();
    pages.dedup_by_key(|p| (p.0, p.1));
    pages
}

impl FleetPages {
    pub fn new() -> FleetPages {
        FleetPages::default()
    }

    /// Traces added so far.
    pub fn traces(&self) -> usize {
        self.traces
    }

    /// Counts the pages `trace` used and filled. A trace of another page size than the
    /// first one's is refused (its page indexes mean other bytes).
    pub fn add(&mut self, trace: &FleetTrace) -> Result<()> {
        let page_size = if trace.page_size == 0 { 4096 } else { trace.page_size };
        if self.traces == 0 {
            self.page_size = page_size;
        } else if page_size != self.page_size {
            return Err(PrefetchError::Fleet(format!(
                "trace {} has pages of {page_size} bytes, the traces before it {}: make one plan per page size",
                trace.id, self.page_size
            )));
        }
        let settings = PlanSettings { metadata: false, ..PlanSettings::default() };
        let mut filled_pages: HashMap<u32, u64> = HashMap::new();
        for r in &trace.filled {
            *filled_pages.entry(r.file_id).or_default() += r.pages;
        }
        let filled_bytes = |file_id: u32| {
            filled_pages.get(&file_id).copied().unwrap_or(0).saturating_mul(u64::from(page_size))
        };
        let mut keep: HashMap<u32, u32> = HashMap::new();
        let mut keep_path: HashMap<u32, u32> = HashMap::new();
        for f in &trace.files {
            let file = File {
                id: f.file_id,
                path: f.path.clone(),
                kind: f.kind,
                size: f.size,
                mtime_ns: f.mtime_ns,
                ..File::default()
            };
            let written = file.kind == FileKind::Regular
                && file.path.is_some()
                && trace.start_unix_ns > 0
                && file.mtime_ns.is_some_and(|m| m >= trace.start_unix_ns);
            if written {
                // The start wrote it: the machine's state, whose next version this machine holds.
                let path_id = self.path_id(f.path.as_deref().unwrap_or_default());
                self.written.insert(path_id);
                keep_path.insert(f.file_id, path_id);
                continue;
            }
            if let Some(reason) = exclusion(&file, &settings, trace.start_unix_ns) {
                let bytes = filled_bytes(f.file_id);
                if bytes > 0 {
                    let e = self.left_out.entry(reason).or_default();
                    e.0.insert(f.path.clone().unwrap_or_else(|| format!("inode {}", f.file_id)));
                    e.1 = e.1.saturating_add(bytes);
                }
                continue;
            }
            let path = f.path.clone().unwrap_or_default();
            keep_path.insert(f.file_id, self.path_id(&path));
            let variant = Variant { path, size: f.size, mtime_ns: f.mtime_ns };
            let next = self.variants.len() as u32;
            let id = *self.variant_ids.entry(variant.clone()).or_insert_with(|| {
                self.variants.push(variant);
                next
            });
            keep.insert(f.file_id, id);
            self.variant_builds.entry(id).or_default().insert(trace.build.clone());
        }
        self.by_variant.count(trace, &keep);
        self.by_path.count(trace, &keep_path);
        self.traces += 1;
        if trace.used_from == UsedPagesFrom::Fills {
            self.from_fills += 1;
        }
        if let Some(build) = &trace.build {
            self.builds.insert(build.clone());
        }
        self.hosts.insert(trace.host.clone());
        *self.commands.entry(trace.command.clone()).or_default() += 1;
        *self.kernels.entry(trace.kernel.clone()).or_default() += 1;
        self.latest_start_unix_ns = self.latest_start_unix_ns.max(trace.start_unix_ns);
        Ok(())
    }

    fn path_id(&mut self, path: &str) -> u32 {
        let next = self.paths.len() as u32;
        *self.path_ids.entry(path.to_owned()).or_insert_with(|| {
            self.paths.push(path.to_owned());
            next
        })
    }

    /// The least number of traces that make `min_share` of them (at least one).
    pub fn min_traces(&self, min_share: f64) -> usize {
        ((min_share * self.traces as f64) - 1e-9).ceil().max(1.0) as usize
    }

    /// The plan of the pages at least `min_share` of the traces used, for this machine's
    /// files (`image`): files missing here, or here at another size or mtime, are left out
    /// and counted in the plan's exclusions, except the machines' state files (see below),
    /// which are planned for this machine's version.
    pub fn plan(
        &self,
        image: &dyn Image,
        min_share: f64,
        settings: &PlanSettings,
        dataset: &str,
        tool: &str,
    ) -> Result<Plan> {
        if self.traces == 0 {
            return Err(PrefetchError::Fleet("the dataset holds no traces to plan from".into()));
        }
        let need = self.min_traces(min_share) as u32;
        let page = u64::from(self.page_size);
        // A path whose size or mtime differs between traces of one build, or that a start
        // wrote, is the machines' state (a log, a journal, a cache), not the image's: its
        // pages count by path and are planned for this machine's version. Other paths
        // count by version.
        let mut versions: HashMap<(&str, &Option<String>), usize> = HashMap::new();
        for (variant, builds) in &self.variant_builds {
            for build in builds {
                *versions.entry((self.variants[*variant as usize].path.as_str(), build)).or_default() += 1;
            }
        }
        let mut state: BTreeSet<&str> =
            versions.into_iter().filter(|(_, n)| *n > 1).map(|((path, _), _)| path).collect();
        state.extend(self.written.iter().map(|&p| self.paths[p as usize].as_str()));
        let mut chosen: BTreeMap<Key, Chosen> = BTreeMap::new();
        for (variant, c) in self.by_variant.chosen(need) {
            if !state.contains(self.variants[variant as usize].path.as_str()) {
                chosen.insert(Key::Version(variant), c);
            }
        }
        for (path, c) in self.by_path.chosen(need) {
            if state.contains(self.paths[path as usize].as_str()) {
                chosen.insert(Key::State(path), c);
            }
        }
        let path_of = |key: &Key| match *key {
            Key::Version(v) => self.variants[v as usize].path.as_str(),
            Key::State(p) => self.paths[p as usize].as_str(),
        };

        let mut by_path: BTreeMap<&str, Vec<Key>> = BTreeMap::new();
        for key in chosen.keys() {
            by_path.entry(path_of(key)).or_default().push(*key);
        }
        let mut left_out: BTreeMap<String, (usize, u64)> = BTreeMap::new();
        let mut leave_out = |reason: &str, pages: usize| {
            let e = left_out.entry(reason.to_owned()).or_default();
            e.0 += 1;
            e.1 = e.1.saturating_add(pages as u64 * page);
        };
        let mut trace = Trace::default();
        trace.meta.page_size = self.page_size;
        let mut state_files = 0;
        for (path, keys) in by_path {
            let (dev, ino, size, mtime_ns) = match image.file(path) {
                ImageFile::Regular { dev, ino, size, mtime_ns } => (dev, ino, size, mtime_ns),
                other => {
                    let reason = if other == ImageFile::Missing {
                        "missing on this machine"
                    } else {
                        "not a regular file on this machine"
                    };
                    keys.iter().for_each(|k| leave_out(reason, chosen[k].pages()));
                    continue;
                }
            };
            let same = |key: &Key| match *key {
                Key::State(_) => true,
                Key::Version(v) => {
                    let v = &self.variants[v as usize];
                    v.size.is_none_or(|s| s == size) && v.mtime_ns.is_none_or(|m| m == mtime_ns)
                }
            };
            let matching = keys.iter().copied().find(same);
            for k in keys.iter().filter(|&&k| Some(k) != matching) {
                leave_out(
                    "another version than this machine's (size or modification time differs)",
                    chosen[k].pages(),
                );
            }
            let Some(key) = matching else { continue };
            state_files += usize::from(matches!(key, Key::State(_)));
            let id = trace.files.len() as u32 + 1;
            trace.files.push(File {
                id,
                dev,
                ino,
                path: Some(path.to_owned()),
                kind: FileKind::Regular,
                size: Some(size),
                mtime_ns: Some(mtime_ns),
            });
            let c = &chosen[&key];
            let last_page = size.div_ceil(page);
            let within = |pages: &TimedPages| -> TimedPages {
                pages.iter().copied().filter(|(p, _)| *p < last_page).collect()
            };
            let (used, filled) = (&within(&c.used), &within(&c.filled));
            trace.page_accesses.extend(runs(used).map(|(index, pages, t_ns)| PageAccess {
                t_ns,
                file_id: id,
                index,
                pages,
                kind: AccessKind::Read,
                ..PageAccess::default()
            }));
            trace.page_fills.extend(runs(filled).map(|(index, pages, t_ns)| PageFill {
                t_ns,
                file_id: id,
                index,
                pages,
                ..PageFill::default()
            }));
            if let Some(t_ns) = c.opened {
                trace.file_opens.push(FileOpen { t_ns, pid: 0, file_id: id, exec: false });
            }
            trace
                .extents
                .extend(image.extents(path, dev, ino).into_iter().map(|e| Extent { file_id: id, ..e }));
        }
        if trace.files.is_empty() {
            let why = if chosen.is_empty() {
                format!("no page was used by {need} of the {} traces", self.traces)
            } else {
                "none of the files the traces share is on this machine at the same size and modification time"
                    .to_owned()
            };
            return Err(PrefetchError::Fleet(format!("nothing to plan: {why}")));
        }
        let mut plan = build_plan(&trace, dataset, settings, tool)?;
        plan.source.command = most_common(&self.commands).split(' ').map(str::to_owned).collect();
        plan.source.kernel = most_common(&self.kernels);
        plan.source.host = match self.hosts.len() {
            1 => self.hosts.iter().next().cloned().unwrap_or_default(),
            n => format!("{n} hosts"),
        };
        plan.source.recorded_unix_ns = self.latest_start_unix_ns;
        plan.source.used_pages_from =
            if self.from_fills == self.traces { UsedPagesFrom::Fills } else { UsedPagesFrom::Accesses };
        plan.source.fleet = Some(FleetSource {
            dataset: dataset.to_owned(),
            traces: self.traces,
            min_share,
            min_traces: need as usize,
            builds: self.builds.iter().cloned().collect(),
            hosts: self.hosts.len(),
        });
        // Bytes the traces read from files left out, per trace on average.
        let per_trace = self.traces as u64;
        let recorded = self
            .left_out
            .iter()
            .map(|(reason, (paths, bytes))| ((*reason).to_owned(), (paths.len(), bytes / per_trace)));
        for (reason, (files, read_bytes)) in recorded.chain(left_out) {
            plan.stats.excluded.push(Exclusion { reason, files, read_bytes });
        }
        plan.notes.retain(|n| !n.starts_with("the trace has no page accesses"));
        plan.notes.insert(
            0,
            format!(
                "made from {} traces: the pages at least {need} of them ({:.0} %) used, first needed at the mean time \
                 of those traces; read_bytes counts the pages at least {need} of them read from the disk",
                self.traces,
                min_share * 100.0
            ),
        );
        if state_files > 0 {
            let files =
                if state_files == 1 { "1 file is".to_owned() } else { format!("{state_files} files are") };
            plan.notes.push(format!(
                "{files} the machines' state, not the image's (logs, journals, caches: written by a start, or of \
                 another size or modification time on each machine of a build): their pages count by path and are \
                 planned for this machine's version"
            ));
        }
        if self.from_fills > 0 {
            plan.notes.push(format!(
                "{} of the traces have no page accesses: their used pages are the pages that entered the page cache",
                self.from_fills
            ));
        }
        plan.notes.push(
            "filesystem metadata is not planned from a fleet (its disk offsets are each machine's own); \
             directories are warmed by lookups instead"
                .to_owned(),
        );
        Ok(plan)
    }
}

/// The most frequent key (the first in order among equals).
fn most_common(counts: &BTreeMap<String, usize>) -> String {
    let mut best: Option<(&String, usize)> = None;
    for (k, &n) in counts {
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((k, n));
        }
    }
    best.map(|(k, _)| k.clone()).unwrap_or_default()
}

/// Sorted pages with times as runs of consecutive pages of one time: (first page, pages, time).
fn runs(pages: &[(u64, Nanos)]) -> impl Iterator<Item = (u64, u32, Nanos)> + '_ {
    let mut sorted = pages.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u64, u32, Nanos)> = Vec::new();
    for (p, t) in sorted {
        match out.last_mut() {
            Some(last) if last.0 + u64::from(last.1) == p && last.2 == t && last.1 < u32::MAX => last.1 += 1,
            _ => out.push((p, 1, t)),
        }
    }
    out.into_iter()
}
