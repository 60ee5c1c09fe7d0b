//! The checks behind the fuzz targets (`fuzz/`), here so that `cargo test` runs them on stable
//! too (over the seed corpus and pseudo-random inputs) and the fuzzers call the same code.
//!
//! Each function takes arbitrary bytes and panics only on a bug in this crate: a parse that
//! panics, or a Repr that does not survive emit and parse unchanged.

#![allow(missing_docs)]

extern crate std;
use std::vec;

use crate::icmpv6::NdiscOptions;
use crate::tcp::{HEADER_LEN, MAX_OPTIONS_LEN};
use crate::*;

/// One Ethernet frame through every parser, as the stack dispatches it, with and without
/// checksum verification.
pub fn frame_both_ways(data: &[u8]) {
    frame(data, true);
    frame(data, false);
}

/// Arbitrary bytes as a TCP option area: the walk ends, never panics, and every option survives
/// emit and parse; areas that fit a header also go through `TcpRepr::parse` inside a segment,
/// which they never make fail.
pub fn tcp_options(data: &[u8]) {
    let _ = TcpOption::parse(data);

    let mut count = 0;
    for option in TcpOptions::new(data) {
        count += 1;
        // Every step consumes at least one byte.
        assert!(count <= data.len());
        let Ok(option) = option else { continue };
        let mut buf = vec![0u8; option.buffer_len()];
        assert!(option.emit(&mut buf).is_empty());
        let (again, rest) = TcpOption::parse(&buf).unwrap();
        assert_eq!(again, option);
        assert!(rest.is_empty() || option == TcpOption::EndOfList);
    }

    if data.len() <= MAX_OPTIONS_LEN {
        let header_len = HEADER_LEN + data.len().div_ceil(4) * 4;
        let mut segment = vec![0u8; header_len + 1];
        let mut packet = TcpPacket::new_unchecked(&mut segment[..]);
        packet.set_src_port(1);
        packet.set_dst_port(2);
        packet.set_header_len(header_len as u8);
        packet.options_mut()[..data.len()].copy_from_slice(data);
        let addr = IpAddress::V4(Ipv4Address::new(10, 0, 0, 1));
        let packet = TcpPacket::new_checked(&segment[..]).unwrap();
        // Options never fail a segment (Linux's tcp_parse_options skips or stops instead).
        let repr = TcpRepr::parse(&packet, &addr, &addr, false).unwrap();
        assert_eq!(repr.payload_len, 1);
    }
}

/// One frame, checksums verified or not.
pub fn frame(data: &[u8], verify: bool) {
    let Ok(eth) = EthernetFrame::new_checked(data) else {
        return;
    };
    let Ok(eth_repr) = EthernetRepr::parse(&eth) else {
        return;
    };
    let mut buf = vec![0u8; eth_repr.header_len()];
    eth_repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    assert_eq!(EthernetRepr::parse(&EthernetFrame::new_unchecked(&buf[..])), Ok(eth_repr));

    match eth_repr.ethertype {
        EtherType::Arp => arp(eth.payload()),
        EtherType::Ipv4 => ipv4(eth.payload(), verify),
        EtherType::Ipv6 => ipv6(eth.payload(), verify),
        EtherType::Unknown(_) => {}
    }
}

fn arp(data: &[u8]) {
    let Ok(packet) = ArpPacket::new_checked(data) else {
        return;
    };
    let _ = (packet.source_hardware_addr(), packet.target_protocol_addr(), packet.operation());
    let Ok(repr) = ArpRepr::parse(&packet) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    assert_eq!(ArpRepr::parse(&ArpPacket::new_unchecked(&buf[..])), Ok(repr));
}

fn ipv4(data: &[u8], verify: bool) {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.options(), packet.is_fragment(), packet.frag_offset(), packet.dscp());
    let Ok(repr) = Ipv4Repr::parse(&packet, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), true);
    assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&buf[..]), true), Ok(repr));

    let (src, dst) = (IpAddress::V4(repr.src_addr), IpAddress::V4(repr.dst_addr));
    let payload = packet.payload();
    match repr.next_header {
        IpProtocol::Icmp => icmpv4(payload, verify),
        IpProtocol::Tcp => tcp(payload, &src, &dst, verify),
        IpProtocol::Udp => udp(payload, &src, &dst, verify),
        _ => {}
    }
}

fn ipv6(data: &[u8], verify: bool) {
    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.traffic_class(), packet.flow_label());
    let Ok(repr) = Ipv6Repr::parse(&packet) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
    assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..])), Ok(repr));

    let Ok(Ipv6UpperLayer::Protocol { protocol, offset }) = packet.upper_layer() else {
        return;
    };
    let payload = &packet.payload()[offset..];
    let (src, dst) = (IpAddress::V6(repr.src_addr), IpAddress::V6(repr.dst_addr));
    match protocol {
        IpProtocol::Icmpv6 => icmpv6(payload, &repr.src_addr, &repr.dst_addr, verify),
        IpProtocol::Tcp => tcp(payload, &src, &dst, verify),
        IpProtocol::Udp => udp(payload, &src, &dst, verify),
        _ => {}
    }
}

fn icmpv4(data: &[u8], verify: bool) {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.echo_ident(), packet.next_hop_mtu(), packet.data());
    let Ok(repr) = Icmpv4Repr::parse(&packet, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), true);
    assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&buf[..]), true), Ok(repr));
}

fn icmpv6(data: &[u8], src: &Ipv6Address, dst: &Ipv6Address, verify: bool) {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = (packet.msg_type(), packet.data(), NdiscOptions::new(packet.ndisc_options()).count());
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut buf[..]), src, dst, true);
    let reparsed = Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(&buf[..]), src, dst, true);
    assert_eq!(reparsed, Ok(repr));
}

fn udp(data: &[u8], src: &IpAddress, dst: &IpAddress, verify: bool) {
    let Ok(packet) = UdpPacket::new_checked(data) else {
        return;
    };
    let Ok(repr) = UdpRepr::parse(&packet, src, dst, verify) else {
        return;
    };
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len(payload.len())];
    repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]), src, dst, payload, true);
    let reparsed = UdpPacket::new_checked(&buf[..]).unwrap();
    assert_eq!(UdpRepr::parse(&reparsed, src, dst, true), Ok(repr));
    assert_eq!(reparsed.payload(), payload);
}

fn tcp(data: &[u8], src: &IpAddress, dst: &IpAddress, verify: bool) {
    let Ok(packet) = TcpPacket::new_checked(data) else {
        return;
    };
    let _ = TcpOptions::new(packet.options()).count();
    let Ok(repr) = TcpRepr::parse(&packet, src, dst, verify) else {
        return;
    };
    let payload = packet.payload();
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut TcpPacket::new_unchecked(&mut buf[..]), src, dst, payload, true);
    let reparsed = TcpPacket::new_checked(&buf[..]).unwrap();
    let again = TcpRepr::parse(&reparsed, src, dst, true).unwrap();
    assert_eq!(reparsed.payload(), payload);
    // SACK blocks that do not fit beside the other options are left out on emit: the blocks
    // that come back are a prefix of those that went in.
    let sent: Vec<_> = repr.sack_ranges.iter().flatten().collect();
    let back: Vec<_> = again.sack_ranges.iter().flatten().collect();
    assert!(sent.starts_with(&back));
    assert_eq!(TcpRepr { sack_ranges: repr.sack_ranges, ..again }, repr);
}
