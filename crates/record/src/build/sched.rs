//! Per-thread state intervals from `sched_switch` and `sched_wakeup`: running while
//! on a CPU; after switching out, runnable (preempted), io-wait (D), sleeping
//! (S, I, parked) or stopped (T, t) until woken; runnable from a wakeup until
//! switched in. Intervals of one thread never overlap.
//!
//! A switch from the idle task to a traced thread is missing from a pid-filtered
//! instance on the kernels measured (the wakeup and the switch out are there, the
//! switch in never is), so on an idle machine a woken thread would look runnable
//! until it next switched out. A switch in from a busy CPU is recorded, so a thread
//! seen doing something (an event of its own, or its switch out) while it looks
//! runnable was switched in from idle, right after it became runnable: that interval
//! is running.

use std::collections::HashMap;

use coldstart_trace::{Nanos, SchedInterval, ThreadState, Wakeup};

use crate::ftrace::events::{Event, Timed};

/// Maps `prev_state` to a thread state with the bit letters of the running kernel.
pub struct StateMap {
    bits: Vec<(u64, String)>,
    mask: u64,
}

/// Letters of `prev_state` bits as Linux has printed them since 4.14, used when the
/// format description lists none.
const DEFAULT_BITS: &[(u64, &str)] =
    &[(0x1, "S"), (0x2, "D"), (0x4, "T"), (0x8, "t"), (0x10, "X"), (0x20, "Z"), (0x40, "P"), (0x80, "I")];

/// What a switched-out thread does next: a state, or nothing (it is dead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    State(ThreadState),
    Dead,
}

impl StateMap {
    pub fn new(bits: &[(u64, String)]) -> StateMap {
        let bits: Vec<(u64, String)> = if bits.is_empty() {
            DEFAULT_BITS.iter().map(|(b, l)| (*b, (*l).to_owned())).collect()
        } else {
            bits.to_vec()
        };
        let mask = bits.iter().fold(0, |m, (b, _)| m | b);
        StateMap { bits, mask }
    }

    pub fn after_switch(&self, prev_state: u64) -> After {
        if prev_state & self.mask == 0 {
            return After::State(ThreadState::Runnable);
        }
        let letter = self.bits.iter().find(|(b, _)| prev_state & b != 0).map_or("S", |(_, l)| l.as_str());
        match letter {
            "D" => After::State(ThreadState::IoWait),
            "T" | "t" => After::State(ThreadState::Stopped),
            "X" | "Z" => After::Dead,
            _ => After::State(ThreadState::Sleeping),
        }
    }
}

/// Builds intervals and wakeups for the threads `keep` accepts, clipped to `[0, end]`.
pub fn intervals(
    events: &[Timed],
    states: &StateMap,
    keep: impl Fn(i32) -> bool,
    to_trace: impl Fn(u64) -> Nanos,
    end: Nanos,
) -> (Vec<SchedInterval>, Vec<Wakeup>) {
    let mut open: HashMap<i32, (Nanos, ThreadState)> = HashMap::new();
    let mut out = Vec::new();
    let mut wakeups = Vec::new();
    let close = |out: &mut Vec<SchedInterval>, tid: i32, start: Nanos, state: ThreadState, t: Nanos| {
        let (s, e) = (start.max(0), t.min(end));
        if e > s {
            out.push(SchedInterval { tid, start_ns: s, end_ns: e, state });
        }
    };
    for e in events {
        let t = to_trace(e.ts);
        if let Some(tid) = actor(&e.event)
            && let Some(entry) = open.get_mut(&tid)
            && entry.1 == ThreadState::Runnable
        {
            entry.1 = ThreadState::Running;
        }
        match &e.event {
            Event::Switch { prev_tid, prev_state, next_tid, .. } => {
                if *prev_tid != 0 && keep(*prev_tid) {
                    if let Some((start, state)) = open.remove(prev_tid) {
                        close(&mut out, *prev_tid, start, state, t);
                    }
                    if let After::State(s) = states.after_switch(*prev_state) {
                        open.insert(*prev_tid, (t, s));
                    }
                }
                if *next_tid != 0 && keep(*next_tid) {
                    if let Some((start, state)) = open.remove(next_tid) {
                        close(&mut out, *next_tid, start, state, t);
                    }
                    open.insert(*next_tid, (t, ThreadState::Running));
                }
            }
            Event::Wakeup { tid, waker, .. } if keep(*tid) => {
                if (0..=end).contains(&t) {
                    wakeups.push(Wakeup { t_ns: t, tid: *tid, waker_tid: *waker });
                }
                match open.get(tid) {
                    Some((_, ThreadState::Running | ThreadState::Runnable)) => {}
                    Some(&(start, state)) => {
                        close(&mut out, *tid, start, state, t);
                        open.insert(*tid, (t, ThreadState::Runnable));
                    }
                    None => {
                        open.insert(*tid, (t, ThreadState::Runnable));
                    }
                }
            }
            _ => {}
        }
    }
    for (tid, (start, state)) in open {
        close(&mut out, tid, start, state, end);
    }
    out.sort_by_key(|s| (s.tid, s.start_ns));
    (out, wakeups)
}

/// The thread an event shows running (the task current when it was recorded), if any.
fn actor(event: &Event) -> Option<i32> {
    let tid = match event {
        Event::PageCacheAdd { tid, .. }
        | Event::PageAccess { tid, .. }
        | Event::Readahead { tid, .. }
        | Event::BlockIssue { tid, .. }
        | Event::Exec { tid, .. }
        | Event::Exit { tid, .. }
        | Event::Print { tid, .. } => *tid,
        Event::Fork { parent_tid, .. } => *parent_tid,
        Event::Switch { prev_tid, .. } => *prev_tid,
        Event::Wakeup { waker: Some(waker), .. } => *waker,
        _ => return None,
    };
    (tid != 0).then_some(tid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ftrace::events::Comm;

    fn switch(ts: u64, prev: i32, state: u64, next: i32) -> Timed {
        let c = Comm::default();
        Timed {
            ts,
            cpu: 0,
            event: Event::Switch {
                prev_tid: prev,
                prev_state: state,
                prev_comm: c,
                next_tid: next,
                next_comm: c,
            },
        }
    }

    #[test]
    fn switch_wakeup_cycle_gives_non_overlapping_states() {
        let events = vec![
            switch(10, 0, 0, 5),
            switch(20, 5, 0x2, 0),
            Timed { ts: 50, cpu: 1, event: Event::Wakeup { tid: 5, waker: None, new: false } },
            switch(60, 0, 0, 5),
            switch(70, 5, 0x100, 9),
            switch(80, 9, 0x1, 5),
        ];
        let (iv, wk) = intervals(&events, &StateMap::new(&[]), |t| t == 5, |ts| ts as i64, 100);
        let got: Vec<_> = iv.iter().map(|s| (s.start_ns, s.end_ns, s.state)).collect();
        assert_eq!(
            got,
            vec![
                (10, 20, ThreadState::Running),
                (20, 50, ThreadState::IoWait),
                (50, 60, ThreadState::Runnable),
                (60, 70, ThreadState::Running),
                (70, 80, ThreadState::Runnable),
                (80, 100, ThreadState::Running),
            ]
        );
        assert_eq!(wk, vec![Wakeup { t_ns: 50, tid: 5, waker_tid: None }]);
    }

    #[test]
    fn a_thread_seen_running_without_its_switch_in_ran_from_its_wakeup() {
        let page = |ts: u64, tid: i32| Timed {
            ts,
            cpu: 0,
            event: Event::PageCacheAdd { tid, dev: 1, ino: 2, index: 0, order: 0 },
        };
        let events = vec![
            switch(10, 0, 0, 5),
            switch(20, 5, 0x2, 0),
            // Woken from idle: no switch in is recorded, but it adds a page, then sleeps.
            Timed { ts: 50, cpu: 1, event: Event::Wakeup { tid: 5, waker: None, new: false } },
            page(55, 5),
            switch(70, 5, 0x1, 0),
            // Woken again, seen only by its switch out.
            Timed { ts: 80, cpu: 1, event: Event::Wakeup { tid: 5, waker: None, new: false } },
            switch(90, 5, 0x1, 0),
            // A recorded switch in keeps the wait for a CPU before it.
            Timed { ts: 100, cpu: 1, event: Event::Wakeup { tid: 5, waker: None, new: false } },
            switch(104, 9, 0, 5),
            page(106, 5),
        ];
        let (iv, _) = intervals(&events, &StateMap::new(&[]), |t| t == 5, |ts| ts as i64, 110);
        let got: Vec<_> = iv.iter().map(|s| (s.start_ns, s.end_ns, s.state)).collect();
        assert_eq!(
            got,
            vec![
                (10, 20, ThreadState::Running),
                (20, 50, ThreadState::IoWait),
                (50, 70, ThreadState::Running),
                (70, 80, ThreadState::Sleeping),
                (80, 90, ThreadState::Running),
                (90, 100, ThreadState::Sleeping),
                (100, 104, ThreadState::Runnable),
                (104, 110, ThreadState::Running),
            ]
        );
    }
}
