//! How the traced command ended, said the same way by `record`, every report and the
//! doctor: its exit status, the signal behind it, and whether coldstart ended it — a
//! command still running when the start is ready is ended by coldstart (SIGTERM, then
//! SIGKILL), so a login recorded to its panel exits 143 without anything going wrong.

use coldstart_trace::{Nanos, ReadyReason, Trace};

use crate::analysis::{CommandExit, ReadyInfo};

/// The usual name of signal `n` (the numbers every Linux architecture shares).
fn signal_name(n: i32) -> Option<&'static str> {
    Some(match n {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        4 => "SIGILL",
        6 => "SIGABRT",
        8 => "SIGFPE",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// How the command ended, from its exit status in the trace, the readiness point and the
/// root process's exit; `None` when the trace has no exit status (a boot, an import).
pub(crate) fn command_exit(
    trace: &Trace,
    ready: Option<&ReadyInfo>,
    trace_end: Nanos,
) -> Option<CommandExit> {
    let status = trace.meta.exit_code?;
    let signal = (status > 128).then(|| signal_name(status - 128)).flatten().map(str::to_owned);
    let root_end = trace
        .meta
        .root_pid
        .and_then(|pid| trace.processes.iter().rev().find(|p| p.pid == pid && p.in_scope).map(|p| p.end_ns));
    // The root still running at ready (or at the end), or ending after it: coldstart ended it.
    let until = match ready {
        Some(r) if r.reason != ReadyReason::Exit => {
            Some((r.t_ns, format!("once the start was ready ({})", r.reason)))
        }
        Some(_) => None,
        None => Some((trace_end, "when the recording ended".to_owned())),
    };
    let ended_by = until.filter(|(t, _)| root_end.is_none_or(|end| end.is_none_or(|end| end >= *t)));
    let text = match (&ended_by, &signal) {
        // coldstart sends SIGKILL only when its SIGTERM did not end the tree within the grace period.
        (Some((_, when)), Some(sig)) if sig == "SIGKILL" => {
            format!("exit status {status}: ended by coldstart's SIGKILL after its SIGTERM, {when}")
        }
        (Some((_, when)), Some(sig)) => format!("exit status {status}: ended by coldstart's {sig} {when}"),
        (Some((_, when)), None) => format!("exit status {status}, after coldstart's SIGTERM {when}"),
        (None, Some(sig)) => format!("exit status {status} (killed by {sig})"),
        (None, None) => format!("exit status {status}"),
    };
    Some(CommandExit { status, signal, by_coldstart: ended_by.is_some(), text })
}

#[cfg(test)]
mod tests {
    use super::*;
    use coldstart_trace::{Meta, Process};

    fn ended(status: i32, reason: ReadyReason, root_end: Option<Nanos>) -> CommandExit {
        let trace = Trace {
            meta: Meta { exit_code: Some(status), root_pid: Some(10), ..Meta::default() },
            processes: vec![Process { pid: 10, end_ns: root_end, in_scope: true, ..Process::default() }],
            ..Trace::default()
        };
        let ready = ReadyInfo { t_ns: 1_000, reason, time_to_ready_ns: 1_000, pid: 10, tid: 10 };
        command_exit(&trace, Some(&ready), 2_000).unwrap()
    }

    #[test]
    fn a_command_still_running_at_ready_was_ended_by_coldstart() {
        let login = ended(143, "window:mate-panel".parse().unwrap(), None);
        assert!(login.by_coldstart);
        assert_eq!(
            login.text,
            "exit status 143: ended by coldstart's SIGTERM once the start was ready (window:mate-panel)"
        );
        let killed = ended(137, "window:mate-panel".parse().unwrap(), Some(1_500));
        assert_eq!(killed.signal.as_deref(), Some("SIGKILL"));
        assert!(killed.by_coldstart);
        assert_eq!(
            killed.text,
            "exit status 137: ended by coldstart's SIGKILL after its SIGTERM, once the start was ready (window:mate-panel)"
        );
    }

    #[test]
    fn a_command_that_exited_on_its_own_says_so() {
        let done = ended(0, ReadyReason::Exit, Some(1_000));
        assert_eq!((done.by_coldstart, done.text.as_str()), (false, "exit status 0"));
        let crashed = ended(139, ReadyReason::Exit, Some(1_000));
        assert_eq!(crashed.text, "exit status 139 (killed by SIGSEGV)");
        // Exited before its readiness point came: not coldstart's doing.
        let early = ended(1, "window:app".parse().unwrap(), Some(500));
        assert_eq!((early.by_coldstart, early.text.as_str()), (false, "exit status 1"));
    }
}
