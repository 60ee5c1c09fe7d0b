//! ICMP errors to one of our addresses: what the message says and the start of the packet of
//! ours it quotes, read from the ICMP message ingress made (its checksum already checked), and
//! handed to what they concern: path MTU to the TCP connection, "unreachable" to the UDP socket.
//!
//! It must not answer anything: an error that concerns nothing here goes back to ingress, which
//! counts it.

use nic::Nic;
use wire::{
    Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6Repr, IpAddress,
    IpProtocol, Ipv6Address,
};

use super::{Errno, Shard};
use crate::shard::table::FourTuple;

/// What an ICMP error says about a packet we sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum IcmpErrorKind {
    /// "Fragmentation needed" (IPv4) or "packet too big" (IPv6): the path's MTU.
    TooBig { mtu: u32 },
    /// Destination unreachable, with the errno Linux reports to a connected socket for its code
    /// (`None`: a code Linux does not report, icmp_err_convert's non-fatal ones).
    Unreachable(Option<Errno>),
}

/// An ICMP error and the packet it quotes.
pub(super) struct IcmpError<'a> {
    kind: IcmpErrorKind,
    /// The quoted packet's protocol, source (ours) and destination (the peer).
    proto: IpProtocol,
    src: IpAddress,
    dst: IpAddress,
    /// The quoted bytes after its IP header (the transport header first).
    data: &'a [u8],
    /// The length of the quoted IP header (for the transport payload the path carries).
    ip_header_len: usize,
}

impl<'a> IcmpError<'a> {
    /// An ICMP message to us (its checksum checked): the error it is, if one we act on.
    pub(super) fn from_v4(icmp: &Icmpv4Packet<&'a [u8]>) -> Option<IcmpError<'a>> {
        let (kind, header, data) = match Icmpv4Repr::parse(icmp, false).ok()? {
            Icmpv4Repr::DstUnreachable { reason: Icmpv4DstUnreachable::FragRequired, next_hop_mtu, header, data } => {
                // RFC 1191: a router that does not say is treated as the IPv4 minimum.
                let mtu = if next_hop_mtu == 0 { 576 } else { next_hop_mtu };
                (IcmpErrorKind::TooBig { mtu: u32::from(mtu) }, header, data)
            }
            Icmpv4Repr::DstUnreachable { reason, header, data, .. } => {
                (IcmpErrorKind::Unreachable(unreachable_errno_v4(reason)), header, data)
            }
            _ => return None,
        };
        Some(IcmpError {
            kind,
            proto: header.next_header,
            src: IpAddress::V4(header.src_addr),
            dst: IpAddress::V4(header.dst_addr),
            data,
            ip_header_len: wire::ipv4::HEADER_LEN,
        })
    }

    /// An ICMPv6 message from `src` to `dst` (us; its checksum checked): the error it is, if one
    /// we act on.
    pub(super) fn from_v6(icmp: &Icmpv6Packet<&'a [u8]>, src: &Ipv6Address, dst: &Ipv6Address) -> Option<Self> {
        let (kind, header, data) = match Icmpv6Repr::parse(icmp, src, dst, false).ok()? {
            Icmpv6Repr::PktTooBig { mtu, header, data } => (IcmpErrorKind::TooBig { mtu }, header, data),
            Icmpv6Repr::DstUnreachable { reason, header, data } => {
                (IcmpErrorKind::Unreachable(unreachable_errno_v6(reason)), header, data)
            }
            _ => return None,
        };
        Some(IcmpError {
            kind,
            proto: header.next_header,
            src: IpAddress::V6(header.src_addr),
            dst: IpAddress::V6(header.dst_addr),
            data,
            ip_header_len: wire::ipv6::HEADER_LEN,
        })
    }

    /// The quoted transport ports (source: ours).
    fn ports(&self) -> Option<(u16, u16)> {
        let p = self.data.get(..4)?;
        Some((u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]])))
    }
}

fn unreachable_errno_v4(code: Icmpv4DstUnreachable) -> Option<Errno> {
    match u8::from(code) {
        2 => Some(Errno::ENOPROTOOPT),
        3 => Some(Errno::ECONNREFUSED),
        9 | 10 => Some(Errno::EACCES),
        13 => Some(Errno::EHOSTUNREACH),
        _ => None,
    }
}

fn unreachable_errno_v6(code: Icmpv6DstUnreachable) -> Option<Errno> {
    match u8::from(code) {
        1 | 5 | 6 => Some(Errno::EACCES),
        4 => Some(Errno::ECONNREFUSED),
        _ => None,
    }
}

/// The IPv6 minimum link MTU (RFC 8200 section 5).
const IPV6_MIN_MTU: u32 = 1280;

impl<N: Nic> Shard<N> {
    /// Hands an ICMP error to the connection or socket it concerns; false when it concerns none
    /// (then it is the link layer's to count).
    pub(super) fn icmp_error_input(&mut self, err: &IcmpError) -> bool {
        match (err.kind, err.proto, err.ports()) {
            // RFC 8201 section 4: the path MTU is never taken below the IPv6 minimum. Linux's
            // `tcp_v6_err` ignores such a message outright (not believed, counted as such).
            (IcmpErrorKind::TooBig { mtu }, IpProtocol::Tcp, Some(_))
                if matches!(err.dst, IpAddress::V6(_)) && mtu < IPV6_MIN_MTU =>
            {
                self.stats.icmp_too_big_ignored += 1;
                true
            }
            (IcmpErrorKind::TooBig { mtu }, IpProtocol::Tcp, Some((sport, dport))) if err.data.len() >= 8 => {
                let d = err.data;
                let seq = u32::from_be_bytes([d[4], d[5], d[6], d[7]]);
                let headers = (err.ip_header_len + wire::tcp::HEADER_LEN) as u32;
                let mss = mtu.saturating_sub(headers).min(u32::from(u16::MAX)) as u16;
                let tuple = FourTuple::new((err.src, sport), (err.dst, dport));
                self.path_mtu(tuple, mss, seq);
                true
            }
            (IcmpErrorKind::Unreachable(errno), IpProtocol::Udp, Some((sport, dport))) => {
                let (local, remote) = ((err.src, sport), (err.dst, dport));
                self.udp_unreachable(local, remote, errno);
                true
            }
            _ => false,
        }
    }
}
