//! Group 8: keepalive (RFC 1122 4.2.3.6, with Linux's idle/interval/count).

use wire::TcpFlags;

use super::harness::*;
use crate::{Config, Error, Event, Keepalive, State, SECOND};

fn ka() -> Keepalive {
    Keepalive { idle: 10 * SECOND, interval: SECOND, count: 3 }
}

#[test]
fn rfc1122_keepalive_is_off_by_default() {
    let (c, _) = established(&plain());
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc1122_keepalive_probes_after_idle_then_times_out() {
    let cfg = Config { keepalive: Some(ka()), ..plain() };
    let (mut c, now) = established(&cfg);
    assert_eq!(c.poll_timeout(), Some(now + 10 * SECOND));
    let mut times = Vec::new();
    while let Some(t) = c.poll_timeout() {
        c.handle_timeout(t);
        times.push((t - now) / SECOND);
        if c.state() == State::Established {
            let probe = poll_one(&mut c, t);
            // An ACK one below SND.UNA, no data: the peer must answer it with an ACK.
            assert_eq!((probe.flags(), probe.seq(), probe.len()), (TcpFlags::ACK, ISS, 0));
        }
    }
    // Probes at idle, idle + interval, idle + 2 intervals; dead after the third goes unanswered.
    assert_eq!(times, [10, 11, 12, 13]);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
    assert_eq!(c.recv(&mut [0; 4]), Err(Error::TimedOut));
}

#[test]
fn rfc1122_answered_keepalive_restarts_the_idle_time() {
    let cfg = Config { keepalive: Some(ka()), ..plain() };
    let (mut c, now) = established(&cfg);
    let t = now + 10 * SECOND;
    c.handle_timeout(t);
    poll_one(&mut c, t);
    c.handle_timeout(t + SECOND);
    poll_one(&mut c, t + SECOND);
    // The answer (an ACK at the peer's SND.NXT).
    let t2 = t + SECOND + 5 * MS;
    feed(&mut c, t2, ack(PISS + 1, ISS + 1, 65535));
    assert_eq!(c.poll_timeout(), Some(t2 + 10 * SECOND));
    // The count starts over too: three more probes before giving up.
    let mut probes = 0;
    while let Some(t) = c.poll_timeout() {
        c.handle_timeout(t);
        probes += poll_all(&mut c, t).len();
    }
    assert_eq!(probes, 3);
}

#[test]
fn rfc1122_keepalive_waits_while_data_is_outstanding() {
    let cfg = Config { keepalive: Some(ka()), ..plain() };
    let (mut c, now) = established(&cfg);
    c.send(b"data").unwrap();
    poll_one(&mut c, now);
    // The RTO runs first; the keepalive deadline just moves on while data is unacknowledged.
    let mut t = now;
    while t < now + 10 * SECOND + 1 {
        t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        for s in poll_all(&mut c, t) {
            assert_eq!(s.payload, b"data"); // retransmissions, never a keepalive probe
        }
    }
}

#[test]
fn rfc1122_keepalive_can_be_switched_on_and_off() {
    let (mut c, now) = established(&plain());
    c.set_keepalive(Some(ka()), now + SECOND);
    assert_eq!(c.poll_timeout(), Some(now + 11 * SECOND));
    c.set_keepalive(None, now + 2 * SECOND);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc1122_keepalive_over_a_pair() {
    // An idle connection stays up for hours while the peer answers, and fails when it vanishes.
    let cfg = Config { keepalive: Some(Keepalive { idle: 60 * SECOND, interval: 5 * SECOND, count: 4 }), ..plain() };
    let mut p = Pair::connected(&cfg, &plain());
    p.run_for(3 * 3600 * SECOND);
    assert_eq!(p.a.state(), State::Established);
    assert!(p.sent(Dir::AtoB).len() > 150); // a probe a minute
    let vanished = p.now;
    p.fate = Box::new(|_, _, _| Fate::Drop);
    p.run_until(vanished + 3600 * SECOND, |p| p.a.state() == State::Closed);
    assert_eq!(p.a.take_error(), Some(Error::TimedOut));
    // At most idle + count * interval after the last answer.
    assert!(p.now - vanished <= (60 + 4 * 5) * SECOND, "{}", (p.now - vanished) / SECOND);
}

#[test]
fn rfc1122_keepalive_stops_when_we_close_and_never_ends_fin_wait_2() {
    // After shutdown(SHUT_WR) the connection waits in FIN-WAIT-2 for as long as the peer
    // keeps sending: a keepalive deadline armed in ESTABLISHED must not end it.
    let cfg = Config { keepalive: Some(ka()), ..plain() };
    let (mut c, now) = established(&cfg);
    c.shutdown_write().unwrap();
    poll_one(&mut c, now);
    feed(&mut c, now, ack(PISS + 1, ISS + 2, 65535));
    assert_eq!(c.state(), State::FinWait2);
    assert_eq!(c.poll_timeout(), None);
    c.handle_timeout(now + 20 * SECOND);
    assert_eq!(c.state(), State::FinWait2);
    feed(&mut c, now + 20 * SECOND, data(PISS + 1, ISS + 2, 10));
    assert_eq!(c.recv_available(), 10);
}
