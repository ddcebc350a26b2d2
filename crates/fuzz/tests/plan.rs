//! Fuzzes the prefetch plan reader (`Plan::from_json`, what `prefetch show`, `prefetch
//! run` and `run --prefetch` load) on plans built from the real fixture traces: JSON
//! values replaced by ones of another type or at the edge of their range, keys and
//! elements removed or doubled, text and bytes garbled. A plan that loads must show
//! (summary, ranges, paths) and write back without a panic.

use std::io::Read;
use std::path::Path;

use coldstart_fuzz::mutate::{self, Pick, pick};
use coldstart_fuzz::{fuzz, repo_dir};
use coldstart_prefetch::show::{self, ShowOptions};
use coldstart_prefetch::{Order, Plan, PlanSettings, build_plan};
use coldstart_trace::Trace;
use proptest::prelude::*;
use serde_json::{Value, json};

fn seeds() -> Vec<Vec<u8>> {
    let dir = tempfile::tempdir().unwrap();
    let mut seeds = Vec::new();
    for (name, order) in [("python", Order::FirstNeed), ("soffice", Order::Blend)] {
        let gz = std::fs::File::open(repo_dir().join(format!("tests/fixtures/{name}.coldstart.gz"))).unwrap();
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(gz).read_to_end(&mut bytes).unwrap();
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let trace = Trace::read(&path).unwrap();
        let settings = PlanSettings { order, ..PlanSettings::default() };
        let mut plan = build_plan(&trace, name, &settings, "coldstart fuzz").unwrap();
        // A few hundred steps are enough to reach every kind of value, and keep inputs quick.
        plan.files.truncate(60);
        plan.directories.truncate(20);
        let steps = std::mem::take(&mut plan.steps);
        plan.steps = steps.into_iter().filter(|step| check_step(&plan, step)).collect();
        seeds.push(plan.to_json().into_bytes());
    }
    seeds
}

fn check_step(plan: &Plan, step: &coldstart_prefetch::plan::Step) -> bool {
    use coldstart_prefetch::plan::Step;
    match *step {
        Step::Directory(d) => d < plan.directories.len(),
        Step::Open(f) => f < plan.files.len(),
        Step::Range { file, range } => plan.files.get(file).is_some_and(|f| range < f.ranges.len()),
    }
}

/// One change to the plan's JSON tree, at a node chosen in document order.
#[derive(Clone, Debug)]
enum JsonEdit {
    Replace(Pick, Value),
    Remove(Pick),
    Duplicate(Pick),
}

fn edge_value() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        Value::Null,
        json!(0),
        json!(-1),
        json!(1),
        json!(u32::MAX),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e300),
        json!(-0.5),
        json!(""),
        json!("x"),
        json!("first_need"),
        json!("disk"),
        json!("directory"),
        json!({"directory": 0}),
        json!({"range": {"file": 0, "range": 99}}),
        json!({"open": u64::MAX}),
        json!([]),
        json!({}),
        json!(true),
    ])
}

fn json_edit() -> impl Strategy<Value = JsonEdit> {
    prop_oneof![
        4 => (pick(), edge_value()).prop_map(|(at, v)| JsonEdit::Replace(at, v)),
        2 => pick().prop_map(JsonEdit::Remove),
        1 => pick().prop_map(JsonEdit::Duplicate),
    ]
}

/// Paths (object keys and array positions) of every node below the root.
fn node_paths(value: &Value, prefix: &mut Vec<Value>, out: &mut Vec<Vec<Value>>) {
    let children: Vec<(Value, &Value)> = match value {
        Value::Object(map) => map.iter().map(|(k, v)| (Value::String(k.clone()), v)).collect(),
        Value::Array(items) => items.iter().enumerate().map(|(i, v)| (json!(i), v)).collect(),
        _ => return,
    };
    for (key, child) in children {
        prefix.push(key);
        out.push(prefix.clone());
        node_paths(child, prefix, out);
        prefix.pop();
    }
}

fn parent_mut<'a>(root: &'a mut Value, path: &[Value]) -> Option<&'a mut Value> {
    path.iter().try_fold(root, |node, key| match key {
        Value::String(k) => node.get_mut(k.as_str()),
        _ => node.get_mut(key.as_u64()? as usize),
    })
}

fn apply(plan: &[u8], edits: &[JsonEdit]) -> Vec<u8> {
    let Ok(mut root) = serde_json::from_slice::<Value>(plan) else { return plan.to_vec() };
    for edit in edits {
        let mut paths = Vec::new();
        node_paths(&root, &mut Vec::new(), &mut paths);
        let at = match edit {
            JsonEdit::Replace(at, _) | JsonEdit::Remove(at) | JsonEdit::Duplicate(at) => at,
        };
        let Some((key, parent)) =
            (!paths.is_empty()).then(|| paths[at.index(paths.len())].split_last()).flatten()
        else {
            continue;
        };
        let Some(parent) = parent_mut(&mut root, parent) else { continue };
        match (edit, parent, key) {
            (JsonEdit::Replace(_, v), Value::Object(map), Value::String(k)) => {
                map.insert(k.clone(), v.clone());
            }
            (JsonEdit::Replace(_, v), Value::Array(items), i) => {
                items[i.as_u64().unwrap() as usize] = v.clone()
            }
            (JsonEdit::Remove(_), Value::Object(map), Value::String(k)) => {
                map.remove(k);
            }
            (JsonEdit::Remove(_), Value::Array(items), i) => {
                items.remove(i.as_u64().unwrap() as usize);
            }
            (JsonEdit::Duplicate(_), Value::Array(items), i) => {
                let i = i.as_u64().unwrap() as usize;
                items.insert(i, items[i].clone());
            }
            _ => {}
        }
    }
    serde_json::to_vec_pretty(&root).unwrap()
}

fn check(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let Ok(plan) = Plan::from_json(&text, Path::new("fuzz.plan")) else { return };
    show::render(&plan, ShowOptions { max_files: None, ranges: true });
    show::render(&plan, ShowOptions { max_files: Some(3), ranges: false });
    show::paths(&plan);
    plan.planned_bytes();
    Plan::from_json(&plan.to_json(), Path::new("again.plan")).expect("a plan written back reads");
}

/// The first seed with its first range's `offset` and `length` set.
fn with_first_range(offset: u64, length: u64) -> String {
    let mut plan: Value = serde_json::from_slice(&seeds()[0]).unwrap();
    let files = plan["files"].as_array_mut().unwrap();
    let file = files.iter_mut().find(|f| !f["ranges"].as_array().unwrap().is_empty()).unwrap();
    file["ranges"][0]["offset"] = json!(offset);
    file["ranges"][0]["length"] = json!(length);
    plan.to_string()
}

#[test]
fn a_range_that_ends_past_2_64_is_a_bad_plan() {
    let err = Plan::from_json(&with_first_range(u64::MAX - 10, 11), Path::new("p")).unwrap_err();
    assert!(err.to_string().contains("ends past 2^64 (offset 18446744073709551605, length 11)"), "{err}");
}

#[test]
fn lengths_that_add_up_past_u64_show_saturated() {
    let plan = Plan::from_json(&with_first_range(0, u64::MAX), Path::new("p")).unwrap();
    assert_eq!(plan.planned_bytes(), u64::MAX);
    let shown = show::render(&plan, ShowOptions { max_files: None, ranges: false });
    assert!(shown.contains(&(u64::MAX / 1024).to_string()), "{shown}");
}

#[test]
fn plan_file() {
    fuzz(
        "plan",
        seeds(),
        |bases| {
            let json = (mutate::base(&bases), prop::collection::vec(json_edit(), 1..6))
                .prop_map(|(plan, edits)| apply(&plan, &edits));
            prop_oneof![6 => json, 2 => mutate::text(&bases), 1 => mutate::bytes(&bases)].boxed()
        },
        check,
    );
}

/// A block plan as `prefetch plan --blocks` writes one: ranges in first-need order, the
/// identity's samples, the stats.
fn block_plan_seed() -> Vec<u8> {
    use coldstart_prefetch::blocks::identity::{Identity, Sample};
    use coldstart_prefetch::blocks::{
        BlockPlan, BlockRange, BlockSource, BlockStats, FORMAT, PlanDevice, VERSION,
    };
    let ranges = vec![
        BlockRange { offset: 8 << 20, length: 1 << 20, first_need_ns: 2_000 },
        BlockRange { offset: 0, length: 512 << 10, first_need_ns: 1_000_000 },
        BlockRange { offset: 60 << 20, length: 4 << 20, first_need_ns: 3_500_000_000 },
    ];
    let samples = [0, 8 << 20, 62 << 20]
        .into_iter()
        .map(|offset| Sample { offset, length: 4096, sha256: format!("{offset:064x}") })
        .collect();
    let plan = BlockPlan {
        format: FORMAT.into(),
        version: VERSION,
        tool: "coldstart fuzz".into(),
        source: BlockSource {
            trace: "boot.coldstart".into(),
            command: vec!["boot".into()],
            ..BlockSource::default()
        },
        device: PlanDevice {
            dev: "7:3".into(),
            name: Some("loop3".into()),
            chosen_by: "most reads".into(),
            image: "/dev/loop3".into(),
        },
        identity: Identity {
            filesystem: "ext4".into(),
            uuid: "0b10c000-0000-4000-8000-00000000000a".into(),
            label: Some("root".into()),
            size_bytes: 64 << 20,
            samples,
        },
        chunk_bytes: 512 << 10,
        stats: BlockStats {
            requests: 40,
            read_bytes: 5 << 20,
            metadata_read_bytes: 1 << 16,
            distinct_read_bytes: 5 << 20,
            chunks: 11,
            planned_bytes: 5632 << 10,
            other_devices: vec![("8:0".into(), 4096)],
        },
        ranges,
    };
    plan.to_json().into_bytes()
}

fn check_block_plan(bytes: &[u8]) {
    use coldstart_prefetch::blocks::{BlockPlan, show};
    let text = String::from_utf8_lossy(bytes);
    let Ok(plan) = BlockPlan::from_json(&text, Path::new("fuzz.bplan")) else { return };
    show::render(&plan, None);
    show::render(&plan, Some(1));
    BlockPlan::from_json(&plan.to_json(), Path::new("again.bplan")).expect("a block plan written back reads");
}

#[test]
fn block_plan_file() {
    fuzz(
        "block_plan",
        vec![block_plan_seed()],
        |bases| {
            let json = (mutate::base(&bases), prop::collection::vec(json_edit(), 1..6))
                .prop_map(|(plan, edits)| apply(&plan, &edits));
            prop_oneof![6 => json, 2 => mutate::text(&bases), 1 => mutate::bytes(&bases)].boxed()
        },
        check_block_plan,
    );
}
