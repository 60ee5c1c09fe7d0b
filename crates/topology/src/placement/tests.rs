//! The placement over synthetic hosts of 1, 2, 4 and 8 nodes: CPU lists with gaps, a NIC
//! without a node, memoryless nodes, nodes without free hugepages.

use super::{decide, MemPolicy, Numa, Placement, Request};
use crate::host::{cpu_list, Host, HugePages, Interface, Node};

/// A host of nodes given as (CPU list, MiB of memory, free 2 MiB hugepages), with one NIC.
fn host(nodes: &[(&str, u64, u64)], nic_node: Option<u32>) -> Host {
    Host {
        nodes: nodes
            .iter()
            .enumerate()
            .map(|(id, (cpus, mib, free))| Node {
                id: id as u32,
                cpus: cpu_list(cpus),
                mem_total_kib: mib * 1024,
                mem_free_kib: mib * 512,
                hugepages: vec![HugePages { size_kib: 2048, total: *free, free: *free }],
                numastat: Vec::new(),
            })
            .collect(),
        interfaces: vec![Interface { name: "ens1".into(), node: nic_node, irqs: Vec::new() }],
        numa_balancing: None,
        numa_balancing_params: Vec::new(),
        transparent_hugepages: None,
        isolated_cpus: Vec::new(),
    }
}

fn all(h: &Host) -> Vec<u32> {
    h.nodes.iter().flat_map(|n| n.cpus.clone()).collect()
}

fn req<'a>(numa: Numa, allowed: &'a [u32]) -> Request<'a> {
    Request { iface: "ens1", numa, allowed, app_cpus: None, stack_cpu: None, shards: 1 }
}

fn noted(p: &Placement, words: &[&str]) -> bool {
    p.notes.iter().any(|n| words.iter().all(|w| n.contains(w)))
}

const TWO: [(&str, u64, u64); 2] = [("0-3", 16_000, 512), ("4-7", 16_000, 512)];

#[test]
fn one_node_places_on_it_and_changes_nothing_unasked() {
    let h = host(&[("0-1", 24_000, 2048)], None);
    let cpus = all(&h);
    let p = decide(&h, &req(Numa::Auto, &cpus)).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(0), Some(0), Some(0)));
    assert_eq!(p.stack_cpus, Vec::<Vec<u32>>::new(), "the stack threads inherit the process's CPUs");
    assert_eq!((p.app_cpus.clone(), p.app_memory), (Vec::new(), None));
    assert!(noted(&p, &["one NUMA node", "placement changes nothing"]), "{:?}", p.notes);
    // --cpus 1: the application there, its memory preferred on node 0, the EAL's lcore too.
    let r = Request { app_cpus: Some((&[1], "--cpus")), ..req(Numa::Auto, &cpus) };
    let p = decide(&h, &r).unwrap();
    assert_eq!((p.app_cpus.clone(), p.app_memory, p.eal_lcore), (vec![1], Some((0, MemPolicy::Preferred)), Some(1)));
    assert_eq!(p.stack_cpus, Vec::<Vec<u32>>::new(), "stack threads run where the application was put");
}

#[test]
fn two_nodes_put_the_stack_on_the_nics_node() {
    let h = host(&TWO, Some(1));
    let cpus = all(&h);
    let p = decide(&h, &Request { shards: 2, ..req(Numa::Auto, &cpus) }).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(1), Some(1), Some(4)));
    assert_eq!(p.stack_cpus, vec![vec![4, 5, 6, 7], vec![4, 5, 6, 7]]);
    assert_eq!((p.app_cpus.clone(), p.app_memory), (Vec::new(), None), "auto leaves the application alone");
    // stack_cpu off the NIC's node is kept, and said.
    let p = decide(&h, &Request { stack_cpu: Some(2), ..req(Numa::Auto, &cpus) }).unwrap();
    assert_eq!((p.stack_cpus.clone(), p.eal_lcore), (vec![vec![2]], Some(4)));
    assert!(noted(&p, &["runtime.stack_cpu", "CPU 2, off node 1", "4-7"]), "{:?}", p.notes);
    // The application on node 0: the stack still goes to the NIC's node, and the crossing is said.
    let r = Request { app_cpus: Some((&[0, 1], "--cpus")), ..req(Numa::Auto, &cpus) };
    let p = decide(&h, &r).unwrap();
    assert_eq!((p.app_cpus.clone(), p.app_memory), (vec![0, 1], Some((0, MemPolicy::Preferred))));
    assert_eq!(p.stack_cpus, vec![vec![4, 5, 6, 7]]);
    assert!(noted(&p, &["CPUs 0-1 are on node 0", "stack on node 1"]), "{:?}", p.notes);
}

#[test]
fn a_named_node_binds_the_application_there() {
    let h = host(&TWO, Some(1));
    let cpus = all(&h);
    let p = decide(&h, &req(Numa::Node(0), &cpus)).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(0), Some(0), Some(0)));
    assert_eq!((p.app_cpus.clone(), p.app_memory), (vec![0, 1, 2, 3], Some((0, MemPolicy::Bind))));
    let r = Request { app_cpus: Some((&[2], "runtime.cpus")), ..req(Numa::Node(0), &cpus) };
    assert_eq!(decide(&h, &r).unwrap().app_memory, Some((0, MemPolicy::Bind)));
}

#[test]
fn off_places_nothing_but_pins_what_was_asked() {
    let h = host(&TWO, Some(1));
    let cpus = all(&h);
    let r = Request { app_cpus: Some((&[5], "--cpus")), stack_cpu: Some(6), ..req(Numa::Off, &cpus) };
    let p = decide(&h, &r).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore, p.app_memory), (None, None, None, None));
    assert_eq!((p.app_cpus.clone(), p.stack_cpus.clone()), (vec![5], vec![vec![6]]));
    assert!(noted(&p, &["runtime.numa = off"]), "{:?}", p.notes);
}

#[test]
fn errors_name_the_key() {
    let h = host(&TWO, Some(1));
    let cpus = all(&h);
    let e = decide(&h, &req(Numa::Node(5), &cpus)).unwrap_err();
    assert_eq!(e, "runtime.numa = 5: this host has no NUMA node 5 (nodes: 0-1)");
    let e = decide(&h, &Request { app_cpus: Some((&[3, 9], "--cpus")), ..req(Numa::Auto, &cpus) }).unwrap_err();
    assert_eq!(e, "--cpus: CPU 9 is not online (online: 0-7)");
    let e = decide(&h, &Request { app_cpus: Some((&[8], "runtime.cpus")), ..req(Numa::Auto, &cpus) }).unwrap_err();
    assert!(e.starts_with("runtime.cpus: CPU 8"), "{e}");
    let e = decide(&h, &Request { stack_cpu: Some(7), shards: 2, ..req(Numa::Auto, &cpus) }).unwrap_err();
    assert_eq!(e, "runtime.stack_cpu: CPU 7 + 1 (shard 1's) is not online (online: 0-7)");
}

#[test]
fn four_nodes_with_gaps_in_their_cpu_lists() {
    let h = host(
        &[("0-1,8-9", 8000, 64), ("2-3,10-11", 8000, 64), ("4-5,12-13", 8000, 64), ("6-7,14-15", 8000, 64)],
        Some(2),
    );
    let cpus = all(&h);
    let p = decide(&h, &Request { shards: 3, ..req(Numa::Auto, &cpus) }).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(2), Some(2), Some(4)));
    assert_eq!(p.stack_cpus, vec![vec![4, 5, 12, 13]; 3]);
    // A process already confined to part of the node keeps its stack threads there.
    let p = decide(&h, &req(Numa::Auto, &[5, 12, 6])).unwrap();
    assert_eq!((p.stack_cpus.clone(), p.eal_lcore), (vec![vec![5, 12]], Some(5)));
}

#[test]
fn a_nic_without_a_node_follows_the_process() {
    let h = host(&TWO, None);
    let cpus = all(&h);
    let p = decide(&h, &req(Numa::Auto, &cpus)).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (None, None, None));
    assert!(noted(&p, &["ens1 has no NUMA node", "nothing is placed"]), "{:?}", p.notes);
    let r = Request { app_cpus: Some((&[6, 7], "--cpus")), ..req(Numa::Auto, &cpus) };
    let p = decide(&h, &r).unwrap();
    assert_eq!((p.node, p.pool_node, p.app_memory), (Some(1), Some(1), Some((1, MemPolicy::Preferred))));
    assert_eq!(p.stack_cpus, Vec::<Vec<u32>>::new());
    assert!(noted(&p, &["goes on node 1, where the process's CPUs are"]), "{:?}", p.notes);
}

#[test]
fn memoryless_node_and_node_without_hugepages() {
    let h = host(&[("0-3", 16_000, 512), ("4-7", 0, 0)], Some(1));
    let cpus = all(&h);
    let p = decide(&h, &req(Numa::Node(1), &cpus)).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(1), None, Some(4)));
    assert_eq!((p.app_cpus.clone(), p.app_memory), (vec![4, 5, 6, 7], None), "no memory there to bind to");
    assert!(noted(&p, &["node 1 has no memory"]), "{:?}", p.notes);
    let eight: Vec<(String, u64, u64)> =
        (0..8).map(|n| (format!("{}-{}", 4 * n, 4 * n + 3), 8000, if n == 7 { 0 } else { 64 })).collect();
    let eight: Vec<(&str, u64, u64)> = eight.iter().map(|(c, m, f)| (c.as_str(), *m, *f)).collect();
    let h = host(&eight, Some(7));
    let cpus = all(&h);
    let p = decide(&h, &req(Numa::Auto, &cpus)).unwrap();
    assert_eq!((p.node, p.pool_node, p.eal_lcore), (Some(7), None, Some(28)));
    assert_eq!(p.stack_cpus, vec![vec![28, 29, 30, 31]]);
    assert!(noted(&p, &["node 7 has no free hugepages", "node7/hugepages"]), "{:?}", p.notes);
}
