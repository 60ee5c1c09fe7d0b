//! Calls on any file descriptor that matter to an accelerated one: close, fcntl (O_NONBLOCK,
//! F_DUPFD, F_SETOWN), ioctl (FIONBIO, FIONREAD, SIOCATMARK), dup/dup2/dup3.

use libc::{c_int, c_ulong};
use runtime::{real, tracked, Call};

use crate::{fail, int};

/// `ioctl` request: is the read position at the urgent mark (linux/sockios.h; not in libc).
const SIOCATMARK: c_ulong = 0x8905;

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    // SAFETY: close takes no memory: the real close gets the caller's fd.
    unsafe {
        if !tracked(fd) {
            return real::close(fd);
        }
        int(runtime::close(fd), || real::close(fd))
    }
}

/// # Safety
/// `arg` is what fcntl(2) takes for `cmd`.
unsafe fn fcntl_impl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: the real fcntl gets the caller's arguments unchanged (a pointer `arg` is passed
    // on, never read here: only F_SETFL's flags and F_DUPFD's result are looked at).
    unsafe {
        let r = real::fcntl(fd, cmd, arg);
        if r >= 0 && tracked(fd) {
            match cmd {
                libc::F_SETFL => runtime::set_nonblock(fd, arg as c_int & libc::O_NONBLOCK != 0),
                libc::F_DUPFD | libc::F_DUPFD_CLOEXEC => runtime::duplicated(fd, r),
                _ => {}
            }
        }
        r
    }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: fcntl(2)'s contract for `arg`, the caller's, is fcntl_impl's.
    unsafe { fcntl_impl(fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    // SAFETY: fcntl(2)'s contract for `arg`, the caller's, is fcntl_impl's.
    unsafe { fcntl_impl(fd, cmd, arg) }
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
    // SAFETY: FIONBIO, FIONREAD and SIOCATMARK take an int pointer in `arg` (ioctl(2)'s
    // contract, the caller's; read or written here only when non-zero); any other request's
    // `arg` goes to the real ioctl unread.
    unsafe {
        if tracked(fd) {
            if req == libc::FIONBIO as c_ulong && arg != 0 {
                runtime::set_nonblock(fd, *(arg as *const c_int) != 0);
            } else if req == libc::FIONREAD as c_ulong && arg != 0 {
                match runtime::readable_bytes(fd) {
                    Call::Kernel => {}
                    Call::Done(Ok(n)) => {
                        *(arg as *mut c_int) = n;
                        return 0;
                    }
                    Call::Done(Err(e)) => return fail(e),
                }
            } else if req == SIOCATMARK && arg != 0 {
                match runtime::at_mark(fd) {
                    Call::Kernel => {}
                    Call::Done(Ok(at)) => {
                        *(arg as *mut c_int) = at as c_int;
                        return 0;
                    }
                    Call::Done(Err(e)) => return fail(e),
                }
            }
        }
        real::ioctl(fd, req, arg)
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    // SAFETY: dup takes no memory: the real dup gets the caller's fd.
    unsafe {
        let new = real::dup(fd);
        if new >= 0 && tracked(fd) {
            runtime::duplicated(fd, new);
        }
        new
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, fd2: c_int) -> c_int {
    // SAFETY: dup2 takes no memory: the real dup2 gets the caller's fds.
    unsafe {
        let new = real::dup2(fd, fd2);
        if new >= 0 && (tracked(fd) || tracked(fd2)) {
            runtime::duplicated(fd, new);
        }
        new
    }
}

#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, fd2: c_int, flags: c_int) -> c_int {
    // SAFETY: dup3 takes no memory: the real dup3 gets the caller's fds and flags.
    unsafe {
        let new = real::dup3(fd, fd2, flags);
        if new >= 0 && (tracked(fd) || tracked(fd2)) {
            runtime::duplicated(fd, new);
        }
        new
    }
}
