//! Group 9: blind in-window attacks (RFC 5961): challenge ACKs for RSTs that are in the window
//! but not exact, for SYNs on a synchronized connection, and for ACKs outside the acceptable
//! range; the stack rate-limits them.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Connection, Event, State};

#[test]
fn rfc5961_in_window_rst_that_is_not_exact_gets_a_challenge_ack() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, seg(PISS + 1 + 100, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Established);
    assert!(c.challenge_ack_pending());
    let challenge = poll_one(&mut c, now);
    assert_eq!((challenge.flags(), challenge.seq(), challenge.ack()), (TcpFlags::ACK, ISS + 1, Some(PISS + 1)));
    assert_eq!(c.info().challenge_acks, 1);
    assert_eq!(events(&mut c), []);
    // The real peer answers the challenge with a RST at exactly the acknowledged number.
    feed(&mut c, now, seg(challenge.ack().unwrap(), None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::Reset, Event::Closed]);
}

#[test]
fn rfc5961_syn_on_a_synchronized_connection_gets_a_challenge_ack() {
    let (mut c, now) = established(&plain());
    c.send(b"abc").unwrap();
    poll_one(&mut c, now);
    // In the window (RFC 9293 would have reset the connection here).
    feed(&mut c, now, seg(PISS + 1 + 10, None, TcpFlags::SYN, 1000));
    let a = poll_one(&mut c, now);
    assert_eq!((a.flags(), a.seq(), a.ack()), (TcpFlags::ACK, ISS + 4, Some(PISS + 1)));
    assert_eq!(c.info().challenge_acks, 1);
    // A SYN-ACK too, and one at RCV.NXT - 1 (the peer restarted with the same ISS), each
    // after the challenge ACKs' rate limit.
    let limit = Config::default().invalid_ratelimit;
    let now = now + limit;
    feed(&mut c, now, seg(PISS + 1, Some(ISS + 4), TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    let now = now + limit;
    feed(&mut c, now, seg(PISS, None, TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.info().bytes_in_flight, 3);
    // Also in the later states.
    c.shutdown_write().unwrap();
    poll_one(&mut c, now);
    let now = now + limit;
    feed(&mut c, now, seg(PISS + 1 + 10, None, TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    assert_eq!(c.state(), State::FinWait1);
}

#[test]
fn rfc5961_ack_of_unsent_data_gets_a_challenge_ack_and_the_data_is_dropped() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1 + 5000, 100));
    assert_eq!(c.recv_available(), 0);
    let a = poll_one(&mut c, now);
    assert_eq!((a.flags(), a.ack()), (TcpFlags::ACK, Some(PISS + 1)));
    assert_eq!(c.info().challenge_acks, 1);
}

#[test]
fn rfc5961_ack_too_far_below_snd_una_gets_a_challenge_ack() {
    // The peer's window is 1000, so MAX.SND.WND is 1000.
    let cfg = Config { nodelay: true, ..plain() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let now = T0;
    let synack = TcpRepr { max_seg_size: Some(1000), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 1000) };
    c.handle_segment(now, &synack, &[]);
    poll_one(&mut c, now);
    for i in 1..=3 {
        c.send(&[1; 1000]).unwrap();
        poll_one(&mut c, now);
        feed(&mut c, now, ack(PISS + 1, ISS + 1 + 1000 * i, 1000));
    }
    // SND.UNA - MAX.SND.WND = ISS + 2001: an ACK of that is still acceptable (old)...
    feed(&mut c, now, data(PISS + 1, ISS + 2001, 10));
    assert_eq!(c.recv_available(), 10);
    // ...one of ISS + 1 is not: challenge ACK, data dropped.
    feed(&mut c, now, data(PISS + 11, ISS + 1, 10));
    assert_eq!(c.recv_available(), 10);
    assert_eq!(c.info().challenge_acks, 1);
    let a = poll_one(&mut c, now);
    assert_eq!(a.ack(), Some(PISS + 11));
}

#[test]
fn rfc5961_challenge_acks_can_be_rate_limited_by_the_stack() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, seg(PISS + 1 + 100, None, TcpFlags::RST, 0));
    assert!(c.challenge_ack_pending());
    c.cancel_challenge_ack(); // over the stack's budget
    poll_none(&mut c, now);
    assert_eq!(c.info().challenge_acks, 1); // still counted
                                            // An ACK that is due anyway is not cancelled with it.
    feed(&mut c, now, data(PISS + 1 + 500, ISS + 1, 10)); // out of order: ACK now
    feed(&mut c, now, seg(PISS + 1 + 100, None, TcpFlags::RST, 0));
    c.cancel_challenge_ack();
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 1));
}

#[test]
fn rfc5961_blind_rst_and_syn_attack_over_a_pair() {
    // An attacker who knows the ports but not the sequence numbers sprays RSTs and SYNs: the
    // connection survives, and data keeps flowing.
    let mut p = Pair::connected(&Config::default(), &Config::default());
    let now = p.now;
    for i in 0..2000u32 {
        let guess = i.wrapping_mul(2_147_483_647).wrapping_add(12345);
        let flags = if i % 2 == 0 { TcpFlags::RST } else { TcpFlags::SYN };
        let repr = TcpRepr { src_port: RP, dst_port: LP, ..seg(guess, None, flags, 0) };
        p.a.handle_segment(now, &repr, &[]);
    }
    assert_eq!(p.a.state(), State::Established);
    p.a.send(b"still here").unwrap();
    p.run_for(crate::SECOND);
    assert_eq!(read_all(p.b()), b"still here");
}

#[test]
fn rfc9293_ack_of_unsent_data_is_dropped_with_an_ack_in_every_synchronized_state() {
    // RFC 9293 3.10.7.4 fifth, RFC 5961 section 5.2: SEG.ACK > SND.NXT, or below
    // SND.UNA - MAX.SND.WND: send an ACK and drop the segment, its data and FIN included.
    for close in [false, true] {
        let (mut c, now) = established(&plain());
        c.send(b"abc").unwrap();
        poll_one(&mut c, now);
        if close {
            c.shutdown_write().unwrap(); // FIN-WAIT-1
            poll_one(&mut c, now);
        } else {
            feed(&mut c, now, seg(PISS + 1, Some(ISS + 1), TcpFlags::FIN, 1000)); // CLOSE-WAIT
            poll_one(&mut c, now);
        }
        let state = c.state();
        let nxt = c.info().bytes_in_flight + ISS + 1;
        let rcv = PISS + 1 + u32::from(!close);
        // Challenge ACKs are rate-limited per connection: each comes a limit after the last.
        let mut now = now;
        for bad in [nxt + 1, (ISS + 1).wrapping_sub(70_000)] {
            now += Config::default().invalid_ratelimit;
            let d = TcpRepr { flags: TcpFlags::ACK | TcpFlags::FIN, ..data(rcv, bad, 10) };
            feed(&mut c, now, d);
            assert_eq!(c.recv_available(), 0, "{state:?}, ACK {bad}");
            let a = poll_one(&mut c, now);
            assert_eq!((a.flags(), a.seq(), a.ack()), (TcpFlags::ACK, nxt, Some(rcv)), "{state:?}");
            assert_eq!(c.state(), state);
        }
        assert_eq!(c.info().bytes_in_flight + ISS + 1, nxt);
    }
}

#[test]
fn rfc9293_ack_above_snd_nxt_after_a_timeout_is_acceptable_if_it_was_sent() {
    // After an RTO, SND.NXT goes back to SND.UNA; an ACK of what had been sent before (the
    // original arrived, its ACK was late) acknowledges data that was sent, so it is taken.
    let (mut c, now) = established(&plain());
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    assert_eq!(poll_one(&mut c, t).seq(), ISS + 1);
    feed(&mut c, t, data(PISS + 1, ISS + 101, 10));
    assert_eq!(c.recv_available(), 10);
    assert_eq!(c.info().bytes_in_flight, 0);
}

#[test]
fn rfc5961_7_challenge_acks_are_limited_per_connection_as_in_linux() {
    // Linux 6.x: one challenge ACK per tcp_invalid_ratelimit (500 ms) per connection, RSTs and
    // SYNs alike (its global tcp_challenge_ack_limit is off by default since 6.0).
    let (mut c, now) = established(&plain());
    let limit = Config::default().invalid_ratelimit;
    feed(&mut c, now, seg(PISS + 1 + 100, None, TcpFlags::RST, 0));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    feed(&mut c, now + MS, seg(PISS + 1 + 200, None, TcpFlags::RST, 0));
    feed(&mut c, now + 2 * MS, seg(PISS + 1 + 10, None, TcpFlags::SYN, 1000));
    feed(&mut c, now + limit - MS, seg(PISS + 1 + 300, None, TcpFlags::RST, 0));
    poll_none(&mut c, now + limit - MS);
    assert_eq!(c.info().challenge_acks, 1);
    assert_eq!(c.counters().challenge_acks_skipped, 3, "counted (TCPACKSkippedChallenge)");
    // A limit after the last one: the next goes.
    feed(&mut c, now + limit, seg(PISS + 1 + 10, None, TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now + limit).flags(), TcpFlags::ACK);
    assert_eq!(c.state(), State::Established);
}

#[test]
fn rfc9293_out_of_window_segments_without_data_get_at_most_one_ack_per_limit() {
    // Linux's tcp_oow_rate_limited: the ACK to an unacceptable segment (or one PAWS rejects)
    // goes at most once per tcp_invalid_ratelimit if the segment has no data, always if it
    // has (two stacks that disagree about the window would otherwise ACK each other forever).
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    let far = PISS + 1 + 1_000_000;
    let ts = |r: TcpRepr, v: u32| TcpRepr { timestamp: Some((v, 0)), ..r };
    let answers = |c: &mut Connection, t, r| {
        feed(c, t, r);
        poll_all(c, t).len()
    };
    let acks: usize = (0..3).map(|i| answers(&mut c, now + i * MS, ts(ack(far, ISS + 1, 1000), 800))).sum();
    assert_eq!(acks, 1, "empty segments beyond the window");
    for i in 0..3 {
        feed(&mut c, now + 3 * MS + i * MS, ts(data(far, ISS + 1, 10), 800));
        assert_eq!(poll_one(&mut c, now + 3 * MS + i * MS).ack(), Some(PISS + 1), "data beyond the window");
    }
    // PAWS: the same two rules (TS.Recent is 777).
    let later = now + Config::default().invalid_ratelimit;
    let acks: usize = (0..2).map(|i| answers(&mut c, later + i * MS, ts(ack(PISS + 1, ISS + 1, 1000), 700))).sum();
    assert_eq!(acks, 1, "empty segments PAWS rejects");
    for i in 2..4 {
        feed(&mut c, later + i * MS, ts(data(PISS + 1, ISS + 1, 10), 700));
        assert_eq!(poll_one(&mut c, later + i * MS).ack(), Some(PISS + 1), "data PAWS rejects");
    }
    assert_eq!(c.recv_available(), 0);
}

#[test]
fn rfc5961_5_2_before_the_peer_acknowledged_data_an_ack_below_snd_una_is_too_old() {
    // Linux reaches back from SND.UNA by min(MAX.SND.WND, bytes acknowledged): on a
    // connection whose data nobody acknowledged yet, any ACK below SND.UNA gets a challenge
    // ACK and its data is dropped.
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS, 10));
    assert_eq!(c.recv_available(), 0);
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 1));
    assert_eq!(c.info().challenge_acks, 1);
    // Once 100 bytes were acknowledged, an ACK up to 100 below SND.UNA is only old.
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    feed(&mut c, now, ack(PISS + 1, ISS + 101, 65535));
    feed(&mut c, now, data(PISS + 1, ISS + 1, 10));
    assert_eq!(c.recv_available(), 10);
    let now = now + Config::default().invalid_ratelimit;
    feed(&mut c, now, data(PISS + 11, ISS, 10));
    assert_eq!(c.recv_available(), 10, "101 below: too old");
    assert_eq!(c.info().challenge_acks, 2);
}
