//! One Ethernet frame through every parser of `wire`, the way the stack dispatches it: Ethernet,
//! ARP or IPv4 or IPv6 (and its extension headers), then ICMPv4, ICMPv6 with neighbor discovery,
//! TCP with its options, or UDP.
//!
//! Each frame is parsed twice, with checksums verified and without (so that the fuzzer gets past
//! them), and whatever parses is emitted again and re-parsed: parse(emit(repr)) must give repr
//! back. Nothing may panic.
//!
//! Run from `crates/wire`: `cargo +nightly fuzz run frame` (seeds in `fuzz/corpus/frame`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::icmpv6::NdiscOptions;
use wire::*;

fuzz_target!(|data: &[u8]| {
    frame(data, true);
    frame(data, false);
});

fn frame(data: &[u8], verify: bool) {
    let Ok(eth) = EthernetFrame::new_checked(data) else {
        return;
    };
    let Ok(eth_repr) = EthernetRepr::parse(&eth) else {
        return;
    };
    let mut buf = vec![0u8; eth_repr.header_len()];
    eth_repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    assert_eq!(
        EthernetRepr::parse(&EthernetFrame::new_unchecked(&buf[..])),
        Ok(eth_repr)
    );

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
    let _ = (
        packet.source_hardware_addr(),
        packet.target_protocol_addr(),
        packet.operation(),
    );
    let Ok(repr) = ArpRepr::parse(&packet) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut ArpPacket::new_unchecked(&mut buf[..]));
    assert_eq!(
        ArpRepr::parse(&ArpPacket::new_unchecked(&buf[..])),
        Ok(repr)
    );
}

fn ipv4(data: &[u8], verify: bool) {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.options(),
        packet.is_fragment(),
        packet.frag_offset(),
        packet.dscp(),
    );
    let Ok(repr) = Ipv4Repr::parse(&packet, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), true);
    assert_eq!(
        Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&buf[..]), true),
        Ok(repr)
    );

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
    assert_eq!(
        Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&buf[..])),
        Ok(repr)
    );

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
    let _ = (
        packet.msg_type(),
        packet.echo_ident(),
        packet.next_hop_mtu(),
        packet.data(),
    );
    let Ok(repr) = Icmpv4Repr::parse(&packet, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf[..]), true);
    assert_eq!(
        Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(&buf[..]), true),
        Ok(repr)
    );
}

fn icmpv6(data: &[u8], src: &Ipv6Address, dst: &Ipv6Address, verify: bool) {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else {
        return;
    };
    let _ = (
        packet.msg_type(),
        packet.data(),
        NdiscOptions::new(packet.ndisc_options()).count(),
    );
    let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, verify) else {
        return;
    };
    let mut buf = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut Icmpv6Packet::new_unchecked(&mut buf[..]),
        src,
        dst,
        true,
    );
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
    repr.emit(
        &mut UdpPacket::new_unchecked(&mut buf[..]),
        src,
        dst,
        payload,
        true,
    );
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
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[..]),
        src,
        dst,
        payload,
        true,
    );
    let reparsed = TcpPacket::new_checked(&buf[..]).unwrap();
    let again = TcpRepr::parse(&reparsed, src, dst, true).unwrap();
    assert_eq!(reparsed.payload(), payload);
    // SACK blocks that do not fit beside the other options are left out on emit: the blocks
    // that come back are a prefix of those that went in.
    let sent: Vec<_> = repr.sack_ranges.iter().flatten().collect();
    let back: Vec<_> = again.sack_ranges.iter().flatten().collect();
    assert!(sent.starts_with(&back));
    assert_eq!(
        TcpRepr {
            sack_ranges: repr.sack_ranges,
            ..again
        },
        repr
    );
}
