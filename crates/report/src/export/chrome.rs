//! Trace Event Format JSON (the format of chrome://tracing, which the Perfetto UI
//! imports): a JSON object whose `traceEvents` array holds one event per line.
//!
//! What becomes what:
//! - every process and thread of the trace: `M` metadata events naming them;
//! - scheduler intervals: `X` slices on their thread named after the state
//!   (`running`, `runnable`, `I/O wait`, `sleeping`, `stopped`); without scheduler
//!   data (bootchart2 imports), each process sample is a slice of its process's state
//!   and its CPU use a `C` counter;
//! - forks, execs and exits, and page fills: `i` instant events on their thread;
//! - block requests, as the analysis counts them (a request issued again while in
//!   flight appears once): `X` slices from issue to completion on a track per disk,
//!   spread over "queue slot" threads so that requests in flight together do not
//!   overlap on one thread, with a `C` counter of requests in flight;
//! - CPU and disk samples: `C` counters of a "machine" track;
//! - the analysis's phases and critical path: `X` slices of a "coldstart analysis" track;
//! - marks and the readiness point: global `i` instant events;
//! - systemd units (a boot): a "systemd units" track, each unit's start an `X` slice from
//!   activating to active (spread over lanes so that starts at the same time do not
//!   overlap), with its split in `args`, and a unit that became active at once an `i` instant;
//! - CPU stack samples: `i` instant events on their thread named after the innermost
//!   frame, with the whole stack (outermost first) in `args.stack`.
//!
//! Times (`ts`, `dur`) are microseconds since the trace's t = 0, with nanosecond
//! decimals, shifted by `otherData.t0_us` when the trace has events before its t = 0
//! (viewers drop negative timestamps), so `ts - t0_us` is the trace's time. The pseudo-processes for the machine, the analysis and the disks have
//! pids above Linux's largest (2^22), so they never collide with a traced process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::{self, Write};

use coldstart_analyze::units::base_name;
use coldstart_analyze::{Analysis, PhaseKind, SegmentKind};
use coldstart_trace::{BlockIo, Dev, Nanos, TextEnum, ThreadState, Trace};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The "machine" pseudo-process: CPU samples.
pub const MACHINE_PID: i64 = 5_000_000;
/// The "coldstart analysis" pseudo-process: phases, critical path, marks.
pub const ANALYSIS_PID: i64 = 5_000_001;
/// The "systemd units" pseudo-process: unit starts.
pub const UNITS_PID: i64 = 5_000_002;
/// Its lane of units that became active at once; lanes of starts follow.
const UNITS_INSTANT_TID: i64 = 0;
/// Disk `k` (in the trace's order) is pseudo-process `DISK_PID + k`.
pub const DISK_PID: i64 = 5_000_100;

const PHASES_TID: i64 = 1;
const PATH_TID: i64 = 2;
const MARKS_TID: i64 = 3;

/// One event of the `traceEvents` array.
#[derive(Debug, Serialize)]
struct Event {
    name: String,
    #[serde(skip_serializing_if = "str::is_empty")]
    cat: &'static str,
    ph: &'static str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: i64,
    tid: i64,
    /// Scope of an instant event: `g` global, `p` process, `t` thread.
    #[serde(skip_serializing_if = "Option::is_none")]
    s: Option<&'static str>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    args: Map<String, Value>,
}

fn us(ns: Nanos) -> f64 {
    ns as f64 / 1000.0
}

fn args(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Collects events and remembers every (pid, tid) they use, to name them all.
struct Events {
    events: Vec<Event>,
    used: BTreeSet<(i64, i64)>,
}

impl Events {
    fn push(&mut self, e: Event) {
        self.used.insert((e.pid, e.tid));
        self.events.push(e);
    }

    /// A complete (`X`) event on thread `on` = (pid, tid) over `span` = (start, end).
    fn slice(&mut self, on: (i64, i64), cat: &'static str, name: String, span: (Nanos, Nanos), a: Value) {
        let (start, end) = span;
        let dur = Some(us(end.max(start) - start));
        let (pid, tid) = on;
        self.push(Event { name, cat, ph: "X", ts: us(start), dur, pid, tid, s: None, args: args(a) });
    }

    /// An instant (`i`) event on thread `on` = (pid, tid), of `scope` `g`, `p` or `t`.
    fn instant(
        &mut self,
        on: (i64, i64),
        cat: &'static str,
        name: String,
        scope: &'static str,
        t: Nanos,
        a: Value,
    ) {
        let (pid, tid) = on;
        self.push(Event {
            name,
            cat,
            ph: "i",
            ts: us(t),
            dur: None,
            pid,
            tid,
            s: Some(scope),
            args: args(a),
        });
    }

    fn counter(&mut self, name: String, pid: i64, t: Nanos, a: Value) {
        self.push(Event {
            name,
            cat: "counter",
            ph: "C",
            ts: us(t),
            dur: None,
            pid,
            tid: 0,
            s: None,
            args: args(a),
        });
    }

    fn metadata(&mut self, name: &'static str, pid: i64, tid: i64, a: Value) {
        self.events.push(Event {
            name: name.to_owned(),
            cat: "",
            ph: "M",
            ts: 0.0,
            dur: None,
            pid,
            tid,
            s: None,
            args: args(a),
        });
    }
}

fn state_name(state: ThreadState) -> &'static str {
    match state {
        ThreadState::Running => "running",
        ThreadState::Runnable => "runnable",
        ThreadState::IoWait => "I/O wait",
        ThreadState::Sleeping => "sleeping",
        ThreadState::Stopped => "stopped",
    }
}

fn sample_state_name(state: char) -> String {
    match state {
        'R' => "running".to_owned(),
        'D' => "I/O wait".to_owned(),
        'S' | 'I' => "sleeping".to_owned(),
        'T' | 't' => "stopped".to_owned(),
        'Z' => "zombie".to_owned(),
        other => format!("state {other}"),
    }
}

/// Writes the trace and its analysis as Trace Event Format JSON.
pub fn write(trace: &Trace, analysis: &Analysis, out: &mut dyn Write) -> io::Result<()> {
    let mut ev = Events { events: Vec::new(), used: BTreeSet::new() };
    let pid_of_tid: HashMap<i32, i32> = analysis.threads.iter().map(|t| (t.tid, t.pid)).collect();
    let tid_pid = |tid: i32| i64::from(*pid_of_tid.get(&tid).unwrap_or(&tid));
    let path_of: HashMap<u32, &str> =
        trace.files.iter().filter_map(|f| Some((f.id, f.path.as_deref()?))).collect();

    processes(&mut ev, trace);
    if trace.sched.is_empty() {
        process_samples(&mut ev, trace);
    }
    let off_cpu = coldstart_analyze::OffCpuIndex::new(trace);
    for s in &trace.sched {
        let waited_in = match s.state {
            ThreadState::Sleeping | ThreadState::IoWait => off_cpu.during(s.tid, s.start_ns, s.end_ns),
            _ => None,
        };
        let (name, a) = match waited_in {
            Some((k, _)) => {
                let call = k.syscall.as_deref().map(|c| format!(" ({c})")).unwrap_or_default();
                let name = format!("{}: {}{call}", state_name(s.state), k.function);
                (name, json!({ "kernel_function": k.function, "syscall": k.syscall }))
            }
            None => (state_name(s.state).to_owned(), Value::Null),
        };
        ev.slice((tid_pid(s.tid), i64::from(s.tid)), "sched", name, (s.start_ns, s.end_ns), a);
    }
    for f in &trace.page_fills {
        let path = path_of.get(&f.file_id).copied();
        let a = json!({
            "file": path.unwrap_or(""),
            "file_id": f.file_id,
            "page_index": f.index,
            "pages": f.pages,
            "bytes": u64::from(f.pages) * u64::from(trace.meta.page_size),
            "origin": f.origin.map_or("unknown", |o| o.as_str()),
        });
        let name = format!(
            "fill {}",
            path.map_or_else(|| format!("file {}", f.file_id), |p| base_name(p).to_owned())
        );
        ev.instant((i64::from(f.pid), i64::from(f.tid)), "page_cache", name, "t", f.t_ns, a);
    }
    stack_samples(&mut ev, trace);
    syscalls(&mut ev, trace, &path_of);
    machine(&mut ev, trace);
    disks(&mut ev, trace, analysis, &path_of);
    analysis_tracks(&mut ev, analysis);
    unit_tracks(&mut ev, analysis);

    name_everything(&mut ev, trace, analysis);
    let mut events = ev.events;
    // Viewers drop events before 0 (Perfetto does), and a recording has some: the command's
    // fork before the recorder released it, samples whose interval began before t = 0. Shift
    // everything by the same amount so none is lost; otherData says where t = 0 went.
    let earliest = events.iter().filter(|e| e.ph != "M").map(|e| e.ts).fold(0.0_f64, f64::min);
    let t0_us = -earliest;
    if t0_us > 0.0 {
        for e in events.iter_mut().filter(|e| e.ph != "M") {
            e.ts += t0_us;
        }
    }
    // Metadata first, then by time; ties keep the order of construction.
    events.sort_by(|a, b| (a.ph != "M").cmp(&(b.ph != "M")).then(a.ts.total_cmp(&b.ts)));

    let mut out = io::BufWriter::new(out);
    let other = json!({
        "tool": format!("coldstart {}", env!("CARGO_PKG_VERSION")),
        "trace_tool": trace.meta.tool,
        "source": trace.meta.source.as_str(),
        "command": crate::command_line(&trace.meta.command),
        "host": trace.meta.host,
        "kernel": trace.meta.kernel,
        "cache": trace.meta.cache.as_str(),
        "start_unix_ns": trace.meta.start_unix_ns.to_string(),
        "t0_us": t0_us,
    });
    write!(out, "{{\"displayTimeUnit\":\"ms\",\"otherData\":")?;
    serde_json::to_writer(&mut out, &other)?;
    write!(out, ",\"traceEvents\":[")?;
    for (k, e) in events.iter().enumerate() {
        out.write_all(if k == 0 { b"\n" } else { b",\n" })?;
        serde_json::to_writer(&mut out, e)?;
    }
    writeln!(out, "\n]}}")?;
    out.flush()
}

fn stack_samples(ev: &mut Events, trace: &Trace) {
    let index = coldstart_trace::StackIndex::new(trace);
    let mut names: HashMap<u32, String> = HashMap::new();
    for s in &trace.stack_samples {
        let mut stack: Vec<String> = index
            .frames(s.stack_id)
            .into_iter()
            .map(|f| names.entry(f.id).or_insert_with(|| index.name(f)).clone())
            .collect();
        let name = stack.first().cloned().unwrap_or_else(|| "no stack".to_owned());
        stack.reverse();
        let a = json!({ "cpu": s.cpu, "stack": stack });
        ev.instant((i64::from(s.pid), i64::from(s.tid)), "cpu_sample", name, "t", s.t_ns, a);
    }
}

/// Each thread's system calls go on a track of their own next to it (a call spans several
/// scheduler slices, which would not nest on the thread's own track): this offset on the
/// thread id, named `<thread> syscalls`.
const SYSCALL_TRACK: i64 = 1 << 32;

fn syscalls(ev: &mut Events, trace: &Trace, path_of: &HashMap<u32, &str>) {
    for c in &trace.syscalls {
        let path = c.path.as_deref().or_else(|| c.file_id.and_then(|id| path_of.get(&id).copied()));
        let end = c.exit_ns.unwrap_or(trace.meta.duration_ns);
        let name = match path {
            Some(p) => format!("{} {}", c.name, base_name(p)),
            None => c.name.clone(),
        };
        let a = json!({ "path": path, "fd": c.fd, "result": c.result, "returned": c.exit_ns.is_some() });
        ev.slice((i64::from(c.pid), SYSCALL_TRACK + i64::from(c.tid)), "syscall", name, (c.enter_ns, end), a);
    }
}

fn processes(ev: &mut Events, trace: &Trace) {
    for p in &trace.processes {
        let pid = i64::from(p.pid);
        if let Some(t) = p.start_ns {
            ev.instant((pid, pid), "process", "fork".to_owned(), "t", t, json!({ "ppid": p.ppid }));
        }
        if let Some(t) = p.end_ns {
            ev.instant((pid, pid), "process", "exit".to_owned(), "t", t, json!({ "exit_code": p.exit_code }));
        }
    }
    for e in &trace.execs {
        let pid = i64::from(e.pid);
        let a = json!({ "path": e.path, "argv": e.argv.join(" ") });
        ev.instant((pid, pid), "process", format!("exec {}", base_name(&e.path)), "t", e.t_ns, a);
    }
}

/// Without scheduler data: each process sample as a slice of the state it was in,
/// and its CPU use as a counter.
fn process_samples(ev: &mut Events, trace: &Trace) {
    for s in &trace.process_samples {
        let pid = i64::from(s.pid);
        let start = s.t_ns - s.dt_ns.max(0);
        let a = json!({ "cpu_user": s.cpu_user, "cpu_system": s.cpu_system, "major_faults": s.major_faults });
        ev.slice((pid, pid), "sample", sample_state_name(s.state), (start, s.t_ns), a);
        let cpu = json!({ "user": 100.0 * s.cpu_user, "system": 100.0 * s.cpu_system });
        ev.counter("CPU %".to_owned(), pid, start, cpu);
    }
}

fn machine(ev: &mut Events, trace: &Trace) {
    for s in &trace.cpu_samples {
        let a = json!({ "user": 100.0 * s.user, "system": 100.0 * s.system, "iowait": 100.0 * s.iowait });
        ev.counter("CPU %".to_owned(), MACHINE_PID, s.t_ns - s.dt_ns.max(0), a);
        let tasks = json!({ "running": s.running, "blocked": s.blocked });
        ev.counter("tasks".to_owned(), MACHINE_PID, s.t_ns - s.dt_ns.max(0), tasks);
    }
}

/// The disks in track order: the trace's, then any other the analysis or a request names.
fn disk_devs(trace: &Trace, analysis: &Analysis) -> Vec<(Dev, String)> {
    let mut devs: Vec<(Dev, String)> = trace.disks.iter().map(|d| (d.dev, d.name.clone())).collect();
    let more = analysis.disks.iter().map(|d| (d.dev, d.name.clone()));
    for (dev, name) in more.chain(trace.block_ios.iter().map(|r| (r.dev, r.dev.to_string()))) {
        if !devs.iter().any(|d| d.0 == dev) {
            devs.push((dev, name));
        }
    }
    devs
}

/// Each disk's requests as the analysis counts them (a request issued again while in
/// flight appears once), as slices spread over queue slots, with their flag string and
/// issuer from the trace; requests without a sector (flushes) as instants.
fn disks(ev: &mut Events, trace: &Trace, analysis: &Analysis, path_of: &HashMap<u32, &str>) {
    let recorded: HashMap<(Dev, Option<u64>, Option<Nanos>), &BlockIo> =
        trace.block_ios.iter().map(|r| ((r.dev, r.sector, r.issue_ns), r)).collect();
    let mib = |bytes: u64, dt: Nanos| bytes as f64 / 1_048_576.0 * 1e9 / dt.max(1) as f64;
    for (k, (dev, _)) in disk_devs(trace, analysis).iter().enumerate() {
        let pid = DISK_PID + k as i64;
        let requests = analysis.disks.iter().filter(|d| d.dev == *dev).flat_map(|d| &d.requests);
        let mut slots: Vec<Nanos> = Vec::new();
        let mut changes: BTreeMap<Nanos, (i64, i64)> = BTreeMap::new();
        for r in requests {
            let Some(issue) = r.issue_ns else { continue };
            let raw = recorded.get(&(*dev, Some(r.sector), r.issue_ns));
            let file = r.file.and_then(|id| path_of.get(&id).copied());
            let what = match (r.file, file) {
                (_, Some(path)) => base_name(path).to_owned(),
                (Some(id), None) => format!("file {id}"),
                (None, None) if r.metadata => "filesystem metadata".to_owned(),
                (None, None) => "no file".to_owned(),
            };
            let a = json!({
                "sector": r.sector,
                "bytes": r.bytes,
                "rwbs": raw.map(|b| b.rwbs.as_str()),
                "issued_by_pid": r.pid,
                "issued_by": raw.map(|b| b.comm.as_str()),
                "file": file.unwrap_or(""),
                "latency_us": r.complete_ns.map(|c| us(c - issue)),
                "distance_sectors": r.distance_sectors,
                "far_seek": r.far,
                "completed": r.complete_ns.is_some(),
            });
            let end = r.complete_ns.unwrap_or(trace.meta.duration_ns).max(issue);
            let slot = match slots.iter().position(|&free| free <= issue) {
                Some(s) => s,
                None => {
                    slots.push(issue);
                    slots.len() - 1
                }
            };
            slots[slot] = end;
            ev.slice((pid, slot as i64 + 1), "block", format!("{} {what}", r.op.as_str()), (issue, end), a);
            changes.entry(issue).or_default().0 += 1;
            if r.complete_ns.is_some() {
                changes.entry(end).or_default().1 += 1;
            }
        }
        for r in trace.block_ios.iter().filter(|r| r.dev == *dev && r.sector.is_none()) {
            let Some(t) = r.complete_ns.or(r.issue_ns) else { continue };
            let a = json!({ "rwbs": r.rwbs, "issued_by_pid": r.pid, "issued_by": r.comm });
            ev.instant((pid, 1), "block", r.op.as_str().to_owned(), "t", t, a);
        }
        let mut in_flight = 0i64;
        for (t, (issued, completed)) in changes {
            in_flight += issued - completed;
            ev.counter("requests in flight".to_owned(), pid, t, json!({ "requests": in_flight }));
        }
        for s in trace.disk_samples.iter().filter(|s| s.dev == *dev) {
            let a = json!({ "read": mib(s.read_bytes, s.dt_ns), "write": mib(s.write_bytes, s.dt_ns) });
            ev.counter("MiB/s".to_owned(), pid, s.t_ns - s.dt_ns.max(0), a);
        }
    }
}

fn analysis_tracks(ev: &mut Events, a: &Analysis) {
    for p in &a.phases {
        let kind = match p.kind {
            PhaseKind::Read => "read",
            PhaseKind::Cpu => "cpu",
            PhaseKind::Wait => "wait",
        };
        let args =
            json!({ "kind": kind, "files": p.files, "bytes": p.bytes, "reads": p.reads, "seeks": p.seeks });
        ev.slice((ANALYSIS_PID, PHASES_TID), "phase", p.name.clone(), (p.start_ns, p.end_ns), args);
    }
    if let Some(path) = &a.critical_path {
        for s in &path.segments {
            let kind = match s.kind {
                SegmentKind::Cpu => "running",
                SegmentKind::CpuWait => "waiting for a CPU",
                SegmentKind::IoWait => "I/O wait",
                SegmentKind::Sleep => "sleep",
                SegmentKind::WaitUntraced => "waiting on an untraced thread",
                SegmentKind::NoWakeup => "asleep, no wakeup recorded",
                SegmentKind::Untraced => "untraced",
            };
            let files: Vec<&str> = s.files.iter().map(|f| a.file_name(f.file)).collect();
            let name = match (files.first(), &s.waited_in) {
                (Some(f), _) => format!("{kind}: {}", base_name(f)),
                (None, Some(w)) => format!("{kind} in {w} ({})", a.comm(s.pid)),
                (None, None) => format!("{kind} ({})", a.comm(s.pid)),
            };
            let args = json!({
                "pid": s.pid, "tid": s.tid, "comm": a.comm(s.pid), "files": files, "waker": s.waker_process,
                "waited_in": s.waited_in.as_ref().map(ToString::to_string),
            });
            ev.slice((ANALYSIS_PID, PATH_TID), "critical_path", name, (s.start_ns, s.end_ns), args);
        }
    }
    for m in &a.marks {
        let args = json!({ "pid": m.pid, "source": m.source.as_str() });
        ev.instant((ANALYSIS_PID, MARKS_TID), "mark", m.name.clone(), "g", m.t_ns, args);
    }
    if let Some(r) = &a.overview.ready {
        let args = json!({ "time_to_ready_us": us(r.time_to_ready_ns), "pid": r.pid, "tid": r.tid });
        ev.instant((ANALYSIS_PID, MARKS_TID), "mark", format!("ready ({})", r.reason), "g", r.t_ns, args);
    }
}

fn unit_tracks(ev: &mut Events, a: &Analysis) {
    let mut by_start: Vec<&coldstart_analyze::UnitTime> = a.units.iter().collect();
    by_start.sort_by(|x, y| x.activating_ns.cmp(&y.activating_ns).then(x.name.cmp(&y.name)));
    let mut lane_free_at: Vec<Nanos> = Vec::new();
    for u in by_start {
        let waits: Vec<Value> =
            u.unit_waits.iter().map(|w| json!({ "unit": w.unit, "us": us(w.ns) })).collect();
        let files: Vec<Value> =
            u.io_files.iter().map(|f| json!({ "file": a.file_name(f.file), "us": us(f.ns) })).collect();
        let args = json!({
            "manager": u.manager, "pids": u.pids, "after": u.after, "cpu_us": us(u.cpu_ns),
            "io_wait_us": us(u.io_wait_ns), "io_files": files, "unit_waits": waits,
            "manager_wait_us": us(u.manager_wait_ns), "other_us": us(u.other_ns),
        });
        if u.took_ns == 0 {
            ev.instant(
                (UNITS_PID, UNITS_INSTANT_TID),
                "unit",
                format!("{} active", u.name),
                "t",
                u.active_ns,
                args,
            );
            continue;
        }
        let lane = match lane_free_at.iter().position(|&free| free <= u.activating_ns) {
            Some(lane) => lane,
            None => {
                lane_free_at.push(Nanos::MIN);
                lane_free_at.len() - 1
            }
        };
        lane_free_at[lane] = u.active_ns;
        ev.slice((UNITS_PID, 1 + lane as i64), "unit", u.name.clone(), (u.activating_ns, u.active_ns), args);
    }
}

/// `M` events naming every process and thread an event uses, and ordering the tracks.
fn name_everything(ev: &mut Events, trace: &Trace, a: &Analysis) {
    let mut process_names: BTreeMap<i64, String> = BTreeMap::new();
    let mut sort_index: BTreeMap<i64, i64> = BTreeMap::new();
    process_names.insert(MACHINE_PID, "machine (samples)".to_owned());
    process_names.insert(ANALYSIS_PID, "coldstart analysis".to_owned());
    process_names.insert(UNITS_PID, "systemd units".to_owned());
    sort_index.insert(UNITS_PID, 0);
    sort_index.insert(ANALYSIS_PID, 0);
    sort_index.insert(MACHINE_PID, 1);
    for (k, (dev, name)) in disk_devs(trace, a).iter().enumerate() {
        process_names.insert(DISK_PID + k as i64, format!("disk {name} ({dev})"));
        sort_index.insert(DISK_PID + k as i64, 2 + k as i64);
    }
    for (k, p) in a.processes.iter().enumerate() {
        process_names.insert(
            i64::from(p.pid),
            if p.comm.is_empty() { format!("pid {}", p.pid) } else { p.comm.clone() },
        );
        sort_index.entry(i64::from(p.pid)).or_insert(100 + k as i64);
    }
    let mut thread_names: BTreeMap<(i64, i64), String> = BTreeMap::new();
    for t in &a.threads {
        thread_names.insert((i64::from(t.pid), i64::from(t.tid)), t.comm.clone());
    }
    thread_names.insert((ANALYSIS_PID, PHASES_TID), "phases".to_owned());
    thread_names.insert((ANALYSIS_PID, PATH_TID), "critical path".to_owned());
    thread_names.insert((ANALYSIS_PID, MARKS_TID), "marks".to_owned());
    thread_names.insert((UNITS_PID, UNITS_INSTANT_TID), "became active".to_owned());
    let used: Vec<(i64, i64)> = ev.used.iter().copied().collect();
    let pids: BTreeSet<i64> = used.iter().map(|u| u.0).collect();
    for pid in pids {
        let name = process_names.get(&pid).cloned().unwrap_or_else(|| format!("pid {pid}"));
        ev.metadata("process_name", pid, 0, json!({ "name": name }));
        if let Some(&index) = sort_index.get(&pid) {
            ev.metadata("process_sort_index", pid, 0, json!({ "sort_index": index }));
        }
    }
    for (pid, tid) in used {
        let name = match thread_names.get(&(pid, tid)) {
            Some(name) if !name.is_empty() => name.clone(),
            _ if tid >= SYSCALL_TRACK => {
                let thread = thread_names.get(&(pid, tid - SYSCALL_TRACK)).filter(|n| !n.is_empty());
                format!(
                    "{} syscalls",
                    thread.cloned().unwrap_or_else(|| format!("tid {}", tid - SYSCALL_TRACK))
                )
            }
            _ if pid == UNITS_PID => format!("starts {tid}"),
            _ if pid >= DISK_PID && tid == 0 => "counters".to_owned(),
            _ if pid >= DISK_PID => format!("queue slot {tid}"),
            _ if tid == 0 => "counters".to_owned(),
            _ => process_names.get(&pid).cloned().unwrap_or_else(|| format!("tid {tid}")),
        };
        ev.metadata("thread_name", pid, tid, json!({ "name": name }));
    }
}
