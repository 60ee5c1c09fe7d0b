//! The values the socket API hands over: readiness as epoll reports it, and the buffer sizes
//! SO_RCVBUF and SO_SNDBUF set. Values only; `api` answers the calls.

/// What a socket is ready for, in epoll's terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// EPOLLIN: data, a connection to accept, end of stream or an error.
    pub readable: bool,
    /// EPOLLOUT.
    pub writable: bool,
    /// EPOLLRDHUP: the peer closed its sending half.
    pub read_closed: bool,
    /// EPOLLHUP: both halves are done.
    pub hangup: bool,
    /// EPOLLERR: an error is pending (SO_ERROR).
    pub error: bool,
    /// EPOLLPRI: urgent data waits to be read with MSG_OOB.
    pub urgent: bool,
}

/// SO_RCVBUF and SO_SNDBUF as a connection applies them, in bytes of data: what its receive
/// buffer holds (the most it advertises) and what its send buffer takes. `None` keeps the
/// shard's (`ShardConfig::tcp`), which autotuning grows. A send size, and a receive size with
/// `recv_fixed` (SO_RCVBUF set: Linux's SOCK_RCVBUF_LOCK), fix the buffer; a receive size
/// without it (grown for SO_RCVLOWAT) is a least size that autotuning may grow beyond.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Buffers {
    pub recv: Option<u32>,
    pub recv_fixed: bool,
    pub send: Option<u32>,
}
