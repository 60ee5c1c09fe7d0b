//! Seeing inside a running accelerated process (issue 11): the stats region that `pronghorn
//! ps`, `stat` and `lat` read without disturbing the process (`region`), and the control socket
//! that serves what needs the runtime's lock: the connection table, a capture of frames, fresh
//! NIC counters (`control`). Both are files in the run directory, owner-only, removed when the
//! process exits (by the process, or by the cleanup helper after a process that died or gave
//! up root).
//!
//! This module reads the shards' counters and sockets; it never changes what they do. The
//! only data-path cost is `Runtime::publish` (a copy of a few hundred bytes at most once a
//! millisecond), the latency samples (a clock read and an add) and the lock's statistics
//! (`lockstat`).
//!
//! This module holds the observer's state; `publish` fills the region from the runtime and
//! starts the control socket.

mod publish;

pub mod control;
pub mod region;

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::lockstat::LockStats;
use region::Region;

/// How often the counters are copied into the region at most.
const PUBLISH_EVERY_NS: u64 = 1_000_000;
/// The port's own counters that open each shard's row (`nic_*`, `xdp_*`, from `Nic::stats`).
const NIC_COUNTERS: usize = 13;
/// Write times remembered for the write->tx stage between two transmissions.
const PENDING_WRITES: usize = 64;

/// One process's region and latency bookkeeping.
pub(crate) struct Observer {
    region: Region,
    next_publish_ns: u64,
    /// When the writes since the last transmission were made (`write->tx`).
    pending_writes: PendingWrites,
}

/// The times of the writes not yet transmitted, at most [`PENDING_WRITES`]: one buffer made
/// once. (Taken with `mem::take` at each transmission, it was a malloc and a free per request:
/// perf showed them under every send of point_select.)
struct PendingWrites(Vec<u64>);

impl PendingWrites {
    fn new() -> Self {
        PendingWrites(Vec::with_capacity(PENDING_WRITES))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Remembers a write at `now`, unless [`PENDING_WRITES`] are waiting already.
    fn push(&mut self, now: u64) {
        if self.0.len() < PENDING_WRITES {
            self.0.push(now);
        }
    }

    /// Empties the list into `f`, keeping its buffer.
    fn drain(&mut self, f: impl FnMut(u64)) {
        self.0.drain(..).for_each(f);
    }
}

/// Records `ns` in the histogram of stage `stage`.
fn sample(region: &mut Region, stage: usize, ns: u64, weight: u64) {
    region.latency()[stage][region::bucket_of(ns)] += weight;
}

const STAGE_RX: usize = 0;
const STAGE_READ: usize = 1;
const STAGE_WRITE: usize = 2;
const STAGE_LOCK_WAIT: usize = 3;
const STAGE_LOCK_HOLD: usize = 4;

/// The runtime lock's figures for the region: waits, microseconds waited, holds, microseconds
/// held; its wait and hold histograms as latency stages (each octave of
/// ticks counted at its middle, in ns).
fn lock_figures(s: &LockStats) -> ([u64; 4], [[u64; region::BUCKETS]; 2]) {
    // In the first millisecond the ticks' rate is not known yet: taken as 1 GHz.
    let ticks_per_us = s.ticks_per_us().unwrap_or(1000.0);
    let us = |ticks: &AtomicU64| (ticks.load(Relaxed) as f64 / ticks_per_us) as u64;
    let total = |h: &[AtomicU64]| h.iter().map(|b| b.load(Relaxed)).sum::<u64>();
    let mut rows = [[0; region::BUCKETS]; 2];
    for (row, octaves) in rows.iter_mut().zip([&s.wait, &s.hold]) {
        for (k, n) in octaves.iter().enumerate() {
            let n = n.load(Relaxed);
            if n > 0 {
                let middle_ticks = 1.5 * (1u64 << k) as f64;
                row[region::bucket_of((middle_ticks * 1000.0 / ticks_per_us) as u64)] += n;
            }
        }
    }
    ([total(&s.wait), us(&s.wait_ticks), total(&s.hold), us(&s.hold_ticks)], rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_writes_keep_one_buffer_and_a_bounded_count() {
        let mut p = PendingWrites::new();
        let buffer = p.0.as_ptr();
        for round in 0..3u64 {
            for i in 0..PENDING_WRITES as u64 + 5 {
                p.push(round * 1000 + i);
            }
            let mut seen = Vec::new();
            p.drain(|t| seen.push(t));
            assert_eq!(seen.len(), PENDING_WRITES, "the writes beyond the bound are not remembered");
            assert_eq!(seen[0], round * 1000);
            assert!(p.is_empty());
            assert_eq!(p.0.as_ptr(), buffer, "the buffer made once is kept (no allocation per transmission)");
        }
    }
}
