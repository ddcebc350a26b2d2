//! The bootchart-style chart (`coldstart report --format svg`), drawn from a saved
//! trace and its analysis: a header, the CPU and disk graphs, the phases, one bar
//! per systemd unit whose start took time (a boot), one bar
//! per process in start order under its parent (short helpers folded) shaded by
//! state, milestones across everything (each labelled, labels in lanes so none
//! overlap), and a seek plot per disk.
//!
//! The output is deterministic (fixed number formatting, sorted ties, nothing
//! taken from the clock) and every name from the trace goes through quick_xml's
//! escaping, so a process called `<script>` stays text.

mod bars;
mod graphs;
mod header;
mod processes;
mod scale;
mod seeks;
mod units;
mod xml;

use std::io::{self, Write};

use coldstart_analyze::Analysis;
use coldstart_analyze::units::{duration, plural, secs};
use coldstart_trace::{MarkSource, Nanos, ReadyReason, Trace};

use processes::StateSource;
use scale::TimeScale;
use xml::Svg;

const CSS: &str = include_str!("style.css");
const MARGIN: f64 = 16.0;
/// The column of names left of the plots.
const GUTTER: f64 = 250.0;
/// Room right of the plots for the IOPS axis.
const RIGHT: f64 = 70.0;
const CPU_HEIGHT: f64 = 80.0;
const DISK_HEIGHT: f64 = 70.0;
const PHASES_HEIGHT: f64 = 16.0;
const LINE: f64 = 16.0;

/// How the chart is drawn.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Width of the plots in pixels (one column of binned data per pixel).
    pub plot_width: u32,
    /// Process rows at most (a row of folded helpers counts as one); beyond that, the
    /// least active rows, idle ones first, are summed up in one last row.
    pub max_rows: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options { plot_width: 1200, max_rows: 100 }
    }
}

/// The end of the time axis: the recording, or anything in it that ends later.
fn time_end(trace: &Trace, analysis: &Analysis) -> Nanos {
    let mut end = trace.meta.duration_ns.max(analysis.overview.end_ns);
    end = end.max(trace.processes.iter().filter_map(|p| p.end_ns).max().unwrap_or(0));
    end = end.max(trace.sched.iter().map(|s| s.end_ns).max().unwrap_or(0));
    end = end.max(trace.cpu_samples.iter().map(|s| s.t_ns).max().unwrap_or(0));
    end = end.max(trace.process_samples.iter().map(|s| s.t_ns).max().unwrap_or(0));
    end.max(1)
}

fn cut(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        return text.to_owned();
    }
    let mut t: String = text.chars().take(max_chars.saturating_sub(1)).collect();
    t.push('…');
    t
}

/// Writes the chart of `trace` (analysed as `analysis`) as SVG.
pub fn write(trace: &Trace, analysis: &Analysis, options: &Options, out: &mut dyn Write) -> io::Result<()> {
    let plot_width = f64::from(options.plot_width.max(100));
    let x0 = MARGIN + GUTTER;
    let width = x0 + plot_width + RIGHT + MARGIN;
    let scale = TimeScale::new(0, time_end(trace, analysis), x0, plot_width);
    let rows = processes::rows(trace, analysis, &scale, options.max_rows);
    let header_lines = header::lines(trace, analysis);
    let disks = seeks::disks(analysis);

    // Layout, top to bottom.
    let legend_y = 44.0 + header_lines.len() as f64 * LINE + 8.0;
    let marks_y = legend_y + 2.0;
    let milestones = milestones(analysis, &scale);
    let lanes = milestones.iter().filter_map(|m| m.lane).map(|l| l + 1).max().unwrap_or(0).max(1);
    let ticks_y = marks_y + lanes as f64 * LANE + 22.0;
    let cpu_y = ticks_y + 6.0;
    let disk_y = cpu_y + CPU_HEIGHT + 12.0;
    let phases_y = disk_y + DISK_HEIGHT + 12.0;
    let units_y = phases_y + if analysis.phases.is_empty() { 0.0 } else { PHASES_HEIGHT + 8.0 } + 18.0;
    let unit_rows = units::rows(analysis);
    let rows_y =
        units_y + if unit_rows.is_empty() { 0.0 } else { unit_rows.len() as f64 * units::ROW + 8.0 + 18.0 };
    let rows_end = rows_y + rows.rows.len() as f64 * bars::ROW;
    let bottom_ticks_y = rows_end + 14.0;
    let seeks_y = bottom_ticks_y + 20.0;
    let seeks_end = seeks_y + disks.len() as f64 * (seeks::HEIGHT + seeks::LEGEND + 16.0);
    let mut notes = notes(trace, &rows);
    let unlabelled = milestones.iter().filter(|m| m.lane.is_none()).count();
    if unlabelled > 0 {
        notes.insert(
            0,
            match unlabelled {
                1 => "1 milestone is too close to others for a label of its own: hover its line for its name."
                    .to_owned(),
                n => format!(
                    "{n} milestones are too close to others for labels of their own: hover their lines for their names."
                ),
            },
        );
    }
    let height = seeks_end + notes.len() as f64 * 14.0 + MARGIN;

    let mut svg = Svg::begin(io::BufWriter::new(out), width, height)?;
    let (version, source) = header::stamp(trace);
    svg.comment(&format!(
        "{version}: bootchart of a traced start; re-render with `coldstart report TRACE --format svg`"
    ))?;
    svg.style(CSS)?;
    svg.rect(0.0, 0.0, width, height, "background")?;

    // Header.
    let max_chars = ((width - 2.0 * MARGIN) / 6.0) as usize;
    svg.text(
        MARGIN,
        28.0,
        "title",
        "start",
        &cut(&header::title(trace), max_chars.saturating_sub(40) * 2 / 3),
    )?;
    svg.text(width - MARGIN, 20.0, "stamp", "end", &version)?;
    svg.text(width - MARGIN, 33.0, "stamp", "end", &source)?;
    for (k, l) in header_lines.iter().enumerate() {
        svg.text(MARGIN, 48.0 + k as f64 * LINE, l.class, "start", &cut(&l.text, max_chars))?;
    }
    legend(&mut svg, legend_y)?;

    // Time grid and ticks.
    let ticks = scale.ticks(90.0);
    let grid_bottom = if disks.is_empty() { rows_end } else { seeks_end - seeks::LEGEND - 16.0 };
    svg.open("g", &[("class", "time")])?;
    for (t, label) in &ticks {
        let x = scale.x(*t);
        svg.line(x, cpu_y, x, grid_bottom, "timegrid")?;
        svg.text(x, ticks_y, "tick", "middle", label)?;
        svg.text(x, bottom_ticks_y, "tick", "middle", label)?;
    }
    svg.close("g")?;

    graphs::cpu(&mut svg, trace, &scale, cpu_y, CPU_HEIGHT)?;
    graphs::disk(&mut svg, trace, &scale, disk_y, DISK_HEIGHT)?;
    phases(&mut svg, analysis, &scale, phases_y)?;
    if !unit_rows.is_empty() {
        units::draw(&mut svg, analysis, &unit_rows, &scale, MARGIN, units_y)?;
    }
    let process_what = match rows.source {
        StateSource::Sched => {
            "in start order under their parents, from fork to exit; states from the scheduler"
        }
        StateSource::Samples => {
            "in start order under their parents, from fork to exit; states from /proc samples"
        }
        StateSource::None => "in start order under their parents, from fork to exit (no state data)",
    };
    svg.text(MARGIN, rows_y - 5.0, "graph-name", "start", "Processes")?;
    svg.text(MARGIN + 72.0, rows_y - 5.0, "graph-what", "start", process_what)?;
    bars::draw(&mut svg, &rows.rows, &scale, MARGIN, rows_y)?;
    for (k, disk) in disks.iter().enumerate() {
        let y = seeks_y + k as f64 * (seeks::HEIGHT + seeks::LEGEND + 16.0);
        seeks::plot(&mut svg, trace, analysis, disk, &scale, y)?;
    }
    draw_milestones(&mut svg, &milestones, marks_y, grid_bottom)?;
    for (k, note) in notes.iter().enumerate() {
        svg.text(MARGIN, seeks_end + 10.0 + k as f64 * 14.0, "note", "start", &cut(note, max_chars))?;
    }
    let mut out = svg.end()?;
    out.flush()
}

/// The legend of colours and lines, on one row.
fn legend<W: Write>(svg: &mut Svg<W>, y: f64) -> io::Result<()> {
    enum Key {
        Box(&'static str),
        Line(&'static str),
        Under(&'static str),
    }
    let entries = [
        (Key::Box("run l4"), "running"),
        (Key::Box("cpuwait l4"), "waiting for a CPU"),
        (Key::Box("io l4"), "I/O wait"),
        (Key::Box("alive"), "alive, sleeping"),
        (Key::Line("exec"), "exec"),
        (Key::Line("mark"), "milestone"),
        (Key::Line("ready"), "ready"),
        (Key::Under("critical"), "critical path to ready"),
        (Key::Box("cpu-user"), "CPU user"),
        (Key::Box("cpu-system"), "system"),
        (Key::Box("cpu-iowait"), "iowait"),
        (Key::Box("disk-read"), "disk read MiB/s"),
        (Key::Line("disk-iops"), "read IOPS"),
        (Key::Box("phase-read"), "read phase"),
        (Key::Box("phase-cpu"), "CPU phase"),
        (Key::Box("phase-wait"), "wait phase"),
    ];
    let mut x = MARGIN;
    for (key, label) in entries {
        match key {
            Key::Box(class) => svg.rect(x, y - 9.0, 12.0, 10.0, class)?,
            Key::Line(class) => svg.line(x + 6.0, y - 11.0, x + 6.0, y + 2.0, class)?,
            Key::Under(class) => {
                svg.rect(x, y - 10.0, 12.0, 8.0, "alive")?;
                svg.line(x, y, x + 12.0, y, class)?;
            }
        }
        svg.text(x + 16.0, y, "legend", "start", label)?;
        x += 16.0 + label.chars().count() as f64 * 5.6 + 14.0;
    }
    Ok(())
}

fn phases<W: Write>(svg: &mut Svg<W>, analysis: &Analysis, scale: &TimeScale, y: f64) -> io::Result<()> {
    if analysis.phases.is_empty() {
        return Ok(());
    }
    svg.text(scale.x0 - 60.0, y + 11.5, "graph-name", "end", "Phases")?;
    for p in &analysis.phases {
        let class = match p.kind {
            coldstart_analyze::PhaseKind::Read => "phase-read",
            coldstart_analyze::PhaseKind::Cpu => "phase-cpu",
            coldstart_analyze::PhaseKind::Wait => "phase-wait",
        };
        let (x1, x2) = (scale.x(p.start_ns), scale.x(p.end_ns));
        let (x, w, h, yy) =
            (xml::num(x1), xml::num((x2 - x1).max(0.5)), xml::num(PHASES_HEIGHT), xml::num(y));
        svg.open("g", &[("class", "phase")])?;
        svg.text_element("title", &[], &p.name)?;
        svg.empty("rect", &[("x", &x), ("y", &yy), ("width", &w), ("height", &h), ("class", class)])?;
        let room = ((x2 - x1 - 6.0) / 5.5).floor();
        if room >= 4.0 {
            svg.text(x1 + 3.0, y + 11.5, "phase-name", "start", &cut(&p.name, room as usize))?;
        }
        svg.close("g")?;
    }
    Ok(())
}

/// A milestone's line and label: where it is drawn and the room its label takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Milestone {
    pub x: f64,
    /// `mark`, `origin` or `ready`.
    pub class: &'static str,
    pub text_class: &'static str,
    pub label: String,
    /// The label's lane, 0 at the top; `None` when every lane was taken there, and the
    /// label is only the line's tooltip.
    pub lane: Option<usize>,
    /// The label's left and right ends.
    pub left: f64,
    pub right: f64,
}

/// Height of a lane of milestone labels.
const LANE: f64 = 12.0;
/// Lanes at most: a hundred marks in a millisecond must not make the chart a page high.
const MAX_LANES: usize = 8;
/// Room kept between two labels of a lane.
const LABEL_GAP: f64 = 6.0;

/// A generous width for `text` in the class's font (DejaVu Sans digits are 0.64 em,
/// bold ones 0.7 em), so that labels placed apart never touch when drawn.
pub fn label_width(text: &str, text_class: &str) -> f64 {
    let per_char = if text_class == "ready-name" { 7.0 } else { 9.5 * 0.64 };
    text.chars().count() as f64 * per_char
}

/// Every milestone (marks, `until` milestones), the command's start and the
/// readiness point, in time order, each label in the first lane where it overlaps
/// no other, the readiness point's first. Past [`MAX_LANES`] lanes a label is left to
/// its line's tooltip (and a note says how many were).
pub fn milestones(analysis: &Analysis, scale: &TimeScale) -> Vec<Milestone> {
    let o = &analysis.overview;
    // A mark that is the readiness point is drawn once, as the readiness line.
    let is_ready = |m: &coldstart_trace::Mark| {
        o.ready.as_ref().is_some_and(|r| {
            r.t_ns == m.t_ns
                && match &r.reason {
                    ReadyReason::Mark(name) => *name == m.name,
                    // The last `until` milestone met is the readiness point.
                    reason => m.source == MarkSource::Until && reason.to_string() == m.name,
                }
        })
    };
    let mut lines: Vec<(Nanos, &str, &str, String)> = analysis
        .marks
        .iter()
        .filter(|m| !is_ready(m))
        .map(|m| (m.t_ns, "mark", "mark-name", format!("{} {}", m.name, secs(m.t_ns))))
        .collect();
    if o.origin_ns > 0 {
        lines.push((o.origin_ns, "origin", "mark-name", format!("command start {}", secs(o.origin_ns))));
    }
    if let Some(r) = &o.ready {
        let label = format!(
            "ready at {}: {} after the start ({})",
            secs(r.t_ns),
            duration(r.time_to_ready_ns),
            r.reason
        );
        lines.push((r.t_ns, "ready", "ready-name", label));
    }
    lines.sort_by(|a, b| a.0.cmp(&b.0).then(a.3.cmp(&b.3)));
    // The readiness point is placed first, so it always has its label.
    if let Some(k) = lines.iter().position(|l| l.1 == "ready") {
        let ready = lines.remove(k);
        lines.insert(0, ready);
    }
    let right_edge = scale.x0 + scale.width + RIGHT;
    let mut lanes: Vec<Vec<(f64, f64)>> = Vec::new();
    let mut placed: Vec<Milestone> = lines
        .into_iter()
        .map(|(t, class, text_class, label)| {
            let x = scale.x(t);
            let width = label_width(&label, text_class);
            // Labels near the right edge are written leftwards from their line.
            let (left, right) = if x + 3.0 + width > right_edge {
                (x - 3.0 - width, x - 3.0)
            } else {
                (x + 3.0, x + 3.0 + width)
            };
            let free = |lane: &Vec<(f64, f64)>| {
                lane.iter().all(|&(l, r)| right + LABEL_GAP <= l || left >= r + LABEL_GAP)
            };
            let lane = match lanes.iter().position(free) {
                Some(lane) => Some(lane),
                None if lanes.len() < MAX_LANES => {
                    lanes.push(Vec::new());
                    Some(lanes.len() - 1)
                }
                None => None,
            };
            if let Some(lane) = lane {
                lanes[lane].push((left, right));
            }
            Milestone { x, class, text_class, label, lane, left, right }
        })
        .collect();
    placed.sort_by(|a, b| a.x.total_cmp(&b.x).then(a.label.cmp(&b.label)));
    placed
}

/// Draws the milestones as vertical lines from `top` to `bottom`, their labels in
/// lanes from `top` down.
fn draw_milestones<W: Write>(svg: &mut Svg<W>, lines: &[Milestone], top: f64, bottom: f64) -> io::Result<()> {
    svg.open("g", &[("class", "milestones")])?;
    for m in lines {
        match m.lane {
            Some(lane) => {
                let label_y = top + (lane + 1) as f64 * LANE - 2.0;
                svg.line(m.x, label_y + 2.0, m.x, bottom, m.class)?;
                svg.text(m.left, label_y, m.text_class, "start", &m.label)?;
            }
            None => {
                svg.open("g", &[])?;
                svg.text_element("title", &[], &m.label)?;
                svg.line(m.x, top, m.x, bottom, m.class)?;
                svg.close("g")?;
            }
        }
    }
    svg.close("g")
}

/// Footnotes: where the states came from and which processes were left out.
fn notes(trace: &Trace, rows: &processes::Rows) -> Vec<String> {
    let mut notes = Vec::new();
    if rows.folded > 0 {
        notes.push(format!(
            "{} short-lived helpers (forked and exited within a fiftieth of the recording, under 1 MiB read, no milestone reached, not on the critical path) are folded into {} under their parents; hover one for their names.",
            rows.folded,
            plural(rows.folded_rows as u64, "row")
        ));
    }
    let hidden = rows.hidden_idle + rows.hidden_quiet;
    if hidden > 0 {
        notes.push(format!(
            "Showing {} of {} processes: {} idle ones (no CPU, I/O wait or reads) and {} less active ones (at most {} of CPU and I/O wait each) are summed up in the last row.",
            rows.total - hidden,
            rows.total,
            rows.hidden_idle,
            rows.hidden_quiet,
            duration(rows.quiet_max_ns)
        ));
    }
    notes.push(match rows.source {
        StateSource::Sched => {
            "Process states from scheduler intervals of all their threads; a pixel shows the state that took most of it (I/O wait first on ties), paler when it took less of the pixel.".to_owned()
        }
        StateSource::Samples => format!(
            "Process states from /proc samples{}: CPU use as running, the rest of a D-state sample as I/O wait.",
            trace.meta.sample_hz.map(|hz| format!(" at {hz:.1} per second")).unwrap_or_default()
        ),
        StateSource::None => "The trace has no scheduler data and no process samples: bars show lifetimes only.".to_owned(),
    });
    notes.push(
        "Times are seconds since the start of the recording; hover a bar for its process's details."
            .to_owned(),
    );
    notes
}
