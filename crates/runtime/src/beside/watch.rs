//! The kernel sockets beside accelerated listeners: made at listen(), watched by the
//! `pronghorn-beside` thread, accepted from (see the parent module).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::Nic;
use stack::shard::SocketId;

use super::Beside;
use crate::accel::{Accel, Runtime};
use crate::fdtable::SockOpts;
use crate::{real, Errno};

/// A kernel socket listening on `local` as the application's listener with `opts` does, with
/// `backlog`; the kernel's errno when it cannot (EADDRINUSE: a kernel socket holds the port).
fn kernel_listener(local: SocketAddr, backlog: usize, opts: &SockOpts) -> Result<i32, Errno> {
    let domain = if local.is_ipv4() { libc::AF_INET } else { libc::AF_INET6 };
    let (addr, len) = crate::shared::socket2_addr(local);
    let on: libc::c_int = 1;
    let set = |fd: i32, level: i32, name: i32| {
        // SAFETY: `on` is an int that outlives the call.
        unsafe { real::setsockopt(fd, level, name, (&on as *const libc::c_int).cast(), 4) }
    };
    // SAFETY: plain socket calls on an fd this function owns (closed on failure); `addr` is a
    // valid sockaddr of `len` bytes.
    unsafe {
        let fd = real::socket(domain, libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(crate::last_errno());
        }
        set(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR);
        if opts.reuseport {
            set(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT);
        }
        if local.is_ipv6() && opts.v6only {
            set(fd, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY);
        }
        let backlog = libc::c_int::try_from(backlog).unwrap_or(libc::c_int::MAX);
        if real::bind(fd, (&addr as *const libc::sockaddr_storage).cast(), len) != 0 || real::listen(fd, backlog) != 0 {
            let e = crate::last_errno();
            real::close(fd);
            return Err(e);
        }
        Ok(fd)
    }
}

/// The address in `ss` (`len` bytes), if IPv4 or IPv6.
fn std_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says `ss` holds a sockaddr_in, for which it is large and
            // aligned enough.
            let sin = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::new(IpAddr::V4(ip), u16::from_be(sin.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, a sockaddr_in6.
            let sin6 = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::new(IpAddr::V6(ip), u16::from_be(sin6.sin6_port)))
        }
        _ => None,
    }
}

impl<N: Nic + 'static> Runtime<N> {
    /// listen() on `fd` before the NIC opened (its listener is made when it opens): the kernel
    /// socket beside it now, so that local clients may connect at once, as on Linux. Port 0
    /// waits for the port the shard picks.
    pub(crate) fn listen_beside_early(
        &mut self,
        fd: i32,
        local: SocketAddr,
        backlog: usize,
        opts: &SockOpts,
    ) -> Result<(), Errno> {
        if local.port() == 0 {
            return Ok(());
        }
        if let Some(k) = self.kernel_listener_beside(local, backlog, opts)? {
            self.shards.beside.early.insert(fd, k);
        }
        Ok(())
    }

    /// The deferred listener `fd` is closed before the NIC opened: so is its kernel socket.
    pub(crate) fn close_beside_early(&mut self, fd: i32) {
        if let Some(k) = self.shards.beside.early.remove(&fd) {
            // SAFETY: our own fd.
            unsafe { real::close(k) };
        }
    }

    /// The kernel socket for a listener on `local`, `None` for an address the kernel does not
    /// have (EADDRNOTAVAIL: a fixed `address` that is not the interface's), said once; any other
    /// failure is the listen's.
    fn kernel_listener_beside(
        &mut self,
        local: SocketAddr,
        backlog: usize,
        opts: &SockOpts,
    ) -> Result<Option<i32>, Errno> {
        match kernel_listener(local, backlog, opts) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if e == Errno::EADDRNOTAVAIL => {
                if !std::mem::replace(&mut self.shards.beside.said_not_the_kernels, true) {
                    let msg = format!(
                        "pronghorn: {local} is not the kernel's: local clients cannot reach this listener \
                         (nic.share wants the interface's own address, address = \"auto\")\n"
                    );
                    // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                    unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
                }
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Listener `id` of `fd` on `local` (its port chosen) starts: the kernel socket beside it,
    /// the one made at listen() if the NIC was not open then, watched from now on.
    pub(crate) fn listen_beside(
        &mut self,
        fd: i32,
        id: SocketId,
        local: SocketAddr,
        backlog: usize,
        opts: &SockOpts,
    ) -> Result<(), Errno> {
        let early = self.shards.beside.early.remove(&fd);
        let Some(k) = early.map_or_else(|| self.kernel_listener_beside(local, backlog, opts), |k| Ok(Some(k)))? else {
            return Ok(());
        };
        let Some(watch) = self.beside_watch() else {
            // SAFETY: our own fd.
            unsafe { real::close(k) };
            return Err(Errno(libc::ENOMEM));
        };
        let mut ev = libc::epoll_event { events: (libc::EPOLLIN | libc::EPOLLONESHOT) as u32, u64: k as u64 };
        // SAFETY: `ev` outlives the call; both fds are ours.
        if unsafe { real::epoll_ctl(watch, libc::EPOLL_CTL_ADD, k, &mut ev) } != 0 {
            let e = crate::last_errno();
            // SAFETY: our own fd.
            unsafe { real::close(k) };
            return Err(e);
        }
        self.shards.beside.listeners.insert(id, Beside { fd: k, ready: false, arrivals: 0 });
        Ok(())
    }

    /// The watcher's epoll set, its thread started with the first kernel socket.
    fn beside_watch(&mut self) -> Option<i32> {
        if let Some(w) = self.shards.beside.watch {
            return Some(w);
        }
        let me = self.me?;
        // SAFETY: epoll_create1 takes no memory.
        let epfd = unsafe { real::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epfd < 0 {
            return None;
        }
        let started = crate::threads::spawn("pronghorn-beside".into(), move || me.watch_beside(epfd));
        if started.is_err() {
            // SAFETY: our own fd.
            unsafe { real::close(epfd) };
            return None;
        }
        self.shards.beside.watch = Some(epfd);
        Some(epfd)
    }

    /// The kernel socket `fd` has connections waiting: its listener is readable.
    fn beside_readable(&mut self, fd: i32) {
        let Some((&id, b)) = self.shards.beside.listeners.iter_mut().find(|(_, b)| b.fd == fd) else { return };
        b.ready = true;
        b.arrivals = b.arrivals.wrapping_add(1);
        self.notify(id);
    }

    /// accept() on listener `id` found nothing on the shards: a connection from its kernel
    /// socket, if the watcher saw one (`None`: it saw none). Found empty, the socket is watched
    /// again.
    pub(crate) fn accept_beside(
        &mut self,
        id: SocketId,
        flags: i32,
        opts: &SockOpts,
    ) -> Option<Result<(i32, SocketAddr), Errno>> {
        let watch = self.shards.beside.watch?;
        let b = self.shards.beside.listeners.get_mut(&id).filter(|b| b.ready)?;
        // SAFETY: all-zero is a valid sockaddr_storage; the kernel writes at most `len` bytes.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let flags = flags & (libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC);
        // SAFETY: `ss` and `len` outlive the call; `b.fd` is our listening socket.
        let fd = unsafe { real::accept4(b.fd, (&mut ss as *mut libc::sockaddr_storage).cast(), &mut len, flags) };
        if fd < 0 {
            let e = crate::last_errno();
            if e != Errno::EAGAIN {
                return Some(Err(e));
            }
            b.watch_again(watch);
            return None;
        }
        // The last one waiting: the listener is no longer readable for it (level-triggered
        // epoll and poll must not report it again).
        let mut p = libc::pollfd { fd: b.fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: `p` outlives the call.
        if unsafe { real::poll(&mut p, 1, 0) } == 0 {
            b.watch_again(watch);
        }
        let on: libc::c_int = 1;
        let set = |level: i32, name: i32| {
            // SAFETY: `on` is an int that outlives the call; `fd` is the socket just accepted.
            unsafe { real::setsockopt(fd, level, name, (&on as *const libc::c_int).cast(), 4) };
        };
        // Linux's accepted socket inherits its listener's options; these were set on ours.
        if opts.nodelay {
            set(libc::IPPROTO_TCP, libc::TCP_NODELAY);
        }
        if opts.keepalive {
            set(libc::SOL_SOCKET, libc::SO_KEEPALIVE);
        }
        self.routing.kernel_accepted += 1;
        // A number the kernel just handed out: a stale record of ours on it would be wrong.
        self.release(fd);
        let peer = std_addr(&ss).unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0));
        Some(Ok((fd, peer)))
    }

    /// Listener `id` is closed: so is its kernel socket (the kernel resets the connections it
    /// still queues, as it would the listener's own).
    pub(crate) fn close_beside(&mut self, id: SocketId) {
        if let Some(b) = self.shards.beside.listeners.remove(&id) {
            // SAFETY: our own fd; closing it also takes it out of the watcher's set.
            unsafe { real::close(b.fd) };
        }
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// The watcher thread: sleeps in the kernel until a kernel socket beside a listener is
    /// readable, then marks it (under the lock, which sends the wakeups).
    fn watch_beside(&'static self, epfd: i32) {
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 16];
        loop {
            // SAFETY: `events` outlives the call and holds 16 entries.
            let n = unsafe { real::epoll_wait(epfd, events.as_mut_ptr(), 16, -1) };
            if n < 0 {
                if crate::last_errno() == Errno(libc::EINTR) {
                    continue;
                }
                return;
            }
            let ready: Vec<i32> = events[..n as usize].iter().map(|e| e.u64 as i32).collect();
            let served = self.with(|rt| {
                for fd in ready {
                    rt.beside_readable(fd);
                }
            });
            if served.is_none() {
                return;
            }
        }
    }
}
