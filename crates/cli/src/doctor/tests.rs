//! `pronghorn doctor` over synthetic hosts: a healthy one passes every check, and each check
//! fails (or warns) when its fact is broken, with the fix it names.

use std::path::Path;

use config::Config;

use super::checks::{self, Check, Given, Status};
use super::facts::{AttachedXdp, Facts, Peer};
use super::netdev::{KernelXdp, XdpFeatures};
use crate::topo::tests::Tree;

const SHARED: &str = "[nic]\npmd = \"af_xdp\"\niface = \"eth0\"\nshare = true\n[ipv4]\naddress = \"192.0.2.10/24\"\n";
const DEDICATED_TWO_QUEUES: &str =
    "[nic]\npmd = \"af_xdp\"\niface = \"eth0\"\nqueues = 2\n[ipv4]\naddress = \"192.0.2.10/24\"\n";

/// A host where everything pronghorn needs is right: root, 2 MiB pages free, Debian 12's kernel
/// with AF_XDP, a million open files, Linux's default port range, and eth0 up
/// on an ice NIC (native XDP, zero-copy) with 4 queues and MTU 1500.
fn healthy(name: &str) -> Tree {
    let t = Tree::new(&format!("doctor-{name}"));
    t.node(0, "0-3", 16_000, (512, 512))
        .nic("eth0", Some(0), &[])
        .file("proc/self/status", "Name:\tpronghorn\nUid:\t0\t0\t0\t0\nCapEff:\t000001ffffffffff\n")
        .file("proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
        .file("boot/config-6.1.0-18-amd64", "CONFIG_BPF=y\nCONFIG_XDP_SOCKETS=y\n")
        .file(
            "proc/self/limits",
            "Limit                     Soft Limit           Hard Limit           Units     \n\
             Max open files            1048576              1048576              files     \n",
        )
        .file("proc/sys/net/ipv4/ip_local_port_range", "32768\t60999\n")
        .file("proc/sys/net/ipv4/ip_local_reserved_ports", "\n")
        .file("sys/class/net/eth0/flags", "0x1003\n")
        .file("sys/class/net/eth0/operstate", "up\n")
        .file("sys/class/net/eth0/mtu", "1500\n");
    for q in 0..4 {
        t.file(&format!("sys/class/net/eth0/queues/rx-{q}/rps_cpus"), "0\n");
    }
    t.driver("ice")
}

impl Tree {
    fn driver(self, name: &str) -> Tree {
        let link = self.path().join("sys/class/net/eth0/device/driver");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(format!("../../../../bus/pci/drivers/{name}"), link).unwrap();
        self
    }

    fn remove(&self, path: &str) -> &Tree {
        let p = self.path().join(path);
        let _ = std::fs::remove_file(&p).or_else(|_| std::fs::remove_dir_all(&p));
        self
    }
}

fn parse(text: &str) -> Given {
    Given::Good(Box::new(Config::parse(text, Path::new("t.toml")).unwrap()))
}

fn run(t: &Tree, config: &str) -> Vec<Check> {
    checks::all(&Facts::read(t.path(), Some("eth0")), &parse(config))
}

/// The check named `name`, which must have `status` and, when not ok, a fix containing `fix`.
fn expect(checks: &[Check], name: &str, status: Status, fix: &str) -> String {
    let c = checks.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no check {name} in {checks:#?}"));
    assert_eq!(c.status, status, "{c:#?}");
    match &c.fix {
        Some(f) => assert!(f.contains(fix), "{name}: the fix {f:?} does not say {fix:?}"),
        None => assert_eq!(status, Status::Ok, "{c:#?}"),
    }
    c.detail.clone()
}

#[test]
fn a_healthy_host_passes_every_check() {
    let t = healthy("ok");
    let checks = run(&t, SHARED);
    let names: Vec<&str> = checks.iter().map(|c| c.name).collect();
    assert_eq!(
        names,
        [
            "privileges",
            "config",
            "hugepages",
            "kernel",
            "af_xdp",
            "open files",
            "ephemeral ports",
            "dpdk run dirs",
            "interface",
            "xdp",
            "mtu",
            "xdp program"
        ]
    );
    for c in &checks {
        assert_eq!(c.status, Status::Ok, "{c:#?}");
    }
    let xdp = expect(&checks, "xdp", Status::Ok, "");
    assert_eq!(
        xdp,
        "driver ice, by the driver list of Linux 6.1 (the kernel was not asked): native XDP, zero-copy AF_XDP"
    );
    let text = super::text(&checks);
    assert!(text.starts_with("ok    privileges       root\n"), "{text}");
    assert!(text.ends_with("12 ok, 0 warnings, 0 failed\n"), "{text}");
}

#[test]
fn without_root_or_the_capabilities_it_fails() {
    let t = healthy("user");
    t.file("proc/self/status", "Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
    let c = expect(&run(&t, SHARED), "privileges", Status::Fail, "--ambient-caps=+dac_override,+net_admin");
    assert!(c.contains("uid 1000 without root or the capabilities dac_override, net_admin"), "{}", c);
    let caps = nic::dpdk::NIC_CAPABILITIES.iter().fold(0u64, |m, (bit, _)| m | 1 << bit);
    t.file("proc/self/status", &format!("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t{caps:016x}\n"));
    expect(&run(&t, SHARED), "privileges", Status::Ok, "");
}

#[test]
fn too_few_hugepages_fail_and_too_few_on_the_nics_node_warn() {
    let t = healthy("huge");
    t.node(0, "0-3", 16_000, (512, 5));
    let c = expect(
        &run(&t, SHARED),
        "hugepages",
        Status::Fail,
        "echo 518 > /sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages",
    );
    assert!(c.starts_with("10 MiB free (node 0: 10 MiB); a process with mbufs = 8191 takes about 22 MiB"), "{}", c);
    // Two nodes, enough in all, but the NIC's node 1 has none free.
    t.node(0, "0-3", 16_000, (512, 512)).node(1, "4-7", 16_000, (64, 0)).nic("eth0", Some(1), &[]);
    expect(
        &run(&t, SHARED),
        "hugepages",
        Status::Warn,
        "echo 75 > /sys/devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages",
    );
    // A larger pool needs more: 32767 mbufs take 44 pages.
    t.node(1, "4-7", 16_000, (512, 40));
    let big = SHARED.replace("share = true\n", "share = true\nmbufs = 32767\n");
    expect(&run(&t, &big), "hugepages", Status::Warn, "node1");
    expect(&run(&t, SHARED), "hugepages", Status::Ok, "");
}

#[test]
fn an_old_kernel_or_one_without_af_xdp_is_named() {
    let t = healthy("kernel");
    t.file("proc/sys/kernel/osrelease", "4.14.0\n").file("boot/config-4.14.0", "CONFIG_XDP_SOCKETS=y\n");
    expect(&run(&t, SHARED), "kernel", Status::Fail, "af_packet");
    t.file("proc/sys/kernel/osrelease", "5.0.21\n").file("boot/config-5.0.21", "# CONFIG_XDP_SOCKETS is not set\n");
    let checks = run(&t, SHARED);
    expect(&checks, "kernel", Status::Warn, "5.4");
    expect(&checks, "af_xdp", Status::Fail, "CONFIG_XDP_SOCKETS=y");
    t.remove("boot/config-5.0.21");
    expect(&run(&t, SHARED), "af_xdp", Status::Warn, "grep CONFIG_XDP_SOCKETS");
}

#[test]
fn few_open_files_warn() {
    let t = healthy("nofile");
    t.file("proc/self/limits", "Max open files            1024                 524288               files     \n");
    let c = expect(&run(&t, SHARED), "open files", Status::Warn, "LimitNOFILE=65536");
    assert!(c.starts_with("ulimit -n 1024 (hard 524288)"), "{}", c);
}

#[test]
fn a_kernel_port_range_over_ours_fails_in_shared_mode_only() {
    let t = healthy("ports");
    t.file("proc/sys/net/ipv4/ip_local_port_range", "10000\t65000\n");
    let c = expect(
        &run(&t, SHARED),
        "ephemeral ports",
        Status::Fail,
        "sysctl -w net.ipv4.ip_local_reserved_ports=61000-65535",
    );
    assert!(c.contains("(10000-65000) overlaps pronghorn's ephemeral ports 61000-65535"), "{}", c);
    assert!(run(&t, DEDICATED_TWO_QUEUES).iter().all(|c| c.name != "ephemeral ports"), "dedicated: not checked");
    t.file("proc/sys/net/ipv4/ip_local_reserved_ports", "61000-65535\n");
    expect(&run(&t, SHARED), "ephemeral ports", Status::Ok, "");
}

#[test]
fn what_a_gone_process_left_is_found() {
    let t = healthy("stale");
    t.file("var/run/dpdk/pronghorn-4242/config", "")
        .file("var/run/dpdk/pronghorn-77/config", "")
        .file("proc/77/status", "");
    let c = expect(&run(&t, SHARED), "dpdk run dirs", Status::Warn, "rm -rf /var/run/dpdk/pronghorn-4242");
    assert!(!c.contains("-77"), "77 still runs: {}", c);
    // A family's opener that exited hands its port to a keeper, named beside the directory: the
    // directory is the keeper's while it runs, and a leftover once it is gone.
    t.file("var/run/dpdk/pronghorn-4242.keeper", "4250\n").file("proc/4250/status", "");
    expect(&run(&t, SHARED), "dpdk run dirs", Status::Ok, "");
    t.remove("proc/4250");
    expect(&run(&t, SHARED), "dpdk run dirs", Status::Warn, "rm -rf /var/run/dpdk/pronghorn-4242");
    t.remove("var/run/dpdk/pronghorn-4242.keeper");
    // A server that was not root kept its EAL's directory in /tmp.
    t.remove("var/run/dpdk/pronghorn-4242");
    t.file("tmp/dpdk/pronghorn-5151/.keep", "").file("tmp/dpdk/pronghorn-77/.keep", "");
    let c = expect(&run(&t, SHARED), "dpdk run dirs", Status::Warn, "rm -rf /tmp/dpdk/pronghorn-5151");
    assert!(!c.contains("-77"), "77 still runs: {}", c);
    t.remove("tmp/dpdk/pronghorn-5151");
    expect(&run(&t, SHARED), "dpdk run dirs", Status::Ok, "");
    t.remove("tmp/dpdk");
    // An XDP program of ours: a running pronghorn's while pid 77 runs, left over once it is gone.
    let mut facts = Facts::read(t.path(), Some("eth0"));
    let iface = facts.iface.as_mut().unwrap();
    iface.apply_ip_link(
        r#"[{"ifname":"eth0","xdp":{"mode":1,"prog":{"id":31,"name":"pronghorn_xdp","tag":"eb6f"}}}]"#,
        t.path(),
    );
    assert_eq!(iface.xdp, Some(AttachedXdp { name: "pronghorn_xdp".into(), id: 31, mode: "native" }));
    expect(&checks::all(&facts, &parse(SHARED)), "xdp program", Status::Ok, "");
    // Live, the run directory says which interface each running pronghorn drives: one on
    // another interface does not make this program a running pronghorn's.
    facts.holders = Some(vec![(77, "eth1".into())]);
    expect(&checks::all(&facts, &parse(SHARED)), "xdp program", Status::Warn, "ip link set dev eth0 xdp off");
    facts.holders = Some(vec![(77, "eth1".into()), (78, "eth0".into())]);
    expect(&checks::all(&facts, &parse(SHARED)), "xdp program", Status::Ok, "");
    t.remove("proc/77");
    let mut facts = Facts::read(t.path(), Some("eth0"));
    facts.iface.as_mut().unwrap().xdp = Some(AttachedXdp { name: "pronghorn_xdp".into(), id: 31, mode: "generic" });
    expect(&checks::all(&facts, &parse(SHARED)), "xdp program", Status::Warn, "ip link set dev eth0 xdp off");
    facts.iface.as_mut().unwrap().xdp = Some(AttachedXdp { name: "xdp_firewall".into(), id: 9, mode: "native" });
    expect(&checks::all(&facts, &parse(SHARED)), "xdp program", Status::Fail, "if nothing needs it");
}

#[test]
fn the_interface_must_be_there_up_with_enough_queues_and_mtu() {
    let t = healthy("iface");
    t.file("sys/class/net/eth0/flags", "0x1002\n");
    expect(&run(&t, SHARED), "interface", Status::Fail, "ip link set dev eth0 up");
    t.file("sys/class/net/eth0/flags", "0x1003\n").file("sys/class/net/eth0/operstate", "lowerlayerdown\n");
    expect(&run(&t, SHARED), "interface", Status::Warn, "veth's other end");
    t.file("sys/class/net/eth0/operstate", "up\n").file("sys/class/net/eth0/mtu", "1460\n");
    expect(&run(&t, SHARED), "mtu", Status::Fail, "ip link set dev eth0 mtu 1500");
    t.file("sys/class/net/eth0/mtu", "9000\n");
    expect(&run(&t, SHARED), "mtu", Status::Warn, "large UDP datagrams");
    t.file("sys/class/net/eth0/mtu", "1500\n");
    for q in 1..4 {
        t.remove(&format!("sys/class/net/eth0/queues/rx-{q}"));
    }
    expect(&run(&t, DEDICATED_TWO_QUEUES), "queues", Status::Fail, "ethtool -L eth0 combined 2");
    t.remove("sys/class/net/eth0");
    let checks = run(&t, SHARED);
    expect(&checks, "interface", Status::Fail, "pronghorn lab exec a -- pronghorn doctor");
    assert!(checks.iter().all(|c| c.name != "mtu"), "nothing more about an interface that is not there");
}

#[test]
fn a_driver_without_native_xdp_warns_of_generic_mode() {
    let t = healthy("generic").driver("e1000");
    let c = expect(&run(&t, SHARED), "xdp", Status::Warn, "native XDP");
    assert!(c.starts_with("driver e1000, by the driver list of Linux 6.1"), "{}", c);
    assert!(c.contains("no native XDP, so generic XDP"), "{}", c);
    let t = t.driver("virtio_net");
    let c = expect(&run(&t, SHARED), "xdp", Status::Ok, "");
    assert!(c.ends_with("native XDP, AF_XDP in copy mode"), "{}", c);
}

#[test]
fn the_kernels_xdp_features_win_over_the_driver_list() {
    let t = healthy("netdev").driver("e1000");
    t.file("sys/class/net/eth0/ifindex", "2\n");
    let mut facts = Facts::read(t.path(), Some("eth0"));
    let iface = facts.iface.as_mut().unwrap();
    assert_eq!(iface.ifindex, Some(2), "what the live host asks the kernel about");
    // e1000 is not on the list; the kernel says it redirects natively and does zero-copy.
    iface.kernel_xdp = Some(KernelXdp::Reported(XdpFeatures(0x0b)));
    let c = expect(&checks::all(&facts, &parse(SHARED)), "xdp", Status::Ok, "");
    assert_eq!(
        c,
        "the kernel reports eth0's XDP features: basic, redirect, xsk-zerocopy: native XDP, zero-copy AF_XDP"
    );
    // ice is on the list, but a kernel that reports nothing for it is believed.
    let t = t.driver("ice");
    let mut facts = Facts::read(t.path(), Some("eth0"));
    facts.iface.as_mut().unwrap().kernel_xdp = Some(KernelXdp::Reported(XdpFeatures(0)));
    let c = expect(&checks::all(&facts, &parse(SHARED)), "xdp", Status::Warn, "native XDP");
    assert!(c.starts_with("the kernel reports eth0's XDP features: none: no native XDP"), "{}", c);
    // A kernel before 6.3 has no netdev family: the list, saying so.
    facts.iface.as_mut().unwrap().kernel_xdp = Some(KernelXdp::NoFamily);
    let c = expect(&checks::all(&facts, &parse(SHARED)), "xdp", Status::Ok, "");
    assert_eq!(
        c,
        "driver ice, by the driver list of Linux 6.1 (the kernel has no netdev netlink family: older than 6.3): native XDP, zero-copy AF_XDP"
    );
}

#[test]
fn a_veth_peer_with_tx_checksum_offload_is_named() {
    let t = healthy("veth");
    t.remove("sys/class/net/eth0/device").file("sys/class/net/ph-b0/ifindex", "7\n");
    let mut facts = Facts::read(t.path(), Some("eth0"));
    let iface = facts.iface.as_mut().unwrap();
    iface.apply_ip_link(r#"[{"ifname":"eth0","link_index":7,"linkinfo":{"info_kind":"veth"}}]"#, t.path());
    assert_eq!(iface.driver.as_deref(), Some("veth"), "the link kind when sysfs has no driver");
    assert_eq!(iface.peer, Some(Peer::Here { name: "ph-b0".into(), tx_checksum: None }));
    iface.peer = Some(Peer::Here { name: "ph-b0".into(), tx_checksum: Some(true) });
    expect(&checks::all(&facts, &parse(SHARED)), "checksums", Status::Warn, "ethtool -K ph-b0 tx off");
    facts.iface.as_mut().unwrap().peer = Some(Peer::Here { name: "ph-b0".into(), tx_checksum: Some(false) });
    expect(&checks::all(&facts, &parse(SHARED)), "checksums", Status::Ok, "");
    let iface = facts.iface.as_mut().unwrap();
    iface.apply_ip_link(
        r#"[{"ifname":"eth0","link_index":7,"link_netnsid":0,"linkinfo":{"info_kind":"veth"}}]"#,
        t.path(),
    );
    assert_eq!(iface.peer, Some(Peer::OtherNamespace));
    expect(&checks::all(&facts, &parse(SHARED)), "checksums", Status::Warn, "in the peer's namespace");
}

#[test]
fn without_a_config_the_host_is_checked_and_a_bad_one_fails() {
    let t = healthy("config");
    let checks = checks::all(&Facts::read(t.path(), None), &Given::Nothing);
    expect(&checks, "config", Status::Warn, "--config FILE");
    assert!(checks.iter().all(|c| c.name != "interface"));
    let checks = checks::all(&Facts::read(t.path(), None), &Given::Bad("t.toml: unknown key nic.ifac".into()));
    expect(&checks, "config", Status::Fail, "docs/config.md");
}

#[test]
fn the_exit_status_says_whether_a_check_failed() {
    let t = healthy("exit");
    t.file("pronghorn.toml", SHARED);
    let args = |root: &Tree| super::DoctorArgs {
        config: Some(root.path().join("pronghorn.toml")),
        json: true,
        root: Some(root.path().to_owned()),
    };
    assert_eq!(super::run(args(&t)).unwrap(), 0);
    t.file("sys/class/net/eth0/mtu", "1400\n");
    assert_eq!(super::run(args(&t)).unwrap(), 1);
}
