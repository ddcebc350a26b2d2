//! The doctor's cases that need no desktop (`bash bench/doctor-cases.sh --ci`: the FUSE
//! plug-in scan, the many-small-files start, the container boot), recorded cold with the
//! binary under test and checked against their written expectations
//! (bench/doctor-cases/*.expect). Needs root, tracefs and FUSE; the cases install what they
//! use with apt-get (.ci/run installs it first) and undo what they set up.

mod support;

use std::path::Path;
use std::process::Command;

use support::{can_record, private_dir, unavailable};

#[test]
fn the_doctor_cases_that_need_no_desktop_meet_their_expectations() {
    let test = "doctor_cases";
    if !can_record(test) {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        unavailable(test, "/dev/fuse is missing (the fuse-plugins case serves its tree through FUSE)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let keep = private_dir();
    let out = Command::new("bash")
        .arg(root.join("bench/doctor-cases.sh"))
        .arg("--ci")
        .env("COLDSTART", env!("CARGO_BIN_EXE_coldstart"))
        .env("KEEP", keep.path())
        .output()
        .expect("bash runs bench/doctor-cases.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("doctor cases: "),
        "bench/doctor-cases.sh --ci failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(!stdout.contains("NOT MET"), "{stdout}");
}
