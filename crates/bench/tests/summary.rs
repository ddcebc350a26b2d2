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
        prefetch: vec![PrefetchSetup::new("inkscape.plan".into(), ReplayOptions::default())],
        ..BenchConfig::default()
    };
    let mut mock = MockExecutor::with_times([
        ((0, Cache::Cold(Evict::System)), vec![0.80, 0.78, 0.81, 0.74, 0.79]),
        ((0, Cache::Alongside(Evict::System, 0)), vec![0.70, 0.66, 0.69, 0.71, 0.67]),
        ((0, Cache::Ahead(Evict::System, 0)), vec![0.52, 0.50, 0.51, 0.53, 0.50]),
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
            BenchCommand { name: "old".into(), argv: argv("app --old"), ..BenchCommand::default() },
            BenchCommand { name: "new".into(), argv: argv("app --new"), ..BenchCommand::default() },
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
            BenchCommand { name: "old".into(), argv: argv("app --old"), ..BenchCommand::default() },
            BenchCommand { name: "new".into(), argv: argv("app --new"), ..BenchCommand::default() },
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

#[test]
fn a_busy_machine_names_the_outside_processes_with_their_parents_and_command_lines() {
    use coldstart_bench::outside::{OutsideProcess, Parent};
    let config = BenchConfig {
        commands: vec![BenchCommand {
            prepare: Some("rm -rf /tmp/p && cp -a /tmp/p.seed /tmp/p".into()),
            ..BenchCommand::new(argv("app --profile /tmp/p"))
        }],
        runs: 6,
        ..BenchConfig::default()
    };
    let parent = |pid: i32, comm: &str, command: Option<&str>| Parent {
        pid,
        comm: comm.into(),
        command: command.map(str::to_owned),
    };
    let cron_job = OutsideProcess {
        pid: 4200,
        command: "/bin/bash /etc/cron.hourly/backup.sh --all".into(),
        parents: vec![parent(805, "cron", Some("/usr/sbin/cron -f"))],
        cpu: 0.25,
        children_cpu: 0.2,
        benchmark: false,
    };
    let shell = OutsideProcess {
        pid: 2345,
        command: "-bash".into(),
        parents: vec![parent(2300, "sshd", Some("sshd: user@pts/0")), parent(700, "sshd", None)],
        cpu: 0.02,
        children_cpu: 0.0,
        benchmark: false,
    };
    let mut mock = MockExecutor {
        outside: vec![cron_job, shell],
        other_cpu: Some(0.3),
        ..MockExecutor::with_times([((0, Cache::Cold(Evict::Files)), vec![1.0, 1.01, 0.99, 1.0, 1.02, 3.0])])
    };
    let results = run_benchmark(&config, &mut mock, &mut Silent).unwrap();
    let text = summary::render(&results);
    assert!(
        text.contains("Prepare: rm -rf /tmp/p && cp -a /tmp/p.seed /tmp/p (before each run, not timed)"),
        "{text}"
    );
    assert!(
        text.contains(
            "BUSY MACHINE: processes outside the benchmarked commands used 30.0% of the CPUs during the runs \
             (median of 6 runs; at most 30%, in run 1 of cold)\n  the times are inflated by that work"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "  1.500 s CPU in 6 of 6 runs, 1.200 s of it by children that exited: \
             /bin/bash /etc/cron.hourly/backup.sh --all [4200] ← /usr/sbin/cron -f [805]\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  120.0 ms CPU in 6 of 6 runs: -bash [2345] ← sshd: user@pts/0 [2300] ← sshd [700]\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "Outlier: run 6 took 3.000 s: machine busy: 30% of the CPUs worked for other processes during the run, \
             most for /bin/bash /etc/cron.hourly/backup.sh --all [4200] ← /usr/sbin/cron -f [805] (250.0 ms of CPU)"
        ),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_slice(
        &coldstart_bench::export::Exporter::serialize(&coldstart_bench::export::JsonExporter, &results)
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["outside_processes"][0]["parents"][0]["comm"], "cron");
    assert_eq!(json["outside_processes"][0]["runs"], 6);
    // A quiet machine gets no such section.
    let mut quiet = MockExecutor { outside: mock.outside.clone(), ..MockExecutor::default() };
    let text = summary::render(&run_benchmark(&config, &mut quiet, &mut Silent).unwrap());
    assert!(!text.contains("outside the benchmarked commands"), "{text}");
}
