use super::harness::*;
use crate::{Config, State, SECOND};

#[test]
fn probe_tmp() {
    let cfg = Config::default();
    for (loss, reorder) in [(0, 0), (5, 0), (0, 5), (5, 5), (1, 0)] {
        let mut p = Pair::connected(&cfg, &cfg);
        p.logging = false;
        let mut rng = Rng::new(0x5eed_1234);
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
        let len = 4 * 1024 * 1024;
        let data: Vec<u8> = (0..len).map(stream_byte).collect();
        let mut sent = 0;
        let mut got = 0usize;
        let mut rtos = 0;
        let mut rto2 = 0;
        let mut rto_in_rec = 0;
        let mut recoveries = 0;
        let mut last_backoff = 0;
        let mut last_rec = false;
        let start = p.now;
        let mut buf = vec![0u8; 65536];
        p.run_until(p.now + 1000 * SECOND, |p| {
            if sent < len {
                sent += p.a.send(&data[sent..]).unwrap_or(0);
            }
            while let Ok(n) = p.b.as_mut().unwrap().recv(&mut buf) {
                if n == 0 {
                    break;
                }
                got += n;
            }
            let i = p.a.info();
            if i.backoff > last_backoff {
                rtos += 1;
                if i.backoff >= 2 {
                    rto2 += 1;
                }
                if last_rec {
                    rto_in_rec += 1;
                }
            }
            last_backoff = i.backoff;
            if i.in_recovery && !last_rec {
                recoveries += 1;
            }
            last_rec = i.in_recovery;
            got == len
        });
        let i = p.a.info();
        std::println!("loss {loss} reorder {reorder}: {} ms, rtos {rtos} (2+: {rto2}, in rec {rto_in_rec}), recoveries {recoveries}, rtx {}, cwnd {}, ssthresh {}, srtt {}us rto {}ms", (p.now - start)/MS, i.total_retransmits, i.cwnd, i.ssthresh, i.rtt/1000, i.rto/MS);
        let _ = State::Closed;
    }
}
