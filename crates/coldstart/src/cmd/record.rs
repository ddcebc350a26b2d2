//! `coldstart record`: records a command's cold (or warm) start as root into a
//! trace file, prints a short summary and the next command to run, and exits with
//! the command's own status.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;

use coldstart_analyze::Analysis;
use coldstart_analyze::units::{bytes, count, percent, plural, secs};
use coldstart_record::{RecordConfig, Recorded, Summary};
use coldstart_report::text::other_work;

use crate::cmd::launch_args::{LaunchArgs, reached_by};
use crate::cmd::values;

/// Record every page, block request, process, milestone and CPU stack of a command's start (as root).
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart record -- python3 -c 'import pandas'
  sudo coldstart record --cold -o gimp.coldstart -- gimp
  sudo coldstart record --until mark:ready --timeout 60 -- ./server
  sudo coldstart record --until idle:800 --system -- systemctl start myservice
  sudo coldstart record --cold --until wm --until window:mate-panel -- dbus-run-session mate-session
  sudo coldstart record --also Xvfb --also dbus-daemon --until window:mate-panel -- mate-session
  sudo coldstart record --no-cpu-samples -- gimp      # without CPU stack samples (on by default, 1 kHz)
  sudo coldstart record --slow-syscalls 5 -- gimp     # file-system calls of 5 ms or more (default 1 ms)
  sudo coldstart record --syscalls -- gimp            # every system call that matters, fast ones too
  sudo coldstart record --boot --until unit:multi-user.target   # what `coldstart boot enable` runs
  sudo DEBUGINFOD_URLS=https://debuginfod.debian.net coldstart record -- gnome-software   # names stripped frames

The command runs as the sudo invoker (unless --as-root) and gets COLDSTART_MARKS, the
marks file `coldstart mark NAME` appends to, and COLDSTART_TRACE_MARKER, the tracing
instance's trace_marker (writable by root). Ctrl-C reaches the command; the trace is
still written. If the recorder is killed, `coldstart recover` rebuilds a partial trace.
Stack frames of stripped files are named from their debug files (under /usr/lib/debug, or,
with DEBUGINFOD_URLS set, from those debuginfod servers by build id, cached as debuginfod-find
caches them) after the recording.
Then: coldstart report FILE")]
pub struct Args {
    /// The trace file to write [default: <command>.coldstart here, never overwriting: <command>-2.coldstart …].
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Record every process on the machine, not only the command's tree.
    #[arg(long)]
    pub system: bool,
    /// Record the boot, without a command: the whole system from now until --until
    /// [default: unit:multi-user.target] or --timeout [default: 120 s], into
    /// /var/log/coldstart/boot-YYYYMMDD-HHMMSS.coldstart (UTC), telling systemd READY=1 once
    /// tracing is on. Exits 0 when the conditions were met, 1 when not. See `coldstart boot`.
    #[arg(long, conflicts_with_all = ["command", "also", "cold", "as_root"])]
    pub boot: bool,
    /// PID 1 is `coldstart boot init`, which execs systemd once tracing is on: `unit:`
    /// conditions wait for the system manager to appear (set by the wrapper).
    #[arg(long, hide = true, requires = "boot")]
    pub under_init_wrapper: bool,
    /// Also tell this datagram socket (`@NAME`: abstract) `READY=1` once tracing is on
    /// (repeatable; the prefetch service starts its replay then).
    #[arg(long, hide = true, value_name = "SOCKET")]
    pub notify_socket: Vec<String>,
    /// Record this process too, outside the command's tree (repeatable): a pid, or a command
    /// name that names every process running under it when the command starts (an X server,
    /// a D-Bus daemon). Processes started later under that name are recorded only if they
    /// descend from one of those or from the command.
    #[arg(long, value_name = "PID|COMM")]
    pub also: Vec<coldstart_record::also::AlsoSpec>,
    #[command(flatten)]
    pub launch: LaunchArgs,
    /// Evict the page cache before the start (sync; drop_caches).
    #[arg(long)]
    pub cold: bool,
    /// Rate of the CPU, disk and process samples, per second (above 0, at most 1000) [default:
    /// 50; 25 with --system or --boot, where each sample reads /proc of every process: a 2-CPU
    /// boot's 240 processes at 50 Hz took half a CPU].
    #[arg(long, value_name = "HZ", value_parser = sample_rate)]
    pub sample_hz: Option<f64>,
    /// Do not sample the recorded threads' CPU stacks (perf, 1 kHz per CPU by default), nor
    /// take their kernel stacks when they go to sleep.
    #[arg(long)]
    pub no_cpu_samples: bool,
    /// Do not take the kernel stack of each recorded thread that goes to sleep (what names
    /// its waits: "pipe_read in read", "fuse_simple_request in newfstatat"); CPU samples stay.
    #[arg(long, conflicts_with = "no_cpu_samples")]
    pub no_offcpu_stacks: bool,
    /// Keep the kernel stack of a recorded thread's sleep only if it lasted this long (an
    /// uninterruptible sleep, an I/O wait, also if it lasted 0.1 ms): shorter sleeps are
    /// dropped in the kernel (eBPF) and cost no record. Milliseconds, or a duration with its
    /// unit; 0 keeps every sleep. Example: --off-cpu-min 0.5 (or 200us, or 0). Applies to a
    /// command's tree; with --system or --also every sleep is kept.
    #[arg(long, value_name = "MS", default_value = "1", value_parser = values::off_cpu_min, conflicts_with_all = ["no_cpu_samples", "no_offcpu_stacks"])]
    pub off_cpu_min: std::time::Duration,
    /// Copy the user stack at every CPU sample, also for programs whose frame-pointer chain
    /// earlier recordings found the same as DWARF unwinding of the copy (those are sampled
    /// without a copy by default, which costs them less; the verdicts are kept in
    /// ~/.cache/coldstart/frame-pointers.json).
    #[arg(long, conflicts_with = "no_cpu_samples")]
    pub copy_user_stacks: bool,
    /// Rate of the CPU stack samples, per second and CPU (1 to 10000) [default: 1000; 100 with
    /// --system or --boot, where every task of every CPU is sampled and each sample copies
    /// 16 KiB of user stack into the spool].
    #[arg(long, value_name = "HZ", value_parser = clap::value_parser!(u32).range(1..=10000), conflicts_with = "no_cpu_samples")]
    pub cpu_sample_hz: Option<u32>,
    /// Also record every system call that matters (opens, stats, reads, long waits; see
    /// `coldstart syscalls`), not only the slow ones of --slow-syscalls. Off by default: it slows
    /// a syscall-heavy start by some 7-11 % (BENCHMARKS.md).
    #[arg(long)]
    pub syscalls: bool,
    /// Record the file-system calls (opens, stats, accesses, readlink, getdents64, reads) that
    /// last this long, and every one of those but the reads that sleeps (a request to a FUSE or
    /// network filesystem), with their paths: filtered in the kernel, so fast calls cost next to
    /// nothing. Milliseconds, or a duration with its unit; `off` (or 0) records none. Example:
    /// --slow-syscalls 5 (or 500us, or off).
    #[arg(long, value_name = "MS|off", default_value = "1", value_parser = values::slow_call_threshold, conflicts_with = "syscalls")]
    pub slow_syscalls: values::SlowThreshold,
    /// Per-CPU tracing buffer, KiB.
    #[arg(long, value_name = "KIB", default_value_t = 8192)]
    pub buffer_kb: u32,
    /// Where the spool of the recording lives until the trace is written [default:
    /// /var/lib/coldstart/spool; /run/coldstart/spool with --boot].
    #[arg(long, value_name = "DIR")]
    pub spool_dir: Option<PathBuf>,
    /// Leave parts of the recorder out, to measure what each costs (bench/recorder-cost.sh):
    /// a comma-separated list of fanotify, page-access, scheduler, sampler. The trace lacks
    /// their data and says so.
    #[arg(long, hide = true, value_name = "PART,…", default_value = "")]
    pub without: coldstart_record::parts::Without,
    /// The command and its arguments.
    #[arg(last = true, required_unless_present = "boot", value_name = "CMD")]
    pub command: Vec<OsString>,
}

fn sample_rate(text: &str) -> Result<f64, String> {
    let hz = values::positive_number(text)?;
    if hz <= 1000.0 { Ok(hz) } else { Err("at most 1000 per second".to_owned()) }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let (command, until, timeout, spool_root) = if args.boot {
        let until = crate::cmd::boot::boot_conditions(&args.launch.until)?;
        if let Some(unit) = until.iter().find(|u| matches!(u, coldstart_launch::Until::Unit(_)))
            && coldstart_launch::Manager::system().is_none()
            && !args.under_init_wrapper
        {
            anyhow::bail!(
                "--until {unit}: PID 1 is not systemd here, so no unit will become active: use mark:NAME, idle or a window"
            );
        }
        let me = std::env::current_exe().context("cannot find the running coldstart binary")?;
        (
            vec![me.into_os_string(), "boot".into(), "hold".into()],
            until,
            Some(args.launch.timeout.unwrap_or(crate::cmd::boot::DEFAULT_TIMEOUT)),
            args.spool_dir.unwrap_or_else(|| coldstart_record::boot::BOOT_SPOOL_ROOT.into()),
        )
    } else {
        (
            args.command,
            args.launch.until,
            args.launch.timeout,
            args.spool_dir.unwrap_or_else(|| coldstart_record::DEFAULT_SPOOL_ROOT.into()),
        )
    };
    let config = RecordConfig {
        command,
        output: args.output,
        system: args.system || args.boot,
        boot: args.boot,
        system_manager_later: args.under_init_wrapper,
        notify_sockets: args.notify_socket,
        also: args.also,
        until,
        timeout,
        cold: args.cold,
        as_root: args.launch.as_root || args.boot,
        sample_hz: args.sample_hz.unwrap_or(if args.system || args.boot { 25.0 } else { 50.0 }),
        cpu_samples: (!args.no_cpu_samples).then(|| coldstart_record::capture::perf::PerfOptions {
            hz: args.cpu_sample_hz.unwrap_or(match args.system || args.boot {
                true => coldstart_record::capture::perf::SYSTEM_DEFAULT_HZ,
                false => coldstart_record::capture::perf::DEFAULT_HZ,
            }),
            off_cpu: !args.no_offcpu_stacks,
            frame_pointers: !args.copy_user_stacks,
            off_cpu_min_ns: u64::try_from(args.off_cpu_min.as_nanos()).unwrap_or(u64::MAX),
            ..Default::default()
        }),
        syscalls: args.syscalls,
        slow_syscalls: args.slow_syscalls.0,
        buffer_kb: args.buffer_kb,
        spool_root,
        without: args.without,
        ..RecordConfig::default()
    };
    let recorded = coldstart_record::record(&config)?;
    print_recorded(&recorded, !args.boot);
    eprintln!("next: coldstart report {}", recorded.path.display());
    if args.boot {
        return Ok(if recorded.unmet.is_empty() { ExitCode::SUCCESS } else { ExitCode::from(1) });
    }
    Ok(ExitCode::from(recorded.exit_code.clamp(0, 255) as u8))
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// The summary lines shared by `record` and `recover`, on stderr (stdout is the command's):
/// from the trace just written, read back and analysed, so they name the same figures as
/// `coldstart report`; from the recorder's own counts if it cannot be read. Returns the
/// command's exit status when the summary said it.
pub fn print_summary(s: &Summary, trace: &Path) -> Option<i32> {
    match coldstart_trace::Trace::read(trace) {
        Ok(t) => {
            if let Some(before) = crate::cmd::boot::before_recording_text(&t.meta.before_recording) {
                eprintln!("  before      recording: {before}");
            }
            let a = coldstart_analyze::analyze(&t);
            eprint!("{}", summary_text(&a));
            a.overview.exit.map(|e| e.status)
        }
        Err(_) => {
            print_counts(s);
            None
        }
    }
}

/// The record summary of a trace: what was recorded, what other processes did
/// meanwhile (and what it means for the times), the diskstats cross-check, the losses.
pub fn summary_text(a: &Analysis) -> String {
    let o = &a.overview;
    let mut out = String::new();
    let mut line = |label: &str, text: String| out.push_str(&format!("  {label:<11} {text}\n"));
    line("duration", secs(a.trace.duration_ns));
    line("processes", format!("{} in scope", count(o.processes_in_scope)));
    line(
        "read",
        format!(
            "{} read from disk (of {} opened or read), {} into the page cache",
            plural(o.files_read, "file"),
            count(o.files_in_trace),
            bytes(o.bytes_read)
        ),
    );
    if let Some(u) = &a.page_use {
        let page = |n: u64| bytes(n.saturating_mul(u64::from(a.trace.page_size)));
        line(
            "page use",
            format!(
                "{} asked for (reads, faults); {} read ahead and never asked for",
                page(u.asked_pages),
                page(u.unused_pages)
            ),
        );
    }
    let others = other_work(a);
    line(if others.busy { "BUSY" } else { "others" }, others.what);
    if let Some(advice) = others.advice {
        line("", advice);
    }
    for d in &a.disks {
        let stats = d.diskstats_read_bytes.map_or_else(
            || "no /proc/diskstats figure".to_owned(),
            |b| {
                format!(
                    "{} by /proc/diskstats ({} accounted for)",
                    bytes(b),
                    percent(d.traced_read_bytes as f64, b as f64)
                )
            },
        );
        line(
            &format!("disk {}", d.name),
            format!("{} read by recorded requests (every process's), {stats}", bytes(d.traced_read_bytes)),
        );
    }
    if let Some(p) = &a.cpu_profile {
        let hottest: Vec<String> = p
            .functions
            .iter()
            .take(3)
            .map(|f| format!("{} {}", f.name, percent(f.self_samples as f64, p.samples as f64)))
            .collect();
        let mut text = if hottest.is_empty() {
            format!("{} stack samples before ready", count(p.samples))
        } else {
            format!("{} stack samples before ready, most in {}", count(p.samples), hottest.join(", "))
        };
        if let Some(s) = &p.tree.subtree {
            let of = match p.tree.scope {
                coldstart_analyze::TreeScope::CriticalPath => "of the critical path's",
                coldstart_analyze::TreeScope::Start => "of them",
            };
            text += &format!(
                "; {} {of} under {} ({})",
                percent(s.samples as f64, p.tree.samples as f64),
                s.name,
                s.library
            );
        }
        line("CPU", text);
    }
    if !a.syscall_waits.is_empty() {
        let most: Vec<String> =
            a.syscall_waits.iter().take(3).map(|w| format!("{} {}", w.waited_in, secs(w.ns))).collect();
        line("waits", format!("off the CPU before ready, most in {}", most.join(", ")));
    }
    if let Some(exit) = &a.overview.exit {
        // `exit        status 143: ended by coldstart's SIGTERM …`: the report's words.
        line("exit", exit.text.strip_prefix("exit ").unwrap_or(&exit.text).to_owned());
    }
    let lost: Vec<_> = a.losses.iter().filter(|l| l.count > 0).collect();
    if lost.is_empty() {
        line("lost", "nothing (0 overruns, 0 dropped events, 0 unresolved inodes)".to_owned());
    }
    for l in lost {
        line("LOST", format!("{} {} ({})", count(l.count), l.what, l.source));
    }
    out
}

/// The recorder's own counts, when the trace it wrote cannot be read back.
fn print_counts(s: &Summary) {
    eprintln!("  duration    {:.3} s", s.duration_ns as f64 / 1e9);
    eprintln!("  processes   {}", s.processes);
    eprintln!("  files read  {} ({} into the page cache)", s.files, mib(s.page_fill_bytes));
    let page = |n: u64| n * s.page_size;
    if s.access_rows > 0 {
        eprintln!(
            "  accessed    {} of pages asked for (reads, faults, fault-around; {} ranges)",
            mib(page(s.usage.accessed_pages)),
            s.access_rows
        );
    }
    if s.usage.readahead_pages > 0 {
        eprintln!(
            "  readahead   {} read ahead, {} of it never accessed",
            mib(page(s.usage.readahead_pages)),
            mib(page(s.usage.readahead_unused_pages))
        );
    }
    for c in &s.cross_checks {
        let share = if c.diskstats_read_bytes > 0 {
            format!("{:.1}%", 100.0 * c.recorded_read_bytes as f64 / c.diskstats_read_bytes as f64)
        } else {
            "n/a".into()
        };
        eprintln!(
            "  disk {:<7} {} read by recorded requests, {} by /proc/diskstats ({share} accounted for)",
            c.disk,
            mib(c.recorded_read_bytes),
            mib(c.diskstats_read_bytes)
        );
    }
    if s.lost.is_empty() {
        eprintln!("  lost        nothing (0 overruns, 0 dropped events, 0 unresolved inodes)");
    }
    for l in &s.lost {
        eprintln!("  LOST        {} {} ({})", l.count, l.what, l.source);
    }
}

/// What a recording did: leftovers of killed recorders dealt with, the file, the summary,
/// and the command's exit status if there was a command (a boot has none).
pub fn print_recorded(r: &Recorded, with_exit_status: bool) {
    for name in &r.removed_stale_instances {
        eprintln!("coldstart: removed the stale tracing instance {name} of a killed recorder");
    }
    for e in &r.recover_errors {
        eprintln!("coldstart: warning: could not rebuild the spool of a killed recorder: {e}");
    }
    for (path, _) in &r.recovered {
        eprintln!("coldstart: recovered a partial trace of a killed recorder: {}", path.display());
    }
    eprintln!("coldstart: recorded {}", r.path.display());
    for m in &r.milestones {
        eprintln!("  milestone   {:.3} s {}{}", m.t_ns as f64 / 1e9, m.name, reached_by(m.pid, m.tid));
    }
    if let Some(ready) = &r.ready {
        eprintln!(
            "  ready       {:.3} s ({}){}",
            ready.t_ns as f64 / 1e9,
            ready.reason,
            reached_by(ready.pid, ready.tid)
        );
    }
    for unmet in &r.unmet {
        eprintln!("  not met     {unmet}");
    }
    let said_exit = print_summary(&r.summary, &r.path);
    if with_exit_status {
        // The command's exit status is the summary's (as the report says it); coldstart record's
        // own is that status, or 0 when the command was still running when the start was ready.
        let why = if r.ready.is_some() && r.unmet.is_empty() {
            "the start was ready"
        } else {
            "the command's status"
        };
        match said_exit {
            Some(status) if status == r.exit_code => {}
            Some(_) => eprintln!("  record      exits with status {} ({why})", r.exit_code),
            None => eprintln!("  exit status {}", r.exit_code),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::summary_text;
    use crate::cmd::test_traces::{OTHER_COMM, busy, fixture};

    #[test]
    fn the_summary_of_a_quiet_start() {
        let text = summary_text(&coldstart_analyze::analyze(&fixture("python")));
        assert!(!text.contains("BUSY"), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_summary_says_what_other_processes_did_and_what_to_do() {
        let text = summary_text(&coldstart_analyze::analyze(&busy(fixture("python"))));
        assert!(text.contains(&format!("{OTHER_COMM}/4242 64.0 MiB")), "{text}");
        assert!(text.contains("record again on a quiet machine, or with --system"), "{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn the_summary_names_the_call_that_holds_most_of_the_critical_paths_cpu() {
        use coldstart_analyze::{CpuProfile, CpuSubtree, CpuTree, TreeScope};
        let mut a = coldstart_analyze::analyze(&fixture("python"));
        let subtree = CpuSubtree {
            name: "xb_builder_compile".into(),
            library: "libxmlb.so.2".into(),
            samples: 600,
            self_samples: 10,
            called_from: vec![],
            callees: vec![],
            allocator_samples: 200,
            allocator: vec![],
            kernel_samples: 0,
            kernel: vec![],
        };
        a.cpu_profile = Some(CpuProfile {
            samples: 1200,
            sample_hz: Some(1000.0),
            functions: vec![],
            libraries: vec![],
            phases: vec![],
            critical_path: vec![],
            tree: CpuTree {
                scope: TreeScope::CriticalPath,
                samples: 800,
                inclusive: vec![],
                subtree: Some(subtree),
            },
        });
        let text = summary_text(&a);
        assert!(
            text.contains("1,200 stack samples before ready; 75.0 % of the critical path's under xb_builder_compile (libxmlb.so.2)"),
            "{text}"
        );
    }
}
