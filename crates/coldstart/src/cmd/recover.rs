//! `coldstart recover`: turns the spool of a recorder that was killed into a valid
//! trace marked partial, and removes tracing instances such a recorder left.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use coldstart_record::{DEFAULT_SPOOL_ROOT, Recovery, Spool, SpoolRoot};

/// Rebuild partial traces from the spools of killed recorders.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  sudo coldstart recover                     # every spool left by a dead recorder
  sudo coldstart recover /var/lib/coldstart/spool/1234-5678 -o app-partial.coldstart

Without SPOOL, every spool under --spool-dir whose recorder is gone is rebuilt into
the trace file that recording would have written (or NAME-partial.coldstart if that exists).
A spool is read only if no one but root can have written it: the spool, and every
directory on its path, must belong to root and be writable by no one else (an ancestor
may be writable if sticky, as /var/tmp is); a symbolic link is never the spool itself.")]
pub struct Args {
    /// One spool directory (default: all leftovers under --spool-dir).
    pub spool: Option<PathBuf>,
    /// The trace file to write (only with SPOOL).
    #[arg(short, long, value_name = "FILE", requires = "spool")]
    pub output: Option<PathBuf>,
    /// Where recorders keep their spools.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_SPOOL_ROOT)]
    pub spool_dir: PathBuf,
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    if let Ok(tracefs) = coldstart_record::preflight() {
        for name in tracefs.remove_stale_instances() {
            eprintln!("coldstart: removed the stale tracing instance {name}");
        }
    }
    let recovery = match &args.spool {
        Some(dir) => {
            let spool = Spool::open(dir).with_context(|| format!("cannot recover {}", dir.display()))?;
            Recovery {
                rebuilt: vec![coldstart_record::recover(spool, args.output.as_deref())],
                skipped: Vec::new(),
            }
        }
        None => match SpoolRoot::open(&args.spool_dir)? {
            Some(root) => coldstart_record::recover_leftovers(&root)?,
            None => Recovery::default(),
        },
    };
    for skipped in &recovery.skipped {
        eprintln!("coldstart: warning: not reading a spool: {skipped}");
    }
    let results = recovery.rebuilt;
    if results.is_empty() {
        eprintln!(
            "coldstart: nothing to recover (no spool of a dead recorder under {})",
            args.spool_dir.display()
        );
    }
    let mut failed = false;
    for r in results {
        match r {
            Ok((path, summary)) => {
                eprintln!("coldstart: recovered a partial trace: {}", path.display());
                let _ = super::record::print_summary(&summary, &path);
                eprintln!("next: coldstart report {}", path.display());
            }
            Err(e) => {
                eprintln!("coldstart: error: {}", coldstart_trace::error_chain(&e));
                failed = true;
            }
        }
    }
    Ok(if failed { ExitCode::from(2) } else { ExitCode::SUCCESS })
}
