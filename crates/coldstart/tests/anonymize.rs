//! `coldstart anonymize` writes a shareable copy and never replaces a file unasked.

use assert_cmd::Command;
use coldstart_trace::{File, Meta, Trace};

fn trace_of_alice() -> Trace {
    Trace {
        meta: Meta {
            host: "alices-box".into(),
            user: Some("alice".into()),
            command: vec!["/home/alice/bin/app".into()],
            ..Default::default()
        },
        files: vec![File { id: 1, path: Some("/home/alice/.config/app.conf".into()), ..Default::default() }],
        ..Default::default()
    }
}

#[test]
fn the_copy_has_no_user_or_host_name_and_the_original_is_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("a.coldstart");
    let copy = dir.path().join("b.coldstart");
    trace_of_alice().write(&original).unwrap();

    Command::cargo_bin("coldstart")
        .unwrap()
        .args(["anonymize"])
        .arg(&original)
        .arg("-o")
        .arg(&copy)
        .assert()
        .success()
        .stderr(predicates::str::contains("alice replaced"));

    let shared = Trace::read(&copy).unwrap();
    assert_eq!(shared.files[0].path.as_deref(), Some("/home/user/.config/app.conf"));
    assert_eq!(shared.meta.host, "host");
    assert_eq!(shared.meta.command, vec!["/home/user/bin/app"]);
    assert_eq!(Trace::read(&original).unwrap(), trace_of_alice());

    Command::cargo_bin("coldstart")
        .unwrap()
        .args(["anonymize"])
        .arg(&original)
        .arg("-o")
        .arg(&copy)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--force"));
}
