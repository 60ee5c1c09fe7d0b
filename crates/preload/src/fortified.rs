//! The `_FORTIFY_SOURCE` variants (`__*_chk`) that glibc's headers substitute for the plain
//! calls: the buffer-size check is the compiler's; the call is ours.

use libc::{c_int, c_void, nfds_t, pollfd, size_t, sockaddr, socklen_t, ssize_t};

#[no_mangle]
pub unsafe extern "C" fn __poll_chk(fds: *mut pollfd, n: nfds_t, timeout: c_int, _fdslen: size_t) -> c_int {
    // SAFETY: poll(2)'s contract, the caller's: `fds` holds `n` pollfds.
    unsafe { crate::poll::poll(fds, n, timeout) }
}

#[no_mangle]
pub unsafe extern "C" fn __read_chk(fd: c_int, buf: *mut c_void, n: size_t, _buflen: size_t) -> ssize_t {
    // SAFETY: read(2)'s contract, the caller's: `buf` is writable for `n` bytes.
    unsafe { crate::io::read(fd, buf, n) }
}

#[no_mangle]
pub unsafe extern "C" fn __recv_chk(fd: c_int, buf: *mut c_void, n: size_t, _buflen: size_t, flags: c_int) -> ssize_t {
    // SAFETY: recv(2)'s contract, the caller's: `buf` is writable for `n` bytes.
    unsafe { crate::io::recv(fd, buf, n, flags) }
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
    // SAFETY: recvfrom(2)'s contract, the caller's: `buf` writable for `n` bytes, `addr`
    // and `len` null or valid as recvfrom takes them.
    unsafe { crate::io::recvfrom(fd, buf, n, flags, addr, len) }
}
