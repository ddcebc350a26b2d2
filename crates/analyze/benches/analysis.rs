//! Analysis throughput on synthetic traces held in memory (reading the trace file is
//! not included; bench/analysis.sh times that separately).

use coldstart_analyze::{analyze, synthetic::start_trace};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

fn events(trace: &coldstart_trace::Trace) -> u64 {
    (trace.page_fills.len() + trace.sched.len() + trace.wakeups.len() + trace.block_ios.len()) as u64
}

fn analysis(c: &mut Criterion) {
    let mut group = c.benchmark_group("analyze");
    for size in [1_000_000, 5_000_000] {
        let trace = start_trace(size, 1);
        group.throughput(Throughput::Elements(events(&trace)));
        group.sample_size(10);
        group.bench_function(format!("{}M events", size / 1_000_000), |b| b.iter(|| analyze(&trace)));
    }
    group.finish();
}

criterion_group!(benches, analysis);
criterion_main!(benches);
