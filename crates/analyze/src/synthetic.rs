//! Synthetic traces of any size for benchmarks: threads of several processes that
//! run, read pages of files (mostly sequentially, sometimes seeking), wait for the
//! block requests, sleep and wake each other. Deterministic for a given seed.

use coldstart_trace::*;

/// A small, fast, deterministic random number generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

struct ThreadState_ {
    tid: i32,
    pid: i32,
    t: Nanos,
    file: u32,
    next_page: u64,
}

/// A trace of about `events` events (page fills, scheduler intervals, wakeups and
/// block requests together), with `events / 250` files in 200 directories and
/// 50 processes of 4 threads; the root process exits last, which is the readiness point.
pub fn start_trace(events: usize, seed: u64) -> Trace {
    let mut rng = Rng(seed);
    let disk = Dev::new(254, 0);
    let file_count = (events / 250).max(8) as u32;
    let mut trace = Trace {
        meta: Meta {
            tool: "coldstart synthetic".into(),
            source: Source::Synthetic,
            command: vec!["synthetic".into()],
            root_pid: Some(1000),
            host: "synthetic".into(),
            page_size: 4096,
            clock: "mono".into(),
            cache: CacheState::Cold,
            ..Meta::default()
        },
        ..Trace::default()
    };
    add_files(&mut trace, &mut rng, disk, file_count);
    let mut threads = add_processes(&mut trace, &mut rng, file_count);
    let mut now: Nanos = 0;
    let total = |t: &Trace| t.page_fills.len() + t.sched.len() + t.wakeups.len() + t.block_ios.len();
    while total(&trace) < events {
        let waker = threads[rng.below(threads.len() as u64) as usize].tid;
        let which = rng.below(threads.len() as u64) as usize;
        let th = &mut threads[which];
        if th.t < now {
            wake(&mut trace, &mut rng, th, now, waker);
        }
        run_and_read(&mut trace, &mut rng, th, file_count, disk);
        now += 2_000 + rng.below(30_000) as Nanos;
    }
    finish(&mut trace, &threads, now, disk);
    trace
}

/// `file_count` files, each one extent, laid out on the disk in order with small gaps.
fn add_files(trace: &mut Trace, rng: &mut Rng, disk: Dev, file_count: u32) {
    let mut physical = 1u64 << 30;
    for id in 1..=file_count {
        let size = 4096 * (4 + rng.below(1024));
        trace.files.push(File {
            id,
            dev: disk,
            ino: u64::from(id) + 100,
            path: Some(format!("/usr/lib/dir{}/file{id}.so", id % 200)),
            kind: FileKind::Regular,
            size: Some(size),
            mtime_ns: None,
        });
        trace.extents.push(Extent { file_id: id, disk, logical: 0, physical, length: size, flags: 0 });
        physical += size + 4096 * rng.below(64);
    }
}

/// 50 processes of 4 threads, each thread starting on a random file.
fn add_processes(trace: &mut Trace, rng: &mut Rng, file_count: u32) -> Vec<ThreadState_> {
    let mut threads: Vec<ThreadState_> = Vec::new();
    for p in 0..50 {
        let pid = 1000 + p * 10;
        trace.processes.push(Process {
            pid,
            ppid: Some(if p == 0 { 1 } else { 1000 }),
            comm: format!("proc{p}"),
            start_ns: Some(0),
            in_scope: true,
            ..Process::default()
        });
        for k in 0..4 {
            let tid = pid + k;
            trace.threads.push(Thread {
                tid,
                pid,
                comm: format!("proc{p}"),
                start_ns: Some(0),
                end_ns: None,
            });
            threads.push(ThreadState_ {
                tid,
                pid,
                t: 0,
                file: 1 + rng.below(u64::from(file_count)) as u32,
                next_page: 0,
            });
        }
    }
    threads
}

/// A thread that slept until `now` is woken (often by `waker`) and waits for a CPU.
fn wake(trace: &mut Trace, rng: &mut Rng, th: &mut ThreadState_, now: Nanos, waker: i32) {
    trace.sched.push(SchedInterval {
        tid: th.tid,
        start_ns: th.t,
        end_ns: now,
        state: ThreadState::Sleeping,
    });
    let waker_tid = if waker != th.tid && rng.chance(60) { Some(waker) } else { None };
    trace.wakeups.push(Wakeup { t_ns: now, tid: th.tid, waker_tid });
    let runnable = 1_000 + rng.below(20_000) as Nanos;
    trace.sched.push(SchedInterval {
        tid: th.tid,
        start_ns: now,
        end_ns: now + runnable,
        state: ThreadState::Runnable,
    });
    th.t = now + runnable;
}

/// The thread runs, filling pages of its file (sometimes another file, or after a
/// seek), then waits for the block request that reads them.
fn run_and_read(trace: &mut Trace, rng: &mut Rng, th: &mut ThreadState_, file_count: u32, disk: Dev) {
    let run = 5_000 + rng.below(200_000) as Nanos;
    let run_start = th.t;
    trace.sched.push(SchedInterval {
        tid: th.tid,
        start_ns: run_start,
        end_ns: run_start + run,
        state: ThreadState::Running,
    });
    th.t += run;
    if rng.chance(20) {
        th.file = 1 + rng.below(u64::from(file_count)) as u32;
        th.next_page = 0;
    } else if rng.chance(25) {
        th.next_page = rng.below(1024);
    }
    let fills = 1 + rng.below(8);
    let first_page = th.next_page;
    for i in 0..fills {
        let pages = if rng.chance(80) { 1 } else { 4 };
        trace.page_fills.push(PageFill {
            t_ns: run_start + run * (i as Nanos + 1) / (fills as Nanos + 1),
            pid: th.pid,
            tid: th.tid,
            file_id: th.file,
            index: th.next_page,
            pages,
            origin: Some(if i == 0 { PageOrigin::Fault } else { PageOrigin::Readahead }),
        });
        th.next_page += u64::from(pages);
    }
    let wait = 20_000 + rng.below(400_000) as Nanos;
    let extent = &trace.extents[th.file as usize - 1];
    trace.block_ios.push(BlockIo {
        issue_ns: Some(th.t),
        complete_ns: Some(th.t + wait),
        dev: disk,
        sector: Some((extent.physical + first_page * 4096) / 512),
        bytes: ((th.next_page - first_page) * 4096) as u32,
        op: BlockOp::Read,
        rwbs: "R".into(),
        pid: th.pid,
        comm: String::new(),
        file_id: None,
        error: 0,
    });
    trace.sched.push(SchedInterval {
        tid: th.tid,
        start_ns: th.t,
        end_ns: th.t + wait,
        state: ThreadState::IoWait,
    });
    trace.wakeups.push(Wakeup { t_ns: th.t + wait, tid: th.tid, waker_tid: None });
    th.t += wait;
}

/// Every thread runs until the last one is done, when the root exits (the readiness
/// point); a mark halfway, the disk's totals, and the tables in time order.
fn finish(trace: &mut Trace, threads: &[ThreadState_], now: Nanos, disk: Dev) {
    let end = threads.iter().map(|t| t.t).max().unwrap_or(now);
    for th in threads {
        trace.sched.push(SchedInterval {
            tid: th.tid,
            start_ns: th.t,
            end_ns: end,
            state: ThreadState::Running,
        });
    }
    trace.processes[0].end_ns = Some(end);
    trace.meta.duration_ns = end;
    trace.meta.ready = Some(Ready { t_ns: end, reason: ReadyReason::Exit, pid: None, tid: None });
    trace.marks.push(Mark {
        t_ns: end / 2,
        pid: Some(1000),
        name: "halfway".into(),
        source: MarkSource::Command,
        tid: None,
    });
    trace.disks.push(Disk {
        dev: disk,
        name: "vda".into(),
        read_bytes: Some(trace.block_ios.iter().map(|b| u64::from(b.bytes)).sum()),
        ..Disk::default()
    });
    trace.page_fills.sort_by_key(|f| f.t_ns);
    trace.block_ios.sort_by_key(|b| b.issue_ns);
    trace.wakeups.sort_by_key(|w| w.t_ns);
    trace.sched.sort_by_key(|s| s.end_ns);
}
