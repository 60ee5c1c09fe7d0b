//! `pronghorn config check FILE`: validates a config the way `pronghorn run` will read it and
//! says what it describes, or names the bad key, its line and what is accepted (exit 1).
//! Every key: docs/config.md.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
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
    },
}

pub fn run(args: ConfigArgs) -> Result<i32> {
    match args.action {
        Action::Check { file } => {
            let path = Config::locate(file.as_deref())?;
            let cfg = Config::load(&path)?;
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
            println!("{}: ok: {what}, runtime drive {drive}, tcp congestion {}", path.display(), cfg.tcp.congestion);
            Ok(0)
        }
    }
}
