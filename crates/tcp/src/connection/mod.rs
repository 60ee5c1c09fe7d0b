//! One TCP connection as a sans-I/O state machine: RFC 9293 with RFC 6298 (RTO), 7323 (window
//! scale, timestamps, PAWS), 5681/6582 (congestion control, NewReno), 9438 (CUBIC), 2018/6675
//! (SACK and SACK-based recovery), 8985 (RACK-TLP loss detection with SACK), 5961 (blind
//! in-window attacks), 3168 (ECN), 1122 (delayed ACK, keepalive) and 6093 (urgent data, as
//! Linux keeps it: one urgent byte out of band, a mark in the stream).
//!
//! The caller drives it: [`Connection::handle_segment`] and [`Connection::handle_timeout`] for
//! input, then [`Connection::poll_transmit`] until it returns `None`, [`Connection::poll_event`]
//! until it returns `None`, and [`Connection::poll_timeout`] for the next deadline. The same after
//! each application call ([`Connection::send`], [`Connection::recv`], [`Connection::close`]...).
//!
//! The connection is written in parts, one file each, every file saying what it owns and what
//! it must not touch. State: `params` (the configuration kept), `send` and `recv` (the sequence
//! spaces of RFC 9293 3.3.1 with their buffers), `options` (what the handshake agreed, and
//! TS.Recent), `rtt` (RFC 6298), `timers`, `recovery` (fast recovery, the SACK scoreboard,
//! RACK-TLP, the RTO's response), `ecn` (RFC 3168) and `urgent`; `bits` is the one-byte set of
//! flags several of them keep. Behaviour: `input` (segment arrival, RFC 9293 3.10.7), `output`
//! (`poll_transmit` and the segments it builds, RSTs included) and `app` (the application's
//! calls). This file has the public types, the [`Connection`] struct, the three ways to open
//! one and the few quantities derived from several parts.

use wire::{TcpFlags, TcpRepr};

use crate::config::{Config, Ecn};
use crate::congestion::Congestion;
use crate::time::{Duration, Instant};

mod app;
mod autotune;
mod bits;
mod ecn;
mod input;
mod options;
mod output;
mod params;
mod recovery;
mod recv;
mod rtt;
mod send;
mod timers;
mod urgent;

use self::bits::{Bit, Bits};
use self::ecn::{EcnBit, EcnState};
use self::options::{window_shift_for, Agreed, Timestamps, DEFAULT_MSS};
use self::output::Owed;
use self::params::{ms, to_us, Opt, Params};
use self::recovery::LossRecovery;
use self::recv::RecvSpace;
use self::rtt::RttEstimator;
use self::send::SendSpace;
use self::timers::{Timer, TimerTable};
use self::urgent::Urgent;

/// The smallest segment size an ICMP message can bring us down to.
const MIN_PATH_MSS: u16 = 536;

/// The RFC 9293 states. LISTEN belongs to the stack (a listener is not a connection); CLOSED
/// means the connection is over and can be freed once `poll_transmit` has nothing more.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    /// Our SYN is sent, waiting for the peer's.
    SynSent,
    /// SYN received and SYN-ACK sent, waiting for the ACK.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We closed (FIN queued or sent); the peer has not acknowledged our FIN.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer closed; we may still send.
    CloseWait,
    /// Both closed at once; waiting for the ACK of our FIN.
    Closing,
    /// The peer closed, then we did; waiting for the ACK of our FIN.
    LastAck,
    /// Both directions done; waiting 2*MSL (see [`crate::TimeWait`] for the compact form).
    TimeWait,
    /// Done.
    Closed,
}

/// What happened, for the stack and the application (see [`Connection::poll_event`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Event {
    /// The handshake completed (ESTABLISHED).
    Connected,
    /// New in-order data can be read.
    Readable,
    /// Send-buffer space was freed after a `send` found it full (or on connect).
    Writable,
    /// The peer's FIN arrived: once the data is read, `recv` returns `Ok(0)` (EPOLLRDHUP).
    ReadClosed,
    /// The peer reset the connection (or refused it); the error is in [`Connection::take_error`].
    Reset,
    /// Retransmissions, SYN retries, zero-window probes or keepalive went unanswered
    /// (ETIMEDOUT).
    TimedOut,
    /// The connection entered TIME-WAIT: once the application has closed it, the stack may
    /// replace it with a [`crate::TimeWait`] entry.
    TimeWait,
    /// The connection is over (CLOSED): free it once `poll_transmit` returns `None`.
    Closed,
    /// The peer marked new urgent data: a new urgent pointer arrived (Linux sends SIGURG now,
    /// whether or not the urgent byte itself has arrived yet).
    Urgent,
}

/// Errors of the application calls, named after the Linux errno they map to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// EAGAIN: no data to read, no room to write, or the handshake is not done yet (Linux's
    /// non-blocking `send`/`recv` in SYN-SENT also say EAGAIN).
    WouldBlock,
    /// ENOTCONN: `shutdown` of a connection that is closed.
    NotConnected,
    /// EPIPE: sending after `shutdown_write`/`close`, after the connection ended, or after the
    /// peer reset a half-closed (CLOSE-WAIT) connection.
    BrokenPipe,
    /// ECONNRESET: the peer reset the connection.
    ConnectionReset,
    /// ECONNREFUSED: the peer answered our SYN with a RST.
    ConnectionRefused,
    /// ETIMEDOUT: the peer stopped answering.
    TimedOut,
    /// EINVAL: `recv_urgent` with no urgent byte to give (none, already read, or SO_OOBINLINE).
    InvalidInput,
}

impl Error {
    /// The Linux errno value.
    pub const fn errno(self) -> i32 {
        match self {
            Error::WouldBlock => 11,
            Error::NotConnected => 107,
            Error::BrokenPipe => 32,
            Error::ConnectionReset => 104,
            Error::ConnectionRefused => 111,
            Error::TimedOut => 110,
            Error::InvalidInput => 22,
        }
    }
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::WouldBlock => "operation would block",
            Error::NotConnected => "not connected",
            Error::BrokenPipe => "broken pipe",
            Error::ConnectionReset => "connection reset by peer",
            Error::ConnectionRefused => "connection refused",
            Error::TimedOut => "connection timed out",
            Error::InvalidInput => "invalid argument",
        })
    }
}

impl std::error::Error for Error {}

/// What a SYN cookie remembers of the peer's SYN (see [`Connection::from_cookie`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CookieOptions {
    /// The peer's MSS (the cookie's MSS class).
    pub mss: u16,
    /// The peer's window-scale shift, if it offered window scaling.
    pub window_scale: Option<u8>,
    /// The peer offered SACK.
    pub sack_permitted: bool,
    /// The peer offered timestamps.
    pub timestamps: bool,
}

/// A snapshot for `TCP_INFO`, `ss` and the stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Info {
    /// The state.
    pub state: State,
    /// Smoothed RTT (0 before the first sample).
    pub rtt: Duration,
    /// RTT variation.
    pub rttvar: Duration,
    /// The current RTO, backoff included.
    pub rto: Duration,
    /// Consecutive timeouts (RTO backoff exponent; Linux `tcpi_backoff`/`tcpi_retransmits`).
    pub backoff: u8,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retransmits: u32,
    /// Largest payload we send (options not counted).
    pub snd_mss: u32,
    /// Largest payload seen from the peer.
    pub rcv_mss: u32,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (`u32::MAX` before the first loss).
    pub ssthresh: u32,
    /// The peer's receive window, bytes.
    pub snd_wnd: u32,
    /// The window we advertise, bytes.
    pub rcv_wnd: u32,
    /// The peer's window-scale shift, if negotiated.
    pub snd_wscale: Option<u8>,
    /// Our window-scale shift, if negotiated.
    pub rcv_wscale: Option<u8>,
    /// Timestamps negotiated.
    pub timestamps: bool,
    /// SACK negotiated.
    pub sack: bool,
    /// In fast recovery.
    pub in_recovery: bool,
    /// Bytes sent and not acknowledged (`tcpi_unacked` in bytes).
    pub bytes_in_flight: u32,
    /// Bytes in the send buffer (unsent and unacknowledged).
    pub send_queue: u32,
    /// Bytes readable by the application.
    pub recv_queue: u32,
    /// The receive buffer's size now, in bytes of data (autotuning grows it).
    pub rcv_buf: u32,
    /// The send buffer's size now, in bytes of data (autotuning grows it).
    pub snd_buf: u32,
    /// Challenge ACKs generated (RFC 5961), for the stack's rate limit and stats.
    pub challenge_acks: u32,
}

/// What a connection's loss recovery did, for the stack's counters (Linux's MIB names). Each
/// counts from the connection's start and wraps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counters {
    /// Segments retransmitted (`RetransSegs`; `tcpi_total_retrans`).
    pub retransmits: u32,
    /// Retransmission timeouts, SYN and SYN-ACK timeouts included (`TCPTimeouts`).
    pub timeouts: u32,
    /// Tail loss probes sent (`TCPLossProbes`).
    pub loss_probes: u32,
    /// Losses repaired by a tail loss probe alone (`TCPLossProbeRecovery`).
    pub loss_probe_recoveries: u32,
    /// Segments RACK marked lost (RFC 8985 section 6.2 step 5).
    pub rack_lost: u32,
    /// Retransmissions RACK found lost in turn (`TCPLostRetransmit`).
    pub lost_retransmits: u32,
    /// Challenge ACKs not sent: within `invalid_ratelimit` of the last (`TCPACKSkippedChallenge`).
    pub challenge_acks_skipped: u32,
    /// Connections given up for unanswered retransmissions, SYNs, zero-window probes or
    /// keepalives, or an orphan's `orphan_retries` (`TCPAbortOnTimeout`).
    pub aborts_on_timeout: u32,
    /// In-order segments dropped: no memory for the receive ring (`TCPRcvQDrop`).
    pub rcvq_drops: u32,
    /// Out-of-order segments dropped: no memory for the receive ring (`TCPOFODrop`).
    pub ofo_drops: u32,
}

/// What the stack's memory budget (Linux's `tcp_mem`) allows a connection now: see
/// [`Connection::set_memory_budget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    /// The stack is under memory pressure: the window we advertise stops growing beyond four
    /// segments (Linux clamps `rcv_ssthresh` to 4 * advmss in `tcp_under_memory_pressure`).
    pub pressure: bool,
    /// Bytes the connection may add to what its rings hold (see
    /// [`Connection::charged_bytes`]): a segment whose charge exceeds it is dropped, and `send`
    /// queues at most this much (EAGAIN below [`SEND_QUANTUM`]).
    pub room: u32,
}

impl Default for MemoryBudget {
    fn default() -> Self {
        MemoryBudget { pressure: false, room: u32::MAX }
    }
}

/// One-bit facts of the connection that belong to no part.
#[derive(Debug, Clone, Copy)]
enum Flag {
    /// Opened by a listener (accepted, or completed by a SYN cookie).
    Passive,
    /// Our SYN or SYN-ACK had to be sent again.
    SynRetransmitted,
    /// An invalid segment was answered: `invalid_ack_ms` says when.
    InvalidAcked,
    /// The stack is under memory pressure (see [`MemoryBudget`]).
    MemoryPressure,
}

/// What a write needs from the memory budget before it queues anything: Linux's
/// `SK_MEM_QUANTUM` (a page), the unit in which `sk_wmem_schedule` takes memory.
pub const SEND_QUANTUM: usize = 4096;

/// What Linux's `skb->truesize` adds to a segment's bytes (the `sk_buff` and its shared info,
/// rounded as the kernel allocates them): the charge of out-of-order data per segment held.
pub const SEGMENT_OVERHEAD: usize = 768;

impl Bit for Flag {
    fn index(self) -> u8 {
        self as u8
    }
}

/// The RST owed with `Owed::Rst`: its SEG.SEQ, and its SEG.ACK with `Owed::RstAck` (not an
/// `Option`: 4 bytes less per connection).
#[derive(Debug, Clone, Copy, Default)]
struct Rst {
    seq: u32,
    ack: u32,
}

// The events not yet taken with `poll_event`, one bit each in `Connection::events`.
const EV_CONNECTED: u16 = 1 << 0;
const EV_READABLE: u16 = 1 << 1;
const EV_READ_CLOSED: u16 = 1 << 2;
const EV_WRITABLE: u16 = 1 << 3;
const EV_RESET: u16 = 1 << 4;
const EV_TIMED_OUT: u16 = 1 << 5;
const EV_TIME_WAIT: u16 = 1 << 6;
const EV_CLOSED: u16 = 1 << 7;
const EV_URGENT: u16 = 1 << 8;

/// One TCP connection. See the module documentation for how to drive it.
///
/// Memory: the struct itself is a few hundred bytes; the send and receive buffers are
/// allocated on first use (`snd_buf` and `rcv_buf` bytes) and can be given back with
/// [`Connection::release_buffers`] when empty.
#[derive(Debug)]
pub struct Connection {
    /// The configuration kept.
    p: Params,
    /// The congestion controller (CUBIC or NewReno).
    cc: Congestion,
    rtt: RttEstimator,
    snd: SendSpace,
    rcv: RecvSpace,
    loss: LossRecovery,
    timers: TimerTable,
    agreed: Agreed,
    ts: Timestamps,
    ecn: EcnState,
    urg: Urgent,
    /// Buffer autotuning's measurements.
    tune: autotune::Autotune,
    counters: Counters,
    /// Challenge ACKs generated (RFC 5961), for `TCP_INFO` and the stack's stats.
    challenge_acks: u32,
    /// Our millisecond clock when we last answered an invalid segment under Linux's
    /// `tcp_invalid_ratelimit` (see `invalid_ack_allowed`); meaningful once
    /// `Flag::InvalidAcked`.
    invalid_ack_ms: u32,
    /// Bytes the peer acknowledged, saturating (Linux `bytes_acked`): RFC 5961's acceptable
    /// old ACKs reach back by at most this much.
    bytes_acked: u32,
    /// What the next `poll_transmit` owes the peer besides data, and the RST's numbers.
    owed: Bits<Owed>,
    rst: Rst,
    flags: Bits<Flag>,
    /// Bytes the memory budget lets the rings take on now ([`MemoryBudget::room`]), where
    /// `u16::MAX` stands for that much or more: see `mem_room`.
    mem_room: u16,
    local_port: u16,
    remote_port: u16,
    state: State,
    /// The error `send`, `recv` and SO_ERROR report next.
    error: Option<Error>,
    /// Events not yet taken (`EV_*`).
    events: u16,
}

/// What a connection hands to its [`crate::TimeWait`] entry.
pub(crate) struct TimeWaitParts {
    pub(crate) deadline: Instant,
    pub(crate) time_wait: Duration,
    pub(crate) snd_nxt: u32,
    pub(crate) rcv_nxt: u32,
    pub(crate) ts_recent: u32,
    pub(crate) ts_offset: u32,
    pub(crate) window: u16,
    pub(crate) ts_ok: bool,
}

impl Connection {
    fn new(cfg: &Config, local_port: u16, remote_port: u16, iss: u32) -> Self {
        let p = Params::new(cfg);
        // As Linux, from the most the buffer may grow to (`tcp_rmem[2]`), so that autotuning can
        // announce what it grows.
        let rcv_wscale = if p.has(Opt::OfferWindowScale) { window_shift_for(p.rcv_buf_max) } else { 0 };
        Connection {
            p,
            cc: Congestion::new(cfg.congestion),
            snd: SendSpace::new(iss),
            loss: LossRecovery::new(iss),
            urg: Urgent::new(iss),
            tune: autotune::Autotune::default(),
            rcv: RecvSpace { mss: p.mss.min(DEFAULT_MSS), ..RecvSpace::default() },
            timers: TimerTable::default(),
            agreed: Agreed::new(rcv_wscale),
            ts: Timestamps { recent_time: 0, recent: 0, offset: cfg.ts_offset },
            rtt: RttEstimator::new(to_us(cfg.rto_initial).clamp(p.rto_min_us, p.rto_max_us)),
            counters: Counters::default(),
            challenge_acks: 0,
            invalid_ack_ms: 0,
            bytes_acked: 0,
            ecn: EcnState::new(iss),
            rst: Rst::default(),
            owed: Bits::default(),
            flags: Bits::default(),
            mem_room: u16::MAX,
            local_port,
            remote_port,
            state: State::Closed,
            error: None,
            events: 0,
        }
    }

    /// Active open: SYN-SENT with a SYN to send. `iss` is chosen by the caller (RFC 6528).
    pub fn connect(cfg: &Config, local_port: u16, remote_port: u16, iss: u32, now: Instant) -> Connection {
        // Nothing is timed yet: the SYN and its timer start when `poll_transmit` sends it.
        let _ = now;
        let mut conn = Connection::new(cfg, local_port, remote_port, iss);
        conn.state = State::SynSent;
        conn.ecn.set(EcnBit::On, conn.p.ecn == Ecn::On);
        conn
    }

    /// Passive open from a listener that received `syn`: SYN-RECEIVED with a SYN-ACK to send.
    /// Data on the SYN is not kept (there is no TCP Fast Open); the peer sends it again.
    pub fn accept(cfg: &Config, syn: &TcpRepr, iss: u32, now: Instant) -> Connection {
        let mut conn = Connection::new(cfg, syn.dst_port, syn.src_port, iss);
        conn.state = State::SynReceived;
        conn.flags.insert(Flag::Passive);
        conn.rcv.irs = syn.seq_number;
        conn.rcv.nxt = syn.seq_number.wrapping_add(1);
        conn.rcv.last_ack_sent = conn.rcv.nxt;
        conn.rcv.adv = conn.rcv.nxt;
        conn.negotiate(now, syn);
        // RFC 3168 section 6.1.1: an ECN-setup SYN (ECE and CWR) is answered with ECE. A SYN
        // that is itself ECN-capable is no ECN-setup SYN (Linux `tcp_ecn_create_request`): the
        // stack, which sees the IP header, clears its ECE and CWR.
        conn.ecn.set(EcnBit::On, conn.p.ecn != Ecn::Off && syn.flags.contains(TcpFlags::ECE | TcpFlags::CWR));
        conn.snd.wnd = u32::from(syn.window_len);
        conn.snd.max_wnd = conn.snd.wnd;
        conn.snd.wl1 = syn.seq_number;
        conn.snd.wl2 = iss;
        conn
    }

    /// Passive open completed by a SYN cookie: ESTABLISHED straight from the peer's `ack` and
    /// what the cookie remembers of its SYN. Our own side of the options follows `cfg`, which
    /// must be the configuration the SYN-ACK was made with; the stack can make that SYN-ACK
    /// with `Connection::accept(cfg, syn, iss, now).poll_transmit(now, &mut [])` and then drop
    /// that connection (it allocates nothing). If `ack` carries data or a FIN, pass it to
    /// [`Connection::handle_segment`] afterwards.
    pub fn from_cookie(cfg: &Config, ack: &TcpRepr, cookie: CookieOptions, now: Instant) -> Connection {
        let ack_number = ack.ack_number.unwrap_or(0);
        let iss = ack_number.wrapping_sub(1);
        let mut conn = Connection::new(cfg, ack.dst_port, ack.src_port, iss);
        conn.flags.insert(Flag::Passive);
        conn.rcv.irs = ack.seq_number.wrapping_sub(1);
        conn.rcv.nxt = ack.seq_number;
        conn.rcv.last_ack_sent = conn.rcv.nxt;
        conn.agree(now, cookie, ack.timestamp.map(|(tsval, _)| tsval));
        conn.snd.una = ack_number;
        conn.snd.nxt = ack_number;
        conn.snd.max = ack_number;
        conn.snd.buf_seq = ack_number;
        conn.rcv.adv = conn.rcv.nxt.wrapping_add(conn.syn_window());
        conn.snd.wnd = u32::from(ack.window_len) << conn.agreed.snd_wscale;
        conn.snd.max_wnd = conn.snd.wnd;
        conn.snd.wl1 = ack.seq_number;
        conn.snd.wl2 = ack_number;
        conn.establish(now);
        conn
    }

    /// Window in our SYN or SYN-ACK (never scaled).
    fn syn_window(&self) -> u32 {
        self.p.rcv_buf.min(0xffff)
    }

    /// The most we advertise: the buffer, capped by what the field can say.
    fn rcv_buf_adv(&self) -> u32 {
        self.p.rcv_buf.min(0xffff << self.agreed.rcv_wscale)
    }

    /// The window the free buffer allows, in whole units of our window scale. Under the
    /// stack's memory pressure at most four segments (Linux clamps `rcv_ssthresh` to 4 *
    /// advmss when `tcp_under_memory_pressure`): the window stops growing, and a right edge
    /// already further is kept, not moved back.
    fn free_window(&self) -> u32 {
        let g = 1u32 << self.agreed.rcv_wscale;
        let mut free = self.rcv_buf_adv().saturating_sub(self.rcv.buf.len() as u32);
        if self.flags.has(Flag::MemoryPressure) {
            free = free.min(4 * u32::from(self.p.mss));
        }
        free & !(g - 1)
    }

    /// The receive ring's capacity: a little more than we advertise. With window scaling the
    /// window field cannot say every value: when the buffer fills, keeping the right edge
    /// where it was means rounding up, by less than one scale unit per ACK; the slack absorbs
    /// that (see `select_window`).
    fn rx_cap(&self) -> usize {
        let adv = self.rcv_buf_adv() as usize;
        let slack = if self.agreed.rcv_wscale > 0 { (adv / 32).max(1 << self.agreed.rcv_wscale) } else { 0 };
        adv + slack
    }

    /// EPOLLOUT's rule: at least a third of the send buffer free (Linux's
    /// `sk_stream_is_writeable`).
    fn tx_writable(&self) -> bool {
        let free = (self.p.snd_buf as usize).saturating_sub(self.snd.buf.len());
        free > 0 && free >= self.snd.buf.len() / 2
    }

    /// The receive ring's size when it is allocated: at least the window promised, which may
    /// have been offered under a larger buffer.
    fn rx_ring_size(&self) -> usize {
        self.rx_cap().max(self.rcv.wnd() as usize)
    }

    /// Bytes the memory budget lets the rings take on now. 64 KiB and more are not told apart
    /// (2 bytes, not 4, keep the struct at its size): that much room is no limit, so a write
    /// near `high` may overshoot it by less than one send ring, as Linux's per-socket forward
    /// allocation lets a socket overshoot.
    fn mem_room(&self) -> usize {
        match self.mem_room {
            u16::MAX => usize::MAX,
            room => usize::from(room),
        }
    }

    /// Whether the memory budget lets a write queue data.
    fn may_allocate_send(&self) -> bool {
        self.mem_room() >= SEND_QUANTUM
    }

    /// What out-of-order data costs the budget: each range as whole segments of the largest
    /// size seen, each with [`SEGMENT_OVERHEAD`] (Linux charges an out-of-order skb its
    /// truesize: one byte costs about a segment, never a ring).
    #[inline]
    fn out_of_order_charge(&self) -> usize {
        if self.rcv.ooo.is_empty() {
            return 0;
        }
        let mss = usize::from(self.rcv.mss.max(1));
        let segments: usize =
            self.rcv.ooo.ranges().iter().map(|&(s, e)| (e.wrapping_sub(s) as usize).div_ceil(mss)).sum();
        segments * (mss + SEGMENT_OVERHEAD)
    }

    /// An orphan: the application closed the connection (it will read nothing more) while it
    /// still has data or a FIN to deliver.
    fn orphaned(&self) -> bool {
        self.rcv.closed
    }

    /// Linux's `tcp_orphan_retries()`: how many retransmissions or probes an orphan gets.
    /// `alive` says the backed-off interval is still below `rto_max`.
    fn orphan_retries(&self, alive: bool) -> u8 {
        match self.p.orphan_retries {
            0 if alive => 8,
            n => n,
        }
    }

    /// A state in which data (and our FIN) may be sent.
    fn can_send_data(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }

    /// What a [`crate::TimeWait`] entry keeps.
    /// Where the receive and send buffers' bytes start in their memory (tests of rewinding).
    #[cfg(test)]
    pub(crate) fn ring_heads(&self) -> (usize, usize) {
        (self.rcv.buf.head(), self.snd.buf.head())
    }

    pub(crate) fn time_wait_parts(&self) -> TimeWaitParts {
        let field = (self.rcv.wnd() >> self.agreed.rcv_wscale).min(0xffff) as u16;
        TimeWaitParts {
            deadline: self.timers.deadline(Timer::Idle),
            time_wait: ms(self.p.time_wait_ms),
            snd_nxt: self.snd.max,
            rcv_nxt: self.rcv.nxt,
            ts_recent: self.ts.recent,
            ts_offset: self.ts.offset,
            window: field,
            ts_ok: self.agreed.timestamps(),
        }
    }
}
