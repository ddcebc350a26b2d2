//! The fuzzing harness behind `tests/*.rs`: each target replays its real seeds and
//! its checked-in corpus of past failures, then runs proptest mutations of them for a
//! bounded time, every input on a watchdog thread so that a panic or a hang fails the
//! test, with the failing input shrunk and saved to `corpus/<target>/`.
//!
//! `COLDSTART_FUZZ_SECONDS` sets the time per target (default 10), and
//! `COLDSTART_FUZZ_INPUT_SECONDS` the time one input may take before it counts as a
//! hang (default 2). TESTING.md says how to run a target longer.

pub mod mutate;

use std::backtrace::Backtrace;
use std::cell::RefCell;
use std::fmt;
use std::io::{Read, Write};
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Once};
use std::thread;
use std::time::{Duration, Instant};

use proptest::strategy::{BoxedStrategy, Strategy, ValueTree};
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};

/// The inputs mutations start from: the real seeds, then the corpus.
pub type Bases = Arc<[Vec<u8>]>;

/// What a target does with one input; it must return (errors are fine) and never panic.
pub type Check = Arc<dyn Fn(&[u8]) + Send + Sync>;

const WORKER_NAME: &str = "fuzz-input";
const DEFAULT_SECONDS: f64 = 10.0;
const DEFAULT_INPUT_SECONDS: f64 = 2.0;
const MAX_SHRINK_TIME: Duration = Duration::from_secs(120);

/// Where the checked-in seeds and corpus live.
pub fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's root (the real trace fixtures are under `tests/fixtures`).
pub fn repo_dir() -> PathBuf {
    crate_dir().join("../..")
}

fn seconds_from_env(name: &str, default: f64) -> Duration {
    let value = std::env::var(name).ok().and_then(|v| v.trim().parse::<f64>().ok());
    Duration::try_from_secs_f64(value.unwrap_or(default)).unwrap_or(Duration::from_secs_f64(default))
}

/// Why one input failed.
#[derive(Debug)]
enum Failure {
    Panic { message: String, backtrace: Arc<Backtrace> },
    Hang(Duration),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Panic { message, .. } => write!(f, "panics: {message}"),
            Failure::Hang(limit) => write!(f, "hangs: still running after {:.1} s", limit.as_secs_f64()),
        }
    }
}

thread_local! {
    static LAST_PANIC: RefCell<Option<(String, Backtrace)>> = const { RefCell::new(None) };
}

/// Panics on the worker thread are expected findings: keep their message for the
/// report instead of printing each one (shrinking makes hundreds).
fn quiet_worker_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if thread::current().name() == Some(WORKER_NAME) {
                let panic = (info.to_string(), Backtrace::force_capture());
                LAST_PANIC.with(|last| *last.borrow_mut() = Some(panic));
            } else {
                previous(info);
            }
        }));
    });
}

type Reply = std::result::Result<(), (String, Backtrace)>;

/// A thread that runs the check on one input at a time; after a hang it is abandoned
/// and a fresh one takes over.
struct Worker {
    check: Check,
    limit: Duration,
    inputs: SyncSender<Vec<u8>>,
    replies: Receiver<Reply>,
}

impl Worker {
    fn start(check: Check, limit: Duration) -> Worker {
        let (inputs, replies) = Worker::spawn(check.clone());
        Worker { check, limit, inputs, replies }
    }

    fn spawn(check: Check) -> (SyncSender<Vec<u8>>, Receiver<Reply>) {
        let (input_tx, input_rx) = mpsc::sync_channel::<Vec<u8>>(1);
        let (reply_tx, reply_rx) = mpsc::sync_channel(1);
        thread::Builder::new()
            .name(WORKER_NAME.into())
            .stack_size(16 << 20)
            .spawn(move || {
                for input in input_rx {
                    let outcome = panic::catch_unwind(AssertUnwindSafe(|| check(&input))).map_err(|_| {
                        let last = LAST_PANIC.with(|last| last.borrow_mut().take());
                        last.unwrap_or_else(|| (String::new(), Backtrace::disabled()))
                    });
                    if reply_tx.send(outcome).is_err() {
                        return;
                    }
                }
            })
            .expect("cannot start the fuzzing worker thread");
        (input_tx, reply_rx)
    }

    fn run(&mut self, input: &[u8]) -> Result<(), Failure> {
        self.inputs.send(input.to_vec()).expect("the fuzzing worker thread is gone");
        match self.replies.recv_timeout(self.limit) {
            Ok(outcome) => outcome
                .map_err(|(message, backtrace)| Failure::Panic { message, backtrace: Arc::new(backtrace) }),
            Err(RecvTimeoutError::Timeout) => {
                (self.inputs, self.replies) = Worker::spawn(self.check.clone());
                Err(Failure::Hang(self.limit))
            }
            Err(RecvTimeoutError::Disconnected) => Err(Failure::Panic {
                message: "the worker thread died".into(),
                backtrace: Arc::new(Backtrace::disabled()),
            }),
        }
    }
}

/// Corpus files larger than this are kept gzip-compressed (traces are mostly empty pages).
const COMPRESS_ABOVE: usize = 64 << 10;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    encoder.write_all(bytes).and_then(|()| encoder.finish()).expect("gzip into memory")
}

fn gunzip(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).ok()?;
    Some(out)
}

/// The frames of a panic's backtrace in coldstart's code, where the fix goes.
fn our_frames(failure: &Failure) -> String {
    let Failure::Panic { backtrace, .. } = failure else { return String::new() };
    let text = backtrace.to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let ours = |line: &&str| line.contains("coldstart_") && !line.contains("coldstart_fuzz");
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| ours(l)).take(8) {
        out.push_str(line);
        out.push('\n');
        if let Some(at) = lines.get(i + 1).filter(|l| l.trim_start().starts_with("at ")) {
            out.push_str(at);
            out.push('\n');
        }
    }
    out
}

/// The checked-in inputs of a target (past failures, `.gz` when large), by file name.
pub fn corpus(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = crate_dir().join("corpus").join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Vec::new() };
    let mut files: Vec<(String, Vec<u8>)> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let bytes = std::fs::read(e.path()).ok()?;
            let bytes = if name.ends_with(".gz") { gunzip(&bytes)? } else { bytes };
            Some((name, bytes))
        })
        .collect();
    files.sort();
    files
}

/// Saves a failing input to the target's corpus, named after its content.
fn save(target: &str, kind: &str, input: &[u8]) -> PathBuf {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    input.hash(&mut hasher);
    let dir = crate_dir().join("corpus").join(target);
    let name = format!("{kind}-{:016x}", hasher.finish());
    let (path, bytes) = if input.len() > COMPRESS_ABOVE {
        (dir.join(name + ".gz"), gzip(input))
    } else {
        (dir.join(name), input.to_vec())
    };
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        eprintln!("fuzz {target}: cannot save the failing input to {}: {e}", path.display());
    }
    path
}

/// What one run of a target did.
#[derive(Clone, Copy, Debug)]
pub struct Stats {
    pub replayed: usize,
    pub executions: u64,
    pub elapsed: Duration,
}

/// Runs target `name`: replays `seeds` and the corpus, then the inputs of
/// `mutations(bases)` until the time is up. Panics (failing the test) on the first
/// input that panics or hangs, after saving it (shrunk, for a panic) to the corpus.
pub fn fuzz(
    name: &str,
    seeds: Vec<Vec<u8>>,
    mutations: impl FnOnce(Bases) -> BoxedStrategy<Vec<u8>>,
    check: impl Fn(&[u8]) + Send + Sync + 'static,
) -> Stats {
    quiet_worker_panics();
    let budget = seconds_from_env("COLDSTART_FUZZ_SECONDS", DEFAULT_SECONDS);
    let limit = seconds_from_env("COLDSTART_FUZZ_INPUT_SECONDS", DEFAULT_INPUT_SECONDS);
    let mut worker = Worker::start(Arc::new(check), limit);
    let started = Instant::now();

    let corpus = corpus(name);
    let named_seeds = seeds.iter().enumerate().map(|(i, s)| (format!("seed {i}"), s));
    let named_corpus = corpus.iter().map(|(file, bytes)| (format!("corpus/{name}/{file}"), bytes));
    let mut replayed = 0;
    for (label, input) in named_seeds.chain(named_corpus) {
        if let Err(failure) = worker.run(input) {
            panic!("fuzz {name}: {label} {failure}\n{}", our_frames(&failure));
        }
        replayed += 1;
    }

    let bases: Bases = seeds.into_iter().chain(corpus.into_iter().map(|(_, bytes)| bytes)).collect();
    let strategy = mutations(bases);
    let mut runner = TestRunner::new(Config {
        failure_persistence: None,
        max_shrink_time: MAX_SHRINK_TIME.as_millis() as u32,
        ..Config::default()
    });
    let mut executions = replayed as u64;
    while started.elapsed() < budget {
        let tree = strategy.new_tree(&mut runner).expect("the mutation strategy generates inputs");
        let input = tree.current();
        executions += 1;
        match worker.run(&input) {
            Ok(()) => {}
            Err(hang @ Failure::Hang(_)) => {
                let saved = save(name, "hang", &input);
                panic!("fuzz {name}: input {} {hang} (saved; replayed first from now on)", saved.display());
            }
            Err(first @ Failure::Panic { .. }) => {
                let worker = RefCell::new(worker);
                let shrunk = runner.run_one(tree, |input| {
                    worker
                        .borrow_mut()
                        .run(&input)
                        .map_err(|failure| TestCaseError::fail(failure.to_string()))
                });
                let minimal = match shrunk {
                    Err(TestError::Fail(_, minimal)) => minimal,
                    _ => input,
                };
                let failure = worker.borrow_mut().run(&minimal).err().unwrap_or(first);
                let saved = save(name, "crash", &minimal);
                panic!(
                    "fuzz {name}: input {} ({} bytes, shrunk) {failure}\n{}(saved; replayed first from now on)",
                    saved.display(),
                    minimal.len(),
                    our_frames(&failure)
                );
            }
        }
    }
    let stats = Stats { replayed, executions, elapsed: started.elapsed() };
    eprintln!(
        "fuzz {name}: {} executions in {:.1} s ({} seeds and corpus inputs replayed first); no panic, no hang",
        stats.executions,
        stats.elapsed.as_secs_f64(),
        stats.replayed
    );
    stats
}
