//! The topology reader and its advice over synthetic /sys and /proc trees of 1, 2, 4 and 8
//! nodes.

use std::path::{Path, PathBuf};

use super::advice::{self, Intent};
use super::host::{cpu_list, format_cpu_list, Host};
use super::process::{Kind, Process};

/// A synthetic root directory, removed when dropped.
pub(crate) struct Tree(PathBuf);

impl Tree {
    pub(crate) fn new(name: &str) -> Tree {
        let dir = std::env::temp_dir().join(format!("pronghorn-topo-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }

    pub(crate) fn file(&self, path: &str, text: &str) -> &Tree {
        let p = self.0.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        self
    }

    /// A node with its CPUs, memory (MiB) and 2 MiB hugepages (total, free).
    pub(crate) fn node(&self, id: u32, cpus: &str, mem_mib: u64, huge: (u64, u64)) -> &Tree {
        let d = format!("sys/devices/system/node/node{id}");
        self.file(&format!("{d}/cpulist"), &format!("{cpus}\n"));
        self.file(
            &format!("{d}/meminfo"),
            &format!("Node {id} MemTotal: {} kB\nNode {id} MemFree: {} kB\n", mem_mib * 1024, mem_mib * 512),
        );
        self.file(&format!("{d}/hugepages/hugepages-2048kB/nr_hugepages"), &format!("{}\n", huge.0));
        self.file(&format!("{d}/hugepages/hugepages-2048kB/free_hugepages"), &format!("{}\n", huge.1));
        self.file(&format!("{d}/numastat"), "numa_hit 100\nnuma_miss 3\nnuma_foreign 2\n")
    }

    /// An interface with its node (None: no numa_node file) and its MSI interrupts' CPUs.
    pub(crate) fn nic(&self, name: &str, node: Option<i32>, irqs: &[(u32, &str)]) -> &Tree {
        let d = format!("sys/class/net/{name}/device");
        self.file(&format!("{d}/vendor"), "0x8086\n");
        if let Some(n) = node {
            self.file(&format!("{d}/numa_node"), &format!("{n}\n"));
        }
        for (irq, cpus) in irqs {
            self.file(&format!("{d}/msi_irqs/{irq}"), "msix\n");
            self.file(&format!("proc/irq/{irq}/smp_affinity_list"), &format!("{cpus}\n"));
        }
        self
    }

    fn kernel(&self, balancing: u32, thp: &str) -> &Tree {
        self.file("proc/sys/kernel/numa_balancing", &format!("{balancing}\n"));
        self.file("proc/sys/kernel/numa_balancing_scan_delay_ms", "1000\n");
        self.file("sys/kernel/mm/transparent_hugepage/enabled", thp)
    }

    fn host(&self) -> Host {
        Host::read(&self.0)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn intent<'a>(iface: &'a str, stack_cpus: &[u32]) -> Intent<'a> {
    Intent { iface: Some(iface), stack_cpus: stack_cpus.to_vec(), process: None }
}

fn any_contains(lines: &[String], words: &[&str]) -> bool {
    lines.iter().any(|l| words.iter().all(|w| l.contains(w)))
}

#[test]
fn cpu_lists_with_gaps_round_trip() {
    assert_eq!(cpu_list("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
    assert_eq!(format_cpu_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    assert_eq!(cpu_list(""), Vec::<u32>::new());
    assert_eq!(format_cpu_list(&[]), "none");
    assert_eq!(cpu_list("5-2,x,7"), vec![7], "what does not parse is left out");
}

#[test]
fn one_node_says_so_and_warns_of_nothing_about_nodes() {
    let t = Tree::new("one");
    t.node(0, "0-1", 24_000, (2048, 2048)).nic("eth0", None, &[(24, "0-1")]).kernel(0, "always [madvise] never\n");
    let host = t.host();
    assert_eq!(host.nodes.len(), 1);
    assert_eq!(host.nodes[0].cpus, vec![0, 1]);
    assert_eq!(host.nodes[0].hugepages_free_kib(), 2048 * 2048);
    assert_eq!(host.transparent_hugepages.as_deref(), Some("madvise"));
    assert_eq!(host.numa_balancing, Some(0));
    assert_eq!(host.numa_balancing_params, vec![("numa_balancing_scan_delay_ms".to_owned(), "1000".to_owned())]);
    let i = intent("eth0", &[1]);
    let notes = advice::notes(&host, &i);
    assert!(any_contains(&notes, &["one NUMA node", "placement changes nothing"]), "{notes:?}");
    assert_eq!(advice::warnings(&host, &i), Vec::<String>::new());
    let text = super::host_text(&host, Some("eth0"));
    assert!(text.starts_with("1 NUMA node\n  node 0: cpus 0-1 (2), memory 24000 MiB (12000 MiB free), hugepages 2048 kB 2048 free of 2048\n"), "{text}");
    assert!(text.contains("  eth0            no node, irqs 24->0-1  (configured)\n"), "{text}");
}

#[test]
fn a_kernel_without_numa_is_one_node_of_every_online_cpu() {
    let t = Tree::new("nonuma");
    t.file("sys/devices/system/cpu/online", "0-3\n").file("proc/meminfo", "MemTotal: 2048 kB\nMemFree: 1024 kB\n");
    let host = t.host();
    assert_eq!((host.nodes.len(), host.nodes[0].cpus.len(), host.nodes[0].mem_total_kib), (1, 4, 2048));
    assert_eq!(host.numa_balancing, None);
}

#[test]
fn two_nodes_with_the_nic_on_the_other_node_say_what_to_move() {
    let t = Tree::new("two");
    t.node(0, "0-7", 64_000, (1024, 1024))
        .node(1, "8-15", 64_000, (0, 0))
        .nic("ens1", Some(1), &[(40, "0-3"), (41, "8")])
        .kernel(1, "[always] madvise never\n");
    let host = t.host();
    assert_eq!(host.interface("ens1").unwrap().node, Some(1));
    let w = advice::warnings(&host, &intent("ens1", &[3]));
    assert!(any_contains(&w, &["NIC ens1 is on node 1", "CPUs 3 (node 0)", "CPU of node 1 (8-15)"]), "{w:?}");
    assert!(any_contains(&w, &["no free hugepages on node 1", "free on node 0", "node1/hugepages"]), "{w:?}");
    assert!(any_contains(&w, &["interrupts 40 of ens1", "node 1 (8-15)"]), "{w:?}");
    assert!(!any_contains(&w, &["interrupts 40,41"]), "irq 41 is on the NIC's node: {w:?}");
    assert!(any_contains(&w, &["kernel.numa_balancing is on and the server is pinned", "numa_balancing=0"]), "{w:?}");
    assert!(any_contains(&w, &["transparent hugepages are \"always\"", "echo madvise"]), "{w:?}");
    assert_eq!(w.len(), 5, "{w:?}");
    // Stack threads on the NIC's node, hugepages there, balancing off: nothing to say but THP.
    let t = Tree::new("two-good");
    t.node(0, "0-7", 64_000, (0, 0))
        .node(1, "8-15", 64_000, (512, 100))
        .nic("ens1", Some(1), &[(41, "8-9")])
        .kernel(0, "always madvise [never]\n");
    let host = t.host();
    assert_eq!(advice::warnings(&host, &intent("ens1", &[8, 9])), Vec::<String>::new());
    assert!(advice::notes(&host, &intent("ens1", &[8])).is_empty());
}

#[test]
fn four_nodes_with_gaps_a_memoryless_node_and_a_nic_without_a_node() {
    let t = Tree::new("four");
    t.node(0, "0-3,16-19", 32_000, (256, 256))
        .node(1, "4-7,20-23", 32_000, (256, 256))
        .node(2, "8-11,24-27", 0, (0, 0))
        .node(3, "12-15,28-31", 32_000, (256, 256))
        .nic("veth0", None, &[])
        .nic("ens2", Some(-1), &[])
        .kernel(1, "always [madvise] never\n");
    let host = t.host();
    assert_eq!(host.nodes.iter().map(|n| n.id).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    assert_eq!(host.node_of_cpu(17), Some(0));
    assert_eq!(host.node_of_cpu(26), Some(2));
    assert_eq!(host.node_of_cpu(32), None);
    assert_eq!(format_cpu_list(&host.node(1).unwrap().cpus), "4-7,20-23");
    assert_eq!((host.interface("veth0").unwrap().node, host.interface("ens2").unwrap().node), (None, None));
    let text = super::host_text(&host, None);
    assert!(text.contains("  node 2: cpus 8-11,24-27 (8), memory no memory (memoryless node)"), "{text}");
    assert!(text.contains("  ens2            no node, no MSI interrupts\n"), "{text}");
    // No node for the NIC: no advice about nodes, a note; numa_balancing still fights pinning.
    let w = advice::warnings(&host, &intent("veth0", &[5]));
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("kernel.numa_balancing is on"), "{w:?}");
    let notes = advice::notes(&host, &intent("veth0", &[5]));
    assert!(any_contains(&notes, &["interface veth0 has no NUMA node"]), "{notes:?}");
    let notes = advice::notes(&host, &intent("ph-a0", &[]));
    assert!(any_contains(&notes, &["ph-a0 is not in /sys/class/net"]), "{notes:?}");
    assert!(advice::warnings(&host, &intent("veth0", &[])).is_empty(), "not pinned: balancing may help");
}

#[test]
fn eight_nodes_place_every_cpu_and_name_several_remote_nodes() {
    let t = Tree::new("eight");
    for id in 0..8 {
        // Interleaved: node k has CPUs k, k+8, k+16, k+24.
        t.node(id, &format!("{},{},{},{}", id, id + 8, id + 16, id + 24), 16_000, (64, 64));
    }
    t.nic("ens8", Some(5), &[(60, "5,13"), (61, "6")]).kernel(0, "[never]\n");
    let host = t.host();
    assert_eq!(host.nodes.len(), 8);
    for cpu in 0..32 {
        assert_eq!(host.node_of_cpu(cpu), Some(cpu % 8), "cpu {cpu}");
    }
    let w = advice::warnings(&host, &intent("ens8", &[5, 6, 7]));
    assert!(any_contains(&w, &["CPUs 6-7 (nodes 6,7)", "CPU of node 5 (5,13,21,29)"]), "{w:?}");
    assert!(any_contains(&w, &["interrupts 61 of ens8"]), "{w:?}");
    assert_eq!(w.len(), 2, "hugepages are free on node 5, balancing off, THP never: {w:?}");
}

/// A process with a main thread and a stack thread, its memory in numa_maps.
fn process_tree(t: &Tree, pid: u32, threads: &[(u32, &str, u32)], allowed: &str) {
    t.file(&format!("proc/{pid}/status"), &format!("Name:\tredis-server\nCpus_allowed_list:\t{allowed}\n"));
    for (tid, comm, cpu) in threads {
        // Fields 3 to 38 are zeros here; field 39 is the CPU. The name has a space and a ')'.
        let mut fields = vec!["S".to_owned()];
        fields.extend((4..39).map(|_| "0".to_owned()));
        fields.push(cpu.to_string());
        fields.extend((40..=52).map(|_| "0".to_owned()));
        t.file(&format!("proc/{pid}/task/{tid}/stat"), &format!("{tid} ({comm} x) y) {}\n", fields.join(" ")));
        t.file(&format!("proc/{pid}/task/{tid}/comm"), &format!("{comm}\n"));
        t.file(
            &format!("proc/{pid}/task/{tid}/status"),
            &format!("Name:\t{comm}\nvoluntary_ctxt_switches:\t{}\nnonvoluntary_ctxt_switches:\t{}\n", tid % 100, cpu),
        );
    }
    t.file(
        &format!("proc/{pid}/numa_maps"),
        "55d0 default heap anon=300 dirty=300 N0=256 N1=44 kernelpagesize_kB=4\n\
         7f00 default file=/dev/hugepages/rtemap_0 huge dirty=10 N1=10 kernelpagesize_kB=2048\n\
         7f10 bind:1 file=/dev/hugepages/rtemap_1 huge dirty=2 N0=2 kernelpagesize_kB=2048\n\
         7f20 default anon=512 dirty=512 N0=512 kernelpagesize_kB=4\n\
         7f30 default stack anon=8 dirty=8 N0=8 kernelpagesize_kB=4\n\
         7f40 default file=/usr/lib/libc.so.6 mapped=100 mapmax=50 N0=100 kernelpagesize_kB=4\n\
         7f50 default file=/usr/lib/x\n",
    );
}

#[test]
fn a_process_lists_its_threads_and_memory_per_node_and_kind() {
    let t = Tree::new("proc");
    t.node(0, "0-3", 8_000, (0, 0)).node(1, "4-7", 8_000, (64, 50)).nic("ens1", Some(1), &[]).kernel(1, "[madvise]\n");
    process_tree(&t, 4242, &[(4242, "redis-server", 2), (4250, "pronghorn-ctl", 5)], "0-3");
    let host = t.host();
    let p = Process::read(t.path(), 4242).unwrap();
    assert_eq!(p.allowed_cpus, vec![0, 1, 2, 3]);
    let threads: Vec<(u32, &str, Option<u32>)> = p.threads.iter().map(|t| (t.tid, t.name.as_str(), t.cpu)).collect();
    assert_eq!(threads, vec![(4242, "redis-server", Some(2)), (4250, "pronghorn-ctl", Some(5))]);
    let kib = |kind: Kind, node: u32| p.memory.get(&kind).and_then(|m| m.get(&node)).copied().unwrap_or(0);
    assert_eq!((kib(Kind::Heap, 0), kib(Kind::Heap, 1)), (1024, 176));
    assert_eq!((kib(Kind::Hugepages, 0), kib(Kind::Hugepages, 1)), (4096, 20480));
    assert_eq!((kib(Kind::Anon, 0), kib(Kind::Files, 0)), (2080, 400));
    let i = Intent { iface: Some("ens1"), stack_cpus: Vec::new(), process: Some(&p) };
    let w = advice::warnings(&host, &i);
    assert!(
        any_contains(&w, &["threads 4242 (redis-server) of pid 4242 last ran off node 1", "taskset -c 4-7"]),
        "{w:?}"
    );
    assert!(!any_contains(&w, &["4250 (pronghorn-ctl)"]), "{w:?}");
    assert!(any_contains(&w, &["kernel.numa_balancing is on and the server is pinned"]), "allowed 0-3 of 0-7: {w:?}");
    assert!(!any_contains(&w, &["of pid 4242's memory"]), "most memory (hugepages) is on node 1: {w:?}");
    let text = super::process_text(&host, &p, "redis-server *:6379", Some("ens1"));
    assert!(
        text.starts_with("pid 4242 (redis-server *:6379): interface ens1 (node 1), may run on cpus 0-3\n"),
        "{text}"
    );
    assert!(text.contains("     TID   CPU  NODE       WAITS   PREEMPTED  THREAD\n"), "{text}");
    assert!(
        text.contains(
            "    4242     2     0          42           2  redis-server\n    4250     5     1          50           5  pronghorn-ctl\n"
        ),
        "{text}"
    );
    assert!(text.contains("  hugepages (DPDK)               4       20\n"), "{text}");
    assert!(text.contains("numastat node 1: numa_hit 100, numa_miss 3, numa_foreign 2\n"), "{text}");
    assert!(Process::read(t.path(), 1).is_none());
}

#[test]
fn a_process_with_most_memory_off_the_nics_node_is_told_to_bind_it() {
    let t = Tree::new("proc-remote");
    t.node(0, "0-3", 8_000, (64, 50)).node(1, "4-7", 8_000, (64, 50)).nic("ens0", Some(0), &[]).kernel(0, "[never]\n");
    process_tree(&t, 77, &[(77, "mariadbd", 1)], "0-7");
    let p = Process::read(t.path(), 77).unwrap();
    let w = advice::warnings(&t.host(), &Intent { iface: Some("ens0"), stack_cpus: Vec::new(), process: Some(&p) });
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].starts_with("73% of pid 77's memory (20 MiB, 20 MiB of it DPDK hugepages) is off node 0"), "{w:?}");
}

#[test]
fn placement_of_a_config_is_shown() {
    let t = Tree::new("placement");
    t.node(0, "0-3", 8000, (64, 64)).node(1, "4-7", 8000, (64, 64)).nic("ens1", Some(1), &[]);
    let text =
        "[nic]\npmd = \"af_xdp\"\niface = \"ens1\"\n[ipv4]\naddress = \"10.0.0.1/24\"\n[runtime]\ncpus = \"4-5\"\n";
    let cfg = config::Config::parse(text, Path::new("t.toml")).unwrap();
    let p = super::placement_of(&t.host(), &cfg).unwrap();
    assert_eq!(
        super::placement_text(&p),
        "placement (runtime.numa): node 1; packet pool on node 1; EAL lcore 4; stack threads on the process's CPUs; \
         application cpus 4-5, memory preferred node 1\n"
    );
    let cfg = config::Config::parse(&text.replace("4-5", "9"), Path::new("t.toml")).unwrap();
    let e = super::placement_of(&t.host(), &cfg).unwrap_err().to_string();
    assert_eq!(e, "runtime.cpus: CPU 9 is not online (online: 0-7)");
}
