//! `--prepare` and `--conclude` in the scheduler, with the mock executor: each runs
//! exactly once around each run (warm-ups and discarded runs too), in the order of the
//! runs, the command's own when each command has one; a failing one stops the benchmark
//! with an error naming it, and an interruption during one keeps the results so far.

use coldstart_bench::mock::HOOK_SECONDS;
use coldstart_bench::{
    BenchCommand, BenchConfig, BenchError, Cache, Evict, Hook, MockExecutor, Modes, Silent, run_benchmark,
};

fn command(name: &str, prepare: &str, conclude: &str) -> BenchCommand {
    BenchCommand {
        prepare: Some(prepare.to_owned()),
        conclude: Some(conclude.to_owned()),
        ..BenchCommand::new(vec![name.to_owned()])
    }
}

fn config() -> BenchConfig {
    BenchConfig {
        commands: vec![
            command("a", "rm -rf /tmp/pa && cp -a /tmp/pa.seed /tmp/pa", "echo a done"),
            command("b", "rm -rf /tmp/pb && cp -a /tmp/pb.seed /tmp/pb", "echo b done"),
        ],
        modes: Modes { cold: true, warm: true },
        runs: 3,
        warmup: 1,
        discard_first: true,
        ..BenchConfig::default()
    }
}

#[test]
fn prepare_runs_once_before_each_run_and_conclude_once_after_it_in_the_order_of_the_runs() {
    let c = config();
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::Files)), vec![1.0, 1.2]),
        ((0, Cache::Warm), vec![0.5]),
        ((1, Cache::Cold(Evict::Files)), vec![2.0]),
        ((1, Cache::Warm), vec![0.25, 0.75]),
    ]);
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    // 2 warm-ups, then (1 discarded + 3 measured rounds) × 4 configurations.
    let runs = mock.log.len();
    assert_eq!(runs, 2 + 4 * 4);
    let prepares: Vec<_> = mock.hooks.iter().filter(|h| h.hook == Hook::Prepare).collect();
    let concludes: Vec<_> = mock.hooks.iter().filter(|h| h.hook == Hook::Conclude).collect();
    assert_eq!((prepares.len(), concludes.len()), (runs, runs));
    let time_of = |i: usize| {
        let (command, cache) = mock.log[i];
        let earlier = mock.log[..i].iter().filter(|&&k| k == (command, cache)).count();
        let times = &mock.times[&(command, cache)];
        times[earlier % times.len()]
    };
    for i in 0..runs {
        let (start, end) = (mock.starts[i], mock.starts[i] + time_of(i));
        let previous_end = if i == 0 { 0.0 } else { mock.starts[i - 1] + time_of(i - 1) };
        let next_start = mock.starts.get(i + 1).copied().unwrap_or(f64::INFINITY);
        // Exactly one prepare between the previous run's conclude and this start, of this
        // run's command; exactly one conclude between its end and the next prepare.
        let before: Vec<_> = prepares.iter().filter(|h| h.at >= previous_end && h.at < start).collect();
        let after: Vec<_> = concludes.iter().filter(|h| h.at >= end && h.at < next_start).collect();
        assert_eq!(before.len(), 1, "run {i}: {before:?}");
        assert_eq!(after.len(), 1, "run {i}: {after:?}");
        assert_eq!((before[0].command, after[0].command), (mock.log[i].0, mock.log[i].0), "run {i}");
        assert_eq!(before[0].line, c.commands[mock.log[i].0].prepare.clone().unwrap(), "run {i}");
        assert_eq!(after[0].line, c.commands[mock.log[i].0].conclude.clone().unwrap(), "run {i}");
        // Nothing comes between a prepare and its run, nor between a run and its conclude.
        assert!((before[0].at + HOOK_SECONDS - start).abs() < 1e-9, "run {i}");
        assert!((after[0].at - end).abs() < 1e-9, "run {i}");
    }
    // The hooks are not in the times.
    assert_eq!(results.results[0].times, [1.2, 1.0, 1.2]);
    assert_eq!(
        results.preparations[1].prepare.as_deref(),
        Some("rm -rf /tmp/pb && cp -a /tmp/pb.seed /tmp/pb")
    );
}

#[test]
fn a_command_without_hooks_runs_none() {
    let mut c = config();
    c.commands[1].prepare = None;
    c.commands[1].conclude = None;
    c.warmup = 0;
    c.discard_first = false;
    let mut mock = MockExecutor::default();
    run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert!(mock.hooks.iter().all(|h| h.command == 0));
    assert_eq!(mock.hooks.len(), 2 * mock.log.iter().filter(|l| l.0 == 0).count());
}

#[test]
fn a_failing_prepare_stops_the_benchmark_and_is_named() {
    let c = config();
    // Hooks 0-3 are the warm-ups' prepare and conclude; hook 4 is the prepare of the
    // first discarded run, a cold run of `a`.
    let mut mock = MockExecutor { fail_hook: Some(4), ..MockExecutor::default() };
    let err = run_benchmark(&c, &mut mock, &mut Silent).unwrap_err();
    assert!(matches!(&err, BenchError::HookFailed { hook: Hook::Prepare, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "the --prepare command `rm -rf /tmp/pa && cp -a /tmp/pa.seed /tmp/pa` of `a` failed before discarded run 1 \
         of `a (cold)`: exit status 1 (the benchmark stops; append ` || true` to it if that failure may be ignored, \
         or see its output with --show-output)"
    );
    assert_eq!(mock.log.len(), 2, "only the warm-ups ran");
    let mut mock = MockExecutor { fail_hook: Some(1), ..MockExecutor::default() };
    let err = run_benchmark(&c, &mut mock, &mut Silent).unwrap_err();
    assert!(
        err.to_string().contains("--conclude command `echo a done` of `a` failed after warm-up run 1"),
        "{err}"
    );
}

#[test]
fn an_interruption_during_a_hook_keeps_the_results_so_far() {
    let mut c = config();
    c.warmup = 0;
    c.discard_first = false;
    // Hooks 0-7 surround the first round's four runs; hook 9 is the conclude of the
    // second round's first run: as for a run that is interrupted itself, that run is not
    // counted, and the first round's results are kept.
    let mut mock = MockExecutor { interrupt_hook: Some(9), ..MockExecutor::default() };
    let results = run_benchmark(&c, &mut mock, &mut Silent).unwrap();
    assert!(results.interrupted);
    assert_eq!(results.results.iter().map(|r| r.times.len()).collect::<Vec<_>>(), [1, 1, 1, 1]);
    assert_eq!(mock.log.len(), 5);
}
