//! Packets from a source address no host on the link may send from (Linux's martian sources):
//! dropped before any layer above IP sees them, counted as `drop_bad_source`, never answered.
//! The test plays the peer with hand-built segments (`testkit::fuzzing::Rig`).

use nic::Nic;
use testkit::fuzzing::{Rig, PEER, PEER6, PEER_PORT, PORT, SERVER, SERVER6};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, IpAddress, IpProtocol, Ipv4Address, Ipv6Address,
    Ipv6Packet, Ipv6Repr, TcpFlags, TcpRepr,
};

/// A port nobody listens on: a segment to it is answered with a RST.
const CLOSED: u16 = 81;

fn syn(port: u16) -> TcpRepr {
    TcpRepr { max_seg_size: Some(1460), ..tcp::bare_segment(PEER_PORT, port, 1000, None, TcpFlags::SYN, 65535) }
}

fn ack(port: u16) -> TcpRepr {
    tcp::bare_segment(PEER_PORT, port, 1000, Some(5555), TcpFlags::ACK, 65535)
}

fn v6(s: &str) -> IpAddress {
    IpAddress::V6(s.parse::<std::net::Ipv6Addr>().unwrap().into())
}

/// Sends a SYN to the listener, a SYN and an ACK to a closed port from `src` to `dst`; returns
/// the answers and whether a connection was made.
fn probe(r: &mut Rig, src: IpAddress, dst: IpAddress) -> (Vec<TcpRepr>, bool) {
    let sockets = r.shard.socket_count();
    r.segment_between(src, dst, &syn(PORT), &[]);
    r.segment_between(src, dst, &syn(CLOSED), &[]);
    r.segment_between(src, dst, &ack(CLOSED), &[]);
    (r.replies(), r.shard.socket_count() != sockets)
}

/// The crash of issue 22: `::ffff:10.0.0.2` (an IPv4 peer's name in a dual-stack socket API)
/// as the source of an IPv6 segment made a 4-tuple whose remote end reads as IPv4 and whose
/// local end is IPv6; the SYN-ACK (or the RST of a closed port) hit "a 4-tuple never mixes
/// families" in egress. Linux drops such SYNs too (`tcp_v6_conn_request`).
#[test]
fn tcp_from_an_ipv4_mapped_source_to_our_ipv6_address_is_dropped_and_counted() {
    let mut r = Rig::new(|_| {});
    let mapped = IpAddress::V6(Ipv6Address::ipv4_mapped(PEER));
    assert_eq!(probe(&mut r, mapped, SERVER6.into()), (vec![], false));
    assert_eq!(r.shard.link_stats().drop_bad_source, 3);
    assert_eq!(r.shard.stats().tcp_rx_segments, 0, "TCP never saw them");
    // The same peer with its own IPv6 address is served.
    let (answers, connected) = probe(&mut r, PEER6.into(), SERVER6.into());
    assert!(connected);
    let flags: Vec<_> = answers.iter().map(|a| a.flags).collect();
    assert_eq!(flags, [TcpFlags::SYN | TcpFlags::ACK, TcpFlags::RST | TcpFlags::ACK, TcpFlags::RST]);
    assert_eq!(r.shard.link_stats().drop_bad_source, 3);
}

/// ip6_rcv_core drops multicast and loopback sources (RFC 4291 2.7, 2.5.3); an unspecified
/// source, one of our own addresses, or an IPv4-mapped one can only be forged or looped here,
/// and an answer would go to ourselves or to nowhere.
#[test]
fn ipv6_tcp_from_a_source_no_peer_may_use_is_dropped_and_counted() {
    let mut r = Rig::new(|_| {});
    let ours_link_local = IpAddress::V6(r.shard.ipv6_link_local().into());
    let sources = [
        v6("ff02::1"),
        v6("ff05::1:3"),
        v6("::1"),
        v6("::"),
        SERVER6.into(),
        ours_link_local,
        v6("::ffff:10.0.0.2"),
        v6("::ffff:127.0.0.1"),
    ];
    for src in sources {
        assert_eq!(probe(&mut r, src, SERVER6.into()), (vec![], false), "from {src}");
    }
    assert_eq!(r.shard.link_stats().drop_bad_source, 3 * sources.len() as u64);
}

/// ip_route_input_slow's martian sources (multicast, limited broadcast, 0.0.0.0/8, 127.0.0.0/8
/// without route_localnet) and fib_validate_source's (a source that is not unicast in the
/// routing table: our own address, our subnet's directed broadcast).
#[test]
fn ipv4_tcp_from_a_martian_source_is_dropped_and_counted() {
    let mut r = Rig::new(|_| {});
    let sources = [
        Ipv4Address::BROADCAST,
        Ipv4Address::new(10, 0, 0, 255),
        Ipv4Address::new(224, 0, 0, 1),
        Ipv4Address::new(239, 1, 2, 3),
        Ipv4Address::new(127, 0, 0, 1),
        Ipv4Address::new(127, 9, 9, 9),
        Ipv4Address::UNSPECIFIED,
        Ipv4Address::new(0, 1, 2, 3),
        SERVER,
    ];
    for src in sources {
        assert_eq!(probe(&mut r, src.into(), SERVER.into()), (vec![], false), "from {src}");
    }
    assert_eq!(r.shard.link_stats().drop_bad_source, 3 * sources.len() as u64);
    assert_eq!(r.shard.stats().tcp_rx_segments, 0, "TCP never saw them");
    // A neighbor of the subnet is served.
    let (answers, connected) = probe(&mut r, PEER.into(), SERVER.into());
    assert!(connected);
    assert_eq!(answers.len(), 3);
}

/// UDP from an IPv4-mapped source is dropped as TCP is (Linux delivers it to a UDPv6 socket;
/// here 4-tuples store IPv4 as IPv4-mapped, so it would alias an IPv4 flow), and a closed port
/// sends no ICMPv6 error back to it.
#[test]
fn udp_from_an_ipv4_mapped_source_is_dropped_and_counted() {
    let mut r = Rig::new(|_| {});
    for port in [53, 54] {
        let mut f = udp6_frame(&r, Ipv6Address::ipv4_mapped(PEER), port);
        r.inject(&f);
        // The same from the peer's IPv6 address is taken (53) or refused with an ICMPv6 error (54).
        f = udp6_frame(&r, PEER6, port);
        r.inject(&f);
    }
    assert_eq!(r.shard.link_stats().drop_bad_source, 2);
    let s = r.shard.stats();
    assert_eq!((s.udp_rx_datagrams, s.udp_no_port, s.icmp_out_dest_unreachs), (1, 1, 1));
}

fn eth6(r: &Rig, dst: EthernetAddress, payload_len: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload_len];
    EthernetRepr { src_addr: EthernetAddress(r.peer.mac().0), dst_addr: dst, ethertype: EtherType::Ipv6 }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f
}

/// A UDP datagram with 4 bytes of payload from `src` to our IPv6 address's `port`.
fn udp6_frame(r: &Rig, src: Ipv6Address, port: u16) -> Vec<u8> {
    let udp = wire::UdpRepr { src_port: PEER_PORT, dst_port: port };
    let payload = b"ping";
    let len = wire::udp::HEADER_LEN + payload.len();
    let ip =
        Ipv6Repr { src_addr: src, dst_addr: SERVER6, next_header: IpProtocol::Udp, payload_len: len, hop_limit: 64 };
    let mut f = eth6(r, EthernetAddress(r.shard.nic().mac().0), 40 + len);
    ip.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
    udp.emit(
        &mut wire::UdpPacket::new_unchecked(&mut f[54..]),
        &IpAddress::V6(src),
        &IpAddress::V6(SERVER6),
        payload,
        true,
    );
    f
}
