//! `pronghorn config check [--profile NAME] FILE`: validates a config the way `pronghorn run`
//! will read it and says what it describes, or names the bad key, its line and what is accepted
//! (exit 1). With a profile (profiles/*.toml, crates/config's profile module), it first lists
//! the keys the profile sets and which of them the user's config overrides. Every key:
//! docs/config.md.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use config::profile::Profile;
use config::Config;

#[derive(Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Subcommand)]
enum Action {
    /// Check a config file without starting anything (what `pronghorn run` would reject).
    Check {
        /// The config file (default: $PRONGHORN_CONFIG).
        file: Option<PathBuf>,
        /// Lay this profile under the config (as `pronghorn run --profile` does) and list its keys.
        #[arg(long)]
        profile: Option<String>,
    },
}

pub fn run(args: ConfigArgs) -> Result<i32> {
    match args.action {
        Action::Check { file, profile } => {
            let path = Config::locate(file.as_deref())?;
            print!("{}", check(&path, profile.as_deref())?);
            Ok(0)
        }
    }
}

/// What `config check` prints for the config at `path` under `profile`.
fn check(path: &Path, profile: Option<&str>) -> Result<String> {
    let mut out = String::new();
    let cfg = match profile {
        None => Config::load(path)?,
        Some(name) => {
            let profile = Profile::named(name).map_err(anyhow::Error::msg)?;
            let text =
                std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
            let merged = profile.apply(&text, path)?;
            writeln!(out, "profile {name} (profiles/{name}.toml) under {}: your explicit keys win", path.display())?;
            for s in &merged.settings {
                match &s.user_value {
                    None => writeln!(out, "  {} = {}  (profile) {}", s.key, s.profile_value, s.why)?,
                    Some(yours) => writeln!(
                        out,
                        "  {} = {yours}  (yours; the profile's {} is not used) {}",
                        s.key, s.profile_value, s.why
                    )?,
                }
            }
            merged.config
        }
    };
    let mut what = format!("nic {} on {}", cfg.nic.pmd, cfg.nic.iface);
    if cfg.nic.queues > 1 {
        what += &format!(" ({} queues, one per process)", cfg.nic.queues);
    }
    if let Some(v4) = &cfg.ipv4 {
        what += &format!(", ipv4 {}", v4.address);
    }
    if let Some(v6) = &cfg.ipv6 {
        what += &format!(", ipv6 {}", v6.address);
    }
    let drive = format!("{:?}", cfg.runtime.drive).to_lowercase();
    writeln!(out, "{}: ok: {what}, runtime drive {drive}, tcp congestion {}", path.display(), cfg.tcp.congestion)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config_file(name: &str, runtime: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("pronghorn-config-check-{}-{name}.toml", std::process::id()));
        let text = format!("[nic]\npmd = \"af_xdp\"\niface = \"ph-a0\"\n[ipv4]\naddress = \"10.99.0.1/24\"\n{runtime}");
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn check_with_a_profile_lists_its_keys_and_the_users_overrides() {
        let path = config_file("override", "[runtime]\nspin_us = 3\n");
        let out = check(&path, Some("latency")).unwrap();
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            lines[0],
            format!("profile latency (profiles/latency.toml) under {}: your explicit keys win", path.display())
        );
        assert!(lines[1].starts_with("  runtime.busy_poll_us = 50  (profile) Drive inline"), "{out}");
        assert!(
            lines[2].starts_with("  runtime.spin_us = 3  (yours; the profile's 50 is not used) Drive dedicated"),
            "{out}"
        );
        assert!(lines[3]
            .ends_with(": ok: nic af_xdp on ph-a0, ipv4 10.99.0.1/24, runtime drive auto, tcp congestion cubic"));
        assert_eq!(lines.len(), 4, "{out}");
        let out = check(&path, Some("redis")).unwrap();
        assert!(out.contains("runtime drive inline"), "{out}");
        let e = check(&path, Some("fast")).unwrap_err().to_string();
        assert!(e.starts_with("unknown profile \"fast\": the profiles are latency, throughput"), "{e}");
        let out = check(&path, None).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        std::fs::remove_file(path).unwrap();
    }
}
