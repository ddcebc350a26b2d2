//! The disk model behind every gain the doctor estimates and behind the what-if:
//! a request costs a fixed time, plus positioning (seek and rotation) unless it
//! continues the previous request, plus its bytes at the sequential bandwidth; a
//! device that serves `queue_depth` requests at once overlaps their fixed and
//! positioning costs; an IOPS-limited volume also counts each request in units of at most
//! `iops_unit_bytes`. The recorded disk's parameters are measured from the trace's block
//! requests where there are enough of them; the classes (hdd, hdd7200, ssd, nvme, sd, cloud, snapshot)
//! have documented defaults (docs/doctor.md), and `custom` takes any of them. The emulated
//! devices of `coldstart storage` (crates/storage) serve their requests by this same model.

use std::fmt;
use std::str::FromStr;

use coldstart_trace::{BlockOp, Nanos};
use serde::{Deserialize, Serialize};

use crate::analysis::DiskAnalysis;
use crate::units::{ByteSize, TimeSpan};

const SECTOR: i64 = 512;
/// Read requests this small measure the fixed cost of a request.
const SMALL_REQUEST_BYTES: u32 = 16 * 1024;
/// Read requests this large measure the bandwidth.
const LARGE_REQUEST_BYTES: u32 = 128 * 1024;
/// Requests this small (and no larger) are compared far against near to measure seeks.
const SEEK_PROBE_BYTES: u32 = 64 * 1024;
/// Samples needed before a measured figure replaces a default.
const MIN_SAMPLES: usize = 8;
/// Read requests needed before the largest of them is taken as the device's largest request.
const MIN_SIZE_SAMPLES: usize = 64;
/// How much larger than the requests' own latency (at least this many times, and by at least
/// this much) the request cost fitted to the recorded waits must be before it is taken for a
/// queue the block layer does not see.
const HIDDEN_QUEUE_MIN_FACTOR: Nanos = 4;
const HIDDEN_QUEUE_MIN_NS: Nanos = 2_000_000;
/// Requests (weighted) a device must have served in critical-path waits before its cost is fitted.
pub(crate) const HIDDEN_QUEUE_MIN_REQUESTS: f64 = 32.0;

/// A class of storage for the what-if, or the disk the trace was recorded on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiskClass {
    /// The recorded disk, measured from the trace's requests.
    Measured,
    /// A 5400 rpm laptop hard disk.
    Hdd,
    /// A 7200 rpm desktop hard disk.
    Hdd7200,
    /// A SATA solid-state disk.
    Ssd,
    /// An NVMe solid-state disk.
    Nvme,
    /// An SD card or eMMC.
    Sd,
    /// An IOPS-limited cloud volume.
    Cloud,
    /// A cloud volume restored from a snapshot: each chunk's first read fetches it from object storage.
    Snapshot,
    /// Parameters given by the user.
    Custom,
}

impl DiskClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DiskClass::Measured => "measured",
            DiskClass::Hdd => "hdd",
            DiskClass::Hdd7200 => "hdd7200",
            DiskClass::Ssd => "ssd",
            DiskClass::Nvme => "nvme",
            DiskClass::Sd => "sd",
            DiskClass::Cloud => "cloud",
            DiskClass::Snapshot => "snapshot",
            DiskClass::Custom => "custom",
        }
    }
}

/// Where one parameter's value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParamSource {
    /// The parameter's field name, e.g. `request_ns`.
    pub param: String,
    pub source: String,
}

/// The parameters of the disk model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DiskParams {
    pub class: DiskClass,
    pub description: String,
    /// Fixed cost of every request (command overhead; the read latency of flash).
    pub request_ns: Nanos,
    /// Positioning cost of a request farther than `far_bytes` from where the previous one ended
    /// (with a seek span: of a full stroke).
    pub seek_ns: Nanos,
    /// Positioning cost of a request nearer than that that does not continue the previous one
    /// (with a seek span: of a track-to-track seek).
    pub near_seek_ns: Nanos,
    /// Average rotational latency, paid by every request that does not continue the previous one.
    pub rotation_ns: Nanos,
    pub far_bytes: u64,
    /// When not 0, the seek grows with the distance instead of in two steps: from `near_seek_ns`
    /// to `seek_ns` as the square root of the distance over this span (the arm's full stroke).
    #[serde(default)]
    pub seek_span_bytes: u64,
    /// Sequential transfer rate.
    pub bandwidth_bytes_per_s: f64,
    /// Requests served at once: their fixed and positioning costs overlap.
    pub queue_depth: u32,
    /// A sequential read is split into requests of at most this size.
    pub max_request_bytes: u64,
    /// I/O operations per second the device allows, 0 for no limit.
    #[serde(default)]
    pub iops_limit: f64,
    /// A request counts as one I/O per this many bytes (rounded up) against `iops_limit`.
    #[serde(default)]
    pub iops_unit_bytes: u64,
    /// The device's read-ahead: how far the kernel reads past a miss in a file read in
    /// order (and around a fault), in bytes; `None` when unknown (a trace before format 4).
    #[serde(default)]
    pub read_ahead_bytes: Option<u64>,
    /// A lazily fetched volume (restored from a snapshot): the first read of each chunk of
    /// this many bytes (aligned on the volume) waits for the chunk's fetch from object
    /// storage; later reads cost the rest of the model. 0 for a volume that holds its data.
    #[serde(default)]
    pub fetch_chunk_bytes: u64,
    /// Time of one fetch before its first byte arrives.
    #[serde(default)]
    pub fetch_latency_ns: Nanos,
    /// Transfer rate of one fetch.
    #[serde(default)]
    pub fetch_bandwidth_bytes_per_s: f64,
    /// Fetches in flight at once; more wait for one to end.
    #[serde(default)]
    pub fetch_depth: u32,
    /// Where each value came from (measured, default of the class, given).
    pub sources: Vec<ParamSource>,
}

/// One request as the model sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestShape {
    pub bytes: u64,
    /// Start minus the end of the previous request, in bytes; `None` when unknown (costed as far).
    pub distance_bytes: Option<i64>,
}

impl DiskParams {
    /// The documented defaults of a class (`Measured` and `Custom` start from the SSD's).
    pub fn class_defaults(class: DiskClass) -> DiskParams {
        let mut p = DiskParams {
            class,
            description: String::new(),
            request_ns: 100_000,
            seek_ns: 0,
            near_seek_ns: 0,
            rotation_ns: 0,
            far_bytes: 1 << 20,
            seek_span_bytes: 0,
            bandwidth_bytes_per_s: 500e6,
            queue_depth: 8,
            max_request_bytes: 512 * 1024,
            iops_limit: 0.0,
            iops_unit_bytes: 0,
            read_ahead_bytes: Some(DEFAULT_READ_AHEAD_BYTES),
            fetch_chunk_bytes: 0,
            fetch_latency_ns: 0,
            fetch_bandwidth_bytes_per_s: 0.0,
            fetch_depth: 0,
            sources: Vec::new(),
        };
        let description = match class {
            DiskClass::Hdd => {
                // 5400 rpm: half a revolution is 30 s / 5400 = 5.56 ms.
                (p.seek_ns, p.near_seek_ns, p.rotation_ns) = (20_000_000, 1_000_000, 5_555_556);
                p.seek_span_bytes = 500_000_000_000;
                (p.bandwidth_bytes_per_s, p.queue_depth) = (80e6, 1);
                "5400 rpm laptop hard disk"
            }
            DiskClass::Hdd7200 => {
                (p.seek_ns, p.near_seek_ns, p.rotation_ns) = (8_000_000, 1_000_000, 4_170_000);
                (p.bandwidth_bytes_per_s, p.queue_depth) = (150e6, 1);
                "7200 rpm hard disk"
            }
            DiskClass::Nvme => {
                (p.request_ns, p.bandwidth_bytes_per_s, p.queue_depth) = (70_000, 3000e6, 32);
                "NVMe solid-state disk"
            }
            DiskClass::Sd => {
                (p.request_ns, p.bandwidth_bytes_per_s, p.queue_depth) = (1_000_000, 25e6, 1);
                "SD card or eMMC"
            }
            DiskClass::Cloud | DiskClass::Snapshot => {
                (p.request_ns, p.bandwidth_bytes_per_s, p.queue_depth) = (500_000, 125e6, 32);
                (p.iops_limit, p.iops_unit_bytes, p.max_request_bytes) = (3000.0, 256 * 1024, 256 * 1024);
                if class == DiskClass::Snapshot {
                    p.set_snapshot_fetches();
                    "cloud volume restored from a snapshot, fetched lazily"
                } else {
                    "IOPS-limited cloud volume"
                }
            }
            DiskClass::Ssd | DiskClass::Measured | DiskClass::Custom => "SATA solid-state disk",
        };
        p.description = description.to_owned();
        let source = match class {
            DiskClass::Snapshot => "default of the snapshot class (the cloud class's)".to_owned(),
            _ => format!("default of the {} class", class_name(class)),
        };
        for param in PARAMS {
            if p.source_of(param).is_empty() {
                p.set_source(param, &source);
            }
        }
        p
    }

    /// The `snapshot` class's fetches, each with where its figure came from (docs/storage.md).
    fn set_snapshot_fetches(&mut self) {
        self.fetch_chunk_bytes = 512 * 1024;
        self.fetch_latency_ns = 100_000_000;
        self.fetch_bandwidth_bytes_per_s = 300.0 * 1024.0 * 1024.0;
        self.fetch_depth = 20;
        for (param, source) in SNAPSHOT_SOURCES {
            self.set_source(param, source);
        }
    }

    /// Whether the first read of each chunk costs a fetch (a volume restored from a snapshot).
    pub fn is_lazy(&self) -> bool {
        self.fetch_chunk_bytes > 0
    }

    /// The time of one fetch: its latency, then a chunk at the fetch's bandwidth.
    pub fn fetch_ns(&self) -> Nanos {
        let transfer = self.fetch_chunk_bytes as f64 / self.fetch_bandwidth_bytes_per_s.max(1.0) * 1e9;
        self.fetch_latency_ns.saturating_add(transfer as Nanos)
    }

    /// The time `fetches` fetches asked for at once take, `fetch_depth` of them in flight.
    pub fn fetches_ns(&self, fetches: u64) -> Nanos {
        let rounds = fetches.div_ceil(u64::from(self.fetch_depth.max(1)));
        Nanos::try_from(rounds).unwrap_or(Nanos::MAX).saturating_mul(self.fetch_ns())
    }

    /// The chunks (their indexes on the volume) that `bytes` at byte `offset` touch; empty
    /// for a volume that is not fetched lazily, or no bytes.
    pub fn chunks_of(&self, offset: u64, bytes: u64) -> std::ops::Range<u64> {
        if !self.is_lazy() || bytes == 0 {
            return 0..0;
        }
        let chunk = self.fetch_chunk_bytes;
        offset / chunk..offset.saturating_add(bytes).div_ceil(chunk)
    }

    fn set_source(&mut self, param: &str, source: &str) {
        match self.sources.iter_mut().find(|s| s.param == param) {
            Some(s) => s.source = source.to_owned(),
            None => self.sources.push(ParamSource { param: param.to_owned(), source: source.to_owned() }),
        }
    }

    /// The source of one parameter (empty when unknown).
    pub fn source_of(&self, param: &str) -> &str {
        self.sources.iter().find(|s| s.param == param).map_or("", |s| s.source.as_str())
    }

    /// The positioning cost of a request at `distance_bytes` from the previous one.
    pub fn positioning_ns(&self, distance_bytes: Option<i64>) -> Nanos {
        if distance_bytes == Some(0) {
            return 0;
        }
        if self.seek_span_bytes > 0 {
            // Over distances spread evenly on the span, sqrt(distance / span) averages 2/3.
            let fraction = distance_bytes.map_or(2.0 / 3.0, |d| {
                (d.unsigned_abs().min(self.seek_span_bytes) as f64 / self.seek_span_bytes as f64).sqrt()
            });
            let stroke = (self.seek_ns - self.near_seek_ns).max(0) as f64;
            return self.near_seek_ns + (stroke * fraction).round() as Nanos + self.rotation_ns;
        }
        match distance_bytes {
            Some(d) if d.unsigned_abs() <= self.far_bytes => self.near_seek_ns + self.rotation_ns,
            _ => self.seek_ns + self.rotation_ns,
        }
    }

    /// The I/Os a request of `bytes` counts for against the IOPS limit.
    pub fn io_count(&self, bytes: u64) -> u64 {
        match self.iops_unit_bytes {
            0 => 1,
            unit => bytes.div_ceil(unit).max(1),
        }
    }

    /// The time the IOPS limit allows for `ios` I/Os (0 without a limit).
    pub fn iops_ns(&self, ios: u64) -> Nanos {
        if self.iops_limit > 0.0 { (ios as f64 / self.iops_limit * 1e9) as Nanos } else { 0 }
    }

    /// The time one request takes on an idle device: its fixed cost, positioning and transfer.
    pub fn service_ns(&self, request: RequestShape) -> Nanos {
        self.request_ns + self.positioning_ns(request.distance_bytes) + self.transfer_ns(request.bytes)
    }

    /// Time to transfer `bytes` at the sequential bandwidth.
    pub fn transfer_ns(&self, bytes: u64) -> Nanos {
        (bytes as f64 / self.bandwidth_bytes_per_s.max(1.0) * 1e9) as Nanos
    }

    /// Time to serve `requests`: fixed and positioning costs overlapped `queue_depth` at a
    /// time, transfers one after the other, and never faster than the IOPS limit allows.
    pub fn cost_ns(&self, requests: &[RequestShape]) -> Nanos {
        if requests.is_empty() {
            return 0;
        }
        let serial: Nanos = requests
            .iter()
            .map(|r| self.request_ns + self.positioning_ns(r.distance_bytes))
            .fold(0, Nanos::saturating_add);
        let transfer = self.transfer_ns(requests.iter().map(|r| r.bytes).fold(0, u64::saturating_add));
        let parallel = (self.queue_depth.max(1) as usize).min(requests.len()) as Nanos;
        let ios = requests.iter().map(|r| self.io_count(r.bytes)).sum();
        (serial / parallel + transfer).max(self.iops_ns(ios))
    }

    /// Time to read `bytes` in one sequential pass from one place of the disk: one
    /// positioning, then requests of `max_request_bytes`.
    pub fn sequential_read_ns(&self, bytes: u64) -> Nanos {
        if bytes == 0 {
            return 0;
        }
        // `cost_ns` of the n requests, worked out without listing them (n comes from a
        // trace's figures, and can be anything).
        let n = bytes.div_ceil(self.max_request_bytes.max(1));
        let first = self.request_ns.saturating_add(self.positioning_ns(None));
        let others = self.request_ns.saturating_add(self.positioning_ns(Some(0)));
        let serial =
            Nanos::try_from(n - 1).unwrap_or(Nanos::MAX).saturating_mul(others).saturating_add(first);
        let parallel = u64::from(self.queue_depth.max(1)).min(n) as Nanos;
        (serial / parallel).saturating_add(self.transfer_ns(bytes))
    }

    /// Measures the recorded disk from its read requests; parameters without enough
    /// requests to measure keep the defaults of the class the measured latency suggests.
    pub fn measure(disk: &DiskAnalysis) -> DiskParams {
        let reads: Vec<(u32, Nanos, Option<i64>)> = disk
            .requests
            .iter()
            .filter(|r| r.op == BlockOp::Read)
            .filter_map(|r| {
                let latency = r.complete_ns? - r.issue_ns?;
                (latency >= 0).then_some((r.bytes, latency, r.distance_sectors.map(|d| d * SECTOR)))
            })
            .collect();
        let mut small: Vec<Nanos> =
            reads.iter().filter(|r| r.0 <= SMALL_REQUEST_BYTES).map(|r| r.1).collect();
        let small_median = median(&mut small);
        let flash_like = match (small_median.filter(|_| small.len() >= MIN_SAMPLES), disk.rotational) {
            (Some(m), _) => m < 2_000_000,
            (None, Some(rotational)) => !rotational,
            (None, None) => true,
        };
        let base = if flash_like { DiskClass::Ssd } else { DiskClass::Hdd7200 };
        let mut p = DiskParams::class_defaults(base);
        p.class = DiskClass::Measured;
        p.description = format!("{} as recorded", disk.name);
        if let Some(m) = small_median.filter(|_| small.len() >= MIN_SAMPLES) {
            p.request_ns = m;
            p.set_source(
                "request_ns",
                &format!("median latency of {} read requests of at most 16 KiB", small.len()),
            );
        }
        let mut rates: Vec<Nanos> = reads
            .iter()
            .filter(|r| r.0 >= LARGE_REQUEST_BYTES)
            .map(|r| {
                let transfer = (r.1 - p.request_ns).max(1_000);
                (f64::from(r.0) / transfer as f64 * 1e9) as Nanos
            })
            .collect();
        if let Some(rate) = median(&mut rates).filter(|_| rates.len() >= MIN_SAMPLES) {
            p.bandwidth_bytes_per_s = rate as f64;
            p.set_source(
                "bandwidth_bytes_per_s",
                &format!(
                    "median of bytes / (latency - request_ns) over {} read requests of at least 128 KiB",
                    rates.len()
                ),
            );
        }
        let far_bytes = disk.seeks.threshold_bytes.max(1);
        p.far_bytes = far_bytes;
        let probe = reads.iter().filter(|r| r.0 <= SEEK_PROBE_BYTES);
        let (mut far, mut near): (Vec<Nanos>, Vec<Nanos>) = (Vec::new(), Vec::new());
        for r in probe {
            match r.2 {
                Some(d) if d.unsigned_abs() > far_bytes => far.push(r.1),
                Some(_) => near.push(r.1),
                None => {}
            }
        }
        if far.len() >= MIN_SAMPLES && near.len() >= MIN_SAMPLES {
            let (f, n) = (median(&mut far).unwrap_or(0), median(&mut near).unwrap_or(0));
            p.seek_ns = (f - n).max(0);
            p.near_seek_ns = 0;
            p.rotation_ns = 0;
            let source = format!(
                "median latency of {} far requests minus that of {} near ones (at most 64 KiB each)",
                far.len(),
                near.len()
            );
            p.set_source("seek_ns", &source);
            p.set_source("near_seek_ns", "included in seek_ns (measured)");
            p.set_source("rotation_ns", "included in seek_ns (measured)");
        }
        p.set_source("far_bytes", "the analysis's far-seek threshold");
        p.read_ahead_bytes = disk.read_ahead_kb.map(|kb| u64::from(kb) * 1024);
        p.set_source(
            "read_ahead_bytes",
            &match disk.read_ahead_kb {
                Some(kb) => format!("read_ahead_kb {kb} of {} as recorded", disk.name),
                None => "unknown: the trace does not record it (format 3 and older)".to_owned(),
            },
        );
        if reads.len() >= MIN_SIZE_SAMPLES
            && let Some(largest) = reads.iter().map(|r| u64::from(r.0)).max().filter(|&b| b >= 4096)
        {
            p.max_request_bytes = largest;
            p.set_source(
                "max_request_bytes",
                &format!(
                    "largest of {} read requests in the trace (readahead and the device's limit)",
                    reads.len()
                ),
            );
        }
        if p.seek_ns < 1_000_000 {
            let depth = most_in_flight(disk).clamp(1, 32);
            p.queue_depth = depth;
            p.set_source("queue_depth", "most read requests in flight at once in the trace (at most 32)");
        }
        p
    }
}

impl DiskParams {
    /// Replaces the fixed cost of a request by `fitted`, the cost that makes this model
    /// reproduce the recorded I/O waits on the critical path that this disk's requests
    /// served, when it is much larger than the requests' own latency: the time went to a
    /// queue before the block layer, where the trace's requests do not exist yet (a cgroup
    /// I/O limit such as the slow-disk rig's throttle, a hypervisor's queue). Such a queue
    /// releases one request at a time as far as the start can tell.
    pub(crate) fn fit_hidden_queue(&mut self, fitted: Nanos, requests: f64, recorded_wait: Nanos) {
        if fitted < HIDDEN_QUEUE_MIN_FACTOR * self.request_ns
            || fitted - self.request_ns < HIDDEN_QUEUE_MIN_NS
        {
            return;
        }
        let source = format!(
            "fitted to the {:.3} s of critical-path I/O waits its {:.0} requests served: the requests' own median \
             latency ({} µs) leaves out a queue before the block layer (a cgroup I/O limit, a hypervisor)",
            recorded_wait as f64 / 1e9,
            requests,
            self.request_ns / 1000
        );
        self.request_ns = fitted;
        self.set_source("request_ns", &source);
        self.queue_depth = 1;
        self.set_source(
            "queue_depth",
            "1: the hidden queue releases one request at a time as far as the start can see",
        );
    }
}

/// The kernel's read-ahead for a device that reports no optimal I/O size (`VM_READAHEAD_PAGES`,
/// 128 KiB; the block layer takes twice the optimal I/O size when that is more), which every
/// class keeps: SATA and NVMe disks, SD cards and cloud volumes alike report none as a rule.
pub const DEFAULT_READ_AHEAD_BYTES: u64 = 128 * 1024;

/// Where the `snapshot` class's fetch figures come from. No provider publishes the first-read
/// latency of a restored volume (AWS: "increased I/O latency"), nor a limit on its fetches.
const SNAPSHOT_SOURCES: [(&str, &str); 4] = [
    (
        "fetch_chunk_bytes",
        "default of the snapshot class: an EBS snapshot's block size, 512 KiB (EBS direct APIs, \"Concepts\")",
    ),
    (
        "fetch_latency_ns",
        "default of the snapshot class: the 100 ms per 512 KiB snapshot block request that AWS's \"Optimize performance \
         for EBS direct APIs\" assumes, the low end of S3's published 100-200 ms first-byte latency; no provider \
         publishes a restored volume's first-read latency",
    ),
    (
        "fetch_bandwidth_bytes_per_s",
        "default of the snapshot class: 300 MiB/s, the highest EBS provisioned rate for volume initialization \
         (100-300 MiB/s): one fetch is no faster than a whole volume's",
    ),
    (
        "fetch_depth",
        "default of the snapshot class, chosen (no published figure): 20 fetches of 512 KiB in flight give about \
         100 MiB/s, the lowest EBS provisioned rate for volume initialization",
    ),
];

const PARAMS: [&str; 17] = [
    "request_ns",
    "seek_ns",
    "near_seek_ns",
    "rotation_ns",
    "far_bytes",
    "seek_span_bytes",
    "bandwidth_bytes_per_s",
    "queue_depth",
    "max_request_bytes",
    "iops_limit",
    "iops_unit_bytes",
    "read_ahead_bytes",
    "fetch_chunk_bytes",
    "fetch_latency_ns",
    "fetch_bandwidth_bytes_per_s",
    "fetch_depth",
    "class",
];

/// The classes by the names `--disk` and profiles take.
pub const CLASSES: [DiskClass; 7] = [
    DiskClass::Hdd,
    DiskClass::Hdd7200,
    DiskClass::Ssd,
    DiskClass::Nvme,
    DiskClass::Sd,
    DiskClass::Cloud,
    DiskClass::Snapshot,
];

/// The keys of a `custom:` disk and of a profile file, with the parameter each sets.
pub const CUSTOM_KEYS: [(&str, &str); 17] = [
    ("base", "class"),
    ("request", "request_ns"),
    ("seek", "seek_ns"),
    ("near_seek", "near_seek_ns"),
    ("rotation", "rotation_ns"),
    ("far", "far_bytes"),
    ("seek_span", "seek_span_bytes"),
    ("bandwidth", "bandwidth_bytes_per_s"),
    ("queue_depth", "queue_depth"),
    ("max_request", "max_request_bytes"),
    ("iops", "iops_limit"),
    ("iops_unit", "iops_unit_bytes"),
    ("read_ahead", "read_ahead_bytes"),
    ("fetch_chunk", "fetch_chunk_bytes"),
    ("fetch_latency", "fetch_latency_ns"),
    ("fetch_bandwidth", "fetch_bandwidth_bytes_per_s"),
    ("fetch_depth", "fetch_depth"),
];

/// The keys of a lazily fetched volume, optional in a profile file without `base`.
pub const FETCH_KEYS: [&str; 4] = ["fetch_chunk", "fetch_latency", "fetch_bandwidth", "fetch_depth"];

fn class_name(class: DiskClass) -> &'static str {
    class.as_str()
}

fn median(values: &mut [Nanos]) -> Option<Nanos> {
    if values.is_empty() {
        return None;
    }
    let mid = values.len() / 2;
    Some(*values.select_nth_unstable(mid).1)
}

/// The largest number of read requests of `disk` in flight at one time.
fn most_in_flight(disk: &DiskAnalysis) -> u32 {
    let mut events: Vec<(Nanos, i32)> = Vec::new();
    for r in disk.requests.iter().filter(|r| r.op == BlockOp::Read) {
        if let (Some(i), Some(c)) = (r.issue_ns, r.complete_ns) {
            events.push((i, 1));
            events.push((c, -1));
        }
    }
    events.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, d) in events {
        now += d;
        most = most.max(now);
    }
    most.max(1) as u32
}

/// A `--disk` value that could not be understood.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskSpecError(pub String);

impl fmt::Display for DiskSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DiskSpecError {}

impl DiskClass {
    /// The class named `name` (`hdd`, `hdd7200`, `ssd`, `nvme`, `sd`, `cloud`, `snapshot`).
    pub fn by_name(name: &str) -> Option<DiskClass> {
        CLASSES.into_iter().find(|c| c.as_str() == name)
    }
}

fn class_names() -> String {
    CLASSES.map(DiskClass::as_str).join(", ")
}

impl FromStr for DiskParams {
    type Err = DiskSpecError;

    /// A class name (`hdd`, `hdd7200`, `ssd`, `nvme`, `sd`, `cloud`, `snapshot`), or `custom:KEY=VALUE,…`
    /// where keys are the parameters without their unit (see `CUSTOM_KEYS`) and
    /// `base=CLASS` (default hdd) gives the rest.
    fn from_str(spec: &str) -> Result<DiskParams, DiskSpecError> {
        let spec = spec.trim();
        if let Some(class) = DiskClass::by_name(spec) {
            return Ok(DiskParams::class_defaults(class));
        }
        let Some(rest) = spec.strip_prefix("custom").map(|r| r.trim_start_matches(':')) else {
            return Err(DiskSpecError(format!(
                "unknown disk class {spec:?}: expected {} or custom:KEY=VALUE,… \
                 (for example custom:request=10ms,seek=0,rotation=0,bandwidth=60MB/s,queue_depth=1)",
                class_names()
            )));
        };
        let pairs: Vec<(&str, &str)> = rest
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.split_once('=')
                    .map(|(k, v)| (k.trim(), v.trim()))
                    .ok_or_else(|| DiskSpecError(format!("{p:?} in the custom disk is not KEY=VALUE")))
            })
            .collect::<Result<_, _>>()?;
        let base = match pairs.iter().find(|p| p.0 == "base").map(|p| p.1) {
            None => DiskClass::Hdd,
            Some(name) => DiskClass::by_name(name)
                .ok_or_else(|| DiskSpecError(format!("base={name}: expected {}", class_names())))?,
        };
        let mut p = DiskParams::class_defaults(base);
        p.class = DiskClass::Custom;
        p.description = format!("custom ({spec})");
        for (key, value) in &pairs {
            if *key == "base" {
                continue;
            }
            p.set_key(key, value)?;
            if let Some((_, param)) = CUSTOM_KEYS.iter().find(|k| k.0 == *key) {
                p.set_source(param, "given");
            }
        }
        let given = |k: &str| pairs.iter().any(|p| p.0 == k);
        p.complete_fetches(base, given)?;
        Ok(p)
    }
}

impl DiskParams {
    /// Sets the parameter of one `custom:` key from its text.
    fn set_key(&mut self, key: &str, value: &str) -> Result<(), DiskSpecError> {
        let bad = |what: &str| DiskSpecError(format!("{key}={value}: {what}"));
        let time = |example: &str| {
            parse_duration(value).ok_or_else(|| bad(&format!("expected a time like {example}")))
        };
        let size =
            |example: &str| parse_size(value).ok_or_else(|| bad(&format!("expected a size like {example}")));
        let rate = |example: &str| {
            value
                .strip_suffix("/s")
                .and_then(parse_size)
                .filter(|&b| b > 0)
                .ok_or_else(|| bad(&format!("expected a rate like {example}")))
        };
        let positive_count =
            || value.parse().ok().filter(|&q| q > 0).ok_or_else(|| bad("expected a count like 1"));
        match key {
            "request" => self.request_ns = time("0.1ms")?,
            "seek" => self.seek_ns = time("8ms")?,
            "near_seek" => self.near_seek_ns = time("1ms")?,
            "rotation" => self.rotation_ns = time("4.17ms")?,
            "far" => self.far_bytes = size("1MiB")?,
            "seek_span" => self.seek_span_bytes = size("500GB")?,
            "iops_unit" => self.iops_unit_bytes = size("256KiB")?,
            "read_ahead" => self.read_ahead_bytes = Some(size("128KiB")?),
            "max_request" => {
                self.max_request_bytes = Some(size("512KiB")?)
                    .filter(|&b| b > 0)
                    .ok_or_else(|| bad("expected a size like 512KiB"))?
            }
            "bandwidth" => self.bandwidth_bytes_per_s = rate("150MB/s")? as f64,
            "queue_depth" => self.queue_depth = positive_count()?,
            "iops" => {
                self.iops_limit = value
                    .parse::<f64>()
                    .ok()
                    .filter(|&q| q >= 0.0 && q.is_finite())
                    .ok_or_else(|| bad("expected a count per second like 3000, or 0 for no limit"))?
            }
            "fetch_chunk" => {
                self.fetch_chunk_bytes =
                    Some(size("512KiB")?).filter(|&b| b == 0 || (b >= 4096 && b % 4096 == 0)).ok_or_else(
                        || bad("expected a multiple of 4 KiB like 512KiB, or 0 for a volume not fetched"),
                    )?
            }
            "fetch_latency" => self.fetch_latency_ns = time("100ms")?,
            "fetch_bandwidth" => self.fetch_bandwidth_bytes_per_s = rate("300MiB/s")? as f64,
            "fetch_depth" => self.fetch_depth = positive_count()?,
            _ => {
                let keys: Vec<&str> = CUSTOM_KEYS.iter().map(|k| k.0).collect();
                return Err(DiskSpecError(format!(
                    "unknown key {key:?} in the custom disk: expected one of {}",
                    keys.join(", ")
                )));
            }
        }
        Ok(())
    }

    /// A lazily fetched volume on a base that is not one takes the fetches it was not given
    /// from the `snapshot` class; fetch keys without a chunk size are refused, as they would
    /// change nothing.
    fn complete_fetches(
        &mut self,
        base: DiskClass,
        given: impl Fn(&str) -> bool,
    ) -> Result<(), DiskSpecError> {
        if !self.is_lazy() {
            return match FETCH_KEYS.iter().find(|k| given(k)) {
                Some(key) if *key != "fetch_chunk" => Err(DiskSpecError(format!(
                    "{key} needs fetch_chunk (e.g. fetch_chunk=512KiB), or base=snapshot"
                ))),
                _ => {
                    (self.fetch_latency_ns, self.fetch_bandwidth_bytes_per_s, self.fetch_depth) = (0, 0.0, 0);
                    Ok(())
                }
            };
        }
        if base == DiskClass::Snapshot {
            return Ok(());
        }
        let snapshot = DiskParams::class_defaults(DiskClass::Snapshot);
        for (key, param) in CUSTOM_KEYS.iter().filter(|k| FETCH_KEYS.contains(&k.0) && !given(k.0)) {
            match *key {
                "fetch_latency" => self.fetch_latency_ns = snapshot.fetch_latency_ns,
                "fetch_bandwidth" => self.fetch_bandwidth_bytes_per_s = snapshot.fetch_bandwidth_bytes_per_s,
                "fetch_depth" => self.fetch_depth = snapshot.fetch_depth,
                _ => continue,
            }
            self.set_source(param, snapshot.source_of(param));
        }
        Ok(())
    }
}

/// A size as `custom:` disks and `coldstart storage --size` write them (`512KiB`, `4GiB`,
/// `60MB`, `4096`), read by the one rule of [`ByteSize`].
pub fn parse_disk_size(s: &str) -> Option<u64> {
    parse_size(s)
}

/// A time of the disk spec (`8ms`, `70us`, `0`), read by the one rule of [`TimeSpan`].
fn parse_duration(s: &str) -> Option<Nanos> {
    let span: TimeSpan = s.parse().ok()?;
    Nanos::try_from(span.0.as_nanos()).ok()
}

/// A size of the disk spec (`512KiB`, `150MB`), read by the one rule of [`ByteSize`].
fn parse_size(s: &str) -> Option<u64> {
    s.parse::<ByteSize>().ok().map(|size| size.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_custom_specs_parse() {
        let hdd: DiskParams = "hdd7200".parse().unwrap();
        assert_eq!(hdd.seek_ns, 8_000_000);
        assert_eq!(hdd.queue_depth, 1);
        let rig: DiskParams =
            "custom:request=10ms,seek=0,rotation=0,near_seek=0,bandwidth=60MB/s".parse().unwrap();
        assert_eq!(rig.class, DiskClass::Custom);
        assert_eq!(rig.request_ns, 10_000_000);
        assert_eq!(rig.seek_ns, 0);
        assert_eq!(rig.bandwidth_bytes_per_s, 60e6);
        assert_eq!(rig.queue_depth, 1, "the rest comes from the hdd base");
        assert_eq!(rig.source_of("request_ns"), "given");
        assert_eq!(rig.source_of("queue_depth"), "default of the hdd class");
        let flash: DiskParams = "custom:base=nvme,request=50us,max_request=1MiB".parse().unwrap();
        assert_eq!((flash.request_ns, flash.queue_depth, flash.max_request_bytes), (50_000, 32, 1 << 20));
        assert!("floppy".parse::<DiskParams>().is_err());
        assert!("custom:seek=fast".parse::<DiskParams>().is_err());
        assert!("custom:speed=1".parse::<DiskParams>().is_err());
        assert!("custom:queue_depth=0".parse::<DiskParams>().is_err());
        assert!("custom:seek=-8ms".parse::<DiskParams>().is_err());
        assert!("custom:bandwidth=nanMB/s".parse::<DiskParams>().is_err());
        assert!("custom:seek=-1ms".parse::<DiskParams>().is_err(), "a seek is never negative");
        assert!("custom:iops=-5".parse::<DiskParams>().is_err());
        let cloud: DiskParams = "custom:base=cloud,iops=16000".parse().unwrap();
        assert_eq!((cloud.iops_limit, cloud.iops_unit_bytes), (16000.0, 256 * 1024));
        assert_eq!(cloud.source_of("iops_limit"), "given");
        for class in CLASSES {
            assert_eq!(class.as_str().parse::<DiskParams>().unwrap().class, class);
        }
    }

    #[test]
    fn the_snapshot_volume_is_the_cloud_volume_with_fetches_that_custom_specs_change() {
        let snapshot: DiskParams = "snapshot".parse().unwrap();
        let cloud = DiskParams::class_defaults(DiskClass::Cloud);
        assert_eq!((snapshot.request_ns, snapshot.iops_limit), (cloud.request_ns, cloud.iops_limit));
        assert!(!cloud.is_lazy() && snapshot.is_lazy());
        assert_eq!(
            (snapshot.fetch_chunk_bytes, snapshot.fetch_latency_ns, snapshot.fetch_depth),
            (512 * 1024, 100_000_000, 20)
        );
        assert!(snapshot.source_of("fetch_chunk_bytes").contains("EBS direct APIs"));
        assert_eq!(snapshot.source_of("request_ns"), "default of the snapshot class (the cloud class's)");
        assert_eq!(snapshot.chunks_of(512 * 1024 - 1, 2), 0..2);
        assert_eq!(cloud.chunks_of(0, 1 << 20), 0..0);
        // 41 fetches 20 at a time: three rounds.
        assert_eq!(snapshot.fetches_ns(41), 3 * snapshot.fetch_ns());
        let fast: DiskParams = "custom:base=snapshot,fetch_latency=20ms,fetch_depth=4".parse().unwrap();
        assert_eq!(
            (fast.fetch_latency_ns, fast.fetch_depth, fast.fetch_chunk_bytes),
            (20_000_000, 4, 512 * 1024)
        );
        assert_eq!(fast.source_of("fetch_latency_ns"), "given");
        // A lazily fetched NVMe drive: the fetches not given come from the snapshot class.
        let nvme: DiskParams = "custom:base=nvme,fetch_chunk=1MiB".parse().unwrap();
        assert_eq!((nvme.request_ns, nvme.fetch_chunk_bytes, nvme.fetch_depth), (70_000, 1 << 20, 20));
        assert!(nvme.source_of("fetch_latency_ns").contains("snapshot class"));
        let hydrated: DiskParams = "custom:base=snapshot,fetch_chunk=0".parse().unwrap();
        assert!(!hydrated.is_lazy());
        let refused = |spec: &str| spec.parse::<DiskParams>().unwrap_err().to_string();
        assert!(refused("custom:base=cloud,fetch_latency=5ms").contains("fetch_latency needs fetch_chunk"));
        assert!(refused("custom:base=snapshot,fetch_chunk=1000").contains("multiple of 4 KiB"));
        assert!(refused("custom:base=snapshot,fetch_depth=0").contains("expected a count"));
        assert!(refused("custom:base=snapshot,fetch_bandwidth=0MB/s").contains("expected a rate"));
        assert!(refused("custom:base=snapshot,fetch_latency=-1ms").contains("expected a time"));
    }

    #[test]
    fn the_laptop_disk_seeks_longer_the_farther_it_goes() {
        let hdd = DiskParams::class_defaults(DiskClass::Hdd);
        assert_eq!(hdd.rotation_ns, 5_555_556, "half a revolution at 5400 rpm");
        let seek = |d: i64| hdd.positioning_ns(Some(d)) - hdd.rotation_ns;
        assert_eq!(hdd.positioning_ns(Some(0)), 0, "a request that continues the previous one");
        // Track to track plus (full stroke - track to track) * sqrt(distance / span).
        assert_eq!(seek(4096), 1_000_000 + (19e6 * (4096.0f64 / 500e9).sqrt()).round() as Nanos);
        assert_eq!(seek(125_000_000_000), 1_000_000 + 9_500_000, "a quarter of the span: half the stroke");
        assert_eq!(seek(500_000_000_000), 20_000_000, "the full stroke");
        assert_eq!(seek(-500_000_000_000), 20_000_000, "backwards too");
        assert_eq!(seek(900_000_000_000), 20_000_000, "never more than the full stroke");
        assert!(seek(1 << 20) < seek(1 << 30) && seek(1 << 30) < seek(1 << 36));
        // An unknown distance costs the average over the span: two thirds of the stroke.
        assert_eq!(hdd.positioning_ns(None), 1_000_000 + 12_666_667 + 5_555_556);
        // 80 MB/s, one request at a time: 64 MiB in 128 requests of 512 KiB, one positioning.
        assert_eq!(hdd.sequential_read_ns(64 << 20), 128 * 100_000 + 19_222_223 + 838_860_800);
    }

    #[test]
    fn the_sd_card_has_no_seek_and_one_request_at_a_time() {
        let sd = DiskParams::class_defaults(DiskClass::Sd);
        assert_eq!(sd.positioning_ns(None), 0);
        assert_eq!(sd.positioning_ns(Some(1 << 30)), 0);
        // 1 ms per request plus 4 KiB at 25 MB/s (163.84 µs), whatever the distance.
        let random = RequestShape { bytes: 4096, distance_bytes: Some(7 << 20) };
        assert_eq!(sd.service_ns(random), 1_163_840);
        assert_eq!(sd.cost_ns(&[random; 4096]), 4096 * 1_000_000 + 671_088_640);
    }

    #[test]
    fn the_cloud_volume_counts_merged_requests_in_units_of_256_kib() {
        let cloud = DiskParams::class_defaults(DiskClass::Cloud);
        assert_eq!(cloud.io_count(4096), 1);
        assert_eq!(cloud.io_count(256 * 1024), 1);
        assert_eq!(cloud.io_count(256 * 1024 + 1), 2);
        assert_eq!(cloud.io_count(1 << 20), 4);
        // 3000 scattered 4 KiB requests: the IOPS limit (1 s) wins over 32-deep latency.
        let small = RequestShape { bytes: 4096, distance_bytes: None };
        assert_eq!(cloud.cost_ns(&[small; 3000]), 1_000_000_000);
        // One merged request of 1 MiB counts as 4 I/Os, where 256 of 4 KiB count as 256.
        let merged = RequestShape { bytes: 1 << 20, distance_bytes: None };
        assert_eq!(cloud.iops_ns(cloud.io_count(merged.bytes)), 1_333_333);
        assert_eq!(cloud.cost_ns(&[small; 256]), 85_333_333);
        // 125 MB/s bounds large reads: 1 GB of 256 KiB requests is 3815 I/Os (1.27 s) but 8 s of transfer.
        let large = RequestShape { bytes: 256 * 1024, distance_bytes: Some(0) };
        assert_eq!(cloud.cost_ns(&[large; 3815]), 3815 * 500_000 / 32 + cloud.transfer_ns(3815 * 256 * 1024));
    }

    #[test]
    fn the_cost_of_requests_adds_positioning_and_overlaps_it_by_queue_depth() {
        let hdd = DiskParams::class_defaults(DiskClass::Hdd7200);
        // One far 4 KiB read: 0.1 + 8 + 4.17 ms + 4096 B at 150 MB/s (27 µs).
        let far = RequestShape { bytes: 4096, distance_bytes: None };
        assert_eq!(hdd.cost_ns(&[far]), 100_000 + 8_000_000 + 4_170_000 + 27_306);
        // A contiguous one pays neither seek nor rotation; a near one pays the short seek.
        let next = RequestShape { bytes: 4096, distance_bytes: Some(0) };
        let near = RequestShape { bytes: 4096, distance_bytes: Some(64 * 1024) };
        assert_eq!(hdd.cost_ns(&[next]), 100_000 + 27_306);
        assert_eq!(hdd.cost_ns(&[near]), 100_000 + 1_000_000 + 4_170_000 + 27_306);
        let nvme = DiskParams::class_defaults(DiskClass::Nvme);
        // 64 scattered reads at depth 32: two rounds of 70 µs, plus 256 KiB at 3 GB/s.
        let scattered = vec![far; 64];
        assert_eq!(nvme.cost_ns(&scattered), 2 * 70_000 + 87_381);
        // 1 MiB in one pass on the hdd: two 512 KiB requests, one positioning.
        assert_eq!(hdd.sequential_read_ns(1 << 20), 2 * 100_000 + 12_170_000 + 6_990_506);
        assert_eq!(hdd.sequential_read_ns(0), 0);
    }

    #[test]
    fn durations_and_sizes_read_as_written() {
        assert_eq!(parse_duration("8ms"), Some(8_000_000));
        assert_eq!(parse_duration("4.17ms"), Some(4_170_000));
        assert_eq!(parse_duration("70µs"), Some(70_000));
        assert_eq!(parse_duration("0"), Some(0));
        assert_eq!(parse_duration("-1ms"), None);
        assert_eq!(
            parse_duration("8"),
            Some(8_000_000_000),
            "a bare number is seconds, as on the command line"
        );
        assert_eq!(parse_size("512KiB"), Some(512 * 1024));
        assert_eq!(parse_size("60MB"), Some(60_000_000));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("1e400"), None);
    }
}
