//! Times (and, under `/usr/bin/time -v`, sizes) the analysis of large synthetic traces,
//! for bench/analysis.sh:
//!
//! ```text
//! analysis_bench generate EVENTS FILE   # write a synthetic trace file
//! analysis_bench file FILE              # read it, then analyse it; print both times
//! analysis_bench memory EVENTS          # build a trace in memory and analyse it
//! analysis_bench hold EVENTS            # only build it (the memory the trace itself takes)
//! ```

use std::path::Path;
use std::time::Instant;

use coldstart_analyze::synthetic::start_trace;
use coldstart_trace::Trace;

fn events(trace: &Trace) -> usize {
    trace.page_fills.len() + trace.sched.len() + trace.wakeups.len() + trace.block_ios.len()
}

fn analyse(trace: &Trace) {
    let started = Instant::now();
    let analysis = coldstart_analyze::analyze(trace);
    let secs = started.elapsed().as_secs_f64();
    let n = events(trace);
    println!(
        "analysed {n} events in {secs:.3} s ({:.2} M events/s): {} reads, {} phases, {} warnings",
        n as f64 / secs / 1e6,
        analysis.reads.len(),
        analysis.phases.len(),
        analysis.warnings.len()
    );
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        ["generate", n, file] => {
            let trace = start_trace(n.parse()?, 1);
            trace.write(Path::new(file))?;
            println!("wrote {} events to {file}", events(&trace));
        }
        ["file", file] => {
            let started = Instant::now();
            let trace = Trace::read(Path::new(file))?;
            println!("read {} events in {:.3} s", events(&trace), started.elapsed().as_secs_f64());
            analyse(&trace);
        }
        ["hold", n] => {
            let trace = start_trace(n.parse()?, 1);
            println!(
                "built {} events: {} page fills, {} scheduler intervals, {} wakeups, {} block requests",
                events(&trace),
                trace.page_fills.len(),
                trace.sched.len(),
                trace.wakeups.len(),
                trace.block_ios.len()
            );
        }
        ["memory", n] => {
            let trace = start_trace(n.parse()?, 1);
            println!("built {} events", events(&trace));
            analyse(&trace);
        }
        _ => {
            return Err(
                "usage: analysis_bench generate EVENTS FILE | file FILE | memory EVENTS | hold EVENTS".into(),
            );
        }
    }
    Ok(())
}
