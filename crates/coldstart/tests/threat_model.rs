//! The rows of docs/threat-model.md that are not about spools (crates/coldstart/tests/spool.rs
//! and crates/record/tests/spool_root.rs): the marks file root reads is the command's
//! user's to write but not to replace, and a trace is private whatever the umask.

mod support;
use support::{coldstart, is_root, private_dir, unavailable};

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

#[test]
fn the_marks_file_is_the_invokers_to_write_but_not_to_replace_with_a_link() {
    if !is_root() && unavailable("marks_file_owner", "not root") {
        return;
    }
    let dir = private_dir();
    let script = r#"stat -c "%u %a" "$COLDSTART_MARKS" "${COLDSTART_MARKS%/*}"
ln -sf /etc/passwd "$COLDSTART_MARKS" 2>/dev/null && echo replaced
echo "1.0 ok" >> "$COLDSTART_MARKS" && echo appended"#;
    let output = coldstart()
        .current_dir(dir.path())
        .env("SUDO_UID", "65534")
        .env("SUDO_GID", "65534")
        .env("SUDO_USER", "nobody")
        .args(["run", "--", "sh", "-c", script])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(
        stdout, "65534 600\n0 711\nappended\n",
        "the file is nobody's (0600), its directory root's (0711): nobody appends, but cannot swap it"
    );
}

#[test]
fn a_trace_is_written_0600_even_with_a_permissive_umask() {
    let dir = private_dir();
    let gz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/python.coldstart.gz");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(gz).unwrap()).read_to_end(&mut bytes).unwrap();
    let input = dir.path().join("python.coldstart");
    std::fs::write(&input, bytes).unwrap();
    let out = dir.path().join("shared.coldstart");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg(r#"umask 0 && exec "$0" anonymize "$1" -o "$2""#)
        .arg(assert_cmd::cargo::cargo_bin!("coldstart"))
        .arg(&input)
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::metadata(&out).unwrap().permissions().mode() & 0o777, 0o600);
}
