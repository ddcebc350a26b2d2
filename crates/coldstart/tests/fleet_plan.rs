//! `coldstart prefetch plan --dataset` through the binary: traces of four machines (three
//! of build 41.2, one of 41.3) exported into a dataset and planned for this machine's
//! files; a file changed here is left out; the plan replays; bad requests are one-line errors.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Output;

use assert_cmd::Command;
use coldstart_prefetch::Plan;
use coldstart_trace::{AccessKind, Dev, File, FileKind, Meta, PageAccess, PageFill, Process, Trace};

const PAGE: u64 = 4096;
const MS: i64 = 1_000_000;

fn coldstart(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_coldstart")).args(args).output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Three files of 32 pages each in `dir`.
fn image(dir: &Path) -> Vec<PathBuf> {
    ["libcore.so", "app.bin", "theme.dat"]
        .iter()
        .map(|name| {
            let path = dir.join(name);
            std::fs::write(&path, vec![b'x'; 32 * PAGE as usize]).unwrap();
            path
        })
        .collect()
}

/// A trace of host `host` that used `used[i]` pages (first, count) of file i at 10 ms × i.
fn trace(host: &str, files: &[PathBuf], used: &[(u64, u32)]) -> Trace {
    let now_ns =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as i64;
    let mut t = Trace {
        meta: Meta {
            page_size: PAGE as u32,
            root_pid: Some(1),
            host: host.into(),
            command: vec!["/sbin/init".into()],
            start_unix_ns: now_ns + 10_000 * MS,
            ..Meta::default()
        },
        processes: vec![Process { pid: 1, start_ns: Some(0), in_scope: true, ..Process::default() }],
        ..Trace::default()
    };
    for (i, (path, &(first, pages))) in files.iter().zip(used).enumerate() {
        let m = std::fs::metadata(path).unwrap();
        let id = i as u32 + 1;
        t.files.push(File {
            id,
            dev: Dev::new(8, 1),
            ino: 5000 + u64::from(id),
            path: Some(path.to_string_lossy().into_owned()),
            kind: FileKind::Regular,
            size: Some(m.size()),
            mtime_ns: Some(m.mtime() * 1_000_000_000 + m.mtime_nsec()),
        });
        let t_ns = 10 * MS * i64::from(id);
        t.page_fills.push(PageFill { t_ns, pid: 1, tid: 1, file_id: id, index: first, pages, origin: None });
        t.page_accesses.push(PageAccess {
            t_ns,
            pid: 1,
            tid: 1,
            file_id: id,
            index: first,
            pages,
            kind: AccessKind::Read,
        });
    }
    t
}

/// The dataset: hosts a, b, c of build 41.2 and d of 41.3.
fn dataset(dir: &Path, files: &[PathBuf]) -> PathBuf {
    let builds = [
        ("41.2", "a", [(0, 8), (0, 4), (0, 2)]),
        ("41.2", "b", [(0, 8), (0, 4), (16, 2)]),
        ("41.2", "c", [(0, 4), (0, 4), (30, 2)]),
        ("41.3", "d", [(20, 8), (20, 4), (0, 2)]),
    ];
    let ds = dir.join("ds");
    for (build, host, used) in builds {
        let path = dir.join(format!("{host}.coldstart"));
        trace(host, files, &used).write(&path).unwrap();
        let out = coldstart(&[
            "export",
            "--format",
            "parquet",
            "--build",
            build,
            "-o",
            ds.to_str().unwrap(),
            path.to_str().unwrap(),
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    ds
}

/// (file name, [(offset, length)]) of every planned file, by name.
fn ranges(plan: &Plan) -> Vec<(String, Vec<(u64, u64)>)> {
    let mut out: Vec<_> = plan
        .files
        .iter()
        .map(|f| {
            let name = Path::new(&f.path).file_name().unwrap().to_string_lossy().into_owned();
            (name, f.ranges.iter().map(|r| (r.offset, r.length)).collect())
        })
        .collect();
    out.sort();
    out
}

fn plan(ds: &Path, out: &Path, extra: &[&str]) -> (Plan, String) {
    let mut args =
        vec!["prefetch", "plan", "--dataset", ds.to_str().unwrap(), "-o", out.to_str().unwrap(), "--force"];
    args.extend_from_slice(extra);
    let run = coldstart(&args);
    assert!(run.status.success(), "{}", stderr(&run));
    (Plan::load(out).unwrap(), stderr(&run))
}

#[test]
fn a_plan_from_a_dataset_keeps_the_pages_most_traces_used_of_this_machines_files() {
    let dir = tempfile::tempdir().unwrap();
    let files = image(dir.path());
    let ds = dataset(dir.path(), &files);
    let out = dir.path().join("fleet.plan");

    let (p, text) =
        plan(&ds, &out, &["--min-share", "0.5", "--build", "41.2", "--max-size", "1", "--gap-kib", "0"]);
    // Of a, b, c: libcore 0-3 by all, 4-7 by two; app 0-3 by all; theme's pages differ on each.
    assert_eq!(
        ranges(&p),
        [("app.bin".to_owned(), vec![(0, 4 * PAGE)]), ("libcore.so".to_owned(), vec![(0, 8 * PAGE)])]
    );
    let fleet = p.source.fleet.as_ref().unwrap();
    assert_eq!((fleet.traces, fleet.min_traces, fleet.hosts), (3, 2, 3));
    assert_eq!(fleet.builds, ["41.2"]);
    assert!(text.contains("1 traces of other builds or machine classes were not read"), "{text}");
    // This machine's identity, so that the replay finds the files.
    let m = std::fs::metadata(&files[0]).unwrap();
    let core = p.files.iter().find(|f| f.path.ends_with("libcore.so")).unwrap();
    assert_eq!((core.dev, core.ino), (Dev::from_user(m.dev()), m.ino()));

    // Every build, all traces: page 0-3 of libcore by 3 of 4 at 0.75.
    let (p, _) = plan(&ds, &out, &["--min-share", "0.75", "--gap-kib", "0"]);
    assert_eq!(
        ranges(&p),
        [("app.bin".to_owned(), vec![(0, 4 * PAGE)]), ("libcore.so".to_owned(), vec![(0, 4 * PAGE)])]
    );

    // The plan replays: its files are this machine's.
    let run = coldstart(&["prefetch", "run", out.to_str().unwrap(), "--json", "-"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let report: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(report["stale_files"], 0, "{report}");
    assert_eq!(report["missing_files"], 0, "{report}");
    assert_eq!(report["planned_files"], 2, "{report}");
}

#[test]
fn a_file_changed_on_this_machine_is_left_out_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let files = image(dir.path());
    let ds = dataset(dir.path(), &files);
    // app.bin is rewritten here with another size: another build's file.
    std::fs::write(&files[1], vec![b'y'; 40 * PAGE as usize]).unwrap();
    let out = dir.path().join("fleet.plan");
    let (p, text) = plan(&ds, &out, &["--build", "41.2", "--gap-kib", "0"]);
    assert_eq!(ranges(&p), [("libcore.so".to_owned(), vec![(0, 8 * PAGE)])]);
    assert!(
        text.contains("left out: 1 file (0.0 MiB): another version than this machine's (size or modification time differs)"),
        "{text}"
    );
    let e = p.stats.excluded.iter().find(|e| e.reason.starts_with("another version")).unwrap();
    assert_eq!((e.files, e.read_bytes), (1, 4 * PAGE));
    std::fs::remove_file(&files[0]).unwrap();
    // Any trace's pages of theme.dat are planned; libcore.so is gone.
    let (p, text) = plan(&ds, &out, &["--build", "41.2", "--min-share", "0.3", "--gap-kib", "0"]);
    assert_eq!(
        ranges(&p),
        [("theme.dat".to_owned(), vec![(0, 2 * PAGE), (16 * PAGE, 2 * PAGE), (30 * PAGE, 2 * PAGE)])]
    );
    assert!(text.contains("left out: 1 file (0.0 MiB): missing on this machine"), "{text}");
    // At half, no page of theme.dat is shared: nothing is left to plan, and the error says why.
    let run = coldstart(&[
        "prefetch",
        "plan",
        "--dataset",
        ds.to_str().unwrap(),
        "--build",
        "41.2",
        "-o",
        out.to_str().unwrap(),
        "--force",
    ]);
    assert!(!run.status.success());
    assert!(
        stderr(&run).contains("nothing to plan: none of the files the traces share is on this machine"),
        "{}",
        stderr(&run)
    );
}

#[test]
fn bad_requests_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let files = image(dir.path());
    let ds = dataset(dir.path(), &files);
    let ds = ds.to_str().unwrap();
    let out = dir.path().join("x.plan");
    let out = out.to_str().unwrap();
    let cases: [(&[&str], &str); 6] = [
        (
            &["--dataset", ds, "--build", "9.9", "-o", out],
            "none of the dataset's 4 traces is of build 9.9: nothing to plan",
        ),
        (
            &["--dataset", ds, "--machine-class", "pi", "-o", out],
            "none of the dataset's 4 traces is of machine class pi: nothing to plan",
        ),
        (&["--dataset", ds, "--min-share", "1.5", "-o", out], "1.5 is not a share above 0 and at most 1"),
        (&["--dataset", ds, "--min-share", "half", "-o", out], "half is not a share above 0 and at most 1"),
        (&["a.coldstart", "--min-share", "0.5", "-o", out], "--dataset"),
        (&["--dataset", "/nonexistent", "-o", out], "not a coldstart dataset"),
    ];
    for (args, want) in cases {
        let mut all = vec!["prefetch", "plan"];
        all.extend_from_slice(args);
        let run = coldstart(&all);
        let text = stderr(&run);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {text}");
        assert!(text.contains(want), "{args:?}: {text}");
        assert!(!text.contains("panicked"), "{text}");
    }
    // A dataset with an error (a truncated file) is refused before anything is planned.
    let traces = std::path::Path::new(ds).join("page_used/build=41.2");
    let victim = std::fs::read_dir(&traces).unwrap().flatten().next().unwrap().path();
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() / 2]).unwrap();
    let run = coldstart(&["prefetch", "plan", "--dataset", ds, "-o", out]);
    assert_eq!(run.status.code(), Some(2));
    assert!(stderr(&run).contains("nothing was planned"), "{}", stderr(&run));
    assert!(!std::path::Path::new(out).exists());
}

#[test]
fn a_compacted_dataset_makes_the_same_plans() {
    let dir = tempfile::tempdir().unwrap();
    let files = image(dir.path());
    let ds = dataset(dir.path(), &files);
    let out = dir.path().join("fleet.plan");
    let requests: [&[&str]; 3] = [
        &["--min-share", "0.5", "--gap-kib", "0"],
        &["--min-share", "0.5", "--build", "41.2", "--gap-kib", "0"],
        &["--min-share", "0.3", "--build", "41.3", "--gap-kib", "0"],
    ];
    let before: Vec<Plan> = requests.iter().map(|r| plan(&ds, &out, r).0).collect();
    let run = coldstart(&["fleet", "compact", ds.to_str().unwrap()]);
    assert!(run.status.success(), "{}", stderr(&run));
    let traces = ds.join("traces/build=41.2");
    let names: Vec<String> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() == 1 && names[0].starts_with("part-"), "{names:?}");
    for (request, before) in requests.iter().zip(&before) {
        let (after, _) = plan(&ds, &out, request);
        assert_eq!(ranges(&after), ranges(before), "{request:?}");
        assert_eq!(after.source.fleet, before.source.fleet, "{request:?}");
        assert_eq!(after.stats.excluded, before.stats.excluded, "{request:?}");
        assert_eq!(after.notes, before.notes, "{request:?}");
    }
}
