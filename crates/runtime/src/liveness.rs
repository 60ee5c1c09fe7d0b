//! Whether another process still runs, as the family needs to know it: a pidfd (exited,
//! zombies included), the start time in /proc (a recycled pid is another process); and which
//! process this is ([`own_pid`]). Owns nothing but that pid's page; used by `family` (its
//! process table and the lock's dead holder), `family_parker` and `passing`.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};

use crate::real;

/// This process's pid, with no system call after the first ask in each process. The family's
/// sleeps and wakes ask for it (the pid a parker's eventfd belongs to): as getpid(2) that was
/// 17.8 system calls per pgbench TPC-B-like transaction at 4 clients, half in the driver's
/// wakes and half in the backends' sleeps (bench/results/stop45). Kept in a page the kernel
/// zeroes in the child of every fork, whoever forks (`MADV_WIPEONFORK`, Linux 4.14): the
/// shim's hooks, `syscall(SYS_fork)` or a raw clone(2) alike, so a child never reads its
/// parent's. A vfork child shares its parent's memory and reads its parent's pid here:
/// [`crate::process::in_vfork_child`], which must tell the two apart, asks the kernel. Where
/// the page cannot be had (mmap or madvise refused), each ask is a getpid.
pub(crate) fn own_pid() -> libc::pid_t {
    let Some(cached) = pid_page() else {
        // SAFETY: getpid has no preconditions.
        return unsafe { libc::getpid() };
    };
    match cached.load(Ordering::Relaxed) {
        0 => {
            // SAFETY: getpid has no preconditions.
            let pid = unsafe { libc::getpid() };
            cached.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}

/// The page [`own_pid`] keeps the pid in (made at the first ask; `None`: refused). Lock-free,
/// not a `OnceLock`: a child forked while another thread was making the page would inherit the
/// lock's "running" state with no thread to finish it, and wait for ever at its first ask.
fn pid_page() -> Option<&'static AtomicI32> {
    static PAGE: AtomicPtr<AtomicI32> = AtomicPtr::new(std::ptr::null_mut());
    static REFUSED: AtomicBool = AtomicBool::new(false);
    let page = PAGE.load(Ordering::Acquire);
    if !page.is_null() {
        // SAFETY: a page mapped below and never unmapped; zero-filled (fresh, or wiped by a
        // fork) it is a valid AtomicI32.
        return Some(unsafe { &*page });
    }
    if REFUSED.load(Ordering::Relaxed) {
        return None;
    }
    const SIZE: usize = 4096;
    // SAFETY: a new anonymous mapping; the result is checked.
    let map = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            SIZE,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if map == libc::MAP_FAILED {
        REFUSED.store(true, Ordering::Relaxed);
        return None;
    }
    // SAFETY: `map` is the mapping of SIZE bytes made above.
    if unsafe { libc::madvise(map, SIZE, libc::MADV_WIPEONFORK) } != 0 {
        // SAFETY: the mapping made above, not shared with anyone.
        unsafe { libc::munmap(map, SIZE) };
        REFUSED.store(true, Ordering::Relaxed);
        return None;
    }
    match PAGE.compare_exchange(std::ptr::null_mut(), map.cast(), Ordering::AcqRel, Ordering::Acquire) {
        // SAFETY: as above: mapped, zero-filled, never unmapped.
        Ok(_) => Some(unsafe { &*map.cast::<AtomicI32>() }),
        Err(first) => {
            // Another thread's page won; this one was never published.
            // SAFETY: the mapping made above, not shared with anyone.
            unsafe { libc::munmap(map, SIZE) };
            // SAFETY: as above.
            Some(unsafe { &*first })
        }
    }
}

/// Whether process `pid`, started at `start` (0: unknown), has ended: reaped, a zombie (its fds
/// are closed already), or its pid given to another process since. A pidfd pins the process it
/// opened, so what /proc says after it opened is about that process; it polls readable once the
/// whole process has exited (a thread group whose leader left but other threads run has not).
pub(crate) fn gone(pid: libc::pid_t, start: u64) -> bool {
    // SAFETY: pidfd_open takes plain integers; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        return crate::last_errno().0 == libc::ESRCH;
    }
    let recycled = start != 0 && start_time(pid).is_some_and(|s| s != start);
    let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, read and written by the kernel; no wait.
    let exited = unsafe { real::poll(&mut p, 1, 0) } == 1;
    // SAFETY: the pidfd opened above.
    unsafe { real::close(pidfd) };
    recycled || exited
}

/// Waits until process `pid` has ended (its fds closed), at most [`EXIT_WAIT_MS`]: it was
/// killed, and its exit is under way.
pub(crate) fn wait_exited(pid: libc::pid_t) {
    // SAFETY: pidfd_open takes plain integers; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) } as i32;
    if pidfd < 0 {
        return;
    }
    let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one pollfd, read and written by the kernel.
    unsafe { real::poll(&mut p, 1, EXIT_WAIT_MS) };
    // SAFETY: the pidfd opened above.
    unsafe { real::close(pidfd) };
}

/// How long the successor of a lock holder that died waits for its process to end (its
/// exit unmaps the family's mappings, the hugepages among them: milliseconds).
const EXIT_WAIT_MS: i32 = 1000;

/// Where process `pid`, started at `start` (0: unknown), stands, from one read of
/// /proc/PID/stat: no such process, a zombie or another process by now (its start time) is
/// [`Standing::Gone`]; PF_EXITING (0x4) in its flags (field 9), killed or exiting, its files
/// (pipes among them) being closed but not yet an exited process for a pidfd, is
/// [`Standing::Exiting`]: a process it forked that finds a pipe from it closed (PostgreSQL's
/// backends watch the postmaster that way) may get here before [`gone`] would tell.
pub(crate) fn standing(pid: libc::pid_t, start: u64) -> Standing {
    const PF_EXITING: u64 = 0x4;
    let mut buf = [0u8; 1024];
    let Some(stat) = u32::try_from(pid).ok().and_then(|p| crate::observe::region::read_proc_stat(p, &mut buf)) else {
        return Standing::Gone;
    };
    let Some(close) = stat.iter().rposition(|&b| b == b')') else { return Standing::Runs };
    let field = |n: usize| stat[close + 1..].split(|&b| b == b' ').filter(|f| !f.is_empty()).nth(n - 3);
    let number = |n: usize| field(n).and_then(|f| std::str::from_utf8(f).ok()?.parse::<u64>().ok());
    if matches!(field(3), Some(b"Z" | b"X")) || (start != 0 && number(22).is_some_and(|s| s != start)) {
        Standing::Gone
    } else if number(9).is_some_and(|f| f & PF_EXITING != 0) {
        Standing::Exiting
    } else {
        Standing::Runs
    }
}

/// What [`standing`] finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Standing {
    Runs,
    Exiting,
    Gone,
}

/// Process `pid`'s start time: /proc/PID/stat's 22nd field (clock ticks after boot).
pub(crate) fn start_time(pid: libc::pid_t) -> Option<u64> {
    crate::observe::region::start_time_of(u32::try_from(pid).ok()?)
}

/// Whether process `pid` runs (a zombie counts: its pid is not free yet).
pub(crate) fn runs(pid: libc::pid_t) -> bool {
    // SAFETY: kill with signal 0 sends nothing.
    let sent = unsafe { libc::kill(pid, 0) } == 0;
    sent || crate::last_errno().0 != libc::ESRCH
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_pid_is_the_callers_and_a_child_forked_behind_the_shims_back_reads_its_own() {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        assert_eq!(own_pid(), parent);
        assert_eq!(own_pid(), parent, "the second ask reads the page");
        let mut fds = [0i32; 2];
        // SAFETY: `fds` has room for the two fds pipe writes.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: the child only reads memory, calls getpid, writes the pipe and _exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            // SAFETY: getpid has no preconditions.
            let seen: [libc::pid_t; 2] = [own_pid(), unsafe { libc::getpid() }];
            // SAFETY: `seen` is readable for its size; the pipe's write end.
            unsafe {
                libc::write(fds[1], seen.as_ptr().cast(), std::mem::size_of_val(&seen));
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork failed");
        let mut seen = [0 as libc::pid_t; 2];
        // SAFETY: `seen` is writable for its size; the pipe's read end.
        let n = unsafe { libc::read(fds[0], seen.as_mut_ptr().cast(), std::mem::size_of_val(&seen)) };
        let mut status = 0;
        // SAFETY: our child; `status` is writable.
        unsafe { libc::waitpid(child, &mut status, 0) };
        // SAFETY: the pipe's fds, ours.
        unsafe { (libc::close(fds[0]), libc::close(fds[1])) };
        assert_eq!(n as usize, std::mem::size_of_val(&seen));
        assert_eq!(seen[1], child);
        assert_eq!(seen[0], child, "the child read {} (its parent is {parent})", seen[0]);
        assert_eq!(own_pid(), parent, "the parent's page is untouched by the child's ask");
    }
}
