//! Splitting a bootchart2 `*.log` file into timed blocks: a line holding the time
//! (centiseconds since boot, from /proc/uptime) followed by the lines of the /proc
//! file read at that moment, blocks separated by blank lines.

use crate::error::{ImportError, Result};

/// Times beyond ~31 years of uptime are taken as garbage (and keep nanosecond times far from overflow).
const MAX_TIME_CS: i64 = 100_000_000_000;

/// One sample: the time it was taken and its lines, each with its 1-based line number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block<'a> {
    /// Centiseconds since boot.
    pub time_cs: i64,
    /// The line number of the time line.
    pub line: usize,
    pub lines: Vec<(usize, &'a str)>,
}

/// Splits `text` into blocks. A block whose first line is not a whole number is an
/// error naming `file` and the line; a block whose last line says `not running`
/// (the collector's note for a vanished process) is dropped, as pybootchartgui does.
pub fn timed_blocks<'a>(file: &str, text: &'a str) -> Result<Vec<Block<'a>>> {
    let mut blocks = Vec::new();
    let mut current: Option<Block<'a>> = None;
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        let line = raw.trim();
        if line.is_empty() {
            blocks.extend(current.take());
            continue;
        }
        match current.as_mut() {
            Some(block) => block.lines.push((number, line)),
            None => {
                let time_cs = line.parse::<i64>().ok().filter(|t| (0..MAX_TIME_CS).contains(t));
                let time_cs = time_cs.ok_or_else(|| ImportError::Parse {
                    location: format!("{file}:{number}"),
                    message: format!(
                        "expected the time of a sample (centiseconds since boot) on a line of its own, found {:?}",
                        shorten(line)
                    ),
                })?;
                current = Some(Block { time_cs, line: number, lines: Vec::new() });
            }
        }
    }
    blocks.extend(current);
    blocks.retain(|b| !b.lines.last().is_some_and(|(_, l)| l.ends_with(" not running")));
    Ok(blocks)
}

/// The first 60 characters of `s`, for error messages.
pub fn shorten(s: &str) -> String {
    match s.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_with_their_line_numbers() {
        let text = "10\na b\nc\n\n\n25\nd\n\n";
        let blocks = timed_blocks("f", text).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].time_cs, 10);
        assert_eq!(blocks[0].lines, vec![(2, "a b"), (3, "c")]);
        assert_eq!(blocks[1], Block { time_cs: 25, line: 6, lines: vec![(7, "d")] });
    }

    #[test]
    fn a_bad_time_names_file_and_line() {
        let err = timed_blocks("x/proc_stat.log", "10\na\n\nfoo\nb\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "x/proc_stat.log:4: expected the time of a sample (centiseconds since boot) on a line of its own, found \"foo\""
        );
    }

    #[test]
    fn not_running_blocks_are_dropped_and_crlf_is_accepted() {
        let blocks = timed_blocks("f", "1\r\n12 x not running\r\n\r\n2\r\nok\r\n").unwrap();
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].lines, vec![(5, "ok")]);
    }
}
