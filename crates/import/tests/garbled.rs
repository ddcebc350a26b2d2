//! Truncated and garbled logs never make the importer panic: it returns a trace
//! (with the bad lines counted as losses) or an error naming the file.

use std::path::Path;
use std::sync::OnceLock;

use coldstart_import::bootchart2::{self, LogFiles};
use proptest::prelude::*;

const FILES: [&str; 5] = ["header", "proc_stat.log", "proc_diskstats.log", "proc_ps.log", "kernel_pacct"];

/// The first 40 kB of each example2 file: a few dozen samples, enough to import.
fn sample() -> &'static Vec<(&'static str, Vec<u8>)> {
    static SAMPLE: OnceLock<Vec<(&'static str, Vec<u8>)>> = OnceLock::new();
    SAMPLE.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/example2");
        FILES
            .iter()
            .map(|name| {
                let mut bytes = std::fs::read(dir.join(name)).unwrap();
                bytes.truncate(40_000);
                (*name, bytes)
            })
            .collect()
    })
}

fn import(files: Vec<(&'static str, Vec<u8>)>) {
    let logs = LogFiles::from_files(Path::new("garbled"), files);
    match bootchart2::convert(&logs) {
        Ok(trace) => assert!(trace.meta.ready.is_some()),
        Err(e) => assert!(e.to_string().starts_with("garbled"), "{e}"),
    }
}

#[test]
fn the_untouched_sample_imports() {
    let logs = LogFiles::from_files(Path::new("garbled"), sample().clone());
    let trace = bootchart2::convert(&logs).unwrap();
    assert!(trace.processes.len() > 100);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn truncated_files(file in 0..FILES.len(), keep in 0.0..1.0f64) {
        let mut files = sample().clone();
        let bytes = &mut files[file].1;
        bytes.truncate((bytes.len() as f64 * keep) as usize);
        import(files);
    }

    #[test]
    fn garbled_bytes(file in 0..FILES.len(), edits in prop::collection::vec((0.0..1.0f64, any::<u8>()), 1..40)) {
        let mut files = sample().clone();
        let bytes = &mut files[file].1;
        for (at, byte) in edits {
            let at = ((bytes.len() as f64 * at) as usize).min(bytes.len().saturating_sub(1));
            if let Some(b) = bytes.get_mut(at) {
                *b = byte;
            }
        }
        import(files);
    }

    #[test]
    fn garbled_lines(file in 1..4usize, line in 0usize..400, junk in "[ -~()\\n]{0,40}") {
        let mut files = sample().clone();
        let text = String::from_utf8_lossy(&files[file].1).into_owned();
        let mut lines: Vec<&str> = text.lines().collect();
        let at = line.min(lines.len());
        lines.insert(at, &junk);
        files[file].1 = lines.join("\n").into_bytes();
        import(files);
    }
}

#[test]
fn huge_numbers_do_not_overflow() {
    let max = u64::MAX;
    let stat = format!(
        "100\ncpu  {max} {max} {max} {max} {max} 0 0\nctxt 1\nbtime {max}\nprocesses 1\n\n\
         120\ncpu  0 0 0 0 0 0 0\nctxt 1\nbtime 1\nprocesses 1\n\n"
    );
    let ps_line =
        |t: u64| format!("1 (x) S 0 0 0 0 -1 0 0 0 {max} 0 {max} {max} 0 0 20 0 1 0 {t} {max} {max} 0\n");
    let ps = format!("100\n{}\n120\n{}\n", ps_line(max), ps_line(5));
    let disks = format!(
        "100\n 8 0 sda 0 0 0 0 0 0 0 0 0 0 0\n\n120\n 8 0 sda {max} 0 {max} 0 {max} 0 {max} 0 0 {max} 0\n"
    );
    let files = vec![
        ("header", b"title = Boot chart for h (x)\n".to_vec()),
        ("proc_stat.log", stat.into_bytes()),
        ("proc_ps.log", ps.into_bytes()),
        ("proc_diskstats.log", disks.into_bytes()),
    ];
    let trace = bootchart2::convert(&LogFiles::from_files(Path::new("huge"), files)).unwrap();
    assert_eq!(trace.disk_samples[0].read_bytes, u64::MAX);
    let err = bootchart2::convert(&LogFiles::from_files(
        Path::new("huge"),
        vec![("header", b"".to_vec()), ("proc_stat.log", b"99999999999999\ncpu 1\n".to_vec())],
    ))
    .unwrap_err();
    assert!(err.to_string().starts_with("huge/proc_stat.log:1: expected the time"), "{err}");
}
