//! Waiting and wakeups: how a thread that cannot go on sleeps, who drives the NIC meanwhile, and
//! how it is woken exactly when what it waits for changes.
//!
//! - Every waiting thread has a [`Parker`]: an eventfd of its own. Before it sleeps it registers
//!   the parker (with the runtime lock held) on what it waits for: the shard sockets of a blocking
//!   call or a poll/select, or the epoll set of an epoll_wait. After each stack pass the runtime
//!   takes the shard's list of sockets whose readiness changed and wakes the parkers registered
//!   on them (one eventfd write each, none for a parker already woken or for the thread doing
//!   the pass). Registration and the readiness check happen under one lock hold, and a change
//!   is made under the lock before the wakeups for it are owed, so a change can never fall
//!   between a check and the sleep: no lost wakeups. The wakeups themselves are sent right
//!   after the lock is released ([`send_wakes`]): a thread woken on the same core
//!   preempts its waker at once, and woken under the lock it would only find the lock taken
//!   (a futex sleep and wake more per request, measured). A late wake finds its thread looking
//!   again already, at worst it makes it look once more.
//! - At most one thread sleeps on the NIC's rx fd (the *NIC sleeper*): in inline mode the first
//!   waiting thread that finds no driver becomes it (the others sleep on their parkers only, and
//!   the driver hands the role on when it leaves; an accept loop lends it: [`AcceptLoop`]); in
//!   dedicated mode the stack thread is. It
//!   sleeps until the shard's next timer, at most 100 ms (`Runtime::next_wait_ms`).
//! - Dedicated mode: a stack thread polls the NIC, spins up to `spin_us` while idle, then sleeps
//!   on the rx fd and its parker (run-to-wakeup). Application threads never poll the NIC there;
//!   they flush what they wrote at once.

//!
//! This module holds the parkers, the owed wakeups and the wait state (which the fd and socket
//! tables and the epoll sets hold and the stack pass reads); `sleeping` makes the waits.

mod sleeping;

use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use std::sync::Arc;

use config::Drive;
use smallvec::SmallVec;

// A parker's word takes the values of the family's shared ones.
use crate::family_parker::{ASLEEP, IDLE, WOKEN};
use crate::real;
use crate::Errno;

/// A thread's way to be woken. A thread that sleeps on nothing else waits on a futex (a wake
/// costs one system call, none if the thread has not gone to sleep yet); one that must also
/// watch kernel fds (the rx fd, the fds of a poll, a kernel epoll set) sleeps in poll(2) with
/// its eventfd among them.
pub(crate) struct Parker {
    /// 0: nothing happened; 1: woken; 2: asleep on the futex.
    word: AtomicU32,
    efd: i32,
    /// The thread sleeps in poll(2) on `efd` this time (set with the lock held, before it
    /// registers, so every waker sees it).
    via_fd: AtomicBool,
    /// A wake wrote `efd`: the next reset reads it back.
    fd_written: AtomicBool,
    /// In a child of a family: the sleeper in the arena the thread sleeps on this time (null:
    /// none), which a wake from its own process must reach too.
    family_sleeper: AtomicPtr<crate::family::Sleeper>,
    /// `owe_wake` found the thread asleep in the kernel on `family_sleeper` (with the locks
    /// held): the next wake must reach it there.
    family_asleep: AtomicBool,
}

impl Parker {
    fn new() -> Option<Parker> {
        // SAFETY: eventfd takes no memory; the result is checked before use.
        let efd = unsafe { real::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        (efd >= 0).then(|| Parker {
            word: AtomicU32::new(IDLE),
            efd,
            via_fd: AtomicBool::new(false),
            fd_written: AtomicBool::new(false),
            family_sleeper: AtomicPtr::new(std::ptr::null_mut()),
            family_asleep: AtomicBool::new(false),
        })
    }

    pub(crate) fn fd(&self) -> i32 {
        self.efd
    }

    /// Wakes the thread (if it has not been woken since it last looked).
    pub(crate) fn wake(&self) {
        let before = self.word.swap(WOKEN, Ordering::AcqRel);
        if before == WOKEN {
            return;
        }
        if self.via_fd.load(Ordering::Acquire) {
            crate::lockstat::WAKEUP_SYSCALLS.fetch_add(1, Ordering::Relaxed);
            self.fd_written.store(true, Ordering::Release);
            let one = 1u64;
            // SAFETY: the eventfd this Parker owns (closed only by its drop), and an 8-byte
            // counter value that outlives the call.
            unsafe { real::write(self.efd, (&one as *const u64).cast(), 8) };
        } else if let Some(sleeper) = self.family_sleeper() {
            if self.family_asleep.swap(false, Ordering::AcqRel) {
                sleeper.wake_asleep(self.efd);
            }
        } else if before == ASLEEP {
            crate::lockstat::WAKEUP_SYSCALLS.fetch_add(1, Ordering::Relaxed);
            unsafe {
                // SAFETY: FUTEX_WAKE on the parker's own AtomicU32, which lives as long as `self`;
                // the kernel only reads its address.
                libc::syscall(libc::SYS_futex, self.word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1)
            };
        }
    }

    fn family_sleeper(&self) -> Option<&'static crate::family::Sleeper> {
        let p = self.family_sleeper.load(Ordering::Acquire);
        // SAFETY: null, or a sleeper of the family arena (`set_family_sleeper`), which is never
        // unmapped or freed.
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The thread sleeps on `sleeper` in the family arena this time (`None`: not, or no more);
    /// set and cleared with the lock held.
    pub(crate) fn set_family_sleeper(&self, sleeper: Option<&'static crate::family::Sleeper>) {
        let p = sleeper.map_or(std::ptr::null_mut(), |s| s as *const _ as *mut crate::family::Sleeper);
        self.family_asleep.store(false, Ordering::Release);
        self.family_sleeper.store(p, Ordering::Release);
    }

    fn woken(&self) -> bool {
        self.word.load(Ordering::Acquire) == WOKEN
    }

    /// Forgets past wakes: called with the runtime lock held, before the thread looks at what it
    /// waits for (every wake is sent with the lock held, so none is lost in between).
    pub(crate) fn reset(&self) {
        self.word.store(IDLE, Ordering::Release);
        if self.fd_written.swap(false, Ordering::AcqRel) {
            let mut v = 0u64;
            // SAFETY: the eventfd this Parker owns; the kernel writes the 8-byte counter into `v`.
            unsafe { real::read(self.efd, (&mut v as *mut u64).cast(), 8) };
        }
    }

    /// Sleeps on the futex until woken or `timeout_ms` (-1: none) passes. `true`: a signal
    /// handler ran and the kernel did not restart the wait (without a timeout it restarts it
    /// when the handler has SA_RESTART, exactly as for a blocking socket call).
    fn sleep_futex(&self, timeout_ms: i32) -> bool {
        if self.word.compare_exchange(IDLE, ASLEEP, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return false; // woken already
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
            tv_nsec: ((timeout_ms.max(0) % 1000) as libc::c_long) * 1_000_000,
        };
        let tsp = if timeout_ms < 0 { std::ptr::null() } else { &ts as *const libc::timespec };
        // SAFETY: FUTEX_WAIT on the parker's own AtomicU32 (lives as long as `self`); `tsp` is
        // null or points to `ts`, which outlives the call.
        let r = unsafe {
            libc::syscall(libc::SYS_futex, self.word.as_ptr(), libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG, ASLEEP, tsp)
        };
        let interrupted = r < 0 && crate::last_errno().0 == libc::EINTR;
        // Back to IDLE unless a wake came (reset, under the lock, clears WOKEN).
        let _ = self.word.compare_exchange(ASLEEP, IDLE, Ordering::AcqRel, Ordering::Acquire);
        interrupted
    }
}

impl Drop for Parker {
    fn drop(&mut self) {
        // SAFETY: the eventfd this Parker made and owns; dropped once, so closed once.
        unsafe { real::close(self.efd) };
    }
}

thread_local! {
    static PARKER: std::cell::RefCell<Option<Arc<Parker>>> = const { std::cell::RefCell::new(None) };
}

/// This thread's parker (made on first use; `None` only if the process is out of fds).
pub(crate) fn my_parker() -> Option<Arc<Parker>> {
    PARKER
        .try_with(|p| {
            let mut p = p.borrow_mut();
            if p.is_none() {
                *p = Parker::new().map(Arc::new);
            }
            p.clone()
        })
        .ok()
        .flatten()
}

/// In a child just forked, whose runtime the family shares: the forking thread's parker is its
/// parent's, and its eventfd, which fork copied as an fd, is the parent's eventfd, shared with
/// every sibling forked from the same thread. A wake written there for one process woke them
/// all, and whichever read it first took it from the one it was meant for (PostgreSQL's
/// backends slept on for ever). The thread makes a parker of its own when it next waits.
pub(crate) fn forget_my_parker() {
    let _ = PARKER.try_with(|p| p.borrow_mut().take());
}

/// This thread's parker with past wakes forgotten, for a thread that found nothing and is about
/// to register it and sleep: called with the lock held, in the same hold as the look that found
/// nothing (a change after that look needs the lock, so its wake comes after this reset; a
/// wake owed by an earlier hold may still land after it, and costs one more look). A call
/// that needs no sleep never touches its parker.
pub(crate) fn my_reset_parker() -> Option<Arc<Parker>> {
    let parker = my_parker();
    if let Some(p) = &parker {
        p.reset();
    }
    parker
}

fn is_mine(p: &Arc<Parker>) -> bool {
    PARKER.try_with(|mine| mine.borrow().as_ref().is_some_and(|m| Arc::ptr_eq(m, p))).unwrap_or(false)
}

/// Takes `parker` off a waiter list it was registered on (at most once: registration pushes
/// it once per sleep; the order of a list does not matter).
pub(crate) fn forget_parker(list: &mut Vec<Arc<Parker>>, parker: &Arc<Parker>) {
    if let Some(i) = list.iter().position(|p| Arc::ptr_eq(p, parker)) {
        list.swap_remove(i);
    }
}

/// Owes `p` a wake, sent once the runtime lock is released ([`send_wakes`]). Called with the
/// lock held. The calling thread's own parker is only marked woken, which costs no system call:
/// the thread is awake, but it may have registered in this very hold and be about to sleep (its
/// own call changed what it waits on: a send whose flush looped the data to a socket of the
/// shard and brought the ACKs that free its buffer back); its sleep then returns at once and it
/// looks again. Skipping it lost that wake for good (stop 23's hang).
pub(crate) fn owe_wake(owed: &mut OwedWakes, p: &Arc<Parker>) {
    if is_mine(p) {
        p.word.store(WOKEN, Ordering::Release);
    } else {
        // A child's thread asleep on its sleeper in the family arena: marked there now, under
        // the locks (after them the sleeper may be another thread's, whose wake a swap would
        // take).
        if let Some(sleeper) = p.family_sleeper() {
            if sleeper.mark_woken() {
                p.family_asleep.store(true, Ordering::Release);
            }
        }
        owed.push(p.clone());
    }
}

/// Wakes owed under the lock. Most holds owe none and most of the rest one or two: up to
/// [`WAKES_INLINE`] are kept without allocating, and the list moves out of the lock whole.
pub(crate) type OwedWakes = SmallVec<[Arc<Parker>; WAKES_INLINE]>;

/// Wakes one hold of the lock owes without allocating (a pass that wakes more allocates once).
const WAKES_INLINE: usize = 8;

/// Wakes taken under the lock, to send after it ([`send_wakes`]).
pub(crate) enum Wakes {
    None,
    One(Arc<Parker>),
    Many(OwedWakes),
}

/// Takes the wakes owed under the lock (`owed`, left empty).
pub(crate) fn take_wakes(owed: &mut OwedWakes) -> Wakes {
    match owed.len() {
        0 => Wakes::None,
        1 => Wakes::One(owed.pop().unwrap()),
        _ => Wakes::Many(std::mem::take(owed)),
    }
}

/// Sends the wakes (right after the runtime lock is released).
pub(crate) fn send_wakes(w: Wakes) {
    match w {
        Wakes::None => {}
        Wakes::One(p) => p.wake(),
        Wakes::Many(ps) => ps.iter().for_each(|p| p.wake()),
    }
}

/// Who drives the NIC, and who sleeps.
pub(crate) struct WaitState {
    pub mode: Mode,
    /// `drive = "auto"` and more than one CPU to run on: switch to dedicated when two
    /// application threads wait at once.
    pub auto: bool,
    /// Inline mode: whether an application thread holds the driver role.
    pub driver: bool,
    /// Inline mode: parked threads that may take the driver role when it is handed on.
    pub standby: Vec<Arc<Parker>>,
    /// Inline mode: the thread that waits for new connections only, and whether it drives.
    pub accept_loop: AcceptLoop,
    /// Application threads parked right now.
    pub parked: u32,
    pub spin_us: u32,
    pub busy_poll_us: u32,
    /// Stack thread k's CPUs (runtime.stack_cpu + k, or the placement's); empty: inherited.
    pub stack_cpus: Vec<Vec<u32>>,
    pub stats: WaitStats,
    /// Inline mode: reads and writes served since the last stack pass (see [`CALLS_PER_PASS`]).
    pub calls_since_pass: u32,
    /// Holds of the lock so far (`Accel::with`), and the hold and thread of the last stack pass:
    /// [`Runtime::passed_just_before`].
    pub holds: u64,
    pub last_pass: (u64, usize),
}

/// A number that tells this thread from the others alive (the address of a thread-local).
fn thread_token() -> usize {
    thread_local! {
        static TOKEN: u8 = const { 0 };
    }
    TOKEN.with(|t| t as *const u8 as usize)
}

/// Inline mode: an application that keeps finding its sockets ready never waits, so it makes no
/// stack pass; after this many reads and writes without one, the next makes a pass. The NIC's rx
/// ring holds 2048 frames: Redis serving 10,000 churning connections spent so long between two
/// epoll_waits that the kernel dropped 42% of the frames sent to us (AF_XDP fill ring empty).
pub const CALLS_PER_PASS: u32 = 64;

/// Counters of the waiting machinery (for `pronghorn stat` and tests).
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitStats {
    /// Threads put to sleep on a parker or the NIC.
    pub sleeps: u64,
    /// Wakeups asked for (a parker already woken, or the waker's own, costs no system call).
    pub wakeups: u64,
    /// Stack passes (NIC polls) done by the stack thread / by application threads.
    pub stack_thread_polls: u64,
    pub inline_polls: u64,
    /// Stack passes that poll() left out because its thread had just made one (inline).
    pub skipped_passes: u64,
    /// epoll_wait calls answered here (a look at a set of kernel members only is the kernel's),
    /// and the accelerated members they reported: their ratio is how many ready connections
    /// one wait hands an event loop or a thread pool's listener.
    pub epoll_waits: u64,
    pub epoll_events: u64,
    /// The driver role taken from an accept loop asleep, and given back to it, both without a
    /// wake (docs/runtime.md, "An accept loop lends the role").
    pub roles_taken_from_accept_loop: u64,
    pub roles_given_back_to_accept_loop: u64,
    /// Whether the runtime runs a stack thread (dedicated mode).
    pub dedicated: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mode {
    Inline,
    Dedicated,
}

impl WaitState {
    pub(crate) fn new(cfg: &config::RuntimeConfig) -> WaitState {
        WaitState {
            // Several shards: a stack thread each, from the start.
            mode: if cfg.drive == Drive::Dedicated || cfg.shards > 1 { Mode::Dedicated } else { Mode::Inline },
            // With one CPU a stack thread only adds a context switch per wakeup (measured:
            // MariaDB point_select 16 threads on one core, 38-46k tps dedicated vs 50k inline).
            auto: cfg.drive == Drive::Auto && cfg.shards <= 1 && allowed_cpus() >= 2,
            driver: false,
            standby: Vec::new(),
            accept_loop: AcceptLoop::default(),
            parked: 0,
            spin_us: cfg.spin_us,
            busy_poll_us: cfg.busy_poll_us,
            stack_cpus: cfg.stack_cpu.map_or(Vec::new(), |c| (c..c + u32::from(cfg.shards)).map(|c| vec![c]).collect()),
            stats: WaitStats::default(),
            calls_since_pass: 0,
            holds: 0,
            last_pass: (0, 0),
        }
    }

    pub(crate) fn inline(&self) -> bool {
        self.mode == Mode::Inline
    }

    /// In a forked child: the parent's threads (driver, standby, parked) are not here.
    pub(crate) fn forget_threads(&mut self) {
        self.driver = false;
        self.standby.clear();
        self.parked = 0;
        self.accept_loop.forget();
    }
}

/// The driver role as a thread that waits for new connections only holds it (inline mode, a
/// process whose shards are its own).
///
/// Such a thread (a blocking accept, or poll or epoll_wait on listening sockets alone:
/// MariaDB's main thread, the accept thread beside a pool or thread-per-connection workers) is
/// asleep for good. Holding the role it kept it from the threads that wait on connections:
/// a request that came while every thread slept woke it first, and its pass woke the thread
/// the request was for, two wakeups where the kernel makes one (stop 51). So, when no other
/// thread stands by as it goes to sleep, it watches the rx fd through an epoll set of its own
/// ([`AcceptLoop::set`]): a thread about to wait on connections with no other standing by
/// takes the role by taking the rx fd out of that set, which does not wake the accept loop,
/// and when nobody drives any more the role goes back to it by putting the rx fd back, again
/// without a wake. Each move costs one epoll_ctl.
#[derive(Debug)]
pub(crate) struct AcceptLoop {
    /// An epoll set that holds the rx fd while the accept loop drives (-1: not made yet; made
    /// at first use and kept).
    set: i32,
    /// The rx fd is in `set` (it may stay there after the accept loop woke: nobody sleeps on
    /// the set then).
    rx_in: bool,
    /// An accept loop sleeps on `set` now ...
    asleep: bool,
    /// ... and holds the driver role.
    drives: bool,
}

impl Default for AcceptLoop {
    fn default() -> AcceptLoop {
        AcceptLoop { set: -1, rx_in: false, asleep: false, drives: false }
    }
}

/// Which application thread holds the driver role in inline mode
/// ([`crate::Accel::driver_role`]; a stack thread is not counted).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum DriverRole {
    Nobody,
    /// A thread that waits for new connections only, asleep (docs/runtime.md, "An accept loop
    /// lends the role").
    AcceptLoop,
    /// Another application thread, asleep on the rx fd beside what it waits for.
    Other,
}

impl AcceptLoop {
    pub(crate) fn drives(&self) -> bool {
        self.drives
    }

    /// The set, made on first use (`None`: the process is out of fds).
    fn set(&mut self) -> Option<i32> {
        if self.set < 0 {
            // SAFETY: epoll_create1 takes no memory; the result is checked.
            self.set = unsafe { real::epoll_create1(libc::EPOLL_CLOEXEC) };
        }
        (self.set >= 0).then_some(self.set)
    }

    /// Puts the rx fd in the set: from now on a frame wakes the accept loop. False when
    /// epoll_ctl failed (then the role goes to a thread woken for it).
    fn rx_in(&mut self, rx_fd: i32) -> bool {
        let Some(set) = self.set() else { return false };
        if !self.rx_in {
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: rx_fd as u64 };
            // SAFETY: two fds of this process and an event that outlives the call.
            self.rx_in = unsafe { real::epoll_ctl(set, libc::EPOLL_CTL_ADD, rx_fd, &mut ev) } == 0;
        }
        self.rx_in
    }

    /// Takes the rx fd out of the set: a frame no longer wakes the accept loop. False when
    /// epoll_ctl failed (then the accept loop keeps the role).
    fn rx_out(&mut self, rx_fd: i32) -> bool {
        if self.rx_in {
            // SAFETY: two fds of this process; DEL reads no event.
            self.rx_in = unsafe { real::epoll_ctl(self.set, libc::EPOLL_CTL_DEL, rx_fd, std::ptr::null_mut()) } != 0;
        }
        !self.rx_in
    }

    /// In a forked child: the parent's threads are not here, and the set is the parent's (an
    /// epoll fd copied by fork is the same set): the child makes its own.
    fn forget(&mut self) {
        if self.set >= 0 {
            // SAFETY: this process's copy of the fd; the parent's stays open.
            unsafe { real::close(self.set) };
        }
        *self = AcceptLoop::default();
    }
}

/// Without an rx fd (the in-memory NIC) a driver cannot sleep on packets: it looks this often.
const NO_RX_FD_SLEEP_MS: i32 = 1;

/// The longest a fork family's child's thread sleeps in the runtime (ms): its process then
/// looks whether the process that drives the NIC still runs (`family::succession`), and the
/// call sleeps again if nothing changed.
pub(crate) const DRIVER_LOOK_MS: i32 = 1000;

/// What a thread about to sleep decided under the lock.
pub(crate) struct Sleep {
    pub parker: Arc<Parker>,
    /// This thread drives the NIC while it sleeps (it also waits on the rx fd).
    pub drives: bool,
    /// An accept loop's sleep ([`AcceptLoop`]): whether it drives is the wait state's, which
    /// may change while it sleeps; `rx_fd` is its epoll set.
    pub accept_loop: bool,
    /// Counted in `parked`: an application thread blocked on the stack (not the stack thread,
    /// not a wait on an epoll set with no accelerated member).
    pub parked: bool,
    /// Busy polling: look again soon without sleeping in the kernel (`busy_poll_us`).
    pub spin: bool,
    pub rx_fd: Option<i32>,
    /// How long it may sleep, ms (-1: until woken).
    pub timeout_ms: i32,
    /// A child of a family that shares the shards: it sleeps on its sleeper in the family
    /// arena, registered on the sockets it waits for, instead (`family::sleepers`).
    pub family: Option<crate::family::ChildSleep>,
    /// The family's bell, which the driver watches beside its parker: children that may not
    /// write the driver's eventfd ring it (`family::Family::ring`).
    pub bell: Option<i32>,
}

/// How many CPUs this process may run on.
pub(crate) fn allowed_cpus() -> usize {
    // SAFETY: cpu_set_t is an array of integers (all-zero: the empty set); the kernel writes
    // at most `size` bytes into `set`, which outlives the call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return 1;
        }
        libc::CPU_COUNT(&set) as usize
    }
}

fn pin_to(cpus: &[u32]) {
    if crate::placement::pin(cpus).is_err() {
        let msg = format!(
            "pronghorn: cannot pin the stack thread to CPUs {cpus:?} (runtime.stack_cpu, runtime.numa): it runs unpinned\n"
        );
        // SAFETY: `msg` is readable for its length.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
}

/// The kernel fds a sleep watches: a poll() rarely has more than a few (no allocation then).
pub(crate) type PollFds = smallvec::SmallVec<[libc::pollfd; 8]>;

/// Sleeps on the parker (and the rx fd when driving) plus `extra` kernel fds; returns the
/// kernel's poll result for `extra` (their revents are filled in), or minus the errno.
pub(crate) fn sleep(s: &Sleep, extra: &mut PollFds) -> i32 {
    if s.parker.woken() {
        // Woken since it registered (by its own thread's hold, which writes no eventfd).
        return 0;
    }
    if let Some(child) = &s.family {
        return child.sleep(s.timeout_ms, extra);
    }
    if s.spin {
        if extra.is_empty() {
            for _ in 0..256 {
                if s.parker.woken() {
                    break;
                }
                std::hint::spin_loop();
            }
            return 0;
        }
        // SAFETY: `extra` is our Vec of extra.len() pollfds, read and written by the kernel.
        let r = unsafe { real::poll(extra.as_mut_ptr(), extra.len() as libc::nfds_t, 0) };
        return if r < 0 { -crate::last_errno().0 } else { r };
    }
    if !s.parker.via_fd.load(Ordering::Acquire) {
        debug_assert!(extra.is_empty() && s.rx_fd.is_none());
        return if s.parker.sleep_futex(s.timeout_ms) { -libc::EINTR } else { 0 };
    }
    let base = extra.len();
    extra.push(libc::pollfd { fd: s.parker.fd(), events: libc::POLLIN, revents: 0 });
    for fd in [s.rx_fd, s.bell].into_iter().flatten() {
        extra.push(libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    }
    // SAFETY: `extra` is our Vec of extra.len() pollfds, read and written by the kernel.
    let r = unsafe { real::poll(extra.as_mut_ptr(), extra.len() as libc::nfds_t, s.timeout_ms) };
    let errno = if r < 0 { crate::last_errno() } else { Errno(0) };
    extra.truncate(base);
    if r < 0 {
        -errno.0
    } else {
        extra.iter().filter(|p| p.revents != 0).count() as i32
    }
}

/// A blocking socket call (accept, connect, recv, send) whose sleep a signal handler
/// interrupted: Linux restarts it when the handler was installed with SA_RESTART and the
/// socket has no timeout (SO_RCVTIMEO/SO_SNDTIMEO: then EINTR, signal(7)). The kernel applies
/// that rule itself to a futex sleep without a timeout; a sleep in poll(2) (the thread that
/// drives the NIC) always ends with EINTR, and which signal ran is not known there: the call
/// restarts when every handler installed has SA_RESTART (the usual case: glibc's signal()
/// sets it), and fails with EINTR when any lacks it.
pub(crate) fn restarts_after_signal(has_timeout: bool) -> bool {
    if has_timeout {
        return false;
    }
    // Fault signals (a crash handler, Rust's stack-overflow guard) are raised by the faulting
    // instruction, never while a thread sleeps in a system call.
    let asynchronous = |s: &libc::c_int| {
        ![libc::SIGKILL, libc::SIGSTOP, libc::SIGSEGV, libc::SIGBUS, libc::SIGILL, libc::SIGFPE, libc::SIGTRAP]
            .contains(s)
    };
    (1..=libc::SIGRTMAX()).filter(asynchronous).all(|sig| {
        // SAFETY: sigaction is integers, a sigset and a handler address: all zeroes is SIG_DFL
        // with no flags, a valid value.
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // glibc refuses its own internal signals (EINVAL): not the application's.
        // SAFETY: a null new action only reads the current one into `old`, which outlives
        // the call.
        if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
            return true;
        }
        let handled = old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN;
        !handled || old.sa_flags & libc::SA_RESTART != 0
    })
}

/// Which way a blocking call waits: SO_RCVTIMEO or SO_SNDTIMEO bounds it.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    Recv,
    Send,
}
