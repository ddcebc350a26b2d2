//! The Debian package (packaging/deb.sh with cargo-deb), made from the binary under test,
//! installed with dpkg into a copy of the boot tests' Debian rootfs and run there, in a
//! chroot with the host's /proc, /sys and /dev: `coldstart --version`, and `coldstart demo`,
//! a cold start recorded inside it. The man pages, completions and units are where Debian
//! looks for them. (A copy, not an overlay: fanotify cannot mark an overlayfs.)

mod support;
use support::container::{have, rootfs};
use support::{can_record, private_dir, unavailable};

use std::path::{Path, PathBuf};
use std::process::Command;

/// cargo-deb: `CARGO_DEB`, the copy .ci/run installs in the test cache, or the PATH's.
fn cargo_deb() -> Option<PathBuf> {
    let cached = Path::new("/var/cache/coldstart-tests/cargo-deb/bin/cargo-deb");
    std::env::var_os("CARGO_DEB")
        .map(PathBuf::from)
        .or_else(|| cached.exists().then(|| cached.to_path_buf()))
        .or_else(|| have("cargo-deb").then(|| PathBuf::from("cargo-deb")))
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// Builds the package into `dir` from the binary under test.
fn build_package(cargo_deb: &Path, dir: &Path) -> PathBuf {
    let deb = dir.join("coldstart.deb");
    let out = Command::new("bash")
        .arg(workspace().join("packaging/deb.sh"))
        .args(["--fast", "--output"])
        .arg(&deb)
        .env("COLDSTART", env!("CARGO_BIN_EXE_coldstart"))
        .env("CARGO_DEB", cargo_deb)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "packaging/deb.sh failed: {said}");
    deb
}

/// The files the package installs, from `dpkg-deb --contents`.
fn contents(deb: &Path) -> String {
    let out = Command::new("dpkg-deb").arg("--contents").arg(deb).output().unwrap();
    assert!(out.status.success(), "dpkg-deb --contents failed");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `script` as root in a chroot of `root` with the host's /proc, /sys (tracefs
/// included) and /dev, in a private mount namespace that takes its mounts with it. The
/// root is bound onto itself so that it is a mount inside the chroot, as the recorder needs.
fn in_chroot(root: &Path, script: &str) -> std::process::Output {
    let setup = format!(
        "mount --bind {r} {r} && mount --bind /proc {r}/proc && mount --rbind /sys {r}/sys \
         && mount --rbind /dev {r}/dev && exec chroot {r} /bin/sh -c \"$1\"",
        r = root.display()
    );
    Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &setup, "sh", script])
        .output()
        .unwrap()
}

#[test]
fn the_package_installs_and_runs_in_a_debian_rootfs() {
    if !can_record("package") {
        return;
    }
    let Some(cargo_deb) = cargo_deb() else {
        unavailable("package", "cargo-deb is not installed (cargo install cargo-deb --locked)");
        return;
    };
    if !(have("dpkg-deb") && have("mmdebstrap") && have("unshare"))
        && unavailable("package", "dpkg-deb, mmdebstrap or unshare is missing")
    {
        return;
    }
    let dir = private_dir();
    let deb = build_package(&cargo_deb, dir.path());
    let files = contents(&deb);
    for path in [
        "./usr/bin/coldstart",
        "./usr/share/man/man1/coldstart.1.gz",
        "./usr/share/man/man1/coldstart-record.1.gz",
        "./usr/share/bash-completion/completions/coldstart",
        "./usr/share/zsh/vendor-completions/_coldstart",
        "./usr/share/fish/vendor_completions.d/coldstart.fish",
        "./usr/lib/systemd/system/coldstart-prefetch@.service",
        "./usr/lib/systemd/user/coldstart-prefetch@.service",
    ] {
        assert!(files.lines().any(|l| l.ends_with(path)), "the package lacks {path}:\n{files}");
    }

    let root = dir.path().join("rootfs");
    let copied = Command::new("cp").arg("-a").arg(rootfs()).arg(&root).status().unwrap();
    assert!(copied.success(), "cannot copy the rootfs");
    std::fs::copy(&deb, root.join("tmp/coldstart.deb")).unwrap();
    let out = in_chroot(
        &root,
        "dpkg -i /tmp/coldstart.deb >/dev/null && coldstart --version \
         && grep ExecStart= /usr/lib/systemd/system/coldstart-prefetch@.service \
         && cd /root && coldstart demo",
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "in the rootfs:\n{stdout}\n{stderr}");
    assert!(
        stdout
            .lines()
            .next()
            .is_some_and(|l| l.starts_with(&format!("coldstart {}", env!("CARGO_PKG_VERSION")))),
        "coldstart --version: {stdout}"
    );
    assert!(stdout.contains("ExecStart=/usr/bin/coldstart prefetch run"), "the unit's binary: {stdout}");
    let demo = root.join("root/coldstart-demo");
    for file in ["demo.coldstart", "report.txt", "report.html", "chart.svg"] {
        assert!(demo.join(file).is_file(), "coldstart demo did not write {file}:\n{stdout}\n{stderr}");
    }
    let report = std::fs::read_to_string(demo.join("report.txt")).unwrap();
    assert!(report.contains("ready"), "the demo's report: {report}");
    let status = Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args(["-s", "coldstart"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("Status: install ok installed"));
}
