//! The Debian container the boot tests start: its rootfs, made once with mmdebstrap and
//! cached outside the clone, an overlay of it for a test to write in, and the removal of
//! what `systemd-nspawn --keep-unit` leaves on a host whose PID 1 is not systemd.

use std::path::{Path, PathBuf};
use std::process::Command;

pub const CACHE: &str = "/var/cache/coldstart-tests";
pub const ROOTFS: &str = "/var/cache/coldstart-tests/bookworm-boot";

pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The cached rootfs, made first if missing: built in a temporary folder and renamed
/// into place when complete, so a killed build never leaves a half rootfs that a later
/// run would trust. Every test that boots it calls this, whichever runs first.
pub fn rootfs() -> PathBuf {
    let root = PathBuf::from(ROOTFS);
    if root.join("usr/lib/systemd/systemd").exists() {
        return root;
    }
    std::fs::create_dir_all(CACHE).unwrap();
    let building = tempfile::Builder::new().prefix(".bookworm-boot.").tempdir_in(CACHE).unwrap();
    let target = building.path().join("rootfs");
    let status = Command::new("mmdebstrap")
        .args(["--quiet", "--variant=minbase", "--include=systemd-sysv,udev,dbus", "bookworm"])
        .arg(&target)
        .status()
        .unwrap();
    assert!(status.success(), "mmdebstrap failed: {status}");
    if std::fs::rename(&target, &root).is_err() {
        assert!(root.join("usr/lib/systemd/systemd").exists(), "another run's rootfs is incomplete");
    }
    root
}

/// The rootfs, made if missing, when this machine can record a container boot; `None`
/// (the test skips, or fails under CI=true) when it cannot, with the reason said once.
pub fn bootable_rootfs(test: &str) -> Option<PathBuf> {
    if !crate::support::can_record(test) {
        return None;
    }
    if !(have("systemd-nspawn") && have("mmdebstrap"))
        && crate::support::unavailable(test, "systemd-nspawn or mmdebstrap is missing")
    {
        return None;
    }
    Some(rootfs())
}

/// Removes an empty cgroup tree, deepest first.
fn remove_cgroup_tree(dir: &Path) -> bool {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup_tree(&entry.path());
            }
        }
    }
    std::fs::remove_dir(dir).is_ok() || !dir.exists()
}

/// What `systemd-nspawn --keep-unit` leaves on a host whose PID 1 is not systemd: the
/// `payload` (with the container's own unit cgroups) and `supervisor` cgroups, and the
/// propagation directory of the machine `machine` (the rootfs folder's name). A cgroup
/// stays busy a moment while its last processes are reaped.
pub fn remove_nspawn_leftovers(machine: &str) {
    for _ in 0..50 {
        let mut all = true;
        for hierarchy in ["systemd", "unified"] {
            for dir in ["payload", "supervisor"] {
                all &= remove_cgroup_tree(&Path::new("/sys/fs/cgroup").join(hierarchy).join(dir));
            }
        }
        if all {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = std::fs::remove_dir(Path::new("/run/systemd/nspawn/propagate").join(machine));
}

/// What the recorder needs of a container that systemd-nspawn withholds by default:
/// fanotify_init is refused (EPERM) without these.
pub const NSPAWN_RECORDER_OPTIONS: [&str; 2] =
    ["--capability=all", "--system-call-filter=fanotify_init fanotify_mark perf_event_open bpf"];

/// The cached rootfs under an overlay whose upper layer is the test's: unmounted, and what
/// `systemd-nspawn --keep-unit` leaves on a host whose PID 1 is not systemd removed, when dropped.
pub struct Overlay {
    pub merged: PathBuf,
    pub upper: PathBuf,
}

impl Overlay {
    /// `root` under an overlay in `dir` (merged, upper, work); `None` (the test skips, or
    /// fails under CI=true) when overlays cannot be mounted here.
    pub fn mount(test: &str, root: &Path, dir: &Path) -> Option<Overlay> {
        let overlay = Overlay { merged: dir.join("merged"), upper: dir.join("upper") };
        for d in [&overlay.merged, &overlay.upper, &dir.join("work")] {
            std::fs::create_dir_all(d).unwrap();
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            root.display(),
            overlay.upper.display(),
            dir.join("work").display()
        );
        let mounted = Command::new("mount")
            .args(["-t", "overlay", "overlay", "-o", &options])
            .arg(&overlay.merged)
            .status();
        if !mounted.is_ok_and(|s| s.success()) && crate::support::unavailable(test, "cannot mount an overlay")
        {
            return None;
        }
        Some(overlay)
    }
}

impl Overlay {
    /// A copy of `root` (`cp -a`) in `dir/merged`, upper and merged layer at once. Its files
    /// keep inodes of the disk's own filesystem, so a recording inside the container names
    /// them; under an overlay the page cache's events carry the layers' inodes, which no
    /// mount inside the container shows, and the boot's files stay without a path.
    pub fn copy(test: &str, root: &Path, dir: &Path) -> Option<Overlay> {
        let merged = dir.join("merged");
        let copied = Command::new("cp").arg("-a").arg(root).arg(&merged).status();
        if !copied.is_ok_and(|s| s.success()) && crate::support::unavailable(test, "cannot copy the rootfs") {
            return None;
        }
        Some(Overlay { merged: merged.clone(), upper: merged })
    }
}

impl Drop for Overlay {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.merged).stderr(std::process::Stdio::null()).status();
        remove_nspawn_leftovers("merged");
    }
}

/// The first trace (`*.coldstart`) to appear in `dir` while the container `nspawn` runs,
/// waiting at most `timeout`; `None` when none came or the container ended first.
pub fn wait_for_trace(
    dir: &Path,
    nspawn: &mut std::process::Child,
    timeout: std::time::Duration,
) -> Option<PathBuf> {
    let started = std::time::Instant::now();
    loop {
        let found = std::fs::read_dir(dir).ok().and_then(|d| {
            d.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "coldstart"))
        });
        if found.is_some() || started.elapsed() > timeout || nspawn.try_wait().ok().flatten().is_some() {
            return found;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// Stops the container: SIGTERM (systemd-nspawn sends the container's systemd SIGRTMIN+3,
/// a clean halt), then SIGKILL after 30 s. Returns whether it halted on SIGTERM.
pub fn halt(nspawn: &mut std::process::Child) -> bool {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(nspawn.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let stop = std::time::Instant::now();
    while nspawn.try_wait().ok().flatten().is_none() && stop.elapsed() < std::time::Duration::from_secs(30) {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let halted = nspawn.try_wait().ok().flatten().is_some();
    let _ = nspawn.kill();
    let _ = nspawn.wait();
    halted
}

/// `systemd-nspawn -b` of `root` with what the recorder needs and this build of coldstart
/// bound at /usr/local/bin/coldstart, its console discarded.
pub fn spawn_boot(root: &Path) -> std::process::Child {
    let binary = assert_cmd::cargo::cargo_bin!("coldstart");
    Command::new("systemd-nspawn")
        .args(["-b", "-D"])
        .arg(root)
        .args(["--register=no", "--keep-unit", "--console=pipe"])
        .args(NSPAWN_RECORDER_OPTIONS)
        .arg(format!("--bind-ro={}:/usr/local/bin/coldstart", binary.display()))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// `systemd-nspawn` of `root` without `-b`: PID 1 is `coldstart boot init INIT_ARGS…`, the
/// init= wrapper, which execs the container's systemd; the console goes to `console`.
pub fn spawn_wrapper_boot(root: &Path, console: &Path, init_args: &[&str]) -> std::process::Child {
    let binary = assert_cmd::cargo::cargo_bin!("coldstart");
    let console = std::fs::File::create(console).unwrap();
    Command::new("systemd-nspawn")
        .arg("-D")
        .arg(root)
        .args(["--register=no", "--keep-unit", "--console=pipe", "--kill-signal=SIGRTMIN+3"])
        .args(NSPAWN_RECORDER_OPTIONS)
        .arg(format!("--bind-ro={}:/usr/local/bin/coldstart", binary.display()))
        .args(["/usr/local/bin/coldstart", "boot", "init"])
        .args(init_args)
        .stdin(std::process::Stdio::null())
        .stdout(console.try_clone().unwrap())
        .stderr(console)
        .spawn()
        .unwrap()
}

/// The pids of the processes whose root directory is `root` (a container's).
pub fn processes_rooted_at(root: &Path) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().chars().all(|c| c.is_ascii_digit()))
        .filter(|e| std::fs::read_link(e.path().join("root")).is_ok_and(|r| r == root))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}
