//! The children's sleepers: targeted wakes across the family. A child's thread that found
//! nothing to do registers, under the family lock and in the same hold as its look, on the
//! sockets it waits for (its blocking call's socket, its poll set's accelerated fds, its epoll
//! set's accelerated members): it takes a free [`Sleeper`] in the arena (its wake word, and its
//! eventfd when it sleeps in poll(2) beside kernel fds) and names it in the socket's list. The
//! driver's stack pass, for each socket it changed, marks the sleepers named there woken (under
//! the lock) and owes a wake to those already asleep in the kernel, sent once the locks are
//! released (a FUTEX_WAKE on the word, without FUTEX_PRIVATE_FLAG, or an eventfd write through
//! pidfd_getfd). A change made after the registration needs the lock, so it finds the sleeper:
//! no wake is lost; a sleeper marked woken before it sleeps does not sleep. The thread drops its
//! registrations when it is up again (`ChildSleep::end`, under the lock).
//!
//! The broadcast stays for the threads that cannot register (every sleeper taken, or no
//! accelerated socket to wait on): they sleep on the family's change count, which every pass
//! that changed something moves and wakes.

use std::cell::Cell;
use std::sync::atomic::{AtomicU32, Ordering};

use smallvec::SmallVec;
use stack::shard::SocketId;

use super::{ChildSleep, Family, How, OwedWake, OwedWakes, Sleeper, Waits, SLEEPERS};
use crate::family_parker::{add_one, usable_fd, ASLEEP, IDLE, WOKEN};
use crate::wait::PollFds;
use crate::{real, Errno};

thread_local! {
    /// This thread's last sleep as a child ended with a family wake: if it sleeps again in the
    /// same call, that wake found nothing (`family_wakes_idle`).
    static FAMILY_WOKEN: Cell<bool> = const { Cell::new(false) };
}

/// A child's thread that waits for kernel fds and could not register looks at its sockets this
/// often (ms).
const KERNEL_FDS_LOOK_MS: i32 = 10;

impl Family {
    fn sleeper(&self, slot: u16) -> &Sleeper {
        &self.shared().sleepers[usize::from(slot)]
    }

    /// Runs `f` on the sockets' sleeper lists, in a scope of the family arena (family lock
    /// held: the caller's).
    fn with_waits<T>(&self, f: impl FnOnce(&mut Waits) -> T) -> T {
        let _in = arena::family().map(arena::Arena::enter);
        // SAFETY: `shared` is the arena block `Family::new` made; `waits` is only reached here
        // and in `changed_socket`, by callers holding the family lock, so no other reference to
        // it exists meanwhile.
        f(unsafe { &mut (*self.shared).waits })
    }

    /// A child's thread found nothing and will sleep (family lock held, in the hold of that
    /// look): registered on `ids`, the sockets it waits for, so that the driver's next change
    /// of one of them wakes it; in poll(2) with its eventfd `efd` when it also watches kernel
    /// fds (`kernel_fds`). `again`: it slept before in this call (a wake that brought it back
    /// here found nothing).
    pub(crate) fn prepare_sleep(
        &'static self,
        ids: &[SocketId],
        kernel_fds: bool,
        efd: i32,
        again: bool,
    ) -> ChildSleep {
        let s = self.shared();
        if FAMILY_WOKEN.replace(false) && again {
            s.wakes_idle.fetch_add(1, Ordering::Relaxed);
        }
        let free =
            if ids.is_empty() { None } else { s.sleepers.iter().position(|x| x.pid.load(Ordering::Acquire) == 0) };
        let Some(slot) = free else {
            // The count first: a process killed between the two leaves it one too high (a
            // wake for nobody at each change), never too low (a lost wake).
            s.broadcast_sleepers.fetch_add(1, Ordering::AcqRel);
            if let Some(m) = self.member() {
                s.members[m].sleeping.fetch_add(1, Ordering::AcqRel);
            }
            return ChildSleep { family: self, how: How::Count { seen: s.changes.load(Ordering::Acquire) } };
        };
        let slot = slot as u16;
        let me = self.sleeper(slot);
        me.word.store(IDLE, Ordering::Release);
        me.efd.store(if kernel_fds { efd } else { -1 }, Ordering::Release);
        me.pid.store(crate::liveness::own_pid(), Ordering::Release);
        self.with_waits(|waits| {
            for &id in ids {
                let list = waits.entry(id).or_default();
                if !list.contains(&slot) {
                    list.push(slot);
                }
            }
        });
        ChildSleep { family: self, how: How::Registered { slot, ids: ids.into() } }
    }

    /// The driver's stack pass changed some socket (family lock held): counted, so that a
    /// child's next hold looks again at its sockets. Whether the threads asleep on the count
    /// (the broadcast, for those that could not register) are owed a wake.
    pub(crate) fn changed(&self) -> bool {
        let s = self.shared();
        s.changes.fetch_add(1, Ordering::AcqRel);
        s.broadcast_sleepers.load(Ordering::Acquire) != 0
    }

    /// Forgets the sleepers of the processes a wake found gone (family lock held: the driver's
    /// next hold after that wake).
    pub(crate) fn forget_gone(&self) {
        if !self.any_gone.swap(false, Ordering::AcqRel) {
            return;
        }
        let gone = std::mem::take(&mut *self.gone.lock().unwrap_or_else(|p| p.into_inner()));
        for pid in gone {
            self.forget_sleeps_of(pid);
        }
    }

    /// How many sleepers are taken now.
    pub(crate) fn sleepers_in_use(&self) -> u64 {
        self.shared().sleepers.iter().filter(|s| s.pid.load(Ordering::Relaxed) != 0).count() as u64
    }

    /// The driver's stack pass changed socket `id` (family lock held): the children's threads
    /// registered on it are marked woken (one that has not slept yet will not), and those
    /// asleep in the kernel are owed a wake in `owed`, sent with [`Family::wake_sleepers`] once
    /// the locks are released.
    pub(crate) fn changed_socket(&self, id: SocketId, owed: &mut OwedWakes) {
        // SAFETY: as in `with_waits`: the caller holds the family lock; read only.
        let Some(list) = (unsafe { &(*self.shared).waits }).get(&id) else { return };
        for &slot in list {
            let sleeper = self.sleeper(slot);
            if sleeper.word.swap(WOKEN, Ordering::AcqRel) == ASLEEP {
                owed.push(OwedWake {
                    slot,
                    pid: sleeper.pid.load(Ordering::Acquire),
                    efd: sleeper.efd.load(Ordering::Acquire),
                });
            }
        }
    }

    /// Sends the wakes a hold of the driver owes (with no lock held): each thread in `owed`,
    /// and with `broadcast` every thread asleep on the change count. A wake whose thread has
    /// woken meanwhile (even registered again) costs it one more look.
    pub(crate) fn wake_sleepers(&self, owed: &OwedWakes, broadcast: bool) {
        let s = self.shared();
        let mut sent = 0;
        if broadcast {
            // SAFETY: FUTEX_WAKE on an aligned u32 of the arena, mapped for the process's life.
            let n = unsafe { libc::syscall(libc::SYS_futex, s.changes.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
            sent += n.max(0) as u64;
        }
        for w in owed {
            if w.efd < 0 {
                let word = &self.sleeper(w.slot).word;
                // SAFETY: FUTEX_WAKE on an aligned u32 of the arena, mapped for the process's life.
                unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, 1) };
                sent += 1;
                continue;
            }
            match usable_fd(w.pid, w.efd) {
                Ok(fd) => {
                    add_one(fd);
                    sent += 1;
                }
                // Gone (killed while asleep): its sleepers are forgotten at the next hold.
                Err(Errno(libc::ESRCH)) => {
                    self.gone.lock().unwrap_or_else(|p| p.into_inner()).push(w.pid);
                    self.any_gone.store(true, Ordering::Release);
                }
                // Not allowed (a credential change): it wakes at its own timeout or kernel fds.
                Err(_) => {}
            }
        }
        s.wakes.fetch_add(sent, Ordering::Relaxed);
    }

    /// Drops every registration of process `pid`'s threads and frees their sleepers (family
    /// lock held): for a process that died asleep, which never drops them itself.
    pub(crate) fn forget_sleeps_of(&self, pid: libc::pid_t) {
        let s = self.shared();
        let theirs: SmallVec<[u16; 8]> =
            (0..SLEEPERS as u16).filter(|&i| s.sleepers[usize::from(i)].pid.load(Ordering::Acquire) == pid).collect();
        if theirs.is_empty() {
            return;
        }
        self.with_waits(|waits| {
            waits.retain(|_, list| {
                list.retain(|slot| !theirs.contains(slot));
                !list.is_empty()
            })
        });
        for slot in theirs {
            self.free(slot);
        }
    }

    fn free(&self, slot: u16) {
        let sleeper = self.sleeper(slot);
        sleeper.efd.store(-1, Ordering::Release);
        sleeper.word.store(IDLE, Ordering::Release);
        sleeper.pid.store(0, Ordering::Release);
    }
}

impl ChildSleep {
    /// The sleeper the thread registered (`None`: it sleeps on the change count).
    pub(crate) fn sleeper(&self) -> Option<&'static Sleeper> {
        match self.how {
            How::Registered { slot, .. } => Some(self.family.sleeper(slot)),
            How::Count { .. } => None,
        }
    }

    /// Sleeps until a wake, `timeout_ms` passes (-1: none), a signal comes (-EINTR) or, with
    /// kernel fds (`extra`, non-empty), one of them is ready.
    /// Returns what `wait::sleep` returns.
    pub(crate) fn sleep(&self, timeout_ms: i32, extra: &mut PollFds) -> i32 {
        match &self.how {
            How::Registered { slot, .. } => self.sleep_registered(self.family.sleeper(*slot), timeout_ms, extra),
            How::Count { seen } => self.sleep_on_count(*seen, timeout_ms, extra),
        }
    }

    fn sleep_registered(&self, me: &Sleeper, timeout_ms: i32, extra: &mut PollFds) -> i32 {
        let efd = me.efd.load(Ordering::Acquire);
        let r = if me.word.compare_exchange(IDLE, ASLEEP, Ordering::AcqRel, Ordering::Acquire).is_err() {
            0 // woken already
        } else if efd < 0 {
            debug_assert!(extra.is_empty());
            futex_wait(&me.word, ASLEEP, timeout_ms)
        } else {
            let base = extra.len();
            extra.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
            // SAFETY: `extra` is our list of extra.len() pollfds, read and written by the kernel.
            let r = unsafe { real::poll(extra.as_mut_ptr(), extra.len() as libc::nfds_t, timeout_ms) };
            let errno = crate::last_errno();
            extra.truncate(base);
            if r < 0 {
                -errno.0
            } else {
                extra.iter().filter(|p| p.revents != 0).count() as i32
            }
        };
        let _ = me.word.compare_exchange(ASLEEP, IDLE, Ordering::AcqRel, Ordering::Acquire);
        let woken = me.word.load(Ordering::Acquire) == WOKEN;
        if woken && efd >= 0 {
            let mut v = 0u64;
            // SAFETY: the thread's own non-blocking eventfd; the kernel writes 8 bytes to `v`.
            unsafe { real::read(efd, (&mut v as *mut u64).cast(), 8) };
        }
        FAMILY_WOKEN.set(woken);
        r
    }

    /// The broadcast: until the change count moves from `seen` (with kernel fds: a look every
    /// [`KERNEL_FDS_LOOK_MS`], since no eventfd of this thread is known to the driver).
    fn sleep_on_count(&self, seen: u32, timeout_ms: i32, extra: &mut PollFds) -> i32 {
        let s = self.family.shared();
        let r = if extra.is_empty() {
            futex_wait(&s.changes, seen, timeout_ms)
        } else {
            let t = if timeout_ms < 0 { KERNEL_FDS_LOOK_MS } else { timeout_ms.min(KERNEL_FDS_LOOK_MS) };
            // SAFETY: `extra` is our list of extra.len() pollfds, read and written by the kernel.
            let r = unsafe { real::poll(extra.as_mut_ptr(), extra.len() as libc::nfds_t, t) };
            if r < 0 {
                -crate::last_errno().0
            } else {
                r
            }
        };
        if let Some(m) = self.family.member() {
            s.members[m].sleeping.fetch_sub(1, Ordering::AcqRel);
        }
        s.broadcast_sleepers.fetch_sub(1, Ordering::AcqRel);
        FAMILY_WOKEN.set(s.changes.load(Ordering::Acquire) != seen);
        r
    }

    /// The thread is up again (family lock held): its registrations go and its sleeper is free.
    pub(crate) fn end(&self) {
        let How::Registered { slot, ids } = &self.how else { return };
        let slot = *slot;
        self.family.with_waits(|waits| {
            for id in ids {
                if let Some(list) = waits.get_mut(id) {
                    list.retain(|s| *s != slot);
                    if list.is_empty() {
                        waits.remove(id);
                    }
                }
            }
        });
        self.family.free(slot);
    }
}

/// FUTEX_WAIT (shared: the word is in the arena) while `word` is `expected`, at most
/// `timeout_ms` (-1: none). -EINTR when a signal handler ran, else 0.
fn futex_wait(word: &AtomicU32, expected: u32, timeout_ms: i32) -> i32 {
    let ts = libc::timespec {
        tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
        tv_nsec: ((timeout_ms.max(0) % 1000) as libc::c_long) * 1_000_000,
    };
    let tsp = if timeout_ms < 0 { std::ptr::null() } else { &ts as *const libc::timespec };
    // SAFETY: FUTEX_WAIT on an aligned u32 of the arena; `tsp` is null or points to `ts`, alive
    // across the call.
    let r = unsafe { libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAIT, expected, tsp) };
    if r < 0 && crate::last_errno().0 == libc::EINTR {
        -libc::EINTR
    } else {
        0
    }
}
