//! The link-layer control protocols of a shard, the ones that need no socket: ARP, IPv6
//! neighbor discovery, ICMP and ICMPv6 echo. Each frame is answered in the received buffer
//! itself (no copy, no allocation): headers are rewritten in place, the frame is trimmed, and the
//! same buffer goes out in the next tx burst. Neighbors seen on the way are reported to the
//! shard's neighbor cache.
//!
//! It must not know about connections: TCP and UDP are the shard's ([`crate::shard`]).

use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, Icmpv4Message, Icmpv4Packet,
    Icmpv6Packet, Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet,
    Ipv6Repr, Ipv6UpperLayer, NdiscNeighborFlags, NdiscRepr,
};

/// What happened to frames, for `pronghorn stat` and tests. Every frame received ends in exactly
/// one of: answered, or one of the `drop_*` counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IfaceStats {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub arp_replies: u64,
    pub nd_adverts: u64,
    pub echo_replies: u64,
    /// Addressed to another host or a group we are not in.
    pub drop_not_for_us: u64,
    /// Too short, bad lengths or bad fields.
    pub drop_malformed: u64,
    /// A bad IPv4 header or ICMP checksum.
    pub drop_checksum: u64,
    /// IPv4 or IPv6 fragments: not reassembled (yet), dropped and counted.
    pub drop_fragment: u64,
    /// Well formed, but nothing here handles it (TCP/UDP today, other ICMP types, other ethertypes).
    pub drop_unhandled: u64,
    /// Replies dropped because the NIC's tx queue was full.
    pub drop_tx_full: u64,
}

impl IfaceStats {
    pub(crate) fn count_drop(&mut self, d: Drop) {
        *match d {
            Drop::NotForUs => &mut self.drop_not_for_us,
            Drop::Malformed => &mut self.drop_malformed,
            Drop::Checksum => &mut self.drop_checksum,
            Drop::Fragment => &mut self.drop_fragment,
            Drop::Unhandled => &mut self.drop_unhandled,
        } += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drop_not_for_us
            + self.drop_malformed
            + self.drop_checksum
            + self.drop_fragment
            + self.drop_unhandled
            + self.drop_tx_full
    }
}

/// What to do with a received frame.
pub(crate) enum Verdict {
    /// It was rewritten in place into a reply of this length: send it.
    Reply(usize),
    Drop(Drop),
}

pub(crate) enum Drop {
    NotForUs,
    Malformed,
    Checksum,
    Fragment,
    Unhandled,
}

impl From<wire::Error> for Drop {
    fn from(e: wire::Error) -> Drop {
        match e {
            wire::Error::Checksum => Drop::Checksum,
            wire::Error::Unsupported => Drop::Unhandled,
            wire::Error::Truncated | wire::Error::Malformed => Drop::Malformed,
        }
    }
}

const TTL: u8 = 64;

/// A neighbor's link-layer address seen in ARP or neighbor discovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Learned {
    pub ip: IpAddress,
    pub mac: EthernetAddress,
    /// An answer to our own query (ARP reply, neighbor advertisement), not just a sighting.
    pub answer: bool,
}

/// Answers ARP, neighbor solicitations and echo requests in place; reports neighbors seen.
pub(crate) fn handle_frame(
    mac: EthernetAddress,
    ipv4: Option<Ipv4Address>,
    ipv6: Option<Ipv6Address>,
    ll6: Ipv6Address,
    stats: &mut IfaceStats,
    frame: &mut [u8],
    learned: &mut Option<Learned>,
) -> Verdict {
    let eth = match EthernetFrame::new_checked(&*frame) {
        Ok(e) => e,
        Err(_) => return Verdict::Drop(Drop::Malformed),
    };
    let dst = eth.dst_addr();
    let ethertype = eth.ethertype();
    let for_us = dst == mac || dst.is_broadcast() || (dst.0[0] == 0x33 && dst.0[1] == 0x33);
    if !for_us {
        return Verdict::Drop(Drop::NotForUs);
    }
    let r = match ethertype {
        EtherType::Arp => {
            ipv4.map_or(Err(Drop::NotForUs), |ip| arp(mac, ip, frame, learned).inspect(|_| stats.arp_replies += 1))
        }
        EtherType::Ipv4 => {
            ipv4.map_or(Err(Drop::NotForUs), |ip| ipv4_in(mac, ip, frame).inspect(|_| stats.echo_replies += 1))
        }
        EtherType::Ipv6 => ipv6.map_or(Err(Drop::NotForUs), |ip| ipv6_in(mac, ip, ll6, stats, frame, learned)),
        _ => Err(Drop::Unhandled),
    };
    match r {
        Ok(len) => Verdict::Reply(len),
        Err(d) => Verdict::Drop(d),
    }
}

/// Turns the Ethernet header of `frame` around: the reply goes back where it came from.
fn eth_reply(mac: EthernetAddress, frame: &mut [u8]) {
    let mut eth = EthernetFrame::new_unchecked(frame);
    let src = eth.src_addr();
    eth.set_dst_addr(src);
    eth.set_src_addr(mac);
}

fn arp(mac: EthernetAddress, ip: Ipv4Address, frame: &mut [u8], learned: &mut Option<Learned>) -> Result<usize, Drop> {
    let payload = &frame[wire::ethernet::HEADER_LEN..];
    let req = ArpRepr::parse(&ArpPacket::new_checked(payload)?)?;
    let ArpRepr::EthernetIpv4 { operation, source_hardware_addr, source_protocol_addr, target_protocol_addr, .. } = req;
    if target_protocol_addr != ip {
        return Err(Drop::NotForUs);
    }
    if source_protocol_addr.is_unicast() && source_hardware_addr.is_unicast() {
        *learned = Some(Learned {
            ip: IpAddress::V4(source_protocol_addr),
            mac: source_hardware_addr,
            answer: operation == ArpOperation::Reply,
        });
    }
    if operation != ArpOperation::Request {
        return Err(Drop::Unhandled);
    }
    let reply = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: source_hardware_addr,
        target_protocol_addr: source_protocol_addr,
    };
    let len = wire::ethernet::HEADER_LEN + reply.buffer_len();
    reply.emit(&mut ArpPacket::new_unchecked(&mut frame[wire::ethernet::HEADER_LEN..len]));
    let mut eth = EthernetFrame::new_unchecked(&mut *frame);
    eth.set_dst_addr(source_hardware_addr);
    eth.set_src_addr(mac);
    Ok(len)
}

fn ipv4_in(mac: EthernetAddress, ip: Ipv4Address, frame: &mut [u8]) -> Result<usize, Drop> {
    const ETH: usize = wire::ethernet::HEADER_LEN;
    let packet = Ipv4Packet::new_checked(&frame[ETH..])?;
    if packet.dst_addr() != ip {
        return Err(Drop::NotForUs);
    }
    if packet.is_fragment() {
        return Err(Drop::Fragment);
    }
    let repr = Ipv4Repr::parse(&packet, true)?;
    if repr.next_header != IpProtocol::Icmp {
        return Err(Drop::Unhandled);
    }
    let header_len = packet.header_len() as usize;
    let icmp_len = repr.payload_len;
    let icmp = Icmpv4Packet::new_checked(&frame[ETH + header_len..ETH + header_len + icmp_len])?;
    if !icmp.verify_checksum() {
        return Err(Drop::Checksum);
    }
    if icmp.msg_type() != Icmpv4Message::EchoRequest {
        return Err(Drop::Unhandled);
    }
    // The reply carries no IP options: move the ICMP message up if the request had some.
    let ip_start = ETH;
    let icmp_start = ip_start + wire::ipv4::HEADER_LEN;
    frame.copy_within(ETH + header_len..ETH + header_len + icmp_len, icmp_start);
    let reply = Ipv4Repr {
        src_addr: ip,
        dst_addr: repr.src_addr,
        next_header: IpProtocol::Icmp,
        payload_len: icmp_len,
        hop_limit: TTL,
    };
    reply.emit(&mut Ipv4Packet::new_unchecked(&mut frame[ip_start..icmp_start]), true);
    let mut icmp = Icmpv4Packet::new_unchecked(&mut frame[icmp_start..icmp_start + icmp_len]);
    icmp.set_msg_type(Icmpv4Message::EchoReply);
    icmp.set_msg_code(0);
    icmp.fill_checksum();
    eth_reply(mac, frame);
    Ok(icmp_start + icmp_len)
}

fn ipv6_in(
    mac: EthernetAddress,
    ip: Ipv6Address,
    ll6: Ipv6Address,
    stats: &mut IfaceStats,
    frame: &mut [u8],
    learned: &mut Option<Learned>,
) -> Result<usize, Drop> {
    const ETH: usize = wire::ethernet::HEADER_LEN;
    let packet = Ipv6Packet::new_checked(&frame[ETH..])?;
    let repr = Ipv6Repr::parse(&packet)?;
    let dst = repr.dst_addr;
    let ours = dst == ip || dst == ll6;
    let group = dst == Ipv6Address::LINK_LOCAL_ALL_NODES || dst == ip.solicited_node() || dst == ll6.solicited_node();
    if !ours && !group {
        return Err(Drop::NotForUs);
    }
    let (proto, offset) = match packet.upper_layer()? {
        Ipv6UpperLayer::Protocol { protocol, offset } => (protocol, offset),
        Ipv6UpperLayer::Fragment { .. } => return Err(Drop::Fragment),
    };
    if proto != IpProtocol::Icmpv6 {
        return Err(Drop::Unhandled);
    }
    let icmp_start = ETH + wire::ipv6::HEADER_LEN + offset;
    let icmp_end = ETH + wire::ipv6::HEADER_LEN + repr.payload_len;
    if icmp_start > icmp_end {
        return Err(Drop::Malformed);
    }
    let icmp = Icmpv6Packet::new_checked(&frame[icmp_start..icmp_end])?;
    if !icmp.verify_checksum(&repr.src_addr, &repr.dst_addr) {
        return Err(Drop::Checksum);
    }
    match icmp.msg_type() {
        wire::Icmpv6Message::EchoRequest if ours => {
            let len = icmp_end - icmp_start;
            // The reply has no extension headers: move the message up if the request had some.
            let new_start = ETH + wire::ipv6::HEADER_LEN;
            frame.copy_within(icmp_start..icmp_end, new_start);
            let reply = Ipv6Repr {
                src_addr: dst,
                dst_addr: repr.src_addr,
                next_header: IpProtocol::Icmpv6,
                payload_len: len,
                hop_limit: TTL,
            };
            reply.emit(&mut Ipv6Packet::new_unchecked(&mut frame[ETH..new_start]));
            let mut icmp = Icmpv6Packet::new_unchecked(&mut frame[new_start..new_start + len]);
            icmp.set_msg_type(wire::Icmpv6Message::EchoReply);
            icmp.set_msg_code(0);
            icmp.fill_checksum(&reply.src_addr, &reply.dst_addr);
            eth_reply(mac, frame);
            stats.echo_replies += 1;
            Ok(new_start + len)
        }
        wire::Icmpv6Message::NeighborSolicit => {
            let ns = Icmpv6Repr::parse(&icmp, &repr.src_addr, &repr.dst_addr, false)?;
            let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr }) = ns else {
                return Err(Drop::Malformed);
            };
            // RFC 4861 7.1.1: only from the link itself.
            if repr.hop_limit != 255 {
                return Err(Drop::Malformed);
            }
            if target != ip && target != ll6 {
                return Err(Drop::NotForUs);
            }
            if let (Some(mac), false) = (lladdr, repr.src_addr.is_unspecified()) {
                *learned = Some(Learned { ip: IpAddress::V6(repr.src_addr), mac, answer: false });
            }
            // RFC 4861 7.2.4: to the soliciting address, or to all nodes from the unspecified one.
            let solicited = !repr.src_addr.is_unspecified();
            let (to_ip, to_mac) = if solicited {
                (repr.src_addr, EthernetFrame::new_unchecked(&*frame).src_addr())
            } else {
                (Ipv6Address::LINK_LOCAL_ALL_NODES, EthernetAddress([0x33, 0x33, 0, 0, 0, 1]))
            };
            let flags = NdiscNeighborFlags(if solicited {
                NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE
            } else {
                NdiscNeighborFlags::OVERRIDE
            });
            let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr: target, lladdr: Some(mac) });
            let start = ETH + wire::ipv6::HEADER_LEN;
            let len = na.buffer_len();
            let reply = Ipv6Repr {
                src_addr: target,
                dst_addr: to_ip,
                next_header: IpProtocol::Icmpv6,
                payload_len: len,
                hop_limit: 255,
            };
            reply.emit(&mut Ipv6Packet::new_unchecked(&mut frame[ETH..start]));
            na.emit(
                &mut Icmpv6Packet::new_unchecked(&mut frame[start..start + len]),
                &reply.src_addr,
                &reply.dst_addr,
                true,
            );
            let mut eth = EthernetFrame::new_unchecked(&mut *frame);
            eth.set_dst_addr(to_mac);
            eth.set_src_addr(mac);
            stats.nd_adverts += 1;
            Ok(start + len)
        }
        wire::Icmpv6Message::NeighborAdvert if ours || group => {
            let na = Icmpv6Repr::parse(&icmp, &repr.src_addr, &repr.dst_addr, false)?;
            if repr.hop_limit != 255 {
                return Err(Drop::Malformed);
            }
            if let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { target_addr, lladdr: Some(mac), .. }) = na {
                *learned = Some(Learned { ip: IpAddress::V6(target_addr), mac, answer: true });
            }
            Err(Drop::Unhandled)
        }
        _ => Err(Drop::Unhandled),
    }
}
