//! The only place the doctor's tests touch its API: a builder of synthetic starts
//! (processes, files, scheduler intervals, page fills, block requests), `diagnose`
//! through a trace file round trip, and a plain-line rendering of the findings that
//! tests compare with what they expect.

#![allow(dead_code)]

pub mod scenarios;

use coldstart_analyze::doctor::{self, Diagnosis, DoctorConfig, Finding, FindingKind, Languages, WhatIfSpec};
use coldstart_trace::*;

pub const MS: Nanos = 1_000_000;
pub const DISK: Dev = Dev::new(254, 0);

/// A start: root process 100 (`app`, thread 100) forked at t = 0, 4 KiB pages, disk vda.
pub struct Start {
    pub trace: Trace,
    /// Where the next block request of a file goes: far from every other file.
    next_sector: u64,
}

impl Default for Start {
    fn default() -> Self {
        Self::new()
    }
}

impl Start {
    pub fn new() -> Start {
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
        Start { trace, next_sector: 1 << 20 }.process(100, 1, "app", 0, None)
    }

    pub fn rotational(mut self, rotational: bool) -> Start {
        self.trace.disks[0].rotational = Some(rotational);
        self
    }

    /// Another disk the trace saw.
    pub fn disk(mut self, dev: Dev, name: &str) -> Start {
        self.trace.disks.push(Disk { dev, name: name.into(), rotational: Some(false), ..Disk::default() });
        self
    }

    pub fn process(mut self, pid: i32, ppid: i32, comm: &str, start: Nanos, end: Option<Nanos>) -> Start {
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

    pub fn thread(mut self, tid: i32, pid: i32, comm: &str) -> Start {
        self.trace.threads.push(Thread { tid, pid, comm: comm.into(), start_ns: None, end_ns: None });
        self
    }

    pub fn file(mut self, id: u32, path: &str, size: u64) -> Start {
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

    pub fn sched(mut self, tid: i32, from: Nanos, to: Nanos, state: ThreadState) -> Start {
        self.trace.sched.push(SchedInterval { tid, start_ns: from, end_ns: to, state });
        self
    }

    pub fn run(self, tid: i32, from: Nanos, to: Nanos) -> Start {
        self.sched(tid, from, to, ThreadState::Running)
    }

    /// Asleep `from..to`, woken by `waker` (`None`: a timer or an interrupt).
    pub fn sleep(mut self, tid: i32, from: Nanos, to: Nanos, waker: Option<i32>) -> Start {
        self.trace.wakeups.push(Wakeup { t_ns: to, tid, waker_tid: waker });
        self.sched(tid, from, to, ThreadState::Sleeping)
    }

    /// `pages` of `file` from `index` enter the cache at `t` for `tid` of `pid`.
    #[allow(clippy::too_many_arguments)]
    pub fn fill(
        mut self,
        t: Nanos,
        pid: i32,
        tid: i32,
        file: u32,
        index: u64,
        pages: u32,
        origin: Option<PageOrigin>,
    ) -> Start {
        self.trace.page_fills.push(PageFill { t_ns: t, pid, tid, file_id: file, index, pages, origin });
        self
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
    ) -> Start {
        let extent = self.trace.extents.iter().find(|e| e.file_id == file).map_or(0, |e| e.physical);
        self.trace.block_ios.push(BlockIo {
            issue_ns: Some(issue),
            complete_ns: Some(complete),
            dev: DISK,
            sector: Some((extent + page * 4096) / 512),
            bytes,
            op: BlockOp::Read,
            rwbs: "R".into(),
            pid,
            comm: comm.into(),
            file_id: Some(file),
            error: 0,
        });
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
    ) -> Start {
        self.trace.block_ios.push(BlockIo {
            issue_ns: Some(issue),
            complete_ns: Some(complete),
            dev,
            sector: Some(sector),
            bytes,
            op: BlockOp::Read,
            rwbs: "R".into(),
            pid,
            comm: comm.into(),
            file_id: None,
            error: 0,
        });
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
    ) -> Start {
        self.trace.block_ios.push(BlockIo {
            issue_ns: issue,
            complete_ns: Some(complete),
            dev: DISK,
            sector,
            bytes,
            op: BlockOp::from_rwbs(rwbs),
            rwbs: rwbs.into(),
            pid,
            comm: comm.into(),
            file_id: None,
            error: 0,
        });
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
    ) -> (Start, Nanos) {
        let s = self
            .run(tid, t, t + MS)
            .fill(t + MS - 1000, pid, tid, file, page, pages, Some(PageOrigin::Read))
            .request(t + MS, t + MS + wait, file, page, pages * 4096, pid, "app")
            .sched(tid, t + MS, t + MS + wait, ThreadState::IoWait);
        (s, t + MS + wait)
    }

    pub fn ready(mut self, t: Nanos) -> Start {
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
        self.trace.disks[0].read_bytes = Some(read);
        self.trace
    }
}

/// The doctor's configuration of the tests: defaults, the user reads German.
pub fn config() -> DoctorConfig {
    DoctorConfig {
        languages: Languages { tags: vec!["de_DE.UTF-8".into()], source: "the test".into() },
        trace_name: "app.coldstart".into(),
        ..DoctorConfig::default()
    }
}

/// Writes the trace to a file, reads it back, analyses it and diagnoses it.
pub fn diagnose_with(trace: &Trace, config: &DoctorConfig, what_if: &[WhatIfSpec]) -> Diagnosis {
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
    let analysis = coldstart_analyze::analyze(&read);
    doctor::diagnose(&read, &analysis, config, what_if)
}

pub fn diagnose(trace: &Trace) -> Diagnosis {
    diagnose_with(trace, &config(), &[])
}

fn ms(ns: Nanos) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

/// One line per finding: `kind gain_ms confidence | title`.
pub fn render(d: &Diagnosis) -> String {
    d.findings
        .iter()
        .map(|f| format!("{} {} {:?} | {}", f.kind.as_str(), ms(f.gain.ns), f.confidence, f.title))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The findings of `kind`.
pub fn of_kind(d: &Diagnosis, kind: FindingKind) -> Vec<&Finding> {
    d.findings.iter().filter(|f| f.kind == kind).collect()
}

/// The one finding of `kind`, with a helpful message when there is not exactly one.
pub fn one(d: &Diagnosis, kind: FindingKind) -> &Finding {
    let found = of_kind(d, kind);
    assert_eq!(found.len(), 1, "expected one {} finding, got:\n{}", kind.as_str(), render(d));
    found[0]
}

/// A named input of a finding's gain.
pub fn input(f: &Finding, name: &str) -> f64 {
    f.gain
        .inputs
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no input {name} in {:?}", f.gain.inputs))
        .value
}

/// A named figure of a finding's evidence.
pub fn figure(f: &Finding, name: &str) -> f64 {
    f.evidence
        .figures
        .iter()
        .find(|i| i.name == name)
        .unwrap_or_else(|| panic!("no figure {name} in {:?}", f.evidence.figures))
        .value
}

/// Every finding's arithmetic holds: the gain is never negative and its formula's
/// inputs are all there; the list is ranked.
pub fn check_invariants(d: &Diagnosis) {
    for f in &d.findings {
        assert!(f.gain.ns >= 0, "negative gain: {f:?}");
        assert!(!f.title.is_empty() && !f.suggestion.is_empty() && !f.verify.is_empty());
        for word in f.gain.formula.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
            if word.ends_with("_ns") || word.ends_with("_bytes") {
                assert!(
                    f.gain.inputs.iter().any(|i| i.name == word),
                    "formula names {word}, not in inputs: {f:?}"
                );
            }
        }
    }
    let mut ranked = d.findings.clone();
    doctor::rank(&mut ranked);
    assert_eq!(ranked, d.findings, "findings are ranked");
}
