//! Several shards of one process on one interface, a queue each (`ShardConfig::shard_count`),
//! against a peer whose transmit side picks the queue per frame, as a NIC's RSS or a veth's
//! flow hash does. Connections the peer opens stay on the shard their SYN reached; connections
//! the shards open get their replies on whatever queue the hash picks, and the shard that
//! receives one hands it to the shard that holds the connection (`stack::shard::exchange`).
//! The answers to one shard's ARP requests reach the other shard, which passes on what it heard.
//! Every byte is compared with what was sent; no segment may be answered with a RST.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};

use nic::{Link, MacAddr, Nic, NicStats, PacketBuf};
use stack::echo::{ClientStatus, EchoClient, EchoServer};
use stack::shard::{exchange, Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemBuf, MemConfig, MemNic};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SHARD_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const PEER_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

/// The peer's side of a two-queue interface: receives from both queues, sends each frame to
/// the queue `steer` picks.
struct TwoQueues {
    queues: [MemNic; 2],
    steer: fn(&[u8]) -> usize,
    sent_to: [u64; 2],
}

impl Nic for TwoQueues {
    type Buf = MemBuf;

    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        let n = self.queues[0].rx_burst(out, max);
        n + self.queues[1].rx_burst(out, max - n)
    }

    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        let mut sent = 0;
        for buf in std::mem::take(bufs) {
            let q = (self.steer)(buf.data());
            self.sent_to[q] += 1;
            let mut one = vec![buf];
            sent += self.queues[q].tx_burst(&mut one);
        }
        sent
    }

    fn alloc(&mut self) -> Option<MemBuf> {
        self.queues[0].alloc()
    }

    fn mac(&self) -> MacAddr {
        PEER_MAC
    }

    fn mtu(&self) -> u16 {
        self.queues[0].mtu()
    }

    fn link(&self) -> Link {
        self.queues[0].link()
    }

    fn stats(&self) -> NicStats {
        self.queues[0].stats()
    }
}

/// TCP frames by their ports (the flow hash), anything else (ARP) to queue 1.
fn by_ports(frame: &[u8]) -> usize {
    if frame.len() >= 14 + 20 + 4 && frame[12..14] == [0x08, 0x00] && frame[14 + 9] == 6 {
        let l4 = 14 + usize::from(frame[14] & 0x0f) * 4;
        let ports = u32::from(frame[l4]) << 8 | u32::from(frame[l4 + 1]) ^ u32::from(frame[l4 + 3]);
        return (ports.wrapping_mul(2_654_435_761) >> 31) as usize & 1;
    }
    1
}

struct Host {
    now: u64,
    shards: Vec<Shard<MemNic>>,
    peer: Shard<TwoQueues>,
}

fn host() -> Host {
    let cfg = MemConfig { queue_len: 4096, pool_size: 8192, mac_a: SHARD_MAC, mac_b: PEER_MAC, ..MemConfig::default() };
    let (a0, b0) = pair(cfg.clone());
    let (a1, b1) = pair(cfg);
    let shards = [a0, a1]
        .into_iter()
        .enumerate()
        .map(|(i, nic)| {
            let mut c = ShardConfig::new(SHARD_MAC, Some((SERVER, 24)), None, [7; 32]);
            c.shard_index = i as u16;
            c.shard_count = 2;
            c.glean_neighbors = true;
            Shard::new(nic, c)
        })
        .collect();
    let peer_nic = TwoQueues { queues: [b0, b1], steer: by_ports, sent_to: [0; 2] };
    let peer = Shard::new(peer_nic, ShardConfig::new(PEER_MAC, Some((PEER, 24)), None, [8; 32]));
    Host { now: 1_000_000_000, shards, peer }
}

/// The echo clients of one side, keyed by their socket.
struct Clients {
    list: Vec<EchoClient>,
    index: HashMap<SocketId, usize>,
}

impl Clients {
    fn new(list: Vec<EchoClient>) -> Clients {
        let index = list.iter().enumerate().map(|(i, c)| (c.socket(), i)).collect();
        Clients { list, index }
    }

    fn running(&self) -> usize {
        self.list.iter().filter(|c| c.status() == ClientStatus::Running).count()
    }
}

impl Host {
    /// Polls everything until the clients are done (the clock moves 1 ms a step).
    fn run(
        &mut self,
        servers: &mut [EchoServer],
        peer_server: &mut Option<EchoServer>,
        clients: &mut Clients,
        on_peer: bool,
    ) {
        let mut buf = vec![0u8; 64 * 1024];
        let mut changed = Vec::new();
        for c in clients.list.iter_mut() {
            if on_peer {
                c.drive(&mut self.peer, &mut buf);
            } else {
                let shard = c.socket().shard();
                c.drive(&mut self.shards[shard], &mut buf);
            }
        }
        for step in 0.. {
            assert!(step < 200_000, "no progress: {} clients running", clients.running());
            if clients.running() == 0 {
                break;
            }
            self.now += 1_000_000;
            self.peer.poll(self.now);
            for s in self.shards.iter_mut() {
                s.poll(self.now);
            }
            exchange(&mut self.shards, self.now);
            for (s, e) in self.shards.iter_mut().zip(servers.iter_mut()) {
                e.serve(s);
            }
            if let Some(e) = peer_server {
                e.serve(&mut self.peer);
            }
            let sides: Vec<usize> = if on_peer { vec![usize::MAX] } else { (0..self.shards.len()).collect() };
            for side in sides {
                if side == usize::MAX {
                    self.peer.take_changed(&mut changed);
                } else {
                    self.shards[side].take_changed(&mut changed);
                }
                for id in changed.drain(..) {
                    if let Some(&i) = clients.index.get(&id) {
                        if clients.list[i].status() == ClientStatus::Running {
                            if side == usize::MAX {
                                clients.list[i].drive(&mut self.peer, &mut buf);
                            } else {
                                clients.list[i].drive(&mut self.shards[side], &mut buf);
                            }
                        }
                    }
                }
            }
        }
    }

    fn rsts_sent(&self) -> u64 {
        self.shards.iter().map(|s| s.stats().tcp_rst_sent).sum::<u64>() + self.peer.stats().tcp_rst_sent
    }
}

#[test]
fn connections_the_peer_opens_stay_on_the_shard_their_syn_reached() {
    let mut h = host();
    let mut servers: Vec<EchoServer> = h.shards.iter_mut().map(|s| EchoServer::start(s, 128).unwrap()).collect();
    let list = (0..32)
        .map(|i| EchoClient::connect(&mut h.peer, SocketAddr::new(SERVER.into(), 7), 20_000, i).unwrap())
        .collect();
    let mut clients = Clients::new(list);
    h.run(&mut servers, &mut None, &mut clients, true);
    for c in &clients.list {
        assert_eq!(c.status(), ClientStatus::Done, "an echo failed");
        assert_eq!(c.received(), 20_000);
    }
    let accepted: Vec<u64> = h.shards.iter().map(|s| s.stats().tcp_passive_opens).collect();
    assert!(accepted.iter().all(|&n| n > 0), "the flow hash reached one shard only: {accepted:?}");
    assert_eq!(accepted.iter().sum::<u64>(), 32);
    assert_eq!(h.rsts_sent(), 0, "{:?} {:?}", h.shards.iter().map(|s| *s.stats()).collect::<Vec<_>>(), h.peer.stats());
}

#[test]
fn replies_to_connections_a_shard_opens_reach_it_through_the_other() {
    let mut h = host();
    let mut peer_server = Some(EchoServer::start(&mut h.peer, 128).unwrap());
    let mut list = Vec::new();
    for i in 0..32 {
        let shard = i % 2;
        list.push(
            EchoClient::connect(&mut h.shards[shard], SocketAddr::new(PEER.into(), 7), 20_000, i as u64).unwrap(),
        );
    }
    // Ephemeral ports: each shard its own slice, so no two connections share a 4-tuple.
    for c in &list {
        let port = h.shards[c.socket().shard()].local_addr(c.socket()).unwrap().port();
        assert_eq!(usize::from(port) % 2, c.socket().shard(), "port {port} outside the shard's slice");
    }
    let mut clients = Clients::new(list);
    h.run(&mut [], &mut peer_server, &mut clients, false);
    for c in &clients.list {
        assert_eq!(c.status(), ClientStatus::Done, "an echo failed");
        assert_eq!(c.received(), 20_000);
    }
    let handed: Vec<u64> = h.shards.iter().map(|s| s.stats().tcp_handed_off).collect();
    assert!(handed.iter().all(|&n| n > 0), "no segment reached the wrong shard: {handed:?}");
    // Shard 0's ARP request was answered on queue 1 (all non-TCP goes there): shard 1 passed
    // the answer on, or shard 0 would never have sent its SYNs.
    assert!(h.peer.nic().sent_to[0] > 0 && h.peer.nic().sent_to[1] > 0);
    assert_eq!(h.rsts_sent(), 0, "{:?} {:?}", h.shards.iter().map(|s| *s.stats()).collect::<Vec<_>>(), h.peer.stats());
}

#[test]
fn a_segment_no_shard_holds_is_answered_once_with_a_rst() {
    let mut h = host();
    // An ACK to a port nobody uses, steered to either queue: one RST, from the shard it reached.
    let mut peer_list = Vec::new();
    for i in 0..8 {
        peer_list.push(EchoClient::connect(&mut h.peer, SocketAddr::new(SERVER.into(), 9), 10, i).unwrap());
    }
    let mut clients = Clients::new(peer_list);
    h.run(&mut [], &mut None, &mut clients, true);
    for c in &clients.list {
        assert_eq!(c.status(), ClientStatus::Failed(stack::shard::Errno::ECONNREFUSED, 0), "{:?}", c.status());
    }
    let rsts: u64 = h.shards.iter().map(|s| s.stats().tcp_rst_sent).sum();
    assert_eq!(rsts, 8, "one RST per SYN to the closed port");
    assert!(h.shards.iter().all(|s| s.stats().tcp_handed_off > 0));
}

#[test]
fn a_datagram_reaching_the_other_shard_is_handed_to_the_socket_that_holds_its_port() {
    let mut h = host();
    let server = h.shards[0].udp_bind(SocketAddr::new(SERVER.into(), 5353)).unwrap();
    let client = h.peer.udp_bind(SocketAddr::new(PEER.into(), 0)).unwrap();
    for i in 0..20u8 {
        h.peer.udp_send(client, &[i; 10], Some(SocketAddr::new(SERVER.into(), 5353))).unwrap();
    }
    // Nobody holds this port on either shard: answered once, with port unreachable.
    h.peer.udp_send(client, b"closed", Some(SocketAddr::new(SERVER.into(), 5354))).unwrap();
    for _ in 0..20 {
        h.now += 1_000_000;
        h.peer.poll(h.now);
        for s in h.shards.iter_mut() {
            s.poll(h.now);
        }
        exchange(&mut h.shards, h.now);
    }
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while let Ok(r) = h.shards[0].udp_recv(server, &mut buf, false) {
        assert_eq!(r.len, 10);
        got.push(buf[0]);
    }
    assert_eq!(got, (0..20).collect::<Vec<u8>>(), "every datagram, in order");
    // Non-TCP frames reach queue 1 (see `by_ports`): shard 1 handed them over.
    assert_eq!(h.shards[1].stats().udp_handed_off, 21);
    let unreachable: Vec<u64> = h.shards.iter().map(|s| s.stats().icmp_out_dest_unreachs).collect();
    assert_eq!(unreachable.iter().sum::<u64>(), 1, "{unreachable:?}");
}
