//! Collapsed stacks, the "folded" format of flamegraph.pl and inferno: one line per
//! distinct stack, `process;outermost;…;innermost COUNT`, from the trace's stack samples.
//! Also the input of the flame graph (`coldstart report --format flamegraph`).

use std::collections::BTreeMap;
use std::io::{self, Write};

use coldstart_trace::{Nanos, StackIndex, Trace};

/// Which samples to fold.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    /// Only these processes (all when empty).
    pub pids: Vec<i32>,
    /// Only samples in `[from, to)` (trace time).
    pub between: Option<(Nanos, Nanos)>,
    /// Only samples of these threads in these intervals, `(tid, from, to)` with both ends
    /// included (the critical path's CPU segments).
    pub spans: Option<Vec<(i32, Nanos, Nanos)>>,
}

/// A name as the format allows it: no `;` (the separator) and no line break.
fn clean(name: &str) -> String {
    name.chars().map(|c| if c == ';' || c.is_control() { '_' } else { c }).collect()
}

/// The folded lines of the samples `filter` keeps, sorted (as inferno wants them).
pub fn lines(trace: &Trace, filter: &Filter) -> Vec<String> {
    let index = StackIndex::new(trace);
    let comm: std::collections::HashMap<i32, &str> =
        trace.processes.iter().map(|p| (p.pid, p.name())).collect();
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    let mut names: std::collections::HashMap<u32, String> = std::collections::HashMap::new();
    for s in &trace.stack_samples {
        if !filter.pids.is_empty() && !filter.pids.contains(&s.pid) {
            continue;
        }
        if filter.between.is_some_and(|(from, to)| s.t_ns < from || s.t_ns >= to) {
            continue;
        }
        if filter.spans.as_ref().is_some_and(|spans| {
            !spans.iter().any(|&(tid, from, to)| tid == s.tid && (from..=to).contains(&s.t_ns))
        }) {
            continue;
        }
        let mut line = clean(comm.get(&s.pid).copied().unwrap_or("?"));
        for f in index.frames(s.stack_id).iter().rev() {
            line.push(';');
            line.push_str(names.entry(f.id).or_insert_with(|| {
                let name = clean(&index.name(f));
                if f.kernel { format!("{name}_[k]") } else { name }
            }));
        }
        *counts.entry(line).or_default() += 1;
    }
    counts.into_iter().map(|(stack, n)| format!("{stack} {n}")).collect()
}

pub fn write(trace: &Trace, filter: &Filter, out: &mut dyn Write) -> io::Result<()> {
    for line in lines(trace, filter) {
        writeln!(out, "{line}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use coldstart_trace::{Frame, Process, Stack, StackSample};

    use super::*;

    #[test]
    fn stacks_fold_outermost_first_with_counts() {
        let frame = |id, symbol: &str, kernel| Frame {
            id,
            mapping_id: None,
            kernel,
            address: u64::from(id),
            symbol: Some(symbol.into()),
        };
        let trace = Trace {
            processes: vec![Process { pid: 7, comm: "app".into(), ..Default::default() }],
            frames: vec![
                frame(1, "main", false),
                frame(2, "parse;json", false),
                frame(3, "clear_page", true),
            ],
            stacks: vec![
                Stack { id: 1, parent_id: None, frame_id: 1 },
                Stack { id: 2, parent_id: Some(1), frame_id: 2 },
                Stack { id: 3, parent_id: Some(2), frame_id: 3 },
            ],
            stack_samples: [(2, 10), (3, 20), (2, 30), (1, 40)]
                .iter()
                .map(|&(stack, t)| StackSample { t_ns: t, pid: 7, tid: 7, cpu: 0, stack_id: Some(stack) })
                .collect(),
            ..Default::default()
        };
        assert_eq!(
            lines(&trace, &Filter::default()),
            ["app;main 1", "app;main;parse_json 2", "app;main;parse_json;clear_page_[k] 1"]
        );
        let early = Filter { between: Some((0, 25)), ..Default::default() };
        assert_eq!(lines(&trace, &early), ["app;main;parse_json 1", "app;main;parse_json;clear_page_[k] 1"]);
        assert!(lines(&trace, &Filter { pids: vec![8], ..Default::default() }).is_empty());
        let path = Filter { spans: Some(vec![(7, 15, 30), (8, 0, 100)]), ..Default::default() };
        assert_eq!(lines(&trace, &path), ["app;main;parse_json 1", "app;main;parse_json;clear_page_[k] 1"]);
    }
}
