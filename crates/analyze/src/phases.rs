//! Automatic phases: the start's timeline cut into short bins, each labelled by its
//! dominant work (waiting for reads from one directory, running, or waiting), runs
//! of equal labels joined, short runs absorbed by a neighbour, and each phase named
//! by what it did. Marks always cut: no phase spans a mark. Without scheduler
//! data (imported traces), the system's CPU samples tell running from waiting.

use coldstart_trace::{FileKind, Nanos, ThreadState};
use rustc_hash::FxHashMap;

use crate::analysis::{Phase, PhaseKind, Read};
use crate::context::Ctx;
use crate::time::NO_FILE;
use crate::units;

/// A directory (or group of unnamed files) reads are attributed to.
type DirId = u32;

#[derive(Clone, Default)]
struct Bin {
    cpu_ns: Nanos,
    io_ns: Nanos,
    pages: u64,
    /// I/O wait in the bin by the directory of the file it is attributed to.
    wait_dirs: Vec<(DirId, Nanos)>,
    /// The directory the bin's waits (or, failing those, its page fills) were mostly for.
    dir: Option<DirId>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Label {
    kind: PhaseKind,
    dir: Option<DirId>,
}

#[derive(Clone, Copy)]
struct Segment {
    first_bin: usize,
    end_bin: usize,
    label: Label,
    span: usize,
    /// The directory of the first of its bins with page fills, whatever its kind.
    hint: Option<DirId>,
}

/// Interns the directory of each file, so bins compare small numbers.
struct Dirs<'t> {
    ctx: &'t Ctx<'t>,
    names: Vec<String>,
    by_name: FxHashMap<String, DirId>,
    by_file: FxHashMap<u32, DirId>,
}

impl<'t> Dirs<'t> {
    fn of_file(&mut self, file: u32) -> DirId {
        if let Some(&d) = self.by_file.get(&file) {
            return d;
        }
        let name = match self.ctx.file(file) {
            Some(f) if f.kind == FileKind::DeviceMetadata => "<filesystem metadata>".to_owned(),
            Some(f) if f.kind == FileKind::Other && f.path.is_none() => "<filesystem metadata>".to_owned(),
            Some(f) => match &f.path {
                Some(path) => parent(path).to_owned(),
                None => "<unresolved files>".to_owned(),
            },
            None => "<unknown files>".to_owned(),
        };
        let next = self.names.len() as DirId;
        let d = *self.by_name.entry(name.clone()).or_insert_with(|| {
            self.names.push(name);
            next
        });
        self.by_file.insert(file, d);
        d
    }
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => path,
    }
}

/// Phases of `from..to`; `wait_top_file` names the file behind each attributed I/O
/// wait (by `sched` row), so waiting time counts for the directory being read.
pub(crate) fn phases(ctx: &Ctx, from: Nanos, to: Nanos, reads: &[Read], wait_top_file: &[u32]) -> Vec<Phase> {
    if to <= from {
        return Vec::new();
    }
    let config = ctx.config;
    let span_ns = to - from;
    let width = (span_ns / Nanos::from(config.phase_bins.max(1))).max(config.phase_bin_min_ns).max(1);
    let marks = marks_between(ctx, from, to);
    let (edges, span_of) = bin_edges(from, to, width, &marks);
    let mut bins = vec![Bin::default(); edges.len() - 1];
    let mut dirs =
        Dirs { ctx, names: Vec::new(), by_name: FxHashMap::default(), by_file: FxHashMap::default() };
    add_sched(ctx, &edges, &mut bins, &mut dirs, wait_top_file);
    add_fills(ctx, &edges, &mut bins, &mut dirs);
    for bin in bins.iter_mut().filter(|bin| bin.dir.is_none()) {
        bin.dir = top_wait_dir(bin);
    }

    let has_sched = !ctx.trace.sched.is_empty();
    if !has_sched {
        add_cpu_samples(ctx, &edges, &mut bins);
    }
    let labels = label_bins(&bins, &edges, has_sched || !ctx.trace.cpu_samples.is_empty());
    let mut segments = run_lengths(&labels, &span_of, &bins);
    let min_len = (3 * width).max(span_ns / Nanos::from(config.phase_min_fraction.max(1)));
    absorb_short(&mut segments, &edges, min_len);

    describe(ctx, &segments, &edges, &bins, &marks, reads)
}

/// The marks strictly inside `from..to`, by time, one per time.
fn marks_between<'t>(ctx: &Ctx<'t>, from: Nanos, to: Nanos) -> Vec<(Nanos, &'t str)> {
    let mut marks: Vec<(Nanos, &str)> = ctx
        .trace
        .marks
        .iter()
        .filter(|m| m.t_ns > from && m.t_ns < to)
        .map(|m| (m.t_ns, m.name.as_str()))
        .collect();
    marks.sort();
    marks.dedup_by_key(|m| m.0);
    marks
}

/// Bin edges: a regular grid of `width`, plus every mark time; with, per bin, the
/// number of marks before it.
fn bin_edges(from: Nanos, to: Nanos, width: Nanos, marks: &[(Nanos, &str)]) -> (Vec<Nanos>, Vec<usize>) {
    let mut edges = vec![from];
    let mut span_of = Vec::new();
    let mut span = 0;
    let mut next_mark = 0;
    let mut grid = from;
    while *edges.last().unwrap_or(&to) < to {
        let last = *edges.last().unwrap_or(&from);
        while grid <= last {
            grid += width;
        }
        let mark = marks.get(next_mark).map(|m| m.0);
        let edge = match mark {
            Some(m) if m <= grid.min(to) => {
                next_mark += 1;
                m
            }
            _ => grid.min(to),
        };
        span_of.push(span);
        edges.push(edge);
        if mark == Some(edge) {
            span += 1;
        }
    }
    (edges, span_of)
}

/// Adds the in-scope threads' running and I/O wait time to the bins, the waits also to
/// the directory of the file they were for.
fn add_sched(ctx: &Ctx, edges: &[Nanos], bins: &mut [Bin], dirs: &mut Dirs<'_>, wait_top_file: &[u32]) {
    let (from, to) = (edges[0], edges[edges.len() - 1]);
    let bin_of = |t: Nanos| edges.partition_point(|&e| e <= t).saturating_sub(1).min(edges.len() - 2);
    let mut in_scope = ctx.in_scope_test();
    for (r, s) in ctx.trace.sched.iter().enumerate() {
        if !matches!(s.state, ThreadState::Running | ThreadState::IoWait) {
            continue;
        }
        let (start, end) = (s.start_ns.max(from), s.end_ns.min(to));
        if start >= end || !in_scope(s.tid) {
            continue;
        }
        let wait_dir = match wait_top_file.get(r) {
            Some(&file) if s.state == ThreadState::IoWait && file != NO_FILE => Some(dirs.of_file(file)),
            _ => None,
        };
        for (b, bin) in bins.iter_mut().enumerate().skip(bin_of(start)) {
            let overlap = end.min(edges[b + 1]) - start.max(edges[b]);
            if overlap <= 0 {
                break;
            }
            match s.state {
                ThreadState::Running => bin.cpu_ns = bin.cpu_ns.saturating_add(overlap),
                _ => bin.io_ns = bin.io_ns.saturating_add(overlap),
            }
            if let Some(d) = wait_dir {
                match bin.wait_dirs.iter_mut().find(|w| w.0 == d) {
                    Some(w) => w.1 = w.1.saturating_add(overlap),
                    None => bin.wait_dirs.push((d, overlap)),
                }
            }
        }
    }
}

/// Adds the page fills to the bins, each bin closed with the directory it filled most.
fn add_fills(ctx: &Ctx, edges: &[Nanos], bins: &mut [Bin], dirs: &mut Dirs<'_>) {
    let (from, to) = (edges[0], edges[edges.len() - 1]);
    let fills = &ctx.trace.page_fills;
    let order = &ctx.fills_in_time;
    let first = order.partition_point(|&r| fills[r as usize].t_ns < from);
    let mut pages_by_dir: Vec<(DirId, u64)> = Vec::new();
    let mut current_bin = usize::MAX;
    let mut b = 0;
    let mut last_file: Option<(u32, DirId)> = None;
    for &r in &order[first..] {
        let fill = &fills[r as usize];
        if fill.t_ns >= to {
            break;
        }
        while fill.t_ns >= edges[b + 1] {
            b += 1;
        }
        if b != current_bin {
            close_bin(bins, current_bin, &mut pages_by_dir);
            current_bin = b;
        }
        let d = match last_file {
            Some((file, dir)) if file == fill.file_id => dir,
            _ => {
                let dir = dirs.of_file(fill.file_id);
                last_file = Some((fill.file_id, dir));
                dir
            }
        };
        match pages_by_dir.iter_mut().find(|x| x.0 == d) {
            Some(x) => x.1 = x.1.saturating_add(u64::from(fill.pages)),
            None => pages_by_dir.push((d, u64::from(fill.pages))),
        }
        bins[b].pages = bins[b].pages.saturating_add(u64::from(fill.pages));
    }
    close_bin(bins, current_bin, &mut pages_by_dir);
}

/// Without scheduler data, the system's CPU samples (imports, bootchart-style)
/// tell CPU and I/O wait: each sample's busy and iowait shares of all CPUs,
/// spread over the bins its interval overlaps.
fn add_cpu_samples(ctx: &Ctx, edges: &[Nanos], bins: &mut [Bin]) {
    let cpus = f64::from(ctx.trace.meta.cpu_count.max(1));
    let (from, to) = (edges[0], edges[edges.len() - 1]);
    for sample in &ctx.trace.cpu_samples {
        let (start, end) = ((sample.t_ns - sample.dt_ns).max(from), sample.t_ns.min(to));
        let first = edges.partition_point(|&e| e <= start).saturating_sub(1);
        for (b, bin) in bins.iter_mut().enumerate().skip(first) {
            let overlap = end.min(edges[b + 1]) - start.max(edges[b]);
            if overlap <= 0 {
                break;
            }
            bin.cpu_ns =
                bin.cpu_ns.saturating_add(((sample.user + sample.system) * cpus * overlap as f64) as Nanos);
            bin.io_ns = bin.io_ns.saturating_add((sample.iowait * cpus * overlap as f64) as Nanos);
        }
    }
}

fn top_wait_dir(bin: &Bin) -> Option<DirId> {
    bin.wait_dirs.iter().max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0))).map(|x| x.0)
}

/// Gives bin `b` (if any) the directory with most pages, and starts a new count.
fn close_bin(bins: &mut [Bin], b: usize, pages_by_dir: &mut Vec<(DirId, u64)>) {
    if let Some(bin) = bins.get_mut(b) {
        let by_wait = top_wait_dir(bin);
        let by_fills = pages_by_dir.iter().max_by(|x, y| x.1.cmp(&y.1).then(y.0.cmp(&x.0))).map(|x| x.0);
        bin.dir = by_wait.or(by_fills);
    }
    pages_by_dir.clear();
}

/// `has_time`: the bins' CPU and I/O times are known (scheduler data or CPU samples).
fn label_bins(bins: &[Bin], edges: &[Nanos], has_time: bool) -> Vec<Label> {
    let mut labels: Vec<Label> = bins
        .iter()
        .enumerate()
        .map(|(b, bin)| {
            let busy = bin.cpu_ns.max(bin.io_ns) as f64 / (edges[b + 1] - edges[b]).max(1) as f64;
            let kind = if !has_time {
                if bin.pages > 0 { PhaseKind::Read } else { PhaseKind::Wait }
            } else if busy < 0.25 {
                PhaseKind::Wait
            } else if bin.io_ns >= bin.cpu_ns {
                PhaseKind::Read
            } else {
                PhaseKind::Cpu
            };
            Label { kind, dir: if kind == PhaseKind::Read { bin.dir } else { None } }
        })
        .collect();
    // Read bins without fills of their own (the wait after the request) take the
    // directory of the read bin before them, or else after them.
    for pass in 0..2 {
        let mut last: Option<DirId> = None;
        let indices: Box<dyn Iterator<Item = usize>> =
            if pass == 0 { Box::new(0..labels.len()) } else { Box::new((0..labels.len()).rev()) };
        for b in indices {
            let label = &mut labels[b];
            if label.kind != PhaseKind::Read {
                last = None;
            } else if label.dir.is_some() {
                last = label.dir;
            } else {
                label.dir = last;
            }
        }
    }
    labels
}

fn run_lengths(labels: &[Label], span_of: &[usize], bins: &[Bin]) -> Vec<Segment> {
    let mut segments: Vec<Segment> = Vec::new();
    for (b, &label) in labels.iter().enumerate() {
        match segments.last_mut() {
            Some(s) if s.label == label && s.span == span_of[b] => {
                s.end_bin = b + 1;
                s.hint = s.hint.or(bins[b].dir);
            }
            _ => segments.push(Segment {
                first_bin: b,
                end_bin: b + 1,
                label,
                span: span_of[b],
                hint: bins[b].dir,
            }),
        }
    }
    segments
}

/// Merges segments shorter than `min_len` into a neighbour in the same mark span
/// (preferring one of the same kind, then one reading the directory the short
/// segment read from, then the longer), shortest first, until none is left.
fn absorb_short(segments: &mut Vec<Segment>, edges: &[Nanos], min_len: Nanos) {
    let len = |s: &Segment| edges[s.end_bin] - edges[s.first_bin];
    loop {
        let candidate = (0..segments.len())
            .filter(|&i| len(&segments[i]) < min_len)
            .filter(|&i| {
                let same_span = |j: usize| segments.get(j).is_some_and(|n| n.span == segments[i].span);
                (i > 0 && same_span(i - 1)) || same_span(i + 1)
            })
            .min_by_key(|&i| (len(&segments[i]), i));
        let Some(i) = candidate else { break };
        let this = segments[i];
        let neighbour =
            |j: Option<usize>| j.filter(|&j| segments.get(j).is_some_and(|n| n.span == this.span));
        let prev = neighbour(i.checked_sub(1));
        let next = neighbour(Some(i + 1));
        let target = match (prev, next) {
            (Some(p), Some(n)) => {
                let same_kind = |j: usize| segments[j].label.kind == this.label.kind;
                let same_dir = |j: usize| this.hint.is_some() && segments[j].label.dir == this.hint;
                match (same_kind(p), same_kind(n), same_dir(p), same_dir(n)) {
                    (true, false, _, _) => p,
                    (false, true, _, _) => n,
                    (_, _, true, false) => p,
                    (_, _, false, true) => n,
                    _ if len(&segments[n]) > len(&segments[p]) => n,
                    _ => p,
                }
            }
            (Some(p), None) => p,
            (None, Some(n)) => n,
            (None, None) => break,
        };
        let label = segments[target].label;
        let (lo, hi) = (i.min(target), i.max(target));
        segments[lo] = Segment {
            first_bin: segments[lo].first_bin,
            end_bin: segments[hi].end_bin,
            label,
            span: this.span,
            hint: segments[lo].hint.or(segments[hi].hint),
        };
        segments.remove(hi);
        // Absorbing may have made two neighbours equal: join them.
        let mut j = 1;
        while j < segments.len() {
            if segments[j].label == segments[j - 1].label && segments[j].span == segments[j - 1].span {
                segments[j - 1].end_bin = segments[j].end_bin;
                segments[j - 1].hint = segments[j - 1].hint.or(segments[j].hint);
                segments.remove(j);
            } else {
                j += 1;
            }
        }
    }
}

fn describe(
    ctx: &Ctx,
    segments: &[Segment],
    edges: &[Nanos],
    bins: &[Bin],
    marks: &[(Nanos, &str)],
    reads: &[Read],
) -> Vec<Phase> {
    let fills = &ctx.trace.page_fills;
    let order = &ctx.fills_in_time;
    let mut phases = Vec::with_capacity(segments.len());
    for (i, seg) in segments.iter().enumerate() {
        let (start, end) = (edges[seg.first_bin], edges[seg.end_bin]);
        let mut pages_by_file: FxHashMap<u32, u64> = FxHashMap::default();
        let first = order.partition_point(|&r| fills[r as usize].t_ns < start);
        let mut run: Option<(u32, u64)> = None;
        for &r in &order[first..] {
            let fill = &fills[r as usize];
            if fill.t_ns >= end {
                break;
            }
            match &mut run {
                Some((file, pages)) if *file == fill.file_id => {
                    *pages = pages.saturating_add(u64::from(fill.pages))
                }
                _ => {
                    if let Some((file, pages)) = run.replace((fill.file_id, u64::from(fill.pages))) {
                        pages_by_file
                            .entry(file)
                            .and_modify(|sum| *sum = sum.saturating_add(pages))
                            .or_insert(pages);
                    }
                }
            }
        }
        if let Some((file, pages)) = run {
            pages_by_file.entry(file).and_modify(|sum| *sum = sum.saturating_add(pages)).or_insert(pages);
        }
        let pages: u64 = pages_by_file.values().fold(0, |sum, &pages| sum.saturating_add(pages));
        let (dir, files_in_dir) = majority_dir(ctx, &pages_by_file);
        let reads_here =
            &reads[reads.partition_point(|r| r.t_ns < start)..reads.partition_point(|r| r.t_ns < end)];
        let seg_bins = &bins[seg.first_bin..seg.end_bin];
        let ends_at_mark = segments
            .get(i + 1)
            .filter(|next| next.span != seg.span)
            .and_then(|_| marks.get(seg.span).map(|m| m.1.to_owned()));
        phases.push(Phase {
            start_ns: start,
            end_ns: end,
            kind: seg.label.kind,
            name: String::new(),
            dir,
            files: pages_by_file.len() as u64,
            files_in_dir,
            top_file: pages_by_file.iter().max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0))).map(|(&f, _)| f),
            pages,
            bytes: ctx.bytes(pages),
            reads: reads_here.len() as u64,
            seeks: reads_here.iter().filter(|r| r.seek).count() as u64,
            cpu_ns: seg_bins.iter().map(|b| b.cpu_ns).fold(0, Nanos::saturating_add),
            io_wait_ns: seg_bins.iter().map(|b| b.io_ns).fold(0, Nanos::saturating_add),
            top_pid: None,
            ends_at_mark,
        });
    }
    assign_top_pids(ctx, &mut phases);
    for phase in &mut phases {
        phase.name = name(ctx, phase);
    }
    phases
}

/// The deepest directory holding at least half the bytes, and how many files under it.
fn majority_dir(ctx: &Ctx, pages_by_file: &FxHashMap<u32, u64>) -> (Option<String>, u64) {
    let total: u64 = pages_by_file.values().fold(0, |sum, &pages| sum.saturating_add(pages));
    let mut by_dir: FxHashMap<&str, (u64, u64)> = FxHashMap::default();
    for (&file, &pages) in pages_by_file {
        let Some(path) =
            ctx.file(file).filter(|f| f.kind != FileKind::DeviceMetadata).and_then(|f| f.path.as_deref())
        else {
            continue;
        };
        let mut dir = parent(path);
        loop {
            let entry = by_dir.entry(dir).or_default();
            entry.0 = entry.0.saturating_add(pages);
            entry.1 += 1;
            if dir == "/" || !dir.contains('/') {
                break;
            }
            dir = parent(dir);
        }
    }
    by_dir
        .into_iter()
        .filter(|(_, (pages, _))| total > 0 && 2 * pages >= total)
        .max_by(|a, b| {
            let depth = |d: &str| if d == "/" { 0 } else { d.matches('/').count() };
            depth(a.0).cmp(&depth(b.0)).then(a.1.0.cmp(&b.1.0)).then(b.0.cmp(a.0))
        })
        .map_or((None, 0), |(dir, (_, files))| (Some(dir.to_owned()), files))
}

fn assign_top_pids(ctx: &Ctx, phases: &mut [Phase]) {
    let mut cpu: FxHashMap<(usize, i32), Nanos> = FxHashMap::default();
    let mut in_scope = ctx.in_scope_test();
    let mut last_pid: Option<(i32, i32)> = None;
    for s in &ctx.trace.sched {
        if s.state != ThreadState::Running || !in_scope(s.tid) {
            continue;
        }
        let pid = match last_pid {
            Some((tid, pid)) if tid == s.tid => pid,
            _ => {
                let pid = ctx.pid_of(s.tid);
                last_pid = Some((s.tid, pid));
                pid
            }
        };
        let first = phases.partition_point(|p| p.end_ns <= s.start_ns);
        for (i, phase) in phases.iter().enumerate().skip(first) {
            let overlap = s.end_ns.min(phase.end_ns) - s.start_ns.max(phase.start_ns);
            if overlap <= 0 {
                break;
            }
            cpu.entry((i, pid)).and_modify(|sum| *sum = sum.saturating_add(overlap)).or_insert(overlap);
        }
    }
    if ctx.trace.sched.is_empty() {
        // Imported traces: the processes' own CPU samples.
        for sample in &ctx.trace.process_samples {
            let (start, end) = (sample.t_ns.saturating_sub(sample.dt_ns), sample.t_ns);
            if end <= start {
                continue;
            }
            let span = end.saturating_sub(start);
            let ns = ((sample.cpu_user + sample.cpu_system) * span as f64) as Nanos;
            if ns <= 0 {
                continue;
            }
            let first = phases.partition_point(|p| p.end_ns <= start);
            for (i, phase) in phases.iter().enumerate().skip(first) {
                let overlap = end.min(phase.end_ns) - start.max(phase.start_ns);
                if overlap <= 0 {
                    break;
                }
                let share = i128::from(ns) * i128::from(overlap) / i128::from(span);
                let total = cpu.entry((i, sample.pid)).or_default();
                *total = total.saturating_add(share.try_into().unwrap_or(Nanos::MAX));
            }
        }
    }
    for (i, phase) in phases.iter_mut().enumerate() {
        phase.top_pid = cpu
            .iter()
            .filter(|((p, _), _)| *p == i)
            .max_by(|a, b| a.1.cmp(b.1).then(b.0.1.cmp(&a.0.1)))
            .map(|((_, pid), _)| *pid);
    }
}

fn name(ctx: &Ctx, phase: &Phase) -> String {
    let dur = units::secs(phase.end_ns - phase.start_ns);
    let comm = |pid: i32| {
        ctx.trace
            .processes
            .iter()
            .rev()
            .find(|p| p.pid == pid)
            .map_or_else(|| format!("pid {pid}"), |p| p.name().to_owned())
    };
    match phase.kind {
        PhaseKind::Read if phase.files == 0 => format!("I/O wait — {dur}"),
        PhaseKind::Read => {
            let what = match (&phase.dir, phase.files) {
                (Some(_), files) if files > 1 && phase.files_in_dir == 1 => {
                    let top = phase.top_file.map_or("1 file".to_owned(), |f| ctx.display_name(f));
                    format!("read {top} (+{} elsewhere)", files - 1)
                }
                (Some(dir), files) if files > 1 => {
                    let elsewhere = files - phase.files_in_dir;
                    let rest =
                        if elsewhere > 0 { format!(" (+{elsewhere} elsewhere)") } else { String::new() };
                    format!("read {} under {dir}{rest}", units::plural(phase.files_in_dir, "file"))
                }
                (_, 1) => {
                    format!("read {}", phase.top_file.map_or("1 file".to_owned(), |f| ctx.display_name(f)))
                }
                (_, files) => match phase.top_file {
                    Some(f) => format!("read {} files, mostly {}", units::count(files), ctx.display_name(f)),
                    None => format!("read {}", units::plural(files, "file")),
                },
            };
            format!("{what} — {dur}, {}, {}", units::bytes(phase.bytes), units::plural(phase.seeks, "seek"))
        }
        PhaseKind::Cpu => {
            let who = phase.top_pid.map(|pid| format!(", mostly {}", comm(pid))).unwrap_or_default();
            let read =
                if phase.bytes > 0 { format!(", {} read", units::bytes(phase.bytes)) } else { String::new() };
            format!("CPU{who} — {dur}{read}")
        }
        PhaseKind::Wait => {
            let read =
                if phase.bytes > 0 { format!(", {} read", units::bytes(phase.bytes)) } else { String::new() };
            format!("waiting — {dur}{read}")
        }
    }
}
