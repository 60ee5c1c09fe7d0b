//! Checksum offloads: the checksums a NIC says it computes (`Nic::offloads`) are left to it,
//! those it says it verified are not checked again; the rest stay the stack's. The test plays
//! the peer with hand-built frames over a NIC that reports the offloads asked for.

use std::net::{Ipv4Addr, SocketAddr};

use nic::{Link, MacAddr, Nic, NicStats, Offloads, PacketBuf};
use stack::shard::{Shard, ShardConfig};
use testkit::fuzzing::{base, peer_frame, PEER, PORT, SERVER as US};
use testkit::mem::{pair, MemBuf, MemConfig, MemNic};
use wire::{checksum, IpAddress, IpProtocol, Ipv4Packet, TcpFlags, TcpPacket, TcpRepr, UdpPacket};

/// The in-memory NIC, reporting `offloads`.
struct Offloading {
    inner: MemNic,
    offloads: Offloads,
}

impl Nic for Offloading {
    type Buf = MemBuf;
    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        self.inner.rx_burst(out, max)
    }
    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        self.inner.tx_burst(bufs)
    }
    fn alloc(&mut self) -> Option<MemBuf> {
        self.inner.alloc()
    }
    fn mac(&self) -> MacAddr {
        self.inner.mac()
    }
    fn mtu(&self) -> u16 {
        self.inner.mtu()
    }
    fn offloads(&self) -> Offloads {
        self.offloads
    }
    fn link(&self) -> Link {
        self.inner.link()
    }
    fn stats(&self) -> NicStats {
        self.inner.stats()
    }
}

struct Rig {
    shard: Shard<Offloading>,
    peer: MemNic,
    now: u64,
}

impl Rig {
    fn new(offloads: Offloads) -> Rig {
        // The offloads are this test's to report: none of the in-memory NIC's own.
        let (a, b) = pair(MemConfig { tso: false, ..MemConfig::default() });
        let cfg = ShardConfig::new(a.mac(), Some((Ipv4Addr::new(10, 0, 0, 1), 24)), None, [1; 32]);
        let mut shard = Shard::new(Offloading { inner: a, offloads }, cfg);
        let now = 1_000_000_000;
        shard.hear(Ipv4Addr::new(10, 0, 0, 2).into(), b.mac(), now);
        shard.tcp_listen(SocketAddr::from(([0, 0, 0, 0], PORT)), 8).unwrap();
        Rig { shard, peer: b, now }
    }

    /// A SYN from the peer to the listener; `corrupt` spoils both its IPv4 and TCP checksums.
    fn syn(&mut self, corrupt: bool) {
        let syn = TcpRepr { max_seg_size: Some(1460), ..base(1000, None, TcpFlags::SYN) };
        let mut f = peer_frame(self.peer.mac().0, self.shard.nic().mac().0, &syn, &[], 0);
        if corrupt {
            f[14 + 10] ^= 0x5a; // the IPv4 header checksum
            f[34 + 16] ^= 0x5a; // the TCP checksum
        }
        self.send(&f);
    }

    fn send(&mut self, f: &[u8]) {
        let mut b = self.peer.alloc().unwrap();
        b.set_len(f.len());
        b.data_mut().copy_from_slice(f);
        self.peer.tx_burst(&mut vec![b]);
        self.shard.poll(self.now);
    }

    /// The frames the shard sent.
    fn sent(&mut self) -> Vec<Vec<u8>> {
        self.shard.poll(self.now);
        let mut rx = Vec::new();
        self.peer.rx_burst(&mut rx, 64);
        rx.iter().map(|b| b.data().to_vec()).collect()
    }
}

/// The IPv4 header checksum field of a frame, and its transport segment.
fn ip_checksum_and_segment(f: &[u8]) -> (u16, Vec<u8>) {
    let ip = Ipv4Packet::new_checked(&f[14..]).unwrap();
    (ip.checksum(), ip.payload().to_vec())
}

fn tx_offloads() -> Offloads {
    Offloads { tx_ipv4_checksum: true, tx_l4_checksum: true, ..Offloads::default() }
}

#[test]
fn checksums_the_nic_computes_on_transmit_are_left_to_it() {
    let mut r = Rig::new(tx_offloads());
    r.syn(false);
    let sent = r.sent();
    assert_eq!(sent.len(), 1, "a SYN-ACK");
    let (ip_sum, seg) = ip_checksum_and_segment(&sent[0]);
    assert_eq!(ip_sum, 0, "the IPv4 header checksum is the NIC's");
    let tcp = TcpPacket::new_checked(&seg[..]).unwrap();
    let pseudo = checksum::pseudo_header(&IpAddress::V4(US), &IpAddress::V4(PEER), IpProtocol::Tcp, seg.len() as u32);
    assert_eq!(tcp.checksum(), pseudo, "the TCP checksum field holds the pseudo-header sum for the NIC to finish");

    // UDP likewise.
    let u = r.shard.udp_bind(SocketAddr::from(([10, 0, 0, 1], 53))).unwrap();
    r.shard.udp_send_to(u, b"hello", SocketAddr::from(([10, 0, 0, 2], 5353))).unwrap();
    let sent = r.sent();
    let (ip_sum, seg) = ip_checksum_and_segment(&sent[0]);
    assert_eq!(ip_sum, 0);
    let pseudo = checksum::pseudo_header(&IpAddress::V4(US), &IpAddress::V4(PEER), IpProtocol::Udp, seg.len() as u32);
    assert_eq!(UdpPacket::new_checked(&seg[..]).unwrap().checksum(), pseudo);
}

#[test]
fn without_offloads_every_checksum_is_computed() {
    let mut r = Rig::new(Offloads::default());
    r.syn(false);
    let sent = r.sent();
    let ip = Ipv4Packet::new_checked(&sent[0][14..]).unwrap();
    assert!(ip.verify_checksum());
    let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(tcp.verify_checksum(&IpAddress::V4(US), &IpAddress::V4(PEER)));
}

#[test]
fn checksums_the_nic_verified_on_receive_are_not_checked_again() {
    // Without offloads, a SYN with bad checksums is dropped and counted...
    let mut r = Rig::new(Offloads::default());
    r.syn(true);
    assert!(r.sent().is_empty());
    assert_eq!(r.shard.link_stats().drop_checksum, 1);
    // ...with them, the NIC vouched for what it delivered: the SYN is answered.
    let mut r = Rig::new(Offloads { rx_ipv4_checksum: true, rx_l4_checksum: true, ..Offloads::default() });
    r.syn(true);
    let sent = r.sent();
    assert_eq!(sent.len(), 1);
    let tcp_seg = ip_checksum_and_segment(&sent[0]).1;
    let synack = TcpPacket::new_checked(&tcp_seg[..]).unwrap();
    assert!(synack.syn() && synack.ack());
    assert_eq!((r.shard.link_stats().drop_checksum, r.shard.stats().tcp_bad_checksum), (0, 0));
}
