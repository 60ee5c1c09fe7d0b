//! Where the stack, its packet memory and the application go (`runtime.numa`, `runtime.cpus`,
//! `pronghorn run --cpus`): a pure function of the host's topology and the config, so that
//! every decision is tested over synthetic hosts of 1 to 8 nodes.
//!
//! The rules (docs/design-notes.md says why): the node is the NIC's (`auto`; a NIC without a
//! node falls back to the node the process's CPUs are all on), the one named, or none (`off`).
//! On that node go the DPDK main lcore and the packet pool (when the node has free hugepages)
//! and the stack threads (`runtime.stack_cpu` when set, else the node's CPUs the process may run
//! on). The application is pinned only when asked: to `--cpus` (memory preferred on their node),
//! or, with `numa = NODE`, to the node's CPUs with its memory bound there (`numactl -N -m`).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::host::{format_cpu_list, Host};

/// `runtime.numa`: which NUMA node the stack's memory and threads go on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Numa {
    /// The NIC's node (or, for a NIC without one, the node of the CPUs the process runs on).
    #[default]
    Auto,
    /// Wherever the kernel and DPDK put them.
    Off,
    /// This node.
    Node(u32),
}

impl std::fmt::Display for Numa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Numa::Auto => f.write_str("auto"),
            Numa::Off => f.write_str("off"),
            Numa::Node(n) => write!(f, "{n}"),
        }
    }
}

impl Serialize for Numa {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Numa::Node(n) => s.serialize_u32(*n),
            other => s.serialize_str(&other.to_string()),
        }
    }
}

impl<'de> Deserialize<'de> for Numa {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(i64),
            Text(String),
        }
        let node = |n: Option<u32>, got: String| {
            n.filter(|n| *n < 1024).map(Numa::Node).ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "runtime.numa must be \"auto\", \"off\" or a NUMA node number (0 to 1023), got {got}"
                ))
            })
        };
        match Raw::deserialize(d)? {
            Raw::Number(n) => node(u32::try_from(n).ok(), n.to_string()),
            Raw::Text(t) => match t.as_str() {
                "auto" => Ok(Numa::Auto),
                "off" => Ok(Numa::Off),
                _ => node(t.parse().ok(), format!("\"{t}\"")),
            },
        }
    }
}

/// The note of a host with one node (`pronghorn topo` says the same).
pub const ONE_NODE: &str =
    "one NUMA node: every CPU and all memory are local to each other, so placement changes nothing on this host";

/// What the placement is decided from, besides the host.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The interface the stack drives.
    pub iface: &'a str,
    pub numa: Numa,
    /// The CPUs the process may run on now (its affinity).
    pub allowed: &'a [u32],
    /// The CPUs the application is to be pinned to, and the name of the key or option that
    /// gave them (for errors): `pronghorn run --cpus` or `runtime.cpus`.
    pub app_cpus: Option<(&'a [u32], &'a str)>,
    /// `runtime.stack_cpu`.
    pub stack_cpu: Option<u32>,
    /// `runtime.shards`.
    pub shards: u16,
}

/// How the application's memory is tied to its node (`set_mempolicy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum MemPolicy {
    /// `MPOL_PREFERRED`: the node first, any other when it is full.
    Preferred,
    /// `MPOL_BIND`: the node only.
    Bind,
}

/// The decisions. Empty CPU lists and `None`s leave things where the kernel puts them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The node the stack is placed on.
    pub node: Option<u32>,
    /// The DPDK main lcore (EAL `-l`): a CPU of the node, so that DPDK's own memory is local.
    pub eal_lcore: Option<u32>,
    /// The node whose hugepages hold the packet pool (its socket id in DPDK).
    pub pool_node: Option<u32>,
    /// Stack thread k's CPUs (shard k's), one list per shard; empty: inherited.
    pub stack_cpus: Vec<Vec<u32>>,
    /// The CPUs the application is pinned to before exec; empty: unchanged.
    pub app_cpus: Vec<u32>,
    /// The application's memory policy, set before exec.
    pub app_memory: Option<(u32, MemPolicy)>,
    /// What was decided and why, one line each (`pronghorn topo` and `run` print them).
    pub notes: Vec<String>,
}

/// The placement of `req` on `host`; an error names the key whose value the host cannot honour.
pub fn decide(host: &Host, req: &Request) -> Result<Placement, String> {
    let online: Vec<u32> = {
        let mut all: Vec<u32> = host.nodes.iter().flat_map(|n| n.cpus.iter().copied()).collect();
        all.sort_unstable();
        all
    };
    if let Some((cpus, key)) = req.app_cpus {
        if let Some(c) = cpus.iter().find(|c| !online.contains(c)) {
            return Err(format!("{key}: CPU {c} is not online (online: {})", format_cpu_list(&online)));
        }
    }
    if let Some(first) = req.stack_cpu {
        for k in 0..u32::from(req.shards.max(1)) {
            let c = first + k;
            if !online.contains(&c) {
                let shard = if k == 0 { String::new() } else { format!(" + {k} (shard {k}'s)") };
                return Err(format!(
                    "runtime.stack_cpu: CPU {first}{shard} is not online (online: {})",
                    format_cpu_list(&online)
                ));
            }
        }
    }
    let ids: Vec<u32> = host.nodes.iter().map(|n| n.id).collect();
    if let Numa::Node(n) = req.numa {
        if host.node(n).is_none() {
            return Err(format!(
                "runtime.numa = {n}: this host has no NUMA node {n} (nodes: {})",
                format_cpu_list(&ids)
            ));
        }
    }
    let mut p = Placement::default();
    let process_cpus = req.app_cpus.map_or(req.allowed, |(c, _)| c);
    if let Some((cpus, _)) = req.app_cpus {
        p.app_cpus = cpus.to_vec();
    }
    if let Some(first) = req.stack_cpu {
        p.stack_cpus = (0..u32::from(req.shards.max(1))).map(|k| vec![first + k]).collect();
    }
    if host.nodes.len() == 1 {
        p.notes.push(ONE_NODE.into());
    }
    let node = match req.numa {
        Numa::Off => {
            p.notes.push("runtime.numa = off: DPDK memory and stack threads go where the kernel puts them".into());
            None
        }
        Numa::Node(n) => Some(n),
        Numa::Auto => auto_node(host, req, process_cpus, &mut p.notes),
    };
    p.node = node;
    let Some(node) = node.and_then(|n| host.node(n)) else {
        if let Some((cpus, _)) = req.app_cpus {
            // Pinned as asked; memory follows the CPUs when they are all on one node.
            p.app_memory = one_node(host, cpus).filter(|_| req.numa != Numa::Off).map(|n| (n, MemPolicy::Preferred));
        }
        return Ok(p);
    };
    let id = node.id;
    if node.mem_total_kib == 0 {
        p.notes.push(format!(
            "node {id} has no memory (a memoryless node): packet memory comes from the node the kernel picks"
        ));
    } else if node.hugepages_free_kib() == 0 {
        p.notes.push(format!(
            "node {id} has no free hugepages: the packet pool comes from another node; reserve some there \
             (/sys/devices/system/node/node{id}/hugepages/hugepages-2048kB/nr_hugepages)"
        ));
    } else {
        p.pool_node = Some(id);
    }
    let local: Vec<u32> = node.cpus.iter().copied().filter(|c| process_cpus.contains(c)).collect();
    if p.stack_cpus.is_empty() {
        if node.cpus.is_empty() {
            p.notes.push(format!("node {id} has no CPUs: the stack threads run where the process may"));
        } else if local.is_empty() {
            p.notes.push(format!(
                "the process runs on CPUs {} off node {id}: its stack threads go to node {id}'s CPUs {}",
                format_cpu_list(process_cpus),
                format_cpu_list(&node.cpus)
            ));
            p.stack_cpus = vec![node.cpus.clone(); usize::from(req.shards.max(1))];
        } else if local.len() < process_cpus.len() {
            p.stack_cpus = vec![local.clone(); usize::from(req.shards.max(1))];
        }
    } else if let Some(c) = p.stack_cpus.iter().flatten().find(|c| !node.cpus.contains(c)) {
        p.notes.push(format!(
            "runtime.stack_cpu puts a stack thread on CPU {c}, off node {id}: its packets cross nodes; \
             pick one of {}",
            format_cpu_list(&node.cpus)
        ));
    }
    p.eal_lcore = p
        .stack_cpus
        .first()
        .and_then(|c| c.first())
        .copied()
        .filter(|c| node.cpus.contains(c))
        .or_else(|| local.first().copied())
        .or_else(|| node.cpus.first().copied());
    let has_memory = node.mem_total_kib > 0;
    match req.app_cpus {
        Some((cpus, _)) => {
            let theirs = one_node(host, cpus);
            if theirs.is_some_and(|n| n != id) {
                p.notes.push(format!(
                    "the application's CPUs {} are on node {} and the stack on node {id}: each request crosses nodes",
                    format_cpu_list(cpus),
                    theirs.unwrap_or(id)
                ));
            }
            let policy = if req.numa == Numa::Node(id) { MemPolicy::Bind } else { MemPolicy::Preferred };
            p.app_memory = theirs.filter(|n| host.node(*n).is_some_and(|n| n.mem_total_kib > 0)).map(|n| (n, policy));
        }
        None if req.numa == Numa::Node(id) && !node.cpus.is_empty() => {
            p.app_cpus = if local.is_empty() { node.cpus.clone() } else { local };
            p.app_memory = has_memory.then_some((id, MemPolicy::Bind));
        }
        None => {}
    }
    Ok(p)
}

/// `auto`: the NIC's node; for a NIC without one, the one node or the node all the process's
/// CPUs are on.
fn auto_node(host: &Host, req: &Request, process_cpus: &[u32], notes: &mut Vec<String>) -> Option<u32> {
    if let Some(n) = host.interface(req.iface).and_then(|i| i.node).filter(|n| host.node(*n).is_some()) {
        return Some(n);
    }
    if host.nodes.len() == 1 {
        return host.nodes.first().map(|n| n.id);
    }
    let n = one_node(host, process_cpus);
    match n {
        Some(n) => notes.push(format!(
            "the NIC {} has no NUMA node: the stack goes on node {n}, where the process's CPUs are",
            req.iface
        )),
        None => notes.push(format!(
            "the NIC {} has no NUMA node and the process runs on several nodes: nothing is placed \
             (set runtime.numa to a node, or run with --cpus)",
            req.iface
        )),
    }
    n
}

/// The node all of `cpus` are on, if one.
fn one_node(host: &Host, cpus: &[u32]) -> Option<u32> {
    let mut nodes = cpus.iter().map(|c| host.node_of_cpu(*c));
    let first = nodes.next()??;
    nodes.all(|n| n == Some(first)).then_some(first)
}

#[cfg(test)]
mod tests;
