use super::harness::*;
use crate::{Config, SECOND};

#[test]
fn probe2_tmp() {
    let cfg = Config::default();
    let mut p = Pair::connected(&cfg, &cfg);
    let mut rng = Rng::new(0x5eed_1234);
    p.fate = Box::new(move |_, _, _| {
        let r = rng.next() % 100;
        if r < 0 {
            Fate::Drop
        } else if r < 5 {
            Fate::Delay((1 + rng.next() % 15) * MS)
        } else {
            Fate::Deliver
        }
    });
    let len = 1024 * 1024;
    let data: Vec<u8> = (0..len).map(stream_byte).collect();
    let mut sent = 0;
    let mut got = 0usize;
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
        got == len
    });
    let base = crate::tests::harness::ISS;
    let mut seen = std::collections::BTreeSet::new();
    let mut first_dup = None;
    for (i, (t, d, r)) in p.log.iter().enumerate() {
        if *d == Dir::AtoB && r.payload_len > 0 {
            if !seen.insert(r.seq_number) && first_dup.is_none() {
                first_dup = Some(i);
            }
        }
    }
    let i = first_dup.unwrap();
    for (t, d, r) in &p.log[i.saturating_sub(60)..i + 30] {
        let sacks: Vec<_> =
            r.sack_ranges.iter().flatten().map(|(a, b)| (a.wrapping_sub(base), b.wrapping_sub(base))).collect();
        if *d == Dir::AtoB {
            std::println!(
                "{:>6} A> seq {:>7} len {:>4}",
                (t - T0) / 1000,
                r.seq_number.wrapping_sub(base),
                r.payload_len
            );
        } else {
            std::println!(
                "{:>6}  <B ack {:>7} wnd {} {:?}",
                (t - T0) / 1000,
                r.ack_number.unwrap().wrapping_sub(base),
                r.window_len,
                sacks
            );
        }
    }
}
