//! `libpronghorn.so`: the functions an unmodified program calls, interposed with LD_PRELOAD.
//!
//! Only interposition lives here: each hook converts C arguments, asks `runtime` whether the fd
//! is one of ours (one atomic load for a kernel fd), and either calls the real libc function or
//! turns the runtime's answer into a return value and `errno`. No logic, no state. Every real
//! call goes through `runtime::real` (resolved once).
//!
//! Files by family: `socket` (setup, names, options), `io` (data transfer), `datagram` (the
//! same on UDP fds), `poll` (epoll, poll, select), `fd` (close, fcntl, ioctl, dup), `process`
//! (fork, credentials), `fortified` (the `__*_chk` variants); this file holds the ABI helpers.
//!
//! Variadic `fcntl` and `ioctl` are declared with a third integer argument: on x86-64 (SysV)
//! variadic integer arguments travel in the same registers, and the value is only passed on.

#![allow(clippy::missing_safety_doc)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{c_int, sockaddr, socklen_t, ssize_t};
use runtime::{Call, Errno};

/// The prologue of every socket hook: a kernel fd goes straight to the real function (one atomic
/// load); an accelerated fd inherited through fork fails (see `runtime::forked_child_socket`).
macro_rules! gate {
    ($fd:expr, $real:expr) => {
        if !runtime::tracked($fd) {
            return $real;
        }
        if let Some(e) = runtime::forked_child_socket($fd) {
            return $crate::fail(e);
        }
    };
}

mod datagram;
mod fd;
mod fortified;
mod io;
mod poll;
mod process;
mod socket;

thread_local! {
    /// A thread's buffer for what cannot go straight through: a datagram gathered from or
    /// scattered to several iovecs, a sendfile chunk, urgent data sent with sendmsg (reused).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with the thread's scratch buffer (a fresh one if a signal handler interrupted a
/// call that holds it).
fn with_scratch<T>(f: impl FnOnce(&mut Vec<u8>) -> T) -> T {
    SCRATCH.with(|s| match s.try_borrow_mut() {
        Ok(mut s) => f(&mut s),
        Err(_) => f(&mut Vec::new()),
    })
}

/// The caller's iovecs as the slices the runtime takes: `IoSlice` and `IoSliceMut` have
/// `iovec`'s layout on Unix (std guarantees it), so nothing is copied.
unsafe fn io_slices<'a>(iov: *const libc::iovec, cnt: usize) -> &'a [std::io::IoSlice<'a>] {
    if iov.is_null() || cnt == 0 {
        return &[];
    }
    std::slice::from_raw_parts(iov.cast(), cnt)
}

unsafe fn io_slices_mut<'a>(iov: *const libc::iovec, cnt: usize) -> &'a mut [std::io::IoSliceMut<'a>] {
    if iov.is_null() || cnt == 0 {
        return &mut [];
    }
    std::slice::from_raw_parts_mut(iov as *mut std::io::IoSliceMut<'a>, cnt)
}

fn set_errno(e: Errno) {
    unsafe { *libc::__errno_location() = e.0 };
}

fn fail<T: From<i8>>(e: Errno) -> T {
    set_errno(e);
    T::from(-1)
}

unsafe fn to_addr(addr: *const sockaddr, len: socklen_t) -> Option<SocketAddr> {
    if addr.is_null() {
        return None;
    }
    match (*addr).sa_family as c_int {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            let a = &*(addr as *const libc::sockaddr_in);
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            let a = &*(addr as *const libc::sockaddr_in6);
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Writes `sa` the way the kernel does: truncated to `*len`, `*len` set to the full size.
unsafe fn write_addr(sa: SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    let mut storage: libc::sockaddr_storage = std::mem::zeroed();
    let size = match sa {
        SocketAddr::V4(v4) => {
            let a = &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in);
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_port = v4.port().to_be();
            a.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let a = &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6);
            a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            a.sin6_port = v6.port().to_be();
            a.sin6_addr.s6_addr = v6.ip().octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    let n = size.min(*len as usize);
    std::ptr::copy_nonoverlapping(&storage as *const _ as *const u8, addr as *mut u8, n);
    *len = size as socklen_t;
}

fn int(r: Call<()>, kernel: impl FnOnce() -> c_int) -> c_int {
    match r {
        Call::Kernel => kernel(),
        Call::Done(Ok(())) => 0,
        Call::Done(Err(e)) => fail(e),
    }
}

fn size(r: Call<usize>, kernel: impl FnOnce() -> ssize_t) -> ssize_t {
    match r {
        Call::Kernel => kernel(),
        Call::Done(Ok(n)) => n as ssize_t,
        Call::Done(Err(e)) => {
            if e == Errno::EPIPE {
                unsafe { libc::raise(libc::SIGPIPE) };
            }
            fail(e)
        }
    }
}
