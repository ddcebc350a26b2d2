//! The SQL schema of the trace file. docs/trace-format.md documents it for users;
//! the two must change together, and [`FORMAT_VERSION`] with them.

/// `PRAGMA user_version` of the files this code writes; it reads this one and every
/// older one.
///
/// 2 added `mark.tid` (a new last column) and the `ready_pid`, `ready_tid` and `also`
/// meta keys; files of format 1 read with them NULL or empty.
///
/// 3 added the `mapping`, `frame`, `stack` and `stack_sample` tables (CPU samples with stacks)
/// and the `mount`, `syscall`, `off_cpu_sample` and `unit` tables; files of format 2 read with none.
/// The `page_resident` table came later within format 3: it is optional both ways (files
/// without it read with none, and a reader that does not know it ignores it), so the
/// version did not change.
///
/// 4 added `disk.read_ahead_kb` (a new last column); files of format 3 read with it NULL
/// (unknown).
pub const FORMAT_VERSION: i32 = 4;

/// `PRAGMA application_id` of a coldstart trace ("Cold").
pub const APPLICATION_ID: i32 = 0x436f_6c64;

/// Tables, created before any row is written.
pub const CREATE_TABLES: &str = r#"
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value
) WITHOUT ROWID;

CREATE TABLE disk (
    dev         TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    model       TEXT,
    rotational  INTEGER,
    size_bytes  INTEGER,
    read_bytes  INTEGER,
    read_ios    INTEGER,
    write_bytes INTEGER,
    write_ios   INTEGER,
    read_ahead_kb INTEGER
);

CREATE TABLE loss (
    source TEXT NOT NULL,
    what   TEXT NOT NULL,
    count  INTEGER NOT NULL
);

CREATE TABLE note (
    source TEXT NOT NULL,
    text   TEXT NOT NULL
);

CREATE TABLE process (
    pid       INTEGER NOT NULL,
    ppid      INTEGER,
    comm      TEXT NOT NULL,
    exe       TEXT,
    argv      TEXT NOT NULL,
    start_ns  INTEGER,
    end_ns    INTEGER,
    exit_code INTEGER,
    in_scope  INTEGER NOT NULL
);

CREATE TABLE exec (
    pid  INTEGER NOT NULL,
    t_ns INTEGER NOT NULL,
    path TEXT NOT NULL,
    argv TEXT NOT NULL
);

CREATE TABLE thread (
    tid      INTEGER NOT NULL,
    pid      INTEGER NOT NULL,
    comm     TEXT NOT NULL,
    start_ns INTEGER,
    end_ns   INTEGER
);

CREATE TABLE file (
    id       INTEGER PRIMARY KEY,
    dev      TEXT NOT NULL,
    ino      INTEGER NOT NULL,
    path     TEXT,
    kind     TEXT NOT NULL,
    size     INTEGER,
    mtime_ns INTEGER
);

CREATE TABLE extent (
    file_id  INTEGER NOT NULL REFERENCES file(id),
    disk     TEXT NOT NULL,
    logical  INTEGER NOT NULL,
    physical INTEGER NOT NULL,
    length   INTEGER NOT NULL,
    flags    INTEGER NOT NULL
);

CREATE TABLE file_open (
    t_ns    INTEGER NOT NULL,
    pid     INTEGER NOT NULL,
    file_id INTEGER NOT NULL REFERENCES file(id),
    exec    INTEGER NOT NULL
);

CREATE TABLE page_fill (
    t_ns       INTEGER NOT NULL,
    pid        INTEGER NOT NULL,
    tid        INTEGER NOT NULL,
    file_id    INTEGER NOT NULL REFERENCES file(id),
    page_index INTEGER NOT NULL,
    pages      INTEGER NOT NULL,
    origin     TEXT
);

CREATE TABLE page_access (
    t_ns       INTEGER NOT NULL,
    pid        INTEGER NOT NULL,
    tid        INTEGER NOT NULL,
    file_id    INTEGER NOT NULL REFERENCES file(id),
    page_index INTEGER NOT NULL,
    pages      INTEGER NOT NULL,
    kind       TEXT NOT NULL
);

CREATE TABLE page_resident (
    file_id    INTEGER NOT NULL REFERENCES file(id),
    page_index INTEGER NOT NULL,
    pages      INTEGER NOT NULL
);

CREATE TABLE block_io (
    issue_ns    INTEGER,
    complete_ns INTEGER,
    dev         TEXT NOT NULL,
    sector      INTEGER,
    bytes       INTEGER NOT NULL,
    op          TEXT NOT NULL,
    rwbs        TEXT NOT NULL,
    pid         INTEGER NOT NULL,
    comm        TEXT NOT NULL,
    file_id     INTEGER REFERENCES file(id),
    error       INTEGER NOT NULL
);

CREATE TABLE sched (
    tid      INTEGER NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns   INTEGER NOT NULL,
    state    TEXT NOT NULL
);

CREATE TABLE wakeup (
    t_ns      INTEGER NOT NULL,
    tid       INTEGER NOT NULL,
    waker_tid INTEGER
);

CREATE TABLE mark (
    t_ns   INTEGER NOT NULL,
    pid    INTEGER,
    name   TEXT NOT NULL,
    source TEXT NOT NULL,
    tid    INTEGER
);

CREATE TABLE unit (
    name            TEXT NOT NULL,
    manager         TEXT NOT NULL,
    activating_ns   INTEGER,
    active_ns       INTEGER,
    deactivating_ns INTEGER,
    pid             INTEGER,
    after           TEXT NOT NULL
);

CREATE TABLE cpu_sample (
    t_ns    INTEGER NOT NULL,
    dt_ns   INTEGER NOT NULL,
    user    REAL NOT NULL,
    system  REAL NOT NULL,
    iowait  REAL NOT NULL,
    idle    REAL NOT NULL,
    running INTEGER NOT NULL,
    blocked INTEGER NOT NULL
);

CREATE TABLE disk_sample (
    t_ns        INTEGER NOT NULL,
    dt_ns       INTEGER NOT NULL,
    dev         TEXT NOT NULL,
    read_bytes  INTEGER NOT NULL,
    read_ios    INTEGER NOT NULL,
    write_bytes INTEGER NOT NULL,
    write_ios   INTEGER NOT NULL,
    busy        REAL NOT NULL
);

CREATE TABLE process_sample (
    t_ns         INTEGER NOT NULL,
    dt_ns        INTEGER NOT NULL,
    pid          INTEGER NOT NULL,
    state        TEXT NOT NULL,
    cpu_user     REAL NOT NULL,
    cpu_system   REAL NOT NULL,
    major_faults INTEGER NOT NULL,
    rss_bytes    INTEGER
);

CREATE TABLE mapping (
    id          INTEGER PRIMARY KEY,
    pid         INTEGER NOT NULL,
    t_ns        INTEGER NOT NULL,
    start       INTEGER NOT NULL,
    end         INTEGER NOT NULL,
    file_offset INTEGER NOT NULL,
    path        TEXT NOT NULL,
    build_id    TEXT
);

CREATE TABLE frame (
    id         INTEGER PRIMARY KEY,
    mapping_id INTEGER,
    kernel     INTEGER NOT NULL,
    address    INTEGER NOT NULL,
    symbol     TEXT
);

CREATE TABLE stack (
    id        INTEGER PRIMARY KEY,
    parent_id INTEGER,
    frame_id  INTEGER NOT NULL
);

CREATE TABLE stack_sample (
    t_ns     INTEGER NOT NULL,
    pid      INTEGER NOT NULL,
    tid      INTEGER NOT NULL,
    cpu      INTEGER NOT NULL,
    stack_id INTEGER
);

CREATE TABLE off_cpu_sample (
    t_ns     INTEGER NOT NULL,
    pid      INTEGER NOT NULL,
    tid      INTEGER NOT NULL,
    stack_id INTEGER
);

CREATE TABLE mount (
    dev    TEXT NOT NULL,
    point  TEXT NOT NULL,
    fstype TEXT NOT NULL
);

CREATE TABLE syscall (
    tid      INTEGER NOT NULL,
    pid      INTEGER NOT NULL,
    enter_ns INTEGER NOT NULL,
    exit_ns  INTEGER,
    name     TEXT NOT NULL,
    result   INTEGER,
    fd       INTEGER,
    file_id  INTEGER REFERENCES file(id),
    path     TEXT
);
"#;

/// Indexes and views, created after the rows are in (faster than maintaining them row by row).
pub const CREATE_INDEXES_AND_VIEWS: &str = r#"
CREATE INDEX page_fill_by_file ON page_fill(file_id, page_index);
CREATE INDEX page_fill_by_pid ON page_fill(pid, t_ns);
CREATE INDEX page_access_by_file ON page_access(file_id, page_index);
CREATE INDEX block_io_by_file ON block_io(file_id);
CREATE INDEX sched_by_tid ON sched(tid, start_ns);
CREATE INDEX extent_by_file ON extent(file_id, logical);
CREATE INDEX syscall_by_tid ON syscall(tid, enter_ns);

-- Bytes brought into the page cache per file, largest first.
CREATE VIEW file_reads AS
SELECT f.id AS file_id, f.path, f.kind,
       count(*) AS fills,
       sum(p.pages) AS pages,
       sum(p.pages) * (SELECT value FROM meta WHERE key = 'page_size') AS bytes,
       min(p.t_ns) AS first_ns,
       max(p.t_ns) AS last_ns
FROM page_fill p JOIN file f ON f.id = p.file_id
GROUP BY f.id
ORDER BY bytes DESC;

-- Block requests with their latency.
CREATE VIEW block_io_latency AS
SELECT *, complete_ns - issue_ns AS latency_ns FROM block_io;
"#;
