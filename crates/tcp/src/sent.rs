//! The sender's transmit log: for the sequence space in flight, when each range was last sent
//! and what loss recovery has concluded about it (deemed lost, sent again). RACK (RFC 8985)
//! reads the times; SACK-based recovery (RFC 6675's SetPipe and NextSeg) reads the marks. What
//! the peer SACKed is not kept here but in the [`Scoreboard`]; the two are read side by side.
//!
//! Ranges, not segments: new data sent at one instant (one burst of `poll_transmit`) shares an
//! entry, and an entry is split only where a retransmission or a loss mark covers part of it.
//! The entries live in an array of [`LOG_CAP`] allocated on first use (from the per-thread
//! spare list) and given back with the send buffer: nothing is allocated per packet. When the
//! array is full, two neighbours are merged into one that takes the later time (a loss in it
//! is found later, never too early).

use std::cell::RefCell;

use crate::ranges::Scoreboard;
use crate::seq;
use crate::spare::{self, SpareList};
use crate::time::Instant;

/// Entries a log holds. Bursts share an entry, so this is the number of distinct send times
/// in flight, plus the splits loss recovery makes: far more than a 128 KiB send buffer needs.
pub(crate) const LOG_CAP: usize = 256;

/// Freed logs kept per thread for reuse (4 KiB each).
const SPARE_BYTES: usize = 4 << 20;

thread_local! {
    static SPARE: RefCell<SpareList<Box<[Sent]>>> = const { RefCell::new(SpareList::new()) };
}

/// Empties this thread's spare list without freeing it, and keeps nothing from then on
/// ([`crate::forget_spare_buffers`]).
pub(crate) fn forget_spare() {
    spare::forget(&SPARE);
}

/// Deemed lost (by RACK or RFC 6675's IsLost) and not known to have arrived since.
pub(crate) const LOST: u8 = 1;
/// Sent again since it was first sent, or since it was deemed lost.
pub(crate) const RETRANS: u8 = 2;

/// One range of the log: it starts where the previous one ends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Sent {
    /// The end of the range (exclusive).
    pub(crate) end: u32,
    /// [`LOST`] and [`RETRANS`].
    pub(crate) flags: u8,
    /// When it was last sent.
    pub(crate) xmit: Instant,
}

/// The ranges `[start, snd_max)`, in sequence order.
#[derive(Debug, Default)]
pub(crate) struct SentLog {
    /// Allocated with the first data sent.
    r: Option<Box<[Sent; LOG_CAP]>>,
    n: u16,
    /// Where the first entry starts: SND.UNA.
    start: u32,
}

impl SentLog {
    /// Forgets every range and gives the memory back.
    pub(crate) fn clear(&mut self) {
        self.n = 0;
        if let Some(r) = self.r.take() {
            spare::give(&SPARE, r, SPARE_BYTES);
        }
    }

    pub(crate) fn entries(&self) -> &[Sent] {
        &self.buf()[..usize::from(self.n)]
    }

    fn buf(&self) -> &[Sent] {
        self.r.as_deref().map_or(&[], |r| r.as_slice())
    }

    fn buf_mut(&mut self) -> &mut [Sent] {
        self.r.as_deref_mut().map_or(&mut [], |r| r.as_mut_slice())
    }

    /// Where entry `i` starts.
    pub(crate) fn start_of(&self, i: usize) -> u32 {
        if i == 0 {
            self.start
        } else {
            self.buf()[i - 1].end
        }
    }

    /// New data `[seq, end)` went out at `now`; `seq` is where the log ends.
    pub(crate) fn sent_new(&mut self, seq: u32, end: u32, now: Instant) {
        if self.r.is_none() {
            let r = spare::take(&SPARE, LOG_CAP * size_of::<Sent>())
                .unwrap_or_else(|| vec![Sent::default(); LOG_CAP].into_boxed_slice());
            self.r = r.try_into().ok();
        }
        let n = usize::from(self.n);
        if self.entries().last().map_or(true, |last| last.end != seq) {
            debug_assert!(n == 0, "new data at {seq} does not follow the log: {:?}", self.entries());
            self.n = 0;
            self.start = seq;
        }
        let n = usize::from(self.n);
        if let Some(last) = self.buf_mut()[..n].last_mut() {
            if last.flags == 0 && last.xmit == now {
                last.end = end;
                return;
            }
        }
        if usize::from(self.n) == LOG_CAP {
            self.make_room();
        }
        let n = usize::from(self.n);
        self.buf_mut()[n] = Sent { end, flags: 0, xmit: now };
        self.n += 1;
    }

    /// `[s, e)` was sent again at `now`.
    pub(crate) fn retransmitted(&mut self, s: u32, e: u32, now: Instant) {
        for sent in self.cover(s, e) {
            sent.flags |= RETRANS;
            sent.xmit = now;
        }
    }

    /// Marks `[s, e)` lost. With `forget_retransmission` (RACK) a retransmission in it is lost
    /// too and will be sent again; without (RFC 6675, which does not detect lost
    /// retransmissions) it stays in flight.
    pub(crate) fn mark_lost(&mut self, s: u32, e: u32, forget_retransmission: bool) {
        for sent in self.cover(s, e) {
            if forget_retransmission {
                sent.flags = LOST;
            } else {
                sent.flags |= LOST;
            }
        }
    }

    /// Marks entry `i` lost, its retransmission (if any) with it.
    pub(crate) fn mark_entry_lost(&mut self, i: usize) {
        self.buf_mut()[i].flags = LOST;
    }

    /// After a retransmission timeout everything is sent again from SND.UNA: no marks.
    pub(crate) fn clear_marks(&mut self) {
        let n = usize::from(self.n);
        for sent in &mut self.buf_mut()[..n] {
            sent.flags = 0;
        }
    }

    /// Whether anything the peer has not SACKed is marked lost.
    pub(crate) fn has_lost(&self, sacked: &Scoreboard) -> bool {
        self.first_unsacked(sacked, |sent| sent.flags & LOST != 0, None).is_some()
    }

    /// Forgets what is below `una` (cumulatively acknowledged).
    pub(crate) fn acked(&mut self, una: u32) {
        let gone = self.entries().iter().take_while(|s| seq::le(s.end, una)).count();
        let n = usize::from(self.n);
        self.buf_mut().copy_within(gone..n, 0);
        self.n -= gone as u16;
        self.start = una;
    }

    /// When the data at SND.UNA was sent, if it was sent once only (an RTT sample that Karn's
    /// rule allows when an ACK covers it).
    pub(crate) fn first_sent_once(&self) -> Option<Instant> {
        self.entries().first().filter(|s| s.flags & RETRANS == 0).map(|s| s.xmit)
    }

    /// The entries that overlap `[s, e)`, each with the end of its part in it. The entries
    /// follow each other in sequence order, so the walk starts at the first that ends above `s`
    /// and stops at the first that starts at `e` or later.
    pub(crate) fn overlapping(&self, s: u32, e: u32) -> impl Iterator<Item = (u32, Sent)> + '_ {
        self.entries()
            .iter()
            .enumerate()
            .skip_while(move |&(_, sent)| seq::le(sent.end, s))
            .take_while(move |&(i, _)| seq::lt(self.start_of(i), e))
            .map(move |(_, sent)| (seq::min(sent.end, e), *sent))
    }

    /// When the entry that holds `x` strictly inside it was sent.
    pub(crate) fn xmit_around(&self, x: u32) -> Option<Instant> {
        self.inside(x).map(|i| self.buf()[i].xmit)
    }

    /// The entry that holds `x`, not at its start.
    fn inside(&self, x: u32) -> Option<usize> {
        (0..usize::from(self.n)).find(|&i| seq::lt(self.start_of(i), x) && seq::lt(x, self.buf()[i].end))
    }

    /// Makes `x` the boundary of two entries, if it is inside one.
    pub(crate) fn split_at(&mut self, x: u32) {
        let Some(i) = self.inside(x) else {
            return;
        };
        if usize::from(self.n) == LOG_CAP {
            self.make_room();
            // Merging may have moved or swallowed the entry: find it again.
            return self.split_at(x);
        }
        let n = usize::from(self.n);
        let r = self.buf_mut();
        r.copy_within(i..n, i + 1);
        r[i].end = x;
        self.n += 1;
    }

    /// The entries inside `[s, e)` (split out of their neighbours where the log has room).
    fn cover(&mut self, s: u32, e: u32) -> &mut [Sent] {
        self.split_at(s);
        self.split_at(e);
        let n = usize::from(self.n);
        let entries = &self.buf()[..n];
        let first = entries.iter().position(|x| seq::gt(x.end, s)).unwrap_or(entries.len());
        let last = entries.iter().position(|x| seq::ge(x.end, e)).map_or(entries.len(), |j| j + 1);
        let first = if seq::lt(s, e) { first.min(last) } else { last };
        &mut self.buf_mut()[first..last]
    }

    /// Frees an entry: merges the first two neighbours with the same marks, or else the last
    /// two, keeping only the marks they share. The merged entry takes the later time.
    fn make_room(&mut self) {
        let n = usize::from(self.n);
        let r = self.buf_mut();
        let i = (0..n - 1).find(|&i| r[i].flags == r[i + 1].flags).unwrap_or(n - 2);
        let (a, b) = (r[i], r[i + 1]);
        r[i] = Sent { end: b.end, flags: a.flags & b.flags, xmit: a.xmit.max(b.xmit) };
        r.copy_within(i + 2..n, i + 1);
        self.n -= 1;
    }

    /// RFC 6675 SetPipe: the bytes in flight. An un-SACKed byte counts once unless it is deemed
    /// lost, and once more if it was sent again.
    pub(crate) fn pipe(&self, sacked: &Scoreboard) -> u32 {
        if self.n == 0 {
            // Nothing outstanding (every ACK of a whole answer), and no log allocated to walk.
            return 0;
        }
        let mut pipe = 0u32;
        for (i, sent) in self.entries().iter().enumerate() {
            let weight = u32::from(sent.flags & LOST == 0) + u32::from(sent.flags & RETRANS != 0);
            if weight > 0 {
                let start = self.start_of(i);
                let unsacked = sent.end.wrapping_sub(start) - sacked.sacked_in(start, sent.end);
                pipe = pipe.saturating_add(weight * unsacked);
            }
        }
        pipe
    }

    /// RFC 6675 NextSeg rule 1: the first un-SACKed range deemed lost and not sent again, up to
    /// the next SACKed byte.
    pub(crate) fn next_lost(&self, sacked: &Scoreboard) -> Option<(u32, u32)> {
        self.first_unsacked(sacked, |sent| sent.flags == LOST, None)
    }

    /// RFC 6675 NextSeg rule 3: the first un-SACKed range below `high` neither deemed lost nor
    /// sent again.
    pub(crate) fn next_unmarked_below(&self, sacked: &Scoreboard, high: u32) -> Option<(u32, u32)> {
        self.first_unsacked(sacked, |sent| sent.flags == 0, Some(high))
    }

    /// The first un-SACKed range in entries that are `wanted`, below `below`: from its first
    /// byte to the next SACKed byte, across neighbouring entries that are wanted too (so that
    /// where two bursts meet does not cut a retransmission short).
    fn first_unsacked(
        &self,
        sacked: &Scoreboard,
        wanted: impl Fn(&Sent) -> bool,
        below: Option<u32>,
    ) -> Option<(u32, u32)> {
        let entries = self.entries();
        let limit = |end: u32| below.map_or(end, |high| seq::min(end, high));
        for (i, sent) in entries.iter().enumerate() {
            let end = limit(sent.end);
            if !seq::lt(self.start_of(i), end) {
                return None;
            }
            let s = sacked.first_unsacked(self.start_of(i));
            if wanted(sent) && seq::lt(s, end) {
                let stop = limit(sacked.next_start_after(s).unwrap_or(self.end()));
                let mut e = seq::min(sent.end, stop);
                for next in entries[i + 1..].iter().take_while(|next| wanted(next)) {
                    if !seq::lt(e, stop) {
                        break;
                    }
                    e = seq::min(next.end, stop);
                }
                return Some((s, e));
            }
        }
        None
    }

    /// Where the log ends: SND.MAX.
    fn end(&self) -> u32 {
        self.entries().last().map_or(self.start, |last| last.end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ranges(log: &SentLog) -> Vec<(u32, u32, u8, Instant)> {
        log.entries().iter().enumerate().map(|(i, s)| (log.start_of(i), s.end, s.flags, s.xmit)).collect()
    }

    #[test]
    fn bursts_share_an_entry_and_marks_split_it() {
        let mut log = SentLog::default();
        log.sent_new(100, 200, 1);
        log.sent_new(200, 300, 1); // same instant: same entry
        log.sent_new(300, 400, 2);
        assert_eq!(ranges(&log), [(100, 300, 0, 1), (300, 400, 0, 2)]);
        log.retransmitted(150, 250, 5);
        assert_eq!(ranges(&log), [(100, 150, 0, 1), (150, 250, RETRANS, 5), (250, 300, 0, 1), (300, 400, 0, 2)]);
        log.mark_lost(100, 300, false);
        assert_eq!(log.entries().iter().map(|s| s.flags).collect::<Vec<_>>(), [LOST, LOST | RETRANS, LOST, 0]);
        log.mark_lost(150, 250, true); // RACK: the retransmission is lost too
        assert_eq!(log.entries()[1].flags, LOST);
        log.acked(260);
        assert_eq!(ranges(&log), [(260, 300, LOST, 1), (300, 400, 0, 2)]);
        assert_eq!(log.first_sent_once(), Some(1));
        log.clear_marks();
        assert!(!log.has_lost(&Scoreboard::default()));
        log.clear();
        assert!(log.entries().is_empty() && log.r.is_none());
    }

    #[test]
    fn pipe_and_next_segment_read_the_marks_and_the_scoreboard() {
        let mut log = SentLog::default();
        for k in 0..10u32 {
            log.sent_new(k * 100, (k + 1) * 100, Instant::from(k));
        }
        let mut sacked = Scoreboard::default();
        sacked.add(300, 500);
        sacked.add(700, 800);
        assert_eq!(log.pipe(&sacked), 700);
        log.mark_lost(0, 300, false);
        assert_eq!(log.pipe(&sacked), 400);
        // Up to the next SACKed byte, whatever the bursts were.
        assert_eq!(log.next_lost(&sacked), Some((0, 300)));
        log.retransmitted(0, 100, 20);
        assert_eq!(log.pipe(&sacked), 500);
        assert_eq!(log.next_lost(&sacked), Some((100, 300)));
        // Rule 3: below the highest SACKed byte, neither lost nor sent again.
        assert_eq!(log.next_unmarked_below(&sacked, 800), Some((500, 700)));
        assert_eq!(log.next_unmarked_below(&sacked, 650), Some((500, 650)));
        assert_eq!(log.next_unmarked_below(&sacked, 450), None);
    }

    #[test]
    fn a_full_log_merges_neighbours_with_the_later_time() {
        let mut log = SentLog::default();
        for k in 0..LOG_CAP as u32 + 10 {
            log.sent_new(k * 10, k * 10 + 10, Instant::from(k));
        }
        assert_eq!(log.entries().len(), LOG_CAP);
        assert_eq!(log.entries().last().unwrap().end, (LOG_CAP as u32 + 10) * 10);
        // Every byte is still covered, and a merged entry has the time of its newest part.
        let mut at = 0;
        for (i, s) in log.entries().iter().enumerate() {
            assert_eq!(log.start_of(i), at);
            assert_eq!(s.xmit, Instant::from(s.end / 10 - 1));
            at = s.end;
        }
        log.split_at(5);
        assert_eq!(log.entries().len(), LOG_CAP);
        assert_eq!(log.start_of(1), 5);
    }
}
