//! TCP on the shard: demux of segments to connections, listeners (SO_REUSEPORT groups, SYN and
//! accept queues, SYN cookies when the SYN queue is full), the shard-wide challenge-ACK budget,
//! and servicing a connection: sending what it has (its payload written once, from its send
//! buffer straight into the frame), turning its events into readiness, arming its timers (its
//! own, lazily as Linux's are: a deadline that moves later or goes leaves the wheel entry where
//! it is, and an early firing arms it again; and a check that gives drained rings back),
//! freeing it when done. The shard's next deadline may therefore come before the connections'
//! real one: a sleeper woken for it finds nothing due. The protocol itself is
//! the `tcp` crate's.
//!
//! It must not build frames below the transport header (that is [`super::link`]) nor answer
//! the application (that is [`super::api`]).
//!
//! This module holds the values (a connection, a listener, the listeners of one address),
//! knowing nothing of the shard; `io` is TCP's work on the shard: segments in and out.

use std::collections::VecDeque;

use tcp::Connection;
use wire::IpAddress;

use super::api_types::{Buffers, Readiness};
use super::sockets::SocketId;
use crate::shard::table::FourTuple;
use crate::shard::timer::TimerHandle;

mod io;

/// How often a connection that holds send or receive rings is looked at: rings that hold
/// nothing then go back to the thread's spare list (`tcp::Connection::release_buffers`), so an
/// idle connection costs its state, not 2 x 128 KiB of rings, as a Linux socket whose queues
/// drained holds no buffer memory. Releasing them every time they drain instead cost 4% more
/// instructions per 64-byte request/response (stack-scale, callgrind). A connection that
/// sent or received data since the last look keeps its rings until a look finds it idle: the
/// spare list holds 32 MiB (128 connections' rings), so with more connections than that a ring
/// released while in use was freed and allocated again (128 KiB zeroed by calloc) at its next
/// request, twice a second for every active connection.
const BUFFERS_CHECK_NS: u64 = 1_000_000_000;

/// RSTs of freed connections a shard keeps while its buffer pool is empty (a few kB; a peer
/// that makes connections abort while the pool is dry cannot grow it further).
const OWED_RSTS_MAX: usize = 1024;

/// How long the NIC's answer to "does another process wait for this queue" holds (10 ms): a
/// reload's successor starts waiting before the old process closes its listeners, so a fresh
/// answer is at most this old when the first refused SYN comes.
const SUCCESSOR_LOOK_NS: u64 = 10_000_000;

/// How long after its last listener here closed a port leaves SYNs unanswered rather than
/// refused (1 s): a reload's old process closes its listeners as its successor starts, which
/// marks that it waits for the queue only once it tries to open the NIC (HAProxy's new worker:
/// a few milliseconds later, in which wrk's reconnections got 115 RSTs). A client's SYN sent in
/// that second is retransmitted a second later, to the successor or to a refusal.
pub(super) const LISTENER_GRACE_NS: u64 = 1_000_000_000;

/// Closed ports remembered for [`LISTENER_GRACE_NS`] (a server closes a few listeners at once).
pub(super) const CLOSED_PORTS_KEPT: usize = 64;

pub(super) struct TcpSocket {
    pub(super) conn: Connection,
    pub(super) tuple: FourTuple,
    pub(super) timer: Option<TimerHandle>,
    /// The listener this passive connection came from, until it is accepted.
    pub(super) listener: Option<SocketId>,
    /// Counted in the listener's half-open total (SYN-RECEIVED, not a cookie).
    pub(super) half_open: bool,
    /// The application holds it (connected, or accepted).
    pub(super) owned: bool,
    /// The application closed it: free it once the connection is over.
    pub(super) app_closed: bool,
    /// Readiness when last reported, to report every change exactly once.
    pub(super) reported: Readiness,
    /// Data (or the end of stream) arrivals so far (see [`crate::shard::Shard::arrivals`]).
    pub(super) arrivals: u32,
    /// TCP_NODELAY as the application set it.
    pub(super) nodelay: bool,
    /// The connection's counters already added to `ShardStats`.
    pub(super) counted: tcp::Counters,
    /// The next look at its rings (see [`BUFFERS_CHECK_NS`]), while it has any.
    pub(super) buffers_timer: Option<TimerHandle>,
    /// Data was sent or received since the last look at its rings: they are in use.
    pub(super) rings_used: bool,
    /// Its ring memory counted in the shard's `tcp_mem` use.
    pub(super) charged: usize,
    /// At the last buffer check its receive ring held only out-of-order data.
    pub(super) ofo_pinned: bool,
    /// On the shard's list of writers waiting for memory.
    pub(super) mem_waiting: bool,
}

impl TcpSocket {
    /// An active open (`connect`): the application holds it from the start.
    pub(super) fn connecting(conn: Connection, tuple: FourTuple) -> TcpSocket {
        TcpSocket { owned: true, ..TcpSocket::unclaimed(conn, tuple) }
    }

    /// A passive open from a SYN to `listener`: half-open until its handshake completes.
    pub(super) fn from_syn(conn: Connection, tuple: FourTuple, listener: SocketId) -> TcpSocket {
        TcpSocket { listener: Some(listener), half_open: true, ..TcpSocket::unclaimed(conn, tuple) }
    }

    /// A passive open from the ACK of a SYN cookie: established at once, never half-open.
    pub(super) fn from_cookie(conn: Connection, tuple: FourTuple, listener: SocketId) -> TcpSocket {
        TcpSocket { listener: Some(listener), ..TcpSocket::unclaimed(conn, tuple) }
    }

    /// No listener, not half-open, not held by the application.
    fn unclaimed(conn: Connection, tuple: FourTuple) -> TcpSocket {
        TcpSocket {
            conn,
            tuple,
            timer: None,
            listener: None,
            half_open: false,
            owned: false,
            app_closed: false,
            reported: Readiness::default(),
            arrivals: 0,
            nodelay: false,
            counted: tcp::Counters::default(),
            buffers_timer: None,
            rings_used: false,
            charged: 0,
            ofo_pinned: false,
            mem_waiting: false,
        }
    }
}

/// The listeners of one local address: one, or several that all set SO_REUSEPORT.
pub(super) struct ListenGroup {
    pub(super) reuseport: bool,
    pub(super) members: Vec<SocketId>,
}

pub(super) struct Listener {
    pub(super) local: (IpAddress, u16),
    pub(super) backlog: usize,
    pub(super) half_open: usize,
    pub(super) accept_queue: VecDeque<SocketId>,
    /// Connections queued so far (see [`crate::shard::Shard::arrivals`]).
    pub(super) arrivals: u32,
    /// The application waits on it (see [`crate::shard::Shard::tcp_listener_watched`]).
    pub(super) watched: bool,
    /// Its connections' buffers, from the SYN on (Linux's children inherit the listener's).
    pub(super) buffers: Buffers,
    /// When it last answered a SYN with a cookie: an ACK is checked for one only within
    /// [`crate::syncookie::VALID_AFTER_LAST_SENT_NS`] of that (Linux's `tcp_synq_no_recent_overflow`, per socket
    /// or SO_REUSEPORT group; here per member, which the ACK of its SYN goes back to).
    pub(super) last_cookie_sent: Option<u64>,
}
