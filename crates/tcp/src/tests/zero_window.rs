//! Group 7: zero windows and the persist timer (RFC 9293 3.8.6.1), silly-window-syndrome
//! avoidance on both sides (RFC 9293 3.8.6.2), a window that never shrinks.

use wire::TcpFlags;

use super::harness::*;
use crate::{Config, Event, State, SECOND};

#[test]
fn rfc9293_zero_window_probed_with_backoff() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    c.send(b"waiting").unwrap();
    poll_none(&mut c, now);
    // The persist timer, from the RTO (200 ms), doubling.
    let mut t = now;
    let mut gaps = Vec::new();
    for _ in 0..5 {
        let next = c.poll_timeout().unwrap();
        gaps.push((next - t) / MS);
        t = next;
        c.handle_timeout(t);
        let probe = poll_one(&mut c, t);
        // Linux's probe: an ACK with an old sequence number, which the peer must answer.
        assert_eq!((probe.flags(), probe.seq(), probe.len()), (TcpFlags::ACK, ISS, 0));
        feed(&mut c, t + 10 * MS, ack(PISS + 1, ISS + 1, 0)); // still zero
        poll_none(&mut c, t + 10 * MS);
    }
    assert_eq!(gaps, [200, 400, 800, 1600, 3200]);
    assert_eq!(c.state(), State::Established);
    // The window opens: the data goes at once, the RTO replaces the persist timer.
    let t = t + 20 * MS;
    feed(&mut c, t, ack(PISS + 1, ISS + 1, 1000));
    let d = poll_one(&mut c, t);
    assert_eq!(d.payload, b"waiting");
    assert_eq!(c.poll_timeout(), Some(t + c.info().rto));
}

#[test]
fn rfc9293_unanswered_zero_window_probes_time_out() {
    let cfg = Config { retries2: 3, ..plain() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    c.send(b"x").unwrap();
    poll_none(&mut c, now);
    for _ in 0..3 {
        let t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        poll_one(&mut c, t);
    }
    c.handle_timeout(c.poll_timeout().unwrap());
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
}

#[test]
fn rfc1122_answered_zero_window_probes_go_on_forever() {
    let cfg = Config { retries2: 3, ..plain() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    c.send(b"x").unwrap();
    poll_none(&mut c, now);
    for _ in 0..10 {
        let t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        poll_one(&mut c, t);
        feed(&mut c, t, ack(PISS + 1, ISS + 1, 0));
    }
    assert_eq!(c.state(), State::Established);
    // The interval is capped by rto_max.
    let t = c.poll_timeout().unwrap();
    assert!(t - now < 10 * 120 * SECOND);
}

#[test]
fn rfc9293_sender_sws_avoidance_waits_for_a_useful_window() {
    let cfg = Config { nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg); // the peer offered 65535 once
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 500));
    c.send(&[1; 3000]).unwrap();
    // 500 bytes is neither a full segment nor half the largest window offered: wait.
    poll_none(&mut c, now);
    // Unless the persist timer says it is time (the override).
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let d = poll_one(&mut c, t);
    assert_eq!(d.len(), 500);
    // A window of half the largest ever offered is worth a segment.
    feed(&mut c, t, ack(PISS + 1, ISS + 501, 40000));
    assert_eq!(poll_all(&mut c, t).iter().map(|s| s.len()).sum::<usize>(), 2500);
}

#[test]
fn rfc9293_receiver_sws_avoidance_and_window_update_after_read() {
    let cfg = Config { rcv_buf: 10_000, ..plain() };
    let (mut c, now) = established(&cfg);
    let mut seq = PISS + 1;
    for _ in 0..10 {
        feed(&mut c, now, data(seq, ISS + 1, 1000));
        seq += 1000;
    }
    let last = poll_all(&mut c, now).pop().unwrap();
    assert_eq!((last.ack(), last.repr.window_len), (Some(seq), 0));
    // Reading a little does not open the window (not worth a segment): no update.
    let mut buf = [0u8; 4000];
    assert_eq!(c.recv(&mut buf[..100]), Ok(100));
    poll_none(&mut c, now);
    // Reading enough: a window update at once.
    assert_eq!(c.recv(&mut buf[..2000]), Ok(2000));
    let update = poll_one(&mut c, now);
    assert_eq!((update.ack(), update.repr.window_len), (Some(seq), 2100));
    // Small increments are not advertised while the window is open either.
    assert_eq!(c.recv(&mut buf[..500]), Ok(500));
    poll_none(&mut c, now);
    feed(&mut c, now, data(seq, ISS + 1, 10));
    c.handle_timeout(now + 40 * MS);
    let a = poll_one(&mut c, now + 40 * MS);
    assert_eq!(a.repr.window_len, 2090); // same right edge as before, not 2590
}

#[test]
fn rfc9293_window_never_shrinks() {
    let cfg = Config { rcv_buf: 20_000, ..plain() };
    let (mut c, now) = established(&cfg);
    let mut seq = PISS + 1;
    let mut edge = 0u32;
    let mut buf = [0u8; 700];
    for i in 0..200usize {
        let len = 300 + (i * 97) % 1100;
        if (c.info().rcv_wnd as usize) < len {
            read_all(&mut c);
            c.handle_timeout(now + 40 * MS);
        } else {
            feed(&mut c, now, data(seq, ISS + 1, len));
            seq += len as u32;
        }
        if i % 3 == 0 {
            let _ = c.recv(&mut buf[..(i * 31) % 700]);
        }
        if i % 2 == 0 {
            c.handle_timeout(now + 40 * MS);
        }
        for s in poll_all(&mut c, now) {
            let right = s.ack().unwrap() + u32::from(s.repr.window_len);
            assert!(right >= edge, "right edge moved left: {edge} -> {right}");
            edge = right;
        }
    }
    assert!(seq - PISS > 100_000);
}

#[test]
fn rfc9293_zero_window_over_a_pair() {
    // B stops reading; A fills B's buffer, probes while it waits, and resumes when B reads.
    let cfg_b = Config { rcv_buf: 20_000, ..plain() };
    let mut p = Pair::connected(&plain(), &cfg_b);
    let data: Vec<u8> = (0..60_000).map(stream_byte).collect();
    let mut sent = 0;
    p.run_until(p.now + 5 * SECOND, |p| {
        sent += p.a.send(&data[sent..]).unwrap_or(0);
        false
    });
    assert_eq!(p.b().recv_available(), 20_000);
    assert_eq!(p.b().info().rcv_wnd, 0);
    let zero_probes = p
        .sent(Dir::AtoB)
        .iter()
        .filter(|r| r.payload_len == 0 && r.flags == TcpFlags::ACK && r.seq_number == ISS + 20_000)
        .count();
    assert!(zero_probes >= 3, "{zero_probes}");
    let mut got = Vec::new();
    let ok = p.run_until(p.now + 20 * SECOND, |p| {
        sent += p.a.send(&data[sent..]).unwrap_or(0);
        got.extend(read_all(p.b.as_mut().unwrap()));
        got.len() == data.len()
    });
    assert!(ok && got == data);
}

#[test]
fn rfc9293_retransmission_goes_on_into_a_window_the_peer_shrank() {
    let (mut c, now) = established(&plain());
    c.send(&[1; 100]).unwrap();
    let d = poll_one(&mut c, now);
    // The peer takes back its window (RFC 9293 3.8.6.2.2 says it should not; some do).
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    // The RTO still sends the oldest segment: it doubles as a window probe.
    let rtx = poll_one(&mut c, t);
    assert_eq!((rtx.seq(), rtx.len()), (d.seq(), 100));
}
