//! ECN (RFC 3168) through the stack: the listener's negotiation looks at the SYN's IP header,
//! the IP ECN field goes into the connection (CE) and out of it (ECT(0) on new data), and a
//! path that marks CE instead of dropping (the fault injector's `ce`) slows the sender down
//! without a loss. The first tests play the peer with hand-built segments
//! (`testkit::fuzzing::Rig`); the last runs two shards over the in-memory NIC pair.

use std::net::{Ipv4Addr, SocketAddr};

use nic::clock::{Clock, ManualClock};
use nic::fault::{FaultConfig, FaultyNic};
use nic::Nic as _;
use stack::shard::{Shard, ShardConfig};
use testkit::fuzzing::{base, Rig, PEER_PORT};
use testkit::mem::{pair, MemConfig};
use wire::{TcpFlags, TcpRepr};

const NOT_ECT: u8 = 0b00;
const ECT0: u8 = 0b10;
const CE: u8 = 0b11;
const ECN_SETUP: TcpFlags = TcpFlags::from_bits(TcpFlags::ECE.bits() | TcpFlags::CWR.bits());

/// The peer's ECN-setup SYN from `port`, its IP header's ECN field `ecn`; the SYN-ACK.
fn ecn_setup_syn(r: &mut Rig, port: u16, ecn: u8) -> (TcpRepr, u8) {
    let syn = TcpRepr { src_port: port, max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN | ECN_SETUP) };
    r.segment_ecn(&syn, &[], ecn);
    let mut replies = r.replies_with_ecn();
    assert_eq!(replies.len(), 1, "one SYN-ACK");
    replies.pop().unwrap()
}

#[test]
fn rfc3168_6_1_1_the_listener_agrees_only_to_an_ecn_setup_syn_that_is_not_ect() {
    let mut r = Rig::new(|_| {});
    let (synack, ecn) = ecn_setup_syn(&mut r, PEER_PORT, NOT_ECT);
    assert_eq!((synack.flags, ecn), (TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE, NOT_ECT));
    // A SYN must not be ECN-capable: one that is (or carries CE) is no ECN-setup SYN (Linux).
    for (port, ecn) in [(PEER_PORT + 1, ECT0), (PEER_PORT + 2, CE)] {
        let (synack, _) = ecn_setup_syn(&mut r, port, ecn);
        assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK, "SYN with ECN field {ecn:#b}");
    }
    // A SYN cookie remembers no ECN, so its SYN-ACK does not offer it.
    let mut r = Rig::new(|cfg| cfg.syn_backlog = 0);
    let (synack, _) = ecn_setup_syn(&mut r, PEER_PORT, NOT_ECT);
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!(r.shard.stats().tcp_syncookies_sent, 1);
}

#[test]
fn rfc3168_ce_goes_into_the_connection_and_ect0_comes_out_of_it() {
    let mut r = Rig::new(|_| {});
    let (synack, _) = ecn_setup_syn(&mut r, PEER_PORT, NOT_ECT);
    let ours = synack.seq_number + 1;
    r.segment(&base(1001, Some(ours), TcpFlags::ACK), &[]);
    let (id, _) = r.shard.tcp_accept(r.listener).expect("accepted");
    // CE-marked data: acknowledged at once with ECE, in a packet that is not ECN-capable.
    r.segment_ecn(&base(1001, Some(ours), TcpFlags::ACK | TcpFlags::PSH), b"marked", CE);
    let replies = r.replies_with_ecn();
    assert_eq!(replies.len(), 1);
    let (ack, ecn) = replies[0];
    assert_eq!((ack.flags, ack.ack_number, ecn), (TcpFlags::ACK | TcpFlags::ECE, Some(1007), NOT_ECT));
    // Our data goes ECT(0), still echoing ECE (no CWR yet).
    r.shard.tcp_send(id, b"reply").unwrap();
    r.shard.poll(r.now);
    let replies = r.replies_with_ecn();
    assert_eq!(replies.len(), 1);
    let (data, ecn) = replies[0];
    assert_eq!((data.payload_len, ecn), (5, ECT0));
    assert!(data.flags.contains(TcpFlags::ECE));
    // The peer's CWR ends the echo.
    r.segment(&base(1007, Some(ours + 5), TcpFlags::ACK | TcpFlags::PSH | TcpFlags::CWR), b"cwr");
    let replies = r.replies_with_ecn();
    assert_eq!(replies.len(), 1);
    assert_eq!((replies[0].0.flags, replies[0].0.ack_number), (TcpFlags::ACK, Some(1010)));
}

/// What a transfer over a path that marks CE saw.
struct Marked {
    /// ECN-capable packets the path marked CE.
    ce_marked: u64,
    /// The sender's segments sent again.
    retransmitted: u64,
    /// The sender's slow-start threshold at the end (`u32::MAX`: never reduced).
    ssthresh: u32,
}

/// 4 MiB from a client shard (ECN mode `ecn`) to a server shard over the in-memory pair; the
/// client's transmissions pass a fault injector that marks 2% of ECN-capable packets CE.
fn transfer_through_marking_path(ecn: tcp::Ecn) -> Marked {
    let clock = ManualClock::new();
    let (a, b) = pair(MemConfig { queue_len: 4096, pool_size: 16384, ..MemConfig::default() });
    let server_addr = Ipv4Addr::new(10, 0, 0, 1);
    let scfg = ShardConfig::new(a.mac(), Some((server_addr, 24)), None, [1; 32]);
    let mut server = Shard::new(a, scfg);
    let marking: FaultConfig = "ce=0.02,dir=tx".parse().unwrap();
    let mut ccfg = ShardConfig::new(b.mac(), Some((Ipv4Addr::new(10, 0, 0, 2), 24)), None, [2; 32]);
    ccfg.tcp.ecn = ecn;
    let mut client = Shard::new(FaultyNic::new(b, marking, clock.clone()), ccfg);
    let listener = server.tcp_listen(SocketAddr::new(server_addr.into(), 9), 8).unwrap();
    let conn = client.tcp_connect(SocketAddr::new(server_addr.into(), 9)).unwrap();
    let data: Vec<u8> = (0..4 << 20).map(|i: u32| (i % 251) as u8).collect();
    let (mut sent, mut received) = (0, Vec::with_capacity(data.len()));
    let mut accepted = None;
    let mut buf = vec![0u8; 64 * 1024];
    for _ in 0..10_000_000 {
        let now = clock.now_ns();
        let work = server.poll(now) + client.poll(now);
        if sent < data.len() {
            sent += client.tcp_send(conn, &data[sent..]).unwrap_or(0);
        }
        if accepted.is_none() {
            accepted = server.tcp_accept(listener).ok().map(|(id, _)| id);
        }
        if let Some(id) = accepted {
            while let Ok(n) = server.tcp_recv(id, &mut buf) {
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&buf[..n]);
            }
        }
        if received.len() == data.len() {
            break;
        }
        let quiet = server.nic().rx_pending() == 0
            && client.nic().inner().rx_pending() == 0
            && server.pending_frames() + client.pending_frames() == 0;
        if work == 0 && quiet {
            let next = [server.next_deadline(), client.next_deadline(), client.nic().next_release_ns()]
                .into_iter()
                .flatten()
                .min();
            clock.set_ns(next.unwrap_or(now + 1_000).max(now + 1));
        }
    }
    assert!(received == data, "every byte, in order ({} of {})", received.len(), data.len());
    let info = client.tcp_info(conn).unwrap();
    Marked {
        ce_marked: client.nic().fault_stats().1.ce_marked,
        retransmitted: client.stats().tcp_retrans_segments,
        ssthresh: info.ssthresh,
    }
}

#[test]
fn rfc3168_ce_marks_on_the_path_slow_the_sender_without_a_loss() {
    // The client asks for ECN (tcp_ecn = 1), the server accepts (Linux's default, 2).
    let ecn = transfer_through_marking_path(tcp::Ecn::On);
    assert!(ecn.ce_marked > 0, "the client's data went ECN-capable");
    assert_eq!(ecn.retransmitted, 0, "nothing was lost");
    assert!(ecn.ssthresh < u32::MAX, "the marks reduced the window");
    // Without ECN the packets are not ECN-capable: the path cannot mark them, and nothing
    // slows the sender.
    let plain = transfer_through_marking_path(tcp::Ecn::Accept);
    assert_eq!((plain.ce_marked, plain.retransmitted, plain.ssthresh), (0, 0, u32::MAX));
}
