//! What a connection is configured with. A `Config` is copied into each connection at creation
//! (in a compact form); the stack keeps one per listener or per socket.

use crate::congestion::CongestionAlgorithm;
use crate::time::{Duration, MILLISECOND, SECOND};

/// Keepalive (RFC 1122 section 4.2.3.6), the meaning of Linux's `TCP_KEEPIDLE`,
/// `TCP_KEEPINTVL` and `TCP_KEEPCNT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keepalive {
    /// Time without receiving anything before the first probe (Linux: 7200 s).
    pub idle: Duration,
    /// Time between unanswered probes (Linux: 75 s).
    pub interval: Duration,
    /// Unanswered probes after which the connection times out (Linux: 9).
    pub count: u8,
}

impl Default for Keepalive {
    fn default() -> Self {
        Keepalive { idle: 7200 * SECOND, interval: 75 * SECOND, count: 9 }
    }
}

/// When a connection uses Explicit Congestion Notification (RFC 3168): the meanings of Linux's
/// `net.ipv4.tcp_ecn` (0, 1, 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ecn {
    /// 0: never; an ECN-setup SYN is answered as a plain one.
    Off,
    /// 1: ask for it in the SYNs we send, and accept it when the peer's SYN asks.
    On,
    /// 2 (Linux's default): accept it when the peer's SYN asks; never ask.
    #[default]
    Accept,
}

impl Ecn {
    /// The mode of Linux's `tcp_ecn` value `v` (0, 1 or 2).
    pub const fn from_sysctl(v: u8) -> Option<Ecn> {
        match v {
            0 => Some(Ecn::Off),
            1 => Some(Ecn::On),
            2 => Some(Ecn::Accept),
            _ => None,
        }
    }
}

/// Connection parameters. `Default` gives Linux's defaults where Linux has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The MSS we announce: the largest payload we can receive, from our MTU (MTU - 40 for IPv4,
    /// MTU - 60 for IPv6). Also caps what we send.
    pub mss: u16,
    /// Receive buffer in bytes: the most we advertise (65535 without window scaling).
    pub rcv_buf: u32,
    /// Send buffer in bytes.
    pub snd_buf: u32,
    /// The most autotuning grows the receive buffer to (Linux's `tcp_rmem[2]`); it also chooses
    /// the window scale we offer. At or below `rcv_buf` (the default) the size is fixed.
    pub rcv_buf_max: u32,
    /// The most autotuning grows the send buffer to (Linux's `tcp_wmem[2]`). At or below
    /// `snd_buf` (the default) the size is fixed.
    pub snd_buf_max: u32,
    /// `TCP_NODELAY`: no Nagle.
    pub nodelay: bool,
    /// Offer window scaling (RFC 7323).
    pub window_scale: bool,
    /// Offer timestamps (RFC 7323).
    pub timestamps: bool,
    /// Offer SACK (RFC 2018).
    pub sack: bool,
    /// Delayed-ACK timeout (Linux's minimum ATO: 40 ms).
    pub delayed_ack: Duration,
    /// Lower bound of the RTO (Linux: 200 ms).
    pub rto_min: Duration,
    /// Upper bound of the RTO (Linux: 120 s).
    pub rto_max: Duration,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub rto_initial: Duration,
    /// SYN retransmissions before an active open fails (Linux `tcp_syn_retries`: 6).
    pub syn_retries: u8,
    /// SYN-ACK retransmissions before a passive open is dropped (Linux `tcp_synack_retries`: 5).
    pub synack_retries: u8,
    /// Consecutive RTOs (or unanswered zero-window probes) before an established connection
    /// fails with `TimedOut` (Linux `tcp_retries2`: 15, which Linux turns into a time; here it
    /// is a count).
    pub retries2: u8,
    /// Retransmissions and zero-window probes of an orphaned connection (closed by the
    /// application, still sending) before it gives up (Linux `tcp_orphan_retries`, default 0).
    /// As in Linux's `tcp_orphan_retries()`, 0 means 8 while the backed-off interval is below
    /// `rto_max`; once it has reached `rto_max` the connection gives up after this many (so at
    /// once with 0), even while the peer keeps answering probes with a zero window.
    pub orphan_retries: u8,
    /// Keepalive, off by default (`SO_KEEPALIVE`).
    pub keepalive: Option<Keepalive>,
    /// TIME-WAIT duration, 2*MSL (Linux: 60 s).
    pub time_wait: Duration,
    /// How long a connection closed by the application waits in FIN-WAIT-2 for the peer's FIN
    /// (Linux `tcp_fin_timeout`: 60 s).
    pub fin_wait2_timeout: Duration,
    /// Initial congestion window in segments (RFC 6928: 10).
    pub initial_cwnd: u32,
    /// ECN (RFC 3168), as Linux's `tcp_ecn` (default: accept when asked).
    pub ecn: Ecn,
    /// At most one challenge ACK (RFC 5961), and one ACK of an out-of-window or PAWS-rejected
    /// segment without data, per this interval per connection (Linux `tcp_invalid_ratelimit`:
    /// 500 ms). Segments with data are always answered: they are no ACK loop.
    pub invalid_ratelimit: Duration,
    /// Congestion control (Linux `tcp_congestion_control`: CUBIC).
    pub congestion: CongestionAlgorithm,
    /// RACK-TLP loss detection (RFC 8985) where the peer does SACK: losses found by time and
    /// tail losses by a probe, instead of by duplicate-ACK counting (RFC 6675's IsLost) and
    /// the RTO. Linux: `tcp_recovery` bit 1 and `tcp_early_retrans` 3, both on by default.
    pub rack_tlp: bool,
    /// Added to our timestamp clock (ms since the caller's time origin). Linux uses a keyed hash
    /// of the addresses so that values are not guessable yet grow across connections between the
    /// same hosts; the stack chooses it per connection (this crate has no randomness).
    pub ts_offset: u32,
    /// TCP segmentation offload: the NIC cuts what it is given into MSS-sized segments, so new
    /// data goes out in segments of several MSS (up to the buffer `poll_transmit` is given,
    /// sized as Linux's `tcp_tso_autosize`). Retransmissions and probes stay one MSS.
    pub tso: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss: 1460,
            rcv_buf: 128 * 1024,
            snd_buf: 128 * 1024,
            rcv_buf_max: 0,
            snd_buf_max: 0,
            nodelay: false,
            window_scale: true,
            timestamps: true,
            sack: true,
            delayed_ack: 40 * MILLISECOND,
            rto_min: 200 * MILLISECOND,
            rto_max: 120 * SECOND,
            rto_initial: SECOND,
            syn_retries: 6,
            synack_retries: 5,
            retries2: 15,
            orphan_retries: 0,
            keepalive: None,
            time_wait: 60 * SECOND,
            fin_wait2_timeout: 60 * SECOND,
            initial_cwnd: 10,
            ecn: Ecn::Accept,
            invalid_ratelimit: 500 * MILLISECOND,
            congestion: CongestionAlgorithm::Cubic,
            rack_tlp: true,
            ts_offset: 0,
            tso: false,
        }
    }
}
