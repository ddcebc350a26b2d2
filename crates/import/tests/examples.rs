//! The two bootchart2 example logs imported, checked against figures counted from
//! the log files here with a deliberately simple, independent parse.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use coldstart_import::bootchart2;
use coldstart_trace::{CacheState, Dev, Scope, Source, Trace};

const NS_PER_CS: i64 = 10_000_000;

fn example(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(name)
}

fn read(name: &str, file: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(example(name).join(file)).unwrap()).into_owned()
}

/// `(time, lines)` per blank-line separated block.
fn blocks(text: &str) -> Vec<(i64, Vec<&str>)> {
    text.split("\n\n")
        .filter(|b| !b.trim().is_empty())
        .map(|b| {
            let mut lines = b.lines().filter(|l| !l.trim().is_empty());
            (lines.next().unwrap().trim().parse().unwrap(), lines.collect())
        })
        .collect()
}

/// The pids in proc_ps.log: the first word of every data line.
fn ps_pids(name: &str) -> BTreeSet<i32> {
    let text = read(name, "proc_ps.log");
    blocks(&text)
        .iter()
        .flat_map(|(_, lines)| lines.iter().map(|l| l.split(' ').next().unwrap().parse().unwrap()))
        .collect()
}

/// (pid, ppid) of each kernel_pacct record: little-endian u32 at bytes 16 and 20 of each 64.
fn pacct_pids(name: &str) -> Vec<(i32, i32, u32)> {
    let bytes = std::fs::read(example(name).join("kernel_pacct")).unwrap();
    let u32_at = |r: &[u8], at: usize| u32::from_le_bytes(r[at..at + 4].try_into().unwrap());
    bytes.chunks(64).map(|r| (u32_at(r, 16) as i32, u32_at(r, 20) as i32, u32_at(r, 4))).collect()
}

fn import(name: &str) -> Trace {
    bootchart2::import(&example(name)).unwrap()
}

fn note<'a>(trace: &'a Trace, needle: &str) -> &'a str {
    trace.notes.iter().map(|n| n.text.as_str()).find(|t| t.contains(needle)).unwrap_or_else(|| {
        panic!("no note with {needle:?} in {:#?}", trace.notes);
    })
}

#[test]
fn example1_meta() {
    let trace = import("example1");
    let m = &trace.meta;
    assert_eq!(m.source, Source::Bootchart2);
    assert_eq!(m.scope, Scope::System);
    assert_eq!(m.clock, "boot");
    note(&trace, "from /proc/uptime (CLOCK_BOOTTIME) in centiseconds, not jiffies");
    assert_eq!(m.host, "anders-desktop");
    assert_eq!(m.kernel, "2.6.27-10-generic #1 SMP Fri Nov 21 12:00:22 UTC 2008");
    assert_eq!(m.cpu_model, "Intel(R) Core(TM)2 CPU          6600  @ 2.40GHz");
    assert_eq!(m.cpu_count, 2);
    assert_eq!(m.root_pid, Some(1));
    assert_eq!(m.cache, CacheState::Cold);
    // The first sample is proc_stat.log's and proc_diskstats.log's block at 154 cs.
    assert_eq!(m.start_clock_ns, 154 * NS_PER_CS);
    // btime 1229605519 (2008-12-18 13:05:19 UTC) + 1.54 s.
    assert_eq!(m.start_unix_ns, 1_229_605_519_000_000_000 + 154 * NS_PER_CS);
    assert!(trace.losses.is_empty(), "{:?}", trace.losses);
    assert_eq!(
        note(&trace, "kernel command line"),
        "kernel command line: root=UUID=a0b77e99-bc85-4045-b488-4182f8f8c6b8 ro quiet splash"
    );
}

#[test]
fn example1_processes_are_the_pids_of_proc_ps_log() {
    let trace = import("example1");
    let pids = ps_pids("example1");
    assert_eq!(pids.len(), 861);
    let imported: BTreeSet<i32> = trace.processes.iter().map(|p| p.pid).collect();
    assert_eq!(imported, pids);
    assert_eq!(trace.processes.len(), pids.len(), "no pid is reused in this log");

    let by_pid = |pid| trace.processes.iter().find(|p| p.pid == pid).unwrap();
    // "1192 (udevd) S 1183 …": a udevd worker of the udevd daemon, which init started.
    assert_eq!((by_pid(1192).comm.as_str(), by_pid(1192).ppid), ("udevd", Some(1183)));
    assert_eq!((by_pid(1183).comm.as_str(), by_pid(1183).ppid), ("udevd", Some(1)));
    assert_eq!((by_pid(2578).comm.as_str(), by_pid(2578).ppid), ("rc", Some(1)));
    assert_eq!(by_pid(1).ppid, None);
    // init and kthreadd (starttime 29) ran before the first sample; alive at the end.
    assert_eq!((by_pid(1).start_ns, by_pid(1).end_ns), (None, None));
    // rc: starttime 633 cs, t = 0 at 154 cs.
    assert_eq!(by_pid(2578).start_ns, Some((633 - 154) * NS_PER_CS));
    // Kernel threads: pids whose lines all show vsize (field 23) 0 outside the zombie state.
    let text = read("example1", "proc_ps.log");
    let (mut without_mm, mut with_mm) = (BTreeSet::new(), BTreeSet::new());
    for (_, lines) in blocks(&text) {
        for w in lines.iter().map(|l| l.split(' ').collect::<Vec<_>>()) {
            match (w[2], w[22]) {
                ("Z", _) => false,
                (_, "0") => without_mm.insert(w[0]),
                _ => with_mm.insert(w[0]),
            };
        }
    }
    let kernel_threads = without_mm.difference(&with_mm).count();
    assert_eq!(kernel_threads, 47);
    assert!(note(&trace, "kernel threads").starts_with("47 of"), "{}", note(&trace, "kernel threads"));
}

#[test]
fn example1_boot_duration() {
    let trace = import("example1");
    let text = read("example1", "proc_ps.log");
    let ps = blocks(&text);
    let (first, last) = (ps[0].0, ps[ps.len() - 1].0);
    assert_eq!((ps.len(), first, last), (141, 155, 3039));
    let period = (last - first) as f64 / (ps.len() - 1) as f64;
    let end_ns = ((last as f64 + period - 154.0) * NS_PER_CS as f64).round() as i64;
    let ready = trace.meta.ready.as_ref().unwrap();
    assert_eq!((ready.t_ns, ready.reason.to_string().as_str()), (end_ns, "bootchart2:end"));
    assert_eq!(trace.meta.duration_ns, end_ns);
    // pybootchartgui: time = end − earliest start (init and kthreadd at 29 cs) = 30.31 s.
    let time = (last as f64 + period - 29.0) / 100.0;
    assert!((time - 30.31).abs() < 0.005, "{time}");
    assert!(note(&trace, "ready is").contains("time 30.31 s"), "{}", note(&trace, "ready is"));
}

/// Per interval of proc_stat.log: the tick deltas (user+nice, system+irq+softirq, iowait, idle, total).
fn stat_deltas(name: &str) -> Vec<(i64, [u64; 5])> {
    let text = read(name, "proc_stat.log");
    let cpu: Vec<(i64, Vec<u64>)> = blocks(&text)
        .into_iter()
        .map(|(t, lines)| {
            let words = lines.iter().find(|l| l.starts_with("cpu ")).unwrap().split_whitespace();
            (t, words.skip(1).map(|w| w.parse().unwrap()).collect())
        })
        .collect();
    cpu.windows(2)
        .map(|w| {
            let d = |i: usize| w[1].1.get(i).copied().unwrap_or(0) - w[0].1.get(i).copied().unwrap_or(0);
            let total = (0..8).map(d).sum();
            (w[1].0, [d(0) + d(1), d(2) + d(5) + d(6), d(4), d(3), total])
        })
        .collect()
}

fn check_cpu_series(name: &str, t0_cs: i64) {
    let trace = import(name);
    let deltas = stat_deltas(name);
    assert_eq!(trace.cpu_samples.len(), deltas.iter().filter(|(_, d)| d[4] > 0).count());
    let mut sums = [0.0f64; 4];
    for sample in &trace.cpu_samples {
        let (_, d) = deltas.iter().find(|(t, _)| (t - t0_cs) * NS_PER_CS == sample.t_ns).unwrap();
        let total = d[4] as f64;
        for (k, fraction) in [sample.user, sample.system, sample.iowait, sample.idle].into_iter().enumerate()
        {
            assert!((fraction * total - d[k] as f64).abs() < 1e-6);
            sums[k] += fraction * total;
        }
    }
    for k in 0..4 {
        let logged: u64 = deltas.iter().map(|(_, d)| d[k]).sum();
        assert!((sums[k] - logged as f64).abs() < 1e-6, "{name} field {k}: {} vs {logged}", sums[k]);
    }
}

#[test]
fn example1_cpu_series_sums_to_the_tick_deltas() {
    check_cpu_series("example1", 154);
}

#[test]
fn example2_cpu_series_sums_to_the_tick_deltas() {
    check_cpu_series("example2", 698);
}

/// First and last counters (reads, sectors read, writes, sectors written) of one disk;
/// zeros first when the disk appears after the first sample (its counters started then).
fn disk_counters(name: &str, disk: &str) -> ([u64; 4], [u64; 4]) {
    let text = read(name, "proc_diskstats.log");
    let rows: Vec<Option<[u64; 4]>> = blocks(&text)
        .iter()
        .map(|(_, lines)| {
            let line = lines.iter().find(|l| l.split_whitespace().nth(2) == Some(disk))?;
            let w: Vec<u64> = line.split_whitespace().skip(3).map(|w| w.parse().unwrap()).collect();
            Some([w[0], w[2], w[4], w[6]])
        })
        .collect();
    let first = rows[0].unwrap_or_default();
    (first, rows.iter().flatten().next_back().copied().unwrap())
}

fn check_disk(name: &str, disk: &str, dev: Dev) {
    let trace = import(name);
    let (first, last) = disk_counters(name, disk);
    let row = trace.disks.iter().find(|d| d.name == disk).unwrap();
    assert_eq!(row.dev, dev);
    assert_eq!(row.read_ios, Some(last[0] - first[0]));
    assert_eq!(row.read_bytes, Some((last[1] - first[1]) * 512));
    assert_eq!(row.write_ios, Some(last[2] - first[2]));
    assert_eq!(row.write_bytes, Some((last[3] - first[3]) * 512));
    let samples: Vec<_> = trace.disk_samples.iter().filter(|s| s.dev == dev).collect();
    assert_eq!(samples.iter().map(|s| s.read_bytes).sum::<u64>(), (last[1] - first[1]) * 512);
    assert_eq!(samples.iter().map(|s| s.write_ios).sum::<u64>(), last[2] - first[2]);
    assert!(samples.iter().all(|s| (0.0..=1.0).contains(&s.busy)));
    assert!(samples.iter().any(|s| s.busy > 0.5), "the boot keeps {disk} busy at times");
}

#[test]
fn example1_disk_series_agree_with_the_log() {
    check_disk("example1", "sda", Dev::new(8, 0));
    let trace = import("example1");
    // Not the partitions (sda1…), nor the ram disks and drives whose counters never move.
    let names: Vec<&str> = trace.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["sda"]);
    // sda shows up at 5.43 s, with 10 reads (152 sectors) done since its driver loaded.
    assert_eq!(trace.disks[0].read_bytes, Some(110_171_136 + 152 * 512));
}

#[test]
fn example2_disk_series_agree_with_the_log() {
    check_disk("example2", "hda", Dev::new(3, 0));
    let trace = import("example2");
    // dm-0 (the LVM root) is listed, but this 2.6.10 kernel kept no statistics for it.
    let names: Vec<&str> = trace.disks.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["hda"]);
}

#[test]
fn example2_processes_from_proc_ps_and_kernel_pacct() {
    let trace = import("example2");
    let ps = ps_pids("example2");
    let pacct = pacct_pids("example2");
    assert_eq!((ps.len(), pacct.len()), (817, 5022));
    let only_in_pacct: BTreeSet<i32> = pacct.iter().map(|r| r.0).filter(|p| !ps.contains(p)).collect();
    assert_eq!(only_in_pacct.len(), 4254);
    assert_eq!(trace.processes.len(), ps.len() + only_in_pacct.len());
    let imported: BTreeSet<i32> = trace.processes.iter().map(|p| p.pid).collect();
    assert_eq!(imported, ps.union(&only_in_pacct).copied().collect());

    let by_pid = |pid| trace.processes.iter().find(|p| p.pid == pid).unwrap();
    assert_eq!((by_pid(515).comm.as_str(), by_pid(515).ppid), ("rc.sysinit", Some(514)));
    assert_eq!((by_pid(4969).comm.as_str(), by_pid(4969).ppid), ("gdm", Some(4596)));
    // Every accounting record gave an exit, with its parent and status.
    let exits: BTreeMap<i32, (i32, u32)> = pacct.iter().map(|&(pid, ppid, raw)| (pid, (ppid, raw))).collect();
    for (pid, (ppid, raw)) in &exits {
        let p = by_pid(*pid);
        assert!(p.end_ns.is_some(), "pid {pid}");
        assert_eq!(p.exit_code, Some(((raw >> 8) & 0xff) as i32), "pid {pid}");
        if only_in_pacct.contains(pid) {
            assert_eq!(p.ppid, Some(*ppid).filter(|&p| p > 0));
        }
    }
    assert_eq!(trace.processes.iter().filter(|p| p.exit_code == Some(1)).count(), 676);
    // Estimated lifetimes are coherent: start ≤ exit, inside the recording.
    for p in &trace.processes {
        if let (Some(start), Some(end)) = (p.start_ns, p.end_ns) {
            assert!(start <= end && end <= trace.meta.duration_ns, "{p:?}");
        }
    }
    // The accounting records are in exit order: the imported exits are too, within jitter.
    let mut latest = i64::MIN / 2;
    for (pid, _, _) in &pacct {
        let end = by_pid(*pid).end_ns.unwrap();
        assert!(end >= latest - 3 * NS_PER_CS, "pid {pid} exits at {end}, before {latest}");
        latest = latest.max(end);
    }
}

#[test]
fn example2_starttime_clock_offset_is_measured() {
    let trace = import("example2");
    // bootchartd (pid 512) shows up in the first sample (698 cs) with starttime 874:
    // the 2.6.10 kernel's starttime runs ~2.8 s ahead of /proc/uptime.
    let text = note(&trace, "starttime) run");
    assert!(text.contains("2.8") && text.contains("ahead"), "{text}");
    let init = trace.processes.iter().find(|p| p.pid == 1).unwrap();
    assert_eq!(init.start_ns, None);
    // rc.sysinit (starttime 897) started before the first sample once the offset is removed.
    assert_eq!(trace.processes.iter().find(|p| p.pid == 515).unwrap().start_ns, None);
    // gdm (pid 4969, starttime 5175): its start falls between the sample before the one that
    // first shows it and that one.
    let text = read("example2", "proc_ps.log");
    let ps = blocks(&text);
    let shown = ps.iter().position(|(_, lines)| lines.iter().any(|l| l.starts_with("4969 (gdm)"))).unwrap();
    let (before, first) = ((ps[shown - 1].0 - 698) * NS_PER_CS, (ps[shown].0 - 698) * NS_PER_CS);
    let start = trace.processes.iter().find(|p| p.pid == 4969).unwrap().start_ns.unwrap();
    assert!(start > before - 3 * NS_PER_CS && start <= first, "{before} < {start} <= {first}");
    // pybootchartgui's header time: end (5512 + 4814/198 cs) minus the earliest raw start, 282 cs.
    let time = (5512.0 + 4814.0 / 198.0 - 282.0) / 100.0;
    assert!(note(&trace, "ready is").contains(&format!("time {time:.2} s")), "{}", note(&trace, "ready is"));
}

#[test]
fn process_samples_follow_proc_ps_log() {
    let trace = import("example1");
    // Xorg's CPU ticks between samples, from the log: utime + stime of "(Xorg)" lines.
    let text = read("example1", "proc_ps.log");
    let mut ticks = Vec::new();
    for (t, lines) in blocks(&text) {
        for line in lines.iter().filter(|l| l.contains(" (Xorg) ")) {
            let w: Vec<&str> = line.split(' ').collect();
            ticks.push((
                t,
                w[0].parse::<i32>().unwrap(),
                w[13].parse::<u64>().unwrap() + w[14].parse::<u64>().unwrap(),
            ));
        }
    }
    assert!(ticks.len() > 10);
    let pid = ticks[0].1;
    let logged = ticks.last().unwrap().2 - ticks[0].2;
    let imported: f64 = trace
        .process_samples
        .iter()
        .filter(|s| s.pid == pid && s.t_ns > (ticks[0].0 - 154) * NS_PER_CS)
        .map(|s| (s.cpu_user + s.cpu_system) * (s.dt_ns / NS_PER_CS) as f64)
        .sum();
    assert!((imported - logged as f64).abs() < 1e-6, "{imported} vs {logged}");
}

#[test]
fn tarball_gives_the_same_trace_as_the_folder() {
    let dir = tempfile::tempdir().unwrap();
    let tgz = dir.path().join("bootchart.tgz");
    let file = std::fs::File::create(&tgz).unwrap();
    let mut builder = tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()));
    builder.append_dir_all("bootchart", example("example2")).unwrap();
    builder.into_inner().unwrap().finish().unwrap();
    assert_eq!(bootchart2::import(&tgz).unwrap(), import("example2"));

    let plain = dir.path().join("bootchart.tar");
    let mut builder = tar::Builder::new(std::fs::File::create(&plain).unwrap());
    builder.append_dir_all(".", example("example1")).unwrap();
    builder.finish().unwrap();
    assert_eq!(bootchart2::import(&plain).unwrap(), import("example1"));
}

#[test]
fn imported_trace_survives_the_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("example2.coldstart");
    let trace = import("example2");
    trace.write(&path).unwrap();
    let back = Trace::read(&path).unwrap();
    assert_eq!(back.meta, trace.meta);
    assert_eq!(back.processes, trace.processes);
    assert_eq!(back.cpu_samples.len(), trace.cpu_samples.len());
    assert_eq!(back.process_samples.len(), trace.process_samples.len());
    assert_eq!(back.disks, trace.disks);
}

#[test]
fn missing_files_and_non_logs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let err = bootchart2::import(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a bootchart2 log: header is missing"), "{err}");
    let junk = dir.path().join("junk.tgz");
    std::fs::write(&junk, b"this is not an archive").unwrap();
    let err = bootchart2::import(&junk).unwrap_err().to_string();
    assert!(err.contains("junk.tgz") && err.contains("tar archive"), "{err}");
    let err = bootchart2::import(&dir.path().join("nope")).unwrap_err().to_string();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn taskstats_cmdline2_and_paternity_logs() {
    // A newer collector's log: taskstats.log instead of proc_ps.log, with the event logs.
    let taskstats = "155\n1 0 init 50000000 0 0\n300 1 udevd 10000000 0 0\n\n\
                     176\n300 1 udevd 30000000 0 0\n310 300 modprobe 2000000 40000000 0\n\n\
                     196\n310 300 modprobe 2000000 90000000 0\n\n";
    let cmdline2 =
        "300\n:/sbin/udevd\n:/sbin/udevd\0--daemon\0\n\n310\n:/sbin/modprobe\n:modprobe\0-b\0snd\0\n\n";
    let dir = example("example1");
    let file = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let logs = bootchart2::LogFiles::from_files(
        Path::new("new-collector"),
        [
            ("header", file("header")),
            ("proc_stat.log", file("proc_stat.log")),
            ("proc_diskstats.log", file("proc_diskstats.log")),
            ("taskstats.log", taskstats.as_bytes().to_vec()),
            ("cmdline2.log", cmdline2.as_bytes().to_vec()),
            ("paternity.log", b"300 1\n310 1\n".to_vec()),
        ],
    );
    let trace = bootchart2::convert(&logs).unwrap();
    assert_eq!(trace.processes.len(), 3);
    let by_pid = |pid| trace.processes.iter().find(|p| p.pid == pid).unwrap();
    let modprobe = by_pid(310);
    assert_eq!(modprobe.exe.as_deref(), Some("/sbin/modprobe"));
    assert_eq!(modprobe.argv, ["modprobe", "-b", "snd"]);
    assert_eq!(modprobe.ppid, Some(1), "paternity.log wins over taskstats' parent");
    // First listed at 176 cs (t0 = 154): starts there; listed in the last sample: no end.
    assert_eq!((modprobe.start_ns, modprobe.end_ns), (Some(22 * NS_PER_CS), None));
    // udevd was there at the first sample and last listed at 176.
    assert_eq!((by_pid(300).start_ns, by_pid(300).end_ns), (None, Some(22 * NS_PER_CS)));
    // udevd: 20 ms of CPU over the 21 cs from 155 to 176.
    let udevd = trace.process_samples.iter().find(|s| s.pid == 300).unwrap();
    assert_eq!((udevd.t_ns, udevd.dt_ns, udevd.state), (22 * NS_PER_CS, 21 * NS_PER_CS, 'R'));
    assert!((udevd.cpu_user - 2.0 / 21.0).abs() < 1e-12);
    // modprobe only waited for I/O between 176 and 196.
    let waiting = trace.process_samples.iter().rfind(|s| s.pid == 310).unwrap();
    assert_eq!((waiting.state, waiting.cpu_user, waiting.rss_bytes), ('D', 0.0, None));
    note(&trace, "processes come from taskstats.log");
    note(&trace, "executable and arguments of 2 processes; paternity.log the parent of 2");
}
