//! Group 8: RACK-TLP (RFC 8985): losses found by time with SACK, tail losses by a probe.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::rack::Rack;
use crate::{Config, Connection, Duration, Instant, SECOND};

const MSS: u32 = 1000;
const RTT: Duration = 10 * MS;
/// The RTO after the handshake's sample: max(RTT + 4 RTT/2, 200 ms).
const RTO: Duration = 200 * MS;
/// RACK's reordering window before any reordering: a quarter of the minimum RTT.
const REO_WND: Duration = RTT / 4;

/// With SACK (no timestamps or window scaling), 1000-byte segments, the handshake's RTT
/// sample 10 ms; `cfg` says the rest.
fn est_with(cfg: Config) -> (Connection, Instant) {
    let cfg = Config { window_scale: false, timestamps: false, ..cfg };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let synack = TcpRepr {
        max_seg_size: Some(MSS as u16),
        sack_permitted: cfg.sack,
        ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535)
    };
    let now = T0 + RTT;
    c.handle_segment(now, &synack, &[]);
    poll_one(&mut c, now);
    events(&mut c);
    assert_eq!((c.info().rtt, c.info().rto), (RTT, RTO));
    (c, now)
}

fn est() -> (Connection, Instant) {
    est_with(Config::default())
}

fn send_segments(c: &mut Connection, now: Instant, n: usize) -> Vec<u32> {
    c.send(&vec![8u8; n * MSS as usize]).unwrap();
    let segs = poll_all(c, now);
    assert!(segs.iter().all(|s| s.len() == MSS as usize));
    segs.iter().map(|s| s.seq()).collect()
}

/// An ACK of `ack_no` with SACK blocks.
fn sack(c: &mut Connection, now: Instant, ack_no: u32, blocks: &[(u32, u32)]) {
    let mut ranges = [None; 4];
    for (slot, &b) in ranges.iter_mut().zip(blocks) {
        *slot = Some(b);
    }
    feed(c, now, TcpRepr { sack_ranges: ranges, ..ack(PISS + 1, ack_no, 65535) });
}

fn seqs(segs: &[Seg]) -> Vec<u32> {
    segs.iter().map(|s| s.seq()).collect()
}

#[test]
fn rfc8985_tail_loss_is_repaired_by_a_probe_not_an_rto() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 10);
    // The last two are lost: the ACKs stop at segment 8.
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[8], &[]);
    poll_none(&mut c, t1);
    // The probe is due two RTTs later (plus 2 ms: more than one segment is in flight), long
    // before the RTO.
    let pto = t1 + 2 * RTT + 2 * MS;
    assert_eq!(c.poll_timeout(), Some(pto));
    c.handle_timeout(pto);
    // Nothing new to send: the last segment again.
    let probe = poll_one(&mut c, pto);
    assert_eq!((probe.seq(), probe.len()), (s[9], MSS as usize));
    // Its SACK shows segment 8 missing, sent before it and overdue: RACK marks it lost and
    // fast recovery sends it.
    let t2 = pto + RTT;
    sack(&mut c, t2, s[8], &[(s[9], s[9] + MSS)]);
    assert!(c.info().in_recovery);
    assert_eq!(seqs(&poll_all(&mut c, t2)), [s[8]]);
    sack(&mut c, t2 + RTT, s[9] + MSS, &[]);
    let (info, n) = (c.info(), c.counters());
    assert!(!info.in_recovery);
    assert_eq!((n.timeouts, n.loss_probes, n.rack_lost, n.retransmits), (0, 1, 1, 2));
    assert_eq!(c.poll_timeout(), None);
}

#[test]
fn rfc8985_a_lone_tail_loss_is_probed_at_the_rto_without_collapsing_the_window() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 10);
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[9], &[]);
    let cwnd = c.info().cwnd;
    // One segment in flight: the PTO allows for a delayed ACK (2 RTT + 200 ms), which the
    // RTO cuts short: the probe goes when the RTO would have, but is not one.
    assert_eq!(c.poll_timeout(), Some(t1 + RTO));
    c.handle_timeout(t1 + RTO);
    assert_eq!(seqs(&poll_all(&mut c, t1 + RTO)), [s[9]]);
    assert_eq!((c.counters().timeouts, c.counters().loss_probes), (0, 1));
    assert_eq!(c.info().cwnd, cwnd); // an RTO would leave one segment
                                     // After a probe the RTO is armed, not another probe.
    assert_eq!(c.poll_timeout(), Some(t1 + 2 * RTO));
    let t2 = t1 + RTO + RTT;
    sack(&mut c, t2, s[9] + MSS, &[]);
    // The probe's ACK covers it, nothing beyond: it may have been the original that arrived.
    // The next ACK beyond it says it was the probe (else a D-SACK would have come): the
    // loss was real and repaired by the probe alone. Congestion control responds from the
    // window, as Linux does (the flight at a tail is a segment or two).
    assert_eq!(c.counters().loss_probe_recoveries, 0);
    let next = send_segments(&mut c, t2, 1);
    sack(&mut c, t2 + RTT, next[0] + MSS, &[]);
    assert_eq!(c.counters().loss_probe_recoveries, 1);
    assert_eq!(c.info().ssthresh, cwnd * 7 / 10);
}

#[test]
fn rfc8985_a_dsack_of_the_probe_means_nothing_was_lost() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 10);
    sack(&mut c, t0 + RTT, s[9], &[]);
    let t1 = t0 + RTT + RTO;
    c.handle_timeout(t1);
    poll_one(&mut c, t1);
    // Both copies arrived: the second is reported as a duplicate.
    let end = s[9] + MSS;
    sack(&mut c, t1 + RTT, end, &[]);
    sack(&mut c, t1 + RTT, end, &[(s[9], end)]);
    let next = send_segments(&mut c, t1 + RTT, 1);
    sack(&mut c, t1 + 2 * RTT, next[0] + MSS, &[]);
    assert_eq!(c.counters().loss_probe_recoveries, 0);
    assert_eq!(c.info().ssthresh, u32::MAX);
}

#[test]
fn rfc8985_reordering_within_the_window_is_not_marked_lost() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 4);
    // Segment 1 arrives before segment 0: not lost yet, a quarter RTT to go.
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[0], &[(s[1], s[2])]);
    poll_none(&mut c, t1);
    assert_eq!(c.poll_timeout(), Some(t0 + RTT + REO_WND));
    // Segment 0 comes within it: nothing is sent again.
    let t2 = t1 + MS;
    sack(&mut c, t2, s[2], &[]);
    c.handle_timeout(t2 + REO_WND);
    poll_none(&mut c, t2 + REO_WND);
    sack(&mut c, t2 + RTT, s[3] + MSS, &[]);
    assert_eq!((c.counters().retransmits, c.counters().rack_lost), (0, 0));
    assert!(!c.info().in_recovery && c.info().ssthresh == u32::MAX);
    // Reordering was seen: now even many SACKed segments above a hole do not make it lost
    // before its time (RFC 6675's IsLost would say lost at once).
    let t3 = t2 + 2 * RTT;
    let s = send_segments(&mut c, t3, 10);
    let t4 = t3 + RTT;
    sack(&mut c, t4, s[0], &[(s[1], s[9] + MSS)]);
    poll_none(&mut c, t4);
    assert!(!c.info().in_recovery);
    assert_eq!(c.poll_timeout(), Some(t3 + RTT + REO_WND));
}

#[test]
fn rfc8985_a_loss_is_found_by_time_when_too_few_segments_follow_it() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 2);
    // Only one segment follows the lost one: no duplicate-ACK threshold is ever reached.
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[0], &[(s[1], s[1] + MSS)]);
    poll_none(&mut c, t1);
    // RACK's reordering timer, not the RTO, finds it: sent before a delivered segment and
    // not delivered itself a reordering window after it was due.
    let t = t0 + RTT + REO_WND;
    assert_eq!(c.poll_timeout(), Some(t));
    c.handle_timeout(t);
    assert_eq!(seqs(&poll_all(&mut c, t)), [s[0]]);
    assert!(c.info().in_recovery);
    assert_eq!((c.counters().rack_lost, c.counters().timeouts), (1, 0));
}

#[test]
fn rfc8985_three_sacked_segments_mark_a_hole_lost_at_once_until_reordering_is_seen() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 5);
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[0], &[(s[1], s[4] + MSS)]);
    assert_eq!(seqs(&poll_all(&mut c, t1)), [s[0]]);
    assert_eq!(c.counters().rack_lost, 1);
}

#[test]
fn rfc8985_a_lost_retransmission_is_sent_again_without_an_rto() {
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 10);
    c.send(&vec![9u8; 10 * MSS as usize]).unwrap();
    // Segment 0 is lost; recovery sends it and, as the pipe allows, new data.
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[0], &[(s[1], s[9] + MSS)]);
    let out = poll_all(&mut c, t1);
    assert_eq!(out[0].seq(), s[0]);
    let new: Vec<u32> = seqs(&out[1..]);
    assert!(!new.is_empty());
    // The new data arrives, the retransmission sent just before it does not: lost again.
    let t2 = t1 + RTT;
    let high = new.last().unwrap() + MSS;
    sack(&mut c, t2, s[0], &[(new[0], high), (s[1], s[9] + MSS)]);
    assert_eq!(seqs(&poll_all(&mut c, t2))[0], s[0]);
    assert_eq!((c.counters().lost_retransmits, c.counters().timeouts), (1, 0));
    sack(&mut c, t2 + RTT, high, &[]);
    assert!(!c.info().in_recovery);
}

#[test]
fn rfc8985_the_probe_is_new_data_when_the_peer_window_allows() {
    let (mut c, t0) = est();
    c.send(&vec![1u8; 20 * MSS as usize]).unwrap();
    let first = poll_all(&mut c, t0);
    assert_eq!(first.len(), 10); // the initial window
    let pto = t0 + 2 * RTT + 2 * MS;
    assert_eq!(c.poll_timeout(), Some(pto));
    c.handle_timeout(pto);
    // Beyond the congestion window: a probe only asks for the peer's window.
    let probe = poll_one(&mut c, pto);
    assert_eq!(probe.seq(), first[9].seq() + MSS);
    // Its SACK makes all ten before it lost at once (DupThresh of data is not needed: a
    // delivered later segment and the time are enough).
    sack(&mut c, pto + RTT, first[0].seq(), &[(probe.seq(), probe.seq() + MSS)]);
    assert!(c.info().in_recovery);
    assert_eq!(c.counters().rack_lost, 10);
    assert_eq!(c.counters().loss_probes, 1);
}

#[test]
fn rfc8985_no_probe_without_sack_or_during_recovery() {
    let (mut c, t0) = est_with(Config { sack: false, ..Config::default() });
    send_segments(&mut c, t0, 10);
    assert_eq!(c.poll_timeout(), Some(t0 + RTO));
    let (mut c, t0) = est_with(Config { rack_tlp: false, ..Config::default() });
    send_segments(&mut c, t0, 10);
    assert_eq!(c.poll_timeout(), Some(t0 + RTO));
    // In recovery the RTO is the backstop, no probe (SACKs alone do not restart it).
    let (mut c, t0) = est();
    let s = send_segments(&mut c, t0, 10);
    let t1 = t0 + RTT;
    sack(&mut c, t1, s[0], &[(s[1], s[5])]);
    poll_all(&mut c, t1);
    assert!(c.info().in_recovery);
    assert_eq!(c.poll_timeout(), Some(t0 + RTO));
}

#[test]
fn rfc8985_dsacks_widen_the_reordering_window_for_16_recoveries() {
    let mut rack = Rack::new(0);
    rack.rtt_sample(40 * MS);
    let srtt = 100 * MS;
    assert_eq!(rack.reo_wnd(false, false, srtt), 10 * MS);
    // No reordering seen: none in recovery or once DupThresh segments are SACKed.
    assert_eq!((rack.reo_wnd(true, false, srtt), rack.reo_wnd(false, true, srtt)), (0, 0));
    // A D-SACK (a needless retransmission): two quarters of the minimum RTT, once per round
    // trip (until SND.UNA passes what was sent then).
    rack.update_reo_wnd(0, 5000, true, false);
    assert_eq!(rack.reo_wnd(true, true, srtt), 20 * MS);
    rack.update_reo_wnd(1000, 6000, true, false);
    assert_eq!(rack.reo_wnd(false, false, srtt), 20 * MS);
    rack.update_reo_wnd(5000, 7000, true, false);
    assert_eq!(rack.reo_wnd(false, false, srtt), 30 * MS);
    // Never more than the smoothed RTT.
    assert_eq!(rack.reo_wnd(false, false, 25 * MS), 25 * MS);
    // Kept for 16 recoveries without D-SACK, then back to one quarter.
    for _ in 0..15 {
        rack.update_reo_wnd(9000, 9000, false, true);
    }
    assert_eq!(rack.reo_wnd(false, false, srtt), 30 * MS);
    rack.update_reo_wnd(9000, 9000, false, true);
    assert_eq!(rack.reo_wnd(false, false, srtt), 10 * MS);
}

#[test]
fn rfc8985_lossy_pair_moves_every_byte() {
    // Loss and reordering both ways, timestamps on: the data arrives intact, RACK finding the
    // losses.
    let mut p = Pair::connected(&Config::default(), &Config::default());
    let mut rng = Rng::new(99);
    p.fate = Box::new(move |_, _, _| match rng.next_u64() % 100 {
        0..=2 => Fate::Drop,
        3..=5 => Fate::Delay((1 + rng.next_u64() % 3) * MS),
        _ => Fate::Deliver,
    });
    let data: Vec<u8> = (0..2_000_000).map(stream_byte).collect();
    assert!(deliver(&mut p, &data, 600 * SECOND));
    let n = p.a.counters();
    assert!(n.rack_lost > 0 && n.rack_lost <= n.retransmits, "{n:?}");
}
