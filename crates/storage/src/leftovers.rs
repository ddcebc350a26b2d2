//! Where emulated disks live on the system, and the cleanup of those a killed run left:
//! each disk gets `/run/coldstart-storage/<pid>-<n>/` (its FUSE mount in `fuse/`), so a
//! later run recognises a dead owner's mounts and loop devices and removes them.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::sys;

pub const RUN_ROOT: &str = "/run/coldstart-storage";
const LOOP_RELEASE_TIMEOUT: Duration = Duration::from_secs(10);

/// A fresh directory name for a disk of this process.
pub fn new_run_dir() -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::SeqCst);
    Path::new(RUN_ROOT).join(format!("{}-{n}", std::process::id()))
}

/// The pid that owns a run directory, from its name.
fn owner(dir: &Path) -> Option<u32> {
    dir.file_name()?.to_str()?.split_once('-')?.0.parse().ok()
}

/// Removes what disks of dead processes left: their filesystem mounts, loop devices,
/// FUSE mounts and directories. Returns how many run directories it removed.
pub fn clean_stale() -> usize {
    let Ok(entries) = std::fs::read_dir(RUN_ROOT) else { return 0 };
    let mut removed = 0;
    for dir in entries.flatten().map(|e| e.path()) {
        let alive = owner(&dir).is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            tear_down(&dir);
            removed += usize::from(!dir.exists());
        }
    }
    removed
}

/// Unmounts every filesystem on a loop device backed by a file under `dir`, detaches
/// those loop devices, unmounts what is mounted under `dir` and removes `dir`. Safe to
/// run again; errors leave the rest to the next run.
pub fn tear_down(dir: &Path) {
    let loops: Vec<PathBuf> = sys::loop_devices()
        .into_iter()
        .filter(|(_, backing)| backing.starts_with(dir))
        .map(|(d, _)| d)
        .collect();
    for (source, target) in sys::mounts() {
        if loops.iter().any(|d| d.as_os_str() == source.as_str()) {
            let _ = sys::unmount(&target);
        }
    }
    for device in &loops {
        let _ = sys::detach_loop(device);
    }
    wait_for_release(&loops);
    let mut under: Vec<PathBuf> =
        sys::mounts().into_iter().map(|(_, target)| target).filter(|t| t.starts_with(dir)).collect();
    under.sort_by_key(|t| std::cmp::Reverse(t.components().count()));
    for target in under {
        let _ = sys::unmount(&target);
    }
    remove_empty_dirs(dir);
}

/// Waits until the kernel has let go of `devices` (autoclear runs when the last user closes them).
pub fn wait_for_release(devices: &[PathBuf]) {
    let start = Instant::now();
    while devices.iter().any(|d| sys::loop_attached(d)) && start.elapsed() < LOOP_RELEASE_TIMEOUT {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Removes `dir` and the empty directories in it, never descending into a mount.
fn remove_empty_dirs(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_directory_names_its_owner() {
        let dir = new_run_dir();
        assert_eq!(owner(&dir), Some(std::process::id()));
        assert_ne!(new_run_dir(), dir);
        assert_eq!(owner(Path::new("/run/coldstart-storage/notapid")), None);
    }
}
