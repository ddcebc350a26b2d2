//! What the integration tests of every coldstart crate share (a dev-dependency only).
//!
//! The CI rule: a test that needs a capability the machine lacks (root, tracefs,
//! fanotify, Xvfb, …) fails under `CI=true`, where the capability must be there, and
//! elsewhere skips with a one-line reason on standard error. Plus private directories
//! on the build's disk, whose pages go through the page cache as a program's would,
//! and a private X server.

use std::path::Path;

/// True when running under `CI=true`, where every capability a test needs must be present.
pub fn ci() -> bool {
    std::env::var("CI").as_deref() == Ok("true")
}

pub fn is_root() -> bool {
    nix::unistd::Uid::effective().is_root()
}

/// Says why `test` cannot run here and returns true (skip it), or panics under `CI=true`.
pub fn unavailable(test: &str, why: &str) -> bool {
    assert!(!ci(), "{test}: {why} and CI=true");
    eprintln!("skip {test}: {why}");
    true
}

/// True (skip) when `have` is false: see [`unavailable`]; `what` names what is missing.
pub fn skip_without(have: bool, test: &str, what: &str) -> bool {
    !have && unavailable(test, &format!("{what} is not available"))
}

/// Whether this process may record (root, tracefs in the kernel, fanotify); see [`unavailable`].
pub fn can_record(test: &str) -> bool {
    let missing = if !is_root() {
        Some("not root")
    } else if !Path::new("/sys/kernel/tracing").is_dir() {
        Some("no tracefs")
    } else if nix::sys::fanotify::Fanotify::init(
        nix::sys::fanotify::InitFlags::FAN_CLASS_NOTIF,
        nix::sys::fanotify::EventFFlags::O_RDONLY,
    )
    .is_err()
    {
        Some("no fanotify")
    } else {
        None
    };
    missing.is_none_or(|why| !unavailable(test, &format!("cannot record here ({why})")))
}

/// A private X server (`Xvfb` on a free display, no TCP), ended when dropped.
pub struct Xvfb {
    child: std::process::Child,
    /// `:N`, for `DISPLAY`.
    pub display: String,
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts Xvfb for `test`, or returns `None` when it is missing (see [`unavailable`]).
pub fn xvfb(test: &str) -> Option<Xvfb> {
    xvfb_with_screen(test, "320x240x24")
}

/// [`xvfb`] with a screen of this size (`1280x800x24`), for a desktop session.
pub fn xvfb_with_screen(test: &str, screen: &str) -> Option<Xvfb> {
    use std::io::BufRead;
    let started = std::process::Command::new("Xvfb")
        .args(["-displayfd", "1", "-nolisten", "tcp", "-screen", "0", screen])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let Ok(mut child) = started else {
        skip_without(false, test, "Xvfb (Debian package xvfb)");
        return None;
    };
    let mut line = String::new();
    let stdout = child.stdout.take().expect("Xvfb's stdout is piped");
    let _ = std::io::BufReader::new(stdout).read_line(&mut line);
    let xvfb = Xvfb { child, display: format!(":{}", line.trim()) };
    assert!(line.trim().parse::<u32>().is_ok(), "Xvfb did not say its display: {line:?}");
    Some(xvfb)
}

/// The Chromium the HTML tests drive (`COLDSTART_CHROMIUM`, else /usr/bin/chromium), or
/// `None` when it is missing (see [`unavailable`]).
pub fn chromium(test: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("COLDSTART_CHROMIUM")
        .map_or_else(|| std::path::PathBuf::from("/usr/bin/chromium"), std::path::PathBuf::from);
    if path.exists() {
        Some(path)
    } else {
        unavailable(test, &format!("no Chromium at {} (Debian package chromium)", path.display()));
        None
    }
}

/// Headless `chromium` in a window of 1400×1000, with its profile in `profile`, no GPU,
/// sandbox or first-run page, and `extra` flags; a tab that waits up to 60 s.
pub fn headless_tab(
    chromium: &Path,
    profile: &Path,
    extra: &[&str],
) -> (headless_chrome::Browser, std::sync::Arc<headless_chrome::Tab>) {
    let args: Vec<&std::ffi::OsStr> = ["--disable-gpu", "--no-first-run", "--hide-scrollbars"]
        .iter()
        .chain(extra)
        .map(std::ffi::OsStr::new)
        .collect();
    let options = headless_chrome::LaunchOptions::default_builder()
        .path(Some(chromium.to_owned()))
        .headless(true)
        .sandbox(false)
        .window_size(Some((1400, 1000)))
        .user_data_dir(Some(profile.to_owned()))
        .args(args)
        .idle_browser_timeout(std::time::Duration::from_secs(300))
        .build()
        .expect("Chromium's launch options");
    let browser = headless_chrome::Browser::new(options).expect("start headless Chromium");
    let tab = browser.new_tab().expect("a Chromium tab");
    tab.set_default_timeout(std::time::Duration::from_secs(60));
    (browser, tab)
}

/// Evaluates `body`, a JavaScript function body returning something JSON can hold, in `tab`.
pub fn eval_json(tab: &headless_chrome::Tab, body: &str) -> serde_json::Value {
    let js = format!("JSON.stringify((() => {{ {body} }})())");
    let result = tab.evaluate(&js, false).unwrap_or_else(|e| panic!("evaluate {body}: {e}"));
    match result.value {
        Some(serde_json::Value::String(s)) => serde_json::from_str(&s).expect("JSON from the page"),
        other => panic!("evaluate {body}: no JSON string but {other:?} ({:?})", result.description),
    }
}

/// Waits until the JavaScript `condition` holds in `tab`, at most 30 s (then fails, saying
/// `what` and `seen`, what the page reported so far), so a broken page cannot hang a test.
pub fn wait_until(tab: &headless_chrome::Tab, what: &str, condition: &str, seen: impl Fn() -> String) {
    let start = std::time::Instant::now();
    while eval_json(tab, &format!("return !!({condition});")) != serde_json::Value::Bool(true) {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(30),
            "gave up waiting for {what}; seen: {}",
            seen()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// A debuginfod server on 127.0.0.1 for the symbolizer's tests: Python's `http.server`
/// over a folder laid out as debuginfod serves it (`buildid/HEX/debuginfo`), ended when
/// dropped. No other network is used.
pub struct DebuginfodServer {
    child: std::process::Child,
    root: std::path::PathBuf,
    /// `http://127.0.0.1:PORT`, for `DEBUGINFOD_URLS`.
    pub url: String,
}

impl Drop for DebuginfodServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl DebuginfodServer {
    /// Serves `debug_file` as the debug file of the build id `hex`.
    pub fn serve(&self, hex: &str, debug_file: &Path) {
        let dir = self.root.join("buildid").join(hex);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(debug_file, dir.join("debuginfo")).unwrap();
    }

    /// Stops serving (the port then refuses connections).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a [`DebuginfodServer`] over `root` (Debian's python3, `python3` elsewhere), or
/// returns `None` when Python is missing (see [`unavailable`]).
pub fn debuginfod_server(test: &str, root: &Path) -> Option<DebuginfodServer> {
    use std::io::BufRead;
    let python = if Path::new("/usr/bin/python3").exists() { "/usr/bin/python3" } else { "python3" };
    std::fs::create_dir_all(root.join("buildid")).unwrap();
    let spawned = std::process::Command::new(python)
        .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory"])
        .arg(root)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => {
            unavailable(test, &format!("no Python for a local debuginfod server ({python}: {e})"));
            return None;
        }
    };
    // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let port: u16 = line
        .split_whitespace()
        .skip_while(|w| *w != "port")
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in http.server's first line: {line:?}"));
    Some(DebuginfodServer { child, root: root.to_owned(), url: format!("http://127.0.0.1:{port}") })
}

/// Builds the C program `source` into `dir/name` with `cc` and `flags`, the build id `hex`
/// (40 hex digits), its debug information split into `dir/name.debug` (`objcopy
/// --only-keep-debug`) and its symbol table stripped (`strip --strip-all`, as distributions
/// ship files): returns (program, debug file), or `None` without a C toolchain (see [`unavailable`]).
pub fn stripped_program(
    test: &str,
    dir: &Path,
    name: &str,
    source: &str,
    flags: &[&str],
    hex: &str,
) -> Option<(std::path::PathBuf, std::path::PathBuf)> {
    let (c, program) = (dir.join(format!("{name}.c")), dir.join(name));
    let debug = dir.join(format!("{name}.debug"));
    std::fs::write(&c, source).unwrap();
    let steps: [(&str, Vec<std::ffi::OsString>); 3] = [
        (
            "cc",
            [
                flags.iter().map(Into::into).collect::<Vec<_>>(),
                vec![
                    format!("-Wl,--build-id=0x{hex}").into(),
                    "-g".into(),
                    "-o".into(),
                    program.clone().into(),
                    c.into(),
                ],
            ]
            .concat(),
        ),
        ("objcopy", vec!["--only-keep-debug".into(), program.clone().into(), debug.clone().into()]),
        ("strip", vec!["--strip-all".into(), program.clone().into()]),
    ];
    for (tool, args) in steps {
        match std::process::Command::new(tool).args(&args).status() {
            Ok(s) if s.success() => {}
            Ok(s) => panic!("{tool} {args:?} failed: {s}"),
            Err(e) => {
                unavailable(test, &format!("no {tool} ({e}; Debian packages gcc and binutils)"));
                return None;
            }
        }
    }
    Some((program, debug))
}

/// A private temporary directory under `base`, created if missing: pass the test's
/// `env!("CARGO_TARGET_TMPDIR")` (a disk filesystem, not a tmpfs, whose pages never
/// enter the page cache through the traced path), or use [`private_dir!`].
pub fn private_dir_in(base: impl AsRef<Path>) -> tempfile::TempDir {
    std::fs::create_dir_all(base.as_ref()).unwrap();
    tempfile::tempdir_in(base).unwrap()
}

/// A private temporary directory under the calling test's `CARGO_TARGET_TMPDIR`.
#[macro_export]
macro_rules! private_dir {
    () => {
        $crate::private_dir_in(env!("CARGO_TARGET_TMPDIR"))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capability_at_hand_is_never_skipped() {
        assert!(!skip_without(true, "t", "anything"));
    }

    #[test]
    fn private_dirs_are_fresh_and_under_the_base() {
        let base = tempfile::tempdir().unwrap();
        let (a, b) = (private_dir_in(base.path().join("x")), private_dir_in(base.path().join("x")));
        assert_ne!(a.path(), b.path());
        assert!(a.path().starts_with(base.path().join("x")) && a.path().is_dir());
    }
}
