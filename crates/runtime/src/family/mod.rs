//! The stack a fork family shares (issue 24, stage 3; docs/design-notes.md, "Fork after accept:
//! a shared stack"). With `[runtime] share = "family"` the shards live in the family arena from
//! the NIC's opening, and a child forked after that keeps the runtime and works on the same
//! shards, under one lock the processes share. This module owns what they share beyond the
//! shards and how the roles differ:
//! - [`Sharing`]: whether this process's runtime shares its shards, and whether it is the
//!   opener (the only process that drives the NIC: the DPDK port is per process) or a child;
//! - the family lock ([`crate::family_lock`]), taken around every hold of the runtime's own
//!   lock once the shards are shared;
//! - the opener's doorbell ([`crate::family_parker`]): the thread that drives the NIC sleeps
//!   with it registered, and a child whose call queued frames rings it instead of sending them;
//!   a child that may not write the driver's eventfd (it changed its credentials: nginx's
//!   workers become `nobody`, the master stays root) rings the family's bell instead, an
//!   eventfd the opener made before its first fork, which every child inherits and the driver
//!   watches;
//! - the change count: the driver bumps it at each stack pass that changed a socket's
//!   readiness, and a child's waiting thread sleeps on it (a futex without FUTEX_PRIVATE_FLAG)
//!   and looks again at what it waits for when it moves;
//! - how many processes hold each socket (Linux's file reference count at process grain): a
//!   fork adds one for every socket the parent holds, and a process that closes its last fd of
//!   a socket closes it on the shard only when no other process holds it;
//! - the process table (`members`): every child that shares the shards, by pid and start time
//!   (a recycled pid is another process), with the sockets it holds and its threads asleep, so
//!   that what a process that died without leaving (kill -9, a crash, `_exit`) held is given
//!   back: its holds dropped (a socket only it held closes, as Linux closes a dead process's
//!   fds), its sleeps forgotten. Deaths are found by a look at every member's liveness (a pidfd:
//!   exited, zombies included; the start time: not recycled) when the lock's previous holder
//!   died and, in the opener, once every [`REAP_EVERY_NS`] of its passes (`death`).
//!
//! Not here yet: children that drive the NIC, the opener leaving before its children (the NIC
//! goes with it; the opener names on stderr, at its exit, the sharing children it forked that
//! still run).
//!
//! This module holds what the family shares and each process's role; `role` turns a runtime
//! into a child's or an opener's at a fork, `death` finds the members that died and gives back
//! what they held.

mod death;
mod role;

pub use death::FamilyStats;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use stack::shard::SocketId;

use crate::family_lock::{FamilyGuard, FamilyLock};
use crate::family_parker::FamilyParker;
use crate::{real, Errno};

/// What the processes of the family share besides the shards.
pub(crate) struct Family {
    lock: FamilyLock,
    doorbell: FamilyParker,
    /// The bell: an eventfd of the opener's (close-on-exec) that its children inherit.
    bell: i32,
    /// In the family arena (made in a scope of it, changed only in one, under the lock).
    shared: *mut Shared,
    /// The children this process forked that share its shards (its own heap: the opener's).
    children: std::sync::Mutex<Vec<libc::pid_t>>,
    /// This process's slot in the process table ([`NOT_A_MEMBER`]: the opener, or a child the
    /// full table left out). Each process's own: fork copies it, the child then sets its own.
    me: AtomicUsize,
    /// When the opener looks for dead members next (its clock, ns).
    next_reap_ns: AtomicU64,
    /// This process's pid (fork copies it, the child then sets its own).
    pid: AtomicI32,
}

/// The part of the family's state that lives in the arena.
struct Shared {
    /// Stack passes of the driver that changed some socket's readiness (wraps).
    changes: AtomicU32,
    /// The bell was written since the driver last read it back.
    bell_rung: AtomicBool,
    /// Children's threads asleep (or about to sleep) on `changes`.
    sleepers: AtomicU32,
    /// Which processes hold which sockets.
    holds: Holds,
    /// The process table: the children sharing the shards (the opener is in none).
    members: [Member; MEMBERS],
    /// A process died holding the family lock: its successor looks for the dead at once.
    holder_died: AtomicBool,
    /// The process that took the family lock last (who died, when its successor is told so).
    holder_pid: AtomicI32,
    /// Members found dead, and of them those that died holding the lock (`pronghorn stat`).
    dead_processes: AtomicU64,
    dead_lock_holders: AtomicU64,
    /// Of those, the ones that died inside a scope of the family arena (mid-update).
    dead_mid_update: AtomicU64,
    /// Children's threads asleep in poll(2) (they also watch kernel fds): each one's process and
    /// eventfd, written at each change (pid 0: a free slot).
    fd_sleepers: [FdSleeper; FD_SLEEPERS],
}

/// Which processes hold which sockets (under the family lock, in the arena).
#[derive(Default)]
struct Holds {
    /// The processes that hold a socket, for the sockets more than one process holds.
    counts: HashMap<SocketId, u32>,
    /// The sockets each member holds (by its slot in the process table).
    by_member: HashMap<usize, HashSet<SocketId>>,
}

impl Holds {
    /// One process fewer holds `id`: whether none is left (the socket closes).
    fn drop_one(&mut self, id: SocketId) -> bool {
        match self.counts.remove(&id) {
            None | Some(0..=1) => true,
            Some(2) => false,
            Some(n) => {
                self.counts.insert(id, n - 1);
                false
            }
        }
    }
}

/// A child in the process table.
#[derive(Default)]
struct Member {
    /// 0: a free slot; [`FORKING`]: taken by a fork that has not returned yet; else the pid.
    pid: AtomicI32,
    /// Its start time (/proc/PID/stat, clock ticks since boot; 0: unknown), so that a recycled
    /// pid is not taken for it.
    start: AtomicU64,
    /// Its threads counted in `sleepers` (about to sleep or asleep on the change count).
    sleeping: AtomicU32,
}

/// How many children the process table holds; a child forked while it is full shares the
/// shards untracked (said once on stderr): what it holds stays held if it dies.
const MEMBERS: usize = 1024;

/// A member slot taken by a fork that has not returned yet.
const FORKING: i32 = -1;

/// `Family::me` of the opener and of a child left out of a full table.
const NOT_A_MEMBER: usize = usize::MAX;

/// How often the opener looks at its members' liveness (ns of its clock): a child killed
/// while it did not hold the lock has its sockets closed this long after at most.
pub(crate) const REAP_EVERY_NS: u64 = 1_000_000_000;

/// A child's thread asleep in poll(2) on its eventfd `efd`.
#[derive(Default)]
struct FdSleeper {
    pid: AtomicI32,
    efd: AtomicI32,
}

/// How many children's threads can sleep in poll(2) woken at once; more look every
/// [`KERNEL_FDS_LOOK_MS`].
const FD_SLEEPERS: usize = 256;

/// A child's thread about to sleep (`wait::Sleep`): on the change count from `seen`, or in
/// poll(2) with its eventfd registered in `slot`.
pub(crate) struct ChildSleep {
    family: &'static Family,
    seen: u32,
    slot: Option<usize>,
}

// SAFETY: `shared` points into the family arena, mapped for the life of the process at the same
// address in every process of the family; its atomics are shared freely and `holds` is only
// touched with the family lock held (`&mut` through `with_holds`).
unsafe impl Send for Family {}
// SAFETY: as for Send.
unsafe impl Sync for Family {}

/// Whether and how this process's runtime shares its shards.
#[derive(Clone, Copy)]
pub(crate) enum Sharing {
    /// The shards are this process's alone (`share = "off"`, or no family arena).
    Alone,
    /// The process that opened the NIC: it drives it for the family.
    Opener(&'static Family),
    /// A process forked after the NIC opened: socket calls on the shared shards, never the NIC.
    Child(&'static Family),
}

impl Sharing {
    #[inline]
    pub(crate) fn family(self) -> Option<&'static Family> {
        match self {
            Sharing::Alone => None,
            Sharing::Opener(f) | Sharing::Child(f) => Some(f),
        }
    }

    /// The family of a child (`None`: this process may drive its NIC).
    #[inline]
    pub(crate) fn child(self) -> Option<&'static Family> {
        match self {
            Sharing::Child(f) => Some(f),
            _ => None,
        }
    }

    /// Takes the family lock when the shards are shared (before touching them).
    #[inline]
    pub(crate) fn lock(self) -> Option<FamilyGuard<'static>> {
        self.family().map(Family::lock)
    }
}

impl Family {
    /// The family of the opener, made when the NIC opens with the family arena enabled (`None`:
    /// no arena, or no mapping for the lock or the doorbell; the shards then stay this
    /// process's alone).
    pub(crate) fn new() -> Option<&'static Family> {
        let arena = arena::family()?;
        let lock = FamilyLock::new().ok()?;
        let doorbell = FamilyParker::new().ok()?;
        // SAFETY: eventfd takes no memory; the result is checked.
        let bell = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if bell < 0 {
            return None;
        }
        let shared = {
            let _in = arena.enter();
            Box::into_raw(Box::new(Shared {
                changes: AtomicU32::new(0),
                bell_rung: AtomicBool::new(false),
                sleepers: AtomicU32::new(0),
                holds: Holds::default(),
                members: std::array::from_fn(|_| Member::default()),
                holder_died: AtomicBool::new(false),
                holder_pid: AtomicI32::new(0),
                dead_processes: AtomicU64::new(0),
                dead_lock_holders: AtomicU64::new(0),
                dead_mid_update: AtomicU64::new(0),
                fd_sleepers: std::array::from_fn(|_| FdSleeper::default()),
            }))
        };
        if !arena.contains(shared.cast()) {
            // SAFETY: the eventfd made above, known to nothing else.
            unsafe { real::close(bell) };
            return None;
        }
        Some(Box::leak(Box::new(Family {
            lock,
            doorbell,
            bell,
            shared,
            children: Default::default(),
            me: AtomicUsize::new(NOT_A_MEMBER),
            next_reap_ns: AtomicU64::new(0),
            // SAFETY: getpid has no preconditions.
            pid: AtomicI32::new(unsafe { libc::getpid() }),
        })))
    }

    fn shared(&self) -> &Shared {
        // SAFETY: `shared` is the arena block `new` made, never freed.
        unsafe { &*self.shared }
    }

    /// This process forked `pid`, a child that shares its shards.
    pub(crate) fn forked(&self, pid: libc::pid_t) {
        let mut children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        // Those gone (reaped or zombies) need no watching.
        children.retain(|&c| alive(c));
        children.push(pid);
    }

    /// The children this process forked that still live.
    pub(crate) fn children_alive(&self) -> Vec<libc::pid_t> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        children.iter().copied().filter(|&c| alive(c)).collect()
    }

    /// The lock over the shared shards. When its holder died, the arena's allocator is made
    /// usable again (`arena::Arena::recover_from_dead_holder`) before anything allocates, and
    /// the caller's runtime gives back what the dead held before it does anything else
    /// ([`Family::take_holder_died`]; docs/runtime.md, "A process of the family dies").
    fn lock(&'static self) -> FamilyGuard<'static> {
        match self.lock.lock() {
            Ok(mut g) => {
                let s = self.shared();
                if g.owner_died() {
                    if let Some(a) = arena::family() {
                        a.recover_from_dead_holder();
                        if a.take_in_scope() {
                            self.died_mid_update();
                        }
                    }
                    // The kernel frees a robust lock early in the holder's exit, before the
                    // process has ended: the look for the dead would not find it yet.
                    death::wait_exited(s.holder_pid.load(Ordering::Relaxed));
                    s.dead_lock_holders.fetch_add(1, Ordering::Relaxed);
                    s.holder_died.store(true, Ordering::Release);
                    g.mark_consistent();
                }
                s.holder_pid.store(self.pid.load(Ordering::Relaxed), Ordering::Relaxed);
                g
            }
            Err(e) => panic!("the family's stack lock cannot be taken: {e:?}"),
        }
    }

    /// The lock's holder died inside a scope of the family arena: in a shard call or an update
    /// of the family's tables, whose collections are not written to survive a kill between two
    /// stores of one change. Counted, and said once on stderr: the family goes on with them
    /// as they are (docs/runtime.md, "A process of the family dies").
    fn died_mid_update(&self) {
        self.shared().dead_mid_update.fetch_add(1, Ordering::Relaxed);
        static SAID: AtomicBool = AtomicBool::new(false);
        if !SAID.swap(true, Ordering::Relaxed) {
            let msg = "pronghorn: a process of the family died holding the stack's lock inside a call on the shared \
                       stack: what that call was changing may be half done (family_dead_mid_update)\n";
            // SAFETY: `msg` is readable for its length.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        }
    }

    /// Runs `f` on the holds, in a scope of the family arena (family lock held: the caller's).
    fn with_holds<T>(&self, f: impl FnOnce(&mut Holds) -> T) -> T {
        let _in = arena::family().map(arena::Arena::enter);
        // SAFETY: `shared` is the arena block `new` made; `holds` is only reached here, by
        // callers holding the family lock, so no other reference to it exists meanwhile.
        f(unsafe { &mut (*self.shared).holds })
    }

    /// This process's slot in the process table, if it has one.
    fn member(&self) -> Option<usize> {
        Some(self.me.load(Ordering::Relaxed)).filter(|&m| m != NOT_A_MEMBER)
    }

    /// A fork is about to give every socket in `ids` one more holder (the parent holds them;
    /// family lock held): counted, and a slot of the process table taken for the child with
    /// `ids` as its holds (`None`: the table is full).
    pub(crate) fn share(&self, ids: &[SocketId]) -> Option<usize> {
        let s = self.shared();
        let slot = s
            .members
            .iter()
            .position(|m| m.pid.compare_exchange(0, FORKING, Ordering::AcqRel, Ordering::Acquire).is_ok());
        if slot.is_none() {
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Ordering::Relaxed) {
                let msg = format!(
                    "pronghorn: the family's process table is full ({MEMBERS} children): a child forked now shares the stack untracked, and the sockets it holds stay open if it is killed\n"
                );
                // SAFETY: `msg` is readable for its length.
                unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
            }
        }
        self.with_holds(|holds| {
            for &id in ids {
                *holds.counts.entry(id).or_insert(1) += 1;
            }
            if let Some(m) = slot {
                holds.by_member.insert(m, ids.iter().copied().collect());
            }
        });
        slot
    }

    /// The fork after [`Family::share`] failed, or its child does not share (daemon()): the
    /// holds go back and the slot is free again (family lock held).
    pub(crate) fn unshare(&self, ids: &[SocketId], slot: Option<usize>) {
        self.with_holds(|holds| {
            for &id in ids {
                holds.drop_one(id);
            }
            if let Some(m) = slot {
                holds.by_member.remove(&m);
            }
        });
        if let Some(m) = slot {
            let member = &self.shared().members[m];
            member.start.store(0, Ordering::Relaxed);
            member.pid.store(0, Ordering::Release);
        }
    }

    /// The fork that took `slot` made process `pid`: called by the child itself, first thing
    /// after the fork (no lock needed, the slot is its own). Not by the parent: the child may
    /// have left already and its slot gone to another fork. A child killed before this leaves
    /// its slot taken and its holds held (its sockets stay open).
    pub(crate) fn joined(&self, slot: Option<usize>, pid: libc::pid_t) {
        let Some(m) = slot else { return };
        let member = &self.shared().members[m];
        member.start.store(death::start_time(pid).unwrap_or(0), Ordering::Relaxed);
        member.pid.store(pid, Ordering::Release);
    }

    /// In the child just forked: `slot` is its own from now on.
    pub(crate) fn became(&self, slot: Option<usize>) {
        self.me.store(slot.unwrap_or(NOT_A_MEMBER), Ordering::Relaxed);
        // SAFETY: getpid has no preconditions.
        self.pid.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    }

    /// This process holds `id` from now on (its first fd of it; family lock held).
    pub(crate) fn hold(&self, id: SocketId) {
        if let Some(m) = self.member() {
            self.with_holds(|holds| holds.by_member.entry(m).or_default().insert(id));
        }
    }

    /// This process closed its last fd of `id` (family lock held): whether no other process
    /// holds it, so that it closes.
    pub(crate) fn release(&self, id: SocketId) -> bool {
        let me = self.member();
        self.with_holds(|holds| {
            if let Some(set) = me.and_then(|m| holds.by_member.get_mut(&m)) {
                set.remove(&id);
            }
            holds.drop_one(id)
        })
    }

    /// The driver's stack pass changed some socket (family lock held): counted, so that a child
    /// about to sleep from the count before sees it moved. Whether a wake is owed: children
    /// sleep; the caller sends it with [`Family::wake_sleepers`] once the locks are released
    /// (the driver held the family lock through the eventfd writes, and the children waited
    /// for it: 35% of the driver's samples under pgbench).
    pub(crate) fn changed(&self) -> bool {
        let s = self.shared();
        s.changes.fetch_add(1, Ordering::AcqRel);
        s.sleepers.load(Ordering::Acquire) != 0
    }

    /// Wakes the children's threads asleep on the change count and the eventfds of those that
    /// also watch kernel fds (after [`Family::changed`], with no lock held: a child that went to
    /// sleep meanwhile started from the new count, and a wake it does not need only makes it
    /// look once more).
    pub(crate) fn wake_sleepers(&self) {
        let s = self.shared();
        // SAFETY: FUTEX_WAKE on an aligned u32 of the arena, mapped for the process's life.
        unsafe { libc::syscall(libc::SYS_futex, s.changes.as_ptr(), libc::FUTEX_WAKE, i32::MAX) };
        for sleeper in &s.fd_sleepers {
            let pid = sleeper.pid.load(Ordering::Acquire);
            if pid == 0 {
                continue;
            }
            match crate::family_parker::usable_fd(pid, sleeper.efd.load(Ordering::Acquire)) {
                Ok(fd) => crate::family_parker::add_one(fd),
                // Gone (killed while asleep): the slot is free again.
                Err(Errno(libc::ESRCH)) => sleeper.pid.store(0, Ordering::Release),
                // Not allowed (a credential change): it looks again every KERNEL_FDS_LOOK_MS.
                Err(_) => {}
            }
        }
    }

    /// The change count now (with the family lock held: the value a sleep starts from).
    pub(crate) fn changes(&self) -> u32 {
        self.shared().changes.load(Ordering::Acquire)
    }

    /// A child's thread found nothing and will sleep (family lock held, so the driver's next
    /// change wakes it): on the change count, or, when it also watches kernel fds
    /// (`kernel_fds`), in poll(2) with its eventfd `efd` among them.
    pub(crate) fn prepare_sleep(&'static self, kernel_fds: bool, efd: i32) -> ChildSleep {
        let s = self.shared();
        // `sleepers` first: a process killed between the two leaves it one too high (a wake
        // for nobody at each change), never too low (a lost wake).
        s.sleepers.fetch_add(1, Ordering::AcqRel);
        if let Some(m) = self.member() {
            s.members[m].sleeping.fetch_add(1, Ordering::AcqRel);
        }
        let slot = kernel_fds.then(|| s.fd_sleepers.iter().position(|f| f.pid.load(Ordering::Acquire) == 0)).flatten();
        if let Some(i) = slot {
            s.fd_sleepers[i].efd.store(efd, Ordering::Release);
            // SAFETY: getpid has no preconditions.
            s.fd_sleepers[i].pid.store(unsafe { libc::getpid() }, Ordering::Release);
        }
        ChildSleep { family: self, seen: s.changes.load(Ordering::Acquire), slot }
    }
    /// A child queued frames (or needs the NIC looked at): the driver runs a pass. The
    /// driver's own eventfd first (a copy through pidfd_getfd, kept); when that is refused
    /// (EPERM: this process changed its credentials, so it may not take the driver's fds) the
    /// bell, once until the driver reads it back.
    pub(crate) fn ring(&self) {
        if self.doorbell.wake().is_err() && !self.shared().bell_rung.swap(true, Ordering::AcqRel) {
            crate::family_parker::add_one(self.bell);
        }
    }

    /// The opener's driving thread is about to sleep in poll(2) on its eventfd `efd` (family
    /// lock held): a ring writes it from now on. Returns the bell, which the sleep watches too
    /// (read back here: rings since are what wakes it).
    pub(crate) fn driver_sleeps_on(&self, efd: i32) -> i32 {
        self.doorbell.reset();
        self.doorbell.sleep_on_fd(efd);
        if self.shared().bell_rung.swap(false, Ordering::AcqRel) {
            let mut v = 0u64;
            // SAFETY: the bell, a non-blocking eventfd of this process; the kernel writes 8
            // bytes to `v`.
            unsafe { real::read(self.bell, (&mut v as *mut u64).cast(), 8) };
        }
        self.bell
    }
}

/// Whether this process's child `pid` runs: not reaped (ECHILD), not exited and waiting to
/// be (WNOWAIT leaves it to the program's own wait).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: all zeroes is a valid siginfo_t; waitid writes it and reaps nothing (WNOWAIT).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is writable; WNOHANG: no wait.
    let r = unsafe {
        libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT)
    };
    // SAFETY: si_pid is the field waitid fills (0: the child has not exited).
    r == 0 && unsafe { info.si_pid() } == 0
}

/// A child's thread that waits for sockets and kernel fds at once and found no free
/// [`FdSleeper`] looks at the shared sockets this often (ms).
pub(crate) const KERNEL_FDS_LOOK_MS: i32 = 10;

impl ChildSleep {
    /// Sleeps until the change count moves, `timeout_ms` passes (-1: none), a signal comes
    /// (-EINTR) or, with kernel fds (`extra`, non-empty), one of them is ready; `efd` is the
    /// thread's eventfd (registered in `prepare_sleep`). Returns what `wait::sleep` returns.
    pub(crate) fn sleep(&self, timeout_ms: i32, extra: &mut smallvec::SmallVec<[libc::pollfd; 8]>, efd: i32) -> i32 {
        let s = self.family.shared();
        let r = if extra.is_empty() {
            let ts = libc::timespec {
                tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
                tv_nsec: ((timeout_ms.max(0) % 1000) as libc::c_long) * 1_000_000,
            };
            let tsp = if timeout_ms < 0 { std::ptr::null() } else { &ts as *const libc::timespec };
            // SAFETY: FUTEX_WAIT on an aligned u32 of the arena; `tsp` is null or points to `ts`,
            // alive across the call.
            let r = unsafe { libc::syscall(libc::SYS_futex, s.changes.as_ptr(), libc::FUTEX_WAIT, self.seen, tsp) };
            if r < 0 && crate::last_errno().0 == libc::EINTR {
                -libc::EINTR
            } else {
                0
            }
        } else {
            let base = extra.len();
            let t = match self.slot {
                Some(_) => {
                    extra.push(libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 });
                    timeout_ms
                }
                None if timeout_ms < 0 => KERNEL_FDS_LOOK_MS,
                None => timeout_ms.min(KERNEL_FDS_LOOK_MS),
            };
            // SAFETY: `extra` is our list of extra.len() pollfds, read and written by the kernel.
            let r = unsafe { real::poll(extra.as_mut_ptr(), extra.len() as libc::nfds_t, t) };
            let errno = crate::last_errno();
            extra.truncate(base);
            if let Some(i) = self.slot {
                s.fd_sleepers[i].pid.store(0, Ordering::Release);
                let mut v = 0u64;
                // SAFETY: the thread's own non-blocking eventfd; the kernel writes 8 bytes to `v`.
                unsafe { real::read(efd, (&mut v as *mut u64).cast(), 8) };
            }
            if r < 0 {
                -errno.0
            } else {
                extra.iter().filter(|p| p.revents != 0).count() as i32
            }
        };
        if let Some(m) = self.family.member() {
            s.members[m].sleeping.fetch_sub(1, Ordering::AcqRel);
        }
        s.sleepers.fetch_sub(1, Ordering::AcqRel);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: i32) -> bool {
        let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one pollfd, read and written by the kernel.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    /// nginx's master stays root and its workers become `nobody`: such a child may not take the
    /// driver's eventfd (pidfd_getfd: EPERM), so its ring goes to the bell it inherited, which
    /// the driver's sleep watches and reads back before its next sleep.
    #[test]
    fn a_ring_from_a_child_that_dropped_root_reaches_the_driver_through_the_bell() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("a_ring_from_a_child_that_dropped_root_reaches_the_driver_through_the_bell: skipped (needs root: the child drops it)");
            return;
        }
        arena::enable_family().expect("ScopedAlloc is the unit tests' allocator");
        let family = Family::new().expect("the family is made");
        // SAFETY: eventfd takes no memory.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        assert!(efd >= 0);
        let bell = family.driver_sleeps_on(efd);
        // SAFETY: the child only changes its ids, rings (no allocation) and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // SAFETY: setresgid and setresuid take integers; _exit has no preconditions.
            unsafe {
                let dropped = libc::setresgid(65534, 65534, 65534) == 0 && libc::setresuid(65534, 65534, 65534) == 0;
                if dropped {
                    family.ring();
                }
                libc::_exit(if dropped { 0 } else { 2 });
            }
        }
        let mut status = 0;
        // SAFETY: `status` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the child could not drop root: {status:#x}"
        );
        assert!(!readable(efd), "premise: a child that dropped root wrote the driver's own eventfd");
        assert!(readable(bell), "the ring of a child that dropped root was lost");
        family.driver_sleeps_on(efd);
        assert!(!readable(bell), "the driver did not read the bell back before its next sleep");
        // SAFETY: the eventfd made above.
        unsafe { real::close(efd) };
    }
}
