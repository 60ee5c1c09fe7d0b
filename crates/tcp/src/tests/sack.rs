//! Group 6: SACK (RFC 2018) and SACK-based loss recovery (RFC 6675).

use std::collections::BTreeSet;

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, CongestionAlgorithm, Connection, Instant, SECOND};

const MSS: u32 = 1000;

fn with_ts(repr: TcpRepr) -> TcpRepr {
    TcpRepr { timestamp: Some((900, 1000)), ..repr }
}

#[test]
fn rfc2018_sack_blocks_for_out_of_order_data_most_recent_first() {
    let (mut c, now) = established(&Config::default()); // timestamps: 3 blocks fit
    assert!(c.info().sack);
    let n = PISS + 1;
    let blocks_after = |c: &mut Connection, off: u32, len: usize| {
        feed(c, now, with_ts(data(n + off, ISS + 1, len)));
        let a = poll_one(c, now);
        a.repr.sack_ranges.iter().flatten().map(|&(l, r)| (l - n, r - n)).collect::<Vec<_>>()
    };
    assert_eq!(blocks_after(&mut c, 1000, 100), [(1000, 1100)]);
    assert_eq!(blocks_after(&mut c, 3000, 100), [(3000, 3100), (1000, 1100)]);
    assert_eq!(blocks_after(&mut c, 5000, 100), [(5000, 5100), (3000, 3100), (1000, 1100)]);
    assert_eq!(blocks_after(&mut c, 7000, 100), [(7000, 7100), (5000, 5100), (3000, 3100)]);
    // A segment that extends a block makes it the first.
    assert_eq!(blocks_after(&mut c, 1100, 100), [(1000, 1200), (7000, 7100), (5000, 5100)]);
    // Filling the first hole: the ACK moves, the block it reached is gone.
    feed(&mut c, now, with_ts(data(n, ISS + 1, 1000)));
    let a = poll_one(&mut c, now);
    assert_eq!(a.ack(), Some(n + 1200));
    let blocks: Vec<_> = a.repr.sack_ranges.iter().flatten().map(|&(l, r)| (l - n, r - n)).collect();
    assert_eq!(blocks, [(7000, 7100), (5000, 5100), (3000, 3100)]);
    // What we return is what goes on the wire: it fits the 40 option bytes.
    assert!(a.repr.header_len() <= 60);
}

#[test]
fn rfc2018_sack_block_covers_an_out_of_order_fin() {
    // Linux queues an out-of-order FIN with its data and SACKs up to its end_seq: the block
    // covers the FIN's sequence number, and a FIN alone ahead of a hole has a block of its own.
    let (mut c, now) = established(&Config::default());
    let n = PISS + 1;
    let fin = |repr: TcpRepr| TcpRepr { flags: repr.flags | TcpFlags::FIN, ..repr };
    feed(&mut c, now, with_ts(fin(data(n + 100, ISS + 1, 100))));
    let a = poll_one(&mut c, now);
    assert_eq!(a.ack(), Some(n));
    assert_eq!(a.repr.sack_ranges, [Some((n + 100, n + 201)), None, None, None]);
    // The hole filled: everything, the FIN included, is acknowledged.
    feed(&mut c, now, with_ts(data(n, ISS + 1, 100)));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.sack_ranges), (Some(n + 201), [None; 4]));

    let (mut c, now) = established(&Config::default());
    feed(&mut c, now, with_ts(data(n + 100, ISS + 1, 100)));
    poll_one(&mut c, now);
    feed(&mut c, now, with_ts(fin(data(n + 300, ISS + 1, 0))));
    let a = poll_one(&mut c, now);
    assert_eq!(a.repr.sack_ranges, [Some((n + 300, n + 301)), Some((n + 100, n + 200)), None, None]);
}

#[test]
fn rfc2018_data_header_len_is_the_header_of_the_next_data_segment() {
    // The stack places the payload after `data_header_len()` bytes and writes the header in
    // front of it: the SACK blocks (and a D-SACK block, sent once) change that length.
    let (mut c, now) = established(&Config::default());
    let n = PISS + 1;
    assert_eq!(c.data_header_len(), 20 + 12);
    feed(&mut c, now, with_ts(data(n + 1000, ISS + 1, 100)));
    feed(&mut c, now, with_ts(data(n + 3000, ISS + 1, 100)));
    feed(&mut c, now, with_ts(data(n + 3000, ISS + 1, 100)));
    c.set_nodelay(true);
    c.send(&[7; 3000]).unwrap();
    let mut lens = Vec::new();
    loop {
        let predicted = c.data_header_len();
        let mut buf = [0u8; 1500];
        let Some(repr) = c.poll_transmit(now, &mut buf) else { break };
        if repr.payload_len > 0 {
            assert_eq!(repr.header_len(), predicted);
            lens.push(predicted);
        }
    }
    // The first data segment carries the D-SACK block as well, the next ones the two blocks.
    assert_eq!(lens, [20 + 12 + 4 + 24, 20 + 12 + 4 + 16, 20 + 12 + 4 + 16]);
}

#[test]
fn rfc2018_data_header_len_counts_the_block_of_a_fin_alone_ahead_of_a_hole() {
    // A FIN with no data ahead of a hole: nothing is queued out of order, yet it has a SACK
    // block of its own, so the data segments carry it.
    let (mut c, now) = established(&Config::default());
    let n = PISS + 1;
    let fin = with_ts(data(n + 100, ISS + 1, 0));
    feed(&mut c, now, TcpRepr { flags: fin.flags | TcpFlags::FIN, ..fin });
    c.set_nodelay(true);
    c.send(&[7; 100]).unwrap();
    let predicted = c.data_header_len();
    let mut buf = [0u8; 1500];
    let repr = std::iter::from_fn(|| c.poll_transmit(now, &mut buf)).find(|r| r.payload_len > 0).unwrap();
    assert_eq!(repr.sack_ranges, [Some((n + 100, n + 101)), None, None, None]);
    assert_eq!((predicted, repr.header_len()), (20 + 12 + 12, 20 + 12 + 12));
}

#[test]
fn rfc2018_four_blocks_without_timestamps() {
    let cfg = Config { timestamps: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    let n = PISS + 1;
    for off in [1000, 3000, 5000, 7000, 9000] {
        feed(&mut c, now, data(n + off, ISS + 1, 100));
    }
    let acks = poll_all(&mut c, now);
    let last = acks.last().unwrap();
    let blocks: Vec<_> = last.repr.sack_ranges.iter().flatten().map(|&(l, r)| (l - n, r - n)).collect();
    assert_eq!(blocks, [(9000, 9100), (7000, 7100), (5000, 5100), (3000, 3100)]);
    assert_eq!(last.repr.header_len(), 20 + 4 + 32);
}

/// The SACK blocks of an ACK, relative to `n`.
fn blocks_of(a: &Seg, n: u32) -> Vec<(u32, u32)> {
    a.repr.sack_ranges.iter().flatten().map(|&(l, r)| (l.wrapping_sub(n), r.wrapping_sub(n))).collect()
}

#[test]
fn rfc2883_dsack_reports_a_duplicate_below_rcv_nxt_once() {
    let (mut c, now) = established(&Config { timestamps: false, ..Config::default() });
    let n = PISS + 1;
    feed(&mut c, now, data(n, ISS + 1, 100));
    c.handle_timeout(now + 40 * MS);
    assert_eq!(blocks_of(&poll_one(&mut c, now + 40 * MS), n), []);
    // The peer retransmits what we have (its ACK was lost): the first SACK block of the
    // immediate ACK reports the duplicate (RFC 2883 section 4, example 1)...
    feed(&mut c, now, data(n, ISS + 1, 100));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), blocks_of(&a, n)), (Some(n + 100), vec![(0, 100)]));
    // ...in that one ACK only.
    feed(&mut c, now, data(n + 300, ISS + 1, 100));
    assert_eq!(blocks_of(&poll_one(&mut c, now), n), [(300, 400)]);
    // A segment partly below RCV.NXT: its duplicate head, ahead of the other blocks.
    feed(&mut c, now, data(n + 50, ISS + 1, 100));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), blocks_of(&a, n)), (Some(n + 150), vec![(50, 100), (300, 400)]));
    assert_eq!(read_all(&mut c).len(), 150);
}

#[test]
fn rfc2883_dsack_reports_a_duplicate_of_out_of_order_data_then_its_block() {
    let (mut c, now) = established(&Config::default()); // timestamps: 3 blocks fit
    let n = PISS + 1;
    feed(&mut c, now, with_ts(data(n + 1000, ISS + 1, 100)));
    feed(&mut c, now, with_ts(data(n + 3000, ISS + 1, 100)));
    assert_eq!(blocks_of(&poll_all(&mut c, now).pop().unwrap(), n), [(3000, 3100), (1000, 1100)]);
    // Part of the first block again: the D-SACK block, then the block that holds it (RFC 2883
    // section 4.1.2), then the others.
    feed(&mut c, now, with_ts(data(n + 1050, ISS + 1, 100)));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), blocks_of(&a, n)), (Some(n), vec![(1050, 1100), (1000, 1150), (3000, 3100)]));
    // New out-of-order data is no duplicate.
    feed(&mut c, now, with_ts(data(n + 5000, ISS + 1, 100)));
    assert_eq!(blocks_of(&poll_one(&mut c, now), n), [(5000, 5100), (1000, 1150), (3000, 3100)]);
}

#[test]
fn rfc2883_no_dsack_without_sack() {
    let (mut c, now) = established(&plain());
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.sack_ranges), (Some(PISS + 101), [None; 4]));
}

#[test]
fn rfc2018_no_sack_unless_both_offer() {
    let cfg = Config::default();
    let syn = TcpRepr { sack_permitted: false, ..peer_syn(&cfg) };
    let mut c = Connection::accept(&cfg, &syn, ISS, T0);
    let synack = poll_one(&mut c, T0);
    assert!(!synack.repr.sack_permitted);
    feed(&mut c, T0, with_ts(ack(PISS + 1, ISS + 1, 1000)));
    feed(&mut c, T0, with_ts(data(PISS + 1001, ISS + 1, 100)));
    let a = poll_one(&mut c, T0);
    assert_eq!(a.repr.sack_ranges, [None; 4]);
    assert!(!c.info().sack);
}

/// Established with SACK and timestamps, peer MSS 1012: 1000-byte segments. RFC 6675's loss
/// detection (no RACK-TLP) and NewReno's window, the subjects of these tests.
fn est_sack() -> (Connection, Instant) {
    let cfg =
        Config { window_scale: false, rack_tlp: false, congestion: CongestionAlgorithm::NewReno, ..Config::default() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    let syn = poll_one(&mut c, T0);
    let synack = TcpRepr {
        max_seg_size: Some(1012),
        sack_permitted: true,
        timestamp: Some((777, syn.repr.timestamp.unwrap().0)),
        ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535)
    };
    c.handle_segment(T0, &synack, &[]);
    poll_one(&mut c, T0);
    events(&mut c);
    assert_eq!(c.info().snd_mss, MSS);
    (c, T0)
}

fn sack(c: &mut Connection, now: Instant, ack_no: u32, blocks: &[(u32, u32)]) {
    let mut ranges = [None; 4];
    for (slot, &b) in ranges.iter_mut().zip(blocks) {
        *slot = Some(b);
    }
    feed(c, now, TcpRepr { sack_ranges: ranges, ..with_ts(ack(PISS + 1, ack_no, 65535)) });
}

fn send_segments(c: &mut Connection, now: Instant, n: usize) -> Vec<u32> {
    c.send(&vec![3u8; n * MSS as usize]).unwrap();
    let segs = poll_all(c, now);
    assert!(segs.iter().all(|s| s.len() == MSS as usize));
    segs.iter().map(|s| s.seq()).collect()
}

#[test]
fn rfc6675_sacked_data_is_never_retransmitted() {
    let (mut c, now) = est_sack();
    let s = send_segments(&mut c, now, 10);
    c.send(&vec![4u8; 5 * MSS as usize]).unwrap(); // more to send during recovery
    let mut out = Vec::new();
    // Segment 0 lost; 1.. arrive, each brings a SACK.
    for k in 2..=10 {
        let end = if k == 10 { s[9] + MSS } else { s[k] };
        sack(&mut c, now, s[0], &[(s[1], end)]);
        out.extend(poll_all(&mut c, now));
    }
    // Only the lost one is sent again; SACKed ones never; new data goes as the pipe drains.
    let rtx: Vec<u32> = out.iter().filter(|x| x.seq() < s[9] + MSS).map(|x| x.seq()).collect();
    assert_eq!(rtx, [s[0]]);
    assert!(out.iter().filter(|x| x.seq() >= s[9] + MSS).count() >= 3);
    assert!(c.info().in_recovery);
    // The retransmission arrives: everything is acknowledged.
    let high = out.iter().map(|x| x.seq() + x.len() as u32).max().unwrap();
    sack(&mut c, now + 10 * MS, high, &[]);
    assert!(!c.info().in_recovery);
    assert_eq!(c.info().total_retransmits, 1);
}

#[test]
fn rfc6675_every_lost_hole_is_retransmitted_in_one_round_trip() {
    let (mut c, now) = est_sack();
    let s = send_segments(&mut c, now, 10);
    let end = s[9] + MSS;
    // 0, 3 and 6 are lost.
    let acks: [&[(u32, u32)]; 7] = [
        &[(s[1], s[2])],
        &[(s[1], s[3])],
        &[(s[4], s[5]), (s[1], s[3])],
        &[(s[4], s[6]), (s[1], s[3])],
        &[(s[7], s[8]), (s[4], s[6]), (s[1], s[3])],
        &[(s[7], s[9]), (s[4], s[6]), (s[1], s[3])],
        &[(s[7], end), (s[4], s[6]), (s[1], s[3])],
    ];
    let mut rtx = Vec::new();
    for blocks in acks {
        sack(&mut c, now, s[0], blocks);
        rtx.extend(poll_all(&mut c, now).iter().map(|x| x.seq()));
    }
    assert_eq!(rtx, [s[0], s[3], s[6]]);
    assert_eq!(c.info().cwnd, 5 * MSS); // ssthresh = FlightSize / 2
                                        // All three arrive: one cumulative ACK ends the recovery. No RTO was needed.
    sack(&mut c, now + 10 * MS, end, &[]);
    assert!(!c.info().in_recovery);
    assert_eq!(c.info().backoff, 0);
}

#[test]
fn rfc6675_pipe_limits_what_is_sent() {
    let (mut c, now) = est_sack();
    let s = send_segments(&mut c, now, 10);
    c.send(&vec![4u8; 10 * MSS as usize]).unwrap();
    // Three segments SACKed: 0 is lost; pipe = 6 un-SACKed segments + the retransmission.
    sack(&mut c, now, s[0], &[(s[1], s[4])]);
    let out = poll_all(&mut c, now);
    assert_eq!(out.iter().map(|x| x.seq()).collect::<Vec<_>>(), [s[0]]);
    // Two more SACKed: pipe 5 = cwnd, still nothing.
    sack(&mut c, now, s[0], &[(s[1], s[6])]);
    poll_none(&mut c, now);
    // One more: pipe 4, one new segment.
    sack(&mut c, now, s[0], &[(s[1], s[7])]);
    let out = poll_all(&mut c, now);
    assert_eq!(out.iter().map(|x| x.seq()).collect::<Vec<_>>(), [s[9] + MSS]);
}

#[test]
fn rfc6675_go_back_after_rto_skips_sacked_segments() {
    let (mut c, now) = est_sack();
    let s = send_segments(&mut c, now, 10);
    // Only segment 5 arrived (not enough to call anything lost).
    sack(&mut c, now, s[0], &[(s[5], s[6])]);
    poll_none(&mut c, now);
    let mut t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    let mut sent = BTreeSet::new();
    let mut ack_no = s[0];
    for _ in 0..20 {
        let out = poll_all(&mut c, t);
        if out.is_empty() {
            break;
        }
        for x in &out {
            sent.insert(x.seq());
        }
        ack_no = out.iter().map(|x| x.seq() + x.len() as u32).max().unwrap();
        if ack_no == s[5] {
            ack_no = s[6]; // the receiver had 5 already
        }
        t += 10 * MS;
        sack(&mut c, t, ack_no, &[]);
    }
    assert_eq!(ack_no, s[9] + MSS);
    let want: BTreeSet<u32> = s.iter().copied().filter(|&x| x != s[5]).collect();
    assert_eq!(sent, want);
}

#[test]
fn rfc2018_sack_ignored_when_not_negotiated() {
    let cfg = Config { sack: false, window_scale: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    c.send(&vec![1u8; 10 * 1448]).unwrap();
    let segs = poll_all(&mut c, now);
    // SACK blocks from a peer that did not negotiate them change nothing: 2 dupacks are 2.
    let a = segs[0].seq();
    for _ in 0..2 {
        sack(&mut c, now, a, &[(segs[1].seq(), segs[9].seq())]);
    }
    assert!(!c.info().in_recovery);
}

#[test]
fn rfc6675_recovery_over_a_lossy_pair() {
    // Three segments of one window are lost: SACK recovery repairs all three in about one
    // round trip, without a timeout.
    let mut p = Pair::connected(&Config::default(), &Config::default());
    let base = p.count[0];
    p.fate = Box::new(move |dir, idx, _| {
        if dir == Dir::AtoB && [base + 3, base + 5, base + 8].contains(&idx) {
            Fate::Drop
        } else {
            Fate::Deliver
        }
    });
    let data: Vec<u8> = (0..200_000).map(stream_byte).collect();
    assert!(deliver(&mut p, &data, 10 * SECOND));
    assert_eq!(p.a.info().total_retransmits, 3);
    // No timeout: no segment was sent twice by A except the three.
    let seqs: Vec<u32> = p.sent(Dir::AtoB).iter().filter(|r| r.payload_len > 0).map(|r| r.seq_number).collect();
    let unique: BTreeSet<u32> = seqs.iter().copied().collect();
    assert_eq!(seqs.len() - unique.len(), 3);
}

#[test]
fn rfc6675_rto_resends_a_short_hole_in_front_of_sacked_data() {
    let (mut c, now) = est_sack();
    c.set_nodelay(true);
    c.send(&[1; 300]).unwrap();
    let small = poll_one(&mut c, now);
    let s = send_segments(&mut c, now, 3);
    // Only the segment after the small one arrived: not enough to call anything lost.
    sack(&mut c, now, small.seq(), &[(s[0], s[1])]);
    poll_none(&mut c, now);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    // The 300-byte hole goes again, even though it is shorter than an MSS.
    let rtx = poll_one(&mut c, t);
    assert_eq!((rtx.seq(), rtx.len()), (small.seq(), 300));
}

#[test]
fn poll_transmit_with_no_payload_room_still_ends() {
    let (mut c, now) = est_sack();
    let s = send_segments(&mut c, now, 10);
    sack(&mut c, now, s[0], &[(s[1], s[5])]); // recovery: retransmissions are due
    let mut n = 0;
    while c.poll_transmit(now, &mut []).is_some() {
        n += 1;
        assert!(n < 10);
    }
    // With a buffer, the retransmission goes.
    assert_eq!(poll_all(&mut c, now)[0].seq(), s[0]);
}
