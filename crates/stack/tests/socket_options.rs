//! Socket options that reach the wire, seen from a hand-played peer (`testkit::fuzzing::Rig`):
//! SO_RCVBUF/SO_SNDBUF on listeners (their connections inherit them from the SYN on) and on
//! connect, and urgent data both ways (readiness, the owner's SIGURG list, MSG_OOB).

use std::net::{Ipv4Addr, SocketAddr};

use stack::shard::{Buffers, Errno, SocketId};
use testkit::fuzzing::{base, Rig};
use wire::{TcpFlags, TcpRepr};

/// The peer's SYN to the listener, offering window scaling; returns the SYN-ACK.
fn syn(r: &mut Rig, port: u16) -> TcpRepr {
    let syn =
        TcpRepr { src_port: port, max_seg_size: Some(1460), window_scale: Some(7), ..base(1000, None, TcpFlags::SYN) };
    r.segment(&syn, &[]);
    let synack = r.replies().into_iter().find(|x| x.dst_port == port && x.flags.contains(TcpFlags::SYN));
    synack.expect("a SYN-ACK")
}

/// A connection from the peer's `port`, handshake done (not accepted yet).
fn handshake(r: &mut Rig, port: u16) -> u32 {
    let synack = syn(r, port);
    let ours = synack.seq_number.wrapping_add(1);
    r.segment(&TcpRepr { src_port: port, ..base(1001, Some(ours), TcpFlags::ACK) }, &[]);
    ours
}

fn urgent_segment(port: u16, ours: u32, seq: u32, up: u16) -> TcpRepr {
    TcpRepr {
        src_port: port,
        urgent_at: up,
        payload_len: 4,
        ..base(seq, Some(ours), TcpFlags::ACK | TcpFlags::PSH | TcpFlags::URG)
    }
}

#[test]
fn listener_buffers_size_the_syn_ack_and_the_connections() {
    let mut r = Rig::new(|_| {});
    let default = syn(&mut r, 41000);
    assert_eq!((default.window_len, default.window_scale), (65535, Some(2)), "128 KiB by default");
    r.shard.tcp_set_buffers(r.listener, Buffers { recv: Some(8192), recv_fixed: true, send: Some(4608) }).unwrap();
    let small = syn(&mut r, 41001);
    assert_eq!((small.window_len, small.window_scale), (8192, Some(0)));
    let ours = small.seq_number.wrapping_add(1);
    r.segment(&TcpRepr { src_port: 41001, ..base(1001, Some(ours), TcpFlags::ACK) }, &[]);
    let (conn, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_eq!(r.shard.tcp_send(conn, &[0; 10_000]), Ok(4608), "the send buffer is the listener's");
    // Set on the connection itself later: it grows.
    r.shard.tcp_set_buffers(conn, Buffers { send: Some(9216), ..Buffers::default() }).unwrap();
    assert_eq!(r.shard.tcp_send(conn, &[0; 10_000]), Ok(9216 - 4608));
}

#[test]
fn autotuned_buffers_offer_the_window_scale_of_their_maximum_until_so_rcvbuf_fixes_them() {
    // Linux's `tcp_select_initial_window` scales for `tcp_rmem[2]`, so that the window can
    // follow the buffer as autotuning grows it: 6 MiB needs 7.
    let mut r = Rig::new(|cfg| cfg.tcp.rcv_buf_max = 6 << 20);
    let tuned = syn(&mut r, 41000);
    assert_eq!((tuned.window_len, tuned.window_scale), (65535, Some(7)));
    let ours = tuned.seq_number.wrapping_add(1);
    r.segment(&TcpRepr { src_port: 41000, ..base(1001, Some(ours), TcpFlags::ACK) }, &[]);
    let (conn, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_eq!(r.shard.tcp_info(conn).unwrap().rcv_buf, 128 * 1024, "it starts at the default");
    // SO_RCVLOWAT's growth keeps it autotuned; SO_RCVBUF fixes it (SOCK_RCVBUF_LOCK).
    r.shard.tcp_set_buffers(conn, Buffers { recv: Some(256 * 1024), ..Buffers::default() }).unwrap();
    assert_eq!(r.shard.tcp_info(conn).unwrap().rcv_buf, 256 * 1024);
    r.shard.tcp_set_buffers(r.listener, Buffers { recv: Some(8192), recv_fixed: true, send: None }).unwrap();
    let fixed = syn(&mut r, 41001);
    assert_eq!((fixed.window_len, fixed.window_scale), (8192, Some(0)));
}

#[test]
fn connect_with_a_receive_buffer_offers_its_window_scale() {
    let mut r = Rig::new(|_| {});
    let peer = SocketAddr::new(Ipv4Addr::new(10, 0, 0, 2).into(), 9999);
    for (recv, window, scale) in [(None, 65535, 2), (Some(4096), 4096, 0), (Some(1 << 20), 65535, 5)] {
        r.shard.tcp_connect_with(peer, Buffers { recv, recv_fixed: recv.is_some(), send: None }).unwrap();
        r.shard.flush(r.now);
        let syn = r.replies();
        assert_eq!(syn.len(), 1);
        assert_eq!(syn[0].flags, TcpFlags::SYN);
        assert_eq!((syn[0].window_len, syn[0].window_scale), (window, Some(scale)), "{recv:?}");
    }
}

#[test]
fn urgent_data_reaches_readiness_the_owner_list_and_msg_oob() {
    let mut r = Rig::new(|_| {});
    let ours = handshake(&mut r, 42000);
    let (conn, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_eq!(r.shard.tcp_recv_urgent(conn, false), Err(Errno::EINVAL), "no urgent data");
    r.segment(&urgent_segment(42000, ours, 1001, 4), b"abcX");
    let mut signalled: Vec<SocketId> = Vec::new();
    r.shard.take_urgent(&mut signalled);
    assert_eq!(signalled, [conn]);
    let ready = r.shard.readiness(conn);
    assert!(ready.urgent && ready.readable, "{ready:?}");
    assert_eq!(r.shard.tcp_urgent_mark(conn), Ok(Some(3)));
    let mut buf = [0u8; 16];
    assert_eq!(r.shard.tcp_recv(conn, &mut buf), Ok(3));
    assert_eq!(r.shard.tcp_urgent_mark(conn), Ok(Some(0)));
    assert_eq!(r.shard.tcp_recv_urgent(conn, false), Ok(Some(b'X')));
    assert!(!r.shard.readiness(conn).urgent);

    // A connection nobody accepted yet has no owner to signal.
    let ours = handshake(&mut r, 42001);
    r.segment(&urgent_segment(42001, ours, 1001, 4), b"defY");
    r.shard.take_urgent(&mut signalled);
    assert_eq!(signalled, [conn], "nothing new");
    let (later, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert!(r.shard.readiness(later).urgent, "but the byte is there once accepted");
}

#[test]
fn send_urgent_marks_the_segment() {
    let mut r = Rig::new(|_| {});
    handshake(&mut r, 43000);
    let (conn, _) = r.shard.tcp_accept(r.listener).unwrap();
    assert_eq!(r.shard.tcp_send_urgent(conn, b"!"), Ok(1));
    r.shard.flush(r.now);
    let out = r.replies();
    assert_eq!(out.len(), 1);
    assert!(out[0].flags.contains(TcpFlags::URG));
    assert_eq!((out[0].payload_len, out[0].urgent_at, out[0].dst_port), (1, 1, 43000));
}
