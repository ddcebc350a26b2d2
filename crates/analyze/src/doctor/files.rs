//! Findings about how files are read: many small files from one directory tree
//! (merge them into one cache file), and a large file read in many pieces (read it
//! whole, sequentially, early).

use std::collections::BTreeMap;

use coldstart_trace::Nanos;

use crate::doctor::facts::{Facts, shell_quote};
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::units::{base_name, bytes, count, duration, plural};

/// A shared library or extension module: merging it into a data file is not a remedy.
pub(crate) fn is_shared_object(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.ends_with(".so")
        || name
            .split(".so.")
            .nth(1)
            .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

#[derive(Default)]
struct DirNode {
    /// Small files anywhere below.
    files: Vec<u32>,
    children: std::collections::BTreeSet<String>,
}

/// Directory trees holding many of the small files read, each taken as deep as it can
/// be while still holding (nearly) all of them: a child directory holding most of its
/// parent's files stands for the parent, and its siblings are looked at on their own.
fn small_file_trees(f: &Facts) -> Vec<(String, Vec<u32>)> {
    let config = f.config;
    let mut tree: BTreeMap<String, DirNode> = BTreeMap::new();
    let mut ids: Vec<u32> = f.files.keys().copied().collect();
    ids.sort_unstable();
    for id in ids {
        if !f.is_regular(id) {
            continue;
        }
        let Some(path) = f.path_of(id) else { continue };
        let size = f.size_of(id).unwrap_or_else(|| f.read_bytes(id));
        if size > config.small_file_max_bytes || is_shared_object(path) || !path.starts_with('/') {
            continue;
        }
        let mut dir = parent(path).to_owned();
        loop {
            tree.entry(dir.clone()).or_default().files.push(id);
            if dir == "/" {
                break;
            }
            let up = parent(&dir).to_owned();
            tree.entry(up.clone()).or_default().children.insert(dir.clone());
            dir = up;
        }
    }
    let mut chosen = Vec::new();
    let mut stack = vec!["/".to_owned()];
    while let Some(dir) = stack.pop() {
        let Some(node) = tree.get(&dir) else { continue };
        let n = node.files.len() as u64;
        if n < config.small_files_min {
            continue;
        }
        if config.generic_dirs.iter().any(|g| g == &dir) {
            stack.extend(node.children.iter().cloned());
            continue;
        }
        let dominant = node.children.iter().find(|c| {
            tree.get(*c)
                .is_some_and(|cn| cn.files.len() as f64 >= config.small_files_dominant_share * n as f64)
        });
        match dominant {
            Some(child) => {
                stack.extend(node.children.iter().filter(|&c| c != child).cloned().chain([child.clone()]))
            }
            None => chosen.push((dir, node.files.clone())),
        }
    }
    chosen.sort();
    chosen
}

pub(crate) fn many_small_files(f: &Facts) -> Vec<Finding> {
    let mut out = Vec::new();
    for (dir, files) in small_file_trees(f) {
        let cost = SmallFilesCost::of(f, &files);
        if cost.gain < f.min_gain {
            continue;
        }
        out.push(small_files_finding(f, &dir, &files, &cost));
    }
    out
}

/// What reading a tree's small files cost, and what one merged file would cost instead.
struct SmallFilesCost {
    wait: Nanos,
    wake: Nanos,
    total_bytes: u64,
    read_bytes: u64,
    reads: u64,
    /// Reading them all at once, sequentially.
    merged: Nanos,
    gain: Nanos,
}

impl SmallFilesCost {
    fn of(f: &Facts, files: &[u32]) -> SmallFilesCost {
        let wait: Nanos = files.iter().map(|&id| f.wait_of(id)).fold(0, Nanos::saturating_add);
        let wake: Nanos = files.iter().map(|&id| f.wake_of(id)).fold(0, Nanos::saturating_add);
        let total_bytes: u64 = files
            .iter()
            .map(|&id| f.size_of(id).unwrap_or_else(|| f.read_bytes(id)))
            .fold(0, u64::saturating_add);
        let read_bytes: u64 = files.iter().map(|&id| f.read_bytes(id)).fold(0, u64::saturating_add);
        let reads: u64 = files.iter().map(|&id| f.files.get(&id).map_or(0, |s| s.reads)).sum();
        let merged = f.disk_for(files[0]).sequential_read_ns(total_bytes);
        let gain = (wait + wake - merged).max(0);
        SmallFilesCost { wait, wake, total_bytes, read_bytes, reads, merged, gain }
    }
}

/// The processes that read the files, with their I/O wait and bytes read in them.
fn readers(f: &Facts, files: &[u32]) -> Vec<EvidenceProcess> {
    let mut pids: Vec<i32> =
        files.iter().flat_map(|id| f.files.get(id).map(|s| s.pids.clone()).unwrap_or_default()).collect();
    pids.sort_unstable();
    pids.dedup();
    pids.iter()
        .map(|&pid| {
            let uses = f.a.file_uses.iter().filter(|u| u.pid == pid && files.binary_search(&u.file).is_ok());
            let (wait, pages) = uses.fold((0, 0), |acc, u| (acc.0 + u.io_wait_ns, acc.1 + u.pages));
            EvidenceProcess {
                pid,
                comm: f.a.comm(pid).to_owned(),
                ns: wait,
                read_bytes: pages * f.page_size,
                in_scope: f.a.process(pid).is_none_or(|p| p.in_scope),
            }
        })
        .collect()
}

fn small_files_finding(f: &Facts, dir: &str, files: &[u32], cost: &SmallFilesCost) -> Finding {
    let SmallFilesCost { wait, wake, total_bytes, read_bytes, reads, merged, gain } = *cost;
    let disk = f.disk_for(files[0]);
    let n = files.len() as u64;
    let waited = files.iter().filter(|&&id| f.wait_of(id) > 0).count() as u64;
    let paths: Vec<&str> = files.iter().filter_map(|&id| f.path_of(id)).collect();
    let advice = crate::doctor::known::small_files(dir, &paths).unwrap_or_else(|| {
        (
            Audience::Developers,
            format!(
                "Merge the {} files under {dir} into one cache file that the program reads at once (one file \
                 per setting, plugin description or entry costs a separate read, and an inode and a directory \
                 lookup, each); or keep them together and prefetch them.",
                count(n)
            ),
        )
    });
    Finding {
        kind: FindingKind::ManySmallFiles,
        title: format!("{} small files read from {dir}", count(n)),
        evidence: Evidence {
            summary: format!(
                "{} files of at most {} each under {dir} ({} in all, {} read in {}); {} of them cost {} of I/O wait {}",
                count(n),
                bytes(f.config.small_file_max_bytes),
                bytes(total_bytes),
                bytes(read_bytes),
                plural(reads, "read"),
                count(waited),
                duration(wait),
                f.wait_scope()
            ),
            files: f.evidence_files(files),
            files_total: n,
            processes: readers(f, files),
            figures: vec![
                Figure::count("files", n),
                Figure::count("files_waited_for", waited),
                Figure::count("reads", reads),
                Figure::bytes("total_size_bytes", total_bytes),
                Figure::bytes("read_bytes", read_bytes),
                Figure::ns("wait_now_ns", wait),
                Figure::ns("wake_after_io_ns", wake),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: gain,
            formula: "wait_now_ns + wake_after_io_ns - merged_read_ns".to_owned(),
            text: format!(
                "{} of I/O wait for these files now + {} waiting for a CPU when woken after it − {} to read {} \
                 once, sequentially ({} per request + {} positioning + {} at {}/s, {}) = {}",
                duration(wait),
                duration(wake),
                duration(merged),
                bytes(total_bytes),
                duration(disk.request_ns),
                duration(disk.positioning_ns(None)),
                bytes(total_bytes),
                bytes(disk.bandwidth_bytes_per_s as u64),
                disk.description,
                duration(gain)
            ),
            inputs: vec![
                Figure::ns("wait_now_ns", wait),
                Figure::ns("wake_after_io_ns", wake),
                Figure::bytes("total_size_bytes", total_bytes),
                Figure::ns("merged_read_ns", merged),
                Figure::ns("request_ns", disk.request_ns),
                Figure::rate("bandwidth", disk.bandwidth_bytes_per_s),
            ],
            ahead_ns: Some(wait + wake),
        },
        audience: advice.0,
        suggestion: advice.1,
        verify: format!(
            "{}  # before and after the merge; `coldstart prefetch` of these files ahead of the start measures \
             the upper bound ({} expected)",
            f.bench_command(),
            duration(wait)
        ),
        confidence: if f.path.is_some() { Confidence::Medium } else { Confidence::Low },
        caveat: Some(
            "the directory and inode reads (filesystem metadata) behind opening each file are not counted: \
             the gain of one merged file can be larger"
                .to_owned(),
        ),
    }
}

pub(crate) fn files_in_pieces(f: &Facts) -> Vec<Finding> {
    let config = f.config;
    let mut ids: Vec<u32> = f.files.keys().copied().collect();
    ids.sort_unstable();
    let mut out = Vec::new();
    for id in ids {
        let stats = &f.files[&id];
        let size = f.size_of(id).unwrap_or_else(|| f.read_bytes(id));
        if !f.is_regular(id)
            || size < config.large_file_min_bytes
            || stats.reads < config.large_file_min_reads
        {
            continue;
        }
        let wait = f.wait_of(id);
        let wake = f.wake_of(id);
        let disk = f.disk_for(id);
        let whole = disk.sequential_read_ns(size);
        let gain = (wait + wake - whole).max(0);
        if gain < f.min_gain {
            continue;
        }
        let name = f.name(id).to_owned();
        let read_bytes = f.read_bytes(id);
        let mut pieces: Vec<&crate::Read> = f.a.reads.iter().filter(|r| r.file == id).collect();
        pieces.sort_by_key(|r| (r.t_ns, r.first_page));
        let intervals = pieces
            .iter()
            .take(config.max_listed)
            .map(|r| EvidenceInterval {
                start_ns: r.t_ns,
                end_ns: r.end_ns,
                tid: Some(r.tid),
                what: format!(
                    "pages {}–{} ({}) by {}/{}",
                    r.first_page,
                    r.last_page(),
                    bytes(r.pages.saturating_mul(f.page_size)),
                    f.a.comm(r.pid),
                    r.pid
                ),
            })
            .collect();
        let quoted = shell_quote(f.path_of(id).unwrap_or(&name));
        out.push(Finding {
            kind: FindingKind::FileInPieces,
            title: format!("{} ({}) read in {} pieces", base_name(&name), bytes(size), count(stats.reads)),
            evidence: Evidence {
                summary: format!(
                    "{name}: {} read in {} separate reads by {}; {} of I/O wait {}",
                    bytes(read_bytes),
                    count(stats.reads),
                    plural(stats.pids.len() as u64, "process"),
                    duration(wait),
                    f.wait_scope()
                ),
                files: vec![f.evidence_file(id)],
                files_total: 1,
                processes: stats
                    .pids
                    .iter()
                    .map(|&pid| EvidenceProcess {
                        pid,
                        comm: f.a.comm(pid).to_owned(),
                        ns: 0,
                        read_bytes: f.a.file_uses.iter().filter(|u| u.pid == pid && u.file == id).map(|u| u.pages.saturating_mul(f.page_size)).fold(0, u64::saturating_add),
                        in_scope: f.a.process(pid).is_none_or(|p| p.in_scope),
                    })
                    .collect(),
                figures: vec![
                    Figure::count("reads", stats.reads),
                    Figure::bytes("size_bytes", size),
                    Figure::bytes("read_bytes", read_bytes),
                    Figure::ns("wait_now_ns", wait),
                    Figure::ns("wake_after_io_ns", wake),
                ],
                intervals,
            },
            gain: Gain {
                ns: gain,
                formula: "wait_now_ns + wake_after_io_ns - whole_read_ns".to_owned(),
                text: format!(
                    "{} of I/O wait for it now + {} waiting for a CPU when woken after it − {} to read all {} in one \
                     sequential pass ({}) = {}; read before the start (a prefetch completed ahead), the whole {} goes",
                    duration(wait),
                    duration(wake),
                    duration(whole),
                    bytes(size),
                    disk.description,
                    duration(gain),
                    duration(wait + wake)
                ),
                inputs: vec![
                    Figure::ns("wait_now_ns", wait),
                    Figure::ns("wake_after_io_ns", wake),
                    Figure::bytes("size_bytes", size),
                    Figure::ns("whole_read_ns", whole),
                    Figure::rate("bandwidth", disk.bandwidth_bytes_per_s),
                ],
                ahead_ns: Some(wait + wake),
            },
            audience: Audience::Developers,
            suggestion: format!(
                "Read {} whole, sequentially and early (readahead(2) or posix_fadvise(WILLNEED) of the whole file, or \
                 madvise(MADV_WILLNEED) / MAP_POPULATE on its mapping, at the start of the program or in a thread), \
                 or replay a prefetch plan before the start.",
                base_name(&name)
            ),
            verify: format!(
                "{} ::: sh -c 'cat \"$0\" > /dev/null; exec \"$@\"' {quoted} {cmd}",
                f.bench_command(),
                cmd = f.verify_start().command
            ),
            confidence: if f.path.is_some() { Confidence::High } else { Confidence::Low },
            caveat: None,
        });
    }
    out
}
