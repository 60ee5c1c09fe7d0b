//! RFC 5961 section 7: challenge ACKs are rate-limited. By default as in Linux 6.x, per
//! connection (one per `tcp_invalid_ratelimit`, 500 ms); optionally also per shard, all its
//! connections sharing one budget per second (Linux's `tcp_challenge_ack_limit`, off by default
//! since 6.0), counted on the shard's clock. The tests play the peer of two connections with
//! hand-built segments (`testkit::fuzzing::Rig`).

use stack::TcpState;
use testkit::fuzzing::{base, Rig};
use wire::{TcpFlags, TcpRepr};

const SECOND: u64 = 1_000_000_000;

/// A connection from the peer's `port`, accepted; the next sequence numbers (peer, shard).
fn connect(r: &mut Rig, port: u16) -> (u32, u32) {
    let iss = 5000 * u32::from(port);
    r.segment(&TcpRepr { src_port: port, max_seg_size: Some(1460), ..base(iss, None, TcpFlags::SYN) }, &[]);
    let synack = r.replies().pop().expect("SYN-ACK");
    let (peer_nxt, shard_nxt) = (iss + 1, synack.seq_number + 1);
    r.segment(&TcpRepr { src_port: port, ..base(peer_nxt, Some(shard_nxt), TcpFlags::ACK) }, &[]);
    r.shard.tcp_accept(r.listener).expect("accepted");
    (peer_nxt, shard_nxt)
}

/// A blind RST in the window but not at RCV.NXT (RFC 5961 section 3.2): a challenge ACK is due.
fn blind_rst(r: &mut Rig, port: u16, peer_nxt: u32) -> Vec<TcpRepr> {
    r.segment(&TcpRepr { src_port: port, ..base(peer_nxt + 100, None, TcpFlags::RST) }, &[]);
    r.replies()
}

#[test]
fn rfc5961_challenge_acks_are_rate_limited_per_connection_by_default() {
    let mut r = Rig::new(|_| {});
    let (a_nxt, _) = connect(&mut r, 40000);
    let (b_nxt, _) = connect(&mut r, 40001);
    let sent: usize = (0..40).map(|_| blind_rst(&mut r, 40000, a_nxt).len()).sum();
    assert_eq!(sent, 1, "one per connection per 500 ms");
    // The other connection has its own.
    assert_eq!(blind_rst(&mut r, 40001, b_nxt).len(), 1);
    // The 39 the connection held back are counted (Linux's TCPACKSkippedChallenge).
    assert_eq!(r.shard.stats().tcp_challenge_acks_skipped, 39, "no shared budget, and counted");
    r.now += SECOND / 2;
    assert_eq!(blind_rst(&mut r, 40000, a_nxt).len(), 1);
}

#[test]
fn rfc5961_challenge_acks_are_rate_limited_per_shard() {
    // The shard's budget alone: the connections' own limit off.
    let mut r = Rig::new(|cfg| {
        cfg.challenge_ack_limit = 10;
        cfg.tcp.invalid_ratelimit = 0;
    });
    let (a_nxt, a_shard) = connect(&mut r, 40000);
    let (b_nxt, b_shard) = connect(&mut r, 40001);
    let mut sent = 0;
    for _ in 0..40 {
        let replies = blind_rst(&mut r, 40000, a_nxt);
        for ack in &replies {
            assert_eq!((ack.flags, ack.seq_number, ack.ack_number), (TcpFlags::ACK, a_shard, Some(a_nxt)));
        }
        sent += replies.len();
    }
    // Each second's budget is drawn between half and one and a half times the limit.
    assert!((5..15).contains(&sent), "{sent} challenge ACKs in one second");
    // The other connection shares the spent budget...
    assert_eq!(blind_rst(&mut r, 40001, b_nxt), []);
    assert_eq!(r.shard.stats().tcp_challenge_acks_skipped, 40 - sent as u64 + 1);
    // ...which comes back the next second.
    r.now += SECOND;
    let replies = blind_rst(&mut r, 40001, b_nxt);
    assert_eq!(replies.len(), 1);
    assert_eq!((replies[0].seq_number, replies[0].ack_number), (b_shard, Some(b_nxt)));
    // Neither connection was hurt, and the real peer's RST still resets (it needs no challenge).
    let conns: Vec<_> = r.shard.connections().map(|(_, _, _, info)| info.state).collect();
    assert_eq!(conns, [TcpState::Established, TcpState::Established]);
    r.segment(&TcpRepr { src_port: 40000, ..base(a_nxt, None, TcpFlags::RST) }, &[]);
    let established = r.shard.connections().filter(|(_, _, _, info)| info.state == TcpState::Established);
    assert_eq!(established.count(), 1);
}
