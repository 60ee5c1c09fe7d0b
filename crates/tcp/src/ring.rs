//! A byte ring allocated on first use. An unallocated ring is an empty boxed slice (no heap).
//!
//! Freed ring memory goes to a per-thread spare list (at most [`SPARE_BYTES`]) and the next ring
//! of the same size takes it from there: a stack serving short connections (one request per
//! connection) then costs no malloc, free, zeroing or page faults per connection. Reused memory
//! holds an old connection's bytes; a ring only ever reads bytes it wrote (head, len and the
//! connection's out-of-order ranges say which), so they are never seen.

use std::cell::RefCell;

use crate::spare::{self, SpareList};

/// Bytes of freed ring memory kept per thread for reuse.
pub const SPARE_BYTES: usize = 32 << 20;

thread_local! {
    static SPARE: RefCell<SpareList<u8>> = const { RefCell::new(SpareList::new()) };
}

fn take_spare(cap: usize) -> Option<Box<[u8]>> {
    spare::take(&SPARE, cap)
}

fn give_spare(buf: Box<[u8]>) {
    spare::give(&SPARE, buf, SPARE_BYTES);
}

/// Empties this thread's spare list without freeing it ([`crate::forget_spare_buffers`]).
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
    buf: Box<[u8]>,
    head: u32,
    len: u32,
}

impl Ring {
    /// Allocates `cap` bytes if not allocated yet.
    pub(crate) fn ensure(&mut self, cap: usize) {
        if self.buf.is_empty() && cap > 0 {
            self.buf = take_spare(cap).unwrap_or_else(|| vec![0u8; cap].into_boxed_slice());
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
        !self.buf.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes allocated (0 when not).
    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// Moves an allocated ring to `cap` bytes if that is more: every byte of the old capacity
    /// keeps its offset from the head (out-of-order data beyond `len` included).
    pub(crate) fn grow(&mut self, cap: usize) {
        let old = self.buf.len();
        if old == 0 || cap <= old {
            return;
        }
        let mut buf = take_spare(cap).unwrap_or_else(|| vec![0u8; cap].into_boxed_slice());
        self.read_at(0, &mut buf[..old]);
        give_spare(std::mem::replace(&mut self.buf, buf));
        self.head = 0;
    }

    /// Writes `data` at `off` bytes after the head. The caller keeps `off + data.len()` within
    /// the capacity.
    pub(crate) fn write_at(&mut self, off: usize, data: &[u8]) {
        let cap = self.buf.len();
        debug_assert!(off + data.len() <= cap);
        let start = (self.head as usize + off) % cap;
        let first = data.len().min(cap - start);
        self.buf[start..start + first].copy_from_slice(&data[..first]);
        self.buf[..data.len() - first].copy_from_slice(&data[first..]);
    }

    /// Reads `out.len()` bytes from `off` bytes after the head.
    pub(crate) fn read_at(&self, off: usize, out: &mut [u8]) {
        let cap = self.buf.len();
        debug_assert!(off + out.len() <= cap);
        if out.is_empty() {
            return;
        }
        let start = (self.head as usize + off) % cap;
        let first = out.len().min(cap - start);
        out[..first].copy_from_slice(&self.buf[start..start + first]);
        let rest = out.len() - first;
        out[first..].copy_from_slice(&self.buf[..rest]);
    }

    /// Appends as much of `data` as fits; returns how much.
    pub(crate) fn push(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.buf.len() - self.len as usize);
        self.write_at(self.len as usize, &data[..n]);
        self.len += n as u32;
        n
    }

    /// Counts `n` more bytes (already written with `write_at`) as in use.
    pub(crate) fn extend(&mut self, n: usize) {
        debug_assert!(self.len as usize + n <= self.buf.len());
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
        self.head = ((self.head as usize + n) % self.buf.len()) as u32;
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
