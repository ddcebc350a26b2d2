//! `record --also PID|COMM`: processes outside the command's tree put into the
//! recording (an X server, D-Bus daemons, a display manager). A spec is resolved to
//! pids once, before the command starts; their threads join the scope instance's pid
//! filter, and with `event-fork` the children they start follow.

use std::fmt;
use std::fs;
use std::str::FromStr;

use coldstart_trace::AlsoScope;

use crate::error::{RecordError, Result};

/// One `--also` as typed: a pid, or a command name (`comm`, at most 15 bytes as the kernel keeps it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AlsoSpec {
    Pid(i32),
    Comm(String),
}

/// The kernel keeps the first 15 bytes of a command name.
const COMM_LEN: usize = 15;

impl FromStr for AlsoSpec {
    type Err = String;

    fn from_str(text: &str) -> std::result::Result<AlsoSpec, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("an empty --also: give a pid or a command name (e.g. --also Xvfb)".to_owned());
        }
        if text.bytes().all(|b| b.is_ascii_digit()) {
            return match text.parse::<i32>() {
                Ok(pid) if pid > 0 => Ok(AlsoSpec::Pid(pid)),
                _ => Err(format!("{text} is not a pid")),
            };
        }
        if text.contains('/') || text.contains('\n') {
            return Err(format!(
                "{text:?} is not a command name (a comm has no '/'; give the name, e.g. Xvfb)"
            ));
        }
        Ok(AlsoSpec::Comm(text.to_owned()))
    }
}

impl fmt::Display for AlsoSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlsoSpec::Pid(pid) => write!(f, "{pid}"),
            AlsoSpec::Comm(comm) => f.write_str(comm),
        }
    }
}

fn bad(spec: &AlsoSpec, reason: String) -> RecordError {
    RecordError::BadAlso { spec: spec.to_string(), reason }
}

/// The numbered entries of a /proc directory: pids in /proc, tids in /proc/PID/task.
fn numbered_entries(dir: &str) -> Vec<i32> {
    fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

fn comm_of(pid: i32) -> Option<String> {
    fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|c| c.trim_end_matches('\n').to_owned())
}

/// Whether `pid` is a running process (not a thread of another, not a zombie's leftovers).
fn is_process(pid: i32) -> bool {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status.lines().find_map(|l| l.strip_prefix("Tgid:")).and_then(|v| v.trim().parse::<i32>().ok())
        == Some(pid)
}

/// Resolves every spec to the processes it names now, leaving out `exclude` (the
/// recorder itself); a spec that names none is an error.
pub fn resolve(specs: &[AlsoSpec], exclude: &[i32]) -> Result<Vec<AlsoScope>> {
    specs
        .iter()
        .map(|spec| {
            let pids: Vec<i32> = match spec {
                AlsoSpec::Pid(pid) if is_process(*pid) => vec![*pid],
                AlsoSpec::Pid(pid) => return Err(bad(spec, format!("no process {pid} is running"))),
                AlsoSpec::Comm(name) => {
                    let wanted: String = name
                        .chars()
                        .scan(0, |len, c| {
                            *len += c.len_utf8();
                            (*len <= COMM_LEN).then_some(c)
                        })
                        .collect();
                    let mut pids: Vec<i32> = numbered_entries("/proc")
                        .into_iter()
                        .filter(|pid| !exclude.contains(pid))
                        .filter(|&pid| comm_of(pid).as_deref() == Some(wanted.as_str()))
                        .collect();
                    pids.sort_unstable();
                    if pids.is_empty() {
                        return Err(bad(spec, format!("no running process is named {name}")));
                    }
                    pids
                }
            };
            Ok(AlsoScope { spec: spec.to_string(), pids })
        })
        .collect()
}

/// Every thread of `pids` now, as (tid, pid): `set_event_pid` filters by task, not by process.
pub fn threads_of(pids: &[i32]) -> Vec<(i32, i32)> {
    pids.iter()
        .flat_map(|&pid| {
            let tids = numbered_entries(&format!("/proc/{pid}/task"));
            let tids = if tids.is_empty() { vec![pid] } else { tids };
            tids.into_iter().map(move |tid| (tid, pid))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_pids_or_names_and_bad_ones_say_why() {
        assert_eq!("812".parse::<AlsoSpec>(), Ok(AlsoSpec::Pid(812)));
        assert_eq!(" Xvfb ".parse::<AlsoSpec>(), Ok(AlsoSpec::Comm("Xvfb".into())));
        assert!("".parse::<AlsoSpec>().unwrap_err().contains("empty"));
        assert!("0".parse::<AlsoSpec>().unwrap_err().contains("not a pid"));
        assert!("99999999999".parse::<AlsoSpec>().unwrap_err().contains("not a pid"));
        assert!("/usr/bin/Xvfb".parse::<AlsoSpec>().unwrap_err().contains("not a command name"));
    }

    #[test]
    fn a_name_matches_the_running_processes_of_that_comm_and_a_missing_one_is_an_error() {
        let me = std::process::id() as i32;
        let comm = comm_of(me).unwrap();
        let found = resolve(&[AlsoSpec::Comm(comm.clone())], &[]).unwrap();
        assert!(found[0].pids.contains(&me), "{found:?}");
        assert_eq!(found[0].spec, comm);
        let err = resolve(&[AlsoSpec::Comm("no-such-comm-x".into())], &[]).unwrap_err().to_string();
        assert_eq!(err, "--also no-such-comm-x: no running process is named no-such-comm-x");
        let err = resolve(&[AlsoSpec::Pid(i32::MAX)], &[]).unwrap_err().to_string();
        assert!(err.contains("no process 2147483647 is running"), "{err}");
        assert!(threads_of(&[me]).contains(&(me, me)));
    }
}
