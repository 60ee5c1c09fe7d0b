//! `libpronghorn.so`: the functions an unmodified program calls, interposed with LD_PRELOAD.
//!
//! Only interposition lives here: each hook converts C arguments, asks `runtime` whether the fd
//! is one of ours (one atomic load for a kernel fd), and either calls the real libc function or
//! turns the runtime's answer into a return value and `errno`. No logic, no state.
//!
//! Variadic `fcntl` and `ioctl` are declared with a third integer argument: on x86-64 (SysV)
//! variadic integer arguments travel in the same registers, and the value is only passed on.

#![allow(clippy::missing_safety_doc)]

mod datagram;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use libc::{c_int, c_ulong, c_void, iovec, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};
use runtime::{real, tracked, Call, Errno};

/// `ioctl` request: is the read position at the urgent mark (linux/sockios.h; not in libc).
const SIOCATMARK: c_ulong = 0x8905;

/// The prologue of every socket hook: a kernel fd goes straight to the real function (one atomic
/// load); an accelerated fd inherited through fork fails (see `runtime::forked_child_socket`).
macro_rules! gate {
    ($fd:expr, $real:expr) => {
        if !tracked($fd) {
            return $real;
        }
        if let Some(e) = runtime::forked_child_socket($fd) {
            return fail(e);
        }
    };
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

#[no_mangle]
pub unsafe extern "C" fn socket(domain: c_int, ty: c_int, protocol: c_int) -> c_int {
    let fd = real::socket(domain, ty, protocol);
    runtime::socket_created(fd, domain, ty, protocol);
    fd
}

#[no_mangle]
pub unsafe extern "C" fn bind(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    gate!(fd, real::bind(fd, addr, len));
    match to_addr(addr, len) {
        Some(sa) => int(runtime::bind(fd, sa), || real::bind(fd, addr, len)),
        None => real::bind(fd, addr, len),
    }
}

#[no_mangle]
pub unsafe extern "C" fn listen(fd: c_int, backlog: c_int) -> c_int {
    gate!(fd, real::listen(fd, backlog));
    int(runtime::listen(fd, backlog), || real::listen(fd, backlog))
}

#[no_mangle]
pub unsafe extern "C" fn accept4(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t, flags: c_int) -> c_int {
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

#[no_mangle]
pub unsafe extern "C" fn accept(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    if !tracked(fd) {
        return real::accept(fd, addr, len);
    }
    accept4(fd, addr, len, 0)
}

#[no_mangle]
pub unsafe extern "C" fn connect(fd: c_int, addr: *const sockaddr, len: socklen_t) -> c_int {
    gate!(fd, real::connect(fd, addr, len));
    if runtime::datagram(fd) && !addr.is_null() && (*addr).sa_family as c_int == libc::AF_UNSPEC {
        return int(runtime::disconnect(fd), || real::connect(fd, addr, len));
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
    gate!(fd, real::getsockname(fd, addr, len));
    name(fd, addr, len, false)
}

#[no_mangle]
pub unsafe extern "C" fn getpeername(fd: c_int, addr: *mut sockaddr, len: *mut socklen_t) -> c_int {
    gate!(fd, real::getpeername(fd, addr, len));
    name(fd, addr, len, true)
}

#[no_mangle]
pub unsafe extern "C" fn setsockopt(fd: c_int, level: c_int, opt: c_int, val: *const c_void, len: socklen_t) -> c_int {
    gate!(fd, real::setsockopt(fd, level, opt, val, len));
    let bytes = if val.is_null() { &[][..] } else { std::slice::from_raw_parts(val as *const u8, len as usize) };
    int(runtime::setsockopt(fd, level, opt, bytes), || real::setsockopt(fd, level, opt, val, len))
}

#[no_mangle]
pub unsafe extern "C" fn getsockopt(
    fd: c_int,
    level: c_int,
    opt: c_int,
    val: *mut c_void,
    len: *mut socklen_t,
) -> c_int {
    gate!(fd, real::getsockopt(fd, level, opt, val, len));
    if level == libc::IPPROTO_TCP && opt == libc::TCP_INFO && !val.is_null() && !len.is_null() {
        return match runtime::tcp_info(fd) {
            Call::Kernel => real::getsockopt(fd, level, opt, val, len),
            Call::Done(Ok(info)) => {
                let t = linux_tcp_info(&info);
                let n = (*len as usize).min(std::mem::size_of::<libc::tcp_info>());
                std::ptr::copy_nonoverlapping(&t as *const _ as *const u8, val as *mut u8, n);
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
    let out = std::slice::from_raw_parts_mut(val as *mut u8, *len as usize);
    match runtime::getsockopt(fd, level, opt, out) {
        Call::Kernel => real::getsockopt(fd, level, opt, val, len),
        Call::Done(Ok(n)) => {
            *len = n as socklen_t;
            0
        }
        Call::Done(Err(e)) => fail(e),
    }
}

/// Linux's `struct tcp_info` from the connection's snapshot (times in microseconds).
fn linux_tcp_info(i: &runtime::TcpInfoSnapshot) -> libc::tcp_info {
    let mut t: libc::tcp_info = unsafe { std::mem::zeroed() };
    t.tcpi_state = match i.state {
        stack::TcpState::Established => 1,
        stack::TcpState::SynSent => 2,
        stack::TcpState::SynReceived => 3,
        stack::TcpState::FinWait1 => 4,
        stack::TcpState::FinWait2 => 5,
        stack::TcpState::TimeWait => 6,
        stack::TcpState::Closed => 7,
        stack::TcpState::CloseWait => 8,
        stack::TcpState::LastAck => 9,
        stack::TcpState::Closing => 11,
    };
    t.tcpi_backoff = i.backoff;
    t.tcpi_retransmits = i.backoff;
    t.tcpi_options = (i.timestamps as u8) | ((i.sack as u8) << 1) | (((i.snd_wscale.is_some()) as u8) << 2);
    t.tcpi_snd_rcv_wscale = i.snd_wscale.unwrap_or(0) | (i.rcv_wscale.unwrap_or(0) << 4);
    t.tcpi_rto = (i.rto / 1000) as u32;
    t.tcpi_snd_mss = i.snd_mss;
    t.tcpi_rcv_mss = i.rcv_mss;
    t.tcpi_rtt = (i.rtt / 1000) as u32;
    t.tcpi_rttvar = (i.rttvar / 1000) as u32;
    t.tcpi_snd_ssthresh = i.ssthresh / i.snd_mss.max(1);
    t.tcpi_snd_cwnd = i.cwnd / i.snd_mss.max(1);
    t.tcpi_total_retrans = i.total_retransmits;
    t.tcpi_unacked = i.bytes_in_flight / i.snd_mss.max(1);
    t
}

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    gate!(fd, real::read(fd, buf, n));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf, n);
        return datagram::recv(fd, &iov, 1, 0, std::ptr::null_mut(), std::ptr::null_mut(), None)
            .unwrap_or_else(|| real::read(fd, buf, n));
    }
    let b = std::slice::from_raw_parts_mut(buf as *mut u8, n);
    size(runtime::recv(fd, b, false), || real::read(fd, buf, n))
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    gate!(fd, real::recv(fd, buf, n, flags));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf, n);
        return datagram::recv(fd, &iov, 1, flags, std::ptr::null_mut(), std::ptr::null_mut(), None)
            .unwrap_or_else(|| real::recv(fd, buf, n, flags));
    }
    let b = std::slice::from_raw_parts_mut(buf as *mut u8, n);
    let r = if flags & libc::MSG_OOB != 0 {
        runtime::recv_urgent(fd, b, flags & libc::MSG_PEEK != 0)
    } else {
        runtime::recv_flags(fd, b, flags & libc::MSG_DONTWAIT != 0, flags & libc::MSG_PEEK != 0)
    };
    size(r, || real::recv(fd, buf, n, flags))
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
    gate!(fd, real::recvfrom(fd, buf, n, flags, addr, len));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf, n);
        return datagram::recv(fd, &iov, 1, flags, addr, len, None)
            .unwrap_or_else(|| real::recvfrom(fd, buf, n, flags, addr, len));
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
    gate!(fd, real::write(fd, buf, n));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf as *mut c_void, n);
        return datagram::send(fd, &iov, 1, 0, None).unwrap_or_else(|| real::write(fd, buf, n));
    }
    let b = std::slice::from_raw_parts(buf as *const u8, n);
    size(runtime::send(fd, b, false), || real::write(fd, buf, n))
}

unsafe fn send_flags(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    let b = std::slice::from_raw_parts(buf as *const u8, n);
    let dontwait = flags & libc::MSG_DONTWAIT != 0;
    let r =
        if flags & libc::MSG_OOB != 0 { runtime::send_urgent(fd, b, dontwait) } else { runtime::send(fd, b, dontwait) };
    match r {
        Call::Done(Err(e)) if e == Errno::EPIPE && flags & libc::MSG_NOSIGNAL != 0 => fail(e),
        r => size(r, || real::send(fd, buf, n, flags)),
    }
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    gate!(fd, real::send(fd, buf, n, flags));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf as *mut c_void, n);
        return datagram::send(fd, &iov, 1, flags, None).unwrap_or_else(|| real::send(fd, buf, n, flags));
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
    gate!(fd, real::sendto(fd, buf, n, flags, addr, len));
    if runtime::datagram(fd) {
        let iov = datagram::one(buf as *mut c_void, n);
        return datagram::send(fd, &iov, 1, flags, to_addr(addr, len))
            .unwrap_or_else(|| real::sendto(fd, buf, n, flags, addr, len));
    }
    send_flags(fd, buf, n, flags)
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    gate!(fd, real::readv(fd, iov, cnt));
    if runtime::datagram(fd) {
        return datagram::recv(fd, iov, cnt.max(0) as usize, 0, std::ptr::null_mut(), std::ptr::null_mut(), None)
            .unwrap_or_else(|| real::readv(fd, iov, cnt));
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
    gate!(fd, real::writev(fd, iov, cnt));
    if runtime::datagram(fd) {
        return datagram::send(fd, iov, cnt.max(0) as usize, 0, None).unwrap_or_else(|| real::writev(fd, iov, cnt));
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
    gate!(fd, real::shutdown(fd, how));
    int(runtime::shutdown(fd, how), || real::shutdown(fd, how))
}

unsafe fn fcntl_impl(fd: c_int, cmd: c_int, arg: c_ulong) -> c_int {
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
pub unsafe extern "C" fn dup(fd: c_int) -> c_int {
    let new = real::dup(fd);
    if new >= 0 && tracked(fd) {
        runtime::duplicated(fd, new);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup2(fd: c_int, fd2: c_int) -> c_int {
    let new = real::dup2(fd, fd2);
    if new >= 0 && (tracked(fd) || tracked(fd2)) {
        runtime::duplicated(fd, new);
    }
    new
}

#[no_mangle]
pub unsafe extern "C" fn dup3(fd: c_int, fd2: c_int, flags: c_int) -> c_int {
    let new = real::dup3(fd, fd2, flags);
    if new >= 0 && (tracked(fd) || tracked(fd2)) {
        runtime::duplicated(fd, new);
    }
    new
}

/// The fd_set bits as poll entries, and back (select and pselect are poll underneath).
unsafe fn select_via_poll(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    timeout_ms: c_int,
) -> Option<c_int> {
    let mut fds: Vec<pollfd> = Vec::new();
    let mut any_ours = false;
    for fd in 0..nfds.max(0) {
        let mut events = 0;
        if !r.is_null() && libc::FD_ISSET(fd, r) {
            events |= libc::POLLIN;
        }
        if !w.is_null() && libc::FD_ISSET(fd, w) {
            events |= libc::POLLOUT;
        }
        if !e.is_null() && libc::FD_ISSET(fd, e) {
            events |= libc::POLLPRI;
        }
        if events != 0 {
            any_ours |= tracked(fd);
            fds.push(pollfd { fd, events, revents: 0 });
        }
    }
    if !any_ours {
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
            libc::FD_ZERO(set);
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
            libc::FD_SET(p.fd, r);
            count += 1;
        }
        if !w.is_null() && p.events & libc::POLLOUT != 0 && p.revents & (libc::POLLOUT | libc::POLLERR) != 0 {
            libc::FD_SET(p.fd, w);
            count += 1;
        }
        if !e.is_null() && p.events & libc::POLLPRI != 0 && p.revents & libc::POLLPRI != 0 {
            libc::FD_SET(p.fd, e);
            count += 1;
        }
    }
    Some(count)
}

/// A timeout as poll(2) takes it, in ms (-1: none), rounded up as the kernel does: a wait must
/// never end before the time asked for. One rule for select, pselect, ppoll and epoll_pwait2.
fn timeout_ms(ns: Option<i64>) -> c_int {
    match ns {
        None => -1,
        Some(ns) => ((ns.max(0) + 999_999) / 1_000_000).min(i64::from(i32::MAX)) as c_int,
    }
}

unsafe fn timespec_ns(ts: *const libc::timespec) -> Option<i64> {
    (!ts.is_null()).then(|| (*ts).tv_sec.saturating_mul(1_000_000_000).saturating_add((*ts).tv_nsec))
}

#[no_mangle]
pub unsafe extern "C" fn select(
    nfds: c_int,
    r: *mut libc::fd_set,
    w: *mut libc::fd_set,
    e: *mut libc::fd_set,
    tv: *mut libc::timeval,
) -> c_int {
    let ns = (!tv.is_null()).then(|| (*tv).tv_sec.saturating_mul(1_000_000_000).saturating_add((*tv).tv_usec * 1000));
    match select_via_poll(nfds, r, w, e, timeout_ms(ns)) {
        Some(n) => n,
        None => real::select(nfds, r, w, e, tv),
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

#[no_mangle]
pub unsafe extern "C" fn ppoll(
    fds: *mut pollfd,
    n: nfds_t,
    ts: *const libc::timespec,
    mask: *const libc::sigset_t,
) -> c_int {
    let slice = if fds.is_null() { &mut [][..] } else { std::slice::from_raw_parts_mut(fds, n as usize) };
    if !slice.iter().any(|p| tracked(p.fd)) {
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

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, _fdslen: size_t) -> c_int {
    poll(fds, n, timeout)
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, _buflen: size_t) -> ssize_t {
    read(fd, buf, n)
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, _buflen: size_t, flags: c_int) -> ssize_t {
    recv(fd, buf, n, flags)
}

#[no_mangle]
pub unsafe extern "C" fn __recvfrom_chk(
    fd: c_int,
    buf: *mut c_void,
    n: size_t,
    _buflen: size_t,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
) -> ssize_t {
    recvfrom(fd, buf, n, flags, addr, len)
}

/// sendfile from a file to an accelerated socket: read a chunk, send it.
#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, input: c_int, off: *mut libc::off_t, count: size_t) -> ssize_t {
    gate!(out, real::sendfile(out, input, off, count));
    let mut buf = vec![0u8; count.min(256 * 1024)];
    let n = if off.is_null() {
        real::read(input, buf.as_mut_ptr().cast(), buf.len())
    } else {
        real::pread(input, buf.as_mut_ptr().cast(), buf.len(), *off)
    };
    if n <= 0 {
        return n;
    }
    let sent = send_flags(out, buf.as_ptr().cast(), n as size_t, libc::MSG_NOSIGNAL);
    if sent > 0 {
        if off.is_null() {
            // Give back what was read but not sent.
            libc::lseek(input, sent as libc::off_t - n as libc::off_t, libc::SEEK_CUR);
        } else {
            *off += sent as libc::off_t;
        }
    } else if sent < 0 && off.is_null() {
        libc::lseek(input, -(n as libc::off_t), libc::SEEK_CUR);
    }
    if sent < 0 && *libc::__errno_location() == libc::EPIPE {
        libc::raise(libc::SIGPIPE);
    }
    sent
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, input: c_int, off: *mut libc::off_t, count: size_t) -> ssize_t {
    sendfile(out, input, off, count)
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    gate!(fd, real::recvmsg(fd, msg, flags));
    let m = &mut *msg;
    if runtime::datagram(fd) {
        let mut namelen = m.msg_namelen;
        let mut got_flags = 0;
        let name = m.msg_name.cast::<sockaddr>();
        let Some(r) = datagram::recv(fd, m.msg_iov, m.msg_iovlen, flags, name, &mut namelen, Some(&mut got_flags))
        else {
            return real::recvmsg(fd, msg, flags);
        };
        if r >= 0 {
            m.msg_namelen = if name.is_null() { 0 } else { namelen };
            m.msg_controllen = 0;
            m.msg_flags = got_flags;
        }
        return r;
    }
    m.msg_controllen = 0;
    m.msg_flags = 0;
    if flags & libc::MSG_OOB != 0 {
        // The urgent byte, into the first buffer with room (no address: Linux gives none).
        let iovs = std::slice::from_raw_parts(m.msg_iov, m.msg_iovlen);
        let first = iovs
            .iter()
            .find(|v| v.iov_len > 0)
            .map_or(&mut [][..], |v| std::slice::from_raw_parts_mut(v.iov_base as *mut u8, v.iov_len));
        m.msg_namelen = 0;
        let r = size(runtime::recv_urgent(fd, first, flags & libc::MSG_PEEK != 0), || real::recvmsg(fd, msg, flags));
        if r > 0 {
            m.msg_flags = libc::MSG_OOB;
        }
        return r;
    }
    if !m.msg_name.is_null() {
        let mut len = m.msg_namelen;
        if let Call::Done(Ok(peer)) = runtime::sockname(fd, true) {
            write_addr(peer, m.msg_name.cast(), &mut len);
        }
        m.msg_namelen = len;
    }
    readv(fd, m.msg_iov, m.msg_iovlen as c_int)
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    gate!(fd, real::sendmsg(fd, msg, flags));
    let m = &*msg;
    if runtime::datagram(fd) {
        let to = to_addr(m.msg_name.cast(), m.msg_namelen);
        return datagram::send(fd, m.msg_iov, m.msg_iovlen, flags, to).unwrap_or_else(|| real::sendmsg(fd, msg, flags));
    }
    let iovs = std::slice::from_raw_parts(m.msg_iov, m.msg_iovlen);
    let mut data = Vec::with_capacity(iovs.iter().map(|v| v.iov_len).sum());
    for v in iovs {
        data.extend_from_slice(std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len));
    }
    send_flags(fd, data.as_ptr().cast(), data.len(), flags)
}

/// recvmmsg on a stream socket: messages filled one after another while data is there (the
/// first may block; later ones stop at EAGAIN).
#[no_mangle]
pub unsafe extern "C" fn recvmmsg(
    fd: c_int,
    msgs: *mut libc::mmsghdr,
    vlen: libc::c_uint,
    flags: c_int,
    timeout: *mut libc::timespec,
) -> c_int {
    if !tracked(fd) {
        return real::recvmmsg(fd, msgs, vlen, flags, timeout);
    }
    let mut done = 0;
    for i in 0..vlen as usize {
        let m = &mut *msgs.add(i);
        let f = if i == 0 { flags & !libc::MSG_WAITFORONE } else { flags | libc::MSG_DONTWAIT };
        let n = recvmsg(fd, &mut m.msg_hdr, f);
        if n < 0 {
            if done > 0 {
                break;
            }
            return -1;
        }
        m.msg_len = n as libc::c_uint;
        done += 1;
        // End of stream; an empty datagram is a datagram like any other.
        if n == 0 && !runtime::datagram(fd) {
            break;
        }
    }
    done
}

/// sendmmsg on a stream socket: each message sent in turn; stops at the first short send.
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, msgs: *mut libc::mmsghdr, vlen: libc::c_uint, flags: c_int) -> c_int {
    if !tracked(fd) {
        return real::sendmmsg(fd, msgs, vlen, flags);
    }
    let mut done = 0;
    for i in 0..vlen as usize {
        let m = &mut *msgs.add(i);
        let want: usize =
            std::slice::from_raw_parts(m.msg_hdr.msg_iov, m.msg_hdr.msg_iovlen).iter().map(|v| v.iov_len).sum();
        let n = sendmsg(fd, &m.msg_hdr, flags);
        if n < 0 {
            if done > 0 {
                break;
            }
            return -1;
        }
        m.msg_len = n as libc::c_uint;
        done += 1;
        if (n as usize) < want {
            break;
        }
    }
    done
}

#[no_mangle]
pub unsafe extern "C" fn epoll_pwait2(
    epfd: c_int,
    evs: *mut libc::epoll_event,
    max: c_int,
    timeout: *const libc::timespec,
    sigmask: *const libc::sigset_t,
) -> c_int {
    epoll_pwait(epfd, evs, max, timeout_ms(timespec_ns(timeout)), sigmask)
}

#[no_mangle]
pub unsafe extern "C" fn fork() -> libc::pid_t {
    let hold = runtime::fork_prepare();
    let pid = real::fork();
    runtime::fork_done(hold, pid == 0);
    pid
}

// Credential changes: a server that drops root before its first socket (mariadbd --user=mysql,
// nginx's `user`) would no longer be allowed to open the NIC. The runtime opens it first.
macro_rules! credential_hooks {
    ($($name:ident($($arg:ident: $ty:ty),*);)*) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
                runtime::before_credentials_change();
                real::$name($($arg),*)
            }
        )*
    };
}

credential_hooks! {
    setuid(uid: libc::uid_t);
    setgid(gid: libc::gid_t);
    seteuid(uid: libc::uid_t);
    setegid(gid: libc::gid_t);
    setreuid(r: libc::uid_t, e: libc::uid_t);
    setregid(r: libc::gid_t, e: libc::gid_t);
    setresuid(r: libc::uid_t, e: libc::uid_t, s: libc::uid_t);
    setresgid(r: libc::gid_t, e: libc::gid_t, s: libc::gid_t);
    setgroups(n: size_t, groups: *const libc::gid_t);
    initgroups(user: *const libc::c_char, group: libc::gid_t);
}
