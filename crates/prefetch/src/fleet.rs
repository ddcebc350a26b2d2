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

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use rustc_hash::FxHashMap;

use coldstart_trace::{
    AccessKind, Dev, Extent, File, FileKind, FileOpen, Nanos, PageAccess, PageFill, Trace,
};
use serde::{Deserialize, Serialize};

use crate::build::{build_plan, command_start, exclusion, used_by_file};
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

impl FleetTrace {
    /// What a trace recorded here contributes to a plan of several traces (the last few
    /// learning boots of `boot enable --prefetch`): its used pages as [`build_plan`] counts
    /// them, its fills and opens, all timed from the command's start, as a dataset's
    /// `page_used`, `page_use` and `file_open` rows would give them back.
    pub fn from_trace(trace: &Trace, id: &str) -> FleetTrace {
        let t0 = command_start(trace);
        let (used_from, used) = used_by_file(trace);
        let meta = &trace.meta;
        FleetTrace {
            id: id.to_owned(),
            host: meta.host.clone(),
            build: None,
            command: meta.command.join(" "),
            kernel: meta.kernel.clone(),
            start_unix_ns: meta.start_unix_ns,
            page_size: meta.page_size,
            used_from,
            files: trace
                .files
                .iter()
                .map(|f| FleetFile {
                    file_id: f.id,
                    path: f.path.clone(),
                    kind: f.kind,
                    size: f.size,
                    mtime_ns: f.mtime_ns,
                })
                .collect(),
            used: used
                .iter()
                .flat_map(|(&file_id, pieces)| {
                    pieces.iter().map(move |p| PageRun {
                        file_id,
                        first_page: p.start,
                        pages: p.end - p.start,
                        t_ns: p.t,
                    })
                })
                .collect(),
            filled: trace
                .page_fills
                .iter()
                .map(|f| PageRun {
                    file_id: f.file_id,
                    first_page: f.index,
                    pages: f.pages.into(),
                    t_ns: f.t_ns - t0,
                })
                .collect(),
            opened: trace.file_opens.iter().map(|o| (o.file_id, o.t_ns - t0)).collect(),
        }
    }
}

/// The share of `traces` traces that is more than half of them (1 of 1, 2 of 2, 2 of 3, 3
/// of 4), as [`FleetPages::plan`] takes it.
pub fn more_than_half(traces: usize) -> f64 {
    let traces = traces.max(1);
    (traces / 2 + 1) as f64 / traces as f64
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

/// A file across the fleet: one path (its index in `FleetPages::paths`) at one size and
/// modification time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Variant {
    path: u32,
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

/// A change at a page of one key's tallies: from this page on, this many more (or fewer)
/// traces used and filled the pages, and their times' sums changed by this much. A trace's
/// run of pages adds one at its first page and takes it off after its last, so the
/// tallies of every page are the running sums in page order, kept per run boundary rather
/// than per page.
#[derive(Clone, Copy, Default)]
struct Step {
    used: i64,
    filled: i64,
    used_t: i128,
    filled_t: i128,
}

/// One key's steps: appended as traces come, merged (sorted by page, the steps of one
/// page summed) when the list has doubled since its last merge.
#[derive(Default)]
struct Steps {
    list: Vec<(u64, Step)>,
    merged: usize,
}

impl Steps {
    fn push(&mut self, page: u64, step: Step) {
        self.list.push((page, step));
        if self.list.len() > 2 * self.merged + 1024 {
            self.merge();
        }
    }

    fn merge(&mut self) {
        self.list.sort_unstable_by_key(|s| s.0);
        let mut merged: Vec<(u64, Step)> = Vec::with_capacity(self.list.len());
        for &(page, step) in &self.list {
            match merged.last_mut() {
                Some(last) if last.0 == page => {
                    last.1.used += step.used;
                    last.1.filled += step.filled;
                    last.1.used_t += step.used_t;
                    last.1.filled_t += step.filled_t;
                }
                _ => merged.push((page, step)),
            }
        }
        self.merged = merged.len();
        self.list = merged;
    }

    /// The steps, sorted by page, one per page.
    fn merged(&self) -> Vec<(u64, Step)> {
        let mut all = Steps { list: self.list.clone(), merged: 0 };
        all.merge();
        all.list
    }
}

/// Per key (a file version, or a path), the traces that used and filled each page (as
/// [`Step`]s); per key, the traces that opened it.
#[derive(Default)]
struct Tallies {
    steps: FxHashMap<u32, Steps>,
    opens: FxHashMap<u32, Opens>,
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

/// Which tally a run counts in.
#[derive(Clone, Copy)]
enum Counted {
    Used,
    Filled,
}

impl Tallies {
    /// Counts `trace` once per page and key: `keep` maps its file ids to keys.
    fn count(&mut self, trace: &FleetTrace, keep: &FxHashMap<u32, u32>) {
        for (runs, counted) in [(&trace.used, Counted::Used), (&trace.filled, Counted::Filled)] {
            let runs = distinct_runs(runs, keep);
            for group in runs.chunk_by(|a, b| a.0 == b.0) {
                let steps = self.steps.entry(group[0].0).or_default();
                for &(_, first, end, t) in group {
                    for (page, sign) in [(first, 1i64), (end, -1)] {
                        let (n, sum) = (sign, i128::from(sign * t));
                        let step = match counted {
                            Counted::Used => Step { used: n, used_t: sum, ..Step::default() },
                            Counted::Filled => Step { filled: n, filled_t: sum, ..Step::default() },
                        };
                        steps.push(page, step);
                    }
                }
            }
        }
        let mut first_open: FxHashMap<u32, Nanos> = FxHashMap::default();
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

    /// Makes `to` count what `from`'s key `key` counted so far.
    fn copy_key(&mut self, from: &Tallies, key: u32, to: u32) {
        if let Some(steps) = from.steps.get(&key) {
            self.steps.insert(to, Steps { list: steps.list.clone(), merged: steps.merged });
        }
        if let Some(&opens) = from.opens.get(&key) {
            self.opens.insert(to, opens);
        }
    }

    /// Per key, what at least `need` traces did (keys where they did nothing are absent):
    /// each page with the mean time of the traces that used (filled) it.
    fn chosen(&self, need: u32) -> BTreeMap<u32, Chosen> {
        let need = i64::from(need);
        let mut chosen: BTreeMap<u32, Chosen> = BTreeMap::new();
        for (&key, steps) in &self.steps {
            let steps = steps.merged();
            let mut now = Step::default();
            let mut boundaries = steps.iter().peekable();
            while let Some(&(page, step)) = boundaries.next() {
                now.used += step.used;
                now.filled += step.filled;
                now.used_t += step.used_t;
                now.filled_t += step.filled_t;
                let Some(&&(end, _)) = boundaries.peek() else { break };
                let mean = |sum: i128, n: i64| (sum / i128::from(n)) as Nanos;
                if now.used >= need && now.used > 0 {
                    let t = mean(now.used_t, now.used);
                    chosen.entry(key).or_default().used.extend((page..end).map(|p| (p, t)));
                }
                if now.filled >= need && now.filled > 0 {
                    let t = mean(now.filled_t, now.filled);
                    chosen.entry(key).or_default().filled.extend((page..end).map(|p| (p, t)));
                }
            }
        }
        for (&key, o) in self.opens.iter().filter(|(_, o)| i64::from(o.traces) >= need) {
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
    variant_ids: FxHashMap<Variant, u32>,
    /// The builds (`None`: unlabelled), each once, by index.
    build_ids: HashMap<Option<String>, u32>,
    /// (variant, build) of every trace's files.
    variant_builds: HashSet<(u32, u32)>,
    paths: Vec<String>,
    path_ids: FxHashMap<String, u32>,
    /// Paths some trace's start wrote (their mtime is after its recording began).
    written: BTreeSet<u32>,
    /// The first version seen of each path.
    first_variant: FxHashMap<u32, u32>,
    /// Paths counted by path too (`by_path`): those seen in two versions or written, the
    /// only ones that can be the machines' state. Until a path is, it has one version, whose
    /// tallies are its path's.
    tracked: HashSet<u32>,
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

/// The runs of `runs` that belong to `file_id`s in `keep`, as (key, first page, end, time):
/// each page of a key once, with its earliest time. A file's runs never overlap (each
/// page once in `page_used` and `page_use`); where two files of a trace have one key, their
/// pages are merged one by one.
fn distinct_runs(runs: &[PageRun], keep: &FxHashMap<u32, u32>) -> Vec<(u32, u64, u64, Nanos)> {
    let mut kept: Vec<(u32, u64, u64, Nanos, u32)> = runs
        .iter()
        .filter_map(|r| {
            Some((
                *keep.get(&r.file_id)?,
                r.first_page,
                r.first_page.saturating_add(r.pages),
                r.t_ns,
                r.file_id,
            ))
        })
        .filter(|r| r.2 > r.1)
        .collect();
    kept.sort_unstable();
    let mut out = Vec::with_capacity(kept.len());
    for group in kept.chunk_by(|a, b| a.0 == b.0) {
        let overlap = group.windows(2).any(|w| w[1].1 < w[0].2);
        if !overlap {
            out.extend(group.iter().map(|r| (r.0, r.1, r.2, r.3)));
            continue;
        }
        let mut pages: Vec<(u64, Nanos)> =
            group.iter().flat_map(|r| (r.1..r.2).map(move |p| (p, r.3))).collect();
        pages.sort_unstable();
        pages.dedup_by_key(|p| p.0);
        for (page, t) in pages {
            match out.last_mut() {
                Some(last) if last.0 == group[0].0 && last.2 == page && last.3 == t => last.2 += 1,
                _ => out.push((group[0].0, page, page + 1, t)),
            }
        }
    }
    out
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
        let (keep, keep_path) = self.keys(trace);
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

    /// What `trace`'s file ids count as: a file version (`keep`) and a path (`keep_path`);
    /// files a plan leaves out are counted in `left_out` instead, files the start wrote
    /// only by path.
    fn keys(&mut self, trace: &FleetTrace) -> (FxHashMap<u32, u32>, FxHashMap<u32, u32>) {
        let settings = PlanSettings { metadata: false, ..PlanSettings::default() };
        let mut filled_pages: FxHashMap<u32, u64> = FxHashMap::default();
        for r in &trace.filled {
            *filled_pages.entry(r.file_id).or_default() += r.pages;
        }
        let page_size = u64::from(self.page_size);
        let build = match self.build_ids.get(&trace.build) {
            Some(&id) => id,
            None => {
                let id = self.build_ids.len() as u32;
                self.build_ids.insert(trace.build.clone(), id);
                id
            }
        };
        let mut keep: FxHashMap<u32, u32> = FxHashMap::default();
        let mut file_paths: Vec<(u32, u32)> = Vec::new();
        for f in &trace.files {
            let written = f.kind == FileKind::Regular
                && f.path.is_some()
                && trace.start_unix_ns > 0
                && f.mtime_ns.is_some_and(|m| m >= trace.start_unix_ns);
            if written {
                // The start wrote it: the machine's state, whose next version this machine holds.
                let path_id = self.path_id(f.path.as_deref().unwrap_or_default());
                self.written.insert(path_id);
                self.track(path_id);
                file_paths.push((f.file_id, path_id));
                continue;
            }
            // `exclusion` looks at whether the file has a path, not at the path.
            let file = File {
                id: f.file_id,
                path: f.path.as_ref().map(|_| String::new()),
                kind: f.kind,
                size: f.size,
                mtime_ns: f.mtime_ns,
                ..File::default()
            };
            if let Some(reason) = exclusion(&file, &settings, trace.start_unix_ns) {
                let bytes = filled_pages.get(&f.file_id).copied().unwrap_or(0).saturating_mul(page_size);
                if bytes > 0 {
                    let e = self.left_out.entry(reason).or_default();
                    e.0.insert(f.path.clone().unwrap_or_else(|| format!("inode {}", f.file_id)));
                    e.1 = e.1.saturating_add(bytes);
                }
                continue;
            }
            let path = self.path_id(f.path.as_deref().unwrap_or_default());
            file_paths.push((f.file_id, path));
            let id = self.variant_id(Variant { path, size: f.size, mtime_ns: f.mtime_ns });
            keep.insert(f.file_id, id);
            self.variant_builds.insert((id, build));
        }
        let keep_path = file_paths.into_iter().filter(|(_, p)| self.tracked.contains(p)).collect();
        (keep, keep_path)
    }

    /// The id of `variant`; a second version of a path makes the path tracked.
    fn variant_id(&mut self, variant: Variant) -> u32 {
        if let Some(&id) = self.variant_ids.get(&variant) {
            return id;
        }
        let id = self.variants.len() as u32;
        self.variants.push(variant);
        self.variant_ids.insert(variant, id);
        if *self.first_variant.entry(variant.path).or_insert(id) != id {
            self.track(variant.path);
        }
        id
    }

    /// Counts `path` by path from now on, with the tallies of its one version so far.
    fn track(&mut self, path: u32) {
        if !self.tracked.insert(path) {
            return;
        }
        if let Some(&variant) = self.first_variant.get(&path) {
            self.by_path.copy_key(&self.by_variant, variant, path);
        }
    }

    fn path_id(&mut self, path: &str) -> u32 {
        if let Some(&id) = self.path_ids.get(path) {
            return id;
        }
        let id = self.paths.len() as u32;
        self.paths.push(path.to_owned());
        self.path_ids.insert(path.to_owned(), id);
        id
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
        let chosen = self.chosen(need);
        let merged = self.merged_trace(image, &chosen);
        if merged.trace.files.is_empty() {
            let why = if chosen.is_empty() {
                format!("no page was used by {need} of the {} traces", self.traces)
            } else {
                "none of the files the traces share is on this machine at the same size and modification time"
                    .to_owned()
            };
            return Err(PrefetchError::Fleet(format!("nothing to plan: {why}")));
        }
        let mut plan = build_plan(&merged.trace, dataset, settings, tool)?;
        self.describe(&mut plan, dataset, min_share, need);
        self.explain(&mut plan, merged, min_share, need);
        Ok(plan)
    }

    /// Paths that are the machines' state (a log, a journal, a cache), not the image's:
    /// of several sizes or mtimes within one build, or written by a start. Their pages
    /// count by path and are planned for this machine's version; other paths count by
    /// version.
    fn state_paths(&self) -> BTreeSet<&str> {
        let mut versions: HashMap<(u32, u32), usize> = HashMap::new();
        for &(variant, build) in &self.variant_builds {
            *versions.entry((self.variants[variant as usize].path, build)).or_default() += 1;
        }
        let mut state: BTreeSet<&str> = versions
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|((path, _), _)| self.paths[path as usize].as_str())
            .collect();
        state.extend(self.written.iter().map(|&p| self.paths[p as usize].as_str()));
        state
    }

    /// What at least `need` traces did, per file version, or per path for state files.
    fn chosen(&self, need: u32) -> BTreeMap<Key, Chosen> {
        let state = self.state_paths();
        let mut chosen: BTreeMap<Key, Chosen> = BTreeMap::new();
        for (variant, c) in self.by_variant.chosen(need) {
            if !state.contains(self.paths[self.variants[variant as usize].path as usize].as_str()) {
                chosen.insert(Key::Version(variant), c);
            }
        }
        for (path, c) in self.by_path.chosen(need) {
            if state.contains(self.paths[path as usize].as_str()) {
                chosen.insert(Key::State(path), c);
            }
        }
        chosen
    }

    fn path_of(&self, key: &Key) -> &str {
        match *key {
            Key::Version(v) => self.paths[self.variants[v as usize].path as usize].as_str(),
            Key::State(p) => self.paths[p as usize].as_str(),
        }
    }

    /// The chosen pages of the files this machine has in the same version, as one trace
    /// of this machine's files; the rest counted as left out.
    fn merged_trace(&self, image: &dyn Image, chosen: &BTreeMap<Key, Chosen>) -> Merged {
        let page = u64::from(self.page_size);
        let mut by_path: BTreeMap<&str, Vec<Key>> = BTreeMap::new();
        for key in chosen.keys() {
            by_path.entry(self.path_of(key)).or_default().push(*key);
        }
        let mut merged = Merged::default();
        merged.trace.meta.page_size = self.page_size;
        for (path, keys) in by_path {
            let (dev, ino, size, mtime_ns) = match image.file(path) {
                ImageFile::Regular { dev, ino, size, mtime_ns } => (dev, ino, size, mtime_ns),
                other => {
                    let reason = if other == ImageFile::Missing {
                        "missing on this machine"
                    } else {
                        "not a regular file on this machine"
                    };
                    keys.iter().for_each(|k| merged.leave_out(reason, chosen[k].pages(), page));
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
                let reason = "another version than this machine's (size or modification time differs)";
                merged.leave_out(reason, chosen[k].pages(), page);
            }
            let Some(key) = matching else { continue };
            merged.state_files += usize::from(matches!(key, Key::State(_)));
            let file = File {
                id: merged.trace.files.len() as u32 + 1,
                dev,
                ino,
                path: Some(path.to_owned()),
                kind: FileKind::Regular,
                size: Some(size),
                mtime_ns: Some(mtime_ns),
            };
            merged.add_file(file, &chosen[&key], page, image.extents(path, dev, ino));
        }
        merged
    }

    /// The plan's source: the fleet's traces, builds, hosts, commonest command and kernel.
    fn describe(&self, plan: &mut Plan, dataset: &str, min_share: f64, need: u32) {
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
    }

    /// The plan's exclusions (per trace on average) and its notes on how it was made.
    fn explain(&self, plan: &mut Plan, merged: Merged, min_share: f64, need: u32) {
        let per_trace = self.traces as u64;
        let recorded = self
            .left_out
            .iter()
            .map(|(reason, (paths, bytes))| ((*reason).to_owned(), (paths.len(), bytes / per_trace)));
        for (reason, (files, read_bytes)) in recorded.chain(merged.left_out) {
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
        if merged.state_files > 0 {
            let files = if merged.state_files == 1 {
                "1 file is".to_owned()
            } else {
                format!("{} files are", merged.state_files)
            };
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
    }
}

/// The fleet's chosen pages as one trace of this machine's files, and what was left out.
#[derive(Default)]
struct Merged {
    trace: Trace,
    /// Reason -> (files, bytes of chosen pages).
    left_out: BTreeMap<String, (usize, u64)>,
    state_files: usize,
}

impl Merged {
    fn leave_out(&mut self, reason: &str, pages: usize, page: u64) {
        let e = self.left_out.entry(reason.to_owned()).or_default();
        e.0 += 1;
        e.1 = e.1.saturating_add(pages as u64 * page);
    }

    /// Adds `file` with the pages `chosen` for it (those within its size), its first open
    /// and its extents on this machine.
    fn add_file(&mut self, file: File, chosen: &Chosen, page: u64, extents: Vec<Extent>) {
        let id = file.id;
        let last_page = file.size.unwrap_or(0).div_ceil(page);
        let within = |pages: &TimedPages| -> TimedPages {
            pages.iter().copied().filter(|(p, _)| *p < last_page).collect()
        };
        let (used, filled) = (&within(&chosen.used), &within(&chosen.filled));
        self.trace.page_accesses.extend(runs(used).map(|(index, pages, t_ns)| PageAccess {
            t_ns,
            file_id: id,
            index,
            pages,
            kind: AccessKind::Read,
            ..PageAccess::default()
        }));
        self.trace.page_fills.extend(runs(filled).map(|(index, pages, t_ns)| PageFill {
            t_ns,
            file_id: id,
            index,
            pages,
            ..PageFill::default()
        }));
        if let Some(t_ns) = chosen.opened {
            self.trace.file_opens.push(FileOpen { t_ns, pid: 0, file_id: id, exec: false });
        }
        self.trace.extents.extend(extents.into_iter().map(|e| Extent { file_id: id, ..e }));
        self.trace.files.push(file);
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
