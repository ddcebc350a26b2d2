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
//!
//! The switch out of some threads is never recorded either (on the VMs measured, those
//! of the guest agent that is PID 1: each is switched in, never out). A thread still
//! running on a CPU where another task then shows itself, or that then switches from
//! idle, left it after its last sign of life there: it ran until then, and is shown
//! sleeping from then until it is woken or switched in again.
//!
//! A wakeup's waker comes from `sched_waking` (traced in the waker's context) when
//! `sched_wakeup` names none: a wakeup of a task on an idle CPU is traced on that CPU
//! from the interrupt that delivers it. Such a wakeup is then timed at the `sched_waking`,
//! when the waker was surely running: by the time the interrupt arrives the waker may
//! have gone to sleep itself (a thread that signals another, then waits for it).

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
    let mut timeline = Timeline { end, ..Timeline::default() };
    for e in events {
        let t = to_trace(e.ts);
        let acting = actor(&e.event);
        timeline.track_cpu(e, t, acting);
        if let Some(tid) = acting {
            timeline.seen_running(tid);
        }
        match &e.event {
            Event::Switch { prev_tid, prev_state, next_tid, .. } => {
                if *prev_tid != 0 && keep(*prev_tid) {
                    timeline.switched_out(t, *prev_tid, states.after_switch(*prev_state));
                }
                if *next_tid != 0 && keep(*next_tid) {
                    timeline.switched_in(t, *next_tid);
                }
            }
            Event::Waking { tid, waker } if keep(*tid) => timeline.waking(t, *tid, *waker),
            Event::Wakeup { tid, waker, .. } if keep(*tid) => timeline.wakeup(t, *tid, *waker),
            _ => {}
        }
    }
    timeline.finish()
}

/// The intervals and wakeups found so far, and what is open.
#[derive(Default)]
struct Timeline {
    end: Nanos,
    /// Per thread: the state it is in, since when.
    open: HashMap<i32, (Nanos, ThreadState)>,
    /// Per thread: its last `sched_waking` from a task (time, waker).
    waking: HashMap<i32, (Nanos, i32)>,
    /// Per CPU: the task last seen on it (switched in, or running an event), and when.
    on_cpu: Vec<(i32, Nanos)>,
    cpu_of: HashMap<i32, u16>,
    out: Vec<SchedInterval>,
    wakeups: Vec<Wakeup>,
}

impl Timeline {
    fn close(&mut self, tid: i32, start: Nanos, state: ThreadState, t: Nanos) {
        let (s, e) = (start.max(0), t.min(self.end));
        if e > s {
            self.out.push(SchedInterval { tid, start_ns: s, end_ns: e, state });
        }
    }

    /// Follows which task each CPU runs. A running thread whose switch out was never
    /// traced ends its run at its last sign of life on a CPU where another task then
    /// shows itself.
    fn track_cpu(&mut self, e: &Timed, t: Nanos, acting: Option<i32>) {
        let cpu = usize::from(e.cpu);
        if self.on_cpu.len() <= cpu {
            self.on_cpu.resize(cpu + 1, (0, 0));
        }
        let current = match &e.event {
            Event::Switch { prev_tid, .. } => Some(*prev_tid),
            _ => acting,
        };
        if let Some(now) = current {
            let (gone, last_seen) = self.on_cpu[cpu];
            if gone != now
                && gone != 0
                && self.cpu_of.get(&gone) == Some(&e.cpu)
                && let Some(&(start, ThreadState::Running)) = self.open.get(&gone)
            {
                self.close(gone, start, ThreadState::Running, last_seen);
                self.open.insert(gone, (last_seen.max(start), ThreadState::Sleeping));
            }
        }
        match (&e.event, current) {
            (Event::Switch { next_tid, .. }, _) => {
                self.on_cpu[cpu] = (*next_tid, t);
                self.cpu_of.insert(*next_tid, e.cpu);
            }
            (_, Some(now)) if self.on_cpu[cpu].0 == now => self.on_cpu[cpu].1 = t,
            (_, Some(now)) => {
                self.on_cpu[cpu] = (now, t);
                self.cpu_of.insert(now, e.cpu);
            }
            _ => {}
        }
    }

    /// A thread seen acting while it looks runnable ran from its wakeup.
    fn seen_running(&mut self, tid: i32) {
        if let Some(entry) = self.open.get_mut(&tid)
            && entry.1 == ThreadState::Runnable
        {
            entry.1 = ThreadState::Running;
        }
    }

    fn switched_out(&mut self, t: Nanos, tid: i32, after: After) {
        if let Some((start, state)) = self.open.remove(&tid) {
            self.close(tid, start, state, t);
        }
        if let After::State(s) = after {
            self.open.insert(tid, (t, s));
        }
    }

    fn switched_in(&mut self, t: Nanos, tid: i32) {
        if let Some((start, state)) = self.open.remove(&tid) {
            self.close(tid, start, state, t);
        }
        self.open.insert(tid, (t, ThreadState::Running));
    }

    fn waking(&mut self, t: Nanos, tid: i32, waker: Option<i32>) {
        match waker {
            Some(w) => {
                self.waking.insert(tid, (t, w));
            }
            None => {
                self.waking.remove(&tid);
            }
        }
    }

    /// A wakeup from an interrupt takes its waker and time from the `sched_waking`
    /// traced in the waker's context.
    fn wakeup(&mut self, t: Nanos, tid: i32, waker: Option<i32>) {
        let by = self.waking.remove(&tid);
        let (woken_t, waker) = match (waker, by) {
            (None, Some((at, w))) => (at, Some(w)),
            _ => (t, waker),
        };
        if (0..=self.end).contains(&woken_t) {
            self.wakeups.push(Wakeup { t_ns: woken_t, tid, waker_tid: waker });
        }
        match self.open.get(&tid) {
            Some((_, ThreadState::Running | ThreadState::Runnable)) => {}
            Some(&(start, state)) => {
                self.close(tid, start, state, t);
                self.open.insert(tid, (t, ThreadState::Runnable));
            }
            None => {
                self.open.insert(tid, (t, ThreadState::Runnable));
            }
        }
    }

    fn finish(mut self) -> (Vec<SchedInterval>, Vec<Wakeup>) {
        let open: Vec<_> = self.open.drain().collect();
        for (tid, (start, state)) in open {
            self.close(tid, start, state, self.end);
        }
        self.out.sort_by_key(|s| (s.tid, s.start_ns));
        // A wakeup timed at its sched_waking can precede events recorded before its sched_wakeup.
        self.wakeups.sort_by_key(|w| w.t_ns);
        (self.out, self.wakeups)
    }
}

/// The thread an event shows running (the task current when it was recorded), if any.
fn actor(event: &Event) -> Option<i32> {
    let tid = match event {
        Event::PageCacheAdd { tid, .. }
        | Event::PageAccess { tid, .. }
        | Event::Readahead { tid, .. }
        | Event::BlockIssue { tid, .. }
        | Event::BlockStart { tid, .. }
        | Event::Exec { tid, .. }
        | Event::Exit { tid, .. }
        | Event::Print { tid, .. } => *tid,
        Event::Fork { parent_tid, .. } => *parent_tid,
        Event::Switch { prev_tid, .. } => *prev_tid,
        Event::Wakeup { waker: Some(waker), .. } | Event::Waking { waker: Some(waker), .. } => *waker,
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

    fn wakeup(ts: u64, tid: i32, waker: Option<i32>) -> Timed {
        Timed { ts, cpu: 1, event: Event::Wakeup { tid, waker, new: false } }
    }

    fn waking(ts: u64, tid: i32, waker: Option<i32>) -> Timed {
        Timed { ts, cpu: 0, event: Event::Waking { tid, waker } }
    }

    /// The intervals of `tid`, as (start, end, state).
    fn states_of(intervals: &[SchedInterval], tid: i32) -> Vec<(Nanos, Nanos, ThreadState)> {
        intervals.iter().filter(|s| s.tid == tid).map(|s| (s.start_ns, s.end_ns, s.state)).collect()
    }

    #[test]
    fn switch_wakeup_cycle_gives_non_overlapping_states() {
        let events = vec![
            switch(10, 0, 0, 5),
            switch(20, 5, 0x2, 0),
            wakeup(50, 5, None),
            switch(60, 0, 0, 5),
            switch(70, 5, 0x100, 9),
            switch(80, 9, 0x1, 5),
        ];
        let (iv, wk) = intervals(&events, &StateMap::new(&[]), |t| t == 5, |ts| ts as i64, 100);
        assert_eq!(
            states_of(&iv, 5),
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
            wakeup(50, 5, None),
            page(55, 5),
            switch(70, 5, 0x1, 0),
            // Woken again, seen only by its switch out.
            wakeup(80, 5, None),
            switch(90, 5, 0x1, 0),
            // A recorded switch in keeps the wait for a CPU before it.
            wakeup(100, 5, None),
            switch(104, 9, 0, 5),
            page(106, 5),
        ];
        let (iv, _) = intervals(&events, &StateMap::new(&[]), |t| t == 5, |ts| ts as i64, 110);
        assert_eq!(
            states_of(&iv, 5),
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

    #[test]
    fn a_thread_never_switched_out_ran_until_its_last_sign_of_life_on_its_cpu() {
        let on = |cpu: u16, t: Timed| Timed { cpu, ..t };
        let page = |ts: u64, cpu: u16, tid: i32| Timed {
            ts,
            cpu,
            event: Event::PageCacheAdd { tid, dev: 1, ino: 2, index: 0, order: 0 },
        };
        let events = vec![
            // 5 is switched in on CPU 1 and never out: it adds a page at 15, then the CPU
            // goes idle (a switch from idle at 40 shows it); switched in on CPU 0 at 60.
            on(1, switch(10, 9, 0x1, 5)),
            page(15, 1, 5),
            on(1, switch(40, 0, 0, 7)),
            on(0, switch(60, 8, 0x1, 5)),
            page(65, 0, 5),
            // 6 is switched in on CPU 0 at 70 (5's switch out there is missing too, so 5
            // left before), then on CPU 1 at 80: CPU 0's next task ends nothing of 6's.
            on(0, switch(70, 0, 0, 6)),
            on(1, switch(80, 7, 0x1, 6)),
            page(85, 0, 8),
        ];
        let (iv, _) = intervals(&events, &StateMap::new(&[]), |t| t == 5 || t == 6, |ts| ts as i64, 100);
        assert_eq!(
            states_of(&iv, 5),
            vec![
                (10, 15, ThreadState::Running),
                (15, 60, ThreadState::Sleeping),
                (60, 65, ThreadState::Running),
                (65, 100, ThreadState::Sleeping),
            ]
        );
        assert_eq!(states_of(&iv, 6), vec![(70, 80, ThreadState::Running), (80, 100, ThreadState::Running)]);
    }

    #[test]
    fn the_waker_comes_from_sched_waking_when_the_wakeup_names_none() {
        let events = vec![
            switch(10, 5, 0x1, 7),
            // 7 wakes 5 onto an idle CPU, where the wakeup is traced from the interrupt, by
            // which time 7 has gone to sleep itself (waiting for 5), and been woken again.
            waking(20, 5, Some(7)),
            switch(22, 7, 0x1, 0),
            wakeup(23, 7, None),
            wakeup(25, 5, None),
            switch(30, 5, 0x1, 0),
            // Woken from an interrupt (an I/O completion): no waker either way.
            waking(40, 5, None),
            wakeup(41, 5, None),
            switch(50, 5, 0x1, 0),
            // A waker named by the wakeup itself stays, at the wakeup's time.
            waking(60, 5, Some(7)),
            wakeup(61, 5, Some(8)),
        ];
        let (iv, wk) = intervals(&events, &StateMap::new(&[]), |t| t == 5 || t == 7, |ts| ts as i64, 100);
        // In time order, the one timed at its sched_waking before the one recorded before it.
        let got: Vec<_> = wk.iter().map(|w| (w.t_ns, w.tid, w.waker_tid)).collect();
        assert_eq!(got, vec![(20, 5, Some(7)), (23, 7, None), (41, 5, None), (61, 5, Some(8))]);
        // The waker was running when the wakeup is timed; the woken thread slept until its
        // wakeup reached it.
        assert_eq!(states_of(&iv, 7)[0], (10, 22, ThreadState::Running));
        assert_eq!(states_of(&iv, 5)[0], (10, 25, ThreadState::Sleeping));
    }
}
