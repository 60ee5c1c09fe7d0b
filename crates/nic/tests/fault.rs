//! The fault injector's behaviour over the in-memory pair (`testkit::mem`): what each fault does
//! to a stream of numbered frames, that a seed reproduces a run, and that no buffer leaks. Its
//! configuration, generator and CE marking are unit tests in `nic::fault`.

use nic::clock::{Clock, ManualClock};
use nic::fault::{FaultConfig, FaultStats, FaultyNic, MIN_REORDER_TIMEOUT_US};
use nic::{Nic, PacketBuf};
use testkit::mem::{pair, MemBuf, MemConfig, MemNic};

type F = FaultyNic<MemNic, ManualClock>;

/// Where the faults go in a sender → receiver test: the receiver's rx, the sender's tx, or
/// both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum At {
    Rx,
    Tx,
    Both,
}

fn frame_bytes(i: u32) -> Vec<u8> {
    let len = 64 + (i % 50) as usize;
    let mut v: Vec<u8> = (0..len).map(|k| (i as usize * 7 + k) as u8).collect();
    v[..4].copy_from_slice(&i.to_be_bytes());
    v
}

fn id(frame: &[u8]) -> u32 {
    u32::from_be_bytes(frame[..4].try_into().unwrap())
}

fn fill(nic: &mut F, i: u32) -> MemBuf {
    let mut b = nic.alloc().expect("pool exhausted");
    let bytes = frame_bytes(i);
    b.set_len(bytes.len());
    b.data_mut().copy_from_slice(&bytes);
    b
}

/// A sender and a receiver on one clock, with the faults of `spec` where `at` says.
fn setup(spec: &str, at: At, mem: MemConfig) -> (ManualClock, F, F) {
    let cfg: FaultConfig = spec.parse().unwrap();
    let clock = ManualClock::new();
    // Frames of arbitrary bytes: no offloads, whatever `PRONGHORN_TEST_TSO` says.
    let (a, b) = pair(MemConfig { tso: false, ..mem });
    let send_cfg = FaultConfig { rx: false, tx: at != At::Rx, ..cfg.clone() };
    let recv_cfg = FaultConfig { rx: at != At::Tx, tx: false, ..cfg };
    let s = FaultyNic::new(a, send_cfg, clock.clone());
    let r = FaultyNic::new(b, recv_cfg, clock.clone());
    (clock, s, r)
}

/// Receives everything `r` has for now.
fn collect(r: &mut F, delivered: &mut Vec<Vec<u8>>) -> usize {
    let mut got = Vec::new();
    while r.rx_burst(&mut got, 64) > 0 {}
    let n = got.len();
    delivered.extend(got.iter().map(|b| b.data().to_vec()));
    n
}

/// Runs the clock forward until neither side holds anything.
fn drain(clock: &ManualClock, s: &mut F, r: &mut F, delivered: &mut Vec<Vec<u8>>) {
    for _ in 0..100_000 {
        s.flush();
        collect(r, delivered);
        if s.holding() == (0, 0) && r.holding() == (0, 0) && r.inner().rx_pending() == 0 {
            return;
        }
        let next = [s.next_release_ns(), r.next_release_ns()].into_iter().flatten().min();
        match next {
            Some(t) if t > clock.now_ns() => clock.set_ns(t),
            _ => clock.advance_ns(1),
        }
    }
    panic!("the pair never became quiescent");
}

fn assert_no_leak(s: &F, r: &F) {
    assert_eq!(s.holding(), (0, 0));
    assert_eq!(r.holding(), (0, 0));
    assert_eq!(s.inner().pool_available(), s.inner().pool_size(), "sender pool leaked");
    assert_eq!(r.inner().pool_available(), r.inner().pool_size(), "receiver pool leaked");
}

struct Run {
    delivered: Vec<Vec<u8>>,
    /// The receiver's rx faults.
    rx: FaultStats,
    /// The sender's tx faults.
    tx: FaultStats,
}

impl Run {
    fn stats(&self, at: At) -> FaultStats {
        match at {
            At::Rx => self.rx,
            At::Tx => self.tx,
            At::Both => panic!("two sets of stats"),
        }
    }
    fn ids(&self) -> Vec<u32> {
        self.delivered.iter().map(|f| id(f)).collect()
    }
}

/// Sends `n` frames in bursts of 32, 10 µs apart, receiving as it goes, then drains.
fn run(spec: &str, at: At, n: u32) -> Run {
    let (clock, mut s, mut r) = setup(spec, at, MemConfig::default());
    let mut out = Vec::with_capacity(32);
    let mut delivered = Vec::new();
    let mut next = 0u32;
    let mut rounds = 0;
    while next < n || !out.is_empty() {
        while out.len() < 32 && next < n {
            if s.inner().pool_available() == 0 {
                break;
            }
            out.push(fill(&mut s, next));
            next += 1;
        }
        s.tx_burst(&mut out);
        clock.advance_ns(10_000);
        collect(&mut r, &mut delivered);
        rounds += 1;
        assert!(rounds < 1_000_000, "stuck");
    }
    drain(&clock, &mut s, &mut r, &mut delivered);
    assert_no_leak(&s, &r);
    Run { delivered, rx: r.fault_stats().0, tx: s.fault_stats().1 }
}

#[test]
fn pass_through_delivers_identically() {
    let expected: Vec<Vec<u8>> = (0..3000).map(frame_bytes).collect();
    for spec in ["", "seed=9", "dir=rx", "dir=tx"] {
        let run = run(spec, At::Both, 3000);
        assert_eq!(run.delivered, expected, "{spec}");
        assert_eq!((run.rx, run.tx), (FaultStats::default(), FaultStats::default()));
    }
}

#[test]
fn a_fixed_seed_gives_the_same_run() {
    let spec = "loss=0.05,dup=0.05,reorder=0.2,corrupt=0.02,delay_us=30,seed=7";
    let one = run(spec, At::Both, 3000);
    let two = run(spec, At::Both, 3000);
    assert_eq!(one.delivered, two.delivered);
    assert_eq!((one.rx, one.tx), (two.rx, two.tx));
    // Faults did happen, and another seed gives another run.
    let clean: Vec<Vec<u8>> = (0..3000).map(frame_bytes).collect();
    assert_ne!(one.delivered, clean);
    for st in [one.rx, one.tx] {
        assert!(st.dropped > 0 && st.duplicated > 0 && st.reordered > 0);
        assert!(st.corrupted > 0 && st.delayed > 0);
    }
    let other = run(&spec.replace("seed=7", "seed=8"), At::Both, 3000);
    assert_ne!(one.delivered, other.delivered);
    // The two directions draw from different streams.
    assert_ne!(one.rx, one.tx);
}

#[test]
fn loss_drops_about_the_right_share() {
    for at in [At::Rx, At::Tx] {
        let run = run("loss=0.1", at, 10_000);
        let st = run.stats(at);
        assert!((800..=1200).contains(&st.dropped), "{at:?}: {st:?}");
        assert_eq!(run.delivered.len() as u64, 10_000 - st.dropped);
        assert_eq!(FaultStats { dropped: st.dropped, ..FaultStats::default() }, st);
        // The survivors are intact and in order.
        let ids = run.ids();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        for f in &run.delivered {
            assert_eq!(*f, frame_bytes(id(f)));
        }
    }
    // loss=1 loses everything.
    let run = run("loss=1", At::Tx, 500);
    assert!(run.delivered.is_empty());
    assert_eq!(run.tx.dropped, 500);
}

#[test]
fn dup_one_delivers_every_frame_twice() {
    for at in [At::Rx, At::Tx] {
        let run = run("dup=1", at, 2000);
        assert_eq!(run.delivered.len(), 4000, "{at:?}");
        for (k, pair) in run.delivered.chunks(2).enumerate() {
            assert_eq!(pair[0], frame_bytes(k as u32));
            assert_eq!(pair[1], frame_bytes(k as u32));
        }
        assert_eq!(run.stats(at), FaultStats { duplicated: 2000, ..FaultStats::default() });
    }
}

#[test]
fn dup_without_a_buffer_is_counted_not_lost() {
    for at in [At::Rx, At::Tx] {
        let mem = MemConfig { pool_size: 8, ..MemConfig::default() };
        let (clock, mut s, mut r) = setup("dup=1", at, mem);
        // Empty both pools: the sender's by its own 8 frames, the receiver's by a hog.
        let mut out: Vec<MemBuf> = (0..8).map(|i| fill(&mut s, i)).collect();
        let hog: Vec<MemBuf> = std::iter::from_fn(|| r.alloc()).collect();
        assert_eq!(hog.len(), 8);
        assert_eq!(s.tx_burst(&mut out), 8);
        let mut delivered = Vec::new();
        drain(&clock, &mut s, &mut r, &mut delivered);
        assert_eq!(delivered, (0..8).map(frame_bytes).collect::<Vec<_>>(), "{at:?}");
        let st = if at == At::Rx { r.fault_stats().0 } else { s.fault_stats().1 };
        assert_eq!(st, FaultStats { dup_failed: 8, ..FaultStats::default() });
        drop(hog);
        assert_no_leak(&s, &r);
    }
}

/// An Ethernet frame with an IPv4 header whose ECN field is `ecn` (checksum left 0: the injector
/// adjusts it, `nic::fault`'s unit test checks how).
fn ipv4_frame(ecn: u8) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14..34].copy_from_slice(&[0x45, 0xb8 | ecn, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f
}

#[test]
fn ce_marks_ecn_capable_packets_only() {
    const ECN_CE: u8 = 0b11;
    // Every ECN-capable packet, nothing else.
    let (clock, mut s, mut r) = setup("ce=1", At::Tx, MemConfig::default());
    let mut out = Vec::new();
    for ecn in [0b10, 0b00, 0b01] {
        let mut b = s.alloc().unwrap();
        let bytes = ipv4_frame(ecn);
        b.set_len(bytes.len());
        b.data_mut().copy_from_slice(&bytes);
        out.push(b);
    }
    s.tx_burst(&mut out);
    let mut got = Vec::new();
    drain(&clock, &mut s, &mut r, &mut got);
    let ecn: Vec<u8> = got.iter().map(|f| f[15] & 0b11).collect();
    assert_eq!(ecn, [ECN_CE, 0b00, ECN_CE]);
    assert_eq!(s.fault_stats().1, FaultStats { ce_marked: 2, ..FaultStats::default() });
}

#[test]
fn corrupt_one_flips_exactly_one_bit_per_frame() {
    for at in [At::Rx, At::Tx] {
        let run = run("corrupt=1", at, 3000);
        assert_eq!(run.delivered.len(), 3000);
        let mut positions = std::collections::BTreeSet::new();
        for (k, f) in run.delivered.iter().enumerate() {
            let orig = frame_bytes(k as u32);
            assert_eq!(f.len(), orig.len());
            let flipped: u32 = f.iter().zip(&orig).map(|(a, b)| (a ^ b).count_ones()).sum();
            assert_eq!(flipped, 1, "{at:?} frame {k}");
            positions.insert(f.iter().zip(&orig).position(|(a, b)| a != b).unwrap());
        }
        // Anywhere in the frame, not always the same byte.
        assert!(positions.len() > 60, "{positions:?}");
        assert!(*positions.last().unwrap() >= 100);
        assert_eq!(run.stats(at), FaultStats { corrupted: 3000, ..FaultStats::default() });
    }
}

#[test]
fn reorder_delivers_every_frame_once_out_of_order() {
    for at in [At::Rx, At::Tx] {
        let run = run("reorder=0.5", at, 5000);
        let ids = run.ids();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..5000).collect::<Vec<_>>(), "{at:?}: lost or duplicated");
        assert_ne!(ids, sorted, "{at:?}: nothing was reordered");
        for f in &run.delivered {
            assert_eq!(*f, frame_bytes(id(f)));
        }
        // A held frame lets at most 3 others by, and only its near neighbours overtake it.
        for (pos, &i) in ids.iter().enumerate() {
            assert!((pos as i64 - i as i64).abs() <= 3, "{at:?}: frame {i} at {pos}");
        }
        let st = run.stats(at);
        assert!((2000..3000).contains(&st.reordered), "{st:?}");
        assert_eq!(FaultStats { reordered: st.reordered, ..FaultStats::default() }, st);
    }
}

#[test]
fn a_lone_held_frame_is_released_after_the_timeout() {
    for at in [At::Rx, At::Tx] {
        let (clock, mut s, mut r) = setup("reorder=1", at, MemConfig::default());
        let mut out = vec![fill(&mut s, 0)];
        assert_eq!(s.tx_burst(&mut out), 1);
        let mut delivered = Vec::new();
        assert_eq!(collect(&mut r, &mut delivered), 0);
        let holder = if at == At::Rx { &r } else { &s };
        assert_eq!(holder.next_release_ns(), Some(MIN_REORDER_TIMEOUT_US * 1000));
        clock.set_ns(MIN_REORDER_TIMEOUT_US * 1000 - 1);
        s.flush();
        assert_eq!(collect(&mut r, &mut delivered), 0, "{at:?}: released early");
        clock.set_ns(MIN_REORDER_TIMEOUT_US * 1000);
        s.flush();
        assert_eq!(collect(&mut r, &mut delivered), 1, "{at:?}: never released");
        assert_eq!(delivered, [frame_bytes(0)]);
        assert_eq!(s.next_release_ns(), None);
        assert_eq!(r.next_release_ns(), None);
        assert_no_leak(&s, &r);
    }
    // The timeout grows with the delay when that is longer (then the delay applies too).
    let (clock, mut s, mut r) = setup("reorder=1,delay_us=2000", At::Rx, MemConfig::default());
    let mut out = vec![fill(&mut s, 0)];
    s.tx_burst(&mut out);
    let mut delivered = Vec::new();
    collect(&mut r, &mut delivered);
    assert_eq!(r.next_release_ns(), Some(2_000_000));
    drain(&clock, &mut s, &mut r, &mut delivered);
    assert_eq!(clock.now_ns(), 4_000_000);
    assert_eq!(delivered, [frame_bytes(0)]);
}

#[test]
fn delay_holds_everything_until_it_is_due() {
    for at in [At::Rx, At::Tx] {
        let (clock, mut s, mut r) = setup("delay_us=200", at, MemConfig::default());
        let mut delivered = Vec::new();
        let mut out: Vec<MemBuf> = (0..50).map(|i| fill(&mut s, i)).collect();
        assert_eq!(s.tx_burst(&mut out), 50);
        assert!(out.is_empty());
        assert_eq!(collect(&mut r, &mut delivered), 0);
        clock.set_ns(100_000);
        let mut out: Vec<MemBuf> = (50..80).map(|i| fill(&mut s, i)).collect();
        assert_eq!(s.tx_burst(&mut out), 30);
        // (On rx the delay runs from the poll that pulls a frame in, as a stack polls.)
        assert_eq!(collect(&mut r, &mut delivered), 0);
        let holder = if at == At::Rx { &r } else { &s };
        assert_eq!(holder.next_release_ns(), Some(200_000));
        clock.set_ns(199_999);
        s.flush();
        assert_eq!(collect(&mut r, &mut delivered), 0, "{at:?}: early");
        clock.set_ns(200_000);
        // rx_burst flushes due tx frames too, even with nothing new to send.
        let mut nothing = Vec::new();
        assert_eq!(s.rx_burst(&mut nothing, 32), 0);
        assert_eq!(collect(&mut r, &mut delivered), 50, "{at:?}");
        assert_eq!(delivered, (0..50).map(frame_bytes).collect::<Vec<_>>());
        let holder = if at == At::Rx { &r } else { &s };
        assert_eq!(holder.next_release_ns(), Some(300_000));
        clock.set_ns(299_999);
        s.flush();
        assert_eq!(collect(&mut r, &mut delivered), 0);
        clock.set_ns(300_000);
        s.flush();
        assert_eq!(collect(&mut r, &mut delivered), 30);
        assert_eq!(delivered, (0..80).map(frame_bytes).collect::<Vec<_>>());
        let st = if at == At::Rx { r.fault_stats().0 } else { s.fault_stats().1 };
        assert_eq!(st, FaultStats { delayed: 80, ..FaultStats::default() });
        assert_no_leak(&s, &r);
    }
}

#[test]
fn delay_with_a_small_rx_max_keeps_order() {
    let (clock, mut s, mut r) = setup("delay_us=5,dir=rx", At::Rx, MemConfig::default());
    let mut out: Vec<MemBuf> = (0..20).map(|i| fill(&mut s, i)).collect();
    s.tx_burst(&mut out);
    let mut got = Vec::new();
    assert_eq!(r.rx_burst(&mut got, 3), 0);
    clock.advance_ns(5_000);
    let mut out: Vec<MemBuf> = (20..25).map(|i| fill(&mut s, i)).collect();
    s.tx_burst(&mut out);
    let mut n = 0;
    for _ in 0..20 {
        n += r.rx_burst(&mut got, 3);
        clock.advance_ns(1_000);
    }
    assert_eq!(n, 25);
    let ids: Vec<u32> = got.iter().map(|b| id(b.data())).collect();
    assert_eq!(ids, (0..25).collect::<Vec<_>>());
}

#[test]
fn tx_frames_the_inner_nic_refuses_wait_and_are_not_lost() {
    let mem = MemConfig { queue_len: 4, ..MemConfig::default() };
    let clock = ManualClock::new();
    let (a, b) = pair(mem);
    let mut s = FaultyNic::new(a, "delay_us=1".parse().unwrap(), clock.clone()).with_tx_hold_limit(8);
    let mut r = b;
    let mut out: Vec<MemBuf> = (0..12)
        .map(|i| {
            let mut buf = s.alloc().unwrap();
            let bytes = frame_bytes(i);
            buf.set_len(bytes.len());
            buf.data_mut().copy_from_slice(&bytes);
            buf
        })
        .collect();
    // The wrapper holds at most 8: the last 4 stay with the caller, in order.
    assert_eq!(s.tx_burst(&mut out), 8);
    assert_eq!(out.iter().map(|b| id(b.data())).collect::<Vec<_>>(), [8, 9, 10, 11]);
    assert_eq!(s.holding(), (0, 8));
    clock.advance_ns(1_000);
    s.flush();
    // The inner queue takes 4; 4 wait inside the wrapper.
    assert_eq!(r.rx_pending(), 4);
    assert_eq!(s.holding(), (0, 4));
    assert_eq!(s.tx_burst(&mut out), 4);
    assert!(out.is_empty());
    assert_eq!(s.holding(), (0, 8));
    let mut got = Vec::new();
    assert_eq!(r.rx_burst(&mut got, 64), 4);
    // Retried on the next rx_burst.
    s.rx_burst(&mut Vec::new(), 32);
    assert_eq!(r.rx_pending(), 4);
    r.rx_burst(&mut got, 64);
    clock.advance_ns(1_000);
    s.flush();
    r.rx_burst(&mut got, 64);
    assert_eq!(s.holding(), (0, 0));
    let ids: Vec<u32> = got.iter().map(|b| id(b.data())).collect();
    assert_eq!(ids, (0..12).collect::<Vec<_>>());
    assert_eq!(s.stats().opackets, 12);
    drop(got);
    assert_eq!(s.inner().pool_available(), s.inner().pool_size());
}

#[test]
fn accessors_and_dropping_a_wrapper_that_holds_frames() {
    let clock = ManualClock::new();
    let (a, mut b) = pair(MemConfig::default());
    let mut s = FaultyNic::new(a, "delay_us=50,reorder=0.5".parse().unwrap(), clock.clone());
    assert_eq!(s.config().delay_us, 50);
    assert_eq!(s.mac(), s.inner().mac());
    assert_eq!(s.mtu(), 1500);
    assert_eq!(s.link(), s.inner().link());
    assert_eq!(s.offloads(), s.inner().offloads());
    assert_eq!(s.rx_interrupt_fd(), None);
    let mut out: Vec<MemBuf> = (0..10)
        .map(|i| {
            let mut buf = s.alloc().unwrap();
            buf.set_len(64);
            buf.data_mut()[..4].copy_from_slice(&(i as u32).to_be_bytes());
            buf
        })
        .collect();
    s.tx_burst(&mut out);
    assert_eq!(s.stats(), s.inner().stats());
    assert_eq!(s.stats().opackets, 0, "everything is delayed");
    assert!(s.inner_mut().rx_pending() == 0);
    let a = s.into_inner();
    assert_eq!(a.pool_available(), a.pool_size(), "held frames freed by into_inner");

    // Held rx frames are freed with the wrapper.
    let (mut a2, b2) = pair(MemConfig::default());
    let mut r = FaultyNic::new(b2, "delay_us=50".parse().unwrap(), clock.clone());
    let mut out: Vec<MemBuf> = (0..10).map(|_| a2.alloc().unwrap()).collect();
    a2.tx_burst(&mut out);
    assert_eq!(r.rx_burst(&mut Vec::new(), 32), 0);
    assert_eq!(r.holding(), (10, 0));
    assert_eq!(a2.pool_available(), a2.pool_size() - 10);
    drop(r);
    assert_eq!(a2.pool_available(), a2.pool_size());
    let _ = b.alloc();
}
