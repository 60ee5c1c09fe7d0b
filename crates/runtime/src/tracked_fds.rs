//! The tracked-fd table: per fd, one byte that says what the fd is to the runtime (0: the
//! kernel's, which the preloaded hooks pass straight on after this one load), and the thread's
//! flag that it is inside the runtime (its own calls go to the kernel). It depends on nothing
//! else of the runtime: every module that makes or forgets an fd writes here.

use std::sync::atomic::{AtomicPtr, AtomicU8, Ordering};

/// fds per chunk of the tracked-fd table.
const CHUNK_BITS: u32 = 16;
const CHUNK: usize = 1 << CHUNK_BITS;
type Chunk = [AtomicU8; CHUNK];

/// Per fd: 0 = not ours, 1 = an accelerated or pending TCP socket, 2 = an epoll set, 3 = an
/// accelerated or pending UDP socket (`TRACKED_DATAGRAM`). Every fd a process can have
/// (0..=i32::MAX, a server may raise `ulimit -n` to millions): the first chunk is static (the
/// kernel fast path is one atomic load); the others are made when an fd in them is first
/// tracked and kept for the life of the process (64 KiB each).
static TRACKED: Chunk = [const { AtomicU8::new(0) }; CHUNK];
static TRACKED_HIGH: [AtomicPtr<Chunk>; 1 << (31 - CHUNK_BITS)] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; 1 << (31 - CHUNK_BITS)];
/// The tracked-fd table's entry for `fd` (`None`: not tracked, never was).
#[inline]
fn tracked_slot(fd: i32) -> Option<&'static AtomicU8> {
    let fd = usize::try_from(fd).ok()?;
    if fd < CHUNK {
        return Some(&TRACKED[fd]);
    }
    let chunk = TRACKED_HIGH[fd >> CHUNK_BITS].load(Ordering::Acquire);
    // SAFETY: a chunk, once published, is never freed.
    (!chunk.is_null()).then(|| unsafe { &(*chunk)[fd & (CHUNK - 1)] })
}

/// What `fd` is in the tracked-fd table (0: not ours).
#[inline]
pub(crate) fn tracked_state(fd: i32) -> u8 {
    tracked_slot(fd).map_or(0, |s| s.load(Ordering::Relaxed))
}

/// The fds that `state` describes, in order: a walk of the table, without allocation.
pub(crate) fn with_state(state: u8) -> impl Iterator<Item = i32> {
    let high = TRACKED_HIGH.iter().enumerate().filter_map(|(k, chunk)| {
        let chunk = chunk.load(Ordering::Acquire);
        // SAFETY: a chunk, once published, is never freed.
        (!chunk.is_null()).then(|| (k, unsafe { &*chunk }))
    });
    std::iter::once((0, &TRACKED)).chain(high).flat_map(move |(k, chunk)| {
        chunk
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.load(Ordering::Relaxed) == state)
            .map(move |(i, _)| ((k << CHUNK_BITS) | i) as i32)
    })
}

/// Records what `fd` is, making its chunk of the table if it has none yet.
pub(crate) fn set_tracked_state(fd: i32, state: u8) {
    let Ok(index) = usize::try_from(fd) else { return };
    if let Some(slot) = tracked_slot(fd) {
        slot.store(state, Ordering::Relaxed);
        return;
    }
    if state == 0 {
        return;
    }
    let made = Box::into_raw(Box::new([const { AtomicU8::new(0) }; CHUNK]));
    let chunk = match TRACKED_HIGH[index >> CHUNK_BITS].compare_exchange(
        std::ptr::null_mut(),
        made,
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => made,
        Err(theirs) => {
            // SAFETY: `made` was never published.
            drop(unsafe { Box::from_raw(made) });
            theirs
        }
    };
    // SAFETY: `chunk` is non-null: ours just published, or the one another thread
    // published first; a published chunk is never freed, and the index is masked into it.
    unsafe { (*chunk)[index & (CHUNK - 1)].store(state, Ordering::Relaxed) };
}

thread_local! {
    /// Set while this thread is inside the runtime: calls it makes (DPDK's own sockets, epoll
    /// fds, files) go straight to the kernel.
    pub(crate) static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the runtime should look at `fd` at all: one atomic load on the kernel fast path
/// (below 65536; two above).
#[inline]
pub fn tracked(fd: i32) -> bool {
    tracked_state(fd) != 0 && !INSIDE.try_with(|i| i.get()).unwrap_or(true)
}

pub(crate) const TRACKED_EPOLL: u8 = 2;
pub(crate) const TRACKED_DATAGRAM: u8 = 3;

/// Whether tracked `fd` is a UDP socket (its reads and writes are datagrams): one atomic load.
#[inline]
pub fn datagram(fd: i32) -> bool {
    tracked_state(fd) == TRACKED_DATAGRAM
}

pub(crate) fn set_tracked(fd: i32, on: bool) {
    set_tracked_state(fd, on as u8);
}

pub(crate) fn set_tracked_datagram(fd: i32) {
    set_tracked_state(fd, TRACKED_DATAGRAM);
}

pub(crate) fn inside() -> bool {
    INSIDE.try_with(|i| i.get()).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fd_a_process_can_have_is_tracked() {
        for fd in [65_535, 65_536, 131_071, 1 << 20, i32::MAX] {
            assert_eq!(tracked_state(fd), 0);
            set_tracked_datagram(fd);
            assert!(tracked(fd) && datagram(fd), "fd {fd}");
            set_tracked(fd, false);
            assert!(!tracked(fd), "fd {fd}");
        }
        set_tracked(-1, true);
        assert!(!tracked(-1));
    }

    #[test]
    fn a_walk_by_state_finds_each_fd_in_every_chunk_in_order() {
        // Other tests of this binary track fds of their own meanwhile: only these are looked at.
        let mine = [70_001, 70_002, 3 << 20, i32::MAX - 1];
        for fd in mine {
            set_tracked(fd, true);
        }
        set_tracked_datagram(70_003);
        let found: Vec<i32> = with_state(1).filter(|fd| mine.contains(fd) || *fd == 70_003).collect();
        assert_eq!(found, mine, "the TCP ones, in order, not the datagram one");
        assert_eq!(with_state(TRACKED_DATAGRAM).filter(|&fd| fd == 70_003).count(), 1);
        for fd in mine.into_iter().chain([70_003]) {
            set_tracked(fd, false);
        }
        assert_eq!(with_state(1).filter(|fd| mine.contains(fd)).count(), 0);
    }
}
