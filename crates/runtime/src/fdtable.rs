//! The fd table, along Linux's chain fd -> open file -> socket: what each file descriptor the
//! runtime tracks is (a kernel TCP socket that may still move to the shard, an accelerated
//! socket, an epoll set) and the open file it refers to ([`OpenFile`]: O_NONBLOCK and the
//! socket's options, shared by the fds dup(2) makes, FD_CLOEXEC staying each fd's in the
//! kernel); and the per-shard-socket record of which fds refer to it and which threads wait on
//! it.
//!
//! The maps are vectors indexed by a small dense number (the fd, the open file's number, the
//! socket's slot): a lookup is an index, not a hash. Nothing here knows about the shard's
//! internals or about waiting.

use std::net::SocketAddr;
use std::sync::Arc;

use stack::shard::{Buffers, SocketId};

use crate::epoll::EpollSet;
use crate::wait::Parker;

/// What a tracked fd is.
pub(crate) enum Fd {
    /// A kernel TCP socket that may still move to the shard.
    Pending,
    /// On the shard, bound, not yet listening.
    Bound {
        local: SocketAddr,
    },
    /// listen() was called before the NIC opened: the shard listener is made when it opens. A
    /// server that forks its workers before it serves (nginx) thereby leaves each worker its
    /// own listener on its own shard and queue, and the parent never touches the NIC.
    Listening {
        local: SocketAddr,
        backlog: usize,
    },
    Listener {
        id: SocketId,
    },
    Conn {
        id: SocketId,
    },
    /// A kernel UDP socket that may still move to the shard (bind to our address, connect or
    /// sendto into our subnet).
    UdpPending {
        /// An AF_INET6 socket (its wildcard address is `::`).
        v6: bool,
    },
    /// A UDP socket on the shard.
    Udp {
        id: SocketId,
        /// An AF_INET6 socket: it reads IPv4 senders as IPv4-mapped addresses.
        v6: bool,
    },
    /// A kernel epoll fd whose accelerated members the runtime keeps (see `epoll`).
    Epoll(Box<EpollSet>),
}

impl Fd {
    /// The shard socket behind an accelerated fd.
    pub(crate) fn socket(&self) -> Option<SocketId> {
        match self {
            Fd::Listener { id, .. } | Fd::Conn { id, .. } | Fd::Udp { id, .. } => Some(*id),
            _ => None,
        }
    }
}

/// One tracked fd (its open file is the table's: [`FdTable::file`]).
pub(crate) struct Entry {
    pub fd: Fd,
    /// The epoll sets this fd is a member of (so close and wakeups need not look at every set).
    pub epolls: Vec<i32>,
    /// A non-blocking connect() whose outcome no later connect() has reported yet (Linux: the
    /// call that sees the handshake done returns 0, the next ones EISCONN).
    pub connecting: bool,
    /// The address bind() claimed for the socket (not a port-0 bind), given back when the
    /// socket closes.
    pub bound_to: Option<SocketAddr>,
    /// Its registrations in kernel epoll sets, made while it was still a kernel socket
    /// (pending): when it becomes accelerated they move to the sets' accelerated halves.
    pub kernel_epolls: Vec<KernelEpoll>,
}

/// A pending socket's registration in a kernel epoll set: the set, and the event mask and data
/// given to epoll_ctl.
#[derive(Clone, Copy)]
pub(crate) struct KernelEpoll {
    pub epfd: i32,
    pub events: u32,
    pub data: u64,
}

impl Entry {
    pub(crate) fn new(fd: Fd) -> Entry {
        Entry { fd, epolls: Vec::new(), connecting: false, bound_to: None, kernel_epolls: Vec::new() }
    }
}

/// The open file behind one or more fds (Linux's `struct file`): what dup(2) shares. A socket
/// has one open file here (socket(2) and accept(2) make both, dup(2) only fds), so the socket's
/// options live in it too.
pub(crate) struct OpenFile {
    /// O_NONBLOCK (an epoll fd's is always set: the runtime never blocks in one).
    pub nonblock: bool,
    pub opts: SockOpts,
    /// The fds that refer to it: it goes with the last.
    refs: u32,
}

impl OpenFile {
    pub(crate) fn new(nonblock: bool, opts: SockOpts) -> OpenFile {
        OpenFile { nonblock, opts, refs: 0 }
    }
}

/// Tracked fds, indexed by fd number, each with the number of its open file in `files`.
#[derive(Default)]
pub(crate) struct FdTable {
    slots: Vec<Option<(Entry, u32)>>,
    files: Vec<OpenFile>,
    /// Numbers in `files` no fd refers to, for the next open file.
    free_files: Vec<u32>,
}

impl FdTable {
    pub(crate) fn get(&self, fd: i32) -> Option<&Entry> {
        self.slots.get(usize::try_from(fd).ok()?)?.as_ref().map(|(e, _)| e)
    }

    pub(crate) fn get_mut(&mut self, fd: i32) -> Option<&mut Entry> {
        self.slots.get_mut(usize::try_from(fd).ok()?)?.as_mut().map(|(e, _)| e)
    }

    /// The entry of `fd` and its open file.
    pub(crate) fn with_file(&self, fd: i32) -> Option<(&Entry, &OpenFile)> {
        let (e, file) = self.slots.get(usize::try_from(fd).ok()?)?.as_ref()?;
        Some((e, &self.files[*file as usize]))
    }

    /// The open file `fd` refers to.
    pub(crate) fn file(&self, fd: i32) -> Option<&OpenFile> {
        self.with_file(fd).map(|(_, f)| f)
    }

    pub(crate) fn file_mut(&mut self, fd: i32) -> Option<&mut OpenFile> {
        let (_, file) = self.slots.get(usize::try_from(fd).ok()?)?.as_ref()?;
        Some(&mut self.files[*file as usize])
    }

    /// The socket options of `fd`'s open file (the defaults for an fd not tracked).
    pub(crate) fn opts(&self, fd: i32) -> SockOpts {
        self.file(fd).map(|f| f.opts).unwrap_or_default()
    }

    pub(crate) fn kind(&self, fd: i32) -> Option<&Fd> {
        self.get(fd).map(|e| &e.fd)
    }

    /// `fd` is a listening socket (on the shards, or waiting for the NIC to open).
    pub(crate) fn is_listener(&self, fd: i32) -> bool {
        matches!(self.kind(fd), Some(Fd::Listener { .. } | Fd::Listening { .. }))
    }

    /// `fd` refers to a new open file, `file` (any entry it had is dropped first).
    pub(crate) fn open(&mut self, fd: i32, entry: Entry, file: OpenFile) {
        let n = match self.free_files.pop() {
            Some(n) => {
                self.files[n as usize] = file;
                n
            }
            None => {
                self.files.push(file);
                (self.files.len() - 1) as u32
            }
        };
        self.insert(fd, entry, n);
    }

    /// `new` refers to the open file of `old` (dup(2)); false when `old` is not tracked.
    pub(crate) fn share(&mut self, old: i32, new: i32, entry: Entry) -> bool {
        let Some(&(_, n)) = usize::try_from(old).ok().and_then(|i| self.slots.get(i)?.as_ref()) else { return false };
        self.insert(new, entry, n);
        true
    }

    fn insert(&mut self, fd: i32, entry: Entry, file: u32) {
        self.remove(fd);
        self.files[file as usize].refs += 1;
        let i = fd as usize;
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
        }
        self.slots[i] = Some((entry, file));
    }

    /// Forgets `fd`; its open file goes with its last fd.
    pub(crate) fn remove(&mut self, fd: i32) -> Option<Entry> {
        let (entry, file) = self.slots.get_mut(usize::try_from(fd).ok()?)?.take()?;
        let f = &mut self.files[file as usize];
        f.refs -= 1;
        if f.refs == 0 {
            self.free_files.push(file);
        }
        Some(entry)
    }

    /// The fds of TCP connections and listeners on the shards.
    pub(crate) fn streams(&self) -> Vec<i32> {
        let stream = |(fd, e): (usize, &Option<(Entry, u32)>)| match e {
            Some((Entry { fd: Fd::Conn { .. } | Fd::Listener { .. }, .. }, _)) => Some(fd as i32),
            _ => None,
        };
        self.slots.iter().enumerate().filter_map(stream).collect()
    }

    /// The listening fds, those on the shards and those whose listen() waits for the NIC, in
    /// order.
    pub(crate) fn listeners(&self) -> Vec<i32> {
        let listening = |(fd, e): (usize, &Option<(Entry, u32)>)| match e {
            Some((Entry { fd: Fd::Listener { .. } | Fd::Listening { .. }, .. }, _)) => Some(fd as i32),
            _ => None,
        };
        self.slots.iter().enumerate().filter_map(listening).collect()
    }

    /// The fds whose listen() waits for the NIC.
    pub(crate) fn listening(&self) -> Vec<i32> {
        let deferred = |(fd, e): (usize, &Option<(Entry, u32)>)| match e {
            Some((Entry { fd: Fd::Listening { .. }, .. }, _)) => Some(fd as i32),
            _ => None,
        };
        self.slots.iter().enumerate().filter_map(deferred).collect()
    }

    /// Forgets the threads waiting on every epoll set (a forked child has none of its parent's).
    pub(crate) fn forget_epoll_waiters(&mut self) {
        for (e, _) in self.slots.iter_mut().flatten() {
            if let Fd::Epoll(set) = &mut e.fd {
                set.forget_waiters();
            }
        }
    }

    /// The epoll set at `epfd`.
    pub(crate) fn epoll_mut(&mut self, epfd: i32) -> Option<&mut EpollSet> {
        match self.get_mut(epfd) {
            Some(Entry { fd: Fd::Epoll(set), .. }) => Some(set),
            _ => None,
        }
    }

    pub(crate) fn epoll(&self, epfd: i32) -> Option<&EpollSet> {
        match self.get(epfd) {
            Some(Entry { fd: Fd::Epoll(set), .. }) => Some(set),
            _ => None,
        }
    }
}

/// Per shard socket: the fds that refer to it (dup) and the threads blocked on it.
#[derive(Default)]
pub(crate) struct SockState {
    pub fds: Vec<i32>,
    /// Threads in a blocking call, poll or select that wait for this socket to change.
    pub waiters: Vec<Arc<Parker>>,
    /// When the socket last became readable, until the application reads it (0: not
    /// readable, or nobody observes: `pronghorn lat`'s socket->read stage).
    pub readable_since: u64,
}

/// Per-socket state, indexed by the socket's shard and slot and checked against its whole id
/// (slot numbers are per shard: with several shards two sockets share one).
#[derive(Default)]
pub(crate) struct SockTable {
    shards: Vec<Vec<Option<(SocketId, SockState)>>>,
}

impl SockTable {
    pub(crate) fn get_mut(&mut self, id: SocketId) -> Option<&mut SockState> {
        match self.shards.get_mut(id.shard()).and_then(|s| s.get_mut(id.index())) {
            Some(Some((sid, st))) if *sid == id => Some(st),
            _ => None,
        }
    }

    pub(crate) fn get(&self, id: SocketId) -> Option<&SockState> {
        match self.shards.get(id.shard()).and_then(|s| s.get(id.index())) {
            Some(Some((sid, st))) if *sid == id => Some(st),
            _ => None,
        }
    }

    /// The record of `id`, made on first use.
    pub(crate) fn entry(&mut self, id: SocketId) -> &mut SockState {
        if id.shard() >= self.shards.len() {
            self.shards.resize_with(id.shard() + 1, Vec::new);
        }
        let slots = &mut self.shards[id.shard()];
        let i = id.index();
        if i >= slots.len() {
            slots.resize_with(i + 1, || None);
        }
        let slot = &mut slots[i];
        if !matches!(slot, Some((sid, _)) if *sid == id) {
            *slot = Some((id, SockState::default()));
        }
        &mut slot.as_mut().unwrap().1
    }

    /// The sockets this process holds an fd of.
    pub(crate) fn held(&self) -> Vec<SocketId> {
        let held = |slot: &Option<(SocketId, SockState)>| match slot {
            Some((id, st)) if !st.fds.is_empty() => Some(*id),
            _ => None,
        };
        self.shards.iter().flatten().filter_map(held).collect()
    }

    /// Forgets every waiting thread (a forked child has none of its parent's).
    pub(crate) fn forget_waiters(&mut self) {
        for (_, st) in self.shards.iter_mut().flatten().flatten() {
            st.waiters.clear();
        }
    }

    pub(crate) fn remove(&mut self, id: SocketId) -> Option<SockState> {
        match self.shards.get_mut(id.shard()).and_then(|s| s.get_mut(id.index())) {
            Some(slot @ Some(_)) if slot.as_ref().unwrap().0 == id => slot.take().map(|(_, st)| st),
            _ => None,
        }
    }
}

/// Socket options the shim keeps for an accelerated (or still pending) socket. Accepted sockets
/// inherit their listener's, as on Linux.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SockOpts {
    pub nodelay: bool,
    pub keepalive: bool,
    pub keepidle_s: u32,
    pub keepintvl_s: u32,
    pub keepcnt: u32,
    /// SO_LINGER: `Some(0)` resets on close.
    pub linger_s: Option<u32>,
    pub rcvtimeo_us: u64,
    pub sndtimeo_us: u64,
    pub v6only: bool,
    pub reuseaddr: bool,
    /// SO_REUSEPORT: sockets that all set it may bind the same address; their listeners share
    /// its connections.
    pub reuseport: bool,
    /// SO_RCVBUF as read back (Linux's doubled value, in bytes of data here), once set or grown
    /// by SO_RCVLOWAT; `None`: the default (the shard's buffer, reported as `tcp_rmem[1]`).
    pub rcvbuf: Option<u32>,
    /// SO_RCVBUF was set (Linux's SOCK_RCVBUF_LOCK): SO_RCVLOWAT no longer grows it.
    pub rcvbuf_locked: bool,
    /// SO_SNDBUF as read back, once set; `None`: the default (reported as `tcp_wmem[1]`).
    pub sndbuf: Option<u32>,
    /// SO_RCVLOWAT (at least 1).
    pub rcvlowat: u32,
    /// SO_OOBINLINE.
    pub oobinline: bool,
    /// An AF_INET6 socket: the addresses it reports (accept, getsockname, getpeername) are
    /// IPv6, an IPv4 peer or address IPv4-mapped, as Linux's `inet6_getname` writes them.
    pub v6: bool,
}

impl SockOpts {
    /// `addr` as this socket's family reports it ([`SockOpts::v6`]).
    pub(crate) fn reported(&self, addr: SocketAddr) -> SocketAddr {
        match addr {
            SocketAddr::V4(v4) if self.v6 => {
                SocketAddr::V6(std::net::SocketAddrV6::new(v4.ip().to_ipv6_mapped(), v4.port(), 0, 0))
            }
            other => other,
        }
    }
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
            reuseport: false,
            rcvbuf: None,
            rcvbuf_locked: false,
            sndbuf: None,
            rcvlowat: 1,
            oobinline: false,
            v6: false,
        }
    }
}

impl SockOpts {
    /// The buffers a connection of this socket uses: those set, else the shard's.
    pub(crate) fn buffers(&self) -> Buffers {
        Buffers { recv: self.rcvbuf, recv_fixed: self.rcvbuf_locked, send: self.sndbuf }
    }

    pub(crate) fn keepalive(&self) -> Option<stack::Keepalive> {
        self.keepalive.then(|| stack::Keepalive {
            idle: u64::from(self.keepidle_s) * 1_000_000_000,
            interval: u64::from(self.keepintvl_s) * 1_000_000_000,
            count: self.keepcnt.min(255) as u8,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Entry {
        Entry::new(Fd::Pending)
    }

    /// An open file lives while any of its fds does, and only then is its number reused.
    #[test]
    fn an_open_file_goes_with_its_last_fd_and_only_then_is_reused() {
        let mut t = FdTable::default();
        t.open(5, pending(), OpenFile::new(false, SockOpts::default()));
        assert!(t.share(5, 9, pending()));
        assert!(!t.share(4, 10, pending()), "an fd not tracked has no file to share");
        t.file_mut(9).unwrap().nonblock = true;
        t.file_mut(5).unwrap().opts.keepalive = true;
        assert!(t.file(5).unwrap().nonblock && t.file(9).unwrap().opts.keepalive, "one file, two fds");
        t.remove(5);
        assert!(t.file(5).is_none());
        // A new socket while fd 9 still holds the first file: it gets a file of its own.
        t.open(6, pending(), OpenFile::new(false, SockOpts::default()));
        assert!(!t.file(6).unwrap().nonblock && t.file(9).unwrap().nonblock);
        t.remove(9);
        assert_eq!(t.free_files.len(), 1, "the first file went with its last fd");
        t.open(7, pending(), OpenFile::new(false, SockOpts::default()));
        assert!(t.free_files.is_empty() && t.files.len() == 2, "its number was reused");
        assert!(!t.file(7).unwrap().nonblock, "as a new file");
    }
}
