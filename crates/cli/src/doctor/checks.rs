//! The checks of `pronghorn doctor`: each turns [`Facts`] (and the config) into a line that is
//! ok, a warning or a failure, and says what to change when it is not ok. Pure functions of
//! their input: the tests run them over synthetic hosts.

use serde::Serialize;

use config::{Config, PmdName};
use nic::dpdk::NIC_CAPABILITIES;

use super::facts::{Facts, Iface, Peer};
use super::netdev::KernelXdp;
use crate::topo::host::Node;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub status: Status,
    pub detail: String,
    /// What to do (a command or a config key); None when ok.
    pub fix: Option<String>,
}

fn ok(name: &'static str, detail: impl Into<String>) -> Check {
    Check { name, status: Status::Ok, detail: detail.into(), fix: None }
}

fn warn(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check { name, status: Status::Warn, detail: detail.into(), fix: Some(fix.into()) }
}

fn fail(name: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
    Check { name, status: Status::Fail, detail: detail.into(), fix: Some(fix.into()) }
}

/// The config doctor checks the host against.
pub enum Given {
    /// Neither `--config` nor `$PRONGHORN_CONFIG`.
    Nothing,
    /// A config that does not load: the error.
    Bad(String),
    Good(Box<Config>),
}

/// Drivers with native XDP (`ndo_bpf`) in Linux 6.1, by the name sysfs gives their devices'
/// driver (or the link kind of a virtual interface); any other interface gets generic XDP.
/// Only for kernels that do not report `xdp-features` (before 6.3).
const NATIVE_XDP: &[&str] = &[
    "veth",
    "virtio_net",
    "tun",
    "ixgbe",
    "ixgbevf",
    "i40e",
    "ice",
    "igb",
    "igc",
    "mlx4_core",
    "mlx5_core",
    "bnxt_en",
    "qede",
    "nfp",
    "ena",
    "nicvf",
    "hv_netvsc",
    "vif",
    "mvneta",
    "mvpp2",
    "sfc",
    "fsl_dpaa2_eth",
    "fec",
    "fsl_enetc",
    "stmmaceth",
    "netsec",
    "cpsw",
    "tsnep",
    "rvu_nicpf",
];
/// Of those, the drivers whose AF_XDP sockets run zero-copy (`XDP_SETUP_XSK_POOL`) in 6.1.
const ZERO_COPY: &[&str] = &["ixgbe", "i40e", "ice", "igc", "mlx5_core", "stmmaceth"];

/// The lowest kernel with AF_XDP, and the lowest with need_wakeup, which DPDK 22.11's af_xdp
/// binds with.
const AF_XDP_KERNEL: (u32, u32) = (4, 18);
const NEED_WAKEUP_KERNEL: (u32, u32) = (5, 4);
/// Open files below which a server with many connections runs out: every accelerated socket
/// holds a kernel fd too (an eventfd placeholder).
const OPEN_FILES_WANTED: u64 = 65_536;
/// The MTU pronghorn's ports run at (DPDK's default; pronghorn does not set it).
const PORT_MTU: u32 = 1500;

pub fn all(f: &Facts, given: &Given) -> Vec<Check> {
    let mut out = vec![privileges(f)];
    let config = match given {
        Given::Nothing => {
            out.push(warn(
                "config",
                "none given: the interface's checks are left out",
                "pronghorn doctor --config FILE (or set PRONGHORN_CONFIG), as for `pronghorn run`",
            ));
            None
        }
        Given::Bad(e) => {
            out.push(fail("config", e.clone(), "fix the key it names (docs/config.md)"));
            None
        }
        Given::Good(c) => {
            out.push(ok("config", format!("interface {}, {}", c.nic.iface, c.nic.pmd)));
            Some(&**c)
        }
    };
    let pmd = config.map_or(PmdName::AfXdp, |c| c.nic.pmd);
    out.push(hugepages(f, config));
    out.extend(kernel(f, pmd));
    out.push(open_files(f));
    if let Some(c) = config.filter(|c| c.nic.share) {
        out.push(ephemeral_ports(f, c));
    }
    out.push(dpdk_dirs(f));
    if let (Some(c), Some(iface)) = (config, &f.iface) {
        out.extend(interface(f, c, iface));
    }
    out
}

fn privileges(f: &Facts) -> Check {
    match f.euid {
        Some(0) => ok("privileges", "root"),
        None => warn("privileges", "cannot read this process's uid (proc/self/status)", "run it as root"),
        Some(uid) => {
            let missing: Vec<&str> =
                NIC_CAPABILITIES.iter().filter(|(bit, _)| f.cap_eff & (1 << bit) == 0).map(|&(_, n)| n).collect();
            if missing.is_empty() {
                return ok("privileges", format!("uid {uid} with the NIC capabilities"));
            }
            let all: Vec<String> = NIC_CAPABILITIES.iter().map(|(_, n)| format!("+{n}")).collect();
            fail(
                "privileges",
                format!("uid {uid} without root or the capabilities {}", missing.join(", ")),
                format!(
                    "run it as root (sudo), or start the server with the capabilities: setpriv --inh-caps={0} --ambient-caps={0} -- CMD (docs/runtime.md, Privileges)",
                    all.join(",")
                ),
            )
        }
    }
}

/// 2 MiB pages a process takes with `mbufs` buffers (11 measured at the default 8191).
fn hugepages_needed(mbufs: u32) -> u64 {
    (crate::lab::HUGEPAGES_PER_PROCESS * (u64::from(mbufs) + 1)).div_ceil(8192)
}

fn hugepages(f: &Facts, config: Option<&Config>) -> Check {
    if config.is_some_and(|c| c.nic.eal_args.iter().any(|a| a == "--no-huge")) {
        return ok("hugepages", "not used (eal_args has --no-huge)");
    }
    let Some(host) = &f.host else { return warn("hugepages", "cannot read them", "check /sys/kernel/mm/hugepages") };
    let mbufs = config.map_or(8191, |c| c.nic.mbufs);
    let needed_kib = hugepages_needed(mbufs) * 2048;
    let free_kib: u64 = host.nodes.iter().map(|n| n.hugepages_free_kib()).sum();
    let per_node: Vec<String> =
        host.nodes.iter().map(|n| format!("node {}: {} MiB", n.id, n.hugepages_free_kib() / 1024)).collect();
    let detail = format!(
        "{} MiB free ({}); a process with mbufs = {mbufs} takes about {} MiB",
        free_kib / 1024,
        per_node.join(", "),
        needed_kib / 1024
    );
    // nr_hugepages is the total: what is there plus what is missing.
    let reserve = |nodes: &[&Node], path: &str| {
        let total: u64 = nodes.iter().flat_map(|n| &n.hugepages).filter(|h| h.size_kib == 2048).map(|h| h.total).sum();
        let free_kib: u64 = nodes.iter().map(|n| n.hugepages_free_kib()).sum();
        let missing = needed_kib.saturating_sub(free_kib).div_ceil(2048);
        format!("echo {} > {path}/hugepages-2048kB/nr_hugepages (2 MiB pages: {total} now)", total + missing)
    };
    let all: Vec<&Node> = host.nodes.iter().collect();
    if free_kib < needed_kib {
        return fail("hugepages", detail, reserve(&all, "/sys/kernel/mm/hugepages"));
    }
    // DPDK takes the pool on the NIC's node when it has one: its pages must be free there.
    let nic_node = config.and_then(|c| host.interface(&c.nic.iface)).and_then(|i| i.node);
    if let (true, Some(node)) = (host.nodes.len() > 1, nic_node.and_then(|n| host.node(n))) {
        if node.hugepages_free_kib() < needed_kib {
            return warn(
                "hugepages",
                format!("{detail}; too few on node {}, the interface's", node.id),
                reserve(&[node], &format!("/sys/devices/system/node/node{}/hugepages", node.id)),
            );
        }
    }
    ok("hugepages", detail)
}

/// `6.1.0-18-amd64` -> (6, 1).
fn version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn kernel(f: &Facts, pmd: PmdName) -> Vec<Check> {
    let Some(release) = &f.kernel_release else {
        return vec![warn("kernel", "cannot read its release (proc/sys/kernel/osrelease)", "uname -r")];
    };
    let mut out = Vec::new();
    let v = version(release);
    out.push(match v {
        None => warn("kernel", format!("release {release} does not parse"), "uname -r"),
        Some(v) if v < AF_XDP_KERNEL && pmd == PmdName::AfXdp => fail(
            "kernel",
            format!("{release}: AF_XDP came with 4.18"),
            "a newer kernel, or pmd = \"af_packet\" (slower)",
        ),
        Some(v) if v < NEED_WAKEUP_KERNEL && pmd == PmdName::AfXdp => warn(
            "kernel",
            format!("{release}: DPDK 22.11's af_xdp binds with need_wakeup, which came with 5.4"),
            "a 5.4 or newer kernel (Debian 12's 6.1 is tested)",
        ),
        Some(_) => ok("kernel", release.clone()),
    });
    if pmd == PmdName::AfXdp {
        out.push(match f.xdp_sockets {
            Some(true) => ok("af_xdp", "the kernel has AF_XDP sockets (CONFIG_XDP_SOCKETS)"),
            Some(false) => fail(
                "af_xdp",
                "the kernel was built without AF_XDP sockets (CONFIG_XDP_SOCKETS)",
                "a kernel with CONFIG_XDP_SOCKETS=y, or pmd = \"af_packet\"",
            ),
            None => warn(
                "af_xdp",
                "cannot tell whether the kernel has AF_XDP sockets (no /boot/config-RELEASE)",
                "grep CONFIG_XDP_SOCKETS /boot/config-$(uname -r)",
            ),
        });
    }
    out
}

fn open_files(f: &Facts) -> Check {
    let Some((soft, hard)) = f.open_files else {
        return warn("open files", "cannot read the limit (proc/self/limits)", "ulimit -n");
    };
    let show = |n: u64| if n == u64::MAX { "unlimited".to_owned() } else { n.to_string() };
    let detail = format!("ulimit -n {} (hard {})", show(soft), show(hard));
    if soft >= OPEN_FILES_WANTED {
        return ok("open files", detail);
    }
    warn(
        "open files",
        format!("{detail}: every accelerated connection holds a kernel fd too, so a server gets at most that many connections"),
        format!("ulimit -n {OPEN_FILES_WANTED} before `pronghorn run` (LimitNOFILE={OPEN_FILES_WANTED} in a systemd unit)"),
    )
}

fn ephemeral_ports(f: &Facts, c: &Config) -> Check {
    let Some((range, reserved)) = &f.port_range else {
        return warn(
            "ephemeral ports",
            "cannot read net.ipv4.ip_local_port_range",
            "sysctl net.ipv4.ip_local_port_range",
        );
    };
    match runtime::ephemeral_range_conflict(range, reserved) {
        None => ok(
            "ephemeral ports",
            format!(
                "the kernel's ip_local_port_range {} leaves pronghorn's out (nic.share on {})",
                range.replace('\t', "-"),
                c.nic.iface
            ),
        ),
        Some(e) => {
            let (what, fix) = e.split_once(": ").unwrap_or((&e, ""));
            fail("ephemeral ports", what.to_owned(), fix.to_owned())
        }
    }
}

fn dpdk_dirs(f: &Facts) -> Check {
    let stale: Vec<String> = f.dpdk_dirs.iter().filter(|(.., alive)| !alive).map(|(dir, ..)| dir.clone()).collect();
    if stale.is_empty() {
        let running = f.dpdk_dirs.len();
        return ok("dpdk run dirs", format!("none left over ({running} held by running processes)"));
    }
    warn(
        "dpdk run dirs",
        format!("left by processes that are gone: {}", stale.join(" ")),
        format!("rm -rf {}", stale.join(" ")),
    )
}

fn interface(f: &Facts, c: &Config, i: &Iface) -> Vec<Check> {
    let name = &i.name;
    if !i.exists {
        return vec![fail(
            "interface",
            format!("{name} does not exist in this network namespace"),
            "nic.iface: one of `ip link`'s names; in the lab: pronghorn lab exec a -- pronghorn doctor",
        )];
    }
    let driver = i.driver.as_deref().unwrap_or("unknown");
    let mut out = vec![if !i.up {
        fail("interface", format!("{name} is down"), format!("ip link set dev {name} up"))
    } else if matches!(i.operstate.as_deref(), Some("down" | "lowerlayerdown")) {
        warn(
            "interface",
            format!("{name} is up but has no carrier (operstate {})", i.operstate.as_deref().unwrap_or("")),
            "the cable, the switch port, or a veth's other end (ip link set dev PEER up)",
        )
    } else {
        ok("interface", format!("{name} up, driver {driver}"))
    }];
    if c.nic.pmd == PmdName::AfXdp {
        out.push(xdp_support(i, driver));
    }
    let queues = usize::from(c.nic.queues);
    if i.rx_queues != 0 && i.rx_queues < queues {
        out.push(fail(
            "queues",
            format!("{name} has {} rx queues, nic.queues = {queues}", i.rx_queues),
            format!("ethtool -L {name} combined {queues} (a veth: create it with numrxqueues {queues} numtxqueues {queues}; the lab: lab up --queues {queues}), or lower nic.queues"),
        ));
    }
    out.push(match i.mtu {
        None => warn("mtu", format!("cannot read {name}'s MTU"), format!("ip link show dev {name}")),
        Some(m) if m < PORT_MTU => fail(
            "mtu",
            format!("{name}'s MTU is {m}; pronghorn sends frames of up to {PORT_MTU} (DPDK's port MTU), which it would not pass"),
            format!("ip link set dev {name} mtu {PORT_MTU}, if the network carries it"),
        ),
        Some(m) if m > PORT_MTU => warn(
            "mtu",
            format!("{name}'s MTU is {m}; pronghorn runs at {PORT_MTU}: TCP is fine (its MSS says so), but UDP datagrams in frames over {PORT_MTU} bytes are dropped"),
            format!("ip link set dev {name} mtu {PORT_MTU} if the server takes large UDP datagrams"),
        ),
        Some(m) => ok("mtu", format!("{m}, as pronghorn's port")),
    });
    if c.nic.pmd == PmdName::AfXdp {
        out.push(xdp_program(f, i));
    }
    if driver == "veth" {
        out.push(veth_checksums(i));
    }
    out
}

/// Whether the interface runs XDP natively and AF_XDP zero-copy: as the kernel reports it
/// (`xdp-features`, Linux 6.3+), else as the driver list of Linux 6.1 has it, saying why.
fn xdp_support(i: &Iface, driver: &str) -> Check {
    let name = &i.name;
    let (native, zero_copy, source) = match &i.kernel_xdp {
        Some(KernelXdp::Reported(f)) => {
            (f.native(), f.zero_copy(), format!("the kernel reports {name}'s XDP features: {}", f.names()))
        }
        other => {
            let why = match other {
                Some(KernelXdp::NoFamily) => "the kernel has no netdev netlink family: older than 6.3".to_owned(),
                Some(KernelXdp::Unanswered(e)) => format!("the kernel did not say: {e}"),
                _ => "the kernel was not asked".to_owned(),
            };
            (
                NATIVE_XDP.contains(&driver),
                ZERO_COPY.contains(&driver),
                format!("driver {driver}, by the driver list of Linux 6.1 ({why})"),
            )
        }
    };
    let zero_copy = if zero_copy { "zero-copy AF_XDP" } else { "AF_XDP in copy mode" };
    if native {
        ok("xdp", format!("{source}: native XDP, {zero_copy}"))
    } else {
        warn(
            "xdp",
            format!("{source}: no native XDP, so generic XDP, an skb and a copy per frame; it works, slower"),
            "a NIC whose driver has native XDP, zero-copy for the best (ice, i40e, ixgbe, igc, mlx5_core), or pmd = \"af_packet\"",
        )
    }
}

/// An XDP program pronghorn would replace or be refused by.
fn xdp_program(f: &Facts, i: &Iface) -> Check {
    let name = &i.name;
    let Some(x) = &i.xdp else { return ok("xdp program", format!("none attached to {name}")) };
    let ours = x.name == "pronghorn_xdp" || x.name == "xsk_def_prog";
    // Live: the processes that drive this interface; under a synthetic root, any pronghorn alive.
    let running: Vec<String> = match &f.holders {
        Some(holders) => holders.iter().filter(|(_, iface)| iface == name).map(|(pid, _)| pid.to_string()).collect(),
        None => f.dpdk_dirs.iter().filter(|(.., alive)| *alive).map(|(_, pid, _)| pid.to_string()).collect(),
    };
    let what = format!("{} (id {}, {})", x.name, x.id, x.mode);
    match (ours, running.is_empty()) {
        (true, false) => ok("xdp program", format!("{what}, a running pronghorn's (pid {})", running.join(", "))),
        (true, true) => warn(
            "xdp program",
            format!("{what} is left from a pronghorn that is gone (it passes every frame to the kernel)"),
            format!("ip link set dev {name} xdp off"),
        ),
        (false, _) => fail(
            "xdp program",
            format!("{name} runs another XDP program, {what}: pronghorn cannot attach its own"),
            format!("ip link set dev {name} xdp off, if nothing needs it"),
        ),
    }
}

/// A veth's kernel peer sends TCP and UDP with partial checksums (CHECKSUM_PARTIAL) while its tx
/// checksum offload is on; pronghorn checks every checksum and drops those frames.
fn veth_checksums(i: &Iface) -> Check {
    let why = "its TCP/UDP frames carry partial checksums that pronghorn drops";
    match &i.peer {
        Some(Peer::Here { name, tx_checksum: Some(false) }) => {
            ok("checksums", format!("veth peer {name} sends full checksums (tx offload off)"))
        }
        Some(Peer::Here { name, tx_checksum: Some(true) }) => warn(
            "checksums",
            format!("veth peer {name} has tx checksum offload on: {why}"),
            format!("ethtool -K {name} tx off"),
        ),
        Some(Peer::Here { name, tx_checksum: None }) => warn(
            "checksums",
            format!("cannot read veth peer {name}'s tx checksum offload; while on, {why}"),
            format!("ethtool -K {name} tx off"),
        ),
        Some(Peer::OtherNamespace) | None => warn(
            "checksums",
            format!(
                "{}'s veth peer is in another network namespace: while its tx checksum offload is on, {why}",
                i.name
            ),
            "ethtool -K PEER tx off, in the peer's namespace (pronghorn lab up does it)",
        ),
    }
}
