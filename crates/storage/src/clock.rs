//! The device's virtual clock: when each request completes under the disk model, given
//! when it arrived, where the head is and what the device is still busy with.
//!
//! A request takes the queue slot that frees first; its fixed and positioning costs run
//! there, its transfer waits for the one data path, and an IOPS budget holds it back
//! until its I/Os are allowed. With one slot this is "completion = max(now, busy until)
//! + cost", the model's `cost_ns` for requests sent back to back.
//!
//! A lazily fetched volume (`fetch_chunk_bytes` not 0, the `snapshot` profile) first fetches
//! each chunk a request touches that it has not fetched yet: a fetch takes the fetch slot
//! that frees first (`fetch_depth` of them), its latency and its chunk at the fetch's
//! bandwidth; a request reaches the device model above when its chunks are in. A chunk
//! being fetched is waited for, never fetched twice.

use std::collections::HashMap;

use coldstart_analyze::doctor::DiskParams;
use coldstart_trace::Nanos;

/// The longest pause between two pieces of one request of the loop device (a FUSE round
/// trip, a few ms on a busy machine) that still counts them as one request. A real disk
/// serves such a quick contiguous follow-up from its read-ahead buffer as cheaply.
pub const PIECE_GAP_NS: Nanos = 5_000_000;

/// The state of one emulated device, in nanoseconds of any monotonic clock.
#[derive(Clone, Debug)]
pub struct DeviceClock {
    params: DiskParams,
    slot_free_at: Vec<Nanos>,
    transfer_free_at: Nanos,
    iops_free_at: Nanos,
    head: Option<u64>,
    /// Bytes of the current run of merged contiguous pieces.
    run_bytes: u64,
    busy_until: Nanos,
    busy_ns: Nanos,
    requests: u64,
    bytes: u64,
    fetches: Fetches,
}

/// The fetches of a lazily fetched volume.
#[derive(Clone, Debug, Default)]
struct Fetches {
    /// Each chunk fetched or being fetched, with when its fetch ends.
    done_at: HashMap<u64, Nanos>,
    slot_free_at: Vec<Nanos>,
    /// Ends of the fetches still in flight when the last one started (requests from two
    /// FUSE threads may book their arrivals a little out of order).
    ends: Vec<Nanos>,
    count: u64,
    most_in_flight: u32,
}

impl Fetches {
    fn new(depth: u32) -> Fetches {
        Fetches { slot_free_at: vec![0; depth.max(1) as usize], ..Fetches::default() }
    }

    /// When `chunk` is in for a request arriving at `now`: at once if fetched, when its
    /// fetch ends if one is under way, else after a fetch booked now.
    fn ready_at(&mut self, now: Nanos, chunk: u64, fetch_ns: Nanos) -> Nanos {
        if let Some(&done) = self.done_at.get(&chunk) {
            return done;
        }
        let (slot, free_at) =
            self.slot_free_at.iter().copied().enumerate().min_by_key(|&(_, t)| t).unwrap_or((0, 0));
        let start = now.max(free_at);
        let done = start + fetch_ns;
        if let Some(slot_free_at) = self.slot_free_at.get_mut(slot) {
            *slot_free_at = done;
        }
        self.ends.retain(|&end| end > start);
        self.ends.push(done);
        self.most_in_flight = self.most_in_flight.max(self.ends.len() as u32);
        self.count += 1;
        self.done_at.insert(chunk, done);
        done
    }
}

impl DeviceClock {
    pub fn new(params: DiskParams) -> DeviceClock {
        let slots = params.queue_depth.max(1) as usize;
        DeviceClock {
            slot_free_at: vec![0; slots],
            transfer_free_at: 0,
            iops_free_at: 0,
            head: None,
            run_bytes: 0,
            busy_until: 0,
            busy_ns: 0,
            requests: 0,
            bytes: 0,
            fetches: Fetches::new(params.fetch_depth),
            params,
        }
    }

    pub fn params(&self) -> &DiskParams {
        &self.params
    }

    /// Books a request of `bytes` at `offset` arriving at `now`; returns when it completes.
    ///
    /// The loop device and FUSE cut a large read into pieces of their own sizes (about
    /// 512 KiB, sent one after the other); a disk gets requests of at most
    /// `max_request_bytes`, contiguous queued pieces merged up to that size. So a request
    /// costs the fixed cost once per `max_request_bytes` it starts, where a piece that
    /// continues the previous one, arriving before it completed or within `PIECE_GAP_NS`
    /// after, continues its run.
    /// On a lazily fetched volume the read waits first for its chunks (`fetched`).
    pub fn serve(&mut self, arrived: Nanos, offset: u64, bytes: u64) -> Nanos {
        let now = self.fetched(arrived, offset, bytes);
        self.serve_now(now, offset, bytes)
    }

    /// Books a write: as a read, but it fetches nothing. What is written to a lazily fetched
    /// volume is taken as the snapshot's (copying a program's files onto it is making the
    /// image), still to be fetched on its first read.
    pub fn serve_write(&mut self, now: Nanos, offset: u64, bytes: u64) -> Nanos {
        self.serve_now(now, offset, bytes)
    }

    fn serve_now(&mut self, now: Nanos, offset: u64, bytes: u64) -> Nanos {
        let merged = self.head == Some(offset) && now <= self.busy_until + PIECE_GAP_NS;
        let run_before = if merged { self.run_bytes } else { 0 };
        self.run_bytes = run_before + bytes;
        let p = &self.params;
        let starts = |unit: u64| {
            let unit = unit.max(1);
            (run_before + bytes).div_ceil(unit) - run_before.div_ceil(unit)
        };
        let requests = starts(p.max_request_bytes);
        let ios = if p.iops_unit_bytes == 0 { u64::from(!merged) } else { starts(p.iops_unit_bytes) };
        let distance = if merged { Some(0) } else { self.head.map(|end| offset as i64 - end as i64) };
        let (slot, free_at) =
            self.slot_free_at.iter().copied().enumerate().min_by_key(|&(_, t)| t).unwrap_or((0, 0));
        let positioned = now.max(free_at) + requests as Nanos * p.request_ns + p.positioning_ns(distance);
        let mut done = positioned.max(self.transfer_free_at) + p.transfer_ns(bytes);
        self.transfer_free_at = done;
        if p.iops_limit > 0.0 {
            self.iops_free_at = now.max(self.iops_free_at) + p.iops_ns(ios);
            done = done.max(self.iops_free_at);
        }
        if let Some(slot_free_at) = self.slot_free_at.get_mut(slot) {
            *slot_free_at = done;
        }
        self.busy_ns += done - done.min(now.max(self.busy_until));
        self.busy_until = self.busy_until.max(done);
        self.head = Some(offset + bytes);
        self.requests += requests;
        self.bytes += bytes;
        done
    }

    /// When the chunks of `bytes` at `offset` are in, for a request arriving at `now`
    /// (`now` on a volume that is not fetched lazily).
    fn fetched(&mut self, now: Nanos, offset: u64, bytes: u64) -> Nanos {
        let fetch_ns = self.params.fetch_ns();
        self.params
            .chunks_of(offset, bytes)
            .fold(now, |ready, chunk| ready.max(self.fetches.ready_at(now, chunk, fetch_ns)))
    }

    /// Forgets every fetch: the volume is restored from its snapshot again (the data stays;
    /// the counts in `stats` go on).
    pub fn restore(&mut self) {
        let Fetches { count, most_in_flight, .. } = self.fetches;
        self.fetches = Fetches { count, most_in_flight, ..Fetches::new(self.params.fetch_depth) };
    }

    /// Requests served, bytes moved, and the time the device was busy with them.
    pub fn stats(&self) -> Stats {
        Stats {
            requests: self.requests,
            bytes: self.bytes,
            busy_ns: self.busy_ns,
            fetches: self.fetches.count,
            most_fetches_in_flight: self.fetches.most_in_flight,
        }
    }
}

/// What an emulated device has served since it was made.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub requests: u64,
    pub bytes: u64,
    /// The time the model kept the device busy (overlapping requests count once).
    pub busy_ns: Nanos,
    /// Chunks a lazily fetched volume fetched (a chunk again after each restore), and the
    /// most fetches it had in flight at once.
    pub fetches: u64,
    pub most_fetches_in_flight: u32,
}

#[cfg(test)]
mod tests {
    use coldstart_analyze::doctor::{DiskClass, RequestShape};

    use super::*;

    fn params(class: DiskClass) -> DiskParams {
        DiskParams::class_defaults(class)
    }

    #[test]
    fn back_to_back_requests_cost_what_the_model_says() {
        for class in [DiskClass::Hdd, DiskClass::Sd, DiskClass::Hdd7200] {
            let p = params(class);
            let mut clock = DeviceClock::new(p.clone());
            let offsets: Vec<u64> = (0..64u64).map(|i| (i * 7919 % 64) * (3 << 20)).collect();
            let mut now = 0;
            let mut shapes = Vec::new();
            let mut head: Option<u64> = None;
            for &offset in &offsets {
                now = clock.serve(now, offset, 4096);
                shapes.push(RequestShape {
                    bytes: 4096,
                    distance_bytes: head.map(|h| offset as i64 - h as i64),
                });
                head = Some(offset + 4096);
            }
            let modelled = p.cost_ns(&shapes);
            assert!(now.abs_diff(modelled) <= 64, "{class:?}: clock {now} vs model {modelled}");
            assert_eq!(clock.stats().busy_ns, now);
            assert_eq!(clock.stats().requests, 64);
        }
    }

    #[test]
    fn large_reads_cost_requests_of_the_disks_size_however_they_arrive() {
        let p = params(DiskClass::Sd);
        let mut whole = DeviceClock::new(p.clone());
        let done = whole.serve(0, 0, 3 << 20);
        assert_eq!(whole.stats().requests, 6, "3 MiB in requests of 512 KiB");
        assert_eq!(done, p.sequential_read_ns(3 << 20));
        // The same 3 MiB cut by the loop device into pieces of 768 KiB and 256 KiB, all in flight.
        let mut pieces = DeviceClock::new(p.clone());
        let mut offset = 0;
        let mut last = 0;
        for len in [768u64 << 10, 256 << 10].repeat(3) {
            last = pieces.serve(0, offset, len);
            offset += len;
        }
        assert_eq!(pieces.stats().requests, 6);
        assert!(last.abs_diff(done) < 8, "{last} vs {done}");
        // A contiguous read well after the previous one completed is a new request.
        let mut later = DeviceClock::new(p.clone());
        let first = later.serve(0, 0, 4096);
        later.serve(first + PIECE_GAP_NS + 1, 4096, 4096);
        assert_eq!(later.stats().requests, 2);
        let second = later.serve(0, 1 << 30, 4096);
        later.serve(second + PIECE_GAP_NS, (1 << 30) + 4096, 4096);
        assert_eq!(later.stats().requests, 3, "a piece right after continues the request");
    }

    #[test]
    fn a_request_arriving_while_the_disk_is_busy_waits_for_it() {
        let p = params(DiskClass::Sd);
        let mut clock = DeviceClock::new(p.clone());
        let first = clock.serve(0, 0, 4096);
        let second = clock.serve(10, 1 << 20, 4096);
        assert_eq!(first, 1_163_840);
        assert_eq!(second, 2 * 1_163_840, "one request at a time");
        // An idle gap is not busy time.
        let third = clock.serve(10_000_000, 0, 4096);
        assert_eq!(third, 10_000_000 + 1_163_840);
        assert_eq!(clock.stats().busy_ns, 3 * 1_163_840);
    }

    #[test]
    fn the_cloud_volume_overlaps_requests_up_to_its_iops_budget() {
        let p = params(DiskClass::Cloud);
        let mut clock = DeviceClock::new(p.clone());
        // 300 small requests all at once: 32 deep, but no faster than 3000 a second.
        let last = (0..300u64).map(|i| clock.serve(0, i * (1 << 30), 4096)).max().unwrap_or(0);
        assert!(last.abs_diff(100_000_000) < 1_000, "{last}");
        // A merged 1 MiB request counts as four I/Os.
        let mut fresh = DeviceClock::new(p);
        let done: Vec<Nanos> = (0..3).map(|i| fresh.serve(0, i << 20, 1 << 20)).collect();
        assert_eq!(fresh.iops_free_at, 3 * 1_333_333, "4 I/Os each");
        // There the 125 MB/s data path is what bounds them, after the first one's four
        // requests of 256 KiB (0.5 ms each).
        assert_eq!(done[2], 4 * 500_000 + 3 * fresh.params().transfer_ns(1 << 20));
    }

    #[test]
    fn a_snapshot_volume_fetches_each_chunk_once_then_costs_the_cloud_volume() {
        let p = params(DiskClass::Snapshot);
        let cloud = params(DiskClass::Cloud);
        let fetch = p.fetch_ns();
        assert_eq!(fetch, 100_000_000 + 1_666_666, "100 ms, then 512 KiB at 300 MiB/s");
        let mut clock = DeviceClock::new(p.clone());
        let first = clock.serve(0, 4096, 4096);
        let single = cloud.service_ns(RequestShape { bytes: 4096, distance_bytes: None });
        assert_eq!(first, fetch + single, "the fetch, then the cloud volume's request");
        // Another block of the same chunk, well after: the cloud volume alone.
        let later = first + 1_000_000_000;
        let second = clock.serve(later, 256 * 1024, 4096);
        assert_eq!(second - later, single);
        // A block of the next chunk is fetched; one asked for while its fetch is under way waits for it.
        let third = clock.serve(later, 512 * 1024, 4096);
        let fourth = clock.serve(later + 10_000_000, 600 * 1024, 4096);
        assert!(
            third >= later + fetch && fourth >= later + fetch && fourth < later + fetch + 2 * single,
            "{fourth}"
        );
        assert_eq!(clock.stats().fetches, 2);
        // Restored again from the snapshot: the same block costs a fetch again.
        clock.restore();
        let again = 10_000_000_000;
        assert!(clock.serve(again, 4096, 4096) - again >= fetch);
        assert_eq!(clock.stats().fetches, 3, "the counts go on");
    }

    #[test]
    fn fetches_in_flight_never_exceed_the_depth() {
        let p: DiskParams = "custom:base=snapshot,fetch_depth=4,fetch_latency=10ms".parse().unwrap();
        let fetch = p.fetch_ns();
        let mut clock = DeviceClock::new(p);
        // 40 requests in 40 chunks at once: 10 rounds of 4 fetches.
        let last = (0..40u64).map(|i| clock.serve(0, i * (512 << 10), 4096)).max().unwrap_or(0);
        let stats = clock.stats();
        assert_eq!((stats.fetches, stats.most_fetches_in_flight), (40, 4));
        assert!(last >= 10 * fetch && last < 10 * fetch + 2_000_000, "{last} vs {}", 10 * fetch);
        // Requests arriving one after the other at random moments never pass the limit either.
        let mut clock = DeviceClock::new("custom:base=snapshot,fetch_depth=3".parse().unwrap());
        let mut now = 0;
        for i in 0..500u64 {
            now += (i * 7919 % 13) as Nanos * 3_000_000;
            clock.serve(now, (i * 104_729 % 4096) * (512 << 10) + 8192, 64 << 10);
        }
        assert!(clock.stats().most_fetches_in_flight <= 3);
        assert!(clock.stats().most_fetches_in_flight >= 2, "the test asks for fetches at once");
    }

    #[test]
    fn a_request_across_chunks_fetches_them_side_by_side() {
        let p = params(DiskClass::Snapshot);
        let mut clock = DeviceClock::new(p.clone());
        // 1 MiB from 256 KiB: three chunks, fetched at once, then the cloud volume's 1 MiB.
        let done = clock.serve(0, 256 << 10, 1 << 20);
        assert_eq!(clock.stats().fetches, 3);
        assert_eq!(clock.stats().most_fetches_in_flight, 3);
        let mut cloud = DeviceClock::new(params(DiskClass::Cloud));
        assert_eq!(done, p.fetch_ns() + cloud.serve(0, 256 << 10, 1 << 20));
    }
}
