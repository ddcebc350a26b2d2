//! Starting a command paused. Two forks: a *shepherd* process, which makes itself
//! a child subreaper (so every descendant, double-forked daemons included, stays
//! below it) and ignores SIGINT/SIGTERM, and under it the *command* process, which
//! waits on a pipe before it execs. The caller learns the command's pid while it
//! waits (to put it into a tracing filter), then [`PausedChild::resume`]s it.
//!
//! After `fork` in a multi-threaded program only async-signal-safe calls are
//! allowed, so everything the two children need (argv, envp, the resolved program
//! path, credentials) is prepared before forking, and the children's code (in
//! sys.rs) makes raw system calls only: no allocation, no locks.

use std::ffi::{CString, c_char};
use std::fs::OpenOptions;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use crate::clock::{BootNanos, boottime_ns};
use crate::command::{Command, Credentials, Input, Output, child_env, resolve_program, resolve_user};
use crate::error::{LaunchError, Result};
use crate::interrupt::Interrupts;
use crate::marks::MarksFile;
use crate::output::{OutputPipe, Stream};
use crate::running::{Launch, Running};
use crate::sys::{self, ChildPlan, EXEC_STAGES, Report};

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
    sys::pipe(false).map_err(|e| LaunchError::io("pipe", e))
}

fn dev_null(write: bool) -> Result<OwnedFd> {
    let file = OpenOptions::new().read(!write).write(write).open("/dev/null");
    file.map(OwnedFd::from).map_err(|e| LaunchError::file("/dev/null", e))
}

fn set_nonblocking(fd: &OwnedFd) -> Result<()> {
    sys::set_nonblocking(fd.as_fd()).map_err(|e| LaunchError::io("fcntl", e))
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
        let plan = ChildPlan {
            program,
            argv_ptrs,
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

        let forked = sys::fork_shepherd(&plan);
        drop((plan, argv, envp));
        let shepherd =
            forked.map_err(|source| LaunchError::Spawn { program: program_name.clone(), source })?;
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
        launch.uid = creds.as_ref().map_or_else(sys::effective_uid, |c| c.uid);
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
        let wrote = sys::write(resume_w.as_fd(), &[1]);
        drop(resume_w);
        if let Err(source) = wrote {
            return Err(LaunchError::Spawn { program: launch.program.clone(), source });
        }
        let mut buf = [0u8; 8];
        let mut got = 0;
        while got < buf.len() {
            match sys::read(err_r.as_fd(), &mut buf[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(LaunchError::io("reading the exec status", e)),
            }
        }
        if got == buf.len() {
            let stage = i32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]);
            let errno = i32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]);
            launch.kill_and_reap();
            return Err(LaunchError::Exec {
                program: launch.program.clone(),
                what: EXEC_STAGES.get(stage as usize).copied().unwrap_or("exec"),
                source: std::io::Error::from_raw_os_error(errno),
            });
        }
        launch.started_ns = started_ns;
        Ok(Running::new(launch))
    }
}
