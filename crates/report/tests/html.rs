//! The HTML report as a file: self-contained (nothing but its own inline script
//! and style, allowed by hash in its Content-Security-Policy), names from the
//! trace unable to leave the data element, the embedded data exactly the
//! analysis's (reads, block requests) and the trace's (process states), the same
//! bytes every time, and a reasonable size on big traces. The page itself is
//! tested in Chromium by crates/coldstart/tests/report_html.rs.

use base64::Engine;
use coldstart_analyze::{Analysis, analyze};
use coldstart_report::html::{self, Timeline};
use coldstart_trace::Trace;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::PathBuf;

mod common;
#[path = "common/session.rs"]
mod session;

use common::{MS, fixture};

fn page(trace: &Trace) -> (Analysis, String) {
    let analysis = analyze(trace);
    let timeline = Timeline::new(trace);
    let mut out = Vec::new();
    html::write(&analysis, Some(&timeline), None, &mut out).expect("render");
    (analysis, String::from_utf8(out).expect("utf-8"))
}

/// The text between `open` (its first occurrence) and the next `close`.
fn between<'a>(text: &'a str, open: &str, close: &str) -> &'a str {
    let start = text.find(open).unwrap_or_else(|| panic!("no {open}")) + open.len();
    let end = start + text[start..].find(close).unwrap_or_else(|| panic!("no {close} after {open}"));
    &text[start..end]
}

fn data(page: &str) -> Value {
    serde_json::from_str(between(
        page,
        "<script type=\"application/json\" id=\"coldstart-data\">",
        "</script>",
    ))
    .expect("the embedded data is JSON")
}

fn sha256(text: &str) -> String {
    format!("'sha256-{}'", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

#[test]
fn the_page_loads_nothing_and_allows_only_its_own_script_and_style() {
    let (_, page) = page(&fixture());
    let csp = between(&page, "http-equiv=\"Content-Security-Policy\" content=\"", "\"");
    let script = between(&page, "<script>", "</script>");
    let style = between(&page, "<style>", "</style>");
    assert_eq!(
        csp,
        format!(
            "default-src 'none'; script-src {}; style-src {}; img-src data:; base-uri 'none'; form-action 'none'",
            sha256(script),
            sha256(style)
        )
    );
    let outside_data = page.replace(between(&page, "id=\"coldstart-data\">", "</script>"), "");
    for external in ["http:", "https:", "src=", "@import", "url(", "\"//", "'//", "`//"] {
        assert!(!outside_data.contains(external), "the page names something outside: {external}");
    }
    assert!(page.contains("<link rel=\"icon\" href=\"data:,\">"), "no favicon request");
    assert!(!page.contains("{{"), "every marker is filled");
}

#[test]
fn names_from_the_trace_cannot_leave_the_data_element() {
    let mut trace = fixture();
    let hostile = "</script><script>alert(1)</script><!--<img src=x onerror=alert(2)>&amp;";
    trace.processes[1].comm = hostile.to_owned();
    trace.files[2].path = Some(format!("/tmp/{hostile}"));
    let (_, page) = page(&trace);
    assert_eq!(page.matches("<script").count(), 2, "the data element and the script");
    assert_eq!(page.matches("</script>").count(), 2);
    assert!(!page.contains("<img") && !page.contains("<!--") && !page.contains("&amp;"));
    let data = data(&page);
    let processes = data["analysis"]["processes"].as_array().unwrap();
    assert!(processes.iter().any(|p| p["comm"] == hostile), "the name reads back unchanged");
    let files = data["analysis"]["files"].as_array().unwrap();
    assert!(files.iter().any(|f| f["path"] == format!("/tmp/{hostile}")));
}

#[test]
fn reads_and_block_requests_are_embedded_as_columns_in_microseconds() {
    let (analysis, page) = page(&fixture());
    let data = data(&page);
    assert!(data["analysis"]["reads"].as_array().unwrap().is_empty(), "reads travel as columns");
    let reads = &data["reads"];
    assert_eq!(reads["every"], 1);
    let t_us: Vec<i64> = serde_json::from_value(reads["t_us"].clone()).unwrap();
    assert_eq!(t_us, analysis.reads.iter().map(|r| r.t_ns / 1000).collect::<Vec<_>>());
    assert_eq!(t_us, vec![3000, 9000, 19_000, 25_000, 40_000, 45_000]);
    assert_eq!(reads["seek"], serde_json::json!([0, 0, 1, 1, 0, 0]));
    assert_eq!(reads["pages"], serde_json::json!([8, 16, 4, 4, 16, 1]));

    let requests = data["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["t_us"], serde_json::json!([3000, 9000, 19_000, 25_000]));
    assert_eq!(requests[0]["lat_us"], serde_json::json!([2000, 2000, 2000, 2000]));
    assert_eq!(requests[0]["sector"], serde_json::json!([2048, 131_072, 131_392, 131_872]));
    // file 1 holds sector 2048 (its extent starts at 1 MiB), file 2 the rest; only the
    // second request starts more than 1 MiB (the default threshold) from the end of the
    // previous one: a far seek. The last two are 96 KiB and 224 KiB forward: near.
    assert_eq!(requests[0]["file"], serde_json::json!([1, 2, 2, 2]));
    assert_eq!(requests[0]["flags"], serde_json::json!([0, 2, 0, 0]));
    assert!(data["analysis"]["disks"][0]["requests"].as_array().unwrap().is_empty());
}

#[test]
fn each_process_row_has_the_most_telling_state_of_its_threads_in_microseconds() {
    let (_, page) = page(&fixture());
    let timeline = &data(&page)["timeline"];
    assert_eq!(timeline["states_from"], "sched");
    assert_eq!(timeline["resolution_ns"], 1000);
    let app = &timeline["rows"][0];
    assert_eq!(app["pid"], 100);
    // gap, length, state (0 running, 1 I/O wait, 2 runnable, 4 asleep), in µs
    let ms = |n: i64| n * MS / 1000;
    assert_eq!(
        app["spans"],
        serde_json::json!([
            ms(2),
            ms(6),
            0,
            0,
            ms(10),
            1,
            0,
            ms(1),
            0,
            0,
            ms(5),
            1,
            0,
            ms(1),
            0,
            0,
            ms(5),
            1,
            0,
            ms(2),
            0,
            0,
            ms(48),
            4,
            0,
            ms(1),
            2,
            0,
            ms(19),
            0,
            0,
            ms(10),
            4
        ])
    );
    let helper = &timeline["rows"][1];
    assert_eq!(helper["pid"], 200);
    assert_eq!(
        helper["spans"],
        serde_json::json!([ms(30), ms(10), 0, 0, ms(30), 1, 0, ms(10), 0, 0, ms(10), 4])
    );
    // no CPU samples in the fixture: the graph comes from the scheduler intervals
    assert_eq!(timeline["cpu"]["from"], "sched");
}

#[test]
fn the_page_is_the_same_bytes_every_time() {
    assert_eq!(page(&fixture()).1, page(&fixture()).1);
}

#[test]
fn without_the_trace_the_page_has_no_timeline_but_everything_else() {
    let analysis = analyze(&fixture());
    let mut out = Vec::new();
    coldstart_report::html::write(&analysis, None, None, &mut out).unwrap();
    let data = data(std::str::from_utf8(&out).unwrap());
    assert_eq!(data["timeline"], Value::Null);
    assert_eq!(data["analysis"]["overview"]["ready"]["time_to_ready_ns"], 98 * MS);
}

#[test]
fn a_bootchart2_import_draws_states_from_its_process_samples() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data/example1");
    let trace = coldstart_import::bootchart2::import(&dir).expect("import example1");
    let timeline = Timeline::new(&trace);
    assert_eq!(timeline.states_from, "samples");
    let sampled: std::collections::BTreeSet<i32> = trace.process_samples.iter().map(|s| s.pid).collect();
    assert!(timeline.rows.len() > 100 && timeline.rows.iter().all(|r| sampled.contains(&r.pid)));
    assert!(
        timeline.rows.iter().any(|r| r.spans.chunks(3).any(|s| s[2] == 1)),
        "some process blocked on I/O (D)"
    );
    let (_, page) = page(&trace);
    assert_eq!(data(&page)["timeline"]["states_from"], "samples");
}

#[test]
fn a_big_trace_stays_within_its_budget() {
    let trace = coldstart_analyze::synthetic::start_trace(1_000_000, 3);
    let (analysis, page) = page(&trace);
    let data = data(&page);
    let spans: usize = data["timeline"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["spans"].as_array().unwrap().len() / 3)
        .sum();
    let sched = trace.sched.len();
    eprintln!(
        "1M events: {} sched intervals, {} reads, {} spans embedded at {} ns, page {} bytes",
        sched,
        analysis.reads.len(),
        spans,
        data["timeline"]["resolution_ns"],
        page.len()
    );
    assert!(spans <= 200_000, "{spans} spans");
    assert!(page.len() < 40 << 20, "{} bytes", page.len());
}

/// The page of the synthetic login, also written under the target directory to look at.
fn session_page() -> (Analysis, String) {
    let trace = session::session();
    let (analysis, page) = page(&trace);
    std::fs::write(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session.html"), &page).unwrap();
    (analysis, page)
}

#[test]
fn the_timeline_gets_the_charts_order_with_short_helpers_folded() {
    let (analysis, page) = session_page();
    let order = data(&page)["order"].as_array().unwrap().clone();
    let name = |e: &Value| e["process"].as_u64().map(|i| analysis.processes[i as usize].comm.clone());
    // Every process once: in its own entry or folded in one.
    let mut seen: Vec<u64> = order
        .iter()
        .flat_map(|e| {
            let own = e["process"].as_u64();
            let folded = e["helpers"].as_array().into_iter().flatten().map(|h| h[0].as_u64().unwrap());
            own.into_iter().chain(folded).collect::<Vec<_>>()
        })
        .collect();
    seen.sort_unstable();
    assert_eq!(seen, (0..analysis.processes.len() as u64).collect::<Vec<_>>());
    // Parents come first, and siblings are in start order.
    let start = |e: &Value| match e["process"].as_u64() {
        Some(i) => analysis.processes[i as usize].start_ns,
        None => e["helpers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|h| analysis.processes[h[0].as_u64().unwrap() as usize].start_ns)
            .min(),
    };
    for (k, e) in order.iter().enumerate() {
        if let Some(parent) = e["parent"].as_u64() {
            assert!((parent as usize) < k, "entry {k} before its parent {parent}");
        }
        let later_sibling = order[k + 1..].iter().find(|o| o["parent"] == e["parent"]);
        if let Some(next) = later_sibling {
            assert!(start(e) <= start(next), "{:?} after {:?}", name(next), name(e));
        }
    }
    // mate-session's own helpers are one entry right under it, before its first child.
    let session = order.iter().position(|e| name(e).as_deref() == Some("mate-session")).unwrap();
    let folded = &order[session + 1];
    assert_eq!(folded["parent"].as_u64(), Some(session as u64));
    let helpers = folded["helpers"].as_array().expect("folded helpers");
    let comms: Vec<&str> =
        helpers.iter().map(|h| analysis.processes[h[0].as_u64().unwrap() as usize].comm.as_str()).collect();
    // 9 helpers, every third an `sh -c` wrapper with its command one level below.
    assert_eq!(comms.len(), 12, "{comms:?}");
    assert_eq!(comms.iter().filter(|&&c| c == "sh").count(), 3, "{comms:?}");
    assert!(helpers.iter().any(|h| h[1] == 1), "a command under its sh");
}
