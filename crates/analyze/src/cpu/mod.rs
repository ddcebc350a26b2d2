//! Where the CPU went during the start: the trace's stack samples (from the command's
//! start to ready) summed by function and by library, per phase, and within each CPU
//! segment of the critical path, named by its hottest function; and the subtree that
//! holds most of the critical path's CPU, with what is inside it (`subtree.rs`). Kernel
//! frames are never counted as functions: a sample in the kernel is charged to what the
//! thread was doing there (`frames.rs`).

mod frames;
mod subtree;

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use coldstart_trace::{Nanos, StackIndex, Trace};

use crate::analysis::{
    CpuFunction, CpuLibrary, CpuProfile, CpuShare, CpuSubtree, CpuTree, CriticalPath, Phase, PhaseCpu,
    SegmentCpu, SegmentKind, TreeScope,
};
use frames::FrameTable;

/// Functions listed in the profile, and per phase.
const TOP_FUNCTIONS: usize = 15;
const TOP_PER_PHASE: usize = 3;
const TOP_LIBRARIES: usize = 10;
/// Entries listed in the subtree's and the inclusive lists.
const TOP_INSIDE: usize = 5;
/// Callers named above the subtree's root.
const CALLERS: usize = 3;

/// One sample reduced to what the sums need: its thread, time and frames.
struct Named {
    t_ns: Nanos,
    tid: i32,
    /// Indices into the frame table, innermost first; the kernel's part is one frame.
    frames: Rc<[u32]>,
}

fn top_functions(table: &FrameTable, samples: &[&Named], limit: usize) -> Vec<CpuFunction> {
    let mut by_function: HashMap<u32, (u64, u64)> = HashMap::new();
    for s in samples {
        let mut seen = HashSet::new();
        for (i, &f) in s.frames.iter().enumerate() {
            let entry = by_function.entry(f).or_default();
            if i == 0 {
                entry.0 += 1;
            }
            if seen.insert(f) {
                entry.1 += 1;
            }
        }
    }
    let mut rows: Vec<CpuFunction> = by_function
        .into_iter()
        .filter(|(_, (self_samples, _))| *self_samples > 0)
        .map(|(f, (self_samples, samples))| {
            let info = table.get(f);
            CpuFunction { name: info.name.clone(), library: info.library.clone(), self_samples, samples }
        })
        .collect();
    rows.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then(a.name.cmp(&b.name)));
    rows.truncate(limit);
    rows
}

/// `counts` as shares, most first, at most `limit`.
fn shares(table: &FrameTable, counts: HashMap<u32, u64>, limit: usize) -> Vec<CpuShare> {
    let mut rows: Vec<CpuShare> = counts
        .into_iter()
        .map(|(f, samples)| {
            let info = table.get(f);
            CpuShare { name: info.name.clone(), library: info.library.clone(), samples }
        })
        .collect();
    rows.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.name.cmp(&b.name)));
    rows.truncate(limit);
    rows
}

/// The callers of the subtree's root, nearest first: at each level the most frequent
/// among the members that share the callers chosen so far.
fn callers(samples: &[Vec<u32>], members: &[(usize, usize)], table: &FrameTable) -> Vec<CpuShare> {
    let mut chosen = Vec::new();
    let mut group: Vec<(usize, usize)> = members.to_vec();
    for depth in 1..=CALLERS {
        let caller = |&(s, p): &(usize, usize)| p.checked_sub(depth).map(|q| samples[s][q]);
        let mut counts: HashMap<u32, u64> = HashMap::new();
        for m in &group {
            if let Some(f) = caller(m) {
                *counts.entry(f).or_default() += 1;
            }
        }
        let Some((id, n)) = counts
            .into_iter()
            .max_by(|a, b| a.1.cmp(&b.1).then_with(|| table.get(b.0).name.cmp(&table.get(a.0).name)))
        else {
            break;
        };
        group.retain(|m| caller(m) == Some(id));
        let info = table.get(id);
        chosen.push(CpuShare { name: info.name.clone(), library: info.library.clone(), samples: n });
    }
    chosen
}

/// What is inside the subtree rooted at `found`.
fn describe(samples: &[Vec<u32>], found: &subtree::Found, table: &FrameTable) -> CpuSubtree {
    let (mut callees, mut allocator, mut kernel) =
        (HashMap::<u32, u64>::new(), HashMap::<u32, u64>::new(), HashMap::<u32, u64>::new());
    let (mut self_samples, mut allocator_samples, mut kernel_samples) = (0, 0, 0);
    for &(s, p) in &found.members {
        let frames = &samples[s];
        match frames.get(p + 1) {
            Some(&callee) => *callees.entry(callee).or_default() += 1,
            None => self_samples += 1,
        }
        if let Some(&a) = frames[p + 1..].iter().find(|&&f| table.get(f).allocator) {
            allocator_samples += 1;
            *allocator.entry(a).or_default() += 1;
        }
        if let Some(&leaf) = frames.last().filter(|&&f| table.get(f).kernel) {
            kernel_samples += 1;
            *kernel.entry(leaf).or_default() += 1;
        }
    }
    let root = table.get(found.frame);
    CpuSubtree {
        name: root.name.clone(),
        library: root.library.clone(),
        samples: found.members.len() as u64,
        self_samples,
        called_from: callers(samples, &found.members, table),
        callees: shares(table, callees, TOP_INSIDE),
        allocator_samples,
        allocator: shares(table, allocator, TOP_INSIDE),
        kernel_samples,
        kernel: shares(table, kernel, TOP_INSIDE),
    }
}

/// The inclusive view of `samples` and their dominant subtree.
fn tree(table: &FrameTable, samples: &[&Named], scope: TreeScope) -> CpuTree {
    let root_first: Vec<Vec<u32>> =
        samples.iter().map(|s| s.frames.iter().rev().copied().collect()).collect();
    let mut inclusive: HashMap<u32, u64> = HashMap::new();
    for frames in &root_first {
        let mut seen = HashSet::new();
        for &f in frames {
            let info = table.get(f);
            if info.named && info.can_be_cause() && seen.insert(f) {
                *inclusive.entry(f).or_default() += 1;
            }
        }
    }
    CpuTree {
        scope,
        samples: samples.len() as u64,
        inclusive: shares(table, inclusive, TOP_INSIDE),
        subtree: subtree::dominant(&root_first, table).map(|found| describe(&root_first, &found, table)),
    }
}

fn libraries(table: &FrameTable, all: &[&Named]) -> Vec<CpuLibrary> {
    let mut by_library: HashMap<&str, u64> = HashMap::new();
    for s in all {
        if let Some(&f) = s.frames.first() {
            *by_library.entry(&table.get(f).library).or_default() += 1;
        }
    }
    let mut libraries: Vec<CpuLibrary> = by_library
        .into_iter()
        .map(|(name, self_samples)| CpuLibrary { name: name.to_owned(), self_samples })
        .collect();
    libraries.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then(a.name.cmp(&b.name)));
    libraries.truncate(TOP_LIBRARIES);
    libraries
}

/// The profile of `trace`'s samples from `origin` to `end`; `None` without stack samples.
pub fn cpu_profile(
    trace: &Trace,
    origin: Nanos,
    end: Nanos,
    phases: &[Phase],
    path: Option<&CriticalPath>,
) -> Option<CpuProfile> {
    if trace.stack_samples.is_empty() {
        return None;
    }
    let index = StackIndex::new(trace);
    let mut table = FrameTable::default();
    let named: Vec<Named> = trace
        .stack_samples
        .iter()
        .filter(|s| (origin..=end).contains(&s.t_ns))
        .map(|s| Named { t_ns: s.t_ns, tid: s.tid, frames: table.stack(&index, s.stack_id) })
        .collect();
    let all: Vec<&Named> = named.iter().collect();
    let phases = phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let inside: Vec<&Named> =
                all.iter().copied().filter(|s| s.t_ns >= p.start_ns && s.t_ns < p.end_ns).collect();
            PhaseCpu {
                phase: i,
                samples: inside.len() as u64,
                functions: top_functions(&table, &inside, TOP_PER_PHASE),
            }
        })
        .collect();
    let mut on_path = vec![false; all.len()];
    let critical_path = path
        .map(|cp| {
            cp.segments
                .iter()
                .enumerate()
                .filter(|(_, s)| s.kind == SegmentKind::Cpu)
                .filter_map(|(i, seg)| {
                    let inside: Vec<&Named> = all
                        .iter()
                        .enumerate()
                        .filter(|(_, s)| s.tid == seg.tid && s.t_ns >= seg.start_ns && s.t_ns <= seg.end_ns)
                        .map(|(j, s)| {
                            on_path[j] = true;
                            *s
                        })
                        .collect();
                    let hottest = top_functions(&table, &inside, 1).into_iter().next()?;
                    Some(SegmentCpu { segment: i, samples: inside.len() as u64, hottest })
                })
                .collect()
        })
        .unwrap_or_default();
    let tree = match path {
        Some(_) => {
            let path_samples: Vec<&Named> =
                all.iter().zip(&on_path).filter(|(_, on)| **on).map(|(s, _)| *s).collect();
            self::tree(&table, &path_samples, TreeScope::CriticalPath)
        }
        None => self::tree(&table, &all, TreeScope::Start),
    };
    Some(CpuProfile {
        samples: all.len() as u64,
        sample_hz: trace.meta.stack_sample_hz.filter(|hz| hz.is_finite() && *hz > 0.0),
        functions: top_functions(&table, &all, TOP_FUNCTIONS),
        libraries: libraries(&table, &all),
        phases,
        critical_path,
        tree,
    })
}

/// The function most of thread `tid`'s stack samples from `start` to `end` were in, and how
/// many samples that interval has; `None` when it has none.
pub fn hottest_function(
    index: &StackIndex,
    trace: &Trace,
    tid: i32,
    start: Nanos,
    end: Nanos,
) -> Option<(CpuFunction, u64)> {
    let mut table = FrameTable::default();
    let named: Vec<Named> = trace
        .stack_samples
        .iter()
        .filter(|s| s.tid == tid && (start..=end).contains(&s.t_ns))
        .map(|s| Named { t_ns: s.t_ns, tid: s.tid, frames: table.stack(index, s.stack_id) })
        .collect();
    let all: Vec<&Named> = named.iter().collect();
    let hottest = top_functions(&table, &all, 1).into_iter().next()?;
    Some((hottest, all.len() as u64))
}
