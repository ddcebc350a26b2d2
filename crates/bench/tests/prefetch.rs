//! `--prefetch PLAN` in the scheduler, results and summary, with the mock executor:
//! the cold runs with the plan alongside and ahead are interleaved with the cold and
//! warm runs, and compared with both.

use coldstart_bench::{
    BenchCommand, BenchConfig, Cache, Evict, MockExecutor, Modes, PrefetchSetup, Silent, plan, run_benchmark,
    summary,
};
use coldstart_prefetch::ReplayOptions;

fn config() -> BenchConfig {
    BenchConfig {
        commands: vec![BenchCommand::new(vec!["app".into()])],
        modes: Modes { cold: true, warm: true },
        evict: vec![Evict::System],
        runs: 5,
        warmup: 0,
        prefetch: vec![PrefetchSetup::new("app.plan".into(), ReplayOptions::default())],
        ..BenchConfig::default()
    }
}

#[test]
fn prefetch_configurations_are_interleaved_with_cold_and_warm() {
    let c = config();
    let round: Vec<String> = plan(&c).iter().take(4).map(|s| c.label(s.command, s.cache)).collect();
    assert_eq!(
        round,
        ["app (cold)", "app (cold, prefetch alongside)", "app (cold, prefetch ahead)", "app (warm)"]
    );
    assert_eq!(plan(&c).len(), 20);
}

#[test]
fn prefetch_runs_are_compared_with_cold_and_warm_runs() {
    let c = config();
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::System)), vec![2.0, 2.1, 1.9, 2.0, 2.2]),
        ((0, Cache::Alongside(Evict::System, 0)), vec![1.1, 1.2, 1.0, 1.1, 1.15]),
        ((0, Cache::Ahead(Evict::System, 0)), vec![1.0, 1.02, 0.98, 1.01, 1.0]),
        ((0, Cache::Warm), vec![1.0, 1.0, 0.99, 1.01, 1.0]),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let along = results.results.iter().find(|r| r.prefetch.as_deref() == Some("alongside")).unwrap();
    assert_eq!(along.cache, coldstart_trace::CacheState::Cold);
    assert_eq!(along.evict, Some(Evict::System));
    assert_eq!(along.prefetch_times, vec![Some(0.25); 5]);
    assert_eq!(along.prefetch_done_before_ready, vec![Some(false); 5]);
    let ahead = results.results.iter().find(|r| r.prefetch.as_deref() == Some("ahead")).unwrap();
    assert!(ahead.prefetch_done_before_ready.is_empty());
    let kinds: Vec<(&str, &str, &str)> =
        results.comparisons.iter().map(|c| (c.kind.as_str(), c.a.as_str(), c.b.as_str())).collect();
    assert!(kinds.contains(&("prefetch", "app (cold, prefetch alongside)", "app (cold)")), "{kinds:?}");
    assert!(kinds.contains(&("prefetch_vs_warm", "app (cold, prefetch ahead)", "app (warm)")), "{kinds:?}");
    let vs_warm = results
        .comparisons
        .iter()
        .find(|c| c.kind == "prefetch_vs_warm" && c.a.contains("alongside"))
        .unwrap();
    assert!((vs_warm.median_ratio - 1.1).abs() < 1e-9, "{vs_warm:?}");
    assert!(vs_warm.median_ratio_ci95[0] <= 1.1 && vs_warm.median_ratio_ci95[1] >= 1.1);
    let text = summary::render(&results);
    assert!(text.contains("Prefetch alongside: replay 250.0 ms and 38.1 MiB fetched"), "{text}");
    assert!(text.contains("ratio of medians 1.100×"), "{text}");
    use coldstart_bench::export::Exporter;
    let json = String::from_utf8(coldstart_bench::export::JsonExporter.serialize(&results).unwrap()).unwrap();
    assert!(json.contains("\"prefetch\": \"alongside\""), "{json}");
}

/// Two named plans: `a` replays what the start needs, `b` half of it.
fn two_plans() -> BenchConfig {
    BenchConfig {
        prefetch: vec![
            PrefetchSetup::named("a", "a.plan".into(), ReplayOptions::default()),
            PrefetchSetup::new("/plans/b.plan".into(), ReplayOptions::default()),
        ],
        ..config()
    }
}

#[test]
fn two_plans_are_interleaved_labelled_and_compared_with_cold_warm_and_each_other() {
    let c = two_plans();
    assert_eq!(c.prefetch[1].name, "b", "named by its file's stem");
    let round: Vec<(String, String)> = plan(&c)
        .iter()
        .take(6)
        .map(|s| (c.label(s.command, s.cache), c.short_label(s.command, s.cache)))
        .collect();
    let labels = [
        ("app (cold)", "cold"),
        ("app (cold, plan a alongside)", "plan a alongside"),
        ("app (cold, plan a ahead)", "plan a ahead"),
        ("app (cold, plan b alongside)", "plan b alongside"),
        ("app (cold, plan b ahead)", "plan b ahead"),
        ("app (warm)", "warm"),
    ];
    assert_eq!(round, labels.map(|(l, s)| (l.to_owned(), s.to_owned())));
    assert_eq!(plan(&c).len(), 30);

    // The machine slows down round after round; plan b is 10% slower than plan a in
    // every round: only the paired interval sees it exactly.
    let drift = [1.0, 1.3, 1.6, 1.9, 2.2];
    let scaled = |k: f64| drift.iter().map(|t| t * k).collect::<Vec<f64>>();
    let s = Evict::System;
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(s)), scaled(2.0)),
        ((0, Cache::Alongside(s, 0)), scaled(1.2)),
        ((0, Cache::Ahead(s, 0)), scaled(1.0)),
        ((0, Cache::Alongside(s, 1)), scaled(1.32)),
        ((0, Cache::Ahead(s, 1)), scaled(1.1)),
        ((0, Cache::Warm), scaled(0.9)),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    let exported: Vec<(&str, &str, Option<&str>, Option<&str>)> = results
        .results
        .iter()
        .map(|r| (r.command.as_str(), r.label.as_str(), r.plan.as_deref(), r.prefetch.as_deref()))
        .collect();
    assert_eq!(
        exported,
        [
            ("app (cold)", "cold", None, None),
            ("app (cold, plan a alongside)", "plan a alongside", Some("a"), Some("alongside")),
            ("app (cold, plan a ahead)", "plan a ahead", Some("a"), Some("ahead")),
            ("app (cold, plan b alongside)", "plan b alongside", Some("b"), Some("alongside")),
            ("app (cold, plan b ahead)", "plan b ahead", Some("b"), Some("ahead")),
            ("app (warm)", "warm", None, None),
        ]
    );
    assert_eq!(results.results[3].times, scaled(1.32));

    let pairs: Vec<(&str, &str, &str)> =
        results.comparisons.iter().map(|c| (c.kind.as_str(), c.a.as_str(), c.b.as_str())).collect();
    for plan in ["a", "b"] {
        for mode in ["alongside", "ahead"] {
            let this = format!("app (cold, plan {plan} {mode})");
            assert!(pairs.contains(&("prefetch", this.as_str(), "app (cold)")), "{pairs:?}");
            assert!(pairs.contains(&("prefetch_vs_warm", this.as_str(), "app (warm)")), "{pairs:?}");
        }
    }
    let between: Vec<_> = results.comparisons.iter().filter(|c| c.kind == "plans").collect();
    assert_eq!(
        between.iter().map(|c| (c.a.as_str(), c.b.as_str())).collect::<Vec<_>>(),
        [
            ("app (cold, plan b alongside)", "app (cold, plan a alongside)"),
            ("app (cold, plan b ahead)", "app (cold, plan a ahead)")
        ]
    );
    for c in &between {
        let [lo, hi] = c.paired_ratio_ci95.unwrap();
        assert!(
            (c.paired_ratio.unwrap() - 1.1).abs() < 1e-9
                && (lo - 1.1).abs() < 1e-9
                && (hi - 1.1).abs() < 1e-9
        );
        assert!(c.ratio_ci95[0] < 1.0, "the two-sample interval is lost in the drift: {c:?}");
    }
    let ahead_vs_cold = results
        .comparisons
        .iter()
        .find(|c| c.kind == "prefetch" && c.a == "app (cold, plan a ahead)")
        .unwrap();
    assert!((ahead_vs_cold.paired_ratio.unwrap() - 0.5).abs() < 1e-9);

    let text = summary::render(&results);
    assert!(text.contains("Benchmark 4: plan b alongside"), "{text}");
    assert!(text.contains("  plan b ahead vs plan a ahead: "), "{text}");
    assert!(text.contains("paired by round: 1.100× [95% CI 1.100 … 1.100]"), "{text}");
    assert!(text.contains("  plan a ahead vs cold: "), "{text}");

    use coldstart_bench::export::Exporter;
    let json: serde_json::Value =
        serde_json::from_slice(&coldstart_bench::export::JsonExporter.serialize(&results).unwrap()).unwrap();
    let commands: Vec<&str> =
        json["results"].as_array().unwrap().iter().map(|r| r["command"].as_str().unwrap()).collect();
    assert_eq!(commands, labels.map(|(l, _)| l));
    assert_eq!(json["results"][4]["plan"], "b");
    assert_eq!(
        json["plans"],
        serde_json::json!([{"name": "a", "path": "a.plan"}, {"name": "b", "path": "/plans/b.plan"}])
    );
}

#[test]
fn a_lone_plan_named_by_its_file_keeps_the_labels_of_earlier_exports() {
    let c = config();
    let labels: Vec<String> = c.configurations().iter().map(|&(i, cache)| c.short_label(i, cache)).collect();
    assert_eq!(labels, ["cold", "alongside", "ahead", "warm"]);
    let named = BenchConfig {
        prefetch: vec![PrefetchSetup::named("fresh", "app.plan".into(), ReplayOptions::default())],
        ..config()
    };
    assert_eq!(named.label(0, Cache::Ahead(Evict::System, 0)), "app (cold, plan fresh ahead)");
}
