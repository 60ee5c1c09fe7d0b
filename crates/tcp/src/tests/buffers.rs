//! The socket options that size and watch a connection's buffers, as Linux applies them:
//! SO_RCVBUF (the window), SO_SNDBUF (what `send` takes, EPOLLOUT), SO_RCVLOWAT (EPOLLIN).

use super::harness::*;
use crate::{Config, Connection, Error, Instant};

/// Sends `len` bytes from the peer at `seq` in segments of at most 1000; returns the next seq.
fn peer_sends(c: &mut Connection, now: Instant, seq: u32, len: usize) -> u32 {
    let mut at = seq;
    let end = seq + len as u32;
    while at < end {
        let n = (end - at).min(1000) as usize;
        feed(c, now, data(at, ISS + 1, n));
        at += n as u32;
    }
    end
}

/// The window of the ACK owed now (delayed ACKs forced out).
fn window_now(c: &mut Connection, now: Instant) -> u16 {
    if let Some(t) = c.poll_timeout() {
        c.handle_timeout(t.max(now));
    }
    let segs = poll_all(c, now + SECOND_LATER);
    segs.last().expect("an ACK").repr.window_len
}

const SECOND_LATER: Instant = crate::SECOND;

#[test]
fn so_rcvbuf_made_smaller_takes_back_no_window_offered() {
    let (mut c, now) = established(&plain()); // no window scaling: 65535 offered
    let seq = peer_sends(&mut c, now, PISS + 1, 1000);
    assert_eq!(window_now(&mut c, now), 64535);
    assert_eq!(read_all(&mut c).len(), 1000);
    c.set_recv_buffer(4096);
    c.release_buffers(); // empty: its memory goes; it comes back as large as the offer
                         // The edge offered stands: the peer may fill it, though that is more than 4096 bytes.
    let seq = peer_sends(&mut c, now, seq, 64535);
    assert_eq!(window_now(&mut c, now), 0);
    assert_eq!(read_all(&mut c).len(), 64535);
    // From now on the window is the new buffer.
    assert_eq!(poll_one(&mut c, now).repr.window_len, 4096, "the window update after the read");
    let seq = peer_sends(&mut c, now, seq, 4096);
    assert_eq!(window_now(&mut c, now), 0);
    assert_eq!(read_all(&mut c).len(), 4096);
    let _ = seq;
}

#[test]
fn so_rcvbuf_made_larger_grows_the_buffer_and_keeps_out_of_order_data() {
    let cfg = Config { rcv_buf: 4096, ..plain() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, data(PISS + 1, ISS + 1, 1000));
    feed(&mut c, now, data(PISS + 2001, ISS + 1, 1000)); // a hole of 1000 before it
    c.set_recv_buffer(16384);
    feed(&mut c, now, data(PISS + 1001, ISS + 1, 1000));
    let got = read_all(&mut c);
    let want: Vec<u8> = (0..3000).map(|i| pattern(PISS + 1 + i)).collect();
    assert!(got == want, "{} bytes read", got.len());
    assert_eq!(window_now(&mut c, now), 16384);
    // The larger buffer is used: 16384 bytes fit.
    peer_sends(&mut c, now, PISS + 3001, 16384);
    assert_eq!(window_now(&mut c, now), 0);
    let got = read_all(&mut c);
    assert!(got.iter().zip(PISS + 3001..).all(|(b, seq)| *b == pattern(seq)) && got.len() == 16384);
}

#[test]
fn so_sndbuf_bounds_what_send_takes_and_when_it_is_writable() {
    let cfg = Config { snd_buf: 4096, nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg);
    let first: Vec<u8> = (0..10_000).map(stream_byte).collect();
    assert_eq!(c.send(&first), Ok(4096));
    assert!(!c.is_writable());
    c.set_send_buffer(8192);
    assert_eq!(c.send_space(), 4096);
    assert!(c.is_writable(), "a third of the buffer free at least");
    let second = vec![9u8; 10_000];
    assert_eq!(c.send(&second), Ok(4096));
    let sent: Vec<u8> = poll_all(&mut c, now).into_iter().flat_map(|s| s.payload).collect();
    let mut want = first[..4096].to_vec();
    want.extend_from_slice(&second[..4096]);
    let first_difference = sent.iter().zip(&want).position(|(a, b)| a != b);
    assert!(sent == want, "{} bytes sent, first difference at {first_difference:?}", sent.len());
    // Smaller than what is queued: nothing more until it drains below.
    c.set_send_buffer(2048);
    assert_eq!(c.send(b"x"), Err(Error::WouldBlock));
    assert!(!c.is_writable());
    feed(&mut c, now, ack(PISS + 1, ISS + 1 + 8192, 65535));
    assert_eq!(c.send_space(), 2048);
    assert!(c.is_writable());
    assert_eq!(c.send(&[1; 5000]), Ok(2048), "the memory is larger, the buffer is not");
}

#[test]
fn so_rcvlowat_readable_at_the_low_water_mark_or_a_nearly_closed_window() {
    let (mut c, now) = established(&plain());
    c.set_rcvlowat(100);
    let seq = peer_sends(&mut c, now, PISS + 1, 99);
    assert!(!c.is_readable());
    assert_eq!(c.recv_available(), 99, "FIONREAD does not care");
    peer_sends(&mut c, now, seq, 1);
    assert!(c.is_readable());

    // Below the mark, but the window left is at most one segment: the peer cannot send the
    // rest, so the data is readable (Linux's `tcp_epollin_ready`).
    let cfg = Config { rcv_buf: 3000, ..plain() };
    let (mut c, now) = established(&cfg);
    c.set_rcvlowat(2000);
    feed(&mut c, now, data(PISS + 1, ISS + 1, 1460));
    assert!(!c.is_readable(), "1540 bytes of window left");
    feed(&mut c, now, data(PISS + 1461, ISS + 1, 100));
    assert!(c.is_readable(), "1440 bytes of window left, less than a segment");
    // The end of the stream is readable whatever the mark.
    let (mut c, now) = established(&plain());
    c.set_rcvlowat(100);
    feed(&mut c, now, data(PISS + 1, ISS + 1, 10));
    assert!(!c.is_readable());
    feed(&mut c, now, fin(PISS + 11));
    assert!(c.is_readable());
}

fn fin(seq: u32) -> wire::TcpRepr {
    seg(seq, Some(ISS + 1), wire::TcpFlags::FIN, 65535)
}

/// A request/response connection whose buffers empty after every exchange reuses their first
/// bytes of memory (the same cache lines) instead of walking through all of it.
#[test]
fn buffers_that_empty_start_again_at_the_beginning_of_their_memory() {
    let (mut c, now) = established(&Config { nodelay: true, ..plain() });
    let mut seq = PISS + 1;
    let mut una = ISS + 1;
    for round in 0..3 {
        seq = peer_sends(&mut c, now, seq, 100);
        assert_eq!(read_all(&mut c).len(), 100);
        assert_eq!(c.send(&[7u8; 300]), Ok(300));
        let sent: usize = poll_all(&mut c, now).iter().map(|s| s.payload.len()).sum();
        assert_eq!(sent, 300);
        una += 300;
        feed(&mut c, now, ack(seq, una, 65535));
        assert_eq!(c.ring_heads(), (0, 0), "round {round}: both buffers empty, both rewound");
    }
    // Out-of-order data held beyond an emptied buffer keeps its place: no rewind then.
    let start = seq;
    feed(&mut c, now, data(start + 60, una, 40));
    peer_sends(&mut c, now, start, 10);
    assert_eq!(read_all(&mut c).len(), 10);
    feed(&mut c, now, data(start + 10, una, 50));
    let expected: Vec<u8> = (start + 10..start + 100).map(pattern).collect();
    assert_eq!(read_all(&mut c), expected);
}
