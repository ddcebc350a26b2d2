//! What `record --boot` adds to a recording: the trace file under /var/log/coldstart,
//! how long the machine took before recording began, and the readiness notification
//! that lets systemd go on with the boot once tracing is on.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use coldstart_launch::systemd::{BootTimestamps, Manager, boot_timestamps};
use coldstart_trace::BootPhase;

use crate::error::{IoContext, Result};

/// Where boot traces go unless `-o` says otherwise.
pub const BOOT_TRACE_DIR: &str = "/var/log/coldstart";

/// Where a boot trace goes when [`BOOT_TRACE_DIR`] cannot be written when the recording
/// ends (the root filesystem still read-only, /var not mounted).
pub const BOOT_FALLBACK_DIR: &str = "/run/coldstart";

/// Where the spool of a boot recording lives: /run is there from the start of the boot,
/// while / may still be read-only and /var not mounted.
pub const BOOT_SPOOL_ROOT: &str = "/run/coldstart/spool";

/// `DIR/boot-YYYYMMDD-HHMMSS.coldstart` (UTC, the wall clock at the start), never overwriting.
pub fn boot_output(dir: &Path, start_unix_s: i64) -> PathBuf {
    start_output(dir, "boot", start_unix_s)
}

/// `dir/WHAT-YYYYMMDD-HHMMSS.coldstart` (UTC), as [`boot_output`] names a boot's.
pub fn start_output(dir: &Path, what: &str, start_unix_s: i64) -> PathBuf {
    let stamp = chrono::DateTime::from_timestamp(start_unix_s, 0)
        .map_or_else(|| "unknown".to_owned(), |t| t.format("%Y%m%d-%H%M%S").to_string());
    crate::session::unique_output(dir, &format!("{what}-{stamp}"))
}

/// Creates the directory of boot traces, mode 0700, if it is missing: at the end of the
/// recording, when the boot has mounted it writable.
pub fn create_trace_dir(dir: &Path) -> Result<()> {
    if !dir.exists() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).at(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).at(dir)?;
    }
    Ok(())
}

/// The boot's phases before t = 0 from the systemd manager of PID 1, or, when PID 1
/// is not systemd or does not answer, the kernel's uptime at t = 0. The second value
/// says why systemd's timestamps were not used.
pub fn before_recording(t0_boot_ns: i64, boottime_offset_ns: i64) -> (Vec<BootPhase>, Option<String>) {
    let uptime = || vec![BootPhase { phase: "uptime".into(), ns: t0_boot_ns.max(0) }];
    let Some(manager) = Manager::system() else {
        return (
            uptime(),
            Some("PID 1 is not systemd: the time before recording is the kernel's uptime".into()),
        );
    };
    match boot_timestamps(&manager) {
        Ok(stamps) if stamps.userspace_us > 0 => {
            // systemd writes this file when it runs in a container.
            let in_container = Path::new("/run/systemd/container").exists();
            (phases(&stamps, t0_boot_ns - boottime_offset_ns, in_container), None)
        }
        Ok(_) => (
            uptime(),
            Some(
                "systemd gave no userspace timestamp: the time before recording is the kernel's uptime"
                    .into(),
            ),
        ),
        Err(e) => (
            uptime(),
            Some(format!(
                "systemd's boot timestamps could not be read ({}): the time before recording is the kernel's uptime",
                coldstart_trace::error_chain(&e)
            )),
        ),
    }
}

/// The phases `systemd-analyze time` shows, with the userspace phase up to `t0_monotonic_ns`.
/// In a container the manager's userspace timestamp is the container's start on the host's
/// clock: what came before it is the host's uptime (`host`), not the kernel's start.
pub fn phases(stamps: &BootTimestamps, t0_monotonic_ns: i64, in_container: bool) -> Vec<BootPhase> {
    let ns = |us: u64| i64::try_from(us).unwrap_or(i64::MAX / 1000).saturating_mul(1000);
    let mut out = Vec::new();
    let mut push = |phase: &str, ns: i64| out.push(BootPhase { phase: phase.into(), ns: ns.max(0) });
    if in_container {
        push("host", ns(stamps.userspace_us));
        push("userspace", t0_monotonic_ns.saturating_sub(ns(stamps.userspace_us)));
        return out;
    }
    if stamps.firmware_us > 0 {
        push("firmware", ns(stamps.firmware_us.saturating_sub(stamps.loader_us)));
    }
    if stamps.loader_us > 0 {
        push("loader", ns(stamps.loader_us));
    }
    if stamps.initrd_us > 0 {
        push("kernel", ns(stamps.initrd_us));
        push("initrd", ns(stamps.userspace_us.saturating_sub(stamps.initrd_us)));
    } else {
        push("kernel", ns(stamps.userspace_us));
    }
    push("userspace", t0_monotonic_ns.saturating_sub(ns(stamps.userspace_us)));
    out
}

/// Sends `state` (`READY=1`) to the service manager's `NOTIFY_SOCKET`, as sd_notify(3)
/// does; false when there is no such socket (not started by systemd as `Type=notify`).
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else { return Ok(false) };
    notify_to(&path, state).map(|()| true)
}

/// Sends `state` to the datagram socket `path` (`@NAME`: an abstract one), as sd_notify(3) does.
pub fn notify_to(path: impl AsRef<std::ffi::OsStr>, state: &str) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::net::{SocketAddr, UnixDatagram};
    let path = path.as_ref();
    let socket = UnixDatagram::unbound()?;
    match path.as_bytes().strip_prefix(b"@") {
        Some(name) => {
            use std::os::linux::net::SocketAddrExt;
            socket.send_to_addr(state.as_bytes(), &SocketAddr::from_abstract_name(name)?)?;
        }
        None => {
            socket.send_to(state.as_bytes(), path)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn by_name(phases: &[BootPhase]) -> Vec<(&str, i64)> {
        phases.iter().map(|p| (p.phase.as_str(), p.ns)).collect()
    }

    #[test]
    fn phases_as_systemd_analyze_time_counts_them() {
        let stamps = BootTimestamps {
            firmware_us: 5_000_000,
            loader_us: 2_000_000,
            initrd_us: 900_000,
            userspace_us: 2_100_000,
        };
        assert_eq!(
            by_name(&phases(&stamps, 2_600_000_000, false)),
            [
                ("firmware", 3_000_000_000),
                ("loader", 2_000_000_000),
                ("kernel", 900_000_000),
                ("initrd", 1_200_000_000),
                ("userspace", 500_000_000)
            ]
        );
        let no_initrd = BootTimestamps { userspace_us: 700_000, ..Default::default() };
        assert_eq!(
            by_name(&phases(&no_initrd, 1_000_000_000, false)),
            [("kernel", 700_000_000), ("userspace", 300_000_000)]
        );
        assert_eq!(
            by_name(&phases(&no_initrd, 1_000_000_000, true)),
            [("host", 700_000_000), ("userspace", 300_000_000)]
        );
    }

    #[test]
    fn boot_traces_are_named_by_the_utc_start_in_a_private_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("log/coldstart");
        create_trace_dir(&dir).unwrap();
        let path = boot_output(&dir, 1_764_186_300);
        assert_eq!(path, dir.join("boot-20251126-194500.coldstart"));
        assert_eq!(std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        std::fs::write(&path, "").unwrap();
        assert_eq!(boot_output(&dir, 1_764_186_300), dir.join("boot-20251126-194500-2.coldstart"));
    }
}
