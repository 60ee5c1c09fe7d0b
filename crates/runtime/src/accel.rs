//! One accelerated process's runtime state and its lock: the shards (started on first use, or
//! before the process gives up root), the fd and socket tables, routing, and the stack pass that
//! turns the shards' readiness changes into wakeups.
//!
//! Everything here is generic over the NIC so that the in-memory pair can exercise the threading
//! and readiness rules in unit tests; the process-wide instance uses DPDK.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, OnceLock};

use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::lane::TxSender;
use nic::Nic;
use stack::shard::{Readiness, Shard, SocketId};

use crate::family::{Family, Sharing};
use crate::fdtable::{Fd, FdTable, SockTable};
use crate::lockstat::{Held, StackLock};
use crate::shards::ShardSet;
use crate::sockopt::BufferLimits;
use crate::urgent::SignalOwner;
use crate::wait::{self, WaitState};
use crate::{real, Errno, FORKED, INSIDE};

/// Opens the NIC when the shards start: one queue per shard (`runtime.shards`).
pub(crate) type Opener<N> = Box<dyn FnOnce(&Config) -> Result<Vec<N>, String>>;

/// Checks, without opening it, what commonly keeps the NIC from opening (bind says it at once).
pub(crate) type Precheck = fn(&Config) -> Result<(), String>;

/// The runtime of one process (or of one test): its state behind one lock.
pub struct Accel<N: Nic + 'static> {
    state: StackLock<Runtime<N>>,
    /// The shards' tx queues, detached from them when they start (`nic::lane`): a hold of the
    /// lock stages frames, and the thread that releases it sends them (`send_lanes`), so the
    /// burst and its kick (on a veth, the peer's receive) are not lock hold time.
    lanes: OnceLock<Vec<Arc<dyn TxSender>>>,
    /// Set (under the lock) when a read or write of a non-blocking socket left output queued
    /// in a shard for the program's next wait (inline: an event loop's replies leave in one
    /// burst at its poll or epoll_wait); cleared when a flush leaves nothing queued. A wait the
    /// kernel serves alone (poll, ppoll, select or epoll_wait of kernel fds only, which take
    /// no lock) reads it without the lock and sends that output first
    /// ([`Accel::flush_held_output`]): the program may wait there for what the peer answers.
    output_held: AtomicBool,
}

/// Counters of the per-socket routing decisions (principle 4: fallback is visible).
#[derive(Clone, Copy, Debug, Default)]
pub struct RoutingStats {
    pub accelerated_listen: u64,
    pub accelerated_connect: u64,
    pub accepted: u64,
    pub kernel_bind: u64,
    pub kernel_connect: u64,
    pub init_failed: u64,
    /// UDP sockets on the shard (bound to our address, or connected or sent into its subnet).
    pub accelerated_udp: u64,
    /// UDP sockets left with the kernel (bound or sent elsewhere).
    pub kernel_udp: u64,
    /// Connections accepted from the kernel socket beside an accelerated listener: local
    /// clients on a shared interface (`beside`).
    pub kernel_accepted: u64,
}

pub(crate) struct Runtime<N: Nic + 'static> {
    pub cfg: Config,
    pub shards: ShardSet<N>,
    open: Option<Opener<N>>,
    pub precheck: Option<Precheck>,
    pub init_error: Option<String>,
    clock: MonotonicClock,
    pub fds: FdTable,
    pub socks: SockTable,
    /// Addresses held by accelerated bound or listening sockets (bind: EADDRINUSE).
    pub bound: HashMap<SocketAddr, Binding>,
    /// Per shard: the fd that is readable when frames wait on its queue.
    pub rx_fds: Vec<Option<i32>>,
    /// fds in `Fd::Listening` (listen() before the NIC opened).
    pub deferred_listeners: usize,
    pub routing: RoutingStats,
    /// The process-wide runtime's (DPDK's, not a test's own): it starts the cleanup helper when
    /// the NIC opens.
    pub starts_reaper: bool,
    pub wait: WaitState,
    /// This runtime, for the stack thread it may start.
    pub me: Option<&'static Accel<N>>,
    changed: Vec<SocketId>,
    /// Wakes owed by the current hold of the lock, sent once it is released (`wait::send_wakes`).
    pub owed_wakes: wait::OwedWakes,
    /// The family's sleeping children are owed wakes by the current hold (the driver's pass
    /// changed sockets they wait on; `true`: the threads on the change count too): sent once
    /// the locks are released (`Family::wake_sleepers`), to the threads in `family_owed`.
    family_wake: Option<(&'static crate::family::Family, bool)>,
    family_owed: crate::family::OwedWakes,
    /// Where the stats region and control socket go when the NIC opens (`None`: nowhere).
    pub observe_dir: Option<std::path::PathBuf>,
    pub observer: Option<crate::observe::Observer>,
    /// The host's socket-buffer limits, for SO_RCVBUF/SO_SNDBUF.
    pub limits: BufferLimits,
    /// SIGURGs owed (new urgent data on a socket with an owner), sent once the lock is released.
    pub sigurg: Vec<SignalOwner>,
    /// Connections whose peer marked new urgent data, from the shards (scratch of `dispatch`).
    pub urgent: Vec<SocketId>,
    /// Whether the shards are shared with a fork family, and this process's part in it.
    pub sharing: Sharing,
    /// A child: the family's change count its sockets' waiters were last told of.
    pub family_seen: u32,
}

// SAFETY: the shard (DPDK port, mbufs, `Rc`s inside) is only ever touched with the runtime's
// mutex held, so no two threads use it at once; DPDK's queue functions need serialisation, not a
// particular thread (non-EAL threads use the mempool without a per-lcore cache). A tx queue
// detached into a lane (`Accel::lanes`) is no longer the shard's: the lane serialises it.
unsafe impl<N: Nic + 'static> Send for Runtime<N> {}

impl<N: Nic + 'static> Accel<N> {
    /// A runtime that opens its NIC with `open` when the first accelerated socket needs it.
    pub(crate) fn new(cfg: Config, open: Opener<N>) -> Accel<N> {
        let wait = WaitState::new(&cfg.runtime);
        Accel {
            state: StackLock::new(Runtime {
                cfg,
                shards: ShardSet::default(),
                open: Some(open),
                precheck: None,
                init_error: None,
                clock: MonotonicClock::new(),
                fds: FdTable::default(),
                socks: SockTable::default(),
                bound: HashMap::new(),
                rx_fds: Vec::new(),
                deferred_listeners: 0,
                routing: RoutingStats::default(),
                starts_reaper: false,
                wait,
                me: None,
                changed: Vec::new(),
                owed_wakes: wait::OwedWakes::new(),
                family_wake: None,
                family_owed: Default::default(),
                observe_dir: None,
                observer: None,
                limits: BufferLimits::read(),
                sigurg: Vec::new(),
                urgent: Vec::new(),
                sharing: Sharing::Alone,
                family_seen: 0,
            }),
            lanes: OnceLock::new(),
            output_held: AtomicBool::new(false),
        }
    }

    /// Makes the runtime `'static` (the process-wide one, or a test's, leaked).
    pub(crate) fn leak(self) -> &'static Accel<N> {
        let me: &'static Accel<N> = Box::leak(Box::new(self));
        me.lock().me = Some(me);
        me
    }

    fn lock(&self) -> Held<'_, Runtime<N>> {
        self.state.lock()
    }

    /// The lock's wait and hold histograms (`observe` publishes them).
    pub(crate) fn lock_stats(&self) -> &crate::lockstat::LockStats {
        self.state.stats()
    }

    /// Runs `f` with the lock held and `INSIDE` set (our own calls go to the kernel). Wakeups for
    /// whatever `f` changed are worked out under the lock and sent right after it is released
    /// (`wait::send_wakes`). `None` in a forked child.
    ///
    /// `INSIDE` is set before the locks are taken: a signal handler that runs on this thread
    /// while it waits for them or holds them, and makes a socket call, goes to the kernel (on
    /// an accelerated socket's placeholder: ENOTSOCK), as one that runs inside `f` does. Were
    /// it let in, it would take again the runtime lock its own thread holds and never return
    /// (PostgreSQL's backends send their goodbye from their SIGQUIT handler: one caught while
    /// it waited for the family lock hung the whole family).
    pub(crate) fn with<T>(&self, f: impl FnOnce(&mut Runtime<N>) -> T) -> Option<T> {
        if FORKED.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        let inside = Inside::enter();
        let mut rt = self.lock();
        let family = rt.sharing.lock();
        rt.after_family_lock();
        rt.wait.holds += 1;
        let r = f(&mut rt);
        rt.dispatch();
        let sigurg = std::mem::take(&mut rt.sigurg);
        let wakes = rt.take_wakes();
        let family_wake = rt.family_wake.take();
        let family_owed = std::mem::take(&mut rt.family_owed);
        drop(family);
        drop(rt);
        let more = self.send_lanes();
        drop(inside);
        wait::send_wakes(wakes);
        if let Some((f, broadcast)) = family_wake {
            f.wake_sleepers(&family_owed, broadcast);
        }
        if more {
            self.finish_lanes();
        }
        // After the lock: a SIGURG handler typically reads the urgent byte, with our calls.
        for owner in sigurg {
            owner.signal();
        }
        Some(r)
    }

    /// Like `with`, but waits for the lock a bounded time (exit handlers: a thread stopped
    /// while holding it must not hang the exit).
    pub(crate) fn try_with<T>(&self, f: impl FnOnce(&mut Runtime<N>) -> T) -> Option<T> {
        let inside = Inside::enter();
        let mut tries = 0;
        let mut rt = loop {
            match self.state.try_lock() {
                Some(g) => break g,
                None if tries < 500 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                None => return None,
            }
        };
        let family = rt.sharing.lock();
        rt.after_family_lock();
        rt.wait.holds += 1;
        let r = f(&mut rt);
        let wakes = rt.take_wakes();
        let family_wake = rt.family_wake.take();
        let family_owed = std::mem::take(&mut rt.family_owed);
        drop(family);
        drop(rt);
        let more = self.send_lanes();
        drop(inside);
        wait::send_wakes(wakes);
        if let Some((f, broadcast)) = family_wake {
            f.wake_sleepers(&family_owed, broadcast);
        }
        if more {
            self.finish_lanes();
        }
        Some(r)
    }

    /// Before a wait the kernel serves alone: sends what reads and writes of non-blocking
    /// sockets left queued (`output_held`), with one hold of the lock; nothing when none did.
    pub(crate) fn flush_held_output(&self) {
        if self.output_held.load(Relaxed) {
            self.with(|rt| rt.flush_shard());
        }
    }

    /// After a call that did not flush (a non-blocking socket's, inline): marks the output it
    /// left, if any, for [`Accel::flush_held_output`].
    pub(crate) fn note_held_output(&self, rt: &Runtime<N>) {
        if !self.output_held.load(Relaxed) && rt.shards.all().iter().any(|s| s.has_output()) {
            self.output_held.store(true, Relaxed);
        }
    }

    /// Sends the frames the hold just ended staged (and any another thread's send left), one
    /// round per lane, with no lock held; `INSIDE` still set, as the NIC's own system calls
    /// (the tx kick) are the kernel's. The frames go before the wakes: the peer's answer waits
    /// on them. True when other threads staged frames during a round and left them to this
    /// one ([`Accel::finish_lanes`], after the wakes, which must not wait for them).
    fn send_lanes(&self) -> bool {
        let mut more = false;
        for lane in self.lanes() {
            if lane.is_waiting() {
                more |= lane.send_once();
            }
        }
        more
    }

    /// The shards' detached tx queues (none before the shards start, or when shared).
    fn lanes(&self) -> &[Arc<dyn TxSender>] {
        self.lanes.get().map_or(&[], Vec::as_slice)
    }

    /// Sends what other threads left to this one until they stop staging (`TxSender::send`).
    fn finish_lanes(&self) {
        let _inside = Inside::enter();
        for lane in self.lanes() {
            if lane.is_waiting() {
                lane.send();
            }
        }
    }

    /// The runtime's lock: threads blocked on it now, and the waits for it so far (tests; the
    /// stats region has the histograms).
    pub fn lock_waits(&self) -> (u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let s = self.lock_stats();
        (s.waiting.load(Relaxed), s.wait.iter().map(|b| b.load(Relaxed)).sum())
    }

    /// How many children's threads of the family are registered asleep on their sockets now
    /// (`None`: the shards are not shared; the gauge `family_sleepers` of `pronghorn stat`).
    pub fn family_sleepers(&self) -> Option<u64> {
        self.with(|rt| rt.sharing.family().map(|f| f.sleepers_in_use())).flatten()
    }

    /// Holds of the runtime's lock so far (`Accel::with`; tests).
    pub fn lock_holds(&self) -> u64 {
        self.lock().wait.holds
    }

    /// The waiting counters (tests, `pronghorn stat` later).
    pub fn wait_stats(&self) -> wait::WaitStats {
        self.lock().wait.stats
    }

    /// The family's figures (`None`: this runtime shares no shards).
    pub fn family_stats(&self) -> Option<crate::FamilyStats> {
        self.lock().sharing.family().map(|f| f.stats(true))
    }

    /// Whether this process has a slot in its family's process table (tests: a child forked
    /// when the table had no room shares the stack untracked).
    pub fn family_member(&self) -> bool {
        self.lock().sharing.family().is_some_and(|f| f.member().is_some())
    }

    /// Runs `f` with the runtime's locks held, the family's included (tests and debugging: a
    /// process killed inside `f` dies holding the family lock, as one killed inside a call).
    pub fn with_locks_held(&self, f: impl FnOnce()) {
        self.with(|_| f());
    }

    /// Whether the NIC is open (the shard serving).
    pub fn serving(&self) -> bool {
        self.lock().shards.is_open()
    }

    /// Application threads asleep in the runtime right now (a wait on an epoll set with no
    /// accelerated member is not counted: [`Self::epoll_sleepers`]).
    pub fn parked(&self) -> u32 {
        self.lock().wait.parked
    }

    /// Who holds the driver role right now (inline mode).
    pub fn driver_role(&self) -> crate::DriverRole {
        let rt = self.lock();
        match (rt.wait.driver, rt.wait.accept_loop.drives()) {
            (false, _) => crate::DriverRole::Nobody,
            (true, true) => crate::DriverRole::AcceptLoop,
            (true, false) => crate::DriverRole::Other,
        }
    }

    /// Threads asleep in epoll_wait on the set `epfd` right now (0 for an fd that is not one).
    pub fn epoll_sleepers(&self, epfd: i32) -> usize {
        self.with(|rt| rt.fds.epoll_mut(epfd).map_or(0, |set| set.sleepers())).unwrap_or(0)
    }

    /// Runs `f` with the runtime's lock held: tests whose NICs share state with the test itself
    /// (a peer stack inside the NIC) touch that state only so.
    pub fn locked<T>(&self, f: impl FnOnce() -> T) -> T {
        let _held = self.lock();
        f()
    }

    /// Each shard's TCP counters, in shard order (empty before the NIC opens).
    pub fn shard_stats(&self) -> Vec<stack::shard::ShardStats> {
        self.lock().shards.all().iter().map(|s| *s.stats()).collect()
    }

    pub fn routing_stats(&self) -> RoutingStats {
        self.lock().routing
    }
}

/// `INSIDE` set for as long as it lives, restored when dropped: also when a panic unwinds out of
/// the runtime (`shield`), or the thread's later calls would all go to the kernel.
struct Inside {
    outer: bool,
}

impl Inside {
    fn enter() -> Inside {
        Inside { outer: INSIDE.with(|i| i.replace(true)) }
    }
}

impl Drop for Inside {
    fn drop(&mut self) {
        let outer = self.outer;
        let _ = INSIDE.try_with(|i| i.set(outer));
    }
}

/// The sockets bound to one address: one, or several that all set SO_REUSEPORT.
#[derive(Clone, Copy)]
pub(crate) struct Binding {
    holders: u32,
    reuseport: bool,
}

impl<N: Nic + 'static> Runtime<N> {
    /// bind(): `addr` for one more socket (port 0: the shard picks a free port at listen).
    pub(crate) fn claim_addr(&mut self, addr: SocketAddr, reuseport: bool) -> Result<(), Errno> {
        if addr.port() == 0 {
            return Ok(());
        }
        match self.bound.get_mut(&addr) {
            None => {
                self.bound.insert(addr, Binding { holders: 1, reuseport });
                if self.cfg.nic.share {
                    crate::shared::hold(nic::xdp::Transport::Tcp, addr.port());
                }
                Ok(())
            }
            Some(b) if b.reuseport && reuseport => {
                b.holders += 1;
                Ok(())
            }
            Some(_) => Err(Errno::EADDRINUSE),
        }
    }

    /// A socket bound to `addr` is gone.
    pub(crate) fn release_addr(&mut self, addr: SocketAddr) {
        if let Some(b) = self.bound.get_mut(&addr) {
            b.holders -= 1;
            if b.holders == 0 {
                self.bound.remove(&addr);
                if self.cfg.nic.share {
                    crate::shared::release(nic::xdp::Transport::Tcp, addr.port());
                }
            }
        }
    }
}

/// The runtime's lock, held across fork() so that the child never inherits it held by a thread
/// it does not have. With the shards shared, the child's holds of the sockets are counted
/// before the fork (`family`), as the kernel counts the file references a fork copies.
pub struct ForkHold<'a, N: Nic + 'static> {
    rt: Held<'a, Runtime<N>>,
    /// The sockets the child will hold too, counted in the family (taken back if fork fails).
    shared: Vec<SocketId>,
    /// The child's slot in the family's process table.
    member: Option<usize>,
    /// The process-local locks that threads take outside the runtime's lock (the family's
    /// wakes), held across the fork so that the child never inherits one taken.
    fork_locals: Option<ForkLocals>,
}

/// See [`ForkHold::fork_locals`]; released first thing after the fork, in parent and child.
struct ForkLocals {
    _spawn_actions: crate::process::spawn::SpawnActionsForkHold,
    _remote_fds: crate::family_parker::RemoteFdsForkHold,
    _gone: Option<std::sync::MutexGuard<'static, Vec<libc::pid_t>>>,
}

impl<N: Nic + 'static> Accel<N> {
    /// fork() is about to run in this thread.
    pub fn fork_prepare(&self) -> ForkHold<'_, N> {
        let mut rt = self.lock();
        let mut shared = Vec::new();
        let mut member = None;
        if let Some(f) = rt.sharing.family() {
            shared = rt.socks.held();
            let _family = rt.sharing.lock();
            rt.room_for_a_child(f);
            member = f.share(&shared);
        }
        let gone = rt.sharing.family().map(|f| f.hold_gone_for_fork());
        let fork_locals = Some(ForkLocals {
            _spawn_actions: crate::process::spawn::hold_for_fork(),
            _remote_fds: crate::family_parker::hold_for_fork(),
            _gone: gone,
        });
        ForkHold { rt, shared, member, fork_locals }
    }
}

impl<N: Nic + 'static> ForkHold<'_, N> {
    /// In the child: whether it keeps the runtime it inherited. It does when the NIC was never
    /// opened: its sockets (deferred listeners above all) are then its own, and it opens a NIC
    /// queue of its own when it first waits; and when the shards are shared with the family
    /// (`share = "family"`) and the parent stays to drive the NIC: it then works on them under
    /// the family lock and never drives. Otherwise it cannot share the parent's port; its
    /// inherited accelerated sockets fail (`forked_child_socket`).
    pub fn child_keeps(&self) -> bool {
        self.keeps(true)
    }

    /// [`ForkHold::child_keeps`], where `shares` says whether the child may share the shards.
    fn keeps(&self, shares: bool) -> bool {
        (!self.rt.shards.is_open() && self.rt.open.is_some()) || (shares && self.rt.sharing.family().is_some())
    }

    /// After fork() returned `pid` (0: in the child; negative: it failed): in a child that
    /// shares the shards, the runtime becomes a child's (the parent's threads it has no more are
    /// forgotten, it never drives); after a failed fork the counts go back. Returns, in the
    /// child, whether it keeps the runtime ([`ForkHold::child_keeps`]).
    pub fn forked(self, pid: libc::pid_t) -> bool {
        self.done(pid, true)
    }

    /// After daemon(3) (`child`: in the new process): the parent exits at once, so nobody
    /// would drive the NIC for the child: it does not share the shards.
    pub fn daemonized(self, child: bool) -> bool {
        self.done(if child { 0 } else { 1 }, false)
    }

    fn done(mut self, pid: libc::pid_t, shares: bool) -> bool {
        drop(self.fork_locals.take());
        match (pid, self.rt.sharing.family()) {
            (0, Some(f)) if shares => self.rt.become_child(f, self.member),
            (1.., Some(f)) if shares => self.rt.drive_for_children(f, pid),
            (..=0, Some(f)) => {
                let _family = self.rt.sharing.lock();
                f.unshare(&self.shared, self.member);
            }
            _ => {}
        }
        pid == 0 && self.keeps(shares)
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// At the opener's exit, with members of its family alive (`process::keeper`): forks the
    /// keeper, which goes on driving the NIC for them. The runtime's lock and the process-local
    /// locks that threads take outside it are held across the fork, as for a fork of the
    /// program's ([`Accel::fork_prepare`]), so that the keeper never inherits one taken by a
    /// thread it does not have; the family lock is not (a robust mutex records its owner's
    /// thread, and nothing in the arena needs a pause). No hold changes hands: the keeper is the
    /// opener continued, and the opener gives up the shards unclosed. Returns fork's result
    /// (0 in the keeper, which is then the family's opener), or `None` without a family.
    pub(crate) fn fork_keeper(&self) -> Option<libc::pid_t> {
        let mut rt = self.lock();
        let f = rt.sharing.family()?;
        let locals = ForkLocals {
            _spawn_actions: crate::process::spawn::hold_for_fork(),
            _remote_fds: crate::family_parker::hold_for_fork(),
            _gone: Some(f.hold_gone_for_fork()),
        };
        // SAFETY: the real fork, which takes no memory; the runtime's locks are held across it
        // (above) and released in both processes after it.
        let pid = unsafe { real::fork() };
        drop(locals);
        match pid {
            0 => rt.become_keeper(f),
            1.. => rt.hand_shards_to_keeper(),
            _ => {}
        }
        Some(pid)
    }
}

/// The longest the NIC sleeper sleeps (ms): a timer armed meanwhile fires at its next pass, at
/// most this late ([`Runtime::next_wait_ms`]).
pub(crate) const NIC_SLEEP_CAP_MS: i32 = 100;

impl<N: Nic + 'static> Runtime<N> {
    pub(crate) fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The shard, started on first use.
    /// Before a socket is bound to our address: fails (and says why, once) when the NIC cannot
    /// open, so the error reaches bind() rather than the first wait.
    pub(crate) fn precheck(&mut self) -> Result<(), Errno> {
        if self.shards.is_open() {
            return Ok(());
        }
        if self.init_error.is_none() {
            if let Some(Err(e)) = self.precheck.map(|check| check(&self.cfg)) {
                self.init_failed(e);
            }
        }
        match self.init_error {
            Some(_) => Err(Errno(libc::ENETDOWN)),
            None => Ok(()),
        }
    }

    fn init_failed(&mut self, e: String) {
        let msg = format!("pronghorn: {e} (this process's sockets on the accelerated address fail with ENETDOWN)\n");
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        self.init_error = Some(e);
        self.routing.init_failed += 1;
    }

    pub(crate) fn open_shards(&mut self) -> Result<&mut ShardSet<N>, Errno> {
        if !self.shards.is_open() {
            if self.init_error.is_some() {
                return Err(Errno(libc::ENETDOWN));
            }
            let opened = match self.open.take() {
                Some(open) => {
                    // DPDK's threads (its interrupt thread) must not take the application's
                    // signals either.
                    let _blocked = crate::threads::SignalsBlocked::new();
                    open(&self.cfg)
                }
                None => Err("the NIC was already opened once".into()),
            };
            match opened {
                Ok(mut nics) if !nics.is_empty() => {
                    self.enable_sharing();
                    // Shards shared with a fork family are driven by whichever process holds
                    // the family lock: their tx stays under it.
                    if let (None, Some(me)) = (self.sharing.family(), self.me) {
                        let lanes = nics.iter_mut().filter_map(|n| n.detach_tx()).collect();
                        // Set once: the NIC opens once (`open` is taken).
                        let _ = me.lanes.set(lanes);
                    }
                    let count = nics.len() as u16;
                    let rx_fds = nics.iter().map(|n| n.rx_interrupt_fd()).collect();
                    let shards: Result<Vec<_>, String> =
                        nics.into_iter().enumerate().map(|(k, nic)| self.make_shard(nic, k as u16, count)).collect();
                    let shards = match shards {
                        Ok(shards) => shards,
                        Err(e) => {
                            self.init_failed(e);
                            return Err(Errno(libc::ENETDOWN));
                        }
                    };
                    self.rx_fds = rx_fds;
                    self.shards.start(shards);
                    if self.starts_reaper {
                        crate::process::start_reaper(&self.cfg.nic.iface, self.cfg.nic.queues);
                        if let Sharing::Opener(f) = self.sharing {
                            // A family whose driver may be killed: the cleanup helper then
                            // waits for a child to take over (`family::succession`).
                            let _ = f.name_driver();
                        }
                    }
                    self.start_deferred_listeners();
                    if let Some(dir) = self.observe_dir.clone() {
                        self.start_observer(dir);
                    }
                }
                Ok(_) => {
                    self.init_failed("the NIC opened no queue".into());
                    return Err(Errno(libc::ENETDOWN));
                }
                Err(e) => {
                    self.init_failed(e);
                    return Err(Errno(libc::ENETDOWN));
                }
            }
        }
        Ok(&mut self.shards)
    }

    /// `[runtime] share = "family"`: makes the family arena before the first shard, so that the
    /// shards are allocated in it (crate `arena`). When it cannot be made (this program's global
    /// allocator is not `arena::ScopedAlloc`, or the mmap failed) the shards live on the process
    /// heap, as with "off", and stderr says so: nothing depends on the sharing yet.
    fn enable_sharing(&mut self) {
        if self.cfg.runtime.share != config::Share::Family {
            return;
        }
        if arena::enable_family().is_some() {
            if let Some(f) = Family::new() {
                self.sharing = Sharing::Opener(f);
            }
        } else {
            let msg = "pronghorn: runtime.share = \"family\": the family arena could not be made (an allocator other than arena::ScopedAlloc, or mmap failed); the shards live on the process heap\n";
            // SAFETY: `msg` is readable for its length.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        }
    }

    /// A shard over `nic`, keyed from the kernel's random source (no key: no shard).
    fn make_shard(&self, nic: N, index: u16, count: u16) -> Result<Shard<N>, String> {
        let secret = crate::secret::random_secret()?;
        let mut cfg = crate::settings::shard_config(&self.cfg, nic.mac(), secret);
        // Autotuning grows a connection's buffers up to this host's limits (`tcp_rmem[2]`,
        // `tcp_wmem[2]`), as Linux's would.
        cfg.tcp.rcv_buf_max = self.limits.tcp_rmem[2];
        cfg.tcp.snd_buf_max = self.limits.tcp_wmem[2];
        cfg.glean_neighbors = self.cfg.nic.queues > 1;
        cfg.shard_index = index;
        cfg.shard_count = count;
        Ok(Shard::new(nic, cfg))
    }

    /// Whether `ip` is one of the accelerated addresses.
    pub(crate) fn is_ours(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.cfg.ipv4.as_ref().is_some_and(|c| c.address.addr == a),
            IpAddr::V6(a) => {
                a.to_ipv4_mapped().is_some_and(|v4| self.is_ours(v4.into()))
                    || self.cfg.ipv6.as_ref().is_some_and(|c| c.address.addr == a)
            }
        }
    }

    /// Whether `ip` is reached through the accelerated interface.
    pub(crate) fn routes_here(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => {
                !a.is_loopback() && self.cfg.ipv4.as_ref().is_some_and(|c| c.address.contains(a) || c.gateway.is_some())
            }
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => self.routes_here(v4.into()),
                None => {
                    !a.is_loopback()
                        && self.cfg.ipv6.as_ref().is_some_and(|c| c.address.contains(a) || c.gateway.is_some())
                }
            },
        }
    }

    /// One stack pass of every shard: timers, received frames (what the rx ring holds, at most
    /// a few ring's worth), transmission, and the wakeups for what changed. Returns the work done
    /// (0: idle).
    pub(crate) fn poll_shard(&mut self) -> usize {
        if self.sharing.child().is_some() {
            // The driver passes on its own when frames come; a child only hands it what it
            // queued (a ring for nothing would wake every sleeping child at the driver's pass).
            self.flush_shard();
            return 0;
        }
        if self.wait.inline() && self.shards.is_open() {
            self.wait.stats.inline_polls += 1;
        }
        self.wait.calls_since_pass = 0;
        self.mark_pass();
        (0..self.shards.len()).map(|k| self.poll_one(k)).sum()
    }

    /// One stack pass of shard `k` (its stack thread's), then the frames it could not place
    /// handed to the others, and the wakeups.
    pub(crate) fn poll_one(&mut self, k: usize) -> usize {
        if self.sharing.child().is_some() {
            return self.poll_shard();
        }
        let now = self.now();
        if let Some(f) = self.sharing.family() {
            self.look_for_dead_members(f, now);
        }
        let mut work = 0;
        let mut frames = 0;
        if let Some(s) = self.shards.all_mut().get_mut(k) {
            let before = s.link_stats().rx_frames;
            for _ in 0..8 {
                let n = s.poll(now);
                work += n;
                if n == 0 {
                    break;
                }
            }
            frames = (s.link_stats().rx_frames - before) as usize;
            if self.cfg.nic.share {
                crate::shared::resolve_next_hops(s, now);
            }
        }
        stack::shard::exchange(self.shards.all_mut(), now);
        self.dispatch();
        if self.observer.is_some() {
            // One clock read for what the observer records after a pass.
            let end = self.now();
            self.observe_pass(frames, now, end);
            self.observe_transmit(end);
            self.publish_at(end, false, false);
        }
        work
    }

    /// Sends what calls queued, without receiving.
    pub(crate) fn flush_shard(&mut self) {
        // Whatever path it takes, nothing is left held for a kernel-only wait after it: it is
        // sent, or (a family's child) handed to the driver.
        if let Some(me) = self.me.filter(|a| a.output_held.load(Relaxed)) {
            me.output_held.store(false, Relaxed);
        }
        if !self.shards.all().iter().any(|s| s.has_output()) {
            return;
        }
        if let Some(f) = self.sharing.child() {
            f.ring();
            return;
        }
        let now = self.now();
        for s in self.shards.all_mut() {
            s.flush(now);
        }
        if self.observer.is_some() {
            let end = self.now();
            self.observe_transmit(end);
            self.publish_at(end, false, false);
        }
    }

    /// Turns the shard's readiness changes into wakeups: threads blocked on a changed socket,
    /// and the epoll sets it is in (queued on their ready lists, their waiters woken).
    pub(crate) fn dispatch(&mut self) {
        if let Some(f) = self.sharing.child() {
            self.hand_output_to_driver(f);
            return;
        }
        for s in self.shards.all_mut() {
            s.take_changed(&mut self.changed);
            s.take_urgent(&mut self.urgent);
        }
        if !self.urgent.is_empty() {
            self.owe_sigurg();
        }
        let family = self.sharing.family();
        if let Some(f) = family {
            f.forget_gone();
        }
        if self.changed.is_empty() {
            return;
        }
        let broadcast = family.is_some_and(|f| f.changed());
        let mut changed = std::mem::take(&mut self.changed);
        for id in changed.drain(..) {
            // A sibling listener's change is its primary's (the one the fds refer to).
            let id = self.shards.known_as(id);
            self.notify(id);
            if let Some(f) = family {
                f.changed_socket(id, &mut self.family_owed);
            }
        }
        self.changed = changed;
        if let Some(f) = family {
            let broadcast = broadcast || self.family_wake.is_some_and(|(_, b)| b);
            if broadcast || !self.family_owed.is_empty() {
                self.family_wake = Some((f, broadcast));
            }
        }
    }

    /// The wakes owed so far, to send once the lock is released.
    fn take_wakes(&mut self) -> wait::Wakes {
        wait::take_wakes(&mut self.owed_wakes)
    }

    /// `id` may have changed: wake whoever waits on it.
    pub(crate) fn notify(&mut self, id: SocketId) {
        if self.observer.is_some() && self.shards.is_open() && self.shards.readiness(id).readable {
            if let Some(st) = self.socks.get_mut(id) {
                if st.readable_since == 0 {
                    st.readable_since = self.clock.now_ns().max(1);
                }
            }
        }
        let Some(st) = self.socks.get(id) else { return };
        for p in &st.waiters {
            self.wait.stats.wakeups += 1;
            wait::owe_wake(&mut self.owed_wakes, p);
        }
        // The fds of a socket and the epoll sets of an fd are few; indices, because marking a
        // set ready borrows the fd table the lists live in.
        for &fd in &st.fds {
            let sets = self.fds.get(fd).map_or(0, |e| e.epolls.len());
            for j in 0..sets {
                let epfd = self.fds.get(fd).unwrap().epolls[j];
                if let Some(set) = self.fds.epoll_mut(epfd) {
                    self.wait.stats.wakeups += set.mark_ready(fd, &mut self.owed_wakes) as u64;
                }
            }
        }
    }

    /// Replaces the kernel socket at `fd` by an eventfd placeholder (same number). The
    /// placeholder carries the socket's O_NONBLOCK: programs read it back with F_GETFL (Redis
    /// skips F_SETFL when the flag already shows) and the runtime must agree with them; and its
    /// owner (F_SETOWN), who gets SIGURG.
    pub(crate) fn placeholder(&mut self, fd: i32, nonblock: bool) -> Result<(), Errno> {
        let restore_owner = crate::urgent::keep_owner(fd);
        // SAFETY: fcntl (F_GETFD, F_SETFD with an integer), eventfd, dup2 and close take no memory.
        // `efd` is the eventfd made here, closed once on each path; `fd` is the caller's socket,
        // which dup2 replaces atomically (the number stays allocated throughout).
        unsafe {
            let cloexec = real::fcntl(fd, libc::F_GETFD, 0);
            let efd = real::eventfd(0, if nonblock { libc::EFD_NONBLOCK } else { 0 });
            if efd < 0 {
                return Err(crate::last_errno());
            }
            if real::dup2(efd, fd) < 0 {
                let e = crate::last_errno();
                real::close(efd);
                return Err(e);
            }
            real::close(efd);
            if cloexec >= 0 {
                real::fcntl(fd, libc::F_SETFD, cloexec as libc::c_ulong);
            }
        }
        restore_owner();
        Ok(())
    }

    /// What the accelerated fd `fd` is ready for (`None`: not an accelerated fd).
    pub(crate) fn readiness(&self, fd: i32) -> Option<Readiness> {
        match &self.fds.get(fd)?.fd {
            Fd::Listener { id, .. } | Fd::Conn { id, .. } | Fd::Udp { id, .. } => {
                Some(if self.shards.is_open() { self.shards.readiness(*id) } else { Readiness::default() })
            }
            Fd::Bound { .. } => Some(Readiness { writable: true, ..Readiness::default() }),
            // Only when the NIC failed to open (waiting opens it): never ready.
            Fd::Listening { .. } => Some(Readiness::default()),
            _ => None,
        }
    }

    /// How long the NIC sleeper may sleep before shard `k` (`None`: any shard) has timer work
    /// (ms, capped at 100).
    ///
    /// A timer that a call arms while the sleeper sleeps is not allowed to wake it: it fires at
    /// the sleeper's next pass, at most 100 ms later. Every TCP timer but one is at least 200 ms
    /// (RTO, persist, keepalive, TIME-WAIT), so this only delays a delayed ACK (40 ms) by up to
    /// 60 ms, within RFC 1122's 500 ms. Waking the sleeper for it instead cost a context switch
    /// per request (each received request arms one).
    pub(crate) fn next_wait_ms(&self, k: Option<usize>) -> i32 {
        let all = self.shards.all();
        let deadline = match k {
            Some(k) => all.get(k).and_then(|s| s.next_deadline()),
            None => all.iter().filter_map(|s| s.next_deadline()).min(),
        };
        match deadline {
            Some(d) => (d.saturating_sub(self.now()).div_ceil(1_000_000)).min(NIC_SLEEP_CAP_MS as u64) as i32,
            None => NIC_SLEEP_CAP_MS,
        }
    }
}
