//! Block plans end to end on loop devices over small ext4 images made in the test: a plan
//! replayed on its own image reads every planned chunk once; on another image or a changed
//! one it is refused having read only the identity's blocks (the loop device's read counter,
//! /sys/block/loopN/stat, says what was read); bad plans and options exit 2 with one line.

mod support;
use support::{can_make_devices, coldstart, json, private_dir};

use std::path::{Path, PathBuf};
use std::process::Command;

use coldstart_trace::{BlockIo, BlockOp, Dev, Meta, Trace};
use predicates::str::contains;

const MIB: u64 = 1 << 20;

/// A loop device over an image file, detached on drop.
struct Loop {
    path: PathBuf,
    name: String,
}

impl Loop {
    fn attach(image: &Path) -> Loop {
        let out = Command::new("losetup").args(["--find", "--show"]).arg(image).output().unwrap();
        assert!(out.status.success(), "losetup: {}", String::from_utf8_lossy(&out.stderr));
        let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        Loop { path, name }
    }

    fn dev(&self) -> Dev {
        std::fs::read_to_string(format!("/sys/block/{}/dev", self.name)).unwrap().trim().parse().unwrap()
    }

    /// Sectors read from the device so far (the third field of its stat file).
    fn sectors_read(&self) -> u64 {
        let stat = std::fs::read_to_string(format!("/sys/block/{}/stat", self.name)).unwrap();
        stat.split_whitespace().nth(2).unwrap().parse().unwrap()
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        let _ = Command::new("losetup").arg("-d").arg(&self.path).status();
    }
}

/// A 64 MiB ext4 image with a few files, its UUID fixed.
fn ext4_image(dir: &Path, name: &str, uuid: &str) -> PathBuf {
    let content = dir.join(format!("{name}-content"));
    std::fs::create_dir_all(&content).unwrap();
    for i in 0..8u8 {
        std::fs::write(content.join(format!("file{i}")), vec![i; 3 * MIB as usize]).unwrap();
    }
    let image = dir.join(format!("{name}.img"));
    let status = Command::new("mkfs.ext4")
        .args(["-q", "-F", "-U", uuid, "-E", "lazy_itable_init=0,lazy_journal_init=0", "-d"])
        .arg(&content)
        .arg(&image)
        .arg("64M")
        .status()
        .unwrap();
    assert!(status.success());
    image
}

/// A trace of a start that read the superblock, then 1 MiB at 8 MiB, then 64 KiB across the
/// chunk boundary at 20 MiB, then 4 KiB at 40 MiB (metadata), from `dev`; and 1 MiB of another disk.
fn trace_of(dev: Dev, dir: &Path) -> PathBuf {
    let read = |dev: Dev, byte: u64, bytes: u64, at: i64, rwbs: &str| BlockIo {
        issue_ns: Some(at),
        complete_ns: Some(at + 100_000),
        dev,
        sector: Some(byte / 512),
        bytes: bytes as u32,
        op: BlockOp::Read,
        rwbs: rwbs.into(),
        ..BlockIo::default()
    };
    let trace = Trace {
        meta: Meta { command: vec!["boot".into()], host: "test".into(), ..Meta::default() },
        block_ios: vec![
            read(dev, 0, 4096, 1_000, "RM"),
            read(dev, 8 * MIB, MIB, 2_000, "R"),
            read(dev, 20 * MIB - 32 * 1024, 64 * 1024, 3_000, "R"),
            read(dev, 40 * MIB, 4096, 4_000, "RM"),
            read(Dev::new(8, 99), 0, MIB, 500, "R"),
        ],
        ..Trace::default()
    };
    let path = dir.join("boot.coldstart");
    trace.write(&path).unwrap();
    path
}

/// Chunks the trace above touches at 512 KiB: 0, 16, 17, 39, 40, 80.
const PLANNED_CHUNKS: u64 = 6;

fn one_line_exit_2(assert: assert_cmd::assert::Assert) -> String {
    let out = assert.code(2).get_output().clone();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn a_block_plan_reads_each_chunk_once_on_its_image_and_nothing_but_its_identity_on_another() {
    if !can_make_devices("block plans") {
        return;
    }
    let dir = private_dir();
    let a = Loop::attach(&ext4_image(dir.path(), "a", "0b10c000-0000-4000-8000-00000000000a"));
    let b = Loop::attach(&ext4_image(dir.path(), "b", "0b10c000-0000-4000-8000-00000000000b"));
    let trace = trace_of(a.dev(), dir.path());
    let plan = dir.path().join("boot.bplan");
    coldstart().args(["prefetch", "plan", "--blocks"]).arg(&trace).arg("-o").arg(&plan).assert().success();
    let p = json(&plan);
    assert_eq!(p["format"], "coldstart-block-plan");
    assert_eq!(p["version"], 2);
    assert_eq!(p["device"]["dev"], a.dev().to_string(), "the device read most");
    assert_eq!(p["identity"]["uuid"], "0b10c000-0000-4000-8000-00000000000a");
    assert_eq!(p["identity"]["filesystem"], "ext4");
    assert_eq!(p["stats"]["chunks"], PLANNED_CHUNKS);
    let ranges: Vec<(u64, u64)> = p["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["offset"].as_u64().unwrap() / 1024, r["length"].as_u64().unwrap() / 1024))
        .collect();
    assert_eq!(ranges, vec![(0, 512), (8192, 1024), (19968, 1024), (40960, 512)], "first-need order");
    let identity_sectors: u64 = p["identity"]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["length"].as_u64().unwrap() / 512)
        .sum();

    coldstart()
        .args(["prefetch", "show"])
        .arg(&plan)
        .assert()
        .success()
        .stdout(contains("format coldstart-block-plan version 2"))
        .stdout(contains("0b10c000-0000-4000-8000-00000000000a"));

    let before = a.sectors_read();
    coldstart()
        .args(["prefetch", "run"])
        .arg(&plan)
        .arg("--device")
        .arg(&a.path)
        .assert()
        .success()
        .stderr(contains("replayed 4 ranges (6 chunks, 3.0 MiB)"));
    assert_eq!(
        a.sectors_read() - before,
        identity_sectors + PLANNED_CHUNKS * 1024,
        "the identity's blocks, then every planned chunk once, all read from the device"
    );
    let before = a.sectors_read();
    coldstart()
        .args(["prefetch", "run", "--fetch-only"])
        .arg(&plan)
        .arg("--device")
        .arg(&a.path)
        .assert()
        .success()
        .stderr(contains(format!("replayed one block of each of {PLANNED_CHUNKS} fetch units")));
    assert_eq!(
        a.sectors_read() - before,
        identity_sectors + PLANNED_CHUNKS * 8,
        "--fetch-only: the identity's blocks, then 4 KiB of each 512 KiB unit"
    );
    let not_blocks = dir.path().join("page.plan");
    std::fs::write(&not_blocks, "{}").unwrap();
    let err =
        one_line_exit_2(coldstart().args(["prefetch", "run", "--fetch-only"]).arg(&not_blocks).assert());
    assert!(err.contains("--fetch-only is for a block plan"), "{err}");

    let before = b.sectors_read();
    let err = one_line_exit_2(
        coldstart().args(["prefetch", "run"]).arg(&plan).arg("--device").arg(&b.path).assert(),
    );
    assert!(err.contains("not the plan's image") && err.contains("UUID"), "{err}");
    assert_eq!(b.sectors_read() - before, 8, "only the first block was read");

    // The same image changed in one sampled block, then in its superblock's size.
    let sample = p["identity"]["samples"][3]["offset"].as_u64().unwrap();
    for (changed_at, what) in [(sample, "its block at byte"), (1024 + 0x04, "superblock differs")] {
        let copy = dir.path().join("a-changed.img");
        std::fs::copy(dir.path().join("a.img"), &copy).unwrap();
        let mut bytes = std::fs::read(&copy).unwrap();
        bytes[changed_at as usize] ^= 0xff;
        std::fs::write(&copy, bytes).unwrap();
        let changed = Loop::attach(&copy);
        let before = changed.sectors_read();
        let err = one_line_exit_2(
            coldstart().args(["prefetch", "run"]).arg(&plan).arg("--device").arg(&changed.path).assert(),
        );
        assert!(err.contains(what), "{err}");
        assert!(changed.sectors_read() - before <= identity_sectors, "nothing beyond the identity's blocks");
    }

    // A copy mounted read-write and unmounted (its superblock's mount time, count and
    // checksum rewritten) is still the plan's image.
    let mounted = dir.path().join("a-mounted.img");
    std::fs::copy(dir.path().join("a.img"), &mounted).unwrap();
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    let copy = Loop::attach(&mounted);
    for step in [
        vec!["mount".into(), copy.path.display().to_string(), at.display().to_string()],
        vec!["umount".into(), at.display().to_string()],
    ] {
        assert!(Command::new(&step[0]).args(&step[1..]).status().unwrap().success(), "{step:?}");
    }
    assert_ne!(
        std::fs::read(&mounted).unwrap(),
        std::fs::read(dir.path().join("a.img")).unwrap(),
        "the mount wrote"
    );
    coldstart()
        .args(["prefetch", "run"])
        .arg(&plan)
        .arg("--device")
        .arg(&copy.path)
        .assert()
        .success()
        .stderr(contains("replayed 4 ranges (6 chunks, 3.0 MiB)"));
    drop(copy);

    // Without --device, the device holding the plan's UUID.
    coldstart()
        .args(["prefetch", "run"])
        .arg(&plan)
        .assert()
        .success()
        .stderr(contains(a.path.display().to_string()));
}

#[test]
fn bad_block_plans_and_options_exit_2_with_one_line() {
    let dir = private_dir();
    let trace = trace_of(Dev::new(7, 200), dir.path());
    let plan = dir.path().join("x.bplan");
    let err = one_line_exit_2(
        coldstart()
            .args(["prefetch", "plan", "--blocks", "--chunk", "1000"])
            .arg(&trace)
            .arg("-o")
            .arg(&plan)
            .assert(),
    );
    assert!(err.contains("multiple of 4 KiB"), "{err}");
    let err = one_line_exit_2(
        coldstart()
            .args(["prefetch", "plan", "--blocks", "--device", "9:9", "--image", "/dev/null"])
            .arg(&trace)
            .arg("-o")
            .arg(&plan)
            .assert(),
    );
    assert!(err.contains("no read request of device 9:9"), "{err}");
    coldstart()
        .args(["prefetch", "plan", "--device", "7:1"])
        .arg(&trace)
        .arg("-o")
        .arg(&plan)
        .assert()
        .code(2);

    let good = serde_json::json!({
        "format": "coldstart-block-plan", "version": 2, "tool": "t",
        "source": {"trace": "t", "command": [], "host": "h", "kernel": "k", "recorded_unix_ns": 0},
        "device": {"dev": "7:0", "name": null, "chosen_by": "most reads", "image": "/dev/loop0"},
        "identity": {"filesystem": "ext4", "uuid": "u", "label": null, "size_bytes": 1048576,
                     "samples": [{"offset": 0, "length": 4096, "sha256": "00"}]},
        "chunk_bytes": 524288,
        "ranges": [{"offset": 0, "length": 524288, "first_need_ns": 0}],
        "stats": {"requests": 1, "read_bytes": 4096, "metadata_read_bytes": 0, "distinct_read_bytes": 4096,
                  "chunks": 1, "planned_bytes": 524288, "other_devices": []}
    });
    let cases = [
        ("version", serde_json::json!(9), "newer than this coldstart"),
        ("version", serde_json::json!(1), "make the plan again"),
        ("chunk_bytes", serde_json::json!(1000), "not a positive multiple"),
        (
            "ranges",
            serde_json::json!([{"offset": 4096, "length": 2097152, "first_need_ns": 0}]),
            "not aligned",
        ),
        (
            "ranges",
            serde_json::json!([{"offset": 0, "length": 8192, "first_need_ns": 0},
                                      {"offset": 4096, "length": 4096, "first_need_ns": 1}]),
            "overlap",
        ),
        ("ranges", serde_json::json!("many"), "not a usable block plan"),
    ];
    for (field, value, says) in cases {
        let mut bad = good.clone();
        bad[field] = value;
        std::fs::write(&plan, bad.to_string()).unwrap();
        for action in ["show", "run"] {
            let err = one_line_exit_2(coldstart().args(["prefetch", action]).arg(&plan).assert());
            assert!(err.contains(says), "{field}: {err}");
        }
    }
    std::fs::write(&plan, good.to_string()).unwrap();
    let err = one_line_exit_2(
        coldstart()
            .args(["prefetch", "run", "--max-memory", "10%", "--device", "/dev/null"])
            .arg(&plan)
            .assert(),
    );
    assert!(err.contains("--max-memory is an option of a page plan"), "{err}");
    let err = one_line_exit_2(
        coldstart().args(["prefetch", "run", "--device", "/nonexistent"]).arg(&plan).assert(),
    );
    assert!(err.contains("/nonexistent"), "{err}");
    let err = one_line_exit_2(coldstart().args(["prefetch", "show", "--paths"]).arg(&plan).assert());
    assert!(err.contains("block plan"), "{err}");
}

/// First boots of one image on three machines (their devices numbered apart), exported into a
/// dataset: the fleet's block plan holds the chunks two of three read, in their median order.
#[test]
fn a_block_plan_of_a_dataset_keeps_the_chunks_most_first_boots_read() {
    if !can_make_devices("block plans of a dataset") {
        return;
    }
    let dir = private_dir();
    let image = ext4_image(dir.path(), "golden", "0b10c000-0000-4000-8000-0000000000f1");
    let read = |dev: Dev, byte: u64, at: i64| BlockIo {
        issue_ns: Some(at),
        complete_ns: Some(at + 100_000),
        dev,
        sector: Some(byte / 512),
        bytes: 4096,
        op: BlockOp::Read,
        rwbs: "R".into(),
        ..BlockIo::default()
    };
    let (one, two) = (Dev::new(7, 40), Dev::new(7, 41));
    let boots = [
        vec![read(one, 0, 1_000), read(one, 8 * MIB, 2_000), read(one, 30 * MIB, 3_000)],
        vec![read(two, 0, 1_500), read(two, 8 * MIB, 2_500)],
        vec![read(one, 0, 1_200), read(one, 8 * MIB, 900), read(one, 50 * MIB, 100)],
    ];
    let mut traces = Vec::new();
    for (i, block_ios) in boots.into_iter().enumerate() {
        let trace = Trace {
            meta: Meta { command: vec!["boot".into()], host: format!("machine-{i}"), ..Meta::default() },
            block_ios,
            ..Trace::default()
        };
        let path = dir.path().join(format!("boot-{i}.coldstart"));
        trace.write(&path).unwrap();
        traces.push(path);
    }
    let dataset = dir.path().join("first-boots");
    coldstart().args(["export", "--format", "parquet", "-o"]).arg(&dataset).args(&traces).assert().success();
    let plan = dir.path().join("fleet.bplan");
    coldstart()
        .args(["prefetch", "plan", "--blocks", "--dataset"])
        .arg(&dataset)
        .arg("--image")
        .arg(&image)
        .arg("-o")
        .arg(&plan)
        .assert()
        .success()
        .stderr(contains("2 ranges, 2 chunks, 1.0 MiB"));
    let p = json(&plan);
    let ranges: Vec<(u64, u64, i64)> = p["ranges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["offset"].as_u64().unwrap() / 1024,
                r["length"].as_u64().unwrap() / 1024,
                r["first_need_ns"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ranges, vec![(0, 512, 1_200), (8192, 512, 2_000)], "read by two of three, median order");
    assert_eq!(p["device"]["dev"], "7:40", "the device most of the boots read");
    assert_eq!(p["identity"]["uuid"], "0b10c000-0000-4000-8000-0000000000f1");

    let all = dir.path().join("all.bplan");
    coldstart()
        .args(["prefetch", "plan", "--blocks", "--min-share", "0.3", "--dataset"])
        .arg(&dataset)
        .arg("--image")
        .arg(&image)
        .arg("-o")
        .arg(&all)
        .assert()
        .success();
    assert_eq!(json(&all)["stats"]["chunks"], 4, "a share of 0.3: one boot of three suffices");
    coldstart()
        .args(["prefetch", "run"])
        .arg(&plan)
        .arg("--device")
        .arg(&image)
        .assert()
        .success()
        .stderr(contains("replayed 2 ranges (2 chunks, 1.0 MiB)"));
    let err = one_line_exit_2(
        coldstart()
            .args(["prefetch", "plan", "--blocks", "--dataset"])
            .arg(&dataset)
            .arg("-o")
            .arg(dir.path().join("no-image.bplan"))
            .assert(),
    );
    assert!(err.contains("--image"), "{err}");
}
