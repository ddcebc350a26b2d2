//! Assembles spools made here against a fake [`SystemView`], without tracefs, /proc or
//! the filesystem: the process tree from the connector's records, files named by
//! fanotify and by the walk through the fake view, extents placed on the whole disk,
//! the diskstats traffic, marks, losses, notes and meta.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use coldstart_record::Spool;
use coldstart_record::assemble::{DirEntry, EntryStat, RawExtent, SystemView, assemble_with};
use coldstart_record::capture::connector::ProcRecord;
use coldstart_record::capture::fanotify::OpenRecord;
use coldstart_record::spool::{DiskCounters, SpoolEnd, SpoolMilestone, SpoolStart, SpoolUnit};
use coldstart_record::system::{DiskInfo, Mount};
use coldstart_trace::{Dev, FileKind, LossSource, MarkSource, Meta, NoteSource, Trace};

const T0: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
/// CLOCK_BOOTTIME − CLOCK_MONOTONIC.
const SUSPENDED: i64 = 500 * MS;
const DISK: Dev = Dev { major: 254, minor: 0 };
const PARTITION: Dev = Dev { major: 254, minor: 1 };
const PARTITION_START: u64 = 1 << 20;
const APP_INO: u64 = 12;
const LIB_INO: u64 = 13;

/// A machine with one disk, one ext4 partition holding `/data/app.bin`, and no tasks.
struct FakeSystem {
    dirs: HashMap<PathBuf, Vec<DirEntry>>,
}

impl FakeSystem {
    fn new() -> FakeSystem {
        let stat = |ino, size, is_dir| Some(EntryStat { dev: PARTITION, ino, size, mtime_ns: 99, is_dir });
        let entry = |path: &str, stat| DirEntry { path: path.into(), stat };
        let dirs = HashMap::from([
            ("/".into(), vec![entry("/data", stat(5, 4096, true))]),
            (
                "/data".into(),
                vec![entry("/data/gone", None), entry("/data/app.bin", stat(APP_INO, 8192, false))],
            ),
        ]);
        FakeSystem { dirs }
    }
}

impl SystemView for FakeSystem {
    fn host(&self) -> Meta {
        Meta {
            host: "fakehost".into(),
            kernel: "6.18 fake".into(),
            cpu_model: "fake cpu".into(),
            cpu_count: 2,
            mem_total_bytes: 1 << 30,
            page_size: 4096,
            ..Meta::default()
        }
    }

    fn mounts(&self) -> Vec<Mount> {
        vec![Mount {
            mnt_id: 0,
            dev: PARTITION,
            root: "/".into(),
            mount_point: "/".into(),
            fstype: "ext4".into(),
            source: "/dev/vda1".into(),
        }]
    }

    fn is_block_device(&self, _dev: Dev) -> bool {
        false
    }

    fn whole_disk(&self, dev: Dev) -> (Dev, u64) {
        if dev == PARTITION { (DISK, PARTITION_START) } else { (dev, 0) }
    }

    fn disk_info(&self, dev: Dev) -> DiskInfo {
        DiskInfo {
            name: if dev == DISK { "vda".into() } else { dev.to_string() },
            model: Some("fake disk".into()),
            rotational: Some(false),
            size_bytes: Some(1 << 34),
            read_ahead_kb: Some(if dev == DISK { 8192 } else { 128 }),
        }
    }

    fn read_dir(&self, dir: &Path) -> Option<Vec<DirEntry>> {
        self.dirs.get(dir).cloned()
    }

    fn extents(&self, path: &Path, dev: Dev, ino: u64) -> io::Result<Vec<RawExtent>> {
        match (path.to_str(), dev, ino) {
            (Some("/data/app.bin"), PARTITION, APP_INO) => {
                Ok(vec![RawExtent { logical: 0, physical: 40960, length: 8192, flags: 1 }])
            }
            _ => Err(io::ErrorKind::NotFound.into()),
        }
    }

    fn task_tgid(&self, _tid: i32) -> Option<i32> {
        None
    }

    fn task_comm(&self, _tid: i32) -> Option<String> {
        None
    }

    fn task_exe(&self, _pid: i32) -> Option<String> {
        None
    }

    fn task_start_ticks(&self, _tid: i32) -> Option<u64> {
        None
    }

    fn clock_ticks_per_second(&self) -> f64 {
        100.0
    }

    fn read_marks_file(&self, _path: &Path) -> Option<String> {
        None
    }
}

const HEADER_PAGE: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
\tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
\tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
\tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";

const PAGE_CACHE_ADD_ID: u16 = 7;

fn page_cache_add_format() -> String {
    format!(
        "name: mm_filemap_add_to_page_cache\nID: {PAGE_CACHE_ADD_ID}\nformat:\n\
\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
\tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
\tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
\tfield:unsigned long pfn;\toffset:8;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long i_ino;\toffset:16;\tsize:8;\tsigned:0;\n\
\tfield:unsigned long index;\toffset:24;\tsize:8;\tsigned:0;\n\
\tfield:dev_t s_dev;\toffset:32;\tsize:4;\tsigned:0;\n\
\tfield:unsigned char order;\toffset:36;\tsize:1;\tsigned:0;\n\n\
print fmt: \"dev %d:%d ino %lx\"\n"
    )
}

/// A ring-buffer page of `mm_filemap_add_to_page_cache` events by `tid`, as
/// (nanoseconds after the page's timestamp, inode, first page, order).
fn fills_page(page_ts: i64, tid: i32, fills: &[(u32, u64, u64, u8)]) -> Vec<u8> {
    let kernel_dev = PARTITION.major << 20 | PARTITION.minor;
    let mut body = Vec::new();
    for &(delta, ino, index, order) in fills {
        let mut record = PAGE_CACHE_ADD_ID.to_le_bytes().to_vec();
        record.extend_from_slice(&[0, 0]);
        record.extend_from_slice(&tid.to_le_bytes());
        record.extend_from_slice(&0u64.to_le_bytes());
        record.extend_from_slice(&ino.to_le_bytes());
        record.extend_from_slice(&index.to_le_bytes());
        record.extend_from_slice(&kernel_dev.to_le_bytes());
        record.extend_from_slice(&[order, 0, 0, 0]);
        let type_len = record.len() as u32 / 4;
        body.extend_from_slice(&(type_len | delta << 5).to_le_bytes());
        body.extend_from_slice(&record);
    }
    let mut page = (page_ts as u64).to_le_bytes().to_vec();
    page.extend_from_slice(&(body.len() as u64).to_le_bytes());
    page.extend_from_slice(&body);
    page.resize(4096, 0);
    page
}

fn lines<T: serde::Serialize>(records: &[T]) -> String {
    records.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect()
}

fn counters(read_ios: u64, read_sectors: u64) -> Vec<DiskCounters> {
    vec![DiskCounters {
        major: 254,
        minor: 0,
        name: "vda".into(),
        read_ios,
        read_sectors,
        ..Default::default()
    }]
}

/// A spool of `app` (pid 100): it starts, reads two pages of `/data/app.bin` (which
/// fanotify did not name) and one of `/data/lib.so` (deleted since), marks, and exits 3.
fn write_spool(dir: &Path, finished: bool) -> Spool {
    let write = |name: &str, text: &[u8]| std::fs::write(dir.join(name), text).unwrap();
    let start = SpoolStart {
        command: vec!["app".into()],
        root_pid: Some(100),
        t0_boot_ns: T0,
        boottime_offset_ns: SUSPENDED,
        cold: true,
        sample_hz: 10.0,
        cpus: vec![0],
        subbuf_size: 4096,
        diskstats_start: counters(10, 1000),
        notes: vec!["fanotify could not watch /proc: not supported".into()],
        ..Default::default()
    };
    write("start.json", &serde_json::to_vec(&start).unwrap());
    std::fs::create_dir(dir.join("formats")).unwrap();
    write("formats/header_page", HEADER_PAGE.as_bytes());
    write("formats/filemap__mm_filemap_add_to_page_cache", page_cache_add_format().as_bytes());
    write("scope-cpu0.raw", &fills_page(T0 + 2 * MS, 100, &[(0, APP_INO, 0, 1), (1000, LIB_INO, 0, 0)]));
    let mono = |boot_ns: i64| boot_ns - SUSPENDED;
    let procs = [
        ProcRecord::Fork { t: mono(T0 + MS), ptid: 1, ppid: 1, tid: 100, pid: 100 },
        ProcRecord::Exec {
            t: mono(T0 + MS),
            tid: 100,
            pid: 100,
            exe: Some("/usr/bin/app".into()),
            argv: Some(vec!["app".into(), "--fast".into()]),
            comm: Some("app".into()),
        },
        ProcRecord::Exit { t: mono(T0 + 50 * MS), tid: 100, pid: 100, code: 3 << 8, signal: 17 },
    ];
    write("procs.jsonl", lines(&procs).as_bytes());
    let lib = OpenRecord {
        t: T0 + MS + 500_000,
        pid: 100,
        dev: PARTITION.to_user(),
        ino: LIB_INO,
        exec: false,
        path: Some("/data/lib.so".into()),
        size: Some(4096),
        mtime_ns: Some(7),
        dir: None,
    };
    write("opens.jsonl", (lines(&[lib]) + "{\"t\": 12").as_bytes());
    write("marks", coldstart_launch::marks::format_line(T0 + 30 * MS, "window-shown", Some(100)).as_bytes());
    if finished {
        let end = SpoolEnd {
            t_end_boot_ns: T0 + 100 * MS,
            ready_boot_ns: Some(T0 + 40 * MS),
            ready_reason: Some("window:mate-panel".into()),
            ready_pid: Some(4242),
            ready_tid: Some(4242),
            milestones: vec![
                SpoolMilestone {
                    boot_ns: T0 + 20 * MS,
                    name: "window:marco".into(),
                    pid: Some(4100),
                    tid: None,
                },
                SpoolMilestone {
                    boot_ns: T0 + 40 * MS,
                    name: "window:mate-panel".into(),
                    pid: Some(4242),
                    tid: Some(4242),
                },
            ],
            exit_code: Some(3),
            units: vec![
                SpoolUnit {
                    name: "systemd-journald.service".into(),
                    manager: "container".into(),
                    activating_boot_ns: Some(T0 - 5 * MS),
                    active_boot_ns: Some(T0 + 25 * MS),
                    deactivating_boot_ns: None,
                    pid: Some(4300),
                    after: vec!["systemd-journald.socket".into()],
                },
                SpoolUnit {
                    name: "basic.target".into(),
                    manager: "container".into(),
                    activating_boot_ns: Some(T0 + 30 * MS),
                    active_boot_ns: Some(T0 + 30 * MS),
                    deactivating_boot_ns: None,
                    pid: None,
                    after: vec!["systemd-journald.service".into(), "sockets.target".into()],
                },
            ],
            diskstats_end: counters(11, 1016),
            losses: vec![
                ("fanotify".into(), "queue overflows".into(), 2),
                ("a newer recorder's part".into(), "samples not taken".into(), 1),
            ],
            notes: vec!["capture threads used 1.0 ms of CPU".into()],
            ..Default::default()
        };
        write("end.json", &serde_json::to_vec(&end).unwrap());
    }
    Spool::open(dir).unwrap()
}

fn assembled(finished: bool) -> Trace {
    let dir = tempfile::tempdir().unwrap();
    let spool = write_spool(dir.path(), finished);
    assemble_with(&spool, &FakeSystem::new()).unwrap().trace
}

#[test]
fn a_spool_is_assembled_through_the_system_view() {
    let trace = assembled(true);

    let [app] = &trace.processes[..] else { panic!("{:?}", trace.processes) };
    assert_eq!((app.pid, app.comm.as_str(), app.exit_code), (100, "app", Some(3)));
    assert_eq!((app.start_ns, app.end_ns), (Some(MS), Some(50 * MS)));
    assert_eq!(app.argv, ["app", "--fast"]);

    let files: Vec<_> = trace
        .files
        .iter()
        .map(|f| (f.id, f.dev, f.ino, f.path.as_deref(), f.size, f.mtime_ns, f.kind))
        .collect();
    assert_eq!(
        files,
        [
            (0, PARTITION, APP_INO, Some("/data/app.bin"), Some(8192), Some(99), FileKind::Regular),
            (1, PARTITION, LIB_INO, Some("/data/lib.so"), Some(4096), Some(7), FileKind::Regular),
        ]
    );
    let fills: Vec<_> =
        trace.page_fills.iter().map(|p| (p.t_ns, p.pid, p.file_id, p.index, p.pages)).collect();
    assert_eq!(fills, [(2 * MS, 100, 0, 0, 2), (2 * MS + 1000, 100, 1, 0, 1)]);
    let extents: Vec<_> = trace.extents.iter().map(|e| (e.file_id, e.disk, e.physical, e.length)).collect();
    assert_eq!(extents, [(0, DISK, PARTITION_START + 40960, 8192)]);

    let [vda] = &trace.disks[..] else { panic!("{:?}", trace.disks) };
    assert_eq!((vda.dev, vda.name.as_str(), vda.model.as_deref()), (DISK, "vda", Some("fake disk")));
    assert_eq!((vda.read_bytes, vda.read_ios), (Some(16 * 512), Some(1)));
    assert_eq!(vda.read_ahead_kb, Some(8192));

    let marks: Vec<_> =
        trace.marks.iter().map(|m| (m.t_ns, m.pid, m.tid, m.name.as_str(), m.source)).collect();
    assert_eq!(
        marks,
        [
            (20 * MS, Some(4100), None, "window:marco", MarkSource::Until),
            (30 * MS, Some(100), None, "window-shown", MarkSource::Command),
            (40 * MS, Some(4242), Some(4242), "window:mate-panel", MarkSource::Until),
        ],
        "each readiness condition met is a milestone with its owner, among the program's marks by time"
    );

    let units: Vec<_> = trace
        .units
        .iter()
        .map(|u| (u.name.as_str(), u.manager.as_str(), u.activating_ns, u.active_ns, u.pid, u.after.len()))
        .collect();
    assert_eq!(
        units,
        [
            ("systemd-journald.service", "container", Some(-5 * MS), Some(25 * MS), Some(4300), 1),
            ("basic.target", "container", Some(30 * MS), Some(30 * MS), None, 2),
        ],
        "systemd's unit times on the trace's clock, in the order their starts began"
    );

    let losses: Vec<_> = trace.losses.iter().map(|l| (l.source, l.what.as_str(), l.count)).collect();
    assert_eq!(
        losses,
        [
            (LossSource::Fanotify, "queue overflows", 2),
            (LossSource::Other, "samples not taken", 1),
            (LossSource::Files, "unresolved inodes", 0),
            (LossSource::Spool, "torn lines", 1)
        ]
    );
    let notes: Vec<_> = trace.notes.iter().map(|n| (n.source, n.text.as_str())).collect();
    assert_eq!(
        notes[..2],
        [
            (NoteSource::Record, "fanotify could not watch /proc: not supported"),
            (NoteSource::Record, "capture threads used 1.0 ms of CPU"),
        ]
    );
    assert!(notes.contains(&(
        NoteSource::Files,
        "1 files read were deleted before their extents could be read (no disk placement for them)"
    )));
    assert!(
        notes
            .contains(&(NoteSource::Files, "3 directory entries walked to name inodes fanotify did not see"))
    );

    let meta = &trace.meta;
    assert_eq!((meta.host.as_str(), meta.page_size, meta.duration_ns), ("fakehost", 4096, 100 * MS));
    let ready = meta.ready.as_ref().unwrap();
    assert_eq!(
        (ready.t_ns, &ready.reason, ready.pid, ready.tid),
        (40 * MS, &coldstart_trace::ReadyReason::WindowClass("mate-panel".into()), Some(4242), Some(4242))
    );
    assert_eq!((meta.exit_code, meta.partial), (Some(3), false));
}

#[test]
fn a_spool_without_its_end_gives_a_partial_trace_ending_at_its_last_event() {
    let trace = assembled(false);
    assert!(trace.meta.partial);
    assert_eq!(trace.meta.duration_ns, 2 * MS + 1000, "the last fill");
    assert_eq!(trace.meta.ready, None);
    assert_eq!(trace.meta.exit_code, Some(3), "the root's exit, from the proc connector");
    assert!(
        trace
            .notes
            .iter()
            .any(|n| n.source == NoteSource::Recover && n.text.starts_with("the recorder did not finish"))
    );
    let disk = &trace.disks[0];
    assert_eq!((disk.read_bytes, disk.read_ios), (None, None), "no diskstats at the end without samples");
}

/// A perf record: header (type, misc, size) and body.
fn perf_record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let mut out = kind.to_ne_bytes().to_vec();
    out.extend_from_slice(&misc.to_ne_bytes());
    out.extend_from_slice(&((body.len() + 8) as u16).to_ne_bytes());
    out.extend_from_slice(body);
    out
}

fn words(values: &[u64]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_ne_bytes()).collect()
}

#[test]
fn perf_samples_become_stacks_and_its_lost_records_losses() {
    use coldstart_record::capture::perf::{
        PerfSetup, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME,
    };
    let dir = tempfile::tempdir().unwrap();
    let spool = write_spool(dir.path(), true);
    let setup = PerfSetup {
        sample_type: SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN,
        regs_user_mask: 0,
        stack_bytes: 0,
        hz: 1000,
        per_task: true,
        cpus: vec![0],
        off_cpu: None,
        frame_pointer_sample_type: None,
    };
    std::fs::write(dir.path().join("perf.json"), serde_json::to_vec(&setup).unwrap()).unwrap();
    let pid_tid = 100u64 | (100u64 << 32);
    let trailer = |t: i64| [pid_tid, t as u64, 0];
    const USER: u64 = -512i64 as u64;
    // mmap2 (PROT_READ | PROT_EXEC): pid, tid, addr, len, pgoff, maj/min/ino/generation (24 bytes), prot, flags, path, trailer.
    let mut mmap = words(&[pid_tid, 0x40_0000, 0x1000, 0x1000, 0, 0, 0]);
    mmap.extend_from_slice(&5u32.to_ne_bytes());
    mmap.extend_from_slice(&2u32.to_ne_bytes());
    mmap.extend_from_slice(b"/usr/bin/app\0\0\0\0");
    mmap.extend(words(&trailer(T0 + 2 * MS)));
    let mut stream = perf_record(10, 0, &mmap);
    let sample = |t: i64| words(&[0x40_0123, pid_tid, t as u64, 0, 3, USER, 0x40_0123, 0x40_0456]);
    stream.extend(perf_record(9, 2, &sample(T0 + 10 * MS)));
    stream.extend(perf_record(2, 0, &[words(&[1, 17]), words(&trailer(T0 + 11 * MS))].concat()));
    stream.extend(perf_record(13, 0, &[words(&[3]), words(&trailer(T0 + 12 * MS))].concat()));
    std::fs::write(dir.path().join("perf-cpu0.raw"), &stream).unwrap();

    let trace = assemble_with(&spool, &FakeSystem::new()).unwrap().trace;
    let perf_losses: Vec<(&str, u64)> = trace
        .losses
        .iter()
        .filter(|l| l.source == LossSource::Perf)
        .map(|l| (l.what.as_str(), l.count))
        .collect();
    assert_eq!(perf_losses, [("samples lost", 3), ("records lost (ring buffer full)", 17)]);
    let [mapping] = &trace.mappings[..] else { panic!("{:?}", trace.mappings) };
    assert_eq!(
        (mapping.pid, mapping.start, mapping.end, mapping.path.as_str()),
        (100, 0x40_0000, 0x40_1000, "/usr/bin/app")
    );
    let [sample] = &trace.stack_samples[..] else { panic!("{:?}", trace.stack_samples) };
    assert_eq!((sample.t_ns, sample.pid, sample.tid), (10 * MS, 100, 100));
    let index = coldstart_trace::StackIndex::new(&trace);
    let names: Vec<String> = index.frames(sample.stack_id).iter().map(|f| index.name(f)).collect();
    // The caller's return address is looked up one byte back, in the call instruction.
    assert_eq!(names, ["app+0x1123", "app+0x1455"]);
}

#[test]
fn off_cpu_stacks_are_moved_to_boot_time_kept_in_scope_and_their_losses_counted() {
    use coldstart_record::capture::perf::{
        CLOCK_MONOTONIC, OffCpuSetup, PerfSetup, SAMPLE_CALLCHAIN, SAMPLE_CPU, SAMPLE_TID, SAMPLE_TIME,
        off_cpu_file,
    };
    let dir = tempfile::tempdir().unwrap();
    let spool = write_spool(dir.path(), true);
    let off_cpu_type = SAMPLE_TID | SAMPLE_TIME | SAMPLE_CPU | SAMPLE_CALLCHAIN;
    let setup = PerfSetup {
        sample_type: off_cpu_type | coldstart_record::capture::perf::SAMPLE_IP,
        regs_user_mask: 0,
        stack_bytes: 0,
        hz: 1000,
        per_task: true,
        cpus: vec![0],
        off_cpu: Some(OffCpuSetup {
            sample_type: off_cpu_type,
            clockid: CLOCK_MONOTONIC,
            filter: Some("prev_state & 3".into()),
            kernel_filter: None,
        }),
        frame_pointer_sample_type: None,
    };
    std::fs::write(dir.path().join("perf.json"), serde_json::to_vec(&setup).unwrap()).unwrap();
    std::fs::write(dir.path().join("perf-cpu0.raw"), b"").unwrap();
    const KERNEL: u64 = -128i64 as u64;
    let mono = |boot_ns: i64| (boot_ns - SUSPENDED) as u64;
    let sample = |pid: u64, boot_ns: i64| {
        words(&[pid | (pid << 32), mono(boot_ns), 1, 3, KERNEL, 0xffff_ffff_8100_0100, 0xffff_ffff_8100_0200])
    };
    let mut stream = perf_record(9, 1, &sample(100, T0 + 20 * MS));
    stream.extend(perf_record(9, 1, &sample(4242, T0 + 21 * MS)));
    stream.extend(perf_record(2, 0, &words(&[1, 2])));
    std::fs::write(dir.path().join(off_cpu_file(0)), &stream).unwrap();

    let trace = assemble_with(&spool, &FakeSystem::new()).unwrap().trace;
    let [s] = &trace.off_cpu_samples[..] else { panic!("{:?}", trace.off_cpu_samples) };
    assert_eq!((s.t_ns, s.pid, s.tid), (20 * MS, 100, 100));
    let index = coldstart_trace::StackIndex::new(&trace);
    let addresses: Vec<(bool, u64)> =
        index.frames(s.stack_id).iter().map(|f| (f.kernel, f.address)).collect();
    assert_eq!(addresses, [(true, 0xffff_ffff_8100_0100), (true, 0xffff_ffff_8100_01ff)]);
    let lost = trace.losses.iter().find(|l| l.what == "off-CPU stacks lost").expect("the off-CPU losses");
    assert_eq!((lost.source, lost.count), (LossSource::Perf, 2));
    assert!(
        trace.notes.iter().any(|n| n.text.starts_with("1 off-CPU stacks of processes outside")),
        "{:?}",
        trace.notes
    );
    assert!(trace.stack_samples.is_empty());
}

#[test]
fn off_cpu_stacks_kept_by_the_kernel_filter_become_the_same_rows() {
    use coldstart_record::capture::off_cpu::{KernelFilter, SPOOL_FILE, STACKS_FILE};
    use coldstart_record::capture::perf::{OffCpuSetup, PerfSetup};
    let dir = tempfile::tempdir().unwrap();
    let spool = write_spool(dir.path(), true);
    let setup = PerfSetup {
        sample_type: 0,
        regs_user_mask: 0,
        stack_bytes: 0,
        hz: 1000,
        per_task: false,
        cpus: vec![0],
        off_cpu: Some(OffCpuSetup {
            sample_type: 0,
            clockid: 7,
            filter: None,
            kernel_filter: Some(KernelFilter::new(1_000_000)),
        }),
        frame_pointer_sample_type: None,
    };
    std::fs::write(dir.path().join("perf.json"), serde_json::to_vec(&setup).unwrap()).unwrap();
    std::fs::write(dir.path().join("perf-cpu0.raw"), b"").unwrap();
    // tid, tgid, switch-out and switch-in (boot clock), stack id (-14: none), state.
    let record = |pid: u32, off: i64, stack: i32| {
        let mut r = [pid.to_le_bytes(), pid.to_le_bytes()].concat();
        r.extend((off as u64).to_le_bytes());
        r.extend((off as u64 + 5_000_000).to_le_bytes());
        r.extend(stack.to_le_bytes());
        r.extend(1u32.to_le_bytes());
        r
    };
    let records =
        [record(100, T0 + 20 * MS, 3), record(4242, T0 + 21 * MS, 3), record(100, T0 + 30 * MS, -14)];
    std::fs::write(dir.path().join(SPOOL_FILE), records.concat()).unwrap();
    let mut stacks = [3u32.to_le_bytes(), 2u32.to_le_bytes()].concat();
    stacks.extend(words(&[0xffff_ffff_8100_0100, 0xffff_ffff_8100_0200]).iter());
    std::fs::write(dir.path().join(STACKS_FILE), stacks).unwrap();

    let trace = assemble_with(&spool, &FakeSystem::new()).unwrap().trace;
    let rows: Vec<(i64, i32, bool)> =
        trace.off_cpu_samples.iter().map(|s| (s.t_ns, s.pid, s.stack_id.is_some())).collect();
    assert_eq!(rows, [(20 * MS, 100, true), (30 * MS, 100, false)], "the other process's sleep left out");
    let index = coldstart_trace::StackIndex::new(&trace);
    let addresses: Vec<(bool, u64)> =
        index.frames(trace.off_cpu_samples[0].stack_id).iter().map(|f| (f.kernel, f.address)).collect();
    assert_eq!(addresses, [(true, 0xffff_ffff_8100_0100), (true, 0xffff_ffff_8100_01ff)]);
}
