//! A small synthetic trace whose every figure is known, shared by the tests.

use coldstart_trace::ThreadState::*;
use coldstart_trace::*;

pub const MS: Nanos = 1_000_000;

/// `app` (100) reads its binary and a library in pieces, forks `helper` (200), which
/// waits for a data file and wakes `app`; `app` marks `ready`. One overrun was lost.
pub fn fixture() -> Trace {
    let vda = Dev::new(254, 0);
    let file = |id: u32, path: Option<&str>| File {
        id,
        dev: vda,
        ino: 1000 + u64::from(id),
        path: path.map(str::to_owned),
        kind: FileKind::Regular,
        size: Some(1 << 20),
        mtime_ns: None,
    };
    let fill = |t: Nanos, pid: i32, file_id: u32, index: u64, pages: u32, origin: PageOrigin| PageFill {
        t_ns: t,
        pid,
        tid: pid,
        file_id,
        index,
        pages,
        origin: Some(origin),
    };
    let access = |t: Nanos, pid: i32, file_id: u32, index: u64, pages: u32, kind: AccessKind| PageAccess {
        t_ns: t,
        pid,
        tid: pid,
        file_id,
        index,
        pages,
        kind,
    };
    let sched = |tid: i32, start: Nanos, end: Nanos, state: ThreadState| SchedInterval {
        tid,
        start_ns: start * MS,
        end_ns: end * MS,
        state,
    };
    let block = |t: Nanos, sector: u64, bytes: u32| BlockIo {
        issue_ns: Some(t),
        complete_ns: Some(t + 2 * MS),
        dev: vda,
        sector: Some(sector),
        bytes,
        op: BlockOp::Read,
        rwbs: "R".into(),
        pid: 100,
        comm: "app".into(),
        file_id: None,
        error: 0,
    };
    Trace {
        meta: Meta {
            tool: "coldstart 0.1.0".into(),
            source: Source::Record,
            command: vec!["app".into(), "--headless".into()],
            root_pid: Some(100),
            host: "vm".into(),
            kernel: "6.18.0 #1 SMP".into(),
            cpu_model: "Test CPU".into(),
            cpu_count: 2,
            mem_total_bytes: 8 << 30,
            page_size: 4096,
            clock: "boot".into(),
            duration_ns: 120 * MS,
            ready: Some(Ready {
                t_ns: 100 * MS,
                reason: ReadyReason::Mark("ready".into()),
                pid: None,
                tid: None,
            }),
            cache: CacheState::Cold,
            eviction: Some("drop_caches".into()),
            exit_code: Some(0),
            ..Meta::default()
        },
        disks: vec![Disk {
            dev: vda,
            name: "vda".into(),
            rotational: Some(true),
            read_bytes: Some(200 * 1024),
            ..Disk::default()
        }],
        losses: vec![Loss { source: LossSource::Tracefs, what: "cpu1 overrun".into(), count: 1 }],
        processes: vec![
            Process {
                pid: 100,
                ppid: Some(1),
                comm: "app".into(),
                start_ns: Some(2 * MS),
                end_ns: Some(110 * MS),
                exit_code: Some(0),
                in_scope: true,
                ..Process::default()
            },
            Process {
                pid: 200,
                ppid: Some(100),
                comm: "helper".into(),
                start_ns: Some(30 * MS),
                end_ns: Some(90 * MS),
                in_scope: true,
                ..Process::default()
            },
        ],
        threads: vec![
            Thread { tid: 100, pid: 100, comm: "app".into(), start_ns: Some(2 * MS), end_ns: Some(110 * MS) },
            Thread {
                tid: 200,
                pid: 200,
                comm: "helper".into(),
                start_ns: Some(30 * MS),
                end_ns: Some(90 * MS),
            },
        ],
        files: vec![
            file(1, Some("/usr/bin/app")),
            file(2, Some("/usr/lib/libfoo.so")),
            file(3, Some("/usr/share/app/data.db")),
            file(4, None),
        ],
        extents: vec![
            Extent { file_id: 1, disk: vda, logical: 0, physical: 1 << 20, length: 1 << 20, flags: 0 },
            Extent { file_id: 2, disk: vda, logical: 0, physical: 64 << 20, length: 1 << 20, flags: 0 },
        ],
        page_fills: vec![
            fill(3 * MS, 100, 1, 0, 8, PageOrigin::Fault),
            fill(9 * MS, 100, 2, 0, 4, PageOrigin::Fault),
            fill(9 * MS, 100, 2, 4, 12, PageOrigin::Readahead),
            fill(19 * MS, 100, 2, 40, 4, PageOrigin::Fault),
            fill(25 * MS, 100, 2, 100, 4, PageOrigin::Fault),
            fill(40 * MS, 200, 3, 0, 16, PageOrigin::Read),
            fill(45 * MS, 200, 4, 0, 1, PageOrigin::Read),
        ],
        page_accesses: vec![
            access(3 * MS, 100, 1, 0, 8, AccessKind::Fault),
            access(9 * MS, 100, 2, 0, 2, AccessKind::Fault),
            access(9 * MS, 100, 2, 2, 2, AccessKind::MapAround),
            access(40 * MS, 200, 3, 0, 16, AccessKind::Read),
            access(50 * MS, 200, 1, 0, 1, AccessKind::Read),
        ],
        block_ios: vec![
            block(3 * MS, 2048, 32 * 1024),
            block(9 * MS, 131_072, 64 * 1024),
            block(19 * MS, 131_392, 16 * 1024),
            block(25 * MS, 131_872, 16 * 1024),
        ],
        sched: vec![
            sched(100, 2, 8, Running),
            sched(100, 8, 18, IoWait),
            sched(100, 18, 19, Running),
            sched(100, 19, 24, IoWait),
            sched(100, 24, 25, Running),
            sched(100, 25, 30, IoWait),
            sched(100, 30, 32, Running),
            sched(100, 32, 80, Sleeping),
            sched(100, 80, 81, Runnable),
            sched(100, 81, 100, Running),
            sched(100, 100, 110, Sleeping),
            sched(200, 30, 40, Running),
            sched(200, 40, 70, IoWait),
            sched(200, 70, 80, Running),
            sched(200, 80, 90, Sleeping),
        ],
        wakeups: vec![Wakeup { t_ns: 80 * MS, tid: 100, waker_tid: Some(200) }],
        marks: vec![Mark {
            t_ns: 100 * MS,
            pid: Some(100),
            name: "ready".into(),
            source: MarkSource::MarksFile,
            tid: None,
        }],
        ..Trace::default()
    }
}
