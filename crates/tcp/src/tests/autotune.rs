//! Buffer autotuning (Linux's `tcp_rcv_space_adjust` and `tcp_sndbuf_expand`): the buffers
//! grow under a bulk transfer, up to `rcv_buf_max`/`snd_buf_max` and not under memory
//! pressure; an application's SO_RCVBUF/SO_SNDBUF fixes them; the window scale offered is
//! chosen for the maximum, so that the grown buffer can be announced.

use super::harness::*;
use crate::{Config, MemoryBudget};

const MIB: u32 = 1 << 20;

/// 64 KiB buffers that may grow to `max` (both), over a 1 Gbit/s path with a 10 ms round trip
/// (1.25 MB in flight fill it).
fn tuned(max: u32) -> Config {
    Config { rcv_buf: 64 * 1024, snd_buf: 64 * 1024, rcv_buf_max: max, snd_buf_max: max, ..Config::default() }
}

fn bulk(p: &mut Pair, bytes: usize) {
    p.rate = 1_000_000_000;
    let data: Vec<u8> = (0..bytes).map(stream_byte).collect();
    assert!(deliver(p, &data, 60 * crate::SECOND), "every byte arrived");
}

#[test]
fn buffers_grow_under_a_bulk_transfer_and_the_window_follows() {
    let cfg = tuned(4 * MIB);
    let mut p = Pair::connected(&cfg, &cfg);
    // The scale offered is the one 4 MiB needs (65535 << 7 >= 4 MiB), not 64 KiB's (0).
    assert_eq!(p.b().info().rcv_wscale, Some(7));
    bulk(&mut p, 16 << 20);
    let (rcv, snd) = (p.b().info().rcv_buf, p.a.info().snd_buf);
    assert!(rcv > 1 << 20 && rcv <= 4 * MIB, "receive buffer {rcv}");
    assert!(snd > 1 << 20 && snd <= 4 * MIB, "send buffer {snd}");
    let widest = p.sent(Dir::BtoA).iter().map(|s| u32::from(s.window_len) << 7).max().unwrap();
    assert!(widest > 1 << 20, "the window announced grew with the buffer: {widest}");
}

#[test]
fn growth_stops_at_the_maximum() {
    let cfg = tuned(256 * 1024);
    let mut p = Pair::connected(&cfg, &cfg);
    bulk(&mut p, 16 << 20);
    assert_eq!((p.b().info().rcv_buf, p.a.info().snd_buf), (256 * 1024, 256 * 1024));
}

#[test]
fn sizes_the_application_set_stay_fixed() {
    let cfg = tuned(4 * MIB);
    let mut p = Pair::connected(&cfg, &cfg);
    p.b().set_recv_buffer(64 * 1024);
    p.a.set_send_buffer(64 * 1024);
    bulk(&mut p, 8 << 20);
    assert_eq!((p.b().info().rcv_buf, p.a.info().snd_buf), (64 * 1024, 64 * 1024));
}

#[test]
fn no_growth_under_memory_pressure() {
    let cfg = tuned(4 * MIB);
    let mut p = Pair::connected(&cfg, &cfg);
    let pressure = MemoryBudget { pressure: true, room: u32::MAX };
    p.b().set_memory_budget(pressure);
    p.a.set_memory_budget(pressure);
    bulk(&mut p, 8 << 20);
    assert_eq!((p.b().info().rcv_buf, p.a.info().snd_buf), (64 * 1024, 64 * 1024));
}

#[test]
fn without_a_maximum_above_the_size_nothing_grows() {
    let cfg = Config { rcv_buf: 64 * 1024, snd_buf: 64 * 1024, ..Config::default() };
    let mut p = Pair::connected(&cfg, &cfg);
    assert_eq!(p.b().info().rcv_wscale, Some(1), "the shift 64 KiB needs");
    bulk(&mut p, 8 << 20);
    assert_eq!((p.b().info().rcv_buf, p.a.info().snd_buf), (64 * 1024, 64 * 1024));
}

/// The send buffer grows by a segment or two per ACK (`tcp_sndbuf_expand` follows the
/// congestion window); the ring behind it is real memory, moved and copied whole to grow, so it
/// must not follow each step: growing from 64 KiB to 4 MiB that way moved it hundreds of times
/// (O(n²) bytes copied and as many fresh pages faulted in, the first second of an iperf3 -R run
/// under pronghorn). It grows at least twofold each time, to at most the maximum.
#[test]
fn the_send_ring_grows_in_few_moves() {
    let cfg = tuned(4 * MIB);
    let mut p = Pair::connected(&cfg, &cfg);
    p.rate = 1_000_000_000;
    let data: Vec<u8> = (0..16 << 20).map(stream_byte).collect();
    let (mut sent, mut got) = (0, Vec::new());
    let mut ring_sizes = vec![p.a.buffer_bytes()];
    let ok = p.run_until(p.now + 60 * crate::SECOND, |p| {
        if sent < data.len() {
            sent += p.a.send(&data[sent..]).unwrap_or(0);
        }
        let bytes = p.a.buffer_bytes();
        if bytes > *ring_sizes.last().unwrap() {
            ring_sizes.push(bytes);
        }
        got.extend(read_all(p.b()));
        got.len() == data.len()
    });
    assert!(ok && got == data, "every byte arrived");
    let snd = p.a.info().snd_buf;
    assert!(snd > 1 << 20, "the send buffer grew: {snd}");
    // Not allocated, allocated at 64 KiB, then six doublings to 4 MiB.
    let moves = ring_sizes.len() - 2;
    assert!(moves <= 6, "the send ring moved {moves} times: {ring_sizes:?}");
    assert!(p.a.buffer_bytes() <= 4 * MIB as usize + 64 * 1024, "at most the maximum: {}", p.a.buffer_bytes());
}
