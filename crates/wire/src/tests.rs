//! Hand-written captures shared by the tests of every module, and tests across layers: each
//! capture through every parser, every truncation of it, every single-bit corruption of it, and
//! the writer of the fuzzing seed corpus.
//!
//! The captures are written out by hand as Linux sends them (a QEMU guest at 52:54:00:12:34:56
//! talking to 192.168.1.1 or fe80::2): the same field values, option layouts and data patterns,
//! with correct checksums.

use std::vec::Vec;

use crate::*;

/// `arping 10.0.2.2` from 10.0.2.15: a broadcast who-has, 42 bytes before padding.
pub(crate) const ARP_REQUEST: [u8; 42] = [
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 0x06,
    0x04, 0x00, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x0a, 0x00, 0x02, 0x0f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x0a, 0x00, 0x02, 0x02,
];

/// `ping -c1 192.168.1.1`: echo request, ident 0x1c46, seq 1, 56 bytes of data (a timeval, then
/// 0x10..=0x37).
pub(crate) const ICMP_ECHO_REQUEST: [u8; 98] = [
    0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45, 0x00, 0x00, 0x54, 0x4d,
    0x2e, 0x40, 0x00, 0x40, 0x01, 0x6a, 0x1f, 0xc0, 0xa8, 0x01, 0x0a, 0xc0, 0xa8, 0x01, 0x01, 0x08, 0x00, 0x83, 0x09,
    0x1c, 0x46, 0x00, 0x01, 0xc2, 0xa3, 0xf1, 0x65, 0x00, 0x00, 0x00, 0x00, 0xe1, 0xd2, 0x04, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x21,
    0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c, 0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34,
    0x35, 0x36, 0x37,
];

/// `curl http://192.168.1.1/`: the SYN, options MSS 1460, SACK permitted, timestamps, NOP,
/// window scale 7.
pub(crate) const TCP_SYN: [u8; 74] = [
    0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45, 0x00, 0x00, 0x3c, 0x1f,
    0x6b, 0x40, 0x00, 0x40, 0x06, 0x97, 0xf5, 0xc0, 0xa8, 0x01, 0x0a, 0xc0, 0xa8, 0x01, 0x01, 0xd4, 0x31, 0x00, 0x50,
    0x5a, 0x3c, 0x8f, 0x21, 0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, 0x95, 0x3b, 0x00, 0x00, 0x02, 0x04, 0x05,
    0xb4, 0x04, 0x02, 0x08, 0x0a, 0x2a, 0x3b, 0x4c, 0x5d, 0x00, 0x00, 0x00, 0x00, 0x01, 0x03, 0x03, 0x07,
];

/// Neighbor solicitation from fe80::5054:ff:fe12:3456 for fe80::2, to its solicited-node group,
/// with a source link-layer address option.
pub(crate) const IPV6_NS: [u8; 86] = [
    0x33, 0x33, 0xff, 0x00, 0x00, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x86, 0xdd, 0x60, 0x00, 0x00, 0x00, 0x00,
    0x20, 0x3a, 0xff, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x50, 0x54, 0x00, 0xff, 0xfe, 0x12, 0x34, 0x56,
    0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xff, 0x00, 0x00, 0x02, 0x87, 0x00, 0x72,
    0x20, 0x00, 0x00, 0x00, 0x00, 0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x02, 0x01, 0x01, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56,
];

/// A DNS query for example.com A, 41000 -> 53.
pub(crate) const UDP_DNS_QUERY: [u8; 71] = [
    0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x08, 0x00, 0x45, 0x00, 0x00, 0x39, 0x8a,
    0x11, 0x40, 0x00, 0x40, 0x11, 0x2d, 0x47, 0xc0, 0xa8, 0x01, 0x0a, 0xc0, 0xa8, 0x01, 0x01, 0xa0, 0x28, 0x00, 0x35,
    0x00, 0x25, 0x60, 0xaf, 0xab, 0xcd, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78,
    0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00, 0x00, 0x01, 0x00, 0x01,
];

/// The port unreachable 192.168.1.1 answers to that query (Linux quotes the whole datagram).
pub(crate) const ICMP_PORT_UNREACHABLE: [u8; 99] = [
    0x52, 0x54, 0x00, 0x12, 0x34, 0x56, 0x52, 0x55, 0x0a, 0x00, 0x02, 0x02, 0x08, 0x00, 0x45, 0xc0, 0x00, 0x55, 0x0b,
    0x7e, 0x00, 0x00, 0x40, 0x01, 0xeb, 0x0e, 0xc0, 0xa8, 0x01, 0x01, 0xc0, 0xa8, 0x01, 0x0a, 0x03, 0x03, 0x80, 0x8f,
    0x00, 0x00, 0x00, 0x00, 0x45, 0x00, 0x00, 0x39, 0x8a, 0x11, 0x40, 0x00, 0x40, 0x11, 0x2d, 0x47, 0xc0, 0xa8, 0x01,
    0x0a, 0xc0, 0xa8, 0x01, 0x01, 0xa0, 0x28, 0x00, 0x35, 0x00, 0x25, 0x60, 0xaf, 0xab, 0xcd, 0x01, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65, 0x03, 0x63, 0x6f, 0x6d, 0x00,
    0x00, 0x01, 0x00, 0x01,
];

/// Every capture, with the name of its seed file in `fuzz/corpus/frame/`.
pub(crate) const CAPTURES: [(&str, &[u8]); 6] = [
    ("arp_request", &ARP_REQUEST),
    ("icmp_echo_request", &ICMP_ECHO_REQUEST),
    ("tcp_syn", &TCP_SYN),
    ("ipv6_ns", &IPV6_NS),
    ("udp_dns_query", &UDP_DNS_QUERY),
    ("icmp_port_unreachable", &ICMP_PORT_UNREACHABLE),
];

/// What a frame turned out to be, down to the top layer this crate parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parsed {
    Arp(ArpRepr),
    Icmpv4,
    Icmpv6,
    Tcp(TcpRepr),
    Udp(UdpRepr),
}

/// Parses a frame the way the stack will: Ethernet, then ARP or IP, then the transport, every
/// checksum verified.
fn parse_frame(frame: &[u8]) -> Result<Parsed> {
    let eth = EthernetFrame::new_checked(frame)?;
    match EthernetRepr::parse(&eth)?.ethertype {
        EtherType::Arp => Ok(Parsed::Arp(ArpRepr::parse(&ArpPacket::new_checked(eth.payload())?)?)),
        EtherType::Ipv4 => {
            let packet = Ipv4Packet::new_checked(eth.payload())?;
            let ip = Ipv4Repr::parse(&packet, true)?;
            let (src, dst) = (IpAddress::V4(ip.src_addr), IpAddress::V4(ip.dst_addr));
            parse_transport(ip.next_header, packet.payload(), &src, &dst)
        }
        EtherType::Ipv6 => {
            let packet = Ipv6Packet::new_checked(eth.payload())?;
            let ip = Ipv6Repr::parse(&packet)?;
            match packet.upper_layer()? {
                Ipv6UpperLayer::Protocol { protocol, offset } => {
                    let (src, dst) = (IpAddress::V6(ip.src_addr), IpAddress::V6(ip.dst_addr));
                    parse_transport(protocol, &packet.payload()[offset..], &src, &dst)
                }
                Ipv6UpperLayer::Fragment { .. } => Err(Error::Unsupported),
            }
        }
        EtherType::Unknown(_) => Err(Error::Unsupported),
    }
}

fn parse_transport(protocol: IpProtocol, payload: &[u8], src: &IpAddress, dst: &IpAddress) -> Result<Parsed> {
    match (protocol, src, dst) {
        (IpProtocol::Icmp, IpAddress::V4(_), _) => {
            Icmpv4Repr::parse(&Icmpv4Packet::new_checked(payload)?, true).map(|_| Parsed::Icmpv4)
        }
        (IpProtocol::Icmpv6, IpAddress::V6(s), IpAddress::V6(d)) => {
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(payload)?, s, d, true).map(|_| Parsed::Icmpv6)
        }
        (IpProtocol::Tcp, _, _) => TcpRepr::parse(&TcpPacket::new_checked(payload)?, src, dst, true).map(Parsed::Tcp),
        (IpProtocol::Udp, _, _) => UdpRepr::parse(&UdpPacket::new_checked(payload)?, src, dst, true).map(Parsed::Udp),
        _ => Err(Error::Unsupported),
    }
}

#[test]
fn every_capture_parses_to_the_top() {
    let parsed: Vec<_> = CAPTURES.iter().map(|(_, frame)| parse_frame(frame)).collect();
    assert!(matches!(parsed[0], Ok(Parsed::Arp(_))));
    assert_eq!(parsed[1], Ok(Parsed::Icmpv4));
    let Ok(Parsed::Tcp(syn)) = parsed[2] else { panic!("{:?}", parsed[2]) };
    assert_eq!((syn.src_port, syn.dst_port, syn.max_seg_size), (54321, 80, Some(1460)));
    assert_eq!(parsed[3], Ok(Parsed::Icmpv6));
    assert_eq!(parsed[4], Ok(Parsed::Udp(UdpRepr { src_port: 41000, dst_port: 53 })));
    assert_eq!(parsed[5], Ok(Parsed::Icmpv4));
}

#[test]
fn every_truncation_of_every_capture_is_rejected() {
    for (name, frame) in CAPTURES {
        for len in 0..frame.len() {
            assert!(parse_frame(&frame[..len]).is_err(), "{name} cut to {len} bytes parsed");
        }
    }
}

#[test]
fn padding_after_a_capture_is_ignored() {
    for (name, frame) in CAPTURES {
        let mut padded = frame.to_vec();
        padded.resize(frame.len().max(60) + 4, 0);
        assert_eq!(parse_frame(&padded), parse_frame(frame), "{name}");
    }
}

#[test]
fn every_single_bit_flip_is_caught_or_harmless() {
    // Flipping any bit must never panic. Past the Ethernet header, a checksum (IPv4 header,
    // ICMP, TCP, UDP, with their pseudo-headers) or a length or version check must catch every
    // flip, except in the fields nothing covers: the IPv6 Traffic Class, Flow Label and Hop
    // Limit (the stack checks Hop Limit 255 for neighbor discovery), and ARP, which has no
    // checksum.
    const ETH: usize = ethernet::HEADER_LEN;
    let uncovered_ipv6 = |bit: usize| {
        let ip_bit = bit - ETH * 8;
        (4..32).contains(&ip_bit) || (56..64).contains(&ip_bit)
    };
    for (name, frame) in CAPTURES {
        for bit in ETH * 8..frame.len() * 8 {
            let mut bytes = frame.to_vec();
            bytes[bit / 8] ^= 0x80 >> (bit % 8);
            let result = parse_frame(&bytes);
            match name {
                "arp_request" => {}
                "ipv6_ns" if uncovered_ipv6(bit) => {
                    assert_eq!(result, parse_frame(frame), "{name}: bit {bit}")
                }
                _ => assert!(result.is_err(), "{name}: flipping bit {bit} went unnoticed"),
            }
        }
        // The Ethernet header has no check at all; only make sure nothing panics.
        for bit in 0..ETH * 8 {
            let mut bytes = frame.to_vec();
            bytes[bit / 8] ^= 0x80 >> (bit % 8);
            let _ = parse_frame(&bytes);
        }
    }
}

#[test]
fn pseudo_random_frames_never_panic() {
    // A poor man's fuzzer for `cargo test`: real headers with random tails, and random bytes.
    let mut rng = testkit::Rng::new(0x2545_f491_4f6c_dd1d);
    let mut next = move || rng.next_u64();
    for round in 0..20_000 {
        let (_, template) = CAPTURES[round % CAPTURES.len()];
        let mut bytes = template.to_vec();
        let keep = (next() as usize) % (bytes.len() + 1);
        for b in &mut bytes[keep..] {
            *b = next() as u8;
        }
        bytes.truncate((next() as usize) % (template.len() + 8));
        let _ = parse_frame(&bytes);
        crate::fuzzing::frame_both_ways(&bytes);
        for view in [&bytes[..], bytes.get(14..).unwrap_or(&[])] {
            crate::fuzzing::tcp_options(&view[..view.len().min(60)]);
            let _ = TcpOptions::new(view).count();
            let _ = ipv6::upper_layer(IpProtocol::HopByHop, view);
            let _ = icmpv6::NdiscOptions::new(view).count();
        }
    }
}

#[test]
fn fuzz_corpus_passes_the_fuzz_checks() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let mut seen = 0;
    for (target, check) in
        [("frame", crate::fuzzing::frame_both_ways as fn(&[u8])), ("tcp_options", crate::fuzzing::tcp_options)]
    {
        for entry in std::fs::read_dir(root.join(target)).unwrap() {
            check(&std::fs::read(entry.unwrap().path()).unwrap());
            seen += 1;
        }
    }
    assert!(seen >= 8, "corpus has only {seen} files");
}

/// Writes the captures as the seed corpus of the `frame` fuzz target, and the SYN's options as
/// the seed of `tcp_options`. Run it after changing a capture:
/// `cargo test -p wire -- --ignored write_fuzz_corpus`.
#[test]
#[ignore]
fn write_fuzz_corpus() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let frames = root.join("frame");
    std::fs::create_dir_all(&frames).unwrap();
    for (name, frame) in CAPTURES {
        std::fs::write(frames.join(name), frame).unwrap();
    }
    let options = root.join("tcp_options");
    std::fs::create_dir_all(&options).unwrap();
    let ip = ethernet::HEADER_LEN + ipv4::HEADER_LEN;
    let syn = TcpPacket::new_checked(&TCP_SYN[ip..]).unwrap();
    std::fs::write(options.join("linux_syn"), syn.options()).unwrap();
    std::fs::write(options.join("sack_3_blocks"), SACK_WITH_TIMESTAMPS).unwrap();
    std::fs::write(options.join("wrong_lengths"), WRONG_LENGTHS).unwrap();
}

/// MSS of length 3, window scale of length 4, timestamps, then a window scale whose length
/// octet is 1: skipped, skipped, read, end of the walk.
const WRONG_LENGTHS: [u8; 20] = [2, 3, 5, 3, 4, 7, 0, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 3, 1, 1];

#[test]
fn wrong_lengths_seed_parses() {
    let options: Vec<_> = TcpOptions::new(&WRONG_LENGTHS).collect();
    assert_eq!(
        options,
        [
            Ok(TcpOption::WrongLength { kind: 2, data: &[5] }),
            Ok(TcpOption::WrongLength { kind: 3, data: &[7, 0] }),
            Ok(TcpOption::Timestamps { tsval: 1, tsecr: 2 }),
            Err(Error::Malformed),
        ]
    );
}

/// NOP NOP timestamps NOP NOP SACK with three blocks: a Linux ACK during loss recovery.
const SACK_WITH_TIMESTAMPS: [u8; 40] = [
    1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 1, 1, 5, 26, 0, 0, 0x10, 0, 0, 0, 0x20, 0, 0, 0, 0x30, 0, 0, 0, 0x40, 0, 0, 0,
    0x50, 0, 0, 0, 0x60, 0,
];

#[test]
fn sack_seed_parses() {
    let options: Vec<_> = TcpOptions::new(&SACK_WITH_TIMESTAMPS).collect();
    assert_eq!(
        options[2..],
        [
            Ok(TcpOption::Timestamps { tsval: 1, tsecr: 2 }),
            Ok(TcpOption::NoOperation),
            Ok(TcpOption::NoOperation),
            Ok(TcpOption::SackRange([Some((0x1000, 0x2000)), Some((0x3000, 0x4000)), Some((0x5000, 0x6000)), None])),
        ]
    );
}
