//! Path MTU: an ICMP "fragmentation needed" (IPv4) or "packet too big" (IPv6) quoting a segment
//! of a connection lowers that connection's segment size; one that quotes nothing in flight is
//! ignored and counted. The test plays the peer (and the router) with hand-built frames.
//!
//! The same peer also checks how a shard learns its neighbors: on an interface shared by
//! several processes (the answer to its own ARP may reach another process's queue) from the
//! frames of known connections, which never make an entry nor change an address, so a forged
//! frame cannot redirect our traffic; and from ARP and NDP as Linux takes them (`arp_accept=0`,
//! its ARP locktime, RFC 4861 section 7.2.5): each forged frame is followed by the MAC our next
//! segment goes to. And that a connection that ended while the application still holds it
//! frees its 4-tuple.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::{Nic, PacketBuf};
use stack::shard::{Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemConfig, MemNic};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr,
    Icmpv6Packet, Icmpv6Repr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, NdiscRepr, TcpFlags,
    TcpPacket, TcpRepr,
};

const S4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const P4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
fn s6() -> Ipv6Addr {
    "fd00::1".parse().unwrap()
}
fn p6() -> Ipv6Addr {
    "fd00::2".parse().unwrap()
}

struct Peer {
    shard: Shard<MemNic>,
    nic: MemNic,
    local: IpAddress,
    remote: IpAddress,
    now: u64,
}

/// Another host on the link, forging the peer's frames.
const ATTACKER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x66];

/// An ARP packet's sender protocol address, target hardware and protocol addresses.
type ArpAddrs = (Ipv4Addr, [u8; 6], Ipv4Addr);

/// `f` with its Ethernet source made `mac`.
fn from_mac(mut f: Vec<u8>, mac: [u8; 6]) -> Vec<u8> {
    f[6..12].copy_from_slice(&mac);
    f
}

/// A frame from the peer: Ethernet, IP (v4 or v6 by `remote`), then `l4` with protocol `proto`.
fn frame(p: &Peer, proto: IpProtocol, l4_len: usize, write: impl FnOnce(&mut [u8])) -> Vec<u8> {
    let (ethertype, ip_len) = match p.remote {
        IpAddress::V4(_) => (EtherType::Ipv4, 20),
        IpAddress::V6(_) => (EtherType::Ipv6, 40),
    };
    let mut f = vec![0u8; 14 + ip_len + l4_len];
    EthernetRepr {
        src_addr: EthernetAddress(p.nic.mac().0),
        dst_addr: EthernetAddress(p.shard.nic().mac().0),
        ethertype,
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    match (p.local, p.remote) {
        (IpAddress::V4(src), IpAddress::V4(dst)) => {
            Ipv4Repr { src_addr: src, dst_addr: dst, next_header: proto, payload_len: l4_len, hop_limit: 64 }
                .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]), true)
        }
        (IpAddress::V6(src), IpAddress::V6(dst)) => {
            Ipv6Repr { src_addr: src, dst_addr: dst, next_header: proto, payload_len: l4_len, hop_limit: 255 }
                .emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]))
        }
        _ => unreachable!(),
    }
    write(&mut f[14 + ip_len..]);
    f
}

impl Peer {
    fn new(v6: bool) -> Peer {
        Peer::with(v6, false)
    }

    fn with(v6: bool, glean_neighbors: bool) -> Peer {
        let (a, b) = pair(MemConfig::default());
        let mut cfg = ShardConfig::new(a.mac(), Some((S4, 24)), Some((s6(), 64)), [5; 32]);
        cfg.glean_neighbors = glean_neighbors;
        let (local, remote) = if v6 {
            (IpAddress::V6(p6().into()), IpAddress::V6(s6().into()))
        } else {
            (IpAddress::V4(P4.into()), IpAddress::V4(S4.into()))
        };
        Peer { shard: Shard::new(a, cfg), nic: b, local, remote, now: 1_000_000_000 }
    }

    fn send(&mut self, f: Vec<u8>) {
        let mut b = self.nic.alloc().unwrap();
        b.set_len(f.len());
        b.data_mut().copy_from_slice(&f);
        self.nic.tx_burst(&mut vec![b]);
        self.shard.poll(self.now);
    }

    /// Everything the shard sent, as raw frames.
    fn take(&mut self) -> Vec<Vec<u8>> {
        self.shard.poll(self.now);
        let mut rx = Vec::new();
        self.nic.rx_burst(&mut rx, 1024);
        rx.iter().map(|b| b.data().to_vec()).collect()
    }

    /// The IP payload of a frame, when it is TCP.
    fn tcp_of(&self, f: &[u8]) -> Option<(TcpRepr, usize, Vec<u8>)> {
        let eth = EthernetFrame::new_checked(f).ok()?;
        let (ip_hdr, l4): (Vec<u8>, &[u8]) = match eth.ethertype() {
            EtherType::Ipv4 => {
                let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
                (eth.payload()[..20].to_vec(), ip.payload())
            }
            EtherType::Ipv6 => {
                let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
                if ip.next_header() != IpProtocol::Tcp {
                    return None;
                }
                (eth.payload()[..40].to_vec(), ip.payload())
            }
            _ => return None,
        };
        let tcp = TcpPacket::new_checked(l4).ok()?;
        let repr = TcpRepr::parse(&tcp, &self.remote, &self.local, true).ok()?;
        let mut quote = ip_hdr;
        quote.extend_from_slice(&l4[..8]);
        Some((repr, repr.payload_len, quote))
    }

    fn tcp(&mut self, seq: u32, ack: Option<u32>, flags: TcpFlags, mss: Option<u16>) {
        let repr = TcpRepr { max_seg_size: mss, ..tcp::bare_segment(40000, 80, seq, ack, flags, 65535) };
        let f = self.tcp_frame(&repr);
        self.send(f);
    }

    /// The frame of a segment from the peer (no payload), checksums right.
    fn tcp_frame(&self, repr: &TcpRepr) -> Vec<u8> {
        let (l, r) = (self.local, self.remote);
        frame(self, IpProtocol::Tcp, repr.header_len(), |b| {
            repr.emit(&mut TcpPacket::new_unchecked(b), &l, &r, &[], true)
        })
    }

    /// The frame of a datagram from the peer's `sport` to the shard's `dport`.
    fn udp_frame(&self, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let (l, r) = (self.local, self.remote);
        frame(self, IpProtocol::Udp, 8 + payload.len(), |b| {
            let repr = wire::UdpRepr { src_port: sport, dst_port: dport };
            repr.emit(&mut wire::UdpPacket::new_unchecked(b), &l, &r, payload, true)
        })
    }

    /// An ARP packet to the shard in a frame from `sha` to `eth_dst`.
    fn arp(&mut self, operation: wire::ArpOperation, sha: [u8; 6], (sip, tha, tip): ArpAddrs, eth_dst: [u8; 6]) {
        let arp = wire::ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: EthernetAddress(sha),
            source_protocol_addr: sip.into(),
            target_hardware_addr: EthernetAddress(tha),
            target_protocol_addr: tip.into(),
        };
        let mut f = vec![0u8; 42];
        EthernetRepr { src_addr: EthernetAddress(sha), dst_addr: EthernetAddress(eth_dst), ethertype: EtherType::Arp }
            .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        arp.emit(&mut wire::ArpPacket::new_unchecked(&mut f[14..]));
        self.send(f);
    }

    /// A neighbor advertisement for the peer's address, advertising `lladdr`, from that MAC.
    fn advert(&mut self, flags: u8, lladdr: [u8; 6]) {
        let IpAddress::V6(target) = self.local else { unreachable!() };
        let na = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert {
            flags: wire::NdiscNeighborFlags(flags),
            target_addr: target,
            lladdr: Some(EthernetAddress(lladdr)),
        });
        let (src, dst) = (self.local, self.remote);
        let f = frame(self, IpProtocol::Icmpv6, na.buffer_len(), |b| {
            let (IpAddress::V6(s), IpAddress::V6(d)) = (src, dst) else { unreachable!() };
            na.emit(&mut Icmpv6Packet::new_unchecked(b), &s, &d, true)
        });
        self.send(from_mac(f, lladdr));
    }

    /// Where the shard's next data segment on connection `c` goes (its Ethernet destination);
    /// the peer then acknowledges everything, so that nothing waits for a retransmission.
    fn next_segment_goes_to(&mut self, c: SocketId) -> [u8; 6] {
        assert_eq!(self.shard.tcp_send(c, b"next"), Ok(4));
        let frames = self.take();
        let (f, seg) =
            frames.iter().find_map(|f| self.tcp_of(f).filter(|s| s.1 > 0).map(|s| (f, s.0))).expect("a data segment");
        let end = seg.seq_number.wrapping_add(seg.payload_len as u32);
        self.tcp(seg.ack_number.unwrap(), Some(end), TcpFlags::ACK, None);
        self.take();
        EthernetFrame::new_checked(&f[..]).unwrap().dst_addr().0
    }

    /// A connection from the peer to the shard's port 80, accepted; the shard then sends 4000
    /// bytes. Returns the socket and the data segments seen (header, payload length, quote).
    fn connect_and_receive(&mut self) -> (SocketId, Vec<(TcpRepr, usize, Vec<u8>)>) {
        let any: IpAddr = if matches!(self.remote, IpAddress::V4(_)) {
            Ipv4Addr::UNSPECIFIED.into()
        } else {
            Ipv6Addr::UNSPECIFIED.into()
        };
        let l = self.shard.tcp_listen(SocketAddr::new(any, 80), 8).unwrap();
        if let IpAddress::V6(target) = self.remote {
            // Introduce ourselves (the shard would otherwise solicit us first).
            let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
                target_addr: target,
                lladdr: Some(EthernetAddress(self.nic.mac().0)),
            });
            let (src, dst) = (self.local, self.remote);
            let f = frame(self, IpProtocol::Icmpv6, ns.buffer_len(), |b| {
                let (IpAddress::V6(s), IpAddress::V6(d)) = (src, dst) else { unreachable!() };
                ns.emit(&mut Icmpv6Packet::new_unchecked(b), &s, &d, true)
            });
            self.send(f);
        } else {
            let arp = wire::ArpRepr::EthernetIpv4 {
                operation: wire::ArpOperation::Request,
                source_hardware_addr: EthernetAddress(self.nic.mac().0),
                source_protocol_addr: P4.into(),
                target_hardware_addr: EthernetAddress([0; 6]),
                target_protocol_addr: S4.into(),
            };
            let mut f = vec![0u8; 42];
            EthernetRepr {
                src_addr: EthernetAddress(self.nic.mac().0),
                dst_addr: EthernetAddress::BROADCAST,
                ethertype: EtherType::Arp,
            }
            .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
            arp.emit(&mut wire::ArpPacket::new_unchecked(&mut f[14..]));
            self.send(f);
        }
        self.take();
        self.tcp(1000, None, TcpFlags::SYN, Some(1460));
        let synack = self.take().iter().find_map(|f| self.tcp_of(f)).expect("SYN-ACK").0;
        let iss = synack.seq_number;
        self.tcp(1001, Some(iss + 1), TcpFlags::empty(), None);
        let (c, _) = self.shard.tcp_accept(l).unwrap();
        self.shard.tcp_set_nodelay(c, true).unwrap();
        assert_eq!(self.shard.tcp_send(c, &[7; 4000]), Ok(4000));
        let segs: Vec<_> = self.take().iter().filter_map(|f| self.tcp_of(f)).filter(|s| s.1 > 0).collect();
        (c, segs)
    }

    /// The router's ICMP error quoting `quote`, announcing `mtu`.
    fn too_big(&mut self, quote: &[u8], mtu: u16) {
        let f = self.too_big_frame(quote, mtu);
        self.send(f);
    }

    /// The frame of [`Peer::too_big`].
    fn too_big_frame(&self, quote: &[u8], mtu: u16) -> Vec<u8> {
        let (src, dst) = (self.local, self.remote);
        match (src, dst) {
            (IpAddress::V4(_), IpAddress::V4(_)) => {
                let q = Ipv4Packet::new_unchecked(&quote[..20]);
                let inner = Ipv4Repr {
                    src_addr: q.src_addr(),
                    dst_addr: q.dst_addr(),
                    next_header: q.next_header(),
                    payload_len: usize::from(q.total_len()) - 20,
                    hop_limit: q.hop_limit(),
                };
                let icmp = Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::FragRequired,
                    next_hop_mtu: mtu,
                    header: inner,
                    data: &quote[20..],
                };
                frame(self, IpProtocol::Icmp, icmp.buffer_len(), |b| {
                    icmp.emit(&mut Icmpv4Packet::new_unchecked(b), true)
                })
            }
            (IpAddress::V6(s), IpAddress::V6(d)) => {
                let q = Ipv6Packet::new_unchecked(&quote[..40]);
                let inner = Ipv6Repr {
                    src_addr: q.src_addr(),
                    dst_addr: q.dst_addr(),
                    next_header: q.next_header(),
                    payload_len: usize::from(q.payload_len()),
                    hop_limit: q.hop_limit(),
                };
                let icmp = Icmpv6Repr::PktTooBig { mtu: u32::from(mtu), header: inner, data: &quote[40..] };
                frame(self, IpProtocol::Icmpv6, icmp.buffer_len(), |b| {
                    icmp.emit(&mut Icmpv6Packet::new_unchecked(b), &s, &d, true)
                })
            }
            _ => unreachable!(),
        }
    }
}

fn lowers_the_segment_size(v6: bool, mtu: u16, expect_mss: usize) {
    let mut p = Peer::new(v6);
    let (c, segs) = p.connect_and_receive();
    let full = if v6 { 1440 } else { 1460 };
    assert_eq!(segs.iter().map(|s| s.1).max(), Some(full));
    // A quote of something not in flight (the sequence number moved far away) is ignored.
    let mut bogus = segs[0].2.clone();
    let at = bogus.len() - 4;
    bogus[at..].copy_from_slice(&(segs[0].0.seq_number.wrapping_add(1 << 30)).to_be_bytes());
    p.too_big(&bogus, mtu);
    assert_eq!(p.shard.stats().icmp_too_big_ignored, 1);
    assert_eq!(p.shard.tcp_info(c).unwrap().snd_mss as usize, full);
    // The real one lowers it, and what is resent fits the path.
    let quote = segs[0].2.clone();
    p.too_big(&quote, mtu);
    assert_eq!(p.shard.stats().pmtu_reductions, 1);
    assert_eq!(p.shard.tcp_info(c).unwrap().snd_mss as usize, expect_mss);
    p.now += 2_000_000_000; // past the RTO
    let again: Vec<_> = p.take().iter().filter_map(|f| p.tcp_of(f)).filter(|s| s.1 > 0).collect();
    assert!(!again.is_empty(), "nothing retransmitted");
    assert!(again.iter().all(|s| s.1 <= expect_mss), "{:?}", again.iter().map(|s| s.1).collect::<Vec<_>>());
    assert_eq!(again[0].0.seq_number, segs[0].0.seq_number);
}

#[test]
fn rfc1191_fragmentation_needed_lowers_the_segment_size() {
    lowers_the_segment_size(false, 1200, 1200 - 40);
}

#[test]
fn rfc8201_packet_too_big_lowers_the_segment_size() {
    lowers_the_segment_size(true, 1280, 1280 - 60);
}

/// RFC 8201 section 4: a node must not reduce its path MTU below the IPv6 minimum (1280) on a
/// Packet Too Big that says less; Linux's `tcp_v6_err` ignores such a message outright.
#[test]
fn rfc8201_packet_too_big_below_1280_is_ignored() {
    for mtu in [1279, 1000, 68] {
        let mut p = Peer::new(true);
        let (c, segs) = p.connect_and_receive();
        p.too_big(&segs[0].2.clone(), mtu);
        assert_eq!(p.shard.tcp_info(c).unwrap().snd_mss, 1440, "MTU {mtu}");
        let s = *p.shard.stats();
        assert_eq!((s.pmtu_reductions, s.icmp_too_big_ignored), (0, 1), "MTU {mtu}");
    }
}

/// Linux drops a frame sent to another host's MAC before any protocol sees it (`ip_rcv`,
/// PACKET_OTHERHOST): an ICMP error in one changes nothing and is counted as not for us.
fn ignores_an_error_for_another_hosts_mac(v6: bool) {
    let mut p = Peer::new(v6);
    let (c, segs) = p.connect_and_receive();
    let mss = p.shard.tcp_info(c).unwrap().snd_mss;
    let not_for_us = p.shard.link_stats().drop_not_for_us;
    let mut f = p.too_big_frame(&segs[0].2, 1200);
    EthernetFrame::new_unchecked(&mut f[..]).set_dst_addr(EthernetAddress([0x02, 9, 9, 9, 9, 9]));
    p.send(f);
    assert_eq!(p.shard.stats().pmtu_reductions, 0);
    assert_eq!(p.shard.stats().icmp_too_big_ignored, 0);
    assert_eq!(p.shard.tcp_info(c).unwrap().snd_mss, mss);
    assert_eq!(p.shard.link_stats().drop_not_for_us, not_for_us + 1);
}

#[test]
fn an_icmp_error_in_a_frame_for_another_hosts_mac_is_not_ours() {
    ignores_an_error_for_another_hosts_mac(false);
    ignores_an_error_for_another_hosts_mac(true);
}

/// A SYN from a peer the neighbor cache does not know: the shard asks for the peer's address
/// (ARP / neighbor solicitation) before it answers, shared interface or not (a SYN belongs to
/// no connection yet, and such a frame never makes an entry). On a shared interface the answer
/// may reach another process: the peer's SYN again, now a frame of the half-open connection,
/// resolves the address and the SYN-ACK leaves; a shard that owns its interface keeps waiting
/// for the answer.
fn answers_an_unknown_peer(v6: bool, glean: bool) {
    let mut p = Peer::with(v6, glean);
    let any: IpAddr = if v6 { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
    p.shard.tcp_listen(SocketAddr::new(any, 80), 8).unwrap();
    let synack_in = |p: &Peer, out: &[Vec<u8>]| {
        out.iter().find(|f| p.tcp_of(f).is_some_and(|s| s.0.flags.contains(TcpFlags::SYN | TcpFlags::ACK))).cloned()
    };
    p.tcp(1000, None, TcpFlags::SYN, Some(1400));
    let out = p.take();
    let asked = out.iter().any(|f| {
        let eth = EthernetFrame::new_checked(&f[..]).unwrap();
        eth.ethertype() == EtherType::Arp || (eth.ethertype() == EtherType::Ipv6 && p.tcp_of(f).is_none())
    });
    assert!(synack_in(&p, &out).is_none(), "the SYN-ACK waits for the peer's address");
    assert!(asked, "the shard asks for the peer's address");
    p.tcp(1000, None, TcpFlags::SYN, Some(1400));
    let out = p.take();
    if glean {
        let f = synack_in(&p, &out).expect("the SYN-ACK leaves");
        assert_eq!(EthernetFrame::new_checked(&f[..]).unwrap().dst_addr(), EthernetAddress(p.nic.mac().0));
    } else {
        assert!(synack_in(&p, &out).is_none(), "still waiting");
    }
}

#[test]
fn an_unshared_interface_resolves_an_unknown_peer_before_answering() {
    answers_an_unknown_peer(false, false);
    answers_an_unknown_peer(true, false);
}

#[test]
fn a_shared_interface_resolves_an_unknown_peer_from_a_frame_of_its_connection() {
    answers_an_unknown_peer(false, true);
    answers_an_unknown_peer(true, true);
}

/// A forged segment of a live connection (right 4-tuple and checksums, another MAC) on a shared
/// interface, where frames of known connections are gleaned: the peer's entry keeps its address.
fn forged_segment_does_not_redirect(v6: bool) {
    let mut p = Peer::with(v6, true);
    let (c, segs) = p.connect_and_receive();
    let peer_mac = p.nic.mac().0;
    assert_eq!(p.next_segment_goes_to(c), peer_mac);
    let ack = segs.iter().map(|s| s.0.seq_number.wrapping_add(s.1 as u32)).max().unwrap();
    let forged = p.tcp_frame(&tcp::bare_segment(40000, 80, 1001, Some(ack), TcpFlags::ACK, 65535));
    p.send(from_mac(forged, ATTACKER_MAC));
    assert_eq!(p.next_segment_goes_to(c), peer_mac, "v6 {v6}");
}

#[test]
fn a_forged_segment_of_a_connection_does_not_redirect_its_peer() {
    forged_segment_does_not_redirect(false);
    forged_segment_does_not_redirect(true);
}

/// The same with a datagram to a UDP socket connected to the peer.
#[test]
fn a_forged_datagram_of_a_connected_socket_does_not_redirect_its_peer() {
    let mut p = Peer::with(false, true);
    let (c, _) = p.connect_and_receive();
    let peer_mac = p.nic.mac().0;
    let u = p.shard.udp_bind(SocketAddr::new(S4.into(), 5353)).unwrap();
    p.shard.udp_connect(u, Some(SocketAddr::new(P4.into(), 5000))).unwrap();
    let real = p.udp_frame(5000, 5353, b"real");
    p.send(real);
    let forged = p.udp_frame(5000, 5353, b"forged");
    p.send(from_mac(forged, ATTACKER_MAC));
    assert_eq!(p.shard.udp_recv(u, &mut [0u8; 16], false).map(|r| r.len), Ok(4));
    assert_eq!(p.next_segment_goes_to(c), peer_mac);
}

/// Linux with `arp_accept=0`: an unsolicited ARP reply makes no entry (our next packet to that
/// address asks for it first); a gratuitous ARP updates an entry that exists; an ARP reply with
/// another address within the locktime (1 s) of the entry's last change loses to the first.
#[test]
fn arp_follows_linux_arp_accept_0_and_its_locktime() {
    use wire::ArpOperation::{Reply, Request};
    let mut p = Peer::new(false);
    let (c, _) = p.connect_and_receive();
    let (peer_mac, ours) = (p.nic.mac().0, p.shard.nic().mac().0);
    assert_eq!(p.next_segment_goes_to(c), peer_mac);
    let other = Ipv4Addr::new(10, 0, 0, 3);
    p.arp(Reply, ATTACKER_MAC, (other, ours, S4), ours);
    let c2 = p.shard.tcp_connect(SocketAddr::new(other.into(), 80)).unwrap();
    let out = p.take();
    let to_attacker = out.iter().any(|f| f[..6] == ATTACKER_MAC);
    let asked = out.iter().any(|f| EthernetFrame::new_checked(&f[..]).unwrap().ethertype() == EtherType::Arp);
    assert!(!to_attacker && asked, "the unsolicited reply made no entry");
    p.shard.abort(c2).unwrap();
    p.take();
    // A gratuitous ARP (a request for its own address, broadcast) moves the peer.
    let new_mac = [2, 0, 0, 0, 0, 0x77];
    p.now += 2_000_000_000;
    p.arp(Request, new_mac, (P4, [0; 6], P4), [0xff; 6]);
    assert_eq!(p.next_segment_goes_to(c), new_mac);
    // Just moved: a reply with yet another address within the locktime is ignored...
    p.arp(Reply, ATTACKER_MAC, (P4, ours, S4), ours);
    assert_eq!(p.next_segment_goes_to(c), new_mac);
    // ...after it, taken.
    p.now += 1_000_000_000;
    p.arp(Reply, peer_mac, (P4, ours, S4), ours);
    assert_eq!(p.next_segment_goes_to(c), peer_mac);
}

/// RFC 4861 section 7.2.5: an unsolicited advertisement without the Override flag does not
/// change a reachable entry's address (the entry goes stale); with Override it does.
#[test]
fn rfc4861_an_advert_without_override_does_not_redirect_a_reachable_neighbor() {
    let (solicited, override_) = (wire::NdiscNeighborFlags::SOLICITED, wire::NdiscNeighborFlags::OVERRIDE);
    let mut p = Peer::new(true);
    let (c, _) = p.connect_and_receive();
    let peer_mac = p.nic.mac().0;
    p.advert(solicited | override_, peer_mac); // reachable
    p.advert(0, ATTACKER_MAC);
    assert_eq!(p.next_segment_goes_to(c), peer_mac);
    p.advert(override_, ATTACKER_MAC);
    assert_eq!(p.next_segment_goes_to(c), ATTACKER_MAC);
}

/// RFC 9293 3.10.7.4 / Linux: a connection reset by the peer leaves the demux table at once,
/// even while the application has not closed it yet; the peer's next connection from the same
/// port is a new one (SYN-ACK), not answered by the dead one (RST).
#[test]
fn a_reset_connection_the_application_still_holds_frees_its_ports() {
    let mut p = Peer::new(false);
    let (c, segs) = p.connect_and_receive();
    let ack = segs.iter().map(|s| s.0.seq_number.wrapping_add(s.1 as u32)).max().unwrap();
    p.tcp(1001, Some(ack), TcpFlags::RST, None);
    assert!(p.shard.tcp_info(c).is_ok(), "the application still holds the socket");
    p.tcp(900_000, None, TcpFlags::SYN, Some(1460));
    let answers: Vec<TcpRepr> = p.take().iter().filter_map(|f| p.tcp_of(f)).map(|s| s.0).collect();
    assert!(
        answers.iter().any(|r| r.flags.contains(TcpFlags::SYN | TcpFlags::ACK) && r.ack_number == Some(900_001)),
        "the new SYN reaches the listener: {answers:?}"
    );
    assert!(!answers.iter().any(|r| r.flags.contains(TcpFlags::RST)), "{answers:?}");
}

/// RFC 9293 3.10.7.4 / RFC 1122 4.2.2.13, as Linux keeps it: a connection that reached
/// TIME-WAIT while the application still holds its socket (it shut down its side and waits for
/// EOF, as nginx's lingering close does) hands the 4-tuple to TIME-WAIT at once: a new SYN from
/// the same port with a higher sequence number opens a new connection.
#[test]
fn time_wait_while_the_application_holds_the_socket_lets_a_new_syn_in() {
    let mut p = Peer::new(false);
    let (c, segs) = p.connect_and_receive();
    let end = segs.iter().map(|s| s.0.seq_number.wrapping_add(s.1 as u32)).max().unwrap();
    p.shard.tcp_shutdown_write(c).unwrap();
    let fin = p.take().iter().filter_map(|f| p.tcp_of(f)).find(|s| s.0.flags.contains(TcpFlags::FIN)).expect("FIN").0;
    // The peer acknowledges everything and closes too: the shard's side is in TIME-WAIT.
    p.tcp(1001, Some(fin.seq_number.wrapping_add(1).max(end + 1)), TcpFlags::FIN, None);
    p.take();
    assert_eq!(p.shard.tcp_state(c), Ok(stack::TcpState::TimeWait));
    p.tcp(2_000_000, None, TcpFlags::SYN, Some(1460));
    let answers: Vec<TcpRepr> = p.take().iter().filter_map(|f| p.tcp_of(f)).map(|s| s.0).collect();
    assert!(
        answers.iter().any(|r| r.flags.contains(TcpFlags::SYN | TcpFlags::ACK) && r.ack_number == Some(2_000_001)),
        "the SYN reopens the port: {answers:?}"
    );
    // The application still reads EOF from its socket, then closes it.
    assert_eq!(p.shard.tcp_recv(c, &mut [0u8; 8]), Ok(0));
    p.shard.close(c).unwrap();
}

/// A shard on a shared interface whose own ARP request went unanswered (the answer reached
/// another process's queue) resolves the peer from the peer's next frame: the packets that
/// waited leave. A shard that owns its interface keeps waiting for the answer.
#[test]
fn a_shared_interface_resolves_a_waiting_neighbor_from_its_frames() {
    for glean in [false, true] {
        let mut p = Peer::with(false, glean);
        let c = p.shard.tcp_connect(SocketAddr::new(P4.into(), 9000)).unwrap();
        let first = p.take();
        let asked = first.iter().any(|f| EthernetFrame::new_checked(&f[..]).unwrap().ethertype() == EtherType::Arp);
        assert!(asked && first.iter().all(|f| p.tcp_of(f).is_none()), "the SYN waits for an ARP answer");
        let syn_left = |p: &mut Peer| {
            let out = p.take();
            out.iter().filter_map(|f| p.tcp_of(f)).any(|s| s.0.dst_port == 9000 && s.0.flags.contains(TcpFlags::SYN))
        };
        // A frame of no connection (here a segment to a closed port) resolves nothing.
        p.tcp(5000, Some(1), TcpFlags::ACK, None);
        assert!(!syn_left(&mut p), "glean {glean}");
        // A frame of the connection does (here the peer's own SYN: a simultaneous open).
        let port = p.shard.local_addr(c).unwrap().port();
        let syn = tcp::bare_segment(9000, port, 7000, None, TcpFlags::SYN, 65535);
        let f = p.tcp_frame(&syn);
        // Not with a bad checksum.
        let mut bad = f.clone();
        bad[14 + 20 + 16] ^= 0xff;
        p.send(bad);
        assert!(!syn_left(&mut p), "glean {glean}");
        p.send(f);
        assert_eq!(syn_left(&mut p), glean, "glean {glean}");
    }
}
