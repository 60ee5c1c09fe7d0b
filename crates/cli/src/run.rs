//! `pronghorn run [--config FILE] -- CMD ARGS...`: runs CMD with its sockets on pronghorn.
//!
//! It checks the config first (a bad one is one line and exit 1, before CMD starts), then
//! execs CMD with `libpronghorn.so` preloaded (found next to this binary, as cargo builds it, or
//! where the Debian package puts it: [`library_of`]), `PRONGHORN_CONFIG`
//! pointing at the config and `PRONGHORN_ACCEL_PID` naming the process to accelerate: the exec
//! keeps this pid, so CMD is accelerated and the children it forks or execs are not.
//! `PRONGHORN_EXE` names this binary: a CMD that drops root starts `pronghorn reap` with it.
//! With `--profile NAME` the process reads the config with the profile laid under it: a file in
//! the run directory named after the profile and a hash of its text (written once per
//! distinct merge and read by the process when it opens its first socket, so it stays there).
//! With `--cpus LIST` (or `runtime.cpus`) CMD is pinned to those CPUs and its memory tied to
//! their node before the exec, as `numactl --physcpubind` would; `runtime.numa = NODE` alone
//! pins it to the node (crate `topology`'s placement has the rules).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;
use config::profile::Profile;
use config::Config;
use runtime::observe::region;
use topology::host::{format_cpu_list, Host};
use topology::MemPolicy;

#[derive(Args)]
pub struct RunArgs {
    /// The config file (default: $PRONGHORN_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Lay a shipped profile under the config (`pronghorn config check --profile NAME` lists its keys).
    #[arg(long)]
    profile: Option<String>,
    /// Pin the command to these CPUs (a kernel CPU list, `1,4-7`), its memory on their node.
    #[arg(long)]
    cpus: Option<String>,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

pub fn run(args: RunArgs) -> Result<i32> {
    let path = Config::locate(args.config.as_deref())?;
    let path = match &args.profile {
        None => {
            Config::load(&path)?;
            std::fs::canonicalize(&path).with_context(|| format!("cannot resolve {}", path.display()))?
        }
        Some(name) => profiled_config(&path, name)?,
    };
    place(&Config::load(&path)?, args.cpus.as_deref())?;
    let exe = std::env::current_exe().context("cannot find the pronghorn binary's own path")?;
    let Some(lib) = library_of(&exe) else {
        bail!(
            "libpronghorn.so is neither next to {} nor in {}: build it with `cargo build --release --workspace` (the preload crate), or install the package (scripts/package-deb.sh)",
            exe.display(),
            installed_library(&exe).display()
        );
    };
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

/// The preload library for the `pronghorn` binary at `exe`: next to it (a cargo build's
/// `target/release`), else where the package installs it, relative to the binary so that a
/// tree installed under another prefix works too.
fn library_of(exe: &Path) -> Option<PathBuf> {
    [exe.with_file_name("libpronghorn.so"), installed_library(exe)].into_iter().find(|p| p.exists())
}

/// `BIN/../lib/<multiarch>/pronghorn/libpronghorn.so`: `/usr/lib/x86_64-linux-gnu/pronghorn/`
/// for `/usr/bin/pronghorn`, Debian's multiarch directory (`gcc -print-multiarch`).
fn installed_library(exe: &Path) -> PathBuf {
    let bin = exe.parent().unwrap_or(Path::new("/"));
    let lib = bin.parent().unwrap_or(bin).join("lib");
    lib.join(format!("{}-linux-gnu", std::env::consts::ARCH)).join("pronghorn/libpronghorn.so")
}

/// Pins this process (the command it becomes) and sets its memory policy as the placement of
/// `cfg` with `--cpus` says; the decision's errors name the key or option at fault.
fn place(cfg: &Config, cpus_option: Option<&str>) -> Result<()> {
    let (text, key) = match (cpus_option, &cfg.runtime.cpus) {
        (Some(t), _) => (Some(t), "--cpus"),
        (None, Some(t)) => (Some(t.as_str()), "runtime.cpus"),
        (None, None) => (None, ""),
    };
    let cpus = text.map(topology::parse_cpu_list).transpose().map_err(|e| anyhow::anyhow!("{key}: {e}"))?;
    let allowed = runtime::placement::affinity();
    let request = topology::Request {
        iface: &cfg.nic.iface,
        numa: cfg.runtime.numa,
        allowed: &allowed,
        app_cpus: cpus.as_deref().map(|c| (c, key)),
        stack_cpu: cfg.runtime.stack_cpu,
        shards: cfg.runtime.shards,
    };
    let placed = topology::decide(&Host::read(Path::new("/")), &request).map_err(anyhow::Error::msg)?;
    if !placed.app_cpus.is_empty() {
        runtime::placement::pin(&placed.app_cpus)
            .with_context(|| format!("cannot pin the command to CPUs {} ({key})", format_cpu_list(&placed.app_cpus)))?;
    }
    if let Some((node, policy)) = placed.app_memory {
        set_mempolicy(node, policy)
            .with_context(|| format!("cannot tie the command's memory to NUMA node {node} (runtime.numa)"))?;
    }
    Ok(())
}

/// `set_mempolicy(2)` for this thread (kept across exec), without libnuma.
fn set_mempolicy(node: u32, policy: MemPolicy) -> std::io::Result<()> {
    const MPOL_PREFERRED: libc::c_long = 1;
    const MPOL_BIND: libc::c_long = 2;
    let bits = libc::c_ulong::BITS;
    let mut mask = [0 as libc::c_ulong; 16];
    let word = mask.get_mut((node / bits) as usize).ok_or_else(|| std::io::Error::from_raw_os_error(libc::EINVAL))?;
    *word |= 1 << (node % bits);
    let mode = match policy {
        MemPolicy::Preferred => MPOL_PREFERRED,
        MemPolicy::Bind => MPOL_BIND,
    };
    // maxnode counts one more than the mask's bits, as numactl passes it.
    let maxnode = (mask.len() as libc::c_ulong) * libc::c_ulong::from(bits) + 1;
    if unsafe { libc::syscall(libc::SYS_set_mempolicy, mode, mask.as_ptr(), maxnode) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// The config at `path` with profile `name` laid under it, as a file in the run directory.
fn profiled_config(path: &Path, name: &str) -> Result<PathBuf> {
    let profile = Profile::named(name).map_err(anyhow::Error::msg)?;
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let merged = profile.apply(&text, path)?;
    let file = region::run_dir().join(format!("pronghorn-profile.{name}.{:016x}.toml", fnv1a(&merged.text)));
    if std::fs::read_to_string(&file).ok().as_deref() == Some(merged.text.as_str()) {
        return Ok(file);
    }
    // Written aside and renamed: a reader never sees half a file, and a file another user put
    // there under that name is not written through (the rename fails in a sticky directory).
    let aside = file.with_extension(format!("{}.new", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&aside)
        .and_then(|mut f| f.write_all(merged.text.as_bytes()))
        .and_then(|()| std::fs::rename(&aside, &file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&aside);
        bail!("cannot write the config with profile {name} to {}: {e}", file.display());
    }
    Ok(file)
}

/// FNV-1a, 64 bits: names the merged config's file by its text.
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_found_next_to_the_binary_or_where_the_package_puts_it() {
        let root = std::env::temp_dir().join(format!("pronghorn-run-lib-{}", std::process::id()));
        let exe = root.join("usr/bin/pronghorn");
        let installed = root.join(format!("usr/lib/{}-linux-gnu/pronghorn/libpronghorn.so", std::env::consts::ARCH));
        std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
        std::fs::create_dir_all(exe.parent().unwrap()).unwrap();
        assert_eq!(library_of(&exe), None);
        std::fs::write(&installed, "").unwrap();
        assert_eq!(library_of(&exe), Some(installed));
        std::fs::write(exe.with_file_name("libpronghorn.so"), "").unwrap();
        assert_eq!(library_of(&exe), Some(exe.with_file_name("libpronghorn.so")), "a build's own library first");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
