//! The only place the tests touch the analysis API: a builder for synthetic traces,
//! a round trip through the trace file, and `check`, which renders one facet of the
//! analysis as plain lines and compares them with the expected ones. The doctor's
//! tests use the same builder ([`Builder::start`]) through [`doctor`], and share the
//! starts of [`scenarios`].

#![allow(dead_code)]

pub mod doctor;
pub mod scenarios;

use coldstart_analyze::{Analysis, RankBy, ReadFilter, SegmentKind};
use coldstart_trace::*;

pub const MS: Nanos = 1_000_000;
/// The disk of every built trace's files (vda).
pub const DISK: Dev = Dev::new(254, 0);

/// Builds a trace: root process 100 (`app`, thread 100) started at t = 0, page size 4 KiB.
/// Rows are sorted into time order when built, as the recorder writes them.
pub struct Builder {
    trace: Trace,
    /// Where the next [`Builder::placed_file`] goes: far from every other file.
    next_sector: u64,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl Builder {
    pub fn new() -> Builder {
        let trace = Trace {
            meta: Meta {
                tool: "test".into(),
                source: Source::Synthetic,
                command: vec!["app".into()],
                root_pid: Some(100),
                page_size: 4096,
                duration_ns: 10_000 * MS,
                ..Meta::default()
            },
            ..Trace::default()
        };
        let b = Builder { trace, next_sector: 1 << 20 };
        b.process(100, 1, "app", Some(0))
    }

    /// A start as the doctor's tests see one: root process 100 (`app --start`, thread 100)
    /// of /usr/bin/app forked at t = 0 on a cold cache, 2 CPUs, the solid-state disk vda.
    pub fn start() -> Builder {
        let trace = Trace {
            meta: Meta {
                tool: "doctor test".into(),
                source: Source::Synthetic,
                command: vec!["app".into(), "--start".into()],
                root_pid: Some(100),
                page_size: 4096,
                cpu_count: 2,
                duration_ns: 10_000 * MS,
                cache: CacheState::Cold,
                ..Meta::default()
            },
            disks: vec![Disk { dev: DISK, name: "vda".into(), rotational: Some(false), ..Disk::default() }],
            ..Trace::default()
        };
        Builder { trace, next_sector: 1 << 20 }.program(100, 1, "app", 0, None)
    }

    pub fn process(mut self, pid: i32, ppid: i32, comm: &str, start_ns: Option<Nanos>) -> Builder {
        self.trace.processes.push(Process {
            pid,
            ppid: Some(ppid),
            comm: comm.into(),
            start_ns,
            in_scope: true,
            ..Process::default()
        });
        self.thread(pid, pid, comm)
    }

    /// A process outside the recorded scope (no scheduler data), named as the recorder
    /// names the waker of a recorded thread.
    pub fn outside_process(mut self, pid: i32, comm: &str) -> Builder {
        self.trace.processes.push(Process { pid, comm: comm.into(), in_scope: false, ..Process::default() });
        self.thread(pid, pid, comm)
    }

    pub fn exits(mut self, pid: i32, t_ns: Nanos) -> Builder {
        for p in self.trace.processes.iter_mut().filter(|p| p.pid == pid) {
            p.end_ns = Some(t_ns);
        }
        self
    }

    pub fn thread(mut self, tid: i32, pid: i32, comm: &str) -> Builder {
        self.trace.threads.push(Thread { tid, pid, comm: comm.into(), start_ns: None, end_ns: None });
        self
    }

    pub fn file(mut self, id: u32, path: &str) -> Builder {
        self.trace.files.push(File {
            id,
            dev: DISK,
            ino: u64::from(id) + 1000,
            path: Some(path.into()),
            ..File::default()
        });
        self
    }

    pub fn unresolved_file(mut self, id: u32) -> Builder {
        self.trace.files.push(File { id, dev: DISK, ino: u64::from(id) + 1000, ..File::default() });
        self
    }

    pub fn metadata_file(mut self, id: u32) -> Builder {
        self.trace.files.push(File {
            id,
            dev: DISK,
            ino: 0,
            path: None,
            kind: FileKind::DeviceMetadata,
            ..File::default()
        });
        self
    }

    /// `pages` pages of `file` from page `index`, added by `tid` (of process `pid`) at `t_ns`.
    pub fn fill(mut self, t_ns: Nanos, pid: i32, tid: i32, file: u32, index: u64, pages: u32) -> Builder {
        self.trace.page_fills.push(PageFill { t_ns, pid, tid, file_id: file, index, pages, origin: None });
        self
    }

    /// `tid` (of `pid`) asked for `pages` pages of `file` from `index` at `t_ns`.
    #[allow(clippy::too_many_arguments)]
    pub fn access(
        mut self,
        t_ns: Nanos,
        pid: i32,
        tid: i32,
        file: u32,
        index: u64,
        pages: u32,
        kind: AccessKind,
    ) -> Builder {
        self.trace.page_accesses.push(PageAccess { t_ns, pid, tid, file_id: file, index, pages, kind });
        self
    }

    pub fn fill_origin(mut self, origin: PageOrigin) -> Builder {
        if let Some(f) = self.trace.page_fills.last_mut() {
            f.origin = Some(origin);
        }
        self
    }

    pub fn sched(mut self, tid: i32, start_ns: Nanos, end_ns: Nanos, state: ThreadState) -> Builder {
        self.trace.sched.push(SchedInterval { tid, start_ns, end_ns, state });
        self
    }

    pub fn wakeup(mut self, t_ns: Nanos, tid: i32, waker_tid: Option<i32>) -> Builder {
        self.trace.wakeups.push(Wakeup { t_ns, tid, waker_tid });
        self
    }

    pub fn extent(mut self, file: u32, physical: u64, length: u64) -> Builder {
        self.trace.extents.push(Extent { file_id: file, disk: DISK, logical: 0, physical, length, flags: 0 });
        self
    }

    pub fn disk(mut self, read_bytes: u64) -> Builder {
        self.trace.disks.push(Disk {
            dev: DISK,
            name: "vda".into(),
            rotational: Some(true),
            read_bytes: Some(read_bytes),
            ..Disk::default()
        });
        self
    }

    /// A read request on 254:0 issued at `issue_ns`, done 1 ms later.
    pub fn block(mut self, issue_ns: Nanos, sector: u64, bytes: u32, rwbs: &str) -> Builder {
        let row = block_io(DISK, Some(issue_ns), issue_ns + MS, Some(sector), bytes, rwbs, 100, "app");
        self.trace.block_ios.push(row);
        self
    }

    pub fn mark(mut self, t_ns: Nanos, pid: i32, name: &str) -> Builder {
        self.trace.marks.push(Mark {
            t_ns,
            pid: Some(pid),
            name: name.into(),
            source: MarkSource::Command,
            tid: None,
        });
        self
    }

    pub fn ready(mut self, t_ns: Nanos, reason: &str) -> Builder {
        self.trace.meta.ready =
            Some(Ready { t_ns, reason: reason.parse().expect("a ready reason"), pid: None, tid: None });
        self
    }

    /// A readiness point the recorder credited to `pid` (and `tid`, when it knew the thread).
    pub fn ready_by(mut self, t_ns: Nanos, reason: &str, pid: i32, tid: Option<i32>) -> Builder {
        self = self.ready(t_ns, reason);
        if let Some(ready) = &mut self.trace.meta.ready {
            (ready.pid, ready.tid) = (Some(pid), tid);
        }
        self
    }

    /// The system's CPU use over `(t_ns - dt_ns, t_ns]`, as fractions of all CPUs.
    pub fn cpu_sample(mut self, t_ns: Nanos, dt_ns: Nanos, user: f64, iowait: f64) -> Builder {
        self.trace.cpu_samples.push(CpuSample {
            t_ns,
            dt_ns,
            user,
            system: 0.0,
            iowait,
            idle: 1.0 - user - iowait,
            running: 0,
            blocked: 0,
        });
        self
    }

    pub fn loss(mut self, source: LossSource, what: &str, count: u64) -> Builder {
        self.trace.losses.push(Loss { source, what: what.into(), count });
        self
    }

    pub fn duration(mut self, ns: Nanos) -> Builder {
        self.trace.meta.duration_ns = ns;
        self
    }

    pub fn rotational(mut self, rotational: bool) -> Builder {
        self.trace.disks[0].rotational = Some(rotational);
        self
    }

    /// Another disk the trace saw.
    pub fn other_disk(mut self, dev: Dev, name: &str) -> Builder {
        self.trace.disks.push(Disk { dev, name: name.into(), rotational: Some(false), ..Disk::default() });
        self
    }

    /// A process of /usr/bin/`comm` (argv: `comm`) alive `start..end`.
    pub fn program(mut self, pid: i32, ppid: i32, comm: &str, start: Nanos, end: Option<Nanos>) -> Builder {
        self.trace.processes.push(Process {
            pid,
            ppid: Some(ppid),
            comm: comm.into(),
            exe: Some(format!("/usr/bin/{comm}")),
            argv: vec![comm.into()],
            start_ns: Some(start),
            end_ns: end,
            in_scope: true,
            ..Process::default()
        });
        self.thread(pid, pid, comm)
    }

    /// The traced command, as `meta.command`.
    pub fn command(mut self, args: &[&str]) -> Builder {
        self.trace.meta.command = args.iter().map(|a| (*a).to_owned()).collect();
        self
    }

    /// Process `pid` (and its main thread) named `comm` as the kernel would, running `exe`
    /// with `argv` (`exe` empty: a fork that did not exec).
    pub fn runs(mut self, pid: i32, comm: &str, exe: &str, argv: &[&str]) -> Builder {
        for p in self.trace.processes.iter_mut().filter(|p| p.pid == pid) {
            p.comm = comm.into();
            p.exe = (!exe.is_empty()).then(|| exe.to_owned());
            p.argv = argv.iter().map(|a| (*a).to_owned()).collect();
        }
        for t in self.trace.threads.iter_mut().filter(|t| t.tid == pid) {
            t.comm = comm.into();
        }
        self
    }

    /// A systemd unit that started `activating..active` with main process `pid`.
    pub fn unit(mut self, name: &str, activating: Nanos, active: Nanos, pid: Option<i32>) -> Builder {
        self.trace.units.push(Unit {
            name: name.into(),
            manager: "container".into(),
            activating_ns: Some(activating),
            active_ns: Some(active),
            deactivating_ns: None,
            pid,
            after: Vec::new(),
        });
        self
    }

    /// A regular file of `size` bytes in one extent, far from every other file on the disk.
    pub fn placed_file(mut self, id: u32, path: &str, size: u64) -> Builder {
        self.trace.files.push(File {
            id,
            dev: DISK,
            ino: u64::from(id) + 1000,
            path: Some(path.into()),
            kind: FileKind::Regular,
            size: Some(size),
            mtime_ns: None,
        });
        let sector = self.next_sector;
        self.next_sector += size.div_ceil(512) + (64 << 11);
        self.trace.extents.push(Extent {
            file_id: id,
            disk: DISK,
            logical: 0,
            physical: sector * 512,
            length: size,
            flags: 0,
        });
        self
    }

    pub fn run(self, tid: i32, from: Nanos, to: Nanos) -> Builder {
        self.sched(tid, from, to, ThreadState::Running)
    }

    /// Asleep `from..to`, woken by `waker` (`None`: a timer or an interrupt).
    pub fn sleep(mut self, tid: i32, from: Nanos, to: Nanos, waker: Option<i32>) -> Builder {
        self.trace.wakeups.push(Wakeup { t_ns: to, tid, waker_tid: waker });
        self.sched(tid, from, to, ThreadState::Sleeping)
    }

    /// A block request `issue..complete` of `bytes` at `page` of `file` (placed by its extent).
    #[allow(clippy::too_many_arguments)]
    pub fn request(
        mut self,
        issue: Nanos,
        complete: Nanos,
        file: u32,
        page: u64,
        bytes: u32,
        pid: i32,
        comm: &str,
    ) -> Builder {
        let extent = self.trace.extents.iter().find(|e| e.file_id == file).map_or(0, |e| e.physical);
        let sector = (extent + page * 4096) / 512;
        let row = block_io(DISK, Some(issue), complete, Some(sector), bytes, "R", pid, comm);
        self.trace.block_ios.push(BlockIo { file_id: Some(file), ..row });
        self
    }

    /// A read request at an absolute sector, of no file of the trace.
    #[allow(clippy::too_many_arguments)]
    pub fn raw_request(
        mut self,
        dev: Dev,
        issue: Nanos,
        complete: Nanos,
        sector: u64,
        bytes: u32,
        pid: i32,
        comm: &str,
    ) -> Builder {
        self.trace.block_ios.push(block_io(dev, Some(issue), complete, Some(sector), bytes, "R", pid, comm));
        self
    }

    #[allow(clippy::too_many_arguments)]
    /// A write request with the kernel's flags `rwbs` (`WS`, `FWFS`, `W`…), or a flush (`FN`, no sector).
    pub fn write(
        mut self,
        issue: Option<Nanos>,
        complete: Nanos,
        sector: Option<u64>,
        bytes: u32,
        rwbs: &str,
        pid: i32,
        comm: &str,
    ) -> Builder {
        self.trace.block_ios.push(block_io(DISK, issue, complete, sector, bytes, rwbs, pid, comm));
        self
    }

    #[allow(clippy::too_many_arguments)]
    /// `tid` of `pid` runs 1 ms, then reads `pages` of `file` from `page` with one request
    /// and waits `wait` for it; returns the time it is done.
    pub fn read_step(
        self,
        t: Nanos,
        pid: i32,
        tid: i32,
        file: u32,
        page: u64,
        pages: u32,
        wait: Nanos,
    ) -> (Builder, Nanos) {
        let s = self
            .run(tid, t, t + MS)
            .fill(t + MS - 1000, pid, tid, file, page, pages)
            .fill_origin(PageOrigin::Read)
            .request(t + MS, t + MS + wait, file, page, pages * 4096, pid, "app")
            .sched(tid, t + MS, t + MS + wait, ThreadState::IoWait);
        (s, t + MS + wait)
    }

    /// Ready at `t`, when the root process exits.
    pub fn ready_at_exit(mut self, t: Nanos) -> Builder {
        self.trace.meta.ready = Some(Ready { t_ns: t, reason: ReadyReason::Exit, pid: None, tid: None });
        for p in self.trace.processes.iter_mut().filter(|p| p.pid == 100) {
            p.end_ns = Some(t);
        }
        self
    }

    pub fn build(mut self) -> Trace {
        self.trace.page_fills.sort_by_key(|f| f.t_ns);
        self.trace.sched.sort_by_key(|s| (s.tid, s.start_ns));
        self.trace.block_ios.sort_by_key(|b| b.issue_ns.or(b.complete_ns));
        self.trace.wakeups.sort_by_key(|w| w.t_ns);
        self.trace.extents.sort_by_key(|e| (e.file_id, e.logical));
        self.trace.files.sort_by_key(|f| f.id);
        let read: u64 = self
            .trace
            .block_ios
            .iter()
            .filter(|b| b.op == BlockOp::Read && b.dev == DISK)
            .map(|b| u64::from(b.bytes))
            .sum();
        if let Some(disk) = self.trace.disks.iter_mut().find(|d| d.dev == DISK && d.read_bytes.is_none()) {
            disk.read_bytes = Some(read);
        }
        self.trace
    }
}

/// A block request of no file, with no error.
#[allow(clippy::too_many_arguments)]
fn block_io(
    dev: Dev,
    issue_ns: Option<Nanos>,
    complete_ns: Nanos,
    sector: Option<u64>,
    bytes: u32,
    rwbs: &str,
    pid: i32,
    comm: &str,
) -> BlockIo {
    BlockIo {
        issue_ns,
        complete_ns: Some(complete_ns),
        dev,
        sector,
        bytes,
        op: BlockOp::from_rwbs(rwbs),
        rwbs: rwbs.into(),
        pid,
        comm: comm.into(),
        file_id: None,
        error: 0,
    }
}

/// Writes the trace with the trace writer and reads it back, unchanged.
pub fn round_trip(trace: &Trace) -> Trace {
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("test.coldstart");
    trace.write(&path).expect("write the trace");
    let read = Trace::read(&path).expect("read the trace back");
    let differs = [
        ("files", read.files == trace.files),
        ("extents", read.extents == trace.extents),
        ("page_fills", read.page_fills == trace.page_fills),
        ("block_ios", read.block_ios == trace.block_ios),
        ("sched", read.sched == trace.sched),
        ("wakeups", read.wakeups == trace.wakeups),
        ("processes", read.processes == trace.processes),
        ("meta", read.meta == trace.meta),
    ];
    assert!(&read == trace, "the trace file round trip changed the trace: {differs:?}");
    read
}

/// Writes the trace with the trace writer, reads it back, and analyses what was read.
pub fn analyze(trace: &Trace) -> Analysis {
    coldstart_analyze::analyze(&round_trip(trace))
}

/// A facet of the analysis, rendered as lines by [`render`].
#[derive(Clone, Copy, Debug)]
pub enum Facet {
    /// One line per coalesced read: `t_ms pid file first-last [seek]`.
    Reads,
    /// `file reads seeks pages io_wait_ms`, ranked.
    ByFile,
    ByProcess,
    /// Per thread: `tid run/runnable/io/sleep ms, attributed io ms`.
    Threads,
    /// The wall-clock breakdown of the start, in ms.
    Start,
    /// `start-end ms kind name`.
    Phases,
    /// The critical path's segments and summary.
    CriticalPath,
    /// Disk seeks, ownership and the diskstats cross-check.
    Disk,
    /// `code count`.
    Warnings,
    /// Headline figures.
    Overview,
    /// Pages read against pages asked for, in all and per file.
    PageUse,
}

fn ms(ns: Nanos) -> String {
    let whole = ns / MS;
    let frac = ns % MS;
    if frac == 0 { whole.to_string() } else { format!("{:.3}", ns as f64 / MS as f64) }
}

pub fn render(a: &Analysis, facet: Facet) -> String {
    let mut lines: Vec<String> = Vec::new();
    let name = |id: u32| a.file_name(id).to_owned();
    match facet {
        Facet::Reads => {
            for r in &a.reads {
                let seek = if r.seek { " seek" } else { "" };
                lines.push(format!(
                    "{} {} {} {}-{}{seek}",
                    ms(r.t_ns),
                    r.pid,
                    name(r.file),
                    r.first_page,
                    r.last_page()
                ));
            }
        }
        Facet::ByFile | Facet::ByProcess => {
            let by = if matches!(facet, Facet::ByFile) { RankBy::File } else { RankBy::Process };
            for row in a.rank(by, &ReadFilter::default()) {
                lines.push(format!(
                    "{} reads={} seeks={} pages={} io={} spread={}",
                    row.name,
                    row.reads,
                    row.seeks,
                    row.pages,
                    ms(row.io_wait_ns),
                    row.spread
                ));
            }
        }
        Facet::Threads => {
            for t in &a.threads {
                let s = &t.time;
                lines.push(format!(
                    "{} run={} runnable={} io={} sleep={} attributed={}",
                    t.tid,
                    ms(s.running_ns),
                    ms(s.runnable_ns),
                    ms(s.io_wait_ns),
                    ms(s.sleeping_ns),
                    ms(t.io_wait_attributed_ns)
                ));
            }
        }
        Facet::Start => {
            let s = &a.start;
            lines.push(format!(
                "{}-{} cpu={} io={} cpu_wait={} idle={}",
                ms(s.from_ns),
                ms(s.to_ns),
                ms(s.cpu_ns),
                ms(s.io_wait_ns),
                ms(s.cpu_wait_ns),
                ms(s.idle_ns)
            ));
        }
        Facet::Phases => {
            for p in &a.phases {
                let mark = p.ends_at_mark.as_deref().map(|m| format!(" | {m}")).unwrap_or_default();
                lines.push(format!("{}-{} {:?}: {}{mark}", ms(p.start_ns), ms(p.end_ns), p.kind, p.name));
            }
        }
        Facet::CriticalPath => match &a.critical_path {
            None => lines.push("none".into()),
            Some(cp) => {
                for s in &cp.segments {
                    let kind = match s.kind {
                        SegmentKind::Cpu => "cpu",
                        SegmentKind::CpuWait => "cpu_wait",
                        SegmentKind::IoWait => "io",
                        SegmentKind::Sleep => "sleep",
                        SegmentKind::WaitUntraced => "wait_untraced",
                        SegmentKind::NoWakeup => "no_wakeup",
                        SegmentKind::Untraced => "untraced",
                    };
                    let kind = match &s.waker_process {
                        Some(w) => format!("{kind} on {}/{}", w.comm, w.pid),
                        None => kind.to_owned(),
                    };
                    let files: Vec<String> =
                        s.files.iter().map(|f| format!("{}={}", name(f.file), ms(f.ns))).collect();
                    let files =
                        if files.is_empty() { String::new() } else { format!(" [{}]", files.join(", ")) };
                    lines.push(format!("{}-{} {} {kind}{files}", ms(s.start_ns), ms(s.end_ns), s.tid));
                }
                let m = &cp.summary;
                let files: Vec<String> =
                    m.io_files.iter().map(|f| format!("{}={}", name(f.file), ms(f.ns))).collect();
                let helpers: Vec<String> =
                    m.helpers.iter().map(|h| format!("{}/{}={}", h.comm, h.pid, ms(h.ns))).collect();
                lines.push(format!(
                    "total={} cpu={} cpu_wait={} io={} [{}] sleep={} untraced={} helpers=[{}]",
                    ms(m.total_ns),
                    ms(m.cpu_ns),
                    ms(m.cpu_wait_ns),
                    ms(m.io_wait_ns),
                    files.join(", "),
                    ms(m.sleep_ns),
                    ms(m.untraced_ns),
                    helpers.join(", ")
                ));
            }
        },
        Facet::Disk => {
            for d in &a.disks {
                let s = &d.seeks;
                lines.push(format!(
                    "{} coverage={} latency={} reissued={} requests={} sequential={} forward={}/{} backward={}/{} far={}",
                    d.name,
                    d.coverage.map_or("-".into(), |c| format!("{c:.2}")),
                    d.read_latency_median_ns.map_or("-".into(), ms),
                    d.reissued,
                    s.requests,
                    s.sequential,
                    s.forward,
                    s.forward_sectors,
                    s.backward,
                    s.backward_sectors,
                    s.far
                ));
                lines.push(format!(
                    "metadata={}/{} unknown={}/{}",
                    d.metadata_requests, d.metadata_bytes, d.unknown_requests, d.unknown_bytes
                ));
                for f in &d.files {
                    lines.push(format!(
                        "{} requests={} bytes={} far={}",
                        name(f.file),
                        f.requests,
                        f.bytes,
                        f.far_seeks
                    ));
                }
            }
        }
        Facet::PageUse => match &a.page_use {
            None => lines.push("not recorded".into()),
            Some(u) => {
                lines.push(format!(
                    "filled={} used={} around={} unused={} asked={} cached={}",
                    u.filled_pages,
                    u.used_pages,
                    u.map_around_only_pages,
                    u.unused_pages,
                    u.asked_pages,
                    u.asked_cached_pages
                ));
                for f in &a.page_use_by_file {
                    lines.push(format!(
                        "{} filled={} used={} around={} unused={}",
                        name(f.file),
                        f.filled_pages,
                        f.used_pages,
                        f.map_around_only_pages,
                        f.unused_pages
                    ));
                }
            }
        },
        Facet::Warnings => {
            for w in &a.warnings {
                lines.push(format!("{:?} {}", w.code, w.count));
            }
        }
        Facet::Overview => {
            let o = &a.overview;
            lines.push(format!(
                "origin={} end={} processes={} started={} files={} reads={} seeks={} pages={} bytes={}",
                ms(o.origin_ns),
                ms(o.end_ns),
                o.processes,
                o.processes_started,
                o.files_read,
                o.reads,
                o.seeks,
                o.pages_read,
                o.bytes_read
            ));
            if let Some(r) = &o.ready {
                lines.push(format!(
                    "ready={} {} ttr={} pid={} tid={}",
                    ms(r.t_ns),
                    r.reason,
                    ms(r.time_to_ready_ns),
                    r.pid,
                    r.tid
                ));
            }
        }
    }
    lines.join("\n")
}

/// Analyses `trace` (through the trace file) and compares one facet with `expected`
/// (compared line by line, each trimmed; blank lines ignored).
pub fn check(trace: &Trace, facet: Facet, expected: &str) {
    let analysis = analyze(trace);
    let actual = render(&analysis, facet);
    let normalize =
        |s: &str| s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("\n");
    assert_eq!(normalize(&actual), normalize(expected), "\n--- {facet:?} facet, actual:\n{actual}\n");
}

/// Properties that hold for any trace, however odd: the analysis returns, its time
/// accounts add up, and it survives a JSON round trip unchanged.
pub fn check_invariants(trace: &Trace) {
    let a = coldstart_analyze::analyze(trace);
    let s = &a.start;
    if s.to_ns >= s.from_ns {
        assert_eq!(
            s.cpu_ns + s.io_wait_ns + s.cpu_wait_ns + s.idle_ns,
            s.to_ns - s.from_ns,
            "start breakdown"
        );
    }
    if let Some(cp) = &a.critical_path {
        let mut t = cp.from_ns;
        for seg in &cp.segments {
            assert_eq!(seg.start_ns, t, "critical path segments must tile the start: {:?}", cp.segments);
            assert!(seg.end_ns > seg.start_ns, "empty segment {seg:?}");
            t = seg.end_ns;
        }
        assert_eq!(t, cp.to_ns, "critical path must end at ready");
        let m = &cp.summary;
        let helpers: Nanos = m.helpers.iter().map(|h| h.ns).sum();
        let parts = m.cpu_ns
            + m.cpu_wait_ns
            + m.io_wait_ns
            + m.sleep_ns
            + m.wait_untraced_ns
            + m.no_wakeup_ns
            + m.untraced_ns
            + helpers;
        assert_eq!(parts, m.total_ns, "critical path summary");
    }
    let mut t = a.overview.origin_ns;
    for p in &a.phases {
        assert_eq!(p.start_ns, t, "phases must tile the start");
        t = p.end_ns;
    }
    for th in &a.threads {
        assert!(
            th.io_wait_attributed_ns <= th.time.io_wait_ns,
            "attributed more I/O wait than waited: {th:?}"
        );
    }
    let fill_pages: u64 = trace.page_fills.iter().map(|f| u64::from(f.pages)).sum();
    assert_eq!(a.reads.iter().map(|r| r.pages).sum::<u64>(), fill_pages, "reads must hold every page");
    if let Some(u) = &a.page_use {
        assert_eq!(u.used_pages + u.map_around_only_pages + u.unused_pages, u.filled_pages, "page use");
        assert!(u.asked_cached_pages <= u.asked_pages);
    }
    let json = serde_json::to_string(&a).expect("serialize");
    let back: Analysis = serde_json::from_str(&json).expect("deserialize");
    assert_eq!(back, a, "JSON round trip");
}
