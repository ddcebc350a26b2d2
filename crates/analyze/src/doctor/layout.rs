//! Scattered layout: the start's data spread far apart on a disk where a far request
//! measurably costs more than a near one (a hard disk). Reading the same data in disk
//! order removes the far seeks that sorting removes; relocating the files next to
//! each other removes nearly all of them.

use coldstart_trace::{BlockOp, Nanos};

use crate::analysis::{DiskAnalysis, SegmentKind};
use crate::doctor::disk_model::{DiskClass, DiskParams};
use crate::doctor::facts::{Facts, shell_quote};
use crate::doctor::finding::{Audience, Confidence, Evidence, Figure, Finding, FindingKind, Gain};
use crate::units::{bytes, count, duration, plural};

pub(crate) fn scattered_layout(f: &Facts) -> Vec<Finding> {
    let path_io = path_io_wait(f);
    let mut out = Vec::new();
    for (disk, (_, params)) in f.a.disks.iter().zip(&f.disks) {
        let measured = params.source_of("seek_ns").starts_with("median");
        let hdd_like = !measured && params.rotation_ns > 0 && disk.rotational != Some(false);
        let seek = if measured {
            params.seek_ns
        } else if hdd_like {
            params.seek_ns + params.rotation_ns
        } else {
            0
        };
        if seek < f.config.seek_min_penalty_ns {
            continue;
        }
        let scatter = Scatter::of(f, disk, params, seek, measured, path_io);
        if scatter.gain() < f.min_gain {
            continue;
        }
        out.push(finding(f, disk, params, &scatter));
    }
    out
}

/// The critical path's I/O wait, or without a path the start's.
fn path_io_wait(f: &Facts) -> Nanos {
    match f.path {
        Some(cp) => cp
            .segments
            .iter()
            .filter(|s| s.kind == SegmentKind::IoWait)
            .map(|s| s.end_ns - s.start_ns)
            .fold(0, Nanos::saturating_add),
        None => f.a.start.io_wait_ns,
    }
}

/// The start's read requests on one disk: how far apart they lie, and how many far
/// seeks they make as issued and would make in disk order.
struct Scatter {
    requests: u64,
    span: u64,
    read: u64,
    far_now: u64,
    far_sorted: u64,
    /// What a far request costs, and whether it was measured (else the class's).
    seek: Nanos,
    measured: bool,
    path_io: Nanos,
}

impl Scatter {
    fn of(
        f: &Facts,
        disk: &DiskAnalysis,
        params: &DiskParams,
        seek: Nanos,
        measured: bool,
        path_io: Nanos,
    ) -> Scatter {
        let mut requests: Vec<(u64, u64)> = disk
            .requests
            .iter()
            .filter(|r| r.op == BlockOp::Read && r.issue_ns.is_some_and(|t| t >= f.origin && t <= f.ready))
            .map(|r| (r.sector, r.sector + u64::from(r.bytes).div_ceil(512)))
            .collect();
        let far_sectors = params.far_bytes / 512;
        let far_now = disk
            .requests
            .iter()
            .filter(|r| {
                r.op == BlockOp::Read && r.far && r.issue_ns.is_some_and(|t| t >= f.origin && t <= f.ready)
            })
            .count() as u64;
        requests.sort_unstable();
        let far_sorted =
            requests.windows(2).filter(|w| w[1].0.abs_diff(w[0].1) > far_sectors && w[1].0 > w[0].1).count()
                as u64;
        let span = match (requests.first(), requests.iter().map(|r| r.1).max()) {
            (Some(first), Some(end)) => (end - first.0) * 512,
            _ => 0,
        };
        let read: u64 = requests.iter().map(|r| (r.1 - r.0).saturating_mul(512)).fold(0, u64::saturating_add);
        Scatter { requests: requests.len() as u64, span, read, far_now, far_sorted, seek, measured, path_io }
    }

    /// The far seeks reading in disk order saves.
    fn saved(&self) -> u64 {
        self.far_now.saturating_sub(self.far_sorted)
    }

    fn gain(&self) -> Nanos {
        (self.saved() as Nanos * self.seek).min(self.path_io)
    }

    /// The gain with the files next to each other: every far seek gone.
    fn relocated(&self) -> Nanos {
        (self.far_now as Nanos * self.seek).min(self.path_io)
    }
}

fn finding(f: &Facts, disk: &DiskAnalysis, params: &DiskParams, s: &Scatter) -> Finding {
    let Scatter { requests, span, read, far_now, far_sorted, seek, measured, path_io } = *s;
    let (saved, gain, relocated) = (s.saved(), s.gain(), s.relocated());
    let seek_source = if measured {
        format!("{} more per far request, measured ({})", duration(seek), params.source_of("seek_ns"))
    } else {
        format!(
            "{} per far request (seek + rotation of the {} class: not measurable from this trace)",
            duration(seek),
            DiskClass::Hdd7200.as_str()
        )
    };
    Finding {
        kind: FindingKind::ScatteredLayout,
        title: format!("The start's data is scattered over {} of {}", bytes(span), disk.name),
        evidence: Evidence {
            summary: format!(
                "{} read requests ({}) spread over {} of {} {}: {} of them far seeks (over {}), {} in disk order; \
                 a far request costs {seek_source}",
                count(requests),
                bytes(read),
                bytes(span),
                disk.name,
                disk.dev,
                count(far_now),
                bytes(params.far_bytes),
                count(far_sorted),
            ),
            files: Vec::new(),
            files_total: 0,
            processes: Vec::new(),
            figures: vec![
                Figure::count("requests", requests),
                Figure::bytes("span_bytes", span),
                Figure::count("far_seeks_now", far_now),
                Figure::count("far_seeks_in_disk_order", far_sorted),
                Figure::ns("far_seek_cost_ns", seek),
                Figure::ns("path_io_wait_ns", path_io),
            ],
            intervals: Vec::new(),
        },
        gain: Gain {
            ns: gain,
            formula: "min((far_seeks_now - far_seeks_in_disk_order) * far_seek_cost_ns, path_io_wait_ns)".to_owned(),
            text: format!(
                "({} far seeks now − {} in disk order) × {} = {}, at most the critical path's I/O wait {}: {}; with \
                 the files moved next to each other, up to {}",
                count(far_now),
                count(far_sorted),
                duration(seek),
                duration(saved as Nanos * seek),
                duration(path_io),
                duration(gain),
                duration(relocated)
            ),
            inputs: vec![
                Figure::count("far_seeks_now", far_now),
                Figure::count("far_seeks_in_disk_order", far_sorted),
                Figure::ns("far_seek_cost_ns", seek),
                Figure::ns("path_io_wait_ns", path_io),
            ],
            ahead_ns: Some(relocated),
        },
        audience: Audience::Administrator,
        suggestion: format!(
            "Read the start's data in disk order before it is needed (a prefetch plan in disk order, replayed at \
             boot or login), or place the files next to each other (copy them in order of first use into a fresh \
             directory, or defragment them with e4defrag): in disk order {} go.",
            plural(saved, "far seek")
        ),
        verify: format!(
            "coldstart prefetch plan {} --order disk -o disk.plan && {}",
            shell_quote(&f.config.trace_name),
            f.verify_start().bench("--cold --runs 10 --prefetch disk.plan")
        ),
        confidence: if measured { Confidence::Medium } else { Confidence::Low },
        caveat: Some("the seek cost is per request; a drive's own reordering (NCQ) and cache make some far seeks cheaper".to_owned()),
    }
}
