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
//! The shard runs *inline*: the thread that waits (in `epoll_wait`, `poll`, a blocking `read`,
//! `accept` or `connect`) polls it, and when nothing is ready sleeps in the kernel on the NIC's rx
//! fd together with the kernel fds, so an idle process does not spin. One mutex guards the
//! runtime; it is never held while sleeping.
//!
//! It must not be reached through libc symbols: inside the preloaded library those are our own
//! hooks, so every real call goes through [`real`].

pub mod real;

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};

use config::{Config, PmdName};
use nic::clock::{Clock, MonotonicClock};
use nic::dpdk::{DpdkNic, DpdkOptions, Pmd};
use nic::Nic;
pub use stack::shard::Errno;
use stack::shard::{Readiness, Shard, ShardConfig, SocketId};

/// The variable `pronghorn run` sets to the pid it execs into: only that process is accelerated.
pub const ENV_PID: &str = "PRONGHORN_ACCEL_PID";

const MAX_FDS: usize = 1 << 16;

/// Per fd: 0 = not ours, 1 = tracked (a pending TCP socket, an accelerated socket, an epoll set).
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
    !INSIDE.with(|i| i.get()) && (fd as usize) < MAX_FDS && fd >= 0 && TRACKED[fd as usize].load(Ordering::Relaxed) != 0
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
}

enum Fd {
    /// A kernel TCP socket that may still move to the shard.
    Pending {
        nonblock: bool,
        nodelay: bool,
    },
    /// On the shard, bound, not yet listening.
    Bound {
        local: SocketAddr,
        nonblock: bool,
    },
    Listener {
        id: SocketId,
        nonblock: bool,
    },
    Conn {
        id: SocketId,
        nonblock: bool,
    },
    /// A kernel epoll fd with shadow entries for accelerated members.
    Epoll(EpollSet),
}

struct EpollSet {
    members: HashMap<i32, Member>,
    rx_added: bool,
    /// An eventfd in the kernel set: an epoll_ctl from another thread wakes a waiter with it.
    kick: i32,
    /// Threads inside the kernel wait on this set right now.
    waiting: u32,
}

impl Default for EpollSet {
    fn default() -> Self {
        EpollSet { members: HashMap::new(), rx_added: false, kick: -1, waiting: 0 }
    }
}

#[derive(Clone, Copy)]
struct Member {
    events: u32,
    data: u64,
    /// For EPOLLET: the mask last reported, and the arrival count then.
    last: u32,
    arrivals: u32,
    disabled: bool,
}

/// Socket options the shim keeps for an accelerated (or still pending) socket. Accepted sockets
/// inherit their listener's, as on Linux.
#[derive(Clone, Copy, Debug)]
struct SockOpts {
    nodelay: bool,
    keepalive: bool,
    keepidle_s: u32,
    keepintvl_s: u32,
    keepcnt: u32,
    /// SO_LINGER: `Some(0)` resets on close.
    linger_s: Option<u32>,
    rcvtimeo_us: u64,
    sndtimeo_us: u64,
    v6only: bool,
    reuseaddr: bool,
}

impl Default for SockOpts {
    fn default() -> Self {
        SockOpts {
            nodelay: false,
            keepalive: false,
            keepidle_s: 7200,
            keepintvl_s: 75,
            keepcnt: 9,
            linger_s: None,
            rcvtimeo_us: 0,
            sndtimeo_us: 0,
            v6only: false,
            reuseaddr: false,
        }
    }
}

impl SockOpts {
    fn keepalive(&self) -> Option<stack::Keepalive> {
        self.keepalive.then(|| stack::Keepalive {
            idle: u64::from(self.keepidle_s) * 1_000_000_000,
            interval: u64::from(self.keepintvl_s) * 1_000_000_000,
            count: self.keepcnt.min(255) as u8,
        })
    }
}

/// The marker of the NIC's rx fd inside an application's epoll set.
const RX_MARK: u64 = u64::MAX - 0x5048;
/// The marker of the set's kick eventfd.
const KICK_MARK: u64 = u64::MAX - 0x4b49;

struct Runtime {
    cfg: Config,
    shard: Option<Shard<DpdkNic>>,
    init_error: Option<String>,
    clock: MonotonicClock,
    fds: HashMap<i32, Fd>,
    /// How many fds refer to each shard socket (dup): it is closed with the last one.
    refs: HashMap<SocketId, u32>,
    /// The epoll sets each accelerated fd is in, so that close need not look at every set.
    member_of: HashMap<i32, Vec<i32>>,
    /// Addresses held by accelerated bound or listening sockets (bind: EADDRINUSE).
    bound: std::collections::HashSet<SocketAddr>,
    opts: HashMap<i32, SockOpts>,
    rx_fd: Option<i32>,
    routing: RoutingStats,
}

// SAFETY: the shard (DPDK port, mbufs, `Rc`s inside) is only ever touched with the runtime's
// mutex held, so no two threads use it at once; DPDK's queue functions need serialisation, not a
// particular thread (non-EAL threads use the mempool without a per-lcore cache).
unsafe impl Send for Runtime {}

static RUNTIME: OnceLock<Option<Mutex<Runtime>>> = OnceLock::new();

/// The runtime when this process is the one `pronghorn run` accelerates.
fn runtime() -> Option<&'static Mutex<Runtime>> {
    RUNTIME
        .get_or_init(|| {
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
            Some(Mutex::new(Runtime {
                cfg,
                shard: None,
                init_error: None,
                clock: MonotonicClock::new(),
                fds: HashMap::new(),
                refs: HashMap::new(),
                member_of: HashMap::new(),
                bound: std::collections::HashSet::new(),
                opts: HashMap::new(),
                rx_fd: None,
                routing: RoutingStats::default(),
            }))
        })
        .as_ref()
}

/// Runs `f` on the runtime with the lock held and `INSIDE` set; `None` when not accelerated.
fn with<T>(f: impl FnOnce(&mut Runtime) -> T) -> Option<T> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    let m = runtime()?;
    let mut guard: MutexGuard<'_, Runtime> = m.lock().unwrap_or_else(|e| e.into_inner());
    INSIDE.with(|i| i.set(true));
    let r = f(&mut guard);
    INSIDE.with(|i| i.set(false));
    Some(r)
}

fn set_tracked(fd: i32, on: bool) {
    if (fd as usize) < MAX_FDS && fd >= 0 {
        TRACKED[fd as usize].store(on as u8, Ordering::Relaxed);
    }
}

fn errno_of(rc: i32) -> Errno {
    let _ = rc;
    Errno(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO))
}

impl Runtime {
    fn now(&self) -> u64 {
        self.clock.now_ns()
    }

    /// The shard, started on first use.
    fn shard(&mut self) -> Result<&mut Shard<DpdkNic>, Errno> {
        if self.shard.is_none() {
            if self.init_error.is_some() {
                return Err(Errno(libc::ENETDOWN));
            }
            match self.start_shard() {
                Ok(s) => {
                    self.rx_fd = s.nic().rx_interrupt_fd();
                    self.shard = Some(s);
                    unsafe { libc::atexit(close_port_at_exit) };
                }
                Err(e) => {
                    eprintln!("pronghorn: {e}; this process's sockets stay on the kernel");
                    self.init_error = Some(e);
                    self.routing.init_failed += 1;
                    return Err(Errno(libc::ENETDOWN));
                }
            }
        }
        Ok(self.shard.as_mut().unwrap())
    }

    fn start_shard(&self) -> Result<Shard<DpdkNic>, String> {
        let pmd = match self.cfg.nic.pmd {
            PmdName::AfXdp => Pmd::AfXdp,
            PmdName::AfPacket => Pmd::AfPacket,
        };
        let mut opts = DpdkOptions::new(pmd, self.cfg.nic.iface.clone());
        opts.eal_args = self.cfg.nic.eal_args.clone();
        opts.pool_size = self.cfg.nic.mbufs;
        let nic = DpdkNic::open(&opts).map_err(|e| e.to_string())?;
        let mut secret = [0u8; 32];
        unsafe { libc::getrandom(secret.as_mut_ptr().cast(), 32, 0) };
        let mut cfg = ShardConfig::new(
            nic.mac(),
            self.cfg.ipv4.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
            self.cfg.ipv6.as_ref().map(|c| (c.address.addr, c.address.prefix_len)),
            secret,
        );
        cfg.gateway4 = self.cfg.ipv4.as_ref().and_then(|c| c.gateway);
        cfg.gateway6 = self.cfg.ipv6.as_ref().and_then(|c| c.gateway);
        Ok(Shard::new(nic, cfg))
    }

    /// Whether `ip` is one of the accelerated addresses.
    fn is_ours(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => self.cfg.ipv4.as_ref().is_some_and(|c| c.address.addr == a),
            IpAddr::V6(a) => {
                a.to_ipv4_mapped().is_some_and(|v4| self.is_ours(v4.into()))
                    || self.cfg.ipv6.as_ref().is_some_and(|c| c.address.addr == a)
            }
        }
    }

    /// Whether `ip` is reached through the accelerated interface.
    fn routes_here(&self, ip: IpAddr) -> bool {
        match ip {
            IpAddr::V4(a) => {
                !a.is_loopback() && self.cfg.ipv4.as_ref().is_some_and(|c| c.address.contains(a) || c.gateway.is_some())
            }
            IpAddr::V6(a) => match a.to_ipv4_mapped() {
                Some(v4) => self.routes_here(v4.into()),
                None => {
                    !a.is_loopback()
                        && self.cfg.ipv6.as_ref().is_some_and(|c| c.address.contains(a) || c.gateway.is_some())
                }
            },
        }
    }

    fn poll_shard(&mut self) {
        let now = self.now();
        if let Some(s) = self.shard.as_mut() {
            // Drain what is there: a few bursts, not forever.
            for _ in 0..8 {
                if s.poll(now) == 0 {
                    break;
                }
            }
        }
    }

    /// Replaces the kernel socket at `fd` by an eventfd placeholder (same number). The
    /// placeholder carries the socket's O_NONBLOCK: programs read it back with F_GETFL (Redis
    /// skips F_SETFL when the flag already shows) and the runtime must agree with them.
    fn placeholder(&mut self, fd: i32, nonblock: bool) -> Result<(), Errno> {
        unsafe {
            let cloexec = real::fcntl(fd, libc::F_GETFD, 0);
            let efd = real::eventfd(0, if nonblock { libc::EFD_NONBLOCK } else { 0 });
            if efd < 0 {
                return Err(errno_of(efd));
            }
            if real::dup2(efd, fd) < 0 {
                let e = errno_of(-1);
                real::close(efd);
                return Err(e);
            }
            real::close(efd);
            if cloexec >= 0 {
                real::fcntl(fd, libc::F_SETFD, cloexec as libc::c_ulong);
            }
        }
        Ok(())
    }

    fn arrivals(&self, fd: i32) -> u32 {
        match (self.shard.as_ref(), self.fds.get(&fd)) {
            (Some(s), Some(Fd::Listener { id, .. } | Fd::Conn { id, .. })) => s.arrivals(*id),
            _ => 0,
        }
    }

    fn readiness(&self, fd: i32) -> Option<Readiness> {
        let shard = self.shard.as_ref()?;
        match self.fds.get(&fd)? {
            Fd::Listener { id, .. } | Fd::Conn { id, .. } => Some(shard.readiness(*id)),
            Fd::Bound { .. } => Some(Readiness { writable: true, ..Readiness::default() }),
            _ => None,
        }
    }
}

extern "C" fn close_port_at_exit() {
    // Closing the port detaches the XDP program.
    if FORKED.load(Ordering::Relaxed) {
        return;
    }
    if let Some(m) = RUNTIME.get().and_then(|o| o.as_ref()) {
        if let Ok(mut rt) = m.try_lock() {
            INSIDE.with(|i| i.set(true));
            // Frames still queued (replies written just before exit) go out first.
            rt.poll_shard();
            drop(rt.shard.take());
        }
    }
}

/// `pthread_atfork` child handler: the child never touches the parent's queues. Its accelerated
/// sockets fail with EOPNOTSUPP; closing them only closes the placeholder.
pub fn after_fork_in_child() {
    FORKED.store(true, Ordering::Relaxed);
}

/// In a forked child, a tracked fd is a placeholder of the parent's socket: socket calls on it
/// fail with EOPNOTSUPP (said once on stderr) instead of silently reaching an eventfd. A child
/// of its own is served by the kernel; accelerated sockets shared with a child need a shard per
/// process (the multi-shard work).
pub fn forked_child_socket(fd: i32) -> Option<Errno> {
    if !FORKED.load(Ordering::Relaxed)
        || fd < 0
        || fd as usize >= MAX_FDS
        || TRACKED[fd as usize].load(Ordering::Relaxed) != 1
    {
        return None;
    }
    static SAID: AtomicBool = AtomicBool::new(false);
    if !SAID.swap(true, Ordering::Relaxed) {
        let msg = format!(
            "pronghorn: pid {} uses accelerated socket fd {fd} inherited through fork: not supported yet (one shard per process); \
             run the server without worker processes (e.g. nginx master_process off) or without pronghorn\n",
            std::process::id()
        );
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    Some(Errno::EOPNOTSUPP)
}

// ---------------------------------------------------------------------------------------------
// The calls
// ---------------------------------------------------------------------------------------------

/// After the kernel created `fd` with `socket(domain, ty, _)`: track TCP/IP sockets.
pub fn socket_created(fd: i32, domain: i32, ty: i32) {
    if fd < 0 || INSIDE.with(|i| i.get()) || (domain != libc::AF_INET && domain != libc::AF_INET6) {
        return;
    }
    if ty & 0xf != libc::SOCK_STREAM {
        return;
    }
    let tracked = with(|rt| {
        rt.fds.insert(fd, Fd::Pending { nonblock: ty & libc::SOCK_NONBLOCK != 0, nodelay: false });
        rt.opts.insert(fd, SockOpts::default());
    });
    if tracked.is_some() {
        set_tracked(fd, true);
    }
}

/// After the kernel created an epoll fd.
pub fn epoll_created(epfd: i32) {
    if epfd < 0 || INSIDE.with(|i| i.get()) {
        return;
    }
    if with(|rt| rt.fds.insert(epfd, Fd::Epoll(EpollSet::default()))).is_some() && (epfd as usize) < MAX_FDS {
        TRACKED[epfd as usize].store(2, Ordering::Relaxed);
    }
}

pub fn bind(fd: i32, addr: SocketAddr) -> Call<()> {
    with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Pending { nonblock, .. }) => {
            let nonblock = *nonblock;
            if !rt.is_ours(addr.ip()) {
                rt.routing.kernel_bind += 1;
                rt.fds.remove(&fd);
                rt.opts.remove(&fd);
                set_tracked(fd, false);
                return Call::Kernel;
            }
            if let Err(e) = rt.shard() {
                return Call::Done(Err(e));
            }
            if addr.port() != 0 && rt.bound.contains(&addr) {
                return Call::Done(Err(Errno::EADDRINUSE));
            }
            match rt.placeholder(fd, nonblock) {
                Ok(()) => {
                    rt.bound.insert(addr);
                    rt.fds.insert(fd, Fd::Bound { local: addr, nonblock });
                    Call::Done(Ok(()))
                }
                Err(e) => Call::Done(Err(e)),
            }
        }
        Some(Fd::Bound { .. } | Fd::Listener { .. } | Fd::Conn { .. }) => Call::Done(Err(Errno::EINVAL)),
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel)
}

pub fn listen(fd: i32, backlog: i32) -> Call<()> {
    with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Bound { local, nonblock }) => {
            let (local, nonblock) = (*local, *nonblock);
            let backlog = if backlog <= 0 { 128 } else { backlog as usize };
            let v6only = rt.opts.get(&fd).is_some_and(|o| o.v6only);
            match rt.shard().and_then(|s| s.tcp_listen_with(local, backlog, v6only)) {
                Ok(id) => {
                    rt.routing.accelerated_listen += 1;
                    rt.refs.insert(id, 1);
                    rt.fds.insert(fd, Fd::Listener { id, nonblock });
                    Call::Done(Ok(()))
                }
                Err(e) => Call::Done(Err(e)),
            }
        }
        Some(Fd::Listener { .. }) => Call::Done(Ok(())),
        Some(Fd::Conn { .. }) => Call::Done(Err(Errno::EINVAL)),
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel)
}

/// Blocks (when the socket is blocking) until `attempt` gives something other than EAGAIN.
/// Which way a blocking call waits: SO_RCVTIMEO or SO_SNDTIMEO bounds it.
#[derive(Clone, Copy)]
enum Dir {
    Recv,
    Send,
}

fn blocking<T>(fd: i32, dir: Dir, mut attempt: impl FnMut(&mut Runtime) -> Call<T>) -> Call<T> {
    let mut deadline: Option<Option<std::time::Instant>> = None;
    loop {
        let (r, nonblock, rx_fd, timeout_ms, timeo_us) = match with(|rt| {
            // Try what the shard already holds first; receive (and send) only when that is not
            // enough: a read that finds its data costs no NIC work.
            let mut r = attempt(rt);
            if matches!(r, Call::Done(Err(Errno::EAGAIN))) {
                rt.poll_shard();
                r = attempt(rt);
            }
            let nonblock = match rt.fds.get(&fd) {
                Some(Fd::Listener { nonblock, .. } | Fd::Conn { nonblock, .. } | Fd::Bound { nonblock, .. }) => {
                    *nonblock
                }
                _ => true,
            };
            // Frames a call queued go out on the shard's next poll. A non-blocking socket's
            // program is an event loop that comes back through epoll_wait/poll/select (which
            // poll first), so all the replies of one loop iteration leave in one burst, with one
            // wakeup of the NIC. A blocking socket's program may wait somewhere we do not see:
            // push its frames out now.
            if !nonblock {
                rt.poll_shard();
            }
            let o = rt.opts.get(&fd).copied().unwrap_or_default();
            let timeo = match dir {
                Dir::Recv => o.rcvtimeo_us,
                Dir::Send => o.sndtimeo_us,
            };
            (r, nonblock, rt.rx_fd, next_wait_ms(rt), timeo)
        }) {
            Some(x) => x,
            None => return Call::Kernel,
        };
        match r {
            Call::Done(Err(Errno::EAGAIN)) if !nonblock => {
                let limit = *deadline.get_or_insert_with(|| {
                    (timeo_us > 0).then(|| std::time::Instant::now() + std::time::Duration::from_micros(timeo_us))
                });
                let mut wait = timeout_ms;
                if let Some(d) = limit {
                    let left = d.saturating_duration_since(std::time::Instant::now());
                    if left.is_zero() {
                        return Call::Done(Err(Errno::EAGAIN));
                    }
                    wait = wait.min(left.as_millis().max(1) as i32);
                }
                sleep_on_rx(rx_fd, wait)
            }
            other => return other,
        }
    }
}

/// How long a waiting thread may sleep before the shard has timer work (ms, capped).
fn next_wait_ms(rt: &Runtime) -> i32 {
    let Some(s) = rt.shard.as_ref() else { return 100 };
    match s.next_deadline() {
        Some(d) => (d.saturating_sub(rt.now()).div_ceil(1_000_000)).min(100) as i32,
        None => 100,
    }
}

fn sleep_on_rx(rx_fd: Option<i32>, timeout_ms: i32) {
    match rx_fd {
        Some(fd) => {
            let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            unsafe { real::poll(&mut p, 1, timeout_ms) };
        }
        None => std::thread::yield_now(),
    }
}

pub fn accept(fd: i32, flags: i32) -> Call<(i32, SocketAddr)> {
    blocking(fd, Dir::Recv, |rt| {
        let id = match rt.fds.get(&fd) {
            Some(Fd::Listener { id, .. }) => *id,
            Some(Fd::Pending { .. } | Fd::Epoll(_)) | None => return Call::Kernel,
            Some(_) => return Call::Done(Err(Errno::EINVAL)),
        };
        let shard = rt.shard.as_mut().expect("a listener has a shard");
        match shard.tcp_accept(id) {
            Ok((conn, peer)) => {
                let efd = unsafe {
                    let nb = if flags & libc::SOCK_NONBLOCK != 0 { libc::EFD_NONBLOCK } else { 0 };
                    real::eventfd(0, nb | if flags & libc::SOCK_CLOEXEC != 0 { libc::EFD_CLOEXEC } else { 0 })
                };
                if efd < 0 {
                    let e = errno_of(efd);
                    let _ = shard.abort(conn);
                    return Call::Done(Err(e));
                }
                rt.routing.accepted += 1;
                rt.refs.insert(conn, 1);
                let opts = rt.opts.get(&fd).copied().unwrap_or_default();
                let shard = rt.shard.as_mut().unwrap();
                if opts.nodelay {
                    let _ = shard.tcp_set_nodelay(conn, true);
                }
                if opts.keepalive {
                    let _ = shard.tcp_set_keepalive(conn, opts.keepalive());
                }
                rt.opts.insert(efd, opts);
                rt.fds.insert(efd, Fd::Conn { id: conn, nonblock: flags & libc::SOCK_NONBLOCK != 0 });
                set_tracked(efd, true);
                Call::Done(Ok((efd, peer)))
            }
            Err(e) => {
                if e == Errno::EAGAIN {
                    rt.rearm(fd, libc::EPOLLIN as u32);
                }
                Call::Done(Err(e))
            }
        }
    })
}

pub fn connect(fd: i32, addr: SocketAddr) -> Call<()> {
    let started = with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Pending { nonblock, nodelay }) => {
            let (nonblock, nodelay) = (*nonblock, *nodelay);
            if !rt.routes_here(addr.ip()) {
                rt.routing.kernel_connect += 1;
                rt.fds.remove(&fd);
                rt.opts.remove(&fd);
                set_tracked(fd, false);
                return Call::Kernel;
            }
            let id = match rt.shard().and_then(|s| s.tcp_connect(addr)) {
                Ok(id) => id,
                Err(e) => return Call::Done(Err(e)),
            };
            if let Err(e) = rt.placeholder(fd, nonblock) {
                return Call::Done(Err(e));
            }
            if nodelay || rt.opts.get(&fd).is_some_and(|o| o.nodelay) {
                let _ = rt.shard.as_mut().unwrap().tcp_set_nodelay(id, true);
            }
            if let Some(ka) = rt.opts.get(&fd).and_then(|o| o.keepalive()) {
                let _ = rt.shard.as_mut().unwrap().tcp_set_keepalive(id, Some(ka));
            }
            rt.routing.accelerated_connect += 1;
            rt.refs.insert(id, 1);
            rt.fds.insert(fd, Fd::Conn { id, nonblock });
            rt.poll_shard();
            Call::Done(Err(if nonblock { Errno(libc::EINPROGRESS) } else { Errno::EAGAIN }))
        }
        Some(Fd::Conn { .. }) => Call::Done(Err(Errno::EISCONN)),
        Some(Fd::Listener { .. } | Fd::Bound { .. }) => Call::Done(Err(Errno::EINVAL)),
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel);
    match started {
        Call::Done(Err(Errno::EAGAIN)) => blocking(fd, Dir::Send, |rt| {
            let Some(Fd::Conn { id, .. }) = rt.fds.get(&fd) else { return Call::Done(Err(Errno::EBADF)) };
            let id = *id;
            let shard = rt.shard.as_mut().unwrap();
            if let Ok(Some(e)) = shard.take_error(id) {
                return Call::Done(Err(e));
            }
            match shard.tcp_state(id) {
                Ok(stack::TcpState::SynSent | stack::TcpState::SynReceived) => Call::Done(Err(Errno::EAGAIN)),
                Ok(_) => Call::Done(Ok(())),
                Err(e) => Call::Done(Err(e)),
            }
        }),
        other => other,
    }
}

fn conn_id(rt: &Runtime, fd: i32) -> Result<SocketId, Call<()>> {
    match rt.fds.get(&fd) {
        Some(Fd::Conn { id, .. }) => Ok(*id),
        Some(Fd::Listener { .. } | Fd::Bound { .. }) => Err(Call::Done(Err(Errno::ENOTCONN))),
        _ => Err(Call::Kernel),
    }
}

/// `recv`/`read`; `peek` is MSG_PEEK (the data stays).
pub fn recv(fd: i32, buf: &mut [u8], dontwait: bool) -> Call<usize> {
    recv_flags(fd, buf, dontwait, false)
}

pub fn recv_flags(fd: i32, buf: &mut [u8], dontwait: bool, peek: bool) -> Call<usize> {
    blocking(fd, Dir::Recv, |rt| {
        let id = match conn_id(rt, fd) {
            Ok(id) => id,
            Err(Call::Kernel) => return Call::Kernel,
            Err(Call::Done(Err(e))) => return Call::Done(Err(e)),
            Err(_) => unreachable!(),
        };
        let shard = rt.shard.as_mut().unwrap();
        let r = if peek { shard.tcp_peek(id, buf) } else { shard.tcp_recv(id, buf) };
        if r == Err(Errno::EAGAIN) {
            rt.rearm(fd, libc::EPOLLIN as u32);
        }
        match r {
            Err(Errno::EAGAIN) if dontwait => Call::Done(Err(Errno::EAGAIN)),
            other => Call::Done(other),
        }
    })
}

/// `send`/`write`: a blocking socket sends everything (waiting for room); EPIPE is returned and
/// the caller raises SIGPIPE unless MSG_NOSIGNAL.
pub fn send(fd: i32, data: &[u8], dontwait: bool) -> Call<usize> {
    let mut sent = 0usize;
    let r = blocking(fd, Dir::Send, |rt| {
        let id = match conn_id(rt, fd) {
            Ok(id) => id,
            Err(Call::Kernel) => return Call::Kernel,
            Err(Call::Done(Err(e))) => return Call::Done(Err(e)),
            Err(_) => unreachable!(),
        };
        let nonblock = dontwait || matches!(rt.fds.get(&fd), Some(Fd::Conn { nonblock: true, .. }));
        let shard = rt.shard.as_mut().unwrap();
        let r = shard.tcp_send(id, &data[sent..]);
        if !matches!(r, Ok(n) if n == data.len() - sent) {
            rt.rearm(fd, libc::EPOLLOUT as u32);
        }
        match r {
            Ok(n) => {
                sent += n;
                if sent == data.len() || nonblock {
                    Call::Done(Ok(sent))
                } else {
                    Call::Done(Err(Errno::EAGAIN))
                }
            }
            Err(Errno::EAGAIN) if sent > 0 && nonblock => Call::Done(Ok(sent)),
            Err(Errno::EAGAIN) if dontwait => Call::Done(Err(Errno::EAGAIN)),
            Err(e) if sent > 0 && e != Errno::EAGAIN => Call::Done(Ok(sent)),
            Err(e) => Call::Done(Err(e)),
        }
    });
    r
}

pub fn close(fd: i32) -> Call<()> {
    if FORKED.load(Ordering::Relaxed) {
        set_tracked(fd, false);
        return Call::Kernel;
    }
    with(|rt| rt.release(fd));
    set_tracked(fd, false);
    // The kernel closes the placeholder (or the kernel socket, or the epoll fd).
    Call::Kernel
}

/// After a successful `dup`/`dup2`/`dup3`/F_DUPFD of `old` to `new`: `new` refers to the same
/// socket (and is released first if it was one of ours: dup2 closes it).
pub fn duplicated(old: i32, new: i32) {
    if old == new || FORKED.load(Ordering::Relaxed) {
        return;
    }
    let shared = with(|rt| {
        rt.release(new);
        let copy = match rt.fds.get(&old) {
            Some(Fd::Listener { id, nonblock }) => Some((Fd::Listener { id: *id, nonblock: *nonblock }, *id)),
            Some(Fd::Conn { id, nonblock }) => Some((Fd::Conn { id: *id, nonblock: *nonblock }, *id)),
            _ => None,
        };
        match copy {
            Some((entry, id)) => {
                *rt.refs.entry(id).or_insert(0) += 1;
                rt.fds.insert(new, entry);
                if let Some(o) = rt.opts.get(&old).copied() {
                    rt.opts.insert(new, o);
                }
                true
            }
            None => false,
        }
    });
    set_tracked(new, shared == Some(true));
}

impl Runtime {
    /// The application saw EAGAIN on `fd` for `bits` (EPOLLIN on a read or accept, EPOLLOUT on
    /// a write): in every edge-triggered set the next readiness is a new edge (as in Linux,
    /// where EPOLLET re-arms when the queue is drained).
    fn rearm(&mut self, fd: i32, bits: u32) {
        let Some(sets) = self.member_of.get(&fd) else { return };
        for epfd in sets.clone() {
            if let Some(Fd::Epoll(set)) = self.fds.get_mut(&epfd) {
                if let Some(m) = set.members.get_mut(&fd) {
                    m.last &= !bits;
                }
            }
        }
    }

    /// Forgets `fd`; closes its shard socket when no other fd refers to it.
    fn release(&mut self, fd: i32) {
        let id = match self.fds.remove(&fd) {
            Some(Fd::Bound { local, .. }) => {
                self.bound.remove(&local);
                return;
            }
            Some(Fd::Listener { id, .. }) => {
                if self.refs.get(&id).copied().unwrap_or(1) <= 1 {
                    if let Some(local) = self.shard.as_ref().and_then(|s| s.local_addr(id).ok()) {
                        self.bound.remove(&local);
                    }
                }
                id
            }
            Some(Fd::Conn { id, .. }) => id,
            Some(Fd::Epoll(set)) => {
                if set.kick >= 0 {
                    unsafe { real::close(set.kick) };
                }
                for member in set.members.keys() {
                    if let Some(v) = self.member_of.get_mut(member) {
                        v.retain(|&e| e != fd);
                    }
                }
                return;
            }
            _ => return,
        };
        for epfd in self.member_of.remove(&fd).unwrap_or_default() {
            if let Some(Fd::Epoll(set)) = self.fds.get_mut(&epfd) {
                set.members.remove(&fd);
            }
        }
        let last = match self.refs.get_mut(&id) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                self.refs.remove(&id);
                true
            }
        };
        let opts = self.opts.remove(&fd).unwrap_or_default();
        if last {
            if let Some(s) = self.shard.as_mut() {
                // SO_LINGER with a zero timeout resets instead of closing gracefully.
                let _ = if opts.linger_s == Some(0) { s.abort(id) } else { s.close(id) };
            }
            self.poll_shard();
        }
    }
}

pub fn shutdown(fd: i32, how: i32) -> Call<()> {
    with(|rt| {
        let id = match conn_id(rt, fd) {
            Ok(id) => id,
            Err(c) => return c,
        };
        let shard = rt.shard.as_mut().unwrap();
        let r = match how {
            libc::SHUT_WR | libc::SHUT_RDWR => shard.tcp_shutdown_write(id),
            libc::SHUT_RD => Ok(()),
            _ => Err(Errno::EINVAL),
        };
        rt.poll_shard();
        Call::Done(r)
    })
    .unwrap_or(Call::Kernel)
}

pub fn sockname(fd: i32, peer: bool) -> Call<SocketAddr> {
    with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Bound { local, .. }) if !peer => Call::Done(Ok(*local)),
        Some(Fd::Bound { .. }) => Call::Done(Err(Errno::ENOTCONN)),
        Some(Fd::Listener { id, .. } | Fd::Conn { id, .. }) => {
            let s = rt.shard.as_ref().unwrap();
            Call::Done(if peer { s.peer_addr(*id) } else { s.local_addr(*id) })
        }
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel)
}

fn int_of(v: &[u8]) -> Option<i32> {
    v.get(..4).map(|b| i32::from_ne_bytes(b.try_into().unwrap()))
}

fn timeval_us(v: &[u8]) -> Option<u64> {
    if v.len() < 16 {
        return None;
    }
    let sec = i64::from_ne_bytes(v[..8].try_into().unwrap());
    let usec = i64::from_ne_bytes(v[8..16].try_into().unwrap());
    (sec >= 0 && (0..1_000_000).contains(&usec)).then(|| sec as u64 * 1_000_000 + usec as u64)
}

/// setsockopt on a tracked socket. Options are kept (and applied to the shard socket where it
/// has them); on a still-pending socket they also go to its kernel socket.
pub fn setsockopt(fd: i32, level: i32, name: i32, value: &[u8]) -> Call<()> {
    with(|rt| {
        let pending = matches!(rt.fds.get(&fd), Some(Fd::Pending { .. }));
        let id = match rt.fds.get(&fd) {
            Some(Fd::Conn { id, .. }) => Some(*id),
            Some(Fd::Pending { .. } | Fd::Bound { .. } | Fd::Listener { .. }) => None,
            _ => return Call::Kernel,
        };
        let Some(o) = rt.opts.get_mut(&fd) else { return Call::Kernel };
        let int = int_of(value);
        let need_int = |v: Option<i32>| v.ok_or(Errno::EINVAL);
        let r: Result<(), Errno> = (|| {
            match (level, name) {
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => o.nodelay = need_int(int)? != 0,
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => o.keepalive = need_int(int)? != 0,
                (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => o.keepidle_s = positive(need_int(int)?, 32767)?,
                (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => o.keepintvl_s = positive(need_int(int)?, 32767)?,
                (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => o.keepcnt = positive(need_int(int)?, 127)?,
                (libc::SOL_SOCKET, libc::SO_LINGER) => {
                    if value.len() < 8 {
                        return Err(Errno::EINVAL);
                    }
                    let on = int_of(&value[..4]).unwrap() != 0;
                    let secs = int_of(&value[4..8]).unwrap().max(0) as u32;
                    o.linger_s = on.then_some(secs);
                }
                (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => o.rcvtimeo_us = timeval_us(value).ok_or(Errno(libc::EDOM))?,
                (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => o.sndtimeo_us = timeval_us(value).ok_or(Errno(libc::EDOM))?,
                (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => o.v6only = need_int(int)? != 0,
                (libc::SOL_SOCKET, libc::SO_REUSEADDR) => o.reuseaddr = need_int(int)? != 0,
                _ => {}
            }
            Ok(())
        })();
        let o = *o;
        if let Err(e) = r {
            return Call::Done(Err(e));
        }
        if pending {
            return Call::Kernel;
        }
        if let Some(id) = id {
            let shard = rt.shard.as_mut().unwrap();
            match (level, name) {
                (libc::IPPROTO_TCP, libc::TCP_NODELAY) => {
                    let _ = shard.tcp_set_nodelay(id, o.nodelay);
                }
                (libc::SOL_SOCKET, libc::SO_KEEPALIVE)
                | (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE | libc::TCP_KEEPINTVL | libc::TCP_KEEPCNT) => {
                    let _ = shard.tcp_set_keepalive(id, o.keepalive());
                }
                // Clearing TCP_CORK pushes the held tail out at once (corking is left to Nagle).
                (libc::IPPROTO_TCP, libc::TCP_CORK) if int == Some(0) => {
                    let _ = shard.tcp_push(id);
                    rt.poll_shard();
                }
                _ => {}
            }
        }
        Call::Done(Ok(()))
    })
    .unwrap_or(Call::Kernel)
}

fn positive(v: i32, max: i32) -> Result<u32, Errno> {
    if (1..=max).contains(&v) {
        Ok(v as u32)
    } else {
        Err(Errno::EINVAL)
    }
}

/// getsockopt on an accelerated socket: the value written to `out`, its length.
pub fn getsockopt(fd: i32, level: i32, name: i32, out: &mut [u8]) -> Call<usize> {
    with(|rt| {
        let id = match rt.fds.get(&fd) {
            Some(Fd::Conn { id, .. } | Fd::Listener { id, .. }) => Some(*id),
            Some(Fd::Bound { .. }) => None,
            _ => return Call::Kernel,
        };
        let o = rt.opts.get(&fd).copied().unwrap_or_default();
        let put_int = |out: &mut [u8], v: i32| -> Result<usize, Errno> {
            let n = out.len().min(4);
            if n == 0 {
                return Err(Errno::EINVAL);
            }
            out[..n].copy_from_slice(&v.to_ne_bytes()[..n]);
            Ok(n)
        };
        let put_tv = |out: &mut [u8], us: u64| -> Result<usize, Errno> {
            let mut b = [0u8; 16];
            b[..8].copy_from_slice(&((us / 1_000_000) as i64).to_ne_bytes());
            b[8..].copy_from_slice(&((us % 1_000_000) as i64).to_ne_bytes());
            let n = out.len().min(16);
            out[..n].copy_from_slice(&b[..n]);
            Ok(n)
        };
        let r = match (level, name) {
            (libc::SOL_SOCKET, libc::SO_ERROR) => {
                let e = match (id, rt.shard.as_mut()) {
                    (Some(id), Some(s)) => s.take_error(id).ok().flatten().map_or(0, |e| e.0),
                    _ => 0,
                };
                put_int(out, e)
            }
            (libc::SOL_SOCKET, libc::SO_TYPE) => put_int(out, libc::SOCK_STREAM),
            (libc::SOL_SOCKET, libc::SO_SNDBUF | libc::SO_RCVBUF) => put_int(out, 131_072),
            (libc::SOL_SOCKET, libc::SO_ACCEPTCONN) => {
                put_int(out, matches!(rt.fds.get(&fd), Some(Fd::Listener { .. })) as i32)
            }
            (libc::IPPROTO_TCP, libc::TCP_NODELAY) => put_int(out, o.nodelay as i32),
            (libc::SOL_SOCKET, libc::SO_KEEPALIVE) => put_int(out, o.keepalive as i32),
            (libc::IPPROTO_TCP, libc::TCP_KEEPIDLE) => put_int(out, o.keepidle_s as i32),
            (libc::IPPROTO_TCP, libc::TCP_KEEPINTVL) => put_int(out, o.keepintvl_s as i32),
            (libc::IPPROTO_TCP, libc::TCP_KEEPCNT) => put_int(out, o.keepcnt as i32),
            (libc::SOL_SOCKET, libc::SO_REUSEADDR) => put_int(out, o.reuseaddr as i32),
            (libc::IPPROTO_IPV6, libc::IPV6_V6ONLY) => put_int(out, o.v6only as i32),
            (libc::SOL_SOCKET, libc::SO_LINGER) => {
                let mut b = [0u8; 8];
                b[..4].copy_from_slice(&(o.linger_s.is_some() as i32).to_ne_bytes());
                b[4..].copy_from_slice(&(o.linger_s.unwrap_or(0) as i32).to_ne_bytes());
                let n = out.len().min(8);
                out[..n].copy_from_slice(&b[..n]);
                Ok(n)
            }
            (libc::SOL_SOCKET, libc::SO_RCVTIMEO) => put_tv(out, o.rcvtimeo_us),
            (libc::SOL_SOCKET, libc::SO_SNDTIMEO) => put_tv(out, o.sndtimeo_us),
            _ => Err(Errno(libc::ENOPROTOOPT)),
        };
        Call::Done(r)
    })
    .unwrap_or(Call::Kernel)
}

/// O_NONBLOCK through fcntl(F_SETFL) or ioctl(FIONBIO).
pub fn set_nonblock(fd: i32, on: bool) {
    with(|rt| {
        if let Some(
            Fd::Pending { nonblock, .. }
            | Fd::Bound { nonblock, .. }
            | Fd::Listener { nonblock, .. }
            | Fd::Conn { nonblock, .. },
        ) = rt.fds.get_mut(&fd)
        {
            *nonblock = on;
        }
    });
}

/// FIONREAD.
pub fn readable_bytes(fd: i32) -> Call<i32> {
    with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Conn { id, .. }) => {
            let id = *id;
            Call::Done(rt.shard.as_mut().unwrap().tcp_recv_available(id).map(|n| n as i32))
        }
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel)
}

/// epoll_ctl: accelerated members live in the shadow set; kernel ones go to the kernel.
pub fn epoll_ctl(epfd: i32, op: i32, fd: i32, events: u32, data: u64) -> Call<()> {
    with(|rt| {
        let accelerated = matches!(rt.fds.get(&fd), Some(Fd::Conn { .. } | Fd::Listener { .. } | Fd::Bound { .. }));
        let rx_fd = rt.rx_fd;
        let Some(Fd::Epoll(set)) = rt.fds.get_mut(&epfd) else { return Call::Kernel };
        if !accelerated {
            return Call::Kernel;
        }
        let r = match op {
            libc::EPOLL_CTL_ADD if set.members.contains_key(&fd) => Err(Errno(libc::EEXIST)),
            libc::EPOLL_CTL_ADD => {
                set.members.insert(fd, Member { events, data, last: 0, arrivals: 0, disabled: false });
                rt.member_of.entry(fd).or_default().push(epfd);
                Ok(())
            }
            libc::EPOLL_CTL_MOD => match set.members.get_mut(&fd) {
                Some(m) => {
                    *m = Member { events, data, last: 0, arrivals: 0, disabled: false };
                    Ok(())
                }
                None => Err(Errno(libc::ENOENT)),
            },
            libc::EPOLL_CTL_DEL => {
                let r = set.members.remove(&fd).map(|_| ()).ok_or(Errno(libc::ENOENT));
                if let Some(v) = rt.member_of.get_mut(&fd) {
                    v.retain(|&e| e != epfd);
                }
                r
            }
            _ => Err(Errno::EINVAL),
        };
        // The NIC's rx fd joins the set so that a kernel wait wakes up for packets too, and a
        // kick eventfd so that a change made here wakes a thread already waiting.
        if r.is_ok() && !set.rx_added {
            if let Some(rx) = rx_fd {
                let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: RX_MARK };
                if unsafe { real::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, rx, &mut ev) } == 0 {
                    set.rx_added = true;
                }
            }
            let kick = unsafe { real::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
            let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: KICK_MARK };
            if kick >= 0 && unsafe { real::epoll_ctl(epfd, libc::EPOLL_CTL_ADD, kick, &mut ev) } == 0 {
                set.kick = kick;
            } else if kick >= 0 {
                unsafe { real::close(kick) };
            }
        }
        if r.is_ok() && set.kick >= 0 && set.waiting > 0 {
            let one = 1u64;
            unsafe { real::write(set.kick, (&one as *const u64).cast(), 8) };
        }
        Call::Done(r)
    })
    .unwrap_or(Call::Kernel)
}

fn epoll_mask(r: Readiness, wanted: u32) -> u32 {
    let mut m = 0u32;
    if r.readable {
        m |= libc::EPOLLIN as u32;
    }
    if r.writable {
        m |= libc::EPOLLOUT as u32;
    }
    if r.read_closed {
        m |= libc::EPOLLRDHUP as u32;
    }
    let always = libc::EPOLLERR as u32 | libc::EPOLLHUP as u32;
    if r.hangup {
        m |= libc::EPOLLHUP as u32;
    }
    if r.error {
        m |= libc::EPOLLERR as u32;
    }
    m & (wanted | always)
}

/// The ready accelerated members of `epfd`, written to `out`; returns how many.
fn collect_epoll(rt: &mut Runtime, epfd: i32, out: &mut [libc::epoll_event]) -> usize {
    let mut ready: Vec<(i32, u32, u32)> = Vec::new();
    if let Some(Fd::Epoll(set)) = rt.fds.get(&epfd) {
        for (&fd, m) in &set.members {
            if m.disabled {
                continue;
            }
            if let Some(r) = rt.readiness(fd) {
                ready.push((fd, epoll_mask(r, m.events), rt.arrivals(fd)));
            }
        }
    }
    let Some(Fd::Epoll(set)) = rt.fds.get_mut(&epfd) else { return 0 };
    let mut n = 0;
    for (fd, mask, arrivals) in ready {
        if n == out.len() {
            break;
        }
        let m = set.members.get_mut(&fd).unwrap();
        let edge = m.events & libc::EPOLLET as u32 != 0;
        let report = if edge {
            // New bits, and EPOLLIN again for every new arrival (Linux wakes ET waiters on each).
            let mut r = mask & !m.last;
            if arrivals != m.arrivals {
                r |= mask & libc::EPOLLIN as u32;
            }
            r
        } else {
            mask
        };
        m.last = mask;
        m.arrivals = arrivals;
        if report == 0 {
            continue;
        }
        out[n] = libc::epoll_event { events: report, u64: m.data };
        n += 1;
        if m.events & libc::EPOLLONESHOT as u32 != 0 {
            m.disabled = true;
        }
    }
    n
}

/// epoll_wait over a set with accelerated members (and kernel ones): see the module doc.
pub fn epoll_wait(epfd: i32, out: &mut [libc::epoll_event], timeout_ms: i32) -> Call<usize> {
    if !tracked(epfd) {
        return Call::Kernel;
    }
    let deadline =
        (timeout_ms >= 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64));
    loop {
        let Some((n, wait_ms, has_members)) = with(|rt| {
            rt.poll_shard();
            let n = collect_epoll(rt, epfd, out);
            let has = matches!(rt.fds.get(&epfd), Some(Fd::Epoll(s)) if !s.members.is_empty());
            (n, next_wait_ms(rt), has)
        }) else {
            return Call::Kernel;
        };
        if !has_members && n == 0 {
            return Call::Kernel;
        }
        let remaining = match deadline {
            None => i32::MAX,
            Some(d) => d.saturating_duration_since(std::time::Instant::now()).as_millis() as i32,
        };
        let kernel_timeout = if n > 0 { 0 } else { remaining.min(wait_ms).max(0) };
        let waiting = |delta: i32| {
            with(|rt| {
                if let Some(Fd::Epoll(set)) = rt.fds.get_mut(&epfd) {
                    set.waiting = set.waiting.saturating_add_signed(delta);
                }
            })
        };
        if kernel_timeout > 0 {
            waiting(1);
        }
        let k = unsafe { real::epoll_wait(epfd, out[n..].as_mut_ptr(), (out.len() - n) as i32, kernel_timeout) };
        if kernel_timeout > 0 {
            waiting(-1);
        }
        if k < 0 {
            let e = errno_of(k);
            if n > 0 {
                return Call::Done(Ok(n));
            }
            return Call::Done(Err(e));
        }
        // Drop the rx and kick markers from what the kernel reported.
        let mut total = n;
        for i in n..n + k as usize {
            match out[i].u64 {
                RX_MARK => {}
                KICK_MARK => drain_kick(epfd),
                _ => {
                    out[total] = out[i];
                    total += 1;
                }
            }
        }
        if total > 0 {
            if total == k as usize + n && n == 0 {
                // Kernel events only: also look at the shard once more (packets may have come).
                if let Some(extra) = with(|rt| {
                    rt.poll_shard();
                    collect_epoll(rt, epfd, &mut out[total..])
                }) {
                    total += extra;
                }
            }
            return Call::Done(Ok(total));
        }
        if remaining <= 0 && deadline.is_some() {
            return Call::Done(Ok(0));
        }
    }
}

fn drain_kick(epfd: i32) {
    let kick = with(|rt| match rt.fds.get(&epfd) {
        Some(Fd::Epoll(set)) => set.kick,
        _ => -1,
    })
    .unwrap_or(-1);
    if kick >= 0 {
        let mut v = 0u64;
        unsafe { real::read(kick, (&mut v as *mut u64).cast(), 8) };
    }
}

fn poll_mask(r: Readiness, wanted: i16) -> i16 {
    let mut m = 0i16;
    if r.readable {
        m |= libc::POLLIN;
    }
    if r.writable {
        m |= libc::POLLOUT;
    }
    if r.read_closed {
        m |= libc::POLLRDHUP;
    }
    let always = libc::POLLERR | libc::POLLHUP;
    if r.hangup {
        m |= libc::POLLHUP;
    }
    if r.error {
        m |= libc::POLLERR;
    }
    m & (wanted | always)
}

/// poll over any mix of fds: accelerated ones answered from the shard, kernel ones by the kernel,
/// with the NIC's rx fd added while waiting.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> Call<usize> {
    if !fds.iter().any(|p| tracked(p.fd)) {
        return Call::Kernel;
    }
    let deadline =
        (timeout_ms >= 0).then(|| std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64));
    let mut kernel: Vec<libc::pollfd> = Vec::with_capacity(fds.len() + 1);
    loop {
        let Some((n, rx, wait_ms)) = with(|rt| {
            rt.poll_shard();
            let mut n = 0;
            for p in fds.iter_mut() {
                if let Some(r) = rt.readiness(p.fd) {
                    p.revents = poll_mask(r, p.events);
                    n += (p.revents != 0) as usize;
                }
            }
            (n, rt.rx_fd, next_wait_ms(rt))
        }) else {
            return Call::Kernel;
        };
        // The kernel fds (accelerated slots get fd -1: ignored by the kernel).
        kernel.clear();
        let mut accelerated = vec![false; fds.len()];
        for (i, p) in fds.iter().enumerate() {
            let ours = with(|rt| rt.readiness(p.fd).is_some()).unwrap_or(false);
            accelerated[i] = ours;
            kernel.push(libc::pollfd { fd: if ours { -1 } else { p.fd }, events: p.events, revents: 0 });
        }
        if let Some(rx) = rx {
            kernel.push(libc::pollfd { fd: rx, events: libc::POLLIN, revents: 0 });
        }
        let remaining = match deadline {
            None => i32::MAX,
            Some(d) => d.saturating_duration_since(std::time::Instant::now()).as_millis() as i32,
        };
        let t = if n > 0 { 0 } else { remaining.min(wait_ms).max(0) };
        let k = unsafe { real::poll(kernel.as_mut_ptr(), kernel.len() as libc::nfds_t, t) };
        if k < 0 {
            return Call::Done(Err(errno_of(k)));
        }
        let mut total = n;
        for (i, p) in fds.iter_mut().enumerate() {
            if !accelerated[i] {
                p.revents = kernel[i].revents;
                total += (p.revents != 0) as usize;
            }
        }
        if total > 0 || (deadline.is_some() && remaining <= 0) {
            return Call::Done(Ok(total));
        }
    }
}

/// The routing counters, for `pronghorn stat` (later) and tests.
pub fn routing_stats() -> Option<RoutingStats> {
    with(|rt| rt.routing)
}

/// Whether an accelerated connection has bytes waiting (`None`: not one of ours).
pub fn readable_bytes_nonzero(fd: i32) -> Option<bool> {
    match readable_bytes(fd) {
        Call::Done(Ok(n)) => Some(n > 0),
        _ => None,
    }
}

/// TCP_INFO of an accelerated connection.
pub type TcpInfoSnapshot = stack::TcpInfo;

pub fn tcp_info(fd: i32) -> Call<stack::TcpInfo> {
    with(|rt| match rt.fds.get(&fd) {
        Some(Fd::Conn { id, .. }) => {
            let id = *id;
            Call::Done(rt.shard.as_mut().unwrap().tcp_info(id))
        }
        Some(Fd::Listener { .. } | Fd::Bound { .. }) => Call::Done(Err(Errno::ENOTCONN)),
        _ => Call::Kernel,
    })
    .unwrap_or(Call::Kernel)
}
