//! Socket setup and names: socket, bind, listen, accept, connect, getsockname/getpeername,
//! setsockopt/getsockopt (TCP_INFO in Linux's layout), shutdown.

use libc::{c_int, c_void, sockaddr, socklen_t};
use runtime::{real, tracked, Call, Errno};

use crate::{fail, int, to_addr, write_addr};

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    // SAFETY: socket takes no memory.
    unsafe {
        let fd = real::socket(domain, ty, protocol);
        runtime::socket_created(fd, domain, ty, protocol);
        fd
    }
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: bind(2)'s contract, the caller's: `addr` is readable for `len` bytes
    // (to_addr's contract) and goes on to the real bind unchanged.
    unsafe {
        gate!(fd, real::bind(fd, addr, len));
        match to_addr(addr, len) {
            Some(sa) => int(runtime::bind(fd, sa), || real::bind(fd, addr, len)),
            None => real::bind(fd, addr, len),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    // SAFETY: listen takes no memory.
    unsafe {
        gate!(fd, real::listen(fd, backlog));
        int(runtime::listen(fd, backlog), || real::listen(fd, backlog))
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    // SAFETY: accept4(2)'s contract, the caller's: `addr` and `len` null or valid, `addr`
    // writable for `*len` bytes (write_addr's contract).
    unsafe {
        gate!(fd, real::accept4(fd, addr, len, flags));
        match runtime::accept(fd, flags) {
            Call::Kernel => real::accept4(fd, addr, len, flags),
            Call::Done(Ok((newfd, peer))) => {
                write_addr(peer, addr, len);
                newfd
            }
            Call::Done(Err(e)) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: accept(2)'s contract, the caller's, which is accept4's.
    unsafe {
        if !tracked(fd) {
            return real::accept(fd, addr, len);
        }
        accept4(fd, addr, len, 0)
    }
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    // SAFETY: connect(2)'s contract, the caller's: `addr` null or readable for `len`
    // bytes (to_addr's contract; the family is read only when `len` covers it).
    unsafe {
        gate!(fd, real::connect(fd, addr, len));
        if runtime::datagram(fd) && !addr.is_null() && (*addr).sa_family as c_int == libc::AF_UNSPEC {
            return int(runtime::disconnect(fd), || real::connect(fd, addr, len));
        }
        match to_addr(addr, len) {
            Some(sa) => int(runtime::connect(fd, sa), || real::connect(fd, addr, len)),
            None => real::connect(fd, addr, len),
        }
    }
}

/// # Safety
/// `addr` and `len` are null or valid as getsockname(2) requires.
unsafe fn name(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, peer: bool) -> c_int {
    // SAFETY: `addr` and `len` are null or valid as getsockname(2) takes them (the
    // caller's contract, write_addr's).
    unsafe {
        match runtime::sockname(fd, peer) {
            Call::Kernel if peer => real::getpeername(fd, addr, len),
            Call::Kernel => real::getsockname(fd, addr, len),
            Call::Done(Ok(sa)) => {
                write_addr(sa, addr, len);
                0
            }
            Call::Done(Err(e)) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: getsockname(2)'s contract, the caller's, which is name's.
    unsafe {
        gate!(fd, real::getsockname(fd, addr, len));
        name(fd, addr, len, false)
    }
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    // SAFETY: getpeername(2)'s contract, the caller's, which is name's.
    unsafe {
        gate!(fd, real::getpeername(fd, addr, len));
        name(fd, addr, len, true)
    }
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, opt: c_int, val: *const c_void, len: socklen_t) -> c_int {
    // SAFETY: setsockopt(2)'s contract, the caller's: `val` is readable for `len` bytes.
    unsafe {
        gate!(fd, real::setsockopt(fd, level, opt, val, len));
        let bytes = match crate::c_slice(val as *const u8, len as usize) {
            Ok(bytes) => bytes,
            Err(e) => return fail(e),
        };
        int(runtime::setsockopt(fd, level, opt, bytes), || real::setsockopt(fd, level, opt, val, len))
    }
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    // SAFETY: getsockopt(2)'s contract, the caller's: non-null `val` and `len` are valid,
    // `val` writable for `*len` bytes; the TCP_INFO copy takes at most `*len` bytes of our
    // tcp_info, a local that cannot overlap `val`.
    unsafe {
        gate!(fd, real::getsockopt(fd, level, opt, val, len));
        if level == libc::IPPROTO_TCP && opt == libc::TCP_INFO && !val.is_null() && !len.is_null() {
            return match runtime::tcp_info(fd) {
                Call::Kernel => real::getsockopt(fd, level, opt, val, len),
                Call::Done(Ok(info)) => {
                    let n = (*len as usize).min(std::mem::size_of::<libc::tcp_info>());
                    std::ptr::copy_nonoverlapping(&info as *const _ as *const u8, val as *mut u8, n);
                    *len = n as socklen_t;
                    0
                }
                Call::Done(Err(e)) => fail(e),
            };
        }
        if val.is_null() || len.is_null() {
            return match runtime::getsockopt(fd, level, opt, &mut []) {
                Call::Kernel => real::getsockopt(fd, level, opt, val, len),
                _ => fail(Errno(libc::EFAULT)),
            };
        }
        let out = match crate::c_slice_mut(val as *mut u8, *len as usize) {
            Ok(out) => out,
            Err(e) => return fail(e),
        };
        match runtime::getsockopt(fd, level, opt, out) {
            Call::Kernel => real::getsockopt(fd, level, opt, val, len),
            Call::Done(Ok(n)) => {
                *len = n as socklen_t;
                0
            }
            Call::Done(Err(e)) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    // SAFETY: shutdown takes no memory.
    unsafe {
        gate!(fd, real::shutdown(fd, how));
        int(runtime::shutdown(fd, how), || real::shutdown(fd, how))
    }
}
