//! `coldstart-bench-stats`, the comparisons the scripts in bench/ call, on samples
//! whose answers can be checked by hand.

use std::process::{Command, Output};

fn stats_tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coldstart-bench-stats")).args(args).output().unwrap()
}

fn answer(args: &[&str]) -> (f64, f64, f64) {
    let out = stats_tool(args);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let values: Vec<f64> = text.split_whitespace().map(|v| v.parse().unwrap()).collect();
    assert_eq!(values.len(), 3, "{text}");
    (values[0], values[1], values[2])
}

#[test]
fn difference_of_medians() {
    // Medians 2.5 and 1: every resampled median lies in [1, 4] and [0, 2], so the interval in [−1, 4].
    let (d, lo, hi) = answer(&["median-difference", "4,1,3,2", "0,1,2"]);
    assert_eq!(d, 1.5);
    assert!(lo >= -1.0 && lo <= d && hi >= d && hi <= 4.0, "{lo} {hi}");
    assert_eq!(answer(&["median-difference", "-1,-1", "-3"]), (2.0, 2.0, 2.0));
}

#[test]
fn ratio_of_medians() {
    assert_eq!(answer(&["median-ratio", "3,3,3", "1.5,1.5"]), (2.0, 2.0, 2.0));
    let (r, lo, hi) = answer(&["median-ratio", "2,3,4", "1,2"]);
    assert_eq!(r, 2.0);
    assert!(lo >= 1.0 && lo <= r && hi >= r && hi <= 4.0, "{lo} {hi}");
}

#[test]
fn paired_ratio() {
    // Per-round ratios 2 and 8: geometric mean 4.
    let (r, lo, hi) = answer(&["paired-ratio", "2,8", "1,1"]);
    assert!((r - 4.0).abs() < 1e-12 && lo < r && hi > r, "{r} {lo} {hi}");
    // The same ratio every round leaves no spread.
    assert_eq!(answer(&["paired-ratio", "2,4,6", "1,2,3"]), (2.0, 2.0, 2.0));
}

#[test]
fn samples_without_an_answer_exit_2_with_one_line() {
    for args in [
        &["paired-ratio", "1,2", "1"][..],
        &["median-ratio", "1,2", "0"],
        &["median-ratio", "1,x", "1"],
        &["median-difference", "1"],
    ] {
        let out = stats_tool(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("coldstart-bench-stats: ") || stderr.starts_with("error: "), "{stderr}");
    }
}
