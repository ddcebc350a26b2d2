//! A trace written and read back is the same trace; bad files are refused with a clear reason.

use std::os::unix::fs::PermissionsExt;

use coldstart_trace::*;
use common::full_trace;

mod common;
use proptest::prelude::*;

#[test]
fn every_table_survives_a_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    assert_eq!(Trace::read(&path).unwrap(), trace);
}

/// Every table rebuilt with its columns in reverse order: the reader finds them by name.
#[test]
fn columns_are_read_by_name_not_by_position() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name != 'meta'")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert!(tables.len() >= 15, "tables: {tables:?}");
    conn.execute_batch("PRAGMA foreign_keys = OFF; PRAGMA legacy_alter_table = ON").unwrap();
    for table in &tables {
        let mut columns: Vec<String> = conn
            .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect();
        columns.reverse();
        let list = columns.join(", ");
        conn.execute_batch(&format!(
            "CREATE TABLE reordered AS SELECT {list} FROM {table} ORDER BY rowid; DROP TABLE {table}; \
             ALTER TABLE reordered RENAME TO {table};"
        ))
        .unwrap();
    }
    drop(conn);
    assert_eq!(Trace::read(&path).unwrap(), trace);
}

#[test]
fn a_format_1_file_without_the_also_key_reads_with_no_also() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DELETE FROM meta WHERE key = 'also'; PRAGMA user_version = 1").unwrap();
    drop(conn);
    let read = Trace::read(&path).unwrap();
    assert_eq!(read.meta.also, Vec::new());
    assert_eq!(read.processes, trace.processes);
}

#[test]
fn a_format_2_file_reads_with_no_stack_syscall_or_off_cpu_tables() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "DROP TABLE mapping; DROP TABLE frame; DROP TABLE stack; DROP TABLE stack_sample; \
         DROP TABLE off_cpu_sample; DROP TABLE mount; DROP TABLE syscall; PRAGMA user_version = 2",
    )
    .unwrap();
    drop(conn);
    let read = Trace::read(&path).unwrap();
    assert!(read.off_cpu_samples.is_empty() && read.stack_samples.is_empty() && read.syscalls.is_empty());
    assert_eq!(read.sched, trace.sched);
    assert!(!trace.off_cpu_samples.is_empty());
}

#[test]
fn a_format_3_file_reads_each_disks_read_ahead_as_unknown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    assert_eq!(trace.disks[0].read_ahead_kb, Some(8192));
    trace.write(&path).unwrap();
    assert_eq!(Trace::read(&path).unwrap().disks[0].read_ahead_kb, Some(8192));
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("ALTER TABLE disk DROP COLUMN read_ahead_kb; PRAGMA user_version = 3").unwrap();
    drop(conn);
    let read = Trace::read(&path).unwrap();
    assert_eq!(read.disks[0].read_ahead_kb, None);
    assert_eq!(read.disks[0].read_bytes, trace.disks[0].read_bytes);
}

#[test]
fn the_also_key_is_json_a_sqlite_client_can_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let pids: String = conn
        .query_row(
            "SELECT group_concat(p.value, ' ') FROM meta, json_each(meta.value) AS a, \
             json_each(json_extract(a.value, '$.pids')) AS p WHERE meta.key = 'also'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(pids, "812 813");
}

#[test]
fn the_time_before_a_boot_recording_is_json_and_older_files_have_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    full_trace().write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let kernel: i64 = conn
        .query_row(
            "SELECT json_extract(p.value, '$.ns') FROM meta, json_each(meta.value) AS p \
             WHERE meta.key = 'before_recording' AND json_extract(p.value, '$.phase') = 'kernel'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(kernel, 900_000_000);
    conn.execute_batch(
        "UPDATE meta SET value = '[{\"phase\":\"kernel\",\"ns\":-1}]' WHERE key = 'before_recording'",
    )
    .unwrap();
    drop(conn);
    assert!(Trace::read(&path).is_err(), "a negative phase is refused");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DELETE FROM meta WHERE key = 'before_recording'").unwrap();
    drop(conn);
    assert_eq!(Trace::read(&path).unwrap().meta.before_recording, Vec::new());
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

    let err = error_chain(&Trace::read(&dir.path().join("missing")).unwrap_err());
    assert!(err.contains("missing") && err.contains("No such file or directory"), "{err}");

    let err = Trace::read(dir.path()).unwrap_err().to_string();
    assert!(err.contains("not a coldstart trace"), "a directory: {err}");
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

/// A file of format 1 has no `mark.tid` column and no `ready_pid`/`ready_tid` keys: it
/// reads with them `None` and everything else as written.
#[test]
fn a_format_1_file_reads_without_the_owners() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let trace = full_trace();
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "ALTER TABLE mark DROP COLUMN tid; DELETE FROM meta WHERE key IN ('ready_pid', 'ready_tid'); \
         PRAGMA user_version = 1;",
    )
    .unwrap();
    drop(conn);

    let read = Trace::read(&path).unwrap();
    let ready = read.meta.ready.clone().unwrap();
    assert_eq!((ready.pid, ready.tid), (None, None));
    assert_eq!(ready.reason, trace.meta.ready.clone().unwrap().reason);
    let owners: Vec<_> = read.marks.iter().map(|m| (m.name.as_str(), m.pid, m.tid)).collect();
    assert_eq!(owners, [("ready now", Some(100), None), ("window:mate-panel", Some(100), None)]);
    assert_eq!(read.processes, trace.processes);
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
        (-(1i64 << 50)..=(1 << 50), any::<i32>(), any::<i32>(), any::<u32>(), 0u64..(1 << 51), any::<u32>()), 0..50)) {
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

#[test]
fn files_written_before_the_page_access_table_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.coldstart");
    let mut trace = full_trace();
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch("DROP TABLE page_access").unwrap();
    drop(conn);
    trace.page_accesses.clear();
    assert_eq!(Trace::read(&path).unwrap(), trace);
}

#[test]
fn loss_and_note_sources_are_stored_as_their_words_and_unknown_ones_read_as_other() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.coldstart");
    let mut trace = full_trace();
    trace.losses.push(Loss {
        source: LossSource::ProcConnector,
        what: "receive buffer overruns".into(),
        count: 4,
    });
    trace.write(&path).unwrap();
    let conn = rusqlite::Connection::open(&path).unwrap();
    let words: Vec<String> = conn
        .prepare("SELECT source FROM loss UNION ALL SELECT source FROM note")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(words, ["tracefs", "proc connector", "record"]);
    conn.execute_batch("UPDATE loss SET source = 'sampler'; UPDATE note SET source = 'a newer recorder'")
        .unwrap();
    drop(conn);
    let read = Trace::read(&path).unwrap();
    let sources: Vec<LossSource> = read.losses.iter().map(|l| l.source).collect();
    assert_eq!(sources, [LossSource::Other, LossSource::Other]);
    assert_eq!(read.losses[1].what, "receive buffer overruns");
    assert_eq!((read.notes[0].source, read.notes[0].text.as_str()), (NoteSource::Other, "no mark on /proc"));
}
