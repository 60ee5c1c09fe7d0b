//! One shard: a NIC queue and everything above it — the link-layer control protocols
//! ([`crate::iface`]), the neighbor cache, routing, IPv4/IPv6, TCP demux to sans-I/O
//! connections, listeners with SYN and accept queues and SYN cookies, compact TIME-WAIT entries,
//! UDP sockets, one timer wheel for all of it, and the socket API the POSIX shim sits on.
//!
//! The shard is driven by [`Shard::poll`] from one thread with the current time; it never reads a
//! clock, sleeps or locks. Per packet and per timer the cost is O(1): a hash lookup, a timer-wheel
//! operation, no scan over sockets. Sockets that need attention (data to send, events to report)
//! go on a dirty list that `poll` drains; sockets whose readiness may have changed go on a
//! changed list that the application drains with [`Shard::take_changed`].
//!
//! It must not know about file descriptors, threads or the application's event loop: that is the
//! runtime's and the shim's.
//!
//! The parts, each a submodule that adds an `impl Shard` block of its own:
//! - this module: the [`Shard`] struct, its settings and counters, and the driver ([`Shard::poll`],
//!   [`Shard::flush`], the timers, the hand-off between the shards of one process);
//! - `sockets`: the socket slab, socket ids, the dirty and changed lists;
//! - `ingress`: a received frame, read once from Ethernet down to TCP, UDP, ICMP or the link
//!   layer ([`crate::iface`]);
//! - `coalesce`: in-order data segments of one connection in a burst handed to it as one
//!   (software GRO);
//! - `egress`: frames out: buffers, IP headers, routing, neighbor resolution, the tx queue;
//! - `loopback`: frames to our own addresses, received by the shard itself;
//! - `tcp`: demux, listeners, SYN cookies, servicing connections (one copy of the data out);
//! - `memory`: Linux's limits on what TCP holds: `tcp_mem`, the orphans, pruning;
//! - `time_wait`: compact TIME-WAIT entries (at most `max_tw_buckets`);
//! - `udp`, `icmp`: UDP sockets, ICMP errors;
//! - `api`: the socket calls the runtime makes;
//! - `inspect`: what the observability tools see.
//!
//! And the values the shard holds, each a module of its own that knows nothing of `Shard`:
//! `neighbor` (the neighbor cache), `route` (subnets and gateways), `table` (the connection and
//! listener tables) and `timer` (the timer wheel).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nic::{MacAddr, Nic, Offloads, PacketBuf};
use wire::{EthernetAddress, IpAddress, Ipv4Address, Ipv6Address};

use crate::iface::{IfaceStats, Learned};
use crate::ports::EphemeralPorts;
use crate::shard::neighbor::{NeighborCache, NeighborConfig, Update};
use crate::shard::route::Routes;
use crate::shard::table::{ConnTable, ListenTable};
use crate::shard::timer::TimerWheel;
use crate::syncookie::SynCookies;

mod api;
mod coalesce;
mod egress;
mod icmp;
mod ingress;
mod inspect;
mod loopback;
mod memory;
pub mod neighbor;
pub mod route;
mod sockets;
pub mod table;
mod tcp;
mod time_wait;
pub mod timer;
mod udp;

pub use crate::errno::Errno;
pub use api::{Buffers, Readiness};
pub use inspect::{state_name, CapturedFrame, Direction, SocketRow};
pub use memory::{TcpMem, PAGE};
pub use sockets::SocketId;
pub use udp::{Received, DATAGRAM_OVERHEAD, SPARE_DATAGRAMS};

use ingress::Transport;
use sockets::{Slot, Socket};
use tcp::ListenGroup;
use time_wait::TimeWaitEntry;
use udp::{IcmpRateLimit, UdpGroup};

/// The most frames taken from the NIC in one burst.
pub const RX_BURST: usize = 32;
/// The most bursts one poll takes while they come back full: 2048 frames, the AF_XDP fill
/// ring's worth (DPDK 22.11's af_xdp keeps 2048 buffers on it) and the rx ring's
/// (`DpdkOptions::rx_desc`). Frames left in the rx ring while the application works overflow it,
/// and the kernel drops what comes next (XDP_STATISTICS `rx_ring_full`, which DPDK does not
/// count as imissed): under connection churn an event loop's one pass per iteration took 256
/// frames and the kernel dropped a third of the segments sent to us.
pub const RX_DRAIN_BURSTS: usize = 64;
const ETH: usize = wire::ethernet::HEADER_LEN;
/// The ECN field of the IP header (RFC 3168 section 5): its mask and the codepoints we use.
const ECN_MASK: u8 = 0b11;
const ECN_NOT_ECT: u8 = 0b00;
const ECN_ECT0: u8 = 0b10;
const ECN_CE: u8 = 0b11;

/// The shard's settings.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    pub mac: MacAddr,
    pub ipv4: Option<(Ipv4Addr, u8)>,
    pub ipv6: Option<(Ipv6Addr, u8)>,
    pub gateway4: Option<Ipv4Addr>,
    pub gateway6: Option<Ipv6Addr>,
    /// Settings of every TCP connection (the MSS follows the NIC's MTU).
    pub tcp: ::tcp::Config,
    /// Half-open connections per listener before SYN cookies take over.
    pub syn_backlog: usize,
    /// Challenge ACKs (RFC 5961 section 7) all connections of the shard may send per second,
    /// Linux's `tcp_challenge_ack_limit`. As Linux does, each second's budget is drawn between
    /// half and one and a half times this, so that an off-path attacker cannot count it
    /// exactly to learn about other connections (CVE-2016-5696). `u32::MAX` (the default, as
    /// in Linux since 6.0, where it was 1000 before): no shared limit; each connection limits
    /// its own (`tcp::Config::invalid_ratelimit`), which leaks nothing about the others.
    pub challenge_ack_limit: u32,
    /// What a UDP socket's unread datagrams may cost (each its truesize: headers, payload and
    /// `udp::DATAGRAM_OVERHEAD`) before datagrams are dropped.
    pub udp_rcvbuf: usize,
    /// Connection-table capacity reserved up front (a resize at a million entries costs ~50 ms).
    pub expected_connections: usize,
    /// Keys for the ISS and timestamp hashes, the demux table, ephemeral ports and SYN cookies:
    /// random bytes from the caller (this crate has no randomness).
    pub secret: [u8; 32],
    /// The interface is shared with other processes, a queue each: answers to our ARP and
    /// neighbor solicitations may reach another process's queue, so the frames of known
    /// connections stand in for them (a TCP segment to a connection in the table, a datagram to
    /// a UDP socket connected to its sender, checksums checked): they may resolve the sender's
    /// incomplete entry or confirm a stale one with the same address, never make an entry or
    /// change an address (see `Shard::glean`).
    pub glean_neighbors: bool,
    /// This shard's place among the process's shards (`index` of `count`; 0 of 1 alone). With
    /// several, each drives one queue of the interface and the sender's per-flow hash picks the
    /// queue, so a segment may land on a shard that does not hold its connection (the replies
    /// of an active open, above all): a shard then hands a segment it would answer with a RST
    /// to the others first ([`exchange`]), shares what ARP and NDP taught it
    /// (`Shard::take_heard`), and takes only the ephemeral ports `port % count == index`, so
    /// that no two shards make the same 4-tuple.
    pub shard_index: u16,
    pub shard_count: u16,
    /// Orphans (connections the application closed that still have data or a FIN to deliver)
    /// the shard keeps: closing one more resets it (Linux `tcp_max_orphans`; counted as
    /// `TCPAbortOnMemory`).
    pub max_orphans: usize,
    /// The ring memory its TCP connections may hold (Linux `tcp_mem`, here in bytes).
    pub tcp_mem: TcpMem,
    /// TIME-WAIT entries kept: a connection that would make one more skips TIME-WAIT (Linux
    /// `tcp_max_tw_buckets`; counted as `TCPTimeWaitOverflow`).
    pub max_tw_buckets: usize,
    /// The largest listen backlog: a larger one is cut to this (Linux `net.core.somaxconn`).
    pub somaxconn: usize,
    /// The local ports of outgoing connections and of binds to port 0 (Linux
    /// `net.ipv4.ip_local_port_range`). On an interface shared with the kernel, a range the
    /// kernel does not use, so that the XDP program can tell their replies from the kernel's.
    pub ephemeral_ports: std::ops::RangeInclusive<u16>,
}

impl ShardConfig {
    pub fn new(mac: MacAddr, ipv4: Option<(Ipv4Addr, u8)>, ipv6: Option<(Ipv6Addr, u8)>, secret: [u8; 32]) -> Self {
        ShardConfig {
            mac,
            ipv4,
            ipv6,
            gateway4: None,
            gateway6: None,
            tcp: ::tcp::Config::default(),
            syn_backlog: 4096,
            challenge_ack_limit: u32::MAX,
            udp_rcvbuf: 212_992,
            expected_connections: 1024,
            secret,
            glean_neighbors: false,
            shard_index: 0,
            shard_count: 1,
            max_orphans: 131_072,
            tcp_mem: TcpMem::default(),
            max_tw_buckets: 131_072,
            somaxconn: 4096,
            ephemeral_ports: crate::ports::DEFAULT_RANGE,
        }
    }
}

/// Counters of the TCP/UDP layers (the link layer's are in [`IfaceStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShardStats {
    pub tcp_rx_segments: u64,
    pub tcp_tx_segments: u64,
    pub tcp_bad_checksum: u64,
    pub tcp_malformed: u64,
    pub tcp_rst_sent: u64,
    pub tcp_active_opens: u64,
    pub tcp_passive_opens: u64,
    pub tcp_syncookies_sent: u64,
    pub tcp_syncookies_ok: u64,
    pub tcp_syncookies_failed: u64,
    /// SYNs dropped because the listener's accept queue was full.
    pub tcp_listen_overflows: u64,
    /// Challenge ACKs not sent: within the connection's rate limit or over the shard's budget
    /// (Linux `TCPACKSkippedChallenge`).
    pub tcp_challenge_acks_skipped: u64,
    pub tcp_time_wait_entries: u64,
    /// Segments that matched no socket here, handed to the process's other shards.
    pub tcp_handed_off: u64,
    /// UDP datagrams that matched no socket here, handed to the process's other shards.
    pub udp_handed_off: u64,
    pub udp_rx_datagrams: u64,
    pub udp_tx_datagrams: u64,
    pub udp_bad_checksum: u64,
    pub udp_no_port: u64,
    pub udp_rcvbuf_errors: u64,
    /// ICMP destination unreachable sent (a UDP datagram to a port nobody holds).
    pub icmp_out_dest_unreachs: u64,
    /// ICMP errors not sent: over Linux's rate limits.
    pub icmp_out_rate_limited: u64,
    /// ICMP destination unreachable received about a UDP datagram we sent.
    pub icmp_in_dest_unreachs: u64,
    /// ICMP "fragmentation needed" / "packet too big" that lowered a connection's segment size.
    pub pmtu_reductions: u64,
    /// Such messages not believed: no such connection, or the quoted segment is not in flight.
    pub icmp_too_big_ignored: u64,
    /// Segments retransmitted (Linux `RetransSegs`).
    pub tcp_retrans_segments: u64,
    /// Retransmission timeouts, SYN and SYN-ACK timeouts included (Linux `TCPTimeouts`).
    pub tcp_timeouts: u64,
    /// Tail loss probes sent (RFC 8985; Linux `TCPLossProbes`).
    pub tcp_loss_probes: u64,
    /// Losses repaired by a tail loss probe alone (Linux `TCPLossProbeRecovery`).
    pub tcp_loss_probe_recoveries: u64,
    /// Segments RACK marked lost (RFC 8985's time-based detection; Linux has no counter).
    pub tcp_rack_lost: u64,
    /// Retransmissions RACK found lost in turn (Linux `TCPLostRetransmit`).
    pub tcp_lost_retransmits: u64,
    /// Frames not sent: no buffer in the pool.
    pub tx_no_buffer: u64,
    /// Times a connection's segments (data, FIN, RST, ACK) waited for a buffer: the pool was
    /// empty, so they stayed owed and went out at a later pass.
    pub tx_deferred: u64,
    /// Frames not sent: the NIC's tx queue stayed full.
    pub tx_queue_full: u64,
    /// Frames not sent: no route to the destination (or none from the source: a destination of
    /// the other IP family).
    pub tx_no_route: u64,
    /// Frames dropped waiting for a neighbor that never answered (or a full queue).
    pub tx_unresolved: u64,
    /// Connections given up for unanswered retransmissions, probes or keepalives (Linux
    /// `TCPAbortOnTimeout`).
    pub tcp_abort_on_timeout: u64,
    /// Connections reset for too many orphans or no memory (Linux `TCPAbortOnMemory`).
    pub tcp_abort_on_memory: u64,
    /// In-order segments dropped: no memory for a receive ring (Linux `TCPRcvQDrop`).
    pub tcp_rcvq_drops: u64,
    /// Out-of-order segments dropped: no memory for a receive ring (Linux `TCPOFODrop`).
    pub tcp_ofo_drops: u64,
    /// Prunes of a connection's receive queue (Linux `PruneCalled`; here each drops its
    /// out-of-order data, so it moves with `tcp_ofo_pruned`).
    pub tcp_prune_called: u64,
    /// Connections whose out-of-order data was dropped to free memory (Linux `OfoPruned`).
    pub tcp_ofo_pruned: u64,
    /// Times the shard went under memory pressure (Linux `TCPMemoryPressures`).
    pub tcp_memory_pressures: u64,
    /// SYNs dropped: no memory for the connection's receive ring (with the accept-queue
    /// overflows, Linux's `ListenDrops`).
    pub tcp_listen_memory_drops: u64,
    /// Connections that skipped TIME-WAIT: `max_tw_buckets` entries already (Linux
    /// `TCPTimeWaitOverflow`).
    pub tcp_time_wait_overflows: u64,
    /// Segments coalesced on receive into the one before them (software GRO, `coalesce`;
    /// Linux has no MIB counter for GRO).
    pub tcp_gro_merged: u64,
    /// Frames the shard sent to one of its own addresses and received itself, never on the
    /// NIC (`loopback`; Linux counts them on `lo`).
    pub loopback_frames: u64,
}

#[derive(Clone, Copy, Debug)]
enum TimerKey {
    /// The connection's own timers (`tcp::Connection::poll_timeout`).
    Socket(SocketId),
    /// The connection's buffer check (`tcp::BUFFERS_CHECK_NS`).
    Buffers(SocketId),
    TimeWait(u32),
}

/// The checksum work left to the stack: what the NIC does not do for it (`Nic::offloads`, read
/// once). A NIC that verifies checksums on receive must not deliver a frame it found bad. ICMP
/// (and ICMPv6, neighbor discovery) checksums are always the stack's: NICs offload TCP and UDP.
#[derive(Clone, Copy, Debug)]
struct Checksums {
    /// Check the IPv4 header checksum of what arrives.
    verify_ipv4: bool,
    /// Check the TCP and UDP checksums of what arrives.
    verify_l4: bool,
    /// Fill the IPv4 header checksum of what leaves.
    fill_ipv4: bool,
    /// Fill the TCP and UDP checksums of what leaves (else their pseudo-header sum, which is
    /// what a NIC finishing them expects).
    fill_l4: bool,
}

impl From<Offloads> for Checksums {
    fn from(o: Offloads) -> Checksums {
        Checksums {
            verify_ipv4: !o.rx_ipv4_checksum,
            verify_l4: !o.rx_l4_checksum,
            fill_ipv4: !o.tx_ipv4_checksum,
            fill_l4: !o.tx_l4_checksum,
        }
    }
}

/// One stack instance on one NIC queue.
pub struct Shard<N: Nic> {
    /// Where the shard's heap objects live: every call that may allocate for the shard runs
    /// inside this arena's scope ([`Shard::in_arena`]). `None` (the family arena is not enabled,
    /// `[runtime] share = "off"`): they live on the process heap and no scope is opened.
    arena: Option<arena::Arena>,
    nic: N,
    mac: EthernetAddress,
    ipv4: Option<Ipv4Address>,
    ipv6: Option<Ipv6Address>,
    ipv6_link_local: Ipv6Address,
    cfg: ShardConfig,
    now: u64,
    routes: Routes,
    neighbors: NeighborCache<N::Buf>,
    slots: Vec<Slot>,
    free_slots: Vec<u32>,
    conns: ConnTable<SocketId>,
    listeners: ListenTable<ListenGroup>,
    udp_binds: ListenTable<UdpGroup>,
    time_wait: Vec<Option<TimeWaitEntry>>,
    free_time_wait: Vec<u32>,
    time_wait_table: ConnTable<u32>,
    timers: TimerWheel<TimerKey>,
    ports: EphemeralPorts,
    cookies: SynCookies,
    /// The second (of the shard's clock) the challenge-ACK budget is for, and what is left.
    challenge_second: u64,
    challenge_left: u32,
    dirty: Vec<SocketId>,
    /// Connections whose segments found no frame buffer, serviced again at the next flush.
    starved: Vec<SocketId>,
    /// RSTs of connections freed before a frame buffer came for them, sent at the next flush.
    owed_rsts: Vec<(crate::shard::table::FourTuple, wire::TcpRepr)>,
    changed: Vec<SocketId>,
    /// Connections the application holds whose peer marked new urgent data (SIGURG).
    urgent: Vec<SocketId>,
    rx: Vec<N::Buf>,
    tx: Vec<N::Buf>,
    /// Frames to our own addresses, to be received by this shard (`loopback`).
    looped: Vec<N::Buf>,
    fired: Vec<TimerKey>,
    solicit: Vec<IpAddress>,
    /// A frame buffer taken for a segment that did not come, kept for the next one while the
    /// shard has connections (`poll` gives it back when none is left).
    tx_spare: Option<N::Buf>,
    /// The checksum work the NIC leaves to us.
    checksums: Checksums,
    free_datagrams: Vec<Vec<u8>>,
    icmp_limit: IcmpRateLimit,
    link_stats: IfaceStats,
    stats: ShardStats,
    /// Data segments held during a burst, to be handed to their connections coalesced.
    coalescer: coalesce::Coalescer<N::Buf>,
    /// Frames that belong to no socket here, for the process's other shards (`shard_count` > 1),
    /// with what ingress read of them.
    handed_off: Vec<(N::Buf, Transport)>,
    /// Neighbors ARP or NDP taught this shard, for the process's other shards.
    heard: Vec<Learned>,
    /// Connections the application closed that are not done yet (Linux's orphans).
    orphans: usize,
    /// Ring memory the TCP connections hold (what `tcp_mem` limits), in bytes.
    tcp_mem_used: usize,
    /// Under memory pressure: entered above `tcp_mem.pressure`, left below `tcp_mem.low`.
    mem_pressure: bool,
    /// Connections whose writer found no room for a send ring, woken when memory is freed.
    mem_waiters: Vec<SocketId>,
    /// A capture in progress (`pronghorn pcap`): one branch per burst while there is none.
    capture: Option<Box<inspect::Capture>>,
    /// Frames at the head of `tx` the capture has already seen (left there by a full queue).
    tx_captured: usize,
}

/// Between passes of the shards of one process: hands each frame a shard could not place to the
/// shard that holds its connection (back to its own when none does, which answers it with a
/// RST), and tells every shard the neighbors the others heard of. Returns the frames moved.
/// Cheap when nothing waits (two empty vectors per shard).
pub fn exchange<N: Nic>(shards: &mut [Shard<N>], now: u64) -> usize {
    let mut moved = 0;
    if shards.len() < 2 {
        return 0;
    }
    let mut frames = Vec::new();
    let mut heard: Vec<Learned> = Vec::new();
    for from in 0..shards.len() {
        shards[from].take_handed_off(&mut frames);
        shards[from].take_heard(&mut heard);
        for (buf, t) in frames.drain(..) {
            let to = (0..shards.len()).find(|&k| k != from && shards[k].holds(&t, buf.data())).unwrap_or(from);
            shards[to].receive_handed_off(buf, &t, now);
            moved += 1;
        }
        for &l in &heard {
            for (k, s) in shards.iter_mut().enumerate() {
                if k != from {
                    s.hear_from_sibling(l, now);
                }
            }
        }
        heard.clear();
    }
    moved
}

fn to_ip(a: IpAddr) -> IpAddress {
    match a {
        IpAddr::V4(v4) => IpAddress::V4(v4.into()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddress::V4(v4.into()),
            None => IpAddress::V6(v6.into()),
        },
    }
}

fn to_std(a: IpAddress) -> IpAddr {
    match a {
        IpAddress::V4(v4) => IpAddr::V4(v4.into()),
        IpAddress::V6(v6) => IpAddr::V6(v6.into()),
    }
}

fn is_unspecified(a: IpAddress) -> bool {
    match a {
        IpAddress::V4(v4) => v4.is_unspecified(),
        IpAddress::V6(v6) => v6.is_unspecified(),
    }
}

impl<N: Nic> Shard<N> {
    pub fn new(nic: N, cfg: ShardConfig) -> Self {
        let arena = arena::family();
        let _arena = arena.map(arena::Arena::enter);
        let mac = EthernetAddress(cfg.mac.0);
        let mut routes = Routes::new();
        if let Some((a, p)) = cfg.ipv4 {
            routes.add_subnet(IpAddress::V4(a.into()), p).expect("valid IPv4 subnet");
            if let Some(gw) = cfg.gateway4 {
                routes.set_gateway(IpAddress::V4(gw.into())).expect("IPv4 gateway on link");
            }
        }
        if let Some((a, p)) = cfg.ipv6 {
            routes.add_subnet(IpAddress::V6(a.into()), p).expect("valid IPv6 subnet");
            if let Some(gw) = cfg.gateway6 {
                routes.set_gateway(IpAddress::V6(gw.into())).expect("IPv6 gateway on link");
            }
        }
        let key = |i: usize| -> [u8; 16] { cfg.secret[i..i + 16].try_into().unwrap() };
        let seed = u128::from_le_bytes(key(0)) ^ 0x5eed;
        let mut tcp_cfg = cfg.tcp;
        // MSS from the MTU (the IPv4 value; IPv6 connections announce 20 bytes less, below).
        tcp_cfg.mss = tcp_cfg.mss.min(nic_mss(&nic));
        // New data in segments of several MSS wherever the NIC cuts them.
        tcp_cfg.tso = nic.offloads().tx_tcp_segmentation;
        let cfg = ShardConfig { tcp: tcp_cfg, ..cfg };
        Shard {
            mac,
            ipv4: cfg.ipv4.map(|(a, _)| a.into()),
            ipv6: cfg.ipv6.map(|(a, _)| a.into()),
            ipv6_link_local: Ipv6Address::link_local_from_ethernet(mac),
            now: 0,
            routes,
            neighbors: NeighborCache::new(NeighborConfig::default()),
            slots: Vec::new(),
            free_slots: Vec::new(),
            conns: ConnTable::with_capacity(cfg.expected_connections, seed),
            listeners: ListenTable::new(seed ^ 1),
            udp_binds: ListenTable::new(seed ^ 2),
            time_wait: Vec::new(),
            free_time_wait: Vec::new(),
            time_wait_table: ConnTable::new(seed ^ 3),
            timers: TimerWheel::new(0),
            ports: {
                let ports = EphemeralPorts::new(cfg.ephemeral_ports.clone(), key(16));
                let (index, count) = (cfg.shard_index, cfg.shard_count.max(1));
                if count > 1 {
                    ports.with_filter(move |p| p % count == index)
                } else {
                    ports
                }
            },
            cookies: SynCookies::new(key(8)),
            challenge_second: u64::MAX,
            challenge_left: 0,
            dirty: Vec::new(),
            starved: Vec::new(),
            owed_rsts: Vec::new(),
            changed: Vec::new(),
            urgent: Vec::new(),
            rx: Vec::with_capacity(RX_BURST),
            tx: Vec::with_capacity(RX_BURST),
            looped: Vec::new(),
            fired: Vec::new(),
            solicit: Vec::new(),
            tx_spare: None,
            checksums: Checksums::from(nic.offloads()),
            free_datagrams: Vec::new(),
            icmp_limit: IcmpRateLimit::new(),
            link_stats: IfaceStats::default(),
            stats: ShardStats::default(),
            coalescer: coalesce::Coalescer::default(),
            handed_off: Vec::new(),
            heard: Vec::new(),
            orphans: 0,
            tcp_mem_used: 0,
            mem_pressure: false,
            mem_waiters: Vec::new(),
            capture: None,
            tx_captured: 0,
            arena,
            nic,
            cfg,
        }
    }

    /// Opens the scope in which what this thread allocates comes from the shard's arena (the
    /// family's: a fork shares it), until the guard is dropped. Every public call that may
    /// allocate for the shard opens it first; those that fill the caller's vectors do not (the
    /// caller's memory stays the caller's), nor does anything the runtime owns.
    fn in_arena(&self) -> Option<arena::InArena> {
        self.arena.map(arena::Arena::enter)
    }

    pub fn nic(&self) -> &N {
        &self.nic
    }

    pub fn nic_mut(&mut self) -> &mut N {
        &mut self.nic
    }

    /// Link-layer counters (ARP, NDP, ICMP, drops).
    pub fn link_stats(&self) -> &IfaceStats {
        &self.link_stats
    }

    /// TCP and UDP counters.
    pub fn stats(&self) -> &ShardStats {
        &self.stats
    }

    pub fn ipv6_link_local(&self) -> Ipv6Addr {
        self.ipv6_link_local.into()
    }

    /// Sockets open (connections, listeners, UDP), TIME-WAIT entries not included.
    pub fn socket_count(&self) -> usize {
        self.slots.len() - self.free_slots.len()
    }

    /// Compact TIME-WAIT entries.
    pub fn time_wait_count(&self) -> usize {
        self.time_wait.len() - self.free_time_wait.len()
    }

    /// Connections the application closed that are not done yet (Linux's orphans, as
    /// /proc/net/sockstat counts them).
    pub fn orphan_count(&self) -> usize {
        self.orphans
    }

    /// Ring memory TCP connections hold, in bytes (what `tcp_mem` limits).
    pub fn tcp_memory(&self) -> usize {
        self.tcp_mem_used
    }

    /// Timers armed (connections and their buffer checks, TIME-WAIT entries).
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    /// Frames not sent yet: waiting for a neighbor's address, for room in the NIC's queue, or
    /// (a RST of a closed connection) for a buffer; or sent to ourselves, not received yet.
    pub fn pending_frames(&self) -> usize {
        self.neighbors.pending() + self.tx.len() + self.owed_rsts.len() + self.looped.len()
    }

    /// The earliest time `poll` has timer work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        [self.timers.next_deadline(), self.neighbors.next_deadline()].into_iter().flatten().min()
    }

    /// Fires due timers, receives until the rx ring is empty (a burst comes back short; at
    /// most [`RX_DRAIN_BURSTS`] bursts), sending what each burst caused, then sends what became
    /// due. Returns the work done (frames received + timers fired); 0 means idle.
    pub fn poll(&mut self, now: u64) -> usize {
        let _arena = self.in_arena();
        self.now = self.now.max(now);
        let mut work = self.fire_timers();
        for _ in 0..RX_DRAIN_BURSTS {
            let n = self.receive_burst();
            work += n;
            self.flush_dirty();
            self.transmit();
            if n < RX_BURST {
                break;
            }
        }
        self.expire_neighbors();
        self.transmit();
        if self.conns.is_empty() {
            // No connection left to send: the frame buffer kept ready goes back to the pool.
            self.tx_spare = None;
        }
        work
    }

    /// Takes one burst from the NIC and handles each frame. Returns how many came.
    fn receive_burst(&mut self) -> usize {
        let mut rx = std::mem::take(&mut self.rx);
        let n = self.nic.rx_burst(&mut rx, RX_BURST);
        self.link_stats.rx_frames += n as u64;
        if self.capture.is_some() {
            self.capture_received(&rx);
        }
        for buf in rx.drain(..) {
            self.receive(buf);
        }
        self.deliver_runs();
        self.rx = rx;
        n
    }

    /// Moves the frames this shard could not place to `out`, each with what ingress read of
    /// it, for the process's other shards (only with several: `ShardConfig::shard_count`).
    /// [`exchange`] offers each to the others ([`Shard::holds`]); one that none holds goes back
    /// to this shard's `receive_handed_off`, which answers it as a shard alone would (a RST).
    fn take_handed_off(&mut self, out: &mut Vec<(N::Buf, Transport)>) {
        out.append(&mut self.handed_off);
    }

    /// Handles a frame handed off by a shard of the process: one this shard holds, or its own
    /// when no shard holds it (then it answers as if alone). Sends what it caused.
    fn receive_handed_off(&mut self, buf: N::Buf, t: &Transport, now: u64) {
        let _arena = self.in_arena();
        self.now = self.now.max(now);
        self.receive_transport(buf, t);
        self.flush_dirty();
        self.transmit();
    }

    /// What ARP and NDP taught this shard since the last call, for the process's other shards:
    /// the answer to one shard's query lands on any queue.
    fn take_heard(&mut self, out: &mut Vec<Learned>) {
        out.append(&mut self.heard);
    }

    /// An ARP or NDP message another shard of the process received: this shard's cache takes
    /// it as its own would have (an incomplete entry here is resolved and its waiting frames
    /// leave; nothing is made or changed that the message itself could not).
    fn hear_from_sibling(&mut self, l: Learned, now: u64) {
        let _arena = self.in_arena();
        self.now = self.now.max(now);
        if self.routes.is_on_link(l.ip) {
            self.learn(l);
            self.transmit();
        }
    }

    /// The next hops whose addresses are being resolved (frames wait for them): on an interface
    /// shared with the kernel the answers go to the kernel, and the runtime [`Shard::hear`]s
    /// them from its neighbour table.
    pub fn unresolved_neighbors(&self) -> Vec<IpAddr> {
        self.neighbors.incomplete().map(to_std).collect()
    }

    /// The on-link neighbor `ip` asked for our address from `mac`, as its ARP request or
    /// neighbor solicitation would say: the cache makes (or updates) its entry, stale (Linux
    /// `neigh_event_ns`). Tests and tools introduce a peer this way.
    pub fn hear(&mut self, ip: IpAddr, mac: MacAddr, now: u64) {
        let _arena = self.in_arena();
        let l = Learned { ip: to_ip(ip), mac: EthernetAddress(mac.0), update: Update::REQUEST };
        self.hear_from_sibling(l, now);
    }

    /// Whether [`Shard::flush`] has anything to do: sockets with output to service, frames
    /// queued for the NIC, or RSTs and sockets that waited for a buffer.
    pub fn has_output(&self) -> bool {
        !self.dirty.is_empty()
            || !self.tx.is_empty()
            || !self.owed_rsts.is_empty()
            || !self.starved.is_empty()
            || !self.looped.is_empty()
    }

    /// Sends what application calls queued (segments of written data, ACKs of read data)
    /// without receiving or firing timers: the cheap half of `poll` for a thread that only
    /// wrote.
    pub fn flush(&mut self, now: u64) {
        let _arena = self.in_arena();
        self.now = self.now.max(now);
        self.flush_dirty();
        self.transmit();
    }

    fn fire_timers(&mut self) -> usize {
        let mut fired = std::mem::take(&mut self.fired);
        self.timers.advance(self.now, |k| fired.push(k));
        let n = fired.len();
        for key in fired.drain(..) {
            match key {
                TimerKey::Socket(id) => {
                    let now = self.now;
                    if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                        s.timer = None;
                        match s.conn.poll_timeout() {
                            // Armed lazily (`Shard::service`): the connection's deadline went
                            // away or moved later since; nothing is due yet.
                            None => continue,
                            Some(deadline) if deadline > now => {
                                let timer = self.timers.insert(deadline, TimerKey::Socket(id));
                                if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                                    s.timer = Some(timer);
                                }
                                continue;
                            }
                            Some(_) => {}
                        }
                        let orphan_queued = s.app_closed.then(|| s.conn.send_queued());
                        if orphan_queued.is_some_and(|queued| self.orphan_out_of_resources(queued)) {
                            self.abort_orphan(id);
                            continue;
                        }
                        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                            s.conn.handle_timeout(now);
                        }
                        self.mark_dirty(id);
                    }
                }
                TimerKey::Buffers(id) => self.check_buffers(id),
                TimerKey::TimeWait(i) => self.time_wait_expired(i),
            }
        }
        self.fired = fired;
        n
    }

    fn flush_dirty(&mut self) {
        self.retry_starved();
        self.service_and_loop_back();
    }

    fn service_dirty(&mut self) {
        // Handling one socket can dirty others (a listener), so loop until quiet.
        while !self.dirty.is_empty() {
            let mut dirty = std::mem::take(&mut self.dirty);
            for id in dirty.drain(..) {
                if let Some(slot) = self.slots.get_mut(id.index as usize) {
                    if slot.gen == id.gen {
                        slot.dirty = false;
                    }
                }
                self.service(id);
            }
            if self.dirty.is_empty() {
                self.dirty = dirty;
            }
        }
    }
}

fn nic_mss<N: Nic>(nic: &N) -> u16 {
    nic.mtu().saturating_sub((wire::ipv4::HEADER_LEN + wire::tcp::HEADER_LEN) as u16)
}
