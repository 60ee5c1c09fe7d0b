//! UDP on the shard: bound sockets (connected or not) with their queue of datagrams, the ICMP
//! "port unreachable" answer for a datagram nobody holds (rate-limited as Linux limits it), and
//! the ICMP errors that reach a connected socket as ECONNREFUSED.
//!
//! Linux is the model (net/ipv4/udp.c, icmp.c): a connected socket receives only from its peer
//! and only it is told of ICMP errors (`recverr` off); a datagram that finds no socket is counted
//! as NoPorts and answered with port unreachable. Datagrams are never fragmented or reassembled
//! here: a send that does not fit the MTU fails with EMSGSIZE (Linux would fragment), a fragment
//! received is dropped by the link layer and counted.
//!
//! This module holds the values (a socket, the groups of one address, the ICMP rate limit),
//! knowing nothing of the shard; `io` is UDP's work on the shard: datagrams in and out, the
//! socket calls.

use std::collections::VecDeque;
use std::net::SocketAddr;

use wire::IpAddress;

use super::addr::to_std;
use super::sockets::SocketId;
use crate::errno::Errno;

mod io;

/// An address and port.
pub(super) type Endpoint = (IpAddress, u16);

/// What a queued datagram costs against SO_RCVBUF beyond its IP and UDP headers and payload, as
/// Linux charges an skb's truesize rather than its payload (a queue of empty datagrams is not
/// free): the sk_buff and its skb_shared_info alone are 576 bytes on x86-64 (SKB_TRUESIZE(0)),
/// and Linux 6.18 charges 832 bytes for an empty IPv4 datagram received over loopback (512 of
/// them fill an SO_RCVBUF of 425,984). 768 keeps an empty IPv4 datagram at 796 bytes.
pub const DATAGRAM_OVERHEAD: usize = 768;

/// Freed datagram buffers kept for reuse at most (each at most an MTU's payload): after a burst
/// the rest go back to the allocator.
pub const SPARE_DATAGRAMS: usize = 256;

/// What a datagram of `payload` bytes from `from` costs against SO_RCVBUF.
fn truesize(from: &Endpoint, payload: usize) -> usize {
    let ip = if matches!(from.0, IpAddress::V4(_)) { wire::ipv4::HEADER_LEN } else { wire::ipv6::HEADER_LEN };
    ip + wire::udp::HEADER_LEN + payload + DATAGRAM_OVERHEAD
}

/// One received datagram.
pub(super) struct Datagram {
    from: Endpoint,
    data: Vec<u8>,
}

/// A UDP socket: bound to a local address and port, perhaps connected to one peer.
pub(super) struct UdpSocket {
    pub(super) local: Endpoint,
    /// connect(): the only source it receives from and the default destination.
    remote: Option<Endpoint>,
    rx: VecDeque<Datagram>,
    rx_bytes: usize,
    /// What the queued datagrams cost against SO_RCVBUF (`truesize`).
    rx_charged: usize,
    /// SO_RCVBUF: the most the queued datagrams may cost (`None`: the shard's `udp_rcvbuf`).
    rcvbuf: Option<usize>,
    /// An ICMP error for the connected peer, reported once (SO_ERROR, or the next call).
    error: Option<Errno>,
    /// Datagrams queued so far (edge-triggered waiters report each arrival).
    pub(super) arrivals: u32,
}

impl UdpSocket {
    pub(super) fn readable(&self) -> bool {
        !self.rx.is_empty()
    }

    /// Bytes of the queued datagrams (ss's Recv-Q).
    pub(super) fn queued_bytes(&self) -> usize {
        self.rx_bytes
    }

    pub(super) fn has_error(&self) -> bool {
        self.error.is_some()
    }

    pub(super) fn take_error(&mut self) -> Option<Errno> {
        self.error.take()
    }

    pub(super) fn remote(&self) -> Option<SocketAddr> {
        self.remote.map(|(a, p)| SocketAddr::new(to_std(a), p))
    }

    /// The buffers of its queued datagrams, for reuse.
    pub(super) fn into_buffers(self) -> impl Iterator<Item = Vec<u8>> {
        self.rx.into_iter().map(|d| d.data)
    }
}

/// The UDP sockets bound to one address and port: one, or several that all set SO_REUSEADDR
/// or SO_REUSEPORT (iperf3's server binds a new socket to its port while the one it connected
/// to a client still holds it).
pub(super) struct UdpGroup {
    reuseaddr: bool,
    reuseport: bool,
    members: Vec<SocketId>,
}

/// What one received datagram was, for `recvmsg`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Received {
    /// Bytes copied into the buffer.
    pub copied: usize,
    /// The datagram's full length (more than `copied`: it was cut, MSG_TRUNC).
    pub len: usize,
    pub from: SocketAddr,
}

/// Linux's limits on ICMP errors: a global budget (net.ipv4.icmp_msgs_per_sec = 1000,
/// icmp_msgs_burst = 50) and one per destination (icmp_ratelimit = 1000 ms with a burst of six,
/// inet_peer_xrlim_allow). Destinations share a small direct-mapped table: a collision forgets
/// the older one, which then starts with a full burst again.
pub(super) struct IcmpRateLimit {
    credit: u32,
    credit_at: u64,
    peers: Vec<Option<(IpAddress, u64, u64)>>,
}

const ICMP_MSGS_PER_SEC: u64 = 1000;
const ICMP_MSGS_BURST: u32 = 50;
const ICMP_RATELIMIT_NS: u64 = 1_000_000_000;
const XRLIM_BURST_FACTOR: u64 = 6;
const ICMP_PEERS: usize = 256;

impl IcmpRateLimit {
    pub(super) fn new() -> IcmpRateLimit {
        IcmpRateLimit { credit: ICMP_MSGS_BURST, credit_at: 0, peers: vec![None; ICMP_PEERS] }
    }

    /// Whether an ICMP error may go to `dst` now (and, if so, its cost taken).
    fn allow(&mut self, dst: IpAddress, now: u64) -> bool {
        let incr = now.saturating_sub(self.credit_at) * ICMP_MSGS_PER_SEC / 1_000_000_000;
        if incr > 0 {
            self.credit = (u64::from(self.credit) + incr).min(u64::from(ICMP_MSGS_BURST)) as u32;
            self.credit_at = now;
        }
        if self.credit == 0 {
            return false;
        }
        let slot = &mut self.peers[peer_slot(dst)];
        let (tokens, last) = match *slot {
            Some((a, tokens, last)) if a == dst => (tokens, last),
            // A destination not seen (or forgotten): a full burst, as a new inet_peer.
            _ => (XRLIM_BURST_FACTOR * ICMP_RATELIMIT_NS, now),
        };
        let tokens = (tokens + now.saturating_sub(last)).min(XRLIM_BURST_FACTOR * ICMP_RATELIMIT_NS);
        if tokens < ICMP_RATELIMIT_NS {
            *slot = Some((dst, tokens, now));
            return false;
        }
        *slot = Some((dst, tokens - ICMP_RATELIMIT_NS, now));
        self.credit -= 1;
        true
    }
}

fn peer_slot(a: IpAddress) -> usize {
    let bytes: &[u8] = match &a {
        IpAddress::V4(v4) => &v4.0,
        IpAddress::V6(v6) => &v6.0,
    };
    bytes.iter().fold(0usize, |h, &b| h.wrapping_mul(31).wrapping_add(b as usize)) % ICMP_PEERS
}
