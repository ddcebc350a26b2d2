//! The systemd units of a boot in every report: the text report's "systemd units" and
//! "Chain to" sections (golden), the chart's unit rows, the Chrome/Perfetto units track and
//! the HTML report's units; and no trace of them for a trace without units.

use coldstart_analyze::{Analysis, analyze};
use coldstart_report::{export, html, svg, text};

#[path = "common/boot.rs"]
mod boot;
mod common;

use boot::boot;
use common::{MS, fixture};

fn text_of(a: &Analysis) -> String {
    let mut out = Vec::new();
    text::report(a, &text::Options::default(), &mut out).expect("render");
    String::from_utf8(out).expect("utf-8")
}

/// The report's lines from the units section to the end of the chain.
fn units_sections(report: &str) -> String {
    let from = report.find("\nsystemd units (").expect("a units section");
    let to = report[from + 1..].find("\n\n").map_or(report.len(), |i| from + 1 + i);
    let chain_end = report[to + 2..].find("\n\n").map_or(report.len(), |i| to + 2 + i);
    report[from + 1..chain_end].to_owned()
}

#[test]
fn the_units_and_the_chain_in_the_text_report() {
    let a = analyze(&boot());
    let app = a.units.iter().find(|u| u.name == "app.service").expect("app.service");
    assert_eq!((app.cpu_ns, app.io_wait_ns, app.other_ns), (29 * MS, 20 * MS, MS));
    assert_eq!(
        app.unit_waits.iter().map(|w| (w.unit.as_str(), w.ns)).collect::<Vec<_>>(),
        [("helper.service", 48 * MS)]
    );
    assert_eq!(app.pids, [100], "helper is another unit's main process");
    insta::assert_snapshot!(units_sections(&text_of(&a)));
}

#[test]
fn a_trace_without_units_shows_none_of_them() {
    let a = analyze(&fixture());
    let report = text_of(&a);
    assert!(!report.contains("systemd units") && !report.contains("Chain to"));
    let mut chart = Vec::new();
    svg::write(&fixture(), &a, &svg::Options::default(), &mut chart).unwrap();
    assert!(!String::from_utf8(chart).unwrap().contains("systemd units"));
    let mut events = Vec::new();
    export::chrome::write(&fixture(), &a, &mut events).unwrap();
    assert!(!String::from_utf8(events).unwrap().contains("\"unit\""));
}

#[test]
fn the_chart_draws_a_row_per_unit_start_with_its_split_in_the_tooltip() {
    let trace = boot();
    let a = analyze(&trace);
    let mut chart = Vec::new();
    svg::write(&trace, &a, &svg::Options::default(), &mut chart).unwrap();
    let chart = String::from_utf8(chart).unwrap();
    assert!(chart.contains(">systemd units<"));
    assert_eq!(chart.matches("class=\"unit-start\"").count(), 2, "the two starts that took time");
    assert!(chart.contains(
        "<title>app.service +98.0 ms: CPU 29.0 ms, I/O 20.0 ms (libfoo.so), waiting on 48.0 ms (helper.service), other 1.0 ms</title>"
    ), "{chart}");
}

#[test]
fn the_chrome_export_has_a_units_track() {
    let trace = boot();
    let a = analyze(&trace);
    let mut out = Vec::new();
    export::chrome::write(&trace, &a, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let units: Vec<&serde_json::Value> = events.iter().filter(|e| e["cat"] == "unit").collect();
    let slices: Vec<(&str, f64, f64)> = units
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| (e["name"].as_str().unwrap(), e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()))
        .collect();
    assert_eq!(slices, [("app.service", 2000.0, 98000.0), ("helper.service", 30000.0, 60000.0)]);
    assert_ne!(units[0]["tid"], units[1]["tid"], "overlapping starts on separate lanes");
    let instants: Vec<&str> =
        units.iter().filter(|e| e["ph"] == "i").map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(instants, ["basic.target active", "multi-user.target active"]);
    let track =
        events.iter().find(|e| e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == units[0]["pid"]);
    assert_eq!(track.map(|e| &e["args"]["name"]), Some(&serde_json::json!("systemd units")));
}

#[test]
fn the_html_report_has_a_units_tab_with_the_chain_and_a_units_track() {
    let test = "the_html_report_has_a_units_tab_with_the_chain_and_a_units_track";
    let Some(chromium) = coldstart_testkit::chromium(test) else { return };
    let trace = boot();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("boot.html");
    let mut out = Vec::new();
    html::write(&analyze(&trace), Some(&html::Timeline::new(&trace)), None, &mut out).unwrap();
    std::fs::write(&path, out).unwrap();
    let profile = tempfile::tempdir().unwrap();
    let (_browser, tab) = coldstart_testkit::headless_tab(&chromium, profile.path(), &[]);
    tab.navigate_to(&format!("file://{}", path.display())).unwrap().wait_until_navigated().unwrap();
    coldstart_testkit::wait_until(
        &tab,
        "the page to be built",
        "document.body.dataset.ready === 'true'",
        String::new,
    );
    tab.find_element("#tab-units").unwrap().click().unwrap();
    let rows = coldstart_testkit::eval_json(
        &tab,
        "return [...document.querySelectorAll('#units-table tbody tr')].map(r => [...r.cells].slice(0, 8).map(c => c.textContent));",
    );
    assert_eq!(
        rows[0],
        serde_json::json!([
            "app.service",
            "0.002 s",
            "98.0 ms",
            "29.0 ms",
            "20.0 ms",
            "libfoo.so",
            "48.0 ms",
            "1.0 ms"
        ])
    );
    assert_eq!(rows.as_array().map(Vec::len), Some(4));
    let chain = coldstart_testkit::eval_json(
        &tab,
        "return [...document.querySelectorAll('#unit-chain li b')].map(b => b.textContent);",
    );
    assert_eq!(chain, serde_json::json!(["multi-user.target", "app.service", "basic.target"]));
    let track = coldstart_testkit::eval_json(
        &tab,
        "return [...document.querySelectorAll('.tl-label')].some(l => l.textContent === 'systemd units');",
    );
    assert_eq!(track, serde_json::json!(true), "a units track on the timeline");
}

#[test]
fn every_field_of_the_units_json_is_documented() {
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/report-json.md")).unwrap();
    let a = analyze(&boot());
    let value = serde_json::json!({ "units": a.units, "unit_chain": a.unit_chain });
    let mut keys = Vec::new();
    let mut todo = vec![&value];
    while let Some(v) = todo.pop() {
        match v {
            serde_json::Value::Object(map) => {
                keys.extend(map.keys().cloned());
                todo.extend(map.values());
            }
            serde_json::Value::Array(items) => todo.extend(items),
            _ => {}
        }
    }
    let missing: Vec<&String> = keys.iter().filter(|k| !doc.contains(&format!("`{k}`"))).collect();
    assert!(missing.is_empty(), "fields missing from docs/report-json.md: {missing:?}");
    assert!(keys.contains(&"io_files".to_owned()) && keys.contains(&"links".to_owned()));
}

/// The names of a chart's graphs (`class="graph-name"` texts), sorted.
fn graph_names(trace: &coldstart_trace::Trace) -> Vec<String> {
    let mut chart = Vec::new();
    svg::write(trace, &analyze(trace), &svg::Options::default(), &mut chart).unwrap();
    let chart = String::from_utf8(chart).unwrap();
    let mut names: Vec<String> = chart
        .split("class=\"graph-name\"")
        .skip(1)
        .filter_map(|rest| Some(rest.split_once('>')?.1.split_once('<')?.0.to_owned()))
        .collect();
    names.sort();
    names
}

#[test]
fn a_boot_and_a_bootchart2_import_are_drawn_with_the_same_graphs_but_units_and_seeks() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data/example1");
    let imported = coldstart_import::bootchart2::import(&dir).expect("import example1");
    assert_eq!(graph_names(&imported), ["CPU", "Disk reads", "Phases", "Processes"]);
    assert_eq!(
        graph_names(&boot()),
        ["CPU", "Disk reads", "Phases", "Processes", "systemd units", "vda seeks"],
        "a log has neither units nor block requests"
    );
}
