//! The runtime's one lock, timed (issue 25): how long threads waited for it and how long it was
//! held, as log2 histograms of CPU ticks that `observe` publishes in nanoseconds (`pronghorn
//! lat`'s `lock-wait` and `lock-hold` stages, `pronghorn stat`'s `lock_*` counters).
//!
//! The cost stays off the uncontended path: acquiring is the same compare-and-swap as before
//! (a `try_lock`), and only a thread that finds the lock taken reads the clock around its wait,
//! so waits are always counted. Holds are timed (two reads of the time-stamp counter and a
//! histogram add, about 20 instructions per acquisition: 2-4% of a request, measured with
//! bench/request_cost.sh) only once a reader asked for them ([`LockStats::time_holds`], on
//! `pronghorn stat` and `lat`): before that, a load and a branch. Every histogram is written by
//! the holder only, so plain loads and stores suffice (atomics only so that the type is `Sync`).

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, TryLockError};

/// Buckets of a log2 histogram: bucket k holds values in [2^k, 2^(k+1)) (0 and 1 in bucket 0).
pub const LOG2_BUCKETS: usize = 64;

/// Wakeups that needed a system call (a futex wake or an eventfd write), against the runtime's
/// `wakeups` asked for: what waking threads cost beyond the bookkeeping.
pub(crate) static WAKEUP_SYSCALLS: AtomicU64 = AtomicU64::new(0);

/// A mutex whose waits and holds are counted.
pub(crate) struct StackLock<T> {
    mutex: Mutex<T>,
    stats: LockStats,
}

/// The lock's histograms and sums, in ticks of [`ticks`].
pub(crate) struct LockStats {
    pub wait: [AtomicU64; LOG2_BUCKETS],
    pub hold: [AtomicU64; LOG2_BUCKETS],
    pub wait_ticks: AtomicU64,
    pub hold_ticks: AtomicU64,
    /// Threads blocked in `lock` right now.
    pub waiting: AtomicU64,
    /// Whether holds are timed (a reader asked).
    timing_holds: AtomicBool,
    /// When the lock was made, in ticks and in CLOCK_MONOTONIC ns: the ticks' rate.
    origin: (u64, u64),
}

/// The lock, held: the guard, and when it was taken (0: the hold is not timed).
pub(crate) struct Held<'a, T> {
    guard: MutexGuard<'a, T>,
    stats: &'a LockStats,
    since: u64,
}

impl<T> StackLock<T> {
    pub fn new(value: T) -> StackLock<T> {
        StackLock {
            mutex: Mutex::new(value),
            stats: LockStats {
                wait: std::array::from_fn(|_| AtomicU64::new(0)),
                hold: std::array::from_fn(|_| AtomicU64::new(0)),
                wait_ticks: AtomicU64::new(0),
                hold_ticks: AtomicU64::new(0),
                waiting: AtomicU64::new(0),
                timing_holds: AtomicBool::new(false),
                origin: (ticks(), monotonic_ns()),
            },
        }
    }

    /// Takes the lock (a poisoned one too: the runtime's state stays usable after a caught panic).
    #[inline]
    pub fn lock(&self) -> Held<'_, T> {
        let guard = match self.mutex.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => self.wait(),
        };
        Held { guard, stats: &self.stats, since: self.stats.hold_start() }
    }

    /// The lock was taken: waits for it, timed.
    #[cold]
    #[inline(never)]
    fn wait(&self) -> MutexGuard<'_, T> {
        self.stats.waiting.fetch_add(1, Relaxed);
        let start = ticks();
        let g = self.mutex.lock().unwrap_or_else(|e| e.into_inner());
        let waited = ticks().wrapping_sub(start);
        self.stats.waiting.fetch_sub(1, Relaxed);
        add(&self.stats.wait[log2_bucket(waited)], 1);
        add(&self.stats.wait_ticks, waited);
        g
    }

    /// Takes the lock if it is free.
    #[inline]
    pub fn try_lock(&self) -> Option<Held<'_, T>> {
        let guard = match self.mutex.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        Some(Held { guard, stats: &self.stats, since: self.stats.hold_start() })
    }

    pub fn stats(&self) -> &LockStats {
        &self.stats
    }
}

impl LockStats {
    /// Times holds from now on.
    pub fn time_holds(&self) {
        self.timing_holds.store(true, Relaxed);
    }

    #[inline]
    fn hold_start(&self) -> u64 {
        if self.timing_holds.load(Relaxed) {
            ticks() | 1
        } else {
            0
        }
    }

    /// Ticks per microsecond, measured since the lock was made (`None` before a millisecond).
    pub fn ticks_per_us(&self) -> Option<f64> {
        let ns = monotonic_ns().saturating_sub(self.origin.1);
        (ns >= 1_000_000).then(|| ticks().wrapping_sub(self.origin.0) as f64 * 1000.0 / ns as f64)
    }
}

impl<T> Drop for Held<'_, T> {
    /// Counts the hold while the lock is still held (the guard is dropped after this).
    #[inline]
    fn drop(&mut self) {
        if self.since != 0 {
            self.count_hold();
        }
    }
}

impl<T> Held<'_, T> {
    #[cold]
    #[inline(never)]
    fn count_hold(&self) {
        let held = ticks().wrapping_sub(self.since);
        add(&self.stats.hold[log2_bucket(held)], 1);
        add(&self.stats.hold_ticks, held);
    }
}

impl<T> Deref for Held<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        &self.guard
    }
}

impl<T> DerefMut for Held<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        &mut self.guard
    }
}

/// An add by the lock's holder (the only writer): a load and a store, no locked instruction.
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
}

/// The log2 bucket of `v`.
pub fn log2_bucket(v: u64) -> usize {
    (63 - (v | 1).leading_zeros()) as usize
}

/// The time-stamp counter (x86-64; constant-rate on every CPU of the last decade), else
/// CLOCK_MONOTONIC in ns.
#[cfg(target_arch = "x86_64")]
pub fn ticks() -> u64 {
    // SAFETY: RDTSC reads a counter; it has no memory effect and every x86-64 CPU has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
pub fn ticks() -> u64 {
    monotonic_ns()
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the kernel to write.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(h: &[AtomicU64; LOG2_BUCKETS]) -> u64 {
        h.iter().map(|b| b.load(Relaxed)).sum()
    }

    #[test]
    fn log2_buckets() {
        assert_eq!((log2_bucket(0), log2_bucket(1), log2_bucket(2), log2_bucket(3)), (0, 0, 1, 1));
        assert_eq!((log2_bucket(1023), log2_bucket(1024), log2_bucket(u64::MAX)), (9, 10, 63));
    }

    /// N threads contending: the main thread holds the lock until the N others are all blocked
    /// on it, so each of them waits once; every acquisition is a hold.
    #[test]
    fn contending_threads_fill_the_wait_histogram() {
        const N: u64 = 4;
        let lock = StackLock::new(0u64);
        drop(lock.lock());
        assert_eq!(total(&lock.stats.hold), 0, "holds are not timed before a reader asks");
        lock.stats.time_holds();
        drop(lock.lock());
        assert_eq!((total(&lock.stats.wait), total(&lock.stats.hold)), (0, 1), "no wait without contention");
        std::thread::scope(|s| {
            let held = lock.lock();
            for _ in 0..N {
                s.spawn(|| *lock.lock() += 1);
            }
            while lock.stats.waiting.load(Relaxed) < N {
                std::thread::yield_now();
            }
            drop(held);
        });
        assert_eq!(*lock.lock(), N);
        assert_eq!(total(&lock.stats.wait), N, "each contending thread waited once");
        assert_eq!(total(&lock.stats.hold), N + 3);
        assert!(lock.stats.wait_ticks.load(Relaxed) > 0 && lock.stats.hold_ticks.load(Relaxed) > 0);
        assert!(lock.try_lock().is_some());
    }
}
