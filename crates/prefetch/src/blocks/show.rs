//! `prefetch show` of a block plan: its format and version, the trace and the image it was
//! made from, its size against what the start read, then its first ranges in replay order.

use std::fmt::Write;

use super::BlockPlan;

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

/// A chunk's size in whole KiB or MiB (`4 KiB`, `512 KiB`, `1 MiB`, `1.5 MiB`).
fn chunk_size(bytes: u64) -> String {
    if bytes < 1 << 20 { format!("{} KiB", bytes / 1024) } else { mib(bytes).replace(".0 MiB", " MiB") }
}

/// The plan as text; `max_ranges` ranges listed (`None`: all).
pub fn render(plan: &BlockPlan, max_ranges: Option<usize>) -> String {
    let mut out = String::new();
    let (s, id) = (&plan.stats, &plan.identity);
    let _ = writeln!(
        out,
        "block plan (format {} version {}), written by {}",
        plan.format, plan.version, plan.tool
    );
    let _ = writeln!(
        out,
        "  from trace {} of `{}` on {}",
        plan.source.trace,
        plan.source.command.join(" "),
        plan.source.host
    );
    let _ = writeln!(
        out,
        "  device {}{} ({}), image {}",
        plan.device.dev,
        plan.device.name.as_deref().map(|n| format!(" {n}")).unwrap_or_default(),
        plan.device.chosen_by,
        plan.device.image
    );
    let _ = writeln!(
        out,
        "  identity: {} UUID {}{}, {} bytes, {} blocks' SHA-256",
        id.filesystem,
        id.uuid,
        id.label.as_deref().map(|l| format!(" label {l:?}")).unwrap_or_default(),
        id.size_bytes,
        id.samples.len()
    );
    let _ = writeln!(
        out,
        "  the start read {} in {} requests ({} metadata; {} distinct); planned {} in {} ranges of {} chunks of {} \
         ({:.2}× the distinct bytes)",
        mib(s.read_bytes),
        s.requests,
        mib(s.metadata_read_bytes),
        mib(s.distinct_read_bytes),
        mib(s.planned_bytes),
        plan.ranges.len(),
        s.chunks,
        chunk_size(plan.chunk_bytes),
        if s.distinct_read_bytes > 0 { s.planned_bytes as f64 / s.distinct_read_bytes as f64 } else { 0.0 }
    );
    for (dev, bytes) in &s.other_devices {
        let _ = writeln!(out, "  left out: device {dev}, {} read", mib(*bytes));
    }
    let shown = max_ranges.unwrap_or(usize::MAX).min(plan.ranges.len());
    let _ = writeln!(out, "ranges in replay order (first need, offset, length):");
    for r in &plan.ranges[..shown] {
        let _ =
            writeln!(out, "  {:>10.1} ms  {:>14}  {}", r.first_need_ns as f64 / 1e6, r.offset, mib(r.length));
    }
    if shown < plan.ranges.len() {
        let _ = writeln!(out, "  … {} more (--all lists every range)", plan.ranges.len() - shown);
    }
    out
}
