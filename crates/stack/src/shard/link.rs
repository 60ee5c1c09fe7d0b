//! The link: the NIC queue and what the shard knows of the link around it, its addresses, the
//! routes and the neighbor cache, and the frames that cross it. In: the rx burst. Out: the
//! frame buffers (one kept ready for the next segment while there are connections), Ethernet
//! and IP headers for what the shard sends (the IPv4 checksum left to the NIC if it computes
//! it), the route and the neighbor's link address (ARP and NDP solicitations for those not
//! known yet, frames parked until they answer), and the tx queue with its backlog (the link
//! layer's answers that find it full are counted as `drop_tx_full`).
//!
//! It builds, queues and sends frames; it must not decide what to send (that is the
//! protocols') nor read what a received frame says (that is ingress's). It knows nothing of the
//! shard or its sockets: the shard hands it the time and its counters where it needs them.

use nic::{Nic, Offloads, PacketBuf};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr, NdiscRepr,
};

use super::stats::ShardStats;
use crate::iface::{Answer, IfaceStats, Learned};
use crate::shard::neighbor::{multicast_mac, Lookup, NeighborCache, NeighborConfig};
use crate::shard::route::{Routes, TTL};

/// The most frames taken from the NIC in one burst.
pub const RX_BURST: usize = 32;
/// Frames waiting for room in the NIC's tx queue before new ones are dropped.
const TX_BACKLOG: usize = 8192;
pub(super) const ETH: usize = wire::ethernet::HEADER_LEN;

/// Frames a connection sending a long run of segments queues before they go to the NIC.
pub(crate) const TX_BURST: usize = 32;

/// Where the transport header starts in a frame to `dst`: after the Ethernet header and the IP
/// header of its family (the stack sends no IP options or extension headers).
pub(super) fn transport_offset(dst: IpAddress) -> usize {
    ETH + match dst {
        IpAddress::V4(_) => wire::ipv4::HEADER_LEN,
        IpAddress::V6(_) => wire::ipv6::HEADER_LEN,
    }
}

/// The checksum work left to the stack: what the NIC does not do for it (`Nic::offloads`, read
/// once). A NIC that verifies checksums on receive must not deliver a frame it found bad. ICMP
/// (and ICMPv6, neighbor discovery) checksums are always the stack's: NICs offload TCP and UDP.
#[derive(Clone, Copy, Debug)]
pub(super) struct Checksums {
    /// Check the IPv4 header checksum of what arrives.
    pub(super) verify_ipv4: bool,
    /// Check the TCP and UDP checksums of what arrives.
    pub(super) verify_l4: bool,
    /// Fill the IPv4 header checksum of what leaves.
    pub(super) fill_ipv4: bool,
    /// Fill the TCP and UDP checksums of what leaves (else their pseudo-header sum, which is
    /// what a NIC finishing them expects).
    pub(super) fill_l4: bool,
}

impl From<Offloads> for Checksums {
    fn from(o: Offloads) -> Checksums {
        Checksums {
            verify_ipv4: !o.rx_ipv4_checksum,
            verify_l4: !o.rx_l4_checksum,
            fill_ipv4: !o.tx_ipv4_checksum,
            fill_l4: !o.tx_l4_checksum,
        }
    }
}

/// The shard's link (see the module's doc).
pub(super) struct Link<N: Nic> {
    nic: N,
    mac: EthernetAddress,
    ipv4: Option<Ipv4Address>,
    ipv6: Option<Ipv6Address>,
    ipv6_link_local: Ipv6Address,
    routes: Routes,
    neighbors: NeighborCache<N::Buf>,
    rx: Vec<N::Buf>,
    tx: Vec<N::Buf>,
    /// A frame buffer taken for a segment that did not come, kept for the next one while the
    /// shard has connections (`Shard::poll` gives it back when none is left).
    tx_spare: Option<N::Buf>,
    /// The checksum work the NIC leaves to us.
    checksums: Checksums,
    /// The NIC segments TCP over IPv6 as well as over IPv4 (`Offloads::tx_tcp6_segmentation`).
    segments_ipv6: bool,
    /// Neighbors whose entries expired into a new solicitation (reused between passes).
    solicit: Vec<IpAddress>,
    stats: IfaceStats,
    /// Neighbors ARP or NDP taught this shard, for the process's other shards.
    heard: Vec<Learned>,
    /// Frames to our own addresses, to be received by this shard (`loopback`).
    looped: Vec<N::Buf>,
}

impl<N: Nic> Link<N> {
    pub(super) fn new(
        nic: N,
        mac: EthernetAddress,
        ipv4: Option<Ipv4Address>,
        ipv6: Option<Ipv6Address>,
        routes: Routes,
    ) -> Self {
        Link {
            checksums: Checksums::from(nic.offloads()),
            segments_ipv6: nic.offloads().tx_tcp6_segmentation,
            nic,
            mac,
            ipv4,
            ipv6,
            ipv6_link_local: Ipv6Address::link_local_from_ethernet(mac),
            routes,
            neighbors: NeighborCache::new(NeighborConfig::default()),
            rx: Vec::with_capacity(RX_BURST),
            tx: Vec::with_capacity(RX_BURST),
            tx_spare: None,
            solicit: Vec::new(),
            stats: IfaceStats::default(),
            heard: Vec::new(),
            looped: Vec::new(),
        }
    }

    pub(super) fn nic(&self) -> &N {
        &self.nic
    }

    pub(super) fn nic_mut(&mut self) -> &mut N {
        &mut self.nic
    }

    pub(super) fn mac(&self) -> EthernetAddress {
        self.mac
    }

    pub(super) fn ipv4(&self) -> Option<Ipv4Address> {
        self.ipv4
    }

    pub(super) fn ipv6(&self) -> Option<Ipv6Address> {
        self.ipv6
    }

    pub(super) fn ipv6_link_local(&self) -> Ipv6Address {
        self.ipv6_link_local
    }

    pub(super) fn routes(&self) -> &Routes {
        &self.routes
    }

    pub(super) fn neighbors(&self) -> &NeighborCache<N::Buf> {
        &self.neighbors
    }

    pub(super) fn checksums(&self) -> Checksums {
        self.checksums
    }

    /// Link-layer counters (ARP, NDP, ICMP, drops).
    pub(super) fn stats(&self) -> &IfaceStats {
        &self.stats
    }

    pub(super) fn stats_mut(&mut self) -> &mut IfaceStats {
        &mut self.stats
    }

    /// Frames queued for the NIC, not sent yet.
    pub(super) fn queued(&self) -> &[N::Buf] {
        &self.tx
    }

    /// Frames not sent yet: waiting for a neighbor's address or for room in the NIC's queue; or
    /// sent to ourselves, not received yet.
    pub(super) fn pending(&self) -> usize {
        self.neighbors.pending() + self.tx.len() + self.looped.len()
    }

    /// Whether one of `ip` is the link's own addresses (its IPv6 link-local one included).
    pub(super) fn is_own_address(&self, ip: IpAddress) -> bool {
        match ip {
            IpAddress::V4(v4) => self.ipv4 == Some(v4),
            IpAddress::V6(v6) => self.ipv6 == Some(v6) || v6 == self.ipv6_link_local,
        }
    }

    /// A frame to one of our own addresses: queued to be received by this shard.
    fn loop_back(&mut self, mut buf: N::Buf) {
        EthernetFrame::new_unchecked(buf.data_mut()).set_dst_addr(self.mac);
        self.looped.push(buf);
    }

    /// Frames sent to our own addresses and not received yet (`loopback`).
    pub(super) fn has_looped(&self) -> bool {
        !self.looped.is_empty()
    }

    /// The frames sent to our own addresses so far, moved into `into` (empty).
    pub(super) fn take_looped(&mut self, into: &mut Vec<N::Buf>) {
        std::mem::swap(into, &mut self.looped);
    }

    /// Takes a burst of at most [`RX_BURST`] frames from the NIC into `rx` (empty; the link's
    /// own vector, handed back with [`Link::give_back_rx`]).
    pub(super) fn receive_burst(&mut self) -> Vec<N::Buf> {
        let mut rx = std::mem::take(&mut self.rx);
        let n = self.nic.rx_burst(&mut rx, RX_BURST);
        self.stats.rx_frames += n as u64;
        rx
    }

    /// Gives back the (drained) vector of [`Link::receive_burst`], to keep its capacity.
    pub(super) fn give_back_rx(&mut self, rx: Vec<N::Buf>) {
        self.rx = rx;
    }

    /// Gives back the frame buffer kept for the next segment (no connection is left to send).
    pub(super) fn drop_tx_spare(&mut self) {
        self.tx_spare = None;
    }

    /// Keeps what ARP or NDP taught this shard for the process's other shards.
    pub(super) fn heard(&mut self, l: Learned) {
        self.heard.push(l);
    }

    /// Moves what [`Link::heard`] kept to `out`.
    pub(super) fn take_heard(&mut self, out: &mut Vec<Learned>) {
        out.append(&mut self.heard);
    }

    /// Expires neighbor entries (those that wait for an answer too long drop their frames) and
    /// solicits again those due for it.
    pub(super) fn expire_neighbors(&mut self, now: u64, stats: &mut ShardStats) {
        // Nothing being resolved, or no request due yet: every pass but a few.
        if !matches!(self.neighbors.next_deadline(), Some(due) if due <= now) {
            return;
        }
        let mut solicit = std::mem::take(&mut self.solicit);
        let before = self.neighbors.stats().drop_unresolved;
        self.neighbors.expire(now, |ip| solicit.push(ip));
        stats.tx_unresolved += self.neighbors.stats().drop_unresolved - before;
        for ip in solicit.drain(..) {
            self.send_solicitation(ip, None, stats);
        }
        self.solicit = solicit;
    }

    /// Hands the queued frames to the NIC; those it has no room for stay queued (at most
    /// `TX_BACKLOG`; more are dropped and counted). Returns how many it took.
    pub(super) fn transmit(&mut self, stats: &mut ShardStats) -> usize {
        let sent = self.nic.tx_burst(&mut self.tx);
        self.stats.tx_frames += sent as u64;
        if self.tx.len() > TX_BACKLOG {
            let excess = self.tx.len() - TX_BACKLOG;
            stats.tx_queue_full += excess as u64;
            self.tx.truncate(TX_BACKLOG);
        }
        sent
    }

    /// What ARP, NDP or a gleaned frame said of a neighbor, into the cache; the frames that
    /// waited for its address leave.
    pub(super) fn learn(&mut self, l: Learned, now: u64) {
        let ready: Vec<_> = self.neighbors.update(l.ip, l.mac, now, l.update).collect();
        for mut frame in ready {
            EthernetFrame::new_unchecked(frame.data_mut()).set_dst_addr(l.mac);
            self.tx.push(frame);
        }
    }

    /// A buffer for a frame to send: the one this pass took and did not use, or a new one.
    pub(super) fn tx_buffer(&mut self) -> Option<N::Buf> {
        self.tx_spare.take().or_else(|| self.nic.alloc())
    }

    /// Keeps a buffer taken and not used for the next frame (`poll` gives it back to the pool
    /// once no connection is left): a connection with nothing to send costs no buffer.
    pub(super) fn keep_tx_buffer(&mut self, buf: N::Buf) {
        self.tx_spare = Some(buf);
    }

    /// A frame with Ethernet and IP headers for `l4_len` bytes of transport (written by the
    /// caller at the offset returned), `ecn` in the IP header's ECN field. The Ethernet
    /// destination is filled by `route_out`.
    pub(super) fn ip_frame(
        &mut self,
        src: IpAddress,
        dst: IpAddress,
        proto: IpProtocol,
        l4_len: usize,
        ecn: u8,
        stats: &mut ShardStats,
    ) -> Option<(N::Buf, usize)> {
        let Some(mut buf) = self.tx_buffer() else {
            stats.tx_no_buffer += 1;
            return None;
        };
        let l4 = transport_offset(dst);
        if l4 + l4_len > buf.capacity() {
            stats.tx_no_buffer += 1;
            self.keep_tx_buffer(buf);
            return None;
        }
        buf.set_len(l4 + l4_len);
        if !self.write_headers(buf.data_mut(), src, dst, proto, l4_len, ecn) {
            stats.tx_no_route += 1;
            self.keep_tx_buffer(buf);
            return None;
        }
        self.request_checksums(&mut buf);
        Some((buf, l4))
    }

    /// Writes the Ethernet header (all but its destination) and the IP header of a frame that
    /// carries `l4_len` bytes of `proto` at [`transport_offset`], `ecn` in the IP header's ECN
    /// field; the IPv4 header checksum is left to the NIC if it computes it. False (the caller
    /// counts it in `tx_no_route`) and nothing written when `src` and `dst` are of different
    /// families: no packet can carry them (ingress drops IPv4-mapped IPv6 sources, so no
    /// 4-tuple should).
    #[must_use]
    pub(super) fn write_headers(
        &self,
        frame: &mut [u8],
        src: IpAddress,
        dst: IpAddress,
        proto: IpProtocol,
        l4_len: usize,
        ecn: u8,
    ) -> bool {
        let ethertype = match dst {
            IpAddress::V4(_) => EtherType::Ipv4,
            IpAddress::V6(_) => EtherType::Ipv6,
        };
        EthernetRepr { src_addr: self.mac, dst_addr: EthernetAddress([0; 6]), ethertype }
            .emit(&mut EthernetFrame::new_unchecked(&mut frame[..]));
        let ip = &mut frame[ETH..transport_offset(dst)];
        match (src, dst) {
            (IpAddress::V4(s), IpAddress::V4(d)) => {
                let repr =
                    Ipv4Repr { src_addr: s, dst_addr: d, next_header: proto, payload_len: l4_len, hop_limit: TTL };
                let mut packet = Ipv4Packet::new_unchecked(ip);
                repr.emit(&mut packet, false);
                packet.set_ecn(ecn);
                if self.checksums.fill_ipv4 {
                    packet.fill_checksum();
                }
            }
            (IpAddress::V6(s), IpAddress::V6(d)) => {
                let repr =
                    Ipv6Repr { src_addr: s, dst_addr: d, next_header: proto, payload_len: l4_len, hop_limit: TTL };
                let mut packet = Ipv6Packet::new_unchecked(ip);
                repr.emit(&mut packet);
                packet.set_traffic_class(ecn);
            }
            _ => return false,
        }
        true
    }

    /// Whether the NIC segments TCP over IPv6 (over IPv4: `tcp::Config::tso`).
    pub(super) fn segments_ipv6(&self) -> bool {
        self.segments_ipv6
    }

    /// Asks the NIC for the checksums left to it (`Nic::offloads`), if any.
    pub(super) fn request_checksums(&self, buf: &mut N::Buf) {
        if !self.checksums.fill_ipv4 || !self.checksums.fill_l4 {
            buf.request_checksums();
        }
    }

    /// Fills the Ethernet destination from the neighbor cache and queues the frame, or parks it
    /// until the neighbor answers; one to our own address is received by this shard instead
    /// (`loopback`).
    pub(super) fn route_out(&mut self, mut buf: N::Buf, dst: IpAddress, now: u64, stats: &mut ShardStats) {
        if self.is_own_address(dst) {
            self.loop_back(buf);
            return;
        }
        let Some(hop) = self.routes.next_hop(dst) else {
            stats.tx_no_route += 1;
            return;
        };
        if let Some(mac) = multicast_mac(hop) {
            EthernetFrame::new_unchecked(buf.data_mut()).set_dst_addr(mac);
            self.tx.push(buf);
            return;
        }
        match self.neighbors.lookup(hop, now) {
            Lookup::Hit { mac, send_request } => {
                EthernetFrame::new_unchecked(buf.data_mut()).set_dst_addr(mac);
                self.tx.push(buf);
                if send_request {
                    self.send_solicitation(hop, Some(mac), stats);
                }
            }
            Lookup::Miss { send_request } => {
                if self.neighbors.enqueue(hop, buf).is_err() {
                    stats.tx_unresolved += 1;
                }
                if send_request {
                    self.send_solicitation(hop, None, stats);
                }
            }
        }
    }

    /// An ARP request or an IPv6 neighbor solicitation for `ip`; unicast to `known` when
    /// re-confirming a stale entry.
    pub(super) fn send_solicitation(&mut self, ip: IpAddress, known: Option<EthernetAddress>, stats: &mut ShardStats) {
        let Some(mut buf) = self.nic.alloc() else {
            stats.tx_no_buffer += 1;
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

    /// Sends the link layer's answer to a received frame, written over the frame itself; when
    /// the tx backlog is full it is dropped and counted instead. (An answer queued within the
    /// backlog is never dropped: `transmit` trims only frames queued after the backlog's end.)
    pub(super) fn queue_answer(&mut self, mut buf: N::Buf, answer: Answer) {
        if self.tx.len() >= TX_BACKLOG {
            self.stats.drop_tx_full += 1;
            return;
        }
        // The answer may be longer than the request: an advertisement carries our link
        // address, a solicitation from `::` carries none.
        let room = buf.capacity();
        buf.set_len(room);
        let len = answer.write(self.mac, buf.data_mut(), self.checksums.fill_ipv4);
        buf.set_len(len);
        self.request_checksums(&mut buf);
        answer.count(&mut self.stats);
        self.tx.push(buf);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use nic::Nic;
    use testkit::mem::{pair, MemConfig};
    use wire::{IpAddress, IpProtocol, Ipv4Address, Ipv6Address};

    use super::super::{Shard, ShardConfig};

    /// No 4-tuple should mix families (ingress drops IPv4-mapped IPv6 sources), but if one did,
    /// its frame is not sent and counted: it used to be `unreachable!`, a crash of the server.
    #[test]
    fn a_frame_between_two_families_is_not_sent_and_counted() {
        let (a, _b) = pair(MemConfig::default());
        let cfg = ShardConfig::new(
            a.mac(),
            Some((Ipv4Addr::new(10, 0, 0, 1), 24)),
            Some((Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1), 64)),
            [3; 32],
        );
        let mut shard = Shard::new(a, cfg);
        let v4 = IpAddress::V4(Ipv4Address::new(10, 0, 0, 2));
        let v6 = IpAddress::V6(Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
        assert!(shard.link.ip_frame(v6, v4, IpProtocol::Tcp, 20, 0, &mut shard.stats).is_none());
        assert!(shard.link.ip_frame(v4, v6, IpProtocol::Udp, 8, 0, &mut shard.stats).is_none());
        assert_eq!(shard.stats().tx_no_route, 2);
        assert!(shard.link.ip_frame(v6, v6, IpProtocol::Tcp, 20, 0, &mut shard.stats).is_some());
    }
}
