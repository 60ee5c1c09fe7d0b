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
//! The shard is made of separate values, each a module of its own that knows nothing of
//! `Shard`, with private fields, passed by `&mut` where needed (smoltcp's interface is cut the
//! same way), so that a connection in hand borrows the socket set alone:
//! - `link`: the NIC queue, our addresses, the routes (`route`) and the neighbor cache
//!   (`neighbor`), frames in and out: buffers, IP headers, neighbor resolution, the tx queue;
//! - `sockets`: the socket set: the slab, socket ids, the dirty and changed lists;
//! - `timer`: the timer wheel;
//! - `table`: the connection and listener tables;
//! - `stats`: the counters of the TCP and UDP layers;
//! - `tcp_mem`, `api_types`, `observed`: the values of the settings, the socket API and the
//!   observability tools (`TcpMem`; `Readiness`, `Buffers`; socket rows, captured frames);
//! - `transport`: what ingress read of a packet to us, for the transport layers.
//!
//! And the parts that work on them, each a submodule that adds an `impl Shard` block:
//! - this module: the [`Shard`] struct, its settings, and the driver ([`Shard::poll`],
//!   [`Shard::flush`], the timers, the hand-off between the shards of one process);
//! - `ingress`: a received frame, read once from Ethernet down to TCP, UDP, ICMP or the link
//!   layer ([`crate::iface`]);
//! - `coalesce`: in-order data segments of one connection in a burst handed to it as one
//!   (software GRO);
//! - `loopback`: frames to our own addresses, received by the shard itself;
//! - `tcp`: demux, listeners, SYN cookies, servicing connections (one copy of the data out);
//! - `memory`: Linux's limits on what TCP holds: `tcp_mem`, the orphans, pruning;
//! - `time_wait`: compact TIME-WAIT entries (at most `max_tw_buckets`);
//! - `udp`, `icmp`: UDP sockets, ICMP errors;
//! - `api`: the socket calls the runtime makes;
//! - `inspect`: what the observability tools see.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use nic::{MacAddr, Nic, PacketBuf};
use wire::{EthernetAddress, IpAddress};

use crate::iface::{IfaceStats, Learned};
use crate::ports::EphemeralPorts;
use crate::shard::neighbor::Update;
use crate::shard::route::Routes;
use crate::shard::table::{ConnTable, ListenTable};
use crate::shard::timer::TimerWheel;
use crate::syncookie::SynCookies;

mod addr;
mod api;
mod api_types;
mod coalesce;
mod icmp;
mod ingress;
mod inspect;
mod link;
mod loopback;
mod memory;
pub mod neighbor;
mod observed;
pub mod route;
mod sockets;
mod stats;
pub mod table;
mod tcp;
mod tcp_mem;
mod time_wait;
pub mod timer;
mod transport;
mod udp;

pub use crate::errno::Errno;
pub use api_types::{Buffers, Readiness};
pub use link::RX_BURST;
pub use observed::{state_name, CapturedFrame, Direction, SocketRow};
pub use sockets::SocketId;
pub use stats::ShardStats;
pub use tcp_mem::{TcpMem, PAGE};
pub use udp::{Received, DATAGRAM_OVERHEAD, SPARE_DATAGRAMS};

use addr::{to_ip, to_std};
use link::{Link, ETH};

use sockets::SocketSet;
use tcp::{ListenGroup, Listener, TcpSocket};
use time_wait::TimeWaitEntry;
use transport::Transport;
use udp::{IcmpRateLimit, UdpGroup, UdpSocket};

/// The most bursts one poll takes while they come back full: 2048 frames, the AF_XDP fill
/// ring's worth (DPDK 22.11's af_xdp keeps 2048 buffers on it) and the rx ring's
/// (`DpdkOptions::rx_desc`). Frames left in the rx ring while the application works overflow it,
/// and the kernel drops what comes next (XDP_STATISTICS `rx_ring_full`, which DPDK does not
/// count as imissed): under connection churn an event loop's one pass per iteration took 256
/// frames and the kernel dropped a third of the segments sent to us.
pub const RX_DRAIN_BURSTS: usize = 64;
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

#[derive(Clone, Copy, Debug)]
enum TimerKey {
    /// The connection's own timers (`tcp::Connection::poll_timeout`).
    Socket(SocketId),
    /// The connection's buffer check (`tcp::BUFFERS_CHECK_NS`).
    Buffers(SocketId),
    TimeWait(u32),
}

/// What a slot of the socket set holds.
enum Socket {
    Tcp(Box<TcpSocket>),
    Listener(Listener),
    Udp(UdpSocket),
}

impl SocketSet<Socket> {
    /// The TCP connection `id`: EBADF for a stale id, EOPNOTSUPP for another kind of socket.
    /// Inlined: every socket call starts here, and its caller then sees the `Result` go.
    #[inline]
    fn tcp(&mut self, id: SocketId) -> Result<&mut TcpSocket, Errno> {
        match self.get_mut(id) {
            Some(Socket::Tcp(s)) => Ok(s),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }
}

/// One stack instance on one NIC queue.
pub struct Shard<N: Nic> {
    /// Where the shard's heap objects live: every call that may allocate for the shard runs
    /// inside this arena's scope ([`Shard::in_arena`]). `None` (the family arena is not enabled,
    /// `[runtime] share = "off"`): they live on the process heap and no scope is opened.
    arena: Option<arena::Arena>,
    /// The NIC queue, the addresses, routes and neighbors, frames in and out.
    link: Link<N>,
    cfg: ShardConfig,
    now: u64,
    sockets: SocketSet<Socket>,
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
    /// Connections whose segments found no frame buffer, serviced again at the next flush.
    starved: Vec<SocketId>,
    /// RSTs of connections freed before a frame buffer came for them, sent at the next flush.
    owed_rsts: Vec<(crate::shard::table::FourTuple, wire::TcpRepr)>,
    /// Connections the application holds whose peer marked new urgent data (SIGURG).
    urgent: Vec<SocketId>,
    /// When the NIC was last asked whether another process waits for its queue (`None`:
    /// never), and its answer (`tcp::io`, a SYN that finds no listener).
    successor_asked_at: Option<u64>,
    successor_waits: bool,
    /// Ports whose last listener here closed, and when (`tcp::io`: a SYN to one is left
    /// unanswered for `tcp::LISTENER_GRACE_NS`), at most `tcp::CLOSED_PORTS_KEPT`.
    closed_ports: Vec<(u16, u64)>,
    fired: Vec<TimerKey>,
    free_datagrams: Vec<Vec<u8>>,
    icmp_limit: IcmpRateLimit,
    stats: ShardStats,
    /// Data segments held during a burst, to be handed to their connections coalesced.
    coalescer: coalesce::Coalescer<N::Buf>,
    /// Frames that belong to no socket here, for the process's other shards (`shard_count` > 1),
    /// with what ingress read of them.
    handed_off: Vec<(N::Buf, Transport)>,
    /// Connections the application closed that are not done yet (Linux's orphans).
    orphans: usize,
    /// Ring memory the TCP connections hold (what `tcp_mem` limits), in bytes.
    tcp_mem_used: usize,
    /// Under memory pressure: entered above `tcp_mem.pressure`, left below `tcp_mem.low`.
    mem_pressure: bool,
    /// Connections whose writer found no room for a send ring, woken when memory is freed.
    mem_waiters: Vec<SocketId>,
    /// A capture in progress (`pronghorn pcap`): one branch per burst while there is none.
    capture: Option<Box<observed::Capture>>,
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
        // New data in segments of several MSS wherever the NIC cuts them (over IPv6 only where
        // it cuts those too: `conn_config`).
        tcp_cfg.tso = nic.offloads().tx_tcp_segmentation;
        let cfg = ShardConfig { tcp: tcp_cfg, ..cfg };
        Shard {
            link: Link::new(nic, mac, cfg.ipv4.map(|(a, _)| a.into()), cfg.ipv6.map(|(a, _)| a.into()), routes),
            now: 0,
            sockets: SocketSet::new(cfg.shard_index),
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
            starved: Vec::new(),
            owed_rsts: Vec::new(),
            urgent: Vec::new(),
            successor_asked_at: None,
            successor_waits: false,
            closed_ports: Vec::new(),
            fired: Vec::new(),
            free_datagrams: Vec::new(),
            icmp_limit: IcmpRateLimit::new(),
            stats: ShardStats::default(),
            coalescer: coalesce::Coalescer::default(),
            handed_off: Vec::new(),
            orphans: 0,
            tcp_mem_used: 0,
            mem_pressure: false,
            mem_waiters: Vec::new(),
            capture: None,
            tx_captured: 0,
            arena,
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
        self.link.nic()
    }

    pub fn nic_mut(&mut self) -> &mut N {
        self.link.nic_mut()
    }

    /// Link-layer counters (ARP, NDP, ICMP, drops).
    pub fn link_stats(&self) -> &IfaceStats {
        self.link.stats()
    }

    /// TCP and UDP counters.
    pub fn stats(&self) -> &ShardStats {
        &self.stats
    }

    pub fn ipv6_link_local(&self) -> Ipv6Addr {
        self.link.ipv6_link_local().into()
    }

    /// Sockets open (connections, listeners, UDP), TIME-WAIT entries not included.
    pub fn socket_count(&self) -> usize {
        self.sockets.len()
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
        self.link.pending() + self.owed_rsts.len()
    }

    /// Sockets whose readiness may have changed since the last call (each once).
    pub fn take_changed(&mut self, out: &mut Vec<SocketId>) {
        self.sockets.take_changed(out);
    }

    /// The earliest time `poll` has timer work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        [self.timers.next_deadline(), self.link.neighbors().next_deadline()].into_iter().flatten().min()
    }

    /// Fires due timers, receives until the rx ring is empty (a burst comes back short; at
    /// most [`RX_DRAIN_BURSTS`] bursts), sending what each burst caused, then sends what became
    /// due. Returns the work done (frames received + timers fired, and one more while frames to
    /// ourselves wait for the next flush); 0 means idle.
    // Never inlined: bench/request_cost.sh reports this function's inclusive cost by name, and
    // LTO would fold it into its callers (one call instruction per call).
    #[inline(never)]
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
        self.link.expire_neighbors(self.now, &mut self.stats);
        self.transmit();
        if self.conns.is_empty() {
            // No connection left to send: the frame buffer kept ready goes back to the pool.
            self.link.drop_tx_spare();
        }
        // Frames to ourselves that the flush's rounds left ([`loopback`]) are work for the
        // next pass: a stack thread must not go to sleep on them.
        work + usize::from(self.link.has_looped())
    }

    /// Takes one burst from the NIC and handles each frame. Returns how many came.
    fn receive_burst(&mut self) -> usize {
        let mut rx = self.link.receive_burst();
        let n = rx.len();
        if self.capture.is_some() {
            self.capture_received(&rx);
        }
        for buf in rx.drain(..) {
            self.receive(buf);
        }
        self.deliver_runs();
        self.link.give_back_rx(rx);
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
        self.link.take_heard(out);
    }

    /// An ARP or NDP message another shard of the process received: this shard's cache takes
    /// it as its own would have (an incomplete entry here is resolved and its waiting frames
    /// leave; nothing is made or changed that the message itself could not).
    fn hear_from_sibling(&mut self, l: Learned, now: u64) {
        let _arena = self.in_arena();
        self.now = self.now.max(now);
        if self.link.routes().is_on_link(l.ip) {
            self.link.learn(l, self.now);
            self.transmit();
        }
    }

    /// The next hops whose addresses are being resolved (frames wait for them): on an interface
    /// shared with the kernel the answers go to the kernel, and the runtime [`Shard::hear`]s
    /// them from its neighbour table.
    pub fn unresolved_neighbors(&self) -> Vec<IpAddr> {
        self.link.neighbors().incomplete().map(to_std).collect()
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
        self.sockets.has_dirty()
            || !self.link.queued().is_empty()
            || !self.owed_rsts.is_empty()
            || !self.starved.is_empty()
            || self.link.has_looped()
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
                    let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { continue };
                    s.timer = None;
                    match s.conn.poll_timeout() {
                        // Armed lazily (`Shard::service`): the connection's deadline went
                        // away or moved later since; nothing is due yet.
                        None => continue,
                        Some(deadline) if deadline > now => {
                            s.timer = Some(self.timers.insert(deadline, TimerKey::Socket(id)));
                            continue;
                        }
                        Some(_) => {}
                    }
                    if s.app_closed {
                        // An orphan: Linux checks its resources before its timer's work.
                        let queued = s.conn.send_queued();
                        if self.orphan_out_of_resources(queued) {
                            self.abort_orphan(id);
                            continue;
                        }
                        if let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) {
                            s.conn.handle_timeout(now);
                        }
                    } else {
                        s.conn.handle_timeout(now);
                    }
                    self.sockets.mark_dirty(id);
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
        while self.sockets.has_dirty() {
            let mut dirty = self.sockets.take_dirty();
            for id in dirty.drain(..) {
                self.sockets.unmark_dirty(id);
                self.service(id);
            }
            self.sockets.return_dirty(dirty);
        }
    }

    /// Hands the queued frames to the NIC (the capture sees them first).
    fn transmit(&mut self) {
        if self.link.queued().is_empty() {
            return;
        }
        if self.capture.is_some() {
            self.capture_sending();
        }
        let sent = self.link.transmit(&mut self.stats);
        self.tx_captured = self.tx_captured.saturating_sub(sent).min(self.link.queued().len());
    }
}

fn nic_mss<N: Nic>(nic: &N) -> u16 {
    nic.mtu().saturating_sub((wire::ipv4::HEADER_LEN + wire::tcp::HEADER_LEN) as u16)
}
