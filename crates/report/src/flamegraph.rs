//! The flame graph of a trace's CPU samples: the collapsed stacks of
//! [`crate::export::folded`] drawn by inferno as an interactive SVG.

use std::io::{self, Write};

use coldstart_trace::Trace;

use crate::export::folded::{self, Filter};

/// Draws the samples `filter` keeps; an error when there are none.
pub fn write(trace: &Trace, filter: &Filter, title: &str, out: &mut dyn Write) -> io::Result<()> {
    draw(trace, filter, title, false, out)
}

/// The flame graph of all the trace's samples as a `data:` URL of an SVG without scripts
/// (frames keep their tooltips), for the HTML report's CPU tab; `None` without samples.
pub fn static_data_url(trace: &Trace, title: &str) -> Option<String> {
    use base64::Engine;
    let mut svg = Vec::new();
    draw(trace, &Filter::default(), title, true, &mut svg).ok()?;
    Some(format!("data:image/svg+xml;base64,{}", base64::engine::general_purpose::STANDARD.encode(svg)))
}

fn draw(
    trace: &Trace,
    filter: &Filter,
    title: &str,
    no_javascript: bool,
    out: &mut dyn Write,
) -> io::Result<()> {
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
    options.no_javascript = no_javascript;
    inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(|e| io::Error::other(e.to_string()))
}
