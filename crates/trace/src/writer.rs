//! Writing a trace file: rows streamed into a temporary file, which becomes the
//! trace only when [`TraceWriter::finish`] renames it into place.
//!
//! A writer that is dropped without `finish` removes its temporary file, so a
//! failed write never leaves a half-written trace under the requested name.

use std::fs::OpenOptions;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use rusqlite::types::Value;
use rusqlite::{Connection, params};

use crate::error::{Result, TraceError};
use crate::model::*;
use crate::schema::{APPLICATION_ID, CREATE_INDEXES_AND_VIEWS, CREATE_TABLES, FORMAT_VERSION};
use crate::text::TextEnum;

/// Streams the rows of one trace into a new trace file.
pub struct TraceWriter {
    conn: Option<Connection>,
    temp_path: PathBuf,
    final_path: PathBuf,
}

fn json_list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_else(|_| "[]".to_owned())
}

fn opt_i64(value: Option<u64>) -> Option<i64> {
    value.map(|v| v as i64)
}

impl TraceWriter {
    /// Starts a trace that will be written to `path` (mode 0600) by [`TraceWriter::finish`].
    pub fn create(path: &Path) -> Result<TraceWriter> {
        let file_name =
            path.file_name().ok_or_else(|| TraceError::io(path, std::io::Error::other("not a file name")))?;
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(file_name);
        temp_name.push(format!(".tmp-{}", std::process::id()));
        let temp_path = path.with_file_name(temp_name);
        let _ = std::fs::remove_file(&temp_path);
        OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp_path)
            .map_err(|e| TraceError::io(&temp_path, e))?;
        let conn = Connection::open(&temp_path).map_err(|e| TraceError::sqlite(&temp_path, e))?;
        let setup = format!(
            "PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; PRAGMA foreign_keys = OFF; PRAGMA page_size = 65536; \
             PRAGMA application_id = {APPLICATION_ID}; PRAGMA user_version = {FORMAT_VERSION}; \
             BEGIN; {CREATE_TABLES}"
        );
        let mut writer = TraceWriter { conn: None, temp_path, final_path: path.to_owned() };
        conn.execute_batch(&setup).map_err(|e| writer.error(e))?;
        writer.conn = Some(conn);
        Ok(writer)
    }

    fn error(&self, e: rusqlite::Error) -> TraceError {
        TraceError::sqlite(&self.temp_path, e)
    }

    fn exec(&mut self, sql: &str, params: impl rusqlite::Params) -> Result<()> {
        let conn = self.conn.as_ref().expect("connection lives until finish");
        let result = conn.prepare_cached(sql).and_then(|mut stmt| stmt.execute(params));
        result.map(drop).map_err(|e| self.error(e))
    }

    fn meta_value(&mut self, key: &str, value: Value) -> Result<()> {
        self.exec("INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)", params![key, value])
    }

    /// Writes the `meta` table (call once; a second call replaces the values).
    pub fn meta(&mut self, meta: &Meta) -> Result<()> {
        let text = |s: &str| Value::Text(s.to_owned());
        let opt_text = |s: &Option<String>| s.as_ref().map_or(Value::Null, |s| Value::Text(s.clone()));
        let int = Value::Integer;
        let rows: Vec<(&str, Value)> = vec![
            ("tool", text(&meta.tool)),
            ("source", text(meta.source.as_str())),
            ("command", text(&json_list(&meta.command))),
            ("cwd", opt_text(&meta.cwd)),
            ("user", opt_text(&meta.user)),
            ("scope", text(meta.scope.as_str())),
            ("root_pid", meta.root_pid.map_or(Value::Null, |p| int(p.into()))),
            ("host", text(&meta.host)),
            ("kernel", text(&meta.kernel)),
            ("cpu_model", text(&meta.cpu_model)),
            ("cpu_count", int(meta.cpu_count.into())),
            ("mem_total_bytes", int(meta.mem_total_bytes as i64)),
            ("page_size", int(meta.page_size.into())),
            ("clock", text(&meta.clock)),
            ("start_unix_ns", int(meta.start_unix_ns)),
            ("start_clock_ns", int(meta.start_clock_ns)),
            ("boottime_offset_ns", int(meta.boottime_offset_ns)),
            ("duration_ns", int(meta.duration_ns)),
            ("ready_ns", meta.ready.as_ref().map_or(Value::Null, |r| int(r.t_ns))),
            ("ready_reason", meta.ready.as_ref().map_or(Value::Null, |r| Value::Text(r.reason.to_string()))),
            ("ready_pid", meta.ready.as_ref().and_then(|r| r.pid).map_or(Value::Null, |p| int(p.into()))),
            ("ready_tid", meta.ready.as_ref().and_then(|r| r.tid).map_or(Value::Null, |t| int(t.into()))),
            ("cache", text(meta.cache.as_str())),
            ("eviction", opt_text(&meta.eviction)),
            ("exit_code", meta.exit_code.map_or(Value::Null, |c| int(c.into()))),
            ("partial", int(meta.partial.into())),
            ("sample_hz", meta.sample_hz.map_or(Value::Null, Value::Real)),
            ("stack_sample_hz", meta.stack_sample_hz.map_or(Value::Null, Value::Real)),
            ("also", text(&serde_json::to_string(&meta.also).unwrap_or_else(|_| "[]".to_owned()))),
        ];
        let before = (!meta.before_recording.is_empty())
            .then(|| serde_json::to_string(&meta.before_recording).unwrap_or_else(|_| "[]".to_owned()));
        let rows = rows.into_iter().chain(before.map(|json| ("before_recording", Value::Text(json))));
        for (key, value) in rows {
            self.meta_value(key, value)?;
        }
        Ok(())
    }

    pub fn disk(&mut self, d: &Disk) -> Result<()> {
        self.exec(
            "INSERT OR REPLACE INTO disk VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            params![
                d.dev.to_string(),
                d.name,
                d.model,
                d.rotational,
                opt_i64(d.size_bytes),
                opt_i64(d.read_bytes),
                opt_i64(d.read_ios),
                opt_i64(d.write_bytes),
                opt_i64(d.write_ios),
                d.read_ahead_kb
            ],
        )
    }

    pub fn loss(&mut self, l: &Loss) -> Result<()> {
        self.exec("INSERT INTO loss VALUES (?1, ?2, ?3)", params![l.source.as_str(), l.what, l.count as i64])
    }

    pub fn note(&mut self, n: &Note) -> Result<()> {
        self.exec("INSERT INTO note VALUES (?1, ?2)", params![n.source.as_str(), n.text])
    }

    pub fn process(&mut self, p: &Process) -> Result<()> {
        self.exec(
            "INSERT INTO process VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                p.pid,
                p.ppid,
                p.comm,
                p.exe,
                json_list(&p.argv),
                p.start_ns,
                p.end_ns,
                p.exit_code,
                p.in_scope
            ],
        )
    }

    pub fn exec_event(&mut self, e: &Exec) -> Result<()> {
        self.exec(
            "INSERT INTO exec VALUES (?1, ?2, ?3, ?4)",
            params![e.pid, e.t_ns, e.path, json_list(&e.argv)],
        )
    }

    pub fn thread(&mut self, t: &Thread) -> Result<()> {
        self.exec(
            "INSERT INTO thread VALUES (?1, ?2, ?3, ?4, ?5)",
            params![t.tid, t.pid, t.comm, t.start_ns, t.end_ns],
        )
    }

    pub fn file(&mut self, f: &File) -> Result<()> {
        self.exec(
            "INSERT INTO file VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                f.id,
                f.dev.to_string(),
                f.ino as i64,
                f.path,
                f.kind.as_str(),
                opt_i64(f.size),
                f.mtime_ns
            ],
        )
    }

    pub fn extent(&mut self, e: &Extent) -> Result<()> {
        self.exec(
            "INSERT INTO extent VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                e.file_id,
                e.disk.to_string(),
                e.logical as i64,
                e.physical as i64,
                e.length as i64,
                e.flags
            ],
        )
    }

    pub fn file_open(&mut self, o: &FileOpen) -> Result<()> {
        self.exec("INSERT INTO file_open VALUES (?1, ?2, ?3, ?4)", params![o.t_ns, o.pid, o.file_id, o.exec])
    }

    pub fn page_fill(&mut self, p: &PageFill) -> Result<()> {
        self.exec(
            "INSERT INTO page_fill VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![p.t_ns, p.pid, p.tid, p.file_id, p.index as i64, p.pages, p.origin.map(TextEnum::as_str)],
        )
    }

    pub fn page_access(&mut self, a: &PageAccess) -> Result<()> {
        self.exec(
            "INSERT INTO page_access VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![a.t_ns, a.pid, a.tid, a.file_id, a.index as i64, a.pages, a.kind.as_str()],
        )
    }

    pub fn page_resident(&mut self, r: &PageResident) -> Result<()> {
        self.exec(
            "INSERT INTO page_resident VALUES (?1, ?2, ?3)",
            params![r.file_id, r.index as i64, r.pages],
        )
    }

    pub fn block_io(&mut self, b: &BlockIo) -> Result<()> {
        self.exec(
            "INSERT INTO block_io VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                b.issue_ns,
                b.complete_ns,
                b.dev.to_string(),
                opt_i64(b.sector),
                b.bytes,
                b.op.as_str(),
                b.rwbs,
                b.pid,
                b.comm,
                b.file_id,
                b.error
            ],
        )
    }

    pub fn sched(&mut self, s: &SchedInterval) -> Result<()> {
        self.exec(
            "INSERT INTO sched VALUES (?1, ?2, ?3, ?4)",
            params![s.tid, s.start_ns, s.end_ns, s.state.as_str()],
        )
    }

    pub fn wakeup(&mut self, w: &Wakeup) -> Result<()> {
        self.exec("INSERT INTO wakeup VALUES (?1, ?2, ?3)", params![w.t_ns, w.tid, w.waker_tid])
    }

    pub fn mark(&mut self, m: &Mark) -> Result<()> {
        self.exec(
            "INSERT INTO mark VALUES (?1, ?2, ?3, ?4, ?5)",
            params![m.t_ns, m.pid, m.name, m.source.as_str(), m.tid],
        )
    }

    pub fn unit(&mut self, u: &Unit) -> Result<()> {
        self.exec(
            "INSERT INTO unit VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                u.name,
                u.manager,
                u.activating_ns,
                u.active_ns,
                u.deactivating_ns,
                u.pid,
                json_list(&u.after)
            ],
        )
    }

    pub fn cpu_sample(&mut self, s: &CpuSample) -> Result<()> {
        self.exec(
            "INSERT INTO cpu_sample VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![s.t_ns, s.dt_ns, s.user, s.system, s.iowait, s.idle, s.running, s.blocked],
        )
    }

    pub fn disk_sample(&mut self, s: &DiskSample) -> Result<()> {
        self.exec(
            "INSERT INTO disk_sample VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                s.t_ns,
                s.dt_ns,
                s.dev.to_string(),
                s.read_bytes as i64,
                s.read_ios as i64,
                s.write_bytes as i64,
                s.write_ios as i64,
                s.busy
            ],
        )
    }

    pub fn process_sample(&mut self, s: &ProcessSample) -> Result<()> {
        self.exec(
            "INSERT INTO process_sample VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                s.t_ns,
                s.dt_ns,
                s.pid,
                s.state.to_string(),
                s.cpu_user,
                s.cpu_system,
                s.major_faults as i64,
                opt_i64(s.rss_bytes)
            ],
        )
    }

    pub fn mapping(&mut self, m: &Mapping) -> Result<()> {
        self.exec(
            "INSERT INTO mapping VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                m.id,
                m.pid,
                m.t_ns,
                m.start as i64,
                m.end as i64,
                m.file_offset as i64,
                m.path,
                m.build_id
            ],
        )
    }

    /// A frame; its address is stored as the bits of a signed integer (kernel addresses read negative).
    pub fn frame(&mut self, f: &Frame) -> Result<()> {
        self.exec(
            "INSERT INTO frame VALUES (?1, ?2, ?3, ?4, ?5)",
            params![f.id, f.mapping_id, f.kernel, f.address as i64, f.symbol],
        )
    }

    pub fn stack(&mut self, s: &Stack) -> Result<()> {
        self.exec("INSERT INTO stack VALUES (?1, ?2, ?3)", params![s.id, s.parent_id, s.frame_id])
    }

    pub fn stack_sample(&mut self, s: &StackSample) -> Result<()> {
        self.exec(
            "INSERT INTO stack_sample VALUES (?1, ?2, ?3, ?4, ?5)",
            params![s.t_ns, s.pid, s.tid, s.cpu, s.stack_id],
        )
    }

    pub fn off_cpu_sample(&mut self, s: &OffCpuSample) -> Result<()> {
        self.exec(
            "INSERT INTO off_cpu_sample VALUES (?1, ?2, ?3, ?4)",
            params![s.t_ns, s.pid, s.tid, s.stack_id],
        )
    }

    pub fn mount(&mut self, m: &Mount) -> Result<()> {
        self.exec("INSERT INTO mount VALUES (?1, ?2, ?3)", params![m.dev.to_string(), m.point, m.fstype])
    }

    pub fn syscall(&mut self, s: &Syscall) -> Result<()> {
        self.exec(
            "INSERT INTO syscall VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![s.tid, s.pid, s.enter_ns, s.exit_ns, s.name, s.result, s.fd, s.file_id, s.path],
        )
    }

    /// Writes every table of `trace`.
    pub fn all(&mut self, trace: &Trace) -> Result<()> {
        self.meta(&trace.meta)?;
        trace.disks.iter().try_for_each(|x| self.disk(x))?;
        trace.losses.iter().try_for_each(|x| self.loss(x))?;
        trace.notes.iter().try_for_each(|x| self.note(x))?;
        trace.processes.iter().try_for_each(|x| self.process(x))?;
        trace.execs.iter().try_for_each(|x| self.exec_event(x))?;
        trace.threads.iter().try_for_each(|x| self.thread(x))?;
        trace.files.iter().try_for_each(|x| self.file(x))?;
        trace.extents.iter().try_for_each(|x| self.extent(x))?;
        trace.file_opens.iter().try_for_each(|x| self.file_open(x))?;
        trace.page_fills.iter().try_for_each(|x| self.page_fill(x))?;
        trace.page_accesses.iter().try_for_each(|x| self.page_access(x))?;
        trace.page_residents.iter().try_for_each(|x| self.page_resident(x))?;
        trace.block_ios.iter().try_for_each(|x| self.block_io(x))?;
        trace.sched.iter().try_for_each(|x| self.sched(x))?;
        trace.wakeups.iter().try_for_each(|x| self.wakeup(x))?;
        trace.marks.iter().try_for_each(|x| self.mark(x))?;
        trace.units.iter().try_for_each(|x| self.unit(x))?;
        trace.cpu_samples.iter().try_for_each(|x| self.cpu_sample(x))?;
        trace.disk_samples.iter().try_for_each(|x| self.disk_sample(x))?;
        trace.process_samples.iter().try_for_each(|x| self.process_sample(x))?;
        trace.mappings.iter().try_for_each(|x| self.mapping(x))?;
        trace.frames.iter().try_for_each(|x| self.frame(x))?;
        trace.stacks.iter().try_for_each(|x| self.stack(x))?;
        trace.stack_samples.iter().try_for_each(|x| self.stack_sample(x))?;
        trace.off_cpu_samples.iter().try_for_each(|x| self.off_cpu_sample(x))?;
        trace.mounts.iter().try_for_each(|x| self.mount(x))?;
        trace.syscalls.iter().try_for_each(|x| self.syscall(x))
    }

    /// Builds the indexes, commits, syncs and renames the file into place.
    pub fn finish(mut self) -> Result<()> {
        let conn = self.conn.take().expect("connection lives until finish");
        let sql = format!("{CREATE_INDEXES_AND_VIEWS} COMMIT;");
        if let Err(e) = conn.execute_batch(&sql) {
            return Err(self.error(e));
        }
        if let Err((_, e)) = conn.close() {
            return Err(self.error(e));
        }
        let sync = |path: &Path| std::fs::File::open(path).and_then(|f| f.sync_all());
        sync(&self.temp_path).map_err(|e| TraceError::io(&self.temp_path, e))?;
        std::fs::rename(&self.temp_path, &self.final_path)
            .map_err(|e| TraceError::io(&self.final_path, e))?;
        if let Some(dir) = self.final_path.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = sync(dir);
        }
        Ok(())
    }

    /// The temporary file the rows go to until `finish`.
    pub fn temp_path(&self) -> &Path {
        &self.temp_path
    }
}

impl Drop for TraceWriter {
    fn drop(&mut self) {
        if self.conn.take().is_some() || self.temp_path.exists() {
            let _ = std::fs::remove_file(&self.temp_path);
        }
    }
}

impl Trace {
    /// Writes the whole trace to `path`, atomically, mode 0600.
    pub fn write(&self, path: &Path) -> Result<()> {
        let mut writer = TraceWriter::create(path)?;
        writer.all(self)?;
        writer.finish()
    }
}
