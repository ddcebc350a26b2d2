//! `cmdline2.log` and `paternity.log`, written by bootchart-collector when the
//! kernel reports process events: the executable and arguments of every exec
//! (`PID`, `:EXE`, `:ARG\0ARG\0…` blocks), and the parent of every fork
//! (`CHILD PARENT` lines), more exact than the parent a later sample shows.

use std::collections::HashMap;

/// Executable and argument vector of each pid's last exec.
pub fn parse_cmdlines(text: &str) -> HashMap<i32, (String, Vec<String>)> {
    let mut execs = HashMap::new();
    for block in text.split("\n\n") {
        let mut lines = block.trim_start_matches('\n').lines();
        let (Some(pid), Some(exe)) = (lines.next(), lines.next()) else { continue };
        let (Ok(pid), Some(exe)) = (pid.trim().parse::<i32>(), exe.strip_prefix(':')) else { continue };
        let args = lines.next().and_then(|l| l.strip_prefix(':')).unwrap_or("");
        let argv = args.split('\0').filter(|a| !a.is_empty()).map(str::to_owned).collect();
        execs.insert(pid, (exe.to_owned(), argv));
    }
    execs
}

/// The parent of each forked pid.
pub fn parse_paternity(text: &str) -> HashMap<i32, i32> {
    text.lines()
        .filter_map(|line| {
            let mut words = line.split_whitespace();
            Some((words.next()?.parse().ok()?, words.next()?.parse().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execs_and_parents() {
        let execs =
            parse_cmdlines("12\n:/bin/sh\n:sh\0-c\0echo hi\0\n\n13\n:/usr/bin/true\n:\n\nnot a pid\n:x\n\n");
        assert_eq!(
            execs[&12],
            ("/bin/sh".to_owned(), vec!["sh".to_owned(), "-c".to_owned(), "echo hi".to_owned()])
        );
        assert_eq!(execs[&13], ("/usr/bin/true".to_owned(), vec![]));
        assert_eq!(execs.len(), 2);
        let parents = parse_paternity("12 1\n13 12\ngarbage\n");
        assert_eq!((parents[&12], parents[&13], parents.len()), (1, 12, 2));
    }
}
