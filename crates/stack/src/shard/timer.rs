//! The shard's timers: a hierarchical timing wheel (Varghese & Lauck, as in Linux and tokio).
//!
//! It owns the timers of one shard: a deadline (u64 nanoseconds, the caller's clock) and a value
//! (typically a connection index and a timer kind). Insert, cancel and reschedule are O(1) and
//! allocation-free once the slab has grown to its working size; firing is amortised O(1) per
//! timer (each timer moves down at most once per level) plus the O(log k) ordering of the k
//! timers that fall due in the same tick; finding the next deadline looks at six occupancy words,
//! never at the timers.
//!
//! What it must not do: read a clock, allocate per operation in steady state, or scan all timers
//! (the per-timer path is what lets a shard hold a million connections).
//!
//! # Layout
//! - Entries live in a slab (`Vec` + free list); a [`TimerHandle`] is the slab index plus a
//!   generation, so a handle kept after its timer fired or was cancelled cannot touch the timer
//!   that reuses the slot.
//! - The wheel has [`LEVELS`] levels of 64 slots; a slot of level `l` spans `64^l` ticks, so the
//!   wheel covers `64^6` ticks (about 795 days at the default 1 ms tick). Each slot is an intrusive
//!   doubly-linked list threaded through the slab by index, with a 64-bit occupancy word per level
//!   and a per-slot lower bound on the deadlines in it. Deadlines beyond the span wait in the top
//!   level's furthest slot and are placed again each time it comes round.
//! - The wheel holds timers whose tick is after the wheel's current tick. Timers of the current
//!   tick or earlier (including deadlines already in the past at insert) sit in a small binary heap
//!   ordered by exact deadline, so that [`TimerWheel::poll`] fires exactly the timers with
//!   `deadline <= now`, in deadline order, even within a tick. Cancelling one of those leaves a
//!   stale heap item that is recognised (by a per-entry schedule counter) and discarded.
//!
//! # Semantics
//! A timer fires at the first `poll`/`advance` whose `now >= deadline` (never early, never late
//! relative to that call). Timers fire in deadline order; equal deadlines fire in an unspecified
//! but deterministic order. [`TimerWheel::next_deadline`] is a lower bound on the earliest pending
//! deadline: exact after inserts and firing (for deadlines within the wheel's span), possibly
//! earlier (never later) after cancels and reschedules. Time is expected to be monotonic; a `now` earlier than a previous one fires nothing
//! new and moves nothing back.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::num::NonZeroU32;

/// The default tick: 1 ms.
pub const DEFAULT_TICK_NS: u64 = 1_000_000;
/// Levels of the wheel.
pub const LEVELS: usize = 6;
const SLOT_BITS: u32 = 6;
const SLOTS: usize = 1 << SLOT_BITS;
const SLOT_MASK: u64 = SLOTS as u64 - 1;
/// log2 of the ticks the wheel spans directly (64^6).
const SPAN_BITS: u32 = SLOT_BITS * LEVELS as u32;
const NIL: u32 = u32::MAX;
/// `Entry::loc` for a free slab slot.
const LOC_FREE: u16 = u16::MAX;
/// `Entry::loc` for a timer waiting in the due heap.
const LOC_DUE: u16 = u16::MAX - 1;
/// `Entry::loc` while a timer is being moved.
const LOC_NONE: u16 = u16::MAX - 2;

/// Names one timer. Stale once the timer fired or was cancelled: every method then treats it as
/// unknown. `Option<TimerHandle>` is 8 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimerHandle {
    index: u32,
    gen: NonZeroU32,
}

struct Entry<T> {
    value: Option<T>,
    deadline: u64,
    prev: u32,
    /// Next in the slot list, or in the free list.
    next: u32,
    gen: NonZeroU32,
    /// Bumped each time the timer enters the due heap; heap items carry it.
    sched: u32,
    /// `level * 64 + slot`, or one of the `LOC_*` values.
    loc: u16,
}

/// A hierarchical timer wheel holding values of type `T`.
pub struct TimerWheel<T> {
    tick_ns: u64,
    /// The wheel's current tick: every timer in the wheel has a later tick, every timer in `due` a
    /// tick no later than this.
    elapsed: u64,
    entries: Vec<Entry<T>>,
    free: u32,
    len: usize,
    heads: [[u32; SLOTS]; LEVELS],
    occupied: [u64; LEVELS],
    /// A lower bound (ns) on the deadlines in each slot; `u64::MAX` when empty.
    slot_min: [[u64; SLOTS]; LEVELS],
    /// (deadline, index, sched) of timers whose tick has come.
    due: BinaryHeap<Reverse<(u64, u32, u32)>>,
    /// No pending deadline is earlier than this (a lower bound, like [`TimerWheel::next_deadline`],
    /// which sets it when a `poll` finds nothing due; placing a timer lowers it): a `poll` before
    /// it returns at once. A shard polls its wheel on every pass, nearly always before the
    /// earliest deadline.
    horizon: u64,
}

impl<T> TimerWheel<T> {
    /// A wheel with the default 1 ms tick whose clock starts at `now_ns`.
    pub fn new(now_ns: u64) -> Self {
        Self::with_tick(DEFAULT_TICK_NS, now_ns)
    }

    /// A wheel with a tick of `tick_ns` (> 0) whose clock starts at `now_ns`.
    pub fn with_tick(tick_ns: u64, now_ns: u64) -> Self {
        assert!(tick_ns > 0, "timer tick must be positive");
        TimerWheel {
            tick_ns,
            elapsed: now_ns / tick_ns,
            entries: Vec::new(),
            free: NIL,
            len: 0,
            heads: [[NIL; SLOTS]; LEVELS],
            occupied: [0; LEVELS],
            slot_min: [[u64::MAX; SLOTS]; LEVELS],
            due: BinaryHeap::new(),
            horizon: u64::MAX,
        }
    }

    /// Reserves slab room for `additional` more timers, so inserts up to that many do not allocate.
    pub fn reserve(&mut self, additional: usize) {
        let free_slots = self.entries.len() - self.len;
        if additional > free_slots {
            self.entries.reserve(additional - free_slots);
        }
    }

    /// The tick length in nanoseconds.
    pub fn tick_ns(&self) -> u64 {
        self.tick_ns
    }

    /// Timers pending.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No timer pending.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Schedules `value` to fire at `deadline_ns`. A deadline at or before the last `now` seen
    /// fires at the next `poll`/`advance`.
    pub fn insert(&mut self, deadline_ns: u64, value: T) -> TimerHandle {
        let index = match self.free {
            NIL => {
                let index = self.entries.len();
                assert!(index < NIL as usize, "timer slab full");
                self.entries.push(Entry {
                    value: Some(value),
                    deadline: deadline_ns,
                    prev: NIL,
                    next: NIL,
                    gen: NonZeroU32::MIN,
                    sched: 0,
                    loc: LOC_NONE,
                });
                index as u32
            }
            index => {
                let e = &mut self.entries[index as usize];
                self.free = e.next;
                e.value = Some(value);
                e.deadline = deadline_ns;
                e.loc = LOC_NONE;
                index
            }
        };
        self.len += 1;
        self.place(index);
        TimerHandle { index, gen: self.entries[index as usize].gen }
    }

    /// Cancels a pending timer and gives its value back; `None` for a stale handle.
    pub fn cancel(&mut self, handle: TimerHandle) -> Option<T> {
        let index = self.live(handle)?;
        if self.entries[index as usize].loc < LOC_NONE {
            self.unlink(index);
        }
        let value = self.release(index);
        self.clean_due_top();
        Some(value)
    }

    /// Moves a pending timer to `deadline_ns`, keeping its handle. `false` for a stale handle.
    pub fn reschedule(&mut self, handle: TimerHandle, deadline_ns: u64) -> bool {
        let Some(index) = self.live(handle) else { return false };
        let e = &mut self.entries[index as usize];
        if e.deadline == deadline_ns {
            return true;
        }
        if e.loc < LOC_NONE {
            self.unlink(index);
        }
        // A heap item of a due timer goes stale by itself: `loc` changes here, or `sched` does
        // when the timer enters the heap again.
        let e = &mut self.entries[index as usize];
        e.loc = LOC_NONE;
        e.deadline = deadline_ns;
        self.place(index);
        self.clean_due_top();
        true
    }

    /// The deadline of a pending timer.
    pub fn deadline(&self, handle: TimerHandle) -> Option<u64> {
        self.live(handle).map(|i| self.entries[i as usize].deadline)
    }

    /// The value of a pending timer.
    pub fn get(&self, handle: TimerHandle) -> Option<&T> {
        self.live(handle).and_then(|i| self.entries[i as usize].value.as_ref())
    }

    /// The value of a pending timer, mutably.
    pub fn get_mut(&mut self, handle: TimerHandle) -> Option<&mut T> {
        let i = self.live(handle)?;
        self.entries[i as usize].value.as_mut()
    }

    /// A lower bound on the earliest pending deadline (`None` when no timer is pending): exact
    /// after inserts and firing while deadlines lie within the wheel's span; after a cancel or
    /// reschedule it may be earlier than the real one (a wakeup that finds nothing to fire),
    /// never later. Costs at most seven bit scans.
    pub fn next_deadline(&self) -> Option<u64> {
        if let Some(&Reverse((deadline, _, _))) = self.due.peek() {
            return Some(deadline);
        }
        let (level, slot) = self.next_slot()?;
        let start = self.slot_start(level, slot).saturating_mul(self.tick_ns);
        let mut bound = self.slot_min[level][slot];
        if level == LEVELS - 1 {
            // The top level's furthest slot also holds deadlines beyond the span, so a later top
            // slot may hold an earlier deadline; that slot's start bounds it.
            let others = self.occupied[level] & !(1 << slot);
            if others != 0 {
                let cur = ((self.elapsed >> (level as u32 * SLOT_BITS)) & SLOT_MASK) as u32;
                let next = (others.rotate_right(cur).trailing_zeros() + cur) as usize & (SLOTS - 1);
                bound = bound.min(self.slot_start(level, next).saturating_mul(self.tick_ns));
            }
        }
        Some(bound.max(start))
    }

    /// Takes the earliest timer with `deadline <= now_ns`, or `None` when there is none. Lets the
    /// caller use the wheel between firings (rescheduling from a timeout handler):
    /// `while let Some(v) = wheel.poll(now) { ... }`. A timer inserted with a deadline at or before
    /// `now_ns` during such a loop fires in the same loop.
    pub fn poll(&mut self, now_ns: u64) -> Option<T> {
        if now_ns < self.horizon {
            // Nothing is due. (`elapsed` stays behind: the wheel is as valid as if this call
            // had not been made.)
            return None;
        }
        let now_tick = now_ns / self.tick_ns;
        loop {
            if let Some(&Reverse((deadline, index, sched))) = self.due.peek() {
                if !self.is_current(index, sched) {
                    // `clean_due_top` keeps the top live between calls; this is a safety net.
                    self.due.pop();
                    continue;
                }
                if deadline > now_ns {
                    // Everything in the wheel is later still.
                    self.horizon = deadline;
                    return None;
                }
                self.due.pop();
                let value = self.release(index);
                self.clean_due_top();
                return Some(value);
            }
            let Some((level, slot)) = self.next_slot() else { break };
            let start = self.slot_start(level, slot);
            if start > now_tick {
                break;
            }
            self.elapsed = self.elapsed.max(start);
            self.cascade(level, slot);
        }
        // No occupied slot starts at or before `now_tick`, so every timer keeps its slot.
        self.elapsed = self.elapsed.max(now_tick);
        self.horizon = self.next_deadline().unwrap_or(u64::MAX);
        None
    }

    /// Fires every timer with `deadline <= now_ns`, in deadline order, handing each value to `fire`.
    /// Returns how many fired.
    pub fn advance(&mut self, now_ns: u64, mut fire: impl FnMut(T)) -> usize {
        let mut n = 0;
        while let Some(value) = self.poll(now_ns) {
            fire(value);
            n += 1;
        }
        n
    }

    fn live(&self, handle: TimerHandle) -> Option<u32> {
        let e = self.entries.get(handle.index as usize)?;
        (e.gen == handle.gen && e.loc != LOC_FREE).then_some(handle.index)
    }

    /// Puts entry `index` (not linked anywhere) where its deadline says.
    fn place(&mut self, index: u32) {
        self.horizon = self.horizon.min(self.entries[index as usize].deadline);
        let tick = self.entries[index as usize].deadline / self.tick_ns;
        if tick <= self.elapsed {
            let e = &mut self.entries[index as usize];
            e.sched = e.sched.wrapping_add(1);
            e.loc = LOC_DUE;
            self.due.push(Reverse((e.deadline, index, e.sched)));
            self.compact_due();
            return;
        }
        let (level, slot) = self.position(tick);
        let head = self.heads[level][slot];
        let e = &mut self.entries[index as usize];
        e.prev = NIL;
        e.next = head;
        e.loc = (level * SLOTS + slot) as u16;
        let deadline = e.deadline;
        if head != NIL {
            self.entries[head as usize].prev = index;
        }
        self.heads[level][slot] = index;
        self.occupied[level] |= 1 << slot;
        let min = &mut self.slot_min[level][slot];
        *min = (*min).min(deadline);
    }

    /// The (level, slot) for a tick after `elapsed`.
    fn position(&self, tick: u64) -> (usize, usize) {
        debug_assert!(tick > self.elapsed);
        let diff = tick ^ self.elapsed;
        if diff >> SPAN_BITS == 0 {
            let level = ((63 - diff.leading_zeros()) / SLOT_BITS) as usize;
            let slot = ((tick >> (level as u32 * SLOT_BITS)) & SLOT_MASK) as usize;
            return (level, slot);
        }
        // Past the top level's current rotation. The top level's slots before the current one
        // stand for the next rotation: use the tick's own slot when it lies there, else the
        // furthest slot, whose start is still no later than the deadline; it is placed again
        // when that slot comes round.
        let top = LEVELS - 1;
        let shift = top as u32 * SLOT_BITS;
        let cur = (self.elapsed >> shift) & SLOT_MASK;
        let own = (tick >> shift) & SLOT_MASK;
        if tick >> SPAN_BITS == (self.elapsed >> SPAN_BITS) + 1 && own < cur {
            (top, own as usize)
        } else {
            (top, ((cur + SLOT_MASK) & SLOT_MASK) as usize)
        }
    }

    /// The first tick of a slot: in the current rotation of its level if at or after the current
    /// slot, else in the next one.
    fn slot_start(&self, level: usize, slot: usize) -> u64 {
        let shift = level as u32 * SLOT_BITS;
        let rotation_bits = shift + SLOT_BITS;
        let cur = (self.elapsed >> shift) & SLOT_MASK;
        let rotation_start = self.elapsed >> rotation_bits << rotation_bits;
        let start = rotation_start.saturating_add((slot as u64) << shift);
        if (slot as u64) < cur {
            start.saturating_add(1 << rotation_bits)
        } else {
            start
        }
    }

    /// The earliest occupied slot: the first one at or after the current slot of the lowest
    /// level with any timer (everything at level `l` precedes everything at level `l + 1`).
    fn next_slot(&self) -> Option<(usize, usize)> {
        for level in 0..LEVELS {
            let occupied = self.occupied[level];
            if occupied != 0 {
                let cur = ((self.elapsed >> (level as u32 * SLOT_BITS)) & SLOT_MASK) as u32;
                let slot = (occupied.rotate_right(cur).trailing_zeros() + cur) as usize & (SLOTS - 1);
                return Some((level, slot));
            }
        }
        None
    }

    /// Empties a slot whose start has come, placing each timer again relative to `elapsed`.
    fn cascade(&mut self, level: usize, slot: usize) {
        let mut index = std::mem::replace(&mut self.heads[level][slot], NIL);
        self.occupied[level] &= !(1 << slot);
        self.slot_min[level][slot] = u64::MAX;
        while index != NIL {
            let next = self.entries[index as usize].next;
            self.entries[index as usize].loc = LOC_NONE;
            self.place(index);
            index = next;
        }
    }

    fn unlink(&mut self, index: u32) {
        let e = &self.entries[index as usize];
        let (prev, next) = (e.prev, e.next);
        let (level, slot) = (e.loc as usize / SLOTS, e.loc as usize % SLOTS);
        if prev == NIL {
            self.heads[level][slot] = next;
        } else {
            self.entries[prev as usize].next = next;
        }
        if next != NIL {
            self.entries[next as usize].prev = prev;
        }
        if self.heads[level][slot] == NIL {
            self.occupied[level] &= !(1 << slot);
            self.slot_min[level][slot] = u64::MAX;
        }
        self.entries[index as usize].loc = LOC_NONE;
    }

    /// Frees a slab entry (already unlinked) and returns its value.
    fn release(&mut self, index: u32) -> T {
        let e = &mut self.entries[index as usize];
        let value = e.value.take().expect("live timer has a value");
        e.loc = LOC_FREE;
        e.gen = e.gen.checked_add(1).unwrap_or(NonZeroU32::MIN);
        e.next = self.free;
        self.free = index;
        self.len -= 1;
        value
    }

    fn is_current(&self, index: u32, sched: u32) -> bool {
        let e = &self.entries[index as usize];
        e.loc == LOC_DUE && e.sched == sched
    }

    /// Drops stale items from the top of the due heap, so its top is always a live timer.
    fn clean_due_top(&mut self) {
        while let Some(&Reverse((_, index, sched))) = self.due.peek() {
            if self.is_current(index, sched) {
                break;
            }
            self.due.pop();
        }
    }

    /// Bounds the stale items a burst of cancels or reschedules of due timers can leave.
    fn compact_due(&mut self) {
        if self.due.len() > 64 && self.due.len() > 2 * self.len {
            let entries = &self.entries;
            self.due.retain(|&Reverse((_, index, sched))| {
                let e = &entries[index as usize];
                e.loc == LOC_DUE && e.sched == sched
            });
        }
    }
}

impl<T> Default for TimerWheel<T> {
    fn default() -> Self {
        Self::new(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const SEC: u64 = 1_000 * MS;

    fn splitmix64(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    impl<T> TimerWheel<T> {
        /// Every timer lies in a slot that starts after `elapsed` and no later than its tick, and
        /// below the top level, before the slot ends.
        fn check_invariants(&self) {
            for level in 0..LEVELS {
                for slot in 0..SLOTS {
                    let mut i = self.heads[level][slot];
                    assert_eq!(i != NIL, self.occupied[level] & (1 << slot) != 0);
                    while i != NIL {
                        let e = &self.entries[i as usize];
                        let tick = e.deadline / self.tick_ns;
                        let start = self.slot_start(level, slot);
                        assert!(
                            start > self.elapsed,
                            "start {start} elapsed {} level {level} slot {slot} tick {tick}",
                            self.elapsed
                        );
                        assert!(
                            start <= tick,
                            "start {start} > tick {tick} level {level} slot {slot} elapsed {}",
                            self.elapsed
                        );
                        if level < LEVELS - 1 {
                            let end = start + (1u64 << (level as u32 * SLOT_BITS));
                            assert!(
                                tick < end,
                                "tick {tick} beyond slot end {end} level {level} slot {slot} elapsed {}",
                                self.elapsed
                            );
                        }
                        i = e.next;
                    }
                }
            }
        }
    }

    fn fire_all<T>(w: &mut TimerWheel<T>, now: u64) -> Vec<T> {
        let mut out = Vec::new();
        w.advance(now, |v| out.push(v));
        out
    }

    #[test]
    fn fires_in_deadline_order() {
        let mut w = TimerWheel::new(0);
        for (i, d) in [50 * MS, 3 * MS, 3 * MS + 500, 70 * SEC, 10 * MS, 2 * MS + 1].into_iter().enumerate() {
            w.insert(d, (d, i));
        }
        assert_eq!(w.len(), 6);
        assert_eq!(fire_all(&mut w, 2 * MS), vec![]);
        assert_eq!(fire_all(&mut w, 3 * MS + 499), vec![(2 * MS + 1, 5), (3 * MS, 1)]);
        assert_eq!(fire_all(&mut w, 3 * MS + 500), vec![(3 * MS + 500, 2)]);
        assert_eq!(fire_all(&mut w, 60 * SEC), vec![(10 * MS, 4), (50 * MS, 0)]);
        assert_eq!(w.next_deadline(), Some(70 * SEC));
        assert_eq!(fire_all(&mut w, 70 * SEC), vec![(70 * SEC, 3)]);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    #[test]
    fn order_within_one_tick_is_by_deadline() {
        let mut w = TimerWheel::new(0);
        for d in [900_000u64, 100_000, 500_000, 300_000, 700_000] {
            w.insert(5 * MS + d, d);
        }
        assert_eq!(fire_all(&mut w, 5 * MS + 400_000), vec![100_000, 300_000]);
        assert_eq!(w.next_deadline(), Some(5 * MS + 500_000));
        assert_eq!(fire_all(&mut w, 6 * MS), vec![500_000, 700_000, 900_000]);
    }

    #[test]
    fn cancel_and_stale_handles() {
        let mut w = TimerWheel::new(0);
        let a = w.insert(10 * MS, 'a');
        let b = w.insert(20 * MS, 'b');
        let c = w.insert(20 * MS, 'c');
        assert_eq!(w.cancel(b), Some('b'));
        assert_eq!(w.cancel(b), None, "cancel twice");
        assert!(!w.reschedule(b, 5 * MS), "reschedule a cancelled timer");
        // The slot is reused with a new generation: the old handle must not reach it.
        let d = w.insert(30 * MS, 'd');
        assert_eq!(d.index, b.index);
        assert_ne!(d.gen, b.gen);
        assert_eq!(w.cancel(b), None);
        assert_eq!(w.get(d), Some(&'d'));
        assert_eq!(w.get(b), None);
        assert_eq!(fire_all(&mut w, 25 * MS), vec!['a', 'c']);
        // Handles of fired timers are stale too.
        assert_eq!(w.cancel(a), None);
        assert_eq!(w.deadline(c), None);
        assert_eq!(w.deadline(d), Some(30 * MS));
        assert_eq!(fire_all(&mut w, 30 * MS), vec!['d']);
        assert!(w.is_empty());
    }

    #[test]
    fn cancel_due_timer_before_it_fires() {
        let mut w = TimerWheel::new(10 * MS);
        // In the current tick and in the past: both wait in the due heap.
        let a = w.insert(10 * MS + 5, 1);
        let b = w.insert(3 * MS, 2);
        assert_eq!(w.next_deadline(), Some(3 * MS));
        assert_eq!(w.cancel(b), Some(2));
        assert_eq!(w.next_deadline(), Some(10 * MS + 5));
        assert_eq!(w.cancel(a), Some(1));
        assert_eq!(w.next_deadline(), None);
        assert_eq!(fire_all(&mut w, SEC), Vec::<i32>::new());
    }

    #[test]
    fn reschedule_moves_timers() {
        let mut w = TimerWheel::new(0);
        let a = w.insert(100 * MS, 'a');
        let b = w.insert(200 * MS, 'b');
        assert!(w.reschedule(a, 300 * MS));
        assert!(w.reschedule(b, 50 * MS));
        assert_eq!(fire_all(&mut w, 100 * MS), vec!['b']);
        assert!(!w.reschedule(b, 400 * MS), "fired");
        // Pull a far timer into the past: it fires at the next advance.
        assert!(w.reschedule(a, 1));
        assert_eq!(w.next_deadline(), Some(1));
        assert_eq!(fire_all(&mut w, 100 * MS), vec!['a']);
        // Reschedule a due timer back into the wheel, and the same tick twice.
        let c = w.insert(100 * MS, 'c');
        assert!(w.reschedule(c, 150 * MS));
        assert!(w.reschedule(c, 100 * MS));
        assert!(w.reschedule(c, 150 * MS));
        assert_eq!(fire_all(&mut w, 149 * MS), Vec::<char>::new());
        assert_eq!(fire_all(&mut w, 150 * MS), vec!['c']);
    }

    #[test]
    fn past_deadline_fires_at_next_advance() {
        let mut w = TimerWheel::new(0);
        assert_eq!(fire_all(&mut w, 5 * SEC), Vec::<u8>::new());
        w.insert(SEC, 1);
        w.insert(0, 0);
        assert_eq!(w.next_deadline(), Some(0));
        // Even an advance to an earlier time (time never moves back) fires them.
        assert_eq!(fire_all(&mut w, 5 * SEC), vec![0, 1]);
    }

    #[test]
    fn far_deadlines_cascade_down() {
        let mut w = TimerWheel::new(0);
        let hour = 3_600 * SEC;
        let day = 24 * hour;
        let deadlines = [
            5 * hour + 17 * MS + 3,
            9 * hour,
            100 * day + 1,
            // Beyond the 64^6 ms span of the wheel.
            3 * 365 * day + 12_345,
            40 * 365 * day,
        ];
        for (i, &d) in deadlines.iter().enumerate() {
            w.insert(d, i);
        }
        for (i, &d) in deadlines.iter().enumerate() {
            // Approach the deadline in halving steps: each advance cascades the timer down a
            // level or more, and must neither fire it nor lose track of its deadline.
            let mut now = 0u64;
            for k in 1..=40 {
                now = now.max(d - (d >> k)).min(d - 1);
                assert_eq!(fire_all(&mut w, now), Vec::<usize>::new(), "early at {now} for {d}");
                assert_eq!(w.next_deadline(), Some(d));
            }
            assert_eq!(fire_all(&mut w, d - 1), Vec::<usize>::new());
            assert_eq!(fire_all(&mut w, d), vec![i]);
        }
        // u64::MAX as "never" is accepted and stays pending.
        w.insert(u64::MAX, 99);
        assert_eq!(fire_all(&mut w, u64::MAX / 2), Vec::<usize>::new());
        assert!(w.next_deadline().is_some());
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn one_big_jump_fires_everything_in_order() {
        let mut w = TimerWheel::new(0);
        let mut rng = 7u64;
        let mut want = Vec::new();
        for i in 0..5_000u32 {
            let d = splitmix64(&mut rng) % (40 * 24 * 3_600 * SEC);
            w.insert(d, (d, i));
            want.push((d, i));
        }
        want.sort();
        let got = fire_all(&mut w, u64::MAX / 4);
        let got_d: Vec<u64> = got.iter().map(|x| x.0).collect();
        let want_d: Vec<u64> = want.iter().map(|x| x.0).collect();
        assert_eq!(got_d, want_d);
        let mut got_sorted = got;
        got_sorted.sort();
        assert_eq!(got_sorted, want);
    }

    #[test]
    fn poll_lets_handlers_reinsert() {
        let mut w = TimerWheel::new(0);
        w.insert(10 * MS, 0u32);
        let mut fired = Vec::new();
        let now = 100 * MS;
        while let Some(n) = w.poll(now) {
            fired.push(n);
            if n < 3 {
                // A periodic timer catching up: re-armed from inside the loop.
                w.insert((n as u64 + 2) * 10 * MS, n + 1);
            }
        }
        assert_eq!(fired, vec![0, 1, 2, 3]);
    }

    /// The wheel against a brute-force list, with random inserts (past, near, far, beyond the
    /// span), cancels, reschedules and advances of every size.
    #[test]
    fn randomized_against_model() {
        for seed in 0..8u64 {
            let mut rng = seed;
            let tick = [MS, 1, 1_000, 64 * MS][seed as usize % 4];
            let mut now = splitmix64(&mut rng) % (1 << 40);
            let mut w = TimerWheel::with_tick(tick, now);
            let mut model: Vec<(TimerHandle, u64, u32)> = Vec::new();
            let mut next_id = 0u32;
            let mut cancels = 0;
            for _ in 0..4_000 {
                let r = splitmix64(&mut rng);
                match r % 16 {
                    0..=5 => {
                        let span = match (r >> 8) % 6 {
                            0 => tick,
                            1 => 64 * tick,
                            2 => 4096 * tick,
                            3 => 1 << 30,
                            4 => 1 << 44,
                            _ => (tick << 37).min(1 << 58),
                        };
                        let d = (now + splitmix64(&mut rng) % span).saturating_sub(span / 8);
                        let h = w.insert(d, next_id);
                        model.push((h, d, next_id));
                        next_id += 1;
                    }
                    6..=7 if !model.is_empty() => {
                        let k = (r >> 8) as usize % model.len();
                        let (h, _, id) = model.swap_remove(k);
                        assert_eq!(w.cancel(h), Some(id));
                        assert_eq!(w.cancel(h), None);
                        cancels += 1;
                    }
                    8..=9 if !model.is_empty() => {
                        let k = (r >> 8) as usize % model.len();
                        let d = now + splitmix64(&mut rng) % (1 << (r % 40));
                        assert!(w.reschedule(model[k].0, d));
                        model[k].1 = d;
                    }
                    _ => {
                        let step = match (r >> 8) % 8 {
                            0 => 0,
                            1..=3 => splitmix64(&mut rng) % (4 * tick),
                            4..=5 => splitmix64(&mut rng) % (300 * tick),
                            6 => splitmix64(&mut rng) % (1 << 36),
                            _ => match w.next_deadline() {
                                Some(d) if d > now && d - now < 1 << 58 => d - now,
                                _ => 0,
                            },
                        };
                        now += step;
                        let mut want: Vec<(u64, u32)> =
                            model.iter().filter(|m| m.1 <= now).map(|m| (m.1, m.2)).collect();
                        want.sort();
                        model.retain(|m| m.1 > now);
                        let mut got = Vec::new();
                        w.advance(now, |id| got.push(id));
                        let got_d: Vec<u64> =
                            got.iter().map(|id| want.iter().find(|x| x.1 == *id).unwrap().0).collect();
                        assert!(got_d.windows(2).all(|p| p[0] <= p[1]), "out of order");
                        let mut got_sorted = got.clone();
                        got_sorted.sort();
                        let mut want_ids: Vec<u32> = want.iter().map(|x| x.1).collect();
                        want_ids.sort();
                        assert_eq!(got_sorted, want_ids, "seed {seed}: fired set at {now}");
                    }
                }
                assert_eq!(w.len(), model.len());
                w.check_invariants();
                let min = model.iter().map(|m| m.1).min();
                match (w.next_deadline(), min) {
                    (None, None) => {}
                    (Some(n), Some(m)) => assert!(n <= m, "seed {seed}: next_deadline {n} later than {m}"),
                    (n, m) => panic!("seed {seed}: next_deadline {n:?}, model {m:?}"),
                }
            }
            assert!(cancels > 0);
        }
    }

    /// With inserts and firing only, `next_deadline` is exact, not just a lower bound.
    #[test]
    fn next_deadline_exact_without_cancels() {
        let mut rng = 99u64;
        let mut now = 0;
        let mut w = TimerWheel::new(now);
        let mut model: Vec<u64> = Vec::new();
        for _ in 0..3_000 {
            let r = splitmix64(&mut rng);
            match r % 3 {
                0 => {
                    now += splitmix64(&mut rng) % (1u64 << (r % 38));
                    w.advance(now, |_| {});
                    model.retain(|&d| d > now);
                }
                _ => {
                    let d = now + splitmix64(&mut rng) % (1u64 << (r % 45));
                    w.insert(d, ());
                    model.push(d);
                }
            }
            assert_eq!(w.next_deadline(), model.iter().copied().min());
        }
    }

    #[test]
    fn million_timers_insert_cancel() {
        const N: usize = 1_000_000;
        let mut rng = 1u64;
        let mut w = TimerWheel::new(0);
        w.reserve(N);
        let mut handles = Vec::with_capacity(N);
        for i in 0..N as u32 {
            handles.push(w.insert(splitmix64(&mut rng) % (600 * SEC), i));
        }
        assert_eq!(w.len(), N);
        // Cancel every other one; fire the rest in one go.
        for (i, h) in handles.iter().enumerate().step_by(2) {
            assert_eq!(w.cancel(*h), Some(i as u32));
        }
        let slab = w.entries.capacity();
        // Steady state: refilling the freed slots does not grow the slab.
        for i in 0..N as u32 / 2 {
            handles[2 * i as usize] = w.insert(splitmix64(&mut rng) % (600 * SEC), i);
        }
        assert_eq!(w.entries.capacity(), slab);
        for h in handles.iter().step_by(2) {
            assert!(w.cancel(*h).is_some());
        }
        let n = w.advance(600 * SEC, |i| assert_eq!(i % 2, 1));
        assert_eq!(n, N / 2);
        assert!(w.is_empty());
        assert_eq!(w.next_deadline(), None);
    }

    /// Release-mode numbers: `cargo test --release -p stack -- --ignored --nocapture timer`.
    #[test]
    #[ignore]
    fn perf_million_timers() {
        use std::time::Instant;
        const N: usize = 1_000_000;
        let mut rng = 5u64;
        let deadlines: Vec<u64> = (0..N).map(|_| SEC + splitmix64(&mut rng) % (200 * SEC)).collect();
        let mut w = TimerWheel::new(0);
        w.reserve(N);
        let t = Instant::now();
        let handles: Vec<TimerHandle> = deadlines.iter().enumerate().map(|(i, &d)| w.insert(d, i as u32)).collect();
        let insert = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        for (h, &d) in handles.iter().zip(&deadlines) {
            w.reschedule(*h, d + 200 * MS);
        }
        let resched = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        for h in handles.iter().step_by(2) {
            w.cancel(*h);
        }
        let cancel = t.elapsed().as_nanos() as f64 / (N / 2) as f64;
        let t = Instant::now();
        let mut sum = 0u64;
        for _ in 0..N {
            sum = sum.wrapping_add(std::hint::black_box(&w).next_deadline().unwrap_or(0));
        }
        let next = t.elapsed().as_nanos() as f64 / N as f64;
        let t = Instant::now();
        let mut now = 0;
        let mut fired = 0;
        while fired < N / 2 {
            now += MS;
            fired += w.advance(now, |_| {});
        }
        let fire = t.elapsed().as_nanos() as f64 / (N / 2) as f64;
        println!(
            "timer wheel, 1M timers over 200 s, 1 ms tick: insert {insert:.1} ns, reschedule {resched:.1} ns, \
             cancel {cancel:.1} ns, fire (1 ms advances) {fire:.1} ns/timer, next_deadline {next:.1} ns ({sum})"
        );
    }
}
