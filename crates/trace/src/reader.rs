//! Reading a trace file back into a [`Trace`], checking first that it is one and
//! that its format version is one this code understands.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::types::FromSql;
use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags, Row};

use crate::Dev;
use crate::error::{Result, TraceError};
use crate::model::*;
use crate::schema::{APPLICATION_ID, FORMAT_VERSION};
use crate::text::{OpenTextEnum, TextEnum};

struct Reader<'a> {
    conn: Connection,
    path: &'a Path,
}

/// The tables a second connection reads (`Reader::scheduler_tables`).
struct SchedulerTables {
    block_ios: Vec<BlockIo>,
    sched: Vec<SchedInterval>,
    wakeups: Vec<Wakeup>,
}

/// A read-only connection to a trace file, without SQLite's mutexes: each connection is
/// read by one thread.
fn open(path: &Path) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    Connection::open_with_flags(path, flags).map_err(|e| TraceError::sqlite(path, e))
}

fn word<T: TextEnum>(table: &'static str, column: &'static str, text: &str) -> Result<T> {
    T::from_word(text).ok_or_else(|| TraceError::BadValue { table, column, value: text.to_owned() })
}

fn dev(table: &'static str, column: &'static str, text: &str) -> Result<Dev> {
    text.parse().map_err(|_| TraceError::BadValue { table, column, value: text.to_owned() })
}

fn list(table: &'static str, column: &'static str, text: &str) -> Result<Vec<String>> {
    serde_json::from_str(text).map_err(|_| TraceError::BadValue { table, column, value: text.to_owned() })
}

/// How far from the trace's start a time may lie, and how long an interval may be:
/// no recording lasts 2^50 ns (about 13 days), and a few thousand such values still
/// add up within 64 bits. A file holding more was written by no recorder.
pub const MAX_TIME_NS: Nanos = 1 << 50;

const TIME_RANGE: &str = "a time lies within 2^50 ns, about 13 days, of the trace's start";
const SPAN_RANGE: &str = "an interval lasts from 0 to 2^50 ns, about 13 days";
const FRACTION_RANGE: &str = "a share of CPU or disk time is a finite number, 0 or more";
const BYTE_OFFSET_RANGE: &str = "a byte offset fits in 63 bits, as the kernel's file offsets do";
const PAGE_SIZE_RANGE: &str = "a page size is 0 (unknown) or a power of two from 512 to 2 MiB";

fn bad_value(table: &'static str, column: &'static str, value: impl ToString) -> TraceError {
    TraceError::BadValue { table, column, value: value.to_string() }
}

/// A number of the `meta` table (stored as an i64) in the type the model gives it.
fn meta_number<T: TryFrom<i64>>(key: &'static str, value: Option<i64>) -> Result<Option<T>> {
    value.map(|i| T::try_from(i).map_err(|_| bad_value("meta", key, i))).transpose()
}

fn out_of_range(
    table: &'static str,
    column: &'static str,
    value: impl ToString,
    allowed: &'static str,
) -> TraceError {
    TraceError::OutOfRange { table, column, value: value.to_string(), allowed }
}

fn checked_time(table: &'static str, column: &'static str, t: i64) -> Result<Nanos> {
    if t.unsigned_abs() <= MAX_TIME_NS.unsigned_abs() {
        Ok(t)
    } else {
        Err(out_of_range(table, column, t, TIME_RANGE))
    }
}

fn checked_span(table: &'static str, column: &'static str, ns: i64) -> Result<Nanos> {
    if (0..=MAX_TIME_NS).contains(&ns) { Ok(ns) } else { Err(out_of_range(table, column, ns, SPAN_RANGE)) }
}

/// A time relative to the trace's start.
fn time(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<Nanos> {
    checked_time(table, column, row.get(column)?)
}

fn time_or_null(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<Option<Nanos>> {
    row.get::<Option<i64>>(column)?.map(|t| checked_time(table, column, t)).transpose()
}

/// The length of a sample's interval.
fn span(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<Nanos> {
    checked_span(table, column, row.get(column)?)
}

fn fraction(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<f64> {
    let value: f64 = row.get(column)?;
    if value.is_finite() && value >= 0.0 {
        Ok(value)
    } else {
        Err(out_of_range(table, column, value, FRACTION_RANGE))
    }
}

/// A start sector, whose byte offset must fit in 63 bits.
fn sector(row: &Cells<'_>) -> Result<Option<u64>> {
    match unsigned_or_null(row, "block_io", "sector")? {
        Some(sector) if sector > i64::MAX.unsigned_abs() / 512 => {
            Err(out_of_range("block_io", "sector", sector, BYTE_OFFSET_RANGE))
        }
        sector => Ok(sector),
    }
}

/// The first of `page_size`-byte pages, whose byte offset must fit in 63 bits.
fn page_index(row: &Cells<'_>, table: &'static str, page_size: u64) -> Result<u64> {
    let index = unsigned(row, table, "page_index")?;
    if index <= i64::MAX.unsigned_abs() / page_size {
        Ok(index)
    } else {
        Err(out_of_range(table, "page_index", index, BYTE_OFFSET_RANGE))
    }
}

/// A column of counts, sizes or positions: SQLite stores them signed, no real one
/// reaches 2^63, and a negative one would become a huge number.
fn unsigned(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<u64> {
    let value: i64 = row.get(column)?;
    u64::try_from(value).map_err(|_| TraceError::BadValue { table, column, value: value.to_string() })
}

fn unsigned_or_null(row: &Cells<'_>, table: &'static str, column: &'static str) -> Result<Option<u64>> {
    match row.get::<Option<i64>>(column)? {
        None => Ok(None),
        Some(_) => unsigned(row, table, column).map(Some),
    }
}

/// A column that files of an older format lack.
fn optional_column<T: FromSql>(row: &Cells<'_>, column: &str) -> Result<Option<T>> {
    if row.has(column) { Ok(row.get(column)?) } else { Ok(None) }
}

/// A row with its statement's column names resolved once: rusqlite finds a column by name
/// by asking SQLite for every column's name on every access, which was half the time of
/// reading a trace.
struct Cells<'a> {
    row: &'a Row<'a>,
    columns: &'a [String],
}

impl Cells<'_> {
    fn index(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    fn has(&self, name: &str) -> bool {
        self.index(name).is_some()
    }

    fn get<T: FromSql>(&self, name: &str) -> rusqlite::Result<T> {
        match self.index(name) {
            Some(i) => self.row.get(i),
            None => self.row.get(name),
        }
    }
}

impl Reader<'_> {
    fn rows<T>(&self, sql: &str, mut convert: impl FnMut(&Cells<'_>) -> Result<T>) -> Result<Vec<T>> {
        let sqlite = |e| TraceError::sqlite(self.path, e);
        let mut stmt = self.conn.prepare(sql).map_err(sqlite)?;
        // A name that is not UTF-8 (a hostile file) matches nothing: `column_names` would panic.
        let columns: Vec<String> = (0..stmt.column_count())
            .map(|i| stmt.column_name(i).map(str::to_ascii_lowercase).unwrap_or_default())
            .collect();
        let mut rows = stmt.query([]).map_err(sqlite)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().map_err(sqlite)? {
            out.push(convert(&Cells { row, columns: &columns }).map_err(|e| e.in_file(self.path))?);
        }
        Ok(out)
    }

    /// Like [`Reader::rows`], for a table that files written before it existed lack.
    fn rows_if_table<T>(
        &self,
        table: &str,
        sql: &str,
        convert: impl FnMut(&Cells<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        let exists: bool = self
            .conn
            .query_row(
                "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?1",
                [table],
                |r| r.get(0),
            )
            .map_err(|e| TraceError::sqlite(self.path, e))?;
        if exists { self.rows(sql, convert) } else { Ok(Vec::new()) }
    }

    fn meta(&self) -> Result<Meta> {
        let pairs = self.rows("SELECT key, value FROM meta", |row| {
            Ok((row.get::<String>("key")?, row.get::<Value>("value")?))
        })?;
        let map: HashMap<String, Value> = pairs.into_iter().collect();
        let text = |key: &str| match map.get(key) {
            Some(Value::Text(s)) => Some(s.clone()),
            Some(Value::Integer(i)) => Some(i.to_string()),
            Some(Value::Real(r)) => Some(r.to_string()),
            _ => None,
        };
        let int = |key: &str| match map.get(key) {
            Some(Value::Integer(i)) => Some(*i),
            Some(Value::Real(r)) => Some(*r as i64),
            Some(Value::Text(s)) => s.parse().ok(),
            _ => None,
        };
        let real = |key: &str| match map.get(key) {
            Some(Value::Real(r)) => Some(*r),
            Some(Value::Integer(i)) => Some(*i as f64),
            _ => None,
        };
        let page_size = match int("page_size").unwrap_or(4096) {
            0 => 0,
            size @ 512..=0x20_0000 if size.count_ones() == 1 => size as u32,
            size => return Err(out_of_range("meta", "page_size", size, PAGE_SIZE_RANGE)),
        };
        let ready = match (int("ready_ns"), text("ready_reason")) {
            (Some(t_ns), Some(reason)) => Some(Ready {
                t_ns: checked_time("meta", "ready_ns", t_ns)?,
                reason: reason.parse().map_err(|_| TraceError::BadValue {
                    table: "meta",
                    column: "ready_reason",
                    value: reason,
                })?,
                pid: int("ready_pid").map(|p| p as i32),
                tid: int("ready_tid").map(|t| t as i32),
            }),
            _ => None,
        };
        Ok(Meta {
            tool: text("tool").unwrap_or_default(),
            source: word("meta", "source", &text("source").unwrap_or_else(|| "record".into()))?,
            command: list("meta", "command", &text("command").unwrap_or_else(|| "[]".into()))?,
            cwd: text("cwd"),
            user: text("user"),
            scope: word("meta", "scope", &text("scope").unwrap_or_else(|| "tree".into()))?,
            root_pid: meta_number("root_pid", int("root_pid"))?,
            host: text("host").unwrap_or_default(),
            kernel: text("kernel").unwrap_or_default(),
            cpu_model: text("cpu_model").unwrap_or_default(),
            cpu_count: meta_number("cpu_count", int("cpu_count"))?.unwrap_or(0),
            mem_total_bytes: meta_number("mem_total_bytes", int("mem_total_bytes"))?.unwrap_or(0),
            page_size,
            clock: text("clock").unwrap_or_default(),
            start_unix_ns: int("start_unix_ns").unwrap_or(0),
            start_clock_ns: int("start_clock_ns").unwrap_or(0),
            boottime_offset_ns: int("boottime_offset_ns").unwrap_or(0),
            duration_ns: checked_span("meta", "duration_ns", int("duration_ns").unwrap_or(0))?,
            ready,
            cache: word("meta", "cache", &text("cache").unwrap_or_else(|| "unknown".into()))?,
            eviction: text("eviction"),
            exit_code: meta_number("exit_code", int("exit_code"))?,
            partial: int("partial").unwrap_or(0) != 0,
            sample_hz: real("sample_hz"),
            stack_sample_hz: real("stack_sample_hz"),
            also: match text("also") {
                Some(json) => serde_json::from_str(&json).map_err(|_| TraceError::BadValue {
                    table: "meta",
                    column: "also",
                    value: json,
                })?,
                None => Vec::new(),
            },
            before_recording: match text("before_recording") {
                Some(json) => {
                    let phases: Vec<BootPhase> =
                        serde_json::from_str(&json).map_err(|_| TraceError::BadValue {
                            table: "meta",
                            column: "before_recording",
                            value: json.clone(),
                        })?;
                    for p in &phases {
                        checked_span("meta", "before_recording", p.ns)?;
                    }
                    phases
                }
                None => Vec::new(),
            },
        })
    }

    /// The scheduler's and the block layer's tables, the largest after the page fills: read
    /// by a second connection on another thread while this one reads the rest.
    fn scheduler_tables(&self) -> Result<SchedulerTables> {
        Ok(SchedulerTables {
            block_ios: self.rows("SELECT * FROM block_io ORDER BY rowid", read_block_io)?,
            sched: self.rows("SELECT * FROM sched ORDER BY rowid", read_sched_interval)?,
            wakeups: self.rows("SELECT * FROM wakeup ORDER BY rowid", read_wakeup)?,
        })
    }

    fn read(&self) -> Result<Trace> {
        let second = Reader { conn: open(self.path)?, path: self.path };
        std::thread::scope(|scope| {
            let other = scope.spawn(move || second.scheduler_tables());
            let rest = self.read_rest();
            let tables = other.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
            let mut trace = rest?;
            (trace.block_ios, trace.sched, trace.wakeups) = (tables.block_ios, tables.sched, tables.wakeups);
            Ok(trace)
        })
    }

    /// Every table but [`Reader::scheduler_tables`]'.
    fn read_rest(&self) -> Result<Trace> {
        let meta = self.meta()?;
        let page_size = if meta.page_size == 0 { 4096 } else { u64::from(meta.page_size) };
        Ok(Trace {
            meta,
            disks: self.rows("SELECT * FROM disk ORDER BY rowid", read_disk)?,
            losses: self.rows("SELECT * FROM loss ORDER BY rowid", read_loss)?,
            notes: self.rows("SELECT * FROM note ORDER BY rowid", read_note)?,
            processes: self.rows("SELECT * FROM process ORDER BY rowid", read_process)?,
            execs: self.rows("SELECT * FROM exec ORDER BY rowid", read_exec)?,
            threads: self.rows("SELECT * FROM thread ORDER BY rowid", read_thread)?,
            files: self.rows("SELECT * FROM file ORDER BY id", read_file)?,
            extents: self.rows("SELECT * FROM extent ORDER BY rowid", read_extent)?,
            file_opens: self.rows("SELECT * FROM file_open ORDER BY rowid", read_file_open)?,
            page_fills: self
                .rows("SELECT * FROM page_fill ORDER BY rowid", |r| read_page_fill(r, page_size))?,
            page_accesses: self.rows_if_table(
                "page_access",
                "SELECT * FROM page_access ORDER BY rowid",
                |r| read_page_access(r, page_size),
            )?,
            page_residents: self.rows_if_table(
                "page_resident",
                "SELECT * FROM page_resident ORDER BY rowid",
                |r| read_page_resident(r, page_size),
            )?,
            block_ios: Vec::new(),
            sched: Vec::new(),
            wakeups: Vec::new(),
            marks: self.rows("SELECT * FROM mark ORDER BY rowid", read_mark)?,
            cpu_samples: self.rows("SELECT * FROM cpu_sample ORDER BY rowid", read_cpu_sample)?,
            disk_samples: self.rows("SELECT * FROM disk_sample ORDER BY rowid", read_disk_sample)?,
            units: self.rows_if_table("unit", "SELECT * FROM unit ORDER BY rowid", read_unit)?,
            process_samples: self.rows("SELECT * FROM process_sample ORDER BY rowid", read_process_sample)?,
            mappings: self.rows_if_table("mapping", "SELECT * FROM mapping ORDER BY id", read_mapping)?,
            frames: self.rows_if_table("frame", "SELECT * FROM frame ORDER BY id", read_frame)?,
            stacks: self.rows_if_table("stack", "SELECT * FROM stack ORDER BY id", read_stack)?,
            stack_samples: self.rows_if_table(
                "stack_sample",
                "SELECT * FROM stack_sample ORDER BY rowid",
                read_stack_sample,
            )?,
            off_cpu_samples: self.rows_if_table(
                "off_cpu_sample",
                "SELECT * FROM off_cpu_sample ORDER BY rowid",
                read_off_cpu_sample,
            )?,
            mounts: self.rows_if_table("mount", "SELECT * FROM mount ORDER BY rowid", read_mount)?,
            syscalls: self.rows_if_table("syscall", "SELECT * FROM syscall ORDER BY rowid", read_syscall)?,
        })
    }
}

impl Trace {
    /// Reads a whole trace file.
    pub fn read(path: &Path) -> Result<Trace> {
        match std::fs::metadata(path) {
            Err(e) => return Err(TraceError::io(path, e)),
            Ok(m) if m.is_dir() => return Err(TraceError::NotATrace(path.to_owned())),
            Ok(_) => {}
        }
        let conn = open(path)?;
        let pragma = |name: &str| -> Result<i32> {
            conn.query_row(&format!("PRAGMA {name}"), [], |r| r.get(0)).map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _) if f.code == rusqlite::ErrorCode::NotADatabase => {
                    TraceError::NotATrace(path.to_owned())
                }
                e => TraceError::sqlite(path, e),
            })
        };
        if pragma("application_id")? != APPLICATION_ID {
            return Err(TraceError::NotATrace(path.to_owned()));
        }
        let version = pragma("user_version")?;
        if version > FORMAT_VERSION {
            return Err(TraceError::NewerFormat {
                path: path.to_owned(),
                found: version,
                supported: FORMAT_VERSION,
            });
        }
        if !column_names_are_utf8(&conn).map_err(|e| TraceError::sqlite(path, e))? {
            return Err(TraceError::NotATrace(path.to_owned()));
        }
        Reader { conn, path }.read()
    }
}

/// Whether every column name of the file's tables and views is UTF-8: rusqlite panics on one
/// that is not, which only a damaged or hostile file has.
fn column_names_are_utf8(conn: &Connection) -> rusqlite::Result<bool> {
    let sql = "SELECT hex(p.name) FROM sqlite_master m, pragma_table_info(m.name) p \
               WHERE m.type IN ('table', 'view')";
    let mut stmt = conn.prepare(sql)?;
    let names = stmt.query_map([], |r| r.get::<_, String>(0))?;
    for hex in names {
        let hex = hex?;
        let bytes: Option<Vec<u8>> =
            (0..hex.len() / 2).map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()).collect();
        if bytes.is_none_or(|b| std::str::from_utf8(&b).is_err()) {
            return Ok(false);
        }
    }
    Ok(true)
}

fn read_disk(r: &Cells<'_>) -> Result<Disk> {
    Ok(Disk {
        dev: dev("disk", "dev", &r.get::<String>("dev")?)?,
        name: r.get("name")?,
        model: r.get("model")?,
        rotational: r.get("rotational")?,
        size_bytes: unsigned_or_null(r, "disk", "size_bytes")?,
        read_bytes: unsigned_or_null(r, "disk", "read_bytes")?,
        read_ios: unsigned_or_null(r, "disk", "read_ios")?,
        write_bytes: unsigned_or_null(r, "disk", "write_bytes")?,
        write_ios: unsigned_or_null(r, "disk", "write_ios")?,
        read_ahead_kb: optional_column(r, "read_ahead_kb")?,
    })
}

fn read_loss(r: &Cells<'_>) -> Result<Loss> {
    let source = LossSource::from_any_word(&r.get::<String>("source")?);
    Ok(Loss { source, what: r.get("what")?, count: unsigned(r, "loss", "count")? })
}

fn read_note(r: &Cells<'_>) -> Result<Note> {
    Ok(Note { source: NoteSource::from_any_word(&r.get::<String>("source")?), text: r.get("text")? })
}

fn read_process(r: &Cells<'_>) -> Result<Process> {
    Ok(Process {
        pid: r.get("pid")?,
        ppid: r.get("ppid")?,
        comm: r.get("comm")?,
        exe: r.get("exe")?,
        argv: list("process", "argv", &r.get::<String>("argv")?)?,
        start_ns: time_or_null(r, "process", "start_ns")?,
        end_ns: time_or_null(r, "process", "end_ns")?,
        exit_code: r.get("exit_code")?,
        in_scope: r.get("in_scope")?,
    })
}

fn read_exec(r: &Cells<'_>) -> Result<Exec> {
    Ok(Exec {
        pid: r.get("pid")?,
        t_ns: time(r, "exec", "t_ns")?,
        path: r.get("path")?,
        argv: list("exec", "argv", &r.get::<String>("argv")?)?,
    })
}

fn read_thread(r: &Cells<'_>) -> Result<Thread> {
    Ok(Thread {
        tid: r.get("tid")?,
        pid: r.get("pid")?,
        comm: r.get("comm")?,
        start_ns: time_or_null(r, "thread", "start_ns")?,
        end_ns: time_or_null(r, "thread", "end_ns")?,
    })
}

fn read_file(r: &Cells<'_>) -> Result<File> {
    Ok(File {
        id: r.get("id")?,
        dev: dev("file", "dev", &r.get::<String>("dev")?)?,
        // Inode numbers use all 64 bits on some filesystems; the writer stores them cast.
        ino: r.get::<i64>("ino")? as u64,
        path: r.get("path")?,
        kind: word("file", "kind", &r.get::<String>("kind")?)?,
        size: unsigned_or_null(r, "file", "size")?,
        mtime_ns: r.get("mtime_ns")?,
    })
}

fn read_extent(r: &Cells<'_>) -> Result<Extent> {
    Ok(Extent {
        file_id: r.get("file_id")?,
        disk: dev("extent", "disk", &r.get::<String>("disk")?)?,
        logical: unsigned(r, "extent", "logical")?,
        physical: unsigned(r, "extent", "physical")?,
        length: unsigned(r, "extent", "length")?,
        flags: r.get("flags")?,
    })
}

fn read_file_open(r: &Cells<'_>) -> Result<FileOpen> {
    Ok(FileOpen {
        t_ns: time(r, "file_open", "t_ns")?,
        pid: r.get("pid")?,
        file_id: r.get("file_id")?,
        exec: r.get("exec")?,
    })
}

fn read_page_fill(r: &Cells<'_>, page_size: u64) -> Result<PageFill> {
    Ok(PageFill {
        t_ns: time(r, "page_fill", "t_ns")?,
        pid: r.get("pid")?,
        tid: r.get("tid")?,
        file_id: r.get("file_id")?,
        index: page_index(r, "page_fill", page_size)?,
        pages: r.get("pages")?,
        origin: r.get::<Option<String>>("origin")?.map(|t| word("page_fill", "origin", &t)).transpose()?,
    })
}

fn read_page_access(r: &Cells<'_>, page_size: u64) -> Result<PageAccess> {
    Ok(PageAccess {
        t_ns: time(r, "page_access", "t_ns")?,
        pid: r.get("pid")?,
        tid: r.get("tid")?,
        file_id: r.get("file_id")?,
        index: page_index(r, "page_access", page_size)?,
        pages: r.get("pages")?,
        kind: word("page_access", "kind", &r.get::<String>("kind")?)?,
    })
}

fn read_page_resident(r: &Cells<'_>, page_size: u64) -> Result<PageResident> {
    Ok(PageResident {
        file_id: r.get("file_id")?,
        index: page_index(r, "page_resident", page_size)?,
        pages: r.get("pages")?,
    })
}

fn read_block_io(r: &Cells<'_>) -> Result<BlockIo> {
    Ok(BlockIo {
        issue_ns: time_or_null(r, "block_io", "issue_ns")?,
        complete_ns: time_or_null(r, "block_io", "complete_ns")?,
        dev: dev("block_io", "dev", &r.get::<String>("dev")?)?,
        sector: sector(r)?,
        bytes: r.get("bytes")?,
        op: word("block_io", "op", &r.get::<String>("op")?)?,
        rwbs: r.get("rwbs")?,
        pid: r.get("pid")?,
        comm: r.get("comm")?,
        file_id: r.get("file_id")?,
        error: r.get("error")?,
    })
}

fn read_sched_interval(r: &Cells<'_>) -> Result<SchedInterval> {
    Ok(SchedInterval {
        tid: r.get("tid")?,
        start_ns: time(r, "sched", "start_ns")?,
        end_ns: time(r, "sched", "end_ns")?,
        state: word("sched", "state", &r.get::<String>("state")?)?,
    })
}

fn read_wakeup(r: &Cells<'_>) -> Result<Wakeup> {
    Ok(Wakeup { t_ns: time(r, "wakeup", "t_ns")?, tid: r.get("tid")?, waker_tid: r.get("waker_tid")? })
}

fn read_mark(r: &Cells<'_>) -> Result<Mark> {
    Ok(Mark {
        t_ns: time(r, "mark", "t_ns")?,
        pid: r.get("pid")?,
        name: r.get("name")?,
        source: word("mark", "source", &r.get::<String>("source")?)?,
        tid: optional_column(r, "tid")?,
    })
}

fn read_cpu_sample(r: &Cells<'_>) -> Result<CpuSample> {
    Ok(CpuSample {
        t_ns: time(r, "cpu_sample", "t_ns")?,
        dt_ns: span(r, "cpu_sample", "dt_ns")?,
        user: fraction(r, "cpu_sample", "user")?,
        system: fraction(r, "cpu_sample", "system")?,
        iowait: fraction(r, "cpu_sample", "iowait")?,
        idle: fraction(r, "cpu_sample", "idle")?,
        running: r.get("running")?,
        blocked: r.get("blocked")?,
    })
}

fn read_disk_sample(r: &Cells<'_>) -> Result<DiskSample> {
    Ok(DiskSample {
        t_ns: time(r, "disk_sample", "t_ns")?,
        dt_ns: span(r, "disk_sample", "dt_ns")?,
        dev: dev("disk_sample", "dev", &r.get::<String>("dev")?)?,
        read_bytes: unsigned(r, "disk_sample", "read_bytes")?,
        read_ios: unsigned(r, "disk_sample", "read_ios")?,
        write_bytes: unsigned(r, "disk_sample", "write_bytes")?,
        write_ios: unsigned(r, "disk_sample", "write_ios")?,
        busy: fraction(r, "disk_sample", "busy")?,
    })
}

fn read_unit(r: &Cells<'_>) -> Result<Unit> {
    Ok(Unit {
        name: r.get("name")?,
        manager: r.get("manager")?,
        activating_ns: time_or_null(r, "unit", "activating_ns")?,
        active_ns: time_or_null(r, "unit", "active_ns")?,
        deactivating_ns: time_or_null(r, "unit", "deactivating_ns")?,
        pid: r.get("pid")?,
        after: list("unit", "after", &r.get::<String>("after")?)?,
    })
}

fn read_process_sample(r: &Cells<'_>) -> Result<ProcessSample> {
    Ok(ProcessSample {
        t_ns: time(r, "process_sample", "t_ns")?,
        dt_ns: span(r, "process_sample", "dt_ns")?,
        pid: r.get("pid")?,
        state: r.get::<String>("state")?.chars().next().unwrap_or('?'),
        cpu_user: fraction(r, "process_sample", "cpu_user")?,
        cpu_system: fraction(r, "process_sample", "cpu_system")?,
        major_faults: unsigned(r, "process_sample", "major_faults")?,
        rss_bytes: unsigned_or_null(r, "process_sample", "rss_bytes")?,
    })
}

fn read_mapping(r: &Cells<'_>) -> Result<Mapping> {
    Ok(Mapping {
        id: r.get("id")?,
        pid: r.get("pid")?,
        t_ns: time(r, "mapping", "t_ns")?,
        start: unsigned(r, "mapping", "start")?,
        end: unsigned(r, "mapping", "end")?,
        file_offset: unsigned(r, "mapping", "file_offset")?,
        path: r.get("path")?,
        build_id: r.get("build_id")?,
    })
}

fn read_frame(r: &Cells<'_>) -> Result<Frame> {
    Ok(Frame {
        id: r.get("id")?,
        mapping_id: r.get("mapping_id")?,
        kernel: r.get("kernel")?,
        address: r.get::<i64>("address")? as u64,
        symbol: r.get("symbol")?,
    })
}

fn read_stack(r: &Cells<'_>) -> Result<Stack> {
    let id: u32 = r.get("id")?;
    let parent_id: Option<u32> = r.get("parent_id")?;
    if parent_id.is_some_and(|p| p >= id) {
        return Err(TraceError::OutOfRange {
            table: "stack",
            column: "parent_id",
            value: parent_id.map(|p| p.to_string()).unwrap_or_default(),
            allowed: "less than the row's id",
        });
    }
    Ok(Stack { id, parent_id, frame_id: r.get("frame_id")? })
}

fn read_stack_sample(r: &Cells<'_>) -> Result<StackSample> {
    Ok(StackSample {
        t_ns: time(r, "stack_sample", "t_ns")?,
        pid: r.get("pid")?,
        tid: r.get("tid")?,
        cpu: r.get("cpu")?,
        stack_id: r.get("stack_id")?,
    })
}

fn read_off_cpu_sample(r: &Cells<'_>) -> Result<OffCpuSample> {
    Ok(OffCpuSample {
        t_ns: time(r, "off_cpu_sample", "t_ns")?,
        pid: r.get("pid")?,
        tid: r.get("tid")?,
        stack_id: r.get("stack_id")?,
    })
}

fn read_mount(r: &Cells<'_>) -> Result<Mount> {
    Ok(Mount {
        dev: dev("mount", "dev", &r.get::<String>("dev")?)?,
        point: r.get("point")?,
        fstype: r.get("fstype")?,
    })
}

fn read_syscall(r: &Cells<'_>) -> Result<Syscall> {
    let enter_ns = time(r, "syscall", "enter_ns")?;
    let exit_ns = time_or_null(r, "syscall", "exit_ns")?;
    if let Some(exit) = exit_ns.filter(|&e| e < enter_ns) {
        return Err(TraceError::BadValue {
            table: "syscall",
            column: "exit_ns",
            value: format!("{exit} (before enter_ns {enter_ns})"),
        });
    }
    Ok(Syscall {
        tid: r.get("tid")?,
        pid: r.get("pid")?,
        enter_ns,
        exit_ns,
        name: r.get("name")?,
        result: r.get("result")?,
        fd: r.get("fd")?,
        file_id: r.get("file_id")?,
        path: r.get("path")?,
    })
}
