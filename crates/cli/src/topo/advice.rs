//! What `pronghorn topo` tells a user to change, and why: the NIC, the stack's CPUs, its
//! hugepages, the queues' interrupts and the process's threads and memory belong on one node
//! (a remote memory access costs about 2.8 times a local one: 154 against 55 ns on the
//! two-socket hosts of the MySQL study, where keeping threads, memory and hugepages on one node
//! was worth 25% of QPS); numa_balancing fights a pinned server; THP "always" stalls it.

use super::host::{format_cpu_list, Host};
use super::process::{Kind, Process};

/// What the user means to run: the configured interface and stack CPUs, and the process when
/// one is running.
#[derive(Default)]
pub struct Intent<'a> {
    pub iface: Option<&'a str>,
    /// `runtime.stack_cpu` and the CPUs after it, one per shard.
    pub stack_cpus: Vec<u32>,
    pub process: Option<&'a Process>,
}

/// Facts about the layout that call for no change.
pub fn notes(host: &Host, intent: &Intent) -> Vec<String> {
    let mut notes = Vec::new();
    if host.nodes.len() == 1 {
        notes.push(topology::placement::ONE_NODE.to_owned());
    }
    if let Some(name) = intent.iface {
        match host.interface(name) {
            None => notes.push(format!(
                "interface {name} is not in /sys/class/net here (another network namespace?): its node is unknown"
            )),
            Some(i) if i.node.is_none() && host.nodes.len() > 1 => notes.push(format!(
                "interface {name} has no NUMA node (a virtual interface, or firmware that does not say): nothing to align it with"
            )),
            Some(_) => {}
        }
    }
    notes
}

/// The changes to make, each with its reason.
pub fn warnings(host: &Host, intent: &Intent) -> Vec<String> {
    let mut warnings = Vec::new();
    let several_nodes = host.nodes.len() > 1;
    let nic = intent.iface.and_then(|name| host.interface(name)).and_then(|i| Some((i, i.node?)));
    if let (true, Some((iface, node))) = (several_nodes, nic) {
        let local = host.node(node).map(|n| n.cpus.clone()).unwrap_or_default();
        let local_list = format_cpu_list(&local);
        let remote: Vec<u32> = intent.stack_cpus.iter().copied().filter(|c| !local.contains(c)).collect();
        if !remote.is_empty() {
            warnings.push(format!(
                "the NIC {} is on node {node} and runtime.stack_cpu puts stack threads on CPUs {} ({}): every packet \
                 is received into node {node}'s memory and processed across the interconnect (a remote access costs \
                 about 2.8x a local one); set runtime.stack_cpu to a CPU of node {node} ({local_list})",
                iface.name,
                format_cpu_list(&remote),
                nodes_of(host, &remote),
            ));
        }
        let local_free = host.node(node).map(|n| n.hugepages_free_kib()).unwrap_or(0);
        let elsewhere: Vec<u32> =
            host.nodes.iter().filter(|n| n.id != node && n.hugepages_free_kib() > 0).map(|n| n.id).collect();
        if local_free == 0 && !elsewhere.is_empty() {
            warnings.push(format!(
                "no free hugepages on node {node}, the NIC {}'s node (free on node {}): DPDK's packet pools and rings \
                 will be remote memory for every packet; reserve them on node {node}: echo 1024 > \
                 /sys/devices/system/node/node{node}/hugepages/hugepages-2048kB/nr_hugepages",
                iface.name,
                join(&elsewhere),
            ));
        }
        let astray: Vec<String> = iface
            .irqs
            .iter()
            .filter(|irq| !irq.cpus.iter().any(|c| local.contains(c)))
            .map(|irq| irq.irq.to_string())
            .collect();
        if !astray.is_empty() {
            warnings.push(format!(
                "interrupts {} of {}'s queues go to CPUs off node {node}, the NIC's node: each wakeup crosses the \
                 interconnect; write CPUs of node {node} ({local_list}) to /proc/irq/IRQ/smp_affinity_list (and keep \
                 irqbalance from moving them back)",
                astray.join(","),
                iface.name,
            ));
        }
        if let Some(p) = intent.process {
            let strays: Vec<String> = p
                .threads
                .iter()
                .filter(|t| t.cpu.and_then(|c| host.node_of_cpu(c)).is_some_and(|n| n != node))
                .map(|t| format!("{} ({})", t.tid, t.name))
                .collect();
            if !strays.is_empty() {
                warnings.push(format!(
                    "threads {} of pid {} last ran off node {node}, the NIC {}'s node: pin the process to node \
                     {node}'s CPUs (taskset -c {local_list}, or numactl --cpunodebind={node} --membind={node})",
                    strays.join(", "),
                    p.pid,
                    iface.name,
                ));
            }
            let per_node = p.memory_per_node();
            let total: u64 = per_node.values().sum();
            let remote: u64 = per_node.iter().filter(|(n, _)| **n != node).map(|(_, k)| k).sum();
            if total > 0 && remote * 2 > total {
                let huge_remote: u64 = p
                    .memory
                    .get(&Kind::Hugepages)
                    .map(|m| m.iter().filter(|(n, _)| **n != node).map(|(_, k)| k).sum())
                    .unwrap_or(0);
                warnings.push(format!(
                    "{}% of pid {}'s memory ({} MiB, {} MiB of it DPDK hugepages) is off node {node}, the NIC {}'s \
                     node: start it bound there (numactl --cpunodebind={node} --membind={node}) with hugepages \
                     reserved on node {node}",
                    remote * 100 / total,
                    p.pid,
                    remote / 1024,
                    huge_remote / 1024,
                    iface.name,
                ));
            }
        }
    }
    let pinned = !intent.stack_cpus.is_empty()
        || intent.process.is_some_and(|p| {
            let all: usize = host.nodes.iter().map(|n| n.cpus.len()).sum();
            !p.allowed_cpus.is_empty() && p.allowed_cpus.len() < all
        });
    if several_nodes && pinned && host.numa_balancing.is_some_and(|b| b != 0) {
        warnings.push(
            "kernel.numa_balancing is on and the server is pinned: the kernel keeps unmapping the server's pages to \
             sample where they are used (a page fault on the hot path each time) though a pinned server's memory is \
             already where it is used; turn it off (sysctl -w kernel.numa_balancing=0), or, to let it converge \
             faster, lower numa_balancing_scan_delay_ms and numa_balancing_scan_period_min_ms"
                .to_owned(),
        );
    }
    if host.transparent_hugepages.as_deref() == Some("always") {
        warnings.push(
            "transparent hugepages are \"always\": khugepaged collapses and compacts the application's memory in the \
             background, which stalls it now and then (latency spikes); DPDK uses its own hugepages either way: \
             echo madvise > /sys/kernel/mm/transparent_hugepage/enabled"
                .to_owned(),
        );
    }
    warnings
}

/// The nodes `cpus` are on: "node 0" or "nodes 0,2".
fn nodes_of(host: &Host, cpus: &[u32]) -> String {
    let mut nodes: Vec<u32> = cpus.iter().filter_map(|c| host.node_of_cpu(*c)).collect();
    nodes.sort_unstable();
    nodes.dedup();
    match nodes.len() {
        0 => "on no node".to_owned(),
        1 => format!("node {}", nodes[0]),
        _ => format!("nodes {}", join(&nodes)),
    }
}

fn join(ids: &[u32]) -> String {
    ids.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
}
