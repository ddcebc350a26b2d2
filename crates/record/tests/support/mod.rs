//! What the recorder's integration tests share: the capability check (fail under
//! CI=true, skip otherwise) and private directories on a real disk.
#![allow(dead_code)]

use std::path::PathBuf;

/// Whether this machine can record; under CI=true a missing capability fails the test.
pub fn can_record(test: &str) -> bool {
    let missing = if !nix::unistd::Uid::effective().is_root() {
        Some("not root")
    } else if coldstart_record::preflight().is_err() {
        Some("no tracefs")
    } else if nix::sys::fanotify::Fanotify::init(
        nix::sys::fanotify::InitFlags::FAN_CLASS_NOTIF,
        nix::sys::fanotify::EventFFlags::O_RDONLY,
    )
    .is_err()
    {
        Some("no fanotify")
    } else {
        None
    };
    match missing {
        None => true,
        Some(why) if std::env::var("CI").as_deref() == Ok("true") => {
            panic!("{test}: cannot record ({why}) and CI=true")
        }
        Some(why) => {
            eprintln!("skip {test}: cannot record here ({why})");
            false
        }
    }
}

/// Whether this process is root (needed to plant other users' files); under CI=true
/// not being root fails the test.
pub fn is_root(test: &str) -> bool {
    if nix::unistd::Uid::effective().is_root() {
        return true;
    }
    assert!(std::env::var("CI").as_deref() != Ok("true"), "{test}: not root and CI=true");
    eprintln!("skip {test}: not root");
    false
}

/// A private directory on the build's disk (not a tmpfs, whose pages never enter
/// the page cache through the traced path).
pub fn private_dir() -> tempfile::TempDir {
    let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    std::fs::create_dir_all(&base).unwrap();
    tempfile::tempdir_in(base).unwrap()
}
