//! A trace written and read back is the same trace; bad files are refused with a clear reason.

use std::os::unix::fs::PermissionsExt;

use coldstart_trace::*;
use proptest::prelude::*;

fn full_trace() -> Trace {
    let vda = Dev::new(254, 0);
    Trace {
        meta: Meta {
            tool: "coldstart 0.1.0".into(),
            source: Source::Record,
            command: vec!["python3".into(), "-c".into(), "import json; print('a b')".into()],
            cwd: Some("/home/u".into()),
            user: Some("u".into()),
            scope: Scope::Tree,
            root_pid: Some(100),
            host: "vm".into(),
            kernel: "6.18.44 #1 SMP".into(),
            cpu_model: "Some CPU".into(),
            cpu_count: 2,
            mem_total_bytes: 24 << 30,
            page_size: 4096,
            clock: "boot".into(),
            start_unix_ns: 1_790_000_000_123_456_789,
            start_clock_ns: 98_765_432_100,
            boottime_offset_ns: 0,
            duration_ns: 1_830_000_000,
            ready: Some(Ready { t_ns: 1_800_000_000, reason: "mark:ready".into() }),
            cache: CacheState::Cold,
            eviction: Some("drop_caches".into()),
            exit_code: Some(0),
            partial: false,
            sample_hz: Some(50.0),
        },
        disks: vec![Disk {
            dev: vda,
            name: "vda".into(),
            model: None,
            rotational: Some(true),
            size_bytes: Some(270_582_939_648),
            read_bytes: Some(86_000_000),
            read_ios: Some(1200),
            write_bytes: Some(4096),
            write_ios: Some(1),
        }],
        losses: vec![Loss { source: "tracefs".into(), what: "cpu1 overrun".into(), count: 3 }],
        notes: vec![Note { source: "fanotify".into(), text: "no mark on /proc".into() }],
        processes: vec![
            Process {
                pid: 100,
                ppid: Some(99),
                comm: "python3".into(),
                exe: Some("/usr/bin/python3.11".into()),
                argv: vec!["python3".into(), "-c".into(), "x".into()],
                start_ns: Some(0),
                end_ns: Some(1_830_000_000),
                exit_code: Some(0),
                in_scope: true,
            },
            Process { pid: 7, comm: "kworker/u4:1".into(), ..Default::default() },
        ],
        execs: vec![Exec {
            pid: 100,
            t_ns: 1000,
            path: "/usr/bin/python3".into(),
            argv: vec!["python3".into()],
        }],
        threads: vec![Thread { tid: 101, pid: 100, comm: "python3".into(), start_ns: Some(5), end_ns: None }],
        files: vec![
            File {
                id: 1,
                dev: vda,
                ino: 1234,
                path: Some("/usr/lib/libé €.so".into()),
                kind: FileKind::Regular,
                size: Some(1 << 20),
                mtime_ns: Some(1_700_000_000_000_000_000),
            },
            File {
                id: 2,
                dev: vda,
                ino: 99,
                path: None,
                kind: FileKind::Regular,
                size: None,
                mtime_ns: None,
            },
            File {
                id: 3,
                dev: vda,
                ino: 0,
                path: Some("/dev/vda".into()),
                kind: FileKind::DeviceMetadata,
                ..Default::default()
            },
        ],
        extents: vec![Extent {
            file_id: 1,
            disk: vda,
            logical: 0,
            physical: 4096 * 1000,
            length: 1 << 20,
            flags: 1,
        }],
        file_opens: vec![FileOpen { t_ns: 10, pid: 100, file_id: 1, exec: false }],
        page_fills: vec![
            PageFill {
                t_ns: 20,
                pid: 100,
                tid: 101,
                file_id: 1,
                index: 0,
                pages: 16,
                origin: Some(PageOrigin::Readahead),
            },
            PageFill {
                t_ns: 21,
                pid: 100,
                tid: 100,
                file_id: 2,
                index: u32::MAX as u64 + 7,
                pages: 1,
                origin: None,
            },
        ],
        block_ios: vec![
            BlockIo {
                issue_ns: Some(15),
                complete_ns: Some(19),
                dev: vda,
                sector: Some(8000),
                bytes: 65536,
                op: BlockOp::Read,
                rwbs: "RA".into(),
                pid: 100,
                comm: "python3".into(),
                file_id: Some(1),
                error: 0,
            },
            BlockIo {
                issue_ns: None,
                complete_ns: Some(30),
                dev: vda,
                sector: None,
                op: BlockOp::Flush,
                rwbs: "FF".into(),
                ..Default::default()
            },
        ],
        sched: vec![
            SchedInterval { tid: 101, start_ns: 0, end_ns: 15, state: ThreadState::Running },
            SchedInterval { tid: 101, start_ns: 15, end_ns: 19, state: ThreadState::IoWait },
        ],
        wakeups: vec![
            Wakeup { t_ns: 19, tid: 101, waker_tid: None },
            Wakeup { t_ns: 25, tid: 100, waker_tid: Some(101) },
        ],
        marks: vec![Mark {
            t_ns: 1_800_000_000,
            pid: Some(100),
            name: "ready now".into(),
            source: MarkSource::MarksFile,
        }],
        cpu_samples: vec![CpuSample {
            t_ns: 20_000_000,
            dt_ns: 20_000_000,
            user: 0.25,
            system: 0.125,
            iowait: 0.5,
            idle: 0.125,
            running: 1,
            blocked: 1,
        }],
        disk_samples: vec![DiskSample {
            t_ns: 20_000_000,
            dt_ns: 20_000_000,
            dev: vda,
            read_bytes: 1 << 20,
            read_ios: 16,
            write_bytes: 0,
            write_ios: 0,
            busy: 0.75,
        }],
        process_samples: vec![ProcessSample {
            t_ns: 20_000_000,
            dt_ns: 20_000_000,
            pid: 100,
            state: 'D',
            cpu_user: 0.5,
            cpu_system: 0.25,
            major_faults: 12,
            rss_bytes: Some(1 << 24),
        }],
    }
}

#[test]
fn every_table_survives_a_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    assert_eq!(Trace::read(&path).unwrap(), trace);
}

#[test]
fn the_file_is_private_and_no_temporary_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("t.coldstart")]);
}

#[test]
fn an_unfinished_writer_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let mut writer = TraceWriter::create(&path).unwrap();
    writer.meta(&full_trace().meta).unwrap();
    assert!(writer.temp_path().exists());
    drop(writer);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
fn files_that_are_not_traces_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, this is not a database at all, just some text").unwrap();
    let err = Trace::read(&text).unwrap_err().to_string();
    assert!(err.contains("notes.txt") && err.contains("not a coldstart trace"), "{err}");

    let other_db = dir.path().join("other.db");
    rusqlite::Connection::open(&other_db).unwrap().execute_batch("CREATE TABLE x (y)").unwrap();
    let err = Trace::read(&other_db).unwrap_err().to_string();
    assert!(err.contains("not a coldstart trace"), "{err}");

    let err = Trace::read(&dir.path().join("missing")).unwrap_err().to_string();
    assert!(err.contains("missing"), "{err}");
}

#[test]
fn a_newer_format_is_refused_with_the_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(&format!("PRAGMA user_version = {}", schema::FORMAT_VERSION + 1)).unwrap();
    drop(conn);
    let err = Trace::read(&path).unwrap_err().to_string();
    assert!(err.contains("newer"), "{err}");
}

#[test]
fn plain_sqlite_sees_bytes_per_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let (file, bytes): (Option<String>, i64) = conn
        .query_row("SELECT path, bytes FROM file_reads ORDER BY bytes DESC LIMIT 1", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!(file.as_deref(), Some("/usr/lib/libé €.so"));
    assert_eq!(bytes, 16 * 4096);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    #[test]
    fn page_fills_round_trip(fills in proptest::collection::vec(
        (any::<i64>(), any::<i32>(), any::<i32>(), any::<u32>(), 0u64..(1 << 62), any::<u32>()), 0..50)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.coldstart");
        let trace = Trace {
            page_fills: fills.into_iter().map(|(t_ns, pid, tid, file_id, index, pages)|
                PageFill { t_ns, pid, tid, file_id, index, pages, origin: None }).collect(),
            ..Default::default()
        };
        trace.write(&path).unwrap();
        prop_assert_eq!(Trace::read(&path).unwrap(), trace);
    }
}
