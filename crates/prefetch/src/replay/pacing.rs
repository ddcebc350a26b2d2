//! The paced replay alongside a start, for devices that serve requests first in, first out
//! (`device.rs`): there, a deep replay puts the start's every read behind the whole queue
//! of the replay's. Paced, the replay goes in first-need order on [`PACED_DEPTH`] threads,
//! reads of at most [`PACED_CHUNK_BYTES`], so a read of the start waits behind at most
//! that many of the replay's: the replay's lead over the start is bounded in requests.
//! Before each read, a replay thread also gives way while the device has
//! [`GIVE_WAY_AT`] or more requests in flight (`/sys/block/NAME/inflight`; the replay's
//! own included), for at most [`LONGEST_WAIT`], so that when the start's processes
//! already queue on the device the replay does not lengthen that queue.
//!
//! Measured on the MATE login on the emulated throttle rig (FIFO, 100 requests/s), two
//! rounds each (BENCHMARKS.md): two reads of 1 MiB in flight, no waiting, 0.41× of cold;
//! one read of 256 KiB waiting up to 50 ms for an empty queue 1.06× (the replay fetched
//! 32 of 150 MiB: the start keeps the device busy); the deep disk-ordered replay at
//! real-time priority 0.67×.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::device::{DeviceFacts, Priority};

/// The most a paced replay thread reads at once (one request for contiguous pages).
pub const PACED_CHUNK_BYTES: u64 = 1 << 20;
/// Threads of a paced replay, and so its reads in flight.
pub const PACED_DEPTH: usize = 2;
/// Requests in flight on a watched device (the replay's own included) at which a replay
/// thread waits before its next read.
pub const GIVE_WAY_AT: u64 = 3;
/// The longest a paced replay thread waits for a busy device before it reads anyway.
pub const LONGEST_WAIT: Duration = Duration::from_millis(20);
const POLL: Duration = Duration::from_millis(1);

/// The devices a paced replay gives way to, and how often it did.
pub struct Pacing {
    in_flight: Vec<File>,
    waits: AtomicU64,
    waited_ns: AtomicU64,
}

impl Pacing {
    /// Watches the `inflight` counters of the devices in `facts` that ignore I/O priority
    /// (all of them when none does but pacing was asked for).
    pub fn new(sys: &Path, facts: &[DeviceFacts]) -> Pacing {
        let fifo: Vec<&DeviceFacts> = facts.iter().filter(|f| f.priority == Priority::Ignored).collect();
        let watched = if fifo.is_empty() { facts.iter().collect() } else { fifo };
        let in_flight = watched
            .iter()
            .filter_map(|f| f.name.as_ref())
            .filter_map(|name| File::open(sys.join("block").join(name).join("inflight")).ok())
            .collect();
        Pacing { in_flight, waits: AtomicU64::new(0), waited_ns: AtomicU64::new(0) }
    }

    /// Requests in flight on the watched devices (reads and writes), by their counters.
    fn busy(&self) -> u64 {
        let mut buf = [0u8; 64];
        self.in_flight
            .iter()
            .filter_map(|f| {
                f.read_at(&mut buf, 0).ok().map(|n| in_flight_count(&String::from_utf8_lossy(&buf[..n])))
            })
            .sum()
    }

    /// Waits while the watched devices have [`GIVE_WAY_AT`] requests or more in flight, at
    /// most [`LONGEST_WAIT`] (or until `cancel`).
    pub fn give_way(&self, cancel: &AtomicBool) {
        let began = Instant::now();
        if self.busy() < GIVE_WAY_AT {
            return;
        }
        self.waits.fetch_add(1, Ordering::Relaxed);
        while began.elapsed() < LONGEST_WAIT && !cancel.load(Ordering::Relaxed) {
            std::thread::sleep(POLL);
            if self.busy() < GIVE_WAY_AT {
                break;
            }
        }
        self.waited_ns.fetch_add(began.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }

    /// How many reads found a device busy, and the seconds spent waiting.
    pub fn waited(&self) -> (u64, f64) {
        (self.waits.load(Ordering::Relaxed), self.waited_ns.load(Ordering::Relaxed) as f64 / 1e9)
    }

    #[cfg(test)]
    fn watches(&self) -> usize {
        self.in_flight.len()
    }
}

/// The sum of the numbers of an `inflight` file (`reads writes`).
fn in_flight_count(text: &str) -> u64 {
    text.split_whitespace().filter_map(|w| w.parse::<u64>().ok()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_trace::Dev;

    fn facts(name: &str, priority: Priority) -> DeviceFacts {
        DeviceFacts {
            dev: Dev::new(7, 0),
            name: Some(name.into()),
            decided_by: Some(name.into()),
            scheduler: Some("none".into()),
            throttle: None,
            priority,
        }
    }

    #[test]
    fn the_replay_gives_way_while_a_watched_device_is_busy_but_not_longer_than_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        for (name, text) in [("loop0", "       2        1\n"), ("vda", "       0        0\n")] {
            std::fs::create_dir_all(dir.path().join("block").join(name)).unwrap();
            std::fs::write(dir.path().join("block").join(name).join("inflight"), text).unwrap();
        }
        let cancel = AtomicBool::new(false);
        let busy =
            Pacing::new(dir.path(), &[facts("loop0", Priority::Ignored), facts("vda", Priority::Honoured)]);
        assert_eq!((busy.watches(), busy.busy()), (1, 3));
        let began = Instant::now();
        busy.give_way(&cancel);
        assert!(
            began.elapsed() >= LONGEST_WAIT && began.elapsed() < LONGEST_WAIT * 4,
            "{:?}",
            began.elapsed()
        );
        assert_eq!(busy.waited().0, 1);

        let idle = Pacing::new(dir.path(), &[facts("vda", Priority::Honoured)]);
        let began = Instant::now();
        idle.give_way(&cancel);
        assert!(began.elapsed() < LONGEST_WAIT / 2);
        assert_eq!(idle.waited(), (0, 0.0));
        assert_eq!(in_flight_count("       3        2\n"), 5);
    }
}
