//! Records the fixture program and checks that the trace holds exactly the pages it
//! read, attributed to the right process and file, with the origin of each fill
//! (read, fault, or read ahead and never touched), the pages it asked for as
//! accesses, its double-forked grandchild as a descendant, its marks in order, its
//! exit status, and block reads that account for the disk's own read counter.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use coldstart_record::{RecordConfig, record};
use coldstart_trace::{AccessKind, FileIndex, MarkSource, PageOrigin, Trace};

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

/// The file named `path` (or `path (deleted)`, as the kernel names a file deleted
/// before the recorder looked at it).
fn file_id(trace: &Trace, path: &Path) -> u32 {
    let want = path.to_string_lossy();
    let deleted = format!("{want} (deleted)");
    trace
        .files
        .iter()
        .find(|f| f.path.as_deref() == Some(&*want) || f.path.as_deref() == Some(&*deleted))
        .unwrap_or_else(|| panic!("no file {want}"))
        .id
}

/// The pages of `path` that entered the cache after `after`, by origin.
fn origins_of(trace: &Trace, path: &Path, after: i64) -> HashMap<Option<PageOrigin>, BTreeSet<u64>> {
    let id = file_id(trace, path);
    let mut out: HashMap<Option<PageOrigin>, BTreeSet<u64>> = HashMap::new();
    for p in trace.page_fills.iter().filter(|p| p.file_id == id && p.t_ns >= after) {
        out.entry(p.origin).or_default().extend(p.index..p.index + u64::from(p.pages));
    }
    out
}

/// The accesses to `path` after `after`, in time order, as (pid, kind, first page, pages).
fn accesses_of(trace: &Trace, path: &Path, after: i64) -> Vec<(i32, AccessKind, u64, u32)> {
    let id = file_id(trace, path);
    let mut rows: Vec<_> =
        trace.page_accesses.iter().filter(|a| a.file_id == id && a.t_ns >= after).collect();
    rows.sort_by_key(|a| a.t_ns);
    rows.iter().map(|a| (a.pid, a.kind, a.index, a.pages)).collect()
}

/// The faults of `accesses` as pages, checking that every other access is a
/// fault-around window holding one of them (the kernel maps around the faulting page).
fn faulted_pages(accesses: &[(i32, AccessKind, u64, u32)]) -> Vec<u64> {
    let faults: Vec<u64> = accesses
        .iter()
        .filter(|a| a.1 == AccessKind::Fault)
        .inspect(|a| assert_eq!(a.3, 1, "a fault is one page"))
        .map(|a| a.2)
        .collect();
    for a in accesses.iter().filter(|a| a.1 != AccessKind::Fault) {
        assert_eq!(a.1, AccessKind::MapAround, "{a:?}");
        assert!(
            faults.iter().any(|p| (a.2..a.2 + u64::from(a.3)).contains(p)),
            "{a:?} holds no faulted page"
        );
    }
    faults
}

/// `read_ahead_kb` of the disk holding `path`.
fn read_ahead_kb(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(path).ok()?.dev();
    let sys = std::fs::canonicalize(format!(
        "/sys/dev/block/{}:{}",
        nix::sys::stat::major(dev),
        nix::sys::stat::minor(dev)
    ))
    .ok()?;
    let disk = if sys.join("partition").exists() { sys.parent()?.to_owned() } else { sys };
    std::fs::read_to_string(disk.join("queue/read_ahead_kb")).ok()?.trim().parse().ok()
}

fn pages(r: impl IntoIterator<Item = u64>) -> BTreeSet<u64> {
    r.into_iter().collect()
}

#[test]
fn the_trace_holds_exactly_the_pages_the_fixture_read() {
    if !coldstart_testkit::can_record("the_trace_holds_exactly_the_pages_the_fixture_read") {
        return;
    }
    let dir = coldstart_testkit::private_dir!();
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
    for f in trace.files.iter().filter(|f| f.path.is_none()) {
        let fills: Vec<_> = trace.page_fills.iter().filter(|p| p.file_id == f.id).collect();
        let accesses: Vec<_> = trace.page_accesses.iter().filter(|p| p.file_id == f.id).collect();
        eprintln!("unresolved: {f:?}, fills {fills:?}, accesses {accesses:?}");
    }
    let (pid, child, grandchild) = pids(dir.path());

    assert_eq!(trace.meta.exit_code, Some(7));
    assert_eq!(trace.meta.root_pid, Some(pid));
    assert!(!trace.meta.partial);
    assert_eq!(trace.meta.ready.as_ref().map(|r| &r.reason), Some(&coldstart_trace::ReadyReason::Exit));

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

    check_accesses_and_origins(&trace, &dir_path, (pid, grandchild), evicted);

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

fn check_accesses_and_origins(trace: &Trace, dir: &Path, (pid, grandchild): (i32, i32), evicted: i64) {
    use AccessKind::Read;
    use PageOrigin as O;
    if trace.notes.iter().any(|n| n.text.contains("page accesses (and fill origins) are not recorded")) {
        coldstart_testkit::unavailable("the access checks", "this kernel lacks the page-access events");
        return;
    }
    let (a, b, c, d, e) =
        (dir.join("a.bin"), dir.join("b.bin"), dir.join("c.bin"), dir.join("d.bin"), dir.join("e.bin"));
    // pread without readahead: one access per call, each fill is a read.
    assert_eq!(accesses_of(trace, &a, evicted), [(pid, Read, 3, 5), (pid, Read, 20, 2)]);
    assert_eq!(origins_of(trace, &a, evicted), HashMap::from([(Some(O::Read), pages((3..8).chain(20..22)))]));
    assert_eq!(accesses_of(trace, &c, evicted), [(grandchild, Read, 0, 4)]);
    assert_eq!(origins_of(trace, &c, evicted), HashMap::from([(Some(O::Read), pages(0..4))]));
    // Touches through a MADV_RANDOM mapping: one fault per page, each fill a fault.
    let b_accesses = accesses_of(trace, &b, evicted);
    assert!(b_accesses.iter().all(|x| x.0 == pid));
    assert_eq!(faulted_pages(&b_accesses), [1, 10, 40]);
    assert_eq!(origins_of(trace, &b, evicted), HashMap::from([(Some(O::Fault), pages([1, 10, 40]))]));
    // With readahead: the page asked for is a read or a fault, the rest of the window
    // was read ahead and never touched (no access names it).
    assert_eq!(accesses_of(trace, &d, evicted), [(pid, Read, 0, 1)]);
    let d_origins = origins_of(trace, &d, evicted);
    assert_eq!(d_origins.get(&Some(O::Read)), Some(&pages([0])));
    assert_eq!(d_origins.len(), 2, "{d_origins:?}");
    match read_ahead_kb(&d) {
        Some(kb) if kb >= 128 => assert_eq!(d_origins[&Some(O::Readahead)], pages(1..4)),
        kb => {
            eprintln!("read_ahead_kb {kb:?} < 128: the initial window of d.bin is not checked exactly");
            assert_eq!(
                d_origins[&Some(O::Readahead)],
                pages(1..=*d_origins[&Some(O::Readahead)].last().unwrap())
            );
        }
    }
    // A file written, read and deleted at once keeps its name (fanotify saw it
    // opened); the pages its write put in the cache have no origin.
    let gone = dir.join("gone.bin");
    assert_eq!(accesses_of(trace, &gone, evicted), [(pid, Read, 0, 1)]);
    assert_eq!(
        origins_of(trace, &gone, evicted),
        HashMap::from([(None, pages(0..4)), (Some(O::Read), pages([0]))])
    );
    let e_accesses = accesses_of(trace, &e, evicted);
    assert!(e_accesses.iter().all(|x| x.0 == pid));
    assert_eq!(faulted_pages(&e_accesses), [5]);
    let e_origins = origins_of(trace, &e, evicted);
    assert_eq!(e_origins.get(&Some(O::Fault)), Some(&pages([5])));
    if read_ahead_kb(&e).is_some_and(|kb| kb >= 40) {
        assert_eq!(e_origins.get(&Some(O::Readahead)), Some(&pages([0, 1, 2, 3, 4, 6, 7])));
        assert_eq!(e_origins.len(), 2, "{e_origins:?}");
    }
}
