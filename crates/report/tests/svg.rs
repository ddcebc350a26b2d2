//! The bootchart SVG: golden files of small traces (synthetic, and the bootchart2
//! example1 import), and checks of its structure — states where the trace puts them,
//! escaping of hostile names, at most 100 bars for 300 or 861 processes with the rest
//! accounted for, rows in start order under their parents with short helpers folded,
//! every milestone once with its label and no two labels overlapping, determinism.
//!
//! Golden files live in tests/data/svg/; re-bless them with `COLDSTART_BLESS=1 cargo
//! test -p coldstart-report --test svg` after checking the change by eye (render
//! them with `rsvg-convert`).

use std::path::{Path, PathBuf};

use coldstart_analyze::analyze;
use coldstart_report::svg::{Options, write};
use coldstart_trace::ThreadState::*;
use coldstart_trace::*;
use quick_xml::events::Event;

#[path = "common/boot.rs"]
mod boot;
mod common;
#[path = "common/session.rs"]
mod session;

use common::{MS, fixture};

fn chart(trace: &Trace) -> String {
    let mut out = Vec::new();
    write(trace, &analyze(trace), &Options::default(), &mut out).expect("render");
    String::from_utf8(out).expect("utf-8")
}

fn golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/svg").join(format!("{name}.svg"));
    if std::env::var_os("COLDSTART_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; create it with COLDSTART_BLESS=1", path.display()));
    if expected != actual {
        let saved = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}.actual.svg"));
        std::fs::write(&saved, actual).unwrap();
        let line = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{name}.svg differs from its golden file at line {}:\n  expected {:?}\n  actual   {:?}\nthe new chart is in {}; if it is right, re-bless with COLDSTART_BLESS=1",
            line + 1,
            expected.lines().nth(line).unwrap_or(""),
            actual.lines().nth(line).unwrap_or(""),
            saved.display()
        );
    }
}

/// One element of the chart: its name, attributes and the text directly inside it.
#[derive(Debug)]
struct Element {
    name: String,
    attrs: Vec<(String, String)>,
    text: String,
}

impl Element {
    fn attr(&self, key: &str) -> Option<&str> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    fn num(&self, key: &str) -> f64 {
        self.attr(key).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }
}

/// Parses the chart as XML (it must be well-formed) into a flat list of elements.
fn elements(svg: &str) -> Vec<Element> {
    let mut reader = quick_xml::Reader::from_str(svg);
    let mut out: Vec<Element> = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    loop {
        match reader.read_event().expect("well-formed XML") {
            Event::Start(e) => {
                out.push(element(&e));
                open.push(out.len() - 1);
            }
            Event::Empty(e) => out.push(element(&e)),
            Event::End(_) => {
                open.pop().expect("balanced tags");
            }
            Event::Text(t) => {
                if let Some(&i) = open.last() {
                    out[i].text.push_str(&t.decode().unwrap());
                }
            }
            Event::GeneralRef(r) => {
                let name = String::from_utf8(r.to_vec()).unwrap();
                let c = quick_xml::escape::resolve_predefined_entity(&name).expect("predefined entity");
                if let Some(&i) = open.last() {
                    out[i].text.push_str(c);
                }
            }
            Event::CData(c) => {
                if let Some(&i) = open.last() {
                    out[i].text.push_str(&String::from_utf8_lossy(&c));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(open.is_empty(), "unclosed elements");
    out
}

fn element(e: &quick_xml::events::BytesStart) -> Element {
    let attrs = e
        .attributes()
        .map(|a| {
            let a = a.expect("attribute");
            (
                String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                a.normalized_value(quick_xml::XmlVersion::Implicit1_0).expect("escaped value").into_owned(),
            )
        })
        .collect();
    Element { name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(), attrs, text: String::new() }
}

fn texts(svg: &str) -> Vec<String> {
    elements(svg)
        .into_iter()
        .filter(|e| e.name == "text" || e.name == "tspan" || e.name == "title")
        .map(|e| e.text)
        .collect()
}

/// Rectangles of a class in the plots (the legend's swatches are left of them).
fn class_rects<'a>(all: &'a [Element], class: &str) -> Vec<&'a Element> {
    all.iter().filter(|e| e.name == "rect" && e.attr("class") == Some(class) && e.num("x") >= X0).collect()
}

/// The fixture with what a recording adds around it: CPU and disk samples, execs.
fn recorded() -> Trace {
    let mut t = fixture();
    let vda = t.disks[0].dev;
    for k in 1..=12 {
        let busy = if (3..=7).contains(&k) { 0.2 } else { 0.6 };
        t.cpu_samples.push(CpuSample {
            t_ns: k * 10 * MS,
            dt_ns: 10 * MS,
            user: busy,
            system: 0.1,
            iowait: 0.9 - busy - 0.1,
            idle: 0.1,
            running: 1,
            blocked: 1,
        });
        t.disk_samples.push(DiskSample {
            t_ns: k * 10 * MS,
            dt_ns: 10 * MS,
            dev: vda,
            read_bytes: if k < 5 { 64 * 1024 } else { 0 },
            read_ios: if k < 5 { 2 } else { 0 },
            ..DiskSample::default()
        });
    }
    t.execs = vec![
        Exec { pid: 100, t_ns: 2 * MS, path: "/usr/bin/app".into(), argv: vec!["app".into()] },
        Exec { pid: 200, t_ns: 31 * MS, path: "/usr/libexec/helper".into(), argv: vec![] },
    ];
    t.meta.start_unix_ns = 1_795_375_661_425_790_722;
    t.meta.sample_hz = Some(100.0);
    t
}

/// A bootchart2-like trace: no scheduler data, only process samples.
fn sampled() -> Trace {
    let mut t = recorded();
    t.sched.clear();
    t.wakeups.clear();
    for k in 1..=12 {
        let (state, cpu) = if (4..=6).contains(&k) { ('D', 0.0) } else { ('R', 0.5) };
        t.process_samples.push(ProcessSample {
            t_ns: k * 10 * MS,
            dt_ns: 10 * MS,
            pid: 100,
            state,
            cpu_user: cpu,
            cpu_system: 0.0,
            major_faults: 0,
            rss_bytes: None,
        });
    }
    t
}

fn example1() -> Trace {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../import/tests/data/example1");
    coldstart_import::bootchart2::import(&dir).expect("import example1")
}

#[test]
fn golden_chart_of_a_recorded_start() {
    golden("recorded", &chart(&recorded()));
}

#[test]
fn golden_chart_of_a_sampled_start() {
    golden("sampled", &chart(&sampled()));
}

#[test]
fn golden_chart_of_the_bootchart2_example() {
    golden("bootchart2-example1", &chart(&example1()));
}

#[test]
fn golden_chart_of_a_boot_with_its_units() {
    golden("boot", &chart(&boot::boot()));
}

#[test]
fn the_chart_is_deterministic_and_stamped_with_the_version() {
    let a = chart(&recorded());
    assert_eq!(a, chart(&recorded()));
    assert!(a.contains(&format!("coldstart {}", env!("CARGO_PKG_VERSION"))));
    let root = &elements(&a)[0];
    assert_eq!(root.name, "svg");
    assert_eq!(
        root.attr("viewBox"),
        Some(format!("0 0 {} {}", root.num("width"), root.num("height")).as_str())
    );
}

// The plots start at x = 266 and are 1200 px wide; the fixture spans 120 ms, so 10 px per ms.
const X0: f64 = 266.0;
const PX_PER_MS: f64 = 10.0;

#[test]
fn states_from_the_scheduler_are_drawn_where_they_happened() {
    let all = elements(&chart(&recorded()));
    // helper (200) waits for I/O from 40 to 70 ms; app (100) from 8 to 18 ms.
    let io: Vec<(f64, f64)> =
        class_rects(&all, "io l4").iter().map(|r| (r.num("x"), r.num("width"))).collect();
    assert!(io.contains(&(X0 + 40.0 * PX_PER_MS, 30.0 * PX_PER_MS)), "{io:?}");
    assert!(io.contains(&(X0 + 8.0 * PX_PER_MS, 10.0 * PX_PER_MS)), "{io:?}");
    // app runs from 81 to 100 ms after waiting for a CPU from 80 to 81 ms.
    let run: Vec<(f64, f64)> =
        class_rects(&all, "run l4").iter().map(|r| (r.num("x"), r.num("width"))).collect();
    assert!(run.contains(&(X0 + 81.0 * PX_PER_MS, 19.0 * PX_PER_MS)), "{run:?}");
    let wait: Vec<(f64, f64)> =
        class_rects(&all, "cpuwait l4").iter().map(|r| (r.num("x"), r.num("width"))).collect();
    assert_eq!(wait, vec![(X0 + 80.0 * PX_PER_MS, PX_PER_MS)]);
    // Bars run from fork to exit: helper lives from 30 to 90 ms.
    let helper =
        class_rects(&all, "alive").into_iter().map(|r| (r.num("x"), r.num("width"))).collect::<Vec<_>>();
    assert!(helper.contains(&(X0 + 30.0 * PX_PER_MS, 60.0 * PX_PER_MS)), "{helper:?}");
    // The exec of helper is a tick at 31 ms labelled with the program's name.
    let exec =
        all.iter().find(|e| e.name == "line" && e.attr("class") == Some("exec") && e.num("x1") == X0 + 310.0);
    assert!(exec.is_some());
    assert!(all.iter().any(|e| e.attr("class") == Some("exec-name") && e.text == "helper"));
}

#[test]
fn states_from_process_samples_shade_cpu_use_and_d_state() {
    let all = elements(&chart(&sampled()));
    // Samples 4 to 6 cover 30..60 ms in D state; the others run at half a CPU.
    let io: Vec<(f64, f64)> =
        class_rects(&all, "io l4").iter().map(|r| (r.num("x"), r.num("width"))).collect();
    assert_eq!(io, vec![(X0 + 30.0 * PX_PER_MS, 30.0 * PX_PER_MS)]);
    let half: Vec<(f64, f64)> =
        class_rects(&all, "run l2").iter().map(|r| (r.num("x"), r.num("width"))).collect();
    // Clipped to app's life, 2 to 110 ms.
    assert_eq!(
        half,
        vec![(X0 + 2.0 * PX_PER_MS, 28.0 * PX_PER_MS), (X0 + 60.0 * PX_PER_MS, 50.0 * PX_PER_MS)]
    );
    assert!(
        texts(&chart(&sampled()))
            .iter()
            .any(|t| t.contains("Process states from /proc samples at 100.0 per second"))
    );
}

#[test]
fn milestones_and_readiness_are_lines_across_the_chart_with_their_names() {
    let svg = chart(&recorded());
    let all = elements(&svg);
    // Lines across the chart, not the legend's short keys.
    let at = |class: &str| {
        let across = |e: &&Element| {
            e.name == "line" && e.attr("class") == Some(class) && e.num("y2") - e.num("y1") > 100.0
        };
        all.iter().find(across).map(|e| e.num("x1"))
    };
    // The mark `ready` is the readiness point: one line for both.
    assert_eq!(at("mark"), None);
    assert_eq!(at("ready"), Some(X0 + 100.0 * PX_PER_MS));
    assert_eq!(at("origin"), Some(X0 + 2.0 * PX_PER_MS));
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t == "ready at 0.100 s: 98.0 ms after the start (mark:ready)"), "{texts:?}");
    assert!(texts.iter().any(|t| t == "command start 0.002 s"), "{texts:?}");
    // Another mark gets its own line and name.
    let mut t = recorded();
    t.marks.push(Mark {
        t_ns: 50 * MS,
        pid: Some(200),
        name: "loaded".into(),
        source: MarkSource::Command,
        tid: None,
    });
    let svg = chart(&t);
    let all = elements(&svg);
    let mark = all
        .iter()
        .find(|e| e.name == "line" && e.attr("class") == Some("mark") && e.num("y2") - e.num("y1") > 100.0);
    assert_eq!(mark.map(|e| e.num("x1")), Some(X0 + 50.0 * PX_PER_MS));
    assert!(all.iter().any(|e| e.attr("class") == Some("mark-name") && e.text == "loaded 0.050 s"));
}

#[test]
fn the_header_says_what_ran_where_how_cold_and_what_was_lost() {
    let texts = texts(&chart(&recorded())).join("\n");
    assert!(texts.contains("app --headless"), "{texts}");
    assert!(texts.contains("host vm · kernel 6.18.0 #1 SMP · CPU 2 × Test CPU · 8.0 GiB RAM"), "{texts}");
    assert!(
        texts.contains("disk vda (254:0); kernel flag: rotational; measured: too few reads to tell"),
        "{texts}"
    );
    assert!(texts.contains(
        "2026-11-22 19:27:41 UTC · cold page cache (drop_caches) · ready after 0.098 s (mark:ready)"
    ));
    assert!(texts.contains("LOST: 1 cpu1 overrun (tracefs)"), "{texts}");
}

#[test]
fn the_seek_plot_has_a_point_per_request_coloured_by_process() {
    let all = elements(&chart(&recorded()));
    let groups: Vec<usize> = all
        .iter()
        .enumerate()
        .filter(|(_, e)| e.name == "g" && e.attr("class") == Some("p0"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(groups.len(), 1);
    // The four requests of app, all reads, are the squares after the group's start.
    let squares =
        all[groups[0] + 1..].iter().take_while(|e| e.name == "rect" && e.attr("class").is_none()).count();
    assert_eq!(squares, 4);
    assert!(all.iter().any(|e| e.text == "app 100 (4)"));
}

#[test]
fn hostile_names_stay_text() {
    let mut t = recorded();
    let evil = "<img src=x onerror=alert(1)>";
    t.processes[1].comm = evil.into();
    t.threads[1].comm = evil.into();
    t.processes[0].comm = "app\u{1}\"&'".into();
    t.files[0].path = Some("/tmp/</title><script>alert(1)</script>".into());
    t.marks[0].name = "]]><script>alert(2)</script>".into();
    t.meta.command = vec!["<svg onload=alert(3)>".into()];
    t.execs[1].path = "/x/<b>bold</b>".into();
    let svg = chart(&t);
    let all = elements(&svg);
    for e in &all {
        assert!(!["img", "script", "b"].contains(&e.name.as_str()), "element {} from a name", e.name);
        assert!(!e.attrs.iter().any(|(k, _)| k.starts_with("on")), "event handler attribute {:?}", e.attrs);
    }
    assert_eq!(all.iter().filter(|e| e.name == "svg").count(), 1);
    let texts = texts(&svg);
    assert!(texts.iter().any(|t| t == evil), "the name is shown as text");
    assert!(texts.iter().any(|t| t == "app\u{FFFD}\"&'"), "control characters are replaced");
    assert!(texts.iter().any(|t| t.starts_with("]]><script>alert(2)</script>")));
    assert!(texts.iter().any(|t| t == "'<svg onload=alert(3)>'"), "quoted as a shell would");
    assert!(svg.contains("&lt;img src=x onerror=alert(1)&gt;"));
}

/// `n` processes under one root: a third idle, the others running for longer the later they are.
fn many_processes(n: i32) -> Trace {
    let mut t = Trace {
        meta: Meta { root_pid: Some(1000), page_size: 4096, duration_ns: 1000 * MS, ..Meta::default() },
        ..Trace::default()
    };
    for k in 0..n {
        let pid = 1000 + k;
        let start = if k == 0 { 0 } else { i64::from(k) * 3 * MS };
        t.processes.push(Process {
            pid,
            ppid: Some(if k == 0 { 1 } else { 1000 + (k - 1) / 10 * 10 }).filter(|&p| p != pid),
            comm: format!("proc{k}"),
            start_ns: Some(start),
            end_ns: Some(start + 50 * MS),
            in_scope: true,
            ..Process::default()
        });
        t.threads.push(Thread {
            tid: pid,
            pid,
            comm: format!("proc{k}"),
            start_ns: Some(start),
            end_ns: None,
        });
        let run = if k % 3 == 1 { 0 } else { i64::from(k) * 10_000 };
        t.sched.push(SchedInterval { tid: pid, start_ns: start, end_ns: start + run, state: Running });
        t.sched.push(SchedInterval {
            tid: pid,
            start_ns: start + run,
            end_ns: start + 50 * MS,
            state: Sleeping,
        });
    }
    t
}

#[test]
fn three_hundred_processes_collapse_to_a_hundred_rows_and_say_so() {
    let svg = chart(&many_processes(300));
    let all = elements(&svg);
    let bars = all.iter().filter(|e| e.name == "g" && e.attr("class") == Some("bar")).count();
    assert_eq!(bars, 100);
    let texts = texts(&svg);
    // 100 of the 300 never run (k % 3 == 1); the root and the 98 busiest others stay.
    let note = texts.iter().find(|t| t.starts_with("Showing")).expect("a note on what was left out");
    assert!(
        note.starts_with(
            "Showing 99 of 300 processes: 100 idle ones (no CPU, I/O wait or reads) and 101 less active ones"
        ),
        "{note}"
    );
    assert!(texts.iter().any(|t| t == "201 other processes"));
    // The busiest process (proc299, 2.99 ms) is shown; proc101 (1.01 ms) is not.
    assert!(texts.iter().any(|t| t == "proc299"));
    assert!(!texts.iter().any(|t| t == "proc101"));
}

#[test]
fn the_bootchart2_example_keeps_a_hundred_rows_of_its_861_processes() {
    let svg = chart(&example1());
    let all = elements(&svg);
    let bars = all.iter().filter(|e| e.name == "g" && e.attr("class") == Some("bar")).count();
    assert_eq!(bars, 100);
    let texts = texts(&svg);
    // Most of a boot's processes are short helpers of the init scripts and udev.
    let folded = texts.iter().find(|t| t.contains("are folded into")).expect("a note on the folding");
    let helper_rows: Vec<usize> =
        row_names(&all).iter().filter_map(|n| n.strip_prefix('+')?.split(' ').next()?.parse().ok()).collect();
    let helpers: usize = helper_rows.iter().sum();
    assert!(helpers > 400, "{helper_rows:?}");
    let expected = format!("{helpers} short-lived helpers");
    assert!(folded.starts_with(&expected), "{folded}: {helper_rows:?}");
    assert!(folded.contains(&format!("folded into {} rows", helper_rows.len())), "{folded}: {helper_rows:?}");
    let note = texts.iter().find(|t| t.starts_with("Showing")).expect("a note on what was left out");
    assert!(!note.starts_with("Showing 861 of 861"), "{note}");
    assert!(texts.iter().any(|t| t == "boot (bootchart2 log)"));
}

/// The names of the rows, top to bottom (the name column's first tspan of each).
fn row_names(all: &[Element]) -> Vec<String> {
    let mut names = Vec::new();
    for (k, e) in all.iter().enumerate() {
        let class = e.attr("class").unwrap_or("");
        if e.name == "text" && class.split(' ').next() == Some("name") {
            names.push(all[k + 1].text.clone());
        }
    }
    names
}

/// A parent with children started out of pid order, a grandchild, and short helpers:
/// two `sh -c` wrappers (one running `sed`) and a `dbus-send`, plus one short child
/// that read 2 MiB and so is not a helper.
fn family() -> Trace {
    let mut t = Trace {
        meta: Meta { root_pid: Some(10), page_size: 4096, duration_ns: 1000 * MS, ..Meta::default() },
        ..Trace::default()
    };
    let mut add = |pid: i32, ppid: i32, comm: &str, start: Nanos, end: Option<Nanos>, run: Nanos| {
        t.processes.push(Process {
            pid,
            ppid: Some(ppid),
            comm: comm.into(),
            start_ns: Some(start * MS),
            end_ns: end.map(|e| e * MS),
            in_scope: true,
            ..Process::default()
        });
        t.threads.push(Thread { tid: pid, pid, comm: comm.into(), start_ns: Some(start * MS), end_ns: None });
        let run_end = start * MS + run * 1000;
        t.sched.push(SchedInterval { tid: pid, start_ns: start * MS, end_ns: run_end, state: Running });
        t.sched.push(SchedInterval {
            tid: pid,
            start_ns: run_end,
            end_ns: end.unwrap_or(1000) * MS,
            state: Sleeping,
        });
    };
    add(10, 1, "session", 0, None, 5000);
    add(40, 10, "panel", 300, None, 4000);
    add(30, 10, "wm", 100, None, 4000);
    add(31, 30, "wm-helper-daemon", 150, None, 300);
    add(20, 10, "sh", 200, Some(210), 500);
    add(21, 20, "sed", 201, Some(208), 1500);
    add(22, 10, "dbus-send", 250, Some(252), 800);
    add(23, 10, "sh", 400, Some(405), 200);
    add(24, 10, "big-reader", 500, Some(510), 900);
    t.page_fills.push(PageFill {
        t_ns: 505 * MS,
        pid: 24,
        tid: 24,
        file_id: 1,
        index: 0,
        pages: 512,
        origin: Some(PageOrigin::Read),
    });
    t
}

#[test]
fn rows_are_in_start_order_under_their_parents_with_short_helpers_folded() {
    let svg = chart(&family());
    let all = elements(&svg);
    // wm (100 ms) before the helpers (from 200 ms), panel (300 ms), big-reader (500 ms);
    // the four helpers (sh, sed under it, dbus-send, sh) are one row where the first was.
    assert_eq!(
        row_names(&all),
        ["session", "wm", "wm-helper-daemon", "+4 short helpers, 3.0 ms CPU", "panel", "big-reader"]
    );
    let texts = texts(&svg);
    let note = texts.iter().find(|t| t.contains("are folded into")).expect("a note on the folding");
    assert!(note.starts_with("4 short-lived helpers"), "{note}");
    assert!(note.contains("folded into 1 row under their parents"), "{note}");
    let tip = texts
        .iter()
        .find(|t| t.starts_with("4 short-lived helpers folded under session (pid 10)"))
        .expect("tooltip");
    assert!(tip.contains("sh ×2, dbus-send, sed"), "{tip}");
    // The folded row draws each helper's life: 200–210 (sh and sed), 250–252, 400–405 ms.
    let lives: Vec<f64> = class_rects(&all, "alive helpers").iter().map(|r| r.num("width")).collect();
    assert_eq!(lives, [10.0 * 1.2, 2.0 * 1.2, 5.0 * 1.2]);
}

#[test]
fn a_lone_helper_keeps_its_own_row() {
    let mut t = family();
    t.processes.retain(|p| ![21, 22, 23].contains(&p.pid));
    let names = row_names(&elements(&chart(&t)));
    assert_eq!(names, ["session", "wm", "wm-helper-daemon", "sh", "panel", "big-reader"]);
}

/// The SVG of the synthetic login, also written under the target directory to look at.
fn session_chart() -> String {
    let svg = chart(&session::session());
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-chart.svg");
    std::fs::write(&out, &svg).unwrap();
    svg
}

#[test]
fn each_milestone_of_a_session_is_one_line_with_its_label_and_its_process_marked() {
    let trace = session::session();
    let svg = session_chart();
    let all = elements(&svg);
    let labels: Vec<&Element> = all
        .iter()
        .filter(|e| e.name == "text" && matches!(e.attr("class"), Some("mark-name" | "ready-name")))
        .collect();
    for m in &trace.marks {
        let named: Vec<_> = labels.iter().filter(|e| e.text.starts_with(&format!("{} ", m.name))).collect();
        // window:caja is the readiness point: its line is the ready line, labelled as such.
        if m.name == "window:caja" {
            assert!(named.is_empty(), "{named:?}");
        } else {
            assert_eq!(named.len(), 1, "{}: {named:?}", m.name);
        }
    }
    let ready: Vec<_> = labels.iter().filter(|e| e.attr("class") == Some("ready-name")).collect();
    assert_eq!(ready.len(), 1);
    assert_eq!(ready[0].text, "ready at 3.460 s: 3.460 s after the start (window:caja)");
    let across = |class: &str| {
        all.iter()
            .filter(|e| {
                e.name == "line" && e.attr("class") == Some(class) && e.num("y2") - e.num("y1") > 500.0
            })
            .count()
    };
    assert_eq!((across("mark"), across("ready")), (4, 1));
    // The process that reached each window milestone has a diamond on its row.
    let reached: Vec<&str> = all
        .iter()
        .filter(|e| e.name == "title")
        .map(|e| e.text.as_str())
        .filter(|t| t.contains(" reached here"))
        .collect();
    for name in ["window:marco", "window:mate-panel", "window:caja", "session-start"] {
        assert_eq!(
            reached.iter().filter(|t| t.starts_with(&format!("{name} reached here"))).count(),
            1,
            "{name}"
        );
    }
    // autostart-done names no process.
    assert!(!reached.iter().any(|t| t.starts_with("autostart-done")));
}

#[test]
fn a_session_of_300_processes_stays_readable() {
    let trace = session::session();
    assert!(trace.processes.len() >= 300, "{} processes", trace.processes.len());
    let svg = session_chart();
    let all = elements(&svg);
    let height = all[0].num("height");
    assert!(height <= 2400.0, "{height} px high");
    let names = row_names(&all);
    assert!(names.len() <= 100, "{} rows", names.len());
    assert!(names.iter().any(|n| n.starts_with("+") && n.contains("short helpers")), "{names:?}");
    // Label boxes from the font size: 0.6 em a character, 0.66 em bold, a line high.
    let boxes: Vec<(f64, f64, f64, f64, &str)> = all
        .iter()
        .filter(|e| e.name == "text" && matches!(e.attr("class"), Some("mark-name" | "ready-name")))
        .map(|e| {
            let (size, per) = if e.attr("class") == Some("ready-name") { (10.0, 0.66) } else { (9.5, 0.6) };
            let w = e.text.chars().count() as f64 * size * per;
            let (x, y) = (e.num("x"), e.num("y"));
            let x = if e.attr("text-anchor") == Some("end") { x - w } else { x };
            (x, x + w, y - size, y, e.text.as_str())
        })
        .collect();
    // Four marks and the readiness point, which is also the window:caja milestone.
    assert_eq!(boxes.len(), 5, "{boxes:?}");
    for (k, a) in boxes.iter().enumerate() {
        for b in &boxes[k + 1..] {
            let apart = a.1 <= b.0 || b.1 <= a.0 || a.3 <= b.2 || b.3 <= a.2;
            assert!(apart, "labels overlap: {a:?} and {b:?}");
        }
    }
}

#[test]
fn a_burst_of_milestones_takes_eight_lanes_at_most_and_says_so() {
    let mut t = session::session();
    for k in 0..30 {
        t.marks.push(Mark {
            t_ns: 5_000 * MS + k * 10_000,
            pid: None,
            name: format!("burst-{k}"),
            source: MarkSource::TraceMarker,
            tid: None,
        });
    }
    let svg = chart(&t);
    let all = elements(&svg);
    let labels: Vec<&Element> = all
        .iter()
        .filter(|e| e.name == "text" && matches!(e.attr("class"), Some("mark-name" | "ready-name")))
        .collect();
    let lanes: std::collections::BTreeSet<String> =
        labels.iter().map(|e| e.attr("y").unwrap().to_owned()).collect();
    assert_eq!(lanes.len(), 8, "{lanes:?}");
    // The five milestones of the login keep their labels; of the burst, one per lane left.
    let burst = labels.iter().filter(|e| e.text.starts_with("burst-")).count();
    assert!(burst < 30 && burst > 0, "{burst}");
    let texts = texts(&svg);
    let note = format!("{} milestones are too close to others for labels of their own", 30 - burst);
    assert!(texts.iter().any(|t| t.starts_with(&note)), "{note}");
    // The others are lines with their names as tooltips.
    for k in 0..30 {
        let name = format!("burst-{k}");
        let labelled = labels.iter().any(|e| e.text.starts_with(&format!("{name} ")));
        assert!(labelled || texts.iter().any(|t| t.starts_with(&format!("{name} "))), "{name}");
    }
    assert!(texts.iter().any(|t| t.starts_with("ready at 3.460 s")));
}
