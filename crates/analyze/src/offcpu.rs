//! What a sleeping thread waited in, from the kernel stack it went to sleep with (the
//! trace's off-CPU samples): a short label a performance engineer recognises, the first
//! meaningful kernel function below the scheduler and the system call it came from
//! ("fuse_simple_request in newfstatat", "do_nanosleep in clock_nanosleep"). The rules
//! are the tables at the top; each sleeping or I/O-waiting interval of the scheduler
//! table is matched to the stack taken as it began.

use coldstart_trace::{Nanos, StackIndex, ThreadState, Trace};
use rustc_hash::FxHashMap;

/// Frames that only say that a thread slept, not on what: the scheduler, the tracepoint
/// the stack was taken at, and generic waiting helpers whose caller names the wait.
/// `x*` matches a prefix, `*x*` a part, anything else the whole name.
const GENERIC: &[&str] = &[
    "__traceiter_*",
    "perf_*",
    "__perf_*",
    "__schedule",
    "schedule",
    "schedule_*",
    "io_schedule*",
    "preempt_schedule*",
    "*wait_for_common*",
    "wait_for_completion*",
    "wait_woken",
    "bit_wait*",
    "out_of_line_wait_on_bit*",
    "__wait_on_bit*",
    "prepare_to_wait*",
    "finish_task_switch*",
    "poll_schedule_timeout*",
    "futex_wait_queue",
    "futex_do_wait",
    "request_wait_answer",
];

/// Frames of the system call entry, outermost; the first frame inside them that names a
/// call gives its name.
const ENTRY: &[&str] = &[
    "entry_SYSCALL*",
    "do_syscall_64",
    "x64_sys_call",
    "do_fast_syscall_32",
    "__do_fast_syscall_32",
    "el0*",
];

/// The wrappers the kernel generates around each system call's code, never a label.
const CALL_WRAPPERS: &[&str] = &["__x64_sys_", "__ia32_sys_", "__arm64_sys_", "__se_sys_", "__do_sys_"];

/// Prefixes of the functions that implement one system call (`__x64_sys_newfstatat`).
const CALL_PREFIXES: &[&str] =
    &["__x64_sys_", "__ia32_sys_", "__arm64_sys_", "__se_sys_", "__do_sys_", "ksys_", "__sys_", "do_sys_"];

/// Functions that implement a call under another name.
const CALL_NAMES: &[(&str, &str)] = &[
    ("kernel_wait4", "wait4"),
    ("do_epoll_wait", "epoll_wait"),
    ("core_sys_select", "select"),
    ("do_sys_openat2", "openat"),
];

/// Frames of a page fault taken outside any system call.
const FAULT: &[&str] = &["asm_exc_page_fault", "exc_page_fault"];

/// The part of the kernel a waiting function belongs to, said after the label where it
/// is not plain from the name.
const AREAS: &[(&str, &str)] = &[
    ("folio_wait*", "page cache"),
    ("__folio_lock*", "page cache"),
    ("folio_lock*", "page cache"),
    ("filemap_*", "page cache"),
    ("__filemap_*", "page cache"),
    ("wait_on_page*", "page cache"),
    ("__lock_page*", "page cache"),
    ("jbd2_*", "ext4 journal"),
    ("blk_mq_get_tag", "block queue full"),
    ("submit_bio_wait", "block I/O"),
];

/// Frames of the filesystems whose calls are requests to a daemon or a server, and the
/// filesystem type they mean (as the mount table's `fstype` would say it). The stack's
/// innermost such frame decides: `rpc_wait_bit_killable` alone is the RPC layer, but the
/// `nfs4_*` frames below it say whose request it was.
const REMOTE_FILESYSTEMS: &[(&str, &str)] = &[
    ("fuse_*", "fuse"),
    ("__fuse_*", "fuse"),
    ("nfs4_*", "nfs4"),
    ("_nfs4_*", "nfs4"),
    ("nfs_*", "nfs"),
    ("__nfs_*", "nfs"),
    ("p9_*", "9p"),
    ("v9fs_*", "9p"),
    ("cifs_*", "cifs"),
    ("smb2_*", "cifs"),
    ("ceph_*", "ceph"),
    ("afs_*", "afs"),
];

fn matches(pattern: &str, name: &str) -> bool {
    match (pattern.strip_prefix('*'), pattern.strip_suffix('*')) {
        (Some(inner), _) if pattern.len() > 1 && pattern.ends_with('*') => {
            name.contains(&inner[..inner.len() - 1])
        }
        (_, Some(prefix)) => name.starts_with(prefix),
        _ => name == pattern,
    }
}

fn any_match(patterns: &[&str], name: &str) -> bool {
    patterns.iter().any(|p| matches(p, name))
}

/// A kernel symbol as people read it: without the compiler's clone suffixes
/// (`.isra.0`, `.constprop.0`, `.part.0`, `.cold`) and leading underscores.
fn readable(symbol: &str) -> &str {
    let base = symbol.split('.').next().unwrap_or(symbol);
    let trimmed = base.trim_start_matches('_');
    if trimmed.is_empty() { base } else { trimmed }
}

/// What a kernel stack says a thread waited in.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelWait {
    /// The first meaningful function below the scheduler (`fuse_simple_request`).
    pub function: String,
    /// The system call it came from (`newfstatat`), `page fault`, or `None` (a kernel thread).
    pub syscall: Option<String>,
    /// The FUSE or network filesystem the wait was a request of (`fuse`, `nfs4`, `9p`,
    /// `cifs`, …), from any frame of the stack; `None` for local waits.
    pub filesystem: Option<String>,
}

/// The FUSE or network filesystem type a stack's frames (innermost first) belong to.
fn remote_filesystem(frames: &[&str]) -> Option<&'static str> {
    frames.iter().find_map(|f| {
        let base = f.split('.').next().unwrap_or(f);
        REMOTE_FILESYSTEMS.iter().find(|(p, _)| matches(p, base)).map(|(_, fs)| *fs)
    })
}

/// The part of the kernel `function` belongs to, when its name does not say it.
pub fn area_of(function: &str) -> Option<&'static str> {
    AREAS.iter().find(|(p, _)| matches(p, function)).map(|(_, area)| *area)
}

/// The system call of a stack (frames innermost first): the outermost frame that names one.
pub(crate) fn syscall_of(frames: &[&str]) -> Option<String> {
    for f in frames.iter().rev().map(|f| f.split('.').next().unwrap_or(f)) {
        if any_match(ENTRY, f) {
            continue;
        }
        if let Some((_, name)) = CALL_NAMES.iter().find(|(k, _)| *k == f) {
            return Some((*name).to_owned());
        }
        if let Some(name) = CALL_PREFIXES.iter().find_map(|p| f.strip_prefix(p)) {
            return Some(name.to_owned());
        }
        break;
    }
    frames.iter().any(|f| FAULT.contains(f)).then(|| "page fault".to_owned())
}

/// The label of a kernel stack, frames innermost first: `None` when every frame is the
/// scheduler's or the entry's.
pub fn kernel_wait(frames: &[&str]) -> Option<KernelWait> {
    let function = frames.iter().find(|f| {
        let base = f.split('.').next().unwrap_or(f);
        !any_match(GENERIC, base)
            && !any_match(ENTRY, base)
            && !FAULT.contains(&base)
            && !CALL_WRAPPERS.iter().any(|p| base.starts_with(p))
    })?;
    Some(KernelWait {
        function: readable(function).to_owned(),
        syscall: syscall_of(frames),
        filesystem: remote_filesystem(frames).map(str::to_owned),
    })
}

/// One sleep of a thread and what it waited in.
struct LabelledSleep {
    start_ns: Nanos,
    end_ns: Nanos,
    wait: KernelWait,
}

/// The sleeps and I/O waits of each thread named by their off-CPU stacks.
#[derive(Default)]
pub struct OffCpuIndex {
    by_tid: FxHashMap<i32, Vec<LabelledSleep>>,
}

/// How far apart the perf sample and the tracefs switch of one sleep may be timed: the
/// two clocks are the same but tied together by one reading at the start.
const MATCH_TOLERANCE_NS: Nanos = 500_000;

impl OffCpuIndex {
    pub fn new(trace: &Trace) -> OffCpuIndex {
        let mut out = OffCpuIndex::default();
        if trace.off_cpu_samples.is_empty() {
            return out;
        }
        let stacks = StackIndex::new(trace);
        let mut labels: FxHashMap<Option<u32>, Option<KernelWait>> = FxHashMap::default();
        let mut samples: FxHashMap<i32, Vec<(Nanos, Option<u32>)>> = FxHashMap::default();
        for s in &trace.off_cpu_samples {
            samples.entry(s.tid).or_default().push((s.t_ns, s.stack_id));
            labels.entry(s.stack_id).or_insert_with(|| {
                let frames = stacks.frames(s.stack_id);
                let names: Vec<&str> = frames.iter().filter_map(|f| f.symbol.as_deref()).collect();
                kernel_wait(&names)
            });
        }
        for list in samples.values_mut() {
            list.sort_unstable_by_key(|s| s.0);
        }
        for s in &trace.sched {
            if !matches!(s.state, ThreadState::Sleeping | ThreadState::IoWait) {
                continue;
            }
            let Some(list) = samples.get(&s.tid) else { continue };
            let i = list.partition_point(|x| x.0 < s.start_ns);
            let nearest = [i.checked_sub(1), Some(i)]
                .into_iter()
                .flatten()
                .filter_map(|j| list.get(j))
                .filter(|x| {
                    (x.0 - s.start_ns).abs() <= MATCH_TOLERANCE_NS && x.0 < s.end_ns.max(s.start_ns + 1)
                })
                .min_by_key(|x| (x.0 - s.start_ns).abs());
            if let Some(wait) = nearest.and_then(|x| labels.get(&x.1).cloned().flatten()) {
                out.by_tid.entry(s.tid).or_default().push(LabelledSleep {
                    start_ns: s.start_ns,
                    end_ns: s.end_ns,
                    wait,
                });
            }
        }
        for list in out.by_tid.values_mut() {
            list.sort_unstable_by_key(|s| s.start_ns);
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.by_tid.is_empty()
    }

    /// What `tid` waited in over `start..end` (off the CPU): the label of its sleep that
    /// covers the middle of that time, and when that sleep began.
    pub fn during(&self, tid: i32, start: Nanos, end: Nanos) -> Option<(&KernelWait, Nanos)> {
        let list = self.by_tid.get(&tid)?;
        let middle = start + (end - start) / 2;
        let i = list.partition_point(|s| s.start_ns <= middle).checked_sub(1)?;
        let s = &list[i];
        (s.end_ns >= middle).then_some((&s.wait, s.start_ns))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(stack: &str) -> Option<(String, Option<String>)> {
        let frames: Vec<&str> = stack.split(" < ").collect();
        kernel_wait(&frames).map(|w| (w.function, w.syscall))
    }

    fn pair(function: &str, syscall: &str) -> Option<(String, Option<String>)> {
        Some((function.to_owned(), Some(syscall.to_owned())))
    }

    // Stacks recorded on this machine (Linux 6.18) by `coldstart record`, innermost first.
    #[test]
    fn real_stacks_get_the_labels_people_know() {
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < request_wait_answer < __fuse_simple_request < \
                 fuse_do_getattr < fuse_permission < inode_permission < link_path_walk < path_lookupat < \
                 filename_lookup < vfs_statx < vfs_fstatat < __do_sys_newfstatat < do_syscall_64 < \
                 entry_SYSCALL_64_after_hwframe"
            ),
            pair("fuse_simple_request", "newfstatat")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < anon_pipe_read < vfs_read < ksys_read < \
                 do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("anon_pipe_read", "read")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < do_nanosleep < hrtimer_nanosleep < \
                 common_nsleep_timens < __x64_sys_clock_nanosleep < do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("do_nanosleep", "clock_nanosleep")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < do_wait < kernel_wait4 < do_syscall_64 < \
                 entry_SYSCALL_64_after_hwframe"
            ),
            pair("do_wait", "wait4")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < io_schedule < folio_wait_bit_common < \
                 filemap_fault < __do_fault < do_fault < __handle_mm_fault < handle_mm_fault < exc_page_fault < \
                 asm_exc_page_fault"
            ),
            pair("folio_wait_bit_common", "page fault")
        );
        assert_eq!(area_of("folio_wait_bit_common"), Some("page cache"));
        assert_eq!(area_of("fuse_simple_request"), None);
    }

    #[test]
    fn real_waits_of_a_whole_machine_name_the_call_not_the_helper() {
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < futex_do_wait < __futex_wait < futex_wait < \
                 do_futex < __x64_sys_futex < do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("futex_wait", "futex")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < schedule_hrtimeout_range_clock < \
                 poll_schedule_timeout.constprop.0 < do_sys_poll < __x64_sys_ppoll < do_syscall_64 < \
                 entry_SYSCALL_64_after_hwframe"
            ),
            pair("do_sys_poll", "ppoll")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < io_schedule < folio_wait_bit_common < \
                 filemap_get_pages < filemap_read < vfs_read < ksys_read < do_syscall_64 < \
                 entry_SYSCALL_64_after_hwframe"
            ),
            pair("folio_wait_bit_common", "read")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < schedule_timeout < wait_for_completion < \
                 stop_one_cpu < sched_exec < bprm_execve < do_execveat_common.isra.0 < __x64_sys_execve < \
                 do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("stop_one_cpu", "execve")
        );
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < smpboot_thread_fn < kthread < ret_from_fork < \
                 ret_from_fork_asm"
            ),
            Some(("smpboot_thread_fn".to_owned(), None))
        );
    }

    /// A trace with one thread that sleeps in a pipe read at 1 ms and in a page-cache wait at
    /// 5 ms, whose stacks were timed 40 µs off the scheduler's switches.
    fn trace() -> Trace {
        use coldstart_trace::{Frame, OffCpuSample, SchedInterval, Stack};
        let names = [
            "entry_SYSCALL_64_after_hwframe",
            "ksys_read",
            "anon_pipe_read",
            "schedule",
            "folio_wait_bit_common",
        ];
        let frames = names
            .iter()
            .enumerate()
            .map(|(i, n)| Frame {
                id: i as u32 + 1,
                kernel: true,
                symbol: Some((*n).into()),
                ..Frame::default()
            })
            .collect();
        // 1 entry < 2 ksys_read < 3 anon_pipe_read < 4 schedule; 2 < 5 folio_wait < 6 schedule.
        let stacks = vec![
            Stack { id: 1, parent_id: None, frame_id: 1 },
            Stack { id: 2, parent_id: Some(1), frame_id: 2 },
            Stack { id: 3, parent_id: Some(2), frame_id: 3 },
            Stack { id: 4, parent_id: Some(3), frame_id: 4 },
            Stack { id: 5, parent_id: Some(2), frame_id: 5 },
            Stack { id: 6, parent_id: Some(5), frame_id: 4 },
        ];
        let interval = |start, end, state| SchedInterval { tid: 7, start_ns: start, end_ns: end, state };
        let sched = vec![
            interval(0, 1_000_000, ThreadState::Running),
            interval(1_000_000, 4_000_000, ThreadState::Sleeping),
            interval(4_000_000, 5_000_000, ThreadState::Running),
            interval(5_000_000, 9_000_000, ThreadState::IoWait),
            interval(9_000_000, 12_000_000, ThreadState::Sleeping),
        ];
        let sample = |t_ns, stack_id| OffCpuSample { t_ns, pid: 7, tid: 7, stack_id: Some(stack_id) };
        let off_cpu_samples = vec![sample(1_000_040, 4), sample(4_999_960, 6)];
        Trace { frames, stacks, sched, off_cpu_samples, ..Trace::default() }
    }

    #[test]
    fn each_sleep_takes_the_stack_taken_as_it_began() {
        let t = trace();
        let index = OffCpuIndex::new(&t);
        let at = |start, end| {
            index.during(7, start, end).map(|(w, began)| (w.function.clone(), w.syscall.clone(), began))
        };
        assert_eq!(at(1_000_000, 4_000_000), Some(("anon_pipe_read".into(), Some("read".into()), 1_000_000)));
        // A piece of the wait, as a critical-path segment may be.
        assert_eq!(
            at(6_000_000, 9_000_000),
            Some(("folio_wait_bit_common".into(), Some("read".into()), 5_000_000))
        );
        // The third sleep has no stack (lost, or not recorded): it is not named after another.
        assert_eq!(at(9_000_000, 12_000_000), None);
        assert_eq!(index.during(8, 1_000_000, 4_000_000), None);

        let a = crate::analyze(&t);
        let shown: Vec<(String, Nanos, u64)> =
            a.syscall_waits.iter().map(|w| (w.waited_in.to_string(), w.ns, w.calls)).collect();
        assert_eq!(
            shown,
            vec![
                ("folio_wait_bit_common (read, page cache)".to_owned(), 4_000_000, 1),
                ("anon_pipe_read (read)".to_owned(), 3_000_000, 1),
            ]
        );
        assert!(a.syscall_waits.iter().all(|w| w.waited_in.from_stack));
    }

    #[test]
    fn a_label_with_a_recorded_call_says_both() {
        let w = crate::WaitedIn {
            syscall: "statx".into(),
            dir: Some("/opt/app/plug-ins".into()),
            fstype: Some("fuse".into()),
            kernel: Some("fuse_simple_request".into()),
            area: None,
            from_stack: false,
        };
        assert_eq!(w.to_string(), "fuse_simple_request (statx under /opt/app/plug-ins, fuse)");
        let thread =
            crate::WaitedIn { kernel: Some("worker_thread".into()), from_stack: true, ..Default::default() };
        assert_eq!(thread.to_string(), "worker_thread");
    }

    fn filesystem(stack: &str) -> Option<String> {
        let frames: Vec<&str> = stack.split(" < ").collect();
        kernel_wait(&frames).and_then(|w| w.filesystem)
    }

    // The first stack was recorded here on the FUSE rig; the others are the kernel's call chains
    // for a stat on NFS 4, 9p and SMB (Linux 6.x), whose waits a FUSE-only machine cannot record.
    #[test]
    fn waits_in_fuse_and_network_filesystems_say_which_filesystem() {
        let fuse_read = "__traceiter_sched_switch < __schedule < schedule < io_schedule < folio_wait_bit_common < \
                         filemap_get_pages < filemap_read < fuse_cache_read_iter < fuse_file_read_iter < vfs_read < \
                         ksys_read < do_syscall_64 < entry_SYSCALL_64_after_hwframe";
        assert_eq!(label(fuse_read), pair("folio_wait_bit_common", "read"));
        assert_eq!(filesystem(fuse_read).as_deref(), Some("fuse"));
        let nfs = "__schedule < schedule < rpc_wait_bit_killable < __wait_on_bit < out_of_line_wait_on_bit < \
                   __rpc_execute < rpc_execute < rpc_run_task < nfs4_call_sync_sequence < _nfs4_proc_getattr < \
                   nfs4_proc_getattr < __nfs_revalidate_inode < nfs_getattr < vfs_statx < vfs_fstatat < \
                   __do_sys_newfstatat < do_syscall_64 < entry_SYSCALL_64_after_hwframe";
        assert_eq!(label(nfs), pair("rpc_wait_bit_killable", "newfstatat"));
        assert_eq!(filesystem(nfs).as_deref(), Some("nfs4"));
        let p9 = "__schedule < schedule < p9_client_rpc < p9_client_walk < v9fs_vfs_lookup < __lookup_slow < \
                  walk_component < path_lookupat < filename_lookup < vfs_statx < __do_sys_statx < do_syscall_64";
        assert_eq!(label(p9), pair("p9_client_rpc", "statx"));
        assert_eq!(filesystem(p9).as_deref(), Some("9p"));
        let smb = "__schedule < schedule < wait_for_response < compound_send_recv < smb2_compound_op < \
                   smb2_query_path_info < cifs_get_inode_info < cifs_revalidate_dentry_attr < cifs_getattr < \
                   vfs_statx < __do_sys_statx < do_syscall_64";
        assert_eq!(label(smb), pair("wait_for_response", "statx"));
        assert_eq!(filesystem(smb).as_deref(), Some("cifs"));
        let local = "__schedule < schedule < io_schedule < folio_wait_bit_common < filemap_read < vfs_read < \
                     ksys_read < do_syscall_64";
        assert_eq!(filesystem(local), None);
    }

    #[test]
    fn generic_waits_give_way_to_their_caller() {
        assert_eq!(
            label(
                "__traceiter_sched_switch < __schedule < schedule < futex_wait_queue < __futex_wait < futex_wait < \
                 do_futex < __x64_sys_futex < do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("futex_wait", "futex")
        );
        assert_eq!(
            label(
                "__schedule < schedule < schedule_hrtimeout_range_clock < do_epoll_wait < __x64_sys_epoll_wait < \
                 do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("do_epoll_wait", "epoll_wait")
        );
        assert_eq!(
            label(
                "__schedule < schedule < schedule_timeout < __wait_for_common < wait_for_completion_killable < \
                 load_module_wait.isra.0 < __x64_sys_finit_module < do_syscall_64"
            ),
            pair("load_module_wait", "finit_module")
        );
        assert_eq!(
            label(
                "__schedule < schedule < schedule_hrtimeout_range_clock < do_sys_poll < __x64_sys_poll < \
                 do_syscall_64 < entry_SYSCALL_64_after_hwframe"
            ),
            pair("do_sys_poll", "poll")
        );
        assert_eq!(label("__schedule < schedule < worker_thread < kthread < ret_from_fork"), {
            Some(("worker_thread".to_owned(), None))
        });
        assert_eq!(label("__traceiter_sched_switch < __schedule < schedule"), None);
    }
}
