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
    pub until: Until,
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
}

fn until_help() -> String {
    format!("When the start is over: {}", Until::forms_list())
}

fn until_long_help() -> String {
    let width = Until::FORMS.iter().map(|(form, _)| form.len()).max().unwrap_or(0);
    let forms: Vec<String> =
        Until::FORMS.iter().map(|(form, meaning)| format!("  {form:width$}  {meaning}")).collect();
    format!(
        "When the start is over; the command and everything it started are then ended:\n{}",
        forms.join("\n")
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
        assert_eq!((&launch.until, launch.timeout, launch.run_as()), (&Until::Exit, None, RunAs::Invoker));
        let launch = parse(&["--until", "idle:800", "--timeout", "1.5", "--as-root"]).unwrap();
        assert_eq!(launch.until.to_string(), "idle:800");
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
        ] {
            let err = parse(&[arg]).unwrap_err();
            assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation, "{arg}");
        }
    }

    #[test]
    fn the_help_lists_every_readiness_form() {
        let help = until_long_help();
        for (form, _) in Until::FORMS {
            assert!(help.contains(form), "{form} missing from {help}");
        }
    }

    proptest! {
        #[test]
        fn until_parsing_never_panics(text in "\\PC*") {
            let _ = parse(&["--until", &text]);
        }

        #[test]
        fn an_until_that_parses_round_trips_through_its_display(
            text in "(exit|window|idle|idle:[0-9]{1,8}|mark:[^\t\n]{1,20}|output:[a-z^$.*+?()|\\\\]{1,12}|[a-z]{1,8}:?.{0,8})"
        ) {
            if let Ok(until) = text.parse::<Until>() {
                let again: Until = until.to_string().parse().unwrap();
                prop_assert_eq!(again.to_string(), until.to_string());
                prop_assert!(again == until);
            }
        }
    }
}
