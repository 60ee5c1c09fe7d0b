//! A byte ring allocated on first use. An unallocated ring is an empty boxed slice (no heap).
//!
//! Freed ring memory goes to a per-thread spare list (at most [`SPARE_BYTES`]) and the next ring
//! of the same size takes it from there: a stack serving short connections (one request per
//! connection) then costs no malloc, free, zeroing or page faults per connection. Reused memory
//! holds an old connection's bytes; a ring only ever reads bytes it wrote (head, len and the
//! connection's out-of-order ranges say which), so they are never seen.
//!
//! New memory is not zeroed: a ring's memory is a `Vec` whose length is how far into it bytes
//! were ever written, and a write beyond that point fills only the gap before it. Zeroing the
//! whole ring (128 KiB by default) cost a memset, and a page fault per page where the memory
//! was new, for each ring allocated; a connection that carries a few hundred bytes touches one
//! page of each. Where nothing is kept for reuse (a fork family's child: `spare::forget`), that
//! was every connection's cost.

use std::cell::RefCell;

use crate::spare::{self, SpareList};

/// Bytes of freed ring memory kept per thread for reuse.
pub const SPARE_BYTES: usize = 32 << 20;

thread_local! {
    static SPARE: RefCell<SpareList<Vec<u8>>> = const { RefCell::new(SpareList::new()) };
}

/// Ring memory of `cap` bytes: a spare one (written as far as its last owner wrote), or new
/// (nothing written yet, nothing touched).
fn new_buf(cap: usize) -> Vec<u8> {
    spare::take(&SPARE, cap).unwrap_or_else(|| Vec::with_capacity(cap))
}

fn give_spare(buf: Vec<u8>) {
    spare::give(&SPARE, buf, SPARE_BYTES);
}

/// Writes `data` at `at` in ring memory `buf`, whose capacity holds `at + data.len()`: in place
/// where the memory was written before, appended beyond, with zeros in any gap between (none
/// for an empty `data`). Inlined: it runs for every segment's payload in and out, and most of
/// what it costs out of line is its own entry and exit.
#[inline]
fn put(buf: &mut Vec<u8>, at: usize, data: &[u8]) {
    debug_assert!(at + data.len() <= buf.capacity());
    // Never beyond the capacity: the `Vec` would move to a larger allocation, and the ring's
    // offsets, taken modulo its capacity, would change under it.
    let data = &data[..data.len().min(buf.capacity().saturating_sub(at))];
    if data.is_empty() {
        return;
    }
    if at > buf.len() {
        buf.resize(at, 0);
    }
    let inside = data.len().min(buf.len() - at);
    buf[at..at + inside].copy_from_slice(&data[..inside]);
    buf.extend_from_slice(&data[inside..]);
}

/// Reads `out.len()` bytes at `at` of ring memory `buf`. Bytes never written read as zeros,
/// as the zeroed memory of before did; a ring never asks for them (its owner reads only what
/// it wrote).
#[inline]
fn get(buf: &[u8], at: usize, out: &mut [u8]) {
    let written = buf.get(at..).unwrap_or(&[]);
    let n = written.len().min(out.len());
    out[..n].copy_from_slice(&written[..n]);
    if n < out.len() {
        out[n..].fill(0);
    }
}

/// Empties this thread's spare list without freeing it, and keeps nothing from then on
/// ([`crate::forget_spare_buffers`]).
pub(crate) fn forget_spare() {
    spare::forget(&SPARE);
}

/// Ring memory held in this thread's spare list.
#[cfg(test)]
fn spare_bytes() -> usize {
    spare::bytes(&SPARE)
}

/// Bytes `[head, head + len)` modulo the capacity are in use. Writes may also land beyond `len`
/// (out-of-order data) and be taken in later with [`Ring::extend`].
#[derive(Debug, Default)]
pub(crate) struct Ring {
    /// The memory: its capacity is the ring's; its length, how far into it anything was
    /// written (its allocation is never outgrown: `put` writes within the capacity).
    buf: Vec<u8>,
    head: u32,
    len: u32,
}

impl Ring {
    /// Allocates `cap` bytes if not allocated yet.
    pub(crate) fn ensure(&mut self, cap: usize) {
        if self.buf.capacity() == 0 && cap > 0 {
            self.buf = new_buf(cap);
            self.head = 0;
        }
    }

    /// Frees the memory if the ring holds nothing.
    pub(crate) fn release(&mut self) {
        if self.len == 0 {
            give_spare(std::mem::take(&mut self.buf));
            self.head = 0;
        }
    }

    /// Drops the contents and the memory.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.release();
    }

    /// Where the bytes in use start in the memory.
    #[cfg(test)]
    pub(crate) fn head(&self) -> usize {
        self.head as usize
    }

    pub(crate) fn is_allocated(&self) -> bool {
        self.buf.capacity() > 0
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes allocated (0 when not).
    pub(crate) fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Moves an allocated ring to `cap` bytes if that is more: every byte of the old capacity
    /// keeps its offset from the head (out-of-order data beyond `len` included).
    pub(crate) fn grow(&mut self, cap: usize) {
        let old = self.buf.capacity();
        if old == 0 || cap <= old {
            return;
        }
        let mut buf = new_buf(cap);
        buf.clear();
        // Offset `o` from the head was at `(head + o) % old`: what was written from the head to
        // the end of the old memory, then what was written before the head.
        let head = (self.head as usize).min(self.buf.len());
        put(&mut buf, 0, &self.buf[head..]);
        put(&mut buf, old - self.head as usize, &self.buf[..head]);
        give_spare(std::mem::replace(&mut self.buf, buf));
        self.head = 0;
    }

    /// Writes `data` at `off` bytes after the head. The caller keeps `off + data.len()` within
    /// the capacity.
    pub(crate) fn write_at(&mut self, off: usize, data: &[u8]) {
        let cap = self.buf.capacity();
        debug_assert!(off + data.len() <= cap);
        let start = (self.head as usize + off) % cap;
        let first = data.len().min(cap - start);
        put(&mut self.buf, start, &data[..first]);
        if first < data.len() {
            put(&mut self.buf, 0, &data[first..]);
        }
    }

    /// Reads `out.len()` bytes from `off` bytes after the head.
    pub(crate) fn read_at(&self, off: usize, out: &mut [u8]) {
        let cap = self.buf.capacity();
        debug_assert!(off + out.len() <= cap);
        if out.is_empty() {
            return;
        }
        let start = (self.head as usize + off) % cap;
        let first = out.len().min(cap - start);
        let (tail, wrapped) = out.split_at_mut(first);
        get(&self.buf, start, tail);
        if !wrapped.is_empty() {
            get(&self.buf, 0, wrapped);
        }
    }

    /// Appends as much of `data` as fits; returns how much.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.buf.capacity() - self.len as usize);
        self.write_at(self.len as usize, &data[..n]);
        self.len += n as u32;
        n
    }

    /// Counts `n` more bytes (already written with `write_at`) as in use.
    pub(crate) fn extend(&mut self, n: usize) {
        debug_assert!(self.len as usize + n <= self.buf.capacity());
        self.len += n as u32;
    }

    /// Moves an empty ring's head back to the start of its memory, so that the next bytes land
    /// in the cache lines the last ones used rather than in the next ones along: a connection
    /// that exchanges small requests and answers then touches the first lines of its buffers
    /// over and over instead of walking through all of them (128 KiB each by default; 16
    /// connections' rings walked 4 MiB between two uses of a line, and every request missed
    /// the cache for its bytes). Only for a ring that holds nothing beyond `len` either: the
    /// caller knows (no out-of-order data held).
    pub(crate) fn rewind_if_empty(&mut self) {
        if self.len == 0 {
            self.head = 0;
        }
    }

    /// Removes `n` bytes at the head.
    pub(crate) fn pop(&mut self, n: usize) {
        debug_assert!(n <= self.len as usize);
        if n == 0 {
            return;
        }
        self.head = ((self.head as usize + n) % self.buf.capacity()) as u32;
        self.len -= n as u32;
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        give_spare(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emptied_ring_rewinds_and_a_holding_one_does_not() {
        let mut r = Ring::default();
        r.ensure(16);
        r.push(b"abcdef");
        r.pop(4);
        r.rewind_if_empty();
        assert_eq!(r.head, 4, "bytes still held: the head stays");
        r.pop(2);
        r.rewind_if_empty();
        assert_eq!(r.head, 0);
        r.push(b"xy");
        let mut out = [0u8; 2];
        r.read_at(0, &mut out);
        assert_eq!(&out, b"xy");
        assert_eq!(&r.buf[..2], b"xy", "the next bytes land at the start of the memory");
    }

    #[test]
    fn ring_wraps() {
        let mut ring = Ring::default();
        assert!(!ring.is_allocated());
        ring.ensure(8);
        assert_eq!(ring.push(b"abcdef"), 6);
        ring.pop(4);
        assert_eq!(ring.push(b"ghijklmn"), 6);
        assert_eq!(ring.len(), 8);
        let mut out = [0u8; 8];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"efghijkl");
        ring.pop(8);
        ring.write_at(3, b"xyz");
        ring.write_at(0, b"uvw");
        ring.extend(6);
        let mut out = [0u8; 6];
        ring.read_at(0, &mut out);
        assert_eq!(&out, b"uvwxyz");
        ring.pop(6);
        ring.release();
        assert!(!ring.is_allocated());
    }

    #[test]
    fn growing_keeps_every_offset() {
        let mut ring = Ring::default();
        ring.ensure(8);
        ring.push(b"abcdef");
        ring.pop(5);
        ring.push(b"ghij");
        ring.write_at(6, b"xy"); // beyond len, wrapped: out-of-order data
        ring.grow(16);
        assert_eq!((ring.capacity(), ring.len()), (16, 5));
        let mut out = [0u8; 8];
        ring.read_at(0, &mut out);
        assert_eq!(&out[..5], b"fghij");
        assert_eq!(&out[6..], b"xy");
        assert_eq!(ring.push(b"0123456789abc"), 11);
    }

    #[test]
    fn a_new_ring_writes_only_what_it_carries() {
        let mut r = Ring::default();
        r.ensure(1 << 17);
        assert_eq!((r.capacity(), r.buf.len()), (1 << 17, 0), "nothing zeroed, nothing touched");
        r.push(b"GET / HTTP/1.1\r\n");
        assert_eq!(r.buf.len(), 16);
        // Out-of-order data further on: only the gap before it is filled.
        r.write_at(100, b"later");
        assert_eq!(r.buf.len(), 105);
        let mut out = [9u8; 105];
        r.read_at(0, &mut out);
        assert_eq!(&out[..16], b"GET / HTTP/1.1\r\n");
        assert!(out[16..100].iter().all(|&b| b == 0), "the gap reads as the zeroed memory did");
        assert_eq!(&out[100..], b"later");
    }

    #[test]
    fn growing_a_wrapped_ring_keeps_what_was_written_and_no_more() {
        let mut r = Ring::default();
        r.ensure(8);
        r.push(b"abcdefgh");
        r.pop(6);
        r.push(b"ij"); // wraps: "gh" at the end of the memory, "ij" at its start
        r.grow(64);
        assert_eq!((r.capacity(), r.len(), r.buf.len()), (64, 4, 8));
        let mut out = [0u8; 4];
        r.read_at(0, &mut out);
        assert_eq!(&out, b"ghij");
        // A size no spare memory has (the one above went to this thread's spare list).
        let mut fresh = Ring::default();
        fresh.ensure(24);
        fresh.push(b"ab");
        fresh.grow(32);
        assert_eq!(fresh.buf.len(), 2, "the unwritten rest of the old memory is not copied");
    }

    #[test]
    fn freed_memory_is_reused_by_the_next_ring_of_its_size() {
        let spare = spare_bytes();
        let mut a = Ring::default();
        a.ensure(4096);
        let addr = a.buf.as_ptr();
        a.push(b"old bytes");
        a.pop(9);
        a.release();
        assert_eq!(spare_bytes(), spare + 4096);
        let mut other_size = Ring::default();
        other_size.ensure(2048);
        assert_eq!(spare_bytes(), spare + 4096, "a ring of another size does not take it");
        let mut b = Ring::default();
        b.ensure(4096);
        assert_eq!(b.buf.as_ptr(), addr);
        assert_eq!(spare_bytes(), spare);
        drop(b);
        drop(other_size);
        assert_eq!(spare_bytes(), spare + 4096 + 2048, "dropped rings give their memory back");
    }

    #[test]
    fn after_a_fork_the_list_keeps_nothing() {
        let mut kept = Ring::default();
        kept.ensure(4096);
        kept.release();
        assert_eq!(spare_bytes(), 4096);
        let mut a = Ring::default();
        a.ensure(2048);
        forget_spare();
        assert_eq!(spare_bytes(), 0, "the parent's memory is forgotten");
        a.release();
        assert_eq!(spare_bytes(), 0, "and what the child frees goes back to the allocator");
        a.ensure(2048);
        assert!(a.is_allocated());
    }

    #[test]
    fn the_spare_list_is_bounded() {
        let rings: Vec<Ring> = (0..(SPARE_BYTES / (1 << 20)) + 4)
            .map(|_| {
                let mut r = Ring::default();
                r.ensure(1 << 20);
                r
            })
            .collect();
        drop(rings);
        assert!(spare_bytes() <= SPARE_BYTES);
    }
}
