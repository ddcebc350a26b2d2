//! Read-ahead that costs time: pages a device read past what the start asked for and that
//! no program then used (`page_use`), on the critical path. A device set to read far ahead
//! (this VM's vda: `read_ahead_kb` 8192) turns every miss in a large file read at random
//! into megabytes of transfer the start waits for; the gain is the disk's time on those
//! pages within the waits they were part of.

use coldstart_trace::Nanos;
use rustc_hash::FxHashMap;

use crate::analysis::DiskAnalysis;
use crate::doctor::disk_model::DEFAULT_READ_AHEAD_BYTES;
use crate::doctor::facts::Facts;
use crate::doctor::finding::{Audience, Confidence, Evidence, Figure, Finding, FindingKind, Gain};
use crate::units::{bytes, duration, percent, plural};

/// The time one file's unused pages cost the critical path: its wait there times the part of
/// its requests' cost (in its disk's model) that was the transfer of those pages.
fn file_waste(f: &Facts, disk: &DiskAnalysis, file: u32, unused_pages: u64) -> Nanos {
    let wait = f.wait_of(file);
    let Some(df) = disk.files.iter().find(|d| d.file == file) else { return 0 };
    if wait <= 0 || df.requests == 0 {
        return 0;
    }
    let model = f.disk_for(file);
    let unused = (unused_pages.saturating_mul(f.page_size)).min(df.bytes);
    let cost = df.requests as f64 * model.request_ns as f64
        + df.far_seeks as f64 * model.positioning_ns(None) as f64
        + model.transfer_ns(df.bytes) as f64;
    if cost <= 0.0 {
        return 0;
    }
    let share = (model.transfer_ns(unused) as f64 / cost).min(1.0);
    (wait as f64 * share) as Nanos
}

pub(crate) fn wasted_readahead(f: &Facts) -> Vec<Finding> {
    let unused_by_file: FxHashMap<u32, u64> =
        f.a.page_use_by_file
            .iter()
            .filter(|u| u.unused_pages > 0)
            .map(|u| (u.file, u.unused_pages))
            .collect();
    if unused_by_file.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for disk in &f.a.disks {
        let mut files: Vec<(u32, Nanos)> = disk
            .files
            .iter()
            .filter_map(|d| Some((d.file, file_waste(f, disk, d.file, *unused_by_file.get(&d.file)?))))
            .filter(|(_, ns)| *ns > 0)
            .collect();
        let gain: Nanos = files.iter().map(|x| x.1).sum();
        if gain < f.min_gain {
            continue;
        }
        files.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out.push(finding(f, disk, &files, gain));
    }
    out
}

fn finding(f: &Facts, disk: &DiskAnalysis, files: &[(u32, Nanos)], gain: Nanos) -> Finding {
    let share = if disk.filled_pages > 0 { disk.unused_pages as f64 / disk.filled_pages as f64 } else { 0.0 };
    let setting = match disk.read_ahead_kb {
        Some(kb) => format!("read_ahead_kb {kb}"),
        None => "a read-ahead the trace does not record".to_owned(),
    };
    let device_too_far = disk.read_ahead_kb.is_some_and(|kb| u64::from(kb) * 1024 > DEFAULT_READ_AHEAD_BYTES);
    let listed: Vec<u32> = files.iter().take(f.config.max_listed).map(|x| x.0).collect();
    let names: Vec<String> =
        files.iter().take(3).map(|(id, ns)| format!("{} {}", f.name(*id), duration(*ns))).collect();
    let unused_bytes = disk.unused_pages.saturating_mul(f.page_size);
    let figures = vec![
        Figure::bytes("unused_bytes", unused_bytes),
        Figure::ratio("unused_share", share),
        Figure::ns("wasted_ns", gain),
        Figure::count("files", files.len() as u64),
    ];
    let (audience, suggestion) = if device_too_far {
        let kb = DEFAULT_READ_AHEAD_BYTES / 1024;
        (
            Audience::Administrator,
            format!(
                "Lower {}'s read-ahead to the kernel's default of {kb} KiB (`echo {kb} > \
                 /sys/block/{}/queue/read_ahead_kb`, or `blockdev --setra {} /dev/{}`; a udev rule keeps it), and \
                 measure: a larger read-ahead helps files read in order from start to end, this start mostly \
                 jumps. Programs that read a large file at random can say so themselves \
                 (posix_fadvise(POSIX_FADV_RANDOM), madvise(MADV_RANDOM)).",
                disk.name,
                disk.name,
                kb * 2,
                disk.name
            ),
        )
    } else {
        (
            Audience::Developers,
            format!(
                "The files read at random ({}) read ahead pages they never use: open them with \
                 posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), or madvise(MADV_RANDOM) on their mapping, so the kernel \
                 reads only what is asked for; or lay the data out in the order it is read.",
                names
                    .iter()
                    .map(|n| n.rsplit_once(' ').map_or(n.as_str(), |x| x.0))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    };
    Finding {
        kind: FindingKind::WastedReadahead,
        title: format!(
            "{} ({setting}) read {} ahead that no program used ({} of the pages it read), {} of the critical path",
            disk.name,
            bytes(unused_bytes),
            percent(disk.unused_pages as f64, disk.filled_pages as f64),
            duration(gain)
        ),
        evidence: Evidence {
            summary: format!(
                "of {} read from {} into the page cache, {} were read ahead and never asked for nor mapped; the \
                 start waited for their transfer in {} (most: {})",
                bytes(disk.filled_pages.saturating_mul(f.page_size)),
                disk.name,
                bytes(unused_bytes),
                plural(files.len() as u64, "file"),
                names.join(", ")
            ),
            files: f.evidence_files(&listed),
            files_total: files.len() as u64,
            processes: Vec::new(),
            figures: figures.clone(),
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: gain,
            formula: "wasted_ns".to_owned(),
            text: format!(
                "{} (each file's I/O wait {} times the share of its requests' cost in the disk model that was the \
                 transfer of its unused pages), if they were not read",
                duration(gain),
                f.wait_scope()
            ),
            inputs: figures.into_iter().filter(|x| x.name == "wasted_ns").collect(),
            ahead_ns: None,
        },
        audience,
        suggestion,
        verify: format!("{}  # before and after the change", f.bench_command()),
        confidence: Confidence::Medium,
        caveat: Some(
            "a smaller read-ahead also makes more, smaller requests for the pages that are used, which costs more \
             where each request pays a seek; the what-if on other storage models the device's read-ahead"
                .to_owned(),
        ),
    }
}
