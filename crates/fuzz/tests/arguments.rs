//! Fuzzes every `--until` condition and every size or duration argument: any text
//! parses or is refused with a one-line reason, and what parses prints back as text
//! that parses to the same value.

use coldstart_analyze::units::{ByteSize, TimeSpan};
use coldstart_fuzz::{crate_dir, fuzz, mutate};
use coldstart_launch::Until;
use proptest::prelude::*;

/// One value per line of the seed file, each a seed of its own.
fn seeds() -> Vec<Vec<u8>> {
    let text = std::fs::read_to_string(crate_dir().join("seeds/arguments/values")).unwrap();
    text.lines().map(|line| line.as_bytes().to_vec()).collect()
}

fn one_line(error: &impl std::fmt::Display, input: &str) {
    let message = error.to_string();
    assert!(!message.trim().is_empty(), "empty error for {input:?}");
    assert!(!message.contains('\n'), "error on several lines for {input:?}: {message}");
}

fn check(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    match text.parse::<Until>() {
        Ok(until) => {
            let again: Until =
                until.to_string().parse().unwrap_or_else(|e| panic!("{until} reads back as {e}"));
            assert_eq!(again.to_string(), until.to_string(), "{text:?}");
        }
        Err(e) => one_line(&e, &text),
    }
    match text.parse::<TimeSpan>() {
        Ok(span) => assert_eq!(span.to_string().parse::<TimeSpan>(), Ok(span), "{text:?}"),
        Err(e) => one_line(&e, &text),
    }
    match text.parse::<ByteSize>() {
        Ok(size) => assert_eq!(size.to_string().parse::<ByteSize>(), Ok(size), "{text:?}"),
        Err(e) => one_line(&e, &text),
    }
}

#[test]
fn until_size_and_duration_arguments() {
    fuzz(
        "arguments",
        seeds(),
        |bases| prop_oneof![4 => mutate::text(&bases), 1 => mutate::bytes(&bases)].boxed(),
        check,
    );
}
