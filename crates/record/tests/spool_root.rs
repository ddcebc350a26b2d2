//! The spool root and leftover spools as another user would plant them: a symbolic
//! link to their own directory, a directory of theirs, a directory anyone can write,
//! a file. Each is refused with a one-line error, nothing is written into it, and no
//! planted spool is parsed.

use std::fs;
use std::os::unix::fs::{PermissionsExt, chown, lchown, symlink};
use std::path::{Path, PathBuf};

use coldstart_record::{Distrust, RecordConfig, RecordError, Spool, SpoolRoot, record};
use coldstart_testkit::{can_record, private_dir};

const NOBODY: u32 = 65534;

/// Whether this process is root (needed to plant other users' files); see `coldstart_testkit::unavailable`.
fn is_root(test: &str) -> bool {
    coldstart_testkit::is_root() || !coldstart_testkit::unavailable(test, "not root")
}

/// What another user can leave where a spool root is expected.
enum Plant {
    LinkToTheirDirectory,
    TheirDirectory,
    DirectoryAnyoneWrites,
    File,
}

/// Plants `plant` at `dir/spool`; returns its path and the directory a link points to.
fn plant(dir: &Path, plant: Plant) -> (PathBuf, PathBuf) {
    let spool = dir.join("spool");
    let theirs = dir.join("theirs");
    fs::create_dir(&theirs).unwrap();
    fs::set_permissions(&theirs, fs::Permissions::from_mode(0o777)).unwrap();
    chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    match plant {
        Plant::LinkToTheirDirectory => {
            symlink(&theirs, &spool).unwrap();
            lchown(&spool, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Plant::TheirDirectory => {
            fs::create_dir(&spool).unwrap();
            chown(&spool, Some(NOBODY), Some(NOBODY)).unwrap();
        }
        Plant::DirectoryAnyoneWrites => {
            fs::create_dir(&spool).unwrap();
            fs::set_permissions(&spool, fs::Permissions::from_mode(0o777)).unwrap();
        }
        Plant::File => fs::write(&spool, "").unwrap(),
    }
    (spool, theirs)
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> =
        fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    names
}

fn refusal(result: coldstart_record::Result<impl std::fmt::Debug>) -> Distrust {
    match result {
        Err(RecordError::UnsafeSpool(reason)) => reason,
        other => panic!("not refused: {other:?}"),
    }
}

#[test]
fn planted_spool_roots_are_refused_and_nothing_is_written_there() {
    if !is_root("planted_spool_roots") {
        return;
    }
    let cases = [
        (Plant::LinkToTheirDirectory, "is a symbolic link"),
        (Plant::TheirDirectory, "belongs to uid 65534, not root"),
        (Plant::DirectoryAnyoneWrites, "is writable by group or others (mode 0777)"),
        (Plant::File, "is not a directory"),
    ];
    for (kind, words) in cases {
        let dir = private_dir!();
        let (spool, theirs) = plant(dir.path(), kind);
        let err = SpoolRoot::create(&spool).unwrap_err();
        let message = err.to_string();
        assert!(message.starts_with("unsafe spool directory: "), "{message}");
        assert!(message.contains(&format!("{} {words}", spool.display())), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
        assert!(matches!(SpoolRoot::open(&spool), Err(RecordError::UnsafeSpool(_))), "{words}");
        assert_eq!(entries(&theirs), Vec::<String>::new(), "{words}: nothing written where a link points");
        if spool.is_dir() {
            assert_eq!(entries(&spool), Vec::<String>::new(), "{words}: nothing written in it");
        }
        assert_eq!(entries(dir.path()), ["spool", "theirs"], "{words}: nothing written beside it");
    }
}

#[test]
fn a_spool_root_under_another_users_directory_is_refused() {
    if !is_root("another_users_parent") {
        return;
    }
    let dir = private_dir!();
    let theirs = dir.path().join("theirs");
    fs::create_dir(&theirs).unwrap();
    chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let reason = refusal(SpoolRoot::create(&theirs.join("spool")));
    assert_eq!(reason, Distrust::Owner { path: theirs.clone(), uid: NOBODY });
    assert_eq!(entries(&theirs), Vec::<String>::new());

    let sticky = dir.path().join("sticky");
    fs::create_dir(&sticky).unwrap();
    fs::set_permissions(&sticky, fs::Permissions::from_mode(0o1777)).unwrap();
    assert!(SpoolRoot::create(&sticky.join("ours")).is_ok(), "a root-owned directory in a sticky one");
    symlink(&theirs, sticky.join("link")).unwrap();
    lchown(sticky.join("link"), Some(NOBODY), Some(NOBODY)).unwrap();
    let reason = refusal(SpoolRoot::create(&sticky.join("link/spool")));
    assert_eq!(reason, Distrust::ForeignSymlink { path: sticky.join("link"), uid: NOBODY });
    assert_eq!(entries(&theirs), Vec::<String>::new());
}

/// A leftover spool as a dead recorder would leave it, with a `start.json`.
fn leftover(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    fs::write(dir.join("start.json"), "{}").unwrap();
    dir
}

#[test]
fn leftovers_another_user_could_have_written_are_skipped_not_parsed() {
    if !is_root("untrusted_leftovers") {
        return;
    }
    let dir = private_dir!();
    let root = SpoolRoot::create(&dir.path().join("spool")).unwrap();
    let ours = leftover(&root.path, "2147483645-1");
    let theirs = leftover(&root.path, "2147483646-1");
    chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let elsewhere = leftover(dir.path(), "elsewhere");
    symlink(&elsewhere, root.path.join("2147483647-1")).unwrap();
    let open = leftover(&root.path, "2147483644-1");
    fs::set_permissions(&open, fs::Permissions::from_mode(0o777)).unwrap();

    let found = root.leftovers().unwrap();
    assert_eq!(found.spools.iter().map(|s| s.dir.clone()).collect::<Vec<_>>(), [ours]);
    let mut skipped: Vec<String> = found.skipped.iter().map(ToString::to_string).collect();
    skipped.sort();
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    assert!(skipped[0].contains("2147483644-1 is writable by group or others (mode 0777)"), "{skipped:?}");
    assert!(skipped[1].contains("2147483646-1 belongs to uid 65534, not root"), "{skipped:?}");
    assert!(skipped[2].contains("2147483647-1 is a symbolic link"), "{skipped:?}");
    for planted in [&theirs, &elsewhere, &open] {
        assert_eq!(fs::read_to_string(planted.join("start.json")).unwrap(), "{}", "left as found");
    }

    let reason = refusal(Spool::open(&theirs));
    assert_eq!(reason, Distrust::Owner { path: theirs.clone(), uid: NOBODY });
    let reason = refusal(Spool::open(&root.path.join("2147483647-1")));
    assert_eq!(reason, Distrust::Symlink(root.path.join("2147483647-1")));
}

#[test]
fn record_refuses_a_planted_spool_root_before_starting_the_command() {
    if !can_record("record_planted_spool_root") {
        return;
    }
    let dir = private_dir!();
    let (spool, theirs) = plant(dir.path(), Plant::LinkToTheirDirectory);
    let marker = dir.path().join("started");
    let config = RecordConfig {
        command: vec!["touch".into(), marker.clone().into()],
        output: Some(dir.path().join("out.coldstart")),
        spool_root: spool,
        ..RecordConfig::default()
    };
    assert!(matches!(record(&config), Err(RecordError::UnsafeSpool(Distrust::Symlink(_)))));
    assert!(!marker.exists(), "the command never started");
    assert_eq!(entries(&theirs), Vec::<String>::new());
    assert_eq!(entries(dir.path()), ["spool", "theirs"]);
}
