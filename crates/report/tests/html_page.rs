//! The timeline of the HTML report in headless Chromium (Debian `chromium`, driven over
//! the DevTools protocol), on the synthetic login of about 300 processes: its rows in
//! the embedded chart order, a folded row of short helpers that opens and folds again
//! on a click, every milestone labelled with no two labels overlapping, and no error; and
//! the CPU tab of a trace with stack samples.
//! A screenshot is written under the target directory's tmp/ to look at.
//!
//! Without Chromium the test skips, saying why; with CI=true it fails instead.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use coldstart_analyze::analyze;
use coldstart_report::html::{self, Timeline};
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, Tab};
use serde_json::Value;

#[path = "common/session.rs"]
mod session;

struct Page {
    tab: Arc<Tab>,
    errors: Arc<Mutex<Vec<String>>>,
    _browser: Browser,
    _profile: tempfile::TempDir,
}

impl Page {
    fn open(chromium: &Path, html: &Path) -> Page {
        let profile = tempfile::tempdir().unwrap();
        let (browser, tab) = coldstart_testkit::headless_tab(chromium, profile.path(), &[]);
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&errors);
        tab.add_event_listener(Arc::new(move |event: &Event| {
            if let Event::RuntimeExceptionThrown(e) = event {
                let d = &e.params.exception_details;
                sink.lock().unwrap().push(format!("{} (line {})", d.text, d.line_number));
            }
        }))
        .unwrap();
        tab.enable_runtime().unwrap();
        tab.navigate_to(&format!("file://{}", html.display())).unwrap().wait_until_navigated().unwrap();
        let page = Page { tab, errors, _browser: browser, _profile: profile };
        page.wait_for("the page to be built", "document.body.dataset.ready === 'true'");
        page
    }

    fn eval(&self, body: &str) -> Value {
        coldstart_testkit::eval_json(&self.tab, body)
    }

    fn wait_for(&self, what: &str, condition: &str) {
        coldstart_testkit::wait_until(&self.tab, what, condition, || format!("{:?}", self.errors));
    }

    fn click(&self, selector: &str) {
        self.tab.find_element(selector).unwrap_or_else(|e| panic!("no {selector}: {e}")).click().unwrap();
    }

    /// The process rows' labels, top to bottom.
    fn row_labels(&self) -> Vec<String> {
        let got = self.eval(
            "return [...document.querySelectorAll('.tl-label.proc, .tl-label.helpers')]
               .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
               .map(l => l.querySelector('.comm').textContent);",
        );
        serde_json::from_value(got).unwrap()
    }
}

#[test]
fn the_timeline_of_a_login_folds_helpers_that_a_click_opens_and_labels_every_milestone() {
    let test = "the_timeline_of_a_login_folds_helpers_that_a_click_opens_and_labels_every_milestone";
    let Some(chromium) = coldstart_testkit::chromium(test) else { return };
    let trace = session::session();
    let analysis = analyze(&trace);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.html");
    let mut out = Vec::new();
    html::write(&analysis, Some(&Timeline::new(&trace)), None, &mut out).unwrap();
    std::fs::write(&path, out).unwrap();
    let page = Page::open(&chromium, &path);

    // The rows: at most 100 of the 118 entries, in the chart's order, indented under their parents.
    let rows = page.row_labels();
    assert_eq!(rows.len(), 100, "{rows:?}");
    assert_eq!(rows[..4], ["Xvfb", "dbus-run-session", "dbus-daemon", "+27 short helpers, 49.0 ms CPU"]);
    let session = rows.iter().position(|r| r == "mate-session").expect("mate-session");
    assert!(rows[session + 1].starts_with("+12 short helpers"), "{:?}", &rows[session..session + 3]);
    page.click("#tl-all-rows");
    page.wait_for(
        "every row",
        "document.querySelectorAll('.tl-label.proc, .tl-label.helpers').length === 118",
    );

    // A click on the folded row shows its 12 processes under it; another folds them again.
    let selector = ".tl-label.helpers[data-entry]";
    let entry = page.eval(&format!(
        "return [...document.querySelectorAll('{selector}')].find(l => l.textContent.includes('+12 short helpers')).dataset.entry;"
    ));
    let folded = format!(".tl-label.helpers[data-entry=\"{}\"]", entry.as_str().unwrap());
    page.click(&folded);
    page.wait_for("the helpers", "document.querySelectorAll('.tl-label.proc.folded').length === 12");
    let rows = page.row_labels();
    let at = rows.iter().position(|r| r.starts_with("+12 short helpers")).unwrap();
    assert_eq!(rows[at + 1], "sh", "{:?}", &rows[at..at + 4]);
    assert_eq!(
        page.eval(&format!("return document.querySelector('{folded}').getAttribute('aria-expanded');")),
        "true"
    );
    page.eval(&format!(
        "document.querySelector('{folded}').scrollIntoView({{ block: 'center' }}); return true;"
    ));
    let png = page.tab.capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
    std::fs::write(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-html.png"), png).unwrap();
    page.click(&folded);
    page.wait_for("the helpers folded", "document.querySelectorAll('.tl-label.proc.folded').length === 0");

    // Every milestone is labelled (window:caja as the ready line), no two labels overlap.
    page.wait_for(
        "the milestones",
        "document.getElementById('timeline-canvas').dataset.milestoneLabels !== undefined",
    );
    let labels =
        page.eval("return JSON.parse(document.getElementById('timeline-canvas').dataset.milestoneLabels);");
    let labels = labels.as_array().unwrap();
    let names: Vec<&str> = labels.iter().map(|l| l["label"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["session-start", "window:marco", "window:mate-panel", "autostart-done", "ready (window:caja)"]
    );
    for (k, a) in labels.iter().enumerate() {
        for b in &labels[k + 1..] {
            let n = |v: &Value, key: &str| v[key].as_f64().unwrap();
            let apart = n(a, "right") <= n(b, "left")
                || n(b, "right") <= n(a, "left")
                || n(a, "bottom") <= n(b, "top")
                || n(b, "bottom") <= n(a, "top");
            assert!(apart, "{a} and {b} overlap");
        }
    }
    assert!(page.errors.lock().unwrap().is_empty(), "{:?}", page.errors);
}

#[test]
fn the_cpu_tab_lists_the_functions_the_stack_samples_were_in() {
    use coldstart_trace::{Frame, Meta, Process, Stack, StackSample, Trace};
    let test = "the_cpu_tab_lists_the_functions_the_stack_samples_were_in";
    let Some(chromium) = coldstart_testkit::chromium(test) else { return };
    let frame = |id, symbol: &str| Frame {
        id,
        address: u64::from(id),
        symbol: Some(symbol.into()),
        ..Default::default()
    };
    let trace = Trace {
        meta: Meta { duration_ns: 40_000_000, ..Default::default() },
        processes: vec![Process { pid: 7, comm: "app".into(), start_ns: Some(0), ..Default::default() }],
        frames: vec![frame(1, "main"), frame(2, "parse")],
        stacks: vec![
            Stack { id: 1, parent_id: None, frame_id: 1 },
            Stack { id: 2, parent_id: Some(1), frame_id: 2 },
        ],
        stack_samples: (0..20)
            .map(|i| StackSample {
                t_ns: i * 1_000_000,
                pid: 7,
                tid: 7,
                cpu: 0,
                stack_id: Some(if i < 15 { 2 } else { 1 }),
            })
            .collect(),
        ..Default::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cpu.html");
    let mut out = Vec::new();
    html::write(&analyze(&trace), Some(&Timeline::new(&trace)), None, &mut out).unwrap();
    std::fs::write(&path, out).unwrap();
    let page = Page::open(&chromium, &path);
    page.click("#tab-cpu");
    let rows = page.eval(
        "return [...document.querySelectorAll('#panel-cpu tbody tr')].map(r => [...r.cells].map(c => c.textContent));",
    );
    assert_eq!(
        rows,
        serde_json::json!([
            ["parse", "[unknown]", "75.0 %", "75.0 %"],
            ["main", "[unknown]", "25.0 %", "100.0 %"]
        ])
    );
    let flame = page.eval(
        "const i = document.querySelector('#panel-cpu img.flamegraph'); \
         return i ? [i.complete, i.naturalWidth > 0, i.getAttribute('src').startsWith('data:image/svg+xml;base64,')] : null;",
    );
    assert_eq!(flame, serde_json::json!([true, true, true]), "the flame graph is drawn in the CPU tab");
    assert!(page.errors.lock().unwrap().is_empty(), "{:?}", page.errors);
    let timeline = Timeline::new(&trace);
    let url = timeline.flamegraph.as_deref().expect("a flame graph of the samples");
    use base64::Engine;
    let svg =
        base64::engine::general_purpose::STANDARD.decode(&url["data:image/svg+xml;base64,".len()..]).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("<title>parse (15 samples, 75.00%)</title>"), "{svg}");
    assert!(!svg.contains("addEventListener"), "without the flame graph's script (an image runs none)");
    assert_eq!(Timeline::new(&Trace::default()).flamegraph, None);
}
