//! TCP segmentation offload (`Config::tso`): new data leaves in segments of several MSS, whole
//! MSS multiples, sized as Linux's `tcp_tso_autosize` and bounded by the congestion and peer
//! windows; what is sent again goes one MSS at a time.

use super::harness::*;
use wire::{TcpFlags, TcpRepr};

use crate::{Config, Connection, Instant};

/// The payload of a full segment with timestamps: 1460 - 12.
const MSS: usize = 1448;

fn tso() -> Config {
    Config { tso: true, ..Config::default() }
}

/// Everything the connection sends now, given a 64 KiB buffer as a stack with the offload does.
fn poll_large(c: &mut Connection, now: Instant) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65_000];
    while let Some(repr) = c.poll_transmit(now, &mut buf) {
        out.push(Seg { repr, payload: buf[..repr.payload_len].to_vec(), ect: c.transmit_ect() });
        assert!(out.len() < 10_000, "poll_transmit does not stop");
    }
    out
}

fn lens(segs: &[Seg]) -> Vec<usize> {
    segs.iter().map(Seg::len).filter(|&l| l > 0).collect()
}

/// The peer's ACK of everything up to `upto`, echoing `tsecr`.
fn ack_ts(upto: u32, tsecr: u32) -> TcpRepr {
    TcpRepr { timestamp: Some((778, tsecr)), ..ack(PISS + 1, upto, 65535) }
}

#[test]
fn tso_the_initial_window_leaves_as_one_segment_of_whole_mss() {
    let data = vec![7u8; 100_000];
    let (mut plain, now) = established(&Config::default());
    plain.send(&data).unwrap();
    assert_eq!(lens(&poll_large(&mut plain, now)), [MSS; 10], "without the offload: one MSS each");
    let (mut c, now) = established(&tso());
    c.send(&data).unwrap();
    assert_eq!(lens(&poll_large(&mut c, now)), [10 * MSS], "the congestion window, in one segment");
}

#[test]
fn tso_a_short_tail_goes_along_only_where_nagle_would_let_it_go() {
    let data = vec![7u8; 5 * MSS + 100];
    let (mut c, now) = established(&tso());
    c.send(&data).unwrap();
    let segs = poll_large(&mut c, now);
    assert_eq!(lens(&segs), [5 * MSS], "the tail waits for the ACK, as it would after five segments");
    assert!(!segs[0].has(TcpFlags::PSH), "PSH only on the segment that ends the data");

    let (mut c, now) = established(&Config { nodelay: true, ..tso() });
    c.send(&data).unwrap();
    let segs = poll_large(&mut c, now);
    assert_eq!(lens(&segs), [5 * MSS + 100]);
    assert!(segs[0].has(TcpFlags::PSH));
}

#[test]
fn tso_what_is_sent_again_after_a_timeout_goes_one_mss_at_a_time() {
    // Without tail loss probes, so that the first timer is the RTO.
    let (mut c, now) = established(&Config { rack_tlp: false, ..tso() });
    c.send(&vec![7u8; 10 * MSS]).unwrap();
    assert_eq!(lens(&poll_large(&mut c, now)), [10 * MSS]);
    let rto = c.poll_timeout().unwrap();
    c.handle_timeout(rto);
    let rtx = poll_large(&mut c, rto);
    assert_eq!(lens(&rtx), [MSS], "cwnd is one segment after an RTO");
    let tsecr = rtx[0].repr.timestamp.unwrap().0;
    let t = rto + 10 * MS;
    feed(&mut c, t, ack_ts(ISS + 1 + MSS as u32, tsecr));
    // Slow start opens two segments: both are retransmissions, each one MSS.
    assert_eq!(lens(&poll_large(&mut c, t)), [MSS, MSS]);
}

#[test]
fn tso_segments_hold_about_a_millisecond_at_the_pacing_rate() {
    // The handshake's sample is 0, the first flight's 100 ms: SRTT 12.5 ms. cwnd is then 20
    // segments and the pacing rate twice that per SRTT (slow start): 4,633,600 B/s, of which
    // a millisecond (rate >> 10: 4,525 bytes) holds three whole segments. The congestion
    // window cuts the last one short.
    let (mut c, now) = established(&tso());
    c.send(&vec![7u8; 100_000]).unwrap();
    let first = poll_large(&mut c, now);
    assert_eq!(lens(&first), [10 * MSS]);
    let tsecr = first[0].repr.timestamp.unwrap().0;
    let t = now + 100 * MS;
    feed(&mut c, t, ack_ts(ISS + 1 + 10 * MSS as u32, tsecr));
    let info = c.info();
    assert_eq!((info.rtt, info.cwnd), (12_500 * 1000, 20 * MSS as u32));
    assert_eq!(lens(&poll_large(&mut c, t)), [3 * MSS, 3 * MSS, 3 * MSS, 3 * MSS, 3 * MSS, 3 * MSS, 2 * MSS]);
}
