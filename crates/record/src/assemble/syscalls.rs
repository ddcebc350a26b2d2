//! System calls: `raw_syscalls:sys_enter`/`sys_exit` paired per thread, the names the
//! eBPF program copied joined to the enters of path calls, and each call placed in the
//! file table. The file of a call on an fd comes from the call that opened it: from the
//! pages its reads brought in or asked for (the `filemap` events of the same thread
//! inside the read, which also name files fanotify never sees, on FUSE), or from the
//! fanotify open of the same process just after it (same base name). The path each file
//! was opened by is proposed for files that nothing else names (`FileTable::name_by_opens`,
//! after the walk, checks that it opens the same inode on the host).

use std::collections::{HashMap, VecDeque};

use coldstart_trace::{Dev, Nanos, Syscall};

use crate::assemble::files::FileTable;
use crate::assemble::procs::ProcTree;
use crate::capture::bpf::PathRecord;
use crate::capture::fanotify::OpenRecord;
use crate::ftrace::events::{Event, Timed};
use crate::syscall_table::{FIRST_READS, LONG_WAIT_NS, Shape, Traced, by_nr, is_at_fdcwd};

/// `MAP_ANONYMOUS` on Linux.
const MAP_ANONYMOUS: u64 = 0x20;
/// `AT_EMPTY_PATH`: `newfstatat`/`statx` of the fd itself.
const AT_EMPTY_PATH: u64 = 0x1000;
/// How long after an open returns its fanotify event may be read (the listener batches).
const FANOTIFY_LAG_NS: i64 = 2_000_000_000;
/// How far before the tracefs enter the eBPF program's clock reading may lie.
const BPF_SKEW_NS: u64 = 100_000;

/// An entered call, waiting for its exit.
struct Pending {
    enter: u64,
    nr: i64,
    args: [u64; 6],
    /// The first file whose pages the thread read inside the call (kernel `s_dev`, ino).
    pages_of: Option<(u32, u64)>,
}

/// A call with its enter and (if seen) exit, on the trace clock's raw timestamps.
struct Call {
    tid: i32,
    call: &'static Traced,
    enter: u64,
    exit: Option<u64>,
    args: [u64; 6],
    ret: Option<i64>,
    pages_of: Option<(u32, u64)>,
}

/// One open of a file, shared by every call on the fd it returned.
#[derive(Default)]
struct Opened {
    pid: i32,
    path: Option<String>,
    /// Its exit (raw boot ns), for the fanotify join.
    exit: u64,
    pages_of: Option<(u32, u64)>,
    reads: usize,
    file_id: Option<u32>,
}

/// A kept call, before its file is known.
struct Row {
    row: Syscall,
    opened: Option<usize>,
}

/// The calls of the recording, in enter order.
pub struct Collected {
    rows: Vec<Row>,
    opened: Vec<Opened>,
    /// Path calls whose name the eBPF program could not read.
    pub unnamed: u64,
    /// The path each identified file was opened by (absolute), to name the files that
    /// nothing else names (fanotify does not see FUSE; the walk never enters it).
    pub proposed_names: Vec<(u32, String)>,
}

/// Pairs enters and exits of the threads `keep` accepts (by thread and trace time).
fn pair(events: &[Timed], keep: &impl Fn(i32, Nanos) -> bool, boot: &impl Fn(u64) -> Nanos) -> Vec<Call> {
    let mut pending: HashMap<i32, Pending> = HashMap::new();
    let mut calls = Vec::new();
    let unfinished = |tid: i32, p: Pending| {
        by_nr(p.nr).map(|call| Call {
            tid,
            call,
            enter: p.enter,
            exit: None,
            args: p.args,
            ret: None,
            pages_of: p.pages_of,
        })
    };
    for e in events {
        match e.event {
            Event::SysEnter { tid, nr, args } => {
                if !keep(tid, boot(e.ts)) {
                    continue;
                }
                let new = Pending { enter: e.ts, nr, args, pages_of: None };
                if let Some(old) = pending.insert(tid, new) {
                    calls.extend(unfinished(tid, old));
                }
            }
            Event::SysExit { tid, nr, ret } => {
                let Some(p) = pending.remove(&tid) else { continue };
                if p.nr != nr {
                    calls.extend(unfinished(tid, p));
                    continue;
                }
                if let Some(call) = by_nr(nr) {
                    calls.push(Call {
                        tid,
                        call,
                        enter: p.enter,
                        exit: Some(e.ts),
                        args: p.args,
                        ret: Some(ret),
                        pages_of: p.pages_of,
                    });
                }
            }
            Event::PageCacheAdd { tid, dev, ino, .. } | Event::PageAccess { tid, dev, ino, .. } => {
                if let Some(p) = pending.get_mut(&tid).filter(|p| p.pages_of.is_none()) {
                    p.pages_of = Some((dev, ino));
                }
            }
            _ => {}
        }
    }
    let mut left: Vec<(i32, Pending)> = pending.into_iter().collect();
    left.sort_by_key(|(tid, p)| (p.enter, *tid));
    calls.extend(left.into_iter().filter_map(|(tid, p)| unfinished(tid, p)));
    calls.sort_by_key(|c| (c.enter, c.tid));
    calls
}

/// The eBPF records of each thread, in time order, consumed as the calls are met.
struct Names {
    by_tid: HashMap<i32, VecDeque<PathRecord>>,
}

impl Names {
    fn new(records: &[PathRecord]) -> Names {
        let mut by_tid: HashMap<i32, Vec<PathRecord>> = HashMap::new();
        for r in records {
            by_tid.entry(r.tid).or_default().push(r.clone());
        }
        Names {
            by_tid: by_tid
                .into_iter()
                .map(|(tid, mut v)| {
                    v.sort_by_key(|r| r.boot_ns);
                    (tid, v.into())
                })
                .collect(),
        }
    }

    /// The record of a call entered at `enter`, if the program made one (`Some(None)`:
    /// made, but the name was unreadable).
    fn take(&mut self, c: &Call) -> Option<Option<String>> {
        let queue = self.by_tid.get_mut(&c.tid)?;
        while queue.front().is_some_and(|r| r.boot_ns + BPF_SKEW_NS < c.enter) {
            queue.pop_front();
        }
        let r = queue.front()?;
        let before_exit = c.exit.is_none_or(|x| r.boot_ns <= x);
        if i64::from(r.nr) != i64::from(c.call.nr) || !before_exit {
            return None;
        }
        let r = queue.pop_front()?;
        Some(r.path.map(|p| String::from_utf8_lossy(&p).into_owned()))
    }
}

/// `dir/name` without `./` and doubled slashes.
fn join(dir: &str, name: &str) -> String {
    let mut out = dir.trim_end_matches('/').to_owned();
    for part in name.split('/') {
        match part {
            "" | "." => {}
            p => {
                out.push('/');
                out.push_str(p);
            }
        }
    }
    if out.is_empty() { "/".into() } else { out }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The state of one process: its fds and working directory.
#[derive(Default)]
struct Process {
    fds: HashMap<i32, usize>,
    cwd: Option<String>,
}

/// Everything the collection needs besides the events.
pub struct Inputs<'a> {
    pub events: &'a [Timed],
    pub names: &'a [PathRecord],
    pub opens: &'a [OpenRecord],
    pub tree: &'a ProcTree,
    /// The recorder's working directory, that of the command at its start.
    pub cwd: Option<&'a str>,
    /// The end of the recording on the trace clock.
    pub end: Nanos,
    /// The kernel kept only slow file-system calls (no `--syscalls`): every read it kept
    /// is shown if it read a file (named by the pages it brought in), none of a pipe.
    pub only_slow_calls: bool,
}

/// Pairs, names and filters the calls and learns each opened file's identity.
pub fn collect(
    inputs: &Inputs<'_>,
    keep: impl Fn(i32, Nanos) -> bool,
    boot: impl Fn(u64) -> Nanos,
    files: &mut FileTable,
) -> Collected {
    let calls = pair(inputs.events, &keep, &boot);
    let mut names = Names::new(inputs.names);
    let mut processes: HashMap<i32, Process> = HashMap::new();
    let mut out = Collected { rows: Vec::new(), opened: Vec::new(), unnamed: 0, proposed_names: Vec::new() };
    for c in calls {
        let pid = inputs.tree.tgid(c.tid);
        let process = process_state(&mut processes, inputs, pid);
        let enter_ns = boot(c.enter);
        let exit_ns = c.exit.map(&boot);
        let duration = exit_ns.unwrap_or(inputs.end) - enter_ns;
        let arg_fd = |i: usize| c.args[i] as i32;
        let mut row = Syscall {
            tid: c.tid,
            pid,
            enter_ns,
            exit_ns,
            name: c.call.name.to_owned(),
            result: c.ret,
            fd: None,
            file_id: None,
            path: None,
        };
        let opened_by = match c.call.shape {
            Shape::Open { dirfd, .. } | Shape::Path { dirfd, .. } => {
                path_call(&c, dirfd, pid, process, &mut names, &mut out, &mut row)
            }
            Shape::OnFd => {
                row.fd = Some(arg_fd(0));
                process.fds.get(&arg_fd(0)).copied()
            }
            Shape::Read => {
                row.fd = Some(arg_fd(0));
                let opened_by = process.fds.get(&arg_fd(0)).copied();
                if inputs.only_slow_calls {
                    row.file_id = c.pages_of.and_then(|(dev, ino)| files.id_of(Dev::from_kernel(dev), ino));
                    if opened_by.is_none() && row.file_id.is_none() {
                        continue;
                    }
                } else if !is_first_read(&c, opened_by, &mut out.opened) && duration <= LONG_WAIT_NS {
                    continue;
                }
                opened_by
            }
            Shape::Mmap => {
                let fd = arg_fd(4);
                if fd < 0 || c.args[3] & MAP_ANONYMOUS != 0 {
                    continue;
                }
                row.fd = Some(fd);
                process.fds.get(&fd).copied()
            }
            Shape::Wait => {
                if duration <= LONG_WAIT_NS {
                    continue;
                }
                None
            }
            Shape::Close => {
                if c.ret == Some(0) {
                    process.fds.remove(&arg_fd(0));
                }
                continue;
            }
        };
        out.rows.push(Row { row, opened: opened_by });
    }
    identify_opened(&mut out, inputs.opens, files);
    out
}

/// The state of process `pid`; a process first met starts in its parent's working
/// directory, or else the recorder's.
fn process_state<'p>(
    processes: &'p mut HashMap<i32, Process>,
    inputs: &Inputs<'_>,
    pid: i32,
) -> &'p mut Process {
    if !processes.contains_key(&pid) {
        let parent_cwd = inputs
            .tree
            .processes
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| p.ppid)
            .and_then(|ppid| processes.get(&ppid))
            .and_then(|p| p.cwd.clone());
        let cwd = parent_cwd.or_else(|| inputs.cwd.map(str::to_owned));
        processes.insert(pid, Process { fds: HashMap::new(), cwd });
    }
    processes.entry(pid).or_default()
}

/// A call that names a path (or opens one): its absolute path from the eBPF record, the
/// fd it opened, and the working directory `chdir` sets. Returns the open it acts on.
fn path_call(
    c: &Call,
    dirfd: Option<u8>,
    pid: i32,
    process: &mut Process,
    names: &mut Names,
    out: &mut Collected,
    row: &mut Syscall,
) -> Option<usize> {
    let mut opened_by = None;
    let name = match names.take(c) {
        Some(Some(name)) => Some(name),
        Some(None) => {
            out.unnamed += 1;
            None
        }
        None => None,
    };
    let empty_path_flags = match c.call.name {
        "newfstatat" => c.args[3],
        "statx" => c.args[2],
        _ => 0,
    };
    if name.as_deref() == Some("") && empty_path_flags & AT_EMPTY_PATH != 0 {
        let fd = c.args[0] as i32;
        row.fd = Some(fd);
        opened_by = process.fds.get(&fd).copied();
    } else {
        row.path = name.map(|n| resolve(c, process, &out.opened, &n, dirfd));
    }
    if matches!(c.call.shape, Shape::Open { .. })
        && let Some(fd) = c.ret.filter(|&r| r >= 0).and_then(|r| i32::try_from(r).ok())
    {
        row.fd = Some(fd);
        out.opened.push(Opened {
            pid,
            path: row.path.clone(),
            exit: c.exit.unwrap_or(c.enter),
            ..Opened::default()
        });
        opened_by = Some(out.opened.len() - 1);
        process.fds.insert(fd, out.opened.len() - 1);
    }
    if c.call.name == "chdir" && c.ret == Some(0) {
        process.cwd = row.path.clone();
    }
    opened_by
}

/// The absolute path of `name`, relative to the call's directory fd or the working directory.
fn resolve(c: &Call, process: &Process, opened: &[Opened], name: &str, dirfd: Option<u8>) -> String {
    if name.starts_with('/') {
        return join("", name);
    }
    let dir = match dirfd.map(|i| c.args[usize::from(i)]) {
        Some(arg) if !is_at_fdcwd(arg) => {
            process.fds.get(&(arg as i32)).and_then(|&o| opened[o].path.clone())
        }
        _ => process.cwd.clone(),
    };
    match dir {
        Some(dir) => join(&dir, name),
        None => name.to_owned(),
    }
}

/// Counts a read of an opened file (learning the file from its pages) and says whether
/// it is one of the first reads of that open, which are kept.
fn is_first_read(c: &Call, opened_by: Option<usize>, opened: &mut [Opened]) -> bool {
    match opened_by {
        Some(o) => {
            let opened = &mut opened[o];
            opened.reads += 1;
            if opened.pages_of.is_none() {
                opened.pages_of = c.pages_of;
            }
            opened.reads <= FIRST_READS
        }
        None => false,
    }
}

/// Gives each opened file its file id: from its reads' pages, else from the fanotify
/// open of its process that followed it with the same base name; names the files that
/// had no path with the open's.
fn identify_opened(out: &mut Collected, opens: &[OpenRecord], files: &mut FileTable) {
    let mut by_pid: HashMap<i32, VecDeque<&OpenRecord>> = HashMap::new();
    for o in opens {
        by_pid.entry(o.pid).or_default().push_back(o);
    }
    let mut order: Vec<usize> = (0..out.opened.len()).collect();
    order.sort_by_key(|&i| out.opened[i].exit);
    for i in order {
        let opened = &mut out.opened[i];
        if let Some((dev, ino)) = opened.pages_of {
            opened.file_id = files.id_of(Dev::from_kernel(dev), ino);
        }
        let Some(queue) = by_pid.get_mut(&opened.pid) else { continue };
        let exit = opened.exit as i64;
        while queue.front().is_some_and(|o| o.t + FANOTIFY_LAG_NS < exit) {
            queue.pop_front();
        }
        if opened.file_id.is_some() {
            continue;
        }
        let wanted = opened.path.as_deref().map(base_name);
        let found = queue.iter().position(|o| {
            o.t >= exit
                && o.t <= exit + FANOTIFY_LAG_NS
                && match (wanted, files.known_path(o.dev, o.ino)) {
                    (Some(w), Some(p)) => base_name(p) == w,
                    _ => true,
                }
        });
        if let Some(at) = found
            && let Some(o) = queue.remove(at)
        {
            opened.file_id = Some(files.for_open(o.dev, o.ino));
        }
    }
    for opened in &out.opened {
        if let (Some(id), Some(path)) = (opened.file_id, &opened.path)
            && path.starts_with('/')
            && files.files.get(id as usize).is_some_and(|f| f.path.is_none())
        {
            out.proposed_names.push((id, path.clone()));
        }
    }
}

/// The rows, each with its file: an opened file's id, or for a path call the file of
/// that path when the file table has it.
pub fn finish(collected: Collected, files: &FileTable) -> Vec<Syscall> {
    let by_path: HashMap<&str, u32> =
        files.files.iter().filter_map(|f| Some((f.path.as_deref()?, f.id))).collect();
    collected
        .rows
        .into_iter()
        .map(|Row { mut row, opened }| {
            row.file_id = match opened {
                Some(o) => collected.opened[o].file_id,
                None if row.result.is_some_and(|r| r >= 0) => {
                    row.path.as_deref().and_then(|p| by_path.get(p).copied()).or(row.file_id)
                }
                None => row.file_id,
            };
            let file_path = row.file_id.and_then(|id| files.files.get(id as usize)?.path.as_deref());
            if file_path.is_some() && (row.path.is_none() || file_path == row.path.as_deref()) {
                row.path = None;
            }
            if row.path.is_none() && row.file_id.is_none() {
                row.path = opened.and_then(|o| collected.opened[o].path.clone());
            }
            row
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::events::Event;

    fn at(ts: u64, event: Event) -> Timed {
        Timed { ts, cpu: 0, event }
    }

    fn enter(ts: u64, tid: i32, nr: i64, args: [u64; 6]) -> Timed {
        at(ts, Event::SysEnter { tid, nr, args })
    }

    fn exit(ts: u64, tid: i32, nr: i64, ret: i64) -> Timed {
        at(ts, Event::SysExit { tid, nr, ret })
    }

    fn name(ts: u64, tid: i32, nr: u32, path: Option<&str>) -> PathRecord {
        PathRecord { tid, pid: tid, nr, boot_ns: ts, path: path.map(|p| p.as_bytes().to_vec()) }
    }

    #[test]
    fn calls_are_paired_named_filtered_and_their_fds_followed() {
        let at_fdcwd = (-100i64) as u64;
        let events = vec![
            enter(100, 7, 257, [at_fdcwd, 0, 0, 0, 0, 0]),
            exit(110, 7, 257, 3),
            enter(120, 7, 0, [3, 0, 4096, 0, 0, 0]),
            at(121, Event::PageCacheAdd { tid: 7, dev: 0xfe00000, ino: 42, index: 0, order: 0 }),
            exit(130, 7, 0, 4096),
            enter(140, 7, 262, [at_fdcwd, 0, 0, 0, 0, 0]),
            exit(150, 7, 262, -2),
            enter(160, 7, 202, [0; 6]),
            exit(170, 7, 202, 0),
            enter(200, 7, 202, [0; 6]),
            exit(3_000_200, 7, 202, 0),
            enter(3_000_300, 7, 3, [3, 0, 0, 0, 0, 0]),
            exit(3_000_310, 7, 3, 0),
            enter(3_000_400, 7, 0, [3, 0, 1, 0, 0, 0]),
            exit(3_000_410, 7, 0, 1),
            enter(3_000_500, 8, 262, [at_fdcwd, 0, 0, 0, 0, 0]),
        ];
        let names = [
            name(100, 7, 257, Some("/mnt/slow/a.so")),
            name(140, 7, 262, Some("missing")),
            name(3_000_500, 8, 262, None),
        ];
        let tree = ProcTree::default();
        let inputs = Inputs {
            events: &events,
            names: &names,
            opens: &[],
            tree: &tree,
            cwd: Some("/home/u"),
            end: 4_000_000,
            only_slow_calls: false,
        };
        let mut files = FileTable::new(&[]);
        let id = files.for_open(Dev::from_kernel(0xfe00000).to_user(), 42);
        let collected = collect(&inputs, |_, _| true, |ts| ts as i64, &mut files);
        assert_eq!(collected.unnamed, 1);
        assert_eq!(collected.proposed_names, vec![(id, "/mnt/slow/a.so".to_owned())]);
        files.files[id as usize].path = Some("/mnt/slow/a.so".into());
        let rows = finish(collected, &files);
        type Shown<'a> = (&'a str, Option<i64>, Option<i32>, Option<u32>, Option<&'a str>);
        let shown: Vec<Shown<'_>> =
            rows.iter().map(|r| (r.name.as_str(), r.result, r.fd, r.file_id, r.path.as_deref())).collect();
        assert_eq!(
            shown,
            vec![
                ("openat", Some(3), Some(3), Some(id), None),
                ("read", Some(4096), Some(3), Some(id), None),
                ("newfstatat", Some(-2), None, None, Some("/home/u/missing")),
                ("futex", Some(0), None, None, None),
                ("newfstatat", None, None, None, None),
            ],
            "the short futex, the close and the read after it are left out"
        );
        assert_eq!(rows[3].duration_ns(), Some(3_000_000));
        assert_eq!(rows[4].exit_ns, None);
    }
}
