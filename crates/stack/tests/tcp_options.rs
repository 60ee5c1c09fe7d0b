//! A known TCP option with the wrong length for its kind is skipped and the segment processed,
//! as Linux's `tcp_parse_options` does: one malformed option must not cost a SYN or data. The
//! tests play the peer with hand-built segments (`testkit::fuzzing::Rig`) whose option bytes are
//! then bent.

use nic::Nic;
use testkit::fuzzing::{base, peer_frame, Rig};
use wire::{IpAddress, TcpFlags, TcpPacket, TcpRepr};

const ETH_IP: usize = 14 + 20;

/// The frame of `repr` (which must carry an MSS of 0x0501, so that its option bytes read
/// 2 4 5 1) with the MSS option's length octet made 3: MSS of length 3, then a NOP.
fn with_mss_of_length_3(r: &Rig, repr: &TcpRepr, payload: &[u8]) -> Vec<u8> {
    assert_eq!(repr.max_seg_size, Some(0x0501));
    let mut f = peer_frame(r.peer.mac().0, r.shard.nic().mac().0, repr, payload, 0);
    let mss_at = ETH_IP + 20;
    assert_eq!(f[mss_at..mss_at + 4], [2, 4, 5, 1]);
    f[mss_at + 1] = 3;
    let (src, dst) = (IpAddress::V4(testkit::fuzzing::PEER), IpAddress::V4(testkit::fuzzing::SERVER));
    TcpPacket::new_unchecked(&mut f[ETH_IP..]).fill_checksum(&src, &dst);
    f
}

#[test]
fn syn_with_an_mss_option_of_wrong_length_is_answered() {
    let mut r = Rig::new(|_| {});
    let syn = TcpRepr { max_seg_size: Some(0x0501), window_scale: Some(7), ..base(1000, None, TcpFlags::SYN) };
    let f = with_mss_of_length_3(&r, &syn, &[]);
    r.inject(&f);
    let replies = r.replies();
    assert_eq!(replies.len(), 1, "{replies:?}");
    let synack = replies[0];
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(synack.ack_number, Some(1001));
    // The options after the bad one were read: the window scale is answered.
    assert!(synack.window_scale.is_some(), "{synack:?}");
    assert_eq!(r.shard.stats().tcp_malformed, 0);
}

#[test]
fn data_with_an_mss_option_of_wrong_length_is_delivered() {
    let mut r = Rig::new(|_| {});
    r.segment(&TcpRepr { max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) }, &[]);
    let synack = r.replies().pop().expect("SYN-ACK");
    let server_nxt = synack.seq_number + 1;
    r.segment(&base(1001, Some(server_nxt), TcpFlags::ACK), &[]);
    let (conn, _) = r.shard.tcp_accept(r.listener).expect("accepted");

    let data = TcpRepr { max_seg_size: Some(0x0501), ..base(1001, Some(server_nxt), TcpFlags::ACK | TcpFlags::PSH) };
    let f = with_mss_of_length_3(&r, &data, b"hello");
    r.inject(&f);
    let mut buf = [0u8; 16];
    assert_eq!(r.shard.tcp_recv(conn, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(r.shard.stats().tcp_malformed, 0);
}
