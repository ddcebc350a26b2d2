//! `coldstart login enable|disable|status`: the prefetch service for a user's graphical
//! login, as `boot enable --prefetch` is for the boot. `enable` writes an XDG autostart
//! entry of the Initialization phase (the session manager runs it before the window
//! manager) that runs the hidden `login hello`. Recording needs root: a root session's hello
//! starts `login service` itself; another user's asks coldstart-login.socket, whose service
//! checks the caller's user and starts it. Either way the session goes on once the
//! recording runs. The service is `boot_service::serve` with the login's recording (the
//! whole system, lightly, until the session's readiness) and its state under
//! /var/lib/coldstart/login/UID.

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use coldstart_launch::Until;
use coldstart_record::RecordConfig;
use coldstart_trace::Trace;
use nix::unistd::{Uid, User};

use crate::cmd::boot::exec_word;
use crate::cmd::boot_service::{Service, Tuning};
use crate::cmd::values;

const STATE_ROOT: &str = "/var/lib/coldstart/login";
const OPTIONS: &str = "options";
const AUTOSTART: &str = ".config/autostart/coldstart-login.desktop";
const SOCKET_PATH: &str = "/run/coldstart/login.sock";
const SOCKET_UNIT: &str = "coldstart-login.socket";
const SERVICE_UNIT: &str = "coldstart-login@.service";
const SOCKET_TEXT: &str = include_str!("../../assets/coldstart-login.socket");
const SERVICE_TEXT: &str = include_str!("../../assets/coldstart-login@.service");
const UNIT_DIR: &str = "/etc/systemd/system";
const SOCKETS_WANTS: &str = "/etc/systemd/system/sockets.target.wants";
/// How long a session waits for the service's recording to start before it goes on.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
const DEFAULT_UNTIL: &str = "wm";

/// Prefetch a user's graphical login: a service that learns it, replays it, verifies the gain.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart login enable --prefetch --user alice --until wm --until window:mate-panel
  sudo coldstart login status --user alice
  sudo coldstart login disable --user alice --purge

See docs/sessions.md, \"A login's prefetch service\".")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    Enable(EnableArgs),
    /// Remove what `enable` wrote for the user (and the socket units once no user is left).
    Disable(DisableArgs),
    /// The user's recent logins under the service: role, time to readiness, plan used, decision.
    Status(UserArgs),
    /// What a login runs (the autostart entry): start the service, wait until it records.
    #[command(hide = true)]
    Hello(HelloArgs),
    /// One login under the service (started by `hello` or by coldstart-login@.service).
    #[command(hide = true)]
    Service(ServiceArgs),
}

#[derive(Debug, clap::Args)]
pub struct UserArgs {
    /// The user whose login it is [default: the user who ran sudo, else the current user].
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Where the service keeps the user's state [default: /var/lib/coldstart/login/UID].
    #[arg(long, hide = true, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// Install the login prefetch service for a user: a display manager's hook before the session,
/// or an autostart entry in it (and for a user other than root the socket it asks through).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart login enable --prefetch --user alice --until wm --until window:mate-panel
  sudo coldstart login enable --prefetch --user alice --until unit:user/graphical-session.target
  sudo coldstart login enable --prefetch --user alice --verify-boots 4 --learn-boots 3

The first --learn-boots logins (2) are recorded lightly (the whole system, to the last --until
condition) and planned; the next logins replay the plan alongside or not, in a random but
balanced order, until --verify-boots of each are timed; the plan is kept when the logins with
it are faster, and learnt again when it goes stale (--verify-boots … --learn-boots count logins
here). State and traces: /var/lib/coldstart/login/UID.

--start display-manager: lightdm's session-setup-script runs `coldstart login hello
--before-session` before each session (/etc/lightdm/lightdm.conf.d/50-coldstart-login.conf);
without lightdm, the line to give the display manager's root hook is printed. --start autostart:
~USER/.config/autostart/coldstart-login.desktop (the Initialization phase of MATE, GNOME and
other XDG session managers) and, for a user other than root, coldstart-login.socket and
coldstart-login@.service in /etc/systemd/system (started when systemd runs). `disable` removes
them. Both write /var/lib/coldstart/login/UID/options.")]
pub struct EnableArgs {
    #[command(flatten)]
    pub user: UserArgs,
    /// Required: the login's service prefetches (it learns, replays and verifies).
    #[arg(long)]
    pub prefetch: bool,
    /// When the login is ready (repeatable: all must be met): wm, window:CLASS, unit:user/NAME, mark:NAME.
    #[arg(long, value_name = "WHEN", default_value = DEFAULT_UNTIL)]
    pub until: Vec<Until>,
    /// Stop recording after this long even if the conditions are not met.
    #[arg(long, value_name = "DURATION", default_value = "120", value_parser = values::positive_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub tuning: Tuning,
    /// When the service starts: `display-manager`, before the session (lightdm's
    /// session-setup-script is set; other managers are told the line for their root hook), or
    /// `autostart`, from the session's autostart, before the window manager but after the
    /// session manager's own reads; `auto`: display-manager where lightdm is, else autostart.
    #[arg(long, value_enum, default_value = "auto")]
    pub start: Start,
    /// The coldstart binary the login runs [default: this one].
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// The user's home, where the autostart entry goes [default: from the password database].
    #[arg(long, hide = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// Leave the socket units out (a test that runs the socket itself).
    #[arg(long, hide = true)]
    pub no_units: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Start {
    Auto,
    Autostart,
    DisplayManager,
}

#[derive(Debug, clap::Args)]
pub struct DisableArgs {
    #[command(flatten)]
    pub user: UserArgs,
    /// Also remove the service's state for the user (history, plan, traces).
    #[arg(long)]
    pub purge: bool,
    #[arg(long, hide = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
}

#[derive(Debug, clap::Args)]
pub struct HelloArgs {
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// Run as root by a display manager before the session starts (lightdm's
    /// session-setup-script): the user is --user or $USER, and the login's time starts now.
    #[arg(long)]
    pub before_session: bool,
    #[arg(long, value_name = "NAME", requires = "before_session")]
    pub user: Option<String>,
    /// The socket a user other than root asks through.
    #[arg(long, value_name = "PATH", default_value = SOCKET_PATH)]
    pub socket: PathBuf,
}

#[derive(Debug, clap::Args)]
pub struct ServiceArgs {
    /// Started by coldstart-login.socket: the caller is the connection on standard input.
    #[arg(long, conflicts_with_all = ["state_dir", "origin_boot_ns"])]
    pub from_socket: bool,
    /// With --from-socket: the users' states are UID directories under DIR.
    #[arg(long, value_name = "DIR", default_value = STATE_ROOT, requires = "from_socket")]
    pub state_root: PathBuf,
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
    /// When the session began (CLOCK_BOOTTIME ns): the origin of the login's time to readiness.
    #[arg(long, value_name = "NS")]
    pub origin_boot_ns: Option<i64>,
}

/// The options `enable` keeps for the service (the words after `login service`).
#[derive(Debug, clap::Parser)]
struct Options {
    #[arg(long, value_name = "WHEN", default_value = DEFAULT_UNTIL)]
    until: Vec<Until>,
    #[arg(long, default_value = "120", value_parser = values::positive_duration)]
    timeout: Duration,
    #[command(flatten)]
    tuning: Tuning,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Enable(a) => enable(&a),
        Action::Disable(a) => disable(&a),
        Action::Status(a) => status(&a),
        Action::Hello(a) => Ok(hello(&a)),
        Action::Service(a) => service(&a),
    }
}

/// The named user, else the one who ran sudo, else the current one.
fn user_of(args: &UserArgs) -> anyhow::Result<User> {
    let name = args.user.clone().or_else(|| std::env::var("SUDO_USER").ok().filter(|u| !u.is_empty()));
    let found = match &name {
        Some(n) => User::from_name(n).with_context(|| format!("cannot look up user {n}"))?,
        None => User::from_uid(Uid::current()).context("cannot look up the current user")?,
    };
    found.ok_or_else(|| anyhow::anyhow!("--user {}: no such user", name.unwrap_or_default()))
}

fn state_dir_of(args: &UserArgs, user: &User) -> PathBuf {
    args.state_dir.clone().unwrap_or_else(|| default_state_dir(user.uid))
}

fn default_state_dir(uid: Uid) -> PathBuf {
    Path::new(STATE_ROOT).join(uid.to_string())
}

/// The `[Desktop Entry]` that runs `hello` when the user's graphical session starts.
fn autostart_entry(binary: &Path, state_dir: Option<&Path>) -> String {
    let mut exec = vec![exec_word(&binary.to_string_lossy()), "login".into(), "hello".into()];
    if let Some(dir) = state_dir {
        exec.extend(["--state-dir".into(), exec_word(&dir.to_string_lossy())]);
    }
    format!(
        "# Written by `coldstart login enable`; `coldstart login disable` removes it.\n\
         [Desktop Entry]\n\
         Type=Application\n\
         Name=coldstart login prefetch\n\
         Comment=Replays this login's reads before the session needs them, and learns them\n\
         Exec={}\n\
         NoDisplay=true\n\
         X-GNOME-Autostart-Phase=Initialization\n\
         X-MATE-Autostart-Phase=Initialization\n\
         X-KDE-autostart-phase=0\n",
        exec.join(" ")
    )
}

/// The service's options as `Options` reads them back.
fn option_words(args: &EnableArgs) -> Vec<String> {
    let mut words = Vec::new();
    for u in &args.until {
        words.extend(["--until".to_owned(), u.to_string()]);
    }
    words.extend(["--timeout".to_owned(), format!("{}", args.timeout.as_secs_f64())]);
    words.extend(args.tuning.words());
    words
}

fn enable(args: &EnableArgs) -> anyhow::Result<ExitCode> {
    if !args.prefetch {
        bail!("login enable installs the login's prefetch service: add --prefetch");
    }
    if let Some(bad) = args.until.iter().find(|u| **u == Until::Exit || u.watches_output()) {
        bail!(
            "--until {bad} has no meaning for a login (there is no command): use wm, a window, unit: or mark:"
        );
    }
    let binary = match &args.binary {
        Some(b) if !b.is_absolute() => bail!("--binary {}: must be an absolute path", b.display()),
        Some(b) => b.clone(),
        None => std::env::current_exe().context("cannot find the running coldstart binary")?,
    };
    let user = user_of(&args.user)?;
    let home = args.home.clone().unwrap_or_else(|| user.dir.clone());
    if !home.is_dir() {
        bail!("{}: the home of {} is not a directory", home.display(), user.name);
    }
    let state = state_dir_of(&args.user, &user);
    std::fs::create_dir_all(&state).with_context(|| format!("cannot create {}", state.display()))?;
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o755))?;
    let options = option_words(args).iter().map(|w| exec_word(w)).collect::<Vec<_>>().join(" ");
    std::fs::write(state.join(OPTIONS), format!("{options}\n"))
        .with_context(|| format!("cannot write {}", state.join(OPTIONS).display()))?;
    println!("login prefetch service enabled for {} (uid {}):", user.name, user.uid);
    println!("  {}   its options and state", state.display());
    let custom_state = args.user.state_dir.as_deref();
    let start = match args.start {
        Start::Auto if Path::new(LIGHTDM_DIR).is_dir() => Start::DisplayManager,
        Start::Auto => Start::Autostart,
        chosen => chosen,
    };
    match start {
        Start::Auto | Start::Autostart => {
            let entry = home.join(AUTOSTART);
            write_as_user(&entry, &autostart_entry(&binary, custom_state), &user)?;
            println!("  {}   runs it when the session starts", entry.display());
            if !user.uid.is_root() && !args.no_units {
                install_socket_units(&binary)?;
            }
        }
        Start::DisplayManager => install_display_manager_hook(&binary)?,
    }
    println!(
        "The next login learns; `coldstart login status --user {}` shows what each login did.",
        user.name
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `text` to `path` (and its missing parents) owned by `user`, as the session reads it.
fn write_as_user(path: &Path, text: &str, user: &User) -> anyhow::Result<()> {
    let parent = path.parent().context("an autostart entry has a directory")?;
    let mut missing = Vec::new();
    let mut dir = parent;
    while !dir.exists() {
        missing.push(dir.to_owned());
        dir = dir.parent().context("the home exists")?;
    }
    std::fs::create_dir_all(parent).with_context(|| format!("cannot create {}", parent.display()))?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    for p in missing.iter().map(PathBuf::as_path).chain([path]) {
        nix::unistd::chown(p, Some(user.uid), Some(user.gid))
            .with_context(|| format!("cannot give {} to {}", p.display(), user.name))?;
    }
    Ok(())
}

fn install_socket_units(binary: &Path) -> anyhow::Result<()> {
    let service = SERVICE_TEXT.replace("/usr/local/bin/coldstart", &exec_word(&binary.to_string_lossy()));
    std::fs::create_dir_all(SOCKETS_WANTS).with_context(|| format!("cannot create {SOCKETS_WANTS}"))?;
    for (name, text) in [(SOCKET_UNIT, SOCKET_TEXT.to_owned()), (SERVICE_UNIT, service)] {
        let path = Path::new(UNIT_DIR).join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    let link = Path::new(SOCKETS_WANTS).join(SOCKET_UNIT);
    if std::fs::symlink_metadata(&link).is_err() {
        symlink(Path::new(UNIT_DIR).join(SOCKET_UNIT), &link)
            .with_context(|| format!("cannot link {}", link.display()))?;
    }
    println!("  {UNIT_DIR}/{SOCKET_UNIT} and {SERVICE_UNIT}   how a login asks root for it");
    if Path::new("/run/systemd/system").is_dir() {
        systemctl(&["daemon-reload"]);
        systemctl(&["restart", SOCKET_UNIT]);
    } else {
        println!("  systemd is not running here: the socket starts with the next boot");
    }
    Ok(())
}

const LIGHTDM_DIR: &str = "/etc/lightdm";
const LIGHTDM_DROP_IN: &str = "/etc/lightdm/lightdm.conf.d/50-coldstart-login.conf";

/// The line a display manager's root hook runs before each session.
fn hook_line(binary: &Path) -> String {
    format!("{} login hello --before-session", exec_word(&binary.to_string_lossy()))
}

/// lightdm's `session-setup-script` (run as root before each session, with `USER` and
/// `DISPLAY` set), or for another display manager the line its root hook should run.
fn install_display_manager_hook(binary: &Path) -> anyhow::Result<()> {
    if !Path::new(LIGHTDM_DIR).is_dir() {
        println!("  no lightdm here: have the display manager's root hook run before each session");
        println!("    {}", hook_line(binary));
        println!("  (gdm: /etc/gdm3/PostLogin/Default; kdm and xdm: Xstartup; it reads $USER)");
        return Ok(());
    }
    let text = format!(
        "# Written by `coldstart login enable --start display-manager`; `coldstart login disable` removes it.\n\
         [Seat:*]\nsession-setup-script={}\n",
        hook_line(binary)
    );
    let path = Path::new(LIGHTDM_DROP_IN);
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(LIGHTDM_DIR)))?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
    println!("  {}   lightdm runs it before each session", path.display());
    Ok(())
}

fn systemctl(words: &[&str]) {
    match Command::new("systemctl").args(words).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("coldstart: systemctl {} failed ({s})", words.join(" ")),
        Err(e) => eprintln!("coldstart: cannot run systemctl {}: {e}", words.join(" ")),
    }
}

fn disable(args: &DisableArgs) -> anyhow::Result<ExitCode> {
    let user = user_of(&args.user)?;
    let home = args.home.clone().unwrap_or_else(|| user.dir.clone());
    let state = state_dir_of(&args.user, &user);
    let mut removed = Vec::new();
    for path in [home.join(AUTOSTART), state.join(OPTIONS)] {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
    if removed.is_empty() {
        println!("the login prefetch service was not enabled for {}", user.name);
    }
    for path in &removed {
        println!("removed {}", path.display());
    }
    if args.purge && state.exists() {
        std::fs::remove_dir_all(&state).with_context(|| format!("cannot remove {}", state.display()))?;
        println!("removed {} (history, plan, traces)", state.display());
    } else if state.exists() {
        println!("kept {} (history, plan, traces): --purge removes it", state.display());
    }
    if enabled_users().is_empty() {
        remove_socket_units();
        if std::fs::remove_file(LIGHTDM_DROP_IN).is_ok() {
            println!("removed {LIGHTDM_DROP_IN}");
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The uids under /var/lib/coldstart/login with options (enabled).
fn enabled_users() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(STATE_ROOT) else { return Vec::new() };
    entries
        .flatten()
        .filter(|e| e.path().join(OPTIONS).exists())
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn remove_socket_units() {
    let paths = [
        Path::new(SOCKETS_WANTS).join(SOCKET_UNIT),
        Path::new(UNIT_DIR).join(SOCKET_UNIT),
        Path::new(UNIT_DIR).join(SERVICE_UNIT),
    ];
    let mut any = false;
    for path in paths {
        if std::fs::remove_file(&path).is_ok() {
            println!("removed {}", path.display());
            any = true;
        }
    }
    if any && Path::new("/run/systemd/system").is_dir() {
        systemctl(&["stop", SOCKET_UNIT]);
        systemctl(&["daemon-reload"]);
    }
}

fn status(args: &UserArgs) -> anyhow::Result<ExitCode> {
    let user = user_of(args)?;
    let state = state_dir_of(args, &user);
    match std::fs::read_to_string(state.join(OPTIONS)) {
        Ok(options) => {
            println!("login prefetch service: enabled for {}, options: {}", user.name, options.trim())
        }
        Err(_) => println!("login prefetch service: not enabled for {}", user.name),
    }
    crate::cmd::boot_service::print_status(&state, "login");
    Ok(ExitCode::SUCCESS)
}

/// Run by the session's autostart entry: starts the service (itself as root, else through
/// the socket) and returns once it records, or after `READY_TIMEOUT`. Never fails the session.
fn hello(args: &HelloArgs) -> ExitCode {
    let outcome = match (args.before_session, Uid::effective().is_root()) {
        (true, false) => {
            Err(anyhow::anyhow!("--before-session is for a display manager's hooks run as root"))
        }
        (_, true) => hello_as_root(args),
        (false, false) => hello_through_socket(&args.socket),
    };
    if let Err(e) = outcome {
        eprintln!("coldstart login hello: {e:#}; the session goes on without the prefetch service");
    }
    ExitCode::SUCCESS
}

fn hello_as_root(args: &HelloArgs) -> anyhow::Result<()> {
    let (state, origin) = if args.before_session {
        let name =
            args.user.clone().or_else(|| std::env::var("USER").ok()).context("no --user and no $USER")?;
        let user = User::from_name(&name)?.with_context(|| format!("no such user {name}"))?;
        let state = args.state_dir.clone().unwrap_or_else(|| default_state_dir(user.uid));
        if !state.join(OPTIONS).exists() {
            return Ok(()); // not enabled for this user: the hook has nothing to do
        }
        (state, session_origin(std::process::id() as i32))
    } else {
        let state = args.state_dir.clone().unwrap_or_else(|| default_state_dir(Uid::effective()));
        (state, session_origin(nix::unistd::getppid().as_raw()))
    };
    let log = open_service_log(&state.join("service.log"))?;
    let mut command = service_command(&state, origin)?;
    command.stderr(log);
    // Its own session: the service outlives the hello and must not get the session's signals.
    unsafe {
        command.pre_exec(|| nix::unistd::setsid().map(drop).map_err(std::io::Error::from));
    }
    let mut child = command.spawn().context("cannot start the login service")?;
    wait_ready(&mut child)
}

/// The root-started service's log, appended to: a login served already keeps what it wrote
/// (a second hello is refused by the service's lock, after this). Emptied past 1 MiB.
fn open_service_log(path: &Path) -> anyhow::Result<std::fs::File> {
    let full = std::fs::metadata(path).is_ok_and(|m| m.len() > 1 << 20);
    std::fs::OpenOptions::new()
        .create(true)
        .append(!full)
        .write(true)
        .truncate(full)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// `login service` for the state `dir`, its stdout a pipe that says when it records.
fn service_command(state: &Path, origin: Option<i64>) -> anyhow::Result<Command> {
    let me = std::env::current_exe().context("cannot find the running coldstart binary")?;
    let mut command = Command::new(me);
    command.args(["login", "service", "--state-dir"]).arg(state);
    if let Some(ns) = origin {
        command.arg("--origin-boot-ns").arg(ns.to_string());
    }
    command.stdin(Stdio::null()).stdout(Stdio::piped());
    Ok(command)
}

/// Waits for the service's `ready` line (it records), at most `READY_TIMEOUT`.
fn wait_ready(child: &mut Child) -> anyhow::Result<()> {
    let stdout = child.stdout.take().context("the service's output")?;
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = sender.send(line);
    });
    match receiver.recv_timeout(READY_TIMEOUT) {
        Ok(line) if line.trim() == "ready" => Ok(()),
        Ok(_) => bail!("the login service ended before recording (see its journal or service.log)"),
        Err(_) => bail!("the login service did not start recording within {} s", READY_TIMEOUT.as_secs()),
    }
}

fn hello_through_socket(socket: &Path) -> anyhow::Result<()> {
    let mut stream = UnixStream::connect(socket)
        .with_context(|| format!("cannot reach {} (is coldstart-login.socket running?)", socket.display()))?;
    stream.set_read_timeout(Some(READY_TIMEOUT))?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    match answer.lines().next() {
        Some("ready") => Ok(()),
        Some(refused) => bail!("{refused}"),
        None => bail!("the login service did not answer within {} s", READY_TIMEOUT.as_secs()),
    }
}

/// The session's start: when the process that ran the autostart entry (the session
/// manager) started, CLOCK_BOOTTIME ns.
fn session_origin(manager: i32) -> Option<i64> {
    let ticks = coldstart_record::tracefs::process_starttime(manager)?;
    Some((ticks as f64 * 1e9 / coldstart_record::system::clock_ticks_per_second()) as i64)
}

fn service(args: &ServiceArgs) -> anyhow::Result<ExitCode> {
    if args.from_socket {
        return serve_connection(&args.state_root);
    }
    let state = args.state_dir.clone().unwrap_or_else(|| default_state_dir(Uid::effective()));
    let Some(_serving) = one_login_at_a_time(&state)? else {
        bail!("a login of this user is being served already: this one is not recorded");
    };
    let text = std::fs::read_to_string(state.join(OPTIONS)).with_context(|| {
        format!("the login service is not enabled here ({} missing)", state.join(OPTIONS).display())
    })?;
    let mut words = vec!["options".to_owned()];
    words.extend(crate::cmd::boot::exec_line_words(text.trim()));
    let options = <Options as clap::Parser>::try_parse_from(&words)
        .with_context(|| format!("{}: bad options", state.join(OPTIONS).display()))?;
    let (notify, ready) = notify_socket()?;
    let report = PathBuf::from(format!("/run/coldstart/login-{}-replay.json", std::process::id()));
    let served = crate::cmd::boot_service::serve(&Service {
        what: "login",
        state_dir: &state,
        tuning: &options.tuning,
        replay_report: &report,
        record: &|output, also_tell| {
            record_login(&options, output, &[std::slice::from_ref(&notify), also_tell].concat())
        },
        time_to_target: &|trace| time_to_ready(trace, args.origin_boot_ns),
    });
    let _ = std::fs::remove_file(&report);
    drop(ready);
    served
}

/// The lock of the user's state while a login is served (`None`: another holds it), so that
/// logins in quick succession, or a user connecting again and again, start one recording.
fn one_login_at_a_time(state: &Path) -> anyhow::Result<Option<nix::fcntl::Flock<std::fs::File>>> {
    let path = state.join("serving.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// A socket for the recorder's `READY=1`, and a thread that prints `ready` on stdout when it
/// comes (the hello reads it).
fn notify_socket() -> anyhow::Result<(String, std::thread::JoinHandle<()>)> {
    use std::os::linux::net::SocketAddrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let name = format!("coldstart-login-{}", std::process::id());
    let socket = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes())?)
        .context("cannot open the socket the recording says it started on")?;
    let thread = std::thread::spawn(move || {
        let mut buffer = [0u8; 256];
        while let Ok(n) = socket.recv(&mut buffer) {
            if String::from_utf8_lossy(&buffer[..n]).lines().any(|l| l == "READY=1") {
                let mut out = std::io::stdout();
                let _ = writeln!(out, "ready");
                let _ = out.flush();
                // The reader goes once it has the line: a later write must not fail.
                if let Ok(null) = std::fs::File::create("/dev/null") {
                    let _ = nix::unistd::dup2_stdout(null);
                }
                return;
            }
        }
    });
    Ok((format!("@{name}"), thread))
}

/// The login recorded lightly: the whole system (the session's processes are not one tree),
/// page fills, block requests, processes, no CPU stacks or slow calls.
fn record_login(options: &Options, output: &Path, notify: &[String]) -> anyhow::Result<ExitCode> {
    let me = std::env::current_exe().context("cannot find the running coldstart binary")?;
    if let Some(dir) = output.parent() {
        coldstart_record::boot::create_trace_dir(dir)?;
    }
    let config = RecordConfig {
        command: vec![me.into_os_string(), "boot".into(), "hold".into()],
        output: Some(output.to_owned()),
        system: true,
        as_root: true,
        until: options.until.clone(),
        timeout: Some(options.timeout),
        sample_hz: 10.0,
        cpu_samples: None,
        slow_syscalls: None,
        notify_sockets: notify.to_vec(),
        without: "scheduler".parse().map_err(|e: String| anyhow::anyhow!(e))?,
        ..RecordConfig::default()
    };
    let recorded = coldstart_record::record(&config)?;
    eprintln!("coldstart: the login's trace: {}", recorded.path.display());
    Ok(if recorded.unmet.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) })
}

/// From the session's start to its readiness: the trace's ready time on the boot clock,
/// less the origin; without an origin, from the recording's start.
fn time_to_ready(trace: Option<&Trace>, origin_boot_ns: Option<i64>) -> Option<f64> {
    let trace = trace?;
    let ready = trace.meta.ready.as_ref()?.t_ns;
    let since_origin = match origin_boot_ns {
        Some(origin) if trace.meta.clock == "boot" => trace.meta.start_clock_ns + ready - origin,
        _ => ready,
    };
    Some(since_origin as f64 / 1e9)
}

/// coldstart-login@.service: the caller on stdin is a session of an enabled user; its
/// environment (display, runtime dir) and its session manager's start go to the service.
fn serve_connection(state_root: &Path) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let credentials =
        nix::sys::socket::getsockopt(&stdin.as_fd(), nix::sys::socket::sockopt::PeerCredentials)
            .context("standard input is not a socket connection (run by coldstart-login.socket)")?;
    let uid = Uid::from_raw(credentials.uid());
    let state = state_root.join(uid.to_string());
    let mut connection = std::fs::File::from(stdin.as_fd().try_clone_to_owned()?);
    if !state.join(OPTIONS).exists() {
        let _ = writeln!(connection, "the login prefetch service is not enabled for uid {uid}");
        bail!("uid {uid} asked for the login service, which is not enabled for it");
    }
    let caller = credentials.pid();
    let parent = procfs_parent(caller);
    let mut command = service_command(&state, parent.and_then(session_origin))?;
    command.env_clear().envs(session_environment(caller));
    let mut child = command.spawn().context("cannot start the login service")?;
    let answer = match wait_ready(&mut child) {
        Ok(()) => "ready".to_owned(),
        Err(e) => format!("{e:#}"),
    };
    let _ = writeln!(connection, "{answer}");
    drop(connection);
    let status = child.wait()?;
    Ok(ExitCode::from(status.code().unwrap_or(1).clamp(0, 255) as u8))
}

fn procfs_parent(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.split_whitespace().nth(1)?.parse().ok()
}

/// The variables of the caller's environment that locate its session.
fn session_environment(pid: i32) -> Vec<(String, String)> {
    const KEEP: [&str; 6] =
        ["DISPLAY", "XAUTHORITY", "WAYLAND_DISPLAY", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "HOME"];
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
    let mut vars: Vec<(String, String)> = environ
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let (k, v) = std::str::from_utf8(kv).ok()?.split_once('=')?;
            KEEP.contains(&k).then(|| (k.to_owned(), v.to_owned()))
        })
        .collect();
    vars.push(("PATH".into(), "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into()));
    vars.push(("TMPDIR".into(), "/run".into()));
    vars
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_autostart_entry_runs_hello_in_the_initialization_phase() {
        let entry = autostart_entry(Path::new("/opt/cold start/coldstart"), Some(Path::new("/tmp/state")));
        assert!(
            entry.contains("\nExec=\"/opt/cold start/coldstart\" login hello --state-dir /tmp/state\n"),
            "{entry}"
        );
        assert!(entry.contains("X-MATE-Autostart-Phase=Initialization"));
        assert!(entry.contains("X-GNOME-Autostart-Phase=Initialization"));
        let plain = autostart_entry(Path::new("/usr/bin/coldstart"), None);
        assert!(plain.contains("\nExec=/usr/bin/coldstart login hello\n"), "{plain}");
    }

    #[test]
    fn the_options_enable_keeps_read_back_as_the_service_reads_them() {
        let args = <Line as clap::Parser>::parse_from([
            "x",
            "--prefetch",
            "--until",
            "wm",
            "--until",
            "window-name:My Desk",
            "--timeout",
            "45",
            "--learn-boots",
            "1",
        ]);
        let text = option_words(&args.enable).iter().map(|w| exec_word(w)).collect::<Vec<_>>().join(" ");
        let mut words = vec!["options".to_owned()];
        words.extend(crate::cmd::boot::exec_line_words(&text));
        let options = <Options as clap::Parser>::parse_from(words);
        assert_eq!(options.until, args.enable.until);
        assert_eq!(options.timeout, Duration::from_secs(45));
        assert_eq!(options.tuning.learn_boots, 1);
        assert_eq!(options.tuning.verify_boots, args.enable.tuning.verify_boots);
    }

    #[derive(clap::Parser)]
    struct Line {
        #[command(flatten)]
        enable: EnableArgs,
    }

    #[test]
    fn a_login_is_timed_from_the_session_s_start_on_the_boot_clock() {
        let mut trace = Trace::default();
        trace.meta.clock = "boot".into();
        trace.meta.start_clock_ns = 10_000_000_000;
        trace.meta.ready = Some(coldstart_trace::Ready {
            t_ns: 2_500_000_000,
            reason: "wm".parse().unwrap(),
            pid: None,
            tid: None,
        });
        assert_eq!(time_to_ready(Some(&trace), Some(9_000_000_000)), Some(3.5));
        assert_eq!(time_to_ready(Some(&trace), None), Some(2.5));
        trace.meta.ready = None;
        assert_eq!(time_to_ready(Some(&trace), Some(9_000_000_000)), None);
        assert_eq!(time_to_ready(None, Some(1)), None);
    }

    #[test]
    fn the_service_log_is_appended_to_until_it_is_large() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("service.log");
        writeln!(open_service_log(&path).unwrap(), "first").unwrap();
        writeln!(open_service_log(&path).unwrap(), "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\nsecond\n");
        std::fs::write(&path, vec![b'x'; (1 << 20) + 1]).unwrap();
        writeln!(open_service_log(&path).unwrap(), "third").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "third\n");
    }

    #[test]
    fn one_login_of_a_user_is_served_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let first = one_login_at_a_time(dir.path()).unwrap();
        assert!(first.is_some());
        assert!(one_login_at_a_time(dir.path()).unwrap().is_none(), "while the first is served");
        drop(first);
        assert!(one_login_at_a_time(dir.path()).unwrap().is_some(), "once it is over");
    }

    #[test]
    fn a_process_s_parent_is_read_from_proc() {
        let me = std::process::id() as i32;
        assert_eq!(procfs_parent(me), Some(nix::unistd::getppid().as_raw()));
        assert_eq!(procfs_parent(i32::MAX), None);
    }
}
