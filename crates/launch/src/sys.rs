//! Every system call of the launch crate, through libc: between `fork` and `exec` the
//! children may make only async-signal-safe raw calls, which libc alone offers whole
//! (rustix has no fork, nix allocates in its exec), so the rest uses it too. Pipes,
//! reads and writes, poll, the boot clock, inotify, pidfds, wait4, the user and group
//! databases, the two forked children of a launch, and the child that connects to a
//! container's systemd from inside its PID namespace.

use std::ffi::{CStr, CString, OsStr, c_char};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A message from the shepherd: `Report::STARTED` (the command's pid),
/// `Report::FORK_FAILED` (errno) or `Report::EXITED` (pid, wait status, time).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Report {
    pub(crate) kind: i32,
    pub(crate) pid: i32,
    pub(crate) status: i32,
    pub(crate) errno: i32,
    pub(crate) time_ns: i64,
}

impl Report {
    pub(crate) const STARTED: i32 = 1;
    pub(crate) const FORK_FAILED: i32 = 2;
    pub(crate) const EXITED: i32 = 3;
    pub(crate) const SIZE: usize = std::mem::size_of::<Report>();

    /// The report's bytes as the pipe carries them (the fields in order, native endian).
    pub(crate) fn to_bytes(self) -> [u8; Report::SIZE] {
        let mut bytes = [0u8; Report::SIZE];
        let fields = [self.kind, self.pid, self.status, self.errno].map(i32::to_ne_bytes);
        for (at, field) in fields.iter().enumerate() {
            bytes[at * 4..at * 4 + 4].copy_from_slice(field);
        }
        bytes[16..].copy_from_slice(&self.time_ns.to_ne_bytes());
        bytes
    }

    /// The report of `bytes`; missing bytes read as zero.
    pub(crate) fn from_bytes(bytes: &[u8]) -> Report {
        let mut all = [0u8; Report::SIZE];
        let n = bytes.len().min(Report::SIZE);
        all[..n].copy_from_slice(&bytes[..n]);
        let int = |at: usize| i32::from_ne_bytes([all[at], all[at + 1], all[at + 2], all[at + 3]]);
        let mut time = [0u8; 8];
        time.copy_from_slice(&all[16..]);
        Report {
            kind: int(0),
            pid: int(4),
            status: int(8),
            errno: int(12),
            time_ns: i64::from_ne_bytes(time),
        }
    }
}

/// A call's result, or errno when it returned −1.
fn check(r: libc::c_int) -> io::Result<libc::c_int> {
    if r == -1 { Err(io::Error::last_os_error()) } else { Ok(r) }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// A close-on-exec pipe (read end, write end), both ends non-blocking if asked.
pub(crate) fn pipe(nonblocking: bool) -> io::Result<(OwnedFd, OwnedFd)> {
    let flags = libc::O_CLOEXEC | if nonblocking { libc::O_NONBLOCK } else { 0 };
    let mut fds = [-1; 2];
    // SAFETY: pipe2 fills two descriptors, which we then own.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), flags) })?;
    // SAFETY: both descriptors were just opened and belong to no one else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on an open descriptor with integer arguments only.
    let flags = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, flags | libc::O_NONBLOCK) }).map(drop)
}

/// One `read(2)`; EINTR comes back as `ErrorKind::Interrupted`.
pub(crate) fn read(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: the buffer is writable for its whole length.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// One `write(2)`.
pub(crate) fn write(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: the buffer is readable for its whole length.
    let n = unsafe { libc::write(fd.as_raw_fd(), buf.as_ptr().cast(), buf.len()) };
    usize::try_from(n).map_err(|_| io::Error::last_os_error())
}

/// Writes one byte to `fd`, ignoring failure. Async-signal-safe, for signal handlers,
/// which hold descriptor numbers only.
pub(crate) fn wake(fd: RawFd) {
    // SAFETY: a one-byte write from a constant; a stale descriptor only makes it fail.
    unsafe { libc::write(fd, [1u8].as_ptr().cast(), 1) };
}

/// Waits at most `timeout` for any of `fds` to become readable (or hung up); says
/// which did. An interrupted wait says none.
pub(crate) fn poll_readable(fds: &[BorrowedFd<'_>], timeout: Duration) -> Vec<bool> {
    let mut polled: Vec<libc::pollfd> =
        fds.iter().map(|fd| libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
    let timeout = libc::timespec {
        tv_sec: libc::time_t::try_from(timeout.as_secs()).unwrap_or(libc::time_t::MAX),
        tv_nsec: timeout.subsec_nanos().into(),
    };
    // SAFETY: a live array of pollfd of the length given, a live timespec, no signal mask.
    unsafe { libc::ppoll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, &timeout, std::ptr::null()) };
    polled.iter().map(|p| p.revents != 0).collect()
}

/// CLOCK_BOOTTIME in nanoseconds. Async-signal-safe.
pub(crate) fn boottime_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a live timespec; CLOCK_BOOTTIME exists on every kernel we run on, so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// CLOCK_MONOTONIC in nanoseconds: systemd's timestamps are on it.
pub(crate) fn monotonic_ns() -> i64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a live timespec; CLOCK_MONOTONIC always exists, so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// A Unix stream socket to `path`, through a relay child forked into the PID
/// namespace `pid_ns`. A container's systemd refuses a peer it cannot see: the pid of
/// the connecting process (SO_PEERCRED) and of every sender (SCM_CREDENTIALS) reads 0
/// in its namespace for a process of an outer one. So a child born inside connects and
/// copies bytes both ways between that connection and one end of a socket pair, whose
/// other end is returned. It ends when either side closes, and with the thread that
/// forked it (PR_SET_PDEATHSIG), which stays to reap it. The thread is one of its own,
/// since setns(CLONE_NEWPID) changes where the calling thread's children go.
pub(crate) fn relay_in_pid_namespace(path: &Path, pid_ns: OwnedFd, mount_ns: OwnedFd) -> io::Result<OwnedFd> {
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return Err(io::Error::from(io::ErrorKind::InvalidInput));
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (dst, &src) in addr.sun_path.iter_mut().zip(bytes) {
        *dst = src as c_char;
    }
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    let mut pair = [0 as RawFd; 2];
    // SAFETY: socketpair() writes two descriptors into a live array; its result is checked.
    check(unsafe {
        libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0, pair.as_mut_ptr())
    })?;
    // SAFETY: both descriptors were just returned by socketpair() and are owned by nobody else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(pair[0]), OwnedFd::from_raw_fd(pair[1])) };
    let (tx, rx) = std::sync::mpsc::channel::<io::Result<()>>();
    std::thread::spawn(move || {
        let relay = theirs.as_raw_fd();
        // SAFETY: setns() on a namespace descriptor we own; it changes only where this
        // thread's children are born.
        if let Err(e) = check(unsafe { libc::setns(pid_ns.as_raw_fd(), libc::CLONE_NEWPID) }) {
            let _ = tx.send(Err(e));
            return;
        }
        // SAFETY: the child makes only async-signal-safe raw calls (prctl, socket,
        // connect, poll, read, write, _exit) on memory prepared before the fork.
        let child = match check(unsafe { libc::fork() }) {
            Ok(child) => child,
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        };
        if child == 0 {
            unsafe { relay_child(relay, mount_ns.as_raw_fd(), &addr, len) };
        }
        drop(theirs);
        let _ = tx.send(Ok(()));
        let mut wait_status = 0;
        // SAFETY: waits for the child we just forked, into a live integer.
        while unsafe { libc::waitpid(child, &mut wait_status, 0) } == -1
            && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted
        {}
    });
    rx.recv().map_err(|_| io::Error::other("the relay thread ended"))??;
    // The child's first byte says whether it connected: 0, or the errno of connect().
    let mut status = [0u8; 1];
    // SAFETY: reads into a live one-byte buffer from a descriptor we own.
    let n = unsafe { libc::read(ours.as_raw_fd(), status.as_mut_ptr().cast(), 1) };
    match (n, status[0]) {
        (1, 0) => Ok(ours),
        (1, errno) => Err(io::Error::from_raw_os_error(i32::from(errno))),
        _ => Err(io::Error::other("the relay into the container ended before connecting")),
    }
}

/// The relay child: connect, report, copy both ways until one side closes.
///
/// # Safety
/// Only to be called in a freshly forked child; it never returns.
unsafe fn relay_child(relay: RawFd, mount_ns: RawFd, addr: &libc::sockaddr_un, len: libc::socklen_t) -> ! {
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        libc::setns(mount_ns, libc::CLONE_NEWNS);
        let manager = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        let connected =
            manager >= 0 && libc::connect(manager, (addr as *const libc::sockaddr_un).cast(), len) == 0;
        let status: u8 = if connected { 0 } else { (*libc::__errno_location()).clamp(1, 255) as u8 };
        libc::write(relay, (&raw const status).cast(), 1);
        if !connected {
            libc::_exit(1);
        }
        let mut fds = [
            libc::pollfd { fd: relay, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: manager, events: libc::POLLIN, revents: 0 },
        ];
        let mut buf = [0u8; 8192];
        loop {
            if libc::poll(fds.as_mut_ptr(), 2, -1) < 0 {
                if *libc::__errno_location() == libc::EINTR {
                    continue;
                }
                libc::_exit(1);
            }
            for (from, to) in [(0usize, manager), (1usize, relay)] {
                if fds[from].revents == 0 {
                    continue;
                }
                let n = libc::read(fds[from].fd, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    libc::_exit(0);
                }
                let mut done = 0;
                while done < n as usize {
                    let w = libc::write(to, buf.as_ptr().add(done).cast(), n as usize - done);
                    if w <= 0 {
                        libc::_exit(0);
                    }
                    done += w as usize;
                }
            }
        }
    }
}

/// A non-blocking, close-on-exec inotify descriptor.
pub(crate) fn inotify() -> io::Result<OwnedFd> {
    // SAFETY: inotify_init1 takes flags only.
    let fd = check(unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) })?;
    // SAFETY: the descriptor was just opened and belongs to no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Asks `inotify` to report writes to `path` (`IN_MODIFY`, `IN_CLOSE_WRITE`).
pub(crate) fn watch_writes(inotify: BorrowedFd<'_>, path: &Path) -> io::Result<()> {
    let path = c_path(path)?;
    let mask = libc::IN_MODIFY | libc::IN_CLOSE_WRITE;
    // SAFETY: an inotify descriptor and a NUL-terminated path that lives across the call.
    check(unsafe { libc::inotify_add_watch(inotify.as_raw_fd(), path.as_ptr(), mask) }).map(drop)
}

/// A pidfd that pins process `pid`, so that signals sent through it never reach a
/// process that reused the number.
pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open(pid, 0) takes integers only.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    let fd = RawFd::try_from(fd).ok().filter(|&fd| fd >= 0).ok_or_else(io::Error::last_os_error)?;
    // SAFETY: the descriptor was just opened and belongs to no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn pidfd_send_signal(pidfd: BorrowedFd<'_>, signal: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal(pidfd, signal, NULL info, 0 flags).
    let r = unsafe {
        libc::syscall(libc::SYS_pidfd_send_signal, pidfd.as_raw_fd(), signal, std::ptr::null::<()>(), 0u32)
    };
    if r == 0 { Ok(()) } else { Err(io::Error::last_os_error()) }
}

/// Reaps our child `pid`, retrying on EINTR: its resource use (its own and that of
/// every descendant it waited for).
pub(crate) fn wait4(pid: i32) -> io::Result<libc::rusage> {
    let mut status = 0;
    // SAFETY: rusage is plain old data; all zeroes is a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: waiting for our own child with live out-pointers.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        match check(reaped) {
            Ok(_) => return Ok(usage),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid takes no argument and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

pub(crate) fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no argument and cannot fail.
    unsafe { libc::geteuid() }
}

/// A user's entry of the password database.
pub(crate) struct Passwd {
    pub(crate) name: String,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) home: PathBuf,
}

/// The password database's entry for `name` (`getpwnam_r`), `None` when there is none.
pub(crate) fn user_by_name(name: &str) -> io::Result<Option<Passwd>> {
    let c_name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let mut buffer: Vec<c_char> = vec![0; 1024];
    loop {
        // SAFETY: passwd is plain old data; all zeroes is a valid value.
        let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: a NUL-terminated name, a live entry, a buffer of the length given and
        // an out-pointer, all living across the call.
        let errno = unsafe {
            libc::getpwnam_r(c_name.as_ptr(), &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found)
        };
        match errno {
            0 if found.is_null() => return Ok(None),
            0 => {
                // SAFETY: on success pw_name and pw_dir are NUL-terminated strings in `buffer`.
                let (name, home) = unsafe { (CStr::from_ptr(entry.pw_name), CStr::from_ptr(entry.pw_dir)) };
                return Ok(Some(Passwd {
                    name: name.to_string_lossy().into_owned(),
                    uid: entry.pw_uid,
                    gid: entry.pw_gid,
                    home: PathBuf::from(OsStr::from_bytes(home.to_bytes())),
                }));
            }
            libc::ERANGE if buffer.len() < 1 << 20 => buffer.resize(buffer.len() * 4, 0),
            errno => return Err(io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The groups of `user` (`getgrouplist`), `gid` included.
pub(crate) fn group_list(user: &CStr, gid: u32) -> io::Result<Vec<u32>> {
    const MOST_GROUPS: libc::c_int = 65536;
    let mut room: libc::c_int = 64;
    loop {
        let mut groups: Vec<libc::gid_t> = vec![0; room as usize];
        let mut count = room;
        // SAFETY: a NUL-terminated name, and an array whose length is in `count`.
        let r = unsafe { libc::getgrouplist(user.as_ptr(), gid, groups.as_mut_ptr(), &mut count) };
        if r >= 0 {
            groups.truncate(count as usize);
            return Ok(groups);
        }
        // glibc says in `count` how many there are; others leave it, so double.
        room = if count > room { count } else { room * 2 };
        if room > MOST_GROUPS {
            return Err(io::Error::from_raw_os_error(libc::EINVAL));
        }
    }
}

/// What failed in the command process before or at exec, by the number it reports.
pub(crate) const EXEC_STAGES: [&str; 6] = ["dup2", "setgroups", "setgid", "setuid", "chdir", "exec"];

/// Everything the children need, prepared before forking.
pub(crate) struct ChildPlan {
    pub(crate) program: CString,
    /// NULL-terminated pointers into strings that outlive the fork.
    pub(crate) argv_ptrs: Vec<*const c_char>,
    pub(crate) envp_ptrs: Vec<*const c_char>,
    pub(crate) cwd: Option<CString>,
    pub(crate) creds: Option<(libc::uid_t, libc::gid_t, Vec<libc::gid_t>)>,
    pub(crate) stdio: [Option<RawFd>; 3],
    pub(crate) resume_r: RawFd,
    pub(crate) err_w: RawFd,
    pub(crate) report_w: RawFd,
}

/// Forks the shepherd, which forks the command (see spawn.rs); returns the shepherd's
/// pid. Only the parent returns.
pub(crate) fn fork_shepherd(plan: &ChildPlan) -> io::Result<i32> {
    // SAFETY: the child runs only async-signal-safe code over the prepared plan.
    let shepherd = check(unsafe { libc::fork() })?;
    if shepherd == 0 {
        // SAFETY: we are the freshly forked shepherd.
        unsafe { shepherd_main(plan) }
    }
    Ok(shepherd)
}

fn errno() -> i32 {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Writes one report; async-signal-safe.
unsafe fn report(fd: RawFd, r: Report) {
    let bytes = r.to_bytes();
    // SAFETY: a write from the stack; pipe writes of that size are atomic.
    unsafe { libc::write(fd, bytes.as_ptr().cast(), bytes.len()) };
}

/// Closes every descriptor from 3 up except those in `keep`; async-signal-safe.
unsafe fn close_all_except(keep: &mut [RawFd]) {
    keep.sort_unstable();
    let mut first: u32 = 3;
    for &fd in keep.iter() {
        if fd >= first as RawFd {
            if fd > first as RawFd {
                // SAFETY: closing a range of descriptors in a child that owns no Rust objects on them.
                unsafe { libc::syscall(libc::SYS_close_range, first, (fd - 1) as u32, 0u32) };
            }
            first = fd as u32 + 1;
        }
    }
    // SAFETY: as above.
    unsafe { libc::syscall(libc::SYS_close_range, first, u32::MAX, 0u32) };
}

unsafe fn shepherd_main(plan: &ChildPlan) -> ! {
    // SAFETY: only async-signal-safe system calls follow.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
        let pid = libc::fork();
        if pid == 0 {
            command_main(plan);
        }
        if pid < 0 {
            report(plan.report_w, Report { kind: Report::FORK_FAILED, errno: errno(), ..Report::default() });
            libc::_exit(1);
        }
        report(plan.report_w, Report { kind: Report::STARTED, pid, ..Report::default() });
        close_all_except(&mut [plan.report_w]);
        loop {
            let mut status = 0;
            let reaped = libc::waitpid(-1, &mut status, libc::__WALL);
            if reaped < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                break;
            }
            if reaped == pid {
                let exited = Report { kind: Report::EXITED, pid, status, time_ns: boottime_ns(), errno: 0 };
                report(plan.report_w, exited);
            }
        }
        libc::_exit(0)
    }
}

/// Sends the stage (an index of [`EXEC_STAGES`]) and errno, then exits 127.
unsafe fn fail(err_w: RawFd, stage: i32) -> ! {
    let (s, e) = (stage.to_ne_bytes(), errno().to_ne_bytes());
    let msg = [s[0], s[1], s[2], s[3], e[0], e[1], e[2], e[3]];
    // SAFETY: writing 8 bytes from the stack, then exiting without running destructors.
    unsafe {
        libc::write(err_w, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

unsafe fn command_main(plan: &ChildPlan) -> ! {
    // SAFETY: only async-signal-safe system calls follow; the plan's pointers stay
    // valid because the forked address space is a copy of the parent's.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGPIPE, libc::SIGCHLD] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        for (target, source) in plan.stdio.iter().enumerate() {
            if let Some(fd) = *source
                && libc::dup2(fd, target as RawFd) < 0
            {
                fail(plan.err_w, 0);
            }
        }
        close_all_except(&mut [plan.resume_r, plan.err_w]);
        let mut byte = 0u8;
        loop {
            let n = libc::read(plan.resume_r, (&mut byte as *mut u8).cast(), 1);
            if n == 1 {
                break;
            }
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            libc::_exit(126);
        }
        libc::close(plan.resume_r);
        if let Some((uid, gid, groups)) = &plan.creds {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0 {
                fail(plan.err_w, 1);
            }
            if libc::setgid(*gid) != 0 {
                fail(plan.err_w, 2);
            }
            if libc::setuid(*uid) != 0 {
                fail(plan.err_w, 3);
            }
        }
        if let Some(cwd) = &plan.cwd
            && libc::chdir(cwd.as_ptr()) != 0
        {
            fail(plan.err_w, 4);
        }
        libc::execve(plan.program.as_ptr(), plan.argv_ptrs.as_ptr(), plan.envp_ptrs.as_ptr());
        fail(plan.err_w, 5)
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use super::*;

    #[test]
    fn root_has_a_home_and_is_in_its_own_group() {
        let root = user_by_name("root").unwrap().expect("every system has root");
        assert_eq!((root.name.as_str(), root.uid, root.gid), ("root", 0, 0));
        assert!(root.home.is_absolute());
        assert!(group_list(c"root", 0).unwrap().contains(&0));
        assert!(user_by_name("no-such-user-coldstart").unwrap().is_none());
    }

    #[test]
    fn ready_descriptors_are_told_apart_from_quiet_ones() {
        let (quiet_r, _quiet_w) = pipe(true).unwrap();
        let (ready_r, ready_w) = pipe(true).unwrap();
        assert_eq!(write(ready_w.as_fd(), b"x").unwrap(), 1);
        let ready = poll_readable(&[quiet_r.as_fd(), ready_r.as_fd()], Duration::from_millis(1));
        assert_eq!(ready, [false, true]);
        let mut buf = [0u8; 4];
        assert_eq!(read(ready_r.as_fd(), &mut buf).unwrap(), 1);
        assert_eq!(read(quiet_r.as_fd(), &mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }
}
