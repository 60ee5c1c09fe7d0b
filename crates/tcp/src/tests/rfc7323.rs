//! Group 4: window scaling, timestamps, PAWS (RFC 7323) and the MSS option.

use wire::{TcpFlags, TcpRepr};

use super::harness::*;
use crate::{Config, Connection, State};

fn ts(repr: TcpRepr, tsval: u32, tsecr: u32) -> TcpRepr {
    TcpRepr { timestamp: Some((tsval, tsecr)), ..repr }
}

#[test]
fn rfc7323_window_scale_negotiated_when_both_offer() {
    let cfg = Config::default(); // 128 KiB: shift 2
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    let syn = poll_one(&mut c, T0);
    assert_eq!(syn.repr.window_scale, Some(2));
    assert_eq!(syn.repr.window_len, 65535); // never scaled in a SYN
    let synack = TcpRepr { window_scale: Some(7), ..seg(PISS, Some(ISS + 1), TcpFlags::SYN, 1000) };
    c.handle_segment(T0, &synack, &[]);
    let info = c.info();
    assert_eq!((info.snd_wscale, info.rcv_wscale), (Some(7), Some(2)));
    assert_eq!(info.snd_wnd, 1000); // the SYN-ACK's window is not scaled
    let a = poll_one(&mut c, T0);
    assert_eq!(a.repr.window_len, 32768); // 131072 >> 2
    assert_eq!(a.repr.window_scale, None);
    feed(&mut c, T0, ack(PISS + 1, ISS + 1, 100));
    assert_eq!(c.info().snd_wnd, 100 << 7);
}

#[test]
fn rfc7323_window_scale_not_used_unless_both_offer() {
    let cfg = Config::default();
    // The peer does not offer it: no scaling either way, and at most 65535 advertised.
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    c.handle_segment(T0, &seg(PISS, Some(ISS + 1), TcpFlags::SYN, 1000), &[]);
    let a = poll_one(&mut c, T0);
    assert_eq!(a.repr.window_len, 65535);
    feed(&mut c, T0, ack(PISS + 1, ISS + 1, 100));
    let info = c.info();
    assert_eq!((info.snd_wscale, info.rcv_wscale, info.snd_wnd), (None, None, 100));
    // Passive side: a SYN without the option gets a SYN-ACK without it.
    let syn = TcpRepr { window_scale: None, ..peer_syn(&cfg) };
    let mut c = Connection::accept(&cfg, &syn, ISS, T0);
    assert_eq!(poll_one(&mut c, T0).repr.window_scale, None);
    // We do not offer it: a peer's offer is ignored.
    let cfg = Config { window_scale: false, ..Config::default() };
    let mut c = Connection::accept(&cfg, &peer_syn(&Config::default()), ISS, T0);
    assert_eq!(poll_one(&mut c, T0).repr.window_scale, None);
    feed(&mut c, T0, TcpRepr { timestamp: Some((800, 1000)), ..ack(PISS + 1, ISS + 1, 100) });
    assert_eq!(c.info().snd_wnd, 100);
}

#[test]
fn rfc7323_timestamps_negotiated_and_echoed() {
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    let syn = poll_one(&mut c, T0);
    assert_eq!(syn.repr.timestamp, Some((1000, 0))); // ms clock: T0 = 1 s
    let synack = ts(seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535), 777, 1000);
    c.handle_segment(T0 + 5 * MS, &synack, &[]);
    assert!(c.info().timestamps);
    let a = poll_one(&mut c, T0 + 5 * MS);
    assert_eq!(a.repr.timestamp, Some((1005, 777)));
    // Every segment carries it, TSecr = the peer's latest in-order TSval.
    let now = T0 + 20 * MS;
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1, 100), 800, 1005));
    c.send(b"x").unwrap();
    let d = poll_one(&mut c, now);
    assert_eq!(d.repr.timestamp, Some((1020, 800)));
}

#[test]
fn rfc7323_tsecr_echoes_the_earliest_unacknowledged_segment() {
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    // Two segments before our (delayed) ACK: TS.Recent is updated only for SEG.SEQ <=
    // Last.ACK.sent, so the ACK echoes the first (RFC 7323 section 4.3).
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1, 1448), 800, 1000));
    feed(&mut c, now, ts(data(PISS + 1449, ISS + 1, 1448), 801, 1000));
    let a = poll_one(&mut c, now);
    assert_eq!(a.ack(), Some(PISS + 2897));
    assert_eq!(a.repr.timestamp.unwrap().1, 800);
    // The next in-order segment updates it.
    feed(&mut c, now, ts(data(PISS + 2897, ISS + 1, 1448), 802, 1000));
    c.handle_timeout(c.poll_timeout().unwrap());
    assert_eq!(poll_one(&mut c, now).repr.timestamp.unwrap().1, 802);
}

#[test]
fn rfc7323_rtt_measured_from_timestamps() {
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    // The SYN-ACK echoes the SYN's TSval 150 ms later: the first sample.
    let now = T0 + 150 * MS;
    c.handle_segment(now, &ts(seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535), 777, 1000), &[]);
    poll_one(&mut c, now);
    assert_eq!(c.info().rtt, 150 * MS);
    c.send(&[1; 100]).unwrap();
    let d = poll_one(&mut c, now);
    let tsval = d.repr.timestamp.unwrap().0;
    // The ACK echoes our TSval 150 ms later.
    feed(&mut c, now + 150 * MS, ts(ack(PISS + 1, ISS + 101, 65535), 900, tsval));
    assert_eq!(c.info().rtt, 150 * MS);
    // A retransmitted segment still gives a sample (its own TSval is echoed).
    c.send(&[1; 100]).unwrap();
    let t = now + 200 * MS;
    poll_one(&mut c, t);
    let rto = c.poll_timeout().unwrap();
    c.handle_timeout(rto);
    let rtx = poll_one(&mut c, rto);
    let tsval = rtx.repr.timestamp.unwrap().0;
    feed(&mut c, rto + 100 * MS, ts(ack(PISS + 1, ISS + 201, 65535), 950, tsval));
    // SRTT = 7/8 * 150 + 1/8 * 100.
    assert_eq!(c.info().rtt, 143_750_000);
}

#[test]
fn rfc7323_paws_drops_old_segments_with_an_ack() {
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1, 100), 5000, 1000));
    c.handle_timeout(now + 40 * MS);
    poll_one(&mut c, now + 40 * MS);
    assert_eq!(read_all(&mut c).len(), 100);
    // An old duplicate from a previous wrap of the sequence space: in window, old TSval.
    let now = now + 50 * MS;
    feed(&mut c, now, ts(data(PISS + 101, ISS + 1, 100), 4000, 1000));
    let a = poll_one(&mut c, now);
    assert_eq!(a.ack(), Some(PISS + 101));
    assert_eq!(c.recv_available(), 0);
    // PAWS does not apply to a RST (RFC 7323 section 5.3 R1).
    feed(&mut c, now, ts(seg(PISS + 101, None, TcpFlags::RST, 0), 1, 0));
    assert_eq!(c.state(), State::Closed);
}

#[test]
fn rfc7323_ts_recent_is_updated_only_by_segments_whose_ack_is_acceptable() {
    // RFC 7323 sections 4.3 and 5.3: TS.Recent takes SEG.TSval only from an acceptable segment
    // (its ACK checked too) with SEG.SEQ <= Last.ACK.sent. A blind attacker who guesses an
    // in-window sequence number but not the ACK must not be able to move TS.Recent, or PAWS
    // would then drop every segment of the real peer.
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    // In window, at RCV.NXT, huge TSval, ACK of data never sent: dropped with a challenge ACK.
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1 + 5000, 10), 0x7000_0000, 1000));
    assert_eq!(c.recv_available(), 0);
    assert_eq!(poll_one(&mut c, now).repr.timestamp.unwrap().1, 777);
    // The same with an ACK too old (below SND.UNA - MAX.SND.WND), after the challenge ACKs'
    // rate limit.
    let now = now + cfg.invalid_ratelimit;
    feed(&mut c, now, ts(data(PISS + 1, (ISS + 1).wrapping_sub(100_000), 10), 0x7000_0000, 1000));
    assert_eq!(c.recv_available(), 0);
    assert_eq!(poll_one(&mut c, now).repr.timestamp.unwrap().1, 777);
    // The real peer, with its own clock, still gets through.
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1, 10), 778, 1000));
    assert_eq!(c.recv_available(), 10);
    c.handle_timeout(now + 40 * MS);
    assert_eq!(poll_one(&mut c, now + 40 * MS).repr.timestamp.unwrap().1, 778);
    // A segment beyond Last.ACK.sent (in window, out of order) does not move TS.Recent either.
    feed(&mut c, now + 40 * MS, ts(data(PISS + 111, ISS + 1, 10), 900, 1000));
    assert_eq!(poll_one(&mut c, now + 40 * MS).repr.timestamp.unwrap().1, 778);
}

#[test]
fn rfc7323_timestamps_not_used_unless_both_offer() {
    let cfg = Config::default();
    let syn = TcpRepr { timestamp: None, ..peer_syn(&cfg) };
    let mut c = Connection::accept(&cfg, &syn, ISS, T0);
    let synack = poll_one(&mut c, T0);
    assert_eq!(synack.repr.timestamp, None);
    feed(&mut c, T0, ack(PISS + 1, ISS + 1, 1000));
    c.send(b"x").unwrap();
    assert_eq!(poll_one(&mut c, T0).repr.timestamp, None);
    assert!(!c.info().timestamps);
}

#[test]
fn rfc9293_mss_option_and_effective_mss() {
    // The peer's MSS caps our segments; timestamps take 12 bytes of it.
    let cfg = Config { window_scale: false, sack: false, nodelay: true, ..Config::default() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    let syn = poll_one(&mut c, T0);
    assert_eq!(syn.repr.max_seg_size, Some(1460));
    let synack = TcpRepr { max_seg_size: Some(1000), ..ts(seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535), 777, 1000) };
    c.handle_segment(T0, &synack, &[]);
    poll_one(&mut c, T0);
    c.send(&[1; 3000]).unwrap();
    let segs = poll_all(&mut c, T0);
    assert_eq!(segs.iter().map(|s| s.len()).collect::<Vec<_>>(), [988, 988, 988, 36]);
    assert!(segs.iter().all(|s| s.repr.header_len() == 32));
    assert_eq!(c.info().snd_mss, 988);
    // No MSS option: 536 (RFC 9293 3.7.1).
    let cfg = Config { nodelay: true, ..plain() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    c.handle_segment(T0, &seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535), &[]);
    poll_one(&mut c, T0);
    c.send(&[1; 1000]).unwrap();
    let segs = poll_all(&mut c, T0);
    assert_eq!(segs.iter().map(|s| s.len()).collect::<Vec<_>>(), [536, 464]);
    // Our own MSS (from our MTU) caps too.
    let cfg = Config { mss: 500, nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg);
    c.send(&[1; 600]).unwrap();
    assert_eq!(poll_all(&mut c, now).iter().map(|s| s.len()).collect::<Vec<_>>(), [500, 100]);
}

#[test]
fn rfc7323_scaled_window_never_shrinks_below_what_was_advertised() {
    // A small buffer with scaling: the right edge we advertise never moves left while the
    // peer fills the window and the application does not read.
    let cfg = Config { rcv_buf: 200_000, ..Config::default() }; // shift 2
    let (mut c, now) = established(&cfg);
    let mut edge = 0u32;
    let mut seq = PISS + 1;
    for (tsval, i) in (800..).zip(0..200) {
        let len = 1000 + (i * 37) % 448;
        if seq.wrapping_add(len as u32).wrapping_sub(PISS + 1) > 200_000 {
            break;
        }
        feed(&mut c, now, ts(data(seq, ISS + 1, len), tsval, 1000));
        seq = seq.wrapping_add(len as u32);
        c.handle_timeout(now + 40 * MS);
        for s in poll_all(&mut c, now) {
            let right = s.ack().unwrap().wrapping_add(u32::from(s.repr.window_len) << 2);
            assert!(right.wrapping_sub(edge) as i32 >= 0 || edge == 0, "shrank: {edge} -> {right}");
            edge = right;
        }
    }
    assert!(c.recv_available() > 190_000);
}

#[test]
fn rfc7323_tiny_segments_cannot_grow_a_full_scaled_window() {
    // A peer sending 1-byte segments into a full buffer: rounding up the window each time must
    // not promise more than the buffer (and its slack) holds.
    let cfg = Config { rcv_buf: 4096 * 40, ..Config::default() }; // shift 2
    let (mut c, now) = established(&cfg);
    let mut seq = PISS + 1;
    for tsval in 800..100_800 {
        let wnd = c.info().rcv_wnd;
        let len = if wnd > 1448 { 1448 } else { 1 };
        feed(&mut c, now, ts(data(seq, ISS + 1, len), tsval, 1000));
        let segs = poll_all(&mut c, now);
        if c.info().rcv_wnd == 0 && segs.last().is_some_and(|s| s.repr.window_len == 0) {
            break;
        }
        seq = seq.wrapping_add(len as u32);
        if c.recv_available() > 4096 * 42 {
            break;
        }
    }
    let got = c.recv_available();
    assert!((4096 * 40..=4096 * 40 + 4096 * 40 / 32).contains(&got), "{got}");
    assert_eq!(c.info().rcv_wnd, 0);
}

#[test]
fn rfc7323_no_rtt_sample_from_an_echo_older_than_the_retransmission() {
    // The original arrived, its ACK was lost; the peer answers the retransmission with the
    // original's TSval (its TS.Recent). That echo measures the RTO wait, not the path: Karn's
    // rule applies to timestamps too.
    let cfg = Config { window_scale: false, sack: false, ..Config::default() };
    let mut c = Connection::connect(&cfg, LP, RP, ISS, T0);
    poll_one(&mut c, T0);
    let now = T0 + 10 * MS;
    c.handle_segment(now, &ts(seg(PISS, Some(ISS + 1), TcpFlags::SYN, 65535), 777, 1000), &[]);
    poll_one(&mut c, now);
    assert_eq!(c.info().rtt, 10 * MS);
    c.send(&[1; 100]).unwrap();
    let original = poll_one(&mut c, now);
    let t = c.poll_timeout().unwrap();
    c.handle_timeout(t);
    poll_one(&mut c, t);
    feed(&mut c, t + 10 * MS, ts(ack(PISS + 1, ISS + 101, 65535), 800, original.repr.timestamp.unwrap().0));
    assert_eq!(c.info().rtt, 10 * MS);
    // A fresh echo is a sample again.
    c.send(&[1; 100]).unwrap();
    let d = poll_one(&mut c, t + 10 * MS);
    feed(&mut c, t + 30 * MS, ts(ack(PISS + 1, ISS + 201, 65535), 801, d.repr.timestamp.unwrap().0));
    assert_eq!(c.info().rtt, 10 * MS + (20 * MS - 10 * MS) / 8);
}

#[test]
fn rfc1191_path_mtu_lowers_the_segment_size_for_data_in_flight() {
    let cfg = Config { nodelay: true, ..plain() };
    let (mut c, now) = established(&cfg);
    c.send(&[1; 3000]).unwrap();
    let first = poll_all(&mut c, now);
    assert_eq!(first.iter().map(|s| s.len()).collect::<Vec<_>>(), [1460, 1460, 80]);
    // An ICMP quoting data that is not in flight (RFC 5927) is not believed.
    assert!(!c.path_mtu_reduced(1000, ISS + 1 + 5000));
    assert!(!c.path_mtu_reduced(1000, ISS));
    // One that quotes the first segment is: the path carries 1000 bytes of payload.
    assert!(c.path_mtu_reduced(1000, ISS + 1));
    assert_eq!(c.info().snd_mss, 1000);
    // A larger size later does not raise it again; a tiny one stops at 536.
    assert!(!c.path_mtu_reduced(1400, ISS + 1));
    assert!(c.path_mtu_reduced(100, ISS + 1));
    assert_eq!(c.info().snd_mss, 536);
    // The lost segments go again at the new size when the retransmission timer fires.
    let rto = c.poll_timeout().unwrap();
    c.handle_timeout(rto);
    let again = poll_all(&mut c, rto);
    assert!(
        !again.is_empty() && again.iter().all(|s| s.len() <= 536),
        "{:?}",
        again.iter().map(|s| s.len()).collect::<Vec<_>>()
    );
    assert_eq!(again[0].repr.seq_number, ISS + 1);
}

#[test]
fn rfc7323_a_retransmission_of_what_we_acknowledged_last_moves_ts_recent_as_in_linux() {
    // Linux takes a segment as acceptable from where it ends (`tcp_sequence` from rcv_wup, the
    // RCV.NXT of our last ACK): a retransmission of the data we acknowledged last is
    // acceptable, its SEG.SEQ is below Last.ACK.sent, so TS.Recent takes its TSval before the
    // D-SACK answers it. One that ends before our last ACK is not, and leaves TS.Recent.
    let cfg = Config { window_scale: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, ts(data(PISS + 1, ISS + 1, 100), 800, 1000));
    c.handle_timeout(now + 40 * MS);
    let a = poll_one(&mut c, now + 40 * MS);
    assert_eq!((a.ack(), a.repr.timestamp.unwrap().1), (Some(PISS + 101), 800));
    feed(&mut c, now + 50 * MS, ts(data(PISS + 1, ISS + 1, 100), 801, 1000));
    let a = poll_one(&mut c, now + 50 * MS);
    assert_eq!(a.repr.sack_ranges[0], Some((PISS + 1, PISS + 101)));
    assert_eq!(a.repr.timestamp.unwrap().1, 801);
    assert_eq!(c.recv_available(), 100);
    // New data, acknowledged; then the first 100 bytes again: they end before our last ACK.
    feed(&mut c, now + 60 * MS, ts(data(PISS + 101, ISS + 1, 100), 802, 1000));
    c.handle_timeout(now + 100 * MS);
    assert_eq!(poll_one(&mut c, now + 100 * MS).ack(), Some(PISS + 201));
    feed(&mut c, now + 110 * MS, ts(data(PISS + 1, ISS + 1, 100), 803, 1000));
    let a = poll_one(&mut c, now + 110 * MS);
    assert_eq!(a.repr.sack_ranges[0], Some((PISS + 1, PISS + 101)));
    assert_eq!(a.repr.timestamp.unwrap().1, 802);
}

#[test]
fn rfc7323_zero_window_probe_does_not_move_ts_recent() {
    // A closed window with unread data: Linux 6.x does not accept a segment whose data runs
    // past the window (tcp_sequence), so a one-byte probe at RCV.NXT is answered with an ACK
    // that echoes the TSval of the last acceptable segment, not the probe's.
    let cfg = Config { rcv_buf: 1000, window_scale: false, sack: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    let n = PISS + 1;
    feed(&mut c, now, ts(data(n, ISS + 1, 1000), 800, 1000));
    let now = c.poll_timeout().unwrap(); // the delayed ACK
    c.handle_timeout(now);
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.window_len), (Some(n + 1000), 0));
    assert_eq!(a.repr.timestamp.map(|(_, ecr)| ecr), Some(800));
    // Our data goes out meanwhile: the probe's ACK field acknowledges it.
    c.send(b"abc").unwrap();
    poll_one(&mut c, now);
    feed(&mut c, now, ts(data(n + 1000, ISS + 4, 1), 900, 1000));
    let a = poll_one(&mut c, now);
    assert_eq!((a.ack(), a.repr.window_len), (Some(n + 1000), 0));
    assert_eq!(a.repr.timestamp.map(|(_, ecr)| ecr), Some(800), "TS.Recent kept");
    // Not acceptable at all: its ACK is not taken either (as in Linux).
    assert_eq!(c.info().bytes_in_flight, 3);
    // A pure ACK at RCV.NXT is acceptable: TS.Recent moves, the ACK is taken.
    feed(&mut c, now, ts(ack(n + 1000, ISS + 4, 1000), 901, 1000));
    assert_eq!(c.info().bytes_in_flight, 0);
    // Once everything was read (the window update goes out), the byte is taken, and its TSval.
    assert_eq!(read_all(&mut c).len(), 1000);
    assert!(poll_one(&mut c, now).repr.window_len > 0);
    feed(&mut c, now, ts(data(n + 1000, ISS + 4, 1), 950, 1000));
    assert_eq!(c.recv_available(), 1);
    let now = c.poll_timeout().unwrap();
    c.handle_timeout(now);
    assert_eq!(poll_one(&mut c, now).repr.timestamp.map(|(_, ecr)| ecr), Some(950));
}
