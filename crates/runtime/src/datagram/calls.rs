//! The UDP calls: a pending socket moving onto the shard at bind or connect (or sendto) into
//! our subnet, and datagram send, receive and disconnect on it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::Nic;
use stack::shard::SocketId;

use super::{as_read_by, local_for, Datagram};
use crate::accel::{Accel, Runtime};
use crate::fdtable::Fd;
use crate::wait::Dir;
use crate::{set_tracked_datagram, Call, Errno};

impl<N: Nic + 'static> Runtime<N> {
    /// Moves pending UDP socket `fd` onto the shard: bound to `local` (port 0: an ephemeral
    /// one), connected to `remote` if given.
    fn udp_open(&mut self, fd: i32, local: SocketAddr, remote: Option<SocketAddr>) -> Result<SocketId, Errno> {
        let Some((&Fd::UdpPending { v6 }, file)) = self.fds.with_file(fd).map(|(e, f)| (&e.fd, f)) else {
            return Err(Errno::EBADF);
        };
        let (nonblock, opts) = (file.nonblock, file.opts);
        let shards = self.open_shards()?;
        // A server's socket on the first shard, a client's on the next in turn: datagrams that
        // reach another shard's queue are handed over (`stack::shard::exchange`).
        let shard = if remote.is_some() || local.port() == 0 { shards.for_connect() } else { &mut shards.all_mut()[0] };
        let id = shard.udp_bind_with(local, opts.reuseaddr, opts.reuseport)?;
        if opts.rcvbuf.is_some() {
            shard.udp_set_rcvbuf(id, opts.rcvbuf.map(|b| b as usize))?;
        }
        if let Some(r) = remote {
            if let Err(e) = shard.udp_connect(id, Some(r)) {
                let _ = shard.close(id);
                return Err(e);
            }
        }
        if let Err(e) = self.placeholder(fd, nonblock) {
            let _ = self.shards.of(id).close(id);
            return Err(e);
        }
        let entry = self.fds.get_mut(fd).unwrap();
        entry.fd = Fd::Udp { id, v6 };
        self.adopt_kernel_epolls(fd);
        self.attach_fd(id, fd);
        set_tracked_datagram(fd);
        self.routing.accelerated_udp += 1;
        if self.cfg.nic.share {
            if let Ok(local) = self.shards.of(id).local_addr(id) {
                crate::shared::hold(nic::xdp::Transport::Udp, local.port());
            }
        }
        Ok(id)
    }

    /// Our address for talking to `peer`, if `peer` is reached through the accelerated
    /// interface.
    fn udp_local_for(&self, peer: IpAddr) -> Option<SocketAddr> {
        if !self.routes_here(peer) {
            return None;
        }
        let v4 = self.cfg.ipv4.as_ref().map(|c| IpAddr::V4(c.address.addr));
        let v6 = self.cfg.ipv6.as_ref().map(|c| IpAddr::V6(c.address.addr));
        local_for(v4, v6, peer).map(|ip| SocketAddr::new(ip, 0))
    }

    /// bind() on a pending UDP socket.
    pub(crate) fn udp_bind_call(&mut self, fd: i32, addr: SocketAddr) -> Call<()> {
        // On a shared interface a wildcard port (a server's `bind 0.0.0.0:PORT`) is ours, as
        // TCP's: the shard takes it on the interface's addresses, and the XDP program hands it
        // PORT (`udp_open` holds it). The kernel keeps no socket on it: see the module's doc.
        let wildcard = self.cfg.nic.share && addr.ip().is_unspecified() && addr.port() != 0;
        if self.is_ours(addr.ip()) || wildcard {
            if let Err(e) = self.precheck() {
                return Call::Done(Err(e));
            }
            return Call::Done(self.udp_open(fd, addr, None).map(|_| ()));
        }
        if addr.ip().is_unspecified() && addr.port() == 0 {
            // The kernel binds it; where it goes is decided by its first connect or sendto.
            return Call::Kernel;
        }
        self.routing.kernel_udp += 1;
        self.leave_to_kernel(fd)
    }

    /// connect() on a UDP socket.
    pub(crate) fn udp_connect_call(&mut self, fd: i32, addr: SocketAddr) -> Call<()> {
        match self.fds.kind(fd) {
            Some(&Fd::Udp { id, .. }) => Call::Done(self.shards.of(id).udp_connect(id, Some(addr))),
            Some(Fd::UdpPending { .. }) => match self.udp_local_for(addr.ip()) {
                Some(local) => Call::Done(self.udp_open(fd, local, Some(addr)).map(|_| ())),
                None => {
                    self.routing.kernel_udp += 1;
                    self.leave_to_kernel(fd)
                }
            },
            _ => Call::Kernel,
        }
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// connect(AF_UNSPEC) on an accelerated UDP socket: it forgets its peer.
    pub fn disconnect(&self, fd: i32) -> Call<()> {
        self.with(|rt| match rt.fds.kind(fd) {
            Some(&Fd::Udp { id, .. }) => Call::Done(rt.shards.of(id).udp_connect(id, None)),
            _ => Call::Kernel,
        })
        .unwrap_or(Call::Kernel)
    }

    /// recv/recvfrom/recvmsg/read on a UDP socket: one datagram (MSG_DONTWAIT, MSG_PEEK and
    /// MSG_TRUNC in `flags` as Linux reads them).
    pub fn recv_datagram(&self, fd: i32, buf: &mut [u8], flags: i32) -> Call<Datagram> {
        let dontwait = flags & libc::MSG_DONTWAIT != 0;
        self.blocking(fd, Dir::Recv, dontwait, |rt| {
            let Some(&Fd::Udp { id, v6, .. }) = rt.fds.kind(fd) else { return Call::Kernel };
            let shard = rt.shards.of(id);
            // A pending ICMP error comes before queued datagrams (Linux's __skb_recv_udp).
            if let Ok(Some(e)) = shard.take_error(id) {
                return Call::Done(Err(e));
            }
            match shard.udp_recv(id, buf, flags & libc::MSG_PEEK != 0) {
                Ok(r) => {
                    let len = if flags & libc::MSG_TRUNC != 0 { r.len } else { r.copied };
                    Call::Done(Ok(Datagram { len, from: as_read_by(r.from, v6), truncated: r.len > r.copied }))
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

    /// send/sendto/sendmsg/write on a UDP socket: one datagram to `to`, or to the connected
    /// peer. A pending socket sending into our subnet moves to the shard first.
    pub fn send_datagram(&self, fd: i32, data: &[u8], to: Option<SocketAddr>, flags: i32) -> Call<usize> {
        let placed = self
            .with(|rt| match rt.fds.kind(fd) {
                Some(Fd::Udp { .. }) => Call::Done(Ok(())),
                Some(&Fd::UdpPending { v6, .. }) => match to.and_then(|to| rt.udp_local_for(to.ip())) {
                    // Linux autobinds to the wildcard address: getsockname shows it (a
                    // connected socket shows the source address chosen for its peer).
                    Some(_) => {
                        let any: IpAddr = if v6 { Ipv6Addr::UNSPECIFIED.into() } else { Ipv4Addr::UNSPECIFIED.into() };
                        Call::Done(rt.udp_open(fd, SocketAddr::new(any, 0), None).map(|_| ()))
                    }
                    None if to.is_some() => {
                        rt.routing.kernel_udp += 1;
                        rt.leave_to_kernel(fd)
                    }
                    // No destination: the kernel's answer (EDESTADDRREQ, or its connected peer).
                    None => Call::Kernel,
                },
                _ => Call::Kernel,
            })
            .unwrap_or(Call::Kernel);
        match placed {
            Call::Done(Ok(())) => {}
            Call::Done(Err(e)) => return Call::Done(Err(e)),
            Call::Kernel => return Call::Kernel,
        }
        self.blocking(fd, Dir::Send, flags & libc::MSG_DONTWAIT != 0, |rt| {
            let Some(&Fd::Udp { id, .. }) = rt.fds.kind(fd) else { return Call::Kernel };
            let r = rt.shards.of(id).udp_send(id, data, to);
            if r.is_ok() {
                rt.observe_write();
            }
            Call::Done(r)
        })
    }
}
