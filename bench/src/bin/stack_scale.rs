//! `stack-scale`: does the cost of a request/response stay flat as idle connections grow?
//!
//! Two shards over the in-memory NIC pair in one thread (no faults). For each N in the list, N
//! idle connections are opened (the client shard connects to listeners on 64 server ports, so
//! N can exceed one 4-tuple space), then one extra connection runs `--round-trips` 64-byte
//! request/response exchanges; the time per exchange is the figure. Memory per idle connection
//! is the growth of the process's resident set divided by the connections added (both shards:
//! client and server side of each connection), and the shard's own accounting is printed too.
//!
//! Output: one JSON object per N on stdout (`--json`) or a human line.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Instant;

use clap::Parser;
use nic::clock::{Clock, MonotonicClock};
use stack::shard::{Errno, Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemConfig, MemNic};

#[derive(Parser)]
struct Args {
    /// Idle connection counts to measure at, in order (each run adds to the previous).
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000,100000,1000000")]
    idle: Vec<usize>,
    /// Request/response exchanges timed at each step.
    #[arg(long, default_value_t = 200_000)]
    round_trips: usize,
    #[arg(long)]
    json: bool,
}

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORTS: u16 = 128;
const BASE_PORT: u16 = 20000;

struct Rig {
    clock: MonotonicClock,
    server: Shard<MemNic>,
    client: Shard<MemNic>,
    listeners: Vec<SocketId>,
    changed: Vec<SocketId>,
    idle_server: Vec<SocketId>,
    idle_client: Vec<SocketId>,
}

impl Rig {
    fn new(max: usize) -> Rig {
        let (a, b) = pair(MemConfig { queue_len: 8192, pool_size: 32768, ..MemConfig::default() });
        use nic::Nic as _;
        let mut s = ShardConfig::new(a.mac(), Some((SERVER, 24)), None, [3; 32]);
        s.expected_connections = max + 16;
        let mut c = ShardConfig::new(b.mac(), Some((CLIENT, 24)), None, [4; 32]);
        c.expected_connections = max + 16;
        let mut server = Shard::new(a, s);
        let listeners = (0..PORTS)
            .map(|i| server.tcp_listen(SocketAddr::new(SERVER.into(), BASE_PORT + i), 65535).unwrap())
            .collect();
        Rig {
            clock: MonotonicClock::new(),
            server,
            client: Shard::new(b, c),
            listeners,
            changed: Vec::new(),
            idle_server: Vec::new(),
            idle_client: Vec::new(),
        }
    }

    fn poll(&mut self) -> usize {
        let now = self.clock.now_ns();
        self.server.poll(now) + self.client.poll(now)
    }

    fn accept_all(&mut self) {
        for &l in &self.listeners {
            while let Ok((id, _)) = self.server.tcp_accept(l) {
                self.idle_server.push(id);
            }
        }
    }

    /// Opens connections until `target` are established and accepted, in batches.
    fn grow_to(&mut self, target: usize) {
        while self.idle_client.len() < target {
            let batch = (target - self.idle_client.len()).min(2000);
            for i in 0..batch {
                let port = BASE_PORT + ((self.idle_client.len() + i) % PORTS as usize) as u16;
                let id = self.client.tcp_connect(SocketAddr::new(SERVER.into(), port)).unwrap_or_else(|e| {
                    panic!(
                        "connect #{} to port {port}: {e}; client sockets {} tw {} stats {:?}",
                        self.idle_client.len() + i,
                        self.client.socket_count(),
                        self.client.time_wait_count(),
                        self.client.stats()
                    )
                });
                self.idle_client.push(id);
            }
            let goal = self.idle_client.len();
            let mut spins = 0;
            while self.idle_server.len() < goal {
                let work = self.poll();
                self.accept_all();
                self.server.take_changed(&mut self.changed);
                self.client.take_changed(&mut self.changed);
                self.changed.clear();
                spins = if work == 0 { spins + 1 } else { 0 };
                assert!(spins < 1_000_000, "handshakes stalled at {} of {goal}", self.idle_server.len());
            }
        }
        // Let the last ACKs settle.
        while self.poll() > 0 {}
    }

    /// One request/response connection; returns ns per exchange over `n` exchanges.
    fn ping_pong(&mut self, n: usize) -> f64 {
        let port = BASE_PORT;
        let c = self.client.tcp_connect(SocketAddr::new(SERVER.into(), port)).unwrap();
        self.client.tcp_set_nodelay(c, true).unwrap();
        let s = loop {
            self.poll();
            if let Ok((id, _)) = self.server.tcp_accept(self.listeners[0]) {
                break id;
            }
            self.accept_all();
        };
        self.server.tcp_set_nodelay(s, true).unwrap();
        let req = [0x42u8; 64];
        let mut buf = [0u8; 64];
        let start = Instant::now();
        for _ in 0..n {
            assert_eq!(self.client.tcp_send(c, &req), Ok(64));
            let mut got = 0;
            while got < 64 {
                self.poll();
                match self.server.tcp_recv(s, &mut buf[got..]) {
                    Ok(k) => got += k,
                    Err(Errno::EAGAIN) => {}
                    Err(e) => panic!("server recv: {e}"),
                }
            }
            assert_eq!(self.server.tcp_send(s, &buf), Ok(64));
            let mut got = 0;
            while got < 64 {
                self.poll();
                match self.client.tcp_recv(c, &mut buf[got..]) {
                    Ok(k) => got += k,
                    Err(Errno::EAGAIN) => {}
                    Err(e) => panic!("client recv: {e}"),
                }
            }
        }
        let ns = start.elapsed().as_nanos() as f64 / n as f64;
        let _ = self.client.close(c);
        let _ = self.server.close(s);
        for _ in 0..100 {
            self.poll();
        }
        ns
    }
}

fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm.split_whitespace().nth(1).and_then(|p| p.parse().ok()).unwrap_or(0);
    pages * 4096
}

fn main() {
    let args = Args::parse();
    let max = args.idle.iter().copied().max().unwrap_or(0);
    let mut rig = Rig::new(max);
    // Warm up the allocator, pools and code paths before the first measurement.
    rig.ping_pong(10_000);
    let mut last_rss = rss_bytes();
    let mut last_n = 0usize;
    for &n in &args.idle {
        rig.grow_to(n);
        let rss = rss_bytes();
        let per_conn = if n > last_n { (rss.saturating_sub(last_rss)) as f64 / (n - last_n) as f64 } else { 0.0 };
        let ns = rig.ping_pong(args.round_trips);
        if args.json {
            println!(
                "{{\"idle_connections\": {n}, \"ns_per_round_trip\": {ns:.1}, \"rss_bytes\": {rss}, \"bytes_per_idle_connection_both_sides\": {per_conn:.0}, \"round_trips\": {}}}",
                args.round_trips
            );
        } else {
            println!(
                "{n:>8} idle: {ns:>8.0} ns per 64 B request/response; RSS {:.1} MiB ({per_conn:.0} B per idle connection, both ends)",
                rss as f64 / (1 << 20) as f64
            );
        }
        last_rss = rss;
        last_n = n;
    }
}
