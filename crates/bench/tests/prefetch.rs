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
        prefetch: Some(PrefetchSetup { plan: "app.plan".into(), options: ReplayOptions::default() }),
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
        ((0, Cache::Alongside(Evict::System)), vec![1.1, 1.2, 1.0, 1.1, 1.15]),
        ((0, Cache::Ahead(Evict::System)), vec![1.0, 1.02, 0.98, 1.01, 1.0]),
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
