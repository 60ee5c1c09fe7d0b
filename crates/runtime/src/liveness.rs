//! Whether another process still runs, as the family needs to know it: a pidfd (exited,
//! zombies included), the start time in /proc (a recycled pid is another process). Owns no
//! state; used by `family` (its process table and the lock's dead holder) and `passing`.

use crate::real;

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
