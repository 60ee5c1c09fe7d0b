//! `pronghorn ps`: the accelerated processes on this host.

use anyhow::Result;
use clap::Args;
use runtime::observe::region::get_text;

use super::{processes, Process};

#[derive(Args)]
pub struct PsArgs {
    /// One JSON object per process, one per line.
    #[arg(long)]
    json: bool,
}

/// What `ps` says of a process.
pub(super) struct Summary {
    pub pid: u32,
    pub command: String,
    pub iface: String,
    pub pmd: String,
    pub address: String,
    pub shards: usize,
    pub mode: &'static str,
    pub sockets: u64,
    pub time_wait: u64,
    pub fallbacks: u64,
}

pub(super) fn summary(p: &Process) -> Summary {
    let l = &p.snapshot.layout;
    let address =
        [get_text(&l.ipv4), get_text(&l.ipv6)].into_iter().filter(|a| !a.is_empty()).collect::<Vec<_>>().join(",");
    Summary {
        pid: p.pid,
        command: p.command(),
        iface: get_text(&l.iface),
        pmd: get_text(&l.pmd),
        address,
        shards: p.snapshot.shard_count(),
        mode: if l.dedicated != 0 { "dedicated" } else { "inline" },
        sockets: p.snapshot.total("sockets"),
        time_wait: p.snapshot.total("time_wait"),
        fallbacks: ["kernel_bind", "kernel_connect", "kernel_udp", "init_failed"]
            .iter()
            .map(|c| p.snapshot.process_counter(c))
            .sum(),
    }
}

pub fn run(args: PsArgs) -> Result<i32> {
    let (found, hidden) = processes()?;
    if args.json {
        for p in &found {
            let s = summary(p);
            let v = serde_json::json!({
                "pid": s.pid, "command": s.command, "interface": s.iface, "pmd": s.pmd, "address": s.address,
                "shards": s.shards, "mode": s.mode, "sockets": s.sockets, "time_wait": s.time_wait,
                "kernel_fallbacks": s.fallbacks,
            });
            println!("{v}");
        }
        return Ok(0);
    }
    println!(
        "{:>7}  {:<10} {:<8} {:<28} {:>6}  {:<17} {:>7} {:>9} {:>9}  COMMAND",
        "PID", "INTERFACE", "PMD", "ADDRESS", "SHARDS", "MODE", "SOCKETS", "TIME-WAIT", "FALLBACKS"
    );
    for p in &found {
        let s = summary(p);
        let mut command = s.command;
        if command.len() > 60 {
            command.truncate(57);
            command.push_str("...");
        }
        println!(
            "{:>7}  {:<10} {:<8} {:<28} {:>6}  {:<17} {:>7} {:>9} {:>9}  {}",
            s.pid, s.iface, s.pmd, s.address, s.shards, s.mode, s.sockets, s.time_wait, s.fallbacks, command
        );
    }
    if hidden > 0 {
        eprintln!("({hidden} accelerated processes of other users are not shown: run as root to see them)");
    }
    Ok(0)
}
