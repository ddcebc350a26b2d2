//! Parts of the recorder that `record --without` leaves out, so that the cost of each can
//! be measured on its own (bench/recorder-cost.sh). A trace recorded without a part lacks
//! its data and says so in a note; the analysis treats it as a kernel without those events.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

/// One part of what the recorder captures while the command runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Part {
    /// The fanotify group that names the files opened (paths, sizes, times).
    Fanotify,
    /// The page-access and readahead events (`mm_filemap_get_pages`, faults, fault-around).
    PageAccess,
    /// The scheduler's switch and wakeup events (process events stay).
    Scheduler,
    /// The /proc sampler (process states, CPU and disk counters).
    Sampler,
}

impl Part {
    pub const ALL: [Part; 4] = [Part::Fanotify, Part::PageAccess, Part::Scheduler, Part::Sampler];

    pub fn name(self) -> &'static str {
        match self {
            Part::Fanotify => "fanotify",
            Part::PageAccess => "page-access",
            Part::Scheduler => "scheduler",
            Part::Sampler => "sampler",
        }
    }

    /// What a trace recorded without this part lacks, for its note.
    pub fn consequence(self) -> &'static str {
        match self {
            Part::Fanotify => {
                "opens are not recorded and files are named only where another source names them"
            }
            Part::PageAccess => "page accesses and readahead decisions are not recorded",
            Part::Scheduler => "scheduler switches and wakeups are not recorded (no waits, no critical path)",
            Part::Sampler => "process states and CPU and disk counters are not sampled",
        }
    }
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Part {
    type Err = String;

    fn from_str(s: &str) -> Result<Part, String> {
        Part::ALL.into_iter().find(|p| p.name() == s).ok_or_else(|| {
            let names: Vec<&str> = Part::ALL.iter().map(|p| p.name()).collect();
            format!("unknown part `{s}`: one of {}", names.join(", "))
        })
    }
}

/// The parts left out of a recording (none by default).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Without(pub BTreeSet<Part>);

impl Without {
    pub fn has(&self, part: Part) -> bool {
        self.0.contains(&part)
    }

    /// One note per part left out.
    pub fn notes(&self) -> Vec<String> {
        self.0.iter().map(|p| format!("recorded --without {p}: {}", p.consequence())).collect()
    }
}

impl FromStr for Without {
    type Err = String;

    /// A comma-separated list of parts, e.g. `fanotify,sampler`.
    fn from_str(s: &str) -> Result<Without, String> {
        s.split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(Part::from_str)
            .collect::<Result<_, _>>()
            .map(Without)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_list_of_parts_and_refuses_an_unknown_one() {
        let w: Without = "fanotify, sampler".parse().unwrap();
        assert!(w.has(Part::Fanotify) && w.has(Part::Sampler) && !w.has(Part::Scheduler));
        assert_eq!(w.notes().len(), 2);
        let err = "fanotify,disk".parse::<Without>().unwrap_err();
        assert!(err.contains("unknown part `disk`") && err.contains("page-access"), "{err}");
    }
}
