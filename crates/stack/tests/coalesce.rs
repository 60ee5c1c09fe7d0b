//! Receive coalescing (software GRO, `shard::coalesce`): the peer's in-order data segments in
//! one rx burst reach the connection as one, and never across what Linux's `tcp_gro_receive`
//! will not merge across: a gap, a flag other than ACK and PSH, another acknowledgment number,
//! window, option bytes (a timestamp, SACK blocks) or ECN codepoint, another connection, IP
//! options or IPv6 extension headers, a bad checksum, a segment larger than the first or one
//! after a short or PSH one. Each "never" case fails if its rule is dropped (the merge counter,
//! `tcp_gro_merged`, would move). The peer is played by hand (`testkit::fuzzing::Rig`), each
//! burst put on the wire at once so that one poll takes it in one rx burst.

use nic::Nic as _;
use stack::shard::SocketId;
use testkit::fuzzing::{base, with_ipv6_extension_header, Rig, PEER6, PEER_PORT, SERVER6};
use wire::{IpAddress, Ipv4Packet, TcpFlags, TcpRepr};

const ISN: u32 = 1000;
const ACK_PSH: TcpFlags = TcpFlags::from_bits(TcpFlags::ACK.bits() | TcpFlags::PSH.bits());

/// An accepted connection from `port` (timestamps if `ts`): its id, our next sequence number,
/// our timestamp value (0 without).
struct Conn {
    id: SocketId,
    ours: u32,
    ts_ecr: u32,
    port: u16,
    ts: bool,
}

impl Conn {
    /// A data segment of it at `offset` bytes into the peer's stream.
    fn data(&self, offset: u32, flags: TcpFlags) -> TcpRepr {
        let seq = ISN + 1 + offset;
        TcpRepr {
            src_port: self.port,
            timestamp: self.ts.then_some((200, self.ts_ecr)),
            ..base(seq, Some(self.ours), flags)
        }
    }
}

fn establish(r: &mut Rig, port: u16, ts: bool) -> Conn {
    let syn = TcpRepr {
        src_port: port,
        max_seg_size: Some(1460),
        timestamp: ts.then_some((100, 0)),
        ..base(ISN, None, TcpFlags::SYN)
    };
    r.segment(&syn, &[]);
    let synack = r.replies().pop().expect("SYN-ACK");
    let ours = synack.seq_number + 1;
    let ts_ecr = synack.timestamp.map_or(0, |(val, _)| val);
    let ack =
        TcpRepr { src_port: port, timestamp: ts.then_some((100, ts_ecr)), ..base(ISN + 1, Some(ours), TcpFlags::ACK) };
    r.segment(&ack, &[]);
    let (id, _) = r.shard.tcp_accept(r.listener).expect("accepted");
    Conn { id, ours, ts_ecr, port, ts }
}

/// `n` bytes of the peer's stream from `offset`: each byte its offset's low bits.
fn bytes(offset: u32, n: usize) -> Vec<u8> {
    (0..n).map(|i| (offset as usize + i) as u8).collect()
}

/// What the application reads now.
fn read_all(r: &mut Rig, id: SocketId) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = r.shard.tcp_recv(id, &mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
    out
}

fn merged(r: &Rig) -> u64 {
    r.shard.stats().tcp_gro_merged
}

/// A burst of the peer's segments: each (header, offset into the stream, length).
fn burst(r: &mut Rig, segs: &[(TcpRepr, u32, usize)]) {
    let frames: Vec<Vec<u8>> = segs.iter().map(|(h, off, n)| r.frame(h, &bytes(*off, *n), 0)).collect();
    r.inject_burst(&frames);
}

#[test]
fn consecutive_full_segments_and_a_short_last_one_arrive_as_one_with_one_ack() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, true);
    let segs: Vec<_> = (0..4).map(|k| (c.data(k * 1000, TcpFlags::ACK), k * 1000, 1000)).collect();
    let mut segs = segs;
    segs.push((c.data(4000, ACK_PSH), 4000, 300));
    burst(&mut r, &segs);
    assert_eq!(merged(&r), 4, "four segments joined the first");
    assert_eq!(r.shard.stats().tcp_rx_segments, 2 + 5, "each segment counted as received");
    let acks = r.replies();
    assert_eq!(acks.len(), 1, "one ACK for the burst: {acks:?}");
    assert_eq!(acks[0].ack_number, Some(ISN + 1 + 4300));
    assert_eq!(read_all(&mut r, c.id), bytes(0, 4300));
}

#[test]
fn the_delayed_ack_rule_counts_coalesced_segments_at_their_own_size() {
    // Segments of 1000 bytes, below our MSS: two of them, coalesced, are the second full-sized
    // segment and are acknowledged at once (RFC 5681 4.2), as they were one by one.
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    burst(&mut r, &[(c.data(0, TcpFlags::ACK), 0, 1000), (c.data(1000, TcpFlags::ACK), 1000, 1000)]);
    assert_eq!(merged(&r), 1);
    let acks = r.replies();
    assert_eq!(acks.len(), 1, "two segments: acknowledged at once");
    assert_eq!(acks[0].ack_number, Some(ISN + 1 + 2000));
    burst(&mut r, &[(c.data(2000, TcpFlags::ACK), 2000, 1000)]);
    assert!(r.replies().is_empty(), "one more: its ACK is delayed");
    assert_eq!(read_all(&mut r, c.id), bytes(0, 3000));
}

/// `second` after a full-sized first segment in one burst: never merged, and the connection
/// reads what it would have one by one (`expect` bytes of the stream).
fn never_merged(r: &mut Rig, c: &Conn, second: (TcpRepr, u32, usize), ecn: (u8, u8), expect: usize) {
    let first = r.frame(&c.data(0, TcpFlags::ACK), &bytes(0, 1000), ecn.0);
    let (h, off, n) = second;
    let second = r.frame(&h, &bytes(off, n), ecn.1);
    r.inject_burst(&[first, second]);
    assert_eq!(merged(r), 0, "not merged: {h:?}");
    assert_eq!(read_all(r, c.id), bytes(0, expect));
}

#[test]
fn never_across_a_gap() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    never_merged(&mut r, &c, (c.data(1100, TcpFlags::ACK), 1100, 1000), (0, 0), 1000);
}

#[test]
fn never_across_a_flag_other_than_ack_and_psh() {
    for flag in [TcpFlags::FIN, TcpFlags::SYN, TcpFlags::RST, TcpFlags::URG, TcpFlags::ECE, TcpFlags::CWR] {
        let mut r = Rig::new(|_| {});
        let c = establish(&mut r, PEER_PORT, false);
        let first = r.frame(&c.data(0, TcpFlags::ACK), &bytes(0, 1000), 0);
        let second = r.frame(&c.data(1000, TcpFlags::ACK | flag), &bytes(1000, 1000), 0);
        r.inject_burst(&[first, second]);
        assert_eq!(merged(&r), 0, "{flag:?}");
    }
}

#[test]
fn never_across_another_ack_number_or_window() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    // We sent 10 bytes; the second segment acknowledges them, the first does not.
    r.shard.tcp_send(c.id, b"0123456789").unwrap();
    r.shard.poll(r.now);
    assert_eq!(r.replies().len(), 1);
    let other_ack = TcpRepr { ack_number: Some(c.ours + 10), ..c.data(1000, TcpFlags::ACK) };
    never_merged(&mut r, &c, (other_ack, 1000, 1000), (0, 0), 2000);
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    let other_window = TcpRepr { window_len: 60000, ..c.data(1000, TcpFlags::ACK) };
    never_merged(&mut r, &c, (other_window, 1000, 1000), (0, 0), 2000);
}

#[test]
fn never_across_another_timestamp_value_or_echo() {
    for (val, ecr) in [(201, 0), (200, 1)] {
        let mut r = Rig::new(|_| {});
        let c = establish(&mut r, PEER_PORT, true);
        let ts = TcpRepr { timestamp: Some((val, c.ts_ecr + ecr)), ..c.data(1000, TcpFlags::ACK) };
        never_merged(&mut r, &c, (ts, 1000, 1000), (0, 0), 2000);
    }
}

#[test]
fn never_across_other_option_bytes() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    let sack = TcpRepr { sack_ranges: [Some((c.ours, c.ours)), None, None, None], ..c.data(1000, TcpFlags::ACK) };
    never_merged(&mut r, &c, (sack, 1000, 1000), (0, 0), 2000);
}

#[test]
fn never_across_another_ecn_codepoint() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    never_merged(&mut r, &c, (c.data(1000, TcpFlags::ACK), 1000, 1000), (0b10, 0b11), 2000);
}

#[test]
fn never_after_a_short_or_psh_segment_nor_with_a_larger_one() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    // A run's segments are the size of its first (Linux's gso_size): a shorter one is its last.
    let seg = |off: u32, n: usize| (c.data(off, TcpFlags::ACK), off, n);
    burst(&mut r, &[seg(0, 1000), seg(1000, 500), seg(1500, 500)]);
    assert_eq!(merged(&r), 1, "the short one joined, nothing after it");
    burst(&mut r, &[(c.data(2000, ACK_PSH), 2000, 1000), seg(3000, 1000)]);
    assert_eq!(merged(&r), 1, "nothing after PSH");
    burst(&mut r, &[seg(4000, 1000), seg(5000, 1200)]);
    assert_eq!(merged(&r), 1, "no larger segment");
    assert_eq!(read_all(&mut r, c.id), bytes(0, 6200));
}

#[test]
fn never_across_connections() {
    let mut r = Rig::new(|_| {});
    let a = establish(&mut r, PEER_PORT, false);
    let b = establish(&mut r, PEER_PORT + 1, false);
    // Interleaved: each connection's two segments join each other, not the other's.
    burst(
        &mut r,
        &[
            (a.data(0, TcpFlags::ACK), 0, 1000),
            (b.data(0, TcpFlags::ACK), 0, 1000),
            (a.data(1000, TcpFlags::ACK), 1000, 1000),
            (b.data(1000, TcpFlags::ACK), 1000, 1000),
        ],
    );
    assert_eq!(merged(&r), 2);
    assert_eq!(read_all(&mut r, a.id), bytes(0, 2000));
    assert_eq!(read_all(&mut r, b.id), bytes(0, 2000));
    // The other connection's segment where this one's would continue is not this one's.
    let mut r = Rig::new(|_| {});
    let a = establish(&mut r, PEER_PORT, false);
    let b = establish(&mut r, PEER_PORT + 1, false);
    burst(&mut r, &[(a.data(0, TcpFlags::ACK), 0, 1000), (b.data(1000, TcpFlags::ACK), 1000, 1000)]);
    assert_eq!(merged(&r), 0);
    assert_eq!(read_all(&mut r, a.id), bytes(0, 1000));
}

/// `frame` (IPv4) with 4 bytes of IP options (NOPs) after its header.
fn with_ipv4_options(frame: &[u8]) -> Vec<u8> {
    let mut out = frame[..34].to_vec();
    out.extend_from_slice(&[1, 1, 1, 0]);
    out.extend_from_slice(&frame[34..]);
    let mut ip = Ipv4Packet::new_unchecked(&mut out[14..]);
    ip.set_header_len(24);
    ip.set_total_len(ip.total_len() + 4);
    ip.fill_checksum();
    out
}

#[test]
fn never_with_ip_options() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    let first = r.frame(&c.data(0, TcpFlags::ACK), &bytes(0, 1000), 0);
    let second = with_ipv4_options(&r.frame(&c.data(1000, TcpFlags::ACK), &bytes(1000, 1000), 0));
    r.inject_burst(&[first, second]);
    assert_eq!(merged(&r), 0);
    assert_eq!(read_all(&mut r, c.id), bytes(0, 2000));
}

#[test]
fn never_with_ipv6_extension_headers() {
    let mut r = Rig::new(|_| {});
    let (peer, server) = (IpAddress::V6(PEER6), IpAddress::V6(SERVER6));
    let syn = TcpRepr { max_seg_size: Some(1440), ..base(ISN, None, TcpFlags::SYN) };
    r.segment_between(peer, server, &syn, &[]);
    let ours = r.replies().pop().expect("SYN-ACK").seq_number + 1;
    r.segment_between(peer, server, &base(ISN + 1, Some(ours), TcpFlags::ACK), &[]);
    let (id, _) = r.shard.tcp_accept(r.listener6).expect("accepted");
    let frame = |off: u32| {
        let h = TcpRepr { payload_len: 1000, ..base(ISN + 1 + off, Some(ours), TcpFlags::ACK) };
        testkit::fuzzing::ip_frame(r.peer.mac().0, r.shard.nic().mac().0, (peer, server), &h, &bytes(off, 1000), 0)
    };
    let (first, plain, extended) = (frame(0), frame(1000), with_ipv6_extension_header(&frame(2000), 1));
    r.inject_burst(&[first, plain, extended]);
    assert_eq!(merged(&r), 1, "the plain one joined, the one with a destination options header not");
    assert_eq!(read_all(&mut r, id), bytes(0, 3000));
}

#[test]
fn never_with_a_bad_checksum() {
    let mut r = Rig::new(|_| {});
    let c = establish(&mut r, PEER_PORT, false);
    let first = r.frame(&c.data(0, TcpFlags::ACK), &bytes(0, 1000), 0);
    let mut second = r.frame(&c.data(1000, TcpFlags::ACK), &bytes(1000, 1000), 0);
    *second.last_mut().unwrap() ^= 0xff;
    r.inject_burst(&[first, second]);
    assert_eq!((merged(&r), r.shard.stats().tcp_bad_checksum), (0, 1));
    assert_eq!(read_all(&mut r, c.id), bytes(0, 1000));
}
