//! Draws the process rows: the name (indented by tree depth, joined to its parent's
//! by a connector) in the left column, a bar from fork to exit shaded by state
//! column by column (one short bar per life for folded helpers), exec ticks labelled
//! with the new program's name, and a diamond where the process reached a milestone.

use std::io::{self, Write};

use super::processes::{IO_WAIT, RUNNABLE, RUNNING, Row, RowKind};
use super::scale::TimeScale;
use super::xml::{Svg, num};

pub const ROW: f64 = 16.0;
const BAR: f64 = 11.0;
/// Rough width of a character of the label font, to cut names that do not fit.
const CHAR: f64 = 6.2;
const INDENT: f64 = 10.0;
const MAX_INDENT_LEVELS: usize = 12;

/// The state a column shows and how strongly (1 to 4), or `None` when asleep.
fn column_state(v: &[f64; 3], column_ns: f64) -> Option<(usize, usize)> {
    // Ties go to I/O wait, then running: the states a reader looks for.
    let state = [IO_WAIT, RUNNING, RUNNABLE].into_iter().max_by(|&a, &b| {
        v[a].partial_cmp(&v[b]).unwrap_or(std::cmp::Ordering::Equal).then(rank(b).cmp(&rank(a)))
    })?;
    if v[state] <= 0.0 {
        return None;
    }
    let fraction = (v[state] / column_ns).clamp(0.0, 1.0);
    Some((state, ((fraction * 4.0).ceil() as usize).clamp(1, 4)))
}

fn rank(state: usize) -> usize {
    match state {
        IO_WAIT => 0,
        RUNNING => 1,
        _ => 2,
    }
}

fn state_class(state: usize) -> &'static str {
    match state {
        RUNNING => "run",
        RUNNABLE => "cpuwait",
        _ => "io",
    }
}

fn fit(name: &str, width: f64) -> String {
    let max = (width / CHAR).floor().max(2.0) as usize;
    if name.chars().count() <= max {
        name.to_owned()
    } else {
        let mut cut: String = name.chars().take(max - 1).collect();
        cut.push('…');
        cut
    }
}

/// Draws `rows` from `y` down; `label_x` is the left edge of the name column.
pub fn draw<W: Write>(
    svg: &mut Svg<W>,
    rows: &[Row],
    scale: &TimeScale,
    label_x: f64,
    y: f64,
) -> io::Result<()> {
    let right = scale.x0 + scale.width;
    // The last row drawn at each depth: a row's parent is the last one a level up.
    let mut last_at_depth: Vec<usize> = Vec::new();
    for (k, row) in rows.iter().enumerate() {
        let top = y + k as f64 * ROW;
        if k % 2 == 1 {
            svg.rect(label_x, top, right - label_x, ROW, "zebra")?;
        }
        let depth = row.depth.min(MAX_INDENT_LEVELS);
        last_at_depth.truncate(depth);
        if depth > 0
            && let Some(&parent) = last_at_depth.last()
        {
            let x = label_x + (depth - 1) as f64 * INDENT + 3.0;
            let parent_bottom = y + parent as f64 * ROW + ROW - 2.0;
            svg.path(
                &format!(
                    "M{} {}V{}H{}",
                    num(x),
                    num(parent_bottom),
                    num(top + ROW / 2.0),
                    num(label_x + depth as f64 * INDENT - 2.0)
                ),
                "tree",
            )?;
        }
        last_at_depth.push(k);
        let indent = depth as f64 * INDENT;
        let name_width = scale.x0 - 10.0 - label_x - indent;
        let pid = row.pid.map(|p| format!(" {p}")).unwrap_or_default();
        let label = fit(&row.name, name_width - pid.len() as f64 * CHAR);
        let (lx, ly) = (num(label_x + indent), num(top + 12.0));
        let class = match row.kind {
            RowKind::Process => "name",
            RowKind::Helpers => "name helpers",
            RowKind::Others => "name others",
        };
        svg.open("text", &[("x", &lx), ("y", &ly), ("class", class)])?;
        svg.text_element("tspan", &[], &label)?;
        if !pid.is_empty() {
            svg.text_element("tspan", &[("class", "pid"), ("dx", "4")], pid.trim_start())?;
        }
        svg.close("text")?;

        svg.open("g", &[("class", "bar")])?;
        svg.text_element("title", &[], &row.tooltip)?;
        let (x1, x2) = (scale.x(row.start_ns), scale.x(row.end_ns).max(scale.x(row.start_ns) + 1.0));
        let bar_top = top + (ROW - BAR) / 2.0;
        match row.kind {
            RowKind::Process => svg.rect(x1, bar_top, x2 - x1, BAR, "alive")?,
            RowKind::Others => svg.rect(x1, bar_top, x2 - x1, BAR, "alive others")?,
            RowKind::Helpers => {
                for &(start, end) in &row.lives {
                    let (lx1, lx2) = (scale.x(start), scale.x(end).max(scale.x(start) + 1.0));
                    svg.rect(lx1, bar_top, lx2 - lx1, BAR, "alive helpers")?;
                }
            }
        }
        if let Some(cols) = &row.activity {
            let column_ns = scale.column_ns();
            let mut c = 0;
            while c < cols.len() {
                let Some(state) = column_state(&cols[c], column_ns) else {
                    c += 1;
                    continue;
                };
                let start = c;
                while c < cols.len() && column_state(&cols[c], column_ns) == Some(state) {
                    c += 1;
                }
                // Samples may reach past the ends of a short life: draw within the bar only.
                let (sx, ex) = (scale.column_x(start).max(x1), scale.column_x(c).min(x2));
                svg.rect(sx, bar_top, ex - sx, BAR, &format!("{} l{}", state_class(state.0), state.1))?;
            }
        }
        if row.forked {
            svg.line(x1, bar_top - 1.0, x1, bar_top + BAR + 1.0, "fork")?;
        }
        if row.exited {
            svg.line(x2, bar_top - 1.0, x2, bar_top + BAR + 1.0, "fork")?;
        }
        for &(start, end) in &row.critical {
            let (sx, ex) = (scale.x(start), scale.x(end).max(scale.x(start) + 0.5));
            svg.line(sx, bar_top + BAR + 1.0, ex, bar_top + BAR + 1.0, "critical")?;
        }
        svg.close("g")?;
        for (t, name) in &row.milestones {
            let (x, mid) = (scale.x(*t), bar_top + BAR / 2.0);
            svg.open("g", &[("class", "reached")])?;
            svg.text_element("title", &[], &format!("{name} reached here at {:.3} s", *t as f64 / 1e9))?;
            svg.path(
                &format!("M{} {}l5 5l-5 5l-5 -5z", num(x), num(mid - 5.0)),
                if name == "ready" { "reached ready" } else { "reached" },
            )?;
            svg.close("g")?;
        }
        let mut free_from = f64::MIN;
        for (t, name) in &row.execs {
            let x = scale.x(*t);
            svg.line(x, bar_top - 1.5, x, bar_top + BAR + 1.5, "exec")?;
            if x + 2.0 >= free_from {
                let room = right - x - 2.0;
                let text = fit(name, room.min(160.0));
                svg.text(x + 2.5, top + 11.5, "exec-name", "start", &text)?;
                free_from = x + 2.5 + text.chars().count() as f64 * 5.2 + 6.0;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_column_shows_its_main_state_with_its_share() {
        assert_eq!(column_state(&[0.0, 0.0, 0.0], 100.0), None);
        assert_eq!(column_state(&[100.0, 0.0, 0.0], 100.0), Some((RUNNING, 4)));
        assert_eq!(column_state(&[10.0, 0.0, 30.0], 100.0), Some((IO_WAIT, 2)));
        assert_eq!(column_state(&[20.0, 20.0, 20.0], 100.0), Some((IO_WAIT, 1)));
        assert_eq!(column_state(&[300.0, 0.0, 0.0], 100.0), Some((RUNNING, 4)));
    }
}
