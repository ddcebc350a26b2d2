//! `coldstart storage`: emulated slow disks (docs/storage.md). `show` prints a profile's
//! resolved parameters; `mount` makes a device of that profile, mounts it, runs a
//! command or waits for Ctrl-C, and tears everything down; `run` puts a program's files on
//! such a device at their own paths (as `bench --storage` does) and runs a command there.

use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread;

use anyhow::{Context, bail};
use coldstart_analyze::doctor::{DiskParams, parse_disk_size};
use coldstart_storage::{EmulatedDisk, StagedFiles};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Emulated slow disks: a laptop hard disk, an SD card, a cloud volume, as block devices.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
PROFILE is a class (hdd, hdd7200, ssd, nvme, sd, cloud, snapshot: the doctor's --disk models),
a custom:KEY=VALUE,… spec, or a TOML file with the same keys (docs/storage.md). snapshot is a
cloud volume restored from a snapshot: the first read of each 512 KiB chunk waits for a fetch.

Examples:
  coldstart storage show hdd
  coldstart storage show ./usb-stick.toml
  coldstart storage show custom:base=snapshot,fetch_latency=20ms,fetch_depth=8
  sudo coldstart storage mount sd --size 2GiB --at /mnt/sd              # until Ctrl-C
  sudo coldstart storage mount hdd --size 4GiB --at /mnt/hdd -- sh -c 'cp -a /usr/lib/python3* /mnt/hdd'
  # an image's first boot on a volume restored from its snapshot, its block plan fetched first:
  sudo coldstart storage mount snapshot --image root.ext4 -- sh -c 'D=$COLDSTART_STORAGE_DEVICE; \
      coldstart prefetch run boot.bplan --device $D & mount $D /mnt/root && systemd-nspawn -b -D /mnt/root'
  # record a start with the files it read (app.coldstart) on an emulated laptop disk:
  sudo coldstart storage run hdd --trace app.coldstart -- coldstart record --cold -o hdd.coldstart -- app
  # what the start still reads there after its plan was replayed ahead:
  sudo coldstart storage run hdd --trace app.coldstart --prefetch app.plan -- sh -c \
      'echo 3 > /proc/sys/vm/drop_caches && coldstart prefetch run \"$COLDSTART_PLAN\" && coldstart record -o ahead.coldstart -- app'
  sudo coldstart storage slowfs /opt/app --at /mnt/app --delay 2ms          # like NFS with noac
  sudo coldstart storage slowfs ./plug-ins --at /mnt/p --delay 2ms -- coldstart record -- ./scan /mnt/p

Limits: the device has no cache of its own, does not reorder requests (no NCQ), and the
loop device and FUSE add some CPU per request; docs/storage.md has the rest.")]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Print a profile's parameters, with their units and where each came from.
    Show {
        /// hdd, hdd7200, ssd, nvme, sd, cloud, snapshot, custom:KEY=VALUE,… or a profile file.
        profile: String,
    },
    /// Make an emulated device, mount it, run COMMAND (or wait for Ctrl-C), tear it down. Needs root.
    Mount {
        /// hdd, hdd7200, ssd, nvme, sd, cloud, snapshot, custom:KEY=VALUE,… or a profile file.
        profile: String,
        /// The device's size, e.g. 4GiB (memory is spent only on what is written).
        #[arg(long, default_value = "1GiB", conflicts_with = "image")]
        size: String,
        /// Put a copy of this ext2/3/4 filesystem image on the device (its size) instead of a
        /// new ext4: on `snapshot`, the volume restored from the image's snapshot.
        #[arg(long, value_name = "FILE")]
        image: Option<PathBuf>,
        /// An existing directory to mount the device's ext4 at. Without it the device is not
        /// mounted: COMMAND mounts it when it wants (after starting a block plan's replay, as
        /// a boot's early hook would); whatever is still mounted from it is unmounted at the end.
        #[arg(long, value_name = "DIR")]
        at: Option<PathBuf>,
        /// The command to run while the device is mounted; it finds the device (e.g.
        /// /dev/loop3) in $COLDSTART_STORAGE_DEVICE.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
    /// Put files on an emulated device at their own paths and run COMMAND there. Needs root.
    ///
    /// The files (those a trace names, or a list) are copied onto a device of PROFILE in
    /// their order on the real disk and bind-mounted over their paths in a private mount
    /// namespace, so COMMAND and its children read them from the device and nothing else
    /// on the machine sees it; directories stay on the real disk. Undone when COMMAND ends.
    #[command(group = clap::ArgGroup::new("files_source").required(true).args(["trace", "files"]))]
    Run {
        /// hdd, hdd7200, ssd, nvme, sd, cloud, snapshot, custom:KEY=VALUE,… or a profile file.
        profile: String,
        /// Move the regular files this trace names (as `coldstart record` wrote it).
        #[arg(long, value_name = "TRACE")]
        trace: Option<PathBuf>,
        /// Move the files of this list (one absolute path a line, # comments).
        #[arg(long, value_name = "LIST")]
        files: Option<PathBuf>,
        /// A prefetch plan to point at the copies, as `bench --storage` does: COMMAND finds
        /// the moved plan's path in $COLDSTART_PLAN (e.g. `coldstart prefetch run "$COLDSTART_PLAN"`).
        #[arg(long, value_name = "PLAN")]
        prefetch: Option<PathBuf>,
        /// The command to run with the files on the device.
        #[arg(last = true, value_name = "COMMAND", required = true)]
        command: Vec<String>,
    },
    /// Serve a directory through FUSE with a fixed delay per request, no attribute caching
    /// (a slow network filesystem), run COMMAND (or wait for Ctrl-C), unmount. Needs root.
    Slowfs {
        /// The directory to serve (read-only).
        source: PathBuf,
        /// An existing, empty directory to mount it at.
        #[arg(long, value_name = "DIR")]
        at: PathBuf,
        /// The delay of each request: 2ms, 500us, 0.01s.
        #[arg(long, value_name = "D", default_value = "2ms", value_parser = super::values::duration)]
        delay: std::time::Duration,
        /// The command to run while it is mounted.
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    match args.action {
        Action::Show { profile } => {
            let params = coldstart_storage::resolve(&profile)?;
            print!("{}", describe(&params));
            Ok(ExitCode::SUCCESS)
        }
        Action::Mount { profile, size, image, at, command } => {
            mount(&profile, &size, image.as_deref(), at, command)
        }
        Action::Run { profile, trace, files, prefetch, command } => {
            run_on(&profile, trace, files, prefetch.as_deref(), &command)
        }
        Action::Slowfs { source, at, delay, command } => slowfs(&source, &at, delay, command),
    }
}

fn describe(p: &DiskParams) -> String {
    let ms = |ns: i64| format!("{:.3} ms", ns as f64 / 1e6);
    let mib = |b: u64| format!("{b} bytes ({:.2} MiB)", b as f64 / 1048576.0);
    let rows = [
        ("request_ns", ms(p.request_ns)),
        ("seek_ns", ms(p.seek_ns)),
        ("near_seek_ns", ms(p.near_seek_ns)),
        ("rotation_ns", ms(p.rotation_ns)),
        ("far_bytes", mib(p.far_bytes)),
        (
            "seek_span_bytes",
            if p.seek_span_bytes == 0 { "0 (two-step seeks)".into() } else { mib(p.seek_span_bytes) },
        ),
        ("bandwidth_bytes_per_s", format!("{:.1} MB/s", p.bandwidth_bytes_per_s / 1e6)),
        ("queue_depth", format!("{} requests", p.queue_depth)),
        ("max_request_bytes", mib(p.max_request_bytes)),
        (
            "iops_limit",
            if p.iops_limit > 0.0 { format!("{} I/Os per s", p.iops_limit) } else { "0 (none)".into() },
        ),
        (
            "iops_unit_bytes",
            if p.iops_unit_bytes == 0 { "0 (a request is one I/O)".into() } else { mib(p.iops_unit_bytes) },
        ),
        (
            "read_ahead_bytes",
            match p.read_ahead_bytes {
                Some(b) => format!("{b} bytes ({} KiB; the device's read_ahead_kb)", b / 1024),
                None => "unknown".into(),
            },
        ),
    ];
    let fetch_rows = [
        ("fetch_chunk_bytes", format!("{} bytes ({} KiB)", p.fetch_chunk_bytes, p.fetch_chunk_bytes / 1024)),
        ("fetch_latency_ns", ms(p.fetch_latency_ns)),
        ("fetch_bandwidth_bytes_per_s", format!("{:.1} MB/s", p.fetch_bandwidth_bytes_per_s / 1e6)),
        ("fetch_depth", format!("{} fetches in flight", p.fetch_depth)),
    ];
    let fetch_rows = if p.is_lazy() { &fetch_rows[..] } else { &fetch_rows[..0] };
    let mut out = format!("{} (class {})\n", p.description, p.class.as_str());
    for (param, value) in rows.iter().chain(fetch_rows) {
        out.push_str(&format!("  {param:<22} {value:<32} {}\n", p.source_of(param)));
    }
    if !p.is_lazy() {
        out.push_str(&format!(
            "  {:<22} {:<32} the volume holds its data\n",
            "fetch_chunk_bytes", "0 (not fetched)"
        ));
    }
    let elevator = coldstart_storage::disk::elevator_for(p.class);
    out.push_str(&format!("  {:<22} {elevator:<32} the kernel's default for such a disk\n", "elevator"));
    out
}

/// What an emulated device served: requests, bytes, busy time, and a lazily fetched
/// volume's fetches.
pub fn served(stats: &coldstart_storage::Stats, params: &DiskParams) -> String {
    let mut line = format!(
        "served {} requests ({:.1} MiB), the model kept the device busy {:.3} s",
        stats.requests,
        stats.bytes as f64 / 1048576.0,
        stats.busy_ns as f64 / 1e9
    );
    if params.is_lazy() {
        line.push_str(&format!(
            "; {} chunk{} of {} KiB fetched ({:.1} MiB), at most {} of {} fetches in flight at once",
            stats.fetches,
            if stats.fetches == 1 { "" } else { "s" },
            params.fetch_chunk_bytes / 1024,
            (stats.fetches * params.fetch_chunk_bytes) as f64 / 1048576.0,
            stats.most_fetches_in_flight,
            params.fetch_depth
        ));
    }
    line
}

/// Runs `command` (or waits for a signal) while something stays mounted; the status to
/// exit with and the signal that ended it, if one did.
/// Runs `command` (see [`run_command`]), or without one waits for Ctrl-C, saying it will `then`.
fn run_while_mounted(
    mut signals: Signals,
    command: &[String],
    env: &[(&str, OsString)],
    then: &str,
) -> anyhow::Result<(ExitCode, Option<i32>)> {
    if command.is_empty() {
        eprintln!("coldstart storage: press Ctrl-C to {then}");
        return Ok((ExitCode::SUCCESS, signals.forever().next()));
    }
    run_command(command, env, signals)
}

fn slowfs(
    source: &std::path::Path,
    at: &std::path::Path,
    delay: std::time::Duration,
    command: Vec<String>,
) -> anyhow::Result<ExitCode> {
    if !at.is_dir() {
        bail!("--at {}: not a directory", at.display());
    }
    if !coldstart_bench::evict::is_root() {
        bail!("coldstart storage slowfs needs root (a FUSE mount others may read)");
    }
    let signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    let mount = coldstart_storage::SlowMount::mount(source, at, delay)?;
    eprintln!(
        "coldstart storage: {} served at {} with {:?} per request (fuse, no attribute caching)",
        source.display(),
        at.display(),
        delay
    );
    let (status, signal) = run_while_mounted(signals, &command, &[], "unmount")?;
    let stats = mount.stats();
    eprintln!(
        "coldstart storage: served {} requests, {:.3} s of delay in all",
        stats.requests,
        stats.delay_ns as f64 / 1e9
    );
    drop(mount);
    Ok(signal.map_or(status, |s| ExitCode::from(128 + s as u8)))
}

fn mount(
    profile: &str,
    size: &str,
    image: Option<&Path>,
    at: Option<PathBuf>,
    command: Vec<String>,
) -> anyhow::Result<ExitCode> {
    let params = coldstart_storage::resolve(profile)?;
    let Some(size_bytes) = parse_disk_size(size) else {
        bail!("--size {size}: expected a size like 4GiB or 512MiB");
    };
    if let Some(image) = image.filter(|i| !i.is_file()) {
        bail!("--image {}: not a file", image.display());
    }
    if let Some(at) = at.as_ref().filter(|at| !at.is_dir()) {
        bail!("--at {}: not a directory", at.display());
    }
    if !coldstart_bench::evict::is_root() {
        bail!("coldstart storage mount needs root (loop devices, FUSE and mounts)");
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    let mut disk = match image {
        Some(image) => EmulatedDisk::from_image(params, image)?,
        None => EmulatedDisk::create(params, size_bytes).context("making the emulated device")?,
    };
    if let Some(signal) = signals.pending().next() {
        drop(disk);
        return Ok(ExitCode::from(128 + signal as u8));
    }
    if let Some(at) = &at {
        disk.mount_at(at)?;
    }
    eprintln!(
        "coldstart storage: {} ({}) on {}, {} bytes{}, {}",
        profile,
        disk.params().description,
        disk.device().display(),
        disk.size_bytes(),
        image.map(|i| format!(" from {}", i.display())).unwrap_or_default(),
        at.map_or("not mounted".to_owned(), |at| format!("mounted at {}", at.display()))
    );
    let device = [("COLDSTART_STORAGE_DEVICE", disk.device().as_os_str().to_owned())];
    let (status, signal) = run_while_mounted(signals, &command, &device, "unmount and remove the device")?;
    eprintln!("coldstart storage: {}", served(&disk.stats(), &disk.params()));
    drop(disk);
    Ok(signal.map_or(status, |s| ExitCode::from(128 + s as u8)))
}

fn run_on(
    profile: &str,
    trace: Option<PathBuf>,
    files: Option<PathBuf>,
    prefetch: Option<&Path>,
    command: &[String],
) -> anyhow::Result<ExitCode> {
    let params = coldstart_storage::resolve(profile)?;
    if let Some(plan) = prefetch {
        coldstart_prefetch::Plan::load(plan)?;
    }
    let set = match (trace, files) {
        (Some(trace), _) => coldstart_bench::fileset::read_only_from_trace(&trace)?,
        (None, Some(list)) => coldstart_bench::fileset::from_list(&list)?,
        (None, None) => bail!("storage run: give --trace or --files"),
    };
    for note in &set.notes {
        eprintln!("coldstart storage: {note}");
    }
    let paths: Vec<PathBuf> = set.paths.into_iter().filter(|p| p.is_absolute() && p.is_file()).collect();
    if paths.is_empty() {
        bail!("storage run: {} names no file that exists here", set.source);
    }
    if !coldstart_bench::evict::is_root() {
        bail!("coldstart storage run needs root (loop devices, FUSE, mounts and a private mount namespace)");
    }
    let mut signals = Signals::new([SIGINT, SIGTERM, SIGHUP]).context("installing signal handlers")?;
    let originals = crate::cmd::bench_storage::identities(&paths);
    let staged = StagedFiles::stage(params, &paths).context("putting the files on the emulated device")?;
    let moved_plan = match prefetch {
        Some(plan) => {
            let out = staged.disk().run_dir().join("plan-on-device.json");
            let (moved, total) =
                crate::cmd::bench_storage::point_plan_at_copies(plan, &paths, &originals, &staged, &out)?;
            eprintln!(
                "coldstart storage: the plan's {moved} of {total} files on the device are in $COLDSTART_PLAN ({})",
                out.display()
            );
            Some(out)
        }
        None => None,
    };
    let report = &staged.report;
    eprintln!(
        "coldstart storage: {} files ({:.1} MiB) of {} on an emulated {} ({}, {}), in their order on the real disk{}",
        report.files,
        report.bytes as f64 / 1048576.0,
        set.source,
        profile,
        staged.disk().params().description,
        staged.disk().device().display(),
        match report.skipped.len() {
            0 => String::new(),
            n => format!("; {n} could not be copied and stay on the real disk"),
        }
    );
    let (status, signal) = match signals.pending().next() {
        Some(signal) => (ExitCode::SUCCESS, Some(signal)),
        None => {
            let env: Vec<(&str, OsString)> =
                moved_plan.iter().map(|plan| ("COLDSTART_PLAN", plan.as_os_str().to_owned())).collect();
            run_command(command, &env, signals)?
        }
    };
    if let Some(plan) = &moved_plan {
        let _ = std::fs::remove_file(plan);
    }
    eprintln!("coldstart storage: {}", served(&staged.disk().stats(), &staged.disk().params()));
    drop(staged);
    Ok(signal.map_or(status, |s| ExitCode::from(128 + s as u8)))
}

/// Runs `command` to its end, ending it when one of `signals` arrives; its exit status
/// (as a shell gives it) and the signal that ended it, if one did.
fn run_command(
    command: &[String],
    env: &[(&str, OsString)],
    mut signals: Signals,
) -> anyhow::Result<(ExitCode, Option<i32>)> {
    let handle = signals.handle();
    let mut child = std::process::Command::new(&command[0]);
    child.args(&command[1..]).envs(env.iter().map(|(k, v)| (k, v)));
    let mut child = child.spawn().with_context(|| format!("cannot run {:?}", command[0]))?;
    let pid = child.id();
    let forwarder = thread::spawn(move || {
        let first = signals.forever().next();
        if first.is_some() {
            let _ = coldstart_storage::terminate(pid);
        }
        first
    });
    let exit = child.wait().context("waiting for the command")?;
    handle.close();
    let signal = forwarder.join().ok().flatten();
    let code = exit.code().or_else(|| exit.signal().map(|s| 128 + s)).map_or(1, |c| c.clamp(0, 255) as u8);
    Ok((ExitCode::from(code), signal))
}
