//! Debug files by build id from debuginfod servers, for the stripped files whose frames
//! have no names: when `DEBUGINFOD_URLS` is set (servers separated by spaces), `GET
//! URL/buildid/HEX/debuginfo` from each server in turn, kept in the cache that
//! libdebuginfod's own client (`debuginfod-find`, gdb, perf) uses — `DEBUGINFOD_CACHE_PATH`,
//! else `$XDG_CACHE_HOME/debuginfod_client`, else `~/.cache/debuginfod_client`, one
//! `BUILDID/debuginfo` file each — so a file is downloaded once for all of them.
//! `DEBUGINFOD_TIMEOUT` (seconds, default 90) bounds each download, `DEBUGINFOD_MAXSIZE`
//! (bytes) its size. A server that could not be reached is not asked again in this run, so
//! an unreachable one costs one timeout, not one per file. Only called after the recording,
//! never while a start is measured. The downloads go through `curl`: an HTTPS client built in
//! would be a tenth of the tool's first build, for a lookup most users never make.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What one lookup gave.
#[derive(Debug)]
pub enum Lookup {
    /// Downloaded now (and kept in the cache).
    Downloaded(Vec<u8>),
    /// Found in the cache.
    Cached(Vec<u8>),
    /// No server has it.
    Missing,
    /// A server could not be asked (the first error).
    Failed(String),
}

/// A client of the servers of `DEBUGINFOD_URLS`.
pub struct Debuginfod {
    urls: Vec<String>,
    /// Per server: it could not be reached once, so it is not asked again.
    unreachable: Vec<AtomicBool>,
    cache: PathBuf,
    max_bytes: Option<u64>,
    timeout: Duration,
}

/// The seconds libdebuginfod waits for a download by default.
const DEFAULT_TIMEOUT_S: u64 = 90;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Debuginfod {
    /// A client of `urls` (each `http://` or `https://`), caching in `cache`.
    pub fn new(urls: Vec<String>, cache: PathBuf, timeout: Duration, max_bytes: Option<u64>) -> Debuginfod {
        let unreachable = urls.iter().map(|_| AtomicBool::new(false)).collect();
        Debuginfod { urls, unreachable, cache, max_bytes, timeout }
    }

    /// The client the environment asks for; `None` when `DEBUGINFOD_URLS` names no server.
    pub fn from_env() -> Option<Debuginfod> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let urls: Vec<String> = var("DEBUGINFOD_URLS")?
            .split_whitespace()
            .filter(|u| u.starts_with("http://") || u.starts_with("https://"))
            .map(|u| u.trim_end_matches('/').to_owned())
            .collect();
        if urls.is_empty() {
            return None;
        }
        let cache = var("DEBUGINFOD_CACHE_PATH")
            .map(PathBuf::from)
            .or_else(|| var("XDG_CACHE_HOME").map(|c| Path::new(&c).join("debuginfod_client")))
            .or_else(|| var("HOME").map(|h| Path::new(&h).join(".cache/debuginfod_client")))?;
        let timeout =
            var("DEBUGINFOD_TIMEOUT").and_then(|t| t.trim().parse().ok()).unwrap_or(DEFAULT_TIMEOUT_S);
        let max_bytes = var("DEBUGINFOD_MAXSIZE").and_then(|m| m.trim().parse().ok()).filter(|&m| m > 0);
        Some(Debuginfod::new(urls, cache, Duration::from_secs(timeout.max(1)), max_bytes))
    }

    /// The client of this process's environment, made once.
    pub fn shared() -> Option<&'static Debuginfod> {
        static SHARED: OnceLock<Option<Debuginfod>> = OnceLock::new();
        SHARED.get_or_init(Debuginfod::from_env).as_ref()
    }

    /// The servers asked, for messages.
    pub fn urls(&self) -> &[String] {
        &self.urls
    }

    /// The debug file of the build id `hex` (lower-case hexadecimal): from the cache, else
    /// from the first server that has it.
    pub fn debuginfo(&self, hex: &str) -> Lookup {
        if hex.len() < 2 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Lookup::Missing;
        }
        let kept = self.cache.join(hex).join("debuginfo");
        if let Ok(data) = fs::read(&kept)
            && !data.is_empty()
        {
            return Lookup::Cached(data);
        }
        let mut first_error = None;
        for (url, unreachable) in self.urls.iter().zip(&self.unreachable) {
            if unreachable.load(Ordering::Relaxed) {
                first_error.get_or_insert(format!("{url}: not asked again after it could not be reached"));
                continue;
            }
            match self.download(&format!("{url}/buildid/{hex}/debuginfo"), &kept, unreachable) {
                Ok(Some(data)) => return Lookup::Downloaded(data),
                Ok(None) => {}
                Err(e) => {
                    first_error.get_or_insert(format!("{url}: {e}"));
                }
            }
        }
        first_error.map_or(Lookup::Missing, Lookup::Failed)
    }

    /// One server's answer, written to `kept` through a temporary file; `None` when it does
    /// not have it. A server that gives no answer at all is marked `unreachable`.
    fn download(&self, url: &str, kept: &Path, unreachable: &AtomicBool) -> io::Result<Option<Vec<u8>>> {
        let dir = kept.parent().ok_or_else(|| io::Error::other("no cache directory"))?;
        fs::create_dir_all(dir)?;
        let part = tempfile::Builder::new().prefix(".debuginfo.coldstart.").tempfile_in(dir)?;
        let status = self.fetch(url, part.path()).inspect_err(|e| {
            if e.kind() != io::ErrorKind::FileTooLarge {
                unreachable.store(true, Ordering::Relaxed);
            }
        })?;
        match status {
            200 => {}
            404 | 410 => return Ok(None),
            status => return Err(io::Error::other(format!("HTTP status {status}"))),
        }
        let data = fs::read(part.path())?;
        if !data.starts_with(b"\x7fELF") {
            return Err(io::Error::other("the answer is not an ELF file"));
        }
        part.persist(kept).map_err(|e| e.error)?;
        Ok(Some(data))
    }

    /// `GET url` into `into` with curl: the HTTP status, or why there was no answer.
    fn fetch(&self, url: &str, into: &Path) -> io::Result<u16> {
        let mut curl = Command::new("curl");
        curl.args(["--silent", "--show-error", "--location", "--write-out", "%{http_code}"])
            .args(["--user-agent", concat!("coldstart/", env!("CARGO_PKG_VERSION"))])
            .arg("--connect-timeout")
            .arg(CONNECT_TIMEOUT.as_secs().to_string())
            .arg("--max-time")
            .arg(self.timeout.as_secs().max(1).to_string())
            .arg("--output")
            .arg(into);
        if let Some(max) = self.max_bytes {
            curl.arg("--max-filesize").arg(max.to_string());
        }
        let out = curl.arg(url).stdin(Stdio::null()).output().map_err(|e| {
            io::Error::other(format!(
                "curl could not be run ({e}); debuginfod lookups need it (Debian: apt install curl)"
            ))
        })?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let said = said.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("").trim();
            if out.status.code() == Some(63) {
                return Err(io::Error::new(
                    io::ErrorKind::FileTooLarge,
                    format!("larger than DEBUGINFOD_MAXSIZE ({said})"),
                ));
            }
            return Err(io::Error::other(if said.is_empty() {
                format!("curl failed ({})", out.status)
            } else {
                said.to_owned()
            }));
        }
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|_| io::Error::other("curl gave no HTTP status"))
    }
}
