//! Group 18: the stack's memory budget (Linux's `tcp_mem`) as a connection sees it: what it is
//! charged (the bytes its rings hold), no room means data is not queued (a received segment
//! dropped and counted, `send` says EAGAIN),
//! pressure stops the window growing, and out-of-order data can be pruned so that it does not
//! pin a receive ring.

use super::harness::*;
use crate::{Config, Error, MemoryBudget, SEGMENT_OVERHEAD, SEND_QUANTUM};

const NO_ROOM: MemoryBudget = MemoryBudget { pressure: true, room: 0 };

#[test]
fn tcp_mem_data_beyond_the_room_is_dropped_and_counted() {
    let (mut c, now) = established(&plain());
    c.set_memory_budget(NO_ROOM);
    // In order, to an empty receive queue: taken all the same (Linux's
    // `sk_forced_mem_schedule`), so that the connection always makes progress.
    feed(&mut c, now, data(PISS + 1, ISS + 1, 100));
    assert_eq!(c.charged_bytes(), 100);
    // With data waiting to be read, in order or not: dropped (Linux `tcp_data_queue` when
    // `tcp_try_rmem_schedule` fails), counted, and acknowledged where we are.
    feed(&mut c, now, data(PISS + 101, ISS + 1, 100));
    feed(&mut c, now, data(PISS + 301, ISS + 1, 100)); // out of order
    assert_eq!(c.charged_bytes(), 100);
    let acks = poll_all(&mut c, now);
    assert!(!acks.is_empty() && acks.iter().all(|a| a.ack() == Some(PISS + 101) && a.len() == 0), "{acks:?}");
    let n = c.counters();
    assert_eq!((n.rcvq_drops, n.ofo_drops), (1, 1));
    // Memory is back: the retransmission is taken.
    c.set_memory_budget(MemoryBudget::default());
    feed(&mut c, now, data(PISS + 101, ISS + 1, 100));
    assert_eq!(c.charged_bytes(), 200);
    assert_eq!(c.recv(&mut [0; 300]), Ok(200));
    assert_eq!(c.charged_bytes(), 0);
}

#[test]
fn tcp_mem_send_says_eagain_below_a_page_of_room_and_queues_at_most_the_room() {
    let (mut c, _) = established(&plain());
    c.set_memory_budget(MemoryBudget { pressure: true, room: SEND_QUANTUM as u32 - 1 });
    assert_eq!(c.send_space(), 0);
    assert!(!c.is_writable());
    assert_eq!(c.send(b"hello"), Err(Error::WouldBlock));
    assert!(c.send_waits_for_memory());
    assert_eq!(c.charged_bytes(), 0);
    c.set_memory_budget(MemoryBudget { pressure: true, room: SEND_QUANTUM as u32 });
    assert!(c.is_writable());
    assert_eq!(c.send(&[7; 10_000]), Ok(SEND_QUANTUM));
    assert!(c.send_waits_for_memory(), "the rest waits for memory, not for the peer");
    assert_eq!(c.charged_bytes(), SEND_QUANTUM, "the bytes queued, not the 128 KiB ring");
}

#[test]
fn tcp_mem_charges_what_the_rings_hold_not_their_size() {
    // Linux's `sk_mem_charge`: queued bytes (and truesize), never a buffer's capacity.
    let cfg = Config { window_scale: false, timestamps: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    assert_eq!(c.send(b"abc"), Ok(3));
    feed(&mut c, now, data(PISS + 1, ISS + 1, 5));
    assert_eq!(c.charged_bytes(), 3 + 5);
    assert!(c.buffer_bytes() >= 2 * 65535, "{}", c.buffer_bytes());
    // One out-of-order byte costs about one segment (its truesize), not a ring.
    feed(&mut c, now, data(PISS + 1001, ISS + 1, 1));
    let ooo = c.charged_bytes() - 8;
    assert!((SEGMENT_OVERHEAD..=1460 + SEGMENT_OVERHEAD).contains(&ooo), "{ooo}");
}

/// The window announced once the application has read everything: the whole buffer, or four
/// segments under pressure (Linux `tcp_adjust_rcv_ssthresh`).
fn window_after_reading_a_full_window(pressure: bool) -> u16 {
    let (mut c, mut now) = established(&plain());
    c.set_memory_budget(MemoryBudget { pressure, room: u32::MAX });
    let mut seq = PISS + 1;
    for _ in 0..44 {
        feed(&mut c, now, data(seq, ISS + 1, 1460));
        seq += 1460;
        now += MS;
        poll_all(&mut c, now);
    }
    while c.recv(&mut [0; 65536]).is_ok() {}
    poll_one(&mut c, now).repr.window_len
}

#[test]
fn tcp_mem_pressure_stops_the_receive_window_growing() {
    assert_eq!(window_after_reading_a_full_window(false), 65535);
    assert_eq!(window_after_reading_a_full_window(true), 4 * 1460);
}

#[test]
fn pruned_out_of_order_data_gives_the_receive_ring_back() {
    let cfg = Config { window_scale: false, timestamps: false, ..Config::default() };
    let (mut c, now) = established(&cfg);
    feed(&mut c, now, data(PISS + 1001, ISS + 1, 100));
    let dup = poll_one(&mut c, now);
    assert_eq!(dup.repr.sack_ranges[0], Some((PISS + 1001, PISS + 1101)));
    assert!(c.holds_only_out_of_order());
    assert_eq!(c.buffers_allocated(), (false, true));
    assert!(c.prune_out_of_order());
    assert!(!c.prune_out_of_order(), "nothing left to prune");
    assert_eq!(c.buffers_allocated(), (false, false));
    assert_eq!(c.buffer_bytes(), 0);
    // The hole fills: only what follows it in order is there, and no SACK block reports what
    // was pruned (the peer sends it again).
    feed(&mut c, now, data(PISS + 1, ISS + 1, 1000));
    assert_eq!(c.recv(&mut [0; 2000]), Ok(1000));
    let segs = poll_all(&mut c, now + 100 * MS);
    assert!(segs.iter().all(|s| s.repr.sack_ranges == [None; 4]), "{segs:?}");
}
