//! Group 2: RTT estimation and the retransmission timer (RFC 6298), SYN retransmission.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Connection, Error, Event, Instant, State, SECOND};

/// Handshake where the SYN-ACK comes back after `rtt`.
fn established_after(cfg: &Config, rtt: u64) -> (Connection, Instant) {
    let mut c = Connection::connect(cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let now = T0 + rtt;
    let synack = TcpRepr { max_seg_size: Some(1000), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) };
    c.handle_segment(now, &synack, &[]);
    poll_one(&mut c, now);
    events(&mut c);
    (c, now)
}

#[test]
fn rfc6298_initial_rto_is_one_second() {
    let mut c = Connection::connect(&plain(), LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    assert_eq!(c.poll_timeout(), Some(T0 + SECOND));
    assert_eq!(c.info().rto, SECOND);
}

#[test]
fn rfc6298_first_sample_sets_srtt_and_rttvar() {
    let (c, _) = established_after(&plain(), 100 * MS);
    let info = c.info();
    assert_eq!((info.rtt, info.rttvar), (100 * MS, 50 * MS));
    // RTO = SRTT + max(G, 4 * RTTVAR) = 100 + 200 ms.
    assert_eq!(info.rto, 300 * MS);
}

#[test]
fn rfc6298_later_samples_are_smoothed() {
    let (mut c, now) = established_after(&plain(), 100 * MS);
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    // The next sample is 200 ms.
    let now = now + 200 * MS;
    feed(&mut c, now, ack(PISS + 1, ISS + 101, 65535));
    let info = c.info();
    // RTTVAR = 3/4 * 50 + 1/4 * |100 - 200| = 62.5; SRTT = 7/8 * 100 + 1/8 * 200 = 112.5.
    assert_eq!((info.rtt, info.rttvar), (112_500_000, 62_500_000));
    assert_eq!(info.rto, 112_500_000 + 4 * 62_500_000);
}

#[test]
fn rfc6298_rto_has_a_minimum_and_a_maximum() {
    let (c, _) = established_after(&plain(), MS);
    assert_eq!(c.info().rto, 200 * MS); // rto_min
    let cfg = Config { rto_max: 5 * SECOND, ..plain() };
    let (mut c, mut now) = established_after(&cfg, MS);
    c.send(&[1; 10]).unwrap();
    poll_one(&mut c, now);
    let mut intervals = Vec::new();
    for _ in 0..8 {
        let t = c.poll_timeout().unwrap();
        intervals.push((t - now) / MS);
        now = t;
        c.handle_timeout(now);
        poll_one(&mut c, now);
    }
    assert_eq!(intervals, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
}

#[test]
fn rfc6298_rto_doubles_on_each_timeout() {
    let (mut c, mut now) = established_after(&plain(), 100 * MS);
    c.send(&[1; 100]).unwrap();
    let first = poll_one(&mut c, now);
    assert_eq!(c.poll_timeout(), Some(now + 300 * MS));
    for (i, backoff) in [1u64, 2, 4, 8].iter().enumerate() {
        now = c.poll_timeout().unwrap();
        c.handle_timeout(now);
        let again = poll_one(&mut c, now);
        assert_eq!(again.seq(), first.seq());
        assert_eq!(again.payload, first.payload);
        assert_eq!(c.poll_timeout(), Some(now + 300 * MS * backoff * 2), "timeout {i}");
        assert_eq!(c.info().backoff as usize, i + 1);
    }
    // An ACK of new data: the backoff is over, the timer stops.
    feed(&mut c, now, ack(PISS + 1, ISS + 101, 65535));
    assert_eq!(c.info().backoff, 0);
    assert_eq!(c.poll_timeout(), None);
    assert_eq!(c.info().total_retransmits, 4);
}

#[test]
fn rfc6298_retransmits_the_oldest_unacked_segment() {
    let cfg = Config { nodelay: true, ..plain() };
    let (mut c, now) = established_after(&cfg, 10 * MS);
    c.send(&[9; 3000]).unwrap();
    let segs = poll_all(&mut c, now);
    assert_eq!(segs.iter().map(|s| s.len()).collect::<Vec<_>>(), [1000, 1000, 1000]);
    // The first is acknowledged: the timer restarts (RFC 6298 5.3).
    let t1 = now + 50 * MS;
    feed(&mut c, t1, ack(PISS + 1, ISS + 1001, 65535));
    let rto = c.info().rto;
    assert_eq!(c.poll_timeout(), Some(t1 + rto));
    c.handle_timeout(t1 + rto);
    let rtx = poll_one(&mut c, t1 + rto); // one segment: cwnd is one MSS after an RTO
    assert_eq!((rtx.seq(), rtx.len()), (ISS + 1001, 1000));
    assert_eq!(c.info().cwnd, 1000);
    // Its ACK lets the next one go (go-back-N, slow start from the loss window).
    feed(&mut c, t1 + rto + 10 * MS, ack(PISS + 1, ISS + 2001, 65535));
    let next = poll_all(&mut c, t1 + rto + 10 * MS);
    assert_eq!(next.iter().map(|s| s.seq()).collect::<Vec<_>>(), [ISS + 2001]);
}

#[test]
fn rfc6298_karn_no_sample_from_a_retransmitted_segment() {
    let (mut c, now) = established_after(&plain(), 100 * MS);
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    poll_one(&mut c, t);
    // An ACK long after: ambiguous, no sample; the RTO stays backed-off-free but unsampled.
    feed(&mut c, t + 5 * SECOND, ack(PISS + 1, ISS + 101, 65535));
    let info = c.info();
    assert_eq!((info.rtt, info.rttvar, info.rto), (100 * MS, 50 * MS, 300 * MS));
}

#[test]
fn rfc6298_timer_stops_when_everything_is_acked() {
    let (mut c, now) = established_after(&plain(), 100 * MS);
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    assert!(c.poll_timeout().is_some());
    feed(&mut c, now + 100 * MS, ack(PISS + 1, ISS + 101, 65535));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc6298_connection_times_out_after_retries() {
    let cfg = Config { retries2: 3, ..plain() };
    let (mut c, mut now) = established_after(&cfg, 100 * MS);
    c.send(&[1; 100]).unwrap();
    poll_one(&mut c, now);
    for _ in 0..3 {
        now = c.poll_timeout().unwrap();
        c.handle_timeout(now);
        assert_eq!(poll_all(&mut c, now).len(), 1);
    }
    now = c.poll_timeout().unwrap();
    c.handle_timeout(now);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
    poll_none(&mut c, now);
    assert_eq!(c.poll_timeout(), None);
    assert_eq!(c.send(b"x"), Err(Error::TimedOut));
    assert_eq!(Error::TimedOut.errno(), 110);
}

#[test]
fn rfc6298_syn_retransmitted_with_backoff_then_timed_out() {
    let cfg = plain(); // 6 SYN retries like Linux: 1 + 2 + 4 + 8 + 16 + 32 + 64 = 127 s
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let mut times = Vec::new();
    while let Some(t) = c.poll_timeout() {
        c.handle_timeout(t);
        times.push((t - T0) / SECOND);
        for s in poll_all(&mut c, t) {
            assert_eq!((s.flags(), s.seq()), (TcpFlags::SYN, ISS));
        }
    }
    assert_eq!(times, [1, 3, 7, 15, 31, 63, 127]);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
    assert_eq!(c.take_error(), Some(Error::TimedOut));
}

#[test]
fn rfc6298_synack_retransmitted_then_dropped() {
    let cfg = Config { synack_retries: 2, ..plain() };
    let mut c = Connection::accept(&cfg, &peer_syn(&cfg), ISS, T0);
    poll_one(&mut c, T0);
    let t1 = c.poll_timeout().unwrap();
    c.handle_timeout(t1);
    let again = poll_one(&mut c, t1);
    assert_eq!(again.flags(), TcpFlags::SYN | TcpFlags::ACK);
    let t2 = c.poll_timeout().unwrap();
    assert_eq!((t1 - T0, t2 - t1), (SECOND, 2 * SECOND));
    c.handle_timeout(t2);
    poll_one(&mut c, t2);
    c.handle_timeout(c.poll_timeout().unwrap());
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
}

#[test]
fn rfc6298_rto_is_3s_after_a_lost_syn_and_cwnd_one_segment() {
    let mut c = Connection::connect(&plain(), LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    c.handle_timeout(T0 + SECOND);
    poll_one(&mut c, T0 + SECOND);
    let now = T0 + SECOND + 50 * MS;
    let synack = TcpRepr { max_seg_size: Some(1000), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) };
    c.handle_segment(now, &synack, &[]);
    assert_eq!(c.state(), State::Established);
    let info = c.info();
    assert_eq!((info.rtt, info.rto), (0, 3 * SECOND));
    // RFC 5681 3.1: the initial window is one segment when the SYN was lost.
    assert_eq!(info.cwnd, 1000);
}
