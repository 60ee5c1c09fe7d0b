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

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::{MacAddr, Nic, PacketBuf};
use tcp::{Connection, CookieOptions, Event as TcpEvent, State as TcpState, TimeWait, TimeWaitAction};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr,
    Ipv6UpperLayer, NdiscRepr, TcpFlags, TcpPacket, TcpRepr,
};

use crate::iface::{self, IfaceStats, Learned, Verdict};
use crate::neighbor::{multicast_mac, Lookup, NeighborCache, NeighborConfig, NeighborState};
use crate::ports::EphemeralPorts;
use crate::route::Routes;
use crate::syncookie::{siphash24, SynCookies};
use crate::table::{ConnTable, FourTuple, ListenTable};
use crate::timer::{TimerHandle, TimerWheel};

mod icmp;
mod inspect;
mod udp;
use icmp::IcmpErrorKind;
pub use inspect::{state_name, CapturedFrame, Direction, SocketRow};
pub use udp::Received;
use udp::{IcmpRateLimit, UdpGroup, UdpSocket};

/// The most frames taken from the NIC in one poll.
pub const RX_BURST: usize = 32;
const ETH: usize = wire::ethernet::HEADER_LEN;
const TTL: u8 = 64;
/// The ECN field of the IP header (RFC 3168 section 5): its mask and the codepoints we use.
const ECN_MASK: u8 = 0b11;
const ECN_NOT_ECT: u8 = 0b00;
const ECN_ECT0: u8 = 0b10;
const ECN_CE: u8 = 0b11;
/// Frames waiting for room in the NIC's tx queue before new ones are dropped.
const TX_BACKLOG: usize = 8192;

/// A Linux errno value, as the socket calls return them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Errno(pub i32);

impl Errno {
    pub const EBADF: Errno = Errno(9);
    pub const EAGAIN: Errno = Errno(11);
    pub const EACCES: Errno = Errno(13);
    pub const EINVAL: Errno = Errno(22);
    pub const EPIPE: Errno = Errno(32);
    pub const EDESTADDRREQ: Errno = Errno(89);
    pub const EMSGSIZE: Errno = Errno(90);
    pub const ENOPROTOOPT: Errno = Errno(92);
    pub const EOPNOTSUPP: Errno = Errno(95);
    pub const EAFNOSUPPORT: Errno = Errno(97);
    pub const EADDRINUSE: Errno = Errno(98);
    pub const EADDRNOTAVAIL: Errno = Errno(99);
    pub const ENETUNREACH: Errno = Errno(101);
    pub const ECONNRESET: Errno = Errno(104);
    pub const EISCONN: Errno = Errno(106);
    pub const ENOTCONN: Errno = Errno(107);
    pub const ETIMEDOUT: Errno = Errno(110);
    pub const ECONNREFUSED: Errno = Errno(111);
    pub const EHOSTUNREACH: Errno = Errno(113);
}

impl From<tcp::Error> for Errno {
    fn from(e: tcp::Error) -> Errno {
        Errno(e.errno())
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", std::io::Error::from_raw_os_error(self.0))
    }
}

/// A socket of this shard. Stale ids (of a freed socket) are rejected with EBADF.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketId {
    index: u32,
    gen: u32,
    /// The shard of the process it belongs to (`ShardConfig::index`).
    shard: u16,
}

impl SocketId {
    /// The shard that holds this socket (0 unless the process runs several).
    pub fn shard(self) -> usize {
        self.shard as usize
    }

    /// The socket's slot: small and dense (freed slots are reused), so callers can keep
    /// per-socket state in a vector indexed by it and check the whole id on lookup.
    pub fn index(self) -> usize {
        self.index as usize
    }
}

/// What a socket is ready for, in epoll's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// EPOLLIN: data, a connection to accept, end of stream or an error.
    pub readable: bool,
    /// EPOLLOUT.
    pub writable: bool,
    /// EPOLLRDHUP: the peer closed its sending half.
    pub read_closed: bool,
    /// EPOLLHUP: both halves are done.
    pub hangup: bool,
    /// EPOLLERR: an error is pending (SO_ERROR).
    pub error: bool,
    /// EPOLLPRI: urgent data waits to be read with MSG_OOB.
    pub urgent: bool,
}

/// SO_RCVBUF and SO_SNDBUF as a connection applies them, in bytes of data: what its receive
/// buffer holds (the most it advertises; before the handshake also what chooses its window
/// scale) and what its send buffer takes. `None` keeps the shard's (`ShardConfig::tcp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub recv: Option<u32>,
    pub send: Option<u32>,
}

/// The shard's settings.
#[derive(Clone, Debug)]
pub struct ShardConfig {
    pub mac: MacAddr,
    pub ipv4: Option<(Ipv4Addr, u8)>,
    pub ipv6: Option<(Ipv6Addr, u8)>,
    pub gateway4: Option<Ipv4Addr>,
    pub gateway6: Option<Ipv6Addr>,
    /// Settings of every TCP connection (the MSS follows the NIC's MTU).
    pub tcp: tcp::Config,
    /// Half-open connections per listener before SYN cookies take over.
    pub syn_backlog: usize,
    /// Challenge ACKs (RFC 5961 section 7) all connections of the shard may send per second,
    /// Linux's `tcp_challenge_ack_limit`. As Linux does, each second's budget is drawn between
    /// half and one and a half times this, so that an off-path attacker cannot count it
    /// exactly to learn about other connections (CVE-2016-5696). `u32::MAX` (the default, as
    /// in Linux since 6.0, where it was 1000 before): no shared limit; each connection limits
    /// its own (`tcp::Config::invalid_ratelimit`), which leaks nothing about the others.
    pub challenge_ack_limit: u32,
    /// Bytes a UDP socket may hold unread before datagrams are dropped.
    pub udp_rcvbuf: usize,
    /// Connection-table capacity reserved up front (a resize at a million entries costs ~50 ms).
    pub expected_connections: usize,
    /// Keys for the ISS and timestamp hashes, the demux table, ephemeral ports and SYN cookies:
    /// random bytes from the caller (this crate has no randomness).
    pub secret: [u8; 32],
    /// The interface is shared with other processes, a queue each: answers to our ARP and
    /// neighbor solicitations may reach another process's queue, so an on-link sender of TCP or
    /// UDP to us that the cache does not know is learned from the frame (see `Shard::glean`).
    pub glean_neighbors: bool,
    /// This shard's place among the process's shards (`index` of `count`; 0 of 1 alone). With
    /// several, each drives one queue of the interface and the sender's per-flow hash picks the
    /// queue, so a segment may land on a shard that does not hold its connection (the replies
    /// of an active open, above all): a shard then hands a segment it would answer with a RST
    /// to the others first ([`Shard::take_handed_off`]), shares what ARP and NDP taught it
    /// ([`Shard::take_heard`]), and takes only the ephemeral ports `port % count == index`, so
    /// that no two shards make the same 4-tuple.
    pub shard_index: u16,
    pub shard_count: u16,
}

impl ShardConfig {
    pub fn new(mac: MacAddr, ipv4: Option<(Ipv4Addr, u8)>, ipv6: Option<(Ipv6Addr, u8)>, secret: [u8; 32]) -> Self {
        ShardConfig {
            mac,
            ipv4,
            ipv6,
            gateway4: None,
            gateway6: None,
            tcp: tcp::Config::default(),
            syn_backlog: 4096,
            challenge_ack_limit: u32::MAX,
            udp_rcvbuf: 212_992,
            expected_connections: 1024,
            secret,
            glean_neighbors: false,
            shard_index: 0,
            shard_count: 1,
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
    /// Frames not sent: the NIC's tx queue stayed full.
    pub tx_queue_full: u64,
    /// Frames not sent: no route to the destination.
    pub tx_no_route: u64,
    /// Frames dropped waiting for a neighbor that never answered (or a full queue).
    pub tx_unresolved: u64,
}

struct TcpSocket {
    conn: Connection,
    tuple: FourTuple,
    timer: Option<TimerHandle>,
    /// The listener this passive connection came from, until it is accepted.
    listener: Option<SocketId>,
    /// Counted in the listener's half-open total (SYN-RECEIVED, not a cookie).
    half_open: bool,
    /// The application holds it (connected, or accepted).
    owned: bool,
    /// The application closed it: free it once the connection is over.
    app_closed: bool,
    /// Readiness when last reported, to report every change exactly once.
    reported: Readiness,
    /// Data (or the end of stream) arrivals so far (see [`Shard::arrivals`]).
    arrivals: u32,
    /// TCP_NODELAY as the application set it.
    nodelay: bool,
    /// The connection's counters already added to `ShardStats`.
    counted: tcp::Counters,
}

impl TcpSocket {
    fn new(conn: Connection, tuple: FourTuple, listener: Option<SocketId>, half_open: bool, owned: bool) -> TcpSocket {
        TcpSocket {
            conn,
            tuple,
            timer: None,
            listener,
            half_open,
            owned,
            app_closed: false,
            reported: Readiness::default(),
            arrivals: 0,
            nodelay: false,
            counted: tcp::Counters::default(),
        }
    }
}

/// The listeners of one local address: one, or several that all set SO_REUSEPORT.
struct ListenGroup {
    reuseport: bool,
    members: Vec<SocketId>,
}

struct Listener {
    local: (IpAddress, u16),
    backlog: usize,
    half_open: usize,
    accept_queue: VecDeque<SocketId>,
    /// Connections queued so far (see [`Shard::arrivals`]).
    arrivals: u32,
    /// The application waits on it (see [`Shard::tcp_listener_watched`]).
    watched: bool,
    /// Its connections' buffers, from the SYN on (Linux's children inherit the listener's).
    buffers: Buffers,
}

/// Where a TCP or UDP segment to us lies in its frame, and what its IP header says.
struct Transport {
    src: IpAddress,
    dst: IpAddress,
    proto: IpProtocol,
    /// The transport segment's bounds in the frame.
    start: usize,
    end: usize,
    /// The IP header's ECN field (RFC 3168 section 5).
    ecn: u8,
}

enum Socket {
    Tcp(Box<TcpSocket>),
    Listener(Listener),
    Udp(UdpSocket),
}

struct Slot {
    gen: u32,
    socket: Option<Socket>,
    dirty: bool,
    changed: bool,
}

struct TimeWaitEntry {
    tw: TimeWait,
    tuple: FourTuple,
    timer: TimerHandle,
}

#[derive(Clone, Copy, Debug)]
enum TimerKey {
    Socket(SocketId),
    TimeWait(u32),
}

/// One stack instance on one NIC queue.
pub struct Shard<N: Nic> {
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
    changed: Vec<SocketId>,
    /// Connections the application holds whose peer marked new urgent data (SIGURG).
    urgent: Vec<SocketId>,
    rx: Vec<N::Buf>,
    tx: Vec<N::Buf>,
    fired: Vec<TimerKey>,
    solicit: Vec<IpAddress>,
    scratch: Vec<u8>,
    free_datagrams: Vec<Vec<u8>>,
    icmp_limit: IcmpRateLimit,
    link_stats: IfaceStats,
    stats: ShardStats,
    /// Frames that belong to no socket here, for the process's other shards (`shard_count` > 1).
    handed_off: Vec<N::Buf>,
    /// While a frame is handled: it may be handed off (several shards, and it was not handed
    /// off already); then `tcp_input` sets `hand_off_this` instead of answering it with a RST.
    may_hand_off: bool,
    hand_off_this: bool,
    /// Neighbors ARP or NDP taught this shard, for the process's other shards.
    heard: Vec<Learned>,
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
    let mut heard = Vec::new();
    for from in 0..shards.len() {
        shards[from].take_handed_off(&mut frames);
        shards[from].take_heard(&mut heard);
        for buf in frames.drain(..) {
            let to = (0..shards.len()).find(|&k| k != from && shards[k].holds_frame(buf.data())).unwrap_or(from);
            shards[to].receive_handed_off(buf, now);
            moved += 1;
        }
        for &(ip, mac) in &heard {
            for (k, s) in shards.iter_mut().enumerate() {
                if k != from {
                    s.hear(ip, mac, now);
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
                let ports = EphemeralPorts::new(crate::ports::DEFAULT_RANGE, key(16));
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
            changed: Vec::new(),
            urgent: Vec::new(),
            rx: Vec::with_capacity(RX_BURST),
            tx: Vec::with_capacity(RX_BURST),
            fired: Vec::new(),
            solicit: Vec::new(),
            scratch: vec![0; 65536],
            free_datagrams: Vec::new(),
            icmp_limit: IcmpRateLimit::new(),
            link_stats: IfaceStats::default(),
            stats: ShardStats::default(),
            handed_off: Vec::new(),
            may_hand_off: false,
            hand_off_this: false,
            heard: Vec::new(),
            capture: None,
            tx_captured: 0,
            nic,
            cfg,
        }
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

    /// Timers armed (connections, TIME-WAIT entries).
    pub fn timer_count(&self) -> usize {
        self.timers.len()
    }

    /// Frames held waiting for a neighbor's address.
    pub fn pending_frames(&self) -> usize {
        self.neighbors.pending() + self.tx.len()
    }

    /// The earliest time `poll` has timer work to do.
    pub fn next_deadline(&self) -> Option<u64> {
        [self.timers.next_deadline(), self.neighbors.next_deadline()].into_iter().flatten().min()
    }

    // ------------------------------------------------------------------------------------------
    // The driver
    // ------------------------------------------------------------------------------------------

    /// Fires due timers, receives one burst, sends what became due. Returns the work done
    /// (frames received + timers fired); 0 means idle.
    pub fn poll(&mut self, now: u64) -> usize {
        self.now = self.now.max(now);
        let mut work = self.fire_timers();
        let mut rx = std::mem::take(&mut self.rx);
        let n = self.nic.rx_burst(&mut rx, RX_BURST);
        self.link_stats.rx_frames += n as u64;
        if self.capture.is_some() {
            self.capture_received(&rx);
        }
        for buf in rx.drain(..) {
            self.handle_frame(buf, false);
        }
        self.rx = rx;
        work += n;
        self.flush_dirty();
        self.expire_neighbors();
        self.transmit();
        work
    }

    /// Moves the frames this shard could not place to `out`, for the process's other shards
    /// (only with several: `ShardConfig::shard_count`). Offer each to the others with
    /// [`Shard::holds_frame`] and [`Shard::receive_handed_off`]; one that none holds goes back
    /// to this shard's `receive_handed_off`, which answers it as a shard alone would (a RST).
    pub fn take_handed_off(&mut self, out: &mut Vec<N::Buf>) {
        out.append(&mut self.handed_off);
    }

    /// Whether this shard holds the connection (or TIME-WAIT entry) a handed-off TCP frame is for.
    pub fn holds_frame(&self, frame: &[u8]) -> bool {
        let Some(t) = self.transport(frame) else { return false };
        let Some(seg) = frame.get(t.start..t.end).filter(|s| s.len() >= 4) else { return false };
        let sport = u16::from_be_bytes([seg[0], seg[1]]);
        let dport = u16::from_be_bytes([seg[2], seg[3]]);
        if t.proto == IpProtocol::Udp {
            return self.holds_datagram((t.dst, dport), (t.src, sport));
        }
        let tuple = FourTuple::new((t.dst, dport), (t.src, sport));
        self.conns.contains_key(&tuple) || self.time_wait_table.contains_key(&tuple)
    }

    /// Handles a frame handed off by a shard of the process: one this shard holds, or its own
    /// when no shard holds it (then it answers as if alone). Sends what it caused.
    pub fn receive_handed_off(&mut self, buf: N::Buf, now: u64) {
        self.now = self.now.max(now);
        self.handle_frame(buf, true);
        self.flush_dirty();
        self.transmit();
    }

    /// The neighbors ARP and NDP taught this shard since the last call (address, link address),
    /// for the process's other shards: the answer to one shard's query lands on any queue.
    pub fn take_heard(&mut self, out: &mut Vec<(IpAddr, MacAddr)>) {
        out.extend(self.heard.drain(..).map(|l| (to_std(l.ip), MacAddr(l.mac.0))));
    }

    /// Another shard of the process learned that `ip` is at `mac`: an incomplete entry here is
    /// resolved (its waiting frames leave), a stale one confirmed, an unknown one learned.
    pub fn hear(&mut self, ip: IpAddr, mac: MacAddr, now: u64) {
        self.now = self.now.max(now);
        let ip = to_ip(ip);
        if self.routes.is_on_link(ip) {
            self.glean_address(ip, EthernetAddress(mac.0));
            self.transmit();
        }
    }

    /// Sends what application calls queued (segments of written data, ACKs of read data)
    /// without receiving or firing timers: the cheap half of `poll` for a thread that only
    /// wrote.
    pub fn flush(&mut self, now: u64) {
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
                        s.conn.handle_timeout(now);
                        self.mark_dirty(id);
                    }
                }
                TimerKey::TimeWait(i) => {
                    if let Some(e) = self.time_wait[i as usize].take() {
                        self.time_wait_table.remove(&e.tuple);
                        self.free_time_wait.push(i);
                    }
                }
            }
        }
        self.fired = fired;
        n
    }

    fn expire_neighbors(&mut self) {
        let mut solicit = std::mem::take(&mut self.solicit);
        let before = self.neighbors.stats().drop_unresolved;
        self.neighbors.expire(self.now, |ip| solicit.push(ip));
        self.stats.tx_unresolved += self.neighbors.stats().drop_unresolved - before;
        for ip in solicit.drain(..) {
            self.send_solicitation(ip, None);
        }
        self.solicit = solicit;
    }

    fn transmit(&mut self) {
        if self.tx.is_empty() {
            return;
        }
        if self.capture.is_some() {
            self.capture_sending();
        }
        let sent = self.nic.tx_burst(&mut self.tx);
        self.link_stats.tx_frames += sent as u64;
        if self.tx.len() > TX_BACKLOG {
            let excess = self.tx.len() - TX_BACKLOG;
            self.stats.tx_queue_full += excess as u64;
            self.tx.truncate(TX_BACKLOG);
        }
        self.tx_captured = self.tx_captured.saturating_sub(sent).min(self.tx.len());
    }

    // ------------------------------------------------------------------------------------------
    // Receive
    // ------------------------------------------------------------------------------------------

    /// `last_stop`: the process's other shards have declined the frame (it was handed off).
    fn handle_frame(&mut self, mut buf: N::Buf, last_stop: bool) {
        // TCP and UDP to one of our addresses go up the stack; everything else is the link
        // layer's (ARP, NDP, ICMP) and answered in place.
        if let Some(t) = self.transport(buf.data()) {
            if self.cfg.glean_neighbors {
                self.glean(t.src, buf.data());
            }
            let seg = &buf.data()[t.start..t.end];
            match t.proto {
                IpProtocol::Tcp => {
                    self.may_hand_off = self.cfg.shard_count > 1 && !last_stop;
                    self.tcp_input(t.src, t.dst, seg, t.ecn);
                    self.may_hand_off = false;
                    if std::mem::take(&mut self.hand_off_this) {
                        self.stats.tcp_handed_off += 1;
                        self.handed_off.push(buf);
                    }
                }
                _ => {
                    self.may_hand_off = self.cfg.shard_count > 1 && !last_stop;
                    self.udp_input(t.src, t.dst, &buf.data()[ETH..t.end], seg);
                    self.may_hand_off = false;
                    if std::mem::take(&mut self.hand_off_this) {
                        self.stats.udp_handed_off += 1;
                        self.handed_off.push(buf);
                    }
                }
            }
            return;
        }
        if let Some(err) = self.icmp_error(buf.data()) {
            let ports = err.ports();
            match (err.kind, err.proto, ports) {
                (IcmpErrorKind::TooBig { mtu }, IpProtocol::Tcp, Some((sport, dport))) if err.data.len() >= 8 => {
                    let d = err.data;
                    let seq = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
                    let headers = (err.ip_header_len + wire::tcp::HEADER_LEN) as u32;
                    let mss = mtu.saturating_sub(headers).min(u32::from(u16::MAX)) as u16;
                    let tuple = FourTuple::new((err.src, sport), (err.dst, dport));
                    self.path_mtu(tuple, mss, seq);
                    return;
                }
                (IcmpErrorKind::Unreachable(errno), IpProtocol::Udp, Some((sport, dport))) => {
                    let (local, remote) = ((err.src, sport), (err.dst, dport));
                    self.udp_unreachable(local, remote, errno);
                    return;
                }
                _ => {}
            }
        }
        let mut learned = None;
        let verdict = iface::handle_frame(
            self.mac,
            self.ipv4,
            self.ipv6,
            self.ipv6_link_local,
            &mut self.link_stats,
            buf.data_mut(),
            &mut learned,
        );
        if let Some(l) = learned {
            if self.cfg.shard_count > 1 {
                self.heard.push(l);
            }
            self.learn(l);
        }
        match verdict {
            Verdict::Reply(len) => {
                buf.set_len(len);
                self.tx.push(buf);
            }
            Verdict::Drop(d) => self.link_stats.count_drop(d),
        }
    }

    /// For a TCP or UDP packet to us: where its transport segment is, and what the IP header
    /// says about it.
    fn transport(&self, frame: &[u8]) -> Option<Transport> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        if eth.dst_addr() != self.mac && !eth.dst_addr().is_multicast() {
            return None;
        }
        match eth.ethertype() {
            EtherType::Ipv4 => {
                let ours = self.ipv4?;
                let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
                if ip.dst_addr() != ours || ip.is_fragment() {
                    return None;
                }
                let proto = ip.next_header();
                if proto != IpProtocol::Tcp && proto != IpProtocol::Udp {
                    return None;
                }
                // The header checksum: a bad one goes to the link layer, which counts it.
                Ipv4Repr::parse(&ip, true).ok()?;
                Some(Transport {
                    src: IpAddress::V4(ip.src_addr()),
                    dst: IpAddress::V4(ours),
                    proto,
                    start: ETH + ip.header_len() as usize,
                    end: ETH + ip.total_len() as usize,
                    ecn: ip.ecn(),
                })
            }
            EtherType::Ipv6 => {
                let ours = self.ipv6?;
                let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
                let dst = ip.dst_addr();
                if dst != ours && dst != self.ipv6_link_local {
                    return None;
                }
                let repr = Ipv6Repr::parse(&ip).ok()?;
                let Ipv6UpperLayer::Protocol { protocol, offset } = ip.upper_layer().ok()? else { return None };
                if protocol != IpProtocol::Tcp && protocol != IpProtocol::Udp {
                    return None;
                }
                let start = ETH + wire::ipv6::HEADER_LEN + offset;
                let end = ETH + wire::ipv6::HEADER_LEN + repr.payload_len;
                (start <= end).then_some(Transport {
                    src: IpAddress::V6(repr.src_addr),
                    dst: IpAddress::V6(dst),
                    proto: protocol,
                    start,
                    end,
                    ecn: ip.traffic_class() & ECN_MASK,
                })
            }
            _ => None,
        }
    }

    fn path_mtu(&mut self, tuple: FourTuple, mss: u16, seq: u32) {
        let Some(&id) = self.conns.get(&tuple) else {
            self.stats.icmp_too_big_ignored += 1;
            return;
        };
        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            if s.conn.path_mtu_reduced(mss, seq) {
                self.stats.pmtu_reductions += 1;
                self.mark_dirty(id);
            } else {
                self.stats.icmp_too_big_ignored += 1;
            }
        }
    }

    /// An on-link `src` sent us `frame` (a shared interface: see `ShardConfig::glean_neighbors`).
    /// The answers to our own ARP requests and probes may go to another process's queue, so the
    /// peer's own frames stand in for them: an unknown sender is learned (unconfirmed), an
    /// incomplete entry is resolved with the frame's source (its waiting packets leave), and a
    /// stale entry with that address is confirmed. Otherwise an entry that expired would be
    /// probed, fail when the answer went elsewhere, and hold our packets for a second or more
    /// (seen as SYN-ACKs that never came, with two nginx workers).
    fn glean(&mut self, src: IpAddress, frame: &[u8]) {
        if !self.routes.is_on_link(src) {
            return;
        }
        let mut mac = [0u8; 6];
        mac.copy_from_slice(&frame[6..12]);
        if mac[0] & 1 != 0 {
            return;
        }
        self.glean_address(src, EthernetAddress(mac));
    }

    fn glean_address(&mut self, src: IpAddress, mac: EthernetAddress) {
        match self.neighbors.state(src, self.now) {
            Some((NeighborState::Reachable, Some(m))) if m == mac => {}
            Some((NeighborState::Stale, Some(m))) if m == mac => self.neighbors.confirm(src, self.now),
            Some((NeighborState::Incomplete, _)) => self.learn(Learned { ip: src, mac, answer: true }),
            _ => self.learn(Learned { ip: src, mac, answer: false }),
        }
    }

    fn learn(&mut self, l: Learned) {
        let mut ready = Vec::new();
        if l.answer {
            ready.extend(self.neighbors.fill(l.ip, l.mac, self.now));
        } else {
            ready.extend(self.neighbors.learn(l.ip, l.mac, self.now));
        }
        for mut frame in ready {
            EthernetFrame::new_unchecked(frame.data_mut()).set_dst_addr(l.mac);
            self.tx.push(frame);
        }
    }

    /// A TCP segment to us; `ecn` is the ECN field of its IP header.
    fn tcp_input(&mut self, src: IpAddress, dst: IpAddress, seg: &[u8], ecn: u8) {
        let Ok(packet) = TcpPacket::new_checked(seg) else {
            self.stats.tcp_malformed += 1;
            return;
        };
        let repr = match TcpRepr::parse(&packet, &src, &dst, true) {
            Ok(r) => r,
            Err(wire::Error::Checksum) => {
                self.stats.tcp_bad_checksum += 1;
                return;
            }
            Err(_) => {
                self.stats.tcp_malformed += 1;
                return;
            }
        };
        self.stats.tcp_rx_segments += 1;
        let payload = &seg[packet.header_len() as usize..][..repr.payload_len];
        let tuple = FourTuple::new((dst, repr.dst_port), (src, repr.src_port));

        if let Some(&id) = self.conns.get(&tuple) {
            let now = self.now;
            let Some(Socket::Tcp(s)) = self.socket_mut(id) else { return };
            s.conn.handle_segment_ce(now, &repr, payload, ecn == ECN_CE);
            if s.conn.challenge_ack_pending() && !self.take_challenge_ack() {
                if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                    s.conn.cancel_challenge_ack();
                }
            }
            self.mark_dirty(id);
            return;
        }
        let mut reopen_iss = None;
        if let Some(&i) = self.time_wait_table.get(&tuple) {
            let entry = self.time_wait[i as usize].as_mut().expect("TIME-WAIT table points at a live entry");
            match entry.tw.handle_segment(self.now, &repr) {
                TimeWaitAction::Ack(ack) => return self.send_tcp(&tuple, &ack, &[]),
                TimeWaitAction::Ignore => return,
                TimeWaitAction::Reopen => {
                    reopen_iss = Some(entry.tw.next_iss());
                    self.free_time_wait_entry(i);
                }
            }
        }
        // RFC 9293 3.10.7.2, LISTEN: first, a RST is ignored (a SYN with RST too, as in Linux);
        // second, an ACK is answered with a RST (once no SYN cookie matches it); third, a SYN
        // opens a connection; anything else has no ACK and is dropped.
        let rst = repr.flags.contains(TcpFlags::RST);
        let is_syn = repr.flags.contains(TcpFlags::SYN) && repr.ack_number.is_none() && !rst;
        let is_ack = repr.ack_number.is_some() && !repr.flags.contains(TcpFlags::SYN) && !rst;
        if let Some(lid) = self.listeners.lookup((dst, repr.dst_port)).map(|g| self.group_member(g, &tuple)) {
            if is_syn {
                // A SYN that is itself ECN-capable (or CE-marked) is no ECN-setup SYN (RFC 3168
                // section 6.1.1 forbids ECT on SYNs; Linux `tcp_ecn_create_request`).
                let mut syn = repr;
                if ecn != ECN_NOT_ECT {
                    syn.flags.remove(TcpFlags::ECE | TcpFlags::CWR);
                }
                return self.syn_to_listener(lid, tuple, &syn, reopen_iss);
            }
            if is_ack && self.cookie_ack(lid, tuple, &repr, payload) {
                return;
            }
            if repr.ack_number.is_none() {
                return;
            }
        }
        if self.may_hand_off {
            // Another shard of the process may hold the connection: it decides.
            self.hand_off_this = true;
            return;
        }
        if let Some(rst) = tcp::rst_for_unmatched(&repr, payload.len()) {
            self.stats.tcp_rst_sent += 1;
            self.send_tcp(&tuple, &rst, &[]);
        }
    }

    /// The listener of `group` that takes connection `tuple`: with SO_REUSEPORT, a keyed hash
    /// of the 4-tuple spreads connections over the members the application waits on (all of
    /// them while it waits on none), and sends a SYN-cookie ACK to the member its SYN went to
    /// (the group being unchanged).
    fn group_member(&self, group: &ListenGroup, tuple: &FourTuple) -> SocketId {
        if group.members.len() == 1 {
            return group.members[0];
        }
        let watched = |id: &&SocketId| matches!(self.socket(**id), Some(Socket::Listener(l)) if l.watched);
        let n = group.members.iter().filter(watched).count();
        let key: [u8; 16] = self.cfg.secret[4..20].try_into().unwrap();
        let hash = siphash24(&key, &tuple_bytes(tuple));
        if n == 0 {
            return group.members[(hash % group.members.len() as u64) as usize];
        }
        *group.members.iter().filter(watched).nth((hash % n as u64) as usize).unwrap()
    }

    /// The application waits for connections on listener `id` (epoll, poll, accept). Among
    /// SO_REUSEPORT listeners of one address, only those it waits on get new connections: a
    /// process that inherited every worker's listener through fork (nginx `listen ...
    /// reuseport`) serves one of them, and its siblings, each with its own shard, the others.
    pub fn tcp_listener_watched(&mut self, id: SocketId) {
        if let Some(Socket::Listener(l)) = self.socket_mut(id) {
            l.watched = true;
        }
    }

    fn syn_to_listener(&mut self, lid: SocketId, tuple: FourTuple, syn: &TcpRepr, iss: Option<u32>) {
        let syn_backlog = self.cfg.syn_backlog;
        let buffers = match self.socket(lid) {
            Some(Socket::Listener(l)) => l.buffers,
            _ => return,
        };
        let cfg = self.conn_config(&tuple, buffers);
        let Some(Socket::Listener(l)) = self.socket_mut(lid) else { return };
        if l.accept_queue.len() >= l.backlog {
            self.stats.tcp_listen_overflows += 1;
            return;
        }
        if l.half_open >= syn_backlog {
            // SYN flood (or just a burst): answer statelessly. The cookie keeps the MSS; the
            // other options are not offered, nor ECN, so the SYN-ACK promises nothing we cannot
            // keep.
            let (isn, mss) = self.cookies.encode(&tuple, syn.seq_number, syn.max_seg_size.unwrap_or(536), self.now);
            let stripped = TcpRepr {
                max_seg_size: Some(mss),
                window_scale: None,
                sack_permitted: false,
                timestamp: None,
                flags: syn.flags - (TcpFlags::ECE | TcpFlags::CWR),
                ..*syn
            };
            let mut c = Connection::accept(&cfg, &stripped, isn, self.now);
            if let Some(synack) = c.poll_transmit(self.now, &mut []) {
                self.stats.tcp_syncookies_sent += 1;
                self.send_tcp(&tuple, &synack, &[]);
            }
            return;
        }
        l.half_open += 1;
        let iss = iss.unwrap_or_else(|| self.iss(&tuple));
        let conn = Connection::accept(&cfg, syn, iss, self.now);
        self.stats.tcp_passive_opens += 1;
        self.add_connection(TcpSocket::new(conn, tuple, Some(lid), true, false));
    }

    /// Whether one more challenge ACK may go out now (RFC 5961 section 7): one budget per second
    /// of the shard's clock for all its connections, drawn from the keyed hash of the second
    /// between half and one and a half times `challenge_ack_limit` (see [`ShardConfig`]).
    fn take_challenge_ack(&mut self) -> bool {
        let limit = self.cfg.challenge_ack_limit;
        if limit == u32::MAX {
            return true;
        }
        let second = self.now / 1_000_000_000;
        if second != self.challenge_second {
            self.challenge_second = second;
            let key: [u8; 16] = self.cfg.secret[8..24].try_into().unwrap();
            let mut msg = *b"challenge-ack/second";
            msg[12..].copy_from_slice(&second.to_le_bytes());
            let draw = siphash24(&key, &msg) % u64::from(limit.max(1));
            let budget = u64::from(limit.div_ceil(2)) + draw;
            self.challenge_left = budget.min(u64::from(u32::MAX)) as u32;
        }
        if self.challenge_left == 0 {
            self.stats.tcp_challenge_acks_skipped += 1;
            return false;
        }
        self.challenge_left -= 1;
        true
    }

    /// An ACK at a listener with no connection: the third step of a SYN-cookie handshake?
    fn cookie_ack(&mut self, lid: SocketId, tuple: FourTuple, ack: &TcpRepr, payload: &[u8]) -> bool {
        let Some(ack_number) = ack.ack_number else { return false };
        let tsecr = ack.timestamp.map(|(_, ecr)| ecr);
        let Some(info) =
            self.cookies.check(&tuple, ack_number.wrapping_sub(1), ack.seq_number.wrapping_sub(1), tsecr, self.now)
        else {
            self.stats.tcp_syncookies_failed += 1;
            return false;
        };
        match self.socket(lid) {
            Some(Socket::Listener(l)) if l.accept_queue.len() < l.backlog => {}
            _ => {
                self.stats.tcp_listen_overflows += 1;
                return true;
            }
        }
        self.stats.tcp_syncookies_ok += 1;
        self.stats.tcp_passive_opens += 1;
        let buffers = match self.socket(lid) {
            Some(Socket::Listener(l)) => l.buffers,
            _ => Buffers::default(),
        };
        let cfg = self.conn_config(&tuple, buffers);
        let opts = CookieOptions { mss: info.mss, window_scale: None, sack_permitted: false, timestamps: false };
        let mut conn = Connection::from_cookie(&cfg, ack, opts, self.now);
        if !payload.is_empty() || ack.flags.contains(TcpFlags::FIN) {
            conn.handle_segment(self.now, ack, payload);
        }
        self.add_connection(TcpSocket::new(conn, tuple, Some(lid), false, false));
        true
    }

    // ------------------------------------------------------------------------------------------
    // Connections: transmit, events, timers, freeing
    // ------------------------------------------------------------------------------------------

    fn flush_dirty(&mut self) {
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

    /// Sends what the connection has, handles its events, re-arms its timer, frees it when done.
    fn service(&mut self, id: SocketId) {
        let now = self.now;
        let mut scratch = std::mem::take(&mut self.scratch);
        while let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            let Some(repr) = s.conn.poll_transmit(now, &mut scratch) else { break };
            let (tuple, ecn) = (s.tuple, if s.conn.transmit_ect() { ECN_ECT0 } else { ECN_NOT_ECT });
            self.send_tcp_ecn(&tuple, &repr, &scratch[..repr.payload_len], ecn);
        }
        self.scratch = scratch;
        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            let now = s.conn.counters();
            let before = std::mem::replace(&mut s.counted, now);
            let new = |f: fn(&tcp::Counters) -> u32| u64::from(f(&now).wrapping_sub(f(&before)));
            let t = &mut self.stats;
            t.tcp_retrans_segments += new(|c| c.retransmits);
            t.tcp_timeouts += new(|c| c.timeouts);
            t.tcp_loss_probes += new(|c| c.loss_probes);
            t.tcp_loss_probe_recoveries += new(|c| c.loss_probe_recoveries);
            t.tcp_rack_lost += new(|c| c.rack_lost);
            t.tcp_lost_retransmits += new(|c| c.lost_retransmits);
            t.tcp_challenge_acks_skipped += new(|c| c.challenge_acks_skipped);
        }
        while let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            let Some(ev) = s.conn.poll_event() else { break };
            self.tcp_event(id, ev);
        }
        // Events say what happened; readiness is what the application waits on. Report every
        // change of it (an ACK that frees send space is not always an event of the connection).
        let now_ready = self.readiness(id);
        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            let owned = s.owned;
            if std::mem::replace(&mut s.reported, now_ready) != now_ready && owned {
                self.mark_changed(id);
            }
        }
        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            let deadline = s.conn.poll_timeout();
            let timer = s.timer;
            let new = match (deadline, timer) {
                (Some(d), Some(h)) if self.timers.reschedule(h, d) => Some(h),
                (Some(d), _) => Some(self.timers.insert(d, TimerKey::Socket(id))),
                (None, Some(h)) => {
                    self.timers.cancel(h);
                    None
                }
                (None, None) => None,
            };
            if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                s.timer = new;
            }
        }
    }

    fn tcp_event(&mut self, id: SocketId, ev: TcpEvent) {
        let Some(Socket::Tcp(s)) = self.socket_mut(id) else { return };
        match ev {
            TcpEvent::Connected => {
                if let Some(lid) = s.listener {
                    let counted = std::mem::replace(&mut s.half_open, false);
                    let queued = match self.socket_mut(lid) {
                        Some(Socket::Listener(l)) => {
                            if counted {
                                l.half_open -= 1;
                            }
                            l.accept_queue.push_back(id);
                            l.arrivals = l.arrivals.wrapping_add(1);
                            true
                        }
                        _ => false,
                    };
                    if queued {
                        self.mark_changed(lid);
                    } else {
                        // The listener went away during the handshake.
                        self.abort_and_free(id);
                    }
                } else {
                    self.mark_changed(id);
                }
            }
            TcpEvent::Readable | TcpEvent::ReadClosed => {
                s.arrivals = s.arrivals.wrapping_add(1);
                self.mark_changed(id);
            }
            TcpEvent::Writable => self.mark_changed(id),
            TcpEvent::Urgent => {
                // Linux signals the socket's owner; a connection nobody accepted yet has none.
                if s.owned {
                    self.urgent.push(id);
                }
            }
            TcpEvent::Reset | TcpEvent::TimedOut | TcpEvent::Closed => {
                if s.owned && !s.app_closed {
                    // The application still holds the socket, but the 4-tuple is free again, as
                    // on Linux: a peer that reuses its port must reach the listener, not be
                    // reset by this dead connection (nginx keeps a reset keep-alive connection
                    // open until its next read; wrk then saw "write errors").
                    let tuple = s.tuple;
                    if self.conns.get(&tuple) == Some(&id) {
                        self.conns.remove(&tuple);
                    }
                    self.mark_changed(id);
                } else {
                    self.free_tcp(id);
                }
            }
            TcpEvent::TimeWait => {
                if s.owned && !s.app_closed {
                    // The application still holds the socket (nginx's lingering close: it shut
                    // down its side and reads until the peer's FIN). As on Linux, TIME-WAIT is
                    // kept for the 4-tuple from now on, so a peer that reuses its port is judged
                    // by RFC 6191, not challenged by this connection (that stalled wrk's
                    // Connection: close runs a second per reused port).
                    let (tw, tuple) = (TimeWait::from(&s.conn), s.tuple);
                    if self.conns.get(&tuple) == Some(&id) {
                        self.conns.remove(&tuple);
                    }
                    self.insert_time_wait(tw, tuple);
                    self.mark_changed(id);
                } else {
                    self.enter_time_wait(id);
                }
            }
        }
    }

    fn enter_time_wait(&mut self, id: SocketId) {
        let Some(Socket::Tcp(s)) = self.socket(id) else { return };
        if s.conn.state() != TcpState::TimeWait {
            return;
        }
        let tw = TimeWait::from(&s.conn);
        let tuple = s.tuple;
        let handed_over = self.conns.get(&tuple) != Some(&id);
        self.free_tcp(id);
        if !handed_over {
            self.insert_time_wait(tw, tuple);
        }
    }

    fn insert_time_wait(&mut self, tw: TimeWait, tuple: FourTuple) {
        if let Some(&old) = self.time_wait_table.get(&tuple) {
            self.free_time_wait_entry(old);
        }
        let index = match self.free_time_wait.pop() {
            Some(i) => i,
            None => {
                self.time_wait.push(None);
                (self.time_wait.len() - 1) as u32
            }
        };
        let timer = self.timers.insert(tw.deadline(), TimerKey::TimeWait(index));
        self.time_wait[index as usize] = Some(TimeWaitEntry { tw, tuple, timer });
        self.time_wait_table.insert(tuple, index);
        self.stats.tcp_time_wait_entries += 1;
    }

    fn free_time_wait_entry(&mut self, i: u32) {
        if let Some(e) = self.time_wait[i as usize].take() {
            self.timers.cancel(e.timer);
            self.time_wait_table.remove(&e.tuple);
            self.free_time_wait.push(i);
        }
    }

    fn abort_and_free(&mut self, id: SocketId) {
        let now = self.now;
        if let Some(Socket::Tcp(s)) = self.socket_mut(id) {
            s.conn.abort();
            let tuple = s.tuple;
            let mut scratch = std::mem::take(&mut self.scratch);
            while let Some(Socket::Tcp(s)) = self.socket_mut(id) {
                let Some(r) = s.conn.poll_transmit(now, &mut scratch) else { break };
                self.send_tcp(&tuple, &r, &scratch[..r.payload_len]);
            }
            self.scratch = scratch;
        }
        self.free_tcp(id);
    }

    /// Removes a TCP socket from the demux table, the timer wheel, its listener, and the slab.
    fn free_tcp(&mut self, id: SocketId) {
        let Some(Socket::Tcp(s)) = self.take_socket(id) else { return };
        if self.conns.get(&s.tuple) == Some(&id) {
            self.conns.remove(&s.tuple);
        }
        if let Some(h) = s.timer {
            self.timers.cancel(h);
        }
        if let Some(lid) = s.listener {
            if let Some(Socket::Listener(l)) = self.socket_mut(lid) {
                if s.half_open {
                    l.half_open -= 1;
                }
                l.accept_queue.retain(|&c| c != id);
            }
        }
    }

    fn iss(&self, tuple: &FourTuple) -> u32 {
        // RFC 6528: a keyed hash of the 4-tuple plus a 4 µs clock.
        let key: [u8; 16] = self.cfg.secret[16..32].try_into().unwrap();
        (siphash24(&key, &tuple_bytes(tuple)) as u32).wrapping_add((self.now / 4_000) as u32)
    }

    /// The per-connection TCP settings: the MSS of the family, a timestamp offset hashed from
    /// the addresses (so values between two hosts keep growing across connections), the
    /// socket's buffers.
    fn conn_config(&self, tuple: &FourTuple, buffers: Buffers) -> tcp::Config {
        let mut cfg = self.cfg.tcp;
        cfg.rcv_buf = buffers.recv.unwrap_or(cfg.rcv_buf);
        cfg.snd_buf = buffers.send.unwrap_or(cfg.snd_buf);
        if !tuple.is_ipv4() {
            cfg.mss = cfg.mss.saturating_sub(20);
        }
        let key: [u8; 16] = self.cfg.secret[0..16].try_into().unwrap();
        let mut addrs = [0u8; 32];
        addrs[..16].copy_from_slice(tuple.local_addr_bytes());
        addrs[16..].copy_from_slice(tuple.remote_addr_bytes());
        cfg.ts_offset = siphash24(&key, &addrs) as u32;
        cfg
    }

    // ------------------------------------------------------------------------------------------
    // Transmit
    // ------------------------------------------------------------------------------------------

    /// A segment that is not ECN-capable: control segments, RSTs, TIME-WAIT's ACKs.
    fn send_tcp(&mut self, tuple: &FourTuple, repr: &TcpRepr, payload: &[u8]) {
        self.send_tcp_ecn(tuple, repr, payload, ECN_NOT_ECT);
    }

    /// A segment whose IP header carries `ecn` in its ECN field (RFC 3168 section 5).
    fn send_tcp_ecn(&mut self, tuple: &FourTuple, repr: &TcpRepr, payload: &[u8], ecn: u8) {
        let (src, _) = tuple.local();
        let (dst, _) = tuple.remote();
        let len = repr.buffer_len();
        let Some((mut buf, l4)) = self.ip_frame(src, dst, IpProtocol::Tcp, len, ecn) else { return };
        repr.emit(&mut TcpPacket::new_unchecked(&mut buf.data_mut()[l4..]), &src, &dst, payload, true);
        self.stats.tcp_tx_segments += 1;
        self.route_out(buf, dst);
    }

    /// A frame with Ethernet and IP headers for `l4_len` bytes of transport, `ecn` in the IP
    /// header's ECN field, and the offset of the transport header. The Ethernet destination is
    /// filled by `route_out`.
    fn ip_frame(
        &mut self,
        src: IpAddress,
        dst: IpAddress,
        proto: IpProtocol,
        l4_len: usize,
        ecn: u8,
    ) -> Option<(N::Buf, usize)> {
        let Some(mut buf) = self.nic.alloc() else {
            self.stats.tx_no_buffer += 1;
            return None;
        };
        let (ethertype, ip_len) = match dst {
            IpAddress::V4(_) => (EtherType::Ipv4, wire::ipv4::HEADER_LEN),
            IpAddress::V6(_) => (EtherType::Ipv6, wire::ipv6::HEADER_LEN),
        };
        let total = ETH + ip_len + l4_len;
        if total > buf.capacity() {
            self.stats.tx_no_buffer += 1;
            return None;
        }
        buf.set_len(total);
        let data = buf.data_mut();
        EthernetRepr { src_addr: self.mac, dst_addr: EthernetAddress([0; 6]), ethertype }
            .emit(&mut EthernetFrame::new_unchecked(&mut data[..]));
        match (src, dst) {
            (IpAddress::V4(s), IpAddress::V4(d)) => {
                let ip = Ipv4Repr { src_addr: s, dst_addr: d, next_header: proto, payload_len: l4_len, hop_limit: TTL };
                let mut packet = Ipv4Packet::new_unchecked(&mut data[ETH..ETH + ip_len]);
                ip.emit(&mut packet, ecn == ECN_NOT_ECT);
                if ecn != ECN_NOT_ECT {
                    packet.set_ecn(ecn);
                    packet.fill_checksum();
                }
            }
            (IpAddress::V6(s), IpAddress::V6(d)) => {
                let ip = Ipv6Repr { src_addr: s, dst_addr: d, next_header: proto, payload_len: l4_len, hop_limit: TTL };
                let mut packet = Ipv6Packet::new_unchecked(&mut data[ETH..ETH + ip_len]);
                ip.emit(&mut packet);
                packet.set_traffic_class(ecn);
            }
            _ => unreachable!("a 4-tuple never mixes families"),
        }
        Some((buf, ETH + ip_len))
    }

    /// Fills the Ethernet destination from the neighbor cache and queues the frame, or parks it
    /// until the neighbor answers.
    fn route_out(&mut self, mut buf: N::Buf, dst: IpAddress) {
        let Some(hop) = self.routes.next_hop(dst) else {
            self.stats.tx_no_route += 1;
            return;
        };
        if let Some(mac) = multicast_mac(hop) {
            EthernetFrame::new_unchecked(buf.data_mut()).set_dst_addr(mac);
            self.tx.push(buf);
            return;
        }
        match self.neighbors.lookup(hop, self.now) {
            Lookup::Hit { mac, send_request } => {
                EthernetFrame::new_unchecked(buf.data_mut()).set_dst_addr(mac);
                self.tx.push(buf);
                if send_request {
                    self.send_solicitation(hop, Some(mac));
                }
            }
            Lookup::Miss { send_request } => {
                if self.neighbors.enqueue(hop, buf).is_err() {
                    self.stats.tx_unresolved += 1;
                }
                if send_request {
                    self.send_solicitation(hop, None);
                }
            }
        }
    }

    /// An ARP request or an IPv6 neighbor solicitation for `ip`; unicast to `known` when
    /// re-confirming a stale entry.
    fn send_solicitation(&mut self, ip: IpAddress, known: Option<EthernetAddress>) {
        let Some(mut buf) = self.nic.alloc() else {
            self.stats.tx_no_buffer += 1;
            return;
        };
        match ip {
            IpAddress::V4(target) => {
                let Some(ours) = self.ipv4 else { return };
                let arp = ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr: self.mac,
                    source_protocol_addr: ours,
                    target_hardware_addr: EthernetAddress([0; 6]),
                    target_protocol_addr: target,
                };
                buf.set_len(ETH + arp.buffer_len());
                let data = buf.data_mut();
                EthernetRepr {
                    src_addr: self.mac,
                    dst_addr: known.unwrap_or(EthernetAddress::BROADCAST),
                    ethertype: EtherType::Arp,
                }
                .emit(&mut EthernetFrame::new_unchecked(&mut data[..]));
                arp.emit(&mut ArpPacket::new_unchecked(&mut data[ETH..]));
            }
            IpAddress::V6(target) => {
                let src = if target.is_link_local() {
                    self.ipv6_link_local
                } else {
                    self.ipv6.unwrap_or(self.ipv6_link_local)
                };
                let dst = if known.is_some() { target } else { target.solicited_node() };
                let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr: Some(self.mac) });
                let len = ns.buffer_len();
                buf.set_len(ETH + wire::ipv6::HEADER_LEN + len);
                let data = buf.data_mut();
                EthernetRepr {
                    src_addr: self.mac,
                    dst_addr: known.unwrap_or_else(|| dst.multicast_ethernet()),
                    ethertype: EtherType::Ipv6,
                }
                .emit(&mut EthernetFrame::new_unchecked(&mut data[..]));
                let ip = Ipv6Repr {
                    src_addr: src,
                    dst_addr: dst,
                    next_header: IpProtocol::Icmpv6,
                    payload_len: len,
                    hop_limit: 255,
                };
                ip.emit(&mut Ipv6Packet::new_unchecked(&mut data[ETH..ETH + wire::ipv6::HEADER_LEN]));
                ns.emit(&mut Icmpv6Packet::new_unchecked(&mut data[ETH + wire::ipv6::HEADER_LEN..]), &src, &dst, true);
            }
        }
        self.tx.push(buf);
    }

    // ------------------------------------------------------------------------------------------
    // Socket slab
    // ------------------------------------------------------------------------------------------

    fn alloc(&mut self, socket: Socket) -> SocketId {
        match self.free_slots.pop() {
            Some(index) => {
                let slot = &mut self.slots[index as usize];
                slot.socket = Some(socket);
                SocketId { index, gen: slot.gen, shard: self.cfg.shard_index }
            }
            None => {
                self.slots.push(Slot { gen: 0, socket: Some(socket), dirty: false, changed: false });
                SocketId { index: (self.slots.len() - 1) as u32, gen: 0, shard: self.cfg.shard_index }
            }
        }
    }

    /// A new connection in the slab and the demux table, due for a first transmit.
    fn add_connection(&mut self, sock: TcpSocket) -> SocketId {
        let tuple = sock.tuple;
        let id = self.alloc(Socket::Tcp(Box::new(sock)));
        self.conns.insert(tuple, id);
        self.mark_dirty(id);
        id
    }

    fn take_socket(&mut self, id: SocketId) -> Option<Socket> {
        let slot = self.slots.get_mut(id.index as usize)?;
        if slot.gen != id.gen || slot.socket.is_none() {
            return None;
        }
        slot.gen = slot.gen.wrapping_add(1);
        slot.dirty = false;
        slot.changed = false;
        self.free_slots.push(id.index);
        slot.socket.take()
    }

    fn socket(&self, id: SocketId) -> Option<&Socket> {
        debug_assert_eq!(id.shard, self.cfg.shard_index, "a socket of another shard");
        self.slots.get(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_ref())
    }

    fn socket_mut(&mut self, id: SocketId) -> Option<&mut Socket> {
        debug_assert_eq!(id.shard, self.cfg.shard_index, "a socket of another shard");
        self.slots.get_mut(id.index as usize).filter(|s| s.gen == id.gen).and_then(|s| s.socket.as_mut())
    }

    fn mark_dirty(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen && !slot.dirty {
                slot.dirty = true;
                self.dirty.push(id);
            }
        }
    }

    fn mark_changed(&mut self, id: SocketId) {
        if let Some(slot) = self.slots.get_mut(id.index as usize) {
            if slot.gen == id.gen && !slot.changed {
                slot.changed = true;
                self.changed.push(id);
            }
        }
    }

    fn tcp(&mut self, id: SocketId) -> Result<&mut TcpSocket, Errno> {
        match self.socket_mut(id) {
            Some(Socket::Tcp(s)) => Ok(s),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }

    // ------------------------------------------------------------------------------------------
    // The socket API
    // ------------------------------------------------------------------------------------------

    /// Sockets whose readiness may have changed since the last call (each once).
    pub fn take_changed(&mut self, out: &mut Vec<SocketId>) {
        for id in self.changed.drain(..) {
            if let Some(slot) = self.slots.get_mut(id.index as usize) {
                if slot.gen == id.gen {
                    slot.changed = false;
                    out.push(id);
                }
            }
        }
    }

    fn local_address(&self, family_v6: bool) -> Result<IpAddress, Errno> {
        if family_v6 {
            self.ipv6.map(IpAddress::V6).ok_or(Errno::EADDRNOTAVAIL)
        } else {
            self.ipv4.map(IpAddress::V4).ok_or(Errno::EADDRNOTAVAIL)
        }
    }

    fn check_local(&self, addr: IpAddress) -> Result<(), Errno> {
        let ours = match addr {
            IpAddress::V4(a) => Some(a) == self.ipv4,
            IpAddress::V6(a) => Some(a) == self.ipv6 || a == self.ipv6_link_local,
        };
        if ours || is_unspecified(addr) {
            Ok(())
        } else {
            Err(Errno::EADDRNOTAVAIL)
        }
    }

    /// A TCP listener on `local` (the unspecified address listens on every address of its
    /// family; `[::]` also takes IPv4). Port 0 picks an ephemeral port.
    pub fn tcp_listen(&mut self, local: SocketAddr, backlog: usize) -> Result<SocketId, Errno> {
        self.tcp_listen_with(local, backlog, false, false)
    }

    /// [`Shard::tcp_listen`] with IPV6_V6ONLY (a `[::]` listener that takes no IPv4) and
    /// SO_REUSEPORT (listeners that all set it share the address; new connections are spread
    /// over them).
    pub fn tcp_listen_with(
        &mut self,
        local: SocketAddr,
        backlog: usize,
        v6only: bool,
        reuseport: bool,
    ) -> Result<SocketId, Errno> {
        let addr = to_ip(local.ip());
        self.check_local(addr)?;
        let port = if local.port() == 0 {
            let listeners = &self.listeners;
            self.ports
                .allocate(addr, (addr, 0), |p| listeners.get((addr, p)).is_none())
                .map_err(|_| Errno::EADDRINUSE)?
        } else {
            local.port()
        };
        let joins = match self.listeners.get((addr, port)) {
            Some(g) if g.reuseport && reuseport => true,
            Some(_) => return Err(Errno::EADDRINUSE),
            None => false,
        };
        let id = self.alloc(Socket::Listener(Listener {
            local: (addr, port),
            backlog: backlog.max(1),
            half_open: 0,
            accept_queue: VecDeque::new(),
            arrivals: 0,
            watched: false,
            buffers: Buffers::default(),
        }));
        if joins {
            self.listeners.get_mut((addr, port)).expect("the group exists").members.push(id);
        } else if self.listeners.insert((addr, port), v6only, ListenGroup { reuseport, members: vec![id] }).is_err() {
            self.take_socket(id);
            return Err(Errno::EADDRINUSE);
        }
        Ok(id)
    }

    /// The local address a listener or connection is bound to.
    pub fn local_addr(&self, id: SocketId) -> Result<SocketAddr, Errno> {
        match self.socket(id) {
            Some(Socket::Listener(l)) => Ok(SocketAddr::new(to_std(l.local.0), l.local.1)),
            Some(Socket::Tcp(s)) => {
                let (a, p) = s.tuple.local();
                Ok(SocketAddr::new(to_std(a), p))
            }
            Some(Socket::Udp(u)) => Ok(SocketAddr::new(to_std(u.local.0), u.local.1)),
            None => Err(Errno::EBADF),
        }
    }

    /// The peer of a connection.
    pub fn peer_addr(&self, id: SocketId) -> Result<SocketAddr, Errno> {
        match self.socket(id) {
            Some(Socket::Tcp(s)) => {
                let (a, p) = s.tuple.remote();
                Ok(SocketAddr::new(to_std(a), p))
            }
            Some(Socket::Udp(u)) => u.remote().ok_or(Errno::ENOTCONN),
            Some(_) => Err(Errno::ENOTCONN),
            None => Err(Errno::EBADF),
        }
    }

    /// The next established connection of a listener (EAGAIN when none).
    pub fn tcp_accept(&mut self, listener: SocketId) -> Result<(SocketId, SocketAddr), Errno> {
        let id = match self.socket_mut(listener) {
            Some(Socket::Listener(l)) => l.accept_queue.pop_front().ok_or(Errno::EAGAIN)?,
            Some(_) => return Err(Errno::EINVAL),
            None => return Err(Errno::EBADF),
        };
        let s = self.tcp(id)?;
        s.listener = None;
        s.owned = true;
        let (a, p) = s.tuple.remote();
        // Data or a FIN may have arrived before the accept: report it.
        if s.conn.is_readable() || s.conn.error().is_some() {
            self.mark_changed(id);
        }
        Ok((id, SocketAddr::new(to_std(a), p)))
    }

    /// Starts an active open to `remote` from an ephemeral port (non-blocking: the socket
    /// becomes writable when connected, or reports the error).
    pub fn tcp_connect(&mut self, remote: SocketAddr) -> Result<SocketId, Errno> {
        self.tcp_connect_with(remote, Buffers::default())
    }

    /// [`Shard::tcp_connect`] with the socket's buffers (its SYN offers the window scale the
    /// receive buffer needs).
    pub fn tcp_connect_with(&mut self, remote: SocketAddr, buffers: Buffers) -> Result<SocketId, Errno> {
        let dst = to_ip(remote.ip());
        let src = self.local_address(matches!(dst, IpAddress::V6(_)))?;
        if self.routes.next_hop(dst).is_none() {
            return Err(Errno::ENETUNREACH);
        }
        let conns = &self.conns;
        let time_wait = &self.time_wait_table;
        let port = self
            .ports
            .allocate(src, (dst, remote.port()), |p| {
                let t = FourTuple::new((src, p), (dst, remote.port()));
                !conns.contains_key(&t) && !time_wait.contains_key(&t)
            })
            .map_err(|_| Errno::EADDRNOTAVAIL)?;
        let tuple = FourTuple::new((src, port), (dst, remote.port()));
        let cfg = self.conn_config(&tuple, buffers);
        let iss = self.iss(&tuple);
        let conn = Connection::connect(&cfg, port, remote.port(), iss, self.now);
        self.stats.tcp_active_opens += 1;
        let id = self.add_connection(TcpSocket::new(conn, tuple, None, false, true));
        Ok(id)
    }

    pub fn tcp_send(&mut self, id: SocketId, data: &[u8]) -> Result<usize, Errno> {
        self.send_marked(id, data, false)
    }

    /// `send(..., MSG_OOB)`: the last byte taken is urgent (see `tcp::Connection::send_urgent`).
    pub fn tcp_send_urgent(&mut self, id: SocketId, data: &[u8]) -> Result<usize, Errno> {
        self.send_marked(id, data, true)
    }

    fn send_marked(&mut self, id: SocketId, data: &[u8], urgent: bool) -> Result<usize, Errno> {
        let s = self.tcp(id)?;
        let r = if urgent { s.conn.send_urgent(data) } else { s.conn.send(data) };
        // The application saw a full buffer: the next time it has room is a change to report
        // (as EPOLLET re-arms on EAGAIN).
        if !matches!(r, Ok(n) if n == data.len()) {
            s.reported.writable = false;
        }
        let n = r?;
        self.mark_dirty(id);
        Ok(n)
    }

    /// Reads in-order data; `Ok(0)` is the end of the stream.
    pub fn tcp_recv(&mut self, id: SocketId, buf: &mut [u8]) -> Result<usize, Errno> {
        let s = self.tcp(id)?;
        let r = s.conn.recv(buf);
        if r == Err(tcp::Error::WouldBlock) {
            s.reported.readable = false;
        }
        let n = r?;
        // Reading may open the window: let the connection send an update.
        self.mark_dirty(id);
        Ok(n)
    }

    /// Reads without consuming (MSG_PEEK).
    pub fn tcp_peek(&mut self, id: SocketId, buf: &mut [u8]) -> Result<usize, Errno> {
        Ok(self.tcp(id)?.conn.peek(buf)?)
    }

    /// `recv(..., MSG_OOB)`: the urgent byte (`None`: end of stream), never waiting; `peek`
    /// (MSG_PEEK) leaves it. The errors are Linux's (see `tcp::Connection::recv_urgent`).
    pub fn tcp_recv_urgent(&mut self, id: SocketId, peek: bool) -> Result<Option<u8>, Errno> {
        let s = self.tcp(id)?;
        let byte = s.conn.recv_urgent(peek)?;
        if !peek {
            // Taken: the next urgent byte is a change to report.
            s.reported.urgent = false;
        }
        Ok(byte)
    }

    /// Bytes before the urgent mark (`Some(0)`: SIOCATMARK), `None` without urgent data.
    pub fn tcp_urgent_mark(&mut self, id: SocketId) -> Result<Option<usize>, Errno> {
        Ok(self.tcp(id)?.conn.urgent_mark())
    }

    /// Connections whose peer marked new urgent data since the last call (each once per new
    /// urgent pointer): the application's SIGURG.
    pub fn take_urgent(&mut self, out: &mut Vec<SocketId>) {
        out.append(&mut self.urgent);
    }

    /// SO_OOBINLINE.
    pub fn tcp_set_oob_inline(&mut self, id: SocketId, inline: bool) -> Result<(), Errno> {
        self.tcp(id)?.conn.set_oob_inline(inline);
        self.mark_dirty(id);
        Ok(())
    }

    /// SO_RCVLOWAT (readable from this many bytes on).
    pub fn tcp_set_rcvlowat(&mut self, id: SocketId, bytes: u32) -> Result<(), Errno> {
        self.tcp(id)?.conn.set_rcvlowat(bytes);
        // Readiness may change either way: the next pass reports it.
        self.mark_dirty(id);
        Ok(())
    }

    /// SO_RCVBUF/SO_SNDBUF of a connection (`None`: left as they are); of a listener, for the
    /// connections it makes from now on.
    pub fn tcp_set_buffers(&mut self, id: SocketId, buffers: Buffers) -> Result<(), Errno> {
        match self.socket_mut(id) {
            Some(Socket::Tcp(s)) => {
                if let Some(bytes) = buffers.recv {
                    s.conn.set_recv_buffer(bytes);
                }
                if let Some(bytes) = buffers.send {
                    s.conn.set_send_buffer(bytes);
                }
            }
            Some(Socket::Listener(l)) => {
                l.buffers.recv = buffers.recv.or(l.buffers.recv);
                l.buffers.send = buffers.send.or(l.buffers.send);
                return Ok(());
            }
            Some(Socket::Udp(_)) => return Err(Errno::EOPNOTSUPP),
            None => return Err(Errno::EBADF),
        }
        self.mark_dirty(id);
        Ok(())
    }

    /// Bytes that `tcp_send` would take now (0 counts as a full buffer seen, like EAGAIN).
    pub fn tcp_send_space(&mut self, id: SocketId) -> Result<usize, Errno> {
        let s = self.tcp(id)?;
        let space = s.conn.send_space();
        if space == 0 {
            s.reported.writable = false;
        }
        Ok(space)
    }

    /// Bytes waiting to be read (FIONREAD).
    pub fn tcp_recv_available(&mut self, id: SocketId) -> Result<usize, Errno> {
        Ok(self.tcp(id)?.conn.recv_available())
    }

    pub fn tcp_shutdown_write(&mut self, id: SocketId) -> Result<(), Errno> {
        self.tcp(id)?.conn.shutdown_write()?;
        self.mark_dirty(id);
        Ok(())
    }

    pub fn tcp_set_nodelay(&mut self, id: SocketId, nodelay: bool) -> Result<(), Errno> {
        let s = self.tcp(id)?;
        s.conn.set_nodelay(nodelay);
        s.nodelay = nodelay;
        self.mark_dirty(id);
        Ok(())
    }

    /// SO_KEEPALIVE with its TCP_KEEPIDLE/INTVL/CNT (`None`: off).
    pub fn tcp_set_keepalive(&mut self, id: SocketId, keepalive: Option<tcp::Keepalive>) -> Result<(), Errno> {
        let now = self.now;
        self.tcp(id)?.conn.set_keepalive(keepalive, now);
        self.mark_dirty(id);
        Ok(())
    }

    /// TCP_NODELAY as set.
    pub fn tcp_nodelay(&mut self, id: SocketId) -> Result<bool, Errno> {
        Ok(self.tcp(id)?.nodelay)
    }

    /// Sends what is queued now, small tail segment included (what clearing TCP_CORK does):
    /// Nagle is lifted for this one flush.
    pub fn tcp_push(&mut self, id: SocketId) -> Result<(), Errno> {
        self.tcp(id)?.conn.set_nodelay(true);
        self.service(id);
        if let Ok(s) = self.tcp(id) {
            let nodelay = s.nodelay;
            s.conn.set_nodelay(nodelay);
        }
        Ok(())
    }

    pub fn tcp_info(&mut self, id: SocketId) -> Result<tcp::Info, Errno> {
        Ok(self.tcp(id)?.conn.info())
    }

    pub fn tcp_state(&self, id: SocketId) -> Result<TcpState, Errno> {
        match self.socket(id) {
            Some(Socket::Tcp(s)) => Ok(s.conn.state()),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }

    /// SO_ERROR: the pending error, consumed.
    pub fn take_error(&mut self, id: SocketId) -> Result<Option<Errno>, Errno> {
        match self.socket_mut(id) {
            Some(Socket::Udp(u)) => Ok(u.take_error()),
            _ => Ok(self.tcp(id)?.conn.take_error().map(Errno::from)),
        }
    }

    /// Closes a socket: a connection finishes gracefully (its data is still delivered, then a
    /// FIN) and is freed when done; a listener resets the connections nobody accepted.
    pub fn close(&mut self, id: SocketId) -> Result<(), Errno> {
        let now = self.now;
        match self.socket_mut(id) {
            None => Err(Errno::EBADF),
            Some(Socket::Tcp(s)) => {
                s.app_closed = true;
                s.conn.close(now);
                // Closed after its TIME-WAIT was handed to the table: nothing left to do.
                let (time_wait, tuple) = (s.conn.state() == TcpState::TimeWait, s.tuple);
                let done = time_wait && self.conns.get(&tuple) != Some(&id);
                if done {
                    self.free_tcp(id);
                } else {
                    self.mark_dirty(id);
                }
                Ok(())
            }
            Some(Socket::Listener(l)) => {
                let local = l.local;
                let pending: Vec<SocketId> = l.accept_queue.drain(..).collect();
                let last = self.listeners.get_mut(local).is_some_and(|g| {
                    g.members.retain(|&m| m != id);
                    g.members.is_empty()
                });
                if last {
                    self.listeners.remove(local);
                }
                for c in pending {
                    self.abort_and_free(c);
                }
                // Half-open children die with their listener (their ACK would find no one).
                self.take_socket(id);
                Ok(())
            }
            Some(Socket::Udp(u)) => {
                let local = u.local;
                self.udp_unbind(id, local);
                if let Some(Socket::Udp(u)) = self.take_socket(id) {
                    self.free_datagrams.extend(u.into_buffers());
                }
                Ok(())
            }
        }
    }

    /// Resets a connection at once (SO_LINGER with a zero timeout).
    pub fn abort(&mut self, id: SocketId) -> Result<(), Errno> {
        self.tcp(id)?;
        self.abort_and_free(id);
        Ok(())
    }

    /// Every TCP connection with its addresses and state, for the connection table
    /// (`pronghorn conns`) and diagnostics. It walks all sockets: never call it per packet.
    pub fn connections(&self) -> impl Iterator<Item = (SocketId, SocketAddr, SocketAddr, tcp::Info)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, slot)| match &slot.socket {
            Some(Socket::Tcp(s)) => {
                let (la, lp) = s.tuple.local();
                let (ra, rp) = s.tuple.remote();
                let id = SocketId { index: i as u32, gen: slot.gen, shard: self.cfg.shard_index };
                Some((id, SocketAddr::new(to_std(la), lp), SocketAddr::new(to_std(ra), rp), s.conn.info()))
            }
            _ => None,
        })
    }

    /// How many times new data (or the end of stream) arrived on a connection, or a connection
    /// was queued on a listener. Edge-triggered waiters report EPOLLIN again when it moves, as
    /// Linux wakes them on every arrival even if the application did not drain the socket.
    pub fn arrivals(&self, id: SocketId) -> u32 {
        match self.socket(id) {
            Some(Socket::Tcp(s)) => s.arrivals,
            Some(Socket::Listener(l)) => l.arrivals,
            Some(Socket::Udp(u)) => u.arrivals,
            None => 0,
        }
    }

    /// What `id` is ready for now.
    pub fn readiness(&self, id: SocketId) -> Readiness {
        match self.socket(id) {
            None => Readiness { error: true, hangup: true, ..Readiness::default() },
            Some(Socket::Listener(l)) => Readiness { readable: !l.accept_queue.is_empty(), ..Readiness::default() },
            Some(Socket::Udp(u)) => {
                Readiness { readable: u.readable(), writable: true, error: u.has_error(), ..Readiness::default() }
            }
            Some(Socket::Tcp(s)) => {
                let state = s.conn.state();
                let read_closed = matches!(
                    state,
                    TcpState::CloseWait | TcpState::LastAck | TcpState::Closing | TcpState::TimeWait | TcpState::Closed
                );
                Readiness {
                    readable: s.conn.is_readable(),
                    writable: s.conn.is_writable() && state != TcpState::SynSent && state != TcpState::SynReceived,
                    read_closed,
                    hangup: state == TcpState::Closed || state == TcpState::TimeWait,
                    error: s.conn.error().is_some(),
                    urgent: s.conn.has_urgent(),
                }
            }
        }
    }
}

fn nic_mss<N: Nic>(nic: &N) -> u16 {
    nic.mtu().saturating_sub((wire::ipv4::HEADER_LEN + wire::tcp::HEADER_LEN) as u16)
}

fn tuple_bytes(t: &FourTuple) -> [u8; 36] {
    let mut b = [0u8; 36];
    b[..16].copy_from_slice(t.local_addr_bytes());
    b[16..32].copy_from_slice(t.remote_addr_bytes());
    b[32..34].copy_from_slice(&t.local_port().to_be_bytes());
    b[34..36].copy_from_slice(&t.remote_port().to_be_bytes());
    b
}
