//! `proc_diskstats.log`: copies of /proc/diskstats, turned into per-disk traffic
//! samples and whole-recording totals.
//!
//! Whole disks only: old kernels print partitions with 4 counters (skipped as
//! such); newer ones print them in full, and a device whose name is another
//! device's name plus a number (`sda1`, `nvme0n1p2`) is taken as a partition.
//! Devices whose counters never move (unused ram disks, empty drives) are left out.
//! A disk that appears during the log (its driver loaded then) counted from zero
//! at the copy before the one that first lists it.

use std::collections::BTreeMap;

use coldstart_trace::{Dev, Disk, DiskSample};
use procfs::DiskStat;

use super::NS_PER_CS;
use super::blocks::{shorten, timed_blocks};
use super::problems::Problems;
use crate::error::Result;

const SECTOR: u64 = 512;

/// One whole disk's counters at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiskCounters {
    pub time_cs: i64,
    pub dev: Dev,
    pub name: String,
    pub reads: u64,
    pub sectors_read: u64,
    pub writes: u64,
    pub sectors_written: u64,
    /// Milliseconds with requests in flight (`io_ticks`).
    pub io_ticks_ms: u64,
}

/// The disks of the log, each with its counters over time.
#[derive(Clone, Debug, Default)]
pub struct DiskLog {
    pub disks: BTreeMap<Dev, Vec<DiskCounters>>,
    /// The time of the last copy (centiseconds since boot).
    pub last_cs: Option<i64>,
    pub first_cs: Option<i64>,
}

pub fn parse(file: &str, text: &str, problems: &mut Problems) -> Result<DiskLog> {
    let blocks = timed_blocks(file, text)?;
    let mut log = DiskLog::default();
    let mut previous_cs = None;
    for block in &blocks {
        log.first_cs.get_or_insert(block.time_cs);
        log.last_cs = Some(block.time_cs);
        let mut stats = Vec::new();
        for &(number, line) in &block.lines {
            let fields = line.split_whitespace().count();
            if fields == 7 {
                continue; // a partition in the pre-2.6.25 short format
            }
            match DiskStat::from_line(line) {
                Ok(stat) if fields >= 14 => stats.push(stat),
                Ok(_) | Err(_) => problems.skip(
                    "unreadable proc_diskstats.log lines",
                    || format!("{file}:{number}"),
                    || format!("not a /proc/diskstats line: {:?}", shorten(line)),
                ),
            }
        }
        let names: Vec<&str> = stats.iter().map(|s| s.name.as_str()).collect();
        for stat in &stats {
            if is_partition(&stat.name, &names) {
                continue;
            }
            let (Ok(major), Ok(minor)) = (u32::try_from(stat.major), u32::try_from(stat.minor)) else {
                continue;
            };
            let dev = Dev::new(major, minor);
            let counters = log.disks.entry(dev).or_default();
            if let (true, Some(time_cs)) = (counters.is_empty(), previous_cs) {
                let name = stat.name.clone();
                let zero = DiskCounters {
                    time_cs,
                    dev,
                    name,
                    reads: 0,
                    sectors_read: 0,
                    writes: 0,
                    sectors_written: 0,
                    io_ticks_ms: 0,
                };
                counters.push(zero);
            }
            counters.push(DiskCounters {
                time_cs: block.time_cs,
                dev,
                name: stat.name.clone(),
                reads: stat.reads,
                sectors_read: stat.sectors_read,
                writes: stat.writes,
                sectors_written: stat.sectors_written,
                io_ticks_ms: stat.time_in_progress,
            });
        }
        previous_cs = Some(block.time_cs);
    }
    log.disks.retain(|_, counters| counters.windows(2).any(|w| moved(&w[0], &w[1])));
    Ok(log)
}

fn moved(a: &DiskCounters, b: &DiskCounters) -> bool {
    (a.reads, a.sectors_read, a.writes, a.sectors_written, a.io_ticks_ms)
        != (b.reads, b.sectors_read, b.writes, b.sectors_written, b.io_ticks_ms)
}

/// `sda1` of `sda`, `nvme0n1p2` of `nvme0n1`, `mmcblk0p1` of `mmcblk0`.
fn is_partition(name: &str, names: &[&str]) -> bool {
    let base = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if base.len() == name.len() || base.is_empty() {
        return false;
    }
    if names.contains(&base) {
        return true;
    }
    base.strip_suffix('p').is_some_and(|b| b.ends_with(|c: char| c.is_ascii_digit()) && names.contains(&b))
}

impl DiskLog {
    /// One sample per disk per interval between consecutive copies.
    pub fn samples(&self, t0_cs: i64) -> Vec<DiskSample> {
        let mut samples = Vec::new();
        for counters in self.disks.values() {
            for w in counters.windows(2) {
                let (prev, cur) = (&w[0], &w[1]);
                let dt_cs = cur.time_cs - prev.time_cs;
                if dt_cs <= 0 {
                    continue;
                }
                let busy_ms = cur.io_ticks_ms.saturating_sub(prev.io_ticks_ms) as f64;
                samples.push(DiskSample {
                    t_ns: (cur.time_cs - t0_cs) * NS_PER_CS,
                    dt_ns: dt_cs * NS_PER_CS,
                    dev: cur.dev,
                    read_bytes: cur.sectors_read.saturating_sub(prev.sectors_read).saturating_mul(SECTOR),
                    read_ios: cur.reads.saturating_sub(prev.reads),
                    write_bytes: cur
                        .sectors_written
                        .saturating_sub(prev.sectors_written)
                        .saturating_mul(SECTOR),
                    write_ios: cur.writes.saturating_sub(prev.writes),
                    busy: (busy_ms / (dt_cs as f64 * 10.0)).clamp(0.0, 1.0),
                });
            }
        }
        samples.sort_by_key(|s| (s.t_ns, s.dev));
        samples
    }

    /// Each disk with its traffic from the first copy to the last.
    pub fn totals(&self) -> Vec<Disk> {
        self.disks
            .values()
            .filter_map(|counters| {
                let (first, last) = (counters.first()?, counters.last()?);
                Some(Disk {
                    dev: last.dev,
                    name: last.name.clone(),
                    read_bytes: Some(
                        last.sectors_read.saturating_sub(first.sectors_read).saturating_mul(SECTOR),
                    ),
                    read_ios: Some(last.reads.saturating_sub(first.reads)),
                    write_bytes: Some(
                        last.sectors_written.saturating_sub(first.sectors_written).saturating_mul(SECTOR),
                    ),
                    write_ios: Some(last.writes.saturating_sub(first.writes)),
                    ..Disk::default()
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_that_appears_later_counts_from_zero() {
        let text = "100\n   1    0 ram0 0 0 0 0 0 0 0 0 0 0 0\n\n120\n   8    0 sda 10 9 152 176 0 0 0 0 1 124 180\n\n";
        let log = parse("d", text, &mut Problems::default()).unwrap();
        let samples = log.samples(100);
        assert_eq!(samples.len(), 1);
        assert_eq!(
            (samples[0].t_ns, samples[0].dt_ns, samples[0].read_ios, samples[0].read_bytes),
            (200_000_000, 200_000_000, 10, 152 * 512)
        );
        assert_eq!(log.totals()[0].read_ios, Some(10));
    }

    #[test]
    fn partitions() {
        let names = ["sda", "sda1", "nvme0n1", "nvme0n1p2", "mmcblk0", "mmcblk0p1", "ram1", "dm-0", "md0"];
        assert!(is_partition("sda1", &names));
        assert!(is_partition("nvme0n1p2", &names));
        assert!(is_partition("mmcblk0p1", &names));
        assert!(!is_partition("sda", &names));
        assert!(!is_partition("nvme0n1", &names));
        assert!(!is_partition("ram1", &names));
        assert!(!is_partition("dm-0", &names));
        assert!(!is_partition("md0", &names));
    }

    #[test]
    fn traffic_of_moving_disks_only() {
        let text = "100\n   3    0 hda 353 13 8435 6428 0 0 0 0 2 2307 6457\n   3    1 hda1 4 32 0 0\n   1    0 ram0 0 0 0 0 0 0 0 0 0 0 0\n\n\
                    120\n   3    0 hda 372 13 8643 6734 5 0 40 3 0 2500 6857\n   3    1 hda1 4 32 0 0\n   1    0 ram0 0 0 0 0 0 0 0 0 0 0 0\n\n";
        let mut problems = Problems::default();
        let log = parse("d", text, &mut problems).unwrap();
        assert_eq!(problems.count("unreadable proc_diskstats.log lines"), 0);
        assert_eq!(log.disks.len(), 1);
        let samples = log.samples(100);
        assert_eq!(samples.len(), 1);
        let s = &samples[0];
        assert_eq!(s.dev, Dev::new(3, 0));
        assert_eq!((s.read_ios, s.read_bytes, s.write_ios, s.write_bytes), (19, 208 * 512, 5, 40 * 512));
        assert!((s.busy - 193.0 / 200.0).abs() < 1e-12);
        let totals = log.totals();
        assert_eq!(totals[0].name, "hda");
        assert_eq!(totals[0].read_bytes, Some(208 * 512));
    }
}
