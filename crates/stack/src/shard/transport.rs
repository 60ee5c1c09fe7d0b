//! What ingress read of a TCP or UDP packet to us, handed to the transport layers (TCP, UDP,
//! the coalescer) and to the process's other shards so that none reads the layers below again:
//! values only; `ingress` makes them.

use wire::{EthernetAddress, IpAddress, IpProtocol, Ipv4Repr, Ipv6Repr, TcpFlags, TcpPacket, TcpRepr, UdpPacket};

use super::link::ETH;
use super::sockets::SocketId;

/// The IP header of a TCP or UDP packet to us, as read (an ICMP error quotes it).
#[derive(Clone, Copy, Debug)]
pub(super) enum IpHeader {
    V4(Ipv4Repr),
    V6(Ipv6Repr),
}

/// A TCP or UDP packet to one of our addresses, as the layers below read it: enough for the
/// transport layer, here or on another shard of the process, without reading them again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Transport {
    pub(super) src: IpAddress,
    pub(super) dst: IpAddress,
    pub(super) proto: IpProtocol,
    pub(super) ip: IpHeader,
    /// The IP header's ECN field (RFC 3168 section 5).
    pub(super) ecn: u8,
    /// The sender's link address.
    pub(super) link_src: EthernetAddress,
    /// Where the IP payload starts in the frame (after the fixed header; IPv6 extension headers
    /// are part of it).
    pub(super) ip_payload: usize,
    /// The transport segment's bounds in the frame.
    pub(super) start: usize,
    pub(super) end: usize,
    /// The transport layer of a shard read it whole and found its checksum right (set when
    /// it is handed to another shard, which need not check again).
    pub(super) verified: bool,
}

impl Transport {
    /// The segment's source and destination ports (the transport layer checked they are there).
    pub(super) fn ports(&self, frame: &[u8]) -> (u16, u16) {
        let seg = &frame[self.start..self.end];
        match self.proto {
            IpProtocol::Tcp => {
                let p = TcpPacket::new_unchecked(seg);
                (p.src_port(), p.dst_port())
            }
            _ => {
                let p = UdpPacket::new_unchecked(seg);
                (p.src_port(), p.dst_port())
            }
        }
    }
}

/// What became of a TCP segment to us.
pub(super) enum TcpInput {
    /// Taken by a connection or listener, answered, or dropped and counted.
    Taken,
    /// No socket here takes it: for the process's other shards.
    Unplaced,
    /// Data for an established connection that may join the run of segments held for it
    /// ([`super::coalesce`]; the kinds of input live here, so that tcp and coalesce import
    /// this module and not each other).
    Coalesce(Candidate),
}

/// A data segment of an established connection that may join a run: where its payload lies in
/// its frame, and what TCP reads of its header.
#[derive(Clone, Copy, Debug)]
pub(super) struct Candidate {
    pub(super) id: SocketId,
    pub(super) repr: TcpRepr,
    pub(super) ecn: u8,
    pub(super) payload: (usize, usize),
}

/// Whether a segment TCP read may join a run at all: data with ACK (and PSH) alone, no IP
/// options nor IPv6 extension headers.
pub(super) fn may_join(t: &Transport, repr: &TcpRepr) -> bool {
    let plain_ip = match t.ip {
        IpHeader::V4(_) => t.start == ETH + wire::ipv4::HEADER_LEN,
        IpHeader::V6(_) => t.start == t.ip_payload,
    };
    plain_ip
        && repr.payload_len > 0
        && repr.ack_number.is_some()
        && (repr.flags - (TcpFlags::ACK | TcpFlags::PSH)).is_empty()
}
