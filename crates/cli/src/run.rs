//! `pronghorn run [--config FILE] -- CMD ARGS...`: runs CMD with its sockets on pronghorn.
//!
//! It checks the config first (a bad one is one line and exit 1, before CMD starts), then
//! execs CMD with `libpronghorn.so` (found next to this binary) preloaded, `PRONGHORN_CONFIG`
//! pointing at the config and `PRONGHORN_ACCEL_PID` naming the process to accelerate: the exec
//! keeps this pid, so CMD is accelerated and the children it forks or execs are not.
//! `PRONGHORN_EXE` names this binary: a CMD that drops root starts `pronghorn reap` with it.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use config::Config;

#[derive(Args)]
pub struct RunArgs {
    /// The config file (default: $PRONGHORN_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(args: RunArgs) -> Result<i32> {
    let path = Config::locate(args.config.as_deref())?;
    Config::load(&path)?;
    let path = std::fs::canonicalize(&path).with_context(|| format!("cannot resolve {}", path.display()))?;
    let exe = std::env::current_exe().context("cannot find the pronghorn binary's own path")?;
    let lib = exe.with_file_name("libpronghorn.so");
    if !lib.exists() {
        bail!(
            "{} not found next to {}: build it with `cargo build --release --workspace` (the preload crate)",
            lib.display(),
            exe.display()
        );
    }
    let preload = match std::env::var("LD_PRELOAD") {
        Ok(existing) if !existing.is_empty() => format!("{}:{existing}", lib.display()),
        _ => lib.display().to_string(),
    };
    let err = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("LD_PRELOAD", preload)
        .env(config::ENV_VAR, &path)
        .env("PRONGHORN_ACCEL_PID", std::process::id().to_string())
        .env("PRONGHORN_EXE", &exe)
        .exec();
    bail!("cannot run {}: {err}", args.command[0])
}
