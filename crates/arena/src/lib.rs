//! The shared arena: issue 24's stage 2 (docs/design-notes.md, "Fork after accept: a shared
//! stack"). A region of memory mapped MAP_SHARED, so that fork() gives every child the same
//! pages at the same address, and the global allocator ([`ScopedAlloc`]) that serves a thread's
//! allocations from it while the thread is inside a shard ([`Arena::enter`]). The shard's
//! heap objects (its tables, socket slab, TCP control blocks and rings, timers, queues) are
//! allocated there without any collection of the stack knowing: a pointer into the arena is
//! valid in every process of a family, so a forked child could use the same shard once the
//! processes share its lock (stage 3).
//!
//! Where a block lives is decided when it is allocated: inside a scope, in the arena; outside,
//! on the process heap (glibc's malloc). A free or a realloc finds the block's home by its
//! address, whoever calls it and whatever scope it is in: a `Vec` the shard made grows in the
//! arena even when the runtime pushes to it, and the runtime's own vectors stay private even
//! when the shard fills them. What must stay private to a process (the fd table, the
//! placeholders, the shim's tables) is never allocated inside a scope.
//!
//! Linking this crate changes nothing by itself: a program opts in twice. [`ScopedAlloc`]
//! serves scopes only where it is declared the global allocator (`#[global_allocator]`: the
//! preloaded library does, and the tests that check where things are placed; every other
//! program and test, the fuzz targets included, keeps the system allocator), and the family
//! arena exists only once [`enable_family`] made it (the runtime calls it when the config says
//! `[runtime] share = "family"`); until then [`family`] is `None`, nothing is mapped and a
//! shard opens no scope. Outside a scope [`ScopedAlloc`] forwards to `System`, at the cost of a
//! thread-local read per allocation and an address comparison per free.
//!
//! The allocator: blocks of power-of-two sizes, from 16 bytes, each size with a free list;
//! blocks up to 64 KiB are cut from 64 KiB chunks, larger ones taken whole from the region's
//! unused end. Nothing is returned to the kernel: a freed block waits for the next allocation of
//! its size. One process-shared futex lock guards the region's lists (every process of the
//! family allocates from the same lists). A region that is full serves nothing more: the
//! allocation goes to the process heap and is counted ([`Arena::overflows`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicUsize, Ordering};

/// What the family arena reserves of the address space (MAP_NORESERVE: pages are taken as they
/// are first touched).
pub const FAMILY_RESERVE: usize = 64 << 30;
const PAGE: usize = 4096;
const MIN_BLOCK: usize = 16;
/// Block sizes 16 << k for k below this.
const CLASSES: usize = 32;
/// Blocks smaller than this are cut from chunks of this size.
const CHUNK: usize = 64 << 10;
/// How many arenas one process may know (the family's, and the tests' own).
const MAX_ARENAS: usize = 8;

/// The region's bookkeeping, at its start. Every field but `lock` is read and written with
/// `lock` held.
#[repr(C)]
struct Header {
    /// 0: free; 1: held; 2: held with waiters (asleep on the futex).
    lock: AtomicU32,
    size: usize,
    /// Offset of the first byte never handed out.
    bump: usize,
    /// Per size: the first free block (its first word points to the next), 0: none.
    free: [usize; CLASSES],
    /// Per size below [`CHUNK`]: the next block of the current chunk, and the chunk's end.
    cursor: [usize; CLASSES],
    chunk_end: [usize; CLASSES],
    /// Allocations the region had no room for (served by the process heap).
    overflows: u64,
    /// A thread is inside a scope of the region (a shard call, or an update of the family's
    /// tables): what it updates may be half done if its process dies now.
    in_scope: AtomicBool,
}

impl Header {
    /// `n` bytes of the region's unused end, page-aligned: their offset.
    fn take(&mut self, n: usize) -> Option<usize> {
        let start = self.bump.next_multiple_of(PAGE);
        (start + n <= self.size).then(|| {
            self.bump = start + n;
            start
        })
    }
}

/// A shared region and its allocator. A handle: copies name the same region.
#[derive(Clone, Copy, Debug)]
pub struct Arena {
    header: *mut Header,
}

// The region is made for threads and processes to share; its lists are under its lock.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

/// The arenas this process knows, for frees to find a block's home by its address.
static ARENAS: [AtomicPtr<Header>; MAX_ARENAS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_ARENAS];
static ARENA_COUNT: AtomicUsize = AtomicUsize::new(0);
/// The process's family arena ([`family`]), made by [`enable_family`].
static FAMILY: AtomicPtr<Header> = AtomicPtr::new(std::ptr::null_mut());

impl Arena {
    /// A new region of `bytes` (rounded up to pages) mapped shared and anonymous, reserving no
    /// memory up front. `None`: mmap failed, or this process already knows its most arenas.
    pub fn new(bytes: usize) -> Option<Arena> {
        let size = bytes.checked_next_multiple_of(PAGE)?;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let flags = libc::MAP_SHARED | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE;
        let map = unsafe { libc::mmap(std::ptr::null_mut(), size, prot, flags, -1, 0) };
        if map == libc::MAP_FAILED {
            return None;
        }
        let slot = ARENA_COUNT.fetch_add(1, Ordering::AcqRel);
        if slot >= MAX_ARENAS {
            ARENA_COUNT.fetch_sub(1, Ordering::AcqRel);
            unsafe { libc::munmap(map, size) };
            return None;
        }
        let header = map.cast::<Header>();
        // A fresh anonymous mapping is zeroed: lock free, lists empty.
        unsafe {
            (*header).size = size;
            (*header).bump = std::mem::size_of::<Header>().next_multiple_of(PAGE);
        }
        ARENAS[slot].store(header, Ordering::Release);
        Some(Arena { header })
    }

    /// Until the guard is dropped, what this thread allocates comes from this arena. Scopes
    /// nest: the guard puts back the scope it found. Inlined: every shard call opens one.
    /// The outermost scope marks the region as being updated (`Arena::take_in_scope`).
    #[inline]
    pub fn enter(self) -> InArena {
        let outer = SCOPE.with(|s| s.arena.replace(self.header));
        if outer.is_null() {
            unsafe { (*self.header).in_scope.store(true, Ordering::Relaxed) };
            // The updates the scope makes come after the mark, in the order another process
            // finds them in memory if this one is killed.
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        }
        InArena { outer, arena: self.header }
    }

    /// Whether a thread was inside a scope of the region (and clears the mark): after a
    /// process died holding the lock that every scope of the family arena is opened under, it
    /// tells whether the dead was in the middle of an update of the shared state.
    pub fn take_in_scope(self) -> bool {
        unsafe { (*self.header).in_scope.swap(false, Ordering::AcqRel) }
    }

    /// Whether `p` points into this region.
    pub fn contains(self, p: *const u8) -> bool {
        let start = self.header as usize;
        (start..start + unsafe { (*self.header).size }).contains(&(p as usize))
    }

    /// Allocations this region had no room for, served by the process heap instead.
    pub fn overflows(self) -> u64 {
        self.lock();
        let n = unsafe { (*self.header).overflows };
        self.unlock();
        n
    }

    /// The process that held this arena's lock died (the family lock's EOWNERDEAD: every
    /// allocation of the family arena is made under the family lock, so its dead holder is the
    /// only one that can hold this one). The lock is freed, and the chunks being cut are
    /// given up: a kill between a chunk's two cursor words leaves them apart, and the next
    /// blocks would be cut past the chunk's end. The rest is consistent at every point a kill
    /// can land (a free list's head is one store; a block being pushed or popped is at worst
    /// lost), so at most a chunk per size class, the dead process's blocks and one block are
    /// lost. Returns whether the lock was held.
    pub fn recover_from_dead_holder(self) -> bool {
        let word = unsafe { &(*self.header).lock };
        if word.load(Ordering::Acquire) == 0 {
            return false;
        }
        let h = unsafe { &mut *self.header };
        h.cursor = h.chunk_end;
        word.store(0, Ordering::Release);
        true
    }

    fn lock(self) {
        let word = unsafe { &(*self.header).lock };
        if word.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            return;
        }
        // Not FUTEX_PRIVATE_FLAG: the lock is shared with the other processes of the family.
        while word.swap(2, Ordering::Acquire) != 0 {
            unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, 2, std::ptr::null::<u8>()) };
        }
    }

    fn unlock(self) {
        let word = unsafe { &(*self.header).lock };
        if word.swap(0, Ordering::Release) == 2 {
            unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
        }
    }

    /// A block for `layout`, or null (too large, aligned beyond a page, or the region is full:
    /// the caller takes it from the process heap).
    fn alloc(self, layout: Layout) -> *mut u8 {
        let Some((class, block)) = size_class(layout) else { return std::ptr::null_mut() };
        self.lock();
        let h = unsafe { &mut *self.header };
        let base = self.header as usize;
        let p = if h.free[class] != 0 {
            let p = h.free[class];
            h.free[class] = unsafe { *(p as *const usize) };
            Some(p)
        } else if block < CHUNK {
            if h.cursor[class] == h.chunk_end[class] {
                if let Some(chunk) = h.take(CHUNK) {
                    h.cursor[class] = base + chunk;
                    h.chunk_end[class] = base + chunk + CHUNK;
                }
            }
            (h.cursor[class] != h.chunk_end[class]).then(|| {
                let p = h.cursor[class];
                h.cursor[class] += block;
                p
            })
        } else {
            h.take(block).map(|offset| base + offset)
        };
        if p.is_none() {
            h.overflows += 1;
        }
        self.unlock();
        p.map_or(std::ptr::null_mut(), |p| p as *mut u8)
    }

    /// Gives back a block this arena handed out for `layout`.
    fn free(self, p: *mut u8, layout: Layout) {
        let Some((class, _)) = size_class(layout) else { return };
        self.lock();
        let h = unsafe { &mut *self.header };
        unsafe { *(p as *mut usize) = h.free[class] };
        h.free[class] = p as usize;
        self.unlock();
    }
}

/// The size class of `layout` and its block size; `None`: aligned beyond a page (never
/// served from an arena) or larger than the largest block.
fn size_class(layout: Layout) -> Option<(usize, usize)> {
    if layout.align() > PAGE {
        return None;
    }
    let block = layout.size().max(layout.align()).max(MIN_BLOCK).checked_next_power_of_two()?;
    let class = (block / MIN_BLOCK).trailing_zeros() as usize;
    (class < CLASSES).then_some((class, block))
}

/// The arena of this process's family, once [`enable_family`] made it; `None` before (the
/// default: shards live on the process heap).
#[inline]
pub fn family() -> Option<Arena> {
    let header = FAMILY.load(Ordering::Acquire);
    (!header.is_null()).then_some(Arena { header })
}

/// Makes the family arena (once; later calls return it), to be called before the first shard
/// is made and before the fork that should share it. `None`: nothing was mapped, because
/// [`ScopedAlloc`] is not the program's global allocator (a scope would place nothing) or the
/// mmap failed; [`family`] stays `None` and shards live on the process heap.
pub fn enable_family() -> Option<Arena> {
    static MAKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = MAKING.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(arena) = family() {
        return Some(arena);
    }
    if !scoped_alloc_is_global() {
        return None;
    }
    let arena = Arena::new(FAMILY_RESERVE)?;
    FAMILY.store(arena.header, Ordering::Release);
    Some(arena)
}

/// Whether [`ScopedAlloc`] serves this program's allocations: only it counts them.
fn scoped_alloc_is_global() -> bool {
    let before = allocations_by_this_thread();
    drop(std::hint::black_box(Box::new(0u64)));
    allocations_by_this_thread() != before
}

/// The arena whose region holds `p`, if any.
fn home_of(p: *mut u8) -> Option<Arena> {
    (0..ARENA_COUNT.load(Ordering::Acquire).min(MAX_ARENAS))
        .map(|i| ARENAS[i].load(Ordering::Acquire))
        .filter(|h| !h.is_null())
        .map(|header| Arena { header })
        .find(|a| a.contains(p))
}

/// A thread's allocation scope (set by [`Arena::enter`]), and what it allocated.
struct Scope {
    arena: Cell<*mut Header>,
    allocations: Cell<u64>,
}

thread_local! {
    static SCOPE: Scope = const { Scope { arena: Cell::new(std::ptr::null_mut()), allocations: Cell::new(0) } };
}

/// The scope [`Arena::enter`] opened; dropping it puts back the one before.
pub struct InArena {
    outer: *mut Header,
    arena: *mut Header,
}

impl Drop for InArena {
    #[inline]
    fn drop(&mut self) {
        if self.outer.is_null() {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
            unsafe { (*self.arena).in_scope.store(false, Ordering::Relaxed) };
        }
        SCOPE.with(|s| s.arena.set(self.outer));
    }
}

/// Allocations (alloc, alloc_zeroed, realloc) the calling thread made, from any home: how a test
/// shows that a path allocates nothing.
pub fn allocations_by_this_thread() -> u64 {
    SCOPE.with(|s| s.allocations.get())
}

/// The global allocator: inside a scope, the scope's arena; elsewhere, and for what an arena
/// cannot serve, the process heap (`System`).
pub struct ScopedAlloc;

/// The scope's arena (counting the allocation), if the thread is in one.
fn scope_for_alloc() -> Option<Arena> {
    // A thread being torn down has no scope left: the process heap.
    SCOPE
        .try_with(|s| {
            s.allocations.set(s.allocations.get() + 1);
            s.arena.get()
        })
        .ok()
        .filter(|h| !h.is_null())
        .map(|header| Arena { header })
}

unsafe impl GlobalAlloc for ScopedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match scope_for_alloc().map(|a| a.alloc(layout)) {
            Some(p) if !p.is_null() => p,
            _ => System.alloc(layout),
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        match scope_for_alloc().map(|a| a.alloc(layout)) {
            Some(p) if !p.is_null() => {
                // A block from a free list holds what it held.
                std::ptr::write_bytes(p, 0, layout.size());
                p
            }
            _ => System.alloc_zeroed(layout),
        }
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        match home_of(p) {
            Some(a) => a.free(p, layout),
            None => System.dealloc(p, layout),
        }
    }

    /// A block grows or shrinks where it lives: in its arena (in place while it keeps its size
    /// class), or on the process heap.
    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = SCOPE.try_with(|s| s.allocations.set(s.allocations.get() + 1));
        let Some(home) = home_of(p) else { return System.realloc(p, layout, new_size) };
        let new_layout = Layout::from_size_align_unchecked(new_size, layout.align());
        if size_class(new_layout).is_some_and(|c| Some(c) == size_class(layout)) {
            return p;
        }
        let mut q = home.alloc(new_layout);
        if q.is_null() {
            q = System.alloc(new_layout);
            if q.is_null() {
                return q;
            }
        }
        std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size));
        home.free(p, layout);
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static GLOBAL: ScopedAlloc = ScopedAlloc;

    fn small() -> Arena {
        Arena::new(1 << 20).unwrap()
    }

    #[test]
    fn what_a_scope_allocates_lives_in_its_arena_and_nothing_else_does() {
        let arena = small();
        let outside = Box::new([1u8; 100]);
        let inside = {
            let _in = arena.enter();
            Box::new([2u8; 100])
        };
        assert!(arena.contains(inside.as_ptr()));
        assert!(!arena.contains(outside.as_ptr()));
        let after = Box::new([3u8; 100]);
        assert!(!arena.contains(after.as_ptr()), "the scope ended with its guard");
    }

    #[test]
    fn outside_a_scope_the_allocator_is_the_systems() {
        let layout = Layout::from_size_align(100, 8).unwrap();
        unsafe {
            // Blocks cross between the two both ways: System's free and realloc take ScopedAlloc's
            // blocks, and ScopedAlloc's take System's.
            let ours = ScopedAlloc.alloc(layout);
            assert!(home_of(ours).is_none());
            let grown = System.realloc(ours, layout, 5000);
            System.dealloc(grown, Layout::from_size_align(5000, 8).unwrap());
            let theirs = System.alloc_zeroed(layout);
            let grown = ScopedAlloc.realloc(theirs, layout, 5000);
            assert!(home_of(grown).is_none());
            ScopedAlloc.dealloc(grown, Layout::from_size_align(5000, 8).unwrap());
        }
    }

    #[test]
    fn the_family_arena_exists_only_once_enabled() {
        assert!(family().is_none(), "mapped before anyone asked");
        let made = enable_family().expect("ScopedAlloc is this test's global allocator");
        assert_eq!(family().map(|a| a.header), Some(made.header));
        assert_eq!(enable_family().map(|a| a.header), Some(made.header), "made once");
    }

    #[test]
    fn a_block_grows_where_it_lives_whoever_grows_it() {
        let arena = small();
        let mut shard_owned = {
            let _in = arena.enter();
            Vec::<u64>::with_capacity(4)
        };
        let mut private = Vec::<u64>::with_capacity(4);
        {
            let _in = arena.enter();
            private.extend(0..1000);
        }
        shard_owned.extend(0..1000);
        assert!(arena.contains(shard_owned.as_ptr().cast()), "grown outside the scope, still in the arena");
        assert!(!arena.contains(private.as_ptr().cast()), "grown inside the scope, still private");
        assert!(shard_owned.iter().copied().eq(0..1000));
    }

    #[test]
    fn a_freed_block_is_reused_for_the_next_of_its_size() {
        let arena = small();
        let _in = arena.enter();
        let first = Box::new([7u8; 48]);
        let at = first.as_ptr();
        drop(first);
        let second = Box::new([9u8; 60]);
        assert_eq!(second.as_ptr(), at, "48 and 60 bytes share the 64-byte size");
        drop(second);
        // alloc_zeroed on a block that held the 9s.
        let zeroed = vec![0u8; 64];
        assert_eq!((zeroed.as_ptr(), zeroed.capacity()), (at, 64));
        assert!(zeroed.iter().all(|&b| b == 0));
    }

    #[test]
    fn a_full_arena_leaves_the_rest_to_the_process_heap_and_counts_it() {
        let arena = Arena::new(2 * CHUNK).unwrap();
        let _in = arena.enter();
        let big = vec![1u8; 4 * CHUNK];
        assert!(!arena.contains(big.as_ptr()));
        assert_eq!(arena.overflows(), 1);
    }

    /// A process killed inside the allocator (kill -9 of the family lock's holder) leaves the
    /// lock held and perhaps a chunk half set up: here the child takes the lock and, as if
    /// killed between the two stores of a chunk refill, leaves a size's cursor in a new chunk
    /// and its end in the old one. The recovery frees the lock and gives up the chunks being
    /// cut, so that the next blocks come from a fresh chunk.
    #[test]
    fn a_holder_killed_inside_the_allocator_leaves_it_usable_after_recovery() {
        let arena = small();
        let first = {
            let _in = arena.enter();
            Box::new([1u8; 64])
        };
        let class = size_class(Layout::new::<[u8; 64]>()).unwrap().0;
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            arena.lock();
            let h = unsafe { &mut *arena.header };
            // A large block was taken since the chunk in use: the next chunk is not contiguous.
            let _ = h.take(CHUNK * 2);
            if let Some(chunk) = h.take(CHUNK) {
                h.cursor[class] = arena.header as usize + chunk;
            }
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(arena.recover_from_dead_holder(), "the dead child held the lock");
        let h = unsafe { &*arena.header };
        assert_eq!(h.lock.load(Ordering::Relaxed), 0);
        assert_eq!(h.cursor, h.chunk_end, "a chunk the dead left half set up is still cut");
        let next = {
            let _in = arena.enter();
            Box::new([2u8; 64])
        };
        assert!(arena.contains(next.as_ptr()));
        assert!(!arena.recover_from_dead_holder(), "a free lock needs no recovery");
        drop((first, next));
    }

    /// A process killed inside a scope (in the middle of a shard call) leaves the mark that
    /// tells its successor so; scopes that ended leave none, nested ones included.
    #[test]
    fn a_process_killed_inside_a_scope_leaves_the_mark_of_an_update_under_way() {
        let arena = small();
        {
            let _in = arena.enter();
            let _nested = arena.enter();
        }
        assert!(!arena.take_in_scope(), "every scope ended");
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let _in = arena.enter();
            unsafe { libc::_exit(0) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(arena.take_in_scope(), "the child died inside its scope");
        assert!(!arena.take_in_scope(), "taken once");
    }

    #[test]
    fn a_child_forked_after_an_allocation_sees_it_at_the_same_address_and_shares_its_writes() {
        let arena = small();
        let shared = {
            let _in = arena.enter();
            Box::new(std::sync::atomic::AtomicU64::new(1))
        };
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // No allocation here: the test harness has threads.
            let seen = shared.swap(2, Ordering::AcqRel);
            unsafe { libc::_exit(if seen == 1 { 0 } else { 1 }) };
        }
        let mut status = 0;
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child did not see the object");
        assert_eq!(shared.load(Ordering::Acquire), 2, "the child's write did not reach the parent");
    }
}
