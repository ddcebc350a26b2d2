//! The CPU class and I/O priority of the replay threads: what `--cpu` and
//! `--io-priority` ask for, and setting them on the calling thread.

use serde::{Deserialize, Serialize};

use super::sys;

/// The CPU scheduling class of the replay threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuClass {
    /// Inherited (normally `SCHED_OTHER` at the caller's nice level).
    #[default]
    Normal,
    /// `SCHED_IDLE`: a replay thread runs only when no other task wants the CPU, so
    /// it never delays the program it runs alongside (no privilege needed).
    Idle,
}

impl CpuClass {
    /// Sets the class of the calling thread.
    pub fn apply_to_this_thread(self) -> std::io::Result<()> {
        match self {
            CpuClass::Normal => Ok(()),
            CpuClass::Idle => sys::schedule_this_thread_idle(),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            CpuClass::Normal => "normal",
            CpuClass::Idle => "idle",
        }
    }
}

/// An I/O priority (`ioprio_set(2)`): the class and, for real-time and best-effort,
/// the level 0 (highest) to 7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "class", content = "level")]
pub enum IoPriority {
    RealTime(u8),
    BestEffort(u8),
    Idle,
}

impl IoPriority {
    /// The value `ioprio_set(2)` takes: the class above 13 bits of level.
    fn value(self) -> i32 {
        const SHIFT: i32 = 13;
        match self {
            IoPriority::RealTime(l) => (1 << SHIFT) | i32::from(l.min(7)),
            IoPriority::BestEffort(l) => (2 << SHIFT) | i32::from(l.min(7)),
            IoPriority::Idle => 3 << SHIFT,
        }
    }

    /// Sets the priority of the calling thread (and of the I/O it submits).
    pub fn apply_to_this_thread(self) -> std::io::Result<()> {
        sys::set_this_thread_io_priority(self.value())
    }
}

impl std::fmt::Display for IoPriority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IoPriority::RealTime(l) => write!(f, "rt:{l}"),
            IoPriority::BestEffort(l) => write!(f, "be:{l}"),
            IoPriority::Idle => write!(f, "idle"),
        }
    }
}

impl std::str::FromStr for IoPriority {
    type Err = String;

    /// `rt:N`, `be:N` (N 0–7, 0 highest) or `idle`.
    fn from_str(s: &str) -> Result<IoPriority, String> {
        let err = || format!("not an I/O priority: {s:?} (expected rt:0-7, be:0-7 or idle)");
        if s == "idle" {
            return Ok(IoPriority::Idle);
        }
        let (class, level) = s.split_once(':').ok_or_else(err)?;
        let level: u8 = level.parse().ok().filter(|l| *l <= 7).ok_or_else(err)?;
        match class {
            "rt" => Ok(IoPriority::RealTime(level)),
            "be" => Ok(IoPriority::BestEffort(level)),
            _ => Err(err()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_priorities_parse_and_encode() {
        assert_eq!("be:4".parse(), Ok(IoPriority::BestEffort(4)));
        assert_eq!("idle".parse(), Ok(IoPriority::Idle));
        assert_eq!("rt:0".parse(), Ok(IoPriority::RealTime(0)));
        assert!("be:8".parse::<IoPriority>().is_err());
        assert!("best".parse::<IoPriority>().is_err());
        assert_eq!(IoPriority::BestEffort(4).value(), (2 << 13) | 4);
        assert_eq!(IoPriority::Idle.value(), 3 << 13);
        assert_eq!(IoPriority::RealTime(3).to_string(), "rt:3");
    }

    #[test]
    fn the_idle_cpu_class_makes_the_thread_sched_idle() {
        let policy_after = |class: CpuClass| {
            std::thread::spawn(move || {
                class.apply_to_this_thread().unwrap();
                sys::scheduling_policy_of_this_thread()
            })
            .join()
            .unwrap()
        };
        let inherited = sys::scheduling_policy_of_this_thread();
        assert_eq!(policy_after(CpuClass::Normal), inherited);
        assert_eq!(policy_after(CpuClass::Idle), sys::SCHED_IDLE);
    }
}
