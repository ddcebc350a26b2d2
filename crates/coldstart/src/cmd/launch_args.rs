//! The arguments that start a command and say when its start is over, shared by
//! `record`, `run` and `bench` (flattened into each). Their value parsers return
//! typed values, so a bad `--until` or `--timeout` is refused by clap before
//! anything starts; the readiness forms are listed only here, from
//! [`Until::FORMS`].

use std::time::Duration;

use coldstart_analyze::units::DURATION_SYNTAX;
use coldstart_launch::{RunAs, Until};

use crate::cmd::values;

/// How a command is launched and when it counts as ready.
#[derive(Debug, Clone, clap::Args)]
pub struct LaunchArgs {
    #[arg(long, value_name = "WHEN", default_value = "exit", help = until_help(), long_help = until_long_help())]
    pub until: Vec<Until>,
    #[arg(long, value_name = "DURATION", value_parser = values::positive_duration, help = timeout_help())]
    pub timeout: Option<Duration>,
    /// Under sudo, run the command as root instead of as the invoking user.
    #[arg(long)]
    pub as_root: bool,
}

impl LaunchArgs {
    pub fn run_as(&self) -> RunAs {
        if self.as_root { RunAs::Current } else { RunAs::Invoker }
    }

    /// True when a condition reads the command's output, which must then be watched.
    pub fn watches_output(&self) -> bool {
        self.until.iter().any(Until::watches_output)
    }
}

/// ` by pid N (thread T)`, as far as is known who reached a milestone or readiness.
pub fn reached_by(pid: Option<i32>, tid: Option<i32>) -> String {
    match (pid, tid) {
        (Some(pid), Some(tid)) => format!(" by pid {pid} (thread {tid})"),
        (Some(pid), None) => format!(" by pid {pid}"),
        _ => String::new(),
    }
}

fn until_help() -> String {
    format!("When the start is over (repeatable: ready when all are met): {}", Until::forms_list())
}

fn until_long_help() -> String {
    let width = Until::FORMS.iter().map(|(form, _)| form.len()).max().unwrap_or(0);
    let forms: Vec<String> =
        Until::FORMS.iter().map(|(form, meaning)| format!("  {form:width$}  {meaning}")).collect();
    format!(
        "When the start is over; the command and everything it started are then ended:\n{}\n\n{}\n\n\
         Repeat --until to wait for several conditions, e.g. --until wm --until \
         window:mate-panel: each one met is a milestone (a mark of source `until` in the trace, with \
         its time and the process that reached it), and the start is ready when all are met, at the \
         last of them, credited to the process and thread that met it.",
        forms.join("\n"),
        Until::WINDOW_NOTE
    )
}

fn timeout_help() -> String {
    format!("Give up waiting for readiness after this long ({DURATION_SYNTAX})")
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use proptest::prelude::*;

    use super::*;

    #[derive(Debug, clap::Parser)]
    struct Cli {
        #[command(flatten)]
        launch: LaunchArgs,
    }

    fn parse(args: &[&str]) -> Result<LaunchArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("coldstart").chain(args.iter().copied())).map(|cli| cli.launch)
    }

    #[test]
    fn typed_values_by_default_and_as_given() {
        let launch = parse(&[]).unwrap();
        assert_eq!(
            (&launch.until[..], launch.timeout, launch.run_as()),
            (&[Until::Exit][..], None, RunAs::Invoker)
        );
        let launch = parse(&["--until", "idle:800", "--timeout", "1.5", "--as-root"]).unwrap();
        assert_eq!(launch.until, ["idle:800".parse::<Until>().unwrap()]);
        assert_eq!(launch.timeout, Some(Duration::from_millis(1500)));
        assert_eq!(launch.run_as(), RunAs::Current);
        assert_eq!(parse(&["--timeout", "250ms"]).unwrap().timeout, Some(Duration::from_millis(250)));
    }

    #[test]
    fn bad_values_are_refused_while_parsing() {
        for arg in [
            "--timeout=nan",
            "--timeout=-1",
            "--timeout=inf",
            "--timeout=0",
            "--until=idle:0",
            "--until=bogus",
            "--until=mark:",
            "--until=window:",
            "--until=window:/[/",
            "--until=window://",
            "--until=window-name:",
            "--until=bogus:x",
        ] {
            let err = parse(&[arg]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{arg}");
        }
    }

    #[test]
    fn until_repeats_and_keeps_the_order_given() {
        let launch = parse(&["--until", "window:marco", "--until", "window-name:/^Home/"]).unwrap();
        let texts: Vec<String> = launch.until.iter().map(Until::to_string).collect();
        assert_eq!(texts, ["window:marco", "window-name:/^Home/"]);
        assert!(!launch.watches_output());
        assert!(parse(&["--until", "exit", "--until", "output:x"]).unwrap().watches_output());
    }

    #[test]
    fn the_help_lists_every_readiness_form() {
        let help = until_long_help();
        for (form, _) in Until::FORMS {
            assert!(help.contains(form), "{form} missing from {help}");
        }
        assert!(help.contains("Wayland") && help.contains("ready when all are met"), "{help}");
    }

    proptest! {
        #[test]
        fn until_parsing_never_panics(text in "\\PC*") {
            let _ = parse(&["--until", &text]);
        }

        #[test]
        fn an_until_that_parses_round_trips_through_its_display(
            text in "(exit|window|idle|idle:[0-9]{1,8}|mark:[^\t\n]{1,20}|output:[a-z^$.*+?()|\\\\]{1,12}|window(-name)?:/?[a-z^$.*+?()|\\\\]{0,12}/?|[a-z]{1,8}:?.{0,8})"
        ) {
            if let Ok(until) = text.parse::<Until>() {
                let again: Until = until.to_string().parse().unwrap();
                prop_assert_eq!(again.to_string(), until.to_string());
                prop_assert!(again == until);
            }
        }
    }
}
