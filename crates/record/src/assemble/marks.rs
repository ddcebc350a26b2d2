//! The trace's marks from their sources: the marks file (a line with a pid comes
//! from `coldstart mark` in the command, one without from the user), the scope's
//! `trace_marker` writes, the output line that made the command ready, and the
//! readiness conditions met (`until` marks named by the condition, with their owner).

use coldstart_trace::{Mark, MarkSource, Unit};

use crate::assemble::Clock;
use crate::assemble::decode::SpoolData;
use crate::assemble::procs::ProcTree;
use crate::assemble::system_view::SystemView;
use crate::ftrace::events::Event;

/// Every mark of the recording, by time.
pub fn marks(data: &SpoolData, clock: &Clock, tree: &ProcTree, system: &dyn SystemView) -> Vec<Mark> {
    let text = data
        .marks
        .clone()
        .or_else(|| data.start.marks_file.as_deref().and_then(|p| system.read_marks_file(p)));
    let mut marks: Vec<Mark> = coldstart_launch::marks::parse(text.as_deref().unwrap_or(""))
        .marks
        .into_iter()
        .map(|m| {
            let source = if m.pid.is_some() { MarkSource::Command } else { MarkSource::MarksFile };
            Mark { t_ns: clock.since_t0(m.boottime_ns), pid: m.pid, name: m.name, source, tid: None }
        })
        .collect();
    for e in &data.scope.events {
        if let Event::Print { tid, text } = &e.event {
            let pid = Some(tree.tgid(*tid));
            marks.push(Mark {
                t_ns: clock.boot(e.ts),
                pid,
                name: text.clone(),
                source: MarkSource::TraceMarker,
                tid: Some(*tid),
            });
        }
    }
    let ready_line = data.end.as_ref().and_then(|e| Some((e.ready_line.clone()?, e.ready_boot_ns?)));
    if let Some((line, ready)) = ready_line {
        marks.push(Mark {
            t_ns: clock.since_t0(ready),
            pid: None,
            name: line,
            source: MarkSource::Output,
            tid: None,
        });
    }
    for m in data.end.iter().flat_map(|e| &e.milestones) {
        marks.push(Mark {
            t_ns: clock.since_t0(m.boot_ns),
            pid: m.pid,
            name: m.name.clone(),
            source: MarkSource::Until,
            tid: m.tid,
        });
    }
    marks.sort_by_key(|m| m.t_ns);
    marks
}

/// The systemd units the recorder read from their manager, on the trace's clock.
pub fn units(data: &SpoolData, clock: &Clock) -> Vec<Unit> {
    let mut units: Vec<Unit> = data
        .end
        .iter()
        .flat_map(|e| &e.units)
        .map(|u| Unit {
            name: u.name.clone(),
            manager: u.manager.clone(),
            activating_ns: u.activating_boot_ns.map(|t| clock.since_t0(t)),
            active_ns: u.active_boot_ns.map(|t| clock.since_t0(t)),
            deactivating_ns: u.deactivating_boot_ns.map(|t| clock.since_t0(t)),
            pid: u.pid,
            after: u.after.clone(),
        })
        .collect();
    units.sort_by_key(|u| (u.activating_ns.or(u.active_ns), u.name.clone()));
    units
}
