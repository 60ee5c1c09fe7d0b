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
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, Ordering};
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
    let (rt, lfd, seen) = listening(share);
    let (conn, _) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
    (rt, lfd, conn, seen)
}

/// A runtime with `share` listening where its peer connects (and sends "ping" once told): the
/// runtime, the listener's fd and what the peer sees. The runtime of the test before is
/// stopped first (see [`accepted`]).
fn listening(share: &str) -> (&'static Accel<ClientNic>, i32, Arc<Seen>) {
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
        (NicWithPeer { mine: a, peer: client, rx_fd: None }, seen)
    };
    let rt = Accel::with_nic(cfg, nic);
    // SAFETY: socket takes plain integers.
    let lfd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0) };
    rt.socket_created(lfd, libc::AF_INET, libc::SOCK_STREAM, 0);
    done(rt.bind(lfd, SocketAddr::V4(SocketAddrV4::new(OURS, PORT)))).unwrap();
    done(rt.listen(lfd, 8)).unwrap();
    *BEFORE.lock().unwrap_or_else(|p| p.into_inner()) = Some(rt);
    (rt, lfd, seen)
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

/// Waits for child `pid` (bounded) and returns its exit status (0: it did what it checks).
fn exit_status(pid: libc::pid_t, what: &'static str) -> i32 {
    let st = within(what, move || {
        let mut st = 0;
        // SAFETY: `st` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        st
    });
    assert!(libc::WIFEXITED(st), "{what}: the child died, status {st:#x}");
    libc::WEXITSTATUS(st)
}

/// A child's part: sleeps in poll(2) on `conn` and the pipe `pipe_in` until the request comes,
/// answers it and closes its copy. Whether it was woken to the request and served it.
fn serves_after_poll(rt: &'static Accel<ClientNic>, conn: i32, pipe_in: i32) -> bool {
    let mut fds = [
        libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: pipe_in, events: libc::POLLIN, revents: 0 },
    ];
    let woken = done(rt.poll(&mut fds, -1)) == Ok(1) && fds[0].revents & libc::POLLIN != 0;
    let served = woken && read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
    close(rt, conn);
    served
}

/// PostgreSQL's backends wait in epoll on their socket and a latch pipe: a child's thread that
/// also watches kernel fds sleeps in poll(2) on an eventfd that the driver writes. That eventfd
/// must be the child's own: a child that inherited its forking thread's parker shared one
/// eventfd with its parent and its siblings, and a sibling woken on it drained the wake meant
/// for another. Here children A and B both sleep on the connection and a pipe, and A is
/// stopped; the request comes, the driver writes both eventfds, B wakes, reads its eventfd
/// and leaves; A, continued, must find its own wake and serve the request.
#[test]
fn a_childs_wake_is_its_own_when_a_sibling_drains_its_eventfd() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (a_in, _a_out) = pipe();
    let (b_in, _b_out) = pipe();
    // The forking thread has a parker before the fork, as the postmaster has from its select.
    let mut fds = [
        libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: b_in, events: libc::POLLIN, revents: 0 },
    ];
    assert_eq!(done(rt.poll(&mut fds, 1)), Ok(0));
    let a = fork_child(rt, || serves_after_poll(rt, conn, a_in));
    let b = fork_child(rt, || {
        let mut fds = [
            libc::pollfd { fd: conn, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: b_in, events: libc::POLLIN, revents: 0 },
        ];
        let r = done(rt.poll(&mut fds, -1));
        close(rt, conn);
        r == Ok(1) && fds[0].revents & libc::POLLIN != 0
    });
    close(rt, conn);
    until_asleep(a);
    until_asleep(b);
    // SAFETY: kill takes integers; `a` is our child.
    unsafe { libc::kill(a, libc::SIGSTOP) };
    until_stopped(a);
    seen.send.store(true, Ordering::Relaxed);
    // B was woken by the request's pass and read its eventfd on the way out.
    assert_eq!(exit_status(b, "child B exits"), 0, "child B was not woken to the request");
    // SAFETY: as above.
    unsafe { libc::kill(a, libc::SIGCONT) };
    assert_eq!(exit_status(a, "child A exits"), 0, "child A did not serve the request");
    until(|| *seen.received.lock().unwrap() == b"pong");
}

/// Targeted wakes: a stack pass that changed a connection wakes the children asleep on that
/// connection and no other. Child A sleeps on the connection and a pipe, child B on the
/// listener and a pipe (PostgreSQL's backends and nginx's workers sleep so); the request for
/// A wakes A, which serves it, while B sleeps through it and the answer's passes. With the
/// broadcast (every change woke every sleeping child) B woke and slept again at each pass.
#[test]
fn a_change_wakes_the_children_waiting_on_that_socket_and_no_other() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (a_in, _a_out) = pipe();
    let (b_in, b_out) = pipe();
    let a = fork_child(rt, || serves_after_poll(rt, conn, a_in));
    let b = fork_child(rt, || {
        close(rt, conn);
        let mut fds = [
            libc::pollfd { fd: lfd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: b_in, events: libc::POLLIN, revents: 0 },
        ];
        let r = done(rt.poll(&mut fds, -1));
        r == Ok(1) && fds[1].revents & libc::POLLIN != 0
    });
    close(rt, conn);
    until_asleep(a);
    until_asleep(b);
    let b_sleeps = proc_status(b, "voluntary_ctxt_switches");
    seen.send.store(true, Ordering::Relaxed);
    assert_eq!(exit_status(a, "child A exits"), 0, "child A did not serve the request");
    // The answer left on a pass of the stack thread after the one that brought the request, so
    // any wake of that pass was sent by now; B is back asleep if it was woken.
    until(|| *seen.received.lock().unwrap() == b"pong");
    until_asleep(b);
    let b_woken = proc_status(b, "voluntary_ctxt_switches") - b_sleeps;
    // SAFETY: one byte from a live buffer to our pipe.
    assert_eq!(unsafe { libc::write(b_out, b"x".as_ptr().cast(), 1) }, 1);
    assert_eq!(exit_status(b, "child B exits"), 0, "child B missed its pipe");
    assert_eq!(b_woken, 0, "child B, asleep on the listener, was woken by the connection's changes");
}

/// How long a child waits for a wake before it counts it lost.
const LOST_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// The value thread `tid` of this process waits for in a process-shared futex (FUTEX_WAIT
/// without FUTEX_PRIVATE_FLAG, op 0), as /proc/self/task/TID/syscall shows it: the family's
/// words (its lock, its sleepers'); this process's own locks wait in private futexes.
fn shared_futex_wait(tid: i32) -> Option<String> {
    let line = std::fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).ok()?;
    let f: Vec<&str> = line.split_whitespace().collect();
    (f.len() > 3 && f[0] == libc::SYS_futex.to_string() && f[2] == "0x0").then(|| f[3].to_string())
}

/// Whether thread `tid` sleeps on a family sleeper's word: a shared futex wait for the value
/// ASLEEP (2); the family lock's waits are for other values.
fn asleep_on_a_sleeper(tid: i32) -> bool {
    shared_futex_wait(tid).as_deref() == Some("0x2")
}

/// A wake from the child's own process: thread T1 of a child sleeps in epoll_wait on a set
/// whose only member (the listener) does not change, registered in the family arena; thread T2
/// adds the connection, writable, to the set. Linux wakes T1 (ep_insert queues a ready fd and
/// wakes the set's waiters); here the add wakes T1's parker, which must reach the sleeper T1
/// sleeps on (the driver's passes never see an epoll_ctl). T2 waits for T1's answer at most
/// [`LOST_AFTER`]: a lost wake fails the child.
#[test]
fn an_epoll_ctl_in_a_child_wakes_its_sibling_thread_asleep_in_epoll_wait() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, _seen) = accepted("family");
    let pid = fork_child(rt, move || {
        // SAFETY: epoll_create1 takes an integer.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epfd >= 0 && rt.epoll_created(epfd));
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, lfd, libc::EPOLLIN as u32, 1)).unwrap();
        let tid = Arc::new(std::sync::atomic::AtomicI32::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        {
            let tid = tid.clone();
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() }, Ordering::Release);
                let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
                let n = done(rt.epoll_wait(epfd, &mut out, -1));
                let _ = tx.send(n == Ok(1) && { out[0].u64 } == 2 && { out[0].events } & libc::EPOLLOUT as u32 != 0);
            });
        }
        let start = Instant::now();
        while !asleep_on_a_sleeper(tid.load(Ordering::Acquire)) {
            if start.elapsed() > LOST_AFTER {
                return false;
            }
            std::thread::yield_now();
        }
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, conn, libc::EPOLLOUT as u32, 2)).unwrap();
        rx.recv_timeout(LOST_AFTER).unwrap_or(false)
    });
    close(rt, conn);
    assert_eq!(exit_status(pid, "the child exits"), 0, "T1 slept through its sibling's epoll_ctl");
}

/// PostgreSQL's backend waits for its query in epoll_wait, on its connection and a latch pipe
/// (`WaitEventSetWait`). The driver's pass that brings the request wakes it, and the look the
/// woken thread makes must find the request: a child's epoll ready lists are its own, marked
/// from the family's change count, which the child used to read only at the end of its hold,
/// after that look. The look then found nothing, the thread registered again, and the end of
/// the hold woke it for a second hold: every family wake was counted idle.
#[test]
fn a_child_woken_in_epoll_wait_by_its_request_finds_it_at_once() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, conn, seen) = accepted("family");
    let (latch_in, _latch_out) = pipe();
    let pid = fork_child(rt, move || {
        // SAFETY: epoll_create1 takes an integer.
        let epfd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        assert!(epfd >= 0 && rt.epoll_created(epfd));
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, conn, libc::EPOLLIN as u32, 1)).unwrap();
        done(rt.epoll_ctl(epfd, libc::EPOLL_CTL_ADD, latch_in, libc::EPOLLIN as u32, 2)).unwrap();
        let mut out = [libc::epoll_event { events: 0, u64: 0 }; 4];
        let n = done(rt.epoll_wait(epfd, &mut out, -1));
        let woken = n == Ok(1) && { out[0].u64 } == 1;
        let served = woken && read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
        close(rt, conn);
        served
    });
    close(rt, conn);
    // Asleep in epoll_wait's poll(2) (registered), not on the family lock on the way there.
    until(|| in_poll(pid));
    let before = rt.family_stats().expect("a family");
    seen.send.store(true, Ordering::Relaxed);
    assert_eq!(exit_status(pid, "the child exits"), 0, "the child did not serve the request");
    until(|| *seen.received.lock().unwrap() == b"pong");
    let after = rt.family_stats().expect("a family");
    assert!(after.wakes > before.wakes, "premise: the request woke the child through the family");
    assert_eq!(after.wakes_idle, before.wakes_idle, "the woken child found nothing and slept again");
}

/// The child's runtime and connection, for [`sends_from_a_handler`].
static HANDLER_RT: AtomicPtr<Accel<ClientNic>> = AtomicPtr::new(std::ptr::null_mut());
static HANDLER_FD: AtomicI32 = AtomicI32::new(-1);
/// What the handler's send returned (bytes, or -errno); set before `HANDLED`.
static HANDLER_SENT: AtomicI32 = AtomicI32::new(0);
static HANDLED: AtomicBool = AtomicBool::new(false);

/// A SIGUSR1 handler that sends on the connection, as PostgreSQL's backend sends its goodbye
/// from its SIGQUIT handler: through the runtime when `runtime::tracked` says the fd is its
/// (preload's send hook decides so), through the kernel otherwise.
extern "C" fn sends_from_a_handler(_: i32) {
    let fd = HANDLER_FD.load(Ordering::Acquire);
    let sent = if runtime::tracked(fd) {
        // SAFETY: the child stored its runtime, leaked for the process's life, before the signal.
        let rt = unsafe { &*HANDLER_RT.load(Ordering::Acquire) };
        match done(rt.send(fd, b"!", false)) {
            Ok(n) => n as i32,
            Err(e) => -e.0,
        }
    } else {
        // SAFETY: one byte from a live buffer.
        let n = unsafe { libc::send(fd, b"!".as_ptr().cast(), 1, 0) };
        if n < 0 {
            -std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
        } else {
            n as i32
        }
    };
    HANDLER_SENT.store(sent, Ordering::Release);
    HANDLED.store(true, Ordering::Release);
}

/// A signal handler that makes a socket call while its thread is on its way into the runtime:
/// a child's thread T sends on its connection and waits for the family lock (the parent holds
/// it), holding its own process's runtime lock; a signal's handler on T sends on the same
/// connection. The handler's call must not take the runtime lock T holds (a deadlock: the
/// handler never returns, T never gets on, and the family lock T then takes is never released:
/// PostgreSQL's backends, told by SIGQUIT to end while pgbench ran, hung the whole family so).
/// It goes to the kernel, as a call made inside a hold does: on the placeholder, ENOTSOCK. T's
/// own send goes through once the parent lets the lock go.
#[test]
fn a_signal_handlers_socket_call_while_its_thread_waits_for_the_family_lock_goes_to_the_kernel() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, conn, _seen) = accepted("family");
    let (held_r, held_w) = pipe();
    let (release_r, release_w) = pipe();
    let pid = fork_child(rt, move || {
        HANDLER_RT.store(rt as *const Accel<ClientNic> as *mut Accel<ClientNic>, Ordering::Release);
        HANDLER_FD.store(conn, Ordering::Release);
        // SAFETY: a zeroed sigaction with a handler of the right signature, for SIGUSR1.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = sends_from_a_handler as *const () as usize;
            assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        }
        // The parent holds the family lock from here on.
        wait_for_word(held_r);
        let tid = Arc::new(AtomicI32::new(0));
        let t = {
            let tid = tid.clone();
            std::thread::spawn(move || {
                // SAFETY: gettid has no preconditions.
                tid.store(unsafe { libc::gettid() }, Ordering::Release);
                done(rt.send(conn, b"T", false))
            })
        };
        let start = Instant::now();
        // T waits for the family lock: a process-shared futex, where this process's own locks
        // (the runtime's, the allocator's) are private.
        let in_futex = || tid.load(Ordering::Acquire) != 0 && shared_futex_wait(tid.load(Ordering::Acquire)).is_some();
        while !in_futex() {
            if start.elapsed() > LOST_AFTER {
                say(release_w);
                return false;
            }
            std::thread::yield_now();
        }
        // SAFETY: tgkill takes integers: this process's thread T.
        unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid.load(Ordering::Acquire), libc::SIGUSR1) };
        let start = Instant::now();
        while !HANDLED.load(Ordering::Acquire) && start.elapsed() < LOST_AFTER {
            std::thread::yield_now();
        }
        say(release_w);
        if !HANDLED.load(Ordering::Acquire) {
            // The handler is stuck on the lock its own thread holds: T never gets on.
            return false;
        }
        t.join().ok() == Some(Ok(1)) && HANDLER_SENT.load(Ordering::Acquire) == -libc::ENOTSOCK
    });
    let holder = std::thread::spawn(move || {
        rt.with_locks_held(|| {
            say(held_w);
            let mut p = libc::pollfd { fd: release_r, events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd; bounded, should the child never say.
            unsafe { libc::poll(&mut p, 1, 2 * LOST_AFTER.as_millis() as i32) };
        })
    });
    let status = exit_status(pid, "the child exits");
    holder.join().unwrap();
    close(rt, conn);
    for fd in [held_r, held_w, release_r, release_w] {
        // SAFETY: our pipes' fds.
        unsafe { libc::close(fd) };
    }
    assert_eq!(status, 0, "the handler's send never returned, or T's send or the handler's went otherwise");
}

/// A child killed while asleep never drops its registrations: the driver's wake finds it gone
/// (ESRCH) and its next hold forgets the dead process's sleepers (`Family::forget_sleeps_of`,
/// which the recovery of a dead process calls too). Without that its sleeper stayed taken for
/// good and named on the socket.
#[test]
fn a_child_killed_asleep_leaves_no_sleeper_behind() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, conn, seen) = accepted("family");
    let (c_in, _c_out) = pipe();
    let c = fork_child(rt, || serves_after_poll(rt, conn, c_in));
    // Registered, and asleep in poll(2): killed between the two, it would never be sent a wake
    // (the driver marks a sleeper not yet asleep woken and sends nothing), so no wake would
    // find it gone; that case is the dead-process recovery's, not this test's.
    let registered = || rt.family_sleepers() == Some(1) && in_poll(c);
    let start = Instant::now();
    while !registered() {
        assert!(start.elapsed() < BOUND, "the child never registered asleep");
        std::thread::yield_now();
    }
    // SAFETY: kill takes integers; `c` is our child.
    unsafe { libc::kill(c, libc::SIGKILL) };
    let mut st = 0;
    // SAFETY: `st` is a writable int; reaped: its pid is gone.
    assert_eq!(unsafe { libc::waitpid(c, &mut st, 0) }, c);
    // The request changes the connection the dead child was registered on.
    seen.send.store(true, Ordering::Relaxed);
    assert_eq!(within("the parent's read", move || read_exact(rt, conn, 4)), b"ping");
    let start = Instant::now();
    while rt.family_sleepers() != Some(0) {
        assert!(start.elapsed() < BOUND, "the dead child's sleeper is still taken");
        std::thread::yield_now();
    }
}

/// Whether process `pid`'s main thread sleeps in poll(2) or ppoll(2) (/proc/PID/syscall names
/// the call a blocked thread is in).
fn in_poll(pid: libc::pid_t) -> bool {
    let line = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
    let call = line.split_whitespace().next().unwrap_or("");
    call == libc::SYS_poll.to_string() || call == libc::SYS_ppoll.to_string()
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

/// A unix socketpair, for passing fds.
fn unix_pair() -> (i32, i32) {
    let mut p = [0i32; 2];
    // SAFETY: `p` has room for the two fds.
    assert_eq!(unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_STREAM, 0, p.as_mut_ptr()) }, 0);
    (p[0], p[1])
}

/// A one-byte message over `via` whose control buffer passes `fd` (SCM_RIGHTS), in `space`.
fn rights_message(space: &mut [u64; 4], byte: &mut u8, iov: &mut libc::iovec, fd: Option<i32>) -> libc::msghdr {
    *iov = libc::iovec { iov_base: (byte as *mut u8).cast(), iov_len: 1 };
    // SAFETY: all zeroes is a valid msghdr; the fields set point to `iov` and `space`, which
    // outlive its use; CMSG_* compute within `space` (32 bytes: a header and one int fit).
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = iov;
        msg.msg_iovlen = 1;
        msg.msg_control = space.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        if let Some(fd) = fd {
            let h = libc::CMSG_FIRSTHDR(&msg);
            (*h).cmsg_level = libc::SOL_SOCKET;
            (*h).cmsg_type = libc::SCM_RIGHTS;
            (*h).cmsg_len = libc::CMSG_LEN(4) as usize;
            libc::CMSG_DATA(h).cast::<i32>().write_unaligned(fd);
        }
        msg
    }
}

/// Passes `fd` over the unix socket `via` as the preloaded sendmsg does: the runtime records it
/// (or refuses), the kernel sends, and a failed send gives the records back.
fn send_fd(rt: &Accel<ClientNic>, via: i32, fd: i32) -> Result<(), runtime::Errno> {
    let passing = rt.pass_rights(via, &[fd])?;
    let (mut space, mut byte, mut iov) = ([0u64; 4], b'f', libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 });
    let msg = rights_message(&mut space, &mut byte, &mut iov, Some(fd));
    // SAFETY: `msg` and what it points to are alive across the call.
    if unsafe { libc::sendmsg(via, &msg, 0) } != 1 {
        rt.passing_failed(passing);
        panic!("sendmsg: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

/// Receives one fd over the unix socket `via` (waiting in the kernel) as the preloaded recvmsg
/// does: the runtime then installs it if it is a socket passed within the family.
fn recv_fd(rt: &Accel<ClientNic>, via: i32) -> i32 {
    let (mut space, mut byte, mut iov) = ([0u64; 4], 0u8, libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 });
    let mut msg = rights_message(&mut space, &mut byte, &mut iov, None);
    // SAFETY: `msg` and what it points to are alive across the call; the kernel writes the fd
    // into `space`, read back through CMSG_DATA.
    let fd = unsafe {
        assert_eq!(libc::recvmsg(via, &mut msg, 0), 1, "recvmsg: {}", std::io::Error::last_os_error());
        let h = libc::CMSG_FIRSTHDR(&msg);
        assert!(!h.is_null() && (*h).cmsg_type == libc::SCM_RIGHTS, "no fd came");
        libc::CMSG_DATA(h).cast::<i32>().read_unaligned()
    };
    rt.received_rights(&[fd]);
    fd
}

/// Issue 24, SCM_RIGHTS within a family: the parent accepts a connection after it forked a
/// child, passes it to the child over a unix socketpair and closes its own; the child serves
/// the request on the socket it received, passes it back and closes its own; the parent
/// answers once more on the socket it received and closes it: the peer gets both answers and
/// then the end of the stream, from the last close.
#[test]
fn a_connection_passed_over_a_unix_socket_is_served_by_the_family_process_that_receives_it() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, seen) = listening("family");
    let (ours, theirs) = unix_pair();
    let pid = fork_child(rt, || {
        // SAFETY: the parent's end, not ours to use.
        unsafe { libc::close(ours) };
        let conn = recv_fd(rt, theirs);
        let served = read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
        let passed_back = send_fd(rt, theirs, conn).is_ok();
        close(rt, conn);
        served && passed_back
    });
    // SAFETY: the child's end, not ours to use.
    unsafe { libc::close(theirs) };
    let (conn, _) = within("accept", move || done(rt.accept(lfd, 0))).unwrap();
    seen.send.store(true, Ordering::Relaxed);
    assert_eq!(send_fd(rt, ours, conn), Ok(()), "the family's child was refused the connection");
    close(rt, conn);
    let back = within("the connection comes back", move || recv_fd(rt, ours));
    assert_eq!(done(rt.send(back, b"back", false)), Ok(4), "the connection passed back is not the parent's");
    let status = within("the child exits", move || {
        let mut st = 0;
        // SAFETY: `st` is a writable int.
        assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
        st
    });
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the child did not serve: status {status:#x}");
    until(|| seen.received.lock().unwrap().len() == 8);
    assert!(!seen.fin.load(Ordering::Relaxed), "a close while another process held the connection ended it");
    close(rt, back);
    until(|| seen.fin.load(Ordering::Relaxed));
    assert_eq!(*seen.received.lock().unwrap(), b"pongback");
    // SAFETY: our end of the pair.
    unsafe { libc::close(ours) };
}

/// A unix listener at an abstract name (`name` and this test's pid): its fd, address and
/// address length.
fn unix_listener(name: &str) -> (i32, libc::sockaddr_un, libc::socklen_t) {
    // SAFETY: plain socket calls on a sockaddr_un of ours.
    unsafe {
        let l = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
        let mut addr: libc::sockaddr_un = std::mem::zeroed();
        addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
        let name = format!("pronghorn-{name}-{}", std::process::id());
        for (i, b) in name.bytes().enumerate() {
            addr.sun_path[i + 1] = b as libc::c_char;
        }
        let len = (std::mem::size_of::<libc::sa_family_t>() + 1 + name.len()) as libc::socklen_t;
        assert_eq!(libc::bind(l, (&addr as *const libc::sockaddr_un).cast(), len), 0);
        assert_eq!(libc::listen(l, 1), 0);
        (l, addr, len)
    }
}

/// A process that is not of the family (here a child forked without the runtime's fork, which
/// connected to a unix listener of the parent) could not use an accelerated socket: passing one
/// to it is still refused with EOPNOTSUPP.
#[test]
fn a_socket_passed_to_a_process_outside_the_family_is_refused_with_eopnotsupp() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, conn, _seen) = accepted("family");
    let (listener, addr, len) = unix_listener("outsider");
    // SAFETY: the child only makes a socket, connects, waits for the end of stream and leaves
    // with _exit (no allocation, no lock).
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0);
    if pid == 0 {
        // SAFETY: as above.
        unsafe {
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let ok = libc::connect(s, (&addr as *const libc::sockaddr_un).cast(), len) == 0;
            let mut b = 0u8;
            while libc::read(s, (&mut b as *mut u8).cast(), 1) > 0 {}
            libc::_exit(if ok { 0 } else { 1 });
        }
    }
    // SAFETY: accept on our listener; no address asked for.
    let outsider = unsafe { libc::accept(listener, std::ptr::null_mut(), std::ptr::null_mut()) };
    assert!(outsider >= 0);
    assert_eq!(rt.pass_rights(outsider, &[conn]).err(), Some(runtime::Errno::EOPNOTSUPP));
    // SAFETY: our fds; the child sees the end of stream and exits.
    unsafe {
        libc::close(outsider);
        libc::close(listener);
    }
    let mut st = 0;
    // SAFETY: `st` is a writable int.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "the outsider did not connect: {st:#x}");
}

/// A socket in flight to a process of the family that exits without receiving it must not
/// stay open for ever: the family's next pass drops the record and its hold, and the socket,
/// which nobody else holds (the sender closed its fd), closes: the peer sees its end.
#[test]
fn a_socket_in_flight_to_a_process_that_exited_closes_at_the_next_pass() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, lfd, conn, seen) = accepted("family");
    let (listener, addr, len) = unix_listener("lost");
    let (go_r, go_w) = pipe();
    let pid = fork_child(rt, move || {
        // Its copy from the fork goes: the message is then the only hold besides the parent's.
        close(rt, conn);
        // SAFETY: socket calls on our own fds; `addr` is the listener's address, `len` long.
        unsafe {
            libc::close(go_w);
            let s = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0);
            let connected = libc::connect(s, (&addr as *const libc::sockaddr_un).cast(), len) == 0;
            // Waits for the parent's word (the end of the pipe), never reading the message.
            let mut b = 0u8;
            while libc::read(go_r, (&mut b as *mut u8).cast(), 1) > 0 {}
            connected
        }
    });
    // SAFETY: our end of the child's connection; the read end of the pipe is the child's.
    let to_child = unsafe {
        libc::close(go_r);
        libc::accept(listener, std::ptr::null_mut(), std::ptr::null_mut())
    };
    assert!(to_child >= 0);
    assert_eq!(send_fd(rt, to_child, conn), Ok(()), "the family's child was refused the connection");
    close(rt, conn);
    // SAFETY: our fds: the child sees the end of the pipe and exits.
    unsafe { libc::close(go_w) };
    let mut st = 0;
    // SAFETY: `st` is a writable int; the child is reaped, so its pid no longer runs.
    assert_eq!(unsafe { libc::waitpid(pid, &mut st, 0) }, pid);
    assert!(libc::WIFEXITED(st) && libc::WEXITSTATUS(st) == 0, "the child did not connect: {st:#x}");
    assert!(!seen.fin.load(Ordering::Relaxed), "the connection ended while in flight");
    // The next pass in the family (the listener, to ourselves) sweeps the lost one.
    let (a, b) = unix_pair();
    assert_eq!(send_fd(rt, a, lfd), Ok(()));
    let again = recv_fd(rt, b);
    close(rt, again);
    until(|| seen.fin.load(Ordering::Relaxed));
    // SAFETY: our fds.
    unsafe {
        libc::close(a);
        libc::close(b);
        libc::close(to_child);
        libc::close(listener);
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

/// Issue 24: the process that drives the NIC killed (SIGKILL: no exit handler, no keeper). Here
/// that is D, this test binary run again for [`succession_driver`] (a process of its own, with
/// an arena of its own: this one must live on, its arena untouched): D accepts the peer's
/// connection, forks C, which shares it, names C on a pipe and is killed. C, once reparented
/// (D is gone), lets the peer send its request and reads it: its blocking read sleeps a second
/// at most, its process then finds the driver gone and drives the NIC itself, so the request
/// reaches it and its answer reaches the peer, through a NIC that C now runs. C says so on the
/// pipe, its parent being dead. Without the succession C's read sleeps on (nobody receives),
/// no word comes and the bound fails the test.
#[test]
fn a_child_drives_the_nic_once_the_process_that_drove_it_is_killed() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let mut fds = [0; 2];
    // SAFETY: pipe writes two fds into `fds`; without O_CLOEXEC D inherits the write end.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    let (report_r, report_w) = (fds[0], fds[1]);
    let mut d = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "succession_driver", "--ignored", "--nocapture", "--test-threads=1"])
        .env(REPORT_FD, report_w.to_string())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // SAFETY: our copy of the write end: D's and C's words are all that can come.
    unsafe { libc::close(report_w) };
    let child = within("D names its child", move || {
        let mut b = [0u8; 4];
        // SAFETY: 4 bytes into a live buffer.
        assert_eq!(unsafe { libc::read(report_r, b.as_mut_ptr().cast(), 4) }, 4, "D died before its child ran");
        i32::from_ne_bytes(b)
    });
    d.kill().unwrap();
    d.wait().unwrap();
    wait_for_word(report_r);
    // C exits after its word; the next test must not find it running.
    // SAFETY: pidfd_open takes integers; poll one pollfd; close the pidfd and the pipe.
    unsafe {
        let pidfd = libc::syscall(libc::SYS_pidfd_open, child, 0) as i32;
        if pidfd >= 0 {
            let mut p = libc::pollfd { fd: pidfd, events: libc::POLLIN, revents: 0 };
            libc::poll(&mut p, 1, BOUND.as_millis() as i32);
            libc::close(pidfd);
        }
        libc::close(report_r);
    }
}

/// The variable that gives [`succession_driver`] the pipe to report on.
const REPORT_FD: &str = "PRONGHORN_TEST_SUCCESSION_REPORT_FD";

/// D of [`a_child_drives_the_nic_once_the_process_that_drove_it_is_killed`], which runs it in a
/// process of its own and kills it; on its own it does nothing.
#[test]
#[ignore = "the process a_child_drives_the_nic_once_the_process_that_drove_it_is_killed kills"]
fn succession_driver() {
    let Some(report_w) = std::env::var(REPORT_FD).ok().and_then(|v| v.parse::<i32>().ok()) else { return };
    // A D the test no longer waits for dies with the bound.
    // SAFETY: alarm takes an integer.
    unsafe { libc::alarm(BOUND.as_secs() as u32 * 2) };
    let (rt, _lfd, conn, seen) = accepted("family");
    // SAFETY: getpid has no preconditions.
    let d = unsafe { libc::getpid() };
    let child = fork_child(rt, move || {
        // SAFETY: getppid has no preconditions.
        until(|| unsafe { libc::getppid() } != d);
        seen.send.store(true, Ordering::Relaxed);
        let served = read_exact(rt, conn, 4) == b"ping" && done(rt.send(conn, b"pong", false)) == Ok(4);
        until(|| seen.received.lock().unwrap().len() == 4);
        let ok = served && *seen.received.lock().unwrap() == b"pong" && seen.driven_elsewhere.load(Ordering::Relaxed);
        if ok {
            say(report_w);
        }
        ok
    });
    // SAFETY: 4 bytes from a live buffer.
    unsafe { libc::write(report_w, child.to_ne_bytes().as_ptr().cast(), 4) };
    loop {
        // SAFETY: pause takes nothing.
        unsafe { libc::pause() };
    }
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
    assert_eq!((asleep.members, asleep.sleepers, asleep.broadcast_sleepers), (1, 1, 0), "premise: {asleep:?}");
    kill_9(pid);
    drive_until_seen(rt, lfd, || seen.fin.load(Ordering::Relaxed));
    let stats = rt.family_stats().expect("a family");
    assert_eq!(
        (stats.dead_processes, stats.dead_lock_holders, stats.members, stats.sleepers, stats.broadcast_sleepers),
        (1, 0, 0, 0, 0),
        "{stats:?}"
    );
}

/// Children that end without the runtime's exit (`_exit`) keep their slots in the process
/// table until the opener's periodic look (once a second); a server forking faster than that
/// must not fill it: a fork that finds every slot taken buries the dead first, so every child
/// has a slot (one without shares the stack untracked: its holds stay if it is killed). Fails
/// without the burial when 1,024 of the forks fall between two periodic looks.
#[test]
fn children_that_exit_at_once_faster_than_the_periodic_look_leave_room_for_the_next() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, conn, _seen) = accepted("family");
    for k in 0..3000 {
        let pid = fork_child(rt, || rt.family_member());
        assert_eq!(exit_status(pid, "a short-lived child"), 0, "child {k} had no slot in the process table");
    }
    let stats = rt.family_stats().expect("a family");
    assert!(stats.dead_processes >= 1024, "{stats:?}");
    close(rt, conn);
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

/// Two shards of the test's own, back to back over the in-memory pair (in the family arena, as
/// every shard once it is enabled), with one connection from `client` to `server`.
struct Wire {
    server: Shard<MemNic>,
    client: Shard<MemNic>,
    /// The server's side of the connection, and the client's.
    accepted: SocketId,
    connected: SocketId,
    clock: MonotonicClock,
}

impl Wire {
    fn connected() -> Wire {
        let (a, b) = pair(MemConfig::default());
        let mut server = Shard::new(a, ShardConfig::new(MacAddr([2, 0, 0, 0, 1, 1]), Some((OURS, 24)), None, [3; 32]));
        let mut client = Shard::new(b, ShardConfig::new(MacAddr([2, 0, 0, 0, 1, 2]), Some((PEER, 24)), None, [4; 32]));
        let addr = SocketAddr::V4(SocketAddrV4::new(OURS, PORT));
        let listener = server.tcp_listen(addr, 8).unwrap();
        let connected = client.tcp_connect(addr).unwrap();
        let clock = MonotonicClock::new();
        let start = Instant::now();
        let accepted = loop {
            assert!(start.elapsed() < BOUND, "the test's own shards never connected");
            client.poll(clock.now_ns());
            server.poll(clock.now_ns());
            if let Ok((id, _)) = server.tcp_accept(listener) {
                break id;
            }
        };
        Wire { server, client, accepted, connected, clock }
    }

    /// The client sends `data`, which waits in the server's receive ring (taken on its arrival,
    /// by this thread) until [`Wire::read`].
    fn carry(&mut self, data: &[u8]) {
        assert_eq!(self.client.tcp_send(self.connected, data), Ok(data.len()));
        let start = Instant::now();
        while self.server.tcp_recv_available(self.accepted).unwrap() < data.len() {
            assert!(start.elapsed() < BOUND, "the test's own shards carried nothing");
            self.client.poll(self.clock.now_ns());
            self.server.poll(self.clock.now_ns());
        }
    }

    fn read(&mut self, n: usize) -> Vec<u8> {
        let mut got = vec![0u8; n];
        assert_eq!(self.server.tcp_recv(self.accepted, &mut got), Ok(n));
        got
    }
}

/// A thread keeps the rings of the connections it freed for the next ones (`tcp`'s spare
/// lists, in its own memory), and with the shards shared those rings are blocks of the family
/// arena. A child forked from that thread had a copy of its lists: the child and its parent
/// each handed the same block to a connection of their own, so that each overwrote what the
/// other received (and the block was freed twice, which corrupted the arena's free list: the
/// family binary crashed in `Arena::alloc` in one run of two). The child forgets its copies.
#[test]
fn a_child_hands_out_none_of_the_rings_its_parent_keeps_for_reuse() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let (rt, _lfd, _conn, _seen) = accepted("family");
    let mut parents = Wire::connected();
    let mut childs = Wire::connected();
    // A connection's rings, freed by this thread, wait in its spare lists.
    let mut freed = Wire::connected();
    freed.carry(b"spare!");
    assert_eq!(freed.read(6), b"spare!");
    drop(freed);
    let (go_r, go_w) = pipe();
    let (done_r, done_w) = pipe();
    let pid = fork_child(rt, || {
        let mut b = [0u8; 1];
        // SAFETY: one byte into a live buffer.
        if unsafe { libc::read(go_r, b.as_mut_ptr().cast(), 1) } != 1 {
            return false;
        }
        childs.carry(b"child!");
        say(done_w);
        childs.read(6) == b"child!"
    });
    parents.carry(b"parent");
    say(go_w);
    wait_for_word(done_r);
    assert_eq!(parents.read(6), b"parent", "the child's connection received into the parent's ring");
    assert_eq!(exit_status(pid, "the child exits"), 0, "the parent's connection received into the child's ring");
    // The child's connection (in the arena, shared) is the child's: its rings are not ours to free.
    std::mem::forget(childs);
}
