//! Fuzzes the bootchart2 importer on tarballs, as `coldstart import bootchart2` reads
//! them: one log file of the archive mutated at a time (lines, numbers, bytes), or
//! the archive's own bytes. An import either fails with an error or gives a trace
//! that analyses and reports without a panic. Seeds: the first samples of the two
//! real example logs (crates/import/tests/data), as tar and tar.gz, and the first
//! with the taskstats, cmdline2 and paternity logs of `seeds/bootchart2`.

use std::io::Read;
use std::path::Path;

use coldstart_fuzz::mutate::{self, ByteEdit, TextEdit};
use coldstart_fuzz::{fuzz, repo_dir};
use coldstart_import::bootchart2::{self, LogFiles};
use proptest::prelude::*;

/// Samples kept of each `.log` (blocks separated by a blank line): enough to import.
const BLOCKS: usize = 24;
/// Records kept of `kernel_pacct` (acct v3 records are 64 bytes).
const PACCT_BYTES: usize = 64 * 200;

fn first_blocks(text: &[u8], blocks: usize) -> Vec<u8> {
    let text = String::from_utf8_lossy(text);
    let kept: Vec<&str> = text.split("\n\n").take(blocks).collect();
    (kept.join("\n\n") + "\n\n").into_bytes()
}

fn tar(members: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (name, bytes) in members {
        let mut header = tar::Header::new_gnu();
        header.set_size(bytes.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        builder.append_data(&mut header, name, bytes.as_slice()).unwrap();
    }
    builder.into_inner().unwrap()
}

fn members(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut archive = tar::Archive::new(archive);
    let Ok(entries) = archive.entries() else { return out };
    for entry in entries {
        let Ok(mut entry) = entry else { break };
        let name = entry.path().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mut bytes = Vec::new();
        if entry.read_to_end(&mut bytes).is_err() {
            break;
        }
        out.push((name, bytes));
    }
    out
}

/// The files of `dir`, as members of a `bootchart/` folder, cut to what a seed needs.
fn log_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(e.path()).unwrap();
            let bytes = match name.as_str() {
                "kernel_pacct" => bytes[..PACCT_BYTES.min(bytes.len())].to_vec(),
                n if n.ends_with(".log") => first_blocks(&bytes, BLOCKS),
                _ => bytes,
            };
            (format!("bootchart/{name}"), bytes)
        })
        .collect();
    files.sort();
    files
}

/// The two examples, the second also gzipped; then the first with the logs a collector
/// writes when the kernel has taskstats and process events (`crates/fuzz/seeds/bootchart2`:
/// `taskstats.log` made from the example's own `proc_ps.log` samples, `cmdline2.log` and
/// `paternity.log` for its processes) in place of `proc_ps.log`.
fn seeds() -> Vec<Vec<u8>> {
    let data = repo_dir().join("crates/import/tests/data");
    let mut seeds: Vec<Vec<u8>> =
        ["example1", "example2"].iter().map(|example| tar(&log_files(&data.join(example)))).collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut gz, &seeds[1]).unwrap();
    seeds.push(gz.finish().unwrap());
    let mut taskstats = log_files(&data.join("example1"));
    taskstats.retain(|(name, _)| !name.ends_with("/proc_ps.log"));
    taskstats.extend(log_files(&coldstart_fuzz::crate_dir().join("seeds/bootchart2")));
    taskstats.sort();
    seeds.push(tar(&taskstats));
    seeds
}

/// One member of an archive edited, then the archive written again (a gzip seed is
/// read as its tar).
#[derive(Clone, Debug)]
enum Edit {
    Text(TextEdit),
    Bytes(ByteEdit),
}

fn edit_one_member(archive: &[u8], member: mutate::Pick, edits: &[Edit]) -> Vec<u8> {
    let mut plain = Vec::new();
    let archive = if archive.starts_with(&[0x1f, 0x8b]) {
        match flate2::read::GzDecoder::new(archive).read_to_end(&mut plain) {
            Ok(_) => plain.as_slice(),
            Err(_) => return archive.to_vec(),
        }
    } else {
        archive
    };
    let mut files = members(archive);
    if files.is_empty() {
        return archive.to_vec();
    }
    let chosen = member.index(files.len());
    let bytes = &mut files[chosen].1;
    for edit in edits {
        match edit {
            Edit::Text(e) => mutate::apply_text_edit(bytes, e),
            Edit::Bytes(e) => mutate::apply_byte_edit(bytes, e),
        }
    }
    tar(&files)
}

fn check(archive: &[u8]) {
    let origin = Path::new("fuzz.tgz");
    let Ok(logs) = LogFiles::from_archive(origin, archive) else { return };
    let Ok(trace) = bootchart2::convert(&logs) else { return };
    let analysis = coldstart_analyze::analyze(&trace);
    let mut out = Vec::new();
    coldstart_report::text::report(&analysis, &Default::default(), &mut out).unwrap();
    coldstart_report::svg::write(&trace, &analysis, &Default::default(), &mut out).unwrap();
}

#[test]
fn the_taskstats_seed_imports_processes_with_their_execs_and_parents() {
    let seed = seeds().pop().unwrap();
    let logs = LogFiles::from_archive(Path::new("taskstats.tar"), &seed).unwrap();
    let trace = bootchart2::convert(&logs).unwrap();
    let init = trace.processes.iter().find(|p| p.pid == 1).unwrap();
    assert_eq!(init.comm, "init");
    let sh = trace.processes.iter().find(|p| p.exe.as_deref() == Some("/sbin/busybox")).unwrap();
    assert_eq!(sh.argv, ["busybox", "--seed"]);
    let kernel_thread = trace.processes.iter().find(|p| p.comm == "khelper").unwrap();
    assert_eq!((kernel_thread.ppid, kernel_thread.exe.as_deref()), (Some(2), None));
    assert!(trace.process_samples.iter().any(|s| s.pid == 1 && s.state == 'R'), "init ran in a sample");
    assert!(trace.notes.iter().any(|n| n.text.starts_with("cmdline2.log gave the executable")));
}

#[test]
fn bootchart2_archive() {
    fuzz(
        "bootchart2",
        seeds(),
        |bases| {
            let edit = prop_oneof![
                4 => mutate::text_edit().prop_map(Edit::Text),
                1 => mutate::byte_edit().prop_map(Edit::Bytes),
            ];
            let members = (mutate::base(&bases), mutate::pick(), prop::collection::vec(edit, 1..8))
                .prop_map(|(archive, member, edits)| edit_one_member(&archive, member, &edits));
            prop_oneof![6 => members, 1 => mutate::bytes(&bases)].boxed()
        },
        check,
    );
}
