//! Linux's limits on what TCP holds, on the wire (`testkit::fuzzing::Rig` plays the peer):
//! orphans (`tcp_max_orphans`, `tcp_orphan_retries`, `tcp_fin_timeout`), the memory budget
//! (`tcp_mem`), TIME-WAIT entries (`tcp_max_tw_buckets`) and the listen backlog (`somaxconn`).
//! Time is the rig's clock only.

use stack::shard::{SocketId, TcpMem};
use stack::Errno;
use testkit::fuzzing::{base, Rig, PEER_PORT};
use wire::{TcpFlags, TcpRepr};

const SECOND: u64 = 1_000_000_000;
/// The peer's first sequence number after its SYN.
const PEER_SEQ: u32 = 1001;

/// A segment from the peer's port `port`.
fn from(port: u16, seq: u32, ack: Option<u32>, flags: TcpFlags) -> TcpRepr {
    TcpRepr { src_port: port, ..base(seq, ack, flags) }
}

/// A connection from the peer's port `port`, accepted. Returns it and our first sequence
/// number after the SYN (what the peer acknowledges before any data).
fn connect(r: &mut Rig, port: u16) -> (SocketId, u32) {
    r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(port, PEER_SEQ - 1, None, TcpFlags::SYN) }, &[]);
    let synack = r.replies();
    assert_eq!(synack.len(), 1, "{synack:?}");
    let una = synack[0].seq_number.wrapping_add(1);
    r.segment(&from(port, PEER_SEQ, Some(una), TcpFlags::ACK), &[]);
    let (id, _) = r.shard.tcp_accept(r.listener).unwrap();
    (id, una)
}

/// The peer at `port` shuts its window.
fn zero_window(r: &mut Rig, port: u16, una: u32) {
    r.segment(&TcpRepr { window_len: 0, ..from(port, PEER_SEQ, Some(una), TcpFlags::ACK) }, &[]);
}

/// Moves the clock by `d` and polls.
fn advance(r: &mut Rig, d: u64) {
    r.now += d;
    r.shard.poll(r.now);
}

#[test]
fn tcp_orphan_retries_ends_an_orphan_whose_peer_keeps_its_window_shut() {
    let mut r = Rig::new(|_| {});
    let sockets = r.shard.socket_count();
    let (id, una) = connect(&mut r, PEER_PORT);
    zero_window(&mut r, PEER_PORT, una);
    r.shard.tcp_send(id, b"never read").unwrap();
    r.shard.close(id).unwrap();
    r.shard.poll(r.now);
    assert_eq!(r.shard.orphan_count(), 1);
    let start = r.now;
    // The peer answers every probe (and more) with its window still shut.
    while r.shard.socket_count() > sockets && r.now - start < 1000 * SECOND {
        r.now = r.shard.next_deadline().expect("the orphan's timers");
        r.shard.poll(r.now);
        assert!(r.replies().iter().all(|s| !s.flags.contains(TcpFlags::RST)));
        zero_window(&mut r, PEER_PORT, una);
    }
    assert_eq!(r.shard.socket_count(), sockets, "the orphan still lives after {} s", (r.now - start) / SECOND);
    // Probes 200 ms apart doubling to 102.4 s, then 120 s: about 325 s.
    assert!((300 * SECOND..400 * SECOND).contains(&(r.now - start)), "{} s", (r.now - start) / SECOND);
    assert_eq!(r.shard.orphan_count(), 0);
    assert_eq!(r.shard.stats().tcp_abort_on_timeout, 1);
}

#[test]
fn tcp_max_orphans_resets_a_close_beyond_it() {
    let mut r = Rig::new(|cfg| cfg.max_orphans = 1);
    let mut conns = Vec::new();
    for port in [PEER_PORT, PEER_PORT + 1] {
        let (id, una) = connect(&mut r, port);
        zero_window(&mut r, port, una);
        r.shard.tcp_send(id, b"queued").unwrap();
        conns.push(id);
    }
    r.shard.poll(r.now);
    r.replies();
    r.shard.close(conns[0]).unwrap();
    r.shard.poll(r.now);
    assert_eq!(r.replies(), [], "one orphan is allowed");
    assert_eq!(r.shard.orphan_count(), 1);
    r.shard.close(conns[1]).unwrap();
    r.shard.poll(r.now);
    let rst = r.replies();
    assert_eq!(rst.len(), 1, "{rst:?}");
    assert_eq!((rst[0].flags & TcpFlags::RST, rst[0].dst_port), (TcpFlags::RST, PEER_PORT + 1));
    assert_eq!(r.shard.stats().tcp_abort_on_memory, 1);
    assert_eq!(r.shard.orphan_count(), 1);
    assert_eq!(r.shard.tcp_state(conns[1]), Err(Errno::EBADF), "freed");
}

#[test]
fn closing_a_connection_the_peer_reset_leaves_nothing_behind() {
    let mut r = Rig::new(|_| {});
    let sockets = r.shard.socket_count();
    let (id, _) = connect(&mut r, PEER_PORT);
    r.segment(&from(PEER_PORT, PEER_SEQ, None, TcpFlags::RST), &[]);
    r.shard.close(id).unwrap();
    r.shard.poll(r.now);
    assert_eq!((r.shard.socket_count(), r.shard.orphan_count()), (sockets, 0));
}

#[test]
fn tcp_fin_timeout_ends_an_orphan_in_fin_wait_2() {
    let mut r = Rig::new(|cfg| cfg.tcp.fin_wait2_timeout = 5 * SECOND);
    let sockets = r.shard.socket_count();
    let (id, una) = connect(&mut r, PEER_PORT);
    r.shard.close(id).unwrap();
    r.shard.poll(r.now);
    let fin = r.replies();
    assert!(fin.len() == 1 && fin[0].flags.contains(TcpFlags::FIN), "{fin:?}");
    r.segment(&from(PEER_PORT, PEER_SEQ, Some(una + 1), TcpFlags::ACK), &[]); // FIN-WAIT-2
    advance(&mut r, 5 * SECOND - 1);
    assert_eq!(r.shard.orphan_count(), 1);
    advance(&mut r, 1);
    assert_eq!((r.shard.socket_count(), r.shard.orphan_count()), (sockets, 0));
    assert_eq!(r.replies(), [], "it goes silently, as Linux's");
}

#[test]
fn tcp_mem_high_refuses_data_until_memory_is_freed() {
    // What is charged is what the rings hold (Linux's `sk_mem_charge`): b holds 6 bytes it has
    // not read, a 2 KiB it has not read and 6 KiB the peer has not acknowledged, which is all
    // the budget.
    let high = 6 + 8192;
    let mut r = Rig::new(|cfg| cfg.tcp_mem = TcpMem { low: high, pressure: high, high });
    let (a, una_a) = connect(&mut r, PEER_PORT);
    let (b, una_b) = connect(&mut r, PEER_PORT + 1);
    assert_eq!(r.shard.tcp_memory(), 0, "connections that hold nothing cost nothing");
    r.segment(&from(PEER_PORT + 1, PEER_SEQ, Some(una_b), TcpFlags::ACK | TcpFlags::PSH), b"first!");
    for k in 0..2 {
        r.segment(&from(PEER_PORT, PEER_SEQ + k * 1024, Some(una_a), TcpFlags::ACK | TcpFlags::PSH), &[1; 1024]);
    }
    assert_eq!(r.shard.tcp_send(a, &[2; 6144]), Ok(6144));
    r.shard.poll(r.now);
    r.replies();
    assert_eq!(r.shard.tcp_memory(), high);

    // A new connection: its SYN is dropped (the peer tries again later).
    r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(PEER_PORT + 2, 5000, None, TcpFlags::SYN) }, &[]);
    assert_eq!(r.replies(), []);
    assert_eq!(r.shard.stats().tcp_listen_memory_drops, 1);
    // Data behind unread data: dropped, counted, acknowledged where it was.
    r.segment(&from(PEER_PORT + 1, PEER_SEQ + 6, Some(una_b), TcpFlags::ACK | TcpFlags::PSH), b"dropped");
    let ack = r.replies();
    assert!(ack.len() == 1 && ack[0].ack_number == Some(PEER_SEQ + 6), "{ack:?}");
    assert_eq!(r.shard.stats().tcp_rcvq_drops, 1);
    // A write: EAGAIN, not writable.
    assert_eq!(r.shard.tcp_send(b, b"no room"), Err(Errno::EAGAIN));
    assert!(!r.shard.readiness(b).writable);
    let mut changed = Vec::new();
    r.shard.take_changed(&mut changed);

    // a's data is acknowledged and its request read: the memory is back at once (no buffer
    // check needed), and b's writer is told it may write.
    // (Nagle holds the last 304 bytes until the first four segments are acknowledged.)
    r.segment(&from(PEER_PORT, PEER_SEQ + 2048, Some(una_a + 4 * 1460), TcpFlags::ACK), &[]);
    r.shard.poll(r.now);
    r.replies();
    r.segment(&from(PEER_PORT, PEER_SEQ + 2048, Some(una_a + 6144), TcpFlags::ACK), &[]);
    assert_eq!(r.shard.tcp_recv(a, &mut [0; 4096]), Ok(2048));
    assert_eq!(r.shard.tcp_memory(), 6);
    r.shard.poll(r.now);
    r.shard.take_changed(&mut changed);
    assert!(changed.contains(&b), "b was not woken");
    assert!(r.shard.readiness(b).writable);
    assert_eq!(r.shard.tcp_send(b, b"room now"), Ok(8));
    assert_eq!(r.shard.tcp_recv(b, &mut [0; 64]), Ok(6));
}

#[test]
fn tcp_mem_ten_thousand_connections_holding_a_few_bytes_stay_under_low() {
    // Linux charges the bytes queued: 10,000 connections with a 100-byte request each unread
    // and a 100-byte response each unacknowledged hold 2 MB, far under `low`. Charged as
    // whole rings (65535 + 128 KiB each) they were 1.9 GB: past Linux's `high` (1.5 GiB).
    let mut r = Rig::new(|cfg| cfg.somaxconn = 10_000);
    let mut ids = Vec::new();
    for k in 0..10_000u32 {
        let port = 10_000 + k as u16;
        r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(port, PEER_SEQ - 1, None, TcpFlags::SYN) }, &[]);
        let una = r.replies()[0].seq_number.wrapping_add(1);
        r.segment(&from(port, PEER_SEQ, Some(una), TcpFlags::ACK | TcpFlags::PSH), &[3; 100]);
        let (id, _) = r.shard.tcp_accept(r.listener).unwrap();
        assert_eq!(r.shard.tcp_send(id, &[4; 100]), Ok(100));
        ids.push(id);
        r.shard.poll(r.now);
        r.replies();
    }
    assert_eq!(r.shard.tcp_memory(), 10_000 * 200);
    assert!(r.shard.tcp_memory() < TcpMem::default().low);
    let s = *r.shard.stats();
    assert_eq!((s.tcp_memory_pressures, s.tcp_listen_memory_drops, s.tcp_rcvq_drops), (0, 0, 0));
}

#[test]
fn out_of_order_data_alone_does_not_pin_a_receive_ring() {
    let mut r = Rig::new(|_| {});
    let (id, una) = connect(&mut r, PEER_PORT);
    // One segment beyond a hole that is never filled: charged about one segment (its
    // truesize), not the ring it sits in.
    r.segment(&from(PEER_PORT, PEER_SEQ + 1000, Some(una), TcpFlags::ACK | TcpFlags::PSH), b"beyond");
    let one_segment = r.shard.tcp_memory();
    assert!((tcp::SEGMENT_OVERHEAD..=1460 + tcp::SEGMENT_OVERHEAD).contains(&one_segment), "{one_segment}");
    advance(&mut r, SECOND);
    assert_eq!(r.shard.tcp_memory(), one_segment, "kept at the first buffer check");
    advance(&mut r, SECOND);
    assert_eq!(r.shard.tcp_memory(), 0, "pruned at the second");
    let s = *r.shard.stats();
    assert_eq!((s.tcp_prune_called, s.tcp_ofo_pruned, s.tcp_memory_pressures), (1, 1, 0));
    // The hole fills: only what was kept is readable.
    r.segment(&from(PEER_PORT, PEER_SEQ, Some(una), TcpFlags::ACK | TcpFlags::PSH), &[7; 1000]);
    assert_eq!(r.shard.tcp_recv(id, &mut [0; 2000]), Ok(1000));
}

#[test]
fn tcp_mem_pressure_prunes_out_of_order_data_at_the_next_check() {
    let mut r = Rig::new(|cfg| cfg.tcp_mem = TcpMem { low: 0, pressure: 0, ..TcpMem::default() });
    let (_, una) = connect(&mut r, PEER_PORT);
    r.segment(&from(PEER_PORT, PEER_SEQ + 1000, Some(una), TcpFlags::ACK | TcpFlags::PSH), b"beyond");
    assert_eq!(r.shard.stats().tcp_memory_pressures, 1);
    advance(&mut r, SECOND);
    assert_eq!(r.shard.tcp_memory(), 0);
    let s = *r.shard.stats();
    assert_eq!((s.tcp_prune_called, s.tcp_ofo_pruned), (1, 1));
}

/// The server closes first, the peer answers with its FIN: the server's side enters TIME-WAIT.
fn close_into_time_wait(r: &mut Rig, port: u16) {
    let (id, una) = connect(r, port);
    r.shard.close(id).unwrap();
    r.shard.poll(r.now);
    r.replies();
    r.segment(&from(port, PEER_SEQ, Some(una + 1), TcpFlags::ACK | TcpFlags::FIN), &[]);
    let ack = r.replies();
    assert!(ack.len() == 1 && ack[0].ack_number == Some(PEER_SEQ + 1), "{ack:?}");
}

#[test]
fn tcp_max_tw_buckets_skips_time_wait_beyond_it() {
    let mut r = Rig::new(|cfg| cfg.max_tw_buckets = 1);
    let sockets = r.shard.socket_count();
    close_into_time_wait(&mut r, PEER_PORT);
    assert_eq!(r.shard.time_wait_count(), 1);
    close_into_time_wait(&mut r, PEER_PORT + 1);
    assert_eq!(r.shard.time_wait_count(), 1);
    assert_eq!(r.shard.stats().tcp_time_wait_overflows, 1);
    assert_eq!(r.shard.socket_count(), sockets);
}

#[test]
fn somaxconn_caps_the_listen_backlog() {
    // The rig listens with a backlog of 8.
    let mut r = Rig::new(|cfg| cfg.somaxconn = 2);
    for port in [PEER_PORT, PEER_PORT + 1] {
        r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(port, PEER_SEQ - 1, None, TcpFlags::SYN) }, &[]);
        let una = r.replies()[0].seq_number.wrapping_add(1);
        r.segment(&from(port, PEER_SEQ, Some(una), TcpFlags::ACK), &[]);
    }
    r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(PEER_PORT + 2, PEER_SEQ - 1, None, TcpFlags::SYN) }, &[]);
    assert_eq!(r.replies(), [], "the accept queue holds somaxconn");
    assert_eq!(r.shard.stats().tcp_listen_overflows, 1);
}

/// Linux `tcp_out_of_resources`: an orphan with data queued while memory is at its high mark
/// is reset at its next retransmission or probe.
#[test]
fn tcp_mem_exhausted_resets_an_orphan_with_queued_data_at_its_next_timer() {
    let high = 6 + 7 + 4096;
    let mut r = Rig::new(|cfg| cfg.tcp_mem = TcpMem { low: high, pressure: high, high });
    let (a, una_a) = connect(&mut r, PEER_PORT);
    let (b, una_b) = connect(&mut r, PEER_PORT + 1);
    zero_window(&mut r, PEER_PORT, una_a);
    r.shard.tcp_send(a, b"queued").unwrap();
    r.shard.close(a).unwrap();
    r.shard.poll(r.now);
    assert_eq!(r.replies(), [], "memory left: the orphan stays");
    // b takes the rest of the memory: a request unread, and a response.
    r.segment(&from(PEER_PORT + 1, PEER_SEQ, Some(una_b), TcpFlags::ACK | TcpFlags::PSH), b"request");
    assert_eq!(r.shard.tcp_send(b, &[5; 8192]), Ok(4096));
    r.shard.poll(r.now);
    r.replies();
    assert_eq!(r.shard.tcp_memory(), high);
    // a's first probe is the earliest real deadline; before it, only timers armed lazily
    // (earlier deadlines that moved on) fire, and they send nothing.
    let mut rst = Vec::new();
    for _ in 0..4 {
        r.now = r.shard.next_deadline().unwrap();
        r.shard.poll(r.now);
        rst = r.replies();
        if !rst.is_empty() {
            break;
        }
    }
    assert!(rst.iter().any(|s| s.flags.contains(TcpFlags::RST) && s.dst_port == PEER_PORT), "{rst:?}");
    assert_eq!((r.shard.stats().tcp_abort_on_memory, r.shard.orphan_count()), (1, 0));
}

/// TcpOutRsts counts every RST sent, as Linux's does (`TCP_MIB_OUTRSTS` in
/// `tcp_v4_send_reset` and `tcp_send_active_reset`): the answer to a segment of no connection,
/// and a connection's own reset (here max_orphans's, the same path as an abort or a close with
/// unread data). It counted only the first kind.
#[test]
fn every_rst_sent_is_counted_as_out_rsts() {
    let mut r = Rig::new(|cfg| cfg.max_orphans = 0);
    let (id, una) = connect(&mut r, PEER_PORT);
    zero_window(&mut r, PEER_PORT, una);
    r.shard.tcp_send(id, b"queued").unwrap();
    r.shard.poll(r.now);
    r.replies();
    r.shard.close(id).unwrap();
    r.shard.poll(r.now);
    let rst = r.replies();
    assert_eq!(rst.len(), 1, "{rst:?}");
    assert_eq!(rst[0].flags & TcpFlags::RST, TcpFlags::RST);
    assert_eq!(r.shard.stats().tcp_rst_sent, 1, "the connection's own reset");
    r.segment(&from(PEER_PORT + 7, PEER_SEQ, Some(12345), TcpFlags::ACK), &[]);
    assert_eq!(r.replies().len(), 1);
    assert_eq!(r.shard.stats().tcp_rst_sent, 2, "and the answer to a segment of no connection");
}

/// Linux checks the accept queue twice: at the SYN, and when the handshake's last ACK arrives
/// (`tcp_v4_syn_recv_sock`, `sk_acceptq_is_full`). There the ACK is dropped (ListenOverflows,
/// ListenDrops), the connection stays half-open, and a later ACK completes it.
#[test]
fn a_full_accept_queue_drops_the_last_ack_of_a_handshake_and_a_later_one_completes_it() {
    let mut r = Rig::new(|cfg| cfg.somaxconn = 1);
    let mut una = Vec::new();
    for port in [PEER_PORT, PEER_PORT + 1] {
        r.segment(&TcpRepr { max_seg_size: Some(1460), ..from(port, PEER_SEQ - 1, None, TcpFlags::SYN) }, &[]);
        una.push(r.replies()[0].seq_number.wrapping_add(1));
    }
    r.segment(&from(PEER_PORT, PEER_SEQ, Some(una[0]), TcpFlags::ACK), &[]);
    let sockets = r.shard.socket_count();
    // The queue (one) is full: the second handshake's ACK, with its request, is dropped.
    r.segment(&from(PEER_PORT + 1, PEER_SEQ, Some(una[1]), TcpFlags::ACK | TcpFlags::PSH), b"request");
    assert_eq!(r.replies(), []);
    assert_eq!(r.shard.stats().tcp_listen_overflows, 1);
    assert_eq!(r.shard.socket_count(), sockets, "the half-open connection stays");
    let (first, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_eq!(r.shard.tcp_accept(r.listener).map(|_| ()), Err(Errno::EAGAIN));
    // Our SYN-ACK is retransmitted; the peer's next ACK completes the handshake.
    advance(&mut r, SECOND);
    let synack = r.replies();
    assert!(
        synack.iter().any(|s| s.dst_port == PEER_PORT + 1 && s.flags == TcpFlags::SYN | TcpFlags::ACK),
        "{synack:?}"
    );
    r.segment(&from(PEER_PORT + 1, PEER_SEQ, Some(una[1]), TcpFlags::ACK | TcpFlags::PSH), b"request");
    let (second, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_ne!(first, second);
    assert_eq!(r.shard.tcp_recv(second, &mut [0; 16]), Ok(7));
    assert_eq!(r.shard.stats().tcp_listen_overflows, 1);
}
