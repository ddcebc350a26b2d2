//! Rates from the spooled cumulative counters: each sample becomes the interval
//! since the previous one.

use std::collections::{HashMap, HashSet};

use coldstart_trace::{CpuSample, Dev, DiskSample, Nanos, ProcessSample};

use crate::capture::sampler::{ProcCounters, SampleRecord};

pub struct Rates {
    pub cpu: Vec<CpuSample>,
    pub disks: Vec<DiskSample>,
    pub procs: Vec<ProcessSample>,
}

/// `started_after_t0`: processes that began during the recording (their first
/// sample counts from zero); others are only shown from their second sample.
/// `hz`: the clock ticks per second of the samples' CPU times.
pub fn rates(
    samples: &[SampleRecord],
    to_trace: impl Fn(i64) -> Nanos,
    disks: &HashSet<Dev>,
    started_after_t0: &HashSet<i32>,
    page_size: u64,
    hz: f64,
) -> Rates {
    let mut out = Rates { cpu: Vec::new(), disks: Vec::new(), procs: Vec::new() };
    let mut prev_procs: HashMap<i32, ProcCounters> = HashMap::new();
    for pair in samples.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let dt = b.t - a.t;
        if dt <= 0 {
            continue;
        }
        let t = to_trace(b.t);
        let (ca, cb) = (&a.cpu, &b.cpu);
        let d = |x: u64, y: u64| y.saturating_sub(x) as f64;
        let user = d(ca.user, cb.user);
        let system = d(ca.system, cb.system);
        let iowait = d(ca.iowait, cb.iowait);
        let idle = d(ca.idle, cb.idle);
        let total = (user + system + iowait + idle).max(1.0);
        out.cpu.push(CpuSample {
            t_ns: t,
            dt_ns: dt,
            user: user / total,
            system: system / total,
            iowait: iowait / total,
            idle: idle / total,
            running: cb.running,
            blocked: cb.blocked,
        });
        for db in &b.disks {
            let dev = Dev::new(db.major, db.minor);
            if !disks.contains(&dev) {
                continue;
            }
            let Some(da) = a.disks.iter().find(|x| x.major == db.major && x.minor == db.minor) else {
                continue;
            };
            out.disks.push(DiskSample {
                t_ns: t,
                dt_ns: dt,
                dev,
                read_bytes: db.read_sectors.saturating_sub(da.read_sectors) * 512,
                read_ios: db.read_ios.saturating_sub(da.read_ios),
                write_bytes: db.write_sectors.saturating_sub(da.write_sectors) * 512,
                write_ios: db.write_ios.saturating_sub(da.write_ios),
                busy: (db.io_ticks_ms.saturating_sub(da.io_ticks_ms) as f64 * 1e6 / dt as f64).min(1.0),
            });
        }
        let secs = dt as f64 / 1e9;
        for p in &b.procs {
            let before = match prev_procs.get(&p.pid) {
                Some(x) => x.clone(),
                None if started_after_t0.contains(&p.pid) => {
                    ProcCounters { pid: p.pid, ..Default::default() }
                }
                None => continue,
            };
            out.procs.push(ProcessSample {
                t_ns: t,
                dt_ns: dt,
                pid: p.pid,
                state: p.state,
                cpu_user: p.utime.saturating_sub(before.utime) as f64 / hz / secs,
                cpu_system: p.stime.saturating_sub(before.stime) as f64 / hz / secs,
                major_faults: p.majflt.saturating_sub(before.majflt),
                rss_bytes: Some(p.rss_pages * page_size),
            });
        }
        prev_procs = b.procs.iter().map(|p| (p.pid, p.clone())).collect();
    }
    out
}
