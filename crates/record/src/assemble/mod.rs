//! Assembles a [`Trace`] from a spool. A normal recording and `coldstart recover` run
//! this same code; a spool without `end.json` (the recorder was killed) gives a
//! trace with `meta.partial = true`, ending at the last thing the spool holds.
//!
//! [`assemble_with`] is a pipeline of named steps over the decoded spool; what it
//! reads from the machine (mounts, disks, host, FIEMAP, page-cache residency, the walk that names inodes,
//! /proc facts about tasks outside the tree) comes through a [`SystemView`].

mod block;
pub mod debuginfod;
mod decode;
mod disks;
pub mod fiemap;
mod files;
mod marks;
mod pages;
mod perf;
mod procs;
mod remarks;
mod resident;
mod samples;
mod sched;
mod stacks;
mod syscalls;
mod system_view;

use std::collections::{HashMap, HashSet};

use coldstart_trace::*;

use crate::error::Result;
use crate::ftrace::events::Event;
use crate::spool::Spool;
use decode::SpoolData;
use files::FileTable;
use procs::ProcTree;

pub use block::op_of;
pub use disks::CrossCheck;
pub use fiemap::RawExtent;
pub use pages::Usage;
pub use procs::exit_status;
pub use system_view::{DirEntry, EntryStat, LiveSystem, SystemView};

/// The figures `coldstart record` prints when it is done.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub duration_ns: Nanos,
    pub processes: usize,
    pub files: usize,
    pub page_fill_bytes: u64,
    pub unresolved_files: u64,
    /// Bytes per page of the recording's machine.
    pub page_size: u64,
    /// Rows of the `page_access` table (after merging).
    pub access_rows: usize,
    /// Accessed pages, fills read ahead and never accessed: see [`Usage`].
    pub usage: Usage,
    /// Losses with a non-zero count.
    pub lost: Vec<Loss>,
    pub cross_checks: Vec<CrossCheck>,
}

pub struct Assembled {
    pub trace: Trace,
    pub summary: Summary,
    /// Per executable, how its frame-pointer chains compared with DWARF unwinding.
    pub frame_pointer_checks: std::collections::BTreeMap<String, crate::frame_pointers::Check>,
}

/// The recording's time frame: converts the spool's clocks to trace time
/// (nanoseconds since t = 0).
pub(crate) struct Clock {
    t0_boot_ns: i64,
    boottime_offset_ns: i64,
    /// CLOCK_BOOTTIME at the end of the recording.
    end_boot_ns: i64,
    duration: Nanos,
}

impl Clock {
    fn of(data: &SpoolData) -> Clock {
        let t0_boot_ns = data.start.t0_boot_ns;
        let end_boot_ns = data.end_boot_ns();
        Clock {
            t0_boot_ns,
            boottime_offset_ns: data.start.boottime_offset_ns,
            end_boot_ns,
            duration: (end_boot_ns - t0_boot_ns).max(0),
        }
    }

    /// A tracefs timestamp (`trace_clock=boot`).
    pub(crate) fn boot(&self, ts: u64) -> Nanos {
        ts as i64 - self.t0_boot_ns
    }

    /// A CLOCK_BOOTTIME reading.
    pub(crate) fn since_t0(&self, boot_ns: i64) -> Nanos {
        boot_ns - self.t0_boot_ns
    }

    /// A CLOCK_MONOTONIC reading (the proc connector's).
    fn mono(&self, mono_ns: i64) -> Nanos {
        mono_ns + self.boottime_offset_ns - self.t0_boot_ns
    }

    pub(crate) fn contains(&self, t: Nanos) -> bool {
        (0..=self.duration).contains(&t)
    }
}

/// Decodes the whole spool into a trace, reading the live system.
pub fn assemble(spool: &Spool) -> Result<Assembled> {
    assemble_with(spool, &LiveSystem)
}

/// Decodes the whole spool into a trace, reading the machine through `system`.
pub fn assemble_with(spool: &Spool, system: &dyn SystemView) -> Result<Assembled> {
    let data = SpoolData::read(spool)?;
    let host = system.host();
    let page_size = u64::from(host.page_size);
    let clock = Clock::of(&data);
    let mut tree = process_tree(&data, &clock, system);
    let fp = files_and_pages(&data, &clock, &mut tree, system, page_size);
    let block::Requests { rows: block_ios, requeues } =
        block_requests(&data, &clock, &tree, &fp.extents, system);
    let (sched, wakeups, wakers_gone) = scheduling(&data, &clock, &mut tree, system);
    let marks = marks::marks(&data, &clock, &tree, system);
    let units = marks::units(&data, &clock);
    let disk_devs = disks::devices(&block_ios, &fp.files.files, system);
    let disks = disks::disks(&disk_devs, &data, &block_ios, &clock, system);
    let rates = rates(&data, &clock, &tree, disk_devs, system, page_size);
    let mut losses = losses(&data, &fp, &tree);
    let mut notes = notes(&data, spool, &fp, requeues);
    let mut stack_tables = stack_tables(&data, &clock, &tree, system);
    let frame_pointer_checks = std::mem::take(&mut stack_tables.frame_pointer_checks);
    losses.extend(stack_tables.losses);
    notes.extend(stack_tables.notes.into_iter().map(|text| Note { source: NoteSource::Record, text }));
    notes.extend(wakers_gone_note(wakers_gone));
    let meta = meta(&data, &clock, host, &tree);
    let mut processes = tree.processes;
    processes.sort_by_key(|p| (p.start_ns.unwrap_or(i64::MIN), p.pid));
    let summary = summary(&clock, &processes, &fp, page_size, &losses, disks.cross_checks);
    let trace = Trace {
        meta,
        disks: disks.rows,
        losses,
        notes,
        processes,
        execs: tree.execs,
        threads: tree.threads,
        files: fp.files.files,
        extents: fp.extents,
        file_opens: fp.file_opens,
        page_fills: fp.page_fills,
        page_accesses: fp.page_accesses,
        page_residents: fp.page_residents,
        block_ios,
        sched,
        wakeups,
        marks,
        cpu_samples: rates.cpu,
        disk_samples: rates.disks,
        process_samples: rates.procs,
        mappings: stack_tables.mappings,
        frames: stack_tables.frames,
        stacks: stack_tables.stacks,
        stack_samples: stack_tables.samples,
        off_cpu_samples: stack_tables.off_cpu_samples,
        mounts: mounts(system),
        syscalls: fp.syscalls,
        units,
    };
    Ok(Assembled { trace, summary, frame_pointer_checks })
}

/// The recorded processes from the spool's proc records, named from /proc where they
/// still run.
fn process_tree(data: &SpoolData, clock: &Clock, system: &dyn SystemView) -> ProcTree {
    let start = &data.start;
    let mut tree = ProcTree::from_records(
        &data.procs,
        &data.scope.events,
        start.root_pid,
        &start.also_threads,
        start.system,
        |t| clock.mono(t),
        |ts| clock.boot(ts),
    );
    tree.name_from_proc(system);
    tree
}

/// The CPU, disk and process rates of the periodic samples.
fn rates(
    data: &SpoolData,
    clock: &Clock,
    tree: &ProcTree,
    disk_devs: Vec<Dev>,
    system: &dyn SystemView,
    page_size: u64,
) -> samples::Rates {
    let started: HashSet<i32> =
        tree.processes.iter().filter(|p| p.start_ns.is_some()).map(|p| p.pid).collect();
    samples::rates(
        &data.samples,
        |t| clock.since_t0(t),
        &disk_devs.into_iter().collect(),
        &started,
        page_size,
        system.clock_ticks_per_second(),
    )
}

/// What the recording lost, before the stack tables' losses.
fn losses(data: &SpoolData, fp: &FilesAndPages, tree: &ProcTree) -> Vec<Loss> {
    let mut losses = remarks::losses(data, &fp.files, tree, fp.fiemap_failed);
    if !data.path_names.is_empty() || fp.syscall_counts.0 > 0 {
        losses.push(Loss {
            source: LossSource::Bpf,
            what: "path names unreadable at the call (their page was not in memory)".into(),
            count: fp.syscall_counts.0,
        });
    }
    losses
}

/// The trace's notes, before the stack tables' notes.
fn notes(data: &SpoolData, spool: &Spool, fp: &FilesAndPages, requeues: u64) -> Vec<Note> {
    let mut notes = remarks::notes(data, spool, fp, requeues);
    if fp.syscall_counts.1 > 0 {
        notes.push(Note {
            source: NoteSource::Files,
            text: format!(
                "{} files fanotify did not see (FUSE, network filesystems) were named by the path of the \
                 system call that opened them",
                fp.syscall_counts.1
            ),
        });
    }
    notes
}

/// The note on wakers that exited before the assembly could name them, if any did.
fn wakers_gone_note(wakers_gone: u64) -> Option<Note> {
    (wakers_gone > 0).then(|| Note {
        source: NoteSource::Record,
        text: format!(
            "{wakers_gone} threads outside the recorded scope that woke recorded threads had exited before the \
             trace was assembled: reports name them by thread id only (exited)"
        ),
    })
}

/// The stack tables of the perf capture, if the recording had one.
fn stack_tables(
    data: &SpoolData,
    clock: &Clock,
    tree: &ProcTree,
    system: &dyn SystemView,
) -> stacks::StackTables {
    let Some((setup, streams)) = data.perf.as_ref() else {
        return stacks::StackTables::default();
    };
    let mut decoded = perf::PerfData::default();
    for (i, bytes) in streams.iter().enumerate() {
        decoded.decode(i, bytes, setup);
    }
    if let Some(sample_type) = setup.frame_pointer_sample_type {
        let fp_setup = crate::capture::perf::PerfSetup { sample_type, regs_user_mask: 0, ..setup.clone() };
        // Their streams' numbers follow the copying streams'; they hold no stack bytes.
        for (i, bytes) in data.frame_pointer_streams.iter().enumerate() {
            decoded.decode(streams.len() + i, bytes, &fp_setup);
        }
    }
    let off_cpu = setup.off_cpu.as_ref().map(|off| off_cpu_samples(data, setup, off, clock));
    stacks::stack_tables(
        &decoded,
        off_cpu.as_ref(),
        setup.stack_bytes as usize,
        streams,
        |pid| tree.system_wide || tree.in_scope.contains(&pid),
        |pid| !setup.per_task && tree.processes.iter().any(|p| p.pid == pid && p.start_ns.is_none()),
        |t| clock.boot(t),
        system,
    )
}

/// The off-CPU samples decoded, their times on the boot clock.
fn off_cpu_samples(
    data: &SpoolData,
    setup: &crate::capture::perf::PerfSetup,
    off: &crate::capture::perf::OffCpuSetup,
    clock: &Clock,
) -> perf::PerfData {
    let off_setup = crate::capture::perf::PerfSetup {
        sample_type: off.sample_type,
        regs_user_mask: 0,
        stack_bytes: 0,
        ..setup.clone()
    };
    if off.kernel_filter.is_some() {
        let [records, stacks] = [0, 1].map(|i| data.off_cpu.get(i).map_or(&[][..], Vec::as_slice));
        return kernel_filtered_off_cpu(records, stacks);
    }
    let mut decoded = perf::PerfData::default();
    for (i, bytes) in data.off_cpu.iter().enumerate() {
        decoded.decode(i, bytes, &off_setup);
    }
    if off.clockid == crate::capture::perf::CLOCK_MONOTONIC {
        for s in &mut decoded.samples {
            s.time = s.time.saturating_add_signed(clock.boottime_offset_ns);
        }
    }
    decoded
}

/// The sleeps the eBPF program kept, as samples with their kernel stacks (already on the
/// boot clock); a sleep whose stack was not taken has none.
fn kernel_filtered_off_cpu(records: &[u8], stacks: &[u8]) -> perf::PerfData {
    let stacks: HashMap<u32, Vec<u64>> = crate::capture::off_cpu::decode_stacks(stacks).into_iter().collect();
    let samples = crate::capture::off_cpu::decode_all(records)
        .into_iter()
        .map(|r| perf::RawSample {
            time: r.off_ns,
            pid: r.pid,
            tid: r.tid,
            kernel: r.stack_id.and_then(|id| stacks.get(&id)).cloned().unwrap_or_default(),
            ..perf::RawSample::default()
        })
        .collect();
    perf::PerfData { samples, ..perf::PerfData::default() }
}

/// The figures `coldstart record` prints.
fn summary(
    clock: &Clock,
    processes: &[Process],
    fp: &FilesAndPages,
    page_size: u64,
    losses: &[Loss],
    cross_checks: Vec<CrossCheck>,
) -> Summary {
    Summary {
        duration_ns: clock.duration,
        processes: processes.len(),
        files: fp.filled_files,
        page_fill_bytes: fp.page_fills.iter().map(|p| u64::from(p.pages) * page_size).sum(),
        unresolved_files: fp.files.unresolved,
        page_size,
        access_rows: fp.page_accesses.len(),
        usage: pages::usage(&fp.page_fills, &fp.page_accesses),
        lost: losses.iter().filter(|l| l.count > 0).cloned().collect(),
        cross_checks,
    }
}

/// The machine's mounts, for naming the files' filesystems.
fn mounts(system: &dyn SystemView) -> Vec<Mount> {
    system
        .mounts()
        .iter()
        .map(|m| Mount {
            dev: m.dev,
            point: m.mount_point.to_string_lossy().into_owned(),
            fstype: m.fstype.clone(),
        })
        .collect()
}

/// The file table with everything that names its files: page fills and accesses,
/// opens, and the extents of the files read or used.
pub(crate) struct FilesAndPages {
    files: FileTable,
    page_fills: Vec<PageFill>,
    page_accesses: Vec<PageAccess>,
    /// Unfilled pages of the fault-around windows found cached (`resident.rs`).
    page_residents: Vec<PageResident>,
    /// Files whose cached pages could not be asked (replaced or gone since).
    residency_unknown: u64,
    file_opens: Vec<FileOpen>,
    extents: Vec<Extent>,
    /// Files with page fills.
    filled_files: usize,
    /// Page-access events kept, before merging into rows.
    raw_access_count: usize,
    /// Accesses to files of memory filesystems, never filled from a disk.
    accesses_left_out: u64,
    fiemap_failed: u64,
    deleted: u64,
    syscalls: Vec<Syscall>,
    /// Path calls whose name the eBPF program could not read; files named by their open.
    syscall_counts: (u64, u64),
}

/// File ids are given in the order files are met (fills and accesses, then opens),
/// so the steps run in that order.
fn files_and_pages(
    data: &SpoolData,
    clock: &Clock,
    tree: &mut ProcTree,
    system: &dyn SystemView,
    page_size: u64,
) -> FilesAndPages {
    let system_wide = data.start.system;
    let mut files = FileTable::new(&data.opens);
    let keep = |tid: i32, t: Nanos, tree: &ProcTree| {
        clock.contains(t) && (system_wide || tree.in_scope.contains(&tree.tgid(tid)))
    };
    let collected =
        pages::collect(&data.scope.events, |ts| clock.boot(ts), keep, tree, &mut files, page_size, system);
    let syscall_inputs = syscalls::Inputs {
        events: &data.scope.events,
        names: &data.path_names,
        opens: &data.opens,
        tree,
        cwd: data.start.cwd.as_deref(),
        end: clock.duration,
        only_slow_calls: data.slow_calls > 0,
    };
    let in_scope =
        |tid: i32, t: Nanos| clock.contains(t) && (system_wide || tree.in_scope.contains(&tree.tgid(tid)));
    let collected_calls = syscalls::collect(&syscall_inputs, in_scope, |ts| clock.boot(ts), &mut files);
    files.resolve_by_walk(&system.mounts(), system);
    let named_by_open = files.name_by_opens(&collected_calls.proposed_names, system);
    let syscall_counts = (collected_calls.unnamed, named_by_open);
    let syscalls = syscalls::finish(collected_calls, &files);
    let raw_access_count = collected.accesses.len();
    let accesses_left_out = collected.left_out;
    let (page_fills, page_accesses) = pages::finish(collected, &files, page_size);
    let filled: HashSet<u32> = page_fills.iter().map(|p| p.file_id).collect();
    let file_opens: Vec<FileOpen> = data
        .opens
        .iter()
        .filter(|o| system_wide || tree.in_scope.contains(&o.pid))
        .map(|o| FileOpen {
            t_ns: clock.since_t0(o.t),
            pid: o.pid,
            file_id: files.for_open(o.dev, o.ino),
            exec: o.exec,
        })
        .filter(|o| clock.contains(o.t_ns))
        .collect();
    let mut read_or_used = filled.clone();
    read_or_used.extend(page_accesses.iter().map(|a| a.file_id));
    let (extents, fiemap_failed, deleted) = files.extents(&read_or_used, system);
    let (page_residents, residency_unknown) =
        resident::resident_pages(&files.files, &page_fills, &page_accesses, system, page_size);
    FilesAndPages {
        files,
        page_fills,
        page_accesses,
        page_residents,
        residency_unknown,
        file_opens,
        extents,
        filled_files: filled.len(),
        raw_access_count,
        accesses_left_out,
        fiemap_failed,
        deleted,
        syscalls,
        syscall_counts,
    }
}

/// Block requests paired, each placed in a file through the extents. Issuers outside
/// the recorded tree (other programs' threads) are named by their process where /proc
/// still knows them (and they had started by the end), once per task.
fn block_requests(
    data: &SpoolData,
    clock: &Clock,
    tree: &ProcTree,
    extents: &[Extent],
    system: &dyn SystemView,
) -> block::Requests {
    let events: Vec<_> = data.block.events.iter().filter(|e| clock.boot(e.ts) >= 0).cloned().collect();
    let outside: HashMap<i32, i32> = events
        .iter()
        .filter_map(|e| match e.event {
            Event::BlockIssue { tid, .. } | Event::BlockStart { tid, .. }
                if tid > 0 && !tree.pid_of.contains_key(&tid) =>
            {
                Some(tid)
            }
            _ => None,
        })
        .collect::<HashSet<i32>>()
        .into_iter()
        .filter_map(|tid| {
            procs::tgid_of_task_started_by(system, tid, clock.end_boot_ns).map(|pid| (tid, pid))
        })
        .collect();
    block::requests(
        &events,
        |ts| clock.boot(ts),
        |tid| outside.get(&tid).copied().unwrap_or_else(|| tree.tgid(tid)),
        &block::ExtentIndex::new(extents),
    )
}

/// Scheduler intervals and wakeups of the tasks in scope; in system mode every task
/// that ran gets a thread (and a process) row. A task outside the scope that woke one in
/// it gets rows out of scope, so the critical path names what it waited on; the count
/// returned is of those wakers already gone, known only by their thread id.
fn scheduling(
    data: &SpoolData,
    clock: &Clock,
    tree: &mut ProcTree,
    system: &dyn SystemView,
) -> (Vec<SchedInterval>, Vec<Wakeup>, u64) {
    let system_wide = data.start.system;
    let states = sched::StateMap::new(&data.formats.decoder.state_bits);
    let in_scope = |tid: i32| system_wide || tree.in_scope.contains(&tree.tgid(tid));
    let (sched, wakeups) =
        sched::intervals(&data.scope.events, &states, in_scope, |ts| clock.boot(ts), clock.duration);
    let outside_wakers: HashSet<i32> =
        wakeups.iter().filter_map(|w| w.waker_tid).filter(|&waker| waker > 0 && !in_scope(waker)).collect();
    if system_wide {
        let mut seen = HashSet::new();
        for s in &sched {
            if seen.insert(s.tid) {
                tree.ensure_task(s.tid, system);
            }
        }
    }
    let mut wakers: Vec<i32> = outside_wakers.into_iter().collect();
    wakers.sort_unstable();
    let gone =
        wakers.into_iter().filter(|&waker| !tree.name_outside_task(waker, system, clock.end_boot_ns)).count();
    (sched, wakeups, gone as u64)
}

fn meta(data: &SpoolData, clock: &Clock, host: Meta, tree: &ProcTree) -> Meta {
    let (start, end) = (&data.start, data.end.as_ref());
    let t0 = start.t0_boot_ns;
    let root_exit =
        start.root_pid.and_then(|r| tree.processes.iter().find(|p| p.pid == r).and_then(|p| p.exit_code));
    Meta {
        tool: format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        source: Source::Record,
        command: start.command.clone(),
        cwd: start.cwd.clone(),
        user: start.user.clone(),
        scope: if start.system { Scope::System } else { Scope::Tree },
        root_pid: start.root_pid,
        clock: "boot".into(),
        start_unix_ns: start.start_unix_ns,
        start_clock_ns: t0,
        boottime_offset_ns: start.boottime_offset_ns,
        duration_ns: clock.duration,
        ready: end.and_then(|e| {
            Some(Ready {
                t_ns: e.ready_boot_ns? - t0,
                reason: e.ready_reason.as_deref()?.parse().ok()?,
                pid: e.ready_pid,
                tid: e.ready_tid,
            })
        }),
        cache: if start.cold { CacheState::Cold } else { CacheState::Warm },
        eviction: start.eviction.clone(),
        exit_code: end.and_then(|e| e.exit_code).or(root_exit),
        partial: end.is_none(),
        sample_hz: Some(start.sample_hz),
        stack_sample_hz: data.perf.as_ref().map(|(setup, _)| f64::from(setup.hz)),
        also: start.also.clone(),
        before_recording: start.before_recording.clone(),
        ..host
    }
}
