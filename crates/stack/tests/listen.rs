//! A listener on the wire (RFC 9293 section 3.10.7.2, state LISTEN, with and without SYN
//! cookies). The test plays the peer with hand-built segments (`testkit::fuzzing::Rig`).

use testkit::fuzzing::{base, Rig, PORT};
use wire::{TcpFlags, TcpRepr};

/// SYN cookies for every SYN (the half-open limit is 0), or none.
fn rig(cookies: bool) -> Rig {
    Rig::new(|cfg| {
        if cookies {
            cfg.syn_backlog = 0;
        }
    })
}

#[test]
fn rfc9293_listen_ignores_any_segment_with_rst() {
    for cookies in [false, true] {
        let mut r = rig(cookies);
        let sockets = r.shard.socket_count();
        // "first check for an RST: an incoming RST segment could not be valid ... ignored";
        // a SYN that also carries RST is no exception (Linux drops it too).
        for flags in [TcpFlags::RST, TcpFlags::SYN | TcpFlags::RST, TcpFlags::SYN | TcpFlags::RST | TcpFlags::ACK] {
            let ack = flags.contains(TcpFlags::ACK).then_some(7777);
            r.segment(&TcpRepr { max_seg_size: Some(1460), ..base(1000, ack, flags) }, &[]);
            assert_eq!(r.replies(), [], "{flags:?}, cookies {cookies}");
        }
        assert_eq!(r.shard.socket_count(), sockets, "a half-open connection was made");
        let stats = *r.shard.stats();
        assert_eq!((stats.tcp_passive_opens, stats.tcp_syncookies_sent), (0, 0));
        // A plain SYN is still answered.
        r.segment(&TcpRepr { max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) }, &[]);
        let synack = r.replies();
        assert_eq!(synack.len(), 1);
        assert_eq!(synack[0].flags, TcpFlags::SYN | TcpFlags::ACK);
        assert_eq!(synack[0].ack_number, Some(1001));
    }
}

#[test]
fn listen_discards_a_syn_that_carries_fin_as_linux_does() {
    for cookies in [false, true] {
        let mut r = rig(cookies);
        let sockets = r.shard.socket_count();
        let flags = TcpFlags::SYN | TcpFlags::FIN;
        r.segment(&TcpRepr { max_seg_size: Some(1460), ..base(1000, None, flags) }, &[]);
        assert_eq!(r.replies(), [], "cookies {cookies}");
        assert_eq!(r.shard.socket_count(), sockets, "a half-open connection was made");
        let stats = *r.shard.stats();
        assert_eq!((stats.tcp_passive_opens, stats.tcp_syncookies_sent), (0, 0));
    }
}

#[test]
fn rfc9293_listen_drops_segments_without_ack_and_resets_those_with_one() {
    for cookies in [false, true] {
        let mut r = rig(cookies);
        let sockets = r.shard.socket_count();
        // "fourth other text or control: any other control or text-bearing segment (not
        // containing SYN) must have an ACK ... drop the segment and return" (Linux: the same).
        r.segment(&base(1000, None, TcpFlags::FIN), &[]);
        r.segment(&base(1000, None, TcpFlags::PSH), b"data without an ACK");
        r.segment(&base(1000, None, TcpFlags::empty()), &[]);
        r.segment(&base(1000, None, TcpFlags::FIN | TcpFlags::PSH), b"and a FIN");
        assert_eq!(r.replies(), [], "cookies {cookies}");
        assert_eq!(r.shard.socket_count(), sockets);
        // "second check for an ACK: any acknowledgment is bad ... <SEQ=SEG.ACK><CTL=RST>", here
        // once no SYN cookie matches it.
        r.segment(&base(1000, Some(5555), TcpFlags::ACK), b"x");
        let rst = r.replies();
        assert_eq!(rst.len(), 1);
        assert_eq!((rst[0].flags, rst[0].seq_number, rst[0].ack_number), (TcpFlags::RST, 5555, None));
    }
}

#[test]
fn rfc9293_closed_port_still_resets_segments_without_ack() {
    // Without a listener the port is CLOSED (3.10.7.1): <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
    let mut r = rig(false);
    r.segment(&TcpRepr { dst_port: PORT + 1, ..base(1000, None, TcpFlags::FIN) }, &[]);
    let rst = r.replies();
    assert_eq!(rst.len(), 1);
    assert_eq!((rst[0].flags, rst[0].seq_number, rst[0].ack_number), (TcpFlags::RST | TcpFlags::ACK, 0, Some(1001)));
}

/// While another process waits to take the NIC's queue over (a reload's new worker or master:
/// `Nic::successor_waits`), a SYN that finds no listener is left unanswered, counted, so that its
/// retransmission reaches the successor; a SYN to a listener is still answered, and so is any
/// other segment to a closed port. Without a successor the port refuses the SYN with a RST.
#[test]
fn a_syn_to_a_closed_port_is_left_for_a_successor_waiting_for_the_queue() {
    let mut r = rig(false);
    let syn = |port| TcpRepr { dst_port: port, max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) };
    r.segment(&syn(PORT + 1), &[]);
    let rst = r.replies();
    assert_eq!(rst.len(), 1, "no successor: refused");
    assert_eq!(rst[0].flags, TcpFlags::RST | TcpFlags::ACK);

    r.shard.nic_mut().set_successor_waits(true);
    // The NIC's answer holds 10 ms: the next look is due.
    r.now += 10_000_000;
    r.segment(&syn(PORT + 1), &[]);
    assert_eq!(r.replies(), [], "a successor waits: no RST");
    assert_eq!(r.shard.stats().tcp_syns_left_unanswered, 1);
    r.segment(&TcpRepr { dst_port: PORT + 1, ..base(5000, Some(5555), TcpFlags::ACK) }, &[]);
    let rst = r.replies();
    assert_eq!(rst.len(), 1, "only SYNs are left: an ACK to a closed port is still reset");
    assert_eq!((rst[0].flags, rst[0].seq_number), (TcpFlags::RST, 5555));
    r.segment(&syn(PORT), &[]);
    let synack = r.replies();
    assert_eq!(synack.len(), 1, "the listener still answers");
    assert_eq!(synack[0].flags, TcpFlags::SYN | TcpFlags::ACK);

    r.shard.nic_mut().set_successor_waits(false);
    r.now += 10_000_000;
    r.segment(&TcpRepr { src_port: 40001, ..syn(PORT + 1) }, &[]);
    assert_eq!(r.replies().len(), 1, "the successor gone: refused again");
    assert_eq!(r.shard.stats().tcp_syns_left_unanswered, 1);
}

/// A port whose last listener closed less than a second ago leaves SYNs unanswered (a reload's
/// old process closing its listeners a moment before its successor marks that it waits); then
/// the port refuses them again, as Linux does at once.
#[test]
fn a_syn_in_the_second_after_its_listener_closed_is_left_unanswered() {
    let mut r = rig(false);
    let syn = |src_port| TcpRepr { src_port, max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) };
    r.shard.close(r.listener).unwrap();
    r.segment(&syn(40001), &[]);
    assert_eq!(r.replies(), [], "closed a moment ago: no RST");
    r.now += 999_000_000;
    r.segment(&syn(40002), &[]);
    assert_eq!(r.replies(), [], "still within the second");
    assert_eq!(r.shard.stats().tcp_syns_left_unanswered, 2);
    r.now += 1_000_000;
    r.segment(&syn(40003), &[]);
    let rst = r.replies();
    assert_eq!(rst.len(), 1, "a second on: refused");
    assert_eq!(rst[0].flags, TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(r.shard.stats().tcp_syns_left_unanswered, 2);
}

/// SO_REUSEPORT (Linux): listeners that all set it share an address and the connections are
/// spread over them by the 4-tuple; one that does not set it is refused (EADDRINUSE); when a
/// member closes, the others take every new connection.
#[test]
fn reuseport_listeners_share_the_connections_of_their_address() {
    use std::net::{Ipv4Addr, SocketAddr};
    let mut r = rig(false);
    let addr = SocketAddr::new(Ipv4Addr::new(10, 0, 0, 1).into(), 8080);
    let a = r.shard.tcp_listen_with(addr, 64, false, true).unwrap();
    let b = r.shard.tcp_listen_with(addr, 64, false, true).unwrap();
    assert_eq!(r.shard.tcp_listen_with(addr, 64, false, false), Err(stack::shard::Errno::EADDRINUSE));
    let connect = |r: &mut Rig, port: u16| {
        r.segment(&TcpRepr { src_port: port, dst_port: 8080, ..base(1000, None, TcpFlags::SYN) }, &[]);
        let synack = r.replies();
        assert_eq!(synack.len(), 1, "port {port}");
        let ack = base(1001, Some(synack[0].seq_number.wrapping_add(1)), TcpFlags::ACK);
        r.segment(&TcpRepr { src_port: port, dst_port: 8080, ..ack }, &[]);
    };
    for port in 50000..50040 {
        connect(&mut r, port);
    }
    let accepted = |r: &mut Rig, l| std::iter::from_fn(|| r.shard.tcp_accept(l).ok()).count();
    let (on_a, on_b) = (accepted(&mut r, a), accepted(&mut r, b));
    assert_eq!(on_a + on_b, 40);
    assert!(on_a > 0 && on_b > 0, "spread over both: {on_a} / {on_b}");
    r.shard.close(a).unwrap();
    for port in 51000..51010 {
        connect(&mut r, port);
    }
    assert_eq!(accepted(&mut r, b), 10, "the remaining member takes all");
}

/// Of SO_REUSEPORT listeners in one shard, only those the application waits on get connections
/// (a worker process that inherited its siblings' listeners serves its own).
#[test]
fn reuseport_connections_go_to_the_listeners_the_application_waits_on() {
    use std::net::{Ipv4Addr, SocketAddr};
    let mut r = rig(false);
    let addr = SocketAddr::new(Ipv4Addr::new(10, 0, 0, 1).into(), 8081);
    let mine = r.shard.tcp_listen_with(addr, 64, false, true).unwrap();
    let sibling = r.shard.tcp_listen_with(addr, 64, false, true).unwrap();
    r.shard.tcp_listener_watched(mine);
    for port in 52000..52020 {
        r.segment(&TcpRepr { src_port: port, dst_port: 8081, ..base(1000, None, TcpFlags::SYN) }, &[]);
        let synack = r.replies();
        let ack = base(1001, Some(synack[0].seq_number.wrapping_add(1)), TcpFlags::ACK);
        r.segment(&TcpRepr { src_port: port, dst_port: 8081, ..ack }, &[]);
    }
    assert_eq!(std::iter::from_fn(|| r.shard.tcp_accept(mine).ok()).count(), 20);
    assert!(r.shard.tcp_accept(sibling).is_err());
}

/// A SYN from `port` answered with a cookie; returns the ACK that completes its handshake.
fn cookie_handshake(r: &mut Rig, port: u16) -> TcpRepr {
    r.segment(&TcpRepr { src_port: port, max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) }, &[]);
    let synack = r.replies();
    assert_eq!(synack.len(), 1);
    TcpRepr { src_port: port, ..base(1001, Some(synack[0].seq_number.wrapping_add(1)), TcpFlags::ACK) }
}

/// Whether `ack` (a handshake's last ACK) made a connection; else it must have been reset.
fn taken(r: &mut Rig, ack: &TcpRepr) -> bool {
    r.segment(ack, &[]);
    let answers = r.replies();
    if r.shard.tcp_accept(r.listener).is_ok() {
        assert_eq!(answers, []);
        return true;
    }
    let rst: Vec<_> = answers.iter().map(|a| (a.flags, a.seq_number)).collect();
    assert_eq!(rst, [(TcpFlags::RST, ack.ack_number.unwrap())]);
    false
}

/// Linux checks an ACK to a listener for a SYN cookie only within TCP_SYNCOOKIE_VALID (2
/// minutes) of the listener's last cookie (`tcp_synq_no_recent_overflow`); otherwise it is a
/// bare ACK to a listener, answered with a RST, and no cookie check is counted. A listener that
/// never sent one takes no cookie, even a valid one (here: the same cookie a listener with the
/// same secret made).
#[test]
fn a_listener_that_sent_no_cookie_resets_a_cookie_ack() {
    let mut flooded = rig(true);
    let ack = cookie_handshake(&mut flooded, 40000);
    let mut calm = rig(false);
    assert!(!taken(&mut calm, &ack));
    let s = *calm.shard.stats();
    assert_eq!((s.tcp_syncookies_ok, s.tcp_syncookies_failed, s.tcp_passive_opens), (0, 0, 0));
    // The listener that sent it takes it.
    assert!(taken(&mut flooded, &ack));
    assert_eq!(flooded.shard.stats().tcp_syncookies_ok, 1);
}

#[test]
fn a_cookie_ack_is_checked_only_within_two_minutes_of_the_last_cookie_sent() {
    const SEC: u64 = 1_000_000_000;
    // Within the window: taken (the cookie itself is good for 64 to 128 s).
    let mut r = rig(true);
    let ack = cookie_handshake(&mut r, 40000);
    r.now += 119 * SEC;
    assert!(taken(&mut r, &ack));
    // Past it, the same (still valid) cookie is reset, and not counted as a failed check.
    let mut r = rig(true);
    let ack = cookie_handshake(&mut r, 40000);
    r.now += 121 * SEC;
    assert!(!taken(&mut r, &ack));
    assert_eq!(r.shard.stats().tcp_syncookies_failed, 0);
    // A cookie sent to anyone opens the window again.
    let _ = cookie_handshake(&mut r, 40001);
    assert!(taken(&mut r, &ack));
}

#[test]
fn linux_a_cookie_syn_ack_goes_once_per_syn_and_is_never_retransmitted() {
    // Linux (`tcp_conn_request` with `want_cookie`): one SYN-ACK per SYN received while the SYN
    // queue is full, and no state, so nothing retransmits it. A flood whose source ports wrap
    // (hping3 increments them) hits the half-open connections again: those answer for
    // themselves and retransmit their own SYN-ACKs, which are no cookies.
    const SEC: u64 = 1_000_000_000;
    let mut r = Rig::new(|cfg| cfg.syn_backlog = 4);
    let (mut syns, mut answers) = (0, 0);
    for wrap in 0..3u32 {
        for p in 0..20u16 {
            let seq = 1000 + wrap * 7919 + u32::from(p) * 13;
            let syn = TcpRepr { src_port: 40000 + p, max_seg_size: Some(1460), ..base(seq, None, TcpFlags::SYN) };
            r.segment(&syn, &[]);
            syns += 1;
            answers += r.replies().len();
        }
    }
    let s = *r.shard.stats();
    assert_eq!((s.tcp_passive_opens, s.tcp_syncookies_sent), (4, 3 * 16));
    assert!(answers <= syns, "{answers} answers to {syns} SYNs");
    // A minute and more: only the 4 half-open connections retransmit (Linux's 5 SYN-ACK retries).
    let mut later = 0;
    for _ in 0..100 {
        r.now += SEC;
        r.shard.poll(r.now);
        later += r.replies().len();
    }
    assert_eq!(later, 4 * 5);
    assert_eq!(r.shard.stats().tcp_syncookies_sent, 3 * 16);
}
