//! UDP sockets: where each goes, and datagram send and receive.
//!
//! A UDP socket starts on the kernel (`Fd::UdpPending`) and moves to the shard when it binds to
//! the accelerated address, or connects or sends into the accelerated subnet (the kernel cannot
//! reach that subnet: DPDK owns the interface). Bound anywhere else, or sending elsewhere first,
//! it stays with the kernel for good; both decisions are counted. A wildcard bind with port 0
//! (`bind(0.0.0.0:0)`, a client's habit) is done by the kernel and decides nothing yet.
//!
//! On an interface shared with the kernel (`nic.share`) a wildcard bind with a port
//! (`0.0.0.0:PORT`, `[::]:PORT`) moves to the shard too, as TCP's does: the wire's datagrams
//! to PORT on the interface's addresses are the shard's. Unlike TCP's listeners it gets no
//! kernel socket beside it, so a client on this host (to 127.0.0.1:PORT or to the host's
//! address: the kernel's loopback, which the shard never sees) finds no socket there: the
//! kernel answers port unreachable, a connected client's next call fails with ECONNREFUSED at
//! once, and an unconnected one's datagram is dropped (the kernel's `Udp NoPorts`). Nor is
//! PORT held in the kernel: a kernel process may bind it and take the local datagrams.
//!
//! On the shard, calls keep Linux's semantics: one datagram per call, cut to the buffer (the
//! rest lost; MSG_TRUNC returns the full length), MSG_PEEK, a connected socket's default
//! destination and its ICMP errors (ECONNREFUSED, reported once, before queued data).
//! Waiting is `wait`'s; the fd table and the placeholder fd are shared with TCP (`socket`).
//!
//! This module holds the datagram type and the address rules; `calls` serves the UDP calls.

mod calls;

use std::net::{IpAddr, SocketAddr, SocketAddrV6};

use crate::fdtable::{Entry, Fd};

/// One datagram received (`recvfrom`/`recvmsg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// What the call returns: the bytes copied, or the datagram's full length with MSG_TRUNC.
    pub len: usize,
    /// Its sender.
    pub from: SocketAddr,
    /// It was longer than the buffer (recvmsg's MSG_TRUNC in `msg_flags`).
    pub truncated: bool,
}

/// Our address of `peer`'s family (an IPv4-mapped peer is IPv4).
fn local_for(rt_v4: Option<IpAddr>, rt_v6: Option<IpAddr>, peer: IpAddr) -> Option<IpAddr> {
    match peer {
        IpAddr::V4(_) => rt_v4,
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some() => rt_v4,
        IpAddr::V6(_) => rt_v6,
    }
}

/// Sender `from` as a socket of its family reads it: an AF_INET6 socket (bound to `::`, or
/// autobound) reads an IPv4 sender as IPv4-mapped, as Linux's udpv6_recvmsg writes it.
fn as_read_by(from: SocketAddr, v6_socket: bool) -> SocketAddr {
    match from {
        SocketAddr::V4(v4) if v6_socket => SocketAddr::V6(SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0)),
        other => other,
    }
}

/// A new entry for a UDP socket the kernel just created.
pub(crate) fn pending_entry(v6: bool) -> Entry {
    Entry::new(Fd::UdpPending { v6 })
}
