//! The disks of a recording: every disk a block request or a file read names, with
//! what sysfs says about it, its /proc/diskstats traffic over the recording, and
//! the check of the traced block reads against those counters.

use coldstart_trace::{BlockIo, BlockOp, Dev, Disk, File, FileKind};

use crate::assemble::Clock;
use crate::assemble::decode::SpoolData;
use crate::assemble::system_view::SystemView;
use crate::spool::DiskCounters;

/// Recorded block reads against /proc/diskstats for one disk over the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossCheck {
    pub disk: String,
    pub recorded_read_bytes: u64,
    pub diskstats_read_bytes: u64,
}

/// The `disk` table and what was checked against it.
pub struct Disks {
    pub rows: Vec<Disk>,
    pub cross_checks: Vec<CrossCheck>,
}

/// /proc/diskstats counters of one device between two readings.
struct Traffic {
    read_bytes: u64,
    read_ios: u64,
    write_bytes: u64,
    write_ios: u64,
}

fn traffic(start: &[DiskCounters], end: &[DiskCounters], dev: Dev) -> Option<Traffic> {
    let find = |list: &[DiskCounters]| list.iter().find(|d| Dev::new(d.major, d.minor) == dev).cloned();
    let (a, b) = (find(start)?, find(end)?);
    Some(Traffic {
        read_bytes: b.read_sectors.saturating_sub(a.read_sectors) * 512,
        read_ios: b.read_ios.saturating_sub(a.read_ios),
        write_bytes: b.write_sectors.saturating_sub(a.write_sectors) * 512,
        write_ios: b.write_ios.saturating_sub(a.write_ios),
    })
}

/// The whole disks named by block requests and files, by device number.
pub fn devices(block_ios: &[BlockIo], files: &[File], system: &dyn SystemView) -> Vec<Dev> {
    let mut devs: Vec<Dev> = block_ios.iter().map(|b| b.dev).collect();
    devs.extend(files.iter().map(|f| match f.kind {
        FileKind::DeviceMetadata => f.dev,
        _ => system.whole_disk(f.dev).0,
    }));
    devs.retain(|d| d.major != 0);
    devs.sort_unstable();
    devs.dedup();
    devs
}

pub fn disks(
    devs: &[Dev],
    data: &SpoolData,
    block_ios: &[BlockIo],
    clock: &Clock,
    system: &dyn SystemView,
) -> Disks {
    let end_counters: Vec<DiskCounters> = match &data.end {
        Some(e) => e.diskstats_end.clone(),
        None => data.samples.last().map(|s| s.disks.clone()).unwrap_or_default(),
    };
    let mut out = Disks { rows: Vec::new(), cross_checks: Vec::new() };
    for &dev in devs {
        let info = system.disk_info(dev);
        let counted = traffic(&data.start.diskstats_start, &end_counters, dev);
        if let Some(counted) = &counted {
            let recorded_read_bytes = block_ios
                .iter()
                .filter(|b| {
                    b.dev == dev && b.op == BlockOp::Read && b.complete_ns.is_some_and(|t| clock.contains(t))
                })
                .map(|b| u64::from(b.bytes))
                .sum();
            out.cross_checks.push(CrossCheck {
                disk: info.name.clone(),
                recorded_read_bytes,
                diskstats_read_bytes: counted.read_bytes,
            });
        }
        out.rows.push(Disk {
            dev,
            name: info.name,
            model: info.model,
            rotational: info.rotational,
            size_bytes: info.size_bytes,
            read_bytes: counted.as_ref().map(|c| c.read_bytes),
            read_ios: counted.as_ref().map(|c| c.read_ios),
            write_bytes: counted.as_ref().map(|c| c.write_bytes),
            write_ios: counted.as_ref().map(|c| c.write_ios),
            read_ahead_kb: info.read_ahead_kb,
        });
    }
    out
}
