//! How figures and names are written for people: seconds, binary byte units, counts,
//! the last part of a path. Shared by the names the analysis gives (phases, paths),
//! the doctor's findings and every report.

use coldstart_trace::Nanos;

/// Seconds with three decimals, e.g. `1.830 s`.
pub fn secs(ns: Nanos) -> String {
    format!("{:.3} s", unsigned_zero(ns as f64 / 1e9, 1e3))
}

/// `x`, or 0 when it rounds to zero at `per_unit` decimals, so that a small negative
/// figure does not print as `-0.000`.
fn unsigned_zero(x: f64, per_unit: f64) -> f64 {
    if (x * per_unit).round() == 0.0 { 0.0 } else { x }
}

/// A duration in the unit that suits it: `812 µs`, `12.4 ms`, `1.830 s`.
pub fn duration(ns: Nanos) -> String {
    let abs = ns.unsigned_abs();
    if abs < 1_000_000 {
        format!("{:.0} µs", unsigned_zero(ns as f64 / 1e3, 1.0))
    } else if abs < 1_000_000_000 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else {
        format!("{:.3} s", ns as f64 / 1e9)
    }
}

/// Bytes in binary units: `512 B`, `32.0 KiB`, `3.1 MiB`, `1.2 GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

/// A count with thousands separated: `1,234,567`.
pub fn count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `part / whole` as a percentage with one decimal, or `-` when `whole` is zero.
pub fn percent(part: f64, whole: f64) -> String {
    if whole > 0.0 { format!("{:.1} %", 100.0 * part / whole) } else { "-".to_owned() }
}

/// `word` with an `s` unless `n` is one.
pub fn plural(n: u64, word: &str) -> String {
    if n == 1 { format!("1 {word}") } else { format!("{} {word}s", count(n)) }
}

/// The last part of a path, as `basename` prints it: `lib` for both `/usr/lib` and
/// `/usr/lib/`; a path with no part but slashes (`/`), or empty, is returned whole.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').find(|part| !part.is_empty()).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(secs(1_830_000_000), "1.830 s");
        assert_eq!(secs(-200_000), "0.000 s", "no -0.000 for a fork just before t = 0");
        assert_eq!(secs(-2_000_000), "-0.002 s");
        assert_eq!(duration(-300), "0 µs");
        assert_eq!(duration(812_000), "812 µs");
        assert_eq!(duration(12_400_000), "12.4 ms");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(32 * 1024), "32.0 KiB");
        assert_eq!(bytes(3_250_585), "3.1 MiB");
        assert_eq!(count(1_234_567), "1,234,567");
        assert_eq!(count(123), "123");
        assert_eq!(percent(1.0, 3.0), "33.3 %");
        assert_eq!(percent(1.0, 0.0), "-");
        assert_eq!(plural(1, "file"), "1 file");
        assert_eq!(plural(1200, "seek"), "1,200 seeks");
    }

    #[test]
    fn base_name_is_the_last_part_even_after_a_trailing_slash() {
        assert_eq!(base_name("/usr/lib/libc.so.6"), "libc.so.6");
        assert_eq!(base_name("/usr/lib"), "lib");
        assert_eq!(base_name("/usr/lib/"), "lib");
        assert_eq!(base_name("/usr//lib//"), "lib");
        assert_eq!(base_name("a"), "a");
        assert_eq!(base_name("/"), "/");
        assert_eq!(base_name("//"), "//");
        assert_eq!(base_name(""), "");
        assert_eq!(base_name("<unresolved 8:1 inode 12>"), "<unresolved 8:1 inode 12>");
    }
}
