//! `coldstart generate`: the man pages and shell completions, made from the same clap
//! definitions as `--help`, so they never drift from the command line (as ripgrep's
//! `--generate` does).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::Cli;

/// Write the man pages or a shell's completions.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  coldstart generate man -o /usr/local/share/man/man1        # coldstart.1, coldstart-record.1, …
  coldstart generate completions bash > /usr/share/bash-completion/completions/coldstart
  coldstart generate completions zsh > /usr/local/share/zsh/site-functions/_coldstart
  coldstart generate completions fish > ~/.config/fish/completions/coldstart.fish")]
pub struct Args {
    #[command(subcommand)]
    pub what: What,
}

#[derive(Debug, clap::Subcommand)]
pub enum What {
    /// Man pages in roff: coldstart.1 and one coldstart-SUBCOMMAND.1 per subcommand.
    Man {
        /// The directory to write the pages to [default: only coldstart.1, to stdout].
        #[arg(short, long, value_name = "DIR")]
        output: Option<PathBuf>,
    },
    /// The completion script of a shell, to stdout.
    Completions {
        /// bash, zsh, fish, elvish or powershell.
        shell: Shell,
    },
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let mut command = Cli::command();
    command.build();
    match args.what {
        What::Completions { shell } => {
            clap_complete::generate(shell, &mut command, "coldstart", &mut std::io::stdout());
        }
        What::Man { output: None } => {
            let mut page = Vec::new();
            clap_mangen::Man::new(command).render(&mut page)?;
            std::io::stdout().write_all(&page)?;
        }
        What::Man { output: Some(dir) } => {
            std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
            let written = write_pages(&command, "coldstart", &dir)?;
            eprintln!("coldstart: wrote {written} man pages to {}", dir.display());
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `name.1` for `command` and, below it, one page per subcommand (`name-sub.1`).
fn write_pages(command: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<usize> {
    let path = dir.join(format!("{name}.1"));
    let mut page = Vec::new();
    clap_mangen::Man::new(command.clone()).title(name).render(&mut page)?;
    std::fs::write(&path, page).with_context(|| format!("cannot write {}", path.display()))?;
    let mut written = 1;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set() && s.get_name() != "help") {
        written += write_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(written)
}
