//! `pronghorn doctor [--config FILE] [--json]`: checks what running pronghorn on this host needs
//! (privileges, hugepages, the kernel and AF_XDP, open files, the shared mode's
//! port range, left-over run directories and XDP programs, and the configured interface: there,
//! up, its XDP as the kernel reports it ([`netdev`]; else as its driver is known), queues, MTU,
//! a veth peer's checksums), one line each, ok, warn or fail, with what to change. Exits 1 when
//! a check fails. Facts are read from a root directory (`--root`, `/` by default) like
//! `pronghorn topo`'s, so that the tests make each check fail over a synthetic tree
//! ([`facts`]); the checks are pure functions of them ([`checks`]). docs/doctor.md lists the
//! checks.

mod checks;
mod facts;
mod netdev;
#[cfg(test)]
mod tests;

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::Result;
use clap::Args;
use config::Config;

use checks::{Check, Given, Status};
use facts::Facts;

#[derive(Args)]
pub struct DoctorArgs {
    /// The config to check the host against, as `pronghorn run` reads it (default: $PRONGHORN_CONFIG).
    #[arg(long)]
    config: Option<PathBuf>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Read /sys, /proc, /boot, /usr/lib and /var/run under this directory instead of /
    /// (tests); the live probes (`ip`, ethtool) are left out then.
    #[arg(long, hide = true)]
    root: Option<PathBuf>,
}

pub fn run(args: DoctorArgs) -> Result<i32> {
    let given = match Config::locate(args.config.as_deref()) {
        Err(_) if args.config.is_none() => Given::Nothing,
        Err(e) => Given::Bad(e.to_string()),
        Ok(path) => match Config::load(&path) {
            Ok(c) => Given::Good(Box::new(c)),
            Err(e) => Given::Bad(e.to_string()),
        },
    };
    let root = args.root.unwrap_or_else(|| PathBuf::from("/"));
    let iface = match &given {
        Given::Good(c) => Some(c.nic.iface.as_str()),
        _ => None,
    };
    let mut facts = Facts::read(&root, iface);
    if root == Path::new("/") {
        facts.probe_live();
    }
    let checks = checks::all(&facts, &given);
    let failed = checks.iter().filter(|c| c.status == Status::Fail).count();
    if args.json {
        let warnings = checks.iter().filter(|c| c.status == Status::Warn).count();
        println!("{}", serde_json::json!({ "checks": checks, "failed": failed, "warnings": warnings }));
    } else {
        print!("{}", text(&checks));
    }
    Ok(i32::from(failed > 0))
}

/// A line per check (`ok    name  detail`), the fix indented under it, then the tally.
fn text(checks: &[Check]) -> String {
    let mut out = String::new();
    for c in checks {
        let status = match c.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        let _ = writeln!(out, "{status:<5} {:<16} {}", c.name, c.detail);
        if let Some(fix) = &c.fix {
            let _ = writeln!(out, "{:<22} fix: {fix}", "");
        }
    }
    let count = |s: Status| checks.iter().filter(|c| c.status == s).count();
    let _ = writeln!(out, "{} ok, {} warnings, {} failed", count(Status::Ok), count(Status::Warn), count(Status::Fail));
    out
}
