//! UDP on the shard as Linux does it: a datagram to a port nobody holds is answered with ICMP
//! port unreachable (quoting it, within Linux's rate limits), a connected socket receives only
//! from its peer and is told of the peer's ICMP port unreachable as ECONNREFUSED (once), an
//! unconnected one is not; MSG_PEEK and truncation. The test plays the peer with hand-built
//! frames, over IPv4 and IPv6.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::{Nic, PacketBuf};
use stack::shard::{Errno, Received, Shard, ShardConfig, SocketId, DATAGRAM_OVERHEAD, SPARE_DATAGRAMS};
use testkit::mem::{pair, MemConfig, MemNic};
use wire::{
    EtherType, EthernetAddress, EthernetFrame, EthernetRepr, Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr,
    Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6Repr, IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    UdpPacket, UdpRepr,
};

const OURS4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER4: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SECOND: u64 = 1_000_000_000;

fn ours6() -> Ipv6Addr {
    "fd00::1".parse().unwrap()
}
fn peer6() -> Ipv6Addr {
    "fd00::2".parse().unwrap()
}

struct Peer {
    shard: Shard<MemNic>,
    nic: MemNic,
    v6: bool,
    now: u64,
}

/// What the shard sent back, parsed.
#[derive(Debug)]
enum Sent {
    Udp { src_port: u16, dst_port: u16, payload: Vec<u8> },
    PortUnreachable { quoted_ip: Vec<u8> },
    Other,
}

impl Peer {
    fn new(v6: bool) -> Peer {
        let (a, b) = pair(MemConfig::default());
        let cfg = ShardConfig::new(a.mac(), Some((OURS4, 24)), Some((ours6(), 64)), [5; 32]);
        let mut p = Peer { shard: Shard::new(a, cfg), nic: b, v6, now: SECOND };
        // The peer's link address is known: what the shard sends leaves at once.
        p.shard.hear(p.peer(0).ip(), p.nic.mac(), p.now);
        p
    }

    fn ours(&self) -> IpAddr {
        if self.v6 {
            ours6().into()
        } else {
            OURS4.into()
        }
    }

    fn addr(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.ours(), port)
    }

    fn peer(&self, port: u16) -> SocketAddr {
        SocketAddr::new(if self.v6 { peer6().into() } else { PEER4.into() }, port)
    }

    /// A frame from the peer to us carrying `l4` of protocol `proto`.
    fn frame(&self, proto: IpProtocol, l4: &[u8]) -> Vec<u8> {
        let (ethertype, ip_len) = if self.v6 { (EtherType::Ipv6, 40) } else { (EtherType::Ipv4, 20) };
        let mut f = vec![0u8; 14 + ip_len + l4.len()];
        EthernetRepr {
            src_addr: EthernetAddress(self.nic.mac().0),
            dst_addr: EthernetAddress(self.shard.nic().mac().0),
            ethertype,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
        if self.v6 {
            Ipv6Repr {
                src_addr: peer6().into(),
                dst_addr: ours6().into(),
                next_header: proto,
                payload_len: l4.len(),
                hop_limit: 64,
            }
            .emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
        } else {
            Ipv4Repr {
                src_addr: PEER4.into(),
                dst_addr: OURS4.into(),
                next_header: proto,
                payload_len: l4.len(),
                hop_limit: 64,
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut f[14..34]), true);
        }
        f[14 + ip_len..].copy_from_slice(l4);
        f
    }

    fn peer_ip(&self) -> IpAddress {
        if self.v6 {
            IpAddress::V6(peer6().into())
        } else {
            IpAddress::V4(PEER4.into())
        }
    }

    fn our_ip(&self) -> IpAddress {
        if self.v6 {
            IpAddress::V6(ours6().into())
        } else {
            IpAddress::V4(OURS4.into())
        }
    }

    /// A datagram from the peer's `from` port to our `to` port.
    fn datagram(&mut self, from: u16, to: u16, payload: &[u8]) {
        let mut l4 = vec![0u8; 8 + payload.len()];
        UdpRepr { src_port: from, dst_port: to }.emit(
            &mut UdpPacket::new_unchecked(&mut l4[..]),
            &self.peer_ip(),
            &self.our_ip(),
            payload,
            true,
        );
        let f = self.frame(IpProtocol::Udp, &l4);
        self.send(f);
    }

    /// The peer's port unreachable quoting `quoted_ip` (an IP packet we sent).
    fn port_unreachable(&mut self, quoted_ip: &[u8]) {
        let mut l4;
        if self.v6 {
            let q = Ipv6Packet::new_unchecked(quoted_ip);
            let header = Ipv6Repr::parse(&q).unwrap();
            let icmp = Icmpv6Repr::DstUnreachable {
                reason: Icmpv6DstUnreachable::PortUnreachable,
                header,
                data: &quoted_ip[40..],
            };
            l4 = vec![0u8; icmp.buffer_len()];
            icmp.emit(&mut Icmpv6Packet::new_unchecked(&mut l4[..]), &peer6().into(), &ours6().into(), true);
        } else {
            let q = Ipv4Packet::new_unchecked(quoted_ip);
            let header = Ipv4Repr::parse(&q, false).unwrap();
            let icmp = Icmpv4Repr::DstUnreachable {
                reason: Icmpv4DstUnreachable::PortUnreachable,
                next_hop_mtu: 0,
                header,
                data: &quoted_ip[20..],
            };
            l4 = vec![0u8; icmp.buffer_len()];
            icmp.emit(&mut Icmpv4Packet::new_unchecked(&mut l4[..]), true);
        }
        let proto = if self.v6 { IpProtocol::Icmpv6 } else { IpProtocol::Icmp };
        let f = self.frame(proto, &l4);
        self.send(f);
    }

    fn send(&mut self, f: Vec<u8>) {
        let mut b = self.nic.alloc().unwrap();
        b.set_len(f.len());
        b.data_mut().copy_from_slice(&f);
        self.nic.tx_burst(&mut vec![b]);
        while self.shard.poll(self.now) > 0 {}
    }

    /// What the shard sent since the last call, as raw frames.
    fn take_raw(&mut self) -> Vec<Vec<u8>> {
        while self.shard.poll(self.now) > 0 {}
        let mut rx = Vec::new();
        while self.nic.rx_burst(&mut rx, 1024) > 0 {}
        rx.iter().map(|b| b.data().to_vec()).collect()
    }

    fn take(&mut self) -> Vec<(Sent, Vec<u8>)> {
        self.take_raw().into_iter().map(|f| (parse(&f), f[14..].to_vec())).collect()
    }
}

fn parse(f: &[u8]) -> Sent {
    let eth = EthernetFrame::new_checked(f).unwrap();
    let (proto, l4) = match eth.ethertype() {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            assert!(ip.verify_checksum());
            (ip.next_header(), ip.payload().to_vec())
        }
        EtherType::Ipv6 => {
            let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
            (ip.next_header(), ip.payload().to_vec())
        }
        _ => return Sent::Other,
    };
    match proto {
        IpProtocol::Udp => {
            let u = UdpPacket::new_checked(&l4[..]).unwrap();
            Sent::Udp { src_port: u.src_port(), dst_port: u.dst_port(), payload: u.payload().to_vec() }
        }
        IpProtocol::Icmp => {
            let icmp = Icmpv4Packet::new_checked(&l4[..]).unwrap();
            match Icmpv4Repr::parse(&icmp, true).unwrap() {
                Icmpv4Repr::DstUnreachable { reason: Icmpv4DstUnreachable::PortUnreachable, data, .. } => {
                    // The quoted header as sent, then the quoted data.
                    Sent::PortUnreachable { quoted_ip: [&icmp.data()[..20], data].concat() }
                }
                _ => Sent::Other,
            }
        }
        IpProtocol::Icmpv6 => {
            let icmp = Icmpv6Packet::new_checked(&l4[..]).unwrap();
            let (src, dst): (wire::Ipv6Address, wire::Ipv6Address) = (ours6().into(), peer6().into());
            match Icmpv6Repr::parse(&icmp, &src, &dst, true).unwrap() {
                Icmpv6Repr::DstUnreachable { reason: Icmpv6DstUnreachable::PortUnreachable, data, .. } => {
                    Sent::PortUnreachable { quoted_ip: [&icmp.data()[..40], data].concat() }
                }
                _ => Sent::Other,
            }
        }
        _ => Sent::Other,
    }
}

fn both(test: impl Fn(bool)) {
    test(false);
    test(true);
}

#[test]
fn a_datagram_to_a_closed_port_is_answered_with_port_unreachable_quoting_it() {
    both(|v6| {
        let mut p = Peer::new(v6);
        p.datagram(4000, 53, b"query");
        let sent = p.take();
        assert_eq!(sent.len(), 1, "{sent:?}");
        let Sent::PortUnreachable { quoted_ip } = &sent[0].0 else { panic!("{sent:?}") };
        let l4 = if v6 { &quoted_ip[40..] } else { &quoted_ip[20..] };
        let u = UdpPacket::new_checked(l4).unwrap();
        assert_eq!((u.src_port(), u.dst_port(), u.payload()), (4000, 53, &b"query"[..]));
        assert_eq!(p.shard.stats().udp_no_port, 1);
        assert_eq!(p.shard.stats().icmp_out_dest_unreachs, 1);
    });
}

#[test]
fn port_unreachable_is_rate_limited_per_destination_as_linux_does() {
    both(|v6| {
        let mut p = Peer::new(v6);
        for _ in 0..10 {
            p.datagram(4000, 9, b"x");
        }
        let answered = p.take().iter().filter(|s| matches!(s.0, Sent::PortUnreachable { .. })).count();
        // icmp_ratelimit 1000 ms with a burst of six (XRLIM_BURST_FACTOR).
        assert_eq!(answered, 6);
        assert_eq!(p.shard.stats().icmp_out_rate_limited, 4);
        assert_eq!(p.shard.stats().udp_no_port, 10);
        p.now += SECOND;
        p.datagram(4000, 9, b"x");
        p.datagram(4000, 9, b"x");
        let answered = p.take().iter().filter(|s| matches!(s.0, Sent::PortUnreachable { .. })).count();
        assert_eq!(answered, 1, "one more per second");
    });
}

#[test]
fn a_bound_socket_receives_with_the_sender_and_peek_and_truncation_work() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let id = p.shard.udp_bind(p.addr(53)).unwrap();
        p.datagram(4000, 53, b"hello world");
        p.datagram(4001, 53, b"second");
        assert!(p.shard.readiness(id).readable);
        assert_eq!(p.shard.udp_next_len(id), Ok(11));
        let mut buf = [0u8; 5];
        let peeked = p.shard.udp_recv(id, &mut buf, true).unwrap();
        assert_eq!(peeked, Received { copied: 5, len: 11, from: p.peer(4000) });
        assert_eq!(&buf, b"hello");
        // A short buffer cuts the datagram; the rest is gone.
        assert_eq!(p.shard.udp_recv(id, &mut buf, false).unwrap(), Received { copied: 5, len: 11, from: p.peer(4000) });
        let mut big = [0u8; 64];
        let got = p.shard.udp_recv(id, &mut big, false).unwrap();
        assert_eq!((got.len, got.from, &big[..6]), (6, p.peer(4001), &b"second"[..]));
        assert_eq!(p.shard.udp_recv(id, &mut big, false), Err(Errno::EAGAIN));
        assert!(!p.shard.readiness(id).readable);
        assert_eq!(p.shard.arrivals(id), 2);
        assert!(p.take().is_empty(), "nothing answered");
    });
}

#[test]
fn a_connected_socket_receives_only_from_its_peer() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let id = p.shard.udp_bind(p.addr(0)).unwrap();
        let port = p.shard.local_addr(id).unwrap().port();
        assert_eq!(p.shard.peer_addr(id), Err(Errno::ENOTCONN));
        p.shard.udp_connect(id, Some(p.peer(53))).unwrap();
        assert_eq!(p.shard.peer_addr(id), Ok(p.peer(53)));
        p.datagram(54, port, b"stranger");
        let sent = p.take();
        assert!(matches!(sent.as_slice(), [(Sent::PortUnreachable { .. }, _)]), "{sent:?}");
        p.datagram(53, port, b"answer");
        let mut buf = [0u8; 16];
        let got = p.shard.udp_recv(id, &mut buf, false).unwrap();
        assert_eq!((got.len, got.from), (6, p.peer(53)));
        // Sending without an address goes to the peer.
        assert_eq!(p.shard.udp_send(id, b"q", None), Ok(1));
        let sent = p.take();
        let [(Sent::Udp { src_port, dst_port, payload }, _)] = sent.as_slice() else { panic!("{sent:?}") };
        assert_eq!((*src_port, *dst_port, payload.as_slice()), (port, 53, &b"q"[..]));
        // AF_UNSPEC dissolves the association.
        p.shard.udp_connect(id, None).unwrap();
        assert_eq!(p.shard.udp_send(id, b"q", None), Err(Errno::EDESTADDRREQ));
        p.datagram(54, port, b"anyone");
        assert_eq!(p.shard.udp_recv(id, &mut buf, false).unwrap().from, p.peer(54));
    });
}

#[test]
fn port_unreachable_from_the_connected_peer_is_econnrefused_once() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let id = p.shard.udp_bind(p.addr(0)).unwrap();
        p.shard.udp_connect(id, Some(p.peer(53))).unwrap();
        p.shard.udp_send(id, b"query", None).unwrap();
        let sent = p.take();
        assert_eq!(sent.len(), 1);
        let quoted = sent[0].1.clone();
        let mut changed = Vec::new();
        p.shard.take_changed(&mut changed);
        p.port_unreachable(&quoted);
        p.shard.take_changed(&mut changed);
        assert_eq!(changed, vec![id], "its waiters are told");
        assert!(p.shard.readiness(id).error);
        assert_eq!(p.shard.take_error(id), Ok(Some(Errno::ECONNREFUSED)));
        assert_eq!(p.shard.take_error(id), Ok(None));
        assert!(!p.shard.readiness(id).error);
        // Not taken by SO_ERROR: the next send reports it, once.
        p.port_unreachable(&quoted);
        assert_eq!(p.shard.udp_send(id, b"again", None), Err(Errno::ECONNREFUSED));
        assert_eq!(p.shard.udp_send(id, b"again", None), Ok(5));
        assert_eq!(p.shard.stats().icmp_in_dest_unreachs, 2);
    });
}

#[test]
fn an_unconnected_socket_is_not_told_of_icmp_errors() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let id = p.shard.udp_bind(p.addr(0)).unwrap();
        p.shard.udp_send(id, b"query", Some(p.peer(53))).unwrap();
        let quoted = p.take()[0].1.clone();
        p.port_unreachable(&quoted);
        assert!(!p.shard.readiness(id).error);
        assert_eq!(p.shard.take_error(id), Ok(None));
        assert_eq!(p.shard.udp_send(id, b"again", Some(p.peer(53))), Ok(5));
    });
}

#[test]
fn a_datagram_larger_than_the_mtu_is_emsgsize() {
    let mut p = Peer::new(false);
    let id = p.shard.udp_bind(p.addr(0)).unwrap();
    let mtu = p.shard.nic().mtu() as usize;
    assert_eq!(p.shard.udp_send(id, &vec![0; mtu - 28], Some(p.peer(9))), Ok(mtu - 28));
    assert_eq!(p.shard.udp_send(id, &vec![0; mtu - 27], Some(p.peer(9))), Err(Errno::EMSGSIZE));
}

#[test]
fn sockets_that_set_so_reuseaddr_share_a_port_and_a_connected_one_gets_its_peers_datagrams() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let first = p.shard.udp_bind(p.addr(5201)).unwrap();
        assert_eq!(
            p.shard.udp_bind_with(p.addr(5201), true, false),
            Err(Errno::EADDRINUSE),
            "the first did not set it"
        );
        p.shard.close(first).unwrap();
        // iperf3's server: a socket connected to its client, and a new one bound beside it.
        let connected = p.shard.udp_bind_with(p.addr(5201), true, false).unwrap();
        p.shard.udp_connect(connected, Some(p.peer(4000))).unwrap();
        let listener = p.shard.udp_bind_with(p.addr(5201), true, false).unwrap();
        p.datagram(4000, 5201, b"data");
        p.datagram(4001, 5201, b"hello");
        let mut buf = [0u8; 16];
        let got = p.shard.udp_recv(connected, &mut buf, false).unwrap();
        assert_eq!((got.len, got.from), (4, p.peer(4000)));
        let got = p.shard.udp_recv(listener, &mut buf, false).unwrap();
        assert_eq!((got.len, got.from), (5, p.peer(4001)));
        assert_eq!(p.shard.udp_recv(connected, &mut buf, false), Err(Errno::EAGAIN));
        // Closing one leaves the other bound; closing both frees the port.
        p.shard.close(connected).unwrap();
        p.datagram(4000, 5201, b"again");
        assert_eq!(p.shard.udp_recv(listener, &mut buf, false).unwrap().from, p.peer(4000));
        p.shard.close(listener).unwrap();
        assert!(p.shard.udp_bind(p.addr(5201)).is_ok());
    });
}

/// Reads every queued datagram of `id`: how many there were.
fn drain(p: &mut Peer, id: SocketId) -> usize {
    let mut buf = [0u8; 2048];
    let mut got = 0;
    while p.shard.udp_recv(id, &mut buf, false).is_ok() {
        got += 1;
    }
    got
}

/// Each datagram costs its truesize (IP and UDP headers, payload, `DATAGRAM_OVERHEAD`) against
/// SO_RCVBUF; an empty queue takes one whatever its size, as Linux's does.
#[test]
fn so_rcvbuf_bounds_what_a_socket_queues_and_the_rest_is_counted() {
    let mut p = Peer::new(false);
    let id = p.shard.udp_bind(p.addr(53)).unwrap();
    let cost = 20 + 8 + 100 + DATAGRAM_OVERHEAD;
    p.shard.udp_set_rcvbuf(id, Some(2 * cost)).unwrap();
    for _ in 0..5 {
        p.datagram(4000, 53, &[7; 100]);
    }
    assert_eq!(drain(&mut p, id), 2, "two datagrams of 100 bytes fit in twice their truesize");
    assert_eq!(p.shard.stats().udp_rcvbuf_errors, 3);
    p.shard.udp_set_rcvbuf(id, Some(1)).unwrap();
    p.datagram(4000, 53, &[7; 1000]);
    p.datagram(4000, 53, &[7; 1]);
    assert_eq!(drain(&mut p, id), 1, "an empty queue takes one datagram");
    assert_eq!(p.shard.stats().udp_rcvbuf_errors, 4);
}

/// Zero-length datagrams are not free: the default SO_RCVBUF (212,992) holds as many as their
/// truesize allows, the rest are counted as UdpRcvbufErrors (they queued without limit when
/// only payload bytes were counted).
#[test]
fn zero_length_datagrams_are_charged_their_truesize() {
    both(|v6| {
        let mut p = Peer::new(v6);
        let id = p.shard.udp_bind(p.addr(53)).unwrap();
        let cost = if v6 { 40 } else { 20 } + 8 + DATAGRAM_OVERHEAD;
        let fit = 212_992 / cost;
        for _ in 0..fit + 100 {
            p.datagram(4000, 53, &[]);
        }
        assert_eq!(drain(&mut p, id), fit);
        assert_eq!(p.shard.stats().udp_rcvbuf_errors, 100);
    });
}

/// After a burst read and closed, the shard keeps at most `SPARE_DATAGRAMS` datagram buffers.
#[test]
fn spare_datagram_buffers_shrink_back_after_a_burst() {
    let mut p = Peer::new(false);
    let id = p.shard.udp_bind(p.addr(53)).unwrap();
    p.shard.udp_set_rcvbuf(id, Some(1 << 20)).unwrap();
    for _ in 0..SPARE_DATAGRAMS + 200 {
        p.datagram(4000, 53, &[1; 100]);
    }
    assert_eq!(drain(&mut p, id), SPARE_DATAGRAMS + 200);
    assert_eq!(p.shard.spare_datagram_buffers(), SPARE_DATAGRAMS);
    let other = p.shard.udp_bind(p.addr(54)).unwrap();
    p.shard.udp_set_rcvbuf(other, Some(1 << 20)).unwrap();
    for _ in 0..SPARE_DATAGRAMS + 200 {
        p.datagram(4000, 54, &[1; 100]);
    }
    p.shard.close(other).unwrap();
    assert_eq!(p.shard.spare_datagram_buffers(), SPARE_DATAGRAMS);
}
