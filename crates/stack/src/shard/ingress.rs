//! A received frame on its way up: TCP and UDP to one of our addresses go to their layer, ICMP
//! errors to the sockets they concern, and everything else to the link layer ([`crate::iface`]),
//! which answers ARP, neighbor discovery and echo in place or counts the drop.
//!
//! It reads frames and hands them on; it must not keep state of its own beyond the neighbors it
//! gleans.

use nic::{Nic, PacketBuf};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    Ipv6UpperLayer,
};

use super::icmp::IcmpErrorKind;
use super::{Shard, ECN_MASK, ETH};
use crate::iface::{self, Learned, Verdict};
use crate::neighbor::NeighborState;
use crate::table::FourTuple;

/// Where a TCP or UDP segment to us lies in its frame, and what its IP header says.
pub(super) struct Transport {
    pub(super) src: IpAddress,
    pub(super) dst: IpAddress,
    pub(super) proto: IpProtocol,
    /// The transport segment's bounds in the frame.
    pub(super) start: usize,
    pub(super) end: usize,
    /// The IP header's ECN field (RFC 3168 section 5).
    pub(super) ecn: u8,
}

impl<N: Nic> Shard<N> {
    /// `last_stop`: the process's other shards have declined the frame (it was handed off).
    pub(super) fn handle_frame(&mut self, mut buf: N::Buf, last_stop: bool) {
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
    pub(super) fn transport(&self, frame: &[u8]) -> Option<Transport> {
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

    /// An on-link `src` sent us `frame` (a shared interface: see `ShardConfig::glean_neighbors`).
    /// The answers to our own ARP requests and probes may go to another process's queue, so the
    /// peer's own frames stand in for them: an unknown sender is learned (unconfirmed), an
    /// incomplete entry is resolved with the frame's source (its waiting packets leave), and a
    /// stale entry with that address is confirmed. Otherwise an entry that expired would be
    /// probed, fail when the answer went elsewhere, and hold our packets for a second or more
    /// (seen as SYN-ACKs that never came, with two nginx workers).
    pub(super) fn glean(&mut self, src: IpAddress, frame: &[u8]) {
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

    pub(super) fn glean_address(&mut self, src: IpAddress, mac: EthernetAddress) {
        match self.neighbors.state(src, self.now) {
            Some((NeighborState::Reachable, Some(m))) if m == mac => {}
            Some((NeighborState::Stale, Some(m))) if m == mac => self.neighbors.confirm(src, self.now),
            Some((NeighborState::Incomplete, _)) => self.learn(Learned { ip: src, mac, answer: true }),
            _ => self.learn(Learned { ip: src, mac, answer: false }),
        }
    }
}
