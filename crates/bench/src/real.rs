//! The [`Executor`] that really runs commands: evicts for cold runs, starts the
//! command with the launch crate, waits for readiness, ends its tree, and reads
//! the counters around it.

use std::sync::Arc;
use std::time::Duration;

use coldstart_analyze::units;
use coldstart_launch::{Command, Input, Interrupts, Output, PausedChild, Until, WaitOptions};
use coldstart_prefetch::plan::{PlanFile, PlanFileKind};
use coldstart_prefetch::{Plan, Replay, ReplayReport};

use crate::config::{BenchCommand, BenchConfig, Cache, Evict, FileSource, Hook};
use crate::counters::{BlkioCgroup, DelayAccounting, cpu_ticks, disk_read_bytes};
use crate::error::{BenchError, Result};
use crate::evict::{self, FILES_MODE_LIMITS};
use crate::executor::{Executor, HookOutcome, Preparation, Run, Sources};
use crate::fileset::{self, FileSet};
use crate::outside::{self, ProcessTable};

pub struct RealExecutor {
    config: BenchConfig,
    filesets: Vec<Option<FileSet>>,
    cgroup: Option<BlkioCgroup>,
    delay_accounting: Option<DelayAccounting>,
    interrupts: Interrupts,
    /// The `--prefetch` plans, in the order of `config.prefetch`.
    plans: Vec<Arc<Plan>>,
    /// Per plan: how its last replay alongside shared the disk (paced or by priority) and why.
    alongside_how: Vec<Option<(String, String)>>,
}

impl RealExecutor {
    pub fn new(config: &BenchConfig) -> Result<RealExecutor> {
        if config.modes.cold && config.evict.contains(&Evict::System) && !evict::is_root() {
            return Err(BenchError::SystemEvictNeedsRoot);
        }
        Ok(RealExecutor {
            config: config.clone(),
            filesets: vec![None; config.commands.len()],
            cgroup: if evict::is_root() { BlkioCgroup::create() } else { None },
            delay_accounting: DelayAccounting::enable(),
            interrupts: Interrupts::catch()?,
            plans: config
                .prefetch
                .iter()
                .map(|p| Plan::load(&p.plan).map(Arc::new))
                .collect::<Result<_, _>>()?,
            alongside_how: vec![None; config.prefetch.len()],
        })
    }

    /// The plan and replay options of a run with prefetch.
    fn prefetch(&self, cache: Cache) -> Result<(Arc<Plan>, &coldstart_prefetch::ReplayOptions)> {
        let plan = cache.plan().ok_or(BenchError::NoPrefetchPlan)?;
        match (self.plans.get(plan), self.config.prefetch.get(plan)) {
            (Some(plan), Some(setup)) => Ok((Arc::clone(plan), &setup.options)),
            _ => Err(BenchError::NoPrefetchPlan),
        }
    }

    fn file_set(&self, command: &BenchCommand) -> Result<Option<FileSet>> {
        let needed = self.config.modes.cold && self.config.evict.contains(&Evict::Files);
        match &self.config.files {
            FileSource::Trace(path) => fileset::from_trace(path).map(Some),
            FileSource::List(path) => fileset::from_list(path).map(Some),
            FileSource::Learn if needed => crate::hooks::learn_with_hooks(command, &self.config).map(Some),
            FileSource::Learn => Ok(None),
        }
    }

    /// Empties the cache for a cold run; returns what stayed of the file set. A run after a
    /// `--prepare` syncs first, so that `files` can evict what the prepare wrote (dirty
    /// pages stay cached).
    fn evict(&self, index: usize, command: &BenchCommand, cache: Cache) -> Result<Option<u64>> {
        let set = self.filesets[index].as_ref();
        let Some(method) = cache.evict() else { return Ok(None) };
        match method {
            Evict::System => evict::drop_caches()?,
            Evict::Files => {
                if command.prepare.is_some() {
                    crate::sys::sync();
                }
                if let Some(set) = set {
                    set.evict();
                }
            }
        }
        if let Some(after) = &self.config.after_eviction {
            (after.0)();
        }
        Ok(set.and_then(FileSet::residual_bytes))
    }

    fn launch_command(&self, command: &BenchCommand) -> Command {
        let mut launch = Command::new(command.argv.clone());
        let shown = if self.config.show_output { Output::Inherit } else { Output::Null };
        let watched = Output::Watch { echo: self.config.show_output };
        let output = if self.config.until.iter().any(Until::watches_output) { watched } else { shown };
        launch.run_as(self.config.run_as.clone()).stdin(Input::Null).stdout(output).stderr(output);
        launch
    }

    fn read_bytes_now(&self) -> Option<u64> {
        match &self.cgroup {
            Some(cgroup) => cgroup.read_bytes().ok(),
            None => disk_read_bytes(),
        }
    }
}

impl Executor for RealExecutor {
    fn prepare(&mut self, index: usize, command: &BenchCommand) -> Result<Preparation> {
        let set = self.file_set(command)?;
        let preparation = match &set {
            Some(s) => Preparation {
                files: s.paths.len(),
                file_bytes: s.bytes,
                file_source: Some(s.source.clone()),
                notes: s.notes.clone(),
            },
            None => Preparation::default(),
        };
        self.filesets[index] = set;
        Ok(preparation)
    }

    fn run(&mut self, index: usize, command: &BenchCommand, cache: Cache) -> Result<Run> {
        let residual_bytes = self.evict(index, command, cache)?;
        let ahead: Option<ReplayReport> = match cache {
            Cache::Ahead(..) => {
                let (plan, options) = self.prefetch(cache)?;
                Some(coldstart_prefetch::replay(plan, options)?)
            }
            _ => None,
        };
        let processes_before = ProcessTable::read();
        let bytes_before = self.read_bytes_now();
        let cpu_before = cpu_ticks();

        let paused = PausedChild::spawn(&self.launch_command(command))?;
        if let Some(cgroup) = &self.cgroup {
            paused.join_cgroup(cgroup.path())?;
        }
        let alongside = match cache {
            Cache::Alongside(..) => {
                let (plan, options) = self.prefetch(cache)?;
                Some(Replay::start(plan, options)?)
            }
            _ => None,
        };
        let mut running = paused.resume()?;
        let options = WaitOptions {
            timeout: Some(self.config.timeout),
            sample_io_wait: self.delay_accounting.is_some(),
            ..WaitOptions::default()
        };
        let outcome = running.wait_all(&self.config.until, &options);
        let done_before_ready = alongside.as_ref().map(Replay::is_finished);
        if let Some(replay) = &alongside {
            replay.cancel();
        }
        let finished = running.finish(&self.config.ending);
        let replayed = ahead.or_else(|| alongside.map(Replay::join));
        if let (Cache::Alongside(_, plan), Some(choice)) =
            (cache, replayed.as_ref().and_then(|r| r.alongside.as_ref()))
            && let Some(slot) = self.alongside_how.get_mut(plan)
        {
            *slot = Some(choice.how());
        }
        let finished = finished?;
        let outcome = outcome?;

        let read_bytes = bytes_before.zip(self.read_bytes_now()).map(|(a, b)| b.saturating_sub(a));
        let usage = finished.usage.unwrap_or_default();
        let tree_cpu = (usage.user + usage.system).as_secs_f64();
        let other_cpu = cpu_before.zip(cpu_ticks()).and_then(|((b0, t0), (b1, t1))| {
            let total = t1.saturating_sub(t0) as f64;
            let tree_ticks = tree_cpu * procfs::ticks_per_second() as f64;
            (total > 0.0).then(|| ((b1.saturating_sub(b0) as f64 - tree_ticks) / total).clamp(0.0, 1.0))
        });
        let outside = outside::outside_work(
            &processes_before,
            &ProcessTable::read(),
            std::process::id() as i32,
            procfs::ticks_per_second(),
        );
        Ok(Run {
            time: outcome.time_to_ready().as_secs_f64(),
            ready: outcome.reason,
            met: outcome.met,
            exit_code: outcome.exit_status,
            user: usage.user.as_secs_f64(),
            system: usage.system.as_secs_f64(),
            major_faults: usage.major_faults,
            read_bytes,
            io_wait: usage.io_wait.map(|d: Duration| d.as_secs_f64()),
            other_cpu,
            outside,
            residual_bytes,
            interrupted: outcome.signal.is_some(),
            prefetch_time: replayed.as_ref().map(|r| r.elapsed_s),
            prefetch_fetched_bytes: replayed.as_ref().map(|r| r.fetched.bytes + r.unknown_residency.bytes),
            prefetch_done_before_ready: done_before_ready,
        })
    }

    fn hook(&mut self, hook: Hook, _index: usize, command: &BenchCommand) -> Result<HookOutcome> {
        match command.hook(hook) {
            Some(line) => crate::hooks::run_shell(line, &self.config),
            None => Ok(HookOutcome::Done),
        }
    }

    fn interrupted(&mut self) -> bool {
        !self.interrupts.take().is_empty()
    }

    fn sources(&self) -> Sources {
        let read_bytes = if self.cgroup.is_some() {
            "a v1 blkio cgroup holding the command's tree (bytes its processes read, all devices)"
        } else {
            "/proc/diskstats, sectors read by all disks during the run (whole machine: other processes' reads count too)"
        };
        let io_wait = match &self.delay_accounting {
            Some(d) if d.enabled_by_us() => {
                "delayacct_blkio_ticks of the tree's threads sampled every 50 ms, a lower bound (kernel.task_delayacct \
                 was turned on for this benchmark and turned off again after it)"
            }
            Some(_) => "delayacct_blkio_ticks of the tree's threads sampled every 50 ms, a lower bound",
            None => "not measured: kernel.task_delayacct is off and only root may turn it on",
        };
        let mut notes = Vec::new();
        if self.config.modes.cold && self.config.evict.contains(&Evict::Files) {
            notes.push(FILES_MODE_LIMITS.to_owned());
        }
        notes.extend(prefetch_note(&self.config.prefetch));
        let names = self.config.prefetch.iter().map(|setup| setup.name.as_str());
        notes.extend(names.zip(&self.plans).filter_map(|(name, plan)| unreadable_metadata_note(name, plan)));
        let names = self.config.prefetch.iter().map(|setup| setup.name.as_str());
        notes.extend(names.zip(&self.alongside_how).filter_map(|(name, how)| {
            how.as_ref().map(|(mode, devices)| {
                format!("prefetch: plan `{name}` alongside: {mode}; its disks: {devices}")
            })
        }));
        Sources { read_bytes: read_bytes.into(), io_wait: io_wait.into(), notes }
    }
}

/// How the plans are replayed, and what that means for the counters.
fn prefetch_note(plans: &[crate::config::PrefetchSetup]) -> Option<String> {
    let described: Vec<String> = plans
        .iter()
        .map(|p| {
            let name = if plans.len() > 1 || p.named { format!("`{}`, ", p.name) } else { String::new() };
            format!(
                "{} ({name}{}, {} threads ahead, {} alongside)",
                p.plan.display(),
                p.options.method.name(),
                p.options.depth,
                p.options.alongside_depth
            )
        })
        .collect();
    let (first, more) = described.split_first()?;
    let list = if more.is_empty() {
        format!("the plan {first} is")
    } else {
        format!("the plans {} are", described.join(", "))
    };
    Some(format!(
        "prefetch: {list} replayed by the benchmark process, outside the command's tree: its reads are not \
         counted in the command's bytes read; `ahead` runs replay the whole plan after eviction and start the \
         command when it is done (the replay is not in the time), `alongside` runs start both together and stop \
         the replay when the command is ready"
    ))
}

/// What the replays of plan `name` leave out when its filesystem metadata (ranges of a
/// block device) cannot be read here: a VM's disk or kernel lockdown refuses even root.
fn unreadable_metadata_note(name: &str, plan: &Plan) -> Option<String> {
    let refused: Vec<&PlanFile> = plan
        .files
        .iter()
        .filter(|f| f.kind == PlanFileKind::BlockDevice)
        .filter(|f| {
            std::fs::File::open(&f.path).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
        })
        .collect();
    metadata_note(name, &refused)
}

/// The note for the metadata of plan `name` on `refused`, block devices the replay may not open.
fn metadata_note(name: &str, refused: &[&PlanFile]) -> Option<String> {
    let ranges: usize = refused.iter().map(|f| f.ranges.len()).sum();
    let bytes: u64 = refused.iter().flat_map(|f| &f.ranges).map(|r| r.length).sum();
    let devices: Vec<&str> = refused.iter().map(|f| f.path.as_str()).collect();
    (ranges > 0).then(|| {
        format!(
            "prefetch: {} of plan `{name}`'s filesystem metadata ({ranges} ranges of {}) is not replayed: this machine \
             does not let even root open that disk device (a VM's disk or kernel lockdown), so the command reads \
             those directory and inode blocks itself, about one request per range, as when it was recorded; \
             here, --stat-entries warms what the filesystem reaches; elsewhere, replay as root where root may \
             read the disk",
            units::bytes(bytes),
            devices.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_prefetch::plan::PlanRange;
    use coldstart_trace::Dev;

    fn device(path: &str, ranges: &[u64]) -> PlanFile {
        PlanFile {
            path: path.into(),
            kind: PlanFileKind::BlockDevice,
            dev: Dev::new(254, 0),
            ino: 0,
            size: None,
            mtime_ns: None,
            first_need_ns: 0,
            ranges: ranges
                .iter()
                .map(|&length| PlanRange { offset: 0, length, first_need_ns: 0, disk: None, physical: None })
                .collect(),
        }
    }

    #[test]
    fn unreadable_metadata_is_said_with_its_size_device_and_what_to_do() {
        let vda = device("/dev/vda", &[4096, 4096, 1 << 20]);
        let note = metadata_note("first", &[&vda]).expect("a note");
        assert!(
            note.contains("1.0 MiB of plan `first`'s filesystem metadata (3 ranges of /dev/vda)"),
            "{note}"
        );
        assert!(note.contains("--stat-entries"), "{note}");
        assert_eq!(metadata_note("first", &[]), None);
    }
}
