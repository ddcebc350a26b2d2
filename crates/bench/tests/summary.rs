//! The terminal summary, as a user reads it: the command line once, short labels
//! (cold, alongside, ahead, warm, or the names given with `--name`), one table of all
//! configurations relative to the fastest, then the comparisons by label.

use coldstart_bench::{
    BenchCommand, BenchConfig, Cache, Evict, MockExecutor, Modes, PrefetchSetup, Silent, run_benchmark,
    summary,
};
use coldstart_prefetch::ReplayOptions;

const LONG: &str =
    "inkscape --export-type=png --export-filename=/tmp/out.png --export-width=2048 /home/u/drawing.svg";

fn argv(line: &str) -> Vec<String> {
    line.split(' ').map(str::to_owned).collect()
}

#[test]
fn a_long_command_is_printed_once_and_configurations_are_labelled() {
    let config = BenchConfig {
        commands: vec![BenchCommand::new(argv(LONG))],
        modes: Modes { cold: true, warm: true },
        evict: vec![Evict::System],
        runs: 5,
        prefetch: Some(PrefetchSetup { plan: "inkscape.plan".into(), options: ReplayOptions::default() }),
        ..BenchConfig::default()
    };
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::System)), vec![0.80, 0.78, 0.81, 0.74, 0.79]),
        ((0, Cache::Alongside(Evict::System)), vec![0.70, 0.66, 0.69, 0.71, 0.67]),
        ((0, Cache::Ahead(Evict::System)), vec![0.52, 0.50, 0.51, 0.53, 0.50]),
        ((0, Cache::Warm), vec![0.48, 0.47, 0.49, 0.48, 0.47]),
    ]);
    let results = run_benchmark(&config, &mut mock, &mut Silent).unwrap();
    let text = summary::render(&results);
    assert_eq!(text.matches(LONG).count(), 1, "{text}");
    insta::assert_snapshot!(text);
}

#[test]
fn named_commands_label_their_configurations() {
    let config = BenchConfig {
        commands: vec![
            BenchCommand { name: "old".into(), argv: argv("app --old") },
            BenchCommand { name: "new".into(), argv: argv("app --new") },
        ],
        modes: Modes { cold: true, warm: false },
        runs: 4,
        ..BenchConfig::default()
    };
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::Files)), vec![2.0, 2.2, 1.8, 2.0]),
        ((1, Cache::Cold(Evict::Files)), vec![1.0, 1.1, 0.9, 1.0]),
    ]);
    let results = run_benchmark(&config, &mut mock, &mut Silent).unwrap();
    assert_eq!(results.results.iter().map(|r| r.label.as_str()).collect::<Vec<_>>(), ["old", "new"]);
    insta::assert_snapshot!(summary::render(&results));
}

#[test]
fn a_difference_lost_in_the_noise_says_how_many_runs_would_resolve_it() {
    let config = BenchConfig {
        commands: vec![
            BenchCommand { name: "old".into(), argv: argv("app --old") },
            BenchCommand { name: "new".into(), argv: argv("app --new") },
        ],
        modes: Modes { cold: false, warm: true },
        runs: 8,
        ..BenchConfig::default()
    };
    // Means 1.200 s and 1.088 s, σ 0.256 s on both sides: the normal approximation
    // 2.802² × 2 × 0.256² / 0.112² = 82.2 runs, 84 with Student's t.
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Warm), vec![1.0, 1.5, 0.9, 1.4, 1.1, 1.5, 0.9, 1.3]),
        ((1, Cache::Warm), vec![0.888, 1.388, 0.788, 1.288, 0.988, 1.388, 0.788, 1.188]),
    ]);
    let results = run_benchmark(&config, &mut mock, &mut Silent).unwrap();
    let comparison = &results.comparisons[0];
    assert!(!comparison.significant);
    let n = comparison.runs_to_resolve.unwrap();
    assert_eq!(n, 84);
    let text = summary::render(&results);
    assert!(
        text.contains(&format!(
            "(not significant; about {n} runs each would resolve a 0.112 s difference at this noise)"
        )),
        "{text}"
    );
    insta::assert_snapshot!(text);
}
