//! Read then parse: a thread on the critical path reads a file entirely (read(), not
//! a mapping), then runs on the CPU before it reads anything else. Parsing while
//! reading (streaming, or reading in a thread) overlaps the two: the gain is at
//! most the shorter of the read's wait and the CPU work. Where the trace has CPU stack
//! samples, the function most of that CPU work was in (the parser) is named.

use coldstart_trace::{AccessKind, Nanos, PageOrigin, StackIndex};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::analysis::{CriticalPath, PathSegment, SegmentKind};
use crate::cpu::hottest_function;
use crate::doctor::facts::Facts;
use crate::doctor::files::is_shared_object;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{base_name, bytes, count, duration, percent};

struct Case {
    file: u32,
    pid: i32,
    tid: i32,
    read_end: Nanos,
    window_end: Nanos,
    wait: Nanos,
    cpu: Nanos,
    /// The function most of the thread's samples after the read were in, and their share.
    parser: Option<(String, f64)>,
}

pub(crate) fn read_then_parse(f: &Facts) -> Vec<Finding> {
    let Some(cp) = f.path else { return Vec::new() };
    let mut cases = whole_reads_then_cpu(f, cp);
    let gain: Nanos = cases.iter().map(|c| c.wait.min(c.cpu)).fold(0, Nanos::saturating_add);
    if gain < f.min_gain || cases.is_empty() {
        return Vec::new();
    }
    if !f.trace.stack_samples.is_empty() {
        name_parsers(f, &mut cases);
    }
    cases.sort_by(|a, b| b.wait.min(b.cpu).cmp(&a.wait.min(a.cpu)).then(a.read_end.cmp(&b.read_end)));
    vec![finding(f, &cases, gain)]
}

/// Per thread, its page fills in time order: (time, file, pages).
type FillsByThread = FxHashMap<i32, Vec<(Nanos, u32, u64)>>;

/// Page fills of the threads on the path, and the files mapped (faulted) by each process.
fn path_fills_and_mappings(f: &Facts, cp: &CriticalPath) -> (FillsByThread, FxHashSet<(i32, u32)>) {
    let tids: FxHashSet<i32> = cp.segments.iter().map(|s| s.tid).collect();
    let mut fills = FillsByThread::default();
    let mut mapped: FxHashSet<(i32, u32)> = FxHashSet::default();
    for fill in &f.trace.page_fills {
        if fill.origin == Some(PageOrigin::Fault) {
            mapped.insert((fill.pid, fill.file_id));
        }
        if tids.contains(&fill.tid) {
            fills.entry(fill.tid).or_default().push((fill.t_ns, fill.file_id, u64::from(fill.pages)));
        }
    }
    for a in f.trace.page_accesses.iter().filter(|a| a.kind != AccessKind::Read) {
        mapped.insert((a.pid, a.file_id));
    }
    fills.values_mut().for_each(|v| v.sort_by_key(|x| x.0));
    (fills, mapped)
}

/// Each run of fills of one file by a thread on the path that read (most of) a regular
/// file through read() and was followed by enough CPU work of that thread.
fn whole_reads_then_cpu(f: &Facts, cp: &CriticalPath) -> Vec<Case> {
    let config = f.config;
    let (fills, mapped) = path_fills_and_mappings(f, cp);
    let mut cases = Vec::new();
    for (&tid, list) in &fills {
        let mut i = 0;
        while i < list.len() {
            let file = list[i].1;
            let mut j = i;
            let mut pages = 0;
            while j < list.len() && list[j].1 == file {
                pages += list[j].2;
                j += 1;
            }
            let read_end = list[j - 1].0;
            let window_end = list.get(j).map_or(f.ready, |x| x.0).min(f.ready);
            i = j;
            let pid = f.a.threads.iter().find(|t| t.tid == tid).map_or(tid, |t| t.pid);
            if !is_whole_read(f, file, pages, mapped.contains(&(pid, file))) {
                continue;
            }
            let (cpu, wait) = cpu_after_and_wait(cp, tid, file, read_end, window_end);
            if cpu >= config.parse_min_cpu_ns && wait > 0 {
                cases.push(Case { file, pid, tid, read_end, window_end, wait, cpu, parser: None });
            }
        }
    }
    cases
}

/// Whether `pages` read of `file` are a whole read of a regular file that is large enough,
/// neither mapped by the process nor a shared object.
fn is_whole_read(f: &Facts, file: u32, pages: u64, mapped: bool) -> bool {
    let config = f.config;
    let Some(size) = f.size_of(file) else { return false };
    let whole_pages = size.div_ceil(f.page_size).max(1);
    !(size < config.parse_min_file_bytes
        || (pages as f64) < config.parse_min_read_share * whole_pages as f64
        || !f.is_regular(file)
        || mapped
        || f.path_of(file).is_some_and(is_shared_object))
}

/// The thread's CPU time on the path between the read's end and `window_end`, and its
/// I/O wait on `file` on the path before `window_end`.
fn cpu_after_and_wait(
    cp: &CriticalPath,
    tid: i32,
    file: u32,
    read_end: Nanos,
    window_end: Nanos,
) -> (Nanos, Nanos) {
    let in_window = |s: &&PathSegment| s.tid == tid && s.end_ns > read_end && s.start_ns < window_end;
    let cpu: Nanos = cp
        .segments
        .iter()
        .filter(in_window)
        .filter(|s| s.kind == SegmentKind::Cpu)
        .map(|s| s.end_ns.min(window_end) - s.start_ns.max(read_end))
        .fold(0, Nanos::saturating_add);
    let wait: Nanos = cp
        .segments
        .iter()
        .filter(|s| s.tid == tid && s.kind == SegmentKind::IoWait && s.end_ns <= window_end)
        .flat_map(|s| s.files.iter().filter(|ft| ft.file == file).map(|ft| ft.ns))
        .fold(0, Nanos::saturating_add);
    (cpu, wait)
}

/// Names the function most of each case's CPU samples after the read were in.
fn name_parsers(f: &Facts, cases: &mut [Case]) {
    let index = StackIndex::new(f.trace);
    for c in cases {
        c.parser =
            hottest_function(&index, f.trace, c.tid, c.read_end, c.window_end).map(|(hot, samples)| {
                (format!("{} ({})", hot.name, hot.library), hot.self_samples as f64 / samples.max(1) as f64)
            });
    }
}

fn finding(f: &Facts, cases: &[Case], gain: Nanos) -> Finding {
    let wait: Nanos = cases.iter().map(|c| c.wait).fold(0, Nanos::saturating_add);
    let cpu: Nanos = cases.iter().map(|c| c.cpu).fold(0, Nanos::saturating_add);
    let n = cases.len() as u64;
    let first = &cases[0];
    let title = if n == 1 {
        format!(
            "{} read whole, then {} of CPU by the same thread",
            base_name(f.name(first.file)),
            duration(first.cpu)
        )
    } else {
        format!("{} files read whole, then parsed by the same thread", count(n))
    };
    Finding {
        kind: FindingKind::ReadThenParse,
        title,
        evidence: evidence(f, cases, wait, cpu),
        gain: Gain {
            ns: gain,
            formula: "sum over files of min(read_wait_ns, cpu_after_ns)".to_owned(),
            text: format!(
                "for each file the shorter of its read's wait and the CPU after it, summed: {} (of {} waiting and {} \
                 running)",
                duration(gain),
                duration(wait),
                duration(cpu)
            ),
            inputs: vec![Figure::ns("read_wait_ns", wait), Figure::ns("cpu_after_ns", cpu), Figure::ns("overlap_ns", gain)],
            ahead_ns: Some(wait),
        },
        audience: Audience::Developers,
        suggestion: format!(
            "Parse while reading: read the file in chunks and parse each as it arrives (a streaming parser{}), or \
             read it in another thread while this one works; also check whether all of it must be parsed at the \
             start.",
            match &first.parser {
                Some((name, share)) => {
                    format!("; the CPU samples put {} of the work after the first read in {name}", percent(*share, 1.0))
                }
                None => String::new(),
            }
        ),
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Low,
        caveat: Some(
            "the trace shows CPU work after the read, not that the work is on this file's data: the gain is an upper \
             bound"
                .to_owned(),
        ),
    }
}

fn evidence(f: &Facts, cases: &[Case], wait: Nanos, cpu: Nanos) -> Evidence {
    let n = cases.len() as u64;
    let first = &cases[0];
    let mut files: Vec<u32> = cases.iter().map(|c| c.file).collect();
    files.dedup();
    let mut pids: Vec<i32> = cases.iter().map(|c| c.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    Evidence {
        summary: format!(
            "{} read entirely by a thread on the critical path ({} of I/O wait there), each followed by CPU work \
             of that thread before it read another file ({} in all)",
            if n == 1 {
                format!("{} ({})", f.name(first.file), bytes(f.size_of(first.file).unwrap_or(0)))
            } else {
                format!("{} files", count(n))
            },
            duration(wait),
            duration(cpu)
        ),
        files: f.evidence_files(&files),
        files_total: files.len() as u64,
        processes: pids
            .iter()
            .map(|&pid| EvidenceProcess {
                pid,
                comm: f.a.comm(pid).to_owned(),
                ns: cases.iter().filter(|c| c.pid == pid).map(|c| c.cpu).fold(0, Nanos::saturating_add),
                read_bytes: 0,
                in_scope: true,
            })
            .collect(),
        figures: vec![
            Figure::count("files", n),
            Figure::ns("read_wait_ns", wait),
            Figure::ns("cpu_after_ns", cpu),
        ],
        intervals: cases
            .iter()
            .take(f.config.max_listed)
            .map(|c| EvidenceInterval {
                start_ns: c.read_end,
                end_ns: c.window_end,
                tid: Some(c.tid),
                what: format!(
                    "{} read ({} waited), then {} of CPU{}",
                    base_name(f.name(c.file)),
                    duration(c.wait),
                    duration(c.cpu),
                    c.parser.as_ref().map_or(String::new(), |(name, share)| format!(
                        ", {} of its samples in {name}",
                        percent(*share, 1.0)
                    ))
                ),
            })
            .collect(),
    }
}
