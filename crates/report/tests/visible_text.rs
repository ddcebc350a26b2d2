//! No report shows a value the code failed to compute: `null`, `undefined` or `NaN`
//! as text (once a literal `null` showed under "Critical path:" in the HTML report).
//! Checked on every trace the tests hold — the two real recordings of
//! tests/fixtures, the bootchart2 example import, the synthetic login, the small
//! synthetic start and that start as a boot with systemd units — in the text report, the SVG chart (its texts and tooltips) and
//! the HTML report, whose page is loaded in headless Chromium (`--dump-dom`: the page
//! as its script built it, every tab's panel included) and read without its script,
//! style and data.

use std::io::Read;
use std::path::Path;
use std::process::Command;

use coldstart_analyze::analyze;
use coldstart_analyze::doctor::{DoctorConfig, diagnose};
use coldstart_report::{html, svg, text};
use coldstart_trace::Trace;

#[path = "common/boot.rs"]
mod boot;
mod common;
#[path = "common/session.rs"]
mod session;

const WORDS: [&str; 3] = ["null", "undefined", "NaN"];

fn traces() -> Vec<(String, Trace)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = tempfile::tempdir().unwrap();
    let mut out = Vec::new();
    for name in ["python", "soffice"] {
        let gz = root.join(format!("tests/fixtures/{name}.coldstart.gz"));
        let mut bytes = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap()).read_to_end(&mut bytes).unwrap();
        let path = dir.path().join(format!("{name}.coldstart"));
        std::fs::write(&path, bytes).unwrap();
        out.push((name.to_owned(), Trace::read(&path).expect("a fixture trace")));
    }
    let example1 = root.join("crates/import/tests/data/example1");
    out.push(("example1".to_owned(), coldstart_import::bootchart2::import(&example1).expect("example1")));
    out.push(("session".to_owned(), session::session()));
    out.push(("fixture".to_owned(), common::fixture()));
    out.push(("boot".to_owned(), boot::boot()));
    out
}

/// The words of `text` that are exactly one of [`WORDS`]; a word runs over letters,
/// digits and `/._-`, so `/dev/null` or `NaN.so` are not taken for one.
fn bad_words(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_alphanumeric() || "/._-".contains(c)))
        .filter(|w| WORDS.contains(w))
        .map(str::to_owned)
        .collect()
}

/// The lines of `text` holding a bad word, for the failure message.
fn offending(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !bad_words(l).is_empty())
        .map(|l| {
            let at = WORDS.iter().filter_map(|w| l.find(w)).min().unwrap_or(0);
            let from = l[..at].char_indices().rev().nth(150).map_or(0, |(i, _)| i);
            l[from..].chars().take(250).collect()
        })
        .collect()
}

/// The text a person can see of an HTML document: its text outside `<script>` and
/// `<style>`, and its `title` attributes (shown on hover), entities decoded.
fn visible_html_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        let tag_end = rest[open..].find('>').map_or(rest.len(), |e| open + e + 1);
        let tag = &rest[open..tag_end];
        if let Some(at) = tag.find(" title=\"") {
            let value = &tag[at + 8..];
            out.push('\n');
            out.push_str(&value[..value.find('"').unwrap_or(value.len())]);
            out.push('\n');
        }
        rest = &rest[tag_end..];
        for skipped in ["script", "style"] {
            if tag.starts_with(&format!("<{skipped}")) {
                let close = format!("</{skipped}>");
                rest = rest.find(&close).map_or("", |e| &rest[e + close.len()..]);
            }
        }
        out.push(' ');
    }
    out.push_str(rest);
    for (entity, c) in
        [("&lt;", "<"), ("&gt;", ">"), ("&quot;", "\""), ("&#39;", "'"), ("&nbsp;", " "), ("&amp;", "&")]
    {
        out = out.replace(entity, c);
    }
    out
}

/// The page as Chromium's script left it.
fn rendered(chromium: &Path, page: &Path) -> String {
    let out = Command::new(chromium)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn no_text_or_svg_report_shows_null_undefined_or_nan() {
    for (name, trace) in traces() {
        let analysis = analyze(&trace);
        let diagnosis = diagnose(&trace, &analysis, &DoctorConfig::default(), &[]);
        let mut report = Vec::new();
        text::report_with_findings(&analysis, Some(&diagnosis), &text::Options::default(), &mut report)
            .unwrap();
        let report = String::from_utf8(report).unwrap();
        assert!(bad_words(&report).is_empty(), "{name}, text report: {:?}", offending(&report));
        let mut chart = Vec::new();
        svg::write(&trace, &analysis, &svg::Options::default(), &mut chart).unwrap();
        let chart = String::from_utf8(chart).unwrap();
        // The chart's visible text: its text elements and its tooltips (`<title>`).
        let shown = visible_html_text(&chart);
        assert!(bad_words(&shown).is_empty(), "{name}, SVG: {:?}", offending(&shown));
    }
}

#[test]
fn no_html_report_shows_null_undefined_or_nan_once_rendered() {
    let Some(chromium) =
        coldstart_testkit::chromium("no_html_report_shows_null_undefined_or_nan_once_rendered")
    else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (name, trace) in traces() {
        let analysis = analyze(&trace);
        let diagnosis = diagnose(&trace, &analysis, &DoctorConfig::default(), &[]);
        let timeline = html::Timeline::new(&trace);
        let path = dir.path().join(format!("{name}.html"));
        let mut page = Vec::new();
        html::write(&analysis, Some(&timeline), Some(&diagnosis), &mut page).unwrap();
        std::fs::write(&path, page).unwrap();
        let dom = rendered(&chromium, &path);
        assert!(dom.contains("id=\"tab-files\""), "{name}: the page's script ran");
        let shown = visible_html_text(&dom);
        assert!(bad_words(&shown).is_empty(), "{name}, HTML: {:?}", offending(&shown));
    }
}

#[test]
fn the_check_finds_the_words_it_looks_for() {
    assert_eq!(bad_words("Critical path: null, 3 s"), ["null"]);
    assert_eq!(bad_words("took NaN s (undefined)"), ["NaN", "undefined"]);
    assert!(bad_words("reads /dev/null and libNaN.so, nullable").is_empty());
    let page = "<p title=\"pid null\">a</p><script>null</script><style>x{}</style><b>ok &amp; fine</b>";
    assert_eq!(
        visible_html_text(page).split_whitespace().collect::<Vec<_>>(),
        ["pid", "null", "a", "ok", "&", "fine"]
    );
}
