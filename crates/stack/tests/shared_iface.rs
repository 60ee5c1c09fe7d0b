//! What a shard on an interface shared with the kernel needs: ephemeral ports from a range the
//! kernel does not use (`ShardConfig::ephemeral_ports`), so that the XDP program hands the
//! replies of pronghorn's outgoing connections to pronghorn and the kernel's to the kernel; and
//! the next hops it is resolving, whose answers reach the kernel, not the shard.

use std::net::{Ipv4Addr, SocketAddr};

use nic::MacAddr;
use nic::Nic as _;
use stack::shard::{Shard, ShardConfig};
use stack::Errno;
use testkit::mem::{pair, MemConfig};

#[test]
fn outgoing_connections_and_port_zero_binds_take_ports_from_the_configured_range() {
    let (a, _b) = pair(MemConfig::default());
    let mut cfg = ShardConfig::new(a.mac(), Some((Ipv4Addr::new(10, 0, 0, 1), 24)), None, [7; 32]);
    cfg.ephemeral_ports = 61000..=61002;
    let mut shard = Shard::new(a, cfg);
    let peer: SocketAddr = "10.0.0.2:80".parse().unwrap();
    let mut ports: Vec<u16> = (0..3)
        .map(|_| {
            let id = shard.tcp_connect(peer).unwrap();
            shard.local_addr(id).unwrap().port()
        })
        .collect();
    ports.sort();
    assert_eq!(ports, [61000, 61001, 61002]);
    assert_eq!(shard.tcp_connect(peer).err(), Some(Errno::EADDRNOTAVAIL), "the range is used up for this peer");
    let listener = shard.tcp_listen("10.0.0.1:0".parse().unwrap(), 8).unwrap();
    assert!((61000..=61002).contains(&shard.local_addr(listener).unwrap().port()));
}

#[test]
fn the_next_hops_being_resolved_are_listed_until_heard() {
    let (a, _b) = pair(MemConfig::default());
    let cfg = ShardConfig::new(a.mac(), Some((Ipv4Addr::new(10, 0, 0, 1), 24)), None, [7; 32]);
    let mut shard = Shard::new(a, cfg);
    assert!(shard.unresolved_neighbors().is_empty());
    shard.tcp_connect("10.0.0.2:80".parse().unwrap()).unwrap();
    shard.flush(1);
    assert_eq!(shard.unresolved_neighbors(), ["10.0.0.2".parse::<std::net::IpAddr>().unwrap()]);
    shard.hear("10.0.0.2".parse().unwrap(), MacAddr([2, 0, 0, 0, 0, 2]), 2);
    assert!(shard.unresolved_neighbors().is_empty(), "the SYN left");
}
