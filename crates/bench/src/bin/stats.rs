//! `coldstart-bench-stats`: the comparisons of [`coldstart_bench::stats`] for the
//! benchmark scripts in bench/, which measure outside `coldstart bench` and compare
//! their own samples: a difference or ratio of medians (bootstrap interval) or the
//! paired ratio of two configurations run in the same rounds.
//!
//! Prints `ESTIMATE LOW HIGH` (the 95% interval) on one line.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use coldstart_bench::stats;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Comparison {
    /// median(A) − median(B).
    MedianDifference,
    /// median(A) / median(B).
    MedianRatio,
    /// Geometric mean of A[i] / B[i], round by round.
    PairedRatio,
}

/// Compares two samples: A against B.
#[derive(Debug, Parser)]
#[command(name = "coldstart-bench-stats")]
struct Args {
    comparison: Comparison,
    /// The first sample, comma-separated (e.g. 1.2,1.3,1.25).
    #[arg(num_args = 1, value_delimiter = ',', required = true, allow_hyphen_values = true)]
    a: Vec<f64>,
    /// The second sample, comma-separated.
    #[arg(num_args = 1, value_delimiter = ',', required = true, allow_hyphen_values = true)]
    b: Vec<f64>,
}

fn compare(args: &Args) -> Option<(f64, (f64, f64))> {
    match args.comparison {
        Comparison::MedianDifference => stats::median_difference(&args.a, &args.b),
        Comparison::MedianRatio => stats::median_ratio(&args.a, &args.b),
        Comparison::PairedRatio => stats::paired_ratio(&args.a, &args.b).map(|p| (p.ratio, p.ci95)),
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match compare(&args) {
        Some((estimate, (low, high))) => {
            println!("{estimate} {low} {high}");
            ExitCode::SUCCESS
        }
        None => {
            let why = match args.comparison {
                Comparison::MedianDifference => "a sample is empty or holds a value that is not finite",
                Comparison::MedianRatio => "a sample is empty or its median is not positive",
                Comparison::PairedRatio => {
                    "the samples are not two of the same length (2 or more) of positive values"
                }
            };
            eprintln!("coldstart-bench-stats: {why}");
            ExitCode::from(2)
        }
    }
}
