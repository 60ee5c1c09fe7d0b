//! The host as it matters to a stack, read from a root directory (`/` normally; a synthetic
//! tree in tests): NUMA nodes with their CPUs, memory and hugepages, each interface's node and
//! its queues' IRQ affinity, the kernel's NUMA balancing, transparent hugepages and isolated
//! CPUs. A file that is missing or unreadable is a fact left out, never an error: a kernel
//! without NUMA has no node directories, a virtual NIC has no `numa_node`.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Serialize)]
pub struct Host {
    pub nodes: Vec<Node>,
    pub interfaces: Vec<Interface>,
    /// `kernel.numa_balancing` (0 off, 1 on, 2 and 3 memory tiering), when the kernel has it.
    pub numa_balancing: Option<u32>,
    /// Its scan parameters, by file name (`/proc/sys/kernel/numa_balancing_*`, or
    /// debugfs's `sched/numa_balancing/*` on kernels that moved them there).
    pub numa_balancing_params: Vec<(String, String)>,
    /// The selected mode of `/sys/kernel/mm/transparent_hugepage/enabled`.
    pub transparent_hugepages: Option<String>,
    pub isolated_cpus: Vec<u32>,
}

#[derive(Debug, Serialize)]
pub struct Node {
    pub id: u32,
    pub cpus: Vec<u32>,
    pub mem_total_kib: u64,
    pub mem_free_kib: u64,
    pub hugepages: Vec<HugePages>,
    /// `numastat`'s counters of the node (numa_hit, numa_miss, numa_foreign, ...), in pages.
    pub numastat: Vec<(String, u64)>,
}

#[derive(Debug, Serialize, Clone, Copy)]
pub struct HugePages {
    pub size_kib: u64,
    pub total: u64,
    pub free: u64,
}

#[derive(Debug, Serialize)]
pub struct Interface {
    pub name: String,
    /// None: the device says -1, or has no `numa_node` (virtual interfaces).
    pub node: Option<u32>,
    pub irqs: Vec<Irq>,
}

#[derive(Debug, Serialize)]
pub struct Irq {
    pub irq: u32,
    pub cpus: Vec<u32>,
}

impl Host {
    pub fn read(root: &Path) -> Host {
        let sys_node = root.join("sys/devices/system/node");
        let mut nodes: Vec<Node> = entries(&sys_node)
            .into_iter()
            .filter_map(|name| name.strip_prefix("node")?.parse::<u32>().ok())
            .map(|id| Node::read(&sys_node.join(format!("node{id}")), id))
            .collect();
        nodes.sort_by_key(|n| n.id);
        if nodes.is_empty() {
            // No NUMA in this kernel: one node with every online CPU and all the memory.
            let cpus = read(&root.join("sys/devices/system/cpu/online")).map(|t| cpu_list(&t)).unwrap_or_default();
            let meminfo = read(&root.join("proc/meminfo")).unwrap_or_default();
            let hugepages = hugepages(&root.join("sys/kernel/mm/hugepages"));
            nodes.push(Node {
                id: 0,
                cpus,
                mem_total_kib: kib(&meminfo, "MemTotal:"),
                mem_free_kib: kib(&meminfo, "MemFree:"),
                hugepages,
                numastat: Vec::new(),
            });
        }
        let net = root.join("sys/class/net");
        let mut interfaces: Vec<Interface> = entries(&net)
            .into_iter()
            .filter(|name| name != "lo")
            .map(|name| Interface::read(root, &net.join(&name), name))
            .collect();
        interfaces.sort_by(|a, b| a.name.cmp(&b.name));
        let kernel = root.join("proc/sys/kernel");
        let mut params: Vec<(String, String)> = entries(&kernel)
            .into_iter()
            .filter(|n| n.starts_with("numa_balancing_"))
            .filter_map(|n| {
                let value = read(&kernel.join(&n))?;
                Some((n, value))
            })
            .collect();
        let debugfs = root.join("sys/kernel/debug/sched/numa_balancing");
        params.extend(
            entries(&debugfs).into_iter().filter_map(|n| Some((format!("scan/{n}"), read(&debugfs.join(&n))?))),
        );
        params.sort();
        Host {
            nodes,
            interfaces,
            numa_balancing: read(&kernel.join("numa_balancing")).and_then(|t| t.parse().ok()),
            numa_balancing_params: params,
            transparent_hugepages: read(&root.join("sys/kernel/mm/transparent_hugepage/enabled")).and_then(|t| {
                let start = t.find('[')?;
                let end = t[start..].find(']')?;
                Some(t[start + 1..start + end].to_owned())
            }),
            isolated_cpus: read(&root.join("sys/devices/system/cpu/isolated"))
                .map(|t| cpu_list(&t))
                .unwrap_or_default(),
        }
    }

    /// The node of `cpu`, when a node lists it.
    pub fn node_of_cpu(&self, cpu: u32) -> Option<u32> {
        self.nodes.iter().find(|n| n.cpus.contains(&cpu)).map(|n| n.id)
    }

    pub fn node(&self, id: u32) -> Option<&Node> {
        self.nodes.iter().find(|n| n.id == id)
    }

    pub fn interface(&self, name: &str) -> Option<&Interface> {
        self.interfaces.iter().find(|i| i.name == name)
    }
}

impl Node {
    fn read(dir: &Path, id: u32) -> Node {
        let meminfo = read(&dir.join("meminfo")).unwrap_or_default();
        let numastat = read(&dir.join("numastat"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| {
                let (name, value) = l.split_once(' ')?;
                Some((name.to_owned(), value.trim().parse().ok()?))
            })
            .collect();
        Node {
            id,
            cpus: read(&dir.join("cpulist")).map(|t| cpu_list(&t)).unwrap_or_default(),
            mem_total_kib: kib(&meminfo, "MemTotal:"),
            mem_free_kib: kib(&meminfo, "MemFree:"),
            hugepages: hugepages(&dir.join("hugepages")),
            numastat,
        }
    }

    /// Free hugepages of any size, in KiB.
    pub fn hugepages_free_kib(&self) -> u64 {
        self.hugepages.iter().map(|h| h.free * h.size_kib).sum()
    }
}

impl Interface {
    fn read(root: &Path, dir: &Path, name: String) -> Interface {
        let device = dir.join("device");
        let node =
            read(&device.join("numa_node")).and_then(|t| t.parse::<i64>().ok()).and_then(|n| u32::try_from(n).ok());
        // MSI vectors are the PCI function's: under the device, or its parent for a virtio NIC.
        let mut irqs: Vec<u32> = [device.join("msi_irqs"), device.join("../msi_irqs")]
            .iter()
            .map(|d| entries(d))
            .find(|e| !e.is_empty())
            .unwrap_or_default()
            .iter()
            .filter_map(|n| n.parse().ok())
            .collect();
        irqs.sort_unstable();
        let irqs = irqs
            .into_iter()
            .filter_map(|irq| {
                let cpus = cpu_list(&read(&root.join(format!("proc/irq/{irq}/smp_affinity_list")))?);
                Some(Irq { irq, cpus })
            })
            .collect();
        Interface { name, node, irqs }
    }
}

fn hugepages(dir: &Path) -> Vec<HugePages> {
    let mut sizes: Vec<HugePages> = entries(dir)
        .into_iter()
        .filter_map(|name| {
            let size_kib = name.strip_prefix("hugepages-")?.strip_suffix("kB")?.parse().ok()?;
            let d = dir.join(&name);
            let number = |f: &str| read(&d.join(f)).and_then(|t| t.parse().ok());
            Some(HugePages { size_kib, total: number("nr_hugepages")?, free: number("free_hugepages")? })
        })
        .collect();
    sizes.sort_by_key(|h| h.size_kib);
    sizes
}

/// A meminfo value in KiB (`Node 0 MemTotal:  24684092 kB`, or without the node prefix).
fn kib(meminfo: &str, field: &str) -> u64 {
    meminfo
        .lines()
        .find_map(|l| {
            let mut words = l.split_whitespace().skip_while(|w| *w != field);
            words.next()?;
            words.next()?.parse().ok()
        })
        .unwrap_or(0)
}

/// A kernel CPU list (`0-3,8,10-11`); what does not parse is left out.
pub fn cpu_list(text: &str) -> Vec<u32> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) {
                    if b >= a && b - a < 65_536 {
                        cpus.extend(a..=b);
                    }
                }
            }
            None => cpus.extend(part.parse::<u32>().ok()),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// CPUs written back as a kernel CPU list, runs joined: `0-3,8,10-11`.
pub fn format_cpu_list(cpus: &[u32]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { cpus[i].to_string() } else { format!("{}-{}", cpus[i], cpus[j]) });
        i = j + 1;
    }
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(",")
    }
}

pub fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|t| t.trim().to_owned())
}

pub fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default()
}

/// The root the reader works on: `--root`, else `$PRONGHORN_TOPO_ROOT`, else `/`.
pub fn root(explicit: Option<PathBuf>) -> PathBuf {
    explicit
        .or_else(|| std::env::var_os("PRONGHORN_TOPO_ROOT").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"))
}
