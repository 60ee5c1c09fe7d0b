//! The configuration file (TOML): what interface pronghorn drives and with which addresses.
//!
//! This crate owns parsing and validation only. Every error is one line that names the file, the
//! line, the key and what would be accepted; unknown keys are errors (a typo must never silently
//! fall back to a default). It does not touch the system (checking that the interface exists is
//! the NIC's job when it opens), but for `address = "auto"`, which [`Config::load`] takes from
//! the interface's own addresses (getifaddrs).
//!
//! ```toml
//! [nic]
//! pmd = "af_xdp"          # or "af_packet", "tap"
//! iface = "ph-a0"         # the Linux interface DPDK takes over (no kernel IP on it, unless shared)
//! share = false           # true: the kernel keeps the interface and its addresses; pronghorn
//!                         # gets only its sockets' ports (needs queues = 1 and shards = 1)
//! eal_args = []           # extra DPDK EAL arguments
//! mbufs = 8191            # packet buffers in the pool
//! queues = 1              # processes sharing the interface, one queue each (nginx workers)
//! offloads = true         # use the PMD's tx offloads (checksums, TCP segmentation)
//! fault = ""              # injected faults for tests, e.g. "loss=0.01" (none by default)
//!
//! [ipv4]
//! address = "10.99.0.1/24" # or "auto" with share = true: the interface's own address
//! gateway = "10.99.0.254" # optional
//!
//! [ipv6]                  # optional
//! address = "fd99::1/64"
//!
//! [runtime]               # optional; these are the defaults
//! drive = "auto"          # "inline", "dedicated" or "auto" (see RuntimeConfig)
//! spin_us = 0             # dedicated: how long the stack thread polls an idle NIC before it sleeps
//! busy_poll_us = 0        # inline: how long a waiting thread polls before it sleeps
//! stack_cpu = 3           # optional; dedicated: the CPU the stack thread is pinned to
//! numa = "auto"           # "auto", "off" or a node number: where DPDK memory and stack threads go
//! cpus = "2-3"            # optional; `pronghorn run` pins the application there (as --cpus)
//! shards = 1              # stacks in this process, each on its own queue with its own thread
//! exit_drain_ms = 5000    # at exit and exec: the longest wait for connections to send their data and FIN
//! share = "off"           # or "family": the shards' memory in a region a fork shares (issue 24, groundwork)
//!
//! [tcp]                   # optional; the defaults
//! congestion = "cubic"    # or "newreno": congestion control of new connections
//! ecn = 2                 # ECN as Linux's net.ipv4.tcp_ecn: 0 off, 1 ask and accept, 2 accept
//! orphan_retries = 0      # Linux's limits, per shard, with the sysctls' meanings (TcpConfig)
//! max_orphans = 131072
//! fin_timeout = 60
//! mem = [786432, 1048576, 1572864]
//! max_tw_buckets = 131072
//! somaxconn = 4096
//! ```

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub mod profile;

pub use topology::Numa;

/// The environment variable that names the config file (`pronghorn lab exec a` sets it).
pub const ENV_VAR: &str = "PRONGHORN_CONFIG";

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub nic: NicConfig,
    pub ipv4: Option<Ipv4Config>,
    pub ipv6: Option<Ipv6Config>,
    #[serde(default)]
    pub runtime: RuntimeConfig,
    #[serde(default)]
    pub tcp: TcpConfig,
}

/// TCP settings of every connection, with Linux's sysctl meanings.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct TcpConfig {
    /// Congestion control of new connections (Linux's `net.ipv4.tcp_congestion_control`).
    #[serde(default)]
    pub congestion: Congestion,
    /// Explicit Congestion Notification (RFC 3168), as `net.ipv4.tcp_ecn`: 0 never, 1 ask for
    /// it on connections we open and accept it when asked, 2 accept it when asked (Linux's
    /// default).
    #[serde(default = "default_ecn")]
    pub ecn: u8,
    /// Retransmissions or zero-window probes of a connection the application closed before it
    /// gives up (`net.ipv4.tcp_orphan_retries`; 0 means 8 while they are less than 120 s apart,
    /// and none more once they are).
    #[serde(default)]
    pub orphan_retries: u32,
    /// Orphans (closed by the application, still delivering) a shard keeps; a close beyond it
    /// resets the connection (`net.ipv4.tcp_max_orphans`).
    #[serde(default = "default_max_orphans")]
    pub max_orphans: u32,
    /// Seconds an orphan waits in FIN-WAIT-2 for the peer's FIN (`net.ipv4.tcp_fin_timeout`).
    #[serde(default = "default_fin_timeout")]
    pub fin_timeout: u32,
    /// Ring memory of a shard's connections, in 4 KiB pages: [low, pressure, high]
    /// (`net.ipv4.tcp_mem`).
    #[serde(default = "default_mem", deserialize_with = "mem_pages")]
    pub mem: [u64; 3],
    /// TIME-WAIT entries a shard keeps; beyond it a connection skips TIME-WAIT
    /// (`net.ipv4.tcp_max_tw_buckets`).
    #[serde(default = "default_max_tw_buckets")]
    pub max_tw_buckets: u32,
    /// The largest listen backlog (`net.core.somaxconn`).
    #[serde(default = "default_somaxconn")]
    pub somaxconn: u32,
}

impl Default for TcpConfig {
    fn default() -> Self {
        TcpConfig {
            congestion: Congestion::default(),
            ecn: default_ecn(),
            orphan_retries: 0,
            max_orphans: default_max_orphans(),
            fin_timeout: default_fin_timeout(),
            mem: default_mem(),
            max_tw_buckets: default_max_tw_buckets(),
            somaxconn: default_somaxconn(),
        }
    }
}

fn default_ecn() -> u8 {
    2
}

/// Linux sizes `tcp_max_orphans` and `tcp_max_tw_buckets` from the RAM: this is what a host of
/// 16 to 32 GiB gets.
fn default_max_orphans() -> u32 {
    131_072
}

fn default_max_tw_buckets() -> u32 {
    131_072
}

fn default_fin_timeout() -> u32 {
    60
}

/// Linux sizes `tcp_mem` from the RAM (pressure 1/16 of it, low 3/4 of that, high twice low):
/// this is a 16 GiB host's, charged as Linux charges (the bytes the rings hold).
fn default_mem() -> [u64; 3] {
    [196_608, 262_144, 393_216]
}

fn default_somaxconn() -> u32 {
    4096
}

fn mem_pages<'de, D: Deserializer<'de>>(d: D) -> Result<[u64; 3], D::Error> {
    let pages = Vec::<u64>::deserialize(d)?;
    pages.try_into().map_err(|p: Vec<u64>| {
        serde::de::Error::custom(format!(
            "tcp.mem must be [low, pressure, high] in 4 KiB pages, got {} numbers",
            p.len()
        ))
    })
}
impl TcpConfig {
    fn validate(&self) -> Result<(), String> {
        if self.orphan_retries > 255 {
            return Err(format!("tcp.orphan_retries must be 0 to 255, got {}", self.orphan_retries));
        }
        if !(1..=86_400).contains(&self.fin_timeout) {
            return Err(format!("tcp.fin_timeout must be 1 to 86400 (seconds), got {}", self.fin_timeout));
        }
        let [low, pressure, high] = self.mem;
        if !(low <= pressure && pressure <= high && (1..=1 << 32).contains(&high)) {
            return Err(format!(
                "tcp.mem must be [low, pressure, high] in 4 KiB pages, low <= pressure <= high, high 1 to 4294967296; got [{low}, {pressure}, {high}]"
            ));
        }
        if !(1..=i32::MAX as u32).contains(&self.somaxconn) {
            return Err(format!("tcp.somaxconn must be 1 to 2147483647, got {}", self.somaxconn));
        }
        Ok(())
    }
}

/// A congestion-control algorithm, by Linux's name for it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Congestion {
    /// CUBIC (RFC 9438), Linux's default.
    #[default]
    Cubic,
    /// NewReno (RFC 5681 with RFC 6582), Linux's "reno".
    NewReno,
}

impl FromStr for Congestion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cubic" => Ok(Congestion::Cubic),
            "newreno" => Ok(Congestion::NewReno),
            _ => Err(format!("tcp.congestion must be \"cubic\" or \"newreno\", got \"{s}\"")),
        }
    }
}

impl fmt::Display for Congestion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Congestion::Cubic => "cubic",
            Congestion::NewReno => "newreno",
        })
    }
}

/// How the process's shard is driven (the runtime crate's module doc has the design).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    #[serde(default)]
    pub drive: Drive,
    /// Dedicated mode: microseconds the stack thread keeps polling an idle NIC before it sleeps
    /// on the rx fd (run-to-wakeup). Costs CPU while traffic pauses; saves a wakeup per burst.
    #[serde(default = "default_spin_us")]
    pub spin_us: u32,
    /// Inline mode: microseconds a waiting application thread keeps polling the NIC before it
    /// sleeps (busy polling: lower latency for a core's worth of CPU while waiting).
    #[serde(default)]
    pub busy_poll_us: u32,
    /// Dedicated mode: pin the stack thread to this CPU (default: the process's own affinity).
    #[serde(default)]
    pub stack_cpu: Option<u32>,
    /// Where the packet memory and the stack threads go (crate `topology`'s placement): the
    /// NIC's node (`auto`), nowhere in particular (`off`), or a node by number.
    #[serde(default)]
    pub numa: Numa,
    /// The CPUs `pronghorn run` pins the application to (a kernel CPU list, `1,4-7`), its
    /// memory bound to their node, as `numactl --physcpubind` would; `--cpus` overrides it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// Shards (stack instances) in this process, each on its own queue of the interface (a run
    /// of consecutive queues among `nic.queues`) and driven by its own stack thread; listeners
    /// listen on every shard, and a connection stays on the shard its queue feeds.
    #[serde(default = "default_shards")]
    pub shards: u16,
    /// At exit and before an exec, the longest the process keeps its stacks running (ms) so that its
    /// connections, closed or still open, send their queued data and their FIN; what is left
    /// then is reset. A socket with SO_LINGER set waits its linger time instead. Linux sends
    /// on from orphaned sockets after the process is gone; a user-space stack ends with it.
    #[serde(default = "default_exit_drain_ms")]
    pub exit_drain_ms: u32,
    /// Where the shards' memory lives: the process heap, or the family arena that a fork shares
    /// (issue 24's groundwork; nothing uses the sharing yet).
    #[serde(default)]
    pub share: Share,
}

impl Default for RuntimeConfig {
    fn default() -> Self {
        RuntimeConfig {
            drive: Drive::Auto,
            spin_us: default_spin_us(),
            busy_poll_us: 0,
            stack_cpu: None,
            numa: Numa::Auto,
            cpus: None,
            shards: default_shards(),
            exit_drain_ms: default_exit_drain_ms(),
            share: Share::Off,
        }
    }
}

/// `runtime.share`: where the shards' heap objects and structs are allocated.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(try_from = "String", into = "String")]
pub enum Share {
    /// The process heap, private to the process (a forked child gets a copy).
    #[default]
    Off,
    /// The family arena: a MAP_SHARED region made before the first shard, which a fork keeps
    /// at the same address (crate `arena`). Costs a 64 GiB address-space reservation (pages
    /// taken as touched) and an allocator that keeps freed blocks for reuse; only the
    /// groundwork of a stack that forked processes share (docs/design-notes.md).
    Family,
}

impl TryFrom<String> for Share {
    type Error = String;

    fn try_from(s: String) -> Result<Share, String> {
        match s.as_str() {
            "off" => Ok(Share::Off),
            "family" => Ok(Share::Family),
            _ => Err(format!("runtime.share must be \"off\" or \"family\", got \"{s}\"")),
        }
    }
}

impl From<Share> for String {
    fn from(s: Share) -> String {
        s.to_string()
    }
}

impl fmt::Display for Share {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Share::Off => "off",
            Share::Family => "family",
        })
    }
}

fn default_exit_drain_ms() -> u32 {
    5000
}

fn default_shards() -> u16 {
    1
}

/// 0: on a core shared with the application, spinning takes time from it (MariaDB point_select,
/// 16 threads, one core: 32-34k tps with 50 us against 38-46k with 0).
fn default_spin_us() -> u32 {
    0
}

/// Who polls the NIC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Drive {
    /// The application threads that wait poll it themselves, one at a time (event loops).
    Inline,
    /// A stack thread polls it and wakes the application threads (thread per connection).
    Dedicated,
    /// Inline until two application threads are blocked at once, then dedicated; always inline
    /// when the process may run on one CPU only (a stack thread would share it).
    #[default]
    Auto,
}

impl fmt::Display for Drive {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Drive::Inline => "inline",
            Drive::Dedicated => "dedicated",
            Drive::Auto => "auto",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NicConfig {
    pub pmd: PmdName,
    pub iface: String,
    #[serde(default)]
    pub eal_args: Vec<String>,
    #[serde(default = "default_mbufs")]
    pub mbufs: u32,
    /// How many processes may drive the interface at once, each on a queue of its own (worker
    /// processes, or several servers on one interface): the interface needs at least this many
    /// queues. Each process claims the lowest free one when it opens the NIC.
    #[serde(default = "default_queues")]
    pub queues: u16,
    /// Faults injected on the interface's frames, in `pronghorn echo --fault`'s syntax
    /// (`loss=0.01,dup=0.001,corrupt=0.0001,ce=0.01,seed=N,dir=rx|tx|both`): for testing a real
    /// server under loss. Empty: none. Faults that hold frames back (`delay_us`, `reorder`) are
    /// refused: a shard asleep on the NIC would not release them on time.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fault: String,
    /// The interface stays the kernel's, addresses included: pronghorn's XDP program hands
    /// pronghorn only TCP and UDP to the ports its sockets hold and to its ephemeral range
    /// (61000-65535, which the kernel's `ip_local_port_range` must leave out or
    /// `ip_local_reserved_ports` must hold), and the ICMP errors about them; ARP, NDP, ping and
    /// everything else stay with the kernel, whose neighbour table pronghorn reads.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub share: bool,
    /// Use the tx offloads the PMD offers (IPv4, TCP and UDP checksums, TCP segmentation);
    /// false: the stack computes every checksum and sends MSS-sized frames.
    #[serde(default = "default_offloads", skip_serializing_if = "is_default_offloads")]
    pub offloads: bool,
}

fn default_offloads() -> bool {
    true
}

fn is_default_offloads(on: &bool) -> bool {
    *on
}

fn default_queues() -> u16 {
    1
}

fn default_mbufs() -> u32 {
    8191
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PmdName {
    AfXdp,
    AfPacket,
    Tap,
}

impl fmt::Display for PmdName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PmdName::AfXdp => "af_xdp",
            PmdName::AfPacket => "af_packet",
            PmdName::Tap => "tap",
        })
    }
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ipv4Config {
    pub address: Ipv4Cidr,
    pub gateway: Option<Ipv4Addr>,
}

#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Ipv6Config {
    pub address: Ipv6Cidr,
    pub gateway: Option<Ipv6Addr>,
}

/// An address with its prefix length, `10.99.0.1/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Cidr {
    pub addr: Ipv4Addr,
    pub prefix_len: u8,
}

/// An address with its prefix length, `fd99::1/64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Cidr {
    pub addr: Ipv6Addr,
    pub prefix_len: u8,
}

impl Ipv4Cidr {
    /// Whether `ip` is in this subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = if self.prefix_len == 0 { 0 } else { u32::MAX << (32 - self.prefix_len) };
        u32::from(ip) & mask == u32::from(self.addr) & mask
    }
}

impl Ipv6Cidr {
    pub fn contains(&self, ip: Ipv6Addr) -> bool {
        let mask = if self.prefix_len == 0 { 0 } else { u128::MAX << (128 - self.prefix_len) };
        u128::from(ip) & mask == u128::from(self.addr) & mask
    }
}

fn split_cidr(s: &str, max: u8) -> Result<(&str, u8), ()> {
    let (a, p) = s.split_once('/').ok_or(())?;
    let p: u8 = p.parse().map_err(|_| ())?;
    if p > max {
        return Err(());
    }
    Ok((a, p))
}

impl FromStr for Ipv4Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("\"{s}\" is not an IPv4 address with a prefix length, like 10.99.0.1/24");
        let (a, p) = split_cidr(s, 32).map_err(|_| bad())?;
        Ok(Ipv4Cidr { addr: a.parse().map_err(|_| bad())?, prefix_len: p })
    }
}

impl FromStr for Ipv6Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("\"{s}\" is not an IPv6 address with a prefix length, like fd99::1/64");
        let (a, p) = split_cidr(s, 128).map_err(|_| bad())?;
        Ok(Ipv6Cidr { addr: a.parse().map_err(|_| bad())?, prefix_len: p })
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

impl fmt::Display for Ipv6Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix_len)
    }
}

macro_rules! serde_via_str {
    ($t:ty) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    };
}
serde_via_str!(Ipv4Cidr);
serde_via_str!(Ipv6Cidr);
serde_via_str!(Congestion);

/// A config that could not be used: one line, naming the file, the line and the problem.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum ConfigError {
    #[error("cannot read config {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    #[error("config {path}{location}: {message}")]
    Invalid { path: PathBuf, location: String, message: String },
    #[error("no config given: pass --config FILE or set {ENV_VAR} (`pronghorn lab exec a -- ...` sets it)")]
    Missing,
}

impl Config {
    /// Parses and validates config text; `path` is only used in error messages. `address =
    /// "auto"` takes the addresses `iface_addresses` gives for the interface.
    pub fn parse_with(
        text: &str,
        path: &Path,
        iface_addresses: impl Fn(&str) -> Result<IfaceAddresses, String>,
    ) -> Result<Config, ConfigError> {
        let invalid =
            |message: String| ConfigError::Invalid { path: path.to_owned(), location: String::new(), message };
        let table: toml::Table = match toml::from_str(text) {
            Ok(t) => t,
            Err(_) => return Config::parse(text, path),
        };
        let is_auto =
            |family: &str| table.get(family).and_then(|t| t.get("address")).and_then(|a| a.as_str()) == Some(AUTO);
        let (auto4, auto6) = (is_auto("ipv4"), is_auto("ipv6"));
        if !auto4 && !auto6 {
            return Config::parse(text, path);
        }
        let iface =
            table.get("nic").and_then(|n| n.get("iface")).and_then(|i| i.as_str()).unwrap_or_default().to_string();
        let shared = table.get("nic").and_then(|n| n.get("share")).and_then(|s| s.as_bool()) == Some(true);
        if !shared {
            return Err(invalid(format!(
                "address = \"{AUTO}\" takes interface \"{iface}\"'s own address, which only an interface shared with the kernel has: set nic.share = true, or give the address"
            )));
        }
        let found = iface_addresses(&iface).map_err(invalid)?;
        let mut table = table;
        let wanted =
            [(auto4, "ipv4", found.ipv4.map(|a| a.to_string())), (auto6, "ipv6", found.ipv6.map(|a| a.to_string()))];
        for (_, family, address) in wanted.into_iter().filter(|w| w.0) {
            let address = address.ok_or_else(|| {
                invalid(format!("{family}.address = \"{AUTO}\": interface \"{iface}\" has no global {family} address"))
            })?;
            if let Some(t) = table.get_mut(family).and_then(|t| t.as_table_mut()) {
                t.insert("address".into(), toml::Value::String(address));
            }
        }
        let cfg: Config = table.try_into().map_err(|e: toml::de::Error| invalid(one_line(e.message())))?;
        cfg.validate().map_err(invalid)?;
        Ok(cfg)
    }

    /// Parses and validates config text; `path` is only used in error messages.
    pub fn parse(text: &str, path: &Path) -> Result<Config, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let location = e
                .span()
                .map(|s| format!(" line {}", text[..s.start.min(text.len())].matches('\n').count() + 1))
                .unwrap_or_default();
            ConfigError::Invalid { path: path.to_owned(), location, message: one_line(e.message()) }
        })?;
        cfg.validate().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            location: String::new(),
            message,
        })?;
        Ok(cfg)
    }

    /// Reads and parses the file at `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.to_owned(), reason: e.to_string() })?;
        Config::parse_with(&text, path, iface_addresses)
    }

    /// The file named by `explicit`, else by `$PRONGHORN_CONFIG`.
    pub fn locate(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
        match explicit {
            Some(p) => Ok(p.to_owned()),
            None => std::env::var_os(ENV_VAR).filter(|v| !v.is_empty()).map(PathBuf::from).ok_or(ConfigError::Missing),
        }
    }

    /// The config as TOML text, as `pronghorn lab up` writes it: only the keys whose values
    /// differ from the defaults, so that a profile laid under the file (its keys yield to those
    /// the file sets) is not overridden by defaults nobody chose.
    pub fn to_toml(&self) -> String {
        let mut table = toml::Table::try_from(self).expect("a Config always serialises");
        let nic_defaults = NicConfig {
            pmd: self.nic.pmd,
            iface: self.nic.iface.clone(),
            eal_args: Vec::new(),
            mbufs: default_mbufs(),
            queues: default_queues(),
            fault: String::new(),
            share: false,
            offloads: default_offloads(),
        };
        let defaults = [
            ("nic", toml::Table::try_from(nic_defaults)),
            ("runtime", toml::Table::try_from(RuntimeConfig::default())),
            ("tcp", toml::Table::try_from(TcpConfig::default())),
        ];
        for (section, default) in defaults {
            let mut default = default.expect("defaults always serialise");
            // Required keys have no default: always written.
            default.remove("pmd");
            default.remove("iface");
            let Some(toml::Value::Table(keys)) = table.get_mut(section) else { continue };
            keys.retain(|key, value| default.get(key) != Some(value));
            if keys.is_empty() {
                table.remove(section);
            }
        }
        toml::to_string(&table).expect("a Config always serialises")
    }

    fn validate(&self) -> Result<(), String> {
        let n = &self.nic;
        if n.iface.is_empty() || n.iface.len() > 15 || n.iface.contains(['/', ' ', '\0']) {
            return Err(format!(
                "nic.iface \"{}\" is not a Linux interface name (1 to 15 characters, no '/' or spaces)",
                n.iface
            ));
        }
        if n.mbufs < 1023 {
            return Err(format!("nic.mbufs must be at least 1023, got {}", n.mbufs));
        }
        if !(1..=64).contains(&n.queues) {
            return Err(format!("nic.queues must be 1 to 64 (processes sharing the interface), got {}", n.queues));
        }
        if n.queues > 1 && n.pmd != PmdName::AfXdp {
            return Err(format!(
                "nic.queues = {} needs pmd = \"af_xdp\" ({} cannot share an interface between processes)",
                n.queues, n.pmd
            ));
        }
        if n.share && (n.pmd != PmdName::AfXdp || n.queues != 1 || self.runtime.shards != 1) {
            return Err(format!(
                "nic.share = true needs pmd = \"af_xdp\", nic.queues = 1 and runtime.shards = 1 (DPDK 22.11 attaches pronghorn's XDP program for one port only), got pmd = \"{}\", queues = {}, shards = {}",
                n.pmd, n.queues, self.runtime.shards
            ));
        }
        match n.fault.parse::<nic::fault::FaultConfig>() {
            Err(e) => return Err(format!("nic.fault: {e}")),
            Ok(f) if f.delay_us > 0 || f.reorder > 0.0 => {
                return Err(format!(
                    "nic.fault \"{}\": delay_us and reorder hold frames back, which a shard asleep on the NIC would not \
                     release on time; use them with `pronghorn echo --fault` (loss, dup, corrupt and ce are accepted here)",
                    n.fault
                ))
            }
            Ok(_) => {}
        }
        if self.ipv4.is_none() && self.ipv6.is_none() {
            return Err("give at least one of [ipv4] or [ipv6] with an address".into());
        }
        if let Some(v4) = &self.ipv4 {
            if v4.address.prefix_len == 0 || v4.address.addr.is_unspecified() || v4.address.addr.is_multicast() {
                return Err(format!(
                    "ipv4.address {} must be a unicast address with a prefix length of 1 to 32",
                    v4.address
                ));
            }
            if let Some(gw) = v4.gateway {
                if !v4.address.contains(gw) {
                    return Err(format!("ipv4.gateway {gw} is not inside ipv4.address {}", v4.address));
                }
            }
        }
        let r = &self.runtime;
        if r.spin_us > 1_000_000 || r.busy_poll_us > 1_000_000 {
            return Err(format!(
                "runtime.spin_us and runtime.busy_poll_us must be 0 to 1000000 (microseconds), got {} and {}",
                r.spin_us, r.busy_poll_us
            ));
        }
        if r.exit_drain_ms > 600_000 {
            return Err(format!(
                "runtime.exit_drain_ms must be 0 to 600000 (milliseconds a process waits at exit for its connections to send), got {}",
                r.exit_drain_ms
            ));
        }
        if let Some(cpu) = r.stack_cpu {
            if cpu >= 1024 {
                return Err(format!("runtime.stack_cpu {cpu} is not a CPU number (0 to 1023)"));
            }
        }
        if let Some(cpus) = &r.cpus {
            topology::parse_cpu_list(cpus).map_err(|e| format!("runtime.cpus \"{cpus}\": {e}"))?;
        }
        if !(1..=64).contains(&r.shards) {
            return Err(format!("runtime.shards must be 1 to 64 (stacks in this process), got {}", r.shards));
        }
        if r.shards > n.queues {
            return Err(format!(
                "runtime.shards = {} needs nic.queues of at least {} (each shard drives a queue of the interface); set nic.queues",
                r.shards, r.shards
            ));
        }
        if r.shards > 1 && r.drive == Drive::Inline {
            return Err(format!(
                "runtime.shards = {} runs a stack thread per shard: drive = \"inline\" cannot; use \"auto\" or \"dedicated\"",
                r.shards
            ));
        }
        if self.tcp.ecn > 2 {
            return Err(format!(
                "tcp.ecn must be 0 (off), 1 (ask and accept) or 2 (accept when asked), as Linux's tcp_ecn; got {}",
                self.tcp.ecn
            ));
        }
        self.tcp.validate()?;
        if let Some(v6) = &self.ipv6 {
            if v6.address.prefix_len == 0 || v6.address.addr.is_unspecified() || v6.address.addr.is_multicast() {
                return Err(format!(
                    "ipv6.address {} must be a unicast address with a prefix length of 1 to 128",
                    v6.address
                ));
            }
        }
        Ok(())
    }
}

/// What `address = "auto"` stands for.
const AUTO: &str = "auto";

/// An interface's own addresses, the first global one of each family (`address = "auto"`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfaceAddresses {
    pub ipv4: Option<Ipv4Cidr>,
    pub ipv6: Option<Ipv6Cidr>,
}

/// The addresses the kernel has on interface `iface` in this network namespace (getifaddrs):
/// the first IPv4 one and the first IPv6 one that is not link-local.
pub fn iface_addresses(iface: &str) -> Result<IfaceAddresses, String> {
    let (v4, v6) = nic::ifaddr::global_addresses(iface)
        .map_err(|e| format!("cannot list interface \"{iface}\"'s addresses: {e}"))?;
    Ok(IfaceAddresses {
        ipv4: v4.map(|(addr, prefix_len)| Ipv4Cidr { addr, prefix_len }),
        ipv6: v6.map(|(addr, prefix_len)| Ipv6Cidr { addr, prefix_len }),
    })
}

/// toml's messages can span lines; a person reads one.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[nic]
pmd = "af_xdp"
iface = "ph-a0"

[ipv4]
address = "10.99.0.1/24"

[ipv6]
address = "fd99::1/64"
"#;

    fn parse(t: &str) -> Result<Config, ConfigError> {
        Config::parse(t, Path::new("test.toml"))
    }

    fn err(t: &str) -> String {
        parse(t).unwrap_err().to_string()
    }

    #[test]
    fn good_config_parses_with_defaults() {
        let c = parse(GOOD).unwrap();
        assert_eq!(c.nic.pmd, PmdName::AfXdp);
        assert_eq!(c.nic.iface, "ph-a0");
        assert_eq!(c.nic.mbufs, 8191);
        assert!(c.nic.eal_args.is_empty());
        let v4 = c.ipv4.unwrap();
        assert_eq!(v4.address.addr, Ipv4Addr::new(10, 99, 0, 1));
        assert_eq!(v4.address.prefix_len, 24);
        assert_eq!(c.ipv6.unwrap().address.to_string(), "fd99::1/64");
        assert_eq!(c.runtime, RuntimeConfig::default());
        assert_eq!(c.runtime.drive, Drive::Auto);
        assert_eq!(c.tcp.ecn, 2, "Linux's default tcp_ecn");
        assert_eq!(c.tcp.congestion, Congestion::Cubic);
    }

    #[test]
    fn numa_and_cpus_are_checked() {
        let numa = |v: &str| parse(&format!("{GOOD}\n[runtime]\nnuma = {v}\n")).map(|c| c.runtime.numa);
        assert_eq!(parse(GOOD).unwrap().runtime.numa, Numa::Auto);
        assert_eq!(numa("\"off\"").unwrap(), Numa::Off);
        assert_eq!(numa("\"auto\"").unwrap(), Numa::Auto);
        assert_eq!(numa("1").unwrap(), Numa::Node(1));
        assert_eq!(numa("\"3\"").unwrap(), Numa::Node(3));
        for bad in ["-1", "\"near\"", "4096"] {
            let e = numa(bad).unwrap_err().to_string();
            assert!(e.contains("runtime.numa must be \"auto\", \"off\" or a NUMA node number"), "{e}");
        }
        let c = parse(&format!("{GOOD}\n[runtime]\nnuma = 1\ncpus = \"1,4-5\"\n")).unwrap();
        assert_eq!(parse(&c.to_toml()).unwrap(), c, "numa and cpus survive to_toml");
        let e = err(&format!("{GOOD}\n[runtime]\ncpus = \"3-1\"\n"));
        assert!(e.contains("runtime.cpus \"3-1\""), "{e}");
    }

    #[test]
    fn tcp_section_is_checked() {
        for ecn in 0..=2 {
            assert_eq!(parse(&format!("{GOOD}\n[tcp]\necn = {ecn}\n")).unwrap().tcp.ecn, ecn);
        }
        let e = err(&format!("{GOOD}\n[tcp]\necn = 3\n"));
        assert!(e.contains("tcp.ecn must be 0 (off), 1 (ask and accept) or 2 (accept when asked)"), "{e}");
        assert!(e.ends_with("got 3"), "{e}");
        let e = err(&format!("{GOOD}\n[tcp]\necn = \"on\"\n"));
        assert!(e.contains("line 13") && e.contains("expected u8"), "{e}");
        let e = err(&format!("{GOOD}\n[tcp]\necm = 1\n"));
        assert!(e.contains("unknown field `ecm`"), "{e}");
    }

    #[test]
    fn tcp_limits_have_linux_defaults_and_are_checked() {
        let c = parse(GOOD).unwrap().tcp;
        assert_eq!((c.orphan_retries, c.fin_timeout, c.somaxconn), (0, 60, 4096));
        assert_eq!((c.max_orphans, c.max_tw_buckets, c.mem), (131_072, 131_072, [196_608, 262_144, 393_216]));
        let limits = "orphan_retries = 3\nmax_orphans = 10\nfin_timeout = 5\nmem = [1, 2, 3]\nmax_tw_buckets = 0\nsomaxconn = 16\n";
        let c = parse(&format!("{GOOD}\n[tcp]\n{limits}")).unwrap();
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        let t = c.tcp;
        assert_eq!((t.orphan_retries, t.max_orphans, t.fin_timeout), (3, 10, 5));
        assert_eq!((t.mem, t.max_tw_buckets, t.somaxconn), ([1, 2, 3], 0, 16));
        for (line, want) in [
            ("orphan_retries = 256", "tcp.orphan_retries must be 0 to 255, got 256"),
            ("fin_timeout = 0", "tcp.fin_timeout must be 1 to 86400 (seconds), got 0"),
            ("mem = [3, 2, 1]", "tcp.mem must be [low, pressure, high] in 4 KiB pages"),
            ("mem = [0, 0, 0]", "got [0, 0, 0]"),
            ("somaxconn = 0", "tcp.somaxconn must be 1 to 2147483647, got 0"),
        ] {
            let e = err(&format!("{GOOD}\n[tcp]\n{line}\n"));
            assert!(e.contains(want), "{line}: {e}");
        }
        let e = err(&format!("{GOOD}\n[tcp]\nmem = [1, 2]\n"));
        assert!(e.contains("line 13") && e.contains("tcp.mem must be [low, pressure, high]"), "{e}");
        let e = err(&format!("{GOOD}\n[tcp]\nmax_orphans = -1\n"));
        assert!(e.contains("line 13"), "{e}");
    }

    #[test]
    fn tcp_congestion_is_checked() {
        let c = parse(&format!("{GOOD}\n[tcp]\ncongestion = \"newreno\"\n")).unwrap();
        assert_eq!(c.tcp.congestion, Congestion::NewReno);
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
        let c = parse(&format!("{GOOD}\n[tcp]\ncongestion = \"cubic\"\n")).unwrap();
        assert_eq!(c.tcp.congestion, Congestion::Cubic);
        let e = err(&format!("{GOOD}\n[tcp]\ncongestion = \"bbr\"\n"));
        assert!(
            e.contains("line 13") && e.contains("tcp.congestion must be \"cubic\" or \"newreno\", got \"bbr\""),
            "{e}"
        );
        let e = err(&format!("{GOOD}\n[tcp]\ncongestion = 1\n"));
        assert!(e.contains("line 13") && e.contains("string"), "{e}");
        let e = err(&format!("{GOOD}\n[tcp]\ncc = \"cubic\"\n"));
        assert!(e.contains("unknown field `cc`") && e.contains("congestion"), "{e}");
    }

    #[test]
    fn runtime_section_is_checked() {
        let c = parse(&format!("{GOOD}\n[runtime]\ndrive = \"dedicated\"\nspin_us = 0\nstack_cpu = 1\n")).unwrap();
        assert_eq!(c.runtime.drive, Drive::Dedicated);
        assert_eq!((c.runtime.spin_us, c.runtime.stack_cpu), (0, Some(1)));
        let e = err(&format!("{GOOD}\n[runtime]\ndrive = \"threads\"\n"));
        assert!(e.contains("threads") && e.contains("inline") && e.contains("dedicated"), "{e}");
        let e = err(&format!("{GOOD}\n[runtime]\nbusy_poll_us = 5000000\n"));
        assert!(e.contains("runtime.busy_poll_us"), "{e}");
        assert_eq!(c.runtime.exit_drain_ms, 5000);
        let c = parse(&format!("{GOOD}\n[runtime]\nexit_drain_ms = 0\n")).unwrap();
        assert_eq!(c.runtime.exit_drain_ms, 0);
        let e = err(&format!("{GOOD}\n[runtime]\nexit_drain_ms = 3600000\n"));
        assert!(e.contains("runtime.exit_drain_ms"), "{e}");
        let e = err(&format!("{GOOD}\n[runtime]\nspin = 5\n"));
        assert!(e.contains("unknown field `spin`"), "{e}");
    }

    #[test]
    fn runtime_share_is_off_unless_asked_and_checked() {
        assert_eq!(parse(GOOD).unwrap().runtime.share, Share::Off);
        let c = parse(&format!("{GOOD}\n[runtime]\nshare = \"family\"\n")).unwrap();
        assert_eq!(c.runtime.share, Share::Family);
        let e = err(&format!("{GOOD}\n[runtime]\nshare = \"fork\"\n"));
        assert!(e.contains("runtime.share") && e.contains("\"off\" or \"family\"") && e.contains("fork"), "{e}");
        let e = err(&format!("{GOOD}\n[runtime]\nshare = true\n"));
        assert!(e.contains("string") && e.contains("line"), "{e}");
    }

    #[test]
    fn round_trips_through_toml() {
        let c = parse(GOOD).unwrap();
        assert_eq!(parse(&c.to_toml()).unwrap(), c);
    }

    #[test]
    fn to_toml_writes_only_the_keys_that_differ_from_the_defaults() {
        let text = parse(GOOD).unwrap().to_toml();
        assert!(!text.contains("[runtime]") && !text.contains("[tcp]") && !text.contains("mbufs"), "{text}");
        assert!(text.contains("pmd = \"af_xdp\"") && text.contains("iface = \"ph-a0\""), "{text}");
        let c = parse(&format!(
            "{}\n[runtime]\nspin_us = 5\n[tcp]\necn = 2\nfin_timeout = 9\n",
            GOOD.replace("[nic]", "[nic]\nmbufs = 2047")
        ))
        .unwrap();
        let text = c.to_toml();
        assert!(
            text.contains("mbufs = 2047") && text.contains("spin_us = 5") && text.contains("fin_timeout = 9"),
            "{text}"
        );
        assert!(!text.contains("ecn") && !text.contains("drive"), "{text}");
        assert_eq!(parse(&text).unwrap(), c);
    }

    #[test]
    fn unknown_key_is_named_with_its_line() {
        let e = err(&GOOD.replace("iface =", "ifface ="));
        assert!(e.starts_with("config test.toml line 4: unknown field `ifface`"), "{e}");
        assert!(e.contains("expected one of"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn bad_values_name_the_key_and_the_fix() {
        let e = err(&GOOD.replace("\"af_xdp\"", "\"ixgbe\""));
        assert!(e.contains("line 3") && e.contains("ixgbe") && e.contains("af_xdp"), "{e}");
        let e = err(&GOOD.replace("10.99.0.1/24", "10.99.0.1"));
        assert!(e.contains("like 10.99.0.1/24"), "{e}");
        let e = err(&GOOD.replace("fd99::1/64", "fd99::1/129"));
        assert!(e.contains("like fd99::1/64"), "{e}");
        let e = err(&GOOD.replace("ph-a0", "a-name-that-is-too-long"));
        assert!(e.contains("nic.iface"), "{e}");
        let e = err(&GOOD.replace("[ipv4]", "[ipv4]\ngateway = \"10.1.0.1\""));
        assert!(e.contains("ipv4.gateway 10.1.0.1 is not inside"), "{e}");
        let e = err("[nic]\npmd = \"af_xdp\"\niface = \"x\"\n");
        assert!(e.contains("at least one of [ipv4] or [ipv6]"), "{e}");
        let e = err(&GOOD.replace("[nic]", "[nic]\nmbufs = 10"));
        assert!(e.contains("nic.mbufs must be at least 1023, got 10"), "{e}");
        let c = parse(&format!("{}\n[runtime]\nshards = 2\n", GOOD.replace("[nic]", "[nic]\nqueues = 2"))).unwrap();
        assert_eq!(c.runtime.shards, 2);
        let e = err(&format!("{GOOD}\n[runtime]\nshards = 2\n"));
        assert!(e.contains("runtime.shards = 2 needs nic.queues of at least 2"), "{e}");
        let e = err(&format!("{GOOD}\n[runtime]\nshards = 0\n"));
        assert!(e.contains("runtime.shards must be 1 to 64"), "{e}");
        let e = err(&format!(
            "{}\n[runtime]\nshards = 2\ndrive = \"inline\"\n",
            GOOD.replace("[nic]", "[nic]\nqueues = 2")
        ));
        assert!(e.contains("drive = \"inline\" cannot"), "{e}");
        let e = err(&GOOD.replace("[nic]", "[nic]\nqueues = 0"));
        assert!(e.contains("nic.queues must be 1 to 64"), "{e}");
        let e = err(&GOOD.replace("[nic]", "[nic]\nqueues = 2").replace("af_xdp", "af_packet"));
        assert!(e.contains("needs pmd = \"af_xdp\""), "{e}");
        let e = err(&GOOD.replace("[nic]", "[nic]\nqueues = 2").replace("af_xdp", "tap"));
        assert!(e.contains("needs pmd = \"af_xdp\" (tap cannot share"), "{e}");
    }

    #[test]
    fn offloads_are_on_unless_turned_off() {
        let c = parse(GOOD).unwrap();
        assert!(c.nic.offloads);
        assert!(!c.to_toml().contains("offloads"), "the default is not written");
        let c = parse(&GOOD.replace("[nic]", "[nic]\noffloads = false").replace("af_xdp", "tap")).unwrap();
        assert!(!c.nic.offloads);
        assert_eq!(c.nic.pmd, PmdName::Tap);
        assert!(c.to_toml().contains("offloads = false"));
        let e = err(&GOOD.replace("[nic]", "[nic]\noffloads = \"no\""));
        assert!(e.contains("line 3: invalid type: string \"no\", expected a boolean"), "{e}");
    }

    #[test]
    fn faults_that_drop_or_damage_frames_are_accepted_and_those_that_hold_them_are_not() {
        let c = parse(&GOOD.replace("[nic]", "[nic]\nfault = \"loss=0.01,seed=7\"")).unwrap();
        assert_eq!(c.nic.fault, "loss=0.01,seed=7");
        assert!(parse(GOOD).unwrap().nic.fault.is_empty());
        assert!(!parse(GOOD).unwrap().to_toml().contains("fault"), "no fault key written when there is none");
        let e = err(&GOOD.replace("[nic]", "[nic]\nfault = \"los=0.01\""));
        assert!(e.contains("nic.fault: unknown fault key \"los\""), "{e}");
        let e = err(&GOOD.replace("[nic]", "[nic]\nfault = \"loss=2\""));
        assert!(e.contains("nic.fault: fault \"loss\" must be a probability"), "{e}");
        for holding in ["delay_us=100", "loss=0.01,reorder=0.01"] {
            let e = err(&GOOD.replace("[nic]", &format!("[nic]\nfault = \"{holding}\"")));
            assert!(e.contains("delay_us and reorder hold frames back"), "{e}");
        }
    }

    #[test]
    fn missing_section_and_syntax_errors_are_one_line() {
        let e = err("[ipv4]\naddress = \"10.0.0.1/8\"\n");
        assert!(e.contains("missing field `nic`"), "{e}");
        let e = err("[nic\n");
        assert!(e.starts_with("config test.toml line 1:"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn subnet_membership() {
        let c: Ipv4Cidr = "10.99.0.1/24".parse().unwrap();
        assert!(c.contains(Ipv4Addr::new(10, 99, 0, 200)));
        assert!(!c.contains(Ipv4Addr::new(10, 99, 1, 1)));
        let c: Ipv6Cidr = "fd99::1/64".parse().unwrap();
        assert!(c.contains("fd99::2".parse().unwrap()));
        assert!(!c.contains("fd98::2".parse().unwrap()));
    }

    #[test]
    fn locate_prefers_the_explicit_path() {
        assert_eq!(Config::locate(Some(Path::new("/x.toml"))).unwrap(), PathBuf::from("/x.toml"));
    }

    #[test]
    fn unreadable_file_is_named() {
        let e = Config::load(Path::new("/nonexistent/pronghorn.toml")).unwrap_err().to_string();
        assert!(e.starts_with("cannot read config /nonexistent/pronghorn.toml:"), "{e}");
    }

    const SHARED: &str = "[nic]\npmd = \"af_xdp\"\niface = \"eth0\"\nshare = true\n[ipv4]\naddress = \"auto\"\n[ipv6]\naddress = \"auto\"\n";

    fn eth0(iface: &str) -> Result<IfaceAddresses, String> {
        assert_eq!(iface, "eth0");
        Ok(IfaceAddresses {
            ipv4: Some("192.0.2.7/24".parse().unwrap()),
            ipv6: Some("2001:db8::7/64".parse().unwrap()),
        })
    }

    /// The example the Debian package installs as /etc/pronghorn/pronghorn.toml.
    #[test]
    fn the_packages_example_config_is_valid() {
        let text = include_str!("../../../packaging/pronghorn.toml");
        let c = Config::parse_with(text, Path::new("/etc/pronghorn/pronghorn.toml"), eth0).unwrap();
        assert!(c.nic.share);
        assert_eq!(c.ipv4.unwrap().address.to_string(), "192.0.2.7/24");
    }

    #[test]
    fn auto_takes_the_shared_interfaces_own_addresses() {
        let c = Config::parse_with(SHARED, Path::new("t.toml"), eth0).unwrap();
        assert!(c.nic.share);
        assert_eq!(c.ipv4.unwrap().address.to_string(), "192.0.2.7/24");
        assert_eq!(c.ipv6.unwrap().address.to_string(), "2001:db8::7/64");
        // A given address stays as given; share defaults to false.
        let c =
            Config::parse_with(&SHARED.replacen("\"auto\"", "\"192.0.2.9/24\"", 1), Path::new("t.toml"), eth0).unwrap();
        assert_eq!(c.ipv4.unwrap().address.to_string(), "192.0.2.9/24");
        assert!(!parse(GOOD).unwrap().nic.share);
    }

    #[test]
    fn auto_needs_a_shared_interface_with_an_address() {
        let e = Config::parse_with(&SHARED.replace("share = true\n", ""), Path::new("t.toml"), eth0)
            .unwrap_err()
            .to_string();
        assert!(e.contains("set nic.share = true"), "{e}");
        let none = |_: &str| Ok(IfaceAddresses { ipv4: Some("192.0.2.7/24".parse().unwrap()), ipv6: None });
        let e = Config::parse_with(SHARED, Path::new("t.toml"), none).unwrap_err().to_string();
        assert!(e.contains("ipv6.address = \"auto\"") && e.contains("no global ipv6 address"), "{e}");
    }

    #[test]
    fn share_needs_af_xdp_and_one_port() {
        let shared = GOOD.replace("[nic]", "[nic]\nshare = true");
        assert!(parse(&shared).unwrap().nic.share);
        let e = err(&shared.replace("af_xdp", "af_packet"));
        assert!(e.contains("nic.share = true needs pmd = \"af_xdp\""), "{e}");
        let e = err(&shared.replace("[nic]", "[nic]\nqueues = 2"));
        assert!(e.contains("nic.share = true needs") && e.contains("queues = 2"), "{e}");
    }
}
