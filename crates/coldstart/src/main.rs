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
            eprintln!("coldstart: error: {}", message_of(&err));
            ExitCode::from(2)
        }
    }
}

/// The error chain joined by ": ", each cause once: an error that already ends with
/// its cause's text (one that names a file, then says what went wrong with it) is not
/// followed by that text again.
fn message_of(err: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
    }
    message
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
