//! Metadata system calls on a slow filesystem: stats, opens, accesses, readlinks and
//! directory reads of paths on FUSE or a network filesystem, each a round trip to a
//! daemon or a server (GIMP scanning its plug-ins over NFS). The gain is the time the
//! critical path spent in them (or, without a path, their wall-clock time), which a
//! local copy or attribute caching would all but remove.

use coldstart_trace::Nanos;

use crate::analysis::SegmentKind;
use crate::doctor::facts::Facts;
use crate::doctor::finding::{
    Audience, Confidence, Evidence, EvidenceInterval, EvidenceProcess, Figure, Finding, FindingKind, Gain,
};
use crate::syscalls::{SyscallFilter, SyscallLine, lines, mount_of, summary, under};
use crate::units::{count, duration};

/// The calls that ask a filesystem about names rather than move data.
const METADATA_CALLS: &[&str] = &[
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
    "open",
    "openat",
    "openat2",
    "creat",
    "getdents64",
    "execve",
    "execveat",
    "chdir",
];

/// Wall-clock time covered by some of the intervals (parallel calls count once).
fn covered(mut intervals: Vec<(Nanos, Nanos)>) -> Nanos {
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(Nanos, Nanos)> = None;
    for (s, e) in intervals {
        match &mut current {
            Some((_, ce)) if s <= *ce => *ce = (*ce).max(e),
            _ => {
                if let Some((cs, ce)) = current {
                    total += ce - cs;
                }
                current = Some((s, e));
            }
        }
    }
    total + current.map_or(0, |(s, e)| e - s)
}

pub(crate) fn slow_filesystem(f: &Facts) -> Vec<Finding> {
    let trace = f.trace;
    if trace.syscalls.is_empty() {
        return Vec::new();
    }
    let (from, to) = (f.origin, f.ready);
    let slow: Vec<SyscallLine<'_>> = lines(trace, &SyscallFilter::default())
        .into_iter()
        .filter(|l| METADATA_CALLS.contains(&l.call.name.as_str()))
        .filter(|l| l.call.enter_ns < to && l.call.exit_ns.unwrap_or(to) > from)
        .filter(|l| f.a.processes.iter().any(|p| p.pid == l.call.pid && p.in_scope))
        .filter(|l| l.path.and_then(|p| mount_of(&trace.mounts, p)).is_some_and(|m| m.is_remote_or_fuse()))
        .collect();
    let totals = summary(&slow, &trace.mounts, to);
    let Some(top) = totals.dirs.first() else { return Vec::new() };
    let dir = top.dir.clone();
    let fstype = top.fstype.clone().unwrap_or_else(|| "fuse".into());
    let calls: Vec<&SyscallLine<'_>> =
        slow.iter().filter(|l| l.path.is_some_and(|p| under(p, &dir))).collect();
    let wall = covered(
        calls.iter().map(|l| (l.call.enter_ns.max(from), l.call.exit_ns.unwrap_or(to).min(to))).collect(),
    );
    let on_path: Option<Nanos> = f.path.map(|cp| {
        cp.segments
            .iter()
            .filter(|s| !matches!(s.kind, SegmentKind::Cpu | SegmentKind::CpuWait))
            .filter(|s| {
                s.waited_in.as_ref().is_some_and(|w| {
                    METADATA_CALLS.contains(&w.syscall.as_str())
                        && w.on_slow_filesystem()
                        && w.dir.as_deref().is_some_and(|d| under(d, &dir))
                })
            })
            .map(|s| s.end_ns - s.start_ns)
            .sum()
    });
    let gain_ns = on_path.unwrap_or(wall);
    if gain_ns < f.min_gain {
        return Vec::new();
    }
    let n = calls.len() as u64;
    let errors = calls.iter().filter(|l| l.call.errno().is_some()).count() as u64;
    let mut pids: Vec<i32> = calls.iter().map(|l| l.call.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let mut longest: Vec<&&SyscallLine<'_>> = calls.iter().collect();
    longest.sort_by_key(|l| std::cmp::Reverse(l.duration_ns(to)));
    longest.truncate(f.config.max_listed);
    longest.sort_by_key(|l| l.call.enter_ns);
    let (gain_name, gain_text) = match on_path {
        Some(_) => ("path_ns", "the critical path's time in them"),
        None => ("calls_wall_ns", "their wall-clock time (no critical path)"),
    };
    let mut figures =
        vec![Figure::count("calls", n), Figure::count("errors", errors), Figure::ns("calls_wall_ns", wall)];
    if let Some(p) = on_path {
        figures.push(Figure::ns("path_ns", p));
    }
    vec![Finding {
        kind: FindingKind::SlowFilesystem,
        title: format!(
            "{} metadata syscalls on a slow filesystem ({fstype}) under {dir} cost {}",
            count(n),
            duration(wall)
        ),
        evidence: Evidence {
            summary: format!(
                "{} calls that name paths under {dir} ({}; {} failed) took {} of wall-clock time before ready; on \
                 {fstype} each is a request to its daemon or server, and the mount caches no attributes",
                count(n),
                {
                    let mut names: Vec<&str> = calls.iter().map(|l| l.call.name.as_str()).collect();
                    names.sort_unstable();
                    names.dedup();
                    names.join(", ")
                },
                count(errors),
                duration(wall)
            ),
            files: Vec::new(),
            files_total: 0,
            processes: pids
                .iter()
                .map(|&pid| EvidenceProcess {
                    pid,
                    comm: f.a.comm(pid).to_owned(),
                    ns: calls.iter().filter(|l| l.call.pid == pid).map(|l| l.duration_ns(to)).sum(),
                    read_bytes: 0,
                    in_scope: true,
                })
                .collect(),
            figures: figures.clone(),
            intervals: longest
                .iter()
                .map(|l| EvidenceInterval {
                    start_ns: l.call.enter_ns,
                    end_ns: l.call.exit_ns.unwrap_or(to),
                    tid: Some(l.call.tid),
                    what: format!("{} {}", l.call.name, l.path.unwrap_or("")),
                })
                .collect(),
        },
        gain: Gain {
            ns: gain_ns,
            formula: gain_name.to_owned(),
            text: format!("{} ({gain_text}), if the calls were answered locally", duration(gain_ns)),
            inputs: figures.into_iter().filter(|x| x.name == gain_name).collect(),
            ahead_ns: None,
        },
        audience: Audience::Administrator,
        suggestion: format!(
            "Keep what the start looks up under {dir} on a local disk (a copy, or a cache such as cachefilesd or \
             fscache), let the mount cache attributes and names (NFS without noac, actimeo; FUSE attr_timeout and \
             entry_timeout), or look up fewer names: `coldstart syscalls TRACE --path {dir}` lists each call."
        ),
        verify: format!("{}  # with the directory local or cached", f.bench_command()),
        confidence: if on_path.is_some() { Confidence::High } else { Confidence::Medium },
        caveat: Some(
            "a local answer still costs a few microseconds per call, and a cache must be warm to help"
                .to_owned(),
        ),
    }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_calls_count_once() {
        assert_eq!(covered(vec![(0, 10), (5, 12), (20, 25)]), 17);
        assert_eq!(covered(Vec::new()), 0);
        assert!(under("/opt/a/b", "/opt/a") && !under("/opt/ab", "/opt/a") && under("/x", "/"));
    }
}
