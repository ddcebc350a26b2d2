//! The CPU graph (user, system, iowait of the whole machine) and the disk graph (read
//! throughput and IOPS), binned into the pixel columns of the time axis.
//!
//! Both come from the periodic samples; without CPU samples the CPU graph shows the
//! traced threads' running time from the scheduler, and without disk samples the disk
//! graph is built from the recorded block read requests.

use std::io::{self, Write};

use coldstart_analyze::units::count;
use coldstart_trace::{BlockOp, Nanos, ThreadState, Trace};

use super::scale::{TimeScale, nice_ceil};
use super::xml::{Svg, num};

/// A value per column, `None` where no sample covers the column.
type Series = Vec<Option<f64>>;

/// Time-weighted mean per column of values that hold over `(start, end]`.
fn binned(scale: &TimeScale, samples: impl Iterator<Item = (Nanos, Nanos, f64)>) -> Series {
    let n = scale.columns();
    let (mut sum, mut covered) = (vec![0.0; n], vec![0.0; n]);
    for (start, end, value) in samples {
        scale.spread(start, end, |c, ns| {
            sum[c] += value * ns;
            covered[c] += ns;
        });
    }
    sum.iter().zip(&covered).map(|(s, c)| (*c > 0.0).then(|| s / c)).collect()
}

/// Adds `b` to `a` column by column (a column is present when either is).
fn plus(a: &Series, b: &Series) -> Series {
    a.iter()
        .zip(b)
        .map(|(x, y)| match (x, y) {
            (None, None) => None,
            _ => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
        })
        .collect()
}

/// A step-shaped filled band between `lower` and `upper` (values mapped by `y`), for
/// the columns where both are present.
fn band(scale: &TimeScale, lower: &Series, upper: &Series, y: impl Fn(f64) -> f64) -> String {
    let n = scale.columns();
    let ys: Vec<Option<(String, String)>> = (0..n)
        .map(|c| match (lower[c], upper[c]) {
            (Some(l), Some(u)) if u > l => Some((num(y(l)), num(y(u)))),
            _ => None,
        })
        .collect();
    let mut d = String::new();
    let mut c = 0;
    while c < n {
        if ys[c].is_none() {
            c += 1;
            continue;
        }
        let start = c;
        while c < n && ys[c].is_some() {
            c += 1;
        }
        let run = &ys[start..c];
        let x = |k: usize| num(scale.column_x(start + k));
        d.push_str(&format!("M{} {}", x(0), run[0].as_ref().map_or("", |v| &v.1)));
        for k in 1..run.len() {
            if let (Some(prev), Some(cur)) = (&run[k - 1], &run[k])
                && prev.1 != cur.1
            {
                d.push_str(&format!("H{}V{}", x(k), cur.1));
            }
        }
        d.push_str(&format!("H{}V{}", x(run.len()), run[run.len() - 1].as_ref().map_or("", |v| &v.0)));
        for k in (0..run.len() - 1).rev() {
            if let (Some(cur), Some(next)) = (&run[k], &run[k + 1])
                && cur.0 != next.0
            {
                d.push_str(&format!("H{}V{}", x(k + 1), cur.0));
            }
        }
        d.push_str(&format!("H{}Z", x(0)));
    }
    d
}

/// A step-shaped line through the present columns.
fn step_line(scale: &TimeScale, values: &Series, y: impl Fn(f64) -> f64) -> String {
    let mut d = String::new();
    let mut prev: Option<String> = None;
    for (c, v) in values.iter().enumerate() {
        let x = num(scale.column_x(c));
        match (v.map(|v| num(y(v))), &prev) {
            (Some(vy), None) => d.push_str(&format!("M{x} {vy}")),
            (Some(vy), Some(p)) if *p != vy => d.push_str(&format!("H{x}V{vy}")),
            (None, Some(_)) => d.push_str(&format!("H{x}")),
            _ => {}
        }
        prev = v.map(|v| num(y(v)));
    }
    if prev.is_some() {
        d.push_str(&format!("H{}", num(scale.column_x(values.len()))));
    }
    d
}

/// The CPU graph in the box `y..y + height`; returns the legend of what it shows.
pub fn cpu<W: Write>(
    svg: &mut Svg<W>,
    trace: &Trace,
    scale: &TimeScale,
    y: f64,
    height: f64,
) -> io::Result<()> {
    let to_y = |v: f64| y + height - v.clamp(0.0, 1.0) * height;
    frame(svg, scale, y, height)?;
    svg.line(scale.x0, y + height / 2.0, scale.x0 + scale.width, y + height / 2.0, "grid")?;
    let label_x = scale.x0 - 6.0;
    svg.text(label_x, y + 9.0, "axis", "end", "100 %")?;
    svg.text(label_x, y + height, "axis", "end", "0")?;
    let zero: Series = vec![Some(0.0); scale.columns()];
    if trace.cpu_samples.is_empty() {
        // The traced threads' running time, as a share of all CPUs.
        let cpus = f64::from(trace.meta.cpu_count.max(1));
        let mut running = vec![0.0; scale.columns()];
        for s in trace.sched.iter().filter(|s| s.state == ThreadState::Running) {
            scale.spread(s.start_ns, s.end_ns, |c, ns| running[c] += ns);
        }
        let per = scale.column_ns() * cpus;
        let series: Series = running.iter().map(|ns| Some(ns / per)).collect();
        svg.path(&band(scale, &zero, &series, to_y), "cpu-user")?;
        return graph_label(svg, scale, y, "CPU", "traced threads running (no CPU samples)");
    }
    let window = |f: fn(&coldstart_trace::CpuSample) -> f64| {
        binned(scale, trace.cpu_samples.iter().map(|s| (s.t_ns - s.dt_ns.max(0), s.t_ns, f(s))))
    };
    let user = window(|s| s.user);
    let system = plus(&user, &window(|s| s.system));
    let iowait = plus(&system, &window(|s| s.iowait));
    svg.path(&band(scale, &zero, &user, to_y), "cpu-user")?;
    svg.path(&band(scale, &user, &system, to_y), "cpu-system")?;
    svg.path(&band(scale, &system, &iowait, to_y), "cpu-iowait")?;
    graph_label(svg, scale, y, "CPU", "whole machine, all CPUs")
}

/// The disk graph in the box `y..y + height`.
pub fn disk<W: Write>(
    svg: &mut Svg<W>,
    trace: &Trace,
    scale: &TimeScale,
    y: f64,
    height: f64,
) -> io::Result<()> {
    frame(svg, scale, y, height)?;
    let (throughput, iops, what) = if trace.disk_samples.is_empty() {
        let (t, i) = from_requests(trace, scale);
        (t, i, "recorded read requests (no disk samples)")
    } else {
        let mut devs: Vec<_> = trace.disk_samples.iter().map(|s| s.dev).collect();
        devs.sort_unstable();
        devs.dedup();
        let n = scale.columns();
        let (mut throughput, mut iops): (Series, Series) = (vec![None; n], vec![None; n]);
        for dev in devs {
            let of_dev = || trace.disk_samples.iter().filter(move |s| s.dev == dev);
            let rate = |v: u64, dt: Nanos| v as f64 * 1e9 / dt.max(1) as f64;
            let t = binned(
                scale,
                of_dev().map(|s| (s.t_ns - s.dt_ns.max(0), s.t_ns, rate(s.read_bytes, s.dt_ns))),
            );
            let i =
                binned(scale, of_dev().map(|s| (s.t_ns - s.dt_ns.max(0), s.t_ns, rate(s.read_ios, s.dt_ns))));
            throughput = plus(&throughput, &t);
            iops = plus(&iops, &i);
        }
        (throughput, iops, "all disks, from /proc/diskstats samples")
    };
    let max = |s: &Series| s.iter().flatten().fold(0.0f64, |m, v| m.max(*v));
    let top_bytes = nice_ceil(max(&throughput) / (1024.0 * 1024.0)) * 1024.0 * 1024.0;
    let top_iops = nice_ceil(max(&iops));
    let zero: Series = vec![Some(0.0); scale.columns()];
    let scaled = |top: f64| move |v: f64| y + height - (v / top).clamp(0.0, 1.0) * height;
    svg.path(&band(scale, &zero, &throughput, scaled(top_bytes)), "disk-read")?;
    svg.path(&step_line(scale, &iops, scaled(top_iops)), "disk-iops")?;
    let label_x = scale.x0 - 6.0;
    svg.text(label_x, y + 9.0, "axis", "end", &format!("{} MiB/s", trim(top_bytes / (1024.0 * 1024.0))))?;
    svg.text(label_x, y + height, "axis", "end", "0")?;
    let right = scale.x0 + scale.width + 6.0;
    svg.text(right, y + 9.0, "axis iops-axis", "start", &format!("{} IOPS", count(top_iops as u64)))?;
    svg.text(right, y + height, "axis iops-axis", "start", "0")?;
    graph_label(svg, scale, y, "Disk reads", what)
}

/// Read bytes and requests per second from the block requests, in windows of at
/// least 10 ms so that single requests do not turn into spikes.
fn from_requests(trace: &Trace, scale: &TimeScale) -> (Series, Series) {
    let window = (scale.column_ns() * 4.0).max(10e6) as Nanos;
    let slots = ((scale.t1 - scale.t0) / window + 1) as usize;
    let (mut b, mut n) = (vec![0u64; slots], vec![0u64; slots]);
    for r in trace.block_ios.iter().filter(|r| r.op == BlockOp::Read) {
        let Some(t) = r.complete_ns.or(r.issue_ns) else { continue };
        if t < scale.t0 || t > scale.t1 {
            continue;
        }
        let k = ((t - scale.t0) / window) as usize;
        b[k] = b[k].saturating_add(u64::from(r.bytes));
        n[k] += 1;
    }
    let per_sec = 1e9 / window as f64;
    let windows = |v: &[u64]| {
        let samples = v.iter().enumerate().map(|(k, &x)| {
            let start = scale.t0 + k as Nanos * window;
            (start, start + window, x as f64 * per_sec)
        });
        binned(scale, samples)
    };
    (windows(&b), windows(&n))
}

fn trim(v: f64) -> String {
    let s = format!("{v:.1}");
    s.strip_suffix(".0").map(str::to_owned).unwrap_or(s)
}

fn frame<W: Write>(svg: &mut Svg<W>, scale: &TimeScale, y: f64, height: f64) -> io::Result<()> {
    svg.rect(scale.x0, y, scale.width, height, "plot")
}

fn graph_label<W: Write>(
    svg: &mut Svg<W>,
    scale: &TimeScale,
    y: f64,
    name: &str,
    what: &str,
) -> io::Result<()> {
    let x = scale.x0 - 60.0;
    svg.text(x, y + 12.0, "graph-name", "end", name)?;
    svg.text(x, y + 25.0, "graph-what", "end", what)
}
