//! The runtime of an accelerated process: its shard, the fd table that maps file descriptors to
//! shard sockets, and the socket, epoll and poll calls that `preload` forwards here.
//!
//! Every accelerated socket is backed by a real kernel fd (an eventfd placeholder) so that fd
//! numbers never collide with the kernel's and `close`/`dup2`/`select` bookkeeping keeps
//! working. A TCP socket starts as a kernel socket ("pending"); `bind` to the configured address or
//! `connect` to the configured subnet moves it onto the shard (the kernel socket is replaced by the
//! placeholder at the same fd number); anything else stays with the kernel, and every decision is
//! counted ([`RoutingStats`]).
//!
//! Threads (docs/runtime.md has the whole design): any socket can be used from any thread; one
//! lock guards the shard and the tables and is held only for the socket operation itself, never
//! while sleeping. A thread that cannot go on registers its own eventfd on exactly what it waits
//! for and is woken when that changes (`wait`); at most one thread sleeps on the NIC's rx fd. The
//! NIC is driven *inline* (the waiting thread polls it: event loops) or by a *dedicated* stack
//! thread (thread-per-connection servers); `auto` starts inline and switches when two
//! application threads block at once. epoll keeps a ready list fed by the stack pass (`epoll`).
//!
//! Layout: `accel` (state, lock, stack pass, routing), `fdtable`, `socket` (the TCP calls, over
//! the caller's iovecs), `datagram` (UDP), `sockopt`, `urgent` (MSG_OOB, SIOCATMARK, SIGURG), `wait` (parkers, driver role, stack
//! thread), `epoll`, `poll`, `process` (fork, exit, privilege drop), `observe` (the stats
//! region and the control socket). The process-wide instance is DPDK's; tests build their own
//! over the in-memory NIC.
//!
//! It must not be reached through libc symbols: inside the preloaded library those are our own
//! hooks, so every real call goes through [`real`].

mod accel;
mod datagram;
mod epoll;
mod fdtable;
pub mod observe;
mod poll;
mod process;
pub mod real;
mod shards;
mod socket;
mod sockopt;
mod urgent;
mod wait;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::OnceLock;

use config::{Config, Congestion, PmdName};
use nic::dpdk::{DpdkNic, DpdkOptions, Pmd};
use nic::{MacAddr, Nic};
use stack::shard::{ShardConfig, TcpMem, PAGE};
pub use stack::Errno;

pub use accel::Accel;
pub use datagram::Datagram;
pub use process::{forked_child_socket, ENV_EXE};
pub use wait::WaitStats;

/// The variable `pronghorn run` sets to the pid it execs into: only that process is accelerated.
pub const ENV_PID: &str = "PRONGHORN_ACCEL_PID";

const MAX_FDS: usize = 1 << 16;

/// Per fd: 0 = not ours, 1 = an accelerated or pending TCP socket, 2 = an epoll set, 3 = an
/// accelerated or pending UDP socket (`TRACKED_DATAGRAM`).
static TRACKED: [AtomicU8; MAX_FDS] = [const { AtomicU8::new(0) }; MAX_FDS];
/// Set in a forked child: the parent's shard must not be touched.
static FORKED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// Set while this thread is inside the runtime: calls it makes (DPDK's own sockets, epoll
    /// fds, files) go straight to the kernel.
    static INSIDE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the runtime should look at `fd` at all: one atomic load on the kernel fast path.
#[inline]
pub fn tracked(fd: i32) -> bool {
    (fd as usize) < MAX_FDS
        && fd >= 0
        && TRACKED[fd as usize].load(Ordering::Relaxed) != 0
        && !INSIDE.try_with(|i| i.get()).unwrap_or(true)
}

const TRACKED_DATAGRAM: u8 = 3;

/// Whether tracked `fd` is a UDP socket (its reads and writes are datagrams): one atomic load.
#[inline]
pub fn datagram(fd: i32) -> bool {
    (fd as usize) < MAX_FDS && fd >= 0 && TRACKED[fd as usize].load(Ordering::Relaxed) == TRACKED_DATAGRAM
}

fn set_tracked(fd: i32, on: bool) {
    if (fd as usize) < MAX_FDS && fd >= 0 {
        TRACKED[fd as usize].store(on as u8, Ordering::Relaxed);
    }
}

fn set_tracked_datagram(fd: i32) {
    if (fd as usize) < MAX_FDS && fd >= 0 {
        TRACKED[fd as usize].store(TRACKED_DATAGRAM, Ordering::Relaxed);
    }
}

fn inside() -> bool {
    INSIDE.try_with(|i| i.get()).unwrap_or(true)
}

fn last_errno() -> Errno {
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

/// The answer to a call: the kernel should handle it, or here is the result.
pub enum Call<T> {
    Kernel,
    Done(Result<T, Errno>),
}

/// Counters of the per-socket routing decisions (principle 4: fallback is visible).
#[derive(Clone, Copy, Debug, Default)]
pub struct RoutingStats {
    pub accelerated_listen: u64,
    pub accelerated_connect: u64,
    pub accepted: u64,
    pub kernel_bind: u64,
    pub kernel_connect: u64,
    pub init_failed: u64,
    /// UDP sockets on the shard (bound to our address, or connected or sent into its subnet).
    pub accelerated_udp: u64,
    /// UDP sockets left with the kernel (bound or sent elsewhere).
    pub kernel_udp: u64,
}

static RUNTIME: OnceLock<Option<&'static Accel<DpdkNic>>> = OnceLock::new();

/// The runtime when this process is the one `pronghorn run` accelerates.
fn global() -> Option<&'static Accel<DpdkNic>> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    *RUNTIME.get_or_init(|| {
        let pid = std::env::var(ENV_PID).ok()?.parse::<u32>().ok()?;
        if pid != std::process::id() {
            return None;
        }
        let path = Config::locate(None).ok()?;
        let cfg = match Config::load(&path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pronghorn: {e}; sockets stay on the kernel");
                return None;
            }
        };
        process::remember_env();
        let me = Accel::new(cfg, Box::new(open_dpdk)).leak();
        me.with(|rt| {
            rt.precheck = Some(|cfg| nic::dpdk::precheck(&dpdk_options(cfg)).map_err(|e| e.to_string()));
            rt.observe_dir = Some(observe::region::run_dir());
        });
        unsafe { libc::atexit(close_port_at_exit) };
        Some(me)
    })
}

/// The process-wide runtime held across fork() (see `ForkHold`).
pub struct Fork(Option<accel::ForkHold<'static, DpdkNic>>);

/// preload's fork(), just before the real one.
pub fn fork_prepare() -> Fork {
    Fork(global().map(|a| a.fork_prepare()))
}

/// preload's fork(), just after the real one (`child`: in the new process).
pub fn fork_done(hold: Fork, child: bool) {
    if child && hold.0.as_ref().is_some_and(|h| !h.child_keeps()) {
        FORKED.store(true, Ordering::Relaxed);
    }
    drop(hold);
}

/// The process-wide runtime's address (null when there is none): only it gets a cleanup helper.
fn global_ptr() -> *const () {
    RUNTIME.get().copied().flatten().map_or(std::ptr::null(), |a| a as *const Accel<DpdkNic> as *const ())
}

/// The shard settings a config describes, for a NIC with address `mac` (also `pronghorn
/// echo`'s); `secret` keys the shard's hashes.
pub fn shard_config(cfg: &Config, mac: MacAddr, secret: [u8; 32]) -> ShardConfig {
    let mut shard = ShardConfig::new(
        mac,
        cfg.ipv4.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
        cfg.ipv6.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
        secret,
    );
    shard.gateway4 = cfg.ipv4.as_ref().and_then(|c| c.gateway);
    shard.gateway6 = cfg.ipv6.as_ref().and_then(|c| c.gateway);
    shard.tcp = tcp_config(cfg);
    let t = &cfg.tcp;
    shard.max_orphans = t.max_orphans as usize;
    let [low, pressure, high] = t.mem.map(|pages| usize::try_from(pages).unwrap_or(usize::MAX).saturating_mul(PAGE));
    shard.tcp_mem = TcpMem { low, pressure, high };
    shard.max_tw_buckets = t.max_tw_buckets as usize;
    shard.somaxconn = t.somaxconn as usize;
    shard
}

/// The DPDK port a config describes (also `pronghorn echo`'s).
pub fn dpdk_options(cfg: &Config) -> DpdkOptions {
    let pmd = match cfg.nic.pmd {
        PmdName::AfXdp => Pmd::AfXdp,
        PmdName::AfPacket => Pmd::AfPacket,
    };
    let mut opts = DpdkOptions::new(pmd, cfg.nic.iface.clone());
    opts.eal_args = cfg.nic.eal_args.clone();
    opts.pool_size = cfg.nic.mbufs;
    opts.queues = cfg.nic.queues;
    opts.shards = cfg.runtime.shards;
    opts
}

/// The TCP settings of the shards a config describes (also `pronghorn echo`'s).
pub fn tcp_config(cfg: &Config) -> stack::TcpConfig {
    let congestion = match cfg.tcp.congestion {
        Congestion::Cubic => stack::CongestionAlgorithm::Cubic,
        Congestion::NewReno => stack::CongestionAlgorithm::NewReno,
    };
    let ecn = stack::TcpEcn::from_sysctl(cfg.tcp.ecn).expect("the config crate checked tcp.ecn");
    stack::TcpConfig {
        congestion,
        ecn,
        orphan_retries: u8::try_from(cfg.tcp.orphan_retries).expect("the config crate checked tcp.orphan_retries"),
        fin_wait2_timeout: u64::from(cfg.tcp.fin_timeout) * 1_000_000_000,
        ..stack::TcpConfig::default()
    }
}

fn open_dpdk(cfg: &Config) -> Result<Vec<DpdkNic>, String> {
    DpdkNic::open_shards(&dpdk_options(cfg)).map_err(|e| e.to_string())
}

extern "C" fn close_port_at_exit() {
    if let Some(a) = RUNTIME.get().copied().flatten() {
        if !FORKED.load(Ordering::Relaxed) {
            a.at_exit();
        }
    }
}

impl<N: Nic + 'static> Accel<N> {
    /// A runtime over `nic` (tests): it starts its shard on first use like the process-wide one.
    pub fn with_nic(cfg: Config, nic: N) -> &'static Accel<N> {
        Accel::new(cfg, Box::new(move |_| Ok(vec![nic]))).leak()
    }

    /// A runtime with a shard per NIC (tests of `runtime.shards`: give as many as it says).
    pub fn with_nics(cfg: Config, nics: Vec<N>) -> &'static Accel<N> {
        Accel::new(cfg, Box::new(move |_| Ok(nics))).leak()
    }
}

// ---------------------------------------------------------------------------------------------
// The calls `preload` makes, on the process-wide runtime (`Kernel` when not accelerated).
// ---------------------------------------------------------------------------------------------

/// After the kernel created `fd` with `socket(domain, ty, protocol)`: track TCP and UDP sockets.
pub fn socket_created(fd: i32, domain: i32, ty: i32, protocol: i32) {
    if !inside() {
        if let Some(a) = global() {
            a.socket_created(fd, domain, ty, protocol);
        }
    }
}

/// After the kernel created an epoll fd.
pub fn epoll_created(epfd: i32) {
    if epfd < 0 || inside() {
        return;
    }
    if global().is_some_and(|a| a.epoll_created(epfd)) && (epfd as usize) < MAX_FDS {
        TRACKED[epfd as usize].store(2, Ordering::Relaxed);
    }
}

/// The process is about to change its credentials: open the NIC while it still may.
pub fn before_credentials_change() {
    if !inside() {
        if let Some(a) = global() {
            a.before_credentials_change();
        }
    }
}

macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            pub fn $name($($arg: $ty),*) -> Call<$ret> {
                match global() {
                    Some(a) => a.$name($($arg),*),
                    None => Call::Kernel,
                }
            }
        )*
    };
}

forward! {
    fn recv_urgent(fd: i32, buf: &mut [u8], peek: bool) -> usize;
    fn send_urgent(fd: i32, data: &[u8], dontwait: bool) -> usize;
    fn at_mark(fd: i32) -> bool;
    fn bind(fd: i32, addr: SocketAddr) -> ();
    fn listen(fd: i32, backlog: i32) -> ();
    fn accept(fd: i32, flags: i32) -> (i32, SocketAddr);
    fn connect(fd: i32, addr: SocketAddr) -> ();
    fn send(fd: i32, data: &[u8], dontwait: bool) -> usize;
    fn send_vectored(fd: i32, bufs: &[std::io::IoSlice<'_>], dontwait: bool) -> usize;
    fn recv_vectored(fd: i32, bufs: &mut [std::io::IoSliceMut<'_>], flags: i32) -> usize;
    fn shutdown(fd: i32, how: i32) -> ();
    fn sockname(fd: i32, peer: bool) -> SocketAddr;
    fn setsockopt(fd: i32, level: i32, name: i32, value: &[u8]) -> ();
    fn getsockopt(fd: i32, level: i32, name: i32, out: &mut [u8]) -> usize;
    fn readable_bytes(fd: i32) -> i32;
    fn recv_datagram(fd: i32, buf: &mut [u8], flags: i32) -> Datagram;
    fn send_datagram(fd: i32, data: &[u8], to: Option<SocketAddr>, flags: i32) -> usize;
    fn disconnect(fd: i32) -> ();
    fn epoll_ctl(epfd: i32, op: i32, fd: i32, events: u32, data: u64) -> ();
    fn epoll_wait(epfd: i32, out: &mut [libc::epoll_event], timeout_ms: i32) -> usize;
    fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> usize;
}

/// `recv`/`read` into one buffer.
pub fn recv(fd: i32, buf: &mut [u8], dontwait: bool) -> Call<usize> {
    match global() {
        Some(a) => a.recv(fd, buf, dontwait, false),
        None => Call::Kernel,
    }
}

pub fn close(fd: i32) -> Call<()> {
    match global() {
        Some(a) => a.close(fd),
        None => set_tracked(fd, false),
    }
    // The kernel closes the placeholder (or the kernel socket, or the epoll fd).
    Call::Kernel
}

/// After a successful `dup`/`dup2`/`dup3`/F_DUPFD of `old` to `new`.
pub fn duplicated(old: i32, new: i32) {
    if let Some(a) = global() {
        a.duplicated(old, new);
    }
}

/// O_NONBLOCK through fcntl(F_SETFL) or ioctl(FIONBIO).
pub fn set_nonblock(fd: i32, on: bool) {
    if let Some(a) = global() {
        a.set_nonblock(fd, on);
    }
}

/// The routing counters, for `pronghorn stat` (later) and tests.
pub fn routing_stats() -> Option<RoutingStats> {
    global().map(|a| a.routing_stats())
}

/// TCP_INFO of an accelerated connection, in Linux's `struct tcp_info`.
pub fn tcp_info(fd: i32) -> Call<libc::tcp_info> {
    match global().map(|a| a.tcp_info(fd)) {
        Some(Call::Done(r)) => Call::Done(r.map(|i| sockopt::linux_tcp_info(&i))),
        _ => Call::Kernel,
    }
}
