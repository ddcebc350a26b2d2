//! The subcommands and their dispatch. Each subcommand's arguments live in its own
//! module under `cmd/`; clap types stop there and never reach the library crates.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::cmd;

/// Measure, explain and remove the time programs lose when they start with a cold page cache.
#[derive(Debug, Parser)]
#[command(name = "coldstart", version, about, max_term_width = 100)]
#[command(after_help = "Exit status: 0 on success, 2 on an error of coldstart itself; `record` exits with \
the traced command's status and `bench` with 1 when a regression check fails.")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    Demo(cmd::demo::Args),
    Record(cmd::record::Args),
    Boot(cmd::boot::Args),
    Login(cmd::login::Args),
    Report(cmd::report::Args),
    Reads(cmd::reads::Args),
    Syscalls(cmd::syscalls::Args),
    Doctor(cmd::doctor::Args),
    Bench(Box<cmd::bench::Args>),
    Prefetch(cmd::prefetch::Args),
    Run(cmd::run::Args),
    Export(cmd::export::Args),
    Fleet(cmd::fleet::Args),
    Import(cmd::import::Args),
    Info(cmd::info::Args),
    Anonymize(cmd::anonymize::Args),
    Mark(cmd::mark::Args),
    Recover(cmd::recover::Args),
    Generate(cmd::generate::Args),
    Storage(cmd::storage::Args),
}

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.command {
        Command::Demo(args) => cmd::demo::run(args),
        Command::Import(args) => cmd::import::run(args),
        Command::Info(args) => cmd::info::run(args),
        Command::Anonymize(args) => cmd::anonymize::run(args),
        Command::Mark(args) => cmd::mark::run(args),
        Command::Bench(args) => cmd::bench::run(*args),
        Command::Record(args) => cmd::record::run(args),
        Command::Boot(args) => cmd::boot::run(args),
        Command::Login(args) => cmd::login::run(args),
        Command::Recover(args) => cmd::recover::run(args),
        Command::Report(args) => cmd::report::run(args),
        Command::Export(args) => cmd::export::run(args),
        Command::Fleet(args) => cmd::fleet::run(args),
        Command::Reads(args) => cmd::reads::run(args),
        Command::Syscalls(args) => cmd::syscalls::run(args),
        Command::Doctor(args) => cmd::doctor::run(args),
        Command::Prefetch(args) => cmd::prefetch::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Generate(args) => cmd::generate::run(args),
        Command::Storage(args) => cmd::storage::run(args),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::Cli;

    /// Every subcommand, nested ones too, with its path (`prefetch run`).
    fn commands(command: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
        for sub in command.get_subcommands() {
            let name = format!("{path} {}", sub.get_name()).trim().to_owned();
            out.push((name.clone(), sub.clone()));
            commands(sub, &name, out);
        }
    }

    #[test]
    fn every_positional_argument_is_described() {
        let mut all = Vec::new();
        commands(&Cli::command(), "", &mut all);
        let missing: Vec<String> = all
            .iter()
            .flat_map(|(path, command)| {
                command
                    .get_positionals()
                    .filter(|arg| arg.get_help().is_none() && arg.get_long_help().is_none())
                    .map(move |arg| format!("{path} <{}>", arg.get_id()))
            })
            .collect();
        assert!(missing.is_empty(), "positional arguments without a description: {missing:?}");
    }

    #[test]
    fn bench_short_help_gives_one_line_per_option() {
        let mut cli = Cli::command();
        cli.build();
        let bench = cli.find_subcommand_mut("bench").unwrap();
        let short = bench.render_help().to_string();
        let options = short.split("Options:").nth(1).unwrap().split("\n\n").next().unwrap();
        let wrapped: Vec<&str> = options.lines().filter(|l| l.starts_with("          ")).collect();
        assert!(wrapped.is_empty(), "options whose -h text takes more than a line: {wrapped:?}\n{short}");
        assert!(short.lines().count() < 60, "{short}");
        let long = bench.render_long_help().to_string();
        assert!(long.contains("Eviction (--evict)"), "{long}");
    }
}
