//! The checks behind the stack's fuzz targets (`crates/stack/fuzz`), here so that `cargo test` runs them on
//! stable too and the fuzzers call the same code.
//!
//! - [`shard_frames`]: arbitrary frames into a shard that has IPv4 and IPv6 addresses, listeners
//!   and UDP sockets on both; nothing may panic and every frame must be accounted for.
//! - [`tcp_segments`]: a connection is established over IPv4 or IPv6, then the input is decoded
//!   into TCP segments for it (flags, sequence and acknowledgment numbers near the live ones,
//!   windows, options, payload) with valid checksums, so the fuzzer explores the TCP state
//!   machine rather than the checksum check; application calls (read, write, shutdown, close)
//!   and time steps are mixed in, and segments may come with IPv6 extension headers, from the
//!   peer's address of the other family (IPv4-mapped) or under the other family's ethertype.
//!   Consecutive segments reach the shard in one rx burst, so that they may be coalesced.
//!   Nothing may panic, and the connection must stay within its buffers.
//!
//! [`seeds`] are the seed corpora of both targets (`crates/stack/fuzz/corpus`: frames that reach these
//! paths), written by the ignored test `write_fuzz_corpus`; `cargo test` runs both checks over
//! every corpus file.
//!
//! [`Rig`], a shard with listeners and a peer that sends hand-built segments, is also the
//! harness of the stack's tests that play the peer by hand (`crates/stack/tests`: `listen`,
//! `tcp_options`, `ecn`, ...).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use crate::mem::{pair, MemConfig, MemNic};
use nic::{Nic, PacketBuf};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr, NdiscRepr,
    TcpFlags, TcpPacket, TcpRepr,
};

use stack::shard::{Shard, ShardConfig, SocketId};

pub const SERVER: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
pub const PEER: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
pub const SERVER6: Ipv6Address = Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
pub const PEER6: Ipv6Address = Ipv6Address::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
/// The listeners' port.
pub const PORT: u16 = 80;
/// The peer's port in [`base`].
pub const PEER_PORT: u16 = 40000;

/// A shard at [`SERVER`]/24 and [`SERVER6`]/64 listening on [`PORT`] of both (backlog 8),
/// with UDP sockets on 53 of both, and the peer's NIC (the shard knows the peer's link address
/// for [`PEER`] and [`PEER6`]).
pub struct Rig {
    pub shard: Shard<MemNic>,
    pub peer: MemNic,
    /// The IPv4 listener.
    pub listener: SocketId,
    /// The IPv6 listener.
    pub listener6: SocketId,
    /// The time passed to `poll`.
    pub now: u64,
}

fn rig() -> Rig {
    Rig::new(|_| {})
}

impl Rig {
    /// A rig whose shard configuration `configure` may change first.
    pub fn new(configure: impl FnOnce(&mut ShardConfig)) -> Rig {
        let (a, b) = pair(MemConfig { pool_size: 512, queue_len: 256, ..MemConfig::default() });
        let server6 = Ipv6Addr::from(SERVER6);
        let mut cfg = ShardConfig::new(a.mac(), Some((Ipv4Addr::from(SERVER), 24)), Some((server6, 64)), [9; 32]);
        configure(&mut cfg);
        let mut shard = Shard::new(a, cfg);
        let listener = shard.tcp_listen(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), PORT), 8).unwrap();
        let listener6 = shard.tcp_listen(SocketAddr::new(server6.into(), PORT), 8).unwrap();
        shard.udp_bind(SocketAddr::new(Ipv4Addr::UNSPECIFIED.into(), 53)).unwrap();
        shard.udp_bind(SocketAddr::new(server6.into(), 53)).unwrap();
        let mut r = Rig { shard, peer: b, listener, listener6, now: 1_000_000_000 };
        // Introduce the peer (an ARP request and a neighbor solicitation for the server), so
        // replies need no resolution.
        let arp = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress(r.peer.mac().0),
            source_protocol_addr: PEER,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: SERVER,
        };
        let mut f = vec![0u8; 14 + arp.buffer_len()];
        EthernetRepr {
            src_addr: EthernetAddress(r.peer.mac().0),
            dst_addr: EthernetAddress::BROADCAST,
            ethertype: EtherType::Arp,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        arp.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
        r.inject(&f);
        let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit {
            target_addr: SERVER6,
            lladdr: Some(EthernetAddress(r.peer.mac().0)),
        });
        let ip = Ipv6Repr {
            src_addr: PEER6,
            dst_addr: SERVER6.solicited_node(),
            next_header: IpProtocol::Icmpv6,
            payload_len: ns.buffer_len(),
            hop_limit: 255,
        };
        let mut f = vec![0u8; 14 + 40 + ns.buffer_len()];
        EthernetRepr {
            src_addr: EthernetAddress(r.peer.mac().0),
            dst_addr: ip.dst_addr.multicast_ethernet(),
            ethertype: EtherType::Ipv6,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        ip.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
        ns.emit(&mut Icmpv6Packet::new_unchecked(&mut f[54..]), &ip.src_addr, &ip.dst_addr, true);
        r.inject(&f);
        r.replies();
        r
    }

    /// Puts a frame on the wire to the shard and polls it.
    pub fn inject(&mut self, frame: &[u8]) {
        self.put(frame);
        self.shard.poll(self.now);
    }

    /// Puts a frame on the wire to the shard (the next poll takes it, in one rx burst with
    /// the others put before it, up to the burst's size).
    pub fn put(&mut self, frame: &[u8]) {
        if frame.len() > 1514 {
            return;
        }
        let Some(mut b) = self.peer.alloc() else { return };
        b.set_len(frame.len());
        b.data_mut().copy_from_slice(frame);
        let mut v = vec![b];
        self.peer.tx_burst(&mut v);
    }

    /// Puts `frames` on the wire to the shard together, so that one poll takes them in one
    /// rx burst (at most the burst's size), and polls it.
    pub fn inject_burst(&mut self, frames: &[Vec<u8>]) {
        assert!(frames.len() <= stack::shard::RX_BURST, "one burst");
        for frame in frames {
            self.put(frame);
        }
        self.shard.poll(self.now);
    }

    /// The frame that [`Rig::segment_ecn`] sends.
    pub fn frame(&self, repr: &TcpRepr, payload: &[u8], ecn: u8) -> Vec<u8> {
        peer_frame(self.peer.mac().0, self.shard.nic().mac().0, repr, payload, ecn)
    }

    /// Frames the shard sent, parsed as TCP from the server port; others are dropped.
    pub fn replies(&mut self) -> Vec<TcpRepr> {
        self.replies_with_ecn().into_iter().map(|(r, _)| r).collect()
    }

    /// Like [`Rig::replies`], each with the ECN field of its IP header.
    pub fn replies_with_ecn(&mut self) -> Vec<(TcpRepr, u8)> {
        let mut rx = Vec::new();
        self.peer.rx_burst(&mut rx, 256);
        rx.iter().filter_map(|b| tcp_in_frame(b.data())).collect()
    }

    /// Sends a TCP segment from the peer with `payload`.
    pub fn segment(&mut self, repr: &TcpRepr, payload: &[u8]) {
        self.segment_ecn(repr, payload, 0);
    }

    /// Like [`Rig::segment`], with `ecn` in the ECN field of the IP header.
    pub fn segment_ecn(&mut self, repr: &TcpRepr, payload: &[u8], ecn: u8) {
        let f = self.frame(repr, payload, ecn);
        self.inject(&f);
    }

    /// Sends a TCP segment from `src` to `dst` (see [`ip_frame`]: with one IPv6 address, an
    /// IPv4 one becomes IPv4-mapped).
    pub fn segment_between(&mut self, src: IpAddress, dst: IpAddress, repr: &TcpRepr, payload: &[u8]) {
        let f = ip_frame(self.peer.mac().0, self.shard.nic().mac().0, (src, dst), repr, payload, 0);
        self.inject(&f);
    }
}

/// The TCP segment in an IPv4 or IPv6 frame (no extension headers) with its ECN field.
fn tcp_in_frame(frame: &[u8]) -> Option<(TcpRepr, u8)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    let (s, d, ecn, seg) = match eth.ethertype() {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).ok()?;
            (ip.next_header() == IpProtocol::Tcp).then_some(())?;
            (IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()), ip.ecn(), ip.payload())
        }
        EtherType::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).ok()?;
            (ip.next_header() == IpProtocol::Tcp).then_some(())?;
            (IpAddress::V6(ip.src_addr()), IpAddress::V6(ip.dst_addr()), ip.traffic_class() & 0b11, ip.payload())
        }
        _ => return None,
    };
    let tcp = TcpPacket::new_checked(seg).ok()?;
    TcpRepr::parse(&tcp, &s, &d, true).ok().map(|r| (r, ecn))
}

/// An Ethernet frame from [`PEER`] at `src_mac` to [`SERVER`] at `dst_mac` carrying `repr`
/// with `payload` (its `payload_len` set to fit), `ecn` in the IP header's ECN field, every
/// checksum right.
pub fn peer_frame(src_mac: [u8; 6], dst_mac: [u8; 6], repr: &TcpRepr, payload: &[u8], ecn: u8) -> Vec<u8> {
    ip_frame(src_mac, dst_mac, (PEER.into(), SERVER.into()), repr, payload, ecn)
}

/// An Ethernet frame from `src_mac` to `dst_mac` carrying `repr` with `payload` (its
/// `payload_len` set to fit) from `src` to `dst`, `ecn` in the IP header's ECN field, every
/// checksum right. IPv4 when both addresses are; else IPv6, an IPv4 address in it written as
/// IPv4-mapped (`::ffff:a.b.c.d`), as a dual-stack socket API names it.
pub fn ip_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    (src, dst): (IpAddress, IpAddress),
    repr: &TcpRepr,
    payload: &[u8],
    ecn: u8,
) -> Vec<u8> {
    let as_v6 = |a: IpAddress| match a {
        IpAddress::V4(v4) => Ipv6Address::ipv4_mapped(v4),
        IpAddress::V6(v6) => v6,
    };
    let v4 = match (src, dst) {
        (IpAddress::V4(s), IpAddress::V4(d)) => Some((s, d)),
        _ => None,
    };
    let (ethertype, ip_len) = if v4.is_some() { (EtherType::Ipv4, 20) } else { (EtherType::Ipv6, 40) };
    let tcp_len = repr.header_len() + payload.len();
    let mut f = vec![0u8; 14 + ip_len + tcp_len];
    EthernetRepr { src_addr: EthernetAddress(src_mac), dst_addr: EthernetAddress(dst_mac), ethertype }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    let ip_header = &mut f[14..14 + ip_len];
    let (src, dst) = match v4 {
        Some((s, d)) => {
            let ip = Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Tcp,
                payload_len: tcp_len,
                hop_limit: 64,
            };
            let mut packet = Ipv4Packet::new_unchecked(ip_header);
            ip.emit(&mut packet, true);
            packet.set_ecn(ecn);
            packet.fill_checksum();
            (IpAddress::V4(s), IpAddress::V4(d))
        }
        None => {
            let (s, d) = (as_v6(src), as_v6(dst));
            let ip = Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Tcp,
                payload_len: tcp_len,
                hop_limit: 64,
            };
            let mut packet = Ipv6Packet::new_unchecked(ip_header);
            ip.emit(&mut packet);
            packet.set_traffic_class(ecn);
            (IpAddress::V6(s), IpAddress::V6(d))
        }
    };
    let r = TcpRepr { payload_len: payload.len(), ..*repr };
    r.emit(&mut TcpPacket::new_unchecked(&mut f[14 + ip_len..]), &src, &dst, payload, true);
    f
}

/// A segment from [`PEER_PORT`] to [`PORT`], no options, window 65535.
pub fn base(seq: u32, ack: Option<u32>, flags: TcpFlags) -> TcpRepr {
    tcp::bare_segment(PEER_PORT, PORT, seq, ack, flags, 65535)
}

/// Whether [`tcp_segments`] reads an 8-byte chunk starting with `op` as a segment.
fn is_segment_op(op: u8) -> bool {
    match op & 0x07 {
        0 | 1 | 4 => false,
        2 => op & 0x80 == 0,
        3 => op & 0xc0 != 0xc0,
        _ => true,
    }
}

/// Arbitrary frames (each prefixed by a length byte pair) into a shard.
pub fn shard_frames(data: &[u8]) {
    let mut r = rig();
    let mut rest = data;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])) % 1515;
        rest = &rest[2..];
        let (frame, tail) = rest.split_at(len.min(rest.len()));
        rest = tail;
        r.inject(frame);
        r.replies();
        r.now += 1_000_000;
    }
    let s = *r.shard.link_stats();
    assert!(s.rx_frames >= s.dropped(), "{s:?}");
}

/// A connection, then segments decoded from `data` (see the module doc). The first byte sets
/// the SYN's options and the family (0x10: IPv6); then 8-byte chunks, each an application call,
/// a time step or a segment (see the match below).
pub fn tcp_segments(data: &[u8]) {
    let mut r = rig();
    let first = data.first().copied().unwrap_or(0);
    let v6 = first & 0x10 != 0;
    let (peer, server, other_peer, listener): (IpAddress, IpAddress, IpAddress, _) = if v6 {
        (PEER6.into(), SERVER6.into(), PEER.into(), r.listener6)
    } else {
        (PEER.into(), SERVER.into(), PEER6.into(), r.listener)
    };
    let peer_iss: u32 = 0x1000_0000u32.wrapping_mul(u32::from(first) + 1);
    let mut syn = base(peer_iss, None, TcpFlags::SYN);
    syn.max_seg_size = Some(536 + u16::from(first & 0x3f) * 16);
    syn.window_scale = (first & 0x40 != 0).then_some(first & 0x0f);
    syn.sack_permitted = first & 0x80 != 0;
    syn.timestamp = (first & 0x20 != 0).then_some((1, 0));
    r.segment_between(peer, server, &syn, &[]);
    let Some(synack) = r.replies().into_iter().find(|s| s.flags.contains(TcpFlags::SYN)) else {
        panic!("no SYN-ACK to a valid SYN");
    };
    let mut peer_nxt = peer_iss.wrapping_add(1);
    let mut server_nxt = synack.seq_number.wrapping_add(1);
    let mut ack = base(peer_nxt, Some(server_nxt), TcpFlags::empty());
    ack.timestamp = synack.timestamp.map(|(tsval, _)| (2, tsval));
    r.segment_between(peer, server, &ack, &[]);
    let Ok((conn, _)) = r.shard.tcp_accept(listener) else {
        panic!("handshake did not complete");
    };
    let mut tsval = 3u32;
    let mut buf = [0u8; 2048];
    let payload = [0x5au8; 255];
    // Consecutive segments go on the wire together and reach the shard in one rx burst (so
    // that they may be coalesced); any other step polls first.
    let mut on_wire = 0;
    for chunk in data[1.min(data.len())..].chunks(8) {
        if chunk.len() < 8 {
            break;
        }
        let op = chunk[0];
        if !is_segment_op(op) && on_wire > 0 {
            r.shard.poll(r.now);
            on_wire = 0;
        }
        match op & 0x07 {
            0 => {
                let _ = r.shard.tcp_recv(conn, &mut buf);
            }
            1 => {
                let _ = r.shard.tcp_send(conn, &buf[..usize::from(chunk[1]) * 8]);
            }
            2 if op & 0x80 != 0 => {
                let _ = r.shard.tcp_shutdown_write(conn);
            }
            3 if op & 0xc0 == 0xc0 => {
                let _ = r.shard.close(conn);
            }
            4 => {
                r.now += u64::from(chunk[1]) * 10_000_000;
                r.shard.poll(r.now);
            }
            _ => {
                let mut flags = TcpFlags::empty();
                if chunk[1] & 0x01 != 0 {
                    flags.insert(TcpFlags::FIN);
                }
                if chunk[1] & 0x02 != 0 {
                    flags.insert(TcpFlags::SYN);
                }
                if chunk[1] & 0x04 != 0 {
                    flags.insert(TcpFlags::RST);
                }
                if chunk[1] & 0x08 != 0 {
                    flags.insert(TcpFlags::PSH);
                }
                let seq = peer_nxt.wrapping_add(i16::from_be_bytes([chunk[2], chunk[3]]) as i32 as u32);
                let ack_no = (chunk[1] & 0x10 == 0)
                    .then(|| server_nxt.wrapping_add((i32::from(i8::from_be_bytes([chunk[4]])) * 64) as u32));
                let mut seg = base(seq, ack_no, flags);
                seg.window_len = u16::from(chunk[5]) << 8;
                if chunk[1] & 0x20 != 0 {
                    tsval = tsval.wrapping_add(u32::from(chunk[6]));
                    seg.timestamp = Some((tsval, 0));
                }
                if chunk[1] & 0x40 != 0 {
                    let left = server_nxt.wrapping_sub(u32::from(chunk[6]) * 16);
                    seg.sack_ranges[0] = Some((left, left.wrapping_add(u32::from(chunk[7]) * 8)));
                }
                let len = usize::from(chunk[7]) % payload.len();
                // The op's high bits: 0x08 from the peer's address of the other family (an IPv6
                // frame, the IPv4 address in it IPv4-mapped), 0x10 under the other family's
                // ethertype, 0x20 an IPv6 extension header (kind: the top two bits).
                let src = if op & 0x08 != 0 { other_peer } else { peer };
                let (peer_mac, our_mac) = (r.peer.mac().0, r.shard.nic().mac().0);
                let mut f = ip_frame(peer_mac, our_mac, (src, server), &seg, &payload[..len], 0);
                if op & 0x20 != 0 {
                    f = with_ipv6_extension_header(&f, op >> 6);
                }
                if op & 0x10 != 0 {
                    swap_ip_ethertype(&mut f);
                }
                r.put(&f);
                on_wire += 1;
                if on_wire == stack::shard::RX_BURST {
                    r.shard.poll(r.now);
                    on_wire = 0;
                }
                if chunk[1] & 0x80 != 0 {
                    peer_nxt = seq.wrapping_add(len as u32);
                }
            }
        }
        for reply in r.replies() {
            let end = reply.seq_number.wrapping_add(reply.segment_len() as u32);
            if (end.wrapping_sub(server_nxt) as i32) > 0 {
                server_nxt = end;
            }
        }
        if let Ok(info) = r.shard.tcp_info(conn) {
            assert!(info.recv_queue <= 1 << 20 && info.send_queue <= 1 << 20, "{info:?}");
        }
    }
    r.shard.poll(r.now);
}

/// The IPv6 extension headers [`with_ipv6_extension_header`] inserts, by kind.
const EXTENSION_HEADERS: [IpProtocol; 4] =
    [IpProtocol::HopByHop, IpProtocol::Ipv6Opts, IpProtocol::Ipv6Route, IpProtocol::Ipv6Frag];

/// `frame` (Ethernet, IPv6, then the upper layer) with an 8-byte extension header in front of
/// its upper layer: hop-by-hop options (kind 0), destination options (1), each a PadN; a
/// routing header with no segments left (2); a fragment header of an atomic fragment (3). A
/// frame that is not IPv6 comes back as it is.
pub fn with_ipv6_extension_header(frame: &[u8], kind: u8) -> Vec<u8> {
    const IP: usize = 14;
    let Ok(ip) = Ipv6Packet::new_checked(frame.get(IP..).unwrap_or_default()) else { return frame.to_vec() };
    if ip.version() != 6 {
        return frame.to_vec();
    }
    let (next, payload_len) = (u8::from(ip.next_header()), ip.payload_len());
    let protocol = EXTENSION_HEADERS[usize::from(kind % 4)];
    let header: [u8; 8] = match protocol {
        IpProtocol::Ipv6Route => [next, 0, 253, 0, 0, 0, 0, 0],
        IpProtocol::Ipv6Frag => [next, 0, 0, 0, 0, 0, 0x12, 0x34],
        _ => [next, 0, 1, 4, 0, 0, 0, 0],
    };
    let mut out = Vec::with_capacity(frame.len() + 8);
    out.extend_from_slice(&frame[..IP + 40]);
    out.extend_from_slice(&header);
    out.extend_from_slice(&frame[IP + 40..]);
    let mut ip = Ipv6Packet::new_unchecked(&mut out[IP..]);
    ip.set_next_header(protocol);
    ip.set_payload_len(payload_len.saturating_add(8));
    out
}

/// Labels an IPv4 frame IPv6 and an IPv6 frame IPv4 (their headers unchanged).
pub fn swap_ip_ethertype(frame: &mut [u8]) {
    let Some(ethertype) = frame.get_mut(12..14) else { return };
    match [ethertype[0], ethertype[1]] {
        [0x08, 0x00] => ethertype.copy_from_slice(&[0x86, 0xdd]),
        [0x86, 0xdd] => ethertype.copy_from_slice(&[0x08, 0x00]),
        _ => {}
    }
}

/// The seed inputs of the two targets that reach the IPv6 and mixed-family paths: (target,
/// file name, input). Written to `fuzz/corpus/<target>/` by the ignored test
/// `write_fuzz_corpus`; `cargo test` checks that the corpus holds every one of them.
pub fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let (peer_mac, our_mac) = ([0x02, 0, 0, 0, 0, 0x02], [0x02, 0, 0, 0, 0, 0x01]);
    let tcp = |src: IpAddress, dst: IpAddress, port: u16, flags: TcpFlags, ack: Option<u32>| {
        let seg = TcpRepr { max_seg_size: Some(1440), ..tcp::bare_segment(PEER_PORT, port, 1000, ack, flags, 65535) };
        ip_frame(peer_mac, our_mac, (src, dst), &seg, &[], 0)
    };
    let syn = |src: IpAddress, dst: IpAddress, port: u16| tcp(src, dst, port, TcpFlags::SYN, None);
    let (peer6, server6, peer4, server4) =
        (IpAddress::V6(PEER6), IpAddress::V6(SERVER6), IpAddress::V4(PEER), IpAddress::V4(SERVER));
    let mapped = IpAddress::V6(Ipv6Address::ipv4_mapped(PEER));
    // Frames one after the other, each after its length (shard_frames' input).
    let frames = |fs: &[Vec<u8>]| -> Vec<u8> {
        fs.iter().flat_map(|f| (f.len() as u16).to_be_bytes().into_iter().chain(f.iter().copied())).collect()
    };
    let icmpv6 = |src: Ipv6Address, dst: Ipv6Address, dst_mac: EthernetAddress, hop_limit: u8, icmp: &Icmpv6Repr| {
        let ip = Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: IpProtocol::Icmpv6,
            payload_len: icmp.buffer_len(),
            hop_limit,
        };
        let mut f = vec![0u8; 14 + 40 + icmp.buffer_len()];
        EthernetRepr { src_addr: EthernetAddress(peer_mac), dst_addr: dst_mac, ethertype: EtherType::Ipv6 }
            .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        ip.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
        icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut f[54..]), &src, &dst, true);
        f
    };
    let dad = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: SERVER6, lladdr: None });
    let quoted = tcp(server6, peer6, PEER_PORT, TcpFlags::ACK, Some(1));
    let quoted_ip =
        Ipv6Repr { src_addr: SERVER6, dst_addr: PEER6, next_header: IpProtocol::Tcp, payload_len: 20, hop_limit: 64 };
    let too_big = Icmpv6Repr::PktTooBig { mtu: 1000, header: quoted_ip, data: &quoted[54..] };
    let mut v4_as_v6 = syn(peer4, server4, PORT);
    swap_ip_ethertype(&mut v4_as_v6);
    let mut v6_as_v4 = syn(peer6, server6, PORT);
    swap_ip_ethertype(&mut v6_as_v4);
    let mut out = vec![
        (
            "shard_frames",
            "v6_syn",
            frames(&[syn(peer6, server6, PORT), tcp(peer6, server6, PORT, TcpFlags::ACK, Some(1))]),
        ),
        (
            "shard_frames",
            "v6_extension_headers",
            frames(&(0..4).map(|k| with_ipv6_extension_header(&syn(peer6, server6, PORT), k)).collect::<Vec<_>>()),
        ),
        // Issue 22's crash: a SYN-ACK or RST to an IPv4-mapped source.
        (
            "shard_frames",
            "v4_mapped_source",
            frames(&[
                syn(mapped, server6, PORT),
                syn(mapped, server6, PORT + 1),
                tcp(mapped, server6, PORT + 1, TcpFlags::ACK, Some(1)),
            ]),
        ),
        ("shard_frames", "swapped_ethertypes", frames(&[v4_as_v6, v6_as_v4])),
        (
            "shard_frames",
            "martian_sources",
            frames(&[
                syn(IpAddress::V4(Ipv4Address::new(10, 0, 0, 255)), server4, PORT),
                syn(IpAddress::V4(Ipv4Address::new(127, 0, 0, 1)), server4, PORT),
                syn(IpAddress::V6(Ipv6Address::LOOPBACK), server6, PORT),
                syn(server6, server6, PORT),
            ]),
        ),
        // A solicitation without a link-layer option: the advertisement is longer than it.
        (
            "shard_frames",
            "dad_solicitation",
            frames(&[icmpv6(
                Ipv6Address::UNSPECIFIED,
                SERVER6.solicited_node(),
                SERVER6.solicited_node().multicast_ethernet(),
                255,
                &dad,
            )]),
        ),
        (
            "shard_frames",
            "packet_too_big_below_1280",
            frames(&[icmpv6(PEER6, SERVER6, EthernetAddress(our_mac), 64, &too_big)]),
        ),
    ];
    // tcp_segments: the first byte (0x10: IPv6; MSS, SACK, timestamps), then 8-byte chunks.
    let segment = |op: u8| [op, 0x88 | 0x20, 0, 0, 0, 0xff, 1, 10];
    let chunks = |first: u8, ops: &[u8]| -> Vec<u8> {
        std::iter::once(first).chain(ops.iter().flat_map(|&op| segment(op))).chain([1, 16, 0, 0, 0, 0, 0, 0]).collect()
    };
    out.push(("tcp_segments", "v6_data", chunks(0x10 | 0xa0 | 0x05, &[5, 5, 6])));
    out.push((
        "tcp_segments",
        "v6_extension_headers",
        chunks(0x10 | 0x20, &[5 | 0x20, 5 | 0x20 | 0x40, 5 | 0x20 | 0x80, 5 | 0x20 | 0xc0]),
    ));
    out.push(("tcp_segments", "v6_from_v4_mapped", chunks(0x10, &[5 | 0x08, 6 | 0x08, 5])));
    out.push(("tcp_segments", "v4_from_v6_and_swapped", chunks(0x05, &[5 | 0x08, 5 | 0x10, 6 | 0x18, 5])));
    out.push(("tcp_segments", "v6_swapped_ethertype", chunks(0x10, &[5 | 0x10, 7 | 0x30, 5])));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(seed: u64, n: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
        let mut rng = crate::Rng::new(seed);
        (0..n).map(move |_| rng.bytes(len))
    }

    #[test]
    fn pseudo_random_segments_never_panic() {
        for data in inputs(0x9e37_79b9_7f4a_7c15, 300, 400) {
            tcp_segments(&data);
        }
    }

    fn corpus() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../stack/fuzz/corpus")
    }

    #[test]
    fn fuzz_corpus_passes_the_fuzz_checks_and_holds_every_seed() {
        let mut seen = 0;
        for (target, check) in [("shard_frames", shard_frames as fn(&[u8])), ("tcp_segments", tcp_segments)] {
            for entry in std::fs::read_dir(corpus().join(target)).unwrap() {
                check(&std::fs::read(entry.unwrap().path()).unwrap());
                seen += 1;
            }
        }
        assert!(seen >= 20, "corpus has only {seen} files");
        for (target, name, input) in seeds() {
            let path = corpus().join(target).join(name);
            assert_eq!(
                std::fs::read(&path).ok(),
                Some(input),
                "{} is not the seed (write_fuzz_corpus)",
                path.display()
            );
        }
    }

    /// Writes [`seeds`] into the corpus. Run it after changing them:
    /// `cargo test -p testkit --lib -- --ignored write_fuzz_corpus`.
    #[test]
    #[ignore]
    fn write_fuzz_corpus() {
        for (target, name, input) in seeds() {
            std::fs::write(corpus().join(target).join(name), input).unwrap();
        }
    }

    #[test]
    fn pseudo_random_frames_never_panic() {
        for data in inputs(0x2545_f491_4f6c_dd1d, 200, 600) {
            shard_frames(&data);
        }
    }
}
