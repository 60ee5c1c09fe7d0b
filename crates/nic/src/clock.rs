//! Time for the parts of this crate that need it (the fault injector's delays), injectable so
//! that tests run on a fake clock.

use std::cell::Cell;
use std::rc::Rc;

/// A monotonic clock in nanoseconds from an arbitrary origin.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

/// The real monotonic clock (CLOCK_MONOTONIC, what `std::time::Instant` reads).
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin_ns: u64,
}

impl MonotonicClock {
    pub fn new() -> Self {
        Self { origin_ns: monotonic_ns() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.origin_ns)
    }
}

/// CLOCK_MONOTONIC in nanoseconds, read directly: the runtime reads it several times per
/// request, and `Instant::elapsed` (a checked timespec subtraction, then a 128-bit
/// `Duration::as_nanos`) cost twice the read itself.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec it is given, which lives for the call;
    // CLOCK_MONOTONIC is always supported on Linux, so it cannot fail.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A clock that moves only when told to; clones share the same time.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: Rc<Cell<u64>>,
}

impl ManualClock {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn advance_ns(&self, ns: u64) {
        self.now.set(self.now.get() + ns);
    }
    pub fn set_ns(&self, ns: u64) {
        self.now.set(ns);
    }
}

impl Clock for ManualClock {
    fn now_ns(&self) -> u64 {
        self.now.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// It reads the clock `Instant` reads: a clock made after an `Instant` never runs ahead of
    /// that `Instant`'s elapsed time, and it never goes back.
    #[test]
    fn monotonic_clock_is_instants_clock() {
        let before = Instant::now();
        let clock = MonotonicClock::new();
        let mut last = 0;
        for _ in 0..1000 {
            let now = clock.now_ns();
            assert!(now >= last, "{now} < {last}");
            last = now;
        }
        assert!(u128::from(clock.now_ns()) <= before.elapsed().as_nanos());
    }
}
