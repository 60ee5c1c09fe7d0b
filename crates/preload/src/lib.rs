//! `libpronghorn.so`: the functions an unmodified program calls, interposed with LD_PRELOAD.
//!
//! Only interposition lives here: each hook converts C arguments, asks `runtime` whether the fd
//! is one of ours (one atomic load for a kernel fd), and either calls the real libc function or
//! turns the runtime's answer into a return value and `errno`. No logic, no state.
//!
//! Variadic `fcntl` and `ioctl` are declared with a third integer argument: on x86-64 (SysV)
//! variadic integer arguments travel in the same registers, and the value is only passed on.

#![allow(clippy::missing_safety_doc)]

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{c_int, c_ulong, c_void, iovec, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};
use runtime::{real, tracked, Call, Errno};

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
            Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)), u16::from_be(a.sin_port))))
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

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let fd = real::socket(domain, ty, protocol);
    runtime::socket_created(fd, domain, ty);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !tracked(fd) {
        return real::bind(fd, addr, len);
    }
    match to_addr(addr, len) {
        Some(sa) => int(runtime::bind(fd, sa), || real::bind(fd, addr, len)),
        None => real::bind(fd, addr, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    if !tracked(fd) {
        return real::listen(fd, backlog);
    }
    int(runtime::listen(fd, backlog), || real::listen(fd, backlog))
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
    if !tracked(fd) {
        return real::accept4(fd, addr, len, flags);
    }
    match runtime::accept(fd, flags) {
        Call::Kernel => real::accept4(fd, addr, len, flags),
        Call::Done(Ok((newfd, peer))) => {
            write_addr(peer, addr, len);
            newfd
        }
        Call::Done(Err(e)) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !tracked(fd) {
        return real::accept(fd, addr, len);
    }
    accept4(fd, addr, len, 0)
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    if !tracked(fd) {
        return real::connect(fd, addr, len);
    }
    match to_addr(addr, len) {
        Some(sa) => int(runtime::connect(fd, sa), || real::connect(fd, addr, len)),
        None => real::connect(fd, addr, len),
    }
}

unsafe fn name(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, peer: bool) -> c_int {
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

#[no_mangle]
pub unsafe extern "C" fn getsockname(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !tracked(fd) {
        return real::getsockname(fd, addr, len);
    }
    name(fd, addr, len, false)
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !tracked(fd) {
        return real::getpeername(fd, addr, len);
    }
    name(fd, addr, len, true)
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, opt: c_int, val: *const c_void, len: socklen_t) -> c_int {
    if !tracked(fd) {
        return real::setsockopt(fd, level, opt, val, len);
    }
    let v = (len as usize >= 4 && !val.is_null()).then(|| *(val as *const c_int));
    int(runtime::setsockopt(fd, level, opt, v), || real::setsockopt(fd, level, opt, val, len))
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(fd: c_int, level: c_int, opt: c_int, val: *mut c_void, len: *mut socklen_t) -> c_int {
    if !tracked(fd) {
        return real::getsockopt(fd, level, opt, val, len);
    }
    match runtime::getsockopt_int(fd, level, opt) {
        Call::Kernel => real::getsockopt(fd, level, opt, val, len),
        Call::Done(Ok(v)) => {
            if val.is_null() || len.is_null() || (*len as usize) < 4 {
                return fail(Errno::EINVAL);
            }
            *(val as *mut c_int) = v;
            *len = 4;
            0
        }
        Call::Done(Err(e)) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    if !tracked(fd) {
        return real::read(fd, buf, n);
    }
    let b = std::slice::from_raw_parts_mut(buf as *mut u8, n);
    size(runtime::recv(fd, b, false), || real::read(fd, buf, n))
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    if !tracked(fd) {
        return real::recv(fd, buf, n, flags);
    }
    if flags & libc::MSG_PEEK != 0 {
        return fail(Errno::EOPNOTSUPP);
    }
    let b = std::slice::from_raw_parts_mut(buf as *mut u8, n);
    size(runtime::recv(fd, b, flags & libc::MSG_DONTWAIT != 0), || real::recv(fd, buf, n, flags))
}

#[no_mangle]
pub unsafe extern "C" fn recvfrom(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    if !tracked(fd) {
        return real::recvfrom(fd, buf, n, flags, addr, len);
    }
    let r = recv(fd, buf, n, flags);
    if r >= 0 && !addr.is_null() {
        if let Call::Done(Ok(peer)) = runtime::sockname(fd, true) {
            write_addr(peer, addr, len);
        }
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    if !tracked(fd) {
        return real::write(fd, buf, n);
    }
    let b = std::slice::from_raw_parts(buf as *const u8, n);
    size(runtime::send(fd, b, false), || real::write(fd, buf, n))
}

unsafe fn send_flags(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    let b = std::slice::from_raw_parts(buf as *const u8, n);
    match runtime::send(fd, b, flags & libc::MSG_DONTWAIT != 0) {
        Call::Done(Err(e)) if e == Errno::EPIPE && flags & libc::MSG_NOSIGNAL != 0 => fail(e),
        r => size(r, || real::send(fd, buf, n, flags)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    if !tracked(fd) {
        return real::send(fd, buf, n, flags);
    }
    send_flags(fd, buf, n, flags)
}

#[no_mangle]
pub unsafe extern "C" fn sendto(
    fd: c_int,
    buf: *const c_void,
    n: size_t,
    flags: c_int,
    addr: *const sockaddr,
    len: socklen_t,
) -> ssize_t {
    if !tracked(fd) {
        return real::sendto(fd, buf, n, flags, addr, len);
    }
    send_flags(fd, buf, n, flags)
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if !tracked(fd) {
        return real::readv(fd, iov, cnt);
    }
    let iovs = std::slice::from_raw_parts(iov, cnt.max(0) as usize);
    let mut total: ssize_t = 0;
    for v in iovs {
        if v.iov_len == 0 {
            continue;
        }
        let r = read(fd, v.iov_base, v.iov_len);
        if r < 0 {
            return if total > 0 { total } else { r };
        }
        total += r;
        if (r as usize) < v.iov_len {
            break;
        }
        // Only the first read may block.
        if runtime::readable_bytes_nonzero(fd) != Some(true) {
            break;
        }
    }
    total
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    if !tracked(fd) {
        return real::writev(fd, iov, cnt);
    }
    let iovs = std::slice::from_raw_parts(iov, cnt.max(0) as usize);
    let mut data = Vec::with_capacity(iovs.iter().map(|v| v.iov_len).sum());
    for v in iovs {
        data.extend_from_slice(std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len));
    }
    size(runtime::send(fd, &data, false), || real::writev(fd, iov, cnt))
}

#[no_mangle]
pub unsafe extern "C" fn close(fd: c_int) -> c_int {
    if !tracked(fd) {
        return real::close(fd);
    }
    int(runtime::close(fd), || real::close(fd))
}

#[no_mangle]
pub unsafe extern "C" fn shutdown(fd: c_int, how: c_int) -> c_int {
    if !tracked(fd) {
        return real::shutdown(fd, how);
    }
    int(runtime::shutdown(fd, how), || real::shutdown(fd, how))
}

unsafe fn fcntl_impl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    let r = real::fcntl(fd, cmd, arg);
    if r >= 0 && cmd == libc::F_SETFL && tracked(fd) {
        runtime::set_nonblock(fd, arg as c_int & libc::O_NONBLOCK != 0);
    }
    r
}

#[no_mangle]
pub unsafe extern "C" fn fcntl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    fcntl_impl(fd, cmd, arg)
}

#[no_mangle]
pub unsafe extern "C" fn fcntl64(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
    fcntl_impl(fd, cmd, arg)
}

#[no_mangle]
pub unsafe extern "C" fn ioctl(fd: c_int, req: c_ulong, arg: c_ulong) -> c_int {
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
        }
    }
    real::ioctl(fd, req, arg)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create1(flags: c_int) -> c_int {
    let fd = real::epoll_create1(flags);
    runtime::epoll_created(fd);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn epoll_create(size: c_int) -> c_int {
    if size <= 0 {
        return fail(Errno::EINVAL);
    }
    epoll_create1(0)
}

#[no_mangle]
pub unsafe extern "C" fn epoll_ctl(epfd: c_int, op: c_int, fd: c_int, ev: *mut libc::epoll_event) -> c_int {
    if !tracked(epfd) || !tracked(fd) {
        return real::epoll_ctl(epfd, op, fd, ev);
    }
    let (events, data) = if ev.is_null() { (0, 0) } else { ((*ev).events, (*ev).u64) };
    int(runtime::epoll_ctl(epfd, op, fd, events, data), || real::epoll_ctl(epfd, op, fd, ev))
}

#[no_mangle]
pub unsafe extern "C" fn epoll_wait(epfd: c_int, evs: *mut libc::epoll_event, max: c_int, timeout: c_int) -> c_int {
    if !tracked(epfd) || max <= 0 {
        return real::epoll_wait(epfd, evs, max, timeout);
    }
    let out = std::slice::from_raw_parts_mut(evs, max as usize);
    match runtime::epoll_wait(epfd, out, timeout) {
        Call::Kernel => real::epoll_wait(epfd, evs, max, timeout),
        Call::Done(Ok(n)) => n as c_int,
        Call::Done(Err(e)) => fail(e),
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

#[no_mangle]
pub unsafe extern "C" fn poll(fds: *mut pollfd, n: nfds_t, timeout: c_int) -> c_int {
    if fds.is_null() || n == 0 {
        return real::poll(fds, n, timeout);
    }
    let slice = std::slice::from_raw_parts_mut(fds, n as usize);
    match runtime::poll(slice, timeout) {
        Call::Kernel => real::poll(fds, n, timeout),
        Call::Done(Ok(k)) => k as c_int,
        Call::Done(Err(e)) => fail(e),
    }
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let pid = real::fork();
    if pid == 0 {
        runtime::after_fork_in_child();
    }
    pid
}
