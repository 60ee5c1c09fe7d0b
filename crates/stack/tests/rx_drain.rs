//! One poll empties the rx ring: it takes bursts until one comes back short, at most
//! `RX_DRAIN_BURSTS` of them. Frames a poll leaves in a real NIC's ring while the application
//! works overflow it and are lost (AF_XDP's `rx_ring_full`): under connection churn an event
//! loop doing one pass per iteration took 8 bursts of 32 and the kernel dropped a third of the
//! segments sent to us.
//!
//! A client shard opens many connections at once to a server shard over the in-memory NIC: its
//! SYNs wait together in the server's rx queue, as a churning client's do in the AF_XDP ring.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use nic::clock::{Clock, ManualClock};
use nic::MacAddr;
use stack::shard::{Shard, ShardConfig, RX_BURST, RX_DRAIN_BURSTS};
use testkit::mem::{pair, MemConfig, MemNic};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 6379;

/// A server listening on `PORT` and a client whose `syns` SYNs wait in the server's rx queue.
fn syns_waiting(syns: usize) -> (Shard<MemNic>, ManualClock) {
    let (a, b) = pair(MemConfig { queue_len: 8192, pool_size: 8192, ..MemConfig::default() });
    let mut server = Shard::new(a, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 1]), Some((SERVER, 24)), None, [1; 32]));
    let mut client = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), Some((CLIENT, 24)), None, [2; 32]));
    let clock = ManualClock::new();
    let to = SocketAddr::V4(SocketAddrV4::new(SERVER, PORT));
    server.tcp_listen(to, 4096).unwrap();
    // The client resolves the server's address first, with a connection that completes.
    client.tcp_connect(to).unwrap();
    for _ in 0..3 {
        client.poll(clock.now_ns());
        server.poll(clock.now_ns());
    }
    assert_eq!(server.nic().rx_pending(), 0);
    for _ in 1..syns {
        client.tcp_connect(to).unwrap();
    }
    client.poll(clock.now_ns());
    assert_eq!(server.nic().rx_pending(), syns - 1, "the client's SYNs wait in the server's rx queue");
    (server, clock)
}

#[test]
fn one_poll_takes_every_frame_the_rx_ring_holds() {
    let (mut server, clock) = syns_waiting(1000);
    let before = server.stats().tcp_tx_segments;
    server.poll(clock.now_ns());
    assert_eq!(server.nic().rx_pending(), 0, "frames left in the rx ring after a poll");
    assert_eq!(server.stats().tcp_tx_segments - before, 999, "one SYN-ACK per SYN");
}

#[test]
fn one_poll_takes_at_most_the_drain_bound() {
    let bound = RX_BURST * RX_DRAIN_BURSTS;
    let (mut server, clock) = syns_waiting(bound + RX_BURST + 1);
    server.poll(clock.now_ns());
    assert_eq!(server.nic().rx_pending(), RX_BURST, "a poll takes RX_DRAIN_BURSTS bursts at most");
    server.poll(clock.now_ns());
    assert_eq!(server.nic().rx_pending(), 0);
}
