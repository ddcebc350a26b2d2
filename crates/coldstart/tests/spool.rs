//! `coldstart record` and `coldstart recover` facing spools another user planted:
//! refused with a one-line error and exit status 2, before any command starts, with
//! nothing written where a planted link points.

mod support;
use support::{can_record, coldstart, is_root, private_dir, unavailable};

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, lchown, symlink};
use std::path::Path;

const NOBODY: u32 = 65534;

fn is_empty(dir: &Path) -> bool {
    fs::read_dir(dir).unwrap().next().is_none()
}

fn stderr_line(output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr}");
    stderr
}

#[test]
fn record_with_a_spool_dir_linked_to_another_users_directory_exits_2_before_the_command() {
    if !can_record("record_linked_spool_dir") {
        return;
    }
    let dir = private_dir();
    let theirs = dir.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o777)).unwrap();
    chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let link = dir.path().join("spool");
    symlink(&theirs, &link).unwrap();
    lchown(&link, Some(NOBODY), Some(NOBODY)).unwrap();
    let marker = dir.path().join("started");
    let out = dir.path().join("out.coldstart");

    let output = coldstart()
        .arg("record")
        .arg("--spool-dir")
        .arg(&link)
        .arg("-o")
        .arg(&out)
        .arg("--")
        .arg("touch")
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = stderr_line(&output);
    assert!(
        stderr.contains(&format!("unsafe spool directory: {} is a symbolic link", link.display())),
        "{stderr}"
    );
    assert!(!marker.exists(), "the command never started");
    assert!(!out.exists());
    assert!(is_empty(&theirs), "nothing written where the link points");
}

/// A spool as a dead recorder leaves it, but made and owned by `nobody`.
fn their_spool(root: &Path) -> std::path::PathBuf {
    let spool = root.join("2147483647-1");
    fs::create_dir_all(&spool).unwrap();
    fs::write(spool.join("start.json"), r#"{"output": "/etc/cron.d/x"}"#).unwrap();
    chown(&spool, Some(NOBODY), Some(NOBODY)).unwrap();
    spool
}

#[test]
fn recover_refuses_a_spool_owned_by_another_user() {
    if !is_root() && unavailable("recover_foreign_spool", "not root") {
        return;
    }
    let dir = private_dir();
    let spool = their_spool(&dir.path().join("spool"));
    let out = dir.path().join("recovered.coldstart");
    let output = coldstart().arg("recover").arg(&spool).arg("-o").arg(&out).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = stderr_line(&output);
    assert!(stderr.contains(&format!("{} belongs to uid 65534, not root", spool.display())), "{stderr}");
    assert!(!out.exists());
    assert!(spool.join("start.json").exists(), "the spool is left as found");
}

#[test]
fn recover_skips_leftovers_of_another_user_with_a_warning() {
    if !is_root() && unavailable("recover_skips_foreign_leftovers", "not root") {
        return;
    }
    let dir = private_dir();
    let root = dir.path().join("spool");
    let spool = their_spool(&root);
    let output = coldstart().arg("recover").arg("--spool-dir").arg(&root).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: not reading a spool: unsafe spool directory"), "{stderr}");
    assert!(stderr.contains("belongs to uid 65534"), "{stderr}");
    assert!(stderr.contains("nothing to recover"), "{stderr}");
    assert!(spool.join("start.json").exists(), "the spool is left as found");
    assert!(!Path::new("/etc/cron.d/x").exists());
}
