//! The doctor's findings for people: the full diagnosis `coldstart doctor` prints
//! (evidence, gain arithmetic, suggestion, verification, the disk model and the
//! what-if), and the short findings section of the text report.

use std::io::{self, Write};

use coldstart_analyze::Analysis;
use coldstart_analyze::doctor::{
    Confidence, Diagnosis, DiskClass, DiskParams, DoctorConfig, Finding, WhatIf, shell_quote, verify_start,
};
use coldstart_analyze::units::{bytes, count, duration, plural, secs};

use crate::table::{Align, Table};

fn confidence(c: Confidence) -> &'static str {
    match c {
        Confidence::High => "high confidence",
        Confidence::Medium => "medium confidence",
        Confidence::Low => "low confidence",
    }
}

/// The doctor's rule for reporting a finding, with this trace's figure: a gain of at
/// least a share of the time to ready, and never under a floor (docs/doctor.md).
fn threshold_rule(a: &Analysis, d: &Diagnosis) -> String {
    let share = DoctorConfig::default().min_gain_share;
    let share_text = format!("{} % of the time to ready", share * 100.0);
    match &a.overview.ready {
        Some(r) => {
            let of_ready = (r.time_to_ready_ns as f64 * share) as i64;
            if d.min_gain_ns <= of_ready {
                format!("worth at least {share_text} ({})", duration(d.min_gain_ns))
            } else {
                format!(
                    "worth at least {} (the floor; {share_text} is {})",
                    duration(d.min_gain_ns),
                    duration(of_ready)
                )
            }
        }
        None => format!("worth at least {}", duration(d.min_gain_ns)),
    }
}

/// The findings section of the text report: each finding's title, gain and suggestion.
pub fn section(a: &Analysis, d: &Diagnosis, top: usize, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "\nFindings (coldstart doctor: estimated gain in time to ready, largest first; details: coldstart doctor FILE)"
    )?;
    if d.findings.is_empty() {
        return writeln!(out, "  none {}", threshold_rule(a, d));
    }
    for (i, f) in d.findings.iter().take(top).enumerate() {
        writeln!(out, "  {}. [{}, {}] {}", i + 1, gain_words(f), confidence(f.confidence), f.title)?;
        writeln!(out, "     {}", f.gain.text)?;
        writeln!(out, "     → for {}: {}", f.audience.label(), f.suggestion)?;
    }
    if d.findings.len() > top {
        writeln!(out, "  … {} more (coldstart doctor FILE)", count((d.findings.len() - top) as u64))?;
    }
    Ok(())
}

/// The intervals a finding points at (the doctor merged them and kept those that carry
/// the time), at most [`INTERVALS_SHOWN`] lines and never one line twice.
fn intervals(f: &Finding, out: &mut dyn Write) -> io::Result<()> {
    let mut lines: Vec<String> = Vec::new();
    for iv in &f.evidence.intervals {
        let line = format!("   at {} – {}: {}", secs(iv.start_ns), secs(iv.end_ns), iv.what);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    for line in lines.iter().take(INTERVALS_SHOWN) {
        writeln!(out, "{line}")?;
    }
    if lines.len() > INTERVALS_SHOWN {
        writeln!(
            out,
            "   … {} more (coldstart doctor --format json)",
            plural((lines.len() - INTERVALS_SHOWN) as u64, "interval")
        )?;
    }
    Ok(())
}

/// Lines of intervals shown per finding.
const INTERVALS_SHOWN: usize = 6;

/// A finding's gain in the words every report uses: `−0.378 s`, or `no gain estimated`
/// when the doctor claims none (a verdict, a wait outside the recording).
pub fn gain_words(f: &Finding) -> String {
    if f.gain.ns > 0 { format!("−{}", secs(f.gain.ns)) } else { "no gain estimated".to_owned() }
}

fn finding(i: usize, f: &Finding, out: &mut dyn Write) -> io::Result<()> {
    let gain = if f.gain.ns > 0 {
        format!("estimated gain {}", secs(f.gain.ns))
    } else {
        "no gain estimated".to_owned()
    };
    writeln!(out, "\n{}. {}  [{}; {gain}; {}]", i + 1, f.title, f.kind.as_str(), confidence(f.confidence))?;
    writeln!(out, "   Evidence   {}", f.evidence.summary)?;
    if !f.evidence.files.is_empty() {
        let mut table = Table::new(&[
            ("I/O wait", Align::Right),
            ("read", Align::Right),
            ("reads", Align::Right),
            ("size", Align::Right),
            ("file", Align::Left),
        ]);
        for file in &f.evidence.files {
            table.row(vec![
                duration(file.wait_ns),
                bytes(file.read_bytes),
                count(file.reads),
                file.size_bytes.map_or("?".into(), bytes),
                file.name.clone(),
            ]);
        }
        table.write(out, "              ")?;
        let hidden = f.evidence.files_total.saturating_sub(f.evidence.files.len() as u64);
        if hidden > 0 {
            writeln!(out, "              … {} more files", count(hidden))?;
        }
    }
    if !f.evidence.processes.is_empty() {
        let list: Vec<String> = f
            .evidence
            .processes
            .iter()
            .take(8)
            .map(|p| {
                let scope = if p.in_scope { "" } else { ", outside the trace's scope" };
                format!("{}/{} ({}{scope})", p.comm, p.pid, duration(p.ns))
            })
            .collect();
        let more = f.evidence.processes.len().saturating_sub(8);
        let more = if more > 0 { format!(" and {} more", count(more as u64)) } else { String::new() };
        writeln!(out, "   Processes  {}{more}", list.join(", "))?;
    }
    intervals(f, out)?;
    writeln!(out, "   Gain       {}", f.gain.text)?;
    if let Some(ahead) = f.gain.ahead_ns.filter(|&n| n != f.gain.ns) {
        writeln!(
            out,
            "              with the reads done before the start (a prefetch completed ahead): {}",
            secs(ahead)
        )?;
    }
    writeln!(out, "   Who        {}", f.audience.label())?;
    writeln!(out, "   Suggestion {}", f.suggestion)?;
    writeln!(out, "   Verify     {}", f.verify)?;
    if let Some(c) = &f.caveat {
        writeln!(out, "   Caveat     {c}")?;
    }
    Ok(())
}

fn model_line(p: &DiskParams) -> String {
    let mut parts = vec![format!("{} per request", duration(p.request_ns))];
    if p.seek_ns + p.rotation_ns > 0 {
        parts.push(format!("far seek {}", duration(p.seek_ns)));
        if p.near_seek_ns > 0 {
            parts.push(format!("near seek {}", duration(p.near_seek_ns)));
        }
        if p.rotation_ns > 0 {
            parts.push(format!("rotation {}", duration(p.rotation_ns)));
        }
    } else {
        parts.push("no seek cost".to_owned());
    }
    parts.push(format!("{}/s", bytes(p.bandwidth_bytes_per_s as u64)));
    parts.push(format!("{} in parallel", p.queue_depth));
    parts.join(", ")
}

/// Each disk's model, then the what-if table.
fn disk_models_and_what_if(d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "\nDisk model (docs/doctor.md; measured from this trace's read requests where there were enough)"
    )?;
    if d.disks.is_empty() {
        writeln!(out, "  no disk in the trace: the defaults of the ssd class are used")?;
    }
    for disk in &d.disks {
        writeln!(out, "  {} {}: {}", disk.name, disk.dev, model_line(&disk.model))?;
        for s in &disk.model.sources {
            if !s.source.starts_with("default") {
                writeln!(out, "    {}: {}", s.param, s.source)?;
            }
        }
    }
    what_if_table(d, out)
}

fn what_if_table(d: &Diagnosis, out: &mut dyn Write) -> io::Result<()> {
    let Some(first) = d.what_if.first() else { return Ok(()) };
    writeln!(
        out,
        "\nWhat-if: time to ready on other storage (recorded {}, of it {} of I/O wait on the critical path)",
        secs(first.time_to_ready_ns),
        secs(first.path_io_wait_ns)
    )?;
    let mut table = Table::new(&[
        ("disk", Align::Left),
        ("I/O wait", Align::Right),
        ("to ready", Align::Right),
        ("prefetch ahead", Align::Right),
        ("replay", Align::Right),
        ("alongside ≥", Align::Right),
    ]);
    for w in &d.what_if {
        let name = match w.disk.class {
            coldstart_analyze::doctor::DiskClass::Measured => format!("{} (model check)", w.disk.description),
            class => format!("{}: {}", class.as_str(), w.disk.description),
        };
        let name = match w.only_dev {
            Some(dev) => format!("{name}, device {dev} only"),
            None => name,
        };
        table.row(vec![
            name,
            secs(w.predicted_path_io_wait_ns),
            secs(w.predicted_ns),
            secs(w.with_prefetch_ahead_ns),
            secs(w.prefetch_replay_ns),
            secs(w.with_prefetch_alongside_ns),
        ]);
    }
    table.write(out, "  ")?;
    let w: &WhatIf = first;
    writeln!(
        out,
        "  {} of {} I/O waits costed again from {} read requests ({} of other processes left out); the plan: {} in {} \
         requests in disk order",
        count(w.path_waits - w.path_waits_kept),
        count(w.path_waits),
        count(w.requests),
        count(w.requests_left_out),
        bytes(w.plan_bytes),
        count(w.plan_requests)
    )?;
    for w in &d.what_if {
        writeln!(out, "  {}: {}", w.disk.class.as_str(), w.text)?;
    }
    Ok(())
}

/// The whole start replayed from a prefetch plan, as the what-if on the recorded disk
/// predicts it, with the commands that make the plan and measure it; nothing when the
/// gain would not pass the doctor's threshold.
fn prefetch_the_start(a: &Analysis, d: &Diagnosis, trace: &str, out: &mut dyn Write) -> io::Result<()> {
    let Some(w) = d.what_if.iter().find(|w| w.disk.class == DiskClass::Measured && w.only_dev.is_none())
    else {
        return Ok(());
    };
    let gain = w.time_to_ready_ns - w.with_prefetch_ahead_ns;
    if gain < d.min_gain_ns.max(1) {
        return Ok(());
    }
    writeln!(
        out,
        "\nPrefetch the whole start: with the data it read already in the page cache, about {} instead of {} on \
         the recorded disk (−{}); replayed alongside it, at least {} (the what-if below). Make a plan of the \
         pages it used, then measure it:",
        secs(w.with_prefetch_ahead_ns),
        secs(w.time_to_ready_ns),
        secs(gain),
        secs(w.with_prefetch_alongside_ns)
    )?;
    writeln!(out, "  coldstart prefetch plan {} -o start.plan", shell_quote(trace))?;
    writeln!(out, "  {}", verify_start(&a.trace.command).bench("--cold --runs 10 --prefetch start.plan"))
}

/// The whole diagnosis, as `coldstart doctor` prints it (`trace`: the trace's path, for
/// the commands it suggests).
pub fn doctor(a: &Analysis, d: &Diagnosis, trace: &str, top: usize, out: &mut dyn Write) -> io::Result<()> {
    let mut out = io::BufWriter::new(out);
    let what = match (a.trace.command.is_empty(), a.trace.source) {
        (true, coldstart_trace::Source::Bootchart2) => "a boot (bootchart2 log)".to_owned(),
        _ => a.trace.command.join(" "),
    };
    writeln!(out, "coldstart doctor: {what}")?;
    match &a.overview.ready {
        Some(r) => {
            writeln!(out, "Ready {} after the command started ({})", secs(r.time_to_ready_ns), r.reason)?
        }
        None => writeln!(
            out,
            "No readiness point: the start is taken to run to the end of the trace, {}",
            secs(a.overview.end_ns)
        )?,
    }
    let others = crate::text::other_work(a);
    if let Some(advice) = &others.advice {
        writeln!(out, "BUSY MACHINE: {}; {advice}", others.what)?;
    }
    if let Some(cp) = &a.critical_path {
        writeln!(out, "{}", crate::text::path_summary(a, cp))?;
    }
    let total = d.findings.len() as u64;
    let shown = (d.findings.len().min(top)) as u64;
    let rule = threshold_rule(a, d);
    match (total, shown) {
        (0, _) => writeln!(
            out,
            "No finding {rule}: no pattern in this start passes the thresholds (docs/doctor.md)"
        )?,
        (total, shown) if shown < total => writeln!(
            out,
            "{} of {} findings {rule}, ranked by estimated gain (thresholds in docs/doctor.md)",
            count(shown),
            count(total)
        )?,
        (total, _) => writeln!(
            out,
            "{} {rule}, ranked by estimated gain (thresholds in docs/doctor.md)",
            plural(total, "finding")
        )?,
    }
    for (i, f) in d.findings.iter().take(top).enumerate() {
        finding(i, f, &mut out)?;
    }
    prefetch_the_start(a, d, trace, &mut out)?;
    if !a.start.has_sched && a.overview.block_read_requests == 0 && a.overview.pages_read == 0 {
        writeln!(
            out,
            "\nDisk model and what-if: none: the trace has no block requests or page fills to measure the disk \
             with or to cost again (`coldstart record` gives them)"
        )?;
    } else {
        disk_models_and_what_if(d, &mut out)?;
    }
    writeln!(out, "\nLanguages taken as the user's: {} ({})", d.languages.join(", "), d.languages_source)?;
    if !d.notes.is_empty() {
        writeln!(out, "\nNotes")?;
        for n in &d.notes {
            writeln!(out, "  - {n}")?;
        }
    }
    out.flush()
}
