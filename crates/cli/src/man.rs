//! The `pronghorn` command described for people outside the binary: `pronghorn man DIR` (hidden;
//! `scripts/package-deb.sh` runs it) writes a man page per command from the clap definitions
//! (`pronghorn.1`, `pronghorn-run.1`, `pronghorn-lab-up.1`, ...), and `pronghorn completions
//! SHELL` prints the shell's completion script.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory};

#[derive(Args)]
pub struct ManArgs {
    /// The directory to write the pages into (made if missing).
    dir: PathBuf,
}

#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell (bash, zsh, fish, elvish, powershell).
    shell: clap_complete::Shell,
}

pub fn man(args: ManArgs) -> Result<i32> {
    std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot make {}", args.dir.display()))?;
    clap_mangen::generate_to(crate::Cli::command(), &args.dir)
        .with_context(|| format!("cannot write the man pages into {}", args.dir.display()))?;
    Ok(0)
}

pub fn completions(args: CompletionsArgs) -> Result<i32> {
    clap_complete::generate(args.shell, &mut crate::Cli::command(), "pronghorn", &mut std::io::stdout());
    Ok(0)
}
