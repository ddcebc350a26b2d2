//! The init= wrapper, as bootchart2's `bootchartd`: given to the kernel as
//! `init=/usr/local/sbin/coldstart-init` (a link to coldstart, recognised by its name) or
//! run as `coldstart boot init [-- ARGS]` where something else starts PID 1 (a container),
//! it runs as PID 1 before systemd, mounts what the recorder needs if it is missing
//! (/proc, /sys, /dev, a tmpfs /run, tracefs), starts `record --boot` with the options
//! of the kernel command line (`coldstart.until=`, `coldstart.timeout=`, `coldstart.init=`,
//! `coldstart.off`), waits for its `READY=1` (sd_notify's datagram, on a socket of its own
//! in /run) and then execs the real init with PID 1's arguments, so the recording covers
//! systemd from its first instruction. Where `boot enable --prefetch` installed the prefetch
//! service, the wrapper runs the service instead (its replay then starts before systemd, and
//! the unit's own start of it that boot steps aside). Nothing the recorder does may stop the
//! boot: any failure is one line on the console and the exec of the real init all the same.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt;
use std::os::unix::net::UnixDatagram;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use coldstart_launch::Until;

use crate::cmd::boot::{DEFAULT_TIMEOUT, DEFAULT_UNTIL, boot_conditions};
use crate::cmd::values;

/// The name under which coldstart is the init= wrapper (`ln -s coldstart coldstart-init`).
pub const INIT_NAME: &str = "coldstart-init";
/// The init the wrapper execs unless `coldstart.init=` or `--init` names another.
pub const DEFAULT_INIT: &str = "/sbin/init";
/// How long the wrapper waits for the recorder to say tracing is on before it execs the
/// real init anyway (a recorder that hangs must not hold the boot).
const READY_WAIT: Duration = Duration::from_secs(60);
/// Prefix of the wrapper's console lines.
const SAY: &str = "coldstart-init:";
/// Where the wrapper's notification socket lives (a tmpfs from the start of the boot).
const RUN_DIR: &str = "/run/coldstart";

/// Run as PID 1, start the boot recording, then exec the real init (the init= wrapper).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  # the kernel's init (the link is recognised by its name):
  sudo ln -s ../bin/coldstart /usr/local/sbin/coldstart-init
  #   kernel command line: init=/usr/local/sbin/coldstart-init coldstart.timeout=300
  # as the command a container runs as PID 1 (no -b), booting its systemd recorded:
  sudo systemd-nspawn -D /var/lib/machines/deb --register=no --keep-unit \\
      --capability=all --system-call-filter='fanotify_init fanotify_mark perf_event_open bpf' \\
      /usr/local/bin/coldstart boot init --timeout 60

Options come from these flags, else from the kernel command line (coldstart.until=WHEN,
repeatable; coldstart.timeout=DURATION; coldstart.init=PATH; coldstart.off records nothing),
else the defaults of `boot enable`. A bad value is said on the console and its default used.
Whatever fails, the real init is exec'd with the arguments after `--`. See docs/boot.md.")]
pub struct InitArgs {
    /// When the boot is over (repeatable: all must be met) [default: coldstart.until=, else unit:multi-user.target].
    #[arg(long, value_name = "WHEN")]
    pub until: Vec<Until>,
    /// Stop recording after this long even if the conditions are not met [default: coldstart.timeout=, else 120 s].
    #[arg(long, value_name = "DURATION", value_parser = values::positive_duration)]
    pub timeout: Option<Duration>,
    /// The real init, exec'd once recording has started [default: coldstart.init=, else /sbin/init].
    #[arg(long, value_name = "PATH")]
    pub init: Option<PathBuf>,
    /// The real init's arguments (PID 1's own, e.g. those the kernel passed on).
    #[arg(last = true, value_name = "ARGS")]
    pub args: Vec<OsString>,
}

/// What the wrapper does: record until these conditions or this timeout, then (or
/// rather, once recording has started) exec `init`.
#[derive(Clone, Debug, PartialEq)]
pub struct InitOptions {
    pub until: Vec<Until>,
    pub timeout: Duration,
    pub init: PathBuf,
    /// False with `coldstart.off`: exec the real init at once.
    pub record: bool,
}

impl Default for InitOptions {
    fn default() -> InitOptions {
        InitOptions {
            until: vec![DEFAULT_UNTIL.parse().expect("the default condition parses")],
            timeout: DEFAULT_TIMEOUT,
            init: PathBuf::from(DEFAULT_INIT),
            record: true,
        }
    }
}

/// The words of a kernel command line, as the kernel's `next_arg` splits them: on
/// whitespace, except inside double quotes, which are removed.
fn cmdline_words(text: &str) -> Vec<String> {
    crate::cmd::boot::quoted_words(text, false)
}

/// The wrapper's options from a kernel command line (`/proc/cmdline`): the `coldstart.*`
/// words, each bad one replaced by its default, with one line saying so in the second value.
/// Words after `--` are the init's, not the kernel's, and are not looked at.
pub fn options_from_cmdline(text: &str) -> (InitOptions, Vec<String>) {
    let mut options = InitOptions::default();
    let mut warnings = Vec::new();
    let mut until = Vec::new();
    for word in cmdline_words(text) {
        if word == "--" {
            break;
        }
        let Some(rest) = word.strip_prefix("coldstart.") else { continue };
        let (key, value) = match rest.split_once('=') {
            Some((key, value)) => (key, Some(value)),
            None => (rest, None),
        };
        match (key, value) {
            ("until", Some(value)) => match value.parse::<Until>() {
                Ok(u) if boot_conditions(std::slice::from_ref(&u)).is_ok() && u != Until::Exit => until.push(u),
                Ok(u) => warnings.push(format!(
                    "coldstart.until={u} has no meaning for a boot (use unit:, mark:, idle or a window): ignored"
                )),
                Err(e) => warnings.push(format!("coldstart.until={value}: {e}: ignored")),
            },
            ("timeout", Some(value)) => match values::positive_duration(value) {
                Ok(t) => options.timeout = t,
                Err(e) => warnings.push(format!(
                    "coldstart.timeout={value}: {e}: the default, {} s, is used",
                    DEFAULT_TIMEOUT.as_secs()
                )),
            },
            ("init", Some(value)) if value.starts_with('/') => options.init = PathBuf::from(value),
            ("init", Some(value)) => {
                warnings.push(format!("coldstart.init={value}: not an absolute path: {DEFAULT_INIT} is used"))
            }
            ("off", None) => options.record = false,
            _ => warnings.push(format!("{word}: not an option of coldstart-init (until=, timeout=, init=, off): ignored")),
        }
    }
    if !until.is_empty() {
        options.until = until;
    }
    (options, warnings)
}

/// The options of `boot init`'s flags over those of the kernel command line.
fn merge(args: &InitArgs, kernel: InitOptions) -> anyhow::Result<InitOptions> {
    if args.until.contains(&Until::Exit) {
        bail!(
            "--until exit has no meaning for a boot (there is no command): use unit:, mark:, idle or a window"
        );
    }
    let until = match args.until.is_empty() {
        true => kernel.until,
        false => boot_conditions(&args.until)?,
    };
    if let Some(init) = &args.init
        && !init.is_absolute()
    {
        bail!("--init {}: must be an absolute path", init.display());
    }
    Ok(InitOptions {
        until,
        timeout: args.timeout.unwrap_or(kernel.timeout),
        init: args.init.clone().unwrap_or(kernel.init),
        record: kernel.record,
    })
}

/// True when this process was started under the wrapper's name (`init=…/coldstart-init`).
pub fn invoked_as_init() -> bool {
    std::env::args_os()
        .next()
        .is_some_and(|argv0| Path::new(&argv0).file_name().is_some_and(|n| n == INIT_NAME))
}

/// `coldstart-init ARGS…`, as the kernel starts it: every argument is the real init's.
pub fn run_as_link() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    if std::process::id() != 1 {
        eprintln!(
            "{SAY} error: it is the init= wrapper and runs as PID 1 only (init=/usr/local/sbin/coldstart-init)"
        );
        return ExitCode::from(2);
    }
    let empty = InitArgs { until: Vec::new(), timeout: None, init: None, args };
    wrap(&empty)
}

/// `coldstart boot init`.
pub fn run(args: InitArgs) -> anyhow::Result<ExitCode> {
    if std::process::id() != 1 {
        bail!(
            "boot init is the init= wrapper: it runs as PID 1 only (init=/usr/local/sbin/coldstart-init, or a container's command)"
        );
    }
    // Flags are checked before anything is done: a bad one is the caller's error, said at once.
    merge(&args, InitOptions::default())?;
    Ok(wrap(&args))
}

/// Mounts, starts the recorder, waits for it, execs the real init; returns only when no
/// init at all could be exec'd.
fn wrap(args: &InitArgs) -> ExitCode {
    let started_ns = monotonic_ns();
    for line in mount_api_filesystems() {
        eprintln!("{SAY} {line}");
    }
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let (kernel, warnings) = options_from_cmdline(&cmdline);
    for w in warnings {
        eprintln!("{SAY} {w}");
    }
    let fallback_init = kernel.init.clone();
    let options = merge(args, kernel).unwrap_or_else(|e| {
        eprintln!("{SAY} {e}: the kernel command line's options are used");
        options_from_cmdline(&cmdline).0
    });
    if options.record {
        let mut service = crate::cmd::boot::enabled_service_words(Path::new("/"));
        if service.is_some() && !Path::new("/var/lib").is_dir() {
            eprintln!(
                "{SAY} /var/lib is not there before systemd (a /var of its own?): the unit runs the prefetch service"
            );
            service = None;
        }
        let what = match service {
            Some(_) => "the prefetch service runs this boot (pid",
            None => "recording the boot (recorder pid",
        };
        match start_recorder(&options, service.as_deref(), started_ns) {
            Ok(pid) => eprintln!("{SAY} {what} {pid}); starting {}", options.init.display()),
            Err(e) => eprintln!(
                "{SAY} the boot is not recorded: {}; starting {}",
                coldstart_trace::error_chain(e.as_ref()),
                options.init.display()
            ),
        }
    }
    exec_init(&options.init, &fallback_init, &args.args)
}

fn is_mount_point(path: &str) -> bool {
    std::fs::read_to_string("/proc/self/mountinfo")
        .is_ok_and(|info| info.lines().any(|l| l.split(' ').nth(4) == Some(path)))
}

/// Mounts /proc, /sys, /dev, /run and tracefs where they are missing, as systemd would
/// (it keeps API filesystems that are mounted already); says what it mounted or could not.
fn mount_api_filesystems() -> Vec<String> {
    use nix::mount::{MsFlags, mount};
    let quiet = MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    let mut said = Vec::new();
    let mut one =
        |missing: bool, source: &str, target: &str, fstype: &str, flags: MsFlags, data: Option<&str>| {
            if !missing {
                return;
            }
            match mount(Some(source), target, Some(fstype), flags, data) {
                Ok(()) => said.push(format!("mounted {fstype} on {target}")),
                Err(e) => said.push(format!("cannot mount {fstype} on {target}: {e}")),
            }
        };
    one(!Path::new("/proc/self/stat").exists(), "proc", "/proc", "proc", quiet, None);
    one(!Path::new("/sys/kernel").exists(), "sysfs", "/sys", "sysfs", quiet, None);
    one(
        !Path::new("/dev/null").exists(),
        "devtmpfs",
        "/dev",
        "devtmpfs",
        MsFlags::MS_NOSUID,
        Some("mode=0755"),
    );
    one(
        !is_mount_point("/run"),
        "tmpfs",
        "/run",
        "tmpfs",
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_STRICTATIME,
        Some("mode=0755,size=20%,nr_inodes=800k"),
    );
    let tracing = Path::new("/sys/kernel/tracing");
    one(
        tracing.is_dir() && !tracing.join("instances").is_dir(),
        "nodev",
        "/sys/kernel/tracing",
        "tracefs",
        MsFlags::empty(),
        None,
    );
    said
}

/// CLOCK_MONOTONIC, the clock of systemd's unit timestamps.
fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map_or(0, |t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
}

/// Starts `coldstart record --boot`, or the prefetch service with its enabled options
/// `service` (it replays, records and learns as the unit would, from before systemd), and
/// waits for its `READY=1`; returns its pid.
fn start_recorder(options: &InitOptions, service: Option<&[String]>, started_ns: u64) -> anyhow::Result<u32> {
    let me = std::env::current_exe().context("cannot find the running coldstart binary (/proc/self/exe)")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(RUN_DIR)
        .with_context(|| format!("cannot create {RUN_DIR}"))?;
    let socket_path = Path::new(RUN_DIR).join(format!("init-notify-{}", std::process::id()));
    let _ = std::fs::remove_file(&socket_path);
    let socket = UnixDatagram::bind(&socket_path)
        .with_context(|| format!("cannot listen on {}", socket_path.display()))?;
    let _remove = RemoveOnDrop(socket_path.clone());
    socket.set_read_timeout(Some(Duration::from_millis(100)))?;
    let mut command = Command::new(&me);
    match service {
        Some(words) => {
            command.args(["boot", "service"]).args(words);
            command.arg("--init-started-ns").arg(started_ns.to_string());
        }
        None => {
            command.args(["record", "--boot", "--under-init-wrapper", "--timeout"]);
            command.arg(format!("{}", options.timeout.as_secs_f64()));
            for until in &options.until {
                command.arg("--until").arg(until.to_string());
            }
        }
    }
    command
        .env("NOTIFY_SOCKET", &socket_path)
        .env("TMPDIR", "/run")
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .stdin(Stdio::null())
        .process_group(0);
    let mut child = command.spawn().with_context(|| format!("cannot start {}", me.display()))?;
    let started = Instant::now();
    let mut buf = [0u8; 512];
    loop {
        match socket.recv(&mut buf) {
            Ok(n) if buf[..n].split(|&b| b == b'\n').any(|l| l == b"READY=1") => return Ok(child.id()),
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) => return Err(e).context("reading the recorder's notification"),
        }
        if let Some(status) = child.try_wait()? {
            bail!("the recorder ended before tracing was on ({status})");
        }
        if started.elapsed() > READY_WAIT {
            // Left running: it may still start, and systemd reaps it when it ends.
            bail!("the recorder did not say READY=1 within {} s", READY_WAIT.as_secs());
        }
    }
}

struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Execs `init` with `args` (the environment is PID 1's own); if that fails, the kernel's
/// own fallbacks, so that the machine still boots. Returns only when nothing could be exec'd.
fn exec_init(init: &Path, kernel_init: &Path, args: &[OsString]) -> ExitCode {
    let mut candidates: Vec<&Path> = vec![init, kernel_init];
    for other in ["/sbin/init", "/lib/systemd/systemd", "/etc/init", "/bin/init", "/bin/sh"] {
        candidates.push(Path::new(other));
    }
    candidates.dedup();
    let mut tried = Vec::new();
    for candidate in candidates {
        if tried.contains(&candidate) {
            continue;
        }
        tried.push(candidate);
        let error = Command::new(candidate).arg0(candidate).args(args).exec();
        eprintln!("{SAY} cannot exec {}: {error}", candidate.display());
    }
    eprintln!("{SAY} no init could be started");
    ExitCode::from(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn until(list: &[&str]) -> Vec<Until> {
        list.iter().map(|u| u.parse().unwrap()).collect()
    }

    #[test]
    fn a_command_line_without_coldstart_words_gives_the_defaults_of_boot_enable() {
        let (options, warnings) =
            options_from_cmdline("BOOT_IMAGE=/vmlinuz root=/dev/vda ro quiet console=ttyS0 init=/x\n");
        assert_eq!(options, InitOptions::default());
        assert_eq!(options.until, until(&["unit:multi-user.target"]));
        assert_eq!(options.timeout, Duration::from_secs(120));
        assert_eq!(options.init, Path::new("/sbin/init"));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn coldstart_words_set_the_options() {
        let (options, warnings) = options_from_cmdline(
            "root=/dev/vda coldstart.until=unit:graphical.target coldstart.until=idle:2000 \
             coldstart.timeout=300 coldstart.init=/lib/systemd/systemd \"coldstart.until=mark:up\"",
        );
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(options.until, until(&["unit:graphical.target", "idle:2000", "mark:up"]));
        assert_eq!(options.timeout, Duration::from_secs(300));
        assert_eq!(options.init, Path::new("/lib/systemd/systemd"));
        assert!(options.record);
        let (off, _) = options_from_cmdline("coldstart.off coldstart.timeout=2500ms");
        assert!(!off.record);
        assert_eq!(off.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn quoted_values_keep_their_spaces() {
        assert_eq!(cmdline_words("a \"b c\" d=\"e f\"  g"), ["a", "b c", "d=e f", "g"]);
        let (options, warnings) = options_from_cmdline("coldstart.until=\"window-name:/My App/\"");
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(options.until, until(&["window-name:/My App/"]));
    }

    #[test]
    fn bad_values_give_the_defaults_and_one_line_each() {
        let (options, warnings) = options_from_cmdline(
            "coldstart.timeout=0 coldstart.until=exit coldstart.until=output:ready coldstart.until=unit:nonsense \
             coldstart.init=sbin/init coldstart.speed=9 coldstart.until coldstart.timeout=abc",
        );
        assert_eq!(options, InitOptions::default());
        assert_eq!(warnings.len(), 8, "{warnings:#?}");
        assert!(warnings.iter().all(|w| !w.contains('\n')), "{warnings:#?}");
        assert!(
            warnings[0].starts_with("coldstart.timeout=0: ") && warnings[0].contains("120 s"),
            "{warnings:?}"
        );
        assert!(warnings[1].contains("no meaning for a boot"), "{warnings:?}");
        assert!(warnings[4].contains("not an absolute path"), "{warnings:?}");
        assert!(warnings[5].starts_with("coldstart.speed=9: not an option"), "{warnings:?}");
        // A good word among bad ones still counts.
        let (options, warnings) = options_from_cmdline("coldstart.until=idle:x coldstart.until=mark:up");
        assert_eq!(options.until, until(&["mark:up"]));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn words_after_the_double_dash_are_the_inits() {
        let (options, warnings) =
            options_from_cmdline("coldstart.timeout=30 -- coldstart.timeout=zzz single");
        assert_eq!(options.timeout, Duration::from_secs(30));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn flags_win_over_the_kernel_command_line() {
        let (kernel, _) =
            options_from_cmdline("coldstart.timeout=300 coldstart.until=mark:up coldstart.init=/a");
        let args = InitArgs {
            until: until(&["idle:500"]),
            timeout: Some(Duration::from_secs(30)),
            init: None,
            args: Vec::new(),
        };
        let merged = merge(&args, kernel.clone()).unwrap();
        assert_eq!(merged.until, until(&["idle:500"]));
        assert_eq!(merged.timeout, Duration::from_secs(30));
        assert_eq!(merged.init, Path::new("/a"));
        let none = InitArgs { until: Vec::new(), timeout: None, init: None, args: Vec::new() };
        assert_eq!(merge(&none, kernel.clone()).unwrap(), kernel);
        let relative = InitArgs { init: Some("sbin/init".into()), ..none };
        assert!(merge(&relative, kernel).is_err());
    }
}
