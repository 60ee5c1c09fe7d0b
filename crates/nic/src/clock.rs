//! Time for the parts of this crate that need it (the fault injector's delays), injectable so
//! that tests run on a fake clock.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

/// A monotonic clock in nanoseconds from an arbitrary origin.
pub trait Clock {
    fn now_ns(&self) -> u64;
}

/// The real monotonic clock.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    pub fn new() -> Self {
        Self { origin: Instant::now() }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
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
