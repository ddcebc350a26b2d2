//! Traces for the snapshot tests of what the commands print: the committed real
//! traces of tests/fixtures, and one of them with another process made to read from
//! the disk and use the CPUs during the start (a busy machine).

use std::io::Read;
use std::path::Path;

use coldstart_trace::{BlockIo, BlockOp, CpuSample, Nanos, Process, Trace};

/// A real trace of tests/fixtures (`python` or `soffice`).
pub fn fixture(name: &str) -> Trace {
    let gz = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.coldstart.gz"));
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).expect("the fixture"))
        .read_to_end(&mut bytes)
        .expect("a gzip file");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join(format!("{name}.coldstart"));
    std::fs::write(&path, bytes).expect("unpacked");
    Trace::read(&path).expect("the fixture reads as a trace")
}

/// The pid and name of the process the busy trace adds.
pub const OTHER_PID: i32 = 4242;
pub const OTHER_COMM: &str = "tracker-miner-f";

/// `trace` with a process outside the recording reading 64 MiB from the first disk
/// (in 1 MiB requests spread over the start) and the machine's CPUs 60 % busy.
pub fn busy(mut trace: Trace) -> Trace {
    let analysis = coldstart_analyze::analyze(&trace);
    let (origin, end) = (analysis.overview.origin_ns, analysis.overview.end_ns);
    let dev = trace.disks[0].dev;
    trace.processes.push(Process {
        pid: OTHER_PID,
        comm: OTHER_COMM.to_owned(),
        in_scope: false,
        ..Process::default()
    });
    const REQUESTS: i64 = 64;
    const MIB: u32 = 1 << 20;
    let step = (end - origin) / REQUESTS;
    for i in 0..REQUESTS {
        let issue = origin + i * step;
        trace.block_ios.push(BlockIo {
            issue_ns: Some(issue),
            complete_ns: Some(issue + step / 2),
            dev,
            sector: Some(400_000_000 + 2048 * i as u64),
            bytes: MIB,
            op: BlockOp::Read,
            rwbs: "R".to_owned(),
            pid: OTHER_PID,
            comm: OTHER_COMM.to_owned(),
            file_id: None,
            error: 0,
        });
    }
    if let Some(read) = trace.disks[0].read_bytes.as_mut() {
        *read += REQUESTS as u64 * u64::from(MIB);
    }
    const SAMPLE: Nanos = 20_000_000;
    trace.cpu_samples = (1..=(trace.meta.duration_ns / SAMPLE))
        .map(|i| CpuSample {
            t_ns: i * SAMPLE,
            dt_ns: SAMPLE,
            user: 0.5,
            system: 0.1,
            iowait: 0.1,
            idle: 0.3,
            running: 2,
            blocked: 1,
        })
        .collect();
    trace
}
