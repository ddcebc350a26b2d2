//! Records the fixture program and checks that the trace holds exactly the pages it
//! read, attributed to the right process and file, its double-forked grandchild as
//! a descendant, its marks in order, its exit status, and block reads that account
//! for the disk's own read counter.

mod support;

use std::collections::BTreeSet;
use std::path::Path;

use coldstart_record::{RecordConfig, record};
use coldstart_trace::{FileIndex, MarkSource, Trace};

fn pids(dir: &Path) -> (i32, i32, i32) {
    let text = std::fs::read_to_string(dir.join("pids.txt")).unwrap();
    let get = |key: &str| -> i32 {
        text.lines().find_map(|l| l.strip_prefix(key)).unwrap().trim().parse().unwrap()
    };
    (get("pid "), get("child "), get("grandchild "))
}

fn pages_of(trace: &Trace, path: &Path, pid: i32, after: i64) -> BTreeSet<u64> {
    let files = FileIndex::new(trace);
    let want = path.to_string_lossy();
    trace
        .page_fills
        .iter()
        .filter(|p| p.t_ns >= after && files.get(p.file_id).and_then(|f| f.path.as_deref()) == Some(&*want))
        .inspect(|p| assert_eq!(p.pid, pid, "fill of {want} page {} by pid {}", p.index, p.pid))
        .flat_map(|p| p.index..p.index + u64::from(p.pages))
        .collect()
}

#[test]
fn the_trace_holds_exactly_the_pages_the_fixture_read() {
    if !support::can_record("the_trace_holds_exactly_the_pages_the_fixture_read") {
        return;
    }
    let dir = support::private_dir();
    let out = dir.path().join("fixture.coldstart");
    let config = RecordConfig {
        command: vec![env!("CARGO_BIN_EXE_coldstart-record-fixture").into(), dir.path().into()],
        output: Some(out.clone()),
        spool_root: dir.path().join("spool"),
        ..RecordConfig::default()
    };
    let recorded = record(&config).expect("record the fixture");
    assert_eq!(recorded.exit_code, 7);
    let trace = Trace::read(&out).unwrap();
    eprintln!("summary: {:?}\nnotes: {:?}", recorded.summary, trace.notes);
    let (pid, child, grandchild) = pids(dir.path());

    assert_eq!(trace.meta.exit_code, Some(7));
    assert_eq!(trace.meta.root_pid, Some(pid));
    assert!(!trace.meta.partial);
    assert_eq!(trace.meta.ready.as_ref().map(|r| r.reason.as_str()), Some("exit"));

    let marks: Vec<_> = trace.marks.iter().filter(|m| m.source == MarkSource::Command).collect();
    let names: Vec<&str> = marks.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["evicted", "done"]);
    assert!(marks.iter().all(|m| m.pid == Some(pid)));
    let evicted = marks[0].t_ns;
    assert!(evicted > 0 && evicted < marks[1].t_ns && marks[1].t_ns <= trace.meta.duration_ns);

    let markers: Vec<_> = trace.marks.iter().filter(|m| m.source == MarkSource::TraceMarker).collect();
    assert_eq!(markers.len(), 1);
    assert_eq!((markers[0].name.as_str(), markers[0].pid), ("fixture-marker", Some(pid)));
    assert!(markers[0].t_ns > evicted && markers[0].t_ns < marks[1].t_ns);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);

    let dir_path = std::fs::canonicalize(dir.path()).unwrap();
    assert_eq!(pages_of(&trace, &dir_path.join("a.bin"), pid, evicted), (3..8).chain(20..22).collect());
    assert_eq!(pages_of(&trace, &dir_path.join("b.bin"), pid, evicted), [1, 10, 40].into_iter().collect());
    assert_eq!(pages_of(&trace, &dir_path.join("c.bin"), grandchild, evicted), (0..4).collect());

    let process =
        |p: i32| trace.processes.iter().find(|x| x.pid == p).unwrap_or_else(|| panic!("no process {p}"));
    assert_eq!(process(pid).exit_code, Some(7));
    assert_eq!(process(child).ppid, Some(pid));
    assert_eq!(process(grandchild).ppid, Some(child));
    assert!(process(grandchild).in_scope);
    assert_eq!(
        process(pid).argv.first().map(String::as_str),
        Some(env!("CARGO_BIN_EXE_coldstart-record-fixture"))
    );
    for fill in &trace.page_fills {
        let thread = trace.threads.iter().find(|t| t.tid == fill.tid);
        assert_eq!(
            thread.map(|t| t.pid),
            Some(fill.pid),
            "fill by tid {} attributed to pid {}",
            fill.tid,
            fill.pid
        );
    }

    assert!(!recorded.summary.cross_checks.is_empty());
    for c in &recorded.summary.cross_checks {
        let (rec, disk) = (c.recorded_read_bytes as f64, c.diskstats_read_bytes as f64);
        assert!(
            (rec - disk).abs() <= 0.05 * disk.max(1.0),
            "{}: recorded {rec} B of reads, diskstats {disk} B",
            c.disk
        );
    }
    let sched_by_tid = trace.sched.iter().filter(|s| s.tid == pid).count();
    assert!(sched_by_tid > 0, "the fixture has scheduler intervals");
    assert!(!trace.cpu_samples.is_empty());
    assert!(
        !std::fs::read_dir("/sys/kernel/tracing/instances").unwrap().flatten().any(|e| e
            .file_name()
            .to_string_lossy()
            .starts_with(&format!("coldstart-{}-", std::process::id())))
    );
}
