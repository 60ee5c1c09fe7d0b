//! Readiness: epoll, poll/ppoll, select/pselect (through poll when an accelerated fd is among
//! them), with one timeout conversion that rounds up as the kernel does.

use libc::{c_int, nfds_t, pollfd};
use runtime::{real, tracked, Call, Errno};

use crate::{fail, int};

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    // SAFETY: epoll_create1 takes no memory.
    unsafe {
        let fd = real::epoll_create1(flags);
        runtime::epoll_created(fd);
        fd
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    // SAFETY: epoll_create1 takes no memory.
    unsafe {
        if size <= 0 {
            return fail(Errno::EINVAL);
        }
        epoll_create1(0)
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int {
    // SAFETY: epoll_ctl(2)'s contract, the caller's: `ev` is null or a valid epoll_event
    // (read here only when non-null).
    unsafe {
        if let Some(e) = runtime::forked_child_socket(fd) {
            return fail(e);
        }
        // A set the runtime keeps sees every epoll_ctl (it counts its kernel members).
        if !tracked(epfd) {
            return real::epoll_ctl(epfd, op, fd, ev);
        }
        let (events, data) = if ev.is_null() { (0, 0) } else { ((*ev).events, (*ev).u64) };
        int(runtime::epoll_ctl(epfd, op, fd, events, data), || real::epoll_ctl(epfd, op, fd, ev))
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, evs: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int {
    // SAFETY: epoll_wait(2)'s contract, the caller's: `evs` is writable for `max` (> 0
    // here) events.
    unsafe {
        if !tracked(epfd) || max <= 0 {
            runtime::before_kernel_wait();
            return real::epoll_wait(epfd, evs, max, timeout);
        }
        let out = match crate::c_slice_mut(evs, max as usize) {
            Ok(out) => out,
            Err(e) => return fail(e),
        };
        match runtime::epoll_wait(epfd, out, timeout) {
            Call::Kernel => {
                runtime::before_kernel_wait();
                real::epoll_wait(epfd, evs, max, timeout)
            }
            Call::Done(Ok(n)) => n as c_int,
            Call::Done(Err(e)) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait(
    epfd: c_int,
    evs: *mut libc::epoll_event,
    max: c_int,
    timeout: c_int,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: epoll_pwait(2)'s contract, the caller's: `evs` as for epoll_wait, `sigmask`
    // a valid sigset (non-null here); `old` is ours and all-zero is a valid (empty) sigset_t;
    // errno is this thread's.
    unsafe {
        if sigmask.is_null() {
            return epoll_wait(epfd, evs, max, timeout);
        }
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_SETMASK, sigmask, &mut old);
        let r = epoll_wait(epfd, evs, max, timeout);
        let e = *libc::__errno_location();
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        *libc::__errno_location() = e;
        r
    }
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    evs: *mut libc::epoll_event,
    max: c_int,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: epoll_pwait2(2)'s contract, the caller's: `timeout` null or a valid
    // timespec (timespec_ns's contract), `evs` and `sigmask` as for epoll_pwait.
    unsafe { epoll_pwait(epfd, evs, max, timeout_ms(timespec_ns(timeout)), sigmask) }
}

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    // SAFETY: poll(2)'s contract, the caller's: `fds` holds `n` pollfds, read and written.
    unsafe {
        let Ok(slice @ [_, ..]) = crate::c_slice_mut(fds, n as usize) else { return real::poll(fds, n, timeout) };
        match runtime::poll(slice, timeout) {
            Call::Kernel => real::poll(fds, n, timeout),
            Call::Done(Ok(k)) => k as c_int,
            Call::Done(Err(e)) => fail(e),
        }
    }
}

/// The bits of an fd set of `nfds` fds, as select(2) passes it: an array of longs with as many
/// bits as the caller needs, which may be more than `fd_set`'s FD_SETSIZE (1024) when the
/// program allocated a larger one (Linux accepts any `nfds` up to its fd limit). libc's
/// FD_ISSET/FD_SET are bounds-checked against FD_SETSIZE: a select with an fd past 1024 among
/// an accelerated one panicked inside the hook, which aborted the program.
mod fd_bits {
    const BITS: usize = 8 * std::mem::size_of::<libc::c_ulong>();

    /// # Safety
    /// `set` points to at least `fd / BITS + 1` longs.
    pub(super) unsafe fn is_set(set: *const libc::fd_set, fd: usize) -> bool {
        // SAFETY: the caller's: the word that holds bit `fd` is within the set.
        let word = unsafe { set.cast::<libc::c_ulong>().add(fd / BITS).read_unaligned() };
        word >> (fd % BITS) & 1 != 0
    }

    /// # Safety
    /// As [`is_set`], and writable.
    pub(super) unsafe fn set(set: *mut libc::fd_set, fd: usize) {
        // SAFETY: the caller's, as for `is_set`.
        unsafe {
            let p = set.cast::<libc::c_ulong>().add(fd / BITS);
            p.write_unaligned(p.read_unaligned() | (1 as libc::c_ulong) << (fd % BITS));
        }
    }

    /// Clears the bits of fds `0..nfds` (the words that hold them).
    /// # Safety
    /// `set` points to at least `nfds.div_ceil(BITS)` writable longs.
    pub(super) unsafe fn zero(set: *mut libc::fd_set, nfds: usize) {
        for k in 0..nfds.div_ceil(BITS) {
            // SAFETY: the caller's: word `k` is within the set.
            unsafe { set.cast::<libc::c_ulong>().add(k).write_unaligned(0) };
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn bits_past_fd_setsize_are_read_written_and_cleared_within_nfds_only() {
            let mut words = [0 as libc::c_ulong; 4096 / super::BITS + 1];
            let set = words.as_mut_ptr().cast::<libc::fd_set>();
            // SAFETY: `words` holds 4096 + BITS bits.
            unsafe {
                super::set(set, 3000);
                super::set(set, 5);
                assert!(super::is_set(set, 3000) && super::is_set(set, 5));
                assert!(!super::is_set(set, 2999) && !super::is_set(set, 3001));
                *words.last_mut().unwrap() = 1;
                super::zero(set, 4096);
                assert!(!super::is_set(set, 3000) && !super::is_set(set, 5));
            }
            assert_eq!(*words.last().unwrap(), 1, "words past nfds are not the caller's to clear");
        }
    }
}

/// The fd_set bits as poll entries, and back (select and pselect are poll underneath).
/// # Safety
/// `r`, `w` and `e` are null or valid fd_sets, as select(2) requires.
unsafe fn select_via_poll(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout_ms: c_int,
) -> Option<c_int> {
    // SAFETY: each non-null set holds bits for `nfds` fds (the caller's contract), which is
    // what fd_bits reads and writes; `fds` is our own Vec of pollfds.
    unsafe {
        let mut fds: Vec<pollfd> = Vec::new();
        let mut any_ours = false;
        for fd in 0..nfds.max(0) {
            let mut events = 0;
            if !r.is_null() && fd_bits::is_set(r, fd as usize) {
                events |= libc::POLLIN;
            }
            if !w.is_null() && fd_bits::is_set(w, fd as usize) {
                events |= libc::POLLOUT;
            }
            if !e.is_null() && fd_bits::is_set(e, fd as usize) {
                events |= libc::POLLPRI;
            }
            if events != 0 {
                any_ours |= tracked(fd);
                fds.push(pollfd { fd, events, revents: 0 });
            }
        }
        if !any_ours {
            runtime::before_kernel_wait();
            return None;
        }
        let n = match runtime::poll(&mut fds, timeout_ms) {
            Call::Kernel => real::poll(fds.as_mut_ptr(), fds.len() as nfds_t, timeout_ms),
            Call::Done(Ok(n)) => n as c_int,
            Call::Done(Err(err)) => return Some(fail(err)),
        };
        if n < 0 {
            return Some(n);
        }
        for set in [r, w, e] {
            if !set.is_null() {
                fd_bits::zero(set, nfds as usize);
            }
        }
        let mut count = 0;
        for p in &fds {
            let bad = p.revents & libc::POLLNVAL != 0;
            if bad {
                return Some(fail(Errno::EBADF));
            }
            if !r.is_null()
                && p.events & libc::POLLIN != 0
                && p.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            {
                fd_bits::set(r, p.fd as usize);
                count += 1;
            }
            if !w.is_null() && p.events & libc::POLLOUT != 0 && p.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
                fd_bits::set(w, p.fd as usize);
                count += 1;
            }
            if !e.is_null() && p.events & libc::POLLPRI != 0 && p.revents & libc::POLLPRI != 0 {
                fd_bits::set(e, p.fd as usize);
                count += 1;
            }
        }
        Some(count)
    }
}

/// A timeout as poll(2) takes it, in ms (-1: none), rounded up as the kernel does: a wait must
/// never end before the time asked for. One rule for select, pselect, ppoll and epoll_pwait2.
fn timeout_ms(ns: Option<i64>) -> c_int {
    match ns {
        None => -1,
        Some(ns) => ((ns.max(0) + 999_999) / 1_000_000).min(i64::from(i32::MAX)) as c_int,
    }
}

/// # Safety
/// `ts` is null or a valid timespec.
unsafe fn timespec_ns(ts: *const libc::timespec) -> Option<i64> {
    // SAFETY: a non-null `ts` is a valid timespec (the caller's contract).
    unsafe { (!ts.is_null()).then(|| (*ts).tv_sec.saturating_mul(1_000_000_000).saturating_add((*ts).tv_nsec)) }
}

#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    // SAFETY: select(2)'s contract, the caller's: the sets null or valid fd_sets
    // (select_via_poll's contract), `tv` null or a valid timeval, passed on unchanged.
    unsafe {
        let ns =
            (!tv.is_null()).then(|| (*tv).tv_sec.saturating_mul(1_000_000_000).saturating_add((*tv).tv_usec * 1000));
        match select_via_poll(nfds, r, w, e, timeout_ms(ns)) {
            Some(n) => n,
            None => real::select(nfds, r, w, e, tv),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn pselect(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: pselect(2)'s contract, the caller's: the sets as for select, `ts` null or a
    // valid timespec, `mask` null or a valid sigset; `old` is ours (all-zero is an empty
    // sigset_t); errno is this thread's.
    unsafe {
        let ms = timeout_ms(timespec_ns(ts));
        let mut old: libc::sigset_t = std::mem::zeroed();
        if !mask.is_null() {
            libc::pthread_sigmask(libc::SIG_SETMASK, mask, &mut old);
        }
        let r = match select_via_poll(nfds, r, w, e, ms) {
            Some(n) => n,
            None => real::pselect(nfds, r, w, e, ts, std::ptr::null()),
        };
        if !mask.is_null() {
            let saved = *libc::__errno_location();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            *libc::__errno_location() = saved;
        }
        r
    }
}

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    // SAFETY: ppoll(2)'s contract, the caller's: `fds` holds `n` pollfds, `ts` null or a valid
    // timespec, `mask` null or a valid sigset; `old` is ours; errno is this thread's. The
    // slice is not used after `poll` takes `fds` again.
    unsafe {
        let slice = crate::c_slice_mut(fds, n as usize).unwrap_or(&mut []);
        if !slice.iter().any(|p| tracked(p.fd)) {
            runtime::before_kernel_wait();
            return real::ppoll(fds, n, ts, mask);
        }
        let ms = timeout_ms(timespec_ns(ts));
        let mut old: libc::sigset_t = std::mem::zeroed();
        if !mask.is_null() {
            libc::pthread_sigmask(libc::SIG_SETMASK, mask, &mut old);
        }
        let r = poll(fds, n, ms);
        if !mask.is_null() {
            let saved = *libc::__errno_location();
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            *libc::__errno_location() = saved;
        }
        r
    }
}
