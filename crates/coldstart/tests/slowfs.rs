//! A start on a slow filesystem (the FUSE rig of `coldstart storage slowfs`, 2 ms per
//! request, no attribute caching, as NFS with `noac`): its time is put on the stat calls
//! under the mount, the doctor's `slow_filesystem` finding gains about the rig's delay
//! total, and the files a program reads there are named by path (fanotify does not see
//! FUSE and the walk never enters it). No mount or daemon outlives a test.

mod support;

use std::path::Path;
use std::time::Duration;

use coldstart_analyze::doctor::{DoctorConfig, FindingKind, diagnose};
use coldstart_storage::SlowMount;
use coldstart_trace::Trace;
use support::{can_record, coldstart, private_dir, unavailable};

const DELAY: Duration = Duration::from_millis(2);

/// A source directory with `files` small files, served slowly at `mnt`.
fn slow_mount(test: &str, dir: &Path, files: usize) -> Option<SlowMount> {
    slow_mount_with(test, dir, files, DELAY)
}

fn slow_mount_with(test: &str, dir: &Path, files: usize, delay: Duration) -> Option<SlowMount> {
    if !can_record(test) {
        return None;
    }
    if !Path::new("/dev/fuse").exists() {
        unavailable(test, "/dev/fuse is missing");
        return None;
    }
    let (src, mnt) = (dir.join("src"), dir.join("mnt"));
    std::fs::create_dir_all(src.join("plug-ins")).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    for i in 0..files {
        std::fs::write(src.join(format!("plug-ins/p{i}")), format!("plug-in {i}\n").repeat(100)).unwrap();
    }
    Some(SlowMount::mount(&src, &mnt, delay).unwrap())
}

fn record(dir: &Path, out: &Path, script: &str) {
    coldstart()
        .arg("record")
        .arg("--syscalls")
        .arg("-o")
        .arg(out)
        .arg("--spool-dir")
        .arg(dir.join("spool"))
        .args(["--", "python3", "-c", script])
        .assert()
        .success();
}

fn mounted(mnt: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap().contains(&format!(" {} ", mnt.display()))
}

#[test]
fn stats_on_a_slow_filesystem_are_put_on_the_stat_call_under_it_and_the_doctor_names_them() {
    let test = "stats_on_a_slow_filesystem";
    let dir = private_dir();
    let Some(mount) = slow_mount(test, dir.path(), 50) else { return };
    let plugins = mount.at().join("plug-ins");
    let out = dir.path().join("stats.coldstart");
    let script =
        format!("import os\nfor i in range(2000):\n    os.stat('{}/p%d' % (i % 50))\n", plugins.display());
    record(dir.path(), &out, &script);
    let served = mount.stats();
    drop(mount);
    assert!(!mounted(&dir.path().join("mnt")), "the slow filesystem is unmounted");

    let trace = Trace::read(&out).unwrap();
    let a = coldstart_analyze::analyze(&trace);
    let ready = a.overview.ready.as_ref().expect("ready at exit").t_ns - a.overview.origin_ns;
    let dir_text = plugins.to_string_lossy().into_owned();
    let top = a.syscall_waits.first().expect("waits inside system calls");
    assert!(
        matches!(top.waited_in.syscall.as_str(), "newfstatat" | "statx" | "stat"),
        "{:?}",
        a.syscall_waits
    );
    assert_eq!(top.waited_in.dir.as_deref(), Some(dir_text.as_str()));
    assert!(top.waited_in.fstype.as_deref().is_some_and(|t| t.starts_with("fuse")), "{:?}", top.waited_in);
    assert!(
        top.ns as f64 >= 0.9 * ready as f64,
        "{} of {} ns to ready put on {}",
        top.ns,
        ready,
        top.waited_in
    );
    let cp = a.critical_path.as_ref().expect("a critical path");
    let on_path: i64 = cp
        .summary
        .in_syscalls
        .iter()
        .filter(|w| w.waited_in.dir.as_deref() == Some(dir_text.as_str()))
        .map(|w| w.ns)
        .sum();
    assert!(on_path as f64 >= 0.9 * ready as f64, "{on_path} of {ready} ns of the critical path");

    let d = diagnose(&trace, &a, &DoctorConfig::default(), &[]);
    let f = d.findings.iter().find(|f| f.kind == FindingKind::SlowFilesystem).expect("the finding");
    assert!(f.title.contains(&dir_text), "{}", f.title);
    // 2,000 stats; under a loaded CI machine the recorder has been seen to miss one of them
    // (1,999), which does not change what the finding says or where it puts the time.
    let counted: u64 =
        f.title.split(' ').next().and_then(|n| n.replace(',', "").parse().ok()).expect("a count first");
    assert!((1980..=2000).contains(&counted), "{}", f.title);
    assert!(f.title.contains(" metadata syscalls on a slow filesystem"), "{}", f.title);
    let delay = served.delay_ns as f64;
    assert!(
        (f.gain.ns as f64 - delay).abs() <= 0.3 * delay,
        "gain {} ns against {} requests of {:?} ({} ns)",
        f.gain.ns,
        served.requests,
        DELAY,
        served.delay_ns
    );

    let summary =
        coldstart().args(["syscalls", "--summary", "--path"]).arg(&plugins).arg(&out).assert().success();
    let text = String::from_utf8_lossy(&summary.get_output().stdout).into_owned();
    assert!(text.contains(&format!("{dir_text} (fuse")), "{text}");
}

#[test]
fn files_read_on_a_slow_filesystem_are_named_by_path() {
    let test = "files_read_on_a_slow_filesystem";
    let dir = private_dir();
    let Some(mount) = slow_mount(test, dir.path(), 5) else { return };
    let plugins = mount.at().join("plug-ins");
    let out = dir.path().join("reads.coldstart");
    let script = format!("for i in range(5):\n    open('{}/p%d' % i).read()\n", plugins.display());
    record(dir.path(), &out, &script);
    drop(mount);
    assert!(!mounted(&dir.path().join("mnt")));

    let trace = Trace::read(&out).unwrap();
    for i in 0..5 {
        let path = format!("{}/p{i}", plugins.display());
        let file = trace.files.iter().find(|f| f.path.as_deref() == Some(path.as_str()));
        let file = file.unwrap_or_else(|| {
            panic!(
                "no file named {path}: {:?}",
                trace.files.iter().filter(|f| f.path.is_none()).collect::<Vec<_>>()
            )
        });
        assert!(trace.page_fills.iter().any(|p| p.file_id == file.id), "{path} was read into the page cache");
        assert!(
            trace.syscalls.iter().any(|s| s.name == "read" && s.file_id == Some(file.id)),
            "the read of {path} names its file"
        );
    }
}

/// Calls slower than the threshold, and those that slept on FUSE, are recorded by
/// default, filtered in the kernel; fast calls are not.
#[test]
fn slow_stats_are_recorded_by_default_with_their_paths_and_fast_ones_are_not() {
    let test = "slow_stats_are_recorded_by_default";
    let dir = private_dir();
    let Some(mount) = slow_mount_with(test, dir.path(), 20, Duration::from_millis(5)) else { return };
    let plugins = mount.at().join("plug-ins");
    let local = dir.path().join("local");
    std::fs::create_dir_all(&local).unwrap();
    for i in 0..100 {
        std::fs::write(local.join(format!("f{i}")), b"local").unwrap();
    }
    let out = dir.path().join("slow.coldstart");
    let script = format!(
        "import os\nfor i in range(20000):\n    os.stat('{}/f%d' % (i % 100))\nfor i in range(20):\n    \
         os.stat('{}/p%d' % i)\n",
        local.display(),
        plugins.display()
    );
    let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    coldstart()
        .arg("record")
        .arg("-o")
        .arg(&out)
        .arg("--spool-dir")
        .arg(dir.path().join("spool"))
        .args(["--", python, "-c", &script])
        .assert()
        .success();
    drop(mount);
    assert!(!mounted(&dir.path().join("mnt")), "the slow filesystem is unmounted");

    let trace = Trace::read(&out).unwrap();
    let stats = |under: &Path| -> Vec<&coldstart_trace::Syscall> {
        let prefix = format!("{}/", under.display());
        trace
            .syscalls
            .iter()
            .filter(|s| matches!(s.name.as_str(), "newfstatat" | "statx" | "stat"))
            .filter(|s| s.path.as_deref().is_some_and(|p| p.starts_with(&prefix)))
            .collect()
    };
    let slow = stats(&plugins);
    let mut named: Vec<String> = slow.iter().filter_map(|s| s.path.clone()).collect();
    named.sort();
    named.dedup();
    assert_eq!(slow.len(), 20, "{named:?}");
    assert_eq!(named.len(), 20, "each slow stat with its own path: {named:?}");
    assert!(slow.iter().all(|s| s.exit_ns.zip(Some(s.enter_ns)).is_some_and(|(x, e)| x - e >= 5_000_000)));
    // A fast stat preempted for a millisecond on a loaded machine is a slow call too; a
    // handful of those is expected, the 20,000 are not.
    let fast = stats(&local).len();
    assert!(fast <= 20, "{fast} of the 20,000 fast stats recorded");
    assert!(
        trace.notes.iter().any(|n| n.text.contains("lasted 1 ms or more, or slept")),
        "the trace says which calls it holds: {:?}",
        trace.notes
    );

    let a = coldstart_analyze::analyze(&trace);
    let d = diagnose(&trace, &a, &DoctorConfig::default(), &[]);
    let f = d.findings.iter().find(|f| f.kind == FindingKind::SlowFilesystem).expect("the finding");
    assert!(f.title.starts_with("20 metadata syscalls on a slow filesystem"), "{}", f.title);
    assert!(f.title.contains(&plugins.to_string_lossy().into_owned()), "{}", f.title);
}

#[test]
fn a_bad_slow_syscalls_threshold_is_one_line_and_status_2() {
    for bad in ["fast", "-1", "1e3"] {
        let out =
            coldstart().args(["record", &format!("--slow-syscalls={bad}"), "--", "true"]).assert().code(2);
        let err = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(err.contains("--slow-syscalls"), "{err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error")).count(), 1, "{err}");
    }
}
