//! The chart's header: what ran, where, when, how long it took to be ready, whether
//! the cache was cold, and what the recording lost, with the version of coldstart
//! that drew it (as systemd-analyze stamps its plots).

use coldstart_analyze::Analysis;
use coldstart_analyze::units::{bytes, count, plural, secs};
use coldstart_trace::{CacheState, Source, TextEnum, Trace};

/// A line of the header and its CSS class.
pub struct Line {
    pub class: &'static str,
    pub text: String,
}

fn line(class: &'static str, text: String) -> Line {
    Line { class, text }
}

/// The wall-clock time of the recording's start, in UTC.
fn date(start_unix_ns: i64) -> String {
    if start_unix_ns <= 0 {
        return "date unknown".to_owned();
    }
    chrono::DateTime::from_timestamp_nanos(start_unix_ns).format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

/// The title: the command, or what a system-wide recording covered.
pub fn title(trace: &Trace) -> String {
    let command = crate::command_line(&trace.meta.command);
    let what = if !command.is_empty() {
        command
    } else if trace.meta.source == Source::Bootchart2 {
        "boot (bootchart2 log)".to_owned()
    } else {
        "whole system".to_owned()
    };
    let mut title: String = what.chars().take(160).collect();
    if what.chars().count() > 160 {
        title.push('…');
    }
    title
}

/// Every line under the title.
pub fn lines(trace: &Trace, a: &Analysis) -> Vec<Line> {
    let m = &trace.meta;
    let mut out = Vec::new();
    let mut machine = Vec::new();
    if !m.host.is_empty() {
        machine.push(format!("host {}", m.host));
    }
    if !m.kernel.is_empty() {
        machine.push(format!("kernel {}", m.kernel));
    }
    match (m.cpu_count, m.cpu_model.is_empty()) {
        (0, true) => {}
        (0, false) => machine.push(format!("CPU {}", m.cpu_model)),
        (n, true) => machine.push(format!("{n} CPUs")),
        (n, false) => machine.push(format!("CPU {n} × {}", m.cpu_model)),
    }
    if m.mem_total_bytes > 0 {
        machine.push(format!("{} RAM", bytes(m.mem_total_bytes)));
    }
    if machine.is_empty() {
        machine.push("machine unknown".to_owned());
    }
    out.push(line("info", machine.join(" · ")));
    let disks: Vec<String> = trace
        .disks
        .iter()
        .map(|d| {
            // The analysis's words when it measured the disk, so the chart says what the text says.
            let kind = a.disks.iter().find(|x| x.dev == d.dev).map_or_else(
                || match d.rotational {
                    Some(true) => "kernel flag: rotational".to_owned(),
                    Some(false) => "kernel flag: non-rotational".to_owned(),
                    None => "kernel flag: unknown".to_owned(),
                },
                |x| x.kind.clone(),
            );
            let model = d.model.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
            format!("{} ({}){model}; {kind}", d.name, d.dev)
        })
        .collect();
    out.push(line(
        "info",
        if disks.is_empty() {
            "disk: none recorded".to_owned()
        } else {
            format!("disk {}", disks.join("; "))
        },
    ));
    let cache = match m.cache {
        CacheState::Cold => "cold page cache",
        CacheState::Warm => "warm page cache",
        CacheState::Unknown => "page cache state unknown",
    };
    let eviction = m.eviction.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
    let ready = match &a.overview.ready {
        Some(r) => format!("ready after {} ({})", secs(r.time_to_ready_ns), r.reason),
        None => "ready: not known".to_owned(),
    };
    out.push(line(
        "key",
        format!(
            "{} · {cache}{eviction} · {ready} · recording {}",
            date(m.start_unix_ns),
            secs(m.duration_ns)
        ),
    ));
    let o = &a.overview;
    let processes =
        if o.processes == 1 { "1 process".to_owned() } else { format!("{} processes", count(o.processes)) };
    let reads = if o.pages_read == 0 && o.block_read_requests == 0 {
        format!(
            "{processes}, {} · no page-cache fills or block requests in the trace",
            plural(o.execs, "exec")
        )
    } else {
        format!(
            "{processes}, {} · read {} from {} in {}, {} · {} in {}",
            plural(o.execs, "exec"),
            bytes(o.bytes_read),
            plural(o.files_read, "file"),
            plural(o.reads, "read"),
            plural(o.seeks, "seek"),
            bytes(o.block_read_bytes),
            plural(o.block_read_requests, "block read request"),
        )
    };
    out.push(line("info", reads));
    let lost: Vec<String> = trace
        .losses
        .iter()
        .filter(|l| l.count > 0)
        .map(|l| format!("{} {} ({})", count(l.count), l.what, l.source))
        .collect();
    out.push(if lost.is_empty() {
        line("ok", "lost events: none".to_owned())
    } else {
        line("lost", format!("LOST: {}", lost.join("; ")))
    });
    let warnings: Vec<&str> = a
        .warnings
        .iter()
        .filter(|w| w.code != coldstart_analyze::WarningCode::Lost)
        .map(|w| w.message.as_str())
        .collect();
    if !warnings.is_empty() {
        let shown = warnings.iter().take(2).copied().collect::<Vec<_>>().join("; ");
        let more =
            if warnings.len() > 2 { format!(" (and {} more)", warnings.len() - 2) } else { String::new() };
        out.push(line("warn", format!("warning: {shown}{more}")));
    }
    if m.partial {
        out.push(line("lost", "PARTIAL TRACE: recovered from a recorder that did not finish".to_owned()));
    }
    out
}

/// The stamp in the top right corner.
pub fn stamp(trace: &Trace) -> (String, String) {
    (
        format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        format!("trace: {} by {}", trace.meta.source.as_str(), trace.meta.tool),
    )
}
