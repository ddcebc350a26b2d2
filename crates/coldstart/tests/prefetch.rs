//! `coldstart prefetch plan|show|run` and `coldstart run --prefetch` end to end, on a
//! synthetic trace of private temporary files; the systemd unit templates checked
//! with `systemd-analyze verify`.

mod support;
use support::{ci, coldstart, have_systemd_analyze, is_root, json, man_path};

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use coldstart_trace::{Dev, Extent, File, FileKind, FileOpen, Meta, PageFill, Process, Trace, TraceWriter};
use predicates::str::contains;

const PAGE: u64 = 4096;

/// Three files of 16 pages in `dir`, and a trace of a start that read pages 0..4 of
/// each and opened an empty fourth file.
fn fixture(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut trace = Trace {
        meta: Meta { page_size: 4096, root_pid: Some(7), command: vec!["app".into()], ..Meta::default() },
        processes: vec![Process { pid: 7, start_ns: Some(0), in_scope: true, ..Process::default() }],
        ..Trace::default()
    };
    let mut paths = Vec::new();
    for (id, name) in ["a.so", "b.py", "c.dat", "empty.py"].iter().enumerate() {
        let path = dir.join(name);
        let pages = if *name == "empty.py" { 0 } else { 16 };
        std::fs::write(&path, vec![b'x'; (pages * PAGE) as usize]).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let m = std::fs::metadata(&path).unwrap();
        let id = id as u32 + 1;
        trace.files.push(File {
            id,
            dev: Dev::from_user(m.dev()),
            ino: m.ino(),
            path: Some(path.to_string_lossy().into_owned()),
            kind: FileKind::Regular,
            size: Some(m.size()),
            mtime_ns: Some(m.mtime() * 1_000_000_000 + m.mtime_nsec()),
        });
        trace.file_opens.push(FileOpen { t_ns: i64::from(id) * 1_000_000, pid: 7, file_id: id, exec: false });
        if pages > 0 {
            trace.page_fills.push(PageFill {
                t_ns: i64::from(id) * 1_000_000 + 10,
                pid: 7,
                tid: 7,
                file_id: id,
                index: 0,
                pages: 4,
                origin: None,
            });
            trace.extents.push(Extent {
                file_id: id,
                disk: Dev::new(254, 0),
                logical: 0,
                physical: u64::from(id) << 20,
                length: pages * PAGE,
                flags: 0,
            });
        }
        paths.push(path);
    }
    let trace_path = dir.join("app.coldstart");
    let mut writer = TraceWriter::create(&trace_path).unwrap();
    writer.all(&trace).unwrap();
    writer.finish().unwrap();
    (trace_path, paths)
}

fn evict(paths: &[PathBuf]) {
    for p in paths {
        let f = std::fs::File::open(p).unwrap();
        for _ in 0..2 {
            nix::fcntl::posix_fadvise(&f, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
        }
    }
}

fn make_plan(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
    let (trace, paths) = fixture(dir);
    let plan = dir.join("app.plan");
    coldstart()
        .args(["prefetch", "plan"])
        .arg(&trace)
        .arg("-o")
        .arg(&plan)
        .assert()
        .success()
        .stderr(contains("3 ranges, 0.0 MiB (1.00× the 0.0 MiB the start read; covers 100.0% of it)"));
    (plan, paths)
}

#[test]
fn plan_show_and_run_a_plan() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, paths) = make_plan(dir.path());
    coldstart()
        .args(["prefetch", "show"])
        .arg(&plan)
        .assert()
        .success()
        .stdout(contains("4 files (1 only opened), 3 ranges"))
        .stdout(contains("FALLBACK"))
        .stdout(contains("a.so"));
    coldstart()
        .args(["prefetch", "plan"])
        .arg(dir.path().join("app.coldstart"))
        .arg("-o")
        .arg(&plan)
        .assert()
        .code(2)
        .stderr(contains("exists; use --force"));

    evict(&paths);
    let report = dir.path().join("report.json");
    coldstart()
        .args(["prefetch", "run", "--depth", "2", "--json"])
        .arg(&report)
        .arg(&plan)
        .assert()
        .success();
    let r = json(&report);
    assert_eq!(r["planned"]["bytes"], 12 * PAGE);
    assert_eq!(r["files_opened"], 4);
    let fetched = r["fetched"]["bytes"].as_u64().unwrap() + r["resident"]["bytes"].as_u64().unwrap();
    assert_eq!(fetched, 12 * PAGE, "{r:#}");
    assert_eq!(r["directories"], dir.path().ancestors().count(), "{r:#}");
}

#[test]
fn fill_sequential_reads_the_planned_ranges_with_plain_reads() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, paths) = make_plan(dir.path());
    evict(&paths);
    let report = dir.path().join("report.json");
    coldstart()
        .args(["prefetch", "run", "--fill", "sequential", "--json"])
        .arg(&report)
        .arg(&plan)
        .assert()
        .success();
    let r = json(&report);
    assert_eq!(r["options"]["fill"], "sequential", "{r:#}");
    let fetched = r["fetched"]["bytes"].as_u64().unwrap();
    assert_eq!(fetched + r["resident"]["bytes"].as_u64().unwrap(), 12 * PAGE, "{r:#}");
    assert_eq!(
        r["sequential"]["bytes"].as_u64().unwrap(),
        fetched,
        "every fetched range read plainly: {r:#}"
    );
    coldstart()
        .args(["prefetch", "run", "--fill", "bogus"])
        .arg(&plan)
        .assert()
        .code(2)
        .stderr(contains("invalid value 'bogus' for '--fill"));
}

#[test]
fn cpu_idle_is_taken_by_the_replay_and_a_bad_class_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, _) = make_plan(dir.path());
    let report = dir.path().join("report.json");
    coldstart()
        .args(["prefetch", "run", "--cpu", "idle", "--json"])
        .arg(&report)
        .arg(&plan)
        .assert()
        .success();
    let r = json(&report);
    assert_eq!(
        (&r["options"]["cpu"], &r["options"]["alongside_cpu"]),
        (&"idle".into(), &"idle".into()),
        "{r:#}"
    );
    assert!(r["problems"].as_array().unwrap().is_empty(), "SCHED_IDLE needs no privilege: {r:#}");
    assert_eq!(
        r["planned"]["bytes"],
        r["fetched"]["bytes"].as_u64().unwrap() + r["resident"]["bytes"].as_u64().unwrap()
    );
    coldstart()
        .args(["prefetch", "run", "--cpu", "lowest"])
        .arg(&plan)
        .assert()
        .code(2)
        .stderr(contains("invalid value 'lowest' for '--cpu"));
}

#[test]
fn stat_entries_looks_up_every_entry_of_the_listed_directories() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, paths) = make_plan(dir.path());
    let report = dir.path().join("report.json");
    let run = |extra: &[&str]| {
        coldstart()
            .args(["prefetch", "run", "--json"])
            .arg(&report)
            .args(extra)
            .arg(&plan)
            .assert()
            .success();
        json(&report)
    };
    let r = run(&[]);
    assert_eq!(
        (r["options"]["stat_entries"].as_bool(), r["entries_looked_up"].as_u64()),
        (Some(false), Some(0))
    );
    let r = run(&["--stat-entries"]);
    assert_eq!(r["options"]["stat_entries"], true);
    let looked_up = r["entries_looked_up"].as_u64().unwrap();
    assert!(looked_up >= paths.len() as u64, "the planned files are entries of listed directories: {r:#}");
    coldstart()
        .args(["prefetch", "run", "--stat-entries", "--skip-directories"])
        .arg(&plan)
        .assert()
        .code(2)
        .stderr(contains("cannot be used with"));
}

#[test]
fn a_plan_from_a_newer_format_is_refused_with_a_clear_message() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, _) = make_plan(dir.path());
    let text = std::fs::read_to_string(&plan).unwrap().replacen("\"version\": 1", "\"version\": 7", 1);
    std::fs::write(&plan, text).unwrap();
    for args in [["prefetch", "run"], ["prefetch", "show"]] {
        coldstart()
            .args(args)
            .arg(&plan)
            .assert()
            .code(2)
            .stderr(contains("format version 7, newer than this coldstart understands (version 1)"));
    }
}

#[test]
fn stale_files_are_reported_and_max_stale_fails_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, paths) = make_plan(dir.path());
    for p in &paths[..2] {
        std::fs::write(p, b"new contents").unwrap();
    }
    coldstart()
        .args(["prefetch", "run", "--max-stale", "50"])
        .arg(&plan)
        .assert()
        .code(4)
        .stderr(contains("stale, skipped"))
        .stderr(contains("size changed"))
        .stderr(contains("66.7% of the planned bytes"));
}

#[test]
fn run_replays_alongside_or_ahead_and_exits_with_the_commands_status() {
    let dir = tempfile::tempdir().unwrap();
    let (plan, paths) = make_plan(dir.path());
    for (ahead, code) in [(false, 0), (true, 3)] {
        evict(&paths);
        let report = dir.path().join("run.json");
        let mut cmd = coldstart();
        cmd.args(["run", "--as-root", "--prefetch"]).arg(&plan).arg("--report-json").arg(&report);
        if ahead {
            cmd.arg("--ahead");
        }
        cmd.args(["--", "sh", "-c"]).arg(format!("cat {} > /dev/null; exit {code}", paths[0].display()));
        cmd.assert().code(code).stderr(contains("prefetch: "));
        let r = json(&report);
        assert_eq!(r["prefetch"], if ahead { "ahead" } else { "alongside" });
        assert_eq!(r["exit_code"], code);
        assert!(r["time_s"].as_f64().unwrap() > 0.0);
        assert_eq!(r["replay"]["planned"]["bytes"], 12 * PAGE);
        if ahead {
            assert!(r["ahead_s"].as_f64().is_some());
            assert_eq!(r["replay"]["cancelled"], false);
        }
    }
}

#[test]
fn an_unprivileged_replay_reads_what_the_user_can_read() {
    if !is_root() {
        assert!(!ci(), "CI=true: this test needs root to switch to the user nobody");
        eprintln!("skipped: needs root to run the replay as nobody");
        return;
    }
    if std::process::Command::new("setpriv").arg("--version").output().is_err() {
        assert!(!ci(), "CI=true: setpriv (util-linux) is missing");
        eprintln!("skipped: setpriv is missing");
        return;
    }
    let dir = tempfile::Builder::new().prefix("coldstart-unpriv").tempdir_in("/tmp").unwrap();
    let (plan, paths) = make_plan(dir.path());
    std::fs::set_permissions(&plan, std::fs::Permissions::from_mode(0o644)).unwrap();
    evict(&paths);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=nobody", "--regid=nogroup", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["prefetch", "run", "--json", "-", "--quiet"])
        .arg(&plan)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // nobody may read the files but not write them: cachestat will not say what is
    // cached, so the ranges are read without that knowledge, and nothing is skipped.
    assert_eq!(r["unknown_residency"]["bytes"], 12 * PAGE, "{r:#}");
    assert_eq!(r["files_opened"], 4);
    assert_eq!(r["stale_files"], 0);
}

#[test]
fn the_systemd_unit_templates_verify() {
    if !have_systemd_analyze() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../contrib/systemd");
    let binary = assert_cmd::cargo::cargo_bin!("coldstart").to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let runtime = dir.path().join("run");
    std::fs::create_dir(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let manpath = man_path(dir.path());
    for (template, user, instance) in [
        ("coldstart-prefetch@.service", false, "coldstart-prefetch@var-lib-coldstart-plans-app.plan.service"),
        ("user/coldstart-prefetch@.service", true, "coldstart-prefetch@app.service"),
    ] {
        let text = std::fs::read_to_string(root.join(template)).unwrap();
        assert!(text.contains("/usr/local/bin/coldstart prefetch run"), "{template}");
        let units = dir.path().join(if user { "user" } else { "system" });
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(
            units.join("coldstart-prefetch@.service"),
            text.replace("/usr/local/bin/coldstart", &binary),
        )
        .unwrap();
        let mut verify = std::process::Command::new("systemd-analyze");
        verify.env("MANPATH", &manpath);
        if user {
            verify.arg("--user").env("XDG_RUNTIME_DIR", &runtime);
        }
        let out = verify.arg("verify").arg(units.join(instance)).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{template}: {stderr}");
        assert!(!stderr.contains("coldstart-prefetch"), "{template}: {stderr}");
    }
}

/// A recorded tree of several processes, one of which double-forks away from it: the plan
/// made from the trace reads every file each of them read, whoever read it.
#[test]
fn a_plan_of_a_recorded_process_tree_covers_every_process() {
    if !support::can_record("plan_of_a_tree") {
        return;
    }
    let dir = support::private_dir();
    let names = ["by-root", "by-child", "by-grandchild", "by-daemon"];
    let files: Vec<PathBuf> = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![b'a' + i as u8; (i + 1) * 64 * 1024]).unwrap();
            path
        })
        .collect();
    let [root, child, grandchild, daemon] = [0, 1, 2, 3].map(|i| files[i].display().to_string());
    let script = format!(
        "cat {root} > /dev/null; sh -c 'cat {child} > /dev/null; sh -c \"cat {grandchild} > /dev/null\"'; \
         setsid sh -c 'sleep 0.2; cat {daemon} > /dev/null; touch {daemon}.done' & \
         while [ ! -e {daemon}.done ]; do sleep 0.05; done"
    );
    let trace = dir.path().join("tree.coldstart");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["record", "--cold", "--timeout", "60", "-o"])
        .arg(&trace)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(status.success());
    let plan_path = dir.path().join("tree.plan");
    coldstart().args(["prefetch", "plan"]).arg(&trace).arg("-o").arg(&plan_path).assert().success();
    let plan = coldstart_prefetch::Plan::load(&plan_path).unwrap();
    for (i, path) in files.iter().enumerate() {
        let planned = plan
            .files
            .iter()
            .find(|f| Path::new(&f.path) == path)
            .unwrap_or_else(|| panic!("{} ({}) is not in the plan", path.display(), names[i]));
        let bytes: u64 = planned.ranges.iter().map(|r| r.length).sum();
        assert_eq!(bytes, (i as u64 + 1) * 64 * 1024, "{}: the whole file, as read", names[i]);
    }
}

/// A library that another process keeps mapped stays cached through `--cold` (eviction cannot
/// drop mapped pages), so the recorded start maps it around its faults without reading it. The
/// trace keeps those pages (`page_resident`) and the plan covers them, as a really cold machine
/// must read them; a file nobody held is read and planned as usual, with no resident rows.
#[test]
fn pages_held_by_another_process_are_recorded_as_resident_and_planned() {
    if !support::can_record("pages_held_by_another_process") {
        return;
    }
    let dir = support::private_dir();
    let (held, free) = (dir.path().join("held.so"), dir.path().join("free.so"));
    for path in [&held, &free] {
        std::fs::write(path, vec![b'h'; 64 * PAGE as usize]).unwrap();
    }
    let toucher = "import mmap, sys\n\
        for path in sys.argv[1:]:\n\
        \x20   with open(path, 'rb') as f:\n\
        \x20       m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n\
        \x20       assert sum(m[i * 4096] for i in range(len(m) // 4096)) > 0\n";
    let ready = dir.path().join("holder.ready");
    let holder_script = format!(
        "import mmap, sys, time\n\
         f = open({held:?}, 'rb')\n\
         m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n\
         total = sum(m[i * 4096] for i in range(len(m) // 4096))\n\
         open({ready:?}, 'w').close()\n\
         time.sleep(120)\n",
        held = held.display().to_string(),
        ready = ready.display().to_string()
    );
    let mut holder = std::process::Command::new("python3").args(["-c", &holder_script]).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ready.exists() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ready.exists(), "the holder mapped the library");
    let trace_path = dir.path().join("held.coldstart");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_coldstart"))
        .args(["record", "--cold", "--timeout", "60", "-o"])
        .arg(&trace_path)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", "python3", "-c", toucher])
        .arg(&held)
        .arg(&free)
        .status()
        .unwrap();
    let _ = holder.kill();
    let _ = holder.wait();
    assert!(status.success());
    let trace = coldstart_trace::Trace::read(&trace_path).unwrap();
    let id = |path: &Path| {
        let path = std::fs::canonicalize(path).unwrap();
        trace
            .files
            .iter()
            .find(|f| f.path.as_deref() == path.to_str())
            .map(|f| f.id)
            .expect("file in the trace")
    };
    let pages_of = |rows: Vec<(u64, u32)>| -> std::collections::BTreeSet<u64> {
        rows.into_iter().flat_map(|(i, n)| i..i + u64::from(n)).collect()
    };
    let resident = |file: u32| {
        pages_of(
            trace.page_residents.iter().filter(|r| r.file_id == file).map(|r| (r.index, r.pages)).collect(),
        )
    };
    let filled = |file: u32| {
        pages_of(trace.page_fills.iter().filter(|r| r.file_id == file).map(|r| (r.index, r.pages)).collect())
    };
    let (held_id, free_id) = (id(&held), id(&free));
    assert!(filled(held_id).is_empty(), "the held library was never read: {:?}", filled(held_id));
    assert_eq!(resident(held_id), (0..64).collect(), "every page of the held library was mapped cached");
    assert!(!filled(free_id).is_empty(), "the free library was read");
    assert!(
        resident(free_id).is_empty(),
        "no resident rows for a file the start read: {:?}",
        resident(free_id)
    );
    assert!(trace.notes.iter().any(|n| n.text.contains("table page_resident")), "{:?}", trace.notes);

    let plan_path = dir.path().join("held.plan");
    coldstart().args(["prefetch", "plan"]).arg(&trace_path).arg("-o").arg(&plan_path).assert().success();
    let plan = coldstart_prefetch::Plan::load(&plan_path).unwrap();
    let planned = |path: &Path| -> u64 {
        let path = std::fs::canonicalize(path).unwrap();
        plan.files
            .iter()
            .filter(|f| Path::new(&f.path) == path)
            .flat_map(|f| &f.ranges)
            .map(|r| r.length)
            .sum()
    };
    assert_eq!(planned(&held), 64 * PAGE, "the plan reads the held library whole");
    assert_eq!(planned(&free), 64 * PAGE, "and the free one, as read and used");
}
