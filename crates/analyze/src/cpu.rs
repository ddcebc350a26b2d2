//! Where the CPU went during the start: the trace's stack samples (from the command's
//! start to ready) summed by function and by library, per phase, and within each CPU
//! segment of the critical path, named by its hottest function.

use std::collections::{HashMap, HashSet};

use coldstart_trace::{Nanos, StackIndex, Trace};
use serde::{Deserialize, Serialize};

use crate::analysis::{CriticalPath, Phase, SegmentKind};

/// Functions listed in the profile, and per phase.
const TOP_FUNCTIONS: usize = 15;
const TOP_PER_PHASE: usize = 3;
const TOP_LIBRARIES: usize = 10;

/// The stack samples of the start, summed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CpuProfile {
    /// Samples between the command's start and ready (each about 1 ms of one CPU at 1 kHz).
    pub samples: u64,
    /// The sampling rate, per second and CPU, when the trace says (each sample stands for 1/rate s of CPU).
    pub sample_hz: Option<f64>,
    /// Most samples first: `self_samples` where it was the innermost frame, `samples` anywhere on the stack.
    pub functions: Vec<CpuFunction>,
    /// Files (executables, libraries, `[kernel]`) by samples whose innermost frame lies in them.
    pub libraries: Vec<CpuLibrary>,
    /// One entry per phase of the analysis, in order.
    pub phases: Vec<PhaseCpu>,
    /// One entry per CPU segment of the critical path with samples, in order.
    pub critical_path: Vec<SegmentCpu>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuFunction {
    pub name: String,
    pub library: String,
    pub self_samples: u64,
    pub samples: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuLibrary {
    pub name: String,
    pub self_samples: u64,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseCpu {
    /// Index into the analysis' phases.
    pub phase: usize,
    pub samples: u64,
    pub functions: Vec<CpuFunction>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentCpu {
    /// Index into the critical path's segments.
    pub segment: usize,
    pub samples: u64,
    /// The function most samples of the segment's thread were in.
    pub hottest: CpuFunction,
}

/// One sample reduced to what the sums need: its thread, time and frames' names.
struct Named {
    t_ns: Nanos,
    tid: i32,
    /// `(function, library)`, innermost first.
    frames: Vec<(String, String)>,
}

fn top_functions(samples: &[&Named], limit: usize) -> Vec<CpuFunction> {
    let mut by_function: HashMap<(&str, &str), (u64, u64)> = HashMap::new();
    for s in samples {
        let mut seen = HashSet::new();
        for (i, (name, library)) in s.frames.iter().enumerate() {
            let key = (name.as_str(), library.as_str());
            let entry = by_function.entry(key).or_default();
            if i == 0 {
                entry.0 += 1;
            }
            if seen.insert(key) {
                entry.1 += 1;
            }
        }
    }
    let mut rows: Vec<CpuFunction> = by_function
        .into_iter()
        .filter(|(_, (self_samples, _))| *self_samples > 0)
        .map(|((name, library), (self_samples, samples))| CpuFunction {
            name: name.to_owned(),
            library: library.to_owned(),
            self_samples,
            samples,
        })
        .collect();
    rows.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then(a.name.cmp(&b.name)));
    rows.truncate(limit);
    rows
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
    let mut names: HashMap<u32, (String, String)> = HashMap::new();
    let named: Vec<Named> = trace
        .stack_samples
        .iter()
        .filter(|s| (origin..=end).contains(&s.t_ns))
        .map(|s| Named {
            t_ns: s.t_ns,
            tid: s.tid,
            frames: index
                .frames(s.stack_id)
                .into_iter()
                .map(|f| names.entry(f.id).or_insert_with(|| (index.name(f), index.library(f))).clone())
                .collect(),
        })
        .collect();
    let all: Vec<&Named> = named.iter().collect();
    let mut by_library: HashMap<&str, u64> = HashMap::new();
    for s in &all {
        if let Some((_, library)) = s.frames.first() {
            *by_library.entry(library).or_default() += 1;
        }
    }
    let mut libraries: Vec<CpuLibrary> = by_library
        .into_iter()
        .map(|(name, self_samples)| CpuLibrary { name: name.to_owned(), self_samples })
        .collect();
    libraries.sort_by(|a, b| b.self_samples.cmp(&a.self_samples).then(a.name.cmp(&b.name)));
    libraries.truncate(TOP_LIBRARIES);
    let phases = phases
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let inside: Vec<&Named> =
                all.iter().copied().filter(|s| s.t_ns >= p.start_ns && s.t_ns < p.end_ns).collect();
            PhaseCpu {
                phase: i,
                samples: inside.len() as u64,
                functions: top_functions(&inside, TOP_PER_PHASE),
            }
        })
        .collect();
    let critical_path = path
        .map(|cp| {
            cp.segments
                .iter()
                .enumerate()
                .filter(|(_, s)| s.kind == SegmentKind::Cpu)
                .filter_map(|(i, seg)| {
                    let inside: Vec<&Named> = all
                        .iter()
                        .copied()
                        .filter(|s| s.tid == seg.tid && s.t_ns >= seg.start_ns && s.t_ns <= seg.end_ns)
                        .collect();
                    let hottest = top_functions(&inside, 1).into_iter().next()?;
                    Some(SegmentCpu { segment: i, samples: inside.len() as u64, hottest })
                })
                .collect()
        })
        .unwrap_or_default();
    Some(CpuProfile {
        samples: all.len() as u64,
        sample_hz: trace.meta.stack_sample_hz.filter(|hz| hz.is_finite() && *hz > 0.0),
        functions: top_functions(&all, TOP_FUNCTIONS),
        libraries,
        phases,
        critical_path,
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
    let named: Vec<Named> = trace
        .stack_samples
        .iter()
        .filter(|s| s.tid == tid && (start..=end).contains(&s.t_ns))
        .map(|s| Named {
            t_ns: s.t_ns,
            tid: s.tid,
            frames: index.frames(s.stack_id).into_iter().map(|f| (index.name(f), index.library(f))).collect(),
        })
        .collect();
    let all: Vec<&Named> = named.iter().collect();
    let hottest = top_functions(&all, 1).into_iter().next()?;
    Some((hottest, all.len() as u64))
}
