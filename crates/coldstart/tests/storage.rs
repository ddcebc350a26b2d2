//! `coldstart storage` and the emulated disks behind it: the device serves requests in the
//! time its profile's model gives, bad profiles are one-line errors, and nothing (mount,
//! loop device, FUSE daemon, directory) outlives a device, dropped or interrupted.

mod support;

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use coldstart_analyze::doctor::{DiskClass, DiskParams};
use coldstart_storage::EmulatedDisk;
use support::{can_make_devices, coldstart};

/// Devices are made one at a time, so timings do not overlap and leftover checks see one run.
static DEVICES: Mutex<()> = Mutex::new(());

/// Reads `count` blocks of `block` bytes from the device with O_DIRECT, at the offsets given.
fn direct_reads(device: &Path, block: usize, offsets: impl Iterator<Item = u64>) -> Duration {
    let mut file = std::fs::File::options().read(true).custom_flags(libc_o_direct()).open(device).unwrap();
    let mut backing = vec![0u8; block + 4096];
    let start = backing.as_ptr().align_offset(4096);
    let buf = &mut backing[start..start + block];
    // The device's own threads are real-time; a reader on a busy machine must be too, or
    // each of its wakeups adds to what is measured.
    coldstart_storage::make_timely();
    let began = Instant::now();
    for offset in offsets {
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.read_exact(buf).unwrap();
    }
    began.elapsed()
}

fn libc_o_direct() -> i32 {
    nix::fcntl::OFlag::O_DIRECT.bits()
}

#[test]
fn the_device_takes_the_time_its_model_says() {
    if !can_make_devices("the_device_takes_the_time_its_model_says") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    // An SD card with 4 ms requests: the CPU time and wakeups of the loop device and FUSE
    // per request (tens of µs, hundreds on a busy machine) stay small next to it, and the
    // test takes about 20 s.
    let sd: DiskParams = "custom:base=sd,request=4ms".parse().unwrap();
    let disk = EmulatedDisk::create(sd.clone(), 256 << 20).unwrap();
    // The device charges the profile's fixed cost per request it counts: exactly the
    // expected ones, or (sequential) a few more where the loop device's pieces of one read
    // arrived more than PIECE_GAP_NS apart on a busy machine.
    let check =
        |what: &str, wall: Duration, before: coldstart_storage::Stats, expected: u64, modelled: i64| {
            let after = disk.stats();
            let requests = after.requests - before.requests;
            assert!((expected..=expected + expected / 10).contains(&requests), "{what}: {requests} requests");
            let busy = after.busy_ns - before.busy_ns;
            let charged = modelled + (requests - expected) as i64 * sd.request_ns;
            assert!(busy.abs_diff(charged) <= requests, "{what}: device busy {busy} ns, model {charged} ns");
            let ratio = wall.as_nanos() as f64 / modelled as f64;
            eprintln!("{what}: {wall:?} measured, {modelled} ns modelled, ratio {ratio:.3}");
            assert!(
                (0.85..=1.15).contains(&ratio),
                "{what}: took {wall:?}, the model says {modelled} ns ({ratio:.3})"
            );
        };

    // 64 MiB in order, 1 MiB at a time: requests of 512 KiB (the profile's
    // max_request_bytes), whatever size the loop device passes on; no seek on an SD card.
    let before = disk.stats();
    let wall = direct_reads(disk.device(), 1 << 20, (0..64u64).map(|i| i << 20));
    let requests = (64 << 20) / sd.max_request_bytes;
    check("sequential 64 MiB", wall, before, requests, sd.sequential_read_ns(64 << 20));

    // 4,096 random 4 KiB reads, one at a time.
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let offsets: Vec<u64> = (0..4096)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % (65536 - 1)) * 4096
        })
        .collect();
    let before = disk.stats();
    let wall = direct_reads(disk.device(), 4096, offsets.into_iter());
    check("4096 random 4 KiB", wall, before, 4096, 4096 * (sd.request_ns + sd.transfer_ns(4096)));
}

/// A volume restored from a snapshot: the first read of a chunk costs its fetch and then the
/// base volume's request, a second read of that chunk the base volume's request alone; fetches
/// asked for at once never pass the profile's limit.
#[test]
fn a_snapshot_volume_fetches_each_chunk_on_its_first_read() {
    if !can_make_devices("a_snapshot_volume_fetches_each_chunk_on_its_first_read") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    // 4 ms requests on the base volume, so the loop device's and FUSE's own cost per request
    // (tens of µs) stays small next to what is measured; 20 ms fetches.
    let spec = "custom:base=snapshot,request=4ms,fetch_latency=20ms,fetch_depth=4";
    let params: DiskParams = spec.parse().unwrap();
    let disk = EmulatedDisk::create(params.clone(), 64 << 20).unwrap();
    let chunk = params.fetch_chunk_bytes;
    let base = params.request_ns + params.transfer_ns(4096);
    let ratio_of = |what: &str, wall: Duration, modelled: i64| {
        let ratio = wall.as_nanos() as f64 / modelled as f64;
        eprintln!("{what}: {wall:?} measured, {modelled} ns modelled, ratio {ratio:.3}");
        assert!(
            (0.85..=1.15).contains(&ratio),
            "{what}: took {wall:?}, the model says {modelled} ns ({ratio:.3})"
        );
    };
    let chunks = 24u64;
    let first = direct_reads(disk.device(), 4096, (0..chunks).map(|i| i * chunk + 8192));
    ratio_of("first reads", first, chunks as i64 * (params.fetch_ns() + base));
    assert_eq!(disk.stats().fetches, chunks);
    let second = direct_reads(disk.device(), 4096, (0..chunks).map(|i| i * chunk + 65536));
    ratio_of("second reads", second, chunks as i64 * base);
    assert_eq!(disk.stats().fetches, chunks, "no chunk fetched twice");
    // 12 readers at once, each on chunks of its own: never more than 4 fetches in flight.
    let device = disk.device().to_owned();
    let began = Instant::now();
    std::thread::scope(|scope| {
        for reader in 0..12u64 {
            let device = &device;
            scope.spawn(move || direct_reads(device, 4096, (0..3).map(|i| (32 + reader * 3 + i) * chunk)));
        }
    });
    let wall = began.elapsed();
    let stats = disk.stats();
    eprintln!("36 fetches by 12 readers: {wall:?}, {stats:?}");
    // 36 fetches 4 at a time: at least 9 fetches one after the other.
    assert!(wall.as_nanos() as f64 >= 0.85 * 9.0 * params.fetch_ns() as f64, "{wall:?}");
    assert_eq!(stats.fetches, chunks + 36);
    assert!(stats.most_fetches_in_flight <= 4, "{stats:?}");
    assert!(stats.most_fetches_in_flight >= 2, "the readers asked for fetches at once: {stats:?}");
    // Restored again: the first chunk is fetched again.
    disk.restorer()();
    let again = direct_reads(disk.device(), 4096, std::iter::once(8192));
    assert!(again.as_nanos() as i64 >= params.fetch_latency_ns, "{again:?}");
    assert_eq!(disk.stats().fetches, chunks + 37);
}

/// What on the system still points into `run_dirs` or is mounted at `mount_point`, and the dirs themselves.
fn leftovers_of(run_dirs: &[PathBuf], mount_point: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap();
    for line in mounts.lines() {
        let target = line.split(' ').nth(1).unwrap_or("");
        if Path::new(target) == mount_point || run_dirs.iter().any(|d| Path::new(target).starts_with(d)) {
            found.push(format!("mount: {line}"));
        }
    }
    for entry in std::fs::read_dir("/sys/block").unwrap().flatten() {
        if let Ok(backing) = std::fs::read_to_string(entry.path().join("loop/backing_file"))
            && run_dirs.iter().any(|d| Path::new(backing.trim_end()).starts_with(d))
        {
            found.push(format!("loop device {:?} on {backing}", entry.file_name()));
        }
    }
    found.extend(run_dirs.iter().filter(|d| d.exists()).map(|d| format!("directory {}", d.display())));
    found
}

fn run_dirs_of(pid: u32) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/run/coldstart-storage") else { return Vec::new() };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(&format!("/{pid}-")))
        .collect()
}

fn storage_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            comm.starts_with("fuser") || comm.starts_with("storage-timer")
        })
        .count()
}

#[test]
fn a_dropped_device_leaves_nothing_behind() {
    if !can_make_devices("a_dropped_device_leaves_nothing_behind") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let at = support::private_dir();
    let source = support::private_dir();
    let files: Vec<PathBuf> = (0..3)
        .map(|i| {
            let path = source.path().join(format!("f{i}"));
            std::fs::write(&path, vec![b'a' + i as u8; 100_000 * (i + 1)]).unwrap();
            path
        })
        .collect();
    let mut disk = EmulatedDisk::create(DiskParams::class_defaults(DiskClass::Sd), 64 << 20).unwrap();
    let run_dir = disk.run_dir().to_owned();
    disk.mount_at(at.path()).unwrap();
    let filled = disk.fill_from(&files).unwrap();
    assert_eq!((filled.files, filled.bytes), (3, 600_000));
    let copy = at.path().join(files[1].strip_prefix("/").unwrap());
    assert_eq!(std::fs::read(copy).unwrap(), vec![b'b'; 200_000]);
    assert!(disk.stored_bytes() < 32 << 20, "a sparse image: {} bytes held", disk.stored_bytes());
    assert!(!leftovers_of(std::slice::from_ref(&run_dir), at.path()).is_empty());
    assert!(storage_threads() >= 2, "the FUSE loop and the timer");
    assert_eq!(
        coldstart_storage::scheduling_policy(0),
        nix::libc::SCHED_OTHER,
        "the thread that made the device keeps a normal priority (what it starts inherits it)"
    );
    let policies: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).unwrap_or_default().starts_with("fuser"))
        .map(|t| coldstart_storage::scheduling_policy(t.file_name().to_string_lossy().parse().unwrap()))
        .collect();
    let timely = nix::libc::SCHED_FIFO | nix::libc::SCHED_RESET_ON_FORK;
    assert!(policies.contains(&timely), "a FUSE thread that served the fill runs real-time: {policies:?}");
    drop(disk);
    assert_eq!(leftovers_of(&[run_dir], at.path()), Vec::<String>::new());
    assert_eq!(storage_threads(), 0);
}

fn assert_clean_after(
    test: &str,
    mut child: std::process::Child,
    at: &Path,
    signal: Option<nix::sys::signal::Signal>,
) {
    let pid = child.id();
    if let Some(signal) = signal {
        wait_until_mounted(test, &mut child, at);
        let run_dirs = run_dirs_of(pid);
        assert_eq!(run_dirs.len(), 1, "{test}: one run directory named after the pid");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(128 + signal as i32), "{test}");
        assert_eq!(leftovers_of(&run_dirs, at), Vec::<String>::new(), "{test}");
    } else {
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{test}: 128 + SIGINT");
        assert_eq!(leftovers_of(&run_dirs_of(pid), at), Vec::<String>::new(), "{test}");
        assert!(run_dirs_of(pid).is_empty());
    }
}

fn wait_until_mounted(test: &str, child: &mut std::process::Child, at: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !std::fs::read_to_string("/proc/self/mounts").unwrap().contains(&format!(" {} ", at.display())) {
        assert!(Instant::now() < deadline, "{test}: never mounted");
        assert!(child.try_wait().unwrap().is_none(), "{test}: exited before mounting");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn mount_command(at: &Path, command: &[&str]) -> std::process::Child {
    let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin!("coldstart"));
    cmd.args(["storage", "mount", "sd", "--size", "64MiB", "--at"]).arg(at);
    if !command.is_empty() {
        cmd.arg("--").args(command);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap()
}

#[test]
fn an_interrupted_mount_leaves_nothing_behind() {
    if !can_make_devices("an_interrupted_mount_leaves_nothing_behind") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let at = support::private_dir();
    // The command interrupts coldstart itself, as Ctrl-C on coldstart alone would.
    let child = mount_command(at.path(), &["sh", "-c", "kill -INT $PPID; sleep 1"]);
    assert_clean_after("SIGINT from the command", child, at.path(), None);
    let child = mount_command(at.path(), &[]);
    assert_clean_after("SIGTERM while waiting", child, at.path(), Some(nix::sys::signal::Signal::SIGTERM));
    let child = mount_command(at.path(), &["sleep", "30"]);
    assert_clean_after(
        "SIGINT while the command runs",
        child,
        at.path(),
        Some(nix::sys::signal::Signal::SIGINT),
    );
}

#[test]
fn a_killed_run_is_cleaned_up_by_the_next_one() {
    if !can_make_devices("a_killed_run_is_cleaned_up_by_the_next_one") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let at = support::private_dir();
    let mut killed = mount_command(at.path(), &[]);
    wait_until_mounted("SIGKILL", &mut killed, at.path());
    let run_dirs = run_dirs_of(killed.id());
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert!(!leftovers_of(&run_dirs, at.path()).is_empty(), "SIGKILL leaves the mounts");
    let other = support::private_dir();
    let next = mount_command(other.path(), &["true"]);
    let status = next.wait_with_output().unwrap().status;
    assert!(status.success());
    assert_eq!(leftovers_of(&run_dirs, at.path()), Vec::<String>::new());
}

#[test]
fn bad_profiles_are_one_line_errors_with_exit_2() {
    let dir = support::private_dir();
    let negative = dir.path().join("negative.toml");
    std::fs::write(&negative, "base = \"hdd\"\nseek = \"-5ms\"\n").unwrap();
    let missing = dir.path().join("missing.toml");
    std::fs::write(&missing, "request = \"1ms\"\nbandwidth = \"25MB/s\"\n").unwrap();
    let no_depth = dir.path().join("no-depth.toml");
    std::fs::write(&no_depth, "base = \"snapshot\"\nfetch_depth = 0\n").unwrap();
    let cases: [(&str, &str); 7] = [
        ("floppy", "unknown disk class \"floppy\""),
        ("custom:base=cloud,fetch_latency=5ms", "fetch_latency needs fetch_chunk"),
        ("custom:base=snapshot,fetch_chunk=3000", "fetch_chunk=3000: expected a multiple of 4 KiB"),
        (no_depth.to_str().unwrap(), "fetch_depth=0: expected a count"),
        (negative.to_str().unwrap(), "seek=-5ms: expected a time"),
        (missing.to_str().unwrap(), "missing \"seek\""),
        ("custom:spin=fast", "unknown key \"spin\""),
    ];
    for (profile, says) in cases {
        for args in [
            vec!["storage", "show", profile],
            vec!["storage", "mount", profile, "--at", "/"],
            vec!["storage", "run", profile, "--files", "/dev/null", "--", "true"],
            vec!["bench", "--storage", profile, "--files", "/dev/null", "--", "true"],
        ] {
            let out = coldstart().args(&args).output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
            assert!(stderr.contains(says), "{args:?}: {stderr}");
        }
    }
    let data = dir.path().join("data");
    std::fs::write(&data, b"x").unwrap();
    let list = dir.path().join("files");
    std::fs::write(&list, format!("{}\n", data.display())).unwrap();
    let not_a_plan = dir.path().join("bad.plan");
    std::fs::write(&not_a_plan, "{\"x\": 1}").unwrap();
    for (plan, says) in [
        (not_a_plan.as_path(), "not a usable prefetch plan"),
        (&dir.path().join("none.plan"), "No such file"),
    ] {
        let out = coldstart()
            .args(["storage", "run", "sd", "--files"])
            .arg(&list)
            .arg("--prefetch")
            .arg(plan)
            .args(["--", "true"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "checked before anything is staged: {stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
    let out = coldstart().args(["storage", "mount", "sd", "--size", "lots", "--at", "/"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--size lots"));
}

#[test]
fn show_prints_every_parameter_with_its_unit_and_source() {
    let out = coldstart().args(["storage", "show", "cloud"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with("IOPS-limited cloud volume (class cloud)\n"), "{text}");
    assert!(text.contains("iops_limit             3000 I/Os per s"), "{text}");
    assert!(text.contains("iops_unit_bytes        262144 bytes (0.25 MiB)"), "{text}");
    assert!(text.contains("bandwidth_bytes_per_s  125.0 MB/s"), "{text}");
    assert_eq!(text.matches("default of the cloud class").count(), 12, "{text}");
    assert!(
        text.contains("read_ahead_bytes       131072 bytes (128 KiB; the device's read_ahead_kb)"),
        "{text}"
    );
    assert!(text.contains("elevator               none "), "{text}");
    let hdd = coldstart().args(["storage", "show", "hdd"]).output().unwrap();
    assert!(String::from_utf8_lossy(&hdd.stdout).contains("elevator               mq-deadline "));
    assert!(text.contains("fetch_chunk_bytes      0 (not fetched)"), "{text}");
    let out =
        coldstart().args(["storage", "show", "custom:base=snapshot,fetch_latency=20ms"]).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("fetch_chunk_bytes      524288 bytes (512 KiB)"), "{text}");
    assert!(text.contains("EBS direct APIs"), "{text}");
    assert!(text.contains("fetch_latency_ns       20.000 ms                        given"), "{text}");
    assert!(text.contains("fetch_depth            20 fetches in flight"), "{text}");
    assert!(text.contains("lowest EBS provisioned rate"), "where the depth came from: {text}");
}

/// An emulated hard disk is scheduled as the kernel schedules a real one (mq-deadline, which
/// serves real-time I/O priority first); an NVMe disk has no elevator.
#[test]
fn an_emulated_disk_has_the_elevator_of_its_kind() {
    if !can_make_devices("an_emulated_disk_has_the_elevator_of_its_kind") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for (profile, elevator) in [("hdd", "[mq-deadline]"), ("nvme", "[none]")] {
        let params: DiskParams = profile.parse().unwrap();
        let disk = EmulatedDisk::create(params, 64 << 20).unwrap();
        let name = disk.device().file_name().unwrap().to_owned();
        let scheduler =
            std::fs::read_to_string(Path::new("/sys/block").join(name).join("queue/scheduler")).unwrap();
        assert!(scheduler.contains(elevator), "{profile}: {scheduler}");
    }
}

/// The emulated device reads ahead as its profile says (the kernel would give a loop device
/// 128 KiB whatever it stands for), and gives the loop device its own setting back.
#[test]
fn an_emulated_disk_has_its_profiles_read_ahead() {
    if !can_make_devices("an_emulated_disk_has_its_profiles_read_ahead") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for (profile, kb) in
        [("hdd", 128), ("custom:base=ssd,read_ahead=2MiB", 2048), ("custom:base=sd,read_ahead=16KiB", 16)]
    {
        let params: DiskParams = profile.parse().unwrap();
        let disk = EmulatedDisk::create(params, 64 << 20).unwrap();
        let path = coldstart_storage::disk::read_ahead_path(disk.device());
        let read = |p: &Path| std::fs::read_to_string(p).unwrap().trim().parse::<u32>().unwrap();
        assert_eq!(read(&path), kb, "{profile}");
        // Changed while the device is ours: the teardown puts back the value it had before.
        std::fs::write(&path, "4000").unwrap();
        drop(disk);
        assert_ne!(read(&path), 4000, "{profile}: the loop device keeps a setting of the emulation");
    }
}

/// The mount namespace of every process now, by pid.
fn mount_namespaces() -> Vec<(i32, PathBuf)> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<i32>().ok()?;
            Some((pid, std::fs::read_link(e.path().join("ns/mnt")).ok()?))
        })
        .collect()
}

/// `bench --storage sd` of a command that reads `data`, touches `started` and sleeps
/// `sleep` seconds (a token no other process has), `runs` cold runs.
fn bench_on_storage(dir: &Path, runs: &str, sleep: &str) -> std::process::Child {
    let data = dir.join("data");
    std::fs::write(&data, vec![7u8; 3 << 20]).unwrap();
    std::fs::write(dir.join("files"), format!("{}\n", data.display())).unwrap();
    let script = format!(
        "cat {} > /dev/null; cut -d' ' -f41 /proc/self/stat > {}; touch {}; sleep {sleep}",
        data.display(),
        dir.join("policy").display(),
        dir.join("started").display()
    );
    std::process::Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["bench", "--storage", "sd", "--no-progress", "--runs", runs, "--files"])
        .arg(dir.join("files"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn bench_on_storage_runs_there_and_leaves_nothing_behind() {
    if !can_make_devices("bench_on_storage") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::private_dir();
    let child = bench_on_storage(dir.path(), "2", "0");
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let served = stdout.lines().find(|l| l.starts_with("storage: emulated sd served")).expect(&stdout);
    let requests: u64 = served.split_whitespace().nth(4).unwrap().parse().unwrap();
    assert!(requests >= 2, "two cold runs read the 3 MiB file from the device: {served}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("1 files (3.0 MiB) on an emulated sd"), "{stderr}");
    let policy = std::fs::read_to_string(dir.path().join("policy")).unwrap();
    assert_eq!(policy.trim(), "0", "the benchmarked command runs at a normal priority (SCHED_OTHER)");
    assert_eq!(leftovers_of(&run_dirs_of(pid), Path::new("/nonexistent")), Vec::<String>::new());
    assert!(run_dirs_of(pid).is_empty());
}

#[test]
fn an_interrupted_bench_on_storage_leaves_nothing_behind() {
    if !can_make_devices("an_interrupted_bench_on_storage") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    for signal in [nix::sys::signal::Signal::SIGINT, nix::sys::signal::Signal::SIGTERM] {
        let dir = support::private_dir();
        let token = format!("30.{}{}", std::process::id(), signal as i32);
        let mut child = bench_on_storage(dir.path(), "3", &token);
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !dir.path().join("started").exists() {
            assert!(Instant::now() < deadline, "{signal}: the command never ran");
            assert!(child.try_wait().unwrap().is_none(), "{signal}: bench exited before the command ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        let own_ns = std::fs::read_link("/proc/self/ns/mnt").unwrap();
        let bench_ns = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
        assert_ne!(bench_ns, own_ns, "{signal}: bench runs in a mount namespace of its own");
        let run_dirs = run_dirs_of(pid);
        assert_eq!(run_dirs.len(), 1, "{signal}: one device");
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal).unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(130), "{signal}: interrupted");
        assert_eq!(leftovers_of(&run_dirs, Path::new("/nonexistent")), Vec::<String>::new(), "{signal}");
        let in_ns: Vec<i32> =
            mount_namespaces().into_iter().filter(|(_, ns)| *ns == bench_ns).map(|(p, _)| p).collect();
        assert_eq!(in_ns, Vec::<i32>::new(), "{signal}: processes left in bench's namespace");
        let sleeping = std::process::Command::new("pgrep").args(["-f", &token]).output().unwrap();
        assert!(sleeping.stdout.is_empty(), "{signal}: the command outlived the benchmark");
    }
}

#[test]
fn storage_run_puts_the_files_on_the_device_for_the_command_only() {
    if !can_make_devices("storage_run") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::private_dir();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![3u8; 1 << 20]).unwrap();
    std::fs::write(dir.path().join("files"), format!("# the data\n{}\n", data.display())).unwrap();
    let outside = std::fs::metadata(&data).unwrap();
    let seen = dir.path().join("seen");
    let script = format!(
        "stat -c '%d %i' {data} > {seen}; cmp -n 1048576 {data} /dev/zero >> {seen} 2>&1; exit 7",
        data = data.display(),
        seen = seen.display()
    );
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["storage", "run", "sd", "--files"])
        .arg(dir.path().join("files"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(7), "the command's own status: {stderr}");
    assert!(stderr.contains("1 files (1.0 MiB) of list "), "{stderr}");
    let served = stderr.lines().find(|l| l.contains("served")).expect(&stderr);
    let requests: u64 = served.split_whitespace().nth(3).unwrap().parse().expect(served);
    assert!(requests >= 1, "{served}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let mut first = seen.lines().next().unwrap().split(' ').map(|n| n.parse::<u64>().unwrap());
    let (dev, ino) = (first.next().unwrap(), first.next().unwrap());
    use std::os::unix::fs::MetadataExt;
    assert_ne!(dev, outside.dev(), "the command sees the copy, on another device: {seen}");
    assert!(seen.contains("differ: byte 1"), "the copy holds the data, not zeros: {seen}");
    let after = std::fs::metadata(&data).unwrap();
    assert_eq!(
        (after.dev(), after.ino()),
        (outside.dev(), outside.ino()),
        "the rest of the machine sees the original"
    );
    assert_ne!(ino, 0);
    assert!(run_dirs_of(pid).is_empty(), "the device is gone");
}

#[test]
fn a_recording_on_the_device_names_the_original_paths_and_the_devices_requests() {
    if !can_make_devices("record_on_storage") || !support::can_record("record_on_storage") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::private_dir();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![5u8; 2 << 20]).unwrap();
    std::fs::write(dir.path().join("files"), format!("{}\n", data.display())).unwrap();
    let trace_path = dir.path().join("t.coldstart");
    let out = coldstart()
        .args(["storage", "run", "sd", "--files"])
        .arg(dir.path().join("files"))
        .arg("--")
        .arg(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["record", "--cold", "-o"])
        .arg(&trace_path)
        .args(["--", "cat"])
        .arg(&data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let trace = coldstart_trace::Trace::read(&trace_path).unwrap();
    let file =
        trace.files.iter().find(|f| f.path.as_deref() == Some(data.to_str().unwrap())).unwrap_or_else(|| {
            panic!(
                "the data file by its own path: {:?}",
                trace.files.iter().map(|f| &f.path).collect::<Vec<_>>()
            )
        });
    let loop_major = 7;
    assert_eq!(file.dev.major, loop_major, "the file read is the copy on the loop device: {:?}", file.dev);
    let read_on_device: u64 = trace
        .block_ios
        .iter()
        .filter(|r| r.dev == file.dev && r.op == coldstart_trace::BlockOp::Read)
        .map(|r| u64::from(r.bytes))
        .sum();
    assert!(
        read_on_device >= 2 << 20,
        "the 2 MiB were read from the emulated device: {read_on_device} bytes"
    );
}

/// `storage run --prefetch PLAN`: the command finds the plan pointed at the copies in
/// $COLDSTART_PLAN (the copy's device and inode), so a replay there reads the copies and
/// skips nothing as stale; the moved plan is gone with the device.
#[test]
fn storage_run_points_a_plan_at_the_copies() {
    if !can_make_devices("storage_run_prefetch") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    use coldstart_trace::{Dev, File, FileKind, Meta, PageFill, Process, Trace, TraceWriter};
    use std::os::unix::fs::MetadataExt;
    let dir = support::private_dir();
    let data = dir.path().join("data");
    std::fs::write(&data, vec![5u8; 1 << 20]).unwrap();
    let m = std::fs::metadata(&data).unwrap();
    let trace = Trace {
        meta: Meta { page_size: 4096, root_pid: Some(7), command: vec!["app".into()], ..Meta::default() },
        processes: vec![Process { pid: 7, start_ns: Some(0), in_scope: true, ..Process::default() }],
        files: vec![File {
            id: 1,
            dev: Dev::from_user(m.dev()),
            ino: m.ino(),
            path: Some(data.to_string_lossy().into_owned()),
            kind: FileKind::Regular,
            size: Some(m.size()),
            mtime_ns: Some(m.mtime() * 1_000_000_000 + m.mtime_nsec()),
        }],
        page_fills: vec![PageFill {
            t_ns: 10,
            pid: 7,
            tid: 7,
            file_id: 1,
            index: 0,
            pages: 64,
            origin: None,
        }],
        ..Trace::default()
    };
    let trace_path = dir.path().join("app.coldstart");
    let mut writer = TraceWriter::create(&trace_path).unwrap();
    writer.all(&trace).unwrap();
    writer.finish().unwrap();
    let plan = dir.path().join("app.plan");
    coldstart().args(["prefetch", "plan"]).arg(&trace_path).arg("-o").arg(&plan).assert().success();
    let (seen, moved, replay) =
        (dir.path().join("seen"), dir.path().join("moved.json"), dir.path().join("replay"));
    let script = format!(
        "stat -c '%d %i' {data} > {seen}; cp \"$COLDSTART_PLAN\" {moved}; echo \"$COLDSTART_PLAN\" >> {seen}; \
         {bin} prefetch run \"$COLDSTART_PLAN\" > {replay} 2>&1",
        data = data.display(),
        seen = seen.display(),
        moved = moved.display(),
        replay = replay.display(),
        bin = assert_cmd::cargo::cargo_bin!("coldstart").display()
    );
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin!("coldstart"))
        .args(["storage", "run", "sd", "--trace"])
        .arg(&trace_path)
        .arg("--prefetch")
        .arg(&plan)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the plan's 1 of 1 files on the device"), "{stderr}");
    let seen = std::fs::read_to_string(&seen).unwrap();
    let mut lines = seen.lines();
    let mut ids = lines.next().unwrap().split(' ').map(|n| n.parse::<u64>().unwrap());
    let (dev, ino) = (ids.next().unwrap(), ids.next().unwrap());
    assert_ne!(dev, m.dev(), "the command sees the copy");
    let moved_plan = coldstart_prefetch::Plan::load(&moved).unwrap();
    assert_eq!(moved_plan.files[0].ino, ino, "the plan names the copy");
    assert_eq!(moved_plan.files[0].dev, Dev::from_user(dev));
    let replay = std::fs::read_to_string(&replay).unwrap();
    assert!(!replay.contains("stale"), "{replay}");
    assert!(!Path::new(lines.next().unwrap()).exists(), "the moved plan is removed with the device");
}

/// `storage mount --image`: the device holds a copy of the image (its UUID, its files), every
/// chunk of it still to be fetched, unmounted for the command to mount; a mount the command
/// leaves is undone; what is not an ext2/3/4 image is a one-line error.
#[test]
fn an_image_on_a_snapshot_volume_is_its_copy_with_every_chunk_still_to_fetch() {
    if !can_make_devices("an_image_on_a_snapshot_volume_is_its_copy_with_every_chunk_still_to_fetch") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::private_dir();
    let content = dir.path().join("content");
    std::fs::create_dir(&content).unwrap();
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    std::fs::write(content.join("data"), &data).unwrap();
    let uuid = "0b10c000-0000-4000-8000-0000000000cc";
    let image = ext4_image_of(&content, &dir.path().join("root.ext4"), uuid);
    let small_blocks = dir.path().join("1k.ext4");
    let made = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "1024"])
        .arg(&small_blocks)
        .arg("64M")
        .status();
    assert!(made.unwrap().success());
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let script = format!(
        "blkid -o value -s UUID $COLDSTART_STORAGE_DEVICE && mount $COLDSTART_STORAGE_DEVICE {at} && cmp {at}/data {src} && echo same",
        at = at.display(),
        src = content.join("data").display()
    );
    let out = coldstart()
        .args(["storage", "mount", "custom:base=snapshot,fetch_latency=5ms", "--image"])
        .arg(&image)
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert_eq!(stdout.lines().collect::<Vec<_>>(), [uuid, "same"], "{stderr}");
    assert!(stderr.contains("67108864 bytes from") && stderr.contains("not mounted"), "{stderr}");
    let fetched: u64 = stderr
        .split("; ")
        .find_map(|part| {
            part.split_once(" chunks of 512 KiB fetched").map(|(n, _)| n.trim().parse().unwrap())
        })
        .unwrap_or_else(|| panic!("no fetch count: {stderr}"));
    assert!(fetched >= 6, "the 3 MiB file's 6 chunks at least were fetched on first read: {stderr}");
    assert!(
        !std::fs::read_to_string("/proc/self/mounts").unwrap().contains(&*at.to_string_lossy()),
        "the command's mount was undone"
    );

    let not_ext = dir.path().join("zeros.img");
    std::fs::write(&not_ext, vec![0u8; 64 << 20]).unwrap();
    for (image, says) in [
        (not_ext.as_path(), "not an ext2/3/4 filesystem image"),
        (&dir.path().join("none.img"), "not a file"),
        (&content.join("data"), "at least 32 MiB"),
        (&small_blocks, "1024-byte blocks"),
    ] {
        let out = coldstart().args(["storage", "mount", "snapshot", "--image"]).arg(image).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    }
}

/// An ext4 image (4 KiB blocks, 64 MiB) of the files under `content`, with `uuid`.
fn ext4_image_of(content: &Path, image: &Path, uuid: &str) -> PathBuf {
    let made = std::process::Command::new("mkfs.ext4")
        .args(["-q", "-F", "-b", "4096", "-U", uuid, "-d"])
        .arg(content)
        .arg(image)
        .arg("64M")
        .status()
        .unwrap();
    assert!(made.success());
    image.to_owned()
}

/// A start (`cat` of 30 files of 600 KiB) recorded on an image's first read from a snapshot
/// volume (30 ms fetches): the doctor's first finding is `lazy_volume`, with the chunks the
/// start fetched.
#[test]
fn the_doctor_names_a_first_read_from_a_snapshot_volume() {
    if !can_make_devices("the_doctor_names_a_first_read_from_a_snapshot_volume") {
        return;
    }
    let _one = DEVICES.lock().unwrap_or_else(|e| e.into_inner());
    let dir = support::private_dir();
    let content = dir.path().join("content");
    std::fs::create_dir(&content).unwrap();
    for i in 0..30u8 {
        std::fs::write(content.join(format!("file{i:02}")), vec![i; 600 << 10]).unwrap();
    }
    let image = ext4_image_of(&content, &dir.path().join("app.ext4"), "0b10c000-0000-4000-8000-0000000000dd");
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let trace = dir.path().join("first.coldstart");
    let start = format!(
        "mount $COLDSTART_STORAGE_DEVICE {at} && {coldstart} record -o {trace} -- cat {at}/file* >/dev/null",
        at = at.display(),
        coldstart = env!("CARGO_BIN_EXE_coldstart"),
        trace = trace.display()
    );
    let out = coldstart()
        .args(["storage", "mount", "custom:base=snapshot,fetch_latency=30ms", "--image"])
        .arg(&image)
        .args(["--", "sh", "-c", &start])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = coldstart().args(["doctor", "--format", "json"]).arg(&trace).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = &report["doctor"]["findings"][0];
    assert_eq!(first["kind"], "lazy_volume", "{:#}", report["doctor"]["findings"]);
    let figure = |name: &str| {
        first["evidence"]["figures"].as_array().unwrap().iter().find(|f| f["name"] == name).unwrap()["value"]
            .as_f64()
            .unwrap()
    };
    assert!(figure("chunks") >= 30.0, "each file's first chunk at least: {first:#}");
    assert!(figure("first_read_ns") >= 30e6, "{first:#}");
    assert!(figure("repeat_read_ns") < 10e6, "{first:#}");
}
