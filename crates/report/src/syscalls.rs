//! The text of `coldstart syscalls`: a timeline like `strace -f -tt -T -y` (time since
//! the start, process/thread, the call with its path or fd, result, time in the call)
//! and totals per call (like `strace -c`) and per directory.

use std::io::{self, Write};

use coldstart_analyze::syscalls::{SyscallLine, SyscallSummary};
use coldstart_analyze::units;
use coldstart_trace::Nanos;

/// The kernel's names of the errors system calls return most at a start.
fn errno_name(errno: i64) -> Option<&'static str> {
    Some(match errno {
        1 => "EPERM",
        2 => "ENOENT",
        4 => "EINTR",
        8 => "ENOEXEC",
        9 => "EBADF",
        11 => "EAGAIN",
        13 => "EACCES",
        17 => "EEXIST",
        20 => "ENOTDIR",
        21 => "EISDIR",
        22 => "EINVAL",
        25 => "ENOTTY",
        36 => "ENAMETOOLONG",
        40 => "ELOOP",
        61 => "ENODATA",
        95 => "EOPNOTSUPP",
        104 => "ECONNRESET",
        110 => "ETIMEDOUT",
        111 => "ECONNREFUSED",
        115 => "EINPROGRESS",
        _ => return None,
    })
}

/// `-2 ENOENT`, `3`, or `?` for a call that had not returned.
fn result(line: &SyscallLine<'_>) -> String {
    match (line.call.result, line.call.errno()) {
        (_, Some(errno)) => match errno_name(errno) {
            Some(name) => format!("-1 {name}"),
            None => format!("-1 errno {errno}"),
        },
        (Some(r), None) if line.call.name == "mmap" => format!("{r:#x}"),
        (Some(r), None) => r.to_string(),
        (None, None) => "? (not returned when the recording ended)".into(),
    }
}

/// The call with its argument as strace -y shows it: `openat("/etc/ld.so.cache")`,
/// `read(3</usr/lib/libc.so.6>)`, `futex()`.
fn call_text(line: &SyscallLine<'_>) -> String {
    let c = line.call;
    let opens =
        c.fd.is_some() && c.result.is_some_and(|r| Some(r) == c.fd.map(i64::from)) && line.path.is_some();
    match (c.fd, line.path) {
        (Some(fd), Some(path)) if !opens => format!("{}({fd}<{path}>)", c.name),
        (Some(fd), None) => format!("{}({fd})", c.name),
        (_, Some(path)) => format!("{}({path:?})", c.name),
        (None, None) => format!("{}()", c.name),
    }
}

/// The timeline, one call per line.
pub fn timeline(lines: &[SyscallLine<'_>], end: Nanos, out: &mut dyn Write) -> io::Result<()> {
    for l in lines {
        let who = if l.call.pid == l.call.tid {
            format!("{}", l.call.pid)
        } else {
            format!("{}/{}", l.call.pid, l.call.tid)
        };
        writeln!(
            out,
            "{:>11.6} [{who:>11}] {} = {} <{:.6}>",
            l.call.enter_ns as f64 / 1e9,
            call_text(l),
            result(l),
            l.duration_ns(end) as f64 / 1e9
        )?;
    }
    Ok(())
}

/// Totals per call, then per directory.
pub fn summary(s: &SyscallSummary, out: &mut dyn Write) -> io::Result<()> {
    let total = s.total_ns.max(1) as f64;
    writeln!(
        out,
        "{:>7} {:>11} {:>11} {:>10} {:>9} {:>8}  syscall",
        "% time", "seconds", "usecs/call", "max usecs", "calls", "errors"
    )?;
    writeln!(out, "{}", "-".repeat(72))?;
    for c in &s.calls {
        writeln!(
            out,
            "{:>7.2} {:>11.6} {:>11} {:>10} {:>9} {:>8}  {}",
            100.0 * c.total_ns as f64 / total,
            c.total_ns as f64 / 1e9,
            c.total_ns / 1000 / c.calls.max(1) as i64,
            c.max_ns / 1000,
            c.calls,
            if c.errors > 0 { c.errors.to_string() } else { String::new() },
            c.name
        )?;
    }
    let calls: u64 = s.calls.iter().map(|c| c.calls).sum();
    let errors: u64 = s.calls.iter().map(|c| c.errors).sum();
    writeln!(out, "{}", "-".repeat(72))?;
    writeln!(
        out,
        "{:>7.2} {:>11.6} {:>11} {:>10} {:>9} {:>8}  total",
        100.0,
        s.total_ns as f64 / 1e9,
        s.total_ns / 1000 / calls.max(1) as i64,
        "",
        calls,
        if errors > 0 { errors.to_string() } else { String::new() }
    )?;
    if s.dirs.is_empty() {
        return Ok(());
    }
    writeln!(out)?;
    writeln!(out, "Time in calls that named a path, by directory (the deepest that hold a share of it):")?;
    for d in &s.dirs {
        let fstype = d.fstype.as_deref().map(|t| format!(" ({t})")).unwrap_or_default();
        writeln!(out, "  {:>10}  {:>7} calls  {}{fstype}", units::duration(d.total_ns), d.calls, d.dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_analyze::syscalls::{SyscallFilter, lines, summary as totals};
    use coldstart_trace::{Mount, Syscall, Trace};

    #[test]
    fn a_timeline_line_reads_like_strace() {
        let mut t = Trace::default();
        t.meta.duration_ns = 10_000_000;
        t.mounts = vec![Mount { point: "/".into(), fstype: "ext4".into(), ..Mount::default() }];
        t.syscalls = vec![
            Syscall {
                tid: 11,
                pid: 10,
                enter_ns: 1_500_000,
                exit_ns: Some(3_500_000),
                name: "newfstatat".into(),
                result: Some(-2),
                path: Some("/opt/p/x".into()),
                ..Syscall::default()
            },
            Syscall {
                tid: 10,
                pid: 10,
                enter_ns: 4_000_000,
                exit_ns: Some(4_000_100),
                name: "openat".into(),
                result: Some(3),
                fd: Some(3),
                path: Some("/opt/p/y".into()),
                ..Syscall::default()
            },
        ];
        let all = lines(&t, &SyscallFilter::default());
        let mut out = Vec::new();
        timeline(&all, t.meta.duration_ns, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "   0.001500 [      10/11] newfstatat(\"/opt/p/x\") = -1 ENOENT <0.002000>\n   0.004000 [         10] openat(\"/opt/p/y\") = 3 <0.000000>\n"
        );
        let mut out = Vec::new();
        summary(&totals(&all, &t.mounts, t.meta.duration_ns), &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(" 100.00    0.002000        2000       2000         1        1  newfstatat"),
            "{text}"
        );
        assert!(text.contains("2.0 ms        2 calls  /opt/p (ext4)"), "{text}");
    }
}
