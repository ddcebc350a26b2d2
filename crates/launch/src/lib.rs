//! Starting a command and knowing when it is ready: the part of coldstart shared by
//! `record --until` and `bench`.
//!
//! # The life of a command
//!
//! ```no_run
//! use coldstart_launch::{Command, Ending, Output, PausedChild, Until, WaitOptions};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), coldstart_launch::LaunchError> {
//! let mut command = Command::new(["python3", "-c", "import json"]);
//! command.stdout(Output::Watch { echo: true }).stderr(Output::Watch { echo: true });
//!
//! // 1. Fork, paused before exec: the pid is known, nothing of the program ran yet.
//! let paused = PausedChild::spawn(&command)?;
//! let pid = paused.pid(); // e.g. write it to tracefs `set_event_pid` now
//!
//! // 2. Exec. Returns once exec happened; an exec failure is the error.
//! let mut running = paused.resume()?;
//!
//! // 3. Wait for readiness (here: the command exits), at most 60 s.
//! let until: Until = "exit".parse()?;
//! let options = WaitOptions { timeout: Some(Duration::from_secs(60)), ..WaitOptions::default() };
//! let outcome = running.wait(&until, &options)?;
//! println!("{} after {:?} (met: {})", outcome.reason, outcome.time_to_ready(), outcome.met);
//!
//! // 4. End the whole tree (SIGTERM, grace, SIGKILL) and reap it.
//! let finished = running.finish(&Ending::default())?;
//! println!("exit {:?}, CPU {:?}", finished.exit_status, finished.usage.map(|u| u.user + u.system));
//! # Ok(()) }
//! ```
//!
//! # What each step guarantees
//!
//! - **Paused start** ([`PausedChild::spawn`]): two forks. A *shepherd* process
//!   makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`, unprivileged) and
//!   ignores SIGINT/SIGTERM; under it the *command* process waits on a pipe. So the
//!   tree of the command is exactly the descendants of the shepherd
//!   ([`PausedChild::tree_root`]), double-forked daemons included, and the shepherd
//!   reaps all of them. The command gets stdin/stdout/stderr and no other
//!   descriptor of ours. [`PausedChild::join_cgroup`] can move it into a cgroup
//!   before it runs (for per-tree I/O statistics). Dropping a `PausedChild` ends the
//!   command before it ever runs.
//! - **The command** ([`Command`]): argv (the program is looked up in the
//!   command's own `PATH`), extra environment, working directory, credentials
//!   ([`RunAs`]: by default the `sudo` invoker when we run as root under sudo, with
//!   their supplementary groups and `HOME`/`USER`/`LOGNAME`; [`RunAs::Current`] keeps
//!   root), stdin ([`Input`]) and stdout/stderr ([`Output`]: inherited, null, or
//!   watched through a pipe, line by line, optionally echoed to ours).
//! - **Marks** ([`marks`]): every command gets a private, empty marks file, named
//!   in `COLDSTART_MARKS`; `coldstart mark NAME` (or any program) appends
//!   `UPTIME NAME[\tpid=N]` lines to it. [`marks::read`] / [`marks::parse`] return
//!   them with CLOCK_BOOTTIME nanosecond times. [`Finished::marks`] holds them all.
//! - **Readiness** ([`Until`], [`Running::wait`], [`Running::wait_all`]): `exit` (the command itself
//!   exits), `mark:NAME` (inotify on the marks file; the mark's own timestamp is the
//!   ready time), `output:REGEX` (a line of watched stdout/stderr; the time it was
//!   read), `idle[:MS]` (see [`idle`] for what quiet means), `window` (the first
//!   top-level X11 window mapped by a process of the tree), `window:CLASS` and
//!   `window-name:NAME` (a window of that class or title mapped by any process; see
//!   [`window`]), plus an overall timeout. Several conditions can be waited for at
//!   once: the start is ready when all are met, at the last one, and each met is a
//!   [`Milestone`] with its time and, when known, the process and thread that reached
//!   it. The [`Outcome`] gives the ready time on CLOCK_BOOTTIME (the clock of tracefs
//!   `trace_clock=boot` and of `/proc/uptime`), the [`Reason`] (`exit`, `mark:ready`,
//!   `idle:500`, `output:…`, `window:mate-panel`, `timeout`, `interrupted`), who
//!   reached it, whether every condition was met, and the exit status if the command
//!   exited (128 + signal when a signal killed it). If the whole tree ends before a
//!   `mark`, `output` or window condition holds, the reason is `exit` with
//!   `met == false`.
//! - **Signals** ([`interrupt`]): while a command runs, SIGINT and SIGTERM sent to
//!   us are caught and forwarded to every process of its tree; `wait` then returns
//!   `exit` if the command exits within [`WaitOptions::interrupt_grace`], else
//!   `interrupted`, and the caller can still write its results. A caller that runs
//!   several commands keeps an [`Interrupts`] of its own to stay interruptible
//!   between them.
//! - **Ending** ([`Running::finish`], [`Ending`]): SIGTERM + SIGCONT to every process
//!   of the tree, a grace period, then SIGKILL until the tree is empty; or SIGKILL
//!   at once; or, only if asked, leave it running. Targets are pinned with pidfds
//!   so a recycled pid is never signalled. Dropping a `Running` kills the tree.
//!   [`Finished::usage`] is the whole tree's user and system CPU, page faults and
//!   peak RSS (`wait4` of the shepherd), and, when sampled, its block I/O wait.
//!
//! Limits: if our own process is killed with SIGKILL, the command's tree is left
//! to init (nothing can run to end it); the `idle` condition is machine-wide.

mod clock;
mod command;
mod dbus;
mod error;
pub mod idle;
pub mod interrupt;
pub mod marks;
mod output;
mod running;
mod spawn;
mod sys;
pub mod systemd;
mod tree;
mod until;
pub mod window;

pub use clock::{BootNanos, boottime_ns};
pub use command::{Command, Credentials, Input, Output, RunAs, SudoInvoker, resolve_user};
pub use error::{LaunchError, Result};
pub use interrupt::Interrupts;
pub use marks::{MARKS_ENV, Mark, Marks};
pub use running::{Ending, Finished, Milestone, Outcome, Running, TreeUsage, WaitOptions};
pub use spawn::PausedChild;
pub use systemd::{Manager, ManagerChoice, ManagerKind, UnitSpec, UnitTimes};
pub use tree::{delay_accounting_enabled, tree_pids};
pub use until::{DEFAULT_IDLE_MS, Reason, Until};
pub use window::WindowPattern;
