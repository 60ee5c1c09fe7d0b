//! The runtime's threading and readiness rules, without root: a runtime over the in-memory NIC
//! whose other end is a peer shard living inside the NIC (it runs whenever the runtime receives:
//! an echo server on port 7, and connections the test asks it to open). Sockets are real kernel
//! sockets turned into placeholders, exactly as under `pronghorn run`.
//!
//! Every wait is bounded ([`within`]): a lost wakeup makes the test fail instead of hang. The
//! bound is a hang detector, not a speed limit: nothing here measures time. Each test runs with
//! the NIC driven inline and by a dedicated stack thread.
//!
//! Worker processes: listen() before the NIC opens is deferred to the first wait, and a child
//! forked before that keeps the runtime and serves the inherited listener on its own NIC.

mod common;

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::MacAddr;
use runtime::{Accel, Call, DriverRole, Errno, CALLS_PER_PASS};
use stack::echo::EchoServer;
use stack::shard::{Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemConfig, MemNic};

use common::{done, within, NicWithPeer, Peer, BOUND};

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// What the test asks the peer to do, and what the peer's own connections received.
#[derive(Default)]
struct PeerCtl {
    /// Connections to open: (to, bytes to send once connected).
    to_open: Vec<(SocketAddr, Vec<u8>)>,
    conns: Vec<PeerConn>,
    /// Of `conns`, those whose handshake is done on the peer's side (its last ACK sent).
    established: usize,
    /// Bytes each connection reads per run (a slow reader), `None`: all there is.
    read_per_run: Option<usize>,
}

struct PeerConn {
    id: SocketId,
    unsent: Vec<u8>,
    received: Vec<u8>,
    eof: bool,
    /// The error that ended its reading (ECONNRESET: reset).
    error: Option<Errno>,
    /// Its state when the peer last ran.
    state: Option<stack::TcpState>,
}

/// The runtime's NIC: one end of an in-memory pair, with the peer shard on the other end.
type PeerNic = NicWithPeer<EchoPeer>;

/// The peer shard: an echo server, and the connections the test has it open.
struct EchoPeer {
    peer: Shard<MemNic>,
    echo: EchoServer,
    ctl: Arc<Mutex<PeerCtl>>,
    clock: MonotonicClock,
    buf: Vec<u8>,
}

impl Peer for EchoPeer {
    fn run(&mut self) {
        let now = self.clock.now_ns();
        self.peer.poll(now);
        self.echo.serve(&mut self.peer);
        let mut ctl = self.ctl.lock().unwrap();
        for (to, data) in std::mem::take(&mut ctl.to_open) {
            let id = self.peer.tcp_connect(to).expect("peer connect");
            ctl.conns.push(PeerConn { id, unsent: data, received: Vec::new(), eof: false, error: None, state: None });
        }
        let per_run = ctl.read_per_run.unwrap_or(usize::MAX);
        for c in ctl.conns.iter_mut() {
            c.state = self.peer.tcp_state(c.id).ok();
            if !c.unsent.is_empty() {
                if let Ok(n) = self.peer.tcp_send(c.id, &c.unsent) {
                    c.unsent.drain(..n);
                }
            }
            c.read(&mut self.peer, &mut self.buf, per_run);
        }
        let peer = &self.peer;
        ctl.established = ctl.conns.iter().filter(|c| peer.tcp_state(c.id) == Ok(stack::TcpState::Established)).count();
        drop(ctl);
        self.peer.poll(now);
    }
}

impl PeerConn {
    /// Reads up to `budget` bytes (or to the end of the stream, or an error).
    fn read(&mut self, peer: &mut Shard<MemNic>, buf: &mut [u8], mut budget: usize) {
        while !self.eof && budget > 0 {
            let room = budget.min(buf.len());
            match peer.tcp_recv(self.id, &mut buf[..room]) {
                Ok(0) => self.eof = true,
                Ok(n) => {
                    self.received.extend_from_slice(&buf[..n]);
                    budget -= n;
                }
                Err(e) => {
                    if e != Errno::EAGAIN {
                        self.error = Some(e);
                    }
                    break;
                }
            }
        }
    }
}

/// The runtime's NIC goes when its process exits (`at_exit`): what the peer's stack accepted
/// by then is read, as a kernel reader reads it after the sender is gone.
impl Drop for EchoPeer {
    fn drop(&mut self) {
        let mut ctl = self.ctl.lock().unwrap_or_else(|e| e.into_inner());
        for c in ctl.conns.iter_mut() {
            c.read(&mut self.peer, &mut self.buf, usize::MAX);
        }
    }
}

struct Lab {
    rt: &'static Accel<PeerNic>,
    ctl: Arc<Mutex<PeerCtl>>,
}

fn lab(drive: &str) -> Lab {
    lab_with(drive, "")
}

/// A lab with more of the config file after `[runtime]`'s first lines: more `[runtime]`
/// settings, then whole tables.
fn lab_with(drive: &str, more: &str) -> Lab {
    lab_from(drive, "", more)
}

/// A lab with more `[nic]` settings (`nic_more`) and more after `[runtime]`'s first lines.
fn lab_from(drive: &str, nic_more: &str, more: &str) -> Lab {
    lab_nic(drive, nic_more, more, None)
}

/// A lab whose NIC has an rx fd, `rx_fd` (an eventfd the test writes when it has the peer
/// send): its driver sleeps on it as on AF_XDP's.
fn lab_with_rx_fd(drive: &str, rx_fd: i32) -> Lab {
    lab_nic(drive, "", "", Some(rx_fd))
}

fn lab_nic(drive: &str, nic_more: &str, more: &str, rx_fd: Option<i32>) -> Lab {
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n{nic_more}[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\ndrive = \"{drive}\"\nspin_us = 20\n{more}"
    );
    let cfg = Config::parse(&toml, Path::new("threads.toml")).unwrap();
    let (a, b) = pair(MemConfig { queue_len: 4096, pool_size: 8192, ..MemConfig::default() });
    let mut peer = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), Some((PEER, 24)), None, [7; 32]));
    let echo = EchoServer::start(&mut peer, 128).unwrap();
    let ctl = Arc::new(Mutex::new(PeerCtl::default()));
    let peer = EchoPeer { peer, echo, ctl: ctl.clone(), clock: MonotonicClock::new(), buf: vec![0; 65536] };
    let nic = NicWithPeer { mine: a, peer, rx_fd };
    Lab { rt: Accel::with_nic(cfg, nic), ctl }
}

fn tcp_socket(rt: &Accel<PeerNic>, nonblock: bool) -> i32 {
    let ty = libc::SOCK_STREAM | if nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket takes no memory.
    let fd = unsafe { libc::socket(libc::AF_INET, ty, 0) };
    assert!(fd >= 0);
    rt.socket_created(fd, libc::AF_INET, ty, 0);
    fd
}

fn echo_addr() -> SocketAddr {
    SocketAddr::V4(SocketAddrV4::new(PEER, 7))
}

/// A blocking connection to the peer's echo server.
fn connect_echo(rt: &'static Accel<PeerNic>) -> i32 {
    let fd = tcp_socket(rt, false);
    within("connect", move || done(rt.connect(fd, echo_addr()))).unwrap();
    fd
}

fn read_exact(rt: &Accel<PeerNic>, fd: i32, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; n];
    while got.len() < n {
        let k = done(rt.recv(fd, &mut buf[..n - got.len()], false, false)).unwrap();
        assert!(k > 0, "EOF after {} of {n} bytes", got.len());
        got.extend_from_slice(&buf[..k]);
    }
    got
}

/// A pipe: kernel fds for a poll beside (or instead of) accelerated ones.
fn kernel_pipe() -> [i32; 2] {
    let mut pipe = [0i32; 2];
    // SAFETY: pipe writes two fds into `pipe`, which holds two.
    assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
    pipe
}

fn close_kernel_pipe(pipe: [i32; 2]) {
    for f in pipe {
        // SAFETY: the pipe's fds, ours, closed once.
        unsafe { libc::close(f) };
    }
}

fn listener(rt: &Accel<PeerNic>, port: u16, nonblock: bool) -> i32 {
    let fd = tcp_socket(rt, nonblock);
    done(rt.bind(fd, SocketAddr::V4(SocketAddrV4::new(OURS, port)))).unwrap();
    done(rt.listen(fd, 64)).unwrap();
    fd
}

fn both_modes(test: fn(&Lab)) {
    for drive in ["inline", "dedicated"] {
        let l = lab(drive);
        test(&l);
        assert_eq!(l.rt.wait_stats().dedicated, drive == "dedicated", "{drive}: the mode asked for");
    }
}

#[test]
fn threads_blocked_on_their_own_sockets_are_each_woken_by_their_own_data() {
    both_modes(|l| {
        let rt = l.rt;
        const N: usize = 8;
        let fds: Vec<i32> = (0..N).map(|_| connect_echo(rt)).collect();
        // Every thread blocks reading its socket before any data exists.
        let (ready_tx, ready_rx) = mpsc::channel();
        let readers: Vec<_> = fds
            .iter()
            .enumerate()
            .map(|(i, &fd)| {
                let ready_tx = ready_tx.clone();
                std::thread::spawn(move || {
                    ready_tx.send(()).unwrap();
                    let got = read_exact(rt, fd, 64);
                    (i, got)
                })
            })
            .collect();
        for _ in 0..N {
            ready_rx.recv().unwrap();
        }
        // Data goes out in the reverse order, from this thread: each echo wakes one reader.
        for (i, &fd) in fds.iter().enumerate().rev() {
            let msg = vec![i as u8; 64];
            assert_eq!(done(rt.send(fd, &msg, false)), Ok(64));
        }
        let results = within("readers", move || readers.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>());
        for (i, got) in results {
            assert_eq!(got, vec![i as u8; 64], "reader {i} got another socket's data");
        }
        for fd in fds {
            rt.close(fd);
        }
    });
}

#[test]
fn accept_in_one_thread_io_in_another_close_from_a_third() {
    both_modes(|l| {
        let rt = l.rt;
        let lfd = listener(rt, 5000, false);
        let acceptor = std::thread::spawn(move || done(rt.accept(lfd, 0)).map(|(fd, _)| fd));
        l.ctl.lock().unwrap().to_open.push((SocketAddr::V4(SocketAddrV4::new(OURS, 5000)), b"ping".to_vec()));
        let conn = within("accept", move || acceptor.join().unwrap()).unwrap();
        // Another thread reads what the peer sent and answers.
        let io = std::thread::spawn(move || {
            let got = read_exact(rt, conn, 4);
            done(rt.send(conn, b"pong", false)).unwrap();
            got
        });
        assert_eq!(within("read", move || io.join().unwrap()), b"ping");
        // A third thread closes it: the peer sees the answer, then the end of the stream.
        within("close", move || rt.close(conn));
        let ctl = l.ctl.clone();
        within("peer sees pong and FIN", move || loop {
            {
                let c = ctl.lock().unwrap();
                if c.conns[0].eof {
                    return assert_eq!(c.conns[0].received, b"pong");
                }
            }
            // Something must drive the NIC for the peer to run: a non-blocking look does.
            let mut p = [libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
            let _ = rt.poll(&mut p, 1);
        });
        rt.close(lfd);
    });
}

#[test]
fn one_thread_reads_while_another_writes_the_same_socket() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = connect_echo(rt);
        const TOTAL: usize = 512 * 1024;
        let reader = std::thread::spawn(move || read_exact(rt, fd, TOTAL));
        let writer = std::thread::spawn(move || {
            let data: Vec<u8> = (0..TOTAL).map(|i| (i * 7 % 251) as u8).collect();
            for chunk in data.chunks(10_000) {
                assert_eq!(done(rt.send(fd, chunk, false)), Ok(chunk.len()));
            }
            data
        });
        let sent = within("writer", move || writer.join().unwrap());
        let got = within("reader", move || reader.join().unwrap());
        assert!(got == sent, "the echoed stream differs from what was written");
        rt.close(fd);
    });
}

/// Issue 25: application threads that find the runtime's lock taken are counted as waits (the
/// wait histogram `pronghorn stat` and `lat` show). The main thread holds the lock until every
/// one of them is blocked on it.
#[test]
fn threads_contending_for_the_runtime_lock_are_counted_as_waits() {
    const N: u64 = 4;
    let l = lab("dedicated");
    let rt = l.rt;
    let fds: Vec<i32> = (0..N).map(|_| connect_echo(rt)).collect();
    let (_, waits_before) = rt.lock_waits();
    let senders = rt.locked(|| {
        let senders: Vec<_> =
            fds.iter().map(|&fd| std::thread::spawn(move || done(rt.send(fd, b"ping", false)))).collect();
        while rt.lock_waits().0 < N {
            std::thread::yield_now();
        }
        senders
    });
    for s in senders {
        assert_eq!(s.join().unwrap(), Ok(4));
    }
    // The gauge of threads blocked on the lock comes back to 0. Not at once: the stack thread
    // (dedicated mode) takes the lock too, and is counted while it waits behind a sender's
    // hold (seen once: 1 when read right after the joins). A count a thread left behind would
    // never drop.
    within("the waiting gauge back to 0", move || {
        while rt.lock_waits().0 != 0 {
            std::thread::yield_now();
        }
    });
    let (_, waits) = rt.lock_waits();
    assert!(waits - waits_before >= N, "{N} threads blocked on the lock: {} waits", waits - waits_before);
    for fd in fds {
        assert_eq!(read_exact(rt, fd, 4), b"ping");
        rt.close(fd);
    }
}

#[test]
fn an_inline_application_that_never_waits_still_makes_stack_passes() {
    // An event loop whose sockets stay ready reads and writes without ever waiting: it must
    // still take what the NIC received (the rx ring overflows otherwise) every CALLS_PER_PASS
    // calls.
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    let before = rt.wait_stats().inline_polls;
    let rounds = 3;
    for _ in 0..rounds * (CALLS_PER_PASS + 1) {
        assert_eq!(done(rt.send(fd, b"x", false)), Ok(1));
    }
    assert_eq!(
        rt.wait_stats().inline_polls - before,
        u64::from(rounds),
        "stack passes while the application never waited"
    );
    let n = (rounds * (CALLS_PER_PASS + 1)) as usize;
    assert_eq!(read_exact(rt, fd, n), vec![b'x'; n]);
    rt.close(fd);
}

#[test]
fn poll_after_a_read_that_just_passed_and_after_a_wake_to_ready_data_makes_no_pass_of_its_own() {
    // MariaDB's wait: recv() -> EAGAIN (the read made a stack pass) -> poll(). That poll's own
    // pass would find nothing the read's did not, and nor would one after the wake that brought
    // the data: the thread's only passes are the ones it makes as the driver when its sleep ends.
    let l = lab("inline");
    let rt = l.rt;
    let lfd = listener(rt, 5010, false);
    let acceptor = std::thread::spawn(move || done(rt.accept(lfd, 0)).map(|(fd, _)| fd));
    l.ctl.lock().unwrap().to_open.push((SocketAddr::V4(SocketAddrV4::new(OURS, 5010)), Vec::new()));
    let conn = within("accept", move || acceptor.join().unwrap()).unwrap();
    rt.set_nonblock(conn, true);
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 16];
        assert_eq!(done(rt.recv(conn, &mut buf, false, false)), Err(Errno::EAGAIN));
        let (before, skipped_before) = (rt.wait_stats(), rt.wait_stats().skipped_passes);
        tx.send(()).unwrap();
        let mut p = [libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 }];
        let holds_before = rt.lock_holds();
        let n = done(rt.poll(&mut p, -1)).unwrap();
        let holds = rt.lock_holds() - holds_before;
        let after = rt.wait_stats();
        (
            n,
            p[0].revents,
            after.inline_polls - before.inline_polls,
            after.sleeps - before.sleeps,
            after.skipped_passes - skipped_before,
            holds,
        )
    });
    rx.recv().unwrap();
    // The peer sends when the runtime next receives: at the end of one of the reader's sleeps.
    l.ctl.lock().unwrap().conns[0].unsent = b"query".to_vec();
    let (n, revents, passes, sleeps, skipped, holds) = within("poll", move || reader.join().unwrap());
    assert_eq!((n, revents), (1, libc::POLLIN));
    assert!(sleeps >= 1);
    assert_eq!(passes, sleeps, "one pass per sleep (the driver's, as it wakes), none of poll's own");
    assert_eq!(skipped, sleeps + 1, "poll's look before each sleep and after the last wake");
    // Only this thread uses the runtime meanwhile: each hold of the lock is the poll's.
    assert_eq!(holds, sleeps + 1, "the first look, then one hold per wake: it ends the sleep and looks again");
    rt.close(conn);
    rt.close(lfd);
}

#[test]
fn a_connect_to_our_own_listener_completes_and_one_to_a_closed_port_is_refused_at_once() {
    // The shard receives what it sends to its own address (its loopback): before, the SYN left
    // on the NIC for an address nobody else answers, and a blocking connect hung until its
    // retries ran out.
    both_modes(|l| {
        let rt = l.rt;
        let lfd = listener(rt, 6379, false);
        let ours = SocketAddr::V4(SocketAddrV4::new(OURS, 6379));
        let before = rt.routing_stats().accelerated_connect;
        for nonblock in [false, true] {
            let fd = tcp_socket(rt, nonblock);
            let connected = within("connect", move || match done(rt.connect(fd, ours)) {
                Err(Errno(libc::EINPROGRESS)) => {
                    let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                    assert_eq!(done(rt.poll(&mut p, -1)), Ok(1));
                    done(rt.connect(fd, ours))
                }
                r => r,
            });
            assert_eq!(connected, Ok(()), "nonblock {nonblock}");
            let (conn, peer) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
            assert_eq!(peer.ip(), ours.ip());
            done(rt.send(fd, b"PING", false)).unwrap();
            assert_eq!(read_exact(rt, conn, 4), b"PING");
            done(rt.send(conn, b"PONG", false)).unwrap();
            assert_eq!(read_exact(rt, fd, 4), b"PONG");
            rt.close(conn);
            rt.close(fd);
        }
        assert_eq!(rt.routing_stats().accelerated_connect - before, 2);
        // A port of ours nobody holds: the shard's own RST, at once (Linux: ECONNREFUSED).
        let fd = tcp_socket(rt, false);
        let closed = SocketAddr::V4(SocketAddrV4::new(OURS, 7));
        assert_eq!(within("connect", move || done(rt.connect(fd, closed))), Err(Errno(libc::ECONNREFUSED)));
        rt.close(fd);
        rt.close(lfd);
        // Other addresses of the subnet still connect.
        let fd = connect_echo(rt);
        rt.close(fd);
    });
}

#[test]
fn a_blocking_send_to_our_own_listener_larger_than_its_buffer_completes_while_nobody_reads() {
    // The send fills its small buffer, and the flush of that same call carries the data to
    // the listener's side and brings its ACKs back through the shard's loopback: the socket is
    // writable again before the thread sleeps, and the wake for that was its own. It was
    // dropped as "the thread looks again anyway", and the thread slept for ever (the lab's
    // self-connect echo hung so in dedicated mode, stop 23). Nobody reads: the bytes fit the
    // receiver's buffer.
    both_modes(|l| {
        let rt = l.rt;
        let lfd = listener(rt, 6380, false);
        let fd = tcp_socket(rt, false);
        let small = (16 * 1024i32).to_ne_bytes();
        if let Call::Kernel = rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, &small) {
            // Before connect() the socket is the kernel's, as under the shim, which then sets it
            // there; connect() takes the sizes with it.
            // SAFETY: `fd` is the test's socket; `small` is readable for its 4 bytes.
            let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, small.as_ptr().cast(), 4) };
            assert_eq!(r, 0);
        }
        let ours = SocketAddr::V4(SocketAddrV4::new(OURS, 6380));
        within("connect", move || done(rt.connect(fd, ours))).unwrap();
        let (conn, _) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
        let data: Vec<u8> = (0..96 * 1024u32).map(|i| (i * 7 + i / 251) as u8).collect();
        let len = data.len();
        let sent = within("send", move || done(rt.send(fd, &data, false)));
        assert_eq!(sent, Ok(len));
        let got = read_exact(rt, conn, len);
        assert!(got.iter().enumerate().all(|(i, &b)| b == (i as u32 * 7 + i as u32 / 251) as u8), "bytes whole");
        rt.close(fd);
        rt.close(conn);
        rt.close(lfd);
    });
}

/// Issue 23 items 3 and 4: on an interface shared with the kernel, `bind 0.0.0.0` is
/// accelerated, and a client on this host (here a plain kernel socket to 127.0.0.1, as
/// `redis-cli` would be) reaches the listener through the kernel socket beside it: accept()
/// returns it (a kernel fd) as well as the wire's clients, blocking or woken by epoll.
#[test]
fn on_a_shared_interface_a_wildcard_listener_takes_the_wire_and_local_kernel_clients() {
    use std::io::{Read, Write};
    for (drive, port) in [("inline", 47_391u16), ("dedicated", 47_392)] {
        let l = lab_from(drive, "share = true\n", "");
        let rt = l.rt;
        let lfd = tcp_socket(rt, false);
        let any = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
        assert_eq!(done(rt.bind(lfd, any)), Ok(()), "{drive}: a wildcard bind is accelerated");
        done(rt.listen(lfd, 64)).unwrap();
        // The local client, through the kernel, as soon as listen() returned (the NIC opens at
        // the first wait, here epoll_ctl): the listener becomes readable, once accepted not.
        assert!(!rt.serving(), "{drive}: listen leaves the NIC closed");
        let mut local = std::net::TcpStream::connect(("127.0.0.1", port)).expect("the kernel listens beside");
        local.write_all(b"local").unwrap();
        let epfd = epoll_set(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32, 77)).unwrap();
        assert_eq!(within("epoll", move || wait_events(rt, epfd, -1)), [(libc::EPOLLIN as u32, 77)], "{drive}");
        let (kfd, peer) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
        assert_eq!(peer.ip(), std::net::IpAddr::V4(Ipv4Addr::LOCALHOST));
        // SAFETY: `kfd` is the kernel socket accept returned; it is ours to read, write and close.
        let mut kernel_conn = unsafe { <std::net::TcpStream as std::os::fd::FromRawFd>::from_raw_fd(kfd) };
        let mut got = [0u8; 5];
        kernel_conn.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"local");
        kernel_conn.write_all(b"+PONG").unwrap();
        local.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+PONG");
        assert_eq!(within("epoll", move || wait_events(rt, epfd, 0)), [], "{drive}: nothing more waits");
        // The wire's client, through the shard, on the same listener.
        l.ctl.lock().unwrap().to_open.push((SocketAddr::V4(SocketAddrV4::new(OURS, port)), b"remote".to_vec()));
        let (conn, peer) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
        assert_eq!(peer.ip(), std::net::IpAddr::V4(PEER));
        assert_eq!(read_exact(rt, conn, 6), b"remote");
        let stats = rt.routing_stats();
        assert_eq!((stats.kernel_accepted, stats.accepted, stats.kernel_bind), (1, 1, 0), "{drive}");
        rt.close(conn);
        rt.close(lfd);
        drop(kernel_conn);
        // Closed, the kernel socket is gone with it.
        assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "{drive}: the kernel still listens");
    }
}

/// An AF_INET6 listener on our IPv4 address (bound to it IPv4-mapped) reports an IPv4 client,
/// and its own address on the connection, IPv4-mapped, as Linux's `inet6_getname` does:
/// accept(), getpeername() and getsockname() on an AF_INET6 socket never give an AF_INET address.
#[test]
fn an_ipv6_socket_reports_ipv4_addresses_as_mapped() {
    let port = 47_393u16;
    let l = lab_from("inline", "", "");
    let rt = l.rt;
    let ty = libc::SOCK_STREAM;
    // SAFETY: socket takes no memory.
    let lfd = unsafe { libc::socket(libc::AF_INET6, ty, 0) };
    assert!(lfd >= 0);
    rt.socket_created(lfd, libc::AF_INET6, ty, 0);
    let mapped = |ip: Ipv4Addr, port| SocketAddr::V6(std::net::SocketAddrV6::new(ip.to_ipv6_mapped(), port, 0, 0));
    assert_eq!(done(rt.bind(lfd, mapped(OURS, port))), Ok(()));
    assert_eq!(done(rt.sockname(lfd, false)), Ok(mapped(OURS, port)), "getsockname of the listener");
    done(rt.listen(lfd, 64)).unwrap();
    l.ctl.lock().unwrap().to_open.push((SocketAddr::V4(SocketAddrV4::new(OURS, port)), b"hello".to_vec()));
    let (conn, peer) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
    assert_eq!(peer, mapped(PEER, peer.port()), "accept");
    assert_eq!(done(rt.sockname(conn, true)), Ok(peer), "getpeername");
    assert_eq!(done(rt.sockname(conn, false)), Ok(mapped(OURS, port)), "getsockname");
    assert_eq!(read_exact(rt, conn, 5), b"hello");
    // An AF_INET socket keeps reporting AF_INET addresses.
    let fd = connect_echo(rt);
    assert!(matches!(done(rt.sockname(fd, true)), Ok(SocketAddr::V4(_))));
    rt.close(fd);
    rt.close(conn);
    rt.close(lfd);
}

#[test]
fn a_blocked_reader_wakes_with_ebadf_when_another_thread_closes_its_socket() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = connect_echo(rt);
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            tx.send(()).unwrap();
            let mut b = [0u8; 16];
            done(rt.recv(fd, &mut b, false, false))
        });
        rx.recv().unwrap();
        within("reader parked", move || {
            while rt.parked() < 1 {
                std::thread::yield_now();
            }
        });
        rt.close(fd);
        assert_eq!(within("reader", move || reader.join().unwrap()), Err(Errno::EBADF));
    });
}

fn epoll_set(rt: &Accel<PeerNic>) -> i32 {
    // SAFETY: epoll_create1 takes no memory.
    let epfd = unsafe { libc::epoll_create1(0) };
    assert!(epfd >= 0 && rt.epoll_created(epfd));
    epfd
}

fn wait_events(rt: &'static Accel<PeerNic>, epfd: i32, timeout_ms: i32) -> Vec<(u32, u64)> {
    let mut out = [libc::epoll_event { events: 0, u64: 0 }; 16];
    let n = done(rt.epoll_wait(epfd, &mut out, timeout_ms)).unwrap();
    out[..n].iter().map(|e| (e.events, e.u64)).collect()
}

#[test]
fn epoll_ctl_from_another_thread_wakes_a_waiter() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let quiet = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, quiet, libc::EPOLLIN as u32, 1)).unwrap();
        let (tx, rx) = mpsc::channel();
        let waiter = std::thread::spawn(move || {
            tx.send(()).unwrap();
            wait_events(rt, epfd, -1)
        });
        rx.recv().unwrap();
        // A connection that is writable from the start, added by this thread.
        let other = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, other, libc::EPOLLOUT as u32, 2)).unwrap();
        let evs = within("epoll_wait", move || waiter.join().unwrap());
        assert_eq!(evs, vec![(libc::EPOLLOUT as u32, 2)]);
        for fd in [quiet, other, epfd] {
            rt.close(fd);
        }
    });
}

/// A thread waiting on the set (`epfd`) until another thread adds members: returns what its
/// blocking epoll_wait reported, once it is seen asleep.
fn waiter_asleep(rt: &'static Accel<PeerNic>, epfd: i32) -> std::thread::JoinHandle<Vec<(u32, u64)>> {
    let waiter = std::thread::spawn(move || wait_events(rt, epfd, -1));
    within("the waiter sleeps", move || {
        while rt.epoll_sleepers(epfd) == 0 {
            std::thread::yield_now();
        }
    });
    waiter
}

/// MariaDB's thread pool: its listener thread waits on a set with no member yet, and other
/// threads add each connection (after its login). The wait must hear of them: it used to go
/// to the kernel's epoll_wait, which knows nothing of accelerated sockets, and the server
/// never read a query.
#[test]
fn a_wait_on_an_empty_set_wakes_for_an_accelerated_member_added_by_another_thread() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let waiter = waiter_asleep(rt, epfd);
        // Writable from the start.
        let fd = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLOUT as u32, 9)).unwrap();
        assert_eq!(within("epoll_wait", move || waiter.join().unwrap()), [(libc::EPOLLOUT as u32, 9)]);
        // One not ready when added, readable later.
        let quiet = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0)).unwrap();
        let waiter = waiter_asleep(rt, epfd);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, quiet, libc::EPOLLIN as u32, 10)).unwrap();
        done(rt.send(quiet, b"echo", false)).unwrap();
        assert_eq!(within("epoll_wait", move || waiter.join().unwrap()), [(libc::EPOLLIN as u32, 10)]);
        for fd in [fd, quiet, epfd] {
            rt.close(fd);
        }
    });
}

/// A waiter asleep on a set without kernel members does not watch the kernel's set: the
/// first kernel member added by another thread wakes it to watch it too.
#[test]
fn a_wait_wakes_for_a_kernel_member_added_by_another_thread() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let quiet = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, quiet, libc::EPOLLIN as u32, 1)).unwrap();
        let pipe = kernel_pipe();
        let waiter = waiter_asleep(rt, epfd);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, pipe[0], libc::EPOLLIN as u32, 2)).unwrap();
        // SAFETY: one byte of a static buffer.
        assert_eq!(unsafe { libc::write(pipe[1], b"k".as_ptr().cast(), 1) }, 1);
        assert_eq!(within("epoll_wait", move || waiter.join().unwrap()), [(libc::EPOLLIN as u32, 2)]);
        close_kernel_pipe(pipe);
        for fd in [quiet, epfd] {
            rt.close(fd);
        }
    });
}

#[test]
fn epoll_reports_only_what_is_ready_in_the_order_it_became_ready() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let fds: Vec<i32> = (0..6).map(|_| connect_echo(rt)).collect();
        for (i, &fd) in fds.iter().enumerate() {
            done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, i as u64)).unwrap();
        }
        assert_eq!(wait_events(rt, epfd, 0), vec![], "nothing was sent yet");
        // Data on 4, then on 1: reported 4 first, and nothing else.
        done(rt.send(fds[4], b"a", false)).unwrap();
        let first = within("first", move || wait_events(rt, epfd, -1));
        assert_eq!(first, vec![(libc::EPOLLIN as u32, 4)]);
        done(rt.send(fds[1], b"b", false)).unwrap();
        let both = within("second", move || {
            let mut all = Vec::new();
            while all.len() < 2 {
                all = wait_events(rt, epfd, -1);
            }
            all
        });
        // Level-triggered: 4 is still unread, so it stays ready, ahead of 1.
        assert_eq!(both, vec![(libc::EPOLLIN as u32, 4), (libc::EPOLLIN as u32, 1)]);
        for fd in fds {
            rt.close(fd);
        }
        rt.close(epfd);
    });
}

/// `pronghorn stat`'s epoll_waits and epoll_events count the calls answered and the accelerated
/// members they reported, so that their ratio is the ready connections one wait hands over.
#[test]
fn epoll_counts_its_waits_and_the_events_they_reported() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let fds: Vec<i32> = (0..3).map(|_| connect_echo(rt)).collect();
        for (i, &fd) in fds.iter().enumerate() {
            done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, i as u64)).unwrap();
        }
        let before = rt.wait_stats();
        let (mut calls, mut reported) = (1, wait_events(rt, epfd, 0).len());
        assert_eq!(reported, 0, "nothing was sent yet");
        done(rt.send(fds[0], b"a", false)).unwrap();
        done(rt.send(fds[2], b"b", false)).unwrap();
        // Until one wait reports both (an echo may come back before the other).
        let (more_calls, more) = within("both echoes", move || {
            let (mut calls, mut reported) = (0, 0);
            loop {
                calls += 1;
                let got = wait_events(rt, epfd, -1).len();
                reported += got;
                if got == 2 {
                    return (calls, reported);
                }
            }
        });
        calls += more_calls;
        reported += more;
        let after = rt.wait_stats();
        assert_eq!(after.epoll_waits - before.epoll_waits, calls);
        assert_eq!(after.epoll_events - before.epoll_events, reported as u64);
        for fd in fds {
            rt.close(fd);
        }
        rt.close(epfd);
    });
}

/// Each fd at most once per epoll_wait, whatever happened to it while it was on the ready list
/// (Linux's rdllist holds an epitem once). A member removed while queued (EPOLL_CTL_DEL, or a
/// close) left its fd on the ready list; added again (the same fd, or a new socket that got its
/// number), it was queued a second time and a wait reported it twice: a server that closed the
/// socket at the first event got the second for a closed fd.
#[test]
fn epoll_reports_an_fd_once_per_wait_after_it_left_the_set_while_ready_and_came_back() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let out = libc::EPOLLOUT as u32;
        // Removed and added again while ready (writable from the start, so queued at once).
        let fd = connect_echo(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, out, 1)).unwrap();
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_DEL, fd, 0, 0)).unwrap();
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, out, 2)).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), vec![(out, 2)]);
        // Level-triggered, still writable: once again in the next wait, not twice.
        assert_eq!(wait_events(rt, epfd, 0), vec![(out, 2)]);
        // Closed while ready, and its number taken by another socket (dup2 onto it, so that no
        // other test's thread can take the number meanwhile), added again.
        let edge = (libc::EPOLLOUT | libc::EPOLLET) as u32;
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, edge, 3)).unwrap();
        rt.close(fd);
        let other = connect_echo(rt);
        // SAFETY: dup2 takes no memory; both fds are this test's.
        assert_eq!(unsafe { libc::dup2(other, fd) }, fd);
        rt.duplicated(other, fd);
        rt.close(other);
        // SAFETY: `other`'s number is this test's, closed once.
        assert_eq!(unsafe { libc::close(other) }, 0);
        let reused = fd;
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, reused, edge, 4)).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), vec![(out, 4)]);
        assert_eq!(wait_events(rt, epfd, 0), vec![], "edge-triggered: reported once");
        // A oneshot member re-armed with EPOLL_CTL_MOD while it is still queued.
        let once = (libc::EPOLLOUT | libc::EPOLLONESHOT) as u32;
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_MOD, reused, once, 5)).unwrap();
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_MOD, reused, once, 6)).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), vec![(out, 6)]);
        assert_eq!(wait_events(rt, epfd, 0), vec![], "oneshot: disabled until re-armed");
        rt.close(reused);
        rt.close(epfd);
    });
}

#[test]
fn edge_triggered_and_oneshot_with_several_waiters() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let fd = connect_echo(rt);
        let ev = (libc::EPOLLIN | libc::EPOLLET | libc::EPOLLONESHOT) as u32;
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, ev, 9)).unwrap();
        let (tx, rx) = mpsc::channel();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    tx.send(()).unwrap();
                    // Bounded: with ONESHOT only one of them may see the event.
                    wait_events(rt, epfd, 1500)
                })
            })
            .collect();
        for _ in 0..3 {
            rx.recv().unwrap();
        }
        done(rt.send(fd, b"x", false)).unwrap();
        let all = within("waiters", move || waiters.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>());
        let reported: Vec<_> = all.into_iter().flatten().collect();
        assert_eq!(reported, vec![(libc::EPOLLIN as u32, 9)], "ONESHOT reports once, to one waiter");
        // Disabled until re-armed, although still readable.
        assert_eq!(wait_events(rt, epfd, 0), vec![]);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_MOD, fd, (libc::EPOLLIN | libc::EPOLLET) as u32, 9)).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), vec![(libc::EPOLLIN as u32, 9)]);
        // Edge-triggered: no new data, no new report.
        assert_eq!(wait_events(rt, epfd, 0), vec![]);
        rt.close(fd);
        rt.close(epfd);
    });
}

#[test]
fn a_poll_of_kernel_fds_only_goes_to_the_kernel_without_the_lock_or_a_stack_pass() {
    // As ppoll's and select's hooks: a set the kernel alone can answer is the kernel's.
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    let pipe = kernel_pipe();
    let (passes, holds) = (rt.wait_stats().inline_polls, rt.lock_holds());
    for timeout in [0, 1] {
        let mut p = [libc::pollfd { fd: pipe[0], events: libc::POLLIN, revents: 0 }];
        assert!(matches!(rt.poll(&mut p, timeout), Call::Kernel));
    }
    assert_eq!(rt.wait_stats().inline_polls - passes, 0, "stack passes for kernel fds");
    assert_eq!(rt.lock_holds() - holds, 0, "holds of the lock for kernel fds");
    // One of pronghorn's among them: the runtime answers, with its pass.
    let mut p = [
        libc::pollfd { fd: pipe[0], events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd, events: libc::POLLOUT, revents: 0 },
    ];
    assert_eq!(done(rt.poll(&mut p, 0)), Ok(1));
    assert_eq!(rt.wait_stats().inline_polls - passes, 1);
    close_kernel_pipe(pipe);
    rt.close(fd);
}

#[test]
fn a_write_left_for_the_next_wait_goes_out_before_a_wait_on_kernel_fds_only() {
    // Inline, a non-blocking socket's write stays queued for the program's next poll or
    // epoll_wait (an event loop's replies leave in one burst). A program whose next wait is on
    // kernel fds only (a pipe from a worker) must not keep it there: the peer may be what it
    // waits for.
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    rt.set_nonblock(fd, true);
    let pipe = kernel_pipe();
    let sent = || rt.shard_stats().iter().map(|s| s.tcp_tx_segments).sum::<u64>();
    let before = sent();
    assert_eq!(done(rt.send(fd, b"held", false)), Ok(4));
    assert_eq!(sent() - before, 0, "the write is left for the next wait (what this test is about)");
    let mut p = [libc::pollfd { fd: pipe[0], events: libc::POLLIN, revents: 0 }];
    assert!(matches!(rt.poll(&mut p, 0), Call::Kernel));
    assert_eq!(sent() - before, 1, "the segment goes out before the kernel's wait");
    // Nothing held any more: the next such wait takes no lock.
    let holds = rt.lock_holds();
    assert!(matches!(rt.poll(&mut p, 0), Call::Kernel));
    assert_eq!(rt.lock_holds() - holds, 0);
    rt.set_nonblock(fd, false);
    assert_eq!(read_exact(rt, fd, 4), b"held");
    close_kernel_pipe(pipe);
    rt.close(fd);
}

#[test]
fn poll_wakes_for_a_kernel_fd_and_for_an_accelerated_one() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = connect_echo(rt);
        let pipe = kernel_pipe();
        let (r, w) = (pipe[0], pipe[1]);
        let poller = move || {
            let mut p = [
                libc::pollfd { fd: r, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            ];
            let n = done(rt.poll(&mut p, -1)).unwrap();
            (n, p[0].revents, p[1].revents)
        };
        // The kernel fd first.
        let (tx, rx) = mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(()).unwrap();
            poller()
        });
        rx.recv().unwrap();
        // SAFETY: one byte of a static buffer.
        assert_eq!(unsafe { libc::write(w, b"k".as_ptr().cast(), 1) }, 1);
        assert_eq!(within("poll (pipe)", move || h.join().unwrap()), (1, libc::POLLIN, 0));
        let mut k = [0u8; 1];
        // SAFETY: the kernel writes at most one byte into `k`, which holds one.
        assert_eq!(unsafe { libc::read(r, k.as_mut_ptr().cast(), 1) }, 1);
        // Then the accelerated one.
        let (tx, rx) = mpsc::channel();
        let h = std::thread::spawn(move || {
            tx.send(()).unwrap();
            poller()
        });
        rx.recv().unwrap();
        done(rt.send(fd, b"a", false)).unwrap();
        assert_eq!(within("poll (socket)", move || h.join().unwrap()), (1, 0, libc::POLLIN));
        rt.close(fd);
        // SAFETY: the pipe's two fds, made above, each closed once.
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    });
}

#[test]
fn auto_switches_to_a_stack_thread_when_two_threads_block() {
    let l = lab("auto");
    let rt = l.rt;
    let a = connect_echo(rt);
    assert!(!rt.wait_stats().dedicated, "one thread waiting at a time: still inline");
    let b = connect_echo(rt);
    let (tx, rx) = mpsc::channel();
    let readers: Vec<_> = [a, b]
        .into_iter()
        .map(|fd| {
            let tx = tx.clone();
            std::thread::spawn(move || {
                tx.send(()).unwrap();
                read_exact(rt, fd, 3)
            })
        })
        .collect();
    rx.recv().unwrap();
    rx.recv().unwrap();
    // The second thread to park finds the first parked and switches.
    within("both parked", move || {
        while rt.parked() < 2 {
            std::thread::yield_now();
        }
    });
    done(rt.send(a, b"one", false)).unwrap();
    done(rt.send(b, b"two", false)).unwrap();
    let got = within("readers", move || readers.into_iter().map(|h| h.join().unwrap()).collect::<Vec<_>>());
    assert_eq!(got, vec![b"one".to_vec(), b"two".to_vec()]);
    // With one CPU to run on, auto stays inline (a stack thread would only share that CPU).
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(rt.wait_stats().dedicated, cpus >= 2, "two threads blocked at once, {cpus} CPUs");
}

/// A thread asleep on an epoll set with kernel fds only (DPDK's interrupt thread, a program's
/// timer thread) waits for nothing the stack does: it is not parked, does not drive, and a
/// second thread blocking on a socket does not make `auto` start a stack thread. The
/// interrupt thread, asleep so for good, once turned an unpinned Redis dedicated.
#[test]
fn a_wait_on_kernel_fds_only_is_not_a_blocked_thread_of_the_stack() {
    let l = lab("auto");
    let rt = l.rt;
    let epfd = epoll_set(rt);
    let pipe = kernel_pipe();
    done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, pipe[0], libc::EPOLLIN as u32, 7)).unwrap();
    let outside = waiter_asleep(rt, epfd);
    assert_eq!(rt.parked(), 0, "a wait on kernel fds only is not parked on the stack");
    let fd = connect_echo(rt);
    let reader = std::thread::spawn(move || read_exact(rt, fd, 3));
    within("the reader parks", move || {
        while rt.parked() < 1 {
            std::thread::yield_now();
        }
    });
    done(rt.send(fd, b"one", false)).unwrap();
    assert_eq!(within("the reader", move || reader.join().unwrap()), b"one");
    assert!(!rt.wait_stats().dedicated, "one thread blocked on the stack at a time: still inline");
    // SAFETY: one byte of a static buffer into the pipe made above.
    assert_eq!(unsafe { libc::write(pipe[1], b"k".as_ptr().cast(), 1) }, 1);
    assert_eq!(within("the kernel wait", move || outside.join().unwrap()), [(libc::EPOLLIN as u32, 7)]);
    close_kernel_pipe(pipe);
    for fd in [fd, epfd] {
        rt.close(fd);
    }
}

/// How an accept loop waits for its next connection.
#[derive(Clone, Copy, Debug)]
enum AcceptWait {
    /// A blocking accept().
    Accept,
    /// poll() on the listener, then accept() (MariaDB's main thread).
    Poll,
    /// epoll_wait() on a set of the listener alone, then accept().
    Epoll,
}

/// The accept loop's next connection, waited for as `how` says.
fn accept_after(rt: &'static Accel<PeerNic>, lfd: i32, how: AcceptWait) -> i32 {
    match how {
        AcceptWait::Accept => {}
        AcceptWait::Poll => {
            let mut p = [libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
            assert_eq!(done(rt.poll(&mut p, -1)), Ok(1));
        }
        AcceptWait::Epoll => {
            let epfd = epoll_set(rt);
            done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32, 1)).unwrap();
            assert_eq!(wait_events(rt, epfd, -1), [(libc::EPOLLIN as u32, 1)]);
            rt.close(epfd);
        }
    }
    done(rt.accept(lfd, 0)).unwrap().0
}

/// The rx fd of a lab made with [`lab_with_rx_fd`]: an eventfd the test rings ([`ring_rx`])
/// when it has the peer send.
fn rx_eventfd() -> i32 {
    // SAFETY: eventfd takes no memory.
    let efd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    assert!(efd >= 0);
    efd
}

fn ring_rx(efd: i32) {
    // SAFETY: 8 bytes of a local into the test's eventfd.
    assert_eq!(unsafe { libc::write(efd, (&1u64 as *const u64).cast(), 8) }, 8);
}

/// The peer connects to `local` (the listener `lfd`); returns the accepted connection,
/// non-blocking.
fn peer_connects(l: &Lab, lfd: i32, local: SocketAddr, efd: i32) -> i32 {
    let rt = l.rt;
    let acceptor = std::thread::spawn(move || done(rt.accept(lfd, 0)).unwrap().0);
    l.ctl.lock().unwrap().to_open.push((local, Vec::new()));
    ring_rx(efd);
    let fd = within("accept", move || acceptor.join().unwrap());
    rt.set_nonblock(fd, true);
    fd
}

fn until_parked(rt: &'static Accel<PeerNic>, n: u32) {
    within("threads park", move || {
        while rt.parked() < n {
            std::thread::yield_now();
        }
    });
}

/// A thread that waits for new connections only (MariaDB's main thread) sleeps for good: if it
/// kept the driver role, every request that came while the connections' threads slept would
/// wake it first, and its pass the thread the request was for (two wakeups, stop 50). A thread
/// that waits on a connection takes the role from it, and when that thread leaves the role goes
/// back to the accept loop, both without waking it. Frames then wake the accept loop again:
/// it gets the next connection.
#[test]
fn an_accept_loop_gives_the_driver_role_to_a_thread_that_waits_on_a_connection() {
    for how in [AcceptWait::Accept, AcceptWait::Poll, AcceptWait::Epoll] {
        let efd = rx_eventfd();
        let ring = move || ring_rx(efd);
        let l = lab_with_rx_fd("inline", efd);
        let rt = l.rt;
        let lfd = listener(rt, 5040, false);
        let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5040));
        let conn = peer_connects(&l, lfd, local, efd);
        let before = rt.wait_stats();

        let accept_loop = std::thread::spawn(move || accept_after(rt, lfd, how));
        until_parked(rt, 1);
        assert_eq!(rt.driver_role(), DriverRole::AcceptLoop, "{how:?}: asleep, nobody else waits");

        let reader = std::thread::spawn(move || {
            let mut p = [libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 }];
            (done(rt.poll(&mut p, -1)), p[0].revents)
        });
        until_parked(rt, 2);
        assert_eq!(rt.driver_role(), DriverRole::Other, "{how:?}: the connection's waiter drives");
        let taken = rt.wait_stats().roles_taken_from_accept_loop - before.roles_taken_from_accept_loop;
        assert_eq!(taken, 1, "{how:?}");

        l.ctl.lock().unwrap().conns[0].unsent = b"query".to_vec();
        ring();
        assert_eq!(within("the reader", move || reader.join().unwrap()), (Ok(1), libc::POLLIN));
        assert_eq!(rt.driver_role(), DriverRole::AcceptLoop, "{how:?}: the role went back");
        let after = rt.wait_stats();
        assert_eq!(after.roles_given_back_to_accept_loop - before.roles_given_back_to_accept_loop, 1, "{how:?}");
        assert_eq!(rt.parked(), 1, "{how:?}: the accept loop sleeps on");

        l.ctl.lock().unwrap().to_open.push((local, Vec::new()));
        ring();
        let second = within("the accept loop's next connection", move || accept_loop.join().unwrap());
        assert_eq!(read_exact(rt, conn, 5), b"query");
        for fd in [second, conn, lfd] {
            rt.close(fd);
        }
        // SAFETY: the test's eventfd, closed once (the runtime only reads it).
        unsafe { libc::close(efd) };
    }
}

/// A thread waits on its connection, poll() as MariaDB's.
fn poll_in(rt: &'static Accel<PeerNic>, fd: i32) -> std::thread::JoinHandle<(Result<usize, Errno>, i16)> {
    std::thread::spawn(move || {
        let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
        (done(rt.poll(&mut p, -1)), p[0].revents)
    })
}

/// Among threads that stand by (a thread per connection under load) the next frame is likely
/// another's than the new waiter's: the role stays with the accept loop, as it did before
/// lending, and moves cost nothing there. Only a waiter alone takes it.
#[test]
fn an_accept_loop_keeps_the_driver_role_while_other_threads_stand_by() {
    let efd = rx_eventfd();
    let ring = move || ring_rx(efd);
    let l = lab_with_rx_fd("inline", efd);
    let rt = l.rt;
    let lfd = listener(rt, 5041, false);
    let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5041));
    let conns: Vec<i32> = (0..2).map(|_| peer_connects(&l, lfd, local, efd)).collect();
    let before = rt.wait_stats();
    let accept_loop = std::thread::spawn(move || accept_after(rt, lfd, AcceptWait::Poll));
    until_parked(rt, 1);
    let first = poll_in(rt, conns[0]);
    until_parked(rt, 2);
    assert_eq!(rt.driver_role(), DriverRole::Other, "a waiter alone takes the role");
    let second = poll_in(rt, conns[1]);
    until_parked(rt, 3);
    l.ctl.lock().unwrap().conns[0].unsent = b"one".to_vec();
    ring();
    assert_eq!(within("the first", move || first.join().unwrap()), (Ok(1), libc::POLLIN));
    assert_eq!(read_exact(rt, conns[0], 3), b"one");
    // The role went back to the accept loop (unless its sleep ran out meanwhile: then it slept
    // again beside the second waiter as any thread would, and the role was never its own to
    // take). Either way the first waiter, waiting again beside the second, takes nothing.
    let again = poll_in(rt, conns[0]);
    until_parked(rt, 3);
    let taken = rt.wait_stats().roles_taken_from_accept_loop - before.roles_taken_from_accept_loop;
    assert_eq!(taken, 1, "a thread stands by: the new waiter does not take the role");
    {
        let mut ctl = l.ctl.lock().unwrap();
        ctl.conns[0].unsent = b"two".to_vec();
        ctl.conns[1].unsent = b"three".to_vec();
        ctl.to_open.push((local, Vec::new()));
    }
    ring();
    assert_eq!(within("the first again", move || again.join().unwrap()), (Ok(1), libc::POLLIN));
    assert_eq!(within("the second", move || second.join().unwrap()), (Ok(1), libc::POLLIN));
    let third = within("the accept loop's next connection", move || accept_loop.join().unwrap());
    for fd in [third, conns[0], conns[1], lfd] {
        rt.close(fd);
    }
    // SAFETY: the test's eventfd, closed once (the runtime only reads it).
    unsafe { libc::close(efd) };
}

#[test]
fn listen_before_the_nic_opens_waits_for_the_first_wait_to_open_it() {
    both_modes(|l| {
        let rt = l.rt;
        let lfd = listener(rt, 5100, false);
        assert!(!rt.serving(), "bind and listen leave the NIC closed");
        let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5100));
        assert_eq!(done(rt.sockname(lfd, false)), Ok(local));
        let mut v = [0u8; 4];
        assert_eq!(done(rt.getsockopt(lfd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN, &mut v)), Ok(4));
        assert_eq!(i32::from_ne_bytes(v), 1, "SO_ACCEPTCONN of a deferred listener");
        // accept is the first wait: the NIC opens, the listener starts, the peer gets in.
        let acceptor = std::thread::spawn(move || done(rt.accept(lfd, 0)).map(|(fd, _)| fd));
        l.ctl.lock().unwrap().to_open.push((local, b"hi".to_vec()));
        let conn = within("accept", move || acceptor.join().unwrap()).unwrap();
        assert!(rt.serving());
        assert_eq!(within("read", move || read_exact(rt, conn, 2)), b"hi");
        rt.close(conn);
        rt.close(lfd);
    });
}

#[test]
fn a_child_forked_before_the_nic_opened_serves_the_inherited_listener_itself() {
    let l = lab("inline");
    let rt = l.rt;
    let lfd = listener(rt, 5200, false);
    let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5200));
    let hold = rt.fork_prepare();
    assert!(hold.child_keeps(), "the NIC is not open yet");
    // SAFETY: the child runs the test's closure and leaves with _exit (no destructors);
    // glibc's fork keeps malloc usable in the child, and `hold` (fork_prepare) keeps the
    // runtime's lock free across the fork.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // The child: its copy of the runtime opens its own NIC (here: its own copy of the
        // in-memory pair and peer) at the first wait; the peer connects and is echoed.
        drop(hold);
        let ctl = l.ctl.clone();
        let served = within("child serves", move || {
            ctl.lock().unwrap().to_open.push((local, b"from the child".to_vec()));
            let (conn, _) = done(rt.accept(lfd, 0)).ok()?;
            let got = read_exact(rt, conn, 14);
            rt.close(conn);
            Some(got)
        });
        let ok = served.as_deref() == Some(&b"from the child"[..]) && rt.serving();
        // SAFETY: _exit takes no memory and runs no destructors or atexit handlers.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    drop(hold);
    assert!(pid > 0);
    let status = within("child exits", move || {
        let mut status = 0;
        // SAFETY: the kernel writes the status into `status`, which outlives the call.
        assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
        status
    });
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child status {status:#x}");
    assert!(!rt.serving(), "the parent never opened its NIC");
    rt.close(lfd);
}

#[test]
fn a_child_forked_after_the_nic_opened_does_not_keep_the_runtime() {
    let l = lab("inline");
    let fd = connect_echo(l.rt);
    assert!(!l.rt.fork_prepare().child_keeps(), "the port cannot be shared with a child");
    l.rt.close(fd);
}

/// Issue 12: a server that answers and closes at once with input still unread (Redis on a
/// protocol error) resets the connection, as Linux does; what it wrote before close() must
/// reach the peer before the RST (on Linux it has left by then).
#[test]
fn data_written_before_a_resetting_close_reaches_the_peer_first() {
    let l = lab("inline");
    let rt = l.rt;
    let lfd = listener(rt, 5300, false);
    let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5300));
    let acceptor = std::thread::spawn(move || done(rt.accept(lfd, 0)).map(|(fd, _)| fd));
    l.ctl.lock().unwrap().to_open.push((local, b"junk that is never read".to_vec()));
    let conn = within("accept", move || acceptor.join().unwrap()).unwrap();
    assert_eq!(within("read", move || read_exact(rt, conn, 4)), b"junk");
    assert_eq!(done(rt.send(conn, b"-ERR protocol error\r\n", true)), Ok(21));
    rt.close(conn);
    let ctl = l.ctl.clone();
    within("the peer gets the answer", move || loop {
        if ctl.lock().unwrap().conns[0].received == b"-ERR protocol error\r\n" {
            return;
        }
        let mut p = [libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
        let _ = rt.poll(&mut p, 1);
    });
    rt.close(lfd);
}

/// Issue 12, Linux's connect() on a non-blocking socket: EINPROGRESS, EALREADY while the
/// handshake runs, 0 from the call that finds it done, EISCONN after that.
#[test]
fn a_second_connect_reports_the_handshake_once_then_eisconn() {
    let l = lab("inline");
    let rt = l.rt;
    let fd = tcp_socket(rt, true);
    assert_eq!(done(rt.connect(fd, echo_addr())), Err(Errno(libc::EINPROGRESS)));
    // Nothing has driven the NIC yet: the peer has not answered.
    assert_eq!(done(rt.connect(fd, echo_addr())), Err(Errno(libc::EALREADY)));
    within("connected", move || {
        let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
        assert_eq!(done(rt.poll(&mut p, -1)), Ok(1));
    });
    assert_eq!(done(rt.connect(fd, echo_addr())), Ok(()));
    assert_eq!(done(rt.connect(fd, echo_addr())), Err(Errno::EISCONN));
    rt.close(fd);
}

/// Issue 12, SO_REUSEPORT: sockets that all set it bind one address and their listeners share
/// its connections; a socket without it gets EADDRINUSE while any of them holds the address.
#[test]
fn reuseport_listeners_share_an_address_and_its_connections() {
    let l = lab("inline");
    let rt = l.rt;
    let local = SocketAddr::V4(SocketAddrV4::new(OURS, 5400));
    let reuseport_socket = || {
        let fd = tcp_socket(rt, true);
        // Still a kernel socket: the runtime keeps the option and passes the call on (Kernel).
        let one = 1i32.to_ne_bytes();
        assert!(matches!(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, &one), Call::Kernel));
        fd
    };
    let (a, b) = (reuseport_socket(), reuseport_socket());
    for fd in [a, b] {
        done(rt.bind(fd, local)).unwrap();
        done(rt.listen(fd, 64)).unwrap();
    }
    let plain = tcp_socket(rt, true);
    assert_eq!(done(rt.bind(plain, local)), Err(Errno::EADDRINUSE));
    l.ctl.lock().unwrap().to_open.extend((0..24).map(|_| (local, b"x".to_vec())));
    let (mut on_a, mut on_b) = (0, 0);
    within("24 connections accepted", move || {
        while on_a + on_b < 24 {
            let mut p = [
                libc::pollfd { fd: a, events: libc::POLLIN, revents: 0 },
                libc::pollfd { fd: b, events: libc::POLLIN, revents: 0 },
            ];
            done(rt.poll(&mut p, -1)).unwrap();
            while let Ok((c, _)) = done(rt.accept(a, 0)) {
                on_a += 1;
                rt.close(c);
            }
            while let Ok((c, _)) = done(rt.accept(b, 0)) {
                on_b += 1;
                rt.close(c);
            }
        }
        assert!(on_a > 0 && on_b > 0, "spread over both listeners: {on_a} / {on_b}");
    });
    rt.close(a);
    assert_eq!(done(rt.bind(plain, local)), Err(Errno::EADDRINUSE), "b still holds it");
    rt.close(b);
    assert_eq!(done(rt.bind(plain, local)), Ok(()));
    rt.close(plain);
}

extern "C" fn note_signal(_: libc::c_int) {}

fn install_handler(sig: libc::c_int, flags: libc::c_int) {
    // SAFETY: sigaction is integers, a sigset and a handler address: all zeroes is valid.
    let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
    sa.sa_sigaction = note_signal as extern "C" fn(libc::c_int) as usize;
    sa.sa_flags = flags;
    // SAFETY: `sa` is a valid sigaction whose handler is an `extern "C" fn(c_int)` that
    // lives as long as the program and does nothing (async-signal-safe).
    assert_eq!(unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) }, 0);
}

/// Issue 12, signal(7): a blocking read whose sleep a signal handler interrupts is restarted
/// when the handler has SA_RESTART, and fails with EINTR when it does not.
#[test]
fn a_signal_restarts_a_blocking_read_with_sa_restart_and_interrupts_it_without() {
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    let reader = |rt: &'static Accel<PeerNic>| {
        let (tid_tx, tid_rx) = mpsc::channel();
        let (res_tx, res_rx) = mpsc::channel();
        std::thread::spawn(move || {
            // SAFETY: pthread_self takes no memory and cannot fail.
            tid_tx.send(unsafe { libc::pthread_self() }).unwrap();
            let mut buf = [0u8; 16];
            let _ = res_tx.send(done(rt.recv(fd, &mut buf, false, false)).map(|n| buf[..n].to_vec()));
        });
        let tid = tid_rx.recv().unwrap();
        within("the reader sleeps", move || {
            while rt.parked() == 0 {
                std::thread::yield_now();
            }
        });
        (tid, res_rx)
    };
    // SA_RESTART: the signals come and go, the read goes on and returns the data.
    install_handler(libc::SIGUSR2, libc::SA_RESTART);
    let (tid, result) = reader(rt);
    for _ in 0..5 {
        // SAFETY: `tid` is the reader thread, alive until it sends its result; its
        // SIGUSR2 handler is installed above.
        unsafe { libc::pthread_kill(tid, libc::SIGUSR2) };
        assert!(result.recv_timeout(Duration::from_millis(20)).is_err(), "the read ended on a SA_RESTART signal");
    }
    assert_eq!(done(rt.send(fd, b"after", false)), Ok(5));
    assert_eq!(result.recv_timeout(BOUND).unwrap(), Ok(b"after".to_vec()));
    // Without SA_RESTART: EINTR (sent until the sleep has begun and is interrupted).
    install_handler(libc::SIGUSR1, 0);
    let (tid, result) = reader(rt);
    let got = within("EINTR", move || loop {
        // SAFETY: `tid` is the reader thread, alive until its result arrives here; its
        // SIGUSR1 handler is installed above.
        unsafe { libc::pthread_kill(tid, libc::SIGUSR1) };
        if let Ok(r) = result.recv_timeout(Duration::from_millis(10)) {
            return r;
        }
    });
    assert_eq!(got, Err(Errno(libc::EINTR)));
    for sig in [libc::SIGUSR1, libc::SIGUSR2] {
        // SAFETY: restores the default action; no memory.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
    rt.close(fd);
}

// ---------------------------------------------------------------------------------------------
// UDP: a socket moves to the shard when it binds to our address or sends into our subnet.
// ---------------------------------------------------------------------------------------------

fn udp_socket(rt: &Accel<PeerNic>, nonblock: bool) -> i32 {
    let ty = libc::SOCK_DGRAM | if nonblock { libc::SOCK_NONBLOCK } else { 0 };
    // SAFETY: socket takes no memory.
    let fd = unsafe { libc::socket(libc::AF_INET, ty, 0) };
    assert!(fd >= 0);
    rt.socket_created(fd, libc::AF_INET, ty, 0);
    assert!(runtime::datagram(fd), "a UDP socket reads and writes datagrams");
    fd
}

#[test]
fn udp_sendto_into_our_subnet_moves_the_socket_and_a_blocking_recvfrom_gets_the_answer() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = udp_socket(rt, false);
        assert_eq!(done(rt.send_datagram(fd, b"ping", Some(echo_addr()), 0)), Ok(4));
        // Autobound to the wildcard address, as Linux does.
        let local = done(rt.sockname(fd, false)).unwrap();
        assert_eq!(local.ip(), std::net::IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_ne!(local.port(), 0, "an ephemeral port");
        let got = within("recvfrom", move || {
            let mut buf = [0u8; 64];
            done(rt.recv_datagram(fd, &mut buf, 0)).map(|d| (d, buf[..d.len].to_vec()))
        });
        let (d, data) = got.unwrap();
        assert_eq!((d.from, data.as_slice(), d.truncated), (echo_addr(), &b"ping"[..], false));
        assert_eq!(rt.routing_stats().accelerated_udp, 1);
        rt.close(fd);
    });
}

#[test]
fn udp_truncation_peek_and_next_length_follow_linux() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = udp_socket(rt, false);
        done(rt.connect(fd, echo_addr())).unwrap();
        assert_eq!(done(rt.sockname(fd, true)), Ok(echo_addr()));
        assert_eq!(done(rt.sockname(fd, false)).unwrap().ip(), std::net::IpAddr::V4(OURS), "the source for its peer");
        done(rt.send_datagram(fd, b"0123456789", None, 0)).unwrap();
        let mut small = [0u8; 4];
        let peeked = within("peek", move || {
            let mut b = [0u8; 4];
            done(rt.recv_datagram(fd, &mut b, libc::MSG_PEEK)).map(|d| (d, b))
        })
        .unwrap();
        assert_eq!((peeked.0.len, peeked.0.truncated, &peeked.1), (4, true, b"0123"));
        assert_eq!(done(rt.readable_bytes(fd)), Ok(10), "FIONREAD: the next datagram's length");
        // MSG_TRUNC returns the datagram's real length; the rest is gone.
        let d = done(rt.recv_datagram(fd, &mut small, libc::MSG_TRUNC)).unwrap();
        assert_eq!((d.len, &small), (10, b"0123"));
        assert_eq!(done(rt.recv_datagram(fd, &mut small, libc::MSG_DONTWAIT)), Err(Errno::EAGAIN));
        rt.close(fd);
    });
}

#[test]
fn udp_port_unreachable_reaches_a_connected_socket_as_econnrefused() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = udp_socket(rt, false);
        let closed = SocketAddr::V4(SocketAddrV4::new(PEER, 9));
        done(rt.connect(fd, closed)).unwrap();
        done(rt.send_datagram(fd, b"anyone?", None, 0)).unwrap();
        // The peer answers with ICMP port unreachable: the blocked reader gets ECONNREFUSED.
        let r = within("recv", move || {
            let mut b = [0u8; 16];
            done(rt.recv_datagram(fd, &mut b, 0)).map(|d| d.len)
        });
        assert_eq!(r, Err(Errno::ECONNREFUSED));
        let mut out = [0u8; 4];
        assert_eq!(done(rt.getsockopt(fd, libc::SOL_SOCKET, libc::SO_ERROR, &mut out)), Ok(4));
        assert_eq!(i32::from_ne_bytes(out), 0, "reported once");
        done(rt.getsockopt(fd, libc::SOL_SOCKET, libc::SO_TYPE, &mut out)).unwrap();
        assert_eq!(i32::from_ne_bytes(out), libc::SOCK_DGRAM);
        rt.close(fd);
    });
}

#[test]
fn udp_epoll_reports_each_arrival_and_edge_triggered_needs_a_new_one() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = udp_socket(rt, true);
        done(rt.bind(fd, SocketAddr::V4(SocketAddrV4::new(OURS, 5353)))).unwrap();
        let epfd = epoll_set(rt);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, (libc::EPOLLIN | libc::EPOLLET) as u32, 42)).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), Vec::<(u32, u64)>::new());
        done(rt.send_datagram(fd, b"one", Some(echo_addr()), 0)).unwrap();
        let ev = within("epoll", move || wait_events(rt, epfd, 10_000));
        assert_eq!(ev, vec![(libc::EPOLLIN as u32, 42)]);
        assert_eq!(wait_events(rt, epfd, 0), Vec::<(u32, u64)>::new(), "edge-triggered: once");
        done(rt.send_datagram(fd, b"two", Some(echo_addr()), 0)).unwrap();
        let ev = within("epoll", move || wait_events(rt, epfd, 10_000));
        assert_eq!(ev, vec![(libc::EPOLLIN as u32, 42)], "a new datagram, a new edge");
        let mut b = [0u8; 8];
        assert_eq!(done(rt.recv_datagram(fd, &mut b, 0)).map(|d| d.len), Ok(3));
        assert_eq!(done(rt.recv_datagram(fd, &mut b, 0)).map(|d| d.len), Ok(3));
        assert_eq!(done(rt.recv_datagram(fd, &mut b, 0)), Err(Errno::EAGAIN));
        rt.close(fd);
        rt.close(epfd);
    });
}

/// Issue 23: on an interface shared with the kernel, a UDP `bind 0.0.0.0:PORT` is accelerated
/// as TCP's is: the wire's datagrams to PORT reach it through the shard. A client on this host
/// goes through the kernel, which has no socket on PORT: a connected one gets ECONNREFUSED at
/// once (docs/runtime.md, "Local clients on a shared interface").
#[test]
fn on_a_shared_interface_a_udp_wildcard_bind_is_accelerated() {
    for (drive, port) in [("inline", 47_393u16), ("dedicated", 47_394)] {
        let l = lab_from(drive, "share = true\n", "");
        let rt = l.rt;
        let fd = udp_socket(rt, false);
        let any = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, port));
        assert_eq!(done(rt.bind(fd, any)), Ok(()), "{drive}: a wildcard bind is accelerated");
        assert_eq!(done(rt.sockname(fd, false)), Ok(any));
        assert_eq!(done(rt.send_datagram(fd, b"ping", Some(echo_addr()), 0)), Ok(4));
        let got = within("recvfrom", move || {
            let mut buf = [0u8; 64];
            done(rt.recv_datagram(fd, &mut buf, 0)).map(|d| (d.from, buf[..d.len].to_vec()))
        });
        assert_eq!(got, Ok((echo_addr(), b"ping".to_vec())), "{drive}: the echo came back to PORT");
        let stats = rt.routing_stats();
        assert_eq!((stats.accelerated_udp, stats.kernel_udp), (1, 0), "{drive}");
        let local = std::net::UdpSocket::bind(("127.0.0.1", 0)).unwrap();
        local.connect(("127.0.0.1", port)).unwrap();
        local.send(b"local").unwrap();
        let refused = within("local recv", move || local.recv(&mut [0u8; 8]).map_err(|e| e.raw_os_error()));
        assert_eq!(refused, Err(Some(libc::ECONNREFUSED)), "{drive}: the kernel has no socket on PORT");
        rt.close(fd);
        // `[::]:PORT` takes IPv4 too, and reads an IPv4 sender as IPv4-mapped, as Linux does
        // (a server answers to the address it read: an AF_INET one would not do on its socket).
        // SAFETY: socket takes no memory.
        let fd6 = unsafe { libc::socket(libc::AF_INET6, libc::SOCK_DGRAM, 0) };
        rt.socket_created(fd6, libc::AF_INET6, libc::SOCK_DGRAM, 0);
        let any6 = SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port + 10, 0, 0));
        assert_eq!(done(rt.bind(fd6, any6)), Ok(()), "{drive}: a wildcard bind is accelerated");
        let echo6 = SocketAddr::V6(SocketAddrV6::new(PEER.to_ipv6_mapped(), 7, 0, 0));
        assert_eq!(done(rt.send_datagram(fd6, b"ping6", Some(echo6), 0)), Ok(5));
        let got = within("recvfrom", move || {
            let mut buf = [0u8; 64];
            done(rt.recv_datagram(fd6, &mut buf, 0)).map(|d| (d.from, buf[..d.len].to_vec()))
        });
        assert_eq!(got, Ok((echo6, b"ping6".to_vec())), "{drive}: the sender as IPv4-mapped");
        rt.close(fd6);
    }
}

#[test]
fn udp_sockets_bound_or_sending_elsewhere_stay_with_the_kernel() {
    let l = lab("inline");
    let rt = l.rt;
    let fd = udp_socket(rt, false);
    let loopback = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    assert!(matches!(rt.bind(fd, loopback), Call::Kernel));
    assert!(!runtime::tracked(fd), "forgotten: the kernel's for good");
    let fd2 = udp_socket(rt, false);
    // A wildcard bind with port 0 decides nothing: the kernel binds it, it stays tracked.
    assert!(matches!(rt.bind(fd2, SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))), Call::Kernel));
    assert!(runtime::datagram(fd2));
    assert!(matches!(
        rt.send_datagram(fd2, b"x", Some(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 9))), 0),
        Call::Kernel
    ));
    assert!(!runtime::datagram(fd2));
    assert_eq!(rt.routing_stats().kernel_udp, 2);
    assert_eq!(rt.routing_stats().accelerated_udp, 0);
    // SAFETY: the test's two sockets, each closed once.
    unsafe {
        libc::close(fd);
        libc::close(fd2);
    }
}

#[test]
fn vectored_send_and_recv_take_the_callers_buffers_in_turn() {
    both_modes(|l| {
        let rt = l.rt;
        let fd = connect_echo(rt);
        let (a, b, c) = (vec![1u8; 3000], vec![2u8; 0], vec![3u8; 5000]);
        let bufs = [std::io::IoSlice::new(&a), std::io::IoSlice::new(&b), std::io::IoSlice::new(&c)];
        assert_eq!(done(rt.send_vectored(fd, &bufs, false)), Ok(8000));
        // MSG_PEEK over two buffers, then MSG_WAITALL over two: the echo, in order.
        let got = within("recv", move || {
            let (mut x, mut y) = (vec![0u8; 10], vec![0u8; 10]);
            let peeked = {
                let mut bufs = [std::io::IoSliceMut::new(&mut x), std::io::IoSliceMut::new(&mut y)];
                done(rt.recv_vectored(fd, &mut bufs, libc::MSG_PEEK | libc::MSG_WAITALL))
            };
            let peeked = (peeked, [x.clone(), y.clone()].concat());
            let (mut p, mut q) = (vec![0u8; 2999], vec![0u8; 5001]);
            let n = {
                let mut bufs = [std::io::IoSliceMut::new(&mut p), std::io::IoSliceMut::new(&mut q)];
                done(rt.recv_vectored(fd, &mut bufs, libc::MSG_WAITALL))
            };
            (peeked, n, [p, q].concat())
        });
        let ((peek_n, peeked), n, data) = got;
        assert_eq!((peek_n, peeked), (Ok(20), vec![1u8; 20]));
        assert_eq!(n, Ok(8000));
        assert_eq!(data, [a, c].concat());
        rt.close(fd);
    });
}

/// A server with `ulimit -n` raised has fds above 65536 (dup2 to one here: this machine's hard
/// limit keeps a real one out of reach, the runtime sees only the number): such an fd is
/// tracked like any other, so the shim hands its writes to the connection (not the
/// placeholder) and its close to the runtime (which releases the connection).
#[test]
fn an_fd_above_65536_is_tracked_like_any_other() {
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    let high = 70_000 + fd;
    rt.duplicated(fd, high);
    assert!(runtime::tracked(high), "fd {high} recorded but not tracked");
    rt.close(fd);
    assert_eq!(done(rt.send(high, b"high fd", false)), Ok(7));
    assert_eq!(within("echo", move || read_exact(rt, high, 7)), b"high fd");
    rt.close(high);
    assert!(!runtime::tracked(high));
}

#[test]
fn dup_d_fds_share_their_sockets_options_and_o_nonblock() {
    let l = lab("inline");
    let rt = l.rt;
    let fd = connect_echo(rt);
    // SAFETY: dup takes no memory.
    let copy = unsafe { libc::dup(fd) };
    assert!(copy >= 0);
    rt.duplicated(fd, copy);
    done(rt.setsockopt(copy, libc::IPPROTO_TCP, libc::TCP_NODELAY, &1i32.to_ne_bytes())).unwrap();
    let mut out = [0u8; 4];
    done(rt.getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, &mut out)).unwrap();
    assert_eq!(i32::from_ne_bytes(out), 1, "set through one fd, read through the other");
    // O_NONBLOCK set through one fd: a read through the other does not wait.
    rt.set_nonblock(fd, true);
    let mut buf = [0u8; 8];
    assert_eq!(done(rt.recv(copy, &mut buf, false, false)), Err(Errno::EAGAIN));
    rt.close(copy);
    rt.close(fd);
}

/// The calls of `dup_d_fds_share_one_open_file_as_on_linux`, made as the shim makes them: the
/// kernel's call, then the runtime's when the fd is accelerated (`rt`), or the kernel's alone.
struct FileCalls {
    rt: Option<&'static Accel<PeerNic>>,
}

impl FileCalls {
    fn dup(&self, fd: i32) -> i32 {
        // SAFETY: dup takes no memory.
        let new = unsafe { libc::dup(fd) };
        assert!(new >= 0);
        self.duplicated(fd, new)
    }

    /// dup2 (or, with `cloexec`, dup3(O_CLOEXEC)) of `fd` onto a number this test opened.
    fn dup_onto(&self, fd: i32, cloexec: bool) -> i32 {
        // SAFETY: the path is a NUL-terminated string; the fds are this test's.
        let new = unsafe {
            let target = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            assert!(target >= 0);
            match cloexec {
                true => libc::dup3(fd, target, libc::O_CLOEXEC),
                false => libc::dup2(fd, target),
            }
        };
        assert!(new >= 0);
        self.duplicated(fd, new)
    }

    fn dupfd_cloexec(&self, fd: i32) -> i32 {
        // SAFETY: F_DUPFD_CLOEXEC takes an int.
        let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
        assert!(new >= 0);
        self.duplicated(fd, new)
    }

    fn duplicated(&self, fd: i32, new: i32) -> i32 {
        if let Some(rt) = self.rt {
            rt.duplicated(fd, new);
        }
        new
    }

    /// fcntl(F_SETFL) with O_NONBLOCK `on`, the other flags kept.
    fn set_nonblock(&self, fd: i32, on: bool) {
        // SAFETY: F_GETFL and F_SETFL take an int.
        unsafe {
            let flags = libc::fcntl(fd, libc::F_GETFL);
            let flags = if on { flags | libc::O_NONBLOCK } else { flags & !libc::O_NONBLOCK };
            assert_eq!(libc::fcntl(fd, libc::F_SETFL, flags), 0);
        }
        if let Some(rt) = self.rt {
            rt.set_nonblock(fd, on);
        }
    }

    /// fcntl(F_GETFL) has O_NONBLOCK (the kernel answers it, for a placeholder too).
    fn nonblock(&self, fd: i32) -> bool {
        // SAFETY: F_GETFL takes no argument.
        unsafe { libc::fcntl(fd, libc::F_GETFL) & libc::O_NONBLOCK != 0 }
    }

    fn cloexec(&self, fd: i32) -> bool {
        // SAFETY: F_GETFD takes no argument.
        unsafe { libc::fcntl(fd, libc::F_GETFD) & libc::FD_CLOEXEC != 0 }
    }

    fn set_cloexec(&self, fd: i32, on: bool) {
        // SAFETY: F_SETFD takes an int.
        assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, if on { libc::FD_CLOEXEC } else { 0 }) }, 0);
    }

    fn recv(&self, fd: i32, buf: &mut [u8]) -> Result<usize, Errno> {
        match self.rt {
            Some(rt) => done(rt.recv(fd, buf, false, false)),
            // SAFETY: `buf` is writable for its length.
            None => match unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) } {
                n if n >= 0 => Ok(n as usize),
                _ => Err(Errno(std::io::Error::last_os_error().raw_os_error().unwrap())),
            },
        }
    }

    fn send(&self, fd: i32, data: &[u8]) {
        match self.rt {
            Some(rt) => assert_eq!(done(rt.send(fd, data, false)), Ok(data.len())),
            // SAFETY: `data` is readable for its length.
            None => assert_eq!(unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), 0) }, data.len() as isize),
        }
    }

    fn set_keepalive(&self, fd: i32) {
        let one = 1i32.to_ne_bytes();
        match self.rt {
            Some(rt) => done(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, &one)).unwrap(),
            None => {
                // SAFETY: `one` is readable for its 4 bytes.
                let r = unsafe { libc::setsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, one.as_ptr().cast(), 4) };
                assert_eq!(r, 0);
            }
        }
    }

    fn keepalive(&self, fd: i32) -> bool {
        let mut out = [0u8; 4];
        match self.rt {
            Some(rt) => assert_eq!(done(rt.getsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, &mut out)), Ok(4)),
            None => {
                let mut len = 4u32;
                // SAFETY: `out` is writable for `len` bytes.
                let r = unsafe {
                    libc::getsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE, out.as_mut_ptr().cast(), &mut len)
                };
                assert_eq!(r, 0);
            }
        }
        i32::from_ne_bytes(out) != 0
    }

    fn close(&self, fd: i32) {
        if let Some(rt) = self.rt {
            rt.close(fd);
        }
        // SAFETY: `fd` is this test's, closed once.
        assert_eq!(unsafe { libc::close(fd) }, 0);
    }
}

/// Linux's chain fd -> open file -> socket: dup, dup2, dup3 and F_DUPFD_CLOEXEC make fds of
/// one open file, so O_NONBLOCK set through one (F_SETFL) is read back (F_GETFL) and obeyed
/// (recv: EAGAIN) through every other, and the socket's options are one; FD_CLOEXEC is each
/// fd's own; closing some leaves the others working. The same sequence runs on a kernel
/// connection first (the spec), then on an accelerated one.
#[test]
fn dup_d_fds_share_one_open_file_as_on_linux() {
    fn sequence(c: &FileCalls, fd: i32, who: &str) {
        c.set_cloexec(fd, false);
        let copy = c.dup(fd);
        let onto = c.dup_onto(fd, false);
        let onto_cloexec = c.dup_onto(fd, true);
        let dupfd_cloexec = c.dupfd_cloexec(fd);
        let all = [fd, copy, onto, onto_cloexec, dupfd_cloexec];
        let cloexec = all.map(|f| c.cloexec(f));
        assert_eq!(cloexec, [false, false, false, true, true], "{who}: FD_CLOEXEC is each fd's");
        c.set_cloexec(copy, true);
        assert!(!c.cloexec(fd), "{who}: F_SETFD on a dup leaves the original");
        c.set_nonblock(dupfd_cloexec, true);
        let mut buf = [0u8; 8];
        for f in all {
            assert!(c.nonblock(f), "{who}: O_NONBLOCK set through one fd, read through fd {f}");
            assert_eq!(c.recv(f, &mut buf), Err(Errno::EAGAIN), "{who}: fd {f} does not wait");
        }
        c.set_keepalive(onto);
        assert!(c.keepalive(onto_cloexec), "{who}: SO_KEEPALIVE is the socket's");
        c.close(fd);
        c.close(dupfd_cloexec);
        assert_eq!(c.recv(copy, &mut buf), Err(Errno::EAGAIN), "{who}: still non-blocking after a close");
        c.set_nonblock(onto_cloexec, false);
        assert!(!c.nonblock(copy), "{who}: O_NONBLOCK cleared through one of the fds left");
        c.send(copy, b"ping");
        let mut got = Vec::new();
        while got.len() < 4 {
            let n = c.recv(onto, &mut buf).unwrap();
            assert!(n > 0, "{who}: EOF");
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, b"ping", "{who}: the connection works through the fds left");
        for f in [copy, onto, onto_cloexec] {
            c.close(f);
        }
    }
    // Linux: a loopback connection to an echo thread.
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let to = server.local_addr().unwrap();
    let echo = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut s, _) = server.accept().unwrap();
        let mut buf = [0u8; 64];
        while let Ok(n @ 1..) = s.read(&mut buf) {
            s.write_all(&buf[..n]).unwrap();
        }
    });
    let kernel = std::os::fd::IntoRawFd::into_raw_fd(std::net::TcpStream::connect(to).unwrap());
    within("the kernel's sequence", move || sequence(&FileCalls { rt: None }, kernel, "linux"));
    echo.join().unwrap();
    for drive in ["inline", "dedicated"] {
        let l = lab(drive);
        let rt = l.rt;
        let fd = connect_echo(rt);
        within("pronghorn's sequence", move || sequence(&FileCalls { rt: Some(rt) }, fd, drive));
    }
}

/// Two connections from the peer to a listener on `port`, accepted: (listener, conns).
fn accept_two(l: &Lab, port: u16) -> (i32, [i32; 2]) {
    let rt = l.rt;
    let lfd = listener(rt, port, false);
    let local = SocketAddr::V4(SocketAddrV4::new(OURS, port));
    l.ctl.lock().unwrap().to_open.extend([(local, Vec::new()), (local, Vec::new())]);
    let conns = within("accept", move || [0, 1].map(|_| done(rt.accept(lfd, 0)).unwrap().0));
    (lfd, conns)
}

/// Writes to `fd` until its send buffer is full (non-blocking; the peer must not be reading):
/// what it took.
fn fill(rt: &Accel<PeerNic>, fd: i32, seed: u8) -> Vec<u8> {
    let chunk: Vec<u8> = (0..65536u32).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect();
    let mut sent = Vec::new();
    while let Ok(n) = done(rt.send(fd, &chunk, true)) {
        sent.extend_from_slice(&chunk[..n]);
    }
    sent
}

/// Issue 22: a process that exits with data queued on a connection it closed and on one it
/// still holds delivers all of it, and a FIN after it, to a slow reader (2 KiB per run of the
/// peer: the drain takes many stack passes, where the exit used to make one).
#[test]
fn at_exit_closed_and_held_connections_deliver_their_data_and_fin() {
    for drive in ["inline", "dedicated"] {
        let l = lab(drive);
        let rt = l.rt;
        let (_lfd, [closed, held]) = accept_two(&l, 5400);
        // The peer reads nothing until the send buffers are full, then 2 KiB per run.
        l.ctl.lock().unwrap().read_per_run = Some(0);
        let sent = [fill(rt, closed, 1), fill(rt, held, 2)];
        assert!(sent.iter().all(|s| s.len() > 64 * 1024), "{drive}: the send buffers hold more than a pass sends");
        rt.close(closed);
        l.ctl.lock().unwrap().read_per_run = Some(2048);
        within("the exit", move || rt.at_exit());
        let ctl = l.ctl.lock().unwrap();
        for (c, sent) in ctl.conns.iter().zip(&sent) {
            assert_eq!((c.received.len(), c.eof, c.error), (sent.len(), true, None), "{drive}: every byte, then a FIN");
            assert!(c.received == *sent, "{drive}: the bytes sent");
        }
    }
}

/// Issue 22: past `runtime.exit_drain_ms` what is still sending is reset, as the kernel
/// resets an orphan it gives up on; the exit does not wait for a reader that never reads.
#[test]
fn at_exit_connections_still_sending_after_exit_drain_ms_are_reset() {
    let l = lab_with("inline", "exit_drain_ms = 0\n");
    let rt = l.rt;
    let (_lfd, [closed, held]) = accept_two(&l, 5401);
    l.ctl.lock().unwrap().read_per_run = Some(0);
    fill(rt, closed, 1);
    fill(rt, held, 2);
    rt.close(closed);
    within("the exit", move || rt.at_exit());
    let ctl = l.ctl.lock().unwrap();
    let states: Vec<_> = ctl.conns.iter().map(|c| c.state).collect();
    assert_eq!(states, [Some(stack::TcpState::Closed); 2], "reset, not left open");
}

/// Issue 22: before an exec, the connection the process closed and one it holds on a
/// close-on-exec fd (which a successful exec closes, under Linux as here) deliver all their
/// data and a FIN to a slow reader; the new image would have lost both. The fd left behind
/// (for an exec that fails after all) is a kernel socket with no connection, not an eventfd.
#[test]
fn before_exec_closed_and_close_on_exec_connections_deliver_their_data_and_fin() {
    for drive in ["inline", "dedicated"] {
        let l = lab(drive);
        let rt = l.rt;
        let (_lfd, [closed, held]) = accept_two(&l, 5403);
        // SAFETY: F_SETFD takes an integer, no memory.
        assert_eq!(unsafe { libc::fcntl(held, libc::F_SETFD, libc::FD_CLOEXEC) }, 0);
        l.ctl.lock().unwrap().read_per_run = Some(0);
        let sent = [fill(rt, closed, 3), fill(rt, held, 4)];
        assert!(sent.iter().all(|s| s.len() > 64 * 1024), "{drive}: the send buffers hold more than a pass sends");
        rt.close(closed);
        l.ctl.lock().unwrap().read_per_run = Some(2048);
        within("the drain before exec", move || rt.drain_before_exec());
        let states: Vec<_> = l.ctl.lock().unwrap().conns.iter().map(|c| c.state).collect();
        assert_eq!(states, [Some(stack::TcpState::CloseWait); 2], "{drive}: the peer has every byte and the FIN");
        read_the_rest(&l);
        let ctl = l.ctl.lock().unwrap();
        for (c, sent) in ctl.conns.iter().zip(&sent) {
            assert_eq!((c.received.len(), c.eof, c.error), (sent.len(), true, None), "{drive}: every byte, then a FIN");
            assert!(c.received == *sent, "{drive}: the bytes sent");
        }
        assert!(!runtime::tracked(held), "{drive}: the runtime forgot the fd");
        let mut byte = 0u8;
        // SAFETY: the kernel writes at most one byte into `byte`.
        let r = unsafe { libc::recv(held, (&mut byte as *mut u8).cast(), 1, libc::MSG_DONTWAIT) };
        let e = std::io::Error::last_os_error().raw_os_error();
        assert_eq!((r, e), (-1, Some(libc::ENOTCONN)), "{drive}: a socket with no connection");
        // SAFETY: F_GETFD takes no memory.
        let cloexec = unsafe { libc::fcntl(held, libc::F_GETFD) };
        assert_eq!(cloexec & libc::FD_CLOEXEC, libc::FD_CLOEXEC, "{drive}: still close-on-exec");
    }
}

/// Issue 22: a connection held on an fd that is not close-on-exec stays open across a Linux
/// exec, for the new program; pronghorn cannot carry it there, so it is reset before the exec
/// (its peer learns it is broken), while one the process closed still delivers everything.
#[test]
fn before_exec_a_connection_that_would_stay_open_in_the_new_program_is_reset() {
    let l = lab("inline");
    let rt = l.rt;
    let (_lfd, [closed, inherited]) = accept_two(&l, 5404);
    // SAFETY: F_GETFD takes no memory.
    assert_eq!(unsafe { libc::fcntl(inherited, libc::F_GETFD) } & libc::FD_CLOEXEC, 0);
    l.ctl.lock().unwrap().read_per_run = Some(0);
    let sent = fill(rt, closed, 5);
    fill(rt, inherited, 6);
    rt.close(closed);
    l.ctl.lock().unwrap().read_per_run = Some(2048);
    within("the drain before exec", move || rt.drain_before_exec());
    let states: Vec<_> = l.ctl.lock().unwrap().conns.iter().map(|c| c.state).collect();
    assert_eq!(states, [Some(stack::TcpState::CloseWait), Some(stack::TcpState::Closed)], "a FIN, then a reset");
    read_the_rest(&l);
    let ctl = l.ctl.lock().unwrap();
    let [orphan, reset] = &ctl.conns[..] else { panic!("two connections") };
    assert_eq!((orphan.received.len(), orphan.eof, orphan.error), (sent.len(), true, None), "every byte, then a FIN");
    assert_eq!(reset.error, Some(Errno::ECONNRESET), "reset");
}

/// After a drain before exec (the port still open, as when the exec fails): the peer reads
/// what its stack holds, driven by an echo exchange (the peer runs when the runtime receives).
fn read_the_rest(l: &Lab) {
    l.ctl.lock().unwrap().read_per_run = None;
    let rt = l.rt;
    let echo = connect_echo(rt);
    assert_eq!(done(rt.send(echo, b"drive", false)), Ok(5));
    within("an echo exchange", move || read_exact(rt, echo, 5));
    rt.close(echo);
}

/// Issue 22, Linux's SO_LINGER with a time (`sk_stream_wait_close`): close() returns once the
/// data and the FIN are acknowledged, not at once; the peer, reading 2 KiB per run, has then
/// seen the FIN. Linux lingers so on a non-blocking socket too: the second connection is one.
#[test]
fn close_with_so_linger_waits_until_the_fin_is_acknowledged() {
    for drive in ["inline", "dedicated"] {
        let l = lab(drive);
        let rt = l.rt;
        let (_lfd, conns) = accept_two(&l, 5402);
        let linger = [1i32.to_ne_bytes(), 30i32.to_ne_bytes()].concat();
        l.ctl.lock().unwrap().read_per_run = Some(0);
        for (k, &fd) in conns.iter().enumerate() {
            if k == 1 {
                rt.set_nonblock(fd, true);
            }
            done(rt.setsockopt(fd, libc::SOL_SOCKET, libc::SO_LINGER, &linger)).unwrap();
            fill(rt, fd, k as u8);
        }
        l.ctl.lock().unwrap().read_per_run = Some(2048);
        for (k, fd) in conns.into_iter().enumerate() {
            within("a lingering close", move || rt.close(fd));
            let state = l.ctl.lock().unwrap().conns[k].state;
            assert_eq!(state, Some(stack::TcpState::CloseWait), "{drive}, connection {k}: the FIN was through");
        }
    }
}

/// What [`listen_and_fill`] drives the NIC until: from the shard's counters and the peer's
/// established connections.
type Until = Box<dyn Fn(&stack::shard::ShardStats, usize) -> bool + Send>;

/// A listener made with `listen(fd, backlog)` under `tcp.somaxconn`: the peer opens `first`
/// connections, then (their handshakes done) one more, and nobody accepts. The shard's counters
/// once that one is answered (accepted or overflowed).
fn listen_and_fill(backlog: i32, somaxconn: u32, first: usize) -> stack::shard::ShardStats {
    let l = lab_with("inline", &format!("[tcp]\nsomaxconn = {somaxconn}\n"));
    let rt = l.rt;
    let lfd = tcp_socket(rt, true);
    let to = SocketAddr::V4(SocketAddrV4::new(OURS, 5100));
    done(rt.bind(lfd, to)).unwrap();
    done(rt.listen(lfd, backlog)).unwrap();
    // Echo exchanges drive the NIC and the peer, which opens the connections.
    let echo = connect_echo(rt);
    let ctl = l.ctl.clone();
    let drive_until = move |what: &'static str, cond: Until| {
        let ctl = ctl.clone();
        let met = within(what, move || {
            (0..1000).any(|_| {
                assert_eq!(done(rt.send(echo, b"drive", false)), Ok(5));
                read_exact(rt, echo, 5);
                cond(&rt.shard_stats()[0], ctl.lock().unwrap().established)
            })
        });
        assert!(met, "never: {what}: {:?}", rt.shard_stats()[0]);
    };
    l.ctl.lock().unwrap().to_open.extend((0..first).map(|_| (to, Vec::new())));
    drive_until("the first handshakes", Box::new(move |_, established| established == first));
    // One exchange more: the shard has taken their last ACKs (it queues the connections after
    // the burst that brought them) before the next SYN comes.
    drive_until("an exchange", Box::new(|_, _| true));
    l.ctl.lock().unwrap().to_open.push((to, Vec::new()));
    drive_until("one more", Box::new(move |s, _| s.tcp_passive_opens > first as u64 || s.tcp_listen_overflows > 0));
    let stats = rt.shard_stats()[0];
    rt.close(echo);
    rt.close(lfd);
    stats
}

/// listen(fd, -1) gets `somaxconn`, as on Linux (the runtime made it 128).
#[test]
fn a_negative_listen_backlog_is_somaxconn() {
    let s = listen_and_fill(-1, 200, 128);
    assert_eq!((s.tcp_passive_opens, s.tcp_listen_overflows), (129, 0));
}

/// listen(fd, 0) holds one connection, as on Linux (the runtime made it 128).
#[test]
fn a_zero_listen_backlog_holds_one_connection() {
    let s = listen_and_fill(0, 4096, 1);
    assert_eq!((s.tcp_passive_opens, s.tcp_listen_overflows), (1, 1));
}

/// nginx adds an upstream socket to its epoll set before it connects it (ngx_event_connect_peer:
/// socket, EPOLL_CTL_ADD, connect). The socket is still the kernel's then, so the registration
/// went to the kernel set; once connected to an accelerated address it is a placeholder the
/// kernel never reports, and the wait saw nothing: the registration must move with it.
#[test]
fn an_fd_added_to_epoll_before_its_connect_or_bind_reports_once_it_is_accelerated() {
    both_modes(|l| {
        let rt = l.rt;
        let epfd = epoll_set(rt);
        let fd = tcp_socket(rt, true);
        let edge = (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLET) as u32;
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, edge, 7)).unwrap();
        assert_eq!(done(rt.connect(fd, echo_addr())), Err(Errno(libc::EINPROGRESS)));
        let connected = within("connected", move || wait_events(rt, epfd, -1));
        assert_eq!(connected, vec![(libc::EPOLLOUT as u32, 7)]);
        done(rt.send(fd, b"echo", false)).unwrap();
        let echoed = within("echoed", move || wait_events(rt, epfd, -1));
        assert!(echoed.len() == 1 && echoed[0].0 & libc::EPOLLIN as u32 != 0 && echoed[0].1 == 7, "{echoed:?}");
        // Bound to our address after it was added: a bound socket is writable.
        let bound = tcp_socket(rt, true);
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, bound, libc::EPOLLOUT as u32, 8)).unwrap();
        done(rt.bind(bound, SocketAddr::V4(SocketAddrV4::new(OURS, 0)))).unwrap();
        assert_eq!(wait_events(rt, epfd, 0), vec![(libc::EPOLLOUT as u32, 8)]);
        for fd in [fd, bound, epfd] {
            rt.close(fd);
        }
    });
}
