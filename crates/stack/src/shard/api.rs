//! The socket calls the runtime makes on TCP sockets, and what they answer: listen, accept,
//! connect, send and receive (urgent data too), the options that act on a connection, close
//! and abort, and readiness as epoll reports it. (UDP's calls are in [`super::udp`].) Every
//! call returns Linux's errno for Linux's reasons.
//!
//! A call changes a connection and marks it dirty; the next pass of the driver sends what it
//! caused (TCP_CORK's release and an abort send at once, through [`super::tcp`]). It must not
//! build frames or touch the demux tables beyond binding and unbinding.

use std::collections::VecDeque;
use std::net::SocketAddr;

use nic::Nic;
use tcp::{Connection, State as TcpState};
use wire::IpAddress;

use super::addr::{is_unspecified, to_ip, to_std};
use super::tcp::{ListenGroup, Listener, TcpSocket};
use super::Socket;
use super::{Buffers, Errno, Readiness, Shard, SocketId};
use crate::shard::table::FourTuple;

impl<N: Nic> Shard<N> {
    /// The application waits for connections on listener `id` (epoll, poll, accept). Among
    /// SO_REUSEPORT listeners of one address, only those it waits on get new connections: a
    /// process that inherited every worker's listener through fork (nginx `listen ...
    /// reuseport`) serves one of them, and its siblings, each with its own shard, the others.
    pub fn tcp_listener_watched(&mut self, id: SocketId) {
        let _arena = self.in_arena();
        if let Some(Socket::Listener(l)) = self.sockets.get_mut(id) {
            l.watched = true;
        }
    }

    pub(super) fn local_address(&self, family_v6: bool) -> Result<IpAddress, Errno> {
        if family_v6 {
            self.link.ipv6().map(IpAddress::V6).ok_or(Errno::EADDRNOTAVAIL)
        } else {
            self.link.ipv4().map(IpAddress::V4).ok_or(Errno::EADDRNOTAVAIL)
        }
    }

    pub(super) fn check_local(&self, addr: IpAddress) -> Result<(), Errno> {
        let ours = match addr {
            IpAddress::V4(a) => Some(a) == self.link.ipv4(),
            IpAddress::V6(a) => Some(a) == self.link.ipv6() || a == self.link.ipv6_link_local(),
        };
        if ours || is_unspecified(addr) {
            Ok(())
        } else {
            Err(Errno::EADDRNOTAVAIL)
        }
    }

    /// A TCP listener on `local` (the unspecified address listens on every address of its
    /// family; `[::]` also takes IPv4). Port 0 picks an ephemeral port.
    pub fn tcp_listen(&mut self, local: SocketAddr, backlog: usize) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        self.tcp_listen_with(local, backlog, false, false)
    }

    /// [`Shard::tcp_listen`] with IPV6_V6ONLY (a `[::]` listener that takes no IPv4) and
    /// SO_REUSEPORT (listeners that all set it share the address; new connections are spread
    /// over them).
    pub fn tcp_listen_with(
        &mut self,
        local: SocketAddr,
        backlog: usize,
        v6only: bool,
        reuseport: bool,
    ) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        let addr = to_ip(local.ip());
        self.check_local(addr)?;
        let port = if local.port() == 0 {
            let listeners = &self.listeners;
            self.ports
                .allocate(addr, (addr, 0), |p| listeners.get((addr, p)).is_none())
                .map_err(|_| Errno::EADDRINUSE)?
        } else {
            local.port()
        };
        let joins = match self.listeners.get((addr, port)) {
            Some(g) if g.reuseport && reuseport => true,
            Some(_) => return Err(Errno::EADDRINUSE),
            None => false,
        };
        let id = self.sockets.alloc(Socket::Listener(Listener {
            local: (addr, port),
            // Linux: a backlog above `somaxconn` is `somaxconn`.
            backlog: backlog.min(self.cfg.somaxconn).max(1),
            half_open: 0,
            accept_queue: VecDeque::new(),
            arrivals: 0,
            watched: false,
            buffers: Buffers::default(),
            last_cookie_sent: None,
        }));
        if joins {
            self.listeners.get_mut((addr, port)).expect("the group exists").members.push(id);
        } else if self.listeners.insert((addr, port), v6only, ListenGroup { reuseport, members: vec![id] }).is_err() {
            self.sockets.take(id);
            return Err(Errno::EADDRINUSE);
        }
        Ok(id)
    }

    /// The local address a listener or connection is bound to.
    pub fn local_addr(&self, id: SocketId) -> Result<SocketAddr, Errno> {
        match self.sockets.get(id) {
            Some(Socket::Listener(l)) => Ok(SocketAddr::new(to_std(l.local.0), l.local.1)),
            Some(Socket::Tcp(s)) => {
                let (a, p) = s.tuple.local();
                Ok(SocketAddr::new(to_std(a), p))
            }
            Some(Socket::Udp(u)) => Ok(SocketAddr::new(to_std(u.local.0), u.local.1)),
            None => Err(Errno::EBADF),
        }
    }

    /// The peer of a connection.
    pub fn peer_addr(&self, id: SocketId) -> Result<SocketAddr, Errno> {
        match self.sockets.get(id) {
            Some(Socket::Tcp(s)) => {
                let (a, p) = s.tuple.remote();
                Ok(SocketAddr::new(to_std(a), p))
            }
            Some(Socket::Udp(u)) => u.remote().ok_or(Errno::ENOTCONN),
            Some(_) => Err(Errno::ENOTCONN),
            None => Err(Errno::EBADF),
        }
    }

    /// The next established connection of a listener (EAGAIN when none).
    pub fn tcp_accept(&mut self, listener: SocketId) -> Result<(SocketId, SocketAddr), Errno> {
        let _arena = self.in_arena();
        let id = match self.sockets.get_mut(listener) {
            Some(Socket::Listener(l)) => l.accept_queue.pop_front().ok_or(Errno::EAGAIN)?,
            Some(_) => return Err(Errno::EINVAL),
            None => return Err(Errno::EBADF),
        };
        let s = self.sockets.tcp(id)?;
        s.listener = None;
        s.owned = true;
        let (a, p) = s.tuple.remote();
        // Data or a FIN may have arrived before the accept: report it.
        if s.conn.is_readable() || s.conn.error().is_some() {
            self.sockets.mark_changed(id);
        }
        Ok((id, SocketAddr::new(to_std(a), p)))
    }

    /// Starts an active open to `remote` from an ephemeral port (non-blocking: the socket
    /// becomes writable when connected, or reports the error).
    pub fn tcp_connect(&mut self, remote: SocketAddr) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        self.tcp_connect_with(remote, Buffers::default())
    }

    /// [`Shard::tcp_connect`] with the socket's buffers (its SYN offers the window scale the
    /// receive buffer needs).
    pub fn tcp_connect_with(&mut self, remote: SocketAddr, buffers: Buffers) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        let dst = to_ip(remote.ip());
        let src = self.local_address(matches!(dst, IpAddress::V6(_)))?;
        if self.link.routes().next_hop(dst).is_none() {
            return Err(Errno::ENETUNREACH);
        }
        let conns = &self.conns;
        let time_wait = &self.time_wait_table;
        let port = self
            .ports
            .allocate(src, (dst, remote.port()), |p| {
                let t = FourTuple::new((src, p), (dst, remote.port()));
                // A connection to our own address never takes the port it connects to: both
                // ends would be one 4-tuple.
                (dst, remote.port()) != (src, p) && !conns.contains_key(&t) && !time_wait.contains_key(&t)
            })
            .map_err(|_| Errno::EADDRNOTAVAIL)?;
        let tuple = FourTuple::new((src, port), (dst, remote.port()));
        let cfg = self.conn_config(&tuple, buffers);
        let iss = self.iss(&tuple);
        let conn = Connection::connect(&cfg, port, remote.port(), iss, self.now);
        self.stats.tcp_active_opens += 1;
        let id = self.add_connection(TcpSocket::connecting(conn, tuple));
        Ok(id)
    }

    pub fn tcp_send(&mut self, id: SocketId, data: &[u8]) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        self.send_marked(id, data, false)
    }

    /// `send(..., MSG_OOB)`: the last byte taken is urgent (see `tcp::Connection::send_urgent`).
    pub fn tcp_send_urgent(&mut self, id: SocketId, data: &[u8]) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        self.send_marked(id, data, true)
    }

    pub(super) fn send_marked(&mut self, id: SocketId, data: &[u8], urgent: bool) -> Result<usize, Errno> {
        // One lookup of the connection for the budget, the write and the new charge.
        let budget = self.memory_budget();
        let s = self.sockets.tcp(id)?;
        s.conn.set_memory_budget(budget);
        let r = if urgent { s.conn.send_urgent(data) } else { s.conn.send(data) };
        s.rings_used = true;
        // The application saw a full buffer: the next time it has room is a change to report
        // (as EPOLLET re-arms on EAGAIN).
        if !matches!(r, Ok(n) if n == data.len()) {
            s.reported.writable = false;
        }
        if let Some((before, after)) = s.recount() {
            self.memory_changed(before, after);
        }
        self.wait_for_memory(id);
        let n = r?;
        self.sockets.mark_dirty(id);
        Ok(n)
    }

    /// Reads in-order data; `Ok(0)` is the end of the stream.
    pub fn tcp_recv(&mut self, id: SocketId, buf: &mut [u8]) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        let s = self.sockets.tcp(id)?;
        let r = s.conn.recv(buf);
        if r == Err(tcp::Error::WouldBlock) {
            s.reported.readable = false;
        }
        let n = r?;
        if let Some((before, after)) = s.recount() {
            self.memory_changed(before, after);
        }
        // Reading may open the window: let the connection send an update.
        self.sockets.mark_dirty(id);
        Ok(n)
    }

    /// Reads without consuming (MSG_PEEK).
    pub fn tcp_peek(&mut self, id: SocketId, buf: &mut [u8]) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        Ok(self.sockets.tcp(id)?.conn.peek(buf)?)
    }

    /// `recv(..., MSG_OOB)`: the urgent byte (`None`: end of stream), never waiting; `peek`
    /// (MSG_PEEK) leaves it. The errors are Linux's (see `tcp::Connection::recv_urgent`).
    pub fn tcp_recv_urgent(&mut self, id: SocketId, peek: bool) -> Result<Option<u8>, Errno> {
        let _arena = self.in_arena();
        let s = self.sockets.tcp(id)?;
        let byte = s.conn.recv_urgent(peek)?;
        if !peek {
            // Taken: the next urgent byte is a change to report.
            s.reported.urgent = false;
        }
        Ok(byte)
    }

    /// Bytes before the urgent mark (`Some(0)`: SIOCATMARK), `None` without urgent data.
    pub fn tcp_urgent_mark(&mut self, id: SocketId) -> Result<Option<usize>, Errno> {
        let _arena = self.in_arena();
        Ok(self.sockets.tcp(id)?.conn.urgent_mark())
    }

    /// Connections whose peer marked new urgent data since the last call (each once per new
    /// urgent pointer): the application's SIGURG.
    pub fn take_urgent(&mut self, out: &mut Vec<SocketId>) {
        out.append(&mut self.urgent);
    }

    /// SO_OOBINLINE.
    pub fn tcp_set_oob_inline(&mut self, id: SocketId, inline: bool) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.sockets.tcp(id)?.conn.set_oob_inline(inline);
        self.sockets.mark_dirty(id);
        Ok(())
    }

    /// SO_RCVLOWAT (readable from this many bytes on).
    pub fn tcp_set_rcvlowat(&mut self, id: SocketId, bytes: u32) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.sockets.tcp(id)?.conn.set_rcvlowat(bytes);
        // Readiness may change either way: the next pass reports it.
        self.sockets.mark_dirty(id);
        Ok(())
    }

    /// SO_RCVBUF/SO_SNDBUF of a connection (`None`: left as they are); of a listener, for the
    /// connections it makes from now on.
    pub fn tcp_set_buffers(&mut self, id: SocketId, buffers: Buffers) -> Result<(), Errno> {
        let _arena = self.in_arena();
        match self.sockets.get_mut(id) {
            Some(Socket::Tcp(s)) => {
                match buffers.recv {
                    Some(bytes) if buffers.recv_fixed => s.conn.set_recv_buffer(bytes),
                    Some(bytes) => s.conn.grow_recv_buffer(bytes),
                    None => {}
                }
                if let Some(bytes) = buffers.send {
                    s.conn.set_send_buffer(bytes);
                }
                self.recharge(id);
            }
            Some(Socket::Listener(l)) => {
                l.buffers.recv = buffers.recv.or(l.buffers.recv);
                l.buffers.recv_fixed |= buffers.recv_fixed;
                l.buffers.send = buffers.send.or(l.buffers.send);
                return Ok(());
            }
            Some(Socket::Udp(_)) => return Err(Errno::EOPNOTSUPP),
            None => return Err(Errno::EBADF),
        }
        self.sockets.mark_dirty(id);
        Ok(())
    }

    /// Bytes that `tcp_send` would take now (0 counts as a full buffer seen, like EAGAIN).
    pub fn tcp_send_space(&mut self, id: SocketId) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        let s = self.sockets.tcp(id)?;
        let space = s.conn.send_space();
        if space == 0 {
            s.reported.writable = false;
        }
        Ok(space)
    }

    /// Bytes waiting to be read (FIONREAD).
    pub fn tcp_recv_available(&mut self, id: SocketId) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        Ok(self.sockets.tcp(id)?.conn.recv_available())
    }

    pub fn tcp_shutdown_write(&mut self, id: SocketId) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.sockets.tcp(id)?.conn.shutdown_write()?;
        self.sockets.mark_dirty(id);
        Ok(())
    }

    pub fn tcp_set_nodelay(&mut self, id: SocketId, nodelay: bool) -> Result<(), Errno> {
        let _arena = self.in_arena();
        let s = self.sockets.tcp(id)?;
        s.conn.set_nodelay(nodelay);
        s.nodelay = nodelay;
        self.sockets.mark_dirty(id);
        Ok(())
    }

    /// SO_KEEPALIVE with its TCP_KEEPIDLE/INTVL/CNT (`None`: off).
    pub fn tcp_set_keepalive(&mut self, id: SocketId, keepalive: Option<tcp::Keepalive>) -> Result<(), Errno> {
        let _arena = self.in_arena();
        let now = self.now;
        self.sockets.tcp(id)?.conn.set_keepalive(keepalive, now);
        self.sockets.mark_dirty(id);
        Ok(())
    }

    /// TCP_NODELAY as set.
    pub fn tcp_nodelay(&mut self, id: SocketId) -> Result<bool, Errno> {
        let _arena = self.in_arena();
        Ok(self.sockets.tcp(id)?.nodelay)
    }

    /// Sends what is queued now, small tail segment included (what clearing TCP_CORK does):
    /// Nagle is lifted for this one flush.
    pub fn tcp_push(&mut self, id: SocketId) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.sockets.tcp(id)?.conn.set_nodelay(true);
        self.service(id);
        if let Ok(s) = self.sockets.tcp(id) {
            let nodelay = s.nodelay;
            s.conn.set_nodelay(nodelay);
        }
        Ok(())
    }

    pub fn tcp_info(&mut self, id: SocketId) -> Result<tcp::Info, Errno> {
        let _arena = self.in_arena();
        Ok(self.sockets.tcp(id)?.conn.info())
    }

    pub fn tcp_state(&self, id: SocketId) -> Result<TcpState, Errno> {
        match self.sockets.get(id) {
            Some(Socket::Tcp(s)) => Ok(s.conn.state()),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }

    /// SO_ERROR: the pending error, consumed.
    pub fn take_error(&mut self, id: SocketId) -> Result<Option<Errno>, Errno> {
        let _arena = self.in_arena();
        match self.sockets.get_mut(id) {
            Some(Socket::Udp(u)) => Ok(u.take_error()),
            _ => Ok(self.sockets.tcp(id)?.conn.take_error().map(Errno::from)),
        }
    }

    /// Closes a socket: a connection finishes gracefully (its data is still delivered, then a
    /// FIN) and is freed when done; a listener resets the connections nobody accepted.
    pub fn close(&mut self, id: SocketId) -> Result<(), Errno> {
        let _arena = self.in_arena();
        let now = self.now;
        match self.sockets.get_mut(id) {
            None => Err(Errno::EBADF),
            Some(Socket::Tcp(s)) => {
                if !std::mem::replace(&mut s.app_closed, true) {
                    self.orphans += 1;
                }
                let Some(Socket::Tcp(s)) = self.sockets.get_mut(id) else { return Err(Errno::EBADF) };
                s.conn.close(now);
                let (state, tuple, queued) = (s.conn.state(), s.tuple, s.conn.send_queued());
                if state == TcpState::Closed {
                    // Reset or timed out before, or reset now (unread data): a RST owed goes,
                    // its counters are taken, and nothing else is left to do.
                    self.service(id);
                    self.free_tcp(id);
                } else if state == TcpState::TimeWait && self.conns.get(&tuple) != Some(&id) {
                    // Its TIME-WAIT was handed to the table already.
                    self.free_tcp(id);
                } else if state != TcpState::TimeWait && self.orphan_out_of_resources(queued) {
                    // Linux `tcp_close`: too many orphans, or no memory ("too many orphaned
                    // sockets"): reset.
                    self.abort_orphan(id);
                } else {
                    self.sockets.mark_dirty(id);
                }
                Ok(())
            }
            Some(Socket::Listener(l)) => {
                let local = l.local;
                let pending: Vec<SocketId> = l.accept_queue.drain(..).collect();
                let last = self.listeners.get_mut(local).is_some_and(|g| {
                    g.members.retain(|&m| m != id);
                    g.members.is_empty()
                });
                if last {
                    self.listeners.remove(local);
                    self.note_closed_port(local.1, now);
                }
                for c in pending {
                    self.abort_and_free(c);
                }
                // Half-open children die with their listener (their ACK would find no one).
                self.sockets.take(id);
                Ok(())
            }
            Some(Socket::Udp(u)) => {
                let local = u.local;
                self.udp_unbind(id, local);
                if let Some(Socket::Udp(u)) = self.sockets.take(id) {
                    for data in u.into_buffers() {
                        self.recycle_datagram(data);
                    }
                }
                Ok(())
            }
        }
    }

    /// Resets a connection at once (SO_LINGER with a zero timeout).
    pub fn abort(&mut self, id: SocketId) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.sockets.tcp(id)?;
        self.abort_and_free(id);
        Ok(())
    }

    /// Every TCP connection with its addresses and state, for the connection table
    /// (`pronghorn conns`) and diagnostics. It walks all sockets: never call it per packet.
    pub fn connections(&self) -> impl Iterator<Item = (SocketId, SocketAddr, SocketAddr, tcp::Info)> + '_ {
        self.sockets.iter().filter_map(|(id, socket)| match socket {
            Socket::Tcp(s) => {
                let (la, lp) = s.tuple.local();
                let (ra, rp) = s.tuple.remote();
                Some((id, SocketAddr::new(to_std(la), lp), SocketAddr::new(to_std(ra), rp), s.conn.info()))
            }
            _ => None,
        })
    }

    /// How many times new data (or the end of stream) arrived on a connection, or a connection
    /// was queued on a listener. Edge-triggered waiters report EPOLLIN again when it moves, as
    /// Linux wakes them on every arrival even if the application did not drain the socket.
    pub fn arrivals(&self, id: SocketId) -> u32 {
        match self.sockets.get(id) {
            Some(Socket::Tcp(s)) => s.arrivals,
            Some(Socket::Listener(l)) => l.arrivals,
            Some(Socket::Udp(u)) => u.arrivals,
            None => 0,
        }
    }

    /// What `id` is ready for now.
    pub fn readiness(&self, id: SocketId) -> Readiness {
        match self.sockets.get(id) {
            None => Readiness { error: true, hangup: true, ..Readiness::default() },
            Some(Socket::Listener(l)) => Readiness { readable: !l.accept_queue.is_empty(), ..Readiness::default() },
            Some(Socket::Udp(u)) => {
                Readiness { readable: u.readable(), writable: true, error: u.has_error(), ..Readiness::default() }
            }
            Some(Socket::Tcp(s)) => s.readiness(),
        }
    }
}

impl TcpSocket {
    /// Counts what the connection's rings hold again after a call that may have changed it:
    /// `(before, after)` when it changed, for [`Shard::memory_changed`] (nearly always the same
    /// rings: then the shard's use, its pressure and the waiters' lot are what the last change
    /// left).
    #[inline]
    pub(super) fn recount(&mut self) -> Option<(usize, usize)> {
        let after = self.conn.charged_bytes();
        let before = std::mem::replace(&mut self.charged, after);
        (before != after).then_some((before, after))
    }

    /// What the application waits on of this connection (poll's events).
    pub(super) fn readiness(&self) -> Readiness {
        let state = self.conn.state();
        let read_closed = matches!(
            state,
            TcpState::CloseWait | TcpState::LastAck | TcpState::Closing | TcpState::TimeWait | TcpState::Closed
        );
        Readiness {
            readable: self.conn.is_readable(),
            writable: self.conn.is_writable() && state != TcpState::SynSent && state != TcpState::SynReceived,
            read_closed,
            hangup: state == TcpState::Closed || state == TcpState::TimeWait,
            error: self.conn.error().is_some(),
            urgent: self.conn.has_urgent(),
        }
    }
}
