//! The I/O calls on a UDP socket (`runtime::datagram(fd)`): one datagram per call, scattered
//! over or gathered from the caller's iovecs. The hooks in lib.rs hand UDP fds here.

use libc::{c_int, iovec, sockaddr, socklen_t, ssize_t};
use runtime::{Call, Datagram, Errno};

use crate::{fail, with_scratch, write_addr};

/// The largest UDP payload (65535 - 8 - 20): a vectored call needs no more room than this.
const MAX_DATAGRAM: usize = 65_507;

fn total(iov: &[std::io::IoSlice<'_>]) -> usize {
    iov.iter().map(|v| v.len()).sum()
}

/// Receives one datagram into `iov` (a single buffer is filled directly; several through the
/// thread's scratch buffer). The sender goes to `addr`/`len`, MSG_TRUNC to `msg_flags`.
/// # Safety
/// `iov` holds `cnt` iovecs as readv(2) requires; `addr` and `len` are null or valid as
/// recvfrom(2) requires.
pub(crate) unsafe fn recv(
    fd: c_int,
    iov: *const iovec,
    cnt: usize,
    flags: c_int,
    addr: *mut sockaddr,
    len: *mut socklen_t,
    msg_flags: Option<&mut c_int>,
) -> Option<ssize_t> {
    // SAFETY: `iov`/`cnt` are the caller's iovecs (readv's contract): a lone one valid for
    // c_slice_mut, several for scatter (every non-empty base checked non-null, none pointing
    // into our scratch buffer); `addr` and `len` null or valid for write_addr (recvfrom's).
    unsafe {
        let vecs = match crate::c_slice(iov, cnt) {
            Ok(vecs) => vecs,
            Err(e) => return Some(fail(e)),
        };
        let r = match vecs {
            [] => runtime::recv_datagram(fd, &mut [], flags),
            [one] => match crate::c_slice_mut(one.iov_base as *mut u8, one.iov_len) {
                Ok(one) => runtime::recv_datagram(fd, one, flags),
                Err(e) => return Some(fail(e)),
            },
            many => {
                if many.iter().any(|v| v.iov_base.is_null() && v.iov_len > 0) {
                    return Some(fail(Errno(libc::EFAULT)));
                }
                with_scratch(|s| {
                    s.resize(many.iter().map(|v| v.iov_len).sum::<usize>().min(MAX_DATAGRAM), 0);
                    let r = runtime::recv_datagram(fd, s, flags);
                    if let Call::Done(Ok(d)) = &r {
                        // Copied through raw pointers: the iovecs may overlap (see
                        // `crate::scatter`).
                        crate::scatter(many, &s[..d.len.min(s.len())]);
                    }
                    r
                })
            }
        };
        match r {
            Call::Kernel => None,
            Call::Done(Ok(Datagram { len: n, from, truncated })) => {
                write_addr(from, addr, len);
                if let Some(f) = msg_flags {
                    *f = if truncated { libc::MSG_TRUNC } else { 0 };
                }
                Some(n as ssize_t)
            }
            Call::Done(Err(e)) => Some(fail(e)),
        }
    }
}

/// Sends one datagram made of `iov` to `to` (or the connected peer).
/// # Safety
/// `iov` holds `cnt` iovecs as writev(2) requires.
pub(crate) unsafe fn send(
    fd: c_int,
    iov: *const iovec,
    cnt: usize,
    flags: c_int,
    to: Option<std::net::SocketAddr>,
) -> Option<ssize_t> {
    // SAFETY: `iov`/`cnt` are the caller's iovecs (writev's contract, for io_slices).
    unsafe {
        let bufs = match crate::io_slices(iov, cnt) {
            Ok(bufs) => bufs,
            Err(e) => return Some(fail(e)),
        };
        let r = match &bufs[..] {
            [] => runtime::send_datagram(fd, &[], to, flags),
            [one] => runtime::send_datagram(fd, one, to, flags),
            many if total(many) > MAX_DATAGRAM => Call::Done(Err(runtime::Errno::EMSGSIZE)),
            many => with_scratch(|s| {
                s.clear();
                for v in many {
                    s.extend_from_slice(v);
                }
                runtime::send_datagram(fd, s, to, flags)
            }),
        };
        match r {
            Call::Kernel => None,
            Call::Done(Ok(n)) => Some(n as ssize_t),
            Call::Done(Err(e)) => Some(fail(e)),
        }
    }
}

/// One buffer as an iovec.
pub(crate) fn one(buf: *mut libc::c_void, n: usize) -> iovec {
    iovec { iov_base: buf, iov_len: n }
}
