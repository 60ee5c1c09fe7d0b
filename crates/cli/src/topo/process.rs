//! A process as it lies on the host: its threads with the CPU each last ran on (and that CPU's
//! node), the CPUs it may run on, and its memory per node from `/proc/PID/numa_maps`, grouped
//! as heap, hugepage mappings (DPDK's memory: packet pools and rings), other anonymous memory
//! and files. Read from a root directory like the host.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::host::{cpu_list, entries, read};

#[derive(Debug, Serialize)]
pub struct Process {
    pub pid: u32,
    pub threads: Vec<Thread>,
    /// `Cpus_allowed_list` of /proc/PID/status.
    pub allowed_cpus: Vec<u32>,
    /// KiB per kind of mapping, per node.
    pub memory: BTreeMap<Kind, BTreeMap<u32, u64>>,
}

#[derive(Debug, Serialize)]
pub struct Thread {
    pub tid: u32,
    pub name: String,
    /// The CPU it last ran on (field 39 of /proc/PID/task/TID/stat).
    pub cpu: Option<u32>,
    /// Context switches since it started (`voluntary_ctxt_switches` of its status: it waited,
    /// for a lock, a wakeup or the network) and `nonvoluntary_ctxt_switches` (preempted).
    pub waits: Option<u64>,
    pub preempted: Option<u64>,
}

/// What a mapping of numa_maps holds.
#[derive(Debug, Serialize, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Heap,
    /// hugetlbfs mappings: DPDK's memory (mempools, rings, the port's queues).
    Hugepages,
    /// Other anonymous memory: thread stacks, mmap'd arenas, the stack's own rings.
    Anon,
    /// Mapped files: the program, its libraries, data files.
    Files,
}

impl Kind {
    pub fn label(self) -> &'static str {
        match self {
            Kind::Heap => "heap",
            Kind::Hugepages => "hugepages (DPDK)",
            Kind::Anon => "anon",
            Kind::Files => "files",
        }
    }
}

impl Process {
    /// None when /proc/PID is not there.
    pub fn read(root: &Path, pid: u32) -> Option<Process> {
        let dir = root.join(format!("proc/{pid}"));
        let status = read(&dir.join("status"))?;
        let allowed_cpus =
            status.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:")).map(cpu_list).unwrap_or_default();
        let task = dir.join("task");
        let mut threads: Vec<Thread> = entries(&task)
            .into_iter()
            .filter_map(|t| t.parse::<u32>().ok())
            .filter_map(|tid| {
                let d = task.join(tid.to_string());
                let stat = read(&d.join("stat"))?;
                let status = read(&d.join("status")).unwrap_or_default();
                let switches = |field: &str| {
                    status.lines().find_map(|l| l.strip_prefix(field)).and_then(|v| v.trim().parse().ok())
                };
                Some(Thread {
                    tid,
                    name: read(&d.join("comm")).unwrap_or_default(),
                    cpu: last_cpu(&stat),
                    waits: switches("voluntary_ctxt_switches:"),
                    preempted: switches("nonvoluntary_ctxt_switches:"),
                })
            })
            .collect();
        threads.sort_by_key(|t| t.tid);
        let memory = numa_maps(&read(&dir.join("numa_maps")).unwrap_or_default());
        Some(Process { pid, threads, allowed_cpus, memory })
    }

    /// KiB on each node, all kinds together.
    pub fn memory_per_node(&self) -> BTreeMap<u32, u64> {
        let mut total = BTreeMap::new();
        for per_node in self.memory.values() {
            for (node, kib) in per_node {
                *total.entry(*node).or_insert(0) += kib;
            }
        }
        total
    }
}

/// Field 39 ("processor") of a stat line; the command name in parentheses may hold spaces and
/// parentheses itself, so fields are counted after the last ')'.
fn last_cpu(stat: &str) -> Option<u32> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // The fields after ')' start at field 3 (state).
    rest.split_whitespace().nth(39 - 3)?.parse().ok()
}

/// numa_maps lines (`7f00 default file=/usr/lib/libc.so.6 mapped=40 N0=40 kernelpagesize_kB=4`)
/// summed into KiB per kind and node.
fn numa_maps(text: &str) -> BTreeMap<Kind, BTreeMap<u32, u64>> {
    let mut memory: BTreeMap<Kind, BTreeMap<u32, u64>> = BTreeMap::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let page_kib: u64 =
            words.iter().find_map(|w| w.strip_prefix("kernelpagesize_kB=")).and_then(|v| v.parse().ok()).unwrap_or(4);
        let kind = if words.contains(&"huge") || page_kib >= 2048 {
            Kind::Hugepages
        } else if words.contains(&"heap") {
            Kind::Heap
        } else if words.iter().any(|w| w.starts_with("file=")) {
            Kind::Files
        } else {
            Kind::Anon
        };
        for w in &words {
            let Some((node, pages)) = w.strip_prefix('N').and_then(|w| w.split_once('=')) else { continue };
            if let (Ok(node), Ok(pages)) = (node.parse::<u32>(), pages.parse::<u64>()) {
                *memory.entry(kind).or_default().entry(node).or_insert(0) += pages * page_kib;
            }
        }
    }
    memory
}
