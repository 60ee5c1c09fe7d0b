//! Two connections moving a lot of data over a bad link: every byte must arrive, in order, and
//! both sides must close cleanly with no timer left behind.

use super::harness::*;
use crate::{Config, Event, State, SECOND};

struct Outcome {
    retransmits: u32,
    sim_seconds: u64,
}

fn transfer(cfg_a: &Config, cfg_b: &Config, len: usize, seed: u64, loss: u64, reorder: u64) -> Outcome {
    // A's sequence numbers wrap during the transfer (B's wrap at once: ISS_B).
    let mut p = Pair::with_iss(cfg_a, cfg_b, 0xfff0_0000);
    p.logging = false;
    let mut rng = Rng::new(seed);
    // Both directions, from the first SYN to the last ACK.
    p.fate = Box::new(move |_, _, _| {
        let r = rng.next_u64() % 100;
        if r < loss {
            Fate::Drop
        } else if r < loss + reorder {
            Fate::Delay((1 + rng.next_u64() % 15) * MS)
        } else {
            Fate::Deliver
        }
    });
    let start = p.now;
    let data: Vec<u8> = (0..len).map(stream_byte).collect();
    let mut sent = 0usize;
    let mut received = 0usize;
    let mut mismatch = None;
    let mut a_closed = false;
    let mut b_closed = false;
    let mut buf = vec![0u8; 32 * 1024];
    let done = p.run_until(start + 1000 * SECOND, |p| {
        let now = p.now;
        if matches!(p.a.state(), State::Established | State::CloseWait) {
            while sent < len {
                match p.a.send(&data[sent..]) {
                    Ok(k) => sent += k,
                    Err(_) => break,
                }
            }
            if sent == len && !a_closed {
                p.a.close(now);
                a_closed = true;
            }
        }
        if let Some(b) = p.b.as_mut() {
            loop {
                match b.recv(&mut buf) {
                    Ok(0) => {
                        if !b_closed {
                            b.close(now);
                            b_closed = true;
                        }
                        break;
                    }
                    Ok(n) => {
                        if mismatch.is_none() && buf[..n] != data[received..received + n] {
                            let i = (0..n).find(|&i| buf[i] != data[received + i]).unwrap_or(0);
                            mismatch = Some(received + i);
                        }
                        received += n;
                    }
                    Err(_) => break,
                }
            }
        }
        p.a.state() == State::Closed && p.b.as_ref().is_some_and(|b| b.state() == State::Closed)
    });
    let (ea, eb) = p.take_events();
    assert!(
        done,
        "not finished: A {:?} B {:?}, {received} of {len} received",
        p.a.state(),
        p.b.as_ref().map(|b| b.state())
    );
    assert_eq!(mismatch, None, "first wrong byte");
    assert_eq!(received, len);
    for ev in [Event::Reset, Event::TimedOut] {
        assert!(!ea.contains(&ev) && !eb.contains(&ev), "{ea:?} {eb:?}");
    }
    assert!(ea.contains(&Event::TimeWait) && ea.ends_with(&[Event::Closed]));
    assert!(eb.contains(&Event::ReadClosed) && eb.ends_with(&[Event::Closed]));
    assert_eq!(p.a.poll_timeout(), None);
    assert_eq!(p.b().poll_timeout(), None);
    Outcome { retransmits: p.a.info().total_retransmits, sim_seconds: (p.now - start) / SECOND }
}

#[test]
fn bulk_10mib_with_5pct_loss_and_5pct_reordering() {
    // Both timestamp clocks wrap too.
    let cfg_a = Config { ts_offset: u32::MAX - 3000, ..Config::default() };
    let cfg_b = Config { ts_offset: 0x7fff_f000, ..Config::default() };
    let out = transfer(&cfg_a, &cfg_b, 10 * 1024 * 1024, 0x5eed_1234, 5, 5);
    std::println!("10 MiB, 5% loss, 5% reordering: {} retransmits, {} s simulated", out.retransmits, out.sim_seconds);
    assert!(out.retransmits > 0);
}

#[test]
fn bulk_1mib_lossy_without_options() {
    // No SACK, no timestamps, no window scaling: NewReno and Karn's rule alone.
    let cfg = plain();
    transfer(&cfg, &cfg, 1024 * 1024, 42, 5, 5);
}

#[test]
fn bulk_1mib_lossy_small_buffers_and_nodelay() {
    let cfg = Config { rcv_buf: 8 * 1024, snd_buf: 6 * 1024, nodelay: true, ..Config::default() };
    transfer(&cfg, &cfg, 1024 * 1024, 7, 3, 10);
}

/// Both directions at once over a link that drops, delays and duplicates; both sides shut
/// down writing, read to the end, then close. Every byte must arrive and both must end CLOSED
/// with no error and no timer.
fn two_way(seed: u64, cfg_a: &Config, cfg_b: &Config, len_a: usize, len_b: usize, loss: u64, reorder: u64) {
    let mut p = Pair::with_iss(cfg_a, cfg_b, (seed as u32).wrapping_mul(2_654_435_761));
    p.logging = false;
    let mut rng = Rng::new(seed);
    p.fate = Box::new(move |_, _, _| {
        let r = rng.next_u64() % 100;
        if r < loss {
            Fate::Drop
        } else if r < loss + reorder {
            Fate::Delay((1 + rng.next_u64() % 20) * MS)
        } else if r < loss + reorder + 3 {
            Fate::Duplicate((rng.next_u64() % 30) * MS)
        } else {
            Fate::Deliver
        }
    });
    let da: Vec<u8> = (0..len_a).map(|i| stream_byte(i + 3)).collect();
    let db: Vec<u8> = (0..len_b).map(stream_byte).collect();
    let (mut sa, mut sb, mut ga, mut gb) = (0, 0, Vec::new(), Vec::new());
    let (mut shut_a, mut shut_b) = (false, false);
    let mut buf = [0u8; 4096];
    let done = p.run_until(T0 + 3000 * SECOND, |p| {
        let now = p.now;
        let sending = |s: State| matches!(s, State::Established | State::CloseWait);
        if sending(p.a.state()) {
            sa += p.a.send(&da[sa..]).unwrap_or(0);
            if sa == len_a && !shut_a {
                p.a.shutdown_write().unwrap();
                shut_a = true;
            }
        }
        while let Ok(n) = p.a.recv(&mut buf) {
            if n == 0 {
                if shut_a {
                    p.a.close(now); // all sent, all read
                }
                break;
            }
            ga.extend_from_slice(&buf[..n]);
        }
        if let Some(b) = p.b.as_mut() {
            if sending(b.state()) {
                sb += b.send(&db[sb..]).unwrap_or(0);
                if sb == len_b && !shut_b {
                    b.shutdown_write().unwrap();
                    shut_b = true;
                }
            }
            while let Ok(n) = b.recv(&mut buf) {
                if n == 0 {
                    break; // B only shuts down: it ends through TIME-WAIT or LAST-ACK by itself
                }
                gb.extend_from_slice(&buf[..n]);
            }
        }
        p.a.state() == State::Closed && p.b.as_ref().is_some_and(|b| b.state() == State::Closed)
    });
    let (ea, eb) = p.take_events();
    let what = format!("seed {seed} loss {loss} reorder {reorder}: A {:?} B {:?}", p.a.state(), p.b().state());
    assert!(done, "{what}");
    assert!(ga == db && gb == da, "{what}: {} of {len_b}, {} of {len_a}", ga.len(), gb.len());
    for ev in [Event::Reset, Event::TimedOut] {
        assert!(!ea.contains(&ev) && !eb.contains(&ev), "{what}: {ea:?} {eb:?}");
    }
    assert_eq!((p.a.poll_timeout(), p.b().poll_timeout()), (None, None), "{what}");
}

#[test]
fn two_way_transfers_over_a_lossy_reordering_duplicating_link() {
    let configs = [
        Config::default(),
        plain(),
        Config { timestamps: false, ..Config::default() },
        Config { sack: false, ..Config::default() },
        Config { rcv_buf: 3000, snd_buf: 5000, ..Config::default() },
        Config { mss: 536, nodelay: true, ..Config::default() },
        Config { mss: 100, rcv_buf: 500, snd_buf: 300, ..Config::default() },
        Config { initial_cwnd: 1, delayed_ack: 200 * MS, ..Config::default() },
    ];
    for seed in 1..=16u64 {
        let a = &configs[seed as usize % configs.len()];
        let b = &configs[(seed as usize * 3 + 1) % configs.len()];
        let loss = [0, 2, 5, 10][seed as usize % 4];
        let reorder = [0, 5, 10][seed as usize % 3];
        two_way(seed, a, b, (seed as usize * 7919) % 40_000, (seed as usize * 104_729) % 30_000, loss, reorder);
    }
}
