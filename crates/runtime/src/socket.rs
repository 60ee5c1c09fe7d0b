//! The socket calls on tracked fds: creation, the routing decision at bind/connect (shard or
//! kernel, counted), accept, data transfer, shutdown, close and dup. Waiting is `wait`'s; option
//! handling is `sockopt`'s.

use std::io::{IoSlice, IoSliceMut};
use std::net::SocketAddr;

use nic::Nic;
use stack::shard::{Buffers, Shard, SocketId};

use crate::accel::{Accel, Runtime};
use crate::epoll::Target;
use crate::fdtable::{Entry, Fd, OpenFile, SockOpts};
use crate::tracked_fds::{tracked_state, TRACKED_DATAGRAM};
use crate::wait::Dir;
use crate::{real, set_tracked, Call, Errno};

impl<N: Nic + 'static> Runtime<N> {
    /// Makes the shard listener of bound `fd` (the shard is open); epoll sets that hold `fd`
    /// now watch it.
    pub(crate) fn start_listener(&mut self, fd: i32, local: SocketAddr, backlog: usize) -> Result<(), Errno> {
        let opts = self.fds.opts(fd);
        let shards = self.open_shards()?.all_mut();
        let id = shards[0].tcp_listen_with(local, backlog, opts.v6only, opts.reuseport)?;
        // The same listener on every other shard (a port the first picked, for port 0).
        let local = SocketAddr::new(local.ip(), shards[0].local_addr(id)?.port());
        let mut others = Vec::new();
        for k in 1..shards.len() {
            match shards[k].tcp_listen_with(local, backlog, opts.v6only, opts.reuseport) {
                Ok(o) => others.push(o),
                Err(e) => {
                    let _ = shards[0].close(id);
                    for o in others {
                        let _ = shards[o.shard()].close(o);
                    }
                    return Err(e);
                }
            }
        }
        if self.cfg.nic.share {
            // Local clients come through the kernel: a kernel socket listens beside it.
            if let Err(e) = self.listen_beside(fd, id, local, backlog, &opts) {
                let shards = self.shards.all_mut();
                let _ = shards[0].close(id);
                for o in others {
                    let _ = shards[o.shard()].close(o);
                }
                return Err(e);
            }
        }
        self.shards.add_siblings(id, others);
        if opts.buffers() != Buffers::default() {
            self.set_listener_buffers(id, opts.buffers());
        }
        let entry = self.fds.get_mut(fd).unwrap();
        entry.fd = Fd::Listener { id };
        let epolls = entry.epolls.clone();
        self.attach_fd(id, fd);
        for epfd in epolls {
            if let Some(set) = self.fds.epoll_mut(epfd) {
                set.retarget(fd, Target::Sock(id), &mut self.owed_wakes);
            }
        }
        Ok(())
    }

    /// The application waits for connections on `fd` (a listener: its SO_REUSEPORT siblings in
    /// this process, inherited from a parent, are left to the processes that wait on them).
    pub(crate) fn watch_listener(&mut self, fd: i32) {
        if let Some(&Fd::Listener { id, .. }) = self.fds.kind(fd) {
            let group: Vec<SocketId> = self.shards.group(id).collect();
            for l in group {
                self.shards.of(l).tcp_listener_watched(l);
            }
        }
    }

    /// The NIC has opened: every deferred listen() becomes a shard listener.
    pub(crate) fn start_deferred_listeners(&mut self) {
        for fd in self.fds.listening() {
            let Some(&Fd::Listening { local, backlog }) = self.fds.kind(fd) else { continue };
            self.deferred_listeners -= 1;
            if let Err(e) = self.start_listener(fd, local, backlog) {
                let msg = format!("pronghorn: listening on {local} (fd {fd}) failed as the NIC opened: {e:?}\n");
                // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
                unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
                self.fds.get_mut(fd).unwrap().fd = Fd::Bound { local };
            }
        }
    }

    /// A thread is about to wait, poll or accept: a process with deferred listeners serves now,
    /// so its NIC opens (and they start listening).
    pub(crate) fn serve_deferred(&mut self) {
        if self.deferred_listeners > 0 && !self.shards.is_open() {
            let _ = self.open_shards();
        }
    }

    /// Applies `buffers` to listener `id` on every shard, for the connections it makes from
    /// now on.
    pub(crate) fn set_listener_buffers(&mut self, id: SocketId, buffers: Buffers) {
        let group: Vec<SocketId> = self.shards.group(id).collect();
        for l in group {
            let _ = self.shards.of(l).tcp_set_buffers(l, buffers);
        }
    }

    /// `fd` refers to shard socket `id` from now on: with the process's first fd of it, the
    /// family knows this process holds it (it closes if the process dies).
    pub(crate) fn attach_fd(&mut self, id: SocketId, fd: i32) {
        let st = self.socks.entry(id);
        st.fds.push(fd);
        if st.fds.len() == 1 {
            if let Some(f) = self.sharing.family() {
                f.hold(id);
            }
        }
    }

    /// Registers `fd` (in the fd table) as a new reference to shard socket `id`.
    pub(crate) fn adopt(&mut self, fd: i32, id: SocketId) {
        self.attach_fd(id, fd);
        set_tracked(fd, true);
    }

    /// The application saw EAGAIN on `fd` for `bits`: re-arm its edge-triggered epoll members.
    pub(crate) fn rearm(&mut self, fd: i32, bits: u32) {
        let sets = self.fds.get(fd).map_or(0, |e| e.epolls.len());
        for i in 0..sets {
            let epfd = self.fds.get(fd).unwrap().epolls[i];
            if let Some(set) = self.fds.epoll_mut(epfd) {
                set.rearm(fd, bits);
            }
        }
    }

    /// A pending socket that routing leaves with the kernel: the runtime forgets it.
    pub(crate) fn leave_to_kernel(&mut self, fd: i32) -> Call<()> {
        self.fds.remove(fd);
        set_tracked(fd, false);
        Call::Kernel
    }

    fn conn_id(&self, fd: i32) -> Result<SocketId, Call<()>> {
        match self.fds.kind(fd) {
            Some(Fd::Conn { id, .. }) => Ok(*id),
            Some(Fd::Listener { .. } | Fd::Listening { .. } | Fd::Bound { .. }) => {
                Err(Call::Done(Err(Errno::ENOTCONN)))
            }
            _ => Err(Call::Kernel),
        }
    }

    /// The connection and its SO_LINGER time when closing `fd` closes a connection that
    /// lingers (`Accel::linger`): its last fd, SO_LINGER on with a time above 0.
    pub(crate) fn lingers_at_close(&self, fd: i32) -> Option<(SocketId, u32)> {
        let entry = self.fds.get(fd)?;
        let (Fd::Conn { id, .. }, Some(secs @ 1..)) = (&entry.fd, self.fds.file(fd)?.opts.linger_s) else {
            return None;
        };
        let last = self.socks.get(*id).map_or(true, |st| st.fds == [fd]);
        (last && self.shards.is_open()).then_some((*id, secs))
    }

    /// Forgets `fd`; closes its shard socket when no other fd refers to it.
    pub(crate) fn release(&mut self, fd: i32) {
        // Read before the open file may go with its last fd.
        let linger_s = self.fds.file(fd).and_then(|f| f.opts.linger_s);
        let Some(entry) = self.fds.remove(fd) else { return };
        let id = match entry.fd {
            Fd::Bound { .. } => {
                if let Some(a) = entry.bound_to {
                    self.release_addr(a);
                }
                None
            }
            Fd::Listening { .. } => {
                if let Some(a) = entry.bound_to {
                    self.release_addr(a);
                }
                self.close_beside_early(fd);
                self.deferred_listeners -= 1;
                None
            }
            Fd::Listener { id, .. } | Fd::Conn { id, .. } | Fd::Udp { id, .. } => Some(id),
            Fd::Epoll(set) => {
                // Its members forget it; threads waiting on it are woken (and find it gone).
                for member in set.member_fds() {
                    if let Some(e) = self.fds.get_mut(member) {
                        e.epolls.retain(|&x| x != fd);
                    }
                }
                set.wake_all(&mut self.owed_wakes);
                return;
            }
            Fd::Pending | Fd::UdpPending { .. } => None,
        };
        for epfd in &entry.epolls {
            if let Some(set) = self.fds.epoll_mut(*epfd) {
                set.remove(fd);
            }
        }
        let Some(id) = id else { return };
        let last = match self.socks.get_mut(id) {
            Some(st) => {
                st.fds.retain(|&x| x != fd);
                st.fds.is_empty()
            }
            None => true,
        };
        if !last {
            return;
        }
        // Another process of the family still holds it: it stays open for that one.
        let last_in_family = self.sharing.family().map_or(true, |f| f.release(id));
        if let Some(st) = self.socks.remove(id) {
            // Threads still blocked on it (another thread closed it): they retry and get EBADF.
            for p in &st.waiters {
                crate::wait::owe_wake(&mut self.owed_wakes, p);
            }
        }
        if last_in_family {
            self.close_socket(id, matches!(entry.fd, Fd::Udp { .. }), linger_s, entry.bound_to);
        }
    }

    /// Closes shard socket `id`, which no fd of any process refers to any more (`udp`: a UDP
    /// socket; `linger_s`: its SO_LINGER; `bound_to`: the address its bind() claimed).
    pub(crate) fn close_socket(
        &mut self,
        id: SocketId,
        udp: bool,
        linger_s: Option<u32>,
        bound_to: Option<SocketAddr>,
    ) {
        if self.shards.is_open() {
            self.close_beside(id);
            let siblings = self.shards.take_siblings(id);
            for &o in siblings.iter() {
                let _ = self.shards.of(o).close(o);
            }
            let s = self.shards.of(id);
            if let (true, true, Ok(local)) = (self.cfg.nic.share, udp, s.local_addr(id)) {
                crate::shared::release(nic::xdp::Transport::Udp, local.port());
            }
            // SO_LINGER with a zero timeout resets instead of closing gracefully.
            let _ = if linger_s == Some(0) { s.abort(id) } else { s.close(id) };
            // What was written before close leaves now (and the FIN or RST after it).
            self.flush_shard();
        }
        if let Some(a) = bound_to {
            self.release_addr(a);
        }
    }
}

/// The options set before the connection existed (an accepted one inherits its listener's):
/// TCP_NODELAY, SO_KEEPALIVE with its timings, SO_RCVLOWAT and SO_OOBINLINE. The buffer sizes
/// went with its creation.
fn apply_conn_options<N: Nic>(shard: &mut Shard<N>, id: SocketId, opts: &SockOpts) {
    if opts.nodelay {
        let _ = shard.tcp_set_nodelay(id, true);
    }
    if let Some(ka) = opts.keepalive() {
        let _ = shard.tcp_set_keepalive(id, Some(ka));
    }
    if opts.rcvlowat > 1 {
        let _ = shard.tcp_set_rcvlowat(id, opts.rcvlowat);
    }
    if opts.oobinline {
        let _ = shard.tcp_set_oob_inline(id, true);
    }
}

/// A blocking read that has some data waits for more only while the stream can bring it: not
/// at the urgent mark (a read stops there), not once it ended or failed (the error is left for
/// the next call).
fn more_to_read<N: Nic>(shard: &mut Shard<N>, id: SocketId) -> bool {
    if shard.tcp_urgent_mark(id) == Ok(Some(0)) {
        return false;
    }
    matches!(shard.tcp_peek(id, &mut [0u8]), Ok(1) | Err(Errno::EAGAIN))
}

/// Whether a reader blocked on `id` would have been woken (Linux's `tcp_data_ready`): SO_RCVLOWAT
/// bytes wait (or the window is nearly closed), the stream ended or failed; or the reader
/// stands at the urgent mark (Linux wakes it for the urgent byte, which the read then skips).
fn wakes_a_reader<N: Nic>(shard: &mut Shard<N>, id: SocketId) -> bool {
    shard.readiness(id).readable || shard.tcp_urgent_mark(id) == Ok(Some(0))
}

/// A blocking MSG_PEEK that saw `n` bytes, fewer than it waits for: whether more can come
/// before the end of the stream, an error or the urgent mark.
fn peek_may_grow<N: Nic>(shard: &mut Shard<N>, id: SocketId, n: usize) -> bool {
    let r = shard.readiness(id);
    !(r.read_closed || r.error || r.hangup) && shard.tcp_urgent_mark(id) != Ok(Some(n))
}

/// Reads the connection into `bufs` from their linear offset `from` on, one buffer after
/// another until one is left short (Linux's `tcp_recvmsg` over an iovec). An error only when
/// nothing was read.
fn recv_into<N: Nic>(
    shard: &mut Shard<N>,
    id: SocketId,
    bufs: &mut [IoSliceMut<'_>],
    from: usize,
) -> Result<usize, Errno> {
    each_part(bufs.iter_mut().map(|b| &mut **b), from, |b, skip| shard.tcp_recv(id, &mut b[skip..]))
}

/// MSG_PEEK into `bufs`: one buffer directly; several through the thread's scratch buffer (the
/// connection peeks from the start of its data only).
fn peek_into<N: Nic>(shard: &mut Shard<N>, id: SocketId, bufs: &mut [IoSliceMut<'_>]) -> Result<usize, Errno> {
    if let [one] = bufs {
        return shard.tcp_peek(id, one);
    }
    thread_local! {
        static PEEK: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    PEEK.with(|scratch| {
        let mut scratch = scratch.borrow_mut();
        scratch.resize(bufs.iter().map(|b| b.len()).sum(), 0);
        let n = shard.tcp_peek(id, &mut scratch)?;
        let mut left = &scratch[..n];
        for b in bufs.iter_mut() {
            let k = left.len().min(b.len());
            b[..k].copy_from_slice(&left[..k]);
            left = &left[k..];
        }
        Ok(n)
    })
}

/// Writes `bufs` from their linear offset `from` on into the connection, one buffer after
/// another until one is taken short. An error only when nothing was taken.
fn send_from<N: Nic>(
    shard: &mut Shard<N>,
    id: SocketId,
    bufs: &[IoSlice<'_>],
    from: usize,
    urgent: bool,
) -> Result<usize, Errno> {
    each_part(bufs.iter().map(|b| &**b), from, |b, skip| {
        if urgent {
            shard.tcp_send_urgent(id, &b[skip..])
        } else {
            shard.tcp_send(id, &b[skip..])
        }
    })
}

/// The iovec walk of [`recv_into`] and [`send_from`]: from the linear offset `from` on, hands
/// each buffer and the offset in it to `transfer`, which moves what it can, until a buffer is
/// left short. The bytes moved; an error only when nothing was.
fn each_part<B: std::ops::Deref<Target = [u8]>>(
    bufs: impl Iterator<Item = B>,
    from: usize,
    mut transfer: impl FnMut(B, usize) -> Result<usize, Errno>,
) -> Result<usize, Errno> {
    let mut skip = from;
    let mut moved = 0;
    for b in bufs {
        if skip >= b.len() {
            skip -= b.len();
            continue;
        }
        let want = b.len() - skip;
        match transfer(b, skip) {
            Ok(n) => {
                moved += n;
                if n < want {
                    break;
                }
            }
            Err(e) if moved == 0 => return Err(e),
            Err(_) => break,
        }
        skip = 0;
    }
    Ok(moved)
}

/// What a blocking transfer that moved `done` bytes returns when it stops waiting (timeout,
/// signal) or fails: the bytes, as Linux does; the error, if it moved none.
fn partial(r: Call<usize>, done: usize) -> Call<usize> {
    match r {
        Call::Done(Err(_)) if done > 0 => Call::Done(Ok(done)),
        r => r,
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// After the kernel created `fd` with `socket(domain, ty, protocol)`: track TCP and UDP
    /// over IPv4 and IPv6.
    pub fn socket_created(&self, fd: i32, domain: i32, ty: i32, protocol: i32) {
        if fd < 0 || (domain != libc::AF_INET && domain != libc::AF_INET6) {
            return;
        }
        let entry = match (ty & 0xf, protocol) {
            (libc::SOCK_STREAM, 0 | libc::IPPROTO_TCP) => Entry::new(Fd::Pending),
            (libc::SOCK_DGRAM, 0 | libc::IPPROTO_UDP) => crate::datagram::pending_entry(domain == libc::AF_INET6),
            _ => return,
        };
        let file = OpenFile::new(
            ty & libc::SOCK_NONBLOCK != 0,
            SockOpts { v6: domain == libc::AF_INET6, ..SockOpts::default() },
        );
        let udp = matches!(entry.fd, Fd::UdpPending { .. });
        let tracked = self.with(|rt| {
            rt.release(fd);
            rt.fds.open(fd, entry, file);
        });
        if tracked.is_some() {
            if udp {
                crate::set_tracked_datagram(fd);
            } else {
                set_tracked(fd, true);
            }
        }
    }

    pub fn bind(&self, fd: i32, addr: SocketAddr) -> Call<()> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(Fd::Pending) => {
                let nonblock = rt.fds.file(fd).unwrap().nonblock;
                // On a shared interface a wildcard port (a server's `bind 0.0.0.0`) is ours
                // too: the shard takes it on the interface's addresses, the kernel socket
                // beside its listener everywhere else (`beside`). Port 0 decides nothing.
                let wildcard = rt.cfg.nic.share && addr.ip().is_unspecified() && addr.port() != 0;
                if !rt.is_ours(addr.ip()) && !wildcard {
                    rt.routing.kernel_bind += 1;
                    return rt.leave_to_kernel(fd);
                }
                // The NIC opens when the socket is first waited on (see `Fd::Listening`); what
                // commonly keeps it from opening is said now.
                if let Err(e) = rt.precheck() {
                    return Call::Done(Err(e));
                }
                let reuseport = rt.fds.opts(fd).reuseport;
                if let Err(e) = rt.claim_addr(addr, reuseport) {
                    return Call::Done(Err(e));
                }
                match rt.placeholder(fd, nonblock) {
                    Ok(()) => {
                        let entry = rt.fds.get_mut(fd).unwrap();
                        entry.fd = Fd::Bound { local: addr };
                        entry.bound_to = (addr.port() != 0).then_some(addr);
                        rt.adopt_kernel_epolls(fd);
                        Call::Done(Ok(()))
                    }
                    Err(e) => {
                        rt.release_addr(addr);
                        Call::Done(Err(e))
                    }
                }
            }
            Some(Fd::UdpPending { .. }) => rt.udp_bind_call(fd, addr),
            Some(Fd::Bound { .. } | Fd::Listening { .. } | Fd::Listener { .. } | Fd::Conn { .. } | Fd::Udp { .. }) => {
                Call::Done(Err(Errno::EINVAL))
            }
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }

    pub fn listen(&self, fd: i32, backlog: i32) -> Call<()> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(Fd::Bound { local }) => {
                let local = *local;
                // Linux: a negative backlog is the largest, which the shard cuts to somaxconn.
                let backlog = usize::try_from(backlog).unwrap_or(usize::MAX);
                if !rt.shards.is_open() && !rt.opens_at_listen() {
                    // Local clients may connect as soon as listen() returns, as on Linux.
                    if rt.cfg.nic.share {
                        let opts = rt.fds.opts(fd);
                        if let Err(e) = rt.listen_beside_early(fd, local, backlog, &opts) {
                            return Call::Done(Err(e));
                        }
                    }
                    rt.routing.accelerated_listen += 1;
                    rt.fds.get_mut(fd).unwrap().fd = Fd::Listening { local, backlog };
                    rt.deferred_listeners += 1;
                    return Call::Done(Ok(()));
                }
                rt.routing.accelerated_listen += 1;
                Call::Done(rt.start_listener(fd, local, backlog))
            }
            Some(Fd::Listening { .. } | Fd::Listener { .. }) => Call::Done(Ok(())),
            Some(Fd::Conn { .. }) => Call::Done(Err(Errno::EINVAL)),
            Some(Fd::Udp { .. }) => Call::Done(Err(Errno::EOPNOTSUPP)),
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }

    pub fn accept(&self, fd: i32, flags: i32) -> Call<(i32, SocketAddr)> {
        self.blocking(fd, Dir::Recv, false, |rt| {
            let id = match rt.fds.kind(fd) {
                Some(Fd::Listener { id, .. }) => *id,
                // `blocking` opened the NIC, which made every deferred listener; it failed.
                Some(Fd::Listening { .. }) => return Call::Done(Err(Errno(libc::ENETDOWN))),
                Some(Fd::Pending | Fd::UdpPending { .. } | Fd::Epoll(_)) | None => return Call::Kernel,
                Some(Fd::Udp { .. }) => return Call::Done(Err(Errno::EOPNOTSUPP)),
                Some(_) => return Call::Done(Err(Errno::EINVAL)),
            };
            rt.watch_listener(fd);
            // The first of the listener's shards with a connection waiting.
            let mut accepted = Err(Errno::EAGAIN);
            let group: Vec<SocketId> = rt.shards.group(id).collect();
            for l in group {
                accepted = rt.shards.of(l).tcp_accept(l);
                if accepted.is_ok() {
                    break;
                }
            }
            if accepted == Err(Errno::EAGAIN) {
                let opts = rt.fds.opts(fd);
                if let Some(local_client) = rt.accept_beside(id, flags, &opts) {
                    return Call::Done(local_client);
                }
            }
            match accepted {
                Ok((conn, peer)) => {
                    let shard = rt.shards.of(conn);
                    // SAFETY: eventfd takes no memory; the result is checked below.
                    let efd = unsafe {
                        let nb = if flags & libc::SOCK_NONBLOCK != 0 { libc::EFD_NONBLOCK } else { 0 };
                        real::eventfd(0, nb | if flags & libc::SOCK_CLOEXEC != 0 { libc::EFD_CLOEXEC } else { 0 })
                    };
                    if efd < 0 {
                        let e = crate::last_errno();
                        let _ = shard.abort(conn);
                        return Call::Done(Err(e));
                    }
                    let opts = rt.fds.opts(fd);
                    apply_conn_options(shard, conn, &opts);
                    rt.routing.accepted += 1;
                    // An fd number the kernel just handed out: nothing of ours can be left on it,
                    // but a stale record would be wrong, so forget it first.
                    rt.release(efd);
                    let file = OpenFile::new(flags & libc::SOCK_NONBLOCK != 0, opts);
                    rt.fds.open(efd, Entry::new(Fd::Conn { id: conn }), file);
                    rt.adopt(efd, conn);
                    Call::Done(Ok((efd, opts.reported(peer))))
                }
                Err(e) => {
                    if e == Errno::EAGAIN {
                        rt.rearm(fd, libc::EPOLLIN as u32);
                    }
                    Call::Done(Err(e))
                }
            }
        })
    }

    pub fn connect(&self, fd: i32, addr: SocketAddr) -> Call<()> {
        let started = self
            .with(|rt| match rt.fds.kind(fd) {
                Some(Fd::Pending) => {
                    let nonblock = rt.fds.file(fd).unwrap().nonblock;
                    // On a shared interface the kernel holds our address too: it connects
                    // locally (to a kernel server, or to the kernel socket beside one of our
                    // listeners). On a dedicated one, a connection to our own address is the
                    // shard's loopback (stack::shard::loopback).
                    if !rt.routes_here(addr.ip()) || (rt.cfg.nic.share && rt.is_ours(addr.ip())) {
                        rt.routing.kernel_connect += 1;
                        return rt.leave_to_kernel(fd);
                    }
                    let buffers = rt.fds.opts(fd).buffers();
                    let id = match rt.open_shards().and_then(|s| s.for_connect().tcp_connect_with(addr, buffers)) {
                        Ok(id) => id,
                        Err(e) => return Call::Done(Err(e)),
                    };
                    if let Err(e) = rt.placeholder(fd, nonblock) {
                        let _ = rt.shards.of(id).abort(id);
                        return Call::Done(Err(e));
                    }
                    let entry = rt.fds.get_mut(fd).unwrap();
                    entry.fd = Fd::Conn { id };
                    entry.connecting = nonblock;
                    apply_conn_options(rt.shards.of(id), id, &rt.fds.opts(fd));
                    rt.routing.accelerated_connect += 1;
                    rt.adopt(fd, id);
                    rt.adopt_kernel_epolls(fd);
                    rt.flush_shard();
                    Call::Done(Err(if nonblock { Errno(libc::EINPROGRESS) } else { Errno::EAGAIN }))
                }
                Some(&Fd::Conn { id, .. }) => {
                    if !rt.fds.get(fd).unwrap().connecting {
                        return Call::Done(Err(Errno::EISCONN));
                    }
                    let shard = rt.shards.of(id);
                    let outcome = match shard.take_error(id) {
                        Ok(Some(e)) => Err(e),
                        _ => match shard.tcp_state(id) {
                            Ok(stack::TcpState::SynSent | stack::TcpState::SynReceived) => {
                                return Call::Done(Err(Errno(libc::EALREADY)))
                            }
                            Ok(_) => Ok(()),
                            Err(e) => Err(e),
                        },
                    };
                    rt.fds.get_mut(fd).unwrap().connecting = false;
                    Call::Done(outcome)
                }
                Some(Fd::Listener { .. } | Fd::Listening { .. } | Fd::Bound { .. }) => Call::Done(Err(Errno::EINVAL)),
                Some(Fd::Udp { .. } | Fd::UdpPending { .. }) => rt.udp_connect_call(fd, addr),
                _ => Call::Kernel,
            })
            .unwrap_or(Call::Kernel);
        match started {
            Call::Done(Err(Errno::EAGAIN)) => self.blocking(fd, Dir::Send, false, |rt| {
                let Some(Fd::Conn { id, .. }) = rt.fds.kind(fd) else { return Call::Done(Err(Errno::EBADF)) };
                let id = *id;
                let shard = rt.shards.of(id);
                if let Ok(Some(e)) = shard.take_error(id) {
                    return Call::Done(Err(e));
                }
                match shard.tcp_state(id) {
                    Ok(stack::TcpState::SynSent | stack::TcpState::SynReceived) => Call::Done(Err(Errno::EAGAIN)),
                    Ok(_) => Call::Done(Ok(())),
                    Err(e) => Call::Done(Err(e)),
                }
            }),
            other => other,
        }
    }

    /// `recv`/`read`; `peek` is MSG_PEEK (the data stays).
    pub fn recv(&self, fd: i32, buf: &mut [u8], dontwait: bool, peek: bool) -> Call<usize> {
        let flags = if dontwait { libc::MSG_DONTWAIT } else { 0 } | if peek { libc::MSG_PEEK } else { 0 };
        self.recv_vectored(fd, &mut [IoSliceMut::new(buf)], flags)
    }

    /// `recv`/`readv`/`recvmsg` into `bufs` (the caller's iovecs, filled one after another as
    /// Linux's `tcp_recvmsg` fills them); MSG_DONTWAIT, MSG_PEEK and MSG_WAITALL in `flags`.
    ///
    /// A blocking call waits for SO_RCVLOWAT bytes (at most the buffers' room; all of it with
    /// MSG_WAITALL), as Linux's `tcp_recvmsg` does: it takes what is there, then sleeps until
    /// SO_RCVLOWAT bytes more wait (Linux's `tcp_data_ready` wakes the reader no sooner) and
    /// takes those; it returns early at the end of the stream, an error (reported by the next
    /// call), the urgent mark, a timeout (with what waits then) or a signal. A non-blocking
    /// call returns what there is.
    // Never inlined: bench/request_cost.sh reports this function's inclusive cost by name, and
    // LTO would fold it into its callers (one call instruction per call).
    #[inline(never)]
    pub fn recv_vectored(&self, fd: i32, bufs: &mut [IoSliceMut<'_>], flags: i32) -> Call<usize> {
        let (dontwait, peek) = (flags & libc::MSG_DONTWAIT != 0, flags & libc::MSG_PEEK != 0);
        let room: usize = bufs.iter().map(|b| b.len()).sum();
        let mut got = 0usize;
        let mut tries = 0;
        let mut started = None;
        let r = self.blocking(fd, Dir::Recv, dontwait, |rt| {
            let id = match rt.conn_id(fd) {
                Ok(id) => id,
                Err(Call::Done(Err(e))) => return Call::Done(Err(e)),
                Err(_) => return Call::Kernel,
            };
            let Some(file) = rt.fds.file(fd) else { return Call::Kernel };
            let blocking = !dontwait && !file.nonblock;
            let target = match blocking {
                true if flags & libc::MSG_WAITALL != 0 => room,
                true => (file.opts.rcvlowat as usize).min(room),
                false => 1,
            };
            // After a timeout Linux's reader takes what waits, then returns.
            let timeout = file.opts.rcvtimeo_us;
            if timeout > 0 && started.is_none() {
                started = Some(std::time::Instant::now());
            }
            let timed_out = started.is_some_and(|t| t.elapsed() >= std::time::Duration::from_micros(timeout));
            let shard = rt.shards.of(id);
            if got > 0 && !more_to_read(shard, id) {
                return Call::Done(Ok(got));
            }
            tries += 1;
            // A woken blocking reader reads once SO_RCVLOWAT is met; a non-blocking one takes
            // whatever is there (its retry follows an inline poll of the shard, not a wakeup).
            if blocking && tries > 1 && !timed_out && !wakes_a_reader(shard, id) {
                return Call::Done(Err(Errno::EAGAIN));
            }
            let r = if peek { peek_into(shard, id, bufs) } else { recv_into(shard, id, bufs, got) };
            let outcome = match r {
                Ok(n) if peek && n > 0 && n < target && peek_may_grow(shard, id, n) => Err(Errno::EAGAIN),
                Ok(n) if !peek && n > 0 => {
                    got += n;
                    if got >= target {
                        Ok(got)
                    } else {
                        Err(Errno::EAGAIN)
                    }
                }
                Ok(n) => Ok(got + n),
                Err(e) => Err(e),
            };
            if r == Err(Errno::EAGAIN) {
                rt.rearm(fd, libc::EPOLLIN as u32);
            } else if !peek && rt.observing() {
                let since = rt.socks.get_mut(id).map_or(0, |st| std::mem::take(&mut st.readable_since));
                rt.observe_read(since);
            }
            Call::Done(outcome)
        });
        partial(r, got)
    }

    /// Those of `fds` that are accelerated sockets (placeholders of the shards): what a message
    /// passing fds to another process carries only within the family (`passing`). A socket
    /// still on the kernel (`Pending`, `UdpPending`) is a real kernel socket.
    pub(crate) fn accelerated(&self, fds: &[i32]) -> Vec<i32> {
        let candidates: Vec<i32> =
            fds.iter().copied().filter(|&fd| matches!(tracked_state(fd), 1 | TRACKED_DATAGRAM)).collect();
        if candidates.is_empty() {
            return candidates;
        }
        self.with(|rt| {
            candidates
                .into_iter()
                .filter(|&fd| {
                    !matches!(rt.fds.get(fd).map(|e| &e.fd), None | Some(Fd::Pending | Fd::UdpPending { .. }))
                })
                .collect()
        })
        .unwrap_or_default()
    }

    /// `send`/`write`: a blocking socket sends everything (waiting for room); EPIPE is returned and
    /// the caller raises SIGPIPE unless MSG_NOSIGNAL.
    pub fn send(&self, fd: i32, data: &[u8], dontwait: bool) -> Call<usize> {
        self.send_marked(fd, &[IoSlice::new(data)], dontwait, false)
    }

    /// `send`/`writev`/`sendmsg` of `bufs` (the caller's iovecs, taken one after another,
    /// nothing copied on the way).
    pub fn send_vectored(&self, fd: i32, bufs: &[IoSlice<'_>], dontwait: bool) -> Call<usize> {
        self.send_marked(fd, bufs, dontwait, false)
    }

    /// `send`, and with `urgent` (MSG_OOB) the last byte it takes is urgent data (`bufs` is one
    /// buffer then: the shim gathers several first).
    // Never inlined: bench/request_cost.sh reports this function's inclusive cost by name, and
    // LTO would fold it into its callers (one call instruction per call).
    #[inline(never)]
    pub(crate) fn send_marked(&self, fd: i32, bufs: &[IoSlice<'_>], dontwait: bool, urgent: bool) -> Call<usize> {
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        let mut sent = 0usize;
        let r = self.blocking(fd, Dir::Send, dontwait, |rt| {
            let id = match rt.conn_id(fd) {
                Ok(id) => id,
                Err(Call::Done(Err(e))) => return Call::Done(Err(e)),
                Err(_) => return Call::Kernel,
            };
            let nonblock = dontwait || rt.fds.file(fd).is_some_and(|f| f.nonblock);
            let shard = rt.shards.of(id);
            let r = send_from(shard, id, bufs, sent, urgent);
            if !matches!(r, Ok(n) if n == total - sent) {
                rt.rearm(fd, libc::EPOLLOUT as u32);
            }
            if matches!(r, Ok(n) if n > 0) {
                rt.observe_write();
            }
            match r {
                Ok(n) => {
                    sent += n;
                    if sent == total || nonblock {
                        Call::Done(Ok(sent))
                    } else {
                        Call::Done(Err(Errno::EAGAIN))
                    }
                }
                // What was sent before an error is the answer (`partial`).
                Err(e) => Call::Done(Err(e)),
            }
        });
        partial(r, sent)
    }

    /// close: the runtime forgets `fd` (closing the shard socket with its last fd); the caller
    /// then closes the placeholder (or kernel socket, or epoll fd) in the kernel.
    pub fn close(&self, fd: i32) {
        let lingering = self.with(|rt| {
            let lingering = rt.lingers_at_close(fd);
            rt.release(fd);
            lingering
        });
        set_tracked(fd, false);
        if let Some(Some((id, secs))) = lingering {
            self.linger(id, secs);
        }
    }

    /// After a successful `dup`/`dup2`/`dup3`/F_DUPFD of `old` to `new`: `new` refers to the same
    /// socket (and is released first if it was one of ours: dup2 closes it).
    pub fn duplicated(&self, old: i32, new: i32) {
        if old == new {
            return;
        }
        let shared = self.with(|rt| {
            rt.release(new);
            let (fd, bound_to) = match rt.fds.get(old) {
                Some(Entry { fd: Fd::Listener { id }, bound_to, .. }) => (Fd::Listener { id: *id }, *bound_to),
                Some(Entry { fd: Fd::Conn { id }, bound_to, .. }) => (Fd::Conn { id: *id }, *bound_to),
                Some(Entry { fd: Fd::Udp { id, v6 }, bound_to, .. }) => (Fd::Udp { id: *id, v6: *v6 }, *bound_to),
                _ => return None,
            };
            let (id, udp) = (fd.socket().unwrap(), matches!(fd, Fd::Udp { .. }));
            // One open file, as dup(2) makes: O_NONBLOCK and the options are both fds'.
            rt.fds.share(old, new, Entry { bound_to, ..Entry::new(fd) });
            rt.adopt(new, id);
            Some(udp)
        });
        match shared.flatten() {
            Some(true) => crate::set_tracked_datagram(new),
            Some(false) => set_tracked(new, true),
            None => set_tracked(new, false),
        }
    }

    pub fn shutdown(&self, fd: i32, how: i32) -> Call<()> {
        self.with(|rt| {
            if let Some(&Fd::Udp { id, .. }) = rt.fds.kind(fd) {
                // Linux: ENOTCONN unless connected; then nothing this shard models changes.
                let connected = rt.shards.of_ref(id).peer_addr(id).is_ok();
                return Call::Done(match how {
                    libc::SHUT_RD | libc::SHUT_WR | libc::SHUT_RDWR if connected => Ok(()),
                    libc::SHUT_RD | libc::SHUT_WR | libc::SHUT_RDWR => Err(Errno::ENOTCONN),
                    _ => Err(Errno::EINVAL),
                });
            }
            let id = match rt.conn_id(fd) {
                Ok(id) => id,
                Err(c) => return c,
            };
            let shard = rt.shards.of(id);
            let r = match how {
                libc::SHUT_WR | libc::SHUT_RDWR => shard.tcp_shutdown_write(id),
                libc::SHUT_RD => Ok(()),
                _ => Err(Errno::EINVAL),
            };
            rt.flush_shard();
            // Its readiness changed (EPOLLOUT/EPOLLHUP): waiters look again.
            rt.notify(id);
            Call::Done(r)
        })
        .unwrap_or(Call::Kernel)
    }

    pub fn sockname(&self, fd: i32, peer: bool) -> Call<SocketAddr> {
        self.with(|rt| {
            let Some(e) = rt.fds.get(fd) else { return Call::Kernel };
            let addr = match &e.fd {
                Fd::Bound { local, .. } | Fd::Listening { local, .. } if !peer => Ok(*local),
                Fd::Bound { .. } | Fd::Listening { .. } => Err(Errno::ENOTCONN),
                Fd::Listener { id, .. } | Fd::Conn { id, .. } | Fd::Udp { id, .. } => {
                    let s = rt.shards.of_ref(*id);
                    if peer {
                        s.peer_addr(*id)
                    } else {
                        s.local_addr(*id)
                    }
                }
                _ => return Call::Kernel,
            };
            Call::Done(addr.map(|a| rt.fds.opts(fd).reported(a)))
        })
        .unwrap_or(Call::Kernel)
    }

    /// O_NONBLOCK through fcntl(F_SETFL) or ioctl(FIONBIO).
    ///
    /// O_NONBLOCK belongs to the open file, which dup'd fds share (the placeholder's flag is
    /// shared in the kernel the same way): every fd of the socket sees the change. An epoll
    /// fd's stays set (the kernel's placeholder takes the change).
    pub fn set_nonblock(&self, fd: i32, on: bool) {
        self.with(|rt| {
            if matches!(rt.fds.kind(fd), Some(Fd::Epoll(_))) {
                return;
            }
            if let Some(file) = rt.fds.file_mut(fd) {
                file.nonblock = on;
            }
        });
    }

    /// FIONREAD.
    pub fn readable_bytes(&self, fd: i32) -> Call<i32> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(Fd::Conn { id, .. }) => {
                let id = *id;
                Call::Done(rt.shards.of(id).tcp_recv_available(id).map(|n| n as i32))
            }
            // Linux: the length of the next datagram.
            Some(&Fd::Udp { id, .. }) => Call::Done(rt.shards.of(id).udp_next_len(id).map(|n| n as i32)),
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }

    /// TCP_INFO of an accelerated connection.
    pub fn tcp_info(&self, fd: i32) -> Call<stack::TcpInfo> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(Fd::Conn { id, .. }) => {
                let id = *id;
                Call::Done(rt.shards.of(id).tcp_info(id))
            }
            Some(Fd::Listener { .. } | Fd::Listening { .. } | Fd::Bound { .. }) => Call::Done(Err(Errno::ENOTCONN)),
            Some(Fd::Udp { .. }) => Call::Done(Err(Errno::EOPNOTSUPP)),
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }
}
