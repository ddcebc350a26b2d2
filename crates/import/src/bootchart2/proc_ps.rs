//! `proc_ps.log`: at each sample, one /proc/PID/stat line per process. Parsed with
//! the `procfs` crate's /proc/PID/stat parser, after checking the line has the
//! shape that parser relies on (it would panic on some garbled lines).

use procfs::FromRead;
use procfs::process::Stat;

use super::blocks::{shorten, timed_blocks};
use super::problems::Problems;
use crate::error::Result;

/// What one sample says about one process: the fields of a /proc/PID/stat line
/// the importer uses (or what a taskstats.log line gives; see [`super::taskstats`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PsLine {
    pub pid: i32,
    pub ppid: i32,
    pub comm: String,
    pub state: char,
    /// CPU time used so far, in centiseconds (clock ticks at USER_HZ = 100).
    pub utime_cs: f64,
    pub stime_cs: f64,
    pub majflt: u64,
    /// Pages.
    pub rss: Option<u64>,
    /// Clock ticks since boot; `None` when the log does not say (taskstats).
    pub starttime: Option<u64>,
    /// Bytes of address space; 0 for kernel threads (and zombies).
    pub vsize: Option<u64>,
}

/// The processes seen at one sample.
#[derive(Clone, Debug, PartialEq)]
pub struct PsBlock {
    pub time_cs: i64,
    pub lines: Vec<PsLine>,
}

pub fn parse(file: &str, text: &str, problems: &mut Problems) -> Result<Vec<PsBlock>> {
    let blocks = timed_blocks(file, text)?;
    let mut out = Vec::with_capacity(blocks.len());
    for block in &blocks {
        let mut lines = Vec::with_capacity(block.lines.len());
        for &(number, line) in &block.lines {
            match parse_line(line) {
                Ok(ps) => lines.push(ps),
                Err(why) => {
                    problems.skip("unreadable proc_ps.log lines", || format!("{file}:{number}"), || why)
                }
            }
        }
        out.push(PsBlock { time_cs: block.time_cs, lines });
    }
    Ok(out)
}

/// Parses one /proc/PID/stat line.
pub fn parse_line(line: &str) -> Result<PsLine, String> {
    let line = line.trim();
    let bad = |what: &str| format!("not a /proc/PID/stat line ({what}): {:?}", shorten(line));
    let open = line.find('(').ok_or_else(|| bad("no '(' before the command name"))?;
    let close = line.rfind(')').ok_or_else(|| bad("no ')' after the command name"))?;
    let bytes = line.as_bytes();
    if open < 2
        || bytes[open - 1] != b' '
        || close < open
        || bytes.get(close + 1) != Some(&b' ')
        || line.len() < close + 3
    {
        return Err(bad("expected 'PID (COMM) STATE …'"));
    }
    let stat = Stat::from_read(line.as_bytes()).map_err(|e| bad(&e.to_string()))?;
    Ok(PsLine {
        pid: stat.pid,
        ppid: stat.ppid,
        comm: stat.comm,
        state: stat.state,
        utime_cs: stat.utime as f64,
        stime_cs: stat.stime as f64,
        majflt: stat.majflt,
        rss: Some(stat.rss),
        starttime: Some(stat.starttime),
        vsize: Some(stat.vsize),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_2_6_10_line() {
        let line = "1 (init) S 0 0 0 0 -1 8388864 658 7072 23 0 0 118 3 11 15 0 1 0 282 3244032 124 4294967295 134512640 134541009 3219633440 3219623804 7227298 0 0 1475401980 671819267 3222738200 0 0 0 0";
        let ps = parse_line(line).unwrap();
        assert_eq!((ps.pid, ps.ppid, ps.comm.as_str(), ps.state), (1, 0, "init", 'S'));
        assert_eq!((ps.utime_cs, ps.stime_cs, ps.majflt), (0.0, 118.0, 23));
        assert_eq!((ps.starttime, ps.rss, ps.vsize), (Some(282), Some(124), Some(3_244_032)));
    }

    #[test]
    fn command_names_with_spaces_and_parentheses() {
        let line = "42 (a (b) c) R 1 0 0 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 99 1000 2 0 0 0 0 0 0 0 0 0 0 0 0 0";
        let ps = parse_line(line).unwrap();
        assert_eq!(
            (ps.pid, ps.comm.as_str(), ps.state, ps.utime_cs, ps.starttime),
            (42, "a (b) c", 'R', 5.0, Some(99))
        );
    }

    #[test]
    fn garbled_lines_are_errors() {
        for line in ["", "(x) S 1", "1 (x)", "1 (x) ", "1 (x", "1 x) S", ") (", "1 (x) S 0 0", "1 (é)é S"] {
            assert!(parse_line(line).is_err(), "{line:?}");
        }
    }
}
