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
//! Layout: `accel` (state, lock, stack pass, routing), `call` (a call's answer, errno),
//! `tracked_fds` (the one-byte-per-fd table of the hooks' fast path), `fdtable` (fd -> open file,
//! and the socket table), `socket` (the TCP calls, over the caller's iovecs), `datagram` (UDP),
//! `sockopt`, `urgent` (MSG_OOB, SIOCATMARK, SIGURG), `wait` (parkers, wakeups, wait state;
//! `wait::sleeping` the driver role, stack thread and blocking calls), `epoll`, `poll`, `process`
//! (fork, exit, exec, privilege drop), `exec` (whether an exec would start), `secret` (the
//! shards' hash keys), `shared` (an interface shared with the kernel: owned ports, the kernel's
//! neighbours), `family_lock` and `family_parker` (a lock and parkers processes share),
//! `family` (the shards a fork family shares with `runtime.share = "family"`: issue 24), `placement` (where the stack's threads and memory go), `lockstat` (the lock's wait and hold times), `observe` (the
//! stats region and the control socket), `settings` (the shard, TCP and DPDK settings a config
//! makes). The process-wide instance is DPDK's; tests build their own over the in-memory NIC.
//!
//! The modules form a DAG (no import cycle: `scripts/module-dag.py`, run by scripts/test.sh): a
//! module's state (`wait`, `epoll`, `sockopt`, `urgent`, `datagram`, `process`, `observe`) is in
//! its mod.rs, which the tables and `accel` may import; the calls that work on the runtime
//! (`impl Runtime`, `impl Accel`) are in a child that nothing imports (`calls`,
//! `wait::sleeping`, `observe::publish`). This file only re-exports and holds the process-wide
//! instance; nothing below imports it.
//!
//! It must not be reached through libc symbols: inside the preloaded library those are our own
//! hooks, so every real call goes through [`real`].

mod accel;
mod beside;
mod call;
mod datagram;
mod epoll;
mod exec;
mod family;
pub mod family_lock;
pub mod family_parker;
mod fdtable;
mod liveness;
mod lockstat;
pub mod observe;
mod passing;
pub mod placement;
mod poll;
mod process;
pub mod real;
mod secret;
mod settings;
mod shards;
mod shared;
pub mod shield;
mod socket;
mod sockopt;
mod threads;
mod tracked_fds;
mod urgent;
mod wait;

pub use shared::ephemeral_range_conflict;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use config::Config;
use nic::clock::MonotonicClock;
use nic::dpdk::{DpdkNic, DpdkOptions};
use nic::fault::{FaultConfig, FaultyNic};
use nic::Nic;
pub use stack::Errno;

pub use accel::{Accel, RoutingStats};
use call::last_errno;
pub use call::Call;
pub use datagram::Datagram;
pub use exec::Program;
pub use family::successor_file;
pub use family::FamilyStats;
pub use passing::Passing;
pub use process::spawn::{
    after_spawn, before_spawn, spawn_action_on, spawn_actions_destroy, spawn_actions_init, spawn_closes_from,
    spawn_dup2_source,
};
pub use process::{forked_child_socket, ENV_EXE};
use process::{FORKED, OWNER};
pub use secret::random_secret;
pub use settings::{dpdk_options, shard_config, tcp_config};
pub use threads::{runtime_thread_starts, starting_runtime_thread};
pub use tracked_fds::{datagram, tracked};
use tracked_fds::{
    inside, set_tracked, set_tracked_datagram, set_tracked_state, tracked_state, INSIDE, TRACKED_DATAGRAM,
    TRACKED_EPOLL,
};
pub use wait::{DriverRole, WaitStats, CALLS_PER_PASS};

pub use process::ENV_PID;

/// The NIC of an accelerated process: a DPDK port behind the fault injector, which passes every
/// frame straight through unless `nic.fault` asks for faults.
type ProcessNic = FaultyNic<DpdkNic, MonotonicClock>;

static RUNTIME: OnceLock<Option<&'static Accel<ProcessNic>>> = OnceLock::new();

/// The runtime when this process is the one `pronghorn run` accelerates.
fn global() -> Option<&'static Accel<ProcessNic>> {
    if FORKED.load(Ordering::Relaxed) {
        return None;
    }
    *RUNTIME.get_or_init(|| {
        // SAFETY: getauxval takes no memory and reads the process's auxiliary vector.
        let secure_exec = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        match start_decision(std::env::var(ENV_PID).ok().as_deref(), std::process::id(), secure_exec) {
            Start::Kernel => return None,
            Start::RefuseSecureExec => {
                eprintln!(
                    "pronghorn: pid {} runs set-user-ID, set-group-ID or with file capabilities (AT_SECURE): its \
                     environment (PRONGHORN_CONFIG, PRONGHORN_RUN_DIR, PRONGHORN_EXE) is not trusted, so every socket \
                     stays on the kernel",
                    std::process::id()
                );
                return None;
            }
            Start::Accelerate => {}
        }
        let path = Config::locate(None).ok()?;
        let cfg = match Config::load(&path) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("pronghorn: {e}; sockets stay on the kernel");
                return None;
            }
        };
        let placed = match placement::of_process(&cfg) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("pronghorn: {e}; sockets stay on the kernel");
                return None;
            }
        };
        process::remember_env();
        process::handover::remember();
        OWNER.store(std::process::id(), Ordering::Relaxed);
        let (lcore, pool_node) = (placed.eal_lcore, placed.pool_node);
        let me = Accel::new(cfg, Box::new(move |cfg: &Config| open_dpdk(cfg, lcore, pool_node))).leak();
        me.with(|rt| {
            rt.wait.stack_cpus = placed.stack_cpus;
            rt.precheck = Some(|cfg| nic::dpdk::precheck(&dpdk_options(cfg)).map_err(|e| e.to_string()));
            rt.observe_dir = Some(observe::region::run_dir());
            rt.starts_reaper = true;
        });
        // SAFETY: registers an `extern "C" fn()` that lives as long as the program (a static
        // function of this library, which is never unloaded: it is preloaded).
        unsafe { libc::atexit(close_port_at_exit) };
        Some(me)
    })
}

/// What the process-wide runtime does in this process.
#[derive(Debug, PartialEq)]
enum Start {
    /// `pronghorn run` did not name this process: it is not accelerated.
    Kernel,
    /// Named, but running with privileges its caller does not have (AT_SECURE, as for a
    /// set-user-ID program): the variables that name the config, the run directory and the
    /// cleanup helper come from the caller and the config's `eal_args` can make DPDK load code,
    /// so nothing of them is used (glibc ignores LD_PRELOAD paths in such a process for the same
    /// reason). The sockets stay on the kernel and the process says so once.
    RefuseSecureExec,
    Accelerate,
}

/// The decision for process `pid` given `ENV_PID`'s value and the auxiliary vector's AT_SECURE.
fn start_decision(env_pid: Option<&str>, pid: u32, secure_exec: bool) -> Start {
    if env_pid.and_then(|p| p.parse::<u32>().ok()) != Some(pid) {
        Start::Kernel
    } else if secure_exec {
        Start::RefuseSecureExec
    } else {
        Start::Accelerate
    }
}

/// The process-wide runtime held across fork() (see `ForkHold`).
pub enum Fork {
    /// Held (`None`: no runtime in this process).
    Held(Option<accel::ForkHold<'static, ProcessNic>>),
    /// Not held: fork() from a signal handler that interrupted this thread inside the runtime,
    /// maybe holding its lock (PostgreSQL 15's postmaster starts its children from the
    /// handlers that run while it waits in select(); taking the lock deadlocked the postmaster
    /// while its select opened the NIC). The child's copy of the runtime may be mid-operation:
    /// it is a child forked after the NIC opened.
    Interrupted,
}

/// preload's fork(), just before the real one.
pub fn fork_prepare() -> Fork {
    if inside() && RUNTIME.get().copied().flatten().is_some() {
        return Fork::Interrupted;
    }
    shield::guard("fork", || Fork::Held(None), || Fork::Held(global().map(|a| a.fork_prepare())))
}

/// preload's fork(), just after the real one returned `pid` (0: in the new process; negative:
/// it failed).
pub fn fork_done(hold: Fork, pid: libc::pid_t) {
    after_fork("fork", hold, pid == 0, |h| h.forked(pid));
}

/// preload's daemon(), just after the real one (`child`: in the new process): the child does
/// not share the shards (its parent exits, and with it the NIC's driver).
pub fn daemon_done(hold: Fork, child: bool) {
    after_fork("daemon", hold, child, |h| h.daemonized(child));
}

/// In the child, the runtime stays (`keeps` says whether: this process then owns it) or is
/// refused (`FORKED`); `keeps` also does the parent's part.
fn after_fork(call: &str, hold: Fork, child: bool, keeps: impl FnOnce(accel::ForkHold<'static, ProcessNic>) -> bool) {
    shield::guard(
        call,
        || (),
        || match hold {
            Fork::Held(Some(h)) => {
                if keeps(h) {
                    OWNER.store(std::process::id(), Ordering::Relaxed);
                } else if child {
                    process::lost_the_runtime_at_fork();
                }
            }
            Fork::Interrupted if child => process::lost_the_runtime_at_fork(),
            _ => {}
        },
    )
}

/// preload's exec functions, before the real one runs `program`: in the process that owns the
/// runtime (not a forked child that lost it, nor a vfork child in its parent's memory), with
/// the NIC open, and when the kernel would start `program`, the connections are finished
/// first ([`Accel::drain_before_exec`]). Only atomics and getpid before the pid is known to be
/// the owner's: a vfork child must not touch the runtime. In a child that lost the runtime at
/// its fork, and in a vfork child, the parent's sockets the new program would inherit are
/// buried in the child's own fd table (`process::forked_child_before_exec`). Returns the
/// environment entries (`NAME=value`) the new program must get, in place of its own of those
/// names: those that hand it the deferred listeners it inherits (`process::handover`; empty
/// when there are none).
pub fn before_exec(program: Program<'_>) -> Vec<std::ffi::CString> {
    if FORKED.load(Ordering::Relaxed) || process::in_vfork_child(OWNER.load(Ordering::Relaxed)) {
        if !inside() {
            process::forked_child_before_exec();
        }
        return Vec::new();
    }
    let Some(a) = RUNTIME.get().copied().flatten() else { return Vec::new() };
    if inside() {
        return Vec::new();
    }
    shield::guard("exec", Vec::new, || {
        if !program.would_start() {
            return Vec::new();
        }
        let env = a.hand_listeners_over();
        if env.is_empty() {
            a.say_listeners_left_behind();
        }
        a.drain_before_exec();
        env
    })
}

/// As the library loads (preload's constructor): a program exec'd by an accelerated process
/// that handed it its deferred listeners (`process::handover`, nginx's binary upgrade) is
/// accelerated and takes them back before its first call.
pub fn adopt_handed_listeners() {
    let Ok(list) = std::env::var(process::handover::ENV_LISTENERS) else { return };
    // Its own children and programs are not handed anything by this.
    std::env::remove_var(process::handover::ENV_LISTENERS);
    if let Some(a) = global() {
        shield::guard("adopt listeners", || (), || a.adopt_listeners(&list));
    }
}

/// Opens the config's port with the EAL's main lcore and the packet pool where the placement
/// put them.
fn open_dpdk(cfg: &Config, lcore: Option<u32>, pool_node: Option<u32>) -> Result<Vec<ProcessNic>, String> {
    let faults: FaultConfig = cfg.nic.fault.parse().map_err(|e| format!("nic.fault: {e}"))?;
    if cfg.nic.share {
        shared::check_port_range()?;
    }
    let opts = DpdkOptions { lcore, pool_node, ..dpdk_options(cfg) };
    let ports = DpdkNic::open_shards(&opts).map_err(|e| e.to_string())?;
    if cfg.nic.share {
        let maps = ports.first().and_then(|p| p.xdp_maps()).map(|m| m.try_clone());
        match maps {
            Some(Ok(maps)) => shared::start(maps, &cfg.nic.iface),
            _ => {
                return Err(
                    "nic.share: pronghorn's XDP program is not attached, so the interface cannot be shared".into()
                )
            }
        }
    }
    Ok(ports.into_iter().map(|port| FaultyNic::new(port, faults.clone(), MonotonicClock::new())).collect())
}

/// preload's daemon(): whether this process shares its shards with a fork family (the NIC open
/// under `share = "family"`). daemon() is then done with the hooked fork, so that the child
/// shares the stack, and the parent's end hands the NIC to a keeper ([`daemon_parent_exits`]);
/// glibc's daemon() forks inside libc, where no hook sees it, and its parent `_exit`s, where no
/// exit handler runs.
pub fn daemon_shares() -> bool {
    if inside() {
        return false;
    }
    let Some(a) = RUNTIME.get().copied().flatten() else { return false };
    !FORKED.load(Ordering::Relaxed) && a.try_with(|rt| rt.sharing.family().is_some()) == Some(true)
}

/// preload's daemon() in a process that shares its shards ([`daemon_shares`]), in the parent
/// once the child is forked: the runtime's exit work (the opener hands the NIC to a keeper, a
/// child of the family leaves it), then `_exit(0)` as glibc's daemon() ends the parent, without
/// the program's exit handlers.
pub fn daemon_parent_exits() -> ! {
    close_port_at_exit();
    // SAFETY: _exit takes no memory and does not return.
    unsafe { libc::_exit(0) }
}

extern "C" fn close_port_at_exit() {
    shield::guard(
        "exit",
        || (),
        || {
            if let Some(a) = RUNTIME.get().copied().flatten() {
                if !FORKED.load(Ordering::Relaxed) {
                    a.at_exit();
                }
            }
        },
    );
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
// The calls `preload` makes, on the process-wide runtime (`Kernel` when not accelerated). Each
// runs inside `shield::guard`: a panic in it fails that call (EIO), counted, and no more.
// ---------------------------------------------------------------------------------------------

/// What a call that panicked returns (`shield`): EIO, an error every caller of a socket call
/// already handles.
fn failed<T>() -> Call<T> {
    Call::Done(Err(Errno(libc::EIO)))
}

/// A socket call of the application, `call`, made with `f` on the runtime `accel` gives (the
/// process-wide one for preload's hooks; tests pass their own), inside the shield: `Kernel`
/// when there is no runtime, EIO (counted) when it panicked.
pub fn enter<N: Nic + 'static, T>(
    call: &str,
    accel: impl FnOnce() -> Option<&'static Accel<N>>,
    f: impl FnOnce(&'static Accel<N>) -> Call<T>,
) -> Call<T> {
    shield::guard(call, failed, || match accel() {
        Some(a) => f(a),
        None => Call::Kernel,
    })
}

/// A hook tells the process-wide runtime of something (`call`), inside the shield.
fn notify(call: &str, f: impl FnOnce(&'static Accel<ProcessNic>)) {
    shield::guard(call, || (), || global().map_or((), f))
}

/// After the kernel created `fd` with `socket(domain, ty, protocol)`: track TCP and UDP sockets.
pub fn socket_created(fd: i32, domain: i32, ty: i32, protocol: i32) {
    if !inside() {
        notify("socket", |a| a.socket_created(fd, domain, ty, protocol));
    }
}

/// After the kernel created an epoll fd.
pub fn epoll_created(epfd: i32) {
    if epfd < 0 || inside() {
        return;
    }
    notify("epoll_create", |a| {
        if a.epoll_created(epfd) {
            set_tracked_state(epfd, TRACKED_EPOLL);
        }
    });
}

/// Before sendmsg passes `fds` over the unix socket `via` (SCM_RIGHTS): the accelerated
/// sockets among them are recorded for a receiver of the family, or the message is refused
/// (EOPNOTSUPP: the receiver could not use them; see `passing`). The caller gives the records
/// back with [`passing_failed`] when the send fails.
pub fn pass_rights(via: i32, fds: &[i32]) -> Result<Passing, Errno> {
    if inside() || !fds.iter().any(|&fd| tracked_state(fd) != 0) {
        return Ok(Passing::default());
    }
    shield::guard(
        "sendmsg",
        || Ok(Passing::default()),
        || match global() {
            Some(a) => a.pass_rights(via, fds),
            // A forked child that lost the runtime: what it inherited tracked is the parent's.
            None => match fds.iter().copied().find(|&fd| matches!(tracked_state(fd), 1 | TRACKED_DATAGRAM)) {
                Some(fd) => Err(passing::say_refused(fd, passing::Refusal::Alone)),
                None => Ok(Passing::default()),
            },
        },
    )
}

/// The send of a message [`pass_rights`] recorded failed (errno is kept).
pub fn passing_failed(passing: Passing) {
    if passing.is_empty() {
        return;
    }
    let errno = last_errno();
    notify("sendmsg", |a| a.passing_failed(passing));
    // SAFETY: this thread's errno, written as the failed call left it.
    unsafe { *libc::__errno_location() = errno.0 };
}

/// After recvmsg brought `fds` (SCM_RIGHTS): the sockets a process of the family passed become
/// this process's (errno is kept).
pub fn received_rights(fds: &[i32]) {
    if inside() || fds.is_empty() {
        return;
    }
    let errno = last_errno();
    notify("recvmsg", |a| a.received_rights(fds));
    // SAFETY: this thread's errno, as the call left it.
    unsafe { *libc::__errno_location() = errno.0 };
}

/// The process is about to change its credentials: open the NIC while it still may.
pub fn before_credentials_change() {
    if !inside() {
        notify("a credential change", |a| a.before_credentials_change());
    }
}

macro_rules! forward {
    ($(fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty;)*) => {
        $(
            pub fn $name($($arg: $ty),*) -> Call<$ret> {
                enter(stringify!($name), global, |a| a.$name($($arg),*))
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

/// Before a wait the kernel serves alone (ppoll, select, pselect or epoll_wait of kernel fds
/// only, which the shim hands on): sends what reads and writes of non-blocking sockets left
/// queued for the program's next wait. One atomic load when nothing is.
pub fn before_kernel_wait() {
    // A runtime not made yet has queued nothing: this must not be what makes it.
    if let Some(a) = RUNTIME.get().copied().flatten().filter(|_| !inside()) {
        shield::guard("poll", || (), || a.flush_held_output());
    }
}

/// `recv`/`read` into one buffer.
pub fn recv(fd: i32, buf: &mut [u8], dontwait: bool) -> Call<usize> {
    enter("recv", global, |a| a.recv(fd, buf, dontwait, false))
}

pub fn close(fd: i32) -> Call<()> {
    // The kernel closes the placeholder (or the kernel socket, or the epoll fd), even when the
    // runtime's part failed: the fd must not stay tracked for the next file with its number.
    let forget = || {
        set_tracked(fd, false);
        Call::Kernel
    };
    if process::in_vfork_child(OWNER.load(Ordering::Relaxed)) {
        // Its own fd goes; the parent's socket and records stay.
        return Call::Kernel;
    }
    shield::guard("close", forget, || {
        match global() {
            Some(a) => a.close(fd),
            None => set_tracked(fd, false),
        }
        Call::Kernel
    })
}

/// After a successful `dup`/`dup2`/`dup3`/F_DUPFD of `old` to `new`.
pub fn duplicated(old: i32, new: i32) {
    if process::in_vfork_child(OWNER.load(Ordering::Relaxed)) {
        return process::vfork_child_duplicated(old, new);
    }
    if process::forked_child_duplicated(old, new) {
        return;
    }
    notify("dup", |a| a.duplicated(old, new));
}

/// O_NONBLOCK through fcntl(F_SETFL) or ioctl(FIONBIO).
pub fn set_nonblock(fd: i32, on: bool) {
    notify("fcntl", |a| a.set_nonblock(fd, on));
}

/// The routing counters, for `pronghorn stat` (later) and tests.
pub fn routing_stats() -> Option<RoutingStats> {
    global().map(|a| a.routing_stats())
}

/// TCP_INFO of an accelerated connection, in Linux's `struct tcp_info`.
pub fn tcp_info(fd: i32) -> Call<libc::tcp_info> {
    shield::guard("getsockopt", failed, || match global().map(|a| a.tcp_info(fd)) {
        Some(Call::Done(r)) => Call::Done(r.map(|i| sockopt::linux_tcp_info(&i))),
        _ => Call::Kernel,
    })
}

/// The unit tests' allocator: some check what the shards place in the family arena, which only
/// `arena`'s allocator does (the integration tests keep the system's; the preloaded library
/// declares its own).
#[cfg(test)]
#[global_allocator]
static GLOBAL: arena::ScopedAlloc = arena::ScopedAlloc;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secure_exec_process_is_never_accelerated() {
        assert_eq!(start_decision(Some("42"), 42, true), Start::RefuseSecureExec);
        assert_eq!(start_decision(Some("42"), 42, false), Start::Accelerate);
        assert_eq!(start_decision(Some("41"), 42, false), Start::Kernel);
        assert_eq!(start_decision(None, 42, true), Start::Kernel);
    }
}
