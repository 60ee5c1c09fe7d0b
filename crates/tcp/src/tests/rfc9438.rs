//! Group 7: CUBIC (RFC 9438), on the algorithm alone with a fake ACK clock, and as the default
//! of a connection.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, CongestionControl, Connection, Cubic, Duration, Instant, SECOND};

const MSS: u32 = 1000;

/// RFC 9438 figure 1 in segments: W_cubic(t) = C (t - K)^3 + W_max.
fn w_cubic(t: Duration, k: f64, w_max: f64) -> f64 {
    let x = t as f64 / SECOND as f64 - k;
    w_max + 0.4 * x * x * x
}

/// A window of `segments` that has just seen a loss with that much in flight, and knows its
/// RTT.
fn after_loss(segments: u32, rtt: Duration, now: Instant) -> Cubic {
    let mut cc = Cubic::new(segments * MSS);
    cc.on_rtt_update(rtt);
    cc.on_congestion_event(now, segments * MSS, MSS);
    cc
}

/// Acknowledges one segment at a time, a window's worth per `rtt`, from `from` until `to`.
fn ack_clock(cc: &mut Cubic, from: Instant, to: Instant, rtt: Duration) -> Instant {
    let mut now = from;
    while now < to {
        cc.on_ack(now, MSS, MSS);
        now += rtt / u64::from((cc.cwnd() / MSS).max(1));
    }
    now
}

fn segments(cc: &Cubic) -> f64 {
    f64::from(cc.cwnd()) / f64::from(MSS)
}

#[test]
fn rfc9438_window_follows_the_cubic_curve_after_a_loss() {
    // A window of 1000 segments at 100 ms: the cubic curve is above Reno's estimate here.
    let rtt = 100 * MS;
    let mut cc = after_loss(1000, rtt, T0);
    assert_eq!((cc.cwnd(), cc.ssthresh(), cc.w_max()), (700 * MSS, 700 * MSS, 1000 * MSS));
    // K = cbrt((W_max - cwnd_epoch) / C) = cbrt(300 / 0.4): the curve is back at W_max then.
    let k = 750f64.cbrt();
    let mut now = T0;
    for t in [2 * SECOND, 5 * SECOND, (k * SECOND as f64) as Duration, 12 * SECOND, 15 * SECOND] {
        now = ack_clock(&mut cc, now, T0 + t, rtt);
        // cwnd climbs toward W_cubic one RTT ahead: between the curve now and an RTT later.
        // Concave below W_max, flat around K, convex above (NewReno, one segment per RTT,
        // would be at 700 + 10 t).
        let (lo, hi) = (w_cubic(t, k, 1000.0), w_cubic(t + rtt, k, 1000.0));
        let w = segments(&cc);
        assert!(lo - 1.0 <= w && w <= hi + 1.0, "t = {t} ns: cwnd {w} segments, curve {lo} .. {hi}");
    }
}

#[test]
fn rfc9438_multiplicative_decrease_is_0_7_of_the_flight() {
    let mut cc = Cubic::new(100 * MSS);
    cc.on_congestion_event(T0, 80 * MSS, MSS);
    assert_eq!((cc.ssthresh(), cc.cwnd()), (56 * MSS, 56 * MSS));
    // At least two segments.
    cc.on_congestion_event(T0, MSS, MSS);
    assert_eq!((cc.ssthresh(), cc.cwnd()), (2 * MSS, 2 * MSS));
}

#[test]
fn rfc9438_reno_friendly_region_grows_like_reno_on_short_rtts() {
    // W_max 20 segments, 10 ms RTT: the cubic curve needs K = cbrt(15) = 2.5 s to get back,
    // Reno's estimate is faster and wins.
    let rtt = 10 * MS;
    let mut cc = after_loss(20, rtt, T0);
    let start = segments(&cc);
    let now = ack_clock(&mut cc, T0, T0 + 5 * rtt, rtt);
    // α_cubic = 3 (1 - 0.7) / (1 + 0.7) = 9/17 segment per RTT below the window before the
    // loss (the cubic curve alone would give 0.4 segment in all five RTTs).
    let grown = segments(&cc) - start;
    assert!((grown - 5.0 * 9.0 / 17.0).abs() < 0.3, "{grown} segments in 5 RTTs");
    // Above it, α_cubic = 1: one segment per RTT, Reno's pace.
    let now = ack_clock(&mut cc, now, T0 + 500 * MS, rtt);
    let before = segments(&cc);
    ack_clock(&mut cc, now, now + 50 * rtt, rtt);
    let grown = segments(&cc) - before;
    assert!((grown - 50.0).abs() < 2.0, "{grown} segments in 50 RTTs");
    assert!(segments(&cc) > w_cubic(SECOND, 15f64.cbrt(), 20.0) + 50.0);
}

#[test]
fn rfc9438_fast_convergence_gives_up_bandwidth_after_a_loss_below_w_max() {
    let mut cc = after_loss(100, 100 * MS, T0);
    assert_eq!(cc.w_max(), 100 * MSS);
    // The next loss comes at 70 segments, below W_max: W_max = 70 (1 + 0.7) / 2.
    cc.on_congestion_event(T0 + SECOND, 70 * MSS, MSS);
    assert_eq!(cc.w_max(), 59_500);
    assert_eq!(cc.cwnd(), 49 * MSS);
    // A loss at or above W_max remembers the window as it was.
    let mut cc = Cubic::new(100 * MSS);
    cc.on_congestion_event(T0, 100 * MSS, MSS);
    ack_clock(&mut cc, T0, T0 + 8 * SECOND, 100 * MS);
    let w = cc.cwnd();
    assert!(w > 100 * MSS);
    cc.on_congestion_event(T0 + 8 * SECOND, w, MSS);
    assert_eq!(cc.w_max(), w);
}

#[test]
fn rfc9438_timeout_sets_ssthresh_by_beta_and_restarts_the_curve_at_k_0() {
    let rtt = 100 * MS;
    let mut cc = Cubic::new(100 * MSS);
    cc.on_rtt_update(rtt);
    cc.on_retransmission_timeout(T0, 100 * MSS, MSS, true);
    assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 70 * MSS));
    cc.on_retransmission_timeout(T0, 100 * MSS, MSS, false); // backoff: the same loss
    assert_eq!((cc.cwnd(), cc.ssthresh()), (MSS, 70 * MSS));
    // Slow start up to ssthresh, then the curve starts at the window it has (W_max = 70,
    // K = 0): convex from there at once.
    cc.on_ack(T0, 69 * MSS, MSS);
    assert_eq!(cc.cwnd(), 70 * MSS);
    // (At 6 s the curve is above Reno's estimate; with the K of a fast recovery, 4.2 s, it
    // would be at 102 segments.)
    let t = 6 * SECOND;
    ack_clock(&mut cc, T0, T0 + t, rtt);
    assert_eq!(cc.w_max(), 70 * MSS);
    let (lo, hi) = (w_cubic(t, 0.0, 70.0), w_cubic(t + rtt, 0.0, 70.0));
    let w = segments(&cc);
    assert!(lo - 1.0 <= w && w <= hi + 1.0, "cwnd {w} segments, curve {lo} .. {hi}");
}

#[test]
fn rfc9438_time_excludes_pauses_in_growth() {
    let rtt = 100 * MS;
    let mut cc = after_loss(100, rtt, T0);
    let now = ack_clock(&mut cc, T0, T0 + SECOND, rtt);
    let before = segments(&cc);
    // Ten seconds without growth asked for (idle, or the application sent too little): the
    // curve resumes where it was (a segment or so per RTT here), not at W_cubic(11 s), which
    // would grow the window by half in the next RTT.
    let resume = now + 10 * SECOND;
    ack_clock(&mut cc, resume, resume + rtt, rtt);
    let after = segments(&cc);
    assert!(after - before < 3.0, "{before} -> {after} segments");
}

#[test]
fn rfc9438_is_the_default_and_cuts_the_window_to_0_7_of_the_flight() {
    assert_eq!(Config::default().congestion, crate::CongestionAlgorithm::Cubic);
    let mut c = Connection::connect(&plain(), LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let synack = TcpRepr { max_seg_size: Some(MSS as u16), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535) };
    c.handle_segment(T0, &synack, &[]);
    poll_one(&mut c, T0);
    c.send(&[7; 10 * MSS as usize]).unwrap();
    let first = poll_all(&mut c, T0)[0].seq();
    for _ in 0..3 {
        feed(&mut c, T0, ack(PISS + 1, first, 65535));
    }
    assert_eq!(poll_one(&mut c, T0).seq(), first);
    let info = c.info();
    assert!(info.in_recovery);
    assert_eq!((info.ssthresh, info.cwnd), (7 * MSS, 7 * MSS)); // NewReno: 5
}
