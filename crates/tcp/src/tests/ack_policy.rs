//! Group 3: when we ACK (RFC 1122 4.2.3.2, RFC 5681 4.2) and when we hold small segments
//! (Nagle, RFC 896 / RFC 1122 4.2.3.4; TCP_NODELAY).

use wire::TcpFlags;

use super::harness::*;
use crate::{Config, SECOND};

#[test]
fn rfc1122_delayed_ack_sent_when_the_timer_fires() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    poll_none(&mut c, now);
    assert_eq!(c.poll_timeout(), Some(now + 40 * MS));
    c.handle_timeout(now + 40 * MS);
    let a = poll_one(&mut c, now + 40 * MS);
    assert_eq!((a.flags(), a.ack()), (TcpFlags::ACK, Some(PISS + 101)));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc5681_every_second_full_sized_segment_acked_at_once() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1, 1460));
    poll_none(&mut c, now);
    feed(&mut c, now, data(PISS + 1461, ISS + 1, 1460));
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 2921));
    assert_eq!(c.poll_timeout(), None); // the delayed-ACK timer is gone with it
                                        // A third one waits again.
    feed(&mut c, now, data(PISS + 2921, ISS + 1, 1460));
    poll_none(&mut c, now);
}

#[test]
fn rfc5681_out_of_order_and_hole_filling_segments_acked_at_once() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1 + 500, ISS + 1, 500));
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 1)); // duplicate ACK
    feed(&mut c, now, data(PISS + 1, ISS + 1, 500)); // fills the hole
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 1001));
}

#[test]
fn rfc1122_ack_piggybacks_on_data() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    poll_none(&mut c, now);
    c.send(b"reply").unwrap();
    let d = poll_one(&mut c, now + MS);
    assert_eq!((d.ack(), d.payload.as_slice()), (Some(PISS + 101), &b"reply"[..]));
    // No delayed ACK left: only the retransmission timer runs.
    assert_eq!(c.poll_timeout(), Some(now + MS + c.info().rto));
}

#[test]
fn rfc896_nagle_holds_small_segments_while_data_is_unacked() {
    let (mut c, now) = established(&plain());
    c.send(b"first").unwrap();
    assert_eq!(poll_one(&mut c, now).payload, b"first");
    c.send(b"second").unwrap();
    c.send(b"third").unwrap();
    poll_none(&mut c, now); // small, and "first" is not acknowledged
    feed(&mut c, now + 10 * MS, ack(PISS + 1, ISS + 6, 65535));
    // Everything held goes out as one segment.
    assert_eq!(poll_one(&mut c, now + 10 * MS).payload, b"secondthird");
}

#[test]
fn rfc896_nagle_lets_full_segments_go() {
    let (mut c, now) = established(&plain());
    c.send(b"small").unwrap();
    poll_one(&mut c, now);
    c.send(&[1u8; 3000]).unwrap();
    let segs = poll_all(&mut c, now);
    // Two full segments; the 80-byte tail waits for the ACK.
    assert_eq!(segs.iter().map(|s| s.len()).collect::<Vec<_>>(), [1460, 1460]);
    feed(&mut c, now + 10 * MS, ack(PISS + 1, ISS + 1 + 5 + 2920, 65535));
    assert_eq!(poll_one(&mut c, now + 10 * MS).len(), 80);
}

#[test]
fn tcp_nodelay_sends_small_segments_at_once() {
    let cfg = Config { nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg);
    c.send(b"first").unwrap();
    poll_one(&mut c, now);
    c.send(b"second").unwrap();
    assert_eq!(poll_one(&mut c, now).payload, b"second");
    // And it can be switched off and on again (setsockopt).
    c.set_nodelay(false);
    c.send(b"third").unwrap();
    poll_none(&mut c, now);
    c.set_nodelay(true);
    assert_eq!(poll_one(&mut c, now).payload, b"third");
}

#[test]
fn rfc896_nagle_does_not_hold_the_fin() {
    let (mut c, now) = established(&plain());
    c.send(b"first").unwrap();
    poll_one(&mut c, now);
    c.send(b"tail").unwrap();
    c.shutdown_write().unwrap();
    let s = poll_one(&mut c, now);
    assert_eq!(s.payload, b"tail");
    assert!(s.has(TcpFlags::FIN));
}

#[test]
fn rfc1122_request_response_ping_pong_over_a_pair() {
    // Small requests and responses: each answer carries the ACK, no 40 ms stalls.
    let mut p = Pair::connected(&plain(), &plain());
    let start = p.now;
    for i in 0..20u8 {
        p.a.send(&[i; 10]).unwrap();
        assert!(p.run_until(p.now + SECOND, |p| p.b.as_ref().unwrap().recv_available() == 10));
        assert_eq!(read_all(p.b()), [i; 10]);
        p.b().send(&[i; 20]).unwrap();
        assert!(p.run_until(p.now + SECOND, |p| p.a.recv_available() == 20));
        assert_eq!(read_all(&mut p.a), [i; 20]);
    }
    // 20 round trips of 10 ms each.
    assert_eq!((p.now - start) / MS, 200);
}

/// The stack takes no frame buffer for a connection that says it has nothing to send: it says
/// so only when `poll_transmit` finds nothing (every `poll_all` checks that too), and not when
/// data, an owed ACK or a FIN waits.
#[test]
fn nothing_to_send_is_said_only_with_nothing_due() {
    let (mut c, now) = established(&plain());
    assert!(c.has_nothing_to_send());
    poll_none(&mut c, now);
    c.send(b"hello").unwrap();
    assert!(!c.has_nothing_to_send());
    assert_eq!(poll_one(&mut c, now).len(), 5);
    assert!(c.has_nothing_to_send());
    // Out of order: a duplicate ACK is owed at once.
    feed(&mut c, now, data(PISS + 101, ISS + 6, 100));
    assert!(!c.has_nothing_to_send());
    poll_one(&mut c, now);
    assert!(c.has_nothing_to_send());
    c.shutdown_write().unwrap();
    assert!(!c.has_nothing_to_send());
    assert!(poll_one(&mut c, now).has(TcpFlags::FIN));
}
