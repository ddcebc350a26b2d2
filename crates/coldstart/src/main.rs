//! The coldstart command line. Parses the arguments, hands the subcommand to its
//! module under `cmd/`, and turns the outcome into an exit status: the subcommand's
//! own status on success, 2 with the whole error chain printed once on failure, and
//! a quiet exit when the reader of our output has gone away (broken pipe).

mod cli;
mod cmd;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = <cli::Cli as clap::Parser>::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("coldstart: error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
