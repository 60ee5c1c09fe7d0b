//! `request-cost`: request/response exchanges through the real runtime (`runtime::Accel`) over
//! the in-memory NIC, for counting what each request costs (bench/request_cost.sh runs it under
//! callgrind, perf stat and strace, twice with different request counts, and divides the
//! difference by the extra requests: setup and teardown cancel out).
//!
//! The server side is what an accelerated program runs: real kernel sockets turned into
//! placeholders, then the runtime's socket, poll and epoll calls, its lock, its stack passes,
//! its waits and wakeups, the shard, TCP and the NIC (everything but the preload shim's hook
//! entry, which needs the process-wide DPDK runtime). Two patterns:
//! - `threads`: one thread per connection, MariaDB's loop: a non-blocking `recv`; on EAGAIN,
//!   `poll` on the socket, then `recv` again; then the answer with `send`.
//! - `epoll`: one thread, all connections non-blocking in an epoll set (Redis's loop):
//!   `epoll_wait`, then `recv` and `send` on each ready connection.
//!
//! The client is a peer shard on the other end of the in-memory pair: each of its connections
//! sends a request, waits for the whole answer, sends the next (closed loop), and closes after
//! its share of the requests. It runs inside the server NIC's `rx_burst` (`Client::answer`, which
//! the script tells callgrind not to count), so it answers as fast as the server looks. The NIC
//! has an rx fd (an eventfd, readable while the client has frames to answer), so a thread that
//! drives the NIC sleeps in poll(2) on it as on AF_XDP's, and nothing waits on a clock.
//!
//! Output: one JSON object: the counters the runtime keeps (stack passes, sleeps, wakeups), the
//! shard's segment counts, and the NIC's kicks and rx fd signals.

use std::io::IoSliceMut;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use clap::{Parser, ValueEnum};
use nic::clock::{Clock, MonotonicClock};
use nic::{Link, MacAddr, Nic, NicStats};
use runtime::{Accel, Call, Errno};
use stack::shard::{Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemBuf, MemConfig, MemNic};

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Pattern {
    /// A thread per connection: recv, EAGAIN, poll, recv, send (MariaDB).
    Threads,
    /// One thread, an epoll set of non-blocking connections (Redis).
    Epoll,
}

#[derive(Parser)]
struct Args {
    #[arg(long, value_enum)]
    pattern: Pattern,
    /// Connections (threads for `threads`).
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Requests in all, spread evenly over the connections.
    #[arg(long, default_value_t = 4000)]
    requests: usize,
    #[arg(long, default_value_t = 64)]
    request_bytes: usize,
    #[arg(long, default_value_t = 256)]
    response_bytes: usize,
    /// `runtime.drive`: inline, dedicated or auto.
    #[arg(long, default_value = "auto")]
    drive: String,
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 3306;

/// Eventfd writes that stand for the NIC's system calls: the server's transmit kicks (one per
/// transmit burst that sent frames, as AF_XDP kicks the kernel with a sendto) and the client's
/// rx fd signals (the NIC's interrupt); and the server's reads that clear its rx fd (AF_XDP's
/// ring needs no such call: the script subtracts them).
static TX_KICKS: AtomicU64 = AtomicU64::new(0);
static RX_FD_SIGNALS: AtomicU64 = AtomicU64::new(0);
static RX_FD_CLEARS: AtomicU64 = AtomicU64::new(0);
/// The client thread's context switches (read as it ends), for a process-wide count to subtract.
static CLIENT_CONTEXT_SWITCHES: AtomicU64 = AtomicU64::new(0);

/// One client connection: its share of requests and how far it got.
struct ClientConn {
    id: SocketId,
    left: usize,
    awaiting: usize,
    closed: bool,
}

/// The client side: a peer shard with its connections. It shares the in-memory pair (and its
/// `Rc` buffer pools) with the server's shard, so it is only ever touched with the runtime's lock
/// held (`Accel::locked`).
struct Client {
    shard: Shard<MemNic>,
    clock: MonotonicClock,
    conns: Vec<ClientConn>,
    request: Vec<u8>,
    response_bytes: usize,
    buf: Vec<u8>,
}

// SAFETY: see `Client`: every use is under the runtime's lock, as the server shard's.
unsafe impl Send for Client {}

impl Client {
    /// Takes in what the server sent, answers each completed response with the next request,
    /// closes connections whose share is done. Returns whether it transmitted anything, and
    /// whether every connection is done.
    fn answer(&mut self) -> (bool, bool) {
        let now = self.clock.now_ns();
        let before = self.shard.stats().tcp_tx_segments;
        self.shard.poll(now);
        for c in self.conns.iter_mut() {
            while let Ok(n) = self.shard.tcp_recv(c.id, &mut self.buf) {
                if n == 0 {
                    break;
                }
                c.awaiting = c.awaiting.saturating_sub(n);
            }
            if c.awaiting == 0 && c.left > 0 && self.shard.tcp_send(c.id, &self.request) == Ok(self.request.len()) {
                c.left -= 1;
                c.awaiting = self.response_bytes;
            } else if c.awaiting == 0 && c.left == 0 && !c.closed {
                c.closed = self.shard.tcp_shutdown_write(c.id).is_ok();
            }
        }
        self.shard.poll(now);
        (self.shard.stats().tcp_tx_segments != before, self.conns.iter().all(|c| c.closed))
    }
}

/// What the server's NIC and the client thread share: the kick fd (the client sleeps on it until
/// the server transmits) and the rx fd (the server's NIC sleeper sleeps on it until the client
/// transmits), and whether the rx fd holds a count.
struct Wire {
    kick_fd: i32,
    rx_fd: i32,
    signalled: AtomicBool,
}

impl Wire {
    fn new() -> Wire {
        let efd = || {
            let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            assert!(fd >= 0, "eventfd: {}", std::io::Error::last_os_error());
            fd
        };
        Wire { kick_fd: efd(), rx_fd: efd(), signalled: AtomicBool::new(false) }
    }
}

fn write_one(fd: i32) {
    let one = 1u64;
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

fn read_count(fd: i32) {
    let mut v = 0u64;
    unsafe { libc::read(fd, (&mut v as *mut u64).cast(), 8) };
}

/// The client's thread: sleeps until the server transmits (or 10 ms, for the client's own
/// timers), answers under the runtime's lock, and signals the server's rx fd when it sent
/// something. Not inlined: the script names it to callgrind (`--toggle-collect`) so that none of
/// this thread's work is counted.
#[inline(never)]
fn client_thread(rt: &'static Accel<ServerNic>, wire: Arc<Wire>, mut client: Client) {
    loop {
        let mut p = [libc::pollfd { fd: wire.kick_fd, events: libc::POLLIN, revents: 0 }];
        unsafe { libc::poll(p.as_mut_ptr(), 1, 10) };
        read_count(wire.kick_fd);
        let all_done = rt.locked(|| {
            let (sent, all_done) = client.answer();
            if sent && !wire.signalled.swap(true, Ordering::AcqRel) {
                write_one(wire.rx_fd);
                RX_FD_SIGNALS.fetch_add(1, Ordering::Relaxed);
            }
            all_done
        });
        if all_done {
            CLIENT_CONTEXT_SWITCHES.store(my_context_switches(), Ordering::Relaxed);
            return;
        }
    }
}

/// Voluntary plus involuntary context switches of the calling thread so far.
fn my_context_switches() -> u64 {
    let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// The server's NIC: one end of the pair; the client's thread drives the other.
struct ServerNic {
    mine: MemNic,
    wire: Arc<Wire>,
}

impl Nic for ServerNic {
    type Buf = MemBuf;

    fn rx_burst(&mut self, out: &mut Vec<MemBuf>, max: usize) -> usize {
        // The client signals with the runtime's lock held, as this runs: nothing falls between.
        if self.wire.signalled.swap(false, Ordering::AcqRel) {
            read_count(self.wire.rx_fd);
            RX_FD_CLEARS.fetch_add(1, Ordering::Relaxed);
        }
        let n = self.mine.rx_burst(out, max);
        if self.mine.rx_pending() > 0 && !self.wire.signalled.swap(true, Ordering::AcqRel) {
            write_one(self.wire.rx_fd);
        }
        n
    }

    fn tx_burst(&mut self, bufs: &mut Vec<MemBuf>) -> usize {
        let n = self.mine.tx_burst(bufs);
        if n > 0 {
            write_one(self.wire.kick_fd);
            TX_KICKS.fetch_add(1, Ordering::Relaxed);
        }
        n
    }

    fn alloc(&mut self) -> Option<MemBuf> {
        self.mine.alloc()
    }

    fn mac(&self) -> MacAddr {
        self.mine.mac()
    }

    fn mtu(&self) -> u16 {
        self.mine.mtu()
    }

    fn link(&self) -> Link {
        self.mine.link()
    }

    fn stats(&self) -> NicStats {
        self.mine.stats()
    }

    fn rx_interrupt_fd(&self) -> Option<i32> {
        Some(self.wire.rx_fd)
    }
}

fn done<T>(what: &str, c: Call<T>) -> Result<T, Errno> {
    match c {
        Call::Done(r) => r,
        Call::Kernel => panic!("{what}: the runtime passed an accelerated call to the kernel"),
    }
}

fn tcp_socket(rt: &Accel<ServerNic>) -> i32 {
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    rt.socket_created(fd, libc::AF_INET, libc::SOCK_STREAM, 0);
    fd
}

fn set_int(rt: &Accel<ServerNic>, fd: i32, level: i32, name: i32, v: i32) {
    done("setsockopt", rt.setsockopt(fd, level, name, &v.to_ne_bytes())).expect("setsockopt");
}

/// The runtime, a listener, and the client's connections accepted (all non-blocking, with
/// TCP_NODELAY, as MariaDB and Redis set them).
fn start(args: &Args) -> (&'static Accel<ServerNic>, Vec<i32>, JoinHandle<()>) {
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{SERVER}/24\"\n[runtime]\ndrive = \"{}\"\n",
        args.drive
    );
    let cfg = config::Config::parse(&toml, Path::new("request-cost.toml")).unwrap_or_else(|e| panic!("{e}"));
    let (a, b) = pair(MemConfig { queue_len: 8192, pool_size: 16384, ..MemConfig::default() });
    let mut shard = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), Some((CLIENT, 24)), None, [7; 32]));
    let per_conn = args.requests / args.connections;
    let to = SocketAddr::V4(SocketAddrV4::new(SERVER, PORT));
    let conns = (0..args.connections)
        .map(|_| {
            let id = shard.tcp_connect(to).expect("client connect");
            shard.tcp_set_nodelay(id, true).expect("client nodelay");
            ClientConn { id, left: per_conn, awaiting: 0, closed: false }
        })
        .collect();
    let client = Client {
        shard,
        clock: MonotonicClock::new(),
        conns,
        request: vec![b'q'; args.request_bytes],
        response_bytes: args.response_bytes,
        buf: vec![0; 65536],
    };
    let wire = Arc::new(Wire::new());
    let rt = Accel::with_nic(cfg, ServerNic { mine: a, wire: wire.clone() });
    // Named, so that per-thread counts (perf trace) can leave it out.
    let client = std::thread::Builder::new()
        .name("client".into())
        .spawn(move || client_thread(rt, wire, client))
        .expect("client thread");
    let lfd = tcp_socket(rt);
    done("bind", rt.bind(lfd, SocketAddr::V4(SocketAddrV4::new(SERVER, PORT)))).expect("bind");
    done("listen", rt.listen(lfd, 1024)).expect("listen");
    let fds = (0..args.connections)
        .map(|_| {
            let (fd, _) = done("accept", rt.accept(lfd, 0)).expect("accept");
            set_int(rt, fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
            rt.set_nonblock(fd, true);
            fd
        })
        .collect();
    (rt, fds, client)
}

/// Reads one whole request (non-blocking `recv`; on EAGAIN, `poll` then `recv` again) and
/// answers it; false when the client closed.
fn serve_one(rt: &Accel<ServerNic>, fd: i32, req: &mut [u8], resp: &[u8]) -> bool {
    let mut got = 0;
    while got < req.len() {
        // MariaDB's recv(2): the shim's recv hook takes the vectored path.
        match done("recv", rt.recv_vectored(fd, &mut [IoSliceMut::new(&mut req[got..])], 0)) {
            Ok(0) => return false,
            Ok(n) => got += n,
            Err(Errno::EAGAIN) => {
                let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }];
                done("poll", rt.poll(&mut p, -1)).expect("poll");
            }
            Err(e) => panic!("recv: {e:?}"),
        }
    }
    send_all(rt, fd, resp);
    true
}

fn send_all(rt: &Accel<ServerNic>, fd: i32, mut data: &[u8]) {
    while !data.is_empty() {
        match done("send", rt.send(fd, data, false)) {
            Ok(n) => data = &data[n..],
            Err(Errno::EAGAIN) => {
                let mut p = [libc::pollfd { fd, events: libc::POLLOUT, revents: 0 }];
                done("poll", rt.poll(&mut p, -1)).expect("poll");
            }
            Err(e) => panic!("send: {e:?}"),
        }
    }
}

fn run_threads(rt: &'static Accel<ServerNic>, fds: Vec<i32>, args: &Args) -> u64 {
    let (req_len, resp_len) = (args.request_bytes, args.response_bytes);
    let workers: Vec<_> = fds
        .into_iter()
        .map(|fd| {
            std::thread::spawn(move || {
                let (mut req, resp) = (vec![0u8; req_len], vec![b'r'; resp_len]);
                let mut served = 0u64;
                while serve_one(rt, fd, &mut req, &resp) {
                    served += 1;
                }
                rt.close(fd);
                served
            })
        })
        .collect();
    workers.into_iter().map(|w| w.join().expect("worker")).sum()
}

fn run_epoll(rt: &'static Accel<ServerNic>, fds: Vec<i32>, args: &Args) -> u64 {
    let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    assert!(epfd >= 0 && rt.epoll_created(epfd));
    for &fd in &fds {
        done("epoll_ctl", rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, fd, libc::EPOLLIN as u32, fd as u64))
            .expect("epoll_ctl");
    }
    let (mut req, resp) = (vec![0u8; args.request_bytes], vec![b'r'; args.response_bytes]);
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
    let (mut open, mut served) = (fds.len(), 0u64);
    while open > 0 {
        let n = done("epoll_wait", rt.epoll_wait(epfd, &mut events, -1)).expect("epoll_wait");
        for ev in &events[..n] {
            let fd = ev.u64 as i32;
            // Redis read(2)s what is there (one request here) and answers at once.
            match done("read", rt.recv(fd, &mut req, false, false)) {
                Ok(0) => {
                    rt.close(fd);
                    open -= 1;
                }
                Ok(n) if n == req.len() => {
                    send_all(rt, fd, &resp);
                    served += 1;
                }
                Ok(n) => panic!("a partial request ({n} bytes): the client sends whole ones"),
                Err(Errno::EAGAIN) => {}
                Err(e) => panic!("recv: {e:?}"),
            }
        }
    }
    served
}

fn main() {
    let args = Args::parse();
    assert!(args.connections > 0 && args.requests >= args.connections, "need requests >= connections > 0");
    let (rt, fds, client) = start(&args);
    let served = match args.pattern {
        Pattern::Threads => run_threads(rt, fds, &args),
        Pattern::Epoll => run_epoll(rt, fds, &args),
    };
    let expected = (args.requests / args.connections * args.connections) as u64;
    assert_eq!(served, expected, "requests served");
    client.join().expect("client thread");
    let w = rt.wait_stats();
    let shard = rt.shard_stats().into_iter().next().expect("one shard");
    println!(
        "{{\"pattern\":\"{:?}\",\"drive\":\"{}\",\"connections\":{},\"requests\":{},\"request_bytes\":{},\
         \"response_bytes\":{},\"stack_thread_polls\":{},\"inline_polls\":{},\"skipped_passes\":{},\"sleeps\":{},\"wakeups\":{},\
         \"dedicated\":{},\"tcp_rx_segments\":{},\"tcp_tx_segments\":{},\"tx_kicks\":{},\"rx_fd_signals\":{},\"rx_fd_clears\":{},\"client_context_switches\":{}}}",
        args.pattern,
        args.drive,
        args.connections,
        served,
        args.request_bytes,
        args.response_bytes,
        w.stack_thread_polls,
        w.inline_polls,
        w.skipped_passes,
        w.sleeps,
        w.wakeups,
        w.dedicated,
        shard.tcp_rx_segments,
        shard.tcp_tx_segments,
        TX_KICKS.load(Ordering::Relaxed),
        RX_FD_SIGNALS.load(Ordering::Relaxed),
        RX_FD_CLEARS.load(Ordering::Relaxed),
        CLIENT_CONTEXT_SWITCHES.load(Ordering::Relaxed),
    );
}
