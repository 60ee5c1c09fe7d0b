//! The interface layer over the in-memory NIC pair: the test plays the kernel peer on endpoint B,
//! crafting frames with `wire` and checking every reply field by field.

use nic::clock::ManualClock;
use nic::fault::{FaultConfig, FaultyNic};
use nic::{Nic, PacketBuf};
use stack::iface::IfaceStats;
use stack::shard::{Shard, ShardConfig};
use testkit::mem::{pair, MemConfig, MemNic};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet,
    Ipv6Repr, NdiscRepr,
};

const OUR_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 1);
const PEER_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 2);

fn our_ip6() -> Ipv6Address {
    "fd99::1".parse::<std::net::Ipv6Addr>().unwrap().into()
}
fn peer_ip6() -> Ipv6Address {
    "fd99::2".parse::<std::net::Ipv6Addr>().unwrap().into()
}

struct Rig<N: Nic> {
    iface: Shard<N>,
    peer: MemNic,
    our_mac: EthernetAddress,
    peer_mac: EthernetAddress,
}

fn rig() -> Rig<MemNic> {
    let (a, b) = pair(MemConfig::default());
    let our_mac = EthernetAddress(a.mac().0);
    let peer_mac = EthernetAddress(b.mac().0);
    let cfg = ShardConfig::new(a.mac(), Some((OUR_IP.into(), 24)), Some((our_ip6().into(), 64)), [7; 32]);
    Rig { iface: Shard::new(a, cfg), peer: b, our_mac, peer_mac }
}

impl<N: Nic> Rig<N> {
    /// Sends `frames` from the peer, lets the interface poll until idle, returns what came back.
    fn exchange(&mut self, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        for f in frames {
            let mut b = self.peer.alloc().unwrap();
            b.set_len(f.len());
            b.data_mut().copy_from_slice(f);
            out.push(b);
        }
        while !out.is_empty() {
            self.peer.tx_burst(&mut out);
            while self.iface.poll(0) > 0 {}
        }
        while self.iface.poll(0) > 0 {}
        let mut rx = Vec::new();
        while self.peer.rx_burst(&mut rx, 64) > 0 {}
        rx.iter().map(|b| b.data().to_vec()).collect()
    }

    fn stats(&self) -> IfaceStats {
        *self.iface.link_stats()
    }
}

fn eth(src: EthernetAddress, dst: EthernetAddress, ethertype: EtherType, payload_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload_len];
    EthernetRepr { src_addr: src, dst_addr: dst, ethertype }.emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f
}

fn arp_request(r: &Rig<impl Nic>, target: Ipv4Address) -> Vec<u8> {
    let repr = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr: r.peer_mac,
        source_protocol_addr: PEER_IP,
        target_hardware_addr: EthernetAddress([0; 6]),
        target_protocol_addr: target,
    };
    let mut f = eth(r.peer_mac, EthernetAddress::BROADCAST, EtherType::Arp, repr.buffer_len());
    repr.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
    f
}

fn ping(r: &Rig<impl Nic>, dst: Ipv4Address, seq: u16, data: &[u8]) -> Vec<u8> {
    let icmp = Icmpv4Repr::EchoRequest { ident: 0x4242, seq_no: seq, data };
    let ip = Ipv4Repr {
        src_addr: PEER_IP,
        dst_addr: dst,
        next_header: IpProtocol::Icmp,
        payload_len: icmp.buffer_len(),
        hop_limit: 64,
    };
    let mut f = eth(r.peer_mac, r.our_mac, EtherType::Ipv4, ip.header_len() + icmp.buffer_len());
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]), true);
    icmp.emit(&mut Icmpv4Packet::new_unchecked(&mut f[34..]), true);
    f
}

fn ipv6_frame(
    r: &Rig<impl Nic>,
    dst_mac: EthernetAddress,
    dst: Ipv6Address,
    hop_limit: u8,
    icmp: &Icmpv6Repr,
) -> Vec<u8> {
    ipv6_frame_from(r, peer_ip6(), dst_mac, dst, hop_limit, icmp)
}

fn ipv6_frame_from(
    r: &Rig<impl Nic>,
    src: Ipv6Address,
    dst_mac: EthernetAddress,
    dst: Ipv6Address,
    hop_limit: u8,
    icmp: &Icmpv6Repr,
) -> Vec<u8> {
    let len = icmp.buffer_len();
    let ip = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: IpProtocol::Icmpv6, payload_len: len, hop_limit };
    let mut f = eth(r.peer_mac, dst_mac, EtherType::Ipv6, 40 + len);
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
    icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut f[54..]), &ip.src_addr, &ip.dst_addr, true);
    f
}

/// The reply's Ethernet header must come back to the peer from us.
fn check_eth(r: &Rig<impl Nic>, f: &[u8], ethertype: EtherType) {
    let e = EthernetFrame::new_checked(f).unwrap();
    assert_eq!(e.dst_addr(), r.peer_mac);
    assert_eq!(e.src_addr(), r.our_mac);
    assert_eq!(e.ethertype(), ethertype);
}

/// Parses an ICMP echo reply, checking both checksums; returns (ident, seq, data).
fn parse_echo_reply(f: &[u8]) -> (Ipv4Repr, u16, u16, Vec<u8>) {
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    let repr = Ipv4Repr::parse(&ip, true).expect("valid IPv4 header and checksum");
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    match Icmpv4Repr::parse(&icmp, true).expect("valid ICMP checksum") {
        Icmpv4Repr::EchoReply { ident, seq_no, data } => (repr, ident, seq_no, data.to_vec()),
        other => panic!("expected an echo reply, got {other:?}"),
    }
}

#[test]
fn arp_request_for_our_address_is_answered() {
    let mut r = rig();
    let req = arp_request(&r, OUR_IP);
    let replies = r.exchange(&[req]);
    assert_eq!(replies.len(), 1);
    check_eth(&r, &replies[0], EtherType::Arp);
    let repr = ArpRepr::parse(&ArpPacket::new_checked(&replies[0][14..]).unwrap()).unwrap();
    assert_eq!(
        repr,
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: r.our_mac,
            source_protocol_addr: OUR_IP,
            target_hardware_addr: r.peer_mac,
            target_protocol_addr: PEER_IP,
        }
    );
    assert_eq!(r.stats().arp_replies, 1);
}

#[test]
fn arp_for_another_address_is_ignored_and_counted() {
    let mut r = rig();
    let req = arp_request(&r, Ipv4Address::new(10, 99, 0, 3));
    assert!(r.exchange(&[req]).is_empty());
    assert_eq!(r.stats().drop_not_for_us, 1);
    assert_eq!(r.stats().arp_replies, 0);
}

#[test]
fn ping_is_answered_with_the_same_data() {
    let mut r = rig();
    let data: Vec<u8> = (0..56u8).collect();
    let replies = r.exchange(&[ping(&r, OUR_IP, 7, &data)]);
    assert_eq!(replies.len(), 1);
    check_eth(&r, &replies[0], EtherType::Ipv4);
    let (ip, ident, seq, got) = parse_echo_reply(&replies[0]);
    assert_eq!((ip.src_addr, ip.dst_addr, ip.next_header), (OUR_IP, PEER_IP, IpProtocol::Icmp));
    assert_eq!((ident, seq), (0x4242, 7));
    assert_eq!(got, data);
    assert_eq!(replies[0].len(), 14 + 20 + 8 + 56, "padding or stale bytes sent");
    assert_eq!(r.stats().echo_replies, 1);
}

#[test]
fn a_padded_short_frame_is_answered_without_the_padding() {
    let mut r = rig();
    let mut f = ping(&r, OUR_IP, 1, b"hi");
    let unpadded = f.len();
    f.resize(60, 0xee); // Ethernet minimum frame: the NIC pads
    let replies = r.exchange(&[f]);
    assert_eq!(replies.len(), 1);
    assert_eq!(replies[0].len(), unpadded);
    assert_eq!(parse_echo_reply(&replies[0]).3, b"hi");
}

#[test]
fn bad_ipv4_checksum_is_dropped_and_counted() {
    let mut r = rig();
    let mut f = ping(&r, OUR_IP, 1, b"abc");
    f[14 + 10] ^= 0xff; // header checksum
    let mut g = ping(&r, OUR_IP, 2, b"abc");
    g[34 + 2] ^= 0x01; // ICMP checksum
    assert!(r.exchange(&[f, g]).is_empty());
    assert_eq!(r.stats().drop_checksum, 2);
}

#[test]
fn ipv4_fragments_are_dropped_and_counted() {
    let mut r = rig();
    let mut f = ping(&r, OUR_IP, 1, b"abc");
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.set_more_frags(true);
        ip.fill_checksum();
    }
    assert!(r.exchange(&[f]).is_empty());
    assert_eq!(r.stats().drop_fragment, 1);
}

#[test]
fn frames_for_other_hosts_are_ignored() {
    let mut r = rig();
    let mut f = ping(&r, OUR_IP, 1, b"abc");
    f[0..6].copy_from_slice(&[0x02, 9, 9, 9, 9, 9]);
    let g = ping(&r, Ipv4Address::new(10, 99, 0, 9), 1, b"abc");
    assert!(r.exchange(&[f, g]).is_empty());
    assert_eq!(r.stats().drop_not_for_us, 2);
}

#[test]
fn truncated_frames_never_get_an_answer() {
    let mut r = rig();
    let f = ping(&r, OUR_IP, 1, b"abcdefgh");
    let cut: Vec<Vec<u8>> = (0..f.len()).map(|n| f[..n].to_vec()).collect();
    assert!(r.exchange(&cut).is_empty());
    let s = r.stats();
    assert_eq!(s.rx_frames, f.len() as u64);
    assert_eq!(s.dropped(), s.rx_frames);
}

#[test]
fn neighbor_solicitation_is_answered_with_an_advert() {
    let mut r = rig();
    let target = our_ip6();
    let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr: Some(r.peer_mac) });
    let group = target.solicited_node();
    let mac = EthernetAddress([0x33, 0x33, 0xff, group.0[13], group.0[14], group.0[15]]);
    let f = ipv6_frame(&r, mac, group, 255, &ns);
    let replies = r.exchange(std::slice::from_ref(&f));
    assert_eq!(replies.len(), 1);
    check_eth(&r, &replies[0], EtherType::Ipv6);
    let ip = Ipv6Packet::new_checked(&replies[0][14..]).unwrap();
    let ip_repr = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!((ip_repr.src_addr, ip_repr.dst_addr, ip_repr.hop_limit), (target, peer_ip6(), 255));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&icmp, &ip_repr.src_addr, &ip_repr.dst_addr, true).expect("valid checksum") {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr }) => {
            assert_eq!(target_addr, target);
            assert_eq!(lladdr, Some(r.our_mac));
            assert!(flags.solicited() && !flags.router());
        }
        other => panic!("expected a neighbor advert, got {other:?}"),
    }
    // A solicitation that did not come from the link (hop limit below 255) is not answered.
    let off_link = ipv6_frame(&r, mac, group, 64, &ns);
    assert!(r.exchange(&[off_link]).is_empty());
    assert_eq!(r.stats().nd_adverts, 1);
}

/// Duplicate address detection (RFC 4862 section 5.4.2) solicits from `::` with no source
/// link-layer option: the advertisement, which carries ours, is longer than the solicitation it
/// is written over (that overran the received frame and panicked), and goes to all nodes.
#[test]
fn a_solicitation_from_the_unspecified_address_is_answered_to_all_nodes() {
    let mut r = rig();
    let target = our_ip6();
    let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr: None });
    let group = target.solicited_node();
    let f = ipv6_frame_from(&r, Ipv6Address::UNSPECIFIED, group.multicast_ethernet(), group, 255, &ns);
    let replies = r.exchange(&[f]);
    assert_eq!(replies.len(), 1);
    let ip = Ipv6Packet::new_checked(&replies[0][14..]).unwrap();
    let ip_repr = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!((ip_repr.src_addr, ip_repr.dst_addr), (target, Ipv6Address::LINK_LOCAL_ALL_NODES));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&icmp, &ip_repr.src_addr, &ip_repr.dst_addr, true).expect("valid checksum") {
        Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr }) => {
            assert_eq!((target_addr, lladdr), (target, Some(r.our_mac)));
            assert!(!flags.solicited() && flags.override_());
        }
        other => panic!("expected a neighbor advert, got {other:?}"),
    }
    assert_eq!((r.stats().nd_adverts, r.stats().drop_bad_source), (1, 0));
}

#[test]
fn ping6_is_answered_with_the_same_data() {
    let mut r = rig();
    let data = b"pronghorn ping6 payload";
    let req = Icmpv6Repr::EchoRequest { ident: 9, seq_no: 3, data };
    let f = ipv6_frame(&r, r.our_mac, our_ip6(), 64, &req);
    let replies = r.exchange(&[f]);
    assert_eq!(replies.len(), 1);
    check_eth(&r, &replies[0], EtherType::Ipv6);
    let ip = Ipv6Packet::new_checked(&replies[0][14..]).unwrap();
    let ip_repr = Ipv6Repr::parse(&ip).unwrap();
    assert_eq!((ip_repr.src_addr, ip_repr.dst_addr), (our_ip6(), peer_ip6()));
    let icmp = Icmpv6Packet::new_checked(ip.payload()).unwrap();
    match Icmpv6Repr::parse(&icmp, &ip_repr.src_addr, &ip_repr.dst_addr, true).expect("valid checksum") {
        Icmpv6Repr::EchoReply { ident, seq_no, data: got } => {
            assert_eq!((ident, seq_no), (9, 3));
            assert_eq!(got, data);
        }
        other => panic!("expected an echo reply, got {other:?}"),
    }
}

/// With loss, duplication, reordering and corruption on both directions of the interface's NIC,
/// every reply that reaches the peer is a correct answer to a request that was sent: corrupted
/// requests are dropped and counted, never answered with wrong bytes.
#[test]
fn under_faults_every_answer_is_correct_and_every_frame_accounted_for() {
    let (a, b) = pair(MemConfig::default());
    let faults: FaultConfig = "loss=0.05,dup=0.05,reorder=0.05,corrupt=0.05,seed=7".parse().unwrap();
    let clock = ManualClock::new();
    let our_mac = EthernetAddress(a.mac().0);
    let peer_mac = EthernetAddress(b.mac().0);
    let cfg = ShardConfig::new(a.mac(), Some((OUR_IP.into(), 24)), None, [7; 32]);
    let faulty = FaultyNic::new(a, faults, clock.clone());
    let mut r = Rig { iface: Shard::new(faulty, cfg), peer: b, our_mac, peer_mac };
    const N: u16 = 2000;
    let requests: Vec<Vec<u8>> = (0..N).map(|seq| ping(&r, OUR_IP, seq, &seq.to_be_bytes().repeat(8))).collect();
    let mut replies = Vec::new();
    for chunk in requests.chunks(50) {
        replies.extend(r.exchange(chunk));
        clock.advance_ns(2_000_000); // past the reorder hold timeout
        replies.extend(r.exchange(&[]));
    }
    let mut seen = vec![0u32; N as usize];
    let mut corrupted_replies = 0;
    for f in &replies {
        // A reply corrupted on the way out (tx faults) is the wire's problem, not the stack's:
        // the peer's checks catch it. Every intact reply must be exactly right.
        let ip_ok = Ipv4Packet::new_checked(&f[14..]).ok().and_then(|ip| Ipv4Repr::parse(&ip, true).ok()).is_some();
        let intact = ip_ok
            && Icmpv4Packet::new_checked(&f[34..]).ok().and_then(|icmp| Icmpv4Repr::parse(&icmp, true).ok()).is_some()
            && EthernetFrame::new_checked(&f[..]).unwrap().dst_addr() == peer_mac;
        if !intact {
            corrupted_replies += 1;
            continue;
        }
        let (_, ident, seq, data) = parse_echo_reply(f);
        assert_eq!(ident, 0x4242);
        assert_eq!(data, seq.to_be_bytes().repeat(8), "reply data does not match its request");
        seen[seq as usize] += 1;
    }
    let answered = seen.iter().filter(|&&c| c > 0).count();
    let s = *r.iface.link_stats();
    let (rx_faults, tx_faults) = r.iface.nic().fault_stats();
    assert!(
        rx_faults.corrupted > 0 && rx_faults.dropped > 0 && tx_faults.duplicated > 0,
        "{rx_faults:?} {tx_faults:?}"
    );
    assert!(answered > (N as usize) * 8 / 10, "only {answered} of {N} answered");
    // Damaged replies come from tx corruption (and its duplicates), or from requests whose
    // Ethernet source was corrupted on rx (Ethernet has no checksum once the NIC strips the FCS).
    assert!(corrupted_replies as u64 <= tx_faults.corrupted + tx_faults.duplicated + rx_faults.corrupted);
    // Every received frame was either answered or counted as a drop.
    assert_eq!(s.rx_frames, s.echo_replies + s.dropped(), "{s:?}");
    drop(r.iface);
    assert_eq!(r.peer.pool_available(), r.peer.pool_size(), "peer buffers leaked");
}

/// Replies that find the tx backlog full (the NIC's queue stays full: here the peer never reads)
/// are dropped and counted as `drop_tx_full`, not as answered: every received frame is still
/// either answered or counted as a drop.
#[test]
fn replies_that_find_the_tx_queue_full_are_dropped_and_counted() {
    const WIRE: usize = 64;
    let (a, b) = pair(MemConfig { queue_len: WIRE, pool_size: 10_000, ..MemConfig::default() });
    let our_mac = EthernetAddress(a.mac().0);
    let peer_mac = EthernetAddress(b.mac().0);
    let cfg = ShardConfig::new(a.mac(), Some((OUR_IP.into(), 24)), None, [7; 32]);
    let mut r = Rig { iface: Shard::new(a, cfg), peer: b, our_mac, peer_mac };
    // What the wire takes, then what the shard holds back for it (its tx backlog, 8192
    // frames), then more.
    let backlog = 8192;
    let n = WIRE + backlog + 100;
    for _ in 0..n / 32 + 1 {
        let mut burst: Vec<_> = (0..32)
            .map(|_| {
                let f = arp_request(&r, OUR_IP);
                let mut b = r.peer.alloc().unwrap();
                b.set_len(f.len());
                b.data_mut().copy_from_slice(&f);
                b
            })
            .collect();
        r.peer.tx_burst(&mut burst);
        r.iface.poll(0);
    }
    let s = r.stats();
    let sent = (n / 32 + 1) * 32;
    assert_eq!(s.rx_frames, sent as u64);
    assert_eq!(s.arp_replies, (WIRE + backlog) as u64, "{s:?}");
    assert_eq!(s.drop_tx_full, (sent - WIRE - backlog) as u64, "{s:?}");
    assert_eq!(s.rx_frames, s.arp_replies + s.dropped(), "{s:?}");
    assert_eq!(r.iface.stats().tx_queue_full, 0, "no answer was queued and then thrown away");
}
