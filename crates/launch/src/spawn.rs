//! Starting a command paused. Two forks: a *shepherd* process, which makes itself
//! a child subreaper (so every descendant, double-forked daemons included, stays
//! below it) and ignores SIGINT/SIGTERM, and under it the *command* process, which
//! waits on a pipe before it execs. The caller learns the command's pid while it
//! waits (to put it into a tracing filter), then [`PausedChild::resume`]s it.
//!
//! After `fork` in a multi-threaded program only async-signal-safe calls are
//! allowed, so everything the two children need (argv, envp, the resolved program
//! path, credentials) is prepared before forking and the child code below uses raw
//! system calls only: no allocation, no locks.

use std::ffi::{CString, c_char};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use crate::clock::{BootNanos, boottime_ns};
use crate::command::{Command, Credentials, Input, Output, child_env, resolve_program, resolve_user};
use crate::error::{LaunchError, Result};
use crate::interrupt::Interrupts;
use crate::marks::MarksFile;
use crate::output::{OutputPipe, Stream};
use crate::running::{Launch, Running};

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

    pub(crate) fn from_bytes(bytes: &[u8]) -> Report {
        let mut r = Report::default();
        let n = bytes.len().min(Report::SIZE);
        // SAFETY: Report is plain old data; at most SIZE bytes are copied into it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut r as *mut Report).cast::<u8>(), n) };
        r
    }
}

/// What failed in the command process before or at exec, sent over the error pipe.
const STAGES: [&str; 6] = ["dup2", "setgroups", "setgid", "setuid", "chdir", "exec"];

/// Everything the children need, prepared before forking.
struct Plan {
    program: CString,
    _argv: Vec<CString>,
    argv_ptrs: Vec<*const c_char>,
    _envp: Vec<CString>,
    envp_ptrs: Vec<*const c_char>,
    cwd: Option<CString>,
    creds: Option<(libc::uid_t, libc::gid_t, Vec<libc::gid_t>)>,
    stdio: [Option<RawFd>; 3],
    resume_r: RawFd,
    err_w: RawFd,
    report_w: RawFd,
}

/// A command forked but not yet exec'd: it waits for [`PausedChild::resume`].
/// Dropping it without resuming ends the command before it ever runs.
pub struct PausedChild {
    launch: Launch,
    resume_w: OwnedFd,
    err_r: OwnedFd,
}

fn cstring(bytes: impl Into<Vec<u8>>, what: &str, program: &str) -> Result<CString> {
    CString::new(bytes).map_err(|_| LaunchError::Spawn {
        program: program.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{what} contains a NUL byte")),
    })
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|e| LaunchError::io("pipe", e))
}

fn dev_null(write: bool) -> Result<OwnedFd> {
    let mode = if write { rustix::fs::OFlags::WRONLY } else { rustix::fs::OFlags::RDONLY };
    rustix::fs::open("/dev/null", mode | rustix::fs::OFlags::CLOEXEC, rustix::fs::Mode::empty())
        .map_err(|e| LaunchError::file("/dev/null", e))
}

fn set_nonblocking(fd: &OwnedFd) -> Result<()> {
    let flags = rustix::fs::fcntl_getfl(fd).map_err(|e| LaunchError::io("fcntl", e))?;
    rustix::fs::fcntl_setfl(fd, flags | rustix::fs::OFlags::NONBLOCK).map_err(|e| LaunchError::io("fcntl", e))
}

/// Where one of the command's output streams goes: the fd the child dup2s, and our read end.
fn output_target(output: Output, stream: Stream) -> Result<(Option<OwnedFd>, Option<OutputPipe>)> {
    match output {
        Output::Inherit => Ok((None, None)),
        Output::Null => Ok((Some(dev_null(true)?), None)),
        Output::Watch { echo } => {
            let (read, write) = pipe()?;
            set_nonblocking(&read)?;
            Ok((Some(write), Some(OutputPipe::new(read, echo.then_some(stream)))))
        }
    }
}

impl PausedChild {
    /// Forks the command (see the module docs); returns once its pid is known.
    pub fn spawn(command: &Command) -> Result<PausedChild> {
        let program_name = command.program();
        let first = command.argv.first().ok_or(LaunchError::EmptyCommand)?;
        let creds: Option<Credentials> = resolve_user(&command.run_as)?;
        let marks = MarksFile::create(creds.as_ref().map(|c| (c.uid, c.gid)))?;
        let envp = child_env(&command.env, creds.as_ref(), marks.path());
        let program_path = resolve_program(first, &envp)?;
        let env_value = |name: &str| {
            envp.iter()
                .find_map(|kv| kv.to_str().ok()?.strip_prefix(name)?.strip_prefix('=').map(str::to_owned))
        };
        let display = env_value("DISPLAY");
        let wayland = env_value("WAYLAND_DISPLAY").is_some_and(|d| !d.is_empty());
        use std::os::unix::ffi::OsStrExt;
        let program = cstring(program_path.as_os_str().as_bytes(), "the program path", &program_name)?;
        let argv: Vec<CString> = command
            .argv
            .iter()
            .map(|a| cstring(a.as_bytes(), "an argument", &program_name))
            .collect::<Result<_>>()?;
        let cwd = command
            .cwd
            .as_deref()
            .map(|d| cstring(d.as_os_str().as_bytes(), "the directory", &program_name))
            .transpose()?;

        let stdin = match command.stdin {
            Input::Inherit => None,
            Input::Null => Some(dev_null(false)?),
        };
        let (stdout_src, stdout_pipe) = output_target(command.stdout, Stream::Stdout)?;
        let (stderr_src, stderr_pipe) = output_target(command.stderr, Stream::Stderr)?;
        let (resume_r, resume_w) = pipe()?;
        let (err_r, err_w) = pipe()?;
        let (report_r, report_w) = pipe()?;
        let interrupts = Interrupts::catch()?;

        let mut argv_ptrs: Vec<*const c_char> = argv.iter().map(|a| a.as_ptr()).collect();
        argv_ptrs.push(std::ptr::null());
        let mut envp_ptrs: Vec<*const c_char> = envp.iter().map(|e| e.as_ptr()).collect();
        envp_ptrs.push(std::ptr::null());
        let plan = Plan {
            program,
            _argv: argv,
            argv_ptrs,
            _envp: envp,
            envp_ptrs,
            cwd,
            creds: creds.as_ref().map(|c| (c.uid, c.gid, c.groups.clone())),
            stdio: [
                stdin.as_ref().map(|f| f.as_raw_fd()),
                stdout_src.as_ref().map(|f| f.as_raw_fd()),
                stderr_src.as_ref().map(|f| f.as_raw_fd()),
            ],
            resume_r: resume_r.as_raw_fd(),
            err_w: err_w.as_raw_fd(),
            report_w: report_w.as_raw_fd(),
        };

        // SAFETY: the child runs only async-signal-safe code over the prepared plan.
        let shepherd = unsafe { libc::fork() };
        if shepherd < 0 {
            return Err(LaunchError::Spawn {
                program: program_name,
                source: std::io::Error::last_os_error(),
            });
        }
        if shepherd == 0 {
            // SAFETY: we are the freshly forked shepherd.
            unsafe { shepherd_main(&plan) }
        }
        drop((resume_r, err_w, report_w, stdin, stdout_src, stderr_src));

        let mut launch = Launch::new(
            shepherd,
            program_name.clone(),
            report_r,
            stdout_pipe,
            stderr_pipe,
            marks,
            interrupts,
        );
        launch.display = display;
        launch.wayland = wayland;
        let first = launch.read_first_report();
        match first {
            Some(r) if r.kind == Report::STARTED => launch.root_pid = r.pid,
            Some(r) if r.kind == Report::FORK_FAILED => {
                return Err(LaunchError::Spawn {
                    program: program_name,
                    source: std::io::Error::from_raw_os_error(r.errno),
                });
            }
            _ => {
                return Err(LaunchError::Spawn {
                    program: program_name,
                    source: std::io::Error::other("the launcher process died"),
                });
            }
        }
        set_nonblocking(launch.report_fd())?;
        Ok(PausedChild { launch, resume_w, err_r })
    }

    /// The command's pid (the process that will exec the program), known before it runs.
    pub fn pid(&self) -> i32 {
        self.launch.root_pid
    }

    /// The shepherd's pid: every process of the command's tree descends from it.
    pub fn tree_root(&self) -> i32 {
        self.launch.shepherd
    }

    /// The marks file named in the command's `COLDSTART_MARKS`.
    pub fn marks_path(&self) -> &Path {
        self.launch.marks.path()
    }

    /// Moves the paused command into a cgroup (v1 or v2 directory, by writing its pid
    /// to `cgroup.procs`), so that everything it starts is accounted there.
    pub fn join_cgroup(&self, cgroup: &Path) -> Result<()> {
        let procs = cgroup.join("cgroup.procs");
        std::fs::write(&procs, self.pid().to_string()).map_err(|e| LaunchError::file(procs, e))
    }

    /// Lets the command exec. Returns once the exec has happened (or failed, which
    /// is then the error, e.g. "cannot run `x`: exec failed: Permission denied").
    pub fn resume(self) -> Result<Running> {
        let PausedChild { mut launch, resume_w, err_r } = self;
        let started_ns: BootNanos = boottime_ns();
        let wrote = rustix::io::write(&resume_w, &[1]);
        drop(resume_w);
        if let Err(e) = wrote {
            return Err(LaunchError::Spawn { program: launch.program.clone(), source: e.into() });
        }
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < buf.len() {
            match rustix::io::read(err_r.as_fd(), &mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(LaunchError::io("reading the exec status", e)),
            }
        }
        if got == buf.len() {
            let stage = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            launch.kill_and_reap();
            return Err(LaunchError::Exec {
                program: launch.program.clone(),
                what: STAGES.get(stage as usize).copied().unwrap_or("exec"),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        launch.started_ns = started_ns;
        Ok(Running::new(launch))
    }
}

fn errno() -> i32 {
    // SAFETY: reading the thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Writes one report; async-signal-safe.
unsafe fn report(fd: RawFd, r: Report) {
    // SAFETY: `r` is plain old data of SIZE bytes; pipe writes of that size are atomic.
    unsafe { libc::write(fd, (&r as *const Report).cast(), Report::SIZE) };
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

unsafe fn shepherd_main(plan: &Plan) -> ! {
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

unsafe fn fail(err_w: RawFd, stage: i32) -> ! {
    let (s, e) = (stage.to_ne_bytes(), errno().to_ne_bytes());
    let msg = [s[0], s[1], s[2], s[3], e[0], e[1], e[2], e[3]];
    // SAFETY: writing 8 bytes from the stack, then exiting without running destructors.
    unsafe {
        libc::write(err_w, msg.as_ptr().cast(), msg.len());
        libc::_exit(127)
    }
}

unsafe fn command_main(plan: &Plan) -> ! {
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
