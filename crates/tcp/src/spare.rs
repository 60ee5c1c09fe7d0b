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

/// Freed buffers of one element type, at most a byte budget of them.
pub(crate) struct SpareList<T: 'static> {
    bufs: Vec<Box<[T]>>,
    bytes: usize,
}

impl<T> SpareList<T> {
    pub(crate) const fn new() -> Self {
        SpareList { bufs: Vec::new(), bytes: 0 }
    }
}

/// A thread's list, declared with `thread_local!` by the owner of the buffers.
pub(crate) type Spare<T> = LocalKey<RefCell<SpareList<T>>>;

/// A freed buffer of exactly `len` elements, if the list has one.
pub(crate) fn take<T>(list: &'static Spare<T>, len: usize) -> Option<Box<[T]>> {
    list.try_with(|s| {
        let mut s = s.borrow_mut();
        let i = s.bufs.iter().rposition(|b| b.len() == len)?;
        s.bytes -= len * size_of::<T>();
        Some(s.bufs.swap_remove(i))
    })
    .ok()
    .flatten()
}

/// Keeps `buf` for reuse while the list holds at most `budget` bytes; frees it otherwise.
pub(crate) fn give<T>(list: &'static Spare<T>, buf: Box<[T]>, budget: usize) {
    if buf.is_empty() {
        return;
    }
    // During thread exit the list may be gone: then the memory is simply freed.
    let _ = list.try_with(|s| {
        let mut s = s.borrow_mut();
        let bytes = buf.len() * size_of::<T>();
        if s.bytes + bytes <= budget {
            s.bytes += bytes;
            s.bufs.push(buf);
        }
    });
}

/// Empties the thread's list without freeing what it held: in a process just forked, the
/// buffers its copy of the list names are the parent's, which its own copy hands out again
/// (the very same memory when it is shared, as a fork family's arena is).
pub(crate) fn forget<T>(list: &'static Spare<T>) {
    let _ = list.try_with(|s| std::mem::forget(s.replace(SpareList::new())));
}

/// Bytes held in a thread's list.
#[cfg(test)]
pub(crate) fn bytes<T>(list: &'static Spare<T>) -> usize {
    list.try_with(|s| s.borrow().bytes).unwrap_or(0)
}
