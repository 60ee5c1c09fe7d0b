//! Group 10: the compact TIME-WAIT entry, and the reply to segments for no connection.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{rst_for_unmatched, Config, Connection, State, TimeWait, TimeWaitAction, SECOND};

/// A connection we closed first, now in TIME-WAIT: (connection, now). Our last sequence number
/// is ISS + 2, the peer's RCV.NXT is PISS + 2.
fn in_time_wait(cfg: &Config) -> (Connection, u64) {
    let (mut c, now) = established(cfg);
    c.close(now);
    poll_one(&mut c, now);
    let fin = TcpRepr {
        timestamp: cfg.timestamps.then_some((800, 1000)),
        ..seg(PISS + 1, Some(ISS + 2), TcpFlags::FIN, 1000)
    };
    c.handle_segment(now, &fin, &[]);
    assert_eq!(c.state(), State::TimeWait);
    poll_one(&mut c, now);
    (c, now)
}

#[test]
fn rfc9293_time_wait_hands_over_to_a_compact_entry() {
    let (c, now) = in_time_wait(&plain());
    let mut tw = TimeWait::from(&c);
    assert_eq!(tw.deadline(), now + 60 * SECOND);
    assert_eq!((tw.local_port(), tw.remote_port()), (LP, RP));
    assert!(core::mem::size_of::<TimeWait>() <= 48);
    drop(c);
    // The peer's FIN again: ACK it, restart 2*MSL.
    let later = now + 30 * SECOND;
    let fin = seg(PISS + 1, Some(ISS + 2), TcpFlags::FIN, 1000);
    match tw.handle_segment(later, &fin) {
        TimeWaitAction::Ack(a) => {
            assert_eq!((a.flags, a.seq_number, a.ack_number), (TcpFlags::ACK, ISS + 2, Some(PISS + 2)));
            assert_eq!((a.src_port, a.dst_port), (LP, RP));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(tw.deadline(), later + 60 * SECOND);
    // RFC 1337: a RST does not end it. A bare old ACK needs no answer.
    assert_eq!(tw.handle_segment(later, &seg(PISS + 2, None, TcpFlags::RST, 0)), TimeWaitAction::Ignore);
    assert_eq!(tw.handle_segment(later, &ack(PISS + 2, ISS + 2, 1000)), TimeWaitAction::Ignore);
    // Data (there can be none after the FIN) is answered with an ACK.
    assert!(matches!(tw.handle_segment(later, &data(PISS + 2, ISS + 2, 10)), TimeWaitAction::Ack(_)));
}

#[test]
fn rfc9293_time_wait_reopens_for_a_newer_syn() {
    let (c, now) = in_time_wait(&plain());
    let mut tw = TimeWait::from(&c);
    // Without timestamps: a SYN above RCV.NXT may reopen (RFC 1122 4.2.2.13)...
    let syn = TcpRepr { max_seg_size: Some(1460), ..seg(PISS + 100_000, None, TcpFlags::SYN, 65535) };
    assert_eq!(tw.handle_segment(now, &syn), TimeWaitAction::Reopen);
    // ...an old one may not: it is answered with an ACK (a challenge).
    let old = seg(PISS, None, TcpFlags::SYN, 65535);
    assert!(matches!(tw.handle_segment(now, &old), TimeWaitAction::Ack(_)));
    // The new incarnation starts above what the old one sent.
    let iss = tw.next_iss();
    assert!(iss.wrapping_sub(ISS + 2) >= 65536);
    let mut fresh = Connection::accept(&plain(), &syn, iss, now);
    assert_eq!(poll_one(&mut fresh, now).seq(), iss);
}

#[test]
fn rfc6191_time_wait_reopen_by_timestamps() {
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let (c, now) = in_time_wait(&cfg);
    let mut tw = TimeWait::from(&c);
    // A newer TSval reopens even if the sequence number is lower.
    let syn = TcpRepr { timestamp: Some((900, 0)), ..seg(PISS.wrapping_sub(50_000), None, TcpFlags::SYN, 65535) };
    assert_eq!(tw.handle_segment(now, &syn), TimeWaitAction::Reopen);
    // An older TSval does not, even with a higher sequence number.
    let syn = TcpRepr { timestamp: Some((700, 0)), ..seg(PISS + 50_000, None, TcpFlags::SYN, 65535) };
    assert!(matches!(tw.handle_segment(now, &syn), TimeWaitAction::Ack(_)));
    // PAWS: an old duplicate is answered, not taken.
    let old = TcpRepr { timestamp: Some((700, 0)), ..seg(PISS + 1, Some(ISS + 2), TcpFlags::FIN, 1000) };
    match tw.handle_segment(now, &old) {
        TimeWaitAction::Ack(a) => assert_eq!(a.timestamp.map(|t| t.1), Some(800)),
        other => panic!("{other:?}"),
    }
    assert_eq!(tw.deadline(), now + 60 * SECOND); // not restarted by it
}

#[test]
fn rfc9293_time_wait_over_a_pair() {
    // The active closer hands over to a TimeWait entry; the peer's FIN retransmission (its
    // ACK was lost) is answered by the entry.
    let mut p = Pair::connected(&plain(), &plain());
    p.a.close(p.now);
    p.run_until(p.now + SECOND, |p| p.b.as_ref().unwrap().state() == State::CloseWait);
    let now = p.now;
    p.b().close(now);
    // Lose A's last ACK (of B's FIN).
    p.fate = Box::new(|dir, _, seg| {
        if dir == Dir::AtoB && seg.repr.flags == TcpFlags::ACK && seg.payload.is_empty() {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    });
    p.run_until(p.now + SECOND, |p| p.a.state() == State::TimeWait);
    let mut tw = TimeWait::from(&p.a);
    // B retransmits its FIN after its RTO.
    let t = p.b().poll_timeout().unwrap();
    p.b().handle_timeout(t);
    let fin = poll_all(p.b(), t).into_iter().find(|s| s.has(TcpFlags::FIN)).unwrap();
    let TimeWaitAction::Ack(a) = tw.handle_segment(t, &fin.repr) else { panic!() };
    p.b().handle_segment(t, &a, &[]);
    assert_eq!(p.b().state(), State::Closed);
}

#[test]
fn rfc9293_closed_state_rst_rules() {
    // An ACK-bearing segment: <SEQ=SEG.ACK><CTL=RST>.
    let s = data(500, 7777, 10);
    let r = rst_for_unmatched(&s, 10).unwrap();
    assert_eq!((r.flags, r.seq_number, r.ack_number), (TcpFlags::RST, 7777, None));
    assert_eq!((r.src_port, r.dst_port), (LP, RP));
    // A SYN: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>, the SYN counting one.
    let r = rst_for_unmatched(&seg(500, None, TcpFlags::SYN, 100), 0).unwrap();
    assert_eq!((r.flags, r.seq_number, r.ack_number), (TcpFlags::RST | TcpFlags::ACK, 0, Some(501)));
    // Data and FIN without an ACK.
    let r = rst_for_unmatched(&seg(u32::MAX - 1, None, TcpFlags::FIN, 100), 5).unwrap();
    assert_eq!(r.ack_number, Some(4));
    // A RST is never answered.
    assert_eq!(rst_for_unmatched(&seg(500, Some(1), TcpFlags::RST, 0), 0), None);
    // And the peer accepts the RST we send: a connection in SYN-SENT is refused by it.
    let cfg = plain();
    let mut c = Connection::connect(&cfg, RP, LP, ISS, T0);
    let syn = poll_one(&mut c, T0);
    let syn_to_us = TcpRepr { src_port: RP, dst_port: LP, ..syn.repr };
    let r = rst_for_unmatched(&syn_to_us, 0).unwrap();
    let back = TcpRepr { src_port: LP, dst_port: RP, ..r };
    c.handle_segment(T0, &back, &[]);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.take_error(), Some(crate::Error::ConnectionRefused));
}
