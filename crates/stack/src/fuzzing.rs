//! The checks behind the stack's fuzz targets (`fuzz/`), here so that `cargo test` runs them on
//! stable too and the fuzzers call the same code.
//!
//! - [`shard_frames`]: arbitrary frames into a shard that has a listener, an established
//!   connection and a UDP socket; nothing may panic and every frame must be accounted for.
//! - [`tcp_segments`]: a connection is established, then the input is decoded into TCP segments
//!   for it (flags, sequence and acknowledgment numbers near the live ones, windows, options,
//!   payload) with valid checksums, so the fuzzer explores the TCP state machine rather than the
//!   checksum check; application calls (read, write, shutdown, close) and time steps are mixed
//!   in. Nothing may panic, and the connection must stay within its buffers.
//!
//! [`Rig`], a shard with listeners and a peer that sends hand-built segments, is also the
//! harness of the listener tests (`tests/listen.rs`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::mem::{pair, MemConfig, MemNic};
use nic::{Nic, PacketBuf};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv6Packet,
    Icmpv6Repr, IpAddress, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr, Ipv6Address, Ipv6Packet, Ipv6Repr, NdiscRepr,
    TcpFlags, TcpPacket, TcpRepr,
};

use crate::shard::{Shard, ShardConfig, SocketId};

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
        if frame.len() > 1514 {
            return;
        }
        let Some(mut b) = self.peer.alloc() else { return };
        b.set_len(frame.len());
        b.data_mut().copy_from_slice(frame);
        let mut v = vec![b];
        self.peer.tx_burst(&mut v);
        self.shard.poll(self.now);
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
        let f = peer_frame(self.peer.mac().0, self.shard.nic().mac().0, repr, payload, ecn);
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

/// A connection, then segments decoded from `data` (see the module doc).
pub fn tcp_segments(data: &[u8]) {
    let mut r = rig();
    let first = data.first().copied().unwrap_or(0);
    let peer_iss: u32 = 0x1000_0000u32.wrapping_mul(u32::from(first) + 1);
    let mut syn = base(peer_iss, None, TcpFlags::SYN);
    syn.max_seg_size = Some(536 + u16::from(first & 0x3f) * 16);
    syn.window_scale = (first & 0x40 != 0).then_some(first & 0x0f);
    syn.sack_permitted = first & 0x80 != 0;
    syn.timestamp = (first & 0x20 != 0).then_some((1, 0));
    r.segment(&syn, &[]);
    let Some(synack) = r.replies().into_iter().find(|s| s.flags.contains(TcpFlags::SYN)) else {
        panic!("no SYN-ACK to a valid SYN");
    };
    let mut peer_nxt = peer_iss.wrapping_add(1);
    let mut server_nxt = synack.seq_number.wrapping_add(1);
    let mut ack = base(peer_nxt, Some(server_nxt), TcpFlags::empty());
    ack.timestamp = synack.timestamp.map(|(tsval, _)| (2, tsval));
    r.segment(&ack, &[]);
    let Ok((conn, _)) = r.shard.tcp_accept(r.listener) else {
        panic!("handshake did not complete");
    };
    let mut tsval = 3u32;
    let mut buf = [0u8; 2048];
    let payload = [0x5au8; 255];
    for chunk in data[1.min(data.len())..].chunks(8) {
        if chunk.len() < 8 {
            break;
        }
        let op = chunk[0];
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
                r.segment(&seg, &payload[..len]);
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(seed: u64, n: usize, len: usize) -> impl Iterator<Item = Vec<u8>> {
        let mut x = seed;
        (0..n).map(move |_| {
            (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
    }

    #[test]
    fn pseudo_random_segments_never_panic() {
        for data in inputs(0x9e37_79b9_7f4a_7c15, 300, 400) {
            tcp_segments(&data);
        }
    }

    #[test]
    fn pseudo_random_frames_never_panic() {
        for data in inputs(0x2545_f491_4f6c_dd1d, 200, 600) {
            shard_frames(&data);
        }
    }
}
