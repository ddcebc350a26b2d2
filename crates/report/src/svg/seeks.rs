//! The seek plot: every block request of a disk as a point at (issue time, disk
//! offset), coloured by the process that issued it, so that a start reading in disk
//! order shows as a rising line and a seeking one as scattered dots.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};

use coldstart_analyze::units::{bytes, count, plural};
use coldstart_analyze::{Analysis, DiskAnalysis};
use coldstart_trace::{BlockOp, Trace};

use super::scale::{TimeScale, decimals_for, nice_step};
use super::xml::{Svg, num};

/// Distinct colours for the processes with most requests; the rest share grey.
pub const PALETTE: usize = 8;
pub const HEIGHT: f64 = 150.0;
/// Height of the legend under each plot.
pub const LEGEND: f64 = 34.0;

/// The disks worth a plot: those with recorded read requests.
pub fn disks(analysis: &Analysis) -> Vec<&DiskAnalysis> {
    analysis.disks.iter().filter(|d| d.traced_read_requests > 0 && !d.requests.is_empty()).collect()
}

/// A disk-offset axis over `lo..=hi` bytes: its ends, the step between ticks and how
/// to write them (divisor, unit, decimals), in binary units.
struct OffsetAxis {
    lo: f64,
    hi: f64,
    step: f64,
    unit: f64,
    unit_name: &'static str,
    decimals: usize,
}

impl OffsetAxis {
    fn new(lo: u64, hi: u64) -> OffsetAxis {
        let range = (hi - lo).max(1 << 20) as f64;
        let (unit, unit_name) =
            if range >= (1u64 << 30) as f64 { ((1u64 << 30) as f64, "GiB") } else { (1048576.0, "MiB") };
        let step_units = nice_step(range / unit / 4.0);
        let step = step_units * unit;
        let lo = (lo as f64 / step).floor() * step;
        let hi = ((hi as f64 / step).floor() + 1.0) * step;
        OffsetAxis { lo, hi, step, unit, unit_name, decimals: decimals_for(step_units) }
    }

    fn label(&self, offset: f64) -> String {
        format!("{:.*} {}", self.decimals, offset / self.unit, self.unit_name)
    }
}

/// The processes that get their own colour: in-scope processes of the trace, most
/// requests first (then pid), at most [`PALETTE`].
fn coloured(trace: &Trace, disk: &DiskAnalysis) -> Vec<(i32, u64)> {
    let traced: BTreeSet<i32> = trace.processes.iter().filter(|p| p.in_scope).map(|p| p.pid).collect();
    let mut counts: HashMap<i32, u64> = HashMap::new();
    for r in disk.requests.iter().filter(|r| traced.contains(&r.pid)) {
        *counts.entry(r.pid).or_default() += 1;
    }
    let mut ranked: Vec<(i32, u64)> = counts.into_iter().collect();
    ranked.sort_by_key(|&(pid, n)| (std::cmp::Reverse(n), pid));
    ranked.truncate(PALETTE);
    ranked
}

/// Draws the plot of `disk` in `y..y + HEIGHT` and its legend below.
pub fn plot<W: Write>(
    svg: &mut Svg<W>,
    trace: &Trace,
    analysis: &Analysis,
    disk: &DiskAnalysis,
    scale: &TimeScale,
    y: f64,
) -> io::Result<()> {
    svg.rect(scale.x0, y, scale.width, HEIGHT, "plot")?;
    let offsets = disk.requests.iter().map(|r| r.sector * 512);
    let axis = OffsetAxis::new(offsets.clone().min().unwrap_or(0), offsets.max().unwrap_or(0));
    let to_y = |offset: f64| y + HEIGHT - (offset - axis.lo) / (axis.hi - axis.lo) * HEIGHT;
    let ticks = ((axis.hi - axis.lo) / axis.step).round() as u64;
    for k in 0..=ticks {
        let tick = axis.lo + k as f64 * axis.step;
        let ty = to_y(tick);
        svg.line(scale.x0, ty, scale.x0 + scale.width, ty, "grid")?;
        svg.text(scale.x0 - 6.0, ty + 3.5, "axis", "end", &axis.label(tick))?;
    }
    let colours = coloured(trace, disk);
    let colour_of: HashMap<i32, usize> = colours.iter().enumerate().map(|(k, &(pid, _))| (pid, k)).collect();
    // One square per pixel, class and kind: overlapping points add nothing but bytes.
    let mut points: BTreeSet<(usize, bool, i64, i64)> = BTreeSet::new();
    for r in &disk.requests {
        let Some(t) = r.issue_ns.or(r.complete_ns) else { continue };
        let class = colour_of.get(&r.pid).map_or(PALETTE, |&k| k);
        let x = scale.x(t).round() as i64;
        let py = to_y((r.sector * 512) as f64).round() as i64;
        points.insert((class, r.op == BlockOp::Read, x, py));
    }
    let mut class = None;
    for &(k, read, x, py) in &points {
        if class != Some((k, read)) {
            if class.is_some() {
                svg.close("g")?;
            }
            let name = if read { format!("p{k}") } else { format!("p{k} write") };
            svg.open("g", &[("class", &name)])?;
            class = Some((k, read));
        }
        let (x, py) = (num(x as f64 - 1.5), num(py as f64 - 1.5));
        svg.empty("rect", &[("x", &x), ("y", &py), ("width", "3"), ("height", "3")])?;
    }
    if class.is_some() {
        svg.close("g")?;
    }
    let flag = match disk.rotational {
        Some(true) => ", kernel flag: rotational",
        Some(false) => ", kernel flag: non-rotational",
        None => "",
    };
    let name_x = scale.x0 - 60.0;
    svg.text(name_x, y + 12.0, "graph-name", "end", &format!("{} seeks", disk.name))?;
    svg.text(name_x, y + 25.0, "graph-what", "end", &format!("{}{flag}", disk.dev))?;
    svg.text(name_x, y + 38.0, "graph-what", "end", "disk offset by time")?;
    legend(svg, analysis, disk, &colours, scale, y + HEIGHT)
}

fn legend<W: Write>(
    svg: &mut Svg<W>,
    analysis: &Analysis,
    disk: &DiskAnalysis,
    colours: &[(i32, u64)],
    scale: &TimeScale,
    y: f64,
) -> io::Result<()> {
    let s = &disk.seeks;
    let summary = format!(
        "{}: {} sequential, {} forward and {} backward ({} far, over {}); reads {}",
        plural(s.requests, "request"),
        count(s.sequential),
        count(s.forward),
        count(s.backward),
        count(s.far),
        bytes(s.threshold_bytes),
        bytes(disk.traced_read_bytes),
    );
    svg.text(scale.x0, y + 13.0, "legend", "start", &summary)?;
    let mut x = scale.x0;
    let ly = y + 27.0;
    let others = disk.requests.len() as u64 - colours.iter().map(|c| c.1).sum::<u64>();
    let entries = colours
        .iter()
        .enumerate()
        .map(|(k, &(pid, n))| (k, format!("{} {pid} ({})", analysis.comm(pid), count(n))))
        .chain(
            (others > 0).then(|| (PALETTE, format!("other processes, kernel workers ({})", count(others)))),
        );
    for (k, label) in entries {
        let width = 14.0 + label.chars().count() as f64 * 5.6 + 14.0;
        if x + width > scale.x0 + scale.width {
            break;
        }
        svg.rect(x, ly - 7.0, 7.0, 7.0, &format!("p{k}"))?;
        svg.text(x + 11.0, ly, "legend", "start", &label)?;
        x += width;
    }
    Ok(())
}
