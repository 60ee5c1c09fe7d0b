//! Sets of sequence ranges `[start, end)`: the receiver's out-of-order ranges (kept most recent
//! first, the order SACK blocks are reported in) and the sender's SACK scoreboard (kept
//! sorted). Each is a fixed-capacity array allocated on first use (a null pointer until
//! then): no allocation per packet, nothing on the heap for a connection without losses.

use crate::seq;

/// Out-of-order ranges a receiver keeps. Beyond this many holes, a segment that would open a
/// new range is dropped (the sender retransmits it). Linux has no fixed limit; 32 holes is far
/// more than a 128 KiB window sees at 5% loss.
pub(crate) const OOO_MAX: usize = 32;

/// SACKed ranges a sender remembers. When more arrive, the highest ones are forgotten (which
/// only costs needless retransmissions).
pub(crate) const SACK_MAX: usize = 32;

/// Merges `[s, e)` with every range of `ranges` it overlaps or touches. Returns the merged range
/// and the untouched ranges (in their order) with their count.
fn merge<const N: usize>(ranges: &[(u32, u32)], mut s: u32, mut e: u32) -> ((u32, u32), [(u32, u32); N], usize) {
    let mut taken = [false; N];
    loop {
        let mut changed = false;
        for (i, &(a, b)) in ranges.iter().enumerate() {
            if !taken[i] && seq::le(a, e) && seq::ge(b, s) {
                s = seq::min(s, a);
                e = seq::max(e, b);
                taken[i] = true;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut rest = [(0, 0); N];
    let mut n = 0;
    for (i, &range) in ranges.iter().enumerate() {
        if !taken[i] {
            rest[n] = range;
            n += 1;
        }
    }
    ((s, e), rest, n)
}

/// Up to `N` ranges in an array allocated on first use: a thin pointer (8 bytes) and a count
/// in the connection, nothing on the heap until a range is added.
#[derive(Debug, Default)]
struct RangeArray<const N: usize> {
    r: Option<Box<[(u32, u32); N]>>,
    n: u8,
}

impl<const N: usize> RangeArray<N> {
    fn ranges(&self) -> &[(u32, u32)] {
        match &self.r {
            Some(r) => &r[..self.n as usize],
            None => &[],
        }
    }

    /// Every slot, the array allocated if it was not.
    fn slots(&mut self) -> &mut [(u32, u32); N] {
        self.r.get_or_insert_with(|| Box::new([(0, 0); N]))
    }

    /// Forgets every range and frees the memory.
    fn clear(&mut self) {
        self.n = 0;
        self.r = None;
    }
}

/// The receiver's out-of-order ranges, most recently changed first.
#[derive(Debug, Default)]
pub(crate) struct OooRanges(RangeArray<OOO_MAX>);

impl OooRanges {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.n == 0
    }

    /// Forgets every range and frees the memory.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    pub(crate) fn ranges(&self) -> &[(u32, u32)] {
        self.0.ranges()
    }

    /// Adds `[s, e)`, merged with what it touches, as the most recent range. `false` when it
    /// would be one range too many (then nothing changes).
    pub(crate) fn add(&mut self, s: u32, e: u32) -> bool {
        let (merged, rest, n) = merge::<OOO_MAX>(self.ranges(), s, e);
        if n == OOO_MAX {
            return false;
        }
        let r = self.0.slots();
        r[0] = merged;
        r[1..=n].copy_from_slice(&rest[..n]);
        self.0.n = (n + 1) as u8;
        true
    }

    /// Takes out the ranges that start at or before `nxt` and returns how far the in-order data
    /// now reaches.
    pub(crate) fn advance(&mut self, mut nxt: u32) -> u32 {
        loop {
            let Some(i) = self.ranges().iter().position(|&(a, _)| seq::le(a, nxt)) else {
                return nxt;
            };
            let n = self.0.n as usize;
            let r = self.0.slots();
            nxt = seq::max(nxt, r[i].1);
            r.copy_within(i + 1..n, i);
            self.0.n -= 1;
        }
    }

    /// The part of the most recent range that `[s, e)` overlaps, if any (data received twice).
    pub(crate) fn overlap(&self, s: u32, e: u32) -> Option<(u32, u32)> {
        self.ranges().iter().map(|&(a, b)| (seq::max(a, s), seq::min(b, e))).find(|&(a, b)| seq::lt(a, b))
    }

    /// The ranges as SACK blocks, most recent first.
    pub(crate) fn blocks(&self) -> [Option<(u32, u32)>; 4] {
        let mut blocks = [None; 4];
        for (slot, &range) in blocks.iter_mut().zip(self.ranges()) {
            *slot = Some(range);
        }
        blocks
    }
}

/// The sender's SACK scoreboard: SACKed ranges above SND.UNA, sorted, disjoint.
#[derive(Debug, Default)]
pub(crate) struct Scoreboard(RangeArray<SACK_MAX>);

impl Scoreboard {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.n == 0
    }

    /// Forgets every range and frees the memory.
    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }

    pub(crate) fn ranges(&self) -> &[(u32, u32)] {
        self.0.ranges()
    }

    /// Records `[s, e)` as SACKed.
    pub(crate) fn add(&mut self, s: u32, e: u32) {
        if !seq::lt(s, e) {
            return;
        }
        let (merged, rest, n) = merge::<SACK_MAX>(self.ranges(), s, e);
        // Insert in order; if there is no room, the highest range is forgotten.
        let mut all = [(0u32, 0u32); SACK_MAX + 1];
        let mut k = 0;
        let mut placed = false;
        for &range in &rest[..n] {
            if !placed && seq::lt(merged.0, range.0) {
                all[k] = merged;
                k += 1;
                placed = true;
            }
            all[k] = range;
            k += 1;
        }
        if !placed {
            all[k] = merged;
            k += 1;
        }
        let k = k.min(SACK_MAX);
        self.0.slots()[..k].copy_from_slice(&all[..k]);
        self.0.n = k as u8;
    }

    /// Forgets what is below `una` (now cumulatively acknowledged).
    pub(crate) fn trim(&mut self, una: u32) {
        let Some(r) = self.0.r.as_deref_mut() else { return };
        let mut k = 0;
        for i in 0..self.0.n as usize {
            let (a, b) = r[i];
            if seq::gt(b, una) {
                r[k] = (seq::max(a, una), b);
                k += 1;
            }
        }
        self.0.n = k as u8;
    }

    /// The end of the SACKed range holding `s`, if any.
    pub(crate) fn covering(&self, s: u32) -> Option<u32> {
        self.ranges().iter().find(|&&(a, b)| seq::le(a, s) && seq::lt(s, b)).map(|&(_, b)| b)
    }

    /// The start of the first SACKed range after `s`.
    pub(crate) fn next_start_after(&self, s: u32) -> Option<u32> {
        self.ranges().iter().find(|&&(a, _)| seq::gt(a, s)).map(|&(a, _)| a)
    }

    /// The highest SACKed sequence number plus one.
    pub(crate) fn highest(&self) -> Option<u32> {
        self.ranges().last().map(|&(_, b)| b)
    }

    /// SACKed bytes within `[s, e)`.
    pub(crate) fn sacked_in(&self, s: u32, e: u32) -> u32 {
        let mut total = 0;
        for &(a, b) in self.ranges() {
            let lo = seq::max(a, s);
            let hi = seq::min(b, e);
            if seq::lt(lo, hi) {
                total += hi.wrapping_sub(lo);
            }
        }
        total
    }

    /// The first sequence number at or after `s` that is not SACKed.
    pub(crate) fn first_unsacked(&self, mut s: u32) -> u32 {
        while let Some(end) = self.covering(s) {
            s = end;
        }
        s
    }

    /// RFC 6675 IsLost as a boundary: every un-SACKed sequence number below the returned one is
    /// lost (DupThresh = 3 discontiguous SACKed ranges above it, or more than 2 * SMSS SACKed
    /// bytes above it); `una` when nothing is. IsLost is monotonic, so one boundary says it all.
    pub(crate) fn lost_end(&self, una: u32, mss: u32) -> u32 {
        let mut bytes = 0u32;
        for (count, &(a, b)) in self.ranges().iter().rev().enumerate() {
            bytes += b.wrapping_sub(a);
            if count + 1 >= 3 || bytes > 2 * mss {
                return a;
            }
        }
        una
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ooo_ranges_merge_most_recent_first() {
        let mut ooo = OooRanges::default();
        assert!(ooo.0.r.is_none());
        assert!(ooo.add(100, 200));
        assert!(ooo.add(300, 400));
        assert_eq!(ooo.ranges(), &[(300, 400), (100, 200)]);
        assert!(ooo.add(200, 300)); // fills the gap between both
        assert_eq!(ooo.ranges(), &[(100, 400)]);
        for i in 1..OOO_MAX as u32 {
            assert!(ooo.add(1000 * i, 1000 * i + 100));
        }
        assert!(!ooo.add(1_000_000, 1_000_100)); // one range too many
        assert!(ooo.add(1100, 1200)); // extends one: fine
        assert_eq!(ooo.ranges()[0], (1000, 1200));
        assert_eq!(ooo.advance(50), 50);
        assert_eq!(ooo.advance(100), 400);
        assert_eq!(ooo.ranges().len(), OOO_MAX - 1);
        ooo.clear();
        assert!(ooo.0.r.is_none() && ooo.is_empty());
    }

    #[test]
    fn scoreboard_sorted_and_trimmed() {
        let mut sb = Scoreboard::default();
        sb.add(500, 600);
        sb.add(100, 200);
        sb.add(300, 400);
        assert_eq!(sb.ranges(), &[(100, 200), (300, 400), (500, 600)]);
        assert_eq!(sb.sacked_in(150, 550), 50 + 100 + 50);
        assert_eq!(sb.first_unsacked(100), 200);
        assert_eq!(sb.next_start_after(200), Some(300));
        // 3 ranges above 0: lost below 100; with mss 40, 100 bytes > 80 from the top one alone.
        assert_eq!(sb.lost_end(0, 1000), 100);
        assert_eq!(sb.lost_end(0, 40), 500);
        sb.trim(350);
        assert_eq!(sb.ranges(), &[(350, 400), (500, 600)]);
        // Full: the highest is forgotten.
        for i in 1..=SACK_MAX as u32 {
            sb.add(1000 * i, 1000 * i + 10);
        }
        assert_eq!(sb.ranges().len(), SACK_MAX);
        assert_eq!(sb.highest(), Some(1000 * (SACK_MAX as u32 - 2) + 10));
    }
}
