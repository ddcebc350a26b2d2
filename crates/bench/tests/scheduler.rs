//! The scheduler, statistics, comparisons, exports and baseline check, driven by the
//! mock executor: deterministic timings, known answers.

use coldstart_bench::export::{CsvExporter, Exporter, JsonExporter, MarkdownExporter};
use coldstart_bench::{
    BenchCommand, BenchConfig, BenchError, Cache, Evict, MockExecutor, Modes, Silent, baseline, plan,
    run_benchmark, summary,
};

fn config(commands: &[&str], cold: bool, warm: bool, runs: usize) -> BenchConfig {
    BenchConfig {
        commands: commands
            .iter()
            .map(|c| BenchCommand::new(c.split(' ').map(str::to_owned).collect()))
            .collect(),
        modes: Modes { cold, warm },
        runs,
        ..BenchConfig::default()
    }
}

fn steps(config: &BenchConfig) -> String {
    plan(config)
        .iter()
        .map(|s| {
            format!(
                "{:?} r{} {} {}",
                s.kind,
                s.round,
                config.commands[s.command].name,
                config.label(s.command, s.cache)
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn runs_are_interleaved_and_warm_follows_cold_of_the_same_command() {
    let mut c = config(&["a", "b"], true, true, 2);
    c.warmup = 1;
    c.discard_first = true;
    insta::assert_snapshot!(steps(&c), @r"
    Warmup r0 a a (warm)
    Warmup r0 b b (warm)
    Discard r0 a a (cold)
    Discard r0 a a (warm)
    Discard r0 b b (cold)
    Discard r0 b b (warm)
    Measure r1 a a (cold)
    Measure r1 a a (warm)
    Measure r1 b b (cold)
    Measure r1 b b (warm)
    Measure r2 a a (cold)
    Measure r2 a a (warm)
    Measure r2 b b (cold)
    Measure r2 b b (warm)
    ");
    c.evict = vec![Evict::Files, Evict::System];
    c.modes.warm = false;
    c.warmup = 0;
    c.discard_first = false;
    c.runs = 1;
    insta::assert_snapshot!(steps(&c), @r"
    Measure r0 a a (cold, files)
    Measure r0 a a (cold, system)
    Measure r0 b b (cold, files)
    Measure r0 b b (cold, system)
    ");
}

#[test]
fn statistics_and_the_cold_penalty_have_known_values() {
    let c = config(&["app"], true, true, 5);
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::Files)), vec![1.0, 1.2, 1.1, 1.3, 1.4]),
        ((0, Cache::Warm), vec![0.5, 0.6, 0.55, 0.45, 0.5]),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert_eq!(mock.log.len(), 10);
    assert_eq!(mock.log[..2], [(0, Cache::Cold(Evict::Files)), (0, Cache::Warm)]);
    let cold = &results.results[0];
    assert_eq!(cold.command, "app (cold)");
    assert_eq!(cold.times, [1.0, 1.2, 1.1, 1.3, 1.4]);
    assert!((cold.mean - 1.2).abs() < 1e-12 && (cold.median - 1.2).abs() < 1e-12);
    assert!((cold.stddev.unwrap() - 0.158_113_883).abs() < 1e-8);
    assert_eq!((cold.min, cold.max), (1.0, 1.4));
    // t(0.975, 4) = 2.776445105; half width 2.776445105 * 0.158113883 / sqrt(5) = 0.196324
    assert!((cold.mean_ci95[0] - 1.003_676).abs() < 1e-5 && (cold.mean_ci95[1] - 1.396_324).abs() < 1e-5);
    assert_eq!(cold.median_read_bytes, Some(50_000_000.0));
    assert_eq!(cold.exit_codes, vec![Some(0); 5]);
    let penalty = results.comparisons.iter().find(|c| c.kind == "cold_vs_warm").unwrap();
    assert!((penalty.difference - 0.68).abs() < 1e-12);
    assert!((penalty.ratio - 1.2 / 0.52).abs() < 1e-12);
    assert!(penalty.significant && penalty.p < 0.001);
    assert_eq!(penalty.read_bytes_difference, Some(50_000_000.0));
    let text = summary::render(&results);
    assert!(text.contains("cold penalty, cold vs warm: +0.680 s"), "{text}");
    assert!(text.contains("+47.7 MiB read"), "{text}");
}

#[test]
fn outliers_are_flagged_with_a_reason() {
    let c = config(&["app"], true, false, 6);
    let mut mock =
        MockExecutor::with_times([((0, Cache::Cold(Evict::Files)), vec![1.0, 1.01, 0.99, 1.0, 1.02, 3.0])]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let outliers = &results.results[0].outliers;
    assert_eq!(outliers.len(), 1);
    assert_eq!((outliers[0].run, outliers[0].time), (5, 3.0));
    assert!(outliers[0].reason.contains("no counter explains it"), "{}", outliers[0].reason);
}

#[test]
fn commands_are_compared_with_the_first() {
    let c = config(&["fast", "slow"], true, false, 4);
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::Files)), vec![1.0, 1.1, 0.9, 1.0]),
        ((1, Cache::Cold(Evict::Files)), vec![2.0, 2.2, 1.8, 2.0]),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert_eq!(mock.log.iter().map(|l| l.0).collect::<Vec<_>>(), [0, 1, 0, 1, 0, 1, 0, 1]);
    let cmp = &results.comparisons[0];
    assert_eq!((cmp.kind.as_str(), cmp.a.as_str(), cmp.b.as_str()), ("commands", "slow", "fast"));
    assert!((cmp.ratio - 2.0).abs() < 1e-12 && cmp.ratio_ci95[0] > 1.5 && cmp.significant);
}

#[test]
fn files_against_system_is_paired_by_round_and_printed() {
    // The machine slows down round after round; `files` is always 4% faster than
    // `system` in the same round. Only the paired interval sees that.
    let mut c = config(&["app"], true, false, 6);
    c.evict = vec![Evict::System, Evict::Files];
    let system = vec![1.0, 1.4, 1.8, 2.2, 2.6, 3.0];
    let files: Vec<f64> = system.iter().map(|t| t * 0.96).collect();
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::System)), system),
        ((0, Cache::Cold(Evict::Files)), files),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let evict = results.comparisons.iter().find(|c| c.kind == "evict").unwrap();
    assert_eq!((evict.a.as_str(), evict.b.as_str()), ("app (cold, files)", "app (cold, system)"));
    assert!(evict.ratio_ci95[0] < 0.8 && evict.ratio_ci95[1] > 1.1, "{evict:?}");
    let [lo, hi] = evict.paired_ratio_ci95.unwrap();
    assert!(
        (evict.paired_ratio.unwrap() - 0.96).abs() < 1e-9
            && (lo - 0.96).abs() < 1e-9
            && (hi - 0.96).abs() < 1e-9
    );
    let text = summary::render(&results);
    assert!(text.contains("paired by round: 0.960× [95% CI 0.960 … 0.960], p < 0.001"), "{text}");
    assert!(text.contains("ratio of medians 0.960×"), "{text}");
    let json: serde_json::Value = serde_json::from_slice(&JsonExporter.serialize(&results).unwrap()).unwrap();
    let exported = json["comparisons"].as_array().unwrap().iter().find(|c| c["kind"] == "evict").unwrap();
    assert!((exported["paired_ratio"].as_f64().unwrap() - 0.96).abs() < 1e-9);
}

#[test]
fn an_interruption_keeps_the_results_so_far() {
    let c = config(&["a", "b"], true, false, 5);
    let mut mock = MockExecutor { interrupt_after: Some(5), ..MockExecutor::default() };
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert!(results.interrupted);
    assert_eq!(results.results.iter().map(|r| r.times.len()).collect::<Vec<_>>(), [3, 2]);
    assert!(summary::render(&results).contains("INTERRUPTED"));
}

#[test]
fn a_failing_command_stops_the_benchmark_unless_ignored() {
    let mut c = config(&["a"], true, false, 3);
    let mut mock = MockExecutor { fail_run: Some(1), ..MockExecutor::default() };
    match run_benchmark(&c, &mut mock, &mut Silent) {
        Err(BenchError::CommandFailed { run, what, .. }) => {
            assert_eq!((run, what.as_str()), (2, "exit status 1"))
        }
        other => panic!("expected a failure, got {other:?}"),
    }
    c.ignore_failure = true;
    let mut mock = MockExecutor { fail_run: Some(1), ..MockExecutor::default() };
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert_eq!(results.results[0].exit_codes, [Some(0), Some(1), Some(0)]);
}

#[test]
fn exports_carry_hyperfines_fields_and_ours() {
    let c = config(&["app --flag"], true, true, 3);
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::Files)), vec![1.0, 1.5, 2.0]),
        ((0, Cache::Warm), vec![0.5, 0.5, 0.5]),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&JsonExporter.serialize(&results).unwrap()).unwrap();
    let first = &json["results"][0];
    for field in
        ["command", "mean", "stddev", "median", "user", "system", "min", "max", "times", "exit_codes"]
    {
        assert!(!first[field].is_null(), "hyperfine field {field} missing");
    }
    for field in ["cache", "evict", "until", "mean_ci95", "major_faults", "read_bytes", "io_wait", "ready"] {
        assert!(!first[field].is_null(), "coldstart field {field} missing");
    }
    assert_eq!(first["cache"], "cold");
    assert_eq!(json["schema"], "coldstart-bench/1");
    assert_eq!(json["results"][1]["stddev"], 0.0);

    insta::assert_snapshot!(String::from_utf8(MarkdownExporter.serialize(&results).unwrap()).unwrap(), @r"
    | Command | Cache | Mean [s] | Median [s] | Min [s] | Max [s] | Read [MiB] | Major faults | Relative |
    |:---|:---|---:|---:|---:|---:|---:|---:|---:|
    | `app --flag (cold)` | cold (files) | 1.500 ± 0.500 | 1.500 | 1.000 | 2.000 | 47.7 | 1000 | 3.00 |
    | `app --flag (warm)` | warm | 0.500 ± 0.000 | 0.500 | 0.500 | 0.500 | 0.0 | 0 | 1.00 |
    ");
    let csv = String::from_utf8(CsvExporter.serialize(&results).unwrap()).unwrap();
    let mut lines = csv.lines();
    assert!(
        lines.next().unwrap().starts_with("command,mean,stddev,median,user,system,min,max,cache,evict,until")
    );
    assert!(lines.next().unwrap().starts_with("app --flag (cold),1.5,0.5,1.5,0.75,"));
}

#[test]
fn several_readiness_conditions_are_named_together_in_the_exports() {
    let mut c = config(&["app"], false, true, 2);
    c.until = vec!["window:marco".parse().unwrap(), "window-name:/^Home, a/".parse().unwrap()];
    let mut mock = MockExecutor::with_times([((0, Cache::Warm), vec![0.5, 0.7])]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let json: serde_json::Value = serde_json::from_slice(&JsonExporter.serialize(&results).unwrap()).unwrap();
    assert_eq!(json["results"][0]["until"], "window:marco and window-name:/^Home, a/");
    let csv = String::from_utf8(CsvExporter.serialize(&results).unwrap()).unwrap();
    assert!(csv.contains(",\"window:marco and window-name:/^Home, a/\","), "{csv}");
}

#[test]
fn baseline_regressions_need_the_limit_and_significance() {
    let dir = tempfile::tempdir().unwrap();
    let c = config(&["app"], true, false, 5);
    let run = |times: Vec<f64>| {
        let mut mock = MockExecutor::with_times([((0, Cache::Cold(Evict::Files)), times)]);
        run_benchmark(&c, &mut mock, &mut Silent).unwrap()
    };
    let base = run(vec![1.0, 1.02, 0.98, 1.01, 0.99]);
    let path = dir.path().join("base.json");
    std::fs::write(&path, JsonExporter.serialize(&base).unwrap()).unwrap();

    let slower = baseline::check(&run(vec![1.3, 1.32, 1.28, 1.31, 1.29]), &path, 10.0).unwrap();
    assert!(slower[0].regressed, "{slower:?}");
    assert!(slower[0].describe(10.0).starts_with("REGRESSION: app: median 1.300 s against 1.000 s"));
    let within_limit = baseline::check(&run(vec![1.05, 1.07, 1.03, 1.06, 1.04]), &path, 10.0).unwrap();
    assert!(!within_limit[0].regressed);
    let noisy = baseline::check(&run(vec![0.6, 2.0, 1.15, 0.7, 1.9]), &path, 10.0).unwrap();
    assert!(!noisy[0].regressed && noisy[0].change > 0.1, "slower median but within the noise: {noisy:?}");

    std::fs::write(
        &path,
        r#"{"results": [{"command": "app", "median": 1.0, "mean": 1.0, "times": [1.0, 1.0]}]}"#,
    )
    .unwrap();
    assert!(
        baseline::check(&run(vec![2.0, 2.1, 1.9, 2.0, 2.0]), &path, 10.0).unwrap()[0].regressed,
        "hyperfine JSON"
    );
    std::fs::write(&path, r#"{"results": [{"command": "other", "median": 1.0}]}"#).unwrap();
    assert!(baseline::check(&base, &path, 10.0).is_err());
}
