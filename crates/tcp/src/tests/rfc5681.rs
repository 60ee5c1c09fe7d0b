//! Group 5: congestion control (RFC 5681) and NewReno fast recovery (RFC 6582), without SACK.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, CongestionAlgorithm, CongestionControl, Connection, Instant, NewReno};

const MSS: u32 = 1000;

/// Established with a peer MSS of 1000 (no options), nothing sent yet; NewReno, whatever `cfg`
/// says (the numbers below are RFC 5681's).
fn est(cfg: &Config) -> (Connection, Instant) {
    let cfg = Config { congestion: CongestionAlgorithm::NewReno, ..*cfg };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let synack = TcpRepr { max_seg_size: Some(MSS as u16), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) };
    c.handle_segment(T0, &synack, &[]);
    poll_one(&mut c, T0);
    events(&mut c);
    (c, T0)
}

/// Sends `n` full segments of new data; returns their sequence numbers.
fn send_segments(c: &mut Connection, now: Instant, n: usize) -> Vec<u32> {
    c.send(&vec![5u8; n * MSS as usize]).unwrap();
    let segs = poll_all(c, now);
    assert!(segs.iter().all(|s| s.len() == MSS as usize));
    segs.iter().map(|s| s.seq()).collect()
}

fn dupack(c: &mut Connection, now: Instant, ack_no: u32) {
    feed(c, now, ack(PISS + 1, ack_no, 65535));
}

#[test]
fn rfc6928_initial_window_is_ten_segments() {
    let (mut c, now) = est(&plain());
    assert_eq!(c.info().cwnd, 10 * MSS);
    assert_eq!(send_segments(&mut c, now, 20).len(), 10);
    assert_eq!(c.info().bytes_in_flight, 10 * MSS);
}

#[test]
fn rfc5681_slow_start_grows_by_what_is_acked() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    c.send(&vec![5u8; 100 * MSS as usize]).unwrap();
    let mut more = Vec::new();
    for (i, s) in seqs.iter().enumerate() {
        feed(&mut c, now + 10 * MS, ack(PISS + 1, s + MSS, 65535));
        assert_eq!(c.info().cwnd, (11 + i as u32) * MSS);
        // Each ACK lets two segments go: the window stays in use.
        let out = poll_all(&mut c, now + 10 * MS);
        assert_eq!(out.len(), 2);
        more.extend(out);
    }
    // An ACK of five segments adds five (Linux's byte counting, not RFC 5681's one SMSS per
    // ACK: receivers that coalesce ACKs would stall slow start otherwise).
    feed(&mut c, now + 20 * MS, ack(PISS + 1, more[4].seq() + MSS, 65535));
    assert_eq!(c.info().cwnd, 25 * MSS);
}

#[test]
fn rfc7661_cwnd_does_not_grow_when_application_limited() {
    let (mut c, now) = est(&plain());
    for i in 0..50u32 {
        c.send(&[1; 100]).unwrap();
        poll_one(&mut c, now);
        feed(&mut c, now, ack(PISS + 1, ISS + 1 + 100 * (i + 1), 65535));
    }
    assert_eq!(c.info().cwnd, 10 * MSS);
}

#[test]
fn rfc5681_slow_start_stops_at_ssthresh() {
    let mut cc = NewReno::new(10 * MSS);
    cc.on_congestion_event(0, 24 * MSS, MSS); // ssthresh 12 MSS
    cc.on_retransmission_timeout(0, 24 * MSS, MSS, false); // cwnd 1 MSS, ssthresh kept
    assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 12 * MSS));
    cc.on_ack(0, 8 * MSS, MSS);
    assert_eq!(cc.cwnd(), 9 * MSS);
    // Crossing ssthresh: slow start up to it, the rest counts toward congestion avoidance.
    cc.on_ack(0, 6 * MSS, MSS);
    assert_eq!(cc.cwnd(), 12 * MSS);
    cc.on_ack(0, 9 * MSS, MSS); // 3 + 9 = 12 MSS acknowledged in avoidance: one more
    assert_eq!(cc.cwnd(), 13 * MSS);
}

#[test]
fn rfc5681_congestion_avoidance_adds_one_mss_per_window() {
    let mut cc = NewReno::new(10 * MSS);
    cc.on_congestion_event(0, 10 * MSS, MSS);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (5 * MSS, 5 * MSS));
    for _ in 0..4 {
        cc.on_ack(0, MSS, MSS);
    }
    assert_eq!(cc.cwnd(), 5 * MSS);
    cc.on_ack(0, MSS, MSS); // a whole cwnd acknowledged
    assert_eq!(cc.cwnd(), 6 * MSS);
    for _ in 0..6 {
        cc.on_ack(0, MSS, MSS);
    }
    assert_eq!(cc.cwnd(), 7 * MSS);
    // ssthresh is at least two segments.
    cc.on_congestion_event(0, MSS, MSS);
    assert_eq!(cc.ssthresh(), 2 * MSS);
}

#[test]
fn rfc5681_two_duplicate_acks_are_not_a_loss() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    dupack(&mut c, now, seqs[0]);
    dupack(&mut c, now, seqs[0]);
    poll_none(&mut c, now);
    assert!(!c.info().in_recovery);
    // Not duplicates: a window update, or a segment with data.
    feed(&mut c, now, ack(PISS + 1, seqs[0], 30000));
    feed(&mut c, now, data(PISS + 1, seqs[0], 10));
    assert!(!c.info().in_recovery);
}

#[test]
fn rfc5681_three_duplicate_acks_trigger_fast_retransmit() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    for _ in 0..3 {
        dupack(&mut c, now, seqs[0]);
    }
    let rtx = poll_one(&mut c, now); // at once, not waiting for the RTO
    assert_eq!((rtx.seq(), rtx.len()), (seqs[0], MSS as usize));
    let info = c.info();
    assert!(info.in_recovery);
    assert_eq!((info.ssthresh, info.cwnd), (5 * MSS, 5 * MSS));
    assert_eq!(info.total_retransmits, 1);
}

#[test]
fn rfc6582_dupacks_inflate_the_window_and_let_new_data_go() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    c.send(&vec![6u8; 5 * MSS as usize]).unwrap();
    for _ in 0..3 {
        dupack(&mut c, now, seqs[0]);
    }
    poll_one(&mut c, now); // the fast retransmit; cwnd = ssthresh + 3 SMSS = 8 SMSS < flight
    dupack(&mut c, now, seqs[0]);
    dupack(&mut c, now, seqs[0]);
    poll_none(&mut c, now); // 9, 10 SMSS: still not above the flight
    dupack(&mut c, now, seqs[0]);
    let new = poll_one(&mut c, now); // 11 SMSS: one new segment
    assert_eq!(new.seq(), seqs[9] + MSS);
}

#[test]
fn rfc6582_partial_ack_retransmits_the_next_hole_at_once() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    // Segments 0 and 4 are lost: 1, 2, 3 bring duplicate ACKs.
    for _ in 0..3 {
        dupack(&mut c, now, seqs[0]);
    }
    assert_eq!(poll_one(&mut c, now).seq(), seqs[0]);
    for _ in 5..10 {
        dupack(&mut c, now, seqs[0]);
    }
    poll_all(&mut c, now);
    // The retransmission arrives: the ACK stops at the second hole. Partial ACK.
    let t = now + 10 * MS;
    feed(&mut c, t, ack(PISS + 1, seqs[4], 65535));
    let segs = poll_all(&mut c, t);
    assert_eq!((segs[0].seq(), segs[0].len()), (seqs[4], MSS as usize));
    assert!(c.info().in_recovery);
    assert_eq!(c.info().total_retransmits, 2);
}

#[test]
fn rfc6582_full_ack_ends_recovery_without_a_burst() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    for _ in 0..8 {
        dupack(&mut c, now, seqs[0]);
    }
    poll_all(&mut c, now);
    let t = now + 10 * MS;
    let high = seqs[9] + MSS;
    feed(&mut c, t, ack(PISS + 1, high, 65535));
    let info = c.info();
    assert!(!info.in_recovery);
    // cwnd = min(ssthresh, max(FlightSize, SMSS) + SMSS) with what is still in flight.
    let flight = info.bytes_in_flight;
    assert_eq!(info.cwnd, (5 * MSS).min(flight.max(MSS) + MSS));
}

#[test]
fn rfc5681_rto_sets_ssthresh_and_the_loss_window() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let rtx = poll_one(&mut c, t);
    assert_eq!(rtx.seq(), seqs[0]);
    let info = c.info();
    assert_eq!((info.ssthresh, info.cwnd), (5 * MSS, MSS));
    // A second timeout keeps ssthresh (the same loss).
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    poll_one(&mut c, t);
    assert_eq!((c.info().ssthresh, c.info().cwnd), (5 * MSS, MSS));
}

#[test]
fn rfc6582_no_fast_retransmit_for_data_sent_before_an_rto() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    poll_one(&mut c, t);
    // Duplicate ACKs below `recover`: not a new loss.
    for _ in 0..5 {
        dupack(&mut c, t, seqs[0]);
    }
    assert!(!c.info().in_recovery);
    poll_none(&mut c, t);
}

#[test]
fn rfc5681_recovery_over_a_lossy_pair_without_sack() {
    // One segment in the middle of a window is lost; NewReno repairs it without an RTO.
    let mut p = Pair::connected(&plain(), &plain());
    let base = p.count[0];
    p.fate = Box::new(move |dir, idx, _| if dir == Dir::AtoB && idx == base + 5 { Fate::Drop } else { Fate::Deliver });
    let data: Vec<u8> = (0..100_000).map(stream_byte).collect();
    assert!(deliver(&mut p, &data, 10 * crate::SECOND));
    let info = p.a.info();
    assert_eq!(info.total_retransmits, 1);
    assert!(info.ssthresh < u32::MAX);
}

#[test]
fn rfc3042_limited_transmit_sends_one_new_segment_for_each_of_the_first_two_duplicates() {
    let (mut c, now) = est(&plain());
    let seqs = send_segments(&mut c, now, 10);
    c.send(&vec![5u8; 20 * MSS as usize]).unwrap();
    assert!(poll_all(&mut c, now).is_empty(), "the window is full");
    // RFC 3042: the flight may reach cwnd + 2 SMSS, one segment per duplicate ACK.
    dupack(&mut c, now, seqs[0]);
    assert_eq!(poll_all(&mut c, now).len(), 1, "one segment for the first duplicate");
    assert_eq!(poll_all(&mut c, now).len(), 0);
    dupack(&mut c, now, seqs[0]);
    assert_eq!(poll_all(&mut c, now).len(), 1, "one more for the second");
    assert_eq!(c.info().bytes_in_flight, 12 * MSS);
    assert!(!c.info().in_recovery);
}
