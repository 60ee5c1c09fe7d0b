//! A fork family sharing one stack (`[runtime] share = "family"`, issue 24 stage 3): a child
//! forked after the NIC opened uses the accelerated sockets it inherited, on the parent's
//! shards, while the parent alone drives the NIC; a socket closes when the last process that
//! holds it closes it. The NIC is the in-memory pair with the peer inside it (it runs whenever
//! the runtime receives), made in the family arena so that both processes see one NIC; the peer
//! notes any process other than the opener that drives it.
//!
//! This binary's global allocator is `arena::ScopedAlloc`, as in the preloaded library. A child
//! reports with its exit status; every wait is bounded (a lost wakeup fails, never hangs).

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use config::Config;
use nic::clock::{Clock, MonotonicClock};
use nic::MacAddr;
use runtime::Accel;
use stack::shard::{Shard, ShardConfig, SocketId};
use testkit::mem::{pair, MemConfig, MemNic};

use common::{done, within, NicWithPeer, Peer, BOUND};

#[global_allocator]
static GLOBAL: arena::ScopedAlloc = arena::ScopedAlloc;

const OURS: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const PORT: u16 = 5432;

/// One test at a time: a fork while another test's thread is inside the arena's allocator
/// would leave its lock held in the child.
static SERIAL: Mutex<()> = Mutex::new(());

/// What the peer saw, shared with the test (in the family arena, like the whole NIC).
#[derive(Default)]
struct Seen {
    /// The test lets the peer send its request (after the fork: the child waits for it).
    send: AtomicBool,
    received: Mutex<Vec<u8>>,
    fin: AtomicBool,
    /// A process other than the one that made the NIC ran it (a child drove the NIC).
    driven_elsewhere: AtomicBool,
}

/// The peer: a client that connects to the runtime's listener and sends `request` once.
struct Client {
    shard: Shard<MemNic>,
    conn: Option<SocketId>,
    request: &'static [u8],
    seen: Arc<Seen>,
    opener: u32,
    clock: MonotonicClock,
}

impl Peer for Client {
    fn run(&mut self) {
        if std::process::id() != self.opener {
            self.seen.driven_elsewhere.store(true, Ordering::Relaxed);
        }
        let now = self.clock.now_ns();
        self.shard.poll(now);
        let id = *self.conn.get_or_insert_with(|| {
            self.shard.tcp_connect(SocketAddr::V4(SocketAddrV4::new(OURS, PORT))).expect("peer connect")
        });
        if !self.request.is_empty()
            && self.seen.send.load(Ordering::Relaxed)
            && self.shard.tcp_state(id) == Ok(stack::TcpState::Established)
        {
            let n = self.shard.tcp_send(id, self.request).unwrap_or(0);
            self.request = &self.request[n..];
        }
        let mut buf = [0u8; 256];
        while let Ok(n) = self.shard.tcp_recv(id, &mut buf) {
            if n == 0 {
                self.seen.fin.store(true, Ordering::Relaxed);
                break;
            }
            self.seen.received.lock().unwrap().extend_from_slice(&buf[..n]);
        }
        self.shard.poll(now);
    }
}

type ClientNic = NicWithPeer<Client>;

/// The runtime of the test before (each test's family is its own, in the one family arena of
/// this binary).
static BEFORE: Mutex<Option<&'static Accel<ClientNic>>> = Mutex::new(None);

/// A runtime with `share` whose peer connected to its listener (and sends "ping" once told):
/// the runtime, the listener's fd, the accepted connection's fd and what the peer sees. The
/// runtime of the test before is stopped first: its stack thread would go on using the family
/// arena outside this test's family lock (a process has one family in the preloaded library),
/// where the recovery after a dead lock holder takes the arena's state as the dead left it.
fn accepted(share: &str) -> (&'static Accel<ClientNic>, i32, i32, Arc<Seen>) {
    if let Some(before) = BEFORE.lock().unwrap_or_else(|p| p.into_inner()).take() {
        before.at_exit();
    }
    let toml = format!(
        "[nic]\npmd = \"af_xdp\"\niface = \"mem0\"\n[ipv4]\naddress = \"{OURS}/24\"\n[runtime]\ndrive = \"inline\"\nshare = \"{share}\"\n"
    );
    let cfg = Config::parse(&toml, Path::new("family.toml")).unwrap();
    let family = arena::enable_family().expect("ScopedAlloc is this binary's allocator");
    // The NIC (its frames, queues and the peer) in the arena: a fork shares it as it shares
    // the shard, so that what a child queued is what the parent sends.
    let (nic, seen) = {
        let _in = family.enter();
        let (a, b) = pair(MemConfig::default());
        let shard = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 0, 2]), Some((PEER, 24)), None, [7; 32]));
        let seen = Arc::new(Seen::default());
        let client = Client {
            shard,
            conn: None,
            request: b"ping",
            seen: seen.clone(),
            opener: std::process::id(),
            clock: MonotonicClock::new(),
        };
        (NicWithPeer { mine: a, peer: client }, seen)
    };
    let rt = Accel::with_nic(cfg, nic);
    // SAFETY: socket takes plain integers.
    let lfd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    rt.socket_created(lfd, libc::AF_INET, libc::SOCK_STREAM, 0);
    done(rt.bind(lfd, SocketAddr::V4(SocketAddrV4::new(OURS, PORT)))).unwrap();
    done(rt.listen(lfd, 8)).unwrap();
    let (conn, _) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
    *BEFORE.lock().unwrap_or_else(|p| p.into_inner()) = Some(rt);
    (rt, lfd, conn, seen)
}

/// Forks; the child runs `child` (its exit status: 0 when it returns true) and the parent gets
/// the child's pid. The child first says whether it kept the runtime: status 3 if not.
fn fork_child(rt: &'static Accel<ClientNic>, child: impl FnOnce() -> bool) -> libc::pid_t {
    let hold = rt.fork_prepare();
    // SAFETY: the child runs the runtime's calls and leaves with _exit; the test harness's
    // other threads hold no lock the child takes (the allocator's is reset by glibc's fork).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    let kept = hold.forked(pid);
    if pid == 0 {
        // A child that hangs (a lost wake) dies with the bound instead of outliving the test.
        // SAFETY: alarm takes an integer.
        unsafe { libc::alarm(BOUND.as_secs() as u32 * 2) };
        let ok = kept && std::panic::catch_unwind(std::panic::AssertUnwindSafe(child)).unwrap_or(false);
        // SAFETY: _exit has no preconditions.
        unsafe {
            libc::_exit(if !kept {
                3
            } else if ok {
                0
            } else {
                1
            })
        };
    }
    pid
}

fn read_exact(rt: &Accel<ClientNic>, fd: i32, n: usize) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let mut have = 0;
    while have < n {
        let k = done(rt.recv(fd, &mut got[have..], false, false)).unwrap();
        assert!(k > 0, "EOF after {have} of {n} bytes");
        have += k;
    }
    got
}

/// The parent drives the NIC (a poll on the listener, as a postmaster's select) until the child
/// has exited and `until` holds; returns the child's exit status.
fn drive_until(rt: &'static Accel<ClientNic>, lfd: i32, pid: libc::pid_t, until: impl Fn() -> bool) -> i32 {
    let start = Instant::now();
    let mut status = None;
    while status.is_none() || !until() {
        assert!(start.elapsed() < BOUND, "the family made no progress (a lost ring or wake?)");
        let mut fds = [libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
        done(rt.poll(&mut fds, 5)).unwrap();
        if status.is_none() {
            let mut st = 0;
            // SAFETY: `st` is a writable int.
            if unsafe { libc::waitpid(pid, &mut st, libc::WNOHANG) } == pid {
                status = Some(st);
            }
        }
    }
    let st = status.unwrap();
    assert!(libc::WIFEXITED(st), "the child died: status {st:#x}");
    libc::WEXITSTATUS(st)
}

/// Waits (bounded) until `done` holds, while the parent's stack thread drives.
fn until(done: impl Fn() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < BOUND, "the peer never saw the end of the connection");
        std::thread::yield_now();
    }
}

/// Waits (bounded) until process `pid` sleeps in the kernel (state S in /proc/PID/stat).
fn until_asleep(pid: libc::pid_t) {
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('S')) {
            return;
        }
        assert!(start.elapsed() < BOUND, "the child never went to sleep");
        std::thread::yield_now();
    }
}

fn close(rt: &Accel<ClientNic>, fd: i32) {
    rt.close(fd);
    // SAFETY: the placeholder the runtime released, ours to close.
    unsafe { libc::close(fd) };
}

/// Issue 24's PostgreSQL case: the parent accepted, forks a child to serve the connection and
/// closes its own copy; the child reads the request, answers and closes, while the parent alone
/// drives the NIC (its stack thread: the parent itself only waits for the child, outside the
/// runtime). The connection ends (the peer sees its FIN) when the child closes it.
#[test]
fn a_forked_child_serves_the_connection_its_parent_accepted_and_closed() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _listener, conn, seen) = accepted("family");
    let pid = fork_child(rt, || {
        let served = read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
        close(rt, conn);
        served
    });
    close(rt, conn);
    // The request comes once the child waits for it: the driver's pass must wake it.
    until_asleep(pid);
    seen.send.store(true, Ordering::Relaxed);
    let status = within("the child exits", move || {
        let mut st = 0;
        // SAFETY: `st` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        st
    });
    assert!(libc::WIFEXITED(status), "the child died: status {status:#x}");
    let status = libc::WEXITSTATUS(status);
    until(|| seen.fin.load(Ordering::Relaxed));
    assert_eq!(status, 0, "the child did not read the request and answer it (3: it lost the runtime)");
    assert_eq!(*seen.received.lock().unwrap(), b"pong", "the parent's close ended the child's connection");
    assert!(!seen.driven_elsewhere.load(Ordering::Relaxed), "the child drove the NIC");
}

/// Forks a child that closes its copy of `conn` and exits, and drives until it has.
fn a_child_closes_its_copy(rt: &'static Accel<ClientNic>, lfd: i32, conn: i32) {
    let pid = fork_child(rt, || {
        close(rt, conn);
        true
    });
    assert_eq!(drive_until(rt, lfd, pid, || true), 0);
}

/// The reverse: the child closes its copy of the connection and exits; the parent's copy still
/// works, and the peer sees no end of stream until the parent closes it too.
#[test]
fn a_child_closing_its_copy_leaves_the_parents_connection_open() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    a_child_closes_its_copy(rt, lfd, conn);
    parent_echoes_then_closes(rt, lfd, conn, &seen, || {});
}

/// The parent's copy of `conn` echoes the peer's request while the connection stays open
/// (another process's close or death did not end it), `before_close` runs, and the parent's
/// close ends it (the peer sees the FIN: no other process holds it).
fn parent_echoes_then_closes(
    rt: &'static Accel<ClientNic>,
    lfd: i32,
    conn: i32,
    seen: &Seen,
    before_close: impl FnOnce(),
) {
    seen.send.store(true, Ordering::Relaxed);
    assert_eq!(within("the parent's read", move || read_exact(rt, conn, 4)), b"ping");
    assert_eq!(done(rt.send(conn, b"pong", false)), Ok(4));
    drive_until_seen(rt, lfd, || seen.received.lock().unwrap().len() == 4);
    assert!(!seen.fin.load(Ordering::Relaxed), "another process ended the parent's connection");
    before_close();
    close(rt, conn);
    drive_until_seen(rt, lfd, || seen.fin.load(Ordering::Relaxed));
}

/// With `share = "off"` a child forked after the NIC opened does not keep the runtime (its
/// inherited sockets fail with EOPNOTSUPP, `runtime::forked_child_socket`).
#[test]
fn without_sharing_a_child_forked_after_the_nic_opened_keeps_no_runtime() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, _conn, _seen) = accepted("off");
    let pid = fork_child(rt, || true);
    assert_eq!(drive_until(rt, lfd, pid, || true), 3);
}

/// Drives until `until` holds (bounded).
fn drive_until_seen(rt: &'static Accel<ClientNic>, lfd: i32, until: impl Fn() -> bool) {
    let start = Instant::now();
    while !until() {
        assert!(start.elapsed() < BOUND, "the peer never saw it");
        let mut fds = [libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 }];
        done(rt.poll(&mut fds, 5)).unwrap();
    }
}

/// A pipe (read end, write end) for a child's poll to watch beside its sockets.
fn pipe() -> (i32, i32) {
    let mut p = [0i32; 2];
    // SAFETY: `p` has room for the two fds.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    (p[0], p[1])
}

/// Process `pid`'s `field` in /proc/PID/status (a count).
fn proc_status(pid: libc::pid_t, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} for {pid}"))
}

/// Waits (bounded) until process `pid` is stopped (state T).
fn until_stopped(pid: libc::pid_t) {
    let start = Instant::now();
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.rsplit_once(')').is_some_and(|(_, rest)| rest.trim_start().starts_with('T')) {
            return;
        }
        assert!(start.elapsed() < BOUND, "the child never stopped");
        std::thread::yield_now();
    }
}

/// PostgreSQL's backends wait in epoll on their socket and a latch pipe: a child's thread that
/// also watches kernel fds sleeps in poll(2) on an eventfd that the driver writes. That eventfd
/// must be the child's own: a child that inherited its forking thread's parker shared one
/// eventfd with its parent and its siblings, and a sibling woken on it drained the wake meant
/// for another. Here child A sleeps on its connection and a pipe, and is stopped; the request
/// comes, the driver writes A's eventfd and wakes B (asleep on the listener and a pipe), which
/// reads its eventfd and sleeps again; A, continued, must find its wake and serve the request.
#[test]
fn a_childs_wake_is_its_own_when_a_sibling_drains_its_eventfd() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (a_in, _a_out) = pipe();
    let (b_in, b_out) = pipe();
    // The forking thread has a parker before the fork, as the postmaster has from its select.
    let mut fds = [
        libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: b_in, events: libc::POLLIN, revents: 0 },
    ];
    assert_eq!(done(rt.poll(&mut fds, 1)), Ok(0));
    let a = fork_child(rt, || {
        let mut fds = [
            libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: a_in, events: libc::POLLIN, revents: 0 },
        ];
        let woken = done(rt.poll(&mut fds, -1)) == Ok(1) && fds[0].revents & libc::POLLIN != 0;
        let served = woken && read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
        close(rt, conn);
        served
    });
    let b = fork_child(rt, || {
        let mut fds = [
            libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: b_in, events: libc::POLLIN, revents: 0 },
        ];
        let r = done(rt.poll(&mut fds, -1));
        close(rt, conn);
        r == Ok(1) && fds[1].revents & libc::POLLIN != 0
    });
    close(rt, conn);
    until_asleep(a);
    until_asleep(b);
    // SAFETY: kill takes integers; `a` is our child.
    unsafe { libc::kill(a, libc::SIGSTOP) };
    until_stopped(a);
    let b_sleeps = proc_status(b, "voluntary_ctxt_switches");
    seen.send.store(true, Ordering::Relaxed);
    // B was woken by the request's pass and went back to sleep: it read its eventfd first.
    until(|| proc_status(b, "voluntary_ctxt_switches") > b_sleeps);
    until_asleep(b);
    // SAFETY: as above.
    unsafe { libc::kill(a, libc::SIGCONT) };
    let status = within("child A exits", move || {
        let mut st = 0;
        // SAFETY: `st` is a writable int.
        assert_eq!(unsafe { libc::waitpid(a, &mut st, 0) }, a);
        st
    });
    // SAFETY: one byte from a live buffer to our pipe.
    assert_eq!(unsafe { libc::write(b_out, b"x".as_ptr().cast(), 1) }, 1);
    let b_status = within("child B exits", move || {
        let mut st = 0;
        // SAFETY: `st` is a writable int.
        assert_eq!(unsafe { libc::waitpid(b, &mut st, 0) }, b);
        st
    });
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "child A: status {status:#x}");
    assert!(libc::WIFEXITED(b_status) && libc::WEXITSTATUS(b_status) == 0, "child B: status {b_status:#x}");
    until(|| *seen.received.lock().unwrap() == b"pong");
}

/// Each of this process's threads whose name starts with `prefix`, with the signals it blocks
/// (SigBlk: bit n - 1 for signal n).
fn blocked_by_threads(prefix: &str) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.starts_with(prefix) {
            continue;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        let mask = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).expect("SigBlk");
        found.push((comm.trim().to_string(), u64::from_str_radix(mask.trim(), 16).unwrap()));
    }
    found
}

/// The PostgreSQL 15 postmaster blocks its signals except while it sleeps in select, and its
/// handlers (SIGCHLD's reaps a backend, SIGUSR1's forks) edit its list of backends: the kernel
/// gives a signal sent to the process to a thread that does not block it, so a thread of ours
/// with the application's mask of the moment ran those handlers beside the postmaster's own
/// code, and pgbench -C (a backend forked and reaped per transaction) left the list a loop
/// that the postmaster spun in. The stack thread the opener starts at the fork blocks them all.
#[test]
fn the_stack_thread_leaves_the_applications_signals_to_its_threads() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, _seen) = accepted("family");
    a_child_closes_its_copy(rt, lfd, conn);
    let stack = blocked_by_threads("pronghorn-stack");
    assert!(!stack.is_empty(), "no stack thread after a sharing fork");
    let asynchronous = [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGPIPE,
        libc::SIGALRM,
        libc::SIGTERM,
        libc::SIGCHLD,
    ];
    for (name, mask) in stack {
        for sig in asynchronous {
            assert!(mask & (1 << (sig - 1)) != 0, "{name} takes signal {sig} (SigBlk {mask:x})");
        }
    }
}

/// Reads one byte from `fd` (bounded): how a child says where it got to.
fn wait_for_word(fd: i32) {
    within("the child's word", move || {
        let mut b = [0u8; 1];
        // SAFETY: one byte into a live buffer.
        assert_eq!(unsafe { libc::read(fd, b.as_mut_ptr().cast(), 1) }, 1, "the child died before its word");
    });
}

/// Writes one byte to `fd` (in a child: no allocation).
fn say(fd: i32) {
    // SAFETY: one byte from a live buffer.
    unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
}

/// SIGKILLs our child `pid` and reaps it.
fn kill_9(pid: libc::pid_t) {
    // SAFETY: kill and waitpid take integers and a writable int.
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        let mut st = 0;
        assert_eq!(libc::waitpid(pid, &mut st, 0), pid);
        assert!(libc::WIFSIGNALED(st) && libc::WTERMSIG(st) == libc::SIGKILL, "status {st:#x}");
    }
}

/// Issue 24: "kill -9 of a process holding the stack lock: the others carry on". A child that
/// shares the parent's connection takes the family lock (as inside a call), says so on a pipe,
/// and is killed. The parent's next hold finds the lock's holder dead and gives back what the
/// child held before it goes on: the connection echoes through the parent's copy, and closing
/// that copy ends it (the peer sees the FIN), as the child's hold went with it. Without the
/// recovery the dead child still held it: the parent's close left it open.
#[test]
fn a_child_killed_holding_the_family_lock_leaves_the_family_serving_and_its_holds_released() {
    killed_holding_the_lock(false);
}

/// The same kill inside a scope of the family arena (where a shard call runs): the successor
/// is told that the dead was in the middle of an update (counted), and the family goes on.
#[test]
fn a_child_killed_inside_a_call_on_the_shared_stack_is_counted_mid_update() {
    killed_holding_the_lock(true);
}

fn killed_holding_the_lock(in_scope: bool) {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (holding_r, holding_w) = pipe();
    let pid = fork_child(rt, || {
        rt.with_locks_held(|| {
            let _in = in_scope.then(|| arena::family().expect("the family arena").enter());
            say(holding_w);
            loop {
                // SAFETY: pause has no preconditions.
                unsafe { libc::pause() };
            }
        });
        false
    });
    wait_for_word(holding_r);
    kill_9(pid);
    parent_echoes_then_closes(rt, lfd, conn, &seen, || {
        let s = rt.family_stats().expect("a family");
        let mid = u64::from(in_scope);
        assert_eq!((s.dead_processes, s.dead_lock_holders, s.dead_mid_update, s.members), (1, 1, mid, 0), "{s:?}");
    });
}

/// A child killed while it does not hold the lock: asleep in poll(2) on the connection only it
/// holds and a pipe (PostgreSQL's backend in epoll_wait on its socket and its latch), so its
/// eventfd is in the family's table and its thread counted asleep. The opener's periodic look
/// finds it dead: the connection closes (the peer sees the FIN, as Linux closes a dead
/// process's socket), and its sleep is forgotten (no sleeper counted, its slot free).
#[test]
fn a_child_killed_asleep_has_its_connection_closed_and_its_sleep_forgotten() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (latch, _latch_w) = pipe();
    let pid = fork_child(rt, || {
        let mut fds = [
            libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: latch, events: libc::POLLIN, revents: 0 },
        ];
        let _ = done(rt.poll(&mut fds, -1));
        false
    });
    close(rt, conn);
    until_asleep(pid);
    let asleep = rt.family_stats().expect("a family");
    assert_eq!((asleep.members, asleep.sleepers, asleep.fd_sleepers), (1, 1, 1), "premise: {asleep:?}");
    kill_9(pid);
    drive_until_seen(rt, lfd, || seen.fin.load(Ordering::Relaxed));
    let stats = rt.family_stats().expect("a family");
    assert_eq!(
        (stats.dead_processes, stats.dead_lock_holders, stats.members, stats.sleepers, stats.fd_sleepers),
        (1, 0, 0, 0, 0),
        "{stats:?}"
    );
}

/// A child that leaves through the runtime's exit (`Accel::at_exit`) is not counted dead: it
/// leaves the process table, with whatever it still held (here the listener it inherited).
#[test]
fn a_child_that_exits_leaves_the_family_without_being_counted_dead() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, _seen) = accepted("family");
    let pid = fork_child(rt, || {
        close(rt, conn);
        rt.at_exit();
        true
    });
    assert_eq!(drive_until(rt, lfd, pid, || true), 0);
    let stats = rt.family_stats().expect("a family");
    assert_eq!((stats.dead_processes, stats.members), (0, 0), "{stats:?}");
}
