//! `slow_filesystem` without system calls: a start recorded with `record`'s defaults has
//! no `syscall` rows, only the kernel stacks its threads slept with. Waits in a FUSE
//! daemon's or a network server's requests are put on the mount the process used, with
//! the calls the stacks came from, and are not "outside the recording".

mod common;

use coldstart_analyze::doctor::FindingKind;
use coldstart_trace::*;
use common::doctor::{check_invariants, diagnose, figure, of_kind, one, render};
use common::{Builder, MS};

const FUSE: Dev = Dev::new(0, 39);
const OTHER_FUSE: Dev = Dev::new(0, 40);
const NFS: Dev = Dev::new(0, 52);
/// The daemon or server that answers the requests: outside the recorded scope.
const SERVER: i32 = 900;

/// Adds a kernel stack (frames innermost first) to the trace; returns the id of its leaf.
fn stack(t: &mut Trace, innermost_first: &str) -> u32 {
    let mut parent = None;
    for name in innermost_first.split(" < ").collect::<Vec<_>>().into_iter().rev() {
        let frame_id = t.frames.len() as u32 + 1;
        t.frames.push(Frame { id: frame_id, kernel: true, symbol: Some(name.into()), ..Frame::default() });
        let id = t.stacks.len() as u32 + 1;
        t.stacks.push(Stack { id, parent_id: parent, frame_id });
        parent = Some(id);
    }
    parent.unwrap()
}

const FUSE_STATX: &str = "__traceiter_sched_switch < __schedule < schedule < request_wait_answer < \
                          __fuse_simple_request < fuse_do_getattr < fuse_permission < inode_permission < \
                          link_path_walk < path_lookupat < filename_lookup < vfs_statx < __do_sys_statx < \
                          do_syscall_64 < entry_SYSCALL_64_after_hwframe";
const FUSE_OPEN: &str = "__traceiter_sched_switch < __schedule < schedule < request_wait_answer < \
                         __fuse_simple_request < fuse_open_common < do_dentry_open < path_openat < do_filp_open < \
                         do_sys_openat2 < __x64_sys_openat < do_syscall_64 < entry_SYSCALL_64_after_hwframe";
/// A read of a FUSE file waits on the page cache: FUSE's read path tail-calls filemap_read.
const PAGE_CACHE_READ: &str = "__traceiter_sched_switch < __schedule < schedule < io_schedule < \
                               folio_wait_bit_common < filemap_get_pages < filemap_read < vfs_read < ksys_read < \
                               do_syscall_64 < entry_SYSCALL_64_after_hwframe";
const NFS_STAT: &str = "__schedule < schedule < rpc_wait_bit_killable < __wait_on_bit < out_of_line_wait_on_bit < \
                        __rpc_execute < rpc_execute < rpc_run_task < nfs4_call_sync_sequence < _nfs4_proc_getattr < \
                        nfs4_proc_getattr < __nfs_revalidate_inode < nfs_getattr < vfs_statx < vfs_fstatat < \
                        __do_sys_newfstatat < do_syscall_64 < entry_SYSCALL_64_after_hwframe";

fn mount(dev: Dev, point: &str, fstype: &str) -> Mount {
    Mount { dev, point: point.into(), fstype: fstype.into() }
}

/// The app (pid 100) runs 1 ms, then makes `requests` requests of 10 ms each (stacks
/// alternating between `stacks`), each answered by the server, with 0.5 ms of CPU between
/// them; then reads file 1 with one 8 ms I/O wait whose stack is `read_stack`, and exits.
fn scan(mounts: Vec<Mount>, file_dev: Dev, requests: i64, stacks: &[&str], read_stack: &str) -> Trace {
    let mut b = Builder::start().outside_process(SERVER, "plugin-fs").run(100, 0, MS);
    let mut t = MS;
    let mut samples = Vec::new();
    for i in 0..requests {
        b = b.sleep(100, t, t + 10 * MS, Some(SERVER)).run(100, t + 10 * MS, t + 10 * MS + MS / 2);
        samples.push((t + 20_000, i as usize % stacks.len()));
        t += 10 * MS + MS / 2;
    }
    let read_at = t;
    b = b
        .fill(read_at + 1_000, 100, 100, 1, 0, 4)
        .sched(100, read_at, read_at + 8 * MS, ThreadState::IoWait)
        .run(100, read_at + 8 * MS, read_at + 9 * MS)
        .ready_at_exit(read_at + 9 * MS);
    let mut trace = b.build();
    trace.files.push(File { id: 1, dev: file_dev, ino: 10, size: Some(16384), ..File::default() });
    trace.mounts = mounts;
    let ids: Vec<u32> = stacks.iter().map(|s| stack(&mut trace, s)).collect();
    let read = stack(&mut trace, read_stack);
    for (at, which) in samples {
        trace.off_cpu_samples.push(OffCpuSample { t_ns: at, pid: 100, tid: 100, stack_id: Some(ids[which]) });
    }
    trace.off_cpu_samples.push(OffCpuSample {
        t_ns: read_at + 10_000,
        pid: 100,
        tid: 100,
        stack_id: Some(read),
    });
    trace
}

#[test]
fn fuse_waits_without_syscalls_are_put_on_the_mount_the_program_used() {
    let mounts = vec![
        mount(common::DISK, "/", "ext4"),
        mount(OTHER_FUSE, "/run/user/1000/doc", "fuse.portal"),
        mount(FUSE, "/opt/app/plug-ins", "fuse.slowfs"),
    ];
    let trace = scan(mounts, FUSE, 40, &[FUSE_STATX, FUSE_OPEN], PAGE_CACHE_READ);
    assert!(trace.syscalls.is_empty());
    let d = diagnose(&trace);
    check_invariants(&d);
    let f = one(&d, FindingKind::SlowFilesystem);
    assert_eq!(d.findings[0].kind, FindingKind::SlowFilesystem, "{}", render(&d));
    // 40 requests of 10 ms and the 8 ms read of a file on the mount: 408 ms of the path.
    assert_eq!(f.gain.ns, 408 * MS, "{}", f.gain.text);
    assert_eq!(figure(f, "requests"), 41.0);
    assert_eq!(figure(f, "statx_waits"), 20.0);
    assert_eq!(figure(f, "openat_waits"), 20.0);
    assert_eq!(figure(f, "read_waits"), 1.0);
    assert!(f.title.contains("the fuse.slowfs mount /opt/app/plug-ins"), "{}", f.title);
    assert!(f.title.contains("statx") && f.title.contains("openat"), "{}", f.title);
    assert!(f.evidence.summary.contains("answered by plugin-fs (pid 900"), "{}", f.evidence.summary);
    assert!(f.evidence.summary.contains("1 file there, unnamed"), "{}", f.evidence.summary);
    assert!(f.evidence.processes.iter().any(|p| p.pid == SERVER && !p.in_scope));
    assert!(of_kind(&d, FindingKind::UnexplainedWaits).is_empty(), "{}", render(&d));
}

#[test]
fn an_nfs_wait_is_named_from_the_rpc_layer_and_the_nfs_frames_under_it() {
    let mounts = vec![mount(common::DISK, "/", "ext4"), mount(NFS, "/home", "nfs4")];
    // The program read nothing on NFS: the trace's only NFS mount is the one.
    let trace = scan(mounts, common::DISK, 30, &[NFS_STAT], PAGE_CACHE_READ);
    let d = diagnose(&trace);
    check_invariants(&d);
    let f = one(&d, FindingKind::SlowFilesystem);
    assert_eq!(f.gain.ns, 300 * MS, "{}", f.gain.text);
    assert_eq!(figure(f, "newfstatat_waits"), 30.0);
    assert!(f.title.contains("the nfs4 mount /home"), "{}", f.title);
    assert!(of_kind(&d, FindingKind::UnexplainedWaits).is_empty(), "{}", render(&d));
}

#[test]
fn waits_on_a_local_disk_are_no_slow_filesystem() {
    let mounts = vec![mount(common::DISK, "/", "ext4"), mount(FUSE, "/opt/app/plug-ins", "fuse")];
    let pipe = "__traceiter_sched_switch < __schedule < schedule < anon_pipe_read < vfs_read < ksys_read < \
                do_syscall_64 < entry_SYSCALL_64_after_hwframe";
    let trace = scan(mounts, common::DISK, 30, &[pipe], PAGE_CACHE_READ);
    let d = diagnose(&trace);
    assert!(of_kind(&d, FindingKind::SlowFilesystem).is_empty(), "{}", render(&d));
    assert_eq!(of_kind(&d, FindingKind::UnexplainedWaits).len(), 1, "{}", render(&d));
}
