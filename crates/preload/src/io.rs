//! Data transfer: read/write, recv/send and their address and message forms, the vectored
//! calls (handed to the runtime as iovecs, nothing copied or allocated on the way), the
//! multi-message calls, sendfile. UDP fds go to `datagram`.

use std::io::IoSliceMut;

use libc::{c_int, c_void, iovec, size_t, sockaddr, socklen_t, ssize_t};
use runtime::{real, tracked, Call, Errno};

use crate::{datagram, fail, filled, size, to_addr};

#[no_mangle]
pub unsafe extern "C" fn read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t {
    // SAFETY: read(2)'s contract, the caller's: `buf` is writable for `n` bytes (one iovec of
    // it for a datagram, a slice of it for a stream; the real read gets it unchanged).
    unsafe {
        gate!(fd, real::read(fd, buf, n));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf, n);
            return datagram::recv(fd, &iov, 1, 0, std::ptr::null_mut(), std::ptr::null_mut(), None)
                .unwrap_or_else(|| real::read(fd, buf, n));
        }
        let b = match crate::c_slice_mut(buf as *mut u8, n) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        size(runtime::recv(fd, b, false), || real::read(fd, buf, n))
    }
}

#[no_mangle]
pub unsafe extern "C" fn recv(fd: c_int, buf: *mut c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: recv(2)'s contract, the caller's: `buf` is writable for `n` bytes.
    unsafe {
        gate!(fd, real::recv(fd, buf, n, flags));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf, n);
            return datagram::recv(fd, &iov, 1, flags, std::ptr::null_mut(), std::ptr::null_mut(), None)
                .unwrap_or_else(|| real::recv(fd, buf, n, flags));
        }
        let b = match crate::c_slice_mut(buf as *mut u8, n) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        let r = if flags & libc::MSG_OOB != 0 {
            runtime::recv_urgent(fd, b, flags & libc::MSG_PEEK != 0)
        } else {
            let flags = flags & (libc::MSG_DONTWAIT | libc::MSG_PEEK | libc::MSG_WAITALL);
            runtime::recv_vectored(fd, &mut [IoSliceMut::new(b)], flags)
        };
        size(r, || real::recv(fd, buf, n, flags))
    }
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
    // SAFETY: recvfrom(2)'s contract, the caller's: `buf` writable for `n` bytes, `addr` and
    // `len` null or valid (`*len` is written only when both are non-null).
    unsafe {
        gate!(fd, real::recvfrom(fd, buf, n, flags, addr, len));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf, n);
            return datagram::recv(fd, &iov, 1, flags, addr, len, None)
                .unwrap_or_else(|| real::recvfrom(fd, buf, n, flags, addr, len));
        }
        let r = recv(fd, buf, n, flags);
        // A stream socket names no sender: Linux sets the length to 0 (Python sees None).
        if r >= 0 && !addr.is_null() && !len.is_null() {
            *len = 0;
        }
        r
    }
}

#[no_mangle]
pub unsafe extern "C" fn write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t {
    // SAFETY: write(2)'s contract, the caller's: `buf` is readable for `n` bytes.
    unsafe {
        gate!(fd, real::write(fd, buf, n));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf as *mut c_void, n);
            return datagram::send(fd, &iov, 1, 0, None).unwrap_or_else(|| real::write(fd, buf, n));
        }
        let b = match crate::c_slice(buf as *const u8, n) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        size(runtime::send(fd, b, false), || real::write(fd, buf, n))
    }
}

/// # Safety
/// `buf` is readable for `n` bytes, as send(2) requires.
unsafe fn send_flags(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: `buf` is readable for `n` bytes (the caller's contract), for c_slice and the
    // real send.
    unsafe {
        let b = match crate::c_slice(buf as *const u8, n) {
            Ok(b) => b,
            Err(e) => return fail(e),
        };
        let dontwait = flags & libc::MSG_DONTWAIT != 0;
        let r = if flags & libc::MSG_OOB != 0 {
            runtime::send_urgent(fd, b, dontwait)
        } else {
            runtime::send(fd, b, dontwait)
        };
        match r {
            Call::Done(Err(e)) if e == Errno::EPIPE && flags & libc::MSG_NOSIGNAL != 0 => fail(e),
            r => size(r, || real::send(fd, buf, n, flags)),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn send(fd: c_int, buf: *const c_void, n: size_t, flags: c_int) -> ssize_t {
    // SAFETY: send(2)'s contract, the caller's: `buf` is readable for `n` bytes.
    unsafe {
        gate!(fd, real::send(fd, buf, n, flags));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf as *mut c_void, n);
            return datagram::send(fd, &iov, 1, flags, None).unwrap_or_else(|| real::send(fd, buf, n, flags));
        }
        send_flags(fd, buf, n, flags)
    }
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
    // SAFETY: sendto(2)'s contract, the caller's: `buf` readable for `n` bytes, `addr` null or
    // readable for `len` bytes (to_addr's contract).
    unsafe {
        gate!(fd, real::sendto(fd, buf, n, flags, addr, len));
        if runtime::datagram(fd) {
            let iov = datagram::one(buf as *mut c_void, n);
            return datagram::send(fd, &iov, 1, flags, to_addr(addr, len))
                .unwrap_or_else(|| real::sendto(fd, buf, n, flags, addr, len));
        }
        send_flags(fd, buf, n, flags)
    }
}

#[no_mangle]
pub unsafe extern "C" fn readv(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: readv(2)'s contract, the caller's: `iov` holds `cnt` iovecs, each writable for its
    // length (io_slices_mut's contract; `cnt` below 0 reads as none).
    unsafe {
        gate!(fd, real::readv(fd, iov, cnt));
        if runtime::datagram(fd) {
            return datagram::recv(fd, iov, cnt.max(0) as usize, 0, std::ptr::null_mut(), std::ptr::null_mut(), None)
                .unwrap_or_else(|| real::readv(fd, iov, cnt));
        }
        let r = crate::fill_iovecs(iov, cnt.max(0) as usize, |bufs| runtime::recv_vectored(fd, bufs, 0), filled);
        match r {
            Ok(r) => size(r, || real::readv(fd, iov, cnt)),
            Err(e) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn writev(fd: c_int, iov: *const iovec, cnt: c_int) -> ssize_t {
    // SAFETY: writev(2)'s contract, the caller's: `iov` holds `cnt` iovecs, each readable for
    // its length (io_slices's contract).
    unsafe {
        gate!(fd, real::writev(fd, iov, cnt));
        if runtime::datagram(fd) {
            return datagram::send(fd, iov, cnt.max(0) as usize, 0, None).unwrap_or_else(|| real::writev(fd, iov, cnt));
        }
        let bufs = match crate::io_slices(iov, cnt.max(0) as usize) {
            Ok(bufs) => bufs,
            Err(e) => return fail(e),
        };
        size(runtime::send_vectored(fd, &bufs, false), || real::writev(fd, iov, cnt))
    }
}

/// sendfile from a file to an accelerated socket: read a chunk, send it.
#[no_mangle]
pub unsafe extern "C" fn sendfile(out: c_int, input: c_int, off: *mut libc::off_t, count: size_t) -> ssize_t {
    // SAFETY: sendfile(2)'s contract, the caller's: `off` is null or a valid off_t, read and
    // advanced here as the kernel would. The scratch buffer is ours, `buf.len()` bytes long, and
    // send_flags reads only the `n` <= len bytes read into it. errno is this thread's.
    unsafe {
        gate!(out, real::sendfile(out, input, off, count));
        let (n, sent) = crate::with_scratch(|buf| {
            buf.resize(count.min(256 * 1024), 0);
            let n = if off.is_null() {
                real::read(input, buf.as_mut_ptr().cast(), buf.len())
            } else {
                real::pread(input, buf.as_mut_ptr().cast(), buf.len(), *off)
            };
            if n <= 0 {
                return (n, n);
            }
            (n, send_flags(out, buf.as_ptr().cast(), n as size_t, libc::MSG_NOSIGNAL))
        });
        if n <= 0 {
            return n;
        }
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
}

#[no_mangle]
pub unsafe extern "C" fn sendfile64(out: c_int, input: c_int, off: *mut libc::off_t, count: size_t) -> ssize_t {
    // SAFETY: sendfile's contract, the caller's (off_t is 64 bits on x86-64).
    unsafe { sendfile(out, input, off, count) }
}

#[no_mangle]
pub unsafe extern "C" fn recvmsg(fd: c_int, msg: *mut libc::msghdr, flags: c_int) -> ssize_t {
    // SAFETY: recvmsg(2)'s contract, the caller's: `msg` is a valid msghdr whose iovecs
    // are writable for their lengths and whose name is null or writable for `msg_namelen`
    // bytes; `m` is not used after the real recvmsg may have written through `msg`.
    unsafe {
        if !runtime::tracked(fd) {
            let r = real::recvmsg(fd, msg, flags);
            if r >= 0 && flags & libc::MSG_PEEK == 0 {
                runtime::received_rights(&rights(msg));
            }
            return r;
        }
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
            let vecs = match crate::c_slice(m.msg_iov, m.msg_iovlen) {
                Ok(vecs) => vecs,
                Err(e) => return fail(e),
            };
            let first = match vecs.iter().find(|v| v.iov_len > 0) {
                Some(v) => match crate::c_slice_mut(v.iov_base as *mut u8, v.iov_len) {
                    Ok(first) => first,
                    Err(e) => return fail(e),
                },
                None => &mut [],
            };
            m.msg_namelen = 0;
            let r =
                size(runtime::recv_urgent(fd, first, flags & libc::MSG_PEEK != 0), || real::recvmsg(fd, msg, flags));
            if r > 0 {
                // Through `msg`, not `m`: the real recvmsg may have written the header meanwhile.
                (*msg).msg_flags = libc::MSG_OOB;
            }
            return r;
        }
        // A stream socket names no sender (Linux: msg_namelen 0).
        m.msg_namelen = 0;
        let flags_in = flags & (libc::MSG_DONTWAIT | libc::MSG_PEEK | libc::MSG_WAITALL);
        let r = crate::fill_iovecs(m.msg_iov, m.msg_iovlen, |bufs| runtime::recv_vectored(fd, bufs, flags_in), filled);
        match r {
            Ok(r) => size(r, || real::recvmsg(fd, msg, flags)),
            Err(e) => fail(e),
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn sendmsg(fd: c_int, msg: *const libc::msghdr, flags: c_int) -> ssize_t {
    // SAFETY: sendmsg(2)'s contract, the caller's: `msg` is a valid msghdr, its iovecs
    // readable for their lengths and its name null or readable for `msg_namelen` bytes; `m` is
    // only read, as is everything the real sendmsg gets.
    unsafe {
        let passing = match runtime::pass_rights(fd, &rights(msg)) {
            Ok(passing) => passing,
            Err(e) => return fail(e),
        };
        if !passing.is_empty() {
            let r = real::sendmsg(fd, msg, flags);
            if r < 0 {
                runtime::passing_failed(passing);
            }
            return r;
        }
        gate!(fd, real::sendmsg(fd, msg, flags));
        let m = &*msg;
        if runtime::datagram(fd) {
            let to = to_addr(m.msg_name.cast(), m.msg_namelen);
            return datagram::send(fd, m.msg_iov, m.msg_iovlen, flags, to)
                .unwrap_or_else(|| real::sendmsg(fd, msg, flags));
        }
        if flags & libc::MSG_OOB != 0 {
            // Urgent data: its last byte is the mark, so the iovecs go as one buffer.
            let iovs = match crate::io_slices(m.msg_iov, m.msg_iovlen) {
                Ok(iovs) => iovs,
                Err(e) => return fail(e),
            };
            return crate::with_scratch(|data| {
                data.clear();
                for v in iovs.iter() {
                    data.extend_from_slice(v);
                }
                send_flags(fd, data.as_ptr().cast(), data.len(), flags)
            });
        }
        let bufs = match crate::io_slices(m.msg_iov, m.msg_iovlen) {
            Ok(bufs) => bufs,
            Err(e) => return fail(e),
        };
        match runtime::send_vectored(fd, &bufs, flags & libc::MSG_DONTWAIT != 0) {
            Call::Done(Err(e)) if e == Errno::EPIPE && flags & libc::MSG_NOSIGNAL != 0 => fail(e),
            r => size(r, || real::sendmsg(fd, msg, flags)),
        }
    }
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
    // SAFETY: recvmmsg(2)'s contract, the caller's: `msgs` holds `vlen` mmsghdrs
    // (each_message's contract), each valid for recvmsg; `timeout` goes to the real call only.
    unsafe {
        if !tracked(fd) {
            let n = real::recvmmsg(fd, msgs, vlen, flags, timeout);
            if flags & libc::MSG_PEEK == 0 {
                for i in 0..n.max(0) as usize {
                    runtime::received_rights(&rights(&(*msgs.add(i)).msg_hdr));
                }
            }
            return n;
        }
        each_message(msgs, vlen, |i, hdr| {
            let f = if i == 0 { flags & !libc::MSG_WAITFORONE } else { flags | libc::MSG_DONTWAIT };
            let n = recvmsg(fd, hdr, f);
            // End of stream; an empty datagram is a datagram like any other.
            (n, n != 0 || runtime::datagram(fd))
        })
    }
}

/// sendmmsg on a stream socket: each message sent in turn; stops at the first short send.
#[no_mangle]
pub unsafe extern "C" fn sendmmsg(fd: c_int, msgs: *mut libc::mmsghdr, vlen: libc::c_uint, flags: c_int) -> c_int {
    // SAFETY: sendmmsg(2)'s contract, the caller's: `msgs` holds `vlen` mmsghdrs
    // (each_message's contract), each valid for sendmsg and its iovecs for c_slice.
    unsafe {
        if !tracked(fd) {
            if (0..vlen as usize).all(|i| (*msgs.add(i)).msg_hdr.msg_controllen == 0) {
                return real::sendmmsg(fd, msgs, vlen, flags);
            }
            // The messages before the first whose sockets may not pass go; that one fails (the
            // whole call when it is the first, as sendmmsg fails on its first message). The
            // records of the messages not sent go again.
            let mut passings = Vec::new();
            for i in 0..vlen as usize {
                match runtime::pass_rights(fd, &rights(&(*msgs.add(i)).msg_hdr)) {
                    Ok(passing) => passings.push(passing),
                    Err(e) if i == 0 => return fail(e),
                    Err(_) => break,
                }
            }
            let r = real::sendmmsg(fd, msgs, passings.len() as libc::c_uint, flags);
            for passing in passings.into_iter().skip(r.max(0) as usize) {
                runtime::passing_failed(passing);
            }
            return r;
        }
        each_message(msgs, vlen, |_, hdr| {
            let want: usize =
                crate::c_slice(hdr.msg_iov, hdr.msg_iovlen).unwrap_or(&[]).iter().map(|v| v.iov_len).sum();
            let n = sendmsg(fd, hdr, flags);
            (n, n >= 0 && n as usize >= want)
        })
    }
}

/// The fds `msg`'s SCM_RIGHTS headers carry (those to send before sendmsg, those received
/// after recvmsg), in order; none allocates nothing. Reads only the control buffer, each header
/// and fd where it lies (the buffer need not be aligned).
///
/// # Safety
/// `msg` is a valid msghdr whose control buffer, when not null, is readable for
/// `msg_controllen` bytes (sendmsg(2)'s contract, and what recvmsg(2) leaves).
unsafe fn rights(msg: *const libc::msghdr) -> Vec<c_int> {
    // Linux's CMSG_ALIGN: headers and their data start at multiples of a long.
    let align = |n: usize| (n + std::mem::size_of::<libc::c_long>() - 1) & !(std::mem::size_of::<libc::c_long>() - 1);
    let header = std::mem::size_of::<libc::cmsghdr>();
    let mut fds = Vec::new();
    // SAFETY: `msg` is valid (the caller's contract). Every header is read unaligned and only
    // when it lies inside the control buffer, and every fd only when it lies inside it too; the
    // walk is Linux's (`__cmsg_nxthdr`), ending at the buffer's end or at a header shorter than
    // itself (which the kernel refuses with EINVAL).
    unsafe {
        let m = &*msg;
        if m.msg_control.is_null() {
            return fds;
        }
        let base = m.msg_control.cast::<u8>();
        let len = m.msg_controllen;
        let mut at = 0usize;
        while at + header <= len {
            let h = std::ptr::read_unaligned(base.add(at).cast::<libc::cmsghdr>());
            let cmsg_len = h.cmsg_len as usize;
            if cmsg_len < header {
                break;
            }
            if h.cmsg_level == libc::SOL_SOCKET && h.cmsg_type == libc::SCM_RIGHTS {
                let data = at + align(header);
                let n = cmsg_len.min(len - at).saturating_sub(align(header)) / std::mem::size_of::<c_int>();
                for i in 0..n {
                    let off = data + i * std::mem::size_of::<c_int>();
                    fds.push(std::ptr::read_unaligned(base.add(off).cast::<c_int>()));
                }
            }
            at += align(cmsg_len);
        }
        fds
    }
}

/// The loop of recvmmsg and sendmmsg (Linux's `do_recvmmsg`, `__sys_sendmmsg`): `one` moves
/// message `i` and returns its result and whether to go on with the next. Each message's length
/// is recorded; an error on the first message fails the call, a later one ends it with the count
/// so far.
///
/// # Safety
/// `msgs` points to `vlen` messages the caller owns, as recvmmsg(2) requires.
unsafe fn each_message(
    msgs: *mut libc::mmsghdr,
    vlen: libc::c_uint,
    mut one: impl FnMut(usize, &mut libc::msghdr) -> (ssize_t, bool),
) -> c_int {
    // SAFETY: `msgs` holds `vlen` messages (the caller's contract), so `msgs.add(i)`
    // stays inside the array and each is borrowed alone, for one call of `one`.
    unsafe {
        let mut done = 0;
        for i in 0..vlen as usize {
            let m = &mut *msgs.add(i);
            let (n, go_on) = one(i, &mut m.msg_hdr);
            if n < 0 {
                if done > 0 {
                    break;
                }
                return -1;
            }
            m.msg_len = n as libc::c_uint;
            done += 1;
            if !go_on {
                break;
            }
        }
        done
    }
}
