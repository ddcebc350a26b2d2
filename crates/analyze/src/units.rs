//! How figures and names are written for people: seconds, binary byte units, counts,
//! the last part of a path. Shared by the names the analysis gives (phases, paths),
//! the doctor's findings and every report. Also how sizes and durations that people
//! type are read ([`ByteSize`], [`TimeSpan`]): the one rule for every command-line
//! flag and disk spec that takes one.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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
    if path.starts_with('<') {
        return path; // a placeholder for a file without a path, which may name a mount point
    }
    path.rsplit('/').find(|part| !part.is_empty()).unwrap_or(path)
}

/// How a size is written, for help texts and errors.
pub const SIZE_SYNTAX: &str = "KiB, MiB, GiB, TiB are powers of 1024, kB, MB, GB, TB (or k, M, G, T) powers of 1000, a bare number is bytes";

/// How a duration is written, for help texts and errors.
pub const DURATION_SYNTAX: &str = "a number with ns, us, ms or s; a bare number is seconds";

/// A number of bytes as people type it: `512KiB`, `60MB`, `1.5GB`, `4096` (see
/// [`SIZE_SYNTAX`]; case does not matter, fractions round to the nearest byte).
/// Displayed in the largest unit that writes it exactly, so that it parses back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

/// A duration as people type it: `8ms`, `4.17ms`, `70us`, `1.5` (seconds); see
/// [`DURATION_SYNTAX`]. Whole nanoseconds up to `u64::MAX`; displayed in the largest
/// unit that writes it exactly, so that it parses back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeSpan(pub Duration);

/// A size or duration that does not read as one; says how to write it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuantityError {
    kind: &'static str,
    syntax: &'static str,
}

impl fmt::Display for QuantityError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "not a {} ({})", self.kind, self.syntax)
    }
}

impl std::error::Error for QuantityError {}

impl FromStr for ByteSize {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<ByteSize, QuantityError> {
        // parse-size overflows (a panic, or a wrong value in release builds) on a
        // mantissa of more than 20 significant digits (u64::MAX has 20); no size needs more.
        let mantissa = text.split(['e', 'E']).next().unwrap_or_default();
        let significant = mantissa.trim_start_matches(|c: char| c == '0' || c == '.' || !c.is_ascii_digit());
        if significant.bytes().filter(u8::is_ascii_digit).count() > 20 {
            return Err(QuantityError { kind: "size", syntax: SIZE_SYNTAX });
        }
        parse_size::parse_size(text)
            .map(ByteSize)
            .map_err(|_| QuantityError { kind: "size", syntax: SIZE_SYNTAX })
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 8] = [
            ("TiB", 1 << 40),
            ("TB", 1_000_000_000_000),
            ("GiB", 1 << 30),
            ("GB", 1_000_000_000),
            ("MiB", 1 << 20),
            ("MB", 1_000_000),
            ("KiB", 1 << 10),
            ("kB", 1_000),
        ];
        let exact = UNITS.iter().find(|(_, factor)| self.0 > 0 && self.0.is_multiple_of(*factor));
        match exact {
            Some((unit, factor)) => write!(f, "{}{unit}", self.0 / factor),
            None => write!(f, "{}B", self.0),
        }
    }
}

const TIME_UNITS: [(&str, u64); 5] =
    [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000), ("µs", 1_000), ("ns", 1)];

impl FromStr for TimeSpan {
    type Err = QuantityError;

    fn from_str(text: &str) -> Result<TimeSpan, QuantityError> {
        let bad = QuantityError { kind: "duration", syntax: DURATION_SYNTAX };
        let text = text.trim();
        let unit_at = text.find(char::is_alphabetic).unwrap_or(text.len());
        let (number, unit) = (text[..unit_at].trim_end(), &text[unit_at..]);
        let scale = match unit {
            "" => 1_000_000_000,
            unit => TIME_UNITS.iter().find(|(name, _)| *name == unit).ok_or(bad.clone())?.1,
        };
        let nanos = scaled_decimal(number, scale).ok_or(bad)?;
        Ok(TimeSpan(Duration::from_nanos(nanos)))
    }
}

impl fmt::Display for TimeSpan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let (unit, factor) = TIME_UNITS
            .iter()
            .filter(|(unit, _)| *unit != "µs")
            .find(|(_, factor)| nanos > 0 && nanos.is_multiple_of(u128::from(*factor)))
            .unwrap_or(&("s", 1_000_000_000));
        write!(f, "{}{unit}", nanos / u128::from(*factor))
    }
}

/// `DIGITS[.DIGITS]` times `scale`, rounded to the nearest whole unit; `None` when
/// malformed or past `u64::MAX`. Exact: no floating point, so `1.1` is not 1.0999….
fn scaled_decimal(number: &str, scale: u64) -> Option<u64> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if (whole.is_empty() && fraction.is_empty()) || !digits(whole) || !digits(fraction) {
        return None;
    }
    let whole = whole.trim_start_matches('0');
    let mut value = if whole.is_empty() { 0 } else { whole.parse::<u64>().ok()? as u128 * u128::from(scale) };
    let fraction = &fraction[..fraction.len().min(18)];
    if !fraction.is_empty() {
        let denominator = 10u128.pow(fraction.len() as u32);
        let numerator: u128 = fraction.parse().ok()?;
        value += (numerator * u128::from(scale) + denominator / 2) / denominator;
    }
    u64::try_from(value).ok()
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
        assert_eq!(base_name("<inode 10 on the fuse mount /mnt/p>"), "<inode 10 on the fuse mount /mnt/p>");
    }

    #[test]
    fn sizes_read_with_one_rule_iec_binary_si_decimal_bare_bytes() {
        let size = |text: &str| text.parse::<ByteSize>().map(|s| s.0);
        assert_eq!(size("60MB"), Ok(60_000_000), "SI: the disk spec's bandwidth");
        assert_eq!(size("512"), Ok(512), "a bare number is bytes, also for --max-memory");
        assert_eq!(size("1MiB"), Ok(1 << 20));
        assert_eq!(size("1.5GB"), Ok(1_500_000_000));
        assert_eq!(size("2G"), Ok(2_000_000_000));
        assert_eq!(size("512kib"), Ok(512 << 10), "case does not matter");
        assert_eq!(size("0.5KiB"), Ok(512));
        for bad in ["-1", "nan", "inf", "", " ", "1e400", "12 parsecs", "18446744073709551616"] {
            assert!(size(bad).is_err(), "{bad:?} is not a size");
        }
        assert_eq!(size("18446744073709551615"), Ok(u64::MAX));
        for overflowing in ["18446744073709551615 5", "1844674407370955161.55"] {
            assert!(size(overflowing).is_err(), "{overflowing:?} overflows parse-size's mantissa");
        }
        assert_eq!(size("0.000000000000000000000000001KiB"), Ok(0), "leading zeros are not significant");
    }

    #[test]
    fn sizes_display_exactly_in_the_largest_unit() {
        for (bytes, text) in [
            (0, "0B"),
            (512, "512B"),
            (1536, "1536B"),
            (3072, "3KiB"),
            (60_000_000, "60MB"),
            (1 << 30, "1GiB"),
        ] {
            assert_eq!(ByteSize(bytes).to_string(), text);
        }
        assert_eq!(ByteSize(1_500_000_000).to_string(), "1500MB");
    }

    #[test]
    fn durations_read_with_a_unit_or_as_seconds() {
        let nanos = |text: &str| text.parse::<TimeSpan>().map(|t| t.0.as_nanos());
        assert_eq!(nanos("8ms"), Ok(8_000_000));
        assert_eq!(nanos("4.17ms"), Ok(4_170_000));
        assert_eq!(nanos("70µs"), Ok(70_000));
        assert_eq!(nanos("70us"), Ok(70_000));
        assert_eq!(nanos("1.5"), Ok(1_500_000_000), "a bare number is seconds");
        assert_eq!(nanos("600 s"), Ok(600_000_000_000));
        assert_eq!(nanos("0"), Ok(0));
        assert_eq!(nanos("0.1ms"), Ok(100_000), "exact, not 99_999");
        for bad in ["-1", "-1ms", "nan", "inf", "", "1e400", "1e3", "5 minutes", "1.2.3s", ".", "+1"] {
            assert!(nanos(bad).is_err(), "{bad:?} is not a duration");
        }
    }

    #[test]
    fn durations_display_exactly_in_the_largest_unit() {
        let span = |nanos| TimeSpan(Duration::from_nanos(nanos)).to_string();
        assert_eq!(span(0), "0s");
        assert_eq!(span(600_000_000_000), "600s");
        assert_eq!(span(1_500_000_000), "1500ms");
        assert_eq!(span(70_000), "70us");
        assert_eq!(span(7), "7ns");
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #[test]
            fn size_parsing_never_panics(text in "\\PC*") {
                let _ = text.parse::<ByteSize>();
            }

            #[test]
            fn duration_parsing_never_panics(text in "\\PC*|[0-9. ]{0,30}(ns|us|µs|ms|s)?") {
                let _ = text.parse::<TimeSpan>();
            }

            #[test]
            fn sizes_round_trip_through_their_display(bytes in any::<u64>()) {
                prop_assert_eq!(ByteSize(bytes).to_string().parse::<ByteSize>(), Ok(ByteSize(bytes)));
            }

            #[test]
            fn durations_round_trip_through_their_display(nanos in any::<u64>()) {
                let span = TimeSpan(Duration::from_nanos(nanos));
                prop_assert_eq!(span.to_string().parse::<TimeSpan>(), Ok(span));
            }

            #[test]
            fn whatever_parses_round_trips(text in "[0-9]{1,12}(\\.[0-9]{1,6})? ?(B|kB|KiB|MB|MiB|GB|GiB|ns|us|ms|s)?") {
                if let Ok(size) = text.parse::<ByteSize>() {
                    prop_assert_eq!(size.to_string().parse::<ByteSize>(), Ok(size));
                }
                if let Ok(span) = text.parse::<TimeSpan>() {
                    prop_assert_eq!(span.to_string().parse::<TimeSpan>(), Ok(span));
                }
            }
        }
    }
}
