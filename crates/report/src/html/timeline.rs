//! What the HTML timeline draws that the analysis does not keep: each process's
//! state over time (from the scheduler intervals, or from the process samples of
//! bootchart2 imports), and the system's CPU and disk graphs. Built from the
//! trace once, then embedded in the page in a compact form.
//!
//! A process's state at a moment is the most telling state of its threads:
//! running, else waiting for I/O, else waiting for a CPU, else stopped, else
//! asleep. States shorter than [`Timeline::resolution_ns`] are merged into a
//! span of the state that took most of that time, so the page stays small and
//! fast whatever the length of the trace.

use coldstart_trace::{Nanos, ThreadState, Trace};
use rustc_hash::FxHashMap;
use serde::Serialize;

/// The most spans embedded for all processes together (about 10 bytes each).
const SPAN_BUDGET: usize = 200_000;
/// The finest resolution kept.
const MIN_RESOLUTION_NS: Nanos = 1_000;
/// Bins of the CPU graph when it is derived from the scheduler intervals.
const CPU_BINS: i64 = 600;

/// A state of a timeline span, as embedded (`state` numbers in the page).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum SpanState {
    Running = 0,
    IoWait = 1,
    Runnable = 2,
    Stopped = 3,
    Sleeping = 4,
}

impl SpanState {
    fn of_thread(state: ThreadState) -> SpanState {
        match state {
            ThreadState::Running => SpanState::Running,
            ThreadState::IoWait => SpanState::IoWait,
            ThreadState::Runnable => SpanState::Runnable,
            ThreadState::Stopped => SpanState::Stopped,
            ThreadState::Sleeping => SpanState::Sleeping,
        }
    }

    /// The state letter of /proc/PID/stat; zombies and unknown letters draw nothing.
    fn of_letter(letter: char) -> Option<SpanState> {
        match letter {
            'R' => Some(SpanState::Running),
            'D' => Some(SpanState::IoWait),
            'S' | 'I' => Some(SpanState::Sleeping),
            'T' | 't' => Some(SpanState::Stopped),
            _ => None,
        }
    }

    const ALL: [SpanState; 5] =
        [SpanState::Running, SpanState::IoWait, SpanState::Runnable, SpanState::Stopped, SpanState::Sleeping];
}

/// One process's row of the timeline.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Row {
    pub pid: i32,
    /// Threads that have scheduler data.
    pub threads: u32,
    /// Spans as flat triples `gap_us, length_us, state`: the gap since the end of the
    /// previous span (from t = 0 for the first), in microseconds.
    pub spans: Vec<i64>,
}

/// System CPU use over time, as per mille of all CPUs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct CpuSeries {
    /// `samples` (the recorder's /proc/stat samples) or `sched` (the traced threads'
    /// running time, when the trace has no samples; then `system` is all zero and
    /// `iowait` is threads in I/O wait per CPU).
    pub from: &'static str,
    /// End of each interval and its length, in microseconds.
    pub t_us: Vec<i64>,
    pub dt_us: Vec<i64>,
    pub user: Vec<u32>,
    pub system: Vec<u32>,
    pub iowait: Vec<u32>,
}

/// One disk's read traffic over time, from the recorder's /proc/diskstats samples.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DiskSeries {
    pub dev: String,
    pub name: String,
    pub t_us: Vec<i64>,
    pub dt_us: Vec<i64>,
    pub read_bytes: Vec<u64>,
    pub read_ios: Vec<u64>,
    /// Fraction of the interval the disk was busy, per mille.
    pub busy: Vec<u32>,
}

/// The timeline data the analysis does not hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Timeline {
    /// `sched`, `samples` (process samples of an import) or `none`.
    pub states_from: &'static str,
    /// States shorter than this were merged into their neighbours.
    pub resolution_ns: Nanos,
    /// By pid.
    pub rows: Vec<Row>,
    pub cpu: Option<CpuSeries>,
    pub disks: Vec<DiskSeries>,
    /// The flame graph of the CPU stack samples, a `data:` URL of a script-free SVG.
    pub flamegraph: Option<String>,
}

/// A state from `start` to `end`, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: Nanos,
    end: Nanos,
    state: SpanState,
}

impl Timeline {
    /// Builds the timeline of `trace`.
    pub fn new(trace: &Trace) -> Timeline {
        let (states_from, full) = if !trace.sched.is_empty() {
            ("sched", sched_spans(trace))
        } else if !trace.process_samples.is_empty() {
            ("samples", sample_spans(trace))
        } else {
            ("none", Vec::new())
        };
        let total: usize = full.iter().map(|(_, _, spans)| spans.len()).sum();
        let mut resolution_ns = MIN_RESOLUTION_NS;
        let mut rows = decimate_all(&full, resolution_ns);
        while rows.iter().map(|r| r.spans.len() / 3).sum::<usize>() > SPAN_BUDGET && total > 0 {
            resolution_ns *= 2;
            rows = decimate_all(&full, resolution_ns);
        }
        Timeline {
            states_from,
            resolution_ns,
            rows,
            cpu: cpu_series(trace),
            disks: disk_series(trace),
            flamegraph: crate::flamegraph::static_data_url(trace, "CPU stack samples of the recording"),
        }
    }
}

fn decimate_all(full: &[(i32, u32, Vec<Span>)], resolution_ns: Nanos) -> Vec<Row> {
    full.iter()
        .map(|(pid, threads, spans)| Row {
            pid: *pid,
            threads: *threads,
            spans: encode(&decimate(spans, resolution_ns)),
        })
        .collect()
}

/// Each process's combined state from its threads' scheduler intervals.
fn sched_spans(trace: &Trace) -> Vec<(i32, u32, Vec<Span>)> {
    let pid_of: FxHashMap<i32, i32> = trace.threads.iter().map(|t| (t.tid, t.pid)).collect();
    // (time, thread state, +1 at the start / -1 at the end), per process
    let mut edges: FxHashMap<i32, Vec<(Nanos, SpanState, i32)>> = FxHashMap::default();
    let mut threads: FxHashMap<i32, rustc_hash::FxHashSet<i32>> = FxHashMap::default();
    for s in trace.sched.iter().filter(|s| s.end_ns > s.start_ns) {
        let pid = pid_of.get(&s.tid).copied().unwrap_or(s.tid);
        let state = SpanState::of_thread(s.state);
        let e = edges.entry(pid).or_default();
        e.push((s.start_ns, state, 1));
        e.push((s.end_ns, state, -1));
        threads.entry(pid).or_default().insert(s.tid);
    }
    let mut out: Vec<(i32, u32, Vec<Span>)> = edges
        .into_iter()
        .map(|(pid, mut e)| {
            e.sort_unstable_by_key(|&(t, _, delta)| (t, delta));
            let n = threads.get(&pid).map_or(0, |t| t.len() as u32);
            (pid, n, sweep(&e))
        })
        .collect();
    out.sort_unstable_by_key(|(pid, _, _)| *pid);
    out
}

/// Spans of the most telling state while any thread has a state.
fn sweep(edges: &[(Nanos, SpanState, i32)]) -> Vec<Span> {
    let mut counts = [0i32; 5];
    let mut spans: Vec<Span> = Vec::new();
    let mut i = 0;
    let mut current: Option<(Nanos, SpanState)> = None;
    while i < edges.len() {
        let t = edges[i].0;
        while i < edges.len() && edges[i].0 == t {
            counts[edges[i].1 as usize] += edges[i].2;
            i += 1;
        }
        let now = SpanState::ALL.into_iter().find(|s| counts[*s as usize] > 0);
        if current.map(|c| c.1) != now {
            if let Some((start, state)) = current {
                push_merged(&mut spans, Span { start, end: t, state });
            }
            current = now.map(|s| (t, s));
        }
    }
    spans
}

fn push_merged(spans: &mut Vec<Span>, span: Span) {
    match spans.last_mut() {
        Some(last) if last.end == span.start && last.state == span.state => last.end = span.end,
        _ => spans.push(span),
    }
}

/// Each process's state from its samples: the state letter holds over the sample's interval.
fn sample_spans(trace: &Trace) -> Vec<(i32, u32, Vec<Span>)> {
    let mut by_pid: FxHashMap<i32, Vec<Span>> = FxHashMap::default();
    for s in &trace.process_samples {
        if let Some(state) = SpanState::of_letter(s.state) {
            let start = s.t_ns - s.dt_ns.max(0);
            by_pid.entry(s.pid).or_default().push(Span { start, end: s.t_ns, state });
        }
    }
    let mut out: Vec<(i32, u32, Vec<Span>)> = by_pid
        .into_iter()
        .map(|(pid, mut samples)| {
            samples.sort_unstable_by_key(|s| (s.start, s.end));
            let mut spans = Vec::with_capacity(samples.len());
            let mut end = Nanos::MIN;
            for mut s in samples {
                s.start = s.start.max(end);
                if s.end > s.start {
                    end = s.end;
                    push_merged(&mut spans, s);
                }
            }
            (pid, 1, spans)
        })
        .collect();
    out.sort_unstable_by_key(|(pid, _, _)| *pid);
    out
}

/// Merges runs of spans shorter than `resolution` into one span of the state that
/// took most of their time (ties to the more telling state).
fn decimate(spans: &[Span], resolution: Nanos) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    let mut pending: Option<(Nanos, Nanos, [Nanos; 5])> = None;
    let flush = |out: &mut Vec<Span>, pending: &mut Option<(Nanos, Nanos, [Nanos; 5])>| {
        if let Some((start, end, time)) = pending.take() {
            let state = SpanState::ALL
                .into_iter()
                .max_by_key(|s| (time[*s as usize], std::cmp::Reverse(*s as u8)))
                .unwrap_or(SpanState::Sleeping);
            push_merged(out, Span { start, end, state });
        }
    };
    for s in spans {
        if let Some((_, end, _)) = pending
            && s.start > end
        {
            flush(&mut out, &mut pending);
        }
        if s.end - s.start >= resolution {
            flush(&mut out, &mut pending);
            push_merged(&mut out, *s);
            continue;
        }
        let p = pending.get_or_insert((s.start, s.start, [0; 5]));
        p.1 = s.end;
        p.2[s.state as usize] = p.2[s.state as usize].saturating_add(s.end - s.start);
        if p.1 - p.0 >= resolution {
            flush(&mut out, &mut pending);
        }
    }
    flush(&mut out, &mut pending);
    out
}

fn micros(ns: Nanos) -> i64 {
    ns.div_euclid(1000)
}

fn encode(spans: &[Span]) -> Vec<i64> {
    let mut flat = Vec::with_capacity(spans.len() * 3);
    let mut previous_end = 0;
    for s in spans {
        let (start, end) = (micros(s.start), micros(s.end).max(micros(s.start) + 1));
        flat.extend([start - previous_end, end - start, s.state as i64]);
        previous_end = end;
    }
    flat
}

fn permille(fraction: f64) -> u32 {
    (fraction.clamp(0.0, 1.0) * 1000.0).round() as u32
}

fn cpu_series(trace: &Trace) -> Option<CpuSeries> {
    if !trace.cpu_samples.is_empty() {
        let mut samples: Vec<_> = trace.cpu_samples.iter().collect();
        samples.sort_by_key(|s| s.t_ns);
        return Some(CpuSeries {
            from: "samples",
            t_us: samples.iter().map(|s| micros(s.t_ns)).collect(),
            dt_us: samples.iter().map(|s| micros(s.dt_ns)).collect(),
            user: samples.iter().map(|s| permille(s.user)).collect(),
            system: samples.iter().map(|s| permille(s.system)).collect(),
            iowait: samples.iter().map(|s| permille(s.iowait)).collect(),
        });
    }
    if trace.sched.is_empty() {
        return None;
    }
    let start = trace.sched.iter().map(|s| s.start_ns).min().unwrap_or(0).min(0);
    let end = trace.sched.iter().map(|s| s.end_ns).max().unwrap_or(0).max(trace.meta.duration_ns);
    let bin = ((end - start) / CPU_BINS).max(1);
    let bins = ((end - start + bin - 1) / bin).max(1) as usize;
    let mut running = vec![0i64; bins];
    let mut io_wait = vec![0i64; bins];
    for s in trace.sched.iter().filter(|s| s.end_ns > s.start_ns) {
        let target = match s.state {
            ThreadState::Running => &mut running,
            ThreadState::IoWait => &mut io_wait,
            _ => continue,
        };
        let mut t = s.start_ns;
        while t < s.end_ns {
            let b = ((t - start) / bin) as usize;
            let bin_end = start + (b as i64 + 1) * bin;
            let until = bin_end.min(s.end_ns);
            if let Some(slot) = target.get_mut(b) {
                *slot = slot.saturating_add(until - t);
            }
            t = until;
        }
    }
    let cpus = f64::from(trace.meta.cpu_count.max(1));
    let share = |ns: i64| permille(ns as f64 / (bin as f64 * cpus));
    Some(CpuSeries {
        from: "sched",
        t_us: (0..bins).map(|b| micros(start + (b as i64 + 1) * bin)).collect(),
        dt_us: vec![micros(bin); bins],
        user: running.iter().map(|&ns| share(ns)).collect(),
        system: vec![0; bins],
        iowait: io_wait.iter().map(|&ns| share(ns)).collect(),
    })
}

fn disk_series(trace: &Trace) -> Vec<DiskSeries> {
    let mut by_dev: FxHashMap<_, Vec<_>> = FxHashMap::default();
    for s in &trace.disk_samples {
        by_dev.entry(s.dev).or_default().push(s);
    }
    let mut devs: Vec<_> = by_dev.into_iter().collect();
    devs.sort_by_key(|(dev, _)| *dev);
    devs.into_iter()
        .map(|(dev, mut samples)| {
            samples.sort_by_key(|s| s.t_ns);
            let name =
                trace.disks.iter().find(|d| d.dev == dev).map_or_else(|| dev.to_string(), |d| d.name.clone());
            DiskSeries {
                dev: dev.to_string(),
                name,
                t_us: samples.iter().map(|s| micros(s.t_ns)).collect(),
                dt_us: samples.iter().map(|s| micros(s.dt_ns)).collect(),
                read_bytes: samples.iter().map(|s| s.read_bytes).collect(),
                read_ios: samples.iter().map(|s| s.read_ios).collect(),
                busy: samples.iter().map(|s| permille(s.busy)).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(start: Nanos, end: Nanos, state: SpanState) -> Span {
        Span { start, end, state }
    }

    #[test]
    fn the_most_telling_thread_state_wins() {
        use SpanState::*;
        // thread A runs 0..10, thread B waits for I/O 5..20, then sleeps 20..30
        let edges = {
            let mut e = vec![(0, Running, 1), (10, Running, -1), (5, IoWait, 1), (20, IoWait, -1)];
            e.extend([(20, Sleeping, 1), (30, Sleeping, -1)]);
            e.sort_unstable_by_key(|&(t, _, d)| (t, d));
            e
        };
        assert_eq!(sweep(&edges), vec![span(0, 10, Running), span(10, 20, IoWait), span(20, 30, Sleeping)]);
    }

    #[test]
    fn short_spans_merge_into_the_state_that_took_most_of_their_time() {
        use SpanState::*;
        let spans = [
            span(0, 100, Sleeping),
            span(100, 103, Running),
            span(103, 104, IoWait),
            span(104, 110, Running),
            span(110, 200, Sleeping),
        ];
        assert_eq!(
            decimate(&spans, 10),
            vec![span(0, 100, Sleeping), span(100, 110, Running), span(110, 200, Sleeping)]
        );
        assert_eq!(decimate(&spans, 1), spans.to_vec());
    }

    #[test]
    fn spans_are_encoded_as_gaps_lengths_and_states_in_microseconds() {
        use SpanState::*;
        let spans = [span(2_000, 5_000, Running), span(9_000, 9_400, IoWait)];
        assert_eq!(encode(&spans), vec![2, 3, 0, 4, 1, 1]);
    }
}
