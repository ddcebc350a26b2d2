//! A replay alongside a start on a device that serves requests first in, first out (the
//! emulated disk with the elevator `none` and 100 requests a second, the throttle rig's
//! profile): paced, it does not raise a concurrent reader's median read latency by more
//! than its bounded lead (its reads in flight) allows, where a deep replay multiplies it.

mod support;

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use coldstart_analyze::doctor::DiskParams;
use coldstart_prefetch::plan::{FORMAT, PlanFile, PlanRange, PlanSettings, PlanSource, PlanStats, VERSION};
use coldstart_prefetch::replay::{AlongsideMode, PACED_DEPTH, Priority};
use coldstart_prefetch::{Order, Plan, Replay, ReplayOptions, ReplayReport};
use coldstart_storage::EmulatedDisk;
use support::can_make_devices;

/// The throttle rig's device (bench/lib.sh's RIG_PROFILE): 100 requests/s, 60 MB/s, FIFO.
const RIG: &str =
    "custom:base=cloud,iops=100,bandwidth=60MB/s,iops_unit=0,queue_depth=32,request=0,max_request=1MiB";
const READS: usize = 40;
const PAGE: u64 = 4096;

fn write_file(path: &Path, bytes: u64) {
    let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let file = File::create(path).unwrap();
    for at in (0..bytes).step_by(block.len()) {
        file.write_all_at(&block, at).unwrap();
    }
}

fn evict(path: &Path) {
    let file = File::open(path).unwrap();
    for _ in 0..2 {
        nix::fcntl::posix_fadvise(&file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
    }
}

/// A plan of `file`: 16 KiB of every 64 KiB, the earliest offsets needed first, so that each
/// range is a request of its own and the whole plan keeps the device busy for many seconds.
fn plan_of(file: &Path) -> Plan {
    let size = std::fs::metadata(file).unwrap().len();
    let ranges = (0..size / (64 << 10))
        .map(|i| PlanRange {
            offset: i * (64 << 10),
            length: 16 << 10,
            first_need_ns: i as i64 * 1000,
            disk: None,
            physical: None,
        })
        .collect();
    let files = vec![PlanFile::regular_now(file, ranges).unwrap()];
    let steps = coldstart_prefetch::order::steps(&files, &[], Order::FirstNeed, 1);
    Plan {
        format: FORMAT.into(),
        version: VERSION,
        tool: "test".into(),
        source: PlanSource::default(),
        settings: PlanSettings::default(),
        files,
        directories: Vec::new(),
        steps,
        stats: PlanStats::default(),
        notes: Vec::new(),
    }
}

/// The median time of `READS` reads of one uncached page each of `file`, one at a time,
/// from a thread of its own (real-time, as the device's threads are, so that its wakeups
/// on a busy machine are not what is measured).
fn median_read_latency(file: &Path, seed: u64) -> Duration {
    let file = file.to_owned();
    std::thread::spawn(move || {
        coldstart_storage::make_timely();
        let f = File::open(&file).unwrap();
        nix::fcntl::posix_fadvise(&f, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_RANDOM).unwrap();
        let pages = f.metadata().unwrap().len() / PAGE;
        let mut buf = vec![0u8; PAGE as usize];
        let mut times: Vec<Duration> = (0..READS as u64)
            .map(|i| {
                let page = (i * 7919 + seed * 104_729) % pages;
                let began = Instant::now();
                f.read_exact_at(&mut buf, page * PAGE).unwrap();
                began.elapsed()
            })
            .collect();
        times.sort();
        times[READS / 2]
    })
    .join()
    .unwrap()
}

/// The reader's median latency with `plan` replayed alongside in `mode` (none: alone).
fn reader_with(
    reader: &Path,
    replayed: &Path,
    mode: Option<AlongsideMode>,
    seed: u64,
) -> (Duration, Option<ReplayReport>) {
    evict(reader);
    evict(replayed);
    let Some(mode) = mode else { return (median_read_latency(reader, seed), None) };
    let options = ReplayOptions { alongside_mode: mode, alongside_depth: 16, ..ReplayOptions::default() };
    let replay = Replay::start(Arc::new(plan_of(replayed)), &options).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let median = median_read_latency(reader, seed);
    replay.cancel();
    (median, Some(replay.join()))
}

#[test]
fn a_paced_replay_on_a_fifo_device_keeps_a_concurrent_readers_median_latency() {
    if !can_make_devices("a_paced_replay_on_a_fifo_device_keeps_a_concurrent_readers_median_latency") {
        return;
    }
    let source = support::private_dir();
    let (reader_src, replayed_src) = (source.path().join("reader.bin"), source.path().join("replayed.bin"));
    write_file(&reader_src, 32 << 20);
    write_file(&replayed_src, 256 << 20);
    let params: DiskParams = RIG.parse().unwrap();
    let mut disk = EmulatedDisk::create(params, 512 << 20).unwrap();
    let mount = support::private_dir();
    disk.mount_at(mount.path()).unwrap();
    disk.fill_from(&[reader_src.clone(), replayed_src.clone()]).unwrap();
    let copy = |p: &PathBuf| mount.path().join(p.strip_prefix("/").unwrap());
    let (reader, replayed) = (copy(&reader_src), copy(&replayed_src));

    let (alone, _) = reader_with(&reader, &replayed, None, 1);
    let (paced, paced_report) = reader_with(&reader, &replayed, Some(AlongsideMode::Auto), 2);
    let (deep, deep_report) = reader_with(&reader, &replayed, Some(AlongsideMode::Priority), 3);
    let (alone_again, _) = reader_with(&reader, &replayed, None, 4);
    drop(disk);

    let paced_report = paced_report.unwrap();
    let choice = paced_report.alongside.as_ref().unwrap();
    eprintln!(
        "median read: alone {alone:?} and {alone_again:?}, paced replay {paced:?}, deep replay {deep:?}\n{}",
        choice.describe()
    );
    // Detected: the emulated device's elevator is none.
    assert_eq!(choice.mode, AlongsideMode::Paced, "{}", choice.describe());
    assert!(choice.devices.iter().any(|d| d.priority == Priority::Ignored), "{}", choice.describe());
    assert!(paced_report.fetched.bytes > 0, "the paced replay made no progress: {paced_report:?}");
    // The bound: a read waits behind at most PACED_DEPTH of the replay's, each a 16 KiB range
    // here, which the device serves in about the time of the reader's 4 KiB (its cost is per
    // request): at most (1 + PACED_DEPTH)× the latency alone, with a margin for the machine.
    let base = alone.max(alone_again).as_secs_f64();
    let ratio = paced.as_secs_f64() / base;
    let bound = 1.0 + PACED_DEPTH as f64;
    assert!(
        ratio <= bound + 0.5,
        "paced: median {paced:?} against {base:.4} s alone ({ratio:.2}×, bound {bound}×)"
    );
    // And the device is FIFO indeed: a deep replay puts each read behind its queue.
    let deep_ratio = deep.as_secs_f64() / base;
    assert_eq!(deep_report.unwrap().alongside.unwrap().mode, AlongsideMode::Priority);
    assert!(deep_ratio >= bound + 3.0, "deep: median {deep:?} against {base:.4} s alone ({deep_ratio:.2}×)");
}
