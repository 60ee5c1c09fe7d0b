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
//!   the driver hands the role on when it leaves); in dedicated mode the stack thread is. It
//!   sleeps until the shard's next timer, at most 100 ms (`Runtime::next_wait_ms`).
//! - Dedicated mode: a stack thread polls the NIC, spins up to `spin_us` while idle, then sleeps
//!   on the rx fd and its parker (run-to-wakeup). Application threads never poll the NIC there;
//!   they flush what they wrote at once.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use config::Drive;
use nic::Nic;
use stack::shard::SocketId;

use crate::accel::{Accel, Runtime};
use crate::real;
use crate::{Call, Errno};

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
}

const IDLE: u32 = 0;
const WOKEN: u32 = 1;
const ASLEEP: u32 = 2;

impl Parker {
    fn new() -> Option<Parker> {
        // SAFETY: eventfd takes no memory; the result is checked before use.
        let efd = unsafe { real::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        (efd >= 0).then(|| Parker {
            word: AtomicU32::new(IDLE),
            efd,
            via_fd: AtomicBool::new(false),
            fd_written: AtomicBool::new(false),
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
        } else if before == ASLEEP {
            crate::lockstat::WAKEUP_SYSCALLS.fetch_add(1, Ordering::Relaxed);
            unsafe {
                // SAFETY: FUTEX_WAKE on the parker's own AtomicU32, which lives as long as `self`;
                // the kernel only reads its address.
                libc::syscall(libc::SYS_futex, self.word.as_ptr(), libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG, 1)
            };
        }
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

/// Owes `p` a wake, unless it is the calling thread's own (it is awake and looks again anyway):
/// sent once the runtime lock is released ([`send_wakes`]). Called with the lock held.
pub(crate) fn owe_wake(owed: &mut Vec<Arc<Parker>>, p: &Arc<Parker>) {
    if !is_mine(p) {
        owed.push(p.clone());
    }
}

/// Wakes taken under the lock, to send after it ([`send_wakes`]). Most calls owe none and most
/// of the rest one: those need no allocation.
pub(crate) enum Wakes {
    None,
    One(Arc<Parker>),
    Many(Vec<Arc<Parker>>),
}

/// Takes the wakes owed under the lock (`owed`, left empty).
pub(crate) fn take_wakes(owed: &mut Vec<Arc<Parker>>) -> Wakes {
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
    }
}

/// Without an rx fd (the in-memory NIC) a driver cannot sleep on packets: it looks this often.
const NO_RX_FD_SLEEP_MS: i32 = 1;

/// What a thread about to sleep decided under the lock.
pub(crate) struct Sleep {
    pub parker: Arc<Parker>,
    /// This thread drives the NIC while it sleeps (it also waits on the rx fd).
    pub drives: bool,
    /// Busy polling: look again soon without sleeping in the kernel (`busy_poll_us`).
    pub spin: bool,
    pub rx_fd: Option<i32>,
    /// How long it may sleep, ms (-1: until woken).
    pub timeout_ms: i32,
    /// A child of a family that shares the shards: it sleeps on the family's change count
    /// from this value instead (`family`).
    pub family: Option<crate::family::ChildSleep>,
    /// The family's bell, which the driver watches beside its parker: children that may not
    /// write the driver's eventfd ring it (`family::Family::ring`).
    pub bell: Option<i32>,
}

impl<N: Nic + 'static> Runtime<N> {
    /// The start of a look at readiness (epoll_wait, poll): bring the shard up to date (inline:
    /// a stack pass; dedicated: the stack thread does that, only send what was written). A
    /// caller that then goes to sleep takes its parker with [`my_reset_parker`], in the same
    /// hold of the lock.
    pub(crate) fn start_looking(&mut self) {
        self.serve_deferred();
        if self.wait.inline() {
            self.poll_shard();
        } else {
            self.flush_shard();
        }
    }

    /// Records that this thread makes a stack pass in the current hold of the lock.
    pub(crate) fn mark_pass(&mut self) {
        self.wait.last_pass = (self.wait.holds, thread_token());
    }

    /// Whether the previous hold of the lock was this thread's and made a stack pass: nobody
    /// has touched the stack since, so another pass could only find frames that arrived in the
    /// microseconds between (and a thread about to sleep on them leaves those to the rx fd).
    pub(crate) fn passed_just_before(&self) -> bool {
        self.wait.last_pass == (self.wait.holds.wrapping_sub(1), thread_token())
    }

    /// Called with the lock held by a thread that found nothing to do and registered `parker`
    /// on what it waits for: decides whether it drives the NIC and for how long it sleeps.
    /// `limit_ms` is the caller's own bound (-1: none).
    /// `waiting_since` is when the caller first found nothing (set here on first use): a driver
    /// busy-polls until `busy_poll_us` after it.
    /// `kernel_fds`: the caller also sleeps on kernel fds (then the parker uses its eventfd).
    pub(crate) fn prepare_sleep(
        &mut self,
        parker: Arc<Parker>,
        limit_ms: i32,
        waiting_since: &mut Option<Instant>,
        kernel_fds: bool,
    ) -> Sleep {
        self.wait.parked += 1;
        self.wait.stats.sleeps += 1;
        if let Some(f) = self.sharing.child() {
            // Never the driver, never a stack thread: the opener's pass wakes it (`family`).
            let family = Some(f.prepare_sleep(kernel_fds, parker.fd()));
            return Sleep { parker, drives: false, spin: false, rx_fd: None, timeout_ms: limit_ms, family, bell: None };
        }
        if self.wait.auto && self.wait.mode == Mode::Inline && self.wait.parked >= 2 {
            // Two application threads blocked at once: a thread-per-connection program. From
            // now on a stack thread drives the NIC and wakes them.
            self.wait.mode = Mode::Dedicated;
        }
        if self.wait.mode == Mode::Dedicated {
            self.ensure_stack_thread();
        }
        // Inline mode has one shard (several need their stack threads: config validation).
        let rx_fd = self.rx_fds.first().copied().flatten();
        let drives = self.wait.inline() && !self.wait.driver && self.shards.is_open();
        let rung = drives && self.sharing.family().is_some();
        parker.via_fd.store(kernel_fds || (drives && rx_fd.is_some()) || rung, Ordering::Release);
        let mut timeout_ms = limit_ms;
        let busy = Duration::from_micros(u64::from(self.wait.busy_poll_us));
        // The clock is read only when busy polling is on.
        if drives && !busy.is_zero() && waiting_since.get_or_insert_with(Instant::now).elapsed() < busy {
            self.wait.driver = true;
            return Sleep { parker, drives, spin: true, rx_fd: None, timeout_ms: 0, family: None, bell: None };
        }
        let mut bell = None;
        if drives {
            self.wait.driver = true;
            if let Some(f) = self.sharing.family() {
                bell = Some(f.driver_sleeps_on(parker.fd()));
            }
            let cap = if rx_fd.is_some() { self.next_wait_ms(None) } else { NO_RX_FD_SLEEP_MS };
            timeout_ms = if timeout_ms < 0 { cap } else { timeout_ms.min(cap) };
        } else if self.wait.inline() {
            self.wait.standby.push(parker.clone());
        }
        Sleep { parker, drives, spin: false, rx_fd: if drives { rx_fd } else { None }, timeout_ms, family: None, bell }
    }

    /// Called with the lock held when the thread is up again: gives up the driver role (the
    /// caller polls the shard after this when it drove) and its place in the standby list.
    pub(crate) fn after_sleep(&mut self, s: &Sleep) {
        self.wait.parked = self.wait.parked.saturating_sub(1);
        if s.drives {
            self.wait.driver = false;
        } else if let Some(i) = self.wait.standby.iter().position(|p| Arc::ptr_eq(p, &s.parker)) {
            self.wait.standby.swap_remove(i);
        }
    }

    /// Called with the lock held by a thread leaving the runtime after it waited: in inline
    /// mode, if nobody drives the NIC but threads are parked, one of them takes over.
    pub(crate) fn hand_off(&mut self) {
        if self.wait.inline() && !self.wait.driver {
            if let Some(p) = self.wait.standby.first() {
                self.wait.stats.wakeups += 1;
                let p = p.clone();
                owe_wake(&mut self.owed_wakes, &p);
            }
        }
    }

    /// Starts the stack threads of dedicated mode: one per shard, shard k's pinned to
    /// `stack_cpus[k]` when that is set.
    pub(crate) fn ensure_stack_thread(&mut self) {
        if self.wait.stats.dedicated || !self.shards.is_open() {
            return;
        }
        let Some(me) = self.me else { return };
        self.wait.stats.dedicated = true;
        let mut spawned = Ok(());
        for k in 0..self.shards.len() {
            let cpus = self.wait.stack_cpus.get(k).cloned().unwrap_or_default();
            let name = if k == 0 { "pronghorn-stack".to_string() } else { format!("pronghorn-stack{k}") };
            let started = crate::threads::spawn(name, move || {
                if !cpus.is_empty() {
                    pin_to(&cpus);
                }
                me.stack_thread(k);
            });
            if let Err(e) = started {
                spawned = Err(e);
                break;
            }
        }
        if spawned.is_err() && self.shards.len() > 1 {
            let msg = "pronghorn: cannot start a stack thread per shard; the shards without one do not receive\n";
            // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
            unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
        } else if spawned.is_err() {
            // No thread: stay inline (every waiter drives in turn), which still works.
            self.wait.stats.dedicated = false;
            self.wait.mode = Mode::Inline;
            self.wait.auto = false;
        }
    }
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
    if let Some(child) = &s.family {
        return child.sleep(s.timeout_ms, extra, s.parker.fd());
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

/// How often a lingering close looks at its connection when nothing wakes it (ms).
const LINGER_LOOK_MS: i32 = 10;

/// Which way a blocking call waits: SO_RCVTIMEO or SO_SNDTIMEO bounds it.
#[derive(Clone, Copy)]
pub(crate) enum Dir {
    Recv,
    Send,
}

impl<N: Nic + 'static> Accel<N> {
    /// Runs `attempt` until it gives something other than EAGAIN on a blocking socket, sleeping
    /// in between until the socket changes (or SO_RCVTIMEO/SO_SNDTIMEO runs out). `dontwait`
    /// (MSG_DONTWAIT) makes this one call non-blocking.
    pub(crate) fn blocking<T>(
        &self,
        fd: i32,
        dir: Dir,
        dontwait: bool,
        mut attempt: impl FnMut(&mut Runtime<N>) -> Call<T>,
    ) -> Call<T> {
        let mut deadline: Option<Option<Instant>> = None;
        let mut waited = false;
        let mut waiting_since: Option<Instant> = None;
        loop {
            let step = self.with(|rt| {
                rt.serve_deferred();
                // What the shard already holds first; the NIC only when that is not enough
                // (and, in dedicated mode, never: the stack thread does that).
                let mut r = attempt(rt);
                if rt.wait.inline() {
                    if matches!(r, Call::Done(Err(Errno::EAGAIN))) {
                        rt.poll_shard();
                        r = attempt(rt);
                    } else if rt.wait.calls_since_pass >= CALLS_PER_PASS {
                        rt.poll_shard();
                    } else {
                        rt.wait.calls_since_pass += 1;
                    }
                }
                let entry = rt.fds.get(fd);
                let nonblock = !matches!(entry, Some(e) if !e.fd.nonblock());
                let timeo = entry.map_or(0, |e| match dir {
                    Dir::Recv => e.opts.rcvtimeo_us,
                    Dir::Send => e.opts.sndtimeo_us,
                });
                // What a call queued goes out now for a blocking socket (its program may wait
                // where we cannot see it) and always in dedicated mode. A non-blocking socket's
                // event loop comes back through epoll_wait/poll/select, which send first: the
                // replies of one loop iteration leave in one burst.
                if !nonblock || !rt.wait.inline() {
                    rt.flush_shard();
                }
                if waited && matches!(r, Call::Kernel) {
                    // Another thread closed the fd while this one slept.
                    rt.hand_off();
                    return Err(Call::Done(Err(Errno::EBADF)));
                }
                let again = matches!(r, Call::Done(Err(Errno::EAGAIN))) && !nonblock && !dontwait;
                if !again {
                    if waited {
                        rt.hand_off();
                    }
                    return Err(r);
                }
                let limit =
                    *deadline.get_or_insert_with(|| (timeo > 0).then(|| Instant::now() + Duration::from_micros(timeo)));
                let mut limit_ms = -1;
                if let Some(d) = limit {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        if waited {
                            rt.hand_off();
                        }
                        return Err(Call::Done(Err(Errno::EAGAIN)));
                    }
                    limit_ms = left.as_millis().max(1).min(i32::MAX as u128) as i32;
                }
                let Some(parker) = my_reset_parker() else {
                    // Out of fds for a parker: poll, as the old runtime did.
                    return Ok(None);
                };
                let id = rt.fds.get(fd).and_then(|e| e.fd.socket());
                if let Some(id) = id {
                    rt.socks.entry(id).waiters.push(parker.clone());
                }
                Ok(Some((rt.prepare_sleep(parker, limit_ms, &mut waiting_since, false), id)))
            });
            let (sleep_plan, id) = match step {
                None => return Call::Kernel,
                Some(Err(r)) => return r,
                Some(Ok(None)) => {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                Some(Ok(Some(x))) => x,
            };
            let slept = sleep(&sleep_plan, &mut PollFds::new());
            waited = true;
            let interrupted = slept == -libc::EINTR && !restarts_after_signal(deadline.flatten().is_some());
            self.with(|rt| {
                rt.after_sleep(&sleep_plan);
                if let Some(st) = id.and_then(|id| rt.socks.get_mut(id)) {
                    if let Some(i) = st.waiters.iter().position(|p| Arc::ptr_eq(p, &sleep_plan.parker)) {
                        st.waiters.swap_remove(i);
                    }
                }
                if sleep_plan.drives {
                    rt.poll_shard();
                }
                if interrupted {
                    rt.hand_off();
                }
            });
            if interrupted {
                return Call::Done(Err(Errno(libc::EINTR)));
            }
        }
    }

    /// `close()` of the last fd of a connection with SO_LINGER `secs` > 0: waits, as Linux's
    /// `sk_stream_wait_close`, until the FIN is acknowledged (the connection leaves FIN-WAIT-1,
    /// CLOSING and LAST-ACK, or is gone), `secs` pass, or a signal comes; close() returns 0
    /// either way. Linux waits so whatever O_NONBLOCK says (`inet_release` passes the linger
    /// time unconditionally), and so does this. The socket's readiness wakes the waiter; an
    /// orphan's last changes may not, so it also looks again every [`LINGER_LOOK_MS`].
    pub(crate) fn linger(&self, id: SocketId, secs: u32) {
        let start = Instant::now();
        let deadline = start + Duration::from_secs(u64::from(secs));
        let mut waited = false;
        loop {
            let step = self.with(|rt| {
                let parker = my_parker();
                if let Some(p) = &parker {
                    p.reset();
                }
                let closing = |rt: &mut Runtime<N>| {
                    matches!(
                        rt.shards.of(id).tcp_state(id),
                        Ok(stack::TcpState::FinWait1 | stack::TcpState::Closing | stack::TcpState::LastAck)
                    )
                };
                if closing(rt) && rt.wait.inline() {
                    rt.poll_shard();
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if !closing(rt) || left.is_zero() {
                    return None;
                }
                let limit_ms = (left.as_millis().max(1) as i32).min(LINGER_LOOK_MS);
                let Some(parker) = parker else {
                    // Out of fds for a parker: look again after a while.
                    return Some(None);
                };
                rt.socks.entry(id).waiters.push(parker.clone());
                Some(Some(rt.prepare_sleep(parker, limit_ms, &mut Some(start), false)))
            });
            let plan = match step.flatten() {
                None => break,
                Some(None) => {
                    std::thread::sleep(Duration::from_millis(LINGER_LOOK_MS as u64));
                    continue;
                }
                Some(Some(plan)) => plan,
            };
            let slept = sleep(&plan, &mut PollFds::new());
            waited = true;
            self.with(|rt| {
                rt.after_sleep(&plan);
                if let Some(st) = rt.socks.get_mut(id) {
                    st.waiters.retain(|p| !Arc::ptr_eq(p, &plan.parker));
                }
                if plan.drives {
                    rt.poll_shard();
                }
            });
            if slept == -libc::EINTR {
                break;
            }
        }
        self.with(|rt| {
            if rt.socks.get(id).is_some_and(|st| st.fds.is_empty() && st.waiters.is_empty()) {
                rt.socks.remove(id);
            }
            if waited {
                rt.hand_off();
            }
        });
    }

    /// The stack thread of dedicated mode: polls the NIC and wakes waiters; spins `spin_us` while
    /// idle, then sleeps on the rx fd and its parker until a frame comes, a timer is due, or a
    /// call wakes it.
    pub(crate) fn stack_thread(&'static self, k: usize) {
        enum Plan {
            Stop,
            Busy,
            Spin,
            Sleep(Sleep),
        }
        let Some(parker) = my_parker() else { return };
        let mut idle_since = Instant::now();
        loop {
            // A panic in a pass (a bug) is counted and the thread goes on driving the NIC: the
            // waiters it serves would otherwise sleep for ever.
            let pass = || {
                self.with(|rt| {
                    parker.reset();
                    if !rt.shards.is_open() {
                        return Plan::Stop;
                    }
                    let work = rt.poll_one(k);
                    rt.wait.stats.stack_thread_polls += 1;
                    if work > 0 {
                        return Plan::Busy;
                    }
                    if idle_since.elapsed() < Duration::from_micros(u64::from(rt.wait.spin_us)) {
                        return Plan::Spin;
                    }
                    let rx_fd = rt.rx_fds.get(k).copied().flatten();
                    let cap = if rx_fd.is_some() { rt.next_wait_ms(Some(k)) } else { NO_RX_FD_SLEEP_MS };
                    rt.wait.stats.sleeps += 1;
                    let family = rt.sharing.family();
                    let bell = family.map(|f| f.driver_sleeps_on(parker.fd()));
                    parker.via_fd.store(rx_fd.is_some() || family.is_some(), Ordering::Release);
                    Plan::Sleep(Sleep {
                        parker: parker.clone(),
                        drives: true,
                        spin: false,
                        rx_fd,
                        timeout_ms: cap,
                        family: None,
                        bell,
                    })
                })
            };
            match crate::shield::guard("the stack thread", || Some(Plan::Busy), pass) {
                None | Some(Plan::Stop) => return,
                Some(Plan::Busy) => idle_since = Instant::now(),
                Some(Plan::Spin) => std::hint::spin_loop(),
                Some(Plan::Sleep(s)) => {
                    sleep(&s, &mut PollFds::new());
                    idle_since = Instant::now();
                }
            }
        }
    }
}
