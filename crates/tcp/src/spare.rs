//! Per-thread lists of freed buffers, each list for one element type: the next buffer of the
//! same length takes its memory from there, so that a stack serving short connections (one
//! request each) costs no malloc, free, zeroing or page faults per connection for the rings
//! and transmit logs a connection allocates on first use (when it came in, redis-benchmark
//! -k 0 went from 0.76x to 1.26x the kernel's connection rate).
//!
//! This is the crate's only state outside a connection, and an allocation cache only: reused
//! memory holds an old connection's contents, and the owners only ever read what they wrote
//! since, so no connection behaves differently for what the lists hold, or whether they hold
//! anything.

use std::cell::RefCell;
use std::thread::LocalKey;

/// A buffer the lists keep: its size, in bytes, is what a later owner asks for.
pub(crate) trait Buffer: 'static {
    fn bytes(&self) -> usize;
}

impl<T: 'static> Buffer for Box<[T]> {
    fn bytes(&self) -> usize {
        self.len() * size_of::<T>()
    }
}

/// A ring's memory: its capacity, not the part written so far (`ring::Ring`).
impl Buffer for Vec<u8> {
    fn bytes(&self) -> usize {
        self.capacity()
    }
}

/// Freed buffers of one type, at most a byte budget of them.
pub(crate) struct SpareList<B: Buffer> {
    bufs: Vec<B>,
    bytes: usize,
    /// Keeps nothing: every buffer given is freed at once ([`forget`]).
    off: bool,
}

impl<B: Buffer> SpareList<B> {
    pub(crate) const fn new() -> Self {
        SpareList { bufs: Vec::new(), bytes: 0, off: false }
    }
}

/// A thread's list, declared with `thread_local!` by the owner of the buffers.
pub(crate) type Spare<B> = LocalKey<RefCell<SpareList<B>>>;

/// A freed buffer of exactly `bytes` bytes, if the list has one.
pub(crate) fn take<B: Buffer>(list: &'static Spare<B>, bytes: usize) -> Option<B> {
    list.try_with(|s| {
        let mut s = s.borrow_mut();
        let i = s.bufs.iter().rposition(|b| b.bytes() == bytes)?;
        s.bytes -= bytes;
        Some(s.bufs.swap_remove(i))
    })
    .ok()
    .flatten()
}

/// Keeps `buf` for reuse while the list holds at most `budget` bytes; frees it otherwise.
pub(crate) fn give<B: Buffer>(list: &'static Spare<B>, buf: B, budget: usize) {
    let bytes = buf.bytes();
    if bytes == 0 {
        return;
    }
    // During thread exit the list may be gone: then the memory is simply freed.
    let _ = list.try_with(|s| {
        let mut s = s.borrow_mut();
        if !s.off && s.bytes + bytes <= budget {
            s.bytes += bytes;
            s.bufs.push(buf);
        }
    });
}

/// Empties the thread's list without freeing what it held, and keeps nothing from now on: in
/// a process just forked, the buffers its copy of the list names are the parent's, which its
/// own copy hands out again (the very same memory when it is shared, as a fork family's arena
/// is). What the child frees afterwards goes straight back to where it came from: in a family,
/// the arena, whose free lists hand the block to the next connection whichever process makes
/// it (the opener's stack thread takes each new connection's receive ring), where a child's own
/// list would keep it from them until the child exits.
pub(crate) fn forget<B: Buffer>(list: &'static Spare<B>) {
    let _ = list.try_with(|s| {
        let mut s = s.borrow_mut();
        std::mem::forget(std::mem::take(&mut s.bufs));
        s.bytes = 0;
        s.off = true;
    });
}

/// Bytes held in a thread's list.
#[cfg(test)]
pub(crate) fn bytes<B: Buffer>(list: &'static Spare<B>) -> usize {
    list.try_with(|s| s.borrow().bytes).unwrap_or(0)
}
