//! A shard's connections to its own addresses (issue 23 item 3): a process connecting to its
//! own accelerated listener, as Linux's loopback carries it. Nothing may leave on the NIC (there
//! is nobody there to answer: the SYN used to go out for a neighbor nobody is, and the connect
//! hung until its retries ran out), the connection must complete and carry data both ways, and
//! a port nobody holds must refuse at once. IPv4 and IPv6 (global and link-local), with and
//! without the NIC's checksum and segmentation offloads (the looped frames then carry checksums
//! nobody filled and segments larger than the MTU).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use nic::Nic;
use stack::shard::{Errno, Shard, ShardConfig, SocketId};
use stack::TcpState;
use testkit::mem::{pair, MemConfig, MemNic};

const SECOND: u64 = 1_000_000_000;

struct One {
    shard: Shard<MemNic>,
    /// The other end of the wire: must receive nothing.
    wire: MemNic,
    now: u64,
}

impl One {
    fn new(tso: bool) -> One {
        let (a, b) = pair(MemConfig { tso, ..MemConfig::default() });
        let cfg = ShardConfig::new(
            a.mac(),
            Some((Ipv4Addr::new(10, 0, 0, 1), 24)),
            Some(("fd00::1".parse().unwrap(), 64)),
            [9; 32],
        );
        One { shard: Shard::new(a, cfg), wire: b, now: SECOND }
    }

    fn addresses(&self) -> [IpAddr; 3] {
        [
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
            self.shard.ipv6_link_local().into(),
        ]
    }

    /// One pass of the shard, a millisecond later: no timer is due that soon, so whatever
    /// completes does so without a retransmission.
    fn pass(&mut self) {
        self.now += 1_000_000;
        self.shard.poll(self.now);
    }

    fn nothing_on_the_wire(&mut self) {
        let mut got = Vec::new();
        assert_eq!(self.wire.rx_burst(&mut got, 64), 0, "a frame to our own address left on the NIC");
    }

    /// Sends `data` from `from` and reads it at `to`, a pass between rounds, failing after
    /// 1000 passes.
    fn transfer(&mut self, from: SocketId, to: SocketId, data: &[u8]) -> Vec<u8> {
        let (mut sent, mut got) = (0, Vec::new());
        let mut buf = vec![0u8; 64 * 1024];
        for _ in 0..1000 {
            match self.shard.tcp_send(from, &data[sent..]) {
                Ok(n) => sent += n,
                Err(Errno::EAGAIN) => {}
                Err(e) => panic!("send: {e:?}"),
            }
            self.pass();
            match self.shard.tcp_recv(to, &mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(Errno::EAGAIN) => {}
                Err(e) => panic!("recv: {e:?}"),
            }
            if got.len() >= data.len() {
                return got;
            }
        }
        panic!("{} of {} bytes came", got.len(), data.len());
    }
}

#[test]
fn a_connection_to_our_own_listener_completes_and_carries_data_without_touching_the_nic() {
    for tso in [false, true] {
        let mut o = One::new(tso);
        for (i, ip) in o.addresses().into_iter().enumerate() {
            let at = SocketAddr::new(ip, 6379 + i as u16);
            let listener = o.shard.tcp_listen(at, 16).unwrap();
            let client = o.shard.tcp_connect(at).unwrap();
            // One flush of the connect's SYN carries the whole handshake through the loop.
            o.shard.flush(o.now);
            assert_eq!(o.shard.tcp_state(client), Ok(TcpState::Established), "{at}, tso {tso}");
            let (server, peer) = o.shard.tcp_accept(listener).unwrap();
            assert_eq!(peer, o.shard.local_addr(client).unwrap(), "{at}");
            assert_eq!(o.shard.peer_addr(server).unwrap(), peer);
            // More than a window's first flight, both ways.
            let request: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
            assert_eq!(o.transfer(client, server, &request), request, "{at}, tso {tso}");
            assert_eq!(o.transfer(server, client, b"+PONG\r\n"), b"+PONG\r\n");
            // Both close; neither is left waiting for the other.
            o.shard.close(client).unwrap();
            o.pass();
            assert_eq!(o.shard.tcp_recv(server, &mut [0u8; 8]), Ok(0), "the end of the stream");
            o.shard.close(server).unwrap();
            o.shard.close(listener).unwrap();
            o.pass();
            o.nothing_on_the_wire();
        }
        assert!(o.shard.stats().loopback_frames > 0);
        assert_eq!(o.shard.pending_frames(), 0);
    }
}

#[test]
fn a_connection_to_a_port_of_ours_nobody_holds_is_refused_at_once() {
    let mut o = One::new(false);
    for ip in o.addresses() {
        let client = o.shard.tcp_connect(SocketAddr::new(ip, 7)).unwrap();
        o.shard.flush(o.now);
        // Linux: the RST of the closed port, ECONNREFUSED, before any timer.
        assert_eq!(o.shard.take_error(client), Ok(Some(Errno::ECONNREFUSED)), "{ip}");
        o.shard.close(client).unwrap();
    }
    o.nothing_on_the_wire();
}

#[test]
fn a_datagram_to_our_own_socket_is_received_and_one_to_a_closed_port_refused() {
    let mut o = One::new(false);
    for ip in o.addresses() {
        let server = o.shard.udp_bind(SocketAddr::new(ip, 5353)).unwrap();
        let client = o.shard.udp_bind(SocketAddr::new(ip, 0)).unwrap();
        let from = o.shard.local_addr(client).unwrap();
        o.shard.udp_send_to(client, b"query", SocketAddr::new(ip, 5353)).unwrap();
        o.pass();
        let mut buf = [0u8; 16];
        assert_eq!(o.shard.udp_recv_from(server, &mut buf), Ok((5, from)), "{ip}");
        assert_eq!(&buf[..5], b"query");
        // A connected socket hears of the closed port through the ICMP error the shard sends
        // itself (Linux's __udp4_lib_err), as ECONNREFUSED.
        o.shard.udp_connect(client, Some(SocketAddr::new(ip, 9))).unwrap();
        o.shard.udp_send(client, b"x", None).unwrap();
        o.pass();
        assert_eq!(o.shard.take_error(client), Ok(Some(Errno::ECONNREFUSED)), "{ip}");
        o.shard.close(server).unwrap();
        o.shard.close(client).unwrap();
    }
    o.nothing_on_the_wire();
}
