//! Two connections moving a lot of data over a bad link: every byte must arrive, in order, and
//! both sides must close cleanly with no timer left behind.

use super::harness::*;
use crate::{Config, Event, State, SECOND};

struct Outcome {
    retransmits: u32,
    sim_seconds: u64,
}

fn transfer(cfg_a: &Config, cfg_b: &Config, len: usize, seed: u64, loss: u64, reorder: u64) -> Outcome {
    let mut p = Pair::new(cfg_a, cfg_b);
    p.logging = false;
    let mut rng = Rng::new(seed);
    // Both directions, from the first SYN to the last ACK.
    p.fate = Box::new(move |_, _, _| {
        let r = rng.next() % 100;
        if r < loss {
            Fate::Drop
        } else if r < loss + reorder {
            Fate::Delay((1 + rng.next() % 15) * MS)
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
    let cfg = Config::default();
    let out = transfer(&cfg, &cfg, 10 * 1024 * 1024, 0x5eed_1234, 5, 5);
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
