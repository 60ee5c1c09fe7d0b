//! Passing fds to another process (SCM_RIGHTS over a unix socket): which accelerated sockets
//! may go, how the receiver finds the socket behind what it received, and what the process
//! says when it refuses.
//!
//! An accelerated socket's fd is a placeholder (an eventfd of the same number) and its
//! connection lives in a shard: a receiver that only got the eventfd would hold a socket that
//! silently receives nothing. Under `[runtime] share = "family"` the shards are the family's
//! (`crate::family`), so a process of the same family can use the socket, once it knows which
//! one the eventfd stands for. The kernel names every eventfd with a number unique among the
//! live ones, `eventfd-id` in /proc/self/fdinfo (Linux 5.2 on: commit "eventfd: present id to
//! userspace via fdinfo"): the file the receiver gets is the sender's, so it reads the same
//! number. So:
//! - the sender's sendmsg (and sendmmsg), when the peer of the unix socket (SO_PEERCRED's pid)
//!   is a process of its family, records each accelerated socket it passes in the family's
//!   [`InFlight`] table under its placeholder's eventfd-id, with one more holder for the socket
//!   (Linux's file reference the message holds: the socket survives the sender closing its fd),
//!   and sends the message unchanged; when the send fails the records go again;
//! - the receiver's recvmsg (and recvmmsg) reads the eventfd-id of every fd it received and
//!   installs each recorded one in its fd table as that socket: an open file of its own, whose
//!   O_NONBLOCK is the received file's (Linux shares the file's status flags between the two
//!   processes; here each has its own from then on) and whose socket options are the sender's
//!   (Linux's live in the socket). The record's holder becomes the receiver's (or goes, when
//!   the receiver already held the socket). Several fds of one file in a message are one record.
//!
//! What bounds a record nobody claims (the receiver closed the unix socket unread, died, or
//! received without the hooks): [`IN_FLIGHT`] records per family, a pass beyond that refused
//! with ETOOMANYREFS (Linux's errno for too many files in flight); a record is dropped, and its
//! holder given back (the socket closes if nobody else holds it), when a later pass records the
//! same eventfd-id (the kernel gives a number back only with its file, so the message that
//! carried the old one is gone), and when the process SO_PEERCRED named has exited (each pass
//! looks at every record). Not bounded: a
//! message lost while that process runs (the peer of a socketpair is the process that made the
//! pair, which may outlive the child that was to receive it) keeps its socket until its number
//! comes again or the family ends. A received fd the receiver peeked at (MSG_PEEK) is not
//! installed: the read that takes the message is.
//!
//! Refused with EOPNOTSUPP and said once on stderr, as before sharing: a message that passes an
//! accelerated socket to a process outside the family (not accelerated, another family, or any
//! process when `share` is off), where the kernel shows no eventfd-id, or a socket not yet
//! connected or listening on the shard (bound only). A TCP or UDP socket still on the kernel
//! (not yet bound to an accelerated address or connected) is a real kernel socket and goes as it
//! is; so does every other fd.

mod calls;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use stack::shard::SocketId;
use stack::Errno;

use crate::fdtable::{Fd, SockOpts};
use crate::real;

/// How many sockets a family can have in flight at once.
pub(crate) const IN_FLIGHT: usize = 64;

/// The sockets passed in messages that no process of the family has received yet (a block of
/// the family arena the family names, made at the first pass; changed with the family lock
/// held).
pub(crate) struct InFlight {
    /// How many records there are (read without the lock: zero, and a receiver looks no further).
    count: AtomicU32,
    records: [Option<Passed>; IN_FLIGHT],
}

impl Default for InFlight {
    fn default() -> Self {
        InFlight { count: AtomicU32::new(0), records: [None; IN_FLIGHT] }
    }
}

/// One socket in flight: the placeholder's eventfd-id, the socket, and what the sender's open
/// file said of it.
#[derive(Clone, Copy)]
pub(crate) struct Passed {
    eventfd: u64,
    socket: SocketId,
    kind: Kind,
    opts: SockOpts,
    bound_to: Option<SocketAddr>,
    /// The process SO_PEERCRED named for the unix socket it went through.
    peer: libc::pid_t,
}

/// What kind of accelerated socket went.
#[derive(Clone, Copy)]
enum Kind {
    Conn,
    Listener,
    Udp { v6: bool },
}

impl Kind {
    fn of(fd: &Fd) -> Option<Kind> {
        match fd {
            Fd::Conn { .. } => Some(Kind::Conn),
            Fd::Listener { .. } => Some(Kind::Listener),
            Fd::Udp { v6, .. } => Some(Kind::Udp { v6: *v6 }),
            _ => None,
        }
    }

    fn fd(self, id: SocketId) -> Fd {
        match self {
            Kind::Conn => Fd::Conn { id },
            Kind::Listener => Fd::Listener { id },
            Kind::Udp { v6 } => Fd::Udp { id, v6 },
        }
    }
}

impl InFlight {
    pub(crate) fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) != 0
    }

    /// Takes the record of `eventfd`.
    fn take(&mut self, eventfd: u64) -> Option<Passed> {
        let slot = self.records.iter_mut().find(|r| r.is_some_and(|r| r.eventfd == eventfd))?;
        self.count.fetch_sub(1, Ordering::AcqRel);
        slot.take()
    }

    /// Takes the records nobody can claim any more: those of a number among `eventfds` (the
    /// file they named is gone) and those whose peer process is gone (`runs` says which run);
    /// `out` gets them.
    fn take_stale(&mut self, eventfds: &[u64], runs: impl Fn(libc::pid_t) -> bool, out: &mut Vec<Passed>) {
        for slot in &mut self.records {
            if slot.is_some_and(|r| eventfds.contains(&r.eventfd) || !runs(r.peer)) {
                out.extend(slot.take());
                self.count.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Stores all of `passed`, or none when there is no room for all.
    fn store(&mut self, passed: &[Passed]) -> bool {
        if self.records.iter().filter(|r| r.is_none()).count() < passed.len() {
            return false;
        }
        let mut free = self.records.iter_mut().filter(|r| r.is_none());
        for p in passed {
            *free.next().expect("counted above") = Some(*p);
        }
        self.count.fetch_add(passed.len() as u32, Ordering::AcqRel);
        true
    }
}

/// The records a sendmsg made (their eventfd-ids): taken back if the send fails.
#[derive(Default)]
pub struct Passing(Vec<u64>);

impl Passing {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The kernel's number for the eventfd at `fd` (`eventfd-id` in /proc/self/fdinfo); `None` when
/// `fd` is no eventfd or the kernel shows none (before Linux 5.2).
pub(crate) fn eventfd_id(fd: i32) -> Option<u64> {
    let path = format!("/proc/self/fdinfo/{fd}\0");
    let mut buf = [0u8; 512];
    // SAFETY: `path` is NUL-terminated; `buf` is writable for its length; the fd opened here is
    // closed once.
    let text = unsafe {
        let f = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if f < 0 {
            return None;
        }
        let n = real::read(f, buf.as_mut_ptr().cast(), buf.len());
        real::close(f);
        &buf[..usize::try_from(n).ok()?]
    };
    let text = std::str::from_utf8(text).ok()?;
    text.lines().find_map(|l| l.strip_prefix("eventfd-id:")).and_then(|v| v.trim().parse().ok())
}

/// The process at the other end of the unix socket `fd` (SO_PEERCRED: the one that connected,
/// or made the pair); `None` for a socket that names none.
pub(crate) fn peer_pid(fd: i32) -> Option<libc::pid_t> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` is writable for `len` bytes.
    let r = unsafe {
        real::getsockopt(fd, libc::SOL_SOCKET, libc::SO_PEERCRED, (&mut cred as *mut libc::ucred).cast(), &mut len)
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid)
}

/// Why a message that passes an accelerated socket is refused.
#[derive(Clone, Copy)]
pub(crate) enum Refusal {
    /// The process's shards are its own (`share` off, or no family arena).
    Alone,
    /// The peer of the unix socket is not a process of the family (its pid; 0: none known).
    Outside(libc::pid_t),
    /// The kernel shows no eventfd-id.
    NoEventfdId,
    /// The socket is bound on the shard, neither connected nor listening.
    NotOnShard,
    /// The family has [`IN_FLIGHT`] sockets in flight.
    TooMany,
}

/// Says once per process and reason on stderr why a message passing accelerated `fd` was
/// refused, and gives the errno.
pub(crate) fn say_refused(fd: i32, why: Refusal) -> Errno {
    static SAID: [AtomicBool; 5] = [const { AtomicBool::new(false) }; 5];
    let (n, errno, reason) = match why {
        Refusal::Alone => (
            0,
            Errno::EOPNOTSUPP,
            "its connection lives in this process's stack (runtime.share = \"family\" lets the processes of a \
             fork family pass sockets among themselves)"
                .to_string(),
        ),
        Refusal::Outside(pid) => (
            1,
            Errno::EOPNOTSUPP,
            format!(
                "the process at the other end ({}) is not of this process's family (runtime.share = \"family\": only \
                 the processes forked from the one that opened the NIC share its stack)",
                if pid > 0 { format!("pid {pid}") } else { "unknown".to_string() }
            ),
        ),
        Refusal::NoEventfdId => (
            2,
            Errno::EOPNOTSUPP,
            "this kernel shows no eventfd-id in /proc/self/fdinfo (Linux 5.2 on), by which the receiver would find \
             the socket"
                .to_string(),
        ),
        Refusal::NotOnShard => {
            (3, Errno::EOPNOTSUPP, "the socket is bound on the stack but neither connected nor listening".to_string())
        }
        Refusal::TooMany => (
            4,
            Errno(libc::ETOOMANYREFS),
            format!("{IN_FLIGHT} accelerated sockets are in flight in the family already, none received yet"),
        ),
    };
    if !SAID[n].swap(true, Ordering::Relaxed) {
        let msg = format!(
            "pronghorn: pid {} tried to pass accelerated socket fd {fd} to another process (SCM_RIGHTS): {reason}, so \
             the message is refused with {} (keep the socket in this process, or run the server without pronghorn)\n",
            std::process::id(),
            if errno == Errno::EOPNOTSUPP { "EOPNOTSUPP" } else { "ETOOMANYREFS" }
        );
        // SAFETY: `msg` is readable for msg.len() bytes; fd 2 is the process's stderr.
        unsafe { real::write(2, msg.as_ptr().cast(), msg.len()) };
    }
    errno
}
