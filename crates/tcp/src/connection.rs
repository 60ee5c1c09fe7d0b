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

use wire::{TcpFlags, TcpRepr};

use crate::config::{Config, Ecn, Keepalive};
use crate::congestion::{Congestion, CongestionControl};
use crate::rack::Rack;
use crate::ranges::{OooRanges, Scoreboard};
use crate::ring::Ring;
use crate::sent::SentLog;
use crate::seq;
use crate::{Duration, Instant, MILLISECOND, SECOND};

/// A timer that is not armed.
const NEVER: Instant = Instant::MAX;
/// RFC 9293 section 3.7.1: the send MSS when the peer announces none (IPv4's 576 - 40).
const DEFAULT_MSS: u16 = 536;
/// RFC 7323 section 5.5: a TS.Recent idle for longer than this is too old for PAWS.
const PAWS_IDLE: Duration = 24 * 24 * 3600 * SECOND;
/// RFC 6298's G, the clock granularity term of the RTO, in microseconds.
const CLOCK_GRANULARITY_US: u64 = 1000;
/// RFC 6298 section 5.7: the RTO once data flows if the SYN had to be retransmitted.
const RTO_AFTER_SYN_LOSS_US: u32 = 3_000_000;
/// Duplicate ACKs that mean a loss (RFC 5681 section 3.2, RFC 6675 DupThresh).
const DUPTHRESH: u8 = 3;
/// The smallest segment size an ICMP message can bring us down to.
const MIN_PATH_MSS: u16 = 536;
/// Length of a TCP header without options.
const HEADER_LEN: usize = wire::tcp::HEADER_LEN;

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
}

/// The configuration kept by a connection, compact: durations in µs or ms.
#[derive(Debug, Clone, Copy)]
struct Params {
    rcv_buf: u32,
    snd_buf: u32,
    initial_cwnd: u32,
    delayed_ack_us: u32,
    rto_min_us: u32,
    rto_max_us: u32,
    time_wait_ms: u32,
    fin_wait2_ms: u32,
    ka_idle_ms: u32,
    ka_interval_ms: u32,
    invalid_ratelimit_ms: u32,
    mss: u16,
    ka_count: u8,
    syn_retries: u8,
    synack_retries: u8,
    retries2: u8,
    keepalive: bool,
    nodelay: bool,
    offer_ws: bool,
    offer_sack: bool,
    offer_ts: bool,
    ecn: Ecn,
    rack_tlp: bool,
    /// SO_OOBINLINE: the urgent byte stays in the stream.
    oob_inline: bool,
    /// SO_RCVLOWAT: bytes that make the connection readable (at least 1).
    rcvlowat: u32,
}

fn to_us(d: Duration) -> u32 {
    (d / 1000).min(u64::from(u32::MAX)) as u32
}

fn to_ms(d: Duration) -> u32 {
    (d / MILLISECOND).min(u64::from(u32::MAX)) as u32
}

fn ms(v: u32) -> Duration {
    u64::from(v) * MILLISECOND
}

fn us(v: u32) -> Duration {
    u64::from(v) * 1000
}

impl Params {
    fn new(cfg: &Config) -> Self {
        let ka = cfg.keepalive.unwrap_or_default();
        Params {
            rcv_buf: cfg.rcv_buf.max(1),
            snd_buf: cfg.snd_buf.max(1),
            initial_cwnd: cfg.initial_cwnd.max(1),
            delayed_ack_us: to_us(cfg.delayed_ack),
            rto_min_us: to_us(cfg.rto_min).max(1),
            rto_max_us: to_us(cfg.rto_max).max(to_us(cfg.rto_min)).max(1),
            time_wait_ms: to_ms(cfg.time_wait),
            fin_wait2_ms: to_ms(cfg.fin_wait2_timeout),
            ka_idle_ms: to_ms(ka.idle),
            ka_interval_ms: to_ms(ka.interval),
            invalid_ratelimit_ms: to_ms(cfg.invalid_ratelimit),
            // Below 88 bytes the options of a SYN do not leave room for data (Linux clamps too).
            mss: cfg.mss.max(88),
            ka_count: ka.count,
            syn_retries: cfg.syn_retries,
            synack_retries: cfg.synack_retries,
            retries2: cfg.retries2,
            keepalive: cfg.keepalive.is_some(),
            nodelay: cfg.nodelay,
            offer_ws: cfg.window_scale,
            offer_sack: cfg.sack,
            offer_ts: cfg.timestamps,
            ecn: cfg.ecn,
            rack_tlp: cfg.rack_tlp,
            oob_inline: false,
            rcvlowat: 1,
        }
    }

    fn set_keepalive(&mut self, keepalive: Option<Keepalive>) {
        let ka = keepalive.unwrap_or_default();
        self.keepalive = keepalive.is_some();
        self.ka_idle_ms = to_ms(ka.idle);
        self.ka_interval_ms = to_ms(ka.interval);
        self.ka_count = ka.count;
    }
}

/// Our timestamp clock at `t`: milliseconds plus the connection's offset.
fn ts_clock(t: Instant, offset: u32) -> u32 {
    ((t / MILLISECOND) as u32).wrapping_add(offset)
}

/// RFC 2883 section 4: the first SACK block reports data that arrived twice (D-SACK) if it
/// lies below the cumulative ACK or inside the second block.
fn dsack_block(seg: &TcpRepr, ack: u32) -> Option<(u32, u32)> {
    let (left, right) = seg.sack_ranges[0]?;
    let inside_second = seg.sack_ranges[1].is_some_and(|(l2, r2)| seq::le(l2, left) && seq::le(right, r2));
    (seq::lt(left, ack) || inside_second).then_some((left, right))
}

/// The smallest shift that lets a 16-bit window field cover `buf` (RFC 7323: at most 14).
fn window_shift_for(buf: u32) -> u8 {
    let mut shift = 0;
    while shift < 14 && (buf >> shift) > 0xffff {
        shift += 1;
    }
    shift
}

/// Fast-recovery mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recovery {
    None,
    /// RFC 6582: retransmit on partial ACKs, window inflated by duplicate ACKs.
    NewReno,
    /// RFC 6675: the scoreboard and the pipe decide.
    Sack,
}

/// What the loss timer (`t_loss`) is for when it is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LossTimer {
    /// RACK's reordering timer: run loss detection again (RFC 8985 section 6.2).
    Reorder,
    /// The tail loss probe timeout (RFC 8985 section 7.2).
    Probe,
}

/// Urgent data from the peer, Linux's `urg_data` states. RFC 6093 section 4 (and every stack
/// in use) reads the urgent pointer as the byte *after* the urgent data; Linux keeps one byte of
/// it, the last, out of the stream (unless SO_OOBINLINE) and a newer pointer replaces it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UrgentIn {
    /// No urgent mark ahead of the reader.
    None,
    /// The pointer arrived; the byte it marks has not yet.
    Announced,
    /// The urgent byte, waiting for `recv_urgent`.
    Arrived(u8),
    /// The urgent byte was taken with `recv_urgent`; its mark stays until the reader passes it.
    Taken,
}

/// A RST to send.
#[derive(Debug, Clone, Copy)]
struct Rst {
    seq: u32,
    ack: Option<u32>,
}

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
    p: Params,
    cc: Congestion,

    // Send sequence space (RFC 9293 section 3.3.1). `snd_max` is the highest sequence number
    // sent plus one; `snd_nxt` is below it while going back after an RTO.
    iss: u32,
    snd_una: u32,
    snd_nxt: u32,
    snd_max: u32,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_wl1: u32,
    snd_wl2: u32,
    /// Sequence number of the first byte in `tx`.
    tx_seq: u32,
    tx: Ring,
    /// RFC 6582 `recover` (exclusive: the highest sequence number sent plus one at loss).
    recover: u32,
    /// NewReno's window inflation during fast recovery.
    inflate: u32,
    sacked: Scoreboard,
    /// When each range in flight was sent, and what recovery made of it.
    sent: SentLog,
    rack: Rack,
    /// SND.UP: the sequence number after the last urgent byte sent (Linux's `snd_up`), while
    /// `snd_urgent`.
    snd_up: u32,

    // Receive sequence space.
    irs: u32,
    rcv_nxt: u32,
    /// The right edge of the window we advertised (it never moves left).
    rcv_adv: u32,
    /// Where an out-of-order FIN sits (`rcv_fin_set`).
    rcv_fin: u32,
    /// Bytes received since we last sent an ACK.
    rcv_unacked: u32,
    rx: Ring,
    ooo: OooRanges,
    /// RFC 2883: data that arrived twice, for the first SACK block of our next ACK (D-SACK);
    /// none when empty (not an `Option`: 8 bytes less per connection).
    dsack: (u32, u32),
    /// The peer's urgent byte's sequence number (Linux's `urg_seq`), unless `rcv_urg` is `None`.
    rcv_up: u32,
    rcv_urg: UrgentIn,

    // Timers (NEVER when not armed).
    /// RTO, SYN retransmission or zero-window probe (persist).
    t_rtx: Instant,
    t_delack: Instant,
    /// Keepalive, FIN-WAIT-2 timeout or TIME-WAIT end.
    t_idle: Instant,
    /// RACK's reordering timer or the tail loss probe (`loss_timer` says which).
    t_loss: Instant,

    // RTT (RFC 6298), in µs.
    rtt_start: Instant,
    rtt_seq: u32,
    srtt_us: u32,
    rttvar_us: u32,
    rto_us: u32,

    // Timestamps (RFC 7323).
    ts_recent_time: Instant,
    ts_recent: u32,
    ts_offset: u32,
    /// Our TSval when we last retransmitted (see `ts_rtx_pending`).
    ts_rtx: u32,
    last_ack_sent: u32,

    counters: Counters,
    challenge_acks: u32,
    /// Our millisecond clock when we last answered an invalid segment under Linux's
    /// `tcp_invalid_ratelimit` (see `invalid_ack_allowed`); meaningful once `invalid_acked`.
    invalid_ack_ms: u32,
    /// Bytes the peer acknowledged, saturating (Linux `bytes_acked`): RFC 5961's acceptable
    /// old ACKs reach back by at most this much.
    bytes_acked: u32,
    /// RFC 3168: SND.MAX when we last reduced the window for congestion; an ECE is not acted
    /// on again until an ACK goes beyond it (`ecn_reducing`).
    ecn_reduced_at: u32,
    rst: Option<Rst>,

    local_port: u16,
    remote_port: u16,
    peer_mss: u16,
    /// The payload a segment may carry on this path, from ICMP "fragmentation needed" / "packet
    /// too big" (RFC 1191, 8201); `u16::MAX` until the path says otherwise.
    path_mss: u16,
    /// Largest segment seen from the peer (for the delayed-ACK rule).
    rcv_mss: u16,
    state: State,
    recovery: Recovery,
    loss_timer: LossTimer,
    error: Option<Error>,
    events: u16,
    snd_wscale: u8,
    rcv_wscale: u8,
    /// RTO backoff exponent: consecutive timeouts.
    backoff: u8,
    persist_backoff: u8,
    /// Zero-window probes without an answer.
    probes: u8,
    ka_probes: u8,
    dupacks: u8,

    ws_ok: bool,
    sack_ok: bool,
    ts_ok: bool,
    have_rtt: bool,
    rtt_timing: bool,
    /// A retransmission happened: echoes older than `ts_rtx` are no RTT samples.
    ts_rtx_pending: bool,
    passive: bool,
    syn_retransmitted: bool,
    /// The application shut down writing: a FIN follows the data.
    fin_queued: bool,
    /// The application closed: it will read no more (new data is answered with a RST).
    rcv_closed: bool,
    fin_received: bool,
    rcv_fin_set: bool,
    ack_now: bool,
    challenge: bool,
    /// Retransmit the segment at SND.UNA next (fast retransmit, NewReno partial ACK).
    rtx_first: bool,
    /// Send a probe (zero window or keepalive): an ACK with SEG.SEQ = SND.UNA - 1.
    probe: bool,
    /// The persist timer fired with a small window open: send what fits, SWS or not.
    force_send: bool,
    /// The probe timeout fired: send a tail loss probe.
    send_probe: bool,
    write_blocked: bool,
    invalid_acked: bool,
    /// ECN (RFC 3168) is in use: negotiated, or asked for in our SYN (SYN-SENT).
    ecn_ok: bool,
    /// The peer sent us CE-marked data: every segment carries ECE until its CWR.
    ecn_echo: bool,
    /// The window was reduced: the next new data segment carries CWR.
    ecn_cwr_pending: bool,
    /// Within the window of the last reduction (see `ecn_reduced_at`).
    ecn_reducing: bool,
    /// The segment being handled arrived CE-marked.
    seg_ce: bool,
    /// The segment `poll_transmit` returned last goes out ECN-capable, ECT(0).
    tx_ect: bool,
    /// Urgent data sent and not yet acknowledged: segments before SND.UP carry URG.
    snd_urgent: bool,
}

impl Connection {
    fn new(cfg: &Config, local_port: u16, remote_port: u16, iss: u32) -> Self {
        let p = Params::new(cfg);
        let rcv_wscale = if p.offer_ws { window_shift_for(p.rcv_buf) } else { 0 };
        Connection {
            p,
            cc: Congestion::new(cfg.congestion),
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_wl1: 0,
            snd_wl2: iss,
            tx_seq: iss.wrapping_add(1),
            tx: Ring::default(),
            recover: iss,
            inflate: 0,
            sacked: Scoreboard::default(),
            sent: SentLog::default(),
            rack: Rack::new(iss),
            snd_up: iss,
            irs: 0,
            rcv_nxt: 0,
            rcv_adv: 0,
            rcv_fin: 0,
            rcv_unacked: 0,
            rx: Ring::default(),
            ooo: OooRanges::default(),
            dsack: (0, 0),
            rcv_up: 0,
            rcv_urg: UrgentIn::None,
            t_rtx: NEVER,
            t_delack: NEVER,
            t_idle: NEVER,
            t_loss: NEVER,
            rtt_start: 0,
            rtt_seq: 0,
            srtt_us: 0,
            rttvar_us: 0,
            rto_us: to_us(cfg.rto_initial).clamp(p.rto_min_us, p.rto_max_us),
            ts_recent_time: 0,
            ts_recent: 0,
            ts_offset: cfg.ts_offset,
            ts_rtx: 0,
            last_ack_sent: 0,
            counters: Counters::default(),
            challenge_acks: 0,
            invalid_ack_ms: 0,
            bytes_acked: 0,
            ecn_reduced_at: iss,
            rst: None,
            local_port,
            remote_port,
            peer_mss: DEFAULT_MSS,
            path_mss: u16::MAX,
            rcv_mss: p.mss.min(DEFAULT_MSS),
            state: State::Closed,
            recovery: Recovery::None,
            loss_timer: LossTimer::Reorder,
            error: None,
            events: 0,
            snd_wscale: 0,
            rcv_wscale,
            backoff: 0,
            persist_backoff: 0,
            probes: 0,
            ka_probes: 0,
            dupacks: 0,
            ws_ok: false,
            sack_ok: false,
            ts_ok: false,
            have_rtt: false,
            rtt_timing: false,
            ts_rtx_pending: false,
            passive: false,
            syn_retransmitted: false,
            fin_queued: false,
            rcv_closed: false,
            fin_received: false,
            rcv_fin_set: false,
            ack_now: false,
            challenge: false,
            rtx_first: false,
            probe: false,
            force_send: false,
            send_probe: false,
            write_blocked: false,
            invalid_acked: false,
            ecn_ok: false,
            ecn_echo: false,
            ecn_cwr_pending: false,
            ecn_reducing: false,
            seg_ce: false,
            tx_ect: false,
            snd_urgent: false,
        }
    }

    /// Active open: SYN-SENT with a SYN to send. `iss` is chosen by the caller (RFC 6528).
    pub fn connect(cfg: &Config, local_port: u16, remote_port: u16, iss: u32, now: Instant) -> Connection {
        // Nothing is timed yet: the SYN and its timer start when `poll_transmit` sends it.
        let _ = now;
        let mut conn = Connection::new(cfg, local_port, remote_port, iss);
        conn.state = State::SynSent;
        conn.ecn_ok = conn.p.ecn == Ecn::On;
        conn
    }

    /// Passive open from a listener that received `syn`: SYN-RECEIVED with a SYN-ACK to send.
    /// Data on the SYN is not kept (there is no TCP Fast Open); the peer sends it again.
    pub fn accept(cfg: &Config, syn: &TcpRepr, iss: u32, now: Instant) -> Connection {
        let mut conn = Connection::new(cfg, syn.dst_port, syn.src_port, iss);
        conn.state = State::SynReceived;
        conn.passive = true;
        conn.irs = syn.seq_number;
        conn.rcv_nxt = syn.seq_number.wrapping_add(1);
        conn.last_ack_sent = conn.rcv_nxt;
        conn.rcv_adv = conn.rcv_nxt;
        conn.negotiate(now, syn);
        // RFC 3168 section 6.1.1: an ECN-setup SYN (ECE and CWR) is answered with ECE. A SYN
        // that is itself ECN-capable is no ECN-setup SYN (Linux `tcp_ecn_create_request`): the
        // stack, which sees the IP header, clears its ECE and CWR.
        conn.ecn_ok = conn.p.ecn != Ecn::Off && syn.flags.contains(TcpFlags::ECE | TcpFlags::CWR);
        conn.snd_wnd = u32::from(syn.window_len);
        conn.max_snd_wnd = conn.snd_wnd;
        conn.snd_wl1 = syn.seq_number;
        conn.snd_wl2 = iss;
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
        conn.passive = true;
        conn.irs = ack.seq_number.wrapping_sub(1);
        conn.rcv_nxt = ack.seq_number;
        conn.last_ack_sent = conn.rcv_nxt;
        conn.peer_mss = if cookie.mss == 0 { DEFAULT_MSS } else { cookie.mss };
        conn.ws_ok = conn.p.offer_ws && cookie.window_scale.is_some();
        if conn.ws_ok {
            conn.snd_wscale = cookie.window_scale.unwrap_or(0).min(14);
        } else {
            conn.rcv_wscale = 0;
        }
        conn.sack_ok = conn.p.offer_sack && cookie.sack_permitted;
        if let (true, true, Some((tsval, _))) = (conn.p.offer_ts, cookie.timestamps, ack.timestamp) {
            conn.ts_ok = true;
            conn.ts_recent = tsval;
            conn.ts_recent_time = now;
        }
        conn.snd_una = ack_number;
        conn.snd_nxt = ack_number;
        conn.snd_max = ack_number;
        conn.tx_seq = ack_number;
        conn.rcv_adv = conn.rcv_nxt.wrapping_add(conn.syn_window());
        conn.snd_wnd = u32::from(ack.window_len) << conn.snd_wscale;
        conn.max_snd_wnd = conn.snd_wnd;
        conn.snd_wl1 = ack.seq_number;
        conn.snd_wl2 = ack_number;
        conn.establish(now);
        conn
    }

    // ---------------------------------------------------------------------------------------
    // Application side
    // ---------------------------------------------------------------------------------------

    /// The state.
    pub fn state(&self) -> State {
        self.state
    }

    /// Our port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }

    /// The peer's port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }

    /// Copies data into the send buffer; returns how much fitted. `Err(WouldBlock)` when the
    /// buffer is full or the handshake is not done; `Err(BrokenPipe)` after `shutdown_write`,
    /// `close` or the end of the connection; a pending error (reset, timeout) is returned once
    /// first, as Linux does.
    pub fn send(&mut self, data: &[u8]) -> Result<usize, Error> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        match self.state {
            State::SynSent | State::SynReceived if !self.fin_queued => return Err(Error::WouldBlock),
            State::Established | State::CloseWait if !self.fin_queued => {}
            _ => return Err(Error::BrokenPipe),
        }
        if data.is_empty() {
            return Ok(0);
        }
        self.tx.ensure(self.p.snd_buf as usize);
        let room = (self.p.snd_buf as usize).saturating_sub(self.tx.len());
        let n = self.tx.push(&data[..data.len().min(room)]);
        if n < data.len() {
            self.write_blocked = true;
        }
        if n == 0 {
            return Err(Error::WouldBlock);
        }
        Ok(n)
    }

    /// `send(..., MSG_OOB)`: [`Connection::send`], and the last byte taken is urgent: the urgent
    /// pointer (SND.UP) moves to just after it, as Linux's `tcp_mark_urg` does, and every segment
    /// sent before it carries URG until the peer acknowledges it (RFC 9293 3.8.5; the pointer
    /// names the byte after the urgent data, RFC 6093 section 4). Nagle does not hold urgent
    /// data back.
    pub fn send_urgent(&mut self, data: &[u8]) -> Result<usize, Error> {
        let n = self.send(data)?;
        if n > 0 {
            self.snd_up = self.data_end();
            self.snd_urgent = true;
        }
        Ok(n)
    }

    /// Reads in-order data. `Ok(0)` is end of stream (the peer's FIN, or the connection ended
    /// after its error was reported); `Err(WouldBlock)` when nothing is there yet. A pending
    /// error (reset, timeout) is returned once, after the data that arrived before it.
    ///
    /// The urgent mark ends a read that has data before it (Linux's `tcp_recvmsg`); a read at the
    /// mark skips the urgent byte unless SO_OOBINLINE (it is `recv_urgent`'s), even when nothing
    /// follows it yet.
    pub fn recv(&mut self, buf: &mut [u8]) -> Result<usize, Error> {
        let (skip, len) = self.readable_span();
        let n = buf.len().min(len);
        if n > 0 || (skip > 0 && !buf.is_empty()) {
            self.rx.read_at(skip, &mut buf[..n]);
            self.rx.pop(skip + n);
            self.passed_urgent_mark();
            self.window_update_after_read();
            if n > 0 {
                return Ok(n);
            }
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.fin_received || self.state == State::Closed {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// Like [`Connection::recv`] but leaves the data in place (MSG_PEEK): the same answer, the
    /// same errors (an error is reported, not consumed).
    pub fn peek(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let (skip, len) = self.readable_span();
        let n = buf.len().min(len);
        if n > 0 {
            self.rx.read_at(skip, &mut buf[..n]);
            return Ok(n);
        }
        if buf.is_empty() {
            return Ok(0);
        }
        if let Some(err) = self.error {
            return Err(err);
        }
        if self.fin_received || self.state == State::Closed {
            return Ok(0);
        }
        Err(Error::WouldBlock)
    }

    /// `recv(..., MSG_OOB)`: the urgent byte, as Linux's `tcp_recv_urg` answers. It never waits:
    /// `Err(WouldBlock)` while the pointer has arrived and the byte has not; `Err(InvalidInput)`
    /// (EINVAL) with SO_OOBINLINE, without urgent data, or once it was taken; `Err(NotConnected)`
    /// on a connection that ended without the peer's FIN; `Ok(None)` (end of stream) after it.
    /// `peek` (MSG_PEEK) leaves the byte to be read again.
    pub fn recv_urgent(&mut self, peek: bool) -> Result<Option<u8>, Error> {
        if self.p.oob_inline || matches!(self.rcv_urg, UrgentIn::None | UrgentIn::Taken) {
            return Err(Error::InvalidInput);
        }
        if self.state == State::Closed && !self.fin_received {
            return Err(Error::NotConnected);
        }
        if let UrgentIn::Arrived(byte) = self.rcv_urg {
            if !peek {
                self.rcv_urg = UrgentIn::Taken;
            }
            return Ok(Some(byte));
        }
        if self.fin_received || self.state == State::Closed {
            return Ok(None);
        }
        Err(Error::WouldBlock)
    }

    /// Bytes between the reader and the urgent mark (`Some(0)`: at the mark, SIOCATMARK), or
    /// `None` without urgent data ahead.
    pub fn urgent_mark(&self) -> Option<usize> {
        (self.rcv_urg != UrgentIn::None).then(|| self.rcv_up.wrapping_sub(self.read_seq()) as usize)
    }

    /// SO_OOBINLINE: the urgent byte stays in the stream (`recv` returns it, `recv_urgent` says
    /// EINVAL); reads still stop at the mark and SIOCATMARK still finds it.
    pub fn set_oob_inline(&mut self, inline: bool) {
        self.p.oob_inline = inline;
    }

    /// SO_RCVLOWAT: the connection is readable (EPOLLIN) once this many bytes are there (at
    /// least 1), or when the window left is at most one segment (Linux: the peer could not send
    /// more). How a blocking read waits for them is the caller's.
    pub fn set_rcvlowat(&mut self, bytes: u32) {
        self.p.rcvlowat = bytes.max(1);
    }

    /// SO_RCVBUF, in bytes of data (the window advertised is at most this). The window-scale
    /// shift was fixed by the handshake: a buffer larger than it can announce is announced as
    /// far as it can. A smaller buffer takes back no window already offered.
    pub fn set_recv_buffer(&mut self, bytes: u32) {
        self.p.rcv_buf = bytes.max(1);
        let cap = self.rx_cap();
        if self.rx.is_allocated() && self.rx.capacity() < cap {
            self.rx.grow(cap);
        }
    }

    /// SO_SNDBUF, in bytes of data: what `send` may queue (unsent and unacknowledged). Data
    /// already queued beyond a smaller buffer stays; `send` waits until it drains below it.
    pub fn set_send_buffer(&mut self, bytes: u32) {
        self.p.snd_buf = bytes.max(1);
        let cap = self.p.snd_buf as usize;
        if self.tx.is_allocated() && self.tx.capacity() < cap {
            self.tx.grow(cap);
        }
    }

    /// Bytes `recv` can return now, up to the urgent mark unless SO_OOBINLINE (FIONREAD, Linux's
    /// `tcp_inq`).
    pub fn recv_available(&self) -> usize {
        match self.urgent_mark() {
            Some(before_mark) if !self.p.oob_inline => before_mark.min(self.rx.len()),
            _ => self.rx.len(),
        }
    }

    /// Bytes `send` accepts now.
    pub fn send_space(&self) -> usize {
        match self.state {
            State::Established | State::CloseWait if !self.fin_queued => {
                (self.p.snd_buf as usize).saturating_sub(self.tx.len())
            }
            _ => 0,
        }
    }

    /// Bytes in the send buffer, sent or not (SIOCOUTQ).
    pub fn send_queued(&self) -> usize {
        self.tx.len()
    }

    /// EPOLLIN: SO_RCVLOWAT bytes of data (one more at the urgent mark, whose byte a read
    /// skips), or any data once the window left is at most a segment; end of stream; or an error
    /// to report. Linux's `tcp_poll`.
    pub fn is_readable(&self) -> bool {
        let avail = self.rx.len() as u32;
        let skipped = u32::from(self.urgent_mark() == Some(0) && !self.p.oob_inline);
        let target = self.p.rcvlowat.saturating_add(skipped);
        let enough = avail > 0 && (avail >= target || self.rcv_wnd() <= u32::from(self.rcv_mss));
        enough || self.fin_received || self.error.is_some() || self.state == State::Closed
    }

    /// EPOLLPRI: the urgent byte has arrived and was not taken yet (with SO_OOBINLINE too).
    pub fn has_urgent(&self) -> bool {
        matches!(self.rcv_urg, UrgentIn::Arrived(_))
    }

    /// EPOLLOUT: room in the send buffer (at least a third of it free, like Linux's
    /// `sk_stream_is_writeable`), or an error to report.
    pub fn is_writable(&self) -> bool {
        (self.send_space() > 0 && self.tx_writable()) || self.error.is_some() || self.state == State::Closed
    }

    /// The pending error, consumed (SO_ERROR).
    pub fn take_error(&mut self) -> Option<Error> {
        self.error.take()
    }

    /// The pending error, left in place.
    pub fn error(&self) -> Option<Error> {
        self.error
    }

    /// `shutdown(SHUT_WR)`: a FIN follows the queued data. In SYN-SENT it abandons the connect
    /// (Linux disconnects); on a closed connection it is `Err(NotConnected)`.
    pub fn shutdown_write(&mut self) -> Result<(), Error> {
        match self.state {
            State::Closed => return Err(Error::NotConnected),
            State::SynSent => self.enter_closed(),
            State::SynReceived => self.fin_queued = true,
            State::Established => {
                self.fin_queued = true;
                self.state = State::FinWait1;
                self.t_idle = NEVER; // keepalive is for ESTABLISHED and CLOSE-WAIT
            }
            State::CloseWait => {
                self.fin_queued = true;
                self.state = State::LastAck;
                self.t_idle = NEVER;
            }
            _ => {}
        }
        Ok(())
    }

    /// `close()`: like Linux, a RST instead of a FIN if received data was left unread;
    /// otherwise a FIN after the queued data, and any data the peer sends from now on is
    /// answered with a RST. The connection lives on (orphaned) until `Closed` or `TimeWait`.
    pub fn close(&mut self, now: Instant) {
        match self.state {
            State::Closed => {}
            State::SynSent => self.enter_closed(),
            State::TimeWait => {
                self.rcv_closed = true;
                self.rx.clear();
            }
            _ if self.rx.len() > 0 => self.abort(),
            _ => {
                self.rcv_closed = true;
                let _ = self.shutdown_write(); // cannot fail: not CLOSED
                if self.state == State::FinWait2 {
                    self.t_idle = now + ms(self.p.fin_wait2_ms);
                }
            }
        }
    }

    /// Abortive close (`SO_LINGER` 0, or the stack giving up): a RST to the peer if it knows
    /// the connection, then CLOSED.
    pub fn abort(&mut self) {
        match self.state {
            State::Closed => {}
            State::SynSent | State::TimeWait => self.enter_closed(),
            _ => {
                self.rst = Some(Rst { seq: self.snd_max, ack: Some(self.rcv_nxt) });
                self.enter_closed();
            }
        }
        self.rx.clear();
    }

    /// `TCP_NODELAY`.
    pub fn set_nodelay(&mut self, nodelay: bool) {
        self.p.nodelay = nodelay;
    }

    /// `SO_KEEPALIVE` with its parameters; `None` turns it off.
    pub fn set_keepalive(&mut self, keepalive: Option<Keepalive>, now: Instant) {
        self.p.set_keepalive(keepalive);
        if matches!(self.state, State::Established | State::CloseWait) {
            self.ka_probes = 0;
            self.t_idle = if self.p.keepalive { now + ms(self.p.ka_idle_ms) } else { NEVER };
        }
    }

    /// Frees the send and receive buffers if they are empty (they are allocated again on
    /// use). For idle connections under memory pressure.
    pub fn release_buffers(&mut self) {
        self.tx.release();
        if self.snd_una == self.snd_max {
            self.sent.clear();
        }
        if self.ooo.is_empty() {
            self.rx.release();
        }
    }

    /// Whether the buffers are allocated (send, receive).
    pub fn buffers_allocated(&self) -> (bool, bool) {
        (self.tx.is_allocated(), self.rx.is_allocated())
    }

    /// A challenge ACK (RFC 5961) is waiting to be sent. Challenge ACKs are rate limited per
    /// stack (Linux: `tcp_challenge_ack_limit`), so after `handle_segment` the stack checks this
    /// and calls [`Connection::cancel_challenge_ack`] when over its budget.
    pub fn challenge_ack_pending(&self) -> bool {
        self.challenge
    }

    /// Drops the pending challenge ACK (an ACK that is due anyway is still sent).
    pub fn cancel_challenge_ack(&mut self) {
        self.challenge = false;
    }

    /// Whether the segment [`Connection::poll_transmit`] returned last goes out ECN-capable,
    /// ECT(0) in its IP header: new data of an ECN connection, never a retransmission, a pure
    /// ACK, a window probe, a SYN or a RST (RFC 3168 sections 6.1.1, 6.1.4 and 6.1.5).
    pub fn transmit_ect(&self) -> bool {
        self.tx_ect
    }

    /// The length of the TCP header, options included, of a segment with data that
    /// [`Connection::poll_transmit`] would return now (SYNs and RSTs, whose headers differ,
    /// carry none). A stack that passes `poll_transmit` a buffer at this offset in its frame
    /// can write the header in front of the payload without moving it.
    #[inline]
    pub fn data_header_len(&self) -> usize {
        if self.sack_ok && (!self.ooo.is_empty() || self.dsack.0 != self.dsack.1) {
            // SACK blocks go out: how many fit is the header's to say.
            return self.header(0, self.snd_nxt).header_len();
        }
        // The timestamps option (two NOPs and ten bytes), or none.
        HEADER_LEN + if self.ts_ok { 12 } else { 0 }
    }

    /// Path MTU discovery (RFC 1191 for IPv4, RFC 8201 for IPv6): an ICMP "fragmentation
    /// needed" or "packet too big" quoting our segment at `quoted_seq` says the path carries at
    /// most `mss` bytes of TCP payload (its MTU less the IP and TCP headers). The message is
    /// believed only if the quoted segment is in flight (RFC 5927 section 4.1), and the size
    /// never drops below 536 (Linux's floor: an ICMP cannot make us send tiny segments). The
    /// lost segment goes again, smaller, at the next retransmission. Returns whether the
    /// segment size went down.
    pub fn path_mtu_reduced(&mut self, mss: u16, quoted_seq: u32) -> bool {
        let in_flight = seq::ge(quoted_seq, self.snd_una) && seq::lt(quoted_seq, self.snd_max);
        let mss = mss.max(MIN_PATH_MSS);
        if !in_flight || mss >= self.mss_cap() {
            return false;
        }
        self.path_mss = mss;
        true
    }

    /// What loss recovery did so far: the shard's counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// For `TCP_INFO`.
    pub fn info(&self) -> Info {
        Info {
            state: self.state,
            rtt: us(self.srtt_us),
            rttvar: us(self.rttvar_us),
            rto: self.rto(),
            backoff: self.backoff,
            total_retransmits: self.counters.retransmits,
            snd_mss: self.eff_mss(),
            rcv_mss: u32::from(self.rcv_mss),
            cwnd: self.cc.cwnd(),
            ssthresh: self.cc.ssthresh(),
            snd_wnd: self.snd_wnd,
            rcv_wnd: self.rcv_wnd(),
            snd_wscale: self.ws_ok.then_some(self.snd_wscale),
            rcv_wscale: self.ws_ok.then_some(self.rcv_wscale),
            timestamps: self.ts_ok,
            sack: self.sack_ok,
            in_recovery: self.recovery != Recovery::None,
            bytes_in_flight: self.snd_max.wrapping_sub(self.snd_una),
            send_queue: self.tx.len() as u32,
            recv_queue: self.rx.len() as u32,
            challenge_acks: self.challenge_acks,
        }
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        if self.events == 0 {
            return None;
        }
        let bit = self.events & self.events.wrapping_neg();
        self.events &= !bit;
        Some(match bit {
            EV_CONNECTED => Event::Connected,
            EV_READABLE => Event::Readable,
            EV_READ_CLOSED => Event::ReadClosed,
            EV_WRITABLE => Event::Writable,
            EV_RESET => Event::Reset,
            EV_TIMED_OUT => Event::TimedOut,
            EV_TIME_WAIT => Event::TimeWait,
            EV_CLOSED => Event::Closed,
            _ => Event::Urgent,
        })
    }

    /// The earliest deadline: RTO, SYN retransmission, zero-window probe, delayed ACK, RACK's
    /// reordering timer, tail loss probe, keepalive, FIN-WAIT-2 or TIME-WAIT end. Call
    /// [`Connection::handle_timeout`] then.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = self.t_rtx.min(self.t_delack).min(self.t_idle).min(self.t_loss);
        (t != NEVER).then_some(t)
    }

    // ---------------------------------------------------------------------------------------
    // Derived quantities
    // ---------------------------------------------------------------------------------------

    /// Our timestamp clock: milliseconds.
    fn ts_now(&self, now: Instant) -> u32 {
        ts_clock(now, self.ts_offset)
    }

    /// The largest payload of a segment without SACK blocks (RFC 9293 3.7.1 Eff.snd.MSS: the
    /// timestamp option takes 12 bytes of it).
    /// The largest payload without options: the peer's MSS, ours, and the path's.
    fn mss_cap(&self) -> u16 {
        self.peer_mss.min(self.p.mss).min(self.path_mss)
    }

    fn eff_mss(&self) -> u32 {
        let base = u32::from(self.mss_cap());
        let opts = if self.ts_ok { 12 } else { 0 };
        base.saturating_sub(opts).max(1)
    }

    /// The RTO with backoff.
    fn rto(&self) -> Duration {
        let rto = u64::from(self.rto_us) << self.backoff.min(32);
        us(rto.min(u64::from(self.p.rto_max_us)) as u32)
    }

    /// The zero-window probe interval.
    fn persist_interval(&self) -> Duration {
        let rto = u64::from(self.rto_us) << self.persist_backoff.min(32);
        us(rto.min(u64::from(self.p.rto_max_us)) as u32)
    }

    /// Window in our SYN or SYN-ACK (never scaled).
    fn syn_window(&self) -> u32 {
        self.p.rcv_buf.min(0xffff)
    }

    /// The most we advertise: the buffer, capped by what the field can say.
    fn rcv_buf_adv(&self) -> u32 {
        self.p.rcv_buf.min(0xffff << self.rcv_wscale)
    }

    /// The receive ring's capacity: a little more than we advertise. With window scaling the
    /// window field cannot say every value: when the buffer fills, keeping the right edge
    /// where it was means rounding up, by less than one scale unit per ACK; the slack absorbs
    /// that (see `select_window`).
    fn rx_cap(&self) -> usize {
        let adv = self.rcv_buf_adv() as usize;
        let slack = if self.rcv_wscale > 0 { (adv / 32).max(1 << self.rcv_wscale) } else { 0 };
        adv + slack
    }

    /// RCV.WND: what is left of the window we advertised.
    fn rcv_wnd(&self) -> u32 {
        if seq::gt(self.rcv_adv, self.rcv_nxt) {
            self.rcv_adv.wrapping_sub(self.rcv_nxt)
        } else {
            0
        }
    }

    fn data_end(&self) -> u32 {
        self.tx_seq.wrapping_add(self.tx.len() as u32)
    }

    /// Data in the buffer not sent yet.
    fn has_unsent_data(&self) -> bool {
        seq::lt(self.snd_nxt, self.data_end())
    }

    fn fin_acked(&self) -> bool {
        self.fin_queued && self.snd_una == self.data_end().wrapping_add(1)
    }

    fn tx_writable(&self) -> bool {
        let free = (self.p.snd_buf as usize).saturating_sub(self.tx.len());
        free > 0 && free >= self.tx.len() / 2
    }

    /// The sequence number of the next byte the application reads (Linux's `copied_seq`).
    fn read_seq(&self) -> u32 {
        self.rcv_nxt.wrapping_sub(self.rx.len() as u32).wrapping_sub(u32::from(self.fin_received))
    }

    /// What a read takes from the receive buffer: `(skip, len)`, the urgent byte skipped at the
    /// mark (unless SO_OOBINLINE) and `len` bytes after it, ending at a mark ahead.
    fn readable_span(&self) -> (usize, usize) {
        let avail = self.rx.len();
        match self.urgent_mark() {
            Some(0) if !self.p.oob_inline && avail > 0 => (1, avail - 1),
            Some(ahead) if ahead > 0 => (0, ahead.min(avail)),
            _ => (0, avail),
        }
    }

    /// After a read: once the reader is past the mark there is no urgent data any more.
    fn passed_urgent_mark(&mut self) {
        if self.rcv_urg != UrgentIn::None && seq::gt(self.read_seq(), self.rcv_up) {
            self.rcv_urg = UrgentIn::None;
        }
    }

    fn can_send_data(&self) -> bool {
        matches!(self.state, State::Established | State::CloseWait | State::FinWait1 | State::Closing | State::LastAck)
    }

    /// Room in the peer's window at SND.NXT.
    fn snd_wnd_room(&self) -> u32 {
        let end = self.snd_una.wrapping_add(self.snd_wnd);
        if seq::gt(end, self.snd_nxt) {
            end.wrapping_sub(self.snd_nxt)
        } else {
            0
        }
    }

    /// RFC 6675 SetPipe: un-SACKed bytes in flight, not counting those deemed lost, plus the
    /// retransmitted ones.
    fn pipe(&self) -> u32 {
        self.sent.pipe(&self.sacked)
    }

    /// RACK-TLP runs on this connection: it is on and the peer does SACK.
    fn rack_on(&self) -> bool {
        self.p.rack_tlp && self.sack_ok
    }

    /// In fast recovery, or going back after an RTO until what was sent before it is
    /// acknowledged.
    fn recovering(&self) -> bool {
        self.recovery != Recovery::None || seq::lt(self.snd_una, self.recover)
    }

    /// Room in the congestion window for one more segment at SND.NXT.
    fn cwnd_room(&self) -> u32 {
        let cwnd = self.cc.cwnd();
        match self.recovery {
            Recovery::Sack => cwnd.saturating_sub(self.pipe()),
            Recovery::NewReno => {
                cwnd.saturating_add(self.inflate).saturating_sub(self.snd_nxt.wrapping_sub(self.snd_una))
            }
            Recovery::None => cwnd.saturating_sub(self.snd_nxt.wrapping_sub(self.snd_una)),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Input
    // ---------------------------------------------------------------------------------------

    /// Processes a segment addressed to this connection (the stack has checked the checksum
    /// and matched the 4-tuple). `payload` is the segment's data.
    pub fn handle_segment(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        match self.state {
            State::Closed => {
                // RFC 9293 3.10.7.1: as if there were no connection.
                if let Some(rst) = crate::time_wait::rst_for_unmatched(seg, payload.len()) {
                    self.rst = Some(Rst { seq: rst.seq_number, ack: rst.ack_number });
                }
            }
            State::SynSent => self.handle_syn_sent(now, seg, payload),
            _ => self.handle_synchronized(now, seg, payload),
        }
        self.arm_persist(now);
    }

    /// [`Connection::handle_segment`] for a segment whose IP header carried the CE codepoint
    /// if `ce`: a router on the path saw congestion (RFC 3168 section 5). On an ECN connection
    /// our segments then carry ECE until the peer's CWR.
    pub fn handle_segment_ce(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8], ce: bool) {
        self.seg_ce = ce;
        self.handle_segment(now, seg, payload);
        self.seg_ce = false;
    }

    /// RFC 9293 3.10.7.3.
    fn handle_syn_sent(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        let rst = seg.flags.contains(TcpFlags::RST);
        if let Some(ack) = seg.ack_number {
            if seq::le(ack, self.iss) || seq::gt(ack, self.snd_max) {
                if !rst {
                    self.rst = Some(Rst { seq: ack, ack: None });
                }
                return;
            }
        }
        if rst {
            // Only with an acceptable ACK (RFC 5961 section 3: no blind reset of a connect).
            if seg.ack_number.is_some() {
                self.fail(Error::ConnectionRefused, EV_RESET);
            }
            return;
        }
        if !seg.flags.contains(TcpFlags::SYN) {
            return;
        }
        self.irs = seg.seq_number;
        self.rcv_nxt = seg.seq_number.wrapping_add(1);
        self.last_ack_sent = self.rcv_nxt;
        self.rcv_adv = self.rcv_nxt.wrapping_add(self.syn_window());
        self.negotiate(now, seg);
        match seg.ack_number {
            Some(ack) => {
                // RFC 3168 section 6.1.1: the peer agrees with ECE alone on its SYN-ACK.
                self.ecn_ok &= seg.flags.contains(TcpFlags::ECE) && !seg.flags.contains(TcpFlags::CWR);
                // The window of a SYN is never scaled (RFC 7323 section 2.2).
                self.establish_from_ack(now, seg, ack, u32::from(seg.window_len));
                self.ack_now = true;
                if !payload.is_empty() || seg.flags.contains(TcpFlags::FIN) {
                    let fin = seg.flags.contains(TcpFlags::FIN);
                    self.process_text(now, self.rcv_nxt, payload, fin);
                }
            }
            None => {
                // Simultaneous open: SYN-RECEIVED, our SYN again, now with an ACK. ECN if both
                // SYNs asked for it (Linux `tcp_ecn_rcv_syn`).
                self.ecn_ok &= seg.flags.contains(TcpFlags::ECE | TcpFlags::CWR);
                self.state = State::SynReceived;
                self.snd_nxt = self.iss;
                self.snd_wnd = u32::from(seg.window_len);
                self.max_snd_wnd = self.snd_wnd;
                self.snd_wl1 = seg.seq_number;
            }
        }
    }

    /// Takes the options of the peer's SYN.
    fn negotiate(&mut self, now: Instant, syn: &TcpRepr) {
        self.peer_mss = match syn.max_seg_size {
            Some(mss) if mss > 0 => mss,
            _ => DEFAULT_MSS,
        };
        self.ws_ok = self.p.offer_ws && syn.window_scale.is_some();
        if self.ws_ok {
            self.snd_wscale = syn.window_scale.unwrap_or(0).min(14);
        } else {
            self.snd_wscale = 0;
            self.rcv_wscale = 0;
        }
        self.sack_ok = self.p.offer_sack && syn.sack_permitted;
        match (self.p.offer_ts, syn.timestamp) {
            (true, Some((tsval, _))) => {
                self.ts_ok = true;
                self.ts_recent = tsval;
                self.ts_recent_time = now;
            }
            _ => self.ts_ok = false,
        }
    }

    /// Our SYN is acknowledged: ESTABLISHED.
    fn establish_from_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32, wnd: u32) {
        self.snd_una = ack;
        if seq::lt(self.snd_nxt, ack) {
            self.snd_nxt = ack;
        }
        self.snd_wnd = wnd;
        self.max_snd_wnd = self.max_snd_wnd.max(wnd);
        self.snd_wl1 = seg.seq_number;
        self.snd_wl2 = ack;
        self.rtt_on_ack(now, seg, ack, None);
        self.establish(now);
    }

    fn establish(&mut self, now: Instant) {
        self.state = if self.fin_queued { State::FinWait1 } else { State::Established };
        let mss = self.eff_mss();
        // RFC 5681 section 3.1: one segment if the SYN or SYN-ACK was lost.
        let iw = if self.syn_retransmitted { mss } else { self.p.initial_cwnd.saturating_mul(mss) };
        self.cc.init(iw);
        if self.have_rtt {
            self.cc.on_rtt_update(us(self.srtt_us));
        }
        if self.syn_retransmitted && !self.have_rtt {
            self.rto_us = self.rto_us.max(RTO_AFTER_SYN_LOSS_US).min(self.p.rto_max_us);
        }
        self.backoff = 0;
        self.recover = self.snd_una;
        self.t_rtx = if self.snd_una == self.snd_max { NEVER } else { now + self.rto() };
        if self.p.keepalive && self.state == State::Established {
            self.t_idle = now + ms(self.p.ka_idle_ms);
        }
        self.events |= EV_CONNECTED | EV_WRITABLE;
    }

    /// RFC 9293 3.10.7.4, for every state after SYN-SENT.
    fn handle_synchronized(&mut self, now: Instant, seg: &TcpRepr, payload: &[u8]) {
        let rst = seg.flags.contains(TcpFlags::RST);
        let mut syn = seg.flags.contains(TcpFlags::SYN);
        let fin = seg.flags.contains(TcpFlags::FIN);
        let mut seq = seg.seq_number;

        if self.state == State::SynReceived && syn && !rst && seq == self.irs {
            match seg.ack_number {
                // Simultaneous open: the peer's SYN-ACK, whose SYN we already have.
                Some(ack) if ack == self.snd_max => {
                    syn = false;
                    seq = seq.wrapping_add(1);
                }
                // Our SYN-ACK was lost: the peer sent its SYN again.
                None => {
                    self.snd_nxt = self.iss;
                    return;
                }
                _ => {}
            }
        }
        if self.state == State::TimeWait {
            if rst {
                return; // RFC 1337: no TIME-WAIT assassination.
            }
            if fin && !syn && seq.wrapping_add(payload.len() as u32 + 1) == self.rcv_nxt {
                // The peer's FIN again: our ACK was lost. ACK and restart 2*MSL.
                self.ack_now = true;
                self.t_idle = now + ms(self.p.time_wait_ms);
                return;
            }
        }

        let seg_len = payload.len() as u32 + u32::from(syn) + u32::from(fin);

        // RFC 7323 section 5.3 R1: PAWS.
        if self.ts_ok && !rst {
            if let Some((tsval, _)) = seg.timestamp {
                if seq::lt(tsval, self.ts_recent) && now.saturating_sub(self.ts_recent_time) <= PAWS_IDLE {
                    self.answer_invalid(now, syn, seg_len);
                    return;
                }
            }
        }

        // First: the sequence number.
        if !self.acceptable(seq, seg_len, rst) {
            if !rst {
                self.answer_invalid(now, syn, seg_len);
                if !syn && seq::lt(seq, self.rcv_nxt) {
                    // Data (or a FIN) we already have: a D-SACK block says so (RFC 2883).
                    let end = seq.wrapping_add(payload.len() as u32 + u32::from(fin));
                    self.report_duplicate(seq, seq::min(end, self.rcv_nxt));
                }
            }
            return;
        }

        // Second: RST (RFC 5961 section 3.2: only an exact match resets).
        if rst {
            if seq == self.rcv_nxt {
                self.on_reset();
            } else {
                self.challenge_ack(now);
            }
            return;
        }

        // Fourth: SYN in a synchronized state (RFC 5961 section 4.2).
        if syn {
            self.challenge_ack(now);
            return;
        }

        // Fifth: ACK.
        let Some(ack) = seg.ack_number else {
            return;
        };
        if self.state == State::SynReceived {
            if seq::gt(ack, self.snd_una) && seq::le(ack, self.snd_max) {
                let wnd = u32::from(seg.window_len) << self.snd_wscale;
                self.establish_from_ack(now, seg, ack, wnd);
            } else {
                self.rst = Some(Rst { seq: ack, ack: None });
                return;
            }
        }

        if !self.process_ack(now, seg, seq, ack, payload.len()) || self.state == State::Closed {
            return;
        }

        // RFC 7323 section 4.3 (and 5.3 R3): remember the timestamp to echo, only from an
        // acceptable segment, so after its ACK was checked: a blind in-window segment with an
        // unacceptable ACK must not move TS.Recent (PAWS would then drop the real peer).
        if self.ts_ok {
            if let Some((tsval, _)) = seg.timestamp {
                if seq::ge(tsval, self.ts_recent) && seq::le(seq, self.last_ack_sent) {
                    self.ts_recent = tsval;
                    self.ts_recent_time = now;
                }
            }
        }

        if self.p.keepalive && matches!(self.state, State::Established | State::CloseWait) {
            self.ka_probes = 0;
            self.t_idle = now + ms(self.p.ka_idle_ms);
        }

        // RFC 3168 section 6.1.3: the peer's CWR on a segment with data (or a FIN) ends our
        // ECE; it also asks for an ACK at once, its window being small (Linux
        // `tcp_ecn_accept_cwr`). CE on new data starts ECE again (`process_text`).
        if self.ecn_ok && seg.flags.contains(TcpFlags::CWR) && seg_len > 0 {
            self.ecn_echo = false;
            self.ack_now = true;
        }

        // Sixth: the URG bit, where data is still accepted (after the peer's FIN there is none).
        if matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            if seg.flags.contains(TcpFlags::URG) {
                self.urgent_pointer(seg.seq_number, seg.urgent_at);
            }
            if self.rcv_urg == UrgentIn::Announced {
                // The urgent byte is taken from whichever acceptable segment carries it, in
                // order or not (Linux's `tcp_urg`); it also stays in the stream.
                let at = self.rcv_up.wrapping_sub(seq) as usize;
                if let Some(&byte) = payload.get(at) {
                    self.rcv_urg = UrgentIn::Arrived(byte);
                }
            }
        }

        // Seventh and eighth: text and FIN.
        self.process_text(now, seq, payload, fin);
    }

    /// An urgent pointer (Linux's `tcp_check_urg`): `up` is the offset of the byte after the
    /// urgent data (RFC 6093 section 4; Linux with `tcp_stdurg` 0, its default, so 0 names the
    /// segment's first byte). One that points at data already received, or not beyond the
    /// mark we have, is not news: a sender repeats its pointer on every segment until it is
    /// acknowledged. A new one replaces the old mark; if the reader stands at that old mark
    /// with its byte unread, the byte goes (else it would turn up in the stream).
    fn urgent_pointer(&mut self, seg_seq: u32, up: u16) {
        let at = seg_seq.wrapping_add(u32::from(up.saturating_sub(1)));
        if seq::lt(at, self.rcv_nxt) || (self.rcv_urg != UrgentIn::None && seq::le(at, self.rcv_up)) {
            return;
        }
        self.events |= EV_URGENT;
        if self.urgent_mark() == Some(0) && !self.p.oob_inline && self.rx.len() > 0 {
            self.rx.pop(1);
        }
        self.rcv_urg = UrgentIn::Announced;
        self.rcv_up = at;
    }

    /// The four cases of RFC 9293 3.10.7.4. With a zero window a segment at RCV.NXT is let
    /// through so that its ACK, and a bare FIN, are processed ("special allowance"); its data
    /// is trimmed off later.
    ///
    /// One leniency, Linux's (`tcp_sequence` starts the window at `rcv_wup`, the RCV.NXT we
    /// last acknowledged, and looks at where a segment ends): a segment (not a RST) that starts
    /// at or before RCV.NXT and ends at or after the RCV.NXT we last acknowledged is acceptable.
    /// A pure ACK reordered behind data is then used rather than answered with an ACK, which in
    /// a two-way transfer the peer would count as a duplicate; and a retransmission of what we
    /// acknowledged last moves TS.Recent on before its D-SACK is sent (as Linux's does).
    fn acceptable(&self, seq: u32, len: u32, rst: bool) -> bool {
        let wnd = self.rcv_wnd();
        let nxt = self.rcv_nxt;
        if !rst && seq::le(seq, nxt) && seq::ge(seq.wrapping_add(len), self.last_ack_sent) {
            return true;
        }
        match (len, wnd) {
            (0, 0) => seq == nxt,
            (0, _) => seq::in_window(seq, nxt, wnd),
            (_, 0) => seq == nxt,
            _ => seq::in_window(seq, nxt, wnd) || seq::in_window(seq.wrapping_add(len - 1), nxt, wnd),
        }
    }

    /// RFC 2883: `[start, end)` arrived again; report it as the first SACK block of an ACK sent
    /// at once (the sender learns that its retransmission was not needed).
    fn report_duplicate(&mut self, start: u32, end: u32) {
        if self.sack_ok && seq::lt(start, end) {
            self.dsack = (start, end);
            self.ack_now = true;
        }
    }

    /// RFC 5961's challenge ACK, at most one per `invalid_ratelimit` (Linux 6.x limits them per
    /// connection; its global `tcp_challenge_ack_limit` is off by default since 6.0).
    fn challenge_ack(&mut self, now: Instant) {
        if self.invalid_ack_allowed(now) {
            self.challenge = true;
            self.challenge_acks = self.challenge_acks.wrapping_add(1);
        } else {
            self.counters.challenge_acks_skipped = self.counters.challenge_acks_skipped.wrapping_add(1);
        }
    }

    /// The answer to a segment that failed PAWS or the sequence check (`seg_len` counts its
    /// SYN and FIN): a challenge ACK for a SYN (RFC 5961 section 4.2, Linux's `syn_challenge`);
    /// an ACK for one with data or a FIN, always; for one without, at most one ACK per
    /// `invalid_ratelimit` (Linux `tcp_oow_rate_limited`: two stacks that disagree about the
    /// window would otherwise answer each other's ACKs forever).
    fn answer_invalid(&mut self, now: Instant, syn: bool, seg_len: u32) {
        if syn {
            self.challenge_ack(now);
        } else if seg_len > 0 || self.invalid_ack_allowed(now) {
            self.ack_now = true;
        }
    }

    /// Whether an ACK to an invalid segment may go now, one per `invalid_ratelimit` on our
    /// millisecond clock (Linux `__tcp_oow_rate_limited`); if so, the interval starts now.
    fn invalid_ack_allowed(&mut self, now: Instant) -> bool {
        let ms_now = (now / MILLISECOND) as u32;
        if self.invalid_acked && ms_now.wrapping_sub(self.invalid_ack_ms) < self.p.invalid_ratelimit_ms {
            return false;
        }
        self.invalid_acked = true;
        self.invalid_ack_ms = ms_now;
        true
    }

    /// An acceptable RST.
    fn on_reset(&mut self) {
        let err = match self.state {
            State::SynReceived if self.passive => Some(Error::ConnectionReset),
            State::SynReceived => Some(Error::ConnectionRefused),
            State::Established | State::FinWait1 | State::FinWait2 => Some(Error::ConnectionReset),
            State::CloseWait => Some(Error::BrokenPipe),
            _ => None,
        };
        if let Some(err) = err {
            self.error = Some(err);
            self.events |= EV_RESET;
        }
        self.enter_closed();
    }

    fn fail(&mut self, err: Error, event: u16) {
        self.error = Some(err);
        self.events |= event;
        self.enter_closed();
    }

    fn enter_closed(&mut self) {
        self.state = State::Closed;
        self.t_rtx = NEVER;
        self.t_delack = NEVER;
        self.t_idle = NEVER;
        self.t_loss = NEVER;
        self.tx.clear();
        self.ooo.clear();
        self.sacked.clear();
        self.sent.clear();
        self.send_probe = false;
        self.recovery = Recovery::None;
        self.ack_now = false;
        self.challenge = false;
        self.probe = false;
        self.rtx_first = false;
        self.force_send = false;
        self.events |= EV_CLOSED;
    }

    fn enter_time_wait(&mut self, now: Instant) {
        self.state = State::TimeWait;
        self.t_rtx = NEVER;
        self.t_loss = NEVER;
        self.t_idle = now + ms(self.p.time_wait_ms);
        self.sacked.clear();
        self.sent.clear();
        self.tx.clear();
        self.events |= EV_TIME_WAIT;
    }

    /// The ACK field (RFC 9293 3.10.7.4 fifth, RFC 5961 section 5). `false`: drop the segment.
    fn process_ack(&mut self, now: Instant, seg: &TcpRepr, seq: u32, ack: u32, payload_len: usize) -> bool {
        let flight_before = self.snd_max.wrapping_sub(self.snd_una);
        // RFC 5961 section 5.2: outside [SND.UNA - MAX.SND.WND, SND.NXT]. As in Linux, the
        // left edge reaches back no further than what the peer has acknowledged so far: before
        // any data is acknowledged, an ACK below SND.UNA is one.
        let max_back = self.max_snd_wnd.min(self.bytes_acked);
        if seq::gt(ack, self.snd_max) || seq::lt(ack, self.snd_una.wrapping_sub(max_back)) {
            self.challenge_ack(now);
            return false;
        }
        let seg_wnd = u32::from(seg.window_len) << self.snd_wscale;
        let is_dup = ack == self.snd_una
            && payload_len == 0
            && !seg.flags.intersects(TcpFlags::SYN | TcpFlags::FIN)
            && seg_wnd == self.snd_wnd
            && self.snd_max != self.snd_una;

        let old_una = self.snd_una;
        let was_recovering = self.recovering();
        let dsack = if self.sack_ok { dsack_block(seg, ack) } else { None };
        if self.rack_on() {
            // RACK's view of what this ACK delivers, before the scoreboard takes it in.
            self.rack_delivered(now, seg, ack, dsack);
        }
        if self.sack_ok {
            for &(left, right) in seg.sack_ranges.iter().flatten() {
                if seq::lt(left, right) && seq::gt(right, ack) && seq::le(right, self.snd_max) {
                    self.sacked.add(seq::max(left, ack), right);
                }
            }
        }

        // The window update (RFC 9293 3.10.7.4, SND.WL1/SND.WL2), and also from any segment
        // that acknowledges new data, as Linux does (`tcp_may_update_window`): the peer's ACKs
        // only grow, so such a segment was made after every one we used, even if its SEG.SEQ
        // is older (a retransmission that fills a hole behind data we have seen). SND.WND is
        // counted from SND.UNA: moving SND.UNA while keeping the old SND.WND would move the
        // right edge beyond anything the peer offered, and we would send into a window it
        // never had.
        if seq::le(self.snd_una, ack)
            && (seq::lt(self.snd_una, ack)
                || seq::lt(self.snd_wl1, seq)
                || (self.snd_wl1 == seq && seq::le(self.snd_wl2, ack)))
        {
            let opened = self.snd_wnd == 0 && seg_wnd > 0;
            self.snd_wnd = seg_wnd;
            self.snd_wl1 = seq;
            self.snd_wl2 = ack;
            self.max_snd_wnd = self.max_snd_wnd.max(seg_wnd);
            if opened {
                self.persist_backoff = 0;
                if self.snd_una == self.snd_max {
                    self.t_rtx = NEVER;
                }
            }
        }
        self.probes = 0;

        if seq::gt(ack, self.snd_una) {
            self.on_new_ack(now, seg, ack);
        } else if is_dup {
            self.dupacks = self.dupacks.saturating_add(1);
            if self.recovery == Recovery::NewReno {
                // RFC 6582 section 3.2 step 4: inflate for each further duplicate.
                self.inflate = self.inflate.saturating_add(self.eff_mss());
            }
        }

        if self.state == State::Closed {
            return true;
        }
        // Loss detection: with SACK, RACK (RFC 8985) or else RFC 6675's IsLost mark what is
        // lost in the transmit log; without, three duplicate ACKs say it (RFC 5681 3.2).
        if self.rack_on() {
            let recovery_ended = was_recovering && !self.recovering();
            self.rack.update_reo_wnd(self.snd_una, self.snd_max, dsack.is_some(), recovery_ended);
            let pure_dupack = is_dup && seg.sack_ranges[0].is_none();
            if self.rack.probe_acked(ack, dsack, pure_dupack) {
                // The probe repaired a loss by itself (RFC 8985 section 7.4.2): congestion
                // control responds as to any loss, from the window rather than the flight,
                // as Linux does (`tcp_process_tlp_ack`): the flight at a tail is a segment or
                // two, and would cut a window that was fine to its floor.
                self.counters.loss_probe_recoveries = self.counters.loss_probe_recoveries.wrapping_add(1);
                self.cc.on_congestion_event(now, self.cc.cwnd(), self.eff_mss());
            }
            if self.rack.take_advanced() {
                self.rack_detect_loss(now);
            }
        } else if self.sack_ok && !self.sacked.is_empty() {
            let lost_end = seq::min(self.sacked.lost_end(self.snd_una, self.eff_mss()), self.snd_max);
            if seq::gt(lost_end, self.snd_una) {
                self.sent.mark_lost(self.snd_una, lost_end, false);
            }
        }
        self.recover_if_lost(now);
        if self.ecn_ok {
            self.on_ecn_ack(now, seg, flight_before);
        }
        // The probe restarts when new data is acknowledged, and starts when the reordering
        // timer has nothing left to wait for.
        if self.rack_on() && (seq::gt(self.snd_una, old_una) || self.t_loss == NEVER) {
            self.schedule_probe(now);
        }
        true
    }

    /// RFC 3168 section 6.1.2 for an ACK of an ECN connection: an ECE is treated as a loss by
    /// the congestion controller, once per window of data (not again until an ACK goes beyond
    /// what was sent when the window was last reduced, as Linux's CWR state) and not during
    /// loss recovery, which reduced the window already. `flight` is what was outstanding when
    /// the ACK came.
    fn on_ecn_ack(&mut self, now: Instant, seg: &TcpRepr, flight: u32) {
        if self.ecn_reducing && seq::gt(self.snd_una, self.ecn_reduced_at) {
            self.ecn_reducing = false;
        }
        if seg.flags.contains(TcpFlags::ECE) && !self.ecn_reducing && self.recovery == Recovery::None {
            self.cc.on_congestion_event(now, flight, self.eff_mss());
            self.ecn_window_reduced();
        }
    }

    /// The window was reduced for ECE or by an RTO: on an ECN connection the next new data
    /// carries CWR, so that the peer stops echoing congestion it told us about (RFC 3168
    /// section 6.1.2; Linux sets it after every reduction), and ECE for data sent before is
    /// not acted on (Linux's CWR and Loss states).
    fn ecn_window_reduced(&mut self) {
        if self.ecn_ok {
            self.ecn_cwr_pending = true;
            self.ecn_reducing = true;
            self.ecn_reduced_at = self.snd_max;
        }
    }

    /// Fast recovery starts if loss detection found a loss, but not again for losses before
    /// `recover` (RFC 6582 section 3.2 step 2).
    fn recover_if_lost(&mut self, now: Instant) {
        if self.recovering() || self.snd_una == self.snd_max {
            return;
        }
        // RACK replaces the duplicate-ACK rule where it runs (as on Linux).
        let lost = self.sent.has_lost(&self.sacked) || (!self.rack_on() && self.dupacks >= DUPTHRESH);
        if lost {
            self.enter_recovery(now);
        }
    }

    fn enter_recovery(&mut self, now: Instant) {
        let mss = self.eff_mss();
        let flight = self.snd_max.wrapping_sub(self.snd_una);
        // RFC 3168 section 6.1.2: not again if ECE reduced the window for this one (Linux:
        // not in its CWR state); the next new data says CWR either way.
        if !self.ecn_reducing {
            self.cc.on_congestion_event(now, flight, mss);
        }
        self.ecn_cwr_pending = self.ecn_ok;
        self.recover = self.snd_max;
        self.rtt_timing = false;
        // This recovery responds to the loss: a probe's outcome no longer matters.
        self.rack.end_probe();
        if self.loss_timer == LossTimer::Probe {
            self.t_loss = NEVER;
        }
        if self.sack_ok {
            self.recovery = Recovery::Sack;
            self.inflate = 0;
            // RFC 6675 section 5 (4.3): the segment at SND.UNA goes at once, lost or not.
            // RACK sends what it marked lost, in order (rule 1 of NextSeg).
            self.rtx_first = !self.rack_on();
        } else {
            self.recovery = Recovery::NewReno;
            self.inflate = DUPTHRESH as u32 * mss;
            self.rtx_first = true;
        }
    }

    /// RFC 8985 steps 2 and 3 for what this ACK delivers: `[SND.UNA, ack)` and the SACK blocks
    /// (the D-SACK block delivers nothing new), in sequence order.
    fn rack_delivered(&mut self, now: Instant, seg: &TcpRepr, ack: u32, dsack: Option<(u32, u32)>) {
        let mut ranges = [(0u32, 0u32); 5];
        let mut n = 0;
        if seq::gt(ack, self.snd_una) {
            ranges[0] = (self.snd_una, ack);
            n = 1;
        }
        for &(left, right) in seg.sack_ranges.iter().flatten() {
            let valid = seq::lt(left, right) && seq::gt(right, ack) && seq::le(right, self.snd_max);
            if valid && Some((left, right)) != dsack {
                ranges[n] = (seq::max(left, ack), right);
                n += 1;
            }
        }
        let una = self.snd_una;
        ranges[..n].sort_unstable_by_key(|&(left, _)| left.wrapping_sub(una));
        let echo = if self.ts_ok { seg.timestamp.map(|(_, tsecr)| tsecr).filter(|&e| e != 0) } else { None };
        let (ts_offset, sent, sacked) = (self.ts_offset, &self.sent, &self.sacked);
        let echo_older = |xmit: Instant| echo.is_some_and(|e| seq::lt(e, ts_clock(xmit, ts_offset)));
        self.rack.on_ack(now, &ranges[..n], sent, sacked, echo_older);
    }

    /// RFC 8985 step 5, and the reordering timer for what is not lost yet.
    fn rack_detect_loss(&mut self, now: Instant) {
        let mss = self.eff_mss();
        let dupthresh_sacked = self.sacked.sacked_in(self.snd_una, self.snd_max) > (u32::from(DUPTHRESH) - 1) * mss;
        let reo_wnd = self.rack.reo_wnd(self.recovering(), dupthresh_sacked, us(self.srtt_us));
        let found = self.rack.detect_loss(now, &mut self.sent, &self.sacked, reo_wnd, mss);
        self.counters.rack_lost = self.counters.rack_lost.wrapping_add(found.lost_segments);
        self.counters.lost_retransmits = self.counters.lost_retransmits.wrapping_add(found.lost_retransmits);
        match found.recheck_at {
            Some(t) => {
                self.t_loss = t;
                self.loss_timer = LossTimer::Reorder;
            }
            None if self.loss_timer == LossTimer::Reorder => self.t_loss = NEVER,
            None => {}
        }
    }

    /// Arms the tail loss probe (RFC 8985 section 7.2), after new data went out or an ACK
    /// acknowledged new data: a PTO from now, but no later than the RTO. A pending reordering
    /// timer goes first.
    fn schedule_probe(&mut self, now: Instant) {
        if self.t_loss != NEVER && self.loss_timer == LossTimer::Reorder {
            return;
        }
        if !self.probe_allowed() {
            self.t_loss = NEVER;
            return;
        }
        let flight = self.snd_max.wrapping_sub(self.snd_una);
        let pto = Rack::pto(self.have_rtt.then(|| us(self.srtt_us)), flight, self.eff_mss());
        self.t_loss = (now + pto).min(self.t_rtx);
        self.loss_timer = LossTimer::Probe;
    }

    /// A tail loss probe may go: RACK-TLP runs, data is in flight, no recovery (fast, or after
    /// an RTO) is going on, and the outcome of the last probe is known.
    fn probe_allowed(&self) -> bool {
        self.rack_on()
            && self.can_send_data()
            && self.snd_una != self.snd_max
            && !self.recovering()
            && !self.rack.probe_open()
    }

    fn on_new_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32) {
        let acked = ack.wrapping_sub(self.snd_una);
        self.bytes_acked = self.bytes_acked.saturating_add(acked);
        let flight_before = self.snd_max.wrapping_sub(self.snd_una);
        let data_end = self.data_end();
        let upto = seq::min(ack, data_end);
        let mut freed = false;
        if seq::gt(upto, self.tx_seq) {
            let n = upto.wrapping_sub(self.tx_seq);
            self.tx.pop(n as usize);
            self.tx_seq = upto;
            freed = true;
        }
        self.snd_una = ack;
        if seq::lt(self.snd_nxt, ack) {
            self.snd_nxt = ack;
        }
        if self.snd_urgent && seq::ge(ack, self.snd_up) {
            self.snd_urgent = false;
        }
        self.sacked.trim(ack);
        let sent_once_at = self.sent.first_sent_once();
        self.sent.acked(ack);
        self.rtt_on_ack(now, seg, ack, sent_once_at);
        self.backoff = 0;

        let mss = self.eff_mss();
        let flight = self.snd_max.wrapping_sub(self.snd_una);
        match self.recovery {
            Recovery::None => {
                self.dupacks = 0;
                // RFC 7661: grow only a window that is in use (at least half of it in flight).
                if flight_before.saturating_mul(2) >= self.cc.cwnd() {
                    self.cc.on_ack(now, acked, mss);
                }
            }
            Recovery::NewReno | Recovery::Sack if seq::ge(ack, self.recover) => {
                // Full ACK: recovery is over.
                self.recovery = Recovery::None;
                self.inflate = 0;
                self.dupacks = 0;
                self.cc.on_recovery_exit(now, flight, mss);
            }
            Recovery::NewReno => {
                // Partial ACK (RFC 6582 section 3.2 step 5): retransmit the next hole,
                // deflate by what was acknowledged, give back one SMSS if it was that much.
                self.rtx_first = true;
                let back = if acked >= mss { mss } else { 0 };
                self.inflate = (self.inflate + back).saturating_sub(acked);
            }
            Recovery::Sack => {}
        }

        // RFC 6298 section 5.2 and 5.3.
        self.t_rtx = if self.snd_una == self.snd_max { NEVER } else { now + self.rto() };
        if self.snd_una == self.snd_max {
            self.t_loss = NEVER;
        }

        if freed
            && self.write_blocked
            && matches!(self.state, State::Established | State::CloseWait)
            && !self.fin_queued
            && self.tx_writable()
        {
            self.write_blocked = false;
            self.events |= EV_WRITABLE;
        }

        if self.fin_acked() {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    self.t_rtx = NEVER;
                    if self.rcv_closed {
                        self.t_idle = now + ms(self.p.fin_wait2_ms);
                    }
                }
                State::Closing => self.enter_time_wait(now),
                State::LastAck => self.enter_closed(),
                _ => {}
            }
        }
    }

    /// An RTT sample from this ACK: from the echoed timestamp if timestamps are on (RFC 7323
    /// section 4), else from the one timed segment if it was not retransmitted (Karn's rule).
    ///
    /// Karn's rule applies to timestamps too, in one case: when the original of a
    /// retransmitted segment had arrived and only its ACK was lost, the peer answers the
    /// retransmission (a duplicate to it) echoing the original's TSval, and the sample would
    /// measure the RTO wait. So after a retransmission, echoes older than it are ignored until
    /// a newer one comes.
    ///
    /// With timestamps, the send time of the acknowledged data at SND.UNA (`sent_once_at`: it
    /// was sent once) measures the same as the echo, to the nanosecond rather than to our
    /// timestamp clock's millisecond, in which a sub-millisecond RTT reads 0. Linux too prefers
    /// its own send times to the echo.
    fn rtt_on_ack(&mut self, now: Instant, seg: &TcpRepr, ack: u32, sent_once_at: Option<Instant>) {
        let sample = if self.ts_ok {
            let echo = match seg.timestamp {
                Some((_, tsecr)) if self.ts_rtx_pending && seq::lt(tsecr, self.ts_rtx) => None,
                Some((_, tsecr)) if tsecr != 0 => {
                    self.ts_rtx_pending = false;
                    let d = self.ts_now(now).wrapping_sub(tsecr);
                    ((d as i32) >= 0).then(|| u64::from(d) * MILLISECOND)
                }
                _ => None,
            };
            sent_once_at.map(|t| now.saturating_sub(t)).or(echo)
        } else if self.rtt_timing && seq::ge(ack, self.rtt_seq) {
            self.rtt_timing = false;
            Some(now.saturating_sub(self.rtt_start))
        } else {
            None
        };
        if let Some(r) = sample {
            self.rtt_sample(r);
        }
    }

    /// RFC 6298 section 2.
    fn rtt_sample(&mut self, r: Duration) {
        self.rack.rtt_sample(r);
        let r = (r / 1000).min(u64::from(u32::MAX)) as u32;
        if self.have_rtt {
            let delta = self.srtt_us.abs_diff(r);
            self.rttvar_us = ((3 * u64::from(self.rttvar_us) + u64::from(delta)) / 4) as u32;
            self.srtt_us = ((7 * u64::from(self.srtt_us) + u64::from(r)) / 8) as u32;
        } else {
            self.srtt_us = r;
            self.rttvar_us = r / 2;
            self.have_rtt = true;
        }
        let rto = u64::from(self.srtt_us) + CLOCK_GRANULARITY_US.max(4 * u64::from(self.rttvar_us));
        self.rto_us = rto.clamp(u64::from(self.p.rto_min_us), u64::from(self.p.rto_max_us)) as u32;
        self.cc.on_rtt_update(us(self.srtt_us));
    }

    /// Data and FIN of an acceptable segment starting at `seq`.
    fn process_text(&mut self, now: Instant, mut seq: u32, payload: &[u8], mut fin: bool) {
        let mut data = payload;
        // Trim what we already have.
        if seq::lt(seq, self.rcv_nxt) {
            let skip = self.rcv_nxt.wrapping_sub(seq) as usize;
            let end = seq.wrapping_add(data.len() as u32 + u32::from(fin));
            // Its head is a duplicate (RFC 2883).
            self.report_duplicate(seq, seq::min(end, self.rcv_nxt));
            if end != seq && seq::le(end, self.rcv_nxt) {
                // Nothing new: a retransmission, answered at once (Linux too, SACK or not).
                self.ack_now = true;
            }
            if skip >= data.len() {
                fin = fin && skip == data.len();
                data = &[];
            } else {
                data = &data[skip..];
            }
            seq = self.rcv_nxt;
        }
        // Trim what is beyond the window (a bare FIN at the edge is kept, like Linux).
        let room = if seq::gt(self.rcv_adv, seq) { self.rcv_adv.wrapping_sub(seq) as usize } else { 0 };
        if data.len() > room {
            data = &data[..room];
            fin = false;
            self.ack_now = true;
        }
        if data.is_empty() && !fin {
            return;
        }
        if !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) {
            return;
        }
        if self.rcv_closed && !data.is_empty() {
            // Linux: data for a closed socket resets the connection.
            self.rst = Some(Rst { seq: self.snd_max, ack: Some(self.rcv_nxt) });
            self.enter_closed();
            return;
        }
        if !data.is_empty() {
            if self.seg_ce && self.ecn_ok {
                // RFC 3168 section 6.1.3: congestion on the path. Echo it with ECE until the
                // peer's CWR, and ACK at once the first time (Linux: the sender's window may be
                // small enough that a delayed ACK stalls it).
                self.ack_now |= !self.ecn_echo;
                self.ecn_echo = true;
            }
            // At least the window promised: it may have been offered under a larger buffer.
            self.rx.ensure(self.rx_cap().max(self.rcv_wnd() as usize));
            let off = seq.wrapping_sub(self.rcv_nxt) as usize;
            let len = data.len() as u32;
            self.rcv_mss = self.rcv_mss.max(data.len().min(usize::from(self.p.mss)) as u16);
            if off == 0 {
                let had_ooo = !self.ooo.is_empty();
                let at = self.rx.len();
                self.rx.write_at(at, data);
                self.rx.extend(data.len());
                let nxt = self.ooo.advance(self.rcv_nxt.wrapping_add(len));
                self.rx.extend(nxt.wrapping_sub(self.rcv_nxt.wrapping_add(len)) as usize);
                self.rcv_nxt = nxt;
                self.rcv_unacked = self.rcv_unacked.saturating_add(len);
                self.events |= EV_READABLE;
                if had_ooo || self.rcv_unacked >= 2 * u32::from(self.rcv_mss) {
                    // A filled hole, or the second full-sized segment (RFC 5681 4.2).
                    self.ack_now = true;
                } else if self.t_delack == NEVER {
                    self.t_delack = now + us(self.p.delayed_ack_us);
                }
            } else {
                // Out-of-order data we already hold is a duplicate too (RFC 2883 section 4.1.2).
                if let Some((start, end)) = self.ooo.overlap(seq, seq.wrapping_add(len)) {
                    self.report_duplicate(start, end);
                }
                if self.ooo.add(seq, seq.wrapping_add(len)) {
                    let at = self.rx.len() + off;
                    self.rx.write_at(at, data);
                }
                // Out of order: a duplicate ACK (with SACK blocks) at once (RFC 5681 4.2).
                self.ack_now = true;
            }
        }
        if fin {
            let fin_seq = seq.wrapping_add(data.len() as u32);
            if seq::gt(fin_seq, self.rcv_nxt) {
                self.rcv_fin = fin_seq;
                self.rcv_fin_set = true;
                self.ack_now = true;
            } else if fin_seq == self.rcv_nxt {
                self.receive_fin(now);
            }
        }
        if self.rcv_fin_set && self.rcv_fin == self.rcv_nxt {
            self.receive_fin(now);
        }
    }

    fn receive_fin(&mut self, now: Instant) {
        self.rcv_fin_set = false;
        self.fin_received = true;
        self.rcv_nxt = self.rcv_nxt.wrapping_add(1);
        self.ooo.clear();
        self.ack_now = true;
        self.events |= EV_READ_CLOSED;
        match self.state {
            State::Established => self.state = State::CloseWait,
            State::FinWait1 => self.state = State::Closing,
            State::FinWait2 => self.enter_time_wait(now),
            _ => {}
        }
    }

    /// After the application read: announce a window that opened enough (receiver-side SWS
    /// avoidance, RFC 9293 3.8.6.2.2; Linux's `tcp_cleanup_rbuf` rule: the current window is
    /// at most half the buffer and the new one at least doubles it).
    fn window_update_after_read(&mut self) {
        if !matches!(self.state, State::Established | State::FinWait1 | State::FinWait2) || self.fin_received {
            return;
        }
        let cur = self.rcv_wnd();
        let adv = self.rcv_buf_adv();
        let g = 1u32 << self.rcv_wscale;
        let cand = adv.saturating_sub(self.rx.len() as u32) & !(g - 1);
        let thresh = (adv / 2).min(u32::from(self.p.mss)).max(1);
        if cur <= adv / 2 && cand >= cur.saturating_mul(2) && cand >= cur + thresh {
            self.ack_now = true;
        }
    }

    // ---------------------------------------------------------------------------------------
    // Timers
    // ---------------------------------------------------------------------------------------

    /// Runs the timers due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.t_delack <= now {
            self.t_delack = NEVER;
            self.ack_now = true;
        }
        // Before the RTO: a probe due with it takes its place (and re-arms it).
        if self.t_loss <= now {
            self.t_loss = NEVER;
            self.on_loss_timer(now);
        }
        if self.t_rtx <= now {
            self.t_rtx = NEVER;
            self.on_rtx_timer(now);
        }
        if self.t_idle <= now {
            self.t_idle = NEVER;
            self.on_idle_timer(now);
        }
    }

    fn on_rtx_timer(&mut self, now: Instant) {
        match self.state {
            State::SynSent | State::SynReceived => {
                let limit = if self.state == State::SynSent { self.p.syn_retries } else { self.p.synack_retries };
                if self.backoff >= limit {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.backoff += 1;
                self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
                self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
                self.syn_retransmitted = true;
                self.rtt_timing = false;
                self.snd_nxt = self.iss;
                self.t_rtx = now + self.rto();
            }
            State::Established | State::FinWait1 | State::CloseWait | State::Closing | State::LastAck => {
                if self.snd_una != self.snd_max {
                    self.on_rto(now);
                } else if self.has_unsent_data() {
                    self.on_persist(now);
                }
            }
            _ => {}
        }
    }

    /// RACK's reordering timer (detect losses again) or the tail loss probe timeout.
    fn on_loss_timer(&mut self, now: Instant) {
        if !self.can_send_data() || self.snd_una == self.snd_max {
            return;
        }
        match self.loss_timer {
            LossTimer::Reorder => {
                self.rack_detect_loss(now);
                self.recover_if_lost(now);
                self.schedule_probe(now);
            }
            LossTimer::Probe => {
                self.send_probe = self.probe_allowed();
                // RFC 8985 section 7.3: after a probe, the RTO is armed, not the PTO.
                self.t_rtx = now + self.rto();
            }
        }
    }

    /// RFC 6298 section 5.4 to 5.7 with RFC 5681's loss window: go back to SND.UNA.
    fn on_rto(&mut self, now: Instant) {
        if self.backoff >= self.p.retries2 {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        self.counters.timeouts = self.counters.timeouts.wrapping_add(1);
        // Everything goes again from SND.UNA: no loss marks, no probe, no reordering timer.
        self.sent.clear_marks();
        self.rack.end_probe();
        self.t_loss = NEVER;
        let mss = self.eff_mss();
        let flight = self.snd_max.wrapping_sub(self.snd_una);
        self.cc.on_retransmission_timeout(now, flight, mss, self.backoff == 0);
        self.ecn_window_reduced();
        if self.backoff >= 1 {
            // A second timeout in a row: maybe the receiver reneged on what it SACKed (RFC
            // 2018 section 8); send everything again.
            self.sacked.clear();
        }
        self.recovery = Recovery::None;
        self.inflate = 0;
        self.dupacks = 0;
        self.recover = self.snd_max;
        self.rtx_first = false;
        self.rtt_timing = false;
        self.backoff = self.backoff.saturating_add(1);
        self.snd_nxt = self.snd_una;
        self.t_rtx = now + self.rto();
    }

    /// The persist timer (RFC 9293 3.8.6.1): probe a zero window, or send into a small one
    /// that sender-side SWS avoidance held back.
    fn on_persist(&mut self, now: Instant) {
        if self.probes >= self.p.retries2 {
            self.fail(Error::TimedOut, EV_TIMED_OUT);
            return;
        }
        if self.snd_wnd_room() > 0 {
            self.force_send = true;
        } else {
            self.probe = true;
            self.probes = self.probes.saturating_add(1);
        }
        self.persist_backoff = self.persist_backoff.saturating_add(1);
        self.t_rtx = now + self.persist_interval();
    }

    fn on_idle_timer(&mut self, now: Instant) {
        match self.state {
            State::TimeWait => self.enter_closed(),
            State::FinWait2 if self.rcv_closed => self.enter_closed(),
            State::Established | State::CloseWait if self.p.keepalive => {
                // RFC 1122 4.2.3.6, Linux's rules: only when nothing is outstanding.
                if self.snd_una != self.snd_max || self.has_unsent_data() {
                    self.t_idle = now + ms(self.p.ka_idle_ms);
                    return;
                }
                if self.ka_probes >= self.p.ka_count {
                    self.fail(Error::TimedOut, EV_TIMED_OUT);
                    return;
                }
                self.probe = true;
                self.ka_probes += 1;
                self.t_idle = now + ms(self.p.ka_interval_ms);
            }
            _ => {}
        }
    }

    /// Arms the persist timer when data waits, nothing is in flight and no timer runs.
    fn arm_persist(&mut self, now: Instant) {
        if self.can_send_data()
            && self.snd_una == self.snd_max
            && self.t_rtx == NEVER
            && self.has_unsent_data()
            && self.snd_wnd_room() < self.eff_mss()
        {
            self.t_rtx = now + self.persist_interval();
        }
    }

    // ---------------------------------------------------------------------------------------
    // Output
    // ---------------------------------------------------------------------------------------

    /// The next segment to send, if any: its header, with its payload copied into `payload`
    /// (`payload_len` bytes; pass a buffer of at least the MSS). Call until `None`.
    pub fn poll_transmit(&mut self, now: Instant, payload: &mut [u8]) -> Option<TcpRepr> {
        self.tx_ect = false;
        if let Some(rst) = self.rst.take() {
            return Some(self.make_rst(rst));
        }
        match self.state {
            State::Closed => return None,
            State::SynSent => {
                return (self.snd_nxt == self.iss).then(|| self.send_syn(now));
            }
            State::SynReceived if self.snd_nxt == self.iss => return Some(self.send_syn(now)),
            _ => {}
        }
        if self.can_send_data() {
            if let Some(repr) = self.transmit_data(now, payload) {
                return Some(repr);
            }
        }
        // An ACK that is owed goes before a probe, in a segment of its own. A probe is made to
        // be unacceptable (SEG.SEQ = SND.UNA - 1, left of the peer's window): the peer answers
        // it but does not look at its ACK field (RFC 9293 3.10.7.4; Linux drops it too). An
        // ACK, or a window update, that rode only on the probe would be lost: if the persist
        // timer keeps firing just as the peer's retransmissions arrive (both back off from the
        // same RTO), the peer never learns that its data arrived, and both sides wait forever
        // on each other's zero window. A delayed ACK counts: the probe would cancel its timer.
        if self.ack_now || self.challenge || (self.probe && self.t_delack != NEVER) {
            let seq = self.snd_max;
            return Some(self.emit(now, seq, 0, false, payload));
        }
        if self.probe {
            self.probe = false;
            let seq = self.snd_una.wrapping_sub(1);
            return Some(self.emit(now, seq, 0, false, payload));
        }
        self.arm_persist(now);
        None
    }

    fn make_rst(&self, rst: Rst) -> TcpRepr {
        TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq_number: rst.seq,
            ack_number: rst.ack,
            flags: if rst.ack.is_some() { TcpFlags::RST | TcpFlags::ACK } else { TcpFlags::RST },
            window_len: 0,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 4],
            timestamp: None,
            payload_len: 0,
            urgent_at: 0,
        }
    }

    /// Our SYN (SYN-SENT) or SYN-ACK (SYN-RECEIVED), first or again.
    fn send_syn(&mut self, now: Instant) -> TcpRepr {
        let synack = self.state == State::SynReceived;
        let (ws, sack, ts) = if synack {
            (self.ws_ok, self.sack_ok, self.ts_ok)
        } else {
            (self.p.offer_ws, self.p.offer_sack, self.p.offer_ts)
        };
        let wnd = self.syn_window();
        // RFC 3168 section 6.1.1: an ECN-setup SYN carries ECE and CWR, the SYN-ACK that
        // accepts it ECE alone. A SYN sent again does not ask (section 6.1.1.1: a middlebox may
        // drop it; Linux `tcp_ecn_clear_syn`), though a SYN-ACK that accepts still counts.
        let ecn = match (synack, self.ecn_ok) {
            (true, true) => TcpFlags::ECE,
            (false, true) if self.backoff == 0 => TcpFlags::ECE | TcpFlags::CWR,
            _ => TcpFlags::empty(),
        };
        let repr = TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq_number: self.iss,
            ack_number: synack.then_some(self.rcv_nxt),
            flags: ecn | if synack { TcpFlags::SYN | TcpFlags::ACK } else { TcpFlags::SYN },
            window_len: wnd as u16,
            window_scale: ws.then_some(self.rcv_wscale),
            max_seg_size: Some(self.p.mss),
            sack_permitted: sack,
            sack_ranges: [None; 4],
            timestamp: ts.then(|| (self.ts_now(now), if synack { self.ts_recent } else { 0 })),
            payload_len: 0,
            urgent_at: 0,
        };
        self.snd_nxt = self.iss.wrapping_add(1);
        self.snd_max = self.snd_nxt;
        if self.backoff == 0 {
            self.rtt_timing = true;
            self.rtt_seq = self.snd_nxt;
            self.rtt_start = now;
        } else {
            self.retransmitted(now);
        }
        self.t_rtx = now + self.rto();
        if synack {
            self.rcv_adv = seq::max(self.rcv_adv, self.rcv_nxt.wrapping_add(wnd));
            self.ack_sent();
        }
        repr
    }

    /// Retransmissions and new data, in RFC 6675 NextSeg order when in SACK recovery.
    fn transmit_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpRepr> {
        if buf.is_empty() {
            // No room for data (the caller should pass at least the MSS): only control
            // segments, so that a caller polling until `None` always gets there.
            return None;
        }
        if std::mem::take(&mut self.send_probe) {
            if let Some(repr) = self.transmit_probe(now, buf) {
                return Some(repr);
            }
        }
        if self.rtx_first {
            self.rtx_first = false;
            if seq::lt(self.snd_una, self.snd_max) {
                let seq = self.snd_una;
                let limit = self.sacked.next_start_after(seq).map_or(usize::MAX, |s| s.wrapping_sub(seq) as usize);
                return Some(self.retransmit(now, seq, limit, buf));
            }
        }
        if self.recovery == Recovery::Sack {
            let mss = self.eff_mss();
            if self.cc.cwnd().saturating_sub(self.pipe()) < mss {
                return None;
            }
            // Rule 1: the first un-SACKed range deemed lost and not sent again.
            if let Some((s, e)) = self.sent.next_lost(&self.sacked) {
                return Some(self.retransmit(now, s, e.wrapping_sub(s) as usize, buf));
            }
            // Rule 2: new data.
            if let Some(repr) = self.transmit_new(now, buf, false) {
                return Some(repr);
            }
            // Rule 3: an un-SACKed range below the highest SACKed one, neither lost nor sent
            // again.
            let high = self.sacked.highest()?;
            let (s, e) = self.sent.next_unmarked_below(&self.sacked, high)?;
            return Some(self.retransmit(now, s, e.wrapping_sub(s) as usize, buf));
        }
        self.transmit_new(now, buf, false)
    }

    /// The tail loss probe (RFC 8985 section 7.3): a new segment if the peer's window has room
    /// (the congestion window does not count), else the last segment again, unless the peer
    /// SACKed it.
    fn transmit_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<TcpRepr> {
        if !self.probe_allowed() {
            return None;
        }
        let (repr, retransmitted) = match self.transmit_new(now, buf, true) {
            Some(repr) => (repr, false),
            None => {
                let data_end = self.data_end();
                let last = data_end.wrapping_sub(self.eff_mss().min(data_end.wrapping_sub(self.snd_una)));
                if self.sacked.first_unsacked(last) == self.snd_max {
                    return None;
                }
                (self.retransmit(now, last, usize::MAX, buf), true)
            }
        };
        self.rack.probe_sent(self.snd_max, retransmitted);
        self.counters.loss_probes = self.counters.loss_probes.wrapping_add(1);
        if self.loss_timer == LossTimer::Probe {
            self.t_loss = NEVER;
        }
        Some(repr)
    }

    /// Sends again the segment at `seq` (at most `limit` bytes) without moving SND.NXT.
    fn retransmit(&mut self, now: Instant, seq: u32, limit: usize, buf: &mut [u8]) -> TcpRepr {
        let fin_sent = self.fin_queued && seq::gt(self.snd_max, self.data_end());
        let repr = self.emit(now, seq, limit, fin_sent, buf);
        let end = seq.wrapping_add(repr.segment_len() as u32);
        self.sent.retransmitted(seq, end, now);
        self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
        self.retransmitted(now);
        repr
    }

    /// Karn's rule: no RTT sample from what this retransmission makes ambiguous.
    fn retransmitted(&mut self, now: Instant) {
        self.rtt_timing = false;
        self.ts_rtx = self.ts_now(now);
        self.ts_rtx_pending = true;
    }

    /// The segment at SND.NXT: new data, or going back after an RTO (skipping what the peer
    /// SACKed). Applies the peer's window, the congestion window, sender SWS avoidance and
    /// Nagle; a `loss_probe` only the peer's window.
    fn transmit_new(&mut self, now: Instant, buf: &mut [u8], loss_probe: bool) -> Option<TcpRepr> {
        if seq::lt(self.snd_nxt, self.snd_max) {
            while let Some(end) = self.sacked.covering(self.snd_nxt) {
                self.snd_nxt = seq::min(end, self.snd_max);
                if self.snd_nxt == self.snd_max {
                    break;
                }
            }
        }
        let data_end = self.data_end();
        let avail = if seq::lt(self.snd_nxt, data_end) { data_end.wrapping_sub(self.snd_nxt) as usize } else { 0 };
        let fin_unsent = self.fin_queued && seq::le(self.snd_nxt, data_end);
        if avail == 0 && !fin_unsent {
            return None;
        }
        let is_rtx = seq::lt(self.snd_nxt, self.snd_max);
        let mss = self.data_room(buf) as usize;
        let mut cwnd_room = self.cwnd_room();
        if self.recovery == Recovery::None && !is_rtx {
            // Limited Transmit (RFC 3042): the flight may reach cwnd plus one segment for each
            // of the first two duplicate ACKs, so that small windows still produce three of
            // them. (Added to the room instead, it gave one more segment on every call.)
            let allowed = self.cc.cwnd().saturating_add(u32::from(self.dupacks.min(2)) * self.eff_mss());
            cwnd_room = allowed.saturating_sub(self.snd_nxt.wrapping_sub(self.snd_una));
        }
        if loss_probe {
            cwnd_room = cwnd_room.max(mss as u32);
        }
        let mut wnd_room = self.snd_wnd_room() as usize;
        if is_rtx && self.snd_nxt == self.snd_una {
            // The first segment after an RTO goes even if the peer shrank its window to zero:
            // the retransmission doubles as a window probe (RFC 9293 3.8.6.1; Linux too). Only
            // what was sent before goes beyond the window, not new data after it.
            let sent = self.snd_max.wrapping_sub(self.snd_nxt) as usize;
            wnd_room = wnd_room.max(mss.min(sent));
        }
        let mut len = avail.min(mss).min(wnd_room).min(cwnd_room as usize);
        if is_rtx {
            // Going back after an RTO: stop before what the peer SACKed.
            if let Some(next) = self.sacked.next_start_after(self.snd_nxt) {
                len = len.min(next.wrapping_sub(self.snd_nxt) as usize);
            }
        }
        let force = core::mem::take(&mut self.force_send) || loss_probe;
        if len == 0 {
            // A FIN alone needs no window (Linux accepts a bare FIN into a zero window).
            if avail > 0 {
                return None;
            }
        } else if !is_rtx && !force && len < mss {
            if len < avail {
                // Sender SWS avoidance (RFC 9293 3.8.6.2.1): no small segment unless it is
                // half the largest window the peer offered.
                let wnd_limited = len == wnd_room;
                if !(wnd_limited && len >= self.max_snd_wnd as usize / 2) {
                    return None;
                }
            } else if !self.p.nodelay && !fin_unsent && !self.snd_urgent && self.snd_max != self.snd_una {
                // Nagle (RFC 896, RFC 1122 4.2.3.4): one small segment in flight at a time
                // (urgent data is not held back: Linux's `tcp_nagle_test`).
                return None;
            }
        }
        let seq = self.snd_nxt;
        let was_idle = self.snd_una == self.snd_max;
        let mut repr = self.emit(now, seq, len, fin_unsent, buf);
        if !is_rtx && repr.payload_len > 0 && self.ecn_ok {
            // RFC 3168 section 6.1.2: new data is ECN-capable; the first after a window
            // reduction says so with CWR.
            self.tx_ect = true;
            if core::mem::take(&mut self.ecn_cwr_pending) {
                repr.flags |= TcpFlags::CWR;
            }
        }
        let sent = repr.segment_len() as u32;
        let old_max = self.snd_max;
        self.snd_nxt = seq.wrapping_add(sent);
        if seq::gt(self.snd_nxt, self.snd_max) {
            self.snd_max = self.snd_nxt;
            // Going back after an RTO, a segment may reach beyond what was sent before.
            self.sent.sent_new(old_max, self.snd_max, now);
        }
        if is_rtx {
            self.sent.retransmitted(seq, seq::min(self.snd_nxt, old_max), now);
            self.counters.retransmits = self.counters.retransmits.wrapping_add(1);
            self.retransmitted(now);
        } else {
            if !self.rtt_timing && !self.ts_ok && sent > 0 {
                self.rtt_timing = true;
                self.rtt_seq = self.snd_nxt;
                self.rtt_start = now;
            }
        }
        if was_idle || self.t_rtx == NEVER {
            self.t_rtx = now + self.rto();
        }
        if !is_rtx && !loss_probe {
            self.schedule_probe(now);
        }
        Some(repr)
    }

    /// Payload room of a data segment sent now: the MSS less the options it will carry.
    fn data_room(&self, buf: &[u8]) -> u32 {
        let header = self.header(0, 0).header_len();
        let base = usize::from(self.mss_cap()) + HEADER_LEN;
        (base.saturating_sub(header).max(1).min(buf.len())) as u32
    }

    /// A header with ACK, our options for a synchronized state, and no window yet.
    fn header(&self, now: Instant, seq: u32) -> TcpRepr {
        TcpRepr {
            src_port: self.local_port,
            dst_port: self.remote_port,
            seq_number: seq,
            ack_number: Some(self.rcv_nxt),
            // RFC 3168 section 6.1.3: every segment echoes congestion until the peer's CWR.
            flags: if self.ecn_echo { TcpFlags::ACK | TcpFlags::ECE } else { TcpFlags::ACK },
            window_len: 0,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: self.sack_blocks(),
            timestamp: self.ts_ok.then(|| (self.ts_now(now), self.ts_recent)),
            payload_len: 0,
            urgent_at: 0,
        }
    }

    /// SACK blocks for our out-of-order data, most recent first (RFC 2018 section 4), after a
    /// D-SACK block if data arrived twice (RFC 2883 section 4): 4 fit in the options, 3 next
    /// to timestamps.
    fn sack_blocks(&self) -> [Option<(u32, u32)>; 4] {
        let mut blocks = if self.sack_ok { self.ooo.blocks() } else { [None; 4] };
        if self.sack_ok && self.dsack.0 != self.dsack.1 {
            blocks.copy_within(0..3, 1);
            blocks[0] = Some(self.dsack);
        }
        if self.ts_ok {
            blocks[3] = None;
        }
        blocks
    }

    /// A segment at `seq` with up to `max_len` bytes from the send buffer, and the FIN if
    /// `fin_ok` and the data reaches it.
    fn emit(&mut self, now: Instant, seq: u32, max_len: usize, fin_ok: bool, buf: &mut [u8]) -> TcpRepr {
        let mut repr = self.header(now, seq);
        let room = (usize::from(self.mss_cap()) + HEADER_LEN).saturating_sub(repr.header_len()).max(1);
        let data_end = self.data_end();
        let avail =
            if seq::ge(seq, self.tx_seq) && seq::lt(seq, data_end) { data_end.wrapping_sub(seq) as usize } else { 0 };
        let len = avail.min(max_len).min(room).min(buf.len());
        if len > 0 {
            self.tx.read_at(seq.wrapping_sub(self.tx_seq) as usize, &mut buf[..len]);
            repr.payload_len = len;
        }
        let end = seq.wrapping_add(len as u32);
        if len > 0 && end == data_end {
            repr.flags |= TcpFlags::PSH;
        }
        if fin_ok && self.fin_queued && end == data_end && seq::ge(seq, self.tx_seq) {
            repr.flags |= TcpFlags::FIN;
        }
        if self.snd_urgent && seq::lt(seq, self.snd_up) {
            // Every segment before SND.UP says where urgent data ends, probes and pure ACKs
            // too; a pointer beyond what the 16-bit field reaches is sent as 0xFFFF while that
            // points past everything sent (Linux's `tcp_transmit_skb`).
            let up = self.snd_up.wrapping_sub(seq);
            if up <= 0xffff {
                repr.flags |= TcpFlags::URG;
                repr.urgent_at = up as u16;
            } else if seq::gt(seq.wrapping_add(0xffff), self.snd_nxt) {
                repr.flags |= TcpFlags::URG;
                repr.urgent_at = 0xffff;
            }
        }
        repr.window_len = self.select_window();
        self.ack_sent();
        repr
    }

    /// The window field to send, in units of our scale. The right edge never moves left: when
    /// the buffer has less room than we promised, the promise stands, rounded up to the scale
    /// unit, which the ring's slack absorbs. Only a peer that keeps sending segments smaller
    /// than the scale unit into a full buffer can exhaust the slack; then the edge is rounded
    /// down (a retraction of less than one unit, which RFC 7323 appendix F allows for). The
    /// edge moves right only by at least min(buffer / 2, MSS) (receiver SWS avoidance, RFC
    /// 9293 3.8.6.2.2).
    fn select_window(&mut self) -> u16 {
        let shift = u32::from(self.rcv_wscale);
        let g = 1u32 << shift;
        let adv = self.rcv_buf_adv();
        let used = self.rx.len() as u32;
        let cand = adv.saturating_sub(used) & !(g - 1);
        let cur = self.rcv_wnd();
        let thresh = (adv / 2).min(u32::from(self.p.mss)).max(1);
        let wnd = if cand > cur && (cand - cur >= thresh || cand == (adv & !(g - 1))) { cand } else { cur };
        let ring = if self.rx.is_allocated() { self.rx.capacity() } else { self.rx_cap() };
        let phys = (ring as u32).saturating_sub(used);
        let mut field = ((u64::from(wnd) + u64::from(g) - 1) >> shift).min(0xffff) as u32;
        if field << shift > phys {
            // Rounding up would promise more than the ring holds: round down instead.
            field = wnd >> shift;
        }
        let edge = self.rcv_nxt.wrapping_add(field << shift);
        if seq::gt(edge, self.rcv_adv) {
            self.rcv_adv = edge;
        }
        field as u16
    }

    /// Bookkeeping for a segment that carries our ACK.
    fn ack_sent(&mut self) {
        self.last_ack_sent = self.rcv_nxt;
        self.ack_now = false;
        self.dsack = (0, 0); // reported once (RFC 2883 section 4)
        self.challenge = false;
        self.t_delack = NEVER;
        self.rcv_unacked = 0;
    }
}

impl Connection {
    /// What a [`crate::TimeWait`] entry keeps.
    pub(crate) fn time_wait_parts(&self) -> crate::time_wait::TimeWaitParts {
        let field = (self.rcv_wnd() >> self.rcv_wscale).min(0xffff) as u16;
        crate::time_wait::TimeWaitParts {
            deadline: self.t_idle,
            time_wait: ms(self.p.time_wait_ms),
            snd_nxt: self.snd_max,
            rcv_nxt: self.rcv_nxt,
            ts_recent: self.ts_recent,
            ts_offset: self.ts_offset,
            window: field,
            ts_ok: self.ts_ok,
        }
    }
}
