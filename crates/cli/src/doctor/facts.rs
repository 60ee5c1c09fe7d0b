//! What `pronghorn doctor` looks at, read from a root directory (`/`, or a synthetic tree in
//! tests) and, on the live host only, from what no file shows: `ip -d -j link` (the link kind
//! of a virtual interface, the XDP program attached, a veth's peer), the interface's XDP
//! features as the kernel reports them (netlink, [`super::netdev`]), the veth peer's tx checksum
//! offload (an ethtool ioctl) and whether the kernel takes AF_XDP sockets when its build config
//! is not under /boot. A file that is missing is a fact left out (None), never an error.

use std::path::Path;

use super::netdev::KernelXdp;
use crate::topo::host::{entries, read, Host};

#[derive(Debug, Default)]
pub struct Facts {
    /// The effective uid and capabilities of this process (`proc/self/status`).
    pub euid: Option<u32>,
    pub cap_eff: u64,
    /// NUMA nodes with their hugepages, interfaces with their node (as `pronghorn topo` reads them).
    pub host: Option<Host>,
    /// `proc/sys/kernel/osrelease`.
    pub kernel_release: Option<String>,
    /// CONFIG_XDP_SOCKETS of the running kernel (`boot/config-RELEASE`; live: an AF_XDP socket).
    pub xdp_sockets: Option<bool>,
    /// RLIMIT_NOFILE (soft, hard) of this process (`proc/self/limits`; unlimited is u64::MAX).
    pub open_files: Option<(u64, u64)>,
    /// The texts of `net.ipv4.ip_local_port_range` and `ip_local_reserved_ports`.
    pub port_range: Option<(String, String)>,
    /// DPDK run directories of pronghorn processes (`var/run/dpdk/pronghorn-PID` of those that
    /// run as root, `tmp/dpdk/pronghorn-PID` of those that do not): the directory as the host
    /// names it, its process's pid, and whether that still runs.
    pub dpdk_dirs: Vec<(String, u32, bool)>,
    /// The running pronghorn processes and the interface each drives (the run directory `pronghorn
    /// ps` reads; live only: None under a synthetic root).
    pub holders: Option<Vec<(u32, String)>>,
    pub iface: Option<Iface>,
}

#[derive(Debug, Default)]
pub struct Iface {
    pub name: String,
    /// `sys/class/net/NAME` is there (in this network namespace).
    pub exists: bool,
    /// IFF_UP of `flags`.
    pub up: bool,
    /// `operstate`: `up`, `down`, `lowerlayerdown`, `unknown` (virtual devices without carrier state).
    pub operstate: Option<String>,
    pub mtu: Option<u32>,
    /// The device's driver (`device/driver`), else the link kind (`veth`, `bridge`, ...).
    pub driver: Option<String>,
    /// `queues/rx-*`.
    pub rx_queues: usize,
    /// `ifindex`.
    pub ifindex: Option<u32>,
    /// The XDP features the kernel reports for it, when it was asked (the live host).
    pub kernel_xdp: Option<KernelXdp>,
    /// The XDP program attached, when `ip` was asked.
    pub xdp: Option<AttachedXdp>,
    /// A veth's other end, when `ip` was asked.
    pub peer: Option<Peer>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachedXdp {
    pub name: String,
    pub id: u64,
    /// `native`, `generic`, `offload` or `several`.
    pub mode: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Peer {
    /// In another network namespace: nothing about it can be read from here.
    OtherNamespace,
    /// In this one, with its tx checksum offload (None: not asked).
    Here { name: String, tx_checksum: Option<bool> },
}

impl Facts {
    /// Reads what files say under `root`, about interface `iface` when a config names one.
    pub fn read(root: &Path, iface: Option<&str>) -> Facts {
        let status = read(&root.join("proc/self/status")).unwrap_or_default();
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim);
        let euid = field("Uid:").and_then(|u| u.split_whitespace().nth(1)?.parse().ok());
        let cap_eff = field("CapEff:").and_then(|c| u64::from_str_radix(c, 16).ok()).unwrap_or(0);
        let kernel_release = read(&root.join("proc/sys/kernel/osrelease"));
        let xdp_sockets = kernel_release.as_ref().and_then(|r| {
            let config = read(&root.join(format!("boot/config-{r}")))?;
            Some(config.lines().any(|l| l == "CONFIG_XDP_SOCKETS=y"))
        });
        let ipv4 = root.join("proc/sys/net/ipv4");
        let port_range = read(&ipv4.join("ip_local_port_range"))
            .map(|range| (range, read(&ipv4.join("ip_local_reserved_ports")).unwrap_or_default()));
        // A server that is not root (PostgreSQL under setpriv) has its EAL's directory in /tmp
        // (DPDK's choice without $XDG_RUNTIME_DIR, which such servers seldom have).
        let mut dpdk_dirs: Vec<(String, u32, bool)> = ["var/run/dpdk", "tmp/dpdk"]
            .iter()
            .flat_map(|dir| {
                entries(&root.join(dir))
                    .iter()
                    .filter_map(|n| n.strip_prefix("pronghorn-")?.parse().ok())
                    .map(|pid: u32| {
                        let alive = root.join(format!("proc/{pid}")).exists() || kept(root, pid);
                        (format!("/{dir}/pronghorn-{pid}"), pid, alive)
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        dpdk_dirs.sort_unstable();
        Facts {
            euid,
            cap_eff,
            host: Some(Host::read(root)),
            kernel_release,
            xdp_sockets,
            open_files: open_files(&read(&root.join("proc/self/limits")).unwrap_or_default()),
            port_range,
            dpdk_dirs,
            holders: None,
            iface: iface.map(|name| Iface::read(root, name)),
        }
    }

    /// Adds what only the live host can say (root is `/`).
    pub fn probe_live(&mut self) {
        self.holders = crate::inspect::processes().ok().map(|(found, _)| {
            found.iter().map(|p| (p.pid, runtime::observe::region::get_text(&p.snapshot.layout.iface))).collect()
        });
        if self.xdp_sockets.is_none() {
            self.xdp_sockets = Some(kernel_takes_af_xdp());
        }
        let Some(iface) = self.iface.as_mut().filter(|i| i.exists) else { return };
        iface.kernel_xdp = iface.ifindex.map(super::netdev::ask);
        if let Ok(out) =
            std::process::Command::new("ip").args(["-d", "-j", "link", "show", "dev", &iface.name]).output()
        {
            iface.apply_ip_link(&String::from_utf8_lossy(&out.stdout), Path::new("/"));
        }
        if let Some(Peer::Here { name, tx_checksum }) = &mut iface.peer {
            *tx_checksum = tx_checksum_offload(name);
        }
    }
}

impl Iface {
    fn read(root: &Path, name: &str) -> Iface {
        let dir = root.join("sys/class/net").join(name);
        let flags = read(&dir.join("flags")).and_then(|f| u32::from_str_radix(f.trim_start_matches("0x"), 16).ok());
        let driver = std::fs::read_link(dir.join("device/driver"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()));
        Iface {
            name: name.to_owned(),
            exists: dir.exists(),
            up: flags.is_some_and(|f| f & libc::IFF_UP as u32 != 0),
            operstate: read(&dir.join("operstate")),
            mtu: read(&dir.join("mtu")).and_then(|m| m.parse().ok()),
            driver,
            rx_queues: entries(&dir.join("queues")).iter().filter(|q| q.starts_with("rx-")).count(),
            ifindex: read(&dir.join("ifindex")).and_then(|i| i.parse().ok()),
            kernel_xdp: None,
            xdp: None,
            peer: None,
        }
    }

    /// What `ip -d -j link show dev NAME` says (`json`): the link kind when sysfs names no
    /// driver, the XDP program attached, and a veth's peer (by `link_index` under `root`'s
    /// `sys/class/net`, or in another namespace when `link_netnsid` is given).
    pub fn apply_ip_link(&mut self, json: &str, root: &Path) {
        let Ok(serde_json::Value::Array(links)) = serde_json::from_str::<serde_json::Value>(json) else { return };
        let Some(link) = links.first() else { return };
        let kind = link.pointer("/linkinfo/info_kind").and_then(|k| k.as_str());
        if self.driver.is_none() {
            self.driver = kind.map(str::to_owned);
        }
        if let Some(xdp) = link.get("xdp") {
            let mode = match xdp.get("mode").and_then(|m| m.as_u64()) {
                Some(1) => "native",
                Some(2) => "generic",
                Some(3) => "offload",
                _ => "several",
            };
            let prog = xdp.get("prog").or_else(|| xdp.pointer("/attached/0/prog"));
            if let Some(prog) = prog {
                self.xdp = Some(AttachedXdp {
                    name: prog.get("name").and_then(|n| n.as_str()).unwrap_or("").to_owned(),
                    id: prog.get("id").and_then(|i| i.as_u64()).unwrap_or(0),
                    mode,
                });
            }
        }
        if kind == Some("veth") {
            self.peer = if link.get("link_netnsid").is_some() {
                Some(Peer::OtherNamespace)
            } else {
                let index = link.get("link_index").and_then(|i| i.as_u64());
                let net = root.join("sys/class/net");
                entries(&net)
                    .into_iter()
                    .find(|n| read(&net.join(n).join("ifindex")).and_then(|i| i.parse().ok()) == index)
                    .map(|name| Peer::Here { name, tx_checksum: None })
            };
        }
    }
}

/// Soft and hard "Max open files" of a `/proc/PID/limits` text.
fn open_files(limits: &str) -> Option<(u64, u64)> {
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let mut words = line["Max open files".len()..].split_whitespace();
    let value = |w: &str| if w == "unlimited" { Some(u64::MAX) } else { w.parse().ok() };
    Some((value(words.next()?)?, value(words.next()?)?))
}

/// Whether this kernel has AF_XDP sockets: creating one fails with EAFNOSUPPORT where not.
fn kernel_takes_af_xdp() -> bool {
    // SAFETY: a plain socket call; the fd is closed at once.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd >= 0 {
        unsafe { libc::close(fd) };
        return true;
    }
    std::io::Error::last_os_error().raw_os_error() != Some(libc::EAFNOSUPPORT)
}

/// The tx checksum offload of interface `name` in this namespace (ETHTOOL_GTXCSUM).
fn tx_checksum_offload(name: &str) -> Option<bool> {
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    const ETHTOOL_GTXCSUM: u32 = 0x16;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    #[repr(C)]
    struct IfReq {
        name: [u8; libc::IFNAMSIZ],
        data: *mut EthtoolValue,
        pad: [u8; 16],
    }
    if name.len() >= libc::IFNAMSIZ {
        return None;
    }
    let mut value = EthtoolValue { cmd: ETHTOOL_GTXCSUM, data: 0 };
    let mut req = IfReq { name: [0; libc::IFNAMSIZ], data: &mut value, pad: [0; 16] };
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: a datagram socket for the ioctl, closed below; `req` and `value` outlive the call.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let rc = libc::ioctl(fd, SIOCETHTOOL, &mut req);
        libc::close(fd);
        (rc == 0).then_some(value.data != 0)
    }
}

/// Whether the port of process `pid`, a fork family's opener that exited, is driven by its keeper
/// still (`var/run/dpdk/pronghorn-PID.keeper` names a process that runs): its run directory is
/// the keeper's then, not a leftover.
fn kept(root: &Path, pid: u32) -> bool {
    let file = root.join(format!("var/run/dpdk/pronghorn-{pid}.keeper"));
    read(&file).and_then(|k| k.trim().parse::<u32>().ok()).is_some_and(|k| root.join(format!("proc/{k}")).exists())
}
