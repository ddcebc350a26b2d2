//! A replay report as text: planned, already resident, fetched, skipped (and why),
//! and the time it took.

use std::fmt::Write;

use crate::replay::{ReplayReport, Tally};

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / 1048576.0)
}

fn line(out: &mut String, what: &str, t: Tally, extra: &str) {
    if t.ranges > 0 || t.bytes > 0 || what == "planned" {
        let _ = writeln!(out, "  {what:<18} {:>9} in {:>6} ranges{extra}", mib(t.bytes), t.ranges);
    }
}

/// The report, one outcome per line, for a terminal.
pub fn render(r: &ReplayReport) -> String {
    let mut out = String::new();
    let how = r.options.as_ref().map_or(String::new(), |o| {
        let prio = o.io_priority.map_or("inherited".to_owned(), |p| p.to_string());
        format!(" ({} threads, {}, I/O priority {prio})", o.depth, o.method.name())
    });
    let _ = writeln!(
        out,
        "prefetch: {:.3} s{how}{}",
        r.elapsed_s,
        if r.cancelled { ", stopped early" } else { "" }
    );
    if let Some(choice) = &r.alongside {
        let _ = writeln!(out, "  {}", choice.describe());
    }
    line(&mut out, "planned", r.planned, &format!(" of {} files", r.planned_files));
    line(&mut out, "already resident", r.resident, "");
    line(&mut out, "fetched", r.fetched, "");
    line(&mut out, "read (residency ?)", r.unknown_residency, " (the kernel would not say what was cached)");
    line(
        &mut out,
        "metadata fetched",
        r.metadata_fetched,
        &format!(" (of {} planned)", mib(r.metadata_planned.bytes)),
    );
    line(&mut out, "skipped, stale", r.stale, &format!(" ({} files changed since the plan)", r.stale_files));
    line(&mut out, "skipped, missing", r.missing, &format!(" ({} files gone)", r.missing_files));
    line(&mut out, "skipped, unreadable", r.unreadable, &format!(" ({} files)", r.unreadable_files));
    line(
        &mut out,
        "skipped, budget",
        r.over_budget,
        &format!(" (budget {}: {})", mib(r.budget_bytes), r.budget),
    );
    line(&mut out, "failed", r.failed, "");
    line(&mut out, "not reached", r.not_reached, " (stopped before)");
    let _ = writeln!(
        out,
        "  files opened {}, directories warmed {}{}{}",
        r.files_opened,
        r.directories,
        if r.directories_failed > 0 { format!(" ({} failed)", r.directories_failed) } else { String::new() },
        if r.entries_looked_up > 0 {
            format!(", their entries looked up {}", r.entries_looked_up)
        } else {
            String::new()
        }
    );
    if r.metadata_unreadable.ranges > 0 {
        let _ = writeln!(
            out,
            "  not replayed: {} of filesystem metadata ({} ranges: directories and inode tables, {:.0} % of \
             the plan's bytes), because this machine does not let the replay open the disk device (a VM's \
             disk or kernel lockdown refuses even root). The start reads those blocks itself, about one \
             request per range, as it did when recorded. On this machine, warm what can be reached through \
             the filesystem with --stat-entries (looks up every entry of the plan's directories); elsewhere, \
             run the replay as root on a machine that lets root read the disk.",
            mib(r.metadata_unreadable.bytes),
            r.metadata_unreadable.ranges,
            if r.planned.bytes > 0 {
                100.0 * r.metadata_unreadable.bytes as f64 / r.planned.bytes as f64
            } else {
                0.0
            }
        );
    }
    for p in &r.problems {
        let _ = writeln!(out, "  {p}");
    }
    if r.more_problems > 0 {
        let _ = writeln!(out, "  … and {} more problems", r.more_problems);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(unreadable_metadata: Tally) -> ReplayReport {
        let mut r = ReplayReport {
            planned: Tally { ranges: 300, bytes: 30 << 20 },
            planned_files: 120,
            fetched: Tally {
                ranges: 300 - unreadable_metadata.ranges,
                bytes: (30 << 20) - unreadable_metadata.bytes,
            },
            ..ReplayReport::default()
        };
        r.unreadable = unreadable_metadata;
        r.metadata_planned = unreadable_metadata;
        r.metadata_unreadable = unreadable_metadata;
        r
    }

    #[test]
    fn metadata_the_disk_would_not_give_is_said_with_its_cost_and_what_to_do() {
        let text = render(&report(Tally { ranges: 90, bytes: 3 << 20 }));
        let said = text.lines().find(|l| l.contains("not replayed")).expect(&text);
        assert!(said.contains("3.0 MiB of filesystem metadata (90 ranges"), "{said}");
        assert!(said.contains("10 % of the plan's bytes"), "{said}");
        assert!(said.contains("--stat-entries"), "{said}");
        assert!(!render(&report(Tally::default())).contains("not replayed"));
    }

    #[test]
    fn a_paced_replay_says_what_it_found_and_how_often_it_gave_way() {
        use crate::replay::{AlongsideChoice, AlongsideMode, DeviceFacts, Priority};
        let loop0 = DeviceFacts {
            dev: coldstart_trace::Dev::new(7, 0),
            name: Some("loop0".into()),
            decided_by: Some("loop0".into()),
            scheduler: Some("none".into()),
            throttle: None,
            priority: Priority::Ignored,
        };
        let mut r = report(Tally::default());
        r.alongside = Some(AlongsideChoice {
            asked: AlongsideMode::Auto,
            mode: AlongsideMode::Paced,
            devices: vec![loop0],
            gave_way: 12,
            gave_way_s: 0.25,
        });
        let text = render(&r);
        let said = text.lines().find(|l| l.contains("alongside")).expect(&text);
        assert_eq!(
            said.trim(),
            "alongside paced (detected): first-need order, 2 reads of at most 1024 KiB in flight, gave way 12 \
             times (0.25 s); devices: loop0: scheduler none: ignores I/O priority (first in, first out)"
        );
        assert!(!render(&report(Tally::default())).contains("alongside"));
    }
}
