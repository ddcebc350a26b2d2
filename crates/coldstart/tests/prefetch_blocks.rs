//! Block plans end to end on loop devices over small ext4 images made in the test: a plan
//! replayed on its own image reads every planned chunk once; on another image or a changed
//! one it is refused having read only the identity's blocks (the loop device's read counter,
//! /sys/block/loopN/stat, says what was read); bad plans and options exit 2 with one line.

mod support;
use support::{can_make_devices, coldstart, json, private_dir};

use std::path::{Path, PathBuf};
use std::process::Command;

use coldstart_trace::{BlockIo, BlockOp, Dev, Meta, Trace};
use predicates::prelude::*;
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

/// Loop devices over two images of these UUIDs, and the block plan of a trace of the first.
fn plan_of_the_first(dir: &Path, uuids: [&str; 2]) -> (Loop, Loop, PathBuf) {
    let a = Loop::attach(&ext4_image(dir, "a", uuids[0]));
    let b = Loop::attach(&ext4_image(dir, "b", uuids[1]));
    let trace = trace_of(a.dev(), dir);
    let plan = dir.join("boot.bplan");
    coldstart().args(["prefetch", "plan", "--blocks"]).arg(&trace).arg("-o").arg(&plan).assert().success();
    (a, b, plan)
}

/// Sectors the plan's identity check reads.
fn identity_sectors(plan: &serde_json::Value) -> u64 {
    plan["identity"]["samples"].as_array().unwrap().iter().map(|s| s["length"].as_u64().unwrap() / 512).sum()
}

#[test]
fn a_block_plan_reads_each_chunk_once_on_its_image_and_nothing_but_its_identity_on_another() {
    if !can_make_devices("block plans") {
        return;
    }
    let dir = private_dir();
    let uuids = ["0b10c000-0000-4000-8000-00000000000a", "0b10c000-0000-4000-8000-00000000000b"];
    let (a, b, plan) = plan_of_the_first(dir.path(), uuids);
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
    let identity_sectors = identity_sectors(&p);

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

/// Every path under `root` with its size, sorted.
fn tree(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            out.push(format!("{} {}", path.strip_prefix(root).unwrap().display(), meta.len()));
            if meta.is_dir() {
                dirs.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `boot enable --block-plan` writes the plan, the hooks' settings, the initramfs-tools hook
/// and premount script and the dracut module (the root has both generators), scripts a shell
/// reads; bad uses exit 2 with one line; `disable` leaves the root as it was.
#[test]
fn boot_enable_with_a_block_plan_installs_its_early_replay_and_disable_removes_it() {
    let dir = private_dir();
    let image = ext4_image(dir.path(), "a", "0b10c000-0000-4000-8000-0000000000e1");
    let trace = trace_of(Dev::new(7, 200), dir.path());
    let plan = dir.path().join("boot.bplan");
    coldstart()
        .args(["prefetch", "plan", "--blocks"])
        .arg(&trace)
        .arg("--image")
        .arg(&image)
        .arg("-o")
        .arg(&plan)
        .assert()
        .success();
    let root = dir.path().join("root");
    for d in ["etc/initramfs-tools", "usr/lib/dracut", "etc/systemd"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    let before = tree(&root);
    let enable = |extra: &[&str]| {
        let mut c = coldstart();
        c.args(["boot", "enable", "--root"]).arg(&root).arg("--block-plan").arg(&plan).args(extra);
        c.assert()
    };

    let err = one_line_exit_2(enable(&["--no-initramfs-update"]));
    assert!(
        err.contains("/usr/local/bin/coldstart is not there") && err.contains("--install-binary"),
        "{err}"
    );
    let page_plan = dir.path().join("page.plan");
    std::fs::write(&page_plan, "{\"format\": \"coldstart-plan\"}").unwrap();
    let err = one_line_exit_2(
        coldstart()
            .args(["boot", "enable", "--install-binary", "--root"])
            .arg(&root)
            .arg("--block-plan")
            .arg(&page_plan)
            .assert(),
    );
    assert!(err.contains("page.plan"), "{err}");
    let err = one_line_exit_2(
        coldstart()
            .args(["boot", "enable", "--install-binary", "--block-plan", "/nonexistent.bplan", "--root"])
            .arg(&root)
            .assert(),
    );
    assert!(err.contains("/nonexistent.bplan"), "{err}");
    let err = one_line_exit_2(
        coldstart().args(["boot", "enable", "--no-initramfs-update", "--root"]).arg(&root).assert(),
    );
    assert!(err.contains("goes with --block-plan"), "{err}");
    let theirs = root.join("etc/initramfs-tools/hooks/coldstart-blocks");
    std::fs::create_dir_all(theirs.parent().unwrap()).unwrap();
    std::fs::write(&theirs, "#!/bin/sh\n").unwrap();
    let err = one_line_exit_2(enable(&["--install-binary", "--no-initramfs-update"]));
    assert!(err.contains("hooks/coldstart-blocks exists but was not written by"), "{err}");
    std::fs::remove_dir_all(theirs.parent().unwrap()).unwrap();
    assert_eq!(tree(&root), before, "nothing written by a refused enable");

    enable(&["--install-binary", "--no-initramfs-update"])
        .success()
        .stdout(contains("block plan /etc/coldstart/boot-blocks.bplan (6 chunks)"))
        .stdout(contains("the initramfs was left as it is"));
    assert_eq!(
        std::fs::read(root.join("etc/coldstart/boot-blocks.bplan")).unwrap(),
        std::fs::read(&plan).unwrap()
    );
    let conf = std::fs::read_to_string(root.join("etc/coldstart/boot-blocks.conf")).unwrap();
    assert!(conf.contains("COLDSTART_BINARY=/usr/local/bin/coldstart\n"), "{conf}");
    assert!(conf.contains("COLDSTART_BLOCK_PLAN=/etc/coldstart/boot-blocks.bplan\n"), "{conf}");
    let scripts = [
        ("etc/initramfs-tools/hooks/coldstart-blocks", "copy_exec \"$COLDSTART_BINARY\" /bin/coldstart"),
        ("etc/initramfs-tools/scripts/local-premount/coldstart-blocks", "boot early --device \"$ROOT\""),
        ("usr/lib/dracut/modules.d/90coldstart-blocks/module-setup.sh", "inst_hook pre-mount"),
        (
            "usr/lib/dracut/modules.d/90coldstart-blocks/coldstart-blocks.sh",
            "boot early --device \"$coldstart_root\"",
        ),
    ];
    for (rel, says) in scripts {
        let path = root.join(rel);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains(says), "{rel}: {text}");
        let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&path).unwrap().permissions());
        assert_eq!(mode & 0o777, 0o755, "{rel}");
        let shell = if rel.ends_with("module-setup.sh") { "bash" } else { "sh" };
        let checked = Command::new(shell).arg("-n").arg(&path).output().unwrap();
        assert!(checked.status.success(), "{rel}: {}", String::from_utf8_lossy(&checked.stderr));
    }
    let prereqs = Command::new("sh").arg(root.join(scripts[1].0)).arg("prereqs").output().unwrap();
    assert!(
        prereqs.status.success() && prereqs.stdout.trim_ascii().is_empty(),
        "initramfs-tools asks prereqs"
    );

    // Without the generator's program in the root, making the initramfs again fails in one line.
    coldstart().args(["boot", "disable", "--no-initramfs-update", "--root"]).arg(&root).assert().success();
    let err = one_line_exit_2(enable(&["--install-binary"]));
    assert!(err.contains("update-initramfs") && err.contains("--no-initramfs-update"), "{err}");
    coldstart()
        .args(["boot", "disable", "--no-initramfs-update", "--root"])
        .arg(&root)
        .assert()
        .success()
        .stdout(contains("still replays the block plan until it is made again"));
    assert_eq!(tree(&root), before, "disable removed what enable wrote");

    // The early replay alone: no unit; enabled again, it is replaced; disable removes it all.
    coldstart().args(["boot", "enable", "--block-plan-only", "--root"]).arg(&root).assert().code(2);
    enable(&["--block-plan-only", "--prefetch"]).code(2);
    for _ in 0..2 {
        enable(&["--block-plan-only", "--install-binary", "--no-initramfs-update"])
            .success()
            .stdout(contains("installed the block plan's early replay"))
            .stdout(contains("runs").not());
    }
    assert!(!root.join("etc/systemd/system/coldstart-boot.service").exists(), "no unit");
    let conf = std::fs::read_to_string(root.join("etc/coldstart/boot-blocks.conf")).unwrap();
    assert!(conf.contains("# created: /etc/coldstart/boot-blocks.bplan\n"), "{conf}");
    coldstart()
        .args(["boot", "status", "--root"])
        .arg(&root)
        .assert()
        .success()
        .stdout(contains("not enabled"))
        .stdout(contains("block plan /etc/coldstart/boot-blocks.bplan: replayed from the initramfs"));
    coldstart()
        .args(["boot", "disable", "--no-initramfs-update", "--root"])
        .arg(&root)
        .assert()
        .success()
        .stdout(contains("removed the block plan's early replay"));
    assert_eq!(tree(&root), before, "disable removed the early replay installed alone");

    // Of two generators, the one whose program the root has makes the initramfs.
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::write(root.join("usr/bin/dracut"), "").unwrap();
    let err = one_line_exit_2(enable(&["--install-binary"]));
    assert!(err.contains("dracut --regenerate-all --force"), "{err}");
    coldstart().args(["boot", "disable", "--no-initramfs-update", "--root"]).arg(&root).assert().success();
    std::fs::remove_dir_all(root.join("usr/bin")).unwrap();
    assert_eq!(tree(&root), before);
}

/// `boot early`, as the initramfs runs it: on its image one 4 KiB block of each fetch unit
/// after the identity, a report and one line in the log; on another image nothing beyond the
/// first block, the refusal in the report and the log.
#[test]
fn the_early_replay_fetches_one_block_of_each_unit_on_its_image_and_refuses_another() {
    if !can_make_devices("the early block replay") {
        return;
    }
    let dir = private_dir();
    let uuids = ["0b10c000-0000-4000-8000-0000000000e2", "0b10c000-0000-4000-8000-0000000000e3"];
    let (a, b, plan) = plan_of_the_first(dir.path(), uuids);
    let identity_sectors = identity_sectors(&json(&plan));
    let log = dir.path().join("kmsg");
    let report = dir.path().join("run/coldstart/boot-blocks.json");
    let early = |device: &Path| {
        std::fs::write(&log, "").unwrap();
        let mut c = coldstart();
        c.args(["boot", "early", "--device"]).arg(device).arg("--plan").arg(&plan);
        c.arg("--log").arg(&log).arg("--report").arg(&report);
        c.assert()
    };

    let before = a.sectors_read();
    early(&a.path).success();
    assert_eq!(a.sectors_read() - before, identity_sectors + PLANNED_CHUNKS * 8);
    let said = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.len(), 2, "{said}");
    assert!(lines[0].contains(&format!("from {} before the root is mounted", a.path.display())), "{said}");
    assert!(lines[1].starts_with("coldstart: replayed one block of each of 6 fetch units"), "{said}");
    let r = json(&report);
    assert_eq!((r["fetch_units"].as_u64(), r["fetch_only"].as_bool()), (Some(PLANNED_CHUNKS), Some(true)));

    let before = b.sectors_read();
    early(&b.path).code(2);
    assert_eq!(b.sectors_read() - before, 8, "only the first block was read");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(said.contains("was not replayed") && said.contains("not the plan's image"), "{said}");
    assert!(json(&report)["error"].as_str().unwrap().contains("UUID"), "{}", json(&report));
    for (device, plan_file, says) in [
        (Path::new("/nonexistent"), plan.as_path(), "/nonexistent"),
        (a.path.as_path(), Path::new("/nonexistent.bplan"), "/nonexistent.bplan"),
    ] {
        let mut c = coldstart();
        c.args(["boot", "early", "--device"]).arg(device).arg("--plan").arg(plan_file);
        let err = one_line_exit_2(c.arg("--log").arg(&log).arg("--report").arg(&report).assert());
        assert!(err.contains(says), "{err}");
        assert!(json(&report)["error"].as_str().unwrap().contains(says), "{}", json(&report));
    }

    // Enabled on a mounted filesystem, the plan is checked against its device first, and
    // again once enable has written into it.
    let at = dir.path().join("mnt");
    std::fs::create_dir(&at).unwrap();
    assert!(Command::new("mount").arg(&b.path).arg(&at).status().unwrap().success());
    let unmount = Unmount(at.clone());
    std::fs::create_dir_all(at.join("etc/initramfs-tools")).unwrap();
    std::fs::create_dir_all(at.join("usr/local/bin")).unwrap();
    std::fs::write(at.join("usr/local/bin/coldstart"), "#!/bin/sh\n").unwrap();
    let enable = || {
        let mut c = coldstart();
        c.args(["boot", "enable", "--no-initramfs-update", "--root"]).arg(&at).arg("--block-plan").arg(&plan);
        c.assert()
    };
    let err = one_line_exit_2(enable());
    assert!(err.contains("is not for the filesystem at") && err.contains("UUID"), "{err}");
    drop(unmount);
    assert!(Command::new("mount").arg(&a.path).arg(&at).status().unwrap().success());
    let _unmount = Unmount(at.clone());
    std::fs::create_dir_all(at.join("etc/initramfs-tools")).unwrap();
    std::fs::create_dir_all(at.join("usr/local/bin")).unwrap();
    std::fs::write(at.join("usr/local/bin/coldstart"), "#!/bin/sh\n").unwrap();
    let out = enable().success().get_output().stdout.clone();
    let out = String::from_utf8_lossy(&out);
    assert!(out.contains("the plan still holds") || out.contains("the plan no longer holds"), "{out}");
}

/// Unmounts its directory on drop.
struct Unmount(PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}
