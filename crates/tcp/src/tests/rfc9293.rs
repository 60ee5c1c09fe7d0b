//! Group 1: the RFC 9293 state machine.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Connection, Error, Event, State, SECOND};

#[test]
fn rfc9293_three_way_handshake_active() {
    let cfg = plain();
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    assert_eq!(c.state(), State::SynSent);
    let syn = poll_one(&mut c, T0);
    assert_eq!(syn.flags(), TcpFlags::SYN);
    assert_eq!((syn.seq(), syn.ack()), (ISS, None));
    assert_eq!(syn.repr.max_seg_size, Some(1460));
    assert_eq!(syn.repr.window_len, 65535);
    assert_eq!((syn.repr.window_scale, syn.repr.sack_permitted, syn.repr.timestamp), (None, false, None));
    poll_none(&mut c, T0);
    assert_eq!(c.poll_timeout(), Some(T0 + SECOND));
    assert_eq!(c.send(b"x"), Err(Error::WouldBlock));

    let synack = TcpRepr { max_seg_size: Some(1400), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 30000) };
    c.handle_segment(T0 + 10 * MS, &synack, &[]);
    assert_eq!(c.state(), State::Established);
    let ack = poll_one(&mut c, T0 + 10 * MS);
    assert_eq!(ack.flags(), TcpFlags::ACK);
    assert_eq!((ack.seq(), ack.ack()), (ISS + 1, Some(PISS + 1)));
    assert_eq!(events(&mut c), [Event::Connected, Event::Writable]);
    assert_eq!(c.poll_timeout(), None);
    let info = c.info();
    assert_eq!((info.snd_mss, info.snd_wnd), (1400, 30000));
}

#[test]
fn rfc9293_three_way_handshake_passive() {
    let cfg = plain();
    let syn = peer_syn(&cfg);
    let mut c = Connection::accept(&cfg, &syn, ISS, T0);
    assert_eq!(c.state(), State::SynReceived);
    assert_eq!((c.local_port(), c.remote_port()), (LP, RP));
    let synack = poll_one(&mut c, T0);
    assert_eq!(synack.flags(), TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!((synack.seq(), synack.ack()), (ISS, Some(PISS + 1)));
    assert_eq!(synack.repr.max_seg_size, Some(1460));
    assert_eq!(c.recv(&mut [0; 4]), Err(Error::WouldBlock));
    feed(&mut c, T0 + MS, ack(PISS + 1, ISS + 1, 65535));
    assert_eq!(c.state(), State::Established);
    assert_eq!(events(&mut c), [Event::Connected, Event::Writable]);
    poll_none(&mut c, T0 + MS);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc9293_handshake_ack_may_carry_data() {
    let cfg = plain();
    let mut c = Connection::accept(&cfg, &peer_syn(&cfg), ISS, T0);
    poll_one(&mut c, T0);
    feed(&mut c, T0 + MS, data(PISS + 1, ISS + 1, 10));
    assert_eq!(c.state(), State::Established);
    assert_eq!(events(&mut c), [Event::Connected, Event::Readable, Event::Writable]);
    assert_eq!(c.recv_available(), 10);
}

#[test]
fn rfc9293_simultaneous_open() {
    let cfg = plain();
    let mut a = Connection::connect(&cfg, 1111, 2222, 100, T0);
    let mut b = Connection::connect(&cfg, 2222, 1111, 500, T0);
    let syn_a = poll_one(&mut a, T0);
    let syn_b = poll_one(&mut b, T0);
    a.handle_segment(T0 + MS, &syn_b.repr, &[]);
    b.handle_segment(T0 + MS, &syn_a.repr, &[]);
    assert_eq!((a.state(), b.state()), (State::SynReceived, State::SynReceived));
    let synack_a = poll_one(&mut a, T0 + MS);
    let synack_b = poll_one(&mut b, T0 + MS);
    assert_eq!(synack_a.flags(), TcpFlags::SYN | TcpFlags::ACK);
    assert_eq!((synack_a.seq(), synack_a.ack()), (100, Some(501)));
    assert_eq!((synack_b.seq(), synack_b.ack()), (500, Some(101)));
    a.handle_segment(T0 + 2 * MS, &synack_b.repr, &[]);
    b.handle_segment(T0 + 2 * MS, &synack_a.repr, &[]);
    assert_eq!((a.state(), b.state()), (State::Established, State::Established));
    assert_eq!(events(&mut a), [Event::Connected, Event::Writable]);
    // Data flows.
    a.send(b"ping").unwrap();
    let d = poll_one(&mut a, T0 + 3 * MS);
    assert_eq!((d.seq(), d.payload.as_slice()), (101, &b"ping"[..]));
    b.handle_segment(T0 + 4 * MS, &d.repr, &d.payload);
    assert_eq!(read_all(&mut b), b"ping");
}

#[test]
fn rfc9293_data_transfer_both_ways() {
    let mut p = Pair::connected(&plain(), &plain());
    p.a.send(b"hello from a").unwrap();
    p.b().send(b"hello from b").unwrap();
    p.run_for(SECOND);
    assert_eq!(read_all(p.b()), b"hello from a");
    assert_eq!(read_all(&mut p.a), b"hello from b");
    let (ea, eb) = p.take_events();
    assert!(ea.contains(&Event::Readable) && eb.contains(&Event::Readable));
    // Everything acknowledged, nothing left to do.
    assert_eq!(p.a.info().bytes_in_flight, 0);
    assert_eq!(p.b().info().bytes_in_flight, 0);
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn rfc9293_orderly_close_initiated_by_us() {
    let mut p = Pair::connected(&plain(), &plain());
    p.a.send(b"last words").unwrap();
    p.a.close(p.now);
    assert_eq!(p.a.state(), State::FinWait1);
    assert_eq!(p.a.send(b"more"), Err(Error::BrokenPipe));
    assert!(p.run_until(p.now + SECOND, |p| p.b().state() == State::CloseWait));
    assert_eq!(read_all(p.b()), b"last words");
    assert_eq!(p.b().recv(&mut [0; 8]), Ok(0));
    p.run_for(100 * MS);
    assert_eq!(p.a.state(), State::FinWait2);
    let now = p.now;
    p.b().close(now);
    assert_eq!(p.b().state(), State::LastAck);
    p.run_for(100 * MS);
    assert_eq!(p.a.state(), State::TimeWait);
    assert_eq!(p.b().state(), State::Closed);
    let (ea, eb) = p.take_events();
    assert_eq!(eb, [Event::Readable, Event::ReadClosed, Event::Closed]);
    assert_eq!(ea, [Event::ReadClosed, Event::TimeWait]);
    assert_eq!(p.b().poll_timeout(), None);
    p.run_for(61 * SECOND);
    assert_eq!(p.a.state(), State::Closed);
    assert_eq!(p.a.poll_timeout(), None);
    let (ea, _) = p.take_events();
    assert_eq!(ea, [Event::Closed]);
}

#[test]
fn rfc9293_orderly_close_initiated_by_peer() {
    let mut p = Pair::connected(&plain(), &plain());
    let now = p.now;
    p.b().close(now);
    p.run_for(100 * MS);
    assert_eq!(p.a.state(), State::CloseWait);
    assert_eq!(p.b().state(), State::FinWait2);
    assert_eq!(p.a.recv(&mut [0; 8]), Ok(0));
    p.a.close(p.now);
    assert_eq!(p.a.state(), State::LastAck);
    p.run_for(100 * MS);
    assert_eq!(p.a.state(), State::Closed);
    assert_eq!(p.b().state(), State::TimeWait);
    let (ea, _) = p.take_events();
    assert_eq!(ea, [Event::ReadClosed, Event::Closed]);
}

#[test]
fn rfc9293_simultaneous_close() {
    let mut p = Pair::connected(&plain(), &plain());
    let now = p.now;
    p.a.close(now);
    p.b().close(now);
    p.flush();
    // Both FINs are on the wire before either arrives.
    p.run_until(p.now + SECOND, |p| p.a.state() != State::FinWait1);
    assert_eq!(p.a.state(), State::Closing);
    p.run_for(100 * MS);
    assert_eq!((p.a.state(), p.b().state()), (State::TimeWait, State::TimeWait));
    p.run_for(61 * SECOND);
    assert_eq!((p.a.state(), p.b().state()), (State::Closed, State::Closed));
    assert_eq!(p.a.poll_timeout(), None);
}

#[test]
fn rfc9293_half_close_keeps_receiving() {
    let mut p = Pair::connected(&plain(), &plain());
    p.a.shutdown_write().unwrap();
    p.run_for(100 * MS);
    assert_eq!((p.a.state(), p.b().state()), (State::FinWait2, State::CloseWait));
    assert_eq!(p.b().recv(&mut [0; 8]), Ok(0));
    // B keeps sending; A keeps reading.
    let big: Vec<u8> = (0..50_000).map(stream_byte).collect();
    let mut sent = 0;
    let mut got = Vec::new();
    p.run_until(p.now + 10 * SECOND, |p| {
        if sent < big.len() {
            sent += p.b.as_mut().unwrap().send(&big[sent..]).unwrap_or(0);
        }
        got.extend(read_all(&mut p.a));
        got.len() == big.len()
    });
    assert_eq!(got, big);
    assert_eq!(p.a.send(b"x"), Err(Error::BrokenPipe));
    let now = p.now;
    p.b().close(now);
    p.run_for(100 * MS);
    assert_eq!((p.a.state(), p.b().state()), (State::TimeWait, State::Closed));
}

#[test]
fn rfc9293_rst_with_exact_sequence_resets() {
    let (mut c, now) = established(&plain());
    c.send(b"pending").unwrap();
    feed(&mut c, now, data(PISS + 1, ISS + 1, 5));
    events(&mut c);
    feed(&mut c, now, seg(PISS + 6, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::Reset, Event::Closed]);
    poll_none(&mut c, now);
    assert_eq!(c.poll_timeout(), None);
    // Data that arrived before the RST is still readable, then the error, once; then EOF.
    let mut buf = [0u8; 64];
    assert_eq!(c.recv(&mut buf), Ok(5));
    assert_eq!(c.recv(&mut buf), Err(Error::ConnectionReset));
    assert_eq!(c.recv(&mut [0; 8]), Ok(0));
    assert_eq!(c.send(b"x"), Err(Error::BrokenPipe));
}

#[test]
fn rfc9293_send_after_reset_reports_econnreset_then_epipe() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, seg(PISS + 1, Some(ISS + 1), TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.send(b"x"), Err(Error::ConnectionReset));
    assert_eq!(c.send(b"x"), Err(Error::BrokenPipe));
}

#[test]
fn rfc9293_rst_outside_window_is_ignored() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, seg(PISS + 1 + 70_000, None, TcpFlags::RST, 0));
    feed(&mut c, now, seg(PISS, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Established);
    poll_none(&mut c, now); // and no ACK: RSTs are never answered
}

#[test]
fn rfc9293_rst_in_syn_sent_needs_acceptable_ack() {
    let cfg = plain();
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    // No ACK: ignored.
    feed(&mut c, T0, seg(0, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::SynSent);
    // Wrong ACK: ignored (and never answered).
    feed(&mut c, T0, seg(0, Some(ISS + 5), TcpFlags::RST, 0));
    assert_eq!(c.state(), State::SynSent);
    poll_none(&mut c, T0);
    // The ACK of our SYN: refused.
    feed(&mut c, T0, seg(0, Some(ISS + 1), TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::Reset, Event::Closed]);
    assert_eq!(c.take_error(), Some(Error::ConnectionRefused));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc9293_syn_sent_unacceptable_ack_gets_rst() {
    let cfg = plain();
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    feed(&mut c, T0, seg(PISS, Some(ISS + 77), TcpFlags::SYN, 1000));
    assert_eq!(c.state(), State::SynSent);
    let rst = poll_one(&mut c, T0);
    assert_eq!((rst.flags(), rst.seq(), rst.ack()), (TcpFlags::RST, ISS + 77, None));
    // A segment with neither SYN nor RST is dropped.
    feed(&mut c, T0, seg(PISS, None, TcpFlags::empty(), 1000));
    poll_none(&mut c, T0);
    assert_eq!(c.state(), State::SynSent);
}

#[test]
fn rfc9293_syn_received_unacceptable_ack_gets_rst() {
    let cfg = plain();
    let mut c = Connection::accept(&cfg, &peer_syn(&cfg), ISS, T0);
    poll_one(&mut c, T0);
    feed(&mut c, T0, ack(PISS + 1, ISS + 50, 1000));
    let rst = poll_one(&mut c, T0);
    assert_eq!((rst.flags(), rst.seq()), (TcpFlags::RST, ISS + 50));
    assert_eq!(c.state(), State::SynReceived);
}

#[test]
fn rfc9293_syn_received_duplicate_syn_resends_synack() {
    let cfg = plain();
    let syn = peer_syn(&cfg);
    let mut c = Connection::accept(&cfg, &syn, ISS, T0);
    poll_one(&mut c, T0);
    c.handle_segment(T0 + 100 * MS, &syn, &[]);
    let again = poll_one(&mut c, T0 + 100 * MS);
    assert_eq!((again.flags(), again.seq(), again.ack()), (TcpFlags::SYN | TcpFlags::ACK, ISS, Some(PISS + 1)));
}

#[test]
fn rfc9293_abort_sends_rst() {
    let (mut c, now) = established(&plain());
    c.send(b"abc").unwrap();
    poll_one(&mut c, now);
    c.abort();
    assert_eq!(c.state(), State::Closed);
    let rst = poll_one(&mut c, now);
    assert_eq!(rst.flags(), TcpFlags::RST | TcpFlags::ACK);
    assert_eq!((rst.seq(), rst.ack()), (ISS + 4, Some(PISS + 1)));
    assert_eq!(events(&mut c), [Event::Closed]);
    assert_eq!(c.poll_timeout(), None);
    assert_eq!(c.send(b"x"), Err(Error::BrokenPipe));
}

#[test]
fn rfc9293_data_to_aborted_connection_gets_rst() {
    let (mut c, now) = established(&plain());
    c.abort();
    poll_one(&mut c, now);
    // CLOSED rules: with an ACK, <SEQ=SEG.ACK><CTL=RST>.
    feed(&mut c, now, data(PISS + 1, ISS + 1, 10));
    let rst = poll_one(&mut c, now);
    assert_eq!((rst.flags(), rst.seq(), rst.ack()), (TcpFlags::RST, ISS + 1, None));
    // Without an ACK: <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>.
    feed(&mut c, now, TcpRepr { payload_len: 10, ..seg(PISS + 1, None, TcpFlags::FIN, 100) });
    let rst = poll_one(&mut c, now);
    assert_eq!((rst.flags(), rst.seq(), rst.ack()), (TcpFlags::RST | TcpFlags::ACK, 0, Some(PISS + 12)));
    // A RST is not answered.
    feed(&mut c, now, seg(PISS + 1, None, TcpFlags::RST, 0));
    poll_none(&mut c, now);
}

#[test]
fn rfc9293_close_with_unread_data_sends_rst() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1, 10));
    c.close(now);
    assert_eq!(c.state(), State::Closed);
    let segs = poll_all(&mut c, now);
    assert_eq!(segs.len(), 1);
    assert_eq!(segs[0].flags(), TcpFlags::RST | TcpFlags::ACK);
    assert_eq!(segs[0].ack(), Some(PISS + 11));
}

#[test]
fn rfc9293_data_after_close_is_reset() {
    let (mut c, now) = established(&plain());
    c.close(now);
    let fin = poll_one(&mut c, now);
    assert_eq!(fin.flags(), TcpFlags::FIN | TcpFlags::ACK);
    feed(&mut c, now, ack(PISS + 1, ISS + 2, 1000));
    assert_eq!(c.state(), State::FinWait2);
    feed(&mut c, now, data(PISS + 1, ISS + 2, 10));
    assert_eq!(c.state(), State::Closed);
    let rst = poll_one(&mut c, now);
    assert!(rst.has(TcpFlags::RST));
    assert_eq!(rst.seq(), ISS + 2);
}

#[test]
fn rfc9293_listen_opens_a_connection_only_for_a_syn_without_ack_rst_or_fin() {
    let syn = peer_syn(&Config::default());
    assert!(crate::opens_connection(&syn));
    let ece = TcpRepr { flags: TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR | TcpFlags::PSH, ..syn };
    assert!(crate::opens_connection(&ece));
    // Linux discards a SYN that also carries FIN in LISTEN (tcp_rcv_state_process); RST and
    // ACK are RFC 9293's first and second checks.
    for flags in [TcpFlags::SYN | TcpFlags::FIN, TcpFlags::SYN | TcpFlags::RST, TcpFlags::FIN, TcpFlags::empty()] {
        assert!(!crate::opens_connection(&TcpRepr { flags, ..syn }), "{flags:?}");
    }
    assert!(!crate::opens_connection(&TcpRepr { ack_number: Some(1), flags: TcpFlags::SYN | TcpFlags::ACK, ..syn }));
}

#[test]
fn rfc9293_segment_acceptability_four_cases() {
    // A 1000-byte receive buffer: RCV.WND = 1000.
    let cfg = Config { rcv_buf: 1000, ..plain() };
    let (mut c, mut now) = established(&cfg);
    let nxt = PISS + 1;
    // Zero length, window open: RCV.NXT =< SEG.SEQ < RCV.NXT+RCV.WND. (The ACKs that answer
    // unacceptable segments without data are rate-limited, so each comes a limit apart.)
    let limit = Config::default().invalid_ratelimit;
    feed(&mut c, now, ack(nxt + 999, ISS + 1, 100));
    poll_none(&mut c, now);
    feed(&mut c, now, ack(nxt + 1000, ISS + 1, 100));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    now += limit;
    feed(&mut c, now, ack(nxt - 1, ISS + 1, 100));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    // Data, window open: either end in the window.
    feed(&mut c, now, data(nxt - 10, ISS + 1, 20)); // the tail is new
    assert_eq!(c.recv_available(), 10);
    let nxt = nxt + 10;
    // Starts in, ends out, while unread data waits: not acceptable (Linux 6.x `tcp_sequence`;
    // once everything is read it is, trimmed: see the end).
    feed(&mut c, now, data(nxt + 985, ISS + 1, 20));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    feed(&mut c, now, data(nxt + 1000, ISS + 1, 20)); // all beyond
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    feed(&mut c, now, data(nxt - 20, ISS + 1, 20)); // all old
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    // Fill the window to zero without reading (the ACK is delayed).
    feed(&mut c, now, data(nxt, ISS + 1, 990));
    now = c.poll_timeout().unwrap();
    c.handle_timeout(now);
    let a = poll_one(&mut c, now);
    let nxt = nxt + 990;
    assert_eq!((a.ack(), a.repr.window_len), (Some(nxt), 0));
    // Zero length, zero window: only SEG.SEQ = RCV.NXT, and its ACK and window are used.
    feed(&mut c, now, ack(nxt, ISS + 1, 4321));
    poll_none(&mut c, now);
    assert_eq!(c.info().snd_wnd, 4321);
    now += limit;
    feed(&mut c, now, ack(nxt + 1, ISS + 1, 100));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    // Data, zero window, unread data waiting: not acceptable at all (Linux 6.x), answered; its
    // ACK is not taken and its data not kept.
    c.send(b"abc").unwrap();
    poll_one(&mut c, now);
    feed(&mut c, now, data(nxt, ISS + 4, 5));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.window_len), (Some(nxt), 0));
    assert_eq!(c.info().bytes_in_flight, 3);
    assert_eq!(c.recv_available(), 1000);
    // Everything read, the window open again: data that starts in and ends out is acceptable,
    // trimmed to the window and held out of order until the hole before it fills.
    assert_eq!(read_all(&mut c).len(), 1000);
    assert_eq!(poll_one(&mut c, now).repr.window_len, 1000);
    feed(&mut c, now, data(nxt + 995, ISS + 4, 20));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    feed(&mut c, now, data(nxt, ISS + 4, 995));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt + 1000));
    assert_eq!(c.recv_available(), 1000);
}

#[test]
fn rfc9293_out_of_order_data_delivered_in_order() {
    let (mut c, now) = established(&plain());
    let nxt = PISS + 1;
    feed(&mut c, now, data(nxt + 200, ISS + 1, 100));
    let dup = poll_one(&mut c, now); // out of order: ACK at once
    assert_eq!(dup.ack(), Some(nxt));
    feed(&mut c, now, data(nxt + 100, ISS + 1, 100));
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    assert_eq!(c.recv_available(), 0);
    assert_eq!(events(&mut c), []);
    feed(&mut c, now, data(nxt, ISS + 1, 100));
    // The hole is filled: ACK at once, everything readable in order.
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt + 300));
    assert_eq!(events(&mut c), [Event::Readable]);
    let got = read_all(&mut c);
    let want: Vec<u8> = (0..300).map(|i| pattern(nxt + i)).collect();
    assert_eq!(got, want);
}

#[test]
fn rfc9293_out_of_order_data_bounded_by_window() {
    let cfg = Config { rcv_buf: 1000, ..plain() };
    let (mut c, now) = established(&cfg);
    let nxt = PISS + 1;
    feed(&mut c, now, data(nxt + 900, ISS + 1, 200)); // only 100 bytes fit
    poll_one(&mut c, now);
    feed(&mut c, now, data(nxt, ISS + 1, 900));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.window_len), (Some(nxt + 1000), 0));
    let got = read_all(&mut c);
    assert_eq!(got.len(), 1000);
    assert!(got.iter().enumerate().all(|(i, &b)| b == pattern(nxt + i as u32)));
}

#[test]
fn rfc9293_fin_with_data() {
    let (mut c, now) = established(&plain());
    let nxt = PISS + 1;
    feed(&mut c, now, TcpRepr { flags: TcpFlags::FIN | TcpFlags::ACK, ..data(nxt, ISS + 1, 50) });
    assert_eq!(c.state(), State::CloseWait);
    assert_eq!(events(&mut c), [Event::Readable, Event::ReadClosed]);
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt + 51));
    assert_eq!(read_all(&mut c).len(), 50);
    assert_eq!(c.recv(&mut [0; 4]), Ok(0));
    assert!(c.is_readable());
}

#[test]
fn rfc9293_out_of_order_fin() {
    let (mut c, now) = established(&plain());
    let nxt = PISS + 1;
    feed(&mut c, now, TcpRepr { flags: TcpFlags::FIN | TcpFlags::ACK, ..data(nxt + 100, ISS + 1, 100) });
    assert_eq!(c.state(), State::Established);
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt));
    feed(&mut c, now, data(nxt, ISS + 1, 100));
    assert_eq!(c.state(), State::CloseWait);
    assert_eq!(poll_one(&mut c, now).ack(), Some(nxt + 201));
    assert_eq!(events(&mut c), [Event::Readable, Event::ReadClosed]);
    assert_eq!(read_all(&mut c).len(), 200);
}

#[test]
fn rfc9293_time_wait_lasts_2msl_then_closed() {
    let (mut c, now) = established(&plain());
    c.close(now);
    let fin = poll_one(&mut c, now);
    assert_eq!((fin.flags(), fin.seq()), (TcpFlags::FIN | TcpFlags::ACK, ISS + 1));
    feed(&mut c, now, seg(PISS + 1, Some(ISS + 2), TcpFlags::FIN, 1000));
    assert_eq!(c.state(), State::TimeWait);
    assert_eq!(events(&mut c), [Event::ReadClosed, Event::TimeWait]);
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 2));
    assert_eq!(c.poll_timeout(), Some(now + 60 * SECOND));
    // The peer's FIN again (our ACK was lost): ACK again, 2*MSL restarts.
    let later = now + 10 * SECOND;
    feed(&mut c, later, seg(PISS + 1, Some(ISS + 2), TcpFlags::FIN, 1000));
    assert_eq!(poll_one(&mut c, later).ack(), Some(PISS + 2));
    assert_eq!(c.poll_timeout(), Some(later + 60 * SECOND));
    // A RST does not end TIME-WAIT (RFC 1337).
    feed(&mut c, later, seg(PISS + 2, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::TimeWait);
    c.handle_timeout(later + 60 * SECOND);
    assert_eq!(c.state(), State::Closed);
    assert_eq!(events(&mut c), [Event::Closed]);
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc9293_fin_wait_2_times_out_when_orphaned() {
    let (mut c, now) = established(&plain());
    c.close(now);
    poll_one(&mut c, now);
    feed(&mut c, now, ack(PISS + 1, ISS + 2, 1000));
    assert_eq!(c.state(), State::FinWait2);
    assert_eq!(c.poll_timeout(), Some(now + 60 * SECOND));
    c.handle_timeout(now + 60 * SECOND);
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn rfc9293_app_calls_follow_linux_errnos() {
    let cfg = plain();
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    assert_eq!(c.send(b"x"), Err(Error::WouldBlock));
    assert_eq!(c.recv(&mut [0; 4]), Err(Error::WouldBlock));
    // shutdown in SYN-SENT abandons the connect; then ENOTCONN.
    assert_eq!(c.shutdown_write(), Ok(()));
    assert_eq!(c.state(), State::Closed);
    assert_eq!(c.shutdown_write(), Err(Error::NotConnected));
    assert_eq!(Error::NotConnected.errno(), 107);

    let (mut c, _) = established(&cfg);
    assert_eq!(c.recv(&mut [0; 4]), Err(Error::WouldBlock));
    assert_eq!(c.send(b""), Ok(0));
    c.shutdown_write().unwrap();
    assert_eq!(c.send(b"x"), Err(Error::BrokenPipe));
    assert_eq!(Error::BrokenPipe.errno(), 32);
}

#[test]
fn rfc9293_send_buffer_full_would_block_then_writable() {
    let cfg = Config { snd_buf: 3000, nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg);
    let buf = [7u8; 5000];
    assert_eq!(c.send(&buf), Ok(3000));
    assert_eq!(c.send(&buf), Err(Error::WouldBlock));
    assert!(!c.is_writable());
    let segs = poll_all(&mut c, now);
    assert_eq!(segs.iter().map(|s| s.len()).sum::<usize>(), 3000);
    feed(&mut c, now + 10 * MS, ack(PISS + 1, ISS + 1 + 2000, 65535));
    assert_eq!(events(&mut c), [Event::Writable]);
    assert!(c.is_writable());
    assert_eq!(c.send(&buf), Ok(2000));
}

#[test]
fn syn_cookie_connection_is_built_from_the_ack() {
    let cfg = Config::default();
    let syn = peer_syn(&cfg);
    // The stack answers the SYN statelessly: the SYN-ACK comes from a throw-away connection.
    let iss = 0x1234_5678;
    let synack = Connection::accept(&cfg, &syn, iss, T0).poll_transmit(T0, &mut []).unwrap();
    assert_eq!(synack.flags, TcpFlags::SYN | TcpFlags::ACK);
    let (tsval, _) = synack.timestamp.unwrap();
    // The peer's ACK, with data, validates the cookie; the connection starts ESTABLISHED.
    let ack_seg = TcpRepr { timestamp: Some((778, tsval)), ..data(PISS + 1, iss + 1, 5) };
    let cookie = crate::CookieOptions { mss: 1460, window_scale: Some(7), sack_permitted: true, timestamps: true };
    let now = T0 + 10 * MS;
    let mut c = Connection::from_cookie(&cfg, &ack_seg, cookie, now);
    assert_eq!(c.state(), State::Established);
    let info = c.info();
    assert_eq!((info.snd_wscale, info.rcv_wscale, info.sack, info.timestamps), (Some(7), Some(2), true, true));
    assert_eq!((info.snd_mss, info.snd_wnd), (1448, 65535 << 7));
    assert_eq!(events(&mut c), [Event::Connected, Event::Writable]);
    feed(&mut c, now, ack_seg);
    assert_eq!(read_all(&mut c).len(), 5);
    c.send(b"hi").unwrap();
    let d = poll_one(&mut c, now);
    assert_eq!((d.seq(), d.ack(), d.repr.timestamp.map(|t| t.1)), (iss + 1, Some(PISS + 6), Some(778)));
}

#[test]
fn buffers_are_allocated_on_first_use_and_can_be_released() {
    let (mut c, now) = established(&plain());
    assert_eq!(c.buffers_allocated(), (false, false));
    c.send(b"abc").unwrap();
    poll_one(&mut c, now);
    feed(&mut c, now, data(PISS + 1, ISS + 4, 3));
    assert_eq!(c.buffers_allocated(), (true, true));
    c.release_buffers(); // not empty: nothing freed
    assert_eq!(read_all(&mut c).len(), 3);
    c.release_buffers();
    assert_eq!(c.buffers_allocated(), (false, false));
    // And they come back when needed.
    c.send(b"more").unwrap();
    assert_eq!(poll_one(&mut c, now).payload, b"more");
}

#[test]
fn rfc9293_pure_ack_reordered_behind_data_is_used_not_answered() {
    // Linux's window start (rcv_wup): a zero-length segment from the RCV.NXT we last
    // acknowledged is acceptable even if data beyond it has arrived since.
    let (mut c, now) = established(&plain());
    c.send(b"0123456789").unwrap();
    poll_one(&mut c, now);
    // The peer sent 100 bytes, then an ACK of our data; the ACK arrives second.
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    feed(&mut c, now, ack(PISS + 1, ISS + 11, 65535));
    assert_eq!(c.info().bytes_in_flight, 0);
    poll_none(&mut c, now); // only the delayed ACK is pending, no duplicate answer
                            // Older than what we acknowledged: the RFC's rule, an ACK.
    c.handle_timeout(now + 40 * MS);
    poll_one(&mut c, now + 40 * MS);
    feed(&mut c, now, ack(PISS, ISS + 11, 65535));
    assert_eq!(poll_one(&mut c, now).ack(), Some(PISS + 101));
    // A RST gets no such leniency.
    feed(&mut c, now, data(PISS + 101, ISS + 11, 50));
    feed(&mut c, now, seg(PISS + 101, None, TcpFlags::RST, 0));
    assert_eq!(c.state(), State::Established);
}

#[test]
fn msg_peek_reads_without_consuming() {
    let cfg = crate::Config::default();
    let (mut c, now) = established(&cfg);
    let mut buf = [0u8; 8];
    assert_eq!(c.peek(&mut buf), Err(crate::Error::WouldBlock));
    feed(&mut c, now, data(PISS + 1, ISS + 1, 5));
    assert_eq!(c.peek(&mut buf), Ok(5));
    assert_eq!(c.peek(&mut buf[..2]), Ok(2));
    assert_eq!(c.recv_available(), 5);
    assert_eq!(c.recv(&mut buf), Ok(5));
    assert_eq!(c.peek(&mut buf), Err(crate::Error::WouldBlock));
}
