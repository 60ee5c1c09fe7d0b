//! A received frame on its way up, read once: the Ethernet header, then the IPv4 or IPv6
//! header, then the layer above gets the views made so far (as smoltcp's `process_ethernet` ->
//! `process_ipv4` -> `process_tcp`): TCP and UDP to one of our addresses go to their layer (or
//! to the process's other shards), ICMP errors to the sockets they concern, and everything else
//! to the link layer ([`crate::iface`]), which answers ARP, neighbor discovery and echo in place
//! or names the reason for the drop. Every frame ends in exactly one of those.
//!
//! Packets to us from a source no peer may send from (Linux's martian sources: broadcast,
//! multicast, loopback, our own addresses, IPv4-mapped IPv6) are dropped here, before any layer
//! above IP sees them, and counted (`drop_bad_source`).
//!
//! Which frames are ours at the link layer: TCP and UDP (and ICMP errors) to our IP address are
//! taken when the frame is to our MAC or to any multicast address; the link layer's own answers
//! and drops need our MAC, broadcast or an IPv6 multicast group (33:33:..), and anything else
//! is counted as not for us.
//!
//! It reads frames and hands them on; it must not build frames (that is [`super::link`]) nor
//! keep state of its own beyond the neighbors it gleans from the frames of known connections.

use nic::{Nic, PacketBuf};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, Icmpv4Message, Icmpv4Packet, Icmpv6Message, Icmpv6Packet, IpAddress,
    IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr, Ipv6UpperLayer,
};

use super::icmp::IcmpError;
use super::transport::{Candidate, IpHeader, TcpInput, Transport};
use super::{Shard, ECN_MASK, ETH};
use crate::iface::{self, Answer, Drop, Ipv6Dst, Learned};
use crate::shard::neighbor::{NeighborState, Replace, Update};
use crate::shard::table::FourTuple;

/// How a frame was addressed at the link layer.
#[derive(Clone, Copy)]
struct Link {
    src: EthernetAddress,
    /// To our MAC, broadcast or an IPv6 multicast group: the link layer's to answer or count.
    answerable: bool,
}

impl Link {
    /// A drop the link layer counts, if the frame is its to count (else it was not for us).
    fn drop(self, reason: Drop) -> Outcome {
        Outcome::Drop(if self.answerable { reason } else { Drop::NotForUs })
    }
}

/// What became of a frame once read.
enum Outcome {
    /// Taken by a connection, a socket or the ICMP error handling (or dropped and counted by the
    /// transport layer).
    Done,
    /// TCP or UDP that no socket here takes: for the process's other shards.
    HandOff(Transport),
    /// Data for an established connection, held to be coalesced with what follows it in the
    /// burst ([`super::coalesce`]).
    Coalesce(Candidate),
    /// The link layer answers it in place.
    Answer(Answer),
    Drop(Drop),
}

impl<N: Nic> Shard<N> {
    /// A frame from the NIC: read once and handed to whatever it is for.
    pub(super) fn receive(&mut self, buf: N::Buf) {
        let outcome = self.process_ethernet(buf.data(), self.cfg.shard_count > 1);
        self.place(buf, outcome);
    }

    /// A frame this shard sent to one of its own addresses ([`super::loopback`]): read as the
    /// kernel's loopback reads it, trusting what the shard wrote itself (no checksum is checked:
    /// those left to the NIC were never filled; no martian-source check: the source is ours).
    pub(super) fn receive_looped(&mut self, buf: N::Buf) {
        let outcome = self.process_looped(buf.data(), self.cfg.shard_count > 1);
        self.place(buf, outcome);
    }

    /// Hands a frame read as `outcome` to whatever it is for.
    #[inline]
    fn place(&mut self, buf: N::Buf, outcome: Outcome) {
        match outcome {
            Outcome::Done => {}
            Outcome::HandOff(t) => self.hand_off(buf, t),
            Outcome::Coalesce(c) => self.hold(buf, c),
            Outcome::Answer(answer) => self.link.queue_answer(buf, answer),
            Outcome::Drop(reason) => self.link.stats_mut().count_drop(reason),
        }
    }

    /// A frame another shard of the process could not place, with what it read of it: one this
    /// shard holds, or its own when no shard holds it (then it is answered as a shard alone
    /// would, a RST or a port unreachable).
    pub(super) fn receive_transport(&mut self, buf: N::Buf, t: &Transport) {
        if let Outcome::Coalesce(c) = self.process_transport(buf.data(), t, false) {
            let (start, end) = c.payload;
            self.deliver(c.id, &c.repr, &[&buf.data()[start..end]], c.ecn);
        }
    }

    /// Whether this shard holds the connection (or TIME-WAIT entry) or the UDP socket that a
    /// frame handed off by another shard is for.
    pub(super) fn holds(&self, t: &Transport, frame: &[u8]) -> bool {
        let (sport, dport) = t.ports(frame);
        if t.proto == IpProtocol::Udp {
            return self.holds_datagram((t.dst, dport), (t.src, sport));
        }
        let tuple = FourTuple::new((t.dst, dport), (t.src, sport));
        self.conns.contains_key(&tuple) || self.time_wait_table.contains_key(&tuple)
    }

    fn hand_off(&mut self, buf: N::Buf, t: Transport) {
        let t = Transport { verified: true, ..t };
        match t.proto {
            IpProtocol::Tcp => self.stats.tcp_handed_off += 1,
            _ => self.stats.udp_handed_off += 1,
        }
        self.handed_off.push((buf, t));
    }

    fn process_ethernet(&mut self, frame: &[u8], may_hand_off: bool) -> Outcome {
        let Ok(eth) = EthernetFrame::new_checked(frame) else { return Outcome::Drop(Drop::Malformed) };
        let dst = eth.dst_addr();
        if dst != self.link.mac() && !dst.is_multicast() {
            return Outcome::Drop(Drop::NotForUs);
        }
        let answerable = dst == self.link.mac() || dst.is_broadcast() || (dst.0[0] == 0x33 && dst.0[1] == 0x33);
        let link = Link { src: eth.src_addr(), answerable };
        match eth.ethertype() {
            EtherType::Ipv4 => self.process_ipv4(frame, link, may_hand_off),
            EtherType::Ipv6 => self.process_ipv6(frame, link, may_hand_off),
            EtherType::Arp if answerable => {
                let Some(ours) = self.link.ipv4() else { return Outcome::Drop(Drop::NotForUs) };
                let mut learned = None;
                let answer = iface::arp(self.link.mac(), ours, eth.payload(), dst == self.link.mac(), &mut learned);
                self.heard_on_link(learned);
                answer.map_or_else(Outcome::Drop, Outcome::Answer)
            }
            _ => link.drop(Drop::Unhandled),
        }
    }

    /// What the shard sent itself: the IP header it wrote, then TCP and UDP to their layer and
    /// ICMP errors to the sockets they concern. Nothing else is sent to our own addresses.
    fn process_looped(&mut self, frame: &[u8], may_hand_off: bool) -> Outcome {
        let link = Link { src: self.link.mac(), answerable: true };
        let (src, dst, ip, ecn, ip_payload, end) = match EthernetFrame::new_unchecked(frame).ethertype() {
            EtherType::Ipv4 => {
                let Ok(packet) = Ipv4Packet::new_checked(&frame[ETH..]) else { return link.drop(Drop::Malformed) };
                let Ok(repr) = Ipv4Repr::parse(&packet, false) else { return link.drop(Drop::Malformed) };
                let ip_payload = ETH + usize::from(packet.header_len());
                if repr.next_header == IpProtocol::Icmp {
                    return self.process_icmpv4(&repr, packet.payload(), ip_payload, link);
                }
                let end = ETH + usize::from(packet.total_len());
                (
                    IpAddress::V4(repr.src_addr),
                    IpAddress::V4(repr.dst_addr),
                    IpHeader::V4(repr),
                    packet.ecn(),
                    ip_payload,
                    end,
                )
            }
            EtherType::Ipv6 => {
                let Ok(packet) = Ipv6Packet::new_checked(&frame[ETH..]) else { return link.drop(Drop::Malformed) };
                let Ok(repr) = Ipv6Repr::parse(&packet) else { return link.drop(Drop::Malformed) };
                let ip_payload = ETH + wire::ipv6::HEADER_LEN;
                let end = ip_payload + repr.payload_len;
                if repr.next_header == IpProtocol::Icmpv6 {
                    let Some(ours) = self.link.ipv6() else { return link.drop(Drop::Unhandled) };
                    let to = Ipv6Dst { ours, link_local: self.link.ipv6_link_local(), to_us: true, to_group: false };
                    return self.process_icmpv6(&repr, to, frame, (ip_payload, end), link);
                }
                let ecn = packet.traffic_class() & ECN_MASK;
                (IpAddress::V6(repr.src_addr), IpAddress::V6(repr.dst_addr), IpHeader::V6(repr), ecn, ip_payload, end)
            }
            _ => return link.drop(Drop::Unhandled),
        };
        let proto = match ip {
            IpHeader::V4(r) => r.next_header,
            IpHeader::V6(r) => r.next_header,
        };
        match proto {
            IpProtocol::Tcp | IpProtocol::Udp => {
                let t = Transport {
                    src,
                    dst,
                    proto,
                    ip,
                    ecn,
                    link_src: self.link.mac(),
                    ip_payload,
                    start: ip_payload,
                    end,
                    verified: true,
                };
                self.process_transport(frame, &t, may_hand_off)
            }
            _ => link.drop(Drop::Unhandled),
        }
    }

    fn process_ipv4(&mut self, frame: &[u8], link: Link, may_hand_off: bool) -> Outcome {
        let Some(ours) = self.link.ipv4() else { return Outcome::Drop(Drop::NotForUs) };
        let ip = match Ipv4Packet::new_checked(&frame[ETH..]) {
            Ok(ip) => ip,
            Err(e) => return link.drop(e.into()),
        };
        if ip.dst_addr() != ours {
            return Outcome::Drop(Drop::NotForUs);
        }
        if ip.is_fragment() {
            return link.drop(Drop::Fragment);
        }
        let repr = match Ipv4Repr::parse(&ip, self.link.checksums().verify_ipv4) {
            Ok(repr) => repr,
            Err(e) => return link.drop(e.into()),
        };
        if self.martian_source_v4(repr.src_addr, ours) {
            return Outcome::Drop(Drop::BadSource);
        }
        let ip_payload = ETH + usize::from(ip.header_len());
        match repr.next_header {
            IpProtocol::Tcp | IpProtocol::Udp => {
                let t = Transport {
                    src: IpAddress::V4(repr.src_addr),
                    dst: IpAddress::V4(ours),
                    proto: repr.next_header,
                    ip: IpHeader::V4(repr),
                    ecn: ip.ecn(),
                    link_src: link.src,
                    ip_payload,
                    start: ip_payload,
                    end: ETH + usize::from(ip.total_len()),
                    verified: false,
                };
                self.process_transport(frame, &t, may_hand_off)
            }
            IpProtocol::Icmp => self.process_icmpv4(&repr, ip.payload(), ip_payload, link),
            _ => link.drop(Drop::Unhandled),
        }
    }

    /// An ICMP message (`at` in the frame) to us: an error for a socket, else the link layer's.
    fn process_icmpv4(&mut self, ip: &Ipv4Repr, message: &[u8], at: usize, link: Link) -> Outcome {
        let icmp = match Icmpv4Packet::new_checked(message) {
            Ok(icmp) => icmp,
            Err(e) => return link.drop(e.into()),
        };
        if !icmp.verify_checksum() {
            return link.drop(Drop::Checksum);
        }
        if icmp.msg_type() == Icmpv4Message::DstUnreachable {
            if let Some(err) = IcmpError::from_v4(&icmp) {
                if self.icmp_error_input(&err) {
                    return Outcome::Done;
                }
            }
        }
        if !link.answerable {
            return Outcome::Drop(Drop::NotForUs);
        }
        iface::icmpv4(ip, &icmp, at).map_or_else(Outcome::Drop, Outcome::Answer)
    }

    fn process_ipv6(&mut self, frame: &[u8], link: Link, may_hand_off: bool) -> Outcome {
        let Some(ours) = self.link.ipv6() else { return Outcome::Drop(Drop::NotForUs) };
        let ip = match Ipv6Packet::new_checked(&frame[ETH..]) {
            Ok(ip) => ip,
            Err(e) => return link.drop(e.into()),
        };
        let repr = match Ipv6Repr::parse(&ip) {
            Ok(repr) => repr,
            Err(e) => return link.drop(e.into()),
        };
        let ll = self.link.ipv6_link_local();
        let dst = repr.dst_addr;
        let to = Ipv6Dst {
            ours,
            link_local: ll,
            to_us: dst == ours || dst == ll,
            to_group: dst == Ipv6Address::LINK_LOCAL_ALL_NODES
                || dst == ours.solicited_node()
                || dst == ll.solicited_node(),
        };
        if !to.to_us && !to.to_group {
            return Outcome::Drop(Drop::NotForUs);
        }
        if self.bad_source_v6(repr.src_addr, ours) {
            return Outcome::Drop(Drop::BadSource);
        }
        let (proto, offset) = match ip.upper_layer() {
            Ok(Ipv6UpperLayer::Protocol { protocol, offset }) => (protocol, offset),
            Ok(Ipv6UpperLayer::Fragment { .. }) => return link.drop(Drop::Fragment),
            Err(e) => return link.drop(e.into()),
        };
        let ip_payload = ETH + wire::ipv6::HEADER_LEN;
        let start = ip_payload + offset;
        let end = ip_payload + repr.payload_len;
        match proto {
            // Only neighbor discovery speaks from `::` (duplicate address detection, RFC 4862
            // section 5.4.2); a connection or a reply to it would have no address to go to.
            IpProtocol::Tcp | IpProtocol::Udp if repr.src_addr.is_unspecified() => Outcome::Drop(Drop::BadSource),
            IpProtocol::Tcp | IpProtocol::Udp if to.to_us && start <= end => {
                let t = Transport {
                    src: IpAddress::V6(repr.src_addr),
                    dst: IpAddress::V6(dst),
                    proto,
                    ip: IpHeader::V6(repr),
                    ecn: ip.traffic_class() & ECN_MASK,
                    link_src: link.src,
                    ip_payload,
                    start,
                    end,
                    verified: false,
                };
                self.process_transport(frame, &t, may_hand_off)
            }
            IpProtocol::Icmpv6 if start <= end => self.process_icmpv6(&repr, to, frame, (start, end), link),
            IpProtocol::Icmpv6 => link.drop(Drop::Malformed),
            _ => link.drop(Drop::Unhandled),
        }
    }

    /// An ICMPv6 message (at `start..end` in the frame): an error for a socket, else the link
    /// layer's.
    fn process_icmpv6(
        &mut self,
        ip: &Ipv6Repr,
        to: Ipv6Dst,
        frame: &[u8],
        (start, end): (usize, usize),
        link: Link,
    ) -> Outcome {
        let icmp = match Icmpv6Packet::new_checked(&frame[start..end]) {
            Ok(icmp) => icmp,
            Err(e) => return link.drop(e.into()),
        };
        if !icmp.verify_checksum(&ip.src_addr, &ip.dst_addr) {
            return link.drop(Drop::Checksum);
        }
        let error = matches!(icmp.msg_type(), Icmpv6Message::DstUnreachable | Icmpv6Message::PktTooBig);
        if error && to.to_us {
            if let Some(err) = IcmpError::from_v6(&icmp, &ip.src_addr, &ip.dst_addr) {
                if self.icmp_error_input(&err) {
                    return Outcome::Done;
                }
            }
        }
        if !link.answerable {
            return Outcome::Drop(Drop::NotForUs);
        }
        let mut learned = None;
        let answer = iface::icmpv6(ip, to, &icmp, (start, end - start), link.src, &mut learned);
        self.heard_on_link(learned);
        answer.map_or_else(Outcome::Drop, Outcome::Answer)
    }

    /// Whether an IPv4 packet to us comes from a martian source, as Linux's input route says
    /// (`ip_route_input_slow`): multicast, limited broadcast, `0.0.0.0/8` (which Linux accepts
    /// only to the limited broadcast or `0.0.0.0` destination, never to a unicast address),
    /// `127.0.0.0/8` (`route_localnet` off, the default); and its `fib_validate_source`: a
    /// source that is not unicast in the routing table, our own address (`accept_local` off) or
    /// our subnet's directed broadcast. Linux counts them in `in_martian_src`
    /// (/proc/net/stat/rt_cache).
    fn martian_source_v4(&self, src: Ipv4Address, ours: Ipv4Address) -> bool {
        src.is_multicast()
            || src.is_broadcast()
            || src.0[0] == 0
            || src.is_loopback()
            || src == ours
            || self.link.routes().is_directed_broadcast(src)
    }

    /// Whether an IPv6 packet to us comes from a source no peer may send from. Linux's
    /// `ip6_rcv_core` drops multicast (RFC 4291 section 2.7) and loopback (section 2.5.3)
    /// sources (`Ip6InAddrErrors`). IPv4-mapped sources (`::ffff:a.b.c.d`, section 2.5.5.2)
    /// Linux drops in `tcp_v6_conn_request` (`Ip6InHdrErrors`) since 5.12 and in `ip6_rcv_core`
    /// before that; here every 4-tuple stores an IPv4 address IPv4-mapped, so one in an IPv6
    /// header would alias an IPv4 flow (a SYN from one once crashed the shard on its SYN-ACK):
    /// dropped for every protocol. Our own addresses as a source can only be forged or looped
    /// back on this link, and an answer would be addressed to ourselves.
    fn bad_source_v6(&self, src: Ipv6Address, ours: Ipv6Address) -> bool {
        src.is_multicast()
            || src.is_loopback()
            || src.is_ipv4_mapped()
            || src == ours
            || src == self.link.ipv6_link_local()
    }

    /// A TCP or UDP packet to us, to its layer; handed off when no socket here takes it and
    /// `may_hand_off` (the process's other shards have not seen it yet).
    fn process_transport(&mut self, frame: &[u8], t: &Transport, may_hand_off: bool) -> Outcome {
        let seg = &frame[t.start..t.end];
        let placed = match t.proto {
            IpProtocol::Tcp => self.tcp_input(t, seg, may_hand_off),
            _ if self.udp_input(t, &frame[t.ip_payload..t.end], seg, may_hand_off) => TcpInput::Unplaced,
            _ => TcpInput::Taken,
        };
        match placed {
            TcpInput::Taken => Outcome::Done,
            TcpInput::Unplaced => Outcome::HandOff(*t),
            TcpInput::Coalesce(c) => Outcome::Coalesce(c),
        }
    }

    /// ARP or neighbor discovery named a neighbor: the cache learns it, and with several
    /// shards, so do the others.
    fn heard_on_link(&mut self, learned: Option<Learned>) {
        if let Some(l) = learned {
            if self.cfg.shard_count > 1 {
                self.link.heard(l);
            }
            self.link.learn(l, self.now);
        }
    }

    /// A frame of a known connection (one the transport layer checked and placed: see
    /// `ShardConfig::glean_neighbors`) came from `t.link_src` (a shared interface, where the
    /// answers to our own ARP requests and probes may go to another process's queue, so the
    /// peer's own frames stand in for them). It may only resolve an incomplete entry for its
    /// sender (the packets that waited leave) or confirm a stale entry with that very address:
    /// it never makes an entry nor changes an address ([`Replace::Never`]), so a forged segment
    /// cannot redirect our traffic. Without it an entry that expired would be probed, fail when
    /// the answer went elsewhere, and hold our packets for a second or more (seen as SYN-ACKs
    /// that never came, with two nginx workers).
    pub(super) fn glean(&mut self, t: &Transport) {
        let (src, mac) = (t.src, t.link_src);
        if !self.cfg.glean_neighbors || !self.link.routes().is_on_link(src) || mac.is_multicast() {
            return;
        }
        let wanted = match self.link.neighbors().state(src, self.now) {
            Some((NeighborState::Incomplete, _)) => true,
            Some((NeighborState::Stale, Some(known))) => known == mac,
            _ => false,
        };
        if wanted {
            let update = Update { create: false, reachable: true, replace: Replace::Never };
            self.link.learn(Learned { ip: src, mac, update }, self.now);
        }
    }
}
