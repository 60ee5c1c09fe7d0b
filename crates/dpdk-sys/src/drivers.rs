/// The DPDK drivers linked into pronghorn (`librte_<name>.a`, each `--whole-archive`: a driver
/// registers itself from a constructor that nothing references): the buses and mempool handlers
/// the ports need (`mempool_ring` is every pool's default ops, `mempool_stack` the LIFO pool's),
/// the virtual-device PMDs pronghorn opens (`nic.pmd`: af_xdp, af_packet) and those a lab or a
/// test may bring up over a Linux interface or a socket (tap, memif, ring, virtio_user, with the
/// PCI bus virtio needs). No PCI NIC PMD: pronghorn passes `--no-pci` and opens its port by the
/// vdev's name. A driver not listed here is not in the process: the EAL rejects a `--vdev`
/// naming it ("failed to parse device"). Read by build.rs (what to link) and the crate (what to
/// say when the EAL names a driver it lacks).
pub const LINKED_DRIVERS: &[&str] = &[
    "bus_pci",
    "bus_vdev",
    "mempool_ring",
    "mempool_stack",
    "net_af_packet",
    "net_af_xdp",
    "net_memif",
    "net_ring",
    "net_tap",
    "net_virtio",
];
