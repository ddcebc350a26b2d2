//! The systemd units of a boot, as `systemd-analyze plot` draws them: one row per unit
//! whose start took time, in start order, a bar from activating to active labelled with
//! how long it took, the units of the chain to the target underlined, and each unit's
//! split (CPU, I/O, waits on other units, the rest) in its tooltip.

use std::io::{self, Write};

use coldstart_analyze::units::duration;
use coldstart_analyze::{Analysis, UnitTime};

use super::scale::TimeScale;
use super::xml::{Svg, num};

pub const ROW: f64 = 14.0;
const BAR: f64 = 9.0;
/// Rows at most; the shortest starts beyond are counted in the section's title.
pub const MAX_ROWS: usize = 60;

/// The units drawn, in start order: the longest [`MAX_ROWS`] starts that took time.
pub fn rows(analysis: &Analysis) -> Vec<&UnitTime> {
    // `analysis.units` is longest first.
    let mut rows: Vec<&UnitTime> = analysis.units.iter().filter(|u| u.took_ns > 0).take(MAX_ROWS).collect();
    rows.sort_by(|a, b| a.activating_ns.cmp(&b.activating_ns).then(a.name.cmp(&b.name)));
    rows
}

/// Draws the section's title and `rows` from `y` down.
pub fn draw<W: Write>(
    svg: &mut Svg<W>,
    analysis: &Analysis,
    rows: &[&UnitTime],
    scale: &TimeScale,
    label_x: f64,
    y: f64,
) -> io::Result<()> {
    let timed = analysis.units.iter().filter(|u| u.took_ns > 0).count();
    let what = format!(
        "{} of {} units that became active took time; a bar from activating to active, as systemd-analyze plot{}",
        timed,
        analysis.units.len(),
        match &analysis.unit_chain {
            Some(c) => format!("; underlined: the chain to {}", c.target),
            None => String::new(),
        }
    );
    svg.text(label_x, y - 5.0, "graph-name", "start", "systemd units")?;
    svg.text(label_x + 100.0, y - 5.0, "graph-what", "start", &what)?;
    let in_chain =
        |name: &str| analysis.unit_chain.as_ref().is_some_and(|c| c.links.iter().any(|l| l == name));
    let right = scale.x0 + scale.width;
    for (k, u) in rows.iter().enumerate() {
        let top = y + k as f64 * ROW;
        if k % 2 == 1 {
            svg.rect(label_x, top, right - label_x, ROW, "zebra")?;
        }
        svg.open("g", &[("class", "unit")])?;
        let split = crate::text::unit_split(analysis, u);
        svg.text_element("title", &[], &format!("{} +{}: {split}", u.name, duration(u.took_ns)))?;
        svg.text(label_x, top + 11.0, "name", "start", &super::cut(&u.name, 38))?;
        let (x1, x2) = (scale.x(u.activating_ns), scale.x(u.active_ns));
        let width = (x2 - x1).max(1.0);
        let bar_top = top + (ROW - BAR) / 2.0;
        svg.empty(
            "rect",
            &[
                ("x", &num(x1)),
                ("y", &num(bar_top)),
                ("width", &num(width)),
                ("height", &num(BAR)),
                ("class", "unit-start"),
            ],
        )?;
        if in_chain(&u.name) {
            svg.line(x1, bar_top + BAR + 1.0, x1 + width, bar_top + BAR + 1.0, "critical")?;
        }
        svg.text(x1 + width + 3.0, top + 10.5, "pid", "start", &format!("+{}", duration(u.took_ns)))?;
        svg.close("g")?;
    }
    Ok(())
}
