//! `libpronghorn.so`: the functions an unmodified program calls, interposed with LD_PRELOAD.
//!
//! Only interposition lives here: each hook converts C arguments, asks `runtime` whether the fd
//! is one of ours (one atomic load for a kernel fd), and either calls the real libc function or
//! turns the runtime's answer into a return value and `errno`. No logic, no state. Every real
//! call goes through `runtime::real` (resolved once).
//!
//! Files by family: `socket` (setup, names, options), `io` (data transfer), `datagram` (the
//! same on UDP fds), `poll` (epoll, poll, select), `fd` (close, fcntl, ioctl, dup), `process`
//! (fork, credentials, exec), `spawn` (posix_spawn and its file actions), `thread` (pthread_create:
//! the threads the runtime's own code starts), `fortified` (the `__*_chk` variants); this file holds the ABI helpers.
//!
//! Variadic `fcntl` and `ioctl` are declared with a third integer argument: on x86-64 (SysV)
//! variadic integer arguments travel in the same registers, and the value is only passed on.

#![allow(clippy::missing_safety_doc)]

use std::borrow::Cow;
use std::io::{IoSlice, IoSliceMut};
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

/// Runs as the library loads, before the program's own code: a program exec'd by an
/// accelerated process that handed it its listeners takes them back before its first call on
/// them (`runtime::adopt_handed_listeners`: nginx's new binary asks getsockname of each at
/// once). Elsewhere it reads one environment variable and returns.
#[used]
#[link_section = ".init_array"]
static ADOPT_AT_LOAD: extern "C" fn() = adopt_at_load;

extern "C" fn adopt_at_load() {
    runtime::adopt_handed_listeners();
}

mod datagram;
mod fd;
mod fortified;
mod io;
mod poll;
mod process;
mod socket;
mod spawn;
mod thread;

/// The library's allocator: the process heap, and the family arena inside a shard's scope once
/// `[runtime] share = "family"` made it (crate `arena`). Declared here, not in `arena`: only an
/// accelerated process serves its shards from an arena; every other program and test linking
/// the stack keeps the system allocator.
#[global_allocator]
static GLOBAL: arena::ScopedAlloc = arena::ScopedAlloc;

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

/// `n` elements at `ptr` from a C caller as a slice. `slice::from_raw_parts` wants a non-null,
/// aligned pointer even for no elements, and callers pass `(NULL, 0)`: no elements is the empty
/// slice whatever the pointer; a null pointer with elements is EFAULT, as the kernel answers.
/// Every hook makes its slices here.
///
/// # Safety
/// What the C function's contract says of the buffer: a non-null `ptr` is valid and aligned for
/// reads of `n` elements, not written by anyone else while `'a` lasts.
unsafe fn c_slice<'a, T>(ptr: *const T, n: usize) -> Result<&'a [T], Errno> {
    match (n, ptr.is_null()) {
        (0, _) => Ok(&[]),
        (_, true) => Err(Errno(libc::EFAULT)),
        // SAFETY: non-null, and valid for `n` elements for 'a (the caller's contract).
        _ => Ok(unsafe { std::slice::from_raw_parts(ptr, n) }),
    }
}

/// [`c_slice`] for a buffer the call fills.
///
/// # Safety
/// A non-null `ptr` is valid and aligned for reads and writes of `n` elements, which nothing
/// else reads or writes while `'a` lasts (the calling thread is inside the C call).
unsafe fn c_slice_mut<'a, T>(ptr: *mut T, n: usize) -> Result<&'a mut [T], Errno> {
    match (n, ptr.is_null()) {
        (0, _) => Ok(&mut []),
        (_, true) => Err(Errno(libc::EFAULT)),
        // SAFETY: non-null, valid and unaliased for `n` elements for 'a (the caller's contract).
        _ => Ok(unsafe { std::slice::from_raw_parts_mut(ptr, n) }),
    }
}

/// The caller's iovecs as the slices the runtime takes: `IoSlice` and `IoSliceMut` have
/// `iovec`'s layout on Unix (std guarantees it), so nothing is copied, unless an entry has a
/// null base (`{NULL, 0}` is valid in C, but an `IoSlice` of it would make a slice of a null
/// pointer): then a copy with such entries empty.
///
/// # Safety
/// As writev(2) requires: `iov` holds `cnt` iovecs (or is null with none), each non-null base
/// valid for reads of its length while `'a` lasts.
unsafe fn io_slices<'a>(iov: *const libc::iovec, cnt: usize) -> Result<Cow<'a, [IoSlice<'a>]>, Errno> {
    // SAFETY: the caller's contract for the iovec array.
    let vecs = unsafe { c_slice(iov, cnt)? };
    if vecs.iter().all(|v| !v.iov_base.is_null()) {
        // SAFETY: IoSlice is ABI-compatible with iovec on Unix (std's guarantee), every base is
        // non-null, and each is valid for its length for 'a (the caller's contract).
        return Ok(Cow::Borrowed(unsafe { std::slice::from_raw_parts(vecs.as_ptr().cast(), vecs.len()) }));
    }
    vecs.iter()
        // SAFETY: each entry's base is valid for its length (the caller's contract).
        .map(|v| Ok(IoSlice::new(unsafe { c_slice(v.iov_base as *const u8, v.iov_len)? })))
        .collect::<Result<_, _>>()
        .map(Cow::Owned)
}

/// `io_slices` for the calls that fill the buffers.
enum IoSlicesMut<'a> {
    Borrowed(&'a mut [IoSliceMut<'a>]),
    Owned(Vec<IoSliceMut<'a>>),
}

impl<'a> std::ops::Deref for IoSlicesMut<'a> {
    type Target = [IoSliceMut<'a>];
    fn deref(&self) -> &Self::Target {
        match self {
            IoSlicesMut::Borrowed(b) => b,
            IoSlicesMut::Owned(v) => v,
        }
    }
}

impl std::ops::DerefMut for IoSlicesMut<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        match self {
            IoSlicesMut::Borrowed(b) => b,
            IoSlicesMut::Owned(v) => v,
        }
    }
}

/// [`io_slices`] for the calls that fill the buffers, which must be disjoint (see
/// [`fill_iovecs`], which checks).
///
/// # Safety
/// As readv(2) requires: `vecs`' non-null bases valid for writes of their lengths while `'a`
/// lasts; and the buffers do not overlap (as `&mut` slices they would alias).
unsafe fn io_slices_mut<'a>(vecs: &'a [libc::iovec]) -> Result<IoSlicesMut<'a>, Errno> {
    if vecs.iter().all(|v| !v.iov_base.is_null()) {
        // SAFETY: IoSliceMut is ABI-compatible with iovec on Unix, every base is non-null and
        // valid for writes of its length, the buffers disjoint (the caller's contract). The
        // array itself, which C declares const, is only read: the runtime writes through the
        // entries, never to them.
        return Ok(IoSlicesMut::Borrowed(unsafe {
            std::slice::from_raw_parts_mut(vecs.as_ptr() as *mut IoSliceMut<'a>, vecs.len())
        }));
    }
    vecs.iter()
        // SAFETY: each entry's base is valid for writes of its length, the entries disjoint.
        .map(|v| Ok(IoSliceMut::new(unsafe { c_slice_mut(v.iov_base as *mut u8, v.iov_len)? })))
        .collect::<Result<_, _>>()
        .map(IoSlicesMut::Owned)
}

/// The most bytes one call takes through the scratch buffer for overlapping iovecs: a larger
/// request is a short read (as a stream socket may give; a datagram is at most 64 KiB anyway).
const OVERLAP_SCRATCH_MAX: usize = 256 * 1024;

/// Fills the caller's iovecs with `recv`, which takes them as slices and says with `filled` how
/// many bytes it wrote. Disjoint iovecs (every caller we know) go to `recv` as they are, nothing
/// copied. Overlapping ones, which C allows, cannot be `&mut` slices (two would alias): `recv`
/// fills the thread's scratch buffer instead (at most [`OVERLAP_SCRATCH_MAX`] bytes), which is
/// then copied to the iovecs in order, so that where they overlap a later iovec's bytes win, as
/// the kernel's in-order copy leaves them.
///
/// # Safety
/// As readv(2) requires: `iov` holds `cnt` iovecs (or is null with none), each non-null base
/// valid for writes of its length while the call lasts.
unsafe fn fill_iovecs<R>(
    iov: *const libc::iovec,
    cnt: usize,
    recv: impl FnOnce(&mut [IoSliceMut<'_>]) -> R,
    filled: impl FnOnce(&R) -> usize,
) -> Result<R, Errno> {
    // SAFETY: the caller's contract for the iovec array.
    let vecs = unsafe { c_slice(iov, cnt)? };
    if !overlapping(vecs) {
        // SAFETY: the caller's contract, and the buffers are disjoint (checked).
        let mut bufs = unsafe { io_slices_mut(vecs)? };
        return Ok(recv(&mut bufs));
    }
    if vecs.iter().any(|v| v.iov_base.is_null() && v.iov_len > 0) {
        return Err(Errno(libc::EFAULT));
    }
    let room = vecs.iter().map(|v| v.iov_len).sum::<usize>().min(OVERLAP_SCRATCH_MAX);
    Ok(with_scratch(|s| {
        s.resize(room, 0);
        let r = recv(&mut [IoSliceMut::new(&mut s[..room])]);
        let n = filled(&r).min(room);
        // SAFETY: every non-empty base is non-null (checked) and valid for writes of its length
        // (the caller's contract); the scratch buffer is ours, so no iovec points into it.
        unsafe { scatter(vecs, &s[..n]) };
        r
    }))
}

/// Whether two non-empty iovecs of `vecs` share a byte.
fn overlapping(vecs: &[libc::iovec]) -> bool {
    let range = |v: &libc::iovec| (v.iov_base as usize, v.iov_base as usize + v.iov_len);
    match vecs {
        [] | [_] => false,
        // The common case (a header and a body, a ring's two halves): no allocation.
        _ if vecs.len() <= 8 => vecs.iter().enumerate().any(|(i, a)| {
            vecs[i + 1..].iter().any(|b| {
                let ((a0, a1), (b0, b1)) = (range(a), range(b));
                a.iov_len > 0 && b.iov_len > 0 && a0 < b1 && b0 < a1
            })
        }),
        _ => {
            let mut ranges: Vec<(usize, usize)> = vecs.iter().filter(|v| v.iov_len > 0).map(range).collect();
            ranges.sort_unstable();
            ranges.windows(2).any(|w| w[1].0 < w[0].1)
        }
    }
}

/// Copies `data` to the iovecs in order, each filled before the next, through raw pointers (the
/// iovecs may overlap: then a later one overwrites an earlier one's bytes, as in the kernel).
///
/// # Safety
/// Each iovec's base is valid for writes of its length (non-null unless the length is 0) and
/// does not point into `data`.
unsafe fn scatter(vecs: &[libc::iovec], mut data: &[u8]) {
    for v in vecs {
        let n = data.len().min(v.iov_len);
        if n == 0 {
            continue;
        }
        // SAFETY: `v`'s base is valid for `n` <= its length bytes and apart from `data` (the
        // caller's contract); no reference to the iovec's memory is made.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), v.iov_base as *mut u8, n) };
        data = &data[n..];
    }
}

fn set_errno(e: Errno) {
    // SAFETY: __errno_location returns this thread's errno, valid and aligned for its lifetime.
    unsafe { *libc::__errno_location() = e.0 };
}

fn fail<T: From<i8>>(e: Errno) -> T {
    set_errno(e);
    T::from(-1)
}

/// The address a caller passes with its length (None: null, too short or not IPv4/IPv6).
///
/// # Safety
/// A non-null `addr` is valid for reads of `len` bytes (any alignment).
unsafe fn to_addr(addr: *const sockaddr, len: socklen_t) -> Option<SocketAddr> {
    if addr.is_null() || (len as usize) < std::mem::size_of::<libc::sa_family_t>() {
        return None;
    }
    // SAFETY: the family is the first field, within the `len` bytes the caller vouches for; read
    // unaligned, as C callers may pass a sockaddr inside a byte buffer.
    let family = unsafe { std::ptr::addr_of!((*addr).sa_family).read_unaligned() };
    match family as c_int {
        libc::AF_INET if len as usize >= std::mem::size_of::<libc::sockaddr_in>() => {
            // SAFETY: `len` covers a sockaddr_in (checked), read unaligned.
            let a = unsafe { (addr as *const libc::sockaddr_in).read_unaligned() };
            Some(SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 if len as usize >= std::mem::size_of::<libc::sockaddr_in6>() => {
            // SAFETY: `len` covers a sockaddr_in6 (checked), read unaligned.
            let a = unsafe { (addr as *const libc::sockaddr_in6).read_unaligned() };
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
///
/// # Safety
/// As accept(2) and getsockname(2) require: non-null `addr` and `len` are valid, `len` aligned,
/// and `addr` writable for `*len` bytes.
unsafe fn write_addr(sa: SocketAddr, addr: *mut sockaddr, len: *mut socklen_t) {
    if addr.is_null() || len.is_null() {
        return;
    }
    // SAFETY: sockaddr_storage is integers and byte arrays: all zeroes is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let size = match sa {
        SocketAddr::V4(v4) => {
            // SAFETY: sockaddr_storage is larger than and aligned for every sockaddr type (its
            // purpose); `storage` is ours and nothing else refers to it.
            let a = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in) };
            a.sin_family = libc::AF_INET as libc::sa_family_t;
            a.sin_port = v4.port().to_be();
            a.sin_addr.s_addr = u32::from(*v4.ip()).to_be();
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            // SAFETY: as for sockaddr_in above.
            let a = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_in6) };
            a.sin6_family = libc::AF_INET6 as libc::sa_family_t;
            a.sin6_port = v6.port().to_be();
            a.sin6_addr.s6_addr = v6.ip().octets();
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    // SAFETY: `len` is valid and aligned, `addr` writable for `*len` bytes (the caller's
    // contract), and `n` is at most that and at most the size of `storage`, a local that cannot
    // overlap the caller's buffer.
    unsafe {
        let n = size.min(*len as usize);
        std::ptr::copy_nonoverlapping(&storage as *const _ as *const u8, addr as *mut u8, n);
        *len = size as socklen_t;
    }
}

fn int(r: Call<()>, kernel: impl FnOnce() -> c_int) -> c_int {
    match r {
        Call::Kernel => kernel(),
        Call::Done(Ok(())) => 0,
        Call::Done(Err(e)) => fail(e),
    }
}

/// The bytes a runtime call that fills buffers wrote (for [`fill_iovecs`]).
fn filled(r: &Call<usize>) -> usize {
    match r {
        Call::Done(Ok(n)) => *n,
        _ => 0,
    }
}

fn size(r: Call<usize>, kernel: impl FnOnce() -> ssize_t) -> ssize_t {
    match r {
        Call::Kernel => kernel(),
        Call::Done(Ok(n)) => n as ssize_t,
        Call::Done(Err(e)) => {
            if e == Errno::EPIPE {
                // SAFETY: raise takes no memory; SIGPIPE is what the kernel sends on this EPIPE.
                unsafe { libc::raise(libc::SIGPIPE) };
            }
            fail(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_null_buffer_of_no_bytes_is_empty_and_of_some_bytes_is_efault() {
        // SAFETY: null pointers, which c_slice checks before any use.
        unsafe {
            assert!(c_slice::<u8>(std::ptr::null(), 0).unwrap().is_empty());
            assert!(c_slice_mut::<u8>(std::ptr::null_mut(), 0).unwrap().is_empty());
            assert_eq!(c_slice::<u8>(std::ptr::null(), 3).unwrap_err(), Errno(libc::EFAULT));
            assert_eq!(c_slice_mut::<libc::pollfd>(std::ptr::null_mut(), 1).unwrap_err(), Errno(libc::EFAULT));
        }
    }

    /// A C caller may hand a sockaddr that sits anywhere in a byte buffer (the kernel copies
    /// bytes): it is read unaligned (a `&sockaddr_in` of it was a misaligned reference, which
    /// debug builds abort on), and a length too short for the family reads nothing.
    #[test]
    fn an_address_is_read_at_any_alignment_and_within_its_length() {
        let sin = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: 8080u16.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(Ipv4Addr::new(10, 0, 0, 1)).to_be() },
            sin_zero: [0; 8],
        };
        let size = std::mem::size_of::<libc::sockaddr_in>();
        let mut buf = [0u8; 64];
        // An offset at which the sockaddr_in is misaligned for its 4-byte fields.
        let at = (0..4).find(|k| (buf.as_ptr() as usize + k) % 4 == 1).unwrap();
        // SAFETY: a plain-integer struct viewed as its `size` bytes, copied into `buf`'s range.
        let bytes = unsafe { std::slice::from_raw_parts(&sin as *const _ as *const u8, size) };
        buf[at..at + size].copy_from_slice(bytes);
        let p = buf[at..].as_ptr() as *const sockaddr;
        // SAFETY: `p` is readable for `size` bytes (and for 1).
        unsafe {
            assert_eq!(to_addr(p, size as socklen_t), Some("10.0.0.1:8080".parse().unwrap()));
            assert_eq!(to_addr(p, 1), None);
        }
    }

    /// `{NULL, 0}` entries are valid iovecs: they read as empty buffers (reinterpreted as
    /// `IoSlice`s they made slices of a null pointer, which debug builds abort on).
    #[test]
    fn iovecs_with_null_bases_are_empty_buffers_or_efault() {
        let mut data = *b"abc";
        let iov = [
            libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 },
            libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: 3 },
        ];
        // SAFETY: `iov` holds 2 iovecs: an empty null one and `data`'s 3 bytes, which outlive the
        // slices; `bad` and the null arrays are refused before any use.
        unsafe {
            let bufs = io_slices(iov.as_ptr(), 2).unwrap();
            assert_eq!(bufs.iter().map(|b| &b[..]).collect::<Vec<_>>(), [&b""[..], b"abc"]);
            let mut bufs = io_slices_mut(&iov).unwrap();
            bufs[1][0] = b'x';
            assert!(bufs[0].is_empty());
            assert!(io_slices(std::ptr::null(), 0).unwrap().is_empty());
            assert!(io_slices_mut(&[]).unwrap().is_empty());
            let bad = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 5 }];
            assert_eq!(io_slices(bad.as_ptr(), 1).unwrap_err(), Errno(libc::EFAULT));
            assert!(io_slices_mut(&bad).is_err());
            assert_eq!(io_slices(std::ptr::null(), 2).unwrap_err(), Errno(libc::EFAULT));
        }
        assert_eq!(&data, b"xbc");
    }

    /// Where `layout`'s iovecs ((offset, length) in a 12-byte buffer) leave 16 bytes of a stream
    /// read into them: by the kernel's readv over a socketpair, and by `fill_iovecs` with a
    /// stand-in for the runtime's in-order copy, which checks that the slices it is handed are
    /// disjoint (two `&mut` slices of the same bytes alias, which Rust forbids).
    fn read_into(layout: &[(usize, usize)]) -> ([u8; 12], [u8; 12]) {
        let data = *b"ABCDEFGHIJKLMNOP";
        let iovecs = |buf: &mut [u8; 12]| -> Vec<libc::iovec> {
            let base = buf.as_mut_ptr();
            layout
                .iter()
                .map(|&(at, len)| libc::iovec { iov_base: base.wrapping_add(at).cast(), iov_len: len })
                .collect()
        };
        let (mut kernel, mut ours) = ([b'.'; 12], [b'.'; 12]);
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the pair; `data` is readable for its 16 bytes; the iovecs
        // are within `kernel` and `ours`, which outlive the calls; the fds are ours to close.
        unsafe {
            assert_eq!(libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, fds.as_mut_ptr()), 0);
            assert_eq!(libc::write(fds[1], data.as_ptr().cast(), data.len()), 16);
            let iov = iovecs(&mut kernel);
            let n = runtime::real::readv(fds[0], iov.as_ptr(), iov.len() as c_int);
            assert_eq!(n, layout.iter().map(|l| l.1).sum::<usize>().min(16) as ssize_t);
            libc::close(fds[0]);
            libc::close(fds[1]);
            let iov = iovecs(&mut ours);
            let recv = |bufs: &mut [IoSliceMut<'_>]| {
                let ranges: Vec<_> =
                    bufs.iter().map(|b| (b.as_ptr() as usize, b.as_ptr() as usize + b.len())).collect();
                for (i, a) in ranges.iter().enumerate() {
                    assert!(ranges[i + 1..].iter().all(|b| a.1 <= b.0 || b.1 <= a.0 || a.0 == a.1 || b.0 == b.1));
                }
                let mut left = &data[..];
                for b in bufs.iter_mut() {
                    let k = left.len().min(b.len());
                    b[..k].copy_from_slice(&left[..k]);
                    left = &left[k..];
                }
                Call::Done(Ok(data.len() - left.len()))
            };
            assert_eq!(filled(&fill_iovecs(iov.as_ptr(), iov.len(), recv, filled).unwrap()), n as usize);
        }
        (kernel, ours)
    }

    /// Overlapping iovecs, which C allows: the kernel copies into them in order, so a later
    /// iovec's bytes win where they overlap; ours leave the same bytes (through a scratch buffer,
    /// never two `&mut` slices of the same bytes). Disjoint ones are filled in place.
    #[test]
    fn overlapping_iovecs_are_filled_in_order_as_the_kernel_fills_them() {
        let (kernel, ours) = read_into(&[(0, 8), (4, 8)]);
        assert_eq!(&kernel, b"ABCDIJKLMNOP");
        assert_eq!(ours, kernel);
        // More iovecs than the pairwise check takes (sorted instead), the last over the first.
        let many = [(0, 1), (1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (6, 1), (7, 1), (8, 1), (0, 4)];
        let (kernel, ours) = read_into(&many);
        assert_eq!(&kernel, b"JKLMEFGHI...");
        assert_eq!(ours, kernel);
        // Disjoint, with an empty iovec inside another's bytes: no overlap.
        let (kernel, ours) = read_into(&[(0, 4), (2, 0), (4, 8)]);
        assert_eq!(&kernel, b"ABCDEFGHIJKL");
        assert_eq!(ours, kernel);
    }
}
