//! `coldstart report --format html` in a real browser: headless Chromium (Debian
//! `chromium`), driven over the DevTools protocol, loads the report and is used
//! the way a person would use it.
//!
//! - A synthetic trace (built here, deterministic) whose process, file and mark
//!   names are markup: the page loads with no console error, no exception, no
//!   dialog and no request but the file itself; the names show as text and no
//!   `<img>` exists; clicking a process filters the tables to exactly its files,
//!   its row and its threads; headers sort; the buttons and the wheel zoom;
//!   hovering the timeline shows the details of what is under the pointer.
//! - A real recording (as root, with tracefs): `sh` reading a file evicted from
//!   the page cache and listing a directory; the page loads cleanly and filtering
//!   to `cat` leaves its file and its row.
//!
//! Without Chromium (or root, for the recording) the tests skip, saying why;
//! with CI=true they fail instead. A screenshot of each page is written under
//! the target directory's tmp/ to look at.

mod support;
use support::{can_record, private_dir};

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};

use coldstart_trace::{Mark, MarkSource, Trace};
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::{Network, Page as Cdp};
use headless_chrome::{Browser, Tab};
use serde_json::Value;

const XSS_PROCESS: &str = "<img src=x onerror=alert(1)>";
const XSS_FILE: &str = "/tmp/<img src=x onerror=alert(2)>/lib.so";
const XSS_MARK: &str = "</script><script>alert(3)</script><!--";

fn coldstart(args: &[&OsStr]) {
    let out = Command::new(env!("CARGO_BIN_EXE_coldstart")).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "coldstart {args:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn html_report(trace: &Path, html: &Path) {
    coldstart(&[
        "report".as_ref(),
        trace.as_os_str(),
        "--format".as_ref(),
        "html".as_ref(),
        "-o".as_ref(),
        html.as_os_str(),
    ]);
}

/// What the page did that a clean page never does.
#[derive(Debug, Default)]
struct Seen {
    errors: Vec<String>,
    dialogs: Vec<String>,
    requests: Vec<String>,
}

/// A report open in headless Chromium.
struct Page {
    tab: Arc<Tab>,
    seen: Arc<Mutex<Seen>>,
    url: String,
    _browser: Browser,
    _profile: tempfile::TempDir,
}

/// Replaces the dialogs with recorders, so a dialog opened by injected markup can
/// neither block the page nor go unnoticed.
const DIALOG_TRAP: &str = "window.__dialogs = [];
for (const name of ['alert', 'confirm', 'prompt']) {
  window[name] = (...args) => { window.__dialogs.push(name + ': ' + args.join(' ')); };
}";

impl Page {
    fn open(chromium: &Path, html: &Path) -> Page {
        let profile = private_dir();
        let extra = [
            "--disable-quic",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ];
        let (browser, tab) = coldstart_testkit::headless_tab(chromium, profile.path(), &extra);
        let seen = Arc::new(Mutex::new(Seen::default()));
        let sink = Arc::clone(&seen);
        tab.add_event_listener(Arc::new(move |event: &Event| {
            let mut seen = sink.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            match event {
                Event::RuntimeConsoleAPICalled(e) => {
                    use headless_chrome::protocol::cdp::Runtime::ConsoleAPICalledEventTypeOption as T;
                    if matches!(e.params.Type, T::Error | T::Assert) {
                        let text: Vec<String> =
                            e.params.args.iter().map(|a| format!("{:?}", a.value)).collect();
                        seen.errors.push(format!("console.error: {}", text.join(" ")));
                    }
                }
                Event::RuntimeExceptionThrown(e) => {
                    let d = &e.params.exception_details;
                    let what = d.exception.as_ref().and_then(|x| x.description.clone()).unwrap_or_default();
                    seen.errors.push(format!("exception: {} {what} (line {})", d.text, d.line_number));
                }
                Event::LogEntryAdded(e) => {
                    use headless_chrome::protocol::cdp::Log::LogEntryLevel;
                    if e.params.entry.level == LogEntryLevel::Error {
                        seen.errors.push(format!("log: {}", e.params.entry.text));
                    }
                }
                Event::PageJavascriptDialogOpening(e) => seen.dialogs.push(e.params.message.clone()),
                Event::NetworkRequestWillBeSent(e) => seen.requests.push(e.params.request.url.clone()),
                _ => {}
            }
        }))
        .unwrap();
        tab.enable_log().unwrap();
        tab.enable_runtime().unwrap();
        tab.call_method(Network::Enable {
            max_total_buffer_size: None,
            max_resource_buffer_size: None,
            max_post_data_size: None,
            report_direct_socket_traffic: None,
            enable_durable_messages: None,
        })
        .unwrap();
        tab.call_method(Cdp::AddScriptToEvaluateOnNewDocument {
            source: DIALOG_TRAP.to_owned(),
            world_name: None,
            include_command_line_api: None,
            run_immediately: None,
        })
        .unwrap();
        let url = format!("file://{}", html.display());
        tab.navigate_to(&url).unwrap().wait_until_navigated().unwrap();
        let page = Page { tab, seen, url, _browser: browser, _profile: profile };
        page.wait_for("the page to be built", "document.body.dataset.ready === 'true'");
        page
    }

    fn eval(&self, body: &str) -> Value {
        coldstart_testkit::eval_json(&self.tab, body)
    }

    /// Waits (bounded, so a broken page fails instead of hanging) until `condition` holds.
    fn wait_for(&self, what: &str, condition: &str) {
        coldstart_testkit::wait_until(&self.tab, what, condition, || {
            format!("{:?}", self.seen.lock().unwrap())
        });
    }

    /// Clicks the element at its centre, scrolled to the middle of the window first: an
    /// element in view but under the sticky filter bar would give the click to the bar.
    fn click(&self, selector: &str) {
        let element = self.tab.find_element(selector).unwrap_or_else(|e| panic!("no {selector}: {e}"));
        element
            .call_js_fn("function() { this.scrollIntoView({ block: 'center' }); }", vec![], false)
            .unwrap();
        element.click().unwrap();
    }

    /// Texts of the cells of one column of a table, in displayed order.
    fn column(&self, table: &str, key: &str) -> Vec<String> {
        let got = self.eval(&format!(
            "const t = document.getElementById('{table}');
             const i = [...t.querySelectorAll('thead th')].findIndex(th => th.dataset.key === '{key}');
             if (i < 0) throw new Error('no column {key} in {table}');
             return [...t.querySelectorAll('tbody tr:not(.empty)')].map(tr => tr.children[i].textContent);"
        ));
        serde_json::from_value(got).unwrap()
    }

    /// No console error, exception or dialog; no request but the report itself.
    fn assert_clean(&self) {
        let trapped = self.eval("return window.__dialogs;");
        let seen = self.seen.lock().unwrap();
        assert!(seen.errors.is_empty(), "console errors: {:#?}", seen.errors);
        assert!(seen.dialogs.is_empty(), "dialogs: {:?}", seen.dialogs);
        assert_eq!(trapped, Value::Array(vec![]), "dialogs trapped");
        let foreign: Vec<&String> =
            seen.requests.iter().filter(|u| **u != self.url && !u.starts_with("data:")).collect();
        assert!(foreign.is_empty(), "the page requested {foreign:?}");
        assert!(seen.requests.contains(&self.url), "the report's own load was not seen: {:?}", seen.requests);
    }

    /// Moves the mouse over the timeline at time `t_ns` in the row of process `pid`.
    fn hover_timeline(&self, pid: i32, t_ns: i64) {
        let at = self.eval(&format!(
            "const c = document.getElementById('timeline-canvas');
             const r = c.getBoundingClientRect();
             const label = document.querySelector('.tl-label[data-pid=\"{pid}\"]').getBoundingClientRect();
             const d = c.dataset;
             const x = r.left + Number(d.plotLeft) + ({t_ns} - Number(d.viewStartNs)) / (Number(d.viewEndNs) - Number(d.viewStartNs)) * Number(d.plotWidth);
             return [x, label.top + label.height / 2];"
        ));
        let (x, y) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap());
        self.tab.move_mouse_to_point(headless_chrome::browser::tab::point::Point { x, y }).unwrap();
    }

    fn screenshot(&self, name: &str) {
        let png =
            self.tab.capture_screenshot(Cdp::CaptureScreenshotFormatOption::Png, None, None, true).unwrap();
        let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&path, png).unwrap();
        eprintln!("screenshot: {}", path.display());
    }
}

/// A synthetic start whose names are markup: process `XSS_PROCESS` (the busiest
/// reader), file `XSS_FILE` and mark `XSS_MARK`.
fn hostile_trace() -> (Trace, i32) {
    let mut trace = coldstart_analyze::synthetic::start_trace(20_000, 11);
    let analysis = coldstart_analyze::analyze(&trace);
    let pid = analysis.by_process.iter().find_map(|r| r.pid).unwrap();
    for p in trace.processes.iter_mut().filter(|p| p.pid == pid) {
        p.comm = XSS_PROCESS.to_owned();
    }
    for t in trace.threads.iter_mut().filter(|t| t.pid == pid) {
        t.comm = XSS_PROCESS.to_owned();
    }
    let read_by_pid = analysis.file_uses.iter().find(|u| u.pid == pid).unwrap().file;
    trace.files.iter_mut().find(|f| f.id == read_by_pid).unwrap().path = Some(XSS_FILE.to_owned());
    trace.marks.push(Mark {
        t_ns: analysis.overview.end_ns / 2,
        pid: Some(pid),
        name: XSS_MARK.to_owned(),
        source: MarkSource::Command,
        tid: None,
    });
    (trace, pid)
}

#[test]
fn the_report_of_a_hostile_synthetic_trace_is_clean_filters_sorts_zooms_and_shows_details() {
    let Some(chromium) = coldstart_testkit::chromium("html synthetic") else { return };
    let dir = private_dir();
    let (trace, pid) = hostile_trace();
    let trace_path = dir.path().join("hostile.coldstart");
    trace.write(&trace_path).unwrap();
    let html = dir.path().join("hostile.html");
    html_report(&trace_path, &html);
    let text = std::fs::read_to_string(&html).unwrap();
    assert!(!text.contains(XSS_PROCESS) && !text.contains("<img") && !text.contains("</script><script>"));
    assert_eq!(text.matches("<script").count(), 2, "one data block and one script");

    let analysis = coldstart_analyze::analyze(&trace);
    let name_of = |id: u32| analysis.files.iter().find(|f| f.id == id).unwrap().name.clone();
    let mut all_files: Vec<String> = analysis.by_file.iter().map(|r| r.name.clone()).collect();
    let mut its_files: Vec<String> =
        analysis.file_uses.iter().filter(|u| u.pid == pid).map(|u| name_of(u.file)).collect();
    all_files.sort();
    its_files.sort();
    assert!(
        its_files.len() < all_files.len() && all_files.len() <= 100,
        "the fixture fits one page of the table"
    );
    let its_threads = analysis.threads.iter().filter(|t| t.pid == pid).count();

    let page = Page::open(&chromium, &html);
    page.assert_clean();

    // the names are text: no element made from them, the text shown as is
    let dom = page.eval(&format!(
        "return {{ imgs: document.querySelectorAll('img').length, scripts: document.scripts.length,
                  label: document.querySelector('.tl-label[data-pid=\"{pid}\"] .comm').textContent,
                  file: [...document.querySelectorAll('#files-table td')].some(td => td.textContent === {XSS_FILE:?}),
                  title: document.title }};"
    ));
    assert_eq!(dom["imgs"], 0, "{dom}");
    assert_eq!(dom["scripts"], 2, "{dom}");
    assert_eq!(dom["label"], XSS_PROCESS);
    assert_eq!(dom["file"], true, "{dom}");
    assert_eq!(dom["title"], "coldstart: synthetic");

    // every file read, before filtering
    let mut shown = page.column("files-table", "name");
    shown.sort();
    assert_eq!(shown, all_files);

    // click the process on the timeline: the tables show only its files, its row, its threads
    page.click(&format!(".tl-label[data-pid=\"{pid}\"]"));
    page.wait_for(
        "the filter",
        &format!("document.querySelector('#filterbar .chip[data-pid=\"{pid}\"]') !== null"),
    );
    let mut shown = page.column("files-table", "name");
    shown.sort();
    assert_eq!(shown, its_files);
    assert_eq!(page.column("processes-table", "pid"), vec![pid.to_string()]);
    assert_eq!(page.column("threads-table", "pid"), vec![pid.to_string(); its_threads]);
    assert_eq!(page.eval("return document.querySelectorAll('.tl-label.proc').length;"), 1);

    // sort by seeks, most first, then least first
    let seeks = |page: &Page| -> Vec<u64> {
        page.column("files-table", "seeks").iter().map(|s| s.replace(',', "").parse().unwrap()).collect()
    };
    page.click("#files-table th[data-key=\"seeks\"] button");
    let desc = seeks(&page);
    assert!(desc.windows(2).all(|w| w[0] >= w[1]), "{desc:?}");
    page.click("#files-table th[data-key=\"seeks\"] button");
    let asc = seeks(&page);
    assert!(asc.windows(2).all(|w| w[0] <= w[1]) && asc.first() < desc.first(), "{asc:?}");

    // hover one of its reads on the timeline: the tooltip names the file and the process
    let read = analysis.reads.iter().filter(|r| r.pid == pid).nth(3).unwrap();
    page.hover_timeline(pid, read.t_ns);
    page.wait_for("the tooltip", "!document.getElementById('tooltip').hidden");
    let tip = page.eval("return document.getElementById('tooltip').textContent;");
    assert!(tip.as_str().unwrap().contains(&format!("{XSS_PROCESS}/{pid}")), "{tip}");
    assert!(tip.as_str().unwrap().contains("offset"), "{tip}");
    page.screenshot("report_html_synthetic_filtered.png");

    // zoom: the + button halves the range shown, the wheel zooms in further
    let range = |page: &Page| {
        let v = page.eval("const d = document.getElementById('timeline-canvas').dataset; return Number(d.viewEndNs) - Number(d.viewStartNs);");
        v.as_f64().unwrap()
    };
    let before = range(&page);
    page.click("#tl-zoom-in");
    page.wait_for("the zoom", &format!("Number(document.getElementById('timeline-canvas').dataset.viewEndNs) - Number(document.getElementById('timeline-canvas').dataset.viewStartNs) < {before}"));
    assert!((range(&page) / before - 0.5).abs() < 0.01, "{} of {before}", range(&page));
    let zoomed = range(&page);
    page.eval(
        "const c = document.getElementById('timeline-canvas'); const r = c.getBoundingClientRect();
         c.dispatchEvent(new WheelEvent('wheel', { deltaY: -400, clientX: r.left + 600, clientY: r.top + 40, bubbles: true, cancelable: true }));
         return null;",
    );
    page.wait_for("the wheel zoom", &format!("Number(document.getElementById('timeline-canvas').dataset.viewEndNs) - Number(document.getElementById('timeline-canvas').dataset.viewStartNs) < {zoomed}"));

    // show all processes again: every file is back
    page.click("#clear-filter");
    page.wait_for("the filter to clear", "document.querySelector('#filterbar .chip') === null");
    let mut shown = page.column("files-table", "name");
    shown.sort();
    assert_eq!(shown, all_files);
    page.click("#tl-fit");
    page.screenshot("report_html_synthetic.png");
    page.assert_clean();
}

/// Writes `bytes` to a new file and drops its pages from the page cache, so
/// reading it is a real read from the disk.
fn cold_file(path: &Path, bytes: usize) {
    let data: Vec<u8> = (0..bytes).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(path, data).unwrap();
    let file = std::fs::File::open(path).unwrap();
    file.sync_all().unwrap();
    nix::fcntl::posix_fadvise(&file, 0, 0, nix::fcntl::PosixFadviseAdvice::POSIX_FADV_DONTNEED).unwrap();
}

#[test]
fn the_report_of_a_real_recording_loads_cleanly_and_filters_to_a_process() {
    let Some(chromium) = coldstart_testkit::chromium("html recording") else { return };
    if !can_record("html recording") {
        return;
    }
    let dir = private_dir();
    let data = dir.path().join("cold-data.bin");
    cold_file(&data, 8 << 20);
    let trace_path = dir.path().join("sh.coldstart");
    let script = format!("cat '{}' > /dev/null; ls -l /usr/lib > /dev/null", data.display());
    coldstart(&[
        "record".as_ref(),
        "-o".as_ref(),
        trace_path.as_os_str(),
        "--spool-dir".as_ref(),
        dir.path().join("spool").as_os_str(),
        "--".as_ref(),
        "sh".as_ref(),
        "-c".as_ref(),
        script.as_ref(),
    ]);
    let trace = Trace::read(&trace_path).unwrap();
    let Some(cat) = trace.processes.iter().find(|p| p.comm == "cat").map(|p| p.pid) else {
        let names: Vec<(i32, &str, Option<&str>)> =
            trace.processes.iter().map(|p| (p.pid, p.comm.as_str(), p.exe.as_deref())).collect();
        let losses: Vec<(&str, u64)> = trace.losses.iter().map(|l| (l.what.as_str(), l.count)).collect();
        panic!("cat was not recorded: {names:?}; losses {losses:?}");
    };
    let html = dir.path().join("sh.html");
    html_report(&trace_path, &html);

    let page = Page::open(&chromium, &html);
    page.assert_clean();
    let data_path = data.display().to_string();
    assert!(page.column("files-table", "name").contains(&data_path), "the cold file is listed");
    let processes = page.column("processes-table", "comm");
    assert!(processes.len() >= 2 && processes.contains(&"cat".to_owned()), "{processes:?}");

    page.click(&format!(".tl-label[data-pid=\"{cat}\"]"));
    page.wait_for(
        "the filter",
        &format!("document.querySelector('#filterbar .chip[data-pid=\"{cat}\"]') !== null"),
    );
    assert_eq!(page.column("processes-table", "comm"), vec!["cat".to_owned()]);
    let files = page.column("files-table", "name");
    assert!(files.contains(&data_path), "{files:?}");
    assert!(!files.iter().any(|f| f.ends_with("/ls")), "{files:?}");
    page.screenshot("report_html_recording.png");
    page.assert_clean();
}
