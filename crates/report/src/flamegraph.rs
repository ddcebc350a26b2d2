//! The flame graph of a trace's CPU samples: the collapsed stacks of
//! [`crate::export::folded`] drawn by inferno as an interactive SVG.

use std::io::{self, Write};

use coldstart_trace::Trace;

use crate::export::folded::{self, Filter};

/// Draws the samples `filter` keeps; an error when there are none.
pub fn write(trace: &Trace, filter: &Filter, title: &str, out: &mut dyn Write) -> io::Result<()> {
    let lines = folded::lines(trace, filter);
    if lines.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "the trace has no CPU samples with stacks (recorded with --no-cpu-samples, by an older coldstart, \
             or imported)",
        ));
    }
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_owned();
    options.count_name = "samples".to_owned();
    options.deterministic = true;
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
}
