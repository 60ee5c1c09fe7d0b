//! A lock that the processes of one family share: the first building block of issue 24's
//! shared stack (docs/design-notes.md, "Fork after accept: a shared stack"), taken by `family`
//! around the shared shards. A robust, process-shared pthread mutex in a MAP_SHARED mapping made before fork, so a
//! parent and the children it forks afterwards lock the same word (a futex without
//! FUTEX_PRIVATE_FLAG). A process that dies holding it (kill -9) does not leave the others
//! stuck: glibc registers the lock on the thread's robust list, the kernel marks it when the
//! thread dies, and the next locker gets it with [`FamilyGuard::owner_died`] set. That locker
//! must make what the lock guards consistent and say so ([`FamilyGuard::mark_consistent`]:
//! `family` repairs what it can and gives back what the dead held first);
//! released without that, the lock is unusable from then on (ENOTRECOVERABLE), as POSIX has it.

use crate::Errno;

/// The lock, in a mapping of its own that fork() shares with the children.
pub struct FamilyLock {
    mutex: *mut libc::pthread_mutex_t,
}

// SAFETY: the pointer is to a mapping this value alone unmaps (on drop), and a process-shared
// pthread mutex is made to be locked and unlocked from any thread: moving the value to another
// thread moves nothing that is tied to this one.
unsafe impl Send for FamilyLock {}
// SAFETY: every method takes `&self` and only calls pthread_mutex_* on the mutex, which
// synchronise concurrent callers themselves.
unsafe impl Sync for FamilyLock {}

impl FamilyLock {
    /// A new unlocked lock in a fresh shared mapping.
    pub fn new() -> Result<FamilyLock, Errno> {
        let size = std::mem::size_of::<libc::pthread_mutex_t>();
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // SAFETY: a fresh anonymous shared mapping (no fd, no address hint): the kernel
        // chooses where; the result is checked against MAP_FAILED.
        let map =
            unsafe { libc::mmap(std::ptr::null_mut(), size, prot, libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1, 0) };
        if map == libc::MAP_FAILED {
            return Err(crate::last_errno());
        }
        let lock = FamilyLock { mutex: map.cast() };
        // SAFETY: the attribute is zeroed (a valid bit pattern for it) and initialised before
        // use and destroyed after; `lock.mutex` points to our fresh mapping, writable and page-
        // aligned (more than a pthread_mutex_t needs), which pthread_mutex_init initialises once.
        unsafe {
            let mut attr: libc::pthread_mutexattr_t = std::mem::zeroed();
            libc::pthread_mutexattr_init(&mut attr);
            libc::pthread_mutexattr_setpshared(&mut attr, libc::PTHREAD_PROCESS_SHARED);
            libc::pthread_mutexattr_setrobust(&mut attr, libc::PTHREAD_MUTEX_ROBUST);
            let rc = libc::pthread_mutex_init(lock.mutex, &attr);
            libc::pthread_mutexattr_destroy(&mut attr);
            if rc != 0 {
                return Err(Errno(rc));
            }
        }
        Ok(lock)
    }

    /// Waits for the lock. ENOTRECOVERABLE: a holder died and its successor released the lock
    /// without making the state consistent.
    pub fn lock(&self) -> Result<FamilyGuard<'_>, Errno> {
        // SAFETY: `self.mutex` is the mutex `new` initialised, mapped until `self` drops.
        self.guard(unsafe { libc::pthread_mutex_lock(self.mutex) })
    }

    /// Takes the lock if it is free: `None` when another thread or process holds it.
    pub fn try_lock(&self) -> Result<Option<FamilyGuard<'_>>, Errno> {
        // SAFETY: as in `lock`.
        match unsafe { libc::pthread_mutex_trylock(self.mutex) } {
            libc::EBUSY => Ok(None),
            rc => self.guard(rc).map(Some),
        }
    }

    fn guard(&self, rc: i32) -> Result<FamilyGuard<'_>, Errno> {
        match rc {
            0 => Ok(FamilyGuard { lock: self, owner_died: false }),
            libc::EOWNERDEAD => Ok(FamilyGuard { lock: self, owner_died: true }),
            e => Err(Errno(e)),
        }
    }
}

impl Drop for FamilyLock {
    /// Unmaps this process's view; other processes keep theirs (the mutex is not destroyed).
    fn drop(&mut self) {
        // SAFETY: the mapping `new` made, unmapped once; no guard is left (a guard borrows
        // `self`), and other processes keep their own views.
        unsafe { libc::munmap(self.mutex.cast(), std::mem::size_of::<libc::pthread_mutex_t>()) };
    }
}

/// The lock held; released when dropped.
pub struct FamilyGuard<'a> {
    lock: &'a FamilyLock,
    owner_died: bool,
}

impl FamilyGuard<'_> {
    /// The previous holder died holding the lock: what it guards may be half-updated.
    pub fn owner_died(&self) -> bool {
        self.owner_died
    }

    /// What the lock guards is consistent again: the lock stays usable after this guard.
    pub fn mark_consistent(&mut self) {
        // SAFETY: the lock's initialised mutex, held by this guard (consistent needs the
        // holder that got EOWNERDEAD).
        if self.owner_died && unsafe { libc::pthread_mutex_consistent(self.lock.mutex) } == 0 {
            self.owner_died = false;
        }
    }
}

impl Drop for FamilyGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: the lock's initialised mutex, which this guard holds (a guard moved to
        // another thread or forked child would get EPERM: a robust mutex checks its owner).
        unsafe { libc::pthread_mutex_unlock(self.lock.mutex) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Forks a child that runs `child` (which must not allocate: the test harness has threads)
    /// and returns its wait status.
    fn in_child(child: impl FnOnce() -> i32) -> i32 {
        // SAFETY: the child only runs `child`, which must not allocate (the harness's
        // threads may hold the allocator's lock), and leaves with _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            let code = child();
            // SAFETY: _exit takes no memory and runs no destructors or atexit handlers.
            unsafe { libc::_exit(code) };
        }
        let mut status = 0;
        // SAFETY: the kernel writes the status into `status`, which outlives the call.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        status
    }

    #[test]
    fn a_child_forked_after_the_lock_was_made_shares_it() {
        let lock = FamilyLock::new().unwrap();
        let held = lock.lock().unwrap();
        let status = in_child(|| match lock.try_lock() {
            Ok(None) => 0,
            _ => 1,
        });
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child took a lock the parent holds");
        drop(held);
        let status = in_child(|| match lock.try_lock() {
            Ok(Some(g)) if !g.owner_died() => 0,
            _ => 1,
        });
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child could not take a free lock");
    }

    #[test]
    fn a_child_killed_holding_the_lock_leaves_it_to_the_parent() {
        let lock = FamilyLock::new().unwrap();
        let status = in_child(|| {
            std::mem::forget(lock.lock());
            // SAFETY: raise takes no memory.
            unsafe { libc::raise(libc::SIGKILL) };
            1
        });
        assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);
        let mut guard = lock.lock().unwrap();
        assert!(guard.owner_died());
        guard.mark_consistent();
        drop(guard);
        let guard = lock.lock().unwrap();
        assert!(!guard.owner_died(), "consistent again: an ordinary lock");
    }

    #[test]
    fn a_lock_released_without_repair_after_its_holder_died_stays_unusable() {
        let lock = FamilyLock::new().unwrap();
        in_child(|| {
            std::mem::forget(lock.lock());
            0
        });
        let guard = lock.lock().unwrap();
        assert!(guard.owner_died());
        drop(guard);
        assert_eq!(lock.lock().err(), Some(Errno(libc::ENOTRECOVERABLE)));
    }
}
