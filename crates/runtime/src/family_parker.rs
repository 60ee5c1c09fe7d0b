//! Parkers that the processes of one family share: issue 24's stage 1 with [`crate::family_lock`]
//! (docs/design-notes.md, "Fork after accept: a shared stack"). `family` uses one as the
//! opener's doorbell (a child rings the thread that drives the NIC); `wait`'s `Parker` is not
//! one (a child's threads sleep on sleepers of the family's own, `family::sleepers`, which use the
//! same words and protocol). A thread's parker is a word in a
//! MAP_SHARED mapping made before fork, so a waker in any process of the family reaches it:
//! - a thread that sleeps on nothing else waits on the word with FUTEX_WAIT, and a waker does
//!   FUTEX_WAKE on it, both without FUTEX_PRIVATE_FLAG (a private futex is keyed by the process's
//!   address space: a wake from another process would never reach it);
//! - a thread that must also watch kernel fds sleeps in poll(2) on its eventfd, an fd of its own
//!   process. The parker records which process and fd ([`FamilyParker::sleep_on_fd`]); a waker in
//!   another process takes a copy of that eventfd with pidfd_getfd(2) (once per sleeper: the
//!   copies are kept, `RemoteFds`) and writes it. pidfd_getfd needs ptrace access to the
//!   sleeper (PTRACE_MODE_ATTACH_REALCREDS): a fork family has one uid, but a process that
//!   changed credentials is not dumpable, and then the wake fails with EPERM; the design's
//!   fallback for that case (a per-process doorbell futex that the process's driver turns into
//!   eventfd writes) is not built.
//!
//! The protocol is `wait`'s: the sleeper resets the parker before it looks at what it waits for,
//! a waker marks it woken before it sends anything, so a wake that comes between the look and
//! the sleep makes the sleep return at once: no wake is lost.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, Ordering};
use std::sync::Mutex;

use crate::{real, Errno};

/// The parker's state in shared memory.
#[repr(C)]
struct Word {
    /// [`IDLE`], [`WOKEN`] or [`ASLEEP`] (on the futex).
    state: AtomicU32,
    /// The sleeper waits in poll(2) on an eventfd this time: `pid`'s fd `efd`.
    via_fd: AtomicBool,
    /// A wake wrote the eventfd: the sleeper's next reset reads it back.
    fd_written: AtomicBool,
    pid: AtomicI32,
    efd: AtomicI32,
}

/// A sleeper's word: nothing happened, woken, asleep on the futex (`wait::Parker`'s private
/// word takes the same values).
pub(crate) const IDLE: u32 = 0;
pub(crate) const WOKEN: u32 = 1;
pub(crate) const ASLEEP: u32 = 2;

/// How a futex sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slept {
    Woken,
    TimedOut,
    /// A signal handler ran (and the kernel did not restart the wait).
    Interrupted,
}

/// A thread's parker, in a mapping of its own that fork() shares with the children.
pub struct FamilyParker {
    word: *mut Word,
}

// SAFETY: the pointer names a mapping this value owns until drop (no other Rust value frees
// it); the word is made for threads and processes to share and every field is atomic.
unsafe impl Send for FamilyParker {}
// SAFETY: as for Send: only atomic fields are reached through `&self`.
unsafe impl Sync for FamilyParker {}

impl FamilyParker {
    /// A new idle parker in a fresh shared mapping.
    pub fn new() -> Result<FamilyParker, Errno> {
        let size = std::mem::size_of::<Word>();
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh anonymous mapping at an address the kernel picks: no memory of ours is
        // touched; the result is checked.
        let map =
            unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0) };
        if map == libc::MAP_FAILED {
            return Err(crate::last_errno());
        }
        // A fresh anonymous mapping is zeroed: IDLE, no eventfd.
        Ok(FamilyParker { word: map.cast() })
    }

    fn word(&self) -> &Word {
        // SAFETY: `word` points to a mapping of size_of::<Word>() made in `new` (page-aligned,
        // zero-filled: a valid Word of atomics) and unmapped only in drop.
        unsafe { &*self.word }
    }

    /// Forgets past wakes: called before the thread looks at what it waits for.
    pub fn reset(&self) {
        let w = self.word();
        w.state.store(IDLE, Ordering::Release);
        if w.fd_written.swap(false, Ordering::AcqRel) {
            let mut v = 0u64;
            // SAFETY: `v` is 8 writable bytes; a stale fd at worst fails the read.
            unsafe { real::read(w.efd.load(Ordering::Acquire), (&mut v as *mut u64).cast(), 8) };
        }
    }

    /// This time the thread sleeps in poll(2) on `efd`, an eventfd of the calling process (set
    /// before the thread registers the parker anywhere, so that every waker sees it).
    pub fn sleep_on_fd(&self, efd: i32) {
        let w = self.word();
        w.efd.store(efd, Ordering::Release);
        w.pid.store(crate::liveness::own_pid(), Ordering::Release);
        w.via_fd.store(true, Ordering::Release);
    }

    /// This time the thread sleeps on the futex ([`FamilyParker::sleep`]).
    pub fn sleep_on_futex(&self) {
        self.word().via_fd.store(false, Ordering::Release);
    }

    /// Whether the thread is asleep on the futex now.
    pub fn asleep(&self) -> bool {
        self.word().state.load(Ordering::Acquire) == ASLEEP
    }

    /// Whether a wake came since the last reset.
    pub fn woken(&self) -> bool {
        self.word().state.load(Ordering::Acquire) == WOKEN
    }

    /// Wakes the thread, from any process of the family (nothing is sent to a thread already
    /// woken since it last looked). Fails only when the sleeper waits on its eventfd and this
    /// process cannot take a copy of it (pidfd_getfd: EPERM, ESRCH, EMFILE).
    pub fn wake(&self) -> Result<(), Errno> {
        let w = self.word();
        let before = w.state.swap(WOKEN, Ordering::AcqRel);
        if before == WOKEN {
            return Ok(());
        }
        if w.via_fd.load(Ordering::Acquire) {
            let fd = usable_fd(w.pid.load(Ordering::Acquire), w.efd.load(Ordering::Acquire))?;
            w.fd_written.store(true, Ordering::Release);
            add_one(fd);
        } else if before == ASLEEP {
            // SAFETY: the futex word is an aligned u32 in the live shared mapping.
            unsafe { libc::syscall(libc::SYS_futex, w.state.as_ptr(), libc::FUTEX_WAKE, 1) };
        }
        Ok(())
    }

    /// Sleeps on the futex until woken or `timeout_ms` (-1: none) passes.
    pub fn sleep(&self, timeout_ms: i32) -> Slept {
        let w = self.word();
        if w.state.compare_exchange(IDLE, ASLEEP, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return Slept::Woken;
        }
        let ts = libc::timespec {
            tv_sec: (timeout_ms.max(0) / 1000) as libc::time_t,
            tv_nsec: ((timeout_ms.max(0) % 1000) as libc::c_long) * 1_000_000,
        };
        let tsp = if timeout_ms < 0 { std::ptr::null() } else { &ts as *const libc::timespec };
        // SAFETY: the futex word is an aligned u32 in the live shared mapping; `tsp` is null or
        // points to `ts`, alive across the call.
        let r = unsafe { libc::syscall(libc::SYS_futex, w.state.as_ptr(), libc::FUTEX_WAIT, ASLEEP, tsp) };
        let errno = if r < 0 { crate::last_errno().0 } else { 0 };
        // Back to IDLE unless a wake came (a reset clears WOKEN).
        let _ = w.state.compare_exchange(ASLEEP, IDLE, Ordering::AcqRel, Ordering::Acquire);
        match errno {
            libc::ETIMEDOUT => Slept::TimedOut,
            libc::EINTR => Slept::Interrupted,
            // 0: FUTEX_WAKE; EAGAIN: the word was no longer ASLEEP (a wake came first).
            _ => Slept::Woken,
        }
    }
}

impl Drop for FamilyParker {
    /// Unmaps this process's view; other processes keep theirs.
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, of this size; no reference to it outlives `self`.
        unsafe { libc::munmap(self.word.cast(), std::mem::size_of::<Word>()) };
    }
}

/// Process `pid`'s fd `efd` as this process can write it: itself in its own process, else a
/// copy (taken once: `RemoteFds`).
pub(crate) fn usable_fd(pid: i32, efd: i32) -> Result<i32, Errno> {
    if pid == crate::liveness::own_pid() {
        Ok(efd)
    } else {
        REMOTE_FDS.local_copy(pid, efd)
    }
}

/// The table of copies held across a fork (`ForkHold`): a waker sends its wakes with no lock
/// of the runtime held (`Family::wake_sleepers`), so without the hold the opener's driving
/// thread could be inside [`RemoteFds::local_copy`] when another thread forks, and the child
/// would inherit the table's lock taken by a thread it does not have: its first wake then
/// blocked forever, holding the family lock, and the whole family stalled (a pgbench run under
/// `share = "family"`, about one in four).
pub(crate) struct RemoteFdsForkHold {
    _table: std::sync::MutexGuard<'static, RemoteTable>,
}

/// Takes the table of copies for a fork about to run in this thread (released after it, in
/// the parent and in the child, before either takes a copy).
pub(crate) fn hold_for_fork() -> RemoteFdsForkHold {
    RemoteFdsForkHold { _table: REMOTE_FDS.copies.lock().unwrap_or_else(|p| p.into_inner()) }
}

/// Adds one to the eventfd `fd` (of this process).
pub(crate) fn add_one(fd: i32) {
    let one = 1u64;
    // SAFETY: `one` is 8 readable bytes.
    unsafe { real::write(fd, (&one as *const u64).cast(), 8) };
}

/// The copies this process took of other processes' eventfds (pidfd_getfd), kept so that a
/// wake costs one write, as within a process. A fixed table (taking a copy must not allocate:
/// a child forked from a threaded program may wake before it execs); the oldest copy goes when
/// it is full.
struct RemoteFds {
    copies: Mutex<RemoteTable>,
}

const REMOTE_FDS_KEPT: usize = 64;

struct RemoteTable {
    /// (pid, the fd in that process, our copy); -1 pids are free slots.
    slots: [(i32, i32, i32); REMOTE_FDS_KEPT],
    next: usize,
}

static REMOTE_FDS: RemoteFds =
    RemoteFds { copies: Mutex::new(RemoteTable { slots: [(-1, -1, -1); REMOTE_FDS_KEPT], next: 0 }) };

impl RemoteFds {
    /// Our copy of `pid`'s fd `efd`, taken now if not kept yet.
    fn local_copy(&self, pid: i32, efd: i32) -> Result<i32, Errno> {
        let mut t = self.copies.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&(_, _, fd)) = t.slots.iter().find(|s| s.0 == pid && s.1 == efd) {
            return Ok(fd);
        }
        // SAFETY: system calls on plain integers; each result is checked.
        let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
        if pidfd < 0 {
            return Err(crate::last_errno());
        }
        // SAFETY: as above.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, efd, 0) } as i32;
        let err = crate::last_errno();
        // SAFETY: closes the pidfd this function opened.
        unsafe { real::close(pidfd) };
        if fd < 0 {
            return Err(err);
        }
        let i = t.next;
        t.next = (i + 1) % REMOTE_FDS_KEPT;
        if t.slots[i].0 != -1 {
            // SAFETY: closes a copy this table took and is about to forget.
            unsafe { real::close(t.slots[i].2) };
        }
        t.slots[i] = (pid, efd, fd);
        Ok(fd)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bound on each test's sleeps: a wake that is lost fails the test after it instead of
    /// hanging it (no test waits for it when the wakes arrive).
    const LOST_AFTER_MS: i32 = 10_000;

    /// Forks a child that runs `child` (which must not allocate: the test harness has threads),
    /// holding the table of copies across the fork as the runtime does (tests in other threads
    /// take copies).
    fn fork(child: impl FnOnce() -> i32) -> i32 {
        let hold = hold_for_fork();
        // SAFETY: the child runs only `child`, which allocates nothing, then _exit.
        let pid = unsafe { libc::fork() };
        drop(hold);
        assert!(pid >= 0);
        if pid == 0 {
            let code = child();
            // SAFETY: _exit has no preconditions.
            unsafe { libc::_exit(code) };
        }
        pid
    }

    fn exit_code(pid: i32) -> i32 {
        let mut status = 0;
        // SAFETY: `status` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        assert!(libc::WIFEXITED(status), "the child died: status {status}");
        libc::WEXITSTATUS(status)
    }

    /// Waits (yielding the CPU) until `cond`: how a test knows the other process got there.
    fn until(cond: impl Fn() -> bool) {
        while !cond() {
            // SAFETY: sched_yield has no preconditions.
            unsafe { libc::sched_yield() };
        }
    }

    /// Whether thread `tid` sleeps in the kernel now (state S in /proc/TID/stat: the futex wait,
    /// the only place a sleeper of these tests blocks). Does not allocate (a forked child calls it).
    fn asleep_in_kernel(tid: i32) -> bool {
        let mut buf = [0u8; 512];
        let Some(stat) = crate::observe::region::read_proc_stat(tid as u32, &mut buf) else { return false };
        // "tid (comm) S ...": the state follows the last ')'.
        stat.iter().rposition(|&b| b == b')').is_some_and(|i| stat.get(i + 2) == Some(&b'S'))
    }

    /// Sleeps in poll(2) on `efd` until it is readable: 0, or 1 when the bound runs out.
    fn poll_fd(efd: i32) -> i32 {
        let mut p = libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 };
        loop {
            // SAFETY: one valid pollfd.
            match unsafe { libc::poll(&mut p, 1, LOST_AFTER_MS) } {
                1 => return 0,
                r if r < 0 && crate::last_errno().0 == libc::EINTR => continue,
                _ => return 1,
            }
        }
    }

    #[test]
    fn a_wake_from_the_parent_reaches_a_child_asleep_on_the_futex() {
        let parker = FamilyParker::new().unwrap();
        let child = fork(|| match parker.sleep(LOST_AFTER_MS) {
            Slept::Woken => 0,
            _ => 1,
        });
        // The child's only thread has its pid for tid.
        until(|| parker.asleep() && asleep_in_kernel(child));
        parker.wake().unwrap();
        assert_eq!(exit_code(child), 0, "the child slept through the parent's wake");
    }

    #[test]
    fn a_wake_from_a_child_reaches_its_parent_asleep_on_the_futex() {
        let parker = FamilyParker::new().unwrap();
        // SAFETY: gettid has no preconditions.
        let me = unsafe { libc::gettid() };
        let child = fork(|| {
            until(|| parker.asleep() && asleep_in_kernel(me));
            parker.wake().map_or(1, |_| 0)
        });
        assert_eq!(parker.sleep(LOST_AFTER_MS), Slept::Woken, "the parent slept through the child's wake");
        assert_eq!(exit_code(child), 0);
    }

    #[test]
    fn a_wake_sent_before_the_sleep_is_not_lost() {
        let parker = FamilyParker::new().unwrap();
        parker.reset();
        let child = fork(|| parker.wake().map_or(1, |_| 0));
        assert_eq!(exit_code(child), 0);
        // The parent looked (reset) before the wake and sleeps after it: it must not sleep.
        assert_eq!(parker.sleep(LOST_AFTER_MS), Slept::Woken);
        parker.reset();
        assert!(!parker.woken(), "a reset forgets the wake it consumed");
    }

    #[test]
    fn a_wake_from_the_parent_reaches_a_child_asleep_in_poll_on_its_eventfd() {
        let parker = FamilyParker::new().unwrap();
        let child = fork(|| {
            // SAFETY: eventfd takes plain integers.
            let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            parker.sleep_on_fd(efd);
            poll_fd(efd)
        });
        until(|| parker.word().via_fd.load(Ordering::Acquire));
        parker.wake().unwrap();
        assert_eq!(exit_code(child), 0, "the child's eventfd was not written");
    }

    #[test]
    fn a_wake_from_a_child_reaches_its_parent_asleep_in_poll_on_its_eventfd() {
        let parker = FamilyParker::new().unwrap();
        // SAFETY: eventfd takes plain integers.
        let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        parker.reset();
        parker.sleep_on_fd(efd);
        let child = fork(|| parker.wake().map_or(1, |_| 0));
        assert_eq!(poll_fd(efd), 0, "the parent's eventfd was not written");
        assert_eq!(exit_code(child), 0, "the child could not wake the parent");
        // The next look reads the eventfd back: a later sleep is not woken by this wake.
        parker.reset();
        let mut p = libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one valid pollfd.
        assert_eq!(unsafe { libc::poll(&mut p, 1, 0) }, 0);
        // SAFETY: closes the eventfd this test made.
        unsafe { libc::close(efd) };
    }

    /// The stall of a pgbench run under `share = "family"`: a thread (the opener's driver,
    /// sending wakes after the locks) was inside `local_copy` when another thread forked, and
    /// the child's first copy blocked on the lock it inherited taken. Here a thread takes
    /// copies without pause while the test forks children (under [`hold_for_fork`], as the
    /// runtime does: `fork` here); each child must take a copy of its own (an alarm ends a child that
    /// blocks, and the test fails). The hold owns the table while it lives.
    #[test]
    fn a_child_forked_while_another_thread_takes_copies_can_take_its_own() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        // A process whose stdin the busy thread copies (kept, so each copy is a lookup under the lock).
        let other = fork(|| {
            // SAFETY: prctl and pause take integers; the test kills this child (and if the test
            // dies first, the kernel does).
            unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::pause()
            };
            0
        });
        let stop = Arc::new(AtomicBool::new(false));
        let busy = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let _ = usable_fd(other, 0);
                }
            })
        };
        // SAFETY: getpid and eventfd take no memory.
        let (parent, efd) = unsafe { (libc::getpid(), libc::eventfd(0, libc::EFD_CLOEXEC)) };
        let hold = hold_for_fork();
        assert!(REMOTE_FDS.copies.try_lock().is_err(), "the hold owns the table of copies");
        drop(hold);
        for _ in 0..50 {
            let child = fork(move || {
                // SAFETY: alarm takes an integer: a child blocked on the table dies of SIGALRM.
                unsafe { libc::alarm(20) };
                usable_fd(parent, efd).map_or(2, |_| 0)
            });
            assert_eq!(exit_code(child), 0, "a child could not take a copy of its parent's eventfd");
        }
        stop.store(true, Ordering::Relaxed);
        busy.join().unwrap();
        // SAFETY: the test's own children and fd.
        unsafe {
            libc::kill(other, libc::SIGKILL);
            libc::waitpid(other, std::ptr::null_mut(), 0);
            libc::close(efd);
        }
    }
}
