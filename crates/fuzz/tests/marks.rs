//! Fuzzes the marks file (`UPTIME NAME[<TAB>pid=N]` lines a traced program appends
//! to): any bytes read as marks and a count of bad lines, and every mark read back
//! has a name that fits on one line.

use coldstart_fuzz::{crate_dir, fuzz, mutate};
use coldstart_launch::marks;
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    let dir = crate_dir().join("seeds/marks");
    let mut seeds: Vec<Vec<u8>> =
        ["coldstart-mark", "milestones"].iter().map(|n| std::fs::read(dir.join(n)).unwrap()).collect();
    seeds.push(marks::format_line(1_234_567_890_123, "ready", Some(7)).into_bytes());
    seeds
}

fn check(bytes: &[u8]) {
    // What `marks::read` does once it has the file's bytes.
    let read = marks::parse(&String::from_utf8_lossy(bytes));
    for mark in &read.marks {
        assert!(!mark.name.is_empty() && !mark.name.contains(['\n', '\t']), "{mark:?}");
        assert!(mark.boottime_ns >= 0, "{mark:?}");
    }
}

#[test]
fn marks_file() {
    fuzz(
        "marks",
        seeds(),
        |bases| prop_oneof![3 => mutate::text(&bases), 1 => mutate::bytes(&bases)].boxed(),
        check,
    );
}
