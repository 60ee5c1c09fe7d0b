//! Urgent data and the buffer options through the runtime, as an application sees them:
//! MSG_OOB, SIOCATMARK, SO_OOBINLINE, POLLPRI/EPOLLPRI and SIGURG to the owner; SO_RCVBUF,
//! SO_SNDBUF and SO_RCVLOWAT read back as Linux does on this host and applied (EAGAIN after
//! the send buffer, poll and a blocking read waiting for the low-water mark).
//!
//! The runtime runs over the in-memory NIC; on its other end a peer shard runs whenever the
//! runtime receives. The peer accepts on port 9 and does what the test queues (send, send
//! urgent) on the connections it accepted, in order. Every wait is bounded (`within`): a lost
//! wakeup fails the test instead of hanging it.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::{Arc, Mutex};

use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::MacAddr;
use runtime::{Accel, Call, Errno};
use stack::shard::{Buffers, Shard, ShardConfig, SocketId, TcpMem};
use testkit::mem::{pair, MemConfig, MemNic};

use common::{done, within, NicWithPeer, Peer};

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PEER_PORT: u16 = 9;

/// What the test has the peer do on its k-th accepted connection.
enum Op {
    Send(usize, Vec<u8>),
    SendUrgent(usize, Vec<u8>),
}

#[derive(Default)]
struct Script {
    ops: Vec<Op>,
    accepted: Vec<SocketId>,
    /// Per accepted connection: the stream it read, and the urgent byte it took.
    received: Vec<Vec<u8>>,
    urgent: Vec<Option<u8>>,
    /// The peer reads nothing (its window closes).
    deaf: bool,
}

/// The runtime's NIC, with the scripted peer on the other end.
type Scripted = NicWithPeer<ScriptedPeer>;

struct ScriptedPeer {
    peer: Shard<MemNic>,
    listener: SocketId,
    script: Arc<Mutex<Script>>,
    clock: MonotonicClock,
}

impl Peer for ScriptedPeer {
    fn run(&mut self) {
        let now = self.clock.now_ns();
        self.peer.poll(now);
        let mut script = self.script.lock().unwrap();
        while let Ok((id, _)) = self.peer.tcp_accept(self.listener) {
            script.accepted.push(id);
            script.received.push(Vec::new());
            script.urgent.push(None);
        }
        // Read as an application does: up to the mark, the urgent byte, then on.
        let mut buf = [0u8; 4096];
        let readers = if script.deaf { 0 } else { script.accepted.len() };
        for k in 0..readers {
            let id = script.accepted[k];
            loop {
                if self.peer.tcp_urgent_mark(id) == Ok(Some(0)) {
                    if let Ok(Some(byte)) = self.peer.tcp_recv_urgent(id, false) {
                        script.urgent[k] = Some(byte);
                    }
                }
                match self.peer.tcp_recv(id, &mut buf) {
                    Ok(n) if n > 0 => script.received[k].extend_from_slice(&buf[..n]),
                    _ => break,
                }
            }
        }
        let ops = std::mem::take(&mut script.ops);
        for op in ops {
            let (k, data, urgent) = match op {
                Op::Send(k, d) => (k, d, false),
                Op::SendUrgent(k, d) => (k, d, true),
            };
            let Some(&id) = script.accepted.get(k) else {
                script.ops.push(if urgent { Op::SendUrgent(k, data) } else { Op::Send(k, data) });
                continue;
            };
            let sent = if urgent { self.peer.tcp_send_urgent(id, &data) } else { self.peer.tcp_send(id, &data) };
            assert_eq!(sent, Ok(data.len()), "the peer's send buffer takes the whole script step");
        }
        drop(script);
        self.peer.poll(now);
    }
}

struct Lab {
    rt: &'static Accel<Scripted>,
    script: Arc<Mutex<Script>>,
}

impl Lab {
    fn new(drive: &str, peer_buffers: Buffers) -> Lab {
        let toml =
            format!("[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\ndrive = \"{drive}\"\n");
        let cfg = Config::parse(&toml, Path::new("options.toml")).unwrap();
        let (a, b) = pair(MemConfig { queue_len: 4096, pool_size: 8192, ..MemConfig::default() });
        let mut peer = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), Some((PEER, 24)), None, [5; 32]));
        let listener = peer.tcp_listen(SocketAddr::V4(SocketAddrV4::new(PEER, PEER_PORT)), 64).unwrap();
        peer.tcp_set_buffers(listener, peer_buffers).unwrap();
        let script = Arc::new(Mutex::new(Script::default()));
        let peer = ScriptedPeer { peer, listener, script: script.clone(), clock: MonotonicClock::new() };
        let nic = NicWithPeer { mine: a, peer, rx_fd: None };
        Lab { rt: Accel::with_nic(cfg, nic), script }
    }

    /// A blocking connection to the peer (its k-th, counting from 0); options first.
    fn connect(&self, options: &[(i32, i32)]) -> i32 {
        let rt = self.rt;
        // SAFETY: socket takes no memory.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        assert!(fd >= 0);
        rt.socket_created(fd, libc::AF_INET, libc::SOCK_STREAM, 0);
        let to = SocketAddr::V4(SocketAddrV4::new(PEER, PEER_PORT));
        for &(name, value) in options {
            // Still a kernel socket: the kernel takes it, and the runtime remembers it.
            assert!(matches!(rt.setsockopt(fd, libc::SOL_SOCKET, name, &value.to_ne_bytes()), Call::Kernel));
        }
        within("connect", move || done(rt.connect(fd, to))).unwrap();
        fd
    }

    fn peer_does(&self, op: Op) {
        self.script.lock().unwrap().ops.push(op);
    }
}

/// poll(2) on one fd; `timeout_ms` as poll's.
fn poll_one(rt: &Accel<Scripted>, fd: i32, events: i16, timeout_ms: i32) -> i16 {
    let mut p = [libc::pollfd { fd, events, revents: 0 }];
    done(rt.poll(&mut p, timeout_ms)).unwrap();
    p[0].revents
}

/// Drives the NIC until `fd` has `n` bytes to read (FIONREAD), without waiting on readiness.
fn until_queued(rt: &'static Accel<Scripted>, fd: i32, n: i32) {
    within("data to arrive", move || {
        while done(rt.readable_bytes(fd)).unwrap() < n {
            poll_one(rt, fd, 0, 1);
        }
    });
}

fn recv(rt: &Accel<Scripted>, fd: i32, len: usize) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; len];
    done(rt.recv(fd, &mut buf, true, false)).map(|n| buf[..n].to_vec())
}

fn oob(rt: &Accel<Scripted>, fd: i32, peek: bool) -> Result<Vec<u8>, Errno> {
    let mut buf = [0u8; 8];
    done(rt.recv_urgent(fd, &mut buf, peek)).map(|n| buf[..n].to_vec())
}

fn int_opt(rt: &Accel<Scripted>, fd: i32, name: i32) -> i32 {
    let mut v = [0u8; 4];
    assert_eq!(done(rt.getsockopt(fd, libc::SOL_SOCKET, name, &mut v)), Ok(4));
    i32::from_ne_bytes(v)
}

fn set_int(rt: &Accel<Scripted>, fd: i32, name: i32, value: i32) {
    done(rt.setsockopt(fd, libc::SOL_SOCKET, name, &value.to_ne_bytes())).unwrap();
}

#[test]
fn msg_oob_siocatmark_and_pollpri_as_linux() {
    for drive in ["inline", "dedicated"] {
        let l = Lab::new(drive, Buffers::default());
        let rt = l.rt;
        let fd = l.connect(&[]);
        assert_eq!(oob(rt, fd, false), Err(Errno::EINVAL), "{drive}: no urgent data yet");
        assert_eq!(done(rt.at_mark(fd)), Ok(false));
        l.peer_does(Op::Send(0, b"abc".to_vec()));
        l.peer_does(Op::SendUrgent(0, b"X".to_vec()));
        l.peer_does(Op::Send(0, b"def".to_vec()));
        let pri = within("POLLPRI", move || poll_one(rt, fd, libc::POLLPRI, -1));
        assert_eq!(pri, libc::POLLPRI);
        until_queued(rt, fd, 3);
        assert_eq!(poll_one(rt, fd, libc::POLLIN | libc::POLLPRI, 0), libc::POLLIN | libc::POLLPRI);
        assert_eq!(done(rt.readable_bytes(fd)), Ok(3), "FIONREAD stops at the mark");
        assert_eq!(recv(rt, fd, 100), Ok(b"abc".to_vec()), "a read stops at the mark");
        assert_eq!(done(rt.at_mark(fd)), Ok(true));
        assert_eq!(oob(rt, fd, true), Ok(b"X".to_vec()), "MSG_PEEK");
        assert_eq!(oob(rt, fd, false), Ok(b"X".to_vec()));
        assert_eq!(oob(rt, fd, false), Err(Errno::EINVAL), "read once");
        assert_eq!(poll_one(rt, fd, libc::POLLIN | libc::POLLPRI, 0), libc::POLLIN);
        until_queued(rt, fd, 0);
        let rest = within("the rest", move || {
            let mut got = Vec::new();
            while got.len() < 3 {
                poll_one(rt, fd, libc::POLLIN, -1);
                got.extend(recv(rt, fd, 100).unwrap_or_default());
            }
            got
        });
        assert_eq!(rest, b"def", "the urgent byte is out of the stream");
        assert_eq!(done(rt.at_mark(fd)), Ok(false));
        rt.close(fd);
    }
}

#[test]
fn so_oobinline_keeps_the_urgent_byte_in_the_stream() {
    let l = Lab::new("inline", Buffers::default());
    let rt = l.rt;
    let fd = l.connect(&[(libc::SO_OOBINLINE, 1)]);
    assert_eq!(int_opt(rt, fd, libc::SO_OOBINLINE), 1);
    l.peer_does(Op::Send(0, b"abc".to_vec()));
    l.peer_does(Op::SendUrgent(0, b"X".to_vec()));
    l.peer_does(Op::Send(0, b"def".to_vec()));
    until_queued(rt, fd, 7);
    assert_eq!(poll_one(rt, fd, libc::POLLPRI, 0), libc::POLLPRI, "POLLPRI with SO_OOBINLINE too");
    assert_eq!(oob(rt, fd, false), Err(Errno::EINVAL));
    assert_eq!(recv(rt, fd, 100), Ok(b"abc".to_vec()));
    assert_eq!(done(rt.at_mark(fd)), Ok(true));
    assert_eq!(recv(rt, fd, 100), Ok(b"Xdef".to_vec()));
    rt.close(fd);
}

#[test]
fn msg_oob_is_eagain_while_the_urgent_byte_has_not_arrived() {
    let l = Lab::new("inline", Buffers::default());
    let rt = l.rt;
    // Our window is small: the peer's urgent pointer runs far ahead of what it can send.
    let fd = l.connect(&[(libc::SO_RCVBUF, 1)]);
    let big: Vec<u8> = (0..50_000u32).map(|i| (i % 200) as u8).collect();
    l.peer_does(Op::SendUrgent(0, big.clone()));
    until_queued(rt, fd, 1);
    assert_eq!(oob(rt, fd, false), Err(Errno::EAGAIN));
    assert_eq!(poll_one(rt, fd, libc::POLLPRI, 0), 0);
    let got = within("up to the mark", move || {
        let mut got = Vec::new();
        while done(rt.at_mark(fd)) != Ok(true) {
            poll_one(rt, fd, libc::POLLIN, -1);
            got.extend(recv(rt, fd, 4096).unwrap_or_default());
        }
        got
    });
    assert!(got[..] == big[..49_999], "{} bytes before the mark", got.len());
    until_queued(rt, fd, 0);
    within("the byte", move || while poll_one(rt, fd, libc::POLLPRI, -1) != libc::POLLPRI {});
    assert_eq!(oob(rt, fd, false), Ok(vec![big[49_999]]));
    rt.close(fd);
}

#[test]
fn sigurg_goes_to_the_owner_set_with_f_setown_ex() {
    const F_SETOWN_EX: i32 = 15;
    const F_GETOWN_EX: i32 = 16;
    const F_OWNER_TID: i32 = 0;
    for drive in ["inline", "dedicated"] {
        let l = Lab::new(drive, Buffers::default());
        let rt = l.rt;
        let script = l.script.clone();
        // SAFETY: the sigset is zeroed then initialised by sigemptyset before use; every
        // pointer given (the sigsets, `me` and `owner`, two c_ints each as struct f_owner_ex,
        // `ts`) is a local that outlives its call; the rest takes no memory.
        let got = within("SIGURG", move || unsafe {
            // This thread is the owner; it blocks SIGURG and takes it with sigtimedwait.
            let mut urg: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut urg);
            libc::sigaddset(&mut urg, libc::SIGURG);
            libc::pthread_sigmask(libc::SIG_BLOCK, &urg, std::ptr::null_mut());
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
            rt.socket_created(fd, libc::AF_INET, libc::SOCK_STREAM, 0);
            let me = [F_OWNER_TID, libc::gettid()];
            // Set on the kernel socket, before connect: it must survive the placeholder.
            assert_eq!(libc::fcntl(fd, F_SETOWN_EX, me.as_ptr()), 0);
            done(rt.connect(fd, SocketAddr::V4(SocketAddrV4::new(PEER, PEER_PORT)))).unwrap();
            let mut owner = [0i32; 2];
            assert_eq!(libc::fcntl(fd, F_GETOWN_EX, owner.as_mut_ptr()), 0);
            assert_eq!(owner, me, "F_GETOWN_EX on the placeholder");
            let pending = |wait_s| {
                let ts = libc::timespec { tv_sec: wait_s, tv_nsec: 0 };
                libc::sigtimedwait(&urg, std::ptr::null_mut(), &ts) == libc::SIGURG
            };
            let before = pending(0);
            script.lock().unwrap().ops.push(Op::SendUrgent(0, b"!".to_vec()));
            // Something must drive the NIC (inline): waiting for the urgent byte does.
            poll_one(rt, fd, libc::POLLPRI, -1);
            let after = pending(30);
            rt.close(fd);
            (before, after)
        });
        assert_eq!(got, (false, true), "{drive}: one SIGURG, after the urgent data");
    }
}

#[test]
fn send_msg_oob_reaches_the_peer_as_urgent_data() {
    let l = Lab::new("inline", Buffers::default());
    let rt = l.rt;
    let fd = l.connect(&[]);
    assert_eq!(done(rt.send(fd, b"hello", false)), Ok(5));
    assert_eq!(done(rt.send_urgent(fd, b"!", false)), Ok(1));
    assert_eq!(done(rt.send(fd, b"more", false)), Ok(4));
    let script = l.script.clone();
    let seen = within("the peer reads it all", move || loop {
        poll_one(rt, fd, libc::POLLIN, 1);
        let s = script.lock().unwrap();
        if s.received.first().is_some_and(|r| r.len() == 9) {
            return (s.received[0].clone(), s.urgent[0]);
        }
    });
    assert_eq!(seen, (b"hellomore".to_vec(), Some(b'!')));
    rt.close(fd);
}

#[test]
fn buffer_options_read_back_as_this_hosts_linux() {
    let l = Lab::new("inline", Buffers::default());
    let rt = l.rt;
    let limits = |path: &str| -> Vec<i32> {
        std::fs::read_to_string(path).unwrap().split_whitespace().map(|w| w.parse().unwrap()).collect()
    };
    let (rmem_max, wmem_max) = (limits("/proc/sys/net/core/rmem_max")[0], limits("/proc/sys/net/core/wmem_max")[0]);
    let (tcp_rmem, tcp_wmem) = (limits("/proc/sys/net/ipv4/tcp_rmem"), limits("/proc/sys/net/ipv4/tcp_wmem"));
    let bound = || {
        // SAFETY: socket takes no memory.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
        rt.socket_created(fd, libc::AF_INET, libc::SOCK_STREAM, 0);
        done(rt.bind(fd, SocketAddr::V4(SocketAddrV4::new(OURS, 0)))).unwrap();
        fd
    };
    let fd = bound();
    assert_eq!(int_opt(rt, fd, libc::SO_RCVBUF), tcp_rmem[1], "tcp_rmem[1] when never set");
    assert_eq!(int_opt(rt, fd, libc::SO_SNDBUF), tcp_wmem[1]);
    assert_eq!(int_opt(rt, fd, libc::SO_RCVLOWAT), 1);
    for (asked, rcv, snd) in [
        (0, 2304, 4608),
        (1000, 2304, 4608),
        (2000, 4000, 4608),
        (65536, 131_072, 131_072),
        (i32::MAX, 2 * rmem_max, 2 * wmem_max),
        (-1, 2 * rmem_max, 2 * wmem_max),
    ] {
        set_int(rt, fd, libc::SO_RCVBUF, asked);
        set_int(rt, fd, libc::SO_SNDBUF, asked);
        assert_eq!((int_opt(rt, fd, libc::SO_RCVBUF), int_opt(rt, fd, libc::SO_SNDBUF)), (rcv, snd), "{asked}");
    }
    // SO_RCVLOWAT: at most half the buffer once it is set; without, it grows the buffer.
    set_int(rt, fd, libc::SO_RCVBUF, 4096);
    set_int(rt, fd, libc::SO_RCVLOWAT, 1 << 30);
    assert_eq!(int_opt(rt, fd, libc::SO_RCVLOWAT), 4096);
    let fresh = bound();
    set_int(rt, fresh, libc::SO_RCVLOWAT, 0);
    assert_eq!(int_opt(rt, fresh, libc::SO_RCVLOWAT), 1);
    set_int(rt, fresh, libc::SO_RCVLOWAT, 70_000);
    assert_eq!((int_opt(rt, fresh, libc::SO_RCVLOWAT), int_opt(rt, fresh, libc::SO_RCVBUF)), (70_000, 140_000));
    set_int(rt, fresh, libc::SO_RCVLOWAT, -1);
    assert_eq!(int_opt(rt, fresh, libc::SO_RCVLOWAT), tcp_rmem[2] / 2);
    assert_eq!(done(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, &[1, 2])), Err(Errno::EINVAL), "short");
    rt.close(fd);
    rt.close(fresh);
}

/// SO_DOMAIN, SO_TYPE and SO_PROTOCOL as Linux answers them: what Python's socket(fileno=)
/// reads of a socket it did not make (one received over a unix socket).
#[test]
fn a_socket_names_its_domain_type_and_protocol() {
    let l = Lab::new("inline", Buffers::default());
    let rt = l.rt;
    for (domain, ty, addr, protocol) in [
        (libc::AF_INET, libc::SOCK_STREAM, SocketAddr::V4(SocketAddrV4::new(OURS, 0)), libc::IPPROTO_TCP),
        (libc::AF_INET, libc::SOCK_DGRAM, SocketAddr::V4(SocketAddrV4::new(OURS, 0)), libc::IPPROTO_UDP),
        (
            libc::AF_INET6,
            libc::SOCK_STREAM,
            SocketAddr::V6(std::net::SocketAddrV6::new(OURS.to_ipv6_mapped(), 0, 0, 0)),
            libc::IPPROTO_TCP,
        ),
    ] {
        // SAFETY: socket takes no memory.
        let fd = unsafe { libc::socket(domain, ty, 0) };
        rt.socket_created(fd, domain, ty, 0);
        done(rt.bind(fd, addr)).unwrap();
        let got =
            (int_opt(rt, fd, libc::SO_DOMAIN), int_opt(rt, fd, libc::SO_TYPE), int_opt(rt, fd, libc::SO_PROTOCOL));
        assert_eq!(got, (domain, ty, protocol), "{addr}");
        rt.close(fd);
    }
}

#[test]
fn a_small_so_sndbuf_gives_eagain_after_that_much_data() {
    // The peer never reads and offers a 4096-byte window: what we can send is our buffer and
    // that window.
    let l = Lab::new("inline", Buffers { recv: Some(4096), recv_fixed: true, send: None });
    l.script.lock().unwrap().deaf = true;
    let rt = l.rt;
    let sent_before_eagain = |options: &[(i32, i32)]| {
        let fd = l.connect(options);
        let mut total = 0;
        loop {
            match done(rt.send(fd, &[7u8; 1000], true)) {
                Ok(n) => total += n,
                Err(e) => {
                    assert_eq!(e, Errno::EAGAIN);
                    break;
                }
            }
        }
        assert_eq!(poll_one(rt, fd, libc::POLLOUT, 0), 0, "not writable while full");
        rt.close(fd);
        total
    };
    let small = sent_before_eagain(&[(libc::SO_SNDBUF, 8192)]);
    assert!((16_384..=16_384 + 4096).contains(&small), "{small}");
    let default = sent_before_eagain(&[]);
    assert!(default >= 128 * 1024, "{default}");
    // A blocking send that SO_SNDTIMEO stops returns what it sent (Linux), not EAGAIN.
    let fd = l.connect(&[(libc::SO_SNDBUF, 8192)]);
    let tv: Vec<u8> = [0i64, 20_000].iter().flat_map(|v| v.to_ne_bytes()).collect();
    done(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDTIMEO, &tv)).unwrap();
    let sent = within("a send that times out", move || done(rt.send(fd, &[7u8; 100_000], false)));
    assert!(matches!(sent, Ok(n) if (16_384..=16_384 + 4096).contains(&n)), "{sent:?}");
    rt.close(fd);
}

#[test]
fn so_rcvlowat_holds_poll_and_a_blocking_read_until_that_much_is_there() {
    for drive in ["inline", "dedicated"] {
        let l = Lab::new(drive, Buffers::default());
        let rt = l.rt;
        let fd = l.connect(&[(libc::SO_RCVLOWAT, 10)]);
        assert_eq!(int_opt(rt, fd, libc::SO_RCVLOWAT), 10);
        l.peer_does(Op::Send(0, b"abcd".to_vec()));
        until_queued(rt, fd, 4);
        assert_eq!(poll_one(rt, fd, libc::POLLIN, 0), 0, "{drive}: 4 bytes of 10");
        // A blocking read waits for the rest; what is there does not end it.
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 100];
            done(rt.recv(fd, &mut buf, false, false)).map(|n| buf[..n].to_vec())
        });
        within("the reader parks", move || {
            while rt.parked() < 1 {
                std::thread::yield_now();
            }
        });
        // Linux wakes it once SO_RCVLOWAT bytes more wait: 7 do not, 3 more do.
        l.peer_does(Op::Send(0, b"efghijk".to_vec()));
        until_queued(rt, fd, 7);
        l.peer_does(Op::Send(0, b"lmn".to_vec()));
        let got = within("the read", move || reader.join().unwrap());
        assert_eq!(got, Ok(b"abcdefghijklmn".to_vec()));
        // Non-blocking: what there is.
        l.peer_does(Op::Send(0, b"xy".to_vec()));
        until_queued(rt, fd, 2);
        assert_eq!(poll_one(rt, fd, libc::POLLIN, 0), 0);
        assert_eq!(recv(rt, fd, 100), Ok(b"xy".to_vec()));
        // SO_RCVTIMEO runs out with some data read: the data, not EAGAIN (Linux).
        let tv = [0i64, 20_000];
        let tv: Vec<u8> = tv.iter().flat_map(|v| v.to_ne_bytes()).collect();
        done(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_RCVTIMEO, &tv)).unwrap();
        l.peer_does(Op::Send(0, b"late".to_vec()));
        until_queued(rt, fd, 4);
        let got = within("a read that times out", move || {
            let mut buf = [0u8; 100];
            done(rt.recv(fd, &mut buf, false, false)).map(|n| buf[..n].to_vec())
        });
        assert_eq!(got, Ok(b"late".to_vec()));
        rt.close(fd);
    }
}

/// The `[tcp]` limits reach the shards with the sysctls' units: `mem` in 4 KiB pages,
/// `fin_timeout` in seconds.
#[test]
fn tcp_limits_of_the_config_reach_the_shard() {
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{OURS}/24\"\n[tcp]\norphan_retries = 3\n\
         max_orphans = 10\nfin_timeout = 5\nmem = [1, 2, 3]\nmax_tw_buckets = 7\nsomaxconn = 16\n"
    );
    let cfg = Config::parse(&toml, Path::new("limits.toml")).unwrap();
    let s = runtime::shard_config(&cfg, MacAddr([2, 0, 0, 0, 0, 1]), [0; 32]);
    assert_eq!((s.tcp.orphan_retries, s.tcp.fin_wait2_timeout), (3, 5_000_000_000));
    assert_eq!((s.max_orphans, s.max_tw_buckets, s.somaxconn), (10, 7, 16));
    assert_eq!(s.tcp_mem, TcpMem { low: 4096, pressure: 8192, high: 12288 });
}
