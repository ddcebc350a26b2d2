//! Fuzzes the trace reader and everything after it: real traces (tests/fixtures, cut
//! down to a few hundred rows so thousands run a minute) with cells changed by SQL
//! (wrong types, NULLs, edge numbers, unknown words, dangling ids), rows deleted or
//! doubled, or the file's bytes garbled. A file that does not read must give an
//! error; one that reads must analyse, diagnose and report as text, JSON, SVG, HTML,
//! Chrome JSON and collapsed stacks without a panic.

use std::io::Read;
use std::path::Path;
use std::sync::OnceLock;

use coldstart_fuzz::mutate::{self, Pick, pick};
use coldstart_fuzz::{fuzz, repo_dir};
use coldstart_trace::{Nanos, Trace};
use proptest::prelude::*;
use rusqlite::Connection;
use rusqlite::types::Value;

/// The tables of a trace and their columns, in schema order.
fn schema() -> &'static Vec<(String, Vec<String>)> {
    static SCHEMA: OnceLock<Vec<(String, Vec<String>)>> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed.coldstart");
        std::fs::write(&path, &seeds()[0]).unwrap();
        let conn = Connection::open(&path).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        tables
            .into_iter()
            .map(|table| {
                let columns = conn
                    .prepare(&format!("SELECT name FROM pragma_table_info('{table}')"))
                    .unwrap()
                    .query_map([], |r| r.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                (table, columns)
            })
            .collect()
    })
}

/// Keeps the first files the start filled pages of, the rows that name them, and the
/// first rows of the long tables; adds a mark, a few CPU stack samples, mounts and system calls (the
/// fixtures, recorded before format 3, have none).
const CUT_DOWN: &str = "
PRAGMA foreign_keys = OFF;
DELETE FROM file WHERE id NOT IN
    (SELECT file_id FROM page_fill GROUP BY file_id ORDER BY min(t_ns) LIMIT 40);
DELETE FROM extent WHERE file_id NOT IN (SELECT id FROM file);
DELETE FROM file_open WHERE file_id NOT IN (SELECT id FROM file);
DELETE FROM page_fill WHERE file_id NOT IN (SELECT id FROM file);
DELETE FROM page_access WHERE file_id NOT IN (SELECT id FROM file);
DELETE FROM page_fill WHERE rowid NOT IN (SELECT rowid FROM page_fill ORDER BY rowid LIMIT 300);
DELETE FROM page_access WHERE rowid NOT IN (SELECT rowid FROM page_access ORDER BY rowid LIMIT 150);
DELETE FROM block_io WHERE rowid NOT IN (SELECT rowid FROM block_io ORDER BY rowid LIMIT 150);
DELETE FROM sched WHERE rowid NOT IN (SELECT rowid FROM sched ORDER BY rowid LIMIT 200);
DELETE FROM wakeup WHERE rowid NOT IN (SELECT rowid FROM wakeup ORDER BY rowid LIMIT 100);
DELETE FROM process_sample WHERE rowid NOT IN (SELECT rowid FROM process_sample ORDER BY rowid LIMIT 40);
INSERT INTO mark SELECT start_ns + 1000000, pid, 'ready', 'marks_file' FROM process ORDER BY rowid LIMIT 1;
CREATE TABLE IF NOT EXISTS mapping (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL, t_ns INTEGER NOT NULL,
    start INTEGER NOT NULL, end INTEGER NOT NULL, file_offset INTEGER NOT NULL, path TEXT NOT NULL, build_id TEXT);
CREATE TABLE IF NOT EXISTS frame (id INTEGER PRIMARY KEY, mapping_id INTEGER, kernel INTEGER NOT NULL,
    address INTEGER NOT NULL, symbol TEXT);
CREATE TABLE IF NOT EXISTS stack (id INTEGER PRIMARY KEY, parent_id INTEGER, frame_id INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS stack_sample (t_ns INTEGER NOT NULL, pid INTEGER NOT NULL, tid INTEGER NOT NULL,
    cpu INTEGER NOT NULL, stack_id INTEGER);
INSERT INTO mapping SELECT 1, pid, 0, 4194304, 4259840, 4096, '/usr/bin/app', '85b8410a2553a898' FROM process ORDER BY rowid LIMIT 1;
INSERT INTO frame VALUES (1, 1, 0, 4194500, 'main'), (2, 1, 0, 4195000, NULL), (3, NULL, 1, -2130706432, 'clear_page_erms');
INSERT INTO stack VALUES (1, NULL, 1), (2, 1, 2), (3, 2, 3);
INSERT INTO stack_sample SELECT coalesce(start_ns, 0) + 1000000, pid, pid, 0, 2 FROM process ORDER BY rowid LIMIT 3;
INSERT INTO stack_sample SELECT coalesce(start_ns, 0) + 2000000, pid, pid, 1, 3 FROM process ORDER BY rowid LIMIT 3;
INSERT INTO stack_sample SELECT coalesce(start_ns, 0) + 3000000, pid, pid, 1, NULL FROM process ORDER BY rowid LIMIT 1;
CREATE TABLE IF NOT EXISTS mount (dev TEXT NOT NULL, point TEXT NOT NULL, fstype TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS syscall (tid INTEGER NOT NULL, pid INTEGER NOT NULL, enter_ns INTEGER NOT NULL,
    exit_ns INTEGER, name TEXT NOT NULL, result INTEGER, fd INTEGER, file_id INTEGER, path TEXT);
INSERT INTO mount VALUES ('254:0', '/', 'ext4'), ('0:61', '/opt/app/plug-ins', 'fuse.sshfs');
INSERT INTO syscall SELECT tid, pid, t_ns, t_ns + 2000000, 'openat', 3, 3, file_id, NULL
    FROM page_fill ORDER BY rowid LIMIT 20;
INSERT INTO syscall SELECT tid, pid, t_ns, CASE WHEN rowid % 3 = 0 THEN NULL ELSE t_ns + 3000000 END,
    'statx', -2, NULL, NULL, '/opt/app/plug-ins/p' || rowid FROM page_fill ORDER BY rowid LIMIT 20;
PRAGMA page_size = 4096;
VACUUM;
";

/// The two real traces, cut down.
fn seeds() -> &'static Vec<Vec<u8>> {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        ["soffice", "python"]
            .iter()
            .map(|name| {
                let gz = std::fs::File::open(repo_dir().join(format!("tests/fixtures/{name}.coldstart.gz")))
                    .unwrap();
                let mut bytes = Vec::new();
                flate2::read::GzDecoder::new(gz).read_to_end(&mut bytes).unwrap();
                let path = dir.path().join(name);
                std::fs::write(&path, bytes).unwrap();
                Connection::open(&path).unwrap().execute_batch(CUT_DOWN).unwrap();
                std::fs::read(&path).unwrap()
            })
            .collect()
    })
}

/// A value written into a cell.
#[derive(Clone, Debug)]
enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// Words a trace stores, so a cell often gets a real word of another column.
const WORDS: &[&str] = &[
    "record",
    "bootchart2",
    "synthetic",
    "tree",
    "system",
    "cold",
    "warm",
    "unknown",
    "regular",
    "directory",
    "device_metadata",
    "other",
    "fault",
    "read",
    "readahead",
    "map_around",
    "write",
    "flush",
    "discard",
    "running",
    "runnable",
    "io_wait",
    "sleeping",
    "stopped",
    "command",
    "marks_file",
    "trace_marker",
    "output",
    "import",
    "exit",
    "mark:ready",
    "idle",
    "window",
    "254:0",
    "0:0",
    "-1:0",
    "4294967295:1",
    "8:",
    "[]",
    "[\"a\"]",
    "[1]",
    "{",
    "",
    "12",
    "-3",
    "1e3",
    "R",
    "WS",
    "FF",
];

fn cell() -> impl Strategy<Value = Cell> {
    let edge_int = prop::sample::select(vec![
        0,
        -1,
        1,
        i64::MIN,
        i64::MAX,
        i64::from(i32::MIN),
        i64::from(i32::MAX),
        i64::from(u32::MAX),
        1 << 32,
        1 << 53,
        -(1 << 40),
    ]);
    let edge_real =
        prop::sample::select(vec![f64::INFINITY, f64::NEG_INFINITY, 1e300, -1e300, -0.5, 0.5, 1e-300]);
    prop_oneof![
        2 => Just(Cell::Null),
        3 => edge_int.prop_map(Cell::Int),
        2 => (-10i64..100_000).prop_map(Cell::Int),
        1 => any::<i64>().prop_map(Cell::Int),
        1 => edge_real.prop_map(Cell::Real),
        3 => prop::sample::select(WORDS).prop_map(|w| Cell::Text(w.to_owned())),
        1 => "[ -~]{0,12}".prop_map(Cell::Text),
        1 => prop::collection::vec(any::<u8>(), 0..12).prop_map(Cell::Blob),
    ]
}

/// One change to the database.
#[derive(Clone, Debug)]
enum Op {
    /// One cell, or (`row` None) the whole column.
    Set {
        table: Pick,
        column: Pick,
        row: Option<Pick>,
        value: Cell,
    },
    Delete {
        table: Pick,
        row: Option<Pick>,
    },
    Duplicate {
        table: Pick,
        row: Pick,
    },
    /// Adds to (or takes from) every value of a column, so rows keep their shape.
    Shift {
        table: Pick,
        column: Pick,
        by: i64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let shift =
        prop::sample::select(vec![-1i64, 1, -1_000_000_000, 1_000_000_000, i64::MAX / 2, i64::MIN / 2]);
    prop_oneof![
        8 => (pick(), pick(), prop::option::weighted(0.8, pick()), cell())
            .prop_map(|(table, column, row, value)| Op::Set { table, column, row, value }),
        2 => (pick(), prop::option::weighted(0.8, pick())).prop_map(|(table, row)| Op::Delete { table, row }),
        1 => (pick(), pick()).prop_map(|(table, row)| Op::Duplicate { table, row }),
        2 => (pick(), pick(), shift).prop_map(|(table, column, by)| Op::Shift { table, column, by }),
    ]
}

impl Cell {
    fn value(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Int(i) => Value::Integer(*i),
            Cell::Real(r) => Value::Real(*r),
            Cell::Text(t) => Value::Text(t.clone()),
            Cell::Blob(b) => Value::Blob(b.clone()),
        }
    }
}

/// `WHERE` naming one row of `table` by its position, or every row.
fn which_row(conn: &Connection, table: &str, row: Option<Pick>) -> Option<String> {
    let Some(row) = row else { return Some(String::new()) };
    let count: i64 = conn.query_row(&format!("SELECT count(*) FROM \"{table}\""), [], |r| r.get(0)).ok()?;
    (count > 0).then(|| {
        let offset = row.index(count as usize);
        format!(" WHERE rowid = (SELECT rowid FROM \"{table}\" ORDER BY rowid LIMIT 1 OFFSET {offset})")
    })
}

/// Applies `ops` to a copy of `base` and returns the file's bytes. A change SQLite
/// refuses (a constraint) is skipped.
fn apply(base: &[u8], ops: &[Op]) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mutated.coldstart");
    std::fs::write(&path, base).unwrap();
    let Ok(conn) = Connection::open(&path) else { return base.to_vec() };
    // Dangling ids are part of what a hostile file holds.
    let _ = conn.execute_batch("PRAGMA foreign_keys = OFF");
    let tables = schema();
    for op in ops {
        let (table, columns) = match op {
            Op::Set { table, .. }
            | Op::Delete { table, .. }
            | Op::Duplicate { table, .. }
            | Op::Shift { table, .. } => &tables[table.index(tables.len())],
        };
        let column = |pick: &Pick| &columns[pick.index(columns.len())];
        let statement = match op {
            Op::Set { column: c, row, value, .. } => which_row(&conn, table, *row)
                .map(|w| (format!("UPDATE \"{table}\" SET \"{}\" = ?1{w}", column(c)), vec![value.value()])),
            Op::Delete { row, .. } => {
                which_row(&conn, table, *row).map(|w| (format!("DELETE FROM \"{table}\"{w}"), vec![]))
            }
            Op::Duplicate { row, .. } => which_row(&conn, table, Some(*row))
                .map(|w| (format!("INSERT INTO \"{table}\" SELECT * FROM \"{table}\"{w}"), vec![])),
            Op::Shift { column: c, by, .. } => {
                let c = column(c);
                Some((format!("UPDATE \"{table}\" SET \"{c}\" = \"{c}\" + ?1"), vec![Value::Integer(*by)]))
            }
        };
        if let Some((sql, params)) = statement {
            let _ = conn.execute(&sql, rusqlite::params_from_iter(params));
        }
    }
    drop(conn);
    std::fs::read(&path).unwrap_or_else(|_| base.to_vec())
}

fn check(bytes: &[u8]) {
    check_charts(bytes, &[bytes.len() % 3]);
}

/// Reads, analyses and reports; `charts` picks among SVG (0), HTML (1) and Chrome JSON (2).
fn check_charts(bytes: &[u8], charts: &[usize]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fuzz.coldstart");
    std::fs::write(&path, bytes).unwrap();
    let Ok(trace) = Trace::read(&path) else { return };
    let analysis = coldstart_analyze::analyze(&trace);
    let config = coldstart_analyze::doctor::DoctorConfig::default();
    let diagnosis = coldstart_analyze::doctor::diagnose(&trace, &analysis, &config, &[]);
    let timeline = coldstart_report::html::Timeline::new(&trace);
    let mut out = Vec::new();
    let text = coldstart_report::text::Options::default();
    coldstart_report::text::report_with_findings(&analysis, Some(&diagnosis), &text, &mut out).unwrap();
    coldstart_report::json::write_with_doctor(&analysis, &diagnosis, &mut out).unwrap();
    coldstart_report::export::folded::write(&trace, &Default::default(), &mut out).unwrap();
    // The chart, the page and the export take most of the time: one of them per input
    // (chosen by its length, so that a failing input fails again).
    for chart in charts {
        match chart {
            0 => coldstart_report::svg::write(&trace, &analysis, &Default::default(), &mut out),
            1 => coldstart_report::html::write(&analysis, Some(&timeline), Some(&diagnosis), &mut out),
            _ => coldstart_report::export::chrome::write(&trace, &analysis, &mut out),
        }
        .unwrap();
    }
}

#[test]
fn every_corpus_trace_draws_in_every_format() {
    for (_, bytes) in coldstart_fuzz::corpus("trace") {
        check_charts(&bytes, &[0, 1, 2]);
    }
}

#[test]
fn the_cut_down_fixtures_read_with_rows_in_every_long_table() {
    for seed in seeds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seed.coldstart");
        std::fs::write(&path, seed).unwrap();
        let trace = Trace::read(Path::new(&path)).unwrap();
        assert!((1..=40).contains(&trace.files.len()), "{} files", trace.files.len());
        assert_eq!(trace.page_fills.len(), 300);
        assert!(!trace.block_ios.is_empty() && !trace.sched.is_empty() && trace.marks.len() == 1);
        assert_eq!((trace.frames.len(), trace.stacks.len()), (3, 3));
        assert!(trace.stack_samples.len() >= 3, "{} stack samples", trace.stack_samples.len());
        assert_eq!(
            (trace.syscalls.len(), trace.mounts.len()),
            (40, 2),
            "the seeds exercise format 3's tables"
        );
        check_charts(seed, &[0, 1, 2]);
    }
}

/// `seed` with `sql` run on it, read back.
fn read_changed(seed: &[u8], sql: &str) -> Result<Trace, coldstart_trace::TraceError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("changed.coldstart");
    std::fs::write(&path, seed).unwrap();
    Connection::open(&path).unwrap().execute_batch(sql).unwrap();
    Trace::read(&path)
}

#[test]
fn a_stack_whose_parent_is_not_before_it_is_refused() {
    let err = read_changed(&seeds()[0], "UPDATE stack SET parent_id = 3 WHERE id = 3").unwrap_err();
    assert!(err.to_string().contains("table stack, column parent_id: 3"), "{err}");
}

#[test]
fn a_negative_count_is_an_error_naming_its_column() {
    let err = read_changed(&seeds()[0], "UPDATE loss SET count = -1 WHERE rowid = 1").unwrap_err();
    assert!(err.to_string().contains("table loss, column count: \"-1\""), "{err}");
    let err = read_changed(&seeds()[0], "UPDATE page_fill SET page_index = -5").unwrap_err();
    assert!(err.to_string().contains("column page_index"), "{err}");
}

#[test]
fn a_time_shifted_by_2_62_is_refused_naming_table_column_and_value() {
    let err = read_changed(&seeds()[0], "UPDATE sched SET end_ns = 4611686018427387904 WHERE rowid = 7")
        .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("table sched, column end_ns: 4611686018427387904 (a time lies within 2^50 ns"),
        "{text}"
    );
    let err = read_changed(&seeds()[1], "UPDATE meta SET value = -1 WHERE key = 'duration_ns'").unwrap_err();
    assert!(err.to_string().contains("table meta, column duration_ns: -1"), "{err}");
    let err =
        read_changed(&seeds()[1], "UPDATE cpu_sample SET dt_ns = -20000000 WHERE rowid = 2").unwrap_err();
    assert!(err.to_string().contains("table cpu_sample, column dt_ns: -20000000"), "{err}");
    let limit =
        read_changed(&seeds()[0], "UPDATE sched SET end_ns = 1125899906842624 WHERE rowid = 7").unwrap();
    assert_eq!(limit.sched[6].end_ns, 1 << 50);
}

#[test]
fn offsets_past_63_bits_page_sizes_and_shares_out_of_range_are_refused() {
    let err = read_changed(&seeds()[0], "UPDATE page_fill SET page_index = 2251799813685248 WHERE rowid = 1")
        .unwrap_err();
    assert!(err.to_string().contains("table page_fill, column page_index: 2251799813685248"), "{err}");
    let err = read_changed(&seeds()[0], "UPDATE block_io SET sector = 18014398509481984 WHERE rowid = 1")
        .unwrap_err();
    assert!(err.to_string().contains("table block_io, column sector"), "{err}");
    let err = read_changed(&seeds()[0], "UPDATE meta SET value = 4095 WHERE key = 'page_size'").unwrap_err();
    assert!(err.to_string().contains("table meta, column page_size: 4095"), "{err}");
    let err = read_changed(&seeds()[0], "UPDATE cpu_sample SET iowait = -0.5 WHERE rowid = 1").unwrap_err();
    assert!(err.to_string().contains("table cpu_sample, column iowait: -0.5"), "{err}");
    let err =
        read_changed(&seeds()[0], "UPDATE meta SET value = 4294967296 WHERE key = 'cpu_count'").unwrap_err();
    assert!(err.to_string().contains("table meta, column cpu_count: \"4294967296\""), "{err}");
    let unknown = read_changed(&seeds()[0], "UPDATE meta SET value = 0 WHERE key = 'page_size'").unwrap();
    assert_eq!(unknown.meta.page_size, 0);
}

/// Every interval passes the reader (2^51 ns each), but ten thousand of them on two
/// threads add up far past i64: the sums saturate instead of wrapping (or panicking).
#[test]
fn ten_thousand_13_day_waits_saturate_the_sums() {
    let sql = "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO sched SELECT t.tid, -(1 << 50), 1 << 50, 'io_wait' FROM n,
            (SELECT tid FROM sched GROUP BY tid ORDER BY tid LIMIT 2) AS t;
        UPDATE meta SET value = 1125899906842624 WHERE key = 'duration_ns';";
    let trace = read_changed(&seeds()[0], sql).unwrap();
    let analysis = coldstart_analyze::analyze(&trace);
    let waited = analysis.threads.iter().filter(|t| t.time.io_wait_ns == Nanos::MAX).count();
    assert_eq!(waited, 2);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("saturated.coldstart");
    trace.write(&path).unwrap();
    check_charts(&std::fs::read(&path).unwrap(), &[0, 1, 2]);
}

#[test]
fn losses_that_add_up_past_u64_do_not_overflow_the_total() {
    let trace = read_changed(&seeds()[0], "UPDATE loss SET count = 9223372036854775807").unwrap();
    assert!(trace.losses.len() > 2);
    assert_eq!(coldstart_analyze::analyze(&trace).overview.lost, u64::MAX);
}

#[test]
fn a_sequential_read_of_exabytes_is_costed_without_allocating_a_request_each() {
    use coldstart_analyze::doctor::{DiskClass, DiskParams};
    let disk = DiskParams::class_defaults(DiskClass::Hdd);
    let small = disk.sequential_read_ns(3 * disk.max_request_bytes + 1);
    assert!(small > 0 && small < 1_000_000_000, "{small}");
    assert!(disk.sequential_read_ns(u64::MAX) > small);
}

#[test]
fn trace_file() {
    fuzz(
        "trace",
        seeds().clone(),
        |bases| {
            let sql = (mutate::base(&bases), prop::collection::vec(op(), 1..6))
                .prop_map(|(base, ops)| apply(&base, &ops));
            prop_oneof![8 => sql, 1 => mutate::bytes(&bases)].boxed()
        },
        check,
    );
}
