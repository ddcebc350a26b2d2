//! The time axis shared by every graph of the chart: trace time to x, one column per
//! pixel for binned data, and tick marks at round intervals.

use coldstart_trace::Nanos;

/// Maps `t0..t1` (trace nanoseconds) onto `x0..x0 + width` pixels.
#[derive(Clone, Copy, Debug)]
pub struct TimeScale {
    pub t0: Nanos,
    pub t1: Nanos,
    pub x0: f64,
    pub width: f64,
}

impl TimeScale {
    pub fn new(t0: Nanos, t1: Nanos, x0: f64, width: f64) -> TimeScale {
        TimeScale { t0, t1: t1.max(t0 + 1), x0, width: width.max(1.0) }
    }

    fn span(&self) -> f64 {
        (self.t1 - self.t0) as f64
    }

    /// The x of time `t`, clamped to the axis.
    pub fn x(&self, t: Nanos) -> f64 {
        self.x0 + (t.clamp(self.t0, self.t1) - self.t0) as f64 / self.span() * self.width
    }

    /// Columns of binned data: one per pixel.
    pub fn columns(&self) -> usize {
        self.width as usize
    }

    /// Nanoseconds one column covers.
    pub fn column_ns(&self) -> f64 {
        self.span() / self.columns() as f64
    }

    /// The x of the left edge of column `c`.
    pub fn column_x(&self, c: usize) -> f64 {
        self.x0 + c as f64 * self.width / self.columns() as f64
    }

    /// Calls `f(column, overlap_ns)` for each column `start..end` overlaps.
    pub fn spread(&self, start: Nanos, end: Nanos, mut f: impl FnMut(usize, f64)) {
        let (start, end) = (start.max(self.t0), end.min(self.t1));
        if end <= start {
            return;
        }
        let per = self.column_ns();
        let a = (start - self.t0) as f64 / per;
        let b = (end - self.t0) as f64 / per;
        let last = self.columns() - 1;
        let (first, final_) =
            ((a.floor() as usize).min(last), (b.ceil() as usize).saturating_sub(1).min(last));
        for c in first..=final_ {
            let lo = a.max(c as f64);
            let hi = b.min(c as f64 + 1.0);
            if hi > lo {
                f(c, (hi - lo) * per);
            }
        }
    }

    /// Round times at least `min_px` apart, each with its label (`0.5 s`, `20 ms`).
    pub fn ticks(&self, min_px: f64) -> Vec<(Nanos, String)> {
        let step = nice_step(self.span() * min_px / self.width);
        let step_ns = step.round().max(1.0) as Nanos;
        let first = (self.t0 + step_ns - 1).div_euclid(step_ns) * step_ns;
        let (unit, scale) = if step >= 1e8 {
            ("s", 1e9)
        } else if step >= 1e6 {
            ("ms", 1e6)
        } else {
            ("µs", 1e3)
        };
        let decimals = decimals_for(step / scale);
        (0..)
            .map(|i| first + i * step_ns)
            .take_while(|&t| t <= self.t1)
            .map(|t| (t, format!("{:.*} {unit}", decimals, t as f64 / scale)))
            .collect()
    }
}

/// The smallest 1, 2 or 5 × 10^k at least `v`.
pub fn nice_step(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * base).find(|s| *s >= v * (1.0 - 1e-9)).unwrap_or(10.0 * base)
}

/// Decimals needed to write multiples of `step` exactly (for steps of 1, 2 or 5 × 10^k).
pub fn decimals_for(step: f64) -> usize {
    if step >= 1.0 { 0 } else { (-step.log10().floor()) as usize }
}

/// The smallest "nice" value at least `v` for the top of a y axis (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^k).
pub fn nice_ceil(v: f64) -> f64 {
    if v.is_nan() || v <= 0.0 || v.is_infinite() {
        return 1.0;
    }
    let base = 10f64.powf(v.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * base)
        .find(|s| *s >= v * (1.0 - 1e-9))
        .unwrap_or(10.0 * base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_fall_on_round_times_with_units() {
        let scale = TimeScale::new(0, 3_291_000_000, 100.0, 1000.0);
        let ticks = scale.ticks(90.0);
        assert_eq!(ticks[0], (0, "0.0 s".to_owned()));
        assert_eq!(ticks[1], (500_000_000, "0.5 s".to_owned()));
        assert_eq!(ticks.last().unwrap().1, "3.0 s");
        let short = TimeScale::new(0, 120_000_000, 0.0, 1000.0).ticks(90.0);
        assert_eq!(short[1].1, "20 ms");
        let tiny = TimeScale::new(0, 900_000, 0.0, 1000.0).ticks(90.0);
        assert_eq!(tiny[1].1, "100 µs");
    }

    #[test]
    fn spreading_an_interval_conserves_its_length() {
        let scale = TimeScale::new(0, 1000, 0.0, 10.0);
        let mut cols = vec![0.0; 10];
        scale.spread(150, 420, |c, ns| cols[c] += ns);
        assert!((cols.iter().sum::<f64>() - 270.0).abs() < 1e-6);
        let near = |a: f64, b: f64| (a - b).abs() < 1e-6;
        assert!(near(cols[1], 50.0) && near(cols[4], 20.0), "{cols:?}");
        scale.spread(900, 5000, |c, ns| cols[c] += ns);
        assert!(near(cols[9], 100.0));
    }

    #[test]
    fn nice_values() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_ceil(2.2), 2.5);
        assert_eq!(nice_ceil(610.0), 800.0);
        assert_eq!(nice_ceil(0.0), 1.0);
    }
}
