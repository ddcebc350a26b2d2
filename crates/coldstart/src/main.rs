//! The coldstart command line. Parses the arguments, hands the subcommand to its
//! module under `cmd/`, and turns the outcome into an exit status: the subcommand's
//! own status on success, 2 with the whole error chain printed once on failure, and
//! a quiet exit when the reader of our output has gone away (broken pipe).

mod cli;
mod cmd;

use std::process::ExitCode;

fn main() -> ExitCode {
    // `init=/usr/local/sbin/coldstart-init`: the kernel gives no subcommand, and every
    // argument it passes is the real init's.
    if cmd::boot_init::invoked_as_init() {
        return cmd::boot_init::run_as_link();
    }
    let cli = <cli::Cli as clap::Parser>::parse();
    match cli::run(cli) {
        Ok(code) => code,
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("coldstart: error: {}", coldstart_trace::error_chain(err.as_ref()));
            ExitCode::from(2)
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use coldstart_bench::BenchError;
    use coldstart_import::ImportError;
    use coldstart_launch::LaunchError;
    use coldstart_prefetch::PrefetchError;
    use coldstart_record::RecordError;
    use coldstart_trace::{TraceError, error_chain};

    fn missing() -> std::io::Error {
        std::io::Error::from(std::io::ErrorKind::NotFound)
    }

    /// Errors of the library crates with causes, some wrapped in others, as `main` meets them.
    fn errors_with_causes() -> Vec<anyhow::Error> {
        vec![
            anyhow::Error::from(TraceError::io(Path::new("/t.coldstart"), missing()))
                .context("cannot read the trace"),
            PrefetchError::file("/p.plan", missing()).into(),
            ImportError::Archive { path: "/b.tgz".into(), source: missing() }.into(),
            RecordError::Launch(LaunchError::Spawn { program: "app".into(), source: missing() }).into(),
            RecordError::Kept {
                spool: "/var/tmp/coldstart/s".into(),
                source: Box::new(RecordError::io("/x", missing())),
            }
            .into(),
            BenchError::Learn {
                command: "app".into(),
                source: Box::new(RecordError::Launch(LaunchError::File {
                    path: "/m".into(),
                    source: missing(),
                })),
            }
            .into(),
            BenchError::Launch(LaunchError::Exec {
                program: "app".into(),
                what: "execve",
                source: missing(),
            })
            .into(),
        ]
    }

    #[test]
    fn no_error_repeats_the_text_of_its_cause() {
        for err in errors_with_causes() {
            let links: Vec<String> = err.chain().map(ToString::to_string).collect();
            assert!(links.len() >= 2, "{links:?} has no cause");
            for pair in links.windows(2) {
                assert!(!pair[0].contains(&pair[1]), "{:?} repeats its cause {:?}", pair[0], pair[1]);
            }
        }
    }

    #[test]
    fn the_chain_is_printed_once_joined_by_colons() {
        let printed: Vec<String> = errors_with_causes().iter().map(|e| error_chain(e.as_ref())).collect();
        assert_eq!(printed[0], "cannot read the trace: /t.coldstart: entity not found");
        assert_eq!(
            printed[4],
            "the trace was not made; the recording is kept in /var/tmp/coldstart/s \
             (`coldstart recover /var/tmp/coldstart/s` tries again): /x: entity not found"
        );
        assert_eq!(printed[5], "cannot learn the files of `app`: /m: entity not found");
    }
}
