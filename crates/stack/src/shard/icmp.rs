//! ICMP errors to one of our addresses, parsed once: what the message says and the start of the
//! packet of ours it quotes. Path MTU (TCP) and UDP's "port unreachable" both read them here.

use wire::{
    EtherType, EthernetFrame, Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, Icmpv6DstUnreachable, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, Ipv6UpperLayer,
};

use super::{Errno, Shard};
use nic::Nic;

/// What an ICMP error says about a packet we sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum IcmpErrorKind {
    /// "Fragmentation needed" (IPv4) or "packet too big" (IPv6): the path's MTU.
    TooBig { mtu: u32 },
    /// Destination unreachable, with the errno Linux reports to a connected socket for its code
    /// (`None`: a code Linux does not report, icmp_err_convert's non-fatal ones).
    Unreachable(Option<Errno>),
}

/// An ICMP error and the packet it quotes.
pub(super) struct IcmpError<'a> {
    pub kind: IcmpErrorKind,
    /// The quoted packet's protocol, source (ours) and destination (the peer).
    pub proto: IpProtocol,
    pub src: IpAddress,
    pub dst: IpAddress,
    /// The quoted bytes after its IP header (the transport header first).
    pub data: &'a [u8],
    /// The length of the quoted IP header (for the transport payload the path carries).
    pub ip_header_len: usize,
}

impl<'a> IcmpError<'a> {
    /// The quoted transport ports (source: ours).
    pub fn ports(&self) -> Option<(u16, u16)> {
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

impl<N: Nic> Shard<N> {
    /// The ICMP error `frame` carries, if it is one to one of our addresses.
    pub(super) fn icmp_error<'a>(&self, frame: &'a [u8]) -> Option<IcmpError<'a>> {
        let eth = EthernetFrame::new_checked(frame).ok()?;
        match eth.ethertype() {
            EtherType::Ipv4 => {
                let ip = Ipv4Packet::new_checked(&frame[super::ETH..]).ok()?;
                if Some(ip.dst_addr()) != self.ipv4 || ip.next_header() != IpProtocol::Icmp || ip.is_fragment() {
                    return None;
                }
                Ipv4Repr::parse(&ip, true).ok()?;
                let start = super::ETH + ip.header_len() as usize;
                let icmp = Icmpv4Packet::new_checked(frame.get(start..super::ETH + ip.total_len() as usize)?).ok()?;
                let (kind, header, data) = match Icmpv4Repr::parse(&icmp, true).ok()? {
                    Icmpv4Repr::DstUnreachable {
                        reason: Icmpv4DstUnreachable::FragRequired,
                        next_hop_mtu,
                        header,
                        data,
                    } => {
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
            EtherType::Ipv6 => {
                let ip = Ipv6Packet::new_checked(&frame[super::ETH..]).ok()?;
                let repr = Ipv6Repr::parse(&ip).ok()?;
                if Some(repr.dst_addr) != self.ipv6 && repr.dst_addr != self.ipv6_link_local {
                    return None;
                }
                let Ipv6UpperLayer::Protocol { protocol: IpProtocol::Icmpv6, offset } = ip.upper_layer().ok()? else {
                    return None;
                };
                let start = super::ETH + wire::ipv6::HEADER_LEN + offset;
                let end = super::ETH + wire::ipv6::HEADER_LEN + repr.payload_len;
                let icmp = Icmpv6Packet::new_checked(frame.get(start..end)?).ok()?;
                let (kind, header, data) = match Icmpv6Repr::parse(&icmp, &repr.src_addr, &repr.dst_addr, true).ok()? {
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
            _ => None,
        }
    }
}
