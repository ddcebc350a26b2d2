//! `taskstats.log`: what bootchart-collector writes instead of `proc_ps.log` when
//! the kernel has taskstats. Each sample lists the processes whose totals changed
//! since the previous one, as `PID PPID COMM CPU_NS BLKIO_DELAY_NS SWAPIN_DELAY_NS`
//! (nanoseconds since the process started).
//!
//! The lines become the same per-sample process records as `proc_ps.log`'s, with
//! what taskstats lacks left out: no start time (a process starts at the first
//! sample that lists it, as in pybootchartgui), no user/system split (all CPU is
//! counted as user), no memory. The state is made up as pybootchartgui does: R when
//! the process used CPU in the interval, D when it only waited for I/O or swap, S
//! otherwise.

use std::collections::HashMap;

use super::blocks::{shorten, timed_blocks};
use super::problems::Problems;
use super::proc_ps::{PsBlock, PsLine};
use crate::error::Result;

const NS_PER_CS: f64 = 10_000_000.0;

pub fn parse(file: &str, text: &str, problems: &mut Problems) -> Result<Vec<PsBlock>> {
    let blocks = timed_blocks(file, text)?;
    let mut last: HashMap<i32, (u64, u64)> = HashMap::new();
    let mut out = Vec::with_capacity(blocks.len());
    for block in &blocks {
        let mut lines = Vec::with_capacity(block.lines.len());
        for &(number, text) in &block.lines {
            let Some(entry) = parse_line(text) else {
                problems.skip(
                    "unreadable taskstats.log lines",
                    || format!("{file}:{number}"),
                    || {
                        format!(
                            "expected 'PID PPID COMM CPU_NS BLKIO_NS SWAPIN_NS', found {:?}",
                            shorten(text)
                        )
                    },
                );
                continue;
            };
            let waited = entry.blkio_ns.saturating_add(entry.swapin_ns);
            let (cpu_before, waited_before) =
                last.insert(entry.pid, (entry.cpu_ns, waited)).unwrap_or((0, 0));
            let state = if entry.cpu_ns > cpu_before {
                'R'
            } else if waited > waited_before {
                'D'
            } else {
                'S'
            };
            lines.push(PsLine {
                pid: entry.pid,
                ppid: entry.ppid,
                comm: entry.comm,
                state,
                utime_cs: entry.cpu_ns as f64 / NS_PER_CS,
                stime_cs: 0.0,
                majflt: 0,
                rss: None,
                starttime: None,
                vsize: None,
            });
        }
        out.push(PsBlock { time_cs: block.time_cs, lines });
    }
    Ok(out)
}

struct Entry {
    pid: i32,
    ppid: i32,
    comm: String,
    cpu_ns: u64,
    blkio_ns: u64,
    swapin_ns: u64,
}

/// Numbers are taken from both ends, so a command name with spaces still parses.
fn parse_line(line: &str) -> Option<Entry> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let n = words.len();
    if n < 6 {
        return None;
    }
    let comm = words[2..n - 3].join(" ");
    let comm = comm.strip_prefix('(').and_then(|c| c.strip_suffix(')')).unwrap_or(&comm).to_owned();
    Some(Entry {
        pid: words[0].parse().ok()?,
        ppid: words[1].parse().ok()?,
        comm,
        cpu_ns: words[n - 3].parse().ok()?,
        blkio_ns: words[n - 2].parse().ok()?,
        swapin_ns: words[n - 1].parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_process_records_with_a_made_up_state() {
        let text = "200\n1 0 init 30000000 0 0\n50 1 gmain thread 10000000 5 0\n\n\
                    220\n50 1 gmain thread 10000000 900 0\n60 50 (sh) 20000000 0 0\nbad line\n\n";
        let mut problems = Problems::default();
        let blocks = parse("t", text, &mut problems).unwrap();
        assert_eq!(problems.count("unreadable taskstats.log lines"), 1);
        assert_eq!(blocks.len(), 2);
        let gmain = &blocks[0].lines[1];
        assert_eq!((gmain.pid, gmain.ppid, gmain.comm.as_str(), gmain.state), (50, 1, "gmain thread", 'R'));
        assert_eq!(gmain.utime_cs, 1.0);
        assert_eq!(gmain.starttime, None);
        let later = &blocks[1].lines;
        assert_eq!((later[0].state, later[1].comm.as_str(), later[1].state), ('D', "sh", 'R'));
    }
}
