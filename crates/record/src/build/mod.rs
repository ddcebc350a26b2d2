//! Builds a [`Trace`] from a spool. A normal recording and `coldstart recover` run
//! this same code; a spool without `end.json` (the recorder was killed) gives a
//! trace with `meta.partial = true`, ending at the last thing the spool holds.

mod block;
mod decode;
pub mod fiemap;
mod files;
mod pages;
mod procs;
mod samples;
mod sched;

use std::collections::{HashMap, HashSet};

use coldstart_trace::*;

use crate::capture::connector::ProcRecord;
use crate::capture::fanotify::OpenRecord;
use crate::capture::sampler::SampleRecord;
use crate::error::Result;
use crate::ftrace::events::Event;
use crate::spool::{DiskCounters, Spool, SpoolStart};

pub use block::op_of;
pub use pages::Usage;
pub use procs::exit_status;

/// Recorded block reads against /proc/diskstats for one disk over the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossCheck {
    pub disk: String,
    pub recorded_read_bytes: u64,
    pub diskstats_read_bytes: u64,
}

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

pub struct Built {
    pub trace: Trace,
    pub summary: Summary,
}

fn loss(source: &str, what: impl Into<String>, count: u64) -> Loss {
    Loss { source: source.into(), what: what.into(), count }
}

fn delta(start: &[DiskCounters], end: &[DiskCounters], dev: Dev) -> Option<(u64, u64, u64, u64)> {
    let find = |list: &[DiskCounters]| list.iter().find(|d| Dev::new(d.major, d.minor) == dev).cloned();
    let (a, b) = (find(start)?, find(end)?);
    Some((
        b.read_sectors.saturating_sub(a.read_sectors) * 512,
        b.read_ios.saturating_sub(a.read_ios),
        b.write_sectors.saturating_sub(a.write_sectors) * 512,
        b.write_ios.saturating_sub(a.write_ios),
    ))
}

/// Decodes the whole spool into a trace.
pub fn build(spool: &Spool) -> Result<Built> {
    let start: SpoolStart = spool.start()?;
    let end = spool.end()?;
    let partial = end.is_none();
    let formats = decode::Formats::load(spool)?;
    let page = start.subbuf_size.max(4096);
    let scope = decode::decode_role(spool, "scope", &start.cpus, page, &formats)?;
    let blocks = decode::decode_role(spool, "block", &start.cpus, page, &formats)?;
    let (proc_records, torn_procs) = spool.read_lines::<ProcRecord>("procs.jsonl")?;
    let (opens, torn_opens) = spool.read_lines::<OpenRecord>("opens.jsonl")?;
    let (mut samples, torn_samples) = spool.read_lines::<SampleRecord>("samples.jsonl")?;
    let first_after_t0 = samples.iter().position(|s| s.t >= start.t0_boot_ns).unwrap_or(samples.len());
    samples.drain(..first_after_t0.saturating_sub(1));
    let host = crate::system::host();
    let page_size = u64::from(host.page_size);

    let t0 = start.t0_boot_ns;
    let boot = |ts: u64| ts as i64 - t0;
    let mono = |t: i64| t + start.boottime_offset_ns - t0;
    let t_end_boot = match &end {
        Some(e) => e.t_end_boot_ns,
        None => {
            let last_event = scope.events.iter().chain(&blocks.events).map(|e| e.ts as i64).max();
            let last_sample = samples.last().map(|s| s.t);
            last_event.into_iter().chain(last_sample).max().unwrap_or(t0)
        }
    };
    let duration = (t_end_boot - t0).max(0);
    let in_window = |t: Nanos| (0..=duration).contains(&t);

    let mut tree =
        procs::ProcTree::build(&proc_records, &scope.events, start.root_pid, start.system, mono, boot);
    let mut files = files::FileTable::new(&opens);
    let scope_filter = |tid: i32, t: Nanos, tree: &procs::ProcTree| {
        in_window(t) && (start.system || tree.in_scope.contains(&tree.tgid(tid)))
    };
    let collected =
        pages::collect(&scope.events, boot, scope_filter, &mut tree, start.system, &mut files, page_size);
    files.resolve_by_walk(&crate::system::mounts());
    let raw_access_count = collected.accesses.len();
    let accesses_left_out = collected.left_out;
    let (page_fills, page_accesses) = pages::finish(collected, &files, page_size);
    let usage = pages::usage(&page_fills, &page_accesses);
    let filled: HashSet<u32> = page_fills.iter().map(|p| p.file_id).collect();
    let file_opens: Vec<FileOpen> = opens
        .iter()
        .filter(|o| start.system || tree.in_scope.contains(&o.pid))
        .map(|o| FileOpen { t_ns: o.t - t0, pid: o.pid, file_id: files.for_open(o.dev, o.ino), exec: o.exec })
        .filter(|o| in_window(o.t_ns))
        .collect();
    let mut read_or_used = filled.clone();
    read_or_used.extend(page_accesses.iter().map(|a| a.file_id));
    let (extents, fiemap_failed, deleted) = files.extents(&read_or_used);

    let extent_index = block::ExtentIndex::new(&extents);
    let block_events: Vec<_> = blocks.events.iter().filter(|e| boot(e.ts) >= 0).cloned().collect();
    // Issuers outside the recorded tree (other programs' threads) are named by their
    // process where /proc still knows them (and they had started by the end), once per task.
    let outside: HashMap<i32, i32> = block_events
        .iter()
        .filter_map(|e| match e.event {
            Event::BlockIssue { tid, .. } if tid > 0 && !tree.pid_of.contains_key(&tid) => Some(tid),
            _ => None,
        })
        .collect::<HashSet<i32>>()
        .into_iter()
        .filter_map(|tid| procs::tgid_of_task_started_by(tid, t_end_boot).map(|pid| (tid, pid)))
        .collect();
    let block::Requests { rows: block_ios, requeues } = block::requests(
        &block_events,
        boot,
        |tid| outside.get(&tid).copied().unwrap_or_else(|| tree.tgid(tid)),
        &extent_index,
    );

    let in_scope_tid = |tid: i32| start.system || tree.in_scope.contains(&tree.tgid(tid));
    let states = sched::StateMap::new(&formats.decoder.state_bits);
    let (sched, wakeups) = sched::intervals(&scope.events, &states, in_scope_tid, boot, duration);
    if start.system {
        let mut seen = HashSet::new();
        for s in &sched {
            if seen.insert(s.tid) {
                tree.ensure_task(s.tid, "", true);
            }
        }
    }

    let mut marks: Vec<Mark> = Vec::new();
    let marks_text = std::fs::read_to_string(spool.path("marks"))
        .ok()
        .or_else(|| start.marks_file.as_ref().and_then(|p| std::fs::read_to_string(p).ok()));
    let parsed = coldstart_launch::marks::parse(marks_text.as_deref().unwrap_or(""));
    for m in parsed.marks {
        let source = if m.pid.is_some() { MarkSource::Command } else { MarkSource::MarksFile };
        marks.push(Mark { t_ns: m.boottime_ns - t0, pid: m.pid, name: m.name, source });
    }
    for e in &scope.events {
        if let Event::Print { tid, text } = &e.event {
            let pid = Some(tree.tgid(*tid));
            marks.push(Mark { t_ns: boot(e.ts), pid, name: text.clone(), source: MarkSource::TraceMarker });
        }
    }
    if let Some((line, ready)) = end.as_ref().and_then(|e| Some((e.ready_line.clone()?, e.ready_boot_ns?))) {
        marks.push(Mark { t_ns: ready - t0, pid: None, name: line, source: MarkSource::Output });
    }
    marks.sort_by_key(|m| m.t_ns);

    let mut disk_devs: Vec<Dev> = block_ios.iter().map(|b| b.dev).collect();
    disk_devs.extend(
        files
            .files
            .iter()
            .filter(|f| f.kind != FileKind::DeviceMetadata)
            .map(|f| crate::system::whole_disk(f.dev).0),
    );
    disk_devs.extend(files.files.iter().filter(|f| f.kind == FileKind::DeviceMetadata).map(|f| f.dev));
    disk_devs.retain(|d| d.major != 0);
    disk_devs.sort_unstable();
    disk_devs.dedup();
    let end_stats: Vec<DiskCounters> = match &end {
        Some(e) => e.diskstats_end.clone(),
        None => samples.last().map(|s| s.disks.clone()).unwrap_or_default(),
    };
    let mut disks = Vec::new();
    let mut cross_checks = Vec::new();
    for dev in &disk_devs {
        let info = crate::system::disk_info(*dev);
        let d = delta(&start.diskstats_start, &end_stats, *dev);
        let recorded: u64 = block_ios
            .iter()
            .filter(|b| b.dev == *dev && b.op == BlockOp::Read && b.complete_ns.is_some_and(in_window))
            .map(|b| u64::from(b.bytes))
            .sum();
        if let Some((rb, _, _, _)) = d {
            cross_checks.push(CrossCheck {
                disk: info.name.clone(),
                recorded_read_bytes: recorded,
                diskstats_read_bytes: rb,
            });
        }
        disks.push(Disk {
            dev: *dev,
            name: info.name,
            model: info.model,
            rotational: info.rotational,
            size_bytes: info.size_bytes,
            read_bytes: d.map(|x| x.0),
            read_ios: d.map(|x| x.1),
            write_bytes: d.map(|x| x.2),
            write_ios: d.map(|x| x.3),
        });
    }
    let started: HashSet<i32> =
        tree.processes.iter().filter(|p| p.start_ns.is_some()).map(|p| p.pid).collect();
    let rates =
        samples::rates(&samples, |t| t - t0, &disk_devs.iter().copied().collect(), &started, page_size);

    let mut losses = Vec::new();
    if let Some(e) = &end {
        losses.extend(e.losses.iter().map(|(s, w, c)| loss(s, w.clone(), *c)));
    }
    for (role, decoded) in [("scope", &scope), ("block", &blocks)] {
        for (cpu, n) in &decoded.missed {
            if *n > 0 {
                losses.push(loss("tracefs", format!("{role} cpu{cpu} events lost between pages"), *n));
            }
        }
        if decoded.missed_unknown > 0 {
            losses.push(loss(
                "tracefs",
                format!("{role} pages after an unknown number of lost events"),
                decoded.missed_unknown,
            ));
        }
        if decoded.corrupt_pages > 0 {
            losses.push(loss("tracefs", format!("{role} pages that did not parse"), decoded.corrupt_pages));
        }
    }
    losses.push(loss("files", "unresolved inodes", files.unresolved));
    let extra = [
        ("proc connector", "messages lost (ENOBUFS)", tree.connector_lost),
        ("proc connector", "execs whose argv could not be read", tree.argv_unread),
        (
            "files",
            "files read whose extents could not be mapped (deleted, replaced, or no FIEMAP)",
            fiemap_failed,
        ),
        ("spool", "torn lines", (torn_procs + torn_opens + torn_samples) as u64),
    ];
    losses.extend(extra.iter().filter(|x| x.2 > 0).map(|(s, w, c)| loss(s, *w, *c)));

    let mut notes: Vec<Note> =
        start.notes.iter().map(|t| Note { source: "record".into(), text: t.clone() }).collect();
    if let Some(e) = &end {
        notes.extend(e.notes.iter().map(|t| Note { source: "record".into(), text: t.clone() }));
    }
    if partial {
        notes.push(Note {
            source: "recover".into(),
            text: "the recorder did not finish (killed or crashed); this trace was rebuilt from its spool and ends at the last data it holds".into(),
        });
    }
    if deleted > 0 {
        notes.push(Note {
            source: "files".into(),
            text: format!("{deleted} files read were deleted before their extents could be read (no disk placement for them)"),
        });
    }
    let (raw_bytes, other_bytes) = spool.sizes();
    let mib = |b: u64| b as f64 / f64::from(1 << 20);
    let raw_text: Vec<String> = raw_bytes.iter().map(|(role, b)| format!("{role} {:.1}", mib(*b))).collect();
    let total: u64 = raw_bytes.iter().map(|r| r.1).sum::<u64>() + other_bytes;
    notes.push(Note {
        source: "record".into(),
        text: format!(
            "the spool held {:.1} MiB (ring-buffer pages: {} MiB; other files {:.1} MiB)",
            mib(total),
            raw_text.join(", "),
            mib(other_bytes)
        ),
    });
    if raw_access_count > 0 || accesses_left_out > 0 {
        let mut text = format!(
            "{raw_access_count} page-access events of the scope merged into {} rows",
            page_accesses.len()
        );
        if accesses_left_out > 0 {
            text.push_str(&format!(
                "; {accesses_left_out} accesses to files of memory filesystems (tmpfs, memfd) left out"
            ));
        }
        notes.push(Note { source: "record".into(), text });
    }
    if formats.requeue_traced {
        notes.push(Note {
            source: "record".into(),
            text: format!(
                "{requeues} block requests requeued (the driver handed them back, e.g. its queue was full, and they were issued again); each is one block_io row timed from its first issue"
            ),
        });
    }
    if files.fs_internal > 0 {
        notes.push(Note {
            source: "files".into(),
            text: format!(
                "{} files without a path are a filesystem's own metadata (ext4 reserved inodes, e.g. 1: the block allocator's bitmaps, read when a program writes), kind other",
                files.fs_internal
            ),
        });
    }
    if files.walked_entries > 0 {
        notes.push(Note {
            source: "files".into(),
            text: format!(
                "{} directory entries walked to name inodes fanotify did not see",
                files.walked_entries
            ),
        });
    }
    if files.walk_truncated {
        notes.push(Note {
            source: "files".into(),
            text: format!("the walk for unresolved inodes stopped after {} entries", files.walked_entries),
        });
    }

    let root_exit =
        start.root_pid.and_then(|r| tree.processes.iter().find(|p| p.pid == r).and_then(|p| p.exit_code));
    let meta = Meta {
        tool: format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        source: Source::Record,
        command: start.command.clone(),
        cwd: start.cwd.clone(),
        user: start.user.clone(),
        scope: if start.system { Scope::System } else { Scope::Tree },
        root_pid: start.root_pid,
        host: host.host,
        kernel: host.kernel,
        cpu_model: host.cpu_model,
        cpu_count: host.cpu_count,
        mem_total_bytes: host.mem_total_bytes,
        page_size: host.page_size,
        clock: "boot".into(),
        start_unix_ns: start.start_unix_ns,
        start_clock_ns: t0,
        boottime_offset_ns: start.boottime_offset_ns,
        duration_ns: duration,
        ready: end
            .as_ref()
            .and_then(|e| Some(Ready { t_ns: e.ready_boot_ns? - t0, reason: e.ready_reason.clone()? })),
        cache: if start.cold { CacheState::Cold } else { CacheState::Warm },
        eviction: start.eviction.clone(),
        exit_code: end.as_ref().and_then(|e| e.exit_code).or(root_exit),
        partial,
        sample_hz: Some(start.sample_hz),
    };
    let mut processes = tree.processes;
    processes.sort_by_key(|p| (p.start_ns.unwrap_or(i64::MIN), p.pid));
    let summary = Summary {
        duration_ns: duration,
        processes: processes.len(),
        files: filled.len(),
        page_fill_bytes: page_fills.iter().map(|p| u64::from(p.pages) * page_size).sum(),
        unresolved_files: files.unresolved,
        page_size,
        access_rows: page_accesses.len(),
        usage,
        lost: losses.iter().filter(|l| l.count > 0).cloned().collect(),
        cross_checks,
    };
    let trace = Trace {
        meta,
        disks,
        losses,
        notes,
        processes,
        execs: tree.execs,
        threads: tree.threads,
        files: files.files,
        extents,
        file_opens,
        page_fills,
        page_accesses,
        block_ios,
        sched,
        wakeups,
        marks,
        cpu_samples: rates.cpu,
        disk_samples: rates.disks,
        process_samples: rates.procs,
    };
    Ok(Built { trace, summary })
}
