//! `pronghorn topo [PID]`: the host as it matters to a stack (NUMA nodes, the NIC's node,
//! hugepages, NUMA balancing, THP, IRQ affinity, isolated CPUs), or where a running accelerated
//! process's threads and memory are; with warnings that say what to change and why. Everything
//! is read from a root directory (`--root`, `$PRONGHORN_TOPO_ROOT`, `/` by default) so that
//! tests run over synthetic trees; docs/topology.md says what each line means.

mod advice;
pub(crate) use topology::host;
mod process;
#[cfg(test)]
pub(crate) mod tests;

use std::fmt::Write;
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use config::Config;
use runtime::observe::region::get_text;

use advice::Intent;
use host::{format_cpu_list, Host};
use process::Process;
use topology::{Placement, Request};

#[derive(Args)]
pub struct TopoArgs {
    /// An accelerated process: where its threads ran and its memory lies.
    #[arg(value_parser = crate::inspect::parse_pid)]
    pid: Option<u32>,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// The config whose interface and stack_cpu to check (default: $PRONGHORN_CONFIG when set).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Read /sys and /proc under this directory instead of / (also $PRONGHORN_TOPO_ROOT).
    #[arg(long)]
    root: Option<PathBuf>,
}

pub fn run(args: TopoArgs) -> Result<i32> {
    let root = host::root(args.root);
    let config = match Config::locate(args.config.as_deref()) {
        Ok(path) => Some(Config::load(&path)?),
        Err(_) if args.config.is_none() => None,
        Err(e) => return Err(e.into()),
    };
    let host = Host::read(&root);
    let mut intent = Intent::default();
    let mut iface = config.as_ref().map(|c| c.nic.iface.clone());
    if let Some(c) = &config {
        if let Some(cpu) = c.runtime.stack_cpu {
            intent.stack_cpus = (cpu..cpu + u32::from(c.runtime.shards)).collect();
        }
    }
    let process = match args.pid {
        None => None,
        Some(pid) => {
            let accelerated = crate::inspect::pick(Some(pid))?;
            iface = Some(get_text(&accelerated.snapshot.layout.iface));
            match Process::read(&root, pid) {
                Some(p) => Some((p, accelerated.command())),
                None => bail!("pid {pid} has no {}", root.join(format!("proc/{pid}")).display()),
            }
        }
    };
    intent.iface = iface.as_deref();
    intent.process = process.as_ref().map(|(p, _)| p);
    let warnings = advice::warnings(&host, &intent);
    let mut notes = advice::notes(&host, &intent);
    // Where `pronghorn run` with this config would put things (runtime.numa, runtime.cpus).
    let placement = match (&config, &process) {
        (Some(c), None) => Some(placement_of(&host, c)?),
        _ => None,
    };
    if let Some(p) = &placement {
        notes.extend(p.notes.iter().filter(|n| !notes.contains(n)).cloned().collect::<Vec<_>>());
    }
    if args.json {
        let v = serde_json::json!({
            "host": host, "interface": intent.iface, "stack_cpus": intent.stack_cpus,
            "process": intent.process, "placement": placement, "notes": notes, "warnings": warnings,
        });
        println!("{v}");
    } else {
        let mut out = match &process {
            Some((p, command)) => process_text(&host, p, command, intent.iface),
            None => host_text(&host, intent.iface),
        };
        if let Some(p) = &placement {
            out.push_str(&placement_text(p));
        }
        for n in &notes {
            writeln!(out, "note: {n}")?;
        }
        for w in &warnings {
            writeln!(out, "warning: {w}")?;
        }
        if warnings.is_empty() {
            out.push_str("no warnings\n");
        }
        print!("{out}");
    }
    Ok(0)
}

fn host_text(host: &Host, iface: Option<&str>) -> String {
    let mut out = String::new();
    let nodes = host.nodes.len();
    let _ = writeln!(out, "{nodes} NUMA node{}", if nodes == 1 { "" } else { "s" });
    for n in &host.nodes {
        let memory = if n.mem_total_kib == 0 {
            "no memory (memoryless node)".to_owned()
        } else {
            format!("{} MiB ({} MiB free)", n.mem_total_kib / 1024, n.mem_free_kib / 1024)
        };
        let huge: Vec<String> =
            n.hugepages.iter().map(|h| format!("{} kB {} free of {}", h.size_kib, h.free, h.total)).collect();
        let _ = writeln!(
            out,
            "  node {}: cpus {} ({}), memory {memory}, hugepages {}",
            n.id,
            format_cpu_list(&n.cpus),
            n.cpus.len(),
            if huge.is_empty() { "none".to_owned() } else { huge.join(", ") }
        );
    }
    let _ = writeln!(out, "interfaces");
    for i in &host.interfaces {
        let node = i.node.map_or("no node".to_owned(), |n| format!("node {n}"));
        let irqs: Vec<String> = i.irqs.iter().map(|q| format!("{}->{}", q.irq, format_cpu_list(&q.cpus))).collect();
        let mark = if Some(i.name.as_str()) == iface { "  (configured)" } else { "" };
        let irqs = if irqs.is_empty() { "no MSI interrupts".to_owned() } else { format!("irqs {}", irqs.join(" ")) };
        let _ = writeln!(out, "  {:<15} {node}, {irqs}{mark}", i.name);
    }
    let balancing = match host.numa_balancing {
        None => "not in this kernel".to_owned(),
        Some(0) => "0 (off)".to_owned(),
        Some(b) => format!("{b} (on)"),
    };
    let _ = writeln!(out, "kernel.numa_balancing = {balancing}");
    for (name, value) in &host.numa_balancing_params {
        let _ = writeln!(out, "  {name} = {value}");
    }
    let _ = writeln!(
        out,
        "transparent hugepages: {}",
        host.transparent_hugepages.as_deref().unwrap_or("not in this kernel")
    );
    let _ = writeln!(out, "isolated cpus: {}", format_cpu_list(&host.isolated_cpus));
    numastat_text(&mut out, host);
    out
}

/// The placement a process started now with `cfg` would get: on every CPU, `runtime.cpus` as
/// `pronghorn run` applies it.
fn placement_of(host: &Host, cfg: &Config) -> Result<Placement> {
    let online: Vec<u32> = host.nodes.iter().flat_map(|n| n.cpus.iter().copied()).collect();
    let cpus = cfg.runtime.cpus.as_deref().map(topology::parse_cpu_list).transpose().map_err(anyhow::Error::msg)?;
    let request = Request {
        iface: &cfg.nic.iface,
        numa: cfg.runtime.numa,
        allowed: &online,
        app_cpus: cpus.as_deref().map(|c| (c, "runtime.cpus")),
        stack_cpu: cfg.runtime.stack_cpu,
        shards: cfg.runtime.shards,
    };
    topology::decide(host, &request).map_err(anyhow::Error::msg)
}

fn placement_text(p: &Placement) -> String {
    let node = |n: Option<u32>| n.map_or("any node".to_owned(), |n| format!("node {n}"));
    let stack = match p.stack_cpus.first() {
        None => "the process's CPUs".to_owned(),
        Some(cpus) if p.stack_cpus.iter().all(|c| c == cpus) => format!("cpus {}", format_cpu_list(cpus)),
        Some(_) => p.stack_cpus.iter().map(|c| format_cpu_list(c)).collect::<Vec<_>>().join(" / "),
    };
    let app = match (p.app_cpus.is_empty(), p.app_memory) {
        (true, None) => "unchanged".to_owned(),
        (_, memory) => format!(
            "cpus {}, memory {}",
            if p.app_cpus.is_empty() { "unchanged".to_owned() } else { format_cpu_list(&p.app_cpus) },
            memory.map_or("anywhere".to_owned(), |(n, policy)| format!("{policy:?} node {n}").to_lowercase())
        ),
    };
    format!(
        "placement (runtime.numa): {}; packet pool on {}; EAL lcore {}; stack threads on {stack}; application {app}\n",
        node(p.node),
        node(p.pool_node),
        p.eal_lcore.map_or("the first allowed CPU".to_owned(), |c| c.to_string()),
    )
}

fn numastat_text(out: &mut String, host: &Host) {
    for n in host.nodes.iter().filter(|n| !n.numastat.is_empty()) {
        let counters: Vec<String> = n.numastat.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "numastat node {}: {}", n.id, counters.join(", "));
    }
}

fn process_text(host: &Host, p: &Process, command: &str, iface: Option<&str>) -> String {
    let mut out = String::new();
    let nic_node = iface.and_then(|i| host.interface(i)).and_then(|i| i.node);
    let _ = writeln!(
        out,
        "pid {} ({command}): interface {} ({}), may run on cpus {}",
        p.pid,
        iface.unwrap_or("?"),
        nic_node.map_or("no node".to_owned(), |n| format!("node {n}")),
        format_cpu_list(&p.allowed_cpus)
    );
    let _ = writeln!(out, "{:>8}  {:>4}  {:>4}  {:>10}  {:>10}  THREAD", "TID", "CPU", "NODE", "WAITS", "PREEMPTED");
    let known = |v: Option<u64>| v.map_or("?".to_owned(), |v| v.to_string());
    for t in &p.threads {
        let cpu = t.cpu.map_or("?".to_owned(), |c| c.to_string());
        let node = t.cpu.and_then(|c| host.node_of_cpu(c)).map_or("?".to_owned(), |n| n.to_string());
        let (waits, preempted) = (known(t.waits), known(t.preempted));
        let _ = writeln!(out, "{:>8}  {cpu:>4}  {node:>4}  {waits:>10}  {preempted:>10}  {}", t.tid, t.name);
    }
    let nodes: Vec<u32> = host.nodes.iter().map(|n| n.id).collect();
    let _ = write!(out, "memory (MiB) {:<12}", "");
    for n in &nodes {
        let _ = write!(out, "{:>9}", format!("node {n}"));
    }
    out.push('\n');
    for (kind, per_node) in &p.memory {
        let _ = write!(out, "  {:<23}", kind.label());
        for n in &nodes {
            let _ = write!(out, "{:>9}", per_node.get(n).copied().unwrap_or(0) / 1024);
        }
        out.push('\n');
    }
    numastat_text(&mut out, host);
    out
}
