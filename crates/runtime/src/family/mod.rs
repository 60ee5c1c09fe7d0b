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
//! - the children's sleepers (`sleepers`): a child's thread about to sleep registers, under the
//!   family lock, on the sockets it waits for, and the driver's pass wakes only the threads
//!   registered on a socket it changed;
//! - the change count: the driver bumps it at each stack pass that changed a socket's
//!   readiness; a child's next hold of the lock finds it moved and looks again at every socket
//!   it holds (its epoll sets' ready lists and blocked calls: the driver's list of changes is
//!   the driver's), and a child's thread that could not register (no free sleeper, or nothing
//!   to register on) sleeps on it, woken by every change (the broadcast, only for those);
//! - how many processes hold each socket (Linux's file reference count at process grain): a
//!   fork adds one for every socket the parent holds, a socket passed in a message (SCM_RIGHTS)
//!   one while it is in flight, and a process that closes its last fd of a socket closes it on
//!   the shard only when no other process holds it;
//! - the process table (`members`): every child that shares the shards, by pid and start time
//!   (a recycled pid is another process), with the sockets it holds and its threads asleep, so
//!   that what a process that died without leaving (kill -9, a crash, `_exit`) held is given
//!   back: its holds dropped (a socket only it held closes, as Linux closes a dead process's
//!   fds), its sleeps forgotten. Deaths are found by a look at every member's liveness (a pidfd:
//!   exited, zombies included; the start time: not recycled) when the lock's previous holder
//!   died and, in the opener, once every [`REAP_EVERY_NS`] of its passes (`death`);
//! - the sockets in flight between the family's processes (the opener and the members), passed
//!   in messages ([`crate::passing`]).
//!
//! The opener leaving before its children hands the NIC to a keeper forked at its exit, which
//! takes the opener's place here ([`Family::keeper_took_over`]; `process::keeper`). The opener
//! killed (no exit handler, no keeper): a child that finds it gone takes its place and drives
//! the NIC (`succession`).
//!
//! This module holds what the family shares and each process's role; `role` turns a runtime
//! into a child's or an opener's at a fork, `sleepers` holds the children's registrations and
//! their wakes, `death` finds the members that died and gives back what they held,
//! `succession` finds the driver dead and makes a child the driver.

mod death;
mod role;
mod sleepers;
mod succession;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use smallvec::SmallVec;

use stack::shard::SocketId;

use crate::family_lock::{FamilyGuard, FamilyLock};
use crate::family_parker::{add_one, FamilyParker, ASLEEP, WOKEN};
use crate::real;

/// Where the process that drives the NIC for the family of the opener `pid` is named for the
/// cleanup helper (`pronghorn reap`) and `pronghorn doctor`, beside the EAL's directory (which
/// keeps the opener's name: the EAL of a keeper, or of a child that took the NIC over, is the
/// opener's, and removes it when it closes the port). The opener names itself there as the
/// family starts, its keeper or successor then names itself.
pub fn successor_file(pid: u32) -> String {
    format!("{}.keeper", nic::dpdk::runtime_dir_of(pid))
}

/// What the processes of the family share besides the shards.
pub(crate) struct Family {
    lock: FamilyLock,
    doorbell: FamilyParker,
    /// The bell: an eventfd of the opener's (close-on-exec) that its children inherit.
    bell: i32,
    /// In the family arena (made in a scope of it, changed only in one, under the lock).
    shared: *mut Shared,
    /// The children this process forked that share its shards (its own heap: the opener's).
    children: std::sync::Mutex<Children>,
    /// Processes a wake found gone (ESRCH) after the locks: their sleepers are forgotten at the
    /// driver's next hold (its own heap).
    gone: std::sync::Mutex<Vec<libc::pid_t>>,
    any_gone: AtomicBool,
    /// This process's slot in the process table ([`NOT_A_MEMBER`]: the opener, or a child the
    /// full table left out). Each process's own: fork copies it, the child then sets its own.
    me: AtomicUsize,
    /// When the opener looks for dead members next (its clock, ns).
    next_reap_ns: AtomicU64,
    /// When a child looks next whether the process that drives the NIC still runs (its clock,
    /// ns; `succession`).
    next_driver_look_ns: AtomicU64,
    /// This process's pid (fork copies it, the child then sets its own).
    pid: AtomicI32,
}

/// The part of the family's state that lives in the arena.
struct Shared {
    /// Stack passes of the driver that changed some socket's readiness (wraps).
    changes: AtomicU32,
    /// The bell was written since the driver last read it back.
    bell_rung: AtomicBool,
    /// Children's threads asleep (or about to sleep) on `changes`: those that could not
    /// register on their sockets, woken by every change.
    broadcast_sleepers: AtomicU32,
    /// Children's threads asleep on sockets (`sleepers`)...
    sleepers: [Sleeper; SLEEPERS],
    /// ...and which of them wait on each socket (changed only under the family lock).
    waits: Waits,
    /// Wakes the driver sent to children's threads (a futex wake or an eventfd write each).
    wakes: AtomicU64,
    /// Wakes after which the thread found nothing and slept again.
    wakes_idle: AtomicU64,
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
    /// `passing`'s table of the sockets passed in messages and not yet received, made in the
    /// arena by the family's first pass (null until then; set with the family lock held).
    in_flight: AtomicPtr<()>,
    /// The opener's pid (a process a socket may be passed to, with the members; the process
    /// that drives the NIC: the opener, its keeper or a child that took over from it) and its
    /// start time (0: unknown), so that its death is found (`succession`).
    opener: AtomicI32,
    opener_start: AtomicU64,
    /// The process that opened the NIC, whose name the EAL's directory keeps whoever drives
    /// it now ([`successor_file`]).
    eal_pid: AtomicI32,
}

/// What the stats show of the family (`pronghorn stat`, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FamilyStats {
    /// Members found dead (they ended without the runtime's exit) and given back.
    pub dead_processes: u64,
    /// Times the family lock was found with its holder dead.
    pub dead_lock_holders: u64,
    /// Of those, the holders that died inside a call on the shared stack (mid-update).
    pub dead_mid_update: u64,
    /// Children in the process table now.
    pub members: u64,
    /// Children's threads registered asleep on their sockets now.
    pub sleepers: u64,
    /// Children's threads counted asleep (or about to sleep) on the change count: those that
    /// could not register, woken by every change.
    pub broadcast_sleepers: u64,
    /// Wakes the driver sent to children's threads, and of them those that found nothing.
    pub wakes: u64,
    pub wakes_idle: u64,
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
    /// Its threads counted in `broadcast_sleepers` (about to sleep or asleep on the change count).
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

// The children's sleepers (their registrations and wakes: `sleepers`).

/// How many children's threads can sleep registered on their sockets at once; the others sleep
/// on the change count (the broadcast).
const SLEEPERS: usize = 1024;

/// A child's thread asleep on sockets (in the arena).
#[derive(Default)]
pub(crate) struct Sleeper {
    /// The thread's process (0: a free sleeper).
    pid: AtomicI32,
    /// The thread's eventfd when it sleeps in poll(2) (-1: on `word`).
    efd: AtomicI32,
    /// [`IDLE`], [`WOKEN`] or [`ASLEEP`] (in the kernel, on the futex or in poll(2)).
    word: AtomicU32,
}

impl Sleeper {
    /// A wake from the thread's own process (a sibling thread's call changed what it waits for:
    /// an epoll_ctl that adds a ready fd, which the driver's pass never sees), marked with the
    /// locks held, while the sleeper is certainly the thread's (it frees it under them):
    /// whether it is asleep in the kernel, so that [`Sleeper::wake_asleep`] is owed after the
    /// locks (`wait::owe_wake`).
    pub(crate) fn mark_woken(&self) -> bool {
        self.word.swap(WOKEN, Ordering::AcqRel) == ASLEEP
    }

    /// Sends the wake [`Sleeper::mark_woken`] found owed (after the locks). `own_efd`: the
    /// thread's eventfd, which it registered here if it sleeps in poll(2). If the thread woke and
    /// the sleeper was taken again meanwhile, the other thread gets at most a spurious futex
    /// wake (its word is left alone), and the eventfd written is the woken thread's own.
    pub(crate) fn wake_asleep(&self, own_efd: i32) {
        if self.efd.load(Ordering::Acquire) >= 0 {
            add_one(own_efd);
        } else {
            // SAFETY: FUTEX_WAKE on an aligned u32 of the arena, mapped for the process's life.
            unsafe { libc::syscall(libc::SYS_futex, self.word.as_ptr(), libc::FUTEX_WAKE, 1) };
        }
    }
}

/// The sleepers each socket has (family lock).
type Waits = HashMap<SocketId, SmallVec<[u16; 2]>>;

fn new_sleepers() -> [Sleeper; SLEEPERS] {
    std::array::from_fn(|_| Sleeper { efd: AtomicI32::new(-1), ..Sleeper::default() })
}

/// A wake the driver owes a child's thread asleep in the kernel, sent after the locks.
#[derive(Clone, Copy)]
pub(crate) struct OwedWake {
    slot: u16,
    pid: i32,
    /// -1: the thread sleeps on its word's futex.
    efd: i32,
}

/// The wakes one hold of the driver owes (most passes wake one or two threads).
pub(crate) type OwedWakes = SmallVec<[OwedWake; 4]>;

/// A child's thread about to sleep (`wait::Sleep`).
pub(crate) struct ChildSleep {
    family: &'static Family,
    how: How,
}

enum How {
    /// Registered as sleeper `slot` on the sockets `ids`.
    Registered { slot: u16, ids: SmallVec<[SocketId; 1]> },
    /// On the change count from `seen`: no free sleeper, or no socket to wait on.
    Count { seen: u32 },
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
                broadcast_sleepers: AtomicU32::new(0),
                sleepers: new_sleepers(),
                waits: HashMap::new(),
                wakes: AtomicU64::new(0),
                wakes_idle: AtomicU64::new(0),
                holds: Holds::default(),
                members: std::array::from_fn(|_| Member::default()),
                holder_died: AtomicBool::new(false),
                holder_pid: AtomicI32::new(0),
                dead_processes: AtomicU64::new(0),
                dead_lock_holders: AtomicU64::new(0),
                dead_mid_update: AtomicU64::new(0),
                // SAFETY: getpid has no preconditions.
                opener: AtomicI32::new(unsafe { libc::getpid() }),
                // SAFETY: getpid has no preconditions.
                opener_start: AtomicU64::new(crate::liveness::start_time(unsafe { libc::getpid() }).unwrap_or(0)),
                // SAFETY: getpid has no preconditions.
                eal_pid: AtomicI32::new(unsafe { libc::getpid() }),
                in_flight: AtomicPtr::new(std::ptr::null_mut()),
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
            gone: Default::default(),
            any_gone: AtomicBool::new(false),
            me: AtomicUsize::new(NOT_A_MEMBER),
            next_reap_ns: AtomicU64::new(0),
            next_driver_look_ns: AtomicU64::new(0),
            // SAFETY: getpid has no preconditions.
            pid: AtomicI32::new(unsafe { libc::getpid() }),
        })))
    }

    /// Whether process `pid` is of the family (the opener or a member) and runs: a socket may
    /// be passed to it.
    pub(crate) fn has_member(&self, pid: libc::pid_t) -> bool {
        let s = self.shared();
        pid > 0
            && crate::liveness::runs(pid)
            && (s.opener.load(Ordering::Acquire) == pid
                || s.members.iter().any(|m| m.pid.load(Ordering::Acquire) == pid))
    }

    /// `passing`'s table of the sockets in flight (an arena block; null until its first pass).
    pub(crate) fn in_flight(&self) -> &AtomicPtr<()> {
        &self.shared().in_flight
    }

    fn shared(&self) -> &Shared {
        // SAFETY: `shared` is the arena block `new` made, never freed.
        unsafe { &*self.shared }
    }

    /// This process forked `pid`, a child that shares its shards.
    pub(crate) fn forked(&self, pid: libc::pid_t) {
        let mut children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        // Those gone (reaped or zombies) need no watching. Looking is a system call per child,
        // so it is done when the list has doubled since the last look, not at every fork (a
        // server with a process per connection forks for each one): O(1) a fork, amortized,
        // and the list at most twice as long as it was after the last look.
        if children.pids.len() >= children.prune_at {
            children.pids.retain(|&c| alive(c));
            children.prune_at = PRUNE_CHILDREN_FROM.max(2 * children.pids.len());
        }
        children.pids.push(pid);
    }

    /// The list of processes found gone, held across a fork about to run in this thread: a
    /// waker adds to it with no lock of the runtime held (`wake_sleepers`), and a child must
    /// not inherit it locked by a thread it does not have.
    pub(crate) fn hold_gone_for_fork(&'static self) -> std::sync::MutexGuard<'static, Vec<libc::pid_t>> {
        self.gone.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The children this process forked that still live.
    pub(crate) fn children_alive(&self) -> Vec<libc::pid_t> {
        let children = self.children.lock().unwrap_or_else(|p| p.into_inner());
        children.pids.iter().copied().filter(|&c| alive(c)).collect()
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
                    crate::liveness::wait_exited(s.holder_pid.load(Ordering::Relaxed));
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
    pub(crate) fn member(&self) -> Option<usize> {
        Some(self.me.load(Ordering::Relaxed)).filter(|&m| m != NOT_A_MEMBER)
    }

    /// Whether every slot of the process table is taken (family lock held).
    pub(crate) fn table_full(&self) -> bool {
        self.shared().members.iter().all(|m| m.pid.load(Ordering::Acquire) != 0)
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
        member.start.store(crate::liveness::start_time(pid).unwrap_or(0), Ordering::Relaxed);
        member.pid.store(pid, Ordering::Release);
    }

    /// In the child just forked: `slot` is its own from now on.
    pub(crate) fn became(&self, slot: Option<usize>) {
        self.me.store(slot.unwrap_or(NOT_A_MEMBER), Ordering::Relaxed);
        // SAFETY: getpid has no preconditions.
        self.pid.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    }

    /// The sockets in `ids` are passed in a message (family lock held): each has one more
    /// holder while it is in flight, which the receiver's claim makes its own, or which
    /// [`Family::drop_in_flight`] drops.
    pub(crate) fn hold_in_flight(&self, ids: &[SocketId]) {
        self.with_holds(|holds| {
            for &id in ids {
                *holds.counts.entry(id).or_insert(1) += 1;
            }
        });
    }

    /// A message's hold on `id` goes (nobody will claim it, or its receiver holds the socket
    /// already; family lock held): whether no process holds it any more, so that it closes.
    pub(crate) fn drop_in_flight(&self, id: SocketId) -> bool {
        self.with_holds(|holds| holds.drop_one(id))
    }

    /// Whether a process of the family besides the opener still runs: a member of the process
    /// table (a fork in progress counts; a child the full table left out does not), in any
    /// process of the family (the keeper's children are not its own: no waitid).
    pub(crate) fn members_alive(&self) -> bool {
        self.shared().members.iter().any(|m| match m.pid.load(Ordering::Acquire) {
            0 => false,
            FORKING => true,
            pid => !crate::liveness::gone(pid, m.start.load(Ordering::Relaxed)),
        })
    }

    /// In the keeper just forked from the opener at its exit: this process is the family's
    /// opener from now on (its pid is the one a socket may be passed to).
    pub(crate) fn keeper_took_over(&self) {
        let me = std::process::id() as libc::pid_t;
        self.pid.store(me, Ordering::Relaxed);
        self.drives_from_now(me);
    }

    /// The process that opened the NIC (the name of the EAL's directory, and of the file that
    /// names the family's driver for the cleanup helper: [`successor_file`]).
    pub(crate) fn eal_pid(&self) -> u32 {
        self.shared().eal_pid.load(Ordering::Relaxed) as u32
    }

    /// Names the process that drives the NIC now (this one) in [`successor_file`], for the
    /// cleanup helper and `pronghorn doctor` (only root may write there: only root has a
    /// cleanup helper).
    pub(crate) fn name_driver(&self) -> std::io::Result<()> {
        std::fs::write(successor_file(self.eal_pid()), std::process::id().to_string())
    }

    /// This process, which drove the NIC, closed its port: the file that named it goes.
    pub(crate) fn unname_driver(&self) {
        let file = successor_file(self.eal_pid());
        if std::fs::read_to_string(&file).is_ok_and(|k| k.trim() == std::process::id().to_string()) {
            let _ = std::fs::remove_file(file);
        }
    }

    /// Process `me` drives the NIC for the family from now on.
    fn drives_from_now(&self, me: libc::pid_t) {
        let s = self.shared();
        s.opener_start.store(crate::liveness::start_time(me).unwrap_or(0), Ordering::Relaxed);
        s.opener.store(me, Ordering::Release);
    }

    /// The opener execs another program (after the drain): no socket may be passed to it.
    pub(crate) fn opener_left(&self) {
        self.shared().opener.store(0, Ordering::Release);
    }

    /// This process holds `id` from now on (its first fd of it; family lock held).
    pub(crate) fn hold(&self, id: SocketId) {
        if let Some(m) = self.member() {
            self.with_holds(|holds| holds.by_member.entry(m).or_default().insert(id));
        }
    }

    /// Whether a process besides this one holds `id` (family lock held): its last close here
    /// leaves it open.
    pub(crate) fn held_by_others(&self, id: SocketId) -> bool {
        self.with_holds(|holds| holds.counts.get(&id).is_some_and(|&n| n >= 2))
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

    /// The change count now (with the family lock held: the value a sleep starts from).
    pub(crate) fn changes(&self) -> u32 {
        self.shared().changes.load(Ordering::Acquire)
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
/// The children a process forked, as `Family::forked` keeps them: pruned of those gone when
/// the list reaches `prune_at`.
#[derive(Default)]
struct Children {
    pids: Vec<libc::pid_t>,
    prune_at: usize,
}

/// The shortest list of children `Family::forked` prunes.
const PRUNE_CHILDREN_FROM: usize = 16;

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

    /// A server with a process per connection forks for each one: the list of children the
    /// opener keeps (for its exit's message) stays about as long as the children alive, and
    /// keeps every one of them.
    #[test]
    fn the_children_list_stays_as_long_as_the_children_alive_and_names_them() {
        arena::enable_family().expect("ScopedAlloc is the unit tests' allocator");
        let family = Family::new().expect("the family is made");
        let spawn = || {
            // SAFETY: the child blocks in pause() until killed, or exits at once; no allocation.
            let pid = unsafe { libc::fork() };
            assert!(pid >= 0);
            pid
        };
        // A child that lives through the whole test.
        let lives = spawn();
        if lives == 0 {
            // SAFETY: alarm, pause and _exit have no preconditions (the alarm ends the child
            // should the test fail before it kills it).
            unsafe {
                libc::alarm(60);
                libc::pause();
                libc::_exit(0);
            }
        }
        family.forked(lives);
        for _ in 0..500 {
            let pid = spawn();
            if pid == 0 {
                // SAFETY: _exit has no preconditions.
                unsafe { libc::_exit(0) };
            }
            let mut status = 0;
            // SAFETY: `status` is a writable int.
            assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
            family.forked(pid);
        }
        let listed = family.children.lock().unwrap().pids.len();
        assert!(listed <= 2 * PRUNE_CHILDREN_FROM, "{listed} pids listed for 1 child alive");
        assert_eq!(family.children_alive(), vec![lives]);
        // SAFETY: the child forked above; waitpid reaps it.
        unsafe {
            libc::kill(lives, libc::SIGKILL);
            libc::waitpid(lives, std::ptr::null_mut(), 0);
        }
        assert!(family.children_alive().is_empty());
    }
}
