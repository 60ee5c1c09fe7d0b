//! Urgent data (RFC 9293 3.8.5 and 3.10.7.4 "sixth", RFC 6093), as Linux keeps it: the pointer
//! names the byte after the urgent data, one urgent byte is taken out of the stream (unless
//! SO_OOBINLINE), a read stops at its mark, a newer pointer replaces the mark.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Error, Event, MILLISECOND};

/// A segment from the peer with `payload` at `seq`, URG with pointer `up` if `Some`.
fn from_peer(seq: u32, up: Option<u16>, payload: &[u8]) -> TcpRepr {
    let mut repr = TcpRepr { payload_len: payload.len(), ..data(seq, ISS + 1, 0) };
    if let Some(up) = up {
        repr.flags |= TcpFlags::URG;
        repr.urgent_at = up;
    }
    repr
}

fn give(c: &mut crate::Connection, now: u64, seq: u32, up: Option<u16>, payload: &[u8]) {
    c.handle_segment(now, &from_peer(seq, up, payload), payload);
}

fn read(c: &mut crate::Connection) -> Result<Vec<u8>, Error> {
    let mut buf = [0u8; 100];
    c.recv(&mut buf).map(|n| buf[..n].to_vec())
}

#[test]
fn rfc6093_urgent_pointer_names_the_byte_after_the_urgent_data() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(4), b"abcX");
    assert!(events(&mut c).contains(&Event::Urgent));
    assert!(c.has_urgent(), "EPOLLPRI");
    assert_eq!(c.urgent_mark(), Some(3));
    assert_eq!(c.recv_available(), 3, "FIONREAD stops at the mark");
    // The read ends at the mark; SIOCATMARK then says so.
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
    assert_eq!(c.urgent_mark(), Some(0));
    assert_eq!(c.recv_urgent(true), Ok(Some(b'X')), "MSG_PEEK leaves it");
    assert_eq!(c.recv_urgent(false), Ok(Some(b'X')));
    assert!(!c.has_urgent());
    assert_eq!(c.recv_urgent(false), Err(Error::InvalidInput), "read once");
    assert_eq!(c.urgent_mark(), Some(0), "the mark stays until the reader passes it");
    give(&mut c, now, PISS + 5, None, b"def");
    assert_eq!(read(&mut c), Ok(b"def".to_vec()), "the urgent byte is not in the stream");
    assert_eq!(c.urgent_mark(), None);
}

#[test]
fn rfc6093_urgent_byte_read_past_is_gone() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(4), b"abcX");
    give(&mut c, now, PISS + 5, None, b"def");
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
    assert_eq!(read(&mut c), Ok(b"def".to_vec()));
    assert_eq!(c.recv_urgent(false), Err(Error::InvalidInput));
    assert!(!c.has_urgent());
}

#[test]
fn rfc6093_a_read_at_the_mark_skips_the_urgent_byte_even_with_nothing_after_it() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(4), b"abcX");
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
    // Only the urgent byte is left: not readable (Linux asks one byte more at the mark).
    assert!(!c.is_readable());
    assert!(c.has_urgent());
    assert_eq!(read(&mut c), Err(Error::WouldBlock));
    assert_eq!(c.urgent_mark(), None, "skipped");
    assert_eq!(c.recv_urgent(false), Err(Error::InvalidInput));
}

#[test]
fn rfc6093_oob_inline_keeps_the_urgent_byte_in_the_stream() {
    let (mut c, now) = established(&plain());
    c.set_oob_inline(true);
    give(&mut c, now, PISS + 1, Some(4), b"abcX");
    give(&mut c, now, PISS + 5, None, b"def");
    assert!(c.has_urgent(), "EPOLLPRI with SO_OOBINLINE too");
    assert_eq!(c.recv_available(), 7);
    assert_eq!(c.recv_urgent(false), Err(Error::InvalidInput));
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()), "the mark still ends a read");
    assert_eq!(c.urgent_mark(), Some(0));
    assert_eq!(read(&mut c), Ok(b"Xdef".to_vec()));
    assert_eq!(c.urgent_mark(), None);
    assert!(!c.has_urgent());
}

#[test]
fn rfc9293_urgent_pointer_may_arrive_before_its_byte() {
    let (mut c, now) = established(&plain());
    // The pointer points 6 bytes past this segment.
    give(&mut c, now, PISS + 1, Some(10), b"abc");
    assert!(events(&mut c).contains(&Event::Urgent), "SIGURG comes with the pointer");
    assert!(!c.has_urgent());
    assert_eq!(c.recv_urgent(false), Err(Error::WouldBlock), "announced, not arrived: EAGAIN");
    assert_eq!(c.recv_available(), 3);
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
    assert_eq!(c.urgent_mark(), Some(6));
    give(&mut c, now, PISS + 4, None, b"defghiXyz");
    assert!(c.has_urgent());
    assert_eq!(read(&mut c), Ok(b"defghi".to_vec()));
    assert_eq!(c.recv_urgent(false), Ok(Some(b'X')));
    assert_eq!(read(&mut c), Ok(b"yz".to_vec()));
}

#[test]
fn rfc9293_urgent_byte_is_taken_from_an_out_of_order_segment() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(7), b"abc");
    give(&mut c, now, PISS + 5, None, b"efXh"); // out of order: "d" is missing
    assert!(c.has_urgent(), "Linux takes the byte from whichever segment carries it");
    assert_eq!(c.recv_urgent(false), Ok(Some(b'X')));
    give(&mut c, now, PISS + 4, None, b"d");
    assert_eq!(read(&mut c), Ok(b"abcdef".to_vec()));
    assert_eq!(read(&mut c), Ok(b"h".to_vec()));
}

#[test]
fn rfc6093_a_newer_urgent_pointer_replaces_the_mark() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(4), b"abcA");
    assert!(events(&mut c).contains(&Event::Urgent));
    give(&mut c, now, PISS + 5, Some(4), b"midB");
    assert!(events(&mut c).contains(&Event::Urgent), "news again");
    // The first urgent byte was not read at its mark: it is ordinary data now.
    assert_eq!(read(&mut c), Ok(b"abcAmid".to_vec()));
    assert_eq!(c.recv_urgent(false), Ok(Some(b'B')));
    assert_eq!(read(&mut c), Err(Error::WouldBlock));
}

#[test]
fn rfc6093_a_newer_pointer_drops_the_old_byte_at_the_readers_mark() {
    for take_first in [false, true] {
        let (mut c, now) = established(&plain());
        give(&mut c, now, PISS + 1, Some(4), b"abcA");
        assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
        if take_first {
            assert_eq!(c.recv_urgent(false), Ok(Some(b'A')));
        }
        give(&mut c, now, PISS + 5, Some(4), b"midB");
        // The reader stood at A's mark: A leaves the stream rather than turn up in it.
        assert_eq!(c.urgent_mark(), Some(3));
        assert_eq!(read(&mut c), Ok(b"mid".to_vec()));
        assert_eq!(c.recv_urgent(false), Ok(Some(b'B')));
    }
}

#[test]
fn rfc9293_a_repeated_urgent_pointer_is_not_news() {
    let (mut c, now) = established(&plain());
    // The sender split "abcX" and repeats its pointer on each piece.
    give(&mut c, now, PISS + 1, Some(4), b"ab");
    assert!(events(&mut c).contains(&Event::Urgent));
    give(&mut c, now, PISS + 3, Some(2), b"cX");
    assert!(!events(&mut c).contains(&Event::Urgent));
    // A retransmission overlapping what we have: its pointer is behind RCV.NXT.
    give(&mut c, now, PISS + 1, Some(4), b"abcXde");
    assert!(!events(&mut c).contains(&Event::Urgent));
    assert_eq!(read(&mut c), Ok(b"abc".to_vec()));
    assert_eq!(c.recv_urgent(false), Ok(Some(b'X')));
    assert_eq!(read(&mut c), Ok(b"de".to_vec()));
    // Read past the mark, a late copy of the old pointer must not bring it back.
    give(&mut c, now, PISS + 4, Some(1), b"Xdefg");
    assert!(!events(&mut c).contains(&Event::Urgent));
    assert_eq!(c.urgent_mark(), None);
    assert_eq!(read(&mut c), Ok(b"fg".to_vec()));
}

#[test]
fn rfc6093_pointer_zero_names_the_first_byte() {
    let (mut c, now) = established(&plain());
    give(&mut c, now, PISS + 1, Some(0), b"Xab");
    assert_eq!(c.urgent_mark(), Some(0));
    assert_eq!(c.recv_urgent(false), Ok(Some(b'X')));
    assert_eq!(read(&mut c), Ok(b"ab".to_vec()));
}

#[test]
fn rfc9293_sender_marks_segments_before_snd_up_until_acknowledged() {
    let (mut c, now) = established(&plain());
    c.send(b"hello").unwrap();
    let first = poll_one(&mut c, now);
    assert!(!first.has(TcpFlags::URG));
    assert_eq!(c.send_urgent(b"!"), Ok(1));
    // Nagle would hold this small segment behind the unacknowledged one; urgent data goes.
    let urgent = poll_one(&mut c, now);
    assert_eq!(urgent.payload, b"!");
    assert!(urgent.has(TcpFlags::URG));
    assert_eq!(urgent.repr.urgent_at, 1, "SND.UP is the byte after the urgent one");
    // Both are lost: the retransmission, "hello!" together, still says where urgent data ends.
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let again = poll_one(&mut c, t);
    assert_eq!(again.payload, b"hello!");
    assert!(again.has(TcpFlags::URG));
    assert_eq!(again.repr.urgent_at, 6);
    // Acknowledged, with the window closed: urgent mode is over, so the zero-window probe
    // (SEG.SEQ = SND.UNA - 1, which is below SND.UP) carries no URG.
    let t = t + MILLISECOND;
    feed(&mut c, t, ack(PISS + 1, ISS + 7, 0));
    c.send(b"more").unwrap();
    poll_none(&mut c, t);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let probe = poll_one(&mut c, t);
    assert_eq!(probe.seq(), ISS + 6);
    assert!(!probe.has(TcpFlags::URG));
    assert_eq!(probe.repr.urgent_at, 0);
}

#[test]
fn rfc6093_a_pointer_beyond_the_16_bit_field_is_sent_as_0xffff() {
    let (mut c, now) = established(&plain());
    let big = vec![7u8; 70_000];
    assert_eq!(c.send_urgent(&big), Ok(70_000));
    let segs = poll_all(&mut c, now);
    assert!(segs.len() >= 5, "{}", segs.len());
    for s in &segs {
        let up = ISS + 1 + 70_000 - s.seq();
        assert!(s.has(TcpFlags::URG), "seq {}", s.seq());
        let expect = if up > 0xffff { 0xffff } else { up as u16 };
        assert_eq!(s.repr.urgent_at, expect, "seq {}", s.seq());
    }
    assert_eq!(segs[0].repr.urgent_at, 0xffff);
    assert!(segs.iter().any(|s| s.repr.urgent_at != 0xffff));
}

#[test]
fn rfc6093_urgent_byte_crosses_a_lossy_pair() {
    let cfg = Config::default();
    let mut p = Pair::connected(&cfg, &cfg);
    // The first transmission of the segment with the urgent byte is lost.
    p.fate = Box::new(|dir, _, seg| {
        if dir == Dir::AtoB && seg.repr.flags.contains(TcpFlags::URG) && seg.payload.ends_with(b"!") {
            return Fate::Drop;
        }
        Fate::Deliver
    });
    let lead: Vec<u8> = (0..5000).map(stream_byte).collect();
    assert_eq!(p.a.send(&lead), Ok(5000));
    assert_eq!(p.a.send_urgent(b"!"), Ok(1));
    p.flush();
    p.fate = Box::new(|_, _, _| Fate::Deliver);
    assert_eq!(p.a.send(b"tail"), Ok(4));
    let mut got = Vec::new();
    let mut oob = None;
    let done = p.run_until(T0 + 30 * crate::SECOND, |p| {
        let b = p.b();
        // Read as an application does: up to the mark, the urgent byte, then on.
        loop {
            if oob.is_none() && b.urgent_mark() == Some(0) {
                match b.recv_urgent(false) {
                    Ok(byte) => oob = byte,
                    Err(_) => break, // announced, not arrived yet
                }
            }
            match read(b) {
                Ok(chunk) if !chunk.is_empty() => got.extend(chunk),
                _ => break,
            }
        }
        got.len() == 5004
    });
    assert!(done, "got {} bytes", got.len());
    assert_eq!(oob, Some(b'!'));
    assert_eq!(&got[..5000], &lead[..]);
    assert_eq!(&got[5000..], b"tail");
    assert!(p.take_events().1.contains(&Event::Urgent));
}
