//! The doctor's thresholds, in one place (documented in docs/doctor.md), and the
//! user's languages that decide which translations a start needs.

use coldstart_trace::Nanos;

/// The languages the user of the program reads, and where that came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Languages {
    /// Locale names or language tags as the environment writes them (`de_DE.UTF-8`,
    /// `pt_BR`, `fr`, `C`); several for a `LANGUAGE`-style priority list.
    pub tags: Vec<String>,
    /// Where they came from, said in the report, e.g. `--lang de_DE` or
    /// `LANG=de_DE.UTF-8 of the user running coldstart doctor`.
    pub source: String,
}

impl Default for Languages {
    fn default() -> Languages {
        Languages { tags: vec!["C".to_owned()], source: "default (no language given)".to_owned() }
    }
}

/// Thresholds of the findings. A finding is reported only when its estimated gain is at
/// least `min_gain_ns` and at least `min_gain_share` of the time to ready.
#[derive(Clone, Debug, PartialEq)]
pub struct DoctorConfig {
    pub min_gain_ns: Nanos,
    pub min_gain_share: f64,
    /// Files listed in a finding's evidence (and intervals); the rest are counted.
    pub max_listed: usize,

    /// many_small_files: a file this size or smaller is small…
    pub small_file_max_bytes: u64,
    /// …and a directory tree needs at least this many of them.
    pub small_files_min: u64,
    /// A child directory holding this share of its parent's small files stands for it.
    pub small_files_dominant_share: f64,
    /// Directories too general to merge files from; their subdirectories are looked at instead.
    pub generic_dirs: Vec<String>,

    /// file_in_pieces: a file at least this large…
    pub large_file_min_bytes: u64,
    /// …read in at least this many separate reads.
    pub large_file_min_reads: u64,

    /// heavy_helper: a helper whose time on the critical path is more than this share of
    /// the time to ready is the main work, not a helper.
    pub helper_max_share: f64,

    /// read_then_parse: a file at least this large, read at least this share entirely…
    pub parse_min_file_bytes: u64,
    pub parse_min_read_share: f64,
    /// …then at least this much CPU by the same thread before it reads another file.
    pub parse_min_cpu_ns: Nanos,

    /// idle_waits: sleeps on the critical path shorter than this are not counted.
    pub idle_min_wait_ns: Nanos,

    /// scattered_layout: the measured cost of a far request over a near one must be at least this.
    pub seek_min_penalty_ns: Nanos,

    /// not_io_bound: at most this share of the critical path waiting for I/O…
    pub not_io_bound_max_io_share: f64,
    /// …and at least this share running or waiting for a CPU.
    pub not_io_bound_min_cpu_share: f64,

    /// cpu_subtree: at least this many CPU samples on the critical path.
    pub cpu_subtree_min_samples: u64,

    /// disk_bound: the I/O-wait phases hold at least this share of the time to ready…
    pub disk_bound_min_wait_share: f64,
    /// …with the disk busy at least this share of them…
    pub disk_bound_min_busy: f64,
    /// …and it is seeking when it reads at less than this share of its best rate.
    pub disk_bound_seek_rate_share: f64,

    /// many_short_processes: at least this many processes started and gone before ready.
    pub many_short_processes_min: u64,

    /// lazy_volume: the chunk a volume fetches on its first read…
    pub lazy_volume_chunk_bytes: u64,
    /// …at least this many chunks first read before ready…
    pub lazy_volume_min_chunks: u64,
    /// …a first read's median at least this long…
    pub lazy_volume_min_fetch_ns: Nanos,
    /// …and its first quartile this many times a later read's median;
    pub lazy_volume_min_ratio: f64,
    /// fetches a block plan's replay is taken to keep in flight.
    pub lazy_volume_replay_depth: u64,

    /// other_languages: the user's languages.
    pub languages: Languages,
    /// The trace file as the user named it, for the command lines of `verify`.
    pub trace_name: String,
}

impl Default for DoctorConfig {
    fn default() -> DoctorConfig {
        DoctorConfig {
            min_gain_ns: 10_000_000,
            min_gain_share: 0.01,
            max_listed: 12,
            small_file_max_bytes: 64 * 1024,
            small_files_min: 20,
            small_files_dominant_share: 0.8,
            generic_dirs: [
                "/",
                "/usr",
                "/usr/lib",
                "/usr/lib64",
                "/usr/lib32",
                "/usr/lib/x86_64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu",
                "/usr/share",
                "/usr/local",
                "/usr/local/lib",
                "/usr/local/share",
                "/lib",
                "/lib64",
                "/etc",
                "/var",
                "/var/lib",
                "/var/cache",
                "/opt",
                "/home",
                "/root",
                "/tmp",
                "/run",
                "/proc",
                "/sys",
                "/dev",
            ]
            .iter()
            .map(|s| (*s).to_owned())
            .collect(),
            large_file_min_bytes: 1 << 20,
            large_file_min_reads: 8,
            helper_max_share: 0.5,
            parse_min_file_bytes: 16 * 1024,
            parse_min_read_share: 0.9,
            parse_min_cpu_ns: 20_000_000,
            idle_min_wait_ns: 2_000_000,
            seek_min_penalty_ns: 1_000_000,
            not_io_bound_max_io_share: 0.10,
            not_io_bound_min_cpu_share: 0.5,
            cpu_subtree_min_samples: 20,
            disk_bound_min_wait_share: 0.25,
            disk_bound_min_busy: 0.5,
            disk_bound_seek_rate_share: 0.5,
            many_short_processes_min: 1000,
            lazy_volume_chunk_bytes: 512 * 1024,
            lazy_volume_min_chunks: 20,
            lazy_volume_min_fetch_ns: 20_000_000,
            lazy_volume_min_ratio: 4.0,
            lazy_volume_replay_depth: 16,
            languages: Languages::default(),
            trace_name: "app.coldstart".to_owned(),
        }
    }
}

impl DoctorConfig {
    /// The smallest gain worth reporting for a start of `time_to_ready_ns`.
    pub fn min_gain(&self, time_to_ready_ns: Nanos) -> Nanos {
        self.min_gain_ns.max((time_to_ready_ns as f64 * self.min_gain_share) as Nanos)
    }
}
