//! A boot's block plan replayed from the initramfs, before the root filesystem is mounted:
//! what `boot enable --block-plan` installs in a root (the plan, the file the hooks read, the
//! initramfs-tools hook and premount script, the dracut module), the initramfs made again, and
//! `boot early`, which those scripts start in the background on the root device.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, bail};
use coldstart_prefetch::blocks::{self, BlockPlan};

use super::boot::{create_dirs, exists, inside};

/// Where the plan and the hooks' settings go inside the root.
pub const PLAN_IN_ROOT: &str = "/etc/coldstart/boot-blocks.bplan";
const CONF_IN_ROOT: &str = "/etc/coldstart/boot-blocks.conf";
/// Where the plan is inside the initramfs (the hooks copy it there).
const PLAN_IN_INITRAMFS: &str = "/etc/coldstart/boot-blocks.bplan";
const REPORT: &str = "/run/coldstart/boot-blocks.json";

const INITRAMFS_TOOLS: [(&str, &str); 2] = [
    ("/etc/initramfs-tools/hooks/coldstart-blocks", include_str!("../../assets/early/initramfs-hook")),
    (
        "/etc/initramfs-tools/scripts/local-premount/coldstart-blocks",
        include_str!("../../assets/early/initramfs-premount"),
    ),
];
const DRACUT: [(&str, &str); 2] = [
    (
        "/usr/lib/dracut/modules.d/90coldstart-blocks/module-setup.sh",
        include_str!("../../assets/early/dracut-module-setup.sh"),
    ),
    (
        "/usr/lib/dracut/modules.d/90coldstart-blocks/coldstart-blocks.sh",
        include_str!("../../assets/early/dracut-hook.sh"),
    ),
];

/// `boot early`: what the initramfs runs on the root device before mounting it.
#[derive(Debug, clap::Args)]
pub struct EarlyArgs {
    /// The root device, as the initramfs found it.
    #[arg(long, value_name = "PATH")]
    pub device: PathBuf,
    /// The block plan.
    #[arg(long, value_name = "PATH", default_value = PLAN_IN_INITRAMFS)]
    pub plan: PathBuf,
    /// Where the lines saying what it did go (the kernel log; a missing one: standard error).
    #[arg(long, value_name = "PATH", default_value = "/dev/kmsg")]
    pub log: PathBuf,
    /// The replay's report (JSON), opened at the start so that it outlives the switch to the root.
    #[arg(long, value_name = "PATH", default_value = REPORT)]
    pub report: PathBuf,
}

/// Replays the plan fetch-only on the device; the log gets a line at the start and one with the outcome.
pub fn early(args: &EarlyArgs) -> anyhow::Result<ExitCode> {
    let mut log: Box<dyn Write> = match std::fs::OpenOptions::new().append(true).open(&args.log) {
        Ok(file) => Box::new(file),
        Err(_) => Box::new(std::io::stderr()),
    };
    let start = format!(
        "coldstart: fetching the boot's block plan from {} before the root is mounted\n",
        args.device.display()
    );
    // One write per line: the kernel log makes a record of each write.
    let _ = log.write_all(start.as_bytes());
    let outcome = fetch_early(args);
    let line = match &outcome {
        Ok(summary) => format!("{summary}\n"),
        Err(e) => format!("coldstart: the boot's block plan was not replayed: {e:#}\n"),
    };
    let _ = log.write_all(line.as_bytes());
    outcome.map(|_| ExitCode::SUCCESS)
}

/// Replays, and writes the report (or the error) to the file opened before the replay.
fn fetch_early(args: &EarlyArgs) -> anyhow::Result<String> {
    if let Some(dir) = args.report.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut report_file = std::fs::File::create(&args.report)
        .with_context(|| format!("cannot write {}", args.report.display()))?;
    let replayed = replay_early(args);
    let report = match &replayed {
        Ok(report) => serde_json::to_value(report)?,
        Err(e) => serde_json::json!({ "error": format!("{e:#}") }),
    };
    report_file.write_all((serde_json::to_string_pretty(&report)? + "\n").as_bytes())?;
    replayed.map(|report| report.summary())
}

fn replay_early(args: &EarlyArgs) -> anyhow::Result<blocks::BlockReplayReport> {
    let plan = BlockPlan::load(&args.plan)?;
    Ok(blocks::replay_blocks(&plan, &args.device, super::prefetch_blocks::DEFAULT_DEPTH, None, true)?)
}

/// Which initramfs generator the root has, by the files it ships.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Generator {
    InitramfsTools,
    Dracut,
}

fn generators(root: &Path) -> Vec<Generator> {
    let mut found = Vec::new();
    if exists(&inside(root, "usr/sbin/update-initramfs")) || inside(root, "etc/initramfs-tools").is_dir() {
        found.push(Generator::InitramfsTools);
    }
    if exists(&inside(root, "usr/bin/dracut")) || inside(root, "usr/lib/dracut").is_dir() {
        found.push(Generator::Dracut);
    }
    found
}

/// Checks the plan and the root before anything is written: the plan loads, the root makes
/// initramfs images, and, when the root is a mounted device, the plan is that device's.
pub fn check(root: &Path, plan_path: &Path, binary: &Path) -> anyhow::Result<BlockPlan> {
    let plan = BlockPlan::load(plan_path)?;
    if generators(root).is_empty() {
        bail!(
            "--block-plan: {} has neither initramfs-tools nor dracut, which make the initramfs the plan is replayed from",
            root.display()
        );
    }
    if binary.to_string_lossy().chars().any(|c| c.is_whitespace() || "\"'$`\\".contains(c)) {
        bail!("--binary {}: the initramfs hooks need a path without spaces or quotes", binary.display());
    }
    if let Some(device) = mounted_device(root) {
        verify_on(&plan, &device).with_context(|| {
            format!("--block-plan {} is not for the filesystem at {}", plan_path.display(), root.display())
        })?;
    }
    Ok(plan)
}

/// The hooks of the root's generators: (path in the root, text).
fn hooks(root: &Path) -> Vec<(&'static str, &'static str)> {
    generators(root)
        .into_iter()
        .flat_map(|generator| match generator {
            Generator::InitramfsTools => INITRAMFS_TOOLS,
            Generator::Dracut => DRACUT,
        })
        .collect()
}

/// Refuses when a file `install` would write is there already (not written by `enable`).
pub fn refuse_in_the_way(root: &Path) -> anyhow::Result<()> {
    let mut ours =
        [PLAN_IN_ROOT, CONF_IN_ROOT].into_iter().chain(hooks(root).into_iter().map(|(rel, _)| rel));
    if let Some(in_the_way) = ours.find(|rel| exists(&inside(root, rel))) {
        bail!(
            "{} exists but was not written by `coldstart boot enable`: left alone",
            inside(root, in_the_way).display()
        );
    }
    Ok(())
}

/// Writes the plan, the hooks' settings and the hooks of the root's generators; returns the
/// paths it created (directories too), outermost first.
pub fn install(root: &Path, plan_path: &Path, binary: &Path) -> anyhow::Result<Vec<String>> {
    let mut created = create_dirs(root, "etc/coldstart")?;
    copy_into(root, plan_path, PLAN_IN_ROOT, 0o644)?;
    created.push(PLAN_IN_ROOT.to_owned());
    let conf = format!(
        "# Written by `coldstart boot enable --block-plan`; read by the initramfs hooks.\n\
         COLDSTART_BINARY={}\nCOLDSTART_BLOCK_PLAN={PLAN_IN_ROOT}\n",
        binary.display()
    );
    write_into(root, CONF_IN_ROOT, &conf, 0o644)?;
    created.push(CONF_IN_ROOT.to_owned());
    for (rel, text) in hooks(root) {
        let parent = Path::new(rel).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        created.extend(create_dirs(root, &parent)?);
        write_into(root, rel, text, 0o755)?;
        created.push(rel.to_owned());
    }
    Ok(created)
}

/// With `--block-plan-only` (no unit, so no drop-in): what enable created, listed in the hooks'
/// settings file as the drop-in lists it, for `disable`.
pub fn record_created(root: &Path, created: &[String]) -> anyhow::Result<()> {
    let path = inside(root, CONF_IN_ROOT);
    let lines: String = created.iter().map(|rel| format!("{}{rel}\n", super::boot::CREATED)).collect();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(lines.as_bytes()).with_context(|| format!("cannot write {}", path.display()))
}

/// What `enable --block-plan-only` created, when that is what the root has.
pub fn created_alone(root: &Path) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(inside(root, CONF_IN_ROOT)).ok()?;
    let created = super::boot::created_paths(&text);
    (!created.is_empty()).then_some(created)
}

/// Whether `enable --block-plan-only` installed the early replay in the root.
pub fn installed_alone(root: &Path) -> bool {
    created_alone(root).is_some()
}

/// After `install` changed the root: whether the plan still holds on its device, when the
/// root is a mounted device (`None` when it cannot be told).
pub fn still_holds(root: &Path, plan: &BlockPlan) -> Option<anyhow::Result<()>> {
    let device = mounted_device(root)?;
    let dir = std::fs::File::open(root).ok()?;
    nix::unistd::syncfs(&dir).ok()?;
    Some(verify_on(plan, &device))
}

fn verify_on(plan: &BlockPlan, device: &Path) -> anyhow::Result<()> {
    let opened = blocks::direct::DirectDevice::open(device)?;
    blocks::identity::verify(&opened, &plan.identity)?;
    Ok(())
}

/// The block device mounted at `root` (the last mount there), from /proc/self/mountinfo.
fn mounted_device(root: &Path) -> Option<PathBuf> {
    let root = std::fs::canonicalize(root).ok()?;
    let mount = coldstart_record::system::mounts().into_iter().rev().find(|m| m.mount_point == root)?;
    let device = PathBuf::from(mount.source);
    let meta = std::fs::metadata(&device).ok()?;
    std::os::unix::fs::FileTypeExt::is_block_device(&meta.file_type()).then_some(device)
}

fn copy_into(root: &Path, from: &Path, rel: &str, mode: u32) -> anyhow::Result<()> {
    let to = inside(root, rel);
    std::fs::copy(from, &to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn write_into(root: &Path, rel: &str, text: &str, mode: u32) -> anyhow::Result<()> {
    let to = inside(root, rel);
    std::fs::write(&to, text).with_context(|| format!("cannot write {}", to.display()))?;
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

/// Makes the root's initramfs images again (`update-initramfs -u -k all`, or `dracut
/// --regenerate-all --force`), in a chroot unless the root is `/`; returns what ran.
pub fn update_initramfs(root: &Path) -> anyhow::Result<String> {
    let command_of = |generator: &Generator| -> (&str, &str, &[&str]) {
        match generator {
            Generator::InitramfsTools => {
                ("usr/sbin/update-initramfs", "update-initramfs", &["-u", "-k", "all"])
            }
            Generator::Dracut => ("usr/bin/dracut", "dracut", &["--regenerate-all", "--force"]),
        }
    };
    let found = generators(root);
    // The generator whose program is there (a root may keep the other's configuration).
    let chosen = found.iter().map(command_of).find(|(path, ..)| exists(&inside(root, path)));
    let Some((_, program, args)) = chosen.or_else(|| found.first().map(command_of)) else {
        bail!("{} has neither initramfs-tools nor dracut", root.display());
    };
    let mut words: Vec<String> = match root == Path::new("/") {
        true => Vec::new(),
        false => vec!["chroot".into(), root.display().to_string()],
    };
    words.push(program.into());
    words.extend(args.iter().map(|a| (*a).to_owned()));
    let shown = words.join(" ");
    let output = Command::new(&words[0])
        .args(&words[1..])
        .env("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
        .output()
        .with_context(|| format!("cannot run `{shown}`"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no message");
        bail!(
            "`{shown}` failed ({}): {last}; the initramfs does not hold the change until it runs (--no-initramfs-update leaves it to you)",
            output.status
        );
    }
    Ok(shown)
}
