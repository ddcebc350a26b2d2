//! CPU samples with stacks: a perf software-clock event per CPU, sampling the recorded
//! tasks with their kernel and user callchains, user registers and a copy of the user
//! stack, plus the mmap, comm and task records that say what each address belonged to.
//! The capture thread only copies each ring buffer's bytes into the spool
//! (`perf-cpuN.raw`); `assemble/stacks.rs` decodes, unwinds and symbolizes them later.
//!
//! For a command's tree the events follow the command (`pid` = the paused command,
//! `inherit`), so only its tasks are sampled and nothing else pays for the stack copies;
//! with `--system` or `--also`, whose tasks exist before the recording, they watch every
//! task of each CPU (`pid = -1`) and the assembly keeps those in scope. (A 0.4 s start on a
//! busy 2-CPU machine: 3.6 MiB copied per task, 13.1 MiB per CPU, most of it other
//! processes' stacks.)
//!
//! Off-CPU stacks of a command's tree are taken by an eBPF program that keeps only the
//! sleeps that can matter (`super::off_cpu`, drained by this module's capture thread).
//! Elsewhere (`--system`, `--also`), or when the program is refused: a second event per
//! CPU on the `sched:sched_switch` tracepoint, opened in the same way, takes the kernel
//! callchain of each recorded thread that leaves a CPU
//! to sleep. The tracepoint fires in the context of the task leaving the CPU, so the chain
//! is the blocked thread's own: what it waited in. Only the kernel chain is taken (the
//! user stack is known from the CPU samples and costs much more), and a filter on
//! `prev_state` keeps preemptions out (`perf-offcpu-cpuN.raw`).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use serde::{Deserialize, Serialize};

use crate::capture::Stop;
use crate::capture::off_cpu::{self, KernelFilter, OffCpuCounts, OffCpuProbe};
use crate::error::{IoContext, Result};
use crate::spool::Spool;
use crate::sys::{
    PerfEventAttr, PerfRing, perf_event_enable, perf_event_open, perf_event_set_bpf, perf_event_set_filter,
};

pub const SAMPLE_IP: u64 = 1 << 0;
pub const SAMPLE_TID: u64 = 1 << 1;
pub const SAMPLE_TIME: u64 = 1 << 2;
pub const SAMPLE_CPU: u64 = 1 << 7;
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
pub const SAMPLE_STACK_USER: u64 = 1 << 13;

/// The user registers sampled: x86-64's BP, SP and IP (perf register numbers 6, 7, 8),
/// which the unwinder starts from. Other architectures get the kernel's callchain only.
#[cfg(target_arch = "x86_64")]
pub const REGS_USER_MASK: u64 = (1 << 6) | (1 << 7) | (1 << 8);
#[cfg(not(target_arch = "x86_64"))]
pub const REGS_USER_MASK: u64 = 0;

/// Bytes of user stack copied with each sample: enough for the frames of a CPython
/// start (its deepest C stacks during imports stay well within it).
pub const DEFAULT_STACK_BYTES: u32 = 16 * 1024;

/// The default sampling rate, per CPU.
pub const DEFAULT_HZ: u32 = 1000;

/// The default rate when every task of every CPU is sampled (`--system`, a boot): the
/// samples of a 2-CPU boot at 1 kHz, each with its copy of user stack, spooled 20 MiB
/// per second (708 MiB in a 35 s boot, a third of a 2 GiB guest's /run); at 100 Hz a busy
/// 2-CPU machine spools about 3.3 MB/s of them.
pub const SYSTEM_DEFAULT_HZ: u32 = 100;

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_COUNT_SW_CPU_CLOCK: u64 = 0;
const CLOCK_BOOTTIME: i32 = 7;
/// The tracepoint PMU refuses clocks that are not NMI-safe (EINVAL for CLOCK_BOOTTIME, on
/// Linux 6.18 as on older kernels): its samples are timed on CLOCK_MONOTONIC, which the
/// assembly turns into boot time with the offset measured at the start.
pub const CLOCK_MONOTONIC: i32 = 1;

mod flag {
    pub const DISABLED: u64 = 1 << 0;
    pub const INHERIT: u64 = 1 << 1;
    pub const EXCLUDE_IDLE: u64 = 1 << 7;
    pub const MMAP: u64 = 1 << 8;
    pub const COMM: u64 = 1 << 9;
    pub const TASK: u64 = 1 << 13;
    pub const WATERMARK: u64 = 1 << 14;
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    pub const MMAP2: u64 = 1 << 23;
    pub const COMM_EXEC: u64 = 1 << 24;
    pub const USE_CLOCKID: u64 = 1 << 25;
    pub const BUILD_ID: u64 = 1 << 34;
}

/// What the assembly needs to decode the spool's perf files (`perf.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PerfSetup {
    pub sample_type: u64,
    pub regs_user_mask: u64,
    pub stack_bytes: u32,
    pub hz: u32,
    /// Events followed the command's tree (`inherit`) rather than watching whole CPUs.
    pub per_task: bool,
    pub cpus: Vec<u16>,
    /// The off-CPU stacks' event, when it was opened (streams `perf-offcpu-cpuN.raw`).
    #[serde(default)]
    pub off_cpu: Option<OffCpuSetup>,
    /// The sample type of the events that take the samples of programs with trustworthy
    /// frame pointers without a stack copy, when they were opened (`perf-fp-cpuN.raw`).
    #[serde(default)]
    pub frame_pointer_sample_type: Option<u64>,
}

/// The spool file of one CPU's samples taken without a stack copy.
pub fn frame_pointer_file(cpu: u16) -> String {
    format!("perf-fp-cpu{cpu}.raw")
}

/// The perf-event programs that split a command's threads between the sampling events.
pub struct SampleFilters {
    /// Keeps the samples that copy the user stack (threads not marked).
    pub copy: OwnedFd,
    /// Keeps the samples of threads marked as having frame pointers, when it loaded.
    pub frame_pointers: Option<OwnedFd>,
}

/// How the off-CPU stacks were taken.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct OffCpuSetup {
    pub sample_type: u64,
    /// The clock of the samples' times (`CLOCK_MONOTONIC`).
    pub clockid: i32,
    /// The tracepoint filter the kernel accepted, if any: without one, preemptions are
    /// sampled too (the assembly keeps the switches that begin a sleep either way).
    pub filter: Option<String>,
    /// Taken by the eBPF program with this filter (`offcpu.raw` and `offcpu-stacks.raw`)
    /// instead of the perf events' streams.
    #[serde(default)]
    pub kernel_filter: Option<KernelFilter>,
}

/// The spool file of one CPU's off-CPU stacks.
pub fn off_cpu_file(cpu: u16) -> String {
    format!("perf-offcpu-cpu{cpu}.raw")
}

/// The filters tried, in order, on the off-CPU event: a switch to sleep (S, D, or both
/// with other bits, never the preemption marker, `TASK_REPORT_MAX` = 0x100 since Linux
/// 4.14), then any switch that is not runnable.
const OFF_CPU_FILTERS: &[&str] = &["prev_state & 3", "prev_state != 0"];

/// What to sample.
#[derive(Clone, Copy, Debug)]
pub struct PerfOptions {
    pub hz: u32,
    pub stack_bytes: u32,
    /// Also take the kernel stack of each recorded thread that goes to sleep.
    pub off_cpu: bool,
    /// Sample the programs that earlier recordings found to have trustworthy frame
    /// pointers without a stack copy (`crate::frame_pointers`).
    pub frame_pointers: bool,
    /// Off-CPU stacks of sleeps shorter than this are not kept (when the eBPF program
    /// takes them: a command's tree).
    pub off_cpu_min_ns: u64,
}

impl Default for PerfOptions {
    fn default() -> PerfOptions {
        PerfOptions {
            hz: DEFAULT_HZ,
            stack_bytes: DEFAULT_STACK_BYTES,
            off_cpu: true,
            frame_pointers: true,
            off_cpu_min_ns: crate::capture::off_cpu::DEFAULT_MIN_NS,
        }
    }
}

struct Source {
    fd: OwnedFd,
    hung_up: bool,
    ring: PerfRing,
    out: File,
    out_path: PathBuf,
}

/// The opened events, enabled, ready for [`PerfCapture::run`].
pub struct PerfCapture {
    sources: Vec<Source>,
    /// Why the off-CPU stacks are not recorded, when they were asked for and are not.
    pub off_cpu_refused: Option<String>,
    /// Why the off-CPU stacks are taken by the perf event rather than the eBPF program.
    pub off_cpu_fallback: Option<String>,
    /// The eBPF program that takes the off-CPU stacks, and the spool file of their frames.
    probe: Option<(OffCpuProbe, File)>,
    /// Bytes of records the spool may take: half the free space of its filesystem when the
    /// sampling began. A boot's spool lives in /run, a tmpfs of a tenth of the memory, and
    /// 1 kHz samples with 16 KiB of user stack each filled it in a 35 s boot.
    budget: u64,
}

/// What [`PerfCapture::run`] copied, and whether it stopped the events at the budget.
#[derive(Clone, Copy, Debug)]
pub struct PerfCopied {
    pub bytes: u64,
    pub budget: u64,
    /// Whether the events were turned off before the end because the budget was spent.
    pub stopped_early: bool,
    /// What the eBPF program kept and lost, when it took the off-CPU stacks.
    pub off_cpu: Option<OffCpuCounts>,
}

/// At least this much is allowed whatever the filesystem says (its free space may be
/// unknown).
const MIN_BUDGET: u64 = 16 << 20;

fn spool_budget(dir: &Path) -> u64 {
    nix::sys::statvfs::statvfs(dir)
        .map(|v| v.blocks_available().saturating_mul(v.fragment_size()) / 2)
        .unwrap_or(u64::MAX)
        .max(MIN_BUDGET)
}

/// Pages of records per CPU for the off-CPU stacks: 1 MiB, some 3,000 kernel chains.
const OFF_CPU_DATA_PAGES: usize = 256;

fn off_cpu_attr(sched_switch_id: u64, per_task: bool, data_bytes: usize) -> PerfEventAttr {
    let mut flags = flag::DISABLED | flag::EXCLUDE_CALLCHAIN_USER | flag::WATERMARK | flag::USE_CLOCKID;
    if per_task {
        flags |= flag::INHERIT;
    }
    PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: sched_switch_id,
        sample_period_or_freq: 1,
        sample_type: SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN,
        flags,
        wakeup_events_or_watermark: (data_bytes / 2) as u32,
        clockid: CLOCK_MONOTONIC,
        ..PerfEventAttr::default()
    }
}

fn page_size() -> usize {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE).ok().flatten().map_or(4096, |p| p as usize)
}

/// The tracepoint id of `sched:sched_switch` under the tracefs at `tracefs`.
fn sched_switch_id(tracefs: &Path) -> Result<u64> {
    let path = tracefs.join("events/sched/sched_switch/id");
    let text = crate::tracefs::read_text(&path).at(&path)?;
    text.trim()
        .parse()
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not a number"))
        .at(&path)
}

/// Opens the off-CPU event of each CPU on `pid` (`None`: every task), with the first
/// filter the kernel takes.
fn open_off_cpu(
    spool: &Spool,
    pid: Option<i32>,
    cpus: &[u16],
    tracefs: &Path,
) -> Result<(Vec<Source>, OffCpuSetup)> {
    let page_size = page_size();
    let attr = off_cpu_attr(sched_switch_id(tracefs)?, pid.is_some(), OFF_CPU_DATA_PAGES * page_size);
    let mut sources = Vec::new();
    let mut filter: Option<Option<&str>> = None;
    for &cpu in cpus {
        let fd = perf_event_open(&attr, pid.unwrap_or(-1), i32::from(cpu))
            .at("perf_event_open sched:sched_switch")?;
        let chosen = match filter {
            Some(chosen) => {
                if let Some(f) = chosen {
                    perf_event_set_filter(&fd, f).at("perf filter on sched:sched_switch")?;
                }
                chosen
            }
            None => OFF_CPU_FILTERS.iter().copied().find(|f| perf_event_set_filter(&fd, f).is_ok()),
        };
        filter = Some(chosen);
        sources.push(source(spool, fd, &off_cpu_file(cpu), OFF_CPU_DATA_PAGES, page_size)?);
    }
    let setup = OffCpuSetup {
        sample_type: attr.sample_type,
        clockid: attr.clockid,
        filter: filter.flatten().map(str::to_owned),
        kernel_filter: None,
    };
    Ok((sources, setup))
}

/// Pages of records per CPU: 2 MiB, about 120 samples with their stacks, so a reader
/// woken at half has some 60 ms to come.
const DATA_PAGES: usize = 512;

fn attr(options: PerfOptions, per_task: bool, data_bytes: usize) -> PerfEventAttr {
    let mut sample_type = SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN;
    if REGS_USER_MASK != 0 {
        sample_type |= SAMPLE_REGS_USER | SAMPLE_STACK_USER;
    }
    let mut flags = flag::DISABLED
        | flag::EXCLUDE_IDLE
        | flag::MMAP
        | flag::COMM
        | flag::TASK
        | flag::WATERMARK
        | flag::SAMPLE_ID_ALL
        | flag::MMAP2
        | flag::COMM_EXEC
        | flag::USE_CLOCKID
        | flag::BUILD_ID;
    if per_task {
        flags |= flag::INHERIT;
    }
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: PERF_COUNT_SW_CPU_CLOCK,
        sample_period_or_freq: 1_000_000_000 / u64::from(options.hz.max(1)),
        sample_type,
        flags,
        wakeup_events_or_watermark: (data_bytes / 2) as u32,
        sample_regs_user: REGS_USER_MASK,
        sample_stack_user: if REGS_USER_MASK != 0 { options.stack_bytes & !7 } else { 0 },
        clockid: CLOCK_BOOTTIME,
        ..PerfEventAttr::default()
    }
}

/// Pages of records per CPU for the samples without a stack copy: 256 KiB, some 2,000
/// samples with their callchains.
const FP_DATA_PAGES: usize = 64;

/// The sampling event of `attr` without the user registers and stack copy, and without the
/// mmap, comm and task records (the copying event gives those).
fn frame_pointer_attr(attr: &PerfEventAttr, data_bytes: usize) -> PerfEventAttr {
    PerfEventAttr {
        sample_type: attr.sample_type & !(SAMPLE_REGS_USER | SAMPLE_STACK_USER),
        sample_regs_user: 0,
        sample_stack_user: 0,
        flags: attr.flags
            & !(flag::MMAP | flag::MMAP2 | flag::COMM | flag::COMM_EXEC | flag::TASK | flag::BUILD_ID),
        wakeup_events_or_watermark: (data_bytes / 2) as u32,
        ..*attr
    }
}

/// Opens the sampling event of one CPU (on `pid`'s tree, or every task).
fn open_sampling(attr: &mut PerfEventAttr, pid: Option<i32>, cpu: u16) -> Result<OwnedFd> {
    perf_event_open(attr, pid.unwrap_or(-1), i32::from(cpu))
        .or_else(|e| {
            // Kernels before 5.12 refuse build ids in mmap records; the files give them.
            if e.raw_os_error() == Some(nix::libc::EINVAL) && attr.flags & flag::BUILD_ID != 0 {
                attr.flags &= !flag::BUILD_ID;
                perf_event_open(attr, pid.unwrap_or(-1), i32::from(cpu))
            } else {
                Err(e)
            }
        })
        .at("perf_event_open")
}

/// An opened event's ring, copied to the spool file `name`.
fn source(spool: &Spool, fd: OwnedFd, name: &str, pages: usize, page_size: usize) -> Result<Source> {
    let ring = PerfRing::map(&fd, pages, page_size).at("mmap of the perf ring buffer")?;
    let out = spool.create_file(name)?;
    Ok(Source { fd, hung_up: false, ring, out, out_path: spool.path(name) })
}

impl PerfCapture {
    /// Opens one event per CPU on `pid` (`None`: every task), maps their rings and
    /// creates their spool files; an error says why sampling is unavailable. The off-CPU
    /// events (`options.off_cpu`) are looked up in the tracefs at `tracefs`; when they
    /// cannot be opened the CPU samples are taken all the same, and `off_cpu_refused` says why.
    /// With `filters` (perf-event programs that keep the samples of `pid`'s tree, see
    /// `ScopeMap::sample_filter`), the sampling events watch whole CPUs instead of following
    /// the tree, so that its context switches do not stop and restart them; with a
    /// frame-pointer filter, a second event per CPU takes the samples of the threads
    /// marked as having frame pointers, without a stack copy. `probe` is the eBPF program
    /// that takes the off-CPU stacks instead of the perf event, or why it could not start.
    pub fn open(
        spool: &Spool,
        pid: Option<i32>,
        cpus: &[u16],
        options: PerfOptions,
        tracefs: &Path,
        filters: Option<&SampleFilters>,
        probe: Option<Result<OffCpuProbe>>,
    ) -> Result<PerfCapture> {
        let page_size = page_size();
        let filters = filters.filter(|_| pid.is_some());
        let sampled = if filters.is_some() { None } else { pid };
        let per_task = sampled.is_some();
        let mut attr = attr(options, per_task, DATA_PAGES * page_size);
        let mut sources = Vec::new();
        for &cpu in cpus {
            let fd = open_sampling(&mut attr, sampled, cpu)?;
            if let Some(f) = filters {
                perf_event_set_bpf(&fd, &f.copy).at("attaching the scope filter to the perf event")?;
            }
            sources.push(source(spool, fd, &format!("perf-cpu{cpu}.raw"), DATA_PAGES, page_size)?);
        }
        let frame_pointer_sample_type = match filters.and_then(|f| f.frame_pointers.as_ref()) {
            Some(prog) => {
                let fp_attr = frame_pointer_attr(&attr, FP_DATA_PAGES * page_size);
                for &cpu in cpus {
                    let fd = perf_event_open(&fp_attr, -1, i32::from(cpu)).at("perf_event_open")?;
                    perf_event_set_bpf(&fd, prog)
                        .at("attaching the frame-pointer filter to the perf event")?;
                    sources.push(source(spool, fd, &frame_pointer_file(cpu), FP_DATA_PAGES, page_size)?);
                }
                Some(fp_attr.sample_type)
            }
            None => None,
        };
        let mut off_cpu_refused = None;
        let mut off_cpu_fallback = None;
        let mut kept_probe = None;
        let off_cpu = match (options.off_cpu, probe) {
            (false, _) => None,
            (true, Some(Ok(mut probe))) => {
                probe.write_to(spool.create_file(off_cpu::SPOOL_FILE)?, spool.path(off_cpu::SPOOL_FILE));
                let setup = OffCpuSetup {
                    sample_type: 0,
                    clockid: CLOCK_BOOTTIME,
                    filter: None,
                    kernel_filter: Some(probe.filter()),
                };
                kept_probe = Some((probe, spool.create_file(off_cpu::STACKS_FILE)?));
                Some(setup)
            }
            (true, refused) => {
                off_cpu_fallback = refused.and_then(|r| r.err()).map(|e| coldstart_trace::error_chain(&e));
                match open_off_cpu(spool, pid, cpus, tracefs) {
                    Ok((more, setup)) => {
                        sources.extend(more);
                        Some(setup)
                    }
                    Err(e) => {
                        off_cpu_refused = Some(coldstart_trace::error_chain(&e));
                        None
                    }
                }
            }
        };
        spool.write_json(
            "perf.json",
            &PerfSetup {
                sample_type: attr.sample_type,
                regs_user_mask: attr.sample_regs_user,
                stack_bytes: attr.sample_stack_user,
                hz: options.hz,
                per_task,
                cpus: cpus.to_vec(),
                off_cpu,
                frame_pointer_sample_type,
            },
        )?;
        for s in &sources {
            perf_event_enable(&s.fd, true).at("perf enable")?;
        }
        let budget = spool_budget(&spool.path(""));
        Ok(PerfCapture { sources, off_cpu_refused, off_cpu_fallback, probe: kept_probe, budget })
    }

    /// Copies the rings into the spool until `stop` fires, then turns the events off and
    /// copies what is left. Sleeps in poll(2) until a ring is half full, and copies every
    /// ring at least once a second. Once the budget is spent the events are turned off early.
    pub fn run(mut self, stop: Arc<Stop>) -> Result<PerfCopied> {
        let mut bytes = 0;
        let mut stopped_early = false;
        // The eBPF ring buffer is never woken for: read 10 times a second.
        let timeout_ms: u16 = if self.probe.is_some() { 100 } else { 1000 };
        loop {
            let (ready, stopped, hung_up) = {
                // A ring whose tasks have all exited polls as hung up from then on: it is drained
                // once more and left out of the poll, which would otherwise never sleep again.
                let watched: Vec<usize> =
                    (0..self.sources.len()).filter(|&i| !self.sources[i].hung_up).collect();
                let mut fds: Vec<PollFd> = watched
                    .iter()
                    .map(|&i| PollFd::new(self.sources[i].fd.as_fd(), PollFlags::POLLIN))
                    .collect();
                fds.push(PollFd::new(stop.fd(), PollFlags::POLLIN));
                let n = match poll(&mut fds, PollTimeout::from(timeout_ms)) {
                    Ok(n) => n,
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(e) => return Err(std::io::Error::from(e)).at("poll"),
                };
                let is_ready = |f: &PollFd| f.revents().is_some_and(|r| !r.is_empty());
                let mut ready = vec![false; self.sources.len()];
                let mut hung_up = Vec::new();
                for (f, &i) in fds.iter().zip(&watched) {
                    ready[i] = n == 0 || is_ready(f);
                    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
                    if f.revents().is_some_and(|r| r.intersects(gone)) {
                        hung_up.push(i);
                    }
                }
                (ready, fds.last().is_some_and(is_ready), hung_up)
            };
            for i in hung_up {
                self.sources[i].hung_up = true;
            }
            if stopped {
                for s in &self.sources {
                    let _ = perf_event_enable(&s.fd, false);
                }
            }
            if let Some((probe, _)) = &mut self.probe {
                probe.drain()?;
            }
            for (s, ready) in self.sources.iter_mut().zip(ready) {
                if ready || stopped {
                    let Source { ring, out, out_path, .. } = s;
                    bytes += ring.drain(|chunk| out.write_all(chunk)).at(&*out_path)?;
                }
            }
            if stopped {
                break;
            }
            if bytes > self.budget && !stopped_early {
                for s in &self.sources {
                    let _ = perf_event_enable(&s.fd, false);
                }
                stopped_early = true;
            }
        }
        for s in &mut self.sources {
            s.out.flush().at(&s.out_path)?;
        }
        let off_cpu = match self.probe.take() {
            Some((probe, stacks_out)) => {
                let end_ns = u64::try_from(crate::capture::boottime_ns()).unwrap_or(0);
                Some(probe.finish(end_ns, stacks_out)?)
            }
            None => None,
        };
        Ok(PerfCopied { bytes, budget: self.budget, stopped_early, off_cpu })
    }
}
