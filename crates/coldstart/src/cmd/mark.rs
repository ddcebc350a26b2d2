//! `coldstart mark NAME`: a program started by coldstart says it reached a
//! milestone. Appends one line to the marks file named by `COLDSTART_MARKS`
//! (see coldstart_launch::marks for the format); outside coldstart it does nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_launch::{MARKS_ENV, marks};

/// Mark a milestone of the program that runs this (for `--until mark:NAME` and traces).
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Run it from inside a program started by `coldstart record` or `coldstart bench`; it appends
`UPTIME NAME<TAB>pid=PARENT` (CLOCK_BOOTTIME seconds, 9 decimals) to the file named by
$COLDSTART_MARKS, in one O_APPEND write. Outside coldstart it prints a note and exits 0.

Examples:
  coldstart mark ready                     # from a shell script or with system()
  coldstart bench --until mark:ready -- ./my-app
  # without coldstart installed in the program's PATH, append the line yourself:
  echo \"$(cut -d' ' -f1 /proc/uptime) ready\" >> \"$COLDSTART_MARKS\"")]
pub struct Args {
    /// The milestone's name (one line, no tabs), e.g. `ready` or `first-paint`.
    pub name: String,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    marks::check_name(&args.name)?;
    let Some(path) = std::env::var_os(MARKS_ENV).filter(|p| !p.is_empty()).map(PathBuf::from) else {
        eprintln!(
            "coldstart mark: not running under coldstart ({MARKS_ENV} is not set); mark {:?} ignored",
            args.name
        );
        return Ok(ExitCode::SUCCESS);
    };
    let parent = std::os::unix::process::parent_id() as i32;
    marks::append(&path, &args.name, Some(parent))
        .with_context(|| format!("cannot write mark {:?}", args.name))?;
    Ok(ExitCode::SUCCESS)
}
