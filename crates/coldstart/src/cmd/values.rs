//! Value parsers of the subcommands' numeric arguments. clap calls them while it
//! parses the command line, so a bad value (`nan`, `inf`, a negative or zero where
//! that means nothing) is refused there in one line with exit status 2, and the
//! subcommands only ever see checked, typed values. Durations and sizes follow the
//! one rule of [`coldstart_analyze::units`].

use std::time::Duration;

use coldstart_analyze::units::TimeSpan;

/// A duration above zero (`--timeout`): `60`, `1.5s`, `500ms`.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let span = duration(text)?;
    if span.is_zero() { Err("must be longer than zero".to_owned()) } else { Ok(span) }
}

/// A duration, zero included (`--grace`).
pub fn duration(text: &str) -> Result<Duration, String> {
    text.parse::<TimeSpan>().map(|span| span.0).map_err(|e| e.to_string())
}

/// The `record --slow-syscalls` threshold: milliseconds (`2`, `0.5`) or a duration with
/// its unit (`500us`, `1ms`); `off` or zero turns the slow calls off.
pub fn slow_call_threshold(text: &str) -> Result<SlowThreshold, String> {
    let text = text.trim();
    if text == "off" {
        return Ok(SlowThreshold(None));
    }
    let span = if text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        duration(&format!("{text}ms"))
    } else {
        duration(text)
    }
    .map_err(|e| format!("{e}, or off"))?;
    Ok(SlowThreshold((!span.is_zero()).then_some(span)))
}

/// The `record --off-cpu-min` threshold: milliseconds (`1`, `0.2`) or a duration with its
/// unit (`200us`); zero keeps every sleep.
pub fn off_cpu_min(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let span = match text.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        true => duration(&format!("{text}ms")),
        false => duration(text),
    };
    span.map_err(|_| "not a duration: milliseconds, or a number with ns, us, ms or s".to_owned())
}

/// A `--slow-syscalls` value: the threshold, or `None` for off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowThreshold(pub Option<Duration>);

/// A finite number above zero.
pub fn positive_number(text: &str) -> Result<f64, String> {
    let n = finite_number(text)?;
    if n > 0.0 { Ok(n) } else { Err("must be above zero".to_owned()) }
}

/// A finite number, zero or above.
pub fn non_negative_number(text: &str) -> Result<f64, String> {
    let n = finite_number(text)?;
    if n >= 0.0 { Ok(n) } else { Err("must not be negative".to_owned()) }
}

/// A percentage, 0 to 100.
pub fn percentage(text: &str) -> Result<f64, String> {
    let n = finite_number(text)?;
    if (0.0..=100.0).contains(&n) { Ok(n) } else { Err("must be a percentage, 0 to 100".to_owned()) }
}

fn finite_number(text: &str) -> Result<f64, String> {
    text.trim().parse::<f64>().ok().filter(|n| n.is_finite()).ok_or_else(|| "not a finite number".to_owned())
}

/// The name of a system call the recorder traces (`--syscall`).
pub fn syscall_name(text: &str) -> Result<String, String> {
    if coldstart_record::syscall_table::by_name(text).is_some() {
        return Ok(text.to_owned());
    }
    let known: Vec<&str> = coldstart_record::syscall_table::TRACED
        .iter()
        .filter(|c| c.shape != coldstart_record::syscall_table::Shape::Close)
        .map(|c| c.name)
        .collect();
    Err(format!("not a system call coldstart records (it records {})", known.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_that_mean_nothing_are_refused() {
        for bad in ["nan", "inf", "-inf", "1e400", "", "x"] {
            assert!(positive_number(bad).is_err(), "{bad:?}");
            assert!(non_negative_number(bad).is_err(), "{bad:?}");
            assert!(percentage(bad).is_err(), "{bad:?}");
        }
        assert_eq!(positive_number("2.5"), Ok(2.5));
        assert!(positive_number("0").is_err());
        assert_eq!(non_negative_number("0"), Ok(0.0));
        assert!(non_negative_number("-0.1").is_err());
        assert_eq!(percentage("100"), Ok(100.0));
        assert!(percentage("100.5").is_err());
    }

    #[test]
    fn slow_call_thresholds_are_milliseconds_or_carry_a_unit_or_are_off() {
        let ok = |text: &str| slow_call_threshold(text).map(|t| t.0);
        assert_eq!(ok("2"), Ok(Some(Duration::from_millis(2))));
        assert_eq!(ok("0.5"), Ok(Some(Duration::from_micros(500))));
        assert_eq!(ok("200us"), Ok(Some(Duration::from_micros(200))));
        assert_eq!(ok("off"), Ok(None));
        assert_eq!(ok("0"), Ok(None));
        for bad in ["-1", "nan", "fast", "", "1e3"] {
            assert!(slow_call_threshold(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn off_cpu_thresholds_are_milliseconds_or_carry_a_unit_and_zero_keeps_all() {
        assert_eq!(off_cpu_min("1"), Ok(Duration::from_millis(1)));
        assert_eq!(off_cpu_min("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(off_cpu_min("0"), Ok(Duration::ZERO));
        for bad in ["-1", "off", "", "1e3"] {
            assert!(off_cpu_min(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_are_seconds_or_carry_a_unit() {
        assert_eq!(positive_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(positive_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("0"), Ok(Duration::ZERO));
        for bad in ["0", "0ms", "-1", "nan", "inf", "1e400"] {
            assert!(positive_duration(bad).is_err(), "{bad:?}");
        }
    }
}
