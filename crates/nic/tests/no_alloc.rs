//! The data path allocates nothing per frame once warm: the in-memory pair alone, through a
//! pass-through fault injector, and through one injecting every fault on both directions.
//!
//! A counting global allocator (per thread, so the test harness's own threads do not count).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use nic::clock::ManualClock;
use nic::fault::FaultyNic;
use nic::{Nic, PacketBuf};
use testkit::mem::{pair, MemConfig, MemNic};

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(|c| c.get())
}

/// Sends `rounds` bursts of 32 frames from `s` to `r`, 10 µs apart, receiving all the way;
/// returns the frames received. Touches no allocator itself once `out` and `got` have grown.
fn traffic<S: Nic, R: Nic>(
    clock: &ManualClock,
    s: &mut S,
    r: &mut R,
    out: &mut Vec<S::Buf>,
    got: &mut Vec<R::Buf>,
    rounds: u32,
    seq: &mut u32,
) -> u64 {
    let mut received = 0;
    for _ in 0..rounds {
        while out.len() < 32 {
            let Some(mut b) = s.alloc() else { break };
            b.set_len(60 + (*seq % 200) as usize);
            b.data_mut()[..4].copy_from_slice(&seq.to_be_bytes());
            *seq += 1;
            out.push(b);
        }
        s.tx_burst(out);
        clock.advance_ns(10_000);
        while r.rx_burst(got, 64) > 0 {
            received += got.len() as u64;
            got.clear();
        }
    }
    received
}

fn measure<S: Nic, R: Nic>(clock: &ManualClock, s: &mut S, r: &mut R) -> (u64, u64) {
    let mut out = Vec::with_capacity(64);
    let mut got = Vec::with_capacity(256);
    let mut seq = 0;
    // Warm up. The pools create their buffers on first use, up to `pool_size`: a new high-water
    // mark of buffers in flight allocates once; take every buffer once so that cannot happen.
    let all: Vec<S::Buf> = std::iter::from_fn(|| s.alloc()).collect();
    drop(all);
    let all: Vec<R::Buf> = std::iter::from_fn(|| r.alloc()).collect();
    drop(all);
    traffic(clock, s, r, &mut out, &mut got, 2_000, &mut seq);
    let before = allocs();
    let received = traffic(clock, s, r, &mut out, &mut got, 2_000, &mut seq);
    (allocs() - before, received)
}

fn wrap(nic: MemNic, spec: &str, clock: &ManualClock) -> FaultyNic<MemNic, ManualClock> {
    FaultyNic::new(nic, spec.parse().unwrap(), clock.clone())
}

#[test]
fn steady_state_allocates_nothing() {
    let clock = ManualClock::new();

    let (mut a, mut b) = pair(MemConfig::default());
    let (n, received) = measure(&clock, &mut a, &mut b);
    assert!(received > 60_000, "{received}");
    assert_eq!(n, 0, "the mem pair allocated {n} times in steady state");

    let (a, b) = pair(MemConfig::default());
    let (mut a, mut b) = (wrap(a, "", &clock), wrap(b, "", &clock));
    let (n, received) = measure(&clock, &mut a, &mut b);
    assert!(received > 60_000, "{received}");
    assert_eq!(n, 0, "the pass-through injector allocated {n} times in steady state");

    let spec = "loss=0.02,dup=0.02,reorder=0.05,corrupt=0.01,delay_us=30";
    let (a, b) = pair(MemConfig::default());
    let (mut a, mut b) = (wrap(a, spec, &clock), wrap(b, spec, &clock));
    let (n, received) = measure(&clock, &mut a, &mut b);
    assert!(received > 55_000, "{received}");
    assert_eq!(n, 0, "the injector allocated {n} times in steady state");
}
