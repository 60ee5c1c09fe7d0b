//! `pronghorn lab`: the lab network on one machine.
//!
//! Namespace `<prefix>-a` holds `<prefix>-a0`, the veth end DPDK drives (no kernel address on it,
//! IPv6 off so the kernel sends nothing from it). Namespace `<prefix>-b` holds its peer
//! `<prefix>-b0`, a plain kernel host with the B addresses and tx checksum offload off (else it
//! sends partial checksums over the veth). `up` also reserves hugepages when none are free and
//! writes the A side's pronghorn config; `down` gives back exactly what `up` made, and removes
//! DPDK runtime directories that crashed runs left behind.
//!
//! State lives in `/run/pronghorn/lab/<prefix>/` (`state.toml` and the A config `a.toml`), guarded
//! by a lock file so that concurrent `up`/`down` of different labs keep the hugepage accounting
//! right. This module shells out to iproute2 and ethtool: they are the interface people already
//! read, and every command it runs is printed with `--verbose`.
//!
//! With `--nodes N` (N > 1) there is no side a: accelerated nodes `<prefix>-a1` .. `<prefix>-aN`
//! each hold one DPDK-driven veth `<prefix>-n<k>` and have a config of their own (`a<k>.toml`:
//! node k is 10.99.0.(10+k) and fd99::(10+k)); the peers `<prefix>-p<k>` are ports of a bridge
//! `<prefix>-br` in side b, which carries side b's addresses. Nodes reach side b and each other
//! through it (a Redis cluster, sentinels).
//!
//! With `--pmd tap`, side a also holds `<prefix>-t0`, a persistent multi-queue tap that DPDK's
//! net_tap opens (the config's interface): the only lab path with tx offloads (checksums and TCP
//! segmentation, done in software inside the PMD). tc's mirred joins it to `<prefix>-a0` both
//! ways (every frame one end receives leaves by the other), so side b sees pronghorn's frames
//! on the same veth as with af_xdp. The tap PMD's own tc support (`remote=`) needs the flower
//! classifier, which this kernel lacks; a bridge would take the frames for the tap's MAC, which
//! net_tap gives the DPDK port too, as its own.
//!
//! A second veth pair, `<prefix>-k0` (side a) to `<prefix>-k1` (side b), is the kernel path: both
//! ends have kernel addresses (10.98.0.1 / 10.98.0.2 by default), so a server in side a bound to
//! the kernel path's address is served by the Linux stack over the same kind of link, to the same
//! client namespace, as pronghorn. `pronghorn bench` compares the two.
//!
//! `model` runs a command with the lab in one of the bench's lab models (bench/model.rs owns
//! their settings) and restores the lab after: the Python benchmarks use it for the nic model.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::bench::model::{self, LabDevices, Model};
use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use config::{Config, Ipv4Cidr, Ipv4Config, Ipv6Cidr, Ipv6Config, NicConfig, PmdName};

const STATE_ROOT: &str = "/run/pronghorn/lab";
const HUGEPAGES_2M: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages";
const HUGEPAGES_2M_SURPLUS: &str = "/sys/kernel/mm/hugepages/hugepages-2048kB/surplus_hugepages";
const DPDK_RUNTIME: &str = "/var/run/dpdk";
/// Nodes of one lab at most: `<prefix>-n<k>` must fit in an interface name.
const MAX_NODES: u16 = 8;
/// Longest Linux interface name (IFNAMSIZ less the NUL).
const IFNAME_MAX: usize = 15;
/// 2 MiB pages one accelerated process takes with the lab's config (`mbufs = 8191`: the mbuf
/// pool and DPDK's own memzones), as measured in HugePages_Free around a process's start.
pub(crate) const HUGEPAGES_PER_PROCESS: u64 = 11;
/// What a lab reserves at least: room for a server and its clients and for a bench's rounds.
const HUGEPAGES_MIN: u64 = 256;

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    action: Action,
}

#[derive(Args, Clone)]
struct Prefix {
    /// Names the lab's namespaces and interfaces (`<prefix>-a`, `<prefix>-a0`, ...) so that
    /// several labs can coexist: 1 to 12 characters of a-z, 0-9 and '-' (interface names such
    /// as `<prefix>-n8` must fit Linux's 15 characters).
    #[arg(long, default_value = "ph", value_parser = parse_prefix)]
    prefix: String,
}

#[derive(Subcommand)]
enum Action {
    /// Create the namespaces, the veth pair, the addresses and the A side's config (again: no-op).
    Up(UpArgs),
    /// Remove everything `up` made, even after a crashed run.
    Down {
        #[command(flatten)]
        prefix: Prefix,
        /// Take down every lab on this machine.
        #[arg(long, conflicts_with = "prefix")]
        all: bool,
    },
    /// Show what is up.
    Status {
        #[command(flatten)]
        prefix: Prefix,
    },
    /// Run a command inside side a (pronghorn's) or b (the kernel peer). On side a,
    /// PRONGHORN_CONFIG points at the lab's config.
    Exec {
        #[command(flatten)]
        prefix: Prefix,
        /// a or b, or node aK of a lab brought up with --nodes
        #[arg(value_parser = parse_side)]
        side: String,
        /// The command and its arguments (after `--`).
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Run a command (in this namespace) with the lab in a lab model, as `pronghorn bench --model`
    /// sets it, and put the lab back as it was when the command ends. The command gets
    /// PRONGHORN_LAB_MODEL (veth, nic or dma) and PRONGHORN_LAB_MODEL_DESCRIPTION (what was set).
    Model(ModelArgs),
}

#[derive(Args)]
struct ModelArgs {
    #[command(flatten)]
    prefix: Prefix,
    /// veth: the lab as `up` made it (checked); nic: each side's receive on its own side's core
    /// (RPS, the XDP veth's NAPI threaded and pinned); dma: RPS as in nic, the XDP veth's
    /// receive left on the client's core (a NIC that fills pronghorn's ring by DMA).
    #[arg(value_parser = parse_model)]
    model: Model,
    /// The server's cores (a taskset list): where side a's receive goes in the nic and dma models.
    #[arg(long, default_value = "1")]
    server_cpus: String,
    /// The client's cores: where side b's receive goes in the nic and dma models.
    #[arg(long, default_value = "0")]
    client_cpus: String,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(Args)]
struct UpArgs {
    #[command(flatten)]
    prefix: Prefix,
    /// The DPDK driver for side a: af_xdp, af_packet, or tap (a tap joined to the veth, the
    /// path with checksum and segmentation offloads; one queue, one node).
    #[arg(long, default_value = "af_xdp", value_parser = parse_pmd)]
    pmd: PmdName,
    /// pronghorn's IPv4 address on side a.
    #[arg(long, default_value = "10.99.0.1/24")]
    ipv4_a: Ipv4Cidr,
    /// The kernel peer's IPv4 address on side b.
    #[arg(long, default_value = "10.99.0.2/24")]
    ipv4_b: Ipv4Cidr,
    /// pronghorn's IPv6 address on side a.
    #[arg(long, default_value = "fd99::1/64")]
    ipv6_a: Ipv6Cidr,
    /// The kernel peer's IPv6 address on side b.
    #[arg(long, default_value = "fd99::2/64")]
    ipv6_b: Ipv6Cidr,
    /// The kernel path's IPv4 address on side a (a kernel address for comparisons).
    #[arg(long, default_value = "10.98.0.1/24")]
    kernel_ipv4_a: Ipv4Cidr,
    /// The kernel path's IPv4 address on side b.
    #[arg(long, default_value = "10.98.0.2/24")]
    kernel_ipv4_b: Ipv4Cidr,
    /// The kernel path's IPv6 address on side a.
    #[arg(long, default_value = "fd98::1/64")]
    kernel_ipv6_a: Ipv6Cidr,
    /// The kernel path's IPv6 address on side b.
    #[arg(long, default_value = "fd98::2/64")]
    kernel_ipv6_b: Ipv6Cidr,
    /// Queues of side a's DPDK-driven veth (and of its peer): one per process that serves it
    /// (worker processes claim one each; the config gets `nic.queues`). The kernel side spreads
    /// flows over them by its per-flow hash.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    queues: u16,
    /// Accelerated nodes a1..aN, each its own namespace, DPDK-driven veth and config, joined to
    /// side b by a bridge (1: the single side a, as without the flag).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=MAX_NODES as i64))]
    nodes: u16,
    /// Free 2 MiB hugepages the lab needs; `up` reserves what is missing (and `down` gives it
    /// back). Default: 256, or room for two processes per queue of every node if that is more
    /// (one accelerated process takes 11).
    #[arg(long)]
    hugepages: Option<u64>,
    /// Print every command run.
    #[arg(long, short)]
    verbose: bool,
}

fn parse_prefix(s: &str) -> Result<String, String> {
    let ok =
        !s.is_empty() && s.len() <= 12 && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "\"{s}\" is not a lab prefix: use 1 to 12 characters of a-z, 0-9 and '-' (interface names are \
             <prefix> and 3 more, at most {IFNAME_MAX})"
        ))
    }
}

fn parse_side(s: &str) -> Result<String, String> {
    let node =
        s.strip_prefix('a').is_some_and(|k| matches!(k.parse::<u16>(), Ok(1..=MAX_NODES)) && !k.starts_with('0'));
    if s == "a" || s == "b" || node {
        Ok(s.to_string())
    } else {
        Err(format!("\"{s}\" is not a side: use a, b, or a1 to a{MAX_NODES} (the nodes of `lab up --nodes N`)"))
    }
}

impl UpArgs {
    /// Free hugepages the lab wants: `--hugepages`, or else the minimum or room for two processes
    /// per queue of every node (a server and a client or a successor), whichever is more.
    fn hugepages(&self) -> u64 {
        let processes = 2 * u64::from(self.nodes) * u64::from(self.queues);
        self.hugepages.unwrap_or(HUGEPAGES_MIN.max(processes * HUGEPAGES_PER_PROCESS))
    }
}

fn parse_model(s: &str) -> Result<Model, String> {
    match s {
        "veth" => Ok(Model::Veth),
        "nic" => Ok(Model::Nic),
        "dma" => Ok(Model::Dma),
        _ => Err(format!("unknown lab model \"{s}\" (expected veth, nic or dma)")),
    }
}

fn parse_pmd(s: &str) -> Result<PmdName, String> {
    match s {
        "af_xdp" => Ok(PmdName::AfXdp),
        "af_packet" => Ok(PmdName::AfPacket),
        "tap" => Ok(PmdName::Tap),
        _ => Err(format!("unknown pmd \"{s}\" (expected af_xdp, af_packet or tap)")),
    }
}

/// The names of one lab's objects.
struct Names {
    prefix: String,
    ns_a: String,
    ns_b: String,
    veth_a: String,
    veth_b: String,
    /// The kernel path's veth ends in side a and side b.
    kveth_a: String,
    kveth_b: String,
    /// Side a's tap (`--pmd tap`).
    tap_a: String,
    dir: PathBuf,
}

impl Names {
    fn new(prefix: &str) -> Names {
        Names {
            prefix: prefix.to_string(),
            ns_a: format!("{prefix}-a"),
            ns_b: format!("{prefix}-b"),
            veth_a: format!("{prefix}-a0"),
            veth_b: format!("{prefix}-b0"),
            kveth_a: format!("{prefix}-k0"),
            kveth_b: format!("{prefix}-k1"),
            tap_a: format!("{prefix}-t0"),
            dir: Path::new(STATE_ROOT).join(prefix),
        }
    }
    fn state_file(&self) -> PathBuf {
        self.dir.join("state.toml")
    }
    fn config_a(&self) -> PathBuf {
        self.dir.join("a.toml")
    }
    /// Node k's namespace, its DPDK-driven veth, and that veth's peer (a bridge port in side b).
    fn node(&self, k: u16) -> (String, String, String) {
        let p = &self.prefix;
        (format!("{p}-a{k}"), format!("{p}-n{k}"), format!("{p}-p{k}"))
    }
    fn node_config(&self, k: u16) -> PathBuf {
        self.dir.join(format!("a{k}.toml"))
    }
    fn bridge(&self) -> String {
        format!("{}-br", self.prefix)
    }
    /// Every interface a lab of `nodes` nodes creates.
    fn interfaces(&self, nodes: u16) -> Vec<String> {
        if nodes <= 1 {
            return vec![self.veth_a.clone(), self.veth_b.clone(), self.kveth_a.clone(), self.kveth_b.clone()];
        }
        let mut v = vec![self.bridge()];
        for k in 1..=nodes {
            let (_, veth, peer) = self.node(k);
            v.extend([veth, peer]);
        }
        v
    }
    fn is_up(&self) -> bool {
        self.state_file().exists()
            && netns_exists(&self.ns_b)
            && (netns_exists(&self.ns_a) || !self.node_namespaces().is_empty())
    }
    /// The namespaces of this lab's nodes that exist (also of a half-built lab).
    fn node_namespaces(&self) -> Vec<String> {
        (1..=MAX_NODES).map(|k| self.node(k).0).filter(|ns| netns_exists(ns)).collect()
    }
}

/// What `up` made that `down` must undo beyond the namespaces.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    hugepages_reserved: u64,
    pmd: String,
    /// Accelerated nodes (0 or 1: the single side a).
    #[serde(default)]
    nodes: u16,
}

impl State {
    fn render(&self) -> String {
        toml::to_string(self).expect("State always serialises")
    }
    fn parse(text: &str) -> State {
        toml::from_str(text).unwrap_or_default()
    }
}

pub fn run(args: LabArgs) -> Result<i32> {
    match args.action {
        Action::Up(up_args) => up(&up_args),
        Action::Down { prefix, all } => {
            require_root("lab down")?;
            let prefixes = if all { all_labs() } else { vec![prefix.prefix] };
            for p in prefixes {
                down(&Names::new(&p), false)?;
            }
            Ok(0)
        }
        Action::Status { prefix } => status(&Names::new(&prefix.prefix)),
        Action::Exec { prefix, side, command } => exec(&Names::new(&prefix.prefix), &side, &command),
        Action::Model(args) => with_model(&args),
    }
}

fn require_root(what: &str) -> Result<()> {
    if unsafe { libc::geteuid() } != 0 {
        bail!(
            "{what} needs root (it creates network namespaces and reserves hugepages): run it as root, e.g. with sudo"
        );
    }
    Ok(())
}

fn all_labs() -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(STATE_ROOT)
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs a command, failing with its stderr in one line.
fn sh(verbose: bool, program: &str, args: &[&str]) -> Result<()> {
    if verbose {
        eprintln!("+ {program} {}", args.join(" "));
    }
    let out = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program}: install it (apt-get install iproute2 ethtool)"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        bail!("`{program} {}` failed: {}", args.join(" "), err.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    Ok(())
}

fn netns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn link_exists_in_root(name: &str) -> bool {
    Path::new("/sys/class/net").join(name).exists()
}

/// Holds an exclusive lock on the lab state root while it lives.
struct Lock {
    _file: fs::File,
}

impl Lock {
    fn take() -> Result<Lock> {
        fs::create_dir_all(STATE_ROOT).with_context(|| format!("cannot create {STATE_ROOT}"))?;
        let f = fs::File::create(Path::new(STATE_ROOT).parent().unwrap().join("lab.lock"))?;
        use std::os::fd::AsRawFd;
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            bail!("cannot lock the lab state: {}", std::io::Error::last_os_error());
        }
        Ok(Lock { _file: f })
    }
}

fn up(a: &UpArgs) -> Result<i32> {
    let n = Names::new(&a.prefix.prefix);
    check_names(&n, a.nodes)?;
    if a.pmd == PmdName::Tap && (a.queues > 1 || a.nodes > 1) {
        bail!("--pmd tap drives one queue of one node: drop --queues and --nodes, or use --pmd af_xdp");
    }
    require_root("lab up")?;
    let _lock = Lock::take()?;
    if n.is_up() {
        let st = State::parse(&fs::read_to_string(n.state_file()).unwrap_or_default());
        println!("lab {} is already up (pmd {}); config for side a: {}", n.prefix, st.pmd, n.config_a().display());
        if st.pmd != a.pmd.to_string() || st.nodes.max(1) != a.nodes {
            eprintln!(
                "note: it was brought up with --pmd {} --nodes {}; run `pronghorn lab down --prefix {}` first to change it",
                st.pmd,
                st.nodes.max(1),
                n.prefix
            );
        }
        return Ok(0);
    }
    // Leftovers of a run that died half-way: clear them, then build from scratch.
    down(&n, true)?;
    match build(a, &n) {
        Ok(()) => Ok(0),
        Err(e) => {
            let _ = down(&n, true);
            Err(e.context(format!("lab up failed and was rolled back (prefix {})", n.prefix)))
        }
    }
}

/// An interface name longer than Linux takes is an error that says which prefix would do.
fn check_names(n: &Names, nodes: u16) -> Result<()> {
    if let Some(long) = n.interfaces(nodes).into_iter().find(|i| i.len() > IFNAME_MAX) {
        bail!(
            "prefix \"{}\" is too long for --nodes {nodes}: interface {long} would have {} characters and Linux \
             takes {IFNAME_MAX}; use a prefix of at most {} characters",
            n.prefix,
            long.len(),
            n.prefix.len() - (long.len() - IFNAME_MAX)
        );
    }
    Ok(())
}

/// Side a's tap for `--pmd tap` (see the module doc): persistent and multi-queue, as net_tap
/// opens it, without IPv6 (the kernel sends nothing from it), and mirred both ways with the veth.
fn join_tap(v: bool, n: &Names) -> Result<()> {
    sh(v, "ip", &["-n", &n.ns_a, "tuntap", "add", "dev", &n.tap_a, "mode", "tap", "multi_queue"])?;
    sh(v, "ip", &["netns", "exec", &n.ns_a, "sysctl", "-qw", &format!("net.ipv6.conf.{}.disable_ipv6=1", n.tap_a)])?;
    sh(v, "ip", &["-n", &n.ns_a, "link", "set", &n.tap_a, "up"])?;
    for (from, to) in [(&n.veth_a, &n.tap_a), (&n.tap_a, &n.veth_a)] {
        sh(v, "ip", &["netns", "exec", &n.ns_a, "tc", "qdisc", "add", "dev", from, "ingress"])?;
        let filter =
            ["filter", "add", "dev", from, "parent", "ffff:", "protocol", "all", "u32", "match", "u32", "0", "0"];
        let action = ["action", "mirred", "egress", "redirect", "dev", to];
        let mut args = vec!["netns", "exec", &n.ns_a, "tc"];
        args.extend(filter);
        args.extend(action);
        sh(v, "ip", &args)?;
    }
    Ok(())
}

fn build(a: &UpArgs, n: &Names) -> Result<()> {
    let v = a.verbose;
    fs::create_dir_all(&n.dir)?;
    // Record the state first so that `down` can undo a half-built lab.
    let mut state = State { hugepages_reserved: 0, pmd: a.pmd.to_string(), nodes: a.nodes };
    fs::write(n.state_file(), state.render())?;
    if a.nodes > 1 {
        build_nodes(a, n)?;
        reserve_hugepages(a, n, &mut state)?;
        println!(
            "lab {}: {} nodes <-> {} ({}, {} on bridge {}); {} hugepages reserved",
            n.prefix,
            a.nodes,
            n.ns_b,
            a.ipv4_b,
            a.ipv6_b,
            n.bridge(),
            state.hugepages_reserved
        );
        return Ok(());
    }

    sh(v, "ip", &["netns", "add", &n.ns_a])?;
    sh(v, "ip", &["netns", "add", &n.ns_b])?;
    let q = a.queues.to_string();
    let queues = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
    let mut add = vec!["link", "add", &n.veth_a];
    add.extend(queues);
    add.extend(["type", "veth", "peer", "name", &n.veth_b]);
    add.extend(queues);
    sh(v, "ip", &add)?;
    sh(v, "ip", &["link", "set", &n.veth_a, "netns", &n.ns_a])?;
    sh(v, "ip", &["link", "set", &n.veth_b, "netns", &n.ns_b])?;
    for ns in [&n.ns_a, &n.ns_b] {
        sh(v, "ip", &["-n", ns, "link", "set", "lo", "up"])?;
    }
    // Side a: no kernel address, no IPv6 (no router solicitations or DAD from the kernel).
    sh(v, "ip", &["netns", "exec", &n.ns_a, "sysctl", "-qw", &format!("net.ipv6.conf.{}.disable_ipv6=1", n.veth_a)])?;
    sh(v, "ip", &["-n", &n.ns_a, "link", "set", &n.veth_a, "up"])?;
    if a.pmd == PmdName::Tap {
        join_tap(v, n)?;
    }
    // Side b: the kernel peer.
    sh(v, "ip", &["-n", &n.ns_b, "addr", "add", &a.ipv4_b.to_string(), "dev", &n.veth_b])?;
    sh(v, "ip", &["-n", &n.ns_b, "addr", "add", &a.ipv6_b.to_string(), "dev", &n.veth_b, "nodad"])?;
    sh(v, "ip", &["netns", "exec", &n.ns_b, "ethtool", "-K", &n.veth_b, "tx", "off"])?;
    // Side b is the load generator: connection-per-request clients (redis-benchmark -k 0, wrk
    // with Connection: close) must not run out of ports to TIME-WAIT.
    sh(v, "ip", &["netns", "exec", &n.ns_b, "sysctl", "-qw", "net.ipv4.tcp_tw_reuse=1"])?;
    // The veth picks side a's rx queue from the flow's hash; Linux re-rolls a connection's hash
    // after a timeout (to try another path), which would move it to another process's queue.
    sh(v, "ip", &["netns", "exec", &n.ns_b, "sysctl", "-qw", "net.core.txrehash=0"])?;
    sh(v, "ip", &["netns", "exec", &n.ns_b, "sysctl", "-qw", "net.ipv4.ip_local_port_range=10000 65000"])?;
    sh(v, "ip", &["-n", &n.ns_b, "link", "set", &n.veth_b, "up"])?;
    // The kernel path: kernel addresses on both ends. Side b's end has tx checksum offload off
    // like b0, so that the client sends the same frames (no TSO) on both paths.
    sh(v, "ip", &["link", "add", &n.kveth_a, "type", "veth", "peer", "name", &n.kveth_b])?;
    sh(v, "ip", &["link", "set", &n.kveth_a, "netns", &n.ns_a])?;
    sh(v, "ip", &["link", "set", &n.kveth_b, "netns", &n.ns_b])?;
    for (ns, dev, v4, v6) in [
        (&n.ns_a, &n.kveth_a, a.kernel_ipv4_a, a.kernel_ipv6_a),
        (&n.ns_b, &n.kveth_b, a.kernel_ipv4_b, a.kernel_ipv6_b),
    ] {
        sh(v, "ip", &["-n", ns, "addr", "add", &v4.to_string(), "dev", dev])?;
        sh(v, "ip", &["-n", ns, "addr", "add", &v6.to_string(), "dev", dev, "nodad"])?;
        sh(v, "ip", &["-n", ns, "link", "set", dev, "up"])?;
    }
    sh(v, "ip", &["netns", "exec", &n.ns_b, "ethtool", "-K", &n.kveth_b, "tx", "off"])?;

    reserve_hugepages(a, n, &mut state)?;

    let cfg = Config {
        nic: NicConfig {
            pmd: a.pmd,
            iface: if a.pmd == PmdName::Tap { n.tap_a.clone() } else { n.veth_a.clone() },
            eal_args: Vec::new(),
            mbufs: 8191,
            queues: a.queues,
            fault: String::new(),
            share: false,
            offloads: true,
        },
        ipv4: Some(Ipv4Config { address: a.ipv4_a, gateway: None }),
        ipv6: Some(Ipv6Config { address: a.ipv6_a, gateway: None }),
        runtime: Default::default(),
        tcp: Default::default(),
    };
    let header = format!("# pronghorn config for side a of lab {}, written by `pronghorn lab up`\n", n.prefix);
    fs::write(n.config_a(), header + &cfg.to_toml())?;

    println!(
        "lab {} up: {} ({} on {}, pmd {}) <-> {} ({}, {} on {}); {} hugepages reserved",
        n.prefix, n.ns_a, a.ipv4_a, n.veth_a, a.pmd, n.ns_b, a.ipv4_b, a.ipv6_b, n.veth_b, state.hugepages_reserved
    );
    println!(
        "kernel path: {} ({}, {} on {}) <-> {} ({}, {} on {})",
        n.ns_a, a.kernel_ipv4_a, a.kernel_ipv6_a, n.kveth_a, n.ns_b, a.kernel_ipv4_b, a.kernel_ipv6_b, n.kveth_b
    );
    println!("config for side a: {}", n.config_a().display());
    Ok(())
}

/// Side b with a bridge, and nodes a1..aN on it (see the module doc).
fn build_nodes(a: &UpArgs, n: &Names) -> Result<()> {
    let v = a.verbose;
    let br = n.bridge();
    sh(v, "ip", &["netns", "add", &n.ns_b])?;
    sh(v, "ip", &["-n", &n.ns_b, "link", "set", "lo", "up"])?;
    sh(v, "ip", &["-n", &n.ns_b, "link", "add", &br, "type", "bridge"])?;
    sh(v, "ip", &["-n", &n.ns_b, "addr", "add", &a.ipv4_b.to_string(), "dev", &br])?;
    sh(v, "ip", &["-n", &n.ns_b, "addr", "add", &a.ipv6_b.to_string(), "dev", &br, "nodad"])?;
    // Frames side b's own stack sends leave through the bridge: full checksums (AF_XDP
    // receivers get no checksum help), as on b0.
    sh(v, "ip", &["netns", "exec", &n.ns_b, "ethtool", "-K", &br, "tx", "off"])?;
    for sysctl in ["net.ipv4.tcp_tw_reuse=1", "net.core.txrehash=0", "net.ipv4.ip_local_port_range=10000 65000"] {
        sh(v, "ip", &["netns", "exec", &n.ns_b, "sysctl", "-qw", sysctl])?;
    }
    sh(v, "ip", &["-n", &n.ns_b, "link", "set", &br, "up"])?;
    let q = a.queues.to_string();
    for k in 1..=a.nodes {
        let (ns, veth, peer) = n.node(k);
        sh(v, "ip", &["netns", "add", &ns])?;
        sh(v, "ip", &["-n", &ns, "link", "set", "lo", "up"])?;
        let queues = ["numtxqueues", q.as_str(), "numrxqueues", q.as_str()];
        let mut add = vec!["link", "add", &veth];
        add.extend(queues);
        add.extend(["type", "veth", "peer", "name", &peer]);
        add.extend(queues);
        sh(v, "ip", &add)?;
        sh(v, "ip", &["link", "set", &veth, "netns", &ns])?;
        sh(v, "ip", &["link", "set", &peer, "netns", &n.ns_b])?;
        sh(v, "ip", &["netns", "exec", &ns, "sysctl", "-qw", &format!("net.ipv6.conf.{veth}.disable_ipv6=1")])?;
        sh(v, "ip", &["-n", &ns, "link", "set", &veth, "up"])?;
        sh(v, "ip", &["netns", "exec", &n.ns_b, "ethtool", "-K", &peer, "tx", "off"])?;
        sh(v, "ip", &["-n", &n.ns_b, "link", "set", &peer, "master", &br])?;
        sh(v, "ip", &["-n", &n.ns_b, "link", "set", &peer, "up"])?;
        let (v4, v6) = node_addresses(a, k);
        let cfg = Config {
            nic: NicConfig {
                pmd: a.pmd,
                iface: veth.clone(),
                eal_args: Vec::new(),
                mbufs: 8191,
                queues: a.queues,
                fault: String::new(),
                share: false,
                offloads: true,
            },
            ipv4: Some(Ipv4Config { address: v4, gateway: None }),
            ipv6: Some(Ipv6Config { address: v6, gateway: None }),
            runtime: Default::default(),
            tcp: Default::default(),
        };
        let header = format!("# pronghorn config for node a{k} of lab {}, written by `pronghorn lab up`\n", n.prefix);
        fs::write(n.node_config(k), header + &cfg.to_toml())?;
        println!("node a{k}: {ns} ({v4}, {v6} on {veth}, pmd {}); config {}", a.pmd, n.node_config(k).display());
    }
    Ok(())
}

/// Node k's addresses: host 10+k in side a's subnets (10.99.0.11, fd99::11 for node 1).
fn node_addresses(a: &UpArgs, k: u16) -> (Ipv4Cidr, Ipv6Cidr) {
    let [o0, o1, o2, _] = a.ipv4_a.addr.octets();
    let mut s = a.ipv6_a.addr.segments();
    s[7] = 0x10 + k;
    (
        Ipv4Cidr { addr: std::net::Ipv4Addr::new(o0, o1, o2, 10 + k as u8), prefix_len: a.ipv4_a.prefix_len },
        Ipv6Cidr { addr: std::net::Ipv6Addr::from(s), prefix_len: a.ipv6_a.prefix_len },
    )
}

/// Reserves the shortfall of free hugepages (and records it for `down`).
fn reserve_hugepages(a: &UpArgs, n: &Names, state: &mut State) -> Result<()> {
    // Pages still held by a process that is exiting (or another user's few free pages) must
    // not make a lab that cannot start pronghorn. Pages another lab reserved are its own: they
    // go when it goes down, perhaps while this lab's processes still need them.
    let free = nic::dpdk::free_hugepages().saturating_sub(reserved_by_other_labs(n));
    let want = a.hugepages();
    if free < want {
        let before = persistent_hugepages()?;
        fs::write(HUGEPAGES_2M, (before + want - free).to_string())
            .with_context(|| format!("cannot write {HUGEPAGES_2M}"))?;
        let after = persistent_hugepages()?;
        state.hugepages_reserved = after.saturating_sub(before);
        fs::write(n.state_file(), state.render())?;
        if state.hugepages_reserved == 0 {
            bail!("the kernel gave no 2 MiB hugepages (memory too fragmented?): free some memory and try again");
        }
    }
    Ok(())
}

/// Hugepages the labs other than `n` reserved (the caller holds the lab lock).
fn reserved_by_other_labs(n: &Names) -> u64 {
    all_labs()
        .iter()
        .filter(|p| **p != n.prefix)
        .filter_map(|p| fs::read_to_string(Names::new(p).state_file()).ok())
        .map(|t| State::parse(&t).hugepages_reserved)
        .sum()
}

/// The 2 MiB pool's persistent pages: what a write of `nr_hugepages` sets. The sysfs file reads
/// the pool's total, which includes surplus pages: those a process still uses after the count
/// was lowered below them (a lab's down while a server of it exits). Taking the total as the
/// count before a write reserved the surplus a second time: the kernel makes in-use surplus
/// pages persistent first when the count rises, so the pool ended that many pages above what
/// the lab recorded, and its down left them reserved (the test command's "10 hugepages were
/// still reserved", one lab process's pages).
fn persistent_hugepages() -> Result<u64> {
    Ok(read_u64(HUGEPAGES_2M)?.saturating_sub(read_u64(HUGEPAGES_2M_SURPLUS).unwrap_or(0)))
}

fn read_u64(path: &str) -> Result<u64> {
    let s = fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?;
    s.trim().parse().with_context(|| format!("{path} holds {s:?}, not a number"))
}

/// Removes every object of lab `n`. `quiet` when used to clear leftovers before `up`.
fn down(n: &Names, quiet: bool) -> Result<()> {
    let _lock = if quiet { None } else { Some(Lock::take()?) };
    let state = fs::read_to_string(n.state_file()).ok().map(|t| State::parse(&t));
    let mut removed = Vec::new();
    let mut namespaces = vec![n.ns_a.clone(), n.ns_b.clone()];
    namespaces.extend(n.node_namespaces());
    for ns in &namespaces {
        if netns_exists(ns) {
            // The queue locks of the processes that drove its interfaces (`nic::share`), kept
            // per namespace by its inode, go with it.
            if let Ok(m) = fs::metadata(format!("/run/netns/{ns}")) {
                use std::os::unix::fs::MetadataExt;
                let _ = fs::remove_dir_all(nic::share::namespace_dir(m.ino()));
            }
            // Deleting a namespace deletes the veth end inside it, and with it the pair.
            sh(false, "ip", &["netns", "del", ns])?;
            removed.push(format!("namespace {ns}"));
        }
    }
    // Ends moved to the root namespace by a run that died half-way, in either shape of lab.
    let mut links = n.interfaces(1);
    links.extend(n.interfaces(MAX_NODES));
    links.sort();
    links.dedup();
    for link in &links {
        if link_exists_in_root(link) {
            sh(false, "ip", &["link", "del", link])?;
            removed.push(format!("veth {link}"));
        }
    }
    if let Some(st) = &state {
        if st.hugepages_reserved > 0 {
            let target = persistent_hugepages()?.saturating_sub(st.hugepages_reserved);
            fs::write(HUGEPAGES_2M, target.to_string())?;
            removed.push(format!("{} hugepages", st.hugepages_reserved));
            let held = give_back_hugepages(target);
            if held > 0 {
                eprintln!("note: {held} hugepages are still held by an exiting process; the kernel frees them when it is gone");
            }
        }
    }
    let stale = remove_stale_dpdk_dirs();
    if stale > 0 {
        removed.push(format!("{stale} stale DPDK runtime directories"));
    }
    if n.dir.exists() {
        fs::remove_dir_all(&n.dir)?;
    }
    if !quiet {
        if removed.is_empty() && state.is_none() {
            println!("lab {} is not up", n.prefix);
        } else {
            println!(
                "lab {} down: removed {}",
                n.prefix,
                if removed.is_empty() { "its state".into() } else { removed.join(", ") }
            );
        }
    }
    Ok(())
}

/// Lowers `nr_hugepages` to `target` for good. Pages in use when it was lowered become
/// "surplus" and go back to the kernel when their process lets go; a killed DPDK process lets go
/// of its AF_XDP memory a moment after it dies (the kernel defers the release). Waits up to 5 s
/// for that, and returns what is still held (surplus, or above the target).
fn give_back_hugepages(target: u64) -> u64 {
    let surplus = || read_u64(HUGEPAGES_2M_SURPLUS).unwrap_or(0);
    let over = || persistent_hugepages().map_or(0, |n| n.saturating_sub(target));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let held = surplus() + over();
        if held == 0 || std::time::Instant::now() >= deadline {
            return held;
        }
        if over() > 0 {
            // The write left the count above the target (seen: 10 pages after a lab test's
            // echo exited as the lab went down, with no surplus). The kernel never lowers the
            // count below the pages a live mapping has reserved but not yet touched (they are
            // neither in use, so not made surplus, nor free); once the process is gone they
            // are free, and writing the target again gives them back.
            let _ = fs::write(HUGEPAGES_2M, target.to_string());
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// DPDK runtime directories `pronghorn-<pid>` whose process is gone.
fn remove_stale_dpdk_dirs() -> usize {
    let Ok(dir) = fs::read_dir(DPDK_RUNTIME) else { return 0 };
    let mut count = 0;
    for e in dir.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix("pronghorn-").and_then(|p| p.parse::<u32>().ok()) else { continue };
        if !Path::new("/proc").join(pid.to_string()).exists() && fs::remove_dir_all(e.path()).is_ok() {
            count += 1;
        }
    }
    // Leave /var/run/dpdk itself only if something else lives there.
    let _ = fs::remove_dir(DPDK_RUNTIME);
    count
}

fn status(n: &Names) -> Result<i32> {
    if !n.is_up() {
        println!("lab {} is not up", n.prefix);
        return Ok(1);
    }
    let st = State::parse(&fs::read_to_string(n.state_file()).unwrap_or_default());
    println!("lab {}: up, pmd {}, {} hugepages reserved by it", n.prefix, st.pmd, st.hugepages_reserved);
    if st.nodes > 1 {
        for k in 1..=st.nodes {
            let (ns, veth, _) = n.node(k);
            let link = Command::new("ip").args(["-n", &ns, "-br", "link", "show", "dev", &veth]).output()?;
            let cfg = Config::load(&n.node_config(k)).map_err(|e| anyhow::anyhow!("{e}"))?;
            let v4 = cfg.ipv4.map(|c| c.address.to_string()).unwrap_or_default();
            println!("  node a{k}: namespace {ns}: {} {v4}", String::from_utf8_lossy(&link.stdout).trim());
            println!("    config: {}", n.node_config(k).display());
        }
        let out = Command::new("ip").args(["-n", &n.ns_b, "-br", "addr", "show", "dev", &n.bridge()]).output()?;
        println!("  side b: namespace {}: {}", n.ns_b, String::from_utf8_lossy(&out.stdout).trim());
        return Ok(0);
    }
    for (side, ns, dev) in
        [("a", &n.ns_a, &n.veth_a), ("b", &n.ns_b, &n.veth_b), ("a", &n.ns_a, &n.kveth_a), ("b", &n.ns_b, &n.kveth_b)]
    {
        let out = Command::new("ip").args(["-n", ns, "-br", "addr", "show", "dev", dev]).output()?;
        println!("  side {side}: namespace {ns}: {}", String::from_utf8_lossy(&out.stdout).trim());
    }
    println!("  config for side a: {}", n.config_a().display());
    Ok(0)
}

fn exec(n: &Names, side: &str, command: &[String]) -> Result<i32> {
    let node = side.strip_prefix('a').and_then(|k| k.parse::<u16>().ok());
    let (ns, config) = match node {
        Some(k) => (n.node(k).0, Some(n.node_config(k))),
        None if side == "a" => (n.ns_a.clone(), Some(n.config_a())),
        None => (n.ns_b.clone(), None),
    };
    if !netns_exists(&ns) {
        if !n.is_up() {
            bail!("lab {} is not up: run `pronghorn lab up --prefix {}` first", n.prefix, n.prefix);
        }
        let nodes = n.node_namespaces().len();
        if nodes > 0 {
            bail!("lab {} has nodes a1 to a{nodes} (brought up with --nodes), no {side}", n.prefix);
        }
        bail!("lab {} has one side a (no --nodes): use a or b, not {side}", n.prefix);
    }
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &ns]).args(command);
    if let Some(config) = config {
        cmd.env(config::ENV_VAR, config);
    }
    let err = cmd.exec();
    bail!("cannot run `ip netns exec {ns} ...`: {err}")
}

/// `lab model`: applies the model, runs the command, restores the lab (also when the command
/// fails or is killed by a signal; the command's exit status is ours).
fn with_model(args: &ModelArgs) -> Result<i32> {
    require_root("lab model")?;
    let n = Names::new(&args.prefix.prefix);
    if !n.is_up() || !netns_exists(&n.ns_a) {
        bail!("lab {} is not up with one side a: run `pronghorn lab up --prefix {}` first", n.prefix, n.prefix);
    }
    let devices = LabDevices {
        ns_a: &n.ns_a,
        ns_b: &n.ns_b,
        xdp_veth: &n.veth_a,
        xdp_peer: &n.veth_b,
        kernel_veth: &n.kveth_a,
        kernel_peer: &n.kveth_b,
    };
    let mut applied = model::apply(args.model, &devices, &args.server_cpus, &args.client_cpus)?;
    // ^C or a kill of the session reaches the command too: this process outlives it, to
    // restore the lab. A handler (not SIG_IGN) goes back to the default in the command's exec.
    extern "C" fn outlive(_: libc::c_int) {}
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler does nothing, so it is async-signal-safe.
        unsafe { libc::signal(sig, outlive as *const () as libc::sighandler_t) };
    }
    let status = Command::new(&args.command[0])
        .args(&args.command[1..])
        .env("PRONGHORN_LAB_MODEL", args.model.as_str())
        .env("PRONGHORN_LAB_MODEL_DESCRIPTION", &applied.description)
        .status();
    applied.restore();
    let status = status.with_context(|| format!("cannot run {}", args.command[0]))?;
    Ok(status.code().unwrap_or_else(|| 128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lab_models_are_named_as_bench_names_them() {
        assert_eq!(parse_model("veth"), Ok(Model::Veth));
        assert_eq!(parse_model("nic"), Ok(Model::Nic));
        assert_eq!(parse_model("dma"), Ok(Model::Dma));
        assert!(parse_model("both").unwrap_err().contains("expected veth, nic or dma"));
    }

    #[test]
    fn sides_are_checked() {
        for ok in ["a", "b", "a1", "a8"] {
            assert!(parse_side(ok).is_ok(), "{ok}");
        }
        for bad in ["c", "a0", "a9", "a01", "b1", ""] {
            assert!(parse_side(bad).unwrap_err().contains("a1 to a8"), "{bad}");
        }
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(parse_prefix("ph").is_ok());
        assert!(parse_prefix("t-12").is_ok());
        assert!(parse_prefix("").is_err());
        assert!(parse_prefix("UPPER").is_err());
        assert!(parse_prefix("much-too-long-prefix").unwrap_err().contains("1 to 12 characters"));
    }

    #[test]
    fn names_fit_in_an_interface_name() {
        // Every prefix the flag takes, with every number of nodes it takes.
        let n = Names::new("abcdefghijkl");
        for nodes in 1..=MAX_NODES {
            check_names(&n, nodes).unwrap();
        }
        assert_eq!(n.interfaces(1).len(), 4);
        assert_eq!(
            n.interfaces(3),
            [
                "abcdefghijkl-br",
                "abcdefghijkl-n1",
                "abcdefghijkl-p1",
                "abcdefghijkl-n2",
                "abcdefghijkl-p2",
                "abcdefghijkl-n3",
                "abcdefghijkl-p3"
            ]
        );
        assert_eq!(n.ns_a, "abcdefghijkl-a");
        // Two-digit nodes would need a shorter prefix: the error says how short.
        let err = check_names(&n, 10).unwrap_err().to_string();
        assert!(err.contains("abcdefghijkl-n10 would have 16 characters"), "{err}");
        assert!(err.contains("at most 11 characters"), "{err}");
        check_names(&Names::new("abcdefghijk"), 10).unwrap();
    }

    #[test]
    fn hugepages_grow_with_nodes_and_queues() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            up: UpArgs,
        }
        let want = |args: &[&str]| Cli::parse_from([&["lab"], args].concat()).up.hugepages();
        assert_eq!(want(&[]), HUGEPAGES_MIN);
        assert_eq!(want(&["--nodes", "8"]), HUGEPAGES_MIN, "8 nodes of one process fit in the minimum");
        assert_eq!(want(&["--nodes", "8", "--queues", "4"]), 2 * 8 * 4 * HUGEPAGES_PER_PROCESS);
        assert_eq!(want(&["--nodes", "8", "--hugepages", "100"]), 100, "an explicit count is taken as it is");
    }

    #[test]
    fn state_round_trips() {
        let s = State { hugepages_reserved: 256, pmd: "af_packet".into(), nodes: 6 };
        let t = State::parse(&s.render());
        assert_eq!(t.hugepages_reserved, 256);
        assert_eq!(t.pmd, "af_packet");
        assert_eq!(t.nodes, 6);
        assert_eq!(State::parse("hugepages_reserved = 1\npmd = \"af_xdp\"\n").nodes, 0, "a lab of before --nodes");
    }
}
