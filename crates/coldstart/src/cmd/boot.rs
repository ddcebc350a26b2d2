//! `coldstart boot enable|disable|status`: installs, removes and describes the systemd
//! unit that records each boot (`record --boot`), in this machine or in another root (an
//! image, a container's tree), as `systemctl --root` would; `boot init`, the init= wrapper
//! (in `boot_init`); and the hidden `boot hold`, the process a boot recording keeps running
//! while it waits, since a boot has no command.

use std::io::ErrorKind;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use coldstart_analyze::units::{bytes, secs};
use coldstart_launch::Until;
use coldstart_trace::{BootPhase, Trace};

use crate::cmd::values;

/// The unit, as shipped in contrib/systemd and installed by `enable` (through a link in
/// `assets/`, so that the packaged crate carries the file).
pub const UNIT_TEXT: &str = include_str!("../../assets/coldstart-boot.service");
pub const UNIT_NAME: &str = "coldstart-boot.service";
const UNIT_DIR: &str = "etc/systemd/system";
const WANTS_DIR: &str = "etc/systemd/system/sysinit.target.wants";
const DROP_IN: &str = "coldstart-options.conf";
pub(crate) const CREATED: &str = "# created: ";
/// Where `enable` expects coldstart inside the root unless told otherwise (a build
/// installed by hand), and where the Debian package puts it.
pub const DEFAULT_BINARY: &str = "/usr/local/bin/coldstart";
pub const PACKAGED_BINARY: &str = "/usr/bin/coldstart";
pub const DEFAULT_UNTIL: &str = "unit:multi-user.target";
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Record every boot from its start: install, remove or describe the systemd unit that does it.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart boot enable                       # record the next boots to multi-user.target
  sudo coldstart boot enable --until unit:graphical.target --timeout 300
  sudo coldstart boot enable --root /srv/image --install-binary
  sudo coldstart boot status
  sudo coldstart boot disable
  # or earlier than any unit, before systemd: init=/usr/local/sbin/coldstart-init (see boot init --help)

Traces go to /var/log/coldstart/boot-YYYYMMDD-HHMMSS.coldstart (UTC). See docs/boot.md.")]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, clap::Subcommand)]
pub enum Action {
    Enable(EnableArgs),
    /// Remove what `enable` wrote (the unit, its drop-in and link, and what enable created).
    Disable(DisableArgs),
    /// Say whether the unit is enabled, with which options, and list the boot traces written.
    Status(RootArgs),
    Init(crate::cmd::boot_init::InitArgs),
    /// What the initramfs runs after `enable --block-plan`: the plan's chunks fetched from the
    /// root device before it is mounted.
    #[command(hide = true)]
    Early(crate::cmd::boot_blocks::EarlyArgs),
    /// What the unit runs after `enable --prefetch`: decide, replay, record, learn.
    #[command(hide = true)]
    Service(crate::cmd::boot_service::ServiceArgs),
    /// The process a boot recording keeps while it waits (started by `record --boot`).
    #[command(hide = true)]
    Hold,
}

/// Install coldstart-boot.service, wanted by sysinit.target, with these options.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart boot enable
  sudo coldstart boot enable --until unit:display-manager.service --until idle:2000
  sudo coldstart boot enable --root /var/lib/machines/deb --install-binary
  sudo coldstart boot enable --prefetch            # a boot plan that verifies and renews itself
  sudo coldstart boot enable --prefetch --verify-boots 5 --reverify-every 50 --keep-traces 8
  sudo coldstart boot enable --prefetch --learn-boots 3   # plan the pages 2 of 3 boots used
  sudo coldstart boot disable --purge              # and the prefetch service's state
  sudo coldstart boot enable --root /mnt/image --install-binary --block-plan boot.bplan
  sudo coldstart boot enable --root /mnt/image --block-plan boot.bplan --block-plan-only

With --prefetch the unit runs the prefetch service instead of a plain recording: the first
--learn-boots boots (2) are recorded lightly and planned (the pages more than half of them
used); the next boots replay the plan alongside the boot or
not, in a random but balanced order, until --verify-boots of each are timed to the target;
the plan is kept when the boots with it are faster (the 95% interval of the ratio of medians
below 1), otherwise switched off; it is verified again every --reverify-every boots, and
learnt again when it goes stale (files changed, a package manager ran, another kernel or root
device, the boots use less of it). State and the last traces: /var/lib/coldstart/boot
(`disable --purge` removes it). `boot status` shows the boots and the decisions. Booted
with init=/usr/local/sbin/coldstart-init, the wrapper runs the service before systemd (its
replay starts earlier, which pays on slow disks) and the unit steps aside.

With --block-plan (an image's first boot on a lazily fetched volume, docs/storage.md), the
plan goes to /etc/coldstart/boot-blocks.bplan with an initramfs-tools hook and premount script
and a dracut module (for the generators the root has); the initramfs is made again (in a
chroot for another root). Each boot then starts `coldstart boot early` on the root device as
soon as it exists: one block of each planned fetch unit read with direct I/O, in the
background; the kernel log says what it did, /run/coldstart/boot-blocks.json has the report,
and a device that is not the plan's image is refused in one line, nothing else read.
--block-plan-only installs that alone, without the recording unit.

Writes etc/systemd/system/coldstart-boot.service (contrib/systemd's file as it is), its
drop-in coldstart-boot.service.d/coldstart-options.conf with the ExecStart of these options,
and the link in sysinit.target.wants; `disable` removes exactly these, and the directories
and binary enable created. Run `systemctl daemon-reload` afterwards on a running system.")]
pub struct EnableArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// When the boot is over (repeatable: all must be met); `exit` has no meaning here.
    #[arg(long, value_name = "WHEN", default_value = DEFAULT_UNTIL)]
    pub until: Vec<Until>,
    /// Stop recording after this long (a bare number is seconds; ms, s) even if the conditions are not met.
    #[arg(long, value_name = "DURATION", default_value = "120", value_parser = values::positive_duration)]
    pub timeout: Duration,
    /// The coldstart binary as seen inside the root (absolute); it must be there when the root
    /// boots [default: /usr/local/bin/coldstart, or /usr/bin/coldstart (the package's) when only
    /// that one is in the root].
    #[arg(long, value_name = "PATH")]
    pub binary: Option<PathBuf>,
    /// Copy the running coldstart to --binary inside the root (otherwise it must be there).
    #[arg(long)]
    pub install_binary: bool,
    /// Run the prefetch service: learn a plan of the boot, replay it, verify on this
    /// machine that it pays, keep it fresh (see below).
    #[arg(long)]
    pub prefetch: bool,
    /// A block plan (`prefetch plan --blocks`) of this image's first boot, replayed from the
    /// initramfs before the root filesystem is mounted: its chunks fetched from a lazily
    /// fetched volume before the boot asks for them (see below).
    #[arg(long, value_name = "PLAN")]
    pub block_plan: Option<PathBuf>,
    /// Install the block plan's early replay alone, without the recording unit: every boot
    /// of the image fetches its chunks early and none is recorded.
    #[arg(long, requires = "block_plan", conflicts_with = "prefetch")]
    pub block_plan_only: bool,
    #[command(flatten)]
    pub initramfs: InitramfsArgs,
    #[command(flatten)]
    pub tuning: crate::cmd::boot_service::Tuning,
}

#[derive(Debug, clap::Args)]
pub struct InitramfsArgs {
    /// Leave the root's initramfs as it is: the block plan's hooks take effect when the image's
    /// build, or you, make it again (update-initramfs -u, dracut -f).
    #[arg(long)]
    pub no_initramfs_update: bool,
}

#[derive(Debug, clap::Args)]
pub struct DisableArgs {
    #[command(flatten)]
    pub root: RootArgs,
    /// Also remove the prefetch service's state (history, plan, traces) under /var/lib/coldstart/boot.
    #[arg(long)]
    pub purge: bool,
    #[command(flatten)]
    pub initramfs: InitramfsArgs,
}

#[derive(Debug, clap::Args)]
pub struct RootArgs {
    /// Work on the system under DIR (an image, a container's tree) instead of this one.
    #[arg(long, value_name = "DIR", default_value = "/")]
    pub root: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Enable(a) => enable(&a),
        Action::Disable(a) => disable(&a),
        Action::Status(a) => status(&a),
        Action::Init(a) => crate::cmd::boot_init::run(a),
        Action::Early(a) => crate::cmd::boot_blocks::early(&a),
        Action::Service(a) => crate::cmd::boot_service::run(a),
        Action::Hold => hold(),
    }
}

/// `before recording: kernel 0.900 s, initrd 1.200 s, …`, or `None` for a trace of no boot.
pub fn before_recording_text(phases: &[BootPhase]) -> Option<String> {
    if phases.is_empty() {
        return None;
    }
    let parts: Vec<String> = phases
        .iter()
        .map(|p| match p.phase.as_str() {
            "uptime" => format!("{} since the kernel started", secs(p.ns)),
            "host" => format!("host up {} when the container started", secs(p.ns)),
            name => format!("{name} {}", secs(p.ns)),
        })
        .collect();
    Some(parts.join(", "))
}

/// The `--until` conditions of a boot recording: the default when only `exit` (clap's
/// default) is given; refused when `exit` is one of several.
pub fn boot_conditions(until: &[Until]) -> anyhow::Result<Vec<Until>> {
    if until.is_empty() || until == [Until::Exit] {
        return Ok(vec![DEFAULT_UNTIL.parse().map_err(|e| anyhow::anyhow!("{e}"))?]);
    }
    if let Some(no_command) = until.iter().find(|u| **u == Until::Exit || u.watches_output()) {
        bail!(
            "--until {no_command} has no meaning for a boot (there is no command): use unit:, mark:, idle or a window"
        );
    }
    Ok(until.to_vec())
}

pub(crate) fn inside(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

impl EnableArgs {
    /// `--binary`, or where coldstart is installed in the root.
    fn binary(&self) -> PathBuf {
        let root = &self.root.root;
        let packaged_only = !exists(&inside(root, DEFAULT_BINARY)) && exists(&inside(root, PACKAGED_BINARY));
        let default = if packaged_only && !self.install_binary { PACKAGED_BINARY } else { DEFAULT_BINARY };
        self.binary.clone().unwrap_or_else(|| PathBuf::from(default))
    }
}

/// One word of an `ExecStart=` line, quoted as systemd.service(5) reads it.
pub(crate) fn exec_word(word: &str) -> String {
    let plain =
        !word.is_empty() && word.chars().all(|c| c.is_ascii_alphanumeric() || "_./:=@+-,".contains(c));
    let quoted = if plain {
        word.to_owned()
    } else {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    };
    quoted.replace('%', "%%").replace('$', "$$")
}

/// The words of an `ExecStart=` line as `exec_word` wrote them: `%%` and `$$` read as `%`
/// and `$`, then split as [`quoted_words`] splits, with backslash escapes.
pub(crate) fn exec_line_words(line: &str) -> Vec<String> {
    quoted_words(&line.replace("%%", "%").replace("$$", "$"), true)
}

/// Words split on whitespace except inside double quotes, which are removed (`""` is an empty
/// word); with `backslash_escapes`, a backslash inside quotes takes the next character as it
/// is (systemd's `ExecStart=`), without it a backslash is a character (the kernel's command line).
pub(crate) fn quoted_words(text: &str, backslash_escapes: bool) -> Vec<String> {
    let (mut words, mut word, mut quoted, mut any) = (Vec::new(), String::new(), false, false);
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            '\\' if quoted && backslash_escapes => word.extend(chars.next()),
            c if c.is_whitespace() && !quoted => {
                if std::mem::take(&mut any) {
                    words.push(std::mem::take(&mut word));
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

/// The prefetch service's options (the words after `boot service`) when `boot enable
/// --prefetch` installed it under `root`: what the init= wrapper runs before systemd.
pub fn enabled_service_words(root: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(drop_in_path(root)).ok()?;
    let line = text.lines().filter_map(|l| l.strip_prefix("ExecStart=")).rfind(|l| !l.trim().is_empty())?;
    let words = exec_line_words(line);
    (words.get(1..3) == Some(&["boot".to_owned(), "service".to_owned()][..])).then(|| words[3..].to_vec())
}

/// The `ExecStart=` command of `enable`'s options.
fn exec_start(args: &EnableArgs) -> String {
    if args.prefetch {
        let binary = exec_word(&args.binary().to_string_lossy());
        return format!(
            "{binary} {}",
            crate::cmd::boot_service::exec_words(&args.until, args.timeout, &args.tuning)
        );
    }
    let mut words = vec![args.binary().to_string_lossy().into_owned(), "record".into(), "--boot".into()];
    for until in &args.until {
        words.push("--until".into());
        words.push(until.to_string());
    }
    words.push("--timeout".into());
    words.push(format!("{}", args.timeout.as_secs_f64()));
    words.iter().map(|w| exec_word(w)).collect::<Vec<_>>().join(" ")
}

/// Creates `rel` and its missing parents under `root`; returns those it created, outermost first.
pub(crate) fn create_dirs(root: &Path, rel: &str) -> anyhow::Result<Vec<String>> {
    let mut created = Vec::new();
    let mut path = String::new();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        path = if path.is_empty() { part.to_owned() } else { format!("{path}/{part}") };
        let full = inside(root, &path);
        match std::fs::symlink_metadata(&full) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => bail!("{} is in the way: not a directory", full.display()),
            Err(e) if e.kind() == ErrorKind::NotFound => {
                std::fs::create_dir(&full).with_context(|| format!("cannot create {}", full.display()))?;
                std::fs::set_permissions(&full, std::fs::Permissions::from_mode(0o755))?;
                created.push(format!("/{path}"));
            }
            Err(e) => return Err(e).with_context(|| format!("cannot look at {}", full.display())),
        }
    }
    Ok(created)
}

fn unit_path(root: &Path) -> PathBuf {
    inside(root, &format!("{UNIT_DIR}/{UNIT_NAME}"))
}
fn drop_in_dir(root: &Path) -> PathBuf {
    inside(root, &format!("{UNIT_DIR}/{UNIT_NAME}.d"))
}
fn drop_in_path(root: &Path) -> PathBuf {
    drop_in_dir(root).join(DROP_IN)
}
fn wants_link(root: &Path) -> PathBuf {
    inside(root, &format!("{WANTS_DIR}/{UNIT_NAME}"))
}

pub(crate) fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

fn enable(args: &EnableArgs) -> anyhow::Result<ExitCode> {
    let root = &args.root.root;
    check_enable_args(args)?;
    let block_plan = match &args.block_plan {
        Some(path) => Some(crate::cmd::boot_blocks::check(root, path, &args.binary())?),
        None => None,
    };
    if exists(&drop_in_path(root)) || crate::cmd::boot_blocks::installed_alone(root) {
        disable_quietly(root)?;
        eprintln!("coldstart: it was enabled already: replaced with these options");
    } else if !args.block_plan_only && (exists(&unit_path(root)) || exists(&wants_link(root))) {
        bail!(
            "{} or its sysinit.target.wants link exists but was not written by `coldstart boot enable`: left alone",
            unit_path(root).display()
        );
    }
    if block_plan.is_some() {
        crate::cmd::boot_blocks::refuse_in_the_way(root)?;
    }
    let binary = inside(root, &args.binary().to_string_lossy());
    if args.install_binary && exists(&binary) {
        bail!("{} exists already: leave out --install-binary to use it, or remove it", binary.display());
    }
    if block_plan.is_some() && !args.install_binary && !exists(&binary) {
        bail!(
            "--block-plan: {} is not there, and the initramfs made now needs it: add --install-binary",
            binary.display()
        );
    }
    let created = write_enabled(args)?;
    if args.block_plan_only {
        crate::cmd::boot_blocks::record_created(root, &created)?;
        println!("installed the block plan's early replay in {} (no recording unit)", root.display());
    } else {
        write_drop_in(args, &created)?;
        println!("enabled {UNIT_NAME} in {} (wanted by sysinit.target)", root.display());
        println!("  runs   {}", exec_start(args));
    }
    if let Some(plan) = &block_plan {
        report_block_plan(args, plan)?;
    }
    if !args.install_binary && !exists(&binary) {
        println!(
            "  WARNING {} is not there yet: install coldstart there, or enable again with --install-binary",
            binary.display()
        );
    }
    let unit_here = root == Path::new("/") && !args.block_plan_only;
    if unit_here && args.prefetch {
        println!(
            "next: systemctl daemon-reload; the next boot learns, then the service verifies its plan (boot status)"
        );
    } else if unit_here {
        println!("next: systemctl daemon-reload; the next boot is recorded to /var/log/coldstart/");
    }
    Ok(ExitCode::SUCCESS)
}

/// The options' own checks, before anything is read or written.
fn check_enable_args(args: &EnableArgs) -> anyhow::Result<()> {
    let root = &args.root.root;
    if !root.is_dir() {
        bail!("--root {}: not a directory", root.display());
    }
    if !args.binary().is_absolute() {
        bail!("--binary {}: must be an absolute path (as seen inside the root)", args.binary().display());
    }
    if args.until.contains(&Until::Exit) {
        bail!(
            "--until exit has no meaning for a boot (there is no command): use unit:, mark:, idle or a window"
        );
    }
    boot_conditions(&args.until)?;
    if !args.prefetch && args.tuning.is_set() {
        bail!(
            "--verify-boots, --reverify-every, --keep-traces and --learn-boots set the prefetch service: add --prefetch"
        );
    }
    if args.initramfs.no_initramfs_update && args.block_plan.is_none() {
        bail!(
            "--no-initramfs-update goes with --block-plan (without one, enable leaves the initramfs alone)"
        );
    }
    Ok(())
}

/// Writes the unit, its link, the binary and the block plan's files; returns what it created.
fn write_enabled(args: &EnableArgs) -> anyhow::Result<Vec<String>> {
    let root = &args.root.root;
    let mut created = Vec::new();
    if !args.block_plan_only {
        created.extend(create_dirs(root, &format!("{UNIT_DIR}/{UNIT_NAME}.d"))?);
        created.extend(create_dirs(root, WANTS_DIR)?);
        std::fs::write(unit_path(root), UNIT_TEXT)
            .with_context(|| format!("cannot write {}", unit_path(root).display()))?;
        std::fs::set_permissions(unit_path(root), std::fs::Permissions::from_mode(0o644))?;
        symlink(format!("/{UNIT_DIR}/{UNIT_NAME}"), wants_link(root))
            .with_context(|| format!("cannot link {}", wants_link(root).display()))?;
    }
    if args.install_binary {
        let binary = inside(root, &args.binary().to_string_lossy());
        let parent = args.binary().parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        created.extend(create_dirs(root, &parent)?);
        let me = std::env::current_exe().context("cannot find the running coldstart binary")?;
        std::fs::copy(&me, &binary)
            .with_context(|| format!("cannot copy {} to {}", me.display(), binary.display()))?;
        std::fs::set_permissions(&binary, std::fs::Permissions::from_mode(0o755))?;
        created.push(args.binary().to_string_lossy().into_owned());
    }
    if let Some(path) = &args.block_plan {
        created.extend(crate::cmd::boot_blocks::install(root, path, &args.binary())?);
    }
    Ok(created)
}

/// The drop-in: what enable created (for disable), and the service's command line.
fn write_drop_in(args: &EnableArgs, created: &[String]) -> anyhow::Result<()> {
    let root = &args.root.root;
    let mut drop_in = String::from(
        "# Written by `coldstart boot enable`, with the options given to it; `coldstart boot disable`\n\
         # removes it, the unit, its link, and what the lines below name.\n",
    );
    for path in created {
        drop_in.push_str(&format!("{CREATED}{path}\n"));
    }
    if args.prefetch {
        // The state (history, plan) is read at the start: wait for the filesystem holding it.
        let state = crate::cmd::boot_service::STATE_DIR;
        drop_in.push_str(&format!(
            "[Unit]\nDescription=Prefetch the boot with coldstart\nRequiresMountsFor={state}\n"
        ));
    }
    drop_in.push_str(&format!("[Service]\nExecStart=\nExecStart={}\n", exec_start(args)));
    std::fs::write(drop_in_path(root), drop_in)
        .with_context(|| format!("cannot write {}", drop_in_path(root).display()))?;
    std::fs::set_permissions(drop_in_path(root), std::fs::Permissions::from_mode(0o644))?;
    Ok(())
}

/// What `enable --block-plan` did to the initramfs, and whether the plan still holds.
fn report_block_plan(args: &EnableArgs, plan: &coldstart_prefetch::blocks::BlockPlan) -> anyhow::Result<()> {
    let root = &args.root.root;
    println!(
        "  block plan {} ({} chunks) replayed from the initramfs before {} is mounted",
        crate::cmd::boot_blocks::PLAN_IN_ROOT,
        plan.chunks().len(),
        plan.identity.uuid
    );
    if args.initramfs.no_initramfs_update {
        println!(
            "  the initramfs was left as it is: make it again (update-initramfs -u, dracut -f) to replay the plan"
        );
    } else {
        let ran = crate::cmd::boot_blocks::update_initramfs(root)?;
        println!("  initramfs made again: {ran}");
    }
    match crate::cmd::boot_blocks::still_holds(root, plan) {
        Some(Ok(())) => println!("  the plan still holds on the filesystem after these changes"),
        Some(Err(e)) => println!(
            "  WARNING the plan no longer holds on the filesystem ({e:#}): each boot will refuse it with one line; \
             make the plan from a boot of the image as it is now"
        ),
        None => {}
    }
    Ok(())
}

/// The paths the drop-in says `enable` created, in the order created; a path that climbs out
/// of the root (`..`) is not one `enable` wrote, and is left out.
pub(crate) fn created_paths(drop_in: &str) -> Vec<String> {
    drop_in
        .lines()
        .filter_map(|l| l.strip_prefix(CREATED))
        .filter(|p| !Path::new(p).components().any(|c| c == std::path::Component::ParentDir))
        .map(str::to_owned)
        .collect()
}

/// Removes what `enable` wrote; returns what it removed.
fn disable_quietly(root: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let drop_in = match std::fs::read_to_string(drop_in_path(root)) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", drop_in_path(root).display())),
    };
    let Some(drop_in) = drop_in else {
        return Ok(match crate::cmd::boot_blocks::created_alone(root) {
            Some(created) => remove_created(root, &created),
            None => Vec::new(),
        });
    };
    let mut removed = Vec::new();
    for path in [wants_link(root), unit_path(root), drop_in_path(root)] {
        match std::fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("cannot remove {}", path.display())),
        }
    }
    removed.extend(remove_created(root, &created_paths(&drop_in)));
    Ok(removed)
}

/// Removes what `enable` created (listed outermost first), innermost first; returns what it removed.
fn remove_created(root: &Path, created: &[String]) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for rel in created.iter().rev() {
        let path = inside(root, rel);
        let result = match std::fs::symlink_metadata(&path) {
            Ok(m) if m.is_dir() => std::fs::remove_dir(&path),
            Ok(_) => std::fs::remove_file(&path),
            Err(_) => continue,
        };
        match result {
            Ok(()) => removed.push(path),
            Err(e) => eprintln!("coldstart: warning: left {} in place: {e}", path.display()),
        }
    }
    removed
}

fn disable(args: &DisableArgs) -> anyhow::Result<ExitCode> {
    let root = &args.root.root;
    if !root.is_dir() {
        bail!("--root {}: not a directory", root.display());
    }
    let drop_in = std::fs::read_to_string(drop_in_path(root)).ok();
    let created_alone = drop_in.is_none().then(|| crate::cmd::boot_blocks::created_alone(root)).flatten();
    let alone = created_alone.is_some();
    let had_block_plan = drop_in
        .map(|d| created_paths(&d))
        .or(created_alone)
        .is_some_and(|created| created.iter().any(|p| p == crate::cmd::boot_blocks::PLAN_IN_ROOT));
    let mut removed = disable_quietly(root)?;
    let state = inside(root, crate::cmd::boot_service::STATE_DIR);
    if args.purge && exists(&state) {
        std::fs::remove_dir_all(&state).with_context(|| format!("cannot remove {}", state.display()))?;
        removed.push(state.clone());
    }
    if removed.is_empty() {
        println!("{UNIT_NAME} is not enabled in {}: nothing to remove", root.display());
    } else if alone {
        println!("removed the block plan's early replay from {}:", root.display());
        removed.iter().for_each(|path| println!("  {}", path.display()));
    } else {
        println!("disabled {UNIT_NAME} in {}; removed:", root.display());
        for path in removed {
            println!("  {}", path.display());
        }
    }
    if exists(&state) {
        println!("kept the prefetch service's state in {} (--purge removes it)", state.display());
    }
    if had_block_plan && args.initramfs.no_initramfs_update {
        println!(
            "the initramfs still replays the block plan until it is made again (update-initramfs -u, dracut -f)"
        );
    } else if had_block_plan {
        println!("initramfs made again: {}", crate::cmd::boot_blocks::update_initramfs(root)?);
    }
    Ok(ExitCode::SUCCESS)
}

fn status(root: &RootArgs) -> anyhow::Result<ExitCode> {
    let root = &root.root;
    if !root.is_dir() {
        bail!("--root {}: not a directory", root.display());
    }
    let drop_in = std::fs::read_to_string(drop_in_path(root)).ok();
    let enabled = exists(&wants_link(root)) && exists(&unit_path(root));
    match (&drop_in, enabled) {
        (Some(text), true) => {
            println!("{UNIT_NAME}: enabled in {} (wanted by sysinit.target)", root.display());
            if let Some(command) =
                text.lines().filter_map(|l| l.strip_prefix("ExecStart=")).rfind(|c| !c.is_empty())
            {
                println!("  runs   {command}");
                if let Some(binary) = command.split_whitespace().next()
                    && !exists(&inside(root, binary))
                {
                    println!("  MISSING {binary} inside {}", root.display());
                }
            }
        }
        (None, true) => println!(
            "{UNIT_NAME}: enabled in {}, without coldstart's drop-in (installed by hand)",
            root.display()
        ),
        _ => println!("{UNIT_NAME}: not enabled in {}", root.display()),
    }
    let plan = crate::cmd::boot_blocks::PLAN_IN_ROOT;
    if exists(&inside(root, plan)) {
        println!(
            "block plan {plan}: replayed from the initramfs before the root is mounted (kernel log: dmesg | grep coldstart)"
        );
    }
    crate::cmd::boot_service::print_status(&inside(root, crate::cmd::boot_service::STATE_DIR), "boot");
    let dir = inside(root, coldstart_record::boot::BOOT_TRACE_DIR);
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            println!("traces: none yet in {}", dir.display());
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => {
            return Err(e).with_context(|| format!("cannot list {} (it is root's only)", dir.display()));
        }
    };
    let mut traces: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("boot-") && n.ends_with(".coldstart"))
        })
        .collect();
    traces.sort();
    if traces.is_empty() {
        println!("traces: none yet in {}", dir.display());
    } else {
        println!("traces in {}:", dir.display());
    }
    for path in traces {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        let what = match Trace::read(&path) {
            Ok(t) => {
                let date = utc_date(t.meta.start_unix_ns);
                let ready = t.meta.ready.as_ref().map_or_else(
                    || format!("not ready after {}", secs(t.meta.duration_ns)),
                    |r| format!("ready at {} ({})", secs(r.t_ns), r.reason),
                );
                let before = before_recording_text(&t.meta.before_recording)
                    .map(|b| format!("; before recording: {b}"))
                    .unwrap_or_default();
                format!("{date}  {ready}{before}")
            }
            Err(e) => format!("unreadable: {}", coldstart_trace::error_chain(&e)),
        };
        println!("  {name}  {}  {what}", bytes(size));
    }
    Ok(ExitCode::SUCCESS)
}

/// `YYYY-MM-DD HH:MM:SS UTC` of a Unix time in ns (the civil-from-days algorithm).
pub(crate) fn utc_date(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Waits to be ended: the boot recording's tree, whose marks file it names for `coldstart mark`.
fn hold() -> anyhow::Result<ExitCode> {
    if let Some(marks) = std::env::var_os(coldstart_launch::MARKS_ENV) {
        eprintln!(
            "coldstart: recording; mark a milestone with: COLDSTART_MARKS={} coldstart mark NAME",
            marks.to_string_lossy()
        );
    }
    loop {
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exec_start_quotes_what_systemd_would_split_or_expand() {
        assert_eq!(exec_word("unit:multi-user.target"), "unit:multi-user.target");
        assert_eq!(exec_word("window-name:/a b/"), "\"window-name:/a b/\"");
        assert_eq!(exec_word("mark:50%"), "\"mark:50%%\"");
        assert_eq!(exec_word("mark:$HOME\"x"), "\"mark:$$HOME\\\"x\"");
    }

    #[test]
    fn exec_line_words_read_back_what_exec_word_wrote() {
        let words =
            ["/usr/local/bin/coldstart", "window-name:/My App/", "mark:50%", "mark:$HOME\"x", "a\\b", "3"];
        let line = words.iter().map(|w| exec_word(w)).collect::<Vec<_>>().join(" ");
        assert_eq!(exec_line_words(&line), words);
        assert_eq!(exec_line_words("  a   \"\"  b "), ["a", "", "b"]);
    }

    /// `boot enable --root ROOT EXTRA…` as the command line gives it.
    fn enable_args(root: &str, extra: &[&str]) -> EnableArgs {
        #[derive(clap::Parser)]
        struct Line {
            #[command(flatten)]
            enable: EnableArgs,
        }
        <Line as clap::Parser>::parse_from([&["enable", "--root", root][..], extra].concat()).enable
    }

    #[test]
    fn the_wrapper_finds_the_services_options_that_enable_wrote() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().to_str().unwrap();
        assert_eq!(enabled_service_words(root.path()), None);
        let enable_with = |extra: &[&str]| enable(&enable_args(dir, extra)).unwrap();
        enable_with(&[]);
        assert_eq!(enabled_service_words(root.path()), None, "a plain recording is not the service");
        enable_with(&["--prefetch", "--until", "window-name:/My App/", "--verify-boots", "4"]);
        let words = enabled_service_words(root.path()).unwrap();
        assert_eq!(words[..4], ["--until", "window-name:/My App/", "--timeout", "120"], "{words:?}");
        assert!(words.windows(2).any(|w| w == ["--verify-boots", "4"]), "{words:?}");
    }

    /// The packaged binary is found where it is the only one; a hand-installed one, or
    /// `--binary`, wins.
    #[test]
    fn enable_finds_the_packaged_binary_where_it_is_the_only_one() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().to_str().unwrap();
        let binary = |extra: &[&str]| enable_args(dir, extra).binary();
        assert_eq!(binary(&[]), Path::new(DEFAULT_BINARY));
        std::fs::create_dir_all(root.path().join("usr/bin")).unwrap();
        std::fs::write(root.path().join("usr/bin/coldstart"), "").unwrap();
        assert_eq!(binary(&[]), Path::new(PACKAGED_BINARY));
        assert_eq!(binary(&["--install-binary"]), Path::new(DEFAULT_BINARY));
        assert_eq!(binary(&["--binary", "/opt/coldstart"]), Path::new("/opt/coldstart"));
        std::fs::create_dir_all(root.path().join("usr/local/bin")).unwrap();
        std::fs::write(root.path().join("usr/local/bin/coldstart"), "").unwrap();
        assert_eq!(binary(&[]), Path::new(DEFAULT_BINARY));
    }

    #[test]
    fn created_paths_are_read_back_and_none_climbs_out_of_the_root() {
        let drop_in = "# created: /etc/coldstart\n# created: /etc/coldstart/boot-blocks.bplan\n\
                       # created: /etc/../../home/x\n# created: ../outside\n[Service]\n";
        assert_eq!(created_paths(drop_in), vec!["/etc/coldstart", "/etc/coldstart/boot-blocks.bplan"]);
    }

    #[test]
    fn dates_of_unix_times() {
        assert_eq!(utc_date(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc_date(1_764_186_300_000_000_000), "2025-11-26 19:45:00 UTC");
        assert_eq!(utc_date(951_782_400_000_000_000), "2000-02-29 00:00:00 UTC");
    }

    #[test]
    fn boot_conditions_default_to_multi_user_and_refuse_exit() {
        assert_eq!(boot_conditions(&[Until::Exit]).unwrap(), [DEFAULT_UNTIL.parse::<Until>().unwrap()]);
        assert!(boot_conditions(&[Until::Exit, "idle".parse().unwrap()]).is_err());
        assert!(boot_conditions(&["output:ready".parse().unwrap()]).is_err());
        let idle: Until = "idle:500".parse().unwrap();
        assert_eq!(boot_conditions(std::slice::from_ref(&idle)).unwrap(), [idle]);
    }

    #[test]
    fn the_unit_is_the_bootchart_idiom() {
        for line in
            ["DefaultDependencies=no", "Before=sysinit.target", "WantedBy=sysinit.target", "Type=notify"]
        {
            assert!(UNIT_TEXT.lines().any(|l| l.starts_with(line)), "{line}");
        }
    }
}
