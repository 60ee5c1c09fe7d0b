//! UDP's work on the shard: a datagram to us demuxed to its socket (or answered with port
//! unreachable), the ICMP errors for a connected socket, datagram buffers kept for reuse, and
//! the socket calls the runtime makes (bind, connect, send, receive).

use std::collections::VecDeque;
use std::net::SocketAddr;

use nic::{Nic, PacketBuf};
use wire::{
    Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6Repr, IpAddress,
    IpProtocol, UdpPacket, UdpRepr,
};

use super::{truesize, Datagram, Endpoint, Received, UdpGroup, UdpSocket, SPARE_DATAGRAMS};
use crate::errno::Errno;
use crate::shard::addr::{is_unspecified, to_ip, to_std};
use crate::shard::transport::{IpHeader, Transport};
use crate::shard::{Shard, Socket, SocketId};

impl<N: Nic> Shard<N> {
    /// Keeps a freed datagram buffer for the next datagram, up to `SPARE_DATAGRAMS`.
    pub(in crate::shard) fn recycle_datagram(&mut self, data: Vec<u8>) {
        if self.free_datagrams.len() < SPARE_DATAGRAMS {
            self.free_datagrams.push(data);
        }
    }

    /// Freed datagram buffers kept for reuse.
    pub fn spare_datagram_buffers(&self) -> usize {
        self.free_datagrams.len()
    }

    /// A UDP socket closes: it leaves its address's group (the last one frees the address).
    pub(in crate::shard) fn udp_unbind(&mut self, id: SocketId, local: Endpoint) {
        let empty = self.udp_binds.get_mut(local).is_some_and(|g| {
            g.members.retain(|&m| m != id);
            g.members.is_empty()
        });
        if empty {
            self.udp_binds.remove(local);
        }
    }
}

/// IPv4: an ICMP error carries at most 576 bytes (RFC 1812 4.3.2.3, Linux's limit).
const ICMPV4_ERROR_MAX: usize = 576;
/// IPv6: at most the minimum MTU (RFC 4443 2.4(c)).
const ICMPV6_ERROR_MAX: usize = 1280;

impl<N: Nic> Shard<N> {
    /// A UDP datagram to one of our addresses, as ingress read the layers below; `ip_payload`
    /// is what follows the fixed IP header (an ICMP error quotes it). Returns true when no
    /// socket here takes it and `may_hand_off`: another shard of the process may hold one.
    pub(in crate::shard) fn udp_input(
        &mut self,
        t: &Transport,
        ip_payload: &[u8],
        seg: &[u8],
        may_hand_off: bool,
    ) -> bool {
        let (src, dst) = (t.src, t.dst);
        let Ok(packet) = UdpPacket::new_checked(seg) else {
            self.stats.udp_bad_checksum += 1;
            return false;
        };
        let Ok(repr) = UdpRepr::parse(&packet, &src, &dst, self.link.checksums().verify_l4 && !t.verified) else {
            self.stats.udp_bad_checksum += 1;
            return false;
        };
        let from = (src, repr.src_port);
        let Some(id) = self.udp_lookup((dst, repr.dst_port), from) else {
            if may_hand_off {
                return true;
            }
            self.stats.udp_no_port += 1;
            self.port_unreachable(&t.ip, ip_payload);
            return false;
        };
        self.stats.udp_rx_datagrams += 1;
        if matches!(self.sockets.get(id), Some(Socket::Udp(u)) if u.remote == Some(from)) {
            // A datagram of a connected socket's peer: a known flow (`Shard::glean`).
            self.glean(t);
        }
        let payload = packet.payload();
        let default = self.cfg.udp_rcvbuf;
        let cost = truesize(&from, payload.len());
        let Some(Socket::Udp(u)) = self.sockets.get_mut(id) else { return false };
        // Linux's rule (__udp_enqueue_schedule_skb): an empty queue takes one datagram whatever
        // its size; otherwise it must fit.
        if !u.rx.is_empty() && u.rx_charged + cost > u.rcvbuf.unwrap_or(default) {
            self.stats.udp_rcvbuf_errors += 1;
            return false;
        }
        let mut data = self.free_datagrams.pop().unwrap_or_default();
        data.clear();
        data.extend_from_slice(payload);
        let Some(Socket::Udp(u)) = self.sockets.get_mut(id) else { return false };
        u.rx_bytes += payload.len();
        u.rx_charged += cost;
        u.rx.push_back(Datagram { from, data });
        u.arrivals = u.arrivals.wrapping_add(1);
        self.sockets.mark_changed(id);
        false
    }

    /// Whether a UDP socket here takes a datagram to `dst` from `src` (several shards: where
    /// to hand it).
    pub(in crate::shard) fn holds_datagram(&self, dst: Endpoint, src: Endpoint) -> bool {
        self.udp_lookup(dst, src).is_some()
    }

    /// The socket that receives a datagram to `dst` from `from`, as Linux scores them: the one
    /// connected to `from`, else an unconnected one (spread by source over SO_REUSEPORT
    /// members; the last bound otherwise). A socket connected elsewhere never matches.
    fn udp_lookup(&self, dst: Endpoint, from: Endpoint) -> Option<SocketId> {
        let group = self.udp_binds.lookup(dst)?;
        let mut unconnected = 0;
        let mut last = None;
        for &id in &group.members {
            if let Some(Socket::Udp(u)) = self.sockets.get(id) {
                match u.remote {
                    Some(r) if r == from => return Some(id),
                    Some(_) => {}
                    None => {
                        unconnected += 1;
                        last = Some(id);
                    }
                }
            }
        }
        if group.reuseport && unconnected > 1 {
            let bytes: &[u8] = match &from.0 {
                IpAddress::V4(a) => &a.0,
                IpAddress::V6(a) => &a.0,
            };
            let h = bytes.iter().fold(u32::from(from.1), |h, &b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
            let pick = h as usize % unconnected;
            return group
                .members
                .iter()
                .copied()
                .filter(|&id| matches!(self.sockets.get(id), Some(Socket::Udp(u)) if u.remote.is_none()))
                .nth(pick);
        }
        last
    }

    /// Answers a datagram nobody holds with ICMP port unreachable, as Linux does, within the
    /// rate limits: it quotes the datagram's IP header and what followed it.
    fn port_unreachable(&mut self, ip: &IpHeader, ip_payload: &[u8]) {
        let (to, ours) = match ip {
            IpHeader::V4(h) => (IpAddress::V4(h.src_addr), IpAddress::V4(h.dst_addr)),
            IpHeader::V6(h) => (IpAddress::V6(h.src_addr), IpAddress::V6(h.dst_addr)),
        };
        if !self.icmp_limit.allow(to, self.now) {
            self.stats.icmp_out_rate_limited += 1;
            return;
        }
        match *ip {
            IpHeader::V4(header) => {
                let room =
                    ICMPV4_ERROR_MAX - wire::ipv4::HEADER_LEN - wire::icmpv4::HEADER_LEN - wire::ipv4::HEADER_LEN;
                let data = &ip_payload[..ip_payload.len().min(room)];
                let repr = Icmpv4Repr::DstUnreachable {
                    reason: Icmpv4DstUnreachable::PortUnreachable,
                    next_hop_mtu: 0,
                    header,
                    data,
                };
                let Some((mut buf, l4)) =
                    self.link.ip_frame(ours, to, IpProtocol::Icmp, repr.buffer_len(), 0, &mut self.stats)
                else {
                    return;
                };
                repr.emit(&mut Icmpv4Packet::new_unchecked(&mut buf.data_mut()[l4..]), true);
                self.stats.icmp_out_dest_unreachs += 1;
                self.link.route_out(buf, to, self.now, &mut self.stats);
            }
            IpHeader::V6(header) => {
                let room =
                    ICMPV6_ERROR_MAX - wire::ipv6::HEADER_LEN - wire::icmpv6::HEADER_LEN - wire::ipv6::HEADER_LEN;
                let data = &ip_payload[..ip_payload.len().min(room)];
                let repr = Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::PortUnreachable, header, data };
                let Some((mut buf, l4)) =
                    self.link.ip_frame(ours, to, IpProtocol::Icmpv6, repr.buffer_len(), 0, &mut self.stats)
                else {
                    return;
                };
                repr.emit(
                    &mut Icmpv6Packet::new_unchecked(&mut buf.data_mut()[l4..]),
                    &header.dst_addr,
                    &header.src_addr,
                    true,
                );
                self.stats.icmp_out_dest_unreachs += 1;
                self.link.route_out(buf, to, self.now, &mut self.stats);
            }
        }
    }

    /// An ICMP destination unreachable about a datagram we sent from `local` to `remote`: the
    /// socket connected to that peer is told `errno` (Linux reports only these "fatal" codes,
    /// and only to a connected socket).
    pub(in crate::shard) fn udp_unreachable(&mut self, local: Endpoint, remote: Endpoint, errno: Option<Errno>) {
        self.stats.icmp_in_dest_unreachs += 1;
        let Some(errno) = errno else { return };
        let Some(id) = self.udp_lookup(local, remote) else { return };
        if let Some(Socket::Udp(u)) = self.sockets.get_mut(id) {
            if u.remote == Some(remote) {
                u.error = Some(errno);
                self.sockets.mark_changed(id);
            }
        }
    }

    // ------------------------------------------------------------------------------------------
    // The socket API
    // ------------------------------------------------------------------------------------------

    /// A UDP socket bound to `local` (port 0: an ephemeral port).
    pub fn udp_bind(&mut self, local: SocketAddr) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        self.udp_bind_with(local, false, false)
    }

    /// A UDP socket bound to `local` with SO_REUSEADDR / SO_REUSEPORT as set: sockets that all
    /// set the same one share the address.
    pub fn udp_bind_with(&mut self, local: SocketAddr, reuseaddr: bool, reuseport: bool) -> Result<SocketId, Errno> {
        let _arena = self.in_arena();
        let addr = to_ip(local.ip());
        self.check_local(addr)?;
        let port = if local.port() == 0 {
            let binds = &self.udp_binds;
            self.ports.allocate(addr, (addr, 0), |p| binds.get((addr, p)).is_none()).map_err(|_| Errno::EADDRINUSE)?
        } else {
            local.port()
        };
        let socket = UdpSocket {
            local: (addr, port),
            remote: None,
            rx: VecDeque::new(),
            rx_bytes: 0,
            rx_charged: 0,
            rcvbuf: None,
            error: None,
            arrivals: 0,
        };
        if let Some(g) = self.udp_binds.get_mut((addr, port)) {
            if !(reuseaddr && g.reuseaddr || reuseport && g.reuseport) {
                return Err(Errno::EADDRINUSE);
            }
            let id = self.sockets.alloc(Socket::Udp(socket));
            let g = self.udp_binds.get_mut((addr, port)).expect("the group just found");
            g.members.push(id);
            g.reuseaddr &= reuseaddr;
            g.reuseport &= reuseport;
            return Ok(id);
        }
        let id = self.sockets.alloc(Socket::Udp(socket));
        let group = UdpGroup { reuseaddr, reuseport, members: vec![id] };
        if self.udp_binds.insert((addr, port), false, group).is_err() {
            self.sockets.take(id);
            return Err(Errno::EADDRINUSE);
        }
        Ok(id)
    }

    fn udp(&mut self, id: SocketId) -> Result<&mut UdpSocket, Errno> {
        match self.sockets.get_mut(id) {
            Some(Socket::Udp(u)) => Ok(u),
            Some(_) => Err(Errno::EOPNOTSUPP),
            None => Err(Errno::EBADF),
        }
    }

    /// connect() on a UDP socket: `remote` becomes its only source and default destination
    /// (`None`: AF_UNSPEC, the association dissolved). Datagrams queued from others stay, as on
    /// Linux.
    pub fn udp_connect(&mut self, id: SocketId, remote: Option<SocketAddr>) -> Result<(), Errno> {
        let _arena = self.in_arena();
        let remote = remote.map(|r| (to_ip(r.ip()), r.port()));
        if let Some((a, _)) = remote {
            if self.link.routes().next_hop(a).is_none() {
                return Err(Errno::ENETUNREACH);
            }
        }
        let u = self.udp(id)?;
        u.remote = remote;
        u.error = None;
        Ok(())
    }

    /// One datagram and its sender; EAGAIN when none. A datagram longer than `buf` is cut (the
    /// rest is lost, as on Linux); `peek` leaves it queued (MSG_PEEK).
    pub fn udp_recv(&mut self, id: SocketId, buf: &mut [u8], peek: bool) -> Result<Received, Errno> {
        let _arena = self.in_arena();
        let u = self.udp(id)?;
        let d = u.rx.front().ok_or(Errno::EAGAIN)?;
        let copied = d.data.len().min(buf.len());
        buf[..copied].copy_from_slice(&d.data[..copied]);
        let got = Received { copied, len: d.data.len(), from: SocketAddr::new(to_std(d.from.0), d.from.1) };
        if !peek {
            let d = u.rx.pop_front().expect("the datagram just read");
            u.rx_bytes -= d.data.len();
            u.rx_charged -= truesize(&d.from, d.data.len());
            self.recycle_datagram(d.data);
        }
        Ok(got)
    }

    /// One datagram and its sender, as `udp_recv` without MSG_PEEK: (its full length, sender).
    pub fn udp_recv_from(&mut self, id: SocketId, buf: &mut [u8]) -> Result<(usize, SocketAddr), Errno> {
        let _arena = self.in_arena();
        self.udp_recv(id, buf, false).map(|r| (r.len, r.from))
    }

    /// SO_RCVBUF: the most its queued datagrams may cost, each its `truesize` (`None`: the
    /// shard's default). Datagrams already queued stay.
    pub fn udp_set_rcvbuf(&mut self, id: SocketId, bytes: Option<usize>) -> Result<(), Errno> {
        let _arena = self.in_arena();
        self.udp(id)?.rcvbuf = bytes;
        Ok(())
    }

    /// The length of the next datagram (FIONREAD), 0 when none.
    pub fn udp_next_len(&mut self, id: SocketId) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        Ok(self.udp(id)?.rx.front().map_or(0, |d| d.data.len()))
    }

    /// Sends one datagram to `to`, or to the connected peer (`None`: EDESTADDRREQ if there is
    /// none). A pending ICMP error is returned first, once (Linux's sock_error at send).
    pub fn udp_send(&mut self, id: SocketId, data: &[u8], to: Option<SocketAddr>) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        let u = self.udp(id)?;
        if let Some(e) = u.error.take() {
            return Err(e);
        }
        let (local_addr, local_port) = u.local;
        let (dst, dst_port) = match (to, u.remote) {
            (Some(to), _) => (to_ip(to.ip()), to.port()),
            (None, Some(r)) => r,
            (None, None) => return Err(Errno::EDESTADDRREQ),
        };
        let src = if is_unspecified(local_addr) || std::mem::discriminant(&local_addr) != std::mem::discriminant(&dst) {
            self.local_address(matches!(dst, IpAddress::V6(_)))?
        } else {
            local_addr
        };
        let ip_len = if matches!(dst, IpAddress::V4(_)) { wire::ipv4::HEADER_LEN } else { wire::ipv6::HEADER_LEN };
        if ip_len + wire::udp::HEADER_LEN + data.len() > self.link.nic().mtu() as usize {
            return Err(Errno::EMSGSIZE);
        }
        if self.link.routes().next_hop(dst).is_none() {
            return Err(Errno::ENETUNREACH);
        }
        let len = wire::udp::HEADER_LEN + data.len();
        let Some((mut buf, l4)) = self.link.ip_frame(src, dst, IpProtocol::Udp, len, 0, &mut self.stats) else {
            return Err(Errno::EAGAIN);
        };
        UdpRepr { src_port: local_port, dst_port }.emit(
            &mut UdpPacket::new_unchecked(&mut buf.data_mut()[l4..]),
            &src,
            &dst,
            data,
            self.link.checksums().fill_l4,
        );
        self.stats.udp_tx_datagrams += 1;
        self.link.route_out(buf, dst, self.now, &mut self.stats);
        Ok(data.len())
    }

    /// Sends one datagram to `to` (the echo service's call).
    pub fn udp_send_to(&mut self, id: SocketId, data: &[u8], to: SocketAddr) -> Result<usize, Errno> {
        let _arena = self.in_arena();
        self.udp_send(id, data, Some(to))
    }
}
