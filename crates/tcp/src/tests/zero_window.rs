//! Group 7: zero windows and the persist timer (RFC 9293 3.8.6.1), silly-window-syndrome
//! avoidance on both sides (RFC 9293 3.8.6.2), a window that never shrinks.

use wire::{TcpFlags, TcpRepr};

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

/// A data segment from the scripted peer with a zero window: its buffer is full too.
fn data_zero_window(seq: u32, len: usize) -> TcpRepr {
    TcpRepr { payload_len: len, ..ack(seq, ISS + 1, 0) }
}

#[test]
fn rfc9293_an_owed_ack_does_not_ride_on_a_zero_window_probe() {
    // A probe (SEG.SEQ = SND.UNA - 1) is unacceptable by design: the peer answers it without
    // looking at its ACK field. When the persist timer fires just as the peer's data arrives,
    // the ACK of that data goes first, in a segment of its own at SND.NXT, then the probe.
    for fills_a_hole in [false, true] {
        let (mut c, now) = established(&plain());
        feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
        c.send(b"waiting").unwrap();
        poll_none(&mut c, now);
        let t = c.poll_timeout().unwrap();
        let acked = if fills_a_hole {
            // Out of order first (answered at once); at the probe's time the hole is filled,
            // which is also answered at once.
            feed(&mut c, now + 10 * MS, data_zero_window(PISS + 101, 100));
            assert_eq!(poll_one(&mut c, now + 10 * MS).ack(), Some(PISS + 1));
            feed(&mut c, t, data_zero_window(PISS + 1, 100));
            PISS + 201
        } else {
            // In order: its ACK is delayed, and the probe would cancel that timer.
            feed(&mut c, t, data_zero_window(PISS + 1, 100));
            PISS + 101
        };
        c.handle_timeout(t);
        let segs = poll_all(&mut c, t);
        let got: Vec<_> = segs.iter().map(|s| (s.seq(), s.ack(), s.len())).collect();
        assert_eq!(got, [(ISS + 1, Some(acked), 0), (ISS, Some(acked), 0)], "fills a hole: {fills_a_hole}");
        // Nothing more is owed: no delayed-ACK timer, only the persist timer (backed off).
        assert_eq!(c.poll_timeout(), Some(t + 400 * MS));
    }
}

#[test]
fn rfc9293_window_taken_from_an_ack_of_new_data_with_an_older_seq() {
    // SND.WND counts from SND.UNA. A segment that acknowledges new data but whose SEG.SEQ is
    // older than SND.WL1 (the peer's retransmission filling a hole behind data it sent later)
    // moves SND.UNA: its window must be taken too (Linux's rule), or the old window, counted
    // from the new SND.UNA, puts the right edge beyond anything the peer offered.
    let (mut c, now) = established(&plain());
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 2920)); // two segments: right edge ISS + 2921
    c.send(&[7; 10_000]).unwrap();
    let sent: usize = poll_all(&mut c, now).iter().map(|s| s.len()).sum();
    assert_eq!(sent, 2920);
    // The peer's data: its second segment arrives first (SND.WL1 = its SEQ), same edge.
    feed(&mut c, now, TcpRepr { payload_len: 100, ..ack(PISS + 101, ISS + 1, 2920) });
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 1));
    // Its first one, retransmitted later: it acknowledges our first segment, and its window
    // keeps the right edge where it was.
    feed(&mut c, now, TcpRepr { payload_len: 100, ..ack(PISS + 1, ISS + 1461, 1460) });
    assert_eq!(c.info().snd_wnd, 1460);
    // So no new data: only the ACK of the filled hole.
    let got: Vec<_> = poll_all(&mut c, now).iter().map(|s| (s.seq(), s.ack(), s.len())).collect();
    assert_eq!(got, [(ISS + 2921, Some(PISS + 201), 0)]);
    // An ACK that moves the edge lets it go on.
    feed(&mut c, now, ack(PISS + 201, ISS + 2921, 2920));
    assert_eq!(poll_all(&mut c, now).iter().map(|s| s.len()).sum::<usize>(), 2920);
}

#[test]
fn rfc9293_retransmission_into_a_closed_window_carries_no_new_data() {
    let (mut c, now) = established(&plain());
    c.send(&[1; 100]).unwrap();
    let d = poll_one(&mut c, now);
    // More data is queued; then the peer closes its window without acknowledging.
    c.send(&[2; 3000]).unwrap();
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    poll_none(&mut c, now);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    // The RTO sends the 100 bytes again, a probe too, but no new data beyond the window.
    let rtx = poll_one(&mut c, t);
    assert_eq!((rtx.seq(), rtx.len()), (d.seq(), 100));
}

/// What went wrong in the log of a pair, at most one line of each kind: a segment carrying new
/// data beyond the right edge the other side ever advertised; a probe (zero length, SEG.SEQ
/// below data already sent) that is all that carries an ACK (newer than any its sender put in
/// an acceptable segment).
fn check_log(log: &[(crate::Instant, Dir, TcpRepr)]) -> Vec<String> {
    use crate::seq;
    let mut scale = [0u8; 2]; // of the windows each direction sends
    let mut syn_ws: [Option<u8>; 2] = [None, None];
    let mut edge: [Option<u32>; 2] = [None, None]; // right edge advertised by each direction
    let mut top: [Option<u32>; 2] = [None, None]; // highest sequence number sent, plus one
    let mut acked: [Option<u32>; 2] = [None, None]; // highest ACK in a segment not a probe
    let (mut beyond, mut on_probe) = (None, None);
    for (t, dir, r) in log {
        let d = *dir as usize;
        let what = |s: &str| format!("at {} ms, {dir:?} seq {} ack {:?}: {s}", t / MS, r.seq_number, r.ack_number);
        if r.flags.contains(TcpFlags::SYN) {
            syn_ws[d] = r.window_scale;
            if let [Some(a), Some(b)] = syn_ws {
                scale = [a, b];
            }
            top[d] = Some(r.seq_number.wrapping_add(1));
        }
        if r.flags.intersects(TcpFlags::SYN | TcpFlags::RST) {
            continue;
        }
        let (Some(ack), Some(sent)) = (r.ack_number, top[d]) else { continue };
        let end = r.seq_number.wrapping_add(r.payload_len as u32);
        if r.payload_len > 0 && seq::gt(end, sent) {
            if let Some(e) = edge[1 - d].filter(|&e| seq::gt(end, e)) {
                beyond.get_or_insert_with(|| what(&format!("new data up to {end}, beyond the right edge {e}")));
            }
            top[d] = Some(end);
        }
        let probe = r.payload_len == 0 && !r.flags.contains(TcpFlags::FIN) && seq::lt(r.seq_number, sent);
        if probe {
            if acked[d].is_some_and(|a| seq::gt(ack, a)) {
                on_probe.get_or_insert_with(|| what("a probe is all that carries this ACK"));
            }
        } else if acked[d].map_or(true, |a| seq::gt(ack, a)) {
            acked[d] = Some(ack);
        }
        let e = ack.wrapping_add(u32::from(r.window_len) << scale[d]);
        if edge[d].map_or(true, |x| seq::gt(e, x)) {
            edge[d] = Some(e);
        }
    }
    beyond.into_iter().chain(on_probe).collect()
}

/// A streams to B, which echoes (it reads only what it can send back) and A reads it all. B's
/// buffers fill both ways and its window closes, over and over; segments are lost both ways.
/// Retransmissions and probes then cross at the same instants: with no serialization delay,
/// A's persist timer and B's RTO are armed one delay apart and back off alike.
fn echo_with_full_buffers_both_ways(seed: u64, len: usize) -> Result<(), String> {
    let cfg = Config { rcv_buf: 4096, snd_buf: 4096, ..Config::default() };
    let mut p = Pair::with_iss(&cfg, &cfg, (seed as u32).wrapping_mul(2_654_435_761));
    p.rate = 0;
    let mut rng = Rng::new(seed);
    p.fate = Box::new(move |_, _, _| if rng.next_u64() % 100 < 2 { Fate::Drop } else { Fate::Deliver });
    let data: Vec<u8> = (0..len).map(stream_byte).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut buf = [0u8; 4096];
    let start = p.now;
    let done = p.run_until(start + 300 * SECOND, |p| {
        if p.a.state() == State::Established {
            sent += p.a.send(&data[sent..]).unwrap_or(0);
        }
        got.extend(read_all(&mut p.a));
        if let Some(b) = p.b.as_mut().filter(|b| b.state() == State::Established) {
            let n = b.send_space().min(b.recv_available());
            if n > 0 {
                assert_eq!(b.recv(&mut buf[..n]), Ok(n));
                assert_eq!(b.send(&buf[..n]), Ok(n));
            }
        }
        got.len() == len || p.a.state() == State::Closed
    });
    let (ea, eb) = p.take_events();
    let mut wrong = check_log(&p.log);
    if !done || got.len() != len || ea.contains(&Event::TimedOut) || eb.contains(&Event::TimedOut) {
        let info = |c: &crate::Connection| {
            let i = c.info();
            format!(
                "{:?} backoff {} snd_wnd {} rcv_wnd {} in flight {}",
                i.state, i.backoff, i.snd_wnd, i.rcv_wnd, i.bytes_in_flight
            )
        };
        wrong.push(format!("stuck: A {}; B {}", info(&p.a), p.b.as_ref().map_or(String::new(), info)));
    }
    if !wrong.is_empty() {
        let secs = (p.now - start) / SECOND;
        return Err(format!("seed {seed}, {} of {len} bytes echoed in {secs} s:\n  {}", got.len(), wrong.join("\n  ")));
    }
    assert!(got == data, "seed {seed}: wrong bytes");
    Ok(())
}

#[test]
fn rfc9293_echo_with_full_buffers_both_ways_over_a_lossy_link_does_not_deadlock() {
    let failed: Vec<String> =
        (1..=80).filter_map(|seed| echo_with_full_buffers_both_ways(seed, 1 << 20).err()).collect();
    assert!(failed.is_empty(), "{} of 80 seeds:\n{}", failed.len(), failed.join("\n"));
}

/// An orphan (closed by the application with data still queued) whose peer answers every probe
/// with a zero window: Linux's `tcp_probe_timer` gives up once the probes are `rto_max` apart
/// (`tcp_orphan_retries` 0: at once then), where a connection the application holds would
/// probe for ever.
#[test]
fn linux_orphan_with_answered_zero_window_probes_gives_up() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    c.send(b"never read").unwrap();
    c.close(now);
    assert_eq!(c.state(), State::FinWait1);
    poll_none(&mut c, now);
    let mut t = now;
    let mut gaps = Vec::new();
    while c.state() != State::Closed {
        assert!(gaps.len() < 30, "still probing after {gaps:?} ms");
        let next = c.poll_timeout().unwrap();
        gaps.push((next - t) / MS);
        t = next;
        c.handle_timeout(t);
        if c.state() == State::Closed {
            break;
        }
        let probe = poll_one(&mut c, t);
        assert_eq!((probe.flags(), probe.seq(), probe.len()), (TcpFlags::ACK, ISS, 0));
        feed(&mut c, t, ack(PISS + 1, ISS + 1, 0)); // answered: still zero
        poll_none(&mut c, t);
    }
    // 200 ms doubling to 102.4 s, then one interval of rto_max (120 s): the orphan is done.
    assert_eq!(gaps, [200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200, 102400, 120000]);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
    assert_eq!(c.counters().aborts_on_timeout, 1);
    poll_none(&mut c, t); // Linux's tcp_write_err: no RST
}

/// Unanswered probes of an orphan: `tcp_orphan_retries` 0 means 8 while the interval is below
/// `rto_max`, not `retries2` (15).
#[test]
fn linux_orphan_unanswered_probes_stop_after_eight() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, ack(PISS + 1, ISS + 1, 0));
    c.send(b"x").unwrap();
    c.close(now);
    poll_none(&mut c, now);
    let mut probes = 0;
    while c.state() != State::Closed {
        assert!(probes < 15, "{probes} probes");
        let t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        probes += poll_all(&mut c, t).len();
    }
    assert_eq!(probes, 8);
    assert_eq!(events(&mut c), [Event::TimedOut, Event::Closed]);
    assert_eq!(c.counters().aborts_on_timeout, 1);
}

/// `tcp_orphan_retries` set: an orphan's retransmissions stop after that many, not `retries2`.
#[test]
fn linux_orphan_retransmissions_stop_after_orphan_retries() {
    let cfg = Config { orphan_retries: 3, ..plain() };
    let (mut c, now) = established(&cfg);
    c.send(b"lost").unwrap();
    poll_one(&mut c, now);
    c.close(now);
    poll_one(&mut c, now); // the FIN
    let mut rtx = 0;
    while c.state() != State::Closed {
        assert!(rtx < 15, "{rtx} retransmissions");
        let t = c.poll_timeout().unwrap();
        c.handle_timeout(t);
        rtx += poll_all(&mut c, t).iter().filter(|s| s.seq() == ISS + 1).count();
    }
    assert_eq!(rtx, 3);
    assert_eq!(c.counters().aborts_on_timeout, 1);
}
