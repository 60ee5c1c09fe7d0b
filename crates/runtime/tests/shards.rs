//! `runtime.shards = 2` over the in-memory NIC: two queues of one interface, each with its own
//! shard and stack thread, and a peer shard whose transmit side picks the queue per flow (as RSS
//! or a veth's flow hash does). One listener fd listens on both shards: epoll reports the
//! connections of either, and accept takes them; connections the process opens get their
//! replies on either queue and reach their shard through the other. Every wait is bounded
//! (`within`): a lost wakeup fails the test instead of hanging it.

mod common;

use std::cell::RefCell;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::rc::Rc;

use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::{Link, MacAddr, Nic, NicStats, PacketBuf};
use runtime::{Accel, Errno};
use stack::echo::EchoServer;
use stack::shard::{Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemBuf, MemConfig, MemNic};

use common::{done, within, NicWithPeer};

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const OUR_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const PEER_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

/// The peer's side of the two-queue interface: sends each frame to the queue its ports hash to
/// (anything not TCP to queue 1), receives from both.
struct Steered {
    queues: [MemNic; 2],
    /// Every frame to this queue instead.
    only: Option<usize>,
}

fn queue_of(frame: &[u8]) -> usize {
    if frame.len() >= 38 && frame[12..14] == [0x08, 0x00] && frame[23] == 6 {
        let l4 = 14 + usize::from(frame[14] & 0x0f) * 4;
        let h = (u32::from(frame[l4]) << 8 | u32::from(frame[l4 + 1])) ^ u32::from(frame[l4 + 3]);
        return (h.wrapping_mul(2_654_435_761) >> 31) as usize & 1;
    }
    1
}

impl Nic for Steered {
    type Buf = MemBuf;
    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        let n = self.queues[0].rx_burst(out, max);
        n + self.queues[1].rx_burst(out, max - n)
    }
    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        let mut sent = 0;
        for buf in std::mem::take(bufs) {
            let q = self.only.unwrap_or_else(|| queue_of(buf.data()));
            sent += self.queues[q].tx_burst(&mut vec![buf]);
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

/// The peer: an echo server on port 7, and connections the test asks it to open (each sends
/// its bytes and collects what comes back).
struct Peer {
    shard: Shard<Steered>,
    echo: EchoServer,
    to_open: Vec<(SocketAddr, Vec<u8>)>,
    conns: Vec<(SocketId, Vec<u8>, Vec<u8>)>,
    clock: MonotonicClock,
    buf: Vec<u8>,
}

impl Peer {
    fn run(&mut self) {
        let now = self.clock.now_ns();
        self.shard.poll(now);
        self.echo.serve(&mut self.shard);
        for (to, data) in std::mem::take(&mut self.to_open) {
            let id = self.shard.tcp_connect(to).expect("peer connect");
            self.conns.push((id, data, Vec::new()));
        }
        for (id, unsent, received) in self.conns.iter_mut() {
            if let Ok(n) = self.shard.tcp_send(*id, unsent) {
                unsent.drain(..n);
            }
            while let Ok(n) = self.shard.tcp_recv(*id, &mut self.buf) {
                if n == 0 {
                    break;
                }
                received.extend_from_slice(&self.buf[..n]);
            }
        }
        self.shard.poll(now);
    }
}

/// One queue of the runtime's interface; receiving runs the peer first. Only the runtime's
/// lock holder touches it, so the shared peer needs no lock of its own.
type QueueNic = NicWithPeer<SharedPeer>;

/// The one peer behind both queues.
struct SharedPeer(Rc<RefCell<Peer>>);

impl common::Peer for SharedPeer {
    fn run(&mut self) {
        self.0.borrow_mut().run();
    }
}

struct PeerHandle(Rc<RefCell<Peer>>);
// SAFETY: the test reaches the peer only through `with_peer`, under the runtime's lock, like
// the runtime's own NICs.
unsafe impl Send for PeerHandle {}
// SAFETY: as for Send: every access to the Rc and RefCell inside is under the runtime's lock,
// so no two threads touch them at once.
unsafe impl Sync for PeerHandle {}

#[derive(Clone, Copy)]
struct Lab {
    rt: &'static Accel<QueueNic>,
    peer: &'static PeerHandle,
}

fn lab() -> Lab {
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\nqueues = 2\n[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\nshards = 2\n"
    );
    let cfg = Config::parse(&toml, Path::new("shards.toml")).unwrap();
    let mem = MemConfig { queue_len: 4096, pool_size: 8192, mac_a: OUR_MAC, mac_b: PEER_MAC, ..MemConfig::default() };
    let (a0, b0) = pair(mem.clone());
    let (a1, b1) = pair(mem);
    let mut shard = Shard::new(
        Steered { queues: [b0, b1], only: None },
        ShardConfig::new(PEER_MAC, Some((PEER, 24)), None, [8; 32]),
    );
    let echo = EchoServer::start(&mut shard, 128).unwrap();
    let peer = Rc::new(RefCell::new(Peer {
        shard,
        echo,
        to_open: Vec::new(),
        conns: Vec::new(),
        clock: MonotonicClock::new(),
        buf: vec![0; 65536],
    }));
    let nics = vec![
        NicWithPeer { mine: a0, peer: SharedPeer(peer.clone()), rx_fd: None },
        NicWithPeer { mine: a1, peer: SharedPeer(peer.clone()), rx_fd: None },
    ];
    Lab { rt: Accel::with_nics(cfg, nics), peer: Box::leak(Box::new(PeerHandle(peer))) }
}

impl Lab {
    /// Runs `f` on the peer with the runtime's lock held (the stack threads then keep off it).
    fn with_peer<T>(&self, f: impl FnOnce(&mut Peer) -> T) -> T {
        let peer = self.peer;
        self.rt.locked(|| f(&mut peer.0.borrow_mut()))
    }
}

fn tcp_socket(rt: &Accel<QueueNic>, nonblock: bool) -> i32 {
    let ty = libc::SOCK_STREAM | if nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket takes no memory.
    let fd = unsafe { libc::socket(libc::AF_INET, ty, 0) };
    assert!(fd >= 0);
    rt.socket_created(fd, libc::AF_INET, ty, 0);
    fd
}

fn read_exact(rt: &Accel<QueueNic>, fd: i32, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; n];
    while got.len() < n {
        let k = done(rt.recv(fd, &mut buf[..n - got.len()], false, false)).unwrap();
        assert!(k > 0, "EOF after {} of {n} bytes", got.len());
        got.extend_from_slice(&buf[..k]);
    }
    got
}

#[test]
fn one_listener_fd_serves_the_connections_of_both_shards_through_epoll() {
    let l = lab();
    let rt = l.rt;
    let lfd = tcp_socket(rt, true);
    done(rt.bind(lfd, SocketAddr::V4(SocketAddrV4::new(OURS, 80)))).unwrap();
    done(rt.listen(lfd, 64)).unwrap();
    // SAFETY: epoll_create1 takes no memory.
    let epfd = unsafe { libc::epoll_create1(0) };
    assert!(epfd >= 0 && rt.epoll_created(epfd));
    done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32, 1)).unwrap();
    const N: usize = 16;
    let to = SocketAddr::V4(SocketAddrV4::new(OURS, 80));
    // First a connection on the second shard alone: its arrival must wake the epoll waiter
    // although the fd names the first shard's listener.
    l.with_peer(|p| {
        p.shard.nic_mut().only = Some(1);
        p.to_open.push((to, b"hello 99".to_vec()));
    });
    let first = within("a connection on shard 1 through epoll", move || {
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let n = done(rt.epoll_wait(epfd, &mut out, -1)).unwrap();
        assert!(n == 1 && out[0].u64 == 1);
        done(rt.accept(lfd, 0)).unwrap().0
    });
    assert_eq!(rt.shard_stats().iter().map(|s| s.tcp_passive_opens).collect::<Vec<_>>(), [0, 1]);
    l.with_peer(|p| {
        p.shard.nic_mut().only = None;
        p.to_open.extend((0..N - 1).map(|i| (to, format!("hello {i:02}").into_bytes())));
    });
    let accepted = within("accept through epoll", move || {
        let mut fds = vec![first];
        while fds.len() < N {
            let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
            let n = done(rt.epoll_wait(epfd, &mut out, -1)).unwrap();
            assert!(n > 0 && out[0].u64 == 1);
            loop {
                match done(rt.accept(lfd, 0)) {
                    Ok((fd, _)) => fds.push(fd),
                    Err(e) => {
                        assert_eq!(e, Errno::EAGAIN);
                        break;
                    }
                }
            }
        }
        fds
    });
    for fd in accepted {
        let got = within("read", move || read_exact(rt, fd, 8));
        assert!(got.starts_with(b"hello "), "{got:?}");
        assert_eq!(done(rt.send(fd, &got, false)).unwrap(), 8);
        rt.close(fd);
    }
    let opens: Vec<u64> = rt.shard_stats().iter().map(|s| s.tcp_passive_opens).collect();
    assert_eq!(opens.iter().sum::<u64>(), N as u64);
    assert!(opens.iter().all(|&n| n > 0), "the flow hash fed one shard only: {opens:?}");
    // Every peer connection got its own greeting back.
    within("echoes", move || loop {
        let all = l.with_peer(|p| p.conns.iter().all(|(_, _, r)| r.len() == 8));
        if all {
            break;
        }
        std::thread::yield_now();
    });
    l.with_peer(|p| {
        for (_, sent, got) in &p.conns {
            assert!(sent.is_empty() && got.starts_with(b"hello "));
        }
    });
    assert!(rt.wait_stats().dedicated, "two shards run their stack threads");
}

#[test]
fn connections_the_process_opens_get_their_replies_through_either_shard() {
    let l = lab();
    let rt = l.rt;
    let fds: Vec<i32> = (0..8)
        .map(|_| {
            let fd = tcp_socket(rt, false);
            within("connect", move || done(rt.connect(fd, SocketAddr::V4(SocketAddrV4::new(PEER, 7))))).unwrap();
            fd
        })
        .collect();
    for (i, &fd) in fds.iter().enumerate() {
        let msg: Vec<u8> = (0..3000u32).map(|b| (b as usize * 7 + i) as u8).collect();
        assert_eq!(done(rt.send(fd, &msg, false)).unwrap(), msg.len());
        let back = within("echo", move || read_exact(rt, fd, 3000));
        assert_eq!(back, msg);
        rt.close(fd);
    }
    let stats = rt.shard_stats();
    let opens: Vec<u64> = stats.iter().map(|s| s.tcp_active_opens).collect();
    assert_eq!(opens, [4, 4], "connect() takes the shards in turn");
    assert!(stats.iter().all(|s| s.tcp_handed_off > 0), "no reply reached the other queue: {stats:?}");
    assert_eq!(stats.iter().map(|s| s.tcp_rst_sent).sum::<u64>(), 0);
}
