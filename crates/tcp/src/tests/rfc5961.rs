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
    // A SYN-ACK too, and one at RCV.NXT - 1 (the peer restarted with the same ISS).
    feed(&mut c, now, seg(PISS + 1, Some(ISS + 4), TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    feed(&mut c, now, seg(PISS, None, TcpFlags::SYN, 1000));
    assert_eq!(poll_one(&mut c, now).flags(), TcpFlags::ACK);
    assert_eq!(c.state(), State::Established);
    assert_eq!(c.info().bytes_in_flight, 3);
    // Also in the later states.
    c.shutdown_write().unwrap();
    poll_one(&mut c, now);
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
        for bad in [nxt + 1, (ISS + 1).wrapping_sub(70_000)] {
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
