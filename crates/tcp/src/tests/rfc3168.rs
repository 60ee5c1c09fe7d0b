//! Explicit Congestion Notification (RFC 3168) with Linux's modes (`tcp_ecn`): negotiation on
//! the SYNs, ECT(0) on new data only, CE echoed with ECE until CWR, and the sender's reduction
//! once per window of data.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Connection, Ecn, State, SECOND};

const ECN_SETUP: TcpFlags = TcpFlags::from_bits(TcpFlags::ECE.bits() | TcpFlags::CWR.bits());

/// A passive connection from a peer's SYN with `flags` added; the SYN-ACK it answered with.
fn accepted(cfg: &Config, flags: TcpFlags) -> (Connection, Seg) {
    let syn = TcpRepr { flags: TcpFlags::SYN | flags, ..peer_syn(cfg) };
    let mut c = Connection::accept(cfg, &syn, ISS, T0);
    let synack = poll_one(&mut c, T0);
    (c, synack)
}

/// An established ECN connection (we accepted an ECN-setup SYN), options off.
/// An ECN connection under NewReno, whose halving the numbers below assume (CUBIC's ECE
/// response is its loss response, beta 0.7, as on Linux).
fn ecn_established() -> (Connection, Instant) {
    let cfg = Config { nodelay: true, congestion: crate::CongestionAlgorithm::NewReno, ..plain() };
    let (mut c, _) = accepted(&cfg, ECN_SETUP);
    feed(&mut c, T0, ack(PISS + 1, ISS + 1, 65535));
    assert_eq!(c.state(), State::Established);
    (c, T0)
}

type Instant = crate::Instant;

/// A data segment from the peer with `flags` added.
fn data_with(seq: u32, ack: u32, len: usize, flags: TcpFlags) -> TcpRepr {
    let d = data(seq, ack, len);
    TcpRepr { flags: d.flags | flags, ..d }
}

/// Feeds a data segment that arrived with CE in its IP header if `ce`.
fn feed_ce(c: &mut Connection, now: Instant, repr: TcpRepr, ce: bool) {
    let payload: Vec<u8> = (0..repr.payload_len).map(|i| pattern(repr.seq_number.wrapping_add(i as u32))).collect();
    c.handle_segment_ce(now, &repr, &payload, ce);
}

#[test]
fn rfc3168_6_1_1_an_ecn_setup_syn_is_answered_with_ece_alone() {
    // Linux's default (tcp_ecn = 2) accepts when asked.
    let (_, synack) = accepted(&plain(), ECN_SETUP);
    assert_eq!(synack.flags(), TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE);
    assert!(!synack.ect, "a SYN-ACK is never ECN-capable (section 6.1.1)");
    let (_, synack) = accepted(&Config { ecn: Ecn::On, ..plain() }, ECN_SETUP);
    assert_eq!(synack.flags(), TcpFlags::SYN | TcpFlags::ACK | TcpFlags::ECE);
    // Not when ECN is off, nor for a SYN that is no ECN-setup SYN.
    let (_, synack) = accepted(&Config { ecn: Ecn::Off, ..plain() }, ECN_SETUP);
    assert_eq!(synack.flags(), TcpFlags::SYN | TcpFlags::ACK);
    for half in [TcpFlags::ECE, TcpFlags::CWR, TcpFlags::empty()] {
        let (_, synack) = accepted(&plain(), half);
        assert_eq!(synack.flags(), TcpFlags::SYN | TcpFlags::ACK, "{half:?}");
    }
}

#[test]
fn rfc3168_6_1_1_we_ask_in_our_syn_only_when_ecn_is_on() {
    for (mode, flags) in [(Ecn::On, TcpFlags::SYN | ECN_SETUP), (Ecn::Accept, TcpFlags::SYN), (Ecn::Off, TcpFlags::SYN)]
    {
        let mut c = Connection::connect(&Config { ecn: mode, ..plain() }, LP, RP, ISS, T0);
        let syn = poll_one(&mut c, T0);
        assert_eq!(syn.flags(), flags, "{mode:?}");
        assert!(!syn.ect);
    }
}

#[test]
fn rfc3168_6_1_1_only_a_syn_ack_with_ece_alone_agrees() {
    for (answer, agreed) in [
        (TcpFlags::ECE, true),
        (TcpFlags::empty(), false),
        (ECN_SETUP, false), // a reflected ECN-setup SYN is no agreement
    ] {
        let cfg = Config { ecn: Ecn::On, nodelay: true, ..plain() };
        let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
        poll_one(&mut c, T0);
        c.handle_segment(
            T0,
            &TcpRepr { flags: TcpFlags::SYN | answer, ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) },
            &[],
        );
        poll_one(&mut c, T0);
        c.send(b"data").unwrap();
        assert_eq!(poll_one(&mut c, T0).ect, agreed, "{answer:?}");
    }
}

#[test]
fn rfc3168_6_1_1_1_a_syn_sent_again_does_not_ask() {
    let mut c = Connection::connect(&Config { ecn: Ecn::On, ..plain() }, LP, RP, ISS, T0);
    assert!(poll_one(&mut c, T0).has(ECN_SETUP));
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let again = poll_one(&mut c, t);
    assert_eq!(again.flags(), TcpFlags::SYN);
    // A SYN-ACK to the first SYN still agrees.
    c.handle_segment(
        t,
        &TcpRepr { flags: TcpFlags::SYN | TcpFlags::ECE, ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) },
        &[],
    );
    poll_one(&mut c, t);
    c.send(b"x").unwrap();
    assert!(poll_one(&mut c, t).ect);
}

#[test]
fn rfc3168_6_1_2_only_new_data_is_ect() {
    let (mut c, now) = ecn_established();
    c.send(&[7; 100]).unwrap();
    let d = poll_one(&mut c, now);
    assert!(d.ect && d.len() == 100, "new data");
    // Our pure ACK of the peer's data (delayed) is not ECN-capable (section 6.1.4).
    feed(&mut c, now, data(PISS + 1, ISS + 1, 10));
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let a = poll_one(&mut c, t);
    assert!(a.len() == 0 && a.ack() == Some(PISS + 11) && !a.ect, "pure ACK");
    // A retransmission after an RTO is not (section 6.1.5).
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let r = poll_one(&mut c, t);
    assert!(r.seq() == ISS + 1 && r.len() == 100 && !r.ect, "retransmission");
    // A zero-window probe is not.
    feed(&mut c, t, ack(PISS + 11, ISS + 101, 0));
    c.send(&[8; 10]).unwrap();
    poll_none(&mut c, t);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let probe = poll_one(&mut c, t);
    assert!(probe.seq() == ISS + 100 && probe.len() == 0 && !probe.ect, "window probe");
    // New data is again.
    feed(&mut c, t, ack(PISS + 11, ISS + 101, 1000));
    let d = poll_one(&mut c, t);
    assert!(d.ect && d.len() == 10);
    // A FIN without data is not.
    c.shutdown_write().unwrap();
    let fin = poll_one(&mut c, t);
    assert!(fin.has(TcpFlags::FIN) && fin.len() == 0 && !fin.ect);
}

#[test]
fn rfc3168_6_1_3_ce_is_echoed_with_ece_until_the_peers_cwr() {
    let (mut c, now) = ecn_established();
    // CE on data: an ACK at once (not delayed), with ECE.
    feed_ce(&mut c, now, data(PISS + 1, ISS + 1, 10), true);
    let a = poll_one(&mut c, now);
    assert_eq!((a.flags(), a.ack()), (TcpFlags::ACK | TcpFlags::ECE, Some(PISS + 11)));
    // Every segment carries ECE until the peer's CWR: the next ACK, and our data.
    feed_ce(&mut c, now, data(PISS + 11, ISS + 1, 10), false);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    assert!(poll_one(&mut c, t).has(TcpFlags::ECE));
    c.send(b"reply").unwrap();
    assert!(poll_one(&mut c, t).has(TcpFlags::ECE));
    // CWR on a pure ACK does not count (Linux looks for it on data only).
    feed(&mut c, t, seg(PISS + 21, Some(ISS + 6), TcpFlags::ACK | TcpFlags::CWR, 65535));
    c.send(b"more").unwrap();
    assert!(poll_one(&mut c, t).has(TcpFlags::ECE));
    // CWR on data ends it, and is acknowledged at once.
    feed(&mut c, t, data_with(PISS + 21, ISS + 10, 10, TcpFlags::CWR));
    let a = poll_one(&mut c, t);
    assert_eq!((a.flags(), a.ack()), (TcpFlags::ACK, Some(PISS + 31)));
    // CE and CWR on one segment: CWR first, then the new CE.
    feed_ce(&mut c, t, data_with(PISS + 31, ISS + 10, 10, TcpFlags::CWR), true);
    assert!(poll_one(&mut c, t).has(TcpFlags::ECE));
}

#[test]
fn rfc3168_ce_and_ece_mean_nothing_without_ecn() {
    let cfg = Config { nodelay: true, ..plain() };
    let (mut c, _) = accepted(&cfg, TcpFlags::empty());
    feed(&mut c, T0, ack(PISS + 1, ISS + 1, 65535));
    feed_ce(&mut c, T0, data(PISS + 1, ISS + 1, 10), true);
    c.send(&[1; 1000]).unwrap();
    let d = poll_one(&mut c, T0);
    assert!(!d.has(TcpFlags::ECE) && !d.ect);
    let cwnd = c.info().cwnd;
    feed(&mut c, T0, seg(PISS + 11, Some(ISS + 501), TcpFlags::ACK | TcpFlags::ECE, 65535));
    assert!(c.info().cwnd >= cwnd && c.info().ssthresh == u32::MAX, "ECE without ECN is no congestion signal");
}

#[test]
fn rfc3168_6_1_2_ece_reduces_the_window_once_per_window_and_the_next_new_data_has_cwr() {
    let (mut c, now) = ecn_established();
    let mss = c.info().snd_mss;
    c.send(&vec![1; 30 * mss as usize]).unwrap();
    assert_eq!(poll_all(&mut c, now).len(), 10, "the initial window");
    let acking = |segments: u32, flags: TcpFlags| seg(PISS + 1, Some(ISS + 1 + segments * mss), flags, 65535);
    let ece = TcpFlags::ACK | TcpFlags::ECE;
    // The first ECE: the window is reduced as for a loss, to half the flight.
    feed(&mut c, now, acking(2, ece));
    assert_eq!((c.info().cwnd, c.info().ssthresh), (5 * mss, 5 * mss));
    poll_none(&mut c, now); // 8 segments in flight
                            // More ECE for data of that window: no further reduction. The first new segment says
                            // CWR, the ones after it do not; all are ECN-capable.
    feed(&mut c, now, acking(6, ece));
    assert_eq!(c.info().ssthresh, 5 * mss);
    let sent = poll_all(&mut c, now);
    assert!(!sent.is_empty() && sent.iter().all(|s| s.ect && s.len() > 0));
    assert!(sent[0].has(TcpFlags::CWR) && sent[1..].iter().all(|s| !s.has(TcpFlags::CWR)));
    feed(&mut c, now, acking(10, ece));
    assert_eq!(c.info().ssthresh, 5 * mss);
    assert!(poll_all(&mut c, now).iter().all(|s| !s.has(TcpFlags::CWR)));
    // An ACK beyond what was sent at the reduction ends its window: ECE counts again.
    feed(&mut c, now, acking(11, TcpFlags::ACK));
    let sent_up_to = (ISS + 1 + 11 * mss) + c.info().bytes_in_flight;
    feed(&mut c, now, acking(12, ece));
    assert!(c.info().ssthresh < 5 * mss, "a new window, a new reduction");
    feed(&mut c, now, seg(PISS + 1, Some(sent_up_to), TcpFlags::ACK, 65535));
    let next = poll_all(&mut c, now);
    assert!(next.first().is_some_and(|s| s.has(TcpFlags::CWR)), "{next:?}");
}

#[test]
fn rfc3168_6_1_2_ece_and_a_loss_in_one_window_reduce_once() {
    let (mut c, now) = ecn_established();
    let mss = c.info().snd_mss;
    c.send(&vec![1; 12 * mss as usize]).unwrap();
    assert_eq!(poll_all(&mut c, now).len(), 10);
    // The first segment is lost; the duplicate ACKs for the others carry ECE. The first
    // reduces the window (half of 10 segments); limited transmit sends the 2 segments left
    // (RFC 3042), so the flight is 12 segments when the third starts fast recovery.
    let dup = seg(PISS + 1, Some(ISS + 1), TcpFlags::ACK | TcpFlags::ECE, 65535);
    for _ in 0..3 {
        feed(&mut c, now, dup);
        poll_all(&mut c, now);
    }
    assert!(c.info().in_recovery, "three duplicate ACKs");
    assert_eq!(c.info().ssthresh, 5 * mss, "ECE and the loss of one window reduce it once");
}

#[test]
fn rfc3168_pair_ce_marks_slow_the_sender_without_a_loss() {
    // A asks for ECN; a router marks a few of A's data segments CE instead of dropping them.
    let cfg_a = Config { ecn: Ecn::On, ..Config::default() };
    let mut p = Pair::connected(&cfg_a, &Config::default());
    p.fate = Box::new(
        |dir, i, seg| {
            if dir == Dir::AtoB && seg.len() > 0 && i % 40 == 39 {
                Fate::MarkCe
            } else {
                Fate::Deliver
            }
        },
    );
    let data: Vec<u8> = (0..2_000_000).map(stream_byte).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    let ok = p.run_until(T0 + 100 * SECOND, |p| {
        while sent < data.len() {
            match p.a.send(&data[sent..]) {
                Ok(k) => sent += k,
                Err(_) => break,
            }
        }
        got.extend(read_all(p.b()));
        got.len() == data.len()
    });
    assert!(ok && got == data, "every byte, in order");
    let info = p.a.info();
    assert_eq!(info.total_retransmits, 0, "nothing was lost");
    assert!(info.ssthresh < u32::MAX, "the marks reduced the window");
    let a_to_b = p.sent(Dir::AtoB);
    assert!(a_to_b.iter().any(|s| s.flags.contains(TcpFlags::CWR)), "A said it reduced");
    assert!(p.sent(Dir::BtoA).iter().any(|s| s.flags.contains(TcpFlags::ECE)), "B echoed CE");
}
